"""Harness of the bad-input tables (tests/test_bad_input_*.py).

Each row is what a user might type or give: a command line, environment, and files made in a
fresh temporary folder. The harness runs ``python -m netrepro`` (or another module) in a
subprocess, exactly as a user would, and checks the answer every row must get:

- exit status 2;
- exactly one line on stderr, containing every string of ``expect`` (the file, field or
  option, and what was expected), and no Python traceback;
- nothing changed: the row's temporary folder and the repository's generated folders
  (rspecs/, results/, .state/, inventory/) hash the same before and after.

A row's ``setup(tmp)`` makes its inputs and returns extra environment variables (or None);
``{tmp}`` in argv and env values is replaced by the temporary folder.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

REPO = Path(__file__).resolve().parent.parent
#: Folders of the repository a command could write to.
WATCHED = ("rspecs", "results", ".state", "inventory", "experiments")


@dataclass
class Row:
    """One bad input: ``id`` names it in the test report."""

    id: str
    argv: list[str]
    expect: list[str]
    setup: Callable[[Path], dict | None] | None = None
    env: dict[str, str] = field(default_factory=dict)
    module: str = "netrepro"
    timeout_s: float = 120


def tree_digest(*roots: Path) -> dict[str, str]:
    """Path -> sha256 of every file (and symlink target) under ``roots``."""
    out = {}
    for root in roots:
        if not root.exists():
            continue
        for p in sorted(root.rglob("*")):
            if p.is_symlink():
                out[str(p)] = "link:" + os.readlink(p)
            elif p.is_file():
                out[str(p)] = hashlib.sha256(p.read_bytes()).hexdigest()
            elif p.is_dir():
                out[str(p)] = "dir"
    return out


def run_row(row: Row, tmp: Path) -> subprocess.CompletedProcess:
    """Make the row's inputs, run it, and assert the one-line, exit-2, nothing-changed answer."""
    extra = (row.setup(tmp) if row.setup else None) or {}
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NETREPRO_", "FABRIC_"))}
    env.update({"NETREPRO_STATE": str(tmp / "state"), "NETREPRO_RESULTS": str(tmp / "results")})
    for k, v in {**row.env, **extra}.items():
        env[k] = v.replace("{tmp}", str(tmp))
    argv = [a.replace("{tmp}", str(tmp)) for a in row.argv]
    watched = [tmp] + [REPO / d for d in WATCHED]
    before = tree_digest(*watched)
    proc = subprocess.run([sys.executable, "-m", row.module, *argv], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=row.timeout_s, stdin=subprocess.DEVNULL)
    after = tree_digest(*watched)
    err = proc.stderr.strip()
    assert proc.returncode == 2, f"{row.id}: exit {proc.returncode}, expected 2\nstdout: {proc.stdout[-2000:]}\nstderr: {err[-3000:]}"
    assert "Traceback" not in err, f"{row.id}: traceback\n{err[-3000:]}"
    assert len(err.splitlines()) == 1, f"{row.id}: expected one line on stderr, got {len(err.splitlines())}:\n{err[-3000:]}"
    for s in row.expect:
        assert s.replace("{tmp}", str(tmp)) in err, f"{row.id}: {s!r} not in {err!r}"
    changed = sorted(k for k in set(before) | set(after) if before.get(k) != after.get(k))
    assert not changed, f"{row.id}: files changed: {changed[:10]}"
    return proc


def edited_copy(real: Path, *pairs: tuple[str, str], tail: str = "") -> Callable[[Path], None]:
    """A row setup writing the committed experiment file ``real`` as ``experiment.yml`` in the
    row's folder, with each ``(old, new)`` text replaced and ``tail`` (top-level YAML) added at
    its end.

    Each ``old`` must occur exactly once, so a row cannot silently stop testing anything when
    the experiment file changes (AssertionError otherwise)."""
    def setup(tmp: Path) -> None:
        text = real.read_text()
        for old, new in pairs:
            assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {real}"
            text = text.replace(old, new)
        (tmp / "experiment.yml").write_text(text.rstrip("\n") + "\n\n" + tail if tail else text)
    return setup
