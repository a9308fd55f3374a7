"""Check a run's raw files against the sha256 sums run.json records (``raw_sha256``).

``netrepro run`` records, when a run ends, ``raw_sha256``: path relative to ``raw/`` ->
sha256 hex digest of every file under ``raw/`` (:func:`sha256_tree`). Before
analysing, every recorded file is hashed again and every file under ``raw/`` is listed: a
recorded file that is gone is *missing*, one whose bytes differ is *altered* (or
*unreadable*), and a file that the record does not name is *unlisted*. Any of these is
damage: the analysis refuses the run unless told to analyze what is there
(:func:`netrepro.runfolder.reading.verified_raw`); a resumed run refuses to continue
(:func:`netrepro.runner.resume.load_resume`). Nothing is written here.

Files a run holds are read without following links (:func:`raw_files`, :func:`no_links`),
and a file a user names is read only when it is a regular file, within a stated size
(:func:`read_regular`): a run folder or a file may come from anyone.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Collection

from netrepro.core.errors import RunFolderError

_HEX64 = re.compile(r"^[0-9a-f]{64}$")


def sha256_file(path: Path) -> str:
    """sha256 hex digest of a file's bytes (read in 1 MiB blocks). Raises OSError."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def sha256_tree(root: Path) -> dict[str, str]:
    """Relative path (POSIX, from ``root``) -> sha256 hex of every file under ``root``, sorted:
    what run.json's ``raw_sha256`` records of each trial instance's folder (its keys then
    prefixed with the instance). Raises OSError when a file cannot be read."""
    return {str(p.relative_to(root)): sha256_file(p) for p in sorted(Path(root).rglob("*")) if p.is_file()}


@dataclass
class RawCheck:
    """The raw files against the record.

    Attributes:
        recorded: run.json's ``raw_sha256`` (path relative to raw/ -> sha256 hex).
        actual: path relative to raw/ -> sha256 hex of every file now under raw/ (None for
            an unreadable file).
        missing, altered, unreadable, unlisted: paths relative to raw/, sorted.
    """

    recorded: dict[str, str]
    actual: dict[str, str | None] = field(default_factory=dict)
    missing: list[str] = field(default_factory=list)
    altered: list[str] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)
    unlisted: list[str] = field(default_factory=list)

    @property
    def damaged(self) -> list[tuple[str, str]]:
        """``[(path relative to raw/, "missing" | "altered" | "unreadable" | "unlisted")]``, by path."""
        out = [(p, "missing") for p in self.missing] + [(p, "altered") for p in self.altered]
        out += [(p, "unreadable") for p in self.unreadable] + [(p, "unlisted") for p in self.unlisted]
        return sorted(out)

    def describe(self) -> str:
        """One line naming each damaged file, e.g. ``2 raw files differ from the record:
        raw/a/client1/ping.txt (missing), raw/a/router/qdisc.jsonl (altered)``."""
        d = self.damaged
        return (f"{len(d)} raw file{'s' if len(d) != 1 else ''} differ{'s' if len(d) == 1 else ''} from the record: "
                + ", ".join(f"raw/{p} ({kind})" for p, kind in d))

    def by_trial(self) -> dict[str, list[str]]:
        """Trial id (first path part) -> ``["raw/<path> (<kind>)", ...]`` of its damaged files."""
        out: dict[str, list[str]] = {}
        for p, kind in self.damaged:
            out.setdefault(p.split("/", 1)[0], []).append(f"raw/{p} ({kind})")
        return out

    def summary(self) -> str:
        """One line for report.md: all files match, or the damage."""
        if not self.damaged:
            n = len(self.recorded)
            return f"all {n} raw file{'s' if n != 1 else ''} match the sha256 sums in run.json"
        return self.describe()

    def tree_sha256(self) -> str:
        """sha256 of the raw tree as it is now (sorted ``path<TAB>sha256`` lines): names the
        exact data an analysis read."""
        text = "".join(f"{p}\t{d or 'unreadable'}\n" for p, d in sorted(self.actual.items()))
        return hashlib.sha256(text.encode()).hexdigest()


