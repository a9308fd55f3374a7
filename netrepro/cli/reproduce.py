"""``netrepro reproduce`` (up, provision, run, analyze, down on one site) and ``netrepro quick``
(reproduce on the local site, then on the ns3 site at the same time and rate scales, both
verdicts side by side)."""

from __future__ import annotations

import time
from pathlib import Path

from netrepro.cli.options import check_environment, given_options, run_time_scale, schedule_args
from netrepro.cli.step_commands import judge_trial, print_dry_run, print_verdict
from netrepro.model import time_scale_note
from netrepro.runner import steps
from netrepro.runner.console import StepIncomplete
from netrepro.runner.instances import plan_run
from netrepro.runner.run import run
from netrepro.runfolder.layout import REPORT
from netrepro.runfolder.reading import read_run_record
from netrepro.runfolder.record import write_timings
from netrepro.experiment.spec import load_spec


def cmd_reproduce(args) -> int:
    """up -> provision -> run -> analyze -> down; the site is released even on failure/Ctrl-C."""
    spec = load_spec(args.experiment)
    check_environment(args, spec)
    if args.dry_run:
        return print_dry_run(args, spec)
    resume = Path(args.resume) if args.resume else None
    run_dir, verdict, timings = _reproduce(spec, args.site, run_time_scale(args), given_options(args),
                                           schedule_args(args), keep=args.keep, resume=resume,
                                           rate_scale=args.rate_scale, parallel=args.parallel)
    print(f"[reproduce] wall time {timings['total_s']:.0f} s: " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items() if k != "total_s"))
    print_verdict(verdict, run_dir)  # the last line: the verdict and the report's path
    return 0


def _reproduce(spec, site: str, time_scale: float | None, opts: dict, sched: dict, keep: bool = False,
               resume: Path | None = None, rate_scale: str | None = None,
               parallel: int = 1) -> tuple[Path, dict, dict]:
    """One reproduction on ``site``: up, provision, run, analyze, down (unless ``keep``; the
    site is released even on failure or Ctrl-C), on ``parallel`` reservations at once
    (``--parallel``; each released at the end). ``sched``: :func:`schedule_args`'s;
    ``rate_scale``: ``--rate-scale`` (None: $RATE_SCALE or the site's choice).
    Returns (the run folder, its verdict, its ``timings.json``: seconds per step and
    ``total_s``). Raises what the steps raise (StepIncomplete saying whether the site was
    released)."""
    # The run's arguments as run() checks them (--jobs, --resume, --repeat, the sweep's points),
    # before anything is up (reads only).
    plan_run(spec, site, time_scale, opts, resume=resume, repeat=sched["repeat"], shuffle=sched["shuffle"],
             seed=sched["seed"], sweep=sched["sweep"], jobs=sched["jobs"])
    steps.preflight_reservations(spec, site, opts, parallel)   # bad files/credentials: nothing written yet
    t0 = time.time()
    timings = {}
    try:
        t = time.time()
        steps.up_reservations(spec, site, opts, parallel)
        timings["up_s"] = round(time.time() - t, 1)
        t = time.time()
        steps.provision_reservations(spec, site, opts, rate_scale=rate_scale, parallel=parallel)
        timings["provision_s"] = round(time.time() - t, 1)
        t = time.time()
        run_dir = run(spec, site, time_scale, opts, resume=resume, command="reproduce",
                      repeat=sched["repeat"], shuffle=sched["shuffle"], seed=sched["seed"],
                      sweep=sched["sweep"], judge=judge_trial, jobs=sched["jobs"], rate_scale=rate_scale,
                      parallel=parallel)
        timings["trials_s"] = round(time.time() - t, 1)
        t = time.time()
        from analysis import analyze_run
        verdict = analyze_run(run_dir)
        timings["analyze_s"] = round(time.time() - t, 1)
    except StepIncomplete as exc:
        if keep:
            raise
        # The site is released below: say so instead of "the site is still up".
        hint = "the site was released" + (f"; {exc.hint}" if exc.run_dir else "")
        raise StepIncomplete(exc.account, hint=hint, exit_code=exc.exit_code, run_dir=exc.run_dir) from None
    finally:
        if not keep:
            t = time.time()
            steps.down(spec, site, opts)
            timings["down_s"] = round(time.time() - t, 1)
        else:   # --keep: what stays reserved, and how to release it
            for k in range(1, parallel + 1):
                if held := steps.open_site(spec, site, opts, k).held():
                    print(held)
    timings["total_s"] = round(time.time() - t0, 1)
    write_timings(run_dir, timings)  # the run folder's owner writes it, atomically: never through a link
    return run_dir, verdict, timings


