"""Health of the substrate: does a trial's own data show that the emulation, not the AQM,
shaped its result?

Each trial measures the machine it ran on from its raw files (``raw/<trial>/<node>/``) and
its record in run.json, and judges every measurement against the thresholds of the
experiment file's ``health:`` section (netrepro/schemas/experiment.schema.json). A trial
that fails a check makes every claim that reads it *inconclusive* (:mod:`analysis.verdict`):
a result shaped by a saturated CPU or late flows says nothing about the paper.

The checks, in this order (``id``: value, unit; threshold key; sources):

- ``nodes_cpu_busy``: the largest share of CPU time not idle on any node's machine from the
  trial's release to its ``meta-after.json`` snapshot (``cpu_ticks``: the ``cpu`` line of
  /proc/stat, proc(5)); the release's reading is run.json's ``barrier.cpu_ticks`` (every
  node acknowledges the release), else, for runs recorded before it was, ``meta-before.json``,
  which also counts the arming of the collectors and flows; ``fraction``;
  ``nodes_cpu_busy_max_fraction``. On the local site every node shares one machine (the same
  /proc/stat); on a testbed each node is its own, and the busiest one counts.
- ``ping_received``: per pinging node, echo replies to the probes sent within the schedule
  ``[start - interval, start + duration]`` / the probes the schedule asks for (duration / interval,
  as roles/collectors/files/nr-ping.sh counts them); the smallest; ``fraction``;
  ``ping_received_min_fraction``. Probes dropped by the AQM count as missing here too.
- ``flow_start_lag``: for each time of the schedule at which flow groups start (the phases
  they open), the latest flow start behind the schedule, ``start_epoch_s - (trial start +
  group start_s)``; the largest; ``ms``; ``flow_start_lag_max_ms``.
- ``flow_start_skew``: for each such time, max - min of the flow starts of the groups
  (clients) starting then; the largest; ``ms``; ``flow_start_skew_max_ms``.
- ``sampling_<kind>`` for each collector kind of the spec (``sampling_ping``,
  ``sampling_qdisc_stats``): per node, samples recorded within the schedule / samples the
  schedule asks for (duration / interval); the smallest; ``fraction``;
  ``collector_sampling_min_fraction``. A ping sample is a probe sent (answered or reported
  ``no answer yet`` by ``ping -O``); a queue sample a line of qdisc.jsonl.
- ``queue_delay_excess``: per pinging node and phase, the share of its echo replies whose
  queueing delay (ping RTT - the node's base RTT, as :mod:`analysis.tidy` computes it) exceeds
  the time the bottleneck's buffer takes to drain, ``buffer_bytes * 8 / (rate_mbit * 1e6)`` s
  (the variant's rate), by more than ``queue_delay_excess_max_ms`` (the tolerance, default 0):
  such a delay is physically impossible in a faithful emulation; the largest share;
  ``fraction``; ``queue_delay_excess_max_fraction``. A share, not the largest delay: the
  claims read each phase's median, which a few delayed samples cannot move (one 250 ms stall
  of the micro-VM delays ~3 of a full-length phase's 500 samples per node), while a substrate
  that delays more than that share is what this check is for. The detail names the worst
  node and phase and the largest queueing delay seen.
- ``controller_load``: the larger 1-minute load average of the controller machine read
  before and after the trial (run.json ``controller_loadavg``), per core
  (``controller_cores``); ``load per core``; ``controller_load_per_core_max``.
- ``controller_cpu_busy``: the controller machine's share of CPU time not idle during the
  trial (run.json ``controller_cpu_busy``, from its own /proc/stat); ``fraction``;
  ``controller_cpu_busy_max_fraction``.

An experiment of schema_version 2 (:mod:`netrepro.model`) has no fixed bottleneck, flow
groups or base RTT: it gets ``nodes_cpu_busy``; ``flow_start_lag`` of its iperf3 clients (each
client's ``iperf3-<id>.json.t0`` against trial start + its ``start_s``); ``sampling_ping`` per
ping item (probes sent in its schedule shifted back half an interval / the probes it asks
for) and ``sampling_qdisc_stats`` per queue collector; and the two controller checks.

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

import pandas as pd

from analysis.raw import base_rtt_ms, parse_ping, parse_qdisc_jsonl
from netrepro.runfolder import cpu_busy, flows_files, host_cpu_ticks

#: check id (or id prefix for ``sampling_<kind>``) -> (threshold key in ``health:``, unit,
#: "max" when the value must not exceed the threshold, "min" when it must reach it).
CHECKS: dict[str, tuple[str, str, str]] = {
    "nodes_cpu_busy": ("nodes_cpu_busy_max_fraction", "fraction", "max"),
    "ping_received": ("ping_received_min_fraction", "fraction", "min"),
    "flow_start_lag": ("flow_start_lag_max_ms", "ms", "max"),
    "flow_start_skew": ("flow_start_skew_max_ms", "ms", "max"),
    "sampling": ("collector_sampling_min_fraction", "fraction", "min"),
    "queue_delay_excess": ("queue_delay_excess_max_fraction", "fraction", "max"),
    "controller_load": ("controller_load_per_core_max", "load per core", "max"),
    "controller_cpu_busy": ("controller_cpu_busy_max_fraction", "fraction", "max"),
}

#: ``ping -O`` line of a probe without a reply when the next one is sent (iputils ping(8)).
_NO_ANSWER = re.compile(r"^\s*\[(?P<t>\d+(?:\.\d*)?)\]\s*no answer yet for icmp_seq=(?P<seq>\d+)")


class _NotMeasured(Exception):
    """A measurement whose inputs are missing; ``str()`` says which."""


class _NotApplicable(Exception):
    """A check with nothing to measure in this trial (no item of its kind): not judged."""


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
def _nodes_cpu_busy(spec, record: dict, trial_dir: Path, **_) -> tuple[float, str]:
    barrier = record.get("barrier") if isinstance(record.get("barrier"), dict) else {}
    released = barrier.get("cpu_ticks") if isinstance(barrier.get("cpu_ticks"), dict) else {}
    busy, missing, from_release = {}, [], 0
    for node in spec.nodes:
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
        raise _NotMeasured("no node has two readable /proc/stat snapshots (cpu_ticks in meta-before.json "
                           "and meta-after.json)")
    top = max(busy, key=busy.get)  # the first in node order among equals
    since = ("the release" if from_release >= len(spec.nodes) else "meta-before.json" if not from_release
             else f"the release ({from_release} nodes) or meta-before.json")
    detail = f"busiest {top} {_pct(busy[top])} of {len(busy)} nodes' machines, from {since} to meta-after.json"
    if missing:
        detail += f"; no snapshots from {', '.join(missing)}"
    return busy[top], detail


def _ping_nodes(spec) -> dict[str, float]:
    """Pinging node -> its collector's interval (s), in node order."""
    out = {}
    for c in spec["collectors"]:
        if c["kind"] == "ping":
            for node in spec.select(c["nodes"]):
                out.setdefault(node, float(c["interval_s"]))
    return out


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


