"""A node's answer that is not what a role parses fails with one line naming the node, the
command and what came back (issue 20, the intermittent provisioning failure).

roles/interfaces reads ``ip -j addr show`` with ansible.builtin.raw. Its output used to reach
``from_json`` unchecked, so an empty or garbled answer failed as "Expecting value: line 1
column 1 (char 0)" inside an unrelated task. Here the real role runs on this host
(``ansible_connection=local``) through netrepro.runner.ansible.run_playbook, with an ``ip`` on PATH
that answers as a node might; no namespace, VM or daemon.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import yaml

from netrepro.runner import ansible
from netrepro.runner.ansible import PlaybookError, run_playbook

GOOD = [{"ifindex": 2, "ifname": "eth1", "flags": ["BROADCAST", "UP", "LOWER_UP"],
         "addr_info": [{"family": "inet", "local": "10.9.9.9", "prefixlen": 24}]}]


@pytest.fixture
def node(tmp_path, monkeypatch):
    """(inventory, fake ip's folder): a playbook running roles/interfaces on localhost,
    expecting 10.9.9.9/24 on network ``lan``."""
    books = tmp_path / "playbooks"
    books.mkdir()
    (books / "interfaces.yml").write_text(yaml.safe_dump([{
        "hosts": "all", "gather_facts": False,
        "roles": [{"role": "interfaces", "interfaces_addresses": {"lan": "10.9.9.9"},
                   "interfaces_prefixlen": {"lan": 24}, "interfaces_unaddressed": []}]}]))
    monkeypatch.setattr(ansible, "PLAYBOOKS", books)
    inv = tmp_path / "inv.yml"
    inv.write_text(yaml.safe_dump({"all": {"hosts": {"nodeA": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", f"{bindir}:{__import__('os').environ['PATH']}")
    return inv, bindir


def _fake_ip(bindir: Path, output: str) -> None:
    f = bindir / "ip"
    f.write_text("#!/bin/sh\ncat <<'EOF'\n" + output + "\nEOF\n")
    f.chmod(0o755)


#: What root's login shell printed before a node's answer on a machine of the CI's kind
#: (~/.bashrc runs ``pyenv init``; seven nodes rehashing at once), recorded from a failed run.
SHELL_NOISE = ("rm: cannot remove '/root/.pyenv/shims/tmp.PoOen7joa0': No such file or directory\r\n"
               "pyenv: cannot rehash: /root/.pyenv/shims isn't writable\r\n")


@pytest.mark.parametrize("before", ["", SHELL_NOISE])
def test_a_node_that_lists_its_interfaces_is_mapped(node, tmp_path, before):
    inv, bindir = node
    _fake_ip(bindir, before + json.dumps(GOOD))
    res = run_playbook("interfaces", inv, {}, tmp_path / "art", quiet=True)
    assert res.facts_set["nodeA"]["interfaces_by_network"] == {"lan": "eth1"}


@pytest.mark.parametrize("answer", ["", SHELL_NOISE, SHELL_NOISE + json.dumps(GOOD)[:40]])
def test_an_unusable_answer_names_the_node_the_command_and_what_came_back(node, tmp_path, answer):
    inv, bindir = node
    _fake_ip(bindir, answer)
    with pytest.raises(PlaybookError) as exc:
        run_playbook("interfaces", inv, {}, tmp_path / "art", quiet=True)
    log = exc.value.log.read_text()
    assert "nodeA: `ip -j addr show` exited 0 and printed" in log
    assert answer.strip()[:30].replace('"', '\\"') in log
    assert "expected a JSON list of interfaces" in log
    assert "Expecting value" not in log


@pytest.mark.parametrize("answer", ["", SHELL_NOISE, SHELL_NOISE + '{"kernel": "x", "probes":'])
def test_an_unusable_probe_answer_names_the_node_and_what_came_back(node, tmp_path, monkeypatch, answer):
    """roles/kernel_capability's probe (tests/data/playbooks/probe.yml runs its task file) with
    an ``sh`` on PATH that answers as a node might instead of running probe.sh."""
    inv, bindir = node
    monkeypatch.setattr(ansible, "PLAYBOOKS", Path(__file__).parent / "data" / "playbooks")
    _fake_sh(bindir, answer)
    with pytest.raises(PlaybookError) as exc:
        run_playbook("probe", inv, {"netrepro": {"probes": {}}}, tmp_path / "art", quiet=True)
    log = exc.value.log.read_text()
    assert "nodeA: the qdisc probe (roles/kernel_capability/files/probe.sh) exited 0 and printed" in log
    assert "expected one JSON object" in log and "Expecting value" not in log


def _fake_sh(bindir: Path, answer: str) -> None:
    fake = bindir / "sh"
    fake.write_text("#!/bin/sh\ncat <<'EOF'\n" + answer + "\nEOF\n")
    fake.chmod(0o755)


def test_the_login_shells_lines_before_the_probes_answer_are_ignored(node, tmp_path, monkeypatch):
    inv, bindir = node
    monkeypatch.setattr(ansible, "PLAYBOOKS", Path(__file__).parent / "data" / "playbooks")
    answer = {"kernel": "6.1.0", "iproute2": "6.1.0", "os_id": "debian",
              "probes": {"pie": {"ok": True, "error": ""}, "cake": {"ok": False, "error": "unknown"}}}
    _fake_sh(bindir, SHELL_NOISE + json.dumps(answer))
    res = run_playbook("probe", inv, {"netrepro": {"probes": {}}}, tmp_path / "art", quiet=True)
    facts = res.facts_set["nodeA"]
    assert facts["kernel_capability_result"] == answer
    assert facts["kernel_capability_missing"] == ["cake"]


def test_packages_names_only_the_missing_programs(node, tmp_path, monkeypatch):
    """roles/packages lists the programs its loop reports missing, nothing else it read."""
    inv, _ = node
    books = tmp_path / "playbooks"
    (books / "packages.yml").write_text(yaml.safe_dump([{
        "hosts": "all", "gather_facts": False,
        "roles": [{"role": "packages", "packages_install": False,
                   "packages_commands": ["sh", "netrepro-no-such-program", "ls"]}]}]))
    with pytest.raises(PlaybookError) as exc:
        run_playbook("packages", inv, {}, tmp_path / "art", quiet=True)
    assert "nodeA: missing programs: netrepro-no-such-program." in exc.value.log.read_text()
