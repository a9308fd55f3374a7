"""Parsers for the raw files a trial leaves on each node (``raw/<trial>/<node>/``).

Every parser takes the file's text (not a path) so that it can be tested on literal samples,
and returns a pandas DataFrame with fixed columns, possibly empty. Lines that are not data
(headers, summaries, ``no answer yet`` lines, truncated lines) are skipped, never fatal.
"""

from __future__ import annotations

import csv
import json
import math
import re
from collections.abc import Callable, Iterator

import numpy as np
import pandas as pd

# --- ping ------------------------------------------------------------------------------------
# iputils `ping -D` reply line, e.g.
#   [1795343450.612345] 64 bytes from 10.10.2.1: icmp_seq=1 ttl=63 time=100 ms
# The [epoch] prefix is only there with -D; without it the sample has no time (NaN).
_PING_REPLY = re.compile(
    r"^\s*(?:\[(?P<t>\d+(?:\.\d*)?)\]\s*)?"
    r"\d+ bytes from .*?icmp_seq=(?P<seq>\d+).*?time[=<](?P<rtt>\d+(?:\.\d*)?)\s*ms"
    r"(?P<rest>.*)$"
)

PING_COLUMNS = ["t_epoch_s", "seq", "rtt_ms"]


def parse_ping(text: str) -> pd.DataFrame:
    """Parse the output of iputils ``ping -D`` into one row per echo reply.

    Returns:
        DataFrame with columns ``t_epoch_s`` (float, Unix seconds printed by -D, NaN when the
        line has no ``[...]`` prefix), ``seq`` (int, icmp_seq) and ``rtt_ms`` (float, the
        ``time=`` field in milliseconds), in file order. Header, summary, ``no answer yet``
        and error lines are skipped, and so are duplicate replies (``(DUP!)``), which would
        count one probe twice.
    Raises:
        nothing: text that holds no replies gives an empty DataFrame.
    """
    rows = []
    for line in text.splitlines():
        m = _PING_REPLY.match(line)
        if not m or "DUP!" in m.group("rest"):
            continue
        t = m.group("t")
        rows.append((float(t) if t is not None else math.nan, int(m.group("seq")), float(m.group("rtt"))))
    df = pd.DataFrame(rows, columns=PING_COLUMNS)
    return df.astype({"t_epoch_s": float, "seq": "int64", "rtt_ms": float})


def trial_base_rtt_ms(record: dict, node: str, read_base_rtt: Callable[[], str | None], statistic: str) -> float:
    """The base RTT (ms) of the path ``node`` pings in one trial: run.json's
    ``base_rtt_ms[node]`` for the trial (``record``) when it is a finite number, else the
    ``statistic`` (:func:`base_rtt_ms`) of the RTTs in the node's ``base_rtt.txt``, whose text
    ``read_base_rtt()`` returns (None when missing: NaN). The analysis's queueing delays and
    the health check of excess delay both take it from here."""
    recorded = record.get("base_rtt_ms") if isinstance(record.get("base_rtt_ms"), dict) else {}
    value = recorded.get(node)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    text = read_base_rtt()
    return base_rtt_ms(parse_ping(text)["rtt_ms"], statistic) if text is not None else math.nan


def base_rtt_ms(rtt_ms: pd.Series | np.ndarray, statistic: str = "median") -> float:
    """The base RTT (ms) of a client from its unloaded ping samples.

    Args:
        rtt_ms: RTT samples in milliseconds (NaN ignored).
        statistic: ``median`` (default), ``min`` or ``mean``: the spec's ``base_rtt.statistic``.
    Returns:
        The statistic in ms, NaN when there is no sample.
    Raises:
        ValueError: unknown statistic.
    """
    s = pd.Series(rtt_ms, dtype=float).dropna()
    if statistic not in ("median", "min", "mean"):
        raise ValueError(f"base_rtt.statistic: expected median, min or mean, got {statistic!r}")
    if s.empty:
        return math.nan
    return float(getattr(s, statistic)())


