"""Real nodes behind the test aggregate: the local site's namespaces, made to look like testbed VMs.

:class:`LocalNodes` builds an experiment's nodes with netrepro's local site, in host mode
(one network namespace per node on this machine; its kernel must have the experiment's
qdiscs) or in the micro-VM (``mode="vm"``: the namespaces inside a QEMU guest booting
Debian's kernel, for experiments such as pie-vs-red), then changes what a testbed VM would
not have:

- each node's sshd is started again in a mount namespace of its own, where
  ``/var/lib/netrepro`` (netrepro's folder on a testbed node) is a folder of that node alone,
  so that seven "VMs" sharing one file system do not share their trial files;
- a switch's bridge is removed: a testbed VM gets NICs, and roles/switch_bridge must bridge
  them (found by the MAC addresses the manifest gives);
- the slice members' SSH public keys (AM API v3 Provision's ``geni_users``) are accepted by
  every node's sshd (besides the local site's own key);
- in the micro-VM, each node is reached on a port of 127.0.0.1 of its own, as an InstaGENI
  VM without a public address is reached on a high port of its physical host: each
  connection to a node's port is relayed by an OpenSSH client of its own (``ssh -W``)
  through the micro-VM's jump sshd to the node's sshd.

``build`` returns what the aggregate's manifest needs: each node's login host and port, and
each interface's MAC by its request ``client_id``. ``teardown`` gives everything back.
Root only.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from netrepro.sites import get_site
from netrepro.sites.instageni.rspec import interface_id
from netrepro.experiment.spec import load_spec

#: netrepro's folder on a testbed node (netrepro.runner.ssh's default node dir).
NODE_DIR = "/var/lib/netrepro"


def _sh(*argv: str, timeout: float = 120) -> str:
    res = subprocess.run(list(argv), capture_output=True, text=True, timeout=timeout)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)[:200]}: {(res.stderr or res.stdout).strip()[-400:]}")
    return res.stdout


def _json_values(text: str) -> list:
    """The JSON values written one after another in ``text``, whitespace between them (as
    several ``ip -j`` commands print them); raises ValueError on anything else."""
    decoder, values, at = json.JSONDecoder(), [], 0
    while (at := _SPACE.match(text, at).end()) < len(text):
        value, at = decoder.raw_decode(text, at)
        values.append(value)
    return values


_SPACE = re.compile(r"\s*")


def _restart_sshd(node: str, cfg: str, run: str, disk: str, mounts: str = "", keys: str = "", log: str = "") -> str:
    """Shell text: stop ``node``'s sshd and start it again in a mount and UTS namespace of its
    own whose NODE_DIR is ``disk``, after the shell text ``mounts`` (more mounts, or nothing);
    ``keys``: an authorized keys file instead of the configuration's; ``log``: its log file
    (default: ``run``'s sshd.log)."""
    q = shlex.quote
    opt = f" -o AuthorizedKeysFile={q(keys)}" if keys else ""
    inner = (f"mount --bind {q(disk)} {NODE_DIR} && {mounts + ' && ' if mounts else ''}"
             f"exec /usr/sbin/sshd -f {q(cfg)}{opt} -E {q(log or run + '/sshd.log')}")
    # The old sshd has ended when its /proc/PID/cmdline is gone or empty: an ended process
    # whose parent does not reap it (a zombie, under the micro-VM's init) keeps its pid, and
    # waiting on `kill -0` alone then took the whole 100 rounds (11 s a node under QEMU TCG).
    return (f"pid=$(cat {q(run + '/sshd.pid')}) && kill $pid && "
            f"for i in $(seq 100); do c=; read -r c < /proc/$pid/cmdline 2>/dev/null; "
            f"[ -n \"$c\" ] || break; sleep 0.05; done; "
            f"mkdir -p {q(disk)} {NODE_DIR} && "
            f"ip netns exec {q(node)} unshare --mount --uts --propagation private sh -c {q(inner)}")


def shared_folder() -> Path:
    """A new folder under the system's temporary folder that every user may enter (mode 0755;
    pytest's own are 0700): what sshd reads as a non-root user (its authorized keys, its home)
    must be there. Its maker removes it."""
    path = Path(tempfile.mkdtemp(prefix="netrepro-testbed-"))
    path.chmod(0o755)
    return path


def free_id() -> int:
    """A number from 60000 up that no user or group of this host has, for an account only a
    node's (or a bastion's) mount namespace sees."""
    taken = {int(line.split(":")[2]) for f in ("/etc/passwd", "/etc/group")
             for line in Path(f).read_text().splitlines() if line.count(":") >= 3}
    return next(i for i in range(60000, 61000) if i not in taken)


def login_user_files(folder: Path, home: Path, user: str) -> str:
    """Write, into ``folder``, the account files of a node whose login user is ``user`` (not
    root), as a testbed image has one (FABRIC's ``ubuntu``): ``passwd`` and ``group`` (this
    host's, plus ``user`` with a uid and gid no host account has and ``home``, made and given
    to it, in a :func:`shared_folder`),
    ``shadow`` (root's and ``user``'s lines only, no password: keys log in; this host's own
    shadow is never read) and ``sudoers.d/`` (``user`` may run anything as root without a
    password, as on the testbed's images). Returns the shell text that mounts them over the
    node's ``/etc`` in its own mount namespace (see :func:`_restart_sshd`), where the D-Bus
    system socket and ``/etc/netplan`` are also hidden, so that what a testbed's client runs
    on the node with sudo (fablib's ``hostnamectl``, ``nmcli``, ``netplan``) reaches no
    service and no file of this host.
    Raises RuntimeError when sudo is not installed (``netrepro setup --dev`` installs it)."""
    if not Path("/etc/sudoers.d").is_dir() or not any(Path(d, "sudo").exists() for d in ("/usr/bin", "/bin")):
        raise RuntimeError("sudo is not installed: the nodes' login user needs it; run `netrepro setup --dev` (apt-get install sudo)")
    folder.mkdir(parents=True, exist_ok=True)
    passwd = Path("/etc/passwd").read_text()
    group = Path("/etc/group").read_text()
    uid = free_id()
    home.mkdir(exist_ok=True)
    os.chown(home, uid, uid)
    (folder / "passwd").write_text(passwd.rstrip("\n") + f"\n{user}:x:{uid}:{uid}:testbed login:{home}:/bin/bash\n")
    (folder / "group").write_text(group.rstrip("\n") + f"\n{user}:x:{uid}:\n")
    shadow = folder / "shadow"
    shadow.write_text(f"root:*:20000:0:99999:7:::\n{user}:*:20000:0:99999:7:::\n")
    shadow.chmod(0o640)
    sudoers = folder / "sudoers.d"
    sudoers.mkdir(exist_ok=True)
    rule = sudoers / "testbed-login"
    rule.write_text(f"{user} ALL=(ALL) NOPASSWD:ALL\n")
    rule.chmod(0o440)
    q = shlex.quote
    mounts = [f"mount --bind {q(str(folder / f))} /etc/{f}" for f in ("passwd", "group", "shadow", "sudoers.d")]
    mounts += ["{ [ ! -d /run/dbus ] || mount -t tmpfs none /run/dbus; }",
               "{ [ ! -d /etc/netplan ] || mount -t tmpfs none /etc/netplan; }"]
    return " && ".join(mounts)


class _Relay:
    """A port of 127.0.0.1 (:attr:`port`) whose every connection is piped through a new
    process ``argv`` (an ``ssh -W`` client) until either side ends; ``close`` stops it all."""

    def __init__(self, argv: list[str], log):
        import socketserver

        relay = self
        self.argv, self.log, self.procs = argv, log, set()

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                relay._pipe(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self.server = Server(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def _pipe(self, conn: socket.socket) -> None:
        proc = subprocess.Popen(self.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        self.procs.add(proc)

        def up():   # the connection -> ssh
            try:
                while data := conn.recv(65536):
                    proc.stdin.write(data)
                    proc.stdin.flush()
            except OSError:
                pass
            finally:
                try:
                    proc.stdin.close()
                except OSError:
                    pass

        t = threading.Thread(target=up, daemon=True)
        t.start()
        try:
            while data := proc.stdout.read1(65536):
                conn.sendall(data)
        except OSError:
            pass
        finally:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            proc.wait()
            self.procs.discard(proc)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        for proc in list(self.procs):
            proc.terminate()


class LocalNodes:
    """Nodes of experiment ``experiment`` (a path) built on demand in ``base``, in ``mode``
    (``host`` or ``vm``) of the local site."""

    def __init__(self, experiment: Path, base: Path, mode: str = "host"):
        self.spec = load_spec(experiment)
        self.base = Path(base)
        self.mode = mode
        self.site = None
        self.relays: list[_Relay] = []
        self.builds = 0
        self.made_node_dir = False
        self.shared: Path | None = None

    def _jump(self, script: str) -> str:
        """Run ``script`` as root in the micro-VM's root namespace, through its jump sshd."""
        st = self.site.load_state()
        return _sh("ssh", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={self.site.known_hosts}",
                   "-o", "StrictHostKeyChecking=yes", "-o", "GlobalKnownHostsFile=/dev/null",
                   "-i", str(self.site.client_key), "-o", "IdentitiesOnly=yes", "-p", str(st["ssh_port"]),
                   "root@127.0.0.1", script)

    def _here(self, script: str) -> str:
        return _sh("sh", "-c", script)

    def build(self, keys: list[str], user: str = "root") -> dict[str, dict]:
        """Build the nodes with ``keys`` authorized for ``user`` (root, or a user each node gets
        with sudo: :func:`login_user_files`, host mode only); node -> {"host", "port", "macs"}."""
        if user != "root" and self.mode != "host":
            raise ValueError("a login user other than root needs host mode (the micro-VM's /etc is read-only)")
        self.builds += 1
        state = self.base / f"nodes-{self.builds}"
        self.site = get_site("local", self.spec, state, {"mode": self.mode, "authorized_keys": keys})
        self.site.reserve(log=lambda line: None)
        self.site.wait_ready(log=lambda line: None)
        run_in = self._jump if self.mode == "vm" else self._here
        if self.mode == "host" and not Path(NODE_DIR).exists():
            self.made_node_dir = True
        disks = "/var/lib/netrepro-test-nodes" if self.mode == "vm" else str(self.base / "disks")
        logins = self.site.load_state()["logins"]
        m = self.spec.model
        script = []
        for node, login in logins.items():
            mounts, keys_file, log = "", "", ""
            if user != "root":   # its sshd's log is kept (in the node's accounts folder)
                self.shared = self.shared or shared_folder()
                keys_file = str(self.shared / f"authorized_keys-{self.builds}")
                Path(keys_file).write_text("".join(k.strip() + "\n" for k in keys))
                accounts = self.base / "accounts" / f"{self.builds}-{node}"
                mounts = login_user_files(accounts, self.shared / f"home-{self.builds}-{node}", user)
                log = str(accounts / "sshd.log")
            script.append(_restart_sshd(node, str(state / "nodes" / node / "sshd_config"), login["extra"]["node_dir"],
                                        f"{disks}/{self.builds}-{node}", mounts, keys_file, log))
            if m.nodes[node].is_switch:
                script.append(f"for br in $(ip -n {shlex.quote(node)} -o link show type bridge | cut -d: -f2 | "
                              f"cut -d@ -f1); do ip -n {shlex.quote(node)} link del $br; done")
        run_in(" && ".join(script))
        out = {}
        # every node's links in one call: each call through the jump costs about 2 s under QEMU TCG
        listed = _json_values(run_in(" && ".join(f"ip -n {shlex.quote(node)} -j link" for node in logins)))
        for (node, login), node_links in zip(logins.items(), listed, strict=True):
            links = {ln["ifname"]: ln.get("address") for ln in node_links}
            macs = {interface_id(node, key): links[key] for key in m.data_plane(node) if links.get(key)}
            out[node] = {"host": login["host"], "port": login["port"], "macs": macs}
        if self.mode == "vm":
            self._forward(out)
        return out

    def _forward(self, nodes: dict[str, dict]) -> None:
        """Give each node a port of 127.0.0.1 relayed to its sshd (``nodes`` updated): each
        connection to the port gets an OpenSSH client of its own, ``ssh -W node:22`` through
        the micro-VM's jump sshd, so that no single long-lived connection carries every node
        (a NAT rule on an InstaGENI host has no such connection either). Each client's
        messages go to ``<base>/relay.log``."""
        st = self.site.load_state()
        jump = ["ssh", "-o", "BatchMode=yes", "-o", f"UserKnownHostsFile={self.site.known_hosts}",
                "-o", "StrictHostKeyChecking=yes", "-o", "GlobalKnownHostsFile=/dev/null",
                "-i", str(self.site.client_key), "-o", "IdentitiesOnly=yes", "-p", str(st["ssh_port"])]
        log = open(self.base / "relay.log", "ab")
        self.relays = []
        for node, info in nodes.items():
            relay = _Relay(jump + ["-W", f"{info['host']}:{info['port']}", "root@127.0.0.1"], log)
            self.relays.append(relay)
            info["host"], info["port"] = "127.0.0.1", relay.port
        for node, info in nodes.items():   # each answers with its sshd's banner
            end = time.monotonic() + 120
            while True:
                try:
                    with socket.create_connection(("127.0.0.1", info["port"]), timeout=60) as s:
                        s.settimeout(60)
                        if s.recv(4).startswith(b"SSH"):
                            break
                except OSError:
                    pass
                if time.monotonic() > end:
                    raise RuntimeError(f"no sshd of {node} behind 127.0.0.1:{info['port']} after 120 s (see relay.log)")
                time.sleep(0.5)

    def teardown(self) -> None:
        """Stop the relays, release the local site (micro-VM, namespaces, bridges,
        processes); remove the node folder this class made on the host, if empty. Harmless
        when nothing is built."""
        for relay in self.relays:
            relay.close()
        self.relays = []
        if self.site is not None:
            self.site.release(log=lambda line: None)
            self.site = None
        if self.made_node_dir:
            try:
                Path(NODE_DIR).rmdir()
                self.made_node_dir = False
            except OSError:
                pass
        if self.shared is not None:
            shutil.rmtree(self.shared, ignore_errors=True)
            self.shared = None
