"""The records the docs cite are there, and the tables built from them are complete and true
(issue 56: artifact-evaluation.md's table of full-length runs left out the three latest, two of
whose values fell outside its ranges; the README's headline report was written by analysis
0.1.0, without what the README says a report shows).

- every relative link of README.md, docs/ and docs/runs/README.md leads to a file or folder;
- the "Expected numbers" of docs/artifact-evaluation.md link every full-length emulated record
  of pie-vs-red in docs/runs (or say it is left out), each cell's range holds every included
  record's median, and its bracketed value is the newest record's; the number of sets it
  states is the number it includes;
- the record whose figure the README shows was analysed by the current netrepro, and its
  report has the sections the README says a report has.

The records are read from their own files: run.json (inside the crate for a run kept as an
RO-Crate), summary.csv, repetitions.csv and the report's first lines.
"""

from __future__ import annotations

import csv
import io
import json
import re
import zipfile
from pathlib import Path

import pytest

import netrepro
from test_docs import PAGES as DOC_PAGES, REPO
from netrepro.runfolder.record import RunRecord

RUNS = REPO / "docs" / "runs"
PAGES = [*DOC_PAGES, RUNS / "README.md"]
#: A Markdown link or image target: ``](target)``, without its #anchor.
LINK_RE = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")
NUMBERS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven twelve thirteen "
                                      "fourteen fifteen sixteen seventeen eighteen nineteen twenty".split())}


def broken_links(page: Path, text: str | None = None) -> list[str]:
    """The relative link targets of ``page`` (its text, or ``text``) that do not exist."""
    text = page.read_text() if text is None else text
    return sorted({t for t in LINK_RE.findall(text)
                   if not re.match(r"^[a-z]+:", t) and not (page.parent / t).exists()})


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_relative_link_leads_somewhere(page):
    bad = broken_links(page)
    assert not bad, f"{page.relative_to(REPO)} links to what does not exist: {bad}"


# --- the records ------------------------------------------------------------------------------

def record_facts(folder: Path) -> dict | None:
    """``{experiment, site, time_scale, sets}`` of a record folder of docs/runs: from its
    run.json (or its crate's), a single run (``sets`` 1); from its report's first lines and
    repetitions.csv, a run repeated N times (``sets`` N); None for any other record (a study,
    a comparison, consoles only)."""
    run = None
    if (folder / "run.json").is_file():
        run = json.loads((folder / "run.json").read_text())
    else:
        for z in folder.glob("*-crate.zip"):
            with zipfile.ZipFile(z) as zf:
                run = json.loads(zf.read("run.json"))
    if run is not None:
        rec = RunRecord.from_json(run, folder)
        return {"experiment": rec.experiment, "site": rec.site, "time_scale": float(rec.time_scale), "sets": 1}
    if (folder / "repetitions.csv").is_file() and (folder / "report.md").is_file():
        m = re.search(r"Experiment `([\w-]+)`, site (\w+)[^,]*, TIME_SCALE ([\d.]+)", (folder / "report.md").read_text())
        reps = json.loads((folder / "verdict.json").read_text()).get("repetitions")
        if m and reps:
            return {"experiment": m.group(1), "site": m.group(2), "time_scale": float(m.group(3)), "sets": int(reps)}
    return None


def full_length_emulated(experiment: str) -> dict[str, dict]:
    """The records of docs/runs of ``experiment`` on the local site at TIME_SCALE 1: name -> facts."""
    out = {}
    for folder in sorted(p for p in RUNS.iterdir() if p.is_dir()):
        f = record_facts(folder)
        if f and f["experiment"] == experiment and f["site"] == "local" and f["time_scale"] == 1.0:
            out[folder.name] = f
    return out


def medians(folder: Path, statistic: str = "queue_delay_median_ms", subject: str = "all") -> dict[tuple, list[float]]:
    """(trial, phase) -> the record's values of ``statistic`` of ``subject`` per phase: one for a
    single run (summary.csv, or the version 1 file's ``delay_median_ms``), the least and the
    greatest over the repetitions for a repeated run (repetitions.csv)."""
    out: dict[tuple, list[float]] = {}
    if (folder / "summary.csv").is_file():
        rows = list(csv.DictReader(io.StringIO((folder / "summary.csv").read_text())))
        for r in rows:
            if "statistic" in r:
                if r["statistic"] == statistic and r["subject"] == subject and r["phase"] != "all":
                    out[(r["trial"], r["phase"])] = [float(r["value"])]
            elif r["phase"] != "all":   # version 1: one row per trial and phase, subject all
                out[(f"{r['aqm']}-{r['variant']}", r["phase"])] = [float(r["delay_median_ms"])]
        return out
    for r in csv.DictReader(io.StringIO((folder / "repetitions.csv").read_text())):
        if r["statistic"] in (statistic, "delay_median_ms") and r["subject"] == subject and r["phase"] != "all":
            out[(r["trial"], r["phase"])] = [float(r["min"]), float(r["max"])]
    return out


