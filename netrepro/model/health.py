"""The substrate's health checks, declared once (:data:`HEALTH_CHECKS`): what each judges,
by which threshold of the experiment file's ``health:``, what the file needs for it to be
judged (:data:`HEALTH_NEEDS`) and to be measured at all, and what the file has
(:func:`health_data`). analysis/health.py judges each check as declared here (its module
docstring describes how each is measured; analysis/substrate/ measures it).
"""

from __future__ import annotations

from dataclasses import dataclass

from netrepro.core import tc
from netrepro.model.experiment import Model, fail
from netrepro.model.traffic import STARTED_KINDS, pacing_limited, ping_buffers, simultaneous_starts


@dataclass(frozen=True)
class HealthCheck:
    """One health check of a trial's substrate.

    Fields: ``id``, the check as reports and run.json name it; ``threshold``, its key in the
    file's ``health:`` (two checks may share one: ``sampling_ping`` and
    ``sampling_qdisc_stats``); ``unit`` of its value and threshold (``fraction``, ``ms``,
    ``load per core``); ``sense``, ``"max"`` when the value must not exceed the threshold,
    ``"min"`` when it must reach it; ``needs``, the data of :data:`HEALTH_DATA` the file must
    all have for its threshold to be accepted (validate; empty: the machines, always
    measured); ``measured_with``, the data of :data:`HEALTH_DATA` a run must all have for
    the check to be in its trials' health at all (:func:`measured_checks`; empty: every
    run's); ``tuning``, the thresholds of ``health:`` that only tune it (a tolerance), which
    need what it needs; ``in_simulation``, false for a check of a machine's CPU or timers,
    which a simulated trial (run.json ``simulated``) does not have: its clock is the
    simulator's; ``description``, one line.
    """

    id: str
    threshold: str
    unit: str
    sense: str
    needs: tuple[str, ...]
    measured_with: tuple[str, ...]
    description: str
    tuning: tuple[str, ...] = ()
    in_simulation: bool = True


#: Every health check, in the order a trial's health reports them (analysis/health.py).
HEALTH_CHECKS: tuple[HealthCheck, ...] = (
    HealthCheck("nodes_cpu_busy", "nodes_cpu_busy_max_fraction", "fraction", "max", (), (),
                "the largest share of CPU time not idle on any node's machine over the trial's schedule",
                in_simulation=False),
    HealthCheck("ping_received", "ping_received_min_fraction", "fraction", "min", ("ping",), ("ping",),
                "per ping item, echo replies to the probes its schedule asks for; the smallest share"),
    HealthCheck("flow_start_lag", "flow_start_lag_max_ms", "ms", "max", ("started",), ("started",),
                "per start time of iperf3 or FTP items, the latest recorded start behind the schedule; the largest"),
    HealthCheck("flow_start_skew", "flow_start_skew_max_ms", "ms", "max", ("started_together",), ("started",),
                "per start time of two or more iperf3 or FTP items, the spread of their starts; the largest"),
    HealthCheck("data_start_lag", "data_start_lag_max_fraction", "fraction", "max", ("started",), ("started",),
                "per iperf3 or FTP item, how late its data started, as a share of the phase it opens; the largest"),
    HealthCheck("sampling_ping", "collector_sampling_min_fraction", "fraction", "min", ("sampled",), ("ping",),
                "per ping item, the probes sent within its schedule / the probes it asks for; the smallest"),
    HealthCheck("sampling_qdisc_stats", "collector_sampling_min_fraction", "fraction", "min", ("sampled",),
                ("queue_sampled",),
                "per queue collector, the samples within the schedule / the samples it asks for; the smallest"),
    HealthCheck("queue_delay_excess", "queue_delay_excess_max_fraction", "fraction", "max", ("base_rtt", "ping_buffer"),
                ("ping",), "per ping item and phase, the share of replies queued longer than its path's buffers "
                "take to drain; the largest", tuning=("queue_delay_excess_max_ms",)),
    HealthCheck("shaper_rate_off", "shaper_rate_off_max_fraction", "fraction", "max", ("shaped_sample",),
                ("queue_sampled",), "per sampled port with a shaper, the share of its busy windows off the shaped "
                "rate (a 95 % lower bound); the largest", tuning=("shaper_rate_tolerance_fraction",)),
    HealthCheck("pacing_rate_off", "pacing_rate_off_max_fraction", "fraction", "max", ("paced",), ("paced",),
                "per paced iperf3 item, the share of its intervals off its pacing rate; the largest",
                tuning=("pacing_rate_tolerance_fraction",)),
    HealthCheck("timer_late", "timer_late_max_ms", "ms", "max", ("queue_sampled",), ("queue_sampled",),
                "per queue collector, how late its samples woke behind their deadlines (99th percentile); the largest",
                in_simulation=False),
    HealthCheck("controller_load", "controller_load_per_core_max", "load per core", "max", (), (),
                "the controller machine's larger 1-minute load average before and after the trial, per core",
                in_simulation=False),
    HealthCheck("controller_cpu_busy", "controller_cpu_busy_max_fraction", "fraction", "max", (), (),
                "the controller machine's share of CPU time not idle during the trial", in_simulation=False),
)

