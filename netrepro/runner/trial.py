"""One trial instance on the site: playbooks/trial.yml arms it, the barrier releases it,
trial-end.yml ends and packs it, and its data is fetched, checked and kept in the run folder
(:func:`run_trial`); on a site that simulates its trials the simulation writes the data
(:func:`simulate_trial`). Either returns the trial's record for run.json."""

from __future__ import annotations

import os
import shutil
import tarfile
import threading
import time
from pathlib import Path
from typing import Callable

from netrepro.runner import ansible
from netrepro.runner.progress import queueing_delay_probe
from netrepro.experiment.rolevars import model_vars
from netrepro.runfolder.cpu import cpu_busy, host_cpu_ticks
from netrepro.runfolder.layout import FAILED, LOGS, trial_raw
from netrepro.runfolder.record import set_steps
from netrepro.runner.barrier import BarrierLate, release_trial
from netrepro.runner.checks import check_trial_data, clock_problems, node_clocks
from netrepro.runner.console import log
from netrepro.runner.fetch import FetchFailed, extract_archive, node_meta, fetch_archives
from netrepro.runner.playbooks import playbook_path, playbook_failure
from netrepro.runner.ssh import inventory_hosts, node_ssh_argv, node_trial_dir
from netrepro.runner.trialvars import sampled_node, scaled_phases
from netrepro.sites import Site
from netrepro.sites.base import SiteError
from netrepro.experiment.spec import Spec


#: How a run judges a trial's health as it completes (:func:`netrepro.runner.run.run`'s ``judge``): called with
#: the spec, the trial's record for run.json, its raw folder (``raw/<trial>/``) and TIME_SCALE;
#: returns the record's ``health`` (``{"passed": bool, "checks": [...]}``) and each failed check
#: in a line for the console. It must not raise. The runner does not import the analysis:
#: the command line hands in :func:`netrepro.cli.step_commands.judge_trial`.
TrialJudge = Callable[[Spec, dict, Path, float], tuple[dict, list[str]]]


class TrialFailed(Exception):
    """One trial failed: ``reason`` (one line); ``stop``: processes may be left on the nodes;
    ``details``: what to record with the attempt (``kept_in``: where its data was kept for a
    look; ``clocks``: the node clocks read at the release and after; ``unhealthy``: its health
    checks failed); ``again``: the run runs the trial again at once (an unhealthy attempt
    with a retry left: :func:`run_trial`'s ``retry_unhealthy``)."""

    def __init__(self, reason: str, stop: bool = False, details: dict | None = None, again: bool = False):
        super().__init__(reason)
        self.reason, self.stop, self.details, self.again = reason, stop, details or {}, again


