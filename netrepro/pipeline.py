"""The hand-off between the runner and the analysis, above both: the runner
(:mod:`netrepro.runner`) imports no analysis and the analysis (:mod:`analysis`) reads only
run folders and the model, so what a run needs of the analysis is handed in from here by the
command line (:mod:`netrepro.cli`).
"""

from __future__ import annotations

from pathlib import Path

from analysis import health
from netrepro.spec import Spec


def judge_trial(spec: Spec, record: dict, trial_dir: Path, time_scale: float) -> tuple[dict, list[str]]:
    """A trial's health as a run judges it when the trial completes (the ``judge`` of
    :func:`netrepro.runner.run.run`, :data:`netrepro.runner.trial.TrialJudge`).

    Args:
        spec: the experiment (the point's, in a sweep); record: the trial's record for run.json;
        trial_dir: its raw folder (``raw/<trial>/``); time_scale: the run's TIME_SCALE.
    Returns:
        (:func:`analysis.health.trial_health`'s ``{"passed", "checks"}``, each failed check
        in a line, :func:`analysis.health.describe`).
    Raises:
        nothing: odd data fail a check (:func:`analysis.health.trial_health`).
    """
    judged = health.trial_health(spec, record, trial_dir, time_scale)
    return judged, [health.describe(c) for c in judged["checks"] if c["passed"] is False]
