"""``netrepro compare`` across rate scales (analysis.scales): the rate scale k in the run
labels, compare.csv and claims.csv; at two rate scales or more, rate-scale.csv,
figures/rate-scale.png|pdf and the report's section "Claims against the rate scale".

The runs are real: pacing-lab simulated on the ns3 site at RATE_SCALE 0.001 and 0.002 and
TIME_SCALE 0.1, its three single-flow trials (a second or two each), once per module."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from scipy import stats as sps

from conftest import claim_records

from analysis import analyze_run
from analysis.compare import compare, run_label
from netrepro.runfolder.record import RunRecord
from netrepro.core.errors import RunFolderError
from analysis.scales import (COLUMNS, axis_label, claim_values, draw_rate_scale,
                                rate_scale_of, rate_scale_table)
from netrepro.model import METRICS, QUANTITY_NAMES, STATISTICS
from netrepro.cli.step_commands import judge_trial
from netrepro.runner import run, steps
from netrepro.sites.ns3 import site as ns3
from netrepro.experiment.spec import load_spec

TRIALS = ["unpaced", "fq-maxrate", "fq-rate"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Three runs of pacing-lab's single-flow trials on ns3 at TIME_SCALE 0.1: ``k1`` at
    RATE_SCALE 0.001, ``k2`` at 0.002 with two repetitions, ``k1b`` at 0.001 again; a dict of
    their folders (and ``tmp``, a folder for the comparisons)."""
    tmp = tmp_path_factory.mktemp("ratescale")
    out = {"tmp": tmp}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(steps, "STATE_ROOT", tmp / "state")
        mp.setenv("NETREPRO_RESULTS", str(tmp / "results"))
        ns3.build()
        for name, k, repeat in (("k1", 0.001, None), ("k2", 0.002, 2), ("k1b", 0.001, None)):
            mp.setenv("RATE_SCALE", str(k))
            spec = load_spec("pacing-lab")
            steps.up(spec, "ns3")
            steps.provision(spec, "ns3")
            out[name] = run.run(spec, "ns3", 0.1, trial_ids=TRIALS, repeat=repeat, seed=1, progress_tty=False,
                                judge=judge_trial, jobs=1)
            analyze_run(out[name])  # as `netrepro run` leaves it; compare analyses again into its own folder
            steps.down(spec, "ns3")
    return out


def _value(run_dir: Path, trial: str, subject: str, statistic: str) -> list[float]:
    """The values of one statistic (phase all) in a run's summary.csv, one per repetition."""
    s = pd.read_csv(run_dir / "summary.csv")
    return s[(s["trial"] == trial) & (s["subject"] == subject) & (s["statistic"] == statistic)
             & (s["phase"] == "all")]["value"].tolist()