# --- flows.csv -------------------------------------------------------------------------------
#: ``connect_s``: the flow's control connection's TCP handshake, s after its start (curl's
#: ``time_connect``); ``data_start_s``: its first byte of data, s after its start (curl's
#: ``time_starttransfer``, CURLINFO_STARTTRANSFER_TIME(3): "the time until the first byte is
#: received"; an FTP download's after the login, PASV and the data connection). Files written
#: before they were recorded have neither (NaN).
FLOW_COLUMNS = ["flow", "server", "file", "start_epoch_s", "end_epoch_s", "exit_code", "bytes", "connect_s",
                "data_start_s"]


def parse_flows(text: str) -> pd.DataFrame:
    """Parse a client's ``flows.csv`` (header ``flow,server,file,start_epoch_s,end_epoch_s,exit_code,bytes,
    connect_s,data_start_s``, possibly with fewer or more columns; roles/flow_clients writes one
    line per finished flow).

    Returns:
        DataFrame with exactly FLOW_COLUMNS; numeric columns coerced to float (unparseable
        or missing values become NaN, missing columns are added as NaN). A row whose number
        of fields differs from the header's is skipped, and so is a last line without its
        newline (a file cut mid-line): a cut number would pass for a value. Empty text or
        text that is not CSV gives an empty frame; never raises.
    """
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith(("\n", "\r")):
        lines = lines[:-1]
    try:
        rows = list(csv.reader(line.replace("\0", "") for line in lines))
    except csv.Error:
        rows = []
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=float if c not in ("server", "file") else object) for c in FLOW_COLUMNS})
    header = [h.strip() for h in rows[0]]
    body = [[x.strip() for x in r] for r in rows[1:] if len(r) == len(header)]
    df = pd.DataFrame(body, columns=header)
    df = df.loc[:, ~df.columns.duplicated()]
    for col in FLOW_COLUMNS:
        if col not in df.columns:
            df[col] = np.nan
    for col in ("flow", "start_epoch_s", "end_epoch_s", "exit_code", "bytes", "connect_s", "data_start_s"):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype(float)
    return df[FLOW_COLUMNS].reset_index(drop=True)


# --- qdisc.jsonl -----------------------------------------------------------------------------
# One JSON object per line, written by the queue collector (roles/collectors/files/
# nr-qdisc-stats.sh) every interval: {"t": epoch s, "dev": ..., "tx_bytes": int, "tx_packets": int,
# "qdisc": <the list printed by tc -s -j qdisc show dev DEV>[, "classes": <tc -s class show text>]}.
# Fields follow iproute2's JSON names: ``backlog`` (bytes), ``qlen`` (packets), ``drops``
# (cumulative count) and each qdisc's own statistics.
_SIZE_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "m": 1024**2, "mb": 1024**2, "g": 1024**3, "gb": 1024**3}


def _num(x) -> float:
    """A JSON number (int/float) or numeric string as float; anything else NaN."""
    if isinstance(x, bool) or x is None:
        return math.nan
    if isinstance(x, (int, float)):
        return float(x)
    try:
        return float(str(x).strip())
    except ValueError:
        return math.nan


def _size_bytes(x) -> float:
    """tc backlog: an int of bytes in -j output; also accepts text such as ``1514b``/``12Kb``."""
    if isinstance(x, str):
        m = re.fullmatch(r"\s*(\d+(?:\.\d*)?)\s*([kKmMgG]?[bB]?)\s*", x)
        if m:
            return float(m.group(1)) * _SIZE_UNITS[m.group(2).lower()]
        return math.nan
    return _num(x)


def _json_lines(text: str) -> Iterator[dict]:
    """Each line of a JSON-lines file (``qdisc.jsonl``) that is a JSON object, as a dict;
    lines that are not (a sampler cut off mid-line, a tool's error) are skipped."""
    for line in text.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            yield obj


