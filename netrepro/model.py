"""The experiment model: any topology, qdisc stacks, trials and traffic.

An experiment file (``schema_version: 2``; ``netrepro/schemas/experiment.schema.json``,
documented field by field in docs/experiment-format.md) is validated in three steps (plain
data, the JSON Schema, then cross-checks the schema cannot express), and
:func:`build` turns it into a :class:`Model`: every default filled in, every link resolved
to its two ports, every trial complete (its qdisc stacks, sysctls and traffic after the
trial's own settings replace the defaults). Playbooks, sites and the analysis read the
model, never the file's shorthand.

Terms: a *port* is ``NODE:INTERFACE`` (``s2:s2-eth2``). A *link* is a cable between two
ports. A *switch* bridges all its interfaces (a Linux bridge: a namespace with a bridge on
the local site, a VM with a bridge on a testbed); a *router* forwards IPv4; a *host* does
neither. An *L2 domain* is a set of ports joined by links and switches (or one LAN of
``topology.networks``): its addresses share one subnet.
"""

from __future__ import annotations

import ipaddress
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema

from netrepro import tc
from netrepro.errors import field_path, pick_error, check_plain_data, schema_problem

SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "experiment.schema.json"

#: Node kinds, and the plural a selector uses for all nodes of a kind.
KIND_GROUPS = {"host": "hosts", "router": "routers", "switch": "switches"}
#: Defaults of a traffic item's optional fields (iperf3(1): -P 1, -O 0, -i 1).
TRAFFIC_DEFAULTS = {"iperf3": {"start_s": 0, "parallel": 1, "omit_s": 0, "interval_s": 1},
                    "ftp": {"start_s": 0, "max_rate_bytes_per_s": 0},
                    "ping": {"start_s": 0}}
#: iperf3's default port (iperf3(1) -p); item k of a trial's iperf3 traffic listens on BASE + k.
IPERF3_BASE_PORT = 5201
#: Words a selector reads as more than one node (:func:`select_nodes`): ``all`` and the kinds
#: in the plural. No node or group may be named so (a sysctl meant for a node named ``all``
#: would land on every node).
SELECTOR_WORDS = ("all", *KIND_GROUPS.values())
#: Interface names a node may not give an experiment interface: ``lo`` (every namespace's
#: loopback), ``eth0`` (the management interface: netrepro/sites/local/netns.py puts it in every
#: node of the local site, testbed VMs have theirs there), ``br0`` (a switch's bridge:
#: netns.py and roles/switch_bridge's switch_bridge_name), and ``all``/``default``, the
#: kernel's per-interface sysctl folders (/proc/sys/net/ipv4/conf/all, .../default).
RESERVED_IFNAMES = ("lo", "eth0", "br0", "all", "default")
#: Words ``ip link`` reads as keywords where it expects a device name (ip-link(8), iproute2
#: 6.1: the arguments of ``ip link add/set/show`` and the commands themselves): an interface
#: named ``up`` makes ``ip link set up up`` fail.
IP_LINK_KEYWORDS = (
    "add", "addrgenmode", "address", "afstats", "allmulticast", "alias", "altname", "arp", "brd", "broadcast",
    "carrier", "change", "del", "delete", "dev", "down", "dynamic", "gro_max_size", "group", "gso_max_segs",
    "gso_max_size", "help", "index", "link", "link-netns", "link-netnsid", "list", "lst", "macaddr", "master",
    "mode", "mtu", "multicast", "name", "netns", "nomaster", "numrxqueues", "numtxqueues", "off", "on", "peer",
    "promisc", "property", "protodown", "protodown_reason", "qlen", "replace", "set", "show", "state",
    "trailers", "txqlen", "txqueuelen", "type", "up", "vf", "vrf", "xdp", "xdpdrv", "xdpgeneric",
    "xdpoffload", "xstats")
#: LAN names a site already uses: the local site names a LAN's bridge ``nr-<network>`` and its
#: management bridge ``nr-mgmt`` (netrepro/sites/local/netns.py Layout.mgmt_bridge, lan_bridge).
RESERVED_NETWORKS = ("mgmt",)
#: A sysctl value written as text (the schema's sysctl_value): one to eight space-separated
#: whole numbers (tcp_rmem's ``4096 131072 6291456``) or one lower-case word (``cubic``); so
#: never an option (``-``), a template (``{``, ``%``), ``:``, ``;``, ``$``, a quote or a newline.
SYSCTL_VALUE_RE = re.compile(r"[0-9]{1,20}( [0-9]{1,20}){0,7}|[a-z][a-z0-9_]{0,31}")


class ModelError(ValueError):
    """An experiment file (schema_version 2) is invalid: one line naming file, field, problem."""

    def __init__(self, path: Path | str, field: str, problem: str):
        self.path, self.field, self.problem = str(path), field, problem
        super().__init__(f"{path}: {field}: {problem}")


@dataclass
class Model:
    """A validated experiment (schema_version 2) with everything resolved.

    ``data`` is a plain dict (JSON-serializable, recorded in run.json):

    - ``name``, ``title``, ``reference``;
    - ``nodes``: name -> ``{"kind", "interfaces": {ifname: {"link": port | None,
      "network": name | None, "address": "A.B.C.D/N" | None}}, "routes": [...]}``;
    - ``networks``: LAN name -> ``{"subnet"}``; ``links``: ``[[port, port], ...]`` (each
      cable once, in file order);
    - ``mtu_bytes`` (default 1500), ``offloads`` (tso/gso/gro: false unless given);
    - ``trials``: ``[{"id", "description", "labels", "qdiscs": {port: stack},
      "sysctls": {node: {name: value}}, "traffic": [item with defaults filled],
      "duration_s"}]``, in run order;
    - ``phases``, ``base_rtt``, ``collectors``, ``health``, ``figures``, ``claims``,
      ``rate_scale``, ``time_scale``, ``metrics`` (how figures and tables name a metric or
      statistic: :func:`quantity_name`) and ``reference_results`` (what published runs
      found) as in the file (empty when absent).
    """

    data: dict
    path: Path

    @property
    def name(self) -> str:
        return self.data["name"]

    @property
    def nodes(self) -> dict[str, dict]:
        return self.data["nodes"]

    @property
    def trials(self) -> list[dict]:
        return self.data["trials"]

    def trial(self, trial_id: str) -> dict:
        """The trial named ``trial_id``. Raises KeyError."""
        for t in self.trials:
            if t["id"] == trial_id:
                return t
        raise KeyError(trial_id)

    def select(self, selectors: list[str]) -> list[str]:
        """Node names (file order) of selectors: names, kinds in the plural, groups, or ``all``."""
        return select_nodes(self.nodes, selectors)

    def addresses(self, node: str) -> list[ipaddress.IPv4Interface]:
        """The node's interface addresses, in file order."""
        return [ipaddress.ip_interface(i["address"]) for i in self.nodes[node]["interfaces"].values() if i["address"]]

    def data_plane(self, node: str) -> dict[str, dict]:
        """The node's experiment interfaces by the key every site and role finds them by:
        the LAN's name for an interface on a ``topology.networks`` LAN, else the
        interface's name. Key -> ``{"interface", "address" (bare IPv4) | None, "prefixlen"
        | None, "network" | None, "link" (peer port) | None}``, in file order. A key
        without an address (a switch's port) is found on a node by its MAC or device name.
        """
        out: dict[str, dict] = {}
        for name, i in self.nodes[node]["interfaces"].items():
            addr, _, plen = (i["address"] or "").partition("/")
            out[i["network"] or name] = {"interface": name, "address": addr or None,
                                         "prefixlen": int(plen) if plen else None,
                                         "network": i["network"], "link": i["link"]}
        return out

    def segments(self) -> list[dict]:
        """The L2 segments a testbed must wire: one per LAN of ``topology.networks`` (named
        as the LAN) and one per link (named ``link-N``, N its place in ``links`` from 0),
        each ``{"name", "subnet" | None, "members": [(node, key), ...]}`` with the members'
        :meth:`data_plane` keys in file order. A segment's subnet is its LAN's, else the
        subnet of an address on it (None when no member has one: a cable between switches)."""
        segs: list[dict] = []
        for net, nd in self.data["networks"].items():
            members = [(n, k) for n in self.nodes for k, i in self.data_plane(n).items() if i["network"] == net]
            segs.append({"name": net, "subnet": nd["subnet"], "members": members})
        for idx, (a, b) in enumerate(self.data["links"]):
            members = []
            subnet = None
            for port in (a, b):
                n, itf = port.split(":")
                addr = self.nodes[n]["interfaces"][itf]["address"]
                if addr and subnet is None:
                    subnet = str(ipaddress.ip_interface(addr).network)
                members.append((n, itf))
            segs.append({"name": f"link-{idx}", "subnet": subnet, "members": members})
        return segs

    def address_toward(self, src: str, dst: str) -> str:
        """The address of ``dst`` that ``src`` reaches it at: the first of dst's addresses in a
        subnet ``src`` has an address in, else dst's first address. Raises ValueError when
        ``dst`` has no address (a switch)."""
        theirs = self.addresses(dst)
        if not theirs:
            raise ValueError(f"{dst} has no address")
        mine = {a.network for a in self.addresses(src)}
        return str(next((a.ip for a in theirs if a.network in mine), theirs[0].ip))


def select_nodes(nodes: dict[str, dict], selectors: list[str]) -> list[str]:
    """Names (in ``nodes``' order) of the nodes that selectors name: a node's name, its kind in
    the plural (:data:`KIND_GROUPS`), one of its ``groups``, or ``all``."""
    return [n for n, nd in nodes.items()
            if "all" in selectors or n in selectors or KIND_GROUPS[nd["kind"]] in selectors
            or set(nd.get("groups", [])) & set(selectors)]


