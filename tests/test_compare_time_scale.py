"""``netrepro compare`` across time scales (analysis.scales): the time scale TS in compare.csv
and claims.csv; at two time scales or more, time-scale.csv, figures/time-scale.png|pdf and the
report's section "Claims against the time scale"; at two rate scales and two time scales,
both sections; the lowest time scale at which a claim keeps its meaning, when the experiment
says it.

The runs are real: pacing-lab simulated on the ns3 site at RATE_SCALE 0.001 (one at 0.002)
and TIME_SCALE 0.1 and 0.2, its three single-flow trials (a second to a few each), once per
module. As tests/test_compare_rate_scale.py, whose runs these mirror along the other scale."""

from __future__ import annotations

import copy
import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

import analysis.compare
from conftest import claim_records
from analysis import analyze_run
from analysis.compare import compare, run_label
from netrepro.core.errors import RunFolderError
from netrepro.runfolder.record import RunRecord
from analysis.scales import (SCALES, ScaleMin, columns, report_section, scale_figure, scale_mins, scale_of,
                             scale_table, time_scale_of)
from netrepro.cli.step_commands import judge_trial
from netrepro.runner import run, steps
from netrepro.sites.ns3 import site as ns3
from netrepro.experiment.spec import Spec, load_spec

TRIALS = ["unpaced", "fq-maxrate", "fq-rate"]
#: A recorded run of pacing-lab on the local site at TIME_SCALE 0.5 and RATE_SCALE 0.002 (its README says how).
LOCAL_RUN = Path(__file__).resolve().parent / "data" / "labs" / "pacing-lab-local-0.5"


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Four runs of pacing-lab's single-flow trials on ns3: ``t1`` at TIME_SCALE 0.1, ``t2``
    at 0.2 with two repetitions, ``t1b`` at 0.1 again, all three at RATE_SCALE 0.001, and
    ``both`` at TIME_SCALE 0.2 and RATE_SCALE 0.002; a dict of their folders (and ``tmp``)."""
    tmp = tmp_path_factory.mktemp("timescale")
    out = {"tmp": tmp}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(steps, "STATE_ROOT", tmp / "state")
        mp.setenv("NETREPRO_RESULTS", str(tmp / "results"))
        ns3.build()
        for name, ts, k, repeat in (("t1", 0.1, 0.001, None), ("t2", 0.2, 0.001, 2), ("t1b", 0.1, 0.001, None),
                                    ("both", 0.2, 0.002, None)):
            mp.setenv("RATE_SCALE", str(k))
            spec = load_spec("pacing-lab")
            steps.up(spec, "ns3")
            steps.provision(spec, "ns3")
            out[name] = run.run(spec, "ns3", ts, trial_ids=TRIALS, repeat=repeat, seed=1, progress_tty=False,
                                judge=judge_trial, jobs=1)
            analyze_run(out[name])  # as `netrepro run` leaves it; compare analyses again into its own folder
            steps.down(spec, "ns3")
    return out


def _label(runs, name: str) -> str:
    return run_label(RunRecord.from_json(json.loads((runs[name] / "run.json").read_text())), runs[name])


def _value(run_dir: Path, trial: str, subject: str, statistic: str) -> list[float]:
    """The values of one statistic (phase all) in a run's summary.csv, one per repetition."""
    s = pd.read_csv(run_dir / "summary.csv")
    return s[(s["trial"] == trial) & (s["subject"] == subject) & (s["statistic"] == statistic)
             & (s["phase"] == "all")]["value"].tolist()


