"""Nobody's machine is rebooted unasked: a static node without a qdisc is refused, on a real node.

The local site builds tests/data/experiments/pie-pair.yml in host mode (two namespaces of this
machine, each with its own sshd): this kernel has no sch_pie, so these "machines" lack the
experiment's qdisc, as a user's own machine may. `netrepro up` and `provision --site static`
on them must fail at roles/kernel_capability with one line naming the node, the qdisc and the
option that would allow a kernel and a reboot, and must install nothing (no apt task, no
reboot task ran). Root.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import netrepro_on_this_host, static_nodes_of_local
from netrepro.experiment.spec import load_spec

REPO = Path(__file__).resolve().parent.parent
EXP = REPO / "tests" / "data" / "experiments" / "pie-pair.yml"

pytestmark = pytest.mark.netns


@pytest.fixture(scope="module")
def refused(tmp_path_factory):
    host = netrepro_on_this_host(tmp_path_factory, "static-no-reboot", ("LOCAL_MODE", "KERNEL_UPGRADE", "STATIC_FILE"),
                                 timeout_s=900)
    base, nr = host.base, host.nr

    up = nr("up", str(EXP), "--site", "local", "--option", "mode=host")
    try:
        assert up.returncode == 0, (up.stdout + up.stderr)[-4000:]
        state = json.loads((base / "state" / "pie-pair-local" / "state.json").read_text())
        spec = load_spec(EXP)
        nodes = static_nodes_of_local(state, spec, base)
        (base / "nodes.yml").write_text(yaml.safe_dump({"nodes": nodes}))
        known = base / "state" / "pie-pair-local" / "ssh" / "known_hosts"
        opts = ["--site", "static", "--option", f"static_file={base / 'nodes.yml'}", "--option",
                f"known_hosts={known}", "--option", "install_packages=false"]
        assert nr("up", str(EXP), *opts).returncode == 0
        p = nr("provision", str(EXP), "-v", *opts)
        nr("down", str(EXP), *opts)
        yield p
    finally:
        down = nr("down", str(EXP), "--site", "local")
        assert down.returncode == 0, down.stdout + down.stderr


def test_a_node_without_the_qdisc_is_refused_naming_node_qdisc_and_option(refused):
    assert refused.returncode == 2, refused.stdout[-3000:] + refused.stderr[-3000:]
    last = refused.stderr.strip().splitlines()[-1]
    assert last.startswith("netrepro: provisioning failed")
    assert "failed on h1: h1 lacks: pie@h1-0." in last   # the qdisc and its device
    assert "Nothing was installed and the node was not rebooted" in last
    assert "kernel_upgrade=true (KERNEL_UPGRADE=true)" in last


def test_nothing_was_installed_and_no_reboot_ran(refused):
    """With -v the console shows every task's result: the install and reboot tasks were skipped."""
    out = refused.stdout + refused.stderr
    assert "TASK [kernel_capability : Probe" in out   # the probe ran
    for task in ("Upgrade iproute2", "Install the kernel modules of the running kernel",
                 "Install the distribution kernel", "Reboot"):
        part = out.split(f"TASK [kernel_capability : {task}]")
        assert len(part) == 1 or part[1].lstrip("*\n ").startswith("skipping"), f"{task}: {part[1][:300]}"
    assert "changed: [h1]" not in out.split("TASK [kernel_capability")[1] if "TASK [kernel_capability" in out else True
