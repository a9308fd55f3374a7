"""Manifest parsing on every recorded manifest, and inventories from manifests."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from lxml import etree

from netrepro.cli import site_commands as cli_sites
from netrepro.sites.instageni.manifest import parse_manifest
from netrepro.sites.base import SiteError
from netrepro.experiment.spec import load_spec

MANIFESTS = Path(__file__).resolve().parent / "data" / "rspec" / "manifest"  # see its ../SOURCE.md
ALL = sorted(MANIFESTS.glob("*.xml"))

# What each recorded manifest holds (read by hand from the files).
EXPECTED = {
    "cloudlab-utah-2node-CS244-oncache.xml": {
        "user": "ingino",
        "nodes": {"node0": ("amd269.utah.cloudlab.us", 22, ["10.10.1.1"], "128.110.219.180"),
                  "node1": ("amd280.utah.cloudlab.us", 22, ["10.10.1.2"], "128.110.219.191")},
        "users": ["ingino"],
    },
    "instageni-uky-mcv-2vm-CVwithSocket.xml": {
        "user": "lei",
        "nodes": {"server": ("pcvm2-22.mcv.sdn.uky.edu", 22, ["10.10.1.1"], "128.163.233.181"),
                  "client": ("pcvm2-21.mcv.sdn.uky.edu", 22, ["10.10.1.2"], "128.163.233.180")},
        "users": ["ctony", "lei", "matta", "mirack"],
    },
}


def test_every_fixture_is_covered():
    assert ALL and {p.name for p in ALL} == set(EXPECTED)


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_parse_every_recorded_manifest(path):
    exp = EXPECTED[path.name]
    nodes = parse_manifest(path)
    assert list(nodes) == list(exp["nodes"])
    for name, (host, port, addrs, ipv4) in exp["nodes"].items():
        mn = nodes[name]
        assert sorted({u for u, _, _ in mn.logins}) == exp["users"]
        assert {(h, p) for _, h, p in mn.logins} == {(host, port)}
        assert mn.addresses == addrs and mn.control_ipv4 == ipv4
        assert mn.sliver_id.startswith("urn:publicid:IDN+")
        assert all(mac for itf in mn.interfaces for mac in [itf.mac])


def seven_node_manifest(fixture: Path, spec, out: Path, drop_port: bool = False) -> Path:
    """The fixture with its first node cloned once per spec node (client_id and addresses
    replaced), keeping the fixture's quirks: its root attributes, every <login> per member,
    <host ipv4=>, extension elements. Written as bytes with an XML declaration."""
    root = etree.fromstring(fixture.read_bytes())
    ns = etree.QName(root).namespace
    nodes = root.findall(f"{{{ns}}}node")
    template = nodes[0]
    for n in nodes:
        root.remove(n)
    for i, (name, nd) in enumerate(spec.nodes.items()):
        n = copy.deepcopy(template)
        n.set("client_id", name)
        for lg in n.iter(f"{{{ns}}}login"):
            lg.set("hostname", f"{name}.example.net")
            if drop_port:
                lg.attrib.pop("port", None)
            else:
                lg.set("port", str(30000 + i))
        itf_t = n.find(f"{{{ns}}}interface")
        for itf in n.findall(f"{{{ns}}}interface"):
            n.remove(itf)
        for j, si in enumerate(nd.interfaces.values()):  # schema 2: interface name -> {network, address/prefix}
            itf = copy.deepcopy(itf_t)
            itf.set("client_id", f"interface-{i}-{j}")   # not a network name: matching is by address
            itf.find(f"{{{ns}}}ip").set("address", si.ip)
            n.insert(len(n) - 1, itf)
        root.insert(i, n)
    out.write_bytes(etree.tostring(root, xml_declaration=True, encoding="UTF-8"))
    return out


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_inventory_from_every_manifest(path, spec, tmp_path):
    user = EXPECTED[path.name]["user"]
    m = seven_node_manifest(path, spec, tmp_path / "m.xml")
    inv = yaml.safe_load(cli_sites.inventory_from_manifest(spec, m, user))
    hosts = {h: v for g in inv["all"]["children"].values() for h, v in g["hosts"].items()}
    assert set(hosts) == set(spec.nodes)
    # a group per node kind (hosts, routers, switches: none here) and the file's own groups
    assert sorted(inv["all"]["children"]) == ["clients", "hosts", "routers", "servers", "switches"]
    for i, name in enumerate(spec.nodes):
        hv = hosts[name]
        assert (hv["ansible_host"], hv["ansible_port"], hv["ansible_user"]) == (f"{name}.example.net", 30000 + i, user)
        assert hv["netrepro_addresses"] == {x.network: x.ip for x in spec.nodes[name].interfaces.values()}
        assert hv["ansible_become"] is True
    assert inv["all"]["vars"]["netrepro_site"] == "instageni"


def test_login_without_port_means_22(spec, tmp_path):
    m = seven_node_manifest(ALL[0], spec, tmp_path / "m.xml", drop_port=True)
    inv = yaml.safe_load(cli_sites.inventory_from_manifest(spec, m, None))
    assert {v["ansible_port"] for g in inv["all"]["children"].values() for v in g["hosts"].values()} == {22}


def test_raw_fixture_against_pie_vs_red_names_the_missing_nodes(spec):
    with pytest.raises(SiteError) as exc:
        cli_sites.inventory_from_manifest(spec, MANIFESTS / "cloudlab-utah-2node-CS244-oncache.xml", "ingino")
    msg = str(exc.value)
    assert "cloudlab-utah-2node" in msg and "router" in msg and "client_id" in msg and "\n" not in msg


def test_several_users_need_a_choice(spec, tmp_path):
    m = seven_node_manifest(MANIFESTS / "instageni-uky-mcv-2vm-CVwithSocket.xml", spec, tmp_path / "m.xml")
    with pytest.raises(SiteError, match=r"several users \(ctony, lei, matta, mirack\).*--user"):
        cli_sites.inventory_from_manifest(spec, m, None)
    with pytest.raises(SiteError, match=r"no login for user 'bob'; expected one of: ctony, lei, matta, mirack"):
        cli_sites.inventory_from_manifest(spec, m, "bob")


def test_wrong_address_and_netmask_are_reported(spec, tmp_path):
    m = seven_node_manifest(ALL[0], spec, tmp_path / "m.xml")
    m.write_text(m.read_text().replace('"10.10.2.3"', '"10.10.2.33"'))
    with pytest.raises(SiteError, match=r"node server3/interface/ip/@address: 10.10.2.3 \(servers_lan\) not found.*10.10.2.33"):
        cli_sites.inventory_from_manifest(spec, m, "ingino")
    m = seven_node_manifest(ALL[0], spec, tmp_path / "m2.xml")
    root = etree.parse(str(m)).getroot()
    root.find(".//{*}node[@client_id='client2']/{*}interface/{*}ip").set("netmask", "255.255.0.0")
    m.write_bytes(etree.tostring(root))
    with pytest.raises(SiteError, match=r"client2/interface/ip/@netmask: 255.255.0.0.*expected 255.255.255.0"):
        cli_sites.inventory_from_manifest(spec, m, "ingino")


def test_node_without_login_says_the_sliver_may_not_be_ready(spec, tmp_path):
    m = seven_node_manifest(ALL[0], spec, tmp_path / "m.xml")
    root = etree.parse(str(m)).getroot()
    svc = root.find(".//{*}node[@client_id='router']/{*}services")
    svc.getparent().remove(svc)
    m.write_bytes(etree.tostring(root))
    with pytest.raises(SiteError, match=r"node router/services/login: none;.*ready"):
        cli_sites.inventory_from_manifest(spec, m, "ingino")


@pytest.mark.parametrize("content, pattern", [
    (None, r"no such manifest file"),
    (b"<rspec><node", r"line \d+: not well-formed XML"),
    (b"<html/>", r"<html>: expected a root element <rspec>"),
    (b'<rspec xmlns="http://www.geni.net/resources/rspec/3"/>', r"no <node> elements"),
    (b'<rspec><node client_id="a"><services><login username="u" hostname="h" port="ssh"/></services></node></rspec>',
     r"node a/services/login/@port: expected a TCP port number, got 'ssh'"),
    # login fields reach ssh's command line: never an option, never junk
    (b'<rspec><node client_id="a"><services><login username="-oProxyCommand=x" hostname="h"/></services></node></rspec>',
     r"node a/services/login/@username: '-oProxyCommand=x': expected a login name"),
    (b'<rspec><node client_id="a"><services><login username="u" hostname="-oProxyCommand=x"/></services></node></rspec>',
     r"node a/services/login/@hostname: '-oProxyCommand=x': expected a host name"),
    (b'<rspec><node client_id="a"><services><login username="u" hostname="h&#10;x"/></services></node></rspec>',
     r"node a/services/login/@hostname: 'h\\nx': expected a host name"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00", r"not well-formed XML"),
])
def test_bad_files_give_one_line_errors(tmp_path, content, pattern):
    p = tmp_path / "bad.xml"
    if content is not None:
        p.write_bytes(content)
    with pytest.raises(SiteError, match=pattern) as exc:
        parse_manifest(p)
    assert str(p) in str(exc.value) and "\n" not in str(exc.value)


def test_instageni_site_adopts_a_portal_manifest(spec, tmp_path):
    """MANIFEST=... USER=...: reserved through a portal; no credentials needed, release forgets."""
    from netrepro.sites import get_site
    m = seven_node_manifest(MANIFESTS / "instageni-uky-mcv-2vm-CVwithSocket.xml", spec, tmp_path / "m.xml")
    site = get_site("instageni", spec, tmp_path / "state", {"manifest": str(m), "user": "lei", "env": {}})
    site.reserve()
    site.wait_ready()
    logins = site.logins()
    assert set(logins) == set(spec.nodes) and {lg.user for lg in logins.values()} == {"lei"}
    site.reserve()  # idempotent
    site.release()
    assert not site.state_file.exists()
    site.release()  # nothing left: harmless


def test_inventory_refuses_user_and_key_unfit_for_ssh(spec, tmp_path):
    m = seven_node_manifest(ALL[0], spec, tmp_path / "m.xml")
    with pytest.raises(SiteError, match=r"--user '-oProxyCommand=x': expected a login name"):
        cli_sites.inventory_from_manifest(spec, m, "-oProxyCommand=x")
    with pytest.raises(SiteError, match=r"--key '/nonexistent/k': no such file"):
        cli_sites.inventory_from_manifest(spec, m, "ingino", key_file="/nonexistent/k")


def switched_manifest(tmp_path: Path, drop_mac: str | None = None) -> tuple[object, Path]:
    """A manifest of tests/data/experiments/lab19-like.yml (two switches, three hosts).

    No public manifest of a switched topology exists to copy, so it is made as an Emulab
    aggregate makes one from a request (compare manifest/cloudlab-utah-2node-CS244-oncache.xml):
    the generated request with ``type="manifest"``, a ``sliver_id`` per node and interface,
    a ``mac_address`` per interface (12 hex digits, no colons) and ``<services><login>``.
    ``drop_mac``: an interface client_id left without its MAC.
    """
    from netrepro.sites.instageni.rspec import GENI_V3_NS, request_xml
    spec = load_spec(Path(__file__).resolve().parent / "data" / "experiments" / "lab19-like.yml")
    root = etree.fromstring(request_xml(spec).encode())
    root.set("type", "manifest")
    g = "{%s}" % GENI_V3_NS
    for i, node in enumerate(root.findall(g + "node")):
        node.set("sliver_id", f"urn:publicid:IDN+utah.cloudlab.us+sliver+{2110400 + i}")
        for j, itf in enumerate(node.findall(g + "interface")):
            itf.set("sliver_id", f"urn:publicid:IDN+utah.cloudlab.us+sliver+{2110500 + 10 * i + j}")
            if itf.get("client_id") != drop_mac:
                itf.set("mac_address", f"02aabb{i:02x}{j:02x}01")
        services = etree.SubElement(node, g + "services")
        etree.SubElement(services, g + "login", authentication="ssh-keys", hostname=f"pc{i}.utah.cloudlab.us",
                         port="22", username="ingino")
    path = tmp_path / "manifest.xml"
    path.write_bytes(etree.tostring(root, xml_declaration=True, encoding="UTF-8"))
    return spec, path


def test_a_switched_manifest_gives_each_port_its_mac(tmp_path):
    """Hosts are matched by address, a switch's ports (no address) by client_id, and the
    inventory carries each port's MAC as `ip -j link` prints it, for roles/interfaces."""
    from netrepro.sites.inventory import build_inventory
    from netrepro.sites.instageni.manifest import logins_from_manifest
    spec, path = switched_manifest(tmp_path)
    logins = logins_from_manifest(spec, path, "ingino")
    assert logins["h1"].host == "pc0.utah.cloudlab.us" and logins["h1"].extra["macs"] == {"h1-eth0": "02aabb000001"}
    assert logins["s1"].extra["macs"] == {"s1-eth1": "02aabb030001", "s1-eth2": "02aabb030101", "s1-eth3": "02aabb030201"}
    inv = build_inventory(spec, logins, "instageni")["all"]["children"]
    s2 = inv["switches"]["hosts"]["s2"]["netrepro_interfaces"]
    assert {k: v["mac"] for k, v in s2.items()} == {"s2-eth1": "02:aa:bb:04:00:01", "s2-eth2": "02:aa:bb:04:01:01"}


def test_a_switch_port_without_a_mac_is_one_clear_line(tmp_path):
    from netrepro.sites.instageni.manifest import logins_from_manifest
    spec, path = switched_manifest(tmp_path, drop_mac="s2:s2-eth2")
    with pytest.raises(SiteError, match=r"node s2/interface\[@client_id='s2:s2-eth2'\]/@mac_address: missing; "
                                        r"expected the port's MAC") as exc:
        logins_from_manifest(spec, path, "ingino")
    assert "\n" not in str(exc.value) and str(path) in str(exc.value)
