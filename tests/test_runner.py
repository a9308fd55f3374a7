"""Tests of the pure parts of the runner (netrepro/runner/): trial variables, run folders, the
``latest`` link and checksums. Nothing here touches a site, the real results/ folder or
.state/."""

from __future__ import annotations

import hashlib
import os
from datetime import datetime, timezone
from pathlib import Path

import pytest

from netrepro.sites.inventory import write_inventory
from netrepro.runfolder.cpu import cpu_busy
from netrepro.runner import checks, console, instances, playbooks, ssh, steps, trialvars
from netrepro.runfolder import writing
from netrepro.runfolder.integrity import sha256_tree, verify_raw
from netrepro.sites.base import process_group_alive
from netrepro.experiment.spec import SpecError, load_spec


@pytest.fixture(autouse=True)
def no_real_results(tmp_path, monkeypatch):
    """Every test writes run folders under tmp_path, never into the repository's results/."""
    monkeypatch.setenv("NETREPRO_RESULTS", str(tmp_path / "results"))


# --- trial_vars --------------------------------------------------------------------------------
def test_trial_vars(spec, tmp_path):
    """The trial playbook's ``trial`` var: the model's plan of one trial at TIME_SCALE 0.1
    (each client pings the server of its flow group; the FTP rate of the trial's items), its
    stacks afresh and the FTP files provisioning made."""
    tv = trialvars.trial_vars(spec, spec.model.trial("red-limited"), 0.1, tmp_path / "fetch", 7.5)
    assert (tv["id"], tv["labels"]) == ("red-limited", {"aqm": "red", "variant": "limited"})
    assert tv["lead_s"] == 7.5 and tv["fetch_dir"] == str(tmp_path / "fetch")
    assert tv["duration_s"] == 25.0 and tv["base_rtt_s"] == 3.0
    assert tv["ping"] == {"client1": {"target": "10.10.2.1", "interval_s": 0.1, "id": "ping-client1"},
                          "client2": {"target": "10.10.2.2", "interval_s": 0.1, "id": "ping-client2"},
                          "client3": {"target": "10.10.2.3", "interval_s": 0.1, "id": "ping-client3"}}
    assert tv["qdisc_stats"] == {"router": {"interface": "eth1", "network": "clients_lan", "interval_s": 0.1,
                                            "classes": False}}
    assert tv["flows"] == {
        "client1": [{"server_address": "10.10.2.1", "flows": 10, "start_s": 0.0, "duration_s": 25.0, "id": "group1"}],
        "client2": [{"server_address": "10.10.2.2", "flows": 20, "start_s": 5.0, "duration_s": 15.0, "id": "group2"}],
        "client3": [{"server_address": "10.10.2.3", "flows": 20, "start_s": 10.0, "duration_s": 5.0, "id": "group3"}]}
    assert tv["ftp_sources"] == {"server1": 25000, "server2": 25000, "server3": 25000}
    assert tv["files"] == [f"file{i:02d}" for i in range(1, 21)]  # as many as the largest item has flows
    assert tv["iperf3"] == {} and tv["iperf3_servers"] == {}
    assert [" ".join(c) for c in tv["stacks"]["router"][0]["commands"][2:]] == [
        "class replace dev @dev@ parent 1: classid 1:10 htb rate 10mbit ceil 10mbit burst 15140 cburst 15140",
        "qdisc replace dev @dev@ parent 1:10 handle 10: red limit 200000 min 50000 max 150000 avpkt 1500 burst 56 "
        "probability 0.1 bandwidth 10mbit"]
    assert tv["sysctls"]["server1"] == {"net.ipv4.tcp_congestion_control": "reno", "net.ipv4.tcp_sack": "1"}


def test_trial_vars_unscaled_and_rounded(spec, tmp_path):
    trial = spec.model.trials[0]
    tv = trialvars.trial_vars(spec, trial, 1.0, tmp_path, 30.0)
    assert tv["id"] == "pie-unlimited"
    assert tv["duration_s"] == 250 and tv["base_rtt_s"] == 30
    assert tv["flows"]["client2"][0]["start_s"] == 50 and tv["flows"]["client2"][0]["duration_s"] == 150
    assert tv["ftp_sources"] == {"server1": 0, "server2": 0, "server3": 0}
    tv = trialvars.trial_vars(spec, trial, 1 / 3, tmp_path, 30.0)
    assert tv["duration_s"] == 83.333
    assert tv["flows"]["client3"][0] == {"server_address": "10.10.2.3", "flows": 20,
                                         "start_s": 33.333, "duration_s": 16.667, "id": "group3"}