def _ping_counts(spec, start: float, duration: float, trial_dir: Path) -> dict[str, tuple[int, int, int]]:
    """Pinging node -> (probes sent within the schedule, of them answered, probes expected)."""
    out = {}
    for node, interval in _ping_nodes(spec).items():
        p = _probes(_text(trial_dir / node / "ping.txt"), interval)
        # the first probe may go up to one interval early (the node's clock against the start's)
        inside = p[(p["sent_epoch_s"] >= start - interval) & (p["sent_epoch_s"] <= start + duration)]
        out[node] = (len(inside), int(inside["answered"].sum()), max(1, round(duration / interval)))
    return out


def _ping_received(spec, record: dict, trial_dir: Path, start: float, duration: float, **_) -> tuple[float, str]:
    counts = _ping_counts(spec, start, duration, trial_dir)
    if not counts:
        raise _NotMeasured("no ping collector in the experiment")
    share = {n: got / want for n, (_, got, want) in counts.items()}
    low = min(share, key=share.get)
    return share[low], f"lowest {low} ({counts[low][1]} of {counts[low][2]}); " + ", ".join(
        f"{n} {_pct(v)}" for n, v in share.items())


def _flow_starts(spec, record: dict, trial_dir: Path, start: float, time_scale: float) -> dict[float, dict]:
    """Scheduled start (s from the trial's start) -> {"label", "lags_s": [actual - scheduled
    of every flow of the groups starting then], "missing": [files without a start]}."""
    from analysis.raw import parse_flows

    phases = record.get("phases") if isinstance(record.get("phases"), list) else spec.scaled(time_scale)["phases"]
    names = {round(p["start_s"], 3): p["name"] for p in phases if isinstance(p, dict) and _num(p.get("start_s")) is not None}
    out: dict[float, dict] = {}
    for fg, path in zip(spec.scaled(time_scale)["flows"], flows_files(spec, trial_dir)):
        at = round(fg["start_s"], 3)
        slot = out.setdefault(at, {"label": names.get(at, f"t={at:g} s"), "lags_s": [], "missing": []})
        try:
            flows = parse_flows(_text(path))
        except _NotMeasured as exc:
            slot["missing"].append(str(exc))
            continue
        starts = flows["start_epoch_s"].dropna()
        if starts.empty:
            slot["missing"].append(f"{fg['client']}/{path.name} has no flow start")
        slot["lags_s"] += [float(s) - (start + fg["start_s"]) for s in starts]
    return dict(sorted(out.items()))


