"""Read a run directory's ``run.json`` into plain objects the other modules use.

A run directory is ``results/<experiment>/<run-id>/`` with ``run.json`` and ``raw/``.
Structural problems of run.json (missing, not JSON, a trial without its start time) raise
:class:`AnalysisError`; missing raw files are not errors here (see :mod:`analysis.tidy`).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from netrepro.spec import Spec, SpecError


class AnalysisError(Exception):
    """The run directory cannot be analysed. ``str(err)`` is one line: file: what was expected."""

    def __init__(self, path: Path | str, problem: str):
        self.path, self.problem = str(path), problem
        super().__init__(f"{path}: {problem}")


@dataclass
class TrialInfo:
    """One trial (one AQM x one variant) as run.

    Attributes:
        id: trial id, also the folder name under raw/ (``pie-unlimited``).
        aqm, variant: keys into the spec's ``aqms`` and ``variants``.
        start_epoch_s: Unix time (s) of the trial's common start; None if the trial did not run.
        phases: list of {name, start_s, end_s, flows}, seconds from start_epoch_s (time-scaled).
        rate_mbit: bottleneck rate for this variant (variant override, else spec bottleneck).
        bottleneck_interface: router interface the qdisc stats were read from, if recorded.
        base_rtt_ms: client -> base RTT in ms: from run.json if recorded; analysis.tidy adds
            the ones it computes from base_rtt.txt and notes them in ``base_rtt_origin``.
        ran: False when run.json has no record of this trial.
    """

    id: str
    aqm: str
    variant: str
    start_epoch_s: float | None
    phases: list[dict]
    rate_mbit: float
    bottleneck_interface: str | None = None
    base_rtt_ms: dict[str, float] = field(default_factory=dict)
    ran: bool = True
    base_rtt_origin: dict[str, str] = field(default_factory=dict)


@dataclass
class RunInfo:
    """A run directory: ``dir``, parsed ``data`` (run.json), ``spec``, ``time_scale``, ``trials``."""

    dir: Path
    data: dict
    spec: Spec
    time_scale: float
    trials: list[TrialInfo]

    @property
    def raw_dir(self) -> Path:
        return self.dir / "raw"


def variant_rate_mbit(spec: Spec, variant: str) -> float:
    """Bottleneck rate (Mbit/s) of a variant: ``variants.<v>.bottleneck.rate_mbit`` if set,
    else ``bottleneck.rate_mbit``."""
    v = spec["variants"].get(variant, {})
    return float(v.get("bottleneck", {}).get("rate_mbit", spec["bottleneck"]["rate_mbit"]))


def load_run(run_dir: Path | str, spec: Spec | None = None) -> RunInfo:
    """Read ``run_dir/run.json`` and list the trials to analyse.

    Trials come from run.json, in its order; trials of the spec that run.json lacks are
    appended with ``ran=False`` (their summary rows show 0 samples). Phases come from the
    trial record, else from ``spec.scaled(time_scale)``.

    Args:
        run_dir: the run directory.
        spec: the experiment spec; default ``Spec.from_data(run.json["spec"])``.
    Raises:
        AnalysisError: run_dir or run.json missing, run.json not a JSON object, a trial
            lacking aqm/variant/start_epoch_s, or a bad time_scale.
        SpecError: run.json's spec does not validate (one-line message).
    """
    run_dir = Path(run_dir)
    path = run_dir / "run.json"
    if not run_dir.is_dir():
        raise AnalysisError(run_dir, "expected a run directory (results/<experiment>/<run-id>/)")
    if not path.is_file():
        raise AnalysisError(path, "missing; expected the run record written by the orchestrator")
    try:
        data = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise AnalysisError(path, f"expected JSON ({exc})") from None
    if not isinstance(data, dict):
        raise AnalysisError(path, "expected a JSON object")
    if spec is None:
        if not isinstance(data.get("spec"), dict):
            raise AnalysisError(path, 'expected a "spec" object (the experiment.yml as run)')
        spec = Spec.from_data(data["spec"], f"{path}:spec")
    ts = data.get("time_scale", 1.0)
    if isinstance(ts, bool) or not isinstance(ts, (int, float)) or not ts > 0:
        raise AnalysisError(path, f'"time_scale": expected a number > 0, got {ts!r}')
    default_phases = spec.scaled(ts)["phases"]
    raw_trials = data.get("trials", [])
    if not isinstance(raw_trials, list):
        raise AnalysisError(path, '"trials": expected a list')

    trials: list[TrialInfo] = []
    for i, t in enumerate(raw_trials):
        where = f'"trials"[{i}]'
        if not isinstance(t, dict) or "aqm" not in t or "variant" not in t:
            raise AnalysisError(path, f"{where}: expected an object with aqm and variant")
        if t["aqm"] not in spec["aqms"] or t["variant"] not in spec["variants"]:
            raise AnalysisError(path, f"{where}: aqm/variant {t['aqm']}/{t['variant']} not in the spec")
        start = t.get("start_epoch_s")
        if isinstance(start, bool) or not isinstance(start, (int, float)) or not math.isfinite(start):
            raise AnalysisError(path, f"{where}.start_epoch_s: expected Unix seconds, got {start!r}")
        phases = t.get("phases") or default_phases
        for j, ph in enumerate(phases):
            if not isinstance(ph, dict) or not {"name", "start_s", "end_s"} <= set(ph):
                raise AnalysisError(path, f"{where}.phases[{j}]: expected {{name, start_s, end_s, flows}}")
        base = t.get("base_rtt_ms") or {}
        trials.append(TrialInfo(
            id=str(t.get("id") or f"{t['aqm']}-{t['variant']}"),
            aqm=t["aqm"], variant=t["variant"], start_epoch_s=float(start),
            phases=[dict(p) for p in phases], rate_mbit=variant_rate_mbit(spec, t["variant"]),
            bottleneck_interface=t.get("bottleneck_interface"),
            base_rtt_ms={k: float(v) for k, v in base.items() if isinstance(v, (int, float))},
        ))
    have = {(t.aqm, t.variant) for t in trials}
    for t in spec["trials"]:
        if (t["aqm"], t["variant"]) not in have:
            trials.append(TrialInfo(
                id=f"{t['aqm']}-{t['variant']}", aqm=t["aqm"], variant=t["variant"],
                start_epoch_s=None, phases=[dict(p) for p in default_phases],
                rate_mbit=variant_rate_mbit(spec, t["variant"]), ran=False,
            ))
    return RunInfo(dir=run_dir, data=data, spec=spec, time_scale=float(ts), trials=trials)


__all__ = ["AnalysisError", "TrialInfo", "RunInfo", "load_run", "variant_rate_mbit", "SpecError"]
