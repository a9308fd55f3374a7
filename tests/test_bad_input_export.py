"""Bad-input table: `netrepro export RUN` and `netrepro profile EXPERIMENT --output` given what a
stranger could put there (issue 54, part B).

A crate is published: nothing from outside the run may get into it (a symbolic link or a
special file among the files it would hold is refused, never followed), it is never written
inside the run, and the files the user names (--output, --citation) are refused when they are
not what they must be. Every export row starts from one copy of the real recorded run
tests/data/pie-vs-red-local-0.1, analysed once for this module (without figures: the flent/
folder is the output folder a row links out). A link's target is a file made in the row's own
folder ``{tmp}/elsewhere/``, never a real secret. Each row must get one line on stderr naming
the file or option and what was expected, exit 2, no traceback, and no file changed
(tests/badinput.py).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest

from badinput import Row, run_row

DATA = Path(__file__).resolve().parent / "data" / "pie-vs-red-local-0.1"
RAW_FILE = "raw/pie-limited/client1/ping.txt"
#: The analysed copy of DATA every export row copies (made once: :func:`analysed`).
ANALYSED: list[Path] = []
#: 418 bytes of YAML whose aliases stand for 9**9 (387 million) values: the "billion laughs"
#: file as a CITATION.cff, the author's name the whole of it (the audit's was 585 bytes of the
#: same kind: writing the deposit's creators made that name a string of gigabytes).
LAUGHS = "".join(f"{a}: &{a} [{', '.join([f'*{p}'] * 9) if p else ', '.join(['lol'] * 9)}]\n"
                 for p, a in zip(["", "a", "b", "c", "d", "e", "f", "g", "h"], "abcdefghi")) + "authors:\n  - name: *i\n"


@pytest.fixture(scope="module", autouse=True)
def analysed(tmp_path_factory):
    """The recorded run copied and analysed once (figures off), for every row to copy."""
    from analysis import analyze
    run = tmp_path_factory.mktemp("analysed") / "run"
    shutil.copytree(DATA, run, ignore=shutil.ignore_patterns("expected", "README.md"))
    analyze(run, figures=False)
    ANALYSED[:] = [run]
    yield run
    ANALYSED.clear()


def _copy(tmp: Path) -> Path:
    run = tmp / "run"
    shutil.copytree(ANALYSED[0], run)
    return run


def _run(tmp: Path) -> None:
    _copy(tmp)


def _elsewhere(tmp: Path, name: str, content: bytes) -> Path:
    """A file outside the run (``{tmp}/elsewhere/<name>``): what a hostile link points at."""
    (tmp / "elsewhere").mkdir(exist_ok=True)
    (tmp / "elsewhere" / name).write_bytes(content)
    return tmp / "elsewhere" / name


def _linked_out(rel: str):
    """A setup that moves the run's ``rel`` (a file or folder) out of the run and links it
    back: the same bytes, so only the link tells the crate would hold a file from elsewhere."""
    def setup(tmp: Path):
        run = _copy(tmp)
        (tmp / "elsewhere").mkdir(exist_ok=True)
        target = tmp / "elsewhere" / Path(rel).name
        shutil.move(run / rel, target)
        (run / rel).symlink_to(target)
    return setup


def _timings_linked_out(tmp: Path):
    (_copy(tmp) / "timings.json").symlink_to(_elsewhere(tmp, "id_ed25519", b"-----BEGIN OPENSSH PRIVATE KEY-----\n"))


def _fifo(rel: str):
    def setup(tmp: Path):
        run = _copy(tmp)
        (run / rel).unlink()
        os.mkfifo(run / rel)
    return setup


def _site_folder_linked_out(tmp: Path):
    """run.json records a site document whose folder site/ is a link out of the run, and
    analysis.json records that run.json (as a stranger who edits both would)."""
    run = _copy(tmp)
    secret = b"root:$6$not-a-real-hash:19000:0:99999:7:::\n"
    _elsewhere(tmp, "manifest.xml", secret)
    (run / "site").symlink_to(tmp / "elsewhere")
    data = json.loads((run / "run.json").read_text())
    data["site_documents"] = {"manifest.xml": hashlib.sha256(secret).hexdigest()}
    (run / "run.json").write_text(json.dumps(data, indent=1))
    record = json.loads((run / "analysis.json").read_text())
    record["inputs"]["run_json_sha256"] = hashlib.sha256((run / "run.json").read_bytes()).hexdigest()
    (run / "analysis.json").write_text(json.dumps(record, indent=1))


def _run_json_edited(tmp: Path):
    run = _copy(tmp)
    data = json.loads((run / "run.json").read_text())
    data["time_scale"] = 1
    (run / "run.json").write_text(json.dumps(data, indent=1))


def _raw_and_record_edited(tmp: Path):
    """A raw file changed and run.json's raw_sha256 changed to match (the raw check passes)."""
    run = _copy(tmp)
    (run / RAW_FILE).write_bytes((run / RAW_FILE).read_bytes() + b"64 bytes from 10.0.0.1: icmp_seq=9999 time=1 ms\n")
    data = json.loads((run / "run.json").read_text())
    data["raw_sha256"][RAW_FILE.removeprefix("raw/")] = hashlib.sha256((run / RAW_FILE).read_bytes()).hexdigest()
    (run / "run.json").write_text(json.dumps(data, indent=1))


