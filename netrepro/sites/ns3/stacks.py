"""A Linux qdisc stack as ns-3 queue discs: what netrepro-sim (the ``ns3`` site,
:mod:`netrepro.sites.ns3.site`) builds of a port's stack (the layers of
:func:`netrepro.core.tc.stack_commands`), and what it cannot.

A qdisc builder, beside :mod:`netrepro.core.tc`: with it, the only module that knows qdisc kinds
by name. Per port: a shaper (:data:`SHAPERS`) at the stack's root makes its ``rate_mbit`` the
rate of the port's link (:func:`root_shaper`); the stack's last layer becomes the port's queue
disc (:data:`QUEUE_DISCS`, :func:`queue_disc`), unless it only delays (:func:`queue_layer`),
whose delay (:func:`netrepro.core.tc.delay_ms`) becomes the link's. What has no model here is named
by :func:`stack_problems`. Sources, cited where each is used: tc-pie(8), tc-red(8),
tc-pfifo(8), tc-tbf(8), ip-link(8), the kernel's sch_pie, sch_red (include/net/red.h) and
sch_htb, iproute2's tc/tc_red.c and tc/q_tbf.c, and the attributes of ns-3 3.44's queue discs.
"""

from __future__ import annotations

import random

from typing import Sequence

from netrepro.core import tc
from netrepro.core.tc import Qdisc


def tc_red_eval_ewma(qmin_bytes: float, burst: float, avpkt_bytes: float) -> int:
    """Wlog of Linux RED's average-queue weight W = 2**-Wlog that tc-red(8) derives from
    ``burst``, ``min`` and ``avpkt``: the least Wlog with burst + 1 - min/avpkt <=
    (1 - (1 - W)**burst) / W (iproute2 tc/tc_red.c, tc_red_eval_ewma).

    Raises:
        ValueError: burst too small for min/avpkt (tc refuses it too), or no Wlog below 32.
    """
    a = burst + 1 - qmin_bytes / avpkt_bytes
    if a < 1.0:
        raise ValueError(f"burst {burst:g} is too small for min {qmin_bytes:g} B / avpkt {avpkt_bytes:g} B")
    w = 0.5
    for wlog in range(1, 32):
        if a <= (1 - (1 - w) ** burst) / w:
            return wlog
        w /= 2
    raise ValueError("no RED weight fits burst")


#: Linux's default transmit queue length (ip-link(8) txqueuelen): the default limit of a
#: pfifo or bfifo (tc-pfifo(8): txqueuelen packets, or txqueuelen x MTU bytes) and of HTB's
#: default leaf (sch_htb creates a pfifo of txqueuelen packets under a class).
TXQUEUELEN = 1000
#: The kinds that shape a port (:data:`netrepro.core.tc.SHAPERS`): their ``rate_mbit`` becomes the
#: rate of the port's link.
SHAPERS = tc.SHAPERS
#: The parameters netrepro-sim builds, per layer kind; a layer of another kind, or with
#: another parameter, is refused (:func:`stack_problems`): netem's ``jitter_ms`` among them
#: (a simulated link's delay is constant), and cake (no ns-3 queue disc). A netem delay becomes its link's delay
#: (its ``limit_packets`` is not modelled: the simulated delay holds any number of packets);
#: a shaper's ``burst_bytes`` is not modelled either (the link sends at its rate, a packet at
#: a time).
MODELLED_PARAMS = {
    "netem": ("delay_ms", "limit_packets"),
    "htb": ("rate_mbit", "burst_bytes"),
    "tbf": ("rate_mbit", "burst_bytes", "limit_bytes", "latency_ms"),
    "pie": ("limit_packets", "target_ms", "tupdate_ms", "alpha", "beta", "ecn", "dq_rate_estimator"),
    "red": ("limit_bytes", "min_bytes", "max_bytes", "avpkt_bytes", "burst_packets", "probability",
            "bandwidth_mbit", "ecn", "adaptive"),
    "codel": ("limit_packets", "target_ms", "interval_ms", "ecn"),
    "fq_codel": ("limit_packets", "target_ms", "interval_ms", "flows", "drop_batch_packets", "ecn"),
    "fq": ("limit_packets", "maxrate_mbit", "pacing"),
    "pfifo": ("limit_packets",),
    "bfifo": ("limit_bytes",),
}
#: The kinds that pace the flows leaving their port rather than queue them (tc-fq(8)): the
#: simulation paces the sending node's TCP sockets (:func:`pacing`) and queues in a FIFO of the
#: layer's ``limit_packets`` (fq's default: :data:`FQ_LIMIT_PACKETS`).
PACERS = ("fq",)
#: tc-fq(8): ``limit`` defaults to 10000 packets.
FQ_LIMIT_PACKETS = 10000
#: tc-codel(8): ``limit`` 1000 packets, ``target`` 5 ms, ``interval`` 100 ms; tc-fq_codel(8):
#: ``limit`` 10240 packets, ``flows`` 1024, ``quantum`` 1514 B, ``drop_batch`` 64, ``ecn`` on.
CODEL_DEFAULTS = {"limit_packets": 1000, "target_ms": 5, "interval_ms": 100, "ecn": False}
FQ_CODEL_DEFAULTS = {"limit_packets": 10240, "target_ms": 5, "interval_ms": 100, "flows": 1024,
                     "drop_batch_packets": 64, "ecn": True}
