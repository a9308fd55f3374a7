"""Site ``ns3``: the experiment simulated in ns-3 instead of emulated on machines.

Each trial is one run of ``netrepro-sim`` (netrepro/sites/ns3/netrepro-sim.cc), a C++ program
built against the C++ libraries of the PyPI ``ns3`` wheel (:data:`NS3_VERSION`, installed by
``make setup SITE=ns3``). It writes the raw files the emulated sites write (ping -D -O lines,
``tc -s -j qdisc`` samples, the flow clients' flows.csv), so the analysis, figures and
verdict are the ones every site gets. No node, SSH or Ansible: up and provision have nothing
to do, and a trial takes seconds of CPU, not its schedule's length.

How the experiment's model (``spec.model``, :mod:`netrepro.model`: the one every site reads)
becomes a simulation, :func:`scenario`:

- each host, router and switch is a node (a switch forwards at IP, not as a learning bridge);
  each network (LAN) is a hub node linked to each member, each cable a link between its two
  nodes; unshaped links run at :func:`unshaped_rate_bps` (never the bottleneck); the
  experiment's addresses label the files only (netrepro-sim gives each link a /30) and ns-3's
  global routing gives the routes (shortest paths: the file's ``routes`` are not read, so a
  file whose routes take a longer path is simulated on the shortest one);
- each trial's stacks, port by port, as :mod:`netrepro.sites.ns3.stacks` translates them: a shaper
  (htb or tbf, :data:`netrepro.sites.ns3.stacks.SHAPERS`) at the stack's root or under a root netem
  makes its ``rate_mbit`` the rate of the port's link (its burst is not modelled); the
  stack's last layer becomes the port's queue disc (:data:`netrepro.sites.ns3.stacks.QUEUE_DISCS`:
  pie, red, codel, fq_codel with its hash perturbation drawn per repetition and port, fifos);
  a pacer (fq) on a sender's port paces that node's iperf3 sockets (:func:`_pacing`); every
  other port has a FIFO of 1000 packets (pfifo_fast's default length) and every device a
  one-packet queue, so that queues build in the queue discs;
- a netem delay of D ms on a port becomes its link's delay, D/2 each way: the same RTT, split
  over both directions (netem delays the port's egress only);
- TCP: each node's ``tcp_congestion_control`` (:data:`CONGESTION_CONTROL`: reno is Linux's
  reno, ``TcpLinuxReno``) and an iperf3 item's ``congestion``, SACK as ``tcp_sack`` says, MSS =
  MTU - 52 B (Linux with timestamps), Linux's initial window (10), least RTO (200 ms,
  ``TCP_RTO_MIN``) and delayed-ACK timeout (40 ms, ``TCP_DELACK_MIN``:
  :data:`DELACK_TIMEOUT_S`); an iperf3 socket's buffers from ``tcp_wmem``/``tcp_rmem``
  (:func:`_buffer_bytes`), the FTP flows' 4 MiB (autotuning's reach);
- iperf3 items: ``parallel`` bulk TCP streams, each interval's acknowledged bytes,
  retransmits, cwnd and RTT and the end's sums written as ``iperf3 -J`` writes them, the
  omitted seconds (``-O``) marked; ``fq_rate_mbit`` paces the sockets (SO_MAX_PACING_RATE);
- FTP items: one TCP connection per flow, a BulkSend application when unlimited, else an
  OnOff application writing ``max_rate_bytes_per_s`` into the socket (vsftpd's
  ``anon_max_rate`` keeps each connection's average at the limit by sleeping); ping items as
  ``ping -D -O`` writes them, after the base-RTT pings of each;
- a ``qdisc_stats`` collector samples its port's queue disc (``tc -s -j`` lines), with
  ``classes`` its classes as ``tc -s class show`` lists them;
- repetition k of a repeated run uses ns-3's run number k (``RngRun``; ns-3 manual,
  "Random Variables": independent replications change the run number, not the seed): the
  same trial simulated twice gives the same files, another repetition other random drops.

Anything else the model can hold is refused before anything is built, in one line naming the
file and each field (:func:`unmodelled`, :meth:`Ns3Site.refuse_experiment`): a qdisc kind or
parameter without a model here (cake, netem's jitter, fq_codel's quantum, ...), a pacer
beside other layers, a second shaper in a stack or at the other end of a link, a congestion
control or sysctl without a model, senders with different SACK settings, FTP items from a
paced sender or on nodes with their own socket buffers, offloads on. docs/sites/ns3.md says where
the simulation differs from Linux and what that changes.
"""

