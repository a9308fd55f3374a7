"""Sweeps: the experiment's trials run at every combination of some settings' values.

An experiment may declare factors in its file::

    sweep:
      factors:
        - name: rate_mbit                       # a column of the results
          paths: [trials.pie.qdiscs.router:eth1.0.rate_mbit, trials.red.qdiscs.router:eth1.0.rate_mbit]
          values: [5, 10, 20]
        - name: pie_target_ms
          paths: [trials.pie.qdiscs.router:eth1.1.target_ms]
          values: [5, 20]
          trials: [pie]                         # only these trials vary it (default: all)

and ``netrepro run --sweep`` runs each trial at every point of the cross product of the
factors that apply to it (a full factorial design: D. C. Montgomery, *Design and Analysis of
Experiments*, 8th ed., 2013, ch. 5). A point is the experiment file with each factor's
``paths`` set to one of its values; it is validated as a file of its own (schema and
cross-checks), so a combination the experiment cannot run is refused before anything runs.

A factor may only change what the trial playbook puts in place before every trial, since the
nodes are provisioned once per run: each trial's qdisc stacks, sysctls and traffic
(playbooks/trial.yml installs them afresh), and the phases. Each point's model
(:mod:`netrepro.model`) is compared with the file's: a point that changes any other part
(:data:`PER_TRIAL_PARTS`: the topology, the links' MTU and offloads, the collectors, the base
RTT, health, claims, figures) is refused, naming the path that changes it.

A path is keys joined by dots; in a list, a segment is an index (``flows.1.flows``) or the
``id`` of an item (``trials.codel.qdiscs``). Points are ``p1``, ``p2``, ... in the order of
the cross product (the first factor varies slowest); a trial instance of a sweep is
``<trial>.p<i>`` (``<trial>.p<i>.r<k>`` when repeated, :mod:`netrepro.runner.schedule`).
"""

from __future__ import annotations

import copy
import itertools
import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from netrepro.core.errors import SpecError
from netrepro.model import RESERVED_COLUMNS

if TYPE_CHECKING:  # annotations only: netrepro.experiment.spec validates a file's sweep with this module
    from netrepro.experiment.spec import Spec

#: The parts of the model (:attr:`netrepro.model.Model.data`) a point may change: each trial
#: (its qdisc stacks, sysctls and traffic, which playbooks/trial.yml installs before it) and
#: the phases (which the analysis cuts each trial into). Every other part is set when the
#: nodes are provisioned or read for the whole run.
PER_TRIAL_PARTS = ("trials", "phases")

#: The most points a sweep may have (a pie-vs-red trial is ~5 min: 200 points are 17 hours).
POINTS_MAX = 200
#: The most trial instances a sweep may run (each trial once per combination of the values of
#: the factors that apply to it): 1000 of the labs' 90 s trials are 25 hours on the local
#: site, at TIME_SCALE 1.
INSTANCES_MAX = 1000


@dataclass(frozen=True)
class Point:
    """One point of a sweep: ``id`` (``p<i>``), ``values`` (every factor's name -> its value
    here) and ``trials`` (the trial ids run at it: :func:`points`)."""

    id: str
    values: dict = field(hash=False)
    trials: tuple[str, ...]

    def as_dict(self) -> dict:
        return {"id": self.id, "values": dict(self.values), "trials": list(self.trials)}

    def label(self) -> str:
        """``name=value, ...`` for reports and progress lines."""
        return ", ".join(f"{k}={v}" for k, v in self.values.items())


def factors(spec: Spec) -> list[dict]:
    """The experiment's sweep factors (``sweep.factors``), each with ``paths`` as a list;
    [] when the file declares none."""
    out = []
    for f in (spec.data.get("sweep") or {}).get("factors") or []:
        paths = f.get("paths") or [f["path"]]
        out.append({**f, "paths": list(paths) if isinstance(paths, list) else [paths]})
    return out


def _segments(path: str) -> list[str]:
    return [s for s in path.split(".")]


def _step(node: Any, seg: str, where: str) -> tuple[Any, Any]:
    """(container, key) of segment ``seg`` in ``node``; KeyError(why) when it is not there."""
    if isinstance(node, dict):
        if seg not in node:
            raise KeyError(f"{where}: no key {seg!r} (expected one of: {', '.join(map(str, node))})")
        return node, seg
    if isinstance(node, list):
        if seg.isdigit() and int(seg) < len(node):
            return node, int(seg)
        for i, item in enumerate(node):
            if isinstance(item, dict) and item.get("id") == seg:
                return node, i
        raise KeyError(f"{where}: no item {seg!r} (expected an index below {len(node)} or an item's id)")
    raise KeyError(f"{where}: {type(node).__name__} has no {seg!r}")


