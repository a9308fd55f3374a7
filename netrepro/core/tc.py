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

from netrepro.core.errors import show_value

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
        ValueError: unknown parameter name (caught when the argv is built); TcParamError (a
            ValueError) for a flag that is not true/false.
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
        for flag in ("ecn", "bytemode", "dq_rate_estimator"):
            if flag in p and not isinstance(p[flag], bool):  # "no" is text, not false
                raise TcParamError(flag, f"expected true or false (pie's {flag} is a flag), got {p[flag]!r}")
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
        ValueError: min < max < limit does not hold, or an unknown parameter; TcParamError (a
            ValueError) for a flag that is not true/false.
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
            if flag in p and not isinstance(p[flag], bool):  # "no" is text, not false
                raise TcParamError(flag, f"expected true or false (red's {flag} is a flag), got {p[flag]!r}")
            if p.get(flag):
                out.append(flag)
        return out


#: Unit suffixes of parameter names and how tc writes the value.
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

# --- the unit of every keyword, per qdisc kind -----------------------------------------------
#: Units a tc keyword's value may have, and the name suffixes that say each: a time (tc
#: writes ``5ms``/``5us``; tc_core's times are 32-bit microseconds, so at most an hour), a size
#: in bytes, a count of packets, a rate (``mbit``/``kbit``); the others take no suffix: a
#: plain number (alpha, flows, a mask), a fraction in (0, 1] (RED's probability), a flag
#: (``true``/``false``: the bare keyword or its negative form) and a word of a closed set.
UNIT_SUFFIXES = {"time": ("_ms", "_us"), "bytes": ("_bytes",), "packets": ("_packets",),
                 "rate": ("_mbit", "_kbit"), "number": (), "fraction": (), "flag": (), "word": ()}
#: How a refusal names a unit (``bfifo's limit is in bytes``).
UNIT_PHRASE = {"time": "a time", "bytes": "in bytes", "packets": "in packets", "rate": "a rate",
                "number": "a plain number", "fraction": "a fraction in (0, 1]", "flag": "a flag (true or false)",
                "word": "a word"}
#: The largest value of a unit with a suffix, in the suffix's own unit: times below an hour
#: (3.6e9 us, within tc's 32-bit microseconds), rates up to 100 Gbit/s (the schema's
#: rate_mbit), sizes and counts 32-bit.
_UNIT_MAX = {"_ms": 3_600_000, "_us": 3_600_000_000, "_mbit": 100_000, "_kbit": 100_000_000,
             "_bytes": PARAM_MAX, "_packets": PARAM_MAX}


@dataclass(frozen=True)
class Keyword:
    """One tc keyword of a qdisc kind: its ``unit`` (a key of :data:`UNIT_SUFFIXES`), the
    suffixes the spec may give it (default: all of its unit's; a builder that takes one form
    only narrows them, as netem's ``delay_ms``), the range of a plain number (``lo`` ..
    ``hi``, inclusive), the ``choices`` of a word, whether a layer must give it, and whether
    a value with a unit may be 0 (``zero``; else it is > 0)."""

    unit: str
    suffixes: tuple[str, ...] | None = None
    lo: float = 0
    hi: float = PARAM_MAX
    choices: tuple[str, ...] = ()
    required: bool = False
    zero: bool = False

    @property
    def allowed_suffixes(self) -> tuple[str, ...]:
        return UNIT_SUFFIXES[self.unit] if self.suffixes is None else self.suffixes


def _kw(unit: str, *suffixes: str, **kw: Any) -> Keyword:
    return Keyword(unit, suffixes or None, **kw)


_FLAG = Keyword("flag")
#: cake's bare keywords (tc-cake(8): bandwidth and RTT presets, diffserv modes, flow
#: isolation, NAT, wash, GSO splitting, ACK filter, overhead compensation presets).
_CAKE_FLAGS = (
    "unlimited", "autorate-ingress", "datacentre", "lan", "metro", "regional", "internet", "oceanic",
    "satellite", "interplanetary", "besteffort", "precedence", "diffserv8", "diffserv4", "diffserv3",
    "flowblind", "srchost", "dsthost", "hosts", "flows", "dual-srchost", "dual-dsthost", "triple-isolate",
    "nat", "nonat", "wash", "nowash", "split-gso", "no-split-gso", "ack-filter", "ack-filter-aggressive",
    "no-ack-filter", "ptm", "atm", "noatm", "conservative", "raw", "ingress", "egress", "ipoa-vcmux",
    "ipoa-llcsnap", "bridged-vcmux", "bridged-llcsnap", "bridged-ptm", "pppoa-vcmux", "pppoa-llc",
    "pppoe-vcmux", "pppoe-llcsnap", "pppoe-ptm", "via-ethernet", "ethernet", "ether-vlan", "docsis")

