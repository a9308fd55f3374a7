"""analysis/outputs.py and the parsers it uses: Jain's index and the coefficient of variation
against hand-computed values, iperf3's JSON report (a real one, recorded on this machine:
tests/data/iperf3/SOURCE.md), the queue of a whole qdisc stack, and each claim kind."""

from __future__ import annotations

import math
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import yaml

from analysis.claims import check_claim, evaluate, scaled_thresholds
from analysis.figures import draw
from analysis.summary import SUMMARY_KEYS, cov, jain_index, trial_statistics
from analysis.tidy import read_node_table, trial_tidy
from analysis.raw import parse_iperf3, parse_ping, parse_qdisc_fields, parse_qdisc_stack, parse_tc_classes
from conftest import claim_records
from netrepro.model import Check, Collector, Figure, Trial
from netrepro.experiment.spec import load_spec

DATA = Path(__file__).resolve().parent / "data"


def test_jain_index_by_hand():
    assert jain_index([5, 5, 5, 5]) == 1.0
    assert jain_index([10, 0, 0, 0]) == 0.25          # one takes all: 1/n
    # (1+2+3)^2 / (3 * (1+4+9)) = 36 / 42
    assert jain_index([1, 2, 3]) == pytest.approx(36 / 42)
    # four flows at 4.1, 2.2, 1.6 and 1.5 Gbit/s: 9.4^2 / (4 * (16.81 + 4.84 + 2.56 + 2.25)) = 88.36 / 105.84
    assert jain_index([4.1, 2.2, 1.6, 1.5]) == pytest.approx(88.36 / 105.84)
    assert math.isnan(jain_index([])) and math.isnan(jain_index([0, 0]))
    assert jain_index([2, float("nan"), 2]) == 1.0


def test_cov_by_hand():
    # mean 2, population std sqrt(((1)^2 + 0 + 1^2) / 3) = sqrt(2/3)
    assert cov([1, 2, 3]) == pytest.approx(math.sqrt(2 / 3) / 2)
    assert cov([4, 4]) == 0.0 and math.isnan(cov([0, 0])) and math.isnan(cov([]))


def test_parse_iperf3_real_report():
    iv, end = parse_iperf3((DATA / "iperf3" / "two-streams-omit.json").read_text())
    assert sorted(iv["stream"].unique()) == [0, 1]
    assert iv["omitted"].any() and not iv["omitted"].all()   # -O 1: the first second is omitted
    assert (iv["t_s"].diff().dropna() >= 0).all()
    assert iv["bits_per_second"].gt(0).all() and iv["rtt_ms"].gt(0).all() and iv["snd_cwnd_bytes"].gt(0).all()
    assert end["sent_bps"] > 0 and len(end["streams"]) == 2
    assert end["sent_bps"] == pytest.approx(sum(s["sent_bps"] for s in end["streams"]), rel=0.01)


def test_parse_iperf3_error_report():
    with pytest.raises(ValueError, match="iperf3 reported: unable to connect"):
        parse_iperf3('{"start": {}, "intervals": [], "end": {}, "error": "unable to connect to server: Connection refused"}')


def test_parse_qdisc_stack_root_backlog_and_all_drops():
    line = ('{"t": 100.5, "dev": "gw-b", "qdisc": [{"kind": "tbf", "handle": "1:", "root": true, "backlog": 3000, '
            '"qlen": 2, "drops": 1}, {"kind": "bfifo", "handle": "2:", "parent": "1:1", "backlog": 3000, "qlen": 2, '
            '"drops": 7}]}')
    df = parse_qdisc_stack(line + "\nnot json\n")
    assert df.to_dict("records") == [{"t_epoch_s": 100.5, "backlog_bytes": 3000.0, "backlog_packets": 2.0, "drops": 8.0}]


