"""`netrepro setup`: which mode is needed (read from files only), which executables are
missing and from which Debian package, and `--check` changing nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from netrepro.runner import setup as runner_setup
from netrepro.sites.local import setup as nsetup
from netrepro.sites.local import uml
from netrepro.sites.base import SiteError

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


@pytest.mark.parametrize("mode", ["host", "uml", "vm"])
def test_local_mode_follows_local_mode_option(mode, tmp_path):
    # An explicit LOCAL_MODE wins whatever the kernel lists or /dev/net/tun.
    assert nsetup.local_mode(mode, tun=tmp_path / "no-tun", modules_root=tmp_path)[0] == mode


def test_local_mode_auto_as_choose_mode(tmp_path):
    """auto: host when the kernel lists the qdiscs, else vm (as LocalSite.choose_mode: the
    QEMU micro-VM's two vCPUs were measured less busy than UML's one); uml only by option."""
    tun = tmp_path / "tun"
    tun.write_text("")
    full = _modules(tmp_path / "full", "6.1.0-9-amd64", ["sch_htb"], ["sch_netem", "sch_pie", "sch_red"])
    lacking = _modules(tmp_path / "lacking", "6.18.0", ["sch_htb", "sch_tbf"], [])
    assert nsetup.local_mode("auto", tun=tun, release="6.1.0-9-amd64", modules_root=full)[0] == "host"
    mode, why = nsetup.local_mode("auto", tun=tun, release="6.18.0", modules_root=lacking)
    assert mode == "vm" and "lacks some of sch_netem" in why and "micro-VM" in why and "LOCAL_MODE=uml" in why
    mode, why = nsetup.local_mode("auto", tun=tun, release="no-lists", modules_root=lacking)
    assert mode == "vm" and "no module lists" in why
    assert nsetup.local_mode("uml", tun=tun, release="6.18.0", modules_root=lacking) == ("uml", "LOCAL_MODE=uml")


def test_local_mode_refuses_an_unknown_mode_as_the_site_does():
    with pytest.raises(SiteError) as exc:
        nsetup.local_mode("fast")
    assert str(exc.value) == "site local: option mode='fast' (from LOCAL_MODE): expected one of: auto, host, uml, vm"


def test_every_executable_maps_to_a_package():
    for table in (nsetup.LOCAL_EXECUTABLES, nsetup.UML_EXECUTABLES, nsetup.VM_EXECUTABLES):
        for exe, pkg in table.items():
            assert exe and pkg and " " not in pkg, (exe, pkg)
    # virtme-ng builds the micro-VM's initramfs with busybox: the bug of a fresh machine.
    assert nsetup.VM_EXECUTABLES["busybox"] == "busybox-static"
    # The UML kernel the site boots (netrepro.sites.local.uml) and the capacity test's tools, in every mode.
    assert nsetup.UML_EXECUTABLES == {uml.UML_BINARY: "user-mode-linux"}
    assert nsetup.LOCAL_EXECUTABLES["iperf3"] == "iperf3" and nsetup.LOCAL_EXECUTABLES["ethtool"] == "ethtool"


@pytest.mark.parametrize("mode, extra", [("host", set()), ("uml", {"linux.uml"}),
                                         ("vm", {"qemu-system-x86_64", "busybox", "file", "apt-get", "apt-cache", "dpkg"})])
def test_mode_executables(mode, extra):
    assert set(nsetup.mode_executables(mode)) == set(nsetup.LOCAL_EXECUTABLES) | extra


def test_missing_executables_name_their_package(monkeypatch):
    monkeypatch.setitem(nsetup.LOCAL_EXECUTABLES, "nr-no-such-tool", "nr-no-such-package")
    assert nsetup.missing_executables("host") == {"nr-no-such-tool": "nr-no-such-package"}
    assert nsetup.missing_packages("host") == ["nr-no-such-package"]
    monkeypatch.setattr(nsetup, "UML_EXECUTABLES", {"nr-no-such-uml": "nr-no-such-uml-package"})
    assert nsetup.missing_packages("uml") == ["nr-no-such-package", "nr-no-such-uml-package"]
    assert nsetup.missing_packages("vm") == ["nr-no-such-package"]


def test_check_names_what_is_missing_and_changes_nothing(monkeypatch, tmp_path):
    monkeypatch.setitem(nsetup.LOCAL_EXECUTABLES, "nr-no-such-tool", "nr-no-such-package")
    out: list[str] = []
    before = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    rc = runner_setup.setup("local", check_only=True, log=out.append)
    assert rc == 1
    assert any("nr-no-such-tool (nr-no-such-package)" in line for line in out), out
    after = set(os.listdir("/run/netns")) if os.path.isdir("/run/netns") else set()
    assert before == after


def test_check_in_uml_mode_names_the_uml_package(monkeypatch):
    monkeypatch.setenv("LOCAL_MODE", "uml")
    monkeypatch.setattr(nsetup, "UML_EXECUTABLES", {"nr-no-such-uml": "nr-no-such-uml-package"})
    out: list[str] = []
    assert runner_setup.setup("local", check_only=True, log=out.append) == 1
    assert out[0] == "[setup] local site, User-Mode Linux (uml) mode: LOCAL_MODE=uml", out
    assert any("nr-no-such-uml (nr-no-such-uml-package)" in line for line in out), out
    assert not any("micro-VM kernel" in line for line in out), out


def test_cli_check_exit_status():
    """`netrepro setup --check` answers 0 or 1 and prints what it checked (no traceback)."""
    r = subprocess.run([sys.executable, "-m", "netrepro", "setup", "--check"], cwd=REPO,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode in (0, 1), r.stderr
    assert "[setup] local site" in r.stdout and "Traceback" not in r.stderr
