"""The experiment's typed, immutable records: what the rest of netrepro reads of the model by
attribute (:class:`netrepro.model.experiment.Model` makes them from the validated file).

The JSON schema (``netrepro/schemas/experiment.schema.json``) stays the one description of the
file; these are what it validates into, defaults filled in and references resolved. Field
names follow the file's where Python allows. Their mappings are :class:`FrozenMap`
(netrepro.core.frozen: read-only, and importable from here as before).
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from netrepro.core.frozen import FrozenMap
from netrepro.core.tc import Qdisc


@dataclass(frozen=True)
class Port:
    """An interface of a node as the experiment file names it, ``NODE:INTERFACE``
    (``s2:s2-eth2``): an end of a link, the place of a qdisc stack (a trial's ``qdiscs`` are
    keyed by its :attr:`name`) and of a collector. ``str(port)`` is its :attr:`name`."""

    node: str
    interface: str

    @classmethod
    def parse(cls, text: str) -> Port:
        """The port that ``text`` (``NODE:INTERFACE``) names.

        Raises:
            ValueError: ``text`` is not a node name and an interface name joined by one ``:``.
        """
        node, sep, interface = text.partition(":")
        if not (node and sep and interface) or ":" in interface:
            raise ValueError(f"expected a port NODE:INTERFACE, got {text!r}")
        return cls(node, interface)

    @property
    def name(self) -> str:
        """The port as the file writes it, ``NODE:INTERFACE``."""
        return f"{self.node}:{self.interface}"

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Link:
    """A cable between two ports (two interfaces whose ``link`` names each other), its ends
    ``a`` and ``b`` in the order the model resolved them: ``a`` is the end met first in the
    file's order of nodes and interfaces."""

    a: Port
    b: Port

    @classmethod
    def from_data(cls, ports: Sequence[str]) -> Link:
        """The record of one link of the model's data (``[port, port]``, each ``NODE:INTERFACE``).
        Raises ValueError when it is not two ports (:meth:`Port.parse`)."""
        a, b = ports
        return cls(Port.parse(a), Port.parse(b))

    @property
    def ports(self) -> tuple[Port, Port]:
        """Both ends, ``(a, b)``."""
        return (self.a, self.b)

    @property
    def nodes(self) -> tuple[str, str]:
        """The nodes of both ends, ``(a.node, b.node)``."""
        return (self.a.node, self.b.node)

    def as_data(self) -> list[str]:
        """The link as the model's data (and run.json) write it: ``[a, b]`` as ``NODE:INTERFACE``."""
        return [self.a.name, self.b.name]


@dataclass(frozen=True)
class Interface:
    """One experiment interface of a node (``topology.nodes.<node>.interfaces.<name>``).

    ``address``: ``A.B.C.D/N`` (None on a switch); ``network``: the ``topology.networks`` LAN
    it is on, or None; ``link``: the peer port ``NODE:INTERFACE`` of its cable, or None (an
    interface on a LAN; :attr:`peer` is the same port as a :class:`Port`)."""

    name: str
    address: str | None = None
    network: str | None = None
    link: str | None = None

    @property
    def peer(self) -> Port | None:
        """The port at the other end of its cable, or None (an interface on a LAN)."""
        return Port.parse(self.link) if self.link else None

    @property
    def ip_interface(self) -> ipaddress.IPv4Interface | None:
        """The address as an IPv4 interface (address and prefix), or None."""
        return ipaddress.ip_interface(self.address) if self.address else None

    @property
    def ip(self) -> str | None:
        """The bare IPv4 address (``A.B.C.D``), or None."""
        return self.address.partition("/")[0] if self.address else None


@dataclass(frozen=True)
class Route:
    """A static route of a node: to the subnet ``to`` (``A.B.C.D/N``) via the gateway ``via``
    (``A.B.C.D``), ip-route(8)."""

    to: str
    via: str


@dataclass(frozen=True)
class Node:
    """A node of the topology: ``kind`` ``host``, ``router`` (forwards IPv4) or ``switch`` (a
    bridge over its interfaces, no address); ``groups``: the inventory groups it is in (usable
    as selectors); ``interfaces``: name -> :class:`Interface`, in file order; ``routes``: its
    static routes, in file order."""

    name: str
    kind: str
    groups: tuple[str, ...]
    interfaces: Mapping[str, Interface]
    routes: tuple[Route, ...] = ()

    @classmethod
    def from_data(cls, name: str, data: Mapping[str, Any]) -> Node:
        """The record of one node of the model's data (``{"kind", "groups", "interfaces":
        {name: {"address", "network", "link"}}, "routes": [{"to", "via"}]}``)."""
        itfs = {n: Interface(n, i.get("address"), i.get("network"), i.get("link")) for n, i in data["interfaces"].items()}
        return cls(name, data["kind"], tuple(data.get("groups") or ()), FrozenMap(itfs),
                   tuple(Route(r["to"], r["via"]) for r in data.get("routes") or ()))

    @property
    def is_switch(self) -> bool:
        """A switch bridges its interfaces and has no address."""
        return self.kind == "switch"


