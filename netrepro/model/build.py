"""From an experiment file's data to a :class:`netrepro.model.experiment.Model`: the JSON
Schema (``netrepro/schemas/experiment.schema.json``), then :func:`build` fills every default,
resolves every link and completes every trial, calling the cross-checks the schema cannot
express (netrepro.model.topology, netrepro.model.checks, netrepro.model.health).
"""

from __future__ import annotations

import ipaddress
import json
import re
from pathlib import Path
from typing import Any

import jsonschema

from netrepro.core import tc
from netrepro.core.errors import field_path, pick_error, check_plain_data, schema_problem
from netrepro.model.checks import (check_buckets, check_claims, check_collectors, check_figures, check_item_ids, check_labels,
    check_phases, check_quantities)
from netrepro.model.experiment import (IPERF3_BASE_PORT, KIND_GROUPS, Model, TRAFFIC_DEFAULTS, fail, port_name, select_nodes)
from netrepro.model.health import check_health
from netrepro.model.topology import (check_address, check_names, check_one_port_per_domain, check_routes, check_subnets_apart,
                                     l2_domains, resolve_links)
from netrepro.model.records import Port, TrafficItem
from netrepro.model.traffic import traffic_conflict


SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "experiment.schema.json"


#: A sysctl value written as text (the schema's sysctl_value): one to eight space-separated
#: whole numbers (tcp_rmem's ``4096 131072 6291456``) or one lower-case word (``cubic``); so
#: never an option (``-``), a template (``{``, ``%``), ``:``, ``;``, ``$``, a quote or a newline.
SYSCTL_VALUE_RE = re.compile(r"[0-9]{1,20}( [0-9]{1,20}){0,7}|[a-z][a-z0-9_]{0,31}")


def validate_schema(data: Any, path: Path | str) -> None:
    """Check ``data`` against netrepro/schemas/experiment.schema.json. Raises ModelError
    naming the first bad field (in file order) and what was expected
    (:func:`netrepro.core.errors.schema_problem`)."""
    schema = json.loads(SCHEMA_PATH.read_text())
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        err = pick_error(errors[0])
        fail(path, field_path(err.absolute_path), schema_problem(err))


def _check_sysctl_value(path, field: str, value: Any) -> None:
    """A sysctl value: a whole number >= 0 (nothing that reaches a command starts with '-'),
    or text of :data:`SYSCTL_VALUE_RE` (the schema's pattern, checked again here: the value
    reaches sysctl on every node, a capability probe and Ansible's variables)."""
    if isinstance(value, bool) or not ((isinstance(value, int) and value >= 0) or (isinstance(value, str)
                                                                                  and SYSCTL_VALUE_RE.fullmatch(value))):
        fail(path, field, f"expected a whole number >= 0, whole numbers separated by spaces or one lower-case word, "
                           f"got {value!r}")


def _check_stack(path, field: str, stack: list) -> None:
    """Nothing; raises ModelError naming the layer and key unless ``stack`` (the file's layers,
    schema-valid) is one tc takes, each parameter in its kind's own unit
    (:func:`netrepro.core.tc.stack_commands`, strict)."""
    try:
        tc.stack_commands([tc.Qdisc.from_data(layer) for layer in stack], strict=True)
    except tc.StackError as exc:
        fail(path, field + exc.where, exc.problem)


def _resolved_nodes(topo: dict, networks: dict, path) -> dict[str, dict]:
    """The file's nodes, each ``{kind, groups, interfaces, routes}`` with every interface's
    ``{link, network, address}``, its address checked: a valid A.B.C.D/N, none on a switch, one
    on each interface of a host or router, inside its network's subnet and not that subnet's
    network or broadcast address."""
    nodes: dict[str, dict] = {}
    for n, nd in topo["nodes"].items():
        kind = nd.get("kind", "host")
        itfs = {}
        for ifname, itf in nd["interfaces"].items():
            f = f"topology.nodes.{n}.interfaces.{ifname}"
            addr = itf.get("address")
            if addr:
                check_address(path, f + ".address", addr)
            if kind == "switch" and addr:
                fail(path, f + ".address", "a switch bridges its interfaces and has no address; leave it out")
            if kind != "switch" and not addr:
                fail(path, f + ".address", "expected an address A.B.C.D/N (hosts and routers have one per interface)")
            net = itf.get("network")
            if net is not None:
                if net not in networks:
                    fail(path, f + ".network", f"unknown network {net!r}; expected one of: {', '.join(networks) or '(none)'}")
                subnet = ipaddress.ip_network(networks[net]["subnet"])
                if addr and ipaddress.ip_interface(addr).ip not in subnet:
                    fail(path, f + ".address", f"{addr} is outside {net} ({subnet})")
                if addr and subnet.prefixlen < 31 and ipaddress.ip_interface(addr).ip in (
                        subnet.network_address, subnet.broadcast_address):
                    fail(path, f + ".address", f"{addr} is the network or broadcast address of {net} ({subnet}); "
                                                f"expected a host address")
            itfs[ifname] = {"link": itf.get("link"), "network": net, "address": addr}
        nodes[n] = {"kind": kind, "groups": nd.get("groups", []), "interfaces": itfs, "routes": nd.get("routes", [])}
    return nodes


