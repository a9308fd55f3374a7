"""The experiment file's claims judged on a run's statistics: the verdict (``verdict.json``).

Nothing here knows a claim by name; the kinds: ``bound`` (every selected value within min/max), ``difference`` and ``ratio``
(each value of ``higher`` against the value of ``lower`` in the same position: min <=
difference <= max, its absolute value with ``absolute``; ratio >= min), ``all_of`` (every
one of its ``checks`` holds; not evaluable when one is), ``rise_and_fall`` (over ``order`` = phases or trials, non-decreasing
to ``peak`` then non-increasing, each step within ``tolerance``, peak above both ends by
``min_rise``). A selection lists values in the order trials x subjects x phases (phase
``all`` by default; subjects by default those the model says compute the statistic:
:func:`netrepro.model.statistics`). A claim reading a trial that failed a health check is
inconclusive; a claim reading a trial whose raw files are damaged (analysed with
``--partial``) or whose values are missing or undefined (no row, NaN, a ratio over 0, an
empty selection) is *not evaluable*, with the reason: it never holds on data it lacks.
"""

from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

from analysis import uncertainty
from analysis.console import STATUSES
from analysis.health import failure_line
from analysis.uncertainty import Estimate
from netrepro.model import Check, Claim, Selection, rate_scaled, scale_rates, statistics
from netrepro.runfolder.record import RunRecord


# --- claims -----------------------------------------------------------------------------------------
def selection_keys(summary: pd.DataFrame, sel: Selection, trial_ids: list[str],
                   computed: dict[str, dict[str, list[str]]] | None = None) -> list[tuple[str, str, str]]:
    """The (trial, subject, phase) of each value a claim's selection ``sel`` names, in order
    trials x subjects x phases (what :func:`select` reads; ``computed`` as its).

    Without ``subjects``, a trial's subjects are those that compute the statistic by
    ``computed`` (:func:`netrepro.model.statistics`: what the file says the analysis
    computes, so a subject whose rows are missing reads NaN, not nothing), else those that
    have a row of it in ``summary``; a trial without any is read as subject ``all``."""
    out = []
    for t in sel.trials or trial_ids:
        if sel.subjects:
            subjects = list(sel.subjects)
        elif computed is not None and t in computed:
            subjects = [s for s, names in computed[t].items() if sel.statistic in names]
        else:
            rows = summary[(summary["trial"] == t) & (summary["statistic"] == sel.statistic)]
            subjects = sorted(set(rows["subject"]))
        for s in subjects or ["all"]:
            for ph in sel.phases or ["all"]:
                out.append((t, s, ph))
    return out


def select(summary: pd.DataFrame, sel: Selection, trial_ids: list[str],
           computed: dict[str, dict[str, list[str]]] | None = None) -> list[tuple[str, float]]:
    """The values a claim's selection names (:func:`selection_keys`), each with a label
    ``trial/subject/phase``; a value missing from the table is NaN (so the claim is not
    evaluable for want of data, and says which)."""
    out = []
    for t, s, ph in selection_keys(summary, sel, trial_ids, computed):
        m = summary[(summary["trial"] == t) & (summary["subject"] == s) & (summary["phase"] == ph)
                    & (summary["statistic"] == sel.statistic)]["value"]
        out.append((f"{t}/{s}/{ph}", float(m.iloc[0]) if len(m) else math.nan))
    return out


def _f(x: float) -> str:
    return "missing" if not math.isfinite(x) else f"{x:.4g}"


def _missing(vals: list[tuple[str, float]]) -> list[str]:
    return [k for k, v in vals if not math.isfinite(v)]


def pair_value(check: Check, higher: float, lower: float) -> float:
    """The quantity a ``ratio`` or ``difference`` check judges for one pair of values (same
    position of ``higher`` and ``lower``, in the statistic's unit): ``higher / lower``, or
    ``higher - lower`` (its absolute value with ``absolute``). NaN when either value is
    missing or not finite, or a ratio's ``lower`` is 0 (undefined). ValueError for another kind."""
    kind = check.kind
    if kind not in ("difference", "ratio"):
        raise ValueError(f"claim kind {kind!r} judges no pair; expected ratio or difference")
    if not (math.isfinite(higher) and math.isfinite(lower)) or (kind == "ratio" and lower == 0):
        return math.nan
    if kind == "ratio":
        return higher / lower
    return abs(higher - lower) if check.absolute else higher - lower


