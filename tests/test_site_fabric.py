"""The fabric site: the slice built offline with fablib, configuration checks, bastion logins."""

from __future__ import annotations

import ipaddress
import json
import subprocess

import pytest

from netrepro.cli import site_commands as cli_sites
from netrepro.sites.inventory import build_inventory
from netrepro.sites import get_site
from netrepro.sites.base import SiteError
from netrepro.sites.fabric.site import FabricOptions, build_slice, describe_slice, load_fabric_config, login_for, offline_manager, read_rc
from netrepro.experiment.spec import load_spec


@pytest.fixture(scope="module")
def built(spec, tmp_path_factory):
    fm = offline_manager(project_id="p-123", bastion_username="alice_0001", workdir=str(tmp_path_factory.mktemp("fablib")))
    opts = FabricOptions(site="UTAH", cores=4, ram_gb=16, disk_gb=20, image="default_ubuntu_24", slice_name="t")
    return build_slice(fm, spec, opts)


def test_nodes_have_the_requested_shape(built, spec):
    nodes = {n.get_name(): n for n in built.get_nodes()}
    assert list(nodes) == list(spec.nodes)
    for n in nodes.values():
        assert (n.get_site(), n.get_requested_cores(), n.get_requested_ram(), n.get_requested_disk(), n.get_image()) == \
            ("UTAH", 4, 16, 20, "default_ubuntu_24")


def test_one_nic_basic_per_interface_with_the_spec_address(built, spec):
    for node in built.get_nodes():
        want = {i.network: i.ip for i in spec.nodes[node.get_name()].interfaces.values()}
        comps = node.get_components()
        assert {c.get_model() for c in comps} == {"NIC_Basic"} and len(comps) == len(want)
        got = {}
        for c in comps:
            [iface] = c.get_interfaces()
            assert iface.get_mode() == "config"
            got[iface.get_network().get_name()] = str(iface.get_ip_addr())
        assert got == want


def test_two_l2_bridges_with_the_spec_subnets(built, spec):
    nets = {n.get_name(): n for n in built.get_networks()}
    assert set(nets) == set(spec.networks)
    for name, net in nets.items():
        assert str(net.get_type()) == "L2Bridge"
        assert net.get_subnet() == ipaddress.IPv4Network(spec.networks[name]["subnet"])
        members = sorted(i.get_node().get_name() for i in net.get_interfaces())
        assert members == sorted(n for n, nd in spec.nodes.items() if any(i.network == name for i in nd.interfaces.values()))


def test_description_lists_everything(built):
    text = describe_slice(built)
    assert "node router: site UTAH, 4 cores, 16 GB RAM, 20 GB disk, image default_ubuntu_24" in text
    assert "router-nic_clients_lan-p1 -> clients_lan 10.10.1.254 (mode config)" in text
    assert "network servers_lan: L2Bridge 10.10.2.0/24" in text


def test_plan_builds_offline_and_is_stable(spec):
    a = cli_sites.plan_text(spec, "fabric", {"fabric_site": "star", "cores": "2"})
    b = cli_sites.plan_text(spec, "fabric", {"fabric_site": "STAR", "cores": 2})
    assert a == b and "site STAR" in a and a.count("NIC_Basic") == 8 and "network clients_lan: L2Bridge" in a
    assert "planned here as UTAH" in cli_sites.plan_text(spec, "fabric", {})


def test_offline_build_needs_a_site(spec, tmp_path):
    with pytest.raises(SiteError, match="FABRIC_SITE"):
        build_slice(offline_manager(workdir=str(tmp_path)), spec, FabricOptions(site=None))
    with pytest.raises(SiteError, match=r"site option cores='x': expected a positive integer"):
        FabricOptions.from_options(spec, {"cores": "x"})


def make_rc(tmp_path, **skip):
    """A complete fabric_rc whose files hold what fablib expects: a token JSON (fake tokens),
    two private keys and a public key made by ssh-keygen."""
    files = {k: tmp_path / k for k in ("token.json", "bastion_key", "slice_key", "slice_key.pub")}
    files["token.json"].write_text(json.dumps({"id_token": "eyJ.fake", "refresh_token": "NB2.fake", "created_at": "2026-11-22"}))
    for key in ("bastion_key", "slice_key"):
        if not files[key].exists():
            subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", key, "-f", str(files[key])], check=True)
    lines = {
        "FABRIC_PROJECT_ID": "p-123", "FABRIC_TOKEN_LOCATION": files["token.json"],
        "FABRIC_BASTION_USERNAME": "alice_0001", "FABRIC_BASTION_KEY_LOCATION": files["bastion_key"],
        "FABRIC_SLICE_PRIVATE_KEY_FILE": files["slice_key"], "FABRIC_SLICE_PUBLIC_KEY_FILE": files["slice_key.pub"],
    }
    rc = tmp_path / "fabric_rc"
    rc.write_text("# fablib config\n\n" + "".join(f"export {k}={v}\n" for k, v in lines.items() if k not in skip))
    return rc


