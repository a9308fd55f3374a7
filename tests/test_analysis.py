"""Tests of the analysis package: parsers, the statistics of a trial, the claims' checks, end to
end on a synthetic run directory generated here (not a recorded dataset). The synthetic run is
recorded with pie-vs-red's schema_version 1 file (conftest.PIE_VS_RED_V1), as users' old runs
are: the analysis converts its spec once (netrepro.runfolder.reading.read_run) and analyses it like any run.
"""

from __future__ import annotations

import copy
import gzip
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

import analysis
from analysis.claims import evaluate
from analysis.summary import SUMMARY_KEYS
from analysis.__main__ import main
from analysis.tidy import TIDY_COLUMNS
from analysis.summary import phase_utilization, trial_statistics
from analysis.raw import base_rtt_ms, parse_flows, parse_ping, parse_qdisc_fields, parse_qdisc_stack, parse_tx_bytes
from netrepro.core.errors import RunFolderError
from conftest import PIE_VS_RED_V1, claim_records
from netrepro.runfolder.integrity import sha256_tree
from netrepro.experiment.spec import load_spec

REPO = Path(__file__).resolve().parent.parent
#: the synthetic run is one of pie-vs-red's schema_version 1 file (aqm x variant trials, FTP
#: flow groups, ping collectors), converted by the analysis (netrepro.experiment.migrate)
SPEC_FILE = PIE_VS_RED_V1
TRIALS = ["pie-unlimited", "red-unlimited", "pie-limited", "red-limited"]
PHASES = ["p1", "p2", "p3", "p4", "p5"]


# --- parsers ----------------------------------------------------------------------------------
PING_TEXT = """\
PING 10.10.2.1 (10.10.2.1) 56(84) bytes of data.
[1795343450.612345] 64 bytes from 10.10.2.1: icmp_seq=1 ttl=63 time=100 ms
[1795343450.712345] 64 bytes from 10.10.2.1: icmp_seq=2 ttl=63 time=100.3 ms
[1795343450.812345] no answer yet for icmp_seq=3
[1795343450.912345] 64 bytes from 10.10.2.1: icmp_seq=4 ttl=63 time=121.75 ms
[1795343450.912399] 64 bytes from 10.10.2.1: icmp_seq=4 ttl=63 time=121.80 ms (DUP!)
[1795343451.012345] 64 bytes from 10.10.2.1: icmp_seq=5 ttl=
64 bytes from 10.10.2.1: icmp_seq=6 ttl=63 time=99.9 ms
From 10.10.1.254 icmp_seq=7 Destination Host Unreachable

--- 10.10.2.1 ping statistics ---
7 packets transmitted, 4 received, +1 duplicates, 42% packet loss, time 601ms
rtt min/avg/max/mdev = 99.900/105.487/121.800/9.000 ms
"""


def test_parse_ping_keeps_replies_only():
    df = parse_ping(PING_TEXT)
    assert list(df.columns) == ["t_epoch_s", "seq", "rtt_ms"]
    assert df["seq"].tolist() == [1, 2, 4, 6]
    assert df["rtt_ms"].tolist() == [100.0, 100.3, 121.75, 99.9]
    assert df["t_epoch_s"].iloc[0] == pytest.approx(1795343450.612345)
    assert math.isnan(df["t_epoch_s"].iloc[3])  # no -D prefix: no time


def test_parse_ping_empty_and_base_rtt():
    assert parse_ping("").empty and parse_ping("garbage\n\n").empty
    assert base_rtt_ms(parse_ping(PING_TEXT)["rtt_ms"]) == pytest.approx((100.0 + 100.3) / 2)
    assert base_rtt_ms([100.0, 101.0, 140.0]) == 101.0
    assert base_rtt_ms([100.0, 101.0, 140.0], "min") == 100.0
    assert base_rtt_ms([100.0, 101.0, 141.0], "mean") == pytest.approx(114.0)
    assert math.isnan(base_rtt_ms([]))
    with pytest.raises(ValueError):
        base_rtt_ms([1.0], "max")


def test_parse_flows_coerces_and_fills():
    text = "flow,server,file,start_epoch_s,end_epoch_s,exit_code,bytes\n" \
           "1,server1,f01,1795343450.6,1795343700.6,0,312000000\n" \
           "2,server1,f02,1795343450.7,,143,\n"
    df = parse_flows(text)
    assert len(df) == 2 and df["start_epoch_s"].iloc[1] == pytest.approx(1795343450.7)
    assert math.isnan(df["end_epoch_s"].iloc[1]) and math.isnan(df["bytes"].iloc[1])
    assert parse_flows("").empty
    partial = parse_flows("flow,server,start_epoch_s\n1,server2,10.5\n")
    assert list(partial.columns) == ["flow", "server", "file", "start_epoch_s", "end_epoch_s", "exit_code", "bytes",
                                     "connect_s", "data_start_s"]
    assert math.isnan(partial["bytes"].iloc[0]) and math.isnan(partial["data_start_s"].iloc[0])
    timed = parse_flows("flow,server,file,start_epoch_s,end_epoch_s,exit_code,bytes,connect_s,data_start_s\n"
                        "1,s1,f01,100.5,110.5,28,5000,0.201,0.803\n")
    assert timed["connect_s"].iloc[0] == pytest.approx(0.201) and timed["data_start_s"].iloc[0] == pytest.approx(0.803)


