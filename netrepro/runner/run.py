"""A run: the trials of an experiment on a provisioned site, in a new run folder or resumed in
the folder of one that stopped part-way (:func:`run`). Each trial instance is run by
:mod:`netrepro.runner.trial`; run.json is rewritten after each one, and the file INCOMPLETE
says where and why the run stopped until every trial is complete."""

from __future__ import annotations

import math
import os
import platform
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from netrepro.experiment import sweep as sweeps
from netrepro.model import claim_time_scale_min
from netrepro.runner.progress import RunProgress
from netrepro.runner.barrier import BARRIER_LEAD_MIN_S, lead_from_env
from netrepro.runner.console import SIGNAL_EXIT, StepIncomplete, site_arg, spec_arg, log, signal_of
from netrepro.runner.fetch import nodes_meta
from netrepro.runner.instances import checked_trial_ids, instance_estimate_s, trial_instances, trials_by_id, checked_jobs
from netrepro.runner.resume import load_resume, resume_record
from netrepro.runner.parallel import Reservation, open_reservations, unanswered
from netrepro.runner.playbooks import end_playbooks
from netrepro.runner.steps import down, shown_path
from netrepro.runner.trial import (STOPPING, TrialJudge, delay_probe, kept_simulation, run_trial, simulate_trial,
                                   simulation_of, stop_trial, TrialFailed)
from netrepro.runner.trialvars import spec_at_rate_scale, scaled_phases, settings_text, trial_vars
from netrepro.runner.schedule import Instance
from netrepro.sites import Site, SiteError
from netrepro.experiment.spec import Spec
from netrepro.runfolder.atomic import write_text
from netrepro.runfolder.integrity import sha256_tree
from netrepro.runfolder.layout import RESERVE, STAGING, incomplete_marker, raw_dir, run_json, staging_dir, trial_raw
from netrepro.runfolder.writing import (RESERVE_BYTES, git_commit, keep_site_documents, lock_run, new_run_dir,
                                        point_latest, remove_tree, reserve_space, spec_as_recorded, write_json)


