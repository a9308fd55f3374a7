"""A trial's statistics (``summary.csv``) and their within-trial intervals (``intervals.csv``).

The statistics (``summary.csv``): ``trial, phase, subject, statistic, value`` plus the
trial's labels; phase ``all`` is the whole trial, then each phase of the file:

==============================  ==================================================================
iperf3 item                     ``throughput_mbit`` (iperf3's end summary, :func:`delivered_bps`, omitted seconds
                                left out; per phase: the mean of its intervals), ``retransmits``,
                                ``rtt_mean_ms`` and ``cwnd_mean_bytes`` (over its streams'
                                intervals), ``throughput_cov`` (coefficient of variation
                                std/mean of its per-interval throughput), ``stream_jain_index``
                                (Jain's index over its parallel streams) and
                                ``stream_throughput_cov`` (coefficient of variation of their
                                mean throughputs), ``share`` (of the trial's total)
ping item                       ``rtt_median_ms``, ``rtt_mean_ms``, ``rtt_p95_ms``, ``rtt_min_ms``,
                                ``ping_received_fraction``; with ``base_rtt``,
                                ``queue_delay_median_ms``, ``queue_delay_mean_ms``,
                                ``queue_delay_p95_ms`` (of RTT - base RTT: :func:`base_rtt_of`)
                                and ``queue_delay_samples``
sampled port (``node:if``)      ``backlog_mean_bytes``, ``backlog_max_bytes``,
                                ``backlog_mean_ms`` and ``backlog_max_ms`` (bytes x 8 / the
                                stack's shaping rate), ``drops``, ``utilization`` (the
                                iperf3 items' total over that rate), ``sent_utilization``
                                (the interface's sent bytes over that rate:
                                :func:`phase_utilization`); with ``classes``,
                                ``busy_classes_max`` (the most classes of the leaf qdisc
                                holding packets at once) and ``classes_in_use`` (classes
                                that held packets in >= CLASS_IN_USE_SHARE of the samples
                                where any did: fq_codel's buckets the flows hashed into)
``all`` (the trial)             ``total_throughput_mbit``, ``jain_index`` (over its iperf3
                                items), ``retransmits``; with ``base_rtt``, the queueing delay
                                statistics of the ping items' samples pooled
==============================  ==================================================================

Jain's fairness index: J = (sum x)^2 / (n sum x^2) (R. Jain, D. Chiu, W. Hawe, DEC-TR-301,
1984), 1/n .. 1; the coefficient of variation: population std / mean.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from analysis import uncertainty
from analysis.uncertainty import Estimate
from netrepro.core import tc
from netrepro.model import SUMMARY_COLUMNS


#: A class of a port's leaf qdisc is in use when it held packets in at least this share of the
#: samples in which any class did: a flow's fq_codel bucket holds packets much more often than
#: that, and a stray packet (ARP, a probe) sits in a bucket well under 1 % of the samples.
CLASS_IN_USE_SHARE = 0.1


SUMMARY_KEYS = list(SUMMARY_COLUMNS)


#: A phase's utilization is computed only if tx_bytes samples cover at least this share of it.
MIN_COVERAGE = 0.9


def phase_utilization(t_s, tx_bytes, start_s: float, end_s: float, rate_mbit: float,
                      min_coverage: float = MIN_COVERAGE) -> float:
    """Share of a shaped port's capacity used during [start_s, end_s] (the phase's ``sent_utilization``).

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


