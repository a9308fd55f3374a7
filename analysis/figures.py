"""Figures of a run (``figures/``), drawn with matplotlib's object API on the Agg canvas
(no pyplot, so the caller's backend is untouched).

- ``queueing-delay.png``/``.pdf``: queueing delay (ms) vs time (s), one panel per variant,
  PIE and RED as hue: light points for every ping sample and a line for the median per time
  bin; phases shaded and labelled with their flow count; dashed line at PIE's target
  (spec ``aqms.pie.params.target_ms``). The counterpart of Fig. 8 of Pan et al. 2013.
- ``utilization.png``: bottleneck throughput (Mbit/s, mean per time bin) vs time, with the
  variant's bottleneck rate as a line.
- ``backlog.png``: AQM backlog in kB and packets (median per time bin) vs time, with the
  buffer size (spec ``bottleneck.buffer_bytes``) as a line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import seaborn as sns
from matplotlib import rc_context
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

from analysis.io import atomic_path
from analysis.run import RunInfo


def bin_width_s(duration_s: float) -> float:
    """Time bin for the smoothed lines: 1/250 of a trial, at least 0.5 s (1 s at full length)."""
    return max(duration_s / 250.0, 0.5)


def binned(df: pd.DataFrame, width_s: float, how: str = "median") -> pd.DataFrame:
    """Aggregate ``value`` per (aqm, time bin); the bin's centre goes in ``t_s``."""
    if df.empty:
        return pd.DataFrame(columns=["aqm", "t_s", "value"])
    b = (np.floor(df["t_s"] / width_s) + 0.5) * width_s
    return df.assign(t_s=b).groupby(["aqm", "t_s"], as_index=False)["value"].agg(how)


