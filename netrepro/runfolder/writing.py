"""Writing a run folder: ``results/<experiment>/<run-id>/``, made new for each run and never
reused (:func:`new_run_dir`), ``latest`` pointing at the newest complete one
(:func:`point_latest`), held by one process at a time (:func:`lock_run`) with room kept free
for its records (:func:`reserve_space`), never writing through a link (a resumed run's folder
holds none: :func:`check_own_files`), with the experiment as run (:func:`spec_as_recorded`),
the toolkit's commit (:func:`git_commit`) and the reservation's documents
(:func:`keep_site_documents`) for run.json, which :func:`netrepro.runfolder.record.write_run`
writes. The names are :mod:`netrepro.runfolder.layout`'s."""

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

from netrepro.core.errors import RunFolderError
from netrepro.experiment.spec import REPO_ROOT, Spec, SpecError
from netrepro.runfolder.integrity import sha256_file
from netrepro.runfolder.layout import LATEST, RESERVE, SITE_DOCUMENT_RE, SITE_DOCUMENTS, experiment_results

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


def keep_site_documents(run_dir: Path, documents: dict[str, Path]) -> dict[str, str]:
    """Copy the reservation's documents (netrepro.sites.base.Site.documents: name -> path)
    into ``run_dir/site/`` once, read-only; returns name -> sha256 hex (run.json's
    ``site_documents``), {} when there are none (no folder made).

    Raises:
        RunFolderError: a name that is not one plain file name (:data:`SITE_DOCUMENT_RE`), a
            document that is not a readable plain file, or one already in the folder.
    """
    if not documents:
        return {}
    folder = Path(run_dir) / SITE_DOCUMENTS
    folder.mkdir(exist_ok=True)
    sums = {}
    for name, src in sorted(documents.items()):
        src = Path(src)
        if not SITE_DOCUMENT_RE.match(name):
            raise RunFolderError(src, f"site document name {name!r}: expected one file name ({SITE_DOCUMENT_RE.pattern})")
        if src.is_symlink() or not src.is_file():
            raise RunFolderError(src, "expected the site's document of the reservation as a plain file")
        target = folder / name
        try:
            with open(src, "rb") as fin, open(target, "xb") as fout:
                shutil.copyfileobj(fin, fout)
        except FileExistsError:
            raise RunFolderError(target, "exists; expected a run folder's site documents written once") from None
        except OSError as exc:
            raise RunFolderError(src, f"cannot be kept with the run: {exc.strerror or exc}") from None
        target.chmod(0o444)
        sums[name] = sha256_file(target)
    return sums


def point_latest(run_dir: Path) -> None:
    """Atomically point results/<experiment>/latest at ``run_dir``."""
    link = run_dir.parent / LATEST
    tmp = run_dir.parent / f".latest-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run_dir.name)
    os.replace(tmp, link)


def check_own_files(run_dir: Path) -> None:
    """Check that the run folder a resumed run writes into (run.json, INCOMPLETE, .reserve,
    .fetch/, raw/, logs/, failed/, timings.json, ...) holds only plain files and folders: a run
    folder may come from anyone, and a symbolic link in it (``timings.json`` pointing at a file
    of the user's) would have the run write outside it, a FIFO would block it. ``run_dir``
    itself may be a link (``latest``); nothing is followed below it (os.walk, followlinks
    False). Reads only.

    Raises:
        RunFolderError: one line naming the first link (and its target) or special file.
    """
    for top, dirs, files in os.walk(run_dir):
        for name in sorted(dirs + files):
            p = Path(top) / name
            if p.is_symlink():
                raise RunFolderError(p, f"a symbolic link (to {os.readlink(p)}); expected the run folder's own file or "
                                        "folder: a resumed run writes into its folder, never through a link")
            if not (p.is_dir() or p.is_file()):
                raise RunFolderError(p, "a special file (FIFO, socket or device); expected the run folder's own plain "
                                        "file or folder")


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
    Raises OSError (ENOSPC) when the disk has less, ELOOP when ``.reserve`` is a symbolic
    link (never followed)."""
    path = run_dir / RESERVE
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)  # never a link's target
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
