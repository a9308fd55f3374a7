"""Analysis of a netrepro run directory (``results/<experiment>/<run-id>/``).

Reads ``run.json`` and ``raw/`` (never modified), checks every raw file against run.json's
``raw_sha256`` first (refusing a damaged run unless ``partial=True``), and writes, atomically
and deterministically, one output set: ``tidy.csv.gz`` (every sample, long form),
``summary.csv`` (per aqm x variant x phase), ``figures/`` (queueing-delay.png/.pdf,
utilization.png, backlog.png), ``verdict.json`` (the spec's claims checked, and the health
checks of the substrate that failed: :mod:`analysis.health`), ``report.md``
and ``analysis.json`` (which toolkit made them, from which inputs). Results are written
once: the first analysis goes into the run folder, re-analysing with the same toolkit
version leaves those bytes as they are, and another version writes into
``<run>/analysis-<version>/`` (:mod:`analysis.provenance`).

A run that repeated its trials (``netrepro run --repeat N``) is analysed repetition by
repetition, each as a run of its own, and across them (:mod:`analysis.repetitions`).
A sweep (``netrepro run --sweep``) is analysed point by point, each as a run of the experiment
at that point, and across the points (:mod:`analysis.sweep`).

Entry points: :func:`analyze_run` (returns the verdict), :func:`analyze` (returns everything)
and ``python -m analysis <run_dir> [--partial]``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis.io import atomic_path, write_gzip, write_text
from analysis.run import AnalysisError, RunInfo, open_run
from netrepro.spec import Spec

__all__ = ["analyze_run", "analyze", "AnalysisResult", "AnalysisError"]


@dataclass
class AnalysisResult:
    """What :func:`analyze` produced: the run, its tables, the verdict, the data problems
    found (one line each), the written files (absolute paths), the folder they are in,
    the analysis.json record and each trial's health (trial id -> :func:`analysis.health.trial_health`)."""

    run: RunInfo
    tidy: pd.DataFrame
    summary: pd.DataFrame
    verdict: dict
    problems: list[str] = field(default_factory=list)
    outputs: list[Path] = field(default_factory=list)
    out_dir: Path | None = None
    record: dict = field(default_factory=dict)
    health: dict = field(default_factory=dict)


def analyze(run_dir: Path | str, spec: Spec | None = None, figures: bool = True,
            partial: bool = False, out_dir: Path | None = None) -> AnalysisResult:
    """Analyse a run directory and write one output set into it.

    Args:
        run_dir: the run directory (holds run.json and raw/).
        spec: the experiment spec; default ``Spec.from_data(run.json["spec"])``.
        figures: False skips drawing (faster; the report then has no figure).
        partial: analyse a run whose raw files differ from run.json's record (or with a
            trial lacking its start time): every claim reading such a trial is reported
            "not evaluable" (verdict.json ``holds: null``), and the outputs go into
            ``analysis-<version>-partial/``.
        out_dir: write the outputs into this folder (made if missing) instead of the run's
            own place; the run folder is then not written at all (:mod:`analysis.compare`
            analyses runs this way, into its own folder).
    Returns:
        AnalysisResult (``out_dir``: the run folder, or ``<run>/analysis-<version>...``).
    Raises:
        AnalysisError: run.json missing or malformed, raw files missing/altered/unlisted
            without ``partial``, or a bad NETREPRO_TOOLKIT_VERSION (one-line message
            naming the file and field). Nothing is written then.
        SpecError: the spec in run.json is invalid.
    """
    from analysis.run import read_run_json
    rdir, data = read_run_json(run_dir)
    if spec is None and isinstance(data.get("spec"), dict) and data["spec"].get("schema_version") == 2:
        spec = Spec.from_data(data["spec"], f"{rdir / 'run.json'}:spec")
    from analysis.sweep import swept
    if swept(data):
        from analysis.sweep import analyze_swept
        return analyze_swept(rdir, data, spec, figures, partial, out=out_dir)
    from analysis.repetitions import repeated
    if repeated(data):
        from analysis.repetitions import analyze_repeated
        return analyze_repeated(rdir, data, spec, figures, partial, out=out_dir)
    if spec is not None and spec.model.data["schema_version"] == 2:
        return _analyze_model(rdir, data, spec, figures, partial, out=out_dir)
    return _analyze_v1(rdir, data, spec, figures, partial, out=out_dir)


