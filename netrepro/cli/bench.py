"""``python -m netrepro.cli.bench [experiment] [--run DIR] [--json] [--partial]``: the figures of a finished run.

Prints, from run.json, timings.json (written by ``netrepro reproduce``) and raw/:

- wall time of the whole reproduction and where it went (micro-VM boot and site build,
  provisioning, trials, analysis, teardown), and each trial's, step by step (arm, release,
  lead, schedule, finish, fetch, keep: :data:`netrepro.runner.trial.TRIAL_STEPS`) with the
  controller's load average, as the runner timed them;
- the sum of the trials' schedules (base RTT + phases) and the orchestration overhead
  ``(wall - sum of trial durations) / sum of trial durations``;
- the substrate as the run's site describes what it recorded when it was reserved (run.json's
  ``site_status``, :meth:`netrepro.sites.base.Site.describe_status`: the local site's forwarding
  capacity, one iperf3 flow through a router namespace, offloads off);
- the health checks of each trial's substrate (:func:`analysis.health.trial_health`, the
  same the analysis judges the verdict by): CPU busy of the nodes' machine, ping samples
  received, flow-start lag and skew per phase, the collectors' sampling, queueing delay
  beyond the buffer's drain time, the controller machine's load and CPU busy; each against
  the experiment file's ``health:`` thresholds.

Like the analysis, it reads the run as the analysis does (netrepro.runfolder.reading.read_run: a run
recorded with a schema_version 1 file is measured as its schema_version 2 form), checks
run.json's trial records and every raw file against its sha256 sums
(netrepro.runfolder.reading.verified_raw): a damaged run is refused (exit 2, one line naming each missing,
altered or unlisted file) unless ``--partial`` (``make bench PARTIAL=1``), which computes the
figures from what is there and lists the incomplete trials. Nothing is written.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from netrepro.core.errors import RunFolderError
from netrepro.experiment.spec import REPO_ROOT
from netrepro.runfolder.layout import raw_dir, run_json, trial_raw
from netrepro.runfolder.reading import PARTIAL_HINT, check_record, model_run_records, read_run, verified_raw
from netrepro.runfolder.record import read_timings
from netrepro.sites import SITES, Site, site_class


def _num(x) -> float | None:
    """A finite JSON number as float, else None (run.json and timings.json fields)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        return None
    return float(x)


def _timings(run_dir: Path, partial: bool) -> tuple[dict, list[str]]:
    """timings.json (step -> seconds: :func:`netrepro.runfolder.record.read_timings`) if there
    is one; a junk one is refused unless partial."""
    try:
        return read_timings(run_dir), []
    except RunFolderError as exc:
        if not partial:
            raise RunFolderError(exc.path, f"{exc.problem}; {PARTIAL_HINT}") from None
    return {}, ["timings.json: not a JSON object of step -> seconds; ignored"]


def figures(run_dir: Path, partial: bool = False) -> dict:
    """The figures above as a dict (also what ``--json`` prints).

    Args:
        run_dir: the run folder.
        partial: accept raw files that differ from run.json's record (figures from what is
            there) and trial records without their start (left out, named in ``notes``:
            :func:`netrepro.runfolder.reading.model_run_records`).
    Raises:
        analysis.RunFolderError: run.json missing or malformed, raw files damaged (unless
            partial), timings.json junk (unless partial); one line naming the file and field.
        SpecError: the spec in run.json does not validate.
    """
    from analysis.health import trial_health

    rdir, data, spec = read_run(run_dir)
    data, left_out = model_run_records(run_json(rdir), data, partial)
    check = verified_raw(rdir, data, partial)
    run = check_record(run_json(rdir), data)
    time_scale = run.time_scale
    # the trials as run.json records them (a repeated run's or a sweep's instances each)
    records = {t.id: t for t in run.trials}
    ran, raw_summary = list(records), check.summary()
    incomplete = {t: why for t, why in check.by_trial().items() if t in records}
    sched = sum((r.duration_s or spec.duration_s * time_scale) + (r.base_rtt_s or 0) for r in records.values())
    timings, notes = _timings(rdir, partial)
    wall_trials = run.wall_s or sum(records[t].wall_s or 0 for t in ran)
    wall_total = _num(timings.get("total_s")) or wall_trials
    # recomputed from raw/ and run.json, so runs recorded by older versions are measured alike
    k = run.rate_scale_k
    scaled = spec if k == 1 else spec.at_rate_scale(k)  # the rates as run (shaper_rate_off reads them)
    health = {t: trial_health(scaled, records[t].to_json(), trial_raw(rdir, t), time_scale) for t in ran}
    fidelity = _fidelity(scaled, {t: r.to_json() for t, r in records.items()}, rdir, time_scale)
    site_t = run.timings_s
    return {
        "run": str(run_dir), "site": run.site, "mode": run.mode, "time_scale": time_scale,
        "rate_scale": None if run.rate_scale is None else {"k": run.rate_scale.k, "why": run.rate_scale.why},
        "wall_total_s": wall_total, "wall_trials_s": wall_trials, "schedule_sum_s": sched,
        "overhead_total": (wall_total - sched) / sched if sched else None,
        "overhead_trials": (wall_trials - sched) / sched if sched else None,
        "breakdown_s": {"micro-VM boot + site build": _num(run.site_status.get("vm_boot_s")),
                        "up (incl. boot, SSH ready)": _num(timings.get("up_s", site_t.get("up"))),
                        "provision": _num(timings.get("provision_s", site_t.get("provision"))),
                        "trials": wall_trials, "analysis": _num(timings.get("analyze_s")),
                        "down": _num(timings.get("down_s"))},
        "trial_wall_s": {t: records[t].wall_s for t in ran},
        # each trial's steps (netrepro.runner.trial.TRIAL_STEPS), where the runner timed them
        "trial_steps_s": {t: {k: _num(v) for k, v in records[t].steps_s.items()} or None for t in ran},
        "trial_schedule_s": {t: records[t].duration_s or spec.duration_s * time_scale for t in ran},
        "trial_base_rtt_s": {t: records[t].base_rtt_s or 0.0 for t in ran},
        "controller_load_before": {t: (records[t].controller_loadavg.get("before") or [None])[0] for t in ran},
        # the site's forwarding test at reserve time, if it made one, as run.json recorded it
        "capacity": run.site_status.get("capacity"),
        "substrate": describe_substrate(run.site, dict(run.site_status)),
        "health": health, "health_passed": all(h["passed"] for h in health.values()),
        "link_fidelity": fidelity,
        "raw_check": raw_summary,
        "incomplete_trials": incomplete,
        "notes": left_out + notes,
    }


