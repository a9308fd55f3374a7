"""``netrepro migrate FILE``: the schema_version 2 text of a schema_version 1 experiment.

Version 1 is the earlier format (AQM x variant trials around one shaped bottleneck, FTP flow
groups, ping collectors: :class:`_V1` and :func:`_v1_model` read it; this module is the only
code that knows it). :func:`migrate` writes the
same experiment in version 2 (docs/experiment-format.md), and :func:`migrate_data` gives it as
data, so that the analysis (analysis/outputs.py) computes and judges what version 1's analysis
did, with the same numbers (tests/test_recorded_v1_runs.py: a run recorded with the version 1
file, against the outputs version 1's analysis wrote for it); runs recorded with a version 1
file are analysed through it:

- topology: a node's interfaces are named ``eth1``, ``eth2``, ... in file order (as
  :func:`_v1_model` and the sites named them); a node that forwards is a
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

import ipaddress
import math
import re
from pathlib import Path

import yaml

from netrepro.core import tc
from netrepro.model import HEALTH_DATA, HEALTH_NEEDS, Claim, Model, TrafficItem, health_data, rate_scaled_reads
from netrepro.experiment.spec import SpecError, Spec, resolve_path
from netrepro.core.yamlfile import load_yaml_file

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


#: The top-level fields of a schema_version 1 file that the conversion reads, and the type
#: each must have (the earlier format's schema required them).
V1_FIELDS = {"name": str, "title": str, "topology": dict, "links": dict, "bottleneck": dict, "aqms": dict,
             "variants": dict, "trials": list, "flows": list, "phases": list, "collectors": list,
             "claims": list}
_TYPE_WORDS = {dict: "an object", list: "a list", str: "text"}


class _V1:
    """A schema_version 1 file read as the earlier format defined it (its nodes with a
    ``role`` and a list of interfaces, node selectors of names, role groups and ``all``)."""

    def __init__(self, data: dict):
        self.data = data
        self.nodes: dict[str, dict] = data["topology"]["nodes"]
        self.networks: dict[str, dict] = data["topology"]["networks"]
        self.groups: dict[str, list[str]] = {}
        for n, nd in self.nodes.items():
            self.groups.setdefault(nd["role"] + "s", []).append(n)

    def select(self, selectors: list[str]) -> list[str]:
        """Node names (file order) of selectors: node names, role groups (``clients``) or ``all``."""
        chosen = set()
        for sel in selectors:
            chosen.update(self.nodes if sel == "all" else [sel] if sel in self.nodes else self.groups.get(sel, []))
        return [n for n in self.nodes if n in chosen]

    def ifname(self, node: str, network: str) -> str:
        """``eth<i>``: the i-th interface of ``node`` (file order) is the one on ``network``, as
        the sites named a version 1 node's interfaces (eth0 being the management one)."""
        return next(f"eth{i}" for i, itf in enumerate(self.nodes[node]["interfaces"], 1) if itf["network"] == network)

    @property
    def duration_s(self) -> float:
        """The schedule's length: the end of the last phase, s."""
        return max(p["end_s"] for p in self.data["phases"])


#: A value version 1 gave as one tc word with tc's unit (``5ms``, ``32k``, ``10mbit``): its
#: number and unit (tc(8), "PARAMETERS": times, sizes and rates).
_TC_WORD_RE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([a-z]*)$")
#: tc's units as version 2's suffixes and factors: a time (a bare number is microseconds,
#: iproute2 get_time), a size in bytes (k and kb are 1024 bytes, m and mb 1024 KiB, kbit 1024
#: bits: iproute2 get_size), a rate (tc's kbit and mbit are 1000 and 1,000,000 bit/s).
_TC_UNITS = {
    "time": {"": ("_us", 1), "us": ("_us", 1), "usec": ("_us", 1), "ms": ("_ms", 1), "msec": ("_ms", 1),
             "s": ("_ms", 1000), "sec": ("_ms", 1000)},
    "bytes": {"": ("_bytes", 1), "b": ("_bytes", 1), "k": ("_bytes", 1024), "kb": ("_bytes", 1024),
              "m": ("_bytes", 1 << 20), "mb": ("_bytes", 1 << 20), "kbit": ("_bytes", 128)},
    "packets": {"": ("_packets", 1)},
    "rate": {"kbit": ("_kbit", 1), "mbit": ("_mbit", 1), "gbit": ("_mbit", 1000)},
}


