"""The analysis of a run that repeated its trials (``netrepro run --repeat N``).

Each repetition k is analysed as a run of its own, by the same code as a single run: a view of
run.json whose ``trials`` are the repetition's instances (``<trial>.r<k>``, raw folders of
their own; :mod:`netrepro.runner.schedule`), written into ``repetitions/r<k>/`` (summary.csv,
verdict.json, report.md). The run folder then gets, beside analysis.json:

- ``tidy.csv.gz`` and ``summary.csv``: every repetition's rows, with a ``repetition`` column;
- ``repetitions.csv``: every statistic of the summary across the repetitions, per trial,
  phase and subject: ``n``, ``mean``, ``median``, ``sd`` (sample standard deviation),
  ``ci95_low``/``ci95_high`` (Student's t interval of the mean: mean +- t(0.975, n-1) sd /
  sqrt(n), scipy.stats.t; a t interval because repetitions are few, where a bootstrap's
  percentiles are too narrow: Efron & Tibshirani, *An Introduction to the Bootstrap*, 1993,
  sec. 13.3), ``cv`` (the run-to-run coefficient of variation sd / |mean|), ``min``, ``max``;
- ``verdict.json``: each claim with how many repetitions it held in; it holds when it held
  in every repetition where it applied, fails when it failed in every one, and is
  inconclusive otherwise (the counts say why); ``numbers_held`` also counts the repetitions
  whose numbers held where a failed health check made the claim inconclusive; the run's
  verdict follows as for one run;
- ``report.md`` and ``figures/repetitions.png|pdf``: the claims' statistics per phase, each
  repetition a dot and the mean with its 95 % interval.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from analysis import uncertainty
from analysis.claims import evaluate_model, verdict_record
from analysis.figures import caption, new_figure, save_figure
from analysis.outputs import analyze, checked_and_written, write_outputs
from analysis.report import found_by_table, markdown_table, statistic_tables, verdict_sentence
from analysis.uncertainty import Estimate
from netrepro.model import Claim, quantity_label, scale_rates
from netrepro.runfolder.layout import FIGURES, INCOMPLETE_PROBLEM, REPETITIONS, REPETITIONS_TABLE, REPORT
from netrepro.runfolder.record import RunRecord

STATS_COLUMNS = ["n", "mean", "median", "sd", "ci95_low", "ci95_high", "cv", "min", "max"]


def repeated(data: dict) -> bool:
    """Whether run.json ``data`` is of a run with more than one repetition."""
    rep = data.get("repetitions")
    return isinstance(rep, dict) and isinstance(rep.get("repeat"), int) and rep["repeat"] > 1


def view(data: dict, k: int) -> dict:
    """run.json ``data`` as a run of repetition ``k`` alone: its trial records (their ``id`` is
    the instance's raw folder, ``trial`` the experiment's trial) and no ``repetitions``."""
    out = {key: v for key, v in data.items() if key != "repetitions"}
    out["trials"] = [t for t in data.get("trials") or [] if isinstance(t, dict) and int(t.get("repetition", 1)) == k]
    return out


def across(summary: pd.DataFrame) -> pd.DataFrame:
    """Every statistic across repetitions (``summary``: summary.csv's long rows with a
    ``repetition`` column): one row per key with :data:`STATS_COLUMNS`. NaN values
    (a statistic a repetition could not compute) are left out of n."""
    keys = [c for c in summary.columns if c not in ("repetition", "value")]
    rows = []
    for key, g in summary.groupby(keys, sort=False, dropna=False):
        v = pd.to_numeric(g["value"], errors="coerce").dropna().to_numpy(dtype=float)
        n = len(v)
        e = uncertainty.t_interval(v)  # the one owner of the t interval
        mean, sd = e.value, e.sd
        low, high = (e.low, e.high) if e.has_interval else (math.nan, math.nan)
        rows.append({**dict(zip(keys, key)), "n": n, "mean": mean, "median": float(np.median(v)) if n else math.nan,
                     "sd": sd, "ci95_low": low, "ci95_high": high,
                     "cv": sd / abs(mean) if n > 1 and mean else math.nan,
                     "min": float(v.min()) if n else math.nan, "max": float(v.max()) if n else math.nan})
    return pd.DataFrame(rows, columns=keys + STATS_COLUMNS)


def claim_statistics(claims: Sequence[Claim]) -> list[str]:
    """The statistics the claims read, each once, in order: those of every claim's check (its
    selections in file order, an ``all_of``'s checks' too), then those of their conditions."""
    read = [s.statistic for c in claims for s in c.check.selections]
    return list(dict.fromkeys(read + [c.when.select.statistic for c in claims if c.when]))


#: What a repeated run's claim status means (verdict.json's ``rule``).
RULE = ("a claim judged in every repetition where it applied is judged on the mean of its values over the "
        "repetitions with their 95 % Student-t intervals: it holds when every interval is on the right side of its "
        "bounds, fails when one is wholly on the wrong side, and is undecided when one straddles a bound; a claim "
        "not judged in every such repetition (a failed health check, missing data) is inconclusive")
#: The rule without the means (:func:`combine_verdicts` given none): each repetition's status.
RULE_BY_COUNT = ("a claim holds when it held in every repetition where it applied, fails when it failed in "
                 "every one, else is inconclusive")
#: A repetition's claim status that judged the claim on its numbers.
JUDGED = ("holds", "fails", "undecided")


def combine_verdicts(verdicts: dict[int, dict], on_means: dict | None = None) -> dict:
    """One verdict from each repetition's (k -> verdict.json).

    With ``on_means`` (:func:`analysis.claims.evaluate` of the claims on the repetitions'
    mean values with their t intervals: :func:`mean_estimates`), a claim judged (holds,
    fails or undecided) in every repetition where it applied takes its status there
    (:data:`RULE`): values that the repetitions scatter across a bound are undecided, with
    the repetitions that would likely decide them. Otherwise, and without ``on_means``, a
    claim holds when it held in every repetition where it applied (status other than
    ``not applicable``), fails when it failed in every one, is ``not applicable`` when it
    applied in none, and is inconclusive otherwise. ``repetitions`` counts each status and
    ``held`` says "k of N". The run's verdict follows from the claims' statuses as for one
    run (:func:`analysis.claims.verdict_record`): not reproduced when a claim fails, else
    inconclusive when one is inconclusive, not evaluable or undecided, else reproduced."""
    n = len(verdicts)
    order = [c["id"] for v in verdicts.values() for c in v["claims"]]
    out = []
    for cid in dict.fromkeys(order):
        per = {k: next((c for c in v["claims"] if c["id"] == cid), None) for k, v in sorted(verdicts.items())}
        counts: dict[str, int] = {}
        for c in per.values():
            s = c["status"] if c else "not evaluable"
            counts[s] = counts.get(s, 0) + 1
        applied = n - counts.get("not applicable", 0)
        held = counts.get("holds", 0)
        # what the numbers said where the substrate failed a health check (analysis.claims.evaluate)
        numbers = held + sum(1 for c in per.values() if c and c.get("numbers_hold") is True)
        judgeable = held + counts.get("fails", 0) + sum(1 for c in per.values() if c and "numbers_hold" in c)
        first = next(c for c in per.values() if c)
        mean = next((c for c in (on_means or {}).get("claims", []) if c["id"] == cid), None)
        judged_in_all = applied > 0 and sum(counts.get(s, 0) for s in JUDGED) == applied
        if applied == 0:
            status = "not applicable"
        elif mean is not None and judged_in_all and mean["status"] in JUDGED:
            status = mean["status"]
        elif held == applied:
            status = "holds"
        elif counts.get("fails", 0) == applied:
            status = "fails"
        else:
            status = "inconclusive"
        entry = {"id": cid, "text": first["text"], "status": status,
                 "holds": True if status == "holds" else False if status == "fails" else None,
                 "held": f"{held} of {applied}", "repetitions": counts,
                 "numbers_held": f"{numbers} of {judgeable}",
                 "evidence": f"held in {held} of {applied} repetitions where it applied ("
                             + ", ".join(f"r{k} {c['status'] if c else 'not run'}" for k, c in per.items()) + ")",
                 "by_repetition": {f"r{k}": ({"status": c["status"], "evidence": c["evidence"],
                                             **({"reason": c["reason"]} if c.get("reason") else {})} if c else None)
                                   for k, c in per.items()}}
        if mean is not None and judged_in_all and mean["status"] in JUDGED:
            entry["evidence"] = f"mean over the repetitions: {mean['evidence']}; " + entry["evidence"]
            for key in ("values", "reason", "thresholds", "values_alone"):
                if mean.get(key):
                    entry[key] = mean[key]
        elif status == "inconclusive":
            tally = ", ".join(f"{v} {s}" for s, v in counts.items()) + f" of {n}"
            why = next((f"r{k}: {c['reason']}" for k, c in per.items() if c and c.get("reason")), "")
            entry["reason"] = (f"the repetitions disagree: {tally}" if held and counts.get("fails")
                               else f"not judged in every repetition: {tally}" + (f"; {why}" if why else ""))
        out.append(entry)
    failures = [{**f, "repetition": k} for k, v in sorted(verdicts.items()) for f in v.get("health_failures") or []]
    return verdict_record(out, repetitions=n, health_failures=failures,
                          rule=RULE if on_means is not None else RULE_BY_COUNT)


def mean_estimates(stats: pd.DataFrame, within: pd.DataFrame | None = None,
                   ceilings: dict | None = None) -> tuple[pd.DataFrame, dict]:
    """The repetitions' means as summary rows (trial, phase, subject, statistic, value) and
    each mean's 95 % interval as (trial, subject, phase, statistic) ->
    :class:`analysis.uncertainty.Estimate`: mean +- the larger of two half-widths, the
    repetitions' Student-t one, t(0.975, n-1) s / sqrt(n) (``stats``: :func:`across`), and
    the one the trials' own batches give for a mean of n, t(0.975, sum of (B-1)) se / sqrt(n)
    with se the root mean square of their within-trial standard errors (``within``: the
    repetitions' intervals.csv rows, :func:`analysis.summary.trial_intervals`), so that
    repetitions which happen to agree closely never claim more certainty than one trial's
    samples allow. ``sd`` is the larger spread. A mean of one repetition has no interval.
    Each interval is cut to its statistic's range and below its ceiling (``ceilings``:
    :func:`analysis.uncertainty.rate_ceilings` of the model at the run's rate scale), as a
    trial's are (:func:`analysis.uncertainty.within_range`)."""
    means = stats.rename(columns={"mean": "value"})[["trial", "phase", "subject", "statistic", "value"]]
    floor: dict = {}
    if within is not None and len(within):
        for key, g in within.groupby(["trial", "subject", "phase", "statistic"], sort=False):
            floor[key] = (float(np.sqrt(np.mean(np.square(g["sd"].to_numpy(dtype=float))))),
                          int((g["batches"] - 1).sum()))
    estimates = {}
    for r in stats.itertuples(index=False):
        key = (r.trial, r.subject, r.phase, r.statistic)
        if r.n < 2 or not math.isfinite(r.sd):
            continue
        half = uncertainty.t_quantile(int(r.n) - 1) * float(r.sd) / math.sqrt(r.n)
        sd, how = float(r.sd), f"t over {int(r.n)} repetitions"
        se, df = floor.get(key, (math.nan, 0))
        if df > 0 and math.isfinite(se) and uncertainty.t_quantile(df) * se / math.sqrt(r.n) > half:
            half, sd = uncertainty.t_quantile(df) * se / math.sqrt(r.n), max(sd, se)
            how = f"batch means of {int(r.n)} repetitions"
        estimates[key] = uncertainty.within_range(
            Estimate(float(r.mean), float(r.mean) - half, float(r.mean) + half, sd, int(r.n), how), r.statistic,
            (ceilings or {}).get((r.trial, r.subject, r.statistic), math.inf))
    return means, estimates


def draw_spread(stats: pd.DataFrame, summary: pd.DataFrame, statistics: list[str], out_dir: Path,
                model=None, under: str | None = None) -> list[Path]:
    """figures/repetitions.png and .pdf: for each of ``statistics`` a panel with the phases
    on x; per trial (and subject) each repetition's value as a dot and the mean with its
    95 % t interval as a bar. ``summary``: long rows with ``repetition``; ``stats``: :func:`across`.
    Each panel's y axis names its statistic in words with its unit
    (:func:`netrepro.model.quantity_label`; ``model``: the run's, for the file's own names),
    the lowest one's x axis the phases; ``under``: the line under the title that says which
    run it is (:func:`analysis.figures.caption`). Returns the paths written, none
    when no statistic has a row."""
    statistics = [s for s in statistics if (stats["statistic"] == s).any()]
    if not statistics:
        return []
    fig, axes = new_figure(len(statistics), 1)
    axes = np.atleast_1d(axes).ravel()
    for ax, st in zip(axes, statistics):
        s = stats[stats["statistic"] == st]
        phases = list(dict.fromkeys(s["phase"]))
        keys = [c for c in ("trial", "subject") if c in s.columns]
        series = [k for k, _ in s.groupby(keys, sort=False)]
        width = 0.8 / max(1, len(series))
        for j, key in enumerate(series):
            key = key if isinstance(key, tuple) else (key,)
            sel = np.logical_and.reduce([s[c] == v for c, v in zip(keys, key)])
            rows = s[sel].set_index("phase").reindex(phases)
            x = np.arange(len(phases)) - 0.4 + width * (j + 0.5)
            label = "/".join(str(v) for v in key if v != "all")
            err = np.vstack([rows["mean"] - rows["ci95_low"], rows["ci95_high"] - rows["mean"]])
            line = ax.errorbar(x, rows["mean"], yerr=np.nan_to_num(err), fmt="o", capsize=3, label=label, ms=5)
            raw = summary[(summary["statistic"] == st)
                          & np.logical_and.reduce([summary[c] == v for c, v in zip(keys, key)])]
            for i, ph in enumerate(phases):
                vals = pd.to_numeric(raw[raw["phase"] == ph]["value"], errors="coerce").dropna()
                ax.scatter(np.full(len(vals), x[i] + width * 0.25), vals, s=9, alpha=0.5,
                           color=line[0].get_color(), linewidths=0)
        ax.set_xticks(np.arange(len(phases)), phases)
        ax.set_ylabel(quantity_label(model, st))
        ax.set_title(f"{quantity_label(model, st)} (`{st}`)", fontsize=8)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=7, ncols=2)
    axes[-1].set_xlabel("Phase of the trial (all: the whole trial)")
    fig.suptitle(f"Across {int(summary['repetition'].nunique())} repetitions: mean and 95 % t interval "
                 "(bars), each repetition (dots)" + (f"\n{under}" if under else ""), fontsize=9)
    return [save_figure(fig, out_dir / f"repetitions.{ext}") for ext in ("png", "pdf")]