@pytest.mark.parametrize("bad", [0, -1, float("nan"), 1e300])
def test_trial_vars_rejects_bad_scale(spec, tmp_path, bad):
    """A run resumed from a run.json whose time_scale is out of range is refused as a fresh one is
    (it used to give a schedule of zero, negative or NaN durations)."""
    with pytest.raises(ValueError, match="TIME_SCALE: expected a number from 0.001 to 100"):
        trialvars.trial_vars(spec, spec.model.trials[0], bad, tmp_path, 1.0)


def test_trial_vars_sample_the_collectors_port(tmp_path):
    """The queue sampler runs where the file's collector is (its node and interface, no LAN
    for a cable's port, its classes), and the barrier's clock is that node's (codel-lab: s2)."""
    s = load_spec("codel-lab")
    tv = trialvars.trial_vars(s, s.model.trials[0], 1, tmp_path, 1)
    assert tv["qdisc_stats"] == {"s2": {"interface": "s2-eth2", "network": None, "interval_s": 0.1, "classes": True}}
    assert trialvars.sampled_node(s) == "s2"


# --- run folders ---------------------------------------------------------------------------------
class _FrozenDatetime(datetime):
    @classmethod
    def now(cls, tz=None):
        return datetime(2024, 5, 6, 7, 8, 9, tzinfo=timezone.utc)


def test_new_run_dir_never_reuses(spec, tmp_path, monkeypatch):
    monkeypatch.setattr(writing, "datetime", _FrozenDatetime)
    a = writing.new_run_dir(spec, "local")
    b = writing.new_run_dir(spec, "local")
    c = writing.new_run_dir(spec, "static")
    base = tmp_path / "results" / "pie-vs-red"
    assert a == base / "20240506T070809Z-local"
    assert b == base / "20240506T070809Z-local-1"
    assert c == base / "20240506T070809Z-static"
    assert a.is_dir() and b.is_dir() and c.is_dir()


def test_new_run_dir_skips_existing_folders(spec, tmp_path, monkeypatch):
    monkeypatch.setattr(writing, "datetime", _FrozenDatetime)
    base = tmp_path / "results" / "pie-vs-red"
    (base / "20240506T070809Z-local").mkdir(parents=True)
    (base / "20240506T070809Z-local" / "run.json").write_text("{}")
    (base / "20240506T070809Z-local-1").mkdir()
    d = writing.new_run_dir(spec, "local")
    assert d == base / "20240506T070809Z-local-2"
    assert (base / "20240506T070809Z-local" / "run.json").read_text() == "{}"  # untouched
    for i in range(3, 100):
        (base / f"20240506T070809Z-local-{i}").mkdir()
    with pytest.raises(RuntimeError, match="cannot create a new run folder"):
        writing.new_run_dir(spec, "local")


def test_new_run_dir_real_clock(spec, tmp_path):
    dirs = [writing.new_run_dir(spec, "local") for _ in range(3)]  # same second, most likely
    assert len(set(dirs)) == 3 and all(d.is_dir() and not any(d.iterdir()) for d in dirs)
    assert all(d.parent == tmp_path / "results" / "pie-vs-red" for d in dirs)


def test_point_latest(tmp_path):
    base = tmp_path / "results" / "exp"
    one, two = base / "20240101T000000Z-local", base / "20240101T000001Z-local"
    one.mkdir(parents=True)
    two.mkdir()
    (one / "run.json").write_text("1")
    (two / "run.json").write_text("2")
    writing.point_latest(one)
    latest = base / "latest"
    assert latest.is_symlink() and os.readlink(latest) == one.name  # relative: the tree can move
    assert (latest / "run.json").read_text() == "1"
    writing.point_latest(two)
    assert os.readlink(latest) == two.name and (latest / "run.json").read_text() == "2"
    assert sorted(p.name for p in base.iterdir()) == sorted([one.name, two.name, "latest"])  # no temp link left


