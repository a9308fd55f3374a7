"""Print size and structure figures of netrepro's product code (netrepro/ and analysis/).

Usage: python tools/code_metrics.py [REPO]

Prints, for the Python files of the package and the analysis (tests excluded):
- lines: physical lines, and lines that are neither blank nor comments;
- the largest module (lines) and the longest function (lines from ``def`` to its last line);
- project imports inside function bodies (``import``/``from`` statements below a ``def``);
- import cycles between project modules: strongly connected components of more than one
  module in the graph of every project import, at module top or in a function, except those
  under ``if TYPE_CHECKING:`` (never executed) (Tarjan's
  algorithm, Tarjan 1972, "Depth-first search and linear graph algorithms");
- schema version branches: comparisons that read ``schema_version`` or name a ``v1``/``v2``
  path (``_v1``, ``SpecV2``, ``from_v1``, ...).

Standard library only, so it runs before ``make setup``.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

PACKAGES = ("netrepro", "analysis")
VERSION_WORDS = re.compile(r"schema_version|\bv1\b|_v1\b|\bv2\b|_v2\b|SpecV2|from_v1|V1\b|V2\b")


def _module_name(root: Path, f: Path) -> str:
    parts = list(f.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(mod: str, is_pkg: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = mod.split(".") if is_pkg else mod.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _target(name: str, modules: set[str]) -> str | None:
    while name:
        if name in modules:
            return name
        name = name.rpartition(".")[0]
    return None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def main(repo: Path) -> int:
    files = sorted(f for p in PACKAGES for f in (repo / p).rglob("*.py"))
    modules = {_module_name(repo, f): f for f in files}
    names = set(modules)
    total = code = inner = branches = 0
    largest = ("", 0)
    longest = ("", 0)
    graph: dict[str, set[str]] = {m: set() for m in names}
    for mod, f in modules.items():
        text = f.read_text()
        lines = text.splitlines()
        total += len(lines)
        code += sum(1 for ln in lines if ln.strip() and not ln.strip().startswith("#"))
        if len(lines) > largest[1]:
            largest = (str(f.relative_to(repo)), len(lines))
        tree = ast.parse(text)
        funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
        for fn in funcs:
            n = fn.end_lineno - fn.lineno + 1
            if n > longest[1]:
                longest = (f"{f.relative_to(repo)}:{fn.name}", n)
        in_func = {id(n) for fn in funcs for n in ast.walk(fn) if isinstance(n, (ast.Import, ast.ImportFrom))}
        typing_only = {id(n) for b in ast.walk(tree) if isinstance(b, ast.If) and "TYPE_CHECKING" in ast.unparse(b.test)
                       for n in ast.walk(b) if isinstance(n, (ast.Import, ast.ImportFrom))}
        for n in ast.walk(tree):
            if isinstance(n, ast.Import):
                targets = [_target(a.name, names) for a in n.names]
            elif isinstance(n, ast.ImportFrom):
                base = _resolve(mod, f.name == "__init__.py", n)
                targets = [_target(f"{base}.{a.name}", names) or _target(base, names) for a in n.names]
            else:
                continue
            if id(n) in typing_only:  # for annotations only: never executed
                continue
            targets = [t for t in targets if t and t != mod]
            graph[mod].update(targets)
            if targets and id(n) in in_func:
                inner += 1
        for n in ast.walk(tree):
            if isinstance(n, (ast.Compare, ast.If, ast.IfExp)) and VERSION_WORDS.search(ast.unparse(n.test if not isinstance(n, ast.Compare) else n)):
                branches += 1
    cycles = _cycles(graph)
    print(f"python files: {len(files)}")
    print(f"lines: {total} ({code} neither blank nor comment)")
    print(f"largest module: {largest[0]} ({largest[1]} lines)")
    print(f"longest function: {longest[0]} ({longest[1]} lines)")
    print(f"project imports inside functions: {inner}")
    print(f"import cycles: {len(cycles)}" + "".join(f"\n  {' <-> '.join(c)}" for c in cycles))
    print(f"schema version branches (if/compare naming a version): {branches}")
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[1]))
