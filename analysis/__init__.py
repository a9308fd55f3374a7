"""Analysis of a netrepro run directory (``results/<experiment>/<run-id>/``).

Reads ``run.json`` and ``raw/`` (never modified), checks every raw file against run.json's
``raw_sha256`` first (refusing a damaged run unless ``partial=True``), and writes, atomically
and deterministically, one output set (:mod:`analysis.outputs`): ``tidy.csv.gz`` (every
sample, long form), ``summary.csv`` (every statistic per trial, phase and subject, long form),
``intervals.csv`` (the within-trial 95 % interval of those that have one: :mod:`analysis.uncertainty`),
``figures/`` (the experiment file's figures), ``flent/`` (each trial in Flent's format),
``verdict.json`` (the file's claims checked with their values' intervals, and the health
checks of the substrate that failed: :mod:`analysis.health`), ``report.md`` and ``analysis.json`` (which toolkit made
them, from which inputs). Results are written
once: the first analysis goes into the run folder, re-analysing with the same toolkit
version leaves those bytes as they are, and another version writes into
``<run>/analysis-<version>/`` (:mod:`netrepro.runfolder.outputs`).
A run exported as an RO-Crate (``netrepro export``) is never written: it is analysed into a new
folder beside it, ``<crate>-analysis/`` (a zip unpacked for the time of the analysis).

A run that repeated its trials (``netrepro run --repeat N``) is analysed repetition by
repetition, each as a run of its own, and across them (:mod:`analysis.repetitions`).
A sweep (``netrepro run --sweep``) is analysed point by point, each as a run of the experiment
at that point, and across the points (:mod:`analysis.sweep`).

A run recorded with a schema_version 1 experiment file (pie-vs-red's format before it was
migrated) is analysed as the schema_version 2 form of that file: :func:`netrepro.runfolder.reading.read_run`
converts it once, in memory, and nothing else here knows version 1.

Entry points: :func:`analyze_run` (returns the verdict), :func:`analyze` (returns everything)
and ``python -m analysis <run_dir> [--partial]``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from netrepro.core.errors import RunFolderError
from netrepro.experiment.spec import Spec, SpecError
from netrepro.runfolder.cratereading import check_crate, is_crate, open_crate
from netrepro.runfolder.layout import run_json
from netrepro.runfolder.outputs import crate_output_dir
from netrepro.runfolder.reading import read_run
from netrepro.runfolder.record import RunRecord

if TYPE_CHECKING:  # imported when asked for (__getattr__ below)
    from analysis.outputs import AnalysisResult

__all__ = ["analyze_run", "analyze", "AnalysisResult", "RunFolderError"]


def __getattr__(name: str):
    """``analysis.AnalysisResult`` (:class:`analysis.outputs.AnalysisResult`), imported when
    first asked for, as :func:`analyze` imports the analysis itself."""
    if name == "AnalysisResult":
        from analysis.outputs import AnalysisResult
        return AnalysisResult
    raise AttributeError(f"module 'analysis' has no attribute {name!r}")


def analyze(run_dir: Path | str, spec: Spec | None = None, figures: bool = True,
            partial: bool = False, out_dir: Path | None = None, experiment: str | None = None,
            given: Spec | None = None, rejudge: bool = False) -> "AnalysisResult":
    """Analyse a run directory and write one output set into it.

    Args:
        run_dir: the run directory (holds run.json and raw/), or a run exported as an RO-Crate
            (a folder or zip, :func:`netrepro.runfolder.cratereading.open_crate`), which is input
            only: checked (links, special files, bounds, metadata, every file's sha256) and
            never written; its outputs go into ``out_dir``, else a new folder beside it,
            ``<crate name without .zip>-analysis[-N]/``
            (:func:`netrepro.runfolder.outputs.crate_output_dir`).
        spec: the experiment spec; default run.json's (:func:`netrepro.runfolder.reading.read_run`, which
            converts a schema_version 1 one).
        figures: False skips drawing (faster; the report then has no figure).
        partial: analyse a run whose raw files differ from run.json's record (or with a
            trial lacking its start time): every claim reading such a trial is reported
            "not evaluable" (verdict.json ``holds: null``), and the outputs go into
            ``analysis-<version>-partial/``.
        out_dir: write the outputs into this folder (made if missing) instead of the run's
            own place; the run folder is then not written at all (:mod:`analysis.compare`
            analyses runs this way, into its own folder).
        experiment: when given, the run must be a run of this experiment (run.json's
            ``experiment``; the command line's EXPERIMENT), else SpecError before anything is
            written.
        given: the experiment file the user named (the command line's EXPERIMENT): its claims
            are compared with those recorded in the run, as the model reads them
            (:func:`analysis.claims.claims_changed`), and the result's ``claims_changed`` says
            which differ. The run is judged by its recorded claims (fixed before it ran)
            unless ``rejudge``.
        rejudge: judge the run with ``given``'s claims where they differ from the recorded
            ones: a re-judgement, written as any analysis but into a new folder
            ``<run>/analysis-<version>-rejudged[-N]/`` (never the run folder itself), whose
            verdict.json (``rejudgement``: ``{"experiment_file", "claims_changed"}``), report
            and analysis.json say so. Nothing changes when the claims are the same.
    Returns:
        AnalysisResult (``out_dir``: the run folder, ``<run>/analysis-<version>...``, or
        for a crate its new folder; ``claims_changed``: as said of ``given``).
    Raises:
        RunFolderError: run.json missing or malformed, raw files missing/altered/unlisted
            without ``partial``, a version 1 sweep factor without a version 2 path, or a bad
            NETREPRO_TOOLKIT_VERSION (one-line message naming the file and field). Nothing is
            written then.
        SpecError: the spec in run.json is invalid, or the run is not of ``experiment``.
    """
    if Path(run_dir).is_file() or is_crate(run_dir):  # an exported run (netrepro export): input only
        return _analyze_crate(Path(run_dir), spec, figures, partial, out_dir, experiment, given, rejudge)
    return _analyze_folder(run_dir, spec, figures, partial, out_dir, experiment, given, rejudge)


def _analyze_folder(run_dir: Path | str, spec: Spec | None, figures: bool, partial: bool, out_dir: Path | None,
                    experiment: str | None, given: Spec | None = None, rejudge: bool = False) -> "AnalysisResult":
    """:func:`analyze` of the run folder ``run_dir`` (a crate's too, once checked)."""
    # Imported here, not at the top: they import matplotlib, which writes its font cache and
    # config folder under $HOME when imported; the command line imports this package for
    # every command, and a command refused for bad input must write nothing.
    from analysis.repetitions import analyze_repeated, repeated
    from analysis.outputs import analyze_single
    from analysis.sweep import analyze_swept, swept
    from analysis.claims import claims_changed
    rdir, data, spec = read_run(run_dir, spec)
    ran = RunRecord.from_json(data, run_json(rdir)).experiment
    if experiment is not None and ran != experiment:
        raise SpecError(run_json(rdir), "experiment", f"{ran!r}: a run of another experiment; "
                                                      f"expected a run of {experiment!r} (EXPERIMENT)")
    changes = claims_changed(spec.model.claims, given.model.claims) if given is not None else {}
    again = None
    if rejudge and changes:  # the recorded experiment with the file's claims: SpecError if they do not fit it
        spec = Spec.from_data({**spec.data, "claims": given.data["claims"]}, given.path)
        again = {"experiment_file": Path(given.path).name, "claims_changed": changes}
    kind = analyze_swept if swept(data) else analyze_repeated if repeated(data) else analyze_single
    res = kind(rdir, data, spec, figures, partial, out=out_dir, rejudgement=again)
    res.claims_changed = changes
    return res


def _analyze_crate(crate: Path, spec: Spec | None, figures: bool, partial: bool, out_dir: Path | None,
                   experiment: str | None, given: Spec | None = None, rejudge: bool = False) -> "AnalysisResult":
    """:func:`analyze` of the crate ``crate``, read only: checked first, writing nothing
    (:func:`netrepro.runfolder.cratereading.check_crate`); then its outputs go into ``out_dir``, or a
    new folder beside it (:func:`netrepro.runfolder.outputs.crate_output_dir`), a zip being
    unpacked into a temporary folder inside that folder and removed afterwards
    (:func:`netrepro.runfolder.cratereading.open_crate`). When anything fails, a folder made here is
    removed with what was written into it.

    Raises:
        RunFolderError, SpecError: as :func:`analyze`, and the crate's refusals (one line).
    """
    import shutil
    check_crate(crate)
    made = out_dir is None or not Path(out_dir).exists()
    out = crate_output_dir(crate) if out_dir is None else Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
        with open_crate(crate, scratch=out) as rdir:
            return _analyze_folder(rdir, spec, figures, partial, out, experiment, given, rejudge)
    except BaseException:
        if made:
            shutil.rmtree(out, ignore_errors=True)
        raise


def analyze_run(run_dir: Path | str, spec: Spec | None = None, partial: bool = False) -> dict:
    """Analyse ``run_dir`` (see :func:`analyze`) and return the verdict:
    ``{"reproduced": bool, "verdict": "reproduced"|"not reproduced"|"inconclusive", "counts": {status: n},
    "not_judged": [ids], "health_failures": [...], "claims": [{"id", "text", "status", "holds", "evidence"[, "reason",
    "values", "values_alone"]}]}`` (a claim's status: holds, fails, undecided, inconclusive, not
    evaluable or not applicable)
    (:func:`analysis.claims.evaluate`; a repeated run or a sweep adds how the repetitions or
    points were combined).

    Raises:
        RunFolderError, SpecError: as :func:`analyze`.
    """
    return analyze(run_dir, spec, partial=partial).verdict
