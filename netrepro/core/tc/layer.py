"""One layer of a qdisc stack as a typed, immutable record (:class:`Qdisc`): what an
experiment file writes as ``{kind: ..., handle: ..., <parameter>: <value>, ...}`` (schema
``$defs.layer``), read by attribute. The stack's command lines (:mod:`.stack`) and every
reader of a model's stacks take these records; :meth:`Qdisc.as_data` gives the file's form
back where a playbook variable, a converted file or a test needs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from netrepro.core.frozen import FrozenMap

#: The keys of a layer in the file's form that are not tc parameters: its kind and handle.
LAYER_KEYS = ("kind", "handle")


@dataclass(frozen=True)
class Qdisc:
    """One qdisc of a port's stack, root first (netrepro.core.tc.stack_commands).

    ``kind``: the qdisc (one of :data:`netrepro.core.tc.STACK_KINDS` in a valid stack);
    ``handle``: its handle as tc writes it (``10:``, a hex major then ``:``), or None for the
    default of its place (:meth:`handle_at`); ``params``: its tc parameters in the file's
    order, read-only, each named by its tc keyword with the unit suffix of its value
    (``target_ms``, ``limit_packets``, ``rate_mbit``: netrepro.core.tc.params.UNIT_SUFFIXES)
    -> a number in that unit, true/false for a flag, or a word. A mapping given as ``params``
    is copied into a :class:`~netrepro.core.frozen.FrozenMap`.

    The record reads, it does not check: :func:`netrepro.core.tc.stack_commands` refuses a
    kind, handle or parameter tc would not take.
    """

    kind: str
    handle: str | None = None
    params: Mapping[str, Any] = field(default_factory=FrozenMap)

    def __post_init__(self) -> None:
        if not isinstance(self.params, FrozenMap):
            object.__setattr__(self, "params", FrozenMap(self.params))

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Qdisc:
        """The record of one layer in the file's form: ``kind`` (required), ``handle`` when
        given, every other key a parameter, in the file's order. Raises KeyError without a
        ``kind``."""
        return cls(data["kind"], data.get("handle"), FrozenMap({k: v for k, v in data.items() if k not in LAYER_KEYS}))

    def as_data(self) -> dict[str, Any]:
        """The layer in the file's form: ``{"kind", "handle" (when it has one), parameters...}``,
        in that order (the experiments' own), equal to the mapping it was read from."""
        out: dict[str, Any] = {"kind": self.kind}
        if self.handle is not None:
            out["handle"] = self.handle
        out.update(self.params)
        return out

    def handle_at(self, index: int) -> str:
        """The handle tc gives this layer as layer ``index`` (from 0, the root) of its stack: its
        own ``handle``, else ``<index + 1>:`` with the number in hex (``1:`` for the root)."""
        return self.handle if self.handle is not None else f"{index + 1:x}:"

