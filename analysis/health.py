"""Health of the substrate: does a trial's own data show that the emulation, not the AQM,
shaped its result?

Each trial measures the machine it ran on from its raw files (``raw/<trial>/<node>/``) and
its record in run.json, and judges every measurement against the thresholds of the
experiment file's ``health:`` section (netrepro/schemas/experiment.schema.json). A trial
that fails a check makes every claim that reads it *inconclusive* (:func:`analysis.claims.evaluate`):
a result shaped by a saturated CPU or late flows says nothing about the paper.

The checks, in this order (``id``: value, unit; threshold key; sources):

- ``nodes_cpu_busy``: the largest share of CPU time not idle on any node's machine over the
  trial's schedule: from the ``start`` to the ``end`` reading of the node's ``cpu-window.txt``
  (the ``cpu`` line of /proc/stat, proc(5), read 0.1 s before the schedule's start and at its
  end by roles/collectors/files/nr-window.sh). Runs recorded before it was (and the ns3 site, which has
  no CPU to watch) use the trial's release to its ``meta-after.json`` snapshot (``cpu_ticks``),
  which also counts the barrier's lead and the processes' ending, 4-5 s against a 6-s schedule
  at TIME_SCALE 0.1; the release's reading is run.json's ``barrier.cpu_ticks`` (every node
  acknowledges the release), else ``meta-before.json``, which also counts the arming of the
  collectors and flows; ``fraction``;
  ``nodes_cpu_busy_max_fraction``. On the local site every node shares one machine (the same
  /proc/stat); on a testbed each node is its own, and the busiest one counts.
- ``ping_received``: per ping item of the trial (:mod:`netrepro.model`), echo replies to the
  probes sent within its schedule (``[start, start + length)`` shifted back half an
  interval) / the probes the schedule asks for (length / interval, as
  roles/collectors/files/nr-ping.sh counts them); the smallest; ``fraction``;
  ``ping_received_min_fraction``. Probes dropped by the AQM count as missing here too.
- ``flow_start_lag``: for each time at which iperf3 or FTP items start, the latest recorded
  start behind the schedule, ``start - (trial start + start_s)`` (iperf3: ``.json.t0``; FTP:
  flows.csv's ``start_epoch_s``); the largest; ``ms``; ``flow_start_lag_max_ms``.
- ``flow_start_skew``: for each time at which two or more such items start, max - min of
  their starts; the largest; ``ms``; ``flow_start_skew_max_ms``. Without such a time it is
  not measured (one FTP item's flows are one curl process: their spread is no skew).
- ``data_start_lag``: per iperf3 or FTP item, how late its data started behind its
  scheduled start (FTP: the median flow's start + ``data_start_s``, curl's time_starttransfer
  in flows.csv; iperf3: ``.json.t0`` + the start of its first interval with bytes), as a share
  of the phase the item opens (else of the item's length); the largest; ``fraction``;
  ``data_start_lag_max_fraction``. ``flow_start_lag`` times the client process; this times the
  data, which an FTP download sends only after its login and data connection, several RTTs.
  A 5-s phase whose flows carry data 1.5 s late is 30 % shorter than the schedule says.
- ``sampling_<kind>`` (``sampling_ping``, ``sampling_qdisc_stats``): per ping item or queue
  collector, samples recorded within the schedule / samples the schedule asks for; the
  smallest; ``fraction``; ``collector_sampling_min_fraction``. A ping sample is a probe sent
  (answered or reported ``no answer yet`` by ``ping -O``); a queue sample a line of qdisc.jsonl.
- ``queue_delay_excess``: per ping item and phase, the share of its echo replies whose
  queueing delay (ping RTT - its node's base RTT, run.json or base_rtt.txt) exceeds the time
  the buffers on its path there and back take to drain (:func:`netrepro.model.ping_buffers`:
  each shaped port's leaf limit x 8 / the stack's shaping rate, summed) by more than
  ``queue_delay_excess_max_ms`` (the tolerance, default 0): such a delay is physically
  impossible in a faithful emulation; the largest share; ``fraction``;
  ``queue_delay_excess_max_fraction``. A share, not the largest delay: the claims read each
  phase's median, which a few delayed samples cannot move (one 250 ms stall of the micro-VM
  delays ~3 of a full-length phase's 500 samples per node). Not measured without ``base_rtt``
  or a shaped buffer on any ping's path. The detail names the worst item and phase and the
  largest queueing delay seen.
- ``shaper_rate_off``: per port sampled by a queue collector whose stack has a shaper, the
  share of its busy windows (consecutive samples with a backlog, 0.5 s or more) whose sending
  rate (the device's tx_bytes) is off the shaped rate by more than ``shaper_rate_tolerance_fraction``
  (default :data:`SHAPER_RATE_TOLERANCE`), as its one-sided 95 % lower confidence bound
  (Wilson; a short trial's few windows are weak evidence); the largest bound; ``fraction``;
  ``shaper_rate_off_max_fraction``. Mininet-HiFi's link invariant (analysis/fidelity.py): a
  busy link sends at its rate, and a host that cannot keep up sends less. Not measured when
  no sampled port has a shaper or no interval was busy.
- ``timer_late``: per queue collector, how late its samples within the schedule woke behind
  their deadlines (the sampler keeps a fixed schedule: analysis/fidelity.py
  ``timer_lateness_ms``), at the 99th percentile; the largest; ``ms``; ``timer_late_max_ms``.
  The timers of the node that runs the collector, under the trial's own load, as cyclictest
  measures a kernel's timer latency: what a pacing qdisc's watchdog, a shaper's and netem's
  need from the same kernel (on the local site every node's; on a testbed the sampled
  node's). Not applicable in a simulated trial.
- ``controller_load``: the larger 1-minute load average of the controller machine read
  before and after the trial (run.json ``controller_loadavg``), per core
  (``controller_cores``); ``load per core``; ``controller_load_per_core_max``. Not measured
  for a schedule shorter than the average's time constant (:data:`LOAD_AVERAGE_TAU_S`),
  whose reading is mostly the minute before it (back-to-back quick runs were judged by the
  previous run's load: docs/runs/quick-pacing-lab-2026-11-26).
- ``controller_cpu_busy``: the controller machine's share of CPU time not idle during the
  trial (run.json ``controller_cpu_busy``, from its own /proc/stat); ``fraction``;
  ``controller_cpu_busy_max_fraction``.

Every experiment gets these checks from its model, each where its data exist (:func:`_measures`);
:data:`netrepro.model.HEALTH_NEEDS` says which data each threshold needs. A check the
experiment gives nothing to measure says ``not measured`` and is not judged: it never passes.

A check whose threshold the experiment file leaves out is measured but not judged
(``passed: null``). A judged check that cannot be measured (a file missing or unreadable, a
field not recorded) or whose computation raises fails, with the reason in ``detail``:
:func:`trial_health` never raises.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Callable

import numpy as np
import pandas as pd

from analysis import fidelity
from netrepro import tc
from analysis.raw import trial_base_rtt_ms, parse_flows, parse_iperf3, parse_ping, parse_qdisc_stack
from netrepro.model import STARTED_KINDS, Collector, data_kinds, health_data, pacing_limited, ping_buffers
from netrepro.runfolder import cpu_busy
from netrepro.spec import check_time_scale

#: check id (or id prefix for ``sampling_<kind>``) -> (threshold key in ``health:``, unit,
#: "max" when the value must not exceed the threshold, "min" when it must reach it).
CHECKS: dict[str, tuple[str, str, str]] = {
    "nodes_cpu_busy": ("nodes_cpu_busy_max_fraction", "fraction", "max"),
    "ping_received": ("ping_received_min_fraction", "fraction", "min"),
    "flow_start_lag": ("flow_start_lag_max_ms", "ms", "max"),
    "flow_start_skew": ("flow_start_skew_max_ms", "ms", "max"),
    "data_start_lag": ("data_start_lag_max_fraction", "fraction", "max"),
    "shaper_rate_off": ("shaper_rate_off_max_fraction", "fraction", "max"),
    "pacing_rate_off": ("pacing_rate_off_max_fraction", "fraction", "max"),
    "timer_late": ("timer_late_max_ms", "ms", "max"),
    "sampling": ("collector_sampling_min_fraction", "fraction", "min"),
    "queue_delay_excess": ("queue_delay_excess_max_fraction", "fraction", "max"),
    "controller_load": ("controller_load_per_core_max", "load per core", "max"),
    "controller_cpu_busy": ("controller_cpu_busy_max_fraction", "fraction", "max"),
}

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

#: ``ping -O`` line of a probe without a reply when the next one is sent (iputils ping(8)).
_NO_ANSWER = re.compile(r"^\s*\[(?P<t>\d+(?:\.\d*)?)\]\s*no answer yet for icmp_seq=(?P<seq>\d+)")


class _NotMeasured(Exception):
    """A measurement whose inputs are missing; ``str()`` says which."""


class _NotApplicable(Exception):
    """A check with nothing to measure in this trial (no item of its kind): not judged."""


class _Unmeasurable(Exception):
    """A check this experiment's design gives nothing to measure (no two items starting
    together, no base RTT, no shaped buffer on a ping's path): reported "not measured",
    never judged, so that it never passes for what it did not measure."""


def _text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except FileNotFoundError:
        raise _NotMeasured(f"{path.parent.name}/{path.name} missing") from None
    except OSError as exc:
        raise _NotMeasured(f"{path.parent.name}/{path.name} unreadable ({exc.strerror})") from None


def _num(x) -> float | None:
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def _pct(x: float) -> str:
    return f"{x:.1%}"


# --- the measurements: each returns (value, detail) or raises _NotMeasured -------------------
def _cpu_window(path: Path) -> tuple[dict, dict] | None:
    """The node's ``cpu-window.txt`` (roles/collectors/files/nr-window.sh: ``start TICKS`` and
    ``end TICKS``, the cpu line of /proc/stat at the schedule's start and end) as two
    snapshots for :func:`netrepro.runfolder.cpu_busy`, or None without a readable one."""
    try:
        lines = dict(ln.split(" ", 1) for ln in path.read_bytes().decode("utf-8", "replace").splitlines() if " " in ln)
    except OSError:
        return None
    if not {"start", "end"} <= set(lines):
        return None
    return {"cpu_ticks": lines["start"]}, {"cpu_ticks": lines["end"]}


def _nodes_cpu_busy(spec, record: dict, trial_dir: Path, **_) -> tuple[float, str]:
    barrier = record.get("barrier") if isinstance(record.get("barrier"), dict) else {}
    released = barrier.get("cpu_ticks") if isinstance(barrier.get("cpu_ticks"), dict) else {}
    busy, missing, from_release, scheduled = {}, [], 0, 0
    for node in spec.nodes:
        window = _cpu_window(trial_dir / node / "cpu-window.txt")
        b = cpu_busy(*window) if window is not None else None
        if b is not None:
            busy[node] = b
            scheduled += 1
            continue
        metas = []
        for which in ("before", "after"):
            if which == "before" and isinstance(released.get(node), str):
                metas.append({"cpu_ticks": released[node]})
                from_release += 1
                continue
            try:
                m = json.loads((trial_dir / node / f"meta-{which}.json").read_bytes().decode("utf-8", "replace"))
            except (OSError, ValueError):
                m = None
            metas.append(m if isinstance(m, dict) else None)
        b = cpu_busy(*metas) if None not in metas else None
        if b is None:
            missing.append(node)
        else:
            busy[node] = b
    if not busy:
        raise _NotMeasured("no node has two readable /proc/stat snapshots (cpu-window.txt, or cpu_ticks in "
                           "meta-before.json and meta-after.json)")
    top = max(busy, key=busy.get)  # the first in node order among equals
    others = len(busy) - scheduled
    since = ("the release" if from_release >= others else "meta-before.json" if not from_release
             else f"the release ({from_release} nodes) or meta-before.json") + " to meta-after.json"
    how = ("over the schedule (cpu-window.txt)" if not others else f"from {since}" if not scheduled
           else f"over the schedule ({scheduled} nodes) or from {since}")
    detail = f"busiest {top} {_pct(busy[top])} of {len(busy)} nodes' machines, {how}"
    if missing:
        detail += f"; no snapshots from {', '.join(missing)}"
    return busy[top], detail


def _model_trial(spec, record: dict, trial_dir: Path) -> dict:
    """The model's trial of a trial record: its ``trial`` (a repeated run's instance
    ``<trial>.r<k>``, netrepro.schedule), else the raw folder's name (``raw/<trial id>``)."""
    tid = record.get("trial") or trial_dir.name
    for t in spec.model.trials:
        if t["id"] == tid:
            return t
    raise _NotMeasured(f"no trial {tid!r} in the experiment")