def run(spec: Spec, site_name: str, time_scale: float | None = 1.0, options: dict[str, Any] | None = None,
        trial_ids: list[str] | None = None, lead_s: float | None = None, resume: Path | None = None,
        command: str = "run", repeat: int | None = None, shuffle: bool = True, seed: int | None = None,
        progress_tty: bool | None = None, sweep: bool = False, judge: TrialJudge | None = None,
        jobs: int | None = None, rate_scale: str | float | None = None, parallel: int = 1) -> Path:
    """Run the spec's trials (or ``trial_ids``) on a provisioned site; return the run folder.

    ``repeat``: run every trial that many times, in blocks of one of each, each block in a
    random order drawn from ``seed`` when ``shuffle`` (:func:`netrepro.runner.schedule.plan`; a fresh
    seed when None); the trial instances are ``<trial>.r<k>`` and run.json records
    ``repetitions: {repeat, shuffle, seed, design}`` and each instance's ``trial`` and
    ``repetition``. A resumed run keeps its own: ``repeat`` None, or the run's (:func:`load_resume`
    refuses another).
    ``sweep``: run each trial at every point of the experiment's ``sweep.factors``
    (:mod:`netrepro.experiment.sweep`): the instances are ``<trial>.p<i>`` (``.r<k>`` when repeated), in
    blocks of every (trial, point) shuffled as repetitions are; run.json records ``sweep:
    {factors, points}`` and each instance's ``point`` and ``factors`` (name -> value). A
    resumed run keeps its own sweep.
    ``progress_tty``: the progress display (:class:`netrepro.runner.progress.RunProgress`): rich's
    on a terminal (default: when stdout is one), else timestamped lines.
    ``judge``: judges each trial's health as it completes (:data:`TrialJudge`; the command
    line hands in the analysis's, :func:`netrepro.cli.step_commands.judge_trial`), recorded as the
    trial's ``health`` in run.json; None: not judged during the run.
    ``jobs``: how many trial instances run at once (:func:`checked_jobs`): by default the
    site's (:meth:`Site.default_jobs`: the ns3 site's Slurm executor queues 32), else one per
    core on a site that simulates its trials, else 1, the only value such a site takes. With
    more than one, up to ``jobs`` are simulated at once (:func:`_simulate_at_once`) and
    recorded one at a time in the run's order, so that run.json is a serial run's; a
    simulation's randomness is its repetition (ns-3's run number), whatever ran beside it.
    run.json records ``jobs``: the run's (the latest session's), each resume's (in
    ``resumes``) and each trial's (in its record).

    A new run gets a new folder (:func:`new_run_dir`). ``resume``: the folder of an earlier
    run that stopped, continued from its first trial not complete, with the trials, time
    scale and lead it started with (:func:`load_resume` says what is refused).

    The run folder holds
    - ``raw/<trial>/<node>/``: a trial's data as fetched, moved there whole and once, when the
      trial has completed and its data covers the schedule (:func:`check_trial_data`) and no
      node clock was stepped (:func:`clock_problems`); never written again;
    - ``run.json``: rewritten after each trial: the completed trials (``trials``) and the
      sha256 of each of their raw files (``raw_sha256``), every trial's status (complete,
      failed with the reason, running, pending) and attempts (``trial_status``), each resume
      (``resumes``), and how the run was made;
    - ``INCOMPLETE`` until every trial is complete: the trial and reason where the run stopped
      and how to resume it;
    - ``failed/<trial>-<n>/``: the data of an attempt that ran to its end but failed its checks.

    ``parallel``: how many reservations of the site the trials run on at once (``--parallel N``,
    :func:`netrepro.runner.steps.up_copies`; each provisioned, :func:`open_reservations`): each
    takes the next pending instance, in the run's (shuffled) order, as it comes free
    (:func:`_run_on_reservations`); each instance's record and attempts name the reservation
    (``reservation``: its copy number) and run.json the campaign's (``parallel``,
    ``reservations``). A trial that fails on a reservation whose nodes no longer answer
    (:func:`netrepro.runner.parallel.unanswered`) loses that reservation: it is released, said
    on the console, and the instance goes back to the front of the queue for the others, as a
    resumed run would run it; when none is left the run stops there, resumable.

    ``command``: the netrepro command the resume hint names (``run`` or ``reproduce``).
    ``rate_scale``: the command line's --rate-scale, which wins over RATE_SCALE
    (:func:`netrepro.runner.trialvars.spec_at_rate_scale`): it chooses the scale when the site's
    state has none yet (a site that simulates its trials, before its first run), else it must
    be the scale the site was provisioned at (ValueError otherwise, before any folder is made).

    Raises:
        SpecError: bad ``trial_ids``, ``resume`` or ``jobs`` (nothing is written).
        RuntimeError: the site is not provisioned.
        StepIncomplete: a trial failed or the run was interrupted (SIGINT/SIGTERM): the run
            is marked INCOMPLETE; the completed trials are kept.
    """
    known_ids = checked_trial_ids(spec, trial_ids)
    jobs = checked_jobs(site_name, jobs, options)
    prior = load_resume(spec, site_name, Path(resume), time_scale, trial_ids, repeat) if resume is not None else None
    if prior is None:
        repeat = repeat or 1
        points = sweeps.points(spec) if sweep else None
        instances, seed = trial_instances(spec, trial_ids, repeat, shuffle, seed, points)
    else:
        points = sweeps.from_record(spec, prior["sweep"]) if isinstance(prior.get("sweep"), dict) else None
    reservations, scaled, session = _provisioned(spec, site_name, options, rate_scale, jobs, parallel)
    site, inv = reservations[0].site, reservations[0].inv
    if prior is not None:
        r = _resumed(spec, site, Path(resume).resolve(), prior, known_ids, session)
    else:
        r = _started(spec, site_name, site, session, time_scale, lead_s, instances, repeat, shuffle, seed, points,
                     reservations)
    r.scaled, r.inv, r.judge, r.jobs, r.rate_scale = scaled, inv, judge, jobs, rate_scale
    r.reservations, r.site_name, r.options = reservations, site_name, options
    _record_settings(r, command, site_name)
    _hold_space(r, remove=prior is None)
    kept, unrecorded = _run_trials(r, points, session, progress_tty)
    return _ended(r, kept, unrecorded)


@dataclass
class _Run:
    """A run as its steps share it: the experiment as written (``spec``) and at the site's rate
    scale (``scaled``), the site and its inventory (None: the site simulates its trials), the
    run folder, the lock held on it (a descriptor, :func:`lock_run`), its record (run.json's
    content, ``meta``), TIME_SCALE, the barrier's least lead (s), the trial instances still to
    run (``pending``), and where the run stopped (``failure``: (trial, reason, exit status)).
    :func:`_resumed` or :func:`_started` makes it with its folder open; :func:`run` then adds
    what the trials need (``scaled``, ``inv``, ``judge``, ``resume_hint``, ``jobs``: how many
    trial instances run at once)."""

    spec: Spec
    site: Site
    run_dir: Path
    lock: int
    meta: dict
    time_scale: float
    lead: float
    pending: list[str]
    scaled: Spec | None = None
    inv: Path | None = None
    judge: TrialJudge | None = None
    resume_hint: str = ""
    jobs: int = 1
    #: sweep point id -> (the point, its experiment at the site's rate scale)
    at_point: dict = field(default_factory=dict)
    #: the command line's --rate-scale (None: RATE_SCALE or the site's choice)
    rate_scale: str | float | None = None
    failure: tuple[str, str, int] | None = None
    #: the reservations the trials run on (``--parallel``; one: ``site`` and ``inv``), the
    #: site's name and options as given (to release a lost reservation)
    reservations: list[Reservation] = field(default_factory=list)
    site_name: str = ""
    options: dict[str, Any] | None = None