# --- artifact-evaluation.md's expected numbers -------------------------------------------------

CELL_RE = re.compile(r"^(-?[\d.]+)-(-?[\d.]+) \((-?[\d.]+)\)$")


def expected_numbers(text: str) -> dict:
    """The section "Expected numbers" of artifact-evaluation.md read: ``{"linked": [records],
    "left_out": [records], "sets": N, "last": record, "cells": {(trial, phase): (lo, hi, last)}}``.
    A record is left out when linked in a paragraph that starts with "Left out"."""
    section = text.split("## Expected numbers", 1)[1].split("\n## ", 1)[0]
    paras = re.split(r"\n\s*\n", section)
    link = r"\]\((?:\.\./)?runs/([\w.-]+)/?\)"
    left_out = [r for p in paras if p.lstrip().startswith("Left out") for r in re.findall(link, p)]
    linked = [r for p in paras if not p.lstrip().startswith("Left out") for r in re.findall(link, p)]
    sets = re.search(r"\b(\w+) full-length sets\b", section)
    last = re.search(r"the last run's value\s*\(([\w.-]+)\)", section)
    cells, phases = {}, []
    for ln in section.splitlines():
        cols = [c.strip() for c in ln.strip().strip("|").split("|")]
        if cols[0] == "trial":
            phases = cols[1:]
        elif cols[0].startswith("*simulated"):
            break
        elif phases and len(cols) == len(phases) + 1 and CELL_RE.match(cols[1]):
            for ph, cell in zip(phases, cols[1:]):
                lo, hi, br = map(float, CELL_RE.match(cell).groups())
                cells[(cols[0], ph)] = (lo, hi, br)
    return {"linked": linked, "left_out": left_out, "sets": NUMBERS.get(sets.group(1)) if sets else None,
            "last": last.group(1) if last else None, "cells": cells}


def table_problems(text: str, experiment: str = "pie-vs-red") -> list[str]:
    """What the expected numbers of ``text`` get wrong against docs/runs."""
    table = expected_numbers(text)
    records = full_length_emulated(experiment)
    bad = [f"{r}: not linked (nor left out)" for r in records if r not in table["linked"] + table["left_out"]]
    included = [r for r in records if r in table["linked"] and r not in table["left_out"]]
    if table["sets"] != sum(records[r]["sets"] for r in included):
        bad.append(f"states {table['sets']} sets, includes {sum(records[r]['sets'] for r in included)}")
    newest = max(included, key=lambda r: re.search(r"\d{4}-\d\d-\d\d", r).group(0), default=None)
    if table["last"] != newest:
        bad.append(f"brackets the values of {table['last']}, the newest record is {newest}")
    if not table["cells"]:
        bad.append("no table of ranges")
    for r in included:
        got = medians(RUNS / r)
        for key, (lo, hi, br) in table["cells"].items():
            vals = got.get(key)
            if vals is None:
                bad.append(f"{r}: no value for {key}")
            elif not all(lo <= v <= hi for v in vals):
                bad.append(f"{r}: {key} {vals} outside {lo:g}-{hi:g}")
            elif r == newest and vals != [br]:
                bad.append(f"{r}: {key} {vals} where the table brackets {br:g}")
    return bad


def test_the_expected_numbers_list_every_full_length_record_and_hold_their_values():
    bad = table_problems((REPO / "docs" / "artifact-evaluation.md").read_text())
    assert not bad, "docs/artifact-evaluation.md, Expected numbers: " + "; ".join(bad)


def test_the_table_check_can_fail():
    text = (REPO / "docs" / "artifact-evaluation.md").read_text()
    records = full_length_emulated("pie-vs-red")
    assert len(records) >= 10 and "pie-vs-red-crate-local-vm-2026-11-29" in records
    newest = "pie-vs-red-crate-local-vm-2026-11-29"
    assert any(newest in b for b in table_problems(text.replace(f"runs/{newest}/", "runs/elsewhere/")))
    cell = next(iter(expected_numbers(text)["cells"]))
    row = next(ln for ln in text.splitlines() if ln.startswith(f"| {cell[0]} |"))
    lo = row.split("|")[2].strip().split("-")[0] if not row.split("|")[2].strip().startswith("-") else None
    if lo is not None:   # narrow the first cell's range above its low end: a value falls outside
        narrowed = row.replace(f"| {lo}-", f"| {float(lo) + 0.25:g}-", 1)
        assert any("outside" in b for b in table_problems(text.replace(row, narrowed)))


# --- the README's headline record -------------------------------------------------------------

#: What the README says a report shows -> the section of report.md that shows it.
REPORT_SECTIONS = {"the figures": "## Figures",
                   "what the run found beside what the paper and the 2016 reproduction state": "## What each found",
                   "the health of every trial": "## Health of the substrate",
                   "how the run": "## How this run was made"}


def headline_analysis(readme: str) -> Path:
    """The analysis folder of the README's first figure (its figures/ folder's parent)."""
    target = re.search(r"!\[[^\]]*\]\(([^)]+)\)", readme).group(1)
    return (REPO / target).parent.parent


