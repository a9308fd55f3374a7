"""Evaluate the spec's claims against summary.csv (``verdict.json``).

Check kinds (experiment.yml, section "claims"); every threshold comes from the spec:

- ``bound``: every selected row (aqm, each variant, each phase) has
  ``min <= statistic <= max`` (either bound optional).
- ``rise_and_fall``: for each variant, over ``phases`` in order, the statistic is
  non-decreasing up to ``peak_phase`` and non-increasing after it, each step allowed to go
  the wrong way by at most ``tolerance_ms``; and peak - first >= ``min_rise_ms`` and
  peak - last >= ``min_rise_ms``.
- ``compare``: for each variant and phase, stat(higher) - stat(lower) >= ``min_difference_ms``
  and, if ``max_utilization_difference`` is given,
  |utilization(higher) - utilization(lower)| <= max_utilization_difference.

A value that is missing (no row, or NaN) in complete data makes its claim fail, and the
evidence says so. A claim that reads a trial whose data are incomplete (a raw file missing,
altered or unlisted, a trial not run or without a start time) is *not evaluable*: it neither
holds nor fails (:func:`evaluate`). A claim that reads a trial which failed a health check of
its substrate (:mod:`analysis.health`) is *inconclusive*: the machine, not the AQM, may have
shaped its numbers; it neither holds nor fails, and the run's verdict is ``inconclusive``.
"""

from __future__ import annotations

import math

import pandas as pd


def _lookup(summary: pd.DataFrame, aqm: str, variant: str, phase: str, column: str) -> float:
    """summary[column] of the row (aqm, variant, phase); NaN if the row or column is missing."""
    if column not in summary.columns:
        return math.nan
    row = summary[(summary["aqm"] == aqm) & (summary["variant"] == variant) & (summary["phase"] == phase)]
    if row.empty:
        return math.nan
    v = pd.to_numeric(row[column], errors="coerce").iloc[0]
    return float(v) if pd.notna(v) else math.nan


def _fmt(x: float, nd: int = 1) -> str:
    return "missing" if not math.isfinite(x) else f"{x:.{nd}f}"


def check_bound(summary: pd.DataFrame, c: dict) -> tuple[bool, str]:
    """``bound`` check; returns (holds, evidence)."""
    lo, hi, stat = c.get("min"), c.get("max"), c["statistic"]
    parts, holds, missing = [], True, []
    for v in c["variants"]:
        vals = [_lookup(summary, c["aqm"], v, p, stat) for p in c["phases"]]
        for p, x in zip(c["phases"], vals):
            if not math.isfinite(x):
                missing.append(f"{v}/{p}")
                holds = False
            elif (lo is not None and x < lo) or (hi is not None and x > hi):
                holds = False
        parts.append(f"{c['aqm']} {v}: " + ", ".join(f"{p} {_fmt(x)}" for p, x in zip(c["phases"], vals)))
    rng = f"[{'-inf' if lo is None else lo}, {'inf' if hi is None else hi}]"
    ev = f"{stat} must lie in {rng}; " + "; ".join(parts)
    if missing:
        ev += f" (no data for {', '.join(missing)})"
    return holds, ev


def check_rise_and_fall(summary: pd.DataFrame, c: dict) -> tuple[bool, str]:
    """``rise_and_fall`` check; returns (holds, evidence)."""
    stat, tol, rise = c["statistic"], float(c["tolerance_ms"]), float(c["min_rise_ms"])
    phases = list(c["phases"])
    k = phases.index(c["peak_phase"])
    holds, parts = True, []
    for v in c["variants"]:
        vals = [_lookup(summary, c["aqm"], v, p, stat) for p in phases]
        series = ", ".join(f"{p} {_fmt(x)}" for p, x in zip(phases, vals))
        if not all(math.isfinite(x) for x in vals):
            holds = False
            parts.append(f"{c['aqm']} {v}: {series}: data missing")
            continue
        bad = [f"{phases[i]}->{phases[i + 1]} {vals[i + 1] - vals[i]:+.1f}" for i in range(len(vals) - 1)
               if (i < k and vals[i + 1] - vals[i] < -tol) or (i >= k and vals[i + 1] - vals[i] > tol)]
        up, down = vals[k] - vals[0], vals[k] - vals[-1]
        ok = not bad and up >= rise and down >= rise
        holds &= ok
        parts.append(f"{c['aqm']} {v}: {series}; rise {up:.1f}, fall {down:.1f} (need >= {rise:g})"
                     + (f"; steps the wrong way by more than {tol:g}: {', '.join(bad)}" if bad else ""))
    return holds, f"{stat}, peak at {c['peak_phase']}: " + "; ".join(parts)


def check_compare(summary: pd.DataFrame, c: dict) -> tuple[bool, str]:
    """``compare`` check; returns (holds, evidence)."""
    stat, hi, lo = c["statistic"], c["higher"], c["lower"]
    need, max_u = float(c["min_difference_ms"]), c.get("max_utilization_difference")
    holds, parts = True, []
    for v in c["variants"]:
        for p in c["phases"]:
            a, b = _lookup(summary, hi, v, p, stat), _lookup(summary, lo, v, p, stat)
            ua, ub = _lookup(summary, hi, v, p, "utilization"), _lookup(summary, lo, v, p, "utilization")
            ok = math.isfinite(a) and math.isfinite(b) and a - b >= need
            text = f"{v}/{p}: {hi} {_fmt(a)} - {lo} {_fmt(b)} = {_fmt(a - b)} (need >= {need:g})"
            if max_u is not None:
                ok = ok and math.isfinite(ua) and math.isfinite(ub) and abs(ua - ub) <= max_u
                text += f", utilization {_fmt(ua, 2)} vs {_fmt(ub, 2)} (|diff| <= {max_u:g})"
            holds &= ok
            parts.append(text)
    return holds, f"{stat}: " + "; ".join(parts)


