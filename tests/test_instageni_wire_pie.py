"""The main job on the testbed path: `make reproduce-pie-vs-red SITE=instageni`, over the wire.

The evaluator's command, as docs/sites/cloudlab.md gives it, runs against the test aggregate
(tests/testbed/aggregate.py) instead of CloudLab: reserve -> wait -> logins -> provision ->
trials -> analysis -> release, time-scaled (TIME_SCALE=0.05, 2.5-s phases: shorter than pie-vs-red's
time_scale.min, so every claim is "not applicable" and the verdict inconclusive, as the
fresh-root main job's in tests/test_integration.py; its subject is the testbed path, and the
judged claims are those of the recorded runs, tests/test_claims_on_recorded_runs.py).
The aggregate's seven slivers are real nodes the local site builds in its micro-VM (this
kernel lacks PIE and RED), each reached on a port of its own on 127.0.0.1, as InstaGENI VMs
without a public address are on their host (tests/testbed/nodes.py). What differs from a
CloudLab run: the aggregates file's URLs and CA, the portal certificate's signer, and
INSTALL_PACKAGES=false (the nodes share this machine's programs). About 5 minutes. Root.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from testbed.account import write_account
from testbed.aggregate import AM_PATH, TestAggregate, counts
from testbed.nodes import LocalNodes
from testbed.pki import TestPKI

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parent.parent
EXP = REPO / "experiments" / "pie-vs-red" / "experiment.yml"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("needs root (the local site's micro-VM); run `make test` as root")
    base = tmp_path_factory.mktemp("instageni-pie")
    nodes = LocalNodes(EXP, base / "aggregate", mode="vm")
    agg = TestAggregate(TestPKI(base / "pki"), builder=nodes)
    try:
        env, _ = write_account(base / "account", agg, user="root")
        env["INSTALL_PACKAGES"] = "false"
        t0 = time.monotonic()
        p = subprocess.run(["make", "reproduce-pie-vs-red", "SITE=instageni", "TIME_SCALE=0.05"], cwd=REPO, env=env,
                           capture_output=True, text=True, timeout=3600, stdin=subprocess.DEVNULL)
        yield {"proc": p, "out": p.stdout + p.stderr, "agg": agg, "nodes": nodes, "wall": time.monotonic() - t0,
               "run": base / "account" / "results" / "pie-vs-red" / "latest"}
    finally:
        agg.close()


def test_the_main_job_runs_from_reservation_to_release_with_a_verdict(run):
    assert run["proc"].returncode == 0, run["out"][-6000:]
    v = json.loads((run["run"] / "verdict.json").read_text())
    # Analysed to the end, and honest about the time scale: no claim judged at 0.05.
    assert v["verdict"] == "inconclusive", v
    assert v["claims"] and all(c["status"] == "not applicable" and "time scale 0.05 is shorter" in c["reason"]
                               for c in v["claims"]), v["claims"]
    assert "[analyze] verdict: inconclusive; report " in run["out"]
    print(f"\nverdict {v['verdict']}; wall {run['wall']:.0f} s; calls {counts(run['agg'].calls)}")


def test_the_aggregate_reserved_and_released_everything(run):
    agg = run["agg"]
    am = agg.methods(AM_PATH)
    assert am[:4] == ["GetVersion", "Allocate", "Provision", "PerformOperationalAction"] and am[-1] == "Delete"
    assert agg.slivers == {} and run["nodes"].site is None and run["nodes"].relays == []
    assert all(code == 0 for _, _, code in agg.calls)


def test_the_run_folder_says_where_it_ran(run):
    meta = json.loads((run["run"] / "run.json").read_text())
    assert meta["site"] == "instageni"
    assert "nr-pievsred-root" in json.dumps(meta["site_status"])
    assert len(meta["trials"]) == 4