def headline_problems(readme: str) -> list[str]:
    """What is wrong with the README's headline record: its analysis not made by this netrepro
    (analysis.json's ``made_by.package``), or its report lacking a section the README names."""
    folder = headline_analysis(readme)
    bad = []
    made = json.loads((folder / "analysis.json").read_text()).get("made_by") or {} if (folder / "analysis.json").is_file() else {}
    if made.get("package") != netrepro.__version__:
        bad.append(f"{folder.relative_to(REPO)} analysed by netrepro {made.get('package') or made.get('version')}, "
                   f"not {netrepro.__version__}")
    bullet = re.search(r"^- `report\.md`:(.*?)(?=^- )", readme, re.S | re.M).group(1)
    report = (folder / "report.md").read_text()
    for says, section in REPORT_SECTIONS.items():
        if " ".join(says.split()) not in " ".join(bullet.split()):
            bad.append(f"the README no longer says a report shows {says!r}: update REPORT_SECTIONS")
        elif not re.search("^" + re.escape(section) + "$", report, re.M):
            bad.append(f"{folder.relative_to(REPO)}/report.md has no {section!r}")
    return bad


def test_the_readme_headline_is_analysed_by_this_netrepro_and_its_report_shows_what_the_readme_says():
    bad = headline_problems((REPO / "README.md").read_text())
    assert not bad, "; ".join(bad)


def test_the_headline_check_can_fail():
    readme = (REPO / "README.md").read_text()
    old = "docs/runs/pie-vs-red-final-local-vm-2026-11-25/figures/queueing-delay.png"
    first = re.search(r"!\[[^\]]*\]\(([^)]+)\)", readme).group(1)
    bad = headline_problems(readme.replace(first, old))
    assert any("analysed by netrepro" in b for b in bad) and any("What each found" in b for b in bad)
    assert broken_links(REPO / "README.md", "see [x](docs/runs/nowhere/) and [y](https://example.org)") == ["docs/runs/nowhere/"]


# --- how long a command takes, page against page ------------------------------------------------

#: A duration a page gives: ``about 13 minutes``, ``22 min (1328 s)``.
DURATION_RE = re.compile(r"\babout (\d+(?:\.\d+)?) minutes\b|\b(\d+(?:\.\d+)?) min \(")


def stated_durations(text: str) -> list[tuple[str, float]]:
    """(command, minutes) of each sentence or table row of ``text`` whose subject is a make
    command (its first backticked span, within its first three words or its first cell) and
    that gives it a duration (:data:`DURATION_RE`), the command without a variable that changes
    what it runs (EXPERIMENT, SITE, TIME_SCALE, REPEAT)."""
    units = []
    for para in re.split(r"\n\s*\n", text):
        if para.lstrip().startswith("|"):
            units += [ln.strip().strip("|").split("|", 1)[-1] if ln.count("|") > 2 and "`make" not in ln.split("|")[1]
                      else ln.strip().strip("|") for ln in para.splitlines()]
        else:
            units += re.split(r"(?<=[.;])\s+(?=[A-Z(`\[])", " ".join(para.split()))
    out = []
    for u in units:
        u = u.strip()
        m = re.match(r"^(?:\S+ ){0,2}?\s*`(make [a-z-]+)((?: [A-Z_]+=\S*)*)`", u)
        d = DURATION_RE.search(u)
        if m and d and not re.search(r"EXPERIMENT=|SITE=|TIME_SCALE=|REPEAT=", m.group(2) + u[:d.start()]):
            out.append((m.group(1), float(d.group(1) or d.group(2))))
    return out


def disagreeing_durations(texts: dict[str, str]) -> dict[str, set]:
    """command -> {(minutes, page)} for each command the pages give more than one duration."""
    seen: dict[str, set] = {}
    for page, text in texts.items():
        for cmd, minutes in stated_durations(text):
            seen.setdefault(cmd, set()).add((minutes, page))
    return {c: v for c, v in seen.items() if len({m for m, _ in v}) > 1}


def test_every_page_gives_a_command_the_same_duration():
    texts = {str(p.relative_to(REPO)): p.read_text() for p in PAGES if p.parent != RUNS}
    assert any(c == "make quick" for t in texts.values() for c, _ in stated_durations(t))
    bad = disagreeing_durations(texts)
    assert not bad, f"pages give these commands different durations: {bad}"


def test_the_duration_check_can_fail():
    readme = "| `make quick` | pie-vs-red: about 13 minutes on a 2-core machine |"
    ae = "`make quick` runs the local site at 0.5 (about 15\nminutes on a 2-core machine), then the simulation."
    assert stated_durations(readme) == [("make quick", 13.0)] and stated_durations(ae) == [("make quick", 15.0)]
    assert disagreeing_durations({"README.md": readme, "ae.md": ae}) == {"make quick": {(13.0, "README.md"), (15.0, "ae.md")}}
    assert stated_durations("`make quick EXPERIMENT=pie-lab` takes about 3 minutes.") == []