@dataclass(frozen=True)
class Phase:
    """A phase of every trial: a window of its schedule that the analysis summarises apart.

    ``start_s`` and ``end_s``: seconds from the trial's common start, at time scale 1;
    ``flows``: how many flows the phase runs (its label in figures; None when the file does not
    count the phase's traffic in flows); ``label``: its text in figures (None: its name)."""

    name: str
    start_s: float
    end_s: float
    flows: int | None = None
    label: str | None = None

    def scaled(self, time_scale: float) -> dict[str, Any]:
        """The phase as run.json records it at ``time_scale`` (start and end multiplied by it):
        ``{"name", "start_s", "end_s"}`` and ``flows`` and ``label`` when the file gives them."""
        out: dict[str, Any] = {"name": self.name, "start_s": self.start_s * time_scale, "end_s": self.end_s * time_scale}
        out.update({k: v for k, v in (("flows", self.flows), ("label", self.label)) if v is not None})
        return out


@dataclass(frozen=True)
class Collector:
    """A sampler of a port's qdisc stack during every trial (``kind`` ``qdisc_stats``, the one
    kind the schema has): ``at`` the port ``NODE:INTERFACE`` as the file writes it (the key of
    its stack in a trial's ``qdiscs``, its subject in the analysis; :attr:`port` is the same
    port as a :class:`Port`), sampled every ``interval_s`` seconds; ``classes``: also its
    classes (``tc -s class show``, fq_codel's buckets)."""

    kind: str
    at: str
    interval_s: float
    classes: bool = False

    @property
    def port(self) -> Port:
        """The sampled port."""
        return Port.parse(self.at)

    @property
    def node(self) -> str:
        """The node of the sampled port."""
        return self.port.node

    @property
    def interface(self) -> str:
        """The sampled port's interface, as the experiment file names it."""
        return self.port.interface


@dataclass(frozen=True)
class BaseRtt:
    """The unloaded RTT every ping item's path is measured at before each trial's traffic, for
    ``duration_s`` seconds at time scale 1; a queueing delay is an RTT minus the ``statistic``
    (``median``, ``min`` or ``mean``) of those samples (the schema's default: median)."""

    duration_s: float
    statistic: str = "median"


#: The fields of a traffic item the file names alike for every kind (``from`` and ``to`` are
#: the record's ``src`` and ``dst``).
_ITEM_COMMON = ("kind", "id", "from", "to", "start_s", "duration_s")
#: The file's name of a record's field where the two differ (the rest are alike), and back.
_ITEM_FILE_NAMES = {"pacing_rate_mbit": "fq_rate_mbit"}
_ITEM_FIELDS = {f: r for r, f in _ITEM_FILE_NAMES.items()}


