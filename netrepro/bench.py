"""``python -m netrepro.bench [experiment] [--run DIR]``: the figures of a finished run.

Prints, from run.json, timings.json (written by ``netrepro reproduce``) and raw/:

- wall time of the whole reproduction and where it went (micro-VM boot and site build,
  provisioning, trials, analysis, teardown);
- the sum of the trials' schedules (base RTT + phases) and the orchestration overhead
  ``(wall - sum of trial durations) / sum of trial durations``;
- phase-start skew per trial and phase (ms) and its maximum;
- the share of ping samples recorded: replies in ping.txt / (schedule / interval) per client;
- how busy the bottleneck node's CPU was during each trial (from its /proc/stat snapshots).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from netrepro.spec import REPO_ROOT

REPLY = re.compile(r"^\[\d+\.\d+\] \d+ bytes from .*time=")


def ping_share(run_dir: Path, run: dict) -> dict[str, float]:
    """trial/client -> replies recorded / samples expected (duration / interval)."""
    spec = run["spec"]
    interval = next((c["interval_s"] for c in spec["collectors"] if c["kind"] == "ping"), 0.1)
    out = {}
    for t in run["trials"]:
        expected = t["duration_s"] / interval
        for p in sorted((run_dir / "raw" / t["id"]).glob("*/ping.txt")):
            n = sum(1 for line in p.read_text().splitlines() if REPLY.match(line))
            out[f"{t['id']}/{p.parent.name}"] = n / expected if expected else float("nan")
    return out


def figures(run_dir: Path) -> dict:
    """The figures above as a dict (also what ``--json`` prints)."""
    run = json.loads((run_dir / "run.json").read_text())
    timings = {}
    if (run_dir / "timings.json").is_file():
        timings = json.loads((run_dir / "timings.json").read_text())
    sched = sum(t["duration_s"] + t.get("base_rtt_s", 0) for t in run["trials"])
    wall_trials = run.get("wall_s") or sum(t.get("wall_s", 0) for t in run["trials"])
    wall_total = timings.get("total_s", wall_trials)
    # recomputed from the raw flows.csv, so runs recorded by older versions are measured alike
    from netrepro.controller import phase_start_skew
    from netrepro.spec import Spec
    spec = Spec.from_data(run["spec"])
    per_trial = {t["id"]: phase_start_skew(spec, run["time_scale"], run_dir / "raw" / t["id"], t["start_epoch_s"])
                 for t in run["trials"] if t.get("start_epoch_s")}
    skews = {f"{tid}/{ph}": v["skew_ms"] for tid, phs in per_trial.items() for ph, v in phs.items()}
    lags = {f"{tid}/{ph}": v["lag_ms"] for tid, phs in per_trial.items() for ph, v in phs.items()}
    shares = ping_share(run_dir, run)
    from netrepro.controller import cpu_busy
    bn = run["spec"]["bottleneck"]["node"]
    busy = {}
    for t in run["trials"]:
        d = run_dir / "raw" / t["id"] / bn
        try:
            busy[t["id"]] = cpu_busy(json.loads((d / "meta-before.json").read_text()),
                                     json.loads((d / "meta-after.json").read_text()))
        except (OSError, ValueError):
            busy[t["id"]] = None
    site_t = run.get("timings_s") or {}
    return {
        "run": str(run_dir), "site": run.get("site"), "mode": run.get("mode"), "time_scale": run.get("time_scale"),
        "wall_total_s": wall_total, "wall_trials_s": wall_trials, "schedule_sum_s": sched,
        "overhead_total": (wall_total - sched) / sched if sched else None,
        "overhead_trials": (wall_trials - sched) / sched if sched else None,
        "breakdown_s": {"micro-VM boot + site build": (run.get("site_status") or {}).get("vm_boot_s"),
                        "up (incl. boot, SSH ready)": timings.get("up_s", site_t.get("up")),
                        "provision": timings.get("provision_s", site_t.get("provision")),
                        "trials": wall_trials, "analysis": timings.get("analyze_s"), "down": timings.get("down_s")},
        "trial_wall_s": {t["id"]: t.get("wall_s") for t in run["trials"]},
        "phase_start_skew_ms": skews, "max_phase_start_skew_ms": max(map(abs, skews.values())) if skews else None,
        "max_phase_start_lag_ms": max(lags.values()) if lags else None,
        "bottleneck_cpu_busy": busy,
        "ping_share": shares, "min_ping_share": min(shares.values()) if shares else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="netrepro.bench", description=__doc__.splitlines()[0])
    ap.add_argument("experiment", nargs="?", default="pie-vs-red")
    ap.add_argument("--run", help="run folder (default: results/<experiment>/latest)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    a = ap.parse_args(argv)
    run_dir = Path(a.run) if a.run else REPO_ROOT / "results" / a.experiment / "latest"
    if not (run_dir / "run.json").is_file():
        print(f"netrepro.bench: {run_dir / 'run.json'}: no such file; expected a finished run folder", file=sys.stderr)
        return 2
    f = figures(run_dir.resolve())
    if a.json:
        print(json.dumps(f, indent=1))
        return 0
    print(f"run {f['run']} (site {f['site']}, mode {f['mode']}, TIME_SCALE {f['time_scale']})")
    print(f"wall time: {f['wall_total_s']:.0f} s in all; trials {f['wall_trials_s']:.0f} s for {f['schedule_sum_s']:.0f} s of schedule")
    if f["overhead_total"] is not None:
        print(f"orchestration overhead (wall - schedule) / schedule: {f['overhead_total']:.2f} overall, {f['overhead_trials']:.2f} within the trials step")
    print("where the time goes (s): " + ", ".join(f"{k} {v:.0f}" for k, v in f["breakdown_s"].items() if v is not None))
    print("trial wall times (s): " + ", ".join(f"{k} {v:.0f}" for k, v in f["trial_wall_s"].items() if v is not None))
    if any(v is not None for v in f["bottleneck_cpu_busy"].values()):
        print("bottleneck node CPU busy during each trial (all nodes' in the micro-VM): "
              + ", ".join(f"{k} {v:.0%}" for k, v in f["bottleneck_cpu_busy"].items() if v is not None))
    if f["max_phase_start_skew_ms"] is not None:
        print(f"phase-start skew across clients: max |skew| {f['max_phase_start_skew_ms']:.0f} ms "
              f"(each phase's lag minus the first phase's; largest lag behind the schedule {f['max_phase_start_lag_ms']:.0f} ms)")
        print("  " + ", ".join(f"{k} {v:.0f}" for k, v in f["phase_start_skew_ms"].items()))
    if f["min_ping_share"] is not None:
        print(f"ping samples recorded: min {f['min_ping_share']:.1%} of expected; "
              + ", ".join(f"{k} {v:.1%}" for k, v in f["ping_share"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