def _suffixed(kind: str, params: dict, where, field: str) -> dict:
    """Version 1's AQM ``params`` with each value given as a tc word with a unit (``target:
    5ms``, which version 1's schema accepted), or as a bare number on a keyword with a unit
    and no suffix (tc's base unit: ``tupdate: 30000`` is 30000 us), as version 2 writes it: the
    keyword with its unit's suffix and a number (``target_ms: 5``; :data:`_TC_UNITS`). Other
    values (suffixed keywords, plain numbers, flags, words) are kept.

    Raises:
        SpecError: a word whose unit the keyword does not take, or a keyword the kind does not
            have (naming ``field``.key and what was expected).
    """
    table = tc.KIND_KEYWORDS.get(kind, {})
    out = {}
    for key, value in params.items():
        kw = table.get(key)
        if (kw is not None and kw.unit in _TC_UNITS and isinstance(value, (int, float))
                and not isinstance(value, bool)):
            value = f"{value:g}"  # a bare number: tc reads it in the unit's base (us, bytes, packets)
        m = _TC_WORD_RE.match(value) if isinstance(value, str) else None
        if not m or value in ("true", "false"):
            out[key] = value
            continue
        units = _TC_UNITS.get(kw.unit, {}) if kw else {}
        if m.group(2) not in units:
            what = (f"{kind} has no keyword {key!r}" if kw is None else
                    f"{kind}'s {key} is {tc.UNIT_PHRASE[kw.unit]}, which a tc word {value!r} cannot give")
            raise SpecError(where, f"{field}.{key}", f"{value!r}: {what}; expected a number with a unit of "
                                                     f"{', '.join(u for u in units if u) or 'its own'}, or "
                                                     f"version 2's form (docs/experiment-format.md)")
        suffix, factor = units[m.group(2)]
        number = float(m.group(1)) * factor
        if suffix not in kw.allowed_suffixes and suffix == "_us" and "_ms" in kw.allowed_suffixes:
            suffix, number = "_ms", number / 1000
        out[key + suffix] = int(number) if number == int(number) else number
    return out