def test_two_rate_scales_give_the_claims_against_k(runs, tmp_path):
    out = compare([runs["k1"], runs["k2"]], tmp_path / "out")
    labels = {k: run_label(RunRecord.from_json(json.loads((runs[k] / "run.json").read_text())), runs[k])
              for k in ("k1", "k2")}
    assert labels["k1"] == f"ns3 (simulation) TS 0.1 k 0.001 [{runs['k1'].name}]"
    assert labels["k2"] == f"ns3 (simulation) x2 TS 0.1 k 0.002 [{runs['k2'].name}]"

    # compare.csv and claims.csv say each run's k
    cmp = pd.read_csv(out / "compare.csv")
    assert list(cmp.columns[:2]) == ["run", "rate_scale"]
    assert dict(zip(cmp["run"], cmp["rate_scale"])) == {labels["k1"]: 0.001, labels["k2"]: 0.002}
    claims = pd.read_csv(out / "claims.csv", keep_default_na=False)
    # the runs' rows say their k; the manual's reference row (reference_results) has none
    ks = dict(zip(claims["row"], claims["rate_scale"]))
    assert {row: float(k) for row, k in ks.items() if row in labels.values()} == {labels["k1"]: 0.001, labels["k2"]: 0.002}
    assert {row: k for row, k in ks.items() if row not in labels.values()} == {"Lab 12 manual (Mininet, Linux, 10 Gbit/s, 20 ms)": ""}
    status = {(r["row"], r["claim"]): r["status"] for _, r in claims.iterrows()}

    rs = pd.read_csv(out / "rate-scale.csv")
    assert list(rs.columns) == COLUMNS and set(rs["site"]) == {"ns3"}
    assert set(rs["rate_scale"]) == {0.001, 0.002}
    for _, r in rs.iterrows():  # each row's status is the claim's in that run
        assert r["status"] == status[(r["run"], r["claim"])]
    # a bound: its statistic per run, n = the run's repetitions, a t interval from two
    u = rs[rs["claim"] == "unpaced-fills-link"]
    assert list(u["rate_scale"]) == [0.001, 0.002] and list(u["n"]) == [1, 2]
    assert (u["statistic"] == "utilization").all() and (u["quantity"] == "value").all()
    assert (u["trial"] == "unpaced").all() and (u["subject"] == "s1:s1-eth1").all() and (u["phase"] == "all").all()
    one, two = u.iloc[0], u.iloc[1]
    assert one["mean"] == pytest.approx(_value(runs["k1"], "unpaced", "s1:s1-eth1", "utilization")[0], rel=1e-5)
    assert math.isnan(one["ci95_low"]) and math.isnan(one["ci95_high"])
    reps = _value(runs["k2"], "unpaced", "s1:s1-eth1", "utilization")
    assert len(reps) == 2 and two["mean"] == pytest.approx(sum(reps) / 2, rel=1e-5)
    assert two["ci95_low"] <= two["mean"] <= two["ci95_high"]
    assert u["threshold_min"].tolist() == [0.8, 0.8] and u["threshold_max"].isna().all()
    # a bound reading two trials: a row per trial and run
    p = rs[rs["claim"] == "paced-at-its-rate"]
    assert list(zip(p["trial"], p["rate_scale"])) == [("fq-maxrate", 0.001), ("fq-maxrate", 0.002),
                                                       ("fq-rate", 0.001), ("fq-rate", 0.002)]
    assert set(p["threshold_min"]) == {0.4} and set(p["threshold_max"]) == {0.55}
    # a difference: the quantity it judges, per pair, from each run's own statistics
    d = rs[rs["claim"] == "pacing-fewer-retransmits"]
    assert set(d["quantity"]) == {"difference"} and set(d["statistic"]) == {"retransmits"}
    assert list(d["trial"]) == ["unpaced vs fq-maxrate"] * 2 + ["unpaced vs fq-rate"] * 2
    for (_, r), run_dir in zip(d.iterrows(), [runs["k1"], runs["k2"]] * 2):
        lower = r["trial"].split(" vs ")[1]
        want = [a - b for a, b in zip(_value(run_dir, "unpaced", "h1-h2", "retransmits"),
                                      _value(run_dir, lower, "h1-h2", "retransmits"))]
        assert r["mean"] == pytest.approx(sum(want) / len(want)) and r["threshold_min"] == 1
    # a claim reading trials these runs did not run: no value; not applicable, since TS 0.1 is
    # below pacing-lab's time_scale.min (0.5), which comes before the trials not run
    f = rs[rs["claim"] == "pairs-paced-fair"]
    assert list(f["n"]) == [0, 0] and set(f["status"]) == {"not applicable"}

    assert (out / "figures" / "rate-scale.png").stat().st_size > 10_000
    assert (out / "figures" / "rate-scale.pdf").is_file()
    report = (out / "report.md").read_text()
    assert "## Claims against the rate scale" in report and "![rate scale](figures/rate-scale.png)" in report
    assert "| claim | run | k | status | quantity: mean [95 % CI] |" in report
    row = next(ln for ln in report.splitlines() if ln.startswith(f"| `unpaced-fills-link` | {labels['k2']} |"))
    assert f"| 0.002 | {status[(labels['k2'], 'unpaced-fills-link')]} (" in row  # with "held k of 2"
    assert f"utilization unpaced/s1:s1-eth1/all: {two['mean']:.4g} [" in row


