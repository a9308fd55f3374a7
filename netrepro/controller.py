"""The runner: the steps of a reproduction that touch the site, up, provision, run (trials)
and down (the analysis is the ``analysis`` package's, which the command line calls on the
run folder: this module does not import it).

Each step is usable on its own (``netrepro up|provision|run|analyze|down``) and finds the
state of the previous ones on disk: the site's state in ``.state/<experiment>-<site>/``, the
inventory in ``inventory/<experiment>-<site>.yml``, results in
``results/<experiment>/<run-id>/`` (written once, never overwritten; ``latest`` points at
the newest complete run). A run that stops part-way is marked INCOMPLETE, keeps its completed
trials, and is resumed in its folder (:func:`run`, :func:`load_resume`).
"""

from __future__ import annotations

import os
import platform
import shutil
import sys
import tarfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

from netrepro import ansible
from netrepro.rolevars import model_vars
from netrepro.runfolder import cpu_busy, host_cpu_ticks
from netrepro.runner.barrier import BARRIER_LEAD_MIN_S, BarrierLate, lead_from_env, release_trial
from netrepro.runner.checks import check_trial_data, clock_problems, node_clocks
from netrepro.runner.console import SIGNAL_EXIT, StepIncomplete, _site_arg, _spec_arg, log, signal_of
from netrepro.runner.fetch import FetchFailed, _extract, _node_meta, _nodes_meta, fetch_archives, sha256_tree
from netrepro.runner.resume import load_resume
from netrepro.runner.rundir import (INCOMPLETE, RESERVE_BYTES, _git_commit, _latest_records, _lock_run, _reserve_space,
                                    _spec_as_recorded, _write_json, new_run_dir, point_latest, shutil_rm)
from netrepro.runner.playbooks import _playbook, playbook_failure
from netrepro.runner.ssh import _inventory_hosts, node_ssh_argv, node_trial_dir
from netrepro.runner.steps import open_site, simulated, write_site_inventory
from netrepro.runner.trialvars import _at_rate_scale, _sampled_node, _scaled_phases, _settings_text, trial_vars
from netrepro.sites import Site, site_class
from netrepro.spec import REPO_ROOT, Spec, SpecError


#: How a run judges a trial's health as it completes (:func:`run`'s ``judge``): called with
#: the spec, the trial's record for run.json, its raw folder (``raw/<trial>/``) and TIME_SCALE;
#: returns the record's ``health`` (``{"passed": bool, "checks": [...]}``) and each failed check
#: in a line for the console. It must not raise. The runner does not import the analysis:
#: the command line hands in :func:`netrepro.pipeline.judge_trial`.
TrialJudge = Callable[[Spec, dict, Path, float], tuple[dict, list[str]]]


class _TrialFailed(Exception):
    """One trial failed: ``reason`` (one line); ``stop``: processes may be left on the nodes;
    ``details``: what to record with the attempt (``kept_in``: where its data was kept for a
    look; ``clocks``: the node clocks read at the release and after)."""

    def __init__(self, reason: str, stop: bool = False, details: dict | None = None):
        super().__init__(reason)
        self.reason, self.stop, self.details = reason, stop, details or {}


