"""``netrepro migrate FILE``: the schema_version 2 text of a schema_version 1 experiment.

Version 1 is pie-vs-red's format (AQM x variant trials around one HTB bottleneck, FTP flow
groups, ping collectors: :func:`netrepro.model.from_v1` reads it). :func:`migrate` writes the
same experiment in version 2 (docs/experiment-format.md), and :func:`migrate_data` gives it as
data, so that the analysis (analysis/generic.py) computes and judges what version 1's analysis
did, with the same numbers (tests/test_recorded_v1_runs.py: a run recorded with the version 1
file, against the outputs version 1's analysis wrote for it); runs recorded with a version 1
file are analysed through it:

- topology: a node's interfaces are named ``eth1``, ``eth2``, ... in file order (as
  :func:`~netrepro.model.from_v1` and the sites name them); a node that forwards is a
  ``router``; the others keep their role as a group (``clients``, ``servers``);
- qdiscs: the netem of ``links.delays`` as the default stacks; each trial
  ``<aqm>-<variant>`` gets the bottleneck's HTB with the AQM as its leaf, labels
  ``{aqm, variant}``, and its own traffic when it differs from the first trial's;
- traffic: one FTP item per flow group, one ping item per pinging client toward its
  flow group's server, with ``timestamp: received`` (version 1 places a ping sample at its
  reply's time: the reply crosses the bottleneck queue last);
- claims (version 1's statistic -> version 2's statistic and subject, :data:`STATISTIC_MAP`):
  ``bound`` keeps its thresholds; ``rise_and_fall`` becomes one check per variant (an
  ``all_of`` when there are several); ``compare`` becomes a ``difference`` of the queueing
  delay, with ``max_utilization_difference`` an ``all_of`` of it and an ``absolute``
  ``difference`` of ``sent_utilization`` at most that value;
- ``health``, ``reference``, ``reference_results``, ``base_rtt`` (without its
  ``interval_s``: the ping items' interval is used), phases: kept;
- sweep paths: :func:`_sweep_paths`; a factor with a path version 2 cannot express is
  named in a comment at the top of the output.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from netrepro import tc
from netrepro.model import HEALTH_DATA, HEALTH_NEEDS, health_data
from netrepro.spec import SpecError, Spec, resolve_path
from netrepro.yamlfile import load_yaml_file

#: Version 1's summary columns a claim may read -> (version 2 statistic, subject): the
#: queueing delay statistics of the pings pooled on the trial subject ``all``; the
#: utilisation of the bottleneck port (``None``: the bottleneck's port, known per file).
STATISTIC_MAP = {
    "delay_median_ms": ("queue_delay_median_ms", "all"),
    "delay_mean_ms": ("queue_delay_mean_ms", "all"),
    "delay_p95_ms": ("queue_delay_p95_ms", "all"),
    "samples": ("queue_delay_samples", "all"),
    "utilization": ("sent_utilization", None),
}


class _Flow(list):
    """A list written in YAML's flow style (``[a, b]``)."""


class _Dumper(yaml.SafeDumper):
    """YAML as a person writes it: no anchors, short mappings of plain values on one line."""

    def ignore_aliases(self, data):
        return True


def _short(v: dict) -> bool:
    return len(v) <= 8 and all(not isinstance(x, (dict, list)) and len(str(x)) <= 40 for x in v.values())


_Dumper.add_representer(_Flow, lambda d, v: d.represent_sequence("tag:yaml.org,2002:seq", v, flow_style=True))
_Dumper.add_representer(dict, lambda d, v: d.represent_mapping("tag:yaml.org,2002:map", v.items(), flow_style=_short(v)))


def _selection(statistic: str, trials: list[str], subject: str, phases: list[str]) -> dict:
    return {"statistic": statistic, "trials": _Flow(trials), "subjects": _Flow([subject]), "phases": _Flow(phases)}


