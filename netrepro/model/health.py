"""Which health thresholds an experiment can be judged by: what each needs in the file
(:data:`HEALTH_NEEDS`) and what the file has (:func:`health_data`).
"""

from __future__ import annotations


from netrepro import tc
from netrepro.model.experiment import Model, fail
from netrepro.model.traffic import STARTED_KINDS, pacing_limited, ping_buffers, simultaneous_starts


#: What each threshold of ``health:`` needs in the file: the check analysis/health.py judges
#: with it can be computed only when the file has all of these (:func:`health_data`). An
#: empty tuple: the machines, always measured. validate refuses a threshold whose check can
#: never be computed for the file.
HEALTH_NEEDS: dict[str, tuple[str, ...]] = {
    "nodes_cpu_busy_max_fraction": (),
    "ping_received_min_fraction": ("ping",),
    "flow_start_lag_max_ms": ("started",),
    "flow_start_skew_max_ms": ("started_together",),
    "data_start_lag_max_fraction": ("started",),
    "collector_sampling_min_fraction": ("sampled",),
    "queue_delay_excess_max_ms": ("base_rtt", "ping_buffer"),
    "queue_delay_excess_max_fraction": ("base_rtt", "ping_buffer"),
    "shaper_rate_tolerance_fraction": ("shaped_sample",),
    "shaper_rate_off_max_fraction": ("shaped_sample",),
    "pacing_rate_tolerance_fraction": ("paced",),
    "pacing_rate_off_max_fraction": ("paced",),
    "timer_late_max_ms": ("queue_sampled",),
    "controller_load_per_core_max": (),
    "controller_cpu_busy_max_fraction": (),
}


#: The data names of :data:`HEALTH_NEEDS`, as validate's messages say them.
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
    sampled = {c["at"] for c in m.data["collectors"] if c["kind"] == "qdisc_stats"}
    if any(tc.shaping_rate_mbit(t["qdiscs"].get(port, [])) for t in m.trials for port in sampled):
        out.add("shaped_sample")
    if any(pacing_limited(m, t) for t in m.trials):
        out.add("paced")
    for t in m.trials:
        for it in t["traffic"]:
            if it["kind"] == "ping":
                try:
                    if ping_buffers(m, t, it):
                        out.add("ping_buffer")
                except ValueError:
                    pass
    return out


def data_kinds(m: Model) -> set[str]:
    """The kinds of data a run of ``m`` records: the kinds of its trials' traffic items
    (``iperf3``, ``ftp``, ``ping``) and of its collectors (``qdisc_stats``)."""
    return {it["kind"] for t in m.trials for it in t["traffic"]} | {c["kind"] for c in m.data["collectors"]}


def check_health(m: Model, path) -> None:
    """Every threshold of ``health:`` has data to judge (:data:`HEALTH_NEEDS`)."""
    have = health_data(m)
    for key in m.data["health"]:
        missing = [HEALTH_DATA[d] for d in HEALTH_NEEDS[key] if d not in have]
        if missing:
            fail(path, f"health.{key}", f"nothing in this file measures it: expected "
                                         f"{' and '.join(missing)}, or leave this threshold out")