TX_COLUMNS = ["t_epoch_s", "tx_bytes"]


def parse_tx_bytes(text: str) -> pd.DataFrame:
    """The interface's sent-bytes counter of ``qdisc.jsonl``: TX_COLUMNS (Unix seconds, bytes),
    one row per line that is a JSON object with a time and a counter, sorted by time, whatever
    the line's ``dev`` label (the node's one collector wrote every line: netrepro/model/).
    Lines that are not JSON objects, or lack the time or the counter, are skipped."""
    rows = []
    for obj in _json_lines(text):
        t, tx = _num(obj.get("t")), _num(obj.get("tx_bytes"))
        if math.isfinite(t) and math.isfinite(tx):
            rows.append((t, tx))
    df = pd.DataFrame(rows, columns=TX_COLUMNS).astype(float)
    return df.sort_values("t_epoch_s", kind="stable").reset_index(drop=True)


# --- iperf3 -J ---------------------------------------------------------------------------------
IPERF3_COLUMNS = ["t_s", "stream", "omitted", "bits_per_second", "retransmits", "snd_cwnd_bytes", "rtt_ms"]


def parse_iperf3(text: str) -> tuple[pd.DataFrame, dict]:
    """Parse an iperf3 client's JSON report (``iperf3 -c ... -J``, iperf3 3.x).

    Returns:
        (intervals, end): ``intervals`` has one row per stream and reporting interval, with
        IPERF3_COLUMNS: ``t_s`` (end of the interval, s since the client's start: the sum of
        the intervals' ``seconds`` up to it, so the omitted ones (-O) count too),
        ``stream`` (0, 1, ... in the report's order), ``omitted`` (bool), and the sender's
        ``bits_per_second``, ``retransmits``, ``snd_cwnd`` (bytes) and ``rtt`` (µs in the
        report, here ms; NaN where the report has none). ``end``: ``{"sent_bps",
        "received_bps", "retransmits", "streams": [{"sent_bps", "retransmits"}]}`` from
        the report's ``end`` (which leaves the omitted seconds out).
    Raises:
        ValueError: not a JSON object, or an iperf3 ``error`` report (the message says it).
    """
    obj = json.loads(text)
    if not isinstance(obj, dict):
        raise ValueError("not an iperf3 JSON report")
    if obj.get("error"):
        raise ValueError(f"iperf3 reported: {obj['error']}")
    rows, t = [], 0.0
    for iv in obj.get("intervals") or []:
        t += _num((iv.get("sum") or {}).get("seconds"))
        for k, st in enumerate(iv.get("streams") or []):
            rtt = _num(st.get("rtt"))
            rows.append((t, k, bool(st.get("omitted")), _num(st.get("bits_per_second")), _num(st.get("retransmits")),
                         _num(st.get("snd_cwnd")), rtt / 1000 if math.isfinite(rtt) else math.nan))
    df = pd.DataFrame(rows, columns=IPERF3_COLUMNS).astype({"stream": "int64", "omitted": bool})
    end = obj.get("end") or {}
    sent, recv = end.get("sum_sent") or {}, end.get("sum_received") or {}
    streams = [{"sent_bps": _num((s.get("sender") or {}).get("bits_per_second")),
                "retransmits": _num((s.get("sender") or {}).get("retransmits"))} for s in end.get("streams") or []]
    return df, {"sent_bps": _num(sent.get("bits_per_second")), "received_bps": _num(recv.get("bits_per_second")),
                "retransmits": _num(sent.get("retransmits")), "streams": streams}


STACK_COLUMNS = ["t_epoch_s", "backlog_bytes", "backlog_packets", "drops"]


def _root(qdiscs: list[dict]) -> dict | None:
    """The root qdisc of a sample's list (``root`` true, or no ``parent``), or None."""
    return next((q for q in qdiscs if q.get("root") or "parent" not in q), None)


