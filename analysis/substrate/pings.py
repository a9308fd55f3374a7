"""The health checks that read the ping items: their probes answered (``ping_received``)
and sent (``sampling_ping``), and their queueing delay beyond what the buffers on their path
can hold (``queue_delay_excess``); analysis/health.py describes and judges them."""

from __future__ import annotations

import math
import re

import pandas as pd

from analysis.raw import parse_ping, trial_base_rtt_ms
from analysis.substrate.inputs import (NotMeasured, Unmeasurable, lowest_share, model_trial, number, percent,
                                       phase_windows, raw_text, trial_items)
from netrepro.model import ping_buffers


#: ``ping -O`` line of a probe without a reply when the next one is sent (iputils ping(8)).
_NO_ANSWER = re.compile(r"^\s*\[(?P<t>\d+(?:\.\d*)?)\]\s*no answer yet for icmp_seq=(?P<seq>\d+)")


def _probes(text: str, interval_s: float) -> pd.DataFrame:
    """Probes of a ``ping -D -O`` output: columns seq, sent_epoch_s (a reply's receive time
    minus its RTT; for ``no answer yet``, printed when the next probe goes, its time minus
    one interval) and answered (bool); one row per seq, a reply winning over no-answer."""
    rep = parse_ping(text)
    rep = rep[pd.notna(rep["t_epoch_s"])]
    rows = pd.DataFrame({"seq": rep["seq"], "sent_epoch_s": rep["t_epoch_s"] - rep["rtt_ms"] / 1000.0,
                         "answered": True})
    lost = [(int(m.group("seq")), float(m.group("t")) - interval_s, False)
            for m in map(_NO_ANSWER.match, text.splitlines()) if m]
    if lost:
        rows = pd.concat([rows, pd.DataFrame(lost, columns=["seq", "sent_epoch_s", "answered"])], ignore_index=True)
    rows = rows.sort_values(["seq", "answered"], ascending=[True, False], kind="stable")
    return rows.drop_duplicates("seq").reset_index(drop=True)


def _ping_counts(spec, record, trial_dir, start: float, time_scale: float) -> dict[str, tuple[int, int, int]]:
    """Ping item id -> (probes sent within its schedule, of them answered, probes the schedule
    asks for: length / interval, as roles/collectors/files/nr-ping.sh counts them). The
    schedule is the item's [start, start + length) shifted back half an interval: a probe
    due at the start counts if the node's clock is a little early, one after the end not."""
    out = {}
    for it in trial_items(spec, record, trial_dir, ("ping",)):
        lo, length, iv = start + it.start_s * time_scale, it.duration_s * time_scale, it.interval_s
        p = _probes(raw_text(trial_dir / it.src / "ping.txt"), iv)
        inside = p[(p["sent_epoch_s"] >= lo - iv / 2) & (p["sent_epoch_s"] < lo + length - iv / 2)]
        want = max(1, round(length / iv))
        out[it.id] = (min(len(inside), want), min(int(inside["answered"].sum()), want), want)
    return out


def ping_received(spec, record, trial_dir, start, time_scale, **_) -> tuple[float, str]:
    """``ping_received``: per ping item, its echo replies to the probes sent within its
    schedule / the probes the schedule asks for (:func:`_ping_counts`); the smallest, with a
    detail naming it and every item's share."""
    counts = _ping_counts(spec, record, trial_dir, start, time_scale)
    share = {n: got / want for n, (_, got, want) in counts.items()}
    low = min(share, key=share.get)
    return share[low], f"lowest {low} ({counts[low][1]} of {counts[low][2]}); " + ", ".join(
        f"{n} {percent(v)}" for n, v in share.items())


def sampling_ping(spec, record, trial_dir, start, time_scale, **_) -> tuple[float, str]:
    """``sampling_ping``: per ping item, its probes sent (answered or not) within its schedule
    / the probes the schedule asks for; the smallest (:func:`analysis.substrate.inputs.lowest_share`)."""
    share, counts = {}, {}
    for iid, (sent, _, want) in _ping_counts(spec, record, trial_dir, start, time_scale).items():
        share[iid], counts[iid] = sent / want, (sent, want)
    return lowest_share(share, counts)