HTB = {"kind": "htb", "handle": "1:", "root": True, "bytes": 999, "backlog": 0, "qlen": 0}


def test_parse_qdisc_lines_pie_red_and_odd_ones():
    pie = {"kind": "pie", "handle": "10:", "parent": "1:10", "bytes": 1000, "packets": 5, "drops": 7,
           "overlimits": 0, "requeues": 0, "backlog": 30280, "qlen": 20, "prob": 0.0123, "delay": 21500,
           "pkts_in": 100, "overlimit": 3, "dropped": 7, "maxq": 40, "ecn_mark": 0}
    red = {"kind": "red", "handle": "10:", "parent": "1:10", "drops": 3, "backlog": "12Kb", "qlen": 8,
           "marked": 0, "early": 2, "pdrop": 1, "other": 0}
    lines = [
        json.dumps({"t": 1795343450.6, "dev": "eth1", "tx_bytes": 5000, "tx_packets": 4,
                    "qdisc": [{**HTB, "backlog": 30280, "qlen": 20}, pie]}),
        "not json",
        json.dumps({"dev": "eth1", "tx_bytes": 1}),  # no time
        json.dumps({"t": 1795343450.5, "dev": "eth1", "tx_bytes": 4000, "qdisc": [{**HTB, "backlog": "12Kb", "qlen": 8}, red]}),
        json.dumps({"t": 1795343450.7, "dev": "eth2", "qdisc": []}),  # no counter, no root qdisc
        json.dumps({"t": 1795343450.8, "dev": "eth1", "tx_bytes": 6000, "qdisc": [HTB]}),  # the root alone
        "",
    ]
    text = "\n".join(lines)
    tx = parse_tx_bytes(text)  # sorted by time, whatever the device label
    assert tx.to_dict("list") == {"t_epoch_s": pytest.approx([1795343450.5, 1795343450.6, 1795343450.8]),
                                  "tx_bytes": [4000.0, 5000.0, 6000.0]}
    q = parse_qdisc_stack(text)  # the root's backlog (text with a unit too), every qdisc's drops summed
    assert q["backlog_bytes"].tolist() == [12 * 1024, 30280, 0] and q["backlog_packets"].tolist() == [8, 20, 0]
    assert q["drops"].tolist() == [3, 7, 0]
    f = parse_qdisc_fields(text)  # each qdisc's own, in tc's units: pie's delay in microseconds
    own = {(k, x): v for k, x, v in zip(f["kind"], f["field"], f["value"])}
    assert own[("pie", "delay")] == 21500 and own[("pie", "prob")] == pytest.approx(0.0123)
    assert own[("red", "early")] == 2 and ("red", "backlog") not in own and ("htb", "drops") not in own
    assert parse_tx_bytes("").empty and parse_qdisc_stack("").empty


# --- the statistics of a trial ------------------------------------------------------------------
PH2 = [{"name": "p1", "start_s": 0.0, "end_s": 10.0, "flows": 10},
       {"name": "p2", "start_s": 10.0, "end_s": 20.0, "flows": 30}]


def _rows(trial, subject, metric, ts, vals):
    return pd.DataFrame({"trial": trial, "subject": subject, "stream": -1, "t_s": ts, "metric": metric, "value": vals})


def _stat(rows: list[dict], phase: str, subject: str, statistic: str):
    got = [r["value"] for r in rows if (r["phase"], r["subject"], r["statistic"]) == (phase, subject, statistic)]
    assert len(got) <= 1
    return got[0] if got else None


def test_phase_statistics_known_values():
    """pie-vs-red's pie-limited trial (three ping items, the bottleneck router:eth1 shaped to
    10 Mbit/s): p1 delays 1..5 from two clients (median 3, mean 3, p95 4.8), p2 10 and 30
    (median 20); the tx counter at 625000 B/s (50 % of 10 Mbit/s) until t=10, then 1e6 B/s (80 %)."""
    m = load_spec("pie-vs-red").model
    trial = next(t for t in m.trials if t.id == "pie-limited")
    c = lambda t: 625000 * (t + 1) if t <= 10 else 6875000 + 1e6 * (t - 10)
    tx_t = [-1.0, 4.0, 10.0, 21.0]
    tidy = pd.concat([
        _rows("pie-limited", "ping-client1", "queue_delay_ms", [1, 2, 3], [1, 2, 3]),
        _rows("pie-limited", "ping-client2", "queue_delay_ms", [4, 5, 11, 12], [4, 5, 10, 30]),
        _rows("pie-limited", "ping-client1", "rtt_ms", [1, 2, 3, -0.5], [101, 102, 103, 99]),
        _rows("pie-limited", "ping-client2", "rtt_ms", [4, 5, 11, 12], [104, 105, 110, 130]),
        _rows("pie-limited", "router:eth1", "tx_bytes", tx_t, [c(t) for t in tx_t]),
        _rows("pie-limited", "router:eth1", "backlog_bytes", [1, 11], [12500, 25000]),
    ], ignore_index=True)
    rows = trial_statistics(m, trial, tidy, {}, PH2, 1.0)
    assert {tuple(r) for r in rows} == {tuple(SUMMARY_KEYS)}
    assert (_stat(rows, "p1", "all", "queue_delay_samples"), _stat(rows, "p2", "all", "queue_delay_samples")) == (5, 2)
    assert _stat(rows, "p1", "all", "queue_delay_median_ms") == 3 and _stat(rows, "p1", "all", "queue_delay_mean_ms") == 3
    assert _stat(rows, "p1", "all", "queue_delay_p95_ms") == pytest.approx(4.8)
    assert _stat(rows, "p2", "all", "queue_delay_median_ms") == 20
    assert _stat(rows, "p2", "all", "queue_delay_p95_ms") == pytest.approx(29.0)
    assert _stat(rows, "p1", "ping-client1", "rtt_median_ms") == 102  # the sample at -0.5 s is in no phase
    assert _stat(rows, "all", "ping-client1", "rtt_min_ms") == 99  # but in the whole trial
    assert _stat(rows, "p1", "router:eth1", "sent_utilization") == pytest.approx(0.5)
    assert _stat(rows, "p2", "router:eth1", "sent_utilization") == pytest.approx(0.8)
    assert _stat(rows, "p2", "router:eth1", "backlog_mean_ms") == pytest.approx(20)  # 25000 B at 10 Mbit/s
    # no data at all for a trial: no value, and no sample
    red = trial_statistics(m, next(t for t in m.trials if t.id == "red-limited"),
                           tidy.iloc[0:0], {}, PH2, 1.0)
    assert _stat(red, "p1", "all", "queue_delay_samples") == 0
    assert _stat(red, "p1", "all", "queue_delay_median_ms") is None
    assert _stat(red, "p1", "router:eth1", "sent_utilization") is None