#: The sites ``netrepro quick`` reproduces on, in order: the emulation at the quick time scale
#: (:func:`quick_time_scale`), then the simulation of the same experiment as run, at the same
#: time scale and the rate scale the emulation chose (run.json ``rate_scale.k``), so that the
#: two verdicts judge one experiment.
QUICK_SITES = ("local", "ns3")


def quick_time_scale(spec) -> tuple[float, str]:
    """(TIME_SCALE, why) of the emulated run of ``netrepro quick``: the experiment's
    ``time_scale.quick``, else its ``time_scale.min``, else 1 (the file declares no shorter
    meaningful time scale)."""
    ts = spec.model.time_scale
    if ts.get("quick"):
        return float(ts["quick"]), "the experiment's time_scale.quick"
    if ts.get("min"):
        return float(ts["min"]), "the experiment's time_scale.min"
    return 1.0, "full length: the experiment declares no time_scale.min"


def quick_table(results: list[tuple[str, float, Path, dict, dict]]) -> list[str]:
    """The verdicts of ``netrepro quick`` side by side, as lines: a header naming each run
    (site, time scale, wall time), one line per claim with its status in each run, then the
    verdicts and the run folders. ``results``: (site, time scale, run folder, verdict,
    timings) per run."""
    heads = [f"{site} (TIME_SCALE {ts:g}, {tm['total_s']:.0f} s)" for site, ts, _, _, tm in results]
    claims = list(dict.fromkeys(c["id"] for *_, v, _ in results for c in v["claims"]))
    status = [{c["id"]: c["status"] for c in v["claims"]} for *_, v, _ in results]
    w0 = max(len("claim"), *(len(c) for c in claims))
    ws = [max(len(h), 14) for h in heads]

    def row(first: str, cells: list[str]) -> str:
        return "  " + first.ljust(w0) + "  " + "  ".join(c.ljust(w) for c, w in zip(cells, ws))
    lines = [row("claim", heads)]
    lines += [row(c, [st.get(c, "-") for st in status]) for c in claims]
    lines.append(row("verdict", [v["verdict"] for *_, v, _ in results]))
    lines += [f"  {site}: {run_dir / REPORT}" for site, _, run_dir, _, _ in results]
    return lines


def cmd_quick(args) -> int:
    """netrepro quick EXPERIMENT: reproduce on the local site at :func:`quick_time_scale`, then on
    the ns3 site at the same time scale and rate scale (:data:`QUICK_SITES`), then print both
    verdicts side by side."""
    spec = load_spec(args.experiment)
    check_environment(args, spec)
    ts_local, why = quick_time_scale(spec)
    if getattr(args, "time_scale_given", False):
        ts_local, why = args.time_scale, "--time-scale"
    print(f"[quick] {spec.name}: the local site at TIME_SCALE {ts_local:g} ({why}), then the ns3 site at the same "
          "time scale and rate scale", flush=True)
    note = time_scale_note(spec.model, ts_local)
    if note:
        print(f"[quick] {note}", flush=True)
    sched = {"repeat": None, "shuffle": True, "seed": None, "sweep": False, "jobs": None}
    results, k = [], None
    for site in QUICK_SITES:
        run_dir, verdict, timings = _reproduce(spec, site, ts_local, {}, sched,
                                               rate_scale=None if k is None else f"{k:g}")
        results.append((site, ts_local, run_dir, verdict, timings))
        k = read_run_record(run_dir).rate_scale_k
    print("[quick] verdicts side by side:")
    for line in quick_table(results):
        print(line)
    return 0
