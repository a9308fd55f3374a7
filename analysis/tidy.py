"""Build the long-format table of every sample of a run (``tidy.csv.gz``).

Columns (TIDY_COLUMNS): trial, aqm, variant, node, source (ping | qdisc | flow), metric,
t_s (seconds since the trial's start_epoch_s), phase (phase name, "" outside every phase),
value. Metrics and units:

- ping (each client): ``rtt_ms``; ``queueing_delay_ms`` = rtt_ms - base RTT of that client
  (reference doc: "Queueing delay = ping RTT minus the base RTT measured before any load"),
  base RTT = run.json's ``base_rtt_ms[client]`` if recorded, else the spec's
  ``base_rtt.statistic`` (default median) of ``base_rtt.txt``. Not clipped at 0.
- qdisc (router): ``backlog_bytes``, ``backlog_packets``, ``drops`` (cumulative count),
  ``pie_prob`` (0..1), ``pie_delay_ms``, ``red_early_drops`` (cumulative count), ``tx_bytes``
  (interface counter, bytes), ``throughput_mbit`` = diff(tx_bytes) * 8 / diff(t) / 1e6 between
  consecutive samples, placed at the later sample.
- flow (each client, one row per FTP flow): ``flow_start_offset_s`` (actual start, seconds
  from the trial start: equals t_s), ``flow_start_lag_s`` (actual minus scheduled start of
  the client's flow group) and ``flow_bytes``.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.raw import base_rtt_ms, parse_flows, parse_ping, parse_qdisc_jsonl
from analysis.run import RunInfo, TrialInfo

TIDY_COLUMNS = ["trial", "aqm", "variant", "node", "source", "metric", "t_s", "phase", "value"]

QDISC_METRICS = {
    "backlog_bytes": "backlog_bytes", "backlog_packets": "backlog_packets", "drops": "drops",
    "pie_prob": "pie_prob", "pie_delay_ms": "pie_delay_ms", "red_early_drops": "red_early_drops",
    "tx_bytes": "tx_bytes", "throughput_mbit": "throughput_mbit",
}


def assign_phase(t_s, phases: list[dict]) -> np.ndarray:
    """Phase name of each time (seconds from trial start): the phase with start_s <= t < end_s,
    "" when none. Returns an object array the length of ``t_s``."""
    t = np.asarray(t_s, dtype=float)
    out = np.full(t.shape, "", dtype=object)
    for ph in phases:
        out[(t >= ph["start_s"]) & (t < ph["end_s"])] = ph["name"]
    return out


def _long(trial: TrialInfo, node: str, source: str, t_s, wide: dict[str, np.ndarray]) -> pd.DataFrame:
    """Stack ``metric -> values`` (each aligned with t_s) into TIDY_COLUMNS rows; NaN values dropped."""
    t = np.round(np.asarray(t_s, dtype=float), 6)  # epoch differences: keep microseconds, drop float noise
    phase = assign_phase(t, trial.phases)
    parts = [
        pd.DataFrame({"metric": m, "t_s": t, "phase": phase, "value": np.asarray(v, dtype=float)})
        for m, v in wide.items()
    ]
    df = pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=["metric", "t_s", "phase", "value"])
    df = df[np.isfinite(df["value"].astype(float)) & np.isfinite(df["t_s"].astype(float))]
    df.insert(0, "source", source)
    df.insert(0, "node", node)
    df.insert(0, "variant", trial.variant)
    df.insert(0, "aqm", trial.aqm)
    df.insert(0, "trial", trial.id)
    return df[TIDY_COLUMNS]


def read_raw(path: Path, problems: list[str], run_dir: Path) -> str | None:
    """File text, or None after recording ``<relative path>: missing`` in problems."""
    try:
        return path.read_text(errors="replace")
    except OSError as exc:
        problems.append(f"{path.relative_to(run_dir)}: {'missing' if not path.exists() else exc.strerror}")
        return None


def ping_samples(trial: TrialInfo, node: str, ping: pd.DataFrame, base_ms: float) -> pd.DataFrame:
    """Tidy rows (rtt_ms, queueing_delay_ms) of one client's ``parse_ping`` frame; samples
    without a timestamp are dropped. ``base_ms`` NaN gives rtt_ms rows only."""
    ping = ping[np.isfinite(ping["t_epoch_s"])]
    t = ping["t_epoch_s"].to_numpy() - trial.start_epoch_s
    wide = {"rtt_ms": ping["rtt_ms"].to_numpy()}
    if math.isfinite(base_ms):
        wide["queueing_delay_ms"] = ping["rtt_ms"].to_numpy() - base_ms
    return _long(trial, node, "ping", t, wide)


def qdisc_samples(trial: TrialInfo, node: str, q: pd.DataFrame) -> pd.DataFrame:
    """Tidy rows of one router's ``parse_qdisc_jsonl`` frame, with throughput_mbit computed
    from consecutive tx_bytes samples (Mbit/s; non-positive time steps and counter decreases
    give no sample)."""
    t = q["t_epoch_s"].to_numpy() - trial.start_epoch_s
    dbytes = q["tx_bytes"].diff().to_numpy()
    dt = np.diff(t, prepend=np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        thr = np.where((dt > 0) & (dbytes >= 0), dbytes * 8 / dt / 1e6, np.nan)
    wide = {m: q[m].to_numpy() for m in QDISC_METRICS if m in q.columns}
    wide["throughput_mbit"] = thr
    return _long(trial, node, "qdisc", t, wide)


def flow_samples(trial: TrialInfo, node: str, flows: pd.DataFrame, scheduled_start_s: dict[str, float]) -> pd.DataFrame:
    """Tidy rows of one client's ``parse_flows`` frame. ``scheduled_start_s`` maps a server
    to the scheduled start (s from trial start) of this client's flow group to it."""
    flows = flows[np.isfinite(flows["start_epoch_s"])]
    t = flows["start_epoch_s"].to_numpy() - trial.start_epoch_s
    sched = flows["server"].map(scheduled_start_s).astype(float).to_numpy()
    return _long(trial, node, "flow", t, {
        "flow_start_offset_s": t, "flow_start_lag_s": t - sched, "flow_bytes": flows["bytes"].to_numpy(),
    })