def _provisioned(spec: Spec, site_name: str, options: dict[str, Any] | None, rate_scale: str | float | None,
                 jobs: int, parallel: int = 1) -> tuple[list[Reservation], Spec, dict]:
    """The ``parallel`` provisioned reservations of the site (:func:`open_reservations`;
    RuntimeError when one is not), each with its inventory (written again; None when the site
    simulates its trials), the experiment at their rate scale and the session's record (when,
    the toolkit's commit, the site's mode and status, this machine's Python and name,
    ``jobs``; with several reservations, ``parallel`` and each one's status in
    ``reservations``)."""
    reservations = open_reservations(spec, site_name, options, parallel)
    site = reservations[0].site
    status = site.status()
    mode = status.get("mode", "remote")
    scaled = spec_at_rate_scale(spec, site, rate_scale=rate_scale)
    session = {"at": datetime.now(timezone.utc).isoformat(), "toolkit_commit": git_commit(), "mode": mode,
               "site_status": status, "controller": {"python": platform.python_version(), "host": platform.node()}}
    session["jobs"] = jobs
    if parallel > 1:
        session["parallel"] = parallel
        session["reservations"] = [{"reservation": res.copy, "site_status": res.site.status()} for res in reservations]
    return reservations, scaled, session


def _resumed(spec: Spec, site: Site, run_dir: Path, meta: dict, known_ids: list[str], session: dict) -> _Run:
    """The run in ``run_dir`` (its run.json ``meta``, checked by :func:`load_resume`), locked
    and ready to continue from its first trial not complete, at its own TIME_SCALE and lead."""
    lock = lock_run(run_dir, "--resume")
    time_scale = float(meta.get("time_scale", 1))
    lead = float(meta.get("lead_s") or BARRIER_LEAD_MIN_S)
    pending = resume_record(meta, known_ids, session)
    log(f"[run] resuming {run_dir} at trial {pending[0] if pending else '(none left)'}: "
        f"{len(meta['trial_status']) - len(pending)} of {len(meta['trial_status'])} trials kept")
    return _Run(spec, site, run_dir, lock, meta, time_scale, lead, pending)


def _started(spec: Spec, site_name: str, site: Site, session: dict, time_scale: float | None, lead_s: float | None,
             instances: list[Instance], repeat: int, shuffle: bool, seed: int | None, points: list | None,
             reservations: list[Reservation] | None = None) -> _Run:
    """A new run: its folder (:func:`new_run_dir`), locked, and its record before any trial:
    how it was made, every trial instance pending, its repetitions and sweep (their design).
    ``time_scale`` None is 1; ``lead_s`` None is the barrier's lead from the environment
    (:func:`lead_from_env`)."""
    if time_scale is None:
        time_scale = 1.0
    lead = lead_s if lead_s is not None else lead_from_env()
    run_dir = new_run_dir(spec, site_name)
    lock = lock_run(run_dir, "run folder")
    order = [i.id for i in instances]
    shuffled = bool(shuffle and (repeat > 1 or points))
    meta = {
        "experiment": spec.name, "spec": spec_as_recorded(spec), "spec_file": str(spec.path), "site": site_name,
        "mode": session["mode"], "site_status": session["site_status"], "time_scale": time_scale, "lead_s": lead,
        "toolkit_commit": session["toolkit_commit"], "controller": session["controller"],
        "started_at": session["at"], "trials": [], "nodes": {}, "raw_sha256": {}, "wall_s": 0.0,
        "packet": {"mtu_bytes": spec.model.mtu_bytes, "note": "Linux sends MSS-sized segments (MTU - 52 B of TCP/IP headers with timestamps); the paper's 1000 B packets are not reproduced"},
        "trial_status": [{**i.as_dict(), "status": "pending", "attempts": []} for i in instances],
        "repetitions": {"repeat": repeat, "shuffle": shuffled, "seed": seed,
                        "design": "randomized complete blocks: each repetition runs every trial "
                                  + ("at every point of the sweep " if points else "") + "once"
                                  + (", in an order drawn from the seed (Python random.Random(seed).shuffle "
                                     "per block)" if shuffled else ", in the file's order")},
    }
    if points:
        ran = {i.trial for i in instances}
        meta["sweep"] = {"factors": sweeps.factors(spec),
                         "points": [{**p.as_dict(), "trials": [t for t in p.trials if t in ran]} for p in points],
                         "design": "full factorial: each trial at every combination of the factors that apply to it"}
    meta["rate_scale"] = site.load_state().get("rate_scale")  # every rate and byte size times k
    documents = dict(site.documents())
    for res in (reservations or [])[1:]:   # a campaign's other reservations: r<k>-<name>
        documents.update({f"r{res.copy}-{name}": path for name, path in res.site.documents().items()})
    meta["site_documents"] = keep_site_documents(run_dir, documents)
    if session.get("parallel"):
        meta["parallel"], meta["reservations"] = session["parallel"], session["reservations"]
    log(f"[run] {spec.name} on {site_name} ({session['mode']}), TIME_SCALE={time_scale}"
        + (f", REPEAT={repeat}" if repeat > 1 else "")
        + (f", sweep of {len(points)} points ({len(order)} trial instances)" if points else "")
        + (f" ({'shuffled, seed ' + str(seed) if shuffled else 'in file order'})" if repeat > 1 or points else "")
        + f"; results in {shown_path(run_dir)}")
    return _Run(spec, site, run_dir, lock, meta, time_scale, lead, list(order))


