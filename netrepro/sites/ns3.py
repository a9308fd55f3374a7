"""Site ``ns3``: the experiment simulated in ns-3 instead of emulated on machines.

Each trial is one run of ``netrepro-sim`` (netrepro/ns3/netrepro-sim.cc), a C++ program
built against the C++ libraries of the PyPI ``ns3`` wheel (:data:`NS3_VERSION`, installed by
``make setup SITE=ns3``). It writes the raw files the emulated sites write (ping -D -O lines,
``tc -s -j qdisc`` samples, the flow clients' flows.csv), so the analysis, figures and
verdict are the ones every site gets. No node, SSH or Ansible: up and provision have nothing
to do, and a trial takes seconds of CPU, not its schedule's length.

How the experiment (schema_version 1) becomes a simulation, :func:`scenario`:

- each network (LAN) is a hub node linked to each member by a :data:`LAN_RATE_BPS` link;
  ns-3's global routing gives the routes (the file's ``routes`` agree with it);
- the bottleneck node's port on the bottleneck network is a link at the bottleneck rate
  (the emulation's HTB class) with the AQM as its queue disc; every other port has a FIFO
  of 1000 packets (pfifo_fast's default length) and a one-packet device queue, so that
  queues build in the queue discs;
- a netem delay of D ms on a node's port becomes a link delay of D/2 each way: the same
  RTT, split over both directions (netem delays the port's egress only);
- TCP: the senders' ``tcp_congestion_control`` (:data:`CONGESTION_CONTROL`: reno is
  Linux's reno, ``TcpLinuxReno``), SACK as
  ``tcp_sack`` says, MSS = MTU - 52 B (Linux with timestamps), Linux's initial window (10),
  least RTO (200 ms, ``TCP_RTO_MIN``) and delayed-ACK timeout (40 ms, ``TCP_DELACK_MIN``:
  :data:`DELACK_TIMEOUT_S`), 4 MiB socket buffers (autotuning's reach);
- FTP sources: one TCP connection per flow, a BulkSend application when unlimited, else an
  OnOff application writing ``max_rate_bytes_per_s`` into the socket (vsftpd's
  ``anon_max_rate`` keeps each connection's average at the limit by sleeping);
- the AQMs' parameters: :func:`pie_attributes`, :func:`red_attributes`;
- repetition k of a repeated run uses ns-3's run number k (``RngRun``; ns-3 manual,
  "Random Variables": independent replications change the run number, not the seed): the
  same trial simulated twice gives the same files, another repetition other random drops.

Anything else is refused with one line naming it (:func:`unmodelled`): a qdisc kind,
congestion control or sysctl without a model here, and experiments of schema_version 2.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
import time
from pathlib import Path
from typing import Any

from netrepro.sites.base import NodeLogin, Site, SiteError
from netrepro.spec import REPO_ROOT, Spec, variant_rate_mbit

#: The ns-3 release of the PyPI wheel whose C++ headers and libraries netrepro-sim is built
#: against (``pip install --no-deps ns3==3.44.post0``: its cppyy Python bindings are not used).
NS3_VERSION = "3.44"
NS3_WHEEL = "ns3==3.44.post0"
#: The ns-3 libraries netrepro-sim links (``-Wl,--no-as-needed``: the traffic-control library
#: registers the queue discs' TypeIds only when it is loaded).
NS3_MODULES = ("core", "network", "internet", "point-to-point", "applications", "internet-apps",
               "traffic-control", "stats", "bridge", "mobility")
SOURCE = REPO_ROOT / "netrepro" / "ns3" / "netrepro-sim.cc"
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
#: global routing forward), the congestion control and SACK (see :func:`scenario`).
SYSCTLS = {"net.ipv4.ip_forward", "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_sack"}
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
#: The trial starts this long after the base-RTT pings end (simulated seconds).
GAP_S = 0.5


def ns3_dir() -> Path:
    """The installed wheel's ``ns3`` folder (headers in include/, libraries in lib64/)."""
    return Path(sysconfig.get_paths()["purelib"]) / "ns3"


def simulator_path() -> Path:
    """Where the built netrepro-sim is kept: named by the sha256 of its source and the ns-3
    version, so a changed source is built again (``.venv/share/netrepro/``)."""
    h = hashlib.sha256(SOURCE.read_bytes() + NS3_VERSION.encode()).hexdigest()[:12]
    return Path(sys.prefix) / "share" / "netrepro" / f"netrepro-sim-{h}"


