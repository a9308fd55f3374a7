"""The Makefile as a user drives it (issue 24): site options reach every command that opens a
site (``OPTIONS="k=v k=v"`` -> ``--option k=v`` each, quoted), a dry run of reproduce installs
nothing (no ``netrepro setup``: no apt-get, no kernel download), and an option the comments
of the Makefile (``#:`` lines) or of netrepro/sites/instageni/aggregates.yml name is one netrepro has.
``make -n`` only prints the recipes: nothing is run.
"""

from __future__ import annotations

import argparse
import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _make_n(*args: str) -> str:
    p = subprocess.run(["make", "-n", *args], cwd=REPO, capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return p.stdout


@pytest.mark.parametrize("target", ["reproduce", "up", "provision", "run", "down", "status", "renew", "plan"])
def test_make_passes_site_options(target):
    out = _make_n(target, "SITE=local", "OPTIONS=mgmt_subnet=10.9.0.0/24 vm_cpus=4", "DRY_RUN=1")
    line = next(ln for ln in out.splitlines() if f"-m netrepro {target} " in ln)
    assert "--site local --option 'mgmt_subnet=10.9.0.0/24' --option 'vm_cpus=4'" in line, line


def test_make_quotes_a_site_option():
    out = _make_n("plan", "OPTIONS=known_hosts=it's")
    assert "--option 'known_hosts=it'\\''s'" in out, out


def test_a_dry_run_of_reproduce_installs_nothing():
    dry = _make_n("reproduce", "DRY_RUN=1")
    assert "netrepro setup" not in dry and "apt-get" not in dry, dry
    assert "--dry-run" in dry
    dry = _make_n("reproduce-pie-vs-red", "DRY_RUN=1")
    assert "netrepro setup" not in dry and "--dry-run" in dry, dry
    assert "netrepro setup --site local" in _make_n("reproduce", "SITE=local")


def test_the_options_the_comments_name_exist():
    from netrepro.cli.commands import build_parser

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    flags = {f for sp in sub.choices.values() for a in sp._actions for f in a.option_strings}
    text = (REPO / "Makefile").read_text()
    named = re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", "\n".join(ln for ln in text.splitlines() if ln.startswith("#:")))
    yml = (REPO / "netrepro" / "sites" / "instageni" / "aggregates.yml").read_text()
    named += re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", "\n".join(ln for ln in yml.splitlines() if ln.lstrip().startswith("#")))
    assert named and not set(named) - flags, f"options named in comments that netrepro does not have: {set(named) - flags}"


def test_lint_imports_is_called_without_a_deprecated_option():
    """`make lint` and `make test` call lint-imports with the contracts file and no option its
    --help marks deprecated (import-linter 2.17: ``--config``; the file is an argument)."""
    exe = REPO / ".venv" / "bin" / "lint-imports"
    if not exe.exists():
        pytest.skip("no .venv/bin/lint-imports (`netrepro setup --dev` installs it)")
    usage = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=60).stdout
    blocks = re.split(r"\n(?=  --)", usage)
    deprecated = {b.split()[0] for b in blocks[1:] if "DEPRECATED" in b}
    calls = [ln for ln in (REPO / "Makefile").read_text().splitlines()
             if ln.startswith("\t") and "bin/lint-imports" in ln]
    assert len(calls) == 2 and all(ln.rstrip().endswith(" .importlinter") for ln in calls), calls
    used = {opt for ln in calls for opt in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", ln)}
    assert not used & deprecated, f"lint-imports options the installed version deprecates: {used & deprecated}"


@pytest.mark.parametrize("site", ["fabric", "instageni"])
def test_hours_reaches_the_initial_lease(site):
    """HOURS, as docs/reference.md says, is the initial lease of a site that has one: make exports
    it and netrepro reads it as the site option hours (where make passed it to renew only, and a
    FABRIC slice had fablib's 24 h whatever HOURS said). A real, offline `make plan`: an HOURS past
    the longest lease is refused naming HOURS, so it reached the option."""
    p = subprocess.run(["make", "-s", "plan", f"SITE={site}", "HOURS=337", "EXPERIMENT=pie-vs-red"], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert f"site {site}: option hours='337' (from HOURS): expected a number of hours above 0 and at most 336" in p.stderr


@pytest.mark.parametrize("site", ["local", "ns3"])
def test_a_site_without_a_lease_ignores_hours(site):
    """A site without a lease declares no option hours, and HOURS (exported by make to every
    command) means nothing to it: plan is not refused."""
    p = subprocess.run(["make", "-s", "plan", f"SITE={site}", "HOURS=48", "EXPERIMENT=pie-vs-red"], cwd=REPO,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