def _fail(path, field, problem):
    raise ModelError(path, field, problem)


def _port(node: str, ifname: str) -> str:
    return f"{node}:{ifname}"


def validate_schema(data: Any, path: Path | str) -> None:
    """Check ``data`` against netrepro/schemas/experiment.schema.json. Raises ModelError
    naming the first bad field (in file order) and what was expected
    (:func:`netrepro.errors.schema_problem`)."""
    schema = json.loads(SCHEMA_PATH.read_text())
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(data), key=lambda e: list(e.absolute_path))
    if errors:
        err = pick_error(errors[0])
        _fail(path, field_path(err.absolute_path), schema_problem(err))


def _resolve_links(nodes: dict, path) -> list[list[str]]:
    """Pair every interface that names a ``link`` with the interface at its other end."""
    links: list[list[str]] = []
    taken: set[str] = set()
    for n, nd in nodes.items():
        for ifname, itf in nd["interfaces"].items():
            here = _port(n, ifname)
            if not itf.get("link") or here in taken:
                continue
            field = f"topology.nodes.{n}.interfaces.{ifname}.link"
            peer_node, _, peer_if = itf["link"].partition(":")
            if peer_node not in nodes:
                _fail(path, field, f"unknown node {peer_node!r}; expected one of: {', '.join(nodes)}")
            if peer_node == n:
                _fail(path, field, "a link joins two different nodes")
            cands = [i for i, pi in nodes[peer_node]["interfaces"].items()
                     if (not peer_if or i == peer_if)
                     and pi.get("link") in (n, here)]
            if len(cands) != 1:
                want = f"{peer_node}:{peer_if}" if peer_if else f"one interface of {peer_node}"
                _fail(path, field, f"expected {want} with link: {n} (or {here}) for the other end of this cable; "
                                   f"found {len(cands)}")
            there = _port(peer_node, cands[0])
            if there in taken:
                _fail(path, field, f"{there} is already the other end of another link")
            taken.update((here, there))
            links.append([here, there])
    return links


def _l2_domains(nodes: dict, links: list[list[str]]) -> list[set[str]]:
    """Sets of ports in one L2 domain (joined by links, switches and LANs)."""
    parent: dict[str, str] = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def join(a, b):
        parent[find(a)] = find(b)

    for a, b in links:
        join(a, b)
    for n, nd in nodes.items():
        ports = [_port(n, i) for i in nd["interfaces"]]
        for p in ports:
            find(p)
        if nd["kind"] == "switch":
            for p in ports[1:]:
                join(ports[0], p)
        for i, itf in nd["interfaces"].items():
            if itf.get("network"):
                join(_port(n, i), "lan:" + itf["network"])
    groups: dict[str, set[str]] = {}
    for p in list(parent):
        if not p.startswith("lan:"):
            groups.setdefault(find(p), set()).add(p)
    return list(groups.values())


def _check_names(topo: dict, path) -> None:
    """Names that mean something else are refused: a node or group named like a selector
    (:data:`SELECTOR_WORDS`), a group named like a node, an interface named as the sites'
    own (:data:`RESERVED_IFNAMES`) or as an ``ip link`` keyword (:data:`IP_LINK_KEYWORDS`),
    a LAN named as the management network (:data:`RESERVED_NETWORKS`). Each subnet of
    ``topology.networks`` is an IPv4 network with no host bits."""
    nodes = topo["nodes"]
    for net, nd in topo.get("networks", {}).items():
        if net in RESERVED_NETWORKS:
            _fail(path, f"topology.networks.{net}", f"{net!r} is the sites' management network (bridge nr-{net}); "
                                                    f"expected another name")
        try:
            ipaddress.IPv4Network(nd["subnet"])
        except ValueError as exc:
            _fail(path, f"topology.networks.{net}.subnet", f"expected an IPv4 network with no host bits ({exc})")
    for n, nd in nodes.items():
        if n in SELECTOR_WORDS:
            _fail(path, f"topology.nodes.{n}", f"{n!r} is a selector ({', '.join(SELECTOR_WORDS)} name several nodes); "
                                               f"expected another node name")
        for j, g in enumerate(nd.get("groups", [])):
            if g in SELECTOR_WORDS or g in nodes:
                what = "a selector" if g in SELECTOR_WORDS else "a node's name"
                _fail(path, f"topology.nodes.{n}.groups[{j}]", f"{g!r} is {what}; expected a group name of its own")
        for ifname in nd["interfaces"]:
            if ifname in RESERVED_IFNAMES:
                _fail(path, f"topology.nodes.{n}.interfaces.{ifname}",
                      f"{ifname!r} is an interface the sites or the kernel use ({', '.join(RESERVED_IFNAMES)}); "
                      f"expected another interface name")
            if ifname in IP_LINK_KEYWORDS:
                _fail(path, f"topology.nodes.{n}.interfaces.{ifname}",
                      f"{ifname!r} is a keyword of ip link (ip-link(8)); expected another interface name")


def _check_address(path, field: str, addr: str) -> None:
    """An interface address: IPv4 with its prefix length, not its subnet's network or
    broadcast address (for prefixes shorter than /31, RFC 3021)."""
    try:
        a = ipaddress.IPv4Interface(addr)
    except ValueError as exc:
        _fail(path, field, f"expected an IPv4 address with its prefix length ({exc})")
    if a.network.prefixlen < 31 and a.ip in (a.network.network_address, a.network.broadcast_address):
        which = "network" if a.ip == a.network.network_address else "broadcast"
        _fail(path, field, f"{addr} is the {which} address of {a.network}; expected a host address")


def _check_subnets_apart(nodes: dict, links: list[list[str]], networks: dict, path) -> None:
    """Different L2 domains have subnets that do not overlap (a node could not tell which
    domain an address is on): each domain's subnets are its addresses' and its LANs'."""
    seen: list[tuple[ipaddress.IPv4Network, str, int]] = []  # (subnet, field, domain)
    domains = _l2_domains(nodes, links)
    lans_in = {}
    for k, dom in enumerate(domains):
        for p in sorted(dom):
            n, i = p.split(":")
            itf = nodes[n]["interfaces"][i]
            if itf["address"]:
                seen.append((ipaddress.ip_interface(itf["address"]).network,
                             f"topology.nodes.{n}.interfaces.{i}.address", k))
            if itf["network"]:
                lans_in.setdefault(itf["network"], k)
    for k, net in enumerate(networks):
        seen.append((ipaddress.ip_network(networks[net]["subnet"]), f"topology.networks.{net}.subnet",
                     lans_in.get(net, len(domains) + k)))
    for j, (b, fb, db) in enumerate(seen):
        for a, fa, da in seen[:j]:
            if da != db and a.overlaps(b):
                _fail(path, fb, f"{b} overlaps {a} of {fa}, another L2 domain; expected subnets apart")


def _check_routes(nodes: dict, path) -> None:
    """Each route's ``to`` is a network (no host bits) and its ``via`` a neighbour: an address
    in a subnet of one of the node's interfaces, not the node's own (``ip route add ... via``
    refuses a gateway it cannot reach directly: "Nexthop has invalid gateway")."""
    for n, nd in nodes.items():
        mine = [ipaddress.ip_interface(i["address"]) for i in nd["interfaces"].values() if i["address"]]
        for j, r in enumerate(nd["routes"]):
            f = f"topology.nodes.{n}.routes[{j}]"
            try:
                ipaddress.IPv4Network(r["to"])
            except ValueError as exc:
                _fail(path, f + ".to", f"expected an IPv4 network with no host bits ({exc})")
            try:
                via = ipaddress.IPv4Address(r["via"])
            except ValueError as exc:
                _fail(path, f + ".via", f"expected an IPv4 address ({exc})")
            if any(a.ip == via for a in mine):
                _fail(path, f + ".via", f"{via} is {n}'s own address; expected a neighbour's")
            if not any(via in a.network for a in mine):
                _fail(path, f + ".via", f"{via} is on no subnet of {n} "
                                        f"({', '.join(str(a.network) for a in mine) or 'it has no address'}); "
                                        f"expected a neighbour's address")


def _check_sysctl_value(path, field: str, value: Any) -> None:
    """A sysctl value: a whole number >= 0 (nothing that reaches a command starts with '-'),
    or text of :data:`SYSCTL_VALUE_RE` (the schema's pattern, checked again here: the value
    reaches sysctl on every node, a capability probe and Ansible's variables)."""
    if isinstance(value, bool) or not ((isinstance(value, int) and value >= 0) or (isinstance(value, str)
                                                                                  and SYSCTL_VALUE_RE.fullmatch(value))):
        _fail(path, field, f"expected a whole number >= 0, whole numbers separated by spaces or one lower-case word, "
                           f"got {value!r}")


def _check_stack(path, field: str, stack: list) -> None:
    try:
        tc.stack_commands(stack, strict=True)
    except tc.StackError as exc:
        _fail(path, field + exc.where, exc.problem)


