"""The analysis' vocabulary, declared once for validation and analysis alike: the summary
table's columns, the statistics and metrics computed per subject, and how figures and tables
name a quantity and its unit (:func:`quantity_name`), including which scale with the rate.
"""

from __future__ import annotations


from netrepro.core import tc
from netrepro.model.claims import RATE_SCALED_FIELDS, Claim
from netrepro.model.experiment import Model


#: Columns of the analysis's statistics table (analysis/outputs.py ``SUMMARY_KEYS``, written as
#: summary.csv), of the columns the repeated, swept and compared analyses add to it
#: (analysis/repetitions.py, analysis/sweep.py, analysis/compare.py: ``repetition``, ``point``,
#: ``run``) and of their table across repetitions (analysis/repetitions.py ``STATS_COLUMNS``).
#: A trial's labels become columns of the same tables, so none may be named like one of these
#: (nor like a sweep factor: :func:`netrepro.experiment.sweep.check`).
SUMMARY_COLUMNS = ("trial", "phase", "subject", "statistic", "value")


RESERVED_COLUMNS = SUMMARY_COLUMNS + ("repetition", "point", "run") + (
    "n", "mean", "median", "sd", "ci95_low", "ci95_high", "cv", "min", "max")


#: The statistics analysis/outputs.py (``trial_statistics``) computes, by what the subject is.
#: ``iperf3``: of each iperf3 item (its id); ``iperf3_streams``: of an iperf3 item with
#: ``parallel`` > 1 (over its streams); ``ping``: of each ping item; ``ping_base_rtt``: of
#: each ping item when the file has ``base_rtt`` (queueing delay = RTT - base RTT);
#: ``port``: of each ``qdisc_stats`` collector's port; ``port_rate``: of such a port whose
#: stack has a shaper (htb or tbf ``rate_mbit``: :func:`netrepro.core.tc.shaping_rate_mbit`), ``sent_utilization``
#: from the interface's sent-bytes counter whatever the traffic; ``port_rate_iperf3``: the
#: same when the trial has iperf3 items (``utilization`` from their throughput);
#: ``port_classes``: of a collector with ``classes``; ``trial``: of subject ``all`` when the
#: trial has iperf3 items; ``trial_iperf3s``: the same with two or more; ``trial_pings_base_rtt``:
#: of subject ``all`` when the trial has ping items and the file ``base_rtt``, pooled over
#: the samples of all its ping items. FTP items have no statistics (curl's transfers are
#: not sampled).
STATISTICS = {
    "iperf3": ("throughput_mbit", "throughput_cov", "retransmits", "rtt_mean_ms", "cwnd_mean_bytes", "share"),
    "iperf3_streams": ("stream_jain_index", "stream_throughput_cov"),
    "ping": ("rtt_median_ms", "rtt_mean_ms", "rtt_p95_ms", "rtt_min_ms", "ping_received_fraction"),
    "ping_base_rtt": ("queue_delay_median_ms", "queue_delay_mean_ms", "queue_delay_p95_ms", "queue_delay_samples"),
    "port": ("backlog_mean_bytes", "backlog_max_bytes", "drops"),
    "port_rate": ("backlog_mean_ms", "backlog_max_ms", "sent_utilization"),
    "port_rate_iperf3": ("utilization",),
    "port_classes": ("busy_classes_max", "classes_in_use"),
    "trial": ("total_throughput_mbit", "retransmits"),
    "trial_iperf3s": ("jain_index",),
    "trial_pings_base_rtt": ("queue_delay_median_ms", "queue_delay_mean_ms", "queue_delay_p95_ms",
                             "queue_delay_samples"),
}


#: Statistics computed for the whole trial (phase ``all``) only: the probes a ping item
#: received against those its schedule asks for.
WHOLE_TRIAL_STATISTICS = ("ping_received_fraction",)


#: The samples (tidy.csv metrics) analysis/outputs.py (``trial_tidy``) records, by subject:
#: an iperf3 item's, a ping item's (its queueing delay too when the file has ``base_rtt``),
#: a collector's port's (``tx_bytes`` is the interface's sent-bytes counter; with
#: ``classes`` its classes' too).
#: A port also records each field its qdiscs report as ``<kind>_<field>`` (which fields
#: depends on iproute2 and the kernel: analysis.raw.parse_qdisc_fields), written
#: ``<kind>_*`` in :func:`metrics`.
METRICS = {"iperf3": ("throughput_mbit", "retransmits", "cwnd_bytes", "rtt_ms"), "ping": ("rtt_ms",),
           "ping_base_rtt": ("queue_delay_ms",),
           "port": ("backlog_bytes", "backlog_packets", "drops", "tx_bytes"),
           "port_classes": ("class_backlog_packets", "busy_classes")}


#: The subject of a trial's own statistics (analysis/outputs.py).
TRIAL_SUBJECT = "all"


