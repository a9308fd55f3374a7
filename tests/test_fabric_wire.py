"""The fabric site over the wire, against the FABRIC stand-in (tests/testbed/fabric.py).

Everything runs as a user runs it (``python -m netrepro``) with fablib configured by a
fabric_rc that names the stand-in's address as the credential manager, orchestrator, core
API and bastion, and ``REQUESTS_CA_BUNDLE`` naming its CA: only hosts, keys, tokens and the
CA differ from a FABRIC run. Each test checks what the user sees and that no slice is left.

The failures are those testbeds really have (fabric jupyter-examples #31 and #174): a node
whose reservation fails, a slice never ready, an expired token, a CA that does not match,
Ctrl-C while waiting. No nodes stand behind these slices: the runs stop before one is used.
tests/test_fabric_wire_run.py runs a whole experiment on real nodes.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from testbed.aggregate import wait_for
from testbed.fabric import TestFabric
from testbed.pki import TestPKI

pytestmark = pytest.mark.wire

REPO = Path(__file__).resolve().parent.parent
EXP = REPO / "tests" / "data" / "experiments" / "gateway-fifo.yml"


class FabricAccount:
    """A user's fablib configuration pointing at a FABRIC stand-in, and the commands."""

    def __init__(self, base: Path, fab: TestFabric):
        self.base, self.fab = base, fab
        self.env = fab.write_account(base / "account")

    def argv(self, command: str, *more: str) -> list[str]:
        return [sys.executable, "-m", "netrepro", command, str(EXP), "--site", "fabric", "--option", "fabric_site=UTAH", *more]

    def nr(self, command: str, *more: str, timeout: float = 300) -> subprocess.CompletedProcess:
        return subprocess.run(self.argv(command, *more), cwd=REPO, env=self.env, capture_output=True, text=True,
                              timeout=timeout, stdin=subprocess.DEVNULL)

    def state(self) -> dict:
        f = self.base / "account" / "state" / "gateway-fifo-fabric" / "state.json"
        return json.loads(f.read_text()) if f.is_file() else {}


@pytest.fixture
def fab(tmp_path):
    if os.geteuid() != 0:
        pytest.fail("needs root (the stand-in binds ports 443 and 22 of a loopback address); run `make test` as root")
    f = TestFabric(tmp_path / "fabric")
    yield f
    f.close()


@pytest.fixture
def account(tmp_path, fab):
    return FabricAccount(tmp_path, fab)


def _last_line(p: subprocess.CompletedProcess) -> str:
    return p.stderr.strip().splitlines()[-1]


def test_a_node_that_fails_is_named_and_the_slice_deleted(account, fab):
    fab.faults["fail_node"] = ("gw", "Insufficient resources: no host at UTAH has 2 cores and 8 GB left")
    up = account.nr("up")
    assert up.returncode == 2, up.stderr[-2000:]
    err = _last_line(up)
    assert err.startswith("netrepro: site fabric: slice netrepro-gateway-fifo at UTAH failed and was deleted: ")
    assert "node gw (Failed: Insufficient resources: no host at UTAH has 2 cores and 8 GB left)" in err
    assert "try another site with FABRIC_SITE=<site>" in err
    assert fab.reserved() == [] and account.state() == {}
    assert fab.methods()[-1] == "DELETE /slices/delete/{id}"


def test_a_slice_never_ready_is_deleted_at_the_timeout(account, fab):
    fab.faults["never_ready"] = True
    up = account.nr("up", "--option", "ready_timeout_s=3")
    assert up.returncode == 2, up.stderr[-2000:]
    err = _last_line(up)
    assert "slice netrepro-gateway-fifo at UTAH failed and was deleted: not ready after 3 s (state Configuring)" in err
    assert "raise the option ready_timeout_s" in err
    assert fab.reserved() == [] and account.state() == {}


def _nothing_reserved(fab, proc):
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert not [m for m in fab.methods() if m.startswith(("POST /slices", "PUT", "DELETE"))], fab.calls
    assert fab.slices == {}


def test_an_expired_token_is_refused_before_anything_is_reserved(account, fab):
    token = Path(account.env["FABRIC_RC"]).parent / "id_token.json"
    data = json.loads(token.read_text())
    data["id_token"] = fab._jwt(hours=-1)
    token.write_text(json.dumps(data))
    fab.faults["token_expired"] = True
    p = account.nr("up")
    _nothing_reserved(fab, p)
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert "FABRIC token" in p.stderr and str(token) in p.stderr and "Manage Tokens" in p.stderr