from __future__ import annotations

import hashlib
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from netrepro.core import tc
from netrepro.model import Model, Port, TrafficItem, Trial
from netrepro.sites.base import Site
from netrepro.sites.errors import SiteError
from netrepro.sites.login import NodeLogin
from netrepro.sites.options import Option, number_in
from netrepro.sites.ns3 import slurm, stacks
from netrepro.sites.ns3.simulator import NS3_VERSION, SOURCE, build
from netrepro.experiment.spec import REPO_ROOT, Spec

#: A LAN's links: the emulated sites' veths are not shaped; 1 Gbit/s is 100 times the
#: bottleneck of pie-vs-red.
LAN_RATE_BPS = 1_000_000_000
#: Linux's tcp_congestion_control names -> ns-3 TCP congestion controls. Linux "reno" is
#: ns-3's TcpLinuxReno, not TcpNewReno: in congestion avoidance Linux grows the window by one
#: segment per window of segments acked (net/ipv4/tcp_cong.c, tcp_cong_avoid_ai), TcpNewReno by
#: one step per ACK, half as fast with delayed ACKs. Both recover from loss as RFC 6582 says.
#: Measured on pie-vs-red's red-unlimited (full length, ns-3 runs 1-2, RED spaced as Linux's):
#: 36/54/66/54/36 ms over p1-p5 with TcpNewReno, 44/66/81/66/43 with TcpLinuxReno, against
#: 41/62/82/63/42 emulated (docs/runs/pie-vs-red-repeat5-local-vm-2026-11-23).
CONGESTION_CONTROL = {"reno": "ns3::TcpLinuxReno", "cubic": "ns3::TcpCubic", "bbr": "ns3::TcpBbr"}
#: sysctls with a meaning in the simulation (others are refused): ip_forward (ns-3 nodes with
#: global routing forward), the congestion control, SACK and the socket buffers' largest sizes
#: (see :func:`scenario`).
SYSCTLS = {"net.ipv4.ip_forward", "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_sack", "net.ipv4.tcp_rmem",
           "net.ipv4.tcp_wmem"}
#: The socket buffer sysctls, whose third field is the most autotuning gives a socket (bytes).
BUFFER_SYSCTLS = ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")
#: Linux's defaults of their third fields (Documentation/networking/ip-sysctl.rst: tcp_rmem max
#: 6 MiB, tcp_wmem max 4 MiB).
LINUX_BUFFER_MAX = {"net.ipv4.tcp_rmem": 6291456, "net.ipv4.tcp_wmem": 4194304}
#: The share of a Linux socket buffer that holds data: half (tcp_adv_win_scale = 1, its
#: default: include/net/tcp.h tcp_win_from_space; the rest is the kernel's overhead per
#: packet). An iperf3 sender's ns-3 send buffer and its receiver's receive buffer (the largest
#: window it advertises) are this share of the third field of tcp_wmem and tcp_rmem.
BUFFER_DATA_SHARE = 0.5
#: Unshaped links run this many times faster than the trial's fastest shaper (and at least at
#: :data:`LAN_RATE_BPS`): an emulated veth has no rate of its own, so it must never become
#: the bottleneck (a 1 Gbit/s host link would be as fast as Lab 19's 1 Gbit/s bottleneck).
UNSHAPED_RATE_FACTOR = 100
#: Linux defaults netrepro-sim uses (include/net/tcp.h: TCP_RTO_MIN = HZ/5, TCP_INIT_CWND 10).
MIN_RTO_S = 0.2
INITIAL_CWND = 10
#: The receivers' delayed-ACK timeout: Linux's (include/net/tcp.h: TCP_DELACK_MIN = TCP_ATO_MIN
#: = HZ/25; the timer starts there and grows only when ACKs are late), not ns-3's 200 ms
#: default (``ns3::TcpSocket::DelAckTimeout``). With 200 ms, a rate-limited flow whose window
#: fell to one segment waits 200 ms for each ACK; its RTO (about 0.4-0.9 s here) then fires
#: again and again: in pie-vs-red's p3, 3-7 of 20 flows timed out ~140 times in 50 s, ran at
#: a quarter of their rate, and RED's queueing delay fell from ~90 ms to ~18 ms (measured
#: 2026-11-23 with per-flow CongState traces; docs/runs/compare-pie-vs-red-repeat5-fixed-2026-11-23).
DELACK_TIMEOUT_S = 0.04
SOCKET_BUFFER_BYTES = 4 << 20
#: The fastest link an experiment is simulated at unless RATE_SCALE says otherwise, Mbit/s
#: (option ``rate_ceiling_mbit``): a faster one is scaled down by the largest k of
#: netrepro.model.choose_rate_scale's ladder that brings it here. A simulated second of a
#: bulk flow costs CPU in proportion to the link's rate (a packet is several events) and, in
#: loss recovery, to the window too: Lab 19 at 1 Gbit/s simulated its three 90 s trials in
#: 295 s, two at once, on a 2-core machine (docs/runs/rate-scale-ns3-2026-11-26); Lab 12 at
#: 10 Gbit/s would take ten times as long per simulated second, so it runs at k = 0.1.
RATE_CEILING_MBIT = 1000.0
#: The largest ``rate_ceiling_mbit``, Mbit/s: 800 Gbit/s, the fastest Ethernet rate of a standard
#: (IEEE 802.3df-2024); a conservative bound (the option only lowers the scale k, and above the
#: experiment's fastest link it has no effect).
MAX_RATE_CEILING_MBIT = 800_000.0
#: The trial starts this long after the base-RTT pings end (simulated seconds).
GAP_S = 0.5