def test_phase_utilization_edges():
    t, b = [0.0, 5.0, 10.0], [0.0, 2.5e6, 5e6]  # 500000 B/s = 40% of 10 Mbit/s
    assert phase_utilization(t, b, 0, 10, 10) == pytest.approx(0.4)
    assert phase_utilization(t, b, 0, 10, 1) == 1.0  # clipped
    assert math.isnan(phase_utilization(t, b, 0, 20, 10))  # covers half the phase only
    assert phase_utilization([0.5, 10.0], [0.0, 4.75e6], 0, 10, 10) == pytest.approx(0.4)  # 95% coverage
    assert math.isnan(phase_utilization([0, 5, 10], [0, 5e6, 1e6], 0, 10, 10))  # counter reset
    assert math.isnan(phase_utilization([], [], 0, 10, 10))


# --- the claims' checks (pie-vs-red's, as its schema_version 2 file writes them) -------------------
def _summary(values: dict, util: dict | None = None) -> pd.DataFrame:
    """Long rows: (trial, phase) -> the pooled queueing delay median, and the bottleneck's
    utilisation (default 0.95)."""
    rows = []
    for (t, p), x in values.items():
        rows.append({"trial": t, "phase": p, "subject": "all", "statistic": "queue_delay_median_ms", "value": x})
        rows.append({"trial": t, "phase": p, "subject": "router:eth1", "statistic": "sent_utilization",
                     "value": (util or {}).get((t, p), 0.95)})
    return pd.DataFrame(rows, columns=SUMMARY_KEYS)


def _sel(trials, phases, statistic="queue_delay_median_ms", subject="all"):
    return {"statistic": statistic, "trials": trials, "subjects": [subject], "phases": phases}


BOUND = {"id": "b", "text": "t", "check": {"kind": "bound", "select": _sel(["pie-limited"], ["p1", "p2"]), "max": 40}}
RISE = {"id": "r", "text": "t", "check": {"kind": "rise_and_fall", "order": "phases", "peak": "p3", "tolerance": 5,
                                         "min_rise": 20,
                                         "select": _sel(["red-limited"], ["p1", "p2", "p3", "p4", "p5"])}}
DIFF = {"kind": "difference", "higher": _sel(["red-limited"], ["p3"]), "lower": _sel(["pie-limited"], ["p3"]), "min": 20}
UTIL = {"kind": "difference", "absolute": True, "max": 0.1,
        "higher": _sel(["red-limited"], ["p3"], "sent_utilization", "router:eth1"),
        "lower": _sel(["pie-limited"], ["p3"], "sent_utilization", "router:eth1")}
CMP = {"id": "c", "text": "t", "check": {"kind": "all_of", "checks": [DIFF, UTIL]}}


def _evaluate(summary, claims):
    return evaluate(summary, claim_records(claims), TRIALS, {})


def test_bound():
    ok = _evaluate(_summary({("pie-limited", "p1"): 19.0, ("pie-limited", "p2"): 40.0}), [BOUND])
    assert ok["reproduced"] and ok["claims"][0]["holds"] and "pie-limited/all/p1 19" in ok["claims"][0]["evidence"]
    bad = _evaluate(_summary({("pie-limited", "p1"): 19.0, ("pie-limited", "p2"): 40.1}), [BOUND])
    assert not bad["reproduced"] and bad["claims"][0]["holds"] is False
    lo = copy.deepcopy(BOUND)
    lo["check"]["min"] = 10
    del lo["check"]["max"]
    assert not _evaluate(_summary({("pie-limited", "p1"): 9.0, ("pie-limited", "p2"): 50.0}), [lo])["reproduced"]
    missing = _evaluate(_summary({("pie-limited", "p1"): 19.0, ("pie-limited", "p2"): math.nan}), [BOUND])
    # a missing value: neither holds nor fails
    assert missing["claims"][0]["status"] == "not evaluable" and missing["claims"][0]["holds"] is None
    assert "pie-limited/all/p2 missing" in missing["claims"][0]["reason"]


