"""The static site, for real, against the nodes of a running local site.

Brings the local site up (`netrepro up`, in the micro-VM where the host kernel lacks the
qdiscs), describes its nodes in a static-site YAML file as a user would describe their own
machines, and checks that the static site reaches every node over SSH (through the jump
host) and matches the data-plane addresses found with `ip -j addr`; then that a wrong
address is reported with the node and the address; then tears the local site down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from netrepro.sites import SiteError, get_site
from netrepro.spec import load_spec

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def local_site(tmp_path_factory):
    if os.geteuid() != 0:
        pytest.fail("needs root (network namespaces); run `make test` as root")
    state = tmp_path_factory.mktemp("state")
    env = dict(os.environ, NETREPRO_STATE=str(state), NETREPRO_RESULTS=str(tmp_path_factory.mktemp("results")))

    def nr(*args):
        return subprocess.run([sys.executable, "-m", "netrepro", *args, "--site", "local"], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=1200)

    up = nr("up", "pie-vs-red")
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield json.loads((state / "pie-vs-red-local" / "state.json").read_text())
    finally:
        down = nr("down", "pie-vs-red")
        assert down.returncode == 0, down.stdout + down.stderr
        assert not (state / "pie-vs-red-local" / "state.json").exists()


def _static_file(path: Path, logins: dict, spec, change: dict | None = None) -> Path:
    nodes = {}
    for name, lg in logins.items():
        # keyed by LAN as Model.data_plane keys them; the nodes file gives addresses bare
        addrs = {i["network"]: i["address"].split("/")[0] for i in spec.nodes[name]["interfaces"].values()}
        addrs.update((change or {}).get(name, {}))
        # the nodes are namespaces of one host: each keeps its files in a folder of its own
        nodes[name] = {"host": lg["host"], "port": lg["port"], "user": lg["user"], "key": lg["key_file"],
                       "work_dir": f"{path.parent}/work/{name}",
                       "addresses": addrs}
        if lg.get("proxy_jump"):
            nodes[name]["proxy_jump"] = lg["proxy_jump"]
    path.write_text(yaml.safe_dump({"nodes": nodes}))
    return path


def test_static_site_reaches_local_nodes(local_site, tmp_path):
    spec = load_spec("pie-vs-red")
    f = _static_file(tmp_path / "nodes.yml", local_site["logins"], spec)
    site = get_site("static", spec, tmp_path / "static-state",
                    {"static_file": str(f), "known_hosts": str(tmp_path / "known_hosts")})
    site.reserve()
    logins = site.logins()
    assert set(logins) == set(spec.nodes)
    # interfaces found on the nodes from their addresses: eth1/eth2 in the local site
    assert logins["router"].extra["interfaces"] == {"clients_lan": "eth1", "servers_lan": "eth2"}
    assert logins["client1"].extra["interfaces"] == {"clients_lan": "eth1"}
    site.wait_ready(timeout_s=120)
    site.release()
    site.release()  # idempotent
    assert not site.state_file.exists()


def test_static_site_reports_a_wrong_address(local_site, tmp_path):
    spec = load_spec("pie-vs-red")
    # the file says client1 is 10.10.1.1 (the topology), but its machine has another address:
    # simulate by describing server1's machine for client1
    logins = dict(local_site["logins"])
    logins["client1"] = dict(logins["server1"], name="client1")
    f = _static_file(tmp_path / "nodes.yml", logins, spec)
    site = get_site("static", spec, tmp_path / "static-state",
                    {"static_file": str(f), "known_hosts": str(tmp_path / "known_hosts")})
    with pytest.raises(SiteError, match=r"client1.*10\.10\.1\.1"):
        site.reserve()
    assert not site.state_file.exists()
