"""Figures of a run of any experiment (the file's ``figures``, read by :mod:`analysis.outputs`),
drawn with matplotlib's object API on the Agg canvas (no pyplot, so the caller's backend is
untouched and no figure is left open), and written byte for byte the same for the same data
(:func:`save_figure`; the figures across repetitions, sweep points and runs use it too).

A figure draws one metric of the tidy table (``trial, subject, stream, t_s, metric, value``)
over time:

- panels: one per value of ``facet`` (default ``trial``; ``subject`` or a key of the trials'
  labels: trials sharing the value share the panel), stacked, sharing the time axis;
- lines: one colour per value of ``hue`` (default ``subject``; ``trial`` or a label key).
  Without ``rolling`` every series (a trial's subject) is a line of its own; where a panel
  holds several series of one colour, the line style tells their subject apart (their trial
  when ``hue`` is ``subject``).
- ``rolling: {window_s, statistic}``: instead, one line per panel and colour: the statistic
  (median, mean, p95, max, min) of all its samples, pooled over its trials and subjects, in
  consecutive windows of ``window_s`` (:func:`rolling`), over the samples themselves as light
  points. Fig. 8 of Pan et al. (PIE, HPSR 2013) is the per-second median of the three
  clients' pings.
- ``shade_phases``: the file's phases shaded alternately darker and lighter, each phase's
  ``label`` (default: its name) written at the top of every panel;
- ``lines``: horizontal reference lines; one legend below the panels names every colour,
  line style and reference line.
- the reference values of the file's ``reference_results`` (a number a published source
  states of a statistic that sums up this metric in its unit:
  :data:`netrepro.model.STATISTIC_METRICS`) as short thick segments over the phases they
  hold for, in the panels and colours of their trials, a line style per source
  (:data:`REFERENCE_STYLES`).

Every panel shares the y axis, so that the panels compare at a glance; the y axis and each
panel's title name the metric in words with its unit (:func:`netrepro.model.quantity_label`:
``Queueing delay (ms)``, or the file's ``metrics`` section), and the figure's title says in a
second line which run it is (:func:`caption`: run id, site, time scale, rate scale).

Times: ``t_s`` counts real seconds from the trial's start, so the file's phases and
``window_s`` are multiplied by the run's TIME_SCALE, as the trials' schedules were.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from netrepro.runfolder.atomic import atomic_path
from netrepro.model import STATISTIC_METRICS, Phase, Rolling, quantity_label
from netrepro.model import Figure as FigureRecord

if TYPE_CHECKING:
    from matplotlib.figure import Figure

# matplotlib and seaborn (about 1 s to import on a CI-class machine) are imported by the
# functions that draw, so that a command refusing a bad run folder answers before them.

#: The statistics ``rolling`` computes over a window's samples (p95: pandas' quantile 0.95,
#: linear interpolation between the closest ranks).
ROLLING_STATISTICS = ("median", "mean", "p95", "max", "min")
#: Line styles telling apart the series of one colour in a panel, in turn.
STYLES = ("-", "--", ":", "-.")
#: Figure width (in) and height per panel (in).
WIDTH_IN, PANEL_IN = 8.0, 2.6
#: Line styles of the reference values, one per source of ``reference_results`` in turn.
REFERENCE_STYLES = (":", "-.", (0, (5, 1)), (0, (1, 3)))
#: About how many characters of 7-point legend text fit across a figure :data:`WIDTH_IN` wide.
LEGEND_CHARS = 150
#: The x axis of a figure over time.
TIME_AXIS = "Time since the trial's start (s)"


#: Metadata that would carry the wall-clock time, removed so that equal data give equal
#: bytes (matplotlib Figure.savefig ``metadata``: PDF CreationDate/ModDate, SVG Date; PNG
#: gets no time stamp from matplotlib).
NO_TIME = {"pdf": {"CreationDate": None, "ModDate": None}, "svg": {"Date": None}, "png": {}}


def save_figure(fig: Figure, target: Path) -> Path:
    """Write ``fig`` to ``target`` (its format from the suffix: png, pdf, svg; 150 dpi)
    atomically and byte for byte the same for the same figure: no time stamp, SVG ids salted
    (matplotlibrc ``svg.hashsalt``). Returns ``target``."""
    from matplotlib import rc_context

    fmt = target.suffix.lstrip(".")
    with atomic_path(target) as tmp, rc_context({"svg.hashsalt": "netrepro"}):
        fig.savefig(tmp, format=fmt, dpi=150, metadata=NO_TIME.get(fmt) or None)
    return target


def new_figure(n_rows: int, n_cols: int, height: float = 3.6) -> tuple[Figure, np.ndarray]:
    """A figure on the Agg canvas (no pyplot) with ``n_rows`` x ``n_cols`` panels sharing
    their x axis, 6 in wide and ``height`` in high each: ``(figure, 2-d array of axes)``."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6.0 * n_cols, height * n_rows), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots(n_rows, n_cols, squeeze=False, sharex=True)


