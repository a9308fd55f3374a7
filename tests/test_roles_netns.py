"""Functional test of the provisioning and trial playbooks' roles against network namespaces
on this machine.

Runs only as root on Linux with ip, sshd, vsftpd, curl and ethtool. This machine's kernel
has HTB, veth, bridge and netns but no netem/pie/red (see docs/sites/local.md), so the
test covers what works here, for real, with pie-vs-red's provisioning vars
(netrepro.experiment.rolevars.model_vars of experiments/pie-vs-red) cut to two server namespaces:
playbooks/provision.yml's packages (check mode of the local site), kernel_capability (htb
probe), interfaces, routes (static routes and MTU), offloads, tcp_settings, qdisc_stack (the
bottleneck's HTB with a FIFO leaf, bfifo/pfifo built into every kernel, standing in for
PIE/RED; a root tbf standing in for the clients' netem) and ftp_source (two vsftpd instances
on one machine); and playbooks/trial.yml's per-trial steps without traffic (each trial's
stacks installed afresh, its FTP rate limit).

Layout (names carry the test's pid; everything is removed at the end, even on failure):

    ns <C> (controller: ansible-playbook and curl run here)
      br0 10.10.2.254/24 --veth-- server1 "data7" 10.10.2.1/24, server2 "data7" 10.10.2.2/24
      m1 10.199.1.1/30 --veth-- server1 "mgmt0" 10.199.1.2/30 (sshd)
      m2 10.199.2.1/30 --veth-- server2 "mgmt0" 10.199.2.2/30 (sshd)

server1 also plays the router (bottleneck on servers_lan). Run:
    sudo .venv/bin/python -m pytest tests/test_roles_netns.py -v
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from conftest import processes_mentioning
from netrepro.core import tc
from netrepro.experiment.rolevars import model_vars
from netrepro.experiment.spec import load_spec

REPO = Path(__file__).resolve().parent.parent
VENV_BIN = REPO / ".venv" / "bin"
NEEDED = ["ip", "tc", "ethtool", "curl", "/usr/sbin/sshd", "/usr/sbin/vsftpd", "ssh-keygen"]

# Real namespaces, sshd and vsftpd on this machine: `make test` runs these (after `make setup`
# installed what NEEDED lists); `make test-unit` does not.
pytestmark = pytest.mark.netns


@pytest.fixture(scope="module", autouse=True)
def _root_and_tools():
    """Fail (never skip) when the machine cannot run these tests: they need root and NEEDED."""
    missing = [c for c in NEEDED if shutil.which(c) is None]
    if os.geteuid() != 0 or missing:
        pytest.fail("the role tests on real namespaces need root and " + ", ".join(missing or NEEDED)
                    + "; run `make setup` then `make test` as root")

SERVERS = {"server1": 1, "server2": 2}


def sh(*argv: str, check: bool = True, ns: str | None = None, **kw) -> subprocess.CompletedProcess:
    """Run argv (in namespace ns) and return the completed process; raise on failure."""
    full = (["ip", "netns", "exec", ns] if ns else []) + list(argv)
    res = subprocess.run(full, capture_output=True, text=True, **kw)
    if check and res.returncode != 0:
        raise AssertionError(f"{' '.join(full)} failed ({res.returncode}): {res.stdout}{res.stderr}")
    return res


class Lab:
    """The namespaces, links and sshd processes of one test run, and their removal."""

    def __init__(self, tmp: Path):
        tag = str(os.getpid())
        self.tmp = tmp
        self.ctl = f"nrtp-c-{tag}"
        self.ns = {name: f"nrtp-{name}-{tag}" for name in SERVERS}
        self.made_ns: list[str] = []
        self.sshd_pidfiles: list[Path] = []
        self.made_run_sshd = False
        self.key = tmp / "id_ed25519"

    def up(self) -> None:
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.key))
        sh("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(self.tmp / "hostkey"))
        (self.tmp / "authorized_keys").write_text(Path(str(self.key) + ".pub").read_text())
        if not Path("/run/sshd").exists():
            Path("/run/sshd").mkdir(mode=0o755)
            self.made_run_sshd = True
        for ns in [self.ctl, *self.ns.values()]:
            sh("ip", "netns", "add", ns)
            self.made_ns.append(ns)
            sh("ip", "link", "set", "lo", "up", ns=ns)
        sh("ip", "link", "add", "br0", "type", "bridge", ns=self.ctl)
        sh("ip", "addr", "add", "10.10.2.254/24", "dev", "br0", ns=self.ctl)
        sh("ip", "link", "set", "br0", "up", ns=self.ctl)
        for name, i in SERVERS.items():
            ns = self.ns[name]
            sh("ip", "link", "add", f"d{i}", "type", "veth", "peer", "name", "data7", "netns", ns, ns=self.ctl)
            sh("ip", "link", "set", f"d{i}", "master", "br0", "up", ns=self.ctl)
            sh("ip", "link", "add", f"m{i}", "type", "veth", "peer", "name", "mgmt0", "netns", ns, ns=self.ctl)
            sh("ip", "addr", "add", f"10.199.{i}.1/30", "dev", f"m{i}", ns=self.ctl)
            sh("ip", "link", "set", f"m{i}", "up", ns=self.ctl)
            sh("ip", "addr", "add", f"10.10.2.{i}/24", "dev", "data7", ns=ns)
            sh("ip", "addr", "add", f"10.199.{i}.2/30", "dev", "mgmt0", ns=ns)
            sh("ip", "link", "set", "data7", "up", ns=ns)
            sh("ip", "link", "set", "mgmt0", "up", ns=ns)
            pidfile = self.tmp / f"sshd-{name}.pid"
            cfg = self.tmp / f"sshd-{name}.conf"
            cfg.write_text(
                f"ListenAddress 10.199.{i}.2\nPort 22\nHostKey {self.tmp}/hostkey\n"
                f"PidFile {pidfile}\nAuthorizedKeysFile {self.tmp}/authorized_keys\n"
                "PermitRootLogin prohibit-password\nPasswordAuthentication no\n"
                "KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
                "Subsystem sftp /usr/lib/openssh/sftp-server\n")
            self.sshd_pidfiles.append(pidfile)
            sh("/usr/sbin/sshd", "-f", str(cfg), "-E", str(self.tmp / f"sshd-{name}.log"), ns=ns)
            (self.tmp / name).mkdir()

    def down(self) -> None:
        """Remove exactly what up() made, and Ansible's SSH masters to it; never fails."""
        from netrepro.runner.ssh import close_ssh_masters
        close_ssh_masters([str(p) for p in (self.tmp / "cp").glob("*")])
        for name in SERVERS:  # vsftpd instances the roles started, known by their config
            conf = self.tmp / name / "ftp" / "vsftpd.conf"
            res = subprocess.run(["pgrep", "-f", "-x", f"/usr/sbin/vsftpd {re.escape(str(conf))}"],
                                 capture_output=True, text=True)
            for pid in res.stdout.split():
                os.kill(int(pid), signal.SIGKILL)
        for pidfile in self.sshd_pidfiles:
            try:
                os.kill(int(pidfile.read_text().split()[0]), signal.SIGTERM)
            except (OSError, ValueError, IndexError):
                pass
        for pid in self.left_running():  # a trial armed and never released or stopped
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        for ns in reversed(self.made_ns):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)
        if self.made_run_sshd:
            shutil.rmtree("/run/sshd", ignore_errors=True)

    def left_running(self) -> list[int]:
        """The pids of the processes that run a program or script of this lab's folder, or
        name a file in it (the trials' collectors, flow clients and their readers, armed
        nr-window.sh waiting on its FIFO); sshd and vsftpd are stopped by down() itself."""
        return [int(p.split(":")[0]) for p in processes_mentioning(str(self.tmp))
                if "sshd" not in p and "vsftpd" not in p]

    def inventory(self) -> Path:
        common = (f"-i {self.key} -o IdentitiesOnly=yes -o StrictHostKeyChecking=no "
                  "-o UserKnownHostsFile=/dev/null -o LogLevel=ERROR")
        hosts = {name: {"ansible_host": f"10.199.{i}.2", "ansible_port": 22, "ansible_user": "root",
                        "ansible_ssh_common_args": common, "netrepro_kind": "host",
                        "netrepro_addresses": {"servers_lan": f"10.10.2.{i}"},
                        "netrepro_prefixlen": {"servers_lan": 24},
                        "netrepro_node_dir": str(self.tmp / name)}
                 for name, i in SERVERS.items()}
        inv = {"all": {"vars": {"netrepro_site": "local", "ansible_python_interpreter": "/usr/bin/python3"},
                       "children": {"servers": {"hosts": hosts}, "routers": {"hosts": {"server1": {}}}}}}
        path = self.tmp / "inventory.yml"
        path.write_text(yaml.safe_dump(inv))
        return path

    def playbook(self, name: str, netrepro: dict, expect_ok: bool = True,
                 **extra) -> tuple[str, dict[str, dict[str, int]]]:
        """Run playbooks/<name> from the controller namespace; return output and recap.

        Asserts that ansible-playbook succeeded (or failed, with ``expect_ok=False``)."""
        vars_file = self.tmp / "vars.json"
        vars_file.write_text(json.dumps({"netrepro": netrepro, **extra}))
        env = {**os.environ, "ANSIBLE_CONFIG": str(REPO / "ansible.cfg"),
               "ANSIBLE_SSH_CONTROL_PATH_DIR": str(self.tmp / "cp"), "ANSIBLE_FORCE_COLOR": "0",
               "ANSIBLE_NOCOLOR": "1", "PATH": f"{VENV_BIN}:{os.environ['PATH']}"}
        res = sh(str(VENV_BIN / "ansible-playbook"), "-i", str(self.inventory()),
                 str(REPO / "playbooks" / name), "-e", f"@{vars_file}",
                 ns=self.ctl, check=False, cwd=REPO, env=env, timeout=600)
        out = res.stdout + res.stderr
        recap = {m.group(1): {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", m.group(2))}
                 for m in re.finditer(r"^(\S+)\s+:\s+(ok=.*)$", out, re.M)}
        assert (res.returncode == 0) == expect_ok, out
        return out, recap


#: The bottleneck's HTB (pie-vs-red's 10 Mbit/s) with a FIFO leaf under 1:10 standing in for
#: PIE or RED, as the trials' stacks put it (handle 10:).
def bottleneck(leaf: dict) -> list[dict]:
    return [{"interface": "eth1", "key": "servers_lan", "commands": tc.stack_commands(
        [tc.Qdisc("htb", params={"rate_mbit": 10}), tc.Qdisc(leaf["kind"], "10:", leaf["params"])])}]


BFIFO = {"kind": "bfifo", "params": {"limit_bytes": 200000}}
PFIFO = {"kind": "pfifo", "params": {"limit_packets": 134}}
#: netem's stand-in on server2 (the kernel lacks netem): a root tbf, a stack of one layer.
TBF_STACK = [{"interface": "eth1", "key": "servers_lan", "commands": tc.stack_commands(
    [tc.Qdisc("tbf", params={"rate_mbit": 100, "burst_bytes": 32768, "latency_ms": 100})])}]


def lab_vars() -> dict:
    """model_vars of pie-vs-red's file, reduced to what runs on two server namespaces here.

    server1 stands in for the router (the bottleneck on servers_lan, a FIFO leaf this kernel
    has), server2 for a client (a root tbf in place of netem); htb is probed on server1.
    """
    mv = model_vars(load_spec("pie-vs-red"))
    mv["nodes"] = list(SERVERS)
    for key in ("routes", "offload_networks", "sysctls"):
        mv[key] = {n: mv[key][n] for n in SERVERS}
    mv["probes"] = {"server1": {"htb@eth1": mv["probes"]["router"]["htb@eth1"]}, "server2": {}}
    mv["stacks"] = {"server1": bottleneck(BFIFO), "server2": TBF_STACK}
    ftp = mv["ftp_source"]
    ftp.update(nodes=list(SERVERS), files=ftp["files"][:3],
               listen_address={n: ftp["listen_address"][n] for n in SERVERS},
               max_rate_bytes_per_s={n: 0 for n in SERVERS})
    return mv


def lab_trial(tid: str, leaf: dict, rate: int) -> dict:
    """playbooks/trial.yml's ``trial`` var (netrepro.runner.trialvars.trial_vars' shape) of a trial
    without traffic: server1's bottleneck with ``leaf``, server2's tbf, the servers' sysctls,
    both FTP sources at ``rate`` bytes/s."""
    mv = lab_vars()
    return {"id": tid, "labels": {}, "lead_s": 2.0, "duration_s": 1.0, "base_rtt_s": 0, "files": mv["ftp_source"]["files"],
            "fetch_dir": "/nonexistent", "stacks": {"server1": bottleneck(leaf), "server2": TBF_STACK},
            "sysctls": mv["sysctls"], "ftp_sources": {n: rate for n in SERVERS}, "ping": {}, "qdisc_stats": {},
            "flows": {}, "iperf3": {}, "iperf3_servers": {}}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("netns-lab")
    os.chmod(tmp, 0o755)
    lab = Lab(tmp)
    try:
        lab.up()
        for i in SERVERS.values():  # wait for both sshd to listen
            for _ in range(50):
                if sh("ss", "-Hltn", f"src 10.199.{i}.2", ns=lab.ns[f"server{i}"]).stdout.strip():
                    break
                time.sleep(0.1)
        yield lab
    finally:
        lab.down()
    # Nothing of the lab's trials outlives it (an armed reader of nr-window.sh, blocked on its
    # FIFO, used to stay after make test).
    time.sleep(0.2)
    left = lab.left_running()
    assert not left, f"processes left running by the lab's trials: {left}"


@pytest.fixture(scope="module")
def provisioned(lab):
    first, recap1 = lab.playbook("provision.yml", lab_vars())
    second, recap2 = lab.playbook("provision.yml", lab_vars())
    return {"first": (first, recap1), "second": (second, recap2)}


def test_provision_changes_then_is_idempotent(provisioned):
    _, recap1 = provisioned["first"]
    out2, recap2 = provisioned["second"]
    for name in SERVERS:
        assert recap1[name]["failed"] == 0 and recap1[name]["changed"] > 0
        assert recap2[name]["changed"] == 0, out2


def test_interfaces_and_kernel_facts_reported(provisioned):
    out, _ = provisioned["first"]
    assert "kernel " in out and "htb@eth1 ok" in out


def test_sysctls_set_in_the_namespaces(lab, provisioned):
    for name in SERVERS:
        assert sh("sysctl", "-n", "net.ipv4.tcp_congestion_control", ns=lab.ns[name]).stdout.strip() == "reno"
        assert sh("sysctl", "-n", "net.ipv4.tcp_sack", ns=lab.ns[name]).stdout.strip() == "1"


def test_offloads_off_on_data_interface_only(lab, provisioned):
    for name in SERVERS:
        k = sh("ethtool", "-k", "data7", ns=lab.ns[name]).stdout
        for feat in ("tcp-segmentation-offload", "generic-segmentation-offload", "generic-receive-offload"):
            assert re.search(rf"^{feat}: off", k, re.M), k
        assert re.search(r"^tcp-segmentation-offload: on", sh("ethtool", "-k", "mgmt0", ns=lab.ns[name]).stdout, re.M)


def test_htb_on_bottleneck(lab, provisioned):
    q = json.loads(sh("tc", "-j", "qdisc", "show", "dev", "data7", ns=lab.ns["server1"]).stdout)
    root = [x for x in q if x.get("root")][0]
    assert (root["kind"], root["handle"], root["options"]["default"]) == ("htb", "1:", "0x10")
    cls = sh("tc", "class", "show", "dev", "data7", ns=lab.ns["server1"]).stdout
    assert "class htb 1:10" in cls and "rate 10Mbit ceil 10Mbit" in cls
    q2 = json.loads(sh("tc", "-j", "qdisc", "show", "dev", "data7", ns=lab.ns["server2"]).stdout)
    assert not any(x["kind"] == "htb" for x in q2)


def test_a_root_qdisc_stack(lab, provisioned):
    q = json.loads(sh("tc", "-j", "qdisc", "show", "dev", "data7", ns=lab.ns["server2"]).stdout)
    assert [(x["kind"], x["options"]["rate"]) for x in q if x.get("root")] == [("tbf", 12500000)]


def test_two_ftp_sources_serve_files(lab, provisioned):
    for name, i in SERVERS.items():
        res = sh("curl", "-sS", "--max-time", "20", "-r", "0-99999", "-o", "/dev/null",
                 "-w", "%{size_download}", f"ftp://10.10.2.{i}/file01", ns=lab.ctl)
        assert res.stdout == "100000"
        listing = sh("curl", "-sS", "--max-time", "20", "-l", f"ftp://10.10.2.{i}/", ns=lab.ctl).stdout.split()
        assert listing == ["file01", "file02", "file03"]
        conf = lab.tmp / name / "ftp" / "vsftpd.conf"
        assert f"listen_address=10.10.2.{i}\n" in conf.read_text()
        assert (lab.tmp / name / "ftp" / "root" / "file01").stat().st_size == 4294967296
        assert (lab.tmp / name / "ftp" / "root" / "file01").stat().st_blocks == 0  # sparse


def test_a_trial_sets_its_ftp_rate_and_restarts(lab, provisioned):
    pid_before = (lab.tmp / "server1" / "ftp" / "vsftpd.pid").read_text().strip()
    out, recap = lab.playbook("trial.yml", lab_vars(), trial=lab_trial("limited", BFIFO, 25000))
    assert all(r["failed"] == 0 for r in recap.values()), out
    assert "anon_max_rate=25000\n" in (lab.tmp / "server1" / "ftp" / "vsftpd.conf").read_text()
    pid_limited = (lab.tmp / "server1" / "ftp" / "vsftpd.pid").read_text().strip()
    assert pid_limited != pid_before
    t0 = time.monotonic()
    res = sh("curl", "-sS", "--max-time", "30", "-r", "0-74999", "-o", "/dev/null",
             "-w", "%{size_download}", "ftp://10.10.2.1/file02", ns=lab.ctl)
    elapsed = time.monotonic() - t0
    assert res.stdout == "75000" and elapsed > 2.0, elapsed  # 75 kB at 25 kB/s: about 3 s
    # the next trial at the same rate leaves vsftpd alone; one unlimited again restarts it
    out, _ = lab.playbook("trial.yml", lab_vars(), trial=lab_trial("limited-2", BFIFO, 25000))
    assert task_results(out, "ftp_source : Write the instance's vsftpd.conf") == {n: "ok" for n in SERVERS}, out
    assert (lab.tmp / "server1" / "ftp" / "vsftpd.pid").read_text().strip() == pid_limited
    lab.playbook("trial.yml", lab_vars(), trial=lab_trial("unlimited", BFIFO, 0))
    assert "anon_max_rate=0\n" in (lab.tmp / "server1" / "ftp" / "vsftpd.conf").read_text()


def test_each_trial_installs_its_stack_afresh(lab, provisioned):
    """A trial's stack replaces the leaf of another kind and starts from zero counters even
    when the same stack is there; provisioning again puts the first trial's stack back, once."""
    def leaf():
        q = json.loads(sh("tc", "-s", "-j", "qdisc", "show", "dev", "data7", ns=lab.ns["server1"]).stdout)
        return [(x["kind"], x["handle"], x["options"]) for x in q if x.get("parent") == "1:10"]

    lab.playbook("trial.yml", lab_vars(), trial=lab_trial("pfifo", PFIFO, 0))
    assert leaf() == [("pfifo", "10:", {"limit": 134})]
    sh("ping", "-c", "3", "-i", "0.2", "-q", "10.10.2.2", ns=lab.ns["server1"])  # a few packets through the leaf
    sent = [x["packets"] for x in json.loads(sh("tc", "-s", "-j", "qdisc", "show", "dev", "data7",
                                                 ns=lab.ns["server1"]).stdout) if x.get("parent") == "1:10"]
    assert sent and sent[0] >= 3
    lab.playbook("trial.yml", lab_vars(), trial=lab_trial("pfifo-2", PFIFO, 0))
    after = [x["packets"] for x in json.loads(sh("tc", "-s", "-j", "qdisc", "show", "dev", "data7",
                                                  ns=lab.ns["server1"]).stdout) if x.get("parent") == "1:10"]
    assert after[0] < sent[0], (sent, after)  # installed afresh: the earlier trial's counters are gone
    _, recap = lab.playbook("provision.yml", lab_vars())
    assert recap["server1"]["changed"] > 0 and leaf() == [("bfifo", "10:", {"limit": 200000})]
    _, recap = lab.playbook("provision.yml", lab_vars())
    assert recap["server1"]["changed"] == 0 and leaf() == [("bfifo", "10:", {"limit": 200000})]


def test_missing_qdisc_fails_clearly(lab, provisioned):
    rv = lab_vars()
    rv["probes"]["server2"] = {"bogus": ["qdisc", "add", "dev", tc.DEV, "root", "nosuchqdisc"],
                               "tcp_reno": ["tcp_congestion", "reno"], "tcp_nosuch": ["tcp_congestion", "nosuchcc"]}
    out, recap = lab.playbook("provision.yml", rv, expect_ok=False)
    assert recap["server2"]["failed"] == 1 and recap["server1"]["failed"] == 0
    assert "server2 lacks: bogus, tcp_nosuch. Nothing was installed and the node was not rebooted." in out
    assert "(kernel " in out and "tc said: bogus: " in out and "qdisc kind is unknown" in out
    assert "bogus MISSING" in out and "tcp_reno ok" in out
    assert "tcp_nosuch: no TCP congestion control nosuchcc (available: " in out


def task_results(out: str, task: str) -> dict[str, str]:
    """Host -> its status line word (ok, changed, skipping, failed) for the task whose
    ``TASK [...]`` header contains ``task``, in ansible-playbook's default output."""
    m = re.search(r"^TASK \[[^\]]*" + re.escape(task) + r"[^\]]*\].*?(?=^TASK |^PLAY |\Z)", out, re.M | re.S)
    assert m, f"no task {task!r} in the output:\n{out}"
    return {h: st for st, h in re.findall(r"^(ok|changed|skipping|failed|fatal): \[([^\]]+)\]", m.group(0), re.M)}


def routes_of(lab: Lab, name: str, dst: str) -> list[tuple[str, str]]:
    return [(r["dst"], r.get("gateway", "")) for r in
            json.loads(sh("ip", "-j", "route", "show", dst, ns=lab.ns[name]).stdout)]


def mtu_of(lab: Lab, name: str, dev: str = "data7") -> int:
    return json.loads(sh("ip", "-j", "link", "show", "dev", dev, ns=lab.ns[name]).stdout)[0]["mtu"]


def test_routes_added_by_provision_then_unchanged(lab, provisioned):
    first, _ = provisioned["first"]
    second, _ = provisioned["second"]
    task = "routes : Set the MTU"
    assert task_results(first, task) == {name: "changed" for name in SERVERS}, first
    assert task_results(second, task) == {name: "ok" for name in SERVERS}, second
    for name in SERVERS:
        assert routes_of(lab, name, "10.10.1.0/24") == [("10.10.1.0/24", "10.10.2.254")]
        assert mtu_of(lab, name) == 1500  # the spec's MTU: already so, left alone


def test_routes_role_sets_mtu_and_routes_idempotently(lab, provisioned):
    book = lab.tmp / "routes-only.yml"
    book.write_text(yaml.safe_dump([{
        "name": "The routes role alone", "hosts": "server2", "gather_facts": False,
        "roles": ["interfaces", {"role": "routes", "vars": {
            "routes_static": "{{ test_routes }}", "routes_mtu_bytes": "{{ test_mtu }}"}}]}]))
    routes = [{"to": "10.10.3.0/24", "via": "10.10.2.254"}, {"to": "10.10.4.7/32", "via": "10.10.2.1"}]
    try:
        out, recap = lab.playbook(str(book), lab_vars(), test_routes=routes, test_mtu=1400)
        assert recap["server2"]["changed"] == 1, out
        assert mtu_of(lab, "server2") == 1400 and mtu_of(lab, "server2", "mgmt0") == 1500
        assert routes_of(lab, "server2", "10.10.3.0/24") == [("10.10.3.0/24", "10.10.2.254")]
        assert routes_of(lab, "server2", "10.10.4.7/32") == [("10.10.4.7", "10.10.2.1")]
        out, recap = lab.playbook(str(book), lab_vars(), test_routes=routes, test_mtu=1400)
        assert recap["server2"]["changed"] == 0, out
        # Another gateway for the same prefix: the route is replaced, not added.
        routes[0]["via"] = "10.10.2.1"
        out, recap = lab.playbook(str(book), lab_vars(), test_routes=routes, test_mtu=1400)
        assert recap["server2"]["changed"] == 1, out
        assert routes_of(lab, "server2", "10.10.3.0/24") == [("10.10.3.0/24", "10.10.2.1")]
        # A gateway off every connected network fails, saying why.
        out, recap = lab.playbook(str(book), lab_vars(), expect_ok=False,
                                  test_routes=[{"to": "10.10.5.0/24", "via": "10.77.0.1"}], test_mtu=0)
        assert recap["server2"]["failed"] == 1 and "10.10.5.0/24" not in sh(
            "ip", "route", "show", ns=lab.ns["server2"]).stdout
    finally:  # leave server2 as provisioned for the other tests
        sh("ip", "link", "set", "dev", "data7", "mtu", "1500", ns=lab.ns["server2"], check=False)
        for r in ("10.10.3.0/24", "10.10.4.7/32"):
            sh("ip", "route", "del", r, ns=lab.ns["server2"], check=False)


def scripts_dir(role: str) -> str:
    """<role>-<first 12 hex of the sha1 of the role's nr-*.sh, in name order>: the folder name
    roles/<role>/defaults/main.yml gives the installed scripts."""
    import hashlib
    text = b"".join(p.read_bytes() for p in sorted((REPO / "roles" / role / "files").glob("nr-*.sh")))
    return f"{role}-{hashlib.sha1(text).hexdigest()[:12]}"


def test_provision_installs_the_trial_scripts_by_version(lab, provisioned):
    for name in SERVERS:  # (that the second run left them alone: test_provision_..._idempotent)
        for role in ("collectors", "flow_clients"):
            installed = lab.tmp / name / "bin" / scripts_dir(role)
            want = sorted(p.name for p in (REPO / "roles" / role / "files").glob("nr-*.sh"))
            assert sorted(p.name for p in installed.iterdir()) == want
            for script in want:  # byte for byte, executable
                path = installed / script
                assert path.read_bytes() == (REPO / "roles" / role / "files" / script).read_bytes()
                assert os.access(path, os.X_OK)


def test_trial_steps_run_the_installed_scripts_and_the_controller_fetches(lab, provisioned):
    trial = {"id": "t1", "ping": {}, "qdisc_stats": {}, "flows": {}}
    book = lab.tmp / "pack-only.yml"
    book.write_text(yaml.safe_dump([{
        "name": "Prepare (clear, snapshot before), start (the CPU window) and finish (wait, snapshot after, pack)",
        "hosts": "all",
        "gather_facts": False, "tasks": [
            {"name": step, "ansible.builtin.include_role": {"name": "collectors", "tasks_from": step},
             "vars": {"collectors_trial_id": "t1", "collectors_start_epoch_s": 0, "collectors_duration_s": 0}}
            for step in ("prepare", "main", "finish")]}]))
    rv = lab_vars()
    # A sysctl the experiment sets on server1 only (none of the fixed list): recorded there alone.
    rv["sysctls"]["server1"]["net.ipv4.tcp_early_retrans"] = "3"
    out, recap = lab.playbook(str(book), rv, trial=trial)
    assert all(recap[n]["failed"] == 0 for n in SERVERS), out
    trial_dir = lab.tmp / "server1" / "trials" / "t1"
    before = json.loads((trial_dir / "meta-before.json").read_text())
    # net.core.default_qdisc exists in the initial network namespace only: left out, not fatal
    fixed = ["net.ipv4.ip_forward", "net.ipv4.tcp_congestion_control", "net.ipv4.tcp_ecn",
             "net.ipv4.tcp_rmem", "net.ipv4.tcp_sack", "net.ipv4.tcp_wmem"]
    assert sorted(before["sysctls"]) == sorted([*fixed, "net.ipv4.tcp_early_retrans"])
    assert before["sysctls"]["net.ipv4.tcp_early_retrans"] == sh(
        "sysctl", "-n", "net.ipv4.tcp_early_retrans", ns=lab.ns["server1"]).stdout.strip()
    other = json.loads((lab.tmp / "server2" / "trials" / "t1" / "meta-before.json").read_text())
    assert sorted(other["sysctls"]) == fixed
    assert before["kernel"] == os.uname().release and before["curl"].startswith("curl ")
    assert set(before["offloads"]) == {"data7", "mgmt0"} and "tcp-segmentation-offload: " in before["offloads"]["data7"]
    meta = json.loads((trial_dir / "meta-after.json").read_text())
    assert sorted(meta) == ["clock_epoch_s", "cpu_ticks", "loadavg", "qdiscs"]  # counters only
    assert len(meta["cpu_ticks"].split()) >= 8 and any(q["kind"] == "htb" for q in meta["qdiscs"])
    # the schedule's CPU window (nodes_cpu_busy): read at its start and end, each a /proc/stat cpu line
    window = [ln.split() for ln in (trial_dir / "cpu-window.txt").read_text().splitlines()]
    assert [w[0] for w in window] == ["start", "end"] and all(len(w) >= 9 for w in window), window
    assert all(int(b) >= int(a) for a, b in zip(window[0][1:], window[1][1:]))
    dest = lab.tmp / "fetched"
    code = ("import sys, json; from pathlib import Path; from netrepro.runner.fetch import fetch_archives, FetchFailed\n"
            "try:\n    print(json.dumps(fetch_archives(Path(sys.argv[1]), ['server1', 'server2'], 't1', Path(sys.argv[2]))))\n"
            "except FetchFailed as e:\n    print('FAILED', e)\n")

    def fetch() -> str:
        return sh(str(VENV_BIN / "python"), "-c", code, str(lab.inventory()), str(dest), ns=lab.ctl, cwd=REPO).stdout

    sizes = json.loads(fetch())
    for name in SERVERS:
        archive = lab.tmp / name / "trials" / "t1.tar.gz"
        assert (dest / f"{name}.tar.gz").read_bytes() == archive.read_bytes() and sizes[name] == archive.stat().st_size
    # A node without its archive: named, and nothing half-written is left.
    (lab.tmp / "server2" / "trials" / "t1.tar.gz").unlink()
    shutil.rmtree(dest)
    out = fetch()
    assert out.startswith("FAILED could not fetch the raw data of server2 (") and "server1" not in out, out
    assert sorted(p.name for p in dest.iterdir()) == ["server1.tar.gz"]
    # The controller's disk full mid-archive (ssh itself exits 0): caught by the size check.
    (lab.tmp / "server2" / "trials" / "t1.tar.gz").write_bytes(os.urandom(600_000))
    shutil.rmtree(dest)
    dest.mkdir()
    sh("mount", "-t", "tmpfs", "-o", "size=256k", "nrtp-full", str(dest))
    try:
        out = fetch()
        assert re.match(r"FAILED could not fetch the raw data of server2 \(.*\) \(the results folder's disk is full\)$",
                        out.strip()), out
        assert not any(p.name.endswith(".part") for p in dest.iterdir())
    finally:
        sh("umount", str(dest), check=False)


def _probes_sent(text: str) -> list[tuple[int, float]]:
    """(icmp_seq, sent epoch s) of each answered probe of ping -D output."""
    return [(int(m[2]), float(m[1]) - float(m[3]) / 1000)
            for m in re.finditer(r"^\[(\d+\.\d+)\] \d+ bytes from .* icmp_seq=(\d+) .*time=([\d.]+) ms$", text, re.M)]


def test_armed_ping_runs_before_the_start_and_stops_at_the_schedule_end(lab, provisioned):
    # Armed, ping starts at once (its own start-up no longer delays the first probe past the
    # start) and is stopped with SIGINT at START + DURATION, printing its statistics.
    script = str(REPO / "roles" / "collectors" / "files" / "nr-ping.sh")
    out = lab.tmp / "server1" / "armed" / "ping.txt"
    sh("sh", script, str(out), "10.10.2.2", "armed", "2", "0.1", "--background", ns=lab.ns["server1"])
    go = Path(str(out) + ".go")
    deadline = time.monotonic() + 10
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    start = time.time() + 1.0
    go.write_text(f"{start:.6f}\n")
    pid = int(Path(str(out) + ".pid").read_text())
    deadline = time.monotonic() + 15
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    text = out.read_text()
    sent = _probes_sent(text)
    assert sent and sent[0][1] < start - 0.5, text  # already probing well before the start
    assert start + 1.9 <= sent[-1][1] <= start + 2.0 + 0.5, (start, sent[-1])
    assert re.search(r"^\d+ packets transmitted, \d+ received", text, re.M), text  # stopped by SIGINT


def test_ping_stops_at_its_deadline_when_probes_are_lost(lab, provisioned):
    # -c alone waits for COUNT replies: with none coming, ping must still end at the schedule's end.
    script = str(REPO / "roles" / "collectors" / "files" / "nr-ping.sh")
    out = lab.tmp / "server1" / "lost" / "ping.txt"
    t0 = time.monotonic()
    # and a run without every reply is data (ping's status 1), not a failed step
    sh("sh", script, str(out), "10.10.2.99", "now", "2", "0.2", ns=lab.ns["server1"])
    took = time.monotonic() - t0
    assert 1.9 <= took <= 3.0, took
    assert "no answer yet for icmp_seq=" in out.read_text()


def _port_state(lab: Lab, dev: str) -> tuple[str | None, list[str], bool]:
    """(master, IPv4 addresses, up) of dev in server2's namespace."""
    link = json.loads(sh("ip", "-j", "addr", "show", "dev", dev, ns=lab.ns["server2"]).stdout)[0]
    return (link.get("master"), [a["local"] for a in link.get("addr_info", []) if a["family"] == "inet"],
            "UP" in link["flags"])


def test_switch_bridge_finds_ports_by_mac_or_name_and_bridges_them_once(lab, provisioned):
    """A testbed switch: the VM's ports are named by the testbed (found here by the MAC a
    manifest gives, or by a static file's device name), one carries an address the testbed
    gave it; the roles find both, remove the address and bridge them; a second run changes
    nothing. veth devices (their peers left alone) stand in for the VM's NICs."""
    ns = lab.ns["server2"]
    book = lab.tmp / "switch.yml"
    book.write_text(yaml.safe_dump([{
        "name": "A switch's ports", "hosts": "server2", "gather_facts": False,
        "roles": [{"role": "interfaces", "vars": {"interfaces_addresses": {}, "interfaces_prefixlen": {},
                                                  "interfaces_unaddressed": "{{ test_ports }}"}},
                  {"role": "switch_bridge", "vars": {"switch_bridge_name": "nrtbr0"}}]}]))
    ports = [{"key": "s9-eth1", "value": {"network": None, "mac": "02:00:00:00:09:01", "device": None}},
             {"key": "s9-eth2", "value": {"network": None, "mac": None, "device": "nrtsw2"}}]
    try:
        sh("ip", "link", "add", "nrtsw1", "address", "02:00:00:00:09:01", "type", "veth", "peer", "name", "nrtsw1p",
           "address", "02:00:00:00:09:02", ns=ns)
        sh("ip", "link", "add", "nrtsw2", "type", "veth", "peer", "name", "nrtsw2p", ns=ns)
        sh("ip", "addr", "add", "10.10.9.1/24", "dev", "nrtsw1", ns=ns)   # as Emulab numbers a link's ports
        out, recap = lab.playbook(str(book), lab_vars(), test_ports=ports)
        assert recap["server2"]["changed"] == 1, out
        for dev in ("nrtsw1", "nrtsw2"):
            assert _port_state(lab, dev) == ("nrtbr0", [], True)
        assert "UP" in json.loads(sh("ip", "-j", "link", "show", "dev", "nrtbr0", ns=ns).stdout)[0]["flags"]
        out, recap = lab.playbook(str(book), lab_vars(), test_ports=ports)
        assert recap["server2"]["changed"] == 0, out
        # A MAC that no device has fails, naming the port and the MAC.
        ports[0]["value"]["mac"] = "02:00:00:00:09:99"
        out, recap = lab.playbook(str(book), lab_vars(), expect_ok=False, test_ports=ports)
        assert recap["server2"]["failed"] == 1 and "s9-eth1: 0 interfaces with MAC 02:00:00:00:09:99" in out, out
    finally:
        for dev in ("nrtsw1", "nrtsw2", "nrtbr0"):
            sh("ip", "link", "del", dev, ns=ns, check=False)
