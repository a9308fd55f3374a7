"""The errors of netrepro's two file formats: :class:`RunFolderError`, a run folder that cannot
be read or analysed (:mod:`netrepro.runfolder`, :mod:`analysis`), and
:class:`CrateValidatorError`, the RO-Crate validator that checks an exported run folder unable
to give a verdict (:mod:`netrepro.runfolder.cratecheck`); and how an experiment file's
errors are found and reported (:mod:`netrepro.experiment.spec`,
:mod:`netrepro.model`, :mod:`netrepro.experiment.migrate`) and the strict YAML reader
(:mod:`netrepro.core.yamlfile`): :class:`SpecError`, whose message is one line naming the file,
the field and what was expected; :func:`check_plain_data`, what a JSON Schema cannot see; the
choice of the one schema error to report (:func:`pick_error`) and its words
(:func:`schema_problem`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import jsonschema


class SpecError(ValueError):
    """An experiment file is missing or invalid. ``str(err)`` is one line: file: field: problem."""

    def __init__(self, path: Path | str, field: str, problem: str):
        self.path, self.field, self.problem = str(path), field, problem
        super().__init__(f"{path}: {field}: {problem}")


class RunFolderError(ValueError):
    """A run folder (``results/<experiment>/<run-id>/``) cannot be read or analysed: its
    run.json missing or malformed, its raw files differing from the record, runs that cannot be
    compared. ``str(err)`` is one line: ``<file>: <what was expected>``."""

    def __init__(self, path: Path | str, problem: str):
        self.path, self.problem = str(path), problem
        super().__init__(f"{path}: {problem}")


class CrateValidatorError(RuntimeError):
    """The RO-Crate validator (roc-validator, in its own virtual environment ``.venv-crate/``)
    could not give a verdict: its python is missing (``str(err)`` names the command that
    installs it), or it stopped without one (a wrong command line, a crash, a time-out).
    ``str(err)`` is one line; :mod:`netrepro.runfolder.cratecheck` raises it."""


def field_path(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def _yaml_number(x: float) -> str:
    """A non-finite float as YAML writes it (``.inf``, ``-.inf``, ``.nan``)."""
    return ".nan" if math.isnan(x) else (".inf" if x > 0 else "-.inf")


def check_plain_data(data: Any, path: Path | str) -> None:
    """What the JSON Schema cannot see: refuse a top level that is not a mapping, a key that
    is not text (YAML reads ``on:``/``yes:`` as true, ``1:`` as a number) and a number that
    is not finite (YAML's ``.inf``, ``.nan``, or ``1.0e+999``), naming the field.

    Raises:
        SpecError: one line, ``<path>: <field>: <problem>``.
    """
    if not isinstance(data, dict):
        kinds = {list: "a list", str: "text", int: "a number", float: "a number", bool: "true/false"}
        found = "an empty file" if data is None else kinds.get(type(data), type(data).__name__)
        raise SpecError(path, "(top level)", f"expected a mapping of the experiment's fields (schema_version, name, "
                                             f"topology, ...), found {found}")

    def walk(x: Any, parts: list) -> None:
        if isinstance(x, dict):
            for k, v in x.items():
                if not isinstance(k, str):
                    raise SpecError(path, field_path(parts), f"expected text keys, got the key {k!r} "
                                                              f"(quote it: YAML reads yes/no/on/off and numbers as such)")
                walk(v, parts + [k])
        elif isinstance(x, list):
            for i, v in enumerate(x):
                walk(v, parts + [i])
        elif isinstance(x, float) and not math.isfinite(x):
            raise SpecError(path, field_path(parts), f"expected a finite number, got {_yaml_number(x)}")

    walk(data, [])


def pick_error(err: jsonschema.ValidationError) -> jsonschema.ValidationError:
    """For a ``oneOf`` whose branches are told apart by a ``kind`` constant (the claims'
    checks), the error of the branch the instance's kind chose; else ``err`` itself."""
    if err.validator != "oneOf" or not isinstance(err.instance, dict) or not err.context:
        return err
    branches: dict[int, list] = {}
    for e in err.context:
        branches.setdefault(e.relative_schema_path[0], []).append(e)
    chosen = [i for i, sub in enumerate(err.validator_value)
              if sub.get("properties", {}).get("kind", {}).get("const") == err.instance.get("kind")]
    if len(chosen) == 1 and branches.get(chosen[0]):
        return pick_error(jsonschema.exceptions.best_match(branches[chosen[0]]))
    return err


def _range_text(schema: dict) -> str:
    """``an integer >= 1 and <= 1000`` from a schema's type and bounds."""
    bounds = [(k, op) for k, op in (("minimum", ">="), ("exclusiveMinimum", ">"),
                                    ("maximum", "<="), ("exclusiveMaximum", "<")) if k in schema]
    kind = "an integer" if schema.get("type") == "integer" else "a number"

    def fmt(x):
        return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"
    return f"{kind} " + " and ".join(f"{op} {fmt(schema[k])}" for k, op in bounds)


def show_value(x: Any) -> str:
    """A value for an error message: huge or tiny floats as ``1e+12``, the rest as repr."""
    if isinstance(x, float) and x != 0 and not 1e-4 <= abs(x) < 1e6:
        return f"{x:.6g}"
    return repr(x)


def _number_as_text(x: Any) -> str:
    """The hint for text that reads as a number (YAML 1.1 reads ``1e12``, without a dot and a
    signed exponent, as text), or ''."""
    if isinstance(x, str):
        try:
            float(x)
        except ValueError:
            return ""
        return " (YAML reads a number such as 1e12 as text: write 1.0e+12)"
    return ""


def schema_problem(err: jsonschema.ValidationError) -> str:
    """What one JSON Schema error means, in words: an unknown field with the fields expected,
    a missing field, a number's whole range (:func:`_range_text`), a pattern's form (the
    schema's ``description``, not the regular expression), a claim's check against the schema
    of its ``kind``; the field's meaning and unit (its ``description``) appended where it
    helps."""
    problem = err.message
    desc = err.schema.get("description") if isinstance(err.schema, dict) else None
    if "propertyNames" in err.schema_path:  # a key of the object (the field) is bad, not a value
        return (f"the name {err.instance!r} is not allowed here: expected "
                f"{desc or 'a name matching ' + repr(err.validator_value)}")
    if err.validator == "additionalProperties":
        problem = f"unknown field ({err.message}); expected one of: {', '.join(sorted(err.schema.get('properties', {})))}"
    elif err.validator == "required":
        problem = f"missing required field ({err.message})"
    elif err.validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        problem = f"expected {_range_text(err.schema)}, got {show_value(err.instance)}"
    elif err.validator == "pattern" and desc:
        return f"expected {desc}; got {err.instance!r}" + _number_as_text(err.instance)
    elif err.validator in ("type", "enum", "pattern", "const"):
        problem = f"expected {err.validator} {err.validator_value!r}, got {show_value(err.instance)}"
        if err.validator in ("type", "pattern"):
            problem += _number_as_text(err.instance)
    elif err.validator == "oneOf" and isinstance(err.instance, dict):
        kinds = [sub.get("properties", {}).get("kind", {}).get("const") for sub in err.validator_value]
        if all(kinds):
            problem = f"expected kind one of {', '.join(kinds)}, got {err.instance.get('kind')!r}"
    if desc and err.validator not in ("additionalProperties", "required"):
        problem += f"; {desc}"
    return problem
