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
- ``pacing_rate_off``: per iperf3 item whose pacing limits its rate
  (:func:`netrepro.model.pacing_limited`: every item of the trial paced, together below the
  lowest shaped rate of their path), the share of its streams' one-second intervals (not
  omitted, each stream's first left out: slow start fills it) whose rate (iperf3's
  ``bits_per_second``) is off the stream's pacing rate by more than
  ``pacing_rate_tolerance_fraction`` (default :data:`PACING_RATE_TOLERANCE`); the largest
  share; ``fraction``; ``pacing_rate_off_max_fraction``. The substrate's timers did not pace
  the flow (late timers send less, bursts more). Not applicable in a trial without such items.
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
  for a schedule shorter than the average's time constant
  (:data:`analysis.substrate.machines.LOAD_AVERAGE_TAU_S`),
  whose reading is mostly the minute before it (back-to-back quick runs were judged by the
  previous run's load: docs/runs/quick-pacing-lab-2026-11-26).
- ``controller_cpu_busy``: the controller machine's share of CPU time not idle during the
  trial (run.json ``controller_cpu_busy``, from its own /proc/stat); ``fraction``;
  ``controller_cpu_busy_max_fraction``.

Each check is declared once, in this order, in netrepro/model/health.py
(:data:`netrepro.model.HEALTH_CHECKS`: its id, threshold key, unit, ``max`` or ``min``, the
data the file needs for its threshold to be accepted and for it to be measured at all, and
whether it applies to a simulated trial); its measurement is in analysis/substrate/ (machines,
pings, starts, queues), registered here against its id (:data:`MEASUREMENTS`). Every
experiment gets these checks from its model, each where its data exist (:func:`measures`);
:data:`netrepro.model.HEALTH_NEEDS` says which data each threshold needs. A check the
experiment gives nothing to measure says ``not measured`` and is not judged: it never passes.

A check whose threshold the experiment file leaves out is measured but not judged
(``passed: null``). A judged check that cannot be measured (a file missing or unreadable, a
field not recorded) or whose computation raises fails, with the reason in ``detail``:
:func:`trial_health` never raises.
"""

from __future__ import annotations

import inspect
import math
from pathlib import Path
from typing import Callable

from analysis.substrate import machines, pings, queues, starts
from analysis.substrate.inputs import NotApplicable, NotMeasured, Unmeasurable, number
from analysis.substrate.pings import queue_delay_ms
from analysis.substrate.queues import (PACING_RATE_TOLERANCE, SHAPER_RATE_TOLERANCE, TIMER_LATE_QUANTILE,
                                       shaper_rate_tolerance)
from netrepro.model import HealthCheck, health_check, measured_checks
from netrepro.experiment.spec import check_time_scale

#: Check id of :data:`netrepro.model.HEALTH_CHECKS` -> its measurement: called with the
#: keywords ``spec``, ``record``, ``trial_dir``, ``start`` (the trial's start, Unix s),
#: ``duration`` (its schedule, s) and ``time_scale``; returns ``(value, detail)`` (and
#: ``data_start_lag`` its effective phase windows), or raises NotMeasured, NotApplicable or
#: Unmeasurable (analysis.substrate.inputs) saying why it measured nothing.
MEASUREMENTS: dict[str, Callable] = {
    "nodes_cpu_busy": machines.nodes_cpu_busy,
    "ping_received": pings.ping_received,
    "flow_start_lag": starts.flow_start_lag,
    "flow_start_skew": starts.flow_start_skew,
    "data_start_lag": starts.data_start_lag,
    "sampling_ping": pings.sampling_ping,
    "sampling_qdisc_stats": queues.sampling_qdisc_stats,
    "queue_delay_excess": pings.queue_delay_excess,
    "shaper_rate_off": queues.shaper_rate_off,
    "pacing_rate_off": queues.pacing_rate_off,
    "timer_late": queues.timer_late,
    "controller_load": machines.controller_load,
    "controller_cpu_busy": machines.controller_cpu_busy,
}



def _reading(keyword: str) -> frozenset[str]:
    """The checks of :data:`MEASUREMENTS` whose measurement takes ``keyword`` as a parameter of
    its own (not only through ``**_``)."""
    return frozenset(cid for cid, measure in MEASUREMENTS.items() if keyword in inspect.signature(measure).parameters)


#: The checks whose measurement reads the trial's start (its parameter ``start``: run.json
#: ``start_epoch_s``), and those that read its schedule's duration (``duration``): without it
#: they are not measured. Read from each measurement's signature, so that a new measurement
#: says what it needs where it is written.
NEEDS_START = _reading("start")
NEEDS_DURATION = _reading("duration")


def measures(spec) -> list[tuple[HealthCheck, Callable]]:
    """(check, measurement) in report order: the same checks for every experiment, each
    where the experiment has its data (:func:`netrepro.model.measured_checks`, by the
    check's ``measured_with``): the CPU checks always; ``ping_received``, ``sampling_ping``
    and ``queue_delay_excess`` with a ping item; ``flow_start_lag``, ``flow_start_skew`` and
    ``data_start_lag`` with an iperf3 or FTP item; ``sampling_qdisc_stats``,
    ``shaper_rate_off`` and ``timer_late`` with a queue collector; ``pacing_rate_off`` with a
    trial whose pacing limits its iperf3 items. In a trial without an item of the kind that
    check is not applicable (not judged)."""
    return [(c, MEASUREMENTS[c.id]) for c in measured_checks(spec.model)]


def _round(x: float | None, unit: str) -> float | None:
    return None if x is None or not math.isfinite(x) else round(x, 1 if unit == "ms" else 4)


def trial_health(spec, record: dict, trial_dir: Path | str, time_scale: float) -> dict:
    """The health checks of one trial.

    Args:
        spec: the experiment (netrepro.experiment.spec.Spec) as run: at the run's rate scale
            (:meth:`netrepro.experiment.spec.Spec.at_rate_scale`), whose rates ``shaper_rate_off`` and
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


def _trial_health(spec, record: dict, trial_dir: Path, time_scale: float) -> dict:
    limits = spec.model.health
    start = number(record.get("start_epoch_s")) if isinstance(record, dict) else None
    record = record if isinstance(record, dict) else {}
    try:
        # the record's; else the longest trial's schedule at time_scale
        duration = number(record.get("duration_s")) or spec.duration_s * check_time_scale(time_scale)
    except (TypeError, ValueError):
        duration = None
    checks = []
    for check, measure in measures(spec):
        cid, unit = check.id, check.unit
        limit = number(limits.get(check.threshold))
        value, detail, applies, extra = None, "", True, []
        try:
            if record.get("simulated") and not check.in_simulation:
                raise NotApplicable("a simulated trial: its results do not depend on the CPU or the timers of any machine")
            if start is None and cid in NEEDS_START:
                raise NotMeasured("run.json has no start_epoch_s for the trial")
            if duration is None and cid in NEEDS_DURATION:
                raise NotMeasured("no schedule duration")
            value, detail, *extra = measure(spec=spec, record=record, trial_dir=trial_dir, start=start,
                                            duration=duration, time_scale=time_scale)
        except NotApplicable as exc:
            detail, applies = f"not applicable: {exc}", False
        except Unmeasurable as exc:
            detail, applies = f"not measured: {exc}", False
        except NotMeasured as exc:
            detail = f"not measured: {exc}"
        except Exception as exc:  # noqa: BLE001 - odd data must never stop a run or an analysis
            detail = f"not measured: {type(exc).__name__}: {str(exc)[:200]}"
        value = _round(value, unit)
        if limit is None or not applies:
            ok = None
        elif value is None:
            ok = False
        else:
            ok = value <= limit if check.sense == "max" else value >= limit
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
    declared = health_check(check["id"])
    sense = declared.sense if declared else ""
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


__all__ = ["MEASUREMENTS", "NEEDS_START", "NEEDS_DURATION", "SHAPER_RATE_TOLERANCE", "PACING_RATE_TOLERANCE",
           "TIMER_LATE_QUANTILE", "measures", "queue_delay_ms", "shaper_rate_tolerance", "trial_health", "format_value",
           "describe", "failure_line", "failures"]