def _items(spec, record, trial_dir, kinds: tuple[str, ...]) -> list[dict]:
    items = [it for it in _model_trial(spec, record, trial_dir)["traffic"] if it["kind"] in kinds]
    if not items:
        raise _NotApplicable(f"no {' or '.join(kinds)} item in the trial")
    return items


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
    for it in _items(spec, record, trial_dir, ("ping",)):
        lo, length, iv = start + it["start_s"] * time_scale, it["duration_s"] * time_scale, it["interval_s"]
        p = _probes(_text(trial_dir / it["from"] / "ping.txt"), iv)
        inside = p[(p["sent_epoch_s"] >= lo - iv / 2) & (p["sent_epoch_s"] < lo + length - iv / 2)]
        want = max(1, round(length / iv))
        out[it["id"]] = (min(len(inside), want), min(int(inside["answered"].sum()), want), want)
    return out


def _ping_received(spec, record, trial_dir, start, time_scale, **_) -> tuple[float, str]:
    counts = _ping_counts(spec, record, trial_dir, start, time_scale)
    share = {n: got / want for n, (_, got, want) in counts.items()}
    low = min(share, key=share.get)
    return share[low], f"lowest {low} ({counts[low][1]} of {counts[low][2]}); " + ", ".join(
        f"{n} {_pct(v)}" for n, v in share.items())