def queue_delay_ms(ping: pd.DataFrame, base_ms: float, start: float) -> pd.DataFrame:
    """Queueing delay of a ping item's echo replies: ``t_s`` (s from the trial's start) and
    ``queue_ms`` (RTT - the path's base RTT, ms), from :func:`analysis.raw.parse_ping`'s
    frame; replies without a time or an RTT are left out."""
    p = ping[pd.notna(ping["t_epoch_s"]) & pd.notna(ping["rtt_ms"])]
    return pd.DataFrame({"t_s": p["t_epoch_s"].to_numpy() - start, "queue_ms": p["rtt_ms"].to_numpy() - base_ms})


def queue_delay_excess(spec, record, trial_dir, start, duration, time_scale, **_) -> tuple[float, str]:
    """``queue_delay_excess``: per ping item and phase, the share of its echo replies whose
    queueing delay exceeds the time the buffers of its path take to drain
    (:func:`netrepro.model.ping_buffers`: the sum over its shaped ports of limit bytes x 8 /
    rate) by more than ``queue_delay_excess_max_ms``; the largest share."""
    m = spec.model
    if not m.base_rtt:
        raise Unmeasurable("the experiment has no base_rtt: no queueing delay without the unloaded RTT")
    trial = model_trial(spec, record, trial_dir)
    tolerance_ms = number(m.health.get("queue_delay_excess_max_ms")) or 0.0
    statistic = m.base_rtt.statistic
    windows = phase_windows(spec, record, duration, time_scale)
    largest: tuple[float, str, float] | None = None  # (queueing delay ms, item, t_s)
    worst: tuple[float, str, str, int, int] | None = None  # (share, item, phase, over, samples)
    drains, unbounded = {}, []
    for it in trial_items(spec, record, trial_dir, ("ping",)):
        try:
            bufs = ping_buffers(m, trial, it)
        except ValueError as exc:
            raise NotMeasured(f"{it.id}: {exc}") from None
        if not bufs:
            unbounded.append(it.id)
            continue
        drain_ms = sum(b * 8 / (r * 1e6) * 1000 for _, b, r in bufs)
        drains[it.id] = (drain_ms, "; ".join(f"{p}: {b} B at {r:g} Mbit/s" for p, b, r in bufs))
        base = trial_base_rtt_ms(record, it.src, lambda: raw_text(trial_dir / it.src / "base_rtt.txt"),
                                 statistic)
        if not math.isfinite(base):
            raise NotMeasured(f"no base RTT for {it.id} ({it.src}/base_rtt.txt)")
        q = queue_delay_ms(parse_ping(raw_text(trial_dir / it.src / "ping.txt")), base, start)
        t, d = q["t_s"].to_numpy(), q["queue_ms"].to_numpy()
        if len(d):
            i = int(d.argmax())
            if largest is None or d[i] > largest[0]:
                largest = (float(d[i]), it.id, float(t[i]))
        for name, lo, hi in windows:
            inside = (t >= lo) & (t < hi)
            n = int(inside.sum())
            if n:
                over = int((d[inside] > drain_ms + tolerance_ms).sum())
                if worst is None or over / n > worst[0]:
                    worst = (over / n, it.id, name, over, n)
    if not drains:
        raise Unmeasurable(f"no ping item's path crosses a port with a shaper and a limit ({', '.join(unbounded)})")
    if worst is None or largest is None:
        raise NotMeasured("no echo reply within the phases")
    share, iid, phase, over, n = worst
    q, qid, t = largest
    return share, (f"worst {iid} {phase}: {over} of {n} samples more than {tolerance_ms:g} ms above the buffers' "
                   f"drain time ({drains[iid][1]}: {drains[iid][0]:.1f} ms); "
                   f"largest queueing delay {q:.1f} ms ({qid} at {t:.1f} s)"
                   + (f"; no shaped buffer on the path of {', '.join(unbounded)}" if unbounded else ""))