def _red(vals):
    return _summary({("red-limited", f"p{i + 1}"): x for i, x in enumerate(vals)})


def test_rise_and_fall():
    assert _evaluate(_red([15, 50, 100, 50, 15]), [RISE])["reproduced"]
    assert _evaluate(_red([15, 12, 100, 104, 80]), [RISE])["reproduced"]  # wrong-way steps within 5 ms
    flat = _evaluate(_red([90, 91, 92, 91, 90]), [RISE])
    assert not flat["reproduced"] and "above both ends by 2 (min 20)" in flat["claims"][0]["evidence"]
    dip = _evaluate(_red([15, 50, 100, 40, 46]), [RISE])  # rises again by 6 > 5 after the peak
    assert not dip["reproduced"] and dip["claims"][0]["holds"] is False
    early = _evaluate(_red([15, 9, 100, 50, 15]), [RISE])  # drops 6 before the peak
    assert early["claims"][0]["holds"] is False
    no_fall = _evaluate(_red([15, 50, 100, 95, 90]), [RISE])  # peak - last = 10 < 20
    assert no_fall["claims"][0]["holds"] is False and "above both ends by 10" in no_fall["claims"][0]["evidence"]
    gap = _evaluate(_red([15, 50, math.nan, 50, 15]), [RISE])
    assert gap["claims"][0]["status"] == "not evaluable" and "missing" in gap["claims"][0]["reason"]


def test_compare():
    base = {("red-limited", "p3"): 100.0, ("pie-limited", "p3"): 20.0}
    assert _evaluate(_summary(base), [CMP])["reproduced"]
    assert not _evaluate(_summary({**base, ("red-limited", "p3"): 39.0}), [CMP])["reproduced"]
    util = {("red-limited", "p3"): 0.95, ("pie-limited", "p3"): 0.80}
    res = _evaluate(_summary(base, util), [CMP])
    assert res["claims"][0]["holds"] is False
    assert "red-limited/router:eth1/p3 0.95 vs pie-limited/router:eth1/p3 0.8: difference 0.15" in res["claims"][0]["evidence"]
    no_pie = _evaluate(_summary({("red-limited", "p3"): 100.0}), [CMP])  # no PIE row
    assert no_pie["claims"][0]["status"] == "not evaluable" and "pie-limited/all/p3 missing" in no_pie["claims"][0]["reason"]
    no_u = {**CMP, "check": DIFF}
    assert _evaluate(_summary(base, util), [no_u])["reproduced"]


def test_all_claims_needed_and_unknown_kind():
    s = _summary({("pie-limited", "p1"): 19.0, ("pie-limited", "p2"): 20.0,
                  ("red-limited", "p3"): 30.0, ("pie-limited", "p3"): 20.0})
    v = _evaluate(s, [BOUND, CMP])
    assert [c["holds"] for c in v["claims"]] == [True, False] and not v["reproduced"]
    assert set(v["claims"][0]) == {"id", "text", "status", "holds", "evidence"}
    assert [c["status"] for c in v["claims"]] == ["holds", "fails"] and v["verdict"] == "not reproduced"
    with pytest.raises(ValueError):
        _evaluate(s, [{"id": "x", "text": "t", "check": {"kind": "nope"}}])


# --- end to end on a synthetic run -----------------------------------------------------------
RATE_BPS = 10e6 / 8
START0 = 1795343450.5


def _delay_ms(aqm, variant, flows, rng, n):
    """Synthetic truth: PIE ~20 ms always; RED ~90 ms when unlimited, rising with flows when limited."""
    if aqm == "pie":
        centre = 20.0
    elif variant == "unlimited":
        centre = 90.0
    else:
        centre = {10: 15.0, 30: 50.0, 50: 100.0}[flows]
    return centre + rng.normal(0, 3, n)


def _util(variant, flows):
    return 0.97 if variant == "unlimited" else 0.97 * flows / 50