def _sample_times(trial_dir: Path, collector: Collector):
    """The epoch times (s, numpy) of a queue collector's samples: every line of its node's
    qdisc.jsonl."""
    return parse_qdisc_stack(_text(trial_dir / collector.node / "qdisc.jsonl"))["t_epoch_s"].to_numpy()


def _sampling(kind: str) -> Callable:
    """``sampling_<kind>``: per ping item (its probes sent, answered or not) or queue
    collector (its node's qdisc.jsonl lines), the samples within its schedule / the samples
    the schedule asks for; the smallest."""
    def measure(spec, record, trial_dir, start, duration, time_scale, **_) -> tuple[float, str]:
        share, counts = {}, {}
        if kind == "ping":
            for iid, (sent, _, want) in _ping_counts(spec, record, trial_dir, start, time_scale).items():
                share[iid], counts[iid] = sent / want, (sent, want)
        else:
            for c in spec.model.collectors:
                t = _sample_times(trial_dir, c)
                got = int(((t >= start) & (t < start + duration)).sum())
                want = max(1, round(duration / float(c.interval_s)))
                share[c.at], counts[c.at] = got / want, (got, want)
        low = min(share, key=share.get)
        return share[low], f"lowest {low} ({counts[low][0]} of {counts[low][1]} samples in the schedule); " + \
            ", ".join(f"{n} {_pct(v)}" for n, v in share.items())
    return measure


def _phase_names(spec, record, time_scale) -> dict[float, str]:
    phases = record.get("phases") if isinstance(record.get("phases"), list) else None
    if phases is None:
        phases = [p.scaled(time_scale) for p in spec.model.phases]
    return {round(p["start_s"], 3): p["name"] for p in phases
            if isinstance(p, dict) and _num(p.get("start_s")) is not None}


def _flows_file(trial_dir: Path, it: dict, nth: dict) -> Path:
    """The flows.csv an FTP item's receiver wrote: its k-th FTP item of the trial (k >= 1)
    writes flows-<k>.csv (roles/flow_clients). ``nth``: receiver -> FTP items seen so far,
    updated; items must come in the trial's order."""
    k = nth[it["to"]] = nth.get(it["to"], -1) + 1
    return trial_dir / it["to"] / ("flows.csv" if k == 0 else f"flows-{k}.csv")


