"""Atomic writes: a reader never sees a half-written output, and a failed run leaves the
previous output in place. Each file is written to a temporary name in the same folder and
then renamed over the target (os.replace is atomic on POSIX within one file system)."""

from __future__ import annotations

import os
import tempfile
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_path(target: Path | str):
    """Yield a temporary path next to ``target``; on success rename it to ``target``,
    on error delete it. Creates the parent folder if needed."""
    target = Path(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_text(target: Path | str, text: str) -> Path:
    """Atomically write ``text`` (UTF-8) to ``target``; returns the target path."""
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(target)