def _flow_start(spec, record, trial_dir, start, time_scale, what: str) -> tuple[float, str]:
    slots = _flow_starts(spec, record, trial_dir, start, time_scale)
    missing = [m for s in slots.values() for m in s["missing"]]
    if missing:
        raise _NotMeasured("; ".join(missing))
    per = {}
    for s in slots.values():
        lags = s["lags_s"]
        per[s["label"]] = 1000 * (max(lags) if what == "lag" else max(lags) - min(lags))
    worst = max(per, key=lambda k: per[k])
    return per[worst], f"worst {worst}; " + ", ".join(f"{k} {round(v):+d}" if what == "lag" else f"{k} {round(v):d}"
                                                      for k, v in per.items()) + " ms"


def _flow_start_lag(spec, record, trial_dir, start, time_scale, **_):
    return _flow_start(spec, record, trial_dir, start, time_scale, "lag")


def _flow_start_skew(spec, record, trial_dir, start, time_scale, **_):
    return _flow_start(spec, record, trial_dir, start, time_scale, "skew")


def _sampling(kind: str) -> Callable:
    def measure(spec, record, trial_dir, start, duration, **_) -> tuple[float, str]:
        share, counts = {}, {}
        if kind == "ping":
            for node, (sent, _, want) in _ping_counts(spec, start, duration, trial_dir).items():
                share[node], counts[node] = sent / want, (sent, want)
        else:
            handle = spec["bottleneck"].get("aqm_handle")
            for c in spec["collectors"]:
                if c["kind"] != kind:
                    continue
                for node in spec.select(c["nodes"]):
                    q = parse_qdisc_jsonl(_text(trial_dir / node / "qdisc.jsonl"), handle=handle)
                    t = q["t_epoch_s"]
                    got = int(((t >= start) & (t < start + duration)).sum())
                    want = max(1, round(duration / float(c["interval_s"])))
                    share[node], counts[node] = got / want, (got, want)
        if not share:
            raise _NotMeasured(f"no {kind} collector in the experiment")
        low = min(share, key=share.get)
        return share[low], f"lowest {low} ({counts[low][0]} of {counts[low][1]} samples in the schedule); " + \
            ", ".join(f"{n} {_pct(v)}" for n, v in share.items())
    return measure


