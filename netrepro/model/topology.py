"""The topology's checks and queries: names a node, interface or LAN may not take, links
resolved to ports, L2 domains and their subnets, routes, and the ports a packet crosses
between two nodes (:func:`path_ports`).
"""

from __future__ import annotations

import ipaddress


from netrepro.core import tc
from netrepro.model.experiment import Model, SELECTOR_WORDS, fail, port_name
from netrepro.model.records import Port


#: Interface names a node may not give an experiment interface: ``lo`` (every namespace's
#: loopback), ``eth0`` (the management interface: netrepro/sites/local/netns.py puts it in every
#: node of the local site, testbed VMs have theirs there), ``br0`` (a switch's bridge:
#: netns.py and roles/switch_bridge's switch_bridge_name), and ``all``/``default``, the
#: kernel's per-interface sysctl folders (/proc/sys/net/ipv4/conf/all, .../default).
RESERVED_IFNAMES = ("lo", "eth0", "br0", "all", "default")


#: Words ``ip link`` reads as keywords where it expects a device name (ip-link(8), iproute2
#: 6.1: the arguments of ``ip link add/set/show`` and the commands themselves): an interface
#: named ``up`` makes ``ip link set up up`` fail.
IP_LINK_KEYWORDS = (
    "add", "addrgenmode", "address", "afstats", "allmulticast", "alias", "altname", "arp", "brd", "broadcast",
    "carrier", "change", "del", "delete", "dev", "down", "dynamic", "gro_max_size", "group", "gso_max_segs",
    "gso_max_size", "help", "index", "link", "link-netns", "link-netnsid", "list", "lst", "macaddr", "master",
    "mode", "mtu", "multicast", "name", "netns", "nomaster", "numrxqueues", "numtxqueues", "off", "on", "peer",
    "promisc", "property", "protodown", "protodown_reason", "qlen", "replace", "set", "show", "state",
    "trailers", "txqlen", "txqueuelen", "type", "up", "vf", "vrf", "xdp", "xdpdrv", "xdpgeneric",
    "xdpoffload", "xstats")


#: LAN names a site already uses: the local site names a LAN's bridge ``nr-<network>`` and its
#: management bridge ``nr-mgmt`` (netrepro/sites/local/netns.py Layout.mgmt_bridge, lan_bridge).
RESERVED_NETWORKS = ("mgmt",)


def resolve_links(nodes: dict, path) -> list[list[str]]:
    """Pair every interface that names a ``link`` with the interface at its other end."""
    links: list[list[str]] = []
    taken: set[str] = set()
    for n, nd in nodes.items():
        for ifname, itf in nd["interfaces"].items():
            here = port_name(n, ifname)
            if not itf.get("link") or here in taken:
                continue
            field = f"topology.nodes.{n}.interfaces.{ifname}.link"
            peer_node, _, peer_if = itf["link"].partition(":")
            if peer_node not in nodes:
                fail(path, field, f"unknown node {peer_node!r}; expected one of: {', '.join(nodes)}")
            if peer_node == n:
                fail(path, field, "a link joins two different nodes")
            cands = [i for i, pi in nodes[peer_node]["interfaces"].items()
                     if (not peer_if or i == peer_if)
                     and pi.get("link") in (n, here)]
            if len(cands) != 1:
                want = f"{peer_node}:{peer_if}" if peer_if else f"one interface of {peer_node}"
                fail(path, field, f"expected {want} with link: {n} (or {here}) for the other end of this cable; "
                                   f"found {len(cands)}")
            there = port_name(peer_node, cands[0])
            if there in taken:
                fail(path, field, f"{there} is already the other end of another link")
            taken.update((here, there))
            links.append([here, there])
    return links


def l2_domains(nodes: dict, links: list[list[str]]) -> list[set[str]]:
    """Sets of ports in one L2 domain (joined by links, switches and LANs)."""
    parent: dict[str, str] = {}

    def find(x):
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    def join(a, b):
        parent[find(a)] = find(b)

    for a, b in links:
        join(a, b)
    for n, nd in nodes.items():
        ports = [port_name(n, i) for i in nd["interfaces"]]
        for p in ports:
            find(p)
        if nd["kind"] == "switch":
            for p in ports[1:]:
                join(ports[0], p)
        for i, itf in nd["interfaces"].items():
            if itf.get("network"):
                join(port_name(n, i), "lan:" + itf["network"])
    groups: dict[str, set[str]] = {}
    for p in list(parent):
        if not p.startswith("lan:"):
            groups.setdefault(find(p), set()).add(p)
    return list(groups.values())


