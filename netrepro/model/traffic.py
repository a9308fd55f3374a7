"""What a trial's traffic implies: buffers on a ping's path, simultaneous starts, pacing
rates, traffic that conflicts, an item's length, congestion controls, and a trial's timeline
(:func:`trial_timeline`).
"""

from __future__ import annotations

from typing import Any, Sequence


from netrepro.core import tc
from netrepro.model.checks import ETHERNET_HEADER_BYTES
from netrepro.model.experiment import Model
from netrepro.model.records import Port, TrafficItem, Trial
from netrepro.model.topology import path_ports


def stack_buffer(stack: Sequence[tc.Qdisc], mtu_bytes: int) -> tuple[int, float] | None:
    """The buffer of one port's qdisc stack (its :class:`netrepro.core.tc.Qdisc` layers, root
    first) and the rate that drains it: ``(bytes, rate_mbit)``, or None when the stack has no
    shaper or its leaf no explicit limit.

    The rate is the stack's lowest shaping rate (:func:`netrepro.core.tc.shaping_rate_mbit`). Packets wait in
    the leaf, the last layer (a shaper's ``limit`` makes its own bfifo only when it has no
    child, tc-tbf(8)): its ``limit_bytes``, or its ``limit_packets`` x (``mtu_bytes`` + 14),
    full-sized frames as the qdisc counts them (:data:`ETHERNET_HEADER_BYTES`). A leaf without
    an explicit limit (the kernel's default, e.g. pfifo's txqueuelen) gives None: its size is
    not in the file."""
    rate = tc.shaping_rate_mbit(stack)
    if not rate or not stack:
        return None
    leaf = stack[-1].params
    if "limit_bytes" in leaf:
        return int(leaf["limit_bytes"]), rate
    if "limit_packets" in leaf:
        return int(leaf["limit_packets"]) * (int(mtu_bytes) + ETHERNET_HEADER_BYTES), rate
    return None


def ping_buffers(m: Model, trial: Trial, item: TrafficItem) -> list[tuple[str, int, float]]:
    """The buffers a ping item's probes and replies can wait in: ``[(port, bytes, rate_mbit)]``
    for every port of its path there and back (:func:`path_ports`) whose stack in ``trial``
    has a shaper and a limit (:func:`stack_buffer`). Ports without a shaper drain at the
    link's own speed and are left out. Raises ValueError when the path cannot be found."""
    out = []
    for port in path_ports(m, item.src, item.dst) + path_ports(m, item.dst, item.src):
        buf = stack_buffer(trial.stack(port), m.mtu_bytes)
        if buf:
            out.append((port, *buf))
    return out


def simultaneous_starts(trial: Trial) -> list[float]:
    """The start times (s, unscaled) at which two or more traffic items that record their
    start (iperf3, FTP: :data:`STARTED_KINDS`) of ``trial`` start together, sorted."""
    starts: dict[float, int] = {}
    for it in trial.traffic:
        if it.kind in STARTED_KINDS:
            starts[float(it.start_s)] = starts.get(float(it.start_s), 0) + 1
    return sorted(t for t, k in starts.items() if k >= 2)


#: The traffic items whose clients record when they started: iperf3 (``iperf3-<id>.json.t0``)
#: and FTP (the ``start_epoch_s`` of flows.csv), roles/flow_clients.
STARTED_KINDS = ("iperf3", "ftp")


#: The share of a shaped rate that paced streams may ask for together and still be limited by
#: their pacing rather than by the shaper: fq and SO_MAX_PACING_RATE pace IP packets, a shaper
#: counts frames, and a 1500-byte packet is a 1514-byte frame (99.1 %); below 95 % the
#: streams leave the bottleneck a margin for the ACKs' and the pings' share too.
PACING_HEADROOM = 0.95


