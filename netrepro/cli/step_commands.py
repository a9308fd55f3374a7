"""The commands of one step each (``netrepro validate|setup|plan|rspec|profile|inventory|up|
provision|run|analyze|down|status|renew|clean|compare|migrate``), and what the runner and the
analysis meet through: the trial health judge (:func:`judge_trial`) and the verdict's lines
(:func:`print_verdict`). Each takes the parsed arguments (:func:`netrepro.cli.commands.build_parser`)
and returns the exit status."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from netrepro.cli.options import check_environment, given_options, print_time_scale_note, run_time_scale, schedule_args
from netrepro.cli.site_commands import inventory_from_manifest, plan_text, write_profile, write_rspec
from netrepro.runner import steps
from netrepro.runner.clean import clean
from netrepro.runner.instances import dry_run
from netrepro.runner.run import run
from netrepro.runner.setup import setup
from netrepro.runfolder.layout import FIGURES, REPORT, latest
from netrepro.sites import DEFAULT_SITE, site_class, site_options
from netrepro.sites.base import SiteError
from netrepro.experiment.spec import Spec, SpecError, load_spec


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
    print(plan_text(spec, args.site, given_options(args)))
    return 0


def cmd_rspec(args) -> int:
    spec = load_spec(args.experiment)
    print(f"wrote {write_rspec(spec)}")
    return 0


def cmd_profile(args) -> int:
    """Write a testbed profile of the experiment (the site's that writes profiles: a CloudLab
    repository-based profile, netrepro.cli.site_commands.write_profile)."""
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
    spec, opts = load_spec(args.experiment), given_options(args)
    steps.preflight_reservations(spec, args.site, opts, args.parallel)   # bad files/credentials: nothing written yet
    for site in steps.up_reservations(spec, args.site, opts, args.parallel):
        if held := site.held():   # what stays reserved until `down`, and how to release it
            print(held)
    return 0


def cmd_provision(args) -> int:
    spec = load_spec(args.experiment)
    check_environment(args, spec)
    steps.provision_reservations(spec, args.site, given_options(args), rate_scale=args.rate_scale, parallel=args.parallel)
    return 0


def print_dry_run(args, spec) -> int:
    """The dry run of run or reproduce (``--dry-run``): every trial instance the run would run,
    printed (:func:`netrepro.runner.instances.dry_run`, which checks the arguments as the run
    does), then the claims its TIME_SCALE makes not applicable. Returns 0; raises what the
    check raises (SpecError, SiteError: one line)."""
    sched = schedule_args(args)
    dry_run(spec, args.site, run_time_scale(args), given_options(args), trial_ids=getattr(args, "trial", None),
            repeat=sched["repeat"], shuffle=sched["shuffle"], seed=sched["seed"],
            resume=Path(args.resume) if args.resume else None, sweep=sched["sweep"], jobs=sched["jobs"],
            parallel=args.parallel)
    print_time_scale_note(args, spec, "dry-run")
    return 0


def cmd_run(args) -> int:
    spec = load_spec(args.experiment)
    check_environment(args, spec)
    if args.dry_run:
        return print_dry_run(args, spec)
    sched = schedule_args(args)
    run_dir = run(spec, args.site, run_time_scale(args), given_options(args),
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


def print_verdict(verdict: dict, run_dir: Path) -> None:
    from analysis.console import LABEL, verdict_line
    for c in verdict["claims"]:
        status = c.get("status") or ("holds" if c["holds"] else "fails")
        print(f"  [{LABEL.get(status, status.upper())}] {c['id']}: {c.get('reason') or c['evidence']}")
        if c.get("finding") and status == "fails":   # what measurement already found, from the experiment file
            print(f"      as recorded in the experiment file: {c['finding']['text']}")
    said = verdict_line(verdict)  # the verdict, every claim status counted, the failed health checks
    if ":" in said:
        print(f"[analyze] {said}")
    print(f"[analyze] verdict: {said.split(':')[0]}; report {run_dir / REPORT}")


def cmd_analyze(args) -> int:
    """Check the run's raw files against run.json, analyze, print the verdict (analysis.analyze;
    ``--run`` may name a crate, folder or zip). A run given with ``--run`` must be a run of
    EXPERIMENT (run.json ``experiment``). When EXPERIMENT's claims differ from those recorded
    in the run, say so in one line; ``--rejudge`` judges with EXPERIMENT's claims (a
    re-judgement, into a new analysis folder)."""
    spec = load_spec(args.experiment)
    target = Path(args.run) if args.run else latest(spec.name)
    from analysis import analyze
    from analysis.console import claims_changed_line
    res = analyze(target.resolve(), partial=args.partial, experiment=spec.name if args.run else None,
                  given=spec, rejudge=args.rejudge)
    for p in res.problems:
        print(f"[analyze] data problem: {p}")
    if res.claims_changed:
        print(f"[analyze] {claims_changed_line(res.claims_changed, args.experiment, args.rejudge)}")
    print_verdict(res.verdict, res.out_dir)
    return 0


def cmd_down(args) -> int:
    steps.down(load_spec(args.experiment), args.site, given_options(args))
    return 0


def cmd_status(args) -> int:
    """The reservation's status (JSON); with a parallel campaign's other reservations up, each
    one's too, under ``parallel_reservations`` (reservation number -> status)."""
    spec, opts = load_spec(args.experiment), given_options(args)
    status = steps.open_site(spec, args.site, opts).status()
    others = steps.reservations_on_disk(spec, args.site)
    if others:
        status["parallel_reservations"] = {str(k): steps.open_site(spec, args.site, opts, k).status() for k in others}
    print(json.dumps(status, indent=1, default=str))
    return 0


def cmd_renew(args) -> int:
    """Renew the reservation's lease, and every parallel reservation's, to end ``--hours`` from
    now; a lease that already ends later is left as it is, said in one line (Site.renew)."""
    spec, opts = load_spec(args.experiment), given_options(args)
    for k in [1, *steps.reservations_on_disk(spec, args.site)]:
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


def cmd_compare(args) -> int:
    """netrepro compare RUN RUN ...: analysis.compare; prints where the comparison is (and its
    figures against the rate scale and the time scale when the runs have two or more of it)."""
    from analysis.compare import compare
    from analysis.scales import SCALES
    out = compare([Path(r) for r in args.runs], Path(args.out) if args.out else None)
    figs = [(sc.words, out / FIGURES / f"{sc.file}.png") for sc in SCALES.values()]
    print(f"[compare] {len(args.runs)} runs: report {out / REPORT}, figure {out / FIGURES / 'compare.png'}"
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
