"""A read-only mapping for immutable records: :class:`FrozenMap`, what the model's records
(netrepro.model.records) and a qdisc stack's layers (netrepro.core.tc) hold their mappings in.
"""

from __future__ import annotations

from typing import Iterator, Mapping, TypeVar

K = TypeVar("K")
V = TypeVar("V")


class FrozenMap(Mapping[K, V]):
    """A read-only mapping in insertion order (the file's order) that copies and pickles like a
    dict (a record's mapping must survive ``copy.deepcopy`` and the process pool of the ns3
    site's trials, which ``types.MappingProxyType`` does not). It equals any mapping of the
    same items (a dict among them); setting or deleting a key raises TypeError."""

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