def test_config_read_from_fabric_rc(tmp_path):
    rc = make_rc(tmp_path)
    conf = load_fabric_config(env={}, rc_path=str(rc))
    assert conf["FABRIC_BASTION_USERNAME"] == "alice_0001" and conf["FABRIC_BASTION_HOST"] == "bastion.fabric-testbed.net"
    conf = load_fabric_config(env={"FABRIC_BASTION_USERNAME": "bob_0002", "FABRIC_RC": str(rc)})
    assert conf["FABRIC_BASTION_USERNAME"] == "bob_0002"


def test_missing_config_fails_at_once_naming_it(spec, tmp_path):
    rc = make_rc(tmp_path, FABRIC_BASTION_KEY_LOCATION=1)
    (tmp_path / "token.json").unlink()
    site = get_site("fabric", spec, tmp_path / "run", {"fabric_rc": str(rc), "env": {}, "fabric_site": "UTAH"})
    with pytest.raises(SiteError) as exc:
        site.reserve()
    msg = str(exc.value)
    assert "FABRIC_BASTION_KEY_LOCATION (your bastion private key" in msg and "token.json (file not found)" in msg
    assert str(rc) in msg and "\n" not in msg and not site.state_file.exists()
    with pytest.raises(SiteError, match=r"FABRIC_PROJECT_ID.*\.nope/fabric_rc"):
        load_fabric_config(env={}, rc_path=str(tmp_path / ".nope" / "fabric_rc"))


@pytest.mark.parametrize("target, content, pattern", [
    ("token.json", b"[]", r"token.json: \(top level\): a JSON list; expected the FABRIC token JSON, an object with id_token"),
    ("token.json", b"{not json", r"token.json: line 1: not valid JSON; expected the FABRIC token JSON"),
    ("token.json", b"\x89PNG\r\n\x1a\n\x00\x00", r"token.json: \(file\): binary data at byte 0"),
    ("bastion_key", b"-----BEGIN OPENSSH PRIVATE KEY-----\n!!!\n-----END OPENSSH PRIVATE KEY-----\n",
     r"bastion_key: \(content\): expected an SSH private key \(FABRIC_BASTION_KEY_LOCATION\)"),
    ("slice_key", b"\x00\x01\x02", r"slice_key: \(file\): binary data \(a NUL byte\)"),
    ("slice_key.pub", b"ssh-ed25519 AAAAC3NzaC1yc2EAAAADAQABAAABAQ me", r"slice_key.pub: \(content\): expected an SSH public key"),
    ("fabric_rc", b"export FABRIC_PROJECT_ID=\xff\xfe\n", r"fabric_rc: \(file\): binary data at byte 25; expected fablib's fabric_rc"),
])
def test_junk_in_complete_config_fails_naming_the_file(spec, tmp_path, target, content, pattern):
    rc = make_rc(tmp_path)
    (tmp_path / target).write_bytes(content)
    site = get_site("fabric", spec, tmp_path / "run", {"fabric_rc": str(rc), "env": {}, "fabric_site": "UTAH"})
    with pytest.raises(SiteError, match=pattern) as exc:
        site.preflight()
    assert "\n" not in str(exc.value)
    with pytest.raises(SiteError, match=pattern):
        site.reserve()
    assert not (tmp_path / "run").exists()


def test_bastion_login_fit_for_ssh(tmp_path):
    rc = make_rc(tmp_path)
    with pytest.raises(SiteError, match=r"fabric_rc: FABRIC_BASTION_USERNAME='-oProxyCommand=x': expected a login name"):
        load_fabric_config(env={"FABRIC_BASTION_USERNAME": "-oProxyCommand=x"}, rc_path=str(rc))


def test_options_are_declared_and_checked(spec, tmp_path):
    with pytest.raises(SiteError, match=r"site fabric: unknown option 'aggregate'; expected one of the site's options: fabric_site: "):
        get_site("fabric", spec, tmp_path, {"aggregate": "emulab"})
    with pytest.raises(SiteError, match=r"site fabric: option ram_gb='lots': expected a whole number of GB from 1 to 256"):
        get_site("fabric", spec, tmp_path, {"ram_gb": "lots"})
    with pytest.raises(SiteError, match=r"option fabric_site='UTAH; rm': expected a FABRIC site name"):
        get_site("fabric", spec, tmp_path, {"fabric_site": "UTAH; rm"})


def test_bad_rc_line(tmp_path):
    rc = tmp_path / "fabric_rc"
    rc.write_text("export FABRIC_PROJECT_ID=p\nthis is not an assignment\n")
    with pytest.raises(SiteError, match=r"fabric_rc: line 2: expected `export NAME=value`") as exc:
        read_rc(rc)
    assert "not an assignment" not in str(exc.value)   # a credential file's line is never shown


