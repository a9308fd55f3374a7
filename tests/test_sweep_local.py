"""A sweep on the local site, for real: the trial playbook must put each point's bottleneck
rate and queue limit in place before its trial (playbooks/trial.yml installs each trial's
qdisc stacks afresh, from the point's model), since the nodes are provisioned once.

tests/data/experiments/gateway-fifo.yml (a TBF bottleneck with a byte FIFO leaf, iperf3 flows)
with a 2 x 2 sweep written as a user writes one: the TBF's rate (5 and 20 Mbit/s) and the
byte FIFO's limit (30 and 60 KB), only the trial `bytes`, at TIME_SCALE 0.5 (four 10 s
trials). Its qdiscs are in the host kernel of these machines, so the site runs in host mode:
about 2 minutes, where a pie-vs-red sweep in the micro-VM took 5 (the mechanism is the same:
nothing in it knows which qdisc a factor sets). Each instance's gateway snapshot
(meta-before.json, `tc -s -j qdisc show` before the trial) must show its point's rate and
limit, and the bytes the bottleneck sent (qdisc.jsonl, the gateway's tx counter) its point's
rate. Root (network namespaces)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parent.parent
EXP = REPO / "tests" / "data" / "experiments" / "gateway-fifo.yml"
PORT = "gw:gw-b"

pytestmark = pytest.mark.netns


@pytest.fixture(scope="module")
def swept_run(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("needs root (the local site); run `make test` as root")
    base = tmp_path_factory.mktemp("sweep-local")
    data = yaml.safe_load(EXP.read_text())
    data["sweep"] = {"factors": [
        {"name": "rate_mbit", "paths": [f"trials.bytes.qdiscs.{PORT}.0.rate_mbit"], "values": [5, 20]},
        {"name": "limit_bytes", "paths": [f"trials.bytes.qdiscs.{PORT}.1.limit_bytes"], "values": [30000, 60000],
         "trials": ["bytes"]}]}
    exp = base / "experiment.yml"
    exp.write_text(yaml.safe_dump(data, sort_keys=False))
    env = dict(os.environ, NETREPRO_STATE=str(base / "state"), NETREPRO_RESULTS=str(base / "results"))

    def nr(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "netrepro", *args], cwd=REPO, env=env, capture_output=True,
                              text=True, timeout=1800)

    try:
        for step in (("up", str(exp)), ("provision", str(exp)),
                     ("run", str(exp), "--trial", "bytes", "--sweep", "--seed", "2", "--time-scale", "0.5")):
            p = nr(*step)
            assert p.returncode == 0, f"{step[0]}: " + (p.stdout + p.stderr)[-3000:]
        run_dir = (base / "results" / "gateway-fifo" / "latest").resolve()
        yield run_dir, json.loads((run_dir / "run.json").read_text())
    finally:
        down = nr("down", str(exp))
        assert down.returncode == 0, down.stdout + down.stderr


def _snapshot(meta_before: Path) -> tuple[float, int]:
    """(the TBF's rate in Mbit/s, the byte FIFO's limit in bytes) in the gateway's snapshot:
    iproute2's JSON gives a TBF's rate in bytes per second (tc-tbf(8), `tc -j`)."""
    qdiscs = json.loads(meta_before.read_text())["qdiscs"]
    tbf = next(q for q in qdiscs if q.get("kind") == "tbf" and q.get("dev") == PORT.split(":")[1])
    bfifo = next(q for q in qdiscs if q.get("kind") == "bfifo" and q.get("dev") == PORT.split(":")[1])
    return tbf["options"]["rate"] * 8 / 1e6, bfifo["options"]["limit"]


def _sent_mbit_s(qdisc_jsonl: Path) -> float:
    """The bottleneck's tx rate over the sampled trial (the gateway's tx counter in qdisc.jsonl),
    from a tenth of the way in (the flows' slow start) to the end."""
    rows = [json.loads(ln) for ln in qdisc_jsonl.read_text().splitlines() if ln.strip()]
    first, last = rows[len(rows) // 10], rows[-1]
    return (last["tx_bytes"] - first["tx_bytes"]) * 8 / (last["t"] - first["t"]) / 1e6


def test_each_point_ran_with_its_own_rate_and_queue_limit(swept_run):
    run_dir, meta = swept_run
    assert sorted(t["id"] for t in meta["trials"]) == [f"bytes.p{i}" for i in range(1, 5)]
    seen = set()
    for t in meta["trials"]:
        gw = run_dir / "raw" / t["id"] / "gw"
        want_rate, want_limit = t["factors"]["rate_mbit"], t["factors"]["limit_bytes"]
        assert _snapshot(gw / "meta-before.json") == (pytest.approx(want_rate), want_limit), t["id"]
        rate = _sent_mbit_s(gw / "qdisc.jsonl")
        assert 0.7 * want_rate < rate <= 1.05 * want_rate, (t["id"], rate, want_rate)
        seen.add((want_rate, want_limit))
    assert seen == {(5, 30000), (5, 60000), (20, 30000), (20, 60000)}