CHECKS = {"bound": check_bound, "rise_and_fall": check_rise_and_fall, "compare": check_compare}

#: How a claim's status is shown on the console.
LABEL = {"holds": "HOLDS", "fails": "FAILS", "not evaluable": "NOT EVALUABLE", "inconclusive": "INCONCLUSIVE"}


def claim_pairs(check: dict) -> list[tuple[str, str]]:
    """The (aqm, variant) trials a check reads, from its own data: ``aqm`` (bound,
    rise_and_fall) or ``higher`` and ``lower`` (compare), each with every one of ``variants``."""
    aqms = [check["aqm"]] if "aqm" in check else [check["higher"], check["lower"]]
    return [(a, v) for a in dict.fromkeys(aqms) for v in check["variants"]]


def _failed_check(f: dict) -> str:
    """``<trial>: flow_start_lag 15700 ms (max 100 ms)`` for one entry of health_failures."""
    from analysis.health import describe

    c = {"id": f["check"], "value": f["value"], "threshold": f["threshold"], "unit": f["unit"], "passed": None}
    text = f"{f['trial']}: {describe(c)}"
    return text + (f" [{f['detail']}]" if f["value"] is None and f.get("detail") else "")


def evaluate(summary: pd.DataFrame, claims: list[dict],
             incomplete: dict[tuple[str, str], list[str]] | None = None,
             unhealthy: dict[tuple[str, str], list[dict]] | None = None) -> dict:
    """Evaluate ``claims`` (the spec's ``claims`` list) against ``summary`` (SUMMARY_COLUMNS).

    Args:
        summary: the per-phase table.
        claims: the spec's claims.
        incomplete: (aqm, variant) -> reasons that trial's data are incomplete
            (``RunInfo.incomplete_pairs()``). A claim reading such a trial
            (:func:`claim_pairs`) is not evaluable, whatever its numbers say.
        unhealthy: (aqm, variant) -> the failed health checks of that trial, each
            ``{"trial", "check", "value", "threshold", "unit", "detail"}``
            (:func:`analysis.health.failures`). A claim reading such a trial (and no
            incomplete one) is inconclusive, whatever its numbers say.
    Returns:
        ``{"reproduced": bool, "verdict": str, "health_failures": [...], "claims": [{"id",
        "text", "status", "holds", "evidence"[, "reason"]}, ...]}``: status ``holds``
        (holds true), ``fails`` (holds false), ``not evaluable`` or ``inconclusive`` (holds
        null; ``reason`` names each incomplete or unhealthy trial and why, with the failed
        checks' numbers; evidence shows the numbers of what is there). reproduced is True
        only if every claim holds (and there is at least one). verdict: ``inconclusive``
        when any trial failed a health check (``health_failures`` lists every failed check
        of every trial), else ``reproduced`` or ``not reproduced``.
    Raises:
        ValueError: a claim has an unknown check kind.
    """
    incomplete, unhealthy = incomplete or {}, unhealthy or {}
    out = []
    for cl in claims:
        kind = cl["check"]["kind"]
        if kind not in CHECKS:
            raise ValueError(f"claim {cl['id']}: unknown check kind {kind!r}; expected one of {', '.join(CHECKS)}")
        holds, evidence = CHECKS[kind](summary, cl["check"])
        pairs = claim_pairs(cl["check"])
        gaps = [(a, v) for a, v in pairs if incomplete.get((a, v))]
        sick = [(a, v) for a, v in pairs if unhealthy.get((a, v))]
        c = {"id": cl["id"], "text": cl["text"], "status": "holds" if holds else "fails",
             "holds": bool(holds), "evidence": evidence}
        if gaps:
            c.update(status="not evaluable", holds=None, reason="data incomplete: " + "; ".join(
                f"{a}/{v}: {', '.join(incomplete[(a, v)])}" for a, v in gaps))
        elif sick:
            c.update(status="inconclusive", holds=None, reason="the substrate failed health checks: " + "; ".join(
                _failed_check(f) for a, v in sick for f in unhealthy[(a, v)])
                + f"; the numbers alone: {'holds' if holds else 'fails'}", numbers_hold=bool(holds))
        out.append(c)
    reproduced = bool(out) and all(c["holds"] is True for c in out)
    failed = [f for fs in unhealthy.values() for f in fs]
    verdict = "inconclusive" if failed else ("reproduced" if reproduced else "not reproduced")
    return {"reproduced": reproduced, "verdict": verdict, "health_failures": failed, "claims": out}


def verdict_line(verdict: dict) -> str:
    """The run's verdict in one line: ``reproduced``, ``not reproduced``, or ``inconclusive:
    the substrate failed N health checks: <trial>: <check> <value> (<max|min> <threshold>); ...``."""
    v = verdict.get("verdict") or ("reproduced" if verdict.get("reproduced") else "not reproduced")
    failed = verdict.get("health_failures") or []
    if v == "inconclusive" and failed:
        v += f": the substrate failed {len(failed)} health check{'s' if len(failed) > 1 else ''}: " + \
            "; ".join(_failed_check(f) for f in failed)
    return v
