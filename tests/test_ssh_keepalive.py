"""A node that goes silent mid-run is given up in about a minute, not when TCP gives up.

A real sshd in a network namespace of its own, reached the way the runner reaches a node:
:func:`netrepro.runner.ssh.node_ssh_argv` with the inventory's options
(:func:`netrepro.sites.inventory.ssh_common_args`, a control socket as Ansible's). A long
command runs through the node's master connection; then the node's interface goes down, so
that its packets are dropped without a reset, as when a testbed VM is stopped under the run.
The keepalives (:data:`netrepro.sites.inventory.KEEPALIVE_OPTIONS`, 4 probes 15 s apart) end
the master and the command with ssh's 255 in about 60 s; without them the command waits until
TCP gives up on the peer (about 15 minutes). About 70 s. Root (network namespaces).

Nothing it starts outlives it: the node's sshd, its sessions and what they run (the command's
``sleep 600``, left behind when the link went silent) are every process of the node's
namespace, killed before the namespace is deleted (``ip netns del`` kills none).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from conftest import processes_mentioning

from netrepro.runner.ssh import close_ssh_masters, node_ssh_argv
from netrepro.sites.base import NodeLogin
from netrepro.sites.inventory import ssh_common_args

pytestmark = pytest.mark.netns

HOST_ADDR, NODE_ADDR = "10.199.77.1", "10.199.77.2"


def sh(*argv: str) -> None:
    res = subprocess.run(list(argv), capture_output=True, text=True)
    assert res.returncode == 0, f"{' '.join(argv)}: {res.stderr}"


def namespace_pids(ns: str) -> set[int]:
    """The processes in network namespace ``ns`` (``ip netns pids``)."""
    return {int(p) for p in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()}


def kill_namespace_processes(ns: str, wait_s: float = 10) -> set[int]:
    """SIGKILL every process in network namespace ``ns`` until none is left or ``wait_s``
    seconds have passed; returns those still there (none, unless one cannot be killed)."""
    deadline = time.monotonic() + wait_s
    while (pids := namespace_pids(ns)) and time.monotonic() < deadline:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)
    return pids


@pytest.fixture
def node(tmp_path):
    """A namespace with an sshd on NODE_ADDR, joined to this host by a veth; yields
    (the node's inventory variables, the namespace). Everything is removed afterwards: every
    process in the namespace is killed (the sshd, its sessions, their commands), and the
    teardown fails if one is left."""
    if os.geteuid() != 0 or shutil.which("/usr/sbin/sshd") is None:
        pytest.fail("needs root and OpenSSH's sshd; run `make setup` then `make test` as root")
    ns, veth = f"nrka-{os.getpid()}", f"nrka{os.getpid() % 100000}"
    for name in ("key", "hostkey"):
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / name))
    (tmp_path / "authorized_keys").write_text((tmp_path / "key.pub").read_text())
    host_key = " ".join((tmp_path / "hostkey.pub").read_text().split()[:2])
    (tmp_path / "known_hosts").write_text(f"{NODE_ADDR} {host_key}\n")
    cfg = tmp_path / "sshd_config"
    cfg.write_text(f"ListenAddress {NODE_ADDR}\nHostKey {tmp_path}/hostkey\nPidFile {tmp_path}/sshd.pid\n"
                   f"AuthorizedKeysFile {tmp_path}/authorized_keys\nPermitRootLogin prohibit-password\n"
                   "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n")
    made_run_sshd = not Path("/run/sshd").exists()
    control = Path(tempfile.mkdtemp(prefix="nrka-"))   # short: a socket's path holds 107 bytes (unix(7))
    sh("ip", "netns", "add", ns)
    try:
        sh("ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
        sh("ip", "addr", "add", f"{HOST_ADDR}/30", "dev", veth)
        sh("ip", "link", "set", veth, "up")
        sh("ip", "-n", ns, "addr", "add", f"{NODE_ADDR}/30", "dev", "eth0")
        sh("ip", "-n", ns, "link", "set", "eth0", "up")
        Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        sh("ip", "netns", "exec", ns, "/usr/sbin/sshd", "-f", str(cfg), "-E", str(tmp_path / "sshd.log"))
        login = NodeLogin("client1", NODE_ADDR, key_file=str(tmp_path / "key"), extra={"host_key": host_key})
        hv = {"ansible_host": NODE_ADDR, "ansible_port": 22, "ansible_user": "root",
              "ansible_ssh_private_key_file": login.key_file,
              "ansible_ssh_common_args": ssh_common_args(login, str(tmp_path / "known_hosts"), str(control))}
        yield hv, ns
    finally:
        close_ssh_masters([str(p) for p in control.glob("*")])
        shutil.rmtree(control, ignore_errors=True)
        left = kill_namespace_processes(ns)
        subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        subprocess.run(["ip", "link", "del", veth], capture_output=True)
        if made_run_sshd:
            shutil.rmtree("/run/sshd", ignore_errors=True)
    assert not left, f"processes of namespace {ns} still running after SIGKILL: {sorted(left)}"


def test_a_command_on_a_node_that_goes_silent_ends_within_the_keepalives(node):
    hv, ns = node
    first = subprocess.run(node_ssh_argv("client1", hv, "echo up"), capture_output=True, text=True, timeout=60)
    assert first.returncode == 0 and first.stdout.strip() == "up", first.stderr
    # A command that outlives the test, through the master the first command left.
    long = subprocess.Popen(node_ssh_argv("client1", hv, "sleep 600"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        time.sleep(2)
        assert long.poll() is None, long.communicate()
        assert any(processes_mentioning("sleep 600", pids=namespace_pids(ns)))   # what the teardown must stop
        sh("ip", "-n", ns, "link", "set", "eth0", "down")   # silent: no reset, no ICMP
        t0 = time.monotonic()
        try:
            rc = long.wait(timeout=120)
        except subprocess.TimeoutExpired:
            pytest.fail("the command on the silent node still waits after 120 s: no keepalive gave it up")
        took = time.monotonic() - t0
    finally:
        if long.poll() is None:
            long.kill()
            long.wait()
    assert rc == 255, (rc, long.communicate())
    assert 45 <= took <= 100, took   # 4 probes 15 s apart
