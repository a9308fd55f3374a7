"""The hidden-assumption test of issue 8: tests/data/experiments/gateway-fifo.yml, an
experiment unlike pie-vs-red in every part the toolkit could have assumed (two switched LANs
and a gateway, node names, a TBF bottleneck with byte and packet FIFOs, iperf3 flows with
their own congestion control, a ping across, no phases), written only as data, runs end to
end with `netrepro reproduce` (TIME_SCALE 0.5: 10 s trials) as a user runs it, and gives
numbers a 20 Mbit/s bottleneck with a 60 KB queue must give.

Its qdiscs (tbf, bfifo, pfifo) are in this machine's own kernel, so the local site runs in
host mode here (about a minute); where they are not, in the micro-VM (slower). Root."""

from __future__ import annotations

import csv
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import assert_judged_as_reproduced, netrepro_on_this_host

REPO = Path(__file__).resolve().parent.parent
EXP = REPO / "tests" / "data" / "experiments" / "gateway-fifo.yml"
NODES = {"gw", "swa", "swb", "a1", "a2", "b1", "b2"}

pytestmark = pytest.mark.netns


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    host = netrepro_on_this_host(tmp_path_factory, "gateway-fifo")
    base = host.base
    ns_before = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
    p = host.nr("reproduce", str(EXP), "--time-scale", "0.5")
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-4000:]
    ns_after = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
    return base / "results" / "gateway-fifo" / "latest", out, ns_before, ns_after


def test_reproduced_and_said_so(run):
    d, out, _, _ = run
    assert re.search(r"\[analyze\] (verdict: reproduced|inconclusive: 2 of 3 claims hold; 1 undecided \()", out), out[-3000:]
    v = json.loads((d / "verdict.json").read_text())
    assert_judged_as_reproduced(v)
    assert [c["id"] for c in v["claims"]] == ["link-used", "queue-bounded", "delay-bounded"]


def test_statistics_are_those_of_a_20_mbit_bottleneck_with_a_60_kb_queue(run):
    d, _, _, _ = run
    rows = list(csv.DictReader((d / "summary.csv").open()))
    get = {(r["trial"], r["subject"], r["phase"], r["statistic"]): float(r["value"]) for r in rows}
    for t in ("bytes", "packets"):
        total = get[(t, "all", "all", "total_throughput_mbit")]
        assert 15 < total < 20.5
        assert get[(t, "cubic-flow", "all", "share")] + get[(t, "reno-flow", "all", "share")] == pytest.approx(1)
        assert 0.5 < get[(t, "all", "all", "jain_index")] <= 1
        # the queue fills to its limit and drains in ~24 ms at 20 Mbit/s; pings wait behind it
        assert 40000 < get[(t, "gw:gw-b", "all", "backlog_max_bytes")] < 62100
        assert 10 < get[(t, "across", "all", "rtt_median_ms")] < 40
        assert get[(t, "gw:gw-b", "all", "drops")] > 0
    assert {r["queue"] for r in rows} == {"bfifo", "pfifo"}  # the trials' labels are columns


def test_results_folder_and_raw_files(run):
    d, _, _, _ = run
    for f in ("run.json", "summary.csv", "tidy.csv.gz", "verdict.json", "report.md", "analysis.json",
              "figures/throughput-mbit.png", "figures/rtt-ms.png", "figures/backlog-bytes.png"):
        assert (d / f).is_file() and (d / f).stat().st_size > 0, f
    for t in ("bytes", "packets"):
        assert json.loads((d / "raw" / t / "a1" / "iperf3-cubic-flow.json").read_text())["end"]["sum_sent"]["bytes"] > 0
        assert (d / "raw" / t / "a1" / "ping.txt").is_file() and (d / "raw" / t / "gw" / "qdisc.jsonl").is_file()
        meta = json.loads((d / "raw" / t / "gw" / "meta-before.json").read_text())
        kinds = [q["kind"] for q in meta["qdiscs"] if q.get("dev") == "gw-b"]
        assert kinds == ["tbf", "bfifo" if t == "bytes" else "pfifo"], kinds
    run_json = json.loads((d / "run.json").read_text())
    assert [t["labels"] for t in run_json["trials"]] == [{"queue": "bfifo"}, {"queue": "pfifo"}]


def test_teardown_left_no_namespace(run):
    _, _, before, after = run
    assert not (after - before) and not (NODES & after)


def test_bench_prints_the_runs_figures(run):
    d, _, _, _ = run
    p = subprocess.run([sys.executable, "-m", "netrepro.cli.bench", "gateway-fifo", "--run", str(d)], cwd=REPO,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    assert "trial wall times (s): bytes " in p.stdout and ", packets " in p.stdout
    assert "rate scale: 1.0 (rates as written" in p.stdout and "health of the substrate" in p.stdout
    assert "raw files: all " in p.stdout and " match the sha256 sums in run.json" in p.stdout