def _resolved_topology(topo: dict, path) -> tuple[dict[str, dict], dict, list]:
    """The file's ``(nodes, networks, links)``, checked: names (:func:`check_names`), addresses
    (:func:`_resolved_nodes`), links paired up, each interface's ``link`` then the full port at
    its other end; no address twice, one subnet per L2 domain, one interface of a node per L2
    domain (:func:`check_one_port_per_domain`), subnets apart (:func:`check_subnets_apart`) and
    routes (:func:`check_routes`)."""
    networks = topo.get("networks", {})
    check_names(topo, path)
    nodes = _resolved_nodes(topo, networks, path)
    links = resolve_links(topo["nodes"], path)
    for a, b in links:  # store both ends as full ports
        pa, pb = Port.parse(a), Port.parse(b)
        nodes[pa.node]["interfaces"][pa.interface]["link"] = b
        nodes[pb.node]["interfaces"][pb.interface]["link"] = a
    seen: dict[str, str] = {}
    for n, nd in nodes.items():
        for ifname, itf in nd["interfaces"].items():
            if itf["address"]:
                ip = str(ipaddress.ip_interface(itf["address"]).ip)
                if ip in seen:
                    fail(path, f"topology.nodes.{n}.interfaces.{ifname}.address", f"{ip} is also {seen[ip]}'s")
                seen[ip] = port_name(n, ifname)
    for dom in l2_domains(nodes, links):
        addresses = {p: nodes[p.node]["interfaces"][p.interface]["address"] for p in map(Port.parse, sorted(dom))}
        nets = {str(ipaddress.ip_interface(addr).network): p for p, addr in addresses.items() if addr}
        if len(nets) > 1:
            (n1, p1), (n2, p2) = list(nets.items())[:2]
            fail(path, f"topology.nodes.{p2.node}.interfaces.{p2.interface}.address",
                  f"{p1} and {p2} share an L2 domain (links and switches) but not a subnet ({n1}, {n2})")
    check_one_port_per_domain(nodes, links, path)
    check_subnets_apart(nodes, links, networks, path)
    check_routes(nodes, path)
    return nodes, networks, links


def _check_port(path, field: str, port: str, ports: set[str]) -> None:
    """Nothing; raises ModelError unless ``port`` is one of ``ports`` (NODE:INTERFACE)."""
    if port not in ports:
        fail(path, field, f"unknown port {port!r}; expected NODE:INTERFACE, one of: {', '.join(sorted(ports))}")


def _check_qdiscs(path, field: str, qd: dict, ports: set[str]) -> None:
    """Nothing; raises ModelError unless each port of ``qd`` exists and its stack is one tc takes."""
    for port, stack in qd.items():
        _check_port(path, f"{field}.{port}", port, ports)
        _check_stack(path, f"{field}.{port}", stack)


def _base_sysctls(data: dict, nodes: dict[str, dict], path) -> dict[str, dict]:
    """Each node's sysctls before any trial's own, ``{node: {key: value as text}}``: a router's
    ``net.ipv4.ip_forward`` 1, then the file's ``sysctls`` in order, their selectors and values checked."""
    known_sel = set(nodes) | set(KIND_GROUPS.values()) | {"all"} | {g for nd in nodes.values() for g in nd["groups"]}
    # a router forwards IPv4 (unless the file says otherwise)
    base_sysctls: dict[str, dict] = {n: ({"net.ipv4.ip_forward": "1"} if nodes[n]["kind"] == "router" else {})
                                     for n in nodes}
    for i, s in enumerate(data.get("sysctls", [])):
        for sel in s["nodes"]:
            if sel not in known_sel:
                fail(path, f"sysctls[{i}].nodes", f"unknown node or kind {sel!r}; expected one of: {', '.join(sorted(known_sel))}")
        for k, v in s["set"].items():
            _check_sysctl_value(path, f"sysctls[{i}].set.{k}", v)
        for n in select_nodes(nodes, s["nodes"]):
            base_sysctls[n].update({k: str(v) for k, v in s["set"].items()})
    return base_sysctls