def _run_and_link(tmp: Path):
    _copy(tmp)
    (tmp / "latest").symlink_to(tmp / "run")


def _run_and_file(tmp: Path):
    _copy(tmp)
    (tmp / "afile").write_text("a file, not a folder\n")


def _run_and_read_only_folder(tmp: Path):
    _copy(tmp)
    (tmp / "ro").mkdir()
    (tmp / "ro").chmod(0o555)


def _citation(content: bytes):
    def setup(tmp: Path):
        _copy(tmp)
        (tmp / "CITATION.cff").write_bytes(content)
    return setup


def _citation_fifo(tmp: Path):
    _copy(tmp)
    os.mkfifo(tmp / "CITATION.cff")


def _dangling(tmp: Path):
    (tmp / "profile").symlink_to(tmp / "nowhere" / "profile")


def _link_to_folder(tmp: Path):
    (tmp / "folder").mkdir()
    (tmp / "profile").symlink_to(tmp / "folder")


def _a_file(tmp: Path):
    (tmp / "afile").write_text("a file, not a folder\n")


EXPORT = ["export", "{tmp}/run", "--output", "{tmp}/crate.zip"]
OWN = "expected the run's own file or folder (a crate holds nothing from outside the run) (links are not followed)"
CFF = "expected a CITATION.cff (Citation File Format 1.2.0)"
PROFILE = ["profile", "pie-vs-red", "--output"]