def build_command(out: Path) -> list[str]:
    """The g++ command line that builds netrepro-sim from :data:`SOURCE` into ``out``."""
    ns3 = ns3_dir()
    libs = [f"-lns{NS3_VERSION}-{m}" for m in NS3_MODULES]
    return ["g++", "-std=c++20", "-O2", f"-I{ns3 / 'include'}", str(SOURCE), f"-L{ns3 / 'lib64'}",
            "-Wl,--no-as-needed", *libs, f"-Wl,-rpath,{ns3 / 'lib64'}", "-o", str(out)]


def build(log=print) -> Path:
    """Build netrepro-sim when missing (g++, about 10 s) and remove the builds of earlier
    sources; return its path.

    Raises:
        SiteError: the wheel is not installed or g++ is missing or fails (one line).
    """
    out = simulator_path()
    if out.is_file():
        return out
    if not (ns3_dir() / "include" / "ns3" / "core-module.h").is_file():
        raise SiteError(f"site ns3: the ns-3 {NS3_VERSION} libraries are not installed ({ns3_dir()}); "
                        "run `make setup SITE=ns3`")
    if shutil.which("g++") is None:
        raise SiteError("site ns3: g++ is missing; run `make setup SITE=ns3`")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
    log(f"[ns3] building {out.name} against ns-3 {NS3_VERSION}")
    p = subprocess.run(build_command(tmp), capture_output=True, text=True)
    if p.returncode != 0:
        tmp.unlink(missing_ok=True)
        first = next((ln for ln in p.stderr.splitlines() if "error" in ln), p.stderr.strip()[:200])
        raise SiteError(f"site ns3: building netrepro-sim failed: {first}")
    os.replace(tmp, out)
    for old in out.parent.glob("netrepro-sim-*"):  # builds of earlier sources
        if old != out and not old.name.endswith(".tmp"):
            old.unlink(missing_ok=True)
    return out


# --- the experiment as a simulation -----------------------------------------------------------------
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


def pie_attributes(params: dict, limit_packets: int, mtu: int) -> dict[str, str]:
    """ns3::PieQueueDisc attributes of a Linux sch_pie configuration (tc-pie(8) units:
    ``alpha``/``beta`` in 1/16: the paper's 0.125 and 1.25 are 2 and 20)."""
    return {"MaxSize": f"{limit_packets}p", "QueueDelayReference": f"{params.get('target_ms', 15)}ms",
            "Tupdate": f"{params.get('tupdate_ms', 15)}ms", "A": f"{params.get('alpha', 2) / 16:g}",
            "B": f"{params.get('beta', 20) / 16:g}", "MeanPktSize": str(mtu),
            "UseDequeueRateEstimator": str(bool(params.get("dq_rate_estimator", False))).lower(),
            "UseEcn": str(bool(params.get("ecn", False))).lower()}


def red_attributes(params: dict, rate_mbit: float, delay_s: float) -> dict[str, str]:
    """ns3::RedQueueDisc attributes of a Linux sch_red configuration (tc-red(8)): byte
    thresholds and limit (the queue counts bytes), max_p = ``probability`` (LInterm =
    1/max_p), the weight of :func:`tc_red_eval_ewma`, not gentle (Linux RED drops every
    packet above max), adaptive as ``adaptive``, and drops spaced as Linux spaces them
    (``Wait=false``): include/net/red.h, red_action, drops when ``p_b * count`` exceeds a
    uniform random number, so that the packets between drops are uniform on [1, 1/p_b], the
    RED paper's method; ns-3's default, ns-2's "wait" option, makes them uniform on
    [1/p_b, 2/p_b], a third of the drop rate, and RED's queue longer."""
    wlog = tc_red_eval_ewma(params["min_bytes"], params["burst_packets"], params["avpkt_bytes"])
    return {"MaxSize": f"{params['limit_bytes']}B", "MinTh": str(params["min_bytes"]), "MaxTh": str(params["max_bytes"]),
            "MeanPktSize": str(params["avpkt_bytes"]), "QW": f"{2.0 ** -wlog:.10g}",
            "LInterm": f"{1 / params['probability']:g}", "Gentle": "false", "Wait": "false",
            "ARED": str(bool(params.get("adaptive", False))).lower(),
            "LinkBandwidth": f"{params.get('bandwidth_mbit', rate_mbit):g}Mbps", "LinkDelay": f"{delay_s:g}s",
            "UseEcn": str(bool(params.get("ecn", False))).lower()}


