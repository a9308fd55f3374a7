"""Faults lose nothing, and an interrupted run resumes (issue 6, section 5).

Each fault is injected for real, as a user or the machine would cause it, into `netrepro`
commands run as a user runs them (subprocesses, own NETREPRO_STATE and NETREPRO_RESULTS), and
each test shows: the completed trials kept with their checksums, the partial run marked
INCOMPLETE with the trial and the reason, the trial's processes stopped on the nodes, and one
line on the console (stderr) accounting for the fault.

The subject is the runner, not a qdisc, so the faults strike trials of
tests/data/experiments/gateway-fifo.yml (a TBF with a byte or a packet FIFO, two iperf3 flows,
a ping and a queue sampler), whose qdiscs the host kernel has: the local site runs in host
mode (network namespaces of this machine), where a trial costs a few seconds beyond its
schedule instead of half a minute in the QEMU micro-VM (which it still uses on a machine whose
kernel lacks them). One local site serves the trial faults (module fixture: `up` and
`provision` once) at TIME_SCALE $NETREPRO_FAULTS_SCALE (default 0.5: a 10 s schedule). The
faults follow one run of two trials through its resumes:

1. `run` of bytes and packets; in packets, a1's iperf3 client, a1's ping collector and gw's
   queue sampler are killed (and, in the micro-VM, whose clock is its own, the nodes' clock
   is stepped by 2 s; the host's clock is not touched): bytes is kept, the run is INCOMPLETE
   at packets, and its one line names the faults;
2-4. each `run --resume` of it meets the next fault in packets: the SSH connections cut (the
   jump host's in the micro-VM, every node's in host mode), SIGINT, the results disk full
   while fetching (the results folder is a small tmpfs);
5. the last `run --resume` completes it: INCOMPLETE is gone, bytes' raw files and checksums
   are those of step 1, every attempt and resume is recorded.

Then the static site is pointed at the same nodes, described in a static-site file as a user
describes their machines: it reaches every node and matches the data-plane addresses, and a
wrong address is reported with the node and the address. Then, on the same site,
provisioning is interrupted by SIGTERM and a node's sshd is killed during provisioning; the
last test tears the site down and checks that nothing is left on the host: namespaces, links
and bridges, qdiscs, processes, SSH control sockets (and the micro-VM, when there was one). A
static site whose nodes do not answer fails to reserve with one line and leaves nothing (this
one needs no site and is not marked integration).

Run with `make faults` (as root). Wall time on a 2-core machine: see docs/testing.md.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from conftest import processes_mentioning, static_nodes_of_local
from netrepro.sites import SiteError, get_site
from netrepro.sites.inventory import control_dir
from netrepro.experiment.spec import load_spec

REPO = Path(__file__).resolve().parent.parent
SCALE = os.environ.get("NETREPRO_FAULTS_SCALE", "0.5")
#: The experiment the faults strike, as a user names a file outside experiments/.
EXP = REPO / "tests" / "data" / "experiments" / "gateway-fifo.yml"
NAME = "gateway-fifo"
TRIALS = ["bytes", "packets"]
#: Process names (comm, 15 characters) of a trial's processes on a node (roles/collectors,
#: roles/flow_clients, roles/iperf3_server): none may be left once a trial has stopped.
TRIAL_COMMS = ("iperf3", "curl", "ping", "tc", "sleep", "nr-iperf3.sh", "nr-flows.sh", "nr-ping.sh", "nr-qdisc-stats.",
               "nr-wait.sh", "nr-window.sh")


# --- helpers ----------------------------------------------------------------------------------------
class Console:
    """A netrepro command running in the background; its stdout lines are read as they come."""

    def __init__(self, args: list[str], env: dict):
        # As run from a terminal: a command started in the background by a non-interactive
        # shell (CI, `make ... &`) inherits SIGINT ignored, and Python then keeps ignoring it.
        self.proc = subprocess.Popen([sys.executable, "-m", "netrepro", *args], cwd=REPO, env=env, text=True,
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self.out: list[str] = []
        self.err = ""
        self._cond = threading.Condition()
        self._threads = [threading.Thread(target=self._read_out, daemon=True),
                         threading.Thread(target=self._read_err, daemon=True)]
        for t in self._threads:
            t.start()

    def _read_out(self) -> None:
        for line in self.proc.stdout:
            with self._cond:
                self.out.append(line)
                self._cond.notify_all()
        with self._cond:
            self._cond.notify_all()

    def _read_err(self) -> None:
        self.err = self.proc.stderr.read()

    def wait_for(self, pattern: str, timeout_s: float) -> bool:
        """Wait until a stdout line matches ``pattern``; False if the command ended first."""
        rx = re.compile(pattern)
        deadline = time.time() + timeout_s
        with self._cond:
            while time.time() < deadline:
                if any(rx.search(ln) for ln in self.out):
                    return True
                if self.proc.poll() is not None and not self._threads[0].is_alive():
                    return False
                self._cond.wait(1)
        return False

    def finish(self, timeout_s: float = 1200) -> tuple[int, str, str]:
        rc = self.proc.wait(timeout=timeout_s)
        for t in self._threads:
            t.join(30)
        return rc, "".join(self.out), self.err


def sha256_tree(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


def host_snapshot() -> dict:
    """What the local site could leave on the host: namespaces, links (bridges, veths) and
    qdiscs (its SSH control sockets are checked in its own folder, inventory.control_dir)."""
    def out(*argv):
        return subprocess.run(argv, capture_output=True, text=True).stdout
    return {"netns": set(out("ip", "netns", "list").split()),
            "links": {ln.split(":")[1].strip().split("@")[0] for ln in out("ip", "-o", "link").splitlines()},
            "qdiscs": set(out("tc", "qdisc", "show").splitlines())}


def playbooks_of(state: Path) -> list[str]:
    """ansible-playbook processes of this module's site (their environment names its state folder)."""
    found = []
    for p in processes_mentioning("ansible-playbook"):
        try:
            if str(state).encode() in Path(f"/proc/{p.split(':')[0]}/environ").read_bytes():
                found.append(p)
        except OSError:
            continue
    return found