def _claim(cl: dict, bport: str) -> dict:
    """One version 1 claim as a version 2 claim (see the module docstring)."""
    ch = cl["check"]

    def sel(stat, trials):
        name, subject = STATISTIC_MAP[stat]
        return _selection(name, trials, subject or bport, list(ch["phases"]))

    if ch["kind"] == "bound":
        check = {"kind": "bound", "select": sel(ch["statistic"], [f"{ch['aqm']}-{v}" for v in ch["variants"]])}
        check.update({k: ch[k] for k in ("min", "max") if k in ch})
    elif ch["kind"] == "rise_and_fall":
        parts = [{"kind": "rise_and_fall", "select": sel(ch["statistic"], [f"{ch['aqm']}-{v}"]), "order": "phases",
                  "peak": ch["peak_phase"], "tolerance": ch["tolerance_ms"], "min_rise": ch["min_rise_ms"]}
                 for v in ch["variants"]]
        check = parts[0] if len(parts) == 1 else {"kind": "all_of", "checks": parts}
    else:  # compare
        hi = [f"{ch['higher']}-{v}" for v in ch["variants"]]
        lo = [f"{ch['lower']}-{v}" for v in ch["variants"]]
        check = {"kind": "difference", "higher": sel(ch["statistic"], hi), "lower": sel(ch["statistic"], lo),
                 "min": ch["min_difference_ms"]}
        if "max_utilization_difference" in ch:
            util = {"kind": "difference", "absolute": True, "higher": sel("utilization", hi),
                    "lower": sel("utilization", lo), "max": ch["max_utilization_difference"]}
            check = {"kind": "all_of", "checks": [check, util]}
    out = {"id": cl["id"], "text": cl["text"]}
    if cl.get("note"):
        out["note"] = cl["note"]
    out["check"] = check
    return out


def _sweep_paths(path: str, spec, bport: str) -> list[str] | None:
    """The version 2 paths of a version 1 sweep path, or None when it has none: the
    bottleneck's rate is the HTB layer's (index 0 of the bottleneck port's stack in every
    trial), an AQM's parameter its leaf's (index 1, in the trials of that AQM), a phase's
    field the same path."""
    parts = path.split(".")
    trials = [(f"{t['aqm']}-{t['variant']}", t["aqm"]) for t in spec.data["trials"]]
    if parts == ["bottleneck", "rate_mbit"]:
        return [f"trials.{tid}.qdiscs.{bport}.0.rate_mbit" for tid, _ in trials]
    if len(parts) == 4 and parts[0] == "aqms" and parts[2] == "params":
        key = parts[3]
        return [f"trials.{tid}.qdiscs.{bport}.1.{key}" for tid, aqm in trials if aqm == parts[1]] or None
    if parts[0] == "phases":
        return [path]
    return None


def _plain(x):
    """``x`` with its YAML styling (:class:`_Flow`) removed: plain dicts and lists."""
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_plain(v) for v in x]
    return x


def _version_1(data, where) -> None:
    """Raise SpecError unless ``data`` is of schema_version 1 (checked before validating: a
    version 2 file is refused for what it is, not for its content)."""
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != 1:
        raise SpecError(where, "schema_version", f"expected 1 (the file to migrate), got {version!r}"
                        + (": it is already version 2" if version == 2 else ""))


