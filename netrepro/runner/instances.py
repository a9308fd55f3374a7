"""A run's trial instances before it starts: in order (repetitions and sweep
points, :func:`trial_instances`), the expected wall time of each, and the dry run that prints them
and touches nothing (:func:`dry_run`)."""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netrepro.runner import schedule
from netrepro.runner.progress import eta_s
from netrepro.experiment import sweep as sweeps
from netrepro.runner.resume import load_resume
from netrepro.runfolder.reading import latest_records
from netrepro.runner.steps import simulated
from netrepro.runner.trialvars import settings_text
from netrepro.sites import SITES, Site, SiteError, site_class
from netrepro.experiment.spec import Spec, SpecError


def checked_trial_ids(spec: Spec, trial_ids: list[str] | None) -> list[str]:
    """The spec's trial ids; SpecError (one line) when ``trial_ids`` (``--trial``) names another."""
    known = spec.trial_ids
    for tid in trial_ids or []:
        if tid not in known:
            raise SpecError("command line", "--trial", f"{tid!r}: not a trial of {spec.name}; expected one of: {', '.join(known)}")
    return known


#: The most trial instances a run simulates at once (``--jobs``).
JOBS_MAX = 64


def checked_jobs(site_name: str, jobs: int | None, options: dict[str, Any] | None = None) -> int:
    """How many trial instances a run on ``site_name`` with its ``options`` runs at once:
    ``jobs`` (``--jobs``), by default the site's (:meth:`netrepro.sites.base.Site.default_jobs`:
    the ns3 site's Slurm executor queues 32), else one per core (``os.cpu_count()``, at most
    :data:`JOBS_MAX`) on a site that simulates its trials (:func:`simulated`), else 1: an
    emulated site's or a testbed's measurements are valid only when its trial runs alone.

    Raises:
        SpecError: ``jobs`` is not a whole number from 1 to :data:`JOBS_MAX`, or is more than 1
            on a site that does not simulate (one line naming ``--jobs``).
        SiteError: an unknown site.
    """
    cls = site_class(site_name)
    if jobs is None:
        return cls.default_jobs(options or {}) or (min(os.cpu_count() or 1, JOBS_MAX) if simulated(cls) else 1)
    if isinstance(jobs, bool) or not isinstance(jobs, int) or not 1 <= jobs <= JOBS_MAX:
        raise SpecError("command line", "--jobs", f"{jobs!r}: expected a whole number of trials to run at once "
                                                  f"from 1 to {JOBS_MAX}")
    if jobs > 1 and not simulated(cls):
        sims = " or ".join(f"SITE={n}" for n in SITES if simulated(site_class(n)))
        raise SpecError("command line", "--jobs", f"{jobs}: site {site_name} runs its trials one at a time (a trial "
                                                  "on machines measures correctly only alone); expected 1, or more "
                                                  f"on a site that simulates its trials ({sims})")
    return jobs


def trials_by_id(spec: Spec) -> dict[str, dict]:
    """Trial id -> the model's trial."""
    return {t.id: t for t in spec.model.trials}


def trial_instances(spec: Spec, trial_ids: list[str] | None, repeat: int, shuffle: bool, seed: int | None,
             points: list | None = None):
    """(instances, seed) of a new run: :func:`netrepro.runner.schedule.plan` of the spec's trials (or
    ``trial_ids``), at every sweep point of ``points`` (:func:`netrepro.experiment.sweep.points`) when
    given, with a fresh seed drawn when a shuffled run (more than one repetition, or a sweep)
    has none. Raises SpecError (``--repeat``, one line) for a repeat out of range."""
    if shuffle and (repeat > 1 or points) and seed is None:
        seed = schedule.new_seed()
    ids = [t for t in spec.trial_ids if not trial_ids or t in trial_ids]
    try:
        return schedule.plan(sweeps.cells(points, ids) if points else ids, repeat, shuffle, seed), seed
    except ValueError as exc:
        raise SpecError("command line", "--repeat", str(exc)) from None