def _record_settings(r: _Run, command: str, site_name: str) -> None:
    """Record the session's ``jobs`` and the run's ``unhealthy_retries`` (:func:`unhealthy_retries`)
    in run.json's content, and set the hint that says how to resume the run with ``command``."""
    r.meta["jobs"] = r.jobs
    r.meta["unhealthy_retries"] = unhealthy_retries(r.spec, r.time_scale)
    r.resume_hint = f"resume with: netrepro {command} {spec_arg(r.spec)}{site_arg(site_name)} --resume {r.run_dir}"


def _ended(r: _Run, kept: list[str], unrecorded: str | None) -> Path:
    """The run folder of a run whose every trial completed and was recorded, made the latest
    (:func:`point_latest`). Raises StepIncomplete (the account of where the run stopped and what it
    kept, with the resume hint) when it stopped, else RuntimeError when its end could not be
    recorded (``unrecorded`` says why)."""
    if r.failure is not None:
        tid, reason, code = r.failure
        account = (f"run INCOMPLETE at trial {tid} ({reason}); {len(kept)} of {len(r.meta['trial_status'])} "
                   f"trials kept in {r.run_dir}" + (f"; {unrecorded}" if unrecorded else ""))
        raise StepIncomplete(account, hint=r.resume_hint, exit_code=code, run_dir=r.run_dir)
    if unrecorded:
        raise RuntimeError(f"run {r.run_dir}: every trial completed, but {unrecorded}")
    point_latest(r.run_dir)
    return r.run_dir


def _hold_space(r: _Run, remove: bool) -> None:
    """Hold :data:`RESERVE_BYTES` free in the run folder (:func:`reserve_space`). Else the lock
    is released, the folder removed when ``remove`` (a new run's) and RuntimeError raised."""
    try:
        reserve_space(r.run_dir)
    except OSError as exc:
        os.close(r.lock)
        if remove:
            remove_tree(r.run_dir)
        raise RuntimeError(f"{r.run_dir}: cannot hold {RESERVE_BYTES >> 10} KiB free for the run's records "
                           f"({exc.strerror}); free some space first") from None


def _run_trials(r: _Run, points: list | None, session: dict, progress_tty: bool | None) -> tuple[list[str], str | None]:
    """Run the pending trial instances in order until one fails (``r.failure``) or the run is
    interrupted, then record the run's end and release its lock (:func:`_record_end`): one at
    a time, or, with ``r.jobs`` above 1 on a site that simulates its trials, up to ``r.jobs``
    at once (:func:`_simulate_at_once`). Returns (the instances kept, why the end could not
    be recorded or None)."""
    t_run = time.time()
    try:
        write_text(incomplete_marker(r.run_dir),
                   f"run in progress since {session['at']} (netrepro process {os.getpid()} on {platform.node()}); "
                   f"if that process is gone, it was stopped without a word: {r.resume_hint}\n")
        write_json(run_json(r.run_dir), r.meta)
        r.at_point = {p.id: (p, spec_at_rate_scale(sweeps.point_spec(r.spec, p.values), r.site,
                                                                 rate_scale=r.rate_scale)) for p in points or []}
        estimate = instance_estimate_s(r.scaled, r.time_scale, r.meta["trials"], type(r.site))
        progress = RunProgress(len(r.meta["trial_status"]), len(r.meta["trial_status"]) - len(r.pending), estimate,
                               tty=progress_tty, jobs=max(r.jobs, len(r.reservations)))
        if r.jobs > 1 and r.inv is None and len(r.pending) > 1:
            _simulate_at_once(r, progress)
        elif len(r.reservations) > 1:
            _run_on_reservations(r, progress, estimate)
        else:
            for i, tid in enumerate(r.pending):
                _keep_leased(r, tid, len(r.pending) - i, estimate)
                if r.failure is not None:
                    break
                _run_instance(r, tid, progress)
                if r.failure is not None:
                    break
    except KeyboardInterrupt as exc:  # between two trials, or a second one while stopping a trial
        sig = signal_of(exc)
        first = next((s["id"] for s in r.meta["trial_status"] if s["status"] != "complete"), "(none)")
        r.failure = r.failure or (first, f"interrupted by {sig}", SIGNAL_EXIT[sig])
    finally:
        kept, unrecorded = _record_end(r, t_run)
        os.close(r.lock)
    return kept, unrecorded