def test_two_time_scales_give_the_claims_against_ts(runs, tmp_path):
    out = compare([runs["t1"], runs["t2"]], tmp_path / "out")
    labels = {n: _label(runs, n) for n in ("t1", "t2")}
    assert labels["t1"] == f"ns3 (simulation) TS 0.1 k 0.001 [{runs['t1'].name}]"
    assert labels["t2"] == f"ns3 (simulation) x2 TS 0.2 k 0.001 [{runs['t2'].name}]"

    # compare.csv and claims.csv say each run's TS, next to its k
    cmp = pd.read_csv(out / "compare.csv")
    assert list(cmp.columns[:3]) == ["run", "rate_scale", "time_scale"]
    assert dict(zip(cmp["run"], cmp["time_scale"])) == {labels["t1"]: 0.1, labels["t2"]: 0.2}
    claims = pd.read_csv(out / "claims.csv", keep_default_na=False)
    assert list(claims.columns[:4]) == ["row", "kind", "rate_scale", "time_scale"]
    ts = dict(zip(claims["row"], claims["time_scale"]))
    assert {row: float(t) for row, t in ts.items() if row in labels.values()} == {labels["t1"]: 0.1, labels["t2"]: 0.2}
    assert {row: t for row, t in ts.items() if row not in labels.values()} == {"Lab 12 manual (Mininet, Linux, 10 Gbit/s, 20 ms)": ""}
    status = {(r["row"], r["claim"]): r["status"] for _, r in claims.iterrows()}

    t = pd.read_csv(out / "time-scale.csv")
    assert list(t.columns) == columns("time_scale") and "rate_scale" not in t.columns
    assert set(t["site"]) == {"ns3"} and set(t["time_scale"]) == {0.1, 0.2}
    for _, r in t.iterrows():  # each row's status is the claim's in that run
        assert r["status"] == status[(r["run"], r["claim"])]
    # a bound: its statistic per run (by TS), n = the run's repetitions, a t interval from two
    u = t[t["claim"] == "unpaced-fills-link"]
    assert list(u["time_scale"]) == [0.1, 0.2] and list(u["n"]) == [1, 2]
    assert list(u["run"]) == [labels["t1"], labels["t2"]]
    assert (u["statistic"] == "utilization").all() and (u["trial"] == "unpaced").all() and (u["phase"] == "all").all()
    one, two = u.iloc[0], u.iloc[1]
    assert one["mean"] == pytest.approx(_value(runs["t1"], "unpaced", "s1:s1-eth1", "utilization")[0], rel=1e-5)
    assert math.isnan(one["ci95_low"]) and math.isnan(one["ci95_high"])
    reps = _value(runs["t2"], "unpaced", "s1:s1-eth1", "utilization")
    assert len(reps) == 2 and two["mean"] == pytest.approx(sum(reps) / 2, rel=1e-5)
    assert two["ci95_low"] <= two["mean"] <= two["ci95_high"]
    assert u["threshold_min"].tolist() == [0.8, 0.8] and u["threshold_max"].isna().all()
    # a difference: per pair and run, from each run's own statistics
    d = t[t["claim"] == "pacing-fewer-retransmits"]
    assert list(d["trial"]) == ["unpaced vs fq-maxrate"] * 2 + ["unpaced vs fq-rate"] * 2
    assert list(d["time_scale"]) == [0.1, 0.2] * 2

    # the runs share their rate scale: nothing against k
    assert not (out / "rate-scale.csv").exists() and not (out / "figures" / "rate-scale.png").exists()
    assert (out / "figures" / "time-scale.png").stat().st_size > 10_000
    assert (out / "figures" / "time-scale.pdf").is_file()
    report = (out / "report.md").read_text()
    assert "## Claims against the time scale" in report and "Claims against the rate scale" not in report
    assert "![time scale](figures/time-scale.png)" in report
    assert "The runs ran at 2 time scales (TS = 0.1, 0.2: every duration of the experiment times TS)" in report
    assert "| claim | run | TS | status | quantity: mean [95 % CI] |" in report
    row = next(ln for ln in report.splitlines() if ln.startswith(f"| `unpaced-fills-link` | {labels['t2']} |"))
    assert f"| 0.2 | {status[(labels['t2'], 'unpaced-fills-link')]} (" in row  # with "held k of 2"
    assert f"utilization unpaced/s1:s1-eth1/all: {two['mean']:.4g} [" in row
    # pacing-lab declares time_scale.min 0.5: both runs are below it, and their claims not applicable
    assert "- `unpaced-fills-link`" in report and "TS = 0.5 (the experiment's time_scale.min: " in report
    assert "not applicable" in row and "; below time_scale_min 0.5 |" in row