#: RED's parameters the simulation needs given (tc-red(8) derives the others' defaults from them).
RED_REQUIRED = ("limit_bytes", "min_bytes", "max_bytes", "avpkt_bytes", "burst_packets", "probability")


def pie_attributes(layer: Qdisc, rate_mbit: float, delay_s: float, mtu: int) -> dict[str, str]:
    """ns3::PieQueueDisc attributes of a Linux sch_pie layer (tc-pie(8) units: ``alpha``/
    ``beta`` in 1/16: the paper's 0.125 and 1.25 are 2 and 20; defaults as sch_pie's: limit
    1000 packets, target 15 ms, tupdate 15 ms, alpha 2, beta 20). ``rate_mbit`` and
    ``delay_s`` are not used (PIE measures both)."""
    p = layer.params
    return {"MaxSize": f"{p.get('limit_packets', TXQUEUELEN)}p",
            "QueueDelayReference": f"{p.get('target_ms', 15)}ms",
            "Tupdate": f"{p.get('tupdate_ms', 15)}ms", "A": f"{p.get('alpha', 2) / 16:g}",
            "B": f"{p.get('beta', 20) / 16:g}", "MeanPktSize": str(mtu),
            "UseDequeueRateEstimator": str(bool(p.get("dq_rate_estimator", False))).lower(),
            "UseEcn": str(bool(p.get("ecn", False))).lower()}


def red_attributes(layer: Qdisc, rate_mbit: float, delay_s: float, mtu: int) -> dict[str, str]:
    """ns3::RedQueueDisc attributes of a Linux sch_red layer (tc-red(8)): byte
    thresholds and limit (the queue counts bytes), max_p = ``probability`` (LInterm =
    1/max_p), the weight of :func:`tc_red_eval_ewma`, not gentle (Linux RED drops every
    packet above max), adaptive as ``adaptive``, and drops spaced as Linux spaces them
    (``Wait=false``): include/net/red.h, red_action, drops when ``p_b * count`` exceeds a
    uniform random number, so that the packets between drops are uniform on [1, 1/p_b], the
    RED paper's method; ns-3's default, ns-2's "wait" option, makes them uniform on
    [1/p_b, 2/p_b], a third of the drop rate, and RED's queue longer. ``rate_mbit``: the
    port's rate (``bandwidth_mbit`` when not given); ``delay_s``: ns-3's ``LinkDelay`` (the
    trial's largest netem delay)."""
    p = layer.params
    wlog = tc_red_eval_ewma(p["min_bytes"], p["burst_packets"], p["avpkt_bytes"])
    return {"MaxSize": f"{p['limit_bytes']}B", "MinTh": str(p["min_bytes"]), "MaxTh": str(p["max_bytes"]),
            "MeanPktSize": str(p["avpkt_bytes"]), "QW": f"{2.0 ** -wlog:.10g}",
            "LInterm": f"{1 / p['probability']:g}", "Gentle": "false", "Wait": "false",
            "ARED": str(bool(p.get("adaptive", False))).lower(),
            "LinkBandwidth": f"{p.get('bandwidth_mbit', rate_mbit):g}Mbps", "LinkDelay": f"{delay_s:g}s",
            "UseEcn": str(bool(p.get("ecn", False))).lower()}


def fifo_attributes(layer: Qdisc, rate_mbit: float, delay_s: float, mtu: int) -> dict[str, str]:
    """ns3::FifoQueueDisc attributes of the FIFO a layer ends in: a pfifo's ``limit_packets``
    or a bfifo's ``limit_bytes`` (tc-pfifo(8) defaults: txqueuelen packets, txqueuelen x MTU
    bytes); a TBF alone queues in its own bfifo of ``limit_bytes``, or of rate x
    ``latency_ms`` + ``burst_bytes`` (iproute2 tc/q_tbf.c); an HTB alone in its class's
    default pfifo of txqueuelen packets (sch_htb)."""
    kind, p = layer.kind, layer.params
    if kind == "pfifo" or kind == "htb":
        return {"MaxSize": f"{p.get('limit_packets', TXQUEUELEN)}p"}
    if kind == "tbf" and "limit_bytes" not in p:
        return {"MaxSize": f"{int(p['rate_mbit'] * 1e6 / 8 * p['latency_ms'] / 1000 + p['burst_bytes'])}B"}
    return {"MaxSize": f"{p.get('limit_bytes', TXQUEUELEN * mtu)}B"}