#: A lease must outlast the next trial's expected end by this much, s; else it is renewed
#: before the trial starts (a testbed's clock, a slow fetch and the release need a margin).
LEASE_MARGIN_S = 1800.0


def _keep_leased(r: _Run, tid: str, left: int, estimate_s: float, site: Site | None = None) -> None:
    """Before trial instance ``tid`` (``left`` instances to go, ``estimate_s`` s each) on
    ``site`` (default the run's): when the
    site's lease (:meth:`Site.lease_end`) would end less than :data:`LEASE_MARGIN_S` after this
    trial's expected end, renew it to cover every instance left plus the margin, in whole
    hours, saying so. A renewal refused stops the run here (``r.failure``), before the trial:
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
        r.failure = (tid, f"the lease ends at {ends} and renewing it for {hours} h was refused ({exc}); extend it "
                          "in the portal first", 2)


@dataclass
class _Begun:
    """A trial instance's attempt as :func:`_begin` started it: its id (``tid``), its entry of
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


def _unhealthy_attempts(ts: dict) -> int:
    """How many of a trial instance's attempts (run.json ``trial_status``) were not kept because
    their health checks failed, over every session of the run."""
    return sum(1 for a in ts.get("attempts") or [] if isinstance(a, dict) and a.get("unhealthy"))


def _run_instance(r: _Run, tid: str, progress: RunProgress) -> None:
    """One attempt at trial instance ``tid``, recorded in run.json: a complete trial's record
    and the sha256 of its raw files, or why it failed (``r.failure`` then says where the run
    stops); an unhealthy attempt with a retry left (:data:`UNHEALTHY_RETRIES`) is recorded as
    failed and followed by another at once. Anything else raised is recorded as the failure
    too, and raised again."""
    while True:
        b = _begin(r, tid, progress)
        retry = r.judge is not None and _unhealthy_attempts(b.ts) < r.meta["unhealthy_retries"]
        again = _conclude(r, b, progress, lambda: (
            simulate_trial(b.tspec, r.site, b.tv, r.time_scale, r.run_dir, len(b.ts["attempts"]), b.started,
                            judge=r.judge)
            if r.inv is None else
            run_trial(b.tspec, r.site, r.inv, b.tv, r.time_scale, r.run_dir, len(b.ts["attempts"]), b.started,
                       judge=r.judge, retry_unhealthy=retry)))
        if not again:
            return


def _begin(r: _Run, tid: str, progress: RunProgress, res: Reservation | None = None) -> _Begun:
    """Start an attempt at trial instance ``tid`` (on reservation ``res`` of a campaign on
    several, named in the attempt; None: the run's site): recorded as running in run.json
    (written), its staging folder emptied, its trial vars made and its progress shown. Returns
    it for :func:`_conclude`."""
    meta, time_scale = r.meta, r.time_scale
    ts = next(s for s in meta["trial_status"] if s["id"] == tid)
    point, tspec = r.at_point.get(ts.get("point"), (None, r.scaled))
    trial_id = ts.get("trial") or tid
    trial = trials_by_id(tspec)[trial_id]
    attempt = {"started_at": datetime.now(timezone.utc).isoformat(), "status": "running",
               **({"reservation": res.copy} if res is not None else {})}
    ts.setdefault("attempts", []).append(attempt)
    ts.update(status="running", reason=None)
    write_json(run_json(r.run_dir), meta)
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
    return _Begun(tid, ts, attempt, point, tspec, trial_id, tv, factor_values, staging, started, site, inv, res)


