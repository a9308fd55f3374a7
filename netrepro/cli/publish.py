"""``netrepro export``: a run as an RO-Crate and the deposit metadata an archive needs
(:mod:`netrepro.runfolder.crate`, :mod:`netrepro.runfolder.deposit`; docs/publishing-a-run.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable

from netrepro.runfolder.crate import DEFAULT_CITATION, DEFAULT_LICENSE, export_run


def cmd_export(args) -> int:
    """Write the run folder ``args.run`` as an RO-Crate (``--output``, default
    ``<run folder>-crate.zip`` beside it) and its Zenodo metadata; print both paths and what to
    do next."""
    run = Path(args.run)
    out = Path(args.output) if args.output else run.resolve().parent / f"{run.resolve().name}-crate.zip"
    crate, deposit = export_run(run, out, args.license, args.citation)
    print(f"[export] crate: {crate}")
    print(f"[export] deposit metadata (Zenodo): {deposit}")
    if args.validate:
        from netrepro.runfolder.cratecheck import validate_crate
        problems = validate_crate(crate)
        for line in problems:
            print(f"[export] {line}")
        if problems:
            print("netrepro: the crate does not pass roc-validator (above); it was kept for you to inspect",
                  file=sys.stderr)
            return 1
        print("[export] roc-validator: RO-Crate 1.1 and Process Run Crate 0.5 pass at their REQUIRED level")
    print(f"[export] next: check it with `netrepro analyze EXPERIMENT --run {crate}`, then upload both "
          "(docs/publishing-a-run.md)")
    return 0


def add_export_command(add: Callable[..., argparse.ArgumentParser]) -> None:
    """Add ``export`` with ``add`` (:func:`netrepro.cli.commands.build_parser`'s)."""
    sp = add("export", cmd_export, "write a run folder as an RO-Crate (Process Run Crate) and its deposit metadata",
             site=False, exp=False)
    sp.add_argument("run", metavar="RUN", help="the run folder (results/<experiment>/<run-id>), complete and analysed")
    sp.add_argument("--output", help="the new crate: a zip file when it ends in .zip, else a folder "
                                     "(default: <run folder>-crate.zip beside the run folder)")
    sp.add_argument("--license", default=DEFAULT_LICENSE,
                    help=f"the data's licence, an SPDX identifier (default: {DEFAULT_LICENSE})")
    sp.add_argument("--citation", default=str(DEFAULT_CITATION),
                    help="the CITATION.cff whose authors are the crate's and the deposit's (default: netrepro's)")
    sp.add_argument("--validate", action="store_true",
                    help="check the crate with roc-validator, offline (its environment: `make venv-crate`)")