def jain_index(x) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2) of the values ``x`` (NaN left out);
    NaN when none is left or all are 0. 1 when all are equal, 1/n when one takes all."""
    a = np.asarray([v for v in x if v is not None and math.isfinite(v)], dtype=float)
    if a.size == 0 or not np.any(a):
        return math.nan
    return float(a.sum() ** 2 / (a.size * (a ** 2).sum()))


def cov(x) -> float:
    """Coefficient of variation: population standard deviation / mean (NaN when the mean is 0
    or nothing is left after dropping NaN)."""
    a = np.asarray([v for v in x if v is not None and math.isfinite(v)], dtype=float)
    if a.size == 0 or a.mean() == 0:
        return math.nan
    return float(a.std() / a.mean())


def delivered_bps(end: dict) -> float:
    """An iperf3 item's throughput over its whole run, bit/s: the receiver's count
    (``end.sum_received``), what crossed the path, else the sender's (``end.sum_sent``) when
    the report has no receiver's summary; NaN when it has neither.

    The sender counts what it wrote into its socket, which at the end still holds bytes
    queued at the bottleneck, in flight and in the send buffer: with a 60 KB queue on a
    20 Mbit/s link, a 10 s flow's sender count was 1.5 % above the link's rate while the
    receiver's was below it (iperf3 3.12, ``iperf_api.c`` iperf_print_results: sender and
    receiver summaries)."""
    recv = end.get("received_bps", math.nan)
    if recv is not None and math.isfinite(recv) and recv > 0:
        return float(recv)
    sent = end.get("sent_bps", math.nan)
    return float(sent) if sent is not None else math.nan


def _putter(rows: list[dict], trial_id: str):
    """A function ``put(phase, subject, statistic, value)`` that appends a row to ``rows``
    when the value is finite (as a float), and leaves it out otherwise."""
    def put(phase, subject, statistic, value):
        if value is not None and math.isfinite(value):
            rows.append({"trial": trial_id, "phase": phase, "subject": subject, "statistic": statistic,
                         "value": float(value)})
    return put


def _put_delays(put, phase: str, subject: str, q: pd.Series) -> None:
    """Queueing delay statistics of the samples ``q`` (ms): median, mean, p95 (pandas
    quantile, linear interpolation) and how many there are."""
    if len(q):
        put(phase, subject, "queue_delay_median_ms", q.median())
        put(phase, subject, "queue_delay_mean_ms", q.mean())
        put(phase, subject, "queue_delay_p95_ms", q.quantile(0.95))
    put(phase, subject, "queue_delay_samples", len(q))


def _iperf3_statistics(put, phase: str, item: str, s: pd.DataFrame, end: dict) -> float:
    """Put an iperf3 item's statistics of the window (its samples ``s``, its end summary
    ``end``); returns its throughput (Mbit/s, NaN without samples)."""
    total = s[(s["stream"] == -1) & (s["metric"] == "throughput_mbit")]["value"]
    mean_mbit = (delivered_bps(end) / 1e6 if phase == "all"
                 else (total.mean() if len(total) else math.nan))
    put(phase, item, "throughput_mbit", mean_mbit)
    put(phase, item, "throughput_cov", cov(total))
    streams = s[(s["stream"] >= 0)]
    put(phase, item, "retransmits", streams[streams["metric"] == "retransmits"]["value"].sum()
        if len(streams) else math.nan)
    put(phase, item, "rtt_mean_ms", streams[streams["metric"] == "rtt_ms"]["value"].mean())
    put(phase, item, "cwnd_mean_bytes", streams[streams["metric"] == "cwnd_bytes"]["value"].mean())
    per_stream = streams[streams["metric"] == "throughput_mbit"].groupby("stream")["value"].mean()
    if len(per_stream) > 1:
        put(phase, item, "stream_jain_index", jain_index(per_stream.to_numpy()))
        put(phase, item, "stream_throughput_cov", cov(per_stream.to_numpy()))
    return mean_mbit


def _ping_statistics(put, phase: str, it: dict, s: pd.DataFrame, base_rtt, time_scale: float) -> None:
    """Put a ping item's statistics of the window (its samples ``s``): RTTs, with ``base_rtt``
    its queueing delays, and for the whole trial the share of its probes answered."""
    r = s[s["metric"] == "rtt_ms"]["value"]
    if len(r):
        put(phase, it.id, "rtt_median_ms", r.median())
        put(phase, it.id, "rtt_mean_ms", r.mean())
        put(phase, it.id, "rtt_p95_ms", r.quantile(0.95))
        put(phase, it.id, "rtt_min_ms", r.min())
    if base_rtt:
        _put_delays(put, phase, it.id, s[s["metric"] == "queue_delay_ms"]["value"])
    if phase == "all":
        expected = it.duration_s * time_scale / it.interval_s
        put(phase, it.id, "ping_received_fraction", min(1.0, len(r) / expected) if expected else math.nan)


def _port_statistics(put, phase: str, at: str, s: pd.DataFrame, tx: pd.DataFrame, trial: dict,
                     window: tuple[float, float], time_scale: float) -> None:
    """Put a sampled port's statistics of the window (its samples ``s``, the trial's
    ``tx_bytes`` rows ``tx``, ``window`` the phase's (lo, hi) in s; phase ``all`` spans the
    trial's schedule): backlog, sent utilization, busy classes and drops."""
    b = s[s["metric"] == "backlog_bytes"]["value"]
    if not len(b):
        return
    put(phase, at, "backlog_mean_bytes", b.mean())
    put(phase, at, "backlog_max_bytes", b.max())
    rate = tc.shaping_rate_mbit(trial.stack(at))
    if rate:
        put(phase, at, "backlog_mean_ms", b.mean() * 8 / (rate * 1e6) * 1000)
        sent = tx[tx["subject"] == at]
        a, z = (0.0, trial.duration_s * time_scale) if phase == "all" else window
        put(phase, at, "sent_utilization", phase_utilization(sent["t_s"], sent["value"], a, z, rate))
        put(phase, at, "backlog_max_ms", b.max() * 8 / (rate * 1e6) * 1000)
    busy = s[(s["metric"] == "busy_classes") & (s["value"] > 0)]["value"]
    if len(busy):
        put(phase, at, "busy_classes_max", busy.max())
        held = s[(s["metric"] == "class_backlog_packets") & (s["value"] > 0)].groupby("stream").size()
        put(phase, at, "classes_in_use", int((held >= CLASS_IN_USE_SHARE * len(busy)).sum()))
    drops = s[s["metric"] == "drops"]["value"]
    put(phase, at, "drops", drops.max() - drops.min() if len(drops) else math.nan)