# --- the experiment as a simulation -----------------------------------------------------------------
#: Traffic item kinds netrepro-sim runs.
TRAFFIC_KINDS = ("ftp", "ping", "iperf3")


def _hub(network: str) -> str:
    return f"lan-{network}"


def _peer(m: Model, node: str, ifname: str) -> str:
    """The simulation node at the other end of a port's link: its LAN's hub, or the node its
    cable joins."""
    itf = m.nodes[node].interfaces[ifname]
    return _hub(itf.network) if itf.network else itf.peer.node


def _senders(trial: Trial, kinds: tuple[str, ...] = ("ftp",)) -> list[str]:
    """The nodes that send the trial's traffic items of ``kinds``, sorted."""
    return sorted({it.src for it in trial.items(*kinds)})


def unmodelled(spec: Spec) -> list[str]:
    """What of ``spec``'s model (:attr:`netrepro.experiment.spec.Spec.model`) netrepro-sim cannot build,
    one phrase each naming the model's field ([] when every trial can be simulated): two links
    between one pair of nodes, offloads on, a stack other than those of
    :func:`netrepro.sites.ns3.stacks.stack_problems`, shapers at both ends of one link (a simulated link
    has one rate), a sysctl outside :data:`SYSCTLS` or a congestion control (a node's or an
    iperf3 item's) outside :data:`CONGESTION_CONTROL`, senders of one trial with different
    SACK settings (netrepro-sim has one), an FTP item whose nodes set their own socket buffers
    or whose sender paces (its flows are ns-3 applications with the scenario's sockets),
    traffic other than :data:`TRAFFIC_KINDS`, a collector at a port with no queue in the
    simulation (netem or no stack)."""
    m = spec.model
    out: list[str] = []
    cables: dict[frozenset, int] = {}
    for link in m.links:
        pair = frozenset(link.nodes)
        cables[pair] = cables.get(pair, 0) + 1
        if cables[pair] == 2:
            out.append(f"topology.nodes.{link.a.node}.interfaces.{link.a.interface}.link: a second link between "
                       f"{' and '.join(sorted(pair))} (netrepro-sim names a link by its two nodes)")
    for n in m.nodes:
        if n in {_hub(net) for net in m.networks}:
            out.append(f"topology.nodes.{n}: the simulation names a LAN's hub so; expected another node name")
    out += [f"links.offloads.{k}: true (the simulation sends packets of one MSS: offloads off)"
            for k, on in m.offloads.items() if on]
    seen: set[str] = set()

    def once(field_in_trial: str, problem: str, i: int) -> None:
        if (field_in_trial, problem) not in seen:
            seen.add((field_in_trial, problem))
            out.append(f"trials[{i}].{problem}")

    for i, t in enumerate(m.trials):
        for port, stack in t.qdiscs.items():
            for p in stacks.stack_problems(stack, f"qdiscs.{port}"):
                once(p, p, i)
        for a, b in _links(m):
            if _shaper(t, a) and _shaper(t, b):
                once(f"{a} {b}", f"qdiscs.{b}: a shaper at both ends of the link {a} - {b} (a simulated link has "
                                 f"one rate)", i)
        for node, kv in t.sysctls.items():
            for k, v in kv.items():
                if k not in SYSCTLS:
                    once(f"{node} {k}", f"sysctls.{node}.{k}: no model in the simulation", i)
                elif k == "net.ipv4.tcp_congestion_control" and v not in CONGESTION_CONTROL:
                    once(f"{node} {k}", f"sysctls.{node}.{k}: {v!r} (modelled: {', '.join(CONGESTION_CONTROL)})", i)
        senders = _senders(t, ("ftp", "iperf3"))
        values = {str(t.sysctls.get(s, {}).get("net.ipv4.tcp_sack")) for s in senders}
        if len(values) > 1:
            once("net.ipv4.tcp_sack", f"sysctls: the senders {', '.join(senders)} differ in net.ipv4.tcp_sack "
                                      f"(netrepro-sim has one SACK setting for all)", i)
        for j, it in enumerate(t.traffic):
            if it.kind not in TRAFFIC_KINDS:
                once(f"traffic {it.id}", f"traffic[{j}].kind: {it.kind!r} (item {it.id}) has no model in the "
                                            f"simulation (modelled: {', '.join(TRAFFIC_KINDS)})", i)
            elif it.kind == "iperf3" and it.congestion and it.congestion not in CONGESTION_CONTROL:
                once(f"traffic {it.id} cc", f"traffic[{j}].congestion: {it.congestion!r} (modelled: "
                                               f"{', '.join(CONGESTION_CONTROL)})", i)
            elif it.kind == "ftp":
                # the FTP sources and clients are ns-3 applications with the scenario's one socket
                # size, and unpaced
                for node in (it.src, it.dst):
                    for k in BUFFER_SYSCTLS:
                        if k in t.sysctls.get(node, {}):
                            once(f"ftp {node} {k}", f"sysctls.{node}.{k}: set on a node of FTP item {it.id} (the "
                                                    f"simulated FTP flows have one socket buffer size)", i)
                if _pacing(m, t, it.src)[0]:
                    once(f"ftp pacing {it.src}", f"qdiscs: {it.src} paces its flows (the simulated FTP "
                                                     f"sources are not paced; modelled for iperf3 items)", i)
        for j, c in enumerate(m.collectors):
            if c.kind == "qdisc_stats" and not _queue(t, c.at):
                once(f"collectors {j}", f"qdiscs.{c.at}: no shaper or queue for collectors[{j}] to sample "
                                        f"({stacks.NO_QUEUE})", i)
    return out