SUMMARY = pd.DataFrame([
    {"trial": t, "phase": ph, "subject": s, "statistic": st, "value": v} for t, ph, s, st, v in [
        ("droptail", "all", "rtt", "rtt_median_ms", 190.0), ("pie", "all", "rtt", "rtt_median_ms", 30.0),
        ("droptail", "all", "all", "jain_index", 0.7), ("pie", "all", "all", "jain_index", 0.99),
        ("pie", "p1", "rtt", "rtt_median_ms", 10.0), ("pie", "p2", "rtt", "rtt_median_ms", 40.0),
        ("pie", "p3", "rtt", "rtt_median_ms", 15.0)]])
IDS = ["droptail", "pie"]


@pytest.mark.parametrize("check, holds, words", [
    ({"kind": "bound", "select": {"statistic": "jain_index", "trials": ["pie"]}, "min": 0.95}, True, "pie/all/all 0.99"),
    ({"kind": "bound", "select": {"statistic": "jain_index"}, "min": 0.95}, False, "droptail/all/all 0.7"),
    ({"kind": "ratio", "higher": {"statistic": "rtt_median_ms", "trials": ["droptail"], "subjects": ["rtt"]},
      "lower": {"statistic": "rtt_median_ms", "trials": ["pie"], "subjects": ["rtt"]}, "min": 3}, True, "ratio 6.333"),
    ({"kind": "difference", "higher": {"statistic": "rtt_median_ms", "trials": ["droptail"]},
      "lower": {"statistic": "rtt_median_ms", "trials": ["pie"]}, "min": 200}, False, "difference 160"),
    ({"kind": "bound", "select": {"statistic": "cwnd_mean_bytes", "trials": ["pie"]}, "min": 1}, None, "missing"),
    ({"kind": "rise_and_fall", "select": {"statistic": "rtt_median_ms", "trials": ["pie"], "subjects": ["rtt"],
                                          "phases": ["p1", "p2", "p3"]}, "order": "phases", "peak": "p2",
      "tolerance": 1, "min_rise": 20}, True, "by 25"),
    ({"kind": "rise_and_fall", "select": {"statistic": "rtt_median_ms", "trials": ["pie"], "subjects": ["rtt"],
                                          "phases": ["p1", "p2", "p3"]}, "order": "phases", "peak": "p2",
      "tolerance": 1, "min_rise": 30}, False, "min 30"),
])
def test_claim_kinds(check, holds, words):
    ok, evidence = check_claim(SUMMARY, Check.from_data(check), IDS)
    assert ok is holds and words in evidence, evidence


def _ratio_summary(droptail_drops, pie_drops):
    rows = [("droptail", droptail_drops), ("pie", pie_drops)]
    return pd.DataFrame([{"trial": t, "phase": "all", "subject": "s2:s2-eth2", "statistic": "drops", "value": v}
                         for t, v in rows if v is not None], columns=SUMMARY_KEYS)


RATIO = {"id": "more-drops", "text": "t", "check": {
    "kind": "ratio", "higher": {"statistic": "drops", "trials": ["droptail"], "subjects": ["s2:s2-eth2"]},
    "lower": {"statistic": "drops", "trials": ["pie"], "subjects": ["s2:s2-eth2"]}, "min": 2}}


@pytest.mark.parametrize("higher, lower, why", [
    (0.0, 0.0, "pie/s2:s2-eth2/all is 0: the ratio is undefined"),   # 0 / 0 used to hold
    (5.0, 0.0, "pie/s2:s2-eth2/all is 0: the ratio is undefined"),   # x / 0: no ratio either
    (None, None, "droptail/s2:s2-eth2/all missing"),                 # no rows at all
    (None, 3.0, "droptail/s2:s2-eth2/all missing"),
    (math.nan, 3.0, "droptail/s2:s2-eth2/all missing"),
])
def test_a_ratio_of_zero_or_missing_terms_is_not_evaluable(higher, lower, why):
    holds, evidence = check_claim(_ratio_summary(higher, lower), Check.from_data(RATIO["check"]), IDS)
    assert holds is None and why in evidence, evidence
    v = evaluate(_ratio_summary(higher, lower), claim_records([RATIO]), IDS, {})
    c = v["claims"][0]
    assert c["status"] == "not evaluable" and c["holds"] is None and why in c["reason"]
    assert v["verdict"] == "inconclusive" and v["reproduced"] is False
    assert evaluate(_ratio_summary(8.0, 2.0), claim_records([RATIO]), IDS, {})["claims"][0]["status"] == "holds"