def _trial_totals(put, rows: list[dict], phase: str, model, trial: dict, thr: dict[str, float]) -> None:
    """Put the window's totals over its iperf3 items (``thr``: item id -> throughput, Mbit/s):
    total throughput, each port's utilization, Jain's index, each item's share, and the sum
    of the items' retransmits already in ``rows``."""
    # a window in which no iperf3 item has a sample (its omitted seconds, a batch before the
    # flows start: trial_intervals) has no total throughput, rather than a total of 0
    if not (thr and any(math.isfinite(v) for v in thr.values())):
        return
    total = float(np.nansum(list(thr.values())))
    put(phase, "all", "total_throughput_mbit", total)
    for c in model.collectors:  # the share of the sampled port's shaping rate used
        rate = tc.shaping_rate_mbit(trial.stack(c.at))
        if rate:
            put(phase, c.at, "utilization", total / rate)
    if len(thr) > 1:
        put(phase, "all", "jain_index", jain_index(list(thr.values())))
    for k, v in thr.items():
        put(phase, k, "share", v / total if total else math.nan)
    rtx = [r["value"] for r in rows if r["phase"] == phase and r["statistic"] == "retransmits"
           and r["subject"] in thr]
    put(phase, "all", "retransmits", sum(rtx) if rtx else math.nan)


def trial_statistics(model, trial: dict, tidy: pd.DataFrame, ends: dict, phases: list[dict],
                     time_scale: float = 1.0, whole: bool = True) -> list[dict]:
    """The statistics of one trial (see the module docstring) for phase ``all`` (unless not
    ``whole``) and each phase (start_s/end_s, time-scaled); rows ``{trial, phase, subject,
    statistic, value}``."""
    rows: list[dict] = []
    put = _putter(rows, trial.id)
    pings = [it.id for it in trial.traffic if it.kind == "ping"]
    tx = tidy[tidy["metric"] == "tx_bytes"]
    windows = ([("all", -math.inf, math.inf)] if whole else []) + [(p["name"], p["start_s"], p["end_s"]) for p in phases]
    for phase, lo, hi in windows:
        d = tidy[(tidy["t_s"] > lo) & (tidy["t_s"] <= hi)] if phase != "all" else tidy
        if pings and model.base_rtt:  # pooled over the trial's ping items
            _put_delays(put, phase, "all", d[d["subject"].isin(pings) & (d["metric"] == "queue_delay_ms")]["value"])
        thr = {}
        for it in trial.traffic:
            s = d[d["subject"] == it.id]
            if it.kind == "iperf3":
                thr[it.id] = _iperf3_statistics(put, phase, it.id, s, ends.get(it.id, {}))
            elif it.kind == "ping":
                _ping_statistics(put, phase, it, s, model.base_rtt, time_scale)
        for c in model.collectors:
            _port_statistics(put, phase, c.at, d[d["subject"] == c.at], tx, trial, (lo, hi), time_scale)
        _trial_totals(put, rows, phase, model, trial, thr)
    return rows


#: The columns of intervals.csv: each statistic's within-trial 95 % interval by batch means
#: (:func:`trial_intervals`), ``sd`` the standard error of its value, ``batches`` how many.
INTERVAL_COLUMNS = ["trial", "phase", "subject", "statistic", "value", "low", "high", "sd", "batches"]


#: The metrics whose series pace a trial's batches (:func:`coarsest_times`): each traffic
#: item's and each sampled port's own samples, not a class's or a qdisc field's, which are
#: recorded only while they hold something.
BATCH_METRICS = ("throughput_mbit", "rtt_ms", "backlog_bytes", "tx_bytes")