#: How figures and tables name each metric (tidy.csv) and statistic (summary.csv) the
#: analysis records: ``(label, unit)``, the unit ``""`` for a number without one (an index, a
#: fraction). The file's ``metrics`` section renames any of them (:func:`quantity_name`). A
#: qdisc's own field (``<kind>_<field>``) is not listed: it is named by its words.
QUANTITY_NAMES: dict[str, tuple[str, str]] = {
    # metrics: the samples of tidy.csv
    "throughput_mbit": ("Throughput", "Mbit/s"), "retransmits": ("Retransmitted segments", "segments"),
    "cwnd_bytes": ("Congestion window", "bytes"), "rtt_ms": ("RTT", "ms"),
    "queue_delay_ms": ("Queueing delay", "ms"), "backlog_bytes": ("Backlog", "bytes"),
    "backlog_packets": ("Backlog", "packets"), "drops": ("Drops", "packets"),
    "tx_bytes": ("Bytes sent by the interface", "bytes"),
    "class_backlog_packets": ("Backlog of a class", "packets"), "busy_classes": ("Classes holding packets", "classes"),
    # statistics: the rows of summary.csv (throughput_mbit, retransmits and drops as above)
    "throughput_cov": ("Throughput's coefficient of variation", ""),
    "rtt_mean_ms": ("Mean RTT", "ms"), "cwnd_mean_bytes": ("Mean congestion window", "bytes"),
    "share": ("Share of the trial's throughput", "fraction"),
    "stream_jain_index": ("Jain's index over the streams", ""),
    "stream_throughput_cov": ("Coefficient of variation over the streams", ""),
    "rtt_median_ms": ("Median RTT", "ms"), "rtt_p95_ms": ("95th percentile of the RTT", "ms"),
    "rtt_min_ms": ("Least RTT", "ms"), "ping_received_fraction": ("Pings answered", "fraction"),
    "queue_delay_median_ms": ("Median queueing delay", "ms"), "queue_delay_mean_ms": ("Mean queueing delay", "ms"),
    "queue_delay_p95_ms": ("95th percentile of the queueing delay", "ms"),
    "queue_delay_samples": ("Queueing delay samples", "samples"),
    "backlog_mean_bytes": ("Mean backlog", "bytes"), "backlog_max_bytes": ("Largest backlog", "bytes"),
    "backlog_mean_ms": ("Mean backlog in time", "ms"), "backlog_max_ms": ("Largest backlog in time", "ms"),
    "utilization": ("Utilization by the iperf3 flows", "fraction of the rate"),
    "sent_utilization": ("Utilization", "fraction of the rate"),
    "busy_classes_max": ("Most classes holding packets", "classes"), "classes_in_use": ("Classes in use", "classes"),
    "total_throughput_mbit": ("Total throughput", "Mbit/s"), "jain_index": ("Jain's index over the flows", ""),
}


#: A unit read from the end of a name no table above lists (a qdisc's field, a file's own
#: metric name): ``_mbit`` Mbit/s, ``_ms`` ms, ...
UNIT_SUFFIXES = (("_mbit", "Mbit/s"), ("_kbit", "kbit/s"), ("_ms", "ms"), ("_us", "µs"), ("_bytes", "bytes"),
                 ("_packets", "packets"), ("_fraction", "fraction"), ("_s", "s"))


#: The units whose values follow the rate scale k: :func:`scale_rates` multiplies every rate
#: and byte size of the experiment by k, so throughputs, queue and window sizes follow it, and
#: counts of packets or segments over a trial's fixed time follow the packet rate. A claim
#: that compares such a value with a number says how that number follows k (``rate_scaling``).
RATE_SCALED_UNITS = ("Mbit/s", "kbit/s", "bytes", "packets", "segments")


#: A claim's ``rate_scaling``: ``proportional``: every threshold it sets on a value in a
#: :data:`RATE_SCALED_UNITS` unit is multiplied by the run's k (netrepro.model.claims.Check.at_rate_scale);
#: ``none``: judged as written at every k (the author says the value does not follow k).
RATE_SCALINGS = ("proportional", "none")


#: The metric (tidy.csv) whose samples a statistic sums up in the same unit, so that a
#: reference value of the statistic can be drawn on a figure of the metric.
STATISTIC_METRICS = {
    "throughput_mbit": "throughput_mbit", "rtt_mean_ms": "rtt_ms", "rtt_median_ms": "rtt_ms",
    "rtt_p95_ms": "rtt_ms", "rtt_min_ms": "rtt_ms", "cwnd_mean_bytes": "cwnd_bytes",
    "queue_delay_median_ms": "queue_delay_ms", "queue_delay_mean_ms": "queue_delay_ms",
    "queue_delay_p95_ms": "queue_delay_ms", "backlog_mean_bytes": "backlog_bytes",
    "backlog_max_bytes": "backlog_bytes", "busy_classes_max": "busy_classes",
}


