"""roles/qdisc_stack: the trial's stacks per node (netrepro.experiment.rolevars.stack_vars), and its
script run for real on a veth in a namespace of this host (whose kernel has htb, tbf and
pfifo): installed root first, left alone when unchanged, installed afresh on reset."""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from netrepro import model
from netrepro.model import TrafficItem
from netrepro.experiment import rolevars
from netrepro.core import tc
from netrepro.experiment.spec import load_spec


def qdiscs(layers: list[dict]) -> list[tc.Qdisc]:
    """A stack's layers written as the experiment file writes them, as records."""
    return [tc.Qdisc.from_data(layer) for layer in layers]

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "roles" / "qdisc_stack" / "files" / "stack.sh"


def test_stack_vars_per_node():
    spec = load_spec(REPO / "tests" / "data" / "experiments" / "lab19-like.yml")
    v = model.stack_vars(spec.model, spec.model.trial("pie"))
    assert set(v) == {"h1", "h2", "h3", "s1", "s2"} and v["h1"] == []
    assert [(p["interface"], p["key"]) for p in v["s2"]] == [("s2-eth2", "s2-eth2")] and [p["interface"] for p in v["s1"]] == ["s1-eth1"]
    assert v["s2"][0]["commands"][0] == ["qdisc", "del", "dev", tc.DEV, "root"]
    assert v["s2"][0]["commands"][2][:8] == ["qdisc", "replace", "dev", tc.DEV, "parent", "1:", "handle", "2:"]


@pytest.mark.netns
def test_stack_script_installs_keeps_and_resets(tmp_path):
    if os.geteuid() != 0:
        pytest.fail("needs root (ip netns)")
    ns = f"nrqs{os.getpid()}"
    cmds = tc.stack_commands(qdiscs([{"kind": "htb", "rate_mbit": 10}, {"kind": "pfifo", "handle": "10:", "limit_packets": 50}]))
    lines = [w for c in cmds for w in [str(len(c)), *c]]  # as roles/qdisc_stack passes them

    # A tc in front of the real one that logs each call: how many processes a stack costs.
    calls, shim = tmp_path / "tc-calls", tmp_path / "bin"
    shim.mkdir()
    (shim / "tc").write_text(f'#!/bin/sh\necho "$*" >> {calls}\nexec {shutil.which("tc")} "$@"\n')
    (shim / "tc").chmod(0o755)
    env = dict(os.environ, PATH=f"{shim}:{os.environ['PATH']}")

    def run(reset: str, words: list[str] = lines) -> subprocess.CompletedProcess:
        return subprocess.run(["ip", "netns", "exec", ns, "bash", str(SCRIPT), "d0", str(tmp_path / "st"), reset, *words],
                              capture_output=True, text=True, timeout=30, env=env)

    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "add", "d0", "type", "veth", "peer", "name", "d1"], check=True)
        first = run("0")
        assert first.returncode == 0 and first.stdout.rstrip().endswith("CHANGED"), first.stderr
        q = json.loads(subprocess.run(["ip", "netns", "exec", ns, "tc", "-j", "qdisc", "show", "dev", "d0"],
                                      capture_output=True, text=True, check=True).stdout)
        assert [(x["kind"], x["handle"], x.get("parent")) for x in q] == [("htb", "1:", None), ("pfifo", "10:", "1:10")]
        again = run("0")
        assert again.returncode == 0 and "CHANGED" not in again.stdout  # idempotent
        calls.unlink()
        assert "CHANGED" in run("1").stdout  # a trial's fresh start
        # ... in three tc processes: the delete, the other three commands in one batch, the show
        assert len(cmds) == 4 and [c.split()[0] for c in calls.read_text().splitlines()] == ["qdisc", "-batch", "-j"]
        # a stack that tc refuses: the script fails, naming tc's complaint
        bad = run("0", [("banana" if w == "50" else w) for w in lines])
        assert bad.returncode != 0 and "CHANGED" not in bad.stdout and bad.stderr
        # the device changed behind its back: installed again
        subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "d0", "root"], check=True)
        assert "CHANGED" in run("0").stdout
    finally:
        subprocess.run(["ip", "netns", "del", ns])


