"""Command line: ``netrepro <command> <experiment> [--site SITE] ...``.

The Makefile's targets that make, use or release a site or analyze a run do their work
through these commands, so all of that is usable without make (docs/reference.md lists what
each target runs).

Errors in the user's input or environment print one line (``netrepro: ...``) and exit 2.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import os
import signal
import sys
import time
from pathlib import Path
from typing import Callable

from netrepro.experiment import sweep as sweeps
from netrepro.runner.ansible import PlaybookError
from netrepro.runner.clean import clean
from netrepro import __version__
from netrepro.cli.publish import add_export_command
from netrepro.cli.site_commands import inventory_from_manifest, plan_text, write_rspec
from netrepro.model import rate_scale_option, time_scale_note
from netrepro.runner import playbooks, steps
from netrepro.runfolder.atomic import write_text
from netrepro.runfolder.layout import TIMINGS, latest, run_json
from netrepro.runner.barrier import lead_from_env
from netrepro.runner.console import StepIncomplete
from netrepro.runner.instances import JOBS_MAX, checked_jobs, dry_run
from netrepro.runner.resume import load_resume
from netrepro.runner.run import run
from netrepro.runner.trialvars import rate_scale_request
from netrepro.runner.schedule import REPEAT_MAX
from netrepro.runner.setup import setup
from netrepro.sites import DEFAULT_SITE, SITES, site_class, site_options
from netrepro.sites.base import SiteError
from netrepro.experiment.spec import Spec, SpecError, check_time_scale, load_spec


def _options(args) -> dict:
    """The site options of ``args`` (environment, then ``--option``; HOURS only for a site with
    a lease: netrepro.sites.DECLARED_OPTION_ENV); each site checks them against its declared
    options when it is made (unknown keys and bad values: one line)."""
    site = getattr(args, "site", None)
    return site_options(getattr(args, "option", None), os.environ, site_class(site).OPTIONS if site else ())


def _time_scale(value: str) -> float:
    """``--time-scale`` / ``$TIME_SCALE``: netrepro.experiment.spec.check_time_scale's range (0.001 .. 100)."""
    try:
        return check_time_scale(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _hours(value: str) -> float:
    """``--hours`` / ``$HOURS``: the lease ends this many hours from now (> 0, at most a year)."""
    try:
        h = float(str(value).strip())
    except ValueError:
        h = math.nan
    if not 0 < h <= 24 * 366:
        raise argparse.ArgumentTypeError(f"HOURS: {value!r}: expected a number of hours above 0 (e.g. 6)")
    return h


def _sweep_env(value: str) -> bool:
    """``$SWEEP``: "1" runs the sweep, "" or "0" does not (``--sweep`` wins)."""
    if value.strip() in ("", "0", "1"):
        return value.strip() == "1"
    raise ValueError(f"SWEEP: {value!r}: expected 1 (run the sweep) or 0 or nothing")


def _ansible_timeout() -> None:
    """``$ANSIBLE_TIMEOUT`` (netrepro.runner.ansible.playbook_env passes it on): a whole number of
    seconds, 1 to 3600, when set. Raises ValueError (one line) otherwise."""
    raw = os.environ.get("ANSIBLE_TIMEOUT")
    if raw is None:
        return
    if not (re.fullmatch(r"[0-9]{1,4}", raw.strip()) and 1 <= int(raw) <= 3600):
        raise ValueError(f"ANSIBLE_TIMEOUT: {raw!r}: expected Ansible's connection timeout, a whole number of "
                         f"seconds from 1 to 3600")


def _check_environment(args, spec) -> None:
    """The environment variables ``args.command`` reads, checked before anything is built or
    contacted: ANSIBLE_TIMEOUT (provision, run, reproduce: the commands that run playbooks), --rate-scale or else
    RATE_SCALE against the experiment (provision, run and reproduce, dry runs too:
    netrepro.model.rate_scale_option, naming the one given),
    NETREPRO_LEAD_S (run, reproduce: netrepro.runner.barrier.lead_from_env). SWEEP is read by
    :func:`_schedule_args`, HOURS and the others by their options' types. Raises ValueError
    naming the variable (one line, exit 2)."""
    cmd = args.command
    if cmd in ("provision", "run", "reproduce", "quick"):
        _ansible_timeout()
        rate_scale_option(spec.model, *rate_scale_request(getattr(args, "rate_scale", None)))
    if cmd in ("run", "reproduce", "quick"):
        lead_from_env()
    if cmd in ("run", "reproduce") and not args.dry_run:  # (a dry run says it after its plan)
        _print_time_scale_note(args, spec, cmd)


def _print_time_scale_note(args, spec, tag: str) -> None:
    """Say before a run (or after a dry run's plan) which claims its TIME_SCALE makes not
    applicable (:func:`netrepro.model.time_scale_note`); the run goes on all the same (a
    smoke test, a test suite), and its verdict says it again."""
    note = time_scale_note(spec.model, _run_time_scale(args) or 1.0)
    if note:
        print(f"[{tag}] {note}", flush=True)


def cmd_validate(args) -> int:
    """Validate the file, and refuse what the default site would refuse of it before reserving
    anything (:meth:`netrepro.sites.base.Site.refusal`)."""
    spec = load_spec(args.experiment)
    m = spec.model
    problem = site_class(DEFAULT_SITE).refusal(spec)
    if problem:
        raise SpecError(spec.path, *problem)
    print(f"{spec.path}: valid (schema_version {m.schema_version}: {len(m.nodes)} nodes, {len(m.trials)} trials, "
          f"{len(m.phases)} phases)")
    return 0


def cmd_setup(args) -> int:
    """netrepro setup: what ``--site`` needs (:func:`netrepro.runner.setup.setup`, the site's setup
    hook, with the site options given: the local site reads ``mode``); every key given with
    ``--option`` must be the site's (make passes OPTIONS to setup too).
    Raises SiteError (one line) for a key the site does not declare."""
    given = getattr(args, "option", None) or []
    opts = site_options(given, {})
    known = site_class(args.site).OPTIONS
    for key in opts:
        if key not in known:
            raise SiteError(f"site {args.site}: unknown option {key!r} (from --option); expected one of the site's "
                            f"options: {', '.join(known) or 'none'}")
    return setup(site=args.site, check_only=args.check, dev=args.dev, options=opts)


def cmd_plan(args) -> int:
    spec = load_spec(args.experiment)
    print(plan_text(spec, args.site, _options(args)))
    return 0


def cmd_rspec(args) -> int:
    spec = load_spec(args.experiment)
    print(f"wrote {write_rspec(spec)}")
    return 0


def cmd_profile(args) -> int:
    """Write a CloudLab repository-based profile of the experiment (netrepro.sites.instageni.rspec.write_profile)."""
    from netrepro.sites.instageni.rspec import write_profile

    spec = load_spec(args.experiment)
    folder = Path(args.output or f"cloudlab-profile-{spec.name}")
    print(f"wrote {write_profile(spec, folder)}/profile.rspec and README.md: push the folder as a git repository "
          "and create a profile from it in the CloudLab portal (docs/sites/cloudlab.md)")
    return 0


def cmd_inventory(args) -> int:
    spec = load_spec(args.experiment)
    sys.stdout.write(inventory_from_manifest(spec, Path(args.manifest), args.user, site=args.site, key_file=args.key))
    return 0


def cmd_up(args) -> int:
    spec, opts = load_spec(args.experiment), _options(args)
    steps.preflight_copies(spec, args.site, opts, args.parallel)   # bad files/credentials: nothing written yet
    for site in steps.up_copies(spec, args.site, opts, args.parallel):
        if held := site.held():   # what stays reserved until `down`, and how to release it
            print(held)
    return 0


def cmd_provision(args) -> int:
    spec = load_spec(args.experiment)
    _check_environment(args, spec)
    steps.provision_copies(spec, args.site, _options(args), rate_scale=args.rate_scale, parallel=args.parallel)
    return 0


def _run_time_scale(args) -> float | None:
    """The time scale to run at: a resumed run keeps its own unless --time-scale is given
    (and then it must match; $TIME_SCALE alone does not count)."""
    if args.resume and not getattr(args, "time_scale_given", False):
        return None
    return args.time_scale


def _repeat(value: str) -> int:
    """REPEAT / --repeat: a whole number of repetitions, 1 to netrepro.runner.schedule.REPEAT_MAX."""
    try:
        n = int(str(value).strip())
    except ValueError:
        n = 0
    if not 1 <= n <= REPEAT_MAX:
        raise argparse.ArgumentTypeError(f"REPEAT: {value!r}: expected a whole number of repetitions from 1 to {REPEAT_MAX}")
    return n


def _seed(value: str) -> int:
    """--seed: the shuffle's seed, a whole number from 0 to 2**32 - 1."""
    try:
        n = int(str(value).strip())
    except ValueError:
        n = -1
    if not 0 <= n < 2 ** 32:
        raise argparse.ArgumentTypeError(f"SEED: {value!r}: expected a whole number from 0 to 4294967295")
    return n


def _jobs(value: str) -> int:
    """--jobs (make's JOBS): how many trial instances run at once, a whole number from 1 to
    netrepro.runner.instances.JOBS_MAX (more than 1 only on a simulating site: checked_jobs)."""
    try:
        n = int(str(value).strip())
    except ValueError:
        n = 0
    if not 1 <= n <= JOBS_MAX:
        raise argparse.ArgumentTypeError(f"JOBS: {value!r}: expected a whole number of trials to run at once "
                                         f"(--jobs N) from 1 to {JOBS_MAX}")
    return n


def _parallel(value: str) -> int:
    """--parallel (make's PARALLEL): how many reservations of the site a campaign holds and runs
    trials on at once, a whole number from 1 to netrepro.runner.steps.PARALLEL_MAX."""
    try:
        n = int(str(value).strip())
    except ValueError:
        n = 0
    if not 1 <= n <= steps.PARALLEL_MAX:
        raise argparse.ArgumentTypeError(f"PARALLEL: {value!r}: expected a whole number of reservations "
                                         f"(--parallel N) from 1 to {steps.PARALLEL_MAX}")
    return n


def _schedule_args(args) -> dict:
    """The repetition options of run/reproduce for netrepro.runner.run.run and
    netrepro.runner.instances.dry_run, and ``jobs`` (--jobs; None: the site's default). A resumed
    run keeps its own repetitions: REPEAT from the environment alone does not count."""
    repeat = args.repeat if not args.resume or getattr(args, "repeat_given", False) else None
    sweep = args.sweep if isinstance(args.sweep, bool) else _sweep_env(args.sweep)
    return {"repeat": repeat, "shuffle": not args.no_shuffle, "seed": args.seed, "sweep": sweep, "jobs": args.jobs}


def _dry_run(args, spec) -> int:
    sched = _schedule_args(args)
    dry_run(spec, args.site, _run_time_scale(args), _options(args), trial_ids=getattr(args, "trial", None),
            repeat=sched["repeat"] or 1, shuffle=sched["shuffle"], seed=sched["seed"],
            resume=Path(args.resume) if args.resume else None, sweep=sched["sweep"], jobs=sched["jobs"],
            parallel=args.parallel)
    _print_time_scale_note(args, spec, "dry-run")
    return 0


def cmd_run(args) -> int:
    spec = load_spec(args.experiment)
    _check_environment(args, spec)
    if args.dry_run:
        return _dry_run(args, spec)
    sched = _schedule_args(args)
    run_dir = run(spec, args.site, _run_time_scale(args), _options(args),
                  trial_ids=args.trial or None, resume=Path(args.resume) if args.resume else None,
                  repeat=sched["repeat"], shuffle=sched["shuffle"], seed=sched["seed"], sweep=sched["sweep"],
                  judge=judge_trial, jobs=sched["jobs"], rate_scale=args.rate_scale, parallel=args.parallel)
    print(f"[run] raw data and run.json in {run_dir}")
    return 0


def judge_trial(spec: Spec, record: dict, trial_dir: Path, time_scale: float) -> tuple[dict, list[str]]:
    """A trial's health as a run judges it when the trial completes: the analysis's judge that
    the command line hands to the runner (the ``judge`` of :func:`netrepro.runner.run.run`,
    :data:`netrepro.runner.trial.TrialJudge`), since the runner imports no analysis. The
    analysis (pandas, numpy) is imported on the first call: most commands never analyse.

    Args:
        spec: the experiment (the point's, in a sweep); record: the trial's record for run.json;
        trial_dir: its raw folder (``raw/<trial>/``); time_scale: the run's TIME_SCALE.
    Returns:
        (:func:`analysis.health.trial_health`'s ``{"passed", "checks"}``, each failed check
        in a line, :func:`analysis.health.describe`).
    Raises:
        nothing: odd data fail a check (:func:`analysis.health.trial_health`).
    """
    from analysis import health
    judged = health.trial_health(spec, record, trial_dir, time_scale)
    return judged, [health.describe(c) for c in judged["checks"] if c["passed"] is False]


def _print_verdict(verdict: dict, run_dir: Path) -> None:
    from analysis.console import LABEL, verdict_line
    for c in verdict["claims"]:
        status = c.get("status") or ("holds" if c["holds"] else "fails")
        print(f"  [{LABEL.get(status, status.upper())}] {c['id']}: {c.get('reason') or c['evidence']}")
        if c.get("finding") and status == "fails":   # what measurement already found, from the experiment file
            print(f"      as recorded in the experiment file: {c['finding']['text']}")
    said = verdict_line(verdict)  # reproduced, not reproduced, or inconclusive: why
    if said.startswith("inconclusive:"):  # the failed health checks, with their numbers
        print(f"[analyze] {said}")
    print(f"[analyze] verdict: {said.split(':')[0]}; report {run_dir / 'report.md'}")


def cmd_analyze(args) -> int:
    """Check the run's raw files against run.json, analyze, print the verdict (analysis.analyze;
    ``--run`` may name a crate, folder or zip). A run given with ``--run`` must be a run of
    EXPERIMENT (run.json ``experiment``)."""
    spec = load_spec(args.experiment)
    target = Path(args.run) if args.run else latest(spec.name)
    from analysis import analyze
    res = analyze(target.resolve(), partial=args.partial, experiment=spec.name if args.run else None)
    for p in res.problems:
        print(f"[analyze] data problem: {p}")
    _print_verdict(res.verdict, res.out_dir)
    return 0


def cmd_down(args) -> int:
    steps.down(load_spec(args.experiment), args.site, _options(args))
    return 0


def cmd_status(args) -> int:
    """The reservation's status (JSON); with a parallel campaign's other reservations up, each
    one's too, under ``parallel_reservations`` (copy number -> status)."""
    spec, opts = load_spec(args.experiment), _options(args)
    status = steps.open_site(spec, args.site, opts).status()
    copies = steps.copies_on_disk(spec, args.site)
    if copies:
        status["parallel_reservations"] = {str(k): steps.open_site(spec, args.site, opts, k).status() for k in copies}
    print(json.dumps(status, indent=1, default=str))
    return 0


def cmd_renew(args) -> int:
    """Renew the reservation's lease, and every parallel reservation's, to end ``--hours`` from
    now; a lease that already ends later is left as it is, said in one line (Site.renew)."""
    spec, opts = load_spec(args.experiment), _options(args)
    for k in [1, *steps.copies_on_disk(spec, args.site)]:
        steps.open_site(spec, args.site, opts, k).renew(args.hours)
    return 0


def cmd_clean(args) -> int:
    """Tear down local sites and remove what netrepro wrote into the state folders it made, and
    those folders, keeping any live testbed reservation; anything in the state root netrepro did
    not make, or in its folders that it did not write, or a folder whose state.json is unreadable,
    is left alone and named (then one line on stderr for each kind and exit 2)."""
    res = clean(steps.STATE_ROOT, steps.INVENTORY_DIR)
    if res.unreadable:
        print(f"netrepro: {res.unreadable_line()}", file=sys.stderr)
    if res.kept:
        print(f"[clean] {len(res.kept)} state folder(s) kept: they hold reservations (see above)")
    if res.foreign:
        n = len(res.foreign)
        print(f"netrepro: {n} entr{'y' if n == 1 else 'ies'} of netrepro's state folders kept (listed above): netrepro "
              "did not write them; remove them by hand, then `netrepro clean` removes their folders", file=sys.stderr)
    if res.refused:
        n = len(res.refused)
        print(f"netrepro: {steps.STATE_ROOT} (the state root, NETREPRO_STATE): {n} entr{'y' if n == 1 else 'ies'} "
              "left as they are (listed above); expected only the state folders netrepro made (with their "
              "marker .netrepro-state)", file=sys.stderr)
    return 2 if res.refused or res.foreign or res.unreadable else 0


def cmd_reproduce(args) -> int:
    """up -> provision -> run -> analyze -> down; the site is released even on failure/Ctrl-C."""
    spec = load_spec(args.experiment)
    _check_environment(args, spec)
    if args.dry_run:
        return _dry_run(args, spec)
    resume = Path(args.resume) if args.resume else None
    run_dir, verdict, timings = _reproduce(spec, args.site, _run_time_scale(args), _options(args),
                                           _schedule_args(args), keep=args.keep, resume=resume,
                                           rate_scale=args.rate_scale, parallel=args.parallel)
    print(f"[reproduce] wall time {timings['total_s']:.0f} s: " + ", ".join(f"{k} {v:.0f}" for k, v in timings.items() if k != "total_s"))
    _print_verdict(verdict, run_dir)  # the last line: the verdict and the report's path
    return 0


def _reproduce(spec, site: str, time_scale: float | None, opts: dict, sched: dict, keep: bool = False,
               resume: Path | None = None, rate_scale: str | None = None,
               parallel: int = 1) -> tuple[Path, dict, dict]:
    """One reproduction on ``site``: up, provision, run, analyze, down (unless ``keep``; the
    site is released even on failure or Ctrl-C), on ``parallel`` reservations at once
    (``--parallel``; each released at the end). ``sched``: :func:`_schedule_args`'s;
    ``rate_scale``: ``--rate-scale`` (None: $RATE_SCALE or the site's choice).
    Returns (the run folder, its verdict, its ``timings.json``: seconds per step and
    ``total_s``). Raises what the steps raise (StepIncomplete saying whether the site was
    released)."""
    checked_jobs(site, sched["jobs"])   # --jobs > 1 on a site that does not simulate: before it is up
    steps.preflight_copies(spec, site, opts, parallel)   # bad files/credentials: nothing written yet
    if resume:  # refused before anything is built (reads only)
        load_resume(spec, site, resume, time_scale, None, sched["repeat"])
    elif sched["sweep"]:  # every point checked before anything is built
        sweeps.points(spec)
    t0 = time.time()
    timings = {}
    try:
        t = time.time()
        steps.up_copies(spec, site, opts, parallel)
        timings["up_s"] = round(time.time() - t, 1)
        t = time.time()
        steps.provision_copies(spec, site, opts, rate_scale=rate_scale, parallel=parallel)
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
    write_text(run_dir / TIMINGS, json.dumps(timings, indent=1) + "\n")  # atomic: never through a link
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
    lines += [f"  {site}: {run_dir / 'report.md'}" for site, _, run_dir, _, _ in results]
    return lines


def cmd_quick(args) -> int:
    """netrepro quick EXPERIMENT: reproduce on the local site at :func:`quick_time_scale`, then on
    the ns3 site at the same time scale and rate scale (:data:`QUICK_SITES`), then print both
    verdicts side by side."""
    spec = load_spec(args.experiment)
    _check_environment(args, spec)
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
        k = float((json.loads(run_json(run_dir).read_text()).get("rate_scale") or {}).get("k", 1))
    print("[quick] verdicts side by side:")
    for line in quick_table(results):
        print(line)
    return 0


def cmd_compare(args) -> int:
    """netrepro compare RUN RUN ...: analysis.compare; prints where the comparison is (and its
    figures against the rate scale and the time scale when the runs have two or more of it)."""
    from analysis.compare import compare
    from analysis.scales import SCALES
    out = compare([Path(r) for r in args.runs], Path(args.out) if args.out else None)
    figs = [(sc.words, out / "figures" / f"{sc.file}.png") for sc in SCALES.values()]
    print(f"[compare] {len(args.runs)} runs: report {out / 'report.md'}, figure {out / 'figures' / 'compare.png'}"
          + "".join(f", against the {words} {fig}" for words, fig in figs if fig.is_file()))
    return 0


def cmd_migrate(args) -> int:
    """netrepro migrate FILE [-o OUT]: the schema_version 2 YAML of a schema_version 1 file
    (netrepro.experiment.migrate), printed, or written to OUT, which must not exist yet."""
    from netrepro.experiment.migrate import migrate
    text = migrate(args.experiment)
    if not args.output:
        sys.stdout.write(text)
        return 0
    out = Path(args.output)
    try:
        with open(out, "x", encoding="utf-8") as f:
            f.write(text)
    except FileExistsError:
        raise ValueError(f"{out}: already exists; expected a new file (migrate never overwrites one)") from None
    except OSError as exc:
        raise ValueError(f"{out}: cannot write it ({exc.strerror})") from None
    print(f"wrote {out}")
    return 0


class _Given(argparse.Action):
    """Store the option's value and note that it was given (``<dest>_given``)."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        setattr(namespace, f"{self.dest}_given", True)


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (``netrepro: ...``, exit 2) instead of usage + error."""

    def error(self, message):
        # Our own type errors already name the variable (TIME_SCALE: ...): drop argparse's prefix.
        m = re.match(r"argument [^:]+: ([A-Z_]+: .*)", message)
        self.exit(2, f"netrepro: {m.group(1) if m else message}\n")


def build_parser() -> argparse.ArgumentParser:
    """The command line's parser: one subcommand per step, in the order docs/reference.md
    lists them (it is generated from this parser, :mod:`netrepro.cli.reference`)."""
    p = _Parser(prog="netrepro", description="Reproduce network experiments on testbeds.")
    p.add_argument("--version", action="version", version=f"netrepro {__version__}")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    #: The commands that run Ansible, whose task lines -v shows.
    ansible_commands = ("provision", "run", "quick", "reproduce")

    def add(name, func, help_, site=True, exp=True):
        sp = sub.add_parser(name, help=help_, description=help_)
        if exp:
            sp.add_argument("experiment", metavar="EXPERIMENT",
                            help="an experiment's folder name under experiments/, or the path of its experiment.yml")
        if site:
            sp.add_argument("--site", default=os.environ.get("SITE", DEFAULT_SITE),
                            help=f"site name: {', '.join(SITES)} (default: $SITE, else local)")
            sp.add_argument("--option", "-o", action="append", metavar="KEY=VALUE",
                            help="a site option (repeatable; each site's options: docs/reference.md, Site options)")
        if name in ansible_commands:
            sp.add_argument("-v", "--verbose", action="store_true",
                            help="show Ansible's task lines on the console (they always go to the playbook's log)")
        sp.set_defaults(func=func)
        return sp

    _add_preparing_commands(add)
    _add_lifecycle_commands(add)
    _add_reproducing_commands(add)
    return p


def _add_preparing_commands(add: Callable[..., argparse.ArgumentParser]) -> None:
    """Add, with ``add`` (:func:`build_parser`'s), the commands that check, convert or write an
    experiment's files, install a site's software or plan a request, without a reservation:
    validate, migrate, setup, plan, rspec, profile, inventory."""
    add("validate", cmd_validate, "check an experiment file against the schema", site=False)
    sp = add("migrate", cmd_migrate, "print the schema_version 2 form of a schema_version 1 experiment file",
             site=False)
    sp.add_argument("-o", "--output", help="write it to this new file instead (never overwrites one)")
    sp = add("setup", cmd_setup, "install what a site needs on this machine (local: Debian packages and the micro-VM "
             "kernel; ns3: g++, the ns-3 libraries and netrepro-sim; fabric: fablib and the compiler it builds with; "
             "instageni, static: nothing beyond the Python packages)", exp=False)
    sp.add_argument("--check", action="store_true", help="only report what is missing; change nothing")
    sp.add_argument("--dev", action="store_true", help="what the tests need from Debian instead (the build tools of their Python packages, sudo)")
    add("plan", cmd_plan, "print what would be requested from the site, without contacting it")
    add("rspec", cmd_rspec, "regenerate rspecs/<experiment>.xml", site=False)
    sp = add("profile", cmd_profile, "write a CloudLab profile (profile.rspec) of the experiment into a new folder",
             site=False)
    sp.add_argument("--output", help="the new folder (default cloudlab-profile-<experiment>)")
    sp = add("inventory", cmd_inventory, "write an inventory (stdout) from a manifest saved by hand")
    sp.add_argument("--manifest", required=True, help="manifest XML file")
    sp.add_argument("--user", required=True, help="your login name among the manifest's logins")
    sp.add_argument("--key", help="SSH private key for the nodes")


def _add_lifecycle_commands(add: Callable[..., argparse.ArgumentParser]) -> None:
    """Add, with ``add`` (:func:`build_parser`'s), the commands of a site's and a run's steps,
    one at a time: up, provision, run, analyze, down, status, clean, compare, renew."""
    _add_parallel(add("up", cmd_up, "reserve the site and wait until every node answers SSH"))
    sp = add("provision", cmd_provision, "provision the nodes with Ansible")
    _add_rate_scale(sp)
    _add_parallel(sp)
    sp = add("run", cmd_run, "run the trials and fetch the raw data into a new results folder")
    sp.add_argument("--time-scale", type=_time_scale, default=os.environ.get("TIME_SCALE", "1"), action=_Given,
                    help="multiply every duration of the schedule (default: $TIME_SCALE or 1; "
                         "with --resume: the run's own)")
    sp.add_argument("--trial", action="append", help="run only this trial (its id in the file); repeatable")
    sp.add_argument("--resume", metavar="RUN", help="continue the interrupted run in folder RUN from its first "
                                                    "incomplete trial, keeping the completed ones")
    _add_rate_scale(sp)
    _add_schedule(sp)
    _add_parallel(sp)
    sp = add("analyze", cmd_analyze, "analyze a run folder (default: results/<experiment>/latest)", site=False)
    sp.add_argument("--run", default=os.environ.get("RUN") or None,
                    help="run folder (default: $RUN, else results/<experiment>/latest)")
    sp.add_argument("--partial", action="store_true",
                    help="analyze a run whose raw files differ from run.json's sha256 record; claims reading "
                         "incomplete trials are reported NOT EVALUABLE (default: refuse such a run)")
    add("down", cmd_down, "release the site, and every parallel reservation of it (idempotent)")
    add("status", cmd_status, "show the site's reservation")
    add("clean", cmd_clean, "tear down local sites, remove generated state; keeps live testbed reservations",
        site=False, exp=False)
    sp = add("compare", cmd_compare, "one report and figure across runs of one experiment (sites, repetitions), "
             "with the published results", site=False, exp=False)
    sp.add_argument("runs", nargs="+", metavar="RUN", help="run folders (results/<experiment>/<run-id>)")
    sp.add_argument("--out", help="folder to write compare-<time>/ into (default: the first run's experiment folder)")
    add_export_command(add)
    sp = add("renew", cmd_renew, "extend the reservation")
    sp.add_argument("--hours", type=_hours, default=os.environ.get("HOURS") or "6",
                    help="the lease ends HOURS from now, unless it already ends later: then nothing changes "
                         "(default: $HOURS or 6)")


def _add_reproducing_commands(add: Callable[..., argparse.ArgumentParser]) -> None:
    """Add, with ``add`` (:func:`build_parser`'s), the commands that take an experiment through
    every step to its verdict: quick and reproduce."""
    sp = add("quick", cmd_quick, "the fastest real verdicts: reproduce on the local site at the experiment's quick "
             "time scale, then on the ns3 site at the same time and rate scale; both verdicts side by side",
             site=False)
    sp.add_argument("--time-scale", type=_time_scale, default=None, action=_Given,
                    help="the local run's time scale (default: the experiment's time_scale.quick, else its "
                         "time_scale.min, else 1)")
    sp = add("reproduce", cmd_reproduce, "up, provision, run, analyze, down")
    sp.add_argument("--time-scale", type=_time_scale, default=os.environ.get("TIME_SCALE", "1"), action=_Given,
                    help="multiply every duration of the schedule (default: $TIME_SCALE or 1; "
                         "with --resume: the run's own)")
    sp.add_argument("--resume", metavar="RUN", help="run the interrupted run in folder RUN to its end "
                                                    "(its completed trials are kept) instead of a new run")
    sp.add_argument("--keep", action="store_true", help="leave the site up at the end")
    _add_rate_scale(sp)
    _add_schedule(sp)
    _add_parallel(sp)


def _add_parallel(sp) -> None:
    """--parallel of up, provision, run and reproduce (:func:`_parallel`)."""
    sp.add_argument("--parallel", type=_parallel, default=os.environ.get("PARALLEL") or "1", metavar="N",
                    help="hold N reservations of the site at once (N slices; N nodes files on static, "
                         "STATIC_FILE=a.yml,b.yml; N copies in host mode on local) and deal the trials out to them "
                         "(default: $PARALLEL or 1)")


def _add_rate_scale(sp) -> None:
    """--rate-scale of provision, run and reproduce: the scale k, checked against the experiment
    by :func:`_check_environment` (netrepro.model.rate_scale_option, naming --rate-scale)."""
    sp.add_argument("--rate-scale", metavar="K", default=None,
                    help="the rate scale K in [0.001, 1]: every rate and byte size of the experiment times K, where "
                         "its rate_scale.allowed and rate_scale.min permit (default: $RATE_SCALE, else chosen from "
                         "the site's rate ceiling or measured capacity when the site is provisioned; run refuses a "
                         "scale other than the one the site was provisioned at)")


def _add_schedule(sp) -> None:
    """--repeat, --no-shuffle, --seed, --sweep, --jobs and --dry-run of run and reproduce."""
    sp.add_argument("--repeat", type=_repeat, default=os.environ.get("REPEAT") or "1", action=_Given, metavar="N",
                    help="run every trial N times, in N blocks of one of each (default: $REPEAT or 1; "
                         "with --resume: the run's own)")
    sp.add_argument("--no-shuffle", action="store_true",
                    help="run each block in the file's order (default with --repeat > 1: a random order whose "
                         "seed run.json records)")
    sp.add_argument("--seed", type=_seed, default=None, help="the shuffle's seed (default: a fresh one, recorded)")
    # $SWEEP is read (and checked) by _schedule_args, only by the commands that run trials.
    sp.add_argument("--sweep", action="store_true", default=os.environ.get("SWEEP", ""),
                    help="run each trial at every combination of the values of the experiment's sweep.factors "
                         "(default: $SWEEP=1; with --resume: the run's own)")
    sp.add_argument("--jobs", type=_jobs, default=None, metavar="N",
                    help=f"run N trial instances at once, 1 to {JOBS_MAX}, on a site that simulates its trials (ns3; "
                         "default: one per core), each recorded in the run's order; other sites run one at a time "
                         "(default and only value 1)")
    sp.add_argument("--dry-run", action="store_true",
                    help="print every trial that would run, in order, with its settings and estimated wall time; "
                         "run and write nothing")


def main(argv: list[str] | None = None) -> int:
    # SIGTERM behaves as Ctrl-C, so that `finally` blocks release what was made.
    # (The exception says which signal: the account of an interrupted run names it.)
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt("SIGTERM")))
    # SIGINT always interrupts, even when netrepro was started with it ignored (a background
    # job of a non-interactive shell, as CI and make may start it: Python then keeps SIG_IGN).
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        args = build_parser().parse_args(argv)
    except argparse.ArgumentTypeError as exc:
        print(f"netrepro: {exc}", file=sys.stderr)
        return 2
    if getattr(args, "verbose", False):
        playbooks.VERBOSE = True
    try:
        return args.func(args)
    except (SpecError, SiteError, PlaybookError, ValueError, RuntimeError) as exc:
        print(f"netrepro: {exc}", file=sys.stderr)
        return getattr(exc, "exit_code", 2)  # a step stopped by a signal: 128 + its number
    except KeyboardInterrupt:
        print("netrepro: interrupted; what this step made was removed", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
