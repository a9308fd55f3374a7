"""What the runner says on the console: its lines (:func:`log`), the account of a step that
stopped part-way (:class:`StepIncomplete`, and the exit status after a signal), and how the
command to run next names the experiment and the site."""

from __future__ import annotations

import shlex
import signal
import sys
from datetime import datetime, timezone
from pathlib import Path

from netrepro.experiment.spec import Spec, resolve_path
from netrepro.sites import DEFAULT_SITE


def log(msg: str) -> None:
    """Print one line of the runner's account: with a UTC time stamp (``[12:03:04Z]``)
    when stdout is not a terminal (CI, a log file), as is on one. The line and its newline
    go in one write: trials simulated at once log from several threads."""
    sys.stdout.write((msg if sys.stdout.isatty() else f"[{datetime.now(timezone.utc):%H:%M:%S}Z] {msg}") + "\n")
    sys.stdout.flush()


#: Exit status after a signal: 128 + its number (the shell's convention).
SIGNAL_EXIT = {"SIGINT": 128 + signal.SIGINT, "SIGTERM": 128 + signal.SIGTERM}


class StepIncomplete(RuntimeError):
    """A step (``provision``, ``run``) stopped part-way. ``str()`` is the one-line account for
    the console: what stopped, where and why, what was kept, and what to do next.

    Attributes: ``account`` (the line without ``hint``), ``hint`` (what to do next),
    ``exit_code`` (2 after a fault; 128 + the signal's number after SIGINT/SIGTERM) and
    ``run_dir`` (the partial run folder, or None).
    """

    def __init__(self, account: str, hint: str = "", exit_code: int = 2, run_dir: Path | None = None):
        self.account, self.hint, self.exit_code, self.run_dir = account, hint, exit_code, run_dir
        super().__init__(account + (f"; {hint}" if hint else ""))


def signal_of(exc: KeyboardInterrupt) -> str:
    """The signal behind a KeyboardInterrupt: ``netrepro.cli.commands.main`` raises it with the text
    "SIGTERM" on SIGTERM; Python's own (Ctrl-C, SIGINT) has no text."""
    return str(exc) if str(exc) in SIGNAL_EXIT else "SIGINT"


def spec_arg(spec: Spec) -> str:
    """How to name ``spec`` on the command line: its name, or its path when not under experiments/."""
    return spec.name if resolve_path(spec.name).resolve() == Path(spec.path).resolve() else shlex.quote(str(spec.path))


def site_arg(site_name: str) -> str:
    """How to name the site on a command line: nothing for the default site, else ``--site NAME``."""
    return "" if site_name == DEFAULT_SITE else f" --site {site_name}"
