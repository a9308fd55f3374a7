"""A run: the trials of an experiment on a provisioned site, in a new run folder or resumed in
the folder of one that stopped part-way (:func:`run`). Its arguments are checked first
(:func:`netrepro.runner.instances.plan_run`); its folder is opened (:func:`_started`,
:func:`_resumed`) and the run's stages share it as a :class:`netrepro.runner.attempt.Run`; each
trial instance is begun and concluded by :mod:`netrepro.runner.attempt` (several at once by
:mod:`netrepro.runner.atonce`) and run by :mod:`netrepro.runner.trial`.

The run folder holds
- ``raw/<trial>/<node>/``: a trial's data as fetched, moved there whole and once, when the
  trial has completed and its data covers the schedule (:func:`check_trial_data`) and no node
  clock was stepped (:func:`clock_problems`); never written again;
- ``run.json``: rewritten after each trial: the completed trials (``trials``) and the sha256
  of each of their raw files (``raw_sha256``), every trial's status (complete, failed with the
  reason, running, pending) and attempts (``trial_status``), each resume (``resumes``), and
  how the run was made;
- ``INCOMPLETE`` until every trial is complete: the trial and reason where the run stopped and
  how to resume it;
- ``failed/<trial>-<n>/``: the data of an attempt that ran to its end but failed its checks."""

from __future__ import annotations

import os
import platform
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, NamedTuple

from netrepro.experiment import sweep as sweeps
from netrepro.runner.atonce import run_on_reservations, simulate_at_once
from netrepro.runner.attempt import Run, keep_leased, run_instance, unhealthy_retries
from netrepro.runner.barrier import BARRIER_LEAD_MIN_S, lead_from_env
from netrepro.runner.console import SIGNAL_EXIT, StepIncomplete, log, signal_of, site_arg, spec_arg
from netrepro.runner.fetch import nodes_meta
from netrepro.runner.instances import RunPlan, instance_estimate_s, plan_run
from netrepro.runner.parallel import Reservation, open_reservations
from netrepro.runner.progress import RunProgress
from netrepro.runner.steps import shown_path
from netrepro.runner.trial import TrialJudge
from netrepro.runner.trialvars import spec_at_rate_scale
from netrepro.experiment.spec import Spec
from netrepro.runfolder.atomic import write_text
from netrepro.runfolder.layout import RESERVE, STAGING, incomplete_marker, raw_dir
from netrepro.runfolder.record import (first_record, instance_statuses, kept_instances, resume_record, set_finished,
                                      set_site_documents, set_unhealthy_retries, write_run)
