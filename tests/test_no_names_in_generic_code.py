"""No experiment, lab or AQM name in generic code.

The names are read from the project itself: every folder of experiments/, the ``name`` and
the trial ids of its experiment.yml, and the qdisc kinds a stack may have
(:data:`netrepro.core.tc.STACK_KINDS`: the AQMs and shapers). Generic code is every .py file of
netrepro/ and analysis/ but the qdisc builders (:data:`QDISC_BUILDERS`), the only modules
that know a qdisc kind by name. In generic code no string constant and no identifier may
spell one of those names as a word (``pie``, ``pie-vs-red``; in an identifier ``_``
separates words, so ``pie_attributes`` spells ``pie``). Comments and docstrings may name
them: they explain, they do not decide.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import yaml

from netrepro.core import tc

REPO = Path(__file__).resolve().parent.parent
#: The generic code: every .py file under these folders of the repository.
GENERIC_DIRS = ("netrepro", "analysis")
#: The qdisc builders (paths from the repository root): the tc command lines, and the same
#: stacks as ns-3 queue discs. They may name qdisc kinds.
QDISC_BUILDERS = ("netrepro/core/tc/params.py", "netrepro/core/tc/qdiscs.py", "netrepro/core/tc/stack.py",
                  "netrepro/sites/ns3/stacks.py")


def forbidden_names(repo: Path = REPO) -> set[str]:
    """Every experiment's folder name, ``name`` and trial ids (experiments/*/experiment.yml),
    and every qdisc kind of :data:`netrepro.core.tc.STACK_KINDS`."""
    names = set(tc.STACK_KINDS)
    for path in sorted(repo.glob("experiments/*/experiment.yml")):
        data = yaml.safe_load(path.read_text())
        names.add(path.parent.name)
        names.add(str(data.get("name") or ""))
        names.update(str(t.get("id") or "") for t in data.get("trials") or [])
    names.discard("")
    return names


def name_pattern(names: set[str]) -> re.Pattern:
    """A regex matching any of ``names`` as a whole word (not inside a longer word of letters,
    digits or ``_``, nor at the end of a hyphenated one: ``--fq-rate``, iperf3's option, is not
    the trial id ``fq-rate``), the longest name first (``pie-vs-red`` before ``pie``)."""
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"(?<![A-Za-z0-9_-])(?:{alternatives})(?![A-Za-z0-9_])")


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string constants that are docstrings (a module's, class's or function's first statement)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                out.add(id(first.value))
    return out


def _identifier(node: ast.AST) -> str | None:
    """The identifier a node introduces or uses, if any."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, ast.arg):
        return node.arg
    if isinstance(node, ast.keyword):
        return node.arg
    if isinstance(node, ast.alias):
        return node.asname or node.name
    return None


def names_in_code(source: str, pattern: re.Pattern) -> list[tuple[int, str, str]]:
    """``(line, name, text)`` of every name ``pattern`` finds in the code of ``source``: in
    string constants (f-strings' literal parts too) that are not docstrings, and in
    identifiers, whose words ``_`` separates. Comments are not code (the parser drops them).
    Sorted by line."""
    tree = ast.parse(source)
    docstrings = _docstrings(tree)
    hits = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if id(node) in docstrings:
                continue
            text, words = node.value, node.value
        else:
            text = _identifier(node)
            if not text:
                continue
            words = text.replace("_", " ")
        for m in pattern.finditer(words):
            hits.append((getattr(node, "lineno", 0), m.group(0), text))
    return sorted(hits)


def generic_files(repo: Path = REPO) -> list[Path]:
    """The .py files of :data:`GENERIC_DIRS` but :data:`QDISC_BUILDERS`, sorted."""
    files = [p for d in GENERIC_DIRS for p in (repo / d).rglob("*.py")]
    return sorted(p for p in files if p.relative_to(repo).as_posix() not in QDISC_BUILDERS)


def test_finder_sees_code_not_comments_or_docstrings():
    """The finder itself: a name in a constant, an f-string or an identifier is found; in a
    comment, a docstring or inside a longer word it is not."""
    source = '''
"""Module docstring naming pie."""
def pie_attributes(layer):  # a comment naming red
    """Docstring naming netem."""
    if layer["kind"] == "htb":
        return f"{layer} is not a tbf"
    return ["piecemeal tbfx fq_codelx", "--fq-rate", "pie-limited"]
'''
    hits = names_in_code(source, name_pattern({"pie", "red", "netem", "htb", "tbf", "fq_codel", "fq-rate"}))
    assert hits == [(3, "pie", "pie_attributes"), (5, "htb", "htb"), (6, "tbf", " is not a tbf"), (7, "pie", "pie-limited")]


def test_names_are_read_from_the_project():
    names = forbidden_names()
    folders = {p.name for p in (REPO / "experiments").iterdir() if (p / "experiment.yml").is_file()}
    assert folders and folders <= names
    assert set(tc.STACK_KINDS) <= names


def test_no_experiment_lab_or_aqm_name_in_generic_code():
    """Generic code spells no experiment, lab or AQM name; the message lists each hit as
    ``file:line: 'name' in 'text'``."""
    pattern = name_pattern(forbidden_names())
    hits = [f"{path.relative_to(REPO).as_posix()}:{line}: {name!r} in {text[:80]!r}"
            for path in generic_files() for line, name, text in names_in_code(path.read_text(), pattern)]
    if hits:
        pytest.fail(f"{len(hits)} experiment, lab or AQM name(s) in generic code (move the knowledge into the "
                    f"experiment file or a qdisc builder, {', '.join(QDISC_BUILDERS)}):\n" + "\n".join(hits),
                    pytrace=False)