def make_synthetic_run(root: Path, time_scale: float = 0.1, seed: int = 1) -> Path:
    """Write results/pie-vs-red/<id>/ with run.json and raw/ shaped like a real run's."""
    rng = np.random.default_rng(seed)
    spec = yaml.safe_load(SPEC_FILE.read_text())
    k = time_scale
    phases = [{**p, "start_s": p["start_s"] * k, "end_s": p["end_s"] * k} for p in spec["phases"]]
    end = phases[-1]["end_s"]
    servers = {fg["client"]: fg for fg in spec["flows"]}
    run_dir = root / "results" / "pie-vs-red" / "20261101T120000Z"
    trials = []
    for i, t in enumerate(spec["trials"]):
        aqm, variant = t["aqm"], t["variant"]
        tid, start = f"{aqm}-{variant}", START0 + i * 100.0
        flows_at = lambda ts: np.select([(ts >= p["start_s"]) & (ts < p["end_s"]) for p in phases],
                                        [p["flows"] for p in phases], default=10)
        for c, fg in servers.items():
            d = run_dir / "raw" / tid / c
            d.mkdir(parents=True)
            base = 100.0 + rng.uniform(0, 1)
            bt = start - 40 + np.arange(300) * 0.1
            (d / "base_rtt.txt").write_text(f"PING {fg['server']} 56(84) bytes of data.\n" + "".join(
                f"[{x:.6f}] 64 bytes from 10.10.2.1: icmp_seq={j + 1} ttl=63 time={base + rng.normal(0, 0.05):.2f} ms\n"
                for j, x in enumerate(bt)) + "\n--- ping statistics ---\n300 packets transmitted, 300 received\n")
            ts = np.arange(0, end, 0.1) + 0.01
            f = flows_at(ts)
            rtt = base + np.concatenate([_delay_ms(aqm, variant, int(n), rng, 1) for n in f])
            lines = [f"[{start + x:.6f}] 64 bytes from 10.10.2.1: icmp_seq={j + 1} ttl=63 time={r:.1f} ms\n"
                     for j, (x, r) in enumerate(zip(ts, rtt))]
            lines.insert(5, f"[{start + 0.5:.6f}] no answer yet for icmp_seq=999\n")
            (d / "ping.txt").write_text("PING header\n" + "".join(lines) + "\n--- summary ---\n")
            s0 = fg["start_s"] * k
            rows = [f"{n + 1},{fg['server']},f{n + 1:02d},{start + s0 + 0.0005 * n:.4f},{start + s0 + fg['duration_s'] * k:.3f},0,1000\n"
                    for n in range(fg["flows"])]
            (d / "flows.csv").write_text("flow,server,file,start_epoch_s,end_epoch_s,exit_code,bytes\n" + "".join(rows))
        d = run_dir / "raw" / tid / "router"
        d.mkdir(parents=True)
        ts = np.arange(-0.2, end + 0.3, 0.1)
        f = flows_at(ts)
        rate = np.array([_util(variant, int(n)) for n in f]) * RATE_BPS
        tx = np.concatenate([[0.0], np.cumsum(rate[1:] * np.diff(ts))]) + 1e6
        with open(d / "qdisc.jsonl", "w") as out:
            for x, b, n in zip(ts, tx, f):
                delay = float(_delay_ms(aqm, variant, int(n), rng, 1)[0])
                q = {"kind": aqm, "handle": "10:", "parent": "1:10", "drops": 5, "qlen": int(delay * 1.25 / 1.5),
                     "backlog": int(delay * RATE_BPS / 1000)}
                q.update({"prob": 0.01, "delay": int(delay * 1000)} if aqm == "pie" else {"early": 3, "marked": 0})
                out.write(json.dumps({"t": start + x, "dev": "eth1", "tx_bytes": int(b), "tx_packets": int(b / 1500),
                                      "qdisc": [HTB, q]}) + "\n")
        for node in spec["topology"]["nodes"]:  # /proc/stat snapshots (nr-meta.sh): 40 % busy
            d = run_dir / "raw" / tid / node
            d.mkdir(exist_ok=True)
            for which, ticks in (("before", "1000 0 1000 8000 0 0 0 0 0 0"), ("after", "1300 0 1300 8900 0 0 0 0 0 0")):
                (d / f"meta-{which}.json").write_text(json.dumps({"cpu_ticks": ticks}))
        trial = {"id": tid, "aqm": aqm, "variant": variant, "start_epoch_s": start, "phases": phases,
                 "bottleneck_interface": "eth1", "controller_loadavg": {"before": [0.5, 0.4, 0.3], "after": [1.1, 0.8, 0.5]},
                 "controller_cores": 2, "controller_cpu_busy": 0.45}
        if i == 0:
            trial["base_rtt_ms"] = {"client1": 100.5}  # others computed from base_rtt.txt
        trials.append(trial)
    run = {"experiment": "pie-vs-red", "spec": spec, "time_scale": time_scale, "site": "local", "mode": "vm",
           "trials": trials, "toolkit_commit": "abc1234", "phase_start_skew_ms": {"pie-unlimited": {"client2": 12}},
           "nodes": {"router": {"kernel": "6.1.0-test", "iproute2": "6.1.0", "sysctls": {"net.ipv4.ip_forward": 1}}},
           # nested records, as the local site and the runner write them
           "site_status": {"site": "local", "mode": "vm", "kvm": False, "capacity": {"forwarding_mbit": 600.5,
                                                                                     "kernel": "6.1.0-test"}},
           "trial_status": [{"id": t["id"], "status": "complete", "reason": None,
                             "attempts": [{"status": "failed", "reason": "a flow ended early"},
                                          {"status": "complete", "reason": None}]} for t in trials],
           "controller": {"python": "3.11.7", "host": "ci"},
           "raw_sha256": sha256_tree(run_dir / "raw")}  # as netrepro.runner.run.run records them
    (run_dir / "run.json").write_text(json.dumps(run))
    return run_dir


def _stats(summary: pd.DataFrame, statistic: str, subject: str = "all") -> pd.Series:
    """(trial, phase) -> value of one statistic of one subject in a long summary."""
    rows = summary[(summary["statistic"] == statistic) & (summary["subject"] == subject)]
    return rows.set_index(["trial", "phase"])["value"]