def _links(m: Model) -> list[tuple[str, str]]:
    """Every simulated link as its two ports: a LAN port and its hub (``lan-<network>``), or
    a cable's two ports; in node and interface order."""
    out = []
    for n, nd in m.nodes.items():
        for ifname, itf in nd.interfaces.items():
            here = Port(n, ifname).name
            if itf.network:
                out.append((here, _hub(itf.network)))
            elif [itf.link, here] not in [list(x) for x in out]:
                out.append((here, itf.link))
    return out


def _shaper(trial: Trial, port: str) -> tc.Qdisc | None:
    """The port's shaper, which sets its link's rate (:func:`netrepro.sites.ns3.stacks.root_shaper`)."""
    return stacks.root_shaper(trial.stack(port))


def _queue(trial: Trial, port: str) -> tc.Qdisc | None:
    """The layer whose queue disc the port gets (:func:`netrepro.sites.ns3.stacks.queue_layer`)."""
    return stacks.queue_layer(trial.stack(port))


def _delay_ms(trial: Trial, port: str) -> float:
    """The delay the port's stack adds, ms (:func:`netrepro.core.tc.delay_ms`)."""
    return tc.delay_ms(trial.stack(port))


def _pacing(m: Model, trial: Trial, node: str) -> tuple[bool, float]:
    """Whether ``node`` paces its TCP flows in ``trial`` and at most at which rate (Mbit/s, 0.0:
    no cap): a pacer in the stack of any of its ports (:func:`netrepro.sites.ns3.stacks.pacing`)."""
    for ifname in m.nodes[node].interfaces:
        on, rate = stacks.pacing(trial.stack(Port(node, ifname)))
        if on:
            return on, rate
    return False, 0.0