def _conclude(r: _Run, b: _Begun, progress: RunProgress, trial: Callable[[], dict], timed: bool = False) -> bool:
    """End the attempt ``b``: ``trial()`` runs the trial, or what is left of it, and returns
    its record; recorded in run.json: the record (with the instance's trial, repetition,
    point and the run's ``jobs``) and the sha256 of its raw files, or why it failed
    (``r.failure`` then says where the run stops, unless the failure asks for the trial
    again: then True is returned). Anything else raised is recorded as the failure too, and
    raised again. ``timed``: the progress counts the record's ``wall_s`` as the trial's time
    (a simulated trial that waited to be recorded), not the time since it began."""
    meta, tid, ts, attempt, tv = r.meta, b.tid, b.ts, b.attempt, b.tv
    outcome: tuple[str, str] | None = None  # (status, reason)
    wall_s = None
    again = False
    try:
        record = trial()
        record.update(trial=ts.get("trial") or tid, repetition=ts.get("repetition", 1),
                      **({"point": b.point.id, "factors": b.factor_values} if b.point else {}), jobs=r.jobs,
                      **({"reservation": b.res.copy} if b.res is not None else {}))
        wall_s = record.get("wall_s") if timed else None
    except TrialFailed as exc:
        outcome = ("failed", exc.reason)
        attempt.update(exc.details)
        if exc.stop:
            if b.inv is not None:
                stop_trial(b.tspec, b.inv, b.site, tv)
        if exc.again:
            again = True
        else:
            r.failure = (tid, exc.reason, 2)
    except KeyboardInterrupt as exc:
        sig = signal_of(exc)
        outcome = ("failed", f"interrupted by {sig}")
        if b.inv is not None:
            stop_trial(b.tspec, b.inv, b.site, tv)
        r.failure = (tid, outcome[1], SIGNAL_EXIT[sig])
    except OSError as exc:  # the controller's disk (extracting, moving the data)
        why = exc.strerror or str(exc)
        outcome = ("failed", f"{why} ({exc.filename})" if exc.filename else why)
        r.failure = (tid, outcome[1], 2)
    except BaseException as exc:
        outcome = ("failed", f"{type(exc).__name__}: {exc}")
        r.failure = (tid, outcome[1], 2)
        raise
    else:
        meta["trials"].append(record)
        meta["raw_sha256"] = {**(meta.get("raw_sha256") or {}),
                              **{f"{tid}/{k}": v for k, v in sha256_tree(trial_raw(r.run_dir, tid)).items()}}
        outcome = ("complete", None)
    finally:
        remove_tree(b.staging)
        progress.end(tid, bool(outcome and outcome[0] == "complete"), (outcome or ("", "stopped"))[1] or "", wall_s)
        attempt.update(status=outcome[0] if outcome else "failed", reason=outcome[1] if outcome else "stopped",
                       ended_at=datetime.now(timezone.utc).isoformat())
        ts.update(status=attempt["status"], reason=attempt["reason"])
        if r.failure is None:
            write_json(run_json(r.run_dir), meta)
    return again


def _simulate_at_once(r: _Run, progress: RunProgress) -> None:
    """Run the pending trial instances of a simulating site (``r.inv`` None) ``r.jobs`` at a
    time: each is begun (:func:`_begin`) and simulated (:func:`simulation_of`, in a worker
    thread, into its own staging folder) as a slot frees, in the pending order, and recorded
    (:func:`_conclude`: data checked and moved to raw/, health judged, run.json) in this
    thread, one at a time, in the pending order: run.json lists the trials as a serial run
    does. An instance simulated before those ahead of it waits for them to be recorded.

    Where the run stops, as :func:`_run_instance`'s run does: at the first instance in the
    pending order that fails (``r.failure``). Every instance before it has been recorded
    (it waited for them); those after it that were begun are discarded: their simulators are
    stopped (:meth:`netrepro.sites.base.Site.stop_subprocesses`), their data removed, their
    attempts recorded as failed ("not recorded: the run stopped at trial X") and they run
    again on resume. No instance is begun once one has failed. On Ctrl-C or SIGTERM
    (KeyboardInterrupt) the simulators are stopped the same way, the first instance not
    recorded is where the run stopped, and every begun instance's attempt is recorded as
    "interrupted by SIGINT" (or SIGTERM); the run is resumable as a serial one is.
    Something other than a trial's failure raised while recording is raised again, once
    every simulator has stopped."""
    queue = deque(r.pending)
    flight: deque[tuple[_Begun, Future]] = deque()  # begun, in the pending order, not yet recorded
    # Every instance begun and not yet recorded, noted before its simulator is submitted: a
    # signal between the submit and its entry in ``flight`` (a loaded machine may run the
    # simulator first) must still find it to discard.
    unrecorded: list[_Begun] = []
    pool = ThreadPoolExecutor(max_workers=r.jobs, thread_name_prefix="simulate")
    try:
        while queue or flight:
            while (queue and sum(not f.done() for _, f in flight) < r.jobs
                   and not any(f.done() and f.exception() is not None for _, f in flight)):
                b = _begin(r, queue.popleft(), progress)
                unrecorded.append(b)
                flight.append((b, pool.submit(simulation_of, b.tspec, r.site, b.tv)))
            b, fut = flight[0]
            if not fut.done():
                done, _ = wait([f for _, f in flight if not f.done()], return_when=FIRST_COMPLETED)
                for b2, f2 in flight:
                    if f2 in done:  # simulated ahead of its turn: it waits to be recorded
                        progress.waiting(b2.tid)
                continue
            flight.popleft()
            unrecorded.remove(b)
            _conclude(r, b, progress, lambda: kept_simulation(
                b.tspec, b.tv, *fut.result(), r.time_scale, r.run_dir, len(b.ts["attempts"]), b.started, judge=r.judge),
                timed=True)
            if r.failure is not None:
                break
    except KeyboardInterrupt as exc:
        if not unrecorded:
            raise
        sig = signal_of(exc)
        r.failure = (unrecorded[0].tid, f"interrupted by {sig}", SIGNAL_EXIT[sig])
    finally:
        if unrecorded:
            stop = getattr(r.site, "stop_subprocesses", None)
            if stop is not None:
                stop()
        pool.shutdown(wait=True, cancel_futures=True)
        if r.failure is None:
            why = "not recorded: the run stopped"
        elif r.failure[1].startswith("interrupted by "):
            why = r.failure[1]
        else:
            why = f"not recorded: the run stopped at trial {r.failure[0]}"
        for b in unrecorded:
            _discard(r, b, progress, why)