def unmodelled(spec: Spec) -> list[str]:
    """What of ``spec`` netrepro-sim cannot model, one phrase each naming the field ([] when
    every trial can be simulated)."""
    if spec.model.data["schema_version"] != 1:
        return ["schema_version 2 (switches, qdisc stacks, iperf3): only schema_version 1 is simulated"]
    out = []
    for name, a in spec["aqms"].items():
        if a["qdisc"] not in ("pie", "red"):
            out.append(f"aqms.{name}.qdisc: {a['qdisc']!r} (modelled: pie, red)")
    for i, h in enumerate(spec.get("hosts") or []):
        for k, v in (h.get("sysctls") or {}).items():
            if k not in SYSCTLS:
                out.append(f"hosts[{i}].sysctls.{k}: no model in the simulation")
            elif k == "net.ipv4.tcp_congestion_control" and v not in CONGESTION_CONTROL:
                out.append(f"hosts[{i}].sysctls.{k}: {v!r} (modelled: {', '.join(CONGESTION_CONTROL)})")
    if (spec.get("sources") or {}).get("kind", "ftp") != "ftp":
        out.append(f"sources.kind: {spec['sources']['kind']!r} (modelled: ftp)")
    return out


def _sysctl(spec: Spec, nodes: list[str], key: str, default: Any) -> Any:
    for h in spec.get("hosts") or []:
        if set(spec.select(h["nodes"])) & set(nodes) and key in (h.get("sysctls") or {}):
            return h["sysctls"][key]
    return default


def scenario(spec: Spec, tv: dict, epoch0: float) -> str:
    """netrepro-sim's scenario of one trial (``tv``: :func:`netrepro.controller.trial_vars`,
    durations already time-scaled) whose simulated time 0 is Unix time ``epoch0``: the
    base-RTT pings over [0, base_rtt_s), then the trial from :func:`trial_start_s`."""
    t0 = trial_start_s(tv)
    hub = {net: f"lan-{net}" for net in spec.networks}
    addr = {i["address"]: n for n, node in spec.nodes.items() for i in node["interfaces"]}
    delay_ms: dict[tuple[str, str], float] = {}
    for d in spec["links"].get("delays") or []:
        for n in spec.select(d["nodes"]):
            delay_ms[(n, d["network"])] = float(d["delay_ms"])
    bn = spec["bottleneck"]
    rate = variant_rate_mbit(spec, tv["variant"])
    mtu = int(spec["links"]["mtu_bytes"])
    senders = sorted({addr[g["server_address"]] for gs in tv["flows"].values() for g in gs})
    cc = CONGESTION_CONTROL[_sysctl(spec, senders, "net.ipv4.tcp_congestion_control", "cubic")]
    sack = str(int(_sysctl(spec, senders, "net.ipv4.tcp_sack", 1)) == 1).lower()
    stop = t0 + tv["duration_s"] + 1.5  # ping's closing statistics come 1 s after its end
    lines = [f"# {spec.name}, trial {tv['id']} (netrepro.sites.ns3.scenario)", f"epoch0 {epoch0:.6f}", f"stop {stop:.3f}",
             f"run {int(tv.get('repetition', 1))}",
             f"tcp {cc} {mtu - 52} {MIN_RTO_S} {INITIAL_CWND} {SOCKET_BUFFER_BYTES} {SOCKET_BUFFER_BYTES}",
             f"default ns3::TcpSocketBase::Sack {sack}",
             f"default ns3::TcpSocket::DelAckTimeout {DELACK_TIMEOUT_S * 1000:g}ms"]
    lines += [f"node {n}" for n in spec.nodes] + [f"node {h}" for h in hub.values()]
    for n, node in spec.nodes.items():
        for i in node["interfaces"]:
            shaped = (n, i["network"]) == (bn["node"], bn["network"])
            one_way_s = delay_ms.get((n, i["network"]), 0.0) / 2 / 1000
            lines.append(f"link {n} {hub[i['network']]} {round(rate * 1e6) if shaped else LAN_RATE_BPS} "
                         f"{one_way_s:g} 1")
    aqm = spec["aqms"][tv["aqm"]]
    path_delay = max(delay_ms.values(), default=0.0) / 1000
    attrs = (pie_attributes(aqm.get("params") or {}, spec.pie_limit_packets(), mtu) if aqm["qdisc"] == "pie"
             else red_attributes(aqm["params"], rate, path_delay))
    qtype = {"pie": "ns3::PieQueueDisc", "red": "ns3::RedQueueDisc"}[aqm["qdisc"]]
    lines.append(f"qdisc {bn['node']} {hub[bn['network']]} {qtype} " + " ".join(f"{k}={v}" for k, v in attrs.items()))
    ping_end = t0 + tv["duration_s"]
    for node, p in tv["ping"].items():
        target = addr[p["target"]]
        if tv["base_rtt_s"] > 0:
            lines.append(f"ping {node} {target} {p['target']} {p['interval_s']} 0 {tv['base_rtt_s']:.3f} {node}/base_rtt.txt")
        lines.append(f"ping {node} {target} {p['target']} {p['interval_s']} {t0:.3f} {ping_end:.3f} {node}/ping.txt")
    for node, q in tv["qdisc_stats"].items():
        lines.append(f"sample {node} {hub[q['network']]} {q['interval_s']} {t0:.3f} {ping_end + 0.5:.3f} "
                     f"{node}/qdisc.jsonl {q['network']} {bn.get('aqm_handle', '10:')} {aqm['qdisc']}")
    src = (spec["variants"][tv["variant"]].get("source") or {}).get("max_rate_bytes_per_s", 0)
    for client, groups in tv["flows"].items():
        for g in groups:
            server = addr[g["server_address"]]
            start = t0 + g["start_s"]
            lines.append(f"flows {server} {client} {g['server_address']} {g['flows']} {start:.3f} "
                         f"{start + g['duration_s']:.3f} {int(src) * 8} {client}/flows.csv")
    return "\n".join(lines) + "\n"