#: Columns of :func:`parse_shaper_samples`.
SHAPER_COLUMNS = ["t_epoch_s", "tx_bytes", "backlog_bytes"]


def parse_shaper_samples(text: str, shapers: tuple[str, ...]) -> pd.DataFrame:
    """What a shaped port's samples of ``qdisc.jsonl`` say of its link (analysis/fidelity.py):
    SHAPER_COLUMNS, sorted by time: ``t_epoch_s`` (s), ``tx_bytes`` (the device's counter,
    bytes) and ``backlog_bytes`` (the backlog of the first qdisc whose kind is in ``shapers``,
    which holds its children's, else the root qdisc's). Lines without a time, a counter or a
    backlog are skipped; never raises."""
    rows = []
    for obj in _json_lines(text):
        if not isinstance(obj.get("qdisc"), list):
            continue
        qs = [q for q in obj["qdisc"] if isinstance(q, dict)]
        layer = next((q for q in qs if q.get("kind") in shapers), None) or _root(qs)
        if layer is None:
            continue
        row = (_num(obj.get("t")), _num(obj.get("tx_bytes")), _size_bytes(layer.get("backlog")))
        if all(math.isfinite(v) for v in row):
            rows.append(row)
    df = pd.DataFrame(rows, columns=SHAPER_COLUMNS).astype(float)
    return df.sort_values("t_epoch_s", kind="stable").reset_index(drop=True)


def parse_qdisc_stack(text: str) -> pd.DataFrame:
    """The queue of a whole stack of qdiscs from ``qdisc.jsonl``: the root qdisc's ``backlog`` (bytes) and ``qlen`` (packets), which hold its
    children's, and the drops of every qdisc of the stack summed (each counts its own).

    Returns a DataFrame with STACK_COLUMNS sorted by time; lines without a time or a root
    qdisc are skipped.
    """
    rows = []
    for obj in _json_lines(text):
        if not math.isfinite(_num(obj.get("t"))) or not isinstance(obj.get("qdisc"), list):
            continue
        qs = [q for q in obj["qdisc"] if isinstance(q, dict)]
        root = _root(qs)
        if root is None:
            continue
        rows.append((_num(obj["t"]), _size_bytes(root.get("backlog")), _num(root.get("qlen")),
                     float(np.nansum([_num(q.get("drops")) for q in qs]))))
    df = pd.DataFrame(rows, columns=STACK_COLUMNS).astype(float)
    return df.sort_values("t_epoch_s", kind="stable").reset_index(drop=True)


# --- classes (per-bucket queues) ---------------------------------------------------------------
# `tc -s class show dev DEV` (iproute2 6.1 prints classes as text even with -j), one block per
# class, e.g. an fq_codel bucket (tc-fq_codel(8) lists each bucket that holds packets):
#   class fq_codel 2:3 parent 2:
#    (dropped 0, overlimits 0 requeues 0)
#    backlog 4542b 3p requeues 0
#     deficit -86 count 0 lastcount 0 ldelay 1.2ms
_CLASS_HEAD = re.compile(r"^class (?P<kind>\S+) (?P<classid>[0-9a-f]+:[0-9a-f]*)(?: parent (?P<parent>\S+))?")
_CLASS_BACKLOG = re.compile(r"\bbacklog (?P<bytes>\d+(?:\.\d+)?[KMG]?b) (?P<packets>\d+)p")
_CLASS_SENT = re.compile(r"\bSent (?P<bytes>\d+) bytes (?P<packets>\d+) pkt \(dropped (?P<dropped>\d+)")
CLASS_COLUMNS = ["t_epoch_s", "kind", "classid", "parent", "minor", "backlog_bytes", "backlog_packets", "dropped"]