#: Every keyword a stack layer of each kind may set, with its unit, as iproute2 6.1 (Debian 12)
#: parses them. Sources: tc-netem(8) (``delay`` and jitter are times, ``limit`` packets),
#: tc-htb(8) (``rate``, ``burst`` in bytes), tc-tbf(8) (``limit``/``burst``/``buffer``/
#: ``mtu``/``mpu`` in bytes, ``rate``/``peakrate``, ``latency`` a time), tc-pie(8) (``limit``
#: in packets, ``target``/``tupdate`` times, ``alpha``/``beta`` 0..32 in 1/16 Hz:
#: sch_pie.c refuses more), tc-red(8) (``limit``/``min``/``max``/``avpkt`` bytes, ``burst``
#: packets, ``probability`` a fraction, ``bandwidth`` a rate), tc-codel(8) and tc-fq_codel(8)
#: (``limit`` packets, ``target``/``interval``/``ce_threshold`` times, ``memory_limit`` and
#: ``quantum`` bytes, ``flows`` 1..65536 buckets, ``drop_batch`` packets), tc-fq(8)
#: (``limit``/``flow_limit`` packets, ``quantum``/``initial_quantum`` bytes, ``maxrate``/
#: ``low_rate_threshold`` rates, ``refill_delay``/``timer_slack``/``ce_threshold``/``horizon``
#: times, ``buckets`` a power of two up to 2^18), tc-cake(8) (``bandwidth`` a rate, ``rtt`` a
#: time, ``memlimit``/``mpu`` bytes, ``overhead`` 0..256 bytes of framing, ``fwmark`` a mask),
#: tc-pfifo(8) (``limit`` in packets) and tc-bfifo(8) (``limit`` in bytes). A gain, rate,
#: size, count or time of zero means nothing a stack needs (or the kernel's default, which
#: leaving the key out gives), so every value with a unit is > 0 (but netem's delay: 0 adds none).
#: ``netem`` and ``htb`` take the suffixes their builders use (:class:`Netem`, :class:`HtbRoot`),
#: ``pie`` and ``red`` those of :class:`Pie` and :class:`Red`.
KIND_KEYWORDS: dict[str, dict[str, Keyword]] = {
    "netem": {"delay": _kw("time", "_ms", required=True, zero=True), "jitter": _kw("time", "_ms"),
              "limit": _kw("packets")},
    "htb": {"rate": _kw("rate", "_mbit", required=True), "burst": _kw("bytes")},
    "tbf": {"limit": _kw("bytes"), "burst": _kw("bytes"), "buffer": _kw("bytes"), "maxburst": _kw("bytes"),
            "mtu": _kw("bytes"), "minburst": _kw("bytes"), "mpu": _kw("bytes"), "rate": _kw("rate", required=True),
            "peakrate": _kw("rate"), "latency": _kw("time"), "overhead": _kw("number", hi=256),
            "linklayer": _kw("word", choices=("ethernet", "atm", "adsl"))},
    "pie": {"limit": _kw("packets"), "target": _kw("time", "_ms"), "tupdate": _kw("time", "_ms"),
            "alpha": _kw("number", lo=1, hi=32), "beta": _kw("number", lo=1, hi=32),
            "ecn": _FLAG, "bytemode": _FLAG, "dq_rate_estimator": _FLAG},
    "red": {"limit": _kw("bytes", required=True), "min": _kw("bytes", required=True),
            "max": _kw("bytes", required=True), "avpkt": _kw("bytes", required=True),
            "burst": _kw("packets", required=True), "probability": _kw("fraction", required=True),
            "bandwidth": _kw("rate", "_mbit", required=True), "ecn": _FLAG, "adaptive": _FLAG, "harddrop": _FLAG},
    "codel": {"limit": _kw("packets"), "target": _kw("time"), "interval": _kw("time"),
              "ce_threshold": _kw("time"), "ecn": _FLAG, "noecn": _FLAG},
    "fq_codel": {"limit": _kw("packets"), "flows": _kw("number", lo=1, hi=65536), "memory_limit": _kw("bytes"),
                 "target": _kw("time"), "interval": _kw("time"), "quantum": _kw("bytes"),
                 "ce_threshold": _kw("time"), "drop_batch": _kw("packets"), "ecn": _FLAG, "noecn": _FLAG},
    "fq": {"limit": _kw("packets"), "flow_limit": _kw("packets"), "quantum": _kw("bytes"),
           "initial_quantum": _kw("bytes"), "maxrate": _kw("rate"), "buckets": _kw("number", lo=1, hi=2**18),
           "refill_delay": _kw("time"), "low_rate_threshold": _kw("rate"), "orphan_mask": _kw("number"),
           "timer_slack": _kw("time"), "ce_threshold": _kw("time"), "horizon": _kw("time"),
           "pacing": _FLAG, "nopacing": _FLAG, "horizon_cap": _FLAG, "horizon_drop": _FLAG},
    "cake": {"bandwidth": _kw("rate"), "rtt": _kw("time"), "memlimit": _kw("bytes"), "fwmark": _kw("number"),
             "overhead": _kw("number", hi=256), "mpu": _kw("bytes"), **{k: _FLAG for k in _CAKE_FLAGS}},
    "pfifo": {"limit": _kw("packets")},
    "bfifo": {"limit": _kw("bytes")},
}

