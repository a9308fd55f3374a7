"""Tests of netrepro/sites/local/netns.py: the exact commands for the pie-vs-red spec, and the
generated build.sh/teardown.sh run for real on this host with a small spec whose every
name (namespaces, veths, bridges) carries this test's pid, on a random 172.31.x.0/24
management subnet. Needs root (this machine and CI run as root)."""

from __future__ import annotations

import ipaddress
import json
import os
import random
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from netrepro.sites.local import netns
from netrepro.experiment.spec import Spec

DATA = Path(__file__).resolve().parent / "data" / "specs"
LAYOUT = netns.Layout(mgmt_subnet="172.30.0.0/24", config_dir="/cfg", runtime_dir="/rt",
                      authorized_keys="/cfg/authorized_keys")


# --- names -----------------------------------------------------------------------------------
def test_ifname_short_names_unchanged():
    assert netns.ifname("nr-clients_lan") == "nr-clients_lan"
    assert netns.ifname("x" * 15) == "x" * 15


def test_ifname_long_names_hashed():
    long_a, long_b = "nr-a_very_long_network_name", "nr-a_very_long_network_namf"
    a = netns.ifname(long_a)
    assert len(a) == netns.IFNAMSIZ == 15
    assert a.startswith("nr") and re.fullmatch(r"nr[0-9a-f]{13}", a)
    assert netns.ifname(long_a) == a  # stable
    assert netns.ifname(long_b) != a
    assert len(netns.ifname("x" * 16)) == 15 and netns.ifname("x" * 16) != "x" * 15
    v = netns.ifname("averylongnodename-1", fallback_prefix="nrv")
    assert len(v) == 15 and v.startswith("nrv")


def test_lan_bridge_and_node_veth_names():
    assert netns.lan_bridge("clients_lan") == "nr-clients_lan"
    long = netns.lan_bridge("the_network_of_the_clients")
    assert len(long) <= 15 and long.startswith("nr") and long != netns.lan_bridge("the_network_of_the_servers")
    assert netns.node_veth("client1", 1) == "client1-1"
    assert len(netns.node_veth("averyveryverylongnode", 2)) == 15


def test_every_generated_interface_name_fits(spec):
    names = set()
    for cmd in netns.build_commands(spec, LAYOUT):
        if cmd[:3] == ["ip", "link", "add"]:
            names.add(cmd[3])
            if "peer" in cmd:
                names.add(cmd[cmd.index("peer") + 2])
    assert {"nr-mgmt", "nr-clients_lan", "nr-servers_lan", "router-0", "router-2", "client1-1", "eth0"} <= names
    assert all(len(n) <= 15 for n in names), names


# --- layout ----------------------------------------------------------------------------------
def test_mgmt_addresses(spec):
    assert LAYOUT.mgmt_gateway() == "172.30.0.1"
    assert LAYOUT.mgmt_bridge == "nr-mgmt"
    assert netns.mgmt_addresses(spec, LAYOUT) == {
        "router": "172.30.0.11", "client1": "172.30.0.12", "client2": "172.30.0.13", "client3": "172.30.0.14",
        "server1": "172.30.0.15", "server2": "172.30.0.16", "server3": "172.30.0.17"}


def test_mgmt_subnet_too_small(spec):
    small = netns.Layout("10.0.0.0/28", "/c", "/r", "/k")
    assert small.mgmt_address(3) == "10.0.0.14"
    with pytest.raises(ValueError, match="too small"):
        small.mgmt_address(4)  # 10.0.0.15 is the broadcast address
    with pytest.raises(ValueError, match="10.0.0.0/29 too small for node #1"):
        netns.mgmt_addresses(spec, netns.Layout("10.0.0.0/29", "/c", "/r", "/k"))