def check_names(topo: dict, path) -> None:
    """Names that mean something else are refused: a node or group named like a selector
    (:data:`SELECTOR_WORDS`), a group named like a node, an interface named as the sites'
    own (:data:`RESERVED_IFNAMES`) or as an ``ip link`` keyword (:data:`IP_LINK_KEYWORDS`),
    a LAN named as the management network (:data:`RESERVED_NETWORKS`). Each subnet of
    ``topology.networks`` is an IPv4 network with no host bits."""
    nodes = topo["nodes"]
    for net, nd in topo.get("networks", {}).items():
        if net in RESERVED_NETWORKS:
            fail(path, f"topology.networks.{net}", f"{net!r} is the sites' management network (bridge nr-{net}); "
                                                    f"expected another name")
        try:
            ipaddress.IPv4Network(nd["subnet"])
        except ValueError as exc:
            fail(path, f"topology.networks.{net}.subnet", f"expected an IPv4 network with no host bits ({exc})")
    for n, nd in nodes.items():
        if n in SELECTOR_WORDS:
            fail(path, f"topology.nodes.{n}", f"{n!r} is a selector ({', '.join(SELECTOR_WORDS)} name several nodes); "
                                               f"expected another node name")
        for j, g in enumerate(nd.get("groups", [])):
            if g in SELECTOR_WORDS or g in nodes:
                what = "a selector" if g in SELECTOR_WORDS else "a node's name"
                fail(path, f"topology.nodes.{n}.groups[{j}]", f"{g!r} is {what}; expected a group name of its own")
        for ifname in nd["interfaces"]:
            if ifname in RESERVED_IFNAMES:
                fail(path, f"topology.nodes.{n}.interfaces.{ifname}",
                      f"{ifname!r} is an interface the sites or the kernel use ({', '.join(RESERVED_IFNAMES)}); "
                      f"expected another interface name")
            if ifname in IP_LINK_KEYWORDS:
                fail(path, f"topology.nodes.{n}.interfaces.{ifname}",
                      f"{ifname!r} is a keyword of ip link (ip-link(8)); expected another interface name")


def check_address(path, field: str, addr: str) -> None:
    """An interface address: IPv4 with its prefix length, not its subnet's network or
    broadcast address (for prefixes shorter than /31, RFC 3021)."""
    try:
        a = ipaddress.IPv4Interface(addr)
    except ValueError as exc:
        fail(path, field, f"expected an IPv4 address with its prefix length ({exc})")
    if a.network.prefixlen < 31 and a.ip in (a.network.network_address, a.network.broadcast_address):
        which = "network" if a.ip == a.network.network_address else "broadcast"
        fail(path, field, f"{addr} is the {which} address of {a.network}; expected a host address")


def check_one_port_per_domain(nodes: dict, links: list[list[str]], path) -> None:
    """A host or router has at most one interface in each L2 domain (:func:`l2_domains`: a
    LAN, or ports joined by links and switches). Two interfaces of one node on one LAN would
    hold two addresses of one subnet: the node's kernel answers ARP for either address on
    both (``arp_ignore`` 0, the default: Linux Documentation/networking/ip-sysctl.rst) and
    sends the subnet's traffic out of one of them only (the first route to it), so the
    trials' qdiscs and counters on the other would see none of it. A switch's ports are one
    domain by design and are not checked.

    Raises:
        ModelError: naming the node's second interface (its ``network`` when both are on one
            LAN), both interfaces and the LAN or domain.
    """
    for dom in l2_domains(nodes, links):
        first: dict[str, str] = {}
        for p in map(Port.parse, sorted(dom)):
            if nodes[p.node]["kind"] == "switch":
                continue
            if p.node not in first:
                first[p.node] = p.interface
                continue
            a, b = first[p.node], p.interface
            ia, ib = nodes[p.node]["interfaces"][a], nodes[p.node]["interfaces"][b]
            why = ("expected one interface of a node on a LAN (on two, the node answers ARP for both addresses on "
                   "each and sends the subnet's traffic out of one only)")
            if ia["network"] and ia["network"] == ib["network"]:
                fail(path, f"topology.nodes.{p.node}.interfaces.{b}.network",
                     f"{p.node}'s interfaces {a} and {b} are both on LAN {ia['network']!r}; {why}")
            fail(path, f"topology.nodes.{p.node}.interfaces.{b}",
                 f"{p.node}'s interfaces {a} and {b} are in one L2 domain (joined by links, switches and LANs); "
                 + why.replace("on a LAN", "in an L2 domain"))


def check_subnets_apart(nodes: dict, links: list[list[str]], networks: dict, path) -> None:
    """Different L2 domains have subnets that do not overlap (a node could not tell which
    domain an address is on): each domain's subnets are its addresses' and its LANs'."""
    seen: list[tuple[ipaddress.IPv4Network, str, int]] = []  # (subnet, field, domain)
    domains = l2_domains(nodes, links)
    lans_in = {}
    for k, dom in enumerate(domains):
        for p in map(Port.parse, sorted(dom)):
            itf = nodes[p.node]["interfaces"][p.interface]
            if itf["address"]:
                seen.append((ipaddress.ip_interface(itf["address"]).network,
                             f"topology.nodes.{p.node}.interfaces.{p.interface}.address", k))
            if itf["network"]:
                lans_in.setdefault(itf["network"], k)
    for k, net in enumerate(networks):
        seen.append((ipaddress.ip_network(networks[net]["subnet"]), f"topology.networks.{net}.subnet",
                     lans_in.get(net, len(domains) + k)))
    for j, (b, fb, db) in enumerate(seen):
        for a, fa, da in seen[:j]:
            if da != db and a.overlaps(b):
                fail(path, fb, f"{b} overlaps {a} of {fa}, another L2 domain; expected subnets apart")


