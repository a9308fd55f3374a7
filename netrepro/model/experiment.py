"""The experiment as read: :class:`Model` (the validated, resolved experiment), its error
:class:`ModelError`, node selectors and the defaults every traffic item gets.

Terms: a *port* is ``NODE:INTERFACE`` (``s2:s2-eth2``). A *link* is a cable between two
ports. A *switch* bridges all its interfaces (a Linux bridge: a namespace with a bridge on
the local site, a VM with a bridge on a testbed); a *router* forwards IPv4; a *host* does
neither. An *L2 domain* is a set of ports joined by links and switches (or one LAN of
``topology.networks``): its addresses share one subnet.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

from netrepro.model.claims import Claim
from netrepro.model.figures import Figure
from netrepro.model.records import BaseRtt, Collector, FrozenMap, Link, Node, Phase, Trial


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
    - ``nodes``: name -> ``{"kind", "groups", "interfaces": {ifname: {"link": port | None,
      "network": name | None, "address": "A.B.C.D/N" | None}}, "routes": [...]}`` (read as
      :class:`~netrepro.model.records.Node` records: :attr:`nodes`);
    - ``networks``: LAN name -> ``{"subnet"}``; ``links``: ``[[port, port], ...]`` (each
      cable once, in file order; read as :class:`~netrepro.model.records.Link` records:
      :attr:`links`);
    - ``mtu_bytes`` (default 1500), ``offloads`` (tso/gso/gro: false unless given);
    - ``trials``: ``[{"id", "description", "labels", "qdiscs": {port: stack},
      "sysctls": {node: {name: value}}, "traffic": [item with defaults filled],
      "duration_s"}]``, in run order (read as :class:`~netrepro.model.records.Trial` records:
      :attr:`trials`);
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

    @cached_property
    def nodes(self) -> Mapping[str, Node]:
        """Node name -> :class:`~netrepro.model.records.Node`, in file order."""
        return FrozenMap({n: Node.from_data(n, nd) for n, nd in self.data["nodes"].items()})

    @cached_property
    def trials(self) -> tuple[Trial, ...]:
        """The trials, complete (:class:`~netrepro.model.records.Trial`), in run order."""
        return tuple(Trial.from_data(t) for t in self.data["trials"])

    @property
    def title(self) -> str:
        """The experiment's title (the file's ``title``)."""
        return self.data["title"]

    @property
    def schema_version(self) -> int:
        """The file format's version the experiment was written in."""
        return self.data["schema_version"]

    @property
    def mtu_bytes(self) -> int:
        """Every experiment interface's MTU, bytes (default 1500)."""
        return self.data["mtu_bytes"]

    @property
    def offloads(self) -> Mapping[str, bool]:
        """Segmentation offloads (``tso``, ``gso``, ``gro``) -> on."""
        return self.data["offloads"]

    @property
    def networks(self) -> Mapping[str, dict]:
        """LAN name -> ``{"subnet"}`` (``topology.networks``), in file order."""
        return self.data["networks"]

    @cached_property
    def links(self) -> tuple[Link, ...]:
        """Every cable (:class:`~netrepro.model.records.Link`: its two ports), once each, in
        file order."""
        return tuple(Link.from_data(pair) for pair in self.data["links"])

    @cached_property
    def phases(self) -> tuple[Phase, ...]:
        """The phases every trial has, in file order (none when the file has none)."""
        return tuple(Phase(**p) for p in self.data["phases"])

    @cached_property
    def collectors(self) -> tuple[Collector, ...]:
        """The samplers every trial runs, in file order."""
        return tuple(Collector(**c) for c in self.data["collectors"])

    @cached_property
    def base_rtt(self) -> BaseRtt | None:
        """How the unloaded RTT is measured, or None when the file has no ``base_rtt``."""
        return BaseRtt(**self.data["base_rtt"]) if self.data["base_rtt"] else None

    @property
    def health(self) -> Mapping[str, float]:
        """The file's health thresholds by name (netrepro.model.health.HEALTH_NEEDS's keys)."""
        return self.data["health"]

    @cached_property
    def claims(self) -> tuple[Claim, ...]:
        """The claims the verdict judges, in file order (docs/experiment-format.md)."""
        return tuple(Claim.from_data(c) for c in self.data["claims"])

    @cached_property
    def figures(self) -> tuple[Figure, ...]:
        """The figures the analysis draws, in file order (none: one per metric measured)."""
        return tuple(Figure.from_data(f) for f in self.data["figures"])

    @property
    def rate_scale(self) -> Mapping[str, Any]:
        """The file's ``rate_scale`` (``allowed``, ``min``, ``capacity_share``, ``note``), or {}."""
        return self.data["rate_scale"]

    @property
    def time_scale(self) -> Mapping[str, Any]:
        """The file's ``time_scale`` (``min``, ``quick``, ``note``), or {}."""
        return self.data["time_scale"]

    @property
    def reference(self) -> Mapping[str, Any]:
        """The publication the experiment reproduces (the file's ``reference``), or {}."""
        return self.data.get("reference") or {}

    @property
    def reference_results(self) -> list[dict]:
        """What published runs found (the file's ``reference_results``), or []."""
        return self.data.get("reference_results") or []

    def trial(self, trial_id: str) -> Trial:
        """The trial named ``trial_id``. Raises KeyError."""
        for t in self.trials:
            if t.id == trial_id:
                return t
        raise KeyError(trial_id)

    def select(self, selectors: list[str]) -> list[str]:
        """Node names (file order) of selectors: names, kinds in the plural, groups, or ``all``."""
        return select_nodes(self.data["nodes"], selectors)

    def addresses(self, node: str) -> list[ipaddress.IPv4Interface]:
        """The node's interface addresses, in file order."""
        return [i.ip_interface for i in self.nodes[node].interfaces.values() if i.address]

    def data_plane(self, node: str) -> dict[str, dict]:
        """The node's experiment interfaces by the key every site and role finds them by:
        the LAN's name for an interface on a ``topology.networks`` LAN, else the
        interface's name. Key -> ``{"interface", "address" (bare IPv4) | None, "prefixlen"
        | None, "network" | None, "link" (peer port) | None}``, in file order. A key
        without an address (a switch's port) is found on a node by its MAC or device name.
        """
        out: dict[str, dict] = {}
        for name, i in self.nodes[node].interfaces.items():
            addr, _, plen = (i.address or "").partition("/")
            out[i.network or name] = {"interface": name, "address": addr or None,
                                      "prefixlen": int(plen) if plen else None, "network": i.network, "link": i.link}
        return out

    def segments(self) -> list[dict]:
        """The L2 segments a testbed must wire: one per LAN of ``topology.networks`` (named
        as the LAN) and one per link (named ``link-N``, N its place in ``links`` from 0),
        each ``{"name", "subnet" | None, "members": [(node, key), ...]}`` with the members'
        :meth:`data_plane` keys in file order. A segment's subnet is its LAN's, else the
        subnet of an address on it (None when no member has one: a cable between switches)."""
        segs: list[dict] = []
        for net, nd in self.networks.items():
            members = [(n, k) for n in self.nodes for k, i in self.data_plane(n).items() if i["network"] == net]
            segs.append({"name": net, "subnet": nd["subnet"], "members": members})
        for idx, link in enumerate(self.links):
            addresses = [self.nodes[p.node].interfaces[p.interface].ip_interface for p in link.ports]
            subnet = next((str(a.network) for a in addresses if a), None)
            segs.append({"name": f"link-{idx}", "subnet": subnet, "members": [(p.node, p.interface) for p in link.ports]})
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


def fail(path, field, problem):
    raise ModelError(path, field, problem)


def port_name(node: str, ifname: str) -> str:
    return f"{node}:{ifname}"