# --- build and teardown commands ---------------------------------------------------------------
def test_bridges_first(spec):
    cmds = netns.build_commands(spec, LAYOUT)
    assert cmds[:7] == [
        ["ip", "link", "add", "nr-mgmt", "type", "bridge"], ["ip", "link", "set", "nr-mgmt", "up"],
        ["ip", "link", "add", "nr-clients_lan", "type", "bridge"], ["ip", "link", "set", "nr-clients_lan", "up"],
        ["ip", "link", "add", "nr-servers_lan", "type", "bridge"], ["ip", "link", "set", "nr-servers_lan", "up"],
        ["ip", "addr", "add", "172.30.0.1/24", "dev", "nr-mgmt"]]


def test_exact_commands_for_client1(spec):
    """client1's commands, in the build's stages: the namespaces, the builder's side of the
    veths, the sysctls, each node's own commands (render_script batches each stage's runs)."""
    cmds = netns.build_commands(spec, LAYOUT)
    veth = lambda peer, eth: ["ip", "link", "add", peer, "mtu", "1500", "type", "veth",  # noqa: E731
                              "peer", "name", eth, "mtu", "1500", "netns", "client1"]
    mine = [c for c in cmds if "client1" in c or any(a.startswith("client1-") for a in c)]
    assert mine[:-1] == [
        ["ip", "netns", "add", "client1"],
        veth("client1-0", "eth0"),
        ["ip", "link", "set", "client1-0", "master", "nr-mgmt"],
        ["ip", "link", "set", "client1-0", "up"],
        veth("client1-1", "eth1"),
        ["ip", "link", "set", "client1-1", "master", "nr-clients_lan"],
        ["ip", "link", "set", "client1-1", "up"],
        ["ip", "netns", "exec", "client1", "sysctl", "-q", "-w", "net.ipv6.conf.all.disable_ipv6=1",
         "net.ipv6.conf.default.disable_ipv6=1"],
        ["ip", "-n", "client1", "link", "set", "lo", "up"],
        ["ip", "-n", "client1", "addr", "add", "172.30.0.12/24", "dev", "eth0"],
        ["ip", "-n", "client1", "link", "set", "eth0", "up"],
        ["ip", "-n", "client1", "addr", "add", "10.10.1.1/24", "dev", "eth1"],
        ["ip", "-n", "client1", "link", "set", "eth1", "up"],
        ["ip", "-n", "client1", "route", "add", "10.10.2.0/24", "via", "10.10.1.254"],
    ]
    # every namespace exists before any veth is made; every veth before any node's own commands
    last_ns = max(i for i, c in enumerate(cmds) if c[:3] == ["ip", "netns", "add"])
    first_veth = min(i for i, c in enumerate(cmds) if "veth" in c)
    first_inside = min(i for i, c in enumerate(cmds) if c[1] == "-n")
    assert last_ns < first_veth and max(i for i, c in enumerate(cmds) if "veth" in c) < first_inside
    # each node's own commands are consecutive (one ip -batch each)
    owners = [c[2] for c in cmds if c[1] == "-n"]
    assert owners == sorted(owners, key=list(spec.nodes).index)
    # sshd comes last, after every namespace exists and after its privilege separation folder
    # (sshd exits 255 without it on a machine where systemd never started ssh.service)
    tail = cmds[-2 * len(spec.nodes):]
    assert cmds[-2 * len(spec.nodes) - 1] == ["mkdir", "-p", "/run/sshd"]
    assert ["mkdir", "-p", "/rt/client1"] in tail
    assert ["ip", "netns", "exec", "client1", "/usr/sbin/sshd", "-f", "/cfg/client1/sshd_config",
            "-E", "/rt/client1/sshd.log"] in tail


def test_router_gets_one_interface_per_network(spec):
    cmds = netns.build_commands(spec, LAYOUT)
    assert ["ip", "-n", "router", "addr", "add", "10.10.1.254/24", "dev", "eth1"] in cmds
    assert ["ip", "-n", "router", "addr", "add", "10.10.2.254/24", "dev", "eth2"] in cmds
    assert ["ip", "link", "set", "router-2", "master", "nr-servers_lan"] in cmds
    assert not [c for c in cmds if c[:4] == ["ip", "-n", "router", "route"]]


