"""The command line's options that issue 24 added or made reachable, in process (no site is
made, reserved or contacted):

- ``setup --option mode=...`` picks the local site's mode; a key the site does not declare is
  refused in one line; ``setup --site fabric`` installs fablib (pip) and what it builds with.
"""

from __future__ import annotations

import sys

import pytest

from netrepro import cli
from netrepro import setup as nsetup
from netrepro.runner import steps
from netrepro.spec import REPO_ROOT


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """No site option or site variable from this machine; state in tmp_path."""
    for var in [*cli.OPTION_ENV, "SITE"]:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(steps, "STATE_ROOT", tmp_path / "state")


def _err_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


# --- setup ------------------------------------------------------------------------------------------
def test_setup_takes_the_local_mode_as_an_option(monkeypatch):
    seen = {}
    monkeypatch.setattr(cli, "setup", lambda **kw: seen.update(kw) or 0)
    assert cli.main(["setup", "--site", "local", "--check", "--option", "mode=uml"]) == 0
    assert seen["mode"] == "uml" and seen["check_only"]
    assert cli.main(["setup", "--site", "local", "--check"]) == 0
    assert seen["mode"] is None  # LOCAL_MODE, else auto: netrepro.setup.local_mode


def test_setup_refuses_a_bad_mode_naming_the_option(capsys):
    assert cli.main(["setup", "--site", "local", "--check", "--option", "mode=fast"]) == 2
    assert _err_line(capsys) == "netrepro: site local: option mode='fast' (from --option): expected one of: auto, host, uml, vm"


def test_setup_refuses_an_option_the_site_does_not_declare(capsys):
    assert cli.main(["setup", "--site", "ns3", "--check", "--option", "mode=uml"]) == 2
    assert _err_line(capsys) == ("netrepro: site ns3: unknown option 'mode' (from --option); expected one of the "
                                 "site's options: rate_ceiling_mbit")


def _fabric(monkeypatch, *, module: str, tools: bool, root: bool) -> list:
    """setup_fabric's world: fablib importable or not, the build tools there or not, root or not;
    returns the list the subprocess calls go into."""
    calls: list = []
    monkeypatch.setattr(nsetup, "FABRIC_MODULE", module)
    monkeypatch.setattr(nsetup, "_have", lambda path_or_exe: tools)
    monkeypatch.setattr(nsetup.os, "geteuid", lambda: 0 if root else 1000)

    class Done:
        returncode, stdout, stderr = 0, "", ""

    monkeypatch.setattr(nsetup.subprocess, "run", lambda argv, **kw: calls.append(argv) or Done())
    return calls


def test_fabric_setup_with_fablib_installed_does_nothing(monkeypatch):
    calls, lines = _fabric(monkeypatch, module="json", tools=False, root=False), []
    assert nsetup.setup("fabric", log=lines.append) == 0 and calls == []
    assert lines == ["[setup] fabric site: fablib (json) installed"]


def test_fabric_setup_check_names_what_is_missing(monkeypatch):
    calls, lines = _fabric(monkeypatch, module="no_such_module_here", tools=False, root=True), []
    assert nsetup.setup("fabric", check_only=True, log=lines.append) == 1 and calls == []
    assert lines[0].startswith("[setup] missing for fablib: ") and "install as root: apt-get install gcc" in lines[0]
    assert lines[-1] == ("[setup] fabric site: missing fablib (no_such_module_here); run `make setup SITE=fabric` "
                         "(pip install -r requirements-fabric.txt)")


def test_fabric_setup_installs_the_compiler_then_fablib(monkeypatch):
    calls = _fabric(monkeypatch, module="no_such_module_here", tools=False, root=True)
    assert nsetup.setup("fabric", log=lambda s: None) == 0
    assert calls[0][:2] == ["apt-get", "update"] and calls[1][:2] == ["apt-get", "install"] and "gcc" in calls[1]
    assert calls[2] == [sys.executable, "-m", "pip", "install", "-q", "-r", str(REPO_ROOT / "requirements-fabric.txt")]


def test_fabric_setup_without_root_says_what_to_install(monkeypatch):
    calls, lines = _fabric(monkeypatch, module="no_such_module_here", tools=False, root=False), []
    assert nsetup.setup("fabric", log=lines.append) == 1 and calls == []
    assert "install as root: apt-get install gcc" in lines[-1]