#: Keywords of which a layer must give one (tc-tbf(8): tbf needs its bucket size, given as
#: ``burst``, ``buffer`` or ``maxburst``, and ``limit`` or ``latency``; q_tbf.c refuses a
#: tbf without them).
REQUIRED_ONE_OF: dict[str, tuple[tuple[str, ...], ...]] = {
    "tbf": (("burst", "buffer", "maxburst"), ("limit", "latency")),
}

#: tc keywords of the qdiscs built by :class:`Generic` (every kind of :data:`KIND_KEYWORDS`
#: but netem, htb, pie and red, which have builders of their own): ``"value"`` takes a value
#: (``target 5ms``), ``"flag"`` is a bare word; tests/test_tc.py checks that tc 6.1 parses
#: every one. fq_codel's ``ce_threshold_selector VALUE/MASK`` is left out (its value is not
#: one word).
GENERIC_KEYWORDS: dict[str, dict[str, str]] = {
    kind: {k: "flag" if kw.unit == "flag" else "value" for k, kw in kws.items()}
    for kind, kws in KIND_KEYWORDS.items() if kind not in ("netem", "htb", "pie", "red")}

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


def parse_param_key(kind: str, key: Any) -> tuple[str, str, Keyword | None]:
    """``(keyword, suffix, Keyword)`` of a parameter name of a qdisc ``kind``: ``limit_bytes``
    of bfifo -> ``("limit", "_bytes", Keyword("bytes"))``. The name is the tc keyword,
    optionally followed by a unit suffix (:data:`UNIT_SUFFIXES`); a kind without a table in
    :data:`KIND_KEYWORDS` gives None as its Keyword (any keyword of :data:`PARAM_KEY_RE`).

    Raises:
        TcParamError: the name is not a keyword of the kind, or its suffix is not a unit of
            the keyword's (``bfifo's limit is in bytes; expected limit_bytes``).
    """
    if not isinstance(key, str) or not PARAM_KEY_RE.match(key):
        raise TcParamError(str(key), "expected a tc keyword of lower-case letters, digits, '_' or '-'")
    table = KIND_KEYWORDS.get(kind)
    suffix = next((sfx for sfx, _ in _SUFFIXES if key.endswith(sfx)), "")
    name = key[: -len(suffix)] if suffix else key
    if table is None:
        return name, suffix, None
    if key in table and (not suffix or name not in table):  # a keyword that ends like a suffix
        name, suffix = key, ""
    kw = table.get(name)
    if kw is None:
        raise TcParamError(key, f"{name!r} is not a parameter of tc-{kind}(8); expected one of: "
                                f"{', '.join(sorted(table))}")
    if suffix and suffix not in kw.allowed_suffixes:
        raise TcParamError(key, f"{kind}'s {name} is {UNIT_PHRASE[kw.unit]}; expected {_spellings(name, kw)}")
    return name, suffix, kw


