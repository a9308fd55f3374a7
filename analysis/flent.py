"""Each trial in Flent's data format (``flent/<trial>.flent.gz``), so that a run can be opened
with ``flent -i`` and its plotter (Flent 2.3.0, https://flent.org; the format is the gzipped
JSON of flent/resultset.py, file format version 4).

A trial is written as Flent's ``tcp_nup`` test (flent/tests/tcp_nup.conf), whatever the
direction of its traffic; the title says so:

- ``TCP upload::<i>``: each throughput stream of the tidy table (metric ``throughput_mbit``:
  an iperf3 stream), Mbit/s; its subject's ``rtt_ms`` samples, if any, ride along as
  ``tcp_rtt`` (Flent's ``tcp_rtt`` plot). A trial without one (its flows FTP transfers,
  counted only at their end) gets each sampled port's sent rate instead: the difference of
  its ``tx_bytes`` counter between consecutive samples x 8 / their interval;
- ``Ping (ms) ICMP``: the first pinging subject's RTT; the others as ``ping_hosts`` extras
  (``Ping (ms) ICMP <subject> (extra)``);
- ``qdisc_stats_<subject>``: the first queue-sampled subject's backlog (bytes, packets) and
  drops per interval, with ``qdisc_stats_hosts``/``_interfaces`` (Flent's ``backlog`` and
  ``drops`` plots).

Times: Flent's T0 is the trial's common start (``start_epoch_s``), its ``x_values`` a grid of
:data:`STEP_S` over the schedule; each series' samples are averaged per grid step, and the raw
samples kept as ``raw_values`` at their own times.
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone

import numpy as np
import pandas as pd

#: flent/resultset.py FILEFORMAT_VERSION of Flent 2.3.0.
FILEFORMAT_VERSION = 4
STEP_S = 0.1


def _iso(t: float) -> str:
    # flent.util.parse_date reads "%Y-%m-%dT%H:%M:%S.%fZ" as UTC
    return datetime.fromtimestamp(t, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def sent_rate(tidy: pd.DataFrame) -> pd.DataFrame:
    """Each sampled port's sent rate from its ``tx_bytes`` rows: tidy rows of metric
    ``throughput_mbit`` (stream -1), (bytes(i) - bytes(i-1)) x 8 / (t(i) - t(i-1)) / 1e6 placed
    at the later sample; a step back in time or of the counter gives no row."""
    out = []
    for s, g in tidy[tidy["metric"] == "tx_bytes"].groupby("subject", sort=False):
        g = g.sort_values("t_s", kind="stable")
        t, b = g["t_s"].to_numpy(dtype=float), g["value"].to_numpy(dtype=float)
        dt, db = np.diff(t), np.diff(b)
        ok = (dt > 0) & (db >= 0)
        out.append(pd.DataFrame({"trial": g["trial"].iloc[0], "subject": s, "stream": -1, "t_s": t[1:][ok],
                                 "metric": "throughput_mbit", "value": db[ok] * 8 / dt[ok] / 1e6}))
    return pd.concat(out, ignore_index=True) if out else tidy.iloc[0:0]


def _grid(samples: pd.DataFrame, n: int, step: float) -> list:
    """The mean of ``samples`` (t_s, value) per grid step [i*step, (i+1)*step); None where empty."""
    out: list = [None] * n
    if samples.empty:
        return out
    idx = np.floor(samples["t_s"].to_numpy(dtype=float) / step + 1e-9).astype(int)
    vals = samples["value"].to_numpy(dtype=float)
    ok = (idx >= 0) & (idx < n) & np.isfinite(vals)
    if ok.any():
        means = pd.Series(vals[ok]).groupby(idx[ok]).mean()
        for i, v in means.items():
            out[int(i)] = round(float(v), 6)
    return out


def _rows(tidy: pd.DataFrame, s, metric: str, stream=None) -> pd.DataFrame:
    """The tidy rows of subject ``s`` and ``metric`` (of ``stream`` when given and the table
    has streams), sorted by time."""
    r = tidy[(tidy["subject"] == s) & (tidy["metric"] == metric)]
    if stream is not None and "stream" in r.columns:
        r = r[r["stream"].astype(str) == str(stream)]
    return r.sort_values("t_s")


def _throughput_series(tidy: pd.DataFrame, keys: list, start_epoch_s: float, n: int, step_s: float,
                       results: dict, raw: dict, meta: dict) -> None:
    """Fill ``results``, ``raw`` and ``meta`` with a ``TCP upload::<i>`` series per throughput
    stream (``keys``: (subject, stream) in turn), its raw samples carrying the stream's
    nearest TCP RTT within 1 s as ``tcp_rtt``."""
    for i, (s, stream) in enumerate(keys, 1):
        name = f"TCP upload::{i}"
        r = _rows(tidy, s, "throughput_mbit", stream)
        results[name] = _grid(r, n, step_s)
        rtt = _rows(tidy, s, "rtt_ms", stream)  # the stream's own TCP RTT (iperf3), if it has one
        rtt_t = rtt["t_s"].to_numpy(dtype=float)
        entries = []
        for t, v in zip(r["t_s"].to_numpy(dtype=float), r["value"].to_numpy(dtype=float)):
            e = {"t": round(start_epoch_s + t, 6), "val": float(v)}
            if len(rtt_t):
                j = int(np.argmin(np.abs(rtt_t - t)))
                if abs(rtt_t[j] - t) <= 1.0:
                    e["tcp_rtt"] = float(rtt["value"].iloc[j])
            entries.append(e)
        raw[name] = entries
        meta[name] = {"UNITS": "Mbits/s", "RUNNER": "NetreproRunner", "IDX": i - 1,
                      "NETREPRO_SOURCE": f"{s}" + (f" stream {stream}" if stream is not None else "")}


def _ping_series(tidy: pd.DataFrame, pinged: list, start_epoch_s: float, n: int, step_s: float,
                 results: dict, raw: dict, meta: dict) -> None:
    """Fill ``results``, ``raw`` and ``meta`` with the RTT series of each pinging subject
    (``pinged``): ``Ping (ms) ICMP`` for the first, ``Ping (ms) ICMP <subject> (extra)`` for the others."""
    for k, s in enumerate(pinged):
        name = "Ping (ms) ICMP" if k == 0 else f"Ping (ms) ICMP {s} (extra)"
        r = _rows(tidy, s, "rtt_ms")
        results[name] = _grid(r, n, step_s)
        raw[name] = [{"t": round(start_epoch_s + t, 6), "val": float(v), "seq": j}
                     for j, (t, v) in enumerate(zip(r["t_s"].to_numpy(dtype=float), r["value"].to_numpy(dtype=float)))]
        meta[name] = {"UNITS": "ms", "RUNNER": "PingRunner", "NETREPRO_SOURCE": s}


def _qdisc_series(tidy: pd.DataFrame, q, start_epoch_s: float, n: int, step_s: float,
                  results: dict, raw: dict, meta: dict) -> str:
    """Fill ``results``, ``raw`` and ``meta`` with the ``qdisc_stats_<host>`` series of the
    queue-sampled subject ``q``: backlog (bytes, packets) and drops per interval; returns the
    host name (``q`` with ``:`` as ``_``)."""
    host = str(q).replace(":", "_")
    frame = None
    for metric, key in (("backlog_bytes", "backlog_bytes"), ("backlog_packets", "backlog_pkts"),
                        ("drops", "dropped")):
        r = _rows(tidy, q, metric)[["t_s", "value"]].rename(columns={"value": key})
        if r.empty:
            continue
        r = r.groupby("t_s", as_index=False).mean()
        frame = r if frame is None else frame.merge(r, on="t_s", how="outer")
    frame = frame.sort_values("t_s").reset_index(drop=True)
    if "dropped" in frame.columns:  # cumulative in the samples; per interval in Flent's
        frame["dropped"] = frame["dropped"].ffill().diff().fillna(0).clip(lower=0)
    name = f"qdisc_stats_{host}"
    raw[name] = [{"t": round(start_epoch_s + float(r["t_s"]), 6),
                  **{k: float(r[k]) for k in frame.columns if k != "t_s" and pd.notna(r[k])}}
                 for _, r in frame.iterrows()]
    meta[name] = {"UNITS": "misc", "RUNNER": "TcRunner"}
    units = {"backlog_bytes": "B", "backlog_pkts": "packets", "dropped": "packets"}
    for key in [c for c in frame.columns if c != "t_s"]:
        results[f"{name}::{key}"] = _grid(frame[["t_s", key]].rename(columns={key: "value"}), n, step_s)
        meta[f"{name}::{key}"] = {"UNITS": units[key], "RUNNER": "NullRunner"}
    return host


def trial_flent(tidy: pd.DataFrame, trial: str, start_epoch_s: float, duration_s: float, title: str,
                step_s: float = STEP_S) -> dict:
    """The Flent result set (a JSON-ready dict) of one trial's tidy rows (``tidy``: that
    trial's rows of tidy.csv.gz, times ``t_s`` from its common start)."""
    subj = "subject"
    if not (tidy["metric"] == "throughput_mbit").any():
        tidy = pd.concat([tidy, sent_rate(tidy)], ignore_index=True)
    tidy = tidy[(tidy["t_s"] >= 0) & (tidy["t_s"] <= duration_s)]
    n = int(math.floor(duration_s / step_s + 1e-9)) + 1
    x = [round(i * step_s, 6) for i in range(n)]
    results: dict[str, list] = {}
    raw: dict[str, list] = {}
    meta: dict[str, dict] = {}

    thr = tidy[tidy["metric"] == "throughput_mbit"]
    keys = (list(dict.fromkeys(zip(thr[subj], thr["stream"]))) if "stream" in thr.columns
            else [(s, None) for s in dict.fromkeys(thr[subj])])
    flow_subjects = {s for s, _ in keys}
    _throughput_series(tidy, keys, start_epoch_s, n, step_s, results, raw, meta)
    pinged = [s for s in dict.fromkeys(tidy[tidy["metric"] == "rtt_ms"][subj]) if s not in flow_subjects]
    _ping_series(tidy, pinged, start_epoch_s, n, step_s, results, raw, meta)
    params = {"upload_streams": str(max(1, len(keys)))}
    if len(pinged) > 1:
        params["ping_hosts"] = ",".join(pinged[1:])
    queued = list(dict.fromkeys(tidy[tidy["metric"] == "backlog_bytes"][subj]))
    if queued:
        q = queued[0]
        host = _qdisc_series(tidy, q, start_epoch_s, n, step_s, results, raw, meta)
        params.update(qdisc_stats_hosts=host, qdisc_stats_interfaces=str(q))
    host = str(keys[0][0]) if keys else (str(pinged[0]) if pinged else "netrepro")
    metadata = {
        "NAME": "tcp_nup", "TITLE": f"{title} {trial}",
        "NOTE": "netrepro export: 'TCP upload::<i>' is each throughput stream of the trial, whatever its direction", "TIME": _iso(start_epoch_s), "T0": _iso(start_epoch_s), "LENGTH": int(round(duration_s)),
        "TOTAL_LENGTH": x[-1], "STEP_SIZE": step_s, "HOSTS": [host], "HOST": host, "LOCAL_HOST": "netrepro",
        "IP_VERSION": 4, "FLENT_VERSION": "netrepro-export", "DATA_FILENAME": f"{trial}.flent.gz",
        "TEST_PARAMETERS": params, "SERIES_META": meta,
        "BATCH_NAME": None, "BATCH_TIME": None, "BATCH_TITLE": None, "BATCH_UUID": None,
    }
    return {"version": FILEFORMAT_VERSION, "metadata": metadata, "x_values": x, "results": results, "raw_values": raw}