def render_report(spec, data: dict, verdict: dict, figures: list[str], problems: list[str], *,
                  stats: pd.DataFrame, statistics: list[str], per_rep: dict[int, dict]) -> str:
    """report.md of a repeated run: how it was run, the verdict with each claim's count, the
    figures, what each found (each claim's status in the run and in the file's
    ``reference_results``, and the mean over the repetitions of each statistic the claims read
    beside what each source states: :func:`analysis.report.statistic_tables`), the run-to-run
    variation of the claims' statistics per phase, each repetition's verdict, the data
    problems. The arguments as :func:`analysis.report.render_report`'s, then ``stats``
    (:func:`across`), ``statistics`` (those the claims read) and ``per_rep`` (repetition k ->
    its verdict)."""
    rep, run = data["repetitions"], RunRecord.from_json(data)
    title = spec.model.title
    lines = [f"# {title}", "",
             f"Experiment `{run.experiment}`, site {run.site} ({run.mode}), "
             f"TIME_SCALE {run.time_scale}, toolkit {str(run.toolkit_commit)[:12]}.", "",
             f"{rep['repeat']} repetitions ({rep.get('design')}; seed {rep.get('seed')}). Each repetition is "
             f"analysed as a run of its own (`{REPETITIONS}/r<k>/`); the statistics below are across them.", "",
             verdict_sentence(verdict, verdict["rule"]), ""]
    for c in verdict["claims"]:
        tally = ", ".join(f"{s} {v}" for s, v in c["repetitions"].items())
        lines.append(f"- `{c['id']}` **{c['status']}** ({tally}; the numbers alone held in {c['numbers_held']}, "
                     f"health checks aside): {c['text']}  \n  {c['evidence']}"
                     + (f"  \n  ({c['reason']})" if c.get("reason") else ""))
    if figures:
        lines += ["", "## Figures", ""] + [f"![{f}]({f})" for f in figures]
    refs = spec.model.reference_results
    mine = f"this run, mean of {rep['repeat']}"
    means = stats.rename(columns={"mean": "value"})
    lines += ["", "## What each found", "", "Each claim's status over the repetitions and in the published results the "
              "experiment file records (`reference_results`):", "",
              markdown_table(found_by_table(verdict, refs, this_run=f"this run ({rep['repeat']} repetitions)"))]
    lines += statistic_tables(spec.model, means, refs, this_run=mine)
    lines += ["", "## Run-to-run variation of the claims' statistics", "",
              "Mean and 95 % Student-t interval over the repetitions, and the coefficient of variation "
              "(sd / |mean|) of each phase's value.", ""]
    s = stats[stats["statistic"].isin(statistics)]
    lines.append("| trial | subject | phase | statistic | n | mean | 95 % CI | median | CV |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for _, r in s.iterrows():
        ci = "" if not math.isfinite(r["ci95_low"]) else f"{r['ci95_low']:.4g} .. {r['ci95_high']:.4g}"
        cv = "" if not math.isfinite(r["cv"]) else f"{r['cv']:.3f}"
        lines.append(f"| {r['trial']} | {r.get('subject', 'all')} | {r['phase']} | {r['statistic']} | {r['n']} | "
                     f"{r['mean']:.4g} | {ci} | {r['median']:.4g} | {cv} |")
    lines += ["", f"Every statistic of every phase is in `{REPETITIONS_TABLE}`.", "", "## Each repetition", ""]
    for k, v in sorted(per_rep.items()):
        lines.append(f"- r{k}: {v['verdict']} ([report]({REPETITIONS}/r{k}/{REPORT})): "
                     + ", ".join(f"{c['id']} {c['status']}" for c in v["claims"]))
    if problems:
        lines += ["", "## Data problems", ""] + [f"- {p}" for p in problems]
    return "\n".join(lines) + "\n"


def analyze_repeated(run_dir: Path, data: dict, spec, figures: bool, partial: bool, out: Path | None = None,
                     rejudgement: dict | None = None):
    """:func:`analysis.analyze` for a repeated run (see the module docstring), into ``out``
    when given (else the run's own place, :func:`netrepro.runfolder.outputs.output_dir`). Returns an
    AnalysisResult whose ``verdict`` is the combined one; ``tidy`` and ``summary`` have a
    ``repetition`` column; ``health`` is keyed by trial instance (``<trial>.r<k>``, its record's ``id``).

    ``rejudgement``: as :func:`analysis.outputs.checked_and_written`'s.

    Raises: as :func:`analysis.analyze` (run.json's records and the raw files are checked
    once, before anything is written)."""
    return checked_and_written(run_dir, data, spec, figures, partial, out, lambda d, o, rec, problems, damaged:
                               repeated_into(run_dir, d, spec, figures, o, rec, problems, damaged), rejudgement)


def repeated_into(run_dir: Path, data: dict, spec, figures: bool, out: Path, record: dict,
                  problems: list[str], damaged: dict[str, list[str]] | None = None) -> dict:
    """The analysis of a repeated run (or of a sweep's point, :mod:`analysis.sweep`) written
    into ``out``: repetitions/r<k>/, tidy.csv.gz, summary.csv, repetitions.csv, figures/,
    verdict.json and report.md, each repetition analysed with ``record`` as its provenance.
    ``problems``: lines known beforehand (the run's INCOMPLETE marker), extended; ``damaged``:
    raw folder -> its damaged files (:func:`analysis.outputs.analyze`). Returns ``{"tidy",
    "summary", "verdict", "problems", "outputs", "health", "incomplete"}`` (health and
    incomplete keyed by trial instance: its record's ``id``); writes no analysis.json."""
    n = int(data["repetitions"]["repeat"])
    tidies, summaries, intervals, verdicts, health, incomplete, outputs = [], [], [], {}, {}, {}, []
    problems = list(problems)
    for k in range(1, n + 1):
        sub = out / REPETITIONS / f"r{k}"
        sub.mkdir(parents=True, exist_ok=True)
        v = view(data, k)
        res = analyze(run_dir, spec, v, sub, record, figures=False, tidy_file=False, damaged=damaged)
        instance = {r.get("trial") or r["id"]: r["id"] for r in v["trials"]}  # trial -> its raw folder
        tidies.append(res["tidy"].assign(repetition=k))
        summaries.append(res["summary"].assign(repetition=k))
        intervals.append(res["intervals"].assign(repetition=k))
        verdicts[k] = res["verdict"]
        health.update({instance[t]: h for t, h in res["health"].items()})
        incomplete.update({instance[t]: why for t, why in res["incomplete"].items()})
        problems += [f"r{k}: {p}" for p in res["problems"] if not p.startswith(INCOMPLETE_PROBLEM)]
        outputs += res["outputs"]
    tidy = pd.concat(tidies, ignore_index=True)
    summary = pd.concat(summaries, ignore_index=True)
    stats = across(summary)
    run = RunRecord.from_json(data)
    k = run.rate_scale_k
    means, estimates = mean_estimates(stats, pd.concat(intervals, ignore_index=True),
                                      uncertainty.rate_ceilings(scale_rates(spec.model, k)))
    verdict = combine_verdicts(verdicts, evaluate_model(spec.model, run, means, estimates))
    statistics = claim_statistics(spec.model.claims)
    under = caption(run_dir.name, run.site, run.time_scale if run.time_scale is not None else 1.0, k)
    figs = draw_spread(stats, summary, statistics, out / FIGURES, spec.model, under) if figures else []
    written, verdict = write_outputs(out, record, summary, verdict, lambda v: render_report(
        spec, data, v, [p.relative_to(out).as_posix() for p in figs if p.suffix == ".png"], problems,
        stats=stats, statistics=statistics, per_rep=verdicts), tidy=tidy, tables=[(REPETITIONS_TABLE, stats)], drawn=figs)
    outputs += written
    return {"tidy": tidy, "summary": summary, "verdict": verdict, "problems": problems, "outputs": outputs,
            "health": health, "incomplete": incomplete}
