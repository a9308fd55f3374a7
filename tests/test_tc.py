"""Unit tests of netrepro.tc: the exact tc argv lists, no host needed."""

import pytest

from netrepro import tc


def test_netem_argv():
    assert tc.Netem(100, 1000).argv("eth1") == [
        "qdisc", "replace", "dev", "eth1", "root", "netem", "delay", "100ms", "limit", "1000"]


def test_netem_jitter_and_fraction():
    assert tc.Netem(50.5, 2000, jitter_ms=5).qdisc_args() == [
        "netem", "delay", "50.5ms", "5ms", "limit", "2000"]


def test_netem_probe_uses_add_on_root():
    assert tc.Netem(100).probe_argv("nrprobe0")[:5] == ["qdisc", "add", "dev", "nrprobe0", "root"]


def test_htb_root_two_commands():
    qdisc, klass = tc.HtbRoot(10).argvs("eth2")
    assert qdisc == ["qdisc", "replace", "dev", "eth2", "root", "handle", "1:", "htb", "default", "10"]
    assert klass == ["class", "replace", "dev", "eth2", "parent", "1:", "classid", "1:10", "htb",
                     "rate", "10mbit", "ceil", "10mbit", "burst", "15140", "cburst", "15140"]


def test_htb_burst_is_ten_ms_at_high_rates():
    assert tc.HtbRoot(100).burst == 125000          # 10 ms at 100 Mbit/s
    assert tc.HtbRoot(1).burst == 15140             # at least 10 full frames
    assert tc.HtbRoot(10, burst_bytes=3000).burst == 3000


PAPER_PIE = {"target_ms": 20, "tupdate_ms": 30, "alpha": 2, "beta": 20, "ecn": False,
             "dq_rate_estimator": True}


def test_pie_paper_parameters():
    assert tc.Pie(PAPER_PIE, limit_packets=134).argv("eth2") == (
        "qdisc replace dev eth2 parent 1:10 handle 10: pie limit 134 target 20ms tupdate 30ms "
        "alpha 2 beta 20 noecn dq_rate_estimator").split()


def test_pie_own_limit_wins_and_flags():
    args = tc.Pie({"limit_packets": 1000, "ecn": True, "bytemode": False}, limit_packets=134).qdisc_args()
    assert args == ["pie", "limit", "1000", "ecn", "nobytemode"]


def test_pie_without_dq_rate_estimator_omits_keyword():
    assert "dq_rate_estimator" not in tc.Pie({"dq_rate_estimator": False}).qdisc_args()


def test_pie_unknown_parameter():
    with pytest.raises(ValueError, match="unknown parameter"):
        tc.Pie({"target": 20}).qdisc_args()


RED = {"limit_bytes": 200000, "min_bytes": 50000, "max_bytes": 150000, "avpkt_bytes": 1500,
       "burst_packets": 56, "probability": 0.1, "bandwidth_mbit": 10, "ecn": False, "adaptive": False}


def test_red_argv():
    assert tc.Red(RED).argv("eth2") == (
        "qdisc replace dev eth2 parent 1:10 handle 10: red limit 200000 min 50000 max 150000 "
        "avpkt 1500 burst 56 probability 0.1 bandwidth 10mbit").split()


def test_red_flags():
    args = tc.Red({**RED, "ecn": True, "adaptive": True, "harddrop": True}).qdisc_args()
    assert args[-3:] == ["ecn", "adaptive", "harddrop"]


def test_red_thresholds_checked():
    with pytest.raises(ValueError, match="min_bytes < max_bytes"):
        tc.Red({**RED, "min_bytes": 160000}).qdisc_args()


def test_generic_units_and_flags():
    q = tc.Generic("fq_codel", {"target_ms": 5, "interval_ms": 100, "limit_packets": 10240,
                                "memory_limit_bytes": 33554432, "ecn": False, "quantum": 1514})
    assert q.argv("eth2") == ("qdisc replace dev eth2 parent 1:10 handle 10: fq_codel target 5ms "
                              "interval 100ms limit 10240 memory_limit 33554432 noecn quantum 1514").split()
    assert tc.Generic("fq", {"pacing": False, "maxrate_mbit": 9.5}, parent=None, handle=None).argv("e") == [
        "qdisc", "replace", "dev", "e", "root", "fq", "nopacing", "maxrate", "9.5mbit"]


def test_aqm_qdisc_dispatch():
    assert isinstance(tc.aqm_qdisc("pie", {}), tc.Pie)
    assert isinstance(tc.aqm_qdisc("red", RED), tc.Red)
    assert tc.aqm_qdisc("codel", {"target_ms": 5}).qdisc_args() == ["codel", "target", "5ms"]


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), True, "5"])
def test_num_rejects(bad):
    with pytest.raises(ValueError):
        tc.num(bad)


def test_num_format():
    assert [tc.num(10), tc.num(10.0), tc.num(0.1), tc.num(2.5)] == ["10", "10", "0.1", "2.5"]


def test_builders_are_frozen():
    with pytest.raises(Exception):
        tc.Netem(100).delay_ms = 5