def test_teardown_removes_exactly_what_build_adds(spec):
    build = netns.build_commands(spec, LAYOUT)
    down = netns.teardown_commands(spec, LAYOUT)
    ns_added = {c[3] for c in build if c[:3] == ["ip", "netns", "add"]}
    ns_deleted = {c[3] for c in down if c[:3] == ["ip", "netns", "del"]}
    br_added = {c[3] for c in build if c[:3] == ["ip", "link", "add"] and c[-2:] == ["type", "bridge"]}
    # the builder's ends of the veths (the peers inside the nodes go with their namespaces)
    veths_added = {c[3] for c in build if c[:3] == ["ip", "link", "add"] and "veth" in c and "netns" not in c[:6]}
    links_deleted = {c[3] for c in down if c[:3] == ["ip", "link", "del"]}
    assert ns_added == ns_deleted == set(spec.nodes)
    assert br_added == {"nr-mgmt", "nr-clients_lan", "nr-servers_lan"}
    assert len(veths_added) == 7 + 8 and links_deleted == br_added | veths_added
    # every process of a namespace is stopped before it is deleted
    for node in spec.nodes:
        kill = next(i for i, c in enumerate(down) if c[0] == "sh" and f"ip netns pids {node} " in c[2])
        assert kill < down.index(["ip", "netns", "del", node])
    # the builder's veth ends and the bridges go after the namespaces
    last_ns = max(down.index(["ip", "netns", "del", n]) for n in spec.nodes)
    assert all(c[:3] == ["ip", "link", "del"] for c in down[last_ns + 1:]) and len(down) - last_ns - 1 == 18


def test_teardown_quotes_node_names():
    data = yaml.safe_load((DATA / "good-minimal.yml").read_text())
    s = Spec.from_data(data)
    for c in netns.teardown_commands(s, LAYOUT):
        if c[0] == "sh":
            assert c[1] == "-c" and re.search(r"ip netns pids [crs] 2>/dev/null", c[2])


# --- scripts ---------------------------------------------------------------------------------
def test_render_script_strict_and_not(spec, tmp_path):
    cmds = [["echo", "a b"], ["false"], ["echo", "after"]]
    strict = netns.render_script(cmds, strict=True, title="build x")
    loose = netns.render_script(cmds, strict=False, title="tear down x")
    assert strict.splitlines() == ["#!/bin/sh", "# build x; generated by netrepro", "set -u", "set -e",
                                   "echo 'a b'", "false", "echo after"]
    assert loose.splitlines() == ["#!/bin/sh", "# tear down x; generated by netrepro", "set -u",
                                  "echo 'a b' 2>/dev/null || true", "false 2>/dev/null || true",
                                  "echo after 2>/dev/null || true"]
    (tmp_path / "s.sh").write_text(strict)
    (tmp_path / "l.sh").write_text(loose)
    rs = subprocess.run(["sh", str(tmp_path / "s.sh")], capture_output=True, text=True)
    rl = subprocess.run(["sh", str(tmp_path / "l.sh")], capture_output=True, text=True)
    assert rs.returncode != 0 and rs.stdout == "a b\n"  # stops at `false`
    assert rl.returncode == 0 and rl.stdout == "a b\nafter\n"