def caption(run_id: str | None, site: str | None, time_scale: float, rate_scale: float) -> str:
    """The line under a figure's title that says which run it shows: ``run <id> on site <site>,
    time scale <TS>, rate scale <k>`` (``?`` for an id or site not known). ``time_scale``
    multiplied every duration of the run, ``rate_scale`` every rate and byte size."""
    return (f"run {run_id or '?'} on site {site or '?'}, time scale {float(time_scale):g}, "
            f"rate scale {float(rate_scale):g}")


def stated_numbers(references: list[dict]) -> list[dict]:
    """Every number the published sources (``references``: a file's ``reference_results``)
    state, one per trial and phase: ``{"source", "style", "statistic", "trial", "phase",
    "value", "approximate", "label"}``, phase ``all`` for the whole trial; ``style`` is the
    source's line style by its place in ``references`` (:data:`REFERENCE_STYLES`) and
    ``label`` its legend text (``<source>: about 20``). Findings in words are left out."""
    out = []
    for i, ref in enumerate(references):
        for v in ref.get("values") or []:
            if "value" not in v:
                continue
            about = "about " if v.get("approximate") else ""
            for t in v["trials"]:
                for ph in v.get("phases") or ["all"]:
                    out.append({"source": ref["source"], "style": REFERENCE_STYLES[i % len(REFERENCE_STYLES)],
                                "statistic": v["statistic"], "trial": t, "phase": ph, "value": float(v["value"]),
                                "approximate": bool(v.get("approximate")),
                                "label": f"{ref['source']}: {about}{float(v['value']):g}"})
    return out


def reference_segments(model, metric: str) -> list[dict]:
    """The numbers the file's ``reference_results`` state (:func:`stated_numbers`) of a
    statistic summing up ``metric`` in its unit (:data:`netrepro.model.STATISTIC_METRICS`).
    Empty when the file states none."""
    return [n for n in stated_numbers(model.reference_results)
            if STATISTIC_METRICS.get(n["statistic"]) == metric]


def figure_specs(model, tidy: pd.DataFrame) -> list[FigureRecord]:
    """The experiment's ``figures``, or one per metric measured (metric over time, a panel per
    trial, a line per subject) when it declares none."""
    if model.figures:
        return list(model.figures)
    return [FigureRecord(id=m.replace("_", "-"), metric=m) for m in
            ["throughput_mbit", "rtt_ms", "cwnd_bytes", "retransmits", "backlog_bytes"] if m in set(tidy["metric"])]


def rolling(samples: pd.DataFrame, window_s: float, statistic: str, by: list[str] | None = None) -> pd.DataFrame:
    """The ``statistic`` (one of :data:`ROLLING_STATISTICS`) of the ``value`` of ``samples``
    (rows with ``t_s`` in s), pooled per ``by`` (columns; none: all together), in
    consecutive windows [k w, (k+1) w) of ``window_s`` = w seconds from t = 0.

    Returns the columns ``by + ["t_s", "value"]``, one row per window from a group's first to
    its last window with samples, ``t_s`` at the window's centre (k + 0.5) w; a window
    without samples between them has value NaN (a gap in the drawn line). ValueError for a
    window <= 0 or an unknown statistic."""
    if not window_s > 0:
        raise ValueError(f"rolling window {window_s!r} s; expected > 0")
    if statistic not in ROLLING_STATISTICS:
        raise ValueError(f"rolling statistic {statistic!r}; expected one of {', '.join(ROLLING_STATISTICS)}")
    by = list(by or [])
    if samples.empty:
        return pd.DataFrame(columns=by + ["t_s", "value"])
    d = samples.assign(_k=np.floor(samples["t_s"].to_numpy(float) / window_s).astype(np.int64))
    out = []
    for key, g in (d.groupby(by, sort=False) if by else [((), d)]):
        grouped = g.groupby("_k")["value"]
        v = grouped.quantile(0.95) if statistic == "p95" else grouped.agg(statistic)
        ks = np.arange(v.index.min(), v.index.max() + 1)
        v = v.reindex(ks)
        row = dict(zip(by, key if isinstance(key, tuple) else (key,)))
        out.append(pd.DataFrame({**row, "t_s": (ks + 0.5) * window_s, "value": v.to_numpy(float)}))
    return pd.concat(out, ignore_index=True)[by + ["t_s", "value"]]