def _trial_sysctls(path, field: str, t: dict, nodes: dict[str, dict], base_sysctls: dict[str, dict]) -> dict[str, dict]:
    """Trial ``t``'s sysctls, ``{node: {key: value as text}}``: the base ones with the trial's
    own over them, each of which must be a key the file's ``sysctls`` set on that node."""
    sysctls = {n: dict(v) for n, v in base_sysctls.items()}
    for n, kv in t.get("sysctls", {}).items():
        if n not in nodes:
            fail(path, f"{field}.sysctls.{n}", f"unknown node {n!r}; expected one of: {', '.join(nodes)}")
        for k, v in kv.items():
            if k not in base_sysctls[n]:
                fail(path, f"{field}.sysctls.{n}.{k}", "set by this trial but not in the file's sysctls; expected "
                      "its value for the other trials there too (a trial's setting would last into the next)")
            _check_sysctl_value(path, f"{field}.sysctls.{n}.{k}", v)
            sysctls[n][k] = str(v)
    return sysctls


def _checked_traffic(path, field: str, items: list, nodes: dict[str, dict]) -> list[dict]:
    """The traffic list ``items`` with its kinds' defaults filled (an iperf3 item without a port
    gets the next from :data:`IPERF3_BASE_PORT`), checked: unique ids, between two nodes other
    than switches, no conflict (:func:`traffic_conflict`), no two iperf3 servers on one port."""
    out, ids, iperf_k = [], {}, 0
    for j, it in enumerate(items):
        f = f"{field}[{j}]"
        if it["id"] in ids:
            fail(path, f + ".id", f"{it['id']!r} is already {field}[{ids[it['id']]}]; expected unique ids")
        ids[it["id"]] = j
        for end in ("from", "to"):
            if it[end] not in nodes:
                fail(path, f"{f}.{end}", f"unknown node {it[end]!r}; expected one of: {', '.join(nodes)}")
            if nodes[it[end]]["kind"] == "switch":
                fail(path, f"{f}.{end}", f"{it[end]} is a switch (no address); expected a host or router")
        if it["from"] == it["to"]:
            fail(path, f + ".to", "expected another node than from")
        full = {**TRAFFIC_DEFAULTS[it["kind"]], **it}
        if it["kind"] == "iperf3":
            full.setdefault("port", IPERF3_BASE_PORT + iperf_k)
            iperf_k += 1
        out.append(full)
    conflict = traffic_conflict(out)
    if conflict:
        fail(path, field, conflict)
    ports_used = [(x["to"], x["port"]) for x in out if x["kind"] == "iperf3"]
    for j, pu in enumerate(ports_used):
        if ports_used.index(pu) != j:
            fail(path, field, f"two iperf3 servers on {pu[0]} port {pu[1]}; give one a port")
    return out


def _resolved_trials(data: dict, nodes: dict[str, dict], ports: set[str], base_sysctls: dict[str, dict],
                     path) -> list[dict]:
    """The file's trials completed, each ``{id, description, labels, qdiscs, sysctls, traffic,
    duration_s}``: unique ids, its qdiscs over the file's (with a stack, maybe ``[]``, on every
    port that any trial stacks), its sysctls (:func:`_trial_sysctls`), its traffic or the file's
    (:func:`_checked_traffic`) and its duration in s (the last traffic item's end)."""
    base_qdiscs = data.get("qdiscs", {})
    default_traffic = _checked_traffic(path, "traffic", data["traffic"], nodes)
    trials, tids = [], {}
    for i, t in enumerate(data["trials"]):
        f = f"trials[{i}]"
        if t["id"] in tids:
            fail(path, f + ".id", f"{t['id']!r} is already trials[{tids[t['id']]}]; expected unique trial ids")
        tids[t["id"]] = i
        _check_qdiscs(path, f + ".qdiscs", t.get("qdiscs", {}), ports)
        sysctls = _trial_sysctls(path, f, t, nodes, base_sysctls)
        traffic = _checked_traffic(path, f + ".traffic", t["traffic"], nodes) if "traffic" in t else default_traffic
        trials.append({"id": t["id"], "description": t.get("description", ""), "labels": t.get("labels", {}),
                       "qdiscs": {**base_qdiscs, **t.get("qdiscs", {})}, "sysctls": sysctls, "traffic": traffic,
                       "duration_s": max(x["start_s"] + TrafficItem.from_data(x).length_s for x in traffic)})
    # A port that some trial gives a stack has one in every trial ([] = the kernel's default),
    # so that a trial's stack never lasts into the next one.
    in_order = [port_name(n, i) for n, nd in nodes.items() for i in nd["interfaces"]]
    stacked = [p for p in in_order if any(p in t["qdiscs"] for t in trials)]
    for t in trials:
        t["qdiscs"] = {p: t["qdiscs"].get(p, []) for p in stacked}
    return trials