def _item_starts(spec, record, trial_dir: Path) -> dict[str, list[float]]:
    """Traffic item id -> the epoch times (s) its client recorded starting it: an iperf3
    item's ``iperf3-<id>.json.t0`` (nr-iperf3.sh), an FTP item's ``start_epoch_s`` of every
    flow in its receiver's flows.csv (the receiver's k-th FTP item of the trial, k >= 1:
    flows-<k>.csv; roles/flow_clients). Raises _NotMeasured naming the files without one."""
    out, missing, nth = {}, [], {}
    for it in _items(spec, record, trial_dir, STARTED_KINDS):
        try:
            if it["kind"] == "iperf3":
                f = trial_dir / it["from"] / f"iperf3-{it['id']}.json.t0"
                try:
                    out[it["id"]] = [float(_text(f).split()[0])]
                except (IndexError, ValueError):
                    raise _NotMeasured(f"{it['from']}/{f.name} has no start time") from None
            else:
                f = _flows_file(trial_dir, it, nth)
                starts = [float(x) for x in parse_flows(_text(f))["start_epoch_s"].dropna()]
                if not starts:
                    raise _NotMeasured(f"{it['to']}/{f.name} has no flow start")
                out[it["id"]] = starts
        except _NotMeasured as exc:
            missing.append(str(exc))
    if missing:
        raise _NotMeasured("; ".join(missing))
    return out


def _start_slots(spec, record, trial_dir, start, time_scale) -> list[dict]:
    """The times at which traffic items start, in order: ``[{"label", "items", "lags_s"}]``,
    lags_s: every recorded start of those items minus (trial start + the item's start_s at
    ``time_scale``). A slot's label is the phase that opens then, else its items' ids."""
    starts = _item_starts(spec, record, trial_dir)
    names = _phase_names(spec, record, time_scale)
    slots: dict[float, dict] = {}
    for it in _items(spec, record, trial_dir, STARTED_KINDS):
        at = round(it["start_s"] * time_scale, 3)
        slot = slots.setdefault(at, {"at": at, "items": [], "lags_s": []})
        slot["items"].append(it["id"])
        slot["lags_s"] += [s - (start + it["start_s"] * time_scale) for s in starts[it["id"]]]
    for at, slot in slots.items():
        slot["label"] = names.get(at) or ", ".join(slot["items"])
    return [slots[k] for k in sorted(slots)]


def _flow_start_lag(spec, record, trial_dir, start, time_scale, **_) -> tuple[float, str]:
    """``flow_start_lag``: per start time, the latest recorded start of the items starting
    then behind their schedule; the largest, ms."""
    per = {s["label"]: 1000 * max(s["lags_s"]) for s in _start_slots(spec, record, trial_dir, start, time_scale)}
    worst = max(per, key=per.get)
    return per[worst], f"worst {worst}; " + ", ".join(f"{k} {round(v):+d}" for k, v in per.items()) + " ms"


def _flow_start_skew(spec, record, trial_dir, start, time_scale, **_) -> tuple[float, str]:
    """``flow_start_skew``: per start time at which two or more items start, max - min of
    their recorded starts; the largest, ms. Without such a time the check measures nothing
    (the flows of one FTP item are one curl process with one start): not measured."""
    slots = [s for s in _start_slots(spec, record, trial_dir, start, time_scale) if len(s["items"]) > 1]
    if not slots:
        raise _Unmeasurable("no two iperf3 or FTP items of this trial start at the same time (each start time "
                            "opens one item): there is no skew to measure")
    per = {s["label"]: 1000 * (max(s["lags_s"]) - min(s["lags_s"])) for s in slots}
    worst = max(per, key=per.get)
    return per[worst], f"worst {worst}; " + ", ".join(f"{k} {round(v):d}" for k, v in per.items()) + " ms"


def _item_data_starts(spec, record, trial_dir: Path, it: dict, nth: dict) -> tuple[float, str]:
    """(epoch s, how) at which the data of traffic item ``it`` started flowing.

    FTP: per flow of its receiver's flows.csv (the k-th FTP item of that receiver:
    flows-<k>.csv), its start + ``data_start_s`` (curl's time_starttransfer: the login, PASV
    and data connection come first); a flow that got no byte (no time, or 0, as curl writes
    it) counts at its end; the item's data start is the median flow's: half of its flows carry
    data by then. iperf3: its ``.json.t0`` + the start of the first reporting interval in which
    any stream sent bytes (a lower bound by the control exchange before iperf3's test timer,
    a few RTTs: iperf3 -J times its intervals from the test's start). ``nth``: receiver ->
    FTP items seen so far (updated). Raises _NotMeasured naming the file without the data."""
    if it["kind"] == "iperf3":
        f = trial_dir / it["from"] / f"iperf3-{it['id']}.json"
        try:
            t0 = float(_text(f.with_name(f.name + ".t0")).split()[0])
        except (IndexError, ValueError):
            raise _NotMeasured(f"{it['from']}/{f.name}.t0 has no start time") from None
        try:
            iv, _ = parse_iperf3(_text(f))
        except ValueError as exc:
            raise _NotMeasured(f"{it['from']}/{f.name}: {exc}") from None
        per = iv.groupby("t_s", sort=True)["bits_per_second"].sum()
        ends = per.index.to_numpy()
        sent = [i for i, b in enumerate(per.to_numpy()) if b > 0]
        if not sent:
            raise _NotMeasured(f"{it['from']}/{f.name} has no interval with bytes")
        return t0 + (float(ends[sent[0] - 1]) if sent[0] else 0.0), "first interval with bytes"
    f = _flows_file(trial_dir, it, nth)
    fl = parse_flows(_text(f))
    if fl.empty or fl["start_epoch_s"].isna().all():
        raise _NotMeasured(f"{it['to']}/{f.name} has no flow start")
    if fl["data_start_s"].isna().all():
        raise _NotMeasured(f"{it['to']}/{f.name} has no data_start_s (recorded before flows.csv had it)")
    got = (fl["data_start_s"] > 0) & (fl["bytes"] > 0)
    at = (fl["start_epoch_s"] + fl["data_start_s"]).where(got, fl["end_epoch_s"])
    return float(at.median()), f"median of {len(fl)} flows' first byte ({int((~got).sum())} without data)"