@dataclass(frozen=True)
class TrafficItem:
    """One traffic item of a trial, its kind's defaults filled (docs/experiment-format.md).

    ``kind``: ``iperf3``, ``ftp`` or ``ping``; ``src`` and ``dst``: the file's ``from`` and
    ``to`` (the sender and the receiver of iperf3 and FTP data, the pinging node and its
    target); ``start_s`` and ``duration_s``: seconds from the trial's common start, at time
    scale 1. The other fields belong to one kind each and are None for the others:
    iperf3's ``parallel`` (-P), ``omit_s`` (-O), ``interval_s`` (-i; ping's interval too),
    ``port`` (-p, from 5201 up when the file gives none), ``congestion`` (-C) and
    ``pacing_rate_mbit`` (the file's ``fq_rate_mbit``: iperf3 --fq-rate, the socket's
    SO_MAX_PACING_RATE, Mbit/s); FTP's ``flows`` and ``max_rate_bytes_per_s``
    (vsftpd anon_max_rate, 0 = unlimited); ping's ``timestamp`` (``sent`` or ``received``)."""

    kind: str
    id: str
    src: str
    dst: str
    start_s: float
    duration_s: float
    parallel: int | None = None
    omit_s: float | None = None
    interval_s: float | None = None
    port: int | None = None
    congestion: str | None = None
    pacing_rate_mbit: float | None = None
    flows: int | None = None
    max_rate_bytes_per_s: int | None = None
    timestamp: str | None = None

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> TrafficItem:
        """The record of one item of the model's data (the file's fields, defaults filled)."""
        return cls(kind=data["kind"], id=data["id"], src=data["from"], dst=data["to"], start_s=data["start_s"],
                   duration_s=data["duration_s"],
                   **{_ITEM_FIELDS.get(k, k): v for k, v in data.items() if k not in _ITEM_COMMON})

    def as_data(self) -> dict[str, Any]:
        """The item as the file writes it (``from``, ``to``; the fields its kind has), for the
        playbooks' variables and the simulator."""
        out: dict[str, Any] = {"kind": self.kind, "id": self.id, "from": self.src, "to": self.dst,
                               "start_s": self.start_s, "duration_s": self.duration_s}
        for name in ("parallel", "omit_s", "interval_s", "port", "congestion", "pacing_rate_mbit", "flows",
                     "max_rate_bytes_per_s", "timestamp"):
            value = getattr(self, name)
            if value is not None:
                out[_ITEM_FILE_NAMES.get(name, name)] = value
        return out

    @property
    def length_s(self) -> float:
        """How long the item runs, in seconds from its start: ``duration_s``, plus ``omit_s``
        for iperf3, whose client runs ``-O`` seconds before its ``-t`` seconds
        (iperf_client_api.c: the test timer is set to duration + omit)."""
        return self.duration_s + (self.omit_s or 0 if self.kind == "iperf3" else 0)


@dataclass(frozen=True)
class Trial:
    """One trial of the experiment, complete: the file's defaults with the trial's own settings
    in their place.

    ``id``; ``description`` ('' when none); ``labels``: factor -> level (``aqm: pie``), for
    figures and claims; ``qdiscs``: port ``NODE:INTERFACE`` (the file's key; :meth:`stack`
    also takes a :class:`Port`) -> its qdisc stack, root first, each layer a
    :class:`netrepro.core.tc.Qdisc` record (kind, handle, parameters; ``()``: the kernel's
    default), on every port any trial stacks; ``sysctls``: node -> sysctl name -> value (text);
    ``traffic``: its :class:`TrafficItem` records in file order; ``duration_s``: the last
    item's end, seconds at time scale 1."""

    id: str
    description: str
    labels: Mapping[str, str]
    qdiscs: Mapping[str, tuple[Qdisc, ...]]
    sysctls: Mapping[str, Mapping[str, str]]
    traffic: tuple[TrafficItem, ...]
    duration_s: float

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Trial:
        """The record of one trial of the model's data."""
        return cls(id=data["id"], description=data.get("description", ""), labels=FrozenMap(data.get("labels") or {}),
                   qdiscs=FrozenMap({p: tuple(map(Qdisc.from_data, st)) for p, st in data["qdiscs"].items()}),
                   sysctls=FrozenMap({n: FrozenMap(kv) for n, kv in (data.get("sysctls") or {}).items()}),
                   traffic=tuple(TrafficItem.from_data(it) for it in data["traffic"]), duration_s=data["duration_s"])

    def stack(self, port: str | Port) -> tuple[Qdisc, ...]:
        """The qdisc stack on ``port`` (``NODE:INTERFACE`` or a :class:`Port`; ``()`` when the
        trial puts none there)."""
        return self.qdiscs.get(str(port), ())

    def items(self, *kinds: str) -> list[TrafficItem]:
        """The traffic items of the given kinds (every item without one), in file order."""
        return [it for it in self.traffic if not kinds or it.kind in kinds]

    def labels_data(self) -> dict[str, str]:
        """The labels as a plain mapping, as run.json records them."""
        return dict(self.labels)

    def sysctls_data(self) -> dict[str, dict[str, str]]:
        """The sysctls as plain mappings, node -> name -> value (the playbooks' variables)."""
        return {n: dict(kv) for n, kv in self.sysctls.items()}

    def qdiscs_data(self) -> dict[str, list[dict[str, Any]]]:
        """The stacks in the file's form, port -> ``[layer, ...]`` (:meth:`Qdisc.as_data
        <netrepro.core.tc.Qdisc.as_data>`), as the model's data holds them."""
        return {p: [layer.as_data() for layer in st] for p, st in self.qdiscs.items()}