def coarsest_times(tidy: pd.DataFrame) -> np.ndarray:
    """The sample times (s, sorted) of a trial's most sparsely sampled series among
    :data:`BATCH_METRICS` (one per subject, stream and metric): the one with the largest
    median spacing between samples, an iperf3 item's 1-s reports beside 0.1-s pings and
    queue samples. Empty without a series of two samples."""
    best, spacing = np.empty(0), 0.0
    for _, g in tidy[tidy["metric"].isin(BATCH_METRICS)].groupby(["subject", "stream", "metric"], sort=False)["t_s"]:
        t = np.sort(g.to_numpy(dtype=float))
        if len(t) > 1 and float(np.median(np.diff(t))) > spacing:
            best, spacing = t, float(np.median(np.diff(t)))
    return best


def batch_edges(times: np.ndarray, lo: float, hi: float) -> list[float]:
    """The edges ``lo = e0 < e1 < ... < eB = hi`` of the batches of the window (lo, hi]: B is
    :func:`analysis.uncertainty.batch_count` of the coarsest series' samples in the window
    (``times``), and each inner edge is one of them, so that every batch (e[i-1], e[i]] holds
    the same number of its samples, give or take one. Empty when there are too few for
    :data:`analysis.uncertainty.MIN_BATCHES` batches."""
    t = times[(times > lo) & (times <= hi)]
    b = uncertainty.batch_count(len(t))
    if not b:
        return []
    inner = [float(t[int(round(i * len(t) / b)) - 1]) for i in range(1, b)]
    edges = [lo, *inner, hi]
    return edges if all(x < y for x, y in zip(edges, edges[1:])) else []


def trial_intervals(model, trial: dict, tidy: pd.DataFrame, ends: dict, phases: list[dict], rows: list[dict],
                    time_scale: float = 1.0) -> list[dict]:
    """The within-trial 95 % interval of each of the trial's statistics in
    :data:`analysis.uncertainty.SECTIONED`, for phase ``all`` (the trial's schedule, to its
    last sample of the coarsest series when that comes later: iperf3 stamps an interval at its
    end) and each phase: the window is cut into batches that each hold as many samples of the
    trial's most sparsely sampled series (:func:`coarsest_times`, :func:`batch_edges`), each
    batch's statistics are computed as a phase's (:func:`trial_statistics`), and the interval
    is :func:`analysis.uncertainty.sectioning` around the window's value in ``rows`` (the
    trial's :func:`trial_statistics`). Rows :data:`INTERVAL_COLUMNS`; none for a window
    with fewer than :data:`analysis.uncertainty.MIN_BATCHES` samples of that series."""
    times = coarsest_times(tidy)
    end = trial.duration_s * time_scale
    windows = [("all", 0.0, max(end, float(times[-1])) if len(times) else end)] + \
        [(p["name"], p["start_s"], p["end_s"]) for p in phases]
    batches, name_of = [], {}
    for name, lo, hi in windows:
        edges = batch_edges(times, lo, hi)
        for i, (a, z) in enumerate(zip(edges, edges[1:])):
            key = f"{name}#{i}"
            name_of[key] = name
            batches.append({"name": key, "start_s": a, "end_s": z})
    if not batches:
        return []
    per: dict[tuple[str, str, str], list[float]] = {}
    for r in trial_statistics(model, trial, tidy, ends, batches, time_scale, whole=False):
        if r["statistic"] in uncertainty.SECTIONED:
            per.setdefault((name_of[r["phase"]], r["subject"], r["statistic"]), []).append(r["value"])
    out = []
    for r in rows:
        e = uncertainty.sectioning(r["value"], per.get((r["phase"], r["subject"], r["statistic"]), []))
        e = uncertainty.within_range(e, r["statistic"])  # a delay's interval never below 0
        if e.has_interval:
            out.append({"trial": r["trial"], "phase": r["phase"], "subject": r["subject"], "statistic": r["statistic"],
                        "value": e.value, "low": e.low, "high": e.high, "sd": e.sd, "batches": e.n})
    return out


def estimates_of(intervals: pd.DataFrame) -> dict:
    """intervals.csv's rows (:data:`INTERVAL_COLUMNS`) as (trial, subject, phase, statistic)
    -> :class:`analysis.uncertainty.Estimate`, what :func:`evaluate` reads."""
    return {(r.trial, r.subject, r.phase, r.statistic):
            Estimate(float(r.value), float(r.low), float(r.high), float(r.sd), int(r.batches),
                     f"batch means of {int(r.batches)}")
            for r in intervals.itertuples(index=False)}
