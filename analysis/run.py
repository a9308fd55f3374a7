"""Read a run directory's ``run.json`` into plain objects the other modules use, and check
its raw files against the record.

A run directory is ``results/<experiment>/<run-id>/`` with ``run.json`` and ``raw/``.
:func:`open_run` is the one entry point of the analysis and of ``netrepro.bench``: it
validates run.json (every field the analysis reads), checks every raw file against
run.json's ``raw_sha256`` (:mod:`analysis.integrity`) and decides which trials' data are
incomplete. Problems of the record raise :class:`AnalysisError` (one line naming the file
and field); damaged raw files are refused unless ``partial=True``, in which case the
trials they belong to are marked incomplete and the claims reading them are reported as
not evaluable (:mod:`analysis.verdict`). Nothing is written here.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path

from analysis.errors import AnalysisError
from analysis.integrity import RawCheck, verify_raw
from netrepro.spec import Spec, SpecError, variant_rate_mbit

#: A trial id is also a folder name under raw/: a plain name, never a path.
_TRIAL_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")

#: How the refusals end: the way to analyze a damaged run anyway.
PARTIAL_HINT = "to analyze what is there, add --partial"


@dataclass
class TrialInfo:
    """One trial (one AQM x one variant) as run.

    Attributes:
        id: trial id, also the folder name under raw/ (``pie-unlimited``).
        aqm, variant: keys into the spec's ``aqms`` and ``variants``.
        start_epoch_s: Unix time (s) of the trial's common start; None if the trial did not
            run or (partial mode only) run.json lacks it.
        phases: list of {name, start_s, end_s, flows}, seconds from start_epoch_s (time-scaled).
        rate_mbit: bottleneck rate for this variant (variant override, else spec bottleneck).
        bottleneck_interface: router interface the qdisc stats were read from, if recorded.
        base_rtt_ms: client -> base RTT in ms: from run.json if recorded; analysis.tidy adds
            the ones it computes from base_rtt.txt and notes them in ``base_rtt_origin``.
        ran: False when run.json has no record of this trial.
        incomplete: why this trial's data cannot support a claim (one short phrase each,
            e.g. ``raw/pie-limited/client1/ping.txt (missing)``); empty when complete.
    """

    id: str
    aqm: str
    variant: str
    start_epoch_s: float | None
    phases: list[dict]
    rate_mbit: float
    bottleneck_interface: str | None = None
    base_rtt_ms: dict[str, float] = field(default_factory=dict)
    ran: bool = True
    base_rtt_origin: dict[str, str] = field(default_factory=dict)
    incomplete: list[str] = field(default_factory=list)


@dataclass
class RunInfo:
    """A run directory: ``dir``, parsed ``data`` (run.json), ``spec``, ``time_scale``,
    ``trials``, ``raw_check`` (the raw files against the record; None when not checked)
    and ``partial`` (damaged data accepted)."""

    dir: Path
    data: dict
    spec: Spec
    time_scale: float
    trials: list[TrialInfo]
    raw_check: RawCheck | None = None
    partial: bool = False

    @classmethod
    def whole(cls, run_dir: Path, data: dict, spec: Spec, raw_check: RawCheck | None, partial: bool) -> RunInfo:
        """The run as a whole, without per-trial records (``trials`` empty): what an analysis
        across trials (repetitions, sweep points, a schema_version 2 model) returns."""
        return cls(dir=run_dir, data=data, spec=spec, time_scale=float(data.get("time_scale", 1)), trials=[],
                   raw_check=raw_check, partial=partial)

    @property
    def raw_dir(self) -> Path:
        return self.dir / "raw"

    def incomplete_pairs(self) -> dict[tuple[str, str], list[str]]:
        """(aqm, variant) -> reasons its data is incomplete, for every incomplete trial."""
        return {(t.aqm, t.variant): t.incomplete for t in self.trials if t.incomplete}


def _is_num(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _phases(path: Path, where: str, phases) -> list[dict]:
    if not isinstance(phases, list) or not phases:
        raise AnalysisError(path, f"{where}: expected a non-empty list of {{name, start_s, end_s, flows}}")
    for j, ph in enumerate(phases):
        ok = (isinstance(ph, dict) and isinstance(ph.get("name"), str) and _is_num(ph.get("start_s"))
              and _is_num(ph.get("end_s")) and ph["end_s"] > ph["start_s"])
        if not ok:
            raise AnalysisError(path, f"{where}[{j}]: expected {{name, start_s, end_s, flows}} with "
                                      f"numbers of seconds, end_s > start_s; got {json.dumps(ph)[:80]}")
    return [dict(p) for p in phases]


def read_run_json(run_dir: Path | str) -> tuple[Path, dict]:
    """``(run_dir, data)``: run.json parsed, or AnalysisError naming what is wrong (the folder
    missing, run.json missing, a symbolic link, unreadable, not UTF-8 JSON, or not an object)."""
    run_dir = Path(run_dir)
    path = run_dir / "run.json"
    if not run_dir.is_dir():
        raise AnalysisError(path, "no run.json: the run folder does not exist; expected results/<experiment>/<run-id>/")
    if path.is_symlink():
        raise AnalysisError(path, "a symbolic link; expected the run record `netrepro run` wrote in this folder")
    if not path.is_file():
        raise AnalysisError(path, "no run.json: expected the run record written by `netrepro run`")
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except OSError as exc:
        raise AnalysisError(path, f"cannot be read ({exc.strerror})") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise AnalysisError(path, f"expected JSON (as `netrepro run` writes it): {str(exc)[:80]}") from None
    if not isinstance(data, dict):
        raise AnalysisError(path, f"expected a JSON object, got {type(data).__name__}")
    return run_dir, data


def load_run(run_dir: Path | str, spec: Spec | None = None, partial: bool = False,
             data: dict | None = None) -> RunInfo:
    """Read and validate ``run_dir/run.json`` and list the trials to analyse (no raw check).

    Fields read (every one validated): ``spec`` (the experiment as run), ``time_scale`` (> 0),
    ``trials`` (list of {id, aqm, variant, start_epoch_s, phases?, base_rtt_ms?,
    bottleneck_interface?}). Trials come from run.json, in its order; trials of the spec
    that run.json lacks are appended with ``ran=False`` and marked incomplete. Phases come
    from the trial record, else from ``spec.scaled(time_scale)``.

    Args:
        run_dir: the run directory.
        spec: the experiment spec; default ``Spec.from_data(run.json["spec"])``.
        partial: a trial without a start time is marked incomplete instead of refused.
        data: run.json as parsed, or a view of it (one repetition of a repeated run,
            :mod:`analysis.repetitions`); default: read from ``run_dir``.
    Raises:
        AnalysisError: run_dir or run.json missing, run.json not a JSON object, a field
            missing or of the wrong type (the message names it, e.g.
            ``run.json: trials[2].start_epoch_s: missing; expected ...``).
        SpecError: run.json's spec does not validate (one-line message).
    """
    if data is None:
        run_dir, data = read_run_json(run_dir)
    run_dir = Path(run_dir)
    path = run_dir / "run.json"
    if spec is None:
        if not isinstance(data.get("spec"), dict):
            raise AnalysisError(path, "spec: expected an object (the experiment.yml as run)")
        spec = Spec.from_data(data["spec"], f"{path}:spec")
    ts = data.get("time_scale")
    if not _is_num(ts) or not ts > 0:
        raise AnalysisError(path, f"time_scale: expected a number > 0, got {ts!r}"
                            if "time_scale" in data else "time_scale: missing; expected a number > 0")
    default_phases = spec.scaled(ts)["phases"]
    raw_trials = data.get("trials")
    if not isinstance(raw_trials, list):
        raise AnalysisError(path, "trials: expected a list of the trials run"
                            if "trials" in data else "trials: missing; expected a list of the trials run")

    trials: list[TrialInfo] = []
    seen: dict[tuple[str, str], str] = {}
    for i, t in enumerate(raw_trials):
        where = f"trials[{i}]"
        if not isinstance(t, dict):
            raise AnalysisError(path, f"{where}: expected an object")
        for key in ("id", "aqm", "variant"):
            if not isinstance(t.get(key), str):
                raise AnalysisError(path, f"{where}.{key}: " + ("missing; expected a string" if key not in t
                                                              else f"expected a string, got {t[key]!r}"))
        if not _TRIAL_ID.match(t["id"]):
            raise AnalysisError(path, f"{where}.id: expected a plain name (letters, digits, . _ -), got {t['id']!r}")
        if t["aqm"] not in spec["aqms"] or t["variant"] not in spec["variants"]:
            raise AnalysisError(path, f"{where}: aqm/variant {t['aqm']}/{t['variant']} not in the spec")
        pair = (t["aqm"], t["variant"])
        if pair in seen or t["id"] in seen.values():
            raise AnalysisError(path, f"{where}: trial {t['id']} ({t['aqm']}/{t['variant']}) recorded twice")
        seen[pair] = t["id"]
        incomplete = []
        start = t.get("start_epoch_s")
        if not _is_num(start) or start <= 0:
            problem = (f"{where}.start_epoch_s: " + ("missing" if start is None else f"got {start!r}")
                       + "; expected the trial's common start in Unix seconds")
            if not partial:
                raise AnalysisError(path, f"{problem}; {PARTIAL_HINT}")
            incomplete.append("no start time in run.json")
            start = None
        phases = _phases(path, f"{where}.phases", t["phases"]) if "phases" in t else [dict(p) for p in default_phases]
        base = t.get("base_rtt_ms") or {}
        if not isinstance(base, dict) or not all(isinstance(k, str) and _is_num(v) for k, v in base.items()):
            raise AnalysisError(path, f"{where}.base_rtt_ms: expected an object of node -> milliseconds")
        bdev = t.get("bottleneck_interface")
        if bdev is not None and not isinstance(bdev, str):
            raise AnalysisError(path, f"{where}.bottleneck_interface: expected an interface name, got {bdev!r}")
        trials.append(TrialInfo(
            id=t["id"], aqm=t["aqm"], variant=t["variant"], start_epoch_s=None if start is None else float(start),
            phases=phases, rate_mbit=variant_rate_mbit(spec, t["variant"]), bottleneck_interface=bdev,
            base_rtt_ms={k: float(v) for k, v in base.items()}, incomplete=incomplete,
        ))
    for t in spec["trials"]:
        if (t["aqm"], t["variant"]) not in seen:
            trials.append(TrialInfo(
                id=f"{t['aqm']}-{t['variant']}", aqm=t["aqm"], variant=t["variant"],
                start_epoch_s=None, phases=[dict(p) for p in default_phases],
                rate_mbit=variant_rate_mbit(spec, t["variant"]), ran=False,
                incomplete=["not run (no record in run.json)"],
            ))
    return RunInfo(dir=run_dir, data=data, spec=spec, time_scale=float(ts), trials=trials, partial=partial)


def model_run_records(path: Path, data: dict, partial: bool) -> tuple[dict, list[str]]:
    """run.json of a schema_version 2 run (``data``, read from ``path``) checked for what
    :mod:`analysis.generic` reads from it: ``time_scale`` (a number > 0) and each trial
    record's ``start_epoch_s`` (Unix seconds > 0), as :func:`load_run` checks a version 1 one.

    Returns ``(data, problems)``: ``data`` itself, or with ``partial`` a copy without the
    trial records that lack their start (the analysis then reports those trials not run),
    and one line per record left out.
    Raises:
        AnalysisError: ``time_scale`` missing or not a number > 0; ``trials`` not a list; a
            record without its start time, unless ``partial``.
    """
    ts = data.get("time_scale")
    if not _is_num(ts) or not ts > 0:
        raise AnalysisError(path, f"time_scale: expected a number > 0, got {ts!r}"
                            if "time_scale" in data else "time_scale: missing; expected a number > 0")
    raw_trials = data.get("trials")
    if not isinstance(raw_trials, list):
        raise AnalysisError(path, "trials: expected a list of the trials run"
                            if "trials" in data else "trials: missing; expected a list of the trials run")
    kept, problems = [], []
    for i, t in enumerate(raw_trials):
        start = t.get("start_epoch_s") if isinstance(t, dict) else None
        if not isinstance(t, dict):
            raise AnalysisError(path, f"trials[{i}]: expected an object")
        if not _is_num(start) or start <= 0:
            problem = (f"trials[{i}].start_epoch_s: " + ("missing" if start is None else f"got {start!r}")
                       + "; expected the trial's common start in Unix seconds")
            if not partial:
                raise AnalysisError(path, f"{problem}; {PARTIAL_HINT}")
            problems.append(f"run.json: {problem}; the trial is left out")
            continue
        kept.append(t)
    return ({**data, "trials": kept} if problems else data), problems


def claim_files(spec: Spec, trial: TrialInfo) -> list[str]:
    """The raw files (relative to raw/) the summary's statistics read for ``trial``: each ping
    collector node's ``ping.txt`` (and ``base_rtt.txt`` when run.json has no base RTT for
    it) and each qdisc_stats node's ``qdisc.jsonl`` (:func:`analysis.tidy.build_tidy`)."""
    out = []
    for c in spec["collectors"]:
        for node in spec.select(c["nodes"]):
            if c["kind"] == "ping":
                out.append(f"{trial.id}/{node}/ping.txt")
                if node not in trial.base_rtt_ms:
                    out.append(f"{trial.id}/{node}/base_rtt.txt")
            elif c["kind"] == "qdisc_stats":
                out.append(f"{trial.id}/{node}/qdisc.jsonl")
    return list(dict.fromkeys(out))


