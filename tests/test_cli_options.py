"""The command line's options that issue 24 added or made reachable, in process (no site is
made, reserved or contacted):

- ``--rate-scale`` on provision, run and reproduce: it wins over RATE_SCALE, is checked the
  same way (netrepro.model.rate_scale_option, the line naming --rate-scale), reaches the step
  that chooses the scale, and is recorded as the reason of the scale chosen;
- ``setup --option mode=...`` picks the local site's mode; a key the site does not declare is
  refused in one line; ``setup --site fabric`` installs fablib (pip) and what it builds with.
"""

from __future__ import annotations

import sys

import pytest

from netrepro.cli import commands as cli, reproduce, step_commands
from netrepro.sites import OPTION_ENV
from netrepro.core import packages
from netrepro.runner import setup as nsetup
from netrepro.sites.fabric import setup as fabric_setup
from netrepro.model import choose_rate_scale
from netrepro.runner import steps, trialvars
from netrepro.experiment.spec import REPO_ROOT, load_spec


@pytest.fixture(autouse=True)
def clean_env(monkeypatch, tmp_path):
    """No site option, scale or site variable from this machine; state in tmp_path."""
    for var in [*OPTION_ENV, "RATE_SCALE", "SITE", "TIME_SCALE", "REPEAT", "SWEEP"]:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr(steps, "STATE_ROOT", tmp_path / "state")


def _err_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]



# --- the run's arguments, checked once ---------------------------------------------------------------
def test_jobs_on_a_site_that_runs_one_trial_at_a_time_is_refused_alike_by_every_command(capsys, monkeypatch):
    """--jobs 2 on the local site: run, its dry run and reproduce (before the site is contacted)
    refuse it in one and the same line (netrepro.runner.instances.plan_run), exit 2."""
    monkeypatch.setattr(steps, "preflight_reservations", lambda *a, **k: pytest.fail("the site was contacted"))
    monkeypatch.setattr(steps, "open_site", lambda *a, **k: pytest.fail("the site was opened"))
    lines = []
    for argv in (["run"], ["run", "--dry-run"], ["reproduce"], ["reproduce", "--dry-run"]):
        assert cli.main([argv[0], "pie-vs-red", "--site", "local", "--jobs", "2", *argv[1:]]) == 2
        lines.append(_err_line(capsys))
    assert len(set(lines)) == 1, lines
    assert lines[0].startswith("netrepro: command line: --jobs: 2: site local runs its trials one at a time"), lines

# --- --rate-scale -------------------------------------------------------------------------------
def test_the_option_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("RATE_SCALE", "0.5")
    assert trialvars.rate_scale_request("0.1") == ("0.1", "--rate-scale")
    assert trialvars.rate_scale_request(None) == ("0.5", "RATE_SCALE")
    monkeypatch.delenv("RATE_SCALE")
    assert trialvars.rate_scale_request(None) == (None, "RATE_SCALE")


def test_the_reason_names_where_the_scale_came_from():
    m = load_spec("pie-lab").model
    assert choose_rate_scale(m, 500, "0.1", name="--rate-scale") == (0.1, "--rate-scale=0.1")
    assert choose_rate_scale(m, 500, "0.1") == (0.1, "RATE_SCALE=0.1")
    with pytest.raises(ValueError, match=r"^--rate-scale: expected a number in \[0.001, 1\], got '2'$"):
        choose_rate_scale(m, 500, "2", name="--rate-scale")


@pytest.mark.parametrize("command, target", [("provision", "provision"), ("run", "run"), ("reproduce", "provision")])
def test_the_option_reaches_the_step_that_chooses_the_scale(command, target, monkeypatch):
    seen = {}

    class Stop(Exception):
        pass

    def fake(*args, **kwargs):
        seen.update(kwargs)
        raise Stop

    monkeypatch.setenv("RATE_SCALE", "junk")  # the option wins: the junk is never read
    class Site:
        def preflight(self):
            pass

    monkeypatch.setattr(steps, "open_site", lambda *a, **k: Site())
    monkeypatch.setattr(steps, "up", lambda *a, **k: None)
    monkeypatch.setattr(steps, "down", lambda *a, **k: None)
    monkeypatch.setattr(steps, "provision", fake)
    monkeypatch.setattr(step_commands, "run", fake)
    monkeypatch.setattr(reproduce, "run", fake)
    with pytest.raises(Stop):
        cli.main([command, "pie-lab", "--site", "ns3", "--rate-scale", "0.1"])
    assert seen.get("rate_scale") == "0.1"


