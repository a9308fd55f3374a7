"""A Linux qdisc stack as ns-3 queue discs: what netrepro-sim (the ``ns3`` site,
:mod:`netrepro.sites.ns3`) builds of a port's stack (the layers of
:func:`netrepro.tc.stack_commands`), and what it cannot.

A qdisc builder, beside :mod:`netrepro.tc`: with it, the only module that knows qdisc kinds
by name. Per port: a shaper (:data:`SHAPERS`) at the stack's root makes its ``rate_mbit`` the
rate of the port's link (:func:`root_shaper`); the stack's last layer becomes the port's queue
disc (:data:`QUEUE_DISCS`, :func:`queue_disc`), unless it only delays (:func:`queue_layer`),
whose delay (:func:`netrepro.tc.delay_ms`) becomes the link's. What has no model here is named
by :func:`stack_problems`. Sources, cited where each is used: tc-pie(8), tc-red(8),
tc-pfifo(8), tc-tbf(8), ip-link(8), the kernel's sch_pie, sch_red (include/net/red.h) and
sch_htb, iproute2's tc/tc_red.c and tc/q_tbf.c, and the attributes of ns-3 3.44's queue discs.
"""

from __future__ import annotations

from netrepro import tc


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
#: The kinds that shape a port (:data:`netrepro.tc.SHAPERS`): their ``rate_mbit`` becomes the
#: rate of the port's link.
SHAPERS = tc.SHAPERS
#: The parameters netrepro-sim builds, per layer kind; a layer of another kind, or with
#: another parameter, is refused (:func:`stack_problems`). A netem delay becomes its link's delay
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
    "pfifo": ("limit_packets",),
    "bfifo": ("limit_bytes",),
}
#: RED's parameters the simulation needs given (tc-red(8) derives the others' defaults from them).
RED_REQUIRED = ("limit_bytes", "min_bytes", "max_bytes", "avpkt_bytes", "burst_packets", "probability")


def pie_attributes(layer: dict, rate_mbit: float, delay_s: float, mtu: int) -> dict[str, str]:
    """ns3::PieQueueDisc attributes of a Linux sch_pie layer (tc-pie(8) units: ``alpha``/
    ``beta`` in 1/16: the paper's 0.125 and 1.25 are 2 and 20; defaults as sch_pie's: limit
    1000 packets, target 15 ms, tupdate 15 ms, alpha 2, beta 20). ``rate_mbit`` and
    ``delay_s`` are not used (PIE measures both)."""
    return {"MaxSize": f"{layer.get('limit_packets', TXQUEUELEN)}p",
            "QueueDelayReference": f"{layer.get('target_ms', 15)}ms",
            "Tupdate": f"{layer.get('tupdate_ms', 15)}ms", "A": f"{layer.get('alpha', 2) / 16:g}",
            "B": f"{layer.get('beta', 20) / 16:g}", "MeanPktSize": str(mtu),
            "UseDequeueRateEstimator": str(bool(layer.get("dq_rate_estimator", False))).lower(),
            "UseEcn": str(bool(layer.get("ecn", False))).lower()}


def red_attributes(layer: dict, rate_mbit: float, delay_s: float, mtu: int) -> dict[str, str]:
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
    wlog = tc_red_eval_ewma(layer["min_bytes"], layer["burst_packets"], layer["avpkt_bytes"])
    return {"MaxSize": f"{layer['limit_bytes']}B", "MinTh": str(layer["min_bytes"]), "MaxTh": str(layer["max_bytes"]),
            "MeanPktSize": str(layer["avpkt_bytes"]), "QW": f"{2.0 ** -wlog:.10g}",
            "LInterm": f"{1 / layer['probability']:g}", "Gentle": "false", "Wait": "false",
            "ARED": str(bool(layer.get("adaptive", False))).lower(),
            "LinkBandwidth": f"{layer.get('bandwidth_mbit', rate_mbit):g}Mbps", "LinkDelay": f"{delay_s:g}s",
            "UseEcn": str(bool(layer.get("ecn", False))).lower()}


def fifo_attributes(layer: dict, rate_mbit: float, delay_s: float, mtu: int) -> dict[str, str]:
    """ns3::FifoQueueDisc attributes of the FIFO a layer ends in: a pfifo's ``limit_packets``
    or a bfifo's ``limit_bytes`` (tc-pfifo(8) defaults: txqueuelen packets, txqueuelen x MTU
    bytes); a TBF alone queues in its own bfifo of ``limit_bytes``, or of rate x
    ``latency_ms`` + ``burst_bytes`` (iproute2 tc/q_tbf.c); an HTB alone in its class's
    default pfifo of txqueuelen packets (sch_htb)."""
    kind = layer["kind"]
    if kind == "pfifo" or kind == "htb":
        return {"MaxSize": f"{layer.get('limit_packets', TXQUEUELEN)}p"}
    if kind == "tbf" and "limit_bytes" not in layer:
        return {"MaxSize": f"{int(layer['rate_mbit'] * 1e6 / 8 * layer['latency_ms'] / 1000 + layer['burst_bytes'])}B"}
    return {"MaxSize": f"{layer.get('limit_bytes', TXQUEUELEN * mtu)}B"}


