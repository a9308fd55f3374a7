"""Analysis of a netrepro run directory (``results/<experiment>/<run-id>/``).

Reads ``run.json`` and ``raw/`` (never modified) and writes, atomically, into the run directory:
``tidy.csv.gz`` (every sample, long form), ``summary.csv`` (per aqm x variant x phase),
``figures/`` (queueing-delay.png/.pdf, utilization.png, backlog.png), ``verdict.json`` (the
spec's claims checked) and ``report.md``. Re-running replaces those outputs.

Entry points: :func:`analyze_run` (returns the verdict), :func:`analyze` (returns everything)
and ``python -m analysis <run_dir>``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from analysis.io import atomic_path, write_text
from analysis.run import AnalysisError, RunInfo, load_run
from netrepro.spec import Spec

__all__ = ["analyze_run", "analyze", "AnalysisResult", "AnalysisError"]


@dataclass
class AnalysisResult:
    """What :func:`analyze` produced: the run, its tables, the verdict, the data problems
    found (one line each) and the written files (absolute paths)."""

    run: RunInfo
    tidy: pd.DataFrame
    summary: pd.DataFrame
    verdict: dict
    problems: list[str] = field(default_factory=list)
    outputs: list[Path] = field(default_factory=list)


def analyze(run_dir: Path | str, spec: Spec | None = None, figures: bool = True) -> AnalysisResult:
    """Analyse a run directory and write every output into it.

    Args:
        run_dir: the run directory (holds run.json and raw/).
        spec: the experiment spec; default ``Spec.from_data(run.json["spec"])``.
        figures: False skips drawing (faster; the report then has no figure).
    Returns:
        AnalysisResult.
    Raises:
        AnalysisError: run.json missing or malformed (one-line message naming the file).
        SpecError: the spec in run.json is invalid.
    Missing raw files are not errors: they are listed in ``problems`` and in report.md.
    """
    from analysis.figures import make_figures
    from analysis.report import render_report
    from analysis.summary import summarize
    from analysis.tidy import build_tidy
    from analysis.verdict import evaluate

    run = load_run(run_dir, spec)
    tidy, problems = build_tidy(run)
    summary = summarize(tidy, run.trials)
    verdict = evaluate(summary, run.spec["claims"])
    outputs: list[Path] = []

    target = run.dir / "tidy.csv.gz"
    with atomic_path(target) as tmp:
        tidy.to_csv(tmp, index=False, compression="gzip")
    outputs.append(target)
    with atomic_path(run.dir / "summary.csv") as tmp:
        summary.to_csv(tmp, index=False)
    outputs.append(run.dir / "summary.csv")
    fig_paths = make_figures(tidy, run, run.dir / "figures") if figures else []
    outputs += fig_paths
    outputs.append(write_text(run.dir / "verdict.json", json.dumps(verdict, indent=2) + "\n"))
    rel = [p.relative_to(run.dir).as_posix() for p in fig_paths]
    outputs.append(write_text(run.dir / "report.md", render_report(run, summary, verdict, problems, rel)))
    return AnalysisResult(run, tidy, summary, verdict, problems, outputs)


def analyze_run(run_dir: Path | str, spec: Spec | None = None) -> dict:
    """Analyse ``run_dir`` (see :func:`analyze`) and return the verdict:
    ``{"reproduced": bool, "claims": [{"id", "text", "holds", "evidence"}]}``.

    Raises:
        AnalysisError, SpecError: as :func:`analyze`.
    """
    return analyze(run_dir, spec).verdict
