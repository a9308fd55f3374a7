"""The code's size limits: no module of netrepro/ or analysis/ over :data:`MODULE_LINES`
lines, no function or method over :data:`FUNCTION_LINES` lines (from its ``def`` to its last
line). A module or function past them is split along its seams (as issue 56 split crate.py,
sites/base.py, the local site's site.py, cli/commands.py and runner/run.py)."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
#: The longest a module may be, in physical lines: the project's rule (issue 56, "Done when").
MODULE_LINES = 700
#: The longest a function may be, from its ``def`` line to its last line: the same rule's.
FUNCTION_LINES = 80


def over_limits(files: list[Path]) -> list[str]:
    """``<file>: <n> lines`` for each of ``files`` (Python sources) over :data:`MODULE_LINES`,
    and ``<file>: <function>: <n> lines`` for each function over :data:`FUNCTION_LINES`."""
    found = []
    for f in files:
        text = f.read_text(encoding="utf-8")
        lines = len(text.splitlines())
        if lines > MODULE_LINES:
            found.append(f"{f}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > FUNCTION_LINES:
                    found.append(f"{f}: {node.name}: {length} lines")
    return found


def test_no_module_or_function_of_the_code_is_over_the_limits():
    files = sorted(f for root in ("netrepro", "analysis") for f in (REPO / root).rglob("*.py"))
    assert len(files) > 100   # both trees found
    assert over_limits(files) == [], "split these along their seams"


def test_the_limits_are_counted_as_stated(tmp_path):
    """A module of 701 lines and a function of 81 are over; 700 and 80 are not."""
    body = "\n".join(f"    x{i} = {i}" for i in range(79))
    ok, long_fn = tmp_path / "ok.py", tmp_path / "long_fn.py"
    ok.write_text(f"def f():\n{body}\n" + "\n" * (MODULE_LINES - 80))
    long_fn.write_text(f"def g():\n{body}\n    x = 1\n")
    big = tmp_path / "big.py"
    big.write_text("x = 1\n" * (MODULE_LINES + 1))
    assert len(ok.read_text().splitlines()) == MODULE_LINES
    assert over_limits([ok]) == []
    assert over_limits([long_fn, big]) == [f"{long_fn}: g: 81 lines", f"{big}: 701 lines"]
