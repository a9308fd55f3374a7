"""Claims judged with their uncertainty (issue 36): the intervals of analysis.uncertainty, and
recorded runs whose claims are clear on each side of their bounds or straddle them."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import numpy as np
import pytest

import analysis
from analysis import uncertainty as u
from analysis.uncertainty import Estimate
from analysis.console import verdict_line

LABS = Path(__file__).resolve().parent / "data" / "labs"


def test_sectioning_is_the_window_value_plus_minus_t_times_the_batches_standard_error():
    batches = [1.0, 2.0, 3.0, 4.0, 5.0]  # sd sqrt(2.5), se sqrt(2.5)/sqrt(5) = 0.70711; t(0.975, 4) = 2.77645
    e = u.sectioning(3.2, batches)
    assert e.value == 3.2 and e.n == 5 and e.method == "batch means of 5"
    assert e.sd == pytest.approx(0.707107, abs=1e-6)
    assert e.low == pytest.approx(3.2 - 1.963243, abs=1e-5) and e.high == pytest.approx(3.2 + 1.963243, abs=1e-5)
    # NaN batches are left out; fewer than MIN_BATCHES finite ones give a point
    assert u.sectioning(3.2, batches + [math.nan]).n == 5
    assert not u.sectioning(3.2, batches[:4]).has_interval and u.sectioning(3.2, batches[:4]).low == 3.2
    assert not u.sectioning(math.nan, batches).has_interval


def test_an_interval_is_cut_to_its_quantity_s_range_and_never_leaves_out_its_value():
    """RED's median queueing delay in a phase that empties: 0 over the phase, 0 in nine
    batches and 40 ms in one. The symmetric interval reaches below 0, a delay that cannot
    be; cut, it is 0 to its upper end. A later phase at 0 (0 to 0) then rises by at most 0
    after it, not by the 9 ms the uncut interval allowed (pie-vs-red's red-follows-load, whose
    steps may rise by at most 5)."""
    e = u.sectioning(0.0, [0.0] * 9 + [40.0])
    assert e.low < -8 and e.high > 8
    cut = u.within_range(e, "queue_delay_median_ms")
    assert (cut.value, cut.low, cut.high, cut.sd, cut.n) == (0.0, 0.0, e.high, e.sd, e.n)
    later = u.sectioning(0.0, [0.0] * 10)
    assert u.difference(later, e).high > 5 >= u.difference(later, cut).high == 0
    # shares and Jain's indices end at 1; a statistic without a range, and a value outside its
    # range (a measured utilization above 1 has no upper end), keep their ends
    jain = u.within_range(Estimate(0.999, 0.99, 1.008, 0.004, 10, "batch means of 10"), "jain_index")
    assert (jain.low, jain.high) == (0.99, 1.0)
    over = Estimate(-0.5, -2.0, 1.0, 0.5, 10, "batch means of 10")
    assert u.within_range(over, "queue_delay_median_ms") == over
    assert u.within_range(over, "no_such_statistic") == over
    assert u.within_range(Estimate.point(-1.0), "utilization") == Estimate.point(-1.0)
    assert set(u.RANGE) == set(u.SECTIONED)


def _lab_model(name: str):
    """The experiment of the recorded lab run ``name`` at the run's rate scale, and its k."""
    from netrepro.model import scale_rates
    from netrepro.runfolder.reading import read_run
    _, data, spec = read_run(LABS / name)
    k = float(data["rate_scale"]["k"])
    return scale_rates(spec.model, k), k


def test_a_rate_through_the_bottleneck_is_cut_at_its_rate_at_the_run_s_rate_scale():
    """Issue 56's case: a total throughput of 19.82 Mbit/s with a batch-means interval of 18.85
    to 20.79 through a 20 Mbit/s bottleneck straddles a maximum of 20.5 though no more than 20
    can pass; cut at the bottleneck's rate it holds. pie-lab's bottleneck is 1 Gbit/s as
    written, 20 Mbit/s at the recorded run's rate scale 0.02 (100 Mbit/s, 2, in pie-100m)."""
    m, k = _lab_model("pie-lab-local-0.2")
    assert k == 0.02
    top = u.rate_ceilings(m)
    assert top[("droptail", "all", "total_throughput_mbit")] == top[("droptail", "h1-h3", "throughput_mbit")] == 20.0
    assert top[("pie-100m", "all", "total_throughput_mbit")] == pytest.approx(2.0)
    assert top[("pie", "s2:s2-eth2", "utilization")] == 1.0
    e = Estimate(19.82, 18.85, 20.79, 0.43, 10, "batch means of 10")
    assert u.compare(u.within_range(e, "total_throughput_mbit"), 15, 20.5) == "undecided"  # without the cap
    cut = u.within_range(e, "total_throughput_mbit", top[("droptail", "all", "total_throughput_mbit")])
    assert (cut.value, cut.low, cut.high) == (19.82, 18.85, 20.0)
    assert u.compare(cut, 15, 20.5) == "holds"
    # a value above the ceiling (a measured burst) keeps its interval: it never leaves out its value
    assert u.within_range(Estimate(20.3, 19.5, 21.1, 0.4, 10), "total_throughput_mbit", 20.0).high == 21.1


