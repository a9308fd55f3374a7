"""Bad-input table: `netrepro analyze EXPERIMENT --run CRATE` on crates and zips from strangers
(issue 54, part A), and a crate analysed twice staying as published.

Every row starts from a real crate: the recorded run tests/data/pie-vs-red-local-0.1, analysed
and exported once per module (netrepro.runfolder.crate.export_run) as a zip and as a folder.
Each row copies it into its own folder and damages it as a stranger could: raw byte edits of
the zip (a bad CRC, bad deflate data, a bad local header, names that differ), odd entry names,
a zip bomb (its sizes in the central directory, or a few MB of zeros: nothing near the bounds is
ever written), links and FIFOs in a folder crate, bad metadata, files the metadata does not
list. Each must get one line on stderr naming the input and what was expected, exit 2, and no
file changed (tests/badinput.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import subprocess
import zipfile
from pathlib import Path

import pytest

from analysis import analyze
from badinput import Row, run_row, tree_digest
from netrepro.cli.commands import main
from netrepro.core.errors import RunFolderError
from netrepro.runfolder import cratereading as crates
from netrepro.runfolder.crate import export_run
from netrepro.runfolder.cratereading import CRATE_METADATA, open_crate, unpack_crate

DATA = Path(__file__).resolve().parent / "data" / "pie-vs-red-local-0.1"
#: The module's crate, made once (:func:`base`): ``zip``, ``folder``, ``run``.
BASE: dict[str, Path] = {}
ARGV = ["analyze", "pie-vs-red", "--run", "{tmp}/c.zip"]
FOLDER_ARGV = ["analyze", "pie-vs-red", "--run", "{tmp}/c"]


@pytest.fixture(scope="module", autouse=True)
def base(tmp_path_factory):
    """The recorded run analysed (no figures) and exported as ``c.zip`` and as the folder ``c``."""
    home = tmp_path_factory.mktemp("base")
    run = home / "run"
    shutil.copytree(DATA, run, ignore=shutil.ignore_patterns("expected", "README.md"))
    analyze(run, figures=False)
    (home / "z").mkdir()
    (home / "f").mkdir()   # each its own folder: the deposit metadata beside it is c.zenodo.json
    BASE.update(run=run, zip=export_run(run, home / "z" / "c.zip")[0], folder=export_run(run, home / "f" / "c")[0])
    return BASE


# --- zips: raw byte edits ----------------------------------------------------------------------
def _central(data: bytes, name: str) -> int:
    """The offset of ``name``'s central directory header in the zip ``data`` (APPNOTE 4.3.12)."""
    at = data.find(b"PK\x01\x02")
    while at >= 0:
        n = struct.unpack_from("<H", data, at + 28)[0]
        if data[at + 46: at + 46 + n] == name.encode():
            return at
        at = data.find(b"PK\x01\x02", at + 4)
    raise AssertionError(f"{name} not in the zip's central directory")


def _local(data: bytes, name: str) -> tuple[int, int]:
    """``(local header offset, data offset)`` of ``name`` (APPNOTE 4.3.7: 30 bytes, the name,
    the extra field)."""
    at = struct.unpack_from("<I", data, _central(data, name) + 42)[0]
    n, m = struct.unpack_from("<HH", data, at + 26)
    return at, at + 30 + n + m


def _bytes(edit):
    """A setup copying the base zip to ``c.zip`` with ``edit(bytearray)`` applied to its bytes."""
    def setup(tmp: Path):
        data = bytearray(BASE["zip"].read_bytes())
        edit(data)
        (tmp / "c.zip").write_bytes(bytes(data))
    return setup


def _bad_crc(d):
    at = _central(d, "run.json") + 16
    d[at:at + 4] = bytes(b ^ 0xFF for b in d[at:at + 4])


def _bad_deflate(d):
    start = _local(d, "run.json")[1]
    d[start:start + 8] = b"\xff" * 8   # deflate block type 3: reserved (RFC 1951 3.2.3)


def _bad_local_header(d):
    at = _local(d, "run.json")[0]
    d[at:at + 4] = b"XXXX"


def _names_differ(d):
    at = _local(d, "run.json")[0] + 30
    d[at:at + 8] = b"rum.json"


def _size(name: str, size: int):
    """An edit making the central directory claim ``size`` bytes for ``name`` (offset 24)."""
    def edit(d):
        struct.pack_into("<I", d, _central(d, name) + 24, size)
    return edit