def pacing_rates(m: Model, trial: Trial) -> dict[str, float]:
    """iperf3 item id -> the rate (Mbit/s) at which each of its streams is paced, for the
    trial's paced items: the lower of its ``fq_rate_mbit`` (iperf3 --fq-rate: the socket's
    SO_MAX_PACING_RATE) and the maxrate of a :data:`netrepro.core.tc.PACING_KIND` qdisc on the
    port its sender sends by (:func:`path_ports`; tc-fq(8): maxrate is per flow)."""
    out = {}
    for it in trial.traffic:
        if it.kind != "iperf3":
            continue
        rates = [float(it.pacing_rate_mbit)] if it.pacing_rate_mbit else []
        try:
            first = path_ports(m, it.src, it.dst)[:1]
        except ValueError:
            first = []
        rates += [r for r in (tc.pacing_rate_mbit(trial.stack(port)) for port in first) if r]
        if rates:
            out[it.id] = min(rates)
    return out


def pacing_limited(m: Model, trial: Trial) -> dict[str, float]:
    """The trial's paced items (:func:`pacing_rates`) whose pacing, not a shaper, limits
    their rate: every iperf3 item of the trial is paced, and on the path of each the streams
    of all of them together ask for at most :data:`PACING_HEADROOM` of the lowest shaping
    rate (:func:`netrepro.core.tc.shaping_rate_mbit`) along it (``parallel`` streams each at the
    item's rate). Empty when an unpaced item shares the trial, or the paced ones together
    would fill a shaper (pacing-lab's four pairs at 2.5 of 10 Gbit/s: the bottleneck, not
    the pacing, sets their rates)."""
    rates = pacing_rates(m, trial)
    items = trial.items("iperf3")
    if not rates or any(it.id not in rates for it in items):
        return {}
    asked = sum(rates[it.id] * (it.parallel or 1) for it in items)
    out = {}
    for it in items:
        try:
            ports = path_ports(m, it.src, it.dst)
        except ValueError:
            continue
        shaped = [r for r in (tc.shaping_rate_mbit(trial.stack(p)) for p in ports) if r]
        if not shaped or asked <= PACING_HEADROOM * min(shaped):
            out[it.id] = rates[it.id]
    return out


def traffic_conflict(items: list[dict]) -> str | None:
    """What makes a trial's traffic (``items``: as the file writes them, :meth:`TrafficItem.as_data`)
    impossible to run, or None: a node with two ping items
    (its collector writes one ping.txt), or FTP items from one sender at different rates
    (vsftpd's anon_max_rate is one per server)."""
    pingers: set[str] = set()
    rates: dict[str, int] = {}
    for x in items:
        if x["kind"] == "ping":
            if x["from"] in pingers:
                return f"{x['from']} has two ping items; expected one per node (its collector writes ping.txt)"
            pingers.add(x["from"])
        elif x["kind"] == "ftp" and rates.setdefault(x["from"], x["max_rate_bytes_per_s"]) != x["max_rate_bytes_per_s"]:
            return (f"FTP items from {x['from']} ask for rates {rates[x['from']]} and {x['max_rate_bytes_per_s']} B/s; "
                    "expected one (vsftpd's anon_max_rate is one per server)")
    return None


#: The sysctl that sets a node's TCP congestion control (tcp(7), per network namespace since
#: Linux 4.15).
CONGESTION_SYSCTL = "net.ipv4.tcp_congestion_control"


def congestion_controls(m: Model) -> dict[str, list[str]]:
    """node -> the TCP congestion controls (``cubic``, ``bbr``, ``reno``, ...) any trial asks
    of it, sorted: the value of :data:`CONGESTION_SYSCTL` in its sysctls, and the
    ``congestion`` (iperf3 ``-C``) of the iperf3 items it sends. Nodes that ask none are left
    out. The kernel loads ``tcp_<name>`` when either is set (tcp_cong.c
    tcp_ca_find_autoload)."""
    out: dict[str, set[str]] = {}
    for t in m.trials:
        for node, kv in t.sysctls.items():
            if kv.get(CONGESTION_SYSCTL):
                out.setdefault(node, set()).add(str(kv[CONGESTION_SYSCTL]))
        for it in t.traffic:
            if it.kind == "iperf3" and it.congestion:
                out.setdefault(it.src, set()).add(it.congestion)
    return {n: sorted(v) for n, v in out.items()}