def _buffer_bytes(trial: Trial, node: str, key: str) -> int:
    """The data an iperf3 socket of ``node`` holds in ``trial``: :data:`BUFFER_DATA_SHARE` of
    the third field of its ``key`` sysctl (:data:`BUFFER_SYSCTLS`), or of Linux's default
    (:data:`LINUX_BUFFER_MAX`), bytes."""
    value = trial.sysctls.get(node, {}).get(key)
    most = int(str(value).split()[-1]) if value is not None else LINUX_BUFFER_MAX[key]
    return int(most * BUFFER_DATA_SHARE)


def unshaped_rate_bps(trial: Trial) -> int:
    """The rate of the trial's unshaped links, bit/s: :data:`UNSHAPED_RATE_FACTOR` times its
    fastest shaper, at least :data:`LAN_RATE_BPS`."""
    rates = [float(sh.params["rate_mbit"]) for st in trial.qdiscs.values() if (sh := stacks.root_shaper(st))]
    return max(LAN_RATE_BPS, round(UNSHAPED_RATE_FACTOR * max(rates, default=0.0) * 1e6))


def base_rtt_s(m: Model, time_scale: float) -> float:
    """Simulated length (s) of the base-RTT pings: ``base_rtt.duration_s`` x ``time_scale`` (0
    without ``base_rtt``)."""
    return round(float(m.base_rtt.duration_s) * time_scale, 3) if m.base_rtt else 0.0


def trial_start_s(m: Model, time_scale: float) -> float:
    """Simulated time (s) of a trial's common start: after its base-RTT pings and :data:`GAP_S`."""
    return round(base_rtt_s(m, time_scale) + GAP_S, 3)


def _tcp_setting(trial: Trial, key: str, default: str) -> str:
    """The senders' value of a sysctl (:func:`unmodelled` refuses senders that differ)."""
    return next((str(trial.sysctls[s][key]) for s in _senders(trial) if key in trial.sysctls.get(s, {})), default)