def _column(d: pd.DataFrame, model, name: str) -> pd.Series:
    """The values of a figure's ``facet`` or ``hue`` column for each sample: its trial, its
    subject, or its trial's label ``name`` (``no <name>`` for a trial without it)."""
    if name in ("trial", "subject"):
        return d[name].astype(str)
    labels = {t.id: t.labels.get(name, f"no {name}") for t in model.trials}
    return d["trial"].map(labels)


def _shade_phases(ax, phases: tuple[Phase, ...], time_scale: float) -> None:
    """The phases shaded alternately darker and lighter (every phase is one patch), each
    phase's label (default: its name) at the top of the panel."""
    from matplotlib.transforms import blended_transform_factory

    trans = blended_transform_factory(ax.transData, ax.transAxes)
    for i, ph in enumerate(phases):
        lo, hi = ph.start_s * time_scale, ph.end_s * time_scale
        ax.axvspan(lo, hi, color="0.5", alpha=0.10 if i % 2 == 0 else 0.03, lw=0)
        ax.text((lo + hi) / 2, 0.98, ph.label or ph.name, transform=trans, ha="center", va="top",
                fontsize=8, color="0.3")


def _figure_samples(model, tidy: pd.DataFrame, fig: FigureRecord) -> pd.DataFrame:
    """The samples a figure draws: its metric's rows of its subjects and trials (an item's sum
    where there is one, else a subject per stream), ordered by the trials' order in the file;
    empty when there are none."""
    d = tidy[tidy["metric"] == fig.metric]
    if fig.subjects:
        d = d[d["subject"].isin(fig.subjects)]
    if (d["stream"] == -1).any():  # an item's sum where there is one
        d = d[d["stream"] == -1]
    else:  # per stream (cwnd, TCP RTT): a line for each
        d = d.assign(subject=d["subject"] + " stream " + d["stream"].astype(str))
    order = {t.id: i for i, t in enumerate(model.trials)}
    d = d[d["trial"].isin(fig.trials or list(order))]
    if d.empty:
        return d
    return d.iloc[np.argsort(d["trial"].map(order).to_numpy(), kind="stable")]


def _draw_series(ax, dp: pd.DataFrame, hues: list, palette: dict, roll: Rolling | None, time_scale: float,
                 style_col: str, styles: dict, styled: bool) -> None:
    """Draw a panel's samples ``dp``: with ``roll``, per colour its samples as light points
    under their rolling statistic; else each series (a trial's subject) as a line."""
    if roll:
        w = roll.window_s * time_scale
        for h in hues:
            s = dp[dp["_hue"] == h]
            if s.empty:
                continue
            ax.scatter(s["t_s"], s["value"], s=3, alpha=0.2, color=palette[h], lw=0, rasterized=True)
            r = rolling(s, w, roll.statistic)
            ax.plot(r["t_s"], r["value"], color=palette[h], lw=1.6, label=f"{h} ({roll.statistic} per {w:g} s)")
    else:
        for (_, _), s in dp.groupby(["trial", "subject"], sort=False):
            h, st = s["_hue"].iloc[0], s[style_col].iloc[0]
            s = s.sort_values("t_s", kind="stable")
            ax.plot(s["t_s"], s["value"], color=palette[h], ls=styles[st] if styled else "-", lw=0.8,
                    label=f"{h}, {st}" if styled else h)


def _draw_references(ax, dp: pd.DataFrame, refs: list[dict], spans: dict, durations: dict, palette: dict,
                     hue: str) -> None:
    """Draw each published number (``refs``: :func:`reference_segments`) over its phase
    (``spans``, or its trial's whole ``durations``) in its trial's panel and colour."""
    for r in refs:
        here = dp[dp["trial"] == r["trial"]]
        if here.empty or (r["phase"] != "all" and r["phase"] not in spans):
            continue
        lo, hi = spans[r["phase"]] if r["phase"] != "all" else (0.0, durations.get(r["trial"], here["t_s"].max()))
        colour = palette.get(here["_hue"].iloc[0], "0.2") if hue != "subject" else "0.2"
        ax.hlines(r["value"], lo, hi, colors=[colour], linestyles=[r["style"]], linewidth=2.2, alpha=0.9,
                  label=r["label"])


