"""The synchronized start of a trial (the barrier): every armed collector and flow group on
every node is released at one common start time, chosen ahead of the slowest node's round
trip (:func:`release_trial`)."""

from __future__ import annotations

import math
import os
import shlex
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from netrepro.runfolder.reading import LEAD_S_MAX, LEAD_S_MIN
from netrepro.runner.checks import node_clocks
from netrepro.runner.ssh import inventory_hosts, node_ssh_argv, node_trial_dir


#: The barrier's rules (release_trial): the start is at least the run's
#: lead (default LEAD_MIN_S; NETREPRO_LEAD_S) ahead and at least LEAD_ROUNDS times the
#: slowest node's measured round trip; every node must acknowledge its release GUARD_S before
#: the start, else the trial is aborted. 2 s: with 1 s, on the micro-VM under TCG, two clients
#: once acknowledged 0.13-0.18 s before the start (each FIFO's write then forked two
#: processes, and the released collectors wake up at once); the least margins seen at
#: 1.2-1.7 s were 0.4-0.9 s.
BARRIER_LEAD_MIN_S = 2.0
BARRIER_LEAD_ROUNDS = 4.0
#: GUARD_S, 0.2 s, is also the least lead a run accepts; it is defined where run.json is read back
#: (netrepro.runfolder.reading.LEAD_S_MIN), so that a recorded lead_s is checked against the same range.
BARRIER_GUARD_S = LEAD_S_MIN


def lead_from_env() -> float:
    """The barrier's least lead, seconds: ``$NETREPRO_LEAD_S`` when set and non-empty, else
    :data:`BARRIER_LEAD_MIN_S`.

    Raises:
        ValueError: one line naming NETREPRO_LEAD_S when it is not a number of seconds from
            :data:`BARRIER_GUARD_S` (the least margin a node may acknowledge with) to 3600
            (:data:`netrepro.runfolder.reading.LEAD_S_MIN`, ``LEAD_S_MAX``: the range run.json's
            ``lead_s`` is read back in).
    """
    raw = os.environ.get("NETREPRO_LEAD_S", "")
    if not raw.strip():
        return BARRIER_LEAD_MIN_S
    try:
        lead = float(raw)
    except ValueError:
        lead = math.nan
    if not LEAD_S_MIN <= lead <= LEAD_S_MAX:
        raise ValueError(f"NETREPRO_LEAD_S: {raw!r}: expected the barrier's lead in seconds, "
                         f"from {LEAD_S_MIN:g} to {LEAD_S_MAX:g}")
    return lead


class BarrierLate(RuntimeError):
    """A node acknowledged the release too late (or not at all): the trial cannot start on time."""


def release_command(trial_dir: str, start: float, timeout_s: float = 5) -> str:
    """The shell command that releases a node's armed processes: the start (epoch seconds,
    six decimals) written into each FIFO ``*.go`` of ``trial_dir``, each named (``at:NAME``)
    before its write. One timeout(1) and one sh for all of them: a FIFO whose reader is gone
    blocks its write, and the whole release then ends after ``timeout_s`` with ``stuck``
    (:func:`unreleased` names it). A timeout and a shell per FIFO, as before, made 28
    processes at each release of pie-vs-red (14 FIFOs) on the micro-VM's shared CPUs, which
    delayed every node's acknowledgement: least margin 0.6-0.9 s, against 1.3-2.1 s with the
    7 FIFOs it had before each node's CPU window reader was armed (2026-11-26)."""
    return (f"timeout {timeout_s:g} sh -c 's=$1; shift; for f; do [ -p \"$f\" ] || continue; "
            f"echo \"at:${{f##*/}}\"; echo \"$s\" > \"$f\"; done' _ {start:.6f} "
            f"{shlex.quote(trial_dir)}/*.go || echo stuck")


def unreleased(out: str) -> list[str]:
    """The FIFO a release (:func:`release_command`) could not write, from its output: the last
    named before ``stuck``; [] when it released them all."""
    words = out.split()
    if "stuck" not in words:
        return []
    named = [w.removeprefix("at:") for w in words[:words.index("stuck")] if w.startswith("at:")]
    return named[-1:] or ["its FIFOs"]