@pytest.mark.parametrize("check, why", [
    ({"kind": "bound", "select": {"statistic": "jain_index", "trials": ["pie"], "subjects": ["gone"]}, "min": 0.5},
     "pie/gone/all missing"),
    ({"kind": "difference", "higher": {"statistic": "rtt_median_ms", "trials": ["droptail"], "subjects": ["rtt"]},
      "lower": {"statistic": "rtt_median_ms", "trials": ["pie"], "subjects": ["gone"]}}, "pie/gone/all missing"),
    ({"kind": "difference", "higher": {"statistic": "rtt_median_ms", "subjects": ["rtt"]},
      "lower": {"statistic": "rtt_median_ms", "trials": ["pie"], "subjects": ["rtt"]}}, "expected the same number"),
    ({"kind": "rise_and_fall", "select": {"statistic": "rtt_median_ms", "trials": ["pie"], "subjects": ["rtt"],
                                          "phases": ["p1", "p2", "p4"]}, "order": "phases", "peak": "p2",
      "tolerance": 1, "min_rise": 1}, "pie/rtt/p4 missing"),
])
def test_no_claim_kind_holds_or_fails_on_missing_data(check, why):
    holds, evidence = check_claim(SUMMARY, Check.from_data(check), IDS)
    assert holds is None and why in evidence, evidence


def test_default_subjects_come_from_the_model_so_a_missing_one_is_seen():
    """Without ``subjects``, a claim reads every subject the model computes the statistic of:
    a subject whose rows are missing reads missing instead of being silently left out."""
    check = {"kind": "bound", "select": {"statistic": "rtt_median_ms", "trials": ["pie"]}, "max": 100}
    assert check_claim(SUMMARY, Check.from_data(check), IDS)[0] is True  # from the table alone: rtt only
    computed = {"pie": {"rtt": ["rtt_median_ms"], "rtt2": ["rtt_median_ms"]}}
    holds, evidence = check_claim(SUMMARY, Check.from_data(check), IDS, computed)
    assert holds is None and "pie/rtt2/all missing" in evidence


def test_a_claim_reading_an_unhealthy_trial_is_inconclusive():
    claims = [{"id": "c", "text": "t", "check": {"kind": "bound", "select": {"statistic": "jain_index",
                                                                           "trials": ["pie"]}, "min": 0.5}}]
    v = evaluate(SUMMARY, claim_records(claims), IDS, {"pie": [{"trial": "pie", "check": "nodes_cpu_busy", "value": 0.9}]})
    assert v["verdict"] == "inconclusive" and v["claims"][0]["holds"] is None and "nodes_cpu_busy" in v["claims"][0]["reason"]
    v = evaluate(SUMMARY, claim_records(claims), IDS, {"droptail": [{"trial": "droptail", "check": "x", "value": 1}]})
    assert v["verdict"] == "reproduced"  # the claim does not read droptail


def test_parse_tc_classes_blocks():
    # the text layout of iproute2 6.1 `tc -s class show` (tc_class.c, q_fq_codel.c)
    text = ("class tbf 1:1 parent 1: leaf 2: \n Sent 12345 bytes 10 pkt (dropped 3, overlimits 0 requeues 0) \n"
            " backlog 15Kb 10p requeues 0\n"
            "class fq_codel 2:3 parent 2: \n (dropped 0, overlimits 0 requeues 0) \n backlog 4542b 3p requeues 0\n"
            "  deficit -86 count 0 lastcount 0 ldelay 1.2ms\n"
            "class fq_codel 2:1a parent 2: \n backlog 0b 0p requeues 0\n")
    got = parse_tc_classes(text)
    assert [(c["kind"], c["classid"], c["parent"], c["minor"]) for c in got] == [
        ("tbf", "1:1", "1:", 1), ("fq_codel", "2:3", "2:", 3), ("fq_codel", "2:1a", "2:", 26)]
    assert [(c["backlog_bytes"], c["backlog_packets"]) for c in got] == [(15360.0, 10.0), (4542.0, 3.0), (0.0, 0.0)]
    assert got[0]["dropped"] == 3.0 and math.isnan(got[1]["dropped"])
    assert parse_tc_classes("backlog 3b 1p\n") == []  # no block: nothing


