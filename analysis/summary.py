"""Per-phase statistics of a run (``summary.csv``): one row per aqm x variant x phase."""

from __future__ import annotations

import math
from typing import Sequence

import pandas as pd

from analysis.generic import phase_utilization
from analysis.run import TrialInfo

SUMMARY_COLUMNS = [
    "aqm", "variant", "phase", "flows", "start_s", "end_s", "samples",
    "delay_median_ms", "delay_mean_ms", "delay_p95_ms", "utilization",
]

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