@dataclass(frozen=True)
class RunPlan:
    """A run's arguments checked, and what they make, before anything is built, reserved or
    written (:func:`plan_run`): the experiment's trial ids (``known_ids``), how many trial
    instances run at once (``jobs``), a resumed run's record (``prior``: its run.json, read
    only; None for a new run), the instances still to run in order (``instances``), the sweep's
    points (None: no sweep), and the repetitions (``repeat``, ``shuffle``, ``seed``) and
    ``time_scale``: a resumed run's own as recorded, else as given (``time_scale`` None is 1)."""

    known_ids: list[str]
    jobs: int
    prior: dict | None
    instances: list[schedule.Instance]
    points: list | None
    repeat: int
    shuffle: bool
    seed: int | None
    time_scale: float


def plan_run(spec: Spec, site_name: str, time_scale: float | None = 1.0, options: dict[str, Any] | None = None,
             trial_ids: list[str] | None = None, resume: Path | None = None, repeat: int | None = None,
             shuffle: bool = True, seed: int | None = None, sweep: bool = False,
             jobs: int | None = None) -> RunPlan:
    """Check a run's arguments as every command that runs trials does (a run, a dry run,
    reproduce before anything is up), reading only: ``trial_ids`` (``--trial``,
    :func:`checked_trial_ids`), ``jobs`` (:func:`checked_jobs`), ``resume`` (a run folder that
    stopped, :func:`load_resume`, against ``time_scale``, ``trial_ids`` and ``repeat``), else
    the sweep's points (``sweep``: :func:`netrepro.experiment.sweep.points`) and the instances'
    order (:func:`trial_instances`: ``repeat`` None is 1; a shuffled run without ``seed``
    draws one). Returns the :class:`RunPlan`.

    Raises:
        SpecError: a bad ``trial_ids``, ``jobs``, ``resume``, ``repeat`` or sweep (one line
            naming the option or the file and field; nothing is written).
        SiteError: an unknown site.
    """
    known = checked_trial_ids(spec, trial_ids)
    jobs = checked_jobs(site_name, jobs, options)
    if resume is None:
        repeat = repeat or 1
        points = sweeps.points(spec) if sweep else None
        todo, seed = trial_instances(spec, trial_ids, repeat, shuffle, seed, points)
        return RunPlan(known, jobs, None, todo, points, repeat, shuffle, seed,
                       1.0 if time_scale is None else time_scale)
    meta, run = load_resume(spec, site_name, Path(resume), time_scale, trial_ids, repeat)
    todo = [schedule.Instance(s.id, s.trial, s.repetition, s.point) for s in run.instances if s.status != "complete"]
    points = sweeps.from_record(spec, run.sweep) if run.sweep is not None else None
    return RunPlan(known, jobs, meta, todo, points, run.repeat, run.shuffle, run.seed,
                   run.time_scale if run.time_scale is not None else 1.0)


def instance_estimate_s(spec: Spec, time_scale: float, records: list[dict], site_cls: type[Site]) -> float:
    """Expected wall time (s) of one trial instance: the schedule at ``time_scale`` and the
    base-RTT pings as the site runs them (``site_cls.TRIAL_WALL_PER_SCHEDULED_S`` s per second)
    plus ``site_cls.TRIAL_OVERHEAD_S``; once trials of the run have completed, the schedule
    plus the median time they took beyond it (:func:`netrepro.runner.schedule.overhead_s`)."""
    over = schedule.overhead_s(records)
    base = spec.model.base_rtt.duration_s if spec.model.base_rtt else 0
    if over is not None:  # wall_s - duration_s: the base-RTT pings are in it
        return max(0.0, spec.duration_s * time_scale + over)
    return (spec.duration_s + base) * time_scale * site_cls.TRIAL_WALL_PER_SCHEDULED_S + site_cls.TRIAL_OVERHEAD_S