def test_parse_qdisc_fields_are_the_qdiscs_own():
    line = ('{"t": 7.0, "qdisc": [{"kind": "tbf", "handle": "1:", "root": true, "backlog": 30, "qlen": 1, "drops": 0},'
            ' {"kind": "fq_codel", "handle": "2:", "parent": "1:1", "backlog": 30, "qlen": 1, "drops": 2,'
            ' "maxpacket": 1514, "new_flows_len": 1, "old_flows_len": 1, "options": {"flows": 2}, "ecn": true}]}')
    f = parse_qdisc_fields(line)
    assert sorted(zip(f["kind"], f["field"], f["value"])) == [
        ("fq_codel", "maxpacket", 1514.0), ("fq_codel", "new_flows_len", 1.0), ("fq_codel", "old_flows_len", 1.0)]


def _class_line(t, busy):
    cls = "".join(f"class fq_codel 2:{m:x} parent 2: \\n backlog {1514 * p}b {p}p requeues 0\\n" for m, p in busy)
    return (f'{{"t": {t}, "dev": "s2-eth2", "tx_bytes": 0, "tx_packets": 0, "qdisc": [{{"kind": "tbf", "handle": "1:",'
            f' "root": true, "backlog": {1514 * sum(p for _, p in busy)}, "qlen": 1, "drops": 0}}], "classes": "{cls}"}}')


def test_busy_classes_tell_a_shared_bucket(tmp_path):
    """The per-bucket statistics of fq_codel: a trial whose two flows share one bucket keeps one
    busy class; one whose flows hash apart keeps two (classes listed with 0 packets not counted)."""
    trial = Trial.from_data({"id": "fq", "duration_s": 3.0, "traffic": [], "labels": {}, "sysctls": {},
                             "qdiscs": {"s2:s2-eth2": [{"kind": "tbf", "rate_mbit": 10}, {"kind": "fq_codel", "flows": 2}]}})
    model = SimpleNamespace(collectors=(Collector("qdisc_stats", "s2:s2-eth2", 0.2, classes=True),), base_rtt=None)
    out = {}
    stray = [[(1, 3), (2, 1)]] + [[(1, 2)]] * 10  # bucket 2 busy in 1 of 11 samples (< 10 %)
    for case, samples in {"apart": [[(1, 3), (2, 2)], [(1, 1), (2, 0)], [(1, 2), (2, 4)], []],
                          "shared": [[(2, 5)], [(2, 3)], [(2, 1)], []], "stray": stray}.items():
        d = tmp_path / case / "raw" / "fq" / "s2"
        d.mkdir(parents=True)
        (d / "qdisc.jsonl").write_text("\n".join(_class_line(100.1 + i * 0.2, b) for i, b in enumerate(samples)) + "\n")
        problems: list[str] = []
        tidy, _ = trial_tidy(model, trial, {"start_epoch_s": 100.0}, d.parent, 1.0, problems)
        assert problems == []
        busy = tidy[tidy["metric"] == "busy_classes"]["value"].tolist()
        rows = trial_statistics(model, trial, tidy, {}, [])
        out[case] = (busy, {r["statistic"]: r["value"] for r in rows if "classes" in r["statistic"]})
    assert out["apart"] == ([2, 1, 2, 0], {"busy_classes_max": 2.0, "classes_in_use": 2.0})
    assert out["shared"] == ([1, 1, 1, 0], {"busy_classes_max": 1.0, "classes_in_use": 1.0})
    assert out["stray"][1] == {"busy_classes_max": 2.0, "classes_in_use": 1.0}



