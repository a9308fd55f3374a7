"""Unit tests of netrepro.core.tc: the exact tc argv lists, no host needed; one test asks the
installed tc (iproute2, which make setup installs) to parse every generic keyword, for a
device that does not exist, so nothing on the host changes."""

import subprocess

import pytest

from netrepro.core import tc


def qdiscs(layers: list[dict]) -> list[tc.Qdisc]:
    """A stack's layers written as the experiment file writes them, as records."""
    return [tc.Qdisc.from_data(layer) for layer in layers]


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


def test_generic_kinds_build_from_their_keywords():
    assert tc.Generic("codel", {"target_ms": 5}).qdisc_args() == ["codel", "target", "5ms"]


@pytest.mark.parametrize("bad", [-1, float("nan"), float("inf"), True, "5"])
def test_num_rejects(bad):
    with pytest.raises(ValueError):
        tc.num(bad)


def test_num_format():
    assert [tc.num(10), tc.num(10.0), tc.num(0.1), tc.num(2.5)] == ["10", "10", "0.1", "2.5"]


def test_builders_are_frozen():
    with pytest.raises(Exception):
        tc.Netem(100).delay_ms = 5


# --- generic qdiscs: only tc words reach a node -----------------------------------------
@pytest.mark.parametrize("kind,params,key,words", [
    ("codel", {"target": "5ms; reboot"}, "target", ["one tc word", "'5ms; reboot'"]),
    ("codel", {"target": "$(reboot)"}, "target", ["one tc word"]),
    ("codel", {"limit": "-1"}, "limit", ["one tc word"]),
    ("codel", {"limit": ""}, "limit", ["one tc word"]),
    ("codel", {"tar get": 5}, "tar get", ["tc keyword"]),
    ("codel", {"-o": 5}, "-o", ["tc keyword"]),
    ("codel", {"Target": 5}, "Target", ["tc keyword"]),
    ("codel", {"targett_ms": 5}, "targett_ms", ["'targett' is not a parameter of tc-codel(8)", "interval"]),
    ("fq", {"ecn": True}, "ecn", ["not a parameter of tc-fq(8)", "pacing"]),
    ("codel", {"target_ms": "5"}, "target_ms", ["expected a number (the unit is in the name, _ms)"]),
    ("codel", {"limit": -5}, "limit", ["from 0 to 4294967295", "-5"]),
    ("codel", {"limit": 2**32}, "limit", ["from 0 to 4294967295"]),
    ("codel", {"target_ms": float("inf")}, "target_ms", ["from 0 to"]),
    ("codel", {"target_ms": float("nan")}, "target_ms", ["from 0 to"]),
    ("codel", {"ecn": 1}, "ecn", ["expected true or false"]),
    ("codel", {"limit": True}, "limit", ["expected a number or a tc word"]),
    ("cake", {"diffserv4": False}, "diffserv4", ["no negative form"]),
    ("codel", {"target": None}, "target", ["expected a number, a tc word or true/false"]),
    ("codel", {"target": [5]}, "target", ["expected a number, a tc word or true/false"]),
])
def test_generic_refuses_what_is_not_a_tc_word(kind, params, key, words):
    with pytest.raises(tc.TcParamError) as ei:
        tc.Generic(kind, params).argv(tc.DEV)
    assert ei.value.param == key
    for w in words:
        assert w in str(ei.value), str(ei.value)


def test_generic_accepts_tc_words_and_negations():
    q = tc.Generic("cake", {"bandwidth_mbit": 10, "rtt_ms": 100, "diffserv4": True, "nat": False,
                            "split-gso": False, "ack-filter": True, "memlimit": "32m", "fwmark": "0xff"})
    assert q.qdisc_args() == ["cake", "bandwidth", "10mbit", "rtt", "100ms", "diffserv4", "nonat",
                              "no-split-gso", "ack-filter", "memlimit", "32m", "fwmark", "0xff"]
    assert tc.Generic("fq", {"pacing": False, "horizon_drop": True}).qdisc_args() == ["fq", "nopacing", "horizon_drop"]


def test_generic_kind_without_keyword_table_checks_words_only():
    assert tc.Generic("sfq", {"perturb": 10, "quantum_bytes": 1514}).qdisc_args() == [
        "sfq", "perturb", "10", "quantum", "1514"]
    with pytest.raises(tc.TcParamError, match="one tc word"):
        tc.Generic("sfq", {"perturb": "10 ; x"}).qdisc_args()


