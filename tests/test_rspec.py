"""Request RSpec generation: content from the spec, schema validity, committed file drift."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from lxml import etree

from netrepro.cli import site_commands as cli_sites
from netrepro.sites.instageni import rspec
from netrepro.experiment.spec import Spec, SpecError, load_spec

FIXTURES = Path(__file__).resolve().parent / "data" / "rspec"  # copies of public RSpecs, see SOURCE.md
XSD = FIXTURES / "schemas" / "protogeni-rspec-2" / "request.xsd"
G = "{%s}" % rspec.GENI_V3_NS


def test_request_has_seven_vms_two_lans_and_the_spec_addresses(spec):
    root = etree.fromstring(rspec.request_xml(spec).encode())
    nodes = root.findall(G + "node")
    assert [n.get("client_id") for n in nodes] == list(spec.nodes) and len(nodes) == 7
    for n in nodes:
        st = n.find(G + "sliver_type")
        assert st.get("name") == "emulab-xen"
        assert st.find(G + "disk_image").get("name") == rspec.DEFAULT_IMAGE
        assert n.find("{%s}routable_control_ip" % rspec.EMULAB_NS) is not None
        got = {i.get("client_id"): (i.find(G + "ip").get("address"), i.find(G + "ip").get("netmask"))
               for i in n.findall(G + "interface")}
        want = {f"{n.get('client_id')}:{i.network}": (i.ip, "255.255.255.0")
                for i in spec.nodes[n.get("client_id")].interfaces.values()}
        assert got == want
    links = {l.get("client_id"): sorted(r.get("client_id") for r in l.findall(G + "interface_ref"))
             for l in root.findall(G + "link")}
    assert links == {
        "clients_lan": sorted(["router:clients_lan", "client1:clients_lan", "client2:clients_lan", "client3:clients_lan"]),
        "servers_lan": sorted(["router:servers_lan", "server1:servers_lan", "server2:servers_lan", "server3:servers_lan"]),
    }


def test_netmask_follows_the_subnet(spec):
    # clients_lan widened to a /23, its addresses with it (a /16 would overlap servers_lan's
    # 10.10.2.0/24, which schema 2 refuses: subnets of different L2 domains lie apart)
    data = copy.deepcopy(spec.data)
    data["topology"]["networks"]["clients_lan"]["subnet"] = "10.10.0.0/23"
    for nd in data["topology"]["nodes"].values():
        for itf in nd["interfaces"].values():
            if itf.get("network") == "clients_lan":
                itf["address"] = itf["address"].replace("/24", "/23")
    root = etree.fromstring(rspec.request_xml(Spec.from_data(data)).encode())
    ip = root.find(f"{G}node[@client_id='client1']/{G}interface/{G}ip")
    assert ip.get("netmask") == "255.255.254.0"


def test_options_change_image_type_binding_and_control_ip(spec):
    opts = rspec.RSpecOptions.from_options({
        "image": "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU24-64-STD", "vm_type": "default-vm",
        "routable_control_ip": "false", "component_manager_id": "urn:publicid:IDN+instageni.rutgers.edu+authority+cm",
        "vm_cores": "2", "vm_ram_mb": 4096})
    root = etree.fromstring(rspec.request_xml(spec, opts).encode())
    n = root.find(G + "node")
    assert n.get("component_manager_id") == "urn:publicid:IDN+instageni.rutgers.edu+authority+cm"
    assert n.find(G + "sliver_type").get("name") == "default-vm"
    assert n.find(f"{G}sliver_type/{G}disk_image").get("name").endswith("UBUNTU24-64-STD")
    xen = n.find(f"{G}sliver_type/{{{rspec.EMULAB_NS}}}xen")
    assert (xen.get("cores"), xen.get("ram")) == ("2", "4096")
    assert n.find("{%s}routable_control_ip" % rspec.EMULAB_NS) is None
    assert root.find(f"{G}link/{G}component_manager").get("name") == opts.component_manager_id


@pytest.mark.parametrize("opts", [
    {}, {"routable_control_ip": False},
    {"component_manager_id": "urn:publicid:IDN+emulab.net+authority+cm", "vm_cores": 2, "vm_ram_mb": 2048},
])
def test_generated_requests_validate_against_the_protogeni_v2_schema(spec, opts):
    xml = rspec.request_xml(spec, rspec.RSpecOptions.from_options(opts))
    assert rspec.validate_request(xml, XSD) == []


def test_the_schema_check_can_fail(spec):
    root = rspec.build_request(spec)
    del root.find(G + "node").attrib["client_id"]   # required by the schema
    errors = rspec.validate_request(etree.tostring(root), XSD)
    assert errors and "client_id" in " ".join(errors)


@pytest.mark.parametrize("path", sorted((FIXTURES / "request").iterdir()), ids=lambda p: p.name)
def test_fixture_requests_validate_with_the_same_namespace_swap(path):
    assert rspec.validate_request(path.read_bytes(), XSD) == []


@pytest.mark.parametrize("bad, field", [
    ({"image": "UBUNTU22-64-STD"}, "image"), ({"routable_control_ip": "maybe"}, "routable_control_ip"),
    ({"vm_cores": "0"}, "vm_cores"), ({"vm_ram_mb": "lots"}, "vm_ram_mb"),
])
def test_bad_options_give_one_line_errors(bad, field):
    with pytest.raises(SpecError) as exc:
        rspec.RSpecOptions.from_options(bad)
    assert exc.value.field == field and "\n" not in str(exc.value) and "expected" in str(exc.value)


def test_committed_rspec_does_not_drift_from_the_spec(spec):
    path = cli_sites.committed_rspec_path(spec)
    assert path == Path(__file__).resolve().parent.parent / "rspecs" / "pie-vs-red.xml"
    assert cli_sites.rspec_drift(spec) is None, "rspecs/pie-vs-red.xml is stale: run `make rspec`"


def test_drift_is_detected(spec, tmp_path):
    path = cli_sites.write_rspec(spec, tmp_path / "r.xml")
    assert cli_sites.rspec_drift(spec, path) is None
    path.write_text(path.read_text().replace("10.10.2.3", "10.10.2.9"))
    msg = cli_sites.rspec_drift(spec, path)
    assert msg and "make rspec" in msg and str(path) in msg
    assert "missing" in cli_sites.rspec_drift(spec, tmp_path / "none.xml")


def test_rspec_refuses_a_name_that_differs_from_the_folder(spec, tmp_path):
    """`netrepro rspec X` with X's name: pie-vs-red would overwrite rspecs/pie-vs-red.xml."""
    folder = tmp_path / "copy-of-pie"
    folder.mkdir()
    (folder / "experiment.yml").write_text(spec.path.read_text())
    other = load_spec(folder)
    assert other.name == "pie-vs-red"
    with pytest.raises(SpecError, match=r"copy-of-pie/experiment.yml: name: 'pie-vs-red' differs from the experiment's "
                                        r"folder 'copy-of-pie'; expected name: copy-of-pie") as exc:
        cli_sites.write_rspec(other, tmp_path / "r.xml")
    assert exc.value.field == "name" and not (tmp_path / "r.xml").exists()
    cli_sites.check_name_matches_folder(spec)   # the committed experiment is consistent


