"""``python -m analysis <run_dir> [--partial] [--no-figures]``: analyse a run directory.

Checks every raw file against run.json's sha256 sums first. Prints where the outputs went,
one line per claim (HOLDS, FAILS, NOT EVALUABLE or INCONCLUSIVE) and the verdict (with the
failed health checks and their numbers when it is inconclusive). Exit status: 0 when the analysis
ran (whether or not the paper's claims were reproduced), 2 when the run directory is unusable
or its raw files differ from the record without ``--partial`` (one line on stderr naming the
file and what was expected; nothing is written then).
"""

from __future__ import annotations

import argparse
import sys

from analysis import RunFolderError, analyze
from analysis.console import LABEL, verdict_line
from netrepro.experiment.spec import SpecError


def claim_line(c: dict) -> str:
    """``HOLDS|FAILS|NOT EVALUABLE|INCONCLUSIVE <id>: <evidence or reason>`` for one verdict.json claim."""
    status = c.get("status") or ("holds" if c["holds"] else "fails")
    return f"{LABEL.get(status, status.upper())} {c['id']}: {c.get('reason') or c['evidence']}"


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, exit 2
        self.exit(2, f"analysis: error: {message}\n")


def main(argv: list[str] | None = None) -> int:
    ap = _Parser(prog="python -m analysis", description="Analyse a netrepro run directory.")
    ap.add_argument("run_dir", help="results/<experiment>/<run-id>/ (holds run.json and raw/)")
    ap.add_argument("--no-figures", action="store_true", help="skip drawing the figures")
    ap.add_argument("--partial", action="store_true",
                    help="analyse a run whose raw files differ from run.json's record; claims reading "
                         "incomplete trials are reported NOT EVALUABLE")
    args = ap.parse_args(argv)
    try:
        res = analyze(args.run_dir, figures=not args.no_figures, partial=args.partial)
    except (RunFolderError, SpecError) as exc:
        print(f"analysis: error: {exc}", file=sys.stderr)
        return 2
    for p in res.problems:
        print(f"warning: {p}", file=sys.stderr)
    print(f"wrote into {res.out_dir}: " + ", ".join(p.relative_to(res.out_dir).as_posix() for p in res.outputs))
    for c in res.verdict["claims"]:
        print(claim_line(c))
    print(f"verdict: {verdict_line(res.verdict)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
