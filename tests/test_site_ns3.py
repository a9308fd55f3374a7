"""The ns3 site: the experiment as an ns-3 scenario (netrepro.sites.ns3.site) and real simulations
with netrepro-sim built against the pinned ns-3 wheel (installed by `make setup SITE=ns3`,
which `make test` runs)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from conftest import assert_exports_and_reads_back

from analysis import analyze_run
from analysis.summary import trial_statistics
from analysis.tidy import trial_tidy
from analysis.raw import parse_flows, parse_ping
from netrepro.sites.ns3 import stacks as ns3_stacks
from netrepro.runner import run, steps, trialvars
from netrepro.cli.step_commands import judge_trial
from netrepro.sites.ns3 import site as ns3
from netrepro.sites.base import SiteError
from netrepro.experiment.spec import Spec, load_spec

REPO = Path(__file__).resolve().parent.parent
DATA = REPO / "tests" / "data"
#: pie-vs-red in schema_version 2 (a copy of the draft): the same experiment as the flagship file.
PIE_VS_RED_V2 = DATA / "experiments" / "pie-vs-red-v2.yml"


def _tv(spec, aqm="pie", variant="limited", time_scale=0.1, **more):
    """The trial vars the controller gives ``simulate`` (netrepro.runner.run.run: trial_vars, then the
    instance's id, trial, time scale and repetition)."""
    trial = f"{aqm}-{variant}"
    return {**trialvars.trial_vars(spec, spec.model.trial(trial), time_scale, Path("/nonexistent"), 2.0),
            "id": trial, "trial": trial, "time_scale": time_scale, **more}


def _scenario(spec, trial, time_scale=0.1, epoch0=1000.0, repetition=3):
    return ns3.scenario(spec.model, spec.model.trial(trial), time_scale, epoch0, repetition)


# --- the scenario (no simulation) -------------------------------------------------------------------
def test_the_linux_red_weight_is_tc_reds():
    # iproute2 tc_red_eval_ewma: a = burst + 1 - min/avpkt = 56 + 1 - 33.3 = 23.67; the least
    # Wlog with a <= (1 - (1 - W)^56) / W, W = 2^-Wlog: Wlog 4 gives 14.9, Wlog 5 gives 26.2
    assert ns3_stacks.tc_red_eval_ewma(50000, 56, 1500) == 5
    with pytest.raises(ValueError, match="burst 20 is too small for min 30000 B / avpkt 1000 B"):
        ns3_stacks.tc_red_eval_ewma(30000, 20, 1000)


def test_pie_vs_red_becomes_a_scenario_with_the_papers_parameters():
    spec = load_spec("pie-vs-red")
    text = _scenario(spec, "pie-limited")
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
    red = _scenario(spec, "red-unlimited", epoch0=0.0, repetition=1)
    q = next(ln for ln in red.splitlines() if ln.startswith("qdisc "))
    for kv in ("MaxSize=200000B", "MinTh=50000", "MaxTh=150000", "QW=0.03125", "LInterm=10", "Gentle=false",
               "Wait=false"):
        assert kv in q.split()
    assert "flows server1 client1 10.10.2.1 10 3.500 28.500 0 client1/flows.csv" in red  # unlimited


@pytest.mark.parametrize("trial", ["pie-unlimited", "red-unlimited", "pie-limited", "red-limited"])
def test_pie_vs_red_gives_the_same_scenario_as_before(trial):
    """The scenario of each trial from pie-vs-red's model (the test copy and experiments/
    pie-vs-red) is the text the site wrote from the version 1 file's own fields before it read
    the model (tests/data/ns3/, recorded then)."""
    before = (DATA / "ns3" / f"pie-vs-red-{trial}-0.1-r3.scenario.txt").read_text()
    draft, flagship = load_spec(PIE_VS_RED_V2), load_spec("pie-vs-red")
    assert _scenario(draft, trial) == before
    assert _scenario(flagship, trial) == before
    assert ns3.unmodelled(draft) == [] and ns3.unmodelled(flagship) == []


def test_the_scenario_follows_the_models_stacks_not_an_experiments_names():
    """A v2 trial's stacks: a TBF alone is the link's rate and its byte FIFO; a pfifo under an
    HTB; the sampled port's leaf and its handle (given, or 1:, 2:, ... down the stack)."""
    data = yaml.safe_load(PIE_VS_RED_V2.read_text())
    t = data["trials"]
    t[0]["qdiscs"]["router:eth1"] = [{"kind": "tbf", "rate_mbit": 20, "burst_bytes": 15000, "limit_bytes": 30000}]
    t[1]["qdiscs"]["router:eth1"][1]["bandwidth_mbit"] = 5
    t[1]["qdiscs"]["router:eth1"][0]["rate_mbit"] = 5
    t[2]["qdiscs"]["router:eth1"] = [{"kind": "htb", "rate_mbit": 10}, {"kind": "pfifo", "limit_packets": 50}]
    data.pop("sweep")
    spec = Spec.from_data(data, "x.yml")
    assert ns3.unmodelled(spec) == []
    tbf = _scenario(spec, "pie-unlimited").splitlines()
    assert "link router lan-clients_lan 20000000 0 1" in tbf
    assert "qdisc router lan-clients_lan ns3::FifoQueueDisc MaxSize=30000B" in tbf
    assert "sample router lan-clients_lan 0.1 3.500 29.000 router/qdisc.jsonl clients_lan 1: tbf" in tbf
    red = _scenario(spec, "red-unlimited")
    assert "link router lan-clients_lan 5000000 0 1" in red and "LinkBandwidth=5Mbps" in red
    fifo = _scenario(spec, "pie-limited").splitlines()
    assert "qdisc router lan-clients_lan ns3::FifoQueueDisc MaxSize=50p" in fifo
    assert "sample router lan-clients_lan 0.1 3.500 29.000 router/qdisc.jsonl clients_lan 2: pfifo" in fifo


def test_the_sampled_ports_sent_bytes_are_analysed_whatever_its_device_is_called(tmp_path):
    """ns3 has no devices: its sampler labels each qdisc.jsonl line with the port's data-plane
    key (``clients_lan``), as a testbed's labels them with the machine's own device name (found
    by address). The generic analysis reads the collector's sent bytes from the node's one
    qdisc.jsonl under any label, as it reads its backlog: the bottleneck's sent_utilization, which
    pie-vs-red's third claim compares, is there (10 Mbit/s sent through the 10 Mbit/s HTB: 1)."""
    spec = load_spec("pie-vs-red")
    trial = spec.model.trial("pie-unlimited")
    sample = next(ln.split() for ln in _scenario(spec, "pie-unlimited").splitlines() if ln.startswith("sample "))
    assert sample[1] == "router" and sample[7] == "clients_lan"   # not the model's eth1
    d = tmp_path / "run" / "raw" / trial.id / "router"
    d.mkdir(parents=True)
    # one sample every 0.1 s from the trial's start (epoch 100) to past its 25 s at TIME_SCALE
    # 0.1, 125000 B sent in each: 10 Mbit/s
    d.joinpath("qdisc.jsonl").write_text("".join(
        json.dumps({"t": 100 + i / 10, "dev": sample[7], "tx_bytes": 125000 * i, "tx_packets": 90 * i,
                    "qdisc": [{"kind": "htb", "handle": "1:", "root": True, "backlog": 0, "qlen": 0, "drops": 0},
                              {"kind": "pie", "handle": "10:", "parent": "1:10", "backlog": 3000, "qlen": 2, "drops": 0}]})
        + "\n" for i in range(260)))
    problems: list[str] = []
    tidy, ends = trial_tidy(spec.model, trial, {"start_epoch_s": 100.0}, d.parent, 0.1, problems)
    assert len(tidy[(tidy["subject"] == "router:eth1") & (tidy["metric"] == "tx_bytes")]) >= 250
    phases = [{**p, "start_s": p["start_s"] * 0.1, "end_s": p["end_s"] * 0.1} for p in spec.model.data["phases"]]
    sent = {r["phase"]: r["value"] for r in trial_statistics(spec.model, trial, tidy, ends, phases, 0.1)
            if r["subject"] == "router:eth1" and r["statistic"] == "sent_utilization"}
    assert set(sent) == {"all", "p1", "p2", "p3", "p4", "p5"} and all(v == pytest.approx(1.0) for v in sent.values()), sent


def test_what_ns3_cannot_model_is_refused_naming_it():
    data = yaml.safe_load(PIE_VS_RED_V2.read_text())
    data.pop("sweep")  # it varies PIE's target, which an fq_codel has not
    t = data["trials"]
    t[0]["qdiscs"]["router:eth1"][1] = {"kind": "cake"}
    t[1]["qdiscs"]["router:eth1"].insert(1, {"kind": "tbf", "rate_mbit": 5, "burst_bytes": 5000, "limit_bytes": 9000})
    t[2]["qdiscs"]["client1:eth1"] = [{"kind": "netem", "delay_ms": 100, "jitter_ms": 5}]
    t[2]["qdiscs"]["router:eth1"][1] = {"kind": "fq_codel", "quantum_bytes": 300}
    data["sysctls"][0]["set"]["net.ipv4.tcp_congestion_control"] = "vegas"
    data["sysctls"][0]["set"]["net.core.default_qdisc"] = "fq"
    data["traffic"][0] = {"kind": "iperf3", "id": "group1", "from": "server1", "to": "client1", "duration_s": 250,
                          "congestion": "vegas"}
    assert ns3.unmodelled(Spec.from_data(data, "x.yml")) == [
        "trials[0].qdiscs.router:eth1[1].kind: 'cake' has no model in the simulation "
        "(modelled: netem, htb, tbf, pie, red, codel, fq_codel, fq, pfifo, bfifo)",
        "trials[0].sysctls.server1.net.ipv4.tcp_congestion_control: 'vegas' (modelled: reno, cubic, bbr)",
        "trials[0].sysctls.server1.net.core.default_qdisc: no model in the simulation",
        "trials[0].sysctls.server2.net.ipv4.tcp_congestion_control: 'vegas' (modelled: reno, cubic, bbr)",
        "trials[0].sysctls.server2.net.core.default_qdisc: no model in the simulation",
        "trials[0].sysctls.server3.net.ipv4.tcp_congestion_control: 'vegas' (modelled: reno, cubic, bbr)",
        "trials[0].sysctls.server3.net.core.default_qdisc: no model in the simulation",
        "trials[0].traffic[0].congestion: 'vegas' (modelled: reno, cubic, bbr)",
        "trials[1].qdiscs.router:eth1[1]: a tbf under htb (the simulation makes one shaper, the stack's root or "
        "netem's child, the port's link rate)",
        "trials[2].qdiscs.router:eth1[1].quantum_bytes: fq_codel's quantum_bytes has no model in the simulation",
        "trials[2].qdiscs.client1:eth1[0].jitter_ms: netem's jitter_ms has no model in the simulation"]
    # every experiment of the project and of the tests is simulated
    for name in ("pie-vs-red", "pie-lab", "codel-lab", "pacing-lab"):
        assert ns3.unmodelled(load_spec(name)) == [], name
    for f in sorted((DATA / "experiments").glob("*.yml")):
        assert ns3.unmodelled(load_spec(str(f))) == [], f.name


def test_an_unmodelled_experiment_gets_one_line_and_exit_2(tmp_path):
    """gateway-fifo with cake at its gateway (no ns-3 queue disc): one line naming the file and
    the field, exit 2, and no run folder."""
    data = yaml.safe_load((DATA / "experiments" / "gateway-fifo.yml").read_text())
    data["qdiscs"]["gw:gw-b"] = [{"kind": "cake", "bandwidth_mbit": 20}]
    data["trials"] = [{k: v for k, v in t.items() if k != "qdiscs"} for t in data["trials"]]
    f = tmp_path / "cake.yml"
    f.write_text(yaml.safe_dump(data))
    p = subprocess.run([sys.executable, "-m", "netrepro", "reproduce", str(f), "--site", "ns3"], cwd=REPO,
                       capture_output=True, text=True,
                       env={**os.environ, "NETREPRO_STATE": str(tmp_path / "s"), "NETREPRO_RESULTS": str(tmp_path / "r")})
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip().splitlines() == [
        f"netrepro: site ns3: {f}: cannot be simulated: trials[0].qdiscs.gw:gw-b[0].kind: 'cake' has no model in "
        "the simulation (modelled: netem, htb, tbf, pie, red, codel, fq_codel, fq, pfifo, bfifo)"]
    assert not (tmp_path / "r").exists()


def test_a_dry_run_refuses_what_the_run_refuses(tmp_path):
    """``--dry-run`` makes the check the run makes before anything is built
    (netrepro.runner.instances.dry_run: Site.checked_options, which calls refuse_experiment): an
    experiment with a cake qdisc, which the simulation never models, gets the run's line and
    exit status from ``run`` and ``reproduce`` alike, and nothing is written; an experiment the
    simulation models is still listed, trial by trial."""
    data = yaml.safe_load((DATA / "experiments" / "gateway-fifo.yml").read_text())
    data["trials"][0]["qdiscs"]["gw:gw-b"][1] = {"kind": "cake"}
    cake = tmp_path / "cake.yml"
    cake.write_text(yaml.safe_dump(data, sort_keys=False))
    assert load_spec(cake).model.trial("bytes")  # the file is valid: the site refuses it, not the schema
    state, results = tmp_path / "s", tmp_path / "r"
    env = {**os.environ, "NETREPRO_STATE": str(state), "NETREPRO_RESULTS": str(results)}
    inventory = sorted(p.name for p in (REPO / "inventory").iterdir())

    def netrepro(*argv):
        return subprocess.run([sys.executable, "-m", "netrepro", *argv], cwd=REPO, capture_output=True, text=True,
                              env=env, timeout=300)

    for command in ("run", "reproduce"):
        real = netrepro(command, str(cake), "--site", "ns3")
        dry = netrepro(command, str(cake), "--site", "ns3", "--dry-run")
        assert real.returncode == 2 and real.stdout == "", (command, real.stdout, real.stderr)
        [line] = real.stderr.strip().splitlines()
        assert line.startswith(f"netrepro: site ns3: {cake}: cannot be simulated: ")
        assert "trials[0].qdiscs.gw:gw-b[1].kind: 'cake' has no model in the simulation" in line
        assert (dry.returncode, dry.stdout, dry.stderr) == (real.returncode, real.stdout, real.stderr), command
    assert not state.exists() and not results.exists()
    assert sorted(p.name for p in (REPO / "inventory").iterdir()) == inventory

    ok = netrepro("reproduce", str(PIE_VS_RED_V2), "--site", "ns3", "--dry-run", "--no-shuffle")
    assert ok.returncode == 0 and ok.stderr == "", ok.stderr
    lines = ok.stdout.splitlines()
    listed = [re.match(r"\s+\d+\. (\S+) ", ln)[1] for ln in lines[1:-1]]
    assert listed == [t.id for t in load_spec(PIE_VS_RED_V2).model.trials]
    assert " simulated + overhead), " in lines[-1] and lines[-1].endswith("; nothing was run or written")
    assert not state.exists() and not results.exists()


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
    assert flows[0] == "flow,server,file,start_epoch_s,end_epoch_s,exit_code,bytes,data_start_s" and len(flows) == 21
    # the first byte a handshake after the flow's start: at least one base RTT (100 ms), and
    # well within the phase
    data_start = parse_flows("\n".join(flows) + "\n")["data_start_s"]
    assert data_start.between(0.1, 2.0).all(), list(data_start)
    line = json.loads((out / "router" / "qdisc.jsonl").read_text().splitlines()[100])
    assert line["qdisc"][0]["kind"] == "red" and line["qdisc"][0]["handle"] == "10:" and line["tx_bytes"] > 0


def test_two_files_of_pie_vs_red_give_the_same_simulation(simulator, tmp_path, monkeypatch):
    """One short trial (RED, 25 kB/s sources, TIME_SCALE 0.05) simulated from the flagship file
    and from its test copy: the same files, byte for byte (the same start time for both, so
    that the time stamps agree)."""
    outs = []
    for name, spec in (("flagship", load_spec("pie-vs-red")), ("copy", load_spec(PIE_VS_RED_V2))):
        site = ns3.Ns3Site(spec, tmp_path / name / "state")
        site.reserve()
        monkeypatch.setattr(ns3.time, "time", lambda: 1_800_000_000.0)
        sim = site.simulate(spec, _tv(spec, aqm="red", variant="limited", time_scale=0.05, repetition=2),
                            tmp_path / name / "out")
        monkeypatch.undo()
        outs.append((tmp_path / name / "out", sim))
    (a, sim_a), (b, sim_b) = outs
    files = sorted(str(f.relative_to(a)) for f in a.rglob("*") if f.is_file())
    assert files == sorted(str(f.relative_to(b)) for f in b.rglob("*") if f.is_file())
    assert {"scenario.txt", "router/qdisc.jsonl", "client3/ping.txt", "client3/flows.csv"} <= set(files)
    assert len((a / "client1" / "ping.txt").read_text().splitlines()) > 100
    for f in files:
        assert (a / f).read_bytes() == (b / f).read_bytes(), f
    assert sim_a["start_epoch_s"] == sim_b["start_epoch_s"] and sim_a["scenario_sha256"] == sim_b["scenario_sha256"]


def test_a_simulator_that_dies_of_a_signal_is_named_with_it(simulator, tmp_path):
    """A crash of the simulator reads as one (ns-3 3.44's zero-window probe died of SIGSEGV,
    which the run reported as "exit -11"): a program in its place that kills itself so."""
    spec = load_spec("pie-vs-red")
    site = ns3.Ns3Site(spec, tmp_path / "state")
    site.reserve()
    crash = tmp_path / "crash.sh"
    crash.write_text("#!/bin/sh\nkill -SEGV $$\n")
    crash.chmod(0o755)
    site.save_state({**site.load_state(), "simulator": str(crash)})
    with pytest.raises(SiteError, match=r"^site ns3: netrepro-sim failed \(killed by SIGSEGV\): no message$"):
        site.simulate(spec, _tv(spec), tmp_path / "out")


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


def _phase_delays_ms(out: Path, spec, time_scale: float) -> list[float]:
    """Median queueing delay (ping RTT - the client's median base RTT, ms) of each phase (at
    ``time_scale``), over the three clients' pings of a simulated trial in ``out``."""
    phases = [{"start_s": p["start_s"] * time_scale, "end_s": p["end_s"] * time_scale} for p in spec.model.data["phases"]]
    start = ns3.trial_start_s(spec.model, time_scale) + float(re.search(r"^epoch0 (\S+)$", (out / "scenario.txt").read_text(), re.M)[1])
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
    p1, p2, p3, p4, p5 = _phase_delays_ms(tmp_path / "out", spec, 0.2)
    assert p3 - p4 >= 10 and p4 - p5 >= 15 and abs(p5 - p1) <= 10, (p1, p2, p3, p4, p5)


def test_pie_vs_red_reproduces_on_ns3_with_the_same_analysis(ns3_up, offline, tmp_path):
    spec = ns3_up
    run_dir = run.run(spec, "ns3", 0.1, progress_tty=False, judge=judge_trial)
    verdict = analyze_run(run_dir)
    steps.down(spec, "ns3")
    assert_exports_and_reads_back(run_dir, tmp_path / "export")
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["mode"] == "simulation" and all(t["simulated"] for t in meta["trials"])
    assert {t["id"] for t in meta["trials"]} == set(spec.trial_ids)
    for t in meta["trials"]:
        checks = {c["id"]: c for c in t["health"]["checks"]}
        assert checks["nodes_cpu_busy"]["passed"] is None and "not applicable: a simulated trial" in checks["nodes_cpu_busy"]["detail"]
        assert checks["ping_received"]["passed"] is True and checks["flow_start_lag"]["value"] == 0
        assert (run_dir / "raw" / t["id"] / "scenario.txt").is_file()
    # the simulated links keep their rate; FTP's data start one round trip after the flows, or a
    # SYN's retransmission timeout later when the loaded queue dropped it
    for t in meta["trials"]:
        checks = {c["id"]: c for c in t["health"]["checks"]}
        assert checks["shaper_rate_off"]["passed"] is True and checks["shaper_rate_off"]["value"] <= 0.01
        assert checks["data_start_lag"]["passed"] is True and 0 < checks["data_start_lag"]["value"] < 0.25
    # TIME_SCALE 0.1 is shorter than the file's time_scale.min (0.25): every claim is not
    # applicable and says why, so the verdict is inconclusive; the numbers are there all the
    # same (deterministic at run number 1)
    assert [(c["id"], c["status"]) for c in verdict["claims"]] == [
        ("pie-near-target", "not applicable"), ("red-follows-load", "not applicable"),
        ("red-above-pie-under-load", "not applicable")]
    assert all("time scale 0.1 is shorter than 0.25" in c["reason"] for c in verdict["claims"])
    assert verdict["verdict"] == "inconclusive"


# --- several trials simulated at once (--jobs) ------------------------------------------------------
#: Two trials of pie-vs-red, twice each, in the file's order: pie-unlimited.r1, red-limited.r1,
#: pie-unlimited.r2, red-limited.r2. pie-unlimited takes about twice red-limited's CPU, so with
#: two at once red-limited.r1 is simulated before pie-unlimited.r1 and must wait to be recorded.
JOBS_TRIALS = ["pie-unlimited", "red-limited"]
JOBS_ORDER = ["pie-unlimited.r1", "red-limited.r1", "pie-unlimited.r2", "red-limited.r2"]


@pytest.fixture
def ns3_up(simulator, tmp_path, monkeypatch):
    """pie-vs-red on a provisioned ns3 site, its state and results under tmp_path."""
    monkeypatch.setattr(steps, "STATE_ROOT", tmp_path / "state")
    monkeypatch.setenv("NETREPRO_RESULTS", str(tmp_path / "results"))
    spec = load_spec("pie-vs-red")
    steps.up(spec, "ns3")
    steps.provision(spec, "ns3")
    return spec


def _jobs_run(spec, jobs, **more):
    return run.run(spec, "ns3", 0.02, trial_ids=JOBS_TRIALS, repeat=2, shuffle=False, progress_tty=False,
                   judge=judge_trial, jobs=jobs, **more)


def _raw_files(run_dir: Path, strip_times: bool = False) -> dict[str, bytes]:
    """Every raw file of a run (path under raw/ -> content); ``strip_times``: each Unix time
    stamp (10 digits and a fraction: ping -D, the samples' "t", flows.csv, the scenario's
    epoch0) replaced by "T"."""
    out = {}
    for f in sorted((run_dir / "raw").rglob("*")):
        if f.is_file():
            data = f.read_bytes()
            out[str(f.relative_to(run_dir / "raw"))] = re.sub(rb"\b1[0-9]{9}\.[0-9]+", b"T", data) if strip_times else data
    return out


def test_trials_simulated_two_at_once_give_what_one_at_a_time_gives(ns3_up, monkeypatch):
    """A simulated trial's randomness is its repetition (ns-3's run number), not the order or
    company it ran in: the same four instances run one at a time (--jobs 1) and two at once
    (--jobs 2) give the same summary.csv and the same raw files, byte for byte, and run.json
    lists the trials in the same order.

    Each simulation starts at a whole second of the wall clock (epoch0), so that a sample on a
    phase's edge (every 0.1 s sample at TIME_SCALE 0.02, whose phases last 1 s) rounds into
    the same phase in every run: a third run, at another second, analyses to the same
    summary.csv, and its raw files differ only in their time stamps."""
    spec = ns3_up
    epoch0, clock = float(int(time.time())), ns3.time
    monkeypatch.setattr(ns3, "time", SimpleNamespace(time=lambda: epoch0))
    serial = _jobs_run(spec, 1)
    parallel = _jobs_run(spec, 2)
    monkeypatch.setattr(ns3, "time", SimpleNamespace(time=lambda: epoch0 + 12345.678))
    real_clock = _jobs_run(spec, 2)
    monkeypatch.setattr(ns3, "time", clock)
    metas = [json.loads((d / "run.json").read_text()) for d in (serial, parallel, real_clock)]
    for d in (serial, parallel, real_clock):
        analyze_run(d)
    assert (serial / "summary.csv").read_bytes() == (parallel / "summary.csv").read_bytes()
    assert (serial / "summary.csv").read_bytes() == (real_clock / "summary.csv").read_bytes()
    assert len((serial / "summary.csv").read_text().splitlines()) > 400
    assert _raw_files(serial) == _raw_files(parallel)
    assert len(_raw_files(serial)) == 4 * 11  # scenario.txt, the router's samples, each client's pings, base RTT, flows
    assert _raw_files(serial, strip_times=True) == _raw_files(real_clock, strip_times=True)
    assert _raw_files(real_clock) != _raw_files(serial)  # the time stamps differ
    for meta, jobs in zip(metas, (1, 2, 2)):
        assert meta["jobs"] == jobs and [t["jobs"] for t in meta["trials"]] == [jobs] * 4
        assert [t["id"] for t in meta["trials"]] == JOBS_ORDER == [s["id"] for s in meta["trial_status"]]
        assert [t["repetition"] for t in meta["trials"]] == [1, 1, 2, 2]
        # judged as the model's trial of each instance (<trial>.r<k>): the FTP flows' start lag
        # is measured, not "no trial 'pie-limited.r1' in the experiment"
        lag = [next(c for c in t["health"]["checks"] if c["id"] == "flow_start_lag") for t in meta["trials"]]
        assert all(c["passed"] is True and c["value"] is not None for c in lag), lag
        assert all(s["status"] == "complete" and len(s["attempts"]) == 1 for s in meta["trial_status"])
    # two at once, really: the second instance began before the first one was recorded
    first, second = (s["attempts"][0] for s in metas[1]["trial_status"][:2])
    assert second["started_at"] < first["ended_at"]
    first, second = (s["attempts"][0] for s in metas[0]["trial_status"][:2])
    assert first["ended_at"] <= second["started_at"]


def test_a_failed_simulation_stops_the_run_after_those_before_it(ns3_up, monkeypatch):
    """Two at once, the second instance's simulation fails at once: the first, still running,
    is simulated to its end and recorded; no other instance begins; the run stops at the
    failed one as a serial run does, and its resume runs the rest two at once, in order."""
    spec = ns3_up
    real = ns3.Ns3Site.simulate

    def simulate(self, spec, tv, out_dir):
        if tv["id"] == JOBS_ORDER[1]:
            raise SiteError("site ns3: netrepro-sim failed (exit 1): injected")
        return real(self, spec, tv, out_dir)

    monkeypatch.setattr(ns3.Ns3Site, "simulate", simulate)
    with pytest.raises(run.StepIncomplete) as exc:
        _jobs_run(spec, 2)
    run_dir = exc.value.run_dir
    assert exc.value.exit_code == 2
    meta = json.loads((run_dir / "run.json").read_text())
    assert [t["id"] for t in meta["trials"]] == JOBS_ORDER[:1]
    st = {s["id"]: s for s in meta["trial_status"]}
    assert [st[i]["status"] for i in JOBS_ORDER] == ["complete", "failed", "pending", "pending"]
    assert st[JOBS_ORDER[1]]["reason"] == "site ns3: netrepro-sim failed (exit 1): injected"
    assert st[JOBS_ORDER[2]]["attempts"] == [] and st[JOBS_ORDER[3]]["attempts"] == []
    assert (run_dir / "INCOMPLETE").read_text().startswith(f"run INCOMPLETE at trial {JOBS_ORDER[1]}: ")
    assert sorted(p.name for p in (run_dir / "raw").iterdir()) == JOBS_ORDER[:1] and not (run_dir / ".fetch").exists()
    monkeypatch.setattr(ns3.Ns3Site, "simulate", real)
    assert run.run(spec, "ns3", None, resume=run_dir, progress_tty=False, judge=judge_trial, jobs=2) == run_dir
    meta = json.loads((run_dir / "run.json").read_text())
    assert [t["id"] for t in meta["trials"]] == JOBS_ORDER and not (run_dir / "INCOMPLETE").exists()
    assert meta["jobs"] == 2 and meta["resumes"][0]["jobs"] == 2


def test_instances_begun_after_a_failed_one_are_stopped_and_discarded(ns3_up, monkeypatch):
    """Two at once, the first instance fails while the second is simulating: the second's
    simulator is stopped and its attempt discarded (recorded as failed, not its data), and
    it runs again on resume."""
    spec = ns3_up
    real = ns3.Ns3Site.simulate

    def simulate(self, spec, tv, out_dir):
        if tv["id"] == JOBS_ORDER[0]:  # fail once the second one's scenario is written
            second = out_dir.parent.parent / JOBS_ORDER[1] / "nodes" / "scenario.txt"
            deadline = time.time() + 30
            while not second.exists() and time.time() < deadline:
                time.sleep(0.001)
            raise SiteError("site ns3: netrepro-sim failed (exit 1): injected")
        return real(self, spec, tv, out_dir)

    monkeypatch.setattr(ns3.Ns3Site, "simulate", simulate)
    with pytest.raises(run.StepIncomplete) as exc:
        _jobs_run(spec, 2)
    meta = json.loads((exc.value.run_dir / "run.json").read_text())
    st = {s["id"]: s for s in meta["trial_status"]}
    assert meta["trials"] == [] and [st[i]["status"] for i in JOBS_ORDER] == ["failed", "failed", "pending", "pending"]
    assert st[JOBS_ORDER[1]]["reason"] == f"not recorded: the run stopped at trial {JOBS_ORDER[0]}"
    assert [a["status"] for a in st[JOBS_ORDER[1]]["attempts"]] == ["failed"]
    assert not (exc.value.run_dir / "raw").exists() or not any((exc.value.run_dir / "raw").iterdir())


def _simulators_of(root: Path) -> list[int]:
    """The pids of the netrepro-sim processes whose scenario is under ``root``."""
    pids = []
    for p in Path("/proc").iterdir():
        try:
            argv = (p / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv and Path(argv[0].decode(errors="replace")).name.startswith("netrepro-sim-") \
                and any(str(root).encode() in a for a in argv[1:]):
            pids.append(int(p.name))
    return pids


def test_sigterm_stops_every_running_simulator_and_the_run_resumes(simulator, tmp_path):
    """SIGTERM to `netrepro run --jobs 2` while two simulators run: both are stopped, the run
    ends with 128 + 15, INCOMPLETE at the first instance not recorded with the resume hint, as
    a serial run stopped so; resumed, it completes in order."""
    env = {**os.environ, "NETREPRO_STATE": str(tmp_path / "state"), "NETREPRO_RESULTS": str(tmp_path / "results"),
           "PYTHONPATH": str(REPO)}
    for step in ("up", "provision"):
        subprocess.run([sys.executable, "-m", "netrepro", step, "pie-vs-red", "--site", "ns3"], cwd=REPO, env=env,
                       check=True, capture_output=True)
    argv = [sys.executable, "-m", "netrepro", "run", "pie-vs-red", "--site", "ns3", "--time-scale", "0.3",
            "--trial", "pie-unlimited", "--trial", "red-unlimited", "--jobs", "2"]
    p = subprocess.Popen(argv, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines = []
    while sum(": simulating (" in ln for ln in lines) < 2:
        line = p.stdout.readline()
        assert line, (lines, p.stderr.read())
        lines.append(line)
    deadline = time.time() + 10
    while len(_simulators_of(tmp_path / "results")) < 2 and time.time() < deadline:
        time.sleep(0.01)
    running = _simulators_of(tmp_path / "results")
    assert len(running) == 2, lines
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 128 + 15, (out, err)
    assert _simulators_of(tmp_path / "results") == [] and not any(Path(f"/proc/{pid}").exists() for pid in running)
    [line] = err.strip().splitlines()
    run_dir = next((tmp_path / "results" / "pie-vs-red").iterdir())
    assert line.startswith("netrepro: run INCOMPLETE at trial pie-unlimited (interrupted by SIGTERM); 0 of 2 trials kept")
    assert line.endswith(f"resume with: netrepro run pie-vs-red --site ns3 --resume {run_dir}")
    meta = json.loads((run_dir / "run.json").read_text())
    assert [(s["id"], s["status"], s["reason"]) for s in meta["trial_status"]] == [
        ("pie-unlimited", "failed", "interrupted by SIGTERM"), ("red-unlimited", "failed", "interrupted by SIGTERM")]
    assert meta["trials"] == [] and not (run_dir / ".fetch").exists()
    assert (run_dir / "INCOMPLETE").read_text().startswith("run INCOMPLETE at trial pie-unlimited: interrupted by SIGTERM\n")
    done = subprocess.run([sys.executable, "-m", "netrepro", "run", "pie-vs-red", "--site", "ns3", "--resume",
                           str(run_dir), "--jobs", "2"], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    meta = json.loads((run_dir / "run.json").read_text())
    assert [t["id"] for t in meta["trials"]] == ["pie-unlimited", "red-unlimited"]
    assert [len(s["attempts"]) for s in meta["trial_status"]] == [2, 2] and not (run_dir / "INCOMPLETE").exists()


def test_a_sites_subprocess_is_stopped_from_another_thread(tmp_path):
    """Site.run_subprocess (Ns3Site.simulate runs netrepro-sim with it) runs to the end as
    subprocess.run does; stop_subprocesses, from another thread, ends a running one at once
    (SIGTERM) and starts no more."""
    import threading
    site = ns3.Ns3Site(load_spec("pie-vs-red"), tmp_path / "state")
    assert site.run_subprocess(["sh", "-c", "echo out; echo err >&2; exit 3"]).returncode == 3
    done = site.run_subprocess(["sh", "-c", "echo out; echo err >&2"])
    assert (done.returncode, done.stdout, done.stderr) == (0, "out\n", "err\n")
    got = {}
    t = threading.Thread(target=lambda: got.update(p=site.run_subprocess(["sleep", "60"])))
    t0 = time.time()
    t.start()
    while not site._children and time.time() - t0 < 10:
        time.sleep(0.01)
    assert site.stop_subprocesses() == 1
    t.join(10)
    assert got["p"].returncode == -15 and time.time() - t0 < 10
    with pytest.raises(SiteError, match="site ns3: stopped; sleep was not started"):
        site.run_subprocess(["sleep", "1"])


def _scaled_gateway(path: Path) -> Path:
    """gateway-fifo made to allow rate scaling (its byte FIFO trial only: a packet FIFO's
    limit is a packet count, which the rate scale keeps, so its queueing delay would not), its
    throughput and backlog claims following k (``rate_scaling: proportional``)."""
    data = yaml.safe_load((DATA / "experiments" / "gateway-fifo.yml").read_text())
    data["name"] = "gateway-scaled"
    data["trials"] = [t for t in data["trials"] if t["id"] == "bytes"]
    data["rate_scale"] = {"allowed": True, "min": 0.25,
                          "note": "the gateway's rate and its FIFO's byte limit follow k; the delays do not"}
    for c in data["claims"]:
        c["check"]["select"]["trials"] = ["bytes"]
        if c["id"] in ("link-used", "queue-bounded"):
            c["rate_scaling"] = "proportional"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_claim_on_a_rate_gives_the_same_verdict_at_two_rate_scales(simulator, tmp_path):
    """The same experiment simulated at k = 1 and k = 0.5 (TIME_SCALE 0.5): the flows fill the
    gateway's 20 Mbit/s, then its 10, and link-used, judged with its thresholds times k, holds
    in both, as every other claim does: the same verdict. Judged as written, the k = 0.5 run's
    total throughput (about 10 Mbit/s) would have failed 15-20.5 (issue 36)."""
    f = _scaled_gateway(tmp_path / "gateway-scaled.yml")
    verdicts = {}
    for k in ("1", "0.5"):
        env = {**os.environ, "NETREPRO_STATE": str(tmp_path / f"s{k}"), "NETREPRO_RESULTS": str(tmp_path / f"r{k}")}
        p = subprocess.run([sys.executable, "-m", "netrepro", "reproduce", str(f), "--site", "ns3", "--time-scale", "0.5",
                            "--rate-scale", k], cwd=REPO, capture_output=True, text=True, env=env, timeout=900)
        assert p.returncode == 0, p.stderr[-3000:]
        run_dir = tmp_path / f"r{k}" / "gateway-scaled" / "latest"
        verdicts[k] = json.loads((run_dir / "verdict.json").read_text())
        summary = pd.read_csv(run_dir / "summary.csv")
        total = summary[(summary.statistic == "total_throughput_mbit") & (summary.phase == "all")].value.iloc[0]
        assert 15 * float(k) <= total <= 21 * float(k), (k, total)
    assert verdicts["1"]["verdict"] == verdicts["0.5"]["verdict"] == "reproduced", verdicts
    assert [c["status"] for c in verdicts["1"]["claims"]] == [c["status"] for c in verdicts["0.5"]["claims"]]
    half = {c["id"]: c for c in verdicts["0.5"]["claims"]}
    assert half["link-used"]["thresholds"] == "total_throughput_mbit at least 15 at k = 1, at least 7.5 at k = 0.5"
    assert "within [7.5, inf]" in half["link-used"]["evidence"]
    assert "thresholds" not in half["delay-bounded"] and "within [-inf, 40]" in half["delay-bounded"]["evidence"]
    report = (tmp_path / "r0.5" / "gateway-scaled" / "latest" / "report.md").read_text()
    assert "thresholds follow the rate scale: total_throughput_mbit at least 15 at k = 1, at least 7.5 at k = 0.5" in report
