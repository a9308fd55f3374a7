"""The instageni site over the wire, against the test aggregate (tests/testbed/aggregate.py).

Everything runs as a user runs it (``python -m netrepro``), with an aggregates file naming
the test aggregate's URLs and CA and a geni-lib context naming a portal certificate the test
CA signed: only URLs, certificates and the CA differ from a CloudLab run. Each test checks
what the user sees, and that nothing is left reserved at the aggregate.

The failures are those testbeds really have (geni-tools #55 and #577, fabric jupyter-examples
#31 and #174, EnOSlib #90): a busy aggregate, a sliver that fails or never becomes ready, no
resources, a lease that cannot be renewed, an expired or foreign certificate, a CA that does
not match, Ctrl-C while waiting, an aggregate gone when the slice is released. Their nodes
do not exist (the logins name hosts of the aggregate's domain): these runs stop before a node
is used. Each test runs against both profiles of the test aggregate (``protogeni`` and ``spec``). tests/test_instageni_wire_run.py runs a whole experiment on real nodes.
"""

from __future__ import annotations

import datetime as dt
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from testbed.account import write_account
from testbed.aggregate import AM_PATH, PROFILES, TestAggregate, wait_for
from testbed.pki import TestPKI

pytestmark = pytest.mark.wire

REPO = Path(__file__).resolve().parent.parent
EXP = REPO / "tests" / "data" / "experiments" / "gateway-fifo.yml"


