"""Load and validate an experiment file (experiments/<name>/experiment.yml).

The file is read strictly (:mod:`netrepro.core.yamlfile`: UTF-8 text, valid YAML, no key given
twice in a mapping), then validated and resolved into the experiment model every stage reads
(:func:`netrepro.model.build`: plain data, the JSON Schema in
``netrepro/schemas/experiment.schema.json``, cross-checks a schema cannot express), and its
sweep checked (:func:`check_sweep`). Any failure raises :class:`SpecError`, whose message is
one line naming the file, the field (or line) and what was expected. A file of the earlier
format (``schema_version: 1``) is refused with the command that converts it
(:mod:`netrepro.experiment.migrate`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, Mapping

from netrepro import model
from netrepro.experiment import sweep
from netrepro.core.errors import SpecError, check_plain_data, show_value
from netrepro.model import KIND_GROUPS, Model, Node, scale_rates
from netrepro.core.yamlfile import load_yaml_file

REPO_ROOT = Path(__file__).resolve().parents[2]
EXPERIMENTS_DIR = REPO_ROOT / "experiments"
#: The schema_version this toolkit reads.
SCHEMA_VERSION = 2


def resolve_path(name_or_path: str | Path) -> Path:
    """Map an experiment name (``pie-vs-red``) or a path to its experiment.yml path."""
    p = Path(name_or_path)
    if p.suffix in (".yml", ".yaml") or p.is_file():
        return p
    if p.is_dir():
        return p / "experiment.yml"
    return EXPERIMENTS_DIR / str(name_or_path) / "experiment.yml"


def load_spec(name_or_path: str | Path) -> "Spec":
    """Read, validate and return the experiment spec.

    The file is read strictly (:func:`netrepro.core.yamlfile.load_yaml_file`: a key given twice in
    a mapping, such as a node defined twice, is refused with its line), then checked by
    :meth:`Spec.from_data`.

    Args:
        name_or_path: an experiment name under experiments/, a folder, or a YAML file.
    Raises:
        SpecError: the file is missing, not UTF-8 YAML, has a duplicate key, is not a
            mapping, or is invalid (one-line message naming the file and the field or line).
    """
    path = resolve_path(name_or_path)
    if not path.is_file():
        known = sorted(d.name for d in EXPERIMENTS_DIR.iterdir() if (d / "experiment.yml").is_file())
        raise SpecError(path, "(file)", f"no such experiment file; known experiments: {', '.join(known)}")
    return Spec.from_data(load_yaml_file(path, "experiment file"), path)


#: The range of TIME_SCALE (the factor of every duration of the schedule): from a
#: thousandth (the 250 s pie-vs-red trial in 0.25 s) to a hundredfold (about 7 hours).
TIME_SCALE_MIN, TIME_SCALE_MAX = 0.001, 100.0


def check_time_scale(value: Any) -> float:
    """``value`` (a number or its text, e.g. ``$TIME_SCALE``) as a float within
    [:data:`TIME_SCALE_MIN`, :data:`TIME_SCALE_MAX`].

    Raises:
        ValueError: not a number, not finite, or out of range; the message is one line
            beginning ``TIME_SCALE:``.
    """
    try:
        k = float(value)
    except (TypeError, ValueError):
        k = math.nan
    if isinstance(value, bool) or not TIME_SCALE_MIN <= k <= TIME_SCALE_MAX:
        raise ValueError(f"TIME_SCALE: expected a number from {TIME_SCALE_MIN:g} to {TIME_SCALE_MAX:g} "
                         f"(the factor of every duration), got {value!r}")
    return k


def check_sweep(spec: "Spec") -> None:
    """The file's ``sweep`` (when it has one) as ``netrepro run --sweep`` resolves it
    (:func:`netrepro.experiment.sweep.points`): factors, the grid's size (before the grid is built) and
    every point validated as an experiment of its own, so that a file that validates also
    sweeps. Raises SpecError (one line)."""
    if spec.data.get("sweep"):
        sweep.points(spec)


@dataclass
class Spec:
    """A validated experiment file: ``data`` is the parsed YAML (a dict, as written), ``path``
    its file, :attr:`model` the resolved experiment (:class:`netrepro.model.Model`) that every
    site, playbook and the analysis read."""

    data: dict
    path: Path

    @classmethod
    def from_data(cls, data: Any, path: Path | str = "<memory>") -> "Spec":
        """Validate parsed YAML ``data`` and resolve it (:func:`netrepro.model.build`), then
        check its sweep (:func:`check_sweep`).

        Raises:
            SpecError: one line naming the file and field; for ``schema_version: 1``, the
                command that converts the file (``netrepro migrate FILE``).
        """
        check_plain_data(data, path)
        version = data.get("schema_version")
        if version == 1 and not isinstance(version, bool):
            raise SpecError(path, "schema_version", f"1 is the earlier format, which this toolkit no longer reads; "
                                                    f"convert the file with `netrepro migrate {path}`")
        if version != SCHEMA_VERSION or isinstance(version, bool):
            raise SpecError(path, "schema_version", f"expected {SCHEMA_VERSION} (docs/experiment-format.md), "
                                                    f"got {show_value(version)}")
        try:
            m = model.build(data, path)
        except model.ModelError as exc:
            raise SpecError(exc.path, exc.field, exc.problem) from None
        spec = cls(data, Path(path))
        spec.__dict__["model"] = m
        check_sweep(spec)
        return spec

    @cached_property
    def model(self) -> Model:
        """The resolved experiment (set by :meth:`from_data`)."""
        return model.build(self.data, self.path)

    @property
    def name(self) -> str:
        return self.data["name"]

    @property
    def nodes(self) -> Mapping[str, Node]:
        """Node name -> the model's :class:`~netrepro.model.records.Node` (kind, groups,
        interfaces by name, routes), in file order."""
        return self.model.nodes

    @property
    def networks(self) -> dict[str, dict]:
        return self.model.networks

    @cached_property
    def groups(self) -> dict[str, list[str]]:
        """Inventory group -> node names: one per kind in the plural, and each node's groups."""
        out: dict[str, list[str]] = {g: [] for g in KIND_GROUPS.values()}
        for n, nd in self.nodes.items():
            for g in [KIND_GROUPS[nd.kind], *nd.groups]:
                out.setdefault(g, []).append(n)
        return out

    def select(self, selectors: list[str]) -> list[str]:
        """Node names (file order) of selectors: node names, group names or ``all``."""
        return self.model.select(selectors)

    def at_rate_scale(self, k: float) -> "Spec":
        """This experiment with every rate and byte size multiplied by ``k``
        (:func:`netrepro.model.scale_rates`); the file's data (``data``) is unchanged."""
        other = Spec(self.data, self.path)
        other.__dict__["model"] = scale_rates(self.model, k)
        return other

    @property
    def trial_ids(self) -> list[str]:
        """Trial ids in file order."""
        return [t.id for t in self.model.trials]

    @property
    def duration_s(self) -> float:
        """The longest trial's schedule, s."""
        return max(t.duration_s for t in self.model.trials)
