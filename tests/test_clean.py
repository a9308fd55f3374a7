"""`netrepro clean` removes only what netrepro made (the state folders holding the marker it
writes when it creates one, and the inventories it generated), never the state of a live
testbed reservation (without it, `make down` could not release the slice), and never anything
else: pointed at a folder shaped like a home directory it removes nothing (issue 20)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

from netrepro.runner.clean import clean
from netrepro.sites.inventory import write_inventory
from netrepro.sites import get_site
from netrepro.sites.base import STATE_MARKER, make_state_dir, state_dir_owner
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
    assert state_dir_owner(ours) == ("pie-vs-red", "ns3")
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