def check_claim(summary: pd.DataFrame, check: Check, trial_ids: list[str],
                computed: dict[str, dict[str, list[str]]] | None = None) -> tuple[bool | None, str]:
    """(holds, evidence) of one claim's ``check`` judged on its values alone (kinds: see the
    module docstring; :func:`judge_claim` without intervals); ``computed`` as
    :func:`select`'s. ``holds`` is None when the claim is not evaluable: a selected value is
    missing or not finite, a selection is empty, a ratio's lower value is 0 (the ratio is
    undefined), higher and lower select different numbers of values, or a rise_and_fall has
    not one value per step; ``evidence`` then says why."""
    outcome, evidence, _ = judge_claim(summary, check, trial_ids, computed)
    return (None if outcome is None else outcome == "holds"), evidence


def _claim_estimates(summary: pd.DataFrame, sel: Selection, trial_ids: list[str], computed, vals: list[tuple[str, float]],
                  estimates: dict | None) -> list[Estimate]:
    """Each of a selection's values (``vals``: :func:`select`'s) with its interval from
    ``estimates`` ((trial, subject, phase, statistic) -> Estimate, the keys of
    :func:`selection_keys`), a point where it has none or the estimate is of another value."""
    keys = selection_keys(summary, sel, trial_ids, computed) if estimates else [None] * len(vals)
    out = []
    for key, (_, v) in zip(keys, vals):
        e = estimates.get((*key, sel.statistic)) if key else None
        out.append(e if e is not None and math.isfinite(v) and e.value == v else Estimate.point(v))
    return out


def _value_entry(label: str, e: Estimate, outcome: str, least: float, most: float) -> dict:
    """One judged value as verdict.json's ``values`` lists it (docs/results-format.md)."""
    entry = {"at": label, "value": e.value, "outcome": outcome}
    if e.has_interval:
        entry.update(low=e.low, high=e.high, interval=e.method)
    if outcome == "undecided":
        entry["repetitions_to_decide"] = uncertainty.repetitions_to_decide(e, least, most)
    return entry


def _judge_bound(summary: pd.DataFrame, check: Check, trial_ids: list[str], computed,
                 estimates: dict | None) -> tuple[str | None, str, list[dict]]:
    """(outcome, evidence, values) of a ``bound`` check (:func:`judge_claim`): every selected
    value within its ``min`` and ``max``."""
    vals = select(summary, check.select, trial_ids, computed)
    lo, hi = check.limits()
    rng = f"[{lo:g}, {hi:g}]"
    ests = _claim_estimates(summary, check.select, trial_ids, computed, vals, estimates)
    evidence = (f"{check.select.statistic} within {rng}: "
                + ", ".join(f"{k} {e.text()}" for (k, _), e in zip(vals, ests)))
    if not vals:
        return None, evidence + "nothing selected", []
    if _missing(vals):
        return None, evidence + "; missing: " + ", ".join(_missing(vals)), []
    outcomes = [uncertainty.compare(e, lo, hi) for e in ests]
    return (uncertainty.combine(outcomes), evidence,
            [_value_entry(k, e, o, lo, hi) for (k, _), e, o in zip(vals, ests, outcomes)])


