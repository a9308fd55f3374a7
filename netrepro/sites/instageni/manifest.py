"""Parse a GENI v3 manifest RSpec (lxml) into per-node SSH logins and data-plane addresses.

Source: the manifest an aggregate returns (AM API v3 ``Describe``/``Provision``) or the one a
user saves from a web portal (CloudLab "Manifest" tab, Jacks). Real manifests have quirks this
parser tolerates (see tests/data/rspec/SOURCE.md):

- the root may say ``type="request"`` although it is a manifest: the attribute is ignored;
- one ``<login>`` per slice member: the one whose ``username`` is the configured user is
  taken; without a configured user, the only user present (error when several);
- ``<login>`` without ``port`` means port 22;
- an XML encoding declaration (parsed as bytes);
- elements in the GENI v3 namespace, the ProtoGENI v2 one, or none;
- interfaces whose ``client_id`` does not name a network (``interface-0``): the spec's nodes
  are matched by ``client_id`` and their interfaces by address, never by interface name.

A login's ``username`` and ``hostname`` reach ssh's command line, so they are checked like a
static site's (a login name; a host name or IP address; neither may start with ``-``).

Errors raise :class:`netrepro.sites.errors.SiteError` with a one-line message naming the file,
the field and what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from netrepro.sites.errors import SiteError
from netrepro.sites.login import NodeLogin, login_user_problem, ssh_host_problem
from netrepro.sites.instageni.rspec import interface_id
from netrepro.experiment.spec import Spec

#: Namespaces a manifest's core elements may be in.
CORE_NAMESPACES = ("http://www.geni.net/resources/rspec/3", "http://www.protogeni.net/resources/rspec/2", "")


@dataclass
class ManifestInterface:
    """One ``<interface>`` of a manifest node: ``client_id``, ``mac`` (or None), and its
    ``<ip>`` entries as (address, netmask or None) pairs."""

    client_id: str
    mac: str | None = None
    ips: list[tuple[str, str | None]] = field(default_factory=list)


@dataclass
class ManifestNode:
    """One ``<node>`` of a manifest.

    Attributes:
        client_id: the node's name in the request.
        sliver_id: the sliver URN (None before allocation).
        logins: ``<services><login>`` entries as (username, hostname, port) triples.
        control_host: ``<host name=>`` (the node's control DNS name) or None.
        control_ipv4: ``<host ipv4=>`` or None.
        interfaces: the node's data-plane interfaces.
    """

    client_id: str
    sliver_id: str | None
    logins: list[tuple[str, str, int]]
    control_host: str | None
    control_ipv4: str | None
    interfaces: list[ManifestInterface]

    @property
    def addresses(self) -> list[str]:
        """Every data-plane IPv4 address of the node."""
        return [ip for itf in self.interfaces for ip, _ in itf.ips]


def _local(tag) -> str:
    return tag.rsplit("}", 1)[-1] if isinstance(tag, str) else ""


def _ns(tag) -> str:
    return tag[1:].split("}", 1)[0] if isinstance(tag, str) and tag.startswith("{") else ""


def _children(el, name: str):
    return [c for c in el if _local(c.tag) == name and _ns(c.tag) in CORE_NAMESPACES]


def parse_manifest(path: Path | str) -> dict[str, ManifestNode]:
    """Parse the manifest at ``path``: node ``client_id`` -> :class:`ManifestNode`, in file order.

    Raises:
        SiteError: the file is missing, not XML, not an RSpec, or a field has the wrong form.
    """
    from lxml import etree

    path = Path(path)
    if not path.is_file():
        raise SiteError(f"{path}: (file): no such manifest file; expected the manifest RSpec saved from the aggregate or portal")
    try:
        root = etree.fromstring(path.read_bytes(), etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError as exc:
        raise SiteError(f"{path}: line {exc.lineno}: not well-formed XML ({exc.msg}); expected a manifest RSpec") from None
    if _local(root.tag) != "rspec":
        raise SiteError(f"{path}: <{_local(root.tag)}>: expected a root element <rspec> (a GENI v3 manifest)")
    nodes: dict[str, ManifestNode] = {}
    for i, ne in enumerate(_children(root, "node")):
        cid = ne.get("client_id")
        if not cid:
            raise SiteError(f"{path}: node[{i}]/@client_id: missing; expected the node's name from the request")
        logins: list[tuple[str, str, int]] = []
        for sv in _children(ne, "services"):
            for lg in _children(sv, "login"):
                user, host, port = lg.get("username"), lg.get("hostname"), lg.get("port", "22")
                if not user or not host:
                    raise SiteError(f"{path}: node {cid}/services/login: expected attributes username and hostname")
                try:
                    port_n = int(port)
                except ValueError:
                    port_n = 0
                if not 0 < port_n < 65536:
                    raise SiteError(f"{path}: node {cid}/services/login/@port: expected a TCP port number, got {port!r}")
                for attr, value, check in (("username", user, login_user_problem), ("hostname", host, ssh_host_problem)):
                    problem = check(value)
                    if problem:   # it would reach ssh's command line: never an option, never junk
                        raise SiteError(f"{path}: node {cid}/services/login/@{attr}: {value!r}: {problem}")
                logins.append((user, host, port_n))
        hosts = _children(ne, "host")
        itfs = []
        for ie in _children(ne, "interface"):
            ips = [(ip.get("address"), ip.get("netmask")) for ip in _children(ie, "ip")
                   if ip.get("address") and ip.get("type", "ipv4").lower() == "ipv4"]
            itfs.append(ManifestInterface(ie.get("client_id", ""), ie.get("mac_address"), ips))
        nodes[cid] = ManifestNode(cid, ne.get("sliver_id"), logins,
                                  hosts[0].get("name") if hosts else None,
                                  hosts[0].get("ipv4") if hosts else None, itfs)
    if not nodes:
        raise SiteError(f"{path}: node: no <node> elements; expected a manifest with the slice's nodes")
    return nodes


def sliver_nodes(text: str) -> dict[str, str]:
    """Sliver URN -> node name (``client_id``) of a manifest given as text (an AM API v3
    Allocate result's ``geni_rspec``: each ``<node>``'s ``sliver_id``), for naming the node of a
    sliver the aggregate reports. {} when the text is not XML or names no sliver."""
    from lxml import etree

    try:
        root = etree.fromstring(text.encode(), etree.XMLParser(resolve_entities=False, no_network=True))
    except etree.XMLSyntaxError:
        return {}
    return {n.get("sliver_id"): n.get("client_id") for n in root.iter()
            if _local(n.tag) == "node" and _ns(n.tag) in CORE_NAMESPACES and n.get("sliver_id") and n.get("client_id")}


def choose_login(path: Path | str, node: ManifestNode, user: str | None) -> tuple[str, str, int]:
    """The (username, hostname, port) to use for ``node``.

    ``user`` given: the login with that username. ``user`` None: the only username present.
    Raises SiteError naming the usernames present when there is no unique choice.
    """
    if not node.logins:
        raise SiteError(f"{path}: node {node.client_id}/services/login: none; expected a <login> per slice member "
                        "(is the sliver ready? save the manifest again once it is)")
    names = sorted({u for u, _, _ in node.logins})
    if user is None:
        if len(names) > 1:
            raise SiteError(f"{path}: node {node.client_id}/services/login/@username: several users ({', '.join(names)}); "
                            "expected one chosen with --user NAME")
        return node.logins[0]
    for lg in node.logins:
        if lg[0] == user:
            return lg
    raise SiteError(f"{path}: node {node.client_id}/services/login/@username: no login for user {user!r}; "
                    f"expected one of: {', '.join(names)}")


def logins_from_manifest(spec: Spec, path: Path | str, user: str | None = None,
                         key_file: str | None = None) -> dict[str, NodeLogin]:
    """Node name -> NodeLogin for every node of ``spec``, from the manifest at ``path``.

    Each node of the experiment's model must appear with its name as ``client_id``. Each
    interface with an address (:meth:`netrepro.model.Model.data_plane`) must be carried by
    one of the node's manifest interfaces (the manifest's netmask, when given, must match
    the model's prefix length); each interface without one (a switch's port) is found by
    the request's ``client_id`` ``<node>:<key>`` (:func:`netrepro.sites.instageni.rspec.interface_id`) and
    must have a ``mac_address``, by which roles/interfaces finds its device. ``extra`` of
    each login holds ``sliver_id``, ``control_host``, ``control_ipv4`` and ``macs`` (key ->
    MAC from the manifest, when present).

    Raises:
        SiteError: a node, address or port is missing or differs (one line: file, field, expected).
    """
    import ipaddress


    nodes = parse_manifest(path)
    m = spec.model
    missing = [n for n in m.nodes if n not in nodes]
    if missing:
        raise SiteError(f"{path}: node/@client_id: no node named {', '.join(missing)}; expected the nodes of {spec.name} "
                        f"({', '.join(m.nodes)}), found {', '.join(nodes)}")
    out: dict[str, NodeLogin] = {}
    for name in m.nodes:
        mn = nodes[name]
        login_user, host, port = choose_login(path, mn, user)
        macs = {}
        for key, itf in m.data_plane(name).items():
            want = itf["address"]
            if not want:
                cid = interface_id(name, key)
                mi = next((mi for mi in mn.interfaces if mi.client_id == cid), None)
                if mi is None or not mi.mac:
                    have = ", ".join(mi.client_id for mi in mn.interfaces) or "none"
                    raise SiteError(f"{path}: node {name}/interface[@client_id='{cid}']/@mac_address: "
                                    f"{'no such interface' if mi is None else 'missing'}; expected the port's MAC "
                                    f"(interfaces found: {have})")
                macs[key] = mi.mac
                continue
            found = [(mi, nm) for mi in mn.interfaces for ip, nm in mi.ips if ip == want]
            if not found:
                raise SiteError(f"{path}: node {name}/interface/ip/@address: {want} ({key}) not found; "
                                f"expected the experiment's address, found {', '.join(mn.addresses) or 'none'}")
            mi, netmask = found[0]
            subnet = ipaddress.ip_network(f"{want}/{itf['prefixlen']}", strict=False)
            if netmask and netmask != str(subnet.netmask):
                raise SiteError(f"{path}: node {name}/interface/ip/@netmask: {netmask} for {want}; "
                                f"expected {subnet.netmask} ({key} {subnet})")
            if mi.mac:
                macs[key] = mi.mac
        out[name] = NodeLogin(name=name, host=host, port=port, user=login_user, key_file=key_file,
                              extra={"sliver_id": mn.sliver_id, "control_host": mn.control_host,
                                     "control_ipv4": mn.control_ipv4, "macs": macs})
    return out