def build(data: dict, path: Path | str = "<memory>") -> Model:
    """Validate a schema_version 2 experiment (parsed YAML) and resolve it into a :class:`Model`.

    Cross-checks beyond the schema, each failing with one line (ModelError) naming the field:
    no name means something else (:func:`_check_names`: selectors, the sites' interfaces and
    networks, ip link keywords); links pair up (each end names the other), switches have no
    address and hosts/routers an address on each interface, never a subnet's network or
    broadcast address, addresses fall in their LAN's subnet, one subnet per L2 domain and
    none overlapping another domain's, no address twice, each route via a neighbour on one
    of the node's subnets; every port of ``qdiscs``/trials/collectors exists and every stack
    is one tc takes, each parameter in its kind's own unit (:func:`netrepro.tc.stack_commands`
    with ``strict``, :data:`netrepro.tc.KIND_KEYWORDS`); sysctl values are integers or
    :data:`SYSCTL_VALUE_RE`; selectors name nodes or kinds; trial
    and traffic ids are unique; traffic runs between nodes with addresses; phases are
    contiguous within the longest trial, with unique names; at most one qdisc_stats
    collector per node; no label is named like a column of the analysis's tables; every
    health threshold has data to judge (:data:`HEALTH_NEEDS`); claims and figures select
    only trials, phases, statistics, subjects and metrics the analysis has for this file
    (:func:`statistics`, :func:`metrics`), with min <= max and figure text that matplotlib
    can draw (:func:`_check_claims`); a figure's facet and hue name a column it has,
    shade_phases has phases, and a phase's label is text matplotlib can draw (:func:`_check_figures`);
    ``metrics`` names only metrics and statistics the analysis has for this file, and
    ``reference_results``' values only its statistics, trials, subjects and phases
    (:func:`_check_quantities`).
    """
    import copy
    check_plain_data(data, path)
    validate_schema(data, path)
    data = copy.deepcopy(data)  # the model shares nothing with the caller's data
    topo = data["topology"]
    networks = topo.get("networks", {})
    _check_names(topo, path)
    nodes: dict[str, dict] = {}
    for n, nd in topo["nodes"].items():
        kind = nd.get("kind", "host")
        itfs = {}
        for ifname, itf in nd["interfaces"].items():
            f = f"topology.nodes.{n}.interfaces.{ifname}"
            addr = itf.get("address")
            if addr:
                _check_address(path, f + ".address", addr)
            if kind == "switch" and addr:
                _fail(path, f + ".address", "a switch bridges its interfaces and has no address; leave it out")
            if kind != "switch" and not addr:
                _fail(path, f + ".address", "expected an address A.B.C.D/N (hosts and routers have one per interface)")
            net = itf.get("network")
            if net is not None:
                if net not in networks:
                    _fail(path, f + ".network", f"unknown network {net!r}; expected one of: {', '.join(networks) or '(none)'}")
                subnet = ipaddress.ip_network(networks[net]["subnet"])
                if addr and ipaddress.ip_interface(addr).ip not in subnet:
                    _fail(path, f + ".address", f"{addr} is outside {net} ({subnet})")
                if addr and subnet.prefixlen < 31 and ipaddress.ip_interface(addr).ip in (
                        subnet.network_address, subnet.broadcast_address):
                    _fail(path, f + ".address", f"{addr} is the network or broadcast address of {net} ({subnet}); "
                                                f"expected a host address")
            itfs[ifname] = {"link": itf.get("link"), "network": net, "address": addr}
        nodes[n] = {"kind": kind, "groups": nd.get("groups", []), "interfaces": itfs, "routes": nd.get("routes", [])}
    links = _resolve_links(topo["nodes"], path)
    for a, b in links:  # store both ends as full ports
        nodes[a.split(":")[0]]["interfaces"][a.split(":")[1]]["link"] = b
        nodes[b.split(":")[0]]["interfaces"][b.split(":")[1]]["link"] = a
    seen: dict[str, str] = {}
    for n, nd in nodes.items():
        for ifname, itf in nd["interfaces"].items():
            if itf["address"]:
                ip = str(ipaddress.ip_interface(itf["address"]).ip)
                if ip in seen:
                    _fail(path, f"topology.nodes.{n}.interfaces.{ifname}.address", f"{ip} is also {seen[ip]}'s")
                seen[ip] = _port(n, ifname)
    for dom in _l2_domains(nodes, links):
        nets = {str(ipaddress.ip_interface(nodes[p.split(":")[0]]["interfaces"][p.split(":")[1]]["address"]).network): p
                for p in sorted(dom) if nodes[p.split(":")[0]]["interfaces"][p.split(":")[1]]["address"]}
        if len(nets) > 1:
            (n1, p1), (n2, p2) = list(nets.items())[:2]
            _fail(path, f"topology.nodes.{p2.split(':')[0]}.interfaces.{p2.split(':')[1]}.address",
                  f"{p1} and {p2} share an L2 domain (links and switches) but not a subnet ({n1}, {n2})")
    _check_subnets_apart(nodes, links, networks, path)
    _check_routes(nodes, path)
    ports = {_port(n, i) for n, nd in nodes.items() for i in nd["interfaces"]}
    names = list(nodes)
    known_sel = set(names) | set(KIND_GROUPS.values()) | {"all"} | {g for nd in nodes.values() for g in nd["groups"]}

    def check_port(field, port):
        if port not in ports:
            _fail(path, field, f"unknown port {port!r}; expected NODE:INTERFACE, one of: {', '.join(sorted(ports))}")

    def check_qdiscs(field, qd):
        for port, stack in qd.items():
            check_port(f"{field}.{port}", port)
            _check_stack(path, f"{field}.{port}", stack)

    base_qdiscs = data.get("qdiscs", {})
    check_qdiscs("qdiscs", base_qdiscs)
    # a router forwards IPv4 (unless the file says otherwise)
    base_sysctls: dict[str, dict] = {n: ({"net.ipv4.ip_forward": "1"} if nodes[n]["kind"] == "router" else {})
                                     for n in names}
    for i, s in enumerate(data.get("sysctls", [])):
        for sel in s["nodes"]:
            if sel not in known_sel:
                _fail(path, f"sysctls[{i}].nodes", f"unknown node or kind {sel!r}; expected one of: {', '.join(sorted(known_sel))}")
        for k, v in s["set"].items():
            _check_sysctl_value(path, f"sysctls[{i}].set.{k}", v)
        for n in select_nodes(nodes, s["nodes"]):
            base_sysctls[n].update({k: str(v) for k, v in s["set"].items()})

    def check_traffic(field, items) -> list[dict]:
        out, ids, iperf_k = [], {}, 0
        for j, it in enumerate(items):
            f = f"{field}[{j}]"
            if it["id"] in ids:
                _fail(path, f + ".id", f"{it['id']!r} is already {field}[{ids[it['id']]}]; expected unique ids")
            ids[it["id"]] = j
            for end in ("from", "to"):
                if it[end] not in nodes:
                    _fail(path, f"{f}.{end}", f"unknown node {it[end]!r}; expected one of: {', '.join(names)}")
                if nodes[it[end]]["kind"] == "switch":
                    _fail(path, f"{f}.{end}", f"{it[end]} is a switch (no address); expected a host or router")
            if it["from"] == it["to"]:
                _fail(path, f + ".to", "expected another node than from")
            full = {**TRAFFIC_DEFAULTS[it["kind"]], **it}
            if it["kind"] == "iperf3":
                full.setdefault("port", IPERF3_BASE_PORT + iperf_k)
                iperf_k += 1
            out.append(full)
        conflict = traffic_conflict(out)
        if conflict:
            _fail(path, field, conflict)
        ports_used = [(x["to"], x["port"]) for x in out if x["kind"] == "iperf3"]
        for j, pu in enumerate(ports_used):
            if ports_used.index(pu) != j:
                _fail(path, field, f"two iperf3 servers on {pu[0]} port {pu[1]}; give one a port")
        return out

    default_traffic = check_traffic("traffic", data["traffic"])
    trials, tids = [], {}
    for i, t in enumerate(data["trials"]):
        f = f"trials[{i}]"
        if t["id"] in tids:
            _fail(path, f + ".id", f"{t['id']!r} is already trials[{tids[t['id']]}]; expected unique trial ids")
        tids[t["id"]] = i
        check_qdiscs(f + ".qdiscs", t.get("qdiscs", {}))
        sysctls = {n: dict(v) for n, v in base_sysctls.items()}
        for n, kv in t.get("sysctls", {}).items():
            if n not in nodes:
                _fail(path, f"{f}.sysctls.{n}", f"unknown node {n!r}; expected one of: {', '.join(names)}")
            for k, v in kv.items():
                if k not in base_sysctls[n]:
                    _fail(path, f"{f}.sysctls.{n}.{k}", "set by this trial but not in the file's sysctls; expected "
                          "its value for the other trials there too (a trial's setting would last into the next)")
                _check_sysctl_value(path, f"{f}.sysctls.{n}.{k}", v)
                sysctls[n][k] = str(v)
        traffic = check_traffic(f + ".traffic", t["traffic"]) if "traffic" in t else default_traffic
        trials.append({"id": t["id"], "description": t.get("description", ""), "labels": t.get("labels", {}),
                       "qdiscs": {**base_qdiscs, **t.get("qdiscs", {})}, "sysctls": sysctls, "traffic": traffic,
                       "duration_s": max(x["start_s"] + item_length_s(x) for x in traffic)})
    # A port that some trial gives a stack has one in every trial ([] = the kernel's default),
    # so that a trial's stack never lasts into the next one.
    in_order = [_port(n, i) for n, nd in nodes.items() for i in nd["interfaces"]]
    stacked = [p for p in in_order if any(p in t["qdiscs"] for t in trials)]
    for t in trials:
        t["qdiscs"] = {p: t["qdiscs"].get(p, []) for p in stacked}
    _check_buckets(path, data, int(data.get("links", {}).get("mtu_bytes", 1500)))
    phases = data.get("phases", [])
    longest = max(t["duration_s"] for t in trials)
    prev = 0.0
    for i, ph in enumerate(phases):
        if ph["start_s"] != prev or ph["end_s"] <= ph["start_s"]:
            _fail(path, f"phases[{i}]", f"expected contiguous phases starting at {prev} s with end_s > start_s")
        prev = ph["end_s"]
    if phases and prev > longest + 1e-9:
        _fail(path, f"phases[{len(phases) - 1}].end_s", f"expected at most the longest trial's {longest} s")
    for i, c in enumerate(data.get("collectors", [])):
        check_port(f"collectors[{i}].at", c["at"])
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
    _check_phases(m, path)
    ts = m.data["time_scale"]
    if "quick" in ts and ts["quick"] < ts["min"]:
        _fail(path, "time_scale.quick", f"expected at least time_scale.min ({ts['min']:g}), got {ts['quick']:g}")
    _check_collectors(m, path)
    _check_labels(m, path)
    _check_item_ids(data, path)
    _check_health(m, path)
    _check_claims(m, path)
    _check_figures(m, path)
    _check_quantities(m, path)
    return m


