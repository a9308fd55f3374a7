"""A trial's raw files as one tidy table (``tidy.csv.gz``: one row per sample, long form).

The table: ``trial, subject, stream, t_s, metric, value``;
subjects are traffic item ids (iperf3: ``throughput_mbit``, ``retransmits``,
``cwnd_bytes``, ``rtt_ms`` per stream and interval, stream -1 = the item's sum; ping:
``rtt_ms``, and ``queue_delay_ms`` with ``base_rtt``) and sampled ports (``backlog_bytes``,
``backlog_packets``, ``drops``, ``tx_bytes`` (the interface's counter, with the sample
before and after the trial), each
qdisc's own fields as ``<kind>_<field>`` (:func:`analysis.raw.parse_qdisc_fields`), and with
the collector's ``classes``: ``class_backlog_packets`` per class of the leaf qdisc (stream =
the class's minor number: fq_codel's bucket + 1) and ``busy_classes``);
``t_s`` counts from the trial's common start.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from analysis.raw import (parse_iperf3, parse_ping, parse_qdisc_classes, parse_qdisc_fields, parse_qdisc_stack,
                          parse_tx_bytes, trial_base_rtt_ms)


TIDY_COLUMNS = ["trial", "subject", "stream", "t_s", "metric", "value"]


def read_raw(path: Path, problems: list[str], run_dir: Path) -> str | None:
    """A raw file's text (bytes that are not UTF-8 replaced), or None after adding
    ``<path relative to run_dir>: missing`` (or why it cannot be read) to ``problems``."""
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        problems.append(f"{path.relative_to(run_dir)}: {'missing' if not path.exists() else exc.strerror}")
        return None


def read_node_table(trial_dir: Path, node: str, name: str, parse: Callable[[str], pd.DataFrame], none: str,
                    problems: list[str]) -> tuple[str, pd.DataFrame] | None:
    """A node's raw file of a trial, ``trial_dir/<node>/<name>`` (``trial_dir``: the run's
    ``raw/<trial>``), as ``(text, parse(text))``; None when it cannot be read (:func:`read_raw`
    names it in ``problems``). A table with no rows is returned too, after
    ``raw/<trial>/<node>/<name>: <none>`` (what the file lacks) is added to ``problems``."""
    text = read_raw(trial_dir / node / name, problems, trial_dir.parent.parent)
    if text is None:
        return None
    table = parse(text)
    if table.empty:
        problems.append(f"raw/{trial_dir.name}/{node}/{name}: {none}")
    return text, table


def _t0(path: Path) -> float | None:
    try:
        return float(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _adder(frames: list[pd.DataFrame], trial_id: str):
    """A function ``add(subject, stream, t_s, metric, values)`` that appends the samples as a
    tidy frame (TIDY_COLUMNS) to ``frames``, and nothing when there are none."""
    def add(subject, stream, t_s, metric, values):
        if len(values):
            frames.append(pd.DataFrame({"trial": trial_id, "subject": subject, "stream": stream,
                                        "t_s": np.asarray(t_s, float), "metric": metric,
                                        "value": np.asarray(values, float)}))
    return add


def _iperf3_samples(add, it: dict, trial_dir: Path, start: float, time_scale: float,
                    problems: list[str]) -> dict | None:
    """Add an iperf3 item's samples (per stream, and their sum as stream -1, omitted seconds
    left out); returns its end summary, or None (a line in ``problems``) when its report
    cannot be read."""
    node = it.src
    f = trial_dir / node / f"iperf3-{it.id}.json"
    try:
        iv, end = parse_iperf3(f.read_text(errors="replace"))
    except (OSError, ValueError) as exc:
        problems.append(f"raw/{trial_dir.name}/{node}/{f.name}: {exc}")
        return None
    t0 = _t0(f.with_name(f.name + ".t0"))
    offset = (t0 - start) if t0 is not None else it.start_s * time_scale
    iv = iv[~iv["omitted"]]
    for k, g in iv.groupby("stream"):
        t = offset + g["t_s"].to_numpy()
        add(it.id, int(k), t, "throughput_mbit", g["bits_per_second"] / 1e6)
        add(it.id, int(k), t, "retransmits", g["retransmits"])
        add(it.id, int(k), t, "cwnd_bytes", g["snd_cwnd_bytes"])
        add(it.id, int(k), t, "rtt_ms", g["rtt_ms"])
    tot = iv.groupby("t_s", sort=True).agg(bps=("bits_per_second", "sum"), rtx=("retransmits", "sum"))
    add(it.id, -1, offset + tot.index.to_numpy(), "throughput_mbit", tot["bps"] / 1e6)
    add(it.id, -1, offset + tot.index.to_numpy(), "retransmits", tot["rtx"])
    return end


def _ping_samples(add, model, it: dict, record: dict, trial_dir: Path, start: float, time_scale: float,
                  problems: list[str]) -> None:
    """Add a ping item's RTTs within its schedule and, with ``base_rtt``, their queueing
    delays; unreadable or empty files are named in ``problems``."""
    node = it.src
    read = read_node_table(trial_dir, node, "ping.txt", parse_ping, "no echo replies", problems)
    if read is None:
        return
    p = read[1]
    # the probes within the item's schedule, placed at their send time (-D prints the
    # reply's time) or, with ``timestamp: received``, at the reply's
    at = (p["t_epoch_s"] - start if it.timestamp == "received"
          else p["t_epoch_s"] - p["rtt_ms"] / 1000 - start)
    lo, hi = it.start_s * time_scale, (it.start_s + it.duration_s) * time_scale
    keep = (at >= lo) & (at < hi)
    add(it.id, -1, at[keep], "rtt_ms", p.loc[keep, "rtt_ms"])
    if model.base_rtt:
        base = base_rtt_of(model, node, record, trial_dir, problems)
        if math.isfinite(base):
            add(it.id, -1, at[keep], "queue_delay_ms", p.loc[keep, "rtt_ms"] - base)


def _port_samples(add, c, trial: dict, trial_dir: Path, start: float, time_scale: float,
                  problems: list[str]) -> None:
    """Add a sampled port's samples within the trial from its node's ``qdisc.jsonl``: backlog,
    drops, the ``tx_bytes`` counter (with a sample on each side), each qdisc's own fields
    and, with the collector's ``classes``, its leaf qdisc's classes; unreadable or empty
    files are named in ``problems``."""
    read = read_node_table(trial_dir, c.node, "qdisc.jsonl", parse_qdisc_stack, "no samples", problems)
    if read is None:
        return
    text, q = read
    q = q[(q["t_epoch_s"] >= start) & (q["t_epoch_s"] <= start + trial.duration_s * time_scale)]
    t = q["t_epoch_s"] - start
    add(c.at, -1, t, "backlog_bytes", q["backlog_bytes"])
    add(c.at, -1, t, "backlog_packets", q["backlog_packets"])
    add(c.at, -1, t, "drops", q["drops"] - (q["drops"].iloc[0] if len(q) else 0))
    window = (start, start + trial.duration_s * time_scale)
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
    stack = trial.stack(c.at)
    if c.classes and stack:
        cl = parse_qdisc_classes(text)
        cl = cl[(cl["t_epoch_s"] >= window[0]) & (cl["t_epoch_s"] <= window[1])
                & (cl["kind"] == stack[-1].kind)]
        for minor, g in cl.groupby("minor", sort=True):
            add(c.at, int(minor), g["t_epoch_s"] - start, "class_backlog_packets", g["backlog_packets"])
        busy = cl[cl["backlog_packets"] > 0].groupby("t_epoch_s").size()
        add(c.at, -1, t, "busy_classes", busy.reindex(q["t_epoch_s"], fill_value=0).to_numpy())


def trial_tidy(model, trial: dict, record: dict, trial_dir: Path, time_scale: float,
               problems: list[str]) -> tuple[pd.DataFrame, dict]:
    """Every sample of one trial (TIDY_COLUMNS) and each iperf3 item's end summary
    (item id -> the ``end`` of :func:`analysis.raw.parse_iperf3`). Unreadable files are named
    in ``problems`` (one line each) and skipped."""
    start = float(record["start_epoch_s"])
    frames: list[pd.DataFrame] = []
    ends = {}
    add = _adder(frames, trial.id)
    for it in trial.traffic:
        if it.kind == "iperf3":
            end = _iperf3_samples(add, it, trial_dir, start, time_scale, problems)
            if end is not None:
                ends[it.id] = end
        elif it.kind == "ping":
            _ping_samples(add, model, it, record, trial_dir, start, time_scale, problems)
    for c in model.collectors:
        _port_samples(add, c, trial, trial_dir, start, time_scale, problems)
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