def test_a_node_s_raw_file_is_read_parsed_and_named_when_missing_or_empty(tmp_path):
    """The one reader of the ping and port samplers: a missing file is None, named as missing;
    a file without rows is its empty table, named with what it lacks; a good one is not named."""
    trial_dir = tmp_path / "run" / "raw" / "t1"
    (trial_dir / "r").mkdir(parents=True)
    (trial_dir / "r" / "qdisc.jsonl").write_text("")
    (trial_dir / "r" / "ping.txt").write_text("[100.5] 64 bytes from 10.0.0.2: icmp_seq=1 ttl=64 time=20.1 ms\n")
    problems: list[str] = []
    assert read_node_table(trial_dir, "c", "ping.txt", parse_ping, "no echo replies", problems) is None
    text, q = read_node_table(trial_dir, "r", "qdisc.jsonl", parse_qdisc_stack, "no samples", problems)
    assert text == "" and q.empty
    text, p = read_node_table(trial_dir, "r", "ping.txt", parse_ping, "no echo replies", problems)
    assert p["rtt_ms"].tolist() == [20.1] and text.startswith("[100.5]")
    assert problems == ["raw/t1/c/ping.txt: missing", "raw/t1/r/qdisc.jsonl: no samples"]

def test_a_claim_with_a_condition_the_run_does_not_meet_is_not_applicable():
    when = {"select": {"statistic": "jain_index", "trials": ["droptail"]}, "min": 0.9}
    claims = [{"id": "c", "text": "t", "when": when,
               "check": {"kind": "bound", "select": {"statistic": "jain_index", "trials": ["pie"]}, "min": 0.999}},
              {"id": "d", "text": "u", "check": {"kind": "bound", "select": {"statistic": "jain_index",
                                                                            "trials": ["pie"]}, "min": 0.5}}]
    v = evaluate(SUMMARY, claim_records(claims), IDS, {})
    assert v["claims"][0]["status"] == "not applicable" and "droptail/all/all 0.7" in v["claims"][0]["reason"]
    assert v["verdict"] == "reproduced"  # the claim that would fail does not apply; d holds
    met = dict(claims[0], when=dict(when, min=0.5))
    v = evaluate(SUMMARY, claim_records([met, claims[1]]), IDS, {})
    assert v["claims"][0]["status"] == "fails" and v["verdict"] == "not reproduced" and "0.7" in v["claims"][0]["condition"]
    v = evaluate(SUMMARY, claim_records(claims[:1]), IDS, {})
    # nothing applied: nothing was judged, so neither reproduced nor refuted
    assert v["verdict"] == "inconclusive" and v["reproduced"] is False


def test_a_claim_below_its_rate_scale_is_not_applicable():
    claim = {"id": "c", "text": "t", "rate_scale_min": 0.07,
             "check": {"kind": "bound", "select": {"statistic": "jain_index", "trials": ["pie"]}, "min": 0.5}}
    low = evaluate(SUMMARY, claim_records([claim]), IDS, {}, rate_scale=0.02)
    assert low["claims"][0]["status"] == "not applicable" and "rate scale 0.02 is below 0.07" in low["claims"][0]["reason"]
    assert evaluate(SUMMARY, claim_records([claim]), IDS, {}, rate_scale=0.1)["claims"][0]["status"] == "holds"


def test_a_claim_read_at_a_shorter_time_scale_than_its_minimum_is_not_applicable():
    """The file's time_scale.min (here 0.25) applies to every claim without its own
    time_scale_min; a claim's own wins. At TIME_SCALE 0.1 only the claim allowing 0.05 is
    judged."""
    check = {"kind": "bound", "select": {"statistic": "jain_index", "trials": ["pie"]}, "min": 0.5}
    claims = [{"id": "c", "text": "t", "check": check}, {"id": "d", "text": "u", "time_scale_min": 0.05, "check": check}]
    v = evaluate(SUMMARY, claim_records(claims), IDS, {}, time_scale=0.1, time_scale_min=0.25)
    assert [c["status"] for c in v["claims"]] == ["not applicable", "holds"] and v["verdict"] == "reproduced"
    assert "time scale 0.1 is shorter than 0.25, the shortest at which the claim keeps its meaning" in v["claims"][0]["reason"]
    v = evaluate(SUMMARY, claim_records(claims[:1]), IDS, {}, time_scale=0.1, time_scale_min=0.25)
    assert v["verdict"] == "inconclusive"  # nothing judged
    assert evaluate(SUMMARY, claim_records(claims), IDS, {}, time_scale=0.25, time_scale_min=0.25)["claims"][0]["status"] == "holds"