# A network namespace of the test's own (unshare -rn), where the script's veth lives.
@pytest.mark.netns
def test_stack_script_gives_tc_each_word_whole(tmp_path):
    """stack.sh runs tc with exactly the words it is given (a count, then the words): a word
    holding spaces, ``-b FILE``, ``;`` or ``$(...)`` reaches tc as one word, and a malformed
    count is refused before tc runs."""
    marker = tmp_path / "marker"
    evil = f"10 -b {tmp_path / 'batch'};$(touch {marker})"
    good = tc.stack_commands(qdiscs([{"kind": "pfifo", "limit_packets": 50}]))
    bad = [c if "pfifo" not in c else [("" if w == "50" else w) or evil for w in c] for c in good]

    def words(cmds):
        return [w for c in cmds for w in [str(len(c)), *c]]

    code = ('ip link add d0 type veth peer name d1 || exit 9; bash "$@"; echo "rc=$?"; '
            'tc -j qdisc show dev d0')

    def run(args):
        return subprocess.run(["unshare", "-rn", "sh", "-c", code, "sh", str(SCRIPT), "d0", str(tmp_path / "st"),
                               "0", *args], capture_output=True, text=True, timeout=60)

    ok = run(words(good))
    assert "rc=0" in ok.stdout and "CHANGED" in ok.stdout, ok.stderr
    assert [(q["kind"], q["options"]["limit"]) for q in json.loads(ok.stdout.splitlines()[-1])] == [("pfifo", 50)]
    refused = run(words(bad))
    assert "rc=1" in refused.stdout and f'"{evil}"' in refused.stderr, refused.stderr  # tc quotes the one word
    assert not marker.exists()
    short = run(["9", "qdisc", "del"])
    assert "rc=2" in short.stdout and "announces 9 words, 2 are left" in short.stderr


def test_iperf3_argv_as_the_manuals_write_it():
    # Lab 12, sec. 8: `iperf3 -c 10.0.0.2 -t 30 -P 5 -J --fq-rate 1.9gbit`
    item = TrafficItem.from_data({"kind": "iperf3", "id": "x", "from": "h1", "to": "h2", "duration_s": 30, "start_s": 0,
                                  "parallel": 5, "omit_s": 0, "interval_s": 1, "port": 5201, "fq_rate_mbit": 1900})
    assert rolevars.iperf3_argv(item, "10.0.0.2") == ["-c", "10.0.0.2", "-p", "5201", "-t", "30", "-i", "1", "-P", "5",
                                                       "-O", "0", "-J", "--fq-rate", "1900M"]
    # Lab 18: bbr on h2 (-C), scaled to a tenth
    item = dataclasses.replace(item, congestion="bbr", omit_s=5, parallel=1, pacing_rate_mbit=None)
    assert rolevars.iperf3_argv(item, "10.0.0.4", 0.1)[4:] == ["-t", "3", "-i", "1", "-P", "1", "-O", "0.5", "-J",
                                                              "-C", "bbr"]


def test_the_local_site_probes_the_experiments_own_qdiscs():
    """auto mode's probe is each experiment's stacks, every distinct layer with its parameters."""
    from netrepro.sites.local.host import needed_qdisc_probes
    p = needed_qdisc_probes(load_spec("pie-vs-red").model)
    assert sorted(p) == ["htb", "netem", "pie", "red"]
    assert p["pie"] == [["qdisc", "add", "dev", "nrprobe0", "root", "pie", "limit", "134", "target", "20ms", "tupdate",
                         "30ms", "alpha", "2", "beta", "20", "noecn", "dq_rate_estimator"]]
    lab = needed_qdisc_probes(load_spec(REPO / "tests" / "data" / "experiments" / "lab19-like.yml").model)
    assert sorted(lab) == ["netem", "pie", "tbf"] and len(lab["tbf"]) == 1  # the same TBF in both trials


@pytest.mark.netns
def test_probe_on_this_host():
    """This machine's kernel has tbf but no pie (docs/sites/local.md: why the site runs in the micro-VM); the
    probe must tell them apart, or it proves nothing."""
    from netrepro.sites.local.host import probe_host_qdiscs
    if os.geteuid() != 0:
        pytest.fail("needs root (ip netns)")
    found = probe_host_qdiscs(load_spec(REPO / "tests" / "data" / "experiments" / "lab19-like.yml").model)
    assert found["tbf"] is True
    assert found["pie"] == (subprocess.run(["modinfo", "sch_pie"], capture_output=True).returncode == 0
                            or Path("/sys/module/sch_pie").exists())