def run_trial(spec: Spec, site: Site, inv: Path, tv: dict, time_scale: float, run_dir: Path, attempt: int,
               started: dict | None = None, judge: TrialJudge | None = None, retry_unhealthy: bool = False) -> dict:
    """Run one trial (playbooks/trial.yml) and move its checked data to raw/<trial>/.
    ``started``: gets ``start_epoch_s`` as soon as the barrier has released the trial;
    ``judge``: judges its health (:data:`TrialJudge`) before its data goes to raw/;
    ``retry_unhealthy``: a trial whose health checks fail is not kept: its data goes whole to
    ``failed/<trial>-<attempt>/`` and TrialFailed is raised with ``again`` (the run runs it
    again; without, it is kept, and the claims reading it are inconclusive).

    Returns its record for run.json. Raises TrialFailed (the playbook failed: processes may
    be left; the data does not cover the schedule; a node clock was stepped; unhealthy, with
    ``retry_unhealthy``), or what the playbook step raises (KeyboardInterrupt, OSError).
    """
    tid = tv["id"]
    log(f"[run] trial {tid}: base RTT {tv['base_rtt_s']} s, schedule {tv['duration_s']} s")
    load_before = os.getloadavg()
    t0 = time.time()
    bn = sampled_node(spec)
    timed: dict[str, float] = {}
    barrier, ticks_before = _play_and_fetch(spec, site, inv, tv, run_dir, attempt, bn, started, timed)
    # Every node's clock as the release read it: a clock stepped from then to the end of
    # the trial is caught (clock_problems), without reading the clocks again before it.
    clocks_before = barrier["clocks"]
    wall = time.time() - t0
    # One reading per node: they are idle now, and a step is judged against half the round trips.
    clocks_after = node_clocks(inv, samples=1)
    fetched = Path(tv["fetch_dir"])
    tdir = fetched.parent / "nodes"
    for archive in sorted(fetched.glob("*.tar.gz")):
        try:
            extract_archive(archive, tdir / archive.name.removesuffix(".tar.gz"))
        except (tarfile.TarError, EOFError, ValueError) as exc:
            raise TrialFailed(f"the archive fetched from {archive.name.removesuffix('.tar.gz')} is unreadable ({exc})") from None
    before = node_meta(tdir / bn / "meta-before.json")
    after = node_meta(tdir / bn / "meta-after.json")
    # The common start the barrier released the nodes with.
    start = barrier["start_epoch_s"]
    steps, problems = clock_problems(clocks_before, clocks_after)
    problems = check_trial_data(tv, tdir, start) + problems
    # the interface the queue sampler reads, as the experiment names it
    bdev = next((c.interface for c in spec.model.collectors if c.node == bn), None)
    released = (barrier.get("cpu_ticks") or {}).get(bn)  # the bottleneck node's /proc/stat at the release
    record = {
        # the model's trial of the instance, which the health checks read (a repeated run's
        # instance is <trial>.r<k>: netrepro.runner.schedule)
        "id": tid, "trial": tv.get("trial", tid), "labels": tv["labels"], "status": "complete", "start_epoch_s": start, "phases": scaled_phases(spec, time_scale),
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
    # judged where fetched, before the data go to raw/ (data with problems are not judged)
    failed = [] if problems else _judge_health(judge, spec, record, tdir, time_scale)
    # where the trial's time went, step by step (netrepro.cli.bench prints them)
    set_steps(record, {**timed, "keep": round(time.time() - t0 - wall, 2)})
    if failed and retry_unhealthy:
        log(f"[run] trial {tid}: unhealthy, so not kept (its data in failed/{tid}-{attempt}/); running it again")
        _keep_trial_data(run_dir, tdir, tid, attempt, ["health checks failed: " + "; ".join(failed)],
                         {"unhealthy": True, "health": record["health"]}, again=True)
    _keep_trial_data(run_dir, tdir, tid, attempt, problems,
                     {"clocks": {"before": clocks_before, "after": clocks_after, "step_s": steps}})
    log(f"[run] trial {tid} done in {wall:.0f} s (schedule {tv['duration_s']} s)")
    return record


#: The steps of an emulated trial, in order, as its record's ``steps_s`` times them (s, on the
#: controller's clock): ``arm`` (playbooks/trial.yml: the base RTT measured, for the
#: record's ``base_rtt_s``, where the experiment has one, and every process of the trial armed),
#: ``release`` (the barrier: the common start written to every node, acknowledged), ``lead``
#: (from then to the schedule's start), ``schedule`` (the schedule itself, its phases, until
#: trial-end.yml starts), ``finish`` (trial-end.yml: the processes ended and
#: packed), ``fetch`` (each node's archive copied here) and ``keep`` (the clocks read again,
#: the archives unpacked, the data checked, the health judged). Their sum is the trial's
#: wall time, ``keep`` aside (``wall_s`` ends with the fetch).
TRIAL_STEPS = ("arm", "release", "lead", "schedule", "finish", "fetch", "keep")


def _play_and_fetch(spec: Spec, site: Site, inv: Path, tv: dict, run_dir: Path, attempt: int, bn: str,
                    started: dict | None, steps: dict | None = None) -> tuple[dict, str | None]:
    """A trial on the nodes: playbooks/trial.yml arms it, the barrier releases it
    (:func:`release_trial`, its start chosen on node ``bn``'s clock), trial-end.yml, run once
    the schedule has ended (:func:`_await_schedule_end`), ends and packs it, and each node's
    archive is fetched to ``tv["fetch_dir"]``. Each playbook's log is kept in the run's
    ``logs/<trial>-<attempt>-<playbook>.log``. ``started``: gets ``start_epoch_s`` as soon as
    the barrier has released the trial; ``steps``: gets the seconds of each step up to the
    fetch (:data:`TRIAL_STEPS`).

    Returns (the barrier's result, this machine's /proc/stat ``cpu`` numbers at the release).
    Raises TrialFailed (``stop``: processes may be left) when a playbook failed (saying when
    the results folder's disk is full), a node acknowledged the release late or an archive
    could not be fetched.
    """
    tid = tv["id"]
    extra = {"netrepro": model_vars(spec), "trial": tv}
    armed = sorted(set(tv["ping"]) | set(tv["qdisc_stats"]) | set(tv["flows"]) | set(tv.get("iperf3", {}))
                   | set(tv.get("iperf3_servers", {})))
    steps = {} if steps is None else steps
    mark = [time.time()]

    def took(step: str) -> None:
        now = time.time()
        steps[step] = round(now - mark[0], 2)
        mark[0] = now

    try:
        logs = run_dir / LOGS
        playbook_path("trial", inv, extra, site, keep_log=logs / f"{tid}-{attempt}-trial.log")
        took("arm")
        try:
            # Every node acknowledges the release, the armed ones after their FIFOs: each one's
            # /proc/stat then starts the window of the nodes' CPU check (analysis.health).
            barrier = release_trial(inv, sorted(set(armed) | set(spec.model.nodes)), tid, bn, lead_min_s=tv["lead_s"])
        except BarrierLate as exc:
            raise TrialFailed(str(exc), stop=True) from None
        took("release")
        if started is not None:
            started["start_epoch_s"] = barrier["start_epoch_s"]
        ticks_before = host_cpu_ticks()  # this machine's CPU from the release on
        log(f"[run] trial {tid}: released at a lead of {barrier['lead_s']} s (slowest round trip "
            f"{max(barrier['round_trip_s'].values()):.3f} s, least margin {min(barrier['ack_margin_s'].values()):.3f} s)")
        extra["trial"] = {**tv, "start_epoch_s": barrier["start_epoch_s"]}
        steps["lead"] = round(max(0.0, barrier["start_here_s"] - mark[0]), 2)
        mark[0] += steps["lead"]
        _await_schedule_end(barrier["start_here_s"] + tv["duration_s"])
        took("schedule")
        playbook_path("trial-end", inv, extra, site, keep_log=logs / f"{tid}-{attempt}-trial-end.log")
        took("finish")
        try:
            fetch_archives(inv, sorted(set(armed) | set(spec.model.nodes)), tid, Path(tv["fetch_dir"]))
        except FetchFailed as exc:
            raise TrialFailed(str(exc), stop=True) from None
        took("fetch")
    except ansible.PlaybookError as exc:
        reason = playbook_failure(exc)
        try:
            if shutil.disk_usage(run_dir).free < 64 << 10:
                reason += " (the results folder's disk is full)"
        except OSError:
            pass
        raise TrialFailed(reason, stop=True) from None
    return barrier, ticks_before


def _await_schedule_end(end_here_s: float) -> None:
    """Sleep until the schedule's end, ``end_here_s`` on this machine's clock (epoch seconds:
    the barrier's ``start_here_s`` plus the schedule's length).

    No playbook reaches the nodes from the release to the end: trial.yml armed every process
    of the trial (each node's CPU window reader too, roles/collectors/files/nr-window.sh), and
    trial-end.yml connects afterwards; only the live delay probe reads one node, at a phase's
    middle (:mod:`netrepro.runner.progress`). Started right after the release instead, its SSH
    sessions and commands reached the micro-VM's nodes 0-1.4 s after the start (their
    cpu-window.txt readings against the barrier's, pie-vs-red at TIME_SCALE 0.25, 2026-11-26),
    just as the first phase's flow clients started: these were the trial's latest, 11-172 ms
    behind the schedule against 6-44 ms in the later phases.

    In a worker thread (a campaign on several reservations, netrepro.runner.run), the wait
    ends early when :data:`STOPPING` is set: the run is being interrupted.

    Raises KeyboardInterrupt from the sleep (the caller stops the trial as from a playbook);
    TrialFailed (``stop``) in a worker thread when :data:`STOPPING` was set.
    """
    left = max(0.0, end_here_s - time.time())
    if threading.current_thread() is threading.main_thread():
        time.sleep(left)
    elif STOPPING.wait(left):
        raise TrialFailed("stopped: the run is being interrupted", stop=True)


#: Set by the run's main thread when it is interrupted while trials run in worker threads (a
#: campaign on several reservations): each ends its wait for the schedule's end at once
#: (:func:`_await_schedule_end`); cleared when the run has recorded its end.
STOPPING = threading.Event()


def simulate_trial(spec: Spec, site: Site, tv: dict, time_scale: float, run_dir: Path, attempt: int,
                    started: dict | None = None, judge: TrialJudge | None = None) -> dict:
    """One trial on a simulating site (:func:`simulated`): its ``simulate`` writes the raw
    files (:func:`simulation_of`), which pass the same checks as fetched ones
    (:func:`check_trial_data`) and are moved to raw/<trial>/ once (:func:`kept_simulation`).
    Returns its record for run.json (``simulated``: true; no barrier, clocks or CPU readings:
    the simulation's results do not depend on this machine).

    Raises:
        TrialFailed: the simulation failed or its data do not cover the schedule.
    """
    sim, sim_wall_s = simulation_of(spec, site, tv)
    return kept_simulation(spec, tv, sim, sim_wall_s, time_scale, run_dir, attempt, started, judge)


def simulation_of(spec: Spec, site: Site, tv: dict) -> tuple[dict, float]:
    """Simulate one trial instance: the site's ``simulate`` writes its raw files into its own
    staging folder (``nodes/`` beside ``tv["fetch_dir"]``). Touches nothing else of the run
    folder, so that several instances can be simulated at once, each in a thread.

    Returns (what ``simulate`` returned: ``{"start_epoch_s", ...}``, its wall time in s).

    Raises:
        TrialFailed: the simulation failed (the site's SiteError, in one line).
    """
    tid = tv["id"]
    staging = Path(tv["fetch_dir"]).parent / "nodes"
    log(f"[run] trial {tid}: simulating (base RTT {tv['base_rtt_s']} s, schedule {tv['duration_s']} s)")
    t0 = time.time()
    try:
        sim = site.simulate(spec, tv, staging)
    except SiteError as exc:
        raise TrialFailed(str(exc)) from None
    return sim, time.time() - t0


def kept_simulation(spec: Spec, tv: dict, sim: dict, sim_wall_s: float, time_scale: float, run_dir: Path,
                     attempt: int, started: dict | None = None, judge: TrialJudge | None = None) -> dict:
    """A simulated trial instance's data (:func:`simulation_of`'s ``sim`` and ``sim_wall_s``,
    s) checked (:func:`check_trial_data`) and moved to raw/<trial>/ once, its health judged
    (:data:`TrialJudge`); ``started`` gets ``start_epoch_s``. The run folder's part of a
    simulated trial: its caller does it in the run's order, one at a time.

    Returns its record for run.json; its ``wall_s`` is the simulation's wall time plus this
    check and move (not the time it waited to be recorded).

    Raises:
        TrialFailed: the data do not cover the schedule (kept in failed/<trial>-<attempt>/).
        OSError: the data could not be moved.
    """
    tid = tv["id"]
    staging = Path(tv["fetch_dir"]).parent / "nodes"
    t0 = time.time()
    if started is not None:
        started["start_epoch_s"] = sim["start_epoch_s"]
    dest = _keep_trial_data(run_dir, staging, tid, attempt, check_trial_data(tv, staging, sim["start_epoch_s"]))
    record = {
        "id": tid, "trial": tv.get("trial", tid), "labels": tv["labels"], "status": "complete", "simulated": True, "start_epoch_s": sim["start_epoch_s"],
        "phases": scaled_phases(spec, time_scale), "duration_s": tv["duration_s"], "base_rtt_s": tv["base_rtt_s"],
        "wall_s": round(sim_wall_s + time.time() - t0, 1), "simulation": {k: v for k, v in sim.items() if k != "start_epoch_s"},
        "bottleneck_interface": (next(iter(tv["qdisc_stats"].values()))["network"] if tv.get("qdisc_stats") else None),
        "controller_loadavg": {"before": None, "after": [round(x, 2) for x in os.getloadavg()]},
    }
    _judge_health(judge, spec, record, dest, time_scale)
    log(f"[run] trial {tid} simulated in {record['wall_s']:.1f} s (schedule {tv['duration_s']} s)")
    return record


def _keep_trial_data(run_dir: Path, tdir: Path, tid: str, attempt: int, problems: list[str],
                     details: dict | None = None, again: bool = False) -> Path:
    """Where a trial's data (``tdir``, fetched or simulated) go once checked: with
    ``problems``, whole to ``failed/<trial>-<attempt>/`` and TrialFailed is raised (its
    details: ``kept_in`` and ``details``; ``again`` as given); else to ``raw/<trial>/``,
    once, which is returned (a folder already there, moved by a run stopped before it could
    record the trial, goes to ``failed/<trial>-<attempt>-unrecorded/`` first)."""
    if problems:
        failed = run_dir / FAILED / f"{tid}-{attempt}"
        failed.parent.mkdir(exist_ok=True)
        os.rename(tdir, failed)
        raise TrialFailed("; ".join(problems), details={"kept_in": str(failed.relative_to(run_dir)), **(details or {})},
                           again=again)
    dest = trial_raw(run_dir, tid)
    dest.parent.mkdir(exist_ok=True)
    if dest.exists():
        (run_dir / FAILED).mkdir(exist_ok=True)
        os.rename(dest, run_dir / FAILED / f"{tid}-{attempt}-unrecorded")
    os.rename(tdir, dest)
    return dest


def _judge_health(judge: TrialJudge | None, spec: Spec, record: dict, dest: Path, time_scale: float) -> list[str]:
    """The trial's health (``record["health"]``), judged by ``judge`` from its record and its
    data in ``dest`` (one folder per node); the failed checks on the console, and returned,
    one line each. Without a judge the record has none (and nothing failed)."""
    if judge is None:
        return []
    record["health"], failed = judge(spec, record, dest, time_scale)
    if not record["health"]["passed"]:
        log(f"[run] trial {record['id']}: health checks failed: " + "; ".join(failed))
        return failed or ["health"]
    return []


def delay_probe(inv: Path, tv: dict):
    """The live queueing-delay probe of a trial (:func:`netrepro.runner.progress.queueing_delay_probe`)
    on its first pinging node, or None when no node pings."""
    nodes = sorted(tv.get("ping") or {})
    if not nodes:
        return None
    hv = inventory_hosts(inv).get(nodes[0])
    if hv is None:
        return None
    return queueing_delay_probe(lambda cmd: node_ssh_argv(nodes[0], hv, cmd, connect_timeout_s=5),
                                node_trial_dir(hv, tv["id"]))


def stop_trial(spec: Spec, inv: Path, site: Site, tv: dict) -> None:
    """Stop a trial's collectors and flows on every node after a failure or an interruption
    (best effort: says so on the console when it could not)."""
    try:
        playbook_path("stop-trial", inv, {"trial": tv}, site, quiet=True)
        log(f"[run] stopped trial {tv['id']}'s processes on the nodes")
    except Exception as exc:  # noqa: BLE001 - best effort while already failing
        log(f"[run] could not stop trial {tv['id']} on the nodes: {playbook_failure(exc)}")