def _judge_pairs(summary: pd.DataFrame, check: Check, trial_ids: list[str], computed,
                 estimates: dict | None) -> tuple[str | None, str, list[dict]]:
    """(outcome, evidence, values) of a ``difference`` or ``ratio`` check (:func:`judge_claim`):
    each value of ``higher`` against the value of ``lower`` in the same position."""
    kind = check.kind
    hi_v = select(summary, check.higher, trial_ids, computed)
    lo_v = select(summary, check.lower, trial_ids, computed)
    least, most = check.limits()
    absolute = kind == "difference" and check.absolute
    if len(hi_v) != len(lo_v) or not hi_v:
        return None, f"higher selects {len(hi_v)} values and lower {len(lo_v)}; expected the same number", []
    hi_e = _claim_estimates(summary, check.higher, trial_ids, computed, hi_v, estimates)
    lo_e = _claim_estimates(summary, check.lower, trial_ids, computed, lo_v, estimates)
    parts, outcomes, values, undefined = [], [], [], []
    for (kh, vh), (kl, vl), eh, el in zip(hi_v, lo_v, hi_e, lo_e):
        if not (math.isfinite(vh) and math.isfinite(vl)):
            undefined.append(f"{kh if not math.isfinite(vh) else kl} missing")
            q = Estimate.point(math.nan)
        elif kind == "ratio" and vl == 0:
            undefined.append(f"{kl} is 0: the ratio is undefined")
            q = Estimate.point(math.nan)
        else:
            q = (uncertainty.ratio(eh, el) if kind == "ratio" else uncertainty.difference(eh, el, absolute))
            # the value itself exactly as the pair gives it (pair_value), the interval around it
            q = Estimate(pair_value(check, vh, vl), q.low, q.high, q.sd, q.n, q.method)
            outcomes.append(uncertainty.compare(q, least, most))
            values.append(_value_entry(f"{kh} vs {kl}", q, outcomes[-1], least, most))
        parts.append(f"{kh} {eh.text()} vs {kl} {el.text()}: {kind} {q.text()}")
    name = f"|{kind}|" if absolute else kind
    evidence = (f"{name} >= {_f(least)}: " if most == math.inf else
                f"{name} <= {_f(most)}: " if least == -math.inf else
                f"{name} within [{_f(least)}, {_f(most)}]: ") + "; ".join(parts)
    if undefined:
        return None, evidence + "; not evaluable: " + "; ".join(undefined), values
    return uncertainty.combine(outcomes), evidence, values


def _judge_rise_and_fall(summary: pd.DataFrame, check: Check, trial_ids: list[str], computed,
                         estimates: dict | None) -> tuple[str | None, str, list[dict]]:
    """(outcome, evidence, values) of a ``rise_and_fall`` check (:func:`judge_claim`): over
    ``order``, non-decreasing to ``peak`` then non-increasing, the peak above both ends."""
    sel = check.select
    vals = select(summary, sel, trial_ids, computed)
    order = list(sel.steps(check.order))
    v = [x for _, x in vals]
    if len(v) != len(order) or not all(math.isfinite(x) for x in v) or check.peak not in order:
        return None, ("values: " + ", ".join(f"{k} {_f(x)}" for k, x in vals)
                      + f"; expected one finite value per step of {', '.join(order) or '(no order)'} "
                        f"with the peak {check.peak} among them"), []
    e = _claim_estimates(summary, sel, trial_ids, computed, vals, estimates)
    p = order.index(check.peak)
    tol = check.tolerance
    # each step within tolerance: rising to the peak, falling after it (interval arithmetic)
    steps = [uncertainty.at_least(uncertainty.difference(e[i + 1], e[i]), -tol) for i in range(p)]
    steps += [uncertainty.at_most(uncertainty.difference(e[i + 1], e[i]), tol) for i in range(p, len(v) - 1)]
    to_first, to_last = uncertainty.difference(e[p], e[0]), uncertainty.difference(e[p], e[-1])
    rise = Estimate(min(to_first.value, to_last.value), min(to_first.low, to_last.low),
                    min(to_first.high, to_last.high), math.nan, min(to_first.n, to_last.n), to_first.method)
    outcome = uncertainty.combine(steps + [uncertainty.at_least(rise, check.min_rise)])
    values = [_value_entry(k, x, outcome, -math.inf, math.inf)
              for (k, _), x in zip(vals, e)] if any(x.has_interval for x in e) else []
    return outcome, (f"{sel.statistic} over {', '.join(order)}: " + " ".join(x.text() for x in e)
                     + f"; peak {check.peak} above both ends by {rise.text()} (min {_f(check.min_rise)})"), values


