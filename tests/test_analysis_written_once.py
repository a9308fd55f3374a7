"""Results are written once (issue 6, section 3), and damaged runs analysed with --partial.

On copies of the real recorded run tests/data/pie-vs-red-local-0.1 (never modified):

- re-analysing an unchanged run changes no byte and no file (deterministic gzip, PDF and
  PNG; no time or absolute path in the text outputs);
- another toolkit version (NETREPRO_TOOLKIT_VERSION, the documented way to name one) writes
  into ``<run>/analysis-<version>/`` and keeps the earlier outputs; raw/ and run.json are
  never written;
- with --partial, every claim reading a trial whose data are incomplete is NOT EVALUABLE,
  decided from the trials the claim selects; junk raw files do not crash the analysis or
  bench.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import analysis
from analysis.provenance import VERSION_ENV
from analysis.claims import evaluate
from conftest import claim_records
from analysis.summary import SUMMARY_KEYS
from netrepro.core.errors import RunFolderError

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data" / "pie-vs-red-local-0.1"
#: the figure is the one `netrepro migrate` gives the recorded run's version 1 file
OUTPUTS = ["tidy.csv.gz", "summary.csv", "intervals.csv", "verdict.json", "report.md", "analysis.json", "figures/queue-delay.png",
           "figures/queue-delay.pdf", "figures/link-fidelity.png", "figures/link-fidelity.pdf",
           *(f"flent/{t}.flent.gz" for t in ("pie-unlimited", "red-unlimited", "pie-limited", "red-limited"))]
CLAIMS = ["pie-near-target", "red-follows-load", "red-above-pie-under-load"]


def _copy(parent: Path) -> Path:
    parent.mkdir(parents=True, exist_ok=True)
    run = parent / "run"
    shutil.copytree(DATA, run, ignore=shutil.ignore_patterns("expected", "README.md"))
    return run


def _state(root: Path) -> dict[str, tuple]:
    """Every file under root: (sha256, mtime_ns, inode): a rewrite with equal bytes shows too."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            st = p.stat()
            out[p.relative_to(root).as_posix()] = (hashlib.sha256(p.read_bytes()).hexdigest(), st.st_mtime_ns, st.st_ino)
    return out


def _cli(*argv: str, env: dict | None = None, module: str = "netrepro") -> subprocess.CompletedProcess:
    e = {k: v for k, v in os.environ.items() if not k.startswith("NETREPRO_")}
    return subprocess.run([sys.executable, "-m", module, *argv], cwd=REPO, env={**e, **(env or {})},
                          capture_output=True, text=True, timeout=300)


@pytest.fixture
def version(monkeypatch):
    """Name the toolkit version (as a user or CI can) so HEAD moving under the test cannot matter."""
    def set_(v: str):
        monkeypatch.setenv(VERSION_ENV, v)
    set_("test-1")
    return set_


# --- deterministic outputs --------------------------------------------------------------------
def test_reanalysis_changes_no_byte(tmp_path, version):
    run = _copy(tmp_path / "a")
    res = analysis.analyze(run)
    assert res.out_dir == run and sorted(p.relative_to(run).as_posix() for p in res.outputs) == sorted(OUTPUTS)
    first = _state(run)
    analysis.analyze(run)
    assert _state(run) == first  # same bytes, and not even rewritten (mtime, inode)

    # the same run elsewhere gives the same bytes: no absolute path, no time of analysis
    other = _copy(tmp_path / "elsewhere" / "deeper")
    analysis.analyze(other)
    assert {k: v[0] for k, v in _state(other).items()} == {k: v[0] for k, v in first.items()}

    gz = (run / "tidy.csv.gz").read_bytes()
    assert gz[:3] == b"\x1f\x8b\x08" and gz[3] & 0x08 == 0 and gz[4:8] == b"\0\0\0\0"  # no FNAME, MTIME 0
    with gzip.open(run / "tidy.csv.gz", "rt") as fh:
        assert fh.readline().strip() == "trial,subject,stream,t_s,metric,value"
    pdf = (run / "figures" / "queue-delay.pdf").read_bytes()
    assert b"/CreationDate" not in pdf and b"/ModDate" not in pdf
    png = (run / "figures" / "queue-delay.png").read_bytes()
    assert b"tIME" not in png and b"Creation Time" not in png
    text = "".join((run / f).read_text() for f in ("report.md", "verdict.json", "analysis.json", "summary.csv"))
    assert str(tmp_path) not in text and "/work/" not in text