class Account:
    """A user's files for the instageni site pointing at a test aggregate
    (:func:`testbed.account.write_account`), and the commands."""

    def __init__(self, base: Path, agg: TestAggregate, user: str = "alice", cert: Path | None = None,
                 aggregates: str | None = None):
        self.base, self.agg = base, agg
        self.env, self.cert = write_account(base, agg, user, cert, aggregates)

    def argv(self, command: str, *more: str) -> list[str]:
        return [sys.executable, "-m", "netrepro", command, str(EXP), "--site", "instageni", *more]

    def nr(self, command: str, *more: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(command, *more), cwd=REPO, env=self.env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def state(self) -> dict:
        f = self.base / "state" / "gateway-fifo-instageni" / "state.json"
        return json.loads(f.read_text()) if f.is_file() else {}


@pytest.fixture(params=PROFILES)
def agg(request, tmp_path):
    """The test aggregate in each of its profiles: ``protogeni`` (CloudLab's GeniAM) and ``spec``
    (AM API v3 as written, geni-tools' gcf-am -V 3): every test runs against both."""
    a = TestAggregate(TestPKI(tmp_path / "pki"), profile=request.param)
    yield a
    a.close()


@pytest.fixture
def account(tmp_path, agg):
    return Account(tmp_path, agg)


def test_up_renew_down_over_the_wire(account, agg):
    up = account.nr("up")
    assert up.returncode == 0, up.stdout + up.stderr
    st = account.state()
    assert st["slice_urn"] == "urn:publicid:IDN+emulab.net:netrepro-ae+slice+nr-gatewayfif-alice"
    assert set(st["logins"]) == {"gw", "swa", "swb", "a1", "a2", "b1", "b2"}
    assert {lg["user"] for lg in st["logins"].values()} == {"alice"}   # of two members' logins
    inventory = account.base / "inventory" / "gateway-fifo-instageni.yml"   # NETREPRO_INVENTORY: the test's own
    groups = yaml.safe_load(inventory.read_text())["all"]["children"].values()
    assert {host for group in groups for host in group["hosts"]} == set(st["logins"])
    assert agg.methods() == ["GetVersion", "get_credentials", "create", "get_credentials", "Allocate", "Provision",
                             "PerformOperationalAction", "Status", "Describe"]
    assert len(agg.slivers) == 7 + 6 and all(s["operational"] == "geni_ready" for s in agg.slivers.values())
    renew = account.nr("renew", "--hours", "10")   # later than the initial 6 h
    assert renew.returncode == 0, renew.stderr
    assert agg.methods()[-2:] == ["update", "Renew"]
    assert account.state()["expires"] != st["expires"]
    down = account.nr("down")
    assert down.returncode == 0, down.stderr
    assert agg.slivers == {} and account.state() == {} and not inventory.exists()
    assert "slivers deleted" in down.stderr


def test_a_busy_aggregate_is_tried_again_and_said(account, agg):
    agg.faults["busy"] = {"Allocate": 2}
    up = account.nr("up")
    assert up.returncode == 0, up.stderr
    lines = [ln for ln in up.stderr.splitlines() if "busy" in ln]
    assert len(lines) == 2 and "Allocate at https://127.0.0.1" in lines[0] and "trying again in 2 s" in lines[0]
    assert agg.methods().count("Allocate") == 3
    assert account.nr("down").returncode == 0 and agg.slivers == {}


def test_a_sliver_that_fails_is_named_and_everything_deleted(account, agg):
    agg.faults["fail_node"] = ("gw", "VM gw did not boot on pc3: timed out waiting for the console")
    up = account.nr("up")
    assert up.returncode == 2
    err = up.stderr.strip().splitlines()[-1]
    assert "node gw (urn:publicid:IDN+test.netrepro.example+sliver+" in err
    assert "VM gw did not boot on pc3" in err and "the slivers were deleted: nothing is reserved" in err
    assert agg.slivers == {} and account.state() == {} and agg.methods()[-1] == "Delete"


def test_slivers_never_ready_are_deleted_at_the_timeout(account, agg):
    agg.faults["never_ready"] = True
    up = account.nr("up", "--option", "ready_timeout_s=1")
    assert up.returncode == 2
    err = up.stderr.strip().splitlines()[-1]
    assert "aggregate test: slice nr-gatewayfif-alice: not ready after 1 s (0/7 ready, 7 geni_notready)" in err   # 7 VMs, 6 links not counted
    assert "ready_timeout_s" in err and "the slivers were deleted" in err
    assert agg.slivers == {} and account.state() == {}


def test_no_resources_names_the_aggregate_and_what_to_try(account, agg):
    agg.faults["no_resources"] = True
    up = account.nr("up")
    assert up.returncode == 2
    err = up.stderr.strip().splitlines()[-1]
    assert err.startswith(f"netrepro: aggregate test ({agg.url()}) refused the request: Allocate: GENI error 2 (ERROR)")
    assert "Could not map to physical resources" in err and "Try another aggregate (AGGREGATE=<name>" in err
    assert "Nothing is reserved" in err
    assert agg.slivers == {} and account.state() == {}


def _nothing_sent(agg, proc):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert not [m for m in agg.methods() if m not in ("GetVersion", "get_credentials")], agg.calls
    assert agg.slices == {} and agg.slivers == {}


def test_an_expired_certificate_is_refused_before_any_request(tmp_path, agg):
    cert = agg.pki.portal_user("urn:publicid:IDN+emulab.net+user+alice", "old.pem", days=-2)
    acc = Account(tmp_path, agg, cert=cert)
    p = acc.nr("up")
    _nothing_sent(agg, p)
    assert "old.pem: (certificate): expired on" in p.stderr and "download your credentials again" in p.stderr
    assert agg.calls == []


def test_a_certificate_of_another_portal_is_refused_before_anything_is_reserved(tmp_path, agg):
    acc = Account(tmp_path, agg, cert=agg.pki.stranger("urn:publicid:IDN+emulab.net+user+alice"))
    p = acc.nr("up")
    _nothing_sent(agg, p)
    assert "TLS: the service refused your certificate" in p.stderr and "stranger.pem" in p.stderr


def test_a_ca_that_does_not_match_is_refused_before_anything_is_reserved(tmp_path, agg):
    other = TestPKI(tmp_path / "other-pki", "Another portal CA")
    text = agg.aggregates_yaml().replace(str(agg.pki.ca_file), str(other.ca_file))
    acc = Account(tmp_path, agg, aggregates=text)
    p = acc.nr("up")
    _nothing_sent(agg, p)
    assert f"{agg.url()}: TLS: certificate not trusted" in p.stderr and str(other.ca_file) in p.stderr
    assert agg.calls == []


def test_ctrl_c_while_waiting_deletes_the_slivers(account, agg):
    agg.faults["never_ready"] = True
    proc = subprocess.Popen(account.argv("up"), cwd=REPO, env=account.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    assert wait_for(lambda: "Status" in agg.methods(), 60)
    time.sleep(0.5)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert agg.methods()[-1] == "Delete" and agg.slivers == {} and account.state() == {}


def test_a_refused_renewal_keeps_the_lease_and_says_so(account, agg):
    assert account.nr("up").returncode == 0
    before = account.state()["expires"]
    agg.faults["max_lease_hours"] = 1
    p = account.nr("renew", "--hours", "10")   # later than the initial 6 h
    assert p.returncode == 2
    assert "GENI error 7 (REFUSED): Cannot extend the expiration beyond 1 hours" in p.stderr
    assert account.state()["expires"] == before
    assert account.nr("down").returncode == 0 and agg.slivers == {}


def test_an_aggregate_gone_at_release_leaves_one_line_naming_the_slice(account, agg):
    assert account.nr("up").returncode == 0
    st = account.state()
    agg.server.shutdown()
    agg.server.server_close()
    p = account.nr("down")
    assert p.returncode == 2
    err = p.stderr.strip().splitlines()
    assert len(err) == 1, p.stderr
    assert (f"slice nr-gatewayfif-alice ({st['slice_urn']}) is reserved on aggregate test ({agg.url(AM_PATH)}) "
            f"until {st['expires']}; release it with `netrepro down gateway-fifo --site instageni`") in err[0]
    assert account.state()["slice_urn"] == st["slice_urn"]   # kept, so that a later `down` can release it


def test_two_reservations_are_two_slices_renewed_listed_and_released_together(account, agg):
    """`--parallel 2` (a campaign on two reservations, docs/running-a-campaign.md): two slices
    over the wire, the second named with -2; renew and status cover both, down releases both."""
    up = account.nr("up", "--parallel", "2")
    assert up.returncode == 0, up.stdout + up.stderr
    first = account.state()
    second = json.loads((account.base / "state" / "gateway-fifo-instageni.2" / "state.json").read_text())
    assert first["slice_name"] == "nr-gatewayfif-alice" and second["slice_name"] == "nr-gatewayfif-ali-2"
    assert second["slice_urn"] == "urn:publicid:IDN+emulab.net:netrepro-ae+slice+nr-gatewayfif-ali-2"
    assert agg.methods().count("Allocate") == 2 and len(agg.slivers) == 2 * (7 + 6)
    assert "[up] instageni #1 ready" in up.stdout and "[up] instageni #2 ready" in up.stdout
    status = account.nr("status")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["parallel_reservations"]["2"]["slice_name"] == "nr-gatewayfif-ali-2"
    renew = account.nr("renew", "--hours", "10")   # later than the initial 6 h
    assert renew.returncode == 0, renew.stderr
    assert agg.methods().count("Renew") == 2
    down = account.nr("down")   # no --parallel: every copy found is released
    assert down.returncode == 0, down.stderr
    assert agg.slivers == {} and account.state() == {}
    assert not (account.base / "state" / "gateway-fifo-instageni.2" / "state.json").exists()
    assert "[down] instageni #2 released" in down.stdout


def test_renew_never_shortens_the_lease(account, agg):
    """`make renew` without HOURS asks for 6 h: a lease that already ends later is left as it is
    (the slivers' geni_expires read first, AM API v3 Status), and said in one line; a later end
    extends slice and slivers (update, Renew)."""
    up = account.nr("up", "--option", "hours=12")
    assert up.returncode == 0, up.stderr
    urn = account.state()["slice_urn"]
    before = {u: s["expires"] for u, s in agg.slivers.items()}
    slice_before = agg.slices[urn]["expires"]
    kept = account.nr("renew", "--hours", "6")
    assert kept.returncode == 0, kept.stderr
    first = min(before.values()).strftime("%Y-%m-%d %H:%M:%S")
    assert kept.stderr.strip().splitlines()[-1] == (
        f"instageni: the lease of slice nr-gatewayfif-alice already ends at {first} UTC, not before the 6 h from now "
        "asked; nothing changed (renew never shortens a lease)")
    assert {u: s["expires"] for u, s in agg.slivers.items()} == before and agg.slices[urn]["expires"] == slice_before
    assert "Renew" not in agg.methods() and "update" not in agg.methods()
    longer = account.nr("renew", "--hours", "20")
    assert longer.returncode == 0, longer.stderr
    assert agg.methods()[-2:] == ["update", "Renew"]
    assert all(s["expires"] - before[u] > dt.timedelta(hours=7) for u, s in agg.slivers.items())
    assert agg.slices[urn]["expires"] - slice_before > dt.timedelta(hours=7)
    assert account.nr("down").returncode == 0 and agg.slivers == {}