def _tc_parse(kind: str, words: list[str]) -> str:
    """tc 6.1's answer to ``qdisc add`` on a device that does not exist: the options are
    parsed first, so an unknown keyword says ``What is "x"?`` and nothing reaches the kernel."""
    proc = subprocess.run(["tc", "qdisc", "add", "dev", "nrnodev0", "root", kind, *words],
                          capture_output=True, text=True, timeout=10)
    assert proc.returncode != 0
    return proc.stdout + proc.stderr


#: A valid value of each keyword that takes one (tc-<qdisc>(8)).
SAMPLE = {"limit": "100", "target": "5ms", "interval": "100ms", "ce_threshold": "1ms", "flows": "1024",
          "memory_limit": "1000000", "quantum": "1514", "drop_batch": "64", "flow_limit": "100",
          "initial_quantum": "15140", "maxrate": "10mbit", "buckets": "1024", "refill_delay": "40ms",
          "low_rate_threshold": "550kbit", "orphan_mask": "1023", "timer_slack": "10us", "horizon": "10s",
          "bandwidth": "10mbit", "rtt": "100ms", "memlimit": "32m", "fwmark": "0xff", "overhead": "18",
          "mpu": "64", "burst": "32k", "buffer": "32k", "maxburst": "32k", "mtu": "1514", "minburst": "1514",
          "rate": "10mbit", "peakrate": "20mbit", "latency": "50ms", "linklayer": "ethernet"}


#: How tc 6.1 refuses a keyword it does not know (q_*.c: ``What is "x"?``; tbf and fifo:
#: ``unknown parameter "x"``/``What is``).
UNKNOWN = ("What is", "unknown parameter")


@pytest.mark.parametrize("kind", sorted(tc.GENERIC_KEYWORDS))
def test_every_generic_keyword_parses_in_tc(kind):
    """Each keyword of GENERIC_KEYWORDS is one tc 6.1 (Debian 12, installed by make setup)
    knows; a made-up one is refused, so the check can fail."""
    out = _tc_parse(kind, ["nrbogus", "1"])
    assert '"nrbogus"' in out and any(u in out for u in UNKNOWN), out
    for kw, how in tc.GENERIC_KEYWORDS[kind].items():
        args = tc.Generic(kind, {kw: True if how == "flag" else SAMPLE[kw]}).qdisc_args()[1:]
        out = _tc_parse(kind, args)
        assert not any(u in out for u in UNKNOWN), f"{kind} {args}: {out}"


def test_flag_negations_are_keywords():
    flags = {kw for kws in tc.GENERIC_KEYWORDS.values() for kw, how in kws.items() if how == "flag"}
    assert set(tc.FLAG_NEGATIONS) <= flags and set(tc.FLAG_NEGATIONS.values()) <= flags


# --- stacks of qdiscs (schema_version 2) -----------------------------------------------------------
def test_stack_netem_root_tbf_child_as_lab_12():
    # Lab 12 (TCP pacing), s1-eth1: `tc qdisc add dev s1-eth1 root handle 1: netem delay 20ms`,
    # then `tc qdisc add dev s1-eth1 parent 1: handle 2: tbf rate 10gbit burst 5000000 limit 15000000`.
    cmds = tc.stack_commands(qdiscs([{"kind": "netem", "delay_ms": 20},
                                     {"kind": "tbf", "rate_mbit": 10000, "burst_bytes": 5000000, "limit_bytes": 15000000}]),
                             "s1-eth1")
    assert cmds == [["qdisc", "del", "dev", "s1-eth1", "root"],
                    ["qdisc", "replace", "dev", "s1-eth1", "root", "handle", "1:", "netem", "delay", "20ms", "limit", "1000"],
                    ["qdisc", "replace", "dev", "s1-eth1", "parent", "1:", "handle", "2:", "tbf", "rate", "10000mbit",
                     "burst", "5000000", "limit", "15000000"]]