from netrepro.runfolder.writing import (RESERVE_BYTES, git_commit, keep_site_documents, lock_run, new_run_dir,
                                        point_latest, remove_tree, reserve_space, spec_as_recorded)


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
    more than one, up to ``jobs`` are simulated at once (:func:`simulate_at_once`) and
    recorded one at a time in the run's order, so that run.json is a serial run's; a
    simulation's randomness is its repetition (ns-3's run number), whatever ran beside it.
    run.json records ``jobs``: the run's (the latest session's), each resume's (in
    ``resumes``) and each trial's (in its record).

    A new run gets a new folder (:func:`new_run_dir`; what it holds: the module's docstring).
    ``resume``: the folder of an earlier run that stopped, continued from its first trial not
    complete, with the trials, time scale and lead it started with (:func:`load_resume` says
    what is refused). The arguments are checked before anything is written
    (:func:`netrepro.runner.instances.plan_run`, as the dry run and reproduce check them).

    ``parallel``: how many reservations of the site the trials run on at once (``--parallel N``,
    :func:`netrepro.runner.steps.up_reservations`; each provisioned, :func:`open_reservations`), each
    taking the next pending instance as it comes free, a lost one released
    (:func:`netrepro.runner.atonce.run_on_reservations`); each instance's record and attempts
    name the reservation (``reservation``: its number) and run.json the campaign's
    (``parallel``, ``reservations``, ``lost_reservations``).

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
    plan = plan_run(spec, site_name, time_scale, options, trial_ids, resume, repeat, shuffle, seed, sweep, jobs)
    reservations, scaled, session = _provisioned(spec, site_name, options, rate_scale, plan.jobs, parallel)
    site = reservations[0].site
    at_point = {p.id: (p, spec_at_rate_scale(sweeps.point_spec(spec, p.values), site, rate_scale=rate_scale))
                for p in plan.points or []}
    if plan.prior is not None:
        opened = _resumed(Path(resume).resolve(), plan.prior, plan.known_ids, session)
    else:
        opened = _started(spec, site_name, session, plan, lead_s, reservations)
    opened.meta["jobs"] = plan.jobs
    set_unhealthy_retries(opened.meta, unhealthy_retries(spec, opened.time_scale))
    r = Run(spec, scaled, at_point, site_name, options, tuple(reservations), opened.run_dir, opened.lock,
            opened.meta, opened.time_scale, opened.lead, tuple(opened.pending), judge, plan.jobs, rate_scale,
            f"resume with: netrepro {command} {spec_arg(spec)}{site_arg(site_name)} --resume {opened.run_dir}")
    _hold_space(r, remove=plan.prior is None)
    kept, unrecorded = _run_trials(r, session, progress_tty)
    return _ended(r, kept, unrecorded)


class _Opened(NamedTuple):
    """A run's folder as :func:`_resumed` or :func:`_started` opened it: the folder, the lock
    held on it (a descriptor, :func:`lock_run`), its record (run.json's content), TIME_SCALE,
    the barrier's least lead (s) and the trial instances to run, in order."""

    run_dir: Path
    lock: int
    meta: dict
    time_scale: float
    lead: float
    pending: list[str]


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
        session["reservations"] = [{"reservation": res.number, "site_status": res.site.status()} for res in reservations]
    return reservations, scaled, session


def _resumed(run_dir: Path, meta: dict, known_ids: list[str], session: dict) -> _Opened:
    """The run in ``run_dir`` (its run.json ``meta``, checked by :func:`load_resume`), locked
    and ready to continue from its first trial not complete, at its own TIME_SCALE and lead."""
    lock = lock_run(run_dir, "--resume")
    time_scale = float(meta.get("time_scale", 1))
    lead = float(meta.get("lead_s") or BARRIER_LEAD_MIN_S)
    pending = resume_record(meta, known_ids, session)
    log(f"[run] resuming {run_dir} at trial {pending[0] if pending else '(none left)'}: "
        f"{len(instance_statuses(meta)) - len(pending)} of {len(instance_statuses(meta))} trials kept")
    return _Opened(run_dir, lock, meta, time_scale, lead, pending)


def _started(spec: Spec, site_name: str, session: dict, plan: RunPlan, lead_s: float | None,
             reservations: list[Reservation]) -> _Opened:
    """A new run (``plan``'s, :func:`plan_run`) on ``reservations``: its folder
    (:func:`new_run_dir`), locked, and its record before any trial: how it was made, every
    trial instance pending, its repetitions and sweep (their design). ``lead_s`` None is the
    barrier's lead from the environment (:func:`lead_from_env`)."""
    time_scale, instances, points = plan.time_scale, plan.instances, plan.points
    repeat, shuffle, seed, site = plan.repeat, plan.shuffle, plan.seed, reservations[0].site
    lead = lead_s if lead_s is not None else lead_from_env()
    run_dir = new_run_dir(spec, site_name)
    lock = lock_run(run_dir, "run folder")
    order = [i.id for i in instances]
    shuffled = bool(shuffle and (repeat > 1 or points))
    meta = first_record(
        experiment=spec.name, spec=spec_as_recorded(spec), spec_file=str(spec.path), site=site_name, session=session,
        time_scale=time_scale, lead_s=lead,
        packet={"mtu_bytes": spec.model.mtu_bytes, "note": "Linux sends MSS-sized segments (MTU - 52 B of TCP/IP headers with timestamps); the paper's 1000 B packets are not reproduced"},
        instances=[i.as_dict() for i in instances],
        repetitions={"repeat": repeat, "shuffle": shuffled, "seed": seed,
                     "design": "randomized complete blocks: each repetition runs every trial "
                               + ("at every point of the sweep " if points else "") + "once"
                               + (", in an order drawn from the seed (Python random.Random(seed).shuffle "
                                  "per block)" if shuffled else ", in the file's order")})
    if points:
        ran = {i.trial for i in instances}
        meta["sweep"] = {"factors": sweeps.factors(spec),
                         "points": [{**p.as_dict(), "trials": [t for t in p.trials if t in ran]} for p in points],
                         "design": "full factorial: each trial at every combination of the factors that apply to it"}
    meta["rate_scale"] = site.load_state().get("rate_scale")  # every rate and byte size times k
    documents = dict(site.documents())
    for res in reservations[1:]:   # a campaign's other reservations: r<k>-<name>
        documents.update({f"r{res.number}-{name}": path for name, path in res.site.documents().items()})
    set_site_documents(meta, keep_site_documents(run_dir, documents))
    if session.get("parallel"):
        meta["parallel"], meta["reservations"] = session["parallel"], session["reservations"]
    log(f"[run] {spec.name} on {site_name} ({session['mode']}), TIME_SCALE={time_scale}"
        + (f", REPEAT={repeat}" if repeat > 1 else "")
        + (f", sweep of {len(points)} points ({len(order)} trial instances)" if points else "")
        + (f" ({'shuffled, seed ' + str(seed) if shuffled else 'in file order'})" if repeat > 1 or points else "")
        + f"; results in {shown_path(run_dir)}")
    return _Opened(run_dir, lock, meta, time_scale, lead, order)


def _ended(r: Run, kept: list[str], unrecorded: str | None) -> Path:
    """The run folder of a run whose every trial completed and was recorded, made the latest
    (:func:`point_latest`). Raises StepIncomplete (the account of where the run stopped and what it
    kept, with the resume hint) when it stopped, else RuntimeError when its end could not be
    recorded (``unrecorded`` says why)."""
    if r.outcome.failure is not None:
        tid, reason, code = r.outcome.failure
        account = (f"run INCOMPLETE at trial {tid} ({reason}); {len(kept)} of {len(instance_statuses(r.meta))} "
                   f"trials kept in {r.run_dir}" + (f"; {unrecorded}" if unrecorded else ""))
        raise StepIncomplete(account, hint=r.resume_hint, exit_code=code, run_dir=r.run_dir)
    if unrecorded:
        raise RuntimeError(f"run {r.run_dir}: every trial completed, but {unrecorded}")
    point_latest(r.run_dir)
    return r.run_dir


def _hold_space(r: Run, remove: bool) -> None:
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


def _run_trials(r: Run, session: dict, progress_tty: bool | None) -> tuple[list[str], str | None]:
    """Run the pending trial instances in order until one fails (``r.outcome.failure``) or the run is
    interrupted, then record the run's end and release its lock (:func:`_record_end`): one at
    a time, or, with ``r.jobs`` above 1 on a site that simulates its trials, up to ``r.jobs``
    at once (:func:`simulate_at_once`). Returns (the instances kept, why the end could not
    be recorded or None)."""
    t_run = time.time()
    try:
        write_text(incomplete_marker(r.run_dir),
                   f"run in progress since {session['at']} (netrepro process {os.getpid()} on {platform.node()}); "
                   f"if that process is gone, it was stopped without a word: {r.resume_hint}\n")
        write_run(r.run_dir, r.meta)
        estimate = instance_estimate_s(r.scaled, r.time_scale, r.meta["trials"], type(r.site))
        instances = instance_statuses(r.meta)
        progress = RunProgress(len(instances), len(instances) - len(r.pending), estimate,
                               tty=progress_tty, jobs=max(r.jobs, len(r.reservations)))
        if r.jobs > 1 and r.inv is None and len(r.pending) > 1:
            simulate_at_once(r, progress)
        elif len(r.reservations) > 1:
            run_on_reservations(r, progress, estimate)
        else:
            for i, tid in enumerate(r.pending):
                keep_leased(r, tid, len(r.pending) - i, estimate)
                if r.outcome.failure is not None:
                    break
                run_instance(r, tid, progress)
                if r.outcome.failure is not None:
                    break
    except KeyboardInterrupt as exc:  # between two trials, or a second one while stopping a trial
        sig = signal_of(exc)
        first = next((s["id"] for s in instance_statuses(r.meta) if s["status"] != "complete"), "(none)")
        r.outcome.failure = r.outcome.failure or (first, f"interrupted by {sig}", SIGNAL_EXIT[sig])
    finally:
        kept, unrecorded = _record_end(r, t_run)
        os.close(r.lock)
    return kept, unrecorded


def _record_end(r: Run, t_run: float) -> tuple[list[str], str | None]:
    """Record how the run ended, whatever ended it: its wall time (from ``t_run``, epoch s, added
    to a resumed run's), the nodes' software and settings, the site's timings, run.json, and
    INCOMPLETE (where and why it stopped, and how to resume it) or none when every trial is
    complete. Returns (the instances kept, why the end could not be recorded or None)."""
    meta, run_dir = r.meta, r.run_dir
    remove_tree(run_dir / STAGING)
    (run_dir / RESERVE).unlink(missing_ok=True)
    set_finished(meta, datetime.now(timezone.utc).isoformat())
    meta["wall_s"] = round(float(meta.get("wall_s") or 0) + time.time() - t_run, 1)
    meta["nodes"] = nodes_meta(raw_dir(run_dir), r.spec)
    meta["timings_s"] = {**r.site.load_state().get("timings_s", {}), "trials": meta["wall_s"]}
    kept, instances = kept_instances(meta), instance_statuses(meta)
    complete = len(kept) == len(instances)
    unrecorded = None
    try:
        if not complete:
            where = r.outcome.failure or next(((s["id"], s.get("reason") or "not run yet", 2)
                                       for s in instances if s["status"] != "complete"))
            write_text(incomplete_marker(run_dir),
                       f"run INCOMPLETE at trial {where[0]}: {where[1]}\n"
                       f"kept: {', '.join(kept) or 'no trial'} ({len(kept)} of {len(instances)} trials; "
                       f"raw files and their sha256 in run.json)\n{r.resume_hint}\n")
        write_run(run_dir, meta)
        if complete:
            incomplete_marker(run_dir).unlink(missing_ok=True)
    except OSError as exc:
        unrecorded = f"could not record it in {run_dir} ({exc.strerror})"
    return kept, unrecorded
