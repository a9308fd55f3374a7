"""The nodes over SSH, as Ansible reaches them: an inventory's hosts and their variables, the
ssh(1) command line running a command on one, a trial's folder there; and the SSH
connections kept open to a site's nodes (ssh_config(5) ControlMaster sockets), closed when the
site goes down."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import time
from pathlib import Path

import yaml

from netrepro.sites.inventory import CONTROL_ROOT, control_dir, jump_control_path, ssh_common_args
from netrepro.sites import Site


def inventory_hosts(inv: Path) -> dict[str, dict]:
    """Host -> its variables (``all.vars`` under the host's own) from an inventory file."""
    data = yaml.safe_load(inv.read_text()) or {}
    top = data.get("all") or {}
    out: dict[str, dict] = {}

    def walk(group: dict) -> None:
        for host, hv in (group.get("hosts") or {}).items():
            out[host] = {**(top.get("vars") or {}), **(hv or {})}
        for child in (group.get("children") or {}).values():
            walk(child or {})

    walk(top)
    return out


def node_ssh_argv(host: str, hv: dict, command: str, connect_timeout_s: int = 30, as_root: bool = False) -> list[str]:
    """ssh(1) argv running ``command`` on an inventory host as Ansible reaches it: its address,
    port, user, key and ``ansible_ssh_common_args`` (jump host, known_hosts, control socket),
    with ansible.cfg's ControlPersist (the first value of an option wins). ``as_root``: the
    command runs as root, through ``sudo -n sh -c`` when the login user is not root (the
    inventory's ``ansible_become``, set for such users: a testbed's image user, FABRIC's
    ``ubuntu``), as Ansible escalates; what the trial playbook made as root (the FIFOs of the
    barrier, the trial's archive) is then writable and readable."""
    if as_root and hv.get("ansible_become"):
        command = f"sudo -n sh -c {shlex.quote(command)}"
    argv = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={connect_timeout_s}", "-o", "ControlPersist=120s",
            "-p", str(hv.get("ansible_port", 22))]
    if hv.get("ansible_ssh_private_key_file"):
        argv += ["-i", str(hv["ansible_ssh_private_key_file"]), "-o", "IdentitiesOnly=yes"]
    argv += shlex.split(str(hv.get("ansible_ssh_common_args") or ""))
    return argv + ["--", f"{hv.get('ansible_user', 'root')}@{hv.get('ansible_host', host)}", command]


def node_trial_dir(hv: dict, trial_id: str) -> str:
    """A trial's folder on a node, as the collectors role names it (its defaults:
    ``<netrepro_node_dir>/trials/<trial_id>``; packed into that path plus ``.tar.gz``)."""
    return f"{hv.get('netrepro_node_dir') or '/var/lib/netrepro'}/trials/{trial_id}"


def ssh_control_paths(site: Site) -> list[str]:
    """The control sockets (ssh_config(5) ControlPath, expanded) of the connections to the
    site's nodes (``%C``, expanded by ``ssh -G``) and of their jump host's, as the inventory's
    ``ansible_ssh_common_args`` name them (netrepro.sites.inventory.ssh_common_args); jump hosts last.

    Only paths in the site's own control folder (:func:`netrepro.sites.inventory.control_dir`)
    are returned: each is computed from a login checked as netrepro's own
    (:meth:`netrepro.sites.base.Site.saved_logins`), never read out of the options' text, so a
    state file cannot name another file for ``down`` to close or remove. Raises SiteError (one
    line naming the state file and the field) for a login that is not."""
    own = control_dir(site.state_dir)
    nodes, jumps = [], []
    for lg in site.saved_logins().values():
        args = ssh_common_args(lg, None, own)
        try:
            g = subprocess.run(["ssh", "-G", "-p", str(lg.port), *shlex.split(args), "--", f"{lg.user}@{lg.host}"],
                               capture_output=True, text=True, timeout=10)
            node = next((ln.split(None, 1)[1] for ln in g.stdout.splitlines() if ln.startswith("controlpath ")), "")
        except (OSError, subprocess.TimeoutExpired):
            node = ""
        for path, target in ((node, nodes), (jump_control_path(own, lg.proxy_jump) if lg.proxy_jump else "", jumps)):
            if path and os.path.dirname(path) == own and path not in nodes + jumps:
                target.append(path)
    return nodes + jumps


def close_ssh_masters(paths: list[str]) -> list[str]:
    """Ask the SSH master behind each control socket to exit (``ssh -O exit``); remove a
    socket nobody answers on (its master is gone; a path that is not a socket is left), then each site's control folder
    (:func:`netrepro.sites.inventory.control_dir`) the sockets were in, once empty. Returns the
    sockets that were there."""
    there = [p for p in paths if os.path.exists(p)]
    for path in there:
        try:
            subprocess.run(["ssh", "-o", f"ControlPath={path}", "-O", "exit", "--", "netrepro-master"],
                           capture_output=True, text=True, timeout=15, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            pass
        t0 = time.time()
        while os.path.exists(path) and time.time() - t0 < 5:
            time.sleep(0.1)
        try:
            if stat.S_ISSOCK(os.lstat(path).st_mode):  # never a file or link of another name
                os.unlink(path)  # a stale socket (the master died without removing it)
        except FileNotFoundError:
            pass
    for folder in {Path(p).parent for p in paths if Path(p).parent.parent == CONTROL_ROOT}:
        try:
            folder.rmdir()  # only when empty: a master that would not exit keeps it
        except OSError:
            pass
    return there