def _convert(data: dict, where) -> tuple[dict, list[str], str]:
    """``(version 2 data, notes, bottleneck port)`` of the version 1 ``data`` (see the module
    docstring); the notes name what version 2 cannot keep. Raises SpecError as
    :func:`migrate_data`."""
    spec = Spec.from_data(data, where)
    d, m = spec.data, spec.model
    # the bottleneck: the port whose stack is rooted in a shaper (version 1's HTB)
    bport = next(p for t in m.trials for p, st in t["qdiscs"].items() if st and st[0]["kind"] in tc.SHAPERS)
    notes: list[str] = []
    nodes = {}
    for n, nd in m.nodes.items():
        v1 = spec.nodes[n]
        node: dict = {"kind": nd["kind"]} if nd["kind"] != "host" else {}
        if nd["kind"] != "router":
            node["groups"] = _Flow([v1["role"] + "s"])
        node["interfaces"] = {i: {"network": itf["network"], "address": itf["address"]}
                              for i, itf in nd["interfaces"].items()}
        if nd["routes"]:
            node["routes"] = [dict(r) for r in nd["routes"]]
        nodes[n] = node
    networks = {k: dict(v) for k, v in d["topology"]["networks"].items()}
    delays = {p: st for p, st in m.trials[0]["qdiscs"].items() if p != bport}  # links.delays' stacks
    default_traffic = m.trials[0]["traffic"]

    def item(it: dict) -> dict:
        x = {k: v for k, v in it.items() if not (k == "start_s" and v == 0)}
        if it["kind"] == "ping":
            x["timestamp"] = "received"
        return x

    trials = []
    for t in m.trials:
        tr = {"id": t["id"]}
        if t["description"]:
            tr["description"] = t["description"]
        tr["labels"] = dict(t["labels"])
        tr["qdiscs"] = {bport: [dict(layer) for layer in t["qdiscs"][bport]]}
        if t["traffic"] != default_traffic:
            tr["traffic"] = [item(it) for it in t["traffic"]]
        trials.append(tr)
    out: dict = {"schema_version": 2, "name": d["name"], "title": d["title"]}
    if d.get("reference"):
        out["reference"] = dict(d["reference"])
    if d.get("reference_results"):
        out["reference_results"] = d["reference_results"]
    out["topology"] = {"networks": networks, "nodes": nodes}
    out["links"] = {"mtu_bytes": m.data["mtu_bytes"], "offloads": dict(m.data["offloads"])}
    out["qdiscs"] = delays
    out["sysctls"] = [{"nodes": _Flow(h["nodes"]), "set": dict(h["sysctls"])} for h in d.get("hosts", [])]
    out["trials"] = trials
    out["traffic"] = [item(it) for it in default_traffic]
    out["phases"] = [dict(p) for p in d["phases"]]
    if d.get("base_rtt"):
        out["base_rtt"] = {k: v for k, v in d["base_rtt"].items() if k != "interval_s"}
    out["collectors"] = [dict(c) for c in m.data["collectors"]]
    if d.get("health"):
        # version 2 refuses a threshold whose check can never be computed for the file (version
        # 1 reported it "not measured"): such a threshold is left out, with a note
        have = health_data(m)
        out["health"] = {}
        for k, v in d["health"].items():
            lacking = [HEALTH_DATA[x] for x in HEALTH_NEEDS.get(k, ()) if x not in have]
            if lacking:
                notes.append(f"health.{k} is left out: nothing in the file measures it (it needs {'; '.join(lacking)})")
            else:
                out["health"][k] = v
    out["figures"] = [{"id": "queue-delay", "metric": "queue_delay_ms",
                       "title": "Queueing delay (ping RTT - base RTT) of each client"}]
    out["claims"] = [_claim(cl, bport) for cl in d["claims"]]
    if d.get("sweep"):
        factors = []
        for f in d["sweep"]["factors"]:
            paths, lost = [], []
            for p in f.get("paths") or [f["path"]]:
                new = _sweep_paths(p, spec, bport)
                (paths.extend(new) if new else lost.append(p))
            if lost:
                notes.append(f"sweep factor {f['name']}: no schema_version 2 path for {', '.join(lost)}"
                             + ("; the factor is left out" if not paths else "; its other paths are kept"))
            if paths:
                g = {"name": f["name"], "paths": paths, "values": _Flow(f["values"])}
                g.update({k: f[k] for k in ("description",) if k in f})
                if f.get("trials"):
                    g["trials"] = _Flow(f["trials"])
                factors.append(g)
        if factors:
            out["sweep"] = {"factors": factors}
    return out, notes, bport


def migrate_data(data: dict, where: str | Path = "<memory>") -> dict:
    """The schema_version 2 data of the schema_version 1 experiment ``data`` (a parsed file,
    or the ``spec`` of a run's run.json: the analysis reads a run recorded with a version 1
    file through this, :func:`analysis.run.read_run`). What version 2 cannot keep is left out
    (:func:`migrate` names it in its output's comments): a health threshold nothing in the
    file measures, a sweep factor without a version 2 path. ``where`` names the data in
    error messages. ``data`` is not changed.

    Raises:
        SpecError: ``data`` is not of schema_version 1, or invalid (one line naming
            ``where`` and the field).
    """
    _version_1(data, where)
    return _plain(_convert(data, where)[0])


def migrate(path: str | Path) -> str:
    """The schema_version 2 YAML (text) of the schema_version 1 experiment at ``path``
    (:func:`migrate_data`, with a comment at the top naming what it left out).

    Raises:
        SpecError: the file is missing, unreadable or invalid (:func:`netrepro.spec.load_spec`),
            or not of schema_version 1 (one line naming the file and the field).
    """
    where = resolve_path(path)
    if not where.is_file():
        raise SpecError(where, "(file)", "no such experiment file; expected a schema_version 1 experiment to migrate")
    data = load_yaml_file(where, "experiment file")
    _version_1(data, where)
    out, notes, bport = _convert(data, where)
    b = data["bottleneck"]
    head = [f"# {out['name']}: written by `netrepro migrate {path}` from its schema_version 1 file.",
            f"# The bottleneck ({b['node']} on {b['network']}) is port {bport}; the pings' samples are placed at",
            "# their replies' times (timestamp: received), as version 1's analysis placed them."]
    head += [f"# NOTE: {n}" for n in notes]
    body = yaml.dump(out, Dumper=_Dumper, sort_keys=False, width=110, allow_unicode=True)
    return "\n".join(head) + "\n" + body
