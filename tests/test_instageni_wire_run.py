"""A whole experiment through the instageni site over the wire, on real nodes.

`netrepro reproduce tests/data/experiments/gateway-fifo.yml --site instageni` runs against
the test aggregate (tests/testbed/aggregate.py) as an evaluator runs it against CloudLab:
reserve (slice, Allocate, Provision, start) -> wait (Status until ready) -> logins (Describe's
manifest) -> provision -> trials -> analysis -> release (Delete). The aggregate builds the
slivers as real nodes with the local site in host mode (tests/testbed/nodes.py: namespaces
with their own sshd and their own /var/lib/netrepro, the switches without their bridge, the
user's key from Provision's geni_users); the experiment's qdiscs (tbf, bfifo, pfifo) are in
this kernel. Only URLs, certificates, the CA and ``install_packages=false`` (the "VMs" share
this machine's programs) differ from a CloudLab run. Root.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pytest

from conftest import assert_exports_and_reads_back, assert_judged_as_reproduced

from test_instageni_wire import Account
from testbed.aggregate import SA_PATH, TestAggregate, counts
from testbed.nodes import LocalNodes
from testbed.pki import TestPKI

pytestmark = pytest.mark.netns


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("needs root (network namespaces); run `make test` as root")
    from test_instageni_wire import EXP

    base = tmp_path_factory.mktemp("instageni-wire")
    nodes = LocalNodes(EXP, base / "aggregate")
    agg = TestAggregate(TestPKI(base / "pki"), builder=nodes)
    try:
        acc = Account(base, agg, user="root")   # the nodes' sshd logs in as root (namespaces of this host)
        ns_before = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
        t0 = time.monotonic()
        # A lease of 3 minutes: shorter than a trial and its margin, so the runner renews it first.
        p = acc.nr("reproduce", "--time-scale", "0.5", "--option", "install_packages=false", "--option", "hours=0.05",
                   timeout=1800)
        wall = time.monotonic() - t0
        ns_after = set(subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split())
        yield {"proc": p, "out": p.stdout + p.stderr, "agg": agg, "acc": acc, "wall": wall, "nodes": nodes,
               "ns": (ns_before, ns_after), "run": base / "results" / "gateway-fifo" / "latest"}
    finally:
        agg.close()


def test_reproduced_over_the_wire(run):
    assert run["proc"].returncode == 0, run["out"][-5000:]
    v = json.loads((run["run"] / "verdict.json").read_text())
    assert_judged_as_reproduced(v)
    print(f"\nwall {run['wall']:.0f} s; calls {counts(run['agg'].calls)}")


def test_every_stage_went_through_the_aggregate_and_nothing_is_left(run):
    agg = run["agg"]
    am = agg.methods("/protogeni/xmlrpc/am/3.0")
    assert am[:4] == ["GetVersion", "Allocate", "Provision", "PerformOperationalAction"]
    assert am[-2:] == ["Describe", "Delete"] or am[-1] == "Delete"
    assert "Status" in am and "Describe" in am
    assert agg.methods(SA_PATH)[:1] == ["create"]
    assert agg.slivers == {} and all(code == 0 for _, _, code in agg.calls)
    assert run["nodes"].builds == 1 and run["nodes"].site is None   # built once, torn down by Delete
    before, after = run["ns"]
    assert after == before


def test_a_lease_that_would_end_during_the_run_is_renewed_first(run):
    out = run["out"]
    assert "[run] the lease ends at" in out and "renewing it to 1 h from now" in out
    am = run["agg"].methods("/protogeni/xmlrpc/am/3.0")
    assert am.count("Renew") == 1 and am.index("Renew") > am.index("Describe")
    assert run["agg"].methods(SA_PATH).count("update") == 1


def test_a_lease_that_cannot_be_renewed_stops_the_run_before_the_trial(tmp_path, run):
    """After the first run (its nodes are gone): a portal that grants at most half an hour."""
    from test_instageni_wire import EXP

    nodes = LocalNodes(EXP, tmp_path / "aggregate")
    agg = TestAggregate(TestPKI(tmp_path / "pki"), builder=nodes)
    agg.faults["max_lease_hours"] = 0.5
    try:
        acc = Account(tmp_path, agg, user="root")
        p = acc.nr("reproduce", "--time-scale", "0.5", "--option", "install_packages=false", "--option", "hours=0.05",
                   timeout=1800)
        err = p.stderr.strip().splitlines()[-1]
        assert p.returncode == 2, p.stdout + p.stderr
        assert "run INCOMPLETE at trial" in err and "renewing it for 1 h was refused" in err
        assert "Cannot extend the expiration beyond 0.5 hours" in err and "0 of 2 trials kept" in err
        assert "resume with: netrepro reproduce" in err and "--resume" in err
        assert agg.slivers == {} and nodes.site is None   # released
    finally:
        agg.close()


def test_the_run_names_the_site_and_its_manifest(run):
    meta = json.loads((run["run"] / "run.json").read_text())
    assert meta["site"] == "instageni" or meta.get("site", {}).get("name") == "instageni"
    text = json.dumps(meta)
    assert "nr-gatewayfif-root" in text   # the slice, in the site's status


def test_the_run_keeps_the_request_and_the_manifest_and_exports_them(run, offline, tmp_path):
    """The request RSpec as sent and the manifest as Describe answered are kept in the run
    folder's site/ with their sha256, and go into the crate with each trial."""
    meta = json.loads((run["run"] / "run.json").read_text())
    assert sorted(meta["site_documents"]) == ["manifest.xml", "request.xml"]
    manifest = (run["run"] / "site" / "manifest.xml").read_text()
    request = (run["run"] / "site" / "request.xml").read_text()
    assert 'type="manifest"' in manifest and 'type="request"' in request
    for node in meta["nodes"]:   # every node the run logged in to
        assert f'client_id="{node}"' in manifest and f'client_id="{node}"' in request, node
    crate = assert_exports_and_reads_back(run["run"], tmp_path / "export")
    assert (crate / "site" / "manifest.xml").read_text() == manifest