def test_one_time_scale_writes_no_time_scale_file(runs, tmp_path):
    # one TS, one k: neither section (as before time scales)
    out = compare([runs["t1"], runs["t1b"]], tmp_path / "same")
    assert not (out / "time-scale.csv").exists() and not (out / "figures" / "time-scale.png").exists()
    assert not (out / "rate-scale.csv").exists()
    report = (out / "report.md").read_text()
    assert "Claims against the time scale" not in report and "Claims against the rate scale" not in report
    assert set(pd.read_csv(out / "compare.csv")["time_scale"]) == {0.1}
    # one TS, two k: the rate scale's section alone
    out = compare([runs["t2"], runs["both"]], tmp_path / "k")
    assert (out / "rate-scale.csv").is_file() and not (out / "time-scale.csv").exists()
    assert not (out / "figures" / "time-scale.png").exists() and not (out / "figures" / "time-scale.pdf").exists()
    report = (out / "report.md").read_text()
    assert "## Claims against the rate scale" in report and "Claims against the time scale" not in report


def test_two_rate_and_two_time_scales_give_both_sections(runs, tmp_path):
    out = compare([runs["t1"], runs["both"]], tmp_path / "out")
    for scale in ("rate", "time"):
        table = pd.read_csv(out / f"{scale}-scale.csv")
        assert list(table.columns) == columns(f"{scale}_scale") and len(table) > 0
        assert (out / "figures" / f"{scale}-scale.png").stat().st_size > 10_000
    assert set(pd.read_csv(out / "time-scale.csv")["time_scale"]) == {0.1, 0.2}
    assert set(pd.read_csv(out / "rate-scale.csv")["rate_scale"]) == {0.001, 0.002}
    report = (out / "report.md").read_text()
    assert report.index("## Claims against the rate scale") < report.index("## Claims against the time scale")
    assert "| claim | run | k | status |" in report and "| claim | run | TS | status |" in report


def test_each_site_is_a_series_against_ts(runs, tmp_path):
    """With the recorded run of pacing-lab on the local site (TS 0.5, k 0.002, every trial)."""
    local = shutil.copytree(LOCAL_RUN, tmp_path / "runs" / "local", ignore=shutil.ignore_patterns("expected", "README.md"))
    out = compare([runs["t1"], runs["t2"], local], tmp_path / "out")
    t = pd.read_csv(out / "time-scale.csv")
    assert set(t["site"]) == {"ns3", "local"}
    u = t[t["claim"] == "unpaced-fills-link"]
    assert list(zip(u["time_scale"], u["site"], u["n"])) == [(0.1, "ns3", 1), (0.2, "ns3", 2), (0.5, "local", 1)]
    # a claim reading trials only the local run ran: a value there, none in the simulations
    f = t[t["claim"] == "pairs-paced-fair"]
    assert list(zip(f["site"], f["n"])) == [("ns3", 0), ("ns3", 0), ("local", 1)]
    assert (out / "figures" / "time-scale.png").stat().st_size > 10_000
    assert (out / "rate-scale.csv").is_file()  # k 0.001 and 0.002: against k too
    report = (out / "report.md").read_text()
    assert "The runs ran at 3 time scales (TS = 0.1, 0.2, 0.5:" in report


def _declaring(monkeypatch, block: dict, claim_mins: dict[str, float]):
    """compare reading each run's experiment as if its file declared ``time_scale: block`` and
    the claims' ``time_scale_min`` of ``claim_mins`` (claim id -> TS): the experiment file as
    read, with them written in."""
    read = analysis.compare.read_record

    def read_record(run_dir, spec=None):
        rdir, data, spec = read(run_dir, spec)
        file = copy.deepcopy(spec.data)
        file["time_scale"] = dict(block)
        for c in file["claims"]:
            if c["id"] in claim_mins:
                c["time_scale_min"] = claim_mins[c["id"]]
        return rdir, data, Spec.from_data(file, spec.path)
    monkeypatch.setattr(analysis.compare, "read_record", read_record)


