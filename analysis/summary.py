"""Per-phase statistics of a run (``summary.csv``): one row per aqm x variant x phase."""

from __future__ import annotations

import math
from typing import Sequence

import numpy as np
import pandas as pd

from analysis.run import TrialInfo

SUMMARY_COLUMNS = [
    "aqm", "variant", "phase", "flows", "start_s", "end_s", "samples",
    "delay_median_ms", "delay_mean_ms", "delay_p95_ms", "utilization",
]

#: A phase's utilization is computed only if tx_bytes samples cover at least this share of it.
MIN_COVERAGE = 0.9


def phase_utilization(t_s, tx_bytes, start_s: float, end_s: float, rate_mbit: float,
                      min_coverage: float = MIN_COVERAGE) -> float:
    """Share of the bottleneck's capacity used during [start_s, end_s].

    utilization = (tx_bytes(b) - tx_bytes(a)) / (rate_mbit * 1e6 / 8 * (b - a)), clipped to
    0..1, where tx_bytes(.) is the interface byte counter linearly interpolated between
    samples (numpy.interp) and [a, b] = [start_s, end_s] intersected with the span of the
    samples (never extrapolated).

    Args:
        t_s: sample times (s), any order; tx_bytes: counter values (bytes) at those times.
        start_s, end_s: phase boundaries (s); rate_mbit: bottleneck rate (Mbit/s).
        min_coverage: fraction of the phase the samples must span, else NaN.
    Returns:
        utilization in 0..1, or NaN (too little coverage, no samples, or the counter
        decreased inside the phase, e.g. a reset).
    """
    t = np.asarray(t_s, dtype=float)
    b = np.asarray(tx_bytes, dtype=float)
    ok = np.isfinite(t) & np.isfinite(b)
    t, b = t[ok], b[ok]
    if t.size < 2 or not end_s > start_s or not rate_mbit > 0:
        return math.nan
    order = np.argsort(t, kind="stable")
    t, b = t[order], b[order]
    a_, b_ = max(start_s, t[0]), min(end_s, t[-1])
    if b_ - a_ < min_coverage * (end_s - start_s):
        return math.nan
    inside = (t > a_) & (t < b_)
    if np.any(np.diff(np.concatenate(([np.interp(a_, t, b)], b[inside], [np.interp(b_, t, b)]))) < 0):
        return math.nan
    sent = np.interp(b_, t, b) - np.interp(a_, t, b)
    return float(np.clip(sent / (rate_mbit * 1e6 / 8 * (b_ - a_)), 0.0, 1.0))


def summarize(tidy: pd.DataFrame, trials: Sequence[TrialInfo]) -> pd.DataFrame:
    """One row per trial x phase, columns SUMMARY_COLUMNS, in trial then phase order.

    - samples: ping samples (rtt_ms rows) in the phase, all clients pooled.
    - delay_median_ms / delay_mean_ms / delay_p95_ms: median, mean and 95th percentile
      (linear interpolation, pandas ``quantile(0.95)``) of queueing_delay_ms over all
      clients' samples in the phase; NaN when there is none.
    - utilization: :func:`phase_utilization` of the router's tx_bytes counter (qdisc source).
      With several qdisc nodes the first one in the table is used.
    - start_s, end_s, flows: from the trial's (time-scaled) phases.

    Args:
        tidy: the table of :func:`analysis.tidy.build_tidy` (TIDY_COLUMNS).
        trials: the trials (aqm, variant, phases, rate_mbit), e.g. ``RunInfo.trials``.
    Returns:
        DataFrame; trials absent from ``tidy`` give rows with 0 samples and NaN statistics.
    """
    rows = []
    for tr in trials:
        mine = tidy[tidy["trial"] == tr.id] if len(tidy) else tidy
        ping = mine[(mine["source"] == "ping")]
        rtt = ping[ping["metric"] == "rtt_ms"]
        delay = ping[ping["metric"] == "queueing_delay_ms"]
        tx = mine[(mine["source"] == "qdisc") & (mine["metric"] == "tx_bytes")]
        if len(tx):
            tx = tx[tx["node"] == tx["node"].iloc[0]]
        for ph in tr.phases:
            d = delay.loc[delay["phase"] == ph["name"], "value"].astype(float)
            rows.append({
                "aqm": tr.aqm, "variant": tr.variant, "phase": ph["name"],
                "flows": ph.get("flows", math.nan), "start_s": float(ph["start_s"]), "end_s": float(ph["end_s"]),
                "samples": int((rtt["phase"] == ph["name"]).sum()),
                "delay_median_ms": d.median() if len(d) else math.nan,
                "delay_mean_ms": d.mean() if len(d) else math.nan,
                "delay_p95_ms": d.quantile(0.95) if len(d) else math.nan,
                "utilization": phase_utilization(tx["t_s"], tx["value"], ph["start_s"], ph["end_s"], tr.rate_mbit),
            })
    return pd.DataFrame(rows, columns=SUMMARY_COLUMNS)