def test_sha256_tree(tmp_path):
    root = tmp_path / "raw"
    (root / "pie-limited" / "router").mkdir(parents=True)
    (root / "empty").mkdir()
    (root / "a.txt").write_bytes(b"abc")
    (root / "pie-limited" / "router" / "qdisc.jsonl").write_bytes(b"")
    got = sha256_tree(root)
    assert got == {
        "a.txt": "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad",
        "pie-limited/router/qdisc.jsonl": hashlib.sha256(b"").hexdigest(),
    }
    assert list(got) == sorted(got)
    (root / "a.txt").write_bytes(b"abd")
    assert sha256_tree(root)["a.txt"] != got["a.txt"]



def test_verify_raw_of_some_trials_sees_only_their_folders(tmp_path):
    """``trials``: only those instances' folders and recorded paths are compared (what a resume
    checks of its completed trials); another trial's damage, or a link in it, is not looked at."""
    raw = tmp_path / "raw"
    for tid in ("a", "b"):
        (raw / tid).mkdir(parents=True)
        (raw / tid / "ping.txt").write_text(tid)
    record = sha256_tree(raw)
    (raw / "b" / "ping.txt").write_text("changed")
    (raw / "b" / "link").symlink_to("/etc/hostname")
    (raw / "a" / "extra.txt").write_text("x")
    check = verify_raw(raw, record, tmp_path / "run.json", ["a", "../b", "c"])
    assert check.recorded == {"a/ping.txt": record["a/ping.txt"]}
    assert check.damaged == [("a/extra.txt", "unlisted")]
    assert set(check.actual) == {"a/ping.txt", "a/extra.txt"}

def test_paths_follow_spec_and_site(spec):
    assert steps.state_dir(spec, "local").name == "pie-vs-red-local"
    assert steps.inventory_path(spec, "fabric").name == "pie-vs-red-fabric.yml"
    assert steps.inventory_path(spec, "fabric").parent == steps.INVENTORY_DIR


def test_cpu_busy_from_proc_stat_snapshots():
    # user nice system idle iowait irq softirq steal guest guest_nice (proc(5))
    before = {"cpu_ticks": "100 0 100 800 0 0 0 0 0 0"}
    after = {"cpu_ticks": "200 0 200 850 50 0 0 0 0 0"}
    assert cpu_busy(before, after) == round(200 / 300, 3)
    assert cpu_busy({}, after) is None
    assert cpu_busy(before, before) is None


# --- faults: the checks of a trial's data, the node clocks, failure reasons -----------------------
RECORDED = Path(__file__).resolve().parent / "data" / "pie-vs-red-local-0.1"


@pytest.fixture
def recorded_trial(spec, tmp_path):
    """A copy of the recorded pie-limited trial (TIME_SCALE 0.1), its variables and start.

    The run was recorded from pie-vs-red's schema_version 1 file; the variables are those of the
    schema_version 2 file's pie-limited trial, whose schedule, flows, pings and queue sampler
    are the same (check_trial_data reads only those)."""
    import json
    import shutil
    tdir = tmp_path / "pie-limited"
    shutil.copytree(RECORDED / "raw" / "pie-limited", tdir)
    run = json.loads((RECORDED / "run.json").read_text())
    start = next(t["start_epoch_s"] for t in run["trials"] if t["id"] == "pie-limited")
    trial = next(t for t in spec.model.trials if t.id == "pie-limited")
    tv = trialvars.trial_vars(spec, trial, 0.1, tmp_path / "fetch", 30)
    return tv, tdir, start


def test_check_trial_data_whole_recorded_trial(recorded_trial):
    tv, tdir, start = recorded_trial
    assert checks.check_trial_data(tv, tdir, start) == []


def _keep_lines(path: Path, pred) -> None:
    path.write_text("".join(ln for ln in path.read_text().splitlines(keepends=True) if pred(ln)))


