"""Read a run folder back: its ``run.json`` and its raw files checked against the record.

A run folder is ``results/<experiment>/<run-id>/`` with ``run.json`` and ``raw/``
(:mod:`netrepro.runfolder.layout`). :func:`read_run` is where the analysis (and
``netrepro.cli.bench``) reads a run: run.json parsed
(:func:`read_run_json`), the fields read as numbers, times and lists checked
(:func:`check_record`: the typed record of :mod:`netrepro.runfolder.record`, an earlier
version of run.json upgraded, ``rate_scale``, ``lead_s``, ``started_at``, ``lost_reservations``,
... checked) and its experiment. A run recorded with a schema_version 1 file (the
format pie-vs-red had before it was migrated) is converted here, once, through
:func:`netrepro.experiment.migrate.migrate_data`; nothing after this knows version 1, and the run folder is
never written. :func:`model_run_records` checks the trial records the analysis reads and
:func:`verified_raw` every raw file against run.json's ``raw_sha256`` (:mod:`netrepro.runfolder.integrity`).
:func:`latest_records` reads the trial records of an experiment's newest run for the runner's
time estimates. Problems of the record raise :class:`RunFolderError` (one line naming the file and field);
damaged raw files are refused unless ``partial=True``, in which case the trials they belong to
are incomplete and the claims reading them are reported not evaluable
(:func:`analysis.claims.evaluate`). Nothing is written here.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

from netrepro.core.errors import RunFolderError
from netrepro.experiment.migrate import migrate_data, recorded_rate_scaling
from netrepro.experiment.spec import TIME_SCALE_MAX, TIME_SCALE_MIN, Spec
from netrepro.runfolder.integrity import RawCheck, verify_raw
from netrepro.runfolder.record import LEAD_S_MAX, LEAD_S_MIN, RunRecord, is_num, recorded_rate_scale
from netrepro.runfolder.layout import RUN_JSON, latest, raw_dir, run_json

#: A trial id is also a folder name under raw/: a plain name, never a path.
_TRIAL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

#: How the refusals end: the way to analyze a damaged run anyway.
PARTIAL_HINT = "to analyze what is there, add --partial"


def check_record(path: Path | str, data: dict) -> RunRecord:
    """The record of run.json ``data`` (read from ``path``), its version upgraded and the fields
    the analysis, ``make bench`` and a resumed run read as numbers, times or lists checked before
    any of them is used (:meth:`netrepro.runfolder.record.RunRecord.from_json`: ``version``,
    ``rate_scale``, ``lead_s``, ``started_at``, ``finished_at``, ``lost_reservations``).

    Raises:
        RunFolderError: one line naming ``path``, the field and what was expected.
    """
    return RunRecord.from_json(data, path)


def read_run_json(run_dir: Path | str) -> tuple[Path, dict]:
    """``(run_dir, data)``: run.json parsed, or RunFolderError naming what is wrong (the folder
    missing, run.json missing, a symbolic link, unreadable, not UTF-8 JSON, or not an object)."""
    run_dir = Path(run_dir)
    path = run_json(run_dir)
    if not run_dir.is_dir():
        raise RunFolderError(path, "no run.json: the run folder does not exist; expected results/<experiment>/<run-id>/")
    if path.is_symlink():
        raise RunFolderError(path, "a symbolic link; expected the run record `netrepro run` wrote in this folder")
    if not path.is_file():
        raise RunFolderError(path, "no run.json: expected the run record written by `netrepro run`")
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise RunFolderError(path, f"cannot be read ({exc.strerror})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise RunFolderError(path, f"expected JSON (as `netrepro run` writes it): {str(exc)[:80]}") from None
    if not isinstance(data, dict):
        raise RunFolderError(path, f"expected a JSON object, got {type(data).__name__}")
    return run_dir, data


def read_run_record(run_dir: Path | str) -> RunRecord:
    """run.json of ``run_dir`` as its record, checked (:func:`read_run_json`,
    :func:`check_record`; its experiment not read). Raises RunFolderError as they do."""
    run_dir, data = read_run_json(run_dir)
    return check_record(run_json(run_dir), data)


def read_run(run_dir: Path | str, spec: Spec | None = None) -> tuple[Path, dict, Spec]:
    """``(run_dir, data, spec)``: run.json parsed (:func:`read_run_json`) and the experiment
    the run ran (``spec``, default run.json's ``spec``).

    A run recorded with a schema_version 1 file is converted here, once: ``data`` is then a
    copy of run.json whose ``spec`` is the schema_version 2 form of the recorded one
    (:func:`netrepro.experiment.migrate.migrate_data`) and, for a sweep, whose ``sweep.factors`` are that
    form's factors (their version 2 paths; the recorded points keep their values). A recorded
    spec written before claims had ``rate_scaling`` is judged as it was then
    (:func:`netrepro.experiment.migrate.recorded_rate_scaling`). run.json itself is never written.

    Raises:
        RunFolderError: as :func:`read_run_json`; a field :func:`check_record` checks; run.json's
            ``spec`` not an object; a swept version 1 run whose factor has no version 2 path (it
            cannot be analysed).
        SpecError: the recorded spec is invalid (one line naming ``run.json:spec``).
    """
    run_dir, data = read_run_json(run_dir)
    path = run_json(run_dir)
    data = check_record(path, data).to_json()
    recorded = data.get("spec")
    if spec is None and not isinstance(recorded, dict):
        raise RunFolderError(path, "spec: expected an object (the experiment file as run)"
                            if "spec" in data else "spec: missing; expected the experiment file as run")
    if isinstance(recorded, dict) and recorded.get("schema_version") == 1:
        data = _spec_from_schema_version_1(path, data)
    if spec is None:
        spec = Spec.from_data(recorded_rate_scaling(data["spec"]), f"{path}:spec")
    return run_dir, data, spec


def read_record(run_dir: Path | str, spec: Spec | None = None) -> tuple[Path, RunRecord, Spec]:
    """``(run_dir, record, spec)``: :func:`read_run`, its run.json as the typed record
    (:class:`netrepro.runfolder.record.RunRecord`). Raises as :func:`read_run`."""
    run_dir, data, spec = read_run(run_dir, spec)
    return run_dir, RunRecord.from_json(data, run_json(run_dir)), spec


def _spec_from_schema_version_1(path: Path, data: dict) -> dict:
    """run.json ``data`` of a run recorded with a schema_version 1 file, with its ``spec`` (and
    a sweep's factors) in schema_version 2 (:func:`read_run`)."""
    spec = migrate_data(data["spec"], f"{path}:spec")
    out = {**data, "spec": spec}
    sweep = data.get("sweep")
    if isinstance(sweep, dict) and isinstance(sweep.get("factors"), list):
        now = {f["name"]: f for f in (spec.get("sweep") or {}).get("factors") or []}
        lost = [f.get("name") for f in sweep["factors"] if not isinstance(f, dict) or f.get("name") not in now]
        if lost:
            raise RunFolderError(path, f"sweep.factors: {', '.join(map(str, lost))}: no schema_version 2 path for what "
                                      "this version 1 factor varied (netrepro migrate names it); expected factors the "
                                      "analysis can set")
        out["sweep"] = {**sweep, "factors": [now[f["name"]] for f in sweep["factors"]]}
    return out


def model_run_records(path: Path, data: dict, partial: bool) -> tuple[dict, list[str]]:
    """run.json (``data``, read from ``path``) checked for what :mod:`analysis.outputs` reads
    from it: ``time_scale`` (a number > 0) and each trial record's ``start_epoch_s`` (Unix
    seconds > 0).

    Returns ``(data, problems)``: ``data`` itself, or with ``partial`` a copy without the
    trial records that lack their start (the analysis then reports those trials not run),
    and one line per record left out.
    Raises:
        RunFolderError: ``time_scale`` missing or not a number > 0; ``trials`` not a list; a
            record without its start time, unless ``partial``.
    """
    ts = data.get("time_scale")
    if not is_num(ts) or not ts > 0:
        raise RunFolderError(path, f"time_scale: expected a number > 0, got {ts!r}"
                            if "time_scale" in data else "time_scale: missing; expected a number > 0")
    if not TIME_SCALE_MIN <= ts <= TIME_SCALE_MAX:  # the only ones a run accepts (TIME_SCALE)
        raise RunFolderError(path, f"time_scale: expected a number from {TIME_SCALE_MIN:g} to {TIME_SCALE_MAX:g} "
                                  f"(the TIME_SCALE a run accepts), got {ts!r}")
    raw_trials = data.get("trials")
    if not isinstance(raw_trials, list):
        raise RunFolderError(path, "trials: expected a list of the trials run"
                            if "trials" in data else "trials: missing; expected a list of the trials run")
    kept, problems = [], []
    for i, t in enumerate(raw_trials):
        start = t.get("start_epoch_s") if isinstance(t, dict) else None
        if not isinstance(t, dict):
            raise RunFolderError(path, f"trials[{i}]: expected an object")
        if not is_num(start) or start <= 0:
            problem = (f"trials[{i}].start_epoch_s: " + ("missing" if start is None else f"got {start!r}")
                       + "; expected the trial's common start in Unix seconds")
            if not partial:
                raise RunFolderError(path, f"{problem}; {PARTIAL_HINT}")
            problems.append(f"run.json: {problem}; the trial is left out")
            continue
        kept.append(t)
    return ({**data, "trials": kept} if problems else data), problems


def verified_raw(run_dir: Path, data: dict, partial: bool) -> RawCheck:
    """Every raw file of ``run_dir/raw`` against run.json's ``raw_sha256`` (``data``:
    run.json parsed). Raises RunFolderError when some file is missing, altered or unlisted,
    unless ``partial``; RawCheck says which. Always raises RunFolderError (with ``partial``
    too) when raw/ or anything under it is a symbolic link or a special file
    (:func:`netrepro.runfolder.integrity.raw_files`), or a trial record's ``id`` is not a plain name."""
    path = run_json(run_dir)
    # each trial record's id names its folder under raw/: a plain name, never a path out of it
    for i, t in enumerate(data.get("trials") if isinstance(data.get("trials"), list) else []):
        for key in ("id", "trial"):  # "trial": a repetition's experiment trial id
            value = t.get(key) if isinstance(t, dict) else None
            if isinstance(t, dict) and key in t and not (isinstance(value, str) and _TRIAL_ID.match(value)):
                raise RunFolderError(path, f"trials[{i}].{key}: expected a plain name (letters, digits, . _ -), got "
                                          f"{str(value)[:80]!r}")
        phases = t.get("phases") if isinstance(t, dict) else None
        if phases is not None and not (isinstance(phases, list) and all(
                isinstance(ph, dict) and isinstance(ph.get("name"), str)
                and all(is_num(ph.get(k)) and math.isfinite(ph[k]) for k in ("start_s", "end_s"))
                for ph in phases)):
            raise RunFolderError(path, f"trials[{i}].phases: expected a list of the trial's phases, each "
                                      f"{{name, start_s, end_s}} in seconds, got {str(phases)[:80]!r}")
    check = verify_raw(raw_dir(run_dir), data.get("raw_sha256"), path)
    if check.damaged and not partial:
        raise RunFolderError(path, f"raw_sha256: {check.describe()}; {PARTIAL_HINT}")
    return check


def latest_records(experiment: str, site_name: str) -> list[dict]:
    """The trial records of the newest complete run of ``experiment`` on ``site_name``
    (``results/<experiment>/latest``), for the runner's estimate of a trial's overhead; []
    when there is none, it is unreadable or it ran on another site."""
    try:
        meta = json.loads((latest(experiment) / RUN_JSON).read_text())
    except (OSError, ValueError):
        return []
    if not isinstance(meta, dict) or meta.get("site") != site_name:
        return []
    return [t for t in meta.get("trials") or [] if isinstance(t, dict)]


__all__ = ["RunFolderError", "read_run_json", "read_run_record", "read_run", "read_record", "check_record", "recorded_rate_scale", "model_run_records",
           "verified_raw", "latest_records", "PARTIAL_HINT", "LEAD_S_MIN", "LEAD_S_MAX", "RunRecord"]