def _v1_model(v: _V1, where) -> Model:
    """The model of a schema_version 1 experiment, as the earlier format meant it: each trial
    ``<aqm>-<variant>`` gets the bottleneck's stack (HTB at the variant's rate, the AQM as
    its leaf under ``aqm_handle``, a packet limit of buffer_bytes / mtu_bytes rounded up for
    the kinds of :data:`netrepro.core.tc.BUFFER_LIMITED_KINDS` whose parameters give none), the
    netem of ``links.delays`` (1000 packets unless given: tc-netem(8)'s default), one FTP item
    per flow group at the variant's source rate and one ping item per pinging node toward its
    first flow group's server; ``labels`` are ``{aqm, variant}``; a node's ``groups`` is its
    role in the plural, a node with role ``router`` a router."""
    d = v.data
    nodes = {}
    for n, nd in v.nodes.items():
        nodes[n] = {"kind": "router" if nd["role"] == "router" else "host", "groups": [nd["role"] + "s"],
                    "interfaces": {f"eth{k}": {"link": None, "network": i["network"], "address":
                                               f"{i['address']}/{ipaddress.ip_network(v.networks[i['network']]['subnet']).prefixlen}"}
                                   for k, i in enumerate(nd["interfaces"], 1)},
                    "routes": nd.get("routes", [])}
    b = d["bottleneck"]
    bport = f"{b['node']}:{v.ifname(b['node'], b['network'])}"
    delays: dict[str, list] = {}
    for dl in d["links"].get("delays", []):
        layer = {"kind": tc.DELAY_KIND, "delay_ms": dl["delay_ms"], "limit_packets": dl.get("limit_packets", 1000)}
        if dl.get("jitter_ms"):
            layer["jitter_ms"] = dl["jitter_ms"]
        for n in v.select(dl["nodes"]):
            delays[f"{n}:{v.ifname(n, dl['network'])}"] = [layer]
    server_of: dict[str, str] = {}
    for fg in d["flows"]:
        server_of.setdefault(fg["client"], fg["server"])
    pingers = [(n, c["interval_s"]) for c in d["collectors"] if c["kind"] == "ping" for n in v.select(c["nodes"])]
    kind = d.get("sources", {}).get("kind", "ftp")
    trials = []
    for t in d["trials"]:
        aqm, var = d["aqms"][t["aqm"]], d["variants"][t["variant"]]
        rate = var.get("bottleneck", {}).get("rate_mbit", b["rate_mbit"])
        leaf = {"kind": aqm["qdisc"], "handle": b.get("aqm_handle", "10:"),
                **_suffixed(aqm["qdisc"], aqm.get("params", {}), where, f"aqms.{t['aqm']}.params")}
        if aqm["qdisc"] in tc.BUFFER_LIMITED_KINDS and "limit_packets" not in leaf:
            leaf["limit_packets"] = math.ceil(b["buffer_bytes"] / d["links"]["mtu_bytes"])
        max_rate = var.get("source", {}).get("max_rate_bytes_per_s", 0)
        traffic = [{"kind": kind, "id": f"group{k + 1}", "from": fg["server"], "to": fg["client"],
                    "flows": fg["flows"], "start_s": fg["start_s"], "duration_s": fg["duration_s"],
                    "max_rate_bytes_per_s": max_rate} for k, fg in enumerate(d["flows"])]
        traffic += [{"kind": "ping", "id": f"ping-{n}", "from": n, "to": server_of[n], "interval_s": iv,
                     "start_s": 0, "duration_s": v.duration_s} for n, iv in pingers if n in server_of]
        trials.append({"id": f"{t['aqm']}-{t['variant']}", "description": var.get("description", ""),
                       "labels": {"aqm": t["aqm"], "variant": t["variant"]},
                       "qdiscs": {**delays, bport: [{"kind": tc.SHAPERS[0], "rate_mbit": rate}, leaf]},
                       "traffic": traffic, "duration_s": v.duration_s})
    collectors = [{"kind": "qdisc_stats", "at": f"{n}:{v.ifname(n, c['network'])}", "interval_s": c["interval_s"]}
                  for c in d["collectors"] if c["kind"] == "qdisc_stats" for n in v.select(c["nodes"])]
    return Model({
        "name": d["name"], "title": d["title"], "nodes": nodes, "networks": v.networks, "links": [],
        "mtu_bytes": d["links"]["mtu_bytes"],
        "offloads": {k: d["links"].get("offloads", {}).get(k, False) for k in ("tso", "gso", "gro")},
        "trials": trials, "phases": d["phases"], "base_rtt": d.get("base_rtt", {}), "collectors": collectors,
        "health": d.get("health", {}), "figures": [], "claims": [], "rate_scale": {},
    }, where)


def _read_v1(data: dict, where) -> tuple[_V1, Model]:
    """The version 1 file ``data`` read (:class:`_V1`, :func:`_v1_model`). Raises SpecError
    naming the field when a field the conversion reads is missing or of another type."""
    for key, typ in V1_FIELDS.items():
        if not isinstance(data.get(key), typ):
            raise SpecError(where, key, ("missing" if key not in data else f"expected {_TYPE_WORDS[typ]}")
                            + "; expected a schema_version 1 experiment (docs/experiment-format.md, migrating)")
    for i, t in enumerate(data["trials"]):
        for key, section in (("aqm", "aqms"), ("variant", "variants")):
            if not isinstance(t, dict) or t.get(key) not in data[section]:
                raise SpecError(where, f"trials[{i}].{key}", f"expected one of the file's {section} "
                                f"({', '.join(map(str, data[section]))}), got {t.get(key) if isinstance(t, dict) else t!r}")
    try:
        v = _V1(data)
        return v, _v1_model(v, where)
    except SpecError:
        raise  # already one line naming the field
    except (KeyError, TypeError, ValueError, StopIteration, AttributeError, IndexError) as exc:
        what = f"no field {exc}" if isinstance(exc, KeyError) else f"{type(exc).__name__}: {exc}"
        raise SpecError(where, "(file)", f"not a schema_version 1 experiment the conversion can read ({what}); "
                                         f"expected the earlier format of docs/experiment-format.md") from None


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


def _nodes(m: Model, spec: _V1) -> dict:
    """The version 2 ``topology.nodes`` of the version 1 file read as ``spec`` (its model ``m``):
    a node's kind unless a host, its role group unless a router, its interfaces and routes."""
    nodes = {}
    for n, nd in m.nodes.items():
        v1 = spec.nodes[n]
        node: dict = {"kind": nd.kind} if nd.kind != "host" else {}
        if nd.kind != "router":
            node["groups"] = _Flow([v1["role"] + "s"])
        node["interfaces"] = {i: {"network": itf.network, "address": itf.address} for i, itf in nd.interfaces.items()}
        if nd.routes:
            node["routes"] = [{"to": r.to, "via": r.via} for r in nd.routes]
        nodes[n] = node
    return nodes


