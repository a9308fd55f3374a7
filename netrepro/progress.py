"""What a long run shows while it runs: trial k of N with its settings, the phase and its flow
count, a live queueing-delay median, the elapsed time and an estimate of the time left.

On a terminal this is a progress display of ``rich`` (rich.progress: a bar for the run, one
for the trial); otherwise (CI, a log file, ``make ... | tee``) plain lines, each with a UTC
time stamp, at each trial's start and end and each phase's end. Both are driven by
:class:`RunProgress`, which the controller calls; nothing here touches the run folder.

The live queueing delay is read by :func:`queueing_delay_probe` at most twice a phase (its
middle and end) and never within :data:`PROBE_MIN_INTERVAL_S` of the last reading: one
``tail`` of a client's ping file over the SSH control connection the playbooks already hold,
so that the nodes' CPU (emulated, on the local site) is barely touched. It is shown, never
recorded: the analysis reads the fetched raw files.
"""

from __future__ import annotations

import re
import statistics
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from typing import Callable

from netrepro.schedule import hms

#: The least time between two live readings of the queueing delay (s): a full-length
#: pie-vs-red trial (50 s phases) is read 10 times; at TIME_SCALE=0.1 (5 s phases) every
#: other phase end shows the last reading instead of reading again.
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


class RunProgress:
    """The progress of a run of ``total`` trial instances.

    ``estimate_s``: the expected wall time of one trial instance (schedule plus overhead), for
    the ETA before any trial has ended; afterwards the mean of the finished ones is used.
    ``tty``: rich's live display (default: when stdout is a terminal), else plain lines.
    ``out``: where the plain lines go (default sys.stdout).
    """

    def __init__(self, total: int, done: int = 0, estimate_s: float | None = None, tty: bool | None = None,
                 out=None):
        self.total, self.done, self.estimate_s = total, done, estimate_s
        self.out = out or sys.stdout
        self.tty = self.out.isatty() if tty is None else tty
        self.t0 = time.time()
        self.walls: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live = None
        self.last_delay_ms: float | None = None
        self._probed_at = -float("inf")

    # --- plain lines -------------------------------------------------------------------------
    def line(self, text: str) -> None:
        """One timestamped line (printed above the live display on a terminal)."""
        msg = f"[{stamp()}] {text}"
        if self._live is not None:
            self._live.console.print(msg, markup=False, highlight=False)
        else:
            print(msg, file=self.out, flush=True)

    def eta_s(self, trial_elapsed_s: float = 0.0) -> float | None:
        """Seconds left for the whole run: the remaining instances times the mean wall time
        of the finished ones (else ``estimate_s``), less the running trial's elapsed time."""
        per = (sum(self.walls) / len(self.walls)) if self.walls else self.estimate_s
        if per is None:
            return None
        return max(0.0, (self.total - self.done) * per - trial_elapsed_s)

    def _times(self, trial_elapsed_s: float = 0.0) -> str:
        eta = self.eta_s(trial_elapsed_s)
        return f"elapsed {hms(time.time() - self.t0)}" + (f", ETA {hms(eta)}" if eta is not None else "")

    # --- a trial -----------------------------------------------------------------------------
    def trial(self, instance: str, settings: str, phases: list[dict], start_epoch_s: Callable[[], float | None],
              probe: Callable[[], float | None] | None = None) -> "RunProgress":
        """Begin showing trial ``instance`` (k = done + 1 of total) with ``settings`` (one
        phrase); ``phases``: ``[{name, start_s, end_s, flows}]`` (s from the trial's start, as
        run); ``start_epoch_s()``: the common start once the barrier has released it, else
        None; ``probe()``: the live queueing delay (ms), or None. Ends with :meth:`end`."""
        k = self.done + 1
        self.line(f"trial {k} of {self.total}: {instance} ({settings}); {self._times()}")
        self._stop.clear()
        self._t_trial = time.time()
        self._thread = threading.Thread(target=self._follow, args=(instance, k, phases, start_epoch_s, probe),
                                        name="progress", daemon=True)
        if self.tty:
            self._start_live(instance, k, phases)
        self._thread.start()
        return self

    def end(self, instance: str, ok: bool, what: str = "") -> None:
        """The trial ended (``ok``: complete); ``what``: a short account."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(15)
        self._stop_live()
        wall = time.time() - self._t_trial
        if ok:
            self.done += 1
            self.walls.append(wall)
        self.line(f"trial {instance} {'complete' if ok else 'FAILED'} in {hms(wall)}"
                  + (f": {what}" if what else "") + f"; {self.done} of {self.total} done, {self._times()}")

    def _follow(self, instance: str, k: int, phases: list[dict], start_epoch_s, probe) -> None:
        """Wait for each phase's middle and end; probe the delay there; print or update."""
        marks = []
        for i, ph in enumerate(phases):
            marks.append((float(ph["start_s"]) + (float(ph["end_s"]) - float(ph["start_s"])) / 2, i, False))
            marks.append((float(ph["end_s"]), i, True))
        for at, i, is_end in marks:
            while not self._stop.is_set():
                start = start_epoch_s()
                now = time.time()
                if start is not None and now >= start + at:
                    break
                if self._live is not None:
                    self._update_live(k, phases, start, now)
                self._stop.wait(1.0)
            if self._stop.is_set():
                return
            ph = phases[i]
            if probe and time.monotonic() - self._probed_at >= PROBE_MIN_INTERVAL_S:
                self._probed_at = time.monotonic()
                self.last_delay_ms = probe()
            delay = "n/a" if self.last_delay_ms is None else f"{self.last_delay_ms:g} ms"
            if is_end and not self.tty:
                self.line(f"trial {k} of {self.total} {instance}: phase {ph['name']} ({i + 1} of {len(phases)}, "
                          f"{ph.get('flows', '?')} flows) ended; queueing delay median {delay} (last pings); "
                          f"{self._times(time.time() - self._t_trial)}")

    # --- rich (terminal only) ----------------------------------------------------------------
    def _start_live(self, instance: str, k: int, phases: list[dict]) -> None:
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn
        self._live = Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(),
                              TextColumn("{task.fields[info]}"), transient=True)
        self._run_task = self._live.add_task(f"run {k}/{self.total}", total=self.total, completed=self.done,
                                             info=self._times())
        self._trial_task = self._live.add_task(instance, total=float(phases[-1]["end_s"]) if phases else 1, info="arming")
        self._live.start()

    def _update_live(self, k: int, phases: list[dict], start: float | None, now: float) -> None:
        if start is None or now < start:
            self._live.update(self._trial_task, info="waiting for the common start")
            return
        t = now - start
        ph = next((p for p in phases if p["start_s"] <= t < p["end_s"]), phases[-1])
        delay = "n/a" if self.last_delay_ms is None else f"{self.last_delay_ms:g} ms"
        self._live.update(self._trial_task, completed=min(t, phases[-1]["end_s"]),
                          info=f"phase {ph['name']} ({ph.get('flows', '?')} flows), queueing delay {delay}")
        self._live.update(self._run_task, info=self._times(time.time() - self._t_trial))

    def _stop_live(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None
