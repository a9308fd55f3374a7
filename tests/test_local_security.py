"""Security of the local site (netrepro/sites/local/site.py): `down` kills only the micro-VM it
started, the jump sshd and the nodes' sshd take keys only, and host keys are pinned.

The process tests use real short-lived processes (``sleep``); the sshd tests (marked netns)
start a real sshd on 127.0.0.1 with the generated configuration.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from netrepro.runner import ansible
from netrepro.runner.ansible import PlaybookError, run_playbook
from netrepro.sites.inventory import build_inventory, ssh_common_args, write_inventory, write_known_hosts
from netrepro.sites.local import netns
from netrepro.sites.base import NodeLogin, SiteError
from netrepro.sites.local.proc import boot_shell_line, kill_group, proc_identity, started_identity, vm_group_is_ours
from netrepro.sites.local.site import LocalSite, jump_sshd_config
from netrepro.sites.statefolder import make_state_dir
from netrepro.experiment.spec import load_spec


def _alive(pid: int) -> bool:
    """Is ``pid`` a live (not zombie) process?"""
    ident = proc_identity(pid)
    return ident is not None and ident.state != "Z"


@pytest.fixture
def group():
    """A real process group: ``sleep 60`` leading its own session, as the micro-VM's shell does."""
    p = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        yield p
    finally:
        if p.poll() is None:
            p.kill()
        p.wait()


# --- the process group's identity ----------------------------------------------------------------
def test_proc_identity_of_a_real_process(group):
    ident = started_identity(group.pid)
    assert ident.cmdline == ["sleep", "60"]
    assert ident.pgrp == group.pid and ident.session == group.pid
    assert ident.state != "Z"  # S once asleep; R or D while it starts
    # field 22 counts clock ticks after boot: this process started within the last minute
    ticks = os.sysconf("SC_CLK_TCK")
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    assert uptime - 60 < ident.starttime / ticks <= uptime + 1
    assert started_identity(group.pid).starttime == ident.starttime  # stable
    assert proc_identity(2 ** 22 + 1) is None  # above any pid_max: no such process


def test_started_identity_waits_for_the_command_line():
    """Right after Popen the kernel may still be in exec() (cmdline reads empty): the identity
    recorded at start must still hold the command line, every time."""
    procs = [subprocess.Popen(["sleep", "60"], start_new_session=True) for _ in range(20)]
    try:
        assert [started_identity(p.pid).cmdline for p in procs] == [["sleep", "60"]] * 20
    finally:
        for p in procs:
            p.kill()
            p.wait()
    gone = subprocess.Popen(["true"])
    gone.wait()
    assert started_identity(gone.pid, timeout_s=0.5) is None


