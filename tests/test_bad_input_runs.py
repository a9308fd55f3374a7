"""Bad-input table: `netrepro analyze`, `python -m analysis` and `python -m netrepro.cli.bench` on
damaged or malformed run folders (issue 6, section 2).

Every row starts from a copy of the real recorded run tests/data/pie-vs-red-local-0.1 (never
modified), damages it as a user's disk, an editor or a fault would, and must get one line on
stderr naming the file and the field (and, for damaged raw files, each such file), exit 2,
and no file changed (tests/badinput.py).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from badinput import Row, run_row
from conftest import distinct_run

DATA = Path(__file__).resolve().parent / "data" / "pie-vs-red-local-0.1"
RAW = "raw/pie-limited/client1"
JUNK = bytes(range(256)) * 8  # binary junk: every byte value, NULs included


def _copy(tmp: Path) -> Path:
    run = tmp / "run"
    shutil.copytree(DATA, run, ignore=shutil.ignore_patterns("expected", "README.md"))
    return run


def _edit_run_json(change):
    """A setup that copies the run and rewrites its run.json with ``change(data)``."""
    def setup(tmp: Path):
        run = _copy(tmp)
        data = json.loads((run / "run.json").read_text())
        change(data)
        (run / "run.json").write_text(json.dumps(data, indent=1))
    return setup


def _write(rel: str, content: bytes | None = None, cut: float | None = None, append: bytes | None = None):
    """A setup that copies the run, then deletes (content None), replaces, cuts (keep the
    first ``cut`` share of the bytes) or appends to ``rel``."""
    def setup(tmp: Path):
        run = _copy(tmp)
        p = run / rel
        if cut is not None:
            b = p.read_bytes()
            p.write_bytes(b[: int(len(b) * cut)])
        elif append is not None:
            p.write_bytes(p.read_bytes() + append)
        elif content is None:
            p.unlink()
        else:
            p.write_bytes(content)
    return setup


def _no_run_json(tmp: Path):
    (_copy(tmp) / "run.json").unlink()


def _del(key):
    return lambda d: d.pop(key)


def _no_start(d):
    del d["trials"][1]["start_epoch_s"]


def _bad_id(d):
    d["trials"][0]["id"] = "../../etc"


def _set(*path_and_value):
    """An edit setting run.json's field at ``path`` (keys and indices) to the last argument."""
    *path, value = path_and_value

    def change(d):
        for k in path[:-1]:
            d = d[k]
        d[path[-1]] = value
    return change


def _escaping_key(d):
    d["raw_sha256"]["../../run.json"] = "0" * 64


def _two_damaged(tmp: Path):
    run = _copy(tmp)
    (run / RAW / "ping.txt").unlink()
    p = run / "raw/red-limited/router/qdisc.jsonl"
    p.write_bytes(p.read_bytes()[:-100])


def _analysed_then_linked(rel: str):
    """A setup that copies the run, analyses it as this toolkit does (so that analysing it again
    writes into the run folder itself), then replaces the output ``rel`` by a symbolic link to
    {tmp}/elsewhere/<name> (a file of the user's, or a folder holding one), outside the run."""
    def setup(tmp: Path):
        from analysis import analyze
        run = _copy(tmp)
        analyze(run)
        p = run / rel
        dest = tmp / "elsewhere" / p.name
        dest.parent.mkdir()
        if p.is_dir():
            shutil.copytree(p, dest)
            shutil.rmtree(p)
        else:
            shutil.copy(p, dest)
            p.unlink()
        p.symlink_to(dest)
    return setup


def _raw_link(target: str, rel: str = "raw"):
    """A setup that copies the run and replaces ``rel`` (raw/ or a file under it) by a
    symbolic link to ``target``, somewhere outside the run."""
    def setup(tmp: Path):
        run = _copy(tmp)
        p = run / rel
        dest = target
        if dest.startswith("{tmp}"):  # a copy of the file, elsewhere in the row's folder
            dest = dest.replace("{tmp}", str(tmp))
            shutil.copy(p, dest)
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink()
        p.symlink_to(dest)
    return setup


LAB = Path(__file__).resolve().parent / "data" / "labs" / "pie-lab-local-0.2"


