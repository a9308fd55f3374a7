"""The CPU readings of a run folder, for the runner that records them
(:mod:`netrepro.runner.trial`) and the analysis that reads them
(:mod:`analysis.substrate.machines`): the CPU readings recorded with a trial (``cpu_ticks``: the numbers of /proc/stat's ``cpu`` line,
proc(5)), this machine's (:func:`host_cpu_ticks`) and the share of busy time between two
(:func:`cpu_busy`).
"""

from __future__ import annotations

from pathlib import Path


def host_cpu_ticks(path: str | Path = "/proc/stat") -> str | None:
    """This machine's cumulative CPU ticks: the numbers of the ``cpu`` line of /proc/stat
    (proc(5): user nice system idle iowait irq softirq steal guest guest_nice), as text in
    the format of the nodes' ``cpu_ticks`` (roles/collectors/files/nr-meta.sh), so that
    :func:`cpu_busy` takes two of them. None when it cannot be read."""
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("cpu "):
                    return " ".join(line.split()[1:])
    except OSError:
        return None
    return None


def cpu_busy(before: dict, after: dict) -> float | None:
    """Share of CPU time (0..1) not idle between two node snapshots (``cpu_ticks``: the
    ``cpu`` line of /proc/stat, proc(5): user nice system idle iowait irq softirq steal ...)."""
    try:
        a = [int(x) for x in before["cpu_ticks"].split()]
        b = [int(x) for x in after["cpu_ticks"].split()]
    except (KeyError, ValueError, AttributeError):
        return None
    d = [y - x for x, y in zip(a, b)]
    total = sum(d[:8])
    idle = d[3] + (d[4] if len(d) > 4 else 0)
    return round(1 - idle / total, 3) if total > 0 else None