def flent_bytes(result: dict) -> bytes:
    """The JSON text of a result set (sorted keys), for :func:`netrepro.runfolder.atomic.write_gzip`."""
    return json.dumps(result, sort_keys=True).encode()


def write_trials(tidy: pd.DataFrame, records: dict[str, dict], title: str, out_dir) -> list:
    """``out_dir/<trial>.flent.gz`` for each trial of ``tidy`` with a record (run.json's
    trial records by tidy trial id: ``start_epoch_s``, and ``duration_s`` or the end of its
    last phase); returns the paths."""
    from pathlib import Path

    from netrepro.runfolder.atomic import write_gzip
    out = []
    for trial, g in tidy.groupby("trial", sort=False):
        rec = records.get(trial) or {}
        ends = [p.get("end_s") for p in rec.get("phases") or [] if isinstance(p, dict)]
        duration = rec.get("duration_s") or max((e for e in ends if isinstance(e, (int, float))), default=None)
        if not isinstance(rec.get("start_epoch_s"), (int, float)) or not isinstance(duration, (int, float)):
            continue
        res = trial_flent(g, str(trial), float(rec["start_epoch_s"]), float(duration), title)
        out.append(write_gzip(Path(out_dir) / f"{trial}.flent.gz", flent_bytes(res)))
    return out


__all__ = ["FILEFORMAT_VERSION", "trial_flent", "write_trials", "flent_bytes"]
