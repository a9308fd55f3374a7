"""The experiment's claims as typed, immutable records: what the verdict judges
(:mod:`analysis.claims`) and what every other reader of a claim takes by attribute.

The JSON schema's ``claims`` (``netrepro/schemas/experiment.schema.json``; the format in
docs/experiment-format.md) is the one description; :meth:`Claim.from_data` reads one
validated entry. A claim's ``when`` is a bound without a kind in the file and a
:class:`Check` of kind ``bound`` here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping

#: The kinds of a claim's check (the schema's ``$defs.check``).
CHECK_KINDS = ("bound", "difference", "ratio", "rise_and_fall", "all_of")
#: The fields of a check that are values of its statistic, by kind, and so follow the rate
#: scale with it (:meth:`Check.at_rate_scale`); a ratio's ``min``/``max`` are ratios, unchanged
#: by k, and an ``all_of`` holds its checks.
RATE_SCALED_FIELDS = {"bound": ("min", "max"), "difference": ("min", "max"),
                      "rise_and_fall": ("tolerance", "min_rise")}


@dataclass(frozen=True)
class Selection:
    """Rows of the statistics table a check reads (the schema's ``$defs.selection``): the
    ``statistic`` of the ``trials``, ``subjects`` and ``phases`` named (each ``()`` when the
    file names none: every trial, the subjects that compute the statistic, phase ``all``)."""

    statistic: str
    trials: tuple[str, ...] = ()
    subjects: tuple[str, ...] = ()
    phases: tuple[str, ...] = ()

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Selection:
        """The record of one validated selection ``{"statistic", "trials"?, "subjects"?, "phases"?}``."""
        return cls(data["statistic"], tuple(data.get("trials") or ()), tuple(data.get("subjects") or ()),
                   tuple(data.get("phases") or ()))

    def steps(self, order: str) -> tuple[str, ...]:
        """The names a rise_and_fall steps over: the selection's ``phases`` or ``trials``
        (``order``), ``()`` when it names none."""
        return {"phases": self.phases, "trials": self.trials}.get(order, ())


@dataclass(frozen=True)
class Check:
    """What a claim tests (the schema's ``$defs.check``), one of :data:`CHECK_KINDS`:

    - ``bound``: every value of ``select`` within [``min``, ``max``] (either may be None: open);
    - ``difference``: each value of ``higher`` minus the value of ``lower`` in the same
      position within [``min``, ``max``] (``absolute``: its absolute value);
    - ``ratio``: each ``higher / lower`` at least ``min``;
    - ``rise_and_fall``: over ``order`` (``phases`` or ``trials`` of ``select``),
      non-decreasing to ``peak`` then non-increasing, each step within ``tolerance``, the
      peak above both ends by ``min_rise`` (all in the statistic's unit);
    - ``all_of``: every one of ``checks`` holds.

    Thresholds are in the selected statistic's unit (a ratio's: no unit)."""

    kind: str
    select: Selection | None = None
    higher: Selection | None = None
    lower: Selection | None = None
    min: float | None = None
    max: float | None = None
    absolute: bool = False
    order: str | None = None
    peak: str | None = None
    tolerance: float | None = None
    min_rise: float | None = None
    checks: tuple[Check, ...] = ()

    @classmethod
    def from_data(cls, data: Mapping[str, Any], kind: str | None = None) -> Check:
        """The record of one validated check (``kind``: the kind when the data has none, as a
        claim's ``when`` is a bound)."""
        sel = {k: Selection.from_data(data[k]) for k in ("select", "higher", "lower") if k in data}
        rest = {k: data[k] for k in ("min", "max", "absolute", "order", "peak", "tolerance", "min_rise") if k in data}
        return cls(kind=data.get("kind", kind), **sel, **rest,
                   checks=tuple(cls.from_data(c) for c in data.get("checks") or ()))

    @property
    def selections(self) -> tuple[Selection, ...]:
        """Every selection the check reads (``select``, ``higher``, ``lower``), those of an
        ``all_of``'s checks too, in order."""
        if self.kind == "all_of":
            return tuple(s for sub in self.checks for s in sub.selections)
        return tuple(s for s in (self.select, self.higher, self.lower) if s is not None)

    @property
    def first_selection(self) -> Selection | None:
        """The selection whose statistic the thresholds are in: ``select``, else ``higher``."""
        return self.select or self.higher

    def limits(self) -> tuple[float, float]:
        """(least, most): the interval a ``bound``, ``ratio`` or ``difference`` check holds its
        values or quantities to, ``min`` and ``max`` with the kind's defaults (a bound:
        unbounded; a ratio: at least 1; a difference: at least 0, or unbounded below when it
        has only a ``max``); -inf/inf where open. ValueError for another kind."""
        if self.kind == "bound":
            return (-math.inf if self.min is None else self.min), (math.inf if self.max is None else self.max)
        if self.kind in ("difference", "ratio"):
            least = self.min
            if least is None:  # a difference with only a max has no least value
                least = 1 if self.kind == "ratio" else (-math.inf if self.max is not None else 0)
            return least, (math.inf if self.max is None else self.max)
        raise ValueError(f"claim kind {self.kind!r} has no limits; expected bound, ratio or difference")

    def rate_scaled_fields(self) -> tuple[str, ...]:
        """The thresholds of this check (not its sub-checks) that are values of its statistic
        and set (:data:`RATE_SCALED_FIELDS`)."""
        return tuple(f for f in RATE_SCALED_FIELDS.get(self.kind, ()) if getattr(self, f) is not None)

    def at_rate_scale(self, k: float, scaled: Callable[[str], bool]) -> Check:
        """The check with its thresholds on values the rate scale changes multiplied by ``k``:
        the :data:`RATE_SCALED_FIELDS` of each check (an ``all_of``'s too) whose statistic
        ``scaled(statistic)`` says follows k (netrepro.model.rate_scaled); others as they are.
        At k = 0.5, "15 to 20.5 Mbit/s" is judged as 7.5 to 10.25."""
        if self.kind == "all_of":
            return replace(self, checks=tuple(c.at_rate_scale(k, scaled) for c in self.checks))
        fields = self.rate_scaled_fields()
        if not fields or not scaled(self.first_selection.statistic):
            return self
        return replace(self, **{f: getattr(self, f) * k for f in fields})


@dataclass(frozen=True)
class Finding:
    """What measurement found of a claim where it differs from its source: ``text``, and
    ``runs``, the folder names in docs/runs of the records that show it."""

    text: str
    runs: tuple[str, ...]


@dataclass(frozen=True)
class Claim:
    """One claim of the paper the verdict judges (the schema's ``claims`` items).

    ``id``; ``text``: the claim in words; ``check``: what tests it; ``when``: the condition
    (a bound) under which it applies, or None; ``note``; ``rate_scale_min`` and
    ``time_scale_min``: the smallest rate scale k and TIME_SCALE at which it keeps its
    meaning (None: no own limit; the file's ``time_scale.min`` then applies to time);
    ``rate_scaling``: ``proportional`` or ``none`` (None when the file gives none): whether
    its thresholds on rate-scaled values follow k; ``finding``: a :class:`Finding` or None."""

    id: str
    text: str
    check: Check
    when: Check | None = None
    note: str | None = None
    rate_scale_min: float | None = None
    time_scale_min: float | None = None
    rate_scaling: str | None = None
    finding: Finding | None = None

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Claim:
        """The record of one validated claim of the file."""
        f = data.get("finding")
        return cls(id=data["id"], text=data["text"], check=Check.from_data(data["check"]),
                   when=Check.from_data(data["when"], "bound") if data.get("when") else None,
                   note=data.get("note"), rate_scale_min=data.get("rate_scale_min"),
                   time_scale_min=data.get("time_scale_min"), rate_scaling=data.get("rate_scaling"),
                   finding=Finding(f["text"], tuple(f["runs"])) if f else None)

    @property
    def parts(self) -> tuple[tuple[str, Check], ...]:
        """``(part, check)`` of every check the claim judges with its own numbers: ``""`` its
        ``check``, or ``1``, ``2``, ... (``1.2`` nested) an ``all_of``'s checks; ``when`` its
        condition."""
        def walk(check: Check, part: str) -> list[tuple[str, Check]]:
            if check.kind == "all_of":
                return [x for i, sub in enumerate(check.checks, 1) for x in walk(sub, f"{part}.{i}" if part else str(i))]
            return [(part, check)]
        return tuple(walk(self.check, "") + ([("when", self.when)] if self.when else []))

    def scale_min(self, scale: str) -> float | None:
        """The claim's own ``<scale>_min`` (``scale``: ``rate_scale`` or ``time_scale``), or None."""
        return {"rate_scale": self.rate_scale_min, "time_scale": self.time_scale_min}[scale]