#: Columns of the analysis's statistics table (analysis/generic.py ``SUMMARY_KEYS``, written as
#: summary.csv), of the columns the repeated, swept and compared analyses add to it
#: (analysis/repetitions.py, analysis/sweep.py, analysis/compare.py: ``repetition``, ``point``,
#: ``run``) and of their table across repetitions (analysis/repetitions.py ``STATS_COLUMNS``).
#: A trial's labels become columns of the same tables, so none may be named like one of these
#: (nor like a sweep factor: :func:`netrepro.sweep.check`).
SUMMARY_COLUMNS = ("trial", "phase", "subject", "statistic", "value")
RESERVED_COLUMNS = SUMMARY_COLUMNS + ("repetition", "point", "run") + (
    "n", "mean", "median", "sd", "ci95_low", "ci95_high", "cv", "min", "max")

#: The statistics analysis/generic.py (``trial_statistics``) computes, by what the subject is.
#: ``iperf3``: of each iperf3 item (its id); ``iperf3_streams``: of an iperf3 item with
#: ``parallel`` > 1 (over its streams); ``ping``: of each ping item; ``ping_base_rtt``: of
#: each ping item when the file has ``base_rtt`` (queueing delay = RTT - base RTT);
#: ``port``: of each ``qdisc_stats`` collector's port; ``port_rate``: of such a port whose
#: stack has a shaper (htb or tbf ``rate_mbit``: :func:`netrepro.tc.shaping_rate_mbit`), ``sent_utilization``
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
#: The samples (tidy.csv metrics) analysis/generic.py (``trial_tidy``) records, by subject:
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
#: The subject of a trial's own statistics (analysis/generic.py).
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
#: :data:`RATE_SCALED_UNITS` unit is multiplied by the run's k (analysis.generic.at_rate_scale);
#: ``none``: judged as written at every k (the author says the value does not follow k).
RATE_SCALINGS = ("proportional", "none")
#: The fields of a claim check that are values of its statistic, by kind, and so follow the
#: rate scale with it (analysis.generic.at_rate_scale); a ratio's ``min``/``max`` are ratios,
#: which k does not change, and an ``all_of`` has its checks'.
RATE_SCALED_FIELDS = {"bound": ("min", "max"), "difference": ("min", "max"), "rise_and_fall": ("tolerance", "min_rise")}
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


def rate_scaled_reads(m: "Model | None", claim: dict) -> list[str]:
    """The statistics a claim compares with a threshold that the rate scale changes
    (:func:`rate_scaled`), in its ``when`` and in every check of its ``check`` (an
    ``all_of``'s too), each once: the selections of the kinds of :data:`RATE_SCALED_FIELDS`
    (not a ``ratio``'s: its thresholds are ratios, which k does not change)."""
    out: list[str] = []

    def walk(ch: dict) -> None:
        if ch["kind"] == "all_of":
            for sub in ch["checks"]:
                walk(sub)
        elif ch["kind"] in RATE_SCALED_FIELDS:
            out.extend(ch[key]["statistic"] for key in ("select", "higher", "lower") if key in ch)

    if "when" in claim:
        out.append(claim["when"]["select"]["statistic"])
    walk(claim["check"])
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
        iperf = [it for it in t["traffic"] if it["kind"] == "iperf3"]
        pings = [it for it in t["traffic"] if it["kind"] == "ping"]
        subj: dict[str, list[str]] = {}
        for it in t["traffic"]:
            if it["kind"] == "iperf3":
                subj[it["id"]] = list(STATISTICS["iperf3"]) + (list(STATISTICS["iperf3_streams"])
                                                              if it.get("parallel", 1) > 1 else [])
            elif it["kind"] == "ping":
                subj[it["id"]] = list(STATISTICS["ping"]) + (list(STATISTICS["ping_base_rtt"]) if base else [])
        for c in m.data["collectors"]:
            stack = t["qdiscs"].get(c["at"], [])
            rate = tc.shaping_rate_mbit(stack)
            subj[c["at"]] = (list(STATISTICS["port"]) + (list(STATISTICS["port_rate"]) if rate else [])
                             + (list(STATISTICS["port_rate_iperf3"]) if rate and iperf else [])
                             + (list(STATISTICS["port_classes"]) if c.get("classes") and stack else []))
        whole = ((list(STATISTICS["trial"]) + (list(STATISTICS["trial_iperf3s"]) if len(iperf) > 1 else []))
                 if iperf else []) + (list(STATISTICS["trial_pings_base_rtt"]) if pings and base else [])
        if whole:
            subj[TRIAL_SUBJECT] = whole
        out[t["id"]] = subj
    return out


def metrics(m: Model) -> dict[str, list[str]]:
    """The samples the analysis records: subject -> metric names (:data:`METRICS`) over all
    trials, a qdisc's own fields as ``<kind>_*`` for each kind in the port's stacks."""
    out: dict[str, list[str]] = {}

    def add(subject, names):
        have = out.setdefault(subject, [])
        have += [x for x in names if x not in have]

    for t in m.trials:
        for it in t["traffic"]:
            if it["kind"] in METRICS:
                add(it["id"], list(METRICS[it["kind"]]) + (list(METRICS["ping_base_rtt"]) if it["kind"] == "ping"
                                                           and m.data.get("base_rtt") else []))
        for c in m.data["collectors"]:
            stack = t["qdiscs"].get(c["at"], [])
            add(c["at"], list(METRICS["port"]) + (list(METRICS["port_classes"]) if c.get("classes") and stack else [])
                + [f"{layer['kind']}_*" for layer in stack])
    return out


def _metric_in(metric: str, names: list[str]) -> bool:
    return any(metric == x or (x.endswith("_*") and metric.startswith(x[:-1]) and len(metric) > len(x) - 1)
               for x in names)


def _check_phases(m: Model, path) -> None:
    """Phase names are unique (a claim or figure names a phase by its name)."""
    names = [p["name"] for p in m.data["phases"]]
    for i, n in enumerate(names):
        if names.index(n) != i:
            _fail(path, f"phases[{i}].name", f"{n!r} already names phases[{names.index(n)}]; expected unique phase names")


def _check_collectors(m: Model, path) -> None:
    """At most one ``qdisc_stats`` collector per node: a node's collector writes one
    qdisc.jsonl and the trial plan keys it by node (:func:`trial_plan`), so a second one
    would silently replace the first."""
    seen: dict[str, int] = {}
    for i, c in enumerate(m.data["collectors"]):
        node = c["at"].split(":")[0]
        if node in seen:
            _fail(path, f"collectors[{i}].at", f"{node} already has a {c['kind']} collector (collectors[{seen[node]}]); "
                                               f"expected one per node (its samples go to the node's one qdisc.jsonl)")
        seen[node] = i


def _check_labels(m: Model, path) -> None:
    """No trial label is named like a column of the analysis's tables (:data:`RESERVED_COLUMNS`)."""
    for i, t in enumerate(m.trials):
        for k in t["labels"]:
            if k in RESERVED_COLUMNS:
                _fail(path, f"trials[{i}].labels.{k}", f"{k!r} names a column of the analysis's statistics tables "
                                                       f"(summary.csv); expected another name, not one of: "
                                                       f"{', '.join(RESERVED_COLUMNS)}")


def _check_text(path, field: str, text: str) -> None:
    r"""A figure's title or line label is text matplotlib draws: where it holds a pair of
    unescaped ``$`` (matplotlib.cbook.is_math_text) it is mathtext, and must parse (else
    drawing the figure stops the analysis). Refused here, with the parser's reason, rather
    than drawn literally: a ``$`` pair is how a file asks for math (``$\mu$s``), and a typo in
    it is the author's to fix. matplotlib is imported only for such text."""
    if "$" not in text:
        return
    from matplotlib import cbook
    if not cbook.is_math_text(text):
        return
    from matplotlib.mathtext import MathTextParser
    try:
        MathTextParser("path").parse(text, dpi=72)
    except ValueError as exc:
        why = [ln for ln in str(exc).splitlines() if ln.strip()][-1:] or [""]
        why = why[0].split("Exception: ", 1)[-1].split("  (at char")[0]
        _fail(path, field, f"matplotlib's mathtext cannot parse {text!r} ({why}); expected valid mathtext between "
                           f"$ signs, or \\$ for a dollar sign")


def _check_item_ids(data: dict, path) -> None:
    """No traffic item is named like the subject of a trial's own statistics (:data:`TRIAL_SUBJECT`)."""
    lists = [("traffic", data["traffic"])] + [(f"trials[{i}].traffic", t["traffic"])
                                              for i, t in enumerate(data["trials"]) if "traffic" in t]
    for field, items in lists:
        for j, it in enumerate(items):
            if it["id"] == TRIAL_SUBJECT:
                _fail(path, f"{field}[{j}].id", f"{TRIAL_SUBJECT!r} names the subject of a trial's own statistics "
                                                f"(total_throughput_mbit, jain_index); expected another id")


