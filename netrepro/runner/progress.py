"""What a long run shows while it runs: trial k of N with its settings, the phase and its flow
count, a live queueing-delay median, the elapsed time and an estimate of the time left.

On a terminal this is a progress display of ``rich`` (rich.progress: a bar for the run, one
for the trial); otherwise (CI, a log file, ``make ... | tee``) plain lines, each with a UTC
time stamp, at each trial's start and end and each phase's end. Both are driven by
:class:`RunProgress`, which the controller calls; nothing here touches the run folder.

The live queueing delay is read by :func:`queueing_delay_probe` at most once a phase, at its
middle, and never within :data:`PROBE_MIN_INTERVAL_S` of the last reading: one ``tail`` of a
client's ping file over the SSH control connection the playbooks already hold, so that the
nodes' CPU (emulated, on the local site) is barely touched, and never at a phase's end, where
the next phase's flows start: its SSH session would reach the micro-VM with them. The line at
a phase's end shows the last reading. It is shown, never
recorded: the analysis reads the fetched raw files.
"""

from __future__ import annotations

import heapq
import re
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Callable

from netrepro.runner.schedule import hms

#: The least time between two live readings of the queueing delay (s): a full-length
#: pie-vs-red trial (50 s phases) is read 5 times, once a phase; at TIME_SCALE=0.1 (5 s
#: phases) every other phase shows the last reading instead of reading again.
PROBE_MIN_INTERVAL_S = 10.0

#: ping(8) with -D: ``[1795413918.924935] 64 bytes from 10.10.2.2: icmp_seq=1 ttl=63 time=105 ms``
_RTT = re.compile(r"time=([0-9.]+) ms")


def rtts_ms(text: str) -> list[float]:
    """The round-trip times (ms) of ping(8) output lines, in order; other lines are skipped."""
    return [float(m.group(1)) for m in _RTT.finditer(text)]


def queueing_delay_ms(recent: str, base: str | None) -> float | None:
    """Median queueing delay (ms) of the ping lines ``recent``: the median RTT minus the median
    RTT of ``base`` (the unloaded pings before the trial; netrepro's base_rtt.txt), or minus
    the least RTT of ``recent`` when there is no base. None without a sample."""
    r = rtts_ms(recent)
    if not r:
        return None
    b = rtts_ms(base or "")
    return round(statistics.median(r) - (statistics.median(b) if b else min(r)), 1)


def queueing_delay_probe(ssh_argv: Callable[[str], list[str]], trial_dir: str, samples: int = 50,
                         timeout_s: float = 10) -> Callable[[], float | None]:
    """A function that returns the live median queueing delay (ms) of the last ``samples``
    pings in ``<trial_dir>/ping.txt`` on a node, or None when it cannot be read in
    ``timeout_s``. ``ssh_argv(command)`` builds the ssh(1) argv that runs a command on the
    node (:func:`netrepro.runner.ssh.node_ssh_argv`). The base RTT file is read once."""
    base: dict[str, str | None] = {}

    def probe() -> float | None:
        if "text" not in base:
            base["text"] = _run(ssh_argv(f"cat {trial_dir}/base_rtt.txt 2>/dev/null || true"), timeout_s)
        return queueing_delay_ms(_run(ssh_argv(f"tail -n {int(samples)} {trial_dir}/ping.txt 2>/dev/null || true"),
                                      timeout_s) or "", base["text"])
    return probe


def _run(argv: list[str], timeout_s: float) -> str | None:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    return p.stdout if p.returncode == 0 else None


def stamp() -> str:
    """The UTC time of day, ``HH:MM:SSZ``."""
    return datetime.now(timezone.utc).strftime("%H:%M:%SZ")


def eta_s(per_s: float | None, remaining: int, running_elapsed_s: list[float] | tuple = (), jobs: int = 1) -> float | None:
    """Seconds until the last of ``remaining`` trial instances ends (the running ones among
    them), when each takes ``per_s`` seconds and ``jobs`` run at once.

    ``running_elapsed_s``: how long each running instance has run (s); each has
    ``max(0, per_s - elapsed)`` left. The instances are laid out as a run starts them: the
    running ones first, then each of the others on the first of the ``jobs`` slots to come
    free; the answer is when the last slot comes free. One at a time (``jobs`` 1) that is
    ``remaining * per_s`` less the running instance's elapsed time (0 at least); with
    ``jobs`` N it is at least ``remaining * per_s / min(N, remaining)`` less the time run,
    more when the instances do not divide evenly (5 of 100 s on 2 slots: 300 s, not 250).
    None when ``per_s`` is None (no estimate yet).
    """
    if per_s is None:
        return None
    slots = [0.0] * max(1, int(jobs))
    left = sorted((max(0.0, per_s - e) for e in running_elapsed_s), reverse=True)
    left += [float(per_s)] * max(0, int(remaining) - len(left))
    for x in left:
        heapq.heapreplace(slots, slots[0] + x)  # the slot that comes free first takes the next
    return max(slots)