def test_stack_tbf_root_pie_leaf_as_lab_19():
    # Lab 19 (PIE), s2-eth2: `tbf rate 1gbit burst 500000 limit 26214400` at root handle 1:, then
    # `tc qdisc add dev s2-eth2 parent 1: handle 2: pie limit 17476 target 22ms tupdate 5ms alpha 2 beta 25`.
    cmds = tc.stack_commands(qdiscs([{"kind": "tbf", "rate_mbit": 1000, "burst_bytes": 500000, "limit_bytes": 26214400},
                                     {"kind": "pie", "limit_packets": 17476, "target_ms": 22, "tupdate_ms": 5,
                                      "alpha": 2, "beta": 25}]), "s2-eth2")
    assert cmds[2] == ["qdisc", "replace", "dev", "s2-eth2", "parent", "1:", "handle", "2:", "pie", "limit", "17476",
                       "target", "22ms", "tupdate", "5ms", "alpha", "2", "beta", "25"]


def test_stack_htb_child_is_the_leaf_of_its_class_and_handles_can_be_given():
    # pie-vs-red's bottleneck as a stack: HTB 1: with class 1:10, the AQM as its leaf 10:.
    cmds = tc.stack_commands(qdiscs([{"kind": "htb", "rate_mbit": 10}, {"kind": "fq_codel", "handle": "10:", "flows": 2}]))
    assert cmds[1] == ["qdisc", "replace", "dev", tc.DEV, "root", "handle", "1:", "htb", "default", "10"]
    assert cmds[2] == tc.HtbRoot(10).class_argv(tc.DEV)
    assert cmds[3] == ["qdisc", "replace", "dev", tc.DEV, "parent", "1:10", "handle", "10:", "fq_codel", "flows", "2"]


def test_empty_stack_only_deletes():
    assert tc.stack_commands(qdiscs([]), "h1-eth0") == [["qdisc", "del", "dev", "h1-eth0", "root"]]


@pytest.mark.parametrize("layers, where, words", [
    ([{"kind": "sfb"}], "[0].kind", "expected one of netem, htb, tbf"),
    ([{"kind": "pie"}, {"kind": "tbf", "rate_mbit": 1}], "[1]", "pie (layer 0) is classless"),
    ([{"kind": "netem", "delay_ms": 1}, {"kind": "pie", "handle": "1:"}], "[1].handle", "already used"),
    ([{"kind": "netem", "delay_ms": 1, "handle": "x:"}], "[0].handle", "expected a qdisc handle"),
    ([{"kind": "netem", "delay_ms": 1, "loss": 3}], "[0].loss", "netem takes delay_ms"),
    ([{"kind": "netem"}], "[0].delay_ms", "delay_ms required"),
    ([{"kind": "htb", "ceil_mbit": 3}], "[0].ceil_mbit", "htb takes rate_mbit"),
    ([{"kind": "tbf", "rate_mbit": "fast; reboot"}], "[0].rate_mbit", "expected a number"),
    ([{"kind": "codel", "target_ms": 5, "quantum": 3}], "[0].quantum", "not a parameter of tc-codel(8)"),
    ([{"kind": "pie", "gamma": 3}], "[0]", "pie: unknown parameter(s) gamma"),
])
def test_stack_errors_name_the_layer_and_key(layers, where, words):
    with pytest.raises(tc.StackError) as err:
        tc.stack_commands(qdiscs(layers), "eth1")
    assert err.value.where == where and words in err.value.problem, str(err.value)


def test_stack_probes_one_root_qdisc_per_layer_with_its_parameters():
    probes = tc.stack_probe_argvs(qdiscs([{"kind": "netem", "delay_ms": 20}, {"kind": "htb", "rate_mbit": 10},
                                          {"kind": "fq_codel", "flows": 2, "handle": "5:"}]), "nrprobe0")
    assert probes == [["qdisc", "add", "dev", "nrprobe0", "root", "netem", "delay", "20ms", "limit", "1000"],
                      ["qdisc", "add", "dev", "nrprobe0", "root", "htb", "default", "10"],
                      ["qdisc", "add", "dev", "nrprobe0", "root", "fq_codel", "flows", "2"]]


@pytest.mark.parametrize("layers", [
    [{"kind": "netem", "delay_ms": 20}, {"kind": "tbf", "rate_mbit": 10000, "burst_bytes": 5000000, "limit_bytes": 15000000}],
    [{"kind": "tbf", "rate_mbit": 1000, "burst_bytes": 500000, "limit_bytes": 26214400},
     {"kind": "codel", "limit_packets": 17476, "target_ms": 5, "interval_ms": 100}],
    [{"kind": "tbf", "rate_mbit": 100, "burst_bytes": 50000, "limit_bytes": 26214400},
     {"kind": "fq_codel", "limit_packets": 17476, "target_ms": 5, "interval_ms": 100, "flows": 2}],
    [{"kind": "fq", "maxrate_mbit": 2500}],
])
def test_lab_stacks_parse_in_tc(layers):
    """Each command of the labs' stacks is one tc 6.1 parses (only the device is missing)."""
    for argv in tc.stack_commands(qdiscs(layers), "nrnodev0")[1:]:
        proc = subprocess.run(["tc", *argv], capture_output=True, text=True, timeout=10)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0 and not any(u in out for u in UNKNOWN), (argv, out)
        assert "nrnodev0" in out or "Cannot find device" in out, (argv, out)