#: Bytes of an Ethernet header: a full-size frame is the MTU plus these (IEEE 802.3), and so
#: is a full-sized packet in a qdisc's byte count (the backlog counts ``qdisc_pkt_len(skb)``,
#: skb->len at the egress of an Ethernet device, include/net/sch_generic.h).
ETHERNET_HEADER_BYTES = 14


def _check_buckets(path, data: dict, mtu_bytes: int) -> None:
    """A TBF's bucket (:data:`netrepro.tc.BUCKET_KEYS`) holds at least one full-size frame
    (``links.mtu_bytes`` + 14 B of Ethernet header): tbf_enqueue drops a packet larger than the bucket (sch_tbf.c, unless it
    can segment a GSO packet), so a smaller burst passes no full-size frame at all (tc-tbf(8):
    the burst must be at least the MTU). Checked where the file gives a stack (``qdiscs`` and
    each trial's), so the message names the field written. Raises ModelError."""
    frame = mtu_bytes + ETHERNET_HEADER_BYTES
    where = [("qdiscs", data.get("qdiscs", {}))]
    where += [(f"trials[{i}].qdiscs", t.get("qdiscs", {})) for i, t in enumerate(data["trials"])]
    for field, qd in where:
        for port, stack in qd.items():
            for j, layer in enumerate(stack):
                for key in tc.bucket_keys(layer):
                    v = layer.get(key)
                    if isinstance(v, (int, float)) and not isinstance(v, bool) and v < frame:
                        _fail(path, f"{field}.{port}[{j}].{key}", f"{v:g} B holds no full-size frame; expected at least "
                              f"{frame} B (links.mtu_bytes {mtu_bytes} + {ETHERNET_HEADER_BYTES} B of Ethernet header)")


def _check_claims(m: Model, path) -> None:
    """Every trial, phase, statistic and subject a claim selects, and every trial, phase,
    metric and subject a figure draws, is one the analysis has for this file
    (:func:`statistics`, :func:`metrics`), in every check of an ``all_of`` too; ``min`` <=
    ``max`` (bound, difference, when); a difference or ratio
    selects as many values in ``higher`` as in ``lower`` (they are compared in pairs); a
    ``rise_and_fall`` selects one value per step of its ``order``, which holds its ``peak``;
    figure titles and line labels are text matplotlib can draw (:func:`_check_text`); claim
    ids, and figure ids, are unique (a claim's verdict and a figure's files are named by it)."""
    for section in ("claims", "figures"):
        ids: dict[str, int] = {}
        for i, item in enumerate(m.data[section]):
            if item["id"] in ids:
                _fail(path, f"{section}[{i}].id", f"{item['id']!r} is already {section}[{ids[item['id']]}]'s; "
                                                  f"expected unique {section[:-1]} ids")
            ids[item["id"]] = i
    tids = [t["id"] for t in m.trials]
    phases = [p["name"] for p in m.data["phases"]]
    stats = statistics(m)
    all_stats = sorted({x for subj in stats.values() for names in subj.values() for x in names})
    subjects = list(dict.fromkeys(s for subj in stats.values() for s in subj))

    def check_sel(field, sel):
        for t in sel.get("trials", []):
            if t not in tids:
                _fail(path, field + ".trials", f"unknown trial {t!r}; expected one of: {', '.join(tids)}")
        for p in sel.get("phases", []):
            if p not in phases:
                _fail(path, field + ".phases", f"unknown phase {p!r}; expected one of: {', '.join(phases) or '(no phases)'}")

    def check_stat(field, sel) -> int:
        """The number of values the selection reads (trials x subjects x phases)."""
        check_sel(field, sel)
        st = sel["statistic"]
        if st not in all_stats:
            _fail(path, field + ".statistic", f"unknown statistic {st!r}; the analysis computes, for this file: "
                                              f"{', '.join(all_stats) or '(none)'}")
        for s in sel.get("subjects", []):
            if s not in subjects:
                _fail(path, field + ".subjects", f"unknown subject {s!r}; expected one of: {', '.join(subjects)} "
                                                 f"(traffic item ids, collectors' ports, {TRIAL_SUBJECT})")
        if st in WHOLE_TRIAL_STATISTICS and any(p != "all" for p in sel.get("phases", [])):
            _fail(path, field + ".phases", f"{st} is computed for the whole trial only; expected no phases")
        n = 0
        for t in sel.get("trials") or tids:
            have = stats[t]
            subs = sel.get("subjects") or [s for s, names in have.items() if st in names]
            if not subs:
                _fail(path, field, f"trial {t} computes no {st} (no subject of it has one); "
                                   f"expected a trial whose traffic or collectors give it")
            for s in subs:
                if st not in have.get(s, []):
                    _fail(path, field + ".subjects", f"trial {t} computes no {st} of {s}; its statistics of {s}: "
                                                     f"{', '.join(have.get(s, [])) or '(none: not in this trial)'}")
            n += len(subs)
        return n * len(sel.get("phases") or ["all"])

    def check_range(field, d):
        if "min" in d and "max" in d and d["min"] > d["max"]:
            _fail(path, field + ".min", f"{d['min']} is above max {d['max']}; expected min <= max")

    def check_one(f, ch):
        if ch["kind"] == "all_of":
            for j, sub in enumerate(ch["checks"]):
                check_one(f"{f}.checks[{j}]", sub)
            return
        counts = {key: check_stat(f"{f}.{key}", ch[key]) for key in ("select", "higher", "lower") if key in ch}
        if ch["kind"] in ("bound", "difference"):
            check_range(f, ch)
        if ch["kind"] in ("difference", "ratio") and counts["higher"] != counts["lower"]:
            _fail(path, f + ".lower", f"selects {counts['lower']} values and higher {counts['higher']}; expected the "
                                      f"same number (each value of higher is compared with the one of lower in its place)")
        elif ch["kind"] == "rise_and_fall":
            order = ch["select"].get(ch["order"], [])
            if ch["peak"] not in order:
                _fail(path, f + ".peak", f"{ch['peak']!r} is not in the selection's {ch['order']}; expected one of: "
                                         f"{', '.join(order) or '(none: give select.' + ch['order'] + ')'}")
            if counts["select"] != len(order):
                _fail(path, f + ".select", f"selects {counts['select']} values over {len(order)} {ch['order']}; expected "
                                           f"one value per step of the order (one subject, and one "
                                           f"{'trial' if ch['order'] == 'phases' else 'phase'})")

    scalable = bool((m.data.get("rate_scale") or {}).get("allowed"))
    for i, cl in enumerate(m.data["claims"]):
        if "when" in cl:
            check_stat(f"claims[{i}].when.select", cl["when"]["select"])
            check_range(f"claims[{i}].when", cl["when"])
        check_one(f"claims[{i}].check", cl["check"])
        reads = rate_scaled_reads(m, cl)
        named = ", ".join(f"{st} ({quantity_name(m, st)[1]})" for st in reads)
        if scalable and reads and "rate_scaling" not in cl:
            _fail(path, f"claims[{i}].rate_scaling", f"missing: claim {cl['id']} sets thresholds on {named}, which the "
                                                      "rate scale changes, and the file allows rate scaling; expected "
                                                      "rate_scaling: proportional (its thresholds on them are multiplied "
                                                      "by k) or none (judged as written at every k)")
        if "rate_scaling" in cl and not reads:
            _fail(path, f"claims[{i}].rate_scaling", f"claim {cl['id']} sets no threshold on a value the rate scale "
                                                      f"changes (units {', '.join(RATE_SCALED_UNITS)}); expected no "
                                                      "rate_scaling")
    mets = metrics(m)
    all_mets = list(dict.fromkeys(x for names in mets.values() for x in names))
    for i, fig in enumerate(m.data["figures"]):
        f = f"figures[{i}]"
        check_sel(f, fig)
        if not _metric_in(fig["metric"], all_mets):
            _fail(path, f + ".metric", f"unknown metric {fig['metric']!r}; the analysis records, for this file: "
                                       f"{', '.join(all_mets) or '(none)'}")
        for s in fig.get("subjects", []):
            if s not in mets:
                _fail(path, f + ".subjects", f"unknown subject {s!r}; expected one of: {', '.join(mets)}")
            if not _metric_in(fig["metric"], mets[s]):
                _fail(path, f + ".subjects", f"{s} records no {fig['metric']}; its metrics: {', '.join(mets[s])}")
        if "title" in fig:
            _check_text(path, f + ".title", fig["title"])
        for j, line in enumerate(fig.get("lines", [])):
            _check_text(path, f"{f}.lines[{j}].label", line["label"])


def _check_quantities(m: Model, path) -> None:
    """``metrics`` renames only a metric the analysis records or a statistic it computes for
    this file, in text matplotlib can draw; each value of ``reference_results[i].values``
    names a statistic, trials, subject and phases the analysis has for this file (phase
    ``all`` is the whole trial) and states either a ``value`` (a number, maybe
    ``approximate``) or a ``finding`` (words). Raises ModelError naming the field."""
    tids = [t["id"] for t in m.trials]
    phases = [p["name"] for p in m.data["phases"]]
    stats = statistics(m)
    all_stats = sorted({x for subj in stats.values() for names in subj.values() for x in names})
    all_mets = list(dict.fromkeys(x for names in metrics(m).values() for x in names))
    for name, d in (m.data.get("metrics") or {}).items():
        if name not in all_stats and not _metric_in(name, all_mets):
            _fail(path, f"metrics.{name}", f"unknown metric or statistic {name!r}; the analysis records, for this "
                                           f"file: {', '.join(all_mets + all_stats)}")
        _check_text(path, f"metrics.{name}.label", d["label"])
    for i, ref in enumerate(m.data.get("reference_results") or []):
        for j, v in enumerate(ref.get("values") or []):
            f = f"reference_results[{i}].values[{j}]"
            if ("value" in v) == ("finding" in v):
                _fail(path, f, "expected value (the number the source states) or finding (its words where it states "
                               "none), " + ("not both" if "value" in v else "one of them"))
            if v.get("approximate") is not None and "value" not in v:
                _fail(path, f + ".approximate", "qualifies a value; expected it beside value, not finding")
            if v["statistic"] not in all_stats:
                _fail(path, f + ".statistic", f"unknown statistic {v['statistic']!r}; the analysis computes, for this "
                                              f"file: {', '.join(all_stats) or '(none)'}")
            for t in v["trials"]:
                if t not in tids:
                    _fail(path, f + ".trials", f"unknown trial {t!r}; expected one of: {', '.join(tids)}")
                if v.get("subject") and v["statistic"] not in stats[t].get(v["subject"], []):
                    _fail(path, f + ".subject", f"trial {t} computes no {v['statistic']} of {v['subject']}; its "
                                                f"subjects with it: {', '.join(s for s, n in stats[t].items() if v['statistic'] in n) or '(none)'}")
            for p in v.get("phases", []):
                if p != "all" and p not in phases:
                    _fail(path, f + ".phases", f"unknown phase {p!r}; expected all or one of: {', '.join(phases) or '(no phases)'}")