# --- written once -----------------------------------------------------------------------------
def test_another_version_writes_a_new_folder(tmp_path, version):
    run = _copy(tmp_path)
    record = _state(run)  # run.json and raw/ as recorded
    analysis.analyze(run)
    v1 = _state(run)
    rec1 = json.loads((run / "analysis.json").read_text())
    assert rec1["made_by"]["version"] == "test-1" and rec1["made_by"]["version_from"] == VERSION_ENV
    assert rec1["inputs"]["raw_check"] == "all 148 raw files match the sha256 sums in run.json"
    assert set(rec1["outputs"]) == set(OUTPUTS) - {"analysis.json"}

    version("test-2")
    res = analysis.analyze(run)
    assert res.out_dir == run / "analysis-test-2"
    after = _state(run)
    assert {k: v for k, v in after.items() if not k.startswith("analysis-test-2/")} == v1  # earlier outputs kept
    assert sorted(k.removeprefix("analysis-test-2/") for k in after if k.startswith("analysis-test-2/")) == sorted(OUTPUTS)
    assert json.loads((run / "analysis-test-2" / "analysis.json").read_text())["made_by"]["version"] == "test-2"
    assert "analysis-test-2/" in (run / "analysis-test-2" / "report.md").read_text()

    analysis.analyze(run)  # test-2 again: its own folder, unchanged
    version("test-1")
    analysis.analyze(run)  # test-1 again: the run folder, unchanged
    assert _state(run) == after
    assert {k: v for k, v in after.items() if k == "run.json" or k.startswith("raw/")} == record


def test_outputs_of_an_older_toolkit_are_kept(tmp_path, version):
    run = _copy(tmp_path)
    shutil.copy(DATA / "expected" / "verdict.json", run / "verdict.json")  # made before analysis.json existed
    before = (run / "verdict.json").read_bytes()
    res = analysis.analyze(run, figures=False)
    assert res.out_dir == run / "analysis-test-1" and (run / "verdict.json").read_bytes() == before
    # without figures the output set differs, so it does not replace the one with figures
    assert analysis.analyze(run).out_dir == run / "analysis-test-1-2"


def test_version_from_the_environment_on_the_command_line(tmp_path):
    run = _copy(tmp_path)
    p = _cli("analyze", "pie-vs-red", "--run", str(run), env={VERSION_ENV: "cli-a"})
    assert p.returncode == 0, p.stderr
    p = _cli("analyze", "pie-vs-red", "--run", str(run), env={VERSION_ENV: "cli-b"})
    assert p.returncode == 0, p.stderr
    assert f"report {run / 'analysis-cli-b' / 'report.md'}" in p.stdout
    assert json.loads((run / "analysis.json").read_text())["made_by"]["version"] == "cli-a"


def test_toolkit_version_without_override_names_the_commit(monkeypatch):
    import re

    from analysis.provenance import toolkit
    from netrepro import __version__
    monkeypatch.delenv(VERSION_ENV, raising=False)
    t = toolkit()
    src = t["sources_sha256"]
    assert re.fullmatch(r"[0-9a-f]{64}", src)
    if not (REPO / ".git").exists():  # a copy without git: named by its sources
        assert t == {"version": f"{__version__}-src-{src[:8]}", "version_from": "sources", "package": __version__,
                     "commit": None, "sources_sha256": src}
        return
    assert t["version_from"] == "git"
    commit, dirty = t["commit"].removesuffix("-dirty"), t["commit"].endswith("-dirty")
    assert re.fullmatch(r"[0-9a-f]{40}", commit)
    assert t["version"] == f"{__version__}-g{commit[:12]}" + (f"-dirty-{src[:8]}" if dirty else "")