def _traffic_item(it: TrafficItem) -> dict:
    """A model's traffic item as version 2 writes it: without a start of 0, a ping's samples
    placed at their replies' times (``timestamp: received``)."""
    x = {k: v for k, v in it.as_data().items() if not (k == "start_s" and v == 0)}
    if it.kind == "ping":
        x["timestamp"] = "received"
    return x


def _trials(m: Model, bport: str) -> list[dict]:
    """The version 2 trials of the model ``m``: each one's id, description (when any), labels,
    the bottleneck port's stack, and its traffic when it differs from the first trial's (the
    file's default traffic)."""
    default_traffic = m.trials[0].traffic
    trials = []
    for t in m.trials:
        tr = {"id": t.id}
        if t.description:
            tr["description"] = t.description
        tr["labels"] = dict(t.labels)
        tr["qdiscs"] = {bport: [layer.as_data() for layer in t.qdiscs[bport]]}
        if t.traffic != default_traffic:
            tr["traffic"] = [_traffic_item(it) for it in t.traffic]
        trials.append(tr)
    return trials


def _health(health: dict, m: Model, notes: list[str]) -> dict:
    """The version 1 ``health`` thresholds version 2 keeps: a threshold whose check can never be
    computed for the file is refused (version 1 reported it "not measured"): such a threshold
    is left out, with a note appended to ``notes``."""
    have = health_data(m)
    kept = {}
    for k, v in health.items():
        lacking = [HEALTH_DATA[x] for x in HEALTH_NEEDS.get(k, ()) if x not in have]
        if lacking:
            notes.append(f"health.{k} is left out: nothing in the file measures it (it needs {'; '.join(lacking)})")
        else:
            kept[k] = v
    return kept


def _sweep_factors(factors: list[dict], spec: _V1, bport: str, notes: list[str]) -> list[dict]:
    """The version 2 sweep factors of version 1's ``factors``, each with its paths as version 2
    gives them (:func:`_sweep_paths`); a path without one is named in a note appended to
    ``notes``, and a factor left with no path is left out."""
    kept = []
    for f in factors:
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
            kept.append(g)
    return kept


def _convert(data: dict, where) -> tuple[dict, list[str], str]:
    """``(version 2 data, notes, bottleneck port)`` of the version 1 ``data`` (see the module
    docstring); the notes name what version 2 cannot keep. Raises SpecError as
    :func:`migrate_data`."""
    spec, m = _read_v1(data, where)
    d = data
    # the bottleneck: the port whose stack is rooted in a shaper (version 1's HTB)
    bport = next(p for t in m.trials for p, st in t.qdiscs.items() if st and st[0].kind in tc.SHAPERS)
    notes: list[str] = []
    nodes = _nodes(m, spec)
    networks = {k: dict(v) for k, v in d["topology"]["networks"].items()}
    delays = {p: st for p, st in m.trials[0].qdiscs_data().items() if p != bport}  # links.delays
    trials = _trials(m, bport)
    out: dict = {"schema_version": 2, "name": d["name"], "title": d["title"]}
    if d.get("reference"):
        out["reference"] = dict(d["reference"])
    if d.get("reference_results"):
        out["reference_results"] = d["reference_results"]
    out["topology"] = {"networks": networks, "nodes": nodes}
    out["links"] = {"mtu_bytes": m.mtu_bytes, "offloads": dict(m.offloads)}
    out["qdiscs"] = delays
    out["sysctls"] = [{"nodes": _Flow(h["nodes"]), "set": dict(h["sysctls"])} for h in d.get("hosts", [])]
    out["trials"] = trials
    out["traffic"] = [_traffic_item(it) for it in m.trials[0].traffic]
    out["phases"] = [dict(p) for p in d["phases"]]
    if d.get("base_rtt"):
        out["base_rtt"] = {k: v for k, v in d["base_rtt"].items() if k != "interval_s"}
    out["collectors"] = [{"kind": c.kind, "at": c.at, "interval_s": c.interval_s} for c in m.collectors]
    if d.get("health"):
        out["health"] = _health(d["health"], m, notes)
    out["figures"] = [{"id": "queue-delay", "metric": "queue_delay_ms",
                       "title": "Queueing delay (ping RTT - base RTT) of each client"}]
    out["claims"] = [_claim(cl, bport) for cl in d["claims"]]
    if d.get("sweep"):
        factors = _sweep_factors(d["sweep"]["factors"], spec, bport, notes)
        if factors:
            out["sweep"] = {"factors": factors}
    return out, notes, bport