def test_end_to_end(tmp_path, capsys):
    run_dir = make_synthetic_run(tmp_path)
    raw_before = sorted((p.relative_to(run_dir), p.stat().st_mtime_ns) for p in (run_dir / "raw").rglob("*"))
    run_json = (run_dir / "run.json").read_bytes()
    assert main([str(run_dir)]) == 0
    out = capsys.readouterr().out
    assert "HOLDS pie-near-target" in out and "verdict: reproduced" in out
    for name in ["tidy.csv.gz", "summary.csv", "verdict.json", "report.md", "analysis.json",
                 "figures/queue-delay.png", "figures/queue-delay.pdf", *(f"flent/{t}.flent.gz" for t in TRIALS)]:
        assert (run_dir / name).is_file() and (run_dir / name).stat().st_size > 0, name
    assert sorted((p.relative_to(run_dir), p.stat().st_mtime_ns) for p in (run_dir / "raw").rglob("*")) == raw_before
    assert (run_dir / "run.json").read_bytes() == run_json  # the version 1 spec is converted in memory only
    assert not list(run_dir.rglob("*.tmp"))

    lines = (run_dir / "summary.csv").read_text().splitlines()
    assert lines[0] == "trial,variant,aqm,phase,subject,statistic,value"  # long form, the trials' labels
    s = pd.read_csv(run_dir / "summary.csv")
    n = _stats(s, "queue_delay_samples")
    assert len(n) == 4 * 6 and (n.drop(index="all", level="phase") == 150).all()  # 3 clients x 50 pings per 5 s phase
    delay = _stats(s, "queue_delay_median_ms").drop(index="all", level="phase")
    assert delay[["pie-unlimited", "pie-limited"]].between(15, 25).all()
    assert delay[("red-limited", "p3")] == pytest.approx(100, abs=5) and delay[("red-limited", "p1")] == pytest.approx(15, abs=5)
    u = _stats(s, "sent_utilization", "router:eth1")
    assert u[("pie-limited", "p1")] == pytest.approx(0.194, abs=0.01) and u[("pie-limited", "p3")] == pytest.approx(0.97, abs=0.01)
    assert u[("pie-unlimited", "all")] == pytest.approx(0.97, abs=0.01)

    verdict = json.loads((run_dir / "verdict.json").read_text())
    assert set(verdict) == {"reproduced", "verdict", "counts", "not_judged", "health_failures", "claims"}
    assert verdict["reproduced"] is True and verdict["counts"] == {"holds": 3} and verdict["not_judged"] == []
    assert verdict["verdict"] == "reproduced" and verdict["health_failures"] == []  # a healthy substrate
    assert [c["id"] for c in verdict["claims"]] == ["pie-near-target", "red-follows-load", "red-above-pie-under-load"]
    # each value with its 95 % interval by batch means (10 batches of a 5 s phase)
    assert all(set(c) == {"id", "text", "status", "holds", "evidence", "values"} for c in verdict["claims"])
    near = verdict["claims"][0]["values"]
    assert all(v["outcome"] == "holds" and v["low"] <= v["value"] <= v["high"] for v in near)
    assert {v["interval"] for v in near} == {"batch means of 10"}
    assert all(c["status"] == "holds" and c["holds"] is True for c in verdict["claims"])

    with gzip.open(run_dir / "tidy.csv.gz", "rt") as fh:
        tidy = pd.read_csv(fh, keep_default_na=False, na_values=[""])
    assert list(tidy.columns) == TIDY_COLUMNS
    assert set(tidy["subject"]) == {"ping-client1", "ping-client2", "ping-client3", "router:eth1"}
    assert {"rtt_ms", "queue_delay_ms", "backlog_bytes", "backlog_packets", "drops", "tx_bytes", "pie_prob",
            "pie_delay", "red_early"} <= set(tidy["metric"])
    q = tidy[(tidy["trial"] == "pie-unlimited") & (tidy["subject"] == "ping-client1") & (tidy["metric"] == "queue_delay_ms")]
    assert len(q) == 250
    # each client's base RTT: run.json's for client1 of the first trial, else base_rtt.txt's median
    rtt = tidy[(tidy["trial"] == "pie-unlimited") & (tidy["subject"] == "ping-client1") & (tidy["metric"] == "rtt_ms")]
    assert (rtt["value"].to_numpy() - q["value"].to_numpy()) == pytest.approx(np.full(250, 100.5))
    # the flows of each group start 0.5 ms apart: client2's and client3's 20th 9.5 ms behind the schedule
    assert analysis.analyze(run_dir, figures=True).health["red-limited"]["checks"][2] == {
        "id": "flow_start_lag", "value": 9.5, "threshold": 100, "unit": "ms", "passed": True,
        "detail": "worst p2; p1 +4, p2 +10, p3 +10 ms"}

    report = (run_dir / "report.md").read_text()
    for text in ["Fig. 8", "figures/queue-delay.png", "| trial | subject |", "`pie-near-target` **holds**",
                 "6.1.0-test", "abc1234", "2016", "| time scale | 0.1: every phase", "## Health of the substrate",
                 "| pie-unlimited | nodes_cpu_busy | 40.0 % | 60.0 % | pass |", "client1 100.5",
                 "| capacity.forwarding_mbit | 600.5 |", "| kvm | no |", "| controller machine | python 3.11.7; host ci |",
                 "| pie-unlimited | complete | 2 | a flow ended early |"]:
        assert text in report, text

    assert analysis.analyze_run(run_dir) == verdict  # re-run: the same result