def _data_start_lag(spec, record, trial_dir, start, duration, time_scale, **_) -> tuple[float, str]:
    """``data_start_lag``: per iperf3 or FTP item, how late its data started
    (:func:`_item_data_starts`) behind its scheduled start, as a share of the phase it opens
    (the phase whose start is the item's; else the item's own length); the largest."""
    windows = {round(lo, 3): (name, hi - lo) for name, lo, hi in _phase_windows(spec, record, duration, time_scale)}
    per, nth = {}, {}
    for it in _items(spec, record, trial_dir, STARTED_KINDS):
        at = it["start_s"] * time_scale
        data, how = _item_data_starts(spec, record, trial_dir, it, nth)
        name, length = windows.get(round(at, 3), (it["id"], it["duration_s"] * time_scale))
        lag = data - (start + at)
        per[it["id"]] = (min(max(lag, 0.0) / length, 1.0), lag, name, length, how, at)  # 1: the whole phase lost
    worst = max(per, key=lambda i: per[i][0])
    share, lag, name, length, how, _ = per[worst]
    # per phase (or item) opened: the latest data start of the items opening it, for the
    # report's table of effective phase windows
    opened: dict[str, dict] = {}
    for _, lag_i, name_i, length_i, _, at in per.values():
        o = opened.setdefault(name_i, {"phase": name_i, "start_s": round(at, 3), "length_s": round(length_i, 3),
                                       "data_lag_s": lag_i})
        o["data_lag_s"] = round(max(o["data_lag_s"], lag_i), 3)
    return share, (f"worst {worst}: data {lag * 1000:.0f} ms after its start, {share:.1%} of {name} "
                   f"({length:g} s; {how}); " + ", ".join(f"{i} {v[1] * 1000:+.0f} ms" for i, v in per.items())), \
        sorted(opened.values(), key=lambda o: o["start_s"])


def shaper_rate_tolerance(model) -> float:
    """``shaper_rate_tolerance_fraction`` of the file's ``health:``, else
    :data:`SHAPER_RATE_TOLERANCE`."""
    tol = _num(model.health.get("shaper_rate_tolerance_fraction"))
    return SHAPER_RATE_TOLERANCE if tol is None else tol