def _run_on_reservations(r: _Run, progress: RunProgress, estimate_s: float) -> None:
    """Run the pending trial instances on the run's reservations (``r.reservations``, a
    campaign's ``--parallel N``), one at a time on each: a free reservation takes the next
    instance in the pending order (the shuffled blocks), begun here (:func:`_begin`, run.json
    written), run in a worker thread (:func:`run_trial`: armed, released by its own barrier,
    fetched, checked and judged against its reservation's inventory) and recorded here as it
    ends (:func:`_conclude`), in the order the instances end; an unhealthy attempt with a retry
    left goes back to the front of the queue.

    A trial that fails on a reservation some of whose nodes no longer answer
    (:func:`unanswered`) while another is left loses that reservation: its attempt is recorded
    as failed, the reservation is released (:func:`netrepro.runner.steps.down`, said on the
    console) and the instance goes back to the front of the queue for the others, as a resume
    would run it again. Any other failure (or the last reservation's) is where the run stops
    (``r.failure``): no instance is begun after it, the ones running on the other reservations
    end and are recorded, and the run is resumable as a serial one is.

    On Ctrl-C or SIGTERM (KeyboardInterrupt) the trials still running are stopped: their waits
    end (:data:`netrepro.runner.trial.STOPPING`), their playbooks are ended
    (:func:`netrepro.runner.playbooks.end_playbooks`), their processes on the nodes stopped
    (stop-trial.yml) and their attempts recorded as "interrupted by SIGINT" (or SIGTERM); one
    that ended as the signal came is recorded as it ended (its data are in raw/ already)."""
    queue = deque(r.pending)
    free = deque(r.reservations)
    live = list(r.reservations)
    flight: dict[Future, _Begun] = {}
    pool = ThreadPoolExecutor(max_workers=len(r.reservations), thread_name_prefix="reservation")
    try:
        while flight or (queue and free and r.failure is None):
            while queue and free and r.failure is None:
                res = free.popleft()
                tid = queue.popleft()
                _keep_leased(r, tid, len(queue) // len(live) + 1, estimate_s, res.site)
                if r.failure is not None:
                    queue.appendleft(tid)
                    break
                b = _begin(r, tid, progress, res)
                retry = r.judge is not None and _unhealthy_attempts(b.ts) < r.meta["unhealthy_retries"]
                flight[pool.submit(run_trial, b.tspec, res.site, res.inv, b.tv, r.time_scale, r.run_dir,
                                   len(b.ts["attempts"]), b.started, judge=r.judge, retry_unhealthy=retry)] = b
            if not flight:
                break
            done, _ = wait(list(flight), return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=lambda f: flight[f].tid):
                b = flight.pop(fut)
                failed_before = r.failure
                again = _conclude(r, b, progress, fut.result)
                if again:
                    queue.appendleft(b.tid)
                elif r.failure is not None and failed_before is None and r.failure[0] == b.tid and len(live) > 1:
                    lost = unanswered(b.inv)
                    if lost:
                        _lose(r, b, lost, live)
                        queue.appendleft(b.tid)
                        continue
                if b.res in live:
                    free.append(b.res)
    except KeyboardInterrupt as exc:
        sig = signal_of(exc)
        if not flight:
            raise
        STOPPING.set()
        end_playbooks()
        wait(list(flight))
        ended = sorted(flight.items(), key=lambda fb: fb[1].tid)
        stopped = [b for f, b in ended if f.exception() is not None]
        r.failure = r.failure or (stopped[0].tid if stopped else ended[0][1].tid, f"interrupted by {sig}",
                                  SIGNAL_EXIT[sig])
        for fut, b in ended:
            if fut.exception() is None:   # it ended as the signal came: kept, its data in raw/
                _conclude(r, b, progress, fut.result)
            else:
                stop_trial(b.tspec, b.inv, b.site, b.tv)
                _discard(r, b, progress, f"interrupted by {sig}")
        flight.clear()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        STOPPING.clear()


def _lose(r: _Run, b: _Begun, lost: list[str], live: list[Reservation]) -> None:
    """Reservation ``b.res`` is lost: trial instance ``b`` failed on it (``r.failure``) and its
    nodes ``lost`` do not answer. The failure is taken back (the instance is recorded as
    failed, its attempt naming the reservation), the reservation released and taken out of
    ``live``, and run.json written with the loss (``lost_reservations``)."""
    res = b.res
    why = r.failure[1] if r.failure else "failed"
    r.failure = None
    live.remove(res)
    log(f"[run] reservation {res.label} lost: {', '.join(lost)} do{'es' if len(lost) == 1 else ''} not answer "
        f"(trial {b.tid}: {why}); releasing it; its trials go to {', '.join(x.label for x in live)}")
    try:
        down(r.spec, r.site_name, r.options, copies=[res.copy])
        released = True
    except Exception as exc:  # noqa: BLE001 - the campaign goes on; the reservation stays named
        log(f"[run] reservation {res.label} could not be released ({exc}); release it with "
            f"`netrepro down {spec_arg(r.spec)}{site_arg(r.site_name)}`")
        released = False
    r.meta.setdefault("lost_reservations", []).append(
        {"reservation": res.copy, "at": datetime.now(timezone.utc).isoformat(), "trial": b.tid, "reason": why,
         "unanswered": lost, "released": released})
    write_json(run_json(r.run_dir), r.meta)


def _discard(r: _Run, b: _Begun, progress: RunProgress, why: str) -> None:
    """Record the attempt ``b``, begun but not to be recorded (:func:`_simulate_at_once`), as
    failed for ``why`` (its data are removed with the staging folders; run.json is written
    with the run's end)."""
    remove_tree(b.staging)
    progress.end(b.tid, False, why)
    b.attempt.update(status="failed", reason=why, ended_at=datetime.now(timezone.utc).isoformat())
    b.ts.update(status="failed", reason=why)


def _record_end(r: _Run, t_run: float) -> tuple[list[str], str | None]:
    """Record how the run ended, whatever ended it: its wall time (from ``t_run``, epoch s, added
    to a resumed run's), the nodes' software and settings, the site's timings, run.json, and
    INCOMPLETE (where and why it stopped, and how to resume it) or none when every trial is
    complete. Returns (the instances kept, why the end could not be recorded or None)."""
    meta, run_dir = r.meta, r.run_dir
    remove_tree(run_dir / STAGING)
    (run_dir / RESERVE).unlink(missing_ok=True)
    meta["finished_at"] = datetime.now(timezone.utc).isoformat()
    meta["wall_s"] = round(float(meta.get("wall_s") or 0) + time.time() - t_run, 1)
    meta["nodes"] = nodes_meta(raw_dir(run_dir), r.spec)
    meta["timings_s"] = {**r.site.load_state().get("timings_s", {}), "trials": meta["wall_s"]}
    kept = [s["id"] for s in meta["trial_status"] if s["status"] == "complete"]
    complete = len(kept) == len(meta["trial_status"])
    unrecorded = None
    try:
        if not complete:
            where = r.failure or next(((s["id"], s.get("reason") or "not run yet", 2)
                                       for s in meta["trial_status"] if s["status"] != "complete"))
            write_text(incomplete_marker(run_dir),
                       f"run INCOMPLETE at trial {where[0]}: {where[1]}\n"
                       f"kept: {', '.join(kept) or 'no trial'} ({len(kept)} of {len(meta['trial_status'])} trials; "
                       f"raw files and their sha256 in run.json)\n{r.resume_hint}\n")
        write_json(run_json(run_dir), meta)
        if complete:
            incomplete_marker(run_dir).unlink(missing_ok=True)
    except OSError as exc:
        unrecorded = f"could not record it in {run_dir} ({exc.strerror})"
    return kept, unrecorded