def scenario(m: Model, trial: Trial, time_scale: float, epoch0: float, repetition: int = 1,
             instance: str | None = None) -> str:
    """netrepro-sim's scenario (the directives of netrepro/sites/ns3/netrepro-sim.cc) of one trial
    of the model ``m`` (``trial``: one of ``m.trials``) at ``time_scale`` (every start and
    length multiplied by it), whose simulated time 0 is Unix time ``epoch0``: the base-RTT
    pings over [0, :func:`base_rtt_s`), then the trial from :func:`trial_start_s`.
    ``repetition`` is ns-3's run number; ``instance`` (the run's name of this trial instance)
    goes into the first line's comment only. Assumes :func:`unmodelled` found nothing."""
    k = time_scale
    t0 = trial_start_s(m, k)
    base = base_rtt_s(m, k)
    duration = round(trial.duration_s * k, 3)
    mtu = int(m.mtu_bytes)
    links = _links(m)
    cc = CONGESTION_CONTROL[_tcp_setting(trial, "net.ipv4.tcp_congestion_control", "cubic")]
    sack = str(int(_tcp_setting(trial, "net.ipv4.tcp_sack", "1")) == 1).lower()
    stop = t0 + duration + 1.5  # ping's closing statistics come 1 s after its end
    # The first line names the writer as it did before the site became a package, so that a
    # scenario's bytes (and its sha256 in run.json) stay those of earlier runs.
    lines = [f"# {m.name}, trial {instance or trial.id} (netrepro.sites.ns3.scenario)", f"epoch0 {epoch0:.6f}",
             f"stop {stop:.3f}", f"run {int(repetition)}",
             f"tcp {cc} {mtu - 52} {MIN_RTO_S} {INITIAL_CWND} {SOCKET_BUFFER_BYTES} {SOCKET_BUFFER_BYTES}",
             f"default ns3::TcpSocketBase::Sack {sack}",
             f"default ns3::TcpSocket::DelAckTimeout {DELACK_TIMEOUT_S * 1000:g}ms"]
    lines += [f"node {n}" for n in m.nodes] + [f"node {_hub(net)}" for net in m.networks]
    # each node whose congestion control differs from the scenario's default (its sysctl)
    lines += [f"congestion {n} {CONGESTION_CONTROL[str(kv['net.ipv4.tcp_congestion_control'])]}"
              for n, kv in trial.sysctls.items()
              if CONGESTION_CONTROL.get(str(kv.get("net.ipv4.tcp_congestion_control")), cc) != cc]
    rate_mbit: dict[str, float] = {}
    unshaped = unshaped_rate_bps(trial)
    for a, b in links:
        shaper = _shaper(trial, a) or _shaper(trial, b)
        one_way_s = (_delay_ms(trial, a) + _delay_ms(trial, b)) / 2 / 1000
        if shaper:
            rate_mbit[a] = rate_mbit[b] = float(shaper.params["rate_mbit"])
        lines.append(f"link {a.split(':')[0]} {b.split(':')[0]} "
                     f"{round(shaper.params['rate_mbit'] * 1e6) if shaper else unshaped} {one_way_s:g} 1")
    delay_s = max((_delay_ms(trial, p) for p in trial.qdiscs), default=0.0) / 1000
    for n, nd in m.nodes.items():
        for ifname in nd.interfaces:
            port = Port(n, ifname).name
            layer = _queue(trial, port)
            if layer:
                typeid, attrs = stacks.queue_disc(layer, rate_mbit.get(port, unshaped / 1e6), delay_s, mtu)
                if typeid in stacks.PERTURBED:
                    attrs["Perturbation"] = str(stacks.hash_perturbation(repetition, port))
                lines.append(f"qdisc {n} {_peer(m, n, ifname)} {typeid} " + " ".join(f"{a}={v}" for a, v in attrs.items()))
    for it in trial.traffic:
        if it.kind == "ping":
            node, label = it.src, m.address_toward(it.src, it.dst)
            start = t0 + round(it.start_s * k, 3)
            if base > 0:
                lines.append(f"ping {node} {it.dst} {label} {it.interval_s} 0 {base:.3f} {node}/base_rtt.txt")
            lines.append(f"ping {node} {it.dst} {label} {it.interval_s} {start:.3f} "
                         f"{start + round(it.duration_s * k, 3):.3f} {node}/ping.txt")
    for c in m.collectors:
        node, ifname = c.node, c.interface
        stack = trial.qdiscs[c.at]
        layer = _queue(trial, c.at)
        handle = layer.handle_at(stack.index(layer))
        dev = next(key for key, i in m.data_plane(node).items() if i["interface"] == ifname)
        lines.append(f"sample {node} {_peer(m, node, ifname)} {c.interval_s} {t0:.3f} {t0 + duration + 0.5:.3f} "
                     f"{node}/qdisc.jsonl {dev} {handle} {layer.kind}" + (" classes" if c.classes else ""))
    for it in trial.traffic:
        if it.kind == "ftp":
            start = t0 + round(it.start_s * k, 3)
            lines.append(f"flows {it.src} {it.dst} {m.address_toward(it.dst, it.src)} {it.flows} "
                         f"{start:.3f} {start + round(it.duration_s * k, 3):.3f} "
                         f"{int(it.max_rate_bytes_per_s) * 8} {it.dst}/flows.csv")
        elif it.kind == "iperf3":
            lines.append(_iperf3_line(m, trial, it, t0, k))
    return "\n".join(lines) + "\n"


def _iperf3_line(m: Model, trial: Trial, it: TrafficItem, t0: float, k: float) -> str:
    """The ``iperf3`` directive of an iperf3 item (iperf3(1) -c ... -P -O -t -i -C --fq-rate)
    starting at simulated time ``t0`` + its start, its times scaled by ``k``: its congestion
    control (``-C``, else the sender's sysctl, as the node's ``congestion`` line already says),
    the sender's send and the receiver's receive buffer (:func:`_buffer_bytes`), pacing (a pacer
    on the sender's port, :func:`_pacing`, or ``--fq-rate``: SO_MAX_PACING_RATE, with which
    Linux paces the socket itself, net/core/sock.c) at the lesser of their rates, and SACK."""
    paced, rate = _pacing(m, trial, it.src)
    if it.pacing_rate_mbit:
        paced, rate = True, min(r for r in (rate, float(it.pacing_rate_mbit)) if r > 0)
    sack = int(str(trial.sysctls.get(it.src, {}).get("net.ipv4.tcp_sack", "1")) == "1")
    cc = CONGESTION_CONTROL[it.congestion] if it.congestion else "-"
    return (f"iperf3 {it.src} {it.dst} {it.id} {it.parallel} {t0 + round(it.start_s * k, 3):.3f} "
            f"{round(it.omit_s * k, 3):g} {round(it.duration_s * k, 3):g} {it.interval_s:g} {cc} "
            f"{_buffer_bytes(trial, it.src, 'net.ipv4.tcp_wmem')} {_buffer_bytes(trial, it.dst, 'net.ipv4.tcp_rmem')} "
            f"{int(paced)} {round(rate * 1e6)} {sack} {it.src}/iperf3-{it.id}.json")


