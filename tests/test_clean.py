"""`netrepro clean` removes generated state but never the state of a live testbed reservation
(without it, `make down` could not release the slice)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _state(folder: Path, data: dict) -> None:
    folder.mkdir(parents=True)
    (folder / "state.json").write_text(json.dumps(data))


def test_clean_keeps_live_reservations_and_removes_the_rest(tmp_path):
    state, inv = tmp_path / "state", tmp_path / "inventory"
    inv.mkdir()
    # A slice still reserved on an aggregate (the shape instageni saves).
    _state(state / "pie-vs-red-instageni", {"slice_name": "nr-abc", "aggregate": "emulab",
                                            "logins": {"router": {"name": "router", "host": "pc1.emulab.net"}}})
    # A fabric reservation already released: only leftovers.
    (state / "pie-vs-red-fabric").mkdir(parents=True)
    (state / "pie-vs-red-fabric" / "ssh").mkdir()
    # A local site that is down (no state.json) with its inventory.
    (state / "pie-vs-red-local" / "ansible").mkdir(parents=True)
    (inv / "pie-vs-red-local.yml").write_text("all: {}\n")
    (inv / "pie-vs-red-instageni.yml").write_text("all: {}\n")
    env = dict(os.environ, NETREPRO_STATE=str(state))
    r = subprocess.run([sys.executable, "-c",
                        "import sys; from pathlib import Path; from netrepro.clean import clean; "
                        f"kept = clean(Path({str(state)!r}), Path({str(inv)!r})); print([k.name for k in kept])"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "['pie-vs-red-instageni']"
    assert "make down SITE=instageni EXPERIMENT=pie-vs-red" in r.stdout
    assert (state / "pie-vs-red-instageni" / "state.json").is_file()
    assert (inv / "pie-vs-red-instageni.yml").is_file()
    assert not (state / "pie-vs-red-fabric").exists()
    assert not (state / "pie-vs-red-local").exists()
    assert not (inv / "pie-vs-red-local.yml").exists()


def test_clean_keeps_a_folder_it_cannot_judge(tmp_path):
    """State of an experiment whose file is gone: only `down` may release it, so it stays."""
    state = tmp_path / "state"
    _state(state / "gone-experiment-fabric", {"slice_name": "x", "logins": {"a": {"name": "a", "host": "h"}}})
    from netrepro.clean import clean
    kept = clean(state, tmp_path / "inv", log=lambda *_: None)
    assert [k.name for k in kept] == ["gone-experiment-fabric"]