def test_a_ca_that_does_not_match_is_refused_before_anything_is_reserved(account, fab, tmp_path):
    other = TestPKI(tmp_path / "other-pki", "Another CA")
    account.env["REQUESTS_CA_BUNDLE"] = str(other.ca_file)
    p = account.nr("up")
    _nothing_reserved(fab, p)
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert f"https://{fab.address}" in p.stderr and "certificate not trusted" in p.stderr
    assert "REQUESTS_CA_BUNDLE" in p.stderr
    assert fab.calls == []


def test_ctrl_c_while_waiting_deletes_the_slice(account, fab):
    fab.faults["never_ready"] = True
    proc = subprocess.Popen(account.argv("up"), cwd=REPO, env=account.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    # waiting: the slice is recorded (fablib's submit ends with two more calls, over 2 s under load)
    assert wait_for(lambda: bool(account.state().get("slice_id")), 60)
    time.sleep(2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert fab.methods()[-1] == "DELETE /slices/delete/{id}" and fab.reserved() == [] and account.state() == {}


def test_ctrl_c_while_submitting_deletes_the_slice_made(account, fab):
    """Ctrl-C after the create call reached the orchestrator and before its answer (the slice
    made, its id not yet known to netrepro): the state named the slice before the call, so the
    slice is found by its name and deleted, and nothing is left held or recorded."""
    fab.faults["create_answer_delay_s"] = 30
    proc = subprocess.Popen(account.argv("up"), cwd=REPO, env=account.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    assert wait_for(lambda: fab.reserved() == ["netrepro-gateway-fifo"], 60)
    assert account.state().get("submitting") is True and "slice_id" not in account.state()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    assert fab.methods()[-1] == "DELETE /slices/delete/{id}" and fab.reserved() == [] and account.state() == {}


def test_services_gone_at_release_leave_one_line_naming_the_slice(account, fab):
    fab.faults["never_ready"] = True
    proc = subprocess.Popen(account.argv("up"), cwd=REPO, env=account.env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    assert wait_for(lambda: bool(account.state().get("slice_id")), 60)
    proc.kill()   # the controller died while waiting: the slice is still held
    proc.wait(30)
    st = account.state()
    fab.server.shutdown()
    fab.server.server_close()
    p = account.nr("down")
    assert p.returncode == 2
    err = p.stderr.strip().splitlines()
    assert len(err) == 1, p.stderr
    assert f"cannot reach https://{fab.address}" in err[0]
    assert (f"fabric: slice netrepro-gateway-fifo ({st['slice_id']}) is reserved at FABRIC site UTAH until {st['expires']}; "
            "release it with `netrepro down gateway-fifo --site fabric`") in err[0]
    assert account.state()["slice_id"] == st["slice_id"]   # kept, so that a later `down` can release it


def test_renew_never_shortens_the_lease(account, fab):
    """`make renew SITE=fabric` without HOURS asks for 6 h: a slice whose lease (24 h, fablib's
    default) already ends later is left as it is (its lease_end_time read first), and said in one
    line; a later end is asked of the orchestrator."""
    fab.faults["never_ready"] = True
    proc = subprocess.Popen(account.argv("up"), cwd=REPO, env=account.env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)
    assert wait_for(lambda: bool(account.state().get("slice_id")), 60)
    proc.kill()   # the slice is held; no nodes stand behind it
    proc.wait(30)
    slc = fab.slices[account.state()["slice_id"]]
    before = slc["end"]
    kept = account.nr("renew", "--hours", "6")
    assert kept.returncode == 0, kept.stderr[-2000:]
    assert kept.stderr.strip().splitlines()[-1] == (
        f"fabric: the lease of slice netrepro-gateway-fifo already ends at {before.strftime('%Y-%m-%d %H:%M:%S')} UTC, "
        "not before the 6 h from now asked; nothing changed (renew never shortens a lease)")
    assert slc["end"] == before and "POST /slices/renew/{id}" not in fab.methods()
    longer = account.nr("renew", "--hours", "30")
    assert longer.returncode == 0, longer.stderr[-2000:]
    assert fab.methods().count("POST /slices/renew/{id}") == 1
    assert dt.timedelta(hours=5.9) < slc["end"] - before < dt.timedelta(hours=6.1)
    assert account.nr("down").returncode == 0 and fab.reserved() == []