def judge_claim(summary: pd.DataFrame, check: Check, trial_ids: list[str],
                computed: dict[str, dict[str, list[str]]] | None = None,
                estimates: dict | None = None) -> tuple[str | None, str, list[dict]]:
    """(outcome, evidence, values) of one claim's ``check``: outcome ``holds``, ``fails``,
    ``undecided`` (an interval straddles a bound and none is wholly on its wrong side:
    :mod:`analysis.uncertainty`) or None (not evaluable, as :func:`check_claim` says);
    ``values``: each judged value or quantity with its interval and outcome (entries of
    verdict.json's ``values``). ``estimates``: (trial, subject, phase, statistic) ->
    :class:`analysis.uncertainty.Estimate` of the values that have an interval; without
    them every value is judged as a point and nothing is undecided."""
    kind = check.kind
    if kind == "bound":
        return _judge_bound(summary, check, trial_ids, computed, estimates)
    if kind == "all_of":
        results = [judge_claim(summary, sub, trial_ids, computed, estimates) for sub in check.checks]
        evidence = "all of: " + "; ".join(f"({i}) {ev}" for i, (_, ev, _) in enumerate(results, 1))
        values = [v for _, _, vs in results for v in vs]
        if any(o is None for o, _, _ in results):
            return None, evidence, values
        return uncertainty.combine(o for o, _, _ in results), evidence, values
    if kind in ("difference", "ratio"):
        return _judge_pairs(summary, check, trial_ids, computed, estimates)
    if kind == "rise_and_fall":
        return _judge_rise_and_fall(summary, check, trial_ids, computed, estimates)
    raise ValueError(f"unknown claim kind {kind!r}")


def scaled_thresholds(check: Check, k: float, scaled) -> str:
    """The thresholds :meth:`netrepro.model.Check.at_rate_scale` changes, as written and at ``k``:
    ``total_throughput_mbit 15 to 20.5 at k = 1, 7.5 to 10.25 at k = 0.5``; "" when none."""
    if check.kind == "all_of":
        return "; ".join(t for t in (scaled_thresholds(sub, k, scaled) for sub in check.checks) if t)
    statistic = check.first_selection.statistic
    if not check.rate_scaled_fields() or not scaled(statistic):
        return ""

    def text(factor: float) -> str:
        if check.kind == "rise_and_fall":
            return f"tolerance {check.tolerance * factor:g}, rise {check.min_rise * factor:g}"
        lo, hi = check.min, check.max
        return (f"{lo * factor:g} to {hi * factor:g}" if lo is not None and hi is not None
                else f"at least {lo * factor:g}" if lo is not None else f"at most {hi * factor:g}")

    return f"{statistic} {text(1)} at k = 1, {text(k)} at k = {k:g}"


#: A claim status that makes a run's verdict inconclusive: the run could not judge the claim.
INCONCLUSIVE_STATUSES = ("inconclusive", "not evaluable", "undecided")


def undecided_reason(values: list[dict]) -> str:
    """Why a claim is undecided, from its ``values`` (:func:`judge_claim`): each straddling
    value with its interval, and the repetitions that would likely decide the claim (the
    most any value needs): ``its 95 % interval straddles a bound: unpaced/s1:s1-eth1/all 0.79
    (0.74 to 0.84, batch means of 5); about 12 repetitions would likely decide it (REPEAT=12)``."""
    straddle = [v for v in values if v["outcome"] == "undecided"]
    parts = [f"{v['at']} {v['value']:.4g} ({v['low']:.4g} to {v['high']:.4g}, {v['interval']})"
             for v in straddle if "low" in v]
    needed = [v.get("repetitions_to_decide") for v in straddle]
    if needed and all(isinstance(n, int) for n in needed):
        n = max(needed)
        then = f"about {n} repetitions would likely decide it (REPEAT={n})"
    else:
        then = (f"the repetitions that would decide it cannot be told (more than {uncertainty.MAX_REPETITIONS}, "
                "or a value without a known spread): a value sits on or very near its bound")
    return "its 95 % interval straddles a bound: " + "; ".join(parts) + f"; {then}"


