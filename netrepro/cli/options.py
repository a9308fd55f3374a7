"""The command line's options and environment variables, checked before anything is built or
contacted: the types of the numeric options (``--time-scale``, ``--hours``, ``--repeat``,
``--seed``, ``--jobs``, ``--parallel``: argparse.ArgumentTypeError naming the variable, one
line, exit 2), the site options given (:func:`given_options`), the variables a command reads
(:func:`check_environment`) and the repetition options of run and reproduce
(:func:`schedule_args`)."""

from __future__ import annotations

import argparse
import math
import os
import re

from netrepro.model import rate_scale_option, time_scale_note
from netrepro.runner import steps
from netrepro.runner.barrier import lead_from_env
from netrepro.runner.instances import JOBS_MAX
from netrepro.runner.schedule import REPEAT_MAX
from netrepro.runner.trialvars import rate_scale_request
from netrepro.sites import site_class, site_options
from netrepro.experiment.spec import check_time_scale


def given_options(args) -> dict:
    """The site options of ``args`` (environment, then ``--option``; HOURS only for a site with
    a lease: netrepro.sites.DECLARED_OPTION_ENV); each site checks them against its declared
    options when it is made (unknown keys and bad values: one line)."""
    site = getattr(args, "site", None)
    return site_options(getattr(args, "option", None), os.environ, site_class(site).OPTIONS if site else ())


def time_scale_arg(value: str) -> float:
    """``--time-scale`` / ``$TIME_SCALE``: netrepro.experiment.spec.check_time_scale's range (0.001 .. 100)."""
    try:
        return check_time_scale(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def hours_arg(value: str) -> float:
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


def check_environment(args, spec) -> None:
    """The environment variables ``args.command`` reads, checked before anything is built or
    contacted: ANSIBLE_TIMEOUT (provision, run, reproduce: the commands that run playbooks), --rate-scale or else
    RATE_SCALE against the experiment (provision, run and reproduce, dry runs too:
    netrepro.model.rate_scale_option, naming the one given),
    NETREPRO_LEAD_S (run, reproduce: netrepro.runner.barrier.lead_from_env). SWEEP is read by
    :func:`schedule_args`, HOURS and the others by their options' types. Raises ValueError
    naming the variable (one line, exit 2)."""
    cmd = args.command
    if cmd in ("provision", "run", "reproduce", "quick"):
        _ansible_timeout()
        rate_scale_option(spec.model, *rate_scale_request(getattr(args, "rate_scale", None)))
    if cmd in ("run", "reproduce", "quick"):
        lead_from_env()
    if cmd in ("run", "reproduce") and not args.dry_run:  # (a dry run says it after its plan)
        print_time_scale_note(args, spec, cmd)


def print_time_scale_note(args, spec, tag: str) -> None:
    """Say before a run (or after a dry run's plan) which claims its TIME_SCALE makes not
    applicable (:func:`netrepro.model.time_scale_note`); the run goes on all the same (a
    smoke test, a test suite), and its verdict says it again."""
    note = time_scale_note(spec.model, run_time_scale(args) or 1.0)
    if note:
        print(f"[{tag}] {note}", flush=True)


def run_time_scale(args) -> float | None:
    """The time scale to run at: a resumed run keeps its own unless --time-scale is given
    (and then it must match; $TIME_SCALE alone does not count)."""
    if args.resume and not getattr(args, "time_scale_given", False):
        return None
    return args.time_scale


def repeat_arg(value: str) -> int:
    """REPEAT / --repeat: a whole number of repetitions, 1 to netrepro.runner.schedule.REPEAT_MAX."""
    try:
        n = int(str(value).strip())
    except ValueError:
        n = 0
    if not 1 <= n <= REPEAT_MAX:
        raise argparse.ArgumentTypeError(f"REPEAT: {value!r}: expected a whole number of repetitions from 1 to {REPEAT_MAX}")
    return n


def seed_arg(value: str) -> int:
    """--seed: the shuffle's seed, a whole number from 0 to 2**32 - 1."""
    try:
        n = int(str(value).strip())
    except ValueError:
        n = -1
    if not 0 <= n < 2 ** 32:
        raise argparse.ArgumentTypeError(f"SEED: {value!r}: expected a whole number from 0 to 4294967295")
    return n


def jobs_arg(value: str) -> int:
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


def parallel_arg(value: str) -> int:
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


def schedule_args(args) -> dict:
    """The repetition options of run/reproduce for netrepro.runner.run.run and
    netrepro.runner.instances.dry_run, and ``jobs`` (--jobs; None: the site's default). A resumed
    run keeps its own repetitions: REPEAT from the environment alone does not count."""
    repeat = args.repeat if not args.resume or getattr(args, "repeat_given", False) else None
    sweep = args.sweep if isinstance(args.sweep, bool) else _sweep_env(args.sweep)
    return {"repeat": repeat, "shuffle": not args.no_shuffle, "seed": args.seed, "sweep": sweep, "jobs": args.jobs}