@dataclass
class _Shown:
    """A trial instance the progress shows while it runs (:meth:`RunProgress.trial`): its
    number k in the run, phases, common start and probe, when it began (epoch s), the event
    that stops its follower thread, the thread, its bar on a terminal (a rich task id), and
    when its own work ended, if it waits to be recorded."""

    instance: str
    k: int
    phases: list[dict]
    start_epoch_s: Callable[[], float | None]
    probe: Callable[[], float | None] | None
    t0: float = field(default_factory=time.time)
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    task: Any = None
    #: its own work ended (epoch s); it waits to be recorded (:meth:`RunProgress.waiting`)
    waiting_since: float | None = None
    #: where it runs, shown with it: a campaign's reservation (``static #2``), or ""
    where: str = ""
    #: its last live queueing-delay reading (ms) and when it was read (time.monotonic)
    delay_ms: float | None = None
    probed_at: float = -float("inf")


class RunProgress:
    """The progress of a run of ``total`` trial instances, ``jobs`` of them at once (several on
    a site that simulates its trials, or one per reservation of a campaign on several:
    each trial is shown with where it runs, its own bar and queueing delay).

    ``estimate_s``: the expected wall time of one trial instance (schedule plus overhead), for
    the ETA before any trial has ended; afterwards the mean of the finished ones is used
    (:func:`eta_s` lays them out on ``jobs`` slots).
    ``tty``: rich's live display (default: when stdout is a terminal): a bar for the run and
    one for each running trial; else plain lines, one when each trial starts and ends and one
    at each of its phases' ends.
    ``out``: where the plain lines go (default sys.stdout).

    :meth:`trial` and :meth:`end` are called from one thread (the runner's main thread).
    """

    def __init__(self, total: int, done: int = 0, estimate_s: float | None = None, tty: bool | None = None,
                 out=None, jobs: int = 1):
        self.total, self.done, self.estimate_s = total, done, estimate_s
        self.jobs = max(1, int(jobs))
        self.out = out or sys.stdout
        self.tty = self.out.isatty() if tty is None else tty
        self.t0 = time.time()
        self.walls: list[float] = []
        self._shown: dict[str, _Shown] = {}
        self._lock = threading.Lock()
        self._live = None
        self._run_task = None

    # --- plain lines -------------------------------------------------------------------------
    def line(self, text: str) -> None:
        """One timestamped line (printed above the live display on a terminal), in one write:
        the trials' follower threads print too."""
        msg = f"[{stamp()}] {text}"
        live = self._live
        if live is not None:
            live.console.print(msg, markup=False, highlight=False)
        else:
            self.out.write(msg + "\n")
            self.out.flush()

    def eta_s(self) -> float | None:
        """Seconds left for the whole run (:func:`eta_s`): the instances not done, each
        taking the mean wall time of the finished ones (else ``estimate_s``), ``jobs`` at
        once, the running ones less the time they have run. None without an estimate."""
        per = (sum(self.walls) / len(self.walls)) if self.walls else self.estimate_s
        now = time.time()
        with self._lock:  # one waiting to be recorded has nothing left
            running = [now - s.t0 if s.waiting_since is None else float("inf") for s in self._shown.values()]
        return eta_s(per, self.total - self.done, running, self.jobs)

    def _times(self) -> str:
        eta = self.eta_s()
        return f"elapsed {hms(time.time() - self.t0)}" + (f", ETA {hms(eta)}" if eta is not None else "")

    # --- a trial -----------------------------------------------------------------------------
    def trial(self, instance: str, settings: str, phases: list[dict], start_epoch_s: Callable[[], float | None],
              probe: Callable[[], float | None] | None = None, where: str = "") -> "RunProgress":
        """Begin showing trial ``instance`` (k = done + running + 1 of total) with ``settings``
        (one phrase); ``phases``: ``[{name, start_s, end_s, flows}]`` (s from the trial's
        start, as run); ``start_epoch_s()``: the common start once the barrier has released
        it (a simulated trial: once simulated), else None; ``probe()``: the live queueing
        delay (ms), or None; ``where``: the reservation it runs on, shown with it (a campaign
        on several), or "". Ends with :meth:`end`; several may be shown at once."""
        with self._lock:
            k = self.done + len(self._shown) + 1
            running = sum(s.waiting_since is None for s in self._shown.values()) + 1
        self.line(f"trial {k} of {self.total}: {instance}" + (f" on {where}" if where else "")
                  + f" ({settings}); {self._times()}" + (f"; {running} running" if self.jobs > 1 else ""))
        s = _Shown(instance, k, phases, start_epoch_s, probe, where=where)
        s.thread = threading.Thread(target=self._follow, args=(s,), name=f"progress {instance}", daemon=True)
        with self._lock:
            self._shown[instance] = s
        if self.tty:
            self._start_live(s)
        s.thread.start()
        return self

    def waiting(self, instance: str) -> None:
        """Trial ``instance``'s own work has ended (a simulation, several at once) and it waits
        to be recorded in the run's order: it is no longer counted as running, and has no time
        left in the ETA. No line is printed; :meth:`end` follows."""
        with self._lock:
            s = self._shown.get(instance)
            if s is not None and s.waiting_since is None:
                s.waiting_since = time.time()

    def end(self, instance: str, ok: bool, what: str = "", wall_s: float | None = None) -> None:
        """Trial ``instance`` ended (``ok``: complete); ``what``: a short account; ``wall_s``:
        its own wall time (s) when it is not the time since :meth:`trial` (a simulated trial
        that waited to be recorded in the run's order)."""
        with self._lock:
            s = self._shown.pop(instance, None)
        if s is not None:
            s.stop.set()
            if s.thread is not None:
                s.thread.join(15)
        self._stop_live(s)
        wall = wall_s if wall_s is not None else time.time() - (s.t0 if s is not None else time.time())
        if ok:
            self.done += 1
            self.walls.append(wall)
        self.line(f"trial {instance} {'complete' if ok else 'FAILED'} in {hms(wall)}"
                  + (f": {what}" if what else "") + f"; {self.done} of {self.total} done, {self._times()}")

    def _follow(self, s: _Shown) -> None:
        """Wait for each phase's middle and end; probe the delay at the middle; print or update."""
        marks = []
        for i, ph in enumerate(s.phases):
            marks.append((float(ph["start_s"]) + (float(ph["end_s"]) - float(ph["start_s"])) / 2, i, False))
            marks.append((float(ph["end_s"]), i, True))
        for at, i, is_end in marks:
            while not s.stop.is_set():
                start = s.start_epoch_s()
                now = time.time()
                if start is not None and now >= start + at:
                    break
                if self._live is not None:
                    self._update_live(s, start, now)
                s.stop.wait(1.0)
            if s.stop.is_set():
                return
            ph = s.phases[i]
            if s.probe and not is_end and time.monotonic() - s.probed_at >= PROBE_MIN_INTERVAL_S:
                s.probed_at = time.monotonic()
                s.delay_ms = s.probe()
            delay = "n/a" if s.delay_ms is None else f"{s.delay_ms:g} ms"
            if is_end and not self.tty:
                flows = f", {ph['flows']} flows" if "flows" in ph else ""
                self.line(f"trial {s.k} of {self.total} {s.instance}" + (f" on {s.where}" if s.where else "")
                          + f": phase {ph['name']} ({i + 1} of {len(s.phases)}"
                          f"{flows}) ended; queueing delay median {delay} (last pings); {self._times()}")

    # --- rich (terminal only) ----------------------------------------------------------------
    def _start_live(self, s: _Shown) -> None:
        """Add ``s``'s bar to the live display, started with the run's bar when none is shown."""
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
        with self._lock:
            if self._live is None:
                live = Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                                TextColumn("{task.fields[info]}"), transient=True)
                self._run_task = live.add_task(f"run {s.k}/{self.total}", total=self.total, completed=self.done,
                                               info="")
                live.start()
                self._live = live
            else:
                self._live.update(self._run_task, description=f"run {s.k}/{self.total}")
            s.task = self._live.add_task(s.instance + (f" on {s.where}" if s.where else ""), total=float(s.phases[-1]["end_s"]) if s.phases else 1,
                                         info="arming")
        self._live.update(self._run_task, info=self._times())

    def _update_live(self, s: _Shown, start: float | None, now: float) -> None:
        live = self._live
        if live is None or s.task is None:
            return
        if s.waiting_since is not None:
            live.update(s.task, info="done; waiting to be recorded in the run's order")
            return
        if start is None or now < start:
            live.update(s.task, info="waiting for the common start")
            return
        t = now - start
        ph = next((p for p in s.phases if p["start_s"] <= t < p["end_s"]), s.phases[-1])
        delay = "n/a" if s.delay_ms is None else f"{s.delay_ms:g} ms"
        flows = f" ({ph['flows']} flows)" if "flows" in ph else ""
        live.update(s.task, completed=min(t, s.phases[-1]["end_s"]),
                    info=f"phase {ph['name']}{flows}, queueing delay {delay}")
        live.update(self._run_task, info=self._times())

    def _stop_live(self, s: _Shown | None) -> None:
        """Remove ``s``'s bar; stop the live display when no trial is shown."""
        with self._lock:
            live = self._live
            if live is None:
                return
            if s is not None and s.task is not None:
                live.remove_task(s.task)
            if self._shown:
                return
            self._live = None
        live.stop()