def trial_start_s(tv: dict) -> float:
    """Simulated time (s) of a trial's common start: after its base-RTT pings and :data:`GAP_S`."""
    return round(tv["base_rtt_s"] + GAP_S, 3)


class Ns3Site(Site):
    """The experiment in ns-3 (see the module docstring). ``SIMULATED``: the controller runs
    each trial with :meth:`simulate` instead of playbooks on nodes."""

    name = "ns3"
    SIMULATED = True
    #: Measured: 5-15 s of CPU per full-length pie-vs-red trial (280 s simulated) on a 2-core
    #: machine of this kind (docs/runs/pie-vs-red-repeat5-ns3-fixed-2026-11-23/timings.json).
    TRIAL_WALL_PER_SCHEDULED_S = 0.05
    TRIAL_OVERHEAD_S = 1.0

    def plan(self) -> str:
        problems = unmodelled(self.spec)
        head = (f"site ns3: {self.spec.name} simulated in ns-3 {NS3_VERSION} (netrepro-sim, {SOURCE.relative_to(REPO_ROOT)}); "
                "no machine is reserved")
        if problems:
            return head + "\ncannot be simulated: " + "; ".join(problems)
        return head + "\n" + "\n".join(f"  {n}: {', '.join(i['network'] for i in node['interfaces'])}"
                                       for n, node in self.spec.nodes.items())

    def preflight(self) -> None:
        """Refuse what cannot be simulated (one line naming the fields)."""
        problems = unmodelled(self.spec)
        if problems:
            raise SiteError(f"site ns3: {self.spec.name} cannot be simulated: " + "; ".join(problems))

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
                "simulator": st.get("simulator")}

    def simulate(self, spec: Spec, tv: dict, out_dir: Path) -> dict:
        """Run one trial: write its scenario (``out_dir/scenario.txt``) and its raw files
        (``out_dir/<node>/``) and return ``{"start_epoch_s", "wall_s", "scenario_sha256"}``.

        Raises:
            SiteError: netrepro-sim failed (its first line of stderr).
        """
        sim = Path(self.load_state().get("simulator") or build())
        for n in spec.nodes:
            (out_dir / n).mkdir(parents=True, exist_ok=True)
        epoch0 = time.time()
        scen = out_dir / "scenario.txt"  # kept with the raw files: the simulation's input
        scen.write_text(scenario(spec, tv, epoch0))
        t = time.time()
        p = subprocess.run([str(sim), str(scen), str(out_dir)], capture_output=True, text=True)
        if p.returncode != 0:
            raise SiteError(f"site ns3: netrepro-sim failed (exit {p.returncode}): "
                            + (p.stderr.strip().splitlines() or ["no message"])[0][:300])
        return {"start_epoch_s": round(epoch0 + trial_start_s(tv), 6), "wall_s": round(time.time() - t, 2),
                "scenario_sha256": hashlib.sha256(scen.read_bytes()).hexdigest()}