def set_path(data: dict, path: str, value: Any) -> None:
    """Set ``path`` (dots, list indexes or item ids) in ``data`` to ``value``, in place. The
    path must exist (a sweep changes settings, it does not add them). Raises KeyError(why)."""
    segs = _segments(path)
    node: Any = data
    for n, seg in enumerate(segs):
        where = ".".join(segs[:n]) or "the file"
        container, key = _step(node, seg, where)
        if n == len(segs) - 1:
            container[key] = copy.deepcopy(value)
        else:
            node = container[key]


def point_data(data: dict, fs: list[dict], values: dict) -> dict:
    """A copy of the experiment's ``data`` at one point (factor name -> value), without its
    ``sweep``. Raises KeyError(why) for a path that is not in the file."""
    out = copy.deepcopy(data)
    out.pop("sweep", None)
    for f in fs:
        if f["name"] in values:
            for p in f["paths"]:
                set_path(out, p, values[f["name"]])
    return out


def point_spec(spec: Spec, values: dict) -> Spec:
    """The experiment at one point, validated as ``spec`` was (its class's
    :meth:`netrepro.experiment.spec.Spec.from_data`). Raises SpecError naming the point when the
    combination is not a valid experiment."""
    fs = factors(spec)
    try:
        data = point_data(spec.data, fs, values)
    except KeyError as exc:
        raise SpecError(spec.path, "sweep.factors", exc.args[0]) from None
    try:
        return type(spec).from_data(data, spec.path)
    except SpecError as exc:
        label = ", ".join(f"{k}={v}" for k, v in values.items())
        raise SpecError(spec.path, "sweep", f"the point {label} is not a valid experiment: {exc}") from None


def check(spec: Spec) -> list[dict]:
    """The factors, checked: each name is unique and no column of the analysis's tables
    (:func:`_reserved_columns`), each path exists, each ``trials`` entry is a trial of the
    file, and the grid is within :func:`size`'s bounds. (That a path changes only per-trial
    settings is checked on each point's model: :func:`points`.) Raises SpecError (one line,
    naming ``sweep.factors[i]``); a file without factors raises one too."""
    fs = factors(spec)
    where = "sweep.factors"
    if not fs:
        raise SpecError(spec.path, "sweep", "--sweep needs factors to vary: add sweep.factors "
                                            "(name, paths, values) to the experiment file")
    columns = _reserved_columns(spec)
    names = set()
    for i, f in enumerate(fs):
        if f["name"] in names:
            raise SpecError(spec.path, f"{where}[{i}].name", f"{f['name']!r} is used twice; expected unique names")
        names.add(f["name"])
        if f["name"] in columns:
            raise SpecError(spec.path, f"{where}[{i}].name", f"{f['name']!r} names a column of the analysis's "
                            f"statistics tables (or a trial label); expected another name")
        for p in f["paths"]:
            try:
                point_data(spec.data, [f], {f["name"]: f["values"][0]})
            except KeyError as exc:
                raise SpecError(spec.path, f"{where}[{i}].paths", exc.args[0]) from None
        for t in f.get("trials") or []:
            if t not in spec.trial_ids:
                raise SpecError(spec.path, f"{where}[{i}].trials",
                                f"{t!r} is not a trial; expected one of: {', '.join(spec.trial_ids)}")
    size(spec, fs)
    return fs


def _reserved_columns(spec: Spec) -> set[str]:
    """Columns a factor may not be named like, since the swept analysis adds a column per
    factor to the statistics tables: theirs (:data:`netrepro.model.RESERVED_COLUMNS`) and the
    trials' labels."""
    return set(RESERVED_COLUMNS) | {k for t in spec.model.trials for k in t.labels}


def size(spec: Spec, fs: list[dict]) -> tuple[int, int]:
    """(points, trial instances) of the sweep of factors ``fs``, counted without building the
    grid: points are the product of the factors' value counts; a trial runs once per
    combination of the values of the factors that apply to it.

    Raises:
        SpecError: more than :data:`POINTS_MAX` points or :data:`INSTANCES_MAX` instances.
    """
    n_points = math.prod(len(f["values"]) for f in fs)
    if n_points > POINTS_MAX:
        counts = " x ".join(str(len(f["values"])) for f in fs)
        raise SpecError(spec.path, "sweep.factors", f"{counts} values make {n_points} points; "
                                                    f"expected at most {POINTS_MAX}")
    instances = sum(math.prod(len(f["values"]) for f in fs if applies(f, t)) for t in spec.trial_ids)
    if instances > INSTANCES_MAX:
        raise SpecError(spec.path, "sweep.factors", f"{instances} trial instances ({n_points} points of "
                                                    f"{len(spec.trial_ids)} trials); expected at most {INSTANCES_MAX}")
    return n_points, instances