#: The columns a figure's ``facet`` and ``hue`` may name besides the trials' label keys
#: (analysis/generic_figures.py ``figure``): each trial's id and each line's subject.
FIGURE_COLUMNS = ("trial", "subject")


def _check_figures(m: Model, path) -> None:
    """A figure's ``facet`` and ``hue`` name ``trial``, ``subject`` or a label key some trial
    has; ``shade_phases`` needs the file's phases; a phase's ``label`` is text matplotlib can
    draw (:func:`_check_text`). (Metrics, subjects, trials, titles and lines: :func:`_check_claims`;
    ``rolling``'s window and statistic: the schema.)"""
    keys = list(dict.fromkeys(k for t in m.trials for k in t["labels"]))
    for i, ph in enumerate(m.data["phases"]):
        if "label" in ph:
            _check_text(path, f"phases[{i}].label", ph["label"])
    for i, fig in enumerate(m.data["figures"]):
        for opt in ("facet", "hue"):
            if opt in fig and fig[opt] not in FIGURE_COLUMNS + tuple(keys):
                _fail(path, f"figures[{i}].{opt}", f"unknown column {fig[opt]!r}; expected trial, subject or a label "
                                                   f"key of the trials: {', '.join(keys) or '(the trials have no labels)'}")
        if fig.get("shade_phases") and not m.data["phases"]:
            _fail(path, f"figures[{i}].shade_phases", "the file has no phases to shade; expected top-level "
                                                      "phases: [{name, start_s, end_s}] or no shade_phases")



def stack_buffer(stack: list[dict], mtu_bytes: int) -> tuple[int, float] | None:
    """The buffer of one port's qdisc stack and the rate that drains it: ``(bytes,
    rate_mbit)``, or None when the stack has no shaper or its leaf no explicit limit.

    The rate is the stack's lowest shaping rate (:func:`netrepro.tc.shaping_rate_mbit`). Packets wait in
    the leaf, the last layer (a shaper's ``limit`` makes its own bfifo only when it has no
    child, tc-tbf(8)): its ``limit_bytes``, or its ``limit_packets`` x (``mtu_bytes`` + 14),
    full-sized frames as the qdisc counts them (:data:`ETHERNET_HEADER_BYTES`). A leaf without
    an explicit limit (the kernel's default, e.g. pfifo's txqueuelen) gives None: its size is
    not in the file."""
    rate = tc.shaping_rate_mbit(stack)
    if not rate or not stack:
        return None
    leaf = stack[-1]
    if "limit_bytes" in leaf:
        return int(leaf["limit_bytes"]), rate
    if "limit_packets" in leaf:
        return int(leaf["limit_packets"]) * (int(mtu_bytes) + ETHERNET_HEADER_BYTES), rate
    return None


def path_ports(m: Model, src: str, dst: str) -> list[str]:
    """The ports (``NODE:INTERFACE``) a packet from ``src`` to ``dst``'s address
    (:meth:`Model.address_toward`) leaves by, in order: at each host or router the interface
    on the destination's subnet, else the one toward the ``via`` of its longest matching
    route, then every switch port on the way to the node holding that next-hop address
    (switches bridge: the shortest way through links, LANs and switches).

    Raises:
        ValueError: a node on the way has no route to the destination, the next hop cannot
            be reached through switches, or the routes loop.
    """
    target = ipaddress.ip_address(m.address_toward(src, dst))
    owner = {ipaddress.ip_interface(i["address"]).ip: n
             for n, nd in m.nodes.items() for i in nd["interfaces"].values() if i["address"]}
    ports: list[str] = []
    node, seen = src, set()
    while owner.get(target) != node:
        if node in seen:
            raise ValueError(f"the routes toward {target} loop at {node}")
        seen.add(node)
        mine = {name: ipaddress.ip_interface(i["address"])
                for name, i in m.nodes[node]["interfaces"].items() if i["address"]}
        hop = target
        if not any(target in a.network for a in mine.values()):
            routes = [r for r in m.nodes[node]["routes"] if target in ipaddress.ip_network(r["to"])]
            if not routes:
                raise ValueError(f"{node} has no route to {target}")
            hop = ipaddress.ip_address(max(routes, key=lambda r: ipaddress.ip_network(r["to"]).prefixlen)["via"])
        egress = next((name for name, a in mine.items() if hop in a.network), None)
        if egress is None or hop not in owner:
            raise ValueError(f"{node} reaches no node at {hop}")
        ports += _l2_way(m, _port(node, egress), owner[hop])
        node = owner[hop]
    return ports


def _l2_way(m: Model, start: str, to: str) -> list[str]:
    """Egress ports from port ``start`` through links, LANs and switches to a port of node
    ``to`` (breadth first: the fewest switches). Raises ValueError when there is none."""
    def peers(port: str) -> list[str]:
        n, itf = port.split(":")
        i = m.nodes[n]["interfaces"][itf]
        if i["link"]:
            return [i["link"]]
        return [_port(o, name) for o, nd in m.nodes.items() for name, j in nd["interfaces"].items()
                if j["network"] == i["network"] and (o, name) != (n, itf)]

    queue, visited = [[start]], {start}
    while queue:
        way = queue.pop(0)
        for peer in peers(way[-1]):
            node, itf = peer.split(":")
            if node == to:
                return way
            if m.nodes[node]["kind"] != "switch":
                continue
            for other in m.nodes[node]["interfaces"]:
                out = _port(node, other)
                if other != itf and out not in visited:
                    visited.add(out)
                    queue.append(way + [out])
    raise ValueError(f"no way from {start} to {to} through links and switches")


def ping_buffers(m: Model, trial: dict, item: dict) -> list[tuple[str, int, float]]:
    """The buffers a ping item's probes and replies can wait in: ``[(port, bytes, rate_mbit)]``
    for every port of its path there and back (:func:`path_ports`) whose stack in ``trial``
    has a shaper and a limit (:func:`stack_buffer`). Ports without a shaper drain at the
    link's own speed and are left out. Raises ValueError when the path cannot be found."""
    out = []
    for port in path_ports(m, item["from"], item["to"]) + path_ports(m, item["to"], item["from"]):
        buf = stack_buffer(trial["qdiscs"].get(port, []), m.data["mtu_bytes"])
        if buf:
            out.append((port, *buf))
    return out


def simultaneous_starts(trial: dict) -> list[float]:
    """The start times (s, unscaled) at which two or more traffic items that record their
    start (iperf3, FTP: :data:`STARTED_KINDS`) of ``trial`` start together, sorted."""
    starts: dict[float, int] = {}
    for it in trial["traffic"]:
        if it["kind"] in STARTED_KINDS:
            starts[float(it["start_s"])] = starts.get(float(it["start_s"]), 0) + 1
    return sorted(t for t, k in starts.items() if k >= 2)


#: The traffic items whose clients record when they started: iperf3 (``iperf3-<id>.json.t0``)
#: and FTP (the ``start_epoch_s`` of flows.csv), roles/flow_clients.
STARTED_KINDS = ("iperf3", "ftp")

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


#: The share of a shaped rate that paced streams may ask for together and still be limited by
#: their pacing rather than by the shaper: fq and SO_MAX_PACING_RATE pace IP packets, a shaper
#: counts frames, and a 1500-byte packet is a 1514-byte frame (99.1 %); below 95 % the
#: streams leave the bottleneck a margin for the ACKs' and the pings' share too.
PACING_HEADROOM = 0.95


def pacing_rates(m: Model, trial: dict) -> dict[str, float]:
    """iperf3 item id -> the rate (Mbit/s) at which each of its streams is paced, for the
    trial's paced items: the lower of its ``fq_rate_mbit`` (iperf3 --fq-rate: the socket's
    SO_MAX_PACING_RATE) and the maxrate of a :data:`netrepro.tc.PACING_KIND` qdisc on the
    port its sender sends by (:func:`path_ports`; tc-fq(8): maxrate is per flow)."""
    out = {}
    for it in trial["traffic"]:
        if it["kind"] != "iperf3":
            continue
        rates = [float(it["fq_rate_mbit"])] if it.get("fq_rate_mbit") else []
        try:
            first = path_ports(m, it["from"], it["to"])[:1]
        except ValueError:
            first = []
        rates += [r for r in (tc.pacing_rate_mbit(trial["qdiscs"].get(port, [])) for port in first) if r]
        if rates:
            out[it["id"]] = min(rates)
    return out


