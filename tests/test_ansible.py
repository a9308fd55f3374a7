"""Tests of netrepro/runner/ansible.py: playbooks run with a minimal environment, leave only their log,
and check host keys (no ``StrictHostKeyChecking=no`` ahead of the inventory's options).

Real ansible-playbook runs (through ansible-runner) against ``localhost`` with the local
connection, or against a closed port; no VM, namespace or daemon.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest
import yaml

from netrepro.runner import ansible
from netrepro.runner.ansible import PlaybookError, run_playbook
from netrepro.sites.inventory import build_inventory, write_inventory, write_known_hosts
from netrepro.sites.base import NodeLogin
from netrepro.experiment.spec import load_spec

SECRET = "fake-passphrase-7f3a9c1e"
TINY = [{"name": "tiny", "hosts": "all", "gather_facts": False, "tasks": [
    {"name": "what the playbook sees", "ansible.builtin.set_fact": {
        "seen_secret": "{{ lookup('env', 'NETREPRO_GENI_KEY_PASSPHRASE') }}",
        "seen_other": "{{ lookup('env', 'SOME_TOKEN') }}",
        "seen_host_key_checking": "{{ lookup('env', 'ANSIBLE_HOST_KEY_CHECKING') }}"}},
    {"name": "say hello", "ansible.builtin.debug": {"msg": "hello from the tiny playbook"}},
]}]


def _local_inventory(path: Path) -> Path:
    path.write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    return path


def _files_holding(root: Path, needle: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


@pytest.fixture
def playbooks(tmp_path, monkeypatch):
    """A playbooks folder with tiny.yml (and fails.yml), the secret in our environment."""
    d = tmp_path / "playbooks"
    d.mkdir()
    (d / "tiny.yml").write_text(yaml.safe_dump(TINY, sort_keys=False))
    (d / "ping.yml").write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [
        {"ansible.builtin.ping": {}}]}]))
    (d / "fails.yml").write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "stop here", "ansible.builtin.fail": {"msg": "failed on purpose"}}]}]))
    monkeypatch.setattr(ansible, "PLAYBOOKS", d)
    monkeypatch.setenv("NETREPRO_GENI_KEY_PASSPHRASE", SECRET)
    monkeypatch.setenv("SOME_TOKEN", SECRET + "-token")
    monkeypatch.setenv("ANSIBLE_HOST_KEY_CHECKING", "False")  # ours must win over the user's
    return d


def test_no_secret_reaches_the_disk_and_only_the_log_stays(tmp_path, playbooks):
    private = tmp_path / "state" / "ansible"
    res = run_playbook("tiny", _local_inventory(tmp_path / "inv.yml"), {"x": 1}, private, quiet=True)
    # the playbook ran, and saw neither secret; host key checking was on
    assert res.rc == 0 and res.stats["ok"] == {"localhost": 2}
    assert res.facts_set == {"localhost": {"seen_secret": "", "seen_other": "", "seen_host_key_checking": "True"}}
    # nothing of the run holds a secret: not the log, nor runner's command/env files (gone)
    assert _files_holding(tmp_path / "state", SECRET) == []
    left = sorted(p.relative_to(private).as_posix() for p in private.rglob("*") if p.is_file())
    assert left == [res.log.relative_to(private).as_posix()]
    assert res.log.parent == private / "logs" and res.log.name.endswith("-tiny.log")
    assert "hello from the tiny playbook" in res.log.read_text()
    assert res.log.stat().st_mode & 0o777 == 0o600
    assert not (private / "artifacts").exists() and not (private / "env").exists()


def test_runner_left_to_itself_writes_the_secret(tmp_path, playbooks):
    """The control for the test above: ansible-runner's defaults put the whole environment
    into artifacts/<ident>/command (so the check above can fail)."""
    import ansible_runner

    private = tmp_path / "plain"
    private.mkdir()
    r = ansible_runner.run(private_data_dir=str(private), playbook=str(playbooks / "tiny.yml"),
                           inventory=str(_local_inventory(tmp_path / "inv.yml")), quiet=True,
                           envvars={"ANSIBLE_CONFIG": str(ansible.REPO_ROOT / "ansible.cfg"),
                                    "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert r.rc == 0
    assert "command" in [p.name for p in _files_holding(private, SECRET)]


def test_failed_playbook_names_its_log(tmp_path, playbooks):
    private = tmp_path / "state" / "ansible"
    private.mkdir(parents=True)
    (private / "env").mkdir()  # left by an earlier version: removed too
    (private / "env" / "envvars").write_text(SECRET)
    with pytest.raises(PlaybookError) as ei:
        run_playbook("fails", _local_inventory(tmp_path / "inv.yml"), {}, private, quiet=True)
    msg = str(ei.value)
    assert msg.startswith("playbook fails.yml failed (rc 2) on localhost; log: ")
    log = Path(msg.rsplit("log: ", 1)[1])
    assert log.is_file() and "failed on purpose" in log.read_text()
    assert [p for p in private.rglob("*") if p.is_file()] == [log]


def test_logs_of_runs_in_the_same_second_are_all_kept(tmp_path, playbooks):
    private = tmp_path / "a"
    inv = _local_inventory(tmp_path / "inv.yml")
    logs = {run_playbook("tiny", inv, {}, private, quiet=True).log for _ in range(2)}
    assert len(logs) == 2 and all(p.is_file() for p in logs)


def test_environment_is_explicit(monkeypatch):
    monkeypatch.setenv("NETREPRO_GENI_KEY_PASSPHRASE", SECRET)
    monkeypatch.setenv("HOME", "/home/someone")
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    env = ansible.playbook_env("/venv/bin")
    assert SECRET not in env.values()
    assert set(env) <= set(ansible.PASSTHROUGH_ENV) | {
        "PATH", "ANSIBLE_CONFIG", "ANSIBLE_ROLES_PATH", "ANSIBLE_TIMEOUT", "ANSIBLE_FORCE_COLOR",
        "ANSIBLE_CACHE_PLUGIN_TIMEOUT", "ANSIBLE_HOST_KEY_CHECKING"}
    assert env["HOME"] == "/home/someone" and env["PATH"] == "/venv/bin:/usr/bin:/bin"
    assert env["ANSIBLE_HOST_KEY_CHECKING"] == "True"
    assert ansible.playbook_env("/usr/bin")["PATH"] == "/usr/bin:/bin"


# --- host key checking in the ssh argv Ansible runs ---------------------------------------------
def _closed_port() -> socket.socket:
    """A socket bound to a free port of 127.0.0.1 that does not listen (connections refused)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    return s


