"""An RO-Crate read back (``netrepro analyze --run CRATE``): checked before the analysis reads it.

A crate given to the analysis may come from anyone, and is input only, never written: a
folder crate is walked without following links (:func:`verify_crate`: no link, FIFO or
device, no file its metadata does not list, every file as its sha256); a zip's central
directory is checked before a byte is unpacked (:func:`check_zip`: names, entry types,
:data:`MAX_ENTRIES`, :data:`MAX_ENTRY_BYTES`, :data:`MAX_TOTAL_BYTES`, :data:`MAX_RATIO`, the
metadata), then it is unpacked into a temporary folder, its sizes and sha256 enforced as it
is read (:func:`unpack_crate`). :func:`open_crate` does either for the time of a ``with``
block. :mod:`netrepro.runfolder.crate` writes the crates (``netrepro export``).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from netrepro.core.errors import RunFolderError
from netrepro.runfolder.integrity import plain_files, read_regular, sha256_file

#: The crate's metadata file (RO-Crate 1.1, section "RO-Crate Metadata File Descriptor").
CRATE_METADATA = "ro-crate-metadata.json"
#: The most entries a crate may hold (files and folders). The largest recorded crate
#: (docs/runs/pie-vs-red-crate-local-vm-2026-11-29: pie-vs-red's four trials of seven nodes at
#: full length) holds 271; 20,000 is 70 times that: a sweep of 10 points at REPEAT=5 fits.
MAX_ENTRIES = 20_000
#: The most bytes one file of a crate may unpack to. The recorded crate's largest is 1.7 MB
#: (a router's qdisc.jsonl, 1230 s of samples); 256 MiB is 150 times that.
MAX_ENTRY_BYTES = 256 << 20
#: The most bytes a crate may unpack to in all. The recorded crate unpacks to 14.4 MB; 2 GiB is
#: 140 times that, and bounds what a zip can make the disk hold.
MAX_TOTAL_BYTES = 2 << 30
#: The most a file may inflate: its size over its compressed size. The recorded crate's highest
#: is 15 (qdisc.jsonl); 100 is Apache POI's bound against zip bombs (``ZipSecureFile``'s
#: default ``MIN_INFLATE_RATIO`` 0.01), while deflate reaches about 1032 on zeros (zlib's
#: technical details, https://www.zlib.net/zlib_tech.html).
MAX_RATIO = 100
#: Files smaller than this are not held to :data:`MAX_RATIO` (an empty or tiny file inflates
#: far, harmlessly): POI's ``GRACE_ENTRY_SIZE``, 100 kB.
RATIO_GRACE_BYTES = 100_000
#: The most bytes the crate's metadata file may hold; it is read whole and parsed. The recorded
#: crate's is 253 kB for 271 entries (about 1 kB each); 32 MiB holds :data:`MAX_ENTRIES`.
MAX_METADATA_BYTES = 32 << 20
#: The most bytes of one name in a path, and of a whole path (Linux's NAME_MAX and PATH_MAX,
#: <linux/limits.h>): a longer name cannot be made on the disk.
NAME_MAX, PATH_MAX = 255, 4096
#: What a crate must be, in the messages that refuse one.
EXPORTED = "a crate as `netrepro export` writes it"


def _shown(name: str) -> str:
    """A name from a crate for a message: its repr, cut to 80 characters with its length."""
    return repr(name) if len(name) <= 80 else f"{name[:80]!r}... ({len(name)} characters)"


def path_problem(rel: str) -> str | None:
    """Why ``rel`` (a zip entry's name without its trailing ``/``, or a file's ``@id`` in the
    metadata) cannot be a path inside a crate, or None: empty; absolute or with a backslash; a
    control character; an empty, ``.`` or ``..`` part; a part longer than :data:`NAME_MAX`
    bytes or the whole longer than :data:`PATH_MAX` bytes (UTF-8)."""
    if not rel:
        return "an empty name"
    if rel.startswith("/") or "\\" in rel:
        return "an absolute name or one with a backslash"
    if any(ord(c) < 32 or ord(c) == 127 for c in rel):
        return "a control character in the name"
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "an empty, '.' or '..' part in the name"
    size = len(rel.encode("utf-8", "surrogatepass"))
    longest = max(len(p.encode("utf-8", "surrogatepass")) for p in parts)
    if longest > NAME_MAX or size > PATH_MAX:
        return f"a name too long for a disk (parts of at most {NAME_MAX} bytes, paths of at most {PATH_MAX})"
    return None


def metadata_files(raw: bytes, path: Path | str) -> dict[str, str]:
    """The files an RO-Crate metadata file (``raw``: its bytes, read from ``path``) lists:
    path relative to the crate -> sha256 hex (64 lowercase hex digits).

    The metadata must be JSON-LD whose ``@graph`` is a list of entities (objects with an
    ``@id``), each ``@id`` once, the metadata descriptor (``@id`` :data:`CRATE_METADATA`,
    RO-Crate 1.1 section "RO-Crate Metadata File Descriptor") among them; every entity of
    ``@type`` File with its ``sha256``, a path inside the crate (:func:`path_problem`).

    Raises:
        RunFolderError: naming ``path`` (and the entity) and what was expected.
    """
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise RunFolderError(path, f"not UTF-8 JSON ({str(exc)[:80]}); expected an RO-Crate's metadata (JSON-LD)") from None
    graph = doc.get("@graph") if isinstance(doc, dict) else None
    if not isinstance(graph, list):
        raise RunFolderError(path, "@graph: expected a list of the crate's entities (JSON-LD, RO-Crate 1.1)")
    seen: set[str] = set()
    out: dict[str, str] = {}
    for i, e in enumerate(graph):
        ident = e.get("@id") if isinstance(e, dict) else None
        if not isinstance(ident, str):
            raise RunFolderError(path, f"@graph[{i}]: expected an entity, an object with an @id")
        if ident in seen:
            raise RunFolderError(path, f"@graph: {_shown(ident)} appears twice; expected each entity once")
        seen.add(ident)
        types = e.get("@type") if isinstance(e.get("@type"), list) else [e.get("@type")]
        if "sha256" not in e and "File" not in types:
            continue
        digest = e.get("sha256")
        if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
            raise RunFolderError(path, f"{_shown(ident)}: sha256: expected the file's sha256 (64 hex digits), "
                                       f"as {EXPORTED}")
        problem = path_problem(ident)
        if problem:
            raise RunFolderError(path, f"{_shown(ident)}: {problem}; expected a path inside the crate")
        out[ident] = digest
    if CRATE_METADATA not in seen:
        raise RunFolderError(path, f"@graph: no entity {CRATE_METADATA!r}; expected the metadata descriptor (RO-Crate 1.1)")
    if not out:
        raise RunFolderError(path, f"lists no file with its sha256; expected every file's sha256, as {EXPORTED}")
    return out


def is_crate(path: Path | str) -> bool:
    """Whether ``path`` is an RO-Crate: a folder holding :data:`CRATE_METADATA`, or a readable
    zip file holding it at its top (False for a damaged zip: :func:`open_crate` says why)."""
    path = Path(path)
    if path.is_dir():
        return (path / CRATE_METADATA).is_file()
    try:
        with zipfile.ZipFile(path) as z:
            return CRATE_METADATA in z.namelist()
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return False


def crate_tree(folder: Path) -> list[str]:
    """The files of the folder crate ``folder``: paths relative to it (POSIX), sorted. Walked
    without following any link (:func:`netrepro.runfolder.integrity.plain_files`), so that a
    link cannot lead a reader outside the crate, and a FIFO cannot block it.

    Raises:
        RunFolderError: naming the first symbolic link or special file (FIFO, socket, device),
            or a crate of more than :data:`MAX_ENTRIES` files.
    """
    files = plain_files(folder, "expected only plain files and folders in a crate (links are not followed)")
    if len(files) > MAX_ENTRIES:
        raise RunFolderError(folder, f"more than {MAX_ENTRIES} files; expected {EXPORTED}")
    return [f.relative_to(folder).as_posix() for f in files]


def crate_files(folder: Path) -> dict[str, str]:
    """The files the metadata of the folder crate ``folder`` lists: path relative to the crate
    -> sha256 hex (:func:`metadata_files`). The metadata file is read only when it is a
    regular file (``os.lstat``: not a link) whose size is at most :data:`MAX_METADATA_BYTES`,
    and then at most one byte more is read (:func:`read_regular`).

    Raises:
        RunFolderError: naming the metadata file: missing, not a regular file, too large, or
            not the metadata of a crate netrepro exported.
    """
    path = folder / CRATE_METADATA
    what = f"an RO-Crate's metadata of at most {MAX_METADATA_BYTES} bytes"
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise RunFolderError(path, f"cannot be read ({exc.strerror}); expected {what}") from None
    if not stat.S_ISREG(st.st_mode):
        raise RunFolderError(path, f"not a regular file; expected {what}")
    if st.st_size > MAX_METADATA_BYTES:
        raise RunFolderError(path, f"{st.st_size} bytes; expected {what}")
    return metadata_files(read_regular(path, MAX_METADATA_BYTES, what), path)


def verify_crate(folder: Path) -> None:
    """Check the folder crate ``folder`` as it is, reading nothing through a link: only plain
    files and folders (:func:`crate_tree`), each file listed in the metadata
    (:func:`crate_files`; the metadata file itself excepted) with the bytes the metadata
    records (``sha256``). Returns nothing.

    Raises:
        RunFolderError: naming the first link or special file, the metadata's problem, the
            first file the metadata does not list, or the first file whose bytes differ from
            the record, or that is missing.
    """
    files = crate_tree(folder)
    sums = crate_files(folder)
    unlisted = [f for f in files if f not in sums and f != CRATE_METADATA]
    if unlisted:
        raise RunFolderError(folder / unlisted[0], f"not listed in {CRATE_METADATA}; expected only the files the "
                                                   "crate's metadata lists")
    bad = first_mismatch(folder, sums)
    if bad and bad[1] == "missing":
        raise RunFolderError(folder / bad[0], "missing or not a file; expected the file the crate's metadata lists")
    if bad:
        raise RunFolderError(folder / bad[0], f"its sha256 differs from the crate's record ({CRATE_METADATA}); "
                                              "expected the file as exported")


#: What reading a damaged zip raises: zipfile's own error (a bad CRC, a bad local header, a
#: local name that is not the central directory's), zlib's (bad deflate data), a cut file.
_DAMAGED = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError)


def _open_zip(path: Path) -> zipfile.ZipFile:
    """``path`` opened as a zip; RunFolderError naming it when it is not a readable one."""
    try:
        return zipfile.ZipFile(path)
    except _DAMAGED as exc:
        raise RunFolderError(path, f"not a readable zip file ({str(exc)[:80]}); expected {EXPORTED}") from None


def check_zip(z: zipfile.ZipFile, path: Path) -> dict[str, str]:
    """The files the crate zip ``z`` (opened from ``path``) lists in its metadata (path ->
    sha256 hex), after checking its central directory, before anything is unpacked: at most
    :data:`MAX_ENTRIES` entries; names that are paths inside the crate (:func:`path_problem`),
    each once, none both a file and a folder; only files and folders (no link, FIFO or
    device), stored or deflated, unencrypted; each file at most :data:`MAX_ENTRY_BYTES`,
    inflating at most :data:`MAX_RATIO` times, all at most :data:`MAX_TOTAL_BYTES`; the
    metadata at most :data:`MAX_METADATA_BYTES` (:func:`metadata_files`); every file listed
    in it and every listed file there.

    Raises:
        RunFolderError: naming ``path``, the entry and what was expected.
    """
    infos = z.infolist()
    if len(infos) > MAX_ENTRIES:
        raise RunFolderError(path, f"{len(infos)} entries; expected at most {MAX_ENTRIES} (the largest recorded crate "
                                   "holds 271)")
    files: dict[str, zipfile.ZipInfo] = {}
    folders: set[str] = set()
    total = 0
    for info in infos:
        name, shown = info.filename, _shown(info.filename)
        rel = name[:-1] if name.endswith("/") else name
        problem = path_problem(rel)
        if problem:
            raise RunFolderError(path, f"entry {shown}: {problem}; expected a path inside the crate")
        kind = (info.external_attr >> 16) & 0o170000
        if kind not in (0, stat.S_IFREG, stat.S_IFDIR) or (kind == stat.S_IFDIR) != name.endswith("/"):
            raise RunFolderError(path, f"entry {shown}: a link or special file; expected only files and folders")
        if rel in files or rel in folders:
            raise RunFolderError(path, f"entry {shown}: a second entry of this name; expected each file and folder once")
        parents = {"/".join(rel.split("/")[:i]) for i in range(1, rel.count("/") + 1)}
        if parents & files.keys() or (not name.endswith("/") and any(f.startswith(rel + "/") for f in folders)):
            raise RunFolderError(path, f"entry {shown}: a file and a folder of one name; expected each name to be one")
        folders |= parents
        if name.endswith("/"):
            folders.add(rel)
            continue
        if rel in folders:
            raise RunFolderError(path, f"entry {shown}: a file and a folder of one name; expected each name to be one")
        if info.flag_bits & 0x1 or info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise RunFolderError(path, f"entry {shown}: encrypted or compressed with method {info.compress_type}; "
                                       "expected stored or deflated, unencrypted (as netrepro export writes)")
        limit = MAX_METADATA_BYTES if rel == CRATE_METADATA else MAX_ENTRY_BYTES
        total += info.file_size
        if info.file_size > limit:
            raise RunFolderError(path, f"entry {shown}: unpacks to {info.file_size} bytes; expected at most {limit}")
        if total > MAX_TOTAL_BYTES:
            raise RunFolderError(path, f"unpacks to more than {MAX_TOTAL_BYTES} bytes; expected at most that in all")
        if info.file_size > RATIO_GRACE_BYTES and info.file_size > MAX_RATIO * info.compress_size:
            raise RunFolderError(path, f"entry {shown}: {info.compress_size} bytes inflate to {info.file_size}; "
                                       f"expected at most {MAX_RATIO} times (a zip bomb?)")
        files[rel] = info
    if CRATE_METADATA not in files:
        raise RunFolderError(path, f"no {CRATE_METADATA} at its top; expected {EXPORTED}")
    where = f"{path}: {CRATE_METADATA}"
    try:
        with z.open(files[CRATE_METADATA]) as fh:
            raw = fh.read(MAX_METADATA_BYTES + 1)
    except _DAMAGED as exc:
        raise RunFolderError(where, f"damaged ({str(exc)[:80]}); expected {EXPORTED}") from None
    if len(raw) > MAX_METADATA_BYTES:
        raise RunFolderError(where, f"more than {MAX_METADATA_BYTES} bytes; expected at most that")
    sums = metadata_files(raw, where)
    unlisted = sorted(set(files) - set(sums) - {CRATE_METADATA})
    if unlisted:
        raise RunFolderError(path, f"entry {_shown(unlisted[0])}: not listed in {CRATE_METADATA}; expected only the "
                                   "files the crate's metadata lists")
    missing = sorted(set(sums) - set(files))
    if missing:
        raise RunFolderError(path, f"{_shown(missing[0])}: missing; expected the file the crate's metadata lists")
    return sums


def _extract(z: zipfile.ZipFile, path: Path, into: Path, sums: dict[str, str]) -> None:
    """Write the files and folders of the checked zip ``z`` (:func:`check_zip`) into the new
    folder ``into``, each file created anew (``open(..., "xb")``) and streamed in 1 MiB blocks,
    never more bytes than its entry declares nor :data:`MAX_TOTAL_BYTES` in all (a lying
    header: zipfile stops at the declared size, and a short or long stream fails its CRC), its
    sha256 checked against ``sums``.

    Raises:
        RunFolderError: naming ``path`` and the entry (damaged, too long, not as recorded);
        OSError: ``into`` cannot be written.
    """
    total = 0
    for info in z.infolist():
        target, shown = into / info.filename, _shown(info.filename)
        if info.filename.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        digest, size = hashlib.sha256(), 0
        with open(target, "xb") as dst:
            try:
                with z.open(info) as src:
                    while block := src.read(1 << 20):
                        size, total = size + len(block), total + len(block)
                        if size > info.file_size:
                            raise RunFolderError(path, f"entry {shown}: inflates past its declared {info.file_size} "
                                                       "bytes; expected the sizes the zip declares")
                        if total > MAX_TOTAL_BYTES:
                            raise RunFolderError(path, f"unpacks to more than {MAX_TOTAL_BYTES} bytes; expected at "
                                                       "most that in all")
                        digest.update(block)
                        dst.write(block)
            except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
                raise RunFolderError(path, f"entry {shown}: damaged ({str(exc)[:80]}); expected {EXPORTED}") from None
        if info.filename != CRATE_METADATA and digest.hexdigest() != sums[info.filename]:
            raise RunFolderError(path, f"entry {shown}: its sha256 differs from the crate's record ({CRATE_METADATA}); "
                                       "expected the file as exported")


def check_crate(path: Path | str) -> None:
    """Every check of the crate at ``path`` that writes nothing: a folder crate in full
    (:func:`verify_crate`); a zip's central directory and metadata (:func:`check_zip`; its
    bytes are checked as it is unpacked, :func:`unpack_crate`). Returns nothing.

    Raises:
        RunFolderError: one line naming the file and what was expected.
    """
    path = Path(path)
    if path.is_dir() and is_crate(path):
        verify_crate(path)
        return
    if not path.is_file():
        raise RunFolderError(path, f"not an RO-Crate; expected a folder or zip holding {CRATE_METADATA}")
    with _open_zip(path) as z:
        check_zip(z, path)


def unpack_crate(zip_path: Path | str, into: Path | str) -> Path:
    """Unpack the crate zip ``zip_path`` into the new folder ``into`` (its parent must exist)
    and return ``into``: its central directory and metadata checked first (:func:`check_zip`),
    then every file written and checked against its sha256 (:func:`_extract`). On any error
    ``into`` is removed.

    Raises:
        RunFolderError: naming the zip and the entry (or ``into`` when it cannot be made or
            written: exists, no room) and what was expected.
    """
    zip_path, into = Path(zip_path), Path(into)
    with _open_zip(zip_path) as z:
        sums = check_zip(z, zip_path)
        try:
            into.mkdir()
        except OSError as exc:
            raise RunFolderError(into, f"cannot be made ({exc.strerror}); expected a new folder to unpack "
                                       f"{zip_path.name} into") from None
        try:
            _extract(z, zip_path, into, sums)
        except BaseException as exc:
            shutil.rmtree(into, ignore_errors=True)
            if isinstance(exc, OSError):
                raise RunFolderError(into, f"cannot be written ({exc.strerror}); expected room to unpack "
                                           f"{zip_path.name} (at most {MAX_TOTAL_BYTES} bytes)") from None
            raise
    return into


@contextmanager
def open_crate(path: Path | str, scratch: Path | None = None) -> Iterator[Path]:
    """The run folder of the crate at ``path``, checked, for the time of a ``with`` block:
    a folder crate is read in place (:func:`verify_crate`; nothing is written into it); a zip
    is unpacked (:func:`unpack_crate`) into a new temporary folder in ``scratch`` (default:
    the system's temporary folder), as ``<zip name without .zip>/``, removed when the block
    ends. A crate is input only: it stays byte for byte as published.

    Raises:
        RunFolderError: one line naming the file and what was expected: not a crate, a link or
            special file, bad metadata, a file not listed or not as recorded, a damaged zip or
            one past the bounds (:data:`MAX_ENTRIES`, ...), ``scratch`` not writable.
    """
    path = Path(path)
    if path.is_dir() and is_crate(path):
        verify_crate(path)
        yield path
        return
    if not path.is_file():
        raise RunFolderError(path, f"not an RO-Crate; expected a folder or zip holding {CRATE_METADATA}")
    try:
        tmp = tempfile.TemporaryDirectory(prefix=".crate-", dir=scratch)
    except OSError as exc:
        raise RunFolderError(scratch or tempfile.gettempdir(), f"cannot hold a temporary folder ({exc.strerror}); "
                                                               f"expected a folder to unpack {path.name} into") from None
    with tmp:
        yield unpack_crate(path, Path(tmp.name) / path.name.removesuffix(".zip"))


def first_mismatch(folder: Path, sums: dict[str, str]) -> tuple[str, str] | None:
    """The first file (path order) of ``sums`` (path relative to ``folder`` -> sha256 hex) that
    is not as recorded: ``(path, "missing")`` when it is absent, a link, not a plain file or
    outside ``folder``, ``(path, "altered")`` when its sha256 differs; None when all match."""
    for rel, digest in sorted(sums.items()):
        f = folder / rel
        if ".." in Path(rel).parts or f.is_symlink() or not f.is_file():
            return rel, "missing"
        if sha256_file(f) != digest:
            return rel, "altered"
    return None