def _shaper_rate(spec, record, trial_dir, start, duration, **_) -> tuple[float, str]:
    """``shaper_rate_off``: per sampled port with a shaper (:func:`analysis.fidelity.shaped_ports`),
    the share of its busy windows (:func:`analysis.fidelity.busy_intervals`) whose sending
    rate is off the shaped rate by more than ``shaper_rate_tolerance_fraction``
    (:data:`SHAPER_RATE_TOLERANCE` by default), judged by its one-sided 95 % lower
    confidence bound (:func:`analysis.fidelity.off_share_lower_bound`): the largest bound. A port
    with fewer than :data:`analysis.fidelity.MIN_WINDOWS` busy windows is not judged (not
    measured when no port has enough)."""
    ports = fidelity.trial_busy_intervals(spec.model, _model_trial(spec, record, trial_dir),
                                          lambda node: _text(trial_dir / node / "qdisc.jsonl"), start, start + duration)
    if not ports:
        raise _Unmeasurable(f"no queue collector samples a port with a shaper ({' or '.join(tc.SHAPERS)} rate_mbit) "
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
        raise _Unmeasurable(", ".join(f"{n} busy window{'s' * (n > 1)} at {p}" for p, n in few.items())
                            + f" (a backlog in consecutive samples for {fidelity.WINDOW_S:g} s): fewer than the "
                            f"{fidelity.MIN_WINDOWS} needed to judge a share of them off")
    if not per:
        raise _Unmeasurable(f"no busy window (a backlog in consecutive samples for {fidelity.WINDOW_S:g} s) at {', '.join(ports)}: the links never "
                            "had to work at their rate")
    worst = max(per, key=lambda p: per[p][0])
    return per[worst][0], "; ".join(
        f"{p}: {v[1]} of {v[2]} busy windows ({v[1] / v[2]:.1%}; lower bound {v[0]:.1%}) off {v[3]:g} Mbit/s "
        f"by more than {tol:.0%} (median deviation {v[4]:+.1%}, 99th percentile of |deviation| {v[5]:.1%})"
        for p, v in sorted(per.items(), key=lambda kv: kv[0] != worst))


def _pacing_rate(spec, record, trial_dir, **_) -> tuple[float, str]:
    """``pacing_rate_off``: per paced iperf3 item of the trial whose pacing limits its rate
    (:func:`netrepro.model.pacing_limited`),
    the share of its streams' measured intervals (not omitted, each stream's first left out:
    slow start reaches the pacing rate within it) whose rate (iperf3's bits_per_second) is
    off the stream's pacing rate by more than ``pacing_rate_tolerance_fraction``
    (:data:`PACING_RATE_TOLERANCE` by default); the largest share. Such a stream off its
    rate was paced unevenly by the substrate (late timers under emulation send less, bursts
    more)."""
    rates = pacing_limited(spec.model, _model_trial(spec, record, trial_dir))
    if not rates:
        raise _NotApplicable("no iperf3 item of the trial is limited by its pacing (an item without pacing, or paced "
                             "items that together fill a shaper)")
    tol = _num(spec.model.health.get("pacing_rate_tolerance_fraction"))
    tol = PACING_RATE_TOLERANCE if tol is None else tol
    per = {}
    for it in _items(spec, record, trial_dir, ("iperf3",)):
        if it["id"] not in rates:
            continue
        f = trial_dir / it["from"] / f"iperf3-{it['id']}.json"
        try:
            iv, _ = parse_iperf3(_text(f))
        except ValueError as exc:
            raise _NotMeasured(f"{it['from']}/{f.name}: {exc}") from None
        iv = iv[~iv["omitted"]].sort_values(["stream", "t_s"], kind="stable")
        iv = iv[iv.groupby("stream").cumcount() > 0]
        if iv.empty:
            continue
        dev = iv["bits_per_second"].to_numpy(dtype=float) / (rates[it["id"]] * 1e6) - 1
        per[it["id"]] = (float((abs(dev) > tol).mean()), int((abs(dev) > tol).sum()), len(dev), rates[it["id"]],
                         float(pd.Series(dev).median()))
    if not per:
        raise _NotMeasured("no paced item has a measured interval after its first")
    worst = max(per, key=lambda i: per[i][0])
    return per[worst][0], "; ".join(
        f"{i}: {v[1]} of {v[2]} intervals off {v[3]:g} Mbit/s by more than {tol:.0%} (median deviation {v[4]:+.1%})"
        for i, v in sorted(per.items(), key=lambda kv: kv[0] != worst))


#: The quantile of the samples' lateness that ``timer_late`` reports: the 99th percentile, as
#: cyclictest's histograms are read for a latency bound (rt-tests); the largest lateness is in
#: the detail.
TIMER_LATE_QUANTILE = 0.99


def _timer_late(spec, record, trial_dir, start, duration, **_) -> tuple[float, str]:
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
        raise _NotMeasured("no queue collector sample within the schedule")
    worst = max(per, key=lambda p: per[p][0])
    return per[worst][0], "; ".join(
        f"{p}: {TIMER_LATE_QUANTILE:.0%} of {v[3]} samples (every {v[4]:g} s) within {v[0]:.1f} ms of their "
        f"deadlines (median {v[1]:.1f} ms, largest {v[2]:.1f} ms late)"
        for p, v in sorted(per.items(), key=lambda kv: kv[0] != worst))


def _phase_windows(spec, record, duration, time_scale) -> list[tuple[str, float, float]]:
    """(name, start s, end s) of the trial's phases (run.json's, else the file's at
    ``time_scale``), or the whole schedule as ``all`` without phases."""
    phases = record.get("phases") if isinstance(record.get("phases"), list) else None
    if not phases:
        phases = [p.scaled(time_scale) for p in spec.model.phases]
    return [(p["name"], p["start_s"], p["end_s"]) for p in phases] or [("all", 0.0, duration or math.inf)]


def queue_delay_ms(ping: pd.DataFrame, base_ms: float, start: float) -> pd.DataFrame:
    """Queueing delay of a ping item's echo replies: ``t_s`` (s from the trial's start) and
    ``queue_ms`` (RTT - the path's base RTT, ms), from :func:`analysis.raw.parse_ping`'s
    frame; replies without a time or an RTT are left out."""
    p = ping[pd.notna(ping["t_epoch_s"]) & pd.notna(ping["rtt_ms"])]
    return pd.DataFrame({"t_s": p["t_epoch_s"].to_numpy() - start, "queue_ms": p["rtt_ms"].to_numpy() - base_ms})


def _queue_delay_excess(spec, record, trial_dir, start, duration, time_scale, **_) -> tuple[float, str]:
    """``queue_delay_excess``: per ping item and phase, the share of its echo replies whose
    queueing delay exceeds the time the buffers of its path take to drain
    (:func:`netrepro.model.ping_buffers`: the sum over its shaped ports of limit bytes x 8 /
    rate) by more than ``queue_delay_excess_max_ms``; the largest share."""
    m = spec.model
    if not m.base_rtt:
        raise _Unmeasurable("the experiment has no base_rtt: no queueing delay without the unloaded RTT")
    trial = _model_trial(spec, record, trial_dir)
    tolerance_ms = _num(m.health.get("queue_delay_excess_max_ms")) or 0.0
    statistic = m.base_rtt.statistic
    windows = _phase_windows(spec, record, duration, time_scale)
    largest: tuple[float, str, float] | None = None  # (queueing delay ms, item, t_s)
    worst: tuple[float, str, str, int, int] | None = None  # (share, item, phase, over, samples)
    drains, unbounded = {}, []
    for it in _items(spec, record, trial_dir, ("ping",)):
        try:
            bufs = ping_buffers(m, trial, it)
        except ValueError as exc:
            raise _NotMeasured(f"{it['id']}: {exc}") from None
        if not bufs:
            unbounded.append(it["id"])
            continue
        drain_ms = sum(b * 8 / (r * 1e6) * 1000 for _, b, r in bufs)
        drains[it["id"]] = (drain_ms, "; ".join(f"{p}: {b} B at {r:g} Mbit/s" for p, b, r in bufs))
        base = trial_base_rtt_ms(record, it["from"], lambda: _text(trial_dir / it["from"] / "base_rtt.txt"), statistic)
        if not math.isfinite(base):
            raise _NotMeasured(f"no base RTT for {it['id']} ({it['from']}/base_rtt.txt)")
        q = queue_delay_ms(parse_ping(_text(trial_dir / it["from"] / "ping.txt")), base, start)
        t, d = q["t_s"].to_numpy(), q["queue_ms"].to_numpy()
        if len(d):
            i = int(d.argmax())
            if largest is None or d[i] > largest[0]:
                largest = (float(d[i]), it["id"], float(t[i]))
        for name, lo, hi in windows:
            inside = (t >= lo) & (t < hi)
            n = int(inside.sum())
            if n:
                over = int((d[inside] > drain_ms + tolerance_ms).sum())
                if worst is None or over / n > worst[0]:
                    worst = (over / n, it["id"], name, over, n)
    if not drains:
        raise _Unmeasurable(f"no ping item's path crosses a port with a shaper and a limit ({', '.join(unbounded)})")
    if worst is None or largest is None:
        raise _NotMeasured("no echo reply within the phases")
    share, iid, phase, over, n = worst
    q, qid, t = largest
    return share, (f"worst {iid} {phase}: {over} of {n} samples more than {tolerance_ms:g} ms above the buffers' "
                   f"drain time ({drains[iid][1]}: {drains[iid][0]:.1f} ms); "
                   f"largest queueing delay {q:.1f} ms ({qid} at {t:.1f} s)"
                   + (f"; no shaped buffer on the path of {', '.join(unbounded)}" if unbounded else ""))


#: The time constant of the kernel's 1-minute load average, s: it decays by e^(-5/60) every
#: 5-s tick (kernel/sched/loadavg.c, EXP_1 = 1884 / 2048; proc(5)). A trial whose schedule is
#: shorter makes less than 1 - 1/e (63 %) of the average read after it: the rest is the minute
#: before, so ``controller_load`` does not measure it.
LOAD_AVERAGE_TAU_S = 60.0


def _controller_load(spec, record, **_) -> tuple[float, str]:
    duration = _num(record.get("duration_s"))
    if duration is not None and duration < LOAD_AVERAGE_TAU_S:
        raise _Unmeasurable(f"the {duration:g}-s schedule is shorter than the 1-minute load average's "
                            f"{LOAD_AVERAGE_TAU_S:g}-s time constant: the average read after it is "
                            f"{math.exp(-duration / LOAD_AVERAGE_TAU_S):.0%} the minute before "
                            "(controller_cpu_busy measures the trial itself)")
    la, cores = record.get("controller_loadavg"), _num(record.get("controller_cores"))
    try:
        one = [float(la[k][0]) for k in ("before", "after")]
    except (TypeError, KeyError, IndexError, ValueError):
        raise _NotMeasured("run.json has no controller_loadavg before and after the trial") from None
    if not cores or cores < 1:
        raise _NotMeasured("run.json has no controller_cores")
    return max(one) / cores, f"1-min load average {one[0]:g} before, {one[1]:g} after, on {cores:g} cores"


def _controller_cpu_busy(spec, record, **_) -> tuple[float, str]:
    busy = _num(record.get("controller_cpu_busy"))
    if busy is None:
        raise _NotMeasured("run.json has no controller_cpu_busy")
    return busy, "the controller machine's /proc/stat before and after the trial"


def _measures(spec) -> list[tuple[str, Callable]]:
    """(check id, measurement) in report order: the same checks for every experiment, each
    where the experiment has its data (:func:`netrepro.model.data_kinds`): the CPU checks
    always; ``ping_received``, ``sampling_ping`` and ``queue_delay_excess`` with a ping
    item; ``flow_start_lag`` and ``flow_start_skew`` with an iperf3 or FTP item;
    ``sampling_qdisc_stats`` with a queue collector. In a trial without an item of the kind
    that check is not applicable (not judged)."""
    kinds = data_kinds(spec.model)
    ping, started = "ping" in kinds, bool(kinds & set(STARTED_KINDS))
    return ([("nodes_cpu_busy", _nodes_cpu_busy)]
            + ([("ping_received", _ping_received)] if ping else [])
            + ([("flow_start_lag", _flow_start_lag), ("flow_start_skew", _flow_start_skew),
                ("data_start_lag", _data_start_lag)] if started else [])
            + ([("sampling_ping", _sampling("ping"))] if ping else [])
            + ([("sampling_qdisc_stats", _sampling("qdisc_stats"))] if "qdisc_stats" in kinds else [])
            + ([("queue_delay_excess", _queue_delay_excess)] if ping else [])
            + ([("shaper_rate_off", _shaper_rate)] if "qdisc_stats" in kinds else [])
            + ([("pacing_rate_off", _pacing_rate)] if "paced" in health_data(spec.model) else [])
            + ([("timer_late", _timer_late)] if "qdisc_stats" in kinds else [])
            + [("controller_load", _controller_load), ("controller_cpu_busy", _controller_cpu_busy)])


def _round(x: float | None, unit: str) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, 1 if unit == "ms" else 4)


