"""A stack of qdiscs on one interface (experiment files, schema_version 2), its layers
:class:`~netrepro.core.tc.layer.Qdisc` records, root first: the ``tc`` command lines that
install it (:func:`stack_commands`), its capability probes, and what its layers mean to the
rest of netrepro (the shapers' rate, the delay, the pacing rate).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Sequence

from netrepro.core.tc.layer import Qdisc
from netrepro.core.tc.params import TcParamError, check_layer
from netrepro.core.tc.qdiscs import DEV, Generic, HtbRoot, Netem, Pie, Red, placement


# --- a stack of qdiscs on one interface (experiment files, schema_version 2) ------------------
#: The kinds a stack layer may be. Classful kinds (netem, htb, tbf) may have a child layer;
#: the others are leaves. netem and tbf take one child on their single class (``parent H:``,
#: tc-netem(8), tc-tbf(8)); htb gets one class ``H:10`` at the layer's rate, the default
#: class, whose leaf the next layer is (tc-htb(8)).
STACK_KINDS = ("netem", "htb", "tbf", "pie", "red", "codel", "fq_codel", "fq", "cake", "pfifo", "bfifo")
STACK_CLASSFUL = ("netem", "htb", "tbf")
#: netem's parameters in a stack layer (tc-netem(8)): the ones the experiments use.
NETEM_KEYS = ("delay_ms", "jitter_ms", "limit_packets")
#: htb's parameters in a stack layer (its one class's rate; burst/cburst: :class:`HtbRoot`).
HTB_KEYS = ("rate_mbit", "burst_bytes")
HANDLE_RE = re.compile(r"^[1-9a-f][0-9a-f]{0,3}:$")

# --- what a stack's layers mean to the rest of netrepro ------------------------------------
#: The kinds that shape a port: a layer's ``rate_mbit`` is the most its port sends (tc-htb(8):
#: its one class's rate and ceil; tc-tbf(8): the bucket's rate).
SHAPERS = ("htb", "tbf")
#: The kind that delays: every packet leaving the port waits a layer's ``delay_ms``
#: (tc-netem(8)).
DELAY_KIND = "netem"
#: The parameters that size a kind's token bucket, bytes, by kind (tc-tbf(8): ``burst``,
#: ``buffer`` or ``maxburst``; sch_tbf.c drops a packet larger than the bucket, so each must
#: hold one full-size frame: :func:`netrepro.model.build` checks it).
BUCKET_KEYS: dict[str, tuple[str, ...]] = {"tbf": ("burst_bytes", "buffer_bytes", "maxburst_bytes")}


def shaping_rate_mbit(stack: Sequence[Qdisc]) -> float | None:
    """The lowest rate (Mbit/s) the shapers of a stack (:data:`SHAPERS`) allow: their
    ``rate_mbit``; None without a shaper. ``stack``: layers as :func:`stack_commands` takes them."""
    rates = [float(p["rate_mbit"]) for p in (layer.params for layer in stack if layer.kind in SHAPERS) if "rate_mbit" in p]
    return min(rates) if rates else None


#: The qdisc that paces each flow of its port to a most rate (tc-fq(8): ``maxrate``, "maximum
#: sending rate of a flow").
PACING_KIND = "fq"


def pacing_rate_mbit(stack: Sequence[Qdisc]) -> float | None:
    """The most rate (Mbit/s) at which a stack's :data:`PACING_KIND` layer paces each flow
    (its ``maxrate_mbit``, or ``maxrate_kbit`` / 1000), None without one."""
    rates = [float(p["maxrate_mbit"]) if "maxrate_mbit" in p else float(p["maxrate_kbit"]) / 1000
             for p in (layer.params for layer in stack if layer.kind == PACING_KIND)
             if "maxrate_mbit" in p or "maxrate_kbit" in p]
    return min(rates) if rates else None


def delay_ms(stack: Sequence[Qdisc]) -> float:
    """The delay (ms) a stack adds to every packet leaving its port: the sum of its
    :data:`DELAY_KIND` layers' ``delay_ms`` (0.0 without one). Raises KeyError for such a
    layer without ``delay_ms`` (:func:`stack_commands` refuses it)."""
    return sum((float(layer.params["delay_ms"]) for layer in stack if layer.kind == DELAY_KIND), 0.0)


def bucket_keys(layer: Qdisc) -> tuple[str, ...]:
    """The parameter names that size ``layer``'s token bucket (:data:`BUCKET_KEYS`; () for a
    kind without one)."""
    return BUCKET_KEYS.get(layer.kind, ())


class StackError(ValueError):
    """A stack tc would not take. ``where`` is ``[i]`` or ``[i].param`` (the layer and key)."""

    def __init__(self, where: str, problem: str):
        self.where, self.problem = where, problem
        super().__init__(f"{where}: {problem}")


def stack_commands(layers: Sequence[Qdisc], dev: str = DEV, strict: bool = False) -> list[list[str]]:
    """The ``tc`` commands (without ``tc``) that install a stack of qdiscs on ``dev``, root first.

    ``layers``: :class:`~netrepro.core.tc.layer.Qdisc` records, the layers the file writes as
    ``[{"kind": "netem", "delay_ms": 20}, {"kind": "tbf", "rate_mbit": 1000,
    "burst_bytes": 500000, "limit_bytes": 26214400}, {"kind": "pie", "target_ms": 22}]``
    (each read by :meth:`Qdisc.from_data <netrepro.core.tc.layer.Qdisc.from_data>`):
    each layer is the child of the one before it, as the lab manuals build them
    (``tc qdisc add dev s1-eth1 root handle 1: netem delay 20ms`` then
    ``tc qdisc add dev s1-eth1 parent 1: handle 2: tbf rate 10gbit ...``). A layer's handle
    is its ``handle`` or ``<i+1>:`` (1: for the root; :meth:`Qdisc.handle_at
    <netrepro.core.tc.layer.Qdisc.handle_at>`). Parameters (its ``params``): netem
    :data:`NETEM_KEYS`, htb :data:`HTB_KEYS`, pie and red as :class:`Pie` and :class:`Red`,
    the others as :class:`Generic` (``rate_mbit: 1000`` -> ``rate 1000mbit``,
    ``limit_bytes`` -> ``limit N``).

    The first command deletes what the device had (``qdisc del dev D root``, whose failure on
    a device with no qdisc of its own the roles ignore), so every trial starts with a fresh
    AQM state and no layer of an earlier stack is left. An empty stack only deletes.

    ``strict`` (how :func:`netrepro.model.build` validates a schema_version 2 file): every
    layer's parameters are first held to :data:`KIND_KEYWORDS` by :func:`check_layer` (a
    unit suffix of the keyword's own unit, values > 0, flags true/false, words of a closed
    set). Without it (a stack already so checked, as a model's are) the builders' own checks
    apply.

    Raises:
        StackError: an unknown kind, a leaf with a layer under it, a bad handle or a
            duplicate one, or a parameter tc would not take (naming the layer and key).
    """
    cmds = [["qdisc", "del", "dev", dev, "root"]]
    parent: str | None = None
    seen: set[str] = set()
    for i, layer in enumerate(layers):
        where = f"[{i}]"
        kind = layer.kind
        if kind not in STACK_KINDS:
            raise StackError(where + ".kind", f"expected one of {', '.join(STACK_KINDS)}, got {kind!r}")
        if i and layers[i - 1].kind not in STACK_CLASSFUL:
            raise StackError(where, f"{layers[i - 1].kind} (layer {i - 1}) is classless: it must be the last layer")
        handle = layer.handle_at(i)
        if not isinstance(handle, str) or not HANDLE_RE.match(handle):
            raise StackError(where + ".handle", f"expected a qdisc handle such as '2:' (hex major, then ':'), got {handle!r}")
        if handle in seen:
            raise StackError(where + ".handle", f"handle {handle} is already used by a layer above")
        seen.add(handle)
        params = dict(layer.params)
        place = placement(dev, parent, handle)
        try:
            if strict:
                check_layer(kind, params)
            if kind == "netem":
                unknown = sorted(set(params) - set(NETEM_KEYS))
                if unknown or "delay_ms" not in params:
                    raise TcParamError(unknown[0] if unknown else "delay_ms",
                                       f"netem takes {', '.join(NETEM_KEYS)} (delay_ms required)")
                q = Netem(**params)
                cmds.append(["qdisc", "replace", *place, *q.qdisc_args()])
                parent = handle
            elif kind == "htb":
                unknown = sorted(set(params) - set(HTB_KEYS))
                if unknown or "rate_mbit" not in params:
                    raise TcParamError(unknown[0] if unknown else "rate_mbit",
                                       f"htb takes {', '.join(HTB_KEYS)} (rate_mbit required)")
                h = HtbRoot(params["rate_mbit"], params.get("burst_bytes"), handle=handle, classid=handle + "10")
                cmds.append(["qdisc", "replace", *place, "htb", "default", h.default_class])
                cmds.append(h.class_argv(dev))
                parent = h.classid
            elif kind == "pie":
                cmds.append(Pie(params, parent=parent, handle=handle).argv(dev))
            elif kind == "red":
                cmds.append(Red(params, parent=parent, handle=handle).argv(dev))
            else:
                cmds.append(Generic(kind, params, parent=parent, handle=handle).argv(dev))
                parent = handle
        except TcParamError as exc:
            raise StackError(f"{where}.{exc.param}" if exc.param else where, exc.problem) from None
        except (ValueError, TypeError, KeyError) as exc:
            raise StackError(where, f"{kind}: {exc}") from None
    return cmds


def stack_probe_argvs(layers: Sequence[Qdisc], dev: str) -> list[list[str]]:
    """One capability probe per layer, in order: ``qdisc add dev D root <kind> ...`` with the
    layer's own parameters (so a parameter the node's tc or kernel lacks fails too);
    roles/kernel_capability runs each on a throwaway device. Raises StackError as
    :func:`stack_commands`."""
    out: list[list[str]] = []
    for layer in layers:
        # the layer alone as a stack: [del, qdisc replace dev D root handle 1: KIND ..., (htb's class)]
        root = stack_commands([dataclasses.replace(layer, handle=None)], dev)[1]
        out.append(["qdisc", "add", "dev", dev, "root", *root[root.index("handle") + 2:]])
    return out