# --- --partial --------------------------------------------------------------------------------
def test_partial_reports_claims_not_evaluable(tmp_path, version):
    run = _copy(tmp_path)
    (run / "raw/pie-limited/client1/ping.txt").unlink()
    with pytest.raises(RunFolderError, match=r"raw/pie-limited/client1/ping.txt \(missing\)"):
        analysis.analyze(run)
    res = analysis.analyze(run, partial=True)
    assert res.out_dir == run / "analysis-test-1-partial"
    v = json.loads((res.out_dir / "verdict.json").read_text())
    by_id = {c["id"]: c for c in v["claims"]}
    # pie-near-target reads pie-unlimited and pie-limited; red-above-pie-under-load reads red and
    # pie on both variants; red-follows-load reads red-limited only, so it is judged as usual
    for cid in ("pie-near-target", "red-above-pie-under-load"):
        assert by_id[cid]["status"] == "not evaluable" and by_id[cid]["holds"] is None
        assert "pie-limited: raw/pie-limited/client1/ping.txt (missing)" in by_id[cid]["reason"]
    # the recorded 5 s phases leave its steps' intervals across the tolerance: undecided, its values holding
    assert by_id["red-follows-load"]["status"] == "undecided" and by_id["red-follows-load"]["values_alone"] == "holds"
    assert v["reproduced"] is False
    report = (res.out_dir / "report.md").read_text()
    assert "`pie-near-target` **not evaluable**" in report and "2 not evaluable" in report
    record = json.loads((res.out_dir / "analysis.json").read_text())
    assert record["partial"] is True
    assert record["incomplete_trials"] == {"pie-limited": ["raw/pie-limited/client1/ping.txt (missing)"]}

    p = _cli("analyze", "pie-vs-red", "--run", str(run), "--partial", env={VERSION_ENV: "test-1"})
    assert p.returncode == 0, p.stderr
    assert "[NOT EVALUABLE] pie-near-target: data incomplete: pie-limited" in p.stdout
    assert "[UNDECIDED] red-follows-load: its 95 % interval straddles a bound" in p.stdout
    # the last line names the verdict (never "no" for an inconclusive one) and the report
    last = p.stdout.strip().splitlines()[-1]
    assert last.startswith("[analyze] verdict: inconclusive; report ") and last.endswith("report.md"), last


def test_partial_trial_without_start_time(tmp_path, version):
    run = _copy(tmp_path)
    data = json.loads((run / "run.json").read_text())
    assert data["trials"][1]["id"] == "red-unlimited"
    data["trials"][1]["start_epoch_s"] = None
    (run / "run.json").write_text(json.dumps(data))
    with pytest.raises(RunFolderError, match=r"trials\[1\]\.start_epoch_s"):
        analysis.analyze(run, figures=False)
    res = analysis.analyze(run, figures=False, partial=True)
    assert res.out_dir.name.endswith("-partial")
    assert res.problems[0] == ("run.json: trials[1].start_epoch_s: missing; expected the trial's common start in "
                               "Unix seconds; the trial is left out")
    # the trial left out is one not run: the claim reading it is not judged, the others are
    status = {c["id"]: c["status"] for c in res.verdict["claims"]}
    assert status == {"pie-near-target": "undecided", "red-follows-load": "undecided",
                      "red-above-pie-under-load": "inconclusive"}
    assert [c.get("values_alone") for c in res.verdict["claims"][:2]] == ["fails", "holds"]
    assert res.verdict["claims"][2]["holds"] is None
    assert "red-unlimited: not_run (no record in run.json)" in res.verdict["claims"][2]["reason"]
    assert "red-unlimited" not in set(res.summary["trial"])