def _analyze_v1(rdir: Path, data: dict, spec: Spec | None, figures: bool, partial: bool,
                out: Path | None = None, record: dict | None = None, tidy_file: bool = True) -> AnalysisResult:
    """:func:`analyze` for an experiment of schema_version 1 (aqm x variant trials).

    ``data``: run.json, or one repetition's view of it (:mod:`analysis.repetitions`), which
    passes the folder to write into (``out``) and its own provenance ``record``; then
    analysis.json is the caller's, and ``tidy_file`` False leaves tidy.csv.gz to it too.
    ``out`` without ``record``: the whole run's analysis, written into ``out`` instead of the
    run's own place (:func:`analyze`'s ``out_dir``).
    """
    from analysis.figures import make_figures
    from analysis.health import failures, trial_health
    from analysis.provenance import incomplete_problems, output_dir, run_record, seal
    from analysis.report import render_report
    from analysis.summary import summarize
    from analysis.tidy import build_tidy
    from analysis.verdict import evaluate

    run = open_run(rdir, spec, partial, data)
    check = run.raw_check
    intact = not check.damaged and all(t.start_epoch_s is not None for t in run.trials if t.ran)
    own = record is None
    if own:
        # a trial without its start time also makes the analysis partial here
        record = {**run_record(run.dir, check, figures), "partial": not intact,
                  "incomplete_trials": {t.id: t.incomplete for t in run.trials if t.incomplete}}
        if out is None:
            out = output_dir(run.dir, record, intact)

    tidy, problems = build_tidy(run)
    problems[:0] = incomplete_problems(run.dir)
    summary = summarize(tidy, run.trials)
    records = {t.get("id"): t for t in run.data["trials"]}
    health = {t.id: trial_health(run.spec, records[t.id], run.raw_dir / t.id, run.time_scale)
              for t in run.trials if t.ran}
    pair = {t.id: (t.aqm, t.variant) for t in run.trials}
    unhealthy: dict = {}
    for f in failures(health):
        unhealthy.setdefault(pair[f["trial"]], []).append(f)
    verdict = evaluate(summary, run.spec["claims"], run.incomplete_pairs(), unhealthy)
    outputs: list[Path] = []
    if tidy_file:
        outputs.append(write_gzip(out / "tidy.csv.gz", tidy.to_csv(index=False, lineterminator="\n").encode()))
    with atomic_path(out / "summary.csv") as tmp:
        summary.to_csv(tmp, index=False, lineterminator="\n")
    outputs.append(out / "summary.csv")
    fig_paths = make_figures(tidy, run, out / "figures") if figures else []
    outputs += fig_paths
    from analysis.flent import write_trials
    outputs += write_trials(tidy, records, run.spec.name, out)
    outputs.append(write_text(out / "verdict.json", json.dumps(verdict, indent=2) + "\n"))
    rel = [p.relative_to(out).as_posix() for p in fig_paths]
    outputs.append(write_text(out / "report.md", render_report(run, summary, verdict, problems, rel, record, out, health)))
    if own:
        outputs = seal(out, record, outputs)
    return AnalysisResult(run, tidy, summary, verdict, problems, outputs, out, record, health)


def _analyze_model(run_dir: Path, data: dict, spec: Spec, figures: bool, partial: bool,
                   out: Path | None = None) -> AnalysisResult:
    """:func:`analyze` for an experiment of schema_version 2 (:mod:`analysis.generic`): the same
    raw check, write-once output folder (or ``out``) and analysis.json record."""
    from analysis import generic
    from analysis.provenance import output_dir, run_record, seal
    from analysis.run import verified_raw

    check = verified_raw(run_dir, data, partial)
    record = run_record(run_dir, check, figures)
    if out is None:
        out = output_dir(run_dir, record, not check.damaged)
    res = generic.analyze(run_dir, spec, data, out, record, figures)
    outputs = seal(out, record, res["outputs"])
    return AnalysisResult(RunInfo.whole(run_dir, data, spec, check, partial), res["tidy"], res["summary"],
                          res["verdict"], res["problems"], outputs, out, record, res["health"])


def analyze_run(run_dir: Path | str, spec: Spec | None = None, partial: bool = False) -> dict:
    """Analyse ``run_dir`` (see :func:`analyze`) and return the verdict:
    ``{"reproduced": bool, "verdict": "reproduced"|"not reproduced"|"inconclusive",
    "health_failures": [...], "claims": [{"id", "text", "status", "holds", "evidence"[, "reason"]}]}``
    (:func:`analysis.verdict.evaluate`).

    Raises:
        AnalysisError, SpecError: as :func:`analyze`.
    """
    return analyze(run_dir, spec, partial=partial).verdict
