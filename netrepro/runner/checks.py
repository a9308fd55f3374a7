"""What a trial's data must show before it is kept: the nodes' clocks against the
controller's, read at the release and after the trial (:func:`node_clocks`,
:func:`clock_problems`), and fetched data that covers the schedule (:func:`check_trial_data`)."""

from __future__ import annotations

import csv
import json
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from netrepro.runner.ssh import inventory_hosts, node_ssh_argv


#: A node's clock that moved by more than this, plus half the round trips of the two readings,
#: against the controller's clock between the readings before and after a trial was stepped.
CLOCK_STEP_TOLERANCE_S = 0.5


def node_clocks(inv: Path, samples: int = 3, timeout_s: float = 60, only: list[str] | None = None) -> dict[str, dict]:
    """Each node's clock against the controller's, read over SSH (``date +%s.%N``), in parallel.

    For each of ``samples`` readings the controller notes its clock before (t0) and after (t1);
    the node's reading minus (t0 + t1) / 2 is the offset, within ± (t1 - t0) / 2. The reading
    with the shortest round trip is kept (as NTP keeps its best sample).
    ``only``: these inventory hosts (default every one).
    Returns node -> ``{"offset_s", "rtt_s"}``, or ``{"error": why}`` when no reading came.
    """
    hosts = inventory_hosts(inv)
    if only is not None:
        hosts = {h: hosts[h] for h in only}

    def one(host: str) -> dict:
        best, err = None, "no reading"
        argv = node_ssh_argv(host, hosts[host], "date +%s.%N")
        for _ in range(samples):
            t0 = time.time()
            try:
                p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
            except subprocess.TimeoutExpired:
                err = f"no answer in {timeout_s:.0f} s"
                continue
            t1 = time.time()
            try:
                node = float(p.stdout.split()[-1])
            except (IndexError, ValueError):
                err = (p.stderr.strip().splitlines() or [f"ssh exit {p.returncode}"])[-1]
                continue
            if best is None or t1 - t0 < best[0]:
                best = (t1 - t0, node - (t0 + t1) / 2)
        return {"offset_s": round(best[1], 4), "rtt_s": round(best[0], 4)} if best else {"error": err}

    with ThreadPoolExecutor(max_workers=max(1, len(hosts))) as pool:
        return dict(zip(hosts, pool.map(one, hosts)))


def clock_problems(before: dict[str, dict], after: dict[str, dict],
                   tolerance_s: float = CLOCK_STEP_TOLERANCE_S) -> tuple[dict[str, float], list[str]]:
    """The step of each node's clock during a trial (offset after - offset before, s) and what
    is wrong: clocks that could not be read, clocks stepped by more than ``tolerance_s`` plus
    half the two readings' round trips. Nodes stepped alike are named together."""
    steps: dict[str, float] = {}
    problems: list[str] = []
    unread = [f"{n} ({(before.get(n) or {}).get('error') or (after.get(n) or {}).get('error')})"
              for n in sorted(set(before) | set(after))
              if "offset_s" not in (before.get(n) or {}) or "offset_s" not in (after.get(n) or {})]
    if unread:
        problems.append("could not read the clock of " + ", ".join(unread))
    stepped: list[str] = []
    for n in before:
        b, a = before.get(n) or {}, after.get(n) or {}
        if "offset_s" not in b or "offset_s" not in a:
            continue
        steps[n] = round(a["offset_s"] - b["offset_s"], 3)
        if abs(steps[n]) > tolerance_s + (b["rtt_s"] + a["rtt_s"]) / 2:
            stepped.append(n)
    if stepped:
        lo, hi = (f"{x:+.1f}" for x in (min(steps[n] for n in stepped), max(steps[n] for n in stepped)))
        where = f"all {len(stepped)} nodes" if len(stepped) == len(before) > 1 else ", ".join(stepped)
        problems.append(f"clock stepped by {lo if lo == hi else lo + ' to ' + hi} s during the trial on {where} "
                        "(against the controller's clock)")
    return steps, problems