def _queue_delay_excess(spec, record, trial_dir, start, duration, time_scale, **_) -> tuple[float, str]:
    from analysis.run import variant_rate_mbit

    rate = variant_rate_mbit(spec, record.get("variant"))
    drain_ms = spec["bottleneck"]["buffer_bytes"] * 8 / (rate * 1e6) * 1000
    tolerance_ms = _num((spec.get("health") or {}).get("queue_delay_excess_max_ms")) or 0.0
    statistic = spec.get("base_rtt", {}).get("statistic", "median")
    recorded = record.get("base_rtt_ms") if isinstance(record.get("base_rtt_ms"), dict) else {}
    phases = record.get("phases") if isinstance(record.get("phases"), list) else spec.scaled(time_scale)["phases"]
    largest: tuple[float, str, float] | None = None  # (queueing delay ms, node, t_s)
    worst: tuple[float, str, str, int, int] | None = None  # (share, node, phase, over, samples)
    for node in _ping_nodes(spec):
        base = _num(recorded.get(node))
        if base is None:
            base = base_rtt_ms(parse_ping(_text(trial_dir / node / "base_rtt.txt"))["rtt_ms"], statistic)
        if not math.isfinite(base):
            raise _NotMeasured(f"no base RTT for {node}")
        p = parse_ping(_text(trial_dir / node / "ping.txt"))
        p = p[pd.notna(p["t_epoch_s"]) & pd.notna(p["rtt_ms"])]
        t = p["t_epoch_s"].to_numpy() - start
        q = p["rtt_ms"].to_numpy() - base
        if len(q):
            i = int(q.argmax())
            if largest is None or q[i] > largest[0]:
                largest = (float(q[i]), node, float(t[i]))
        for ph in phases:
            inside = (t >= ph["start_s"]) & (t < ph["end_s"])
            n = int(inside.sum())
            if n:
                over = int((q[inside] > drain_ms + tolerance_ms).sum())
                if worst is None or over / n > worst[0]:
                    worst = (over / n, node, ph["name"], over, n)
    if worst is None or largest is None:
        raise _NotMeasured("no echo reply within the phases" if _ping_nodes(spec) else "no ping collector in the experiment")
    share, node, phase, over, n = worst
    q, qnode, t = largest
    return share, (f"worst {node} {phase}: {over} of {n} samples more than {tolerance_ms:g} ms above the buffer's "
                   f"drain time ({spec['bottleneck']['buffer_bytes']} B at {rate:g} Mbit/s: {drain_ms:.1f} ms); "
                   f"largest queueing delay {q:.1f} ms ({qnode} at {t:.1f} s)")


def _model_trial(spec, record: dict, trial_dir: Path) -> dict:
    """The model's trial of a trial record: its ``trial`` (a repeated run's instance
    ``<trial>.r<k>``, netrepro.schedule), else the raw folder's name (``raw/<trial id>``)."""
    tid = record.get("trial") or trial_dir.name
    for t in spec.model.trials:
        if t["id"] == tid:
            return t
    raise _NotMeasured(f"no trial {tid!r} in the experiment")