@pytest.mark.parametrize("damage, expected", [
    # a flow client killed mid-trial: curl prints no row for an unfinished transfer
    (lambda d: _keep_lines(d / "client2" / "flows.csv", lambda ln: ln.startswith("flow,")),
     "flow client on client2 exited early: 0 of 20 flows recorded in flows.csv"),
    (lambda d: (d / "client3" / "flows.csv").unlink(),
     "flow client on client3 exited early: no flows.csv"),
    (lambda d: _shift_flow_ends(d / "client1" / "flows.csv", -6.0),
     "flow client on client1 exited early: 10 of 10 flows ended up to 6.0 s before their scheduled end (curl exit 28)"),
    # a ping collector killed mid-trial: its output stops, without the closing statistics
    (lambda d: _cut_ping(d / "client2" / "ping.txt", 100),
     "ping collector on client2 ended early: last sample"),
    (lambda d: _keep_lines(d / "client1" / "ping.txt", lambda ln: ln.startswith("[")),
     "ping collector on client1 was killed (no closing statistics in ping.txt)"),
    (lambda d: (d / "client1" / "ping.txt").unlink(),
     "ping collector on client1 ended early: last sample without a sample"),
    # the queue sampler killed mid-trial
    (lambda d: _cut_lines(d / "router" / "qdisc.jsonl", 50),
     "queue sampler on router ended early: last sample"),
])
def test_check_trial_data_finds_what_ended_early(recorded_trial, damage, expected):
    tv, tdir, start = recorded_trial
    damage(tdir)
    problems = checks.check_trial_data(tv, tdir, start)
    assert len(problems) == 1 and problems[0].startswith(expected), problems


def _shift_flow_ends(path: Path, by_s: float) -> None:
    lines = path.read_text().splitlines()
    out = [lines[0]]
    for ln in lines[1:]:
        f = ln.split(",")
        f[4] = f"{float(f[4]) + by_s:.6f}"
        out.append(",".join(f))
    path.write_text("\n".join(out) + "\n")


def _cut_lines(path: Path, n: int) -> None:
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:n]))


def _cut_ping(path: Path, n: int) -> None:
    _cut_lines(path, n)


def test_check_trial_data_without_start(recorded_trial):
    tv, tdir, _ = recorded_trial
    assert checks.check_trial_data(tv, tdir, None) == ["no common start time: no flow of the first phase recorded"]


NODES7 = ["router", "client1", "client2", "client3", "server1", "server2", "server3"]


def _clocks(offset: float, rtt: float = 0.2, nodes=NODES7) -> dict:
    return {n: {"offset_s": offset, "rtt_s": rtt} for n in nodes}


def test_clock_problems_steady_clocks():
    steps, problems = checks.clock_problems(_clocks(0.31), _clocks(0.35))
    assert problems == [] and steps == {n: 0.04 for n in NODES7}


def test_clock_problems_step_on_every_node():
    steps, problems = checks.clock_problems(_clocks(0.3), _clocks(2.31))
    assert steps["router"] == 2.01
    assert problems == ["clock stepped by +2.0 s during the trial on all 7 nodes (against the controller's clock)"]


def test_clock_problems_steps_measured_apart():
    after = _clocks(2.0)
    after["client2"] = {"offset_s": 1.93, "rtt_s": 0.2}
    assert checks.clock_problems(_clocks(0.0), after)[1] == [
        "clock stepped by +1.9 to +2.0 s during the trial on all 7 nodes (against the controller's clock)"]


def test_clock_problems_one_node_back_and_unread():
    after = _clocks(0.0)
    after["client2"] = {"offset_s": -1.5, "rtt_s": 0.3}
    after["server3"] = {"error": "no answer in 60 s"}
    steps, problems = checks.clock_problems(_clocks(0.0), after)
    assert problems == ["could not read the clock of server3 (no answer in 60 s)",
                        "clock stepped by -1.5 s during the trial on client2 (against the controller's clock)"]
    assert "server3" not in steps


def test_clock_problems_tolerance_grows_with_round_trips():
    # 0.9 s apart, but each reading took 1 s: within 0.5 + (1 + 1) / 2
    assert checks.clock_problems(_clocks(0.0, 1.0), _clocks(0.9, 1.0))[1] == []
    assert checks.clock_problems(_clocks(0.0, 0.1), _clocks(0.9, 0.1))[1] != []


LOG = """\
PLAY [Start the collectors and the flows] **************************************

TASK [collectors : Start the ping collector] ***********************************
fatal: [client3]: FAILED! => {"changed": false, "msg": "this one was ignored"}
...ignoring

TASK [collectors : Wait for the trial's processes on this node to end] *********
ok: [router]
fatal: [client1]: UNREACHABLE! => {"changed": false, "msg": "Task failed: Failed to connect to the host via ssh: Shared connection to 172.30.0.11 closed.", "unreachable": true}
fatal: [client2]: FAILED! => {"changed": true, "msg": "non-zero return code", "rc": 1, "stderr": "x\\nno space left\\n", "stdout": ""}
"""