def _check_phase_times(path, phases: list[dict], longest: float) -> None:
    """Nothing; raises ModelError unless the phases are contiguous from 0 s, each with
    end_s > start_s, and end within the longest trial (``longest``, s)."""
    prev = 0.0
    for i, ph in enumerate(phases):
        if ph["start_s"] != prev or ph["end_s"] <= ph["start_s"]:
            fail(path, f"phases[{i}]", f"expected contiguous phases starting at {prev} s with end_s > start_s")
        prev = ph["end_s"]
    if phases and prev > longest + 1e-9:
        fail(path, f"phases[{len(phases) - 1}].end_s", f"expected at most the longest trial's {longest} s")


def build(data: dict, path: Path | str = "<memory>") -> Model:
    """Validate a schema_version 2 experiment (parsed YAML) and resolve it into a :class:`Model`.

    Cross-checks beyond the schema, each failing with one line (ModelError) naming the field:
    no name means something else (:func:`check_names`: selectors, the sites' interfaces and
    networks, ip link keywords); links pair up (each end names the other), switches have no
    address and hosts/routers an address on each interface, never a subnet's network or
    broadcast address, addresses fall in their LAN's subnet, one subnet per L2 domain and
    none overlapping another domain's, no address twice, each route via a neighbour on one
    of the node's subnets; every port of ``qdiscs``/trials/collectors exists and every stack
    is one tc takes, each parameter in its kind's own unit (:func:`netrepro.core.tc.stack_commands`
    with ``strict``, :data:`netrepro.core.tc.KIND_KEYWORDS`); sysctl values are integers or
    :data:`SYSCTL_VALUE_RE`; selectors name nodes or kinds; trial
    and traffic ids are unique; traffic runs between nodes with addresses; phases are
    contiguous within the longest trial, with unique names; at most one qdisc_stats
    collector per node; no label is named like a column of the analysis's tables; every
    health threshold has data to judge (:data:`HEALTH_NEEDS`); claims and figures select
    only trials, phases, statistics, subjects and metrics the analysis has for this file
    (:func:`statistics`, :func:`metrics`), with min <= max and figure text that matplotlib
    can draw (:func:`check_claims`); a figure's facet and hue name a column it has,
    shade_phases has phases, and a phase's label is text matplotlib can draw (:func:`check_figures`);
    ``metrics`` names only metrics and statistics the analysis has for this file, and
    ``reference_results``' values only its statistics, trials, subjects and phases
    (:func:`check_quantities`).
    """
    import copy
    check_plain_data(data, path)
    validate_schema(data, path)
    data = copy.deepcopy(data)  # the model shares nothing with the caller's data
    nodes, networks, links = _resolved_topology(data["topology"], path)
    ports = {port_name(n, i) for n, nd in nodes.items() for i in nd["interfaces"]}
    _check_qdiscs(path, "qdiscs", data.get("qdiscs", {}), ports)
    base_sysctls = _base_sysctls(data, nodes, path)
    trials = _resolved_trials(data, nodes, ports, base_sysctls, path)
    check_buckets(path, data, int(data.get("links", {}).get("mtu_bytes", 1500)))
    phases = data.get("phases", [])
    _check_phase_times(path, phases, max(t["duration_s"] for t in trials))
    for i, c in enumerate(data.get("collectors", [])):
        _check_port(path, f"collectors[{i}].at", c["at"], ports)
    m = Model({
        "schema_version": 2, "name": data["name"], "title": data["title"], "reference": data.get("reference", {}),
        "nodes": nodes, "networks": networks, "links": links,
        "mtu_bytes": data.get("links", {}).get("mtu_bytes", 1500),
        "offloads": {k: data.get("links", {}).get("offloads", {}).get(k, False) for k in ("tso", "gso", "gro")},
        "trials": trials, "phases": phases, "base_rtt": data.get("base_rtt", {}),
        "collectors": data.get("collectors", []), "health": data.get("health", {}),
        "figures": data.get("figures", []), "claims": data["claims"], "rate_scale": data.get("rate_scale", {}),
        "time_scale": data.get("time_scale", {}), "metrics": data.get("metrics", {}),
        "reference_results": data.get("reference_results", []),
    }, Path(path))
    check_phases(m, path)
    ts = m.data["time_scale"]
    if "quick" in ts and ts["quick"] < ts["min"]:
        fail(path, "time_scale.quick", f"expected at least time_scale.min ({ts['min']:g}), got {ts['quick']:g}")
    check_collectors(m, path)
    check_labels(m, path)
    check_item_ids(data, path)
    check_health(m, path)
    check_claims(m, path)
    check_figures(m, path)
    check_quantities(m, path)
    return m