def test_a_bad_option_is_one_line_before_anything(capsys, monkeypatch):
    monkeypatch.setattr(steps, "provision", lambda *a, **k: pytest.fail("provisioned"))
    assert cli.main(["provision", "pie-vs-red", "--site", "ns3", "--rate-scale", "0.5"]) == 2
    line = _err_line(capsys)
    assert line.startswith("netrepro: --rate-scale=0.5: ") and "rate_scale.allowed" in line \
        and line.endswith("leave out --rate-scale or give it 1"), line


def test_the_chosen_scale_records_the_option(monkeypatch):
    spec = load_spec("pie-lab")

    class Site:
        state: dict = {}

        def load_state(self):
            return dict(self.state)

        def save_state(self, st):
            self.state = dict(st)

        def status(self):
            return {}

    site = Site()
    monkeypatch.setenv("RATE_SCALE", "0.2")
    scaled = trialvars.spec_at_rate_scale(spec, site, choose=True, rate_scale="0.5")
    assert site.state["rate_scale"] == {"k": 0.5, "why": "--rate-scale=0.5"}
    assert scaled is not spec
    trialvars.spec_at_rate_scale(spec, site, choose=True)
    assert site.state["rate_scale"] == {"k": 0.2, "why": "RATE_SCALE=0.2"}


def test_a_run_refuses_a_scale_other_than_the_provisioned_one(monkeypatch):
    spec = load_spec("pie-lab")

    class Site:
        state = {"rate_scale": {"k": 0.5, "why": "RATE_SCALE=0.5"}}

        def load_state(self):
            return dict(self.state)

        def status(self):
            return pytest.fail("a kept scale is not chosen again")

    with pytest.raises(ValueError) as exc:
        trialvars.spec_at_rate_scale(spec, Site(), rate_scale="0.2")
    assert str(exc.value) == ("--rate-scale=0.2: the site was provisioned at rate scale 0.5 (RATE_SCALE=0.5); "
                              "expected 0.5 or nothing, or provision it again with --rate-scale=0.2")
    monkeypatch.setenv("RATE_SCALE", "0.2")
    with pytest.raises(ValueError, match=r"^RATE_SCALE=0.2: the site was provisioned at rate scale 0.5 "):
        trialvars.spec_at_rate_scale(spec, Site())
    assert trialvars.spec_at_rate_scale(spec, Site(), rate_scale="0.50") is not spec  # the same scale, written otherwise
    monkeypatch.delenv("RATE_SCALE")
    assert trialvars.spec_at_rate_scale(spec, Site()) is not spec  # nothing asked: the kept scale


# --- setup ------------------------------------------------------------------------------------------
def test_setup_takes_the_local_mode_as_an_option(monkeypatch):
    seen = {}
    monkeypatch.setattr(step_commands, "setup", lambda **kw: seen.update(kw) or 0)
    assert cli.main(["setup", "--site", "local", "--check", "--option", "mode=uml"]) == 0
    assert seen["options"] == {"mode": "uml"} and seen["check_only"]
    assert cli.main(["setup", "--site", "local", "--check"]) == 0
    assert seen["options"] == {}  # LOCAL_MODE, else auto: netrepro.sites.local.setup.local_mode


def test_setup_refuses_a_bad_mode_naming_the_option(capsys):
    assert cli.main(["setup", "--site", "local", "--check", "--option", "mode=fast"]) == 2
    assert _err_line(capsys) == "netrepro: site local: option mode='fast' (from --option): expected one of: auto, host, uml, vm"


def test_setup_refuses_an_option_the_site_does_not_declare(capsys):
    assert cli.main(["setup", "--site", "ns3", "--check", "--option", "mode=uml"]) == 2
    assert _err_line(capsys) == ("netrepro: site ns3: unknown option 'mode' (from --option); expected one of the "
                                 "site's options: rate_ceiling_mbit, executor, slurm_partition, slurm_time_min, "
                                 "slurm_mem_mb, slurm_cpus, slurm_folder")


def _fabric(monkeypatch, *, module: str, tools: bool, root: bool) -> list:
    """setup_fabric's world: fablib importable or not, the build tools there or not, root or not;
    returns the list the subprocess calls go into."""
    calls: list = []
    monkeypatch.setattr(fabric_setup, "FABRIC_MODULE", module)
    monkeypatch.setattr(packages, "have", lambda path_or_exe: tools)
    monkeypatch.setattr(packages.os, "geteuid", lambda: 0 if root else 1000)

    class Done:
        returncode, stdout, stderr = 0, "", ""

    monkeypatch.setattr(packages.subprocess, "run", lambda argv, **kw: calls.append(argv) or Done())
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
