"""The experiment's typed, immutable records: what the rest of netrepro reads of the model by
attribute (:class:`netrepro.model.experiment.Model` makes them from the validated file).

The JSON schema (``netrepro/schemas/experiment.schema.json``) stays the one description of the
file; these are what it validates into, defaults filled in and references resolved. Field
names follow the file's where Python allows.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class FrozenMap(Mapping[K, V]):
    """A read-only mapping in insertion order (the file's order) that copies and pickles like a
    dict (a record's mapping must survive ``copy.deepcopy`` and the process pool of the ns3
    site's trials, which ``types.MappingProxyType`` does not)."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[K, V] | None = None):
        self._items = dict(items or {})

    def __getitem__(self, key: K) -> V:
        return self._items[key]

    def __iter__(self) -> Iterator[K]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __repr__(self) -> str:
        return f"FrozenMap({self._items!r})"

    def __reduce__(self):
        return (type(self), (self._items,))


@dataclass(frozen=True)
class Interface:
    """One experiment interface of a node (``topology.nodes.<node>.interfaces.<name>``).

    ``address``: ``A.B.C.D/N`` (None on a switch); ``network``: the ``topology.networks`` LAN
    it is on, or None; ``link``: the peer port ``NODE:INTERFACE`` of its cable, or None (an
    interface on a LAN)."""

    name: str
    address: str | None = None
    network: str | None = None
    link: str | None = None

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

    def ports(self) -> list[str]:
        """The node's ports ``NODE:INTERFACE``, in file order."""
        return [f"{self.name}:{n}" for n in self.interfaces]


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
    kind the schema has): ``at`` the port ``NODE:INTERFACE``, sampled every ``interval_s``
    seconds; ``classes``: also its classes (``tc -s class show``, fq_codel's buckets)."""

    kind: str
    at: str
    interval_s: float
    classes: bool = False

    @property
    def node(self) -> str:
        """The node of the sampled port."""
        return self.at.split(":")[0]

    @property
    def interface(self) -> str:
        """The sampled port's interface, as the experiment file names it."""
        return self.at.split(":")[1]


@dataclass(frozen=True)
class BaseRtt:
    """The unloaded RTT every ping item's path is measured at before each trial's traffic, for
    ``duration_s`` seconds at time scale 1; a queueing delay is an RTT minus the ``statistic``
    (``median``, ``min`` or ``mean``) of those samples (the schema's default: median)."""

    duration_s: float
    statistic: str = "median"