def test_playbook_failure_reads_the_log(tmp_path):
    from netrepro.runner.ansible import PlaybookError
    log = tmp_path / "trial.log"
    log.write_text(LOG)
    err = PlaybookError(f"playbook trial.yml failed (rc 4) on client1, client2; log: {log}")
    assert playbooks.playbook_failure(err) == (
        "client1 unreachable in task 'Wait for the trial's processes on this node to end': "
        "Failed to connect to the host via ssh: Shared connection to 172.30.0.11 closed.")
    log.write_text(LOG.replace("fatal: [client1]", "ok: [client1]"))
    assert playbooks.playbook_failure(err) == ("task 'Wait for the trial's processes on this node to end' failed on "
                                                "client2: non-zero return code: no space left")
    log.unlink()
    assert playbooks.playbook_failure(err) == str(err)


def test_signal_of():
    assert console.signal_of(KeyboardInterrupt()) == "SIGINT"
    assert console.signal_of(KeyboardInterrupt("SIGTERM")) == "SIGTERM"
    assert console.SIGNAL_EXIT == {"SIGINT": 130, "SIGTERM": 143}


def test_end_playbooks_ends_its_own_children_only(tmp_path):
    import signal
    import subprocess
    import sys
    import time
    script = tmp_path / "ansible-playbook"
    script.write_text("#!/bin/sh\nsleep 300 &\nwait\n")
    script.chmod(0o755)
    mine = subprocess.Popen([str(script)], start_new_session=True)  # as pexpect starts it
    # not ours: a grandchild named alike
    other = subprocess.Popen([sys.executable, "-c", "import os, subprocess; subprocess.run([os.environ['S']])"],
                             env={**os.environ, "S": str(script)}, start_new_session=True)
    time.sleep(0.5)
    try:
        found = playbooks.end_playbooks(grace_s=2)
        assert found == [mine.pid]
        assert mine.wait(timeout=10) != 0
        assert not process_group_alive(mine.pid)  # its `sleep` too: the whole group
        assert other.poll() is None and process_group_alive(other.pid)
    finally:
        for p in (mine, other):
            try:
                os.killpg(p.pid, signal.SIGKILL)  # with the script and its sleep
            except ProcessLookupError:
                pass
            p.wait()


def test_close_ssh_masters_removes_stale_sockets(tmp_path):
    import socket
    path = tmp_path / "cp" / "stale"
    path.parent.mkdir()
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    s.close()  # the master died without removing its socket
    assert path.exists()
    assert ssh.close_ssh_masters([str(path), str(tmp_path / "cp" / "none")]) == [str(path)]
    assert not path.exists()


def test_closing_a_sites_masters_removes_its_control_folder(tmp_path):
    import socket
    from netrepro.sites.inventory import control_dir
    folder = Path(control_dir(tmp_path / "state", make=True))
    stale = folder / "stale"
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(stale))
    s.close()
    assert ssh.close_ssh_masters([str(stale), str(folder / "none")]) == [str(stale)]
    assert not folder.exists()


def test_down_never_removes_a_file_a_login_names_as_a_control_path(spec, tmp_path):
    """A login whose key paths read ``ControlPath=<file>`` (valid paths: no space, no '-'):
    the control sockets `down` closes are computed in the site's own folder, never read out of
    the options' text, and a path that is not a socket is never removed (issue 54)."""
    from netrepro.sites.inventory import control_dir
    from netrepro.sites.base import NodeLogin
    from netrepro.sites.static.site import StaticSite
    victim = tmp_path / "victim"
    victim.write_text("a file of the user's\n")
    site = StaticSite(spec, tmp_path / "state", {"static_file": "x"})
    site.save_logins({n: NodeLogin(name=n, host="192.0.2.10", key_file=f"ControlPath={victim}",
                                   proxy_jump="me@jump.example.org:22", extra={"proxy_key_file": f"ControlPath={victim}"})
                      for n in spec.nodes})
    paths = ssh.ssh_control_paths(site)
    assert paths and all(os.path.dirname(p) == control_dir(site.state_dir) for p in paths), paths
    assert ssh.close_ssh_masters([*paths, str(victim)]) == [str(victim)]   # there, but not a socket: left
    assert victim.read_text() == "a file of the user's\n"