def dry_run(spec: Spec, site_name: str, time_scale: float | None = 1.0, options: dict[str, Any] | None = None,
            trial_ids: list[str] | None = None, repeat: int | None = None, shuffle: bool = True,
            seed: int | None = None, resume: Path | None = None, out=None, sweep: bool = False, jobs: int | None = None,
            parallel: int = 1) -> list[dict]:
    """Print every trial instance a run would run, in order, with its settings and the estimated
    wall time, and return them (``[{id, trial, repetition, settings, estimate_s}]``; ``point``
    too in a sweep). Touches nothing: no site is contacted, no file written (the site's saved
    state is only read). ``sweep``: as :func:`run`'s; every point's experiment is validated.
    ``jobs``: as :func:`run`'s (:func:`checked_jobs`); with more than one at a time the last
    line says how long the instances take so (:func:`netrepro.runner.progress.eta_s`); so with
    ``parallel`` reservations, one instance on each at a time (:func:`netrepro.runner.run.run`).

    With ``resume``: the run's remaining instances (:func:`load_resume` checks it, reading
    only). A shuffled run without ``seed`` draws one and prints it: ``--seed`` with it runs
    that order. The estimate is the schedule at ``time_scale`` plus a trial's overhead
    (:func:`instance_estimate_s`: the latest complete run's of this experiment and site when
    there is one, else the site's own, :attr:`netrepro.sites.base.Site.TRIAL_OVERHEAD_S`); up,
    provisioning and teardown are not in it.
    Rates are as written: the rate scale is chosen when the site is provisioned.

    Raises:
        SpecError: a bad ``trial_ids``, ``repeat``, ``resume``, sweep or ``jobs`` (one line).
        SiteError: an option the site refuses, or an experiment it could not build with them
            (:meth:`netrepro.sites.base.Site.checked_options`); ``parallel`` above 1 on a site
            that holds one reservation at a time.
    """
    out = out or sys.stdout
    site_class(site_name).checked_options(spec, options)  # the site's options and its own refusals
    if parallel > 1 and not site_class(site_name).PARALLEL:
        raise SiteError(site_class(site_name).parallel_refusal())
    plan = plan_run(spec, site_name, time_scale, options, trial_ids, resume, repeat, shuffle, seed, sweep, jobs)
    by_id = trials_by_id(spec)
    todo, points, jobs, time_scale = plan.instances, plan.points, plan.jobs, plan.time_scale
    repeat, shuffle, seed = plan.repeat, plan.shuffle, plan.seed
    records = plan.prior["trials"] if plan.prior is not None else latest_records(spec.name, site_name)
    cls = site_class(site_name)
    each = instance_estimate_s(spec, time_scale, records, cls)
    fs = sweeps.factors(spec)
    at = {p.id: p for p in points or []}
    rows = [{**i.as_dict(), "settings": settings_text(spec, by_id[i.trial]) + "".join(
                f"; {k}={v}" for k, v in (sweeps.trial_factors(fs, at[i.point], i.trial) if i.point else {}).items()),
             "estimate_s": round(each, 1)} for i in todo]
    shuffled = shuffle and (repeat > 1 or bool(points))
    print(f"[dry-run] {spec.name} on {site_name}, TIME_SCALE={time_scale:g}, REPEAT={repeat}"
          + (f", sweep of {len(points)} points" if points else "")
          + (f", shuffled with seed {seed} (--seed {seed} runs this order)" if shuffled else
             ", in the file's order") + (f"; resuming {resume}" if resume is not None else ""), file=out)
    width = max((len(r["id"]) for r in rows), default=0)
    t = 0.0
    for n, r in enumerate(rows, 1):
        t += r["estimate_s"]
        print(f"  {n:3d}. {r['id']:<{width}}  {r['settings']}; ~{schedule.hms(r['estimate_s'])} "
              f"(done by ~{schedule.hms(t)})", file=out)
    print(f"[dry-run] {len(rows)} trial instances, about {schedule.hms(t)} of trials "
          f"({schedule.hms(each)} each: schedule {schedule.hms(spec.duration_s * time_scale)}"
          + (" simulated" if simulated(cls) else "") + " + overhead)"
          + (f", {jobs} at a time: about {schedule.hms(eta_s(each, len(rows), (), jobs))}" if jobs > 1 else "")
          + (f", on {parallel} reservations at once: about {schedule.hms(eta_s(each, len(rows), (), parallel))}"
             if parallel > 1 else "")
          + "; nothing was run or written", file=out)
    return rows