def _checked(out: dict, where) -> dict:
    """``out`` (the converted data) once it validates as an experiment file
    (:meth:`netrepro.experiment.spec.Spec.from_data`). Raises SpecError naming ``where`` and the field of
    the converted file, marked as such: the version 1 file is then one the earlier format
    refused too (claims about a trial it does not run, addresses outside their subnets...)."""
    try:
        Spec.from_data(out, where)
    except SpecError as exc:
        raise SpecError(where, f"(converted) {exc.field}", exc.problem) from None
    return out


def migrate_data(data: dict, where: str | Path = "<memory>") -> dict:
    """The schema_version 2 data of the schema_version 1 experiment ``data`` (a parsed file,
    or the ``spec`` of a run's run.json: the analysis reads a run recorded with a version 1
    file through this, :func:`netrepro.runfolder.reading.read_run`). What version 2 cannot keep is left out
    (:func:`migrate` names it in its output's comments): a health threshold nothing in the
    file measures, a sweep factor without a version 2 path. ``where`` names the data in
    error messages. ``data`` is not changed.

    Raises:
        SpecError: ``data`` is not of schema_version 1, or invalid (one line naming
            ``where`` and the field).
    """
    _version_1(data, where)
    return _checked(_plain(_convert(data, where)[0]), where)


def migrate(path: str | Path) -> str:
    """The schema_version 2 YAML (text) of the schema_version 1 experiment at ``path``
    (:func:`migrate_data`, with a comment at the top naming what it left out).

    Raises:
        SpecError: the file is missing, unreadable, not of schema_version 1, lacks a field
            the conversion reads (:func:`_read_v1`), or converts to a file that does not
            validate (:func:`_checked`); one line naming the file and the field.
    """
    where = resolve_path(path)
    if not where.is_file():
        raise SpecError(where, "(file)", "no such experiment file; expected a schema_version 1 experiment to migrate")
    data = load_yaml_file(where, "experiment file")
    _version_1(data, where)
    out, notes, bport = _convert(data, where)
    _checked(_plain(out), where)
    b = data["bottleneck"]
    # The path as Python writes a string's escapes: a newline in it must not end the comment.
    shown = str(path).encode("unicode_escape").decode("ascii")
    head = [f"# {out['name']}: written by `netrepro migrate {shown}` from its schema_version 1 file.",
            f"# The bottleneck ({b['node']} on {b['network']}) is port {bport}; the pings' samples are placed at",
            "# their replies' times (timestamp: received), as version 1's analysis placed them."]
    head += [f"# NOTE: {n}" for n in notes]
    body = yaml.dump(out, Dumper=_Dumper, sort_keys=False, width=110, allow_unicode=True)
    return "\n".join(head) + "\n" + body


def recorded_rate_scaling(spec: dict) -> dict:
    """A recorded experiment (run.json's ``spec``, schema_version 2) as it was judged: a copy
    whose claims that set thresholds on values the rate scale changes and say nothing of it
    (written before claims had ``rate_scaling``, docs/experiment-format.md) get ``rate_scaling:
    none``, their thresholds as written at every k, as they were judged then; the file allows
    rate scaling. Anything else is returned as it is (it is checked afterwards)."""
    if not isinstance(spec, dict) or not isinstance(spec.get("rate_scale"), dict) or not spec["rate_scale"].get("allowed"):
        return spec
    claims = spec.get("claims")
    if not isinstance(claims, list):
        return spec
    out = []
    for c in claims:
        try:
            needs = isinstance(c, dict) and "rate_scaling" not in c and bool(rate_scaled_reads(None, Claim.from_data(c)))
        except (KeyError, TypeError, AttributeError):   # a malformed claim: the check names it
            needs = False
        out.append({**c, "rate_scaling": "none"} if needs else c)
    return {**spec, "claims": out}
