"""Load and validate an experiment specification (experiments/<name>/experiment.yml).

The file is read strictly (:mod:`netrepro.yamlfile`: UTF-8 text, valid YAML, no key given
twice in a mapping) and validated in three steps: :func:`check_plain_data` (a mapping, text
keys, finite numbers), the JSON Schema in ``netrepro/schemas/experiment.schema.json``
(shapes, types, and a range with its unit for every number), then cross-checks that a
schema cannot express (references between sections, the phase schedule matching the flow
groups, addresses inside their subnets, claims only about AQM x variant pairs that a trial
runs, AQM parameters that are tc words, health thresholds only on what a collector
measures). Any failure raises :class:`SpecError` whose
message is one line naming the file, the field (or line) and what was expected.
"""

from __future__ import annotations

import ipaddress
import json
import math
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import jsonschema

from netrepro import model, sweep, tc
from netrepro.errors import SpecError, _field_path, _pick_error, check_plain_data
from netrepro.model import KIND_GROUPS, from_v1, scale_rates
from netrepro.yamlfile import load_yaml_file

REPO_ROOT = Path(__file__).resolve().parent.parent
EXPERIMENTS_DIR = REPO_ROOT / "experiments"
SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "experiment.schema.json"

#: Node roles and the Ansible inventory group each maps to.
ROLE_GROUPS = {"client": "clients", "server": "servers", "router": "routers"}


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

    The file is read strictly (:func:`netrepro.yamlfile.load_yaml_file`: a key given twice in
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


def _range_text(schema: dict) -> str:
    """``an integer >= 1 and <= 1000`` from a schema's type and bounds."""
    bounds = [(k, op) for k, op in (("minimum", ">="), ("exclusiveMinimum", ">"),
                                    ("maximum", "<="), ("exclusiveMaximum", "<")) if k in schema]
    kind = "an integer" if schema.get("type") == "integer" else "a number"
    def fmt(x):
        return str(int(x)) if float(x).is_integer() and abs(x) < 1e16 else f"{x:g}"
    return f"{kind} " + " and ".join(f"{op} {fmt(schema[k])}" for k, op in bounds)


def _show(x: Any) -> str:
    """A value for an error message: huge or tiny floats as ``1e+12``, the rest as repr."""
    if isinstance(x, float) and x != 0 and not 1e-4 <= abs(x) < 1e6:
        return f"{x:.6g}"
    return repr(x)


def validate_schema(data: Any, path: Path | str) -> None:
    """Validate ``data`` against the JSON Schema; raise SpecError for the most relevant error.

    Range errors say the whole range and, like type and pattern errors, the field's meaning
    and unit (its description in the schema). A claim's check is reported against the
    schema of its ``kind``.
    """
    schema = json.loads(SCHEMA_PATH.read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), e.path))
    if not errors:
        return
    err = _pick_error(jsonschema.exceptions.best_match(errors))
    problem = err.message
    desc = err.schema.get("description") if isinstance(err.schema, dict) else None
    if err.validator == "additionalProperties":
        problem = f"unknown field ({err.message}); expected one of: {', '.join(sorted(err.schema.get('properties', {})))}"
    elif err.validator == "required":
        problem = f"missing required field ({err.message})"
    elif err.validator in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
        problem = f"expected {_range_text(err.schema)}, got {_show(err.instance)}"
    elif err.validator in ("type", "enum", "pattern", "const"):
        problem = f"expected {err.validator} {err.validator_value!r}, got {_show(err.instance)}"
        if err.validator == "type" and isinstance(err.instance, str):
            try:
                float(err.instance)
                problem += " (YAML reads a number such as 1e12 as text: write 1.0e+12)"
            except ValueError:
                pass
    elif err.validator == "oneOf" and isinstance(err.instance, dict):
        kinds = [sub.get("properties", {}).get("kind", {}).get("const") for sub in err.validator_value]
        if all(kinds):
            problem = f"expected kind one of {', '.join(kinds)}, got {err.instance.get('kind')!r}"
    if desc and err.validator not in ("additionalProperties", "required"):
        problem += f"; {desc}"
    raise SpecError(path, _field_path(err.absolute_path), problem)