def test_one_rate_scale_writes_no_rate_scale_file(runs, tmp_path):
    out = compare([runs["k1"], runs["k1b"]], tmp_path / "out")
    assert not (out / "rate-scale.csv").exists() and not (out / "figures" / "rate-scale.png").exists()
    assert "Claims against the rate scale" not in (out / "report.md").read_text()
    assert set(pd.read_csv(out / "compare.csv")["rate_scale"].dropna()) == {0.001}
    claims = pd.read_csv(out / "claims.csv")
    assert set(claims["rate_scale"].dropna()) == {0.001}
    assert claims["rate_scale"].isna().sum() == (claims["row"] == "Lab 12 manual (Mininet, Linux, 10 Gbit/s, 20 ms)").sum() > 0


# --- without simulations ---------------------------------------------------------------------------
def test_rate_scale_of_a_run():
    def of(data, where="run.json"):
        return rate_scale_of(RunRecord.from_json(data, where))
    assert of({}) == 1 and of({"rate_scale": None}) == 1 and of({"rate_scale": {}}) == 1
    assert of({"rate_scale": {"k": 0.02, "why": "RATE_SCALE=0.02"}}) == 0.02
    for bad, what in ((0.5, "rate_scale: expected an object"), ({"k": "x"}, "rate_scale.k: expected a number > 0"),
                      ({"k": -1}, "rate_scale.k"), ({"k": True}, "rate_scale.k"), ({"k": math.inf}, "rate_scale.k")):
        with pytest.raises(RunFolderError, match=f"^r/run.json: {what}"):
            of({"rate_scale": bad}, "r/run.json")
    data = {"site": "local", "mode": "vm", "time_scale": 0.5, "rate_scale": {"k": 1}}
    assert run_label(RunRecord.from_json(data), Path("/x/run")) == "local (vm) TS 0.5 [run]"
    assert (run_label(RunRecord.from_json({**data, "rate_scale": {"k": 0.02}}), Path("/x/run"))
            == "local (vm) TS 0.5 k 0.02 [run]")


def test_every_statistic_has_its_unit_in_words():
    """Every statistic and metric has its unit in words and a name in words for the axes
    (netrepro.model.QUANTITY_NAMES), which say it instead of its column name."""
    names = {s for group in STATISTICS.values() for s in group} | {m for group in METRICS.values() for m in group}
    assert names <= set(QUANTITY_NAMES), names - set(QUANTITY_NAMES)
    assert axis_label("ratio", "throughput_cov") == "ratio of Throughput's coefficient of variation, higher / lower (no unit)"
    assert axis_label("difference", "retransmits") == \
        "difference of Retransmitted segments, higher - lower (segments)"
    assert axis_label("absolute difference", "sent_utilization") == \
        "absolute difference of Utilization, |higher - lower| (fraction of the rate)"
    assert axis_label("value", "rtt_p95_ms") == "95th percentile of the RTT (ms)"
    assert axis_label("ratio", "rtt_median_ms vs rtt_mean_ms") == "ratio of Median RTT vs Mean RTT, higher / lower (no unit)"


SUMMARY = pd.DataFrame(
    [(t, "all", subj, st, v, rep) for rep, (a, b, c) in enumerate([(2.0, 1.0, 0.0), (4.0, 1.0, 1.0), (3.0, 2.0, 2.0)], 1)
     for t, subj, st, v in [("x", "f", "rate", a), ("y", "f", "rate", b), ("z", "f", "rate", c)]],
    columns=["trial", "phase", "subject", "statistic", "value", "repetition"])


