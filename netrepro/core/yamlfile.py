"""Read the YAML files users write (experiments, static sites, aggregates), strictly.

PyYAML's ``safe_load`` silently keeps the last of two equal keys in a mapping, so a node or
an aggregate defined twice is merged without a word. :func:`load_yaml_file` refuses it, and
every other problem (missing, unreadable, not UTF-8, not YAML) becomes one
:class:`~netrepro.experiment.spec.SpecError` line naming the file and, where known, the line.

A file may come from a stranger, so its size once read is bounded before anything is built
from it (:func:`check_bounds`): YAML anchors and aliases let a few hundred bytes stand for
billions of values (the "billion laughs" file), which PyYAML builds as shared objects but
every later walk (the checks, the JSON Schema, a copy) visits one by one; and PyYAML builds
nested collections recursively, so a deeply nested file exhausts the interpreter's stack.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from netrepro.core.errors import SpecError


#: The most values (scalars and collections, each alias counted as everything it stands for)
#: a file may hold once its aliases are expanded. The committed experiments hold 394
#: (pie-lab) to 671 (pacing-lab); a hundred times more is still read and checked in about a
#: second.
EXPANDED_NODES_MAX = 100_000
#: The deepest nesting of collections a file may have (the top-level mapping is 1). The
#: committed experiments nest at most 6 deep (a trial's qdisc stack: the top level, trials,
#: a trial, its qdiscs, a port's stack, a layer); PyYAML's composer recurses a few calls per
#: level and Python's default recursion limit is 1000.
DEPTH_MAX = 64


def check_bounds(text: str, path: Path | str = "<string>") -> None:
    """Refuse ``text`` whose YAML, aliases expanded, holds more than :data:`EXPANDED_NODES_MAX`
    values or nests collections deeper than :data:`DEPTH_MAX`, in one pass over the parser's
    events (no document is built: time and memory grow with the text, not with the expansion).

    Raises:
        SpecError: one line naming ``path`` and the line where the bound was passed.
        yaml.YAMLError: the text is not YAML (the caller reports it).
    """

    sizes: dict[str, int] = {}  # anchor -> how many values it stands for
    stack: list[list] = []  # open collections: [anchor, values counted so far]
    total = 0

    def count(n: int, anchor, mark) -> None:
        nonlocal total
        if anchor:
            sizes[anchor] = n
        if stack:
            stack[-1][1] += n
        else:
            total += n
        if (stack[-1][1] if stack else total) > EXPANDED_NODES_MAX or total > EXPANDED_NODES_MAX:
            raise SpecError(path, f"line {mark.line + 1}", f"expected at most {EXPANDED_NODES_MAX} values once "
                            f"aliases are expanded (YAML anchors and aliases repeat what they name); "
                            f"this file holds more")

    for ev in yaml.parse(text, Loader=yaml.SafeLoader):
        if isinstance(ev, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            stack.append([ev.anchor, 1])
            if len(stack) > DEPTH_MAX:
                raise SpecError(path, f"line {ev.start_mark.line + 1}",
                                f"expected collections nested at most {DEPTH_MAX} deep")
        elif isinstance(ev, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            anchor, n = stack.pop()
            count(n, anchor, ev.start_mark)
        elif isinstance(ev, yaml.ScalarEvent):
            count(1, ev.anchor, ev.start_mark)
        elif isinstance(ev, yaml.AliasEvent):
            # an alias to an unknown (or still open: recursive) anchor is the composer's error
            count(sizes.get(ev.anchor, 1), None, ev.start_mark)


class UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader whose mappings refuse duplicate keys (YAML 1.2 says keys are unique)."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            try:
                hash(key)
            except TypeError:
                continue  # let the base class report unhashable keys
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key {key!r} (first at line {seen[key].start_mark.line + 1})",
                    key_node.start_mark)
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def loads(text: str, path: Path | str = "<string>") -> Any:
    """Parse YAML ``text`` strictly, within :func:`check_bounds`. Raises SpecError(path,
    'line N', problem) on any error."""

    try:
        check_bounds(text, path)
        return yaml.load(text, Loader=UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark else "(file)"
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecError(path, where, f"not valid YAML: {problem}") from None


def load_yaml_file(path: Path | str, what: str = "YAML file") -> Any:
    """Read and parse ``path`` strictly (see module doc). ``what`` names the file's kind in errors.

    Raises:
        SpecError: missing, unreadable, not UTF-8 text, or not valid YAML (one line).
    """

    p = Path(path)
    try:
        raw = p.read_bytes()
    except FileNotFoundError:
        raise SpecError(p, "(file)", f"no such {what}") from None
    except OSError as exc:
        raise SpecError(p, "(file)", f"cannot read the {what}: {exc.strerror or exc}") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SpecError(p, "(file)", f"expected a UTF-8 text {what}, found binary data at byte {exc.start}") from None
    if "\x00" in text:
        raise SpecError(p, "(file)", f"expected a UTF-8 text {what}, found a NUL byte")
    return loads(text, p)
