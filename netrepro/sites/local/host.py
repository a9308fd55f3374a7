"""What this machine offers the local site, and where the experiment meets its management
network: the qdiscs and TCP congestion controls its kernel can give (probed in a throwaway
namespace), its routes that overlap the management subnet, the experiment's subnets,
addresses and routes that do, and the subnet of each copy of a topology."""

from __future__ import annotations

import ipaddress
import os
import subprocess
from pathlib import Path

from netrepro.sites.errors import SiteError


def mgmt_overlap(model, subnet: str) -> tuple[str, str] | None:
    """``(field, value)`` of the first subnet, interface address or route destination of the
    experiment (a :class:`netrepro.model.Model`) that overlaps the management ``subnet``
    (CIDR), else None. Its LANs' subnets (``topology.networks.<net>.subnet``), its interfaces'
    addresses, and every node's ``routes[].to`` that lies within ``subnet`` (a default route
    does not): an overlap would send management traffic (the controller's SSH) into the experiment, or
    the experiment's into the management bridge."""
    mgmt = ipaddress.ip_network(subnet)
    for net, nd in model.networks.items():
        if ipaddress.ip_network(nd["subnet"]).overlaps(mgmt):
            return f"topology.networks.{net}.subnet", nd["subnet"]
    for node, nd in model.nodes.items():
        for itf, x in nd.interfaces.items():
            if x.address and x.ip_interface.network.overlaps(mgmt):
                return f"topology.nodes.{node}.interfaces.{itf}.address", x.address
        for j, r in enumerate(nd.routes):
            # a route to part of the management subnet (or all of it) wins over the node's own
            # route to it; a wider one (a default route) loses to it and is harmless
            if ipaddress.ip_network(r.to, strict=False).subnet_of(mgmt):
                return f"topology.nodes.{node}.routes[{j}].to", r.to
    return None


def copy_subnet(subnet: str, copy: int) -> str:
    """The management subnet of copy ``copy`` of the topology (a campaign's parallel
    reservations, 1 to N): ``subnet`` itself for copy 1, else the ``copy - 1``-th subnet of
    its size after it (172.30.0.0/24 -> 172.30.1.0/24 for copy 2), so that the copies' nodes
    have addresses apart on one host. Raises SiteError when that leaves the IPv4 space."""
    net = ipaddress.ip_network(subnet)
    try:
        return str(ipaddress.ip_network((int(net.network_address) + (copy - 1) * net.num_addresses, net.prefixlen)))
    except ValueError:
        raise SiteError(f"site local: no management subnet for copy {copy} after {subnet}; choose a lower "
                        "one with --option mgmt_subnet=<CIDR>") from None


def captured(argv: list[str], **kw) -> subprocess.CompletedProcess:
    """``argv`` run to its end, its stdout and stderr captured as text (``kw``: more of
    :func:`subprocess.run`'s arguments, such as ``timeout``)."""
    return subprocess.run(argv, capture_output=True, text=True, **kw)


def needed_qdisc_probes(model) -> dict[str, list[list[str]]]:
    """qdisc kind -> the probes (tc argv after ``tc``, device ``nrprobe0``) of every distinct
    layer of that kind in the experiment's trials (:func:`netrepro.model.layer_probes`):
    each with its own parameters, so a parameter this kernel or tc lacks fails too."""
    from netrepro.model import layer_probes
    out: dict[str, list[list[str]]] = {}
    for _, _, kind, argv in layer_probes(model, "nrprobe0"):
        if argv not in out.setdefault(kind, []):
            out[kind].append(argv)
    return out


def probe_host_qdiscs(model) -> dict[str, bool]:
    """Can this kernel add each qdisc the experiment's stacks use (:func:`needed_qdisc_probes`)?
    Tried on a veth link in a throwaway namespace.

    Returns qdisc kind -> bool (every layer of that kind added). Needs root (``ip netns add``);
    returns all False without it.
    """
    probes = needed_qdisc_probes(model)
    ns = f"nrprobe-{os.getpid()}"
    if captured(["ip", "netns", "add", ns]).returncode != 0:
        return {k: False for k in probes}
    try:
        captured(["ip", "-n", ns, "link", "add", "nrprobe0", "type", "veth", "peer", "name", "nrprobe1"])
        captured(["ip", "-n", ns, "link", "set", "nrprobe0", "up"])
        found = {}
        for kind, argvs in probes.items():
            found[kind] = True
            for argv in argvs:
                found[kind] &= captured(["tc", "-n", ns, *argv]).returncode == 0
                captured(["tc", "-n", ns, "qdisc", "del", "dev", "nrprobe0", "root"])
        return found
    finally:
        captured(["ip", "netns", "del", ns])


def probe_host_congestion(model) -> dict[str, bool]:
    """Can this kernel give each node the TCP congestion controls its trials ask for
    (:func:`netrepro.model.congestion_controls`)? ``tcp_<name>`` -> bool: the name is in
    /proc/sys/net/ipv4/tcp_available_congestion_control, after ``modprobe tcp_<name>`` as the
    kernel would load it (tcp(7))."""
    from netrepro.model import congestion_controls
    avail = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
    found = {}
    for cc in sorted({c for ccs in congestion_controls(model).values() for c in ccs}):
        have = cc in avail.read_text().split() if avail.exists() else False
        if not have:
            captured(["modprobe", "-q", f"tcp_{cc}"])
            have = avail.exists() and cc in avail.read_text().split()
        found[f"tcp_{cc}"] = have
    return found


def host_routes_overlapping(subnet: str) -> list[str]:
    """The host's IPv4 routes (``ip -4 route``, main table) whose prefix overlaps ``subnet``,
    as ``<prefix> dev <device>``; the default route is left out. [] when there are none."""
    net = ipaddress.ip_network(subnet)
    out = []
    for line in captured(["ip", "-4", "-o", "route", "show", "table", "main"]).stdout.splitlines():
        words = line.split()
        if not words or words[0] == "default":
            continue
        try:
            pfx = ipaddress.ip_network(words[0], strict=False)
        except ValueError:
            continue
        if pfx.overlaps(net):
            dev = words[words.index("dev") + 1] if "dev" in words else "?"
            out.append(f"route {pfx} dev {dev}")
    return out
