"""The user's documentation matches the code: every path of the repository, make target,
netrepro command and site option that README.md and docs/ (not the run records of docs/runs,
which are history) name exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from netrepro.cli import commands as cli
from netrepro.sites import SITES, site_class

REPO = Path(__file__).resolve().parent.parent
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md")), *sorted((REPO / "docs" / "sites").glob("*.md"))]
#: A path of the repository as the docs write it: a top folder, then a path (no placeholder).
PATH_RE = re.compile(r"(?<![\w/.<-])((?:netrepro|roles|playbooks|tests|experiments|rspecs|analysis|tools|inventory)"
                     r"/[A-Za-z0-9_./-]*[A-Za-z0-9_])(?![\w<>*])")
#: A command as the docs write one: in an inline span, or a line of a code block, that starts with it.
COMMAND_RE = re.compile(r"^(?:\$ )?(?:sudo )?(?:[A-Z_]+=\S+ )*(make|netrepro|\.venv/bin/python -m netrepro|python -m netrepro)"
                        r"((?: [^\s#]+)*)")


def commands(text: str) -> list[tuple[str, list[str]]]:
    """(program, its words) of every command the page writes: inline spans and the lines of
    fenced or indented code blocks that start with ``make`` or ``netrepro``."""
    out = []
    lines = re.findall(r"`([^`\n]+)`", text)
    fenced = False
    for ln in text.splitlines():
        if ln.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if fenced or ln.startswith("    "):
            lines.append(ln.strip())
    for ln in lines:
        m = COMMAND_RE.match(ln.strip())
        if m:
            out.append(("make" if m.group(1) == "make" else "netrepro", m.group(2).split()))
    return out


def _make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z0-9-]*):", (REPO / "Makefile").read_text(), re.M))


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_repository_path_a_page_names_exists(page):
    missing = []
    for path in set(PATH_RE.findall(page.read_text())):
        path = path.split("::")[0].rstrip(".")
        if "/my-" in path:   # a name the reader makes (experiments/my-exp)
            continue
        if not (REPO / path).exists():
            missing.append(path)
    assert not missing, f"{page.relative_to(REPO)} names paths that do not exist: {sorted(missing)}"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_command_and_option_a_page_names_exists(page):
    targets = _make_targets()
    subcommands = set(cli.build_parser()._subparsers._group_actions[0].choices)
    options = {k for name in SITES for k in site_class(name).OPTIONS}
    bad = []
    for prog, words in commands(page.read_text()):
        if prog == "make":
            for w in words:
                if "=" in w or w.startswith(("-", "<", "'", '"', "&", "|", ";")) or w.endswith("..."):
                    break   # a variable, an option, a placeholder or the shell's
                if w not in targets:
                    bad.append(f"make {w}")
        elif words and not words[0].startswith(("-", "<")):
            if words[0] not in subcommands:
                bad.append(f"netrepro {words[0]}")
        for w, nxt in zip(words, words[1:]):
            if w == "--option" and "=" in nxt and nxt.strip("'\"").split("=")[0] not in options | {"key", "KEY"}:
                bad.append(f"--option {nxt}")
    assert not bad, f"{page.relative_to(REPO)} names what the code does not have: {sorted(set(bad))}"


def test_the_checks_can_fail():
    assert PATH_RE.findall("see `netrepro/sites/nowhere.py` and roles/kernel_capability") == [
        "netrepro/sites/nowhere.py", "roles/kernel_capability"]
    assert not (REPO / "netrepro/sites/nowhere.py").exists()
    text = "run `make reproduce frobnicate SITE=x`, then\n\n    netrepro frob pie-vs-red --option nope=1\n"
    assert commands(text) == [("make", ["reproduce", "frobnicate", "SITE=x"]),
                              ("netrepro", ["frob", "pie-vs-red", "--option", "nope=1"])]
    assert "frobnicate" not in _make_targets()


def test_every_recorded_finding_names_records_that_exist():
    """A claim's ``finding`` (docs/experiment-format.md) names the docs/runs records that show
    it; each must be there, and mention the claim."""
    import yaml

    seen = 0
    for f in sorted((REPO / "experiments").glob("*/experiment.yml")):
        for c in yaml.safe_load(f.read_text())["claims"]:
            for run in (c.get("finding") or {}).get("runs", []):
                readme = REPO / "docs" / "runs" / run / "README.md"
                assert readme.is_file(), (f, c["id"], run)
                assert c["id"] in readme.read_text(), (f, c["id"], run)
                seen += 1
    assert seen >= 3