def test_missing_files_refused_then_partial(tmp_path):
    run_dir = make_synthetic_run(tmp_path)
    (run_dir / "raw" / "red-limited" / "client3" / "ping.txt").unlink()
    (run_dir / "raw" / "pie-limited" / "router" / "qdisc.jsonl").unlink()
    import shutil
    shutil.rmtree(run_dir / "raw" / "red-unlimited")
    with pytest.raises(RunFolderError, match=r"raw_sha256: 26 raw files differ from the record: .*"
                                            r"raw/red-limited/client3/ping.txt \(missing\).*add --partial"):
        analysis.analyze(run_dir, figures=False)
    assert sorted(p.name for p in run_dir.iterdir()) == ["raw", "run.json"]  # nothing written
    res = analysis.analyze(run_dir, figures=False, partial=True)
    assert res.out_dir.parent == run_dir and res.out_dir.name.endswith("-partial")
    assert "raw/red-limited/client3/ping.txt: missing" in res.problems
    assert "raw/red-unlimited/client1/ping.txt: missing" in res.problems
    n = _stats(res.summary, "queue_delay_samples").drop(index="all", level="phase")
    assert (n["red-unlimited"] == 0).all()
    assert (n["red-limited"] == 100).all()  # two clients' pings left
    assert "pie-limited" not in set(_stats(res.summary, "sent_utilization", "router:eth1").index.get_level_values(0))
    v = res.verdict
    assert v["reproduced"] is False and v["verdict"] == "inconclusive"
    assert [c["status"] for c in v["claims"]] == ["not evaluable"] * 3 and all(c["holds"] is None for c in v["claims"])
    assert "pie-limited: raw/pie-limited/router/qdisc.jsonl (missing)" in v["claims"][0]["reason"]
    assert set(res.record["incomplete_trials"]) == {"red-unlimited", "pie-limited", "red-limited"}
    report = (res.out_dir / "report.md").read_text()
    assert "raw/red-unlimited/client1/ping.txt: missing" in report
    assert "- trial red-limited incomplete: raw/red-limited/client3/ping.txt (missing)" in report


def test_trial_missing_from_run_json(tmp_path):
    run_dir = make_synthetic_run(tmp_path)
    data = json.loads((run_dir / "run.json").read_text())
    data["trials"] = data["trials"][:3]
    data["raw_sha256"] = {k: v for k, v in data["raw_sha256"].items() if not k.startswith("red-limited/")}
    import shutil
    shutil.rmtree(run_dir / "raw" / "red-limited")
    (run_dir / "run.json").write_text(json.dumps(data))
    (run_dir / "INCOMPLETE").write_text("interrupted or failed: KeyboardInterrupt: \n")  # as netrepro run marks it
    res = analysis.analyze(run_dir, figures=False)  # a shorter record is intact: no --partial needed
    assert res.problems[0] == "the run is marked INCOMPLETE: interrupted or failed: KeyboardInterrupt:"
    assert "- the run is marked INCOMPLETE" in (run_dir / "report.md").read_text()
    assert "trial red-limited: not run (no record in run.json)" in res.problems
    assert set(res.summary["trial"]) == {"pie-unlimited", "red-unlimited", "pie-limited"}
    # red-follows-load and red-above-pie-under-load read red-limited, which did not run: not judged
    assert [c["status"] for c in res.verdict["claims"]] == ["holds", "inconclusive", "inconclusive"]
    assert res.verdict["claims"][1]["reason"] == ("the substrate failed health checks: red-limited: not_run "
                                                  "(no record in run.json)")
    assert res.out_dir == run_dir


