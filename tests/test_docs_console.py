"""Console excerpts in README.md and docs/ are what the code prints (issue 56: the README showed
the claims before the wall time, an order the code never printed).

An excerpt is a fenced block preceded by an HTML comment naming the command and the recorded
run it comes from, and where the excerpt shows that run:

    <!-- console of netrepro reproduce EXPERIMENT: record docs/runs/<record>/<run>-crate.zip, shown as <run folder> -->
    <!-- console of netrepro analyze EXPERIMENT, last lines: record ..., shown as <folder of the crate> -->

The test analyses that recorded run again with the current analysis (the crate holds its raw
data), hands the result to the command's own printing code (:func:`netrepro.cli.reproduce.cmd_reproduce`
with the site's steps replaced by the record and its timings.json;
:func:`netrepro.cli.step_commands.cmd_analyze` with the analysis already made) and compares
what it prints with the excerpt, line by line (its last lines only, when the comment says so). Every fenced block that holds a
console line (a step's ``[reproduce]``/``[analyze]``... prefix, or a claim's ``[HOLDS]``...)
must carry such a comment, so that no excerpt escapes the check.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import shutil
import zipfile
from pathlib import Path

import pytest

import analysis
from analysis import analyze
from analysis.console import LABEL
from netrepro.cli import reproduce, step_commands
from netrepro.cli.commands import build_parser
from test_docs import PAGES, REPO

#: The comment that marks an excerpt, and the fenced block right after it.
EXCERPT_RE = re.compile(r"<!-- console of netrepro (?P<command>reproduce|analyze) (?P<experiment>[\w.-]+)(?P<tail>, last lines)?: "
                        r"record (?P<record>\S+), shown as (?P<shown>\S+) -->\n```\n(?P<body>.*?)```", re.S)
#: A line the console prints: a step's prefix, or a claim's status label.
STEPS = ("setup", "up", "provision", "run", "analyze", "reproduce", "down", "quick", "export")
CONSOLE_LINE_RE = re.compile(r"^\s*\[(?:" + "|".join(STEPS + tuple(LABEL.values())) + r")\]", re.M)


def excerpts(text: str) -> list[dict]:
    """The marked excerpts of ``text``: ``{experiment, record, run_dir, body}``."""
    return [m.groupdict() for m in EXCERPT_RE.finditer(text)]


def unmarked_console_blocks(text: str) -> list[str]:
    """The fenced blocks of ``text`` that hold a console line but no marking comment: the
    first console line of each."""
    marked = {m.start("body") for m in EXCERPT_RE.finditer(text)}
    out = []
    for m in re.finditer(r"```[^\n]*\n(.*?)```", text, re.S):
        line = CONSOLE_LINE_RE.search(m.group(1))
        if line and m.start(1) not in marked:
            out.append(m.group(1)[line.start():].splitlines()[0].strip())
    return out


_ANALYSED: dict[Path, tuple] = {}


def analysed(crate: Path, tmp: Path):
    """The recorded run ``crate`` (a crate zip with its raw data) copied into ``tmp`` and
    analysed there as ``netrepro analyze`` does (into a folder beside the copy), once per test
    session (about 30 s on a 2-core machine): (the copy's folder, the AnalysisResult)."""
    if crate not in _ANALYSED:
        copy = tmp / crate.name
        shutil.copy(crate, copy)
        _ANALYSED[crate] = (tmp, analyze(copy, figures=False))
    return _ANALYSED[crate]


def render(command: str, experiment: str, crate: Path, shown: str, tmp: Path) -> str:
    """What ``netrepro COMMAND EXPERIMENT`` prints for the recorded run ``crate``, judged by
    the current analysis, with the run's folder (reproduce) or the crate's folder (analyze)
    written as ``shown``: the lines of :func:`netrepro.cli.reproduce.cmd_reproduce` after the
    site's steps (which the record stands in for), or of :func:`netrepro.cli.step_commands.cmd_analyze`."""
    folder, result = analysed(crate, tmp)
    out = io.StringIO()
    with pytest.MonkeyPatch.context() as mp, contextlib.redirect_stdout(out):
        if command == "reproduce":
            with zipfile.ZipFile(crate) as z:
                timings = json.loads(z.read("timings.json"))
            mp.setattr(reproduce, "check_environment", lambda *a, **k: None)
            mp.setattr(reproduce, "_reproduce", lambda *a, **k: (Path(shown), result.verdict, timings))
            assert reproduce.cmd_reproduce(build_parser().parse_args(["reproduce", experiment])) == 0
        else:
            mp.setattr(analysis, "analyze", lambda *a, **k: result)
            args = build_parser().parse_args(["analyze", experiment, "--run", str(folder / crate.name)])
            assert step_commands.cmd_analyze(args) == 0
    return out.getvalue().replace(str(folder), shown)


ALL = [(p, e) for p in PAGES for e in excerpts(p.read_text())]


def test_the_docs_have_excerpts_to_check():
    assert any(p.name == "README.md" for p, _ in ALL)


@pytest.mark.parametrize("page,excerpt", ALL, ids=[f"{p.relative_to(REPO)}:{e['command']}" for p, e in ALL])
def test_every_console_excerpt_is_what_the_code_prints(page, excerpt, tmp_path):
    record = REPO / excerpt["record"]
    assert record.is_file(), f"{page.relative_to(REPO)}: the excerpt's record {excerpt['record']} does not exist"
    printed = render(excerpt["command"], excerpt["experiment"], record, excerpt["shown"], tmp_path).splitlines()
    want = excerpt["body"].splitlines()
    if excerpt["tail"]:
        printed = printed[-len(want):]
    assert want == printed, (f"{page.relative_to(REPO)}: the excerpt from {excerpt['record']} is not what "
                             "netrepro prints now:\n" + "\n".join(printed))


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_console_excerpt_names_its_record(page):
    bad = unmarked_console_blocks(page.read_text())
    assert not bad, f"{page.relative_to(REPO)}: console excerpts without the comment naming their record: {bad}"


def test_the_checks_can_fail(tmp_path):
    text = ("<!-- console of netrepro reproduce x: record a.zip, shown as r -->\n```\n[reproduce] wall time 1 s\n```\n\n"
            "```\n  [HOLDS] c: fine\n[analyze] verdict: reproduced\n```\n")
    assert [e["body"] for e in excerpts(text)] == ["[reproduce] wall time 1 s\n"]
    assert unmarked_console_blocks(text) == ["[HOLDS] c: fine"]
    # the order the README once showed (the claims, then the wall time) is not what is printed
    page, excerpt = next((p, e) for p, e in ALL if p.name == "README.md")
    printed = render("reproduce", excerpt["experiment"], REPO / excerpt["record"], excerpt["shown"], tmp_path).splitlines()
    assert printed[0].startswith("[reproduce] wall time ") and printed[1].startswith("  [")
    assert printed[-1].startswith("[analyze] verdict: ")
    assert [*printed[1:-1], printed[0], printed[-1]] != printed
