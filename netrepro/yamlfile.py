"""Read the YAML files users write (experiments, static sites, aggregates), strictly.

PyYAML's ``safe_load`` silently keeps the last of two equal keys in a mapping, so a node or
an aggregate defined twice is merged without a word. :func:`load_yaml_file` refuses it, and
every other problem (missing, unreadable, not UTF-8, not YAML) becomes one
:class:`~netrepro.spec.SpecError` line naming the file and, where known, the line.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml


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
    """Parse YAML ``text`` strictly. Raises SpecError(path, 'line N', problem) on any error."""
    from netrepro.spec import SpecError

    try:
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
    from netrepro.spec import SpecError

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
