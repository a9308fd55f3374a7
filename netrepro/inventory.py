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
"""

from __future__ import annotations

import hashlib
import shlex
from pathlib import Path
from typing import Any

import yaml

from netrepro.sites.base import NodeLogin
from netrepro.spec import Spec


def ssh_common_args(login: NodeLogin, known_hosts: str | None = None, control_dir: str | None = None) -> str:
    """OpenSSH options for one node as a string for ``ansible_ssh_common_args``.

    ProxyJump (ssh(1) ``-J``) reaches nodes behind a bastion or inside the local micro-VM.
    ``known_hosts``: a per-run known_hosts file (host keys are new for every run); when None,
    host key checking is left to the user's SSH configuration.
    """
    opts = []
    if known_hosts:
        opts += ["-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=accept-new"]
    if login.proxy_jump:
        # The jump connection needs the same identity and known_hosts; ProxyCommand keeps
        # them explicit (ProxyJump would read only ~/.ssh/config for the jump host).
        jump_user_host, _, jump_port = login.proxy_jump.rpartition(":")
        # '[%h]:%p' as ssh's own ProxyJump does: a bare IPv6 address (FABRIC) needs brackets.
        inner = ["ssh", "-W", "[%h]:%p", "-p", jump_port or "22", "-o", "BatchMode=yes"]
        jump_key = login.extra.get("proxy_key_file") or login.key_file  # FABRIC: bastion key differs
        if jump_key:
            inner += ["-i", jump_key, "-o", "IdentitiesOnly=yes"]
        if known_hosts:
            inner += ["-o", f"UserKnownHostsFile={known_hosts}", "-o", "StrictHostKeyChecking=accept-new"]
        if control_dir:
            # One multiplexed connection to the jump host serves every node: handshakes are
            # costly on a slow jump host (the micro-VM under TCG), and many at once time out.
            inner += ["-o", "ControlMaster=auto", "-o", "ControlPersist=1800s", "-o", f"ControlPath={control_dir}/jump-" + hashlib.sha1(login.proxy_jump.encode()).hexdigest()[:12]]
        inner.append(jump_user_host)
        opts += ["-o", "ProxyCommand=" + " ".join(shlex.quote(x) for x in inner)]
    if control_dir:
        opts += ["-o", "ControlMaster=auto", "-o", "ControlPersist=1800s", "-o", f"ControlPath={control_dir}/%C"]
    return " ".join(shlex.quote(o) if " " in o else o for o in opts)


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
            nd = spec.nodes[node]
            hv: dict[str, Any] = {
                "ansible_host": lg.host,
                "ansible_port": lg.port,
                "ansible_user": lg.user,
                "netrepro_role": nd["role"],
                "netrepro_addresses": {i["network"]: i["address"] for i in nd["interfaces"]},
                "netrepro_prefixlen": {i["network"]: spec.prefixlen(i["network"]) for i in nd["interfaces"]},
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
                "ansible_python_interpreter": "/usr/bin/python3"}
    all_vars.update(extra_vars or {})
    return {"all": {"vars": all_vars, "children": children}}


def dump_inventory(inv: dict) -> str:
    """YAML text of an inventory dict, with a header saying it is generated."""
    head = "# Generated by netrepro; do not edit (it is rewritten by `netrepro up`).\n"
    return head + yaml.safe_dump(inv, sort_keys=False, default_flow_style=False)


def write_inventory(inv: dict, path: Path) -> Path:
    """Write the inventory YAML to ``path`` (parents created) and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(dump_inventory(inv))
    tmp.replace(path)
    return path
