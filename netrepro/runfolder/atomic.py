"""Atomic writes of the files an analysis adds to a run folder: a reader never sees a half-written output, and a failed run leaves the
previous output in place. Each file is written to a temporary name in the same folder and
then renamed over the target (os.replace is atomic on POSIX within one file system). A
target that already holds exactly the new bytes is left as it is (same inode and mtime), so
re-analysing an unchanged run changes nothing."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(target: Path | str):
    """Yield a temporary path next to ``target``; on success rename it to ``target`` (or
    delete it when ``target`` already has the same bytes), on error delete it. Creates the
    parent folder if needed."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        if _same_bytes(Path(tmp), target):
            Path(tmp).unlink()
            return
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _same_bytes(a: Path, b: Path) -> bool:
    try:
        if b.is_symlink() or not b.is_file() or a.stat().st_size != b.stat().st_size:
            return False
        return a.read_bytes() == b.read_bytes()
    except OSError:
        return False


def write_text(target: Path | str, text: str) -> Path:
    """Atomically write ``text`` (UTF-8) to ``target``; returns the target path."""
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(target)


def write_gzip(target: Path | str, data: bytes) -> Path:
    """Atomically write ``data`` gzip-compressed (RFC 1952) to ``target``, reproducibly: the
    header's MTIME is 0 and it names no file, so equal data give equal bytes."""
    import gzip

    with atomic_path(target) as tmp:
        with open(tmp, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
            gz.write(data)
    return Path(target)
