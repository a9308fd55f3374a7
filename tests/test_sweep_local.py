"""A sweep on the local site, for real: the trial playbook must put each point's bottleneck
rate and PIE target in place before its trial (playbooks/trial.yml installs each trial's qdisc
stacks afresh, from the point's model), since the nodes are provisioned once.

pie-vs-red with its sweep cut to 2 x 2 points, only the trial pie-unlimited, at TIME_SCALE 0.1
(four 25 s trials; about 7 minutes with the site's build). Each instance's router snapshot
(meta-before.json, `tc -s -j qdisc show` before the trial) must show its point's PIE target,
and the bytes the bottleneck sent (qdisc.jsonl, the router's tx counter) its point's rate.
Root (the micro-VM or namespaces)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def swept_run(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("needs root (the local site); run `make test` as root")
    base = tmp_path_factory.mktemp("sweep-local")
    data = yaml.safe_load((REPO / "experiments" / "pie-vs-red" / "experiment.yml").read_text())
    data["sweep"]["factors"][0]["values"] = [5, 20]
    data["sweep"]["factors"][1]["values"] = [5, 20]
    exp = base / "experiment.yml"
    exp.write_text(yaml.safe_dump(data, sort_keys=False))
    env = dict(os.environ, NETREPRO_STATE=str(base / "state"), NETREPRO_RESULTS=str(base / "results"))

    def nr(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "netrepro", *args], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=1800)

    try:
        for step in (("up", str(exp)), ("provision", str(exp)),
                     ("run", str(exp), "--trial", "pie-unlimited", "--sweep", "--seed", "2", "--time-scale", "0.1")):
            p = nr(*step)
            assert p.returncode == 0, f"{step[0]}: " + (p.stdout + p.stderr)[-3000:]
        run_dir = (base / "results" / "pie-vs-red" / "latest").resolve()
        yield run_dir, json.loads((run_dir / "run.json").read_text())
    finally:
        down = nr("down", str(exp))
        assert down.returncode == 0, down.stdout + down.stderr


def _pie_target_ms(meta_before: Path) -> float:
    """PIE's target in the router's snapshot: iproute2 prints it as a time string ("5ms",
    "5.0ms") or, in newer JSON output, a number of microseconds."""
    snap = json.loads(meta_before.read_text())
    pie = next(q for q in snap["qdiscs"] if q.get("kind") == "pie")
    t = pie["options"]["target"]
    if isinstance(t, (int, float)):
        return t / 1000
    value, unit = re.fullmatch(r"([0-9.]+)(us|ms|s)", t).groups()
    return float(value) * {"us": 1e-3, "ms": 1, "s": 1e3}[unit]


def _sent_mbit_s(qdisc_jsonl: Path) -> float:
    """The bottleneck's tx rate over the sampled trial (router tx counter in qdisc.jsonl)."""
    rows = [json.loads(ln) for ln in qdisc_jsonl.read_text().splitlines() if ln.strip()]
    first, last = rows[len(rows) // 10], rows[-1]
    return (last["tx_bytes"] - first["tx_bytes"]) * 8 / (last["t"] - first["t"]) / 1e6


def test_each_point_ran_with_its_own_rate_and_pie_target(swept_run):
    run_dir, meta = swept_run
    assert sorted(t["id"] for t in meta["trials"]) == [f"pie-unlimited.p{i}" for i in range(1, 5)]
    for t in meta["trials"]:
        router = run_dir / "raw" / t["id"] / "router"
        assert _pie_target_ms(router / "meta-before.json") == t["factors"]["pie_target_ms"], t["id"]
        rate = _sent_mbit_s(router / "qdisc.jsonl")
        want = t["factors"]["rate_mbit"]
        assert 0.7 * want < rate <= 1.05 * want, (t["id"], rate, want)
