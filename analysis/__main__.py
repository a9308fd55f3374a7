"""``python -m analysis <run_dir> [--partial] [--no-figures] [--experiment FILE [--rejudge]]``:
analyse a run directory.

Checks every raw file against run.json's sha256 sums first. Prints where the outputs went,
one line per claim (HOLDS, FAILS, UNDECIDED, INCONCLUSIVE, NOT EVALUABLE or NOT APPLICABLE)
and the verdict with every claim status counted (:func:`analysis.console.verdict_line`). With
``--experiment FILE``, one line more when the file's claims differ from those recorded in the
run, naming them: the run is judged by the recorded ones, or with ``--rejudge`` by the file's,
written as a re-judgement into a new analysis folder (:func:`analysis.analyze`). Exit status: 0 when the analysis
ran (whether or not the paper's claims were reproduced), 2 when the run directory is unusable
or its raw files differ from the record without ``--partial`` (one line on stderr naming the
file and what was expected; nothing is written then).
"""

from __future__ import annotations

import argparse
import sys

from analysis import RunFolderError, analyze
from analysis.console import LABEL, claims_changed_line, verdict_line
from netrepro.experiment.spec import SpecError, load_spec


def claim_line(c: dict) -> str:
    """``HOLDS|FAILS|UNDECIDED|... <id>: <evidence or reason>`` for one verdict.json claim (:data:`analysis.console.LABEL`)."""
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
    ap.add_argument("--experiment", metavar="FILE",
                    help="an experiment file of the run's experiment: say whether its claims differ from those "
                         "recorded in the run (the run is judged by the recorded ones unless --rejudge)")
    ap.add_argument("--rejudge", action="store_true",
                    help="judge with the claims of --experiment where they differ from the run's: a re-judgement, "
                         "written into a new analysis folder that says so")
    args = ap.parse_args(argv)
    if args.rejudge and not args.experiment:
        ap.error("--rejudge needs --experiment FILE (the claims to judge with)")
    try:
        given = load_spec(args.experiment) if args.experiment else None
        res = analyze(args.run_dir, figures=not args.no_figures, partial=args.partial,
                      experiment=given.name if given else None, given=given, rejudge=args.rejudge)
    except (RunFolderError, SpecError) as exc:
        print(f"analysis: error: {exc}", file=sys.stderr)
        return 2
    for p in res.problems:
        print(f"warning: {p}", file=sys.stderr)
    if res.claims_changed:
        print(claims_changed_line(res.claims_changed, args.experiment, args.rejudge))
    print(f"wrote into {res.out_dir}: " + ", ".join(p.relative_to(res.out_dir).as_posix() for p in res.outputs))
    for c in res.verdict["claims"]:
        print(claim_line(c))
    print(f"verdict: {verdict_line(res.verdict)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
