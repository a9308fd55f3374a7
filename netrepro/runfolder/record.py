"""run.json as a typed record, read and written only here: :class:`RunRecord`, its trial
records (:class:`TrialRecord`), its rate scale (:class:`RateScale`) and the reservations a
campaign lost (:class:`LostReservation`); and ``timings.json``, the seconds of each stage of
``netrepro reproduce`` (:func:`write_timings`, :func:`read_timings`).

run.json carries one ``version`` (:data:`RUN_VERSION`). A record of an earlier version is
upgraded once, on reading, one version at a time (:data:`_UPGRADES`), as Flent's
``resultset`` upgrades an older data file when it loads it; a newer version than this
netrepro knows is refused, naming the field. Version 1 is run.json as every run wrote it
until issue 56 (no ``version`` field: every recorded run in docs/runs); version 2 is the
same record with its version. The record keeps every field as read (:attr:`RunRecord.fields`,
read-only), so a run read and written back gives the same JSON but for the added version;
the fields the toolkit reads are attributes, typed and checked when the record is made
(:meth:`RunRecord.from_json`), and nothing outside this package spells a run.json key.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Mapping

from netrepro.core.errors import RunFolderError
from netrepro.core.frozen import FrozenMap
from netrepro.runfolder.atomic import write_text
from netrepro.runfolder.layout import TIMINGS, run_json

#: The version of run.json this netrepro writes and the newest it reads.
RUN_VERSION = 2

#: The range of run.json's ``lead_s``, the barrier's least lead in seconds: the one a run
#: accepts (NETREPRO_LEAD_S, :func:`netrepro.runner.barrier.lead_from_env`), from the barrier's
#: guard (0.2 s: ``netrepro.runner.barrier.BARRIER_GUARD_S``, the least margin a node may
#: acknowledge its release with) to an hour.
LEAD_S_MIN, LEAD_S_MAX = 0.2, 3600.0

#: What run.json's ``lost_reservations`` holds, in words (:func:`netrepro.runner.atonce.lose` writes it).
_LOST_SHAPE = ("{reservation: its copy number, at: an ISO 8601 time, trial, reason, unanswered: the nodes, "
               "released: true or false}")


def is_num(x) -> bool:
    """Whether ``x`` is a finite JSON number (bool excluded; JSON's NaN and Infinity too)."""
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _num(x) -> float | None:
    return float(x) if is_num(x) else None


def _shown(x) -> str:
    """A value of run.json for a message: its repr, at most 60 characters."""
    return repr(x)[:60]


def _is_time(x) -> bool:
    """Whether ``x`` is a time as run.json records it: ISO 8601 text with its UTC offset
    (Python's ``datetime.isoformat()`` of an aware time, as the runner writes it)."""
    if not isinstance(x, str):
        return False
    try:
        return datetime.fromisoformat(x).tzinfo is not None
    except ValueError:
        return False


def _str(x) -> str | None:
    return x if isinstance(x, str) else None


def _map(x) -> Mapping:
    return x if isinstance(x, Mapping) else FrozenMap()


@dataclass(frozen=True, slots=True)
class RateScale:
    """run.json's ``rate_scale``: every rate and byte size of the experiment times ``k`` (> 0),
    and ``why`` that k (``--rate-scale``, RATE_SCALE or the site's capacity), or None."""
    k: float
    why: str | None


@dataclass(frozen=True, slots=True)
class LostReservation:
    """One entry of run.json's ``lost_reservations``: a reservation (its copy number, >= 1) a
    campaign lost at ``at`` (ISO 8601) during ``trial`` for ``reason``, the nodes that did not
    answer, and whether it was released."""
    reservation: int
    at: str
    trial: str
    reason: str
    unanswered: tuple[str, ...]
    released: bool

    def to_json(self) -> dict:
        """The entry as run.json writes it."""
        return {"reservation": self.reservation, "at": self.at, "trial": self.trial, "reason": self.reason,
                "unanswered": list(self.unanswered), "released": self.released}


@dataclass(frozen=True, slots=True)
class TrialRecord:
    """One trial instance's record (an entry of run.json's ``trials``), its fields typed as
    read: a field missing or of another type is None (the reader that needs it refuses it:
    :func:`netrepro.runfolder.reading.model_run_records`, ``verified_raw``).

    ``id``: the trial instance (a folder under raw/); ``trial``: the experiment's trial it
    ran (``id`` for a run without repetitions or sweep); ``start_epoch_s``: the trial's common
    start, Unix seconds; ``duration_s``: its schedule, s; ``wall_s``, ``base_rtt_s``: s;
    ``status``; ``simulated``; ``repetition``, ``point``; ``labels``, ``phases``, ``health``,
    ``steps_s`` (step -> s), ``controller_loadavg`` (``before``/``after``: the controller's load
    averages) as recorded; ``controller_cores``; ``controller_cpu_busy`` (0..1); ``fields``:
    every field as read (read-only)."""
    id: str | None
    trial: str | None
    start_epoch_s: float | None
    duration_s: float | None
    wall_s: float | None
    base_rtt_s: float | None
    status: str | None
    simulated: bool
    repetition: int | None
    point: str | None
    labels: Mapping
    phases: tuple | None
    health: Mapping | None
    steps_s: Mapping
    controller_loadavg: Mapping
    controller_cores: float | None
    controller_cpu_busy: float | None
    fields: FrozenMap

    @classmethod
    def from_json(cls, data: Mapping) -> "TrialRecord":
        """The record of one run.json ``trials`` entry (an object); never raises."""
        tid = _str(data.get("id"))
        phases = data.get("phases")
        health = data.get("health")
        rep = data.get("repetition")
        return cls(id=tid, trial=_str(data.get("trial")) or tid, start_epoch_s=_num(data.get("start_epoch_s")),
                   duration_s=_num(data.get("duration_s")), wall_s=_num(data.get("wall_s")),
                   base_rtt_s=_num(data.get("base_rtt_s")), status=_str(data.get("status")),
                   simulated=data.get("simulated") is True,
                   repetition=rep if isinstance(rep, int) and not isinstance(rep, bool) else None,
                   point=_str(data.get("point")), labels=_map(data.get("labels")),
                   phases=tuple(phases) if isinstance(phases, list) else None,
                   health=health if isinstance(health, Mapping) else None, steps_s=_map(data.get("steps_s")),
                   controller_loadavg=_map(data.get("controller_loadavg")),
                   controller_cores=_num(data.get("controller_cores")),
                   controller_cpu_busy=_num(data.get("controller_cpu_busy")), fields=FrozenMap(data))

    def to_json(self) -> dict:
        """The record as run.json writes it (every field as read)."""
        return dict(self.fields)


@dataclass(frozen=True, slots=True)
class InstanceStatus:
    """One entry of run.json's ``trial_status``: a trial instance (``id``), the experiment's
    trial it runs (``trial``), its repetition (1 when missing), its sweep point's id (or None)
    and its ``status`` (``pending``, ``running``, ``complete``, ``failed``); ``reason``: why it
    failed (or None); ``attempts``: its attempts as recorded (objects; others left out)."""
    id: str
    trial: str
    repetition: int
    point: str | None
    status: str | None
    reason: str | None = None
    attempts: tuple[Mapping, ...] = ()

    @classmethod
    def from_json(cls, data: Mapping) -> "InstanceStatus":
        """The entry of an object whose ``id`` is a string (:meth:`RunRecord.from_json` leaves others out)."""
        rep = data.get("repetition", 1)
        return cls(id=data["id"], trial=_str(data.get("trial")) or data["id"],
                   repetition=rep if isinstance(rep, int) and not isinstance(rep, bool) else 1,
                   point=_str(data.get("point")), status=_str(data.get("status")),
                   reason=_str(data.get("reason")),
                   attempts=tuple(a for a in data.get("attempts") or [] if isinstance(a, Mapping))
                   if isinstance(data.get("attempts"), list) else ())


def recorded_rate_scale(data: Mapping, where: Path | str = "run.json") -> RateScale | None:
    """run.json's ``rate_scale`` (``data``: run.json parsed): None when missing or null (runs
    made before rate scales); a missing ``k`` is 1.

    Raises:
        RunFolderError: naming ``where`` and ``rate_scale``: not an object, or its ``k`` not a
            finite number > 0 (JSON's NaN and Infinity included).
    """
    rs = data.get("rate_scale")
    if rs is None:
        return None
    if not isinstance(rs, Mapping):
        raise RunFolderError(where, f"rate_scale: expected an object {{k, why}} (or null), got {str(rs)[:60]!r}")
    k = rs.get("k", 1)
    if not is_num(k) or k <= 0:
        raise RunFolderError(where, f"rate_scale.k: expected a number > 0 (every rate and byte size times k), "
                                   f"got {str(k)[:60]!r}")
    return RateScale(float(k), _str(rs.get("why")))


def _lost(path: Path | str, data: Mapping) -> tuple[LostReservation, ...]:
    """run.json's ``lost_reservations`` checked (missing: none)."""
    lost = data.get("lost_reservations", [])
    if not isinstance(lost, list):
        raise RunFolderError(path, f"lost_reservations: expected a list of the reservations the campaign lost, each "
                                  f"{_LOST_SHAPE}, got {_shown(lost)}")
    out = []
    for i, x in enumerate(lost):
        if not (isinstance(x, dict) and isinstance(x.get("reservation"), int) and not isinstance(x["reservation"], bool)
                and x["reservation"] >= 1 and _is_time(x.get("at")) and isinstance(x.get("trial"), str)
                and isinstance(x.get("reason"), str) and isinstance(x.get("unanswered"), list)
                and all(isinstance(n, str) for n in x["unanswered"]) and isinstance(x.get("released"), bool)):
            raise RunFolderError(path, f"lost_reservations[{i}]: expected {_LOST_SHAPE}, got {_shown(x)}")
        out.append(LostReservation(x["reservation"], x["at"], x["trial"], x["reason"], tuple(x["unanswered"]),
                                   x["released"]))
    return tuple(out)


def _to_version_2(data: dict) -> dict:
    """Version 1 (no ``version`` field) to 2: the same fields, with the version."""
    return {"version": 2, **data}


#: The upgrade of each earlier version to the next, applied in turn on reading.
_UPGRADES: dict[int, Callable[[dict], dict]] = {1: _to_version_2}


def upgraded(path: Path | str, data: Mapping) -> dict:
    """run.json ``data`` (read from ``path``) in :data:`RUN_VERSION`: a record without
    ``version`` is version 1; each earlier version upgraded to the next (:data:`_UPGRADES`).

    Raises:
        RunFolderError: ``version`` not a whole number >= 1, or newer than :data:`RUN_VERSION`.
    """
    version = data.get("version", 1)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise RunFolderError(path, f"version: expected a whole number from 1 to {RUN_VERSION} (run.json's format), "
                                  f"got {_shown(version)}")
    if version > RUN_VERSION:
        raise RunFolderError(path, f"version: {version}: written by a newer netrepro; expected at most {RUN_VERSION} "
                                  "(the newest run.json this netrepro reads): analyze it with that netrepro")
    out = dict(data)
    for v in range(version, RUN_VERSION):
        out = _UPGRADES[v](out)
    return out


@dataclass(frozen=True, slots=True)
class RunRecord:
    """run.json, read (:meth:`from_json`) and written (:func:`write_run`) only through this
    record.

    ``version``: :data:`RUN_VERSION` once read; ``experiment``, ``site``, ``mode``: names;
    ``spec``: the experiment file as run (an object, or None when missing); ``time_scale``
    (None when missing: :func:`netrepro.runfolder.reading.model_run_records` requires it),
    ``lead_s``: the barrier's lead, s (None: the barrier's default); ``rate_scale`` (None: rates
    as written); ``started_at``, ``finished_at``: ISO 8601 times or None; ``trials``: the trial
    records (a non-object entry is left out here and refused where trials are checked);
    ``raw_sha256``: raw file (relative to raw/) -> sha256 hex, as recorded (None when missing;
    its form is checked where raw/ is read against it: :func:`netrepro.runfolder.integrity.verify_raw`);
    ``instances``: each trial instance's status in the run's order (``trial_status``; () when
    missing); ``lost_reservations``;
    ``wall_s``: the trials' wall time, s (None when missing); ``timings_s``: the site's steps ->
    s; ``site_status``: what the site recorded of itself (an object; {} when missing);
    ``toolkit_commit``; ``spec_file``: the experiment file's path as run (None when missing);
    ``repeat``: the repetitions of each trial (``repetitions.repeat``, 1 when missing), ``shuffle`` and ``seed``: whether their order was drawn, from which seed
    (``repetitions``); ``sweep``: the sweep's design (an object; None for a run without one);
    ``fields``: every field as read (read-only; nested values as parsed)."""
    version: int
    experiment: str | None
    site: str | None
    mode: str | None
    spec: Mapping | None
    time_scale: float | None
    lead_s: float | None
    rate_scale: RateScale | None
    started_at: str | None
    finished_at: str | None
    trials: tuple[TrialRecord, ...]
    raw_sha256: Any
    instances: tuple[InstanceStatus, ...]
    lost_reservations: tuple[LostReservation, ...]
    wall_s: float | None
    timings_s: Mapping
    site_status: Mapping
    toolkit_commit: str | None
    spec_file: str | None
    repeat: int
    shuffle: bool
    seed: int | None
    sweep: Mapping | None
    fields: FrozenMap

    @classmethod
    def from_json(cls, data: Mapping, path: Path | str = "run.json") -> "RunRecord":
        """The record of run.json ``data`` (parsed from ``path``), upgraded to :data:`RUN_VERSION`
        (:func:`upgraded`), its fields read as numbers, times and lists checked:

        - ``rate_scale``: null or ``{k, why}``, k a finite number > 0 (:func:`recorded_rate_scale`);
        - ``time_scale`` (may be missing: :func:`netrepro.runfolder.reading.model_run_records`
          requires it and its range): a finite number > 0;
        - ``lead_s`` (missing or null: the barrier's default): a finite number of seconds from
          :data:`LEAD_S_MIN` to :data:`LEAD_S_MAX`, as NETREPRO_LEAD_S;
        - ``started_at``, ``finished_at`` (may be missing): ISO 8601 times with their UTC offset;
        - ``lost_reservations`` (may be missing): ``{reservation, at, trial, reason, unanswered,
          released}`` each.

        Raises:
            RunFolderError: one line naming ``path``, the field and what was expected.
        """
        data = upgraded(path, data)
        rate_scale = recorded_rate_scale(data, path)
        lead = data.get("lead_s")
        if lead is not None and not (is_num(lead) and LEAD_S_MIN <= lead <= LEAD_S_MAX):
            raise RunFolderError(path, f"lead_s: expected the barrier's lead in seconds, a number from {LEAD_S_MIN:g} "
                                      f"to {LEAD_S_MAX:g} (the NETREPRO_LEAD_S a run accepts), got {_shown(lead)}")
        for key in ("started_at", "finished_at"):
            if key in data and not _is_time(data[key]):
                raise RunFolderError(path, f"{key}: expected an ISO 8601 time with its UTC offset, as the run writes it "
                                          f"(2026-11-25T19:36:28.123456+00:00), got {_shown(data[key])}")
        ts = data.get("time_scale")
        if "time_scale" in data and not (is_num(ts) and ts > 0):
            raise RunFolderError(path, f"time_scale: expected a number > 0 (the factor of every duration), "
                                      f"got {str(ts)[:60]!r}")
        lost = _lost(path, data)
        trials = data.get("trials")
        spec = data.get("spec")
        reps = _map(data.get("repetitions"))
        repeat, seed = reps.get("repeat", 1), reps.get("seed")
        sweep = data.get("sweep")
        return cls(version=data["version"], experiment=_str(data.get("experiment")), site=_str(data.get("site")),
                   mode=_str(data.get("mode")), spec=spec if isinstance(spec, Mapping) else None,
                   time_scale=_num(data.get("time_scale")), lead_s=_num(lead), rate_scale=rate_scale,
                   started_at=_str(data.get("started_at")), finished_at=_str(data.get("finished_at")),
                   trials=tuple(TrialRecord.from_json(t) for t in trials if isinstance(t, Mapping))
                   if isinstance(trials, list) else (),
                   raw_sha256=data.get("raw_sha256"), lost_reservations=lost,
                   instances=tuple(InstanceStatus.from_json(s) for s in data.get("trial_status") or []
                                   if isinstance(s, Mapping) and isinstance(s.get("id"), str))
                   if isinstance(data.get("trial_status"), list) else (), wall_s=_num(data.get("wall_s")),
                   timings_s=_map(data.get("timings_s")), site_status=_map(data.get("site_status")),
                   toolkit_commit=_str(data.get("toolkit_commit")), spec_file=_str(data.get("spec_file")),
                   repeat=repeat if isinstance(repeat, int) and not isinstance(repeat, bool) else 1,
                   shuffle=bool(reps.get("shuffle")),
                   seed=seed if isinstance(seed, int) and not isinstance(seed, bool) else None,
                   sweep=sweep if isinstance(sweep, Mapping) else None, fields=FrozenMap(data))

    @property
    def swept(self) -> bool:
        """Whether the run is a sweep's (its ``sweep`` lists points)."""
        points = self.sweep.get("points") if self.sweep is not None else None
        return isinstance(points, list) and bool(points)

    @property
    def rate_scale_k(self) -> float:
        """The rate scale k: every rate and byte size times k; 1 when run.json has none."""
        return self.rate_scale.k if self.rate_scale is not None else 1.0

    def to_json(self) -> dict:
        """run.json as written: every field as read, with :data:`RUN_VERSION`."""
        return {**self.fields, "version": RUN_VERSION}


def resume_record(meta: dict, known_ids: list[str], session: dict) -> list[str]:
    """Make a resumed run's record (its run.json ``meta``, checked by
    :func:`netrepro.runner.resume.load_resume`) ready to continue, in place: every trial
    instance's status in the run's order (``known_ids``,
    the experiment's trials, for a run that recorded none), an instance and attempt left
    ``running`` by a process that ended without a word (SIGKILL, power) marked failed, and
    this resume (``session``: when, and what ran it) appended to ``resumes``. Returns the
    instances still to run, in order."""
    done = {t["id"] for t in meta["trials"]}
    order = [t["id"] for t in meta.get("trial_status") or []] or known_ids
    meta["trial_status"] = [next((s for s in meta.get("trial_status") or [] if s.get("id") == tid),
                                 {"id": tid, "trial": tid, "repetition": 1,
                                  "status": "complete" if tid in done else "pending", "attempts": []})
                            for tid in order]
    for ts in meta["trial_status"]:
        if ts["status"] == "running":  # the process running it ended without a word (SIGKILL, power)
            ts.update(status="failed", reason="the run's process ended without recording why (killed?)")
            for a in ts.get("attempts") or []:
                if a.get("status") == "running":
                    a.update(status="failed", reason=ts["reason"])
    pending = [ts["id"] for ts in meta["trial_status"] if ts["status"] != "complete"]
    meta.setdefault("resumes", []).append({**session, "from_trial": pending[0] if pending else None})
    return pending


def add_lost_reservation(meta: dict, lost: LostReservation) -> None:
    """Record ``lost`` in the runner's run.json ``meta`` (in place): appended to its
    ``lost_reservations``, written with the record next (:func:`write_run`)."""
    meta.setdefault("lost_reservations", []).append(lost.to_json())


def first_record(*, experiment: str, spec: dict, spec_file: str, site: str, session: Mapping, time_scale: float,
                 lead_s: float, packet: dict, instances: list[dict], repetitions: dict) -> dict:
    """A new run's record before any trial, as the runner keeps it (a dict, updated as the run
    goes by the functions below and written by :func:`write_run`): the experiment's name,
    ``spec`` (the file as recorded) and ``spec_file`` (its path), the ``site``'s name,
    ``session`` (:func:`netrepro.runner.run._provisioned`: ``at``, ``toolkit_commit``, ``mode``,
    ``site_status``, ``controller``), ``time_scale``, ``lead_s`` (s), ``packet``, every trial
    instance (``instances``: ``as_dict()`` of each, in run order) pending without attempts and
    ``repetitions`` (their design). The fields are in run.json's order."""
    return {
        "experiment": experiment, "spec": spec, "spec_file": spec_file, "site": site,
        "mode": session["mode"], "site_status": session["site_status"], "time_scale": time_scale, "lead_s": lead_s,
        "toolkit_commit": session["toolkit_commit"], "controller": session["controller"],
        "started_at": session["at"], "trials": [], "nodes": {}, "raw_sha256": {}, "wall_s": 0.0, "packet": packet,
        "trial_status": [{**i, "status": "pending", "attempts": []} for i in instances],
        "repetitions": repetitions,
    }


def instance_statuses(meta: Mapping) -> list[dict]:
    """The runner's record ``meta``: each trial instance's status (run.json's ``trial_status``:
    ``{id, trial, repetition, point?, status, reason?, attempts}``), in run order, the dicts
    themselves (updating one updates the record)."""
    return meta["trial_status"]


def instance_status(meta: Mapping, tid: str) -> dict:
    """The status of trial instance ``tid`` in the runner's record ``meta`` (the dict itself).

    Raises:
        StopIteration: the record has no instance ``tid``.
    """
    return next(s for s in meta["trial_status"] if s["id"] == tid)


def kept_instances(meta: Mapping) -> list[str]:
    """The trial instances of the runner's record ``meta`` that are complete, in run order."""
    return [s["id"] for s in meta["trial_status"] if s["status"] == "complete"]


def add_raw_sha256(meta: dict, hashes: Mapping[str, str]) -> None:
    """Add ``hashes`` (a raw file relative to raw/ -> its sha256 hex) to the runner's record
    ``meta`` (in place: its ``raw_sha256``, made a new dict)."""
    meta["raw_sha256"] = {**(meta.get("raw_sha256") or {}), **hashes}


def set_unhealthy_retries(meta: dict, retries: int) -> None:
    """Record in ``meta`` how many unhealthy attempts of a trial instance are run again (>= 0)."""
    meta["unhealthy_retries"] = retries


def unhealthy_retries_of(meta: Mapping) -> int:
    """How many unhealthy attempts of a trial instance the run in ``meta`` runs again
    (:func:`set_unhealthy_retries`).

    Raises:
        KeyError: the run set none.
    """
    return meta["unhealthy_retries"]


def set_site_documents(meta: dict, documents: Any) -> None:
    """Record in ``meta`` the site's documents kept in the run folder
    (:func:`netrepro.runfolder.writing.keep_site_documents`'s answer)."""
    meta["site_documents"] = documents


def set_finished(meta: dict, at: str) -> None:
    """Record in ``meta`` when the run ended (``at``: ISO 8601 with its UTC offset)."""
    meta["finished_at"] = at


def set_steps(record: dict, steps_s: Mapping[str, float]) -> None:
    """Record in a trial's ``record`` where its time went: step -> s."""
    record["steps_s"] = dict(steps_s)


def write_run(run_dir: Path, data: Mapping) -> RunRecord:
    """Write run.json in ``run_dir`` whole and atomically (never through a link:
    :func:`netrepro.runfolder.atomic.write_text`), the one place it is written: ``data`` (the
    runner's record, a mapping of run.json's fields) checked as :meth:`RunRecord.from_json`
    reads it, with :data:`RUN_VERSION`. Values JSON cannot hold are written as text
    (``default=str``). Returns the record written.

    Raises:
        RunFolderError: a field the reader would refuse (the runner wrote it wrong).
    """
    path = run_json(run_dir)
    record = RunRecord.from_json(json.loads(json.dumps(dict(data), default=str)), path)
    write_text(path, json.dumps(record.to_json(), indent=1) + "\n")
    return record


def write_timings(run_dir: Path, timings: Mapping[str, float]) -> None:
    """Write ``timings.json`` in ``run_dir`` (:data:`netrepro.runfolder.layout.TIMINGS`): each
    stage of ``netrepro reproduce`` (``up_s``, ``provision_s``, ``trials_s``, ``analyze_s``,
    ``down_s``, ``total_s``) -> its seconds; atomically, never through a link.

    Raises:
        RunFolderError: a value that is not a finite number (naming the stage).
    """
    for stage, seconds in timings.items():
        if not is_num(seconds):
            raise RunFolderError(Path(run_dir) / TIMINGS, f"{stage}: expected seconds, a finite number, got "
                                                         f"{_shown(seconds)}")
    write_text(Path(run_dir) / TIMINGS, json.dumps(dict(timings), indent=1) + "\n")


def read_timings(run_dir: Path) -> dict[str, float]:
    """``timings.json`` of ``run_dir``: stage -> seconds; {} when there is none (a run made
    by ``netrepro run``, not ``reproduce``).

    Raises:
        RunFolderError: it is not a JSON object of stage -> seconds (one line naming the file).
    """
    path = Path(run_dir) / TIMINGS
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_bytes().decode("utf-8"))
    except (OSError, ValueError):
        data = None
    if isinstance(data, dict) and all(is_num(v) for v in data.values()):
        return {k: float(v) for k, v in data.items()}
    raise RunFolderError(path, "expected a JSON object of step -> seconds (written by `netrepro reproduce`)")


__all__ = ["RUN_VERSION", "LEAD_S_MIN", "LEAD_S_MAX", "RateScale", "LostReservation", "TrialRecord", "InstanceStatus",
           "RunRecord",
           "recorded_rate_scale", "upgraded", "resume_record", "add_lost_reservation", "first_record", "instance_statuses",
           "instance_status", "kept_instances", "add_raw_sha256", "set_unhealthy_retries", "unhealthy_retries_of",
           "set_site_documents", "set_finished", "set_steps", "write_run", "write_timings", "read_timings", "is_num"]
