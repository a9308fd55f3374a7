"""Build the Ansible inventory (YAML) from the spec and the nodes' SSH logins.

Shape (ansible-inventory's YAML format)::

    all:
      vars: {netrepro_experiment: pie-vs-red, netrepro_site: local, ...}
      children:
        clients: {hosts: {client1: {ansible_host: ..., ansible_port: 22, ansible_user: root,
                                    netrepro_addresses: {clients_lan: 10.10.1.1}, ...}}}
        routers: {hosts: {router: {...}}}
        servers: {hosts: {...}}

Every host carries its data-plane addresses (``netrepro_addresses``: network -> IPv4, and
``netrepro_prefixlen``: network -> prefix length); the interface names are found on the
node from those addresses during provisioning, never assumed.

Host keys are checked on every connection (``ansible_host_key_checking: true``), against a
known_hosts file of the reservation: a node whose login carries its public host key
(``login.extra["host_key"]``; the jump host's in ``extra["jump_host_key"]``), as the local
site's nodes do, is checked against exactly that key (``StrictHostKeyChecking=yes``, the
file written by :func:`write_known_hosts`); any other node's key is accepted on first
contact and checked from then on (``accept-new``, ssh_config(5)).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import os
import re
import shlex
from pathlib import Path
from typing import Any

import yaml

from netrepro.sites.login import NodeLogin
from netrepro.experiment.spec import Spec


def _host_key_options(known_hosts: str, pinned: bool) -> list[str]:
    """ssh options checking host keys against ``known_hosts``: only the pinned keys when
    ``pinned`` (the system-wide file too is ignored), else accept-new."""
    if pinned:
        return ["-o", f"UserKnownHostsFile={known_hosts}", "-o", "GlobalKnownHostsFile=/dev/null",
                "-o", "StrictHostKeyChecking=yes"]
    return ["-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=accept-new"]


def _split_jump(proxy_jump: str) -> tuple[str, str, int]:
    """``user@host:port`` (port optional, default 22) -> (user@host, host, port)."""
    user_host, sep, port = proxy_jump.rpartition(":")
    if not sep or not port.isdigit():
        user_host, port = proxy_jump, "22"
    return user_host, user_host.rpartition("@")[2], int(port)


#: OpenSSH keepalives on every connection to a node and to its jump host (ssh_config(5):
#: ServerAliveInterval, ServerAliveCountMax): a node that vanishes without closing its
#: connections (a testbed VM stopped under the run, a cut path) is given up after 4 unanswered
#: probes 15 s apart, about 60 s, and its commands fail as unreachable. Without them, a
#: multiplexed connection waits until TCP gives up on the silent peer, about 15 minutes with
#: Linux's default tcp_retries2 of 15 (Documentation/networking/ip-sysctl.rst).
KEEPALIVE_OPTIONS = ("-o", "ServerAliveInterval=15", "-o", "ServerAliveCountMax=4")

#: Where the SSH masters of every site live (ssh_config(5) ControlPath): under /tmp, since a
#: socket cannot live on the micro-VM's 9p folders ("cannot bind to path").
CONTROL_ROOT = Path("/tmp/netrepro-cp")


def control_dir(state: Path, make: bool = False) -> str:
    """The folder of the SSH control sockets of one site's reservation (``state``: its state
    folder): ``/tmp/netrepro-cp/<12 hex digits of sha1(state folder)>``; made (mode 0700) when
    ``make``, for a command that opens connections.

    One folder per reservation, never shared: ssh's ``%C`` hashes only the local host, the
    node's address, port and user (ssh_config(5), OpenSSH 9.2), so two sites that give nodes
    the same address (a local site in host mode and another in the micro-VM, or a static
    site over a local one) would otherwise share a master: the second site's commands would
    run over the first one's connection (its host key never checked against the second's
    known_hosts), and the first site's ``down`` (``ssh -O exit``) would cut the second's
    sessions mid-task: a raw command then came back with empty output ("Shared connection
    closed"). The path stays short: a unix socket's path holds at most 107 bytes (unix(7)),
    and ssh adds a 17-character suffix while it binds."""
    d = CONTROL_ROOT / hashlib.sha1(str(Path(state).resolve()).encode()).hexdigest()[:12]
    if make:
        CONTROL_ROOT.mkdir(mode=0o700, exist_ok=True)
        d.mkdir(mode=0o700, exist_ok=True)
    return str(d)


def jump_control_path(control_dir: str, proxy_jump: str) -> str:
    """The control socket of the connection to jump host ``proxy_jump`` (``user@host:port``)
    in ``control_dir`` (:func:`control_dir`): ``jump-<12 hex digits of sha1(proxy_jump)>``."""
    return f"{control_dir}/jump-" + hashlib.sha1(proxy_jump.encode()).hexdigest()[:12]


def ssh_common_args(login: NodeLogin, known_hosts: str | None = None, control_dir: str | None = None) -> str:
    """OpenSSH options for one node as a string for ``ansible_ssh_common_args``.

    ProxyJump (ssh(1) ``-J``) reaches nodes behind a bastion or inside the local micro-VM.
    Both the node's connection and the jump host's carry :data:`KEEPALIVE_OPTIONS`.
    ``known_hosts``: the reservation's known_hosts file; the node's (and the jump host's) key is
    checked against it, strictly when the login pins it (see the module docstring), else
    accept-new. When None, host key checking is left to the user's SSH configuration.
    """
    opts = list(KEEPALIVE_OPTIONS)
    if known_hosts:
        opts += _host_key_options(known_hosts, bool(login.extra.get("host_key")))
    if login.proxy_jump:
        # The jump connection needs the same identity and known_hosts; ProxyCommand keeps
        # them explicit (ProxyJump would read only ~/.ssh/config for the jump host).
        jump_user_host, _, jump_port = _split_jump(login.proxy_jump)
        # '[%h]:%p' as ssh's own ProxyJump does: a bare IPv6 address (FABRIC) needs brackets.
        inner = ["ssh", "-W", "[%h]:%p", "-p", str(jump_port), "-o", "BatchMode=yes", *KEEPALIVE_OPTIONS]
        jump_key = login.extra.get("proxy_key_file") or login.key_file  # FABRIC: bastion key differs
        if jump_key:
            inner += ["-i", jump_key, "-o", "IdentitiesOnly=yes"]
        if known_hosts:
            inner += _host_key_options(known_hosts, bool(login.extra.get("jump_host_key")))
        if control_dir:
            # One multiplexed connection to the jump host serves every node: handshakes are
            # costly on a slow jump host (the micro-VM under TCG), and many at once time out.
            inner += ["-o", "ControlMaster=auto", "-o", "ControlPersist=1800s",
                      "-o", f"ControlPath={jump_control_path(control_dir, login.proxy_jump)}"]
        # '--': the destination can never be read as an option. ssh expands %-tokens in a
        # ProxyCommand (ssh_config(5), TOKENS): every word but the -W target has '%' doubled.
        inner += ["--", jump_user_host]
        inner = [x if i == 2 else x.replace("%", "%%") for i, x in enumerate(inner)]
        opts += ["-o", "ProxyCommand=" + " ".join(shlex.quote(x) for x in inner)]
    if control_dir:
        opts += ["-o", "ControlMaster=auto", "-o", "ControlPersist=1800s", "-o", f"ControlPath={control_dir}/%C"]
    return " ".join(shlex.quote(o) if " " in o else o for o in opts)


_KEY_TYPE = re.compile(r"^(ssh-(ed25519|rsa|dss)|ecdsa-sha2-nistp(256|384|521)|sk-[a-z0-9@.-]+)$")


def _public_key(text: str, what: str) -> str:
    """``type base64`` of one OpenSSH public key (a ``.pub`` file's text, comment dropped).

    Raises:
        ValueError: ``text`` is not one such key (names ``what``).
    """
    parts = text.split()
    try:
        ok = len(parts) >= 2 and "\n" not in text.strip() and bool(_KEY_TYPE.match(parts[0])) \
            and bool(base64.b64decode(parts[1], validate=True))
    except (binascii.Error, ValueError):
        ok = False
    if not ok:
        raise ValueError(f"{what}: expected one OpenSSH public key (type and base64), got {text[:60]!r}")
    return f"{parts[0]} {parts[1]}"


def _known_host(host: str, port: int) -> str:
    """The host field of a known_hosts line (sshd(8), SSH_KNOWN_HOSTS FILE FORMAT)."""
    return host if port == 22 else f"[{host}]:{port}"


def known_hosts_lines(logins: dict[str, NodeLogin]) -> list[str]:
    """known_hosts lines for the host keys the logins pin (``extra["host_key"]`` for the
    node at ``host``:``port``, ``extra["jump_host_key"]`` for its ``proxy_jump`` host), sorted,
    each once. Raises ValueError when a pinned key is not an OpenSSH public key."""
    lines = set()
    for name, lg in logins.items():
        if lg.extra.get("host_key"):
            lines.add(f"{_known_host(lg.host, lg.port)} {_public_key(lg.extra['host_key'], f'{name} host_key')}")
        if lg.proxy_jump and lg.extra.get("jump_host_key"):
            _, host, port = _split_jump(lg.proxy_jump)
            lines.add(f"{_known_host(host, port)} {_public_key(lg.extra['jump_host_key'], f'{name} jump_host_key')}")
    return sorted(lines)


def write_known_hosts(logins: dict[str, NodeLogin], path: Path) -> bool:
    """Write the keys the logins pin (:func:`known_hosts_lines`) to ``path`` (mode 0600,
    replacing it) and return True; when they pin none, leave ``path`` as it is (testbed nodes:
    ssh adds their keys on first contact) and return False."""
    lines = known_hosts_lines(logins)
    if not lines:
        return False
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write("".join(line + "\n" for line in lines))
    tmp.replace(path)
    return True


def mac_colons(mac: str | None) -> str | None:
    """A MAC address as ``ip -j link`` prints it (``02:65:b6:20:5a:d1``) from the forms sites
    report it in (a GENI manifest's ``0265b6205ad1``, fablib's ``02:65:B6:20:5A:D1``);
    None stays None.

    Raises:
        ValueError: not 12 hexadecimal digits once ``:``, ``-`` and ``.`` are removed.
    """
    if mac is None:
        return None
    digits = "".join(c for c in str(mac) if c not in ":-.").lower()
    if len(digits) != 12 or any(c not in "0123456789abcdef" for c in digits):
        raise ValueError(f"{mac!r} is not a MAC address (12 hexadecimal digits)")
    return ":".join(digits[i:i + 2] for i in range(0, 12, 2))


def build_inventory(spec: Spec, logins: dict[str, NodeLogin], site: str,
                    extra_vars: dict[str, Any] | None = None,
                    known_hosts: str | None = None, control_dir: str | None = None) -> dict:
    """Inventory dict for ``spec`` given every node's login.

    Raises:
        KeyError: a node of the spec has no login (message names it).
    """
    missing = [n for n in spec.nodes if n not in logins]
    if missing:
        raise KeyError(f"no login for node(s) {', '.join(missing)}")
    children: dict[str, dict] = {}
    for group, members in spec.groups.items():
        hosts = {}
        for node in members:
            lg = logins[node]
            md = spec.model.nodes[node]
            # The node's experiment interfaces (model names): address/prefix, its LAN, its peer
            # port; for a port without an address, what the site knows to find its device by
            # (the MAC from a manifest or slice, the device name from a static file).
            macs, devices = lg.extra.get("macs") or {}, lg.extra.get("ports") or {}
            itfs = {i["interface"]: {"address": i["address"], "prefixlen": i["prefixlen"], "network": i["network"],
                                     "link": i["link"], "mac": None if i["address"] else mac_colons(macs.get(key)),
                                     "device": None if i["address"] else devices.get(key)}
                    for key, i in spec.model.data_plane(node).items()}
            hv: dict[str, Any] = {
                "ansible_host": lg.host,
                "ansible_port": lg.port,
                "ansible_user": lg.user,
                "netrepro_kind": md.kind,
                # keyed by LAN for LAN interfaces, by interface name for links (roles/interfaces)
                "netrepro_addresses": {i["network"] or name: i["address"] for name, i in itfs.items() if i["address"]},
                "netrepro_prefixlen": {i["network"] or name: i["prefixlen"] for name, i in itfs.items() if i["address"]},
                "netrepro_interfaces": itfs,
            }
            if lg.extra.get("node_dir"):
                # Node-private folder (configs, FTP root, pid files, data); required when
                # several nodes share one filesystem (the local site's namespaces).
                hv["netrepro_node_dir"] = lg.extra["node_dir"]
            if lg.key_file:
                hv["ansible_ssh_private_key_file"] = lg.key_file
            args = ssh_common_args(lg, known_hosts, control_dir)
            if args:
                hv["ansible_ssh_common_args"] = args
            if lg.user != "root":
                hv["ansible_become"] = True
            hosts[node] = hv
        children[group] = {"hosts": hosts}
    all_vars = {"netrepro_experiment": spec.name, "netrepro_site": site,
                "ansible_python_interpreter": "/usr/bin/python3",
                # Outranks ANSIBLE_HOST_KEY_CHECKING and ansible.cfg: checking stays on even
                # when the inventory is used by hand or under ansible-runner's default (False).
                "ansible_host_key_checking": True}
    all_vars.update(extra_vars or {})
    return {"all": {"vars": all_vars, "children": children}}


#: The first line of every inventory netrepro generates: netrepro rewrites (``up``) or removes
#: (``down``, ``clean``) an inventory file only when it begins with it (:func:`generated_inventory`).
GENERATED_HEADER = "# Generated by netrepro; do not edit (it is rewritten by `netrepro up`).\n"


def generated_inventory(path: Path) -> bool:
    """Whether ``path`` is a regular file (not a symbolic link) beginning with
    :data:`GENERATED_HEADER`, i.e. an inventory netrepro wrote and may rewrite or remove."""
    try:
        if path.is_symlink() or not path.is_file():
            return False
        with open(path, "rb") as f:
            head = f.read(len(GENERATED_HEADER.encode()))
    except OSError:
        return False
    return head == GENERATED_HEADER.encode()


def foreign_inventory(path: Path) -> str | None:
    """One line saying that ``path`` holds a file netrepro did not generate
    (:func:`generated_inventory`), which it must neither overwrite nor remove; None when
    ``path`` is free or netrepro's own."""
    if (path.exists() or path.is_symlink()) and not generated_inventory(path):
        return (f"{path}: an inventory netrepro did not generate (its first line is not netrepro's header); "
                f"expected it absent: move it away, netrepro writes the site's inventory there")
    return None


def dump_inventory(inv: dict) -> str:
    """YAML text of an inventory dict, beginning with :data:`GENERATED_HEADER`."""
    return GENERATED_HEADER + yaml.safe_dump(inv, sort_keys=False, default_flow_style=False)


def write_inventory(inv: dict, path: Path) -> Path:
    """Write the inventory YAML to ``path`` (parents created) and return the path.

    Raises:
        FileExistsError: ``path`` exists and netrepro did not generate it
            (:func:`generated_inventory`): a user's own inventory is never overwritten.
    """
    problem = foreign_inventory(path)
    if problem:
        raise FileExistsError(problem)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(dump_inventory(inv))
    tmp.replace(path)
    return path