def release_trial(inv: Path, hosts: list[str], trial_id: str, bottleneck: str | None = None,
                  timeout_s: float = 30, lead_min_s: float = BARRIER_LEAD_MIN_S) -> dict[str, Any]:
    """Release every armed collector and flow group of a trial at one common start time.

    playbooks/trial.yml arms them: each waits, without CPU, on a FIFO ``*.go`` in the node's
    trial folder (``<netrepro_node_dir>/trials/<trial_id>``); the playbook's success is every
    node's acknowledgement that it is armed. Then, in parallel over the nodes' SSH control
    connections:

    1. each node's round trip and clock are read (:func:`node_clocks`, one sample); the start
       is chosen on the bottleneck node's clock (the controller's clock plus its offset),
       ``lead`` ahead: max(``lead_min_s``, :data:`BARRIER_LEAD_ROUNDS` x the slowest round
       trip), so that a slow node lengthens the lead;
    2. the start time is written into every FIFO; each node answers with its clock once done.

    Returns ``{"start_epoch_s", "start_here_s" (the start on this machine's clock), "lead_s",
    "round_trip_s": {host: s}, "ack_margin_s": {host: s},
    "cpu_ticks": {host: str}, "clocks": {host: {"offset_s", "rtt_s"}}}`` (clocks: step 1's
    readings, the start of the window in which a stepped clock is detected,
    :func:`clock_problems`; margin: start minus the node's acknowledgement, on its clock;
    cpu_ticks: the ``cpu`` line of the node's /proc/stat when it acknowledged, as
    roles/collectors/files/nr-meta.sh records it: the start of the window in which the health
    checks measure how busy the nodes' machine was, :mod:`analysis.health`). Raises BarrierLate
    naming each node that answered less than :data:`BARRIER_GUARD_S` before the start, or not
    at all.
    """
    hv = inventory_hosts(inv)
    probe = node_clocks(inv, samples=1, timeout_s=timeout_s, only=hosts)
    dead = [h for h, c in probe.items() if "offset_s" not in c]
    if dead:
        raise BarrierLate(f"no answer from {', '.join(dead)} before the release")
    rounds = {h: round(c["rtt_s"], 3) for h, c in probe.items()}
    offset = probe[bottleneck if bottleneck in probe else hosts[0]]["offset_s"]
    lead = max(lead_min_s, BARRIER_LEAD_ROUNDS * max(rounds.values()))
    start = round(time.time() + offset + lead, 6)

    def go(host: str) -> str | None:
        cmd = (release_command(node_trial_dir(hv[host], trial_id), start) + '; echo; '
               'read -r c < /proc/stat; echo "@$c"; date +%s.%N')
        try:
            p = subprocess.run(node_ssh_argv(host, hv[host], cmd, as_root=True), capture_output=True, text=True,
                               timeout=timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            return None
        return p.stdout if p.returncode == 0 and p.stdout.split() else None

    with ThreadPoolExecutor(max_workers=max(1, len(hosts))) as pool:
        acks = dict(zip(hosts, pool.map(go, hosts), strict=True))
    margins, ticks, late = {}, {}, []
    for h, out in acks.items():
        if out is None:
            late.append(f"{h} did not acknowledge")
            continue
        stuck = unreleased(out)
        if stuck:
            late.append(f"{h} could not release {', '.join(stuck)} (its process is gone)")
            continue
        ticks[h] = next((ln.split(None, 1)[1].strip() for ln in out.splitlines()
                         if ln.startswith("@cpu ") and len(ln.split()) > 1), None)
        margins[h] = round(start - float(out.split()[-1]), 3)
        if margins[h] < BARRIER_GUARD_S:
            late.append(f"{h} acknowledged {margins[h]:+.3f} s before the start (needs {BARRIER_GUARD_S} s)")
    if late:
        raise BarrierLate(f"barrier of trial {trial_id}, lead {lead:.2f} s: " + "; ".join(late))
    return {"start_epoch_s": start, "start_here_s": start - offset, "lead_s": round(lead, 3), "round_trip_s": rounds, "ack_margin_s": margins,
            "cpu_ticks": ticks, "clocks": probe}