def test_a_total_is_cut_at_the_port_every_item_crosses_and_at_most_the_sum_of_its_items():
    """pacing-lab's four pairs share one 10 Gbit/s switch port (20 Mbit/s at k = 0.002): their
    total is at most that port's rate, not four times it; codel-lab's two flows alike."""
    m, _ = _lab_model("pacing-lab-local-0.5")
    top = u.rate_ceilings(m)
    pairs = [key for key in top if key[0] == "pairs-paced" and key[2] == "throughput_mbit"]
    assert len(pairs) == 4 and all(top[key] == 20.0 for key in pairs)
    assert top[("pairs-paced", "all", "total_throughput_mbit")] == 20.0


def test_the_recorded_run_s_throughput_intervals_end_at_its_bottleneck(labs):
    """The recorded pie-lab run's drop tail trial: throughput 18.98 Mbit/s whose batch-means
    interval reached 20.44, above the 20 Mbit/s bottleneck (and utilization above 1):
    intervals.csv now ends both at what the link allows."""
    import pandas as pd
    run, _ = labs["pie-lab-local-0.2"]
    iv = pd.read_csv(run / "intervals.csv").set_index(["trial", "subject", "phase", "statistic"])
    assert iv.loc[("droptail", "h1-h3", "all", "throughput_mbit"), "high"] == 20.0
    assert iv.loc[("droptail", "all", "all", "total_throughput_mbit"), "high"] == 20.0
    assert iv.loc[("droptail", "s2:s2-eth2", "all", "utilization"), "high"] == 1.0
    assert iv.loc[("pie-100m", "h1-h3", "all", "throughput_mbit"), "high"] <= 2.0
    assert (iv.xs("all", level="phase").loc[lambda d: d.index.get_level_values("statistic") == "utilization", "high"]
            <= 1.0).all()


def test_batches_hold_the_same_number_of_the_sparsest_series_samples():
    from analysis.summary import batch_edges
    assert u.batch_count(60) == u.MAX_BATCHES and u.batch_count(7) == 7 and u.batch_count(5) == 5
    assert u.batch_count(4) == 0  # fewer than MIN_BATCHES
    # iperf3 stamps each 1-s report at its end, a little after the schedule's second: a 5-s
    # trial's five reports give five batches, each ending at one of them
    t = np.array([1.02, 2.02, 3.02, 4.02, 5.02])
    assert batch_edges(t, 0.0, 5.02) == [0.0, 1.02, 2.02, 3.02, 4.02, 5.02]
    assert batch_edges(t, 0.0, 5.0) == []  # four reports in (0, 5]: no interval
    edges = batch_edges(np.arange(1, 31, dtype=float), 0.0, 30.0)  # 30 reports: 10 batches of 3
    assert len(edges) == 11 and edges[1] == 3 and edges[-2] == 27 and edges[-1] == 30


def test_the_t_interval_of_repetitions():
    e = u.t_interval([10.0, 12.0, 11.0, 13.0, 9.0])  # as repetitions.csv: 9.0368 .. 12.9632
    assert e.value == 11 and e.low == pytest.approx(9.0368, abs=1e-4) and e.high == pytest.approx(12.9632, abs=1e-4)
    assert e.sd == pytest.approx(1.58114, abs=1e-5) and e.n == 5
    assert not u.t_interval([4.0]).has_interval and math.isnan(u.t_interval([]).value)


def test_a_value_is_judged_by_where_its_whole_interval_lies():
    assert u.compare(Estimate(0.9, 0.85, 0.95, 0.02, 5), 0.8, math.inf) == "holds"
    assert u.compare(Estimate(0.7, 0.65, 0.75, 0.02, 5), 0.8, math.inf) == "fails"
    assert u.compare(Estimate(0.79, 0.74, 0.84, 0.02, 5), 0.8, math.inf) == "undecided"
    assert u.compare(Estimate.point(0.79), 0.8, math.inf) == "fails"  # a point is judged as a point
    assert u.compare(Estimate(0.5, 0.45, 0.56, 0.02, 5), 0.4, 0.55) == "undecided"  # straddles the upper end
    assert u.combine(["holds", "undecided", "fails"]) == "fails"
    assert u.combine(["holds", "undecided"]) == "undecided" and u.combine(["holds", "holds"]) == "holds"