def _check_record(record, run_json: Path) -> dict[str, str]:

    if record is None:
        raise RunFolderError(run_json, "raw_sha256: missing; expected the sha256 of every raw file "
                                      "(written by `netrepro run`), to check raw/ against")
    if not isinstance(record, dict):
        raise RunFolderError(run_json, f"raw_sha256: expected an object of path -> sha256, got {type(record).__name__}")
    for k, v in record.items():
        parts = PurePosixPath(k).parts
        if (not k or k.startswith("/") or "\\" in k or any(p in ("", ".", "..") for p in k.split("/"))
                or not parts):
            raise RunFolderError(run_json, f"raw_sha256: key {k[:80]!r}: expected a path inside raw/")
        if not isinstance(v, str) or not _HEX64.match(v):
            raise RunFolderError(run_json, f"raw_sha256: {k[:80]}: expected a sha256 (64 hex digits), got {str(v)[:80]!r}")
    return record


def raw_files(raw_dir: Path, trials: Collection[str] | None = None) -> list[Path]:
    """Every regular file under ``raw_dir`` (a run's raw/), sorted, after checking that the
    tree is the run's own: raw/ itself and everything under it a real folder or a regular
    file, never a symbolic link (a link could point anywhere: /etc, /) nor a FIFO, socket
    or device (reading one could block). Links are never followed. An absent raw/ (or a
    file in its place) has no files. With ``trials`` (trial instance ids), only what is
    under raw/'s entries of those names is listed and checked; an id naming no entry (or
    not a plain name) has no files.

    Raises:
        RunFolderError: naming the first link or special file, or a folder that cannot be
            listed (one line); whether or not the run is analysed with --partial.
    """
    import os

    what = "expected a real folder or regular file inside the run's raw/ (links are not followed)"
    if raw_dir.is_symlink():
        raise RunFolderError(raw_dir, f"a symbolic link (to {os.readlink(raw_dir)}); expected the run's own raw/ "
                                     "folder, a real folder inside the run (links are not followed)")
    if not raw_dir.is_dir():
        return []
    return plain_files(raw_dir, what, trials)


def plain_files(folder: Path, what: str, names: Collection[str] | None = None) -> list[Path]:
    """Every regular file under the real folder ``folder``, sorted, after checking with
    ``lstat`` (nothing followed) that everything under it is a real folder or a regular file:
    never a symbolic link (it could point anywhere: /etc, /, a private key) nor a FIFO, socket
    or device (reading one could block, writing one could reach anything). With ``names``,
    only ``folder``'s entries of those names (and what is under them) are listed and checked.

    Args:
        folder: the folder to walk (checked by the caller to be a real folder);
        what: what was expected instead, for the message (``expected ... (links are not followed)``);
        names: the entries of ``folder`` to walk, or None for all.
    Raises:
        RunFolderError: naming the first link or special file, or a folder that cannot be
            listed (one line).
    """
    import os
    import stat

    out: list[Path] = []
    todo = [folder]
    while todo:
        current = todo.pop()
        try:
            with os.scandir(current) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError as exc:
            raise RunFolderError(current, f"cannot be listed ({exc.strerror}); {what}") from None
        if names is not None and current == folder:
            entries = [e for e in entries if e.name in names]
        for e in entries:
            p = Path(e.path)
            try:
                mode = e.stat(follow_symlinks=False).st_mode
            except OSError as exc:
                raise RunFolderError(p, f"cannot be read ({exc.strerror}); {what}") from None
            if stat.S_ISLNK(mode):
                raise RunFolderError(p, f"a symbolic link (to {os.readlink(p)}); {what}")
            if stat.S_ISDIR(mode):
                todo.append(p)
            elif stat.S_ISREG(mode):
                out.append(p)
            else:
                raise RunFolderError(p, f"not a regular file (a FIFO, socket or device); {what}")
    return sorted(out)