def test_model_vars_of_an_experiment_unlike_pie_vs_red():
    spec = load_spec(REPO / "tests" / "data" / "experiments" / "gateway-fifo.yml")
    v = rolevars.model_vars(spec)
    assert v["nodes"] == ["gw", "swa", "swb", "a1", "a2", "b1", "b2"]
    assert v["probes"]["gw"] == {"tbf@gw-b": ["qdisc", "add", "dev", tc.DEV, "root", "tbf", "rate", "20mbit", "burst",
                                               "15000", "limit", "100000"],
                                 "bfifo@gw-b": ["qdisc", "add", "dev", tc.DEV, "root", "bfifo", "limit", "60000"],
                                 "pfifo@gw-b": ["qdisc", "add", "dev", tc.DEV, "root", "pfifo", "limit", "40"]}
    assert v["probes"]["a2"] == {"tcp_reno": ["tcp_congestion", "reno"]}  # its sysctl asks for reno
    assert v["probes"]["a1"] == {"tcp_cubic": ["tcp_congestion", "cubic"]} and v["probes"]["b1"] == {}
    assert v["offloads"] == {"tso": "off", "gso": "off", "gro": "off"}
    assert v["offload_networks"]["swa"] == ["swa-gw", "swa-1", "swa-2"]
    assert v["sysctls"]["gw"] == {"net.ipv4.ip_forward": "1"} and v["sysctls"]["a2"] == {
        "net.ipv4.tcp_congestion_control": "reno"}
    assert [p["interface"] for p in v["stacks"]["gw"]] == ["gw-b"] and v["ftp_source"] is None
    assert v["routes"]["a1"] == [{"to": "192.168.52.0/24", "via": "192.168.51.1"}]


@pytest.mark.netns
def test_the_queue_collector_samples_classes(tmp_path):
    """nr-qdisc-stats.sh --classes on a real HTB whose leaf class fills (pings of 1400 B every
    2 ms into 100 kbit/s; the socket's send buffer lets a few wait in the queue): every sample
    has the class text next to the qdiscs' JSON, and the parser finds the class with packets."""
    from analysis.raw import parse_qdisc_classes, parse_qdisc_stack
    if os.geteuid() != 0:
        pytest.fail("needs root (ip netns)")
    ns = f"nrqc{os.getpid()}"
    script = REPO / "roles" / "collectors" / "files" / "nr-qdisc-stats.sh"

    def nsrun(*argv, **kw):
        return subprocess.run(["ip", "netns", "exec", ns, *argv], capture_output=True, text=True, **kw)

    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        for c in (["link", "add", "d0", "type", "veth", "peer", "name", "d1"], ["addr", "add", "10.9.0.1/24", "dev", "d0"],
                  ["addr", "add", "10.9.0.2/24", "dev", "d1"], ["link", "set", "d0", "up"], ["link", "set", "d1", "up"]):
            subprocess.run(["ip", "-n", ns, *c], check=True)
        for c in tc.stack_commands(qdiscs([{"kind": "htb", "rate_mbit": 0.1}, {"kind": "pfifo", "limit_packets": 500}])):
            nsrun("tc", *[("d0" if w == tc.DEV else w) for w in c], check=c[1] != "del")
        import time
        now = time.time()
        col = subprocess.Popen(["ip", "netns", "exec", ns, "bash", str(script), str(tmp_path / "q.jsonl"), "d0",
                                f"{now:.6f}", f"{now + 1.0:.6f}", "0.1", "--classes"])
        # to the peer's address through d0 (a /32 route: not the local table's shortcut)
        subprocess.run(["ip", "-n", ns, "route", "add", "10.9.0.99/32", "dev", "d0"], check=True)
        subprocess.run(["ip", "-n", ns, "neigh", "add", "10.9.0.99", "lladdr", "02:00:00:00:00:99", "dev", "d0",
                        "nud", "permanent"], check=True)
        nsrun("ping", "-q", "-i", "0.002", "-c", "150", "-s", "1400", "-w", "1", "10.9.0.99")
        assert col.wait(timeout=30) == 0
        text = (tmp_path / "q.jsonl").read_text()
        lines = [json.loads(x) for x in text.splitlines()]
        assert len(lines) >= 8 and all("class htb 1:10 " in x["classes"] for x in lines)
        cl = parse_qdisc_classes(text)
        leaf = cl[cl["classid"] == "1:10"]
        assert len(leaf) == len(lines) and leaf["backlog_packets"].max() >= 3, leaf
        assert len(parse_qdisc_stack(text)) == len(lines)  # the qdiscs' JSON still read
    finally:
        subprocess.run(["ip", "netns", "del", ns])