def _ssh_execs(log: Path) -> list[list[str]]:
    """argv of every ``SSH: EXEC ssh ...`` line Ansible logged at -vvv."""
    out = []
    for line in log.read_text().splitlines():
        if "SSH: EXEC " in line:
            out.append(shlex.split(line.split("SSH: EXEC ", 1)[1]))
    return out


def _options(argv: list[str]) -> list[tuple[str, str]]:
    """(option, value) of each ``-o K=V`` in an ssh argv, in order."""
    return [tuple(v.split("=", 1)) for o, v in zip(argv, argv[1:]) if o == "-o" and "=" in v]


def _first(argv: list[str], key: str) -> str | None:
    return next((v for k, v in _options(argv) if k.lower() == key.lower()), None)


@pytest.mark.parametrize("pinned", [True, False], ids=["pinned", "accept-new"])
def test_ansible_ssh_argv_checks_host_keys(tmp_path, playbooks, pinned):
    """The ssh command Ansible runs takes our StrictHostKeyChecking first (ssh keeps an option's
    first value), for the node and for the jump host in its ProxyCommand."""
    spec = load_spec("pie-vs-red")
    closed, jump_closed = _closed_port(), _closed_port()
    try:
        port, jport = closed.getsockname()[1], jump_closed.getsockname()[1]
        key = tmp_path / "id"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
        pub = key.with_suffix(".pub").read_text()
        extra = {"host_key": pub, "jump_host_key": pub} if pinned else {}
        logins = {n: NodeLogin(n, "127.0.0.1", port=port, key_file=str(key), proxy_jump=f"root@127.0.0.1:{jport}",
                               extra=dict(extra)) for n in spec.nodes}
        known = tmp_path / "known_hosts"
        assert write_known_hosts(logins, known) is pinned
        inv = write_inventory(build_inventory(spec, logins, "test", known_hosts=str(known)), tmp_path / "inv.yml")
        with pytest.raises(PlaybookError) as ei:
            run_playbook("ping", inv, {}, tmp_path / "a", limit="router", quiet=True, verbosity=3)
    finally:
        closed.close()
        jump_closed.close()
    assert " on router; log: " in str(ei.value)
    execs = _ssh_execs(Path(str(ei.value).rsplit("log: ", 1)[1]))
    assert execs, "no SSH: EXEC line in the log"
    want = "yes" if pinned else "accept-new"
    for argv in execs:
        assert "StrictHostKeyChecking=no" not in argv
        assert _first(argv, "StrictHostKeyChecking") == want
        assert _first(argv, "UserKnownHostsFile") == str(known)
        inner = shlex.split(_first(argv, "ProxyCommand"))
        assert _first(inner, "StrictHostKeyChecking") == want and _first(inner, "UserKnownHostsFile") == str(known)
        if pinned:
            assert _first(argv, "GlobalKnownHostsFile") == "/dev/null"
    if pinned:
        key_text = " ".join(pub.split()[:2])
        assert sorted(known.read_text().splitlines()) == sorted([f"[127.0.0.1]:{jport} {key_text}",
                                                                 f"[127.0.0.1]:{port} {key_text}"])