def quantity_name(m: "Model | None", name: str) -> tuple[str, str]:
    """``(label, unit)`` of a metric or statistic ``name`` for figures and tables: the file's
    ``metrics.<name>`` (``label``, ``unit``, default no unit) when ``m`` (a :class:`Model`)
    has one, else :data:`QUANTITY_NAMES`, else its words with the unit its name ends in
    (:data:`UNIT_SUFFIXES`: ``fq_codel_ldelay_us`` -> ``("Fq codel ldelay", "µs")``). Never
    raises; the unit is ``""`` when none is known."""
    own = ((m.data.get("metrics") or {}) if m is not None else {}).get(name)
    if own:
        return own["label"], own.get("unit", "")
    if name in QUANTITY_NAMES:
        return QUANTITY_NAMES[name]
    stem, unit = name, ""
    for suffix, words in UNIT_SUFFIXES:
        if name.endswith(suffix) and len(name) > len(suffix):
            stem, unit = name[:-len(suffix)], words
            break
    words = stem.replace("_", " ").strip()
    return (words[:1].upper() + words[1:]) or name, unit


def rate_scaled(m: "Model | None", statistic: str) -> bool:
    """Whether the rate scale changes ``statistic``'s values: its unit (:func:`quantity_name`)
    is one of :data:`RATE_SCALED_UNITS`."""
    return quantity_name(m, statistic)[1] in RATE_SCALED_UNITS


def rate_scaled_reads(m: "Model | None", claim: Claim) -> list[str]:
    """The statistics a claim compares with a threshold that the rate scale changes
    (:func:`rate_scaled`), in its ``when`` and in every check of its ``check`` (an
    ``all_of``'s too), each once: the selections of the kinds of
    :data:`netrepro.model.claims.RATE_SCALED_FIELDS` (not a ``ratio``'s: its thresholds are
    ratios, which k does not change)."""
    checks = ([claim.when] if claim.when else []) + [ch for part, ch in claim.parts if part != "when"]
    out = [s.statistic for ch in checks if ch.kind in RATE_SCALED_FIELDS for s in ch.selections]
    return [st for st in dict.fromkeys(out) if rate_scaled(m, st)]


def quantity_label(m: "Model | None", name: str) -> str:
    """A metric's or statistic's name with its unit, as an axis or a table says it:
    ``Queueing delay (ms)`` for ``queue_delay_ms``; the label alone when it has no unit
    (:func:`quantity_name`)."""
    label, unit = quantity_name(m, name)
    return f"{label} ({unit})" if unit else label


def statistics(m: Model) -> dict[str, dict[str, list[str]]]:
    """What the analysis of this experiment can compute: trial id -> subject -> statistic
    names (:data:`STATISTICS`), subjects in the order traffic items, collectors' ports,
    ``all``. A statistic listed here may still be missing from a run (no samples, a mean of
    0): the analysis then says the claim reading it is not evaluable. validate refuses a
    claim that selects a statistic not listed here, and the analysis takes a selection's
    subjects from here when the claim names none."""
    out: dict[str, dict[str, list[str]]] = {}
    base = bool(m.data.get("base_rtt"))
    for t in m.trials:
        iperf = t.items("iperf3")
        pings = t.items("ping")
        subj: dict[str, list[str]] = {}
        for it in t.traffic:
            if it.kind == "iperf3":
                subj[it.id] = list(STATISTICS["iperf3"]) + (list(STATISTICS["iperf3_streams"])
                                                           if (it.parallel or 1) > 1 else [])
            elif it.kind == "ping":
                subj[it.id] = list(STATISTICS["ping"]) + (list(STATISTICS["ping_base_rtt"]) if base else [])
        for c in m.collectors:
            stack = t.stack(c.at)
            rate = tc.shaping_rate_mbit(stack)
            subj[c.at] = (list(STATISTICS["port"]) + (list(STATISTICS["port_rate"]) if rate else [])
                          + (list(STATISTICS["port_rate_iperf3"]) if rate and iperf else [])
                          + (list(STATISTICS["port_classes"]) if c.classes and stack else []))
        whole = ((list(STATISTICS["trial"]) + (list(STATISTICS["trial_iperf3s"]) if len(iperf) > 1 else []))
                 if iperf else []) + (list(STATISTICS["trial_pings_base_rtt"]) if pings and base else [])
        if whole:
            subj[TRIAL_SUBJECT] = whole
        out[t.id] = subj
    return out


def metrics(m: Model) -> dict[str, list[str]]:
    """The samples the analysis records: subject -> metric names (:data:`METRICS`) over all
    trials, a qdisc's own fields as ``<kind>_*`` for each kind in the port's stacks."""
    out: dict[str, list[str]] = {}

    def add(subject, names):
        have = out.setdefault(subject, [])
        have += [x for x in names if x not in have]

    for t in m.trials:
        for it in t.traffic:
            if it.kind in METRICS:
                add(it.id, list(METRICS[it.kind]) + (list(METRICS["ping_base_rtt"]) if it.kind == "ping"
                                                           and m.data.get("base_rtt") else []))
        for c in m.collectors:
            stack = t.stack(c.at)
            add(c.at, list(METRICS["port"]) + (list(METRICS["port_classes"]) if c.classes and stack else [])
                + [f"{layer.kind}_*" for layer in stack])
    return out