ROWS = [
    # 1. a link or special file among the files the crate would hold: refused, never followed
    Row("export-raw-file-linked-out", EXPORT,
        [f"{{tmp}}/run/{RAW_FILE}: a symbolic link (to {{tmp}}/elsewhere/ping.txt)", "links are not followed"],
        _linked_out(RAW_FILE)),
    Row("export-raw-folder-linked-out", EXPORT,
        ["{tmp}/run/raw: a symbolic link (to {tmp}/elsewhere/raw)", "links are not followed"], _linked_out("raw")),
    Row("export-run-json-linked-out", EXPORT,
        ["{tmp}/run/run.json: a symbolic link", "expected the run record `netrepro run` wrote in this folder"],
        _linked_out("run.json")),
    Row("export-timings-json-linked-to-a-key", EXPORT,
        ["{tmp}/run/timings.json: a symbolic link (to {tmp}/elsewhere/id_ed25519)", OWN], _timings_linked_out),
    Row("export-summary-csv-linked-out", EXPORT,
        ["{tmp}/run/summary.csv: a symbolic link (to {tmp}/elsewhere/summary.csv)", OWN], _linked_out("summary.csv")),
    Row("export-output-folder-linked-out", EXPORT,
        ["{tmp}/run/flent: a symbolic link (to {tmp}/elsewhere/flent)", OWN], _linked_out("flent")),
    Row("export-analysis-json-linked-out", EXPORT,
        ["{tmp}/run/analysis.json: a symbolic link (to {tmp}/elsewhere/analysis.json)", OWN],
        _linked_out("analysis.json")),
    Row("export-site-folder-linked-out", EXPORT,
        ["{tmp}/run/site: a symbolic link (to {tmp}/elsewhere)", OWN], _site_folder_linked_out),
    Row("export-summary-csv-a-fifo", EXPORT,
        ["{tmp}/run/summary.csv: a FIFO, socket or device, not a regular file",
         "expected the run's own file or folder"], _fifo("summary.csv"), timeout_s=60),
    # 2. --output inside the run folder (its raw/ would then be damaged): refused, links resolved
    Row("export-output-inside-raw", ["export", "{tmp}/run", "--output", "{tmp}/run/raw/crate.zip"],
        ["--output {tmp}/run/raw/crate.zip: {tmp}/run/raw/crate.zip is inside the run folder {tmp}/run",
         "expected a path outside the run"], _run),
    Row("export-output-folder-inside-the-run", ["export", "{tmp}/run", "--output", "{tmp}/run/crate"],
        ["--output {tmp}/run/crate: {tmp}/run/crate is inside the run folder", "expected a path outside the run"],
        _run),
    Row("export-output-inside-the-run-through-a-link", ["export", "{tmp}/run", "--output", "{tmp}/latest/crate.zip"],
        ["--output {tmp}/latest/crate.zip: {tmp}/latest/crate.zip is inside the run folder {tmp}/run",
         "expected a path outside the run"], _run_and_link),
    # 3. an output place that cannot be written
    Row("export-output-under-a-regular-file", ["export", "{tmp}/run", "--output", "{tmp}/afile/crate.zip"],
        ["--output {tmp}/afile/crate.zip: {tmp}/afile is not a folder", "expected a path in one"], _run_and_file),
    Row("export-output-where-nothing-can-be-written", ["export", "{tmp}/run", "--output", "/proc/netrepro-crate.zip"],
        ["--output /proc/netrepro-crate.zip: /proc cannot be written", "expected a path in a folder you can write"],
        _run),
    *([Row("export-output-in-a-read-only-folder", ["export", "{tmp}/run", "--output", "{tmp}/ro/crate.zip"],
           ["--output {tmp}/ro/crate.zip: {tmp}/ro cannot be written (Permission denied)",
            "expected a path in a folder you can write"], _run_and_read_only_folder)]
      if os.geteuid() != 0 else []),   # root writes in a read-only folder: the /proc row stands for it
    # 4. a CITATION.cff bounded: aliases, size, text
    Row("export-citation-billion-laughs", EXPORT + ["--citation", "{tmp}/CITATION.cff"],
        ["{tmp}/CITATION.cff: line", "expected at most 100000 values once aliases are expanded"],
        _citation(LAUGHS.encode()), timeout_s=60),
    Row("export-citation-over-1-mib", EXPORT + ["--citation", "{tmp}/CITATION.cff"],
        ["{tmp}/CITATION.cff: more than 1048576 bytes", CFF + " of at most 1048576 bytes"],
        _citation(b"authors:\n" + b"  - name: x\n" * 100_000)),
    Row("export-citation-binary", EXPORT + ["--citation", "{tmp}/CITATION.cff"],
        ["{tmp}/CITATION.cff: not UTF-8 text (at byte 0)", CFF], _citation(bytes(range(255, 0, -1)))),
    # 5. a --citation that is not a regular file: refused before a byte is read
    Row("export-citation-dev-zero", EXPORT + ["--citation", "/dev/zero"],
        ["/dev/zero: a FIFO, socket or device, not a regular file", CFF], _run, timeout_s=60),
    Row("export-citation-a-fifo", EXPORT + ["--citation", "{tmp}/CITATION.cff"],
        ["{tmp}/CITATION.cff: a FIFO, socket or device, not a regular file", CFF], _citation_fifo, timeout_s=60),
    Row("export-citation-a-folder", EXPORT + ["--citation", "{tmp}/run"],
        ["{tmp}/run: a folder, not a regular file", CFF], _run),
    # 6. a run changed since its analysis: exported beside a stale analysis no more
    Row("export-run-json-edited-after-the-analysis", EXPORT,
        ["{tmp}/run/run.json: changed since the run was analysed", "inputs.run_json_sha256",
         "analyse the run again with `netrepro analyze --run {tmp}/run`"], _run_json_edited),
    Row("export-raw-file-and-record-edited-after-the-analysis", EXPORT,
        ["{tmp}/run/run.json: changed since the run was analysed", "expected the run as analysed"],
        _raw_and_record_edited),
    # 7. netrepro profile --output
    Row("profile-output-a-dangling-link", PROFILE + ["{tmp}/profile"],
        ["{tmp}/profile: (folder): a symbolic link", "expected a new folder for the profile"], _dangling),
    Row("profile-output-a-link-to-a-folder", PROFILE + ["{tmp}/profile"],
        ["{tmp}/profile: (folder): a symbolic link", "expected a new folder for the profile"], _link_to_folder),
    Row("profile-output-under-a-regular-file", PROFILE + ["{tmp}/afile/profile"],
        ["{tmp}/afile/profile: (folder): {tmp}/afile is not a folder", "expected a new folder in an existing one"],
        _a_file),
    Row("profile-output-where-nothing-can-be-written", PROFILE + ["/proc/netrepro-profile"],
        ["/proc/netrepro-profile: (folder): /proc cannot be written", "expected a new folder in a folder you can write"]),
    *([Row("profile-output-in-a-read-only-folder", PROFILE + ["{tmp}/ro/profile"],
           ["{tmp}/ro/profile: (folder): {tmp}/ro cannot be written (Permission denied)"],
           lambda tmp: (tmp / "ro").mkdir() or (tmp / "ro").chmod(0o555))]
      if os.geteuid() != 0 else []),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_bad_input(row, tmp_path):
    run_row(row, tmp_path)


def test_rows_are_many_and_unique():
    assert len(ROWS) >= 25 and len({r.id for r in ROWS}) == len(ROWS)


def test_a_run_analysed_again_after_a_change_is_exported_with_that_analysis(tmp_path):
    """The refusal's advice works: a run whose run.json changed, analysed again (the new
    analysis goes to analysis-<version>/ beside the stale one), exports with the new analysis."""
    from analysis import analyze
    from netrepro.runfolder.crate import export_run

    _run_json_edited(tmp_path)
    run = tmp_path / "run"
    again = analyze(run, figures=False).out_dir
    assert again != run, "the first analysis is never replaced"
    crate, _ = export_run(run, tmp_path / "crate")
    assert (crate / "analysis.json").read_bytes() == (again / "analysis.json").read_bytes()
    assert (crate / "run.json").read_bytes() == (run / "run.json").read_bytes()
    assert (crate / "summary.csv").read_bytes() == (again / "summary.csv").read_bytes()


def test_a_citation_linked_to_a_regular_file_is_read(tmp_path):
    """A --citation the user gives may be a link to a regular file (only the run's files are
    never followed)."""
    from netrepro.runfolder.citation import read_citation

    real = _elsewhere(tmp_path, "CITATION.cff", b"cff-version: 1.2.0\ntitle: t\nauthors:\n  - name: Lab\n")
    (tmp_path / "link.cff").symlink_to(real)
    assert read_citation(tmp_path / "link.cff")["authors"] == [{"name": "Lab"}]