def test_the_log_ends_with_the_wall_time_of_each_task(tmp_path, playbooks):
    (playbooks / "pause.yml").write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "quick", "ansible.builtin.debug": {"msg": "x"}},
        {"name": "sleepy", "ansible.builtin.command": {"cmd": "sleep 1.5"}, "changed_when": False}]}]))
    res = run_playbook("pause", _local_inventory(tmp_path / "inv.yml"), {}, tmp_path / "a", quiet=True)
    table = res.log.read_text().split("WALL TIME BY TASK (s)\n", 1)[1].splitlines()
    rows = [(line[10:], float(line[:8])) for line in table]
    assert [what for what, _ in rows] == ["(startup)", "quick", "sleepy"]
    assert 1.5 <= rows[2][1] < 10 and rows[1][1] < 1.5
    assert sum(secs for _, secs in rows) <= res.seconds + 0.05


def test_task_times_from_events():
    t0 = 1_000_000.0
    at = lambda s: datetime.fromtimestamp(t0 + s, timezone.utc).isoformat()  # noqa: E731
    events = [{"event": "playbook_on_start", "created": at(0.1)},
              {"event": "playbook_on_task_start", "created": at(2), "event_data": {"task": "a"}},
              {"event": "runner_on_ok", "created": at(3)},
              {"event": "playbook_on_task_start", "created": at(5.5), "event_data": {"task": "b"}},
              {"event": "playbook_on_stats", "created": at(6)}]
    assert ansible.task_times(events, t0) == [("(startup)", 2.0), ("a", 3.5), ("b", 0.5)]
    assert ansible.task_times([], t0) == []


# --- extra vars are data, never templates -------------------------------------------------------
def test_extra_vars_are_never_rendered(tmp_path, playbooks):
    """A value from an experiment file that holds Jinja (here a ``pipe`` lookup that would
    create a marker file on the controller) reaches the playbook's tasks as literal text, as a
    value, a key and a list item, through the expressions the roles use (roles/tcp_settings'
    command line, a conditional, a loop, ``| int``, a module argument)."""
    import shutil

    shutil.copy(Path(__file__).parent / "data" / "playbooks" / "extravars.yml", playbooks / "extravars.yml")
    marker = tmp_path / "marker"
    evil = "{{ lookup('pipe', 'touch %s') }}" % shlex.quote(str(marker))
    evil_key = "net.{{ lookup('pipe', 'touch %s') }}" % shlex.quote(str(marker) + "-key")
    extravars = {"netrepro": {
        "node": "localhost",
        "count": "41",
        "sysctls": {"localhost": {"net.ipv4.tcp_congestion_control": evil, evil_key: "1"}},
        "words": ["plain", evil, "skip", "{% raw %}x{% endraw %}"],
    }}
    private = tmp_path / "state" / "ansible"
    res = run_playbook("extravars", _local_inventory(tmp_path / "inv.yml"), extravars, private, quiet=True)
    assert list(tmp_path.glob("marker*")) == []
    seen = res.facts_set["localhost"]
    assert seen["seen_value"] == evil and seen["seen_stdout"] == evil
    assert seen["seen_keys"] == ["net.ipv4.tcp_congestion_control", evil_key]
    assert seen["seen_line"] == " ".join(shlex.quote(f"{k}={v}") for k, v in
                                         extravars["netrepro"]["sysctls"]["localhost"].items()) + " "
    assert int(seen["seen_count"]) == 42
    assert seen["seen_items"] == ["plain", evil, "{% raw %}x{% endraw %}"]
    # the file that carried them is gone with runner's others
    assert [p for p in private.rglob("*") if p.is_file()] == [res.log]