# --- the per-kind table of keywords and units (schema_version 2 stacks) -----------------------
def test_every_stack_kind_has_a_keyword_table():
    assert set(tc.KIND_KEYWORDS) == set(tc.STACK_KINDS)
    assert set(tc.GENERIC_KEYWORDS) == set(tc.STACK_KINDS) - {"netem", "htb", "pie", "red"}


#: A valid value of each unit, in the spelling the spec writes (suffix, value).
UNIT_SAMPLE = {"time": ("_ms", 5), "bytes": ("_bytes", 15140), "packets": ("_packets", 100),
               "rate": ("_mbit", 10), "fraction": ("", 0.5), "flag": ("", True)}


def _strict_sample(kw: tc.Keyword) -> tuple[str, object]:
    if kw.unit == "word":
        return "", kw.choices[0]
    if kw.unit == "number":
        return "", max(1, int(kw.lo))
    sfx, value = UNIT_SAMPLE[kw.unit]
    return (kw.allowed_suffixes[0] if sfx else ""), value


@pytest.mark.parametrize("kind", sorted(tc.GENERIC_KEYWORDS))
def test_every_keyword_in_its_own_unit_is_taken_and_parses_in_tc(kind):
    """Each keyword of a generic kind, written in its own unit, passes the strict check and
    gives words tc 6.1 parses (only the device is missing)."""
    for name, kw in tc.KIND_KEYWORDS[kind].items():
        sfx, value = _strict_sample(kw)
        tc.check_param(kind, name + sfx, value)
        args = tc.Generic(kind, {name + sfx: value}).qdisc_args()[1:]
        out = _tc_parse(kind, args)
        assert not any(u in out for u in UNKNOWN), f"{kind} {args}: {out}"


@pytest.mark.parametrize("kind,key,value,words", [
    ("bfifo", "limit_packets", 40, "bfifo's limit is in bytes; expected limit_bytes"),
    ("pfifo", "limit_bytes", 60000, "pfifo's limit is in packets; expected limit_packets"),
    ("codel", "target_bytes", 5, "codel's target is a time; expected target_ms or target_us"),
    ("codel", "target", 5, "codel's target is a time; expected target_ms or target_us"),
    ("fq", "maxrate_bytes", 5, "fq's maxrate is a rate; expected maxrate_mbit or maxrate_kbit"),
    ("netem", "delay_us", 5, "netem's delay is a time; expected delay_ms"),
    ("pie", "alpha_ms", 2, "pie's alpha is a plain number; expected alpha"),
    ("pie", "ecn_ms", True, "pie's ecn is a flag (true or false); expected ecn: true or false"),
    ("tbf", "rate_mbit", 0, "expected a number > 0 and <= 100000, got 0"),
    ("tbf", "burst_bytes", -1, "expected a number > 0"),
    ("codel", "interval_ms", 3_600_001, "expected a number > 0 and <= 3600000"),
    ("pie", "alpha", 0, "expected a whole number from 1 to 32, got 0"),
    ("pie", "beta", 33, "expected a whole number from 1 to 32"),
    ("fq_codel", "flows", 0, "expected a whole number from 1 to 65536"),
    ("red", "probability", 0, "expected a fraction > 0 and <= 1"),
    ("pie", "ecn", "no", "expected true or false (pie's ecn is a flag), got 'no'"),
    ("codel", "ecn", 1, "expected true or false"),
    ("tbf", "linklayer", "token", "expected one of ethernet, atm, adsl, got 'token'"),
    ("codel", "target_ms", "5", "expected a number (a time, the unit is in the name, _ms), got '5'"),
    ("pfifo", "limit_packets", 1.5, "expected a whole number of packets"),
    ("cake", "bandwidth_mbit", True, "expected a number"),
])
def test_check_param_refuses_other_units_and_ranges(kind, key, value, words):
    with pytest.raises(tc.TcParamError) as err:
        tc.check_param(kind, key, value)
    assert err.value.param == key and words in err.value.problem, str(err.value)


