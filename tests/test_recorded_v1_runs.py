"""Runs recorded with a schema_version 1 experiment file (pie-vs-red's format before it was
migrated) still analyse, through the one analysis path: netrepro.runfolder.reading.read_run converts the
recorded spec once, in memory (netrepro.experiment.migrate.migrate_data), and analysis/outputs.py computes
what the version 1 analysis computed.

Golden data, as Flent's: tests/data/pie-vs-red-local-0.1 (README.md says how it was recorded)
with, in ``expected/``, the summary.csv and verdict.json the version 1 analysis wrote for it.
The analysis must give the same per-phase queueing delays (median, mean, p95 of the three
clients' pings pooled), sample counts and bottleneck utilisation, and the same claim statuses,
from the raw files alone, and leave the run folder as it was. Repeated and swept runs of a
version 1 file analyse too.
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

import analysis
import analysis.repetitions as reps
from netrepro.core.errors import RunFolderError
from netrepro.runfolder.reading import read_run
from netrepro.runfolder.integrity import sha256_tree

DATA = Path(__file__).resolve().parent / "data" / "pie-vs-red-local-0.1"
EXPECTED = DATA / "expected"
#: A column of version 1's summary.csv -> (statistic, subject) of summary.csv now: the queueing
#: delay of the pings pooled on the trial's subject ``all``, the utilisation of the bottleneck
#: port (router:eth1, its HTB) from its sent-bytes counter (netrepro.experiment.migrate.STATISTIC_MAP).
SAME = {"delay_median_ms": ("queue_delay_median_ms", "all"), "delay_mean_ms": ("queue_delay_mean_ms", "all"),
        "delay_p95_ms": ("queue_delay_p95_ms", "all"), "samples": ("queue_delay_samples", "all"),
        "utilization": ("sent_utilization", "router:eth1")}


def _copy(dest: Path) -> Path:
    shutil.copytree(DATA, dest, ignore=shutil.ignore_patterns("expected", "README.md"))
    return dest


def _digest(run: Path) -> dict[str, str]:
    return {p.relative_to(run).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(run.rglob("*")) if p.is_file() and (p.name == "run.json" or "raw" in p.parts)}


@pytest.fixture(scope="module")
def analyzed(tmp_path_factory):
    run_dir = _copy(tmp_path_factory.mktemp("run") / "run")
    before = _digest(run_dir)
    return run_dir, analysis.analyze(run_dir), before


def _compare(summary: pd.DataFrame, want: pd.DataFrame, rel: float) -> int:
    """Assert every number of version 1's ``want`` (its summary.csv) is in ``summary`` (long
    rows); return how many were compared. A blank of version 1 (a phase its queue samples do
    not cover) is no row now."""
    compared = 0
    for r in want.itertuples():
        for col, (stat, subject) in SAME.items():
            v = getattr(r, col)
            got = summary[(summary["trial"] == f"{r.aqm}-{r.variant}") & (summary["phase"] == r.phase)
                          & (summary["subject"] == subject) & (summary["statistic"] == stat)]["value"]
            if isinstance(v, float) and math.isnan(v):
                assert got.empty, (r.aqm, r.variant, r.phase, col)
                continue
            assert len(got) == 1, (r.aqm, r.variant, r.phase, col)
            assert float(got.iloc[0]) == pytest.approx(float(v), rel=rel, abs=1e-9), (r.aqm, r.variant, r.phase, col)
            compared += 1
    return compared


def test_dataset_is_intact():
    run = json.loads((DATA / "run.json").read_text())
    assert run["spec"]["schema_version"] == 1
    for rel, digest in run["raw_sha256"].items():
        assert hashlib.sha256((DATA / "raw" / rel).read_bytes()).hexdigest() == digest, rel


def test_the_spec_is_converted_once_in_memory(analyzed, tmp_path):
    run_dir, res, before = analyzed
    assert _digest(run_dir) == before  # run.json and raw/ as recorded
    assert json.loads((run_dir / "run.json").read_text())["spec"]["schema_version"] == 1
    _, data, spec = read_run(_copy(tmp_path / "again"))
    assert data["spec"]["schema_version"] == 2 and spec.model.data["schema_version"] == 2
    assert [t.id for t in spec.model.trials] == ["pie-unlimited", "red-unlimited", "pie-limited", "red-limited"]
    assert res.run.spec.model.data["schema_version"] == 2


def test_same_per_phase_numbers_as_the_version_1_analysis(analyzed):
    run_dir, res, _ = analyzed
    want = pd.read_csv(EXPECTED / "summary.csv")
    assert len(want) == 20  # 4 trials x 5 phases
    assert _compare(res.summary, want, 1e-9) == 20 * 5 - 1  # one blank utilisation (README.md)
    # summary.csv as written: 6 significant digits
    assert _compare(pd.read_csv(run_dir / "summary.csv"), want, 1e-5) == 99


def test_same_claim_statuses_as_the_version_1_analysis(analyzed):
    _, res, _ = analyzed
    want = json.loads((EXPECTED / "verdict.json").read_text())
    # version 1 judged each value as a point: so do the values alone; with their within-trial
    # intervals (5 s phases at TIME_SCALE 0.1, batches of 0.5 s) every claim straddles a bound
    assert [(c["id"], c["values_alone"]) for c in res.verdict["claims"]] == [
        (c["id"], "holds" if c["holds"] else "fails") for c in want["claims"]]
    assert res.verdict["reproduced"] == want["reproduced"] is False
    assert {c["values_alone"] for c in res.verdict["claims"]} == {"holds", "fails"}  # both outcomes read
    assert {c["status"] for c in res.verdict["claims"]} == {"undecided"} and res.verdict["verdict"] == "inconclusive"
    written = json.loads((res.out_dir / "verdict.json").read_text())
    assert [c["values_alone"] for c in written["claims"]] == ["holds" if c["holds"] else "fails" for c in want["claims"]]


def test_real_data_is_sane(analyzed):
    run_dir, _, _ = analyzed
    s = pd.read_csv(run_dir / "summary.csv")
    phases = s[s["phase"] != "all"]
    n = phases[(phases["subject"] == "all") & (phases["statistic"] == "queue_delay_samples")]
    assert len(n) == 20 and (n["value"] > 0).all()
    u = phases[(phases["subject"] == "router:eth1") & (phases["statistic"] == "sent_utilization")]
    # pie-unlimited's start in run.json was inferred from its first flows' connect times
    # (2.2 s late, see README), so the queue sampler misses part of p5: no utilisation there
    assert len(u) == 19 and ("pie-unlimited", "p5") not in set(zip(u["trial"], u["phase"]))
    assert u["value"].between(0, 1).all()
    u = u.set_index(["trial", "phase"])["value"]
    # limited sources: 10 flows x 25 kB/s offer 2 Mbit/s; 50 flows offer 10 Mbit/s
    assert u[("red-limited", "p1")] < 0.35 < u[("red-limited", "p3")]
    # every client's base RTT is the netem 100 ms plus a little
    run = json.loads((DATA / "run.json").read_text())
    for trial in run["trials"]:
        for c in ("client1", "client2", "client3"):
            lines = (DATA / "raw" / trial["id"] / c / "base_rtt.txt").read_text().splitlines()
            rtts = [float(x.split("time=")[1].split()[0]) for x in lines if "time=" in x]
            assert rtts and 100 <= min(rtts) < 110


def test_the_migrated_files_figure_is_drawn(analyzed):
    run_dir, res, _ = analyzed
    for f in ("queue-delay.png", "queue-delay.pdf"):  # netrepro migrate's figure of the pings' queueing delay
        assert (run_dir / "figures" / f).stat().st_size > 10_000, f
    # in the report, under the figure's title
    assert "![Queueing delay (ping RTT - base RTT) of each client](figures/queue-delay.png)" in \
        (run_dir / "report.md").read_text()


def _instances(dest: Path, data: dict, instances: list[tuple[str, dict]]) -> None:
    """Write run.json ``data`` into ``dest`` with a trial record per ``(instance id, fields)``,
    each the recorded trial of its ``trial`` with its raw folder copied, and raw_sha256 as
    netrepro run records it."""
    recorded = {t["id"]: t for t in json.loads((DATA / "run.json").read_text())["trials"]}
    data["trials"] = []
    for iid, fields in instances:
        shutil.copytree(DATA / "raw" / fields["trial"], dest / "raw" / iid)
        data["trials"].append({**recorded[fields["trial"]], "id": iid, **fields})
    data["raw_sha256"] = sha256_tree(dest / "raw")
    (dest / "run.json").write_text(json.dumps(data, indent=1))


def test_a_repeated_version_1_run(tmp_path):
    data = json.loads((DATA / "run.json").read_text())
    data["repetitions"] = {"repeat": 2, "shuffle": False, "seed": None, "design": "composed by the test"}
    _instances(tmp_path, data, [(f"{t}.r{k}", {"trial": t, "repetition": k}) for k in (1, 2)
                                for t in ("pie-unlimited", "red-unlimited", "pie-limited", "red-limited")])
    res = analysis.analyze(tmp_path, figures=False)
    want = [(c["id"], "holds" if c["holds"] else "fails") for c in json.loads((EXPECTED / "verdict.json").read_text())["claims"]]
    # two identical repetitions: the means' intervals are what the trials' own batches give for
    # a mean of two (the repetitions' spread is 0), and still straddle the bounds; the values
    # alone are decided as version 1 decided them
    assert [(c["id"], c["values_alone"]) for c in res.verdict["claims"]] == want
    assert [c["status"] for c in res.verdict["claims"]] == ["undecided"] * 3
    assert [c["held"] for c in res.verdict["claims"]] == ["0 of 2", "0 of 2", "0 of 2"]
    assert all(c["repetitions"] == {"undecided": 2} for c in res.verdict["claims"])
    assert {v["interval"] for c in res.verdict["claims"] for v in c["values"]} == {"batch means of 2 repetitions"}
    assert res.verdict["rule"] == reps.RULE
    r2 = res.summary[res.summary["repetition"] == 2]
    assert _compare(r2, pd.read_csv(EXPECTED / "summary.csv"), 1e-9) == 99
    assert set(res.health) == {f"{t}.r{k}" for k in (1, 2) for t in ("pie-unlimited", "red-unlimited",
                                                                     "pie-limited", "red-limited")}


def _swept(dest: Path, factor: dict) -> dict:
    """A sweep of the recorded run's version 1 file over ``factor`` (its first value the file's
    own; the second for the PIE trials only), every instance the recorded trial of its id, as
    netrepro run records one."""
    data = json.loads((DATA / "run.json").read_text())
    data["spec"]["sweep"] = {"factors": [factor]}
    points = [{"id": "p1", "values": {factor["name"]: factor["values"][0]},
               "trials": ["pie-unlimited", "red-unlimited", "pie-limited", "red-limited"]},
              {"id": "p2", "values": {factor["name"]: factor["values"][1]}, "trials": ["pie-unlimited", "pie-limited"]}]
    data["sweep"] = {"factors": [{**factor, "paths": [factor["path"]]}], "points": points,
                     "design": "full factorial: composed by the test"}
    _instances(dest, data, [(f"{t}.{p['id']}", {"trial": t, "point": p["id"], "factors": p["values"]})
                            for p in points for t in p["trials"]])
    return data


def test_a_swept_version_1_run(tmp_path):
    """The recorded sweep's factor paths are version 1's (``aqms.pie.params.target_ms``): they
    are converted with the spec, so the points' experiments and the file's own point (the
    base, whose verdict is the run's) are found."""
    _swept(tmp_path, {"name": "pie_target_ms", "path": "aqms.pie.params.target_ms", "values": [20, 5],
                      "trials": ["pie-unlimited", "pie-limited"]})
    res = analysis.analyze(tmp_path, figures=False)
    assert res.verdict["sweep"]["base_point"] == "p1"
    p1 = json.loads((tmp_path / "sweep" / "p1" / "verdict.json").read_text())
    want = json.loads((EXPECTED / "verdict.json").read_text())
    assert [c["values_alone"] for c in p1["claims"]] == ["holds" if c["holds"] else "fails" for c in want["claims"]]
    assert [c["status"] for c in res.verdict["claims"]] == [c["status"] for c in p1["claims"]]
    s = res.summary
    assert set(s["point"]) == {"p1", "p2"} and s[s["trial"].str.startswith("red")]["pie_target_ms"].isna().all()
    assert _compare(s[s["point"] == "p2"], pd.read_csv(EXPECTED / "summary.csv"), 1e-9) == 99  # the same raw files


def test_a_version_1_factor_without_a_version_2_path_is_refused_in_one_line(tmp_path):
    _swept(tmp_path, {"name": "buffer", "path": "bottleneck.buffer_bytes", "values": [200000, 100000]})
    before = _digest(tmp_path)
    with pytest.raises(RunFolderError, match=r"run.json: sweep.factors: buffer: no schema_version 2 path") as e:
        analysis.analyze(tmp_path, figures=False)
    assert "\n" not in str(e.value)
    assert _digest(tmp_path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["raw", "run.json"]