def no_links(root: Path, rel: str, what: str) -> Path:
    """``root / rel`` after checking, without following any link (``os.lstat``), that every
    part of ``rel`` below ``root`` that exists is a real folder and the last a regular file:
    a link could point anywhere (a private key, /etc/shadow) and a FIFO or device could block
    a reader. ``root`` itself may be a link (``results/<experiment>/latest``): the user named
    it. A part that does not exist passes (the caller reports a missing file as it does).

    Args:
        root: the run folder; rel: a path relative to it (POSIX); what: what was expected
            there, for the message (``the run's own file``).
    Raises:
        RunFolderError: naming the first link, special file, or a ``rel`` that is not a plain
            path inside ``root`` (one line).
    """
    import os
    import stat

    parts = PurePosixPath(rel).parts
    if not parts or rel.startswith("/") or any(p in (".", "..") for p in parts):
        raise RunFolderError(root, f"{rel[:80]!r}: expected a path inside the run folder")
    path = root
    for i, part in enumerate(parts):
        path = path / part
        try:
            mode = os.lstat(path).st_mode
        except FileNotFoundError:
            return root / rel
        except OSError as exc:
            raise RunFolderError(path, f"cannot be read ({exc.strerror}); expected {what}") from None
        if stat.S_ISLNK(mode):
            raise RunFolderError(path, f"a symbolic link (to {os.readlink(path)}); expected {what} "
                                       "(links are not followed)")
        last = i == len(parts) - 1
        if (last and not stat.S_ISREG(mode)) or (not last and not stat.S_ISDIR(mode)):
            kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO, socket or device" if not stat.S_ISREG(mode) else "a file"
            raise RunFolderError(path, f"{kind}, not a regular file{'' if last else ' in a folder'}; expected {what}")
    return root / rel


def read_regular(path: Path | str, max_bytes: int, what: str) -> bytes:
    """The bytes of the regular file ``path`` (a symbolic link to one is followed: the user
    named it), at most ``max_bytes`` of them. The file is opened without blocking
    (``O_NONBLOCK``: opening a FIFO does not wait for a writer) and checked on the open file
    (``fstat``), so a FIFO, socket, device (/dev/zero) or folder is refused before a byte is
    read; at most ``max_bytes + 1`` bytes are read, so a file growing meanwhile is refused too.

    Raises:
        RunFolderError: ``path`` cannot be opened, is not a regular file, or holds more than
            ``max_bytes`` bytes (one line naming it and ``what`` was expected).
    """
    import os
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise RunFolderError(path, f"cannot be read ({exc.strerror}); expected {what}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO, socket or device"
        raise RunFolderError(path, f"{kind}, not a regular file; expected {what}")
    with os.fdopen(fd, "rb") as fh:
        try:
            data = fh.read(max_bytes + 1)
        except OSError as exc:
            raise RunFolderError(path, f"cannot be read ({exc.strerror}); expected {what}") from None
    if len(data) > max_bytes:
        raise RunFolderError(path, f"more than {max_bytes} bytes; expected {what} of at most {max_bytes} bytes")
    return data


def verify_raw(raw_dir: Path, record, run_json: Path, trials: Collection[str] | None = None) -> RawCheck:
    """Hash every file under ``raw_dir`` and compare with ``record`` (run.json's raw_sha256).

    Args:
        raw_dir: the run's raw/ folder (may be absent: every recorded file is then missing).
        record: run.json's ``raw_sha256`` value, as parsed.
        run_json: run.json's path, for error messages.
        trials: if given, only these trial instances' folders (raw/<id>/) and the recorded
            paths under them are compared (a resumed run's completed trials); the whole
            record is still checked for its form.
    Returns:
        RawCheck (damage listed, never raised); its ``recorded`` holds the paths compared.
    Raises:
        RunFolderError: ``raw_sha256`` missing, not an object, a key that is not a path
            inside raw/, or a value that is not a sha256; raw/ or anything under it a
            symbolic link or a special file, or a folder that cannot be listed (:func:`raw_files`).
    """
    record = _check_record(record, run_json)
    if trials is not None:
        record = {k: v for k, v in record.items() if k.split("/", 1)[0] in trials}
    check = RawCheck(recorded=record)
    for p in raw_files(raw_dir, trials):
        rel = p.relative_to(raw_dir).as_posix()
        try:
            check.actual[rel] = sha256_file(p)
        except OSError:
            check.actual[rel] = None
    for rel, digest in sorted(record.items()):
        if rel not in check.actual:
            check.missing.append(rel)
        elif check.actual[rel] is None:
            check.unreadable.append(rel)
        elif check.actual[rel] != digest:
            check.altered.append(rel)
    check.unlisted = sorted(rel for rel in check.actual if rel not in record)
    return check


__all__ = ["RawCheck", "no_links", "raw_files", "read_regular", "verify_raw", "sha256_file", "sha256_tree"]