def test_a_claim_below_its_scale_is_not_applicable_even_when_its_trial_is_unhealthy_or_incomplete():
    """The scales are the run's design, known before it ran: no healthier machine could judge
    such a claim, so it is not applicable rather than inconclusive or not evaluable; a claim at
    its scale reading the same unhealthy trial is inconclusive."""
    check = {"kind": "bound", "select": {"statistic": "jain_index", "trials": ["pie"]}, "min": 0.5}
    claims = [{"id": "c", "text": "t", "check": check}, {"id": "d", "text": "u", "time_scale_min": 0.05, "check": check},
              {"id": "e", "text": "v", "rate_scale_min": 0.5, "time_scale_min": 0.05, "check": check}]
    sick = {"pie": [{"trial": "pie", "check": "nodes_cpu_busy", "value": 0.9, "threshold": 0.6, "unit": "fraction",
                     "detail": ""}]}
    v = evaluate(SUMMARY, claim_records(claims), IDS, sick, time_scale=0.1, time_scale_min=0.25, rate_scale=0.1)
    assert [c["status"] for c in v["claims"]] == ["not applicable", "inconclusive", "not applicable"], v["claims"]
    assert "time scale 0.1" in v["claims"][0]["reason"] and "rate scale 0.1" in v["claims"][2]["reason"]
    assert v["verdict"] == "inconclusive" and v["health_failures"]
    gaps = evaluate(SUMMARY, claim_records(claims[:1]), IDS, {}, incomplete={"pie": ["ping.txt damaged"]},
                            time_scale=0.1, time_scale_min=0.25)
    assert gaps["claims"][0]["status"] == "not applicable"


def test_the_time_scale_note_names_the_claims_a_short_run_cannot_judge(tmp_path):
    from netrepro.model import claim_time_scale_min, time_scale_note
    spec = load_spec("pie-vs-red")
    data = {**spec.data, "time_scale": {"min": 0.25, "note": "measured"}}
    data["claims"] = [dict(data["claims"][0], time_scale_min=0.1)] + data["claims"][1:]
    f = tmp_path / "e.yml"
    f.write_text(yaml.safe_dump(data))
    m = load_spec(f).model
    assert [claim_time_scale_min(m, c) for c in m.claims] == [0.1, 0.25, 0.25]
    assert time_scale_note(m, 0.25) is None
    note = time_scale_note(m, 0.2)
    assert "TIME_SCALE=0.2 is shorter than the time_scale_min of claims red-follows-load, red-above-pie-under-load" in note
    assert "every claim will be reported not applicable" in time_scale_note(m, 0.05)


def test_a_figure_draws_only_the_trials_it_names(tmp_path):
    """``trials`` in a figure: one panel per named trial (the PNG is 2.6 in per panel tall)."""
    from PIL import Image
    tidy = pd.DataFrame([{"trial": t, "subject": "q", "stream": -1, "t_s": float(s), "metric": "busy_classes",
                          "value": float(s % 3)} for t in ("a", "b", "c") for s in range(10)])
    model = SimpleNamespace(trials=[Trial.from_data({"id": t, "duration_s": 1, "traffic": [], "qdiscs": {}})
                                    for t in ("a", "b", "c")], name="x", phases=(), figures=[],
                            reference_results=[], data={})
    every = draw(model, tidy, Figure.from_data({"id": "all3", "metric": "busy_classes"}), tmp_path)
    one = draw(model, tidy, Figure.from_data({"id": "one", "metric": "busy_classes", "trials": ["b"]}), tmp_path)
    h_every, h_one = (Image.open(p[0]).size[1] for p in (every, one))
    assert h_every > 2.5 * h_one


