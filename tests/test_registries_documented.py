"""The registries of health checks (netrepro/model/health.py ``HEALTH_CHECKS``) and of
statistics (netrepro/model/vocabulary.py ``STATISTICS``) against the pages and docstrings that
list them for people: an entry without its row, or a row naming what no entry declares, fails
naming it. docs/adding-a-health-check.md and docs/adding-a-statistic.md say where each goes.
"""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path

import analysis.health
import analysis.summary
from netrepro.model import HEALTH_CHECKS, METRICS, SCHEMA_PATH, STATISTICS, HealthCheck

REPO = Path(__file__).resolve().parent.parent
FORMAT = REPO / "docs" / "experiment-format.md"


def table_rows(page: str, section: str) -> list[list[str]]:
    """The body rows of the first table under the heading ``## <section>`` of ``page`` (its
    Markdown text), each as its cells; [] without such a table."""
    lines = page.split(f"\n## {section}\n", 1)[-1].split("\n## ", 1)[0].splitlines() if f"\n## {section}\n" in page else []
    table = [ln for ln in lines if ln.startswith("|")]
    return [[c.strip() for c in ln.strip().strip("|").split("|")] for ln in table[2:]]


def names(cell: str) -> set[str]:
    """The code spans of a cell: ``a`` and ``b`` of "`a`, `b` (note)"."""
    return set(re.findall(r"`([^`]+)`", cell))


def health_table_problems(rows: list[list[str]], checks: tuple[HealthCheck, ...]) -> list[str]:
    """What the health checks' table (rows of cells: the checks, their threshold and tunings,
    ...) and the registry ``checks`` disagree on, one line each: a check without a row, a row
    naming a check the registry lacks, a row whose thresholds are not its checks' (threshold
    and ``tuning``)."""
    by_id = {c.id: c for c in checks}
    problems, listed = [], set()
    for cells in rows:
        ids = names(cells[0])
        listed |= ids
        problems += [f"row {cells[0]}: {i} is no check of HEALTH_CHECKS" for i in sorted(ids - set(by_id))]
        want = {k for i in ids & set(by_id) for k in (by_id[i].threshold, *by_id[i].tuning)}
        if len(cells) < 2 or names(cells[1]) != want:
            problems.append(f"row {cells[0]}: thresholds {sorted(names(cells[1]) if len(cells) > 1 else [])}, "
                            f"the registry's {sorted(want)}")
    problems += [f"{c.id}: no row" for c in checks if c.id not in listed]
    return problems


def statistics_table_problems(rows: list[list[str]], statistics: set[str], other: set[str]) -> list[str]:
    """What the statistics' table (rows: the subject, its statistics) and the registry
    ``statistics`` disagree on: a statistic no row names, a name in a row that is neither a
    statistic, a pattern of some (``queue_delay_*``), nor one of ``other`` (the file's fields
    and the metrics the rows mention)."""
    named = {n for cells in rows for n in names(cells[-1])}
    covered = {s for n in named for s in fnmatch.filter(statistics, n)}
    problems = [f"{s}: no row" for s in sorted(statistics - covered)]
    problems += [f"{n}: named in the table, no statistic of STATISTICS" for n in sorted(named - other)
                 if not fnmatch.filter(statistics, n)]
    return problems


def _schema_keys(node) -> set[str]:
    """Every property name of the experiment schema (the file's fields)."""
    if isinstance(node, dict):
        return set(node.get("properties", {})) | {k for v in node.values() for k in _schema_keys(v)}
    if isinstance(node, list):
        return {k for v in node for k in _schema_keys(v)}
    return set()


def test_every_health_check_has_its_row_in_the_format_and_every_row_its_check():
    assert health_table_problems(table_rows(FORMAT.read_text(), "Health checks"), HEALTH_CHECKS) == []


def test_every_health_check_is_described_in_the_analysis():
    """analysis/health.py's docstring says how each check is measured: one entry per check."""
    doc = analysis.health.__doc__
    assert [c.id for c in HEALTH_CHECKS if f"``{c.id}``" not in doc] == []


def test_every_statistic_has_its_row_in_the_format_and_every_name_its_statistic():
    stats = {s for group in STATISTICS.values() for s in group}
    other = _schema_keys(json.loads(SCHEMA_PATH.read_text())) | {m for group in METRICS.values() for m in group}
    rows = table_rows(FORMAT.read_text(), "Statistics (summary.csv)")
    assert rows and statistics_table_problems(rows, stats, other) == []


def test_every_statistic_is_described_in_the_summary():
    """analysis/summary.py's docstring table says how each statistic is computed."""
    doc = analysis.summary.__doc__
    assert sorted(s for group in STATISTICS.values() for s in group if f"``{s}``" not in doc) == []


def test_a_missing_row_or_entry_is_found():
    """The comparisons fail both ways: a registry entry without a row, a row without an
    entry, a row with another threshold; a statistic without a row, a row naming none."""
    rows = table_rows(FORMAT.read_text(), "Health checks")
    extra = HealthCheck("ghost_check", "ghost_max_ms", "ms", "max", (), (), "a check no page lists")
    assert health_table_problems(rows, (*HEALTH_CHECKS, extra)) == ["ghost_check: no row"]
    assert health_table_problems(rows, HEALTH_CHECKS[1:]) == [
        f"row `{HEALTH_CHECKS[0].id}`: {HEALTH_CHECKS[0].id} is no check of HEALTH_CHECKS",
        f"row `{HEALTH_CHECKS[0].id}`: thresholds ['{HEALTH_CHECKS[0].threshold}'], the registry's []"]
    renamed = [[cells[0], cells[1].replace("flow_start_lag_max_ms", "flow_lag_max_ms"), *cells[2:]] for cells in rows]
    assert health_table_problems(renamed, HEALTH_CHECKS) == [
        "row `flow_start_lag`: thresholds ['flow_lag_max_ms'], the registry's ['flow_start_lag_max_ms']"]
    assert statistics_table_problems([["x", "`a`, `b_*`, `field`"]], {"a", "b_one", "c"}, {"field"}) == ["c: no row"]
    assert statistics_table_problems([["x", "`a`, `d`"]], {"a"}, set()) == [
        "d: named in the table, no statistic of STATISTICS"]