def trial_health(spec, record: dict, trial_dir: Path | str, time_scale: float) -> dict:
    """The health checks of one trial.

    Args:
        spec: the experiment (netrepro.spec.Spec) as run: at the run's rate scale
            (:meth:`netrepro.spec.Spec.at_rate_scale`), whose rates ``shaper_rate_off`` and
            ``queue_delay_excess`` read; thresholds from its ``health:`` section (each optional).
        record: the trial's record in run.json. Fields read: ``start_epoch_s`` (the common
            start, Unix s; required for the flow and sampling checks), ``duration_s`` (the
            schedule, s; default the longest trial's at ``time_scale``), ``phases`` (names
            of the schedule's times), ``base_rtt_ms`` (node -> ms;
            else base_rtt.txt), ``controller_loadavg`` ({before, after}: 1/5/15-min load
            averages), ``controller_cores`` and ``controller_cpu_busy`` (0..1).
        trial_dir: ``raw/<trial>/``, one folder per node (ping.txt, base_rtt.txt, flows.csv
            and flows-<k>.csv, qdisc.jsonl, meta-before.json, meta-after.json).
        time_scale: the run's TIME_SCALE (scales the traffic items' start times).
    Returns:
        ``{"passed": bool, "checks": [{"id", "value", "threshold", "unit", "passed",
        "detail"}, ...]}``, checks in the order of the module docstring. ``value``: float
        (fractions to 4 decimals, ms to 0.1) or null when not measured; ``threshold``: the
        spec's, or null when it sets none (then ``passed`` is null: measured, not judged);
        ``detail``: one line (per-node values, the worst phase, or why it is not measured).
        ``data_start_lag`` also has ``windows``: ``[{"phase", "start_s", "length_s",
        "data_lag_s"}]``, per phase an item opens (else per item), its scheduled start and
        length (s from the trial's start) and the latest data start of the items opening it
        behind that start (s): the effective phase starts that late. Top-level ``passed``
        is false when any judged check failed.
    Raises:
        nothing: a measurement that raises is a check that failed (or, without a
        threshold, was not measured), its ``detail`` naming the error.
    """
    try:
        return _trial_health(spec, record, Path(trial_dir), time_scale)
    except Exception as exc:  # noqa: BLE001 - a bug or odd data must never stop a run or an analysis
        return {"passed": False, "checks": [{
            "id": "health", "value": None, "threshold": None, "unit": "", "passed": False,
            "detail": " ".join(f"not measured: {type(exc).__name__}: {str(exc)[:200]}".split())}]}