class LocalSite:
    """The module's local site: its folders, environment and a shell where its namespaces are
    (the host in host mode, else the micro-VM's root namespace)."""

    def __init__(self, tmp: Path):
        self.state = tmp / "state"
        self.results = tmp / "results"
        self.state.mkdir()
        self.results.mkdir()
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("NETREPRO_", "TIME_SCALE", "RESUME"))}
        self.env.update(NETREPRO_STATE=str(self.state), NETREPRO_RESULTS=str(self.results), SITE="local")
        self.site_state = self.state / f"{NAME}-local"
        self.run_dir: Path | None = None
        self.kept: dict[str, str] = {}  # pie-unlimited's raw files as first recorded

    def nr(self, *args: str, timeout_s: float = 1800) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "netrepro", *args], cwd=REPO, env=self.env, text=True,
                              capture_output=True, timeout=timeout_s, stdin=subprocess.DEVNULL)

    def st(self) -> dict:
        return json.loads((self.site_state / "state.json").read_text())

    @property
    def host_mode(self) -> bool:
        """The namespaces are this machine's (the local site's host mode), not a micro-VM's."""
        return self.st().get("mode") == "host"

    def vm(self, script: str, timeout_s: float = 600) -> str:
        """Run ``script`` (sh) where the namespaces are: on this machine in host mode, else in
        the micro-VM's root namespace, through its SSH jump host."""
        st = self.st()
        if st.get("mode") == "host":
            p = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=timeout_s,
                               stdin=subprocess.DEVNULL)
            assert p.returncode == 0, f"on the host: {script}\n{p.stdout}\n{p.stderr}"
            return p.stdout
        argv = ["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=30", "-o", "LogLevel=ERROR",
                "-i", str(self.site_state / "ssh" / "id_ed25519"), "-o", "IdentitiesOnly=yes",
                "-o", f"UserKnownHostsFile={self.site_state / 'ssh' / 'known_hosts'}",
                "-o", "StrictHostKeyChecking=accept-new", "-p", str(st["ssh_port"]), "root@127.0.0.1", script]
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        assert p.returncode == 0, f"in the VM: {script}\n{p.stdout}\n{p.stderr}"
        return p.stdout

    # Shell functions for the namespaces, with as few processes as possible (each costs ~0.1 s
    # under QEMU TCG): alive PID (not a zombie); pids_of NODE "NAMES": the processes of a node's
    # namespace whose name (comm) is one of NAMES; pids_cmd NODE TEXT: those whose command
    # line contains TEXT; kill_of NODE "NAMES" | kill_cmd NODE TEXT: SIGKILL them, or fail.
    PIDS = (
        'alive() { read -r s < /proc/$1/stat 2>/dev/null || return 1; s=${s##*) }; [ "${s%% *}" != Z ]; }; '
        'pids_of() { for q in $(ip netns pids "$1" 2>/dev/null); do read -r c < /proc/$q/comm 2>/dev/null || continue; '
        'for n in $2; do [ "$c" = "$n" ] && alive $q && echo $q; done; done; }; '
        'pids_cmd() { f=""; for q in $(ip netns pids "$1" 2>/dev/null); do f="$f /proc/$q/cmdline"; done; '
        '[ -z "$f" ] || for c in $(grep -laF -- "$2" $f 2>/dev/null); do q=${c#/proc/}; q=${q%/cmdline}; '
        'alive $q && echo $q; done; }; '
        'killed() { [ -n "$1" ] || { echo "none found: $2"; exit 1; }; kill -9 $1; echo "killed $2:" $1; }; '
        'kill_of() { killed "$(pids_of "$1" "$2")" "$2 on $1"; }; '
        'kill_cmd() { killed "$(pids_cmd "$1" "$2")" "$2 on $1"; }; ')

    def after_flows(self, action: str = "", after_s: float = 2.0, node: str = "a1") -> None:
        """Wait until the iperf3 client of ``node`` runs, then ``after_s`` seconds, then run
        the shell ``action`` there (in the same session: no delay)."""
        out = self.vm(self.PIDS + f'i=0; until [ -n "$(pids_of {node} iperf3)" ]; do i=$((i+1)); '
                      f'[ $i -gt 1200 ] && exit 1; sleep 0.25; done; echo "flows on {node} at $(date +%s.%N)"; '
                      f'sleep {after_s}; {action}')
        print("[fault] " + " / ".join(out.strip().splitlines()))

    def trial_processes(self) -> str:
        """The trial processes still running in any node's namespace (none once a trial stopped)."""
        return self.vm(self.PIDS + f'for n in $(ip netns list | cut -d" " -f1); do '
                       f'for p in $(pids_of "$n" "{" ".join(TRIAL_COMMS)}") $(pids_cmd "$n" /nr-); do '
                       f'echo "$n $p $(cat /proc/$p/comm)"; done; done').strip()


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """The local site, up and provisioned; its results folder a 64 MiB tmpfs (fault 6)."""
    if os.geteuid() != 0:
        pytest.fail("the fault tests need root (network namespaces, tmpfs); run `make faults` as root")
    s = LocalSite(tmp_path_factory.mktemp("faults"))
    s.before = host_snapshot()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m,mode=0755", "netrepro-faults", str(s.results)], check=True)
    try:
        up = s.nr("up", str(EXP))
        assert up.returncode == 0, up.stdout[-3000:] + up.stderr
        prov = s.nr("provision", str(EXP))
        assert prov.returncode == 0, prov.stdout[-3000:] + prov.stderr
        yield s
    finally:
        s.nr("down", str(EXP))  # (checked by test_teardown_leaves_nothing)
        subprocess.run(["umount", str(s.results)])


