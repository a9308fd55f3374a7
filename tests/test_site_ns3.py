"""The ns3 site: the experiment as an ns-3 scenario (netrepro.sites.ns3) and real simulations
with netrepro-sim built against the pinned ns-3 wheel (installed by `make setup SITE=ns3`,
which `make test` runs)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis import analyze_run
from analysis.raw import parse_flows, parse_ping
from netrepro import controller
from netrepro.pipeline import judge_trial
from netrepro.sites import ns3
from netrepro.sites.base import SiteError
from netrepro.spec import Spec, load_spec

REPO = Path(__file__).resolve().parent.parent


def _tv(spec, aqm="pie", variant="limited", time_scale=0.1, **more):
    return {**controller.trial_vars(spec, {"aqm": aqm, "variant": variant}, time_scale, Path("/nonexistent"), 2.0),
            **more}


# --- the scenario (no simulation) -------------------------------------------------------------------
def test_the_linux_red_weight_is_tc_reds():
    # iproute2 tc_red_eval_ewma: a = burst + 1 - min/avpkt = 56 + 1 - 33.3 = 23.67; the least
    # Wlog with a <= (1 - (1 - W)^56) / W, W = 2^-Wlog: Wlog 4 gives 14.9, Wlog 5 gives 26.2
    assert ns3.tc_red_eval_ewma(50000, 56, 1500) == 5
    with pytest.raises(ValueError, match="burst 20 is too small for min 30000 B / avpkt 1000 B"):
        ns3.tc_red_eval_ewma(30000, 20, 1000)


def test_pie_vs_red_becomes_a_scenario_with_the_papers_parameters():
    spec = load_spec("pie-vs-red")
    text = ns3.scenario(spec, _tv(spec, repetition=3), 1000.0)
    lines = text.splitlines()
    assert "run 3" in lines and "epoch0 1000.000000" in lines
    assert "tcp ns3::TcpLinuxReno 1448 0.2 10 4194304 4194304" in lines  # Linux's reno, not NewReno
    assert "default ns3::TcpSocketBase::Sack true" in lines
    assert "default ns3::TcpSocket::DelAckTimeout 40ms" in lines  # Linux's TCP_DELACK_MIN, not ns-3's 200 ms
    # the bottleneck: the router's port on the clients' LAN at 10 Mbit/s, PIE as its queue disc
    assert "link router lan-clients_lan 10000000 0 1" in lines
    assert "link client1 lan-clients_lan 1000000000 0.05 1" in lines  # netem 100 ms -> 50 ms each way
    q = next(ln for ln in lines if ln.startswith("qdisc "))
    assert q.startswith("qdisc router lan-clients_lan ns3::PieQueueDisc ")
    for kv in ("MaxSize=134p", "QueueDelayReference=20ms", "Tupdate=30ms", "A=0.125", "B=1.25",
               "UseDequeueRateEstimator=true", "UseEcn=false"):
        assert kv in q.split()
    # 10 limited flows from server1 to client1 over the whole schedule (25 s at 0.1), 25 kB/s each
    assert "flows server1 client1 10.10.2.1 10 3.500 28.500 200000 client1/flows.csv" in lines
    assert "ping client1 server1 10.10.2.1 0.1 0 3.000 client1/base_rtt.txt" in lines
    red = ns3.scenario(spec, _tv(spec, aqm="red", variant="unlimited"), 0.0)
    q = next(ln for ln in red.splitlines() if ln.startswith("qdisc "))
    for kv in ("MaxSize=200000B", "MinTh=50000", "MaxTh=150000", "QW=0.03125", "LInterm=10", "Gentle=false",
               "Wait=false"):
        assert kv in q.split()
    assert "flows server1 client1 10.10.2.1 10 3.500 28.500 0 client1/flows.csv" in red  # unlimited


def test_what_ns3_cannot_model_is_refused_naming_it():
    data = json.loads(json.dumps(load_spec("pie-vs-red").data))
    data["aqms"]["pie"] = {"qdisc": "fq_codel", "params": {}}
    data.pop("sweep")  # it varies PIE's target, which an fq_codel has not
    data["hosts"][0]["sysctls"]["net.ipv4.tcp_congestion_control"] = "vegas"
    data["hosts"][0]["sysctls"]["net.core.default_qdisc"] = "fq"
    problems = ns3.unmodelled(Spec.from_data(data, "x.yml"))
    assert problems == ["aqms.pie.qdisc: 'fq_codel' (modelled: pie, red)",
                        "hosts[0].sysctls.net.ipv4.tcp_congestion_control: 'vegas' (modelled: reno, cubic, bbr)",
                        "hosts[0].sysctls.net.core.default_qdisc: no model in the simulation"]
    assert ns3.unmodelled(load_spec("codel-lab")) == [
        "schema_version 2 (switches, qdisc stacks, iperf3): only schema_version 1 is simulated"]


def test_an_unmodelled_experiment_gets_one_line_and_exit_2(tmp_path):
    p = subprocess.run([sys.executable, "-m", "netrepro", "reproduce", "codel-lab", "--site", "ns3"], cwd=REPO,
                       capture_output=True, text=True, env={**os.environ, "NETREPRO_STATE": str(tmp_path / "s"),
                                                            "NETREPRO_RESULTS": str(tmp_path / "r")})
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [
        "netrepro: site ns3: codel-lab is an experiment of schema_version 2 (switches, named links, qdisc stacks "
        "on any port), which this site does not build yet; run it on a site that does: local, instageni, fabric, static"]
    assert not (tmp_path / "r").exists()


# --- real simulations -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def simulator():
    """netrepro-sim, built if needed (make setup SITE=ns3 installed the wheel and g++)."""
    return ns3.build()


def test_the_same_trial_simulated_twice_gives_the_same_files_and_another_run_number_other_ones(simulator, tmp_path):
    spec = load_spec("pie-vs-red")
    site = ns3.Ns3Site(spec, tmp_path / "state")
    site.reserve()

    def pings(rep, name):
        out = tmp_path / name / "nodes"
        site.simulate(spec, _tv(spec, aqm="red", repetition=rep), out)
        text = (out / "client3" / "ping.txt").read_text()
        return re.findall(r"icmp_seq=(\d+) ttl=63 time=([0-9.]+) ms", text), out

    a, out = pings(1, "a")
    b, _ = pings(1, "b")
    c, _ = pings(2, "c")
    assert len(a) > 200 and a == b  # deterministic: the files differ only in their time stamps
    assert a != c  # repetition 2: ns-3 run number 2, other random drops
    text = (out / "client3" / "ping.txt").read_text()
    assert "packets transmitted" in text
    # ping -O: a probe still unanswered when the next goes is reported, so that every probe sent
    # is in the file (the RTT, 100 ms or more, is longer than the 0.1 s interval: most are)
    lost = {int(s) for s in re.findall(r"^\[[0-9.]+\] no answer yet for icmp_seq=(\d+)$", text, re.M)}
    answered = {int(s) for s, _ in a}
    sent = int(re.search(r"^(\d+) packets transmitted", text, re.M)[1])
    assert len(lost) > 100 and len(answered | lost) >= sent - 1, (len(lost), len(answered | lost), sent)
    flows = (out / "client2" / "flows.csv").read_text().splitlines()
    assert flows[0] == "flow,server,file,start_epoch_s,end_epoch_s,exit_code,bytes" and len(flows) == 21
    line = json.loads((out / "router" / "qdisc.jsonl").read_text().splitlines()[100])
    assert line["qdisc"][0]["kind"] == "red" and line["qdisc"][0]["handle"] == "10:" and line["tx_bytes"] > 0


def test_rate_limited_flows_keep_their_rate_with_linux_delayed_acks(simulator, tmp_path, monkeypatch):
    """The flows of p3 (50 flows offering 10 Mbit/s to RED) each get most of their 25 kB/s, as on
    Linux (docs/runs/pie-vs-red-repeat5-local-vm-2026-11-23: least 19.8 kB/s). With ns-3's own
    200 ms delayed-ACK timeout some starve in a loop of retransmission timeouts."""
    spec = load_spec("pie-vs-red")
    site = ns3.Ns3Site(spec, tmp_path / "state")
    site.reserve()

    def rates(name):
        out = tmp_path / name
        # full length (p3 lasts 50 s); run number 2: five of its flows starved with 200 ms
        tv = _tv(spec, aqm="red", time_scale=1.0, repetition=2)
        site.simulate(spec, tv, out)
        f = parse_flows((out / "client3" / "flows.csv").read_text())
        return list(f["bytes"] / (f["end_epoch_s"] - f["start_epoch_s"]))

    linux = rates("linux")
    assert len(linux) == 20 and min(linux) > 0.7 * 25000, sorted(linux)
    monkeypatch.setattr(ns3, "DELACK_TIMEOUT_S", 0.2)
    ns3_default = rates("ns3-default")
    assert min(ns3_default) < 0.5 * 25000, sorted(ns3_default)


def _phase_delays_ms(out: Path, tv: dict, phases: list[dict]) -> list[float]:
    """Median queueing delay (ping RTT - the client's median base RTT, ms) of each phase, over
    the three clients' pings of a simulated trial in ``out``."""
    start = ns3.trial_start_s(tv) + float(re.search(r"^epoch0 (\S+)$", (out / "scenario.txt").read_text(), re.M)[1])
    delays = []
    for c in ("client1", "client2", "client3"):
        base = parse_ping((out / c / "base_rtt.txt").read_text())["rtt_ms"].median()
        ping = parse_ping((out / c / "ping.txt").read_text())
        delays.append(pd.DataFrame({"t": ping["t_epoch_s"] - start, "delay": ping["rtt_ms"] - base}))
    d = pd.concat(delays)
    return [d.loc[(d["t"] >= p["start_s"]) & (d["t"] < p["end_s"]), "delay"].median() for p in phases]


def test_a_flow_ends_at_its_schedule_as_when_curl_gives_up(simulator, tmp_path):
    """RED with unlimited sources: the queue falls back in p4 and p5 as client3's and client2's
    flows end (Linux answers their next segments with a RST). ns-3's Close() would first send the
    up to 4 MiB each bulk flow has buffered, keeping RED's queue at its p3 level to the end."""
    spec = load_spec("pie-vs-red")
    site = ns3.Ns3Site(spec, tmp_path / "state")
    site.reserve()
    tv = _tv(spec, aqm="red", variant="unlimited", time_scale=0.2)
    site.simulate(spec, tv, tmp_path / "out")
    p1, p2, p3, p4, p5 = _phase_delays_ms(tmp_path / "out", tv, spec.scaled(0.2)["phases"])
    assert p3 - p4 >= 10 and p4 - p5 >= 15 and abs(p5 - p1) <= 10, (p1, p2, p3, p4, p5)


def test_pie_vs_red_reproduces_on_ns3_with_the_same_analysis(simulator, tmp_path, monkeypatch):
    monkeypatch.setattr(controller, "STATE_ROOT", tmp_path / "state")
    monkeypatch.setattr(controller, "RESULTS_ROOT", tmp_path / "results")
    spec = load_spec("pie-vs-red")
    controller.up(spec, "ns3")
    controller.provision(spec, "ns3")
    run_dir = controller.run(spec, "ns3", 0.1, progress_tty=False, judge=judge_trial)
    verdict = analyze_run(run_dir)
    controller.down(spec, "ns3")
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["mode"] == "simulation" and all(t["simulated"] for t in meta["trials"])
    assert {t["id"] for t in meta["trials"]} == set(spec.trial_ids)
    for t in meta["trials"]:
        checks = {c["id"]: c for c in t["health"]["checks"]}
        assert checks["nodes_cpu_busy"]["passed"] is None and "not applicable: a simulated trial" in checks["nodes_cpu_busy"]["detail"]
        assert checks["ping_received"]["passed"] is True and checks["flow_start_lag"]["value"] == 0
        assert (run_dir / "raw" / t["id"] / "scenario.txt").is_file()
    # deterministic at run number 1: every claim holds at TIME_SCALE 0.1, as in the full-length
    # runs of docs/runs/pie-vs-red-repeat5-ns3-fixed-2026-11-23 since the receivers ack as Linux's do
    # (ns3.DELACK_TIMEOUT_S)
    assert [(c["id"], c["status"]) for c in verdict["claims"]] == [
        ("pie-near-target", "holds"), ("red-follows-load", "holds"), ("red-above-pie-under-load", "holds")]
    assert verdict["verdict"] == "reproduced"