def test_differences_and_ratios_take_the_interval_arithmetic_of_their_two_values():
    a, b = Estimate(10, 9, 11, 0.5, 10), Estimate(4, 3, 5, 0.5, 10)
    d = u.difference(a, b)
    assert (d.value, d.low, d.high) == (6, 4, 8) and d.sd == pytest.approx(math.hypot(0.5, 0.5))
    r = u.ratio(a, b)
    assert r.value == 2.5 and r.low == pytest.approx(9 / 5) and r.high == pytest.approx(11 / 3)
    assert u.ratio(a, Estimate(1, -1, 3, 1, 10)).low == -math.inf  # the divisor's interval holds 0
    assert math.isnan(u.ratio(a, Estimate.point(0)).value)
    ab = u.difference(Estimate(1, 0, 2, 0.5, 10), Estimate(1.5, 1, 2, 0.2, 10), absolute=True)
    assert ab.value == 0.5 and ab.low == 0 and ab.high == 2  # |[-2, 1]|: from 0, as it holds 0
    # a point and an interval: the interval's width alone
    assert (u.difference(a, Estimate.point(4)).low, u.difference(a, Estimate.point(4)).high) == (5, 7)


def test_the_repetitions_that_would_decide_a_straddling_value():
    e = Estimate(0.79, 0.74, 0.84, 0.02, 5)
    n = u.repetitions_to_decide(e, 0.8, math.inf)  # gap 0.01, sd 0.02: t(n-1) 0.02 / sqrt(n) < 0.01
    assert n == next(k for k in range(2, 101) if u.t_quantile(k - 1) * 0.02 / math.sqrt(k) < 0.01) == 18
    assert u.repetitions_to_decide(Estimate(0.8, 0.75, 0.85, 0.02, 5), 0.8, math.inf) is None  # on the bound
    assert u.repetitions_to_decide(Estimate(0.79, 0.74, 0.84, math.nan, 5), 0.8, math.inf) is None  # spread unknown
    assert u.repetitions_to_decide(Estimate(0.7999, 0.7, 0.9, 0.1, 5), 0.8, math.inf) is None  # beyond 100
    assert u.repetitions_to_decide(Estimate(0.9, 0.85, 0.95, 0.02, 5), 0.8, math.inf) is None  # decided


@pytest.fixture(scope="module")
def labs(tmp_path_factory):
    """The recorded pie-lab and codel-lab runs (tests/data/labs), analysed anew."""
    out = {}
    for name in ("pie-lab-local-0.2", "codel-lab-local-0.2"):
        run = shutil.copytree(LABS / name, tmp_path_factory.mktemp(name) / "run",
                              ignore=shutil.ignore_patterns("expected"))
        out[name] = (run, analysis.analyze(run, figures=False))
    return out


def _claim(res, cid):
    return next(c for c in res.verdict["claims"] if c["id"] == cid)


def test_a_recorded_claim_clear_above_its_bound_holds(labs):
    """pie-lab's pie-cuts-delay: drop-tail's median RTT over PIE's, 5.09 (3.90 to 6.64 by the
    interval arithmetic of the two trials' batch-means intervals), at least 3: holds."""
    c = _claim(labs["pie-lab-local-0.2"][1], "pie-cuts-delay")
    assert c["status"] == "holds" and c["holds"] is True
    (v,) = c["values"]
    assert v["outcome"] == "holds" and 3 < v["low"] < v["value"] < v["high"]
    assert v["value"] == pytest.approx(5.088, abs=1e-3) and v["interval"] == "batch means of 10"


def test_a_recorded_claim_clear_below_its_bound_fails(labs):
    """codel-lab's droptail-bbr-dominates: BBR's throughput over cubic's, 0.13 (at most 0.28),
    where the claim asks for at least 1.5: fails, whatever the intervals."""
    c = _claim(labs["codel-lab-local-0.2"][1], "droptail-bbr-dominates")
    assert c["status"] == "fails" and c["holds"] is False
    (v,) = c["values"]
    assert v["outcome"] == "fails" and v["high"] < 1.5


