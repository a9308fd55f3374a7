"""`netrepro setup`: which mode is needed (read from files only), which executables are
missing and from which Debian package, and `--check` changing nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from netrepro import setup as nsetup

REPO = Path(__file__).resolve().parent.parent


def _modules(tmp_path: Path, release: str, builtin: list[str], dep: list[str]) -> Path:
    d = tmp_path / release
    d.mkdir(parents=True)
    (d / "modules.builtin").write_text("".join(f"kernel/net/sched/{m}.ko\n" for m in builtin))
    (d / "modules.dep").write_text("".join(f"kernel/net/sched/{m}.ko.xz: \n" for m in dep))
    return tmp_path


def test_host_qdiscs_read_from_module_lists(tmp_path):
    root = _modules(tmp_path, "6.1.0-9-amd64", ["sch_htb"], ["sch_netem", "sch_pie", "sch_red"])
    assert nsetup.host_has_qdiscs("6.1.0-9-amd64", root) is True
    root = _modules(tmp_path / "b", "6.18.0", ["sch_htb", "sch_tbf"], [])
    assert nsetup.host_has_qdiscs("6.18.0", root) is False
    assert nsetup.host_has_qdiscs("no-such-release", tmp_path) is None


@pytest.mark.parametrize("mode, vm", [("host", False), ("vm", True)])
def test_needs_vm_follows_local_mode(mode, vm):
    assert nsetup.needs_vm(mode)[0] is vm


def test_every_executable_maps_to_a_package():
    for table in (nsetup.LOCAL_EXECUTABLES, nsetup.VM_EXECUTABLES):
        for exe, pkg in table.items():
            assert exe and pkg and " " not in pkg, (exe, pkg)
    # virtme-ng builds the micro-VM's initramfs with busybox: the bug of a fresh machine.
    assert nsetup.VM_EXECUTABLES["busybox"] == "busybox-static"


def test_missing_executables_name_their_package(monkeypatch):
    monkeypatch.setitem(nsetup.LOCAL_EXECUTABLES, "nr-no-such-tool", "nr-no-such-package")
    assert nsetup.missing_executables(False) == {"nr-no-such-tool": "nr-no-such-package"}
    assert nsetup.missing_packages(False) == ["nr-no-such-package"]


def test_check_names_what_is_missing_and_changes_nothing(monkeypatch, tmp_path):
    monkeypatch.setitem(nsetup.LOCAL_EXECUTABLES, "nr-no-such-tool", "nr-no-such-package")
    out: list[str] = []
    before = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    rc = nsetup.setup("local", check_only=True, log=out.append)
    assert rc == 1
    assert any("nr-no-such-tool (nr-no-such-package)" in line for line in out), out
    after = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    assert before == after


def test_cli_check_exit_status():
    """`netrepro setup --check` answers 0 or 1 and prints what it checked (no traceback)."""
    r = subprocess.run([sys.executable, "-m", "netrepro", "setup", "--check"], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode in (0, 1), r.stderr
    assert "[setup] local site" in r.stdout and "Traceback" not in r.stderr