def _two_runs(tmp: Path):
    """Two runs of pie-vs-red, {tmp}/run and {tmp}/run2 (their raw files differ by one), a plain
    copy of the first in {tmp}/copy, ``latest`` pointing at the first (as
    results/<experiment>/latest does), a file {tmp}/out.txt and a run of pie-lab in {tmp}/lab."""
    run = _copy(tmp)
    distinct_run(DATA, tmp / "run2")
    shutil.copytree(run, tmp / "copy")
    (tmp / "latest").symlink_to("run")
    (tmp / "out.txt").write_text("not a folder\n")
    shutil.copytree(LAB, tmp / "lab")


def _second_scale(field: str, value):
    """:func:`_two_runs`, run2's run.json recording ``value`` as ``field`` (``rate_scale``,
    ``time_scale``: what compare reads as k and TS)."""
    def setup(tmp: Path):
        _two_runs(tmp)
        path = tmp / "run2" / "run.json"
        data = json.loads(path.read_text())
        data[field] = value
        path.write_text(json.dumps(data, indent=1))
    return setup


def _resumable(change=None, link: str | None = None, fifo: str | None = None):
    """A setup making {tmp}/run a run of pie-vs-red on the ns3 site that stopped part-way: the
    recorded run, its run.json recording the experiment file as it is now (as a run made now
    would) and its INCOMPLETE marker, so that nothing else stops its resume; then run.json
    rewritten with ``change(data)``, ``link`` (a name in the run) made a symbolic link to
    {tmp}/mine.txt (a file of the user's, outside the run), or ``fifo`` made a FIFO."""
    def setup(tmp: Path):
        from netrepro.experiment.spec import load_spec
        from netrepro.runfolder.writing import spec_as_recorded

        run = _copy(tmp)
        data = json.loads((run / "run.json").read_text())
        data.update(site="ns3", spec=spec_as_recorded(load_spec("pie-vs-red")))
        if change:
            change(data)
        (run / "run.json").write_text(json.dumps(data, indent=1))
        (run / "INCOMPLETE").write_text("run INCOMPLETE at trial red-limited: interrupted by SIGINT\n")
        (tmp / "mine.txt").write_text("the user's own file\n")
        if link:
            (run / link).unlink(missing_ok=True)
            (run / link).symlink_to(tmp / "mine.txt")
        if fifo:
            os.mkfifo(run / fifo)
    return setup


def _lost(value):
    return _set("lost_reservations", value)


ANALYZE = ["analyze", "pie-vs-red", "--run", "{tmp}/run"]
RESUME = ["pie-vs-red", "--site", "ns3", "--resume", "{tmp}/run"]
NAN = float("nan")  # json.dumps writes NaN, which Python's json module reads back
PARTIAL = "to analyze what is there, add --partial"