def _last_ping_time(path: Path) -> tuple[float | None, bool]:
    """(time of the last timestamped line of an iputils ``ping -D`` output, whether its closing
    statistics are there: ping prints them when it ends by itself)."""
    last, summary = None, False
    with path.open(errors="replace") as fh:
        for line in fh:
            if line.startswith("["):
                try:
                    last = float(line[1:line.index("]")])
                except ValueError:
                    pass
            elif "packets transmitted" in line:
                summary = True
    return last, summary


def _last_sample_time(path: Path) -> float | None:
    """The ``t`` of the last whole JSON line of a queue sampler's output (nr-qdisc-stats.sh)."""
    last = None
    with path.open(errors="replace") as fh:
        for line in fh:
            try:
                last = float(json.loads(line)["t"])
            except (ValueError, KeyError, TypeError):
                continue
    return last


def check_trial_data(tv: dict, tdir: Path, start: float | None) -> list[str]:
    """What says a trial's fetched data does not cover its schedule (empty: it does).

    ``tv``: the trial's variables (:func:`trial_vars`); ``tdir``: its data, one folder per
    node; ``start``: the common start (epoch s). A flow client exited early when its flows
    file is missing, holds fewer flows than it opened, or a flow ended more than the
    tolerance before its scheduled end (the files are too large to finish: every flow is
    stopped by curl's --max-time). A collector (ping, queue sampler) ended early when its
    last sample is more than the tolerance (+ one interval) before the schedule's end, or
    ping's closing statistics are missing (it was killed). Tolerance: 1 s + 1 % of the schedule.
    """
    problems: list[str] = []
    tol = 1.0 + 0.01 * float(tv["duration_s"])
    if start is None:
        return ["no common start time: no flow of the first phase recorded"]
    end = start + float(tv["duration_s"])
    for client, groups in tv["flows"].items():
        for k, g in enumerate(groups):
            f = tdir / client / ("flows.csv" if k == 0 else f"flows-{k}.csv")
            if not f.is_file():
                problems.append(f"flow client on {client} exited early: no {f.name} (it was stopped before its flows ended)")
                continue
            with f.open(errors="replace") as fh:
                rows = list(csv.DictReader(fh))
            due = start + float(g["start_s"]) + float(g["duration_s"])
            early = []
            for r in rows:
                try:
                    if float(r["end_epoch_s"]) < due - tol:
                        early.append((due - float(r["end_epoch_s"]), r.get("exit_code")))
                except (KeyError, TypeError, ValueError):
                    early.append((float("nan"), r.get("exit_code")))
            if len(rows) < int(g["flows"]):
                problems.append(f"flow client on {client} exited early: {len(rows)} of {g['flows']} flows recorded in {f.name}")
            elif early:
                codes = ", ".join(sorted({str(c) for _, c in early}))
                problems.append(f"flow client on {client} exited early: {len(early)} of {len(rows)} flows ended up to "
                                f"{max(e for e, _ in early):.1f} s before their scheduled end (curl exit {codes})")
    for node, p in tv["ping"].items():
        f = tdir / node / "ping.txt"
        last, summary = _last_ping_time(f) if f.is_file() else (None, False)
        if last is None or last < end - tol - float(p["interval_s"]):
            ago = f"{end - last:.1f} s before the schedule's end" if last is not None else "without a sample"
            problems.append(f"ping collector on {node} ended early: last sample {ago}")
        elif not summary:
            problems.append(f"ping collector on {node} was killed (no closing statistics in ping.txt)")
    for node in tv["qdisc_stats"]:
        f = tdir / node / "qdisc.jsonl"
        last = _last_sample_time(f) if f.is_file() else None
        if last is None or last < end - tol:
            ago = f"{end - last:.1f} s before the schedule's end" if last is not None else "without a sample"
            problems.append(f"queue sampler on {node} ended early: last sample {ago}")
    for node, items in tv.get("iperf3", {}).items():
        for it in items:
            f = tdir / node / f"iperf3-{it['id']}.json"
            try:
                report = json.loads(f.read_text(errors="replace"))
            except (OSError, ValueError):
                problems.append(f"iperf3 client {it['id']} on {node} left no complete report ({f.name}): it was stopped early")
                continue
            if report.get("error"):
                problems.append(f"iperf3 client {it['id']} on {node} failed: {str(report['error'])[:200]}")
    return problems