def check_sweep(spec: "Spec") -> None:
    """The file's ``sweep`` (when it has one) as ``netrepro run --sweep`` resolves it
    (:func:`netrepro.sweep.points`): factors, the grid's size (before the grid is built) and
    every point validated as an experiment of its own, so that a file that validates also
    sweeps. Raises SpecError (one line)."""
    if spec.data.get("sweep"):
        sweep.points(spec)


@dataclass
class Spec:
    """A validated experiment spec: ``data`` is the parsed YAML (a dict), ``path`` its file."""

    data: dict
    path: Path

    @classmethod
    def from_data(cls, data: Any, path: Path | str = "<memory>") -> "Spec":
        """Validate parsed YAML ``data`` (:func:`check_plain_data`, the schema, then the
        cross-checks) and wrap it; a file of schema_version 2 becomes a :class:`SpecV2`.
        Raises SpecError (one line)."""
        check_plain_data(data, path)
        version = data.get("schema_version")
        if version == 2 and cls is Spec:
            return SpecV2.from_data(data, path)
        if version not in (1, 2) or isinstance(version, bool):
            raise SpecError(path, "schema_version", f"expected 1 (the PIE vs RED format) or 2 (docs/experiment-format.md), "
                                                    f"got {_show(version)}")
        validate_schema(data, path)
        spec = cls(data, Path(path))
        spec._cross_check()
        check_sweep(spec)
        return spec

    # --- convenient views -----------------------------------------------------------
    @cached_property
    def model(self):
        """The experiment as a :class:`netrepro.model.Model` (what sites, playbooks and the
        analysis read): :func:`netrepro.model.from_v1` of this version 1 file."""
        return from_v1(self)

    @property
    def name(self) -> str:
        return self.data["name"]

    def __getitem__(self, key: str) -> Any:
        return self.data[key]

    def get(self, key: str, default: Any = None) -> Any:
        return self.data.get(key, default)

    @property
    def nodes(self) -> dict[str, dict]:
        """Node name -> node dict (role, interfaces, routes, forwarding), in file order."""
        return self.data["topology"]["nodes"]

    @property
    def networks(self) -> dict[str, dict]:
        return self.data["topology"]["networks"]

    @cached_property
    def groups(self) -> dict[str, list[str]]:
        """Inventory group -> node names: one group per role (clients, servers, routers)."""
        out: dict[str, list[str]] = {g: [] for g in ROLE_GROUPS.values()}
        for node, nd in self.nodes.items():
            out.setdefault(ROLE_GROUPS.get(nd["role"], nd["role"] + "s"), []).append(node)
        return out

    def select(self, selectors: list[str]) -> list[str]:
        """Expand selectors (node names, group names, or ``all``) to node names in file order."""
        chosen: set[str] = set()
        for sel in selectors:
            if sel == "all":
                chosen.update(self.nodes)
            elif sel in self.nodes:
                chosen.add(sel)
            elif sel in self.groups:
                chosen.update(self.groups[sel])
        return [n for n in self.nodes if n in chosen]

    def address(self, node: str, network: str) -> str:
        """Data-plane IPv4 address of ``node`` on ``network`` (KeyError if it has none)."""
        for itf in self.nodes[node]["interfaces"]:
            if itf["network"] == network:
                return itf["address"]
        raise KeyError(f"{node} has no interface on {network}")

    def prefixlen(self, network: str) -> int:
        return ipaddress.ip_network(self.networks[network]["subnet"]).prefixlen

    @property
    def trial_ids(self) -> list[str]:
        """Trial identifiers in run order, ``<aqm>-<variant>``."""
        return [f"{t['aqm']}-{t['variant']}" for t in self.data["trials"]]

    @property
    def duration_s(self) -> float:
        """Length of one trial's schedule in seconds (end of the last phase)."""
        return max(p["end_s"] for p in self.data["phases"])

    def pie_limit_packets(self) -> int:
        """PIE's ``limit`` in packets: buffer_bytes / mtu_bytes, rounded up."""
        return math.ceil(self.data["bottleneck"]["buffer_bytes"] / self.data["links"]["mtu_bytes"])

    # --- cross-checks ---------------------------------------------------------------
    def _fail(self, field: str, problem: str):
        raise SpecError(self.path, field, problem)

    def _cross_check(self) -> None:
        d = self.data
        nets = self.networks
        known_sel = set(self.nodes) | set(self.groups) | {"all"}
        subnets = {}
        for net, nd in nets.items():
            try:
                subnets[net] = ipaddress.ip_network(nd["subnet"])
            except ValueError as exc:
                self._fail(f"topology.networks.{net}.subnet", f"expected an IPv4 network in CIDR form with no host bits ({exc})")
        for node, nd in self.nodes.items():
            for i, itf in enumerate(nd["interfaces"]):
                f = f"topology.nodes.{node}.interfaces[{i}]"
                if itf["network"] not in nets:
                    self._fail(f + ".network", f"unknown network {itf['network']!r}; expected one of: {', '.join(nets)}")
                subnet = subnets[itf["network"]]
                try:
                    addr = ipaddress.ip_address(itf["address"])
                except ValueError:
                    self._fail(f + ".address", f"expected an IPv4 address, got {itf['address']!r}")
                if addr not in subnet:
                    self._fail(f + ".address", f"{itf['address']} is outside {itf['network']} ({subnet})")
        seen: dict[str, str] = {}
        for node, nd in self.nodes.items():
            for itf in nd["interfaces"]:
                if itf["address"] in seen:
                    self._fail(f"topology.nodes.{node}.interfaces", f"address {itf['address']} also used by {seen[itf['address']]}")
                seen[itf["address"]] = node

        def check_sel(field, sels):
            for s in sels:
                if s not in known_sel:
                    self._fail(field, f"unknown node or group {s!r}; expected one of: {', '.join(sorted(known_sel))}")

        for i, dl in enumerate(d["links"].get("delays", [])):
            check_sel(f"links.delays[{i}].nodes", dl["nodes"])
            for n in self.select(dl["nodes"]):
                try:
                    self.address(n, dl["network"])
                except KeyError:
                    self._fail(f"links.delays[{i}].network", f"node {n} has no interface on {dl['network']!r}")
        for i, h in enumerate(d.get("hosts", [])):
            check_sel(f"hosts[{i}].nodes", h["nodes"])
        check_sel("sources.nodes", d.get("sources", {}).get("nodes", []))
        b = d["bottleneck"]
        if b["node"] not in self.nodes:
            self._fail("bottleneck.node", f"unknown node {b['node']!r}")
        try:
            self.address(b["node"], b["network"])
        except KeyError:
            self._fail("bottleneck.network", f"{b['node']} has no interface on {b['network']!r}")
        for i, t in enumerate(d["trials"]):
            if t["aqm"] not in d["aqms"]:
                self._fail(f"trials[{i}].aqm", f"unknown AQM {t['aqm']!r}; expected one of: {', '.join(d['aqms'])}")
            if t["variant"] not in d["variants"]:
                self._fail(f"trials[{i}].variant", f"unknown variant {t['variant']!r}; expected one of: {', '.join(d['variants'])}")
            first = self.trial_ids.index(self.trial_ids[i])
            if first != i:
                self._fail(f"trials[{i}]", f"{self.trial_ids[i]} is already trials[{first}]; expected each AQM x variant once "
                                           f"(a trial's results are kept under its name)")
        for name, a in d["aqms"].items():
            p = a["params"]
            if a["qdisc"] == "red" and not p["min_bytes"] < p["max_bytes"] < p["limit_bytes"]:
                self._fail(f"aqms.{name}.params", "expected min_bytes < max_bytes < limit_bytes")
            try:  # the exact tc words the node will run: every parameter is a valid tc word
                tc.aqm_qdisc(a["qdisc"], p, self.pie_limit_packets()).qdisc_args()
            except ValueError as exc:
                param = getattr(exc, "param", None)
                self._fail(f"aqms.{name}.params" + (f".{param}" if param else ""), getattr(exc, "problem", str(exc)))
        for i, fg in enumerate(d["flows"]):
            for key, role in (("client", "client"), ("server", "server")):
                if fg[key] not in self.nodes:
                    self._fail(f"flows[{i}].{key}", f"unknown node {fg[key]!r}")
            if fg["start_s"] + fg["duration_s"] > self.duration_s + 1e-9:
                self._fail(f"flows[{i}]", f"ends at {fg['start_s'] + fg['duration_s']} s, after the last phase ({self.duration_s} s)")
        prev_end = 0.0
        for i, ph in enumerate(d["phases"]):
            if ph["start_s"] != prev_end or ph["end_s"] <= ph["start_s"]:
                self._fail(f"phases[{i}]", f"expected contiguous phases starting at {prev_end} s with end_s > start_s")
            prev_end = ph["end_s"]
            mid = (ph["start_s"] + ph["end_s"]) / 2
            active = sum(fg["flows"] for fg in d["flows"] if fg["start_s"] <= mid < fg["start_s"] + fg["duration_s"])
            if active != ph["flows"]:
                self._fail(f"phases[{i}].flows", f"expected {active} (the flow groups active in {ph['name']}), got {ph['flows']}")
        names = [p["name"] for p in d["phases"]]
        for i, n in enumerate(names):
            if names.index(n) != i:
                self._fail(f"phases[{i}].name", f"{n!r} already names phases[{names.index(n)}]; expected unique phase names")
        for i, c in enumerate(d["collectors"]):
            check_sel(f"collectors[{i}].nodes", c["nodes"])
            if "network" in c and c["network"] not in nets:
                self._fail(f"collectors[{i}].network", f"unknown network {c['network']!r}; expected one of: {', '.join(nets)}")
        pingers = [n for c in d["collectors"] if c["kind"] == "ping" for n in self.select(c["nodes"])]
        for key in ("ping_received_min_fraction", "queue_delay_excess_max_ms", "queue_delay_excess_max_fraction"):
            if key in d.get("health", {}) and not pingers:  # all read the ping collectors' samples
                self._fail(f"health.{key}", "no ping collector measures it; expected a collector of kind ping "
                                            "(collectors), or leave this threshold out")
        for i, cl in enumerate(d["claims"]):
            ch = cl["check"]
            for aqm_key in ("aqm", "higher", "lower"):
                if aqm_key in ch and ch[aqm_key] not in d["aqms"]:
                    self._fail(f"claims[{i}].check.{aqm_key}", f"unknown AQM {ch[aqm_key]!r}")
            for v in ch.get("variants", []):
                if v not in d["variants"]:
                    self._fail(f"claims[{i}].check.variants", f"unknown variant {v!r}")
            for ph in ch.get("phases", []):
                if ph not in names:
                    self._fail(f"claims[{i}].check.phases", f"unknown phase {ph!r}; expected one of: {', '.join(names)}")
            if "peak_phase" in ch and ch["peak_phase"] not in names:
                self._fail(f"claims[{i}].check.peak_phase", f"unknown phase {ch['peak_phase']!r}; expected one of: {', '.join(names)}")
            if "peak_phase" in ch and ch["peak_phase"] not in ch["phases"]:
                self._fail(f"claims[{i}].check.peak_phase", f"expected one of the claim's phases ({', '.join(ch['phases'])}), "
                                                           f"got {ch['peak_phase']!r}")
            if ch.get("higher") is not None and ch.get("higher") == ch.get("lower"):
                self._fail(f"claims[{i}].check.lower", f"expected an AQM other than higher ({ch['higher']!r})")
            self._check_claim_runs(i, ch)

    def _check_claim_runs(self, i: int, ch: dict) -> None:
        """A claim can only be judged on what the trials run: every AQM it names (``aqm``,
        or ``higher`` and ``lower`` of a ``compare``; analysis/verdict.py) must be run by a
        trial with every variant of ``variants``. Otherwise its rows are missing from
        summary.csv and the claim would fail for want of data, whatever the results."""
        pairs = [(t["aqm"], t["variant"]) for t in self.data["trials"]]
        run_aqms = list(dict.fromkeys(a for a, _ in pairs))
        run_variants = list(dict.fromkeys(v for _, v in pairs))
        keys = [k for k in ("aqm", "higher", "lower") if k in ch]
        for k in keys:
            if ch[k] not in run_aqms:
                self._fail(f"claims[{i}].check.{k}", f"no trial runs AQM {ch[k]!r}; expected one that a trial runs: {', '.join(run_aqms)}")
        for v in ch["variants"]:
            if v not in run_variants:
                self._fail(f"claims[{i}].check.variants",
                           f"no trial runs variant {v!r}; expected one that a trial runs: {', '.join(run_variants)}")
        for k in keys:
            for v in ch["variants"]:
                if (ch[k], v) not in pairs:
                    self._fail(f"claims[{i}].check.variants",
                               f"no trial runs AQM {ch[k]!r} (check.{k}) with variant {v!r}; the trials are: {', '.join(self.trial_ids)}")

    # --- time scaling ------------------------------------------------------------------
    def scaled(self, time_scale: float) -> dict:
        """The schedule with every duration and offset multiplied by ``time_scale``.

        Returns a dict: ``phases`` (list of {name, start_s, end_s, flows}), ``flows`` (list of
        flow groups with scaled start_s/duration_s), ``base_rtt_s``, ``duration_s``.
        Raises ValueError (``TIME_SCALE: ...``, one line) for a scale outside
        [:data:`TIME_SCALE_MIN`, :data:`TIME_SCALE_MAX`] (:func:`check_time_scale`).
        """
        k = check_time_scale(time_scale)
        return {
            "phases": [{**p, "start_s": p["start_s"] * k, "end_s": p["end_s"] * k} for p in self.data["phases"]],
            "flows": [{**f, "start_s": f["start_s"] * k, "duration_s": f["duration_s"] * k} for f in self.data["flows"]],
            "base_rtt_s": self.data["base_rtt"]["duration_s"] * k,
            "duration_s": self.duration_s * k,
        }