def _how_it_ended(returncode: int) -> str:
    """A non-zero exit of a subprocess in words: ``exit N``, or ``killed by SIGNAME`` for
    subprocess's negative return code of a signal (SIGSEGV: the simulator crashed; SIGTERM or
    SIGKILL: :meth:`~netrepro.sites.base.Site.stop_subprocesses` stopped it)."""
    if returncode > 0:
        return f"exit {returncode}"
    try:
        return f"killed by {signal.Signals(-returncode).name}"
    except ValueError:
        return f"killed by signal {-returncode}"


class Ns3Site(Site):
    """The experiment in ns-3 (see the module docstring). ``SIMULATED``: the controller runs
    each trial with :meth:`simulate` instead of playbooks on nodes."""

    name = "ns3"

    SIMULATED = True
    #: Besides Site's (state.json): the Slurm executor's job files (option ``slurm_folder``'s
    #: default). Each simulation writes into the run's folder.
    STATE_ENTRIES = Site.STATE_ENTRIES + ("slurm",)
    OPTIONS = {"rate_ceiling_mbit": Option(f"the fastest link simulated before rates are scaled down, Mbit/s, default "
                                           f"{RATE_CEILING_MBIT:g}",
                                           number_in(0, MAX_RATE_CEILING_MBIT, "a rate in Mbit/s",
                                                     "800 Gbit/s, the fastest Ethernet rate")),
               **slurm.OPTIONS}
    #: Read by netrepro-sim itself (netrepro-sim.cc, TcpTxBuffer::NextSeg), which inherits the
    #: environment.
    ENV = {"NETREPRO_SIM_CHECK": "set (to anything): netrepro-sim compares each answer of its fast path for "
                                 "ns-3's TcpTxBuffer::NextSeg with ns-3's own and stops (exit 3) at a difference; "
                                 "slower, a check of the simulator"}
    #: Measured: 5-15 s of CPU per full-length pie-vs-red trial (280 s simulated) on a 2-core
    #: machine of this kind (docs/runs/pie-vs-red-repeat5-ns3-fixed-2026-11-23/timings.json).
    TRIAL_WALL_PER_SCHEDULED_S = 0.05
    TRIAL_OVERHEAD_S = 1.0

    @classmethod
    def setup(cls, options: dict[str, str], check_only: bool = False, log=print) -> int:
        """g++, ns-3's libraries and netrepro-sim (:func:`netrepro.sites.ns3.setup.setup_ns3`);
        with option ``executor=slurm``, Slurm's commands too (:func:`netrepro.sites.ns3.slurm.missing_commands`:
        said, not installed, as the cluster's own client belongs to its administrators)."""
        from netrepro.sites.ns3.setup import setup_ns3
        code = setup_ns3(check_only, log)
        missing = slurm.missing_commands() if slurm.uses_slurm(options) else []
        if missing:
            log(f"[setup] missing for executor=slurm: {', '.join(missing)}; install the cluster's Slurm client "
                "(Debian: apt-get install slurm-client) and set SLURM_CONF to its slurm.conf (docs/sites/ns3.md)")
        return code or (1 if missing else 0)

    @classmethod
    def refuse_experiment(cls, spec: Spec, options: dict[str, Any], given: dict[str, Any] | None = None) -> None:
        """Refuse (SiteError, one line naming the file and each field) an experiment whose
        model holds what netrepro-sim cannot build (:func:`unmodelled`): before anything is
        built or run, ``plan`` and a dry run included."""
        problems = unmodelled(spec)
        if problems:
            raise SiteError(f"site ns3: {spec.path}: cannot be simulated: " + "; ".join(problems))

    def plan(self) -> str:
        head = (f"site ns3: {self.spec.name} simulated in ns-3 {NS3_VERSION} (netrepro-sim, {SOURCE.relative_to(REPO_ROOT)}); "
                "no machine is reserved")
        m = self.spec.model
        return head + "\n" + "\n".join(f"  {n}: {', '.join(m.data_plane(n))}" for n in m.nodes)

    def preflight(self) -> None:
        """Refuse what cannot be simulated (:meth:`refuse_experiment`)."""
        self.refuse_experiment(self.spec, self.options)

    def reserve(self) -> None:
        self.preflight()
        path = build()
        self.save_state({"reserved": True, "simulator": str(path), "ns3": NS3_VERSION, "provisioned": False})

    def wait_ready(self, timeout_s: float = 1800) -> None:
        return None

    def logins(self) -> dict[str, NodeLogin]:
        return {}

    def release(self) -> None:
        self.state_file.unlink(missing_ok=True)

    def status(self) -> dict[str, Any]:
        st = self.load_state()
        return {"site": "ns3", "mode": "simulation", "ns3": NS3_VERSION, "reserved": bool(st.get("reserved")),
                "simulator": st.get("simulator"),
                "rate_ceiling_mbit": float(self.options.get("rate_ceiling_mbit") or RATE_CEILING_MBIT)}

    def __init__(self, spec: Spec, state_dir: Path, options: dict[str, Any] | None = None, copy: int = 1):
        super().__init__(spec, state_dir, options, copy)   # SiteError above copy 1: runs are --jobs N here
        self._slurm: slurm.SlurmRunner | None = None   # made at the first simulation sent to Slurm

    @classmethod
    def default_jobs(cls, options: dict[str, Any]) -> int | None:
        """With the Slurm executor, :data:`netrepro.sites.ns3.slurm.JOBS_AT_ONCE` trial instances
        at once (the cluster queues them); else the runner's default (one per core)."""
        return slurm.JOBS_AT_ONCE if slurm.uses_slurm(options) else None

    def run_subprocess(self, argv: list[str]) -> subprocess.CompletedProcess:
        """As :meth:`Site.run_subprocess`, or, with option ``executor=slurm``, as a Slurm job
        (:class:`netrepro.sites.ns3.slurm.SlurmRunner`: SiteError when it does not complete)."""
        if not slurm.uses_slurm(self.options):
            return super().run_subprocess(argv)
        with self._children_lock:
            if self._children_stopped:
                raise SiteError(f"site {self.name}: stopped; {Path(argv[0]).name} was not submitted")
            if self._slurm is None:
                folder = Path(self.options.get("slurm_folder") or self.state_dir / "slurm")
                self._slurm = slurm.SlurmRunner(folder, self.options)
            runner = self._slurm
        return runner.run(argv)

    def stop_subprocesses(self, grace_s: float = 5.0) -> int:
        """As :meth:`Site.stop_subprocesses`, and every Slurm job not finished cancelled."""
        n = super().stop_subprocesses(grace_s)
        with self._children_lock:
            runner = self._slurm
        return n + (runner.stop() if runner is not None else 0)

    def simulate(self, spec: Spec, tv: dict, out_dir: Path) -> dict:
        """Run one trial instance: ``tv`` is the controller's trial vars, of which this reads
        ``trial`` (the trial's id in ``spec.model``), ``time_scale``, ``repetition`` and ``id``
        (the instance); the rest comes from ``spec.model`` (:func:`scenario`). Writes the
        scenario (``out_dir/scenario.txt``) and the raw files (``out_dir/<node>/``) and returns
        ``{"start_epoch_s", "wall_s", "scenario_sha256"}``.

        Raises:
            SiteError: netrepro-sim failed (its first line of stderr), or was stopped
                (:meth:`~netrepro.sites.base.Site.stop_subprocesses`: a negative exit, or not
                started).
        """
        sim = Path(self.load_state().get("simulator") or build())
        m = spec.model
        for n in m.nodes:
            (out_dir / n).mkdir(parents=True, exist_ok=True)
        # a whole second: every time stamp is then epoch0 + a simulated time whose float rounding
        # does not depend on the wall clock (epoch seconds of one binade share their ulp), so two
        # runs of a trial analyse to the same numbers, samples on a phase's edge included
        epoch0 = float(int(time.time()))
        k = float(tv["time_scale"])
        scen = out_dir / "scenario.txt"  # kept with the raw files: the simulation's input
        scen.write_text(scenario(m, m.trial(tv["trial"]), k, epoch0, int(tv.get("repetition", 1)), tv["id"]))
        t = time.time()
        # killable from another thread (Site.stop_subprocesses): trials simulated at once
        p = self.run_subprocess([str(sim), str(scen), str(out_dir)])
        if p.returncode != 0:
            raise SiteError(f"site ns3: netrepro-sim failed ({_how_it_ended(p.returncode)}): "
                            + (p.stderr.strip().splitlines() or ["no message"])[0][:300])
        return {"start_epoch_s": round(epoch0 + trial_start_s(m, k), 6), "wall_s": round(time.time() - t, 2),
                "scenario_sha256": hashlib.sha256(scen.read_bytes()).hexdigest()}
