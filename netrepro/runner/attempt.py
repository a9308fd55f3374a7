"""A run as its stages share it (:class:`Run`: what it was planned with, fixed once its folder
is open, and where it stopped, :class:`Outcome`), and one attempt at a trial instance in it:
begun (:func:`begin`: recorded as running, its trial vars made), its trial run or simulated
(:func:`trial_of`), concluded (:func:`conclude`: recorded complete with its raw files' sha256,
or failed and why) or discarded (:func:`discard`); the lease kept before it
(:func:`keep_leased`) and an unhealthy attempt run again (:data:`UNHEALTHY_RETRIES`)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Mapping

from netrepro.experiment import sweep as sweeps
from netrepro.model import claim_time_scale_min
from netrepro.runner.console import SIGNAL_EXIT, log, signal_of
from netrepro.runner.instances import trials_by_id
from netrepro.runner.parallel import Reservation
from netrepro.runner.progress import RunProgress
from netrepro.runner.trial import TrialFailed, TrialJudge, delay_probe, run_trial, simulate_trial, stop_trial
from netrepro.runner.trialvars import scaled_phases, settings_text, trial_vars
from netrepro.sites import Site, SiteError
from netrepro.experiment.spec import Spec
from netrepro.runfolder.integrity import sha256_tree
from netrepro.runfolder.layout import staging_dir, trial_raw
from netrepro.runfolder.record import add_raw_sha256, instance_status, unhealthy_retries_of, write_run
from netrepro.runfolder.writing import remove_tree


@dataclass
class Outcome:
    """Where a run stopped: ``failure`` (trial instance, reason, exit status), None while every
    attempt so far completed or goes again; set by the attempt that stops the run, by a lease
    that could not be renewed, or by a signal; taken back when a reservation is lost
    (:func:`netrepro.runner.atonce.lose`)."""

    failure: tuple[str, str, int] | None = None


@dataclass(frozen=True)
class Run:
    """A run as its stages share it, made once its folder is open (:func:`netrepro.runner.run.run`):
    the experiment as written (``spec``) and at the site's rate scale (``scaled``), each sweep
    point's (``at_point``: point id -> (the point, its experiment at that scale)), the site's
    name and options as given, the reservations the trials run on (``--parallel``; the first
    is the run's ``site`` and ``inv``, None when the site simulates its trials), the run folder
    and the lock held on it (a descriptor, :func:`netrepro.runfolder.writing.lock_run`),
    TIME_SCALE, the barrier's least lead (s), the trial instances to run in order
    (``pending``), the health judge (None: not judged during the run), how many instances run
    at once (``jobs``), the command line's --rate-scale (None: RATE_SCALE or the site's
    choice) and the hint that says how to resume.

    ``meta`` is the run's record (run.json's content), which the stages update in place and
    write after each step; ``outcome`` is where the run stopped. Nothing else changes."""

    spec: Spec
    scaled: Spec
    at_point: Mapping[str, tuple[Any, Spec]]
    site_name: str
    options: dict[str, Any] | None
    reservations: tuple[Reservation, ...]
    run_dir: Path
    lock: int
    meta: dict
    time_scale: float
    lead: float
    pending: tuple[str, ...]
    judge: TrialJudge | None
    jobs: int
    rate_scale: str | float | None
    resume_hint: str
    outcome: Outcome = field(default_factory=Outcome)

    @property
    def site(self) -> Site:
        """The site of the run's first reservation (its only one without ``--parallel``)."""
        return self.reservations[0].site

    @property
    def inv(self) -> Path | None:
        """The first reservation's inventory (None: the site simulates its trials)."""
        return self.reservations[0].inv


#: A lease must outlast the next trial's expected end by this much, s; else it is renewed
#: before the trial starts (a testbed's clock, a slow fetch and the release need a margin).
LEASE_MARGIN_S = 1800.0