def test_bad_run_dir(tmp_path, capsys):
    assert main([str(tmp_path / "nope")]) == 2
    assert f"{tmp_path / 'nope' / 'run.json'}: no run.json: the run folder does not exist" in capsys.readouterr().err
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'run.json'}: no run.json" in err and err.count("\n") == 1
    (tmp_path / "run.json").write_text("{not json")
    assert main([str(tmp_path)]) == 2
    assert "expected JSON" in capsys.readouterr().err
    (tmp_path / "run.json").write_text(json.dumps({"spec": {"name": "x"}}))
    assert main([str(tmp_path)]) == 2
    assert "run.json:spec" in capsys.readouterr().err
    (tmp_path / "run.json").write_text(json.dumps({"time_scale": 1, "trials": []}))
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "run.json: spec: missing; expected the experiment file as run" in err and err.count("\n") == 1
    spec = yaml.safe_load(SPEC_FILE.read_text())
    bad = {**spec, "trials": [{"aqm": "codel", "variant": "limited"}]}  # a version 1 spec the conversion refuses
    (tmp_path / "run.json").write_text(json.dumps({"spec": bad, "time_scale": 1, "trials": [], "raw_sha256": {}}))
    assert main([str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert f"{tmp_path / 'run.json'}:spec: trials" in err and err.count("\n") == 1
    trial = {"id": "pie-limited", "aqm": "pie", "variant": "limited"}
    (tmp_path / "run.json").write_text(json.dumps({"spec": spec, "time_scale": 1, "trials": [trial], "raw_sha256": {}}))
    with pytest.raises(RunFolderError, match=r"run.json: trials\[0\].start_epoch_s: missing; .*add --partial"):
        analysis.analyze_run(tmp_path)
    (tmp_path / "run.json").write_text(json.dumps({"spec": spec, "trials": [trial]}))
    with pytest.raises(RunFolderError, match=r"run.json: time_scale: missing"):
        analysis.analyze_run(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]  # nothing written


def test_bad_run_json_of_a_version_2_run_is_refused_in_one_line(tmp_path):
    """A schema_version 2 run.json without its time scale or a trial's start time is refused
    naming the field, as a converted version 1 one is (test_bad_run_dir), not analysed with a default
    time scale or a KeyError; with --partial the trial without its start is left out."""
    spec = yaml.safe_load((REPO / "experiments" / "pie-vs-red" / "experiment.yml").read_text())
    assert spec["schema_version"] == 2
    trial = {"id": "pie-limited", "labels": {"aqm": "pie", "variant": "limited"}}
    (tmp_path / "run.json").write_text(json.dumps({"spec": spec, "time_scale": 1, "trials": [trial], "raw_sha256": {}}))
    with pytest.raises(RunFolderError, match=r"run.json: trials\[0\].start_epoch_s: missing; .*add --partial"):
        analysis.analyze_run(tmp_path)
    res = analysis.analyze(tmp_path, figures=False, partial=True)
    assert res.problems[0] == ("run.json: trials[0].start_epoch_s: missing; expected the trial's common start in "
                               "Unix seconds; the trial is left out")
    assert "trial pie-limited: not run (no record in run.json)" in res.problems
    assert res.out_dir.name.endswith("-partial")
    # as every trial not run, in a version 2 run: each claim inconclusive
    assert all(c["status"] == "inconclusive" and c["holds"] is None for c in res.verdict["claims"])
    assert "pie-limited: not_run" in res.verdict["claims"][0]["reason"]
    (tmp_path / "run.json").write_text(json.dumps({"spec": spec, "trials": [{**trial, "start_epoch_s": START0}]}))
    with pytest.raises(RunFolderError, match=r"run.json: time_scale: missing; expected a number > 0"):
        analysis.analyze_run(tmp_path)


# --- the report reads like the paper ------------------------------------------------------------
def test_report_reads_like_the_paper(tmp_path):
    """The synthetic run analysed as the experiment file stands (experiments/pie-vs-red: its
    claims and its reference values): the verdict and claims first, then the figures, what
    each found (this run's medians per trial and phase beside what the paper and the 2016
    reproduction state, "not stated" where they say nothing), health, the whole trials, and
    how the run was made last; every value of run.json as text, never a dict or list."""
    from analysis.report import SECTIONS
    run_dir = make_synthetic_run(tmp_path)
    res = analysis.analyze(run_dir, load_spec("pie-vs-red"))
    report = (res.out_dir / "report.md").read_text()
    lines = report.splitlines()
    assert [ln[3:] for ln in lines if ln.startswith("## ")] == list(SECTIONS)
    first = lines.index("## " + SECTIONS[0])
    assert lines[0].startswith("# PIE vs RED") and any(ln.startswith("**Verdict: ") for ln in lines[:first])
    assert [ln for ln in lines[:first] if ln.startswith("- `")][0].startswith("- `pie-near-target` **")
    assert lines[first + 2].startswith("![Queueing delay, PIE vs RED (Fig. 8 of Pan et al., HPSR 2013)](figures/")
    # what each found: each claim's status, this run first, then each source
    found = lines.index("## What each found")
    assert "| found by | pie-near-target | red-follows-load | red-above-pie-under-load |" in lines[found:]
    assert "| Pan et al., HPSR 2013, Fig. 8 (ns-2 simulation) | holds | holds | holds |" in lines[found:]
    # the claims' statistic per trial and phase beside what each source states of it
    s = res.summary
    med = s[(s["statistic"] == "queue_delay_median_ms") & (s["subject"] == "all")].set_index(["trial", "phase"])["value"]
    row = "| red-unlimited | this run | " + " | ".join(f"{med[('red-unlimited', p)]:.4g}" for p in PHASES) + " |"
    table = lines.index("### Median queueing delay (ms): `queue_delay_median_ms` of `all`")
    at = lines.index(row)
    assert table < at < lines.index("## Health of the substrate")
    assert lines[at + 1] == "| red-unlimited | Pan et al., HPSR 2013, Fig. 8 (ns-2 simulation) | " + \
        " | ".join(["rises with the traffic"] * 5) + " |"
    assert lines[at + 2] == "| red-unlimited | GENI 2016 (B. Yan, F. Fund), figures only | " + \
        " | ".join(["flat, above PIE's"] * 5) + " |"
    assert "| pie-limited | Pan et al., HPSR 2013, Fig. 8 (ns-2 simulation) | " + " | ".join(["not stated"] * 5) + " |" \
        in lines
    assert "| pie-unlimited | GENI 2016 (B. Yan, F. Fund), figures only | " + " | ".join(["about 20"] * 5) + " |" in lines
    assert "No source of the experiment file (`reference_results`) states a value of `sent_utilization`: not stated." \
        in lines
    assert any(ln.startswith("- *GENI 2016 (B. Yan, F. Fund), figures only*, Results, unlimited sources: red-unlimited")
               and '"flat" trend' in ln for ln in lines)
    # provenance last, as tables; no JSON or Python literal anywhere
    made = lines.index("## How this run was made")
    assert made > lines.index("## Statistics of each whole trial") > lines.index("## Health of the substrate")
    assert "| capacity.forwarding_mbit | 600.5 |" in lines[made:] and "| sha256 of run.json | " in report
    for literal in ("{", "}", "['", "[{", "': ", '": ', "True", "False", "| None", ", None", "(None"):
        assert literal not in report, literal