# (id, setup, expected strings): each damage is tried on analyze, python -m analysis and bench.
DAMAGE = [
    ("raw-file-deleted", _write(f"{RAW}/ping.txt"),
     ["run.json: raw_sha256: 1 raw file differs from the record", f"{RAW}/ping.txt (missing)", PARTIAL]),
    ("raw-file-truncated-mid-line", _write("raw/red-limited/client2/flows.csv", cut=0.5),
     ["raw_sha256", "raw/red-limited/client2/flows.csv (altered)", PARTIAL]),
    ("ping-replaced-by-binary-junk", _write(f"{RAW}/ping.txt", JUNK),
     ["raw_sha256", f"{RAW}/ping.txt (altered)", PARTIAL]),
    ("qdisc-jsonl-junk-line", _write("raw/pie-unlimited/router/qdisc.jsonl", append=b"{\"t\": 17953\x00junk\n"),
     ["raw_sha256", "raw/pie-unlimited/router/qdisc.jsonl (altered)"]),
    ("two-files-damaged-both-named", _two_damaged,
     ["2 raw files differ", f"{RAW}/ping.txt (missing)", "raw/red-limited/router/qdisc.jsonl (altered)"]),
    ("raw-file-not-in-record", _write(f"{RAW}/ping.txt.orig", b"64 bytes from x: icmp_seq=1 time=1 ms\n"),
     ["raw_sha256", f"{RAW}/ping.txt.orig (unlisted)"]),
    ("run-json-not-json", _write("run.json", b"experiment: pie-vs-red\ntrials: []\n"), ["run.json", "expected JSON"]),
    ("run-json-truncated", _write("run.json", cut=0.6), ["run.json", "expected JSON"]),
    ("run-json-binary-junk", _write("run.json", JUNK), ["run.json", "expected JSON"]),
    ("trial-without-start_epoch_s", _edit_run_json(_no_start),
     ["run.json", "trials[1].start_epoch_s: missing", "Unix seconds", PARTIAL]),
    ("run-folder-without-run.json", _no_run_json, ["{tmp}/run/run.json: no run.json", "netrepro run"]),
]
# run.json problems read by the analysis only (bench shares the same reader: a few suffice)
RECORD = [
    ("run-json-without-raw_sha256", _edit_run_json(_del("raw_sha256")), ["run.json", "raw_sha256: missing"]),
    ("run-json-without-time_scale", _edit_run_json(_del("time_scale")), ["run.json", "time_scale: missing"]),
    ("run-json-without-trials", _edit_run_json(_del("trials")), ["run.json", "trials: missing"]),
    ("run-json-not-an-object", _write("run.json", b"[1, 2]\n"), ["run.json", "expected a JSON object"]),
    ("trial-id-is-a-path", _edit_run_json(_bad_id), ["run.json", "trials[0].id", "plain name"]),
    # a field of the wrong type or an absurd value: one line naming it, never a traceback
    ("trial-id-is-a-list", _edit_run_json(_set("trials", 0, "id", [1, 2])),
     ["run.json", "trials[0].id: expected a plain name", "'[1, 2]'"]),
    ("trial-phases-not-a-list", _edit_run_json(_set("trials", 0, "phases", {"a": 1})),
     ["run.json", "trials[0].phases: expected a list of the trial's phases", "{name, start_s, end_s}"]),
    ("trial-phase-end-not-a-number", _edit_run_json(_set("trials", 0, "phases", [{"name": "p1", "start_s": 0,
                                                                                   "end_s": "soon"}])),
     ["run.json", "trials[0].phases: expected a list of the trial's phases"]),
    ("time-scale-absurd", _edit_run_json(_set("time_scale", 1e9)),
     ["run.json", "time_scale: expected a number from 0.001 to 100", "1000000000.0"]),
    ("raw_sha256-key-outside-raw", _edit_run_json(_escaping_key),
     ["run.json", "raw_sha256", "expected a path inside raw/"]),
    # issue 54: the fields read as numbers, times and lists, checked where run.json is read
    ("rate-scale-a-list", _edit_run_json(_set("rate_scale", [1, 2])),
     ["{tmp}/run/run.json: rate_scale: expected an object {k, why} (or null)", "got '[1, 2]'"]),
    ("rate-scale-k-of-0", _edit_run_json(_set("rate_scale", {"k": 0, "why": "RATE_SCALE=0"})),
     ["{tmp}/run/run.json: rate_scale.k: expected a number > 0", "got '0'"]),
    ("rate-scale-k-nan", _edit_run_json(_set("rate_scale", {"k": NAN, "why": "RATE_SCALE=0.5"})),
     ["{tmp}/run/run.json: rate_scale.k: expected a number > 0", "got 'nan'"]),
    ("lead-s-nan", _edit_run_json(_set("lead_s", NAN)),
     ["{tmp}/run/run.json: lead_s: expected the barrier's lead in seconds, a number from 0.2 to 3600", "got nan"]),
    ("lead-s-absurd", _edit_run_json(_set("lead_s", 1e9)),
     ["{tmp}/run/run.json: lead_s: expected the barrier's lead in seconds", "got 1000000000.0"]),
    ("started-at-yesterday", _edit_run_json(_set("started_at", "yesterday")),
     ["{tmp}/run/run.json: started_at: expected an ISO 8601 time with its UTC offset", "got 'yesterday'"]),
    ("lost-reservations-a-string", _edit_run_json(_lost("lost")),
     ["{tmp}/run/run.json: lost_reservations: expected a list of the reservations the campaign lost", "got 'lost'"]),
]

ROWS = [Row(f"analyze-{i}", ANALYZE, e, s) for i, s, e in DAMAGE + RECORD]
ROWS += [Row(f"python-m-analysis-{i}", ["{tmp}/run"], e, s, module="analysis") for i, s, e in DAMAGE[:1] + DAMAGE[6:8] + DAMAGE[9:]]
ROWS += [Row(f"bench-{i}", ["pie-vs-red", "--run", "{tmp}/run"], e, s, module="netrepro.cli.bench")
         for i, s, e in DAMAGE + RECORD[:2]]