def parse_tc_classes(text: str) -> list[dict]:
    """The classes of one ``tc -s class show dev DEV`` (text): a dict per class block with
    ``kind``, ``classid`` (``"2:3"``), ``parent`` (``"2:"``, or ``"root"``), ``minor`` (the
    class number after the colon, an int from hex: an fq_codel bucket's index + 1),
    ``backlog_bytes``, ``backlog_packets`` and ``dropped`` (floats, NaN when the block lacks
    them). Lines outside a block are skipped."""
    out: list[dict] = []
    for line in text.splitlines():
        m = _CLASS_HEAD.match(line)
        if m:
            minor = m.group("classid").split(":")[1]
            out.append({"kind": m.group("kind"), "classid": m.group("classid"),
                        "parent": m.group("parent") or ("root" if " root" in line else ""),
                        "minor": int(minor, 16) if minor else 0, "backlog_bytes": math.nan,
                        "backlog_packets": math.nan, "dropped": math.nan})
            continue
        if not out:
            continue
        b = _CLASS_BACKLOG.search(line)
        if b:
            out[-1]["backlog_bytes"] = _size_bytes(b.group("bytes"))
            out[-1]["backlog_packets"] = float(b.group("packets"))
        s = _CLASS_SENT.search(line)
        if s:
            out[-1]["dropped"] = float(s.group("dropped"))
    return out


def parse_qdisc_classes(text: str) -> pd.DataFrame:
    """Every class of every sample of a ``qdisc.jsonl`` written with ``--classes``
    (roles/collectors/files/nr-qdisc-stats.sh): CLASS_COLUMNS, one row per class and sample,
    sorted by time. Samples without ``classes`` (a collector run without the option) give no
    rows."""
    rows = []
    for obj in _json_lines(text):
        if not isinstance(obj.get("classes"), str):
            continue
        t = _num(obj.get("t"))
        if not math.isfinite(t):
            continue
        for c in parse_tc_classes(obj["classes"]):
            rows.append({"t_epoch_s": t, **c})
    df = pd.DataFrame(rows, columns=CLASS_COLUMNS)
    return df.sort_values("t_epoch_s", kind="stable").reset_index(drop=True)


#: The fields every qdisc has in ``tc -s -j qdisc show`` (tc_util.c print_tcstats_attr and the
#: qdisc header); the others are the qdisc's own (its xstats).
_COMMON_QDISC_FIELDS = {"kind", "handle", "parent", "root", "refcnt", "options", "bytes", "packets", "drops",
                        "overlimits", "requeues", "backlog", "qlen"}
FIELD_COLUMNS = ["t_epoch_s", "kind", "field", "value"]


def parse_qdisc_fields(text: str) -> pd.DataFrame:
    """The qdiscs' own statistics from ``qdisc.jsonl``: every numeric field of a qdisc object
    that is not one of the common counters, as iproute2 prints it with -j (its unit is tc's:
    pie's ``prob`` a fraction and ``delay`` in microseconds (q_pie.c); codel's and fq_codel's
    ``ldelay`` in microseconds, ``count``, ``new_flows_len``, ``old_flows_len``,
    ``drop_overlimit`` counts (q_codel.c, q_fq_codel.c); red's ``early``, ``pdrop``, ``marked``
    counts (q_red.c)). Returns FIELD_COLUMNS in long form (``kind`` the qdisc's kind), sorted by
    time; booleans and non-numeric values are skipped."""
    rows = []
    for obj in _json_lines(text):
        if not isinstance(obj.get("qdisc"), list):
            continue
        t = _num(obj.get("t"))
        if not math.isfinite(t):
            continue
        for q in obj["qdisc"]:
            if not isinstance(q, dict):
                continue
            for k, v in q.items():
                if k in _COMMON_QDISC_FIELDS or isinstance(v, bool) or not isinstance(v, (int, float)):
                    continue
                rows.append((t, str(q.get("kind", "")), k, float(v)))
    df = pd.DataFrame(rows, columns=FIELD_COLUMNS).astype({"t_epoch_s": float, "value": float})
    return df.sort_values("t_epoch_s", kind="stable").reset_index(drop=True)