def keep_leased(r: Run, tid: str, left: int, estimate_s: float, site: Site | None = None) -> None:
    """Before trial instance ``tid`` (``left`` instances to go, ``estimate_s`` s each) on
    ``site`` (default the run's): when the
    site's lease (:meth:`Site.lease_end`) would end less than :data:`LEASE_MARGIN_S` after this
    trial's expected end, renew it to cover every instance left plus the margin, in whole
    hours, saying so. A renewal refused stops the run here (``r.outcome.failure``), before the trial:
    what ran is kept, and the account says when the lease ends and how to resume."""
    site = site or r.site
    end = site.lease_end()
    if end is None:
        return
    now = time.time()
    if end >= now + estimate_s + LEASE_MARGIN_S:
        return
    hours = max(1, math.ceil((left * estimate_s + LEASE_MARGIN_S) / 3600))
    ends = datetime.fromtimestamp(end, timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    log(f"[run] the lease ends at {ends}, before trial {tid} and the margin ({LEASE_MARGIN_S / 60:.0f} min) "
        f"would: renewing it to {hours} h from now")
    try:
        site.renew(hours)
    except SiteError as exc:
        r.outcome.failure = (tid, f"the lease ends at {ends} and renewing it for {hours} h was refused ({exc}); "
                                  "extend it in the portal first", 2)


@dataclass
class Begun:
    """A trial instance's attempt as :func:`begin` started it: its id (``tid``), its entry of
    run.json's ``trial_status`` (``ts``) and the attempt appended to it, its sweep point (or
    None), its experiment at the site's rate scale (``tspec``), the file's trial id, its trial
    vars (``tv``), its factor values, its staging folder (``.fetch/<tid>``), ``started``
    (gets ``start_epoch_s`` once known, for the progress display) and where it runs."""

    tid: str
    ts: dict
    attempt: dict
    point: Any
    tspec: Spec
    trial_id: str
    tv: dict
    factor_values: dict
    staging: Path
    started: dict
    #: where it runs: the site and its inventory (None: the site simulates its trials), and
    #: the reservation of a campaign on several (None: the run's one site)
    site: Site
    inv: Path | None
    res: Reservation | None = None


#: How many times a run runs a trial instance again, at once, when its health checks failed
#: (analysis/health.py), before it keeps an unhealthy attempt (whose claims are then
#: inconclusive): 1. The health checks measure the substrate, not the claims, so running the
#: trial again selects on the machine's behaviour only; the unhealthy attempt's data are kept
#: whole in ``failed/<trial>-<n>/`` and its checks in run.json (``trial_status[].attempts``).
#: One-off stalls of an emulated node otherwise decided verdicts: a flow client 124-216 ms
#: late in 3 of 42 pacing-lab trials on a 2-core machine without KVM, each time in a
#: different trial, every other check passing (docs/runs/quick-pacing-lab-2026-11-28). Not for
#: a simulated trial, whose health is the same in every attempt.
UNHEALTHY_RETRIES = 1


def unhealthy_retries(spec: Spec, time_scale: float) -> int:
    """How many times a run at ``time_scale`` runs an unhealthy trial again:
    :data:`UNHEALTHY_RETRIES`, or 0 when no claim of the experiment applies at that time scale
    (:func:`netrepro.model.claim_time_scale_min`): the verdict can then only be inconclusive,
    whatever the trials' health, and a retry would cost a trial's time for nothing. At
    TIME_SCALE 0.1, pie-vs-red's 2.5-s phases fail ``data_start_lag`` in most trials (37-40 %
    against 25 %), which doubled the trials of the short runs the tests make."""
    m = spec.model
    applies = any(claim_time_scale_min(m, c) <= time_scale for c in m.claims)
    return UNHEALTHY_RETRIES if applies else 0


def unhealthy_attempts(ts: dict) -> int:
    """How many of a trial instance's attempts (run.json ``trial_status``) were not kept because
    their health checks failed, over every session of the run."""
    return sum(1 for a in ts.get("attempts") or [] if isinstance(a, dict) and a.get("unhealthy"))


def run_instance(r: Run, tid: str, progress: RunProgress) -> None:
    """One attempt at trial instance ``tid``, recorded in run.json: a complete trial's record
    and the sha256 of its raw files, or why it failed (``r.outcome.failure`` then says where the run
    stops); an unhealthy attempt with a retry left (:data:`UNHEALTHY_RETRIES`) is recorded as
    failed and followed by another at once. Anything else raised is recorded as the failure
    too, and raised again."""
    while True:
        b = begin(r, tid, progress)
        if not conclude(r, b, progress, trial_of(r, b)):
            return


def begin(r: Run, tid: str, progress: RunProgress, res: Reservation | None = None) -> Begun:
    """Start an attempt at trial instance ``tid`` (on reservation ``res`` of a campaign on
    several, named in the attempt; None: the run's site): recorded as running in run.json
    (written), its staging folder emptied, its trial vars made and its progress shown. Returns
    it for :func:`conclude`."""
    meta, time_scale = r.meta, r.time_scale
    ts = instance_status(meta, tid)
    point, tspec = r.at_point.get(ts.get("point"), (None, r.scaled))
    trial_id = ts.get("trial") or tid
    trial = trials_by_id(tspec)[trial_id]
    attempt = {"started_at": datetime.now(timezone.utc).isoformat(), "status": "running",
               **({"reservation": res.number} if res is not None else {})}
    ts.setdefault("attempts", []).append(attempt)
    ts.update(status="running", reason=None)
    write_run(r.run_dir, meta)
    staging = staging_dir(r.run_dir, tid)
    remove_tree(staging)
    tv = {**trial_vars(tspec, trial, time_scale, staging / "archives", r.lead), "id": tid,
          "trial": trial_id, "time_scale": time_scale, "repetition": ts.get("repetition", 1)}
    factor_values = sweeps.trial_factors(meta["sweep"]["factors"], point, trial_id) if point else {}
    if point:
        tv.update(point=point.id, factors=factor_values)
    started: dict[str, float] = {}
    site, inv = (res.site, res.inv) if res is not None else (r.site, r.inv)
    progress.trial(tid, settings_text(r.spec, trial) + "".join(f"; {k}={v}" for k, v in factor_values.items()),
                   scaled_phases(tspec, time_scale)
                   or [{"name": "trial", "start_s": 0, "end_s": tv["duration_s"]}],
                   lambda: started.get("start_epoch_s"), None if inv is None else delay_probe(inv, tv),
                   where=res.label if res is not None else "")
    return Begun(tid, ts, attempt, point, tspec, trial_id, tv, factor_values, staging, started, site, inv, res)


def conclude(r: Run, b: Begun, progress: RunProgress, trial: Callable[[], dict], timed: bool = False) -> bool:
    """End the attempt ``b``: ``trial()`` runs the trial, or what is left of it, and returns
    its record; recorded in run.json: the record (with the instance's trial, repetition,
    point and the run's ``jobs``) and the sha256 of its raw files, or why it failed
    (``r.outcome.failure`` then says where the run stops, unless the failure asks for the trial
    again: then True is returned). Anything else raised is recorded as the failure too, and
    raised again. ``timed``: the progress counts the record's ``wall_s`` as the trial's time
    (a simulated trial that waited to be recorded), not the time since it began."""
    meta, tid, ts, attempt = r.meta, b.tid, b.ts, b.attempt
    outcome: tuple[str, str] | None = None  # (status, reason)
    wall_s = None
    again = False
    try:
        record = trial()
        record.update(trial=ts.get("trial") or tid, repetition=ts.get("repetition", 1),
                      **({"point": b.point.id, "factors": b.factor_values} if b.point else {}), jobs=r.jobs,
                      **({"reservation": b.res.number} if b.res is not None else {}))
        wall_s = record.get("wall_s") if timed else None
    except TrialFailed as exc:
        outcome = ("failed", exc.reason)
        attempt.update(exc.details)
        if exc.stop:
            stop_attempt(b)
        if exc.again:
            again = True
        else:
            r.outcome.failure = (tid, exc.reason, 2)
    except KeyboardInterrupt as exc:
        sig = signal_of(exc)
        outcome = ("failed", f"interrupted by {sig}")
        stop_attempt(b)
        r.outcome.failure = (tid, outcome[1], SIGNAL_EXIT[sig])
    except OSError as exc:  # the controller's disk (extracting, moving the data)
        why = exc.strerror or str(exc)
        outcome = ("failed", f"{why} ({exc.filename})" if exc.filename else why)
        r.outcome.failure = (tid, outcome[1], 2)
    except BaseException as exc:
        outcome = ("failed", f"{type(exc).__name__}: {exc}")
        r.outcome.failure = (tid, outcome[1], 2)
        raise
    else:
        meta["trials"].append(record)
        add_raw_sha256(meta, {f"{tid}/{k}": v for k, v in sha256_tree(trial_raw(r.run_dir, tid)).items()})
        outcome = ("complete", None)
    finally:
        remove_tree(b.staging)
        progress.end(tid, bool(outcome and outcome[0] == "complete"), (outcome or ("", "stopped"))[1] or "", wall_s)
        attempt.update(status=outcome[0] if outcome else "failed", reason=outcome[1] if outcome else "stopped",
                       ended_at=datetime.now(timezone.utc).isoformat())
        ts.update(status=attempt["status"], reason=attempt["reason"])
        if r.outcome.failure is None:
            write_run(r.run_dir, meta)
    return again


def discard(r: Run, b: Begun, progress: RunProgress, why: str) -> None:
    """Record the attempt ``b``, begun but not to be recorded (:func:`simulate_at_once`), as
    failed for ``why`` (its data are removed with the staging folders; run.json is written
    with the run's end)."""
    remove_tree(b.staging)
    progress.end(b.tid, False, why)
    b.attempt.update(status="failed", reason=why, ended_at=datetime.now(timezone.utc).isoformat())
    b.ts.update(status="failed", reason=why)


def trial_of(r: Run, b: Begun) -> Callable[[], dict]:
    """What runs attempt ``b``'s trial and returns its record, to call (in a worker thread or
    here): simulated (:func:`netrepro.runner.trial.simulate_trial`) when its site simulates its
    trials (``b.inv`` None), else run on its nodes (:func:`netrepro.runner.trial.run_trial`),
    an unhealthy attempt going again while a retry is left (:func:`unhealthy_attempts` below
    run.json's ``unhealthy_retries``) and the run judges health."""
    n = len(b.ts["attempts"])
    if b.inv is None:
        return lambda: simulate_trial(b.tspec, b.site, b.tv, r.time_scale, r.run_dir, n, b.started, judge=r.judge)
    retry = r.judge is not None and unhealthy_attempts(b.ts) < unhealthy_retries_of(r.meta)
    return lambda: run_trial(b.tspec, b.site, b.inv, b.tv, r.time_scale, r.run_dir, n, b.started, judge=r.judge,
                             retry_unhealthy=retry)


def stop_attempt(b: Begun) -> None:
    """Stop what attempt ``b`` left running on its nodes (stop-trial.yml,
    :func:`netrepro.runner.trial.stop_trial`); nothing for a simulated one (``b.inv`` None)."""
    if b.inv is not None:
        stop_trial(b.tspec, b.inv, b.site, b.tv)
