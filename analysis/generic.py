"""Analysis of a run of any experiment (:mod:`netrepro.model`).

Nothing here knows an experiment, a qdisc or a claim by name: what is measured follows from
the trial's traffic items and collectors, and what is judged from the file's ``claims``.

- **tidy** (one row per sample, long form): ``trial, subject, stream, t_s, metric, value``;
  subjects are traffic item ids (iperf3: ``throughput_mbit``, ``retransmits``,
  ``cwnd_bytes``, ``rtt_ms`` per stream and interval, stream -1 = the item's sum; ping:
  ``rtt_ms``, and ``queue_delay_ms`` with ``base_rtt``) and sampled ports (``backlog_bytes``,
  ``backlog_packets``, ``drops``, ``tx_bytes`` (the interface's counter, with the sample
  before and after the trial), each
  qdisc's own fields as ``<kind>_<field>`` (:func:`analysis.raw.parse_qdisc_fields`), and with
  the collector's ``classes``: ``class_backlog_packets`` per class of the leaf qdisc (stream =
  the class's minor number: fq_codel's bucket + 1) and ``busy_classes``);
  ``t_s`` counts from the trial's common start.
- **statistics** (``summary.csv``): ``trial, phase, subject, statistic, value`` plus the
  trial's labels; phase ``all`` is the whole trial, then each phase of the file:

  ==============================  ==================================================================
  iperf3 item                     ``throughput_mbit`` (iperf3's end summary, :func:`delivered_bps`, omitted seconds
                                  left out; per phase: the mean of its intervals), ``retransmits``,
                                  ``rtt_mean_ms`` and ``cwnd_mean_bytes`` (over its streams'
                                  intervals), ``throughput_cov`` (coefficient of variation
                                  std/mean of its per-interval throughput), ``stream_jain_index``
                                  (Jain's index over its parallel streams), ``share`` (of the
                                  trial's total)
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
- **claims**: ``bound`` (every selected value within min/max), ``difference`` and ``ratio``
  (each value of ``higher`` against the value of ``lower`` in the same position: min <=
  difference <= max, its absolute value with ``absolute``; ratio >= min), ``all_of`` (every
  one of its ``checks`` holds; not evaluable when one is), ``rise_and_fall`` (over ``order`` = phases or trials, non-decreasing
  to ``peak`` then non-increasing, each step within ``tolerance``, peak above both ends by
  ``min_rise``). A selection lists values in the order trials x subjects x phases (phase
  ``all`` by default; subjects by default those the model says compute the statistic:
  :func:`netrepro.model.statistics`). A claim reading a trial that failed a health check is
  inconclusive; a claim reading a trial whose raw files are damaged (analysed with
  ``--partial``) or whose values are missing or undefined (no row, NaN, a ratio over 0, an
  empty selection) is *not evaluable*, with the reason: it never holds on data it lacks.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd

from analysis import fidelity, uncertainty
from analysis.flent import write_trials
from analysis.generic_figures import caption, draw, figure_specs, save_figure
from analysis.health import failure_line, failures, shaper_rate_tolerance, trial_health
from analysis.io import atomic_path, write_gzip, write_text
from analysis.raw import (parse_iperf3, parse_ping, parse_qdisc_classes, parse_qdisc_fields, parse_qdisc_stack,
                          parse_tx_bytes, trial_base_rtt_ms)
from analysis.report import render_report
from analysis.uncertainty import Estimate
from netrepro import tc
from netrepro.model import RATE_SCALED_FIELDS, SUMMARY_COLUMNS, rate_scaled, scale_rates, statistics

TIDY_COLUMNS = ["trial", "subject", "stream", "t_s", "metric", "value"]
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


def read_raw(path: Path, problems: list[str], run_dir: Path) -> str | None:
    """A raw file's text (bytes that are not UTF-8 replaced), or None after adding
    ``<path relative to run_dir>: missing`` (or why it cannot be read) to ``problems``."""
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        problems.append(f"{path.relative_to(run_dir)}: {'missing' if not path.exists() else exc.strerror}")
        return None


def _t0(path: Path) -> float | None:
    try:
        return float(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def trial_tidy(model, trial: dict, record: dict, trial_dir: Path, time_scale: float,
               problems: list[str]) -> tuple[pd.DataFrame, dict]:
    """Every sample of one trial (TIDY_COLUMNS) and each iperf3 item's end summary
    (item id -> the ``end`` of :func:`analysis.raw.parse_iperf3`). Unreadable files are named
    in ``problems`` (one line each) and skipped."""
    start = float(record["start_epoch_s"])
    run_dir = trial_dir.parent.parent  # <run>/raw/<trial>
    frames, ends = [], {}

    def add(subject, stream, t_s, metric, values):
        if len(values):
            frames.append(pd.DataFrame({"trial": trial["id"], "subject": subject, "stream": stream,
                                        "t_s": np.asarray(t_s, float), "metric": metric,
                                        "value": np.asarray(values, float)}))

    for it in trial["traffic"]:
        node = it["from"]
        if it["kind"] == "iperf3":
            f = trial_dir / node / f"iperf3-{it['id']}.json"
            try:
                iv, end = parse_iperf3(f.read_text(errors="replace"))
            except (OSError, ValueError) as exc:
                problems.append(f"raw/{trial_dir.name}/{node}/{f.name}: {exc}")
                continue
            ends[it["id"]] = end
            t0 = _t0(f.with_name(f.name + ".t0"))
            offset = (t0 - start) if t0 is not None else it["start_s"] * time_scale
            iv = iv[~iv["omitted"]]
            for k, g in iv.groupby("stream"):
                t = offset + g["t_s"].to_numpy()
                add(it["id"], int(k), t, "throughput_mbit", g["bits_per_second"] / 1e6)
                add(it["id"], int(k), t, "retransmits", g["retransmits"])
                add(it["id"], int(k), t, "cwnd_bytes", g["snd_cwnd_bytes"])
                add(it["id"], int(k), t, "rtt_ms", g["rtt_ms"])
            tot = iv.groupby("t_s", sort=True).agg(bps=("bits_per_second", "sum"), rtx=("retransmits", "sum"))
            add(it["id"], -1, offset + tot.index.to_numpy(), "throughput_mbit", tot["bps"] / 1e6)
            add(it["id"], -1, offset + tot.index.to_numpy(), "retransmits", tot["rtx"])
        elif it["kind"] == "ping":
            text = read_raw(trial_dir / node / "ping.txt", problems, run_dir)
            if text is None:
                continue
            p = parse_ping(text)
            if p.empty:
                problems.append(f"raw/{trial_dir.name}/{node}/ping.txt: no echo replies")
            # the probes within the item's schedule, placed at their send time (-D prints the
            # reply's time) or, with ``timestamp: received``, at the reply's
            at = (p["t_epoch_s"] - start if it.get("timestamp") == "received"
                  else p["t_epoch_s"] - p["rtt_ms"] / 1000 - start)
            lo, hi = it["start_s"] * time_scale, (it["start_s"] + it["duration_s"]) * time_scale
            keep = (at >= lo) & (at < hi)
            add(it["id"], -1, at[keep], "rtt_ms", p.loc[keep, "rtt_ms"])
            if model.base_rtt:
                base = base_rtt_of(model, node, record, trial_dir, problems)
                if math.isfinite(base):
                    add(it["id"], -1, at[keep], "queue_delay_ms", p.loc[keep, "rtt_ms"] - base)
    for c in model.collectors:
        node = c.node
        text = read_raw(trial_dir / node / "qdisc.jsonl", problems, run_dir)
        if text is None:
            continue
        q = parse_qdisc_stack(text)
        if q.empty:
            problems.append(f"raw/{trial_dir.name}/{node}/qdisc.jsonl: no samples")
        q = q[(q["t_epoch_s"] >= start) & (q["t_epoch_s"] <= start + trial["duration_s"] * time_scale)]
        t = q["t_epoch_s"] - start
        add(c.at, -1, t, "backlog_bytes", q["backlog_bytes"])
        add(c.at, -1, t, "backlog_packets", q["backlog_packets"])
        add(c.at, -1, t, "drops", q["drops"] - (q["drops"].iloc[0] if len(q) else 0))
        window = (start, start + trial["duration_s"] * time_scale)
        # the node's one collector (netrepro/model/) wrote every line, each labelled with the
        # device as its site names it (the machine's own name on a testbed, the data-plane key
        # on ns3), which need not be the model's: read under any label, as the backlog is
        tx = parse_tx_bytes(text)
        te = tx["t_epoch_s"].to_numpy()
        # the samples inside the trial and the one on each side, so that the counter can be
        # interpolated at the trial's start and end (:func:`phase_utilization`)
        first, last = max(int(np.searchsorted(te, window[0], "left")) - 1, 0), int(np.searchsorted(te, window[1], "right"))
        tx = tx.iloc[first:last + 1]
        # the collector's clock has microseconds: rounded to them, the time drops float noise
        add(c.at, -1, np.round(tx["t_epoch_s"] - start, 6), "tx_bytes", tx["tx_bytes"])
        f = parse_qdisc_fields(text)
        f = f[(f["t_epoch_s"] >= window[0]) & (f["t_epoch_s"] <= window[1])]
        for (kind, field), g in f.groupby(["kind", "field"], sort=True):
            add(c.at, -1, g["t_epoch_s"] - start, f"{kind}_{field}", g["value"])
        stack = trial["qdiscs"].get(c.at, [])
        if c.classes and stack:
            cl = parse_qdisc_classes(text)
            cl = cl[(cl["t_epoch_s"] >= window[0]) & (cl["t_epoch_s"] <= window[1])
                    & (cl["kind"] == stack[-1]["kind"])]
            for minor, g in cl.groupby("minor", sort=True):
                add(c.at, int(minor), g["t_epoch_s"] - start, "class_backlog_packets", g["backlog_packets"])
            busy = cl[cl["backlog_packets"] > 0].groupby("t_epoch_s").size()
            add(c.at, -1, t, "busy_classes", busy.reindex(q["t_epoch_s"], fill_value=0).to_numpy())
    tidy = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=TIDY_COLUMNS)
    return tidy[TIDY_COLUMNS], ends


def base_rtt_of(model, node: str, record: dict, trial_dir: Path, problems: list[str]) -> float:
    """The base RTT (ms) of the path a node pings: run.json's ``base_rtt_ms[node]`` for the
    trial when recorded, else the file's ``base_rtt.statistic`` (default median:
    :func:`analysis.raw.base_rtt_ms`) of the RTTs in the node's ``base_rtt.txt`` (the pings
    sent under no load before the trial). NaN, with a line in ``problems``, when neither
    gives one. Queueing delay = ping RTT - base RTT (the RTT measured before any load), not
    clipped at 0."""
    base = trial_base_rtt_ms(record, node, lambda: read_raw(trial_dir / node / "base_rtt.txt", problems,
                                                            trial_dir.parent.parent),
                             model.base_rtt.statistic)
    if not math.isfinite(base):
        problems.append(f"raw/{trial_dir.name}/{node}: no base RTT, so no queueing delay")
    return base


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


def trial_statistics(model, trial: dict, tidy: pd.DataFrame, ends: dict, phases: list[dict],
                     time_scale: float = 1.0, whole: bool = True) -> list[dict]:
    """The statistics of one trial (see the module docstring) for phase ``all`` (unless not
    ``whole``) and each phase (start_s/end_s, time-scaled); rows ``{trial, phase, subject,
    statistic, value}``."""
    rows: list[dict] = []

    def put(phase, subject, statistic, value):
        if value is not None and math.isfinite(value):
            rows.append({"trial": trial["id"], "phase": phase, "subject": subject, "statistic": statistic,
                         "value": float(value)})

    def put_delays(phase, subject, q):
        """Queueing delay statistics of the samples ``q`` (ms): median, mean, p95 (pandas
        quantile, linear interpolation) and how many there are."""
        if len(q):
            put(phase, subject, "queue_delay_median_ms", q.median())
            put(phase, subject, "queue_delay_mean_ms", q.mean())
            put(phase, subject, "queue_delay_p95_ms", q.quantile(0.95))
        put(phase, subject, "queue_delay_samples", len(q))

    pings = [it["id"] for it in trial["traffic"] if it["kind"] == "ping"]
    tx = tidy[tidy["metric"] == "tx_bytes"]
    windows = ([("all", -math.inf, math.inf)] if whole else []) + [(p["name"], p["start_s"], p["end_s"]) for p in phases]
    for phase, lo, hi in windows:
        d = tidy[(tidy["t_s"] > lo) & (tidy["t_s"] <= hi)] if phase != "all" else tidy
        if pings and model.base_rtt:  # pooled over the trial's ping items
            put_delays(phase, "all", d[d["subject"].isin(pings) & (d["metric"] == "queue_delay_ms")]["value"])
        thr = {}
        for it in trial["traffic"]:
            s = d[d["subject"] == it["id"]]
            if it["kind"] == "iperf3":
                total = s[(s["stream"] == -1) & (s["metric"] == "throughput_mbit")]["value"]
                mean_mbit = (delivered_bps(ends.get(it["id"], {})) / 1e6 if phase == "all"
                             else (total.mean() if len(total) else math.nan))
                thr[it["id"]] = mean_mbit
                put(phase, it["id"], "throughput_mbit", mean_mbit)
                put(phase, it["id"], "throughput_cov", cov(total))
                streams = s[(s["stream"] >= 0)]
                put(phase, it["id"], "retransmits", streams[streams["metric"] == "retransmits"]["value"].sum()
                    if len(streams) else math.nan)
                put(phase, it["id"], "rtt_mean_ms", streams[streams["metric"] == "rtt_ms"]["value"].mean())
                put(phase, it["id"], "cwnd_mean_bytes", streams[streams["metric"] == "cwnd_bytes"]["value"].mean())
                per_stream = streams[streams["metric"] == "throughput_mbit"].groupby("stream")["value"].mean()
                if len(per_stream) > 1:
                    put(phase, it["id"], "stream_jain_index", jain_index(per_stream.to_numpy()))
                    put(phase, it["id"], "stream_throughput_cov", cov(per_stream.to_numpy()))
            elif it["kind"] == "ping":
                r = s[s["metric"] == "rtt_ms"]["value"]
                if len(r):
                    put(phase, it["id"], "rtt_median_ms", r.median())
                    put(phase, it["id"], "rtt_mean_ms", r.mean())
                    put(phase, it["id"], "rtt_p95_ms", r.quantile(0.95))
                    put(phase, it["id"], "rtt_min_ms", r.min())
                if model.base_rtt:
                    put_delays(phase, it["id"], s[s["metric"] == "queue_delay_ms"]["value"])
                if phase == "all":
                    expected = it["duration_s"] * time_scale / it["interval_s"]
                    put(phase, it["id"], "ping_received_fraction", min(1.0, len(r) / expected) if expected else math.nan)
        for c in model.collectors:
            s = d[d["subject"] == c.at]
            b = s[s["metric"] == "backlog_bytes"]["value"]
            if len(b):
                put(phase, c.at, "backlog_mean_bytes", b.mean())
                put(phase, c.at, "backlog_max_bytes", b.max())
                rate = tc.shaping_rate_mbit(trial["qdiscs"].get(c.at, []))
                if rate:
                    put(phase, c.at, "backlog_mean_ms", b.mean() * 8 / (rate * 1e6) * 1000)
                    sent = tx[tx["subject"] == c.at]
                    a, z = (0.0, trial["duration_s"] * time_scale) if phase == "all" else (lo, hi)
                    put(phase, c.at, "sent_utilization", phase_utilization(sent["t_s"], sent["value"], a, z, rate))
                    put(phase, c.at, "backlog_max_ms", b.max() * 8 / (rate * 1e6) * 1000)
                busy = s[(s["metric"] == "busy_classes") & (s["value"] > 0)]["value"]
                if len(busy):
                    put(phase, c.at, "busy_classes_max", busy.max())
                    held = s[(s["metric"] == "class_backlog_packets") & (s["value"] > 0)].groupby("stream").size()
                    put(phase, c.at, "classes_in_use", int((held >= CLASS_IN_USE_SHARE * len(busy)).sum()))
                drops = s[s["metric"] == "drops"]["value"]
                put(phase, c.at, "drops", drops.max() - drops.min() if len(drops) else math.nan)
        # a window in which no iperf3 item has a sample (its omitted seconds, a batch before the
        # flows start: trial_intervals) has no total throughput, rather than a total of 0
        if thr and any(math.isfinite(v) for v in thr.values()):
            total = float(np.nansum(list(thr.values())))
            put(phase, "all", "total_throughput_mbit", total)
            for c in model.collectors:  # the share of the sampled port's shaping rate used
                rate = tc.shaping_rate_mbit(trial["qdiscs"].get(c.at, []))
                if rate:
                    put(phase, c.at, "utilization", total / rate)
            if len(thr) > 1:
                put(phase, "all", "jain_index", jain_index(list(thr.values())))
            for k, v in thr.items():
                put(phase, k, "share", v / total if total else math.nan)
            rtx = [r["value"] for r in rows if r["phase"] == phase and r["statistic"] == "retransmits"
                   and r["subject"] in thr]
            put(phase, "all", "retransmits", sum(rtx) if rtx else math.nan)
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
    end = trial["duration_s"] * time_scale
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


# --- claims -----------------------------------------------------------------------------------------
def selection_keys(summary: pd.DataFrame, sel: dict, trial_ids: list[str],
                   computed: dict[str, dict[str, list[str]]] | None = None) -> list[tuple[str, str, str]]:
    """The (trial, subject, phase) of each value a claim's selection ``sel`` names, in order
    trials x subjects x phases (what :func:`select` reads; ``computed`` as its).

    Without ``subjects``, a trial's subjects are those that compute the statistic by
    ``computed`` (:func:`netrepro.model.statistics`: what the file says the analysis
    computes, so a subject whose rows are missing reads NaN, not nothing), else those that
    have a row of it in ``summary``; a trial without any is read as subject ``all``."""
    out = []
    for t in sel.get("trials") or trial_ids:
        if sel.get("subjects"):
            subjects = sel["subjects"]
        elif computed is not None and t in computed:
            subjects = [s for s, names in computed[t].items() if sel["statistic"] in names]
        else:
            rows = summary[(summary["trial"] == t) & (summary["statistic"] == sel["statistic"])]
            subjects = sorted(set(rows["subject"]))
        for s in subjects or ["all"]:
            for ph in sel.get("phases") or ["all"]:
                out.append((t, s, ph))
    return out


def select(summary: pd.DataFrame, sel: dict, trial_ids: list[str],
           computed: dict[str, dict[str, list[str]]] | None = None) -> list[tuple[str, float]]:
    """The values a claim's selection names (:func:`selection_keys`), each with a label
    ``trial/subject/phase``; a value missing from the table is NaN (so the claim is not
    evaluable for want of data, and says which)."""
    out = []
    for t, s, ph in selection_keys(summary, sel, trial_ids, computed):
        m = summary[(summary["trial"] == t) & (summary["subject"] == s) & (summary["phase"] == ph)
                    & (summary["statistic"] == sel["statistic"])]["value"]
        out.append((f"{t}/{s}/{ph}", float(m.iloc[0]) if len(m) else math.nan))
    return out


def selections(check: dict) -> list[dict]:
    """Every selection a check reads (``select``, ``higher``, ``lower``), those of the checks
    of an ``all_of`` too, in order."""
    if check["kind"] == "all_of":
        return [s for sub in check["checks"] for s in selections(sub)]
    return [check[k] for k in ("select", "higher", "lower") if k in check]


def _f(x: float) -> str:
    return "missing" if not math.isfinite(x) else f"{x:.4g}"


def _missing(vals: list[tuple[str, float]]) -> list[str]:
    return [k for k, v in vals if not math.isfinite(v)]


def check_limits(check: dict) -> tuple[float, float]:
    """(least, most): the interval a ``bound``, ``ratio`` or ``difference`` check holds its
    values or quantities to, its file's ``min`` and ``max`` with the kind's defaults (a
    bound: unbounded; a ratio: at least 1; a difference: at least 0, or unbounded below when
    it has only a ``max``); -inf/inf where open. ValueError for another kind."""
    kind = check["kind"]
    if kind == "bound":
        return check.get("min", -math.inf), check.get("max", math.inf)
    if kind in ("difference", "ratio"):
        # a difference with only a max has no least value
        least = check.get("min", 1 if kind == "ratio" else (-math.inf if "max" in check else 0))
        return least, check.get("max", math.inf)
    raise ValueError(f"claim kind {kind!r} has no limits; expected bound, ratio or difference")


def pair_value(check: dict, higher: float, lower: float) -> float:
    """The quantity a ``ratio`` or ``difference`` check judges for one pair of values (same
    position of ``higher`` and ``lower``, in the statistic's unit): ``higher / lower``, or
    ``higher - lower`` (its absolute value with ``absolute``). NaN when either value is
    missing or not finite, or a ratio's ``lower`` is 0 (undefined). ValueError for another kind."""
    kind = check["kind"]
    if kind not in ("difference", "ratio"):
        raise ValueError(f"claim kind {kind!r} judges no pair; expected ratio or difference")
    if not (math.isfinite(higher) and math.isfinite(lower)) or (kind == "ratio" and lower == 0):
        return math.nan
    if kind == "ratio":
        return higher / lower
    return abs(higher - lower) if check.get("absolute", False) else higher - lower


def check_claim(summary: pd.DataFrame, check: dict, trial_ids: list[str],
                computed: dict[str, dict[str, list[str]]] | None = None) -> tuple[bool | None, str]:
    """(holds, evidence) of one claim's ``check`` judged on its values alone (kinds: see the
    module docstring; :func:`judge_claim` without intervals); ``computed`` as
    :func:`select`'s. ``holds`` is None when the claim is not evaluable: a selected value is
    missing or not finite, a selection is empty, a ratio's lower value is 0 (the ratio is
    undefined), higher and lower select different numbers of values, or a rise_and_fall has
    not one value per step; ``evidence`` then says why."""
    outcome, evidence, _ = judge_claim(summary, check, trial_ids, computed)
    return (None if outcome is None else outcome == "holds"), evidence


def _estimates_of(summary: pd.DataFrame, sel: dict, trial_ids: list[str], computed, vals: list[tuple[str, float]],
                  estimates: dict | None) -> list[Estimate]:
    """Each of a selection's values (``vals``: :func:`select`'s) with its interval from
    ``estimates`` ((trial, subject, phase, statistic) -> Estimate, the keys of
    :func:`selection_keys`), a point where it has none or the estimate is of another value."""
    keys = selection_keys(summary, sel, trial_ids, computed) if estimates else [None] * len(vals)
    out = []
    for key, (_, v) in zip(keys, vals):
        e = estimates.get((*key, sel["statistic"])) if key else None
        out.append(e if e is not None and math.isfinite(v) and e.value == v else Estimate.point(v))
    return out


def _value_entry(label: str, e: Estimate, outcome: str, least: float, most: float) -> dict:
    """One judged value as verdict.json's ``values`` lists it (docs/results-format.md)."""
    entry = {"at": label, "value": e.value, "outcome": outcome}
    if e.has_interval:
        entry.update(low=e.low, high=e.high, interval=e.method)
    if outcome == "undecided":
        entry["repetitions_to_decide"] = uncertainty.repetitions_to_decide(e, least, most)
    return entry


def judge_claim(summary: pd.DataFrame, check: dict, trial_ids: list[str],
                computed: dict[str, dict[str, list[str]]] | None = None,
                estimates: dict | None = None) -> tuple[str | None, str, list[dict]]:
    """(outcome, evidence, values) of one claim's ``check``: outcome ``holds``, ``fails``,
    ``undecided`` (an interval straddles a bound and none is wholly on its wrong side:
    :mod:`analysis.uncertainty`) or None (not evaluable, as :func:`check_claim` says);
    ``values``: each judged value or quantity with its interval and outcome (entries of
    verdict.json's ``values``). ``estimates``: (trial, subject, phase, statistic) ->
    :class:`analysis.uncertainty.Estimate` of the values that have an interval; without
    them every value is judged as a point and nothing is undecided."""
    kind = check["kind"]
    if kind == "bound":
        vals = select(summary, check["select"], trial_ids, computed)
        lo, hi = check_limits(check)
        rng = f"[{lo:g}, {hi:g}]"
        ests = _estimates_of(summary, check["select"], trial_ids, computed, vals, estimates)
        evidence = (f"{check['select']['statistic']} within {rng}: "
                    + ", ".join(f"{k} {e.text()}" for (k, _), e in zip(vals, ests)))
        if not vals:
            return None, evidence + "nothing selected", []
        if _missing(vals):
            return None, evidence + "; missing: " + ", ".join(_missing(vals)), []
        outcomes = [uncertainty.compare(e, lo, hi) for e in ests]
        return (uncertainty.combine(outcomes), evidence,
                [_value_entry(k, e, o, lo, hi) for (k, _), e, o in zip(vals, ests, outcomes)])
    if kind == "all_of":
        results = [judge_claim(summary, sub, trial_ids, computed, estimates) for sub in check["checks"]]
        evidence = "all of: " + "; ".join(f"({i}) {ev}" for i, (_, ev, _) in enumerate(results, 1))
        values = [v for _, _, vs in results for v in vs]
        if any(o is None for o, _, _ in results):
            return None, evidence, values
        return uncertainty.combine(o for o, _, _ in results), evidence, values
    if kind in ("difference", "ratio"):
        hi_v = select(summary, check["higher"], trial_ids, computed)
        lo_v = select(summary, check["lower"], trial_ids, computed)
        least, most = check_limits(check)
        absolute = kind == "difference" and check.get("absolute", False)
        if len(hi_v) != len(lo_v) or not hi_v:
            return None, f"higher selects {len(hi_v)} values and lower {len(lo_v)}; expected the same number", []
        hi_e = _estimates_of(summary, check["higher"], trial_ids, computed, hi_v, estimates)
        lo_e = _estimates_of(summary, check["lower"], trial_ids, computed, lo_v, estimates)
        parts, outcomes, values, undefined = [], [], [], []
        for (kh, vh), (kl, vl), eh, el in zip(hi_v, lo_v, hi_e, lo_e):
            if not (math.isfinite(vh) and math.isfinite(vl)):
                undefined.append(f"{kh if not math.isfinite(vh) else kl} missing")
                q = Estimate.point(math.nan)
            elif kind == "ratio" and vl == 0:
                undefined.append(f"{kl} is 0: the ratio is undefined")
                q = Estimate.point(math.nan)
            else:
                q = (uncertainty.ratio(eh, el) if kind == "ratio" else uncertainty.difference(eh, el, absolute))
                # the value itself exactly as the pair gives it (pair_value), the interval around it
                q = Estimate(pair_value(check, vh, vl), q.low, q.high, q.sd, q.n, q.method)
                outcomes.append(uncertainty.compare(q, least, most))
                values.append(_value_entry(f"{kh} vs {kl}", q, outcomes[-1], least, most))
            parts.append(f"{kh} {eh.text()} vs {kl} {el.text()}: {kind} {q.text()}")
        name = f"|{kind}|" if absolute else kind
        evidence = (f"{name} >= {_f(least)}: " if most == math.inf else
                    f"{name} <= {_f(most)}: " if least == -math.inf else
                    f"{name} within [{_f(least)}, {_f(most)}]: ") + "; ".join(parts)
        if undefined:
            return None, evidence + "; not evaluable: " + "; ".join(undefined), values
        return uncertainty.combine(outcomes), evidence, values
    if kind == "rise_and_fall":
        sel = check["select"]
        vals = select(summary, sel, trial_ids, computed)
        order = sel.get(check["order"]) or []
        v = [x for _, x in vals]
        if len(v) != len(order) or not all(math.isfinite(x) for x in v) or check["peak"] not in order:
            return None, ("values: " + ", ".join(f"{k} {_f(x)}" for k, x in vals)
                          + f"; expected one finite value per step of {', '.join(order) or '(no order)'} "
                            f"with the peak {check['peak']} among them"), []
        e = _estimates_of(summary, sel, trial_ids, computed, vals, estimates)
        p = order.index(check["peak"])
        tol = check["tolerance"]
        # each step within tolerance: rising to the peak, falling after it (interval arithmetic)
        steps = [uncertainty.at_least(uncertainty.difference(e[i + 1], e[i]), -tol) for i in range(p)]
        steps += [uncertainty.at_most(uncertainty.difference(e[i + 1], e[i]), tol) for i in range(p, len(v) - 1)]
        to_first, to_last = uncertainty.difference(e[p], e[0]), uncertainty.difference(e[p], e[-1])
        rise = Estimate(min(to_first.value, to_last.value), min(to_first.low, to_last.low),
                        min(to_first.high, to_last.high), math.nan, min(to_first.n, to_last.n), to_first.method)
        outcome = uncertainty.combine(steps + [uncertainty.at_least(rise, check["min_rise"])])
        values = [_value_entry(k, x, outcome, -math.inf, math.inf)
                  for (k, _), x in zip(vals, e)] if any(x.has_interval for x in e) else []
        return outcome, (f"{sel['statistic']} over {', '.join(order)}: " + " ".join(x.text() for x in e)
                         + f"; peak {check['peak']} above both ends by {rise.text()} (min {_f(check['min_rise'])})"), values
    raise ValueError(f"unknown claim kind {kind!r}")


def at_rate_scale(check: dict, k: float, scaled) -> dict:
    """A copy of claim ``check`` (or ``when``: a bound without a kind) whose thresholds on
    values the rate scale changes are multiplied by ``k``: the
    :data:`netrepro.model.RATE_SCALED_FIELDS` of each check (an ``all_of``'s too) whose
    statistic ``scaled(statistic)`` says follows k
    (:func:`netrepro.model.rate_scaled`); others as they are. A claim's ``rate_scaling:
    proportional`` asks for it: at k = 0.5, "15 to 20.5 Mbit/s" is judged as 7.5 to 10.25."""
    kind = check.get("kind", "bound")
    if kind == "all_of":
        return {**check, "checks": [at_rate_scale(sub, k, scaled) for sub in check["checks"]]}
    sel = check.get("select") or check.get("higher")
    if kind not in RATE_SCALED_FIELDS or not scaled(sel["statistic"]):
        return check
    return {**check, **{f: check[f] * k for f in RATE_SCALED_FIELDS[kind] if f in check}}


def scaled_thresholds(check: dict, k: float, scaled) -> str:
    """The thresholds :func:`at_rate_scale` changes, as written and at ``k``:
    ``total_throughput_mbit 15 to 20.5 at k = 1, 7.5 to 10.25 at k = 0.5``; "" when none."""
    kind = check.get("kind", "bound")
    if kind == "all_of":
        return "; ".join(t for t in (scaled_thresholds(sub, k, scaled) for sub in check["checks"]) if t)
    sel = check.get("select") or check.get("higher")
    fields = [f for f in RATE_SCALED_FIELDS.get(kind, ()) if f in check]
    if not fields or not scaled(sel["statistic"]):
        return ""

    def text(factor: float) -> str:
        if kind == "rise_and_fall":
            return f"tolerance {check['tolerance'] * factor:g}, rise {check['min_rise'] * factor:g}"
        lo, hi = check.get("min"), check.get("max")
        return (f"{lo * factor:g} to {hi * factor:g}" if lo is not None and hi is not None
                else f"at least {lo * factor:g}" if lo is not None else f"at most {hi * factor:g}")

    return f"{sel['statistic']} {text(1)} at k = 1, {text(k)} at k = {k:g}"


#: A claim status that makes a run's verdict inconclusive: the run could not judge the claim.
INCONCLUSIVE_STATUSES = ("inconclusive", "not evaluable", "undecided")


def undecided_reason(values: list[dict]) -> str:
    """Why a claim is undecided, from its ``values`` (:func:`judge_claim`): each straddling
    value with its interval, and the repetitions that would likely decide the claim (the
    most any value needs): ``its 95 % interval straddles a bound: unpaced/s1:s1-eth1/all 0.79
    (0.74 to 0.84, batch means of 5); about 12 repetitions would likely decide it (REPEAT=12)``."""
    straddle = [v for v in values if v["outcome"] == "undecided"]
    parts = [f"{v['at']} {v['value']:.4g} ({v['low']:.4g} to {v['high']:.4g}, {v['interval']})"
             for v in straddle if "low" in v]
    needed = [v.get("repetitions_to_decide") for v in straddle]
    if needed and all(isinstance(n, int) for n in needed):
        n = max(needed)
        then = f"about {n} repetitions would likely decide it (REPEAT={n})"
    else:
        then = (f"the repetitions that would decide it cannot be told (more than {uncertainty.MAX_REPETITIONS}, "
                "or a value without a known spread): a value sits on or very near its bound")
    return "its 95 % interval straddles a bound: " + "; ".join(parts) + f"; {then}"


def evaluate(summary: pd.DataFrame, claims: list[dict], trial_ids: list[str],
             unhealthy: dict[str, list[dict]], rate_scale: float = 1.0,
             computed: dict[str, dict[str, list[str]]] | None = None,
             incomplete: dict[str, list[str]] | None = None, time_scale: float = 1.0,
             time_scale_min: float = 0.0, scaled=None, estimates: dict | None = None) -> dict:
    """The verdict: each claim's status (holds, fails, not evaluable when it reads a trial
    whose data are ``incomplete`` (trial id -> why: its damaged raw files, analysed with
    ``--partial``) or when its values or its condition's are missing or undefined
    (:func:`check_claim`), inconclusive when it reads a trial that failed a health check
    (``unhealthy``: trial id -> its :func:`analysis.health.failures`), or not applicable when
    the claim has a ``when``
    condition, a bound on a selection, that the run does not meet), ``reproduced`` when every
    applicable claim holds (and at least one applies), ``verdict`` inconclusive when any
    claim is inconclusive or not evaluable. A claim whose ``rate_scale_min`` is above the
    run's ``rate_scale`` (k) is not applicable either: the experiment file says below which
    k it loses its meaning; so is one whose ``time_scale_min`` (default ``time_scale_min``, the
    file's ``time_scale.min``) is above the run's ``time_scale``. These two come first: they
    are properties of the run's design, known before it ran, so a claim below its scale is
    not applicable whatever its data or its substrate's health (an "inconclusive" would say
    that a healthier machine could judge it, and none can). When no claim applies the
    verdict is inconclusive: nothing was judged. ``computed``: :func:`select`'s.

    A claim with ``rate_scaling: proportional`` is judged with its thresholds on values the
    rate scale changes multiplied by the run's k (:func:`at_rate_scale`; ``scaled``: statistic
    -> whether k changes it, :func:`netrepro.model.rate_scaled`); its entry's ``thresholds``
    says both (:func:`scaled_thresholds`).

    A condition says which case a run fell in when chance decides it: Lab 18's
    ``fq_codel flows 2`` puts two flows in one bucket half the time, and a claim of fairness
    then applies only when two of its buckets were in use (``classes_in_use``); the
    condition is read on the run's values alone (which case the run fell in).

    ``estimates``: (trial, subject, phase, statistic) -> the 95 % interval of a value
    (:class:`analysis.uncertainty.Estimate`: within the trial by batch means, or across
    repetitions). A claim whose values have intervals holds when every interval is on the
    right side of its bounds, fails when one is wholly on the wrong side, and is
    ``undecided`` when one straddles a bound (:func:`judge_claim`); its entry's ``values``
    lists each with its interval, and ``repetitions_to_decide`` the repetitions (REPEAT)
    that would likely decide it. An undecided claim makes the verdict inconclusive, never
    "not reproduced"."""
    out = []
    incomplete = incomplete or {}
    for c in claims:
        ch, when = c["check"], c.get("when")
        follows = c.get("rate_scaling") == "proportional" and rate_scale != 1 and scaled is not None
        if follows:
            ch = at_rate_scale(ch, rate_scale, scaled)
            when = at_rate_scale(when, rate_scale, scaled) if when else when
        sels = selections(ch)
        read = sorted({t for s in sels for t in (s.get("trials") or trial_ids)})
        gaps = [t for t in read if incomplete.get(t)]
        sick = [f for t in read for f in unhealthy.get(t, [])]
        outcome, evidence, values = judge_claim(summary, ch, trial_ids, computed, estimates)
        holds = None if outcome is None else outcome == "holds"
        entry = {"id": c["id"], "text": c["text"], "evidence": evidence}
        if any("low" in v for v in values):
            entry["values"] = values
        if c.get("finding"):
            entry["finding"] = {"text": c["finding"]["text"], "runs": list(c["finding"]["runs"])}
        if follows:
            entry["thresholds"] = "; ".join(t for t in (scaled_thresholds(x, rate_scale, scaled)
                                                        for x in ([c["when"]] if when else []) + [c["check"]]) if t)
        applies, why = (check_claim(summary, {"kind": "bound", **when}, trial_ids, computed) if when
                        else (True, ""))
        if "when" in c:
            entry["condition"] = why
        if float(c.get("time_scale_min", time_scale_min) or 0) > time_scale:
            entry.update(status="not applicable", holds=None,
                         reason=f"the run's time scale {time_scale:g} is shorter than "
                                f"{float(c.get('time_scale_min', time_scale_min)):g}, the shortest at which the claim "
                                "keeps its meaning (time_scale.min; the experiment file says why)")
        elif c.get("rate_scale_min", 0) > rate_scale:
            entry.update(status="not applicable", holds=None,
                         reason=f"the run's rate scale {rate_scale:g} is below {c['rate_scale_min']:g}, where the claim "
                                "keeps its meaning (the experiment file says why)")
        elif gaps:
            entry.update(status="not evaluable", holds=None, reason="data incomplete: " + "; ".join(
                f"{t}: {', '.join(incomplete[t])}" for t in gaps))
        elif sick:
            alone = judge_claim(summary, ch, trial_ids, computed)[0]
            entry.update(status="inconclusive", holds=None,
                         reason="the substrate failed health checks: " + "; ".join(failure_line(f) for f in sick)
                         + (f"; the numbers alone: {alone}" if alone is not None else ""))
            if alone is not None:  # the numbers alone (as points), when they can be judged at all
                entry["numbers_hold"] = alone == "holds"
        elif applies is None:
            entry.update(status="not evaluable", holds=None, reason="its condition cannot be judged: " + why)
        elif not applies:
            entry.update(status="not applicable", holds=None, reason="its condition does not hold: " + why)
        elif outcome is None:
            entry.update(status="not evaluable", holds=None, reason="its data are missing or undefined: " + evidence)
        elif outcome == "undecided":
            alone = judge_claim(summary, ch, trial_ids, computed)[0]  # the values as points, intervals aside
            entry.update(status="undecided", holds=None, values_alone=alone,
                         reason=undecided_reason(values) + f"; the values alone: {alone}")
        else:
            entry.update(status="holds" if holds else "fails", holds=bool(holds))
        out.append(entry)
    failures = [f for fs in unhealthy.values() for f in fs]
    judged = [e for e in out if e["status"] != "not applicable"]
    reproduced = bool(judged) and all(e["holds"] is True for e in judged)
    verdict = ("inconclusive" if not judged or any(e["status"] in INCONCLUSIVE_STATUSES for e in out)
               else "reproduced" if reproduced else "not reproduced")
    return {"reproduced": reproduced, "verdict": verdict, "health_failures": failures, "claims": out}


def evaluate_model(model, data: dict, summary: pd.DataFrame, estimates: dict | None = None,
                   unhealthy: dict[str, list[dict]] | None = None,
                   incomplete: dict[str, list[str]] | None = None) -> dict:
    """:func:`evaluate` of the claims of experiment ``model`` (as written) on ``summary``
    with what run.json ``data`` says of the run: its rate scale (the model's rates and the
    claims' thresholds at k), time scale, and the file's ``time_scale.min``."""
    k = float((data.get("rate_scale") or {}).get("k", 1))
    m = scale_rates(model, k)
    return evaluate(summary, m.claims, [t["id"] for t in m.trials], unhealthy or {}, k, statistics(m),
                    incomplete, float(data.get("time_scale", 1)), float(m.time_scale.get("min", 0) or 0),
                    lambda st: rate_scaled(m, st), estimates)


def fidelity_figures(spec, records: dict[str, dict], run_dir: Path, time_scale: float, out_dir: Path,
                     data: dict) -> list[Path]:
    """``link-fidelity.png`` and ``.pdf`` in ``out_dir``: the CCDF of every trial's busy
    intervals' deviation from the shaped rate (:func:`analysis.fidelity.ccdf_figure`), for
    the trials whose sampled, shaped ports had a busy window; none without one.
    ``spec``: at the run's rate scale; ``records``: the model's trial id -> its record."""
    busy = fidelity.run_busy_intervals(spec.model, records, run_dir / "raw", time_scale)
    by_trial = {t["id"]: {port: iv for port, (_, iv) in busy[t["id"]].items()}  # in the file's order
                for t in spec.model.trials if t["id"] in busy}
    k = float((data.get("rate_scale") or {}).get("k", 1))
    fig = fidelity.ccdf_figure(by_trial, shaper_rate_tolerance(spec.model),
                               f"{spec.model.name}, " + caption(run_dir.name, data.get("site"), time_scale, k))
    if fig is None:
        return []
    return [save_figure(fig, Path(out_dir) / f"link-fidelity.{ext}") for ext in ("png", "pdf")]


def analyze(run_dir: Path, spec, data: dict, out: Path, record: dict, figures: bool = True,
            tidy_file: bool = True, problems: list[str] | None = None,
            damaged: dict[str, list[str]] | None = None) -> dict:
    """Analyse a run into ``out`` (tidy.csv.gz unless not ``tidy_file``, summary.csv,
    figures/, flent/, verdict.json, report.md; analysis.json is the caller's) and return
    ``{"tidy", "summary", "verdict", "problems", "outputs", "health", "incomplete"}``.

    ``data``: run.json (its ``spec`` of schema_version 2: :func:`analysis.run.read_run`), or
    one repetition's or sweep point's view of it (:mod:`analysis.repetitions`); ``record``:
    analysis.json's record (for the report); ``problems``: lines the caller found already,
    reported first; ``damaged``: raw folder (a trial record's ``id``) -> its damaged files
    (:meth:`analysis.integrity.RawCheck.by_trial`), which make the trial's data incomplete
    and every claim reading it not evaluable. A trial of the experiment without a record
    fails the health check ``not_run``, which makes the claims reading it inconclusive."""
    # the experiment as it ran: every rate and byte size at the run's rate scale
    k = float((data.get("rate_scale") or {}).get("k", 1))
    m = scale_rates(spec.model, k)
    scaled = spec if k == 1 else spec.at_rate_scale(k)  # the health checks read the rates as run
    ts = float(data.get("time_scale", 1))
    problems = list(problems or [])
    damaged = damaged or {}
    tidies, rows, interval_rows, health, incomplete = [], [], [], {}, {}
    # a repeated run's view of one repetition (analysis.repetitions) records instance ids
    # (raw folder names) with the experiment's trial id in ``trial``
    records = {t.get("trial") or t["id"]: t for t in data.get("trials", [])}
    for trial in m.trials:
        rec = records.get(trial["id"])
        if rec is None:
            problems.append(f"trial {trial['id']}: not run (no record in run.json)")
            continue
        if damaged.get(rec["id"]):
            incomplete[trial["id"]] = list(damaged[rec["id"]])
        tdir = run_dir / "raw" / rec["id"]
        tidy, ends = trial_tidy(m, trial, rec, tdir, ts, problems)
        tidies.append(tidy)
        phases = rec.get("phases") or []
        trial_rows = trial_statistics(m, trial, tidy, ends, phases, ts)
        rows += trial_rows
        interval_rows += trial_intervals(m, trial, tidy, ends, phases, trial_rows, ts)
        health[trial["id"]] = trial_health(scaled, rec, tdir, ts)
    tidies = [t for t in tidies if len(t)]  # a trial without any sample adds no row
    tidy = pd.concat(tidies, ignore_index=True) if tidies else pd.DataFrame(columns=TIDY_COLUMNS)
    summary = pd.DataFrame(rows, columns=SUMMARY_KEYS)
    intervals = pd.DataFrame(interval_rows, columns=INTERVAL_COLUMNS)
    labels = sorted({k for t in m.trials for k in t["labels"]})
    for key in labels:
        summary.insert(1, key, summary["trial"].map({t["id"]: t["labels"].get(key, "") for t in m.trials}))
    unhealthy: dict[str, list[dict]] = {}
    for f in failures(health):
        unhealthy.setdefault(f["trial"], []).append(f)
    for t in (t["id"] for t in m.trials if t["id"] not in records):
        unhealthy.setdefault(t, []).append({"trial": t, "check": "not_run", "value": None, "threshold": None,
                                            "unit": None, "detail": "no record in run.json"})
    verdict = evaluate_model(spec.model, data, summary, estimates_of(intervals), unhealthy, incomplete)
    outputs = ([write_gzip(out / "tidy.csv.gz", tidy.to_csv(index=False, lineterminator="\n").encode())]
               if tidy_file else [])
    with atomic_path(out / "summary.csv") as tmp:
        summary.to_csv(tmp, index=False, lineterminator="\n", float_format="%.6g")
    outputs.append(out / "summary.csv")
    with atomic_path(out / "intervals.csv") as tmp:
        intervals.to_csv(tmp, index=False, lineterminator="\n", float_format="%.6g")
    outputs.append(out / "intervals.csv")
    under = caption(run_dir.name, data.get("site"), ts, k)
    figs = [p for fig in figure_specs(m, tidy) for p in draw(m, tidy, fig, out / "figures", ts, under)] if figures else []
    health_figs = fidelity_figures(scaled, records, run_dir, ts, out / "figures", data) if figures else []
    outputs += figs + health_figs
    outputs += write_trials(tidy, records, m.name, out)
    outputs.append(write_text(out / "verdict.json", json.dumps(verdict, indent=2) + "\n"))
    outputs.append(write_text(out / "report.md", render_report(
        spec, data, summary, verdict, problems, [p.relative_to(out).as_posix() for p in figs if p.suffix == ".png"],
        health, run_dir=run_dir, out_dir=out, record=record, incomplete=incomplete,
        health_figures=[p.relative_to(out).as_posix() for p in health_figs if p.suffix == ".png"])))
    return {"tidy": tidy, "summary": summary, "verdict": verdict, "problems": problems, "outputs": outputs,
            "health": health, "incomplete": incomplete, "intervals": intervals}
