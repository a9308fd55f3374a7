"""One run's analysis, without repetitions or a sweep (:mod:`analysis.generic`:
:func:`analyze_single`), and what the analysis returns (:class:`AnalysisResult`).
:mod:`analysis.repetitions` and :mod:`analysis.sweep` analyse each repetition or point with
:func:`analysis.generic.analyze` too; :func:`analysis.analyze` chooses.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis import generic
from analysis.provenance import incomplete_problems, output_dir, run_record, seal
from analysis.run import RunInfo, model_run_records, verified_raw
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


def analyze_single(run_dir: Path, data: dict, spec: Spec, figures: bool, partial: bool,
                   out: Path | None = None) -> AnalysisResult:
    """:func:`analysis.analyze` for a run without repetitions or a sweep (:mod:`analysis.generic`).

    run.json's time scale and trials' start times are checked first
    (:func:`analysis.run.model_run_records`: with ``partial``, a record without its start is
    left out), then every raw file (:func:`analysis.run.verified_raw`; with ``partial``, the
    trials with damaged files are incomplete). The outputs go into the write-once output
    folder (:func:`analysis.provenance.output_dir`; ``-partial`` when something was left out
    or damaged) or ``out``, with analysis.json's record, which names the incomplete trials
    (``incomplete_trials``). A run marked INCOMPLETE says so first among the problems."""

    data, left_out = model_run_records(run_dir / "run.json", data, partial)
    check = verified_raw(run_dir, data, partial)
    intact = not check.damaged and not left_out
    record = {**run_record(run_dir, check, figures), "partial": not intact}
    if out is None:
        out = output_dir(run_dir, record, intact)
    res = generic.analyze(run_dir, spec, data, out, record, figures, problems=incomplete_problems(run_dir) + left_out,
                          damaged=check.by_trial())
    record["incomplete_trials"] = res["incomplete"]
    outputs = seal(out, record, res["outputs"])
    return AnalysisResult(RunInfo.whole(run_dir, data, spec, check, partial), res["tidy"], res["summary"],
                          res["verdict"], res["problems"], outputs, out, record, res["health"])