# A network namespace of the test's own (unshare -rn: no root needed where user namespaces are
# allowed), where the probe makes its veth pair; `make test` runs it with the netns tests.
@pytest.mark.netns
def test_probe_words_reach_tc_whole(tmp_path):
    """roles/kernel_capability's probe task, run by run_playbook against localhost in a network
    namespace of its own: each word of a probe's argv reaches tc (or the congestion control
    check) as one argument, whatever it holds: spaces, ``:``, ``-b FILE``, ``;``, ``$(...)``."""
    marker = tmp_path / "marker"
    batch = tmp_path / "batch"
    batch.write_text("qdisc add dev nrprobe0 root pfifo limit 7\n")
    evil = f"y:-b {batch};$(touch {marker})"
    probes = {
        "good": ["qdisc", "add", "dev", "@dev@", "root", "pfifo", "limit", "10"],
        "limit": ["qdisc", "add", "dev", "@dev@", "root", "pfifo", "limit", f"10 -b {batch}"],
        f"tcp_{evil}": ["tcp_congestion", evil],
        f"x:-b {batch}": ["qdisc", "add", "dev", "@dev@", "root", "pfifo", "limit", "11"],
    }
    code = (
        "import json, sys\nfrom pathlib import Path\nfrom netrepro.runner import ansible\n"
        "ansible.PLAYBOOKS = Path(sys.argv[1])\n"
        "res = ansible.run_playbook('probe', Path(sys.argv[2]), json.loads(sys.argv[3]), Path(sys.argv[4]), quiet=True)\n"
        "print(json.dumps(res.facts_set['localhost']['kernel_capability_result']))\n")
    inv = _local_inventory(tmp_path / "inv.yml")
    out = subprocess.run(["unshare", "-rn", sys.executable, "-c", code, str(Path(__file__).parent / "data" / "playbooks"),
                          str(inv), json.dumps({"netrepro": {"probes": probes}}), str(tmp_path / "a")],
                         capture_output=True, text=True, timeout=300, cwd=Path(__file__).parent.parent)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])["probes"]
    assert not marker.exists()
    assert sorted(result) == sorted(probes)
    assert result["good"] == {"ok": True, "error": ""} and result[f"x:-b {batch}"]["ok"] is True
    # "10 -b FILE" is one word: tc cannot read it as a limit (split, it would say 'What is "-b"?')
    assert result["limit"]["ok"] is False and '"-b"' not in result["limit"]["error"]
    assert result[f"tcp_{evil}"] == {"ok": False, "error": result[f"tcp_{evil}"]["error"]}
    assert result[f"tcp_{evil}"]["error"].startswith(f"no TCP congestion control {evil} (available: ")


def test_extra_vars_keep_their_types(tmp_path, playbooks):
    """Strings YAML 1.1 would read as other types (an HTB class id ``1:10`` is the sexagesimal
    70, ``yes`` a bool, ``0x10`` an int) reach the playbook as the strings they are, numbers and
    booleans as themselves: a ``!unsafe`` tag on each string re-resolved its type (the class
    1:10 became 1:70 on the node)."""
    given = {"classid": "1:10", "word": "yes", "hexa": "0x10", "n": 3, "f": 1.5, "b": True,
             "nested": {"argv": ["parent", "1:10", "no"]}}
    (playbooks / "types.yml").write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [
        {"name": "record what arrived", "ansible.builtin.set_fact": {
            "seen": "{{ {'classid': classid, 'word': word, 'hexa': hexa, 'n': n, 'f': f, 'b': b, 'nested': nested} }}",
            "kinds": "{{ [classid is string, word is string, hexa is string, n is number, b is boolean] }}"}}]}]))
    res = run_playbook("types", _local_inventory(tmp_path / "inv.yml"), given, tmp_path / "a", quiet=True)
    facts = res.facts_set["localhost"]
    assert facts["seen"] == given
    assert facts["kinds"] == [True, True, True, True, True]