def verified_raw(run_dir: Path, data: dict, partial: bool) -> RawCheck:
    """Every raw file of ``run_dir/raw`` against run.json's ``raw_sha256`` (``data``:
    run.json parsed). Raises AnalysisError when some file is missing, altered or unlisted,
    unless ``partial``; RawCheck says which. Always raises AnalysisError (with ``partial``
    too) when raw/ or anything under it is a symbolic link or a special file
    (:func:`analysis.integrity.raw_files`), or a trial record's ``id`` is not a plain name."""
    path = run_dir / "run.json"
    # each trial record's id names its folder under raw/: a plain name, never a path out of it
    for i, t in enumerate(data.get("trials") if isinstance(data.get("trials"), list) else []):
        tid = t.get("id") if isinstance(t, dict) else None
        if isinstance(tid, str) and not _TRIAL_ID.match(tid):
            raise AnalysisError(path, f"trials[{i}].id: expected a plain name (letters, digits, . _ -), got {tid[:80]!r}")
    check = verify_raw(run_dir / "raw", data.get("raw_sha256"), path)
    if check.damaged and not partial:
        raise AnalysisError(path, f"raw_sha256: {check.describe()}; {PARTIAL_HINT}")
    return check


def open_run(run_dir: Path | str, spec: Spec | None = None, partial: bool = False,
             data: dict | None = None) -> RunInfo:
    """Validate run.json (:func:`load_run`), check every raw file against its ``raw_sha256``,
    and mark the trials whose data are incomplete.

    A trial is incomplete when it did not run, has no start time (partial mode), has any
    raw file missing, altered or not in the record (:class:`RawCheck`), or lacks a record of
    a file its claims read (:func:`claim_files`; an interrupted run's honest record).

    Args:
        run_dir: the run directory; spec, data: as :func:`load_run`.
        partial: accept damaged raw files (their trials are then incomplete); without it a
            damaged run is refused.
    Returns:
        RunInfo with ``raw_check`` set and each trial's ``incomplete`` filled in.
    Raises:
        AnalysisError: as :func:`load_run`; ``raw_sha256`` missing or malformed; and,
            unless ``partial``, raw files missing, altered or unlisted, e.g.
            ``.../run.json: raw_sha256: 2 raw files differ from the record:
            raw/pie-limited/client1/ping.txt (missing), raw/... (altered); to analyze what
            is there, add --partial``.
        SpecError: as :func:`load_run`.
    """
    run = load_run(run_dir, spec, partial, data)
    check = verified_raw(run.dir, run.data, partial)
    run.raw_check = check
    damaged = check.by_trial()
    for t in run.trials:
        if not t.ran:
            continue
        t.incomplete += damaged.get(t.id, [])
        t.incomplete += [f"raw/{f} (not recorded)" for f in claim_files(run.spec, t) if f not in check.recorded]
    return run


__all__ = ["AnalysisError", "TrialInfo", "RunInfo", "load_run", "open_run", "read_run_json", "claim_files", "verified_raw",
           "variant_rate_mbit", "SpecError", "PARTIAL_HINT"]