def _spellings(name: str, kw: Keyword) -> str:
    """How the spec writes a keyword: ``limit_bytes``, ``target_ms or target_us``, ``ecn: true or false``."""
    if kw.unit == "flag":
        return f"{name}: true or false"
    if kw.unit == "word":
        return f"{name}: one of {', '.join(kw.choices)}"
    forms = [name + sfx for sfx in kw.allowed_suffixes] or [name]
    return " or ".join(forms)


def check_param(kind: str, key: Any, value: Any) -> None:
    """Check one parameter of a stack layer of ``kind`` (schema_version 2) against
    :data:`KIND_KEYWORDS`: the name is the keyword with a suffix of its own unit (none for a
    plain number, a fraction, a flag or a word); a value with a unit is a number > 0 and
    at most the unit's largest (:data:`_UNIT_MAX`; 0 too for a keyword with ``zero``, netem's
    delay: no delay added, netem as a plain queue); a plain number
    within the keyword's ``lo`` .. ``hi``; a fraction in (0, 1]; a flag ``true``/``false``
    only (never text: ``ecn: "no"`` is refused, not read as true); a word one of its choices.

    Raises:
        TcParamError: naming ``key`` and what was expected.
    """
    name, suffix, kw = parse_param_key(kind, key)
    if kw is None:  # pragma: no cover - every stack kind has a table
        raise TcParamError(key, f"no keyword table for {kind}")
    unit = kw.unit
    if unit == "flag":
        if not isinstance(value, bool):
            raise TcParamError(key, f"expected true or false ({kind}'s {name} is a flag), got {value!r}")
        return
    if unit == "word":
        if not isinstance(value, str) or value not in kw.choices:
            raise TcParamError(key, f"expected one of {', '.join(kw.choices)}, got {value!r}")
        return
    if UNIT_SUFFIXES[unit] and not suffix:
        raise TcParamError(key, f"{kind}'s {name} is {UNIT_PHRASE[unit]}; expected {_spellings(name, kw)}")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TcParamError(key, f"expected a number ({UNIT_PHRASE[unit]}"
                                + (f", the unit is in the name, {suffix}" if suffix else "") + f"), got {value!r}")
    if suffix:
        top = _UNIT_MAX[suffix]
        if not ((value >= 0 if kw.zero else value > 0) and value <= top):
            raise TcParamError(key, f"expected a number {'>= 0' if kw.zero else '> 0'} and <= {top}, "
                                    f"got {show_value(value)}")
        if unit in ("bytes", "packets") and not float(value).is_integer():
            raise TcParamError(key, f"expected a whole number of {unit}, got {value!r}")
    elif unit == "fraction":
        if not 0 < value <= 1:
            raise TcParamError(key, f"expected a fraction > 0 and <= 1, got {value!r}")
    elif not (kw.lo <= value <= kw.hi and float(value).is_integer()):
        raise TcParamError(key, f"expected a whole number from {num(kw.lo)} to {num(kw.hi)}, got {value!r}")