_BY_ID = {c.id: c for c in HEALTH_CHECKS}


def health_check(check_id: str) -> HealthCheck | None:
    """The check of :data:`HEALTH_CHECKS` named ``check_id``, or None for another id (a
    trial's ``health`` or ``not_run`` failure)."""
    return _BY_ID.get(check_id)


#: What each threshold of ``health:`` needs in the file (from :data:`HEALTH_CHECKS`: a check's
#: ``needs``, for its threshold and the thresholds tuning it): the check judged with it can be
#: computed only when the file has all of these (:func:`health_data`). An empty tuple: the
#: machines, always measured. validate refuses a threshold whose check can never be computed
#: for the file.
HEALTH_NEEDS: dict[str, tuple[str, ...]] = {key: c.needs for c in HEALTH_CHECKS for key in (*c.tuning, c.threshold)}


#: The data names of :data:`HEALTH_CHECKS`' ``needs`` and ``measured_with`` (and so of
#: :data:`HEALTH_NEEDS`), as validate's messages say them.
HEALTH_DATA: dict[str, str] = {
    "ping": "a ping item",
    "started": "an iperf3 or FTP item",
    "started_together": "two iperf3 or FTP items of one trial starting at the same time",
    "sampled": "a ping item or a qdisc_stats collector",
    "base_rtt": "base_rtt (the unloaded RTT a queueing delay is measured from)",
    "ping_buffer": f"a ping item whose path crosses a port with a shaper ({', '.join(tc.SHAPERS)} rate_mbit) and "
                   "a limit (limit_bytes or limit_packets on the stack's leaf)",
    "queue_sampled": "a qdisc_stats collector",
    "shaped_sample": f"a qdisc_stats collector at a port whose stack has a shaper ({', '.join(tc.SHAPERS)} rate_mbit)",
    "paced": f"a trial whose iperf3 items are all paced (fq_rate_mbit, or a {tc.PACING_KIND} qdisc with maxrate on "
              "the sender's port) below the shaped rate of their path",
}


def health_data(m: Model) -> set[str]:
    """Which data of :data:`HEALTH_DATA` a run of ``m`` has (in at least one trial)."""
    kinds = data_kinds(m)
    out = {k for k in ("ping",) if k in kinds}
    if kinds & set(STARTED_KINDS):
        out.add("started")
    if any(simultaneous_starts(t) for t in m.trials):
        out.add("started_together")
    if kinds & {"ping", "qdisc_stats"}:
        out.add("sampled")
    if "qdisc_stats" in kinds:
        out.add("queue_sampled")
    if m.data["base_rtt"]:
        out.add("base_rtt")
    sampled = {c.at for c in m.collectors if c.kind == "qdisc_stats"}
    if any(tc.shaping_rate_mbit(t.stack(port)) for t in m.trials for port in sampled):
        out.add("shaped_sample")
    if any(pacing_limited(m, t) for t in m.trials):
        out.add("paced")
    for t in m.trials:
        for it in t.traffic:
            if it.kind == "ping":
                try:
                    if ping_buffers(m, t, it):
                        out.add("ping_buffer")
                except ValueError:
                    pass
    return out


def measured_checks(m: Model) -> tuple[HealthCheck, ...]:
    """The checks of :data:`HEALTH_CHECKS` a run of ``m`` measures, in report order: those
    whose ``measured_with`` data it has (:func:`health_data`)."""
    have = health_data(m)
    return tuple(c for c in HEALTH_CHECKS if set(c.measured_with) <= have)


def data_kinds(m: Model) -> set[str]:
    """The kinds of data a run of ``m`` records: the kinds of its trials' traffic items
    (``iperf3``, ``ftp``, ``ping``) and of its collectors (``qdisc_stats``)."""
    return {it.kind for t in m.trials for it in t.traffic} | {c.kind for c in m.collectors}


def check_health(m: Model, path) -> None:
    """Every threshold of ``health:`` has data to judge (:data:`HEALTH_NEEDS`)."""
    have = health_data(m)
    for key in m.data["health"]:
        missing = [HEALTH_DATA[d] for d in HEALTH_NEEDS[key] if d not in have]
        if missing:
            fail(path, f"health.{key}", f"nothing in this file measures it: expected "
                                         f"{' and '.join(missing)}, or leave this threshold out")
