"""One qdisc's exact ``tc`` command line, testable without any host.

Each class is a small frozen dataclass describing one queueing setting; ``argv(dev)``
returns the command as a list of strings *without* the leading ``tc`` (so
``["qdisc", "replace", "dev", "eth1", "root", "netem", "delay", "100ms", "limit", "1000"]``),
or ``argvs(dev)`` a list of such lists when one setting needs several commands (HTB).
The device is an argument because its name is only known on the node, where it is found
from the node's data-plane address (roles/interfaces). The provisioning extra vars carry
commands built with :data:`DEV` in the device slot; the roles put the real name there.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping

from netrepro.core.tc.params import (FLAG_NEGATIONS, PARAM_MAX, PARAM_SUFFIXES, PARAM_WORD_RE, TcParamError, num,
                                     parse_param_key)

#: Placeholder for the device in commands built before the device name is known.
DEV = "@dev@"

#: Ethernet frame at MTU 1500 (1500 B of IP + 14 B header): the unit of HTB's minimum burst.
FULL_FRAME_BYTES = 1514


def placement(dev: str, parent: str | None, handle: str | None) -> list[str]:
    """``dev D root`` or ``dev D parent P`` followed by ``handle H`` when given."""
    out = ["dev", dev]
    out += ["root"] if parent in (None, "root") else ["parent", parent]
    if handle:
        out += ["handle", handle]
    return out


class QdiscBuilder:
    """Common interface of the qdisc builders (a layer of a stack as the file gives it is a
    :class:`netrepro.core.tc.layer.Qdisc` record; a builder makes its command line).

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
        return ["qdisc", verb, *placement(dev, self.parent, self.handle), *self.qdisc_args()]

    def probe_argv(self, dev: str) -> list[str]:
        """``qdisc add dev <dev> root <kind> <params>`` for a capability probe."""
        return ["qdisc", "add", "dev", dev, "root", *self.qdisc_args()]


@dataclass(frozen=True)
class Netem(QdiscBuilder):
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
class Pie(QdiscBuilder):
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
class Red(QdiscBuilder):
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


@dataclass(frozen=True)
class Generic(QdiscBuilder):
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
        unit = dict(PARAM_SUFFIXES).get(suffix, "")
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