def test_ssh_control_paths_expands_percent_c(spec, tmp_path, monkeypatch):
    from netrepro.sites.inventory import control_dir
    from netrepro.sites.base import NodeLogin
    from netrepro.sites.static.site import StaticSite
    site = StaticSite(spec, tmp_path / "state", {"static_file": "x"})
    logins = {n: NodeLogin(name=n, host=f"10.0.0.{i}", port=22, user="root", proxy_jump="me@jump.example.org:2222")
              for i, n in enumerate(spec.nodes, 1)}
    site.save_logins(logins)
    paths = ssh.ssh_control_paths(site)
    own = control_dir(site.state_dir) + "/"
    assert len(paths) == len(spec.nodes) + 1
    assert all(p.startswith(own) and "%" not in p for p in paths)
    assert paths[-1].startswith(own + "jump-") and len(set(paths)) == len(paths)
    # Another site with nodes at the same addresses, users and ports, and the same jump host,
    # shares none of these masters: one site's `down` (ssh -O exit) cannot cut the other's
    # sessions, nor its commands run over a connection whose host key the other checked.
    other = StaticSite(spec, tmp_path / "other-state", {"static_file": "x"})
    other.save_logins(logins)
    assert not set(ssh.ssh_control_paths(other)) & set(paths)
    assert all(len(p) + 17 <= 107 for p in paths)  # unix(7) sun_path, with ssh's bind suffix


# --- resume: refused before anything is touched ---------------------------------------------------
from tests.badinput import Row, run_row  # noqa: E402


def _run_folder(tmp: Path, **change) -> None:
    """A run folder {tmp}/run that stopped after its first trial (as `netrepro run` leaves it)."""
    import json
    spec = load_spec("pie-vs-red")
    d = tmp / "run"
    f = d / "raw" / "pie-unlimited" / "client1" / "ping.txt"
    f.parent.mkdir(parents=True)
    f.write_text("[1.0] 64 bytes\n")
    meta = {"experiment": "pie-vs-red", "spec": writing.spec_as_recorded(spec), "site": "local",
            "time_scale": 0.1, "lead_s": 30, "trials": [{"id": "pie-unlimited", "status": "complete"}],
            "raw_sha256": {"pie-unlimited/client1/ping.txt": hashlib.sha256(f.read_bytes()).hexdigest()},
            "trial_status": [{"id": "pie-unlimited", "status": "complete", "attempts": []},
                             {"id": "red-unlimited", "status": "failed", "reason": "x", "attempts": []}]}
    meta.update(change)
    (d / "run.json").write_text(json.dumps(meta))
    (d / "INCOMPLETE").write_text("run INCOMPLETE at trial red-unlimited: x\n")


def _complete_run(tmp: Path) -> None:
    _run_folder(tmp, trial_status=[{"id": "pie-unlimited", "status": "complete", "attempts": []}])
    (tmp / "run" / "INCOMPLETE").unlink()


def _changed_spec(tmp: Path) -> None:
    spec = writing.spec_as_recorded(load_spec("pie-vs-red"))
    spec["base_rtt"]["duration_s"] += 1
    _run_folder(tmp, spec=spec)


def _raw_a_link(tmp: Path) -> None:
    """A completed trial's raw file replaced by a link to a copy of it (same bytes, same sha256)."""
    _run_folder(tmp)
    f = tmp / "run/raw/pie-unlimited/client1/ping.txt"
    (tmp / "copy.txt").write_bytes(f.read_bytes())
    f.unlink()
    f.symlink_to(tmp / "copy.txt")


def _do(*_) -> None:
    """Run several setup steps in one lambda (a row's setup returns extra environment or None)."""


