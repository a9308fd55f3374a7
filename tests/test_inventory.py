"""Tests of netrepro/inventory.py: the Ansible inventory built from the spec and the logins."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from netrepro.inventory import build_inventory, dump_inventory, ssh_common_args, write_inventory
from netrepro.sites.base import NodeLogin
from netrepro.spec import Spec, load_spec

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = REPO / ".venv" / "bin"


@pytest.fixture(scope="module")
def spec() -> Spec:
    return load_spec("pie-vs-red")


def logins_for(spec: Spec, **kw) -> dict[str, NodeLogin]:
    return {n: NodeLogin(name=n, host=f"172.30.0.{11 + i}", **kw) for i, n in enumerate(spec.nodes)}


def _opts(args: str) -> dict[str, str]:
    """``-o K=V`` pairs of an ssh_common_args string, split as Ansible splits it (shlex)."""
    argv = shlex.split(args)
    assert all(a == "-o" for a in argv[0::2]), argv
    return dict(v.split("=", 1) for v in argv[1::2])


# --- ssh_common_args ---------------------------------------------------------------------------
def test_ssh_args_plain_login_is_empty():
    assert ssh_common_args(NodeLogin("client1", "10.0.0.1")) == ""


def test_ssh_args_known_hosts_and_control_dir():
    o = _opts(ssh_common_args(NodeLogin("client1", "10.0.0.1"), known_hosts="/s/known_hosts", control_dir="/cp"))
    assert o == {"UserKnownHostsFile": "/s/known_hosts", "StrictHostKeyChecking": "accept-new",
                 "ControlMaster": "auto", "ControlPersist": "1800s", "ControlPath": "/cp/%C"}


def test_ssh_args_proxy_jump_with_key_and_known_hosts():
    lg = NodeLogin("client1", "172.30.0.12", key_file="/s/id_ed25519", proxy_jump="root@127.0.0.1:2222")
    o = _opts(ssh_common_args(lg, known_hosts="/s/kh"))
    inner = shlex.split(o["ProxyCommand"])
    assert inner[:3] == ["ssh", "-W", "[%h]:%p"]  # brackets: a bare IPv6 node address works too
    assert inner[inner.index("-p") + 1] == "2222"
    assert inner[inner.index("-i") + 1] == "/s/id_ed25519"
    assert "IdentitiesOnly=yes" in inner and "BatchMode=yes" in inner
    assert "UserKnownHostsFile=/s/kh" in inner and "StrictHostKeyChecking=accept-new" in inner
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


# --- build_inventory ---------------------------------------------------------------------------
def test_groups_hosts_and_vars(spec):
    inv = build_inventory(spec, logins_for(spec), "local", extra_vars={"netrepro_site_kind": "vm"})
    allv = inv["all"]["vars"]
    assert allv == {"netrepro_experiment": "pie-vs-red", "netrepro_site": "local",
                    "ansible_python_interpreter": "/usr/bin/python3", "netrepro_site_kind": "vm"}
    ch = inv["all"]["children"]
    assert {g: list(v["hosts"]) for g, v in ch.items()} == {
        "clients": ["client1", "client2", "client3"], "servers": ["server1", "server2", "server3"],
        "routers": ["router"]}
    c1 = ch["clients"]["hosts"]["client1"]
    assert c1 == {"ansible_host": "172.30.0.12", "ansible_port": 22, "ansible_user": "root",
                  "netrepro_role": "client", "netrepro_addresses": {"clients_lan": "10.10.1.1"},
                  "netrepro_prefixlen": {"clients_lan": 24}}
    r = ch["routers"]["hosts"]["router"]
    assert r["netrepro_addresses"] == {"clients_lan": "10.10.1.254", "servers_lan": "10.10.2.254"}
    assert r["netrepro_prefixlen"] == {"clients_lan": 24, "servers_lan": 24}
    assert r["netrepro_role"] == "router"


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
    assert "ansible_ssh_common_args" not in h
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
    assert text.index("clients:") < text.index("servers:") < text.index("routers:")


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