def evaluate(summary: pd.DataFrame, claims: Sequence[Claim], trial_ids: list[str],
             unhealthy: dict[str, list[dict]], rate_scale: float = 1.0,
             computed: dict[str, dict[str, list[str]]] | None = None,
             incomplete: dict[str, list[str]] | None = None, time_scale: float = 1.0,
             time_scale_min: float = 0.0, scaled=None, estimates: dict | None = None) -> dict:
    """The verdict: each claim's status (holds, fails, not evaluable when it reads a trial
    whose data are ``incomplete`` (trial id -> why: its damaged raw files, analysed with
    ``--partial``) or when its values or its condition's are missing or undefined
    (:func:`check_claim`), inconclusive when it reads a trial that failed a health check
    (``unhealthy``: trial id -> its :func:`analysis.health.failures`), or not applicable when
    the claim has a ``when``
    condition, a bound on a selection, that the run does not meet), ``reproduced`` when every
    applicable claim holds (and at least one applies), ``verdict`` as :func:`verdict_of` says
    (not reproduced when any claim fails, else inconclusive when any is inconclusive, undecided
    or not evaluable). A claim whose ``rate_scale_min`` is above the
    run's ``rate_scale`` (k) is not applicable either: the experiment file says below which
    k it loses its meaning; so is one whose ``time_scale_min`` (default ``time_scale_min``, the
    file's ``time_scale.min``) is above the run's ``time_scale``. These two come first: they
    are properties of the run's design, known before it ran, so a claim below its scale is
    not applicable whatever its data or its substrate's health (an "inconclusive" would say
    that a healthier machine could judge it, and none can). When no claim applies the
    verdict is inconclusive: nothing was judged. ``computed``: :func:`select`'s.

    A claim with ``rate_scaling: proportional`` is judged with its thresholds on values the
    rate scale changes multiplied by the run's k (:meth:`netrepro.model.Check.at_rate_scale`; ``scaled``: statistic
    -> whether k changes it, :func:`netrepro.model.rate_scaled`); its entry's ``thresholds``
    says both (:func:`scaled_thresholds`).

    A condition says which case a run fell in when chance decides it: Lab 18's
    ``fq_codel flows 2`` puts two flows in one bucket half the time, and a claim of fairness
    then applies only when two of its buckets were in use (``classes_in_use``); the
    condition is read on the run's values alone (which case the run fell in).

    ``estimates``: (trial, subject, phase, statistic) -> the 95 % interval of a value
    (:class:`analysis.uncertainty.Estimate`: within the trial by batch means, or across
    repetitions). A claim whose values have intervals holds when every interval is on the
    right side of its bounds, fails when one is wholly on the wrong side, and is
    ``undecided`` when one straddles a bound (:func:`judge_claim`); its entry's ``values``
    lists each with its interval, and ``repetitions_to_decide`` the repetitions (REPEAT)
    that would likely decide it.

    The verdict (:func:`verdict_of`): a claim that fails on data that passed their health
    checks makes it "not reproduced", whatever another claim's status (the undecided,
    inconclusive and not evaluable claims are listed beside it, ``not_judged``); an undecided,
    inconclusive or not evaluable claim without a failed one makes it inconclusive."""
    out = []
    incomplete = incomplete or {}
    for c in claims:
        ch, when, thresholds = _at_run_rate_scale(c, rate_scale, scaled)
        read = sorted({t for s in ch.selections for t in (s.trials or trial_ids)})
        gaps = [t for t in read if incomplete.get(t)]
        sick = [f for t in read for f in unhealthy.get(t, [])]
        judged = judge_claim(summary, ch, trial_ids, computed, estimates)
        _, evidence, values = judged
        entry = {"id": c.id, "text": c.text, "evidence": evidence}
        if any("low" in v for v in values):
            entry["values"] = values
        if c.finding:
            entry["finding"] = {"text": c.finding.text, "runs": list(c.finding.runs)}
        if thresholds is not None:
            entry["thresholds"] = thresholds
        condition = check_claim(summary, when, trial_ids, computed) if when else (True, "")
        if c.when:
            entry["condition"] = condition[1]
        off_scale = _off_scale_reason(c, rate_scale, time_scale, time_scale_min)
        if off_scale:
            entry.update(status="not applicable", holds=None, reason=off_scale)
        elif gaps:
            entry.update(status="not evaluable", holds=None, reason="data incomplete: " + "; ".join(
                f"{t}: {', '.join(incomplete[t])}" for t in gaps))
        elif sick:
            entry.update(_unhealthy_status(summary, ch, trial_ids, computed, sick))
        else:
            entry.update(_judged_status(summary, ch, trial_ids, computed, judged, condition))
        out.append(entry)
    return _verdict_of(out, unhealthy)