def test_netem_delay_may_be_zero_in_a_stack():
    tc.check_param("netem", "delay_ms", 0)


def test_strict_stack_names_the_layer_and_key():
    with pytest.raises(tc.StackError) as err:
        tc.stack_commands(qdiscs([{"kind": "netem", "delay_ms": 20}, {"kind": "bfifo", "limit_packets": 40}]), strict=True)
    assert err.value.where == "[1].limit_packets" and "expected limit_bytes" in err.value.problem
    with pytest.raises(tc.StackError) as err:
        tc.stack_commands(qdiscs([{"kind": "codel", "target_ms": 5, "target_us": 5000}]), strict=True)
    assert err.value.where == "[0].target_us" and "already given as target_ms" in err.value.problem
    with pytest.raises(tc.StackError) as err:
        tc.stack_commands(qdiscs([{"kind": "htb", "burst_bytes": 3000}]), strict=True)
    assert err.value.where == "[0].rate_mbit" and "htb needs its rate" in err.value.problem


def test_a_unit_suffix_of_another_unit_is_refused_outside_stacks_too():
    """The schema_version 1 AQMs (Generic without the strict check) refuse a wrong suffix too."""
    with pytest.raises(tc.TcParamError, match="bfifo's limit is in bytes"):
        tc.Generic("bfifo", {"limit_packets": 40}).qdisc_args()
    assert tc.Generic("bfifo", {"limit": 40}).qdisc_args() == ["bfifo", "limit", "40"]  # tc's own unit


@pytest.mark.parametrize("kind,params", [("pie", {"ecn": "no"}), ("pie", {"bytemode": 0}),
                                         ("red", {**RED, "ecn": "false"})])
def test_pie_and_red_flags_take_only_booleans(kind, params):
    with pytest.raises(tc.TcParamError, match="expected true or false"):
        (tc.Pie if kind == "pie" else tc.Red)(params).qdisc_args()


def test_tbf_needs_its_rate_bucket_and_limit():
    """tc-tbf(8): rate, a bucket (burst/buffer/maxburst) and limit or latency are required."""
    ok = {"kind": "tbf", "rate_mbit": 10, "burst_bytes": 15140, "latency_ms": 50}
    tc.stack_commands(qdiscs([ok]), strict=True)
    for drop, words in (("rate_mbit", "tbf needs its rate"), ("burst_bytes", "tbf needs one of its burst, buffer"),
                        ("latency_ms", "tbf needs one of its limit, latency")):
        with pytest.raises(tc.StackError) as err:
            tc.stack_commands(qdiscs([{k: v for k, v in ok.items() if k != drop}]), strict=True)
        assert words in err.value.problem, str(err.value)


def test_what_a_stack_does_is_told_by_tc():
    """The kinds that shape, delay or have a token bucket are named here (tc.SHAPERS,
    tc.DELAY_KIND, tc.BUCKET_KEYS), so the model and the sites ask instead of naming them."""
    stack = qdiscs([{"kind": "netem", "delay_ms": 20}, {"kind": "tbf", "rate_mbit": 100, "burst_bytes": 5000},
                    {"kind": "htb", "rate_mbit": 10}, {"kind": "pie"}])
    assert tc.shaping_rate_mbit(stack) == 10
    assert tc.shaping_rate_mbit(qdiscs([{"kind": "fq_codel"}])) is None
    assert tc.delay_ms(stack) == 20 and tc.delay_ms(qdiscs([{"kind": "pie"}])) == 0.0
    assert [tc.bucket_keys(layer) for layer in stack] == [(), ("burst_bytes", "buffer_bytes", "maxburst_bytes"), (), ()]
    assert {*tc.SHAPERS, tc.DELAY_KIND, *tc.BUCKET_KEYS} <= set(tc.STACK_KINDS)


def test_shaping_rate_is_the_slowest_shaper():
    assert tc.shaping_rate_mbit(qdiscs([{"kind": "netem", "delay_ms": 20}, {"kind": "tbf", "rate_mbit": 100}])) == 100
    assert tc.shaping_rate_mbit(qdiscs([{"kind": "htb", "rate_mbit": 10}, {"kind": "pie"}])) == 10
    assert tc.shaping_rate_mbit(qdiscs([{"kind": "fq_codel"}])) is None