def test_bastion_logins_with_ipv6_management_addresses(spec, tmp_path):
    conf = load_fabric_config(env={}, rc_path=str(make_rc(tmp_path)))
    lg = login_for("router", "2001:400:a100:3090:f816:3eff:fe5d:8f1c", "ubuntu", conf)
    assert lg.host == "2001:400:a100:3090:f816:3eff:fe5d:8f1c" and lg.port == 22 and lg.user == "ubuntu"
    assert lg.proxy_jump == "alice_0001@bastion.fabric-testbed.net:22"
    assert lg.key_file == str(tmp_path / "slice_key") and lg.extra["proxy_key_file"] == str(tmp_path / "bastion_key")
    assert lg.extra["management_ip_version"] == 6
    assert login_for("c", "[2001:db8::1]", "ubuntu", conf).host == "2001:db8::1"
    assert login_for("c", "192.0.2.7", "rocky", conf).extra["management_ip_version"] == 4
    logins = {n: login_for(n, f"2001:db8::{i + 1}", "ubuntu", conf) for i, n in enumerate(spec.nodes)}
    inv = build_inventory(spec, logins, "fabric")
    hv = inv["all"]["children"]["routers"]["hosts"]["router"]
    assert hv["ansible_host"] == "2001:db8::1" and "ProxyCommand=" in hv["ansible_ssh_common_args"]
    assert "alice_0001@bastion.fabric-testbed.net" in hv["ansible_ssh_common_args"]


def test_release_without_reservation_is_harmless(spec, tmp_path):
    site = get_site("fabric", spec, tmp_path / "run", {"env": {}})
    site.release()
    site.release()
    with pytest.raises(SiteError, match="nothing reserved"):
        site.logins()


@pytest.fixture(scope="module")
def switched_slice(switched, tmp_path_factory):
    fm = offline_manager(workdir=str(tmp_path_factory.mktemp("fablib-sw")))
    return build_slice(fm, switched, FabricOptions(site="STAR", slice_name="sw"))


def test_a_switched_topology_is_vms_with_one_l2bridge_per_cable(switched_slice):
    """Version 2 (lab19-like): hosts get a NIC_Basic with their address; a switch's ports
    are the ports of dedicated two-port NICs, without an address; each cable is an L2Bridge
    named link-N (a subnet where an address is on it, none between the two switches)."""
    nodes = {n.get_name(): n for n in switched_slice.get_nodes()}
    assert list(nodes) == ["h1", "h2", "h3", "s1", "s2"]
    [h3_nic] = nodes["h3"].get_components()
    assert (h3_nic.get_model(), h3_nic.get_name()) == ("NIC_Basic", "h3-nic_h3-eth0")
    assert str(h3_nic.get_interfaces()[0].get_ip_addr()) == "10.0.0.3"
    s1 = sorted(nodes["s1"].get_components(), key=lambda c: c.get_name())  # fablib's order is not fixed
    assert [(c.get_model(), c.get_name(), len(c.get_interfaces())) for c in s1] == \
        [("NIC_ConnectX_5", "s1-ports0", 2), ("NIC_ConnectX_5", "s1-ports1", 2)]   # three ports: two cards
    nets = {n.get_name(): n for n in switched_slice.get_networks()}
    assert sorted(nets) == ["link-0", "link-1", "link-2", "link-3"]
    assert {str(v.get_type()) for v in nets.values()} == {"L2Bridge"}
    assert {n: nets[n].get_subnet() for n in ("link-0", "link-1", "link-2")} == dict.fromkeys(
        ("link-0", "link-1", "link-2"), ipaddress.IPv4Network("10.0.0.0/24"))
    # fablib 2.0.9 answers a network built without a subnet with a label, not an IPv4Network
    assert not isinstance(nets["link-3"].get_subnet(), ipaddress.IPv4Network)
    assert sorted(i.get_node().get_name() for i in nets["link-3"].get_interfaces()) == ["s1", "s2"]


def test_slice_interfaces_map_back_to_the_experiments_keys(switched):
    from netrepro.sites.fabric.site import segment_keys
    keys = segment_keys(switched)
    assert keys[("s2", "link-3")] == "s2-eth1" and keys[("h1", "link-0")] == "h1-eth0"
    assert segment_keys(load_spec("pie-vs-red"))[("router", "clients_lan")] == "clients_lan"


def test_switch_nic_option_is_checked(switched, tmp_path):
    site = get_site("fabric", switched, tmp_path / "f", {"switch_nic": "NIC_Basic", "fabric_site": "STAR"})
    assert site.plan().count("NIC_Basic") == 8   # 3 hosts + 5 switch ports, one card each
    with pytest.raises(SiteError, match="switch_nic"):
        get_site("fabric", switched, tmp_path / "g", {"switch_nic": "ConnectX"})
