"""Run folders: ``results/<experiment>/<run-id>/``, made new for each run and never reused
(:func:`new_run_dir`), ``latest`` pointing at the newest complete one (:func:`point_latest`),
held by one process at a time with room kept free for its records, and the files a run
writes there (run.json, INCOMPLETE)."""

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

#: Where run folders go: ``results/`` in the repository, or ``$NETREPRO_RESULTS``.
RESULTS_ROOT = Path(os.environ.get("NETREPRO_RESULTS", REPO_ROOT / "results"))
#: Bytes held free in a run folder while the run writes it (the file ``.reserve``, released
#: when the run stops), so that a full disk still leaves room to record what was kept and why.
RESERVE_BYTES = 1 << 20
#: The marker file of a run folder that does not hold every trial (yet).
INCOMPLETE = "INCOMPLETE"


def new_run_dir(spec: Spec, site: str) -> Path:
    """Create results/<experiment>/<UTC time>-<site>/ (never an existing one)."""
    base = RESULTS_ROOT / spec.name
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
    link = run_dir.parent / "latest"
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
    path = run_dir / ".reserve"
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
    return json.loads(json.dumps(spec.data, default=str))


def git_commit() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return rev + ("-dirty" if dirty else "") if rev else "unknown"
    except OSError:
        return "unknown"


def latest_records(spec: Spec, site_name: str) -> list[dict]:
    """The trial records of the newest complete run of ``spec`` on ``site_name`` (results/
    <experiment>/latest), for the overhead of a trial; [] when there is none or it is unreadable."""
    rj = RESULTS_ROOT / spec.name / "latest" / "run.json"
    try:
        meta = json.loads(rj.read_text())
    except (OSError, ValueError):
        return []
    return [t for t in meta.get("trials") or [] if isinstance(t, dict)] if meta.get("site") == site_name else []


def shutil_rm(path: Path) -> None:
    """Remove a folder tree if it exists."""
    shutil.rmtree(path, ignore_errors=True)
