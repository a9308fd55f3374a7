"""The health checks of the machines' CPU and load: the nodes' machines over the trial's
schedule (``nodes_cpu_busy``) and the controller machine's (``controller_load``,
``controller_cpu_busy``); analysis/health.py describes and judges them."""

from __future__ import annotations

import json
import math
from pathlib import Path

from analysis.substrate.inputs import NotMeasured, Unmeasurable, number, percent
from netrepro.runfolder.cpu import cpu_busy
from netrepro.runfolder.record import TrialRecord


def _cpu_window(path: Path) -> tuple[dict, dict] | None:
    """The node's ``cpu-window.txt`` (roles/collectors/files/nr-window.sh: ``start TICKS`` and
    ``end TICKS``, the cpu line of /proc/stat at the schedule's start and end) as two
    snapshots for :func:`netrepro.runfolder.cpu.cpu_busy`, or None without a readable one."""
    try:
        lines = dict(ln.split(" ", 1) for ln in path.read_bytes().decode("utf-8", "replace").splitlines() if " " in ln)
    except OSError:
        return None
    if not {"start", "end"} <= set(lines):
        return None
    return {"cpu_ticks": lines["start"]}, {"cpu_ticks": lines["end"]}


def nodes_cpu_busy(spec, record: dict, trial_dir: Path, **_) -> tuple[float, str]:
    """``nodes_cpu_busy``: per node, the share of its machine's CPU time not idle over the
    trial's schedule (cpu-window.txt), else from the release (run.json ``barrier.cpu_ticks``)
    or meta-before.json to meta-after.json; the busiest node's (fraction) and a detail naming
    it, the snapshots read and the nodes without any. Raises NotMeasured when no node has two."""
    barrier = record.get("barrier") if isinstance(record.get("barrier"), dict) else {}
    released = barrier.get("cpu_ticks") if isinstance(barrier.get("cpu_ticks"), dict) else {}
    busy, missing, from_release, scheduled = {}, [], 0, 0
    for node in spec.nodes:
        window = _cpu_window(trial_dir / node / "cpu-window.txt")
        b = cpu_busy(*window) if window is not None else None
        if b is not None:
            busy[node] = b
            scheduled += 1
            continue
        metas = []
        for which in ("before", "after"):
            if which == "before" and isinstance(released.get(node), str):
                metas.append({"cpu_ticks": released[node]})
                from_release += 1
                continue
            try:
                m = json.loads((trial_dir / node / f"meta-{which}.json").read_bytes().decode("utf-8", "replace"))
            except (OSError, ValueError):
                m = None
            metas.append(m if isinstance(m, dict) else None)
        b = cpu_busy(*metas) if None not in metas else None
        if b is None:
            missing.append(node)
        else:
            busy[node] = b
    if not busy:
        raise NotMeasured("no node has two readable /proc/stat snapshots (cpu-window.txt, or cpu_ticks in "
                          "meta-before.json and meta-after.json)")
    top = max(busy, key=busy.get)  # the first in node order among equals
    others = len(busy) - scheduled
    since = ("the release" if from_release >= others else "meta-before.json" if not from_release
             else f"the release ({from_release} nodes) or meta-before.json") + " to meta-after.json"
    how = ("over the schedule (cpu-window.txt)" if not others else f"from {since}" if not scheduled
           else f"over the schedule ({scheduled} nodes) or from {since}")
    detail = f"busiest {top} {percent(busy[top])} of {len(busy)} nodes' machines, {how}"
    if missing:
        detail += f"; no snapshots from {', '.join(missing)}"
    return busy[top], detail


#: The time constant of the kernel's 1-minute load average, s: it decays by e^(-5/60) every
#: 5-s tick (kernel/sched/loadavg.c, EXP_1 = 1884 / 2048; proc(5)). A trial whose schedule is
#: shorter makes less than 1 - 1/e (63 %) of the average read after it: the rest is the minute
#: before, so ``controller_load`` does not measure it.
LOAD_AVERAGE_TAU_S = 60.0


def controller_load(spec, record, **_) -> tuple[float, str]:
    """``controller_load``: the larger 1-minute load average of the controller machine before
    and after the trial (run.json ``controller_loadavg``) per core (``controller_cores``).
    Raises Unmeasurable for a schedule shorter than :data:`LOAD_AVERAGE_TAU_S`, NotMeasured
    without the fields."""
    duration = number(record.get("duration_s"))
    if duration is not None and duration < LOAD_AVERAGE_TAU_S:
        raise Unmeasurable(f"the {duration:g}-s schedule is shorter than the 1-minute load average's "
                           f"{LOAD_AVERAGE_TAU_S:g}-s time constant: the average read after it is "
                           f"{math.exp(-duration / LOAD_AVERAGE_TAU_S):.0%} the minute before "
                           "(controller_cpu_busy measures the trial itself)")
    rec = TrialRecord.from_json(record)
    la, cores = rec.controller_loadavg, rec.controller_cores
    try:
        one = [float(la[k][0]) for k in ("before", "after")]
    except (TypeError, KeyError, IndexError, ValueError):
        raise NotMeasured("run.json has no controller_loadavg before and after the trial") from None
    if not cores or cores < 1:
        raise NotMeasured("run.json has no controller_cores")
    return max(one) / cores, f"1-min load average {one[0]:g} before, {one[1]:g} after, on {cores:g} cores"


def controller_cpu_busy(spec, record, **_) -> tuple[float, str]:
    """``controller_cpu_busy``: run.json's ``controller_cpu_busy`` (fraction); raises
    NotMeasured without it."""
    busy = TrialRecord.from_json(record).controller_cpu_busy
    if busy is None:
        raise NotMeasured("run.json has no controller_cpu_busy")
    return busy, "the controller machine's /proc/stat before and after the trial"