def _cut(d):
    del d[len(d) // 2:]


def _rezip(*extra: tuple[str | zipfile.ZipInfo, bytes]):
    """A setup writing the base zip's entries and then ``extra`` ones (name or ZipInfo, bytes)."""
    def setup(tmp: Path):
        with zipfile.ZipFile(BASE["zip"]) as src, zipfile.ZipFile(tmp / "c.zip", "w", zipfile.ZIP_DEFLATED) as z:
            for info in src.infolist():
                z.writestr(info, src.read(info))
            for name, content in extra:
                with z.open(name if isinstance(name, zipfile.ZipInfo) else _entry(name, 0o100000), "w") as f:
                    f.write(content)
    return setup


def _entry(name: str, kind: int, compress=zipfile.ZIP_DEFLATED) -> zipfile.ZipInfo:
    info = zipfile.ZipInfo(name)
    info.external_attr, info.compress_type = (kind | 0o644) << 16, compress
    return info


def _read_only(tmp: Path):
    """The base zip in ``ro/``, a folder that even root cannot write in (chattr +i; chmod for
    others); :func:`test_bad_input` lifts both afterwards."""
    ro = tmp / "ro"
    ro.mkdir()
    shutil.copy(BASE["zip"], ro / "c.zip")
    ro.chmod(0o555)
    if os.geteuid() == 0:
        subprocess.run(["chattr", "+i", str(ro)], check=True)


# --- folder crates and metadata ------------------------------------------------------------------
def _folder(change):
    """A setup copying the base folder crate to ``c`` and calling ``change(c, tmp)``."""
    def setup(tmp: Path):
        c = tmp / "c"
        shutil.copytree(BASE["folder"], c)
        change(c, tmp)
    return setup


def _outside(tmp: Path) -> Path:
    out = tmp / "outside"
    out.mkdir()
    (out / "secret.txt").write_text("not the crate's\n")
    return out


def _figures_link(c, tmp):
    (c / "figures").symlink_to(_outside(tmp), target_is_directory=True)


def _file_link(c, tmp):
    (c / "report.md").unlink()
    (c / "report.md").symlink_to(_outside(tmp) / "secret.txt")


def _fifo(c, tmp):
    os.mkfifo(c / "raw" / "pie-limited" / "client1" / "pipe")


def _extra_file(c, tmp):
    (c / "notes.txt").write_text("not listed\n")


def _metadata(change):
    """A change of the folder crate's metadata: ``change(doc)`` returns the new document."""
    def edit(c, tmp):
        p = c / CRATE_METADATA
        p.write_text(json.dumps(change(json.loads(p.read_text()))))
    return edit


def _no_sums(doc):
    for e in doc["@graph"]:
        e.pop("sha256", None)
    return doc


def _descriptor_twice(doc):
    doc["@graph"].append(next(e for e in doc["@graph"] if e["@id"] == CRATE_METADATA))
    return doc


def _graph_object(doc):
    return {**doc, "@graph": {e["@id"]: e for e in doc["@graph"]}}


def _huge_metadata(c, tmp):
    with open(c / CRATE_METADATA, "r+b") as f:   # sparse: nothing near 300 MB is written
        f.truncate(300 << 20)


ROWS = [
    # 1. a damaged zip
    Row("zip-bad-crc", ARGV, ["{tmp}/c.zip", "entry 'run.json': damaged (Bad CRC-32", "expected a crate as"],
        _bytes(_bad_crc)),
    Row("zip-bad-deflate-data", ARGV, ["{tmp}/c.zip", "entry 'run.json': damaged", "invalid", "expected a crate as"],
        _bytes(_bad_deflate)),
    Row("zip-bad-local-header", ARGV, ["{tmp}/c.zip", "entry 'run.json': damaged (Bad magic number for file header"],
        _bytes(_bad_local_header)),
    Row("zip-central-and-local-names-differ", ARGV, ["{tmp}/c.zip", "entry 'run.json': damaged (File name in directory"],
        _bytes(_names_differ)),
    Row("zip-cut-in-half", ARGV, ["{tmp}/c.zip", "not a readable zip file", "expected a crate as"], _bytes(_cut)),
    # 2. odd entry names
    Row("zip-empty-name", ARGV, ["{tmp}/c.zip", "entry '': an empty name; expected a path inside the crate"],
        _rezip(("", b"x"))),
    Row("zip-dot-name", ARGV, ["{tmp}/c.zip", "entry '.': an empty, '.' or '..' part", "expected a path inside"],
        _rezip((".", b"x"))),
    Row("zip-file-and-folder-of-one-name", ARGV, ["{tmp}/c.zip", "entry 'run.json/x': a file and a folder of one name"],
        _rezip(("run.json/x", b"x"))),
    Row("zip-name-twice", ARGV, ["{tmp}/c.zip", "entry 'run.json': a second entry of this name"],
        _rezip(("run.json", b"{}"))),
    Row("zip-300-character-name", ARGV, ["{tmp}/c.zip", "... (300 characters): a name too long for a disk",
                                         "at most 255 bytes"], _rezip(("a" * 300, b"x"))),
    Row("zip-parent-name", ARGV, ["{tmp}/c.zip", "entry '../outside.txt'", "expected a path inside"],
        _rezip(("../outside.txt", b"x"))),
    Row("zip-symlink-entry", ARGV, ["{tmp}/c.zip", "entry 'raw/link': a link or special file"],
        _rezip((_entry("raw/link", 0o120000), b"/etc/passwd"))),
    Row("zip-fifo-entry", ARGV, ["{tmp}/c.zip", "entry 'raw/pipe': a link or special file"],
        _rezip((_entry("raw/pipe", 0o010000), b""))),
    # 3. a zip bomb: 4 MiB of zeros deflate to 4 kB; sizes the central directory lies about
    Row("zip-bomb-ratio", ARGV, ["{tmp}/c.zip", "entry 'raw/zeros.bin':", "bytes inflate to 4194304",
                                 "expected at most 100 times (a zip bomb?)"], _rezip(("raw/zeros.bin", bytes(4 << 20)))),
    Row("zip-bomb-central-directory-claims-3-GiB", ARGV,
        ["{tmp}/c.zip", "entry 'run.json': unpacks to 3221225472 bytes; expected at most 268435456"],
        _bytes(_size("run.json", 3 << 30))),
    Row("zip-central-directory-claims-fewer-bytes", ARGV, ["{tmp}/c.zip", "entry 'run.json': damaged (Bad CRC-32"],
        _bytes(_size("run.json", 100))),
    Row("zip-metadata-claims-40-MiB", ARGV,
        ["{tmp}/c.zip", "entry 'ro-crate-metadata.json': unpacks to 41943040 bytes; expected at most 33554432"],
        _bytes(_size(CRATE_METADATA, 40 << 20))),
    # 4. links and special files in a folder crate
    Row("folder-figures-is-a-link", FOLDER_ARGV, ["{tmp}/c/figures: a symbolic link", "expected only plain files"],
        _folder(_figures_link)),
    Row("folder-file-is-a-link", FOLDER_ARGV, ["{tmp}/c/report.md: a symbolic link", "expected only plain files"],
        _folder(_file_link)),
    Row("folder-fifo", FOLDER_ARGV, ["{tmp}/c/raw/pie-limited/client1/pipe: not a regular file (a FIFO, socket or device)"],
        _folder(_fifo), timeout_s=60),
    # 5. a zip in a folder that cannot be written
    Row("zip-in-read-only-folder", ["analyze", "pie-vs-red", "--run", "{tmp}/ro/c.zip"],
        ["{tmp}/ro: cannot hold the analysis folder c-analysis", "expected a folder that can be written beside the "
         "crate c.zip"], _read_only),
    # 7. the metadata
    Row("metadata-without-checksums", FOLDER_ARGV, ["{tmp}/c/ro-crate-metadata.json: ", "sha256: expected the file's "
                                                    "sha256"], _folder(_metadata(_no_sums))),
    Row("metadata-descriptor-twice", FOLDER_ARGV, ["{tmp}/c/ro-crate-metadata.json: @graph: 'ro-crate-metadata.json' "
                                                   "appears twice; expected each entity once"],
        _folder(_metadata(_descriptor_twice))),
    Row("metadata-graph-not-a-list", FOLDER_ARGV, ["{tmp}/c/ro-crate-metadata.json: @graph: expected a list"],
        _folder(_metadata(_graph_object))),
    Row("metadata-300-MB", FOLDER_ARGV, ["{tmp}/c/ro-crate-metadata.json: 314572800 bytes; expected an RO-Crate's "
                                         "metadata of at most 33554432 bytes"], _folder(_huge_metadata)),
    Row("metadata-not-json", FOLDER_ARGV, ["{tmp}/c/ro-crate-metadata.json: not UTF-8 JSON"],
        _folder(lambda c, tmp: (c / CRATE_METADATA).write_bytes(b"[" * 100_000))),
    # 8. files the metadata does not list
    Row("zip-unlisted-file", ARGV, ["{tmp}/c.zip", "entry 'notes.txt': not listed in ro-crate-metadata.json"],
        _rezip(("notes.txt", b"hello\n"))),
    Row("folder-unlisted-file", FOLDER_ARGV, ["{tmp}/c/notes.txt: not listed in ro-crate-metadata.json"],
        _folder(_extra_file)),
    Row("not-a-zip", ["analyze", "pie-vs-red", "--run", "{tmp}/c.txt"], ["{tmp}/c.txt: not a readable zip file"],
        lambda tmp: (tmp / "c.txt").write_text("hello\n") and None),
]


@pytest.mark.filterwarnings("ignore:Duplicate name")   # zip-name-twice: zipfile warns as it writes it
@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_bad_input(row, tmp_path):
    try:
        run_row(row, tmp_path)
    finally:
        if (tmp_path / "ro").exists():
            if os.geteuid() == 0:
                subprocess.run(["chattr", "-i", str(tmp_path / "ro")], check=True)
            (tmp_path / "ro").chmod(0o755)


def test_table_size():
    assert len(ROWS) >= 20 and len({r.id for r in ROWS}) == len(ROWS)


# --- a crate is input only ------------------------------------------------------------------------
def _tree_sha256(root: Path) -> str:
    return hashlib.sha256(json.dumps(tree_digest(root), sort_keys=True).encode()).hexdigest()


@pytest.mark.parametrize("kind", ["zip", "folder"])
def test_a_crate_analysed_twice_stays_as_published_and_gives_two_equal_analyses(kind, tmp_path, capsys):
    """The same crate analysed twice: it stays byte for byte as published (so the documented
    check passes the second time too), and each analysis goes into a new folder beside it,
    ``c-analysis/`` then ``c-analysis-2/``, with the run's own summary.csv and verdict.json; the
    console's verdict line names the folder; a zip's temporary unpacking is gone."""
    crate = tmp_path / BASE[kind].name
    (shutil.copy if kind == "zip" else shutil.copytree)(BASE[kind], crate)
    before = _tree_sha256(tmp_path / crate.name) if kind == "folder" else hashlib.sha256(crate.read_bytes()).hexdigest()
    first = analyze(crate, figures=False)
    assert main(["analyze", "pie-vs-red", "--run", str(crate)]) == 0
    assert f"report {tmp_path / 'c-analysis-2' / 'report.md'}" in capsys.readouterr().out.splitlines()[-1]
    after = _tree_sha256(tmp_path / crate.name) if kind == "folder" else hashlib.sha256(crate.read_bytes()).hexdigest()
    assert after == before, "the crate was written"
    assert first.out_dir == tmp_path / "c-analysis"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([crate.name, "c-analysis", "c-analysis-2"])
    for name in ("summary.csv", "verdict.json"):
        own = (BASE["run"] / name).read_bytes()
        assert (tmp_path / "c-analysis" / name).read_bytes() == own == (tmp_path / "c-analysis-2" / name).read_bytes()
    assert not [p for p in tmp_path.rglob(".crate-*")], "the unpacked zip was removed"


def test_a_zip_is_unpacked_for_the_time_of_its_use(tmp_path):
    with open_crate(BASE["zip"], scratch=tmp_path) as folder:
        assert folder.parent.parent == tmp_path and folder.name == "c" and (folder / "run.json").is_file()
    assert not list(tmp_path.iterdir())
    assert unpack_crate(BASE["zip"], tmp_path / "u") == tmp_path / "u"
    with pytest.raises(RunFolderError, match="u: cannot be made"):
        unpack_crate(BASE["zip"], tmp_path / "u")


@pytest.mark.parametrize("bound, value, message", [
    ("MAX_ENTRIES", 100, "entries; expected at most 100"),
    ("MAX_TOTAL_BYTES", 1 << 20, f"unpacks to more than {1 << 20} bytes"),
])
def test_the_bounds_are_checked_from_the_central_directory(bound, value, message, tmp_path, monkeypatch):
    """The entry count and the total size, at bounds the base crate passes (271 entries, 14 MB
    for the full-length record) made smaller: refused before anything is written."""
    monkeypatch.setattr(crates, bound, value)
    with pytest.raises(RunFolderError, match=message):
        unpack_crate(BASE["zip"], tmp_path / "u")
    assert not (tmp_path / "u").exists()


def test_the_total_is_enforced_again_while_reading(tmp_path, monkeypatch):
    """A zip whose sizes pass the check and then inflate past the total (the bound lowered as
    the first file is read): refused, and the half-unpacked folder removed."""
    real = crates.check_zip

    def lower(z, path):
        sums = real(z, path)
        monkeypatch.setattr(crates, "MAX_TOTAL_BYTES", 1000)
        return sums
    monkeypatch.setattr(crates, "check_zip", lower)
    with pytest.raises(RunFolderError, match="unpacks to more than 1000 bytes"):
        unpack_crate(BASE["zip"], tmp_path / "u")
    assert not (tmp_path / "u").exists()


def test_a_folder_crate_of_more_entries_than_the_bound_is_refused(monkeypatch):
    """The folder crate's file count, at a bound the base crate passes made smaller: refused
    before any file is hashed."""
    monkeypatch.setattr(crates, "MAX_ENTRIES", 10)
    with pytest.raises(RunFolderError, match="more than 10 files"):
        crates.verify_crate(BASE["folder"])
