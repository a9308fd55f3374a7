"""Build exact ``tc`` command lines, testable without any host.

Each class is a small frozen dataclass describing one queueing setting; ``argv(dev)``
returns the command as a list of strings *without* the leading ``tc`` (so
``["qdisc", "replace", "dev", "eth1", "root", "netem", "delay", "100ms", "limit", "1000"]``),
or ``argvs(dev)`` a list of such lists when one setting needs several commands (HTB).
The device is an argument because its name is only known on the node, where it is found
from the node's data-plane address (roles/interfaces). The provisioning extra vars carry
commands built with :data:`DEV` in the device slot; the roles put the real name there.

Syntax follows the man pages of iproute2 6.1 (Debian 12): tc-netem(8), tc-htb(8),
tc-pie(8), tc-red(8), tc-codel(8), tc-fq_codel(8), tc-fq(8), tc-cake(8), tc-pfifo(8),
tc-bfifo(8), tc-tbf(8). Values (10 Mbit/s, 100 ms, PIE's 20 ms / 30 ms / alpha / beta)
come from the experiment file, which cites the paper (Pan et al., HPSR 2013) for each;
nothing here is specific to one experiment.

Checked against tc 6.1's parser (a keyword it does not know fails with ``What is "x"?``
before anything reaches the kernel): every command built here parses.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any, Mapping

#: Placeholder for the device in commands built before the device name is known.
DEV = "@dev@"

#: Ethernet frame at MTU 1500 (1500 B of IP + 14 B header): the unit of HTB's minimum burst.
FULL_FRAME_BYTES = 1514


def num(x: float | int) -> str:
    """A number as tc wants it: ``10`` not ``10.0``, ``2.5`` kept, no exponent.

    Raises ValueError for negative, NaN or infinite values.
    """
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
        raise ValueError(f"expected a finite number >= 0, got {x!r}")
    if float(x).is_integer():
        return str(int(x))
    return f"{x:.6f}".rstrip("0").rstrip(".")


def _place(dev: str, parent: str | None, handle: str | None) -> list[str]:
    """``dev D root`` or ``dev D parent P`` followed by ``handle H`` when given."""
    out = ["dev", dev]
    out += ["root"] if parent in (None, "root") else ["parent", parent]
    if handle:
        out += ["handle", handle]
    return out


class Qdisc:
    """Common interface of the qdisc builders.

    ``qdisc_args()`` is the part after the placement: the kind and its parameters
    (``["pie", "limit", "134", ...]``); ``argv(dev)`` the whole ``qdisc replace`` command;
    ``probe_argv(dev)`` the same qdisc added as root of a throwaway device, which
    roles/kernel_capability uses to check that kernel and tc both support it.
    """

    kind: str = ""
    parent: str | None = None
    handle: str | None = None

    def qdisc_args(self) -> list[str]:  # pragma: no cover - overridden
        raise NotImplementedError

    def argv(self, dev: str, verb: str = "replace") -> list[str]:
        """``qdisc <verb> dev <dev> (root|parent P) [handle H] <kind> <params>``."""
        return ["qdisc", verb, *_place(dev, self.parent, self.handle), *self.qdisc_args()]

    def probe_argv(self, dev: str) -> list[str]:
        """``qdisc add dev <dev> root <kind> <params>`` for a capability probe."""
        return ["qdisc", "add", "dev", dev, "root", *self.qdisc_args()]


@dataclass(frozen=True)
class Netem(Qdisc):
    """Root netem qdisc adding a constant delay (tc-netem(8)).

    Args:
        delay_ms: one-way delay added to every packet leaving the device, milliseconds.
        limit_packets: netem's queue length in packets (default 1000 in the kernel); size it
            to rate x delay or netem drops packets (iproute2#56).
        jitter_ms: optional delay variation, milliseconds (``delay 100ms 5ms``).
    """

    delay_ms: float
    limit_packets: int = 1000
    jitter_ms: float | None = None
    kind: str = field(default="netem", init=False)

    def qdisc_args(self) -> list[str]:
        out = ["netem", "delay", num(self.delay_ms) + "ms"]
        if self.jitter_ms:
            out.append(num(self.jitter_ms) + "ms")
        return out + ["limit", str(int(self.limit_packets))]


@dataclass(frozen=True)
class HtbRoot:
    """The bottleneck: a root HTB qdisc whose only class 1:10 is shaped to ``rate_mbit``.

    Two commands (tc-htb(8)): ``qdisc replace dev D root handle 1: htb default 10`` (all
    unclassified traffic goes to class 1:10, so no filter is needed) and ``class replace
    dev D parent 1: classid 1:10 htb rate R ceil R burst B cburst B``. The AQM under test
    becomes the leaf qdisc of 1:10 (:class:`Pie`, :class:`Red` with ``parent="1:10"``).

    ceil equals rate, so the class never borrows above it. burst/cburst (bytes) is how much
    the class may send back-to-back at line rate when it has tokens saved. Under a saturated
    bottleneck tokens never build up, so its only job is to absorb the timer slack of the
    host: with too small a burst HTB cannot reach its rate when its watchdog fires late
    (tc-htb(8) computes a minimum of rate/HZ + MTU, about 2.9 KB at 10 Mbit/s, which is
    fragile on a virtualised or emulated host). We take 10 ms worth of the rate, but at
    least 10 full-size frames (15140 B): at 10 Mbit/s 15140 B is 12 ms, a small fraction of
    the AQM's 200 KB buffer and below PIE's 20 ms target.

    Args:
        rate_mbit: shaping rate in Mbit/s (10^6 bit/s; tc's ``mbit``).
        burst_bytes: override of the burst and cburst size in bytes.
    """

    rate_mbit: float
    burst_bytes: int | None = None
    handle: str = "1:"
    classid: str = "1:10"

    @property
    def burst(self) -> int:
        """burst and cburst in bytes (see the class docstring for the choice)."""
        if self.burst_bytes is not None:
            return int(self.burst_bytes)
        ten_ms = math.ceil(self.rate_mbit * 1e6 / 8 * 0.010)
        return max(10 * FULL_FRAME_BYTES, ten_ms)

    @property
    def default_class(self) -> str:
        """The minor number of the default class, in hex as tc takes it (``10``)."""
        return self.classid.split(":")[1]

    def qdisc_argv(self, dev: str) -> list[str]:
        """``qdisc replace dev D root handle 1: htb default 10``."""
        return ["qdisc", "replace", "dev", dev, "root", "handle", self.handle, "htb",
                "default", self.default_class]

    def class_argv(self, dev: str) -> list[str]:
        """``class replace dev D parent 1: classid 1:10 htb rate R ceil R burst B cburst B``."""
        rate = num(self.rate_mbit) + "mbit"
        return ["class", "replace", "dev", dev, "parent", self.handle, "classid", self.classid,
                "htb", "rate", rate, "ceil", rate, "burst", str(self.burst), "cburst", str(self.burst)]

    def argvs(self, dev: str) -> list[list[str]]:
        """Both commands, qdisc first."""
        return [self.qdisc_argv(dev), self.class_argv(dev)]

    def probe_argv(self, dev: str) -> list[str]:
        """``qdisc add dev D root htb`` for a capability probe."""
        return ["qdisc", "add", "dev", dev, "root", "htb"]


@dataclass(frozen=True)
class Pie(Qdisc):
    """PIE leaf qdisc (tc-pie(8); Linux sch_pie, iproute2 tc/q_pie.c).

    Args:
        params: the spec's PIE parameters: ``target_ms`` (delay_ref, paper: 20 ms),
            ``tupdate_ms`` (T_update, paper: 30 ms), ``alpha`` and ``beta`` in units of 1/16
            Hz as sch_pie takes them (paper 0.125 and 1.25 Hz -> 2 and 20), ``ecn`` (bool,
            ``ecn``/``noecn``), ``bytemode`` (bool), ``dq_rate_estimator`` (bool: true
            restores the paper's departure-rate estimator; the keyword came with the
            2020 PIE rework (Linux and iproute2 5.x; tc 6.1 parses it, older tc fails with
            ``What is "dq_rate_estimator"?``, which roles/kernel_capability's probe catches);
            when absent or false the kernel default, timestamp-based estimation, is kept),
            optional ``limit_packets``.
        limit_packets: queue limit in packets (tc-pie's ``limit`` is in packets), used when
            ``params`` has none: the spec's buffer_bytes / mtu_bytes.
        parent, handle: placement (default: leaf of HTB class 1:10, handle 10:).
    Raises:
        ValueError: unknown parameter name (caught when the argv is built).
    """

    params: Mapping[str, Any]
    limit_packets: int | None = None
    parent: str | None = "1:10"
    handle: str | None = "10:"
    kind: str = field(default="pie", init=False)

    KNOWN = ("target_ms", "tupdate_ms", "alpha", "beta", "limit_packets", "ecn", "bytemode",
             "dq_rate_estimator")

    def qdisc_args(self) -> list[str]:
        p = dict(self.params)
        unknown = sorted(set(p) - set(self.KNOWN))
        if unknown:
            raise ValueError(f"pie: unknown parameter(s) {', '.join(unknown)}; expected: {', '.join(self.KNOWN)}")
        out = ["pie"]
        limit = p.get("limit_packets", self.limit_packets)
        if limit is not None:
            out += ["limit", str(int(limit))]
        if "target_ms" in p:
            out += ["target", num(p["target_ms"]) + "ms"]
        if "tupdate_ms" in p:
            out += ["tupdate", num(p["tupdate_ms"]) + "ms"]
        for key in ("alpha", "beta"):
            if key in p:
                out += [key, str(int(p[key]))]
        if "ecn" in p:
            out.append("ecn" if p["ecn"] else "noecn")
        if "bytemode" in p:
            out.append("bytemode" if p["bytemode"] else "nobytemode")
        if p.get("dq_rate_estimator"):
            out.append("dq_rate_estimator")
        return out


@dataclass(frozen=True)
class Red(Qdisc):
    """RED leaf qdisc (tc-red(8)).

    Args:
        params: the spec's RED parameters, units in the names: ``limit_bytes`` (hard queue
            limit), ``min_bytes`` / ``max_bytes`` (average-queue thresholds),
            ``avpkt_bytes``, ``burst_packets`` (sets the averaging weight; tc-red(8):
            at least (2*min+max)/(3*avpkt)), ``probability`` (max_p), ``bandwidth_mbit``
            (only used to age the average while idle; RED does not shape), flags ``ecn``,
            ``adaptive``, ``harddrop`` (emitted only when true).
        parent, handle: placement (default: leaf of HTB class 1:10, handle 10:).
    Raises:
        ValueError: min < max < limit does not hold, or an unknown parameter.
    """

    params: Mapping[str, Any]
    parent: str | None = "1:10"
    handle: str | None = "10:"
    kind: str = field(default="red", init=False)

    KNOWN = ("limit_bytes", "min_bytes", "max_bytes", "avpkt_bytes", "burst_packets",
             "probability", "bandwidth_mbit", "ecn", "adaptive", "harddrop")

    def qdisc_args(self) -> list[str]:
        p = dict(self.params)
        unknown = sorted(set(p) - set(self.KNOWN))
        if unknown:
            raise ValueError(f"red: unknown parameter(s) {', '.join(unknown)}; expected: {', '.join(self.KNOWN)}")
        if not p["min_bytes"] < p["max_bytes"] < p["limit_bytes"]:
            raise ValueError("red: expected min_bytes < max_bytes < limit_bytes")
        out = ["red", "limit", str(int(p["limit_bytes"])), "min", str(int(p["min_bytes"])),
               "max", str(int(p["max_bytes"])), "avpkt", str(int(p["avpkt_bytes"])),
               "burst", str(int(p["burst_packets"])), "probability", num(p["probability"]),
               "bandwidth", num(p["bandwidth_mbit"]) + "mbit"]
        for flag in ("ecn", "adaptive", "harddrop"):
            if p.get(flag):
                out.append(flag)
        return out


#: Unit suffixes of generic parameter names and how tc writes the value.
_SUFFIXES = (("_ms", "ms"), ("_us", "us"), ("_mbit", "mbit"), ("_kbit", "kbit"),
             ("_bytes", ""), ("_packets", ""))

#: A generic parameter name as the spec may write it: a tc keyword (lower case, digits,
#: ``_`` and ``-`` as in cake's ``split-gso``), optionally followed by a unit suffix.
PARAM_KEY_RE = re.compile(r"^[a-z][a-z0-9_-]{0,39}$")
#: A string value of a generic parameter: one tc word, a number with tc's unit (``32k``,
#: ``5ms``, ``1.5mbit``) or a keyword/mask (``0xff``); never spaces, quotes, ``;`` or ``$``.
PARAM_WORD_RE = re.compile(r"^[A-Za-z0-9_.]{1,64}$")
#: The largest number a generic parameter takes: tc's qdisc parameters are 32-bit.
PARAM_MAX = 2**32 - 1

#: tc keywords of the qdiscs built by :class:`Generic`, as iproute2 6.1 (Debian 12) parses
#: them: ``"value"`` takes a value (``target 5ms``), ``"flag"`` is a bare word. Sources: the
#: usage text of ``tc qdisc add ... <kind> help`` and tc-codel(8), tc-fq_codel(8), tc-fq(8),
#: tc-cake(8), tc-pfifo(8), tc-bfifo(8), tc-tbf(8); tests/test_tc.py checks that tc 6.1
#: parses every one. fq_codel's ``ce_threshold_selector VALUE/MASK`` is left out (its
#: value is not one word).
GENERIC_KEYWORDS: dict[str, dict[str, str]] = {
    "codel": {"limit": "value", "target": "value", "interval": "value", "ce_threshold": "value",
              "ecn": "flag", "noecn": "flag"},
    "fq_codel": {"limit": "value", "flows": "value", "memory_limit": "value", "target": "value",
                 "interval": "value", "quantum": "value", "ce_threshold": "value",
                 "drop_batch": "value", "ecn": "flag", "noecn": "flag"},
    "fq": {"limit": "value", "flow_limit": "value", "quantum": "value", "initial_quantum": "value",
           "maxrate": "value", "buckets": "value", "refill_delay": "value",
           "low_rate_threshold": "value", "orphan_mask": "value", "timer_slack": "value",
           "ce_threshold": "value", "horizon": "value", "pacing": "flag", "nopacing": "flag",
           "horizon_cap": "flag", "horizon_drop": "flag"},
    "cake": {"bandwidth": "value", "rtt": "value", "memlimit": "value", "fwmark": "value",
             "overhead": "value", "mpu": "value",
             **{k: "flag" for k in (
                 "unlimited", "autorate-ingress", "datacentre", "lan", "metro", "regional",
                 "internet", "oceanic", "satellite", "interplanetary", "besteffort", "precedence",
                 "diffserv8", "diffserv4", "diffserv3", "flowblind", "srchost", "dsthost", "hosts",
                 "flows", "dual-srchost", "dual-dsthost", "triple-isolate", "nat", "nonat", "wash",
                 "nowash", "split-gso", "no-split-gso", "ack-filter", "ack-filter-aggressive",
                 "no-ack-filter", "ptm", "atm", "noatm", "conservative", "raw", "ingress", "egress",
                 "ipoa-vcmux", "ipoa-llcsnap", "bridged-vcmux", "bridged-llcsnap", "bridged-ptm",
                 "pppoa-vcmux", "pppoa-llc", "pppoe-vcmux", "pppoe-llcsnap", "pppoe-ptm",
                 "via-ethernet", "ethernet", "ether-vlan", "docsis")}},
    "pfifo": {"limit": "value"},
    "bfifo": {"limit": "value"},
    "tbf": {"limit": "value", "burst": "value", "buffer": "value", "maxburst": "value",
            "mtu": "value", "minburst": "value", "mpu": "value", "rate": "value",
            "peakrate": "value", "latency": "value", "overhead": "value", "linklayer": "value"},
}

#: The form tc gives a flag set to ``false`` (tc-codel(8), tc-fq_codel(8): ``noecn``;
#: tc-fq(8): ``nopacing``; tc-cake(8): ``nonat``, ``nowash``, ``no-split-gso``,
#: ``no-ack-filter``, ``noatm``). A flag not listed here has no negative form.
FLAG_NEGATIONS = {"ecn": "noecn", "pacing": "nopacing", "nat": "nonat", "wash": "nowash",
                  "split-gso": "no-split-gso", "ack-filter": "no-ack-filter", "atm": "noatm"}


class TcParamError(ValueError):
    """A qdisc parameter tc would not take. ``param`` is the spec's key (None: the whole set)."""

    def __init__(self, param: str | None, problem: str):
        self.param, self.problem = param, problem
        super().__init__(f"{param}: {problem}" if param else problem)


@dataclass(frozen=True)
class Generic(Qdisc):
    """Any other qdisc (codel, fq_codel, fq, pfifo, bfifo, cake, tbf): params become ``key value``.

    A name ending in a unit loses it and the value gets tc's unit: ``target_ms: 5`` ->
    ``target 5ms``, ``interval_us`` -> ``us``, ``*_mbit``/``*_kbit`` -> ``mbit``/``kbit``,
    ``limit_packets: 1000`` / ``memory_limit_bytes`` -> plain numbers. ``true`` gives the
    bare keyword (``ecn``), ``false`` the ``no`` form (:data:`FLAG_NEGATIONS`: ``noecn``,
    tc-codel(8), tc-fq_codel(8); ``nopacing`` in tc-fq(8)). Strings are passed as they are.
    Parameters are emitted in the order given.

    Every parameter is checked before anything is built, so nothing but tc words reaches a
    node: the key must match :data:`PARAM_KEY_RE` and, for a kind of
    :data:`GENERIC_KEYWORDS`, name one of its keywords (after the unit suffix is removed);
    a number must be finite, 0 .. :data:`PARAM_MAX`; a string one word of
    :data:`PARAM_WORD_RE` and not for a key with a unit suffix (write a number there);
    a flag takes only true/false, a keyword with a value never a boolean.

    Raises:
        TcParamError: (from ``qdisc_args``/``argv``) naming the offending key.
    """

    kind: str
    params: Mapping[str, Any] = field(default_factory=dict)
    parent: str | None = "1:10"
    handle: str | None = "10:"

    def _word(self, key: Any, value: Any) -> list[str]:
        """The tc words of one parameter (see the class docstring); TcParamError if invalid."""
        if not isinstance(key, str) or not PARAM_KEY_RE.match(key):
            raise TcParamError(str(key), "expected a tc keyword of lower-case letters, digits, '_' or '-'")
        name, unit, suffix = key, "", ""
        for sfx, tc_unit in _SUFFIXES:
            if key.endswith(sfx):
                name, unit, suffix = key[: -len(sfx)], tc_unit, sfx
                break
        known = GENERIC_KEYWORDS.get(self.kind)
        if known is not None and name not in known:
            raise TcParamError(key, f"{name!r} is not a parameter of tc-{self.kind}(8); expected one of: "
                                    f"{', '.join(sorted(known))}")
        how = known.get(name) if known else None
        if isinstance(value, bool):
            if how == "value" or suffix:
                raise TcParamError(key, f"expected a number or a tc word for {name}, got {value!r}")
            if value:
                return [name]
            if name in FLAG_NEGATIONS or known is None:
                return [FLAG_NEGATIONS.get(name, "no" + name)]
            raise TcParamError(key, f"tc has no negative form of {name}; leave it out instead of false")
        if how == "flag":
            raise TcParamError(key, f"expected true or false (tc's {name} is a bare keyword), got {value!r}")
        if isinstance(value, (int, float)):
            if not (math.isfinite(value) and 0 <= value <= PARAM_MAX):
                raise TcParamError(key, f"expected a number from 0 to {PARAM_MAX}, got {value!r}")
            return [name, num(value) + unit]
        if isinstance(value, str):
            if suffix:
                raise TcParamError(key, f"expected a number (the unit is in the name, {suffix}), got {value!r}")
            if not PARAM_WORD_RE.match(value):
                raise TcParamError(key, f"expected one tc word of letters, digits, '_' or '.', got {value!r}")
            return [name, value]
        raise TcParamError(key, f"expected a number, a tc word or true/false, got {value!r}")

    def qdisc_args(self) -> list[str]:
        out = [self.kind]
        for key, value in self.params.items():
            out += self._word(key, value)
        return out


def aqm_qdisc(kind: str, params: Mapping[str, Any], limit_packets: int | None = None,
              parent: str | None = "1:10", handle: str | None = "10:") -> Qdisc:
    """The builder for an AQM of the spec (``aqms.<name>``): Pie, Red or Generic.

    ``limit_packets`` is PIE's default limit (ignored by the others).
    """
    if kind == "pie":
        return Pie(params, limit_packets=limit_packets, parent=parent, handle=handle)
    if kind == "red":
        return Red(params, parent=parent, handle=handle)
    return Generic(kind, params, parent=parent, handle=handle)


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


class StackError(ValueError):
    """A stack tc would not take. ``where`` is ``[i]`` or ``[i].param`` (the layer and key)."""

    def __init__(self, where: str, problem: str):
        self.where, self.problem = where, problem
        super().__init__(f"{where}: {problem}")


def stack_commands(layers: list[Mapping[str, Any]], dev: str = DEV) -> list[list[str]]:
    """The ``tc`` commands (without ``tc``) that install a stack of qdiscs on ``dev``, root first.

    ``layers``: ``[{"kind": "netem", "delay_ms": 20}, {"kind": "tbf", "rate_mbit": 1000,
    "burst_bytes": 500000, "limit_bytes": 26214400}, {"kind": "pie", "target_ms": 22}]``:
    each layer is the child of the one before it, as the lab manuals build them
    (``tc qdisc add dev s1-eth1 root handle 1: netem delay 20ms`` then
    ``tc qdisc add dev s1-eth1 parent 1: handle 2: tbf rate 10gbit ...``). A layer's handle
    is its ``handle`` key or ``<i+1>:`` (1: for the root). Parameters: netem
    :data:`NETEM_KEYS`, htb :data:`HTB_KEYS`, pie and red as :class:`Pie` and :class:`Red`,
    the others as :class:`Generic` (``rate_mbit: 1000`` -> ``rate 1000mbit``,
    ``limit_bytes`` -> ``limit N``).

    The first command deletes what the device had (``qdisc del dev D root``, whose failure on
    a device with no qdisc of its own the roles ignore), so every trial starts with a fresh
    AQM state and no layer of an earlier stack is left. An empty stack only deletes.

    Raises:
        StackError: an unknown kind, a leaf with a layer under it, a bad handle or a
            duplicate one, or a parameter tc would not take (naming the layer and key).
    """
    cmds = [["qdisc", "del", "dev", dev, "root"]]
    parent: str | None = None
    seen: set[str] = set()
    for i, layer in enumerate(layers):
        where = f"[{i}]"
        kind = layer.get("kind")
        if kind not in STACK_KINDS:
            raise StackError(where + ".kind", f"expected one of {', '.join(STACK_KINDS)}, got {kind!r}")
        if i and layers[i - 1]["kind"] not in STACK_CLASSFUL:
            raise StackError(where, f"{layers[i - 1]['kind']} (layer {i - 1}) is classless: it must be the last layer")
        handle = layer.get("handle", f"{i + 1:x}:")
        if not isinstance(handle, str) or not HANDLE_RE.match(handle):
            raise StackError(where + ".handle", f"expected a qdisc handle such as '2:' (hex major, then ':'), got {handle!r}")
        if handle in seen:
            raise StackError(where + ".handle", f"handle {handle} is already used by a layer above")
        seen.add(handle)
        params = {k: v for k, v in layer.items() if k not in ("kind", "handle")}
        place = _place(dev, parent, handle)
        try:
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


def stack_probe_argvs(layers: list[Mapping[str, Any]], dev: str) -> list[list[str]]:
    """One capability probe per layer, in order: ``qdisc add dev D root <kind> ...`` with the
    layer's own parameters (so a parameter the node's tc or kernel lacks fails too);
    roles/kernel_capability runs each on a throwaway device. Raises StackError as
    :func:`stack_commands`."""
    out: list[list[str]] = []
    for layer in layers:
        # the layer alone as a stack: [del, qdisc replace dev D root handle 1: KIND ..., (htb's class)]
        root = stack_commands([{k: v for k, v in layer.items() if k != "handle"}], dev)[1]
        out.append(["qdisc", "add", "dev", dev, "root", *root[root.index("handle") + 2:]])
    return out