def check_routes(nodes: dict, path) -> None:
    """Each route's ``to`` is a network (no host bits) and its ``via`` a neighbour: an address
    in a subnet of one of the node's interfaces, not the node's own (``ip route add ... via``
    refuses a gateway it cannot reach directly: "Nexthop has invalid gateway")."""
    for n, nd in nodes.items():
        mine = [ipaddress.ip_interface(i["address"]) for i in nd["interfaces"].values() if i["address"]]
        for j, r in enumerate(nd["routes"]):
            f = f"topology.nodes.{n}.routes[{j}]"
            try:
                ipaddress.IPv4Network(r["to"])
            except ValueError as exc:
                fail(path, f + ".to", f"expected an IPv4 network with no host bits ({exc})")
            try:
                via = ipaddress.IPv4Address(r["via"])
            except ValueError as exc:
                fail(path, f + ".via", f"expected an IPv4 address ({exc})")
            if any(a.ip == via for a in mine):
                fail(path, f + ".via", f"{via} is {n}'s own address; expected a neighbour's")
            if not any(via in a.network for a in mine):
                fail(path, f + ".via", f"{via} is on no subnet of {n} "
                                        f"({', '.join(str(a.network) for a in mine) or 'it has no address'}); "
                                        f"expected a neighbour's address")


def path_ports(m: Model, src: str, dst: str) -> list[str]:
    """The ports (``NODE:INTERFACE``) a packet from ``src`` to ``dst``'s address
    (:meth:`Model.address_toward`) leaves by, in order: at each host or router the interface
    on the destination's subnet, else the one toward the ``via`` of its longest matching
    route, then every switch port on the way to the node holding that next-hop address
    (switches bridge: the shortest way through links, LANs and switches).

    Raises:
        ValueError: a node on the way has no route to the destination, the next hop cannot
            be reached through switches, or the routes loop.
    """
    target = ipaddress.ip_address(m.address_toward(src, dst))
    owner = {i.ip_interface.ip: n for n, nd in m.nodes.items() for i in nd.interfaces.values() if i.address}
    ports: list[str] = []
    node, seen = src, set()
    while owner.get(target) != node:
        if node in seen:
            raise ValueError(f"the routes toward {target} loop at {node}")
        seen.add(node)
        mine = {name: i.ip_interface for name, i in m.nodes[node].interfaces.items() if i.address}
        hop = target
        if not any(target in a.network for a in mine.values()):
            routes = [r for r in m.nodes[node].routes if target in ipaddress.ip_network(r.to)]
            if not routes:
                raise ValueError(f"{node} has no route to {target}")
            hop = ipaddress.ip_address(max(routes, key=lambda r: ipaddress.ip_network(r.to).prefixlen).via)
        egress = next((name for name, a in mine.items() if hop in a.network), None)
        if egress is None or hop not in owner:
            raise ValueError(f"{node} reaches no node at {hop}")
        ports += [p.name for p in _l2_way(m, Port(node, egress), owner[hop])]
        node = owner[hop]
    return ports


def _l2_way(m: Model, start: Port, to: str) -> list[Port]:
    """Egress ports from port ``start`` through links, LANs and switches to a port of node
    ``to`` (breadth first: the fewest switches). Raises ValueError when there is none."""
    def peers(port: Port) -> list[Port]:
        i = m.nodes[port.node].interfaces[port.interface]
        if i.peer:
            return [i.peer]
        return [Port(o, name) for o, nd in m.nodes.items() for name, j in nd.interfaces.items()
                if j.network == i.network and Port(o, name) != port]

    queue, visited = [[start]], {start}
    while queue:
        way = queue.pop(0)
        for peer in peers(way[-1]):
            if peer.node == to:
                return way
            if not m.nodes[peer.node].is_switch:
                continue
            for other in m.nodes[peer.node].interfaces:
                out = Port(peer.node, other)
                if other != peer.interface and out not in visited:
                    visited.add(out)
                    queue.append(way + [out])
    raise ValueError(f"no way from {start} to {to} through links and switches")


def layer_probes(m: Model, dev: str) -> list[tuple[str, str, str, list[str]]]:
    """``(node, interface, kind, probe argv)`` of every layer of every trial's stacks, in
    trial and port order (repeats included): each layer added alone as root of ``dev`` with
    its parameters (:func:`netrepro.core.tc.stack_probe_argvs`), so a parameter the kernel or tc
    lacks fails its probe too."""
    out = []
    for t in m.trials:
        for port, stack in t.qdiscs.items():
            p = Port.parse(port)
            out += [(p.node, p.interface, layer.kind, argv)
                    for layer, argv in zip(stack, tc.stack_probe_argvs(stack, dev))]
    return out