ACCOUNT = re.compile(r"^netrepro: run INCOMPLETE at trial (?P<trial>\S+) \((?P<reason>.+)\); (?P<kept>\d+) of "
                     r"(?P<total>\d+) trials kept in (?P<dir>\S+); resume with: netrepro run \S*gateway-fifo\.yml "
                     r"--resume (?P<again>\S+)$")


def run_with_fault(site: LocalSite, inject, *, new: bool = False) -> tuple[int, str, str]:
    """`netrepro run` (new: of TRIALS; else --resume of the module's run) with ``inject(console)``
    called once red-unlimited has started (its flows are injected by site.after_flows)."""
    args = ["--trial", TRIALS[0], "--trial", TRIALS[1], "--time-scale", SCALE] if new else ["--resume", str(site.run_dir)]
    c = Console(["run", str(EXP), *args], site.env)
    try:
        assert c.wait_for(rf"^(\[[0-9:]+Z\] )?\[run\] trial {TRIALS[1]}:", 1200), "".join(c.out)[-3000:] + c.err
        inject(c)
        return c.finish()
    finally:
        if c.proc.poll() is None:
            c.proc.kill()


def check_incomplete(site: LocalSite, rc: int, out: str, err: str, *, exit_code: int, reason: str,
                     attempts: int) -> dict:
    """The account, the INCOMPLETE marker, run.json, the kept trial and the nodes after a fault;
    returns run.json."""
    assert rc == exit_code, f"exit {rc}\n{out[-3000:]}\n{err}"
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr:\n{err}"
    m = ACCOUNT.match(lines[0])
    assert m, lines[0]
    assert (m["trial"], m["kept"], m["total"]) == (TRIALS[1], "1", "2"), lines[0]
    assert re.search(reason, m["reason"]), (reason, lines[0])
    print(f"[fault] console: {lines[0]}")
    run_dir = Path(m["dir"])
    assert m["again"] == str(run_dir)
    if site.run_dir is None:
        site.run_dir = run_dir
    assert run_dir == site.run_dir
    marker = (run_dir / "INCOMPLETE").read_text()
    assert f"run INCOMPLETE at trial {TRIALS[1]}: {m['reason']}" in marker and "resume with:" in marker
    run = json.loads((run_dir / "run.json").read_text())
    status = {t["id"]: t for t in run["trial_status"]}
    assert status[TRIALS[0]]["status"] == "complete"
    assert status[TRIALS[1]]["status"] == "failed" and status[TRIALS[1]]["reason"] == m["reason"]
    # (an attempt run again at once because its health checks failed is not one of the faults' attempts)
    assert len([a for a in status[TRIALS[1]]["attempts"] if not a.get("unhealthy")]) == attempts
    assert [t["id"] for t in run["trials"]] == [TRIALS[0]]
    # the completed trial: its files, their checksums in run.json, unchanged since first recorded
    files = {f"{TRIALS[0]}/{k}": v for k, v in sha256_tree(run_dir / "raw" / TRIALS[0]).items()}
    assert files == run["raw_sha256"]
    if not site.kept:
        site.kept = files
    assert files == site.kept
    assert not (run_dir / "raw" / TRIALS[1]).exists() and not (run_dir / ".fetch").exists()
    assert not (run_dir / ".reserve").exists()
    assert not (run_dir.parent / "latest").exists()  # only a complete run is the latest
    assert site.trial_processes() == "", "trial processes left on the nodes"
    assert playbooks_of(site.state) == [], "a playbook is still running"
    return run


