"""Writing a run folder: ``results/<experiment>/<run-id>/``, made new for each run and never
reused (:func:`new_run_dir`), ``latest`` pointing at the newest complete one
(:func:`point_latest`), held by one process at a time (:func:`lock_run`) with room kept free
for its records (:func:`reserve_space`), and run.json written whole each time
(:func:`write_json`) with the experiment as run (:func:`spec_as_recorded`) and the toolkit's
commit (:func:`git_commit`). The names are :mod:`netrepro.runfolder.layout`'s."""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shutil
import subprocess
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from netrepro.experiment.spec import REPO_ROOT, Spec, SpecError
from netrepro.runfolder.layout import LATEST, RESERVE, experiment_results

#: Bytes held free in a run folder while the run writes it (the file ``.reserve``, released
#: when the run stops), so that a full disk still leaves room to record what was kept and why.
RESERVE_BYTES = 1 << 20


def new_run_dir(spec: Spec, site: str) -> Path:
    """Create results/<experiment>/<UTC time>-<site>/ (never an existing one)."""
    base = experiment_results(spec.name)
    base.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for i in range(100):
        d = base / (f"{stamp}-{site}" + (f"-{i}" if i else ""))
        try:
            d.mkdir()
            return d
        except FileExistsError:
            continue
    raise RuntimeError(f"cannot create a new run folder under {base}")


def point_latest(run_dir: Path) -> None:
    """Atomically point results/<experiment>/latest at ``run_dir``."""
    link = run_dir.parent / LATEST
    tmp = run_dir.parent / f".latest-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run_dir.name)
    os.replace(tmp, link)


def write_json(path: Path, obj: Any) -> None:
    """Write ``obj`` as JSON to ``path`` atomically (a temporary file, then rename)."""
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(obj, indent=1, default=str) + "\n")
    os.replace(tmp, path)


def lock_run(run_dir: Path, what: str) -> int:
    """Hold an exclusive lock on the run folder for this process (flock on the folder itself:
    nothing is written); SpecError when another process holds it. Returns the descriptor."""
    fd = os.open(run_dir, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise SpecError(run_dir, what, "another netrepro process is running this run; wait until it ends") from None
    return fd


def reserve_space(run_dir: Path) -> Path:
    """Hold :data:`RESERVE_BYTES` in ``run_dir/.reserve`` (really allocated, not sparse).
    Raises OSError (ENOSPC) when the disk has less."""
    path = run_dir / RESERVE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        try:
            os.posix_fallocate(fd, 0, RESERVE_BYTES)
        except OSError as exc:
            if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL):
                raise
            os.write(fd, b"\0" * RESERVE_BYTES)
            os.fsync(fd)
    except OSError:
        os.close(fd)
        path.unlink(missing_ok=True)
        raise
    os.close(fd)
    return path


def spec_as_recorded(spec: Spec) -> Any:
    """The experiment as run.json records it (``spec``): its data as JSON gives them back."""
    return json.loads(json.dumps(spec.data, default=str))


def git_commit() -> str:
    """The repository's commit (``<40 hex>``, ``-dirty`` when tracked files differ from it),
    recorded in run.json; ``unknown`` without git or outside a checkout."""
    try:
        rev = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return rev + ("-dirty" if dirty else "") if rev else "unknown"
    except OSError:
        return "unknown"


def remove_tree(path: Path) -> None:
    """Remove a folder tree netrepro made (a staging folder, a run folder that holds nothing
    yet) if it exists; errors are ignored."""
    shutil.rmtree(path, ignore_errors=True)
