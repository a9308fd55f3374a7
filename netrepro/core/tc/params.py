"""The parameters of the qdisc kinds: every tc keyword of each kind with its unit
(:data:`KIND_KEYWORDS`), how a parameter name says its unit, and the strict check of a stack
layer's parameters (:func:`check_param`, :func:`check_layer`) that refuses what tc would not
take, naming the offending key (:class:`TcParamError`).

Syntax follows the man pages of iproute2 6.1 (Debian 12), cited at each table.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Mapping

from netrepro.core.errors import show_value


def num(x: float | int) -> str:
    """A number as tc wants it: ``10`` not ``10.0``, ``2.5`` kept, no exponent.

    Raises ValueError for negative, NaN or infinite values.
    """
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
        raise ValueError(f"expected a finite number >= 0, got {x!r}")
    if float(x).is_integer():
        return str(int(x))
    return f"{x:.6f}".rstrip("0").rstrip(".")


#: Unit suffixes of parameter names and how tc writes the value.
PARAM_SUFFIXES = (("_ms", "ms"), ("_us", "us"), ("_mbit", "mbit"), ("_kbit", "kbit"),
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
    suffix = next((sfx for sfx, _ in PARAM_SUFFIXES if key.endswith(sfx)), "")
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