def _legend(f: Figure, axes) -> None:
    """One legend below the panels naming each label of their artists once."""
    handles: dict[str, object] = {}
    for ax in axes:
        for hd, lb in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lb, hd)
    if handles:
        widest = max(len(lb) for lb in handles)  # about LEGEND_CHARS characters fit across the figure
        f.legend(list(handles.values()), list(handles), loc="outside lower center",
                 ncol=max(1, min(4, len(handles), LEGEND_CHARS // (widest + 6))), fontsize=7, frameon=False)


def figure(model, tidy: pd.DataFrame, fig: FigureRecord, time_scale: float = 1.0, caption: str | None = None) -> Figure | None:
    """The matplotlib Figure of one of the file's ``figures`` (see the module docstring), or
    None when no chosen trial has samples of its metric. ``model``: the run's
    :class:`netrepro.model.Model` (its trials, their labels, the file's phases, metric names
    and reference values); ``tidy``: the run's samples (TIDY_COLUMNS, ``t_s`` in real
    seconds); ``time_scale``: the run's TIME_SCALE; ``caption``: the second line of the
    title (:func:`caption`), none when not given."""
    import seaborn as sns
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    d = _figure_samples(model, tidy, fig)
    if d.empty:
        return None
    facet, hue, roll = fig.facet, fig.hue, fig.rolling
    d = d.assign(_facet=_column(d, model, facet), _hue=_column(d, model, hue))
    panels = list(dict.fromkeys(d["_facet"]))
    hues = list(dict.fromkeys(d["_hue"]))
    palette = dict(zip(hues, sns.color_palette("colorblind", len(hues))))
    # the series of one colour in a panel are told apart by subject (by trial when hue is subject)
    style_col = "subject" if hue != "subject" else "trial"
    styled = not roll and bool((d.groupby(["_facet", "_hue"])[style_col].nunique() > 1).any())
    styles = {v: STYLES[i % len(STYLES)] for i, v in enumerate(dict.fromkeys(d[style_col]))}
    phases = model.phases if fig.shade_phases else ()

    ylabel = quantity_label(model, fig.metric)
    durations = {t.id: t.duration_s * time_scale for t in model.trials}
    spans = {p.name: (p.start_s * time_scale, p.end_s * time_scale) for p in model.phases}
    refs = reference_segments(model, fig.metric)

    f = Figure(figsize=(WIDTH_IN, PANEL_IN * len(panels)), layout="constrained")
    FigureCanvasAgg(f)
    axes = f.subplots(len(panels), 1, sharex=True, sharey=True, squeeze=False)[:, 0]
    for ax, p in zip(axes, panels):
        _shade_phases(ax, phases, time_scale)
        dp = d[d["_facet"] == p]
        _draw_series(ax, dp, hues, palette, roll, time_scale, style_col, styles, styled)
        for line in fig.lines:
            ax.axhline(line.y, color="0.3", linestyle="--", linewidth=0.8, label=line.label)
        _draw_references(ax, dp, refs, spans, durations, palette, hue)
        ax.set_title(f"{ylabel}, {p if facet == 'trial' else f'{facet}: {p}'}", fontsize=9)
        ax.set_ylabel(ylabel)
    if phases:  # room at the top for the phases' labels (the panels share the y axis: once)
        lo, hi = axes[0].get_ylim()
        axes[0].set_ylim(lo, hi + 0.10 * (hi - lo))
    axes[-1].set_xlabel(TIME_AXIS + (f", TIME_SCALE {time_scale:g}" if time_scale != 1 else ""))
    _legend(f, axes)
    title = fig.title if fig.title is not None else f"{ylabel} ({model.name})"
    f.suptitle(title + (f"\n{caption}" if caption else ""), fontsize=10)
    return f


def draw(model, tidy: pd.DataFrame, fig: FigureRecord, out_dir: Path, time_scale: float = 1.0,
         caption: str | None = None) -> list[Path]:
    """Write one figure (:func:`figure`, ``caption`` under its title) as PNG and PDF to
    ``out_dir/<id>.*``; returns their paths, none when it has no data."""
    f = figure(model, tidy, fig, time_scale, caption)
    if f is None:
        return []
    return [save_figure(f, Path(out_dir) / f"{fig.id}.{ext}") for ext in ("png", "pdf")]