def test_rendered_site_scripts_parse(spec, tmp_path):
    for name, cmds, strict in (("build.sh", netns.build_commands(spec, LAYOUT), True),
                               ("teardown.sh", netns.teardown_commands(spec, LAYOUT), False)):
        p = tmp_path / name
        p.write_text(netns.render_script(cmds, strict=strict, title=name))
        r = subprocess.run(["sh", "-n", str(p)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        text = p.read_text()
        batches = text.count("-batch - <<'NR_IP_BATCH'")
        assert len(text.splitlines()) == len(cmds) + 3 + strict + 2 * batches
        # the build: the bridges, the veths, then one batch per node; the teardown: none
        assert batches == (2 + len(spec.nodes) if strict else 0), batches


def test_render_script_batches_runs_of_one_namespaces_ip_commands(tmp_path):
    cmds = [["ip", "link", "add", "b0", "type", "bridge"], ["ip", "link", "set", "b0", "up"],
            ["ip", "netns", "add", "x"], ["ip", "netns", "add", "y"],
            ["ip", "-n", "x", "link", "set", "lo", "up"], ["ip", "-n", "x", "addr", "add", "10.0.0.1/24", "dev", "e0"],
            ["ip", "-n", "y", "link", "set", "lo", "up"],
            ["ip", "-n", "x", "link", "set", "a b", "up"], ["ip", "-n", "x", "link", "set", "e1", "up"],
            ["mkdir", "-p", "/r"]]
    text = netns.render_script(cmds, strict=True, title="build x")
    assert text.splitlines()[4:] == [
        "ip -batch - <<'NR_IP_BATCH'", "link add b0 type bridge", "link set b0 up", "NR_IP_BATCH",
        "ip netns add x", "ip netns add y",   # never batched
        "ip -n x -batch - <<'NR_IP_BATCH'", "link set lo up", "addr add 10.0.0.1/24 dev e0", "NR_IP_BATCH",
        "ip -n y link set lo up",              # a run of one
        "ip -n x link set 'a b' up",           # a word the batch reader would split
        "ip -n x link set e1 up", "mkdir -p /r"]
    # sh reads the here documents: each batch's lines reach ip on its standard input
    fake = tmp_path / "bin"
    fake.mkdir()
    (fake / "ip").write_text('#!/bin/sh\necho "ip $*"\n[ "$*" != "${*%-batch -}" ] && sed "s/^/  /"\nexit 0\n')
    (fake / "ip").chmod(0o755)
    (tmp_path / "b.sh").write_text(text)
    r = subprocess.run(["sh", str(tmp_path / "b.sh")], capture_output=True, text=True,
                       env={"PATH": f"{fake}:/usr/bin:/bin"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[:4] == ["ip -batch -", "  link add b0 type bridge", "  link set b0 up", "ip netns add x"]
    assert netns.render_script(cmds, strict=False, title="tear down x").count("-batch") == 0


def test_sshd_config(spec):
    cfg = netns.sshd_config("client1", "172.30.0.12", LAYOUT)
    lines = cfg.splitlines()
    assert "ListenAddress 172.30.0.12" in lines
    assert "HostKey /cfg/client1/ssh_host_ed25519_key" in lines
    assert "AuthorizedKeysFile /cfg/authorized_keys" in lines
    assert "PidFile /rt/client1/sshd.pid" in lines
    assert "PasswordAuthentication no" in lines and "PermitRootLogin prohibit-password" in lines
    assert cfg.endswith("\n")


def test_existing_conflicts(spec):
    assert netns.existing_conflicts(spec, LAYOUT, set(), set()) == []
    assert netns.existing_conflicts(spec, LAYOUT, {"other", "lo"}, {"eth0", "lo", "docker0"}) == []
    got = netns.existing_conflicts(spec, LAYOUT, {"client1", "server3", "elsewhere"},
                                   {"nr-mgmt", "router-2", "client1-1", "client1-2", "eth0"})
    # namespaces first, then links; client1 has eth0 and eth1 only, so client1-2 is no conflict
    assert got == ["client1", "server3", "client1-1", "nr-mgmt", "router-2"]


# --- for real on this host ------------------------------------------------------------------------
TAG = f"t{os.getpid()}"


def _sh(*argv: str, check: bool = True, timeout: float = 20) -> subprocess.CompletedProcess:
    r = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    if check and r.returncode != 0:
        raise AssertionError(f"{' '.join(argv)} failed ({r.returncode}): {r.stdout}{r.stderr}")
    return r


def _ours_left() -> tuple[list[str], list[str]]:
    """Namespaces and host links whose names carry this test's tag."""
    nss = [line.split()[0] for line in _sh("ip", "netns", "list").stdout.splitlines() if line.strip()]
    links = [json.loads(_sh("ip", "-j", "link").stdout)]
    names = [lk["ifname"] for lk in links[0]]
    return [n for n in nss if n.startswith(TAG)], [n for n in names if n.startswith(TAG)]


class _TestLayout(netns.Layout):
    """Layout whose management bridge carries the test's tag (never the real nr-mgmt)."""

    @property
    def mgmt_bridge(self) -> str:
        return f"{TAG}m"


def _free_mgmt_subnet() -> str:
    routes = json.loads(_sh("ip", "-j", "route", "show", "table", "all").stdout)
    used = []
    for r in routes:
        try:
            used.append(ipaddress.ip_network(r["dst"], strict=False))
        except (KeyError, ValueError):
            continue
    for _ in range(50):
        net = ipaddress.ip_network(f"172.31.{random.randint(1, 254)}.0/24")
        if not any(net.overlaps(u) for u in used if u.prefixlen > 0):
            return str(net)
    raise AssertionError("no free 172.31.x.0/24 management subnet")


def _tagged_spec() -> Spec:
    """good-minimal.yml with nodes and networks renamed after the test's tag."""
    data = yaml.safe_load((DATA / "good-minimal.yml").read_text())
    node = {"r": f"{TAG}r", "c": f"{TAG}c", "s": f"{TAG}s"}
    net = {"left": f"{TAG}l", "right": f"{TAG}n"}
    topo = data["topology"]
    topo["networks"] = {net[k]: v for k, v in topo["networks"].items()}
    topo["nodes"] = {node[k]: v for k, v in topo["nodes"].items()}
    for nd in topo["nodes"].values():
        for itf in nd["interfaces"].values():
            itf["network"] = net[itf["network"]]
    topo["nodes"][node["c"]]["routes"] = [{"to": "192.168.20.0/24", "via": "192.168.10.1"}]
    topo["nodes"][node["s"]]["routes"] = [{"to": "192.168.10.0/24", "via": "192.168.20.1"}]
    for t in data["trials"]:
        t["qdiscs"] = {f"{node[p.split(':')[0]]}:{p.split(':')[1]}": st for p, st in t["qdiscs"].items()}
    for x in data["traffic"]:
        x["from"], x["to"] = node[x["from"]], node[x["to"]]
    return Spec.from_data(data, f"<{TAG}>")


@pytest.fixture
def real_site(tmp_path, monkeypatch):
    """Scripts for the tagged spec, with host keys; teardown runs at the end whatever happens."""
    if os.geteuid() != 0:
        pytest.fail("test_netns real-site tests need root (ip netns, veth, bridge)")
    # LAN bridges carry the tag too, so nothing this test makes is named like the real site's nr-*.
    monkeypatch.setattr(netns, "lan_bridge", lambda network: netns.ifname(f"{network}b"))
    spec = _tagged_spec()
    layout = _TestLayout(mgmt_subnet=_free_mgmt_subnet(), config_dir=str(tmp_path / "nodes"),
                         runtime_dir=str(tmp_path / "run"), authorized_keys=str(tmp_path / "authorized_keys"))
    key = tmp_path / "id_ed25519"
    _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key))
    Path(layout.authorized_keys).write_text(Path(f"{key}.pub").read_text())
    mgmt = netns.mgmt_addresses(spec, layout)
    for node in spec.nodes:
        d = Path(layout.config_dir) / node
        d.mkdir(parents=True)
        _sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", node, "-f", str(d / "ssh_host_ed25519_key"))
        (d / "sshd_config").write_text(netns.sshd_config(node, mgmt[node], layout))
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    build = tmp_path / "build.sh"
    down = tmp_path / "teardown.sh"
    build.write_text(netns.render_script(netns.build_commands(spec, layout), strict=True, title="build"))
    down.write_text(netns.render_script(netns.teardown_commands(spec, layout), strict=False, title="teardown"))
    site = {"spec": spec, "layout": layout, "build": build, "down": down, "key": key, "mgmt": mgmt}
    try:
        yield site
    finally:
        subprocess.run(["sh", str(down)], capture_output=True, timeout=60)
        nss, links = _ours_left()  # belt and braces: remove anything tagged that survived
        for n in nss:
            subprocess.run(["ip", "netns", "del", n], capture_output=True)
        for n in links:
            subprocess.run(["ip", "link", "del", n], capture_output=True)


def _alive(pid: int) -> bool:
    """Is process ``pid`` running (a zombie waiting to be reaped counts as dead)?"""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return not re.search(r"^State:\s+[ZX]", status, re.M)


def _addrs(ns: str) -> dict[str, list[str]]:
    out = {}
    for lk in json.loads(_sh("ip", "-n", ns, "-j", "addr").stdout):
        out[lk["ifname"]] = [f"{a['local']}/{a['prefixlen']}" for a in lk.get("addr_info", []) if a["family"] == "inet"]
    return out


@pytest.mark.netns
def test_build_and_teardown_for_real(real_site):
    spec, layout, mgmt = real_site["spec"], real_site["layout"], real_site["mgmt"]
    r_, c_, s_ = f"{TAG}r", f"{TAG}c", f"{TAG}s"
    nss, links = _ours_left()
    assert (nss, links) == ([], []), "leftovers from an earlier run"
    host_ns = {line.split()[0] for line in _sh("ip", "netns", "list").stdout.splitlines() if line.strip()}
    host_links = {lk["ifname"] for lk in json.loads(_sh("ip", "-j", "link").stdout)}
    assert netns.existing_conflicts(spec, layout, host_ns, host_links) == []

    _sh("sh", str(real_site["build"]), timeout=60)

    nss, links = _ours_left()
    assert sorted(nss) == sorted([r_, c_, s_])
    assert set(links) == {f"{TAG}m", f"{TAG}lb", f"{TAG}nb", f"{r_}-0", f"{r_}-1", f"{r_}-2",
                          f"{c_}-0", f"{c_}-1", f"{s_}-0", f"{s_}-1"}
    # the build is not repeatable on top of itself: existing_conflicts now names everything
    host_ns = {line.split()[0] for line in _sh("ip", "netns", "list").stdout.splitlines() if line.strip()}
    host_links = {lk["ifname"] for lk in json.loads(_sh("ip", "-j", "link").stdout)}
    assert set(netns.existing_conflicts(spec, layout, host_ns, host_links)) == set(nss) | set(links)

    gw_len = ipaddress.ip_network(layout.mgmt_subnet).prefixlen
    assert _addrs(r_) == {"lo": ["127.0.0.1/8"], "eth0": [f"{mgmt[r_]}/{gw_len}"],
                          "eth1": ["192.168.10.1/24"], "eth2": ["192.168.20.1/24"]}
    assert _addrs(c_) == {"lo": ["127.0.0.1/8"], "eth0": [f"{mgmt[c_]}/{gw_len}"], "eth1": ["192.168.10.2/24"]}
    assert _addrs(s_) == {"lo": ["127.0.0.1/8"], "eth0": [f"{mgmt[s_]}/{gw_len}"], "eth1": ["192.168.20.2/24"]}
    host_addr = json.loads(_sh("ip", "-j", "addr", "show", "dev", f"{TAG}m").stdout)[0]["addr_info"]
    assert [(a["local"], a["prefixlen"]) for a in host_addr if a["family"] == "inet"] == [(layout.mgmt_gateway(), gw_len)]
    routes = json.loads(_sh("ip", "-n", c_, "-j", "route").stdout)
    assert {"dst": "192.168.20.0/24", "gateway": "192.168.10.1"}.items() <= next(
        r for r in routes if r["dst"] == "192.168.20.0/24").items()

    # data plane: client -> router -> server (forwarding is a provisioning step, set here by hand)
    _sh("ip", "netns", "exec", r_, "sysctl", "-q", "-w", "net.ipv4.ip_forward=1")
    _sh("ip", "netns", "exec", c_, "ping", "-c", "1", "-W", "2", "192.168.20.2")
    # management plane: the builder reaches each node; nodes reach each other over the bridge
    _sh("ping", "-c", "1", "-W", "2", mgmt[s_])
    _sh("ip", "netns", "exec", c_, "ping", "-c", "1", "-W", "2", mgmt[r_])

    # sshd listens on each node's management address, and accepts the run's key
    for node in spec.nodes:
        for _ in range(50):
            ss = _sh("ip", "netns", "exec", node, "ss", "-Hltn").stdout
            if f"{mgmt[node]}:22" in ss:
                break
            time.sleep(0.1)
        assert f"{mgmt[node]}:22 " in ss + " ", f"sshd of {node} not listening: {ss}"
        assert Path(layout.runtime_dir, node, "sshd.pid").is_file()
    r = _sh("ssh", "-i", str(real_site["key"]), "-o", "BatchMode=yes", "-o", "StrictHostKeyChecking=no",
            "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=5", f"root@{mgmt[c_]}",
            "ip -br addr show eth1; echo SHLVL=$SHLVL", timeout=30)
    assert "192.168.10.2/24" in r.stdout
    # sshd's SetEnv SHLVL=1 reaches the node's login shell; bash then skips ~/.bashrc and
    # counts itself level 2 (a shell that keeps no level, as dash, leaves it at 1)
    bash = __import__("pwd").getpwuid(0).pw_shell.endswith("bash")
    assert ("SHLVL=2" if bash else "SHLVL=1") in r.stdout.split()

    # teardown, twice: both succeed and nothing named by the test remains
    sshd_pids = [int(Path(layout.runtime_dir, n, "sshd.pid").read_text()) for n in spec.nodes]
    for _ in range(2):
        r = _sh("sh", str(real_site["down"]), timeout=60)
        assert r.returncode == 0
        assert _ours_left() == ([], [])
    for pid in sshd_pids:
        deadline = time.time() + 5
        while _alive(pid) and time.time() < deadline:
            time.sleep(0.05)
        assert not _alive(pid), f"sshd {pid} survived the teardown"
    assert not [lk for lk in json.loads(_sh("ip", "-j", "addr").stdout)
                if any(a.get("local") == layout.mgmt_gateway() for a in lk.get("addr_info", []))]


@pytest.mark.netns
def test_strict_build_stops_on_conflict(real_site):
    """build.sh is strict: when a name it needs exists already, it stops at once and exits non-zero."""
    layout = real_site["layout"]
    _sh("ip", "link", "add", layout.mgmt_bridge, "type", "bridge")
    r = _sh("sh", str(real_site["build"]), check=False, timeout=60)
    assert r.returncode != 0
    assert "exists" in r.stderr
    nss, links = _ours_left()
    assert nss == [] and links == [layout.mgmt_bridge]  # nothing after the failing command ran


# --- schema_version 2: switches and named links, built for real -----------------------------------
def _tagged_switched_spec() -> Spec:
    """tests/data/experiments/lab19-like.yml (h1, h2 -- s1 -- s2 -- h3) with its nodes renamed
    after the test's tag (a namespace is named after its node)."""
    import copy
    data = copy.deepcopy(yaml.safe_load((Path(__file__).resolve().parent / "data" / "experiments" / "lab19-like.yml").read_text()))
    ren = {n: f"{TAG}{n}" for n in data["topology"]["nodes"]}
    nodes = {}
    for n, nd in data["topology"]["nodes"].items():
        for itf in nd["interfaces"].values():
            peer, _, pif = itf["link"].partition(":")
            itf["link"] = ren[peer] + (f":{pif}" if pif else "")
        nodes[ren[n]] = nd
    data["topology"]["nodes"] = nodes
    port = lambda p: f"{ren[p.split(':')[0]]}:{p.split(':')[1]}"  # noqa: E731
    data["qdiscs"] = {port(p): st for p, st in data["qdiscs"].items()}
    for t in data["trials"]:
        t["qdiscs"] = {port(p): st for p, st in t.get("qdiscs", {}).items()}
        for it in t.get("traffic", []):
            it["from"], it["to"] = ren[it["from"]], ren[it["to"]]
        t["sysctls"] = {ren[n]: v for n, v in t.get("sysctls", {}).items()}
    for s in data["sysctls"]:
        s["nodes"] = [ren[n] for n in s["nodes"]]
    for it in data["traffic"]:
        it["from"], it["to"] = ren[it["from"]], ren[it["to"]]
    data["collectors"] = [{**c, "at": port(c["at"])} for c in data["collectors"]]
    return Spec.from_data(data, f"<{TAG}-v2>")


@pytest.mark.netns
def test_switches_and_named_links_built_for_real(tmp_path):
    """Two switches (a bridge in each switch's namespace), links named as the manual names the
    ports, hosts in one subnet across both switches: h1 reaches h3 through s1 and s2, each port
    carries its name, and teardown leaves nothing."""
    if os.geteuid() != 0:
        pytest.fail("needs root (ip netns, veth, bridge)")
    spec = _tagged_switched_spec()
    h1, h3, s1, s2 = (f"{TAG}{n}" for n in ("h1", "h3", "s1", "s2"))
    layout = _TestLayout(mgmt_subnet=_free_mgmt_subnet(), config_dir=str(tmp_path / "nodes"),
                         runtime_dir=str(tmp_path / "run"), authorized_keys=str(tmp_path / "authorized_keys"))
    cmds = [c for c in netns.build_commands(spec, layout) if "sshd" not in " ".join(c)]  # the data plane only
    build, down = tmp_path / "build.sh", tmp_path / "teardown.sh"
    build.write_text(netns.render_script(cmds, strict=True, title="build"))
    down.write_text(netns.render_script(netns.teardown_commands(spec, layout), strict=False, title="teardown"))
    assert _ours_left() == ([], []), "leftovers from an earlier run"
    try:
        _sh("sh", str(build), timeout=60)
        links = {n: {lk["ifname"]: lk for lk in json.loads(_sh("ip", "-n", n, "-j", "link").stdout)} for n in (s1, s2)}
        assert {"s1-eth1", "s1-eth2", "s1-eth3", "br0"} <= set(links[s1])
        assert {"s2-eth1", "s2-eth2", "br0"} <= set(links[s2])
        assert all(links[s2][p].get("master") == "br0" for p in ("s2-eth1", "s2-eth2"))
        assert _addrs(h1)["h1-eth0"] == ["10.0.0.1/24"] and _addrs(s2)["s2-eth2"] == []
        assert _addrs(s2)["eth0"] == [f"{netns.mgmt_addresses(spec, layout)[s2]}/24"]  # sshd listens there
        _sh("ip", "netns", "exec", h1, "ping", "-c", "1", "-W", "5", "10.0.0.3")
        # the cable s1-eth1 <-> s2-eth1 carries it: taking s1's end down cuts h1 from h3
        _sh("ip", "-n", s1, "link", "set", "s1-eth1", "down")
        assert _sh("ip", "netns", "exec", h1, "ping", "-c", "1", "-W", "1", "10.0.0.3", check=False).returncode != 0
    finally:
        _sh("sh", str(down), timeout=60)
    assert _ours_left() == ([], [])