def _item_sampling(kind: str) -> Callable:
    """``sampling_<kind>`` of an experiment of schema_version 2: per queue collector (its
    node's qdisc.jsonl lines) or ping item (its probes sent, answered or not), the samples
    within its schedule / the samples the schedule asks for; the smallest."""
    def measure(spec, record, trial_dir, start, duration, time_scale, **_) -> tuple[float, str]:
        from analysis.raw import parse_qdisc_stack
        share, counts = {}, {}
        if kind == "ping":
            for it in _model_trial(spec, record, trial_dir)["traffic"]:
                if it["kind"] != "ping":
                    continue
                lo = start + it["start_s"] * time_scale
                length = it["duration_s"] * time_scale
                p = _probes(_text(trial_dir / it["from"] / "ping.txt"), it["interval_s"])
                # a window of the schedule's length shifted back half an interval: a probe due
                # at the start counts if the node's clock is a little early, one after the end not
                half = it["interval_s"] / 2
                got = int(((p["sent_epoch_s"] >= lo - half) & (p["sent_epoch_s"] < lo + length - half)).sum())
                want = max(1, round(length / it["interval_s"]))
                share[it["id"]], counts[it["id"]] = min(1.0, got / want), (got, want)
        else:
            for c in spec.model.data["collectors"]:
                node = c["at"].split(":")[0]
                t = parse_qdisc_stack(_text(trial_dir / node / "qdisc.jsonl"))["t_epoch_s"]
                got = int(((t >= start) & (t < start + duration)).sum())
                want = max(1, round(duration / float(c["interval_s"])))
                share[c["at"]], counts[c["at"]] = got / want, (got, want)
        if not share:
            raise _NotApplicable(f"no {kind} in the trial")
        low = min(share, key=share.get)
        return share[low], f"lowest {low} ({counts[low][0]} of {counts[low][1]} samples in the schedule); " + \
            ", ".join(f"{n} {_pct(v)}" for n, v in share.items())
    return measure


def _iperf3_start_lag(spec, record, trial_dir, start, time_scale, **_) -> tuple[float, str]:
    """``flow_start_lag`` of an experiment of schema_version 2: each iperf3 client's start
    (``iperf3-<id>.json.t0``, the epoch time nr-iperf3.sh wrote as it started the client)
    behind its schedule (trial start + start_s); the largest, ms."""
    lags = {}
    for it in _model_trial(spec, record, trial_dir)["traffic"]:
        if it["kind"] != "iperf3":
            continue
        f = trial_dir / it["from"] / f"iperf3-{it['id']}.json.t0"
        try:
            t0 = float(_text(f).split()[0])
        except (IndexError, ValueError):
            raise _NotMeasured(f"{it['from']}/{f.name} has no start time") from None
        lags[it["id"]] = 1000 * (t0 - (start + it["start_s"] * time_scale))
    if not lags:
        raise _NotApplicable("no iperf3 item in the trial")
    worst = max(lags, key=lags.get)
    return lags[worst], f"worst {worst}; " + ", ".join(f"{k} {round(v):+d}" for k, v in lags.items()) + " ms"


def _controller_load(spec, record, **_) -> tuple[float, str]:
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
    """(check id, measurement) in report order; one sampling check per collector kind.

    An experiment of schema_version 2 gets the CPU checks, and those of what it has:
    ``flow_start_lag`` of its iperf3 clients, ``sampling_ping`` of its ping items,
    ``sampling_qdisc_stats`` of its queue collectors (:func:`_item_sampling`); in a trial
    without such items (one with its own traffic) that check is not applicable (not judged).
    The ping and queue delay checks of version 1 read its fixed bottleneck and base RTT, which
    version 2 does not have."""
    if spec.model.data["schema_version"] == 2:
        # which threshold needs which data: netrepro.model.HEALTH_NEEDS, checked by validate
        from netrepro.model import data_kinds
        kinds = data_kinds(spec.model)
        return ([("nodes_cpu_busy", _nodes_cpu_busy)]
                + ([("flow_start_lag", _iperf3_start_lag)] if "iperf3" in kinds else [])
                + ([("sampling_ping", _item_sampling("ping"))] if "ping" in kinds else [])
                + ([("sampling_qdisc_stats", _item_sampling("qdisc_stats"))] if "qdisc_stats" in kinds else [])
                + [("controller_load", _controller_load), ("controller_cpu_busy", _controller_cpu_busy)])
    kinds = list(dict.fromkeys(c["kind"] for c in spec["collectors"]))
    return ([("nodes_cpu_busy", _nodes_cpu_busy), ("ping_received", _ping_received),
             ("flow_start_lag", _flow_start_lag), ("flow_start_skew", _flow_start_skew)]
            + [(f"sampling_{k}", _sampling(k)) for k in kinds]
            + [("queue_delay_excess", _queue_delay_excess), ("controller_load", _controller_load),
               ("controller_cpu_busy", _controller_cpu_busy)])