def describe_substrate(site_name, status) -> str:
    """One line on the substrate of a run made on ``site_name`` (run.json ``site``) whose site
    recorded ``status`` (run.json ``site_status``, any JSON value), as that site describes it
    (:meth:`netrepro.sites.base.Site.describe_status`); a run of a site netrepro does not know
    (or without one) is described as the Site interface's default does."""
    cls = site_class(site_name) if isinstance(site_name, str) and site_name in SITES else Site
    return cls.describe_status(status if isinstance(status, dict) else {})


def _fidelity(spec, records: dict[str, dict], rdir: Path, time_scale: float) -> dict:
    """Trial (raw folder) -> sampled, shaped port -> :func:`analysis.fidelity.summary` of its
    busy windows, with ``rate_mbit``; trials without a start or a readable qdisc.jsonl are
    left out (their health check says why)."""
    from analysis.fidelity import run_busy_intervals, summary
    from analysis.health import shaper_rate_tolerance

    tol = shaper_rate_tolerance(spec.model)
    return {rid: {port: {"rate_mbit": rate, "tolerance": tol, **summary(iv, tol)} for port, (rate, iv) in ports.items()}
            for rid, ports in run_busy_intervals(spec.model, records, raw_dir(rdir), time_scale).items()}


def print_fidelity(fidelity: dict) -> None:
    """The link invariant of :func:`_fidelity`, one line per trial and port."""
    rows = [(t, p, v) for t, ports in fidelity.items() for p, v in ports.items()]
    if not rows:
        return
    print("link fidelity (busy windows of each shaped, sampled port; deviation = sending rate / shaped "
          "rate - 1; share of windows with |deviation| >= 1 %, 5 %, 10 %, 20 %):")
    for t, p, v in rows:
        if not v["intervals"]:
            print(f"  {t} {p} ({v['rate_mbit']:g} Mbit/s): no busy window")
            continue
        print(f"  {t} {p} ({v['rate_mbit']:g} Mbit/s): {v['intervals']} windows ({v['busy_s']:.0f} s), median "
              f"{v['median_deviation']:+.1%}, 99th percentile of |deviation| {v['p99_abs_deviation']:.1%}; CCDF "
              + " / ".join(f"{x:.1%}" for x in v["ccdf"].values())
              + f"; off by more than {v['tolerance']:.0%}: {v['off_share']:.1%}")


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        self.exit(2, f"netrepro.cli.bench: {message}\n")