def check_layer(kind: str, params: Mapping[str, Any]) -> None:
    """Check every parameter of a stack layer (:func:`check_param`), that no keyword is given
    twice (``target_ms`` and ``target_us``), and that the keywords the kind needs are given
    (netem's delay_ms, htb's rate_mbit, RED's thresholds, tbf's rate, and one of each group
    of :data:`REQUIRED_ONE_OF`).

    Raises:
        TcParamError: naming the first bad or missing key.
    """
    given: dict[str, str] = {}
    for key, value in params.items():
        check_param(kind, key, value)
        name = parse_param_key(kind, key)[0]
        if name in given:
            raise TcParamError(key, f"{kind}'s {name} is already given as {given[name]}; expected it once")
        given[name] = key
    for name, kw in KIND_KEYWORDS[kind].items():
        if kw.required and name not in given:
            raise TcParamError(_spellings(name, kw).split(" or ")[0],
                               f"{kind} needs its {name}; expected {_spellings(name, kw)}")
    table = KIND_KEYWORDS[kind]
    for group in REQUIRED_ONE_OF.get(kind, ()):
        if not any(name in given for name in group):
            forms = " or ".join(_spellings(name, table[name]) for name in group)
            raise TcParamError(None, f"{kind} needs one of its {', '.join(group)}; expected {forms}")


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
    :data:`KIND_KEYWORDS`, name one of its keywords, with a unit suffix only of the
    keyword's own unit (:func:`parse_param_key`: ``limit_packets`` on bfifo, whose limit is
    in bytes, is refused); a number must be finite, 0 .. :data:`PARAM_MAX`; a string one
    word of :data:`PARAM_WORD_RE` (of the keyword's choices, for a word keyword such as
    tbf's linklayer) and not for a key with a unit suffix (write a number there); a flag
    takes only true/false, a keyword with a value never a boolean. (A stack layer of a
    schema_version 2 file is held to more: :func:`check_param`.)

    Raises:
        TcParamError: (from ``qdisc_args``/``argv``) naming the offending key.
    """

    kind: str
    params: Mapping[str, Any] = field(default_factory=dict)
    parent: str | None = "1:10"
    handle: str | None = "10:"

    def _word(self, key: Any, value: Any) -> list[str]:
        """The tc words of one parameter (see the class docstring); TcParamError if invalid."""
        name, suffix, kw = parse_param_key(self.kind, key)
        unit = dict(_SUFFIXES).get(suffix, "")
        how = kw.unit if kw else None
        if isinstance(value, bool):
            if (how is not None and how != "flag") or suffix:
                raise TcParamError(key, f"expected a number or a tc word for {name}, got {value!r}")
            if value:
                return [name]
            if name in FLAG_NEGATIONS or kw is None:
                return [FLAG_NEGATIONS.get(name, "no" + name)]
            raise TcParamError(key, f"tc has no negative form of {name}; leave it out instead of false")
        if how == "flag":
            raise TcParamError(key, f"expected true or false (tc's {name} is a bare keyword), got {value!r}")
        if how == "word" and value not in kw.choices:
            raise TcParamError(key, f"expected one of {', '.join(kw.choices)}, got {value!r}")
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


#: The AQM kinds whose limit an experiment file of the earlier format (schema_version 1) took
#: from its bottleneck's ``buffer_bytes`` when the AQM's parameters gave none: PIE's, whose
#: limit is in packets (tc-pie(8)), as buffer_bytes / mtu_bytes rounded up
#: (:mod:`netrepro.experiment.migrate` keeps that meaning).
BUFFER_LIMITED_KINDS = ("pie",)


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


def shaping_rate_mbit(stack: list[Mapping[str, Any]]) -> float | None:
    """The lowest rate (Mbit/s) the shapers of a stack (:data:`SHAPERS`) allow, None without a
    shaper. ``stack``: layers as :func:`stack_commands` takes them."""
    rates = [float(layer["rate_mbit"]) for layer in stack if layer["kind"] in SHAPERS and "rate_mbit" in layer]
    return min(rates) if rates else None


#: The qdisc that paces each flow of its port to a most rate (tc-fq(8): ``maxrate``, "maximum
#: sending rate of a flow").
PACING_KIND = "fq"


def pacing_rate_mbit(stack: list[Mapping[str, Any]]) -> float | None:
    """The most rate (Mbit/s) at which a stack's :data:`PACING_KIND` layer paces each flow
    (its ``maxrate_mbit``, or ``maxrate_kbit`` / 1000), None without one."""
    rates = [float(layer["maxrate_mbit"]) if "maxrate_mbit" in layer else float(layer["maxrate_kbit"]) / 1000
             for layer in stack if layer["kind"] == PACING_KIND and ("maxrate_mbit" in layer or "maxrate_kbit" in layer)]
    return min(rates) if rates else None


def delay_ms(stack: list[Mapping[str, Any]]) -> float:
    """The delay (ms) a stack adds to every packet leaving its port: the sum of its
    :data:`DELAY_KIND` layers' ``delay_ms`` (0.0 without one)."""
    return sum((float(layer["delay_ms"]) for layer in stack if layer["kind"] == DELAY_KIND), 0.0)


def bucket_keys(layer: Mapping[str, Any]) -> tuple[str, ...]:
    """The parameter names that size ``layer``'s token bucket (:data:`BUCKET_KEYS`; () for a
    kind without one)."""
    kind = layer.get("kind")
    return BUCKET_KEYS.get(kind, ()) if isinstance(kind, str) else ()


class StackError(ValueError):
    """A stack tc would not take. ``where`` is ``[i]`` or ``[i].param`` (the layer and key)."""

    def __init__(self, where: str, problem: str):
        self.where, self.problem = where, problem
        super().__init__(f"{where}: {problem}")


def stack_commands(layers: list[Mapping[str, Any]], dev: str = DEV, strict: bool = False) -> list[list[str]]:
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
