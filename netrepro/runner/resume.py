"""Resuming a run that stopped part-way, in its own folder: what is refused before anything
is written (:func:`load_resume`), and its record made ready to continue."""

from __future__ import annotations

import json
from pathlib import Path

from netrepro.core.errors import RunFolderError
from netrepro.experiment.spec import Spec, SpecError
from netrepro.runfolder.integrity import verify_raw
from netrepro.runfolder.layout import INCOMPLETE, incomplete_marker, raw_dir, run_json
from netrepro.runfolder.reading import check_record
from netrepro.runfolder.record import RunRecord
from netrepro.runfolder.writing import check_own_files, spec_as_recorded


def load_resume(spec: Spec, site_name: str, run_dir: Path, time_scale: float | None,
                trial_ids: list[str] | None, repeat: int | None = None) -> tuple[dict, RunRecord]:
    """Check that ``run_dir`` is a run of ``spec`` on ``site_name`` that can be resumed, and
    return its run.json: as parsed (the record the run goes on filling) and as its typed
    record (:class:`netrepro.runfolder.record.RunRecord`). Reads only; nothing is written.

    Refused (SpecError or RunFolderError, one line): no such folder; no run.json, or not a JSON
    object; a field of it the run reads of the wrong type or range (``lead_s``,
    ``lost_reservations``, ``rate_scale``, ...: :func:`netrepro.runfolder.reading.check_record`); another
    experiment, site or experiment file content than the run's; ``--trial`` (a run's trials
    are fixed when it starts), a ``--time-scale`` or ``--repeat`` other than the run's; a run that is
    complete; a completed trial's raw file missing, altered (sha256 in run.json), unreadable or added
    to, a link or special file among them, or run.json's raw_sha256 malformed (one check with the
    analysis: :func:`netrepro.runfolder.integrity.verify_raw`); a symbolic link or special file
    anywhere else in the folder (:func:`netrepro.runfolder.writing.check_own_files`: the run
    writes there, never through a link).
    """
    if trial_ids:
        raise SpecError("command line", "--trial", "not with --resume: a resumed run runs the trials it started with")
    if not run_dir.is_dir():
        raise SpecError(run_dir, "--resume", "no such run folder; expected a folder made by `netrepro run`")
    rj = run_json(run_dir)
    if not rj.is_file():
        raise SpecError(rj, "(file)", "missing; expected the run.json of a run made by `netrepro run`")
    try:
        meta = json.loads(rj.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise SpecError(rj, "(file)", f"not JSON ({str(exc).splitlines()[0][:80]}); expected the run's record") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("trials"), list):
        raise SpecError(rj, "trials", "missing; expected the run's record with its list of completed trials")
    run = check_record(rj, meta)
    if run.experiment != spec.name:
        raise SpecError(rj, "experiment", f"{run.experiment!r}: a run of another experiment; expected {spec.name!r}")
    if run.site != site_name:
        raise SpecError("command line", "--site", f"{site_name!r}: the run was made on {run.site!r}; "
                                                  f"resume it on the same site (--site {run.site})")
    if run.spec != spec_as_recorded(spec):
        raise SpecError(spec.path, "(file)", f"differs from the experiment as run (run.json 'spec' of {run_dir}); "
                                             "expected it unchanged to resume the run")
    made_at = run.time_scale if run.time_scale is not None else 1.0
    if time_scale is not None and float(time_scale) != made_at:
        raise SpecError("command line", "--time-scale", f"{time_scale}: the run was made at TIME_SCALE "
                                                        f"{run.time_scale}; leave it out to resume")
    if repeat is not None and int(repeat) != run.repeat:
        raise SpecError("command line", "--repeat", f"{repeat}: the run was made with REPEAT {run.repeat}; "
                                                    "leave it out to resume")
    done = {t.id for t in run.trials}
    order = [s.id for s in run.instances] or spec.trial_ids
    if all(t in done for t in order) and not incomplete_marker(run_dir).exists():
        raise SpecError(run_dir, "--resume", f"the run is complete ({len(order)} trials, no {INCOMPLETE} marker); nothing to resume")
    _check_completed_raw(run_dir, run.raw_sha256, sorted(t for t in done if isinstance(t, str)))
    check_own_files(run_dir)  # after the completed trials' raw files, which say theirs in their own words
    return meta, run


#: How a resume names a raw file that run.json's raw_sha256 does not record.
_KIND_WORDS = {"unlisted": "not in run.json"}


def _check_completed_raw(run_dir: Path, sums, done: list[str]) -> None:
    """The completed trials' (``done``) raw files against run.json's ``raw_sha256`` (``sums``,
    as recorded: :attr:`netrepro.runfolder.record.RunRecord.raw_sha256`)
    (:func:`netrepro.runfolder.integrity.verify_raw`, limited to their folders).

    Raises:
        SpecError: ``<run.json>: raw_sha256: ...``, one line: the record malformed; a completed
            trial's folder holding a link or special file; a file missing, altered,
            unreadable or not in run.json; a completed trial with no checksums.
    """
    if not done:
        return
    rj = run_json(run_dir)
    try:
        check = verify_raw(raw_dir(run_dir), sums or {}, rj, done)
    except RunFolderError as exc:
        problem = exc.problem.removeprefix("raw_sha256: ") if exc.path == str(rj) else str(exc)
        raise SpecError(rj, "raw_sha256", f"cannot check the completed trials' data: {problem}") from None
    bad = [f"raw/{p} ({_KIND_WORDS.get(kind, kind)})" for p, kind in check.damaged]
    have = {k.split("/", 1)[0] for k in check.recorded}
    bad += [f"raw/{tid} (no checksums in run.json)" for tid in done if tid not in have]
    if bad:
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise SpecError(rj, "raw_sha256", f"the completed trials' data changed since they were recorded: "
                                          f"{', '.join(bad[:5])}{more}; expected them as recorded")