def _at_run_rate_scale(c: Claim, rate_scale: float, scaled) -> tuple[Check, Check | None, str | None]:
    """(check, when, thresholds) of claim ``c`` as :func:`evaluate` judges it at the run's rate
    scale: with ``rate_scaling: proportional`` (and k != 1, ``scaled`` given) its check and
    condition at k (:meth:`netrepro.model.Check.at_rate_scale`) and the changed thresholds in words
    (:func:`scaled_thresholds`), else both as written and thresholds None."""
    if not (c.rate_scaling == "proportional" and rate_scale != 1 and scaled is not None):
        return c.check, c.when, None
    when = c.when.at_rate_scale(rate_scale, scaled) if c.when else None
    return c.check.at_rate_scale(rate_scale, scaled), when, "; ".join(
        t for t in (scaled_thresholds(x, rate_scale, scaled) for x in ([c.when] if c.when else []) + [c.check]) if t)


def _off_scale_reason(c: Claim, rate_scale: float, time_scale: float, time_scale_min: float) -> str:
    """Why claim ``c`` is not applicable at the run's time or rate scale (:func:`evaluate`: its
    ``time_scale_min`` or ``rate_scale_min`` is above the run's), "" when it keeps its meaning."""
    least = c.time_scale_min if c.time_scale_min is not None else time_scale_min
    if float(least or 0) > time_scale:
        return (f"the run's time scale {time_scale:g} is shorter than "
                f"{float(least):g}, the shortest at which the claim "
                "keeps its meaning (time_scale.min; the experiment file says why)")
    if (c.rate_scale_min or 0) > rate_scale:
        return (f"the run's rate scale {rate_scale:g} is below {c.rate_scale_min:g}, where the claim "
                "keeps its meaning (the experiment file says why)")
    return ""


def _unhealthy_status(summary: pd.DataFrame, ch: Check, trial_ids: list[str], computed, sick: list[dict]) -> dict:
    """The status, reason and ``numbers_hold`` of a verdict.json entry whose claim ``ch`` reads a trial
    that failed the health checks ``sick``: inconclusive, with what the numbers alone say."""
    alone = judge_claim(summary, ch, trial_ids, computed)[0]
    status = dict(status="inconclusive", holds=None,
                  reason="the substrate failed health checks: " + "; ".join(failure_line(f) for f in sick)
                  + (f"; the numbers alone: {alone}" if alone is not None else ""))
    if alone is not None:  # the numbers alone (as points), when they can be judged at all
        status["numbers_hold"] = alone == "holds"
    return status


def _judged_status(summary: pd.DataFrame, ch: Check, trial_ids: list[str], computed,
                   judged: tuple[str | None, str, list[dict]], condition: tuple[bool | None, str]) -> dict:
    """The status, ``holds`` and reason of a verdict.json entry whose claim ``ch`` reads complete,
    healthy trials: from its condition (``condition``: :func:`check_claim`'s of its ``when``) and
    its outcome (``judged``: :func:`judge_claim`'s)."""
    outcome, evidence, values = judged
    applies, why = condition
    if applies is None:
        return dict(status="not evaluable", holds=None, reason="its condition cannot be judged: " + why)
    if not applies:
        return dict(status="not applicable", holds=None, reason="its condition does not hold: " + why)
    if outcome is None:
        return dict(status="not evaluable", holds=None, reason="its data are missing or undefined: " + evidence)
    if outcome == "undecided":
        alone = judge_claim(summary, ch, trial_ids, computed)[0]  # the values as points, intervals aside
        return dict(status="undecided", holds=None, values_alone=alone,
                    reason=undecided_reason(values) + f"; the values alone: {alone}")
    return dict(status="holds" if outcome == "holds" else "fails", holds=outcome == "holds")