RESUME = ["run", "pie-vs-red", "--resume", "{tmp}/run"]
RESUME_ROWS = [
    Row("resume-no-folder", RESUME, ["{tmp}/run", "--resume", "no such run folder"]),
    Row("resume-no-run-json", RESUME, ["{tmp}/run/run.json", "missing"], setup=lambda t: (t / "run").mkdir()),
    Row("resume-run-json-junk", RESUME, ["{tmp}/run/run.json", "not JSON"],
        setup=lambda t: _do((t / "run").mkdir(), (t / "run" / "run.json").write_bytes(b"\x00\xff{"))),
    Row("resume-run-json-list", RESUME, ["{tmp}/run/run.json", "trials", "missing"],
        setup=lambda t: _do((t / "run").mkdir(), (t / "run" / "run.json").write_text("[]"))),
    Row("resume-other-experiment", RESUME, ["run.json", "experiment", "'other'", "expected 'pie-vs-red'"],
        setup=lambda t: _run_folder(t, experiment="other")),
    Row("resume-other-site", RESUME + ["--site", "fabric"], ["--site", "'fabric'", "made on 'local'"],
        setup=_run_folder),
    Row("resume-spec-changed", RESUME, ["experiment.yml", "differs from the experiment as run"], setup=_changed_spec),
    Row("resume-other-time-scale", RESUME + ["--time-scale", "0.5"], ["--time-scale", "TIME_SCALE 0.1"],
        setup=_run_folder),
    Row("resume-with-trial", RESUME + ["--trial", "pie-limited"], ["--trial", "not with --resume"], setup=_run_folder),
    Row("resume-complete-run", RESUME, ["{tmp}/run", "the run is complete", "nothing to resume"], setup=_complete_run),
    Row("resume-raw-altered", RESUME, ["raw_sha256", "raw/pie-unlimited/client1/ping.txt (altered)"],
        setup=lambda t: _do(_run_folder(t), (t / "run/raw/pie-unlimited/client1/ping.txt").write_text("[2.0]\n"))),
    Row("resume-raw-missing", RESUME, ["raw_sha256", "raw/pie-unlimited/client1/ping.txt (missing)"],
        setup=lambda t: _do(_run_folder(t), (t / "run/raw/pie-unlimited/client1/ping.txt").unlink())),
    Row("resume-raw-added", RESUME, ["raw_sha256", "raw/pie-unlimited/client1/x.txt (not in run.json)"],
        setup=lambda t: _do(_run_folder(t), (t / "run/raw/pie-unlimited/client1/x.txt").write_text("x"))),
    Row("resume-raw-record-not-an-object", RESUME, ["{tmp}/run/run.json: raw_sha256: ", "expected an object of path"],
        setup=lambda t: _run_folder(t, raw_sha256=["pie-unlimited/client1/ping.txt"])),
    Row("resume-raw-a-link", RESUME, ["{tmp}/run/run.json: raw_sha256: ", "raw/pie-unlimited/client1/ping.txt: "
                                      "a symbolic link"], setup=_raw_a_link),
    Row("reproduce-resume-no-folder", ["reproduce", "pie-vs-red", "--resume", "{tmp}/nope"],
        ["{tmp}/nope", "--resume", "no such run folder"]),
    Row("run-unknown-trial", ["run", "pie-vs-red", "--trial", "pie-bogus"],
        ["--trial", "'pie-bogus'", "expected one of: pie-unlimited, red-unlimited"]),
]


@pytest.mark.parametrize("row", RESUME_ROWS, ids=lambda r: r.id)
def test_bad_input(row, tmp_path):
    run_row(row, tmp_path)


def test_up_and_down_leave_an_inventory_netrepro_did_not_write(spec, tmp_path, monkeypatch):
    """A user's own file where the site's inventory goes is neither overwritten (``up``
    refuses before it reserves anything) nor removed (``down``); netrepro's own is."""
    monkeypatch.setattr(steps, "INVENTORY_DIR", tmp_path / "inventory")
    monkeypatch.setattr(steps, "STATE_ROOT", tmp_path / "state")
    mine = tmp_path / "inventory" / "pie-vs-red-local.yml"
    mine.parent.mkdir()
    mine.write_text("all:\n  hosts: {mybox: {}}\n")
    with pytest.raises(ValueError, match="an inventory netrepro did not generate"):
        steps.up(spec, "local", {"mode": "host"})
    assert not (tmp_path / "state").exists()
    steps.down(spec, "local", {"mode": "host"})
    assert mine.read_text() == "all:\n  hosts: {mybox: {}}\n"
    with pytest.raises(FileExistsError):
        write_inventory({"all": {}}, mine)
    mine.unlink()
    write_inventory({"all": {}}, mine)
    steps.down(spec, "local", {"mode": "host"})
    assert not mine.exists()