def test_a_switched_topology_is_vms_and_one_link_per_cable():
    """Version 2: a switch is a VM whose ports have no <ip>; each cable is a link-N of two
    interfaces; the request validates against the schema."""
    spec = load_spec(Path(__file__).resolve().parent / "data" / "experiments" / "lab19-like.yml")
    xml = rspec.request_xml(spec)
    assert rspec.validate_request(xml, XSD) == []
    root = etree.fromstring(xml.encode())
    nodes = {n.get("client_id"): n for n in root.findall(G + "node")}
    assert list(nodes) == ["h1", "h2", "h3", "s1", "s2"]
    assert [(i.get("client_id"), i.find(G + "ip") is None) for i in nodes["s2"].findall(G + "interface")] == \
        [("s2:s2-eth1", True), ("s2:s2-eth2", True)]
    ip = nodes["h3"].find(G + "interface").find(G + "ip")
    assert (ip.get("address"), ip.get("netmask")) == ("10.0.0.3", "255.255.255.0")
    links = {l.get("client_id"): [r.get("client_id") for r in l.findall(G + "interface_ref")] for l in root.findall(G + "link")}
    assert links == {"link-0": ["h1:h1-eth0", "s1:s1-eth2"], "link-1": ["h2:h2-eth0", "s1:s1-eth3"],
                     "link-2": ["h3:h3-eth0", "s2:s2-eth2"], "link-3": ["s1:s1-eth1", "s2:s2-eth1"]}