#: The queue discs of the simulation, by the kind of a stack's last layer: its ns-3 TypeId and
#: the builder of its attributes ``(layer, rate_mbit, delay_s, mtu) -> {name: value}``.
QUEUE_DISCS = {"pie": ("ns3::PieQueueDisc", pie_attributes), "red": ("ns3::RedQueueDisc", red_attributes),
               "pfifo": ("ns3::FifoQueueDisc", fifo_attributes), "bfifo": ("ns3::FifoQueueDisc", fifo_attributes),
               "tbf": ("ns3::FifoQueueDisc", fifo_attributes), "htb": ("ns3::FifoQueueDisc", fifo_attributes)}


def stack_problems(stack: list[dict], field: str) -> list[str]:
    """Why netrepro-sim cannot build one port's stack, one phrase per layer (``field``: the
    stack's field, e.g. ``trials[0].qdiscs.router:eth1``). Built: ``[netem]`` alone, or at most
    one shaper (:data:`SHAPERS`) with at most one queue (pie, red, pfifo, bfifo) under it."""
    out = []
    for j, layer in enumerate(stack):
        kind = layer["kind"]
        if kind not in MODELLED_PARAMS:
            out.append(f"{field}[{j}].kind: {kind!r} has no model in the simulation (modelled: {', '.join(MODELLED_PARAMS)})")
            continue
        for key in layer:
            if key not in ("kind", "handle", *MODELLED_PARAMS[kind]):
                out.append(f"{field}[{j}].{key}: {kind}'s {key} has no model in the simulation")
        if kind == "netem" and len(stack) > 1:
            out.append(f"{field}[{j}]: netem with other layers in its stack (the simulation makes netem's delay its "
                       f"link's; expected netem alone)")
        elif kind in SHAPERS and j > 0:
            out.append(f"{field}[{j}]: a {kind} under {stack[j - 1]['kind']} (the simulation makes one shaper, the "
                       f"stack's root, the port's link rate)")
        elif kind not in SHAPERS and kind != "netem" and j != len(stack) - 1:
            out.append(f"{field}[{j}]: a {kind} with a layer under it")
        if kind == "red":
            out += [f"{field}[{j}].{k}: missing (the simulation needs RED's {', '.join(RED_REQUIRED)})"
                    for k in RED_REQUIRED if k not in layer]
        if kind == "tbf" and len(stack) == 1 and "limit_bytes" not in layer and "latency_ms" not in layer:
            out.append(f"{field}[{j}]: a tbf alone needs limit_bytes or latency_ms (its queue)")
    return out


def root_shaper(stack: list[dict]) -> dict | None:
    """The layer that sets the port's link rate: the stack's root when it is a shaper
    (:data:`SHAPERS`), else None."""
    return stack[0] if stack and stack[0]["kind"] in SHAPERS else None


def queue_layer(stack: list[dict]) -> dict | None:
    """The layer whose queue disc the port gets: the stack's last layer, unless it only delays
    (:data:`netrepro.tc.DELAY_KIND`: its delay is the link's); None for such a stack or an
    empty one (:data:`NO_QUEUE`)."""
    return stack[-1] if stack and stack[-1]["kind"] != tc.DELAY_KIND else None


#: Why a port has no queue disc (:func:`queue_layer` gives None), as a refusal says it.
NO_QUEUE = f"{tc.DELAY_KIND} or no stack: the simulated port has a plain FIFO"


def queue_disc(layer: dict, rate_mbit: float, delay_s: float, mtu: int) -> tuple[str, dict[str, str]]:
    """``(TypeId, {attribute: value})`` of the ns-3 queue disc of a stack's queue layer
    (:func:`queue_layer`; a kind of :data:`QUEUE_DISCS`): ``rate_mbit`` is the port's link
    rate in Mbit/s, ``delay_s`` ns-3's RED ``LinkDelay`` in seconds (the trial's largest
    delay), ``mtu`` the links' MTU in bytes.

    Raises:
        KeyError: a kind without a queue disc (:func:`stack_problems` refuses it first).
    """
    typeid, attributes = QUEUE_DISCS[layer["kind"]]
    return typeid, attributes(layer, rate_mbit, delay_s, mtu)