def pacing_limited(m: Model, trial: dict) -> dict[str, float]:
    """The trial's paced items (:func:`pacing_rates`) whose pacing, not a shaper, limits
    their rate: every iperf3 item of the trial is paced, and on the path of each the streams
    of all of them together ask for at most :data:`PACING_HEADROOM` of the lowest shaping
    rate (:func:`netrepro.tc.shaping_rate_mbit`) along it (``parallel`` streams each at the
    item's rate). Empty when an unpaced item shares the trial, or the paced ones together
    would fill a shaper (pacing-lab's four pairs at 2.5 of 10 Gbit/s: the bottleneck, not
    the pacing, sets their rates)."""
    rates = pacing_rates(m, trial)
    items = [it for it in trial["traffic"] if it["kind"] == "iperf3"]
    if not rates or any(it["id"] not in rates for it in items):
        return {}
    asked = sum(rates[it["id"]] * it.get("parallel", 1) for it in items)
    out = {}
    for it in items:
        try:
            ports = path_ports(m, it["from"], it["to"])
        except ValueError:
            continue
        shaped = [r for r in (tc.shaping_rate_mbit(trial["qdiscs"].get(p, [])) for p in ports) if r]
        if not shaped or asked <= PACING_HEADROOM * min(shaped):
            out[it["id"]] = rates[it["id"]]
    return out


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


def _check_health(m: Model, path) -> None:
    """Every threshold of ``health:`` has data to judge (:data:`HEALTH_NEEDS`)."""
    have = health_data(m)
    for key in m.data["health"]:
        missing = [HEALTH_DATA[d] for d in HEALTH_NEEDS[key] if d not in have]
        if missing:
            _fail(path, f"health.{key}", f"nothing in this file measures it: expected "
                                         f"{' and '.join(missing)}, or leave this threshold out")


def traffic_conflict(items: list[dict]) -> str | None:
    """What makes a trial's traffic impossible to run, or None: a node with two ping items
    (its collector writes one ping.txt), or FTP items from one sender at different rates
    (vsftpd's anon_max_rate is one per server)."""
    pingers: set[str] = set()
    rates: dict[str, int] = {}
    for x in items:
        if x["kind"] == "ping":
            if x["from"] in pingers:
                return f"{x['from']} has two ping items; expected one per node (its collector writes ping.txt)"
            pingers.add(x["from"])
        elif x["kind"] == "ftp" and rates.setdefault(x["from"], x["max_rate_bytes_per_s"]) != x["max_rate_bytes_per_s"]:
            return (f"FTP items from {x['from']} ask for rates {rates[x['from']]} and {x['max_rate_bytes_per_s']} B/s; "
                    "expected one (vsftpd's anon_max_rate is one per server)")
    return None


def item_length_s(item: dict) -> float:
    """How long a traffic item runs, in seconds from its start: ``duration_s``, plus
    ``omit_s`` for iperf3, whose client runs ``-O`` seconds before its ``-t`` seconds
    (iperf_client_api.c: the test timer is set to duration + omit)."""
    return item["duration_s"] + (item.get("omit_s", 0) if item["kind"] == "iperf3" else 0)


#: The sysctl that sets a node's TCP congestion control (tcp(7), per network namespace since
#: Linux 4.15).
CONGESTION_SYSCTL = "net.ipv4.tcp_congestion_control"


def congestion_controls(m: Model) -> dict[str, list[str]]:
    """node -> the TCP congestion controls (``cubic``, ``bbr``, ``reno``, ...) any trial asks
    of it, sorted: the value of :data:`CONGESTION_SYSCTL` in its sysctls, and the
    ``congestion`` (iperf3 ``-C``) of the iperf3 items it sends. Nodes that ask none are left
    out. The kernel loads ``tcp_<name>`` when either is set (tcp_cong.c
    tcp_ca_find_autoload)."""
    out: dict[str, set[str]] = {}
    for t in m.trials:
        for node, kv in t["sysctls"].items():
            if kv.get(CONGESTION_SYSCTL):
                out.setdefault(node, set()).add(str(kv[CONGESTION_SYSCTL]))
        for it in t["traffic"]:
            if it["kind"] == "iperf3" and it.get("congestion"):
                out.setdefault(it["from"], set()).add(it["congestion"])
    return {n: sorted(v) for n, v in out.items()}


def layer_probes(m: Model, dev: str) -> list[tuple[str, str, str, list[str]]]:
    """``(node, interface, kind, probe argv)`` of every layer of every trial's stacks, in
    trial and port order (repeats included): each layer added alone as root of ``dev`` with
    its parameters (:func:`netrepro.tc.stack_probe_argvs`), so a parameter the kernel or tc
    lacks fails its probe too."""
    out = []
    for t in m.trials:
        for port, stack in t["qdiscs"].items():
            node, itf = port.split(":")
            out += [(node, itf, layer["kind"], argv) for layer, argv in zip(stack, tc.stack_probe_argvs(stack, dev))]
    return out


def stack_vars(model, trial: dict) -> dict[str, list[dict[str, Any]]]:
    """Node -> ``[{"interface", "key", "commands"}]``: the trial's qdisc stacks
    (roles/qdisc_stack), each as :func:`netrepro.tc.stack_commands` builds it with
    :data:`netrepro.tc.DEV` for the device, in the order of the model's ports; ``key`` is
    what roles/interfaces maps to the device (the interface's LAN, else its name). Every
    node has a list (empty: no stack).

    Args:
        model: a :class:`netrepro.model.Model`; trial: one of its ``trials``.
    """
    out: dict[str, list[dict[str, Any]]] = {n: [] for n in model.nodes}
    for port, stack in trial["qdiscs"].items():
        node, itf = port.split(":")
        key = model.nodes[node]["interfaces"][itf]["network"] or itf
        out[node].append({"interface": itf, "key": key, "commands": tc.stack_commands(stack)})
    return out


def trial_plan(m: Model, trial: dict, time_scale: float = 1.0) -> dict:
    """What each node does in one trial, as playbooks/trial.yml's ``trial`` var needs it.

    Returns ``{"ping": {node: {"target", "interval_s"}}, "qdisc_stats": {node: {"interface",
    "network", "interval_s", "classes"}}, "flows": {node: [{"server_address", "flows",
    "start_s", "duration_s", "id"}]}, "ftp_sources": {node: max_rate_bytes_per_s},
    "iperf3": {node: [{"id", "start_s", "to", "address", "item"}]}, "iperf3_servers":
    {node: [port]}, "stacks": {node: [{"interface", "commands"}]}, "sysctls": {node: {...}},
    "duration_s"}``; start offsets and durations are multiplied by ``time_scale``.

    The receiver of an FTP item runs its flows (curl) against the sender's vsftpd; the sender
    of an iperf3 item runs ``iperf3 -c`` toward the receiver's one-off server. A node pings
    with at most one ping item (its collector writes ``ping.txt``).

    Raises:
        ValueError: a node has two ping items, or two FTP items from one sender ask for
            different rates (vsftpd's anon_max_rate is one per server).
    """
    conflict = traffic_conflict(trial["traffic"])
    if conflict:
        raise ValueError(f"trial {trial['id']}: {conflict}")
    k = time_scale
    plan: dict[str, Any] = {"ping": {}, "qdisc_stats": {}, "flows": {}, "ftp_sources": {}, "iperf3": {},
                            "iperf3_servers": {}, "stacks": {n: v for n, v in stack_vars(m, trial).items() if v},
                            "sysctls": trial["sysctls"], "duration_s": round(trial["duration_s"] * k, 3)}
    for it in trial["traffic"]:
        start, dur = round(it["start_s"] * k, 3), round(it["duration_s"] * k, 3)
        if it["kind"] == "ping":
            plan["ping"][it["from"]] = {"target": m.address_toward(it["from"], it["to"]), "interval_s": it["interval_s"],
                                        "id": it["id"]}
        elif it["kind"] == "ftp":
            plan["ftp_sources"][it["from"]] = it["max_rate_bytes_per_s"]
            plan["flows"].setdefault(it["to"], []).append({
                "server_address": m.address_toward(it["to"], it["from"]), "flows": it["flows"],
                "start_s": start, "duration_s": dur, "id": it["id"]})
        elif it["kind"] == "iperf3":
            plan["iperf3"].setdefault(it["from"], []).append({
                "id": it["id"], "start_s": start, "to": it["to"], "address": m.address_toward(it["from"], it["to"]),
                "item": it})
            plan["iperf3_servers"].setdefault(it["to"], []).append(it["port"])
    for c in m.data["collectors"]:
        node, itf = c["at"].split(":")
        plan["qdisc_stats"][node] = {"interface": itf, "network": m.nodes[node]["interfaces"][itf]["network"],
                                     "interval_s": c["interval_s"], "classes": c.get("classes", False)}
    return plan


def claim_time_scale_min(m: Model, claim: dict) -> float:
    """The shortest TIME_SCALE at which ``claim`` keeps its meaning: its own
    ``time_scale_min``, else the file's ``time_scale.min``, else 0 (any)."""
    return float(claim.get("time_scale_min", m.data.get("time_scale", {}).get("min", 0)) or 0)


def time_scale_note(m: Model, time_scale: float) -> str | None:
    """One line saying which claims a run at ``time_scale`` reports not applicable
    (:func:`claim_time_scale_min` above it), or None when every claim applies."""
    short = [c["id"] for c in m.data["claims"] if claim_time_scale_min(m, c) > time_scale]
    if not short:
        return None
    lo = max(claim_time_scale_min(m, c) for c in m.data["claims"])
    every = "every claim" if len(short) == len(m.data["claims"]) else "claims " + ", ".join(short)
    return (f"TIME_SCALE={time_scale:g} is shorter than {m.path}'s time_scale.min ({lo:g}): {every} will be "
            f"reported not applicable (phases too short for the claims' meaning); the verdict can only be inconclusive"
            if len(short) == len(m.data["claims"]) else
            f"TIME_SCALE={time_scale:g} is shorter than the time_scale_min of {every} in {m.path}: they will be "
            f"reported not applicable")