def test_partial_junk_raw_files_do_not_crash(tmp_path, version):
    run = _copy(tmp_path)
    junk = bytes(range(256)) * 40
    (run / "raw/pie-unlimited/client1/ping.txt").write_bytes(junk)
    flows = run / "raw/red-unlimited/client2/flows.csv"
    flows.write_bytes(flows.read_bytes()[: len(flows.read_bytes()) // 2])  # cut mid-line
    q = run / "raw/pie-limited/router/qdisc.jsonl"
    q.write_bytes(q.read_bytes() + b"{\"t\": 1795\x00\xff junk\nnot json at all\n")
    (run / "raw/red-limited/client3/base_rtt.txt").write_bytes(b"")
    (run / "raw/red-limited/router/meta-after.json").write_bytes(junk)
    res = analysis.analyze(run, partial=True)
    assert all(c["status"] == "not evaluable" for c in res.verdict["claims"])  # every trial touched
    assert set(res.record["incomplete_trials"]) == {"pie-unlimited", "red-unlimited", "pie-limited", "red-limited"}
    assert "raw/pie-unlimited/client1/ping.txt: no echo replies" in res.problems
    s = res.summary.set_index(["trial", "subject", "statistic", "phase"])["value"]
    # the junk line is skipped: pie-limited's queue samples still give its utilization
    assert s[("pie-limited", "router:eth1", "sent_utilization", "p3")] > 0.5
    # bench measures the same damaged run with --partial, and refuses it without
    p = _cli("pie-vs-red", "--run", str(run), "--json", "--partial", module="netrepro.cli.bench")
    assert p.returncode == 0, p.stderr
    f = json.loads(p.stdout)
    checks = {tid: {c["id"]: c for c in h["checks"]} for tid, h in f["health"].items()}
    assert checks["red-limited"]["nodes_cpu_busy"]["value"] is None  # meta-after.json is junk
    assert checks["pie-unlimited"]["ping_received"]["value"] == 0  # ping.txt is junk
    assert sorted(f["incomplete_trials"]) == ["pie-limited", "pie-unlimited", "red-limited", "red-unlimited"]
    p = _cli("pie-vs-red", "--run", str(run), module="netrepro.cli.bench")
    assert p.returncode == 2 and "5 raw files differ from the record" in p.stderr


def test_bench_on_an_intact_run(tmp_path):
    run = _copy(tmp_path)
    p = _cli("pie-vs-red", "--run", str(run), module="netrepro.cli.bench")
    assert p.returncode == 0, p.stderr
    assert "raw files: all 148 raw files match" in p.stdout
    # the recorded run's spec has no health thresholds: measured, not judged
    assert "health of the substrate: measured, not judged" in p.stdout
    assert "pie-limited measured: nodes_cpu_busy not measured, ping_received 90.0 %, flow_start_lag 99 ms" in p.stdout
    assert sorted(p.relative_to(run).as_posix() for p in run.rglob("*") if p.is_file() and "raw" not in p.parts) == ["run.json"]


# --- which claims a trial's data feed, from the claims' own data ------------------------------
def test_claims_depend_on_the_trials_they_read_not_on_their_names():
    import pandas as pd
    rows = [{"trial": t, "phase": "p3", "subject": "all", "statistic": "queue_delay_median_ms", "value": d}
            for t, d in [("pie-limited", 20), ("red-limited", 90), ("pie-unlimited", 20), ("red-unlimited", 95)]]
    summary = pd.DataFrame(rows, columns=SUMMARY_KEYS)

    def sel(trial):
        return {"statistic": "queue_delay_median_ms", "trials": [trial], "subjects": ["all"], "phases": ["p3"]}
    claims = [  # ids that name no AQM, and one that names the wrong one
        {"id": "claim-a", "text": "t", "check": {"kind": "bound", "select": sel("pie-limited"), "max": 40}},
        {"id": "red-only", "text": "t", "check": {"kind": "difference", "higher": sel("red-unlimited"),
                                                  "lower": sel("pie-unlimited"), "min": 20}},
        {"id": "claim-c", "text": "t", "check": {"kind": "bound", "select": sel("red-limited"), "min": 50}},
    ]
    ids = ["pie-unlimited", "red-unlimited", "pie-limited", "red-limited"]
    v = evaluate(summary, claim_records(claims), ids, {},
                         incomplete={"pie-unlimited": ["raw/pie-unlimited/router/qdisc.jsonl (altered)"]})
    assert [c["status"] for c in v["claims"]] == ["holds", "not evaluable", "holds"]
    assert v["claims"][1]["reason"] == "data incomplete: pie-unlimited: raw/pie-unlimited/router/qdisc.jsonl (altered)"
    assert v["reproduced"] is False  # never reproduced while a claim is not evaluable
    assert evaluate(summary, claim_records(claims), ids, {})["reproduced"] is True