def test_claim_values_are_what_the_checks_judge_repetition_by_repetition():
    ids = ["x", "y", "z"]
    [ratio] = claim_records([{"id": "r", "check": {"kind": "ratio", "higher": {"statistic": "rate", "trials": ["x", "x"]},
                                                   "lower": {"statistic": "rate", "trials": ["y", "z"]}, "min": 1.5}}])
    v = claim_values(SUMMARY, ratio, ids)
    xy = v[v["trial"] == "x vs y"]
    assert list(xy["value"]) == [2.0, 4.0, 1.5] and set(xy["quantity"]) == {"ratio"}
    assert set(xy["threshold_min"]) == {1.5} and xy["threshold_max"].isna().all()
    xz = v[v["trial"] == "x vs z"]["value"].tolist()
    assert math.isnan(xz[0]) and xz[1:] == [4.0, 1.5]  # over 0: undefined, as the verdict says
    [both] = claim_records([{"id": "b", "when": {"select": {"statistic": "rate", "trials": ["y"]}, "min": 1},
                             "check": {"kind": "all_of", "checks": [
                                 {"kind": "difference", "absolute": True, "max": 0.5,
                                  "higher": {"statistic": "rate", "trials": ["y"]},
                                  "lower": {"statistic": "rate", "trials": ["z"]}},
                                 {"kind": "bound", "select": {"statistic": "rate", "trials": ["x"]}, "max": 5}]}}])
    assert [p for p, _ in both.parts] == ["1", "2", "when"]
    v = claim_values(SUMMARY, both, ids)
    assert v[v["part"] == "1"]["value"].tolist() == [1.0, 0.0, 0.0]
    assert set(v[v["part"] == "1"]["quantity"]) == {"absolute difference"}
    assert v[v["part"] == "2"]["value"].tolist() == [2.0, 4.0, 3.0] and set(v[v["part"] == "2"]["threshold_max"]) == {5}
    assert v[v["part"] == "when"]["value"].tolist() == [1.0, 1.0, 2.0]
    # across the repetitions: n, mean, Student-t interval (n - 1 degrees of freedom)
    runs = [{"run": f"{site} k {k}", "site": site, "rate_scale": k, "summary": SUMMARY, "trial_ids": ids,
             "computed": None, "status": {"r": "holds", "b": "fails"}} for site, k in (("sim", 0.5), ("lab", 0.1))]
    t = rate_scale_table(runs, [ratio, both])
    assert list(t.columns) == COLUMNS and len(t) == 2 * (2 + 3)
    assert list(t["rate_scale"][:2]) == [0.1, 0.5]  # each value by k
    r = t[(t["claim"] == "b") & (t["part"] == "2")].iloc[0]
    half = sps.t.ppf(0.975, 2) * 1.0 / math.sqrt(3)
    assert (r["n"], r["mean"]) == (3, 3.0) and r["ci95_low"] == pytest.approx(3 - half)
    assert t[(t["claim"] == "r") & (t["trial"] == "x vs z")]["n"].tolist() == [2, 2]


def test_the_figure_draws_a_panel_per_claim_value_and_says_when_one_has_none(tmp_path):
    ids = ["x", "y", "z"]
    claims = claim_records([{"id": "r", "rate_scale_min": 0.2,
                             "check": {"kind": "ratio", "higher": {"statistic": "rate", "trials": ["x"]},
                                       "lower": {"statistic": "rate", "trials": ["y"]}}},
                            {"id": "u", "check": {"kind": "bound", "select": {"statistic": "missing", "trials": ["x"]},
                                                  "min": 0}}])
    runs = [{"run": f"{site} k {k}", "site": site, "rate_scale": k, "summary": SUMMARY, "trial_ids": ids,
             "computed": None, "status": {"r": "holds" if k > 0.2 else "not applicable", "u": "not evaluable"}}
            for site in ("sim", "lab") for k in (0.1, 0.5)]
    files = draw_rate_scale(rate_scale_table(runs, claims), claims, tmp_path, formats=("png",))
    assert files == [tmp_path / "rate-scale.png"] and files[0].stat().st_size > 10_000
    assert draw_rate_scale(pd.DataFrame(columns=COLUMNS), claims, tmp_path / "none") == []