def test_the_shortest_time_scale_is_marked_when_the_experiment_declares_it(runs, tmp_path, monkeypatch):
    _declaring(monkeypatch, {"min": 0.15, "note": "a trial shorter than 1.5 s holds no whole iperf3 interval"},
               {"pacing-fewer-retransmits": 0.05})
    out = compare([runs["t1"], runs["t2"]], tmp_path / "out")
    report = (out / "report.md").read_text()
    assert "The shortest time scale at which a claim keeps its meaning" in report
    said = next(ln for ln in report.splitlines() if ln.startswith("- ") and "`unpaced-fills-link`" in ln
                and ": TS = " in ln)
    # and the run below it reports the claim not applicable (analysis.claims.evaluate)
    assert any(ln.startswith("- `unpaced-fills-link`: ns3 (simulation) TS 0.1") and ": not applicable; " in ln
               for ln in report.splitlines())
    assert said.endswith(": TS = 0.15 (the experiment's time_scale.min: a trial shorter than 1.5 s holds no whole "
                         "iperf3 interval)")
    assert "`pacing-fewer-retransmits`" not in said  # its own min
    assert "- `pacing-fewer-retransmits`: TS = 0.05 (the claim's time_scale_min)" in report
    # a run below a claim's min is marked in the table; one above it is not
    labels = {n: _label(runs, n) for n in ("t1", "t2")}
    rows = {ln.split(" | ")[1]: ln for ln in report.splitlines() if ln.startswith("| `unpaced-fills-link` |")}
    assert "; below time_scale_min 0.15 |" in rows[labels["t1"]] and "below" not in rows[labels["t2"]]
    assert not any("below" in ln for ln in report.splitlines() if ln.startswith("| `pacing-fewer-retransmits` |"))
    assert (out / "figures" / "time-scale.png").stat().st_size > 10_000


def test_a_bad_time_scale_is_refused_before_anything_is_written(runs, tmp_path):
    bad = shutil.copytree(runs["t1b"], tmp_path / "bad")
    data = json.loads((bad / "run.json").read_text())
    (bad / "run.json").write_text(json.dumps({**data, "time_scale": "fast"}))
    with pytest.raises(RunFolderError, match=r"bad/run.json: time_scale: expected a number > 0 \(the factor of every "
                                            r"duration\), got 'fast'$"):
        compare([runs["t1"], bad], tmp_path / "out")
    assert not (tmp_path / "out").exists()


# --- without simulations ---------------------------------------------------------------------------
def test_time_scale_of_a_run():
    """A run's time scale from its record; a time_scale that is not a number > 0 is refused where
    run.json is read (:class:`netrepro.runfolder.record.RunRecord`)."""
    def run(data, where="run.json"):
        return RunRecord.from_json(data, where)
    assert time_scale_of(run({"time_scale": 0.05})) == 0.05 and time_scale_of(run({"time_scale": 1})) == 1.0
    assert scale_of(run({"time_scale": 0.5, "rate_scale": {"k": 0.02}}), "time_scale") == 0.5
    assert scale_of(run({"time_scale": 0.5, "rate_scale": {"k": 0.02}}), "rate_scale") == 0.02
    with pytest.raises(RunFolderError, match=r"^r/run.json: time_scale: missing; expected a number > 0"):
        time_scale_of(run({}), "r/run.json")
    for bad in ("0.5", 0, -1, True, math.inf, None, {"k": 1}):
        with pytest.raises(RunFolderError, match=r"^r/run.json: time_scale: expected a number > 0"):
            run({"time_scale": bad}, "r/run.json")
    with pytest.raises(ValueError, match="scale: 'size_scale': expected one of rate_scale, time_scale"):
        scale_of(run({}), "size_scale")


CLAIMS = claim_records([{"id": "a", "check": {"kind": "bound", "select": {"statistic": "rate", "trials": ["x"]}, "min": 1}},
                        {"id": "b", "time_scale_min": 0.5,
                         "check": {"kind": "bound", "select": {"statistic": "rate", "trials": ["y"]}, "max": 3}}])


