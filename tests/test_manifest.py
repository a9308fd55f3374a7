"""Manifest parsing on every recorded manifest, and inventories from manifests."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from lxml import etree

from netrepro import cli_sites
from netrepro.manifest import parse_manifest
from netrepro.sites.base import SiteError
from netrepro.spec import load_spec

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


@pytest.fixture(scope="module")
def spec():
    return load_spec("pie-vs-red")


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
        for j, si in enumerate(nd["interfaces"]):
            itf = copy.deepcopy(itf_t)
            itf.set("client_id", f"interface-{i}-{j}")   # not a network name: matching is by address
            itf.find(f"{{{ns}}}ip").set("address", si["address"])
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
    assert sorted(inv["all"]["children"]) == ["clients", "routers", "servers"]
    for i, name in enumerate(spec.nodes):
        hv = hosts[name]
        assert (hv["ansible_host"], hv["ansible_port"], hv["ansible_user"]) == (f"{name}.example.net", 30000 + i, user)
        assert hv["netrepro_addresses"] == {x["network"]: x["address"] for x in spec.nodes[name]["interfaces"]}
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
