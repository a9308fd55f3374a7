"""A version 2 file through a testbed's path, for real: the static site on switches that
arrive as a testbed gives them.

The local site builds tests/data/experiments/gateway-fifo.yml (two switches, a gateway,
four hosts; host mode here: its qdiscs are in this kernel). Then one switch, swb, is made
to look like a testbed VM before provisioning: its bridge is deleted, a port is renamed
(`swb-1` becomes `ens9`, as a testbed names NICs) and another gets an address (as Emulab
numbers every link's interfaces). The nodes are described in a static-site file as a user
describes their machines (`ports: {swb-1: ens9}`), and `netrepro reproduce --site static`
must find the ports, bridge them (roles/switch_bridge) and reproduce the experiment: without
the bridge, b1 and b2 would be cut off from the gateway. Root.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from conftest import assert_judged_as_reproduced, netrepro_on_this_host, static_nodes_of_local
from netrepro.experiment.spec import load_spec

REPO = Path(__file__).resolve().parent.parent
EXP = REPO / "tests" / "data" / "experiments" / "gateway-fifo.yml"

pytestmark = pytest.mark.netns


def sh(*argv: str) -> subprocess.CompletedProcess:
    res = subprocess.run(list(argv), capture_output=True, text=True)
    assert res.returncode == 0, f"{' '.join(argv)}: {res.stdout}{res.stderr}"
    return res


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    host = netrepro_on_this_host(tmp_path_factory, "static-v2", ("LOCAL_MODE",))
    base, nr = host.base, host.nr

    up = nr("up", str(EXP), "--site", "local", "--option", "mode=host")
    try:
        assert up.returncode == 0, (up.stdout + up.stderr)[-4000:]
        state = json.loads((base / "state" / "gateway-fifo-local" / "state.json").read_text())
        # swb as a testbed VM arrives: no bridge, NICs named by the testbed, an address on one.
        sh("ip", "-n", "swb", "link", "del", "br0")
        sh("ip", "-n", "swb", "link", "set", "dev", "swb-1", "down")
        sh("ip", "-n", "swb", "link", "set", "dev", "swb-1", "name", "ens9")
        sh("ip", "-n", "swb", "addr", "add", "10.254.0.1/24", "dev", "swb-2")
        spec = load_spec(EXP)
        nodes = static_nodes_of_local(state, spec, base)
        nodes["swb"]["ports"] = {"swb-1": "ens9"}
        static_file = base / "nodes.yml"
        static_file.write_text(yaml.safe_dump({"nodes": nodes}))
        known_hosts = base / "state" / "gateway-fifo-local" / "ssh" / "known_hosts"
        p = nr("reproduce", str(EXP), "--site", "static", "--time-scale", "0.5",
               "--option", f"static_file={static_file}", "--option", f"known_hosts={known_hosts}",
               "--option", "install_packages=false")   # the "machines" share this host's apt
        bridge = json.loads(sh("ip", "-n", "swb", "-j", "addr", "show").stdout)
        yield base / "results" / "gateway-fifo" / "latest", p.stdout + p.stderr, p.returncode, bridge
    finally:
        down = nr("down", str(EXP), "--site", "local")
        assert down.returncode == 0, down.stdout + down.stderr


def test_the_static_site_bridged_the_switch_and_the_experiment_reproduced(run):
    d, out, rc, _ = run
    assert rc == 0, out[-4000:]
    assert_judged_as_reproduced(json.loads((d / "verdict.json").read_text()))
    assert json.loads((d / "run.json").read_text())["site"] == "static"


def test_the_switch_is_bridged_over_the_testbeds_names_without_addresses(run):
    _, _, _, links = run
    by_name = {link["ifname"]: link for link in links}
    assert "br0" in by_name and "UP" in by_name["br0"]["flags"]
    for port in ("ens9", "swb-2", "swb-gw"):
        assert by_name[port].get("master") == "br0", port
        assert [a for a in by_name[port].get("addr_info", []) if a["family"] == "inet"] == [], port
