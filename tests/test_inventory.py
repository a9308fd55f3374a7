"""Tests of netrepro/sites/inventory.py: the Ansible inventory built from the spec and the logins."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from netrepro.sites.inventory import (build_inventory, dump_inventory, known_hosts_lines, ssh_common_args, write_inventory,
                                write_known_hosts)
from netrepro.sites.base import NodeLogin
from netrepro.experiment.spec import Spec, load_spec

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = REPO / ".venv" / "bin"


def logins_for(spec: Spec, **kw) -> dict[str, NodeLogin]:
    return {n: NodeLogin(name=n, host=f"172.30.0.{11 + i}", **kw) for i, n in enumerate(spec.nodes)}


def _opts(args: str) -> dict[str, str]:
    """``-o K=V`` pairs of an ssh_common_args string, split as Ansible splits it (shlex)."""
    argv = shlex.split(args)
    assert all(a == "-o" for a in argv[0::2]), argv
    return dict(v.split("=", 1) for v in argv[1::2])


# --- ssh_common_args ---------------------------------------------------------------------------
def test_ssh_args_plain_login_has_only_the_keepalives():
    assert ssh_common_args(NodeLogin("client1", "10.0.0.1")) == "-o ServerAliveInterval=15 -o ServerAliveCountMax=4"


def test_ssh_args_known_hosts_and_control_dir():
    o = _opts(ssh_common_args(NodeLogin("client1", "10.0.0.1"), known_hosts="/s/known_hosts", control_dir="/cp"))
    assert o == {"UserKnownHostsFile": "/s/known_hosts", "StrictHostKeyChecking": "accept-new",
                 "ControlMaster": "auto", "ControlPersist": "1800s", "ControlPath": "/cp/%C",
                 "ServerAliveInterval": "15", "ServerAliveCountMax": "4"}


def test_ssh_args_proxy_jump_with_key_and_known_hosts():
    lg = NodeLogin("client1", "172.30.0.12", key_file="/s/id_ed25519", proxy_jump="root@127.0.0.1:2222")
    o = _opts(ssh_common_args(lg, known_hosts="/s/kh"))
    inner = shlex.split(o["ProxyCommand"])
    assert inner[:3] == ["ssh", "-W", "[%h]:%p"]  # brackets: a bare IPv6 node address works too
    assert inner[inner.index("-p") + 1] == "2222"
    assert inner[inner.index("-i") + 1] == "/s/id_ed25519"
    assert "IdentitiesOnly=yes" in inner and "BatchMode=yes" in inner
    assert "UserKnownHostsFile=/s/kh" in inner and "StrictHostKeyChecking=accept-new" in inner
    # the jump host's connection is kept alive as the node's is
    assert "ServerAliveInterval=15" in inner and "ServerAliveCountMax=4" in inner
    assert o["ServerAliveInterval"] == "15" and o["ServerAliveCountMax"] == "4"
    assert inner[-1] == "root@127.0.0.1"
    assert not any(x.startswith("ControlPath") for x in inner)


def test_ssh_args_proxy_key_file_wins_for_the_jump():
    lg = NodeLogin("client1", "2001:db8::5", user="ubuntu", key_file="/k/slice_key",
                   proxy_jump="me_0001@bastion.fabric-testbed.net:22", extra={"proxy_key_file": "/k/bastion_key"})
    o = _opts(ssh_common_args(lg))
    inner = shlex.split(o["ProxyCommand"])
    assert inner[inner.index("-i") + 1] == "/k/bastion_key"
    assert "/k/slice_key" not in inner
    assert inner[inner.index("-p") + 1] == "22"
    assert inner[-1] == "me_0001@bastion.fabric-testbed.net"
    assert "-W" in inner and inner[inner.index("-W") + 1] == "[%h]:%p"


def test_ssh_args_proxy_jump_without_key_has_no_identity():
    o = _opts(ssh_common_args(NodeLogin("n", "h", proxy_jump="u@j:2200")))
    inner = shlex.split(o["ProxyCommand"])
    assert "-i" not in inner and "IdentitiesOnly=yes" not in inner
    assert inner[inner.index("-p") + 1] == "2200" and inner[-1] == "u@j"


def test_ssh_args_jump_shares_one_control_connection():
    a = _opts(ssh_common_args(NodeLogin("a", "172.30.0.11", proxy_jump="root@127.0.0.1:2222"), control_dir="/cp"))
    b = _opts(ssh_common_args(NodeLogin("b", "172.30.0.12", proxy_jump="root@127.0.0.1:2222"), control_dir="/cp"))
    c = _opts(ssh_common_args(NodeLogin("c", "172.30.0.13", proxy_jump="root@127.0.0.1:2223"), control_dir="/cp"))
    jp = lambda o: [x for x in shlex.split(o["ProxyCommand"]) if x.startswith("ControlPath=")]  # noqa: E731
    assert jp(a) == jp(b) and len(jp(a)) == 1 and jp(a)[0].startswith("ControlPath=/cp/jump-")
    assert jp(a) != jp(c)
    assert a["ControlPath"] == "/cp/%C"  # the node connection itself has its own per-host socket


ED_KEY = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIHhRN2R9yJ3l0jB3o6Fwq5v0m7b1KQ0Zg8gqQm1n2o3p"


def test_ssh_args_pinned_keys_are_checked_strictly():
    """A login pinning its host key (the local site) is checked against exactly that key: strict,
    the system-wide known_hosts ignored; the jump host likewise when its key is pinned."""
    lg = NodeLogin("client1", "172.30.0.12", key_file="/s/id", proxy_jump="root@127.0.0.1:2222",
                   extra={"host_key": ED_KEY + " client1", "jump_host_key": ED_KEY})
    argv = shlex.split(ssh_common_args(lg, known_hosts="/s/kh"))
    o = _opts(ssh_common_args(lg, known_hosts="/s/kh"))
    assert o["StrictHostKeyChecking"] == "yes" and o["UserKnownHostsFile"] == "/s/kh"
    assert o["GlobalKnownHostsFile"] == "/dev/null"
    assert "StrictHostKeyChecking=no" not in argv and "StrictHostKeyChecking=accept-new" not in argv
    inner = shlex.split(o["ProxyCommand"])
    assert "StrictHostKeyChecking=yes" in inner and "GlobalKnownHostsFile=/dev/null" in inner
    assert "StrictHostKeyChecking=accept-new" not in inner


def test_ssh_args_node_pinned_but_jump_not():
    lg = NodeLogin("n", "10.0.0.5", proxy_jump="me@bastion.example.net", extra={"host_key": ED_KEY})
    o = _opts(ssh_common_args(lg, known_hosts="/s/kh"))
    assert o["StrictHostKeyChecking"] == "yes"
    inner = shlex.split(o["ProxyCommand"])
    assert "StrictHostKeyChecking=accept-new" in inner and "GlobalKnownHostsFile=/dev/null" not in inner
    assert inner[inner.index("-p") + 1] == "22" and inner[-1] == "me@bastion.example.net"


def test_known_hosts_lines_of_pinned_logins():
    logins = {"a": NodeLogin("a", "172.30.0.11", proxy_jump="root@127.0.0.1:2222",
                             extra={"host_key": ED_KEY + " a\n", "jump_host_key": ED_KEY + " jump"}),
              "b": NodeLogin("b", "172.30.0.12", proxy_jump="root@127.0.0.1:2222",
                             extra={"host_key": ED_KEY, "jump_host_key": ED_KEY}),
              "c": NodeLogin("c", "2001:db8::3", port=2200, extra={"host_key": ED_KEY}),
              "d": NodeLogin("d", "pc1.example.net", port=25610)}  # testbed node: not pinned
    assert known_hosts_lines(logins) == [f"172.30.0.11 {ED_KEY}", f"172.30.0.12 {ED_KEY}",
                                         f"[127.0.0.1]:2222 {ED_KEY}", f"[2001:db8::3]:2200 {ED_KEY}"]


@pytest.mark.parametrize("bad", ["ssh-ed25519", "ssh-ed25519 not*base64", "-oProxyCommand=x AAAA",
                                 ED_KEY + "\n172.30.0.99 " + ED_KEY], ids=["no-key", "junk", "option", "two-lines"])
def test_known_hosts_refuses_what_is_not_one_key(bad):
    with pytest.raises(ValueError, match="client1 host_key: expected one OpenSSH public key"):
        known_hosts_lines({"client1": NodeLogin("client1", "10.0.0.1", extra={"host_key": bad})})


def test_write_known_hosts(tmp_path):
    path = tmp_path / "ssh" / "known_hosts"
    assert write_known_hosts({"d": NodeLogin("d", "pc1.example.net")}, path) is False
    assert not path.exists()  # nothing pinned: ssh's accept-new fills the file
    path.parent.mkdir()
    path.write_text("pc1.example.net " + ED_KEY + "\n")
    assert write_known_hosts({"d": NodeLogin("d", "pc1.example.net")}, path) is False
    assert path.read_text() == "pc1.example.net " + ED_KEY + "\n"  # left as it was
    assert write_known_hosts({"a": NodeLogin("a", "172.30.0.11", extra={"host_key": ED_KEY})}, path) is True
    assert path.read_text() == f"172.30.0.11 {ED_KEY}\n"  # exactly the pinned keys
    assert path.stat().st_mode & 0o777 == 0o600


def test_ssh_accepts_the_known_hosts_file(tmp_path):
    """ssh-keygen -F finds each pinned host in the written file, by the name ssh looks up."""
    key = tmp_path / "hk"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    pub = key.with_suffix(".pub").read_text()
    path = tmp_path / "known_hosts"
    write_known_hosts({"a": NodeLogin("a", "172.30.0.11", proxy_jump="root@127.0.0.1:2222",
                                      extra={"host_key": pub, "jump_host_key": pub})}, path)
    for name in ("172.30.0.11", "[127.0.0.1]:2222"):
        r = subprocess.run(["ssh-keygen", "-F", name, "-f", str(path)], capture_output=True, text=True)
        assert r.returncode == 0 and pub.split()[1] in r.stdout, (name, r.stdout, r.stderr)
    assert subprocess.run(["ssh-keygen", "-F", "172.30.0.12", "-f", str(path)], capture_output=True).returncode != 0


# --- build_inventory ---------------------------------------------------------------------------
def test_groups_hosts_and_vars(spec):
    inv = build_inventory(spec, logins_for(spec), "local", extra_vars={"netrepro_site_kind": "vm"})
    allv = inv["all"]["vars"]
    assert allv == {"netrepro_experiment": "pie-vs-red", "netrepro_site": "local",
                    "ansible_python_interpreter": "/usr/bin/python3", "ansible_host_key_checking": True,
                    "netrepro_site_kind": "vm"}
    ch = inv["all"]["children"]
    # a group per kind (hosts, routers, switches: the spec's groups), then the nodes' own
    # groups (clients, servers), in that order; a node is in its kind's group and in its own
    assert {g: list(v["hosts"]) for g, v in ch.items()} == {
        "hosts": ["client1", "client2", "client3", "server1", "server2", "server3"], "routers": ["router"],
        "switches": [], "clients": ["client1", "client2", "client3"], "servers": ["server1", "server2", "server3"]}
    c1 = ch["clients"]["hosts"]["client1"]
    assert ch["hosts"]["hosts"]["client1"] == c1
    assert c1 == {"ansible_host": "172.30.0.12", "ansible_port": 22, "ansible_user": "root",
                  "ansible_ssh_common_args": "-o ServerAliveInterval=15 -o ServerAliveCountMax=4",
                  "netrepro_kind": "host", "netrepro_addresses": {"clients_lan": "10.10.1.1"},
                  "netrepro_prefixlen": {"clients_lan": 24},
                  "netrepro_interfaces": {"eth1": {"address": "10.10.1.1", "prefixlen": 24, "network": "clients_lan",
                                                   "link": None, "mac": None, "device": None}}}
    r = ch["routers"]["hosts"]["router"]
    assert r["netrepro_addresses"] == {"clients_lan": "10.10.1.254", "servers_lan": "10.10.2.254"}
    assert r["netrepro_prefixlen"] == {"clients_lan": 24, "servers_lan": 24}
    assert r["netrepro_kind"] == "router"


def test_extra_vars_override_defaults(spec):
    inv = build_inventory(spec, logins_for(spec), "static",
                          extra_vars={"ansible_python_interpreter": "/opt/py/bin/python3"})
    assert inv["all"]["vars"]["ansible_python_interpreter"] == "/opt/py/bin/python3"
    assert inv["all"]["vars"]["netrepro_site"] == "static"


def test_key_node_dir_and_ssh_args_per_host(spec):
    logins = logins_for(spec, key_file="/s/id", proxy_jump="root@127.0.0.1:2222")
    logins["server2"].extra["node_dir"] = "/run/netrepro/server2"
    inv = build_inventory(spec, logins, "local", known_hosts="/s/kh", control_dir="/cp")
    s2 = inv["all"]["children"]["servers"]["hosts"]["server2"]
    s1 = inv["all"]["children"]["servers"]["hosts"]["server1"]
    assert s2["netrepro_node_dir"] == "/run/netrepro/server2"
    assert "netrepro_node_dir" not in s1
    assert s2["ansible_ssh_private_key_file"] == "/s/id"
    assert s2["ansible_ssh_common_args"] == ssh_common_args(logins["server2"], "/s/kh", "/cp")
    assert "ProxyCommand=" in s2["ansible_ssh_common_args"]


def test_no_key_no_args_when_not_needed(spec):
    h = build_inventory(spec, logins_for(spec), "static")["all"]["children"]["clients"]["hosts"]["client2"]
    assert "ansible_ssh_private_key_file" not in h
    assert h["ansible_ssh_common_args"] == "-o ServerAliveInterval=15 -o ServerAliveCountMax=4"   # keepalives only
    assert "ansible_become" not in h


def test_non_root_user_becomes(spec):
    logins = logins_for(spec)
    logins["router"] = NodeLogin("router", "pc1.instageni.example.net", port=25610, user="alice")
    ch = build_inventory(spec, logins, "instageni")["all"]["children"]
    assert ch["routers"]["hosts"]["router"]["ansible_become"] is True
    assert ch["routers"]["hosts"]["router"]["ansible_port"] == 25610
    assert ch["routers"]["hosts"]["router"]["ansible_user"] == "alice"
    assert "ansible_become" not in ch["clients"]["hosts"]["client1"]


def test_ipv6_host(spec):
    logins = logins_for(spec, user="ubuntu")
    logins["server3"] = NodeLogin("server3", "2001:db8:0:1::3", user="ubuntu", proxy_jump="u@bastion:22")
    inv = build_inventory(spec, logins, "fabric")
    h = inv["all"]["children"]["servers"]["hosts"]["server3"]
    assert h["ansible_host"] == "2001:db8:0:1::3"
    back = yaml.safe_load(dump_inventory(inv))
    assert back["all"]["children"]["servers"]["hosts"]["server3"]["ansible_host"] == "2001:db8:0:1::3"


def test_missing_login_names_the_node(spec):
    logins = logins_for(spec)
    del logins["server2"], logins["client3"]
    with pytest.raises(KeyError) as ei:
        build_inventory(spec, logins, "local")
    assert "client3" in str(ei.value) and "server2" in str(ei.value)
    assert "client1" not in str(ei.value)


def test_dump_round_trips(spec):
    inv = build_inventory(spec, logins_for(spec, key_file="/s/id", proxy_jump="root@127.0.0.1:2222"), "local",
                          known_hosts="/s/known hosts", control_dir="/cp")
    text = dump_inventory(inv)
    assert text.startswith("# Generated by netrepro")
    assert yaml.safe_load(text) == inv
    # file order is kept (groups, hosts): readable diffs between runs
    groups = ["hosts", "routers", "switches", "clients", "servers"]   # the spec's groups, in their order
    assert [text.index(f"\n    {g}:") for g in groups] == sorted(text.index(f"\n    {g}:") for g in groups)


def test_write_inventory(tmp_path, spec):
    inv = build_inventory(spec, logins_for(spec), "local")
    path = tmp_path / "deep" / "inventory" / "pie-vs-red-local.yml"
    assert write_inventory(inv, path) == path
    assert yaml.safe_load(path.read_text()) == inv
    assert not path.with_suffix(".tmp").exists()
    inv["all"]["vars"]["netrepro_site"] = "again"
    write_inventory(inv, path)  # overwrite
    assert yaml.safe_load(path.read_text())["all"]["vars"]["netrepro_site"] == "again"


def test_ansible_inventory_accepts_it(tmp_path, spec):
    logins = logins_for(spec, key_file="/s/id", proxy_jump="root@127.0.0.1:2222")
    logins["server1"] = NodeLogin("server1", "2001:db8::1", user="ubuntu")
    inv = build_inventory(spec, logins, "local", extra_vars={"netrepro_site_kind": "vm"},
                          known_hosts="/s/kh", control_dir="/cp")
    path = write_inventory(inv, tmp_path / "inv.yml")
    env = {**os.environ, "ANSIBLE_LOCAL_TEMP": str(tmp_path / "atmp"), "ANSIBLE_HOME": str(tmp_path / "ahome"),
           "ANSIBLE_INVENTORY_UNPARSED_FAILED": "true"}
    r = subprocess.run([str(VENV_BIN / "ansible-inventory"), "-i", str(path), "--list"],
                       capture_output=True, text=True, cwd=tmp_path, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert {"clients", "routers", "servers"} <= set(out["all"]["children"])
    assert out["clients"]["hosts"] == ["client1", "client2", "client3"]
    assert out["routers"]["hosts"] == ["router"]
    hv = out["_meta"]["hostvars"]
    assert hv["client1"]["netrepro_addresses"] == {"clients_lan": "10.10.1.1"}
    assert hv["client1"]["netrepro_site_kind"] == "vm"  # all.vars reach every host
    assert hv["server1"]["ansible_host"] == "2001:db8::1" and hv["server1"]["ansible_become"] is True
    assert shlex.split(hv["router"]["ansible_ssh_common_args"]) == shlex.split(
        ssh_common_args(logins["router"], "/s/kh", "/cp"))


def test_proxy_command_ends_options_and_escapes_percent():
    """The jump destination follows '--' (never read as an option), and '%' in paths is doubled:
    ssh expands %-tokens in a ProxyCommand (ssh_config(5), TOKENS), so /k/50%d would break."""
    lg = NodeLogin("n", "10.0.0.1", key_file="/k/50%d/id", proxy_jump="u@j:22")
    inner = shlex.split(_opts(ssh_common_args(lg, known_hosts="/s/%kh", control_dir="/cp"))["ProxyCommand"])
    assert inner[-2:] == ["--", "u@j"]
    assert inner[2] == "[%h]:%p"
    assert inner[inner.index("-i") + 1] == "/k/50%%d/id"
    assert "UserKnownHostsFile=/s/%%kh" in inner


def test_switched_topology_inventory():
    """A schema_version 2 experiment: groups per kind, interfaces by name with their peer port;
    a switch has no address."""
    from netrepro.experiment.spec import load_spec
    spec = load_spec(Path(__file__).resolve().parent / "data" / "experiments" / "lab19-like.yml")
    inv = build_inventory(spec, logins_for(spec), "local")
    ch = inv["all"]["children"]
    assert {g: list(v["hosts"]) for g, v in ch.items()} == {"hosts": ["h1", "h2", "h3"], "routers": [],
                                                            "switches": ["s1", "s2"]}
    h1, s2 = ch["hosts"]["hosts"]["h1"], ch["switches"]["hosts"]["s2"]
    assert h1["netrepro_kind"] == "host" and h1["netrepro_addresses"] == {"h1-eth0": "10.0.0.1"}
    assert h1["netrepro_interfaces"]["h1-eth0"] == {"address": "10.0.0.1", "prefixlen": 24, "network": None,
                                                    "link": "s1:s1-eth2", "mac": None, "device": None}
    assert s2["netrepro_addresses"] == {} and s2["netrepro_interfaces"]["s2-eth2"]["link"] == "h3:h3-eth0"


def test_a_testbed_switch_port_carries_what_the_site_found_it_by():
    """On a testbed the device of a port without an address is not named as the model names
    it: the site's MAC (manifest, slice) or device name (static file) reaches roles/interfaces.
    An addressed interface never takes them (it is found by its address)."""
    from netrepro.experiment.spec import load_spec
    spec = load_spec(Path(__file__).resolve().parent / "data" / "experiments" / "lab19-like.yml")
    logins = logins_for(spec)
    logins["s2"].extra = {"macs": {"s2-eth1": "02aabbccdd01"}, "ports": {"s2-eth2": "ens7"}}
    logins["h1"].extra = {"macs": {"h1-eth0": "02aabbccdd09"}}
    ch = build_inventory(spec, logins, "instageni")["all"]["children"]
    s2 = ch["switches"]["hosts"]["s2"]["netrepro_interfaces"]
    assert (s2["s2-eth1"]["mac"], s2["s2-eth1"]["device"]) == ("02:aa:bb:cc:dd:01", None)
    assert (s2["s2-eth2"]["mac"], s2["s2-eth2"]["device"]) == (None, "ens7")
    assert ch["hosts"]["hosts"]["h1"]["netrepro_interfaces"]["h1-eth0"]["mac"] is None


@pytest.mark.parametrize("given, want", [("0265b6205ad1", "02:65:b6:20:5a:d1"), ("02:65:B6:20:5A:D1", "02:65:b6:20:5a:d1"),
                                         ("0265.b620.5ad1", "02:65:b6:20:5a:d1"), (None, None)])
def test_mac_colons(given, want):
    from netrepro.sites.inventory import mac_colons
    assert mac_colons(given) == want


@pytest.mark.parametrize("bad", ["0265b6205ad", "zz65b6205ad1", ""])
def test_mac_colons_refuses_what_is_not_a_mac(bad):
    from netrepro.sites.inventory import mac_colons
    with pytest.raises(ValueError):
        mac_colons(bad)
