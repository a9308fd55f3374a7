"""The order a run's trials are run in: repetitions, shuffling, and the wall-time estimate.

A run repeats each of its trials ``repeat`` times. Each repetition is a block that holds every
trial once; with ``shuffle`` the trials of each block are put in a random order drawn from a
seeded generator, so that a trend of the substrate over the run (a neighbour's load, a clock,
a warming machine) is spread over the trials instead of landing on the last ones. This is
a randomized complete block design (R. A. Fisher, *The Design of Experiments*, 1935, ch. IV);
Flent's batch mode likewise shuffles its runs by default (flent(1), ``repetitions`` and
``shuffle``). The seed is recorded in run.json, so the order can be drawn again.

A trial run more than once is a *trial instance* with its own id and raw folder:
``<trial>.r<k>`` (k from 1); a run of one repetition keeps the plain trial ids. In a sweep
(:mod:`netrepro.experiment.sweep`) a trial runs at several points, as ``<trial>.p<i>`` (and
``<trial>.p<i>.r<k>``); a block then holds every (trial, point) cell once.
"""

from __future__ import annotations

import random
import secrets
from dataclasses import dataclass

#: The largest ``--repeat``: a run of 4 trials x 100 repetitions of pie-vs-red is 33 hours.
REPEAT_MAX = 100


@dataclass(frozen=True)
class Instance:
    """One trial instance of a run: ``id`` (raw folder name), ``trial`` (the experiment's
    trial id), ``repetition`` (1..repeat) and ``point`` (a sweep's point id, else None)."""

    id: str
    trial: str
    repetition: int
    point: str | None = None

    def as_dict(self) -> dict:
        return {"id": self.id, "trial": self.trial, "repetition": self.repetition,
                **({"point": self.point} if self.point else {})}


def instance_id(trial: str, repetition: int, repeat: int, point: str | None = None) -> str:
    """``trial``, ``<trial>.p<i>`` at a sweep's point, each + ``.r<repetition>`` when the run
    has more than one repetition."""
    base = f"{trial}.{point}" if point else trial
    return base if repeat == 1 else f"{base}.r{repetition}"


def new_seed() -> int:
    """A fresh 32-bit seed for the shuffle (from the OS's random source, secrets(3))."""
    return secrets.randbits(32)


def plan(trial_ids: list[str] | list[tuple[str, str]], repeat: int = 1, shuffle: bool = True,
         seed: int | None = None) -> list[Instance]:
    """The trial instances of a run, in the order they run.

    Args:
        trial_ids: the trials, in the experiment file's order; or, in a sweep, the
            (trial, point id) cells (:func:`netrepro.experiment.sweep.cells`).
        repeat: repetitions (blocks), 1..:data:`REPEAT_MAX`.
        shuffle: shuffle each block (only when ``repeat`` > 1 or in a sweep: one repetition
            of the file's trials keeps the file's order, as runs made before repetitions existed).
        seed: the generator's seed (Python's Mersenne Twister, ``random.Random(seed)``); with
            shuffling and no seed, the order is not reproducible, so callers pass one
            (:func:`new_seed`) and record it.
    Raises:
        ValueError: ``repeat`` out of range, or no trial. (Instance ids never clash: the
            suffix ``.r<k>`` is read from the end, so a trial ``x.r1`` is ``x.r1.r1``.)
    """
    if not isinstance(repeat, int) or isinstance(repeat, bool) or not 1 <= repeat <= REPEAT_MAX:
        raise ValueError(f"REPEAT: {repeat!r}: expected a whole number of repetitions from 1 to {REPEAT_MAX}")
    if not trial_ids:
        raise ValueError("no trial to run")
    rng = random.Random(seed)
    cells = [c if isinstance(c, tuple) else (c, None) for c in trial_ids]
    out = []
    for k in range(1, repeat + 1):
        block = list(cells)
        if shuffle and (repeat > 1 or cells[0][1] is not None):
            rng.shuffle(block)
        out += [Instance(instance_id(t, k, repeat, p), t, k, p) for t, p in block]
    return out


def overhead_s(records: list[dict]) -> float | None:
    """The median time a trial took beyond its schedule (s): from run.json trial records
    (``wall_s`` - ``duration_s``), None without any."""
    extra = sorted(float(r["wall_s"]) - float(r["duration_s"]) for r in records
                   if isinstance(r, dict) and isinstance(r.get("wall_s"), (int, float))
                   and isinstance(r.get("duration_s"), (int, float)))
    if not extra:
        return None
    n = len(extra)
    return extra[n // 2] if n % 2 else (extra[n // 2 - 1] + extra[n // 2]) / 2


def hms(seconds: float) -> str:
    """``h:mm:ss`` of a duration in seconds (negative durations read as 0)."""
    s = max(0, int(round(seconds)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
