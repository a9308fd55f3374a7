"""The static site: nodes-file validation, and address matching on real `ip -j addr` output."""

from __future__ import annotations

import json
import subprocess

import pytest
import yaml

from netrepro.sites import get_site
from netrepro.sites.base import SiteError
from netrepro.sites.static.site import load_static_file, match_addresses, parse_ip_addr_json, ssh_argv

# Recorded on the development machine (iproute2 6.1) from a namespace made for the purpose:
#   ip netns add nrtest1; three veths moved in; nrm0 192.168.100.5/24, nrv0 10.10.1.254/24,
#   nrv2 10.10.2.254/24; `ip -n nrtest1 -j addr`; namespace and veths deleted afterwards.
IP_J_ADDR_ROUTER = r'''[{"ifindex": 1, "ifname": "lo", "flags": ["LOOPBACK", "UP", "LOWER_UP"], "mtu": 65536, "qdisc": "noqueue", "operstate": "UNKNOWN", "group": "default", "txqlen": 1000, "link_type": "loopback", "address": "00:00:00:00:00:00", "broadcast": "00:00:00:00:00:00", "addr_info": [{"family": "inet", "local": "127.0.0.1", "prefixlen": 8, "scope": "host", "label": "lo", "valid_life_time": 4294967295, "preferred_life_time": 4294967295}, {"family": "inet6", "local": "::1", "prefixlen": 128, "scope": "host", "valid_life_time": 4294967295, "preferred_life_time": 4294967295}]}, {"ifindex": 8, "link_index": 7, "ifname": "nrv0", "flags": ["NO-CARRIER", "BROADCAST", "MULTICAST", "UP"], "mtu": 1500, "qdisc": "noqueue", "operstate": "LOWERLAYERDOWN", "group": "default", "txqlen": 1000, "link_type": "ether", "address": "8e:8d:be:85:35:f1", "broadcast": "ff:ff:ff:ff:ff:ff", "link_netnsid": 0, "addr_info": [{"family": "inet", "local": "10.10.1.254", "prefixlen": 24, "scope": "global", "label": "nrv0", "valid_life_time": 4294967295, "preferred_life_time": 4294967295}]}, {"ifindex": 10, "link_index": 9, "ifname": "nrv2", "flags": ["NO-CARRIER", "BROADCAST", "MULTICAST", "UP"], "mtu": 1500, "qdisc": "noqueue", "operstate": "LOWERLAYERDOWN", "group": "default", "txqlen": 1000, "link_type": "ether", "address": "ba:f9:30:d2:6e:e6", "broadcast": "ff:ff:ff:ff:ff:ff", "link_netnsid": 0, "addr_info": [{"family": "inet", "local": "10.10.2.254", "prefixlen": 24, "scope": "global", "label": "nrv2", "valid_life_time": 4294967295, "preferred_life_time": 4294967295}]}, {"ifindex": 12, "link_index": 11, "ifname": "nrm0", "flags": ["NO-CARRIER", "BROADCAST", "MULTICAST", "UP"], "mtu": 1500, "qdisc": "noqueue", "operstate": "LOWERLAYERDOWN", "group": "default", "txqlen": 1000, "link_type": "ether", "address": "1e:25:38:78:57:80", "broadcast": "ff:ff:ff:ff:ff:ff", "link_netnsid": 0, "addr_info": [{"family": "inet", "local": "192.168.100.5", "prefixlen": 24, "scope": "global", "label": "nrm0", "valid_life_time": 4294967295, "preferred_life_time": 4294967295}]}]'''


