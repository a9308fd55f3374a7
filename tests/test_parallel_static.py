"""A campaign on two reservations, for real, with one lost mid-campaign (``--parallel 2``).

The local site builds two copies of tests/data/experiments/gateway-fifo.yml in host mode (its
qdiscs are in this kernel): `netrepro up --site local --parallel 2`, the second copy's
namespaces, bridges and management subnet carrying its number. They are described as two
static-site nodes files, as a user describes two sets of machines, and the static site runs
the campaign on both: 4 trial instances (REPEAT=2), dealt out as each reservation comes free.
While the second reservation runs a trial, every process of its nodes is killed (its sshd
too): that trial fails, its nodes no longer answer, so the reservation is released and the
trial runs again on the first. The campaign completes with nothing lost, each trial's record
naming its reservation, the verdict is the experiment's, and nothing is left reserved. Root.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from conftest import assert_judged_as_reproduced, netrepro_on_this_host, static_nodes_of_local
from netrepro.experiment.spec import load_spec

REPO = Path(__file__).resolve().parent.parent
EXP = REPO / "tests" / "data" / "experiments" / "gateway-fifo.yml"

pytestmark = pytest.mark.netns


def _kill_nodes(spec, copy: int) -> list[str]:
    """SIGKILL every process in the namespaces of copy ``copy``'s nodes; returns the pids."""
    pids = []
    for node in spec.nodes:
        out = subprocess.run(["ip", "netns", "pids", f"{node}.{copy}"], capture_output=True, text=True).stdout
        pids += out.split()
    if pids:
        subprocess.run(["kill", "-9", *pids], capture_output=True)
    return pids


def _kill_when_running_on(results: Path, spec, copy: int, done: dict, timeout_s: float = 900) -> None:
    """Watch the campaign's run.json; once a trial instance runs on reservation ``copy``, kill
    that copy's nodes (``done['killed']``: the instance, ``done['pids']``)."""
    t0 = time.time()
    while time.time() - t0 < timeout_s and not done.get("stop"):
        for rj in results.glob("gateway-fifo/*/run.json"):
            try:
                meta = json.loads(rj.read_text())
            except (OSError, ValueError):
                continue
            for s in meta.get("trial_status") or []:
                last = (s.get("attempts") or [{}])[-1]
                if s.get("status") == "running" and last.get("reservation") == copy:
                    time.sleep(2)   # into its arming or schedule
                    done["killed"], done["pids"] = s["id"], _kill_nodes(spec, copy)
                    return
        time.sleep(0.3)


@pytest.fixture(scope="module")
def campaign(tmp_path_factory):
    host = netrepro_on_this_host(tmp_path_factory, "parallel-static", ("LOCAL_MODE", "PARALLEL", "STATIC_FILE", "REPEAT"))
    base, nr = host.base, host.nr
    spec = load_spec(EXP)

    up = nr("up", str(EXP), "--site", "local", "--option", "mode=host", "--parallel", "2")
    try:
        assert up.returncode == 0, (up.stdout + up.stderr)[-4000:]
        files, known = [], []
        for copy, folder in ((1, "gateway-fifo-local"), (2, "gateway-fifo-local.2")):
            state = json.loads((base / "state" / folder / "state.json").read_text())
            f = base / f"nodes-{copy}.yml"
            f.write_text(yaml.safe_dump({"nodes": static_nodes_of_local(state, spec, base / f"copy{copy}")}))
            files.append(str(f))
            known.append((base / "state" / folder / "ssh" / "known_hosts").read_text())
        known_hosts = base / "known_hosts"
        known_hosts.write_text("".join(known))   # one file for both sets of machines, as a user's
        opts = ["--site", "static", "--option", f"static_file={','.join(files)}", "--option",
                f"known_hosts={known_hosts}", "--option", "install_packages=false"]   # they share this host's apt
        watch: dict = {}
        watcher = threading.Thread(target=_kill_when_running_on, args=(base / "results", spec, 2, watch), daemon=True)
        watcher.start()
        p = nr("reproduce", str(EXP), *opts, "--parallel", "2", "--time-scale", "0.5", "--repeat", "2", "--seed", "11")
        watch["stop"] = True
        watcher.join(10)
        static_left = [json.loads(s.read_text()) for s in (base / "state").glob("gateway-fifo-static*/state.json")]
        yield SimpleNamespace(d=base / "results" / "gateway-fifo" / "latest", out=p.stdout + p.stderr, rc=p.returncode,
                              watch=watch, static_left=static_left, spec=spec)
    finally:
        down = nr("down", str(EXP), "--site", "local")
        assert down.returncode == 0, down.stdout + down.stderr
        left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.split()
        assert not [n for n in left if n.split(".")[0] in spec.nodes], left


def test_the_campaign_completes_on_the_reservation_left_and_reproduces(campaign):
    c = campaign
    assert c.rc == 0, c.out[-5000:]
    assert c.watch.get("killed") and c.watch.get("pids"), "no trial ran on reservation #2"
    meta = json.loads((c.d / "run.json").read_text())
    assert meta["parallel"] == 2 and len(meta["trial_status"]) == 4
    assert all(s["status"] == "complete" for s in meta["trial_status"]) and len(meta["trials"]) == 4
    assert {t["reservation"] for t in meta["trials"]} <= {1, 2} and any(t["reservation"] == 1 for t in meta["trials"])
    lost = meta["lost_reservations"]
    assert [(x["reservation"], x["trial"], x["released"]) for x in lost] == [(2, c.watch["killed"], True)]
    moved = next(s for s in meta["trial_status"] if s["id"] == c.watch["killed"])
    assert [(a["reservation"], a["status"]) for a in moved["attempts"]][0] == (2, "failed")
    assert moved["attempts"][-1]["reservation"] == 1 and moved["attempts"][-1]["status"] == "complete"
    # after the loss, every trial begun ran on reservation #1
    lost_at = lost[0]["at"]
    assert all(a["reservation"] == 1 for s in meta["trial_status"] for a in s["attempts"] if a["started_at"] > lost_at)
    assert "[run] reservation static #2 lost: " in c.out and "releasing it; its trials go to static #1" in c.out
    assert_judged_as_reproduced(json.loads((c.d / "verdict.json").read_text()))


def test_nothing_is_left_reserved(campaign):
    assert campaign.rc == 0, campaign.out[-3000:]
    assert [s for s in campaign.static_left if s.get("logins")] == []
