"""The names and paths of a run folder, ``results/<experiment>/<run-id>/``, in one place.

A run folder holds:

- ``run.json`` (:data:`RUN_JSON`): the run's record, written by the runner as the run goes
  (:mod:`netrepro.runfolder.writing`) and read back by the analysis
  (:mod:`netrepro.runfolder.reading`): the experiment as run, its settings, the trial records
  and ``raw_sha256``, the sha256 of every raw file;
- ``raw/<trial instance>/<node>/...`` (:data:`RAW`): each node's raw data of each trial,
  written once when the trial's data are fetched;
- ``site/`` (:data:`SITE_DOCUMENTS`): the documents of the reservation the run used, as the
  site granted it (a testbed's request RSpec and manifest, a FABRIC slice's description),
  copied when the run began; run.json's ``site_documents`` holds their sha256;
- ``INCOMPLETE`` (:data:`INCOMPLETE`): while the run goes, and after a run that stopped
  part-way, the reason in words;
- ``.reserve``: room held free while the run writes (:func:`netrepro.runfolder.writing.reserve_space`),
  and ``.fetch/``: a trial's data while they are fetched, before they move to ``raw/``;
- ``logs/``: the Ansible log of each trial attempt; ``failed/<instance>-<attempt>/``: the
  data of an attempt that was not kept, and why;
- ``timings.json``: the seconds of each stage of ``netrepro reproduce`` (read by ``make bench``);
- the analysis outputs (:data:`OUTPUT_NAMES`, ``analysis.json`` naming what made them), in the
  run folder itself or in ``analysis-<version>[-partial][-N]/``
  (:func:`netrepro.runfolder.outputs.output_dir`).

``results/<experiment>/latest`` points at the newest complete run of the experiment.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from netrepro.experiment.spec import REPO_ROOT

#: The run's record.
RUN_JSON = "run.json"
#: The folder of the raw data: ``raw/<trial instance>/<node>/<file>``.
RAW = "raw"
#: The folder of the reservation's documents: ``site/<name>`` (netrepro.sites.base.Site.documents).
SITE_DOCUMENTS = "site"
#: A document's name in :data:`SITE_DOCUMENTS`: one plain file name.
SITE_DOCUMENT_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: The marker file of a run folder that does not hold every trial (yet); its text says why.
INCOMPLETE = "INCOMPLETE"
#: How a report's problem list begins the line about :data:`INCOMPLETE`.
INCOMPLETE_PROBLEM = "the run is marked INCOMPLETE"
#: A trial's data while they are fetched (``.fetch/<instance>``), before they move to raw/.
STAGING = ".fetch"
#: The Ansible log of each trial attempt.
LOGS = "logs"
#: The data of the trial attempts that were not kept.
FAILED = "failed"
#: The seconds of each stage of ``netrepro reproduce``.
TIMINGS = "timings.json"
#: The link to the newest complete run of an experiment, next to its run folders.
LATEST = "latest"
#: The file holding room free while a run writes its folder.
RESERVE = ".reserve"
#: The record of an analysis: what made its outputs, from which inputs, and their sha256.
ANALYSIS_RECORD = "analysis.json"
#: The analysis outputs (docs/results-format.md), each named once here: every sample (long
#: form), every statistic, the within-trial intervals, the figures' folder, the verdict, the
#: report, each trial in Flent's format; a repeated run's repetitions (``repetitions/r<k>/``)
#: and its table across them; a sweep's points (``sweep/<point>/``) and its table across them.
TIDY, SUMMARY, INTERVALS, FIGURES, VERDICT, REPORT, FLENT = (
    "tidy.csv.gz", "summary.csv", "intervals.csv", "figures", "verdict.json", "report.md", "flent")
REPETITIONS, REPETITIONS_TABLE, SWEEP, SWEEP_TABLE = "repetitions", "repetitions.csv", "sweep", "sweep.csv"
#: The files and folders of one analysis output set.
OUTPUT_NAMES = (TIDY, SUMMARY, INTERVALS, FIGURES, VERDICT, REPORT, ANALYSIS_RECORD,
                REPETITIONS, REPETITIONS_TABLE, SWEEP, SWEEP_TABLE, FLENT)
#: The environment variable naming the folder run folders go into (netrepro/core/envvars.py).
RESULTS_ENV = "NETREPRO_RESULTS"


def results_root() -> Path:
    """Where run folders go: ``$NETREPRO_RESULTS``, else ``results/`` in the repository
    (read at each call, so that a test or a user may point it elsewhere)."""
    return Path(os.environ.get(RESULTS_ENV) or REPO_ROOT / "results")


def experiment_results(experiment: str) -> Path:
    """``results/<experiment>/``: the run folders of one experiment."""
    return results_root() / experiment


def latest(experiment: str) -> Path:
    """``results/<experiment>/latest``: the link to the experiment's newest complete run."""
    return experiment_results(experiment) / LATEST


def run_json(run_dir: Path) -> Path:
    """``<run_dir>/run.json``."""
    return Path(run_dir) / RUN_JSON


def raw_dir(run_dir: Path) -> Path:
    """``<run_dir>/raw``."""
    return Path(run_dir) / RAW


def trial_raw(run_dir: Path, instance: str) -> Path:
    """``<run_dir>/raw/<instance>``: one trial instance's raw data (a folder per node)."""
    return raw_dir(run_dir) / instance


def staging_dir(run_dir: Path, instance: str) -> Path:
    """``<run_dir>/.fetch/<instance>``: where one trial instance's data are fetched to."""
    return Path(run_dir) / STAGING / instance


def incomplete_marker(run_dir: Path) -> Path:
    """``<run_dir>/INCOMPLETE``."""
    return Path(run_dir) / INCOMPLETE


def incomplete_problems(run_dir: Path) -> list[str]:
    """``["the run is marked INCOMPLETE: <why>"]`` (the marker's text, blanks collapsed, at most
    200 characters) when ``run_dir`` holds the marker, else []."""
    marker = incomplete_marker(run_dir)
    if not marker.is_file():
        return []
    why = " ".join(marker.read_bytes().decode("utf-8", "replace").split())[:200]
    return [f"{INCOMPLETE_PROBLEM}: {why}" if why else INCOMPLETE_PROBLEM]