def _throughput_summary(total_mbit, rtt_ms=30.0):
    return pd.DataFrame([{"trial": "t", "phase": "all", "subject": "all", "statistic": "total_throughput_mbit",
                          "value": total_mbit},
                         {"trial": "t", "phase": "all", "subject": "ping", "statistic": "rtt_median_ms", "value": rtt_ms}])


def test_a_proportional_claim_is_judged_at_the_runs_rate_scale():
    """rate_scaling: proportional multiplies the thresholds on values the rate scale changes
    (Mbit/s) by k, and leaves the others (ms) as written, inside an all_of too: the flows that
    fill a 20 Mbit/s link scaled to 10 (9.9 Mbit/s) hold at k = 0.5, as 19.9 does at k = 1;
    judged as written (rate_scaling none, or none given) 9.9 fails. The entry says both."""
    from netrepro.model import rate_scaled

    link = {"kind": "bound", "select": {"statistic": "total_throughput_mbit"}, "min": 15, "max": 20.5}
    rtt = {"kind": "bound", "select": {"statistic": "rtt_median_ms"}, "max": 40}
    claim = {"id": "link-used", "text": "t", "rate_scaling": "proportional", "check": {"kind": "all_of", "checks": [link, rtt]}}
    scaled = lambda st: rate_scaled(None, st)  # noqa: E731
    at_half = evaluate(_throughput_summary(9.9), claim_records([claim]), ["t"], {}, rate_scale=0.5, scaled=scaled)["claims"][0]
    assert at_half["status"] == "holds", at_half
    assert "within [7.5, 10.25]" in at_half["evidence"] and "within [-inf, 40]" in at_half["evidence"]
    assert at_half["thresholds"] == "total_throughput_mbit 15 to 20.5 at k = 1, 7.5 to 10.25 at k = 0.5"
    whole = evaluate(_throughput_summary(19.9), claim_records([claim]), ["t"], {}, rate_scale=1, scaled=scaled)["claims"][0]
    assert whole["status"] == "holds" and "thresholds" not in whole
    for fixed in ({**claim, "rate_scaling": "none"}, {k: v for k, v in claim.items() if k != "rate_scaling"}):
        v = evaluate(_throughput_summary(9.9), claim_records([fixed]), ["t"], {}, rate_scale=0.5, scaled=scaled)["claims"][0]
        assert v["status"] == "fails" and "thresholds" not in v
    # the delay bound keeps its value: 45 ms fails at every k
    assert evaluate(_throughput_summary(9.9, 45.0), claim_records([claim]), ["t"], {}, rate_scale=0.5,
                            scaled=scaled)["claims"][0]["status"] == "fails"


def test_scaled_thresholds_follow_each_kind():
    from netrepro.model import rate_scaled

    scaled = lambda st: rate_scaled(None, st)  # noqa: E731
    diff = Check.from_data({"kind": "difference", "higher": {"statistic": "backlog_max_bytes"},
                            "lower": {"statistic": "backlog_max_bytes"}, "min": 1000})
    assert diff.at_rate_scale(0.5, scaled).min == 500
    assert scaled_thresholds(diff, 0.5, scaled) == "backlog_max_bytes at least 1000 at k = 1, at least 500 at k = 0.5"
    ratio = Check.from_data({"kind": "ratio", "higher": {"statistic": "throughput_mbit"},
                             "lower": {"statistic": "throughput_mbit"}, "min": 2})
    assert ratio.at_rate_scale(0.5, scaled) == ratio and scaled_thresholds(ratio, 0.5, scaled) == ""
    rise = {"kind": "rise_and_fall", "select": {"statistic": "drops"}, "order": "phases", "peak": "p2",
            "tolerance": 10, "min_rise": 100}
    assert Check.from_data(rise).at_rate_scale(0.1, scaled) == Check.from_data({**rise, "tolerance": 1.0, "min_rise": 10.0})
    when = Check.from_data({"select": {"statistic": "classes_in_use"}, "min": 2}, "bound")
    assert when.at_rate_scale(0.1, scaled) == when