def applies(factor: dict, trial: str) -> bool:
    """Whether ``factor`` varies for ``trial`` (its ``trials``, default every trial)."""
    return not factor.get("trials") or trial in factor["trials"]


def points(spec: Spec) -> list[Point]:
    """Every point of the sweep (the full cross product of the factors' values, the first
    factor varying slowest), each with the trials run at it, every point's experiment
    validated (:func:`point_spec`) and changing only the model's :data:`PER_TRIAL_PARTS`
    (:func:`_check_per_trial`).

    A trial that a factor does not apply to (``trials``) runs once per combination of the
    factors that do, at the first point with it; the analysis of the other points with that
    combination reads that instance (:func:`source_point`).

    Raises:
        SpecError: as :func:`check` (more than :data:`POINTS_MAX` points or
            :data:`INSTANCES_MAX` trial instances among them), an invalid point, or a point
            that changes what the nodes are provisioned with.
    """
    fs = check(spec)  # the grid's size is checked before it is built
    grid = list(itertools.product(*[f["values"] for f in fs]))
    seen: set[tuple] = set()
    out = []
    for i, vals in enumerate(grid, 1):
        values = {f["name"]: v for f, v in zip(fs, vals)}
        _check_per_trial(spec, fs, values, point_spec(spec, values))
        run_here = []
        for t in spec.trial_ids:
            key = (t, tuple((f["name"], repr(values[f["name"]])) for f in fs if applies(f, t)))
            if key not in seen:
                seen.add(key)
                run_here.append(t)
        out.append(Point(f"p{i}", values, tuple(run_here)))
    return out


def _provisioned(spec: Spec) -> dict:
    """The parts of ``spec``'s model other than :data:`PER_TRIAL_PARTS`."""
    return {k: v for k, v in spec.model.data.items() if k not in PER_TRIAL_PARTS}


def _check_per_trial(spec: Spec, fs: list[dict], values: dict, point: Spec) -> None:
    """Refuse ``point`` (the experiment at ``values``) when its model differs from ``spec``'s
    outside :data:`PER_TRIAL_PARTS`: SpecError naming the first path that changes it alone
    (``sweep.factors[i].paths``), else the point and the parts it changes (``sweep``)."""
    base = _provisioned(spec)
    got = _provisioned(point)
    if got == base:
        return
    expected = "expected paths that change only the trials (their qdiscs, sysctls and traffic) or the phases"
    for i, f in enumerate(fs):
        for p in f["paths"]:
            try:
                alone = type(spec).from_data(point_data(spec.data, [{**f, "paths": [p]}], values), spec.path)
            except SpecError:
                continue  # not a valid experiment alone: the point as a whole is refused below
            if _provisioned(alone) != base:
                raise SpecError(spec.path, f"sweep.factors[{i}].paths",
                                f"{p!r} is set when the nodes are provisioned, not before each trial; {expected}")
    parts = ", ".join(sorted(k for k in base.keys() | got.keys() if base.get(k) != got.get(k)))
    label = ", ".join(f"{k}={v}" for k, v in values.items())
    raise SpecError(spec.path, "sweep", f"the point {label} changes the experiment's {parts}, set when the nodes "
                                        f"are provisioned, not before each trial; {expected}")


def trial_factors(fs: list[dict], point: Point, trial: str) -> dict:
    """The factor values of ``trial``'s instance at ``point``: the factors that apply to it."""
    return {f["name"]: point.values[f["name"]] for f in fs if applies(f, trial)}


def source_point(pts: list[Point], fs: list[dict], point: Point, trial: str) -> Point | None:
    """The point where ``trial`` ran for ``point``'s values of the factors that apply to it
    (``point`` itself when the trial ran there); None when it ran at no such point."""
    want = trial_factors(fs, point, trial)
    return next((p for p in pts if trial in p.trials and trial_factors(fs, p, trial) == want), None)


def from_record(spec: Spec, record: dict) -> list[Point]:
    """The points of a run as run.json recorded them (``sweep.points``); the same order."""
    return [Point(p["id"], dict(p["values"]), tuple(p["trials"])) for p in record.get("points") or []]


def cells(pts: list[Point], trial_ids: list[str]) -> list[tuple[str, str]]:
    """(trial, point id) of every trial instance of one repetition, in the file's trial order
    and then the points' order; ``trial_ids`` limits the trials (``--trial``)."""
    return [(t, p.id) for t in trial_ids for p in pts if t in p.trials]