def variant_rate_mbit(spec: Spec, variant: str) -> float:
    """Bottleneck rate (Mbit/s) of a variant of a schema_version 1 experiment: ``variants.<v>.bottleneck.rate_mbit`` if set,
    else ``bottleneck.rate_mbit``."""
    v = spec["variants"].get(variant, {})
    return float(v.get("bottleneck", {}).get("rate_mbit", spec["bottleneck"]["rate_mbit"]))


class SpecV2(Spec):
    """An experiment file of schema_version 2 (:mod:`netrepro.model`): the views every site
    and the inventory use, read from its :class:`netrepro.model.Model`. The version 1 views
    (``bottleneck``, ``aqms``, ``variants``, :meth:`scaled`) do not exist here."""

    @classmethod
    def from_data(cls, data: Any, path: Path | str = "<memory>") -> "SpecV2":
        """Validate and resolve (:func:`netrepro.model.build`). Raises SpecError (one line)."""
        try:
            m = model.build(data, path)
        except model.ModelError as exc:
            raise SpecError(exc.path, exc.field, exc.problem) from None
        spec = cls(data, Path(path))
        spec.__dict__["model"] = m
        check_sweep(spec)
        return spec

    @property
    def nodes(self) -> dict[str, dict]:
        """Node name -> the model's node (kind, groups, interfaces by name, routes)."""
        return self.model.nodes

    @property
    def networks(self) -> dict[str, dict]:
        return self.model.data["networks"]

    @cached_property
    def groups(self) -> dict[str, list[str]]:
        """Inventory group -> node names: one per kind in the plural, and each node's groups."""
        out: dict[str, list[str]] = {g: [] for g in KIND_GROUPS.values()}
        for n, nd in self.nodes.items():
            for g in [KIND_GROUPS[nd["kind"]], *nd["groups"]]:
                out.setdefault(g, []).append(n)
        return out

    def select(self, selectors: list[str]) -> list[str]:
        return self.model.select(selectors)

    def at_rate_scale(self, k: float) -> "SpecV2":
        """This experiment with every rate and byte size multiplied by ``k``
        (:func:`netrepro.model.scale_rates`); the file's data (``data``) is unchanged."""
        other = SpecV2(self.data, self.path)
        other.__dict__["model"] = scale_rates(self.model, k)
        return other

    @property
    def trial_ids(self) -> list[str]:
        return [t["id"] for t in self.model.trials]

    @property
    def duration_s(self) -> float:
        """The longest trial's schedule, s."""
        return max(t["duration_s"] for t in self.model.trials)