# --- 8. a site that fails to reserve (no VM) ---------------------------------------------------------
def test_static_site_that_does_not_answer(tmp_path):
    """Every node of a static site at a closed port of 127.0.0.1: `reproduce` says so in one
    line, exits 2 and leaves nothing (no state, inventory, results, control sockets)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the socket is: nothing listens there
    key = tmp_path / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    spec = load_spec("pie-vs-red")
    # each node's addresses as the static site expects them (network -> address: the model's data plane)
    nodes = {n: {"host": "127.0.0.1", "port": port, "user": "root", "key": str(key),
                 "addresses": {k: i["address"] for k, i in spec.model.data_plane(n).items() if i["address"]}}
             for n in spec.nodes}
    static = tmp_path / "nodes.yml"
    static.write_text(yaml.safe_dump({"nodes": nodes}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NETREPRO_", "TIME_SCALE", "STATIC_FILE"))}
    env.update(NETREPRO_STATE=str(tmp_path / "state"), NETREPRO_RESULTS=str(tmp_path / "results"))
    inventory = REPO / "inventory" / "pie-vs-red-static.yml"
    had_inventory = inventory.exists()
    # its own SSH control folder only: another netrepro command on the machine may hold its own
    own_sockets = Path(control_dir(tmp_path / "state" / "pie-vs-red-static"))
    p = subprocess.run([sys.executable, "-m", "netrepro", "reproduce", "pie-vs-red", "--site", "static",
                        "--option", f"static_file={static}"], cwd=REPO, env=env, capture_output=True, text=True,
                       timeout=300, stdin=subprocess.DEVNULL)
    err = p.stderr.strip().splitlines()
    assert p.returncode == 2, p.stdout + p.stderr
    assert len(err) == 1 and "Traceback" not in p.stderr, p.stderr
    assert f"port {port}" in err[0] and "Connection refused" in err[0], err[0]
    assert all(f"node {n}" in err[0] for n in spec.nodes), err[0]
    left = [str(q) for d in ("state", "results") if (tmp_path / d).exists() for q in (tmp_path / d).rglob("*")]
    assert left == [], left
    assert inventory.exists() == had_inventory
    assert not own_sockets.exists()
    assert processes_mentioning(str(static)) == []


# --- 1-5: faults during trials, one run resumed after each ---------------------------------------------
@pytest.mark.integration
def test_data_faults_are_named_together(site):
    """Three faults in one trial (four in the micro-VM; each is still named): packets' iperf3
    client and ping collector on a1 and the queue sampler on gw are killed (and, in the
    micro-VM, the clock it gives every node is stepped by 2 s). The one line on the console
    names each."""
    action = "kill_of a1 iperf3; kill_of a1 ping; kill_cmd gw nr-qdisc-stats.sh"
    if not site.host_mode:
        action += '; ip netns exec gw date -s "+2 seconds"'  # date: one process, 2 s exactly
    rc, out, err = run_with_fault(site, lambda c: site.after_flows(action), new=True)
    run = check_incomplete(site, rc, out, err, exit_code=2, attempts=1, reason=r"^ping collector on a1 ")
    reason = run["trial_status"][1]["reason"]
    parts = [r"^ping collector on a1 (ended early: last sample [\d.]+ s before the schedule's end|was killed)",
             r"; queue sampler on gw ended early",
             r"; iperf3 client cubic-flow on a1 left no complete report \(iperf3-cubic-flow\.json\): it was stopped early"]
    if not site.host_mode:
        parts.append(r"; clock stepped by \+[12]\.\d( to \+[12]\.\d)? s during the trial on all 7 nodes")
    for part in parts:
        assert re.search(part, reason), (part, reason)
    attempt = run["trial_status"][1]["attempts"][-1]
    assert (site.run_dir / attempt["kept_in"] / "a1" / "ping.txt").is_file()  # kept for a look
    steps = attempt["clocks"]["step_s"]
    assert set(steps) == set(load_spec(str(EXP)).nodes)
    if site.host_mode:
        assert all(abs(s) < 1 for s in steps.values()), steps
    else:
        assert all(1.5 < s < 2.5 for s in steps.values()), steps
    assert "resumes" not in run


def _cut_ssh(site: LocalSite) -> None:
    """Kill the SSH masters the controller reaches the nodes through: the micro-VM's jump
    host's, or in host mode every node's (netrepro.sites.inventory.control_dir)."""
    folder = Path(control_dir(site.site_state))
    if site.host_mode:
        paths = [str(p) for p in folder.iterdir() if p.is_socket()]
    else:
        jump = "root@127.0.0.1:" + str(site.st()["ssh_port"])
        paths = [str(folder / ("jump-" + hashlib.sha1(jump.encode()).hexdigest()[:12]))]
    killed = []
    for path in paths:
        check = subprocess.run(["ssh", "-o", f"ControlPath={path}", "-O", "check", "x"], capture_output=True, text=True)
        m = re.search(r"Master running \(pid=(\d+)\)", check.stderr)
        if m:
            os.kill(int(m.group(1)), signal.SIGKILL)
            killed.append(m.group(1))
    assert killed, f"no SSH master in {folder}"
    print(f"[fault] killed the SSH masters to the nodes (pids {', '.join(killed)})")


@pytest.mark.integration
def test_ssh_connections_cut(site):
    """The SSH masters to the nodes killed while trial-end.yml's command runs on them: the
    trial fails, named "unreachable in task", and the run stays resumable. During the
    schedule no command is in flight (the controller connects again after its end), so the cut
    is made while trial-end waits on a1: a process planted in a1's trial folder during the
    schedule (a pid file, as the collectors leave) keeps it waiting."""
    def inject(c):
        site.after_flows(
            'p=$(pids_of a1 iperf3); d=$(dirname "$(readlink /proc/${p%% *}/fd/1)"); '
            'ip netns exec a1 sh -c "sleep 600 </dev/null >/dev/null 2>&1 & echo \\$! > $d/linger.pid"; '
            'i=0; until [ -n "$(pids_cmd a1 nr-wait.sh)" ]; do i=$((i+1)); [ $i -gt 3000 ] && exit 1; '
            'sleep 0.1; done; echo "trial-end waits on a1 at $(date +%s.%N)"')
        _cut_ssh(site)
    rc, out, err = run_with_fault(site, inject)
    run = check_incomplete(site, rc, out, err, exit_code=2, attempts=2, reason=r"^\S+ unreachable in task '.+': ")
    assert [r["from_trial"] for r in run["resumes"]] == [TRIALS[1]]  # the first resume, from the failed trial


@pytest.mark.integration
def test_sigint_mid_trial(site):
    rc, out, err = run_with_fault(site, lambda c: (site.after_flows(), c.proc.send_signal(signal.SIGINT)))
    check_incomplete(site, rc, out, err, exit_code=130, attempts=3, reason=r"^interrupted by SIGINT$")
    assert f"stopped trial {TRIALS[1]}'s processes on the nodes" in out


@pytest.mark.integration
def test_disk_full_while_fetching(site):
    filler = site.results / "filler"

    def inject(c):
        site.after_flows()
        with filler.open("wb") as fh:  # fill the results folder's tmpfs to the last byte
            block = b"\0" * (1 << 20)
            try:
                while True:
                    fh.write(block)
                    fh.flush()
            except OSError:
                pass
        try:
            while True:
                with filler.open("ab") as fh:
                    fh.write(b"\0" * 4096)
        except OSError:
            pass
    try:
        rc, out, err = run_with_fault(site, inject)
        run = check_incomplete(site, rc, out, err, exit_code=2, attempts=4,
                               reason=r"(No space left on device|disk is full)")
        assert len(run["resumes"]) == 3
    finally:
        filler.unlink(missing_ok=True)


@pytest.mark.integration
def test_resume_completes_the_run(site):
    p = site.nr("run", str(EXP), "--resume", str(site.run_dir))
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr
    assert p.stderr == ""
    run_dir = site.run_dir
    assert not (run_dir / "INCOMPLETE").exists()
    run = json.loads((run_dir / "run.json").read_text())
    assert [t["id"] for t in run["trials"]] == TRIALS
    assert [t["status"] for t in run["trial_status"]] == ["complete", "complete"]
    attempts = [a for a in run["trial_status"][1]["attempts"] if not a.get("unhealthy")]
    assert [a["status"] for a in attempts] == ["failed"] * 4 + ["complete"]
    assert len(run["resumes"]) == 4 and run["time_scale"] == float(SCALE)
    files = {f"{t}/{k}": v for t in TRIALS for k, v in sha256_tree(run_dir / "raw" / t).items()}
    assert files == run["raw_sha256"]
    assert {k: v for k, v in files.items() if k.startswith(TRIALS[0] + "/")} == site.kept  # never rewritten
    assert {"ping.txt", "iperf3-cubic-flow.json", "meta-before.json"} <= {p.name for p in (run_dir / "raw" / TRIALS[1] / "a1").iterdir()}
    assert (run_dir.parent / "latest").resolve() == run_dir.resolve()
    # the attempts whose data failed its checks kept it under failed/
    for a in attempts:
        if a.get("kept_in"):
            assert (run_dir / a["kept_in"]).is_dir()
    again = site.nr("run", str(EXP), "--resume", str(run_dir))
    assert again.returncode == 2 and "nothing to resume" in again.stderr and len(again.stderr.splitlines()) == 1


# --- the static site against this site's nodes --------------------------------------------------------
def _static_file(path: Path, logins: dict, spec) -> Path:
    """A static-site nodes file for the local site's ``logins`` (state.json), as a user
    describes their machines: login, key, work folder and data-plane addresses per node
    (tests/conftest.py static_nodes_of_local)."""
    path.write_text(yaml.safe_dump({"nodes": static_nodes_of_local({"logins": logins}, spec, path.parent)}))
    return path


@pytest.mark.integration
def test_static_site_reaches_local_nodes(site, tmp_path):
    spec = load_spec(str(EXP))
    f = _static_file(tmp_path / "nodes.yml", site.st()["logins"], spec)
    static = get_site("static", spec, tmp_path / "static-state",
                      {"static_file": str(f), "known_hosts": str(tmp_path / "known_hosts")})
    static.reserve()
    logins = static.logins()
    assert set(logins) == set(spec.nodes)
    # interfaces found on the nodes from their addresses: the gateway's two, named as the file names them
    want = {k: i["interface"] for k, i in spec.model.data_plane("gw").items()}
    assert len(want) == 2 and logins["gw"].extra["interfaces"] == want
    assert list(logins["a1"].extra["interfaces"].values()) == ["a1-0"]
    static.wait_ready(timeout_s=120)
    static.release()
    static.release()  # idempotent
    assert not static.state_file.exists()


@pytest.mark.integration
def test_static_site_reports_a_wrong_address(site, tmp_path):
    spec = load_spec(str(EXP))
    # the file says a1 is 192.168.51.11 (the topology), but its machine has another address:
    # simulate by describing b1's machine for a1
    logins = dict(site.st()["logins"])
    logins["a1"] = dict(logins["b1"], name="a1")
    f = _static_file(tmp_path / "nodes.yml", logins, spec)
    static = get_site("static", spec, tmp_path / "static-state",
                      {"static_file": str(f), "known_hosts": str(tmp_path / "known_hosts")})
    with pytest.raises(SiteError, match=r"a1.*192\.168\.51\.11"):
        static.reserve()
    assert not static.state_file.exists()


# --- faults during provisioning --------------------------------------------------------------------------
@pytest.mark.integration
def test_sigterm_mid_provisioning(site):
    c = Console(["provision", str(EXP), "-v"], site.env)
    try:
        assert c.wait_for(r"^TASK \[", 600), "".join(c.out) + c.err
        time.sleep(5)
        c.proc.send_signal(signal.SIGTERM)
        rc, out, err = c.finish(300)
    finally:
        if c.proc.poll() is None:
            c.proc.kill()
    assert rc == 143, out[-3000:] + err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("netrepro: provisioning interrupted by SIGTERM after "), err
    print(f"[fault] console: {lines[0]}")
    assert re.search(r"the site is still up: run `netrepro provision \S*gateway-fifo\.yml` again, or "
                     r"`netrepro down \S*gateway-fifo\.yml`", lines[0]), lines[0]
    time.sleep(2)
    assert playbooks_of(site.state) == [], "a playbook is still running"
    assert site.st()["provisioned"] is False
    refused = site.nr("run", str(EXP))
    assert refused.returncode == 2 and "not provisioned" in refused.stderr and len(refused.stderr.splitlines()) == 1


@pytest.mark.integration
def test_sshd_killed_during_provisioning(site):
    c = Console(["provision", str(EXP), "-v"], site.env)
    try:
        assert c.wait_for(r"^TASK \[", 600), "".join(c.out) + c.err
        site.vm(site.PIDS + "kill_of a2 sshd")  # the listener and the session of Ansible's connection
        rc, out, err = c.finish(1200)
    finally:
        if c.proc.poll() is None:
            c.proc.kill()
    assert rc == 2, out[-3000:] + err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    print(f"[fault] console: {lines[0]}")
    assert re.match(r"^netrepro: provisioning failed \(a2 unreachable in task '.+': .+\); the site is still up: ",
                    lines[0]), lines[0]
    assert site.st()["provisioned"] is False


@pytest.mark.integration
def test_teardown_leaves_nothing(site):
    sockets = [p for p in subprocess.run(
        [sys.executable, "-c", "import sys; from netrepro.runner import ssh, steps; from netrepro.experiment.spec import load_spec; "
         f"print('\\n'.join(ssh.ssh_control_paths(steps.open_site(load_spec('{EXP}'), 'local'))))"],
        cwd=REPO, env=site.env, capture_output=True, text=True).stdout.split()]
    assert sockets and any(os.path.exists(p) for p in sockets)  # open until down
    vm_pgid = site.st().get("vm_pgid")
    p = site.nr("down", str(EXP))
    assert p.returncode == 0 and p.stderr == "", p.stdout + p.stderr
    assert not (site.site_state / "state.json").exists()
    assert not (REPO / "inventory" / f"{NAME}-local.yml").exists()
    assert [s for s in sockets if os.path.exists(s)] == []
    assert processes_mentioning(str(site.state)) == []
    assert not any(f"ssh: {s} [mux]" in q for s in sockets for q in processes_mentioning("[mux]"))
    if vm_pgid is not None:
        try:
            os.killpg(vm_pgid, 0)
            pytest.fail("the micro-VM is still running")
        except ProcessLookupError:
            pass
    # the site's own SSH control folder is gone (another netrepro command on the machine may
    # hold folders of its own under /tmp/netrepro-cp meanwhile)
    assert not Path(control_dir(site.site_state)).exists()
    now = host_snapshot()
    for what in ("netns", "links", "qdiscs"):
        assert now[what] <= site.before[what], (what, now[what] - site.before[what])
    assert site.nr("down", str(EXP)).returncode == 0  # twice is harmless