def main(argv: list[str] | None = None) -> int:

    ap = _Parser(prog="netrepro.cli.bench", description=__doc__.splitlines()[0])
    ap.add_argument("experiment", nargs="?", help="the experiment whose latest run to measure (make passes EXPERIMENT)")
    ap.add_argument("--run", help="run folder (default: results/<experiment>/latest)")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON")
    ap.add_argument("--partial", action="store_true",
                    help="measure a run whose raw files differ from run.json's record (default: refuse it)")
    a = ap.parse_args(argv)
    if not a.experiment and not a.run:
        ap.error("expected an experiment (its latest run is measured) or --run RUN_FOLDER")
    run_dir = Path(a.run) if a.run else REPO_ROOT / "results" / a.experiment / "latest"
    try:
        f = figures(run_dir.resolve(), a.partial)
    except ValueError as exc:  # RunFolderError, SpecError: bad input, as netrepro's main (netrepro.cli.commands) says it
        print(f"netrepro.cli.bench: {exc}", file=sys.stderr)
        return 2
    if a.json:
        print(json.dumps(f, indent=1))
        return 0
    print(f"run {f['run']} (site {f['site']}, mode {f['mode']}, TIME_SCALE {f['time_scale']})")
    print(f"raw files: {f['raw_check']}")
    for tid, why in f["incomplete_trials"].items():
        print(f"incomplete trial {tid}: {', '.join(why)}")
    for n in f["notes"]:
        print(f"note: {n}")
    print(f"wall time: {f['wall_total_s']:.0f} s in all; trials {f['wall_trials_s']:.0f} s for {f['schedule_sum_s']:.0f} s of schedule")
    if f["overhead_total"] is not None:
        print(f"orchestration overhead (wall - schedule) / schedule: {f['overhead_total']:.2f} overall, {f['overhead_trials']:.2f} within the trials step")
    print("where the time goes (s): " + ", ".join(f"{k} {v:.0f}" for k, v in f["breakdown_s"].items() if v is not None))
    print("trial wall times (s): " + ", ".join(f"{k} {v:.0f}" for k, v in f["trial_wall_s"].items() if v is not None))
    print_steps(f)
    print(f"substrate: {f['substrate']}")
    if isinstance(f.get("rate_scale"), dict):
        print(f"rate scale: {f['rate_scale'].get('k')} ({f['rate_scale'].get('why')})")
    print_health(f["health"])
    print_fidelity(f["link_fidelity"])
    return 0


def print_steps(f: dict) -> None:
    """Where each trial's time went, step by step (:data:`netrepro.runner.trial.TRIAL_STEPS`,
    run.json ``steps_s``), in seconds, with the overhead (every step but the schedule, less the
    base RTT measured while arming: ``base_rtt_s``) as a share of the schedule with its base
    RTT, and the controller's 1-minute load average before the trial; then the steps summed
    over the trials. Trials recorded before the runner timed its steps are named as such."""
    from netrepro.runner.trial import TRIAL_STEPS

    timed = {t: st for t, st in f["trial_steps_s"].items() if st}
    if not timed:
        print("trial steps: not recorded (the run was made before the runner timed them)")
        return
    width = max(len(t) for t in timed)
    print("trial steps (s; arm includes the base RTT; overhead = every step but the schedule and the base RTT, "
          "as a share of both; load = the controller's 1-minute load average before the trial):")
    print(f"  {'trial':<{width}} " + " ".join(f"{k:>8}" for k in TRIAL_STEPS) + f" {'overhead':>14} {'load':>5}")

    def row(label: str, st: dict, rtt: float, sched: float, load=None) -> None:
        over = sum(st.get(k) or 0 for k in TRIAL_STEPS if k != "schedule") - rtt
        share = f" ({over / (sched + rtt):4.0%})" if sched + rtt else " " * 7
        print(f"  {label:<{width}} " + " ".join(f"{st.get(k) or 0:8.1f}" for k in TRIAL_STEPS) + f" {over:7.1f}{share}"
              + (f" {load:5.2f}" if isinstance(load, (int, float)) else ""))

    for t, st in timed.items():
        row(t, st, f["trial_base_rtt_s"].get(t) or 0, f["trial_schedule_s"].get(t) or 0,
            f["controller_load_before"].get(t))
    row("all", {k: sum(st.get(k) or 0 for st in timed.values()) for k in TRIAL_STEPS},
        sum(f["trial_base_rtt_s"].get(t) or 0 for t in timed), sum(f["trial_schedule_s"].get(t) or 0 for t in timed))
    missing = [t for t, st in f["trial_steps_s"].items() if not st]
    if missing:
        print(f"  (not recorded for {', '.join(missing)})")


def print_health(health: dict[str, dict]) -> None:
    """The health checks (trial id -> :func:`analysis.health.trial_health`), one line per
    trial with every check against its threshold, then the detail of each failed check."""
    from analysis.health import describe

    if not health:
        return
    failed = sum(not h["passed"] for h in health.values())
    judged = any(c["passed"] is not None for h in health.values() for c in h["checks"])
    if not judged:
        print("health of the substrate: measured, not judged (the experiment file as run has no `health:` thresholds)")
    else:
        print("health of the substrate (thresholds: the experiment file's `health:`): "
              + (f"{failed} of {len(health)} trials FAILED a check" if failed else f"all {len(health)} trials pass"))
    for tid, h in health.items():
        word = ("pass" if h["passed"] else "FAILED") if judged else "measured"
        print(f"  {tid} {word}: " + ", ".join(describe(c) for c in h["checks"]))
        for c in h["checks"]:
            if c["passed"] is False:
                print(f"    {c['id']}: {c['detail']}")


if __name__ == "__main__":
    sys.exit(main())
