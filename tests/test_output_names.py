"""One writer of the analysis outputs, under one set of names (issue 56): every analysis output
file is named in netrepro/runfolder/layout.py only, and the code elsewhere uses those names, so
that renaming one changes one line. The files of the analysis (analysis/) and of netrepro
(netrepro/) are read as Python (ast): a string constant that is exactly an output's file name
(docstrings and prose mention them inside longer text, which is not flagged) fails the test.
``figures`` and ``flent`` are left out: they are words of the experiment file and of the
figures' own names too."""

from __future__ import annotations

import ast
from pathlib import Path

from netrepro.runfolder import layout

REPO = Path(__file__).resolve().parent.parent
#: The output names that are file names (layout.OUTPUT_NAMES but its two folders named like words).
FILE_NAMES = {n for n in layout.OUTPUT_NAMES if "." in n}


def test_output_files_are_named_in_layout_only():
    assert FILE_NAMES >= {"summary.csv", "verdict.json", "report.md", "intervals.csv", "analysis.json"}
    found = []
    for path in sorted([*REPO.glob("analysis/**/*.py"), *REPO.glob("netrepro/**/*.py")]):
        if path == REPO / "netrepro" / "runfolder" / "layout.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in FILE_NAMES:
                found.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value!r}")
    assert found == [], "name them by netrepro.runfolder.layout's constants:\n" + "\n".join(found)