#: The buffer sysctls whose largest value is a byte size (tcp(7): min, default, max).
BUFFER_SYSCTLS = ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")
#: A site runs an experiment whose rates exceed what it forwards at a scale k chosen so that
#: its highest rate is at most this share of the measured forwarding capacity (one iperf3
#: flow through a router, netrepro.sites.local.capacity, which saturates the emulated CPUs). A
#: twentieth, from the nodes' CPU measured in the micro-VM (2 vCPUs under QEMU TCG, capacity
#: 415-519 Mbit/s): 20 Mbit/s kept pie-lab's nodes 43-46 % busy and codel-lab's (two flows,
#: three switches) 51-61 %, while 50 Mbit/s (a tenth, as first chosen) left pacing-lab's
#: 75 % busy, above the 60 % its health checks allow. Checked again by every run's
#: nodes_cpu_busy.
RATE_SCALE_CAPACITY_SHARE = 0.05
#: The smallest rate scale k netrepro runs (rate_scale.min, a claim's rate_scale_min, RATE_SCALE,
#: the ladder of :func:`choose_rate_scale`): rates and byte sizes a thousandth of the file's, a
#: 10 Gbit/s link at 10 Mbit/s. Far below it a rate rounds to 0 bit/s (k = 1e-300 made the
#: simulator divide by it: SIGFPE mid-run); the experiments' own minimums are 0.02-0.05.
RATE_SCALE_FLOOR = 0.001


def highest_rate_mbit(m: Model) -> float:
    """The highest rate any trial's stacks or traffic ask for (Mbit/s; 0 when none)."""
    rates = [float(v) for t in m.trials for st in t["qdiscs"].values() for layer in st
             for k, v in layer.items() if k.endswith("_mbit")]
    rates += [float(it["fq_rate_mbit"]) for t in m.trials for it in t["traffic"] if it.get("fq_rate_mbit")]
    return max(rates, default=0.0)


def rate_scale_option(m: Model, option: str | float | None, name: str = "RATE_SCALE") -> float | None:
    """The rate scale asked for (``option``: RATE_SCALE from the environment, or the command
    line's --rate-scale; ``name`` says which, for the messages) checked against the experiment
    before anything is built: None when unset or empty, else the scale k.

    Raises:
        ValueError: one line naming ``name`` and, when the file forbids it, the file and
            its field: ``option`` is not a number in [:data:`RATE_SCALE_FLOOR`, 1]; or it asks for k < 1 while the
            file's ``rate_scale.allowed`` is not true; or k is below the file's
            ``rate_scale.min``.
    """
    if option is None or (isinstance(option, str) and not option.strip()):
        return None
    try:
        k = float(option)
    except (TypeError, ValueError):
        k = math.nan
    if not (math.isfinite(k) and RATE_SCALE_FLOOR <= k <= 1):
        raise ValueError(f"{name}: expected a number in [{RATE_SCALE_FLOOR:g}, 1], got {option!r}")
    if k == 1:
        return k
    rs = m.data["rate_scale"]
    if not rs.get("allowed"):
        fix = "unset RATE_SCALE or set it to 1" if name == "RATE_SCALE" else f"leave out {name} or give it 1"
        raise ValueError(f"{name}={option}: {m.path}: rate_scale.allowed: the file does not allow scaling its "
                         f"rates (expected rate_scale.allowed: true); {fix}")
    lo = float(rs.get("min", 0) or 0)
    if k < lo:
        raise ValueError(f"{name}={option}: {m.path}: rate_scale.min: {k:g} is below the experiment's "
                         f"rate_scale.min {lo:g}, where its claims lose their meaning")
    return k


def choose_rate_scale(m: Model, capacity_mbit: float | None, option: str | float | None = None,
                      ceiling_mbit: float | None = None, name: str = "RATE_SCALE") -> tuple[float, str]:
    """(k, why): the rate scale to run ``m`` at. ``option`` (RATE_SCALE, or --rate-scale as
    ``name`` says; ``why`` names it) wins; else, when the
    site has a rate ceiling (``ceiling_mbit``: the fastest link a simulator runs in reasonable
    time, netrepro.sites.ns3.site) and the experiment allows scaling, the largest k of the ladder
    below that brings the highest rate to the ceiling (no capacity share: a simulation's
    results do not depend on the machine's speed, only its wall time does); else, when
    the experiment allows scaling (``rate_scale.allowed``) and the site measured its
    forwarding capacity, the largest of 1, 0.5, 0.2, 0.1, 0.05, ... that brings the highest
    rate within :data:`RATE_SCALE_CAPACITY_SHARE` of it, or the file's
    ``rate_scale.capacity_share`` (a value from this fixed ladder, so that machines of one
    kind pick the same k); else 1.

    When the capacity asks for a k below the file's ``rate_scale.min``, the min is used and
    ``why`` says so: running where the claims keep their meaning, and letting the health
    checks judge the site, tells a user more than refusing (a machine of this kind measured
    387-525 Mbit/s from one run to the next).

    Raises:
        ValueError: ``option`` is refused by :func:`rate_scale_option` (not a number in
            (0, 1], scaling not allowed by the file, below ``rate_scale.min``).
    """
    rs = m.data["rate_scale"]
    lo = max(float(rs.get("min", 0) or 0), RATE_SCALE_FLOOR)
    named = (f"rate_scale.min {lo:g}" if float(rs.get("min", 0) or 0) >= RATE_SCALE_FLOOR
             else f"netrepro's smallest rate scale {lo:g} (RATE_SCALE_FLOOR)")
    k_option = rate_scale_option(m, option, name)
    if k_option is not None:
        return k_option, f"{name}={k_option:g}"
    top = highest_rate_mbit(m)
    ladder = [round(m_ * 10.0 ** -e, 12) for e in range(0, 7) for m_ in (1, 0.5, 0.2)]
    if ceiling_mbit and rs.get("allowed") and top > ceiling_mbit:
        k = next((x for x in ladder if top * x <= ceiling_mbit * (1 + 1e-9)), ladder[-1])
        if k < lo:
            return lo, (f"{named}: this site's rate ceiling {ceiling_mbit:g} Mbit/s would need {k:g}, "
                        f"below it; running at {lo:g}, {top * lo:g} Mbit/s at most")
        return k, (f"highest rate {top:g} Mbit/s x {k:g} = {top * k:g} Mbit/s, within this site's rate ceiling "
                   f"{ceiling_mbit:g} Mbit/s")
    share = float(rs.get("capacity_share") or RATE_SCALE_CAPACITY_SHARE)
    if not rs.get("allowed") or not capacity_mbit or top <= capacity_mbit * share:
        return 1.0, ("rates as written" if rs.get("allowed") or not top
                     else "rates as written (the experiment does not allow scaling)")
    k = 1.0
    for k in ladder:
        if top * k <= capacity_mbit * share * (1 + 1e-9):
            break
    if k < lo:
        return lo, (f"{named}: this site forwards {capacity_mbit:.0f} Mbit/s, and {share:.3g} of it would "
                    f"need {k:g}, below it, where the claims lose their meaning; running at {lo:g}, "
                    f"{top * lo:g} Mbit/s at most: the health checks (nodes_cpu_busy) judge whether the site kept up")
    return k, (f"highest rate {top:g} Mbit/s x {k:g} = {top * k:g} Mbit/s, within {share:.3g} of "
               f"this site's forwarding capacity {capacity_mbit:.0f} Mbit/s")


def scale_rates(m: Model, k: float) -> Model:
    """The model with every rate and byte size multiplied by ``k`` (delays, AQM time
    constants, packet counts and durations kept): in each stack, every ``*_mbit``,
    ``*_kbit`` and ``*_bytes`` parameter; each iperf3 item's ``fq_rate_mbit``; and the
    largest value of :data:`BUFFER_SYSCTLS` (not below their default, the middle value).
    A byte size of a stack never goes below one full-size frame (MTU + 14 B of Ethernet
    header): a TBF whose burst is smaller than a frame passes no frame at all (tc-tbf(8):
    burst must be at least the MTU), so Lab 19's 50000 B burst at k = 0.02 is 1514 B, not
    1000 B. ``k`` = 1 returns ``m`` itself."""
    if k == 1:
        return m
    import copy
    d = copy.deepcopy(m.data)
    frame = int(d["mtu_bytes"]) + 14

    def layer(lay: dict) -> dict:
        out = {}
        for key, v in lay.items():
            if key.endswith(("_mbit", "_kbit")) and isinstance(v, (int, float)) and not isinstance(v, bool):
                out[key] = round(v * k, 6)
            elif key.endswith("_bytes") and isinstance(v, (int, float)) and not isinstance(v, bool):
                out[key] = max(min(int(v), frame), int(round(v * k)))
            else:
                out[key] = v
        return out

    for t in d["trials"]:
        t["qdiscs"] = {p: [layer(x) for x in st] for p, st in t["qdiscs"].items()}
        for it in t["traffic"]:
            if it.get("fq_rate_mbit"):
                it["fq_rate_mbit"] = round(it["fq_rate_mbit"] * k, 6)
        for node, kv in t["sysctls"].items():
            for key in BUFFER_SYSCTLS:
                if key in kv:
                    parts = kv[key].split()
                    if len(parts) == 3 and all(x.isdigit() for x in parts):
                        parts[2] = str(max(int(parts[1]), int(round(int(parts[2]) * k))))
                        kv[key] = " ".join(parts)
    d["rate_scale_applied"] = k
    return Model(d, m.path)
