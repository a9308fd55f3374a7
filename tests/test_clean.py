"""`netrepro clean` removes only what netrepro made (the state folders holding the marker it
writes when it creates one, and the inventories it generated), never the state of a live
testbed reservation (without it, `make down` could not release the slice), and never anything
else: pointed at a folder shaped like a home directory it removes nothing (issue 20); in a
state folder of its own it removes only the entries the site declares it writes there, and
keeps and names anything a user put there (issue 38). The declarations are checked against
the state each site's own code writes: ns3, static (with the runner's known_hosts, playbook
log and fact cache), instageni against a fake aggregate, and local in vm mode with a fake
machine (its scripts' every path into the folder)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Callable

import yaml

from netrepro.runner.clean import clean, foreign_entries
from netrepro.sites.inventory import write_inventory
from netrepro.sites import SITES, get_site, site_class
from netrepro.sites.base import Site
from netrepro.sites.statefolder import STATE_MARKER, make_state_dir, state_dir_owner
from netrepro.experiment.spec import load_spec

REPO = Path(__file__).resolve().parent.parent


def _digest(root: Path) -> dict[str, str]:
    """Path -> sha256, link target or "dir" of everything under ``root`` (links not followed)."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_symlink():
            out[p.relative_to(root).as_posix()] = "link:" + os.readlink(p)
        elif p.is_file():
            out[p.relative_to(root).as_posix()] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            out[p.relative_to(root).as_posix()] = "dir"
    return out


def _made_by_netrepro(state: Path, site: str, data: dict | None = None) -> Path:
    """A state folder made through the code that makes them (Site.save_state), with ``data``
    as its state.json, or none (the state ``release`` leaves of a released reservation)."""
    s = get_site(site, load_spec("pie-vs-red"), state / f"pie-vs-red-{site}", {})
    s.save_state(data or {})
    if data is None:
        s.state_file.unlink()
    return s.state_dir


def _home(root: Path) -> None:
    """A folder shaped like a home directory, with folders named like netrepro's state folders."""
    (root / ".ssh").mkdir(parents=True)
    (root / ".ssh" / "id_rsa").write_text("-----BEGIN OPENSSH PRIVATE KEY-----\nsecret\n")
    (root / "Documents").mkdir()
    (root / "Documents" / "a.txt").write_text("my notes\n")
    (root / "projects" / "x-local").mkdir(parents=True)
    (root / "projects" / "x-local" / "state.json").write_text('{"mode": "host"}\n')
    # named like a state folder of the local site, up, in host mode: an earlier clean would have
    # run its teardown.sh (through `down`) and then removed it
    legacy = root / "pie-vs-red-local"
    legacy.mkdir()
    (legacy / "state.json").write_text(json.dumps({"site": "local", "experiment": "pie-vs-red", "mode": "host"}))
    (legacy / "teardown.sh").write_text(f"touch {root / 'teardown-ran'}\n")
    (root / "notes-fabric").mkdir()  # named like a state folder, without a state.json
    (root / ".bashrc").write_text("export PS1='$ '\n")
    (root / "link-local").symlink_to(root / "Documents")