#: The checks of a machine's CPU and timers, which a simulated trial (netrepro.sites.ns3.site;
#: run.json ``simulated``) does not have: its clock is the simulator's, not the machine's.
SIMULATION_NOT_APPLICABLE = frozenset({"nodes_cpu_busy", "timer_late", "controller_load", "controller_cpu_busy"})


def _trial_health(spec, record: dict, trial_dir: Path, time_scale: float) -> dict:
    limits = spec.model.health
    start = _num(record.get("start_epoch_s")) if isinstance(record, dict) else None
    record = record if isinstance(record, dict) else {}
    try:
        # the record's; else the longest trial's schedule at time_scale
        duration = _num(record.get("duration_s")) or spec.duration_s * check_time_scale(time_scale)
    except (TypeError, ValueError):
        duration = None
    checks = []
    for cid, measure in _measures(spec):
        key, unit, sense = CHECKS["sampling" if cid.startswith("sampling_") else cid]
        limit = _num(limits.get(key))
        value, detail, applies, extra = None, "", True, []
        try:
            if record.get("simulated") and cid in SIMULATION_NOT_APPLICABLE:
                raise _NotApplicable("a simulated trial: its results do not depend on the CPU or the timers of any machine")
            if start is None and cid.startswith(("ping_", "flow_", "data_", "sampling_", "queue_", "shaper_", "timer_")):
                raise _NotMeasured("run.json has no start_epoch_s for the trial")
            if duration is None and cid.startswith(("ping_", "sampling_", "data_", "shaper_", "timer_")):
                raise _NotMeasured("no schedule duration")
            value, detail, *extra = measure(spec=spec, record=record, trial_dir=trial_dir, start=start,
                                            duration=duration, time_scale=time_scale)
        except _NotApplicable as exc:
            detail, applies = f"not applicable: {exc}", False
        except _Unmeasurable as exc:
            detail, applies = f"not measured: {exc}", False
        except _NotMeasured as exc:
            detail = f"not measured: {exc}"
        except Exception as exc:  # noqa: BLE001 - odd data must never stop a run or an analysis
            detail = f"not measured: {type(exc).__name__}: {str(exc)[:200]}"
        value = _round(value, unit)
        if limit is None or not applies:
            ok = None
        elif value is None:
            ok = False
        else:
            ok = value <= limit if sense == "max" else value >= limit
        checks.append({"id": cid, "value": value, "threshold": limit, "unit": unit, "passed": ok,
                       "detail": " ".join(detail.split())} | ({"windows": extra[0]} if extra else {}))
    return {"passed": all(c["passed"] is not False for c in checks), "checks": checks}


def format_value(value: float | None, unit: str) -> str:
    """A check's value for people: ``48.0 %``, ``703 ms``, ``0.85 load per core``, ``not measured``."""
    if value is None:
        return "not measured"
    if unit == "fraction":
        return f"{value * 100:.1f} %"
    if unit == "ms":
        return f"{value:.0f} ms" if abs(value) >= 10 else f"{value:.1f} ms"
    return f"{value:.2f} {unit}"


def describe(check: dict) -> str:
    """One check in a line: ``flow_start_lag 703 ms (max 100 ms): FAILED``."""
    sense = CHECKS.get("sampling" if check["id"].startswith("sampling_") else check["id"], ("", "", ""))[2]
    text = f"{check['id']} {format_value(check['value'], check['unit'])}"
    if check.get("threshold") is not None:
        text += f" ({sense} {format_value(check['threshold'], check['unit'])})"
    return text + {True: "", False: ": FAILED", None: ""}[check.get("passed")]


def failure_line(f: dict) -> str:
    """One failed check of :func:`failures` in a line: ``<trial>: flow_start_lag 15700 ms (max
    100 ms)``, its detail in brackets when it was not measured; a failure that is no
    measurement (``unit`` None: a trial not run) as ``<trial>: not_run (<detail>)``."""
    if f.get("unit") is None:
        return f"{f['trial']}: {f['check']}" + (f" ({f['detail']})" if f.get("detail") else "")
    c = {"id": f["check"], "value": f["value"], "threshold": f.get("threshold"), "unit": f["unit"], "passed": None}
    return f"{f['trial']}: {describe(c)}" + (f" [{f['detail']}]" if f["value"] is None and f.get("detail") else "")


def failures(health_by_trial: dict[str, dict]) -> list[dict]:
    """Every failed check of every trial, in trial then check order:
    ``[{"trial", "check", "value", "threshold", "unit", "detail"}]``."""
    return [{"trial": tid, "check": c["id"], "value": c["value"], "threshold": c["threshold"],
             "unit": c["unit"], "detail": c["detail"]}
            for tid, h in health_by_trial.items() for c in h.get("checks", []) if c.get("passed") is False]


__all__ = ["CHECKS", "SHAPER_RATE_TOLERANCE", "PACING_RATE_TOLERANCE", "TIMER_LATE_QUANTILE", "shaper_rate_tolerance", "trial_health", "format_value", "describe", "failure_line", "failures"]