@pytest.fixture(autouse=True)
def home(tmp_path, monkeypatch):
    """A home folder with ~/.ssh/id_ed25519 (a real key made by ssh-keygen) for the nodes files."""
    h = tmp_path / "home"
    (h / ".ssh").mkdir(parents=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", str(h / ".ssh" / "id_ed25519")], check=True)
    monkeypatch.setenv("HOME", str(h))
    return h


def nodes_data(spec):
    """A valid nodes file of pie-vs-red: each node's addresses keyed by its LAN (the topology's
    ``interfaces: {eth1: {network: clients_lan, address: 10.10.1.1/24}}`` gives
    ``clients_lan: 10.10.1.1``), read from the experiment file rather than the model."""
    return {"nodes": {n: {"host": f"192.0.2.{10 + i}", "user": "ubuntu", "key": "~/.ssh/id_ed25519",
                          "addresses": {x.network: x.ip for x in nd.interfaces.values()}}
                      for i, (n, nd) in enumerate(spec.nodes.items())}}


def write(tmp_path, data):
    p = tmp_path / "nodes.yml"
    p.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return p


def test_valid_file_gives_logins(spec, tmp_path, home):
    data = nodes_data(spec)
    data["nodes"]["router"].update(port=2222, proxy_jump="me@jump.example.org:22")
    data["nodes"]["server1"].update(host="2001:db8::5", proxy_jump="me@2001:db8::1:2222")
    data["nodes"]["server2"].update(host="node-2.example.org.")
    del data["nodes"]["client1"]["user"]
    logins = load_static_file(spec, write(tmp_path, data))
    assert list(logins) == list(spec.nodes)
    r = logins["router"]
    assert (r.host, r.port, r.user, r.proxy_jump) == ("192.0.2.10", 2222, "ubuntu", "me@jump.example.org:22")
    assert r.key_file == str(home / ".ssh" / "id_ed25519")
    assert (logins["client1"].user, logins["client1"].port) == ("root", 22)
    assert (logins["server1"].host, logins["server1"].proxy_jump) == ("2001:db8::5", "me@2001:db8::1:2222")


@pytest.mark.parametrize("mutate, pattern", [
    (lambda d: d["nodes"]["router"].pop("host"), r"nodes.router: missing required field \('host' is a required property\)"),
    (lambda d: d["nodes"]["router"].update(port="ssh"), r"nodes.router.port: expected type 'integer', got 'ssh'"),
    (lambda d: d["nodes"]["router"].update(port=70000), r"nodes.router.port: expected maximum 65535"),
    (lambda d: d["nodes"]["client1"]["addresses"].update(clients_lan="10.10.1.300"), r"nodes.client1.addresses.clients_lan: expected an IPv4 address, got '10.10.1.300'"),
    (lambda d: d["nodes"]["client1"].update(hostname="x"), r"nodes.client1: unknown field .*expected one of: addresses, host, key, port, ports, proxy_jump, user"),
    (lambda d: d["nodes"]["client1"].update(proxy_jump="jump.example.org"), r"nodes.client1.proxy_jump: expected user@host:port"),
    (lambda d: d["nodes"].pop("server3"), r"nodes: missing server3; expected every node of pie-vs-red"),
    (lambda d: d["nodes"].update(extra={"host": "h", "addresses": {"a": "10.0.0.1"}}), r"nodes.extra: not a node of pie-vs-red"),
    (lambda d: d["nodes"]["server2"]["addresses"].update(servers_lan="10.10.2.9"), r"nodes.server2.addresses: .*expected the topology's \{'servers_lan': '10.10.2.2'\}"),
    (lambda d: d.update(hosts=[]), r"\(top level\): unknown field"),
    # fields that reach ssh's command line: never an option, never whitespace or control characters
    (lambda d: d["nodes"]["router"].update(user="-oProxyCommand=touch${IFS}x"), r"nodes.router.user: '-oProxyCommand=.*': expected a login name"),
    (lambda d: d["nodes"]["router"].update(user="ubuntu root"), r"nodes.router.user: 'ubuntu root': expected a login name"),
    (lambda d: d["nodes"]["router"].update(host="-oProxyCommand=x"), r"nodes.router.host: '-oProxyCommand=x': expected a host name"),
    (lambda d: d["nodes"]["router"].update(host="192.0.2.1\nProxyCommand x"), r"nodes.router.host: '192.0.2.1\\nProxyCommand x': expected a host name"),
    (lambda d: d["nodes"]["router"].update(proxy_jump="-oProxyCommand=touch${IFS}x@h:22"), r"nodes.router.proxy_jump: .*expected user@host:port, a login name"),
    (lambda d: d["nodes"]["router"].update(proxy_jump="me@-oProxyCommand=x:22"), r"nodes.router.proxy_jump: .*expected user@host:port, a host name"),
    (lambda d: d["nodes"]["router"].update(proxy_jump="me@jump:99999"), r"nodes.router.proxy_jump: 'me@jump:99999': expected user@host:port$"),
    (lambda d: d["nodes"]["router"].update(key="-i/etc/passwd"), r"nodes.router.key: '-i/etc/passwd': expected a file path"),
    (lambda d: d["nodes"]["router"].update(key="~/.ssh/nope"), r"nodes.router.key: no such file '.*/home/.ssh/nope'; expected the node's SSH private key"),
    (lambda d: d["nodes"]["router"].update(key="~/.ssh/id_ed25519.pub"), r"nodes.router.key: .*id_ed25519.pub: \(content\): expected an SSH private key"),
])
def test_bad_files_give_one_line_errors(spec, tmp_path, mutate, pattern):
    data = nodes_data(spec)
    mutate(data)
    p = write(tmp_path, data)
    with pytest.raises(SiteError, match=pattern) as exc:
        load_static_file(spec, p)
    assert str(exc.value).startswith(str(p) + ": ") and "\n" not in str(exc.value)


def test_missing_and_unparsable_files(spec, tmp_path):
    with pytest.raises(SiteError, match=r"no such file; expected the static nodes YAML"):
        load_static_file(spec, tmp_path / "none.yml")
    with pytest.raises(SiteError, match=r"nodes.yml: line 3: not valid YAML"):
        load_static_file(spec, write(tmp_path, "nodes:\n  router: [\n"))
    with pytest.raises(SiteError, match=r"nodes.yml: line 3: not valid YAML: duplicate key 'router'"):
        load_static_file(spec, write(tmp_path, "nodes:\n  router: {host: a}\n  router: {host: b}\n"))
    (tmp_path / "nodes.yml").write_bytes(b"nodes:\x00\xff\xfe")
    with pytest.raises(SiteError, match=r"nodes.yml: \(file\): expected a UTF-8 text static nodes YAML, found binary"):
        load_static_file(spec, tmp_path / "nodes.yml")


def test_recorded_ip_addr_is_parsed():
    found = parse_ip_addr_json(IP_J_ADDR_ROUTER)
    assert ("nrv0", "10.10.1.254", 24) in found and ("nrv2", "10.10.2.254", 24) in found
    assert ("lo", "127.0.0.1", 8) in found and ("nrm0", "192.168.100.5", 24) in found
    assert all(":" not in a for _, a, _ in found)   # IPv6 (::1, fe80::) left out
    with pytest.raises(SiteError, match="ip -j addr: unexpected output"):
        parse_ip_addr_json("Object \"addr\" is unknown")


def test_addresses_matched_to_interfaces_found_by_address(spec):
    found = parse_ip_addr_json(IP_J_ADDR_ROUTER)
    assert match_addresses(spec, "router", found) == {"clients_lan": "nrv0", "servers_lan": "nrv2"}


def test_address_mismatches_are_reported(spec):
    found = parse_ip_addr_json(IP_J_ADDR_ROUTER)
    with pytest.raises(SiteError, match=r"node client1: clients_lan: address 10.10.1.1/24 not configured; .*found .*10.10.1.254/24 on nrv0"):
        match_addresses(spec, "client1", found)
    links = json.loads(IP_J_ADDR_ROUTER)
    for link in links:
        for a in link.get("addr_info", []):
            if a.get("local") == "10.10.2.254":
                a["prefixlen"] = 16
    with pytest.raises(SiteError, match=r"node router: servers_lan: 10.10.2.254 has prefix /16 on nrv2; expected /24"):
        match_addresses(spec, "router", parse_ip_addr_json(json.dumps(links)))


def test_reserve_checks_ssh_and_addresses_then_saves_logins(spec, tmp_path):
    calls = []
    other = json.dumps([{"ifname": "eth1", "addr_info": [
        {"family": "inet", "local": a, "prefixlen": 24} for a in ["10.10.1.1", "10.10.1.2", "10.10.1.3", "10.10.2.1", "10.10.2.2", "10.10.2.3"]]}])

    def runner(argv, timeout):
        calls.append(argv)
        assert argv[:3] == ["ssh", "-o", "BatchMode=yes"] and timeout > 0
        if argv[-1] == "true":
            return 0, "", ""
        assert argv[-3] == "--"   # the destination is never read as an option
        return 0, IP_J_ADDR_ROUTER if argv[-2].startswith("ubuntu@192.0.2.10") else other, ""

    site = get_site("static", spec, tmp_path / "run", {"static_file": str(write(tmp_path, nodes_data(spec))), "runner": runner})
    site.reserve()
    logins = site.logins()
    assert logins["router"].extra["interfaces"] == {"clients_lan": "nrv0", "servers_lan": "nrv2"}
    assert logins["client2"].extra["interfaces"] == {"clients_lan": "eth1"}
    assert len(calls) == 14
    site.release()
    site.release()
    assert not site.state_file.exists()


def test_unreachable_node_fails_naming_it(spec, tmp_path):
    def runner(argv, timeout):
        return (255, "", "ssh: connect to host 192.0.2.12 port 22: Connection refused") if "192.0.2.12" in argv[-2] else (0, IP_J_ADDR_ROUTER, "")

    site = get_site("static", spec, tmp_path / "run", {"static_file": str(write(tmp_path, nodes_data(spec))), "runner": runner})
    with pytest.raises(SiteError, match=r"node client2: ssh ubuntu@192.0.2.12 -p 22 failed \(ssh: connect to host .* refused\)"):
        site.reserve()
    assert not site.state_file.exists()


def test_ssh_argv_and_missing_option(spec, tmp_path):
    from netrepro.sites.base import NodeLogin
    argv = ssh_argv(NodeLogin("r", "2001:db8::5", 2222, "ubuntu", "/k", "me@jump:22"), "ip -j addr")
    assert argv[-3:] == ["--", "ubuntu@2001:db8::5", "ip -j addr"] and ["-p", "2222"] == argv[argv.index("-p"):argv.index("-p") + 2]
    # the jump host is reached through a ProxyCommand that carries the key (ssh -J would not)
    proxy = next(a for a in argv if a.startswith("ProxyCommand="))
    assert "-W '[%h]:%p'" in proxy and "-p 22" in proxy and "-i /k" in proxy and proxy.endswith("me@jump")
    with pytest.raises(SiteError, match="STATIC_FILE="):
        get_site("static", spec, tmp_path, {}).reserve()


def test_options_are_declared_and_checked(spec, tmp_path):
    with pytest.raises(SiteError, match=r"site static: unknown option 'user'; expected one of the site's options: "
                                         r"static_file: .*; known_hosts: "):
        get_site("static", spec, tmp_path, {"user": "me"})
    with pytest.raises(SiteError, match=r"option known_hosts='-oX': expected a file path"):
        get_site("static", spec, tmp_path, {"known_hosts": "-oX"})
    with pytest.raises(SiteError, match=r"unknown option 'runner'"):   # a hook is never text from a command line
        get_site("static", spec, tmp_path, {"runner": "sh"})
    assert not tmp_path.joinpath("state.json").exists()


def test_preflight_checks_the_file_without_contacting_nodes(spec, tmp_path):
    data = nodes_data(spec)
    data["nodes"]["client3"]["key"] = "~/.ssh/missing"

    def runner(argv, timeout):
        raise AssertionError("preflight ran " + " ".join(argv))

    site = get_site("static", spec, tmp_path / "run", {"static_file": str(write(tmp_path, data)), "runner": runner})
    with pytest.raises(SiteError, match=r"nodes.client3.key: no such file"):
        site.preflight()
    with pytest.raises(SiteError, match=r"nodes.client3.key: no such file"):
        site.reserve()
    assert not (tmp_path / "run").exists()


# Recorded on the development machine (iproute2 6.1): `ip netns add nrrec1`, two veths moved in
# and renamed ens4 and ens5 (no address, as a testbed VM's NICs before provisioning), then
# `ip -n nrrec1 -j addr`; namespace and veths deleted afterwards.
IP_J_ADDR_SWITCH = r'''[{"ifindex":1,"ifname":"lo","flags":["LOOPBACK"],"mtu":65536,"qdisc":"noop","operstate":"DOWN","group":"default","txqlen":1000,"link_type":"loopback","address":"00:00:00:00:00:00","broadcast":"00:00:00:00:00:00","addr_info":[]},{"ifindex":2,"link_index":437,"ifname":"ens4","flags":["BROADCAST","MULTICAST"],"mtu":1500,"qdisc":"noop","operstate":"DOWN","group":"default","txqlen":1000,"link_type":"ether","address":"b2:cc:ee:36:df:c0","broadcast":"ff:ff:ff:ff:ff:ff","link_netnsid":0,"addr_info":[]},{"ifindex":3,"link_index":438,"ifname":"ens5","flags":["BROADCAST","MULTICAST"],"mtu":1500,"qdisc":"noop","operstate":"DOWN","group":"default","txqlen":1000,"link_type":"ether","address":"2e:12:12:2b:48:5d","broadcast":"ff:ff:ff:ff:ff:ff","link_netnsid":0,"addr_info":[]}]'''

def switched_data():
    """A nodes file of lab19-like: hosts keyed by interface name, s2's ports named as the machine names them."""
    return {"nodes": {"h1": {"host": "192.0.2.11", "addresses": {"h1-eth0": "10.0.0.1"}},
                      "h2": {"host": "192.0.2.12", "addresses": {"h2-eth0": "10.0.0.2"}},
                      "h3": {"host": "192.0.2.13", "addresses": {"h3-eth0": "10.0.0.3"}},
                      "s1": {"host": "192.0.2.21"},
                      "s2": {"host": "192.0.2.22", "ports": {"s2-eth1": "ens4", "s2-eth2": "ens5"}}}}


def test_a_version_2_file_gives_logins_with_its_ports(switched, tmp_path):
    logins = load_static_file(switched, write(tmp_path, switched_data()))
    assert logins["h1"].extra == {"addresses": {"h1-eth0": "10.0.0.1"}, "ports": {}}
    assert logins["s1"].extra == {"addresses": {}, "ports": {}}
    assert logins["s2"].extra["ports"] == {"s2-eth1": "ens4", "s2-eth2": "ens5"}
    assert get_site("static", switched, tmp_path / "st", {"static_file": str(tmp_path / "nodes.yml")}).plan().count("(port)") == 5


@pytest.mark.parametrize("change, msg", [
    (lambda d: d["nodes"]["s2"]["ports"].update({"s2-eth9": "ens6"}),
     r"nodes.s2.ports.s2-eth9: not a port of s2 without an address; expected one of: s2-eth1, s2-eth2$"),
    (lambda d: d["nodes"]["h1"].update({"ports": {"h1-eth0": "ens4"}}),
     r"nodes.h1.ports.h1-eth0: not a port of h1 without an address; expected one of: \(none"),
    (lambda d: d["nodes"]["s2"]["ports"].update({"s2-eth1": "-oProxyCommand=x"}),
     r"nodes.s2.ports.s2-eth1: expected a network device name"),
    (lambda d: d["nodes"]["s1"].update({"addresses": {"s1-eth1": "10.0.0.9"}}),
     r"nodes.s1.addresses: .*expected the topology's \{\}"),
    (lambda d: d["nodes"]["h1"].update({"addresses": {"eth1": "10.0.0.1"}}),
     r"nodes.h1.addresses: .*expected the topology's \{'h1-eth0': '10.0.0.1'\}"),
])
def test_bad_version_2_files_give_one_line_errors(switched, tmp_path, change, msg):
    data = switched_data()
    change(data)
    with pytest.raises(SiteError, match=msg) as exc:
        load_static_file(switched, write(tmp_path, data))
    assert "\n" not in str(exc.value)


def test_ports_are_matched_to_the_machines_devices(switched):
    found = parse_ip_addr_json(IP_J_ADDR_SWITCH)
    devices = [link["ifname"] for link in json.loads(IP_J_ADDR_SWITCH)]
    assert found == []
    assert match_addresses(switched, "s2", found, {"s2-eth1": "ens4", "s2-eth2": "ens5"}, devices) == \
        {"s2-eth1": "ens4", "s2-eth2": "ens5"}
    # Unnamed ports are looked up by the model's name: this machine has none of s1's.
    with pytest.raises(SiteError, match=r"node s1: s1-eth1: no device s1-eth1; expected the switch's port .*found ens4, ens5, lo"):
        match_addresses(switched, "s1", found, {}, devices)


@pytest.mark.parametrize("value, want", [("false", {"packages_install": False}), ("yes", {"packages_install": True}),
                                         (None, {})])
def test_install_packages_option_reaches_the_inventory(spec, tmp_path, value, want):
    opts = {"static_file": str(tmp_path / "nodes.yml")}
    if value is not None:
        opts["install_packages"] = value
    got = get_site("static", spec, tmp_path / "st", opts).inventory_vars()
    assert {k: v for k, v in got.items() if k == "packages_install"} == want


@pytest.mark.parametrize("value, want", [(None, False), ("false", False), ("true", True), ("1", True)])
def test_kernel_upgrade_only_when_asked(spec, tmp_path, value, want):
    """A static node is the user's own machine: roles/kernel_capability may install a kernel
    and reboot it only with the option kernel_upgrade; the failure's hint names the option."""
    opts = {"static_file": str(tmp_path / "nodes.yml")}
    if value is not None:
        opts["kernel_upgrade"] = value
    got = get_site("static", spec, tmp_path / "st", opts).inventory_vars()
    assert got["kernel_capability_upgrade"] is want
    assert "kernel_upgrade=true" in got["kernel_capability_upgrade_hint"]
    with pytest.raises(SiteError, match="kernel_upgrade.*expected true or false"):
        get_site("static", spec, tmp_path / "st2", {**opts, "kernel_upgrade": "maybe"})


def test_install_packages_option_is_checked(spec, tmp_path):
    with pytest.raises(SiteError, match="install_packages.*expected true or false"):
        get_site("static", spec, tmp_path / "st", {"install_packages": "maybe"})