ROWS += [
    Row("analyze-run-folder-missing", ["analyze", "pie-vs-red", "--run", "{tmp}/nope"],
        ["{tmp}/nope/run.json: no run.json", "the run folder does not exist"]),
    Row("analyze-a-run-of-another-experiment", ["analyze", "pie-lab", "--run", "{tmp}/run"],
        ["{tmp}/run/run.json: experiment: 'pie-vs-red': a run of another experiment", "expected a run of 'pie-lab'"],
        lambda tmp: _copy(tmp) and None),
    Row("analyze-bad-toolkit-version", ANALYZE, ["NETREPRO_TOOLKIT_VERSION", "expected a version name"],
        lambda tmp: _copy(tmp) and None, env={"NETREPRO_TOOLKIT_VERSION": "v1; rm -rf /"}),
    # issue 20: raw/ (or a file in it) a symbolic link out of the run: refused, --partial or not,
    # before anything under it is listed or read
    Row("analyze-partial-raw-linked-to-etc", ANALYZE + ["--partial"],
        ["{tmp}/run/raw: a symbolic link (to /etc)", "expected the run's own raw/ folder"], _raw_link("/etc")),
    Row("analyze-raw-linked-to-root", ANALYZE, ["{tmp}/run/raw: a symbolic link (to /)", "links are not followed"],
        _raw_link("/")),
    Row("analyze-partial-raw-file-linked-out", ANALYZE + ["--partial"],
        [f"{{tmp}}/run/{RAW}/ping.txt: a symbolic link (to /etc/passwd)", "regular file inside the run's raw/"],
        _raw_link("/etc/passwd", f"{RAW}/ping.txt")),
    Row("analyze-run-json-linked-out", ANALYZE, ["{tmp}/run/run.json: a symbolic link",
                                                 "expected the run record `netrepro run` wrote in this folder"],
        _raw_link("{tmp}/elsewhere.json", "run.json")),
    # issue 54: an analysed run whose output (a folder or a file) is a link out of the run: the
    # analysis again would write through it (figures/) or replace it in the run (summary.csv)
    Row("analyze-again-figures-linked-out", ANALYZE, ["{tmp}/run/figures: a symbolic link (to {tmp}/elsewhere/figures)",
                                                       "an analysis never writes through a link"],
        _analysed_then_linked("figures")),
    Row("analyze-again-summary-linked-out", ANALYZE, ["{tmp}/run/summary.csv: a symbolic link",
                                                       "expected the analysis' own outputs"],
        _analysed_then_linked("summary.csv")),
    # issue 20: compare checks every argument before it writes anything (never into a run)
    Row("compare-the-same-run-twice", ["compare", "{tmp}/run", "{tmp}/run"],
        ["RUN {tmp}/run: the same run as {tmp}/run", "expected each run once"], _two_runs),
    Row("compare-a-run-and-its-copy", ["compare", "{tmp}/run", "{tmp}/copy"],
        ["RUN {tmp}/copy: a copy of RUN {tmp}/run (the same raw files", "expected each run once"], _two_runs),
    Row("compare-a-run-and-its-latest", ["compare", "{tmp}/run", "{tmp}/latest"],
        ["RUN {tmp}/latest: the same run as {tmp}/run", "expected each run once"], _two_runs),
    Row("compare-out-onto-a-file", ["compare", "{tmp}/run", "{tmp}/run2", "--out", "{tmp}/out.txt"],
        ["--out: {tmp}/out.txt: not a folder", "expected a folder to write compare-<time>/ into"], _two_runs),
    Row("compare-out-inside-a-run", ["compare", "{tmp}/run", "{tmp}/run2", "--out", "{tmp}/run2/cmp"],
        ["--out: {tmp}/run2/cmp: inside the run folder {tmp}/run2", "expected a folder outside every run"], _two_runs),
    Row("compare-runs-of-two-experiments", ["compare", "{tmp}/run", "{tmp}/lab"],
        ["{tmp}/lab/run.json: experiment: runs of pie-lab, pie-vs-red", "expected runs of one experiment"], _two_runs),
    # a run's rate scale k (run.json rate_scale.k; missing or null: 1) and time scale TS (run.json
    # time_scale) are read before anything is written
    Row("compare-a-rate-scale-k-not-a-number", ["compare", "{tmp}/run", "{tmp}/run2"],
        ["{tmp}/run2/run.json: rate_scale.k: expected a number > 0", "got 'fast'"], _second_scale("rate_scale", {"k": "fast"})),
    Row("compare-a-rate-scale-k-of-0", ["compare", "{tmp}/run", "{tmp}/run2"],
        ["{tmp}/run2/run.json: rate_scale.k: expected a number > 0", "got '0'"], _second_scale("rate_scale", {"k": 0})),
    Row("compare-a-rate-scale-not-an-object", ["compare", "{tmp}/run", "{tmp}/run2"],
        ["{tmp}/run2/run.json: rate_scale: expected an object {k, why} (or null)", "got '0.5'"],
        _second_scale("rate_scale", 0.5)),
    Row("compare-a-time-scale-not-a-number", ["compare", "{tmp}/run", "{tmp}/run2"],
        ["{tmp}/run2/run.json: time_scale: expected a number > 0 (the factor of every duration)", "got 'fast'"],
        _second_scale("time_scale", "fast")),
    Row("compare-a-time-scale-of-0", ["compare", "{tmp}/run", "{tmp}/run2"],
        ["{tmp}/run2/run.json: time_scale: expected a number > 0", "got '0'"], _second_scale("time_scale", 0)),
    Row("bench-timings-json-junk", ["pie-vs-red", "--run", "{tmp}/run"], ["timings.json", "step -> seconds", PARTIAL],
        _write("timings.json", JUNK), module="netrepro.cli.bench"),
    # issue 54: a rate scale k of text made bench stop with a traceback, exit 1
    Row("bench-rate-scale-k-not-a-number", ["pie-vs-red", "--run", "{tmp}/run"],
        ["netrepro.cli.bench: {tmp}/run/run.json: rate_scale.k: expected a number > 0", "got 'x'"],
        _edit_run_json(_set("rate_scale", {"k": "x", "why": "RATE_SCALE=x"})), module="netrepro.cli.bench"),
    Row("bench-lead-s-nan", ["pie-vs-red", "--run", "{tmp}/run"], ["{tmp}/run/run.json: lead_s", "got nan"],
        _edit_run_json(_set("lead_s", NAN)), module="netrepro.cli.bench"),
    # issue 54: a resumed run writes into its folder (run.json, INCOMPLETE, .reserve, timings.json
    # for reproduce): a link or FIFO anywhere in it, or a field the run reads of the wrong shape,
    # is refused before anything is written or reserved
    Row("run-resume-timings-json-linked-out", ["run", *RESUME],
        ["{tmp}/run/timings.json: a symbolic link (to {tmp}/mine.txt)", "never through a link"],
        _resumable(link="timings.json")),
    Row("reproduce-resume-timings-json-linked-out", ["reproduce", *RESUME],
        ["{tmp}/run/timings.json: a symbolic link (to {tmp}/mine.txt)", "never through a link"],
        _resumable(link="timings.json")),
    Row("run-resume-incomplete-linked-out", ["run", *RESUME],
        ["{tmp}/run/INCOMPLETE: a symbolic link (to {tmp}/mine.txt)", "never through a link"],
        _resumable(link="INCOMPLETE")),
    Row("run-resume-run-json-tmp-linked-out", ["run", *RESUME],
        ["{tmp}/run/.run.json.tmp: a symbolic link (to {tmp}/mine.txt)", "never through a link"],
        _resumable(link=".run.json.tmp")),
    Row("run-resume-reserve-a-fifo", ["run", *RESUME],
        ["{tmp}/run/.reserve: a special file (FIFO, socket or device)", "plain file or folder"],
        _resumable(fifo=".reserve")),
    Row("run-resume-lost-reservations-a-string", ["run", *RESUME],
        ["{tmp}/run/run.json: lost_reservations: expected a list of the reservations the campaign lost", "got 'lost'"],
        _resumable(_lost("lost"))),
    Row("run-resume-lost-reservation-without-its-copy", ["run", *RESUME],
        ["{tmp}/run/run.json: lost_reservations[0]: expected {reservation: its copy number, at: an ISO 8601 time",
         "got {'trial': 'pie-limited'}"],
        _resumable(_lost([{"trial": "pie-limited"}]))),
    Row("run-resume-lead-s-nan", ["run", *RESUME], ["{tmp}/run/run.json: lead_s", "got nan"],
        _resumable(_set("lead_s", NAN))),
    Row("bench-neither-experiment-nor-run", [], ["expected an experiment", "or --run RUN_FOLDER"],
        lambda tmp: None, module="netrepro.cli.bench"),
    Row("bench-unknown-option", ["pie-vs-red", "--run", "{tmp}/run", "--partail"], ["--partail"],
        lambda tmp: _copy(tmp) and None, module="netrepro.cli.bench"),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_bad_input(row, tmp_path):
    run_row(row, tmp_path)


def test_table_size():
    # the count the closing note gives
    assert len(ROWS) >= 12 and len({r.id for r in ROWS}) == len(ROWS)