def test_the_lowest_scale_is_the_claims_own_else_the_experiments():
    assert scale_mins(CLAIMS, {}, "time_scale") == {"b": ScaleMin(0.5, "the claim's time_scale_min", "")}
    assert scale_mins(CLAIMS, {"time_scale": {}}, "time_scale") == scale_mins(CLAIMS, None, "time_scale")
    got = scale_mins(CLAIMS, {"time_scale": {"min": 0.1, "note": "why"}}, "time_scale")
    assert got == {"a": ScaleMin(0.1, "the experiment's time_scale.min", "why"),
                   "b": ScaleMin(0.5, "the claim's time_scale_min", "")}
    # the other scale reads its own keys
    assert scale_mins(CLAIMS, {"time_scale": {"min": 0.1}}, "rate_scale") == {}
    assert scale_mins(CLAIMS, {"rate_scale": {"allowed": True, "min": 0.01}}, "rate_scale") == {
        c.id: ScaleMin(0.01, "the experiment's rate_scale.min", "") for c in CLAIMS}
    for exp, claims, field in (({"time_scale": {"min": 0}}, CLAIMS, r"time_scale\.min"),
                               ({"time_scale": {"min": "short"}}, CLAIMS, r"time_scale\.min"),
                               ({}, [CLAIMS[0], replace(CLAIMS[1], time_scale_min=-1)], r"claims\[1\]\.time_scale_min"),
                               ({}, [CLAIMS[0], replace(CLAIMS[1], time_scale_min=True)], r"claims\[1\]\.time_scale_min")):
        with pytest.raises(RunFolderError, match=rf"^e\.yml: {field}: expected a number > 0 \(the shortest time scale"):
            scale_mins(claims, exp, "time_scale", "e.yml")
    with pytest.raises(RunFolderError, match=r"^e\.yml: time_scale: expected an object \{min, note\}"):
        scale_mins(CLAIMS, {"time_scale": 0.1}, "time_scale", "e.yml")


SUMMARY = pd.DataFrame(
    [(t, "all", "f", "rate", v, rep) for rep, (a, b) in enumerate([(2.0, 1.0), (4.0, 2.0)], 1)
     for t, v in (("x", a), ("y", b))],
    columns=["trial", "phase", "subject", "statistic", "value", "repetition"])


def _table():
    runs = [{"run": f"{site} TS {ts}", "site": site, "time_scale": ts, "summary": SUMMARY, "trial_ids": ["x", "y"],
             "computed": None, "status": {"a": "holds", "b": "holds"}}
            for site in ("sim", "lab") for ts in (1, 0.25, 0.05)]
    return scale_table(runs, CLAIMS, "time_scale")


def test_the_time_scale_table_section_and_figure_without_simulations():
    t = _table()
    assert list(t.columns) == columns("time_scale") and len(t) == 2 * 6
    a = t[t["claim"] == "a"]
    assert list(a["time_scale"]) == [0.05, 0.05, 0.25, 0.25, 1, 1] and list(a["site"][:2]) == ["lab", "sim"]
    assert set(a["n"]) == {2} and set(a["mean"]) == {3.0}
    mins = scale_mins(CLAIMS, {"time_scale": {"min": 0.02}}, "time_scale")
    lines = report_section(t, CLAIMS, {}, "figures/time-scale.png", "time_scale", mins)
    assert lines[1] == "## Claims against the time scale"
    assert "Every row is in `time-scale.csv`." in lines[3]
    assert "- `a`: TS = 0.02 (the experiment's time_scale.min)" in lines
    assert "- `b`: TS = 0.5 (the claim's time_scale_min)" in lines
    assert "![time scale](figures/time-scale.png)" in lines
    below = [ln for ln in lines if "below time_scale_min" in ln]
    assert len(below) == 4 and all(ln.startswith("| `b` |") and ("| 0.05 |" in ln or "| 0.25 |" in ln) for ln in below)

    fig = scale_figure(t, CLAIMS, "time_scale", mins)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 2
    for ax, want in zip(axes, (0.02, 0.5)):
        vlines = [ln for ln in ax.get_lines() if ln.get_linestyle() == ":"]
        assert len(vlines) == 1 and list(vlines[0].get_xdata()) == [want, want]
        lo, hi = ax.get_xlim()
        assert lo < 0.02 and hi > 1  # the min inside the range, though below every run's TS
        assert ax.get_xscale() == "log"
    assert {lb for ax in axes for lb in ax.get_legend_handles_labels()[1]} >= {
        "the experiment's time_scale.min", "the claim's time_scale_min", "sim", "lab"}
    assert "time scale TS (every duration times TS)" in axes[-1].get_xlabel()
    assert scale_figure(pd.DataFrame(columns=columns("time_scale")), CLAIMS, "time_scale") is None
    assert SCALES["time_scale"].file == "time-scale"
