"""One run's analysis, without repetitions or a sweep: its outputs written once (:func:`analyze`:
tidy table, summary, intervals, verdict, figures, Flent files, report) and what the
analysis returns (:class:`AnalysisResult`). :mod:`analysis.repetitions` and
:mod:`analysis.sweep` analyse each repetition or point with :func:`analyze` too;
:func:`analysis.analyze` chooses.

Nothing here knows an experiment, a qdisc or a claim by name: what is measured follows from
the trial's traffic items and collectors, and what is judged from the file's ``claims``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
import json
from pathlib import Path
import hashlib
from typing import Callable, Sequence

import pandas as pd

from analysis import fidelity
from analysis.claims import evaluate_model
from analysis.figures import caption, draw, figure_specs, save_figure
from analysis.flent import write_trials
from analysis.health import failures, shaper_rate_tolerance, trial_health
from analysis.provenance import run_record
from analysis.report import render_report
from analysis.summary import INTERVAL_COLUMNS, SUMMARY_KEYS, estimates_of, trial_intervals, trial_statistics
from analysis.tidy import TIDY_COLUMNS, trial_tidy
from analysis.uncertainty import rate_ceilings, rows_within_ceilings
from netrepro.model import scale_rates
from netrepro.experiment.spec import Spec
from netrepro.runfolder.atomic import atomic_path, write_gzip, write_text
from netrepro.runfolder.integrity import RawCheck
from netrepro.runfolder.layout import (FIGURES, FLENT, INTERVALS, REPORT, SUMMARY, TIDY, VERDICT, incomplete_problems,
                                      raw_dir, run_json, trial_raw)
from netrepro.runfolder.outputs import output_dir, seal
from netrepro.runfolder.reading import model_run_records, verified_raw
from netrepro.runfolder.record import RunRecord


@dataclass
class RunInfo:
    """A run directory as analysed: ``dir``, ``data`` (run.json parsed, its ``spec`` of
    schema_version 2: :func:`read_run`), ``spec`` (the experiment), ``time_scale``,
    ``raw_check`` (the raw files against the record; None when not checked) and ``partial``
    (damaged data accepted)."""

    dir: Path
    data: dict
    spec: Spec
    time_scale: float
    raw_check: RawCheck | None = None
    partial: bool = False

    @classmethod
    def whole(cls, run_dir: Path, data: dict, spec: Spec, raw_check: RawCheck | None, partial: bool) -> RunInfo:
        """The run as a whole (one run, its repetitions or a sweep's points)."""
        ts = RunRecord.from_json(data).time_scale
        return cls(dir=run_dir, data=data, spec=spec, time_scale=ts if ts is not None else 1.0,
                   raw_check=raw_check, partial=partial)


@dataclass
class AnalysisResult:
    """What :func:`analysis.analyze` produced: the run, its tables, the verdict, the data problems
    found (one line each), the written files (absolute paths), the folder they are in,
    the analysis.json record, each trial's health (trial id -> :func:`analysis.health.trial_health`)
    and the claims changed by the experiment file given (``claims_changed``)."""

    run: RunInfo
    tidy: pd.DataFrame
    summary: pd.DataFrame
    verdict: dict
    problems: list[str] = field(default_factory=list)
    outputs: list[Path] = field(default_factory=list)
    out_dir: Path | None = None
    record: dict = field(default_factory=dict)
    health: dict = field(default_factory=dict)
    #: the claims an experiment file given to :func:`analysis.analyze` changes against the run's
    #: (:func:`analysis.claims.claims_changed`): ``{"added", "removed", "changed"}``, {} when none
    claims_changed: dict = field(default_factory=dict)


def analyze_single(run_dir: Path, data: dict, spec: Spec, figures: bool, partial: bool,
                   out: Path | None = None, rejudgement: dict | None = None) -> AnalysisResult:
    """:func:`analysis.analyze` for a run without repetitions or a sweep (:mod:`analysis.outputs`).

    run.json's time scale and trials' start times are checked first
    (:func:`netrepro.runfolder.reading.model_run_records`: with ``partial``, a record without its start is
    left out), then every raw file (:func:`netrepro.runfolder.reading.verified_raw`; with ``partial``, the
    trials with damaged files are incomplete). The outputs go into the write-once output
    folder (:func:`netrepro.runfolder.outputs.output_dir`; ``-partial`` when something was left out
    or damaged) or ``out``, with analysis.json's record, which names the incomplete trials
    (``incomplete_trials``). A run marked INCOMPLETE says so first among the problems.
    ``rejudgement``: as :func:`checked_and_written`'s."""
    return checked_and_written(run_dir, data, spec, figures, partial, out, lambda d, o, rec, problems, damaged:
                               analyze(run_dir, spec, d, o, rec, figures, problems=problems, damaged=damaged),
                               rejudgement)


def checked_and_written(run_dir: Path, data: dict, spec: Spec, figures: bool, partial: bool, out: Path | None,
                        write: Callable[[dict, Path, dict, list[str], dict], dict],
                        rejudgement: dict | None = None) -> AnalysisResult:
    """The steps every whole-run analysis shares (:func:`analyze_single`,
    :func:`analysis.repetitions.analyze_repeated`, :func:`analysis.sweep.analyze_swept`):
    run.json's records checked (:func:`netrepro.runfolder.reading.model_run_records`), the raw
    files verified (:func:`netrepro.runfolder.reading.verified_raw`), the output folder and
    analysis.json's record chosen, then ``write(data, out, record, problems, damaged)``
    (returning ``{"tidy", "summary", "verdict", "problems", "outputs", "incomplete",
    "health"}``, its files written by :func:`write_outputs`) and the outputs sealed.

    ``rejudgement``: when the run is judged with claims changed after it
    (``{"experiment_file", "claims_changed"}``: :func:`analysis.analyze` with ``rejudge``), the
    record says so (``rejudgement``, and the changed claims' sha256 among its inputs, so that
    it is another analysis than the run's own), and the outputs go into a new folder
    (:func:`netrepro.runfolder.outputs.output_dir`), never the run folder itself.
    Raises what those raise (RunFolderError, one line)."""
    data, left_out = model_run_records(run_json(run_dir), data, partial)
    check = verified_raw(run_dir, data, partial)
    intact = not check.damaged and not left_out
    record = {**run_record(run_dir, check, figures), "partial": not intact}
    if rejudgement:
        claims = json.dumps(spec.data.get("claims"), sort_keys=True).encode()
        record["inputs"]["rejudged_claims_sha256"] = hashlib.sha256(claims).hexdigest()
        record["rejudgement"] = rejudgement
    if out is None:
        out = output_dir(run_dir, record, intact)
    res = write(data, out, record, incomplete_problems(run_dir) + left_out, check.by_trial())
    record["incomplete_trials"] = res["incomplete"]
    outputs = seal(out, record, res["outputs"])
    return AnalysisResult(RunInfo.whole(run_dir, data, spec, check, partial), res["tidy"], res["summary"],
                          res["verdict"], res["problems"], outputs, out, record, res["health"])


def write_outputs(out: Path, record: dict, summary: pd.DataFrame, verdict: dict, report: Callable[[dict], str],
                  tidy: pd.DataFrame | None = None, tables: Sequence[tuple[str, pd.DataFrame]] = (),
                  drawn: Sequence[Path] = ()) -> tuple[list[Path], dict]:
    """The one writer of an analysis' outputs (a run's, a repetition's or a sweep point's, and
    the repeated run's or sweep's across them), each under its name
    (:mod:`netrepro.runfolder.layout`): :data:`~netrepro.runfolder.layout.TIDY` (gzip; when
    ``tidy`` is given), :data:`~netrepro.runfolder.layout.SUMMARY`, each of ``tables`` (name
    -> table: :data:`~netrepro.runfolder.layout.INTERVALS`, ``REPETITIONS_TABLE``,
    ``SWEEP_TABLE``; numbers ``%.6g``), then ``drawn`` (figures and Flent files already
    written), :data:`~netrepro.runfolder.layout.VERDICT` (``verdict`` as JSON, with the
    record's ``rejudgement`` when the run is judged with claims changed after it) and
    :data:`~netrepro.runfolder.layout.REPORT` (``report(verdict)``: the kind's report of the
    verdict as written). Every file is written atomically and left as it is when its bytes
    do not change (:mod:`netrepro.runfolder.atomic`).

    Returns:
        (the paths written, in that order; the verdict as written).
    Raises:
        OSError: a file cannot be written.
    """
    if record.get("rejudgement"):
        verdict = {**verdict, "rejudgement": record["rejudgement"]}
    paths = [write_gzip(out / TIDY, tidy.to_csv(index=False, lineterminator="\n").encode())] if tidy is not None else []
    for name, table in ((SUMMARY, summary), *tables):
        with atomic_path(out / name) as tmp:
            table.to_csv(tmp, index=False, lineterminator="\n", float_format="%.6g")
        paths.append(out / name)
    paths += drawn
    paths.append(write_text(out / VERDICT, json.dumps(verdict, indent=2) + "\n"))
    paths.append(write_text(out / REPORT, report(verdict)))
    return paths, verdict


def fidelity_figures(spec, records: dict[str, dict], run_dir: Path, time_scale: float, out_dir: Path,
                     data: dict) -> list[Path]:
    """``link-fidelity.png`` and ``.pdf`` in ``out_dir``: the CCDF of every trial's busy
    intervals' deviation from the shaped rate (:func:`analysis.fidelity.ccdf_figure`), for
    the trials whose sampled, shaped ports had a busy window; none without one.
    ``spec``: at the run's rate scale; ``records``: the model's trial id -> its record."""
    busy = fidelity.run_busy_intervals(spec.model, records, raw_dir(run_dir), time_scale)
    by_trial = {t.id: {port: iv for port, (_, iv) in busy[t.id].items()}  # in the file's order
                for t in spec.model.trials if t.id in busy}
    run = RunRecord.from_json(data)
    fig = fidelity.ccdf_figure(by_trial, shaper_rate_tolerance(spec.model),
                               f"{spec.model.name}, " + caption(run_dir.name, run.site, time_scale, run.rate_scale_k))
    if fig is None:
        return []
    return [save_figure(fig, Path(out_dir) / f"link-fidelity.{ext}") for ext in ("png", "pdf")]


def analyze(run_dir: Path, spec, data: dict, out: Path, record: dict, figures: bool = True,
            tidy_file: bool = True, problems: list[str] | None = None,
            damaged: dict[str, list[str]] | None = None) -> dict:
    """Analyse a run into ``out`` (tidy.csv.gz unless not ``tidy_file``, summary.csv,
    figures/, flent/, verdict.json, report.md; analysis.json is the caller's) and return
    ``{"tidy", "summary", "verdict", "problems", "outputs", "health", "incomplete"}``.

    ``data``: run.json (its ``spec`` of schema_version 2: :func:`netrepro.runfolder.reading.read_run`), or
    one repetition's or sweep point's view of it (:mod:`analysis.repetitions`); ``record``:
    analysis.json's record (for the report); ``problems``: lines the caller found already,
    reported first; ``damaged``: raw folder (a trial record's ``id``) -> its damaged files
    (:meth:`netrepro.runfolder.integrity.RawCheck.by_trial`), which make the trial's data incomplete
    and every claim reading it not evaluable. A trial of the experiment without a record
    fails the health check ``not_run``, which makes the claims reading it inconclusive."""
    # the experiment as it ran: every rate and byte size at the run's rate scale
    run = RunRecord.from_json(data)
    k = run.rate_scale_k
    m = scale_rates(spec.model, k)
    scaled = spec if k == 1 else spec.at_rate_scale(k)  # the health checks read the rates as run
    ts = run.time_scale if run.time_scale is not None else 1.0
    problems = list(problems or [])
    damaged = damaged or {}
    tidies, rows, interval_rows, health, incomplete = [], [], [], {}, {}
    ceilings = rate_ceilings(m)
    # a repeated run's view of one repetition (analysis.repetitions) records instance ids
    # (raw folder names) with the experiment's trial id in ``trial``
    trial_records = {t.trial: t for t in run.trials}
    records = {tid: t.to_json() for tid, t in trial_records.items()}
    for trial in m.trials:
        tr = trial_records.get(trial.id)
        if tr is None:
            problems.append(f"trial {trial.id}: not run (no record in run.json)")
            continue
        rec = records[trial.id]
        if damaged.get(tr.id):
            incomplete[trial.id] = list(damaged[tr.id])
        tdir = trial_raw(run_dir, tr.id)
        tidy, ends = trial_tidy(m, trial, rec, tdir, ts, problems)
        tidies.append(tidy)
        phases = list(tr.phases or [])
        trial_rows = trial_statistics(m, trial, tidy, ends, phases, ts)
        rows += trial_rows
        # cut to what the topology lets a rate be (its shapers' rates at the run's rate scale)
        interval_rows += rows_within_ceilings(trial_intervals(m, trial, tidy, ends, phases, trial_rows, ts), ceilings)
        health[trial.id] = trial_health(scaled, rec, tdir, ts)
    tidies = [t for t in tidies if len(t)]  # a trial without any sample adds no row
    tidy = pd.concat(tidies, ignore_index=True) if tidies else pd.DataFrame(columns=TIDY_COLUMNS)
    summary = pd.DataFrame(rows, columns=SUMMARY_KEYS)
    intervals = pd.DataFrame(interval_rows, columns=INTERVAL_COLUMNS)
    labels = sorted({k for t in m.trials for k in t.labels})
    for key in labels:
        summary.insert(1, key, summary["trial"].map({t.id: t.labels.get(key, "") for t in m.trials}))
    unhealthy: dict[str, list[dict]] = {}
    for f in failures(health):
        unhealthy.setdefault(f["trial"], []).append(f)
    for t in (t.id for t in m.trials if t.id not in records):
        unhealthy.setdefault(t, []).append({"trial": t, "check": "not_run", "value": None, "threshold": None,
                                            "unit": None, "detail": "no record in run.json"})
    verdict = evaluate_model(spec.model, run, summary, estimates_of(intervals), unhealthy, incomplete)
    under = caption(run_dir.name, run.site, ts, k)
    figs = ([p for fig in figure_specs(m, tidy) for p in draw(m, tidy, fig, out / FIGURES, ts, under)]
            if figures else [])
    health_figs = fidelity_figures(scaled, records, run_dir, ts, out / FIGURES, data) if figures else []
    outputs, verdict = write_outputs(
        out, record, summary, verdict, lambda v: render_report(
            spec, data, v, [p.relative_to(out).as_posix() for p in figs if p.suffix == ".png"], problems,
            summary=summary, health=health, run_dir=run_dir, out_dir=out, record=record, incomplete=incomplete,
            health_figures=[p.relative_to(out).as_posix() for p in health_figs if p.suffix == ".png"]),
        tidy=tidy if tidy_file else None, tables=[(INTERVALS, intervals)],
        drawn=figs + health_figs + write_trials(tidy, records, m.name, out / FLENT))
    return {"tidy": tidy, "summary": summary, "verdict": verdict, "problems": problems, "outputs": outputs,
            "health": health, "incomplete": incomplete, "intervals": intervals}