def codel_attributes(layer: Qdisc, rate_mbit: float, delay_s: float, mtu: int) -> dict[str, str]:
    """ns3::CoDelQueueDisc attributes of a Linux sch_codel layer (defaults:
    :data:`CODEL_DEFAULTS`, tc-codel(8)); ``MinBytes`` is the MTU, as Linux's codel never drops
    while under one MTU is queued (include/net/codel_impl.h, codel_should_drop: ``maxpacket``)."""
    c = {**CODEL_DEFAULTS, **{k: v for k, v in layer.params.items() if k in CODEL_DEFAULTS}}
    return {"MaxSize": f"{c['limit_packets']}p", "Target": f"{c['target_ms']:g}ms", "Interval": f"{c['interval_ms']:g}ms",
            "MinBytes": str(mtu), "UseEcn": str(bool(c["ecn"])).lower()}


def fq_codel_attributes(layer: Qdisc, rate_mbit: float, delay_s: float, mtu: int) -> dict[str, str]:
    """ns3::FqCoDelQueueDisc attributes of a Linux sch_fq_codel layer (defaults:
    :data:`FQ_CODEL_DEFAULTS`, tc-fq_codel(8)): the buckets (``flows``: a flow's bucket is its
    5-tuple's hash modulo the count, as Linux's without set-associative hashing), drop batch,
    target, interval and limit. The quantum is not an attribute in ns-3 3.44: it is the
    device's MTU, 1500 B (Linux's default 1514 B counts the Ethernet header, which ns-3's
    queue discs do not see), so ``quantum_bytes`` is refused. The hash's perturbation,
    random per qdisc in Linux (sch_fq_codel.c, fq_codel_init: get_random_u32), is drawn by
    :func:`hash_perturbation` and added by the caller (``Perturbation``)."""
    c = {**FQ_CODEL_DEFAULTS, **{k: v for k, v in layer.params.items() if k in FQ_CODEL_DEFAULTS}}
    return {"MaxSize": f"{c['limit_packets']}p", "Flows": str(c["flows"]),
            "DropBatchSize": str(c["drop_batch_packets"]), "Target": f"{c['target_ms']:g}ms",
            "Interval": f"{c['interval_ms']:g}ms", "UseEcn": str(bool(c["ecn"])).lower()}


#: The queue discs that hash flows into buckets with a perturbation of the hash, which the
#: caller draws per qdisc and repetition (``Perturbation``: :func:`hash_perturbation`).
PERTURBED = ("ns3::FqCoDelQueueDisc",)


def fq_attributes(layer: Qdisc, rate_mbit: float, delay_s: float, mtu: int) -> dict[str, str]:
    """ns3::FifoQueueDisc attributes of a Linux sch_fq layer: its ``limit_packets`` (tc-fq(8)
    default :data:`FQ_LIMIT_PACKETS`). Its pacing is the sockets' (:func:`pacing`)."""
    return {"MaxSize": f"{layer.params.get('limit_packets', FQ_LIMIT_PACKETS)}p"}


def pacing(stack: Sequence[Qdisc]) -> tuple[bool, float]:
    """Whether a port's stack paces the TCP flows leaving it, and at most at which rate (Mbit/s,
    0.0: no cap): a :data:`PACERS` layer paces unless ``pacing: false`` (tc-fq(8) ``nopacing``),
    each flow at most at its ``maxrate_mbit`` (tc-fq(8) ``maxrate``: per flow)."""
    for layer in stack:
        if layer.kind in PACERS and layer.params.get("pacing", True):
            return True, float(layer.params.get("maxrate_mbit", 0.0))
    return False, 0.0


#: The queue discs of the simulation, by the kind of a stack's last layer: its ns-3 TypeId and
#: the builder of its attributes ``(layer, rate_mbit, delay_s, mtu) -> {name: value}`` (``layer``:
#: the :class:`netrepro.core.tc.Qdisc` record).
QUEUE_DISCS = {"pie": ("ns3::PieQueueDisc", pie_attributes), "red": ("ns3::RedQueueDisc", red_attributes),
               "pfifo": ("ns3::FifoQueueDisc", fifo_attributes), "bfifo": ("ns3::FifoQueueDisc", fifo_attributes),
               "tbf": ("ns3::FifoQueueDisc", fifo_attributes), "htb": ("ns3::FifoQueueDisc", fifo_attributes),
               "codel": ("ns3::CoDelQueueDisc", codel_attributes),
               "fq_codel": ("ns3::FqCoDelQueueDisc", fq_codel_attributes),
               "fq": ("ns3::FifoQueueDisc", fq_attributes)}


