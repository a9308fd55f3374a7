"""Link fidelity: did each shaped port send at its shaped rate whenever it had packets to send?

A faithful emulated link is work-conserving at its rate: while its queue holds packets, it
sends one frame every frame-time (Mininet-HiFi's network invariant, Handigol et al., "Reproducible
Network Experiments Using Container-Based Emulation", CoNEXT 2012, section 3: the gap between
dequeues of a busy link equals one packet's transmission time). A host that cannot keep up
sends less than the rate while the queue waits. netrepro's queue collector samples a
bottleneck port every ``interval_s`` (roles/collectors/files/nr-qdisc-stats.sh: the device's
``tx_bytes`` and ``tc -s -j qdisc``), which gives the same invariant at the granularity of
a few sampling intervals: over a window of consecutive samples that all show a backlog, the bytes
the device sent x 8 / the window's length must equal the shaped rate (:data:`WINDOW_S`).

The rate is the port's stack's lowest shaper rate in the trial as run (rates scaled by the
run's rate scale: :func:`netrepro.core.tc.shaping_rate_mbit`); the backlog is that of the first
shaper layer of the sample (:data:`netrepro.core.tc.SHAPERS`: it holds its children's, so a
netem root above it, whose delay line is not a queue waiting for the link, is not counted),
else of the root qdisc (the ns3 site's one queue disc in front of its link). The sent bytes
are the device's ``tx_bytes`` (read next to the sample's time; the qdisc's own counters come
later from tc), which count each frame with its 14-byte Ethernet header, as HTB and TBF do
when they shape (``qdisc_pkt_len``: skb->len at the qdisc). A frame or two more or less in an
interval is quantisation: 1514 B is 1.2 % of a 0.1 s interval at 10 Mbit/s.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.raw import SHAPER_COLUMNS, parse_shaper_samples
from netrepro.core import tc
from netrepro.model import Port

#: Columns of :func:`shaper_samples`.
SAMPLE_COLUMNS = SHAPER_COLUMNS
#: Columns of :func:`busy_intervals`.
INTERVAL_COLUMNS = ["t_s", "seconds", "rate_mbit", "deviation"]


def shaper_samples(text: str) -> pd.DataFrame:
    """The samples of a ``qdisc.jsonl`` as the invariant reads them (SAMPLE_COLUMNS; the backlog
    of the first :data:`netrepro.core.tc.SHAPERS` layer, else the root's):
    :func:`analysis.raw.parse_shaper_samples`."""
    return parse_shaper_samples(text, tc.SHAPERS)


#: The length of a busy window, s: consecutive samples with a backlog are joined into windows
#: at least this long. The sampler reads its clock and the device's counter a few ms apart
#: on a loaded node, which moves one 0.1-s interval's rate by +-10 % or more, in pairs (a late
#: read inflates one interval and deflates the next: measured on
#: tests/data/pie-vs-red-local-0.1, where single intervals spread from -47 % to +38 % around
#: a median of -0.3 %); over 0.5 s that error is five times smaller, while a node that cannot
#: keep up still shows (-21 % in the same run), and a 5-s phase still has ten windows.
WINDOW_S = 0.5


def busy_intervals(samples: pd.DataFrame, rate_mbit: float, lo: float, hi: float,
                   window_s: float = WINDOW_S) -> pd.DataFrame:
    """The busy windows of a port between the epoch times ``lo`` and ``hi`` (s) and how far
    each one's sending rate was from the shaped one.

    A busy window is a run of consecutive samples within ``[lo, hi]``, each with a backlog
    above zero, spanning at least ``window_s`` (:data:`WINDOW_S`; consecutive windows share
    their edge sample); what is left of a run shorter than that is not a window. The queue
    may still have run dry between two samples, which shows as a rate below the shaped one
    and is what the health check's tolerance absorbs. Returns INTERVAL_COLUMNS, one row per
    window: ``t_s`` (its start, s from ``lo``), ``seconds`` (its length), ``rate_mbit`` (tx
    bytes x 8 / length / 1e6) and ``deviation`` (rate / ``rate_mbit`` - 1: 0 is faithful,
    -0.3 a link at 70 % of its rate). A counter that goes backwards (a device reset) ends a
    run."""
    s = samples[(samples["t_epoch_s"] >= lo) & (samples["t_epoch_s"] <= hi)]
    t, tx, q = (s[c].to_numpy() for c in SAMPLE_COLUMNS)
    rows, first = [], None
    for i in range(len(t)):
        if q[i] <= 0 or (first is not None and tx[i] < tx[i - 1]):
            first = i if q[i] > 0 else None
            continue
        if first is None:
            first = i
        elif t[i] - t[first] >= window_s - 1e-9:
            dt = t[i] - t[first]
            rate = (tx[i] - tx[first]) * 8 / dt / 1e6
            rows.append((t[first] - lo, dt, rate, rate / rate_mbit - 1))
            first = i
    return pd.DataFrame(rows, columns=INTERVAL_COLUMNS, dtype=float)


def shaped_ports(model, trial: dict) -> dict[str, float]:
    """Sampled port (``node:interface``, a ``qdisc_stats`` collector's ``at``) -> its shaped
    rate (Mbit/s) in ``trial`` (a trial of ``model``, the model at the run's rate scale), for
    every collector whose port's stack has a shaper; ports without one are left out."""
    out = {}
    for c in model.collectors:
        if c.kind == "qdisc_stats":
            rate = tc.shaping_rate_mbit(trial.stack(c.at))
            if rate:
                out[c.at] = float(rate)
    return out


def off_count(intervals: pd.DataFrame, tolerance: float) -> int:
    """How many of ``intervals`` (:func:`busy_intervals`) have a |deviation| above
    ``tolerance`` (a fraction of the rate)."""
    return int((intervals["deviation"].abs() > tolerance).sum())


def off_share(intervals: pd.DataFrame, tolerance: float) -> float:
    """The share of ``intervals`` (:func:`busy_intervals`) whose |deviation| exceeds
    ``tolerance`` (a fraction of the rate, :func:`off_count`); NaN without an interval."""
    if not len(intervals):
        return math.nan
    return off_count(intervals, tolerance) / len(intervals)


#: The fewest busy windows of a port from which ``shaper_rate_off`` judges its share off
#: (analysis/health.py): a window's rate below the shaped one can come from the queue running dry
#: between two samples that both showed a backlog (:func:`busy_intervals`), not from the link,
#: and with one or two windows such a window decides alone. One window of 1 (a 5-s quick trial
#: of pacing-lab's single unpaced flow, whose queue rarely stays busy for 0.5 s: 13 % slow)
#: gave a bound of 27 % against 5 %, while the same trial had no busy window at all in four other
#: runs (docs/runs/quick-pacing-lab-2026-11-28). Five: as many as the fewest batches an
#: interval is formed from (:data:`analysis.uncertainty.MIN_BATCHES`), 2.5 s of a busy link.
MIN_WINDOWS = 5

#: Confidence of :func:`off_share_lower_bound`: one-sided 95 %.
OFF_SHARE_CONFIDENCE = 0.95


def off_share_lower_bound(off: int, windows: int, confidence: float = OFF_SHARE_CONFIDENCE) -> float:
    """The one-sided lower confidence bound of the share of off windows, ``off`` of
    ``windows``: the Wilson score interval (E. B. Wilson, "Probable inference, the law of
    succession, and statistical inference", JASA 22, 1927; scipy.stats.binomtest's
    ``proportion_ci(method="wilson")`` at a two-sided level of ``2 * confidence - 1``).

    Why a bound and not the share: a short trial has few busy windows (14 at 2 Mbit/s in a
    9-s trial), and one window off in 14 (7 %) is no evidence that a link is off more than
    5 % of the time; the bound of 1 in 14 is 1.6 %, of 3 in 14 8.9 %, and it nears the share
    as windows accumulate (hundreds in a full-length trial). NaN without a window.

    Raises:
        ValueError: ``off`` outside 0..``windows`` or ``confidence`` outside (0.5, 1).
    """
    if windows == 0:
        return math.nan
    if not 0 <= off <= windows or not 0.5 < confidence < 1:
        raise ValueError(f"off_share_lower_bound: {off} of {windows} at confidence {confidence}")
    from scipy.stats import binomtest
    low = binomtest(off, windows).proportion_ci(confidence_level=2 * confidence - 1, method="wilson").low
    return max(0.0, float(low))


def ccdf(deviations: pd.Series | np.ndarray) -> pd.DataFrame:
    """The complementary CDF of |deviation|, as Mininet-HiFi plots its dequeue-gap errors:
    columns ``abs_deviation`` (sorted ascending) and ``share_above`` (the share of intervals
    whose |deviation| is at least that value, 1 .. 1/n)."""
    d = np.sort(np.abs(np.asarray(deviations, dtype=float)))
    d = d[np.isfinite(d)]
    n = len(d)
    return pd.DataFrame({"abs_deviation": d, "share_above": (n - np.arange(n)) / n if n else np.array([])})


def timer_lateness_ms(t_epoch_s, interval_s: float) -> np.ndarray:
    """How late a deadline-paced sampler woke for each of its samples, ms: a node's timer
    latency under the trial's own load, as cyclictest measures it (rt-tests: the time read on
    waking minus the timer's programmed expiry), from samples netrepro takes anyway.

    roles/collectors/files/nr-qdisc-stats.sh takes its k-th sample at the deadline
    ``first + k * interval_s`` (it never skips one: a sample later than the next deadline is
    followed by the next at once) and reads ``$EPOCHREALTIME`` as soon as its ``read -t`` wait
    returns, so ``t_k - (first + k * interval_s)`` is the wake-up's lateness plus the shell's
    few instructions. ``first`` (start minus the role's margin) is not recorded; it is taken
    as ``min_k(t_k - k * interval_s)``: the most punctual sample counts as on time, so every
    lateness is a lower bound of the true one (never overstated).

    Args:
        t_epoch_s: the sample times in file order (epoch s; every line of one qdisc.jsonl).
        interval_s: the collector's ``interval_s`` (s).
    Returns:
        lateness per sample, ms (>= 0), in file order; empty for no samples.
    Raises:
        ValueError: ``interval_s`` not positive.
    """
    if not interval_s > 0:
        raise ValueError(f"timer_lateness_ms: interval_s {interval_s} is not positive")
    t = np.asarray(t_epoch_s, dtype=float)
    if not len(t):
        return t
    due = np.arange(len(t)) * float(interval_s)
    return (t - due - (t - due).min()) * 1000


def trial_busy_intervals(model, trial: dict, read, start: float, end: float) -> dict[str, tuple[float, pd.DataFrame]]:
    """Sampled, shaped port -> (its shaped rate, Mbit/s; its :func:`busy_intervals` between the
    epoch times ``start`` and ``end``) for one trial of ``model`` (at the run's rate scale).
    ``read(node)``: the text of that node's qdisc.jsonl (what it raises propagates)."""
    return {port: (rate, busy_intervals(shaper_samples(read(Port.parse(port).node)), rate, start, end))
            for port, rate in shaped_ports(model, trial).items()}


def run_busy_intervals(model, records: dict[str, dict], raw_dir: Path,
                       time_scale: float) -> dict[str, dict[str, tuple[float, pd.DataFrame]]]:
    """:func:`trial_busy_intervals` of every trial record of a run: key of ``records`` -> port
    -> (shaped rate, Mbit/s; busy windows). A record's trial is the model's ``trial`` (a
    repeated run's instance), else its ``id``; its raw files are ``raw_dir/<id>/``; its window
    is ``start_epoch_s`` plus ``duration_s`` (else the trial's schedule at ``time_scale``).
    Records without a start, of no trial of ``model``, or whose qdisc.jsonl cannot be read
    are left out (their health check says why)."""
    trials = {t.id: t for t in model.trials}
    out = {}
    for key, rec in records.items():
        trial, start = trials.get(rec.get("trial") or rec.get("id")), rec.get("start_epoch_s")
        if trial is None or isinstance(start, bool) or not isinstance(start, (int, float)):
            continue
        duration = rec.get("duration_s")
        if isinstance(duration, bool) or not isinstance(duration, (int, float)) or not duration:
            duration = trial.duration_s * time_scale
        try:
            out[key] = trial_busy_intervals(model, trial, lambda node: (raw_dir / rec["id"] / node / "qdisc.jsonl")
                                            .read_text(encoding="utf-8", errors="replace"), start, start + duration)
        except OSError:
            continue
    return out


#: The |deviation| at which :func:`summary` gives the CCDF: 1, 5, 10 and 20 % of the rate.
CCDF_AT = (0.01, 0.05, 0.10, 0.20)


def summary(intervals: pd.DataFrame, tolerance: float) -> dict:
    """A port's busy windows (:func:`busy_intervals`) in figures: ``{"intervals", "busy_s", "median_deviation",
    "p99_abs_deviation", "off_share", "ccdf": {"1%": share, ...}}`` (:data:`CCDF_AT`;
    NaN without an interval)."""
    d = intervals["deviation"] if len(intervals) else pd.Series(dtype=float)
    return {"intervals": int(len(d)), "busy_s": float(intervals["seconds"].sum()) if len(d) else 0.0,
            "median_deviation": float(d.median()) if len(d) else math.nan,
            "p99_abs_deviation": float(d.abs().quantile(0.99)) if len(d) else math.nan,
            "off_share": off_share(intervals, tolerance),
            "ccdf": {f"{x:.0%}": (float((d.abs() >= x).mean()) if len(d) else math.nan) for x in CCDF_AT}}


def ccdf_figure(by_trial: dict[str, dict[str, pd.DataFrame]], tolerance: float, caption: str):
    """The CCDF of |deviation| of every trial's busy windows (trial -> port -> windows),
    one line per trial and port, log-scaled share, the tolerance as a dashed line: the
    distribution Mininet-HiFi plots for its dequeue gaps. Returns a matplotlib Figure (Agg,
    no pyplot), or None when no trial has a busy window."""
    from analysis.figures import new_figure

    curves = [(f"{t}" + (f" ({p})" if len(ports) > 1 else ""), ccdf(iv["deviation"]))
              for t, ports in by_trial.items() for p, iv in ports.items() if len(iv)]
    if not curves:
        return None
    fig, axes = new_figure(1, 1, height=3.8)
    ax = axes[0][0]
    for label, c in curves:
        ax.step(100 * c["abs_deviation"], c["share_above"], where="post", label=f"{label}, {len(c)} windows")
    ax.axvline(100 * tolerance, color="0.3", ls="--", lw=0.9, label=f"tolerance {tolerance:.0%}")
    ax.set_yscale("log")
    ax.set_xlabel(f"|sending rate - shaped rate| over a busy window of {WINDOW_S:g} s or more (% of the shaped rate)")
    ax.set_ylabel("share of busy windows at least this far off")
    ax.set_title(f"Link fidelity (Mininet-HiFi's invariant): {caption}", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    return fig


__all__ = ["SAMPLE_COLUMNS", "INTERVAL_COLUMNS", "CCDF_AT", "shaper_samples", "busy_intervals", "shaped_ports",
           "MIN_WINDOWS", "timer_lateness_ms", "off_count", "off_share", "off_share_lower_bound", "OFF_SHARE_CONFIDENCE", "ccdf", "trial_busy_intervals", "run_busy_intervals", "summary", "ccdf_figure"]
