"""Real nodes behind the test aggregate: the local site's namespaces, made to look like testbed VMs.

:class:`LocalNodes` builds an experiment's nodes with netrepro's local site in host mode (one
network namespace per node, each with its own sshd on a management address; the host's
kernel must have the experiment's qdiscs), then changes what a testbed VM would not have:

- each node's sshd is started again in a mount namespace of its own, where
  ``/var/lib/netrepro`` (netrepro's folder on a testbed node) is a folder of that node alone,
  so that seven "VMs" sharing one file system do not share their trial files;
- a switch's bridge is removed: a testbed VM gets NICs, and roles/switch_bridge must bridge
  them (found by the MAC addresses the manifest gives);
- the slice members' SSH public keys (AM API v3 Provision's ``geni_users``) are the only
  ones its sshd accepts besides the local site's own.

``build`` returns what the aggregate's manifest needs: each node's login host and port, and
each interface's MAC by its request ``client_id``. ``teardown`` gives everything back.
Root only.
"""

from __future__ import annotations

import json
import shlex
import subprocess
import time
from pathlib import Path

from netrepro.sites import get_site
from netrepro.sites.rspec import interface_id
from netrepro.spec import load_spec

#: netrepro's folder on a testbed node (netrepro.runner.ssh's default node dir).
NODE_DIR = Path("/var/lib/netrepro")


def _sh(*argv: str) -> str:
    res = subprocess.run(list(argv), capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)}: {(res.stderr or res.stdout).strip()[-400:]}")
    return res.stdout


class LocalNodes:
    """Nodes of experiment ``experiment`` (a path) built on demand in ``base``."""

    def __init__(self, experiment: Path, base: Path):
        self.spec = load_spec(experiment)
        self.base = Path(base)
        self.site = None
        self.made_node_dir = False
        self.builds = 0

    def build(self, keys: list[str]) -> dict[str, dict]:
        """Build the nodes with ``keys`` authorized; node -> {"host", "port", "macs"}."""
        self.builds += 1
        state = self.base / f"nodes-{self.builds}"
        self.site = get_site("local", self.spec, state, {"mode": "host", "authorized_keys": keys})
        self.site.reserve(log=lambda line: None)
        self.site.wait_ready(log=lambda line: None)
        if not NODE_DIR.exists():
            NODE_DIR.mkdir(parents=True)
            self.made_node_dir = True
        st = self.site.load_state()
        m = self.spec.model
        out = {}
        for node, login in st["logins"].items():
            home = self.base / "disks" / f"{self.builds}-{node}"
            home.mkdir(parents=True, exist_ok=True)
            run = Path(login["extra"]["node_dir"])
            pid = (run / "sshd.pid").read_text().strip()
            _sh("kill", pid)
            for _ in range(100):   # its listening socket goes with it
                if not Path(f"/proc/{pid}").exists():
                    break
                time.sleep(0.05)
            cfg = state / "nodes" / node / "sshd_config"
            inner = (f"mount --bind {shlex.quote(str(home))} {NODE_DIR} && "
                     f"exec /usr/sbin/sshd -f {shlex.quote(str(cfg))} -E {shlex.quote(str(run / 'sshd.log'))}")
            _sh("ip", "netns", "exec", node, "unshare", "--mount", "--propagation", "private", "sh", "-c", inner)
            if m.nodes[node]["kind"] == "switch":
                links = json.loads(_sh("ip", "-n", node, "-j", "link", "show", "type", "bridge"))
                for br in links:
                    _sh("ip", "-n", node, "link", "del", br["ifname"])
            links = {ln["ifname"]: ln.get("address") for ln in json.loads(_sh("ip", "-n", node, "-j", "link"))}
            macs = {interface_id(node, key): links[key] for key in m.data_plane(node) if links.get(key)}
            out[node] = {"host": login["host"], "port": login["port"], "macs": macs}
        return out

    def teardown(self) -> None:
        """Release the local site (namespaces, bridges, processes); remove the node folder
        this class made, if it is empty. Harmless when nothing is built."""
        if self.site is not None:
            self.site.release(log=lambda line: None)
            self.site = None
        if self.made_node_dir:
            try:
                NODE_DIR.rmdir()
                self.made_node_dir = False
            except OSError:
                pass
