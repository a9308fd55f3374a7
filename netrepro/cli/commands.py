"""Command line: ``netrepro <command> <experiment> [--site SITE] ...``: its parser
(:func:`build_parser`) and entry point (:func:`main`, ``python -m netrepro``).

The Makefile's targets that make, use or release a site or analyze a run do their work
through these commands, so all of that is usable without make (docs/reference.md lists what
each target runs). The commands are :mod:`netrepro.cli.step_commands`' (one step each) and
:mod:`netrepro.cli.reproduce`'s (every step to a verdict); their options are checked by
:mod:`netrepro.cli.options`.

Errors in the user's input or environment print one line (``netrepro: ...``) and exit 2.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
from typing import Callable

from netrepro import __version__
from netrepro.cli.options import hours_arg, jobs_arg, parallel_arg, repeat_arg, seed_arg, time_scale_arg
from netrepro.cli.publish import add_export_command
from netrepro.cli.reproduce import cmd_quick, cmd_reproduce
from netrepro.cli.step_commands import (cmd_analyze, cmd_clean, cmd_compare, cmd_down, cmd_inventory, cmd_migrate,
                                        cmd_plan, cmd_profile, cmd_provision, cmd_renew, cmd_rspec, cmd_run,
                                        cmd_setup, cmd_status, cmd_up, cmd_validate)
from netrepro.runner import playbooks
from netrepro.runner.ansible import PlaybookError
from netrepro.runner.instances import JOBS_MAX
from netrepro.sites import DEFAULT_SITE, SITES
from netrepro.sites.base import SiteError
from netrepro.experiment.spec import SpecError


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
    sp.add_argument("--time-scale", type=time_scale_arg, default=os.environ.get("TIME_SCALE", "1"), action=_Given,
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
    sp.add_argument("--rejudge", action="store_true",
                    help="judge the run with EXPERIMENT's claims where they differ from those recorded in the run "
                         "(default: the recorded ones, fixed before the run); written as a re-judgement into a new "
                         "analysis folder")
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
    sp.add_argument("--hours", type=hours_arg, default=os.environ.get("HOURS") or "6",
                    help="the lease ends HOURS from now, unless it already ends later: then nothing changes "
                         "(default: $HOURS or 6)")


def _add_reproducing_commands(add: Callable[..., argparse.ArgumentParser]) -> None:
    """Add, with ``add`` (:func:`build_parser`'s), the commands that take an experiment through
    every step to its verdict: quick and reproduce."""
    sp = add("quick", cmd_quick, "the fastest real verdicts: reproduce on the local site at the experiment's quick "
             "time scale, then on the ns3 site at the same time and rate scale; both verdicts side by side",
             site=False)
    sp.add_argument("--time-scale", type=time_scale_arg, default=None, action=_Given,
                    help="the local run's time scale (default: the experiment's time_scale.quick, else its "
                         "time_scale.min, else 1)")
    sp = add("reproduce", cmd_reproduce, "up, provision, run, analyze, down")
    sp.add_argument("--time-scale", type=time_scale_arg, default=os.environ.get("TIME_SCALE", "1"), action=_Given,
                    help="multiply every duration of the schedule (default: $TIME_SCALE or 1; "
                         "with --resume: the run's own)")
    sp.add_argument("--resume", metavar="RUN", help="run the interrupted run in folder RUN to its end "
                                                    "(its completed trials are kept) instead of a new run")
    sp.add_argument("--keep", action="store_true", help="leave the site up at the end")
    _add_rate_scale(sp)
    _add_schedule(sp)
    _add_parallel(sp)


def _add_parallel(sp) -> None:
    """--parallel of up, provision, run and reproduce (:func:`parallel_arg`)."""
    sp.add_argument("--parallel", type=parallel_arg, default=os.environ.get("PARALLEL") or "1", metavar="N",
                    help="hold N reservations of the site at once (N slices; N nodes files on static, "
                         "STATIC_FILE=a.yml,b.yml; N copies in host mode on local) and deal the trials out to them "
                         "(default: $PARALLEL or 1)")


def _add_rate_scale(sp) -> None:
    """--rate-scale of provision, run and reproduce: the scale k, checked against the experiment
    by :func:`check_environment` (netrepro.model.rate_scale_option, naming --rate-scale)."""
    sp.add_argument("--rate-scale", metavar="K", default=None,
                    help="the rate scale K in [0.001, 1]: every rate and byte size of the experiment times K, where "
                         "its rate_scale.allowed and rate_scale.min permit (default: $RATE_SCALE, else chosen from "
                         "the site's rate ceiling or measured capacity when the site is provisioned; run refuses a "
                         "scale other than the one the site was provisioned at)")


def _add_schedule(sp) -> None:
    """--repeat, --no-shuffle, --seed, --sweep, --jobs and --dry-run of run and reproduce."""
    sp.add_argument("--repeat", type=repeat_arg, default=os.environ.get("REPEAT") or "1", action=_Given, metavar="N",
                    help="run every trial N times, in N blocks of one of each (default: $REPEAT or 1; "
                         "with --resume: the run's own)")
    sp.add_argument("--no-shuffle", action="store_true",
                    help="run each block in the file's order (default with --repeat > 1: a random order whose "
                         "seed run.json records)")
    sp.add_argument("--seed", type=seed_arg, default=None, help="the shuffle's seed (default: a fresh one, recorded)")
    # $SWEEP is read (and checked) by schedule_args, only by the commands that run trials.
    sp.add_argument("--sweep", action="store_true", default=os.environ.get("SWEEP", ""),
                    help="run each trial at every combination of the values of the experiment's sweep.factors "
                         "(default: $SWEEP=1; with --resume: the run's own)")
    sp.add_argument("--jobs", type=jobs_arg, default=None, metavar="N",
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
        print("netrepro: interrupted; what this step made was removed, or is named above with the command "
              "that releases it", file=sys.stderr)
        return 130