def run(spec: Spec, site_name: str, time_scale: float | None = 1.0, options: dict[str, Any] | None = None,
        trial_ids: list[str] | None = None, lead_s: float | None = None, resume: Path | None = None,
        command: str = "run", repeat: int | None = None, shuffle: bool = True, seed: int | None = None,
        progress_tty: bool | None = None, sweep: bool = False, judge: TrialJudge | None = None) -> Path:
    """Run the spec's trials (or ``trial_ids``) on a provisioned site; return the run folder.

    ``repeat``: run every trial that many times, in blocks of one of each, each block in a
    random order drawn from ``seed`` when ``shuffle`` (:func:`netrepro.schedule.plan`; a fresh
    seed when None); the trial instances are ``<trial>.r<k>`` and run.json records
    ``repetitions: {repeat, shuffle, seed, design}`` and each instance's ``trial`` and
    ``repetition``. A resumed run keeps its own: ``repeat`` None, or the run's (:func:`load_resume`
    refuses another).
    ``sweep``: run each trial at every point of the experiment's ``sweep.factors``
    (:mod:`netrepro.sweep`): the instances are ``<trial>.p<i>`` (``.r<k>`` when repeated), in
    blocks of every (trial, point) shuffled as repetitions are; run.json records ``sweep:
    {factors, points}`` and each instance's ``point`` and ``factors`` (name -> value). A
    resumed run keeps its own sweep.
    ``progress_tty``: the progress display (:class:`netrepro.progress.RunProgress`): rich's
    on a terminal (default: when stdout is one), else timestamped lines.
    ``judge``: judges each trial's health as it completes (:data:`TrialJudge`; the command
    line hands in the analysis's, :func:`netrepro.pipeline.judge_trial`), recorded as the
    trial's ``health`` in run.json; None: not judged during the run.

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

    ``command``: the netrepro command the resume hint names (``run`` or ``reproduce``).

    Raises:
        SpecError: bad ``trial_ids`` or ``resume`` (nothing is written).
        RuntimeError: the site is not provisioned.
        StepIncomplete: a trial failed or the run was interrupted (SIGINT/SIGTERM): the run
            is marked INCOMPLETE; the completed trials are kept.
    """
    from netrepro import sweep as sweeps
    known_ids = _checked_trial_ids(spec, trial_ids)
    prior = load_resume(spec, site_name, Path(resume), time_scale, trial_ids, repeat) if resume is not None else None
    if prior is None:
        repeat = repeat or 1
        points = sweeps.points(spec) if sweep else None
        instances, seed = _planned(spec, trial_ids, repeat, shuffle, seed, points)
    else:
        points = sweeps.from_record(spec, prior["sweep"]) if isinstance(prior.get("sweep"), dict) else None
    if prior is None and time_scale is None:
        time_scale = 1.0
    site = open_site(spec, site_name, options)
    if not site.load_state().get("provisioned"):
        raise RuntimeError(f"site {site_name}: not provisioned; run `make provision SITE={site_name}` first")
    inv = None if simulated(site) else write_site_inventory(spec, site)
    status = site.status()
    mode = status.get("mode", "remote")
    scaled = _at_rate_scale(spec, site)
    session = {"at": datetime.now(timezone.utc).isoformat(), "toolkit_commit": _git_commit(), "mode": mode,
               "site_status": status, "controller": {"python": platform.python_version(), "host": platform.node()}}
    if prior is not None:
        run_dir = Path(resume).resolve()
        lock = _lock_run(run_dir, "--resume")
        meta = prior
        time_scale = float(meta.get("time_scale", 1))
        lead = float(meta.get("lead_s") or BARRIER_LEAD_MIN_S)
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
        log(f"[run] resuming {run_dir} at trial {pending[0] if pending else '(none left)'}: "
            f"{len(order) - len(pending)} of {len(order)} trials kept")
    else:
        lead = lead_s if lead_s is not None else lead_from_env()
        run_dir = new_run_dir(spec, site_name)
        lock = _lock_run(run_dir, "run folder")
        order = [i.id for i in instances]
        shuffled = bool(shuffle and (repeat > 1 or points))
        meta = {
            "experiment": spec.name, "spec": _spec_as_recorded(spec), "spec_file": str(spec.path), "site": site_name,
            "mode": mode, "site_status": status, "time_scale": time_scale, "lead_s": lead,
            "toolkit_commit": session["toolkit_commit"], "controller": session["controller"],
            "started_at": session["at"], "trials": [], "nodes": {}, "raw_sha256": {}, "wall_s": 0.0,
            "packet": {"mtu_bytes": spec.model.data["mtu_bytes"], "note": "Linux sends MSS-sized segments (MTU - 52 B of TCP/IP headers with timestamps); the paper's 1000 B packets are not reproduced"},
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
        pending = list(order)
        log(f"[run] {spec.name} on {site_name} ({mode}), TIME_SCALE={time_scale}"
            + (f", REPEAT={repeat}" if repeat > 1 else "")
            + (f", sweep of {len(points)} points ({len(order)} trial instances)" if points else "")
            + (f" ({'shuffled, seed ' + str(seed) if shuffled else 'in file order'})" if repeat > 1 or points else "")
            + f"; results in {_shown(run_dir)}")
    raw = run_dir / "raw"
    rj = run_dir / "run.json"
    resume_hint = f"resume with: netrepro {command} {_spec_arg(spec)}{_site_arg(site_name)} --resume {run_dir}"
    try:
        _reserve_space(run_dir)
    except OSError as exc:
        os.close(lock)
        if prior is None:
            shutil_rm(run_dir)
        raise RuntimeError(f"{run_dir}: cannot hold {RESERVE_BYTES >> 10} KiB free for the run's records "
                           f"({exc.strerror}); free some space first") from None
    t_run = time.time()
    failure: tuple[str, str, int] | None = None  # (trial, reason, exit code)
    try:
        (run_dir / INCOMPLETE).write_text(
            f"run in progress since {session['at']} (netrepro process {os.getpid()} on {platform.node()}); "
            f"if that process is gone, it was stopped without a word: {resume_hint}\n")
        _write_json(rj, meta)
        by_id = _trials_by_id(scaled)
        at_point = {p.id: (p, _at_rate_scale(sweeps.point_spec(spec, p.values), site)) for p in points or []}
        from netrepro.progress import RunProgress
        estimate = _instance_estimate_s(scaled, time_scale, meta["trials"], type(site))
        progress = RunProgress(len(meta["trial_status"]), len(meta["trial_status"]) - len(pending), estimate,
                               tty=progress_tty)
        for tid in pending:
            ts = next(s for s in meta["trial_status"] if s["id"] == tid)
            point, tspec = at_point.get(ts.get("point"), (None, scaled))
            trial_id = ts.get("trial") or tid
            trial = _trials_by_id(tspec)[trial_id] if point else by_id[trial_id]
            attempt = {"started_at": datetime.now(timezone.utc).isoformat(), "status": "running"}
            ts.setdefault("attempts", []).append(attempt)
            ts.update(status="running", reason=None)
            _write_json(rj, meta)
            staging = run_dir / ".fetch" / tid
            shutil_rm(staging)
            tv = {**trial_vars(tspec, trial, time_scale, staging / "archives", lead), "id": tid,
                  "trial": trial_id, "time_scale": time_scale, "repetition": ts.get("repetition", 1)}
            factor_values = sweeps.trial_factors(meta["sweep"]["factors"], point, trial_id) if point else {}
            if point:
                tv.update(point=point.id, factors=factor_values)
            outcome: tuple[str, str] | None = None  # (status, reason)
            started: dict[str, float] = {}
            progress.trial(tid, _settings_text(spec, trial) + "".join(f"; {k}={v}" for k, v in factor_values.items()),
                           _scaled_phases(tspec, time_scale)
                           or [{"name": "trial", "start_s": 0, "end_s": tv["duration_s"]}],
                           lambda: started.get("start_epoch_s"), None if inv is None else _delay_probe(inv, tv))
            try:
                record = (_simulate_trial(tspec, site, tv, time_scale, run_dir, len(ts["attempts"]), started, judge=judge)
                          if inv is None else
                          _run_trial(tspec, site, inv, tv, time_scale, run_dir, len(ts["attempts"]), started, judge=judge))
                record.update(trial=ts.get("trial") or tid, repetition=ts.get("repetition", 1),
                              **({"point": point.id, "factors": factor_values} if point else {}))
            except _TrialFailed as exc:
                outcome = ("failed", exc.reason)
                attempt.update(exc.details)
                if exc.stop:
                    if inv is not None:
                        _stop_trial(tspec, inv, site, tv)
                failure = (tid, exc.reason, 2)
            except KeyboardInterrupt as exc:
                sig = signal_of(exc)
                outcome = ("failed", f"interrupted by {sig}")
                if inv is not None:
                    _stop_trial(tspec, inv, site, tv)
                failure = (tid, outcome[1], SIGNAL_EXIT[sig])
            except OSError as exc:  # the controller's disk (extracting, moving the data)
                why = exc.strerror or str(exc)
                outcome = ("failed", f"{why} ({exc.filename})" if exc.filename else why)
                failure = (tid, outcome[1], 2)
            except BaseException as exc:
                outcome = ("failed", f"{type(exc).__name__}: {exc}")
                failure = (tid, outcome[1], 2)
                raise
            else:
                meta["trials"].append(record)
                meta["raw_sha256"] = {**(meta.get("raw_sha256") or {}),
                                      **{f"{tid}/{k}": v for k, v in sha256_tree(raw / tid).items()}}
                outcome = ("complete", None)
            finally:
                shutil_rm(staging)
                progress.end(tid, bool(outcome and outcome[0] == "complete"), (outcome or ("", "stopped"))[1] or "")
                attempt.update(status=outcome[0] if outcome else "failed", reason=outcome[1] if outcome else "stopped",
                               ended_at=datetime.now(timezone.utc).isoformat())
                ts.update(status=attempt["status"], reason=attempt["reason"])
                if failure is None:
                    _write_json(rj, meta)
            if failure is not None:
                break
    except KeyboardInterrupt as exc:  # between two trials, or a second one while stopping a trial
        sig = signal_of(exc)
        first = next((s["id"] for s in meta["trial_status"] if s["status"] != "complete"), "(none)")
        failure = failure or (first, f"interrupted by {sig}", SIGNAL_EXIT[sig])
    finally:
        shutil_rm(run_dir / ".fetch")
        (run_dir / ".reserve").unlink(missing_ok=True)
        meta["finished_at"] = datetime.now(timezone.utc).isoformat()
        meta["wall_s"] = round(float(meta.get("wall_s") or 0) + time.time() - t_run, 1)
        meta["nodes"] = _nodes_meta(raw, spec)
        meta["timings_s"] = {**site.load_state().get("timings_s", {}), "trials": meta["wall_s"]}
        kept = [s["id"] for s in meta["trial_status"] if s["status"] == "complete"]
        complete = len(kept) == len(meta["trial_status"])
        unrecorded = None
        try:
            if not complete:
                where = failure or next(((s["id"], s.get("reason") or "not run yet", 2)
                                         for s in meta["trial_status"] if s["status"] != "complete"))
                (run_dir / INCOMPLETE).write_text(
                    f"run INCOMPLETE at trial {where[0]}: {where[1]}\n"
                    f"kept: {', '.join(kept) or 'no trial'} ({len(kept)} of {len(meta['trial_status'])} trials; "
                    f"raw files and their sha256 in run.json)\n{resume_hint}\n")
            _write_json(rj, meta)
            if complete:
                (run_dir / INCOMPLETE).unlink(missing_ok=True)
        except OSError as exc:
            unrecorded = f"could not record it in {run_dir} ({exc.strerror})"
        os.close(lock)
    if failure is not None:
        tid, reason, code = failure
        account = (f"run INCOMPLETE at trial {tid} ({reason}); {len(kept)} of {len(meta['trial_status'])} "
                   f"trials kept in {run_dir}" + (f"; {unrecorded}" if unrecorded else ""))
        raise StepIncomplete(account, hint=resume_hint, exit_code=code, run_dir=run_dir)
    if unrecorded:
        raise RuntimeError(f"run {run_dir}: every trial completed, but {unrecorded}")
    point_latest(run_dir)
    return run_dir


def _checked_trial_ids(spec: Spec, trial_ids: list[str] | None) -> list[str]:
    """The spec's trial ids; SpecError (one line) when ``trial_ids`` (``--trial``) names another."""
    known = spec.trial_ids
    for tid in trial_ids or []:
        if tid not in known:
            raise SpecError("command line", "--trial", f"{tid!r}: not a trial of {spec.name}; expected one of: {', '.join(known)}")
    return known


def _trials_by_id(spec: Spec) -> dict[str, dict]:
    """Trial id -> the model's trial."""
    return {t["id"]: t for t in spec.model.trials}


def _planned(spec: Spec, trial_ids: list[str] | None, repeat: int, shuffle: bool, seed: int | None,
             points: list | None = None):
    """(instances, seed) of a new run: :func:`netrepro.schedule.plan` of the spec's trials (or
    ``trial_ids``), at every sweep point of ``points`` (:func:`netrepro.sweep.points`) when
    given, with a fresh seed drawn when a shuffled run (more than one repetition, or a sweep)
    has none. Raises SpecError (``--repeat``, one line) for a repeat out of range."""
    from netrepro import schedule, sweep
    if shuffle and (repeat > 1 or points) and seed is None:
        seed = schedule.new_seed()
    ids = [t for t in spec.trial_ids if not trial_ids or t in trial_ids]
    try:
        return schedule.plan(sweep.cells(points, ids) if points else ids, repeat, shuffle, seed), seed
    except ValueError as exc:
        raise SpecError("command line", "--repeat", str(exc)) from None


def dry_run(spec: Spec, site_name: str, time_scale: float | None = 1.0, options: dict[str, Any] | None = None,
            trial_ids: list[str] | None = None, repeat: int = 1, shuffle: bool = True, seed: int | None = None,
            resume: Path | None = None, out=None, sweep: bool = False) -> list[dict]:
    """Print every trial instance a run would run, in order, with its settings and the estimated
    wall time, and return them (``[{id, trial, repetition, settings, estimate_s}]``; ``point``
    too in a sweep). Touches nothing: no site is contacted, no file written (the site's saved
    state is only read). ``sweep``: as :func:`run`'s; every point's experiment is validated.

    With ``resume``: the run's remaining instances (:func:`load_resume` checks it, reading
    only). A shuffled run without ``seed`` draws one and prints it: ``--seed`` with it runs
    that order. The estimate is the schedule at ``time_scale`` plus a trial's overhead
    (:func:`_instance_estimate_s`: the latest complete run's of this experiment and site when
    there is one, else the site's own, :attr:`netrepro.sites.base.Site.TRIAL_OVERHEAD_S`); up,
    provisioning and teardown are not in it.
    Rates are as written: the rate scale is chosen when the site is provisioned.

    Raises:
        SpecError: a bad ``trial_ids``, ``repeat``, ``resume`` or sweep (one line).
        SiteError: an option the site refuses, or an experiment it could not build with them
            (:meth:`netrepro.sites.base.Site.checked_options`).
    """
    from netrepro import schedule
    from netrepro import sweep as sweeps
    out = out or sys.stdout
    site_class(site_name).checked_options(spec, options)  # the site's options and its own refusals
    _checked_trial_ids(spec, trial_ids)
    by_id = _trials_by_id(spec)
    points = None
    if resume is not None:
        meta = load_resume(spec, site_name, Path(resume), time_scale, trial_ids, None)
        time_scale = float(meta.get("time_scale", 1))
        rec = meta.get("repetitions") or {}
        repeat, shuffle, seed = int(rec.get("repeat", 1)), bool(rec.get("shuffle")), rec.get("seed")
        todo = [schedule.Instance(t["id"], t.get("trial") or t["id"], int(t.get("repetition", 1)), t.get("point"))
                for t in meta.get("trial_status") or [] if t.get("status") != "complete"]
        records = meta["trials"]
        if isinstance(meta.get("sweep"), dict):
            points = sweeps.from_record(spec, meta["sweep"])
    else:
        time_scale = 1.0 if time_scale is None else time_scale
        points = sweeps.points(spec) if sweep else None
        todo, seed = _planned(spec, trial_ids, repeat, shuffle, seed, points)
        records = _latest_records(spec, site_name)
    cls = site_class(site_name)
    each = _instance_estimate_s(spec, time_scale, records, cls)
    fs = sweeps.factors(spec)
    at = {p.id: p for p in points or []}
    rows = [{**i.as_dict(), "settings": _settings_text(spec, by_id[i.trial]) + "".join(
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
          + (" simulated" if simulated(cls) else "") + " + overhead); "
          "nothing was run or written", file=out)
    return rows


def _shown(path: Path) -> Path:
    return path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path


def _simulate_trial(spec: Spec, site: Site, tv: dict, time_scale: float, run_dir: Path, attempt: int,
                    started: dict | None = None, judge: TrialJudge | None = None) -> dict:
    """One trial on a simulating site (:func:`simulated`): its ``simulate`` writes the raw
    files, which pass the same checks as fetched ones (:func:`check_trial_data`) and are
    moved to raw/<trial>/ once. Returns its record for run.json (``simulated``: true; no
    barrier, clocks or CPU readings: the simulation's results do not depend on this machine).

    Raises:
        _TrialFailed: the simulation failed or its data do not cover the schedule.
    """
    from netrepro.sites.base import SiteError
    tid = tv["id"]
    staging = Path(tv["fetch_dir"]).parent / "nodes"
    log(f"[run] trial {tid}: simulating (base RTT {tv['base_rtt_s']} s, schedule {tv['duration_s']} s)")
    t0 = time.time()
    try:
        sim = site.simulate(spec, tv, staging)
    except SiteError as exc:
        raise _TrialFailed(str(exc)) from None
    if started is not None:
        started["start_epoch_s"] = sim["start_epoch_s"]
    dest = _keep_trial_data(run_dir, staging, tid, attempt, check_trial_data(tv, staging, sim["start_epoch_s"]))
    record = {
        "id": tid, "labels": tv["labels"], "status": "complete", "simulated": True, "start_epoch_s": sim["start_epoch_s"],
        "phases": _scaled_phases(spec, time_scale), "duration_s": tv["duration_s"], "base_rtt_s": tv["base_rtt_s"],
        "wall_s": round(time.time() - t0, 1), "simulation": {k: v for k, v in sim.items() if k != "start_epoch_s"},
        "bottleneck_interface": (next(iter(tv["qdisc_stats"].values()))["network"] if tv.get("qdisc_stats") else None),
        "controller_loadavg": {"before": None, "after": [round(x, 2) for x in os.getloadavg()]},
    }
    _judge_health(judge, spec, record, dest, time_scale)
    log(f"[run] trial {tid} simulated in {record['wall_s']:.1f} s (schedule {tv['duration_s']} s)")
    return record


def _keep_trial_data(run_dir: Path, tdir: Path, tid: str, attempt: int, problems: list[str],
                     details: dict | None = None) -> Path:
    """Where a trial's data (``tdir``, fetched or simulated) go once checked: with
    ``problems``, whole to ``failed/<trial>-<attempt>/`` and _TrialFailed is raised (its
    details: ``kept_in`` and ``details``); else to ``raw/<trial>/``, once, which is returned
    (a folder already there, moved by a run stopped before it could record the trial, goes
    to ``failed/<trial>-<attempt>-unrecorded/`` first)."""
    if problems:
        failed = run_dir / "failed" / f"{tid}-{attempt}"
        failed.parent.mkdir(exist_ok=True)
        os.rename(tdir, failed)
        raise _TrialFailed("; ".join(problems), details={"kept_in": str(failed.relative_to(run_dir)), **(details or {})})
    dest = run_dir / "raw" / tid
    dest.parent.mkdir(exist_ok=True)
    if dest.exists():
        (run_dir / "failed").mkdir(exist_ok=True)
        os.rename(dest, run_dir / "failed" / f"{tid}-{attempt}-unrecorded")
    os.rename(tdir, dest)
    return dest


def _judge_health(judge: TrialJudge | None, spec: Spec, record: dict, dest: Path, time_scale: float) -> None:
    """The trial's health (``record["health"]``), judged by ``judge`` from its record and raw
    folder ``dest``; the failed checks on the console. Without a judge the record has none."""
    if judge is None:
        return
    record["health"], failed = judge(spec, record, dest, time_scale)
    if not record["health"]["passed"]:
        log(f"[run] trial {record['id']}: health checks failed: " + "; ".join(failed))


def _instance_estimate_s(spec: Spec, time_scale: float, records: list[dict], site_cls: type[Site]) -> float:
    """Expected wall time (s) of one trial instance: the schedule at ``time_scale`` and the
    base-RTT pings as the site runs them (``site_cls.TRIAL_WALL_PER_SCHEDULED_S`` s per second)
    plus ``site_cls.TRIAL_OVERHEAD_S``; once trials of the run have completed, the schedule
    plus the median time they took beyond it (:func:`netrepro.schedule.overhead_s`)."""
    from netrepro import schedule
    over = schedule.overhead_s(records)
    base = spec.model.data["base_rtt"].get("duration_s", 0)
    if over is not None:  # wall_s - duration_s: the base-RTT pings are in it
        return max(0.0, spec.duration_s * time_scale + over)
    return (spec.duration_s + base) * time_scale * site_cls.TRIAL_WALL_PER_SCHEDULED_S + site_cls.TRIAL_OVERHEAD_S


def _delay_probe(inv: Path, tv: dict):
    """The live queueing-delay probe of a trial (:func:`netrepro.progress.queueing_delay_probe`)
    on its first pinging node, or None when no node pings."""
    from netrepro.progress import queueing_delay_probe
    nodes = sorted(tv.get("ping") or {})
    if not nodes:
        return None
    hv = _inventory_hosts(inv).get(nodes[0])
    if hv is None:
        return None
    return queueing_delay_probe(lambda cmd: node_ssh_argv(nodes[0], hv, cmd, connect_timeout_s=5),
                                node_trial_dir(hv, tv["id"]))


def _run_trial(spec: Spec, site: Site, inv: Path, tv: dict, time_scale: float, run_dir: Path, attempt: int,
               started: dict | None = None, judge: TrialJudge | None = None) -> dict:
    """Run one trial (playbooks/trial.yml) and move its checked data to raw/<trial>/.
    ``started``: gets ``start_epoch_s`` as soon as the barrier has released the trial;
    ``judge``: judges its health (:data:`TrialJudge`).

    Returns its record for run.json. Raises _TrialFailed (the playbook failed: processes may
    be left; the data does not cover the schedule; a node clock was stepped), or what the
    playbook step raises (KeyboardInterrupt, OSError).
    """
    tid = tv["id"]
    log(f"[run] trial {tid}: base RTT {tv['base_rtt_s']} s, schedule {tv['duration_s']} s")
    load_before = os.getloadavg()
    t0 = time.time()
    extra = {"netrepro": model_vars(spec), "trial": tv}
    armed = sorted(set(tv["ping"]) | set(tv["qdisc_stats"]) | set(tv["flows"]) | set(tv.get("iperf3", {}))
                   | set(tv.get("iperf3_servers", {})))
    bn = _sampled_node(spec)
    try:
        logs = run_dir / "logs"
        _playbook("trial", inv, extra, site, keep_log=logs / f"{tid}-{attempt}-trial.log")
        try:
            # Every node acknowledges the release, the armed ones after their FIFOs: each one's
            # /proc/stat then starts the window of the nodes' CPU check (analysis.health).
            barrier = release_trial(inv, sorted(set(armed) | set(spec.model.nodes)), tid, bn, lead_min_s=tv["lead_s"])
        except BarrierLate as exc:
            raise _TrialFailed(str(exc), stop=True) from None
        if started is not None:
            started["start_epoch_s"] = barrier["start_epoch_s"]
        ticks_before = host_cpu_ticks()  # this machine's CPU from the release on
        # Every node's clock as the release read it: a clock stepped from then to the end of
        # the trial is caught (clock_problems), without reading the clocks again before it.
        clocks_before = barrier["clocks"]
        log(f"[run] trial {tid}: released at a lead of {barrier['lead_s']} s (slowest round trip "
            f"{max(barrier['round_trip_s'].values()):.3f} s, least margin {min(barrier['ack_margin_s'].values()):.3f} s)")
        extra["trial"] = {**tv, "start_epoch_s": barrier["start_epoch_s"]}
        _playbook("trial-end", inv, extra, site, keep_log=logs / f"{tid}-{attempt}-trial-end.log")
        try:
            fetch_archives(inv, sorted(set(armed) | set(spec.model.nodes)), tid, Path(tv["fetch_dir"]))
        except FetchFailed as exc:
            raise _TrialFailed(str(exc), stop=True) from None
    except ansible.PlaybookError as exc:
        reason = playbook_failure(exc)
        try:
            if shutil.disk_usage(run_dir).free < 64 << 10:
                reason += " (the results folder's disk is full)"
        except OSError:
            pass
        raise _TrialFailed(reason, stop=True) from None
    wall = time.time() - t0
    # One reading per node: they are idle now, and a step is judged against half the round trips.
    clocks_after = node_clocks(inv, samples=1)
    fetched = Path(tv["fetch_dir"])
    tdir = fetched.parent / "nodes"
    for archive in sorted(fetched.glob("*.tar.gz")):
        try:
            _extract(archive, tdir / archive.name.removesuffix(".tar.gz"))
        except (tarfile.TarError, EOFError, ValueError) as exc:
            raise _TrialFailed(f"the archive fetched from {archive.name.removesuffix('.tar.gz')} is unreadable ({exc})") from None
    before = _node_meta(tdir / bn / "meta-before.json")
    after = _node_meta(tdir / bn / "meta-after.json")
    # The common start the barrier released the nodes with.
    start = barrier["start_epoch_s"]
    steps, problems = clock_problems(clocks_before, clocks_after)
    dest = _keep_trial_data(run_dir, tdir, tid, attempt, check_trial_data(tv, tdir, start) + problems,
                            {"clocks": {"before": clocks_before, "after": clocks_after, "step_s": steps}})
    # the interface the queue sampler reads, as the experiment names it
    bdev = next((c["at"].split(":")[1] for c in spec.model.data["collectors"] if c["at"].split(":")[0] == bn), None)
    released = (barrier.get("cpu_ticks") or {}).get(bn)  # the bottleneck node's /proc/stat at the release
    record = {
        "id": tid, "labels": tv["labels"], "status": "complete", "start_epoch_s": start, "phases": _scaled_phases(spec, time_scale),
        "duration_s": tv["duration_s"],
        "base_rtt_s": tv["base_rtt_s"], "wall_s": round(wall, 1), "bottleneck_interface": bdev,
        # the barrier: lead chosen, each node's round trip, how early it acknowledged and its
        # /proc/stat then (the nodes' CPU is measured from the release to meta-after.json)
        "barrier": {k: barrier[k] for k in ("lead_s", "round_trip_s", "ack_margin_s", "cpu_ticks") if k in barrier},
        "qdisc_before": [q for q in before.get("qdiscs") or [] if q.get("dev") == bdev],
        "qdisc_after": [q for q in after.get("qdiscs") or [] if q.get("dev") == bdev],
        # how busy the bottleneck node's CPU was from the release on (all nodes' in the local micro-VM)
        "bottleneck_cpu_busy": cpu_busy({"cpu_ticks": released} if released else before, after),
        # the controller machine's 1/5/15-min load averages before and after the trial
        # (in vm mode the nodes' CPUs are emulated on this machine's)
        "controller_loadavg": {"before": [round(x, 2) for x in load_before],
                               "after": [round(x, 2) for x in os.getloadavg()]},
        # the controller machine's own CPU busy from the release on (its /proc/stat) and its cores
        "controller_cpu_busy": cpu_busy({"cpu_ticks": ticks_before}, {"cpu_ticks": host_cpu_ticks()}),
        "controller_cores": os.cpu_count(),
        # every node's clock against the controller's, at the release and after (clock_problems)
        "clocks": {"before": clocks_before, "after": clocks_after, "step_s": steps},
    }
    _judge_health(judge, spec, record, dest, time_scale)
    log(f"[run] trial {tid} done in {wall:.0f} s (schedule {tv['duration_s']} s)")
    return record


def _stop_trial(spec: Spec, inv: Path, site: Site, tv: dict) -> None:
    """Stop a trial's collectors and flows on every node after a failure or an interruption
    (best effort: says so on the console when it could not)."""
    try:
        _playbook("stop-trial", inv, {"trial": tv}, site, quiet=True)
        log(f"[run] stopped trial {tv['id']}'s processes on the nodes")
    except Exception as exc:  # noqa: BLE001 - best effort while already failing
        log(f"[run] could not stop trial {tv['id']} on the nodes: {playbook_failure(exc)}")


