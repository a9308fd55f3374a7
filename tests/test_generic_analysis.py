"""analysis/generic.py and the parsers it uses: Jain's index and the coefficient of variation
against hand-computed values, iperf3's JSON report (a real one, recorded on this machine:
tests/data/iperf3/SOURCE.md), the queue of a whole qdisc stack, and each claim kind."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from analysis import generic
from analysis.raw import parse_iperf3, parse_qdisc_stack

DATA = Path(__file__).resolve().parent / "data"


def test_jain_index_by_hand():
    assert generic.jain_index([5, 5, 5, 5]) == 1.0
    assert generic.jain_index([10, 0, 0, 0]) == 0.25          # one takes all: 1/n
    # (1+2+3)^2 / (3 * (1+4+9)) = 36 / 42
    assert generic.jain_index([1, 2, 3]) == pytest.approx(36 / 42)
    # four flows at 4.1, 2.2, 1.6 and 1.5 Gbit/s: 9.4^2 / (4 * (16.81 + 4.84 + 2.56 + 2.25)) = 88.36 / 105.84
    assert generic.jain_index([4.1, 2.2, 1.6, 1.5]) == pytest.approx(88.36 / 105.84)
    assert math.isnan(generic.jain_index([])) and math.isnan(generic.jain_index([0, 0]))
    assert generic.jain_index([2, float("nan"), 2]) == 1.0


def test_cov_by_hand():
    # mean 2, population std sqrt(((1)^2 + 0 + 1^2) / 3) = sqrt(2/3)
    assert generic.cov([1, 2, 3]) == pytest.approx(math.sqrt(2 / 3) / 2)
    assert generic.cov([4, 4]) == 0.0 and math.isnan(generic.cov([0, 0])) and math.isnan(generic.cov([]))


def test_shaping_rate_is_the_slowest_shaper():
    assert generic.shaping_rate_mbit([{"kind": "netem", "delay_ms": 20}, {"kind": "tbf", "rate_mbit": 100}]) == 100
    assert generic.shaping_rate_mbit([{"kind": "htb", "rate_mbit": 10}, {"kind": "pie"}]) == 10
    assert generic.shaping_rate_mbit([{"kind": "fq_codel"}]) is None


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
    ({"kind": "bound", "select": {"statistic": "cwnd_mean_bytes", "trials": ["pie"]}, "min": 1}, False, "missing"),
    ({"kind": "rise_and_fall", "select": {"statistic": "rtt_median_ms", "trials": ["pie"], "subjects": ["rtt"],
                                          "phases": ["p1", "p2", "p3"]}, "order": "phases", "peak": "p2",
      "tolerance": 1, "min_rise": 20}, True, "by 25"),
    ({"kind": "rise_and_fall", "select": {"statistic": "rtt_median_ms", "trials": ["pie"], "subjects": ["rtt"],
                                          "phases": ["p1", "p2", "p3"]}, "order": "phases", "peak": "p2",
      "tolerance": 1, "min_rise": 30}, False, "min 30"),
])
def test_claim_kinds(check, holds, words):
    ok, evidence = generic.check_claim(SUMMARY, check, IDS)
    assert ok is holds and words in evidence, evidence


def test_a_claim_reading_an_unhealthy_trial_is_inconclusive():
    claims = [{"id": "c", "text": "t", "check": {"kind": "bound", "select": {"statistic": "jain_index",
                                                                           "trials": ["pie"]}, "min": 0.5}}]
    v = generic.evaluate(SUMMARY, claims, IDS, {"pie": [{"trial": "pie", "id": "nodes_cpu_busy", "value": 0.9}]})
    assert v["verdict"] == "inconclusive" and v["claims"][0]["holds"] is None and "nodes_cpu_busy" in v["claims"][0]["reason"]
    v = generic.evaluate(SUMMARY, claims, IDS, {"droptail": [{"trial": "droptail", "id": "x", "value": 1}]})
    assert v["verdict"] == "reproduced"  # the claim does not read droptail