def build_tidy(run: RunInfo) -> tuple[pd.DataFrame, list[str]]:
    """Read every trial's raw files and return ``(tidy, problems)``.

    Nodes read: ping collectors' nodes (``ping.txt``, ``base_rtt.txt``), qdisc_stats
    collectors' nodes (``qdisc.jsonl``) and the clients of the flow groups (``flows.csv``),
    under ``raw/<trial id>/<node>/``.

    Returns:
        tidy: DataFrame with TIDY_COLUMNS (see module docstring), possibly empty.
        problems: one line per missing/empty file or missing base RTT, e.g.
            ``raw/pie-limited/client2/ping.txt: missing``; missing data never raises.
    Side effect: base RTTs computed from base_rtt.txt are stored in each trial's
    ``base_rtt_ms`` (with ``base_rtt_origin[node] = "base_rtt.txt"``) for the report.
    """
    spec, problems, frames = run.spec, [], []
    ping_nodes = [n for c in spec["collectors"] if c["kind"] == "ping" for n in spec.select(c["nodes"])]
    qdisc_nodes = [n for c in spec["collectors"] if c["kind"] == "qdisc_stats" for n in spec.select(c["nodes"])]
    flow_groups = spec.scaled(run.time_scale)["flows"]
    flow_clients = list(dict.fromkeys(fg["client"] for fg in flow_groups))
    statistic = spec.get("base_rtt", {}).get("statistic", "median")
    handle = spec["bottleneck"].get("aqm_handle")

    for trial in run.trials:
        if not trial.ran:
            problems.append(f"run.json: no record of trial {trial.id}; its summary rows are empty")
            continue
        if trial.start_epoch_s is None:
            problems.append(f"run.json: trial {trial.id} has no start time; its raw files are not read")
            continue
        tdir = run.raw_dir / trial.id
        if not tdir.is_dir():
            problems.append(f"raw/{trial.id}/: missing")
            continue
        for node in dict.fromkeys(ping_nodes):
            text = read_raw(tdir / node / "ping.txt", problems, run.dir)
            if text is None:
                continue
            ping = parse_ping(text)
            if ping.empty:
                problems.append(f"raw/{trial.id}/{node}/ping.txt: no echo replies")
            base = trial.base_rtt_ms.get(node, math.nan)
            if not math.isfinite(base):
                btext = read_raw(tdir / node / "base_rtt.txt", problems, run.dir)
                base = base_rtt_ms(parse_ping(btext)["rtt_ms"], statistic) if btext is not None else math.nan
                if btext is not None and not math.isfinite(base):
                    problems.append(f"raw/{trial.id}/{node}/base_rtt.txt: no echo replies")
            if math.isfinite(base) and node not in trial.base_rtt_ms:
                trial.base_rtt_ms[node] = base
                trial.base_rtt_origin[node] = "base_rtt.txt"
            if not math.isfinite(base):
                problems.append(f"{trial.id}/{node}: no base RTT, so no queueing delay")
            frames.append(ping_samples(trial, node, ping, base))
        for node in dict.fromkeys(qdisc_nodes):
            text = read_raw(tdir / node / "qdisc.jsonl", problems, run.dir)
            if text is None:
                continue
            q = parse_qdisc_jsonl(text, handle=handle, kind=spec["aqms"][trial.aqm]["qdisc"],
                                  dev=trial.bottleneck_interface)
            if q.empty:
                problems.append(f"raw/{trial.id}/{node}/qdisc.jsonl: no samples")
            frames.append(qdisc_samples(trial, node, q))
        for node in flow_clients:
            text = read_raw(tdir / node / "flows.csv", problems, run.dir)
            if text is None:
                continue
            sched = {fg["server"]: fg["start_s"] for fg in flow_groups if fg["client"] == node}
            frames.append(flow_samples(trial, node, parse_flows(text), sched))
    frames = [f for f in frames if not f.empty]
    tidy = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=TIDY_COLUMNS)
    tidy = tidy.astype({"t_s": float, "value": float})
    return tidy[TIDY_COLUMNS], problems
