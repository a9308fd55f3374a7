"""The experiment's figures as typed, immutable records (the schema's ``figures`` items,
docs/experiment-format.md): what :mod:`analysis.figures` draws."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping


@dataclass(frozen=True)
class Rolling:
    """Instead of every sample, one line per panel and hue value: the ``statistic``
    (``median``, ``mean``, ``p95``, ``max``, ``min``) of the samples pooled in consecutive
    windows of ``window_s`` seconds (at time scale 1; scaled like the trial)."""

    window_s: float
    statistic: str


@dataclass(frozen=True)
class ReferenceLine:
    """A horizontal line at ``y`` (the figure's metric's unit) with its legend ``label``."""

    y: float
    label: str


@dataclass(frozen=True)
class Figure:
    """One figure the analysis draws (files ``figures/<id>.png|pdf``).

    ``metric``: a tidy.csv metric drawn over time; ``title`` (None: the metric's label and the
    experiment's name); ``subjects`` and ``trials`` drawn (``()``: all); ``facet``: the column
    giving one panel per value (``trial``, ``subject`` or a label key); ``hue``: the column
    giving one colour per value; ``rolling``: a :class:`Rolling` or None; ``shade_phases``:
    shade and label the file's phases; ``lines``: :class:`ReferenceLine` records."""

    id: str
    metric: str
    title: str | None = None
    subjects: tuple[str, ...] = ()
    trials: tuple[str, ...] = ()
    facet: str = "trial"
    hue: str = "subject"
    rolling: Rolling | None = None
    shade_phases: bool = False
    lines: tuple[ReferenceLine, ...] = ()

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Figure:
        """The record of one validated figure of the file (the schema's defaults filled)."""
        r = data.get("rolling")
        return cls(id=data["id"], metric=data["metric"], title=data.get("title"),
                   subjects=tuple(data.get("subjects") or ()), trials=tuple(data.get("trials") or ()),
                   facet=data.get("facet", "trial"), hue=data.get("hue", "subject"),
                   rolling=Rolling(r["window_s"], r["statistic"]) if r else None,
                   shade_phases=bool(data.get("shade_phases", False)),
                   lines=tuple(ReferenceLine(x["y"], x["label"]) for x in data.get("lines") or ()))