def test_clean_on_a_home_like_folder_removes_nothing_but_what_netrepro_made(tmp_path):
    home = tmp_path / "home"
    _home(home)
    ours = _made_by_netrepro(home, "ns3")
    assert state_dir_owner(ours) == ("pie-vs-red", "ns3", 1)
    before = {k: v for k, v in _digest(home).items() if not k.startswith(ours.name)}
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETREPRO_")}
    r = subprocess.run([sys.executable, "-m", "netrepro", "clean"], cwd=REPO, env={**env, "NETREPRO_STATE": str(home)},
                       capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert _digest(home) == before  # nothing of the home folder removed or changed, no teardown run
    assert not ours.exists()  # what netrepro made is gone
    assert f"[clean] removed {ours}" in r.stdout
    for name in (".ssh", "Documents", "projects", "pie-vs-red-local", "notes-fabric", ".bashrc", "link-local"):
        assert f"[clean] left {home / name}: " in r.stdout, (name, r.stdout)
    assert f"rm -r {home / 'pie-vs-red-local'}" in r.stdout and "make down SITE=local EXPERIMENT=pie-vs-red" in r.stdout
    assert r.returncode == 2, r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "7 entries left as they are" in err[0] and "Traceback" not in r.stderr, r.stderr


def test_clean_keeps_live_reservations_and_removes_the_rest(tmp_path):
    state, inv = tmp_path / "state", tmp_path / "inventory"
    # A slice still reserved on an aggregate (the shape instageni saves).
    held = _made_by_netrepro(state, "instageni", {"slice_name": "nr-abc", "aggregate": "emulab",
                                                  "logins": {"router": {"name": "router", "host": "pc1.emulab.net"}}})
    # A fabric reservation already released: only leftovers.
    fabric = _made_by_netrepro(state, "fabric")
    (fabric / "ssh").mkdir()
    # A simulation that is done, with an inventory netrepro generated and one a user wrote.
    ns3 = _made_by_netrepro(state, "ns3")
    write_inventory({"all": {}}, inv / "pie-vs-red-ns3.yml")
    write_inventory({"all": {}}, inv / "pie-vs-red-instageni.yml")
    (inv / "pie-vs-red-fabric.yml").write_text("# mine\nall: {}\n")
    lines: list[str] = []
    res = clean(state, inv, log=lines.append)
    assert res.kept == [held] and sorted(res.removed) == sorted([fabric, ns3]) and res.refused == []
    assert any("make down SITE=instageni EXPERIMENT=pie-vs-red" in ln for ln in lines)
    assert (held / "state.json").is_file() and (inv / "pie-vs-red-instageni.yml").is_file()
    assert not fabric.exists() and not ns3.exists()
    assert not (inv / "pie-vs-red-ns3.yml").exists()
    assert (inv / "pie-vs-red-fabric.yml").read_text() == "# mine\nall: {}\n"  # not generated: kept
    assert any(f"left {inv / 'pie-vs-red-fabric.yml'}" in ln for ln in lines)


def test_clean_keeps_a_folder_it_cannot_judge(tmp_path):
    """State of an experiment whose file is gone: only `down` may release it, so it stays."""
    state = tmp_path / "state"
    folder = make_state_dir(state / "gone-experiment-fabric", "gone-experiment", "fabric")
    (folder / "state.json").write_text(json.dumps({"slice_name": "x", "logins": {"a": {"name": "a", "host": "h"}}}))
    res = clean(state, tmp_path / "inv", log=lambda *_: None)
    assert res.kept == [folder] and (folder / "state.json").is_file()


def test_a_marker_proves_only_the_folder_it_was_written_into(tmp_path):
    """A marker copied into another folder, a symbolic link to a marked folder, or a marker
    that is a link: none is netrepro's own, so clean leaves them."""
    state = tmp_path / "state"
    ours = make_state_dir(state / "pie-vs-red-ns3", "pie-vs-red", "ns3")
    assert (ours / STATE_MARKER).is_file()
    copied = state / "other-ns3"
    copied.mkdir()
    (copied / STATE_MARKER).write_bytes((ours / STATE_MARKER).read_bytes())
    (copied / "keep.txt").write_text("x")
    linked = state / "link-ns3"
    linked.symlink_to(ours)
    marker_link = state / "pie-vs-red-fabric"
    marker_link.mkdir()
    (marker_link / STATE_MARKER).symlink_to(ours / STATE_MARKER)
    # a folder that already exists is not claimed by making it again
    mine = state / "pie-vs-red-local"
    mine.mkdir()
    make_state_dir(mine, "pie-vs-red", "local")
    assert not (mine / STATE_MARKER).exists()
    res = clean(state, tmp_path / "inv", log=lambda *_: None)
    assert res.removed == [ours]
    assert sorted(res.refused) == sorted([copied, linked, marker_link, mine])
    assert (copied / "keep.txt").is_file() and linked.is_symlink() and marker_link.is_dir() and mine.is_dir()


# --- inside a state folder netrepro made: only what the site declares it writes -----------------
def test_what_a_user_put_into_a_state_folder_is_kept_and_named(tmp_path):
    """A released fabric reservation's folder, with the user's notes, folder and a copy of a log
    beside what netrepro wrote: netrepro's entries go, the user's stay, each named with the
    command that removes it; the folder stays with its marker until they are gone."""
    state, inv = tmp_path / "the state", tmp_path / "inventory"
    folder = _made_by_netrepro(state, "fabric")
    (folder / "ssh").mkdir()
    (folder / "ssh" / "known_hosts").write_text("10.0.0.1 ssh-ed25519 AAAA\n")
    (folder / "ansible" / "logs").mkdir(parents=True)
    (folder / "ansible" / "logs" / "20260101T000000-provision.log").write_text("ok\n")
    (folder / "facts").mkdir()
    for name in ("fablib.log", "fablib.log.1", "fablib.log.5"):
        (folder / name).write_text("fablib\n")
    (folder / "notes.txt").write_text("my notes\n")
    (folder / "fablib.log.bak").write_text("my copy\n")  # named like fablib's, but not one of its
    (folder / "my analysis").mkdir()
    (folder / "my analysis" / "plot.py").write_text("print('mine')\n")
    write_inventory({"all": {}}, inv / "pie-vs-red-fabric.yml")
    lines: list[str] = []
    res = clean(state, inv, log=lines.append)
    mine = sorted([folder / "fablib.log.bak", folder / "my analysis", folder / "notes.txt"])
    assert res.foreign == mine and res.removed == [] and res.kept == [] and res.refused == []
    assert sorted(p.name for p in folder.iterdir()) == sorted([STATE_MARKER, "fablib.log.bak", "my analysis", "notes.txt"])
    assert (folder / "notes.txt").read_text() == "my notes\n" and (folder / "fablib.log.bak").read_text() == "my copy\n"
    assert (folder / "my analysis" / "plot.py").read_text() == "print('mine')\n"
    assert state_dir_owner(folder) == ("pie-vs-red", "fabric", 1)  # still netrepro's: a later clean finishes it
    for kept in mine:
        said = [ln for ln in lines if ln.startswith(f"[clean] left {kept}: ")]
        assert len(said) == 1 and "not something netrepro writes" in said[0], (kept, lines)
        assert said[0].endswith(f"remove it by hand: rm -r {shlex.quote(str(kept))}"), said[0]
    said = [ln for ln in lines if ln.startswith(f"[clean] left {folder}: ")]
    assert len(said) == 1 and "for the 3 entries above" in said[0] and said[0].endswith(f"rm -r {shlex.quote(str(folder))}")
    assert f"[clean] removed {folder}" not in lines
    assert not (inv / "pie-vs-red-fabric.yml").exists()  # generated from a state that is gone
    # once the user removed them, clean removes the folder
    shutil.rmtree(folder / "my analysis")
    (folder / "notes.txt").unlink()
    (folder / "fablib.log.bak").unlink()
    again = clean(state, inv, log=lines.append)
    assert again.removed == [folder] and again.foreign == [] and not folder.exists() and state.is_dir()


def test_a_declared_name_that_is_a_symbolic_link_is_removed_not_followed(tmp_path):
    state, elsewhere = tmp_path / "state", tmp_path / "elsewhere"
    (elsewhere / "keys").mkdir(parents=True)
    (elsewhere / "keys" / "id_ed25519").write_text("secret\n")
    (elsewhere / "state.json").write_text("{}\n")
    folder = _made_by_netrepro(state, "ns3")
    (folder / "ssh").symlink_to(elsewhere / "keys")
    (folder / "ansible").symlink_to(elsewhere / "state.json")
    res = clean(state, tmp_path / "inv", log=lambda *_: None)
    assert res.removed == [folder] and not folder.exists()
    assert (elsewhere / "keys" / "id_ed25519").read_text() == "secret\n" and (elsewhere / "state.json").is_file()


def test_the_command_says_what_it_kept_on_stderr_and_exits_2(tmp_path):
    folder = _made_by_netrepro(tmp_path / "state", "ns3")
    (folder / "mine.txt").write_text("x\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETREPRO_")}
    r = subprocess.run([sys.executable, "-m", "netrepro", "clean"], cwd=REPO, capture_output=True, text=True,
                       env={**env, "NETREPRO_STATE": str(tmp_path / "state")}, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and (folder / "mine.txt").is_file() and not (folder / "state.json").exists()
    assert f"[clean] left {folder / 'mine.txt'}: " in r.stdout and f"[clean] left {folder}: " in r.stdout
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and "1 entry of netrepro's state folders kept" in err[0], r.stderr



def test_a_corrupt_state_file_keeps_its_folder_whole_and_is_named_on_one_line(tmp_path):
    """A state.json that is not JSON, or not a JSON object: its folder is kept whole (whether it
    holds a reservation cannot be told) before its site is asked anything, the other folders
    are cleaned, and the command says on one line of stderr which file and what was expected."""
    state = tmp_path / "state"
    junk = _made_by_netrepro(state, "fabric", {"slice_name": "x"})
    (junk / "state.json").write_text("{not json")
    listed = _made_by_netrepro(state, "instageni", {"slice_name": "y"})
    (listed / "state.json").write_text("[1, 2]\n")
    done = _made_by_netrepro(state, "ns3")  # sorted after both: cleaned all the same
    lines: list[str] = []
    res = clean(state, tmp_path / "inventory", log=lines.append)
    assert sorted(res.unreadable) == [junk, listed] and res.removed == [done] and not done.exists()
    assert "(top level): expected a JSON object" in res.unreadable[listed]
    assert res.unreadable_line().startswith(f"2 state files unreadable ({junk / 'state.json'}, {listed / 'state.json'}; ")
    assert (junk / "state.json").read_text() == "{not json" and (listed / "state.json").read_text() == "[1, 2]\n"
    assert any(ln.startswith(f"[clean] kept {junk}: nothing in it removed: {junk / 'state.json'}: ") for ln in lines)
    (listed / "state.json").write_text("{}\n")  # one left: the command names it
    before = _digest(state)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETREPRO_")}
    r = subprocess.run([sys.executable, "-m", "netrepro", "clean"], cwd=REPO, capture_output=True, text=True,
                       env={**env, "NETREPRO_STATE": str(state)}, timeout=120, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    err = r.stderr.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"netrepro: {junk / 'state.json'}: (file): unreadable run state"), r.stderr
    assert "expected the JSON netrepro wrote" in err[0] and f"clean removed nothing of {junk}" in err[0]
    assert {k: v for k, v in _digest(state).items() if k.startswith(junk.name)} == \
        {k: v for k, v in before.items() if k.startswith(junk.name)}

def test_every_site_declares_what_every_site_writes():
    """A site adds to Site's entries, never drops one (its state.json would be kept as a user's)."""
    assert {STATE_MARKER, "state.json", "ssh", "ansible", "facts"} <= set(Site.STATE_ENTRIES)
    for name in SITES:
        assert set(Site.STATE_ENTRIES) <= set(site_class(name).STATE_ENTRIES), name


def _cleaned_whole(state: Path, folder: Path, tmp_path: Path) -> None:
    """clean removes ``folder`` whole, with nothing kept and nothing refused."""
    res = clean(state, tmp_path / "inventory", log=lambda *_: None)
    assert (res.removed, res.foreign, res.refused, res.kept) == ([folder], [], [], []), res
    assert not folder.exists()


def test_the_ns3_sites_state_is_all_declared(tmp_path, monkeypatch):
    """ns3 up and provision through the runner, as `make up provision SITE=ns3` makes them,
    then down (clean keeps the state of a site that is up and not its to tear down)."""
    from netrepro.runner import steps
    monkeypatch.setattr(steps, "STATE_ROOT", tmp_path / "state")
    spec = load_spec("pie-vs-red")
    steps.up(spec, "ns3")
    steps.provision(spec, "ns3")
    folder = steps.state_dir(spec, "ns3")
    assert {STATE_MARKER, "state.json"} <= {p.name for p in folder.iterdir()}
    assert foreign_entries(folder, site_class("ns3")) == []
    steps.down(spec, "ns3")
    _cleaned_whole(tmp_path / "state", folder, tmp_path)


def _static_answers(spec) -> tuple[dict, Callable]:
    """A nodes file's data for pie-vs-red's machines at 192.0.2.10-16, and a runner answering
    for them as they would (``true``, and ``ip -j addr`` with the experiment's addresses)."""
    nodes, answers = {}, {}
    for i, (node, nd) in enumerate(spec.nodes.items()):
        host = f"192.0.2.{10 + i}"
        addrs = [x.address.partition("/") for x in nd.interfaces.values()]
        nodes[node] = {"host": host, "addresses": {x.network: x.ip for x in nd.interfaces.values()}}
        answers[host] = json.dumps([{"ifname": f"eth{j}", "addr_info": [{"family": "inet", "local": a, "prefixlen": int(p)}]}
                                    for j, (a, _, p) in enumerate(addrs, 1)])

    def runner(argv, timeout):
        return 0, "" if argv[-1] == "true" else answers[argv[-2].partition("@")[2]], ""

    return {"nodes": nodes}, runner


def test_the_static_sites_state_with_the_runners_is_all_declared(tmp_path, monkeypatch):
    """A static site reserved and waited for, its inventory written by the runner (with ssh/,
    the known_hosts folder), and a playbook run through the runner (its log in ansible/, a
    cached fact in facts/)."""
    from netrepro.runner import ansible, steps
    from netrepro.runner.playbooks import playbook_path
    from netrepro.sites import inventory

    for mod, attr, value in ((steps, "STATE_ROOT", tmp_path / "state"), (steps, "INVENTORY_DIR", tmp_path / "inventory"),
                             (inventory, "CONTROL_ROOT", tmp_path / "cp"), (ansible, "PLAYBOOKS", tmp_path / "playbooks")):
        monkeypatch.setattr(mod, attr, value)
    spec = load_spec("pie-vs-red")
    data, runner = _static_answers(spec)
    (tmp_path / "nodes.yml").write_text(yaml.safe_dump(data))
    site = steps.open_site(spec, "static", {"static_file": str(tmp_path / "nodes.yml"), "runner": runner})
    site.reserve()
    site.wait_ready(timeout_s=10)
    steps.write_site_inventory(spec, site)
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "cache.yml").write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "tasks": [
        {"ansible.builtin.set_fact": {"seen": "yes", "cacheable": True}}]}]))
    (tmp_path / "local.yml").write_text(yaml.safe_dump({"all": {"hosts": {"localhost": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}}))
    playbook_path("cache", tmp_path / "local.yml", {"x": 1}, site, quiet=True)
    folder = site.state_dir
    assert {STATE_MARKER, "state.json", "ssh", "ansible", "facts"} <= {p.name for p in folder.iterdir()}
    assert any((folder / "ansible" / "logs").iterdir()) and any((folder / "facts").iterdir())
    assert foreign_entries(folder, site_class("static")) == []
    site.release()
    _cleaned_whole(tmp_path / "state", folder, tmp_path)


def test_the_instageni_sites_state_is_all_declared(tmp_path, monkeypatch):
    """A slice reserved and waited for at a fake aggregate (test_sites_common's): state.json
    and the manifest."""
    import test_manifest
    from test_sites_common import MANIFEST, FakeGeni, geni_env

    spec = load_spec("pie-vs-red")
    manifest = test_manifest.seven_node_manifest(MANIFEST, spec, tmp_path / "m.xml").read_text()
    ready = {"geni_slivers": [{"geni_operational_status": "geni_ready"}] * 7}
    monkeypatch.setattr("time.sleep", lambda s: None)
    opts = {"env": geni_env(tmp_path), "client": FakeGeni(manifest, [ready]), "aggregate": "cl-utah", "user": "ingino"}
    site = get_site("instageni", spec, tmp_path / "state" / "pie-vs-red-instageni", opts)
    site.reserve()
    site.wait_ready(timeout_s=600, interval_s=1)
    folder = site.state_dir
    assert {STATE_MARKER, "state.json", "manifest.xml"} <= {p.name for p in folder.iterdir()}
    assert foreign_entries(folder, site_class("instageni")) == []
    site.release()
    _cleaned_whole(tmp_path / "state", folder, tmp_path)


def _paths_into(folder: Path, text: str) -> set[str]:
    """The names of the entries of ``folder`` that ``text`` (a script or configuration netrepro
    wrote) names: ``<folder>/<name>...``; and ``capacity.json.<x>`` for each ``$OUT.<x>`` of
    the forwarding test's script (its ``OUT`` is the result file in the folder)."""
    names = set(re.findall(re.escape(str(folder)) + r"/([A-Za-z0-9_.+@~-]+)", text))  # the local site's SAFE_PATH
    if re.search(r"^OUT=" + re.escape(str(folder)) + "/capacity.json$", text, re.M):
        names |= {"capacity.json" + x for x in re.findall(r"\$OUT(\.[A-Za-z0-9]+)", text)}
    return names


def test_the_local_sites_state_is_all_declared(tmp_path, monkeypatch):
    """The local site reserved in vm mode by its own code, with a fake machine in place of the
    micro-VM (it says ready, as the guest does, and exits); then every path into the folder that
    its scripts and configuration name (what the guest, the build and the forwarding test
    write there), the UML machine's init too, is declared; clean tears it down and removes it.
    (Host mode builds on the host, as root, and is not run: its nodes' runtime folder run/ is
    declared from the code.)"""
    from netrepro.runner import steps
    from netrepro.sites.local import capacity, microvm, uml
    from netrepro.sites.local.site import LocalSite

    monkeypatch.setattr(steps, "STATE_ROOT", tmp_path / "state")
    monkeypatch.setattr(steps, "INVENTORY_DIR", tmp_path / "inventory")
    monkeypatch.setattr(os, "geteuid", lambda: 0)  # nothing here needs root: no namespace is made
    monkeypatch.setattr(microvm, "cached_kernel", lambda: microvm.Kernel(tmp_path / "vmlinuz", "6.1.0-test", tmp_path))
    monkeypatch.setattr(microvm, "kvm_usable", lambda: (False, "no KVM in this test"))
    monkeypatch.setattr(microvm, "vng_command", lambda kernel, *, rwdir, **kw: [
        "sh", "-c", f"echo fake machine booted; echo ready > {shlex.quote(str(rwdir / 'vm-ready'))}"])
    spec = load_spec("pie-vs-red")
    site = steps.open_site(spec, "local", {"mode": "vm"})
    site.reserve(log=lambda *_: None)
    folder = site.state_dir
    made = {p.name for p in folder.iterdir()}
    assert {STATE_MARKER, "state.json", "ssh", "nodes", "build.sh", "teardown.sh", "vm-main.sh", "jump_sshd_config",
            capacity.SCRIPT_FILE, "vm-console.log", "vm-ready"} <= made, made
    assert foreign_entries(folder, LocalSite) == []
    written = [*folder.iterdir(), *folder.glob("nodes/*/*")]
    texts = [p.read_text() for p in written if p.is_file() and not p.name.startswith("ssh_host")]
    texts.append(uml.guest_init_script(state_dir=folder, runtime_dir="/run/netrepro", build_script=folder / "build.sh",
                                       mgmt_bridge="nr-mgmt", modules=tmp_path / "modules" / "6.1.0-test",
                                       capacity_script=folder / capacity.SCRIPT_FILE))
    named = set().union(*(_paths_into(folder, t) for t in texts))
    assert {"vm-guest.log", "vm-ready", "build.sh", "nodes", "ssh", "capacity.json.err", "capacity.json.tmp"} <= named, named
    probe = tmp_path / "probe"  # one empty file of each name: foreign_entries judges names
    probe.mkdir()
    for name in named:
        (probe / name).touch()
    assert foreign_entries(probe, LocalSite) == []
    _cleaned_whole(tmp_path / "state", folder, tmp_path)