def verdict_of(statuses: Sequence[str]) -> str:
    """The run's verdict from its claims' statuses (:data:`analysis.console.STATUSES`): ``not reproduced`` when
    any claim fails (status ``fails`` is given only on data that passed their health checks:
    a claim reading a trial that failed one is ``inconclusive``), whatever another claim's
    status; else ``inconclusive`` when any claim is undecided, inconclusive or not evaluable
    (:data:`INCONCLUSIVE_STATUSES`), or when none applies (nothing was judged); else
    ``reproduced`` (every claim that applies holds)."""
    statuses = list(statuses)
    if "fails" in statuses:
        return "not reproduced"
    if any(s in INCONCLUSIVE_STATUSES for s in statuses) or all(s == "not applicable" for s in statuses):
        return "inconclusive"
    return "reproduced"


def verdict_record(claims: list[dict], **fields) -> dict:
    """verdict.json's dict from its claims' entries ``claims`` (each with ``status`` and
    ``holds``) and the kind's own ``fields`` (``health_failures``, a repeated run's ``rule``...):
    ``reproduced`` (every claim that applies holds, and one does), ``verdict``
    (:func:`verdict_of`), ``counts`` (status -> number of claims, the non-zero ones in the order
    of :data:`analysis.console.STATUSES`), ``not_judged`` (the ids of the claims undecided, inconclusive or not
    evaluable, listed beside a verdict of not reproduced as beside an inconclusive one), then
    ``fields`` and ``claims``."""
    judged = [c for c in claims if c["status"] != "not applicable"]
    statuses = [c["status"] for c in claims]
    return {"reproduced": bool(judged) and all(c["holds"] is True for c in judged), "verdict": verdict_of(statuses),
            "counts": {s: statuses.count(s) for s in STATUSES if s in statuses},
            "not_judged": [c["id"] for c in claims if c["status"] in INCONCLUSIVE_STATUSES], **fields,
            "claims": claims}


def _verdict_of(out: list[dict], unhealthy: dict[str, list[dict]]) -> dict:
    """verdict.json's dict from its claims' entries ``out`` and the health failures ``unhealthy``
    (:func:`evaluate`, :func:`verdict_record`)."""
    return verdict_record(out, health_failures=[f for fs in unhealthy.values() for f in fs])


def claims_changed(recorded: Sequence[Claim], given: Sequence[Claim]) -> dict[str, list[str]]:
    """Which claims an experiment file ``given`` changes against those recorded in a run
    (``recorded``), compared as the model reads them (:class:`netrepro.model.Claim`: the
    check, its condition, thresholds, ``rate_scaling`` and scale limits; the text too):
    ``{"added": [ids], "removed": [ids], "changed": [ids]}`` with the non-empty lists only,
    ids in the file's order (removed ones in the run's); {} when they are the same."""
    was = {c.id: c for c in recorded}
    now = {c.id: c for c in given}
    out = {"added": [i for i in now if i not in was], "removed": [i for i in was if i not in now],
           "changed": [i for i in now if i in was and now[i] != was[i]]}
    return {k: v for k, v in out.items() if v}


def evaluate_model(model, run: RunRecord, summary: pd.DataFrame, estimates: dict | None = None,
                   unhealthy: dict[str, list[dict]] | None = None,
                   incomplete: dict[str, list[str]] | None = None) -> dict:
    """:func:`evaluate` of the claims of experiment ``model`` (as written) on ``summary``
    with what run.json (``run``, its record) says of the run: its rate scale (the model's rates
    and the claims' thresholds at k), time scale (1 when missing), and the file's
    ``time_scale.min``."""
    k = run.rate_scale_k
    m = scale_rates(model, k)
    return evaluate(summary, m.claims, [t.id for t in m.trials], unhealthy or {}, k, statistics(m),
                    incomplete, run.time_scale if run.time_scale is not None else 1.0,
                    float(m.time_scale.get("min", 0) or 0),
                    lambda st: rate_scaled(m, st), estimates)
