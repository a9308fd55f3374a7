"""``python -m analysis <run_dir> [--no-figures]``: analyse a run directory.

Prints where the outputs went and one line per claim. Exit status: 0 when the analysis ran
(whether or not the paper's claims were reproduced), 2 when the run directory is unusable
(one-line error naming the file and what was expected on stderr).
"""

from __future__ import annotations

import argparse
import sys

from analysis import AnalysisError, analyze
from netrepro.spec import SpecError


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m analysis", description="Analyse a netrepro run directory.")
    ap.add_argument("run_dir", help="results/<experiment>/<run-id>/ (holds run.json and raw/)")
    ap.add_argument("--no-figures", action="store_true", help="skip drawing the figures")
    args = ap.parse_args(argv)
    try:
        res = analyze(args.run_dir, figures=not args.no_figures)
    except (AnalysisError, SpecError) as exc:
        print(f"analysis: error: {exc}", file=sys.stderr)
        return 2
    for p in res.problems:
        print(f"warning: {p}", file=sys.stderr)
    print(f"wrote into {res.run.dir}: " + ", ".join(p.relative_to(res.run.dir).as_posix() for p in res.outputs))
    for c in res.verdict["claims"]:
        print(f"{'HOLDS' if c['holds'] else 'FAILS'} {c['id']}: {c['evidence']}")
    print(f"verdict: {'reproduced' if res.verdict['reproduced'] else 'not reproduced'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
