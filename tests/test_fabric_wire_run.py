"""A whole experiment through the fabric site over the wire, on real nodes.

`netrepro reproduce tests/data/experiments/gateway-fifo.yml --site fabric` runs with fablib
pointed at the FABRIC stand-in (tests/testbed/fabric.py) as an evaluator runs it against
FABRIC: token refresh and the user's record -> create (the slice's graph) -> fablib's wait
(StableOK), SSH through the bastion and post-boot configuration -> provision -> trials ->
analysis -> delete. The nodes are real (the local site in host mode, tests/testbed/nodes.py),
logged in as ``ubuntu`` with sudo through an OpenSSH bastion, as on FABRIC's Ubuntu images.
Only hosts, keys, the token, the CA and ``install_packages=false`` (the "VMs" share this
machine's programs) differ from a FABRIC run. Root.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from conftest import assert_exports_and_reads_back, assert_judged_as_reproduced

from test_fabric_wire import EXP, FabricAccount
from testbed.fabric import TestFabric
from testbed.nodes import LocalNodes

pytestmark = pytest.mark.netns


def _netns() -> set[str]:
    return set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("needs root (network namespaces); run `make test` as root")
    base = tmp_path_factory.mktemp("fabric-wire")
    nodes = LocalNodes(EXP, base / "nodes")
    fab = TestFabric(base / "fabric", builder=nodes, experiment=EXP)
    try:
        acc = FabricAccount(base, fab)
        before = _netns()
        t0 = time.monotonic()
        # A lease of 3 minutes: shorter than a trial and its margin, so the runner renews it first.
        p = acc.nr("reproduce", "--time-scale", "0.5", "--option", "install_packages=false", "--option", "hours=0.05",
                   timeout=1800)
        wall = time.monotonic() - t0
        yield {"proc": p, "out": p.stdout + p.stderr, "fab": fab, "acc": acc, "wall": wall, "nodes": nodes,
               "ns": (before, _netns()), "run": base / "account" / "results" / "gateway-fifo" / "latest"}
    finally:
        fab.close()


def test_reproduced_over_the_wire(run):
    assert run["proc"].returncode == 0, run["out"][-5000:]
    assert_judged_as_reproduced(json.loads((run["run"] / "verdict.json").read_text()))
    print(f"\nwall {run['wall']:.0f} s; {len(run['fab'].calls)} requests")


def test_every_stage_went_through_the_services_and_nothing_is_left(run):
    fab = run["fab"]
    calls = fab.methods()
    assert calls[:4] == ["POST /credmgr/tokens/refresh", "POST /credmgr/tokens/validate", "GET /whoami", "GET /people/{id}"]
    assert calls.count("POST /slices/creates") == 1 and calls[-1] == "DELETE /slices/delete/{id}"
    assert "PUT /slices/modify/{id}" in calls   # fablib saved its post-boot data
    assert all(status == 200 for _, _, status in fab.calls), [c for c in fab.calls if c[2] != 200]
    assert fab.reserved() == [] and run["nodes"].builds == 1 and run["nodes"].site is None
    before, after = run["ns"]
    assert after == before


def test_the_nodes_were_reached_through_the_bastion_as_the_image_user(run):
    bastion = (run["fab"].base / "bastion" / "sshd.log").read_text()
    assert f"Accepted publickey for {run['fab'].user['bastion_login']}" in bastion
    logs = sorted((run["nodes"].base / "accounts").glob("*/sshd.log"))
    assert len(logs) == 7
    for log in logs:
        text = log.read_text()
        assert "Accepted publickey for ubuntu from " in text, log
        assert "Accepted publickey for root" not in text, log


def test_a_lease_that_would_end_during_the_run_is_renewed_first(run):
    out = run["out"]
    assert "[run] the lease ends at" in out and "renewing it to 1 h from now" in out
    calls = run["fab"].methods()
    assert calls.count("POST /slices/renew/{id}") == 1
    assert calls.index("POST /slices/renew/{id}") > calls.index("PUT /slices/modify/{id}")


def test_a_refused_renewal_keeps_the_lease_and_says_so(tmp_path):
    nodes = LocalNodes(EXP, tmp_path / "nodes")
    fab = TestFabric(tmp_path / "fabric", builder=nodes, experiment=EXP)
    try:
        acc = FabricAccount(tmp_path, fab)
        up = acc.nr("up", "--option", "install_packages=false")
        assert up.returncode == 0, up.stderr[-3000:]
        before = acc.state()["expires"]
        fab.faults["max_lease_hours"] = 1
        p = acc.nr("renew", "--hours", "30")   # later than the initial 24 h: renew asks FABRIC
        assert p.returncode == 2, p.stderr[-2000:]
        err = p.stderr.strip().splitlines()[-1]
        assert "FABRIC refused to renew slice netrepro-gateway-fifo" in err and "exceeds the maximum of 1 hours" in err
        assert acc.state()["expires"] == before
        assert acc.nr("down").returncode == 0 and fab.reserved() == []
    finally:
        fab.close()


def test_the_run_keeps_the_slice_as_fablib_described_it_and_exports_it(run, offline, tmp_path):
    """The ready slice's description (its nodes, sites and networks) is kept in the run
    folder's site/ with its sha256, and goes into the crate with each trial."""
    meta = json.loads((run["run"] / "run.json").read_text())
    assert list(meta["site_documents"]) == ["slice.txt"]
    text = (run["run"] / "site" / "slice.txt").read_text()
    assert text.startswith("slice ")
    for node in meta["nodes"]:   # every node the run logged in to
        assert f"  node {node}: site " in text, node
    crate = assert_exports_and_reads_back(run["run"], tmp_path / "export")
    assert (crate / "site" / "slice.txt").read_text() == text
