"""One run's analysis, without repetitions or a sweep: an experiment of schema_version 1
(aqm x variant trials: :func:`analyze_v1`) or 2 (:mod:`analysis.generic`: :func:`analyze_model`),
and what the analysis returns (:class:`AnalysisResult`). :mod:`analysis.repetitions` and
:mod:`analysis.sweep` analyse each repetition or point with these; :func:`analysis.analyze`
chooses.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis import generic
from analysis.figures import make_figures
from analysis.flent import write_trials
from analysis.health import failures, trial_health
from analysis.io import atomic_path, write_gzip, write_text
from analysis.provenance import incomplete_problems, output_dir, run_record, seal
from analysis.report import render_report
from analysis.run import RunInfo, model_run_records, open_run, verified_raw
from analysis.summary import summarize
from analysis.tidy import build_tidy
from analysis.verdict import evaluate
from netrepro.spec import Spec


@dataclass
class AnalysisResult:
    """What :func:`analysis.analyze` produced: the run, its tables, the verdict, the data problems
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


def analyze_v1(rdir: Path, data: dict, spec: Spec | None, figures: bool, partial: bool,
                out: Path | None = None, record: dict | None = None, tidy_file: bool = True) -> AnalysisResult:
    """:func:`analysis.analyze` for an experiment of schema_version 1 (aqm x variant trials).

    ``data``: run.json, or one repetition's view of it (:mod:`analysis.repetitions`), which
    passes the folder to write into (``out``) and its own provenance ``record``; then
    analysis.json is the caller's, and ``tidy_file`` False leaves tidy.csv.gz to it too.
    ``out`` without ``record``: the whole run's analysis, written into ``out`` instead of the
    run's own place (:func:`analysis.analyze`'s ``out_dir``).
    """

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
    outputs += write_trials(tidy, records, run.spec.name, out)
    outputs.append(write_text(out / "verdict.json", json.dumps(verdict, indent=2) + "\n"))
    rel = [p.relative_to(out).as_posix() for p in fig_paths]
    outputs.append(write_text(out / "report.md", render_report(run, summary, verdict, problems, rel, record, out, health)))
    if own:
        outputs = seal(out, record, outputs)
    return AnalysisResult(run, tidy, summary, verdict, problems, outputs, out, record, health)


def analyze_model(run_dir: Path, data: dict, spec: Spec, figures: bool, partial: bool,
                   out: Path | None = None) -> AnalysisResult:
    """:func:`analysis.analyze` for an experiment of schema_version 2 (:mod:`analysis.generic`): the same
    raw check, write-once output folder (or ``out``) and analysis.json record. run.json's time
    scale and trials' start times are checked first (:func:`analysis.run.model_run_records`)."""

    data, left_out = model_run_records(run_dir / "run.json", data, partial)
    check = verified_raw(run_dir, data, partial)
    record = run_record(run_dir, check, figures)
    if out is None:
        out = output_dir(run_dir, record, not check.damaged and not left_out)
    res = generic.analyze(run_dir, spec, data, out, record, figures, problems=left_out)
    outputs = seal(out, record, res["outputs"])
    return AnalysisResult(RunInfo.whole(run_dir, data, spec, check, partial), res["tidy"], res["summary"],
                          res["verdict"], res["problems"], outputs, out, record, res["health"])