def _round(x: float | None, unit: str) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, 1 if unit == "ms" else 4)


def trial_health(spec, record: dict, trial_dir: Path | str, time_scale: float) -> dict:
    """The health checks of one trial.

    Args:
        spec: the experiment (netrepro.spec.Spec) as run; thresholds from its ``health:``
            section (each optional).
        record: the trial's record in run.json. Fields read: ``start_epoch_s`` (the common
            start, Unix s; required for the flow and sampling checks), ``duration_s`` (the
            schedule, s; default the spec's at ``time_scale``), ``variant`` (its bottleneck
            rate), ``phases`` (names of the schedule's times), ``base_rtt_ms`` (node -> ms;
            else base_rtt.txt), ``controller_loadavg`` ({before, after}: 1/5/15-min load
            averages), ``controller_cores`` and ``controller_cpu_busy`` (0..1).
        trial_dir: ``raw/<trial>/``, one folder per node (ping.txt, base_rtt.txt, flows.csv
            and flows-<k>.csv, qdisc.jsonl, meta-before.json, meta-after.json).
        time_scale: the run's TIME_SCALE (scales the flow groups' start times).
    Returns:
        ``{"passed": bool, "checks": [{"id", "value", "threshold", "unit", "passed",
        "detail"}, ...]}``, checks in the order of the module docstring. ``value``: float
        (fractions to 4 decimals, ms to 0.1) or null when not measured; ``threshold``: the
        spec's, or null when it sets none (then ``passed`` is null: measured, not judged);
        ``detail``: one line (per-node values, the worst phase, or why it is not measured).
        Top-level ``passed`` is false when any judged check failed.
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


#: The checks of a machine's CPU, which a simulated trial (netrepro.sites.ns3; run.json
#: ``simulated``) does not have: its clock is the simulator's, not the machine's.
SIMULATION_NOT_APPLICABLE = frozenset({"nodes_cpu_busy", "controller_load", "controller_cpu_busy"})


def _trial_health(spec, record: dict, trial_dir: Path, time_scale: float) -> dict:
    limits = spec.get("health") or {}
    start = _num(record.get("start_epoch_s")) if isinstance(record, dict) else None
    record = record if isinstance(record, dict) else {}
    try:
        duration = _num(record.get("duration_s")) or spec.scaled(time_scale)["duration_s"]
    except (TypeError, ValueError):
        duration = None
    checks = []
    for cid, measure in _measures(spec):
        key, unit, sense = CHECKS["sampling" if cid.startswith("sampling_") else cid]
        limit = _num(limits.get(key))
        value, detail, applies = None, "", True
        try:
            if record.get("simulated") and cid in SIMULATION_NOT_APPLICABLE:
                raise _NotApplicable("a simulated trial: its results do not depend on the CPU of any machine")
            if start is None and cid.startswith(("ping_", "flow_", "sampling_", "queue_")):
                raise _NotMeasured("run.json has no start_epoch_s for the trial")
            if duration is None and cid.startswith(("ping_", "sampling_")):
                raise _NotMeasured("no schedule duration")
            value, detail = measure(spec=spec, record=record, trial_dir=trial_dir, start=start,
                                    duration=duration, time_scale=time_scale)
        except _NotApplicable as exc:
            detail, applies = f"not applicable: {exc}", False
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
                       "detail": " ".join(detail.split())})
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


def failures(health_by_trial: dict[str, dict]) -> list[dict]:
    """Every failed check of every trial, in trial then check order:
    ``[{"trial", "check", "value", "threshold", "unit", "detail"}]``."""
    return [{"trial": tid, "check": c["id"], "value": c["value"], "threshold": c["threshold"],
             "unit": c["unit"], "detail": c["detail"]}
            for tid, h in health_by_trial.items() for c in h.get("checks", []) if c.get("passed") is False]


__all__ = ["CHECKS", "trial_health", "host_cpu_ticks", "format_value", "describe", "failures"]