def stack_vars(model, trial: Trial) -> dict[str, list[dict[str, Any]]]:
    """Node -> ``[{"interface", "key", "commands"}]``: the trial's qdisc stacks
    (roles/qdisc_stack), each as :func:`netrepro.core.tc.stack_commands` builds it with
    :data:`netrepro.core.tc.DEV` for the device, in the order of the model's ports; ``key`` is
    what roles/interfaces maps to the device (the interface's LAN, else its name). Every
    node has a list (empty: no stack).

    Args:
        model: a :class:`netrepro.model.Model`; trial: one of its ``trials``.
    """
    out: dict[str, list[dict[str, Any]]] = {n: [] for n in model.nodes}
    for port, stack in trial.qdiscs.items():
        p = Port.parse(port)
        key = model.nodes[p.node].interfaces[p.interface].network or p.interface
        out[p.node].append({"interface": p.interface, "key": key, "commands": tc.stack_commands(stack)})
    return out


def trial_timeline(m: Model, trial: Trial, time_scale: float = 1.0) -> dict:
    """What each node does in one trial, as playbooks/trial.yml's ``trial`` var needs it.

    Returns ``{"ping": {node: {"target", "interval_s"}}, "qdisc_stats": {node: {"interface",
    "network", "interval_s", "classes"}}, "flows": {node: [{"server_address", "flows",
    "start_s", "duration_s", "id"}]}, "ftp_sources": {node: max_rate_bytes_per_s},
    "iperf3": {node: [{"id", "start_s", "to", "address", "item" (the TrafficItem)}]}, "iperf3_servers":
    {node: [port]}, "stacks": {node: [{"interface", "commands"}]}, "sysctls": {node: {...}},
    "duration_s"}``; start offsets and durations are multiplied by ``time_scale``.

    The receiver of an FTP item runs its flows (curl) against the sender's vsftpd; the sender
    of an iperf3 item runs ``iperf3 -c`` toward the receiver's one-off server. A node pings
    with at most one ping item (its collector writes ``ping.txt``).

    Raises:
        ValueError: a node has two ping items, or two FTP items from one sender ask for
            different rates (vsftpd's anon_max_rate is one per server).
    """
    conflict = traffic_conflict([it.as_data() for it in trial.traffic])
    if conflict:
        raise ValueError(f"trial {trial.id}: {conflict}")
    k = time_scale
    plan: dict[str, Any] = {"ping": {}, "qdisc_stats": {}, "flows": {}, "ftp_sources": {}, "iperf3": {},
                            "iperf3_servers": {}, "stacks": {n: v for n, v in stack_vars(m, trial).items() if v},
                            "sysctls": trial.sysctls_data(), "duration_s": round(trial.duration_s * k, 3)}
    for it in trial.traffic:
        start, dur = round(it.start_s * k, 3), round(it.duration_s * k, 3)
        if it.kind == "ping":
            plan["ping"][it.src] = {"target": m.address_toward(it.src, it.dst), "interval_s": it.interval_s, "id": it.id}
        elif it.kind == "ftp":
            plan["ftp_sources"][it.src] = it.max_rate_bytes_per_s
            plan["flows"].setdefault(it.dst, []).append({
                "server_address": m.address_toward(it.dst, it.src), "flows": it.flows,
                "start_s": start, "duration_s": dur, "id": it.id})
        elif it.kind == "iperf3":
            plan["iperf3"].setdefault(it.src, []).append({
                "id": it.id, "start_s": start, "to": it.dst, "address": m.address_toward(it.src, it.dst),
                "item": it})
            plan["iperf3_servers"].setdefault(it.dst, []).append(it.port)
    for c in m.collectors:
        plan["qdisc_stats"][c.node] = {"interface": c.interface, "network": m.nodes[c.node].interfaces[c.interface].network,
                                       "interval_s": c.interval_s, "classes": c.classes}
    return plan
