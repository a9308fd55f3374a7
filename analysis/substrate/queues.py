"""The health checks that read the queue collectors and the paced flows: the samples taken
(``sampling_qdisc_stats``), the shapers' sending rate (``shaper_rate_off``), the paced
streams' rate (``pacing_rate_off``) and the samplers' timers (``timer_late``);
analysis/health.py describes and judges them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from analysis import fidelity
from analysis.raw import parse_iperf3, parse_qdisc_stack
from analysis.substrate.inputs import (NotApplicable, NotMeasured, Unmeasurable, lowest_share, model_trial, number,
                                       raw_text, trial_items)
from netrepro.core import tc
from netrepro.model import Collector, pacing_limited


#: How far a busy window's sending rate may be from the shaped rate before it counts as
#: off (``shaper_rate_tolerance_fraction``'s default): 10 %. A 0.5-s window at 10 Mbit/s is
#: quantised to one frame (0.24 %); a TBF may add its bucket (tc-tbf(8): burst) on top of the
#: rate; the sampler's reads of its clock and counters a few ms apart move a 0.5-s window's
#: rate by a few % (analysis/fidelity.py WINDOW_S); and the queue may run dry between two
#: samples, which only lowers the rate. 10 % is above all of these together and well below
#: the 15-21 % deficits of the busiest trials of tests/data/pie-vs-red-local-0.1.
SHAPER_RATE_TOLERANCE = 0.10

#: How far a paced stream's rate in one iperf3 interval may be from its pacing rate before
#: the interval counts as off (``pacing_rate_tolerance_fraction``'s default): 10 %. iperf3
#: counts payload, fq and SO_MAX_PACING_RATE pace whole IP packets, so a stream paced exactly
#: sends 1448 of every 1500 bytes as payload, 3.5 % below its pacing rate (TCP with
#: timestamps, MTU 1500); a 1-s interval of a stream paced at 1.9 Mbit/s (pacing-lab at
#: k = 0.001) holds about 160 packets, so one packet more or less moves it by 0.6 %.
PACING_RATE_TOLERANCE = 0.10


def _sample_times(trial_dir: Path, collector: Collector):
    """The epoch times (s, numpy) of a queue collector's samples: every line of its node's
    qdisc.jsonl."""
    return parse_qdisc_stack(raw_text(trial_dir / collector.node / "qdisc.jsonl"))["t_epoch_s"].to_numpy()


def sampling_qdisc_stats(spec, record, trial_dir, start, duration, **_) -> tuple[float, str]:
    """``sampling_qdisc_stats``: per queue collector, its node's qdisc.jsonl lines within the
    schedule / the samples the schedule asks for; the smallest
    (:func:`analysis.substrate.inputs.lowest_share`)."""
    share, counts = {}, {}
    for c in spec.model.collectors:
        t = _sample_times(trial_dir, c)
        got = int(((t >= start) & (t < start + duration)).sum())
        want = max(1, round(duration / float(c.interval_s)))
        share[c.at], counts[c.at] = got / want, (got, want)
    return lowest_share(share, counts)


def shaper_rate_tolerance(model) -> float:
    """``shaper_rate_tolerance_fraction`` of the file's ``health:``, else
    :data:`SHAPER_RATE_TOLERANCE`."""
    tol = number(model.health.get("shaper_rate_tolerance_fraction"))
    return SHAPER_RATE_TOLERANCE if tol is None else tol


def shaper_rate_off(spec, record, trial_dir, start, duration, **_) -> tuple[float, str]:
    """``shaper_rate_off``: per sampled port with a shaper (:func:`analysis.fidelity.shaped_ports`),
    the share of its busy windows (:func:`analysis.fidelity.busy_intervals`) whose sending
    rate is off the shaped rate by more than ``shaper_rate_tolerance_fraction``
    (:data:`SHAPER_RATE_TOLERANCE` by default), judged by its one-sided 95 % lower
    confidence bound (:func:`analysis.fidelity.off_share_lower_bound`): the largest bound. A port
    with fewer than :data:`analysis.fidelity.MIN_WINDOWS` busy windows is not judged (not
    measured when no port has enough)."""
    ports = fidelity.trial_busy_intervals(spec.model, model_trial(spec, record, trial_dir),
                                          lambda node: raw_text(trial_dir / node / "qdisc.jsonl"), start,
                                          start + duration)
    if not ports:
        raise Unmeasurable(f"no queue collector samples a port with a shaper ({' or '.join(tc.SHAPERS)} rate_mbit) "
                           "in this trial")
    tol = shaper_rate_tolerance(spec.model)
    per, few = {}, {}
    for port, (rate, iv) in ports.items():
        if 0 < len(iv) < fidelity.MIN_WINDOWS:
            few[port] = len(iv)
        elif len(iv):
            off = fidelity.off_count(iv, tol)
            per[port] = (fidelity.off_share_lower_bound(off, len(iv)), off, len(iv), rate,
                         float(iv["deviation"].median()), float(iv["deviation"].abs().quantile(0.99)))
    if not per and few:
        raise Unmeasurable(", ".join(f"{n} busy window{'s' * (n > 1)} at {p}" for p, n in few.items())
                           + f" (a backlog in consecutive samples for {fidelity.WINDOW_S:g} s): fewer than the "
                           f"{fidelity.MIN_WINDOWS} needed to judge a share of them off")
    if not per:
        raise Unmeasurable(f"no busy window (a backlog in consecutive samples for {fidelity.WINDOW_S:g} s) at "
                           f"{', '.join(ports)}: the links never had to work at their rate")
    worst = max(per, key=lambda p: per[p][0])
    return per[worst][0], "; ".join(
        f"{p}: {v[1]} of {v[2]} busy windows ({v[1] / v[2]:.1%}; lower bound {v[0]:.1%}) off {v[3]:g} Mbit/s "
        f"by more than {tol:.0%} (median deviation {v[4]:+.1%}, 99th percentile of |deviation| {v[5]:.1%})"
        for p, v in sorted(per.items(), key=lambda kv: kv[0] != worst))


def pacing_rate_off(spec, record, trial_dir, **_) -> tuple[float, str]:
    """``pacing_rate_off``: per paced iperf3 item of the trial whose pacing limits its rate
    (:func:`netrepro.model.pacing_limited`),
    the share of its streams' measured intervals (not omitted, each stream's first left out:
    slow start reaches the pacing rate within it) whose rate (iperf3's bits_per_second) is
    off the stream's pacing rate by more than ``pacing_rate_tolerance_fraction``
    (:data:`PACING_RATE_TOLERANCE` by default); the largest share. Such a stream off its
    rate was paced unevenly by the substrate (late timers under emulation send less, bursts
    more)."""
    rates = pacing_limited(spec.model, model_trial(spec, record, trial_dir))
    if not rates:
        raise NotApplicable("no iperf3 item of the trial is limited by its pacing (an item without pacing, or paced "
                            "items that together fill a shaper)")
    tol = number(spec.model.health.get("pacing_rate_tolerance_fraction"))
    tol = PACING_RATE_TOLERANCE if tol is None else tol
    per = {}
    for it in trial_items(spec, record, trial_dir, ("iperf3",)):
        if it.id not in rates:
            continue
        f = trial_dir / it.src / f"iperf3-{it.id}.json"
        try:
            iv, _ = parse_iperf3(raw_text(f))
        except ValueError as exc:
            raise NotMeasured(f"{it.src}/{f.name}: {exc}") from None
        iv = iv[~iv["omitted"]].sort_values(["stream", "t_s"], kind="stable")
        iv = iv[iv.groupby("stream").cumcount() > 0]
        if iv.empty:
            continue
        dev = iv["bits_per_second"].to_numpy(dtype=float) / (rates[it.id] * 1e6) - 1
        per[it.id] = (float((abs(dev) > tol).mean()), int((abs(dev) > tol).sum()), len(dev), rates[it.id],
                         float(pd.Series(dev).median()))
    if not per:
        raise NotMeasured("no paced item has a measured interval after its first")
    worst = max(per, key=lambda i: per[i][0])
    return per[worst][0], "; ".join(
        f"{i}: {v[1]} of {v[2]} intervals off {v[3]:g} Mbit/s by more than {tol:.0%} (median deviation {v[4]:+.1%})"
        for i, v in sorted(per.items(), key=lambda kv: kv[0] != worst))


#: The quantile of the samples' lateness that ``timer_late`` reports: the 99th percentile, as
#: cyclictest's histograms are read for a latency bound (rt-tests); the largest lateness is in
#: the detail.
TIMER_LATE_QUANTILE = 0.99


def timer_late(spec, record, trial_dir, start, duration, **_) -> tuple[float, str]:
    """``timer_late``: per queue collector, the lateness of its samples within the schedule
    behind their deadlines (:func:`analysis.fidelity.timer_lateness_ms`), at
    :data:`TIMER_LATE_QUANTILE`; the largest, ms."""
    per = {}
    for c in spec.model.collectors:
        if c.kind != "qdisc_stats":
            continue
        t = _sample_times(trial_dir, c)
        late = fidelity.timer_lateness_ms(t, float(c.interval_s))
        late = late[(t >= start) & (t < start + duration)]
        if len(late):
            per[c.at] = (float(np.quantile(late, TIMER_LATE_QUANTILE)), float(np.median(late)),
                           float(late.max()), len(late), float(c.interval_s))
    if not per:
        raise NotMeasured("no queue collector sample within the schedule")
    worst = max(per, key=lambda p: per[p][0])
    return per[worst][0], "; ".join(
        f"{p}: {TIMER_LATE_QUANTILE:.0%} of {v[3]} samples (every {v[4]:g} s) within {v[0]:.1f} ms of their "
        f"deadlines (median {v[1]:.1f} ms, largest {v[2]:.1f} ms late)"
        for p, v in sorted(per.items(), key=lambda kv: kv[0] != worst))