@pytest.mark.parametrize("name", sorted(p.parent.name for p in (Path(__file__).resolve().parent.parent / "experiments").glob("*/experiment.yml")))
def test_every_experiments_committed_rspec_is_current(name):
    assert cli_sites.rspec_drift(load_spec(name)) is None, f"rspecs/{name}.xml is stale: run `make rspec EXPERIMENT={name}`"


EXPERIMENTS = sorted(p.parent.name for p in (Path(__file__).resolve().parent.parent / "experiments").glob("*/experiment.yml"))
TOUR = "{%s}" % rspec.TOUR_NS


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiment_has_a_cloudlab_profile_that_validates_and_is_its_topology(name, tmp_path):
    """`netrepro profile`: a repository-based CloudLab profile (profile.rspec) of each experiment,
    valid against the request schema, holding the experiment's nodes, addresses and segments,
    bound to no aggregate (the portal chooses the cluster), with its description and the steps
    from the instantiated profile to a verdict."""
    spec = load_spec(name)
    folder = rspec.write_profile(spec, tmp_path / "profile")
    xml = (folder / "profile.rspec").read_bytes()
    assert rspec.validate_request(xml, XSD) == []
    root = etree.fromstring(xml)
    m = spec.model
    nodes = root.findall(G + "node")
    assert [n.get("client_id") for n in nodes] == list(m.nodes)
    assert all(n.get("component_manager_id") is None for n in nodes)
    for n in nodes:
        want = {a["address"] for a in m.data_plane(n.get("client_id")).values() if a["address"]}
        assert {ip.get("address") for ip in n.iter(G + "ip")} == want
    links = {l.get("client_id"): sorted(r.get("client_id") for r in l.findall(G + "interface_ref"))
             for l in root.findall(G + "link")}
    assert links == {s["name"]: sorted(rspec.interface_id(nd, k) for nd, k in s["members"]) for s in m.segments()}
    tour = root.find(TOUR + "rspec_tour")
    assert tour.find(TOUR + "description").text == m.data["title"]
    steps = tour.find(TOUR + "instructions").text
    assert f"make up provision run analyze EXPERIMENT={name} SITE=instageni MANIFEST=manifest.xml" in steps
    assert "profile.rspec" in (folder / "README.md").read_text()


def test_the_profile_checks_can_fail_and_nothing_is_overwritten(spec, tmp_path):
    folder = rspec.write_profile(spec, tmp_path / "p")
    root = etree.fromstring((folder / "profile.rspec").read_bytes())
    root.find(G + "node").find(G + "interface").set("bogus", "1")   # not in the request schema
    assert rspec.validate_request(etree.tostring(root), XSD)
    before = (folder / "profile.rspec").read_bytes()
    with pytest.raises(SpecError, match=r"/p: \(folder\): exists already"):
        rspec.write_profile(spec, folder)
    assert (folder / "profile.rspec").read_bytes() == before


def test_a_title_is_text_in_the_profile_never_markup(tmp_path):
    spec = copy.deepcopy(load_spec("pie-vs-red"))
    spec.model.data["title"] = "</description><node client_id=\"evil\"/>"
    root = etree.fromstring(etree.tostring(rspec.build_profile(spec)))
    assert root.find(TOUR + "rspec_tour").find(TOUR + "description").text == "</description><node client_id=\"evil\"/>"
    assert "evil" not in [n.get("client_id") for n in root.findall(G + "node")]