def test_a_recorded_claim_that_straddles_its_bound_is_undecided(labs):
    """pie-lab's link-used at 100 Mbit/s: utilization 0.89 whose 95 % interval (0.70 to 1.08)
    holds the claim's 0.8: undecided, with the repetitions that would likely decide it, and the
    run inconclusive rather than reproduced (its values alone hold)."""
    run, res = labs["pie-lab-local-0.2"]
    c = _claim(res, "link-used")
    assert c["status"] == "undecided" and c["holds"] is None and c["values_alone"] == "holds"
    straddle = [v for v in c["values"] if v["outcome"] == "undecided"]
    assert straddle and all(v["low"] < 0.8 < v["high"] for v in straddle)
    n = max(v["repetitions_to_decide"] for v in straddle)
    assert isinstance(n, int) and n >= 2 and f"REPEAT={n}" in c["reason"]
    assert res.verdict["verdict"] == "inconclusive" and res.verdict["reproduced"] is False
    assert verdict_line(res.verdict) == (f"inconclusive: 3 of 4 claims hold; 1 undecided (link-used); the undecided "
                                         f"claim's 95 % intervals straddle a bound; REPEAT={n} would likely decide it")
    written = json.loads((run / "verdict.json").read_text())
    assert written["claims"] == res.verdict["claims"]
    report = (run / "report.md").read_text()
    assert "`link-used` **undecided**" in report and "straddles a bound" in report
    # intervals.csv holds what the verdict read
    import pandas as pd
    iv = pd.read_csv(run / "intervals.csv")
    row = iv[(iv["trial"] == straddle[0]["at"].split("/")[0]) & (iv["statistic"] == "utilization")
             & (iv["phase"] == "all")].iloc[0]
    assert row["low"] == pytest.approx(straddle[0]["low"], rel=1e-5) and row["batches"] == 10
    assert np.isclose(row["value"], straddle[0]["value"], rtol=1e-5)


# --- what the substrate delivers: pacing ---------------------------------------------------------
PACING = LABS / "pacing-lab-local-0.5"


def _pacing_checks(run: Path) -> dict[str, dict]:
    from analysis import health
    from netrepro.runfolder.reading import read_run
    _, data, spec = read_run(run)
    scaled = spec.at_rate_scale(float(data["rate_scale"]["k"]))
    return {rec["id"]: next(c for c in health.trial_health(scaled, rec, run / "raw" / rec["id"], 0.5)["checks"]
                            if c["id"] == "pacing_rate_off") for rec in data["trials"]}


def _paced_run(tmp_path: Path) -> Path:
    """The recorded pacing-lab run (made before pacing_rate_off was), its recorded experiment
    given pacing-lab's threshold of today, as a run made now records it."""
    run = shutil.copytree(PACING, tmp_path / "run", ignore=shutil.ignore_patterns("expected"))
    data = json.loads((run / "run.json").read_text())
    data["spec"]["health"]["pacing_rate_off_max_fraction"] = 0.25
    (run / "run.json").write_text(json.dumps(data, indent=1))
    return run


def test_a_paced_flow_that_keeps_its_rate_passes_and_the_check_is_judged_only_where_pacing_limits(tmp_path):
    checks = _pacing_checks(_paced_run(tmp_path))
    assert {t for t, c in checks.items() if c["passed"] is not None} == {"fq-maxrate", "fq-rate", "streams-paced"}
    assert all(checks[t]["passed"] is True and checks[t]["value"] == 0 for t in ("fq-maxrate", "fq-rate", "streams-paced"))
    assert checks["fq-rate"]["detail"].startswith("h1-h2: 0 of 4 intervals off 10 Mbit/s by more than 10%")
    # the four paced pairs ask for the whole bottleneck (4 x 2.5 of 10): the TBF, not the pacing, sets their rates
    assert checks["pairs-paced"]["passed"] is None and "not applicable" in checks["pairs-paced"]["detail"]
    assert checks["unpaced"]["passed"] is None


def test_a_paced_flow_off_its_rate_fails_the_check_and_its_claims_are_inconclusive(tmp_path):
    """fq-rate's flow at 60 % of its pacing rate in three of its four measured seconds after
    the first (what late timers do): pacing_rate_off 0.75, above pacing-lab's 0.25, and the
    claims reading fq-rate are inconclusive, never failed."""
    from netrepro.runfolder.integrity import sha256_tree
    run = _paced_run(tmp_path)
    f = run / "raw" / "fq-rate" / "h1" / "iperf3-h1-h2.json"
    report = json.loads(f.read_text())
    measured = [iv for iv in report["intervals"] if not iv["sum"]["omitted"]]
    for iv in measured[2:]:
        for part in [*iv["streams"], iv["sum"]]:
            part["bits_per_second"] = 0.6 * 10e6
    f.write_text(json.dumps(report))
    data = json.loads((run / "run.json").read_text())
    data["raw_sha256"] = sha256_tree(run / "raw")
    (run / "run.json").write_text(json.dumps(data, indent=1))
    check = _pacing_checks(run)["fq-rate"]
    assert check["passed"] is False and check["value"] == 0.75
    assert check["detail"].startswith("h1-h2: 3 of 4 intervals off 10 Mbit/s by more than 10% (median deviation -40.0%)")
    res = analysis.analyze(run, figures=False)
    paced = next(c for c in res.verdict["claims"] if c["id"] == "paced-at-its-rate")
    assert paced["status"] == "inconclusive" and "fq-rate: pacing_rate_off 75.0 % (max 25.0 %)" in paced["reason"]
    assert {"trial": "fq-rate", "check": "pacing_rate_off"}.items() <= next(
        f for f in res.verdict["health_failures"] if f["check"] == "pacing_rate_off").items()