# --- how many trials at once (--jobs) ---------------------------------------------------------------
def test_jobs_default_to_one_per_core_on_a_simulating_site_and_to_one_elsewhere():
    assert instances.checked_jobs("ns3", None) == min(os.cpu_count() or 1, instances.JOBS_MAX)
    assert instances.checked_jobs("ns3", 3) == 3 and instances.checked_jobs("ns3", instances.JOBS_MAX) == instances.JOBS_MAX
    for site in ("local", "static", "fabric", "instageni"):
        assert instances.checked_jobs(site, None) == 1 and instances.checked_jobs(site, 1) == 1


@pytest.mark.parametrize("site, jobs, problem", [
    ("ns3", 0, "0: expected a whole number of trials to run at once from 1 to 64"),
    ("ns3", 65, "65: expected a whole number of trials to run at once from 1 to 64"),
    ("ns3", True, "True: expected a whole number"),
    ("ns3", 2.0, "2.0: expected a whole number"),
    ("local", 2, "2: site local runs its trials one at a time (a trial on machines measures correctly only alone); "
                 "expected 1, or more on a site that simulates its trials (SITE=ns3)"),
])
def test_jobs_out_of_range_or_above_one_on_machines_are_refused(site, jobs, problem):
    with pytest.raises(SpecError) as exc:
        instances.checked_jobs(site, jobs)
    assert str(exc.value).startswith(f"command line: --jobs: {problem}")


def test_release_command_writes_every_fifo_and_names_the_stuck_one(tmp_path):
    """The barrier's release (barrier.release_command) run by sh on real FIFOs: each armed
    reader gets the start; a FIFO whose reader is gone ends the release after its timeout,
    named. A folder name with a quote and a space is one word."""
    import subprocess
    import threading

    from netrepro.runner.barrier import release_command, unreleased

    d = tmp_path / "it's a trial"
    d.mkdir()
    got: dict[str, str] = {}
    for name in ("flows.csv.go", "ping.txt.go"):
        os.mkfifo(d / name)
        threading.Thread(target=lambda n=name: got.__setitem__(n, (d / n).read_text()), daemon=True).start()
    (d / "notes.go").write_text("")  # not a FIFO: skipped
    out = subprocess.run(["sh", "-c", release_command(str(d), 1795727171.5)], capture_output=True, text=True,
                         timeout=30).stdout
    for t in threading.enumerate():
        if t is not threading.current_thread() and t.daemon:
            t.join(5)
    assert got == {"flows.csv.go": "1795727171.500000\n", "ping.txt.go": "1795727171.500000\n"}
    assert unreleased(out) == [] and out.split() == ["at:flows.csv.go", "at:ping.txt.go"]
    for name in got:  # their readers remove them once read
        (d / name).unlink()
    os.mkfifo(d / "window.go")  # armed, but its reader is gone
    out = subprocess.run(["sh", "-c", release_command(str(d), 1795727171.5, timeout_s=0.5)], capture_output=True,
                         text=True, timeout=30).stdout
    assert unreleased(out) == ["window.go"], out


def test_commands_that_need_root_go_through_sudo_for_a_login_user_that_is_not_root():
    """ssh.node_ssh_argv(as_root=True): for an inventory host Ansible escalates on (a testbed
    image's user, ``ansible_become``), the command runs under ``sudo -n sh -c`` as one word, so
    that the barrier can write the FIFOs and the fetch read the archive the trial playbook made
    as root; a root login, or a command that needs no root, is sent as it is."""
    import shlex

    cmd = "echo \"at:x\" > '/var/lib/netrepro/trials/t 1/window.go'"
    user = {"ansible_host": "10.0.0.5", "ansible_user": "ubuntu", "ansible_become": True}
    argv = ssh.node_ssh_argv("gw", user, cmd, as_root=True)
    assert argv[-2:] == ["ubuntu@10.0.0.5", f"sudo -n sh -c {shlex.quote(cmd)}"]
    assert shlex.split(argv[-1])[4] == cmd
    assert ssh.node_ssh_argv("gw", user, cmd)[-1] == cmd
    assert ssh.node_ssh_argv("gw", {"ansible_host": "10.0.0.5"}, cmd, as_root=True)[-2:] == ["root@10.0.0.5", cmd]
