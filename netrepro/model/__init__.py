"""The experiment model: any topology, qdisc stacks, trials and traffic.

An experiment file (``schema_version: 2``; ``netrepro/schemas/experiment.schema.json``,
documented field by field in docs/experiment-format.md) is validated in three steps (plain
data, the JSON Schema, then cross-checks the schema cannot express), and
:func:`build` turns it into a :class:`Model`: every default filled in, every link resolved
to its two ports, every trial complete (its qdisc stacks, sysctls and traffic after the
trial's own settings replace the defaults). Playbooks, sites and the analysis read the
model, never the file's shorthand.

Its modules: experiment (the :class:`Model` and its terms), records (the typed records the
model is read as: nodes and their interfaces and routes, ports and links, trials and their
traffic items, phases, collectors, the base RTT), claims (the claims and their checks), figures,
build (file to model), topology,
checks, health, vocabulary (the analysis' names), traffic and scales; the names imported
below are the package's interface.
"""

from __future__ import annotations

from netrepro.model.experiment import (
    KIND_GROUPS, TRAFFIC_DEFAULTS, IPERF3_BASE_PORT, SELECTOR_WORDS, ModelError, Model, select_nodes)
from netrepro.model.claims import CHECK_KINDS, RATE_SCALED_FIELDS, Check, Claim, Finding, Selection
from netrepro.model.figures import Figure, ReferenceLine, Rolling
from netrepro.model.records import (BaseRtt, Collector, FrozenMap, Interface, Link, Node, Phase, Port, Route, TrafficItem,
                                    Trial)
from netrepro.model.topology import (
    RESERVED_IFNAMES, IP_LINK_KEYWORDS, RESERVED_NETWORKS, path_ports, layer_probes)
from netrepro.model.build import (SCHEMA_PATH, SYSCTL_VALUE_RE, validate_schema, build)
from netrepro.model.vocabulary import (
    SUMMARY_COLUMNS, RESERVED_COLUMNS, STATISTICS, WHOLE_TRIAL_STATISTICS, METRICS, TRIAL_SUBJECT,
    QUANTITY_NAMES, UNIT_SUFFIXES, RATE_SCALED_UNITS, RATE_SCALINGS, STATISTIC_METRICS,
    quantity_name, rate_scaled, rate_scaled_reads, quantity_label, statistics, metrics)
from netrepro.model.checks import (ETHERNET_HEADER_BYTES, FIGURE_COLUMNS)
from netrepro.model.traffic import (
    stack_buffer, ping_buffers, simultaneous_starts, STARTED_KINDS, PACING_HEADROOM, pacing_rates,
    pacing_limited, traffic_conflict, CONGESTION_SYSCTL, congestion_controls, stack_vars,
    trial_timeline)
from netrepro.model.health import (
    HealthCheck, HEALTH_CHECKS, health_check, HEALTH_NEEDS, HEALTH_DATA, health_data, measured_checks, data_kinds)
from netrepro.model.scales import (
    claim_time_scale_min, time_scale_note, BUFFER_SYSCTLS, RATE_SCALE_CAPACITY_SHARE, RATE_SCALE_FLOOR,
    highest_rate_mbit, rate_scale_option, choose_rate_scale, scale_rates)

__all__ = [
    "KIND_GROUPS", "TRAFFIC_DEFAULTS", "IPERF3_BASE_PORT", "SELECTOR_WORDS", "ModelError", "Model", "Phase", "Collector", "BaseRtt",
    "CHECK_KINDS", "RATE_SCALED_FIELDS", "Check", "Claim", "Finding", "Selection", "Figure", "ReferenceLine", "Rolling",
    "Node", "Interface", "Route", "Port", "Link", "Trial", "TrafficItem", "FrozenMap",
    "select_nodes", "RESERVED_IFNAMES", "IP_LINK_KEYWORDS", "RESERVED_NETWORKS", "path_ports", "layer_probes",
    "SCHEMA_PATH", "SYSCTL_VALUE_RE", "validate_schema", "build", "SUMMARY_COLUMNS", "RESERVED_COLUMNS",
    "STATISTICS", "WHOLE_TRIAL_STATISTICS", "METRICS", "TRIAL_SUBJECT", "QUANTITY_NAMES", "UNIT_SUFFIXES",
    "RATE_SCALED_UNITS", "RATE_SCALINGS", "STATISTIC_METRICS", "quantity_name",
    "rate_scaled", "rate_scaled_reads", "quantity_label", "statistics", "metrics", "ETHERNET_HEADER_BYTES",
    "FIGURE_COLUMNS", "stack_buffer", "ping_buffers", "simultaneous_starts", "STARTED_KINDS",
    "PACING_HEADROOM", "pacing_rates", "pacing_limited", "traffic_conflict",
    "CONGESTION_SYSCTL", "congestion_controls", "stack_vars", "trial_timeline", "HealthCheck", "HEALTH_CHECKS",
    "health_check", "HEALTH_NEEDS", "HEALTH_DATA", "health_data", "measured_checks", "data_kinds",
    "claim_time_scale_min", "time_scale_note", "BUFFER_SYSCTLS", "RATE_SCALE_CAPACITY_SHARE", "RATE_SCALE_FLOOR",
    "highest_rate_mbit", "rate_scale_option", "choose_rate_scale", "scale_rates",
]