def test_name_with_spaces_and_parentheses_is_parsed(tmp_path):
    """Field 2 of /proc/<pid>/stat is the name in parentheses, which may hold ') ' itself."""
    exe = tmp_path / "a) b (c"
    exe.symlink_to("/bin/sleep")
    p = subprocess.Popen([str(exe), "60"])
    try:
        ident = started_identity(p.pid)
        assert ident.cmdline == [str(exe), "60"] and ident.pgrp == os.getpgrp()
        assert ident.starttime == int(Path(f"/proc/{p.pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    finally:
        p.kill()
        p.wait()


def test_group_is_ours_only_with_the_recorded_start_time_and_command(group):
    ident = started_identity(group.pid)
    assert vm_group_is_ours(group.pid, ident.starttime, ident.cmdline)
    assert not vm_group_is_ours(group.pid, ident.starttime + 1, ident.cmdline)  # a recycled pid
    assert not vm_group_is_ours(group.pid, ident.starttime, ["sleep", "61"])
    assert not vm_group_is_ours(group.pid, None, ident.cmdline)  # nothing recorded: cannot tell
    assert not vm_group_is_ours(group.pid, ident.starttime, None)


def test_killpg_spares_a_group_with_another_start_time(group):
    ident = started_identity(group.pid)
    assert kill_group(group.pid, ident.starttime - 1, ident.cmdline) is False
    time.sleep(0.2)
    assert group.poll() is None and _alive(group.pid)
    assert kill_group(group.pid, ident.starttime, ident.cmdline) is True
    assert group.wait(timeout=10) == -signal.SIGTERM


def test_a_group_whose_leader_exited_is_still_ours():
    """The leader (a shell) exits, its child stays in the group: the pgid cannot have been reused
    while the group lives, and the member is in the leader's session: killed."""
    p = subprocess.Popen(["sh", "-c", "sleep 60 & echo $!; read x"], start_new_session=True,
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    child = int(p.stdout.readline())
    try:
        lead = started_identity(p.pid)
        ident_starttime, cmdline = lead.starttime, lead.cmdline
        assert cmdline == ["sh", "-c", "sleep 60 & echo $!; read x"]
        p.stdin.close()  # the shell reads end of file and exits
        p.wait(timeout=10)  # reaped: no process with the group's id any more
        assert proc_identity(p.pid) is None and _alive(child)
        assert vm_group_is_ours(p.pid, ident_starttime, cmdline)
        assert not vm_group_is_ours(p.pid, proc_identity(child).starttime + 1, cmdline)  # members older: no
        assert kill_group(p.pid, ident_starttime, cmdline) is True
        deadline = time.time() + 10
        while _alive(child) and time.time() < deadline:
            time.sleep(0.05)
        assert not _alive(child)
    finally:
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.fixture
def booted(tmp_path):
    """A real process group started as the local site boots its machine: ``sh -c '<argv> <
    /dev/null 2>&1 | cat >> <state>/vm-console.log'`` (boot_shell_line) in its own session,
    with ``sleep 60`` as the machine; and its site (state folder ``tmp_path/state``)."""
    site = LocalSite(load_spec("pie-vs-red"), tmp_path / "state")
    site.ensure_state_dir()
    p = subprocess.Popen(["sh", "-c", boot_shell_line(["sleep", "60"], site.state_dir / "vm-console.log")],
                         start_new_session=True)
    try:
        yield p, site
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
        p.wait()


def test_down_leaves_a_recycled_pid_alone(booted):
    """`down` (release) on a state whose VM pgid is now another process: not killed, and said so."""
    group, site = booted
    ident = started_identity(group.pid)
    site.save_state({"site": "local", "mode": "vm", "vm_pgid": group.pid, "vm_starttime": ident.starttime + 7,
                     "vm_cmdline": ident.cmdline, "runtime_dir": "/run/netrepro", "ssh_port": 1})
    said = []
    site.release(log=said.append)
    assert group.poll() is None and _alive(group.pid)
    assert any(f"process group {group.pid} is not the micro-VM" in s for s in said), said
    assert not site.state_file.exists()


def test_down_kills_its_own_vm_group(booted):
    group, site = booted
    ident = started_identity(group.pid)
    site.save_state({"site": "local", "mode": "vm", "vm_pgid": group.pid, "vm_starttime": ident.starttime,
                     "vm_cmdline": ident.cmdline, "runtime_dir": "/run/netrepro", "ssh_port": 1})
    assert site.status()["vm_running"] is True
    said = []
    site.release(log=said.append)
    assert group.wait(timeout=10) == -signal.SIGTERM
    assert "[local] micro-VM stopped" in said


def _forge_copy(tmp_path: Path, **state) -> Path:
    """A copy folder of the local site, ``<state>/pie-vs-red-local.2/``, as netrepro makes it
    (its marker), whose state.json holds ``state``; returns the state root."""
    root = tmp_path / "state"
    folder = make_state_dir(root / "pie-vs-red-local.2", "pie-vs-red", "local", 2)
    (folder / "state.json").write_text(json.dumps({"site": "local", "mode": "vm", **state}))
    return root


@pytest.mark.parametrize("forged", ["recorded", "group-0", "own-group"])
def test_down_refuses_a_copy_state_naming_another_process_group(group, tmp_path, forged):
    """A copy folder whose state names an unrelated process group (a ``sleep`` leading its own,
    recorded with its true start time and command line), group 0 (killpg(0) is netrepro's own
    group) or netrepro's own group: `down` refuses in one line naming the file and field, exit 2,
    and the group lives."""
    ident = started_identity(group.pid)
    pgid = {"recorded": group.pid, "group-0": 0, "own-group": os.getpgrp()}[forged]
    root = _forge_copy(tmp_path, vm_pgid=pgid, vm_starttime=ident.starttime if forged == "recorded" else 1,
                       vm_cmdline=ident.cmdline)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETREPRO_")}
    env.update(NETREPRO_STATE=str(root), NETREPRO_RESULTS=str(tmp_path / "results"))
    p = subprocess.run([sys.executable, "-m", "netrepro", "down", "pie-vs-red", "--site", "local"], env=env,
                       cwd=Path(__file__).resolve().parent.parent, capture_output=True, text=True, timeout=120,
                       stdin=subprocess.DEVNULL)
    err = p.stderr.strip()
    assert p.returncode == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, (p.returncode, err)
    field = "vm_cmdline" if forged == "recorded" else "vm_pgid"
    assert f"{root}/pie-vs-red-local.2/state.json: {field}: " in err, err
    assert group.poll() is None and _alive(group.pid)
    assert (root / "pie-vs-red-local.2" / "state.json").is_file()


def test_release_refuses_another_state_folders_machine(booted, tmp_path):
    """Copy 2's state naming copy 1's machine (its boot line names copy 1's folder): refused."""
    group, site = booted
    ident = started_identity(group.pid)
    other = LocalSite(load_spec("pie-vs-red"), tmp_path / "state.2")
    other.save_state({"site": "local", "mode": "vm", "vm_pgid": group.pid, "vm_starttime": ident.starttime,
                      "vm_cmdline": ident.cmdline})
    with pytest.raises(SiteError, match=r"state\.2/state\.json: vm_cmdline: .*left alone"):
        other.release(log=lambda _: None)
    assert group.poll() is None and _alive(group.pid)


def test_release_refuses_a_tap_not_named_after_the_state(tmp_path):
    site = LocalSite(load_spec("pie-vs-red"), tmp_path / "state")
    site.save_state({"site": "local", "mode": "uml", "id": "0123abcd", "tap": "eth0"})
    with pytest.raises(SiteError, match=r"state\.json: tap: 'eth0': expected the tap"):
        site.release(log=lambda _: None)
    assert site.state_file.is_file()


def test_release_refuses_an_edited_teardown_script(tmp_path):
    """Host mode: `down` runs the teardown it renders, and refuses when the file differs."""
    site = LocalSite(load_spec("pie-vs-red"), tmp_path / "state")
    site.save_state({"site": "local", "mode": "host"})
    (site.state_dir / "teardown.sh").write_text(f"touch {tmp_path}/pwned\n")
    with pytest.raises(SiteError, match=r"teardown\.sh: \(file\): differs"):
        site.release(log=lambda _: None)
    assert not (tmp_path / "pwned").exists() and site.state_file.is_file()


def test_the_local_sites_logins_pass_the_check_of_a_login(tmp_path):
    """The logins the local site saves (node folders under a ``.state/`` folder, the micro-VM's
    jump host) pass the check every login gets again when read back; a node folder that a
    shell or Ansible's templating would read does not."""
    from netrepro.sites.base import login_problem
    run = tmp_path / ".state" / "pie-vs-red-local.2" / "run"
    lg = NodeLogin(name="router", host="172.30.1.11", key_file=str(run.parent / "ssh" / "id_ed25519"),
                   proxy_jump="root@127.0.0.1:40022", extra={"node_dir": f"{run}/router", "host_key": "ssh-ed25519 AAAA"})
    assert login_problem(lg) is None
    for bad in ("{{ lookup('pipe', 'id') }}", "/run/../etc", "relative/dir", "/run/$(id)"):
        lg.extra["node_dir"] = bad
        assert login_problem(lg)[0] == "extra.node_dir", bad


# --- sshd configurations: keys only ---------------------------------------------------------------
LAYOUT = netns.Layout(mgmt_subnet="172.30.0.0/24", config_dir="/s/nodes", runtime_dir="/run/netrepro",
                      authorized_keys="/s/ssh/authorized_keys")
KEYS_ONLY = ["PermitRootLogin prohibit-password", "AuthenticationMethods publickey",
             "PasswordAuthentication no", "KbdInteractiveAuthentication no"]


@pytest.mark.parametrize("text", [jump_sshd_config(LAYOUT), netns.sshd_config("client1", "172.30.0.12", LAYOUT)],
                         ids=["jump", "node"])
def test_sshd_configs_take_keys_only(text):
    lines = text.splitlines()
    for want in KEYS_ONLY:
        assert want in lines
    keys = [ln.split()[0].lower() for ln in lines if ln.strip() and not ln.startswith("#")]
    assert len(keys) == len(set(keys))  # each option once (sshd keeps the first value)
    assert not any(ln.split()[0] in ("ChallengeResponseAuthentication", "PermitEmptyPasswords") for ln in lines
                   if ln.strip() and not ln.startswith("#"))


def test_jump_sshd_config_text():
    assert jump_sshd_config(LAYOUT).splitlines() == [
        "# sshd of the micro-VM's root namespace: the jump host to the nodes", "Port 22",
        "ListenAddress 10.0.2.15", "HostKey /s/nodes/jump_host_ed25519_key",
        "AuthorizedKeysFile /s/ssh/authorized_keys", *KEYS_ONLY,
        "UsePAM yes", "StrictModes no", "UseDNS no", "PidFile /run/netrepro/jump-sshd.pid"]


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    return path.with_suffix(".pub").read_text()


@pytest.mark.netns
def test_sshd_reads_the_jump_config_as_keys_only(tmp_path):
    """sshd -T (the configuration as sshd understands it) of the generated jump config."""
    layout = netns.Layout("172.30.0.0/24", str(tmp_path), str(tmp_path / "run"), str(tmp_path / "ak"))
    _keygen(tmp_path / "jump_host_ed25519_key")
    (tmp_path / "cfg").write_text(jump_sshd_config(layout))
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)  # sshd's privilege separation folder
    r = subprocess.run(["/usr/sbin/sshd", "-T", "-f", str(tmp_path / "cfg")], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    eff = dict(ln.split(" ", 1) for ln in r.stdout.splitlines() if " " in ln)
    assert eff["authenticationmethods"] == "publickey"
    assert eff["passwordauthentication"] == "no" and eff["kbdinteractiveauthentication"] == "no"
    assert eff["permitrootlogin"] == "without-password" and eff["listenaddress"] == "10.0.2.15:22"


@pytest.fixture
def real_sshd(tmp_path):
    """A node's sshd from netns.sshd_config on 127.0.0.1 (a free port), with its host key."""
    if os.geteuid() != 0:
        pytest.fail("needs root (sshd logs in as root)")
    layout = netns.Layout("172.30.0.0/24", str(tmp_path / "nodes"), str(tmp_path / "run"), str(tmp_path / "ak"))
    (tmp_path / "nodes" / "n1").mkdir(parents=True)
    (tmp_path / "run" / "n1").mkdir(parents=True)
    host_pub = _keygen(tmp_path / "nodes" / "n1" / "ssh_host_ed25519_key")
    client_pub = _keygen(tmp_path / "id")
    Path(layout.authorized_keys).write_text(client_pub)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    cfg = tmp_path / "sshd_config"
    cfg.write_text(netns.sshd_config("n1", "127.0.0.1", layout).replace("Port 22\n", f"Port {port}\n"))
    Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
    proc = subprocess.Popen(["/usr/sbin/sshd", "-D", "-e", "-f", str(cfg)], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 20
        while time.time() < deadline:
            with socket.socket() as c:
                if c.connect_ex(("127.0.0.1", port)) == 0:
                    break
            assert proc.poll() is None, proc.stderr.read()
            time.sleep(0.1)
        yield {"port": port, "host_pub": host_pub, "key": tmp_path / "id", "dir": tmp_path}
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _ssh(login: NodeLogin, known: Path, *extra: str) -> subprocess.CompletedProcess:
    argv = (["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-i", login.key_file, "-o", "IdentitiesOnly=yes",
             "-p", str(login.port), "-o", "ControlMaster=no", "-o", "ControlPath=none", *extra]
            + shlex.split(ssh_common_args(login, str(known))) + [f"{login.user}@{login.host}", "echo pinned-ok"])
    return subprocess.run(argv, capture_output=True, text=True, timeout=60)


@pytest.mark.netns
def test_pinned_host_key_is_enforced_by_ssh(real_sshd):
    d = real_sshd["dir"]
    right = NodeLogin("n1", "127.0.0.1", port=real_sshd["port"], key_file=str(real_sshd["key"]),
                      extra={"host_key": real_sshd["host_pub"]})
    wrong = NodeLogin("n1", "127.0.0.1", port=real_sshd["port"], key_file=str(real_sshd["key"]),
                      extra={"host_key": _keygen(d / "other_host_key")})
    known = d / "known_hosts"
    write_known_hosts({"n1": right}, known)
    r = _ssh(right, known)
    assert r.returncode == 0 and r.stdout.strip() == "pinned-ok", r.stderr
    write_known_hosts({"n1": wrong}, known)
    r = _ssh(wrong, known)
    assert r.returncode == 255 and "pinned-ok" not in r.stdout
    assert "REMOTE HOST IDENTIFICATION HAS CHANGED" in r.stderr or "Host key verification failed" in r.stderr
    known.write_text("")  # an unknown host is refused too (no accept-new)
    r = _ssh(right, known)
    assert r.returncode == 255 and "Host key verification failed" in r.stderr


@pytest.mark.netns
def test_node_sshd_offers_publickey_only(real_sshd):
    d = real_sshd["dir"]
    lg = NodeLogin("n1", "127.0.0.1", port=real_sshd["port"], key_file=str(d / "nokey"),
                   extra={"host_key": real_sshd["host_pub"]})
    _keygen(d / "nokey")  # a key the node does not accept
    known = d / "known_hosts"
    write_known_hosts({"n1": lg}, known)
    r = _ssh(lg, known, "-o", "PreferredAuthentications=keyboard-interactive,password,publickey")
    assert r.returncode == 255
    assert r.stderr.strip().splitlines()[-1].endswith("Permission denied (publickey).")


@pytest.mark.netns
def test_ansible_refuses_a_node_whose_host_key_changed(real_sshd, monkeypatch):
    """Through the real playbook runner: the pinned key lets Ansible in, another key does not."""
    d = real_sshd["dir"]
    (d / "playbooks").mkdir()
    (d / "playbooks" / "raw.yml").write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [
        {"ansible.builtin.raw": "echo raw-ok"}]}]))
    monkeypatch.setattr(ansible, "PLAYBOOKS", d / "playbooks")
    spec = load_spec("pie-vs-red")
    known = d / "known_hosts"

    def inventory(host_pub: str) -> Path:
        logins = {n: NodeLogin(n, "127.0.0.1", port=real_sshd["port"], key_file=str(real_sshd["key"]),
                               extra={"host_key": host_pub}) for n in spec.nodes}
        write_known_hosts(logins, known)
        # No multiplexing (ansible.cfg's ssh_args replaced): no master connection of another
        # run is reused, and none outlives the test.
        return write_inventory(build_inventory(spec, logins, "test", extra_vars={"ansible_ssh_args": "-o ControlMaster=no"},
                                               known_hosts=str(known)), d / "inv.yml")

    with pytest.raises(PlaybookError) as ei:
        run_playbook("raw", inventory(_keygen(d / "other_host_key")), {}, d / "a", limit="router", quiet=True)
    assert " on router; log: " in str(ei.value)
    log = Path(str(ei.value).rsplit("log: ", 1)[1]).read_text()
    assert "UNREACHABLE" in log and ("Host key verification failed" in log or "IDENTIFICATION HAS CHANGED" in log)
    res = run_playbook("raw", inventory(real_sshd["host_pub"]), {}, d / "a", limit="router", quiet=True)
    assert res.stats["ok"] == {"router": 1} and "changed: [router]" in res.log.read_text()


# --- the shell line that boots the machine ------------------------------------------------------
def test_boot_shell_line_quotes_every_word(tmp_path, monkeypatch):
    """A state folder under a path with a space, a quote and ``$(...)``: sh sees each word of
    the machine's argv and the log path as one literal word, and runs nothing it holds."""
    from netrepro.sites.local.proc import boot_shell_line

    monkeypatch.chdir(tmp_path)
    state = tmp_path / "my checkout" / "it's $(touch x); `touch y` \"q\" *" / ".state"
    state.mkdir(parents=True)
    argv = ["printf", "%s|", str(state / "vm-main.sh"), "init=" + str(state / "a b"), "-x;y"]
    log = state / "vm-console.log"
    line = boot_shell_line(argv, log)
    assert shlex.split(line) == [*argv, "<", "/dev/null", "2>&1", "|", "cat", ">>", str(log)]
    res = subprocess.run(["sh", "-c", line], capture_output=True, text=True, timeout=10)
    assert res.returncode == 0 and res.stdout == "" and res.stderr == ""
    assert log.read_text() == "|".join(argv[2:]) + "|"
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()
