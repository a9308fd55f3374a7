"""What every measurement of a health check (:mod:`analysis.health`) shares: its raw files
read, the record's trial in the model and its traffic items, the trial's phases, and the
exceptions that say why a check was not measured."""

from __future__ import annotations

import math
from pathlib import Path

from netrepro.model import TrafficItem, Trial


class NotMeasured(Exception):
    """A measurement whose inputs are missing; ``str()`` says which."""


class NotApplicable(Exception):
    """A check with nothing to measure in this trial (no item of its kind): not judged."""


class Unmeasurable(Exception):
    """A check this experiment's design gives nothing to measure (no two items starting
    together, no base RTT, no shaped buffer on a ping's path): reported "not measured",
    never judged, so that it never passes for what it did not measure."""


def raw_text(path: Path) -> str:
    """The text of a raw file (undecodable bytes replaced); raises NotMeasured naming the
    file (``<node>/<name>``) when it is missing or unreadable."""
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise NotMeasured(f"{path.parent.name}/{path.name} missing") from None
    except OSError as exc:
        raise NotMeasured(f"{path.parent.name}/{path.name} unreadable ({exc.strerror})") from None


def number(x) -> float | None:
    """``x`` as a float when it is a finite int or float (not a bool), else None."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def percent(x: float) -> str:
    """A fraction as a percentage with one decimal: ``0.4567`` -> ``45.7%``."""
    return f"{x:.1%}"


def model_trial(spec, record: dict, trial_dir: Path) -> Trial:
    """The model's trial of a trial record: its ``trial`` (a repeated run's instance
    ``<trial>.r<k>``, netrepro.runner.schedule), else the raw folder's name (``raw/<trial id>``)."""
    tid = record.get("trial") or trial_dir.name
    for t in spec.model.trials:
        if t.id == tid:
            return t
    raise NotMeasured(f"no trial {tid!r} in the experiment")


def trial_items(spec, record, trial_dir, kinds: tuple[str, ...]) -> list[TrafficItem]:
    """The traffic items of the record's model trial (:func:`model_trial`) whose kind is one
    of ``kinds``, in the trial's order; raises NotApplicable when there is none."""
    items = model_trial(spec, record, trial_dir).items(*kinds)
    if not items:
        raise NotApplicable(f"no {' or '.join(kinds)} item in the trial")
    return items


def phase_windows(spec, record, duration, time_scale) -> list[tuple[str, float, float]]:
    """(name, start s, end s) of the trial's phases (run.json's, else the file's at
    ``time_scale``), or the whole schedule as ``all`` without phases."""
    phases = record.get("phases") if isinstance(record.get("phases"), list) else None
    if not phases:
        phases = [p.scaled(time_scale) for p in spec.model.phases]
    return [(p["name"], p["start_s"], p["end_s"]) for p in phases] or [("all", 0.0, duration or math.inf)]


def lowest_share(share: dict[str, float], counts: dict[str, tuple[int, int]]) -> tuple[float, str]:
    """A sampling check's value and detail: the smallest of ``share`` (name -> samples within
    the schedule / samples it asks for, ``counts`` the two numbers) and every name's share."""
    low = min(share, key=share.get)
    return share[low], f"lowest {low} ({counts[low][0]} of {counts[low][1]} samples in the schedule); " + \
        ", ".join(f"{n} {percent(v)}" for n, v in share.items())