def stack_problems(stack: Sequence[Qdisc], field: str) -> list[str]:
    """Why netrepro-sim cannot build one port's stack, one phrase per layer (``field``: the
    stack's field, e.g. ``trials[0].qdiscs.router:eth1``). Built: ``[netem]`` alone, or at most
    one shaper (:data:`SHAPERS`) with at most one queue (:data:`QUEUE_DISCS`) under it, the
    whole under one netem at the root (its delay becomes the link's: netem hands the packets it
    delayed to its child, sch_netem.c netem_dequeue), or a pacer (:data:`PACERS`) alone."""
    out = []
    for j, layer in enumerate(stack):
        kind = layer.kind
        if kind not in MODELLED_PARAMS:
            out.append(f"{field}[{j}].kind: {kind!r} has no model in the simulation (modelled: {', '.join(MODELLED_PARAMS)})")
            continue
        for key in layer.params:
            if key not in MODELLED_PARAMS[kind]:
                out.append(f"{field}[{j}].{key}: {kind}'s {key} has no model in the simulation")
        under_netem = j == 1 and stack[0].kind == tc.DELAY_KIND
        if kind == "netem" and j > 0:
            out.append(f"{field}[{j}]: netem under {stack[j - 1].kind} (the simulation makes netem's delay its "
                       f"link's; expected netem at the root)")
        elif kind in SHAPERS and j > 0 and not under_netem:
            out.append(f"{field}[{j}]: a {kind} under {stack[j - 1].kind} (the simulation makes one shaper, the "
                       f"stack's root or netem's child, the port's link rate)")
        elif kind in PACERS and len(stack) > 1:
            out.append(f"{field}[{j}]: {kind} with other layers in its stack (the simulation paces the sockets of "
                       f"the node; expected {kind} alone)")
        elif kind not in SHAPERS and kind != "netem" and j != len(stack) - 1:
            out.append(f"{field}[{j}]: a {kind} with a layer under it")
        if kind == "red":
            out += [f"{field}[{j}].{k}: missing (the simulation needs RED's {', '.join(RED_REQUIRED)})"
                    for k in RED_REQUIRED if k not in layer.params]
        if kind == "tbf" and len(stack) - j == 1 and not {"limit_bytes", "latency_ms"} & set(layer.params):
            out.append(f"{field}[{j}]: a tbf alone needs limit_bytes or latency_ms (its queue)")
    return out


def root_shaper(stack: Sequence[Qdisc]) -> Qdisc | None:
    """The layer that sets the port's link rate (its ``rate_mbit``): the stack's first layer
    below a root netem (or the root) when it is a shaper (:data:`SHAPERS`), else None."""
    rest = stack[1:] if stack and stack[0].kind == tc.DELAY_KIND else stack
    return rest[0] if rest and rest[0].kind in SHAPERS else None


def queue_layer(stack: Sequence[Qdisc]) -> Qdisc | None:
    """The layer whose queue disc the port gets: the stack's last layer, unless it only delays
    (:data:`netrepro.core.tc.DELAY_KIND`: its delay is the link's); None for such a stack or an
    empty one (:data:`NO_QUEUE`)."""
    return stack[-1] if stack and stack[-1].kind != tc.DELAY_KIND else None


#: Why a port has no queue disc (:func:`queue_layer` gives None), as a refusal says it.
NO_QUEUE = f"{tc.DELAY_KIND} or no stack: the simulated port has a plain FIFO"


def queue_disc(layer: Qdisc, rate_mbit: float, delay_s: float, mtu: int) -> tuple[str, dict[str, str]]:
    """``(TypeId, {attribute: value})`` of the ns-3 queue disc of a stack's queue layer
    (:func:`queue_layer`; a kind of :data:`QUEUE_DISCS`): ``rate_mbit`` is the port's link
    rate in Mbit/s, ``delay_s`` ns-3's RED ``LinkDelay`` in seconds (the trial's largest
    delay), ``mtu`` the links' MTU in bytes.

    Raises:
        KeyError: a kind without a queue disc (:func:`stack_problems` refuses it first).
    """
    typeid, attributes = QUEUE_DISCS[layer.kind]
    return typeid, attributes(layer, rate_mbit, delay_s, mtu)


def hash_perturbation(repetition: int, port: str) -> int:
    """The perturbation of the flow hash of a :data:`PERTURBED` queue disc at ``port``
    (``node:interface``) in repetition ``repetition``: a 32-bit number drawn from both (Python's random.Random seeded with them), so that each repetition
    hashes the flows into other buckets, as Linux draws one at random for each new qdisc
    (sch_fq_codel.c fq_codel_init: get_random_u32), and the same trial simulated twice gives the
    same files."""
    return random.Random(f"{int(repetition)}/{port}").getrandbits(32)