def _new_figure(n_rows: int, n_cols: int, height: float = 3.6):
    fig = Figure(figsize=(6.0 * n_cols, height * n_rows), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(n_rows, n_cols, squeeze=False, sharex=True)
    return fig, axes


def _shade_phases(ax, phases: list[dict], label: bool = True) -> None:
    trans = blended_transform_factory(ax.transData, ax.transAxes)
    for i, ph in enumerate(phases):
        ax.axvspan(ph["start_s"], ph["end_s"], color="0.5", alpha=0.10 if i % 2 == 0 else 0.03, lw=0)
        if label and "flows" in ph:
            ax.text((ph["start_s"] + ph["end_s"]) / 2, 0.98, f"{ph['flows']} flows", transform=trans,
                    ha="center", va="top", fontsize=8, color="0.3")


def _headroom(ax, bottom: float | None = None) -> None:
    """Leave 10% free at the top of the axes for the phase labels."""
    lo, hi = ax.get_ylim()
    lo = lo if bottom is None else bottom
    ax.set_ylim(lo, hi + 0.10 * (hi - lo))


def _legend(fig: Figure, ax) -> None:
    """One legend for the figure, below the panels (the panels share their series)."""
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", ncol=len(handles), fontsize=9, frameon=False)


#: Metadata that would carry the wall-clock time, removed so that equal data give equal
#: bytes (matplotlib Figure.savefig ``metadata``: PDF CreationDate/ModDate, SVG Date; PNG
#: gets no time stamp from matplotlib).
NO_TIME = {"pdf": {"CreationDate": None, "ModDate": None}, "svg": {"Date": None}, "png": {}}


def _save(fig: Figure, target: Path) -> Path:
    fmt = target.suffix.lstrip(".")
    # SVG element ids are random unless salted (matplotlibrc svg.hashsalt)
    with atomic_path(target) as tmp, rc_context({"svg.hashsalt": "netrepro"}):
        fig.savefig(tmp, format=fmt, dpi=150, metadata=NO_TIME.get(fmt) or None)
    return target


def _setup(run: RunInfo):
    variants = list(dict.fromkeys(t.variant for t in run.trials))
    aqms = list(dict.fromkeys(t.aqm for t in run.trials))
    palette = dict(zip(aqms, sns.color_palette("colorblind", len(aqms))))
    phases = {t.variant: t.phases for t in run.trials}
    duration = max((p["end_s"] for t in run.trials for p in t.phases), default=1.0)
    return variants, aqms, palette, phases, duration


def _select(tidy: pd.DataFrame, source: str, metric: str) -> pd.DataFrame:
    if tidy.empty:
        return tidy
    return tidy[(tidy["source"] == source) & (tidy["metric"] == metric)]


def plot_queueing_delay(tidy: pd.DataFrame, run: RunInfo, out_dir: Path) -> list[Path]:
    """Draw figures/queueing-delay.png and .pdf; returns their paths."""
    variants, aqms, palette, phases, duration = _setup(run)
    w = bin_width_s(duration)
    data = _select(tidy, "ping", "queueing_delay_ms")
    target = run.spec["aqms"].get("pie", {}).get("params", {}).get("target_ms")
    fig, axes = _new_figure(1, len(variants))
    for ax, v in zip(axes[0], variants):
        _shade_phases(ax, phases[v])
        d = data[data["variant"] == v] if len(data) else data
        for aqm in aqms:
            da = d[d["aqm"] == aqm] if len(d) else d
            if len(da):
                ax.scatter(da["t_s"], da["value"], s=3, alpha=0.2, color=palette[aqm], lw=0, rasterized=True)
                m = binned(da, w)
                ax.plot(m["t_s"], m["value"], color=palette[aqm], lw=1.6, label=f"{aqm.upper()} (median per {w:g} s)")
            else:
                ax.plot([], [], color=palette[aqm], label=f"{aqm.upper()} (no data)")
        if target is not None:
            ax.axhline(target, color="k", ls="--", lw=1, label=f"PIE target {target:g} ms")
        _headroom(ax)
        ax.set_title(f"{v} sources")
        ax.set_xlabel("time (s)")
        ax.set_xlim(0, duration)
        ax.set_ylabel("queueing delay (ms)")
    _legend(fig, axes[0][0])
    fig.suptitle(f"{run.spec.get('title', run.spec.name)}")
    outs = [_save(fig, out_dir / "queueing-delay.png"), _save(fig, out_dir / "queueing-delay.pdf")]
    return outs


def plot_utilization(tidy: pd.DataFrame, run: RunInfo, out_dir: Path) -> list[Path]:
    """Draw figures/utilization.png; returns its path in a list."""
    variants, aqms, palette, phases, duration = _setup(run)
    w = bin_width_s(duration)
    data = _select(tidy, "qdisc", "throughput_mbit")
    rates = {t.variant: t.rate_mbit for t in run.trials}
    fig, axes = _new_figure(1, len(variants))
    for ax, v in zip(axes[0], variants):
        _shade_phases(ax, phases[v])
        d = data[data["variant"] == v] if len(data) else data
        for aqm in aqms:
            m = binned(d[d["aqm"] == aqm] if len(d) else d, w, "mean")
            ax.plot(m["t_s"], m["value"], color=palette[aqm], lw=1.4, label=f"{aqm.upper()} (mean per {w:g} s)")
        ax.axhline(rates[v], color="k", ls="--", lw=1, label=f"bottleneck {rates[v]:g} Mbit/s")
        ax.set_ylim(0, rates[v] * 1.25)
        ax.set_title(f"{v} sources")
        ax.set_xlabel("time (s)")
        ax.set_xlim(0, duration)
        ax.set_ylabel("bottleneck throughput (Mbit/s)")
    _legend(fig, axes[0][0])
    fig.suptitle("Load on the bottleneck (router tx byte counter)")
    return [_save(fig, out_dir / "utilization.png")]


def plot_backlog(tidy: pd.DataFrame, run: RunInfo, out_dir: Path) -> list[Path]:
    """Draw figures/backlog.png (rows: kB, packets; one column per variant); returns its path."""
    variants, aqms, palette, phases, duration = _setup(run)
    w = bin_width_s(duration)
    buffer_kb = run.spec["bottleneck"].get("buffer_bytes", np.nan) / 1000
    fig, axes = _new_figure(2, len(variants), height=3.0)
    for row, (metric, scale, ylabel) in enumerate(
        [("backlog_bytes", 1e-3, "AQM backlog (kB)"), ("backlog_packets", 1.0, "AQM backlog (packets)")]
    ):
        data = _select(tidy, "qdisc", metric)
        for ax, v in zip(axes[row], variants):
            _shade_phases(ax, phases[v], label=row == 0)
            d = data[data["variant"] == v] if len(data) else data
            for aqm in aqms:
                m = binned(d[d["aqm"] == aqm] if len(d) else d, w)
                ax.plot(m["t_s"], m["value"] * scale, color=palette[aqm], lw=1.2, label=aqm.upper())
            if metric == "backlog_bytes" and np.isfinite(buffer_kb):
                ax.axhline(buffer_kb, color="k", ls="--", lw=1, label=f"buffer {buffer_kb:g} kB")
            _headroom(ax, bottom=0)
            ax.set_xlim(0, duration)
            ax.set_ylabel(ylabel)
            if row == 0:
                ax.set_title(f"{v} sources")
            else:
                ax.set_xlabel("time (s)")
    _legend(fig, axes[0][0])
    fig.suptitle(f"Queue backlog at the bottleneck (median per {w:g} s)")
    return [_save(fig, out_dir / "backlog.png")]


def make_figures(tidy: pd.DataFrame, run: RunInfo, out_dir: Path) -> list[Path]:
    """Draw every figure into ``out_dir`` (created if needed); returns the written paths.
    Missing data gives empty panels, never an error."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    return plot_queueing_delay(tidy, run, out_dir) + plot_utilization(tidy, run, out_dir) + plot_backlog(tidy, run, out_dir)
