"""Unit tests of netrepro/spec.py: the real experiment's views, and one-line SpecErrors for
realistic mistakes (each built by mutating a deep copy of pie-vs-red's schema_version 1 file,
conftest.PIE_VS_RED_V1: they check the version 1 schema and cross-checks)."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from conftest import PIE_VS_RED_V1

from netrepro.spec import EXPERIMENTS_DIR, SCHEMA_PATH, Spec, SpecError, check_time_scale, load_spec, resolve_path

REAL = EXPERIMENTS_DIR / "pie-vs-red" / "experiment.yml"
DATA = Path(__file__).resolve().parent / "data" / "specs"


@pytest.fixture(scope="module")
def spec() -> Spec:
    return load_spec("pie-vs-red")


@pytest.fixture(scope="module")
def spec_v1() -> Spec:
    """pie-vs-red's schema_version 1 file, for the version 1 views (roles, bottleneck, flows)."""
    return load_spec(PIE_VS_RED_V1)


@pytest.fixture(scope="module")
def base_data() -> dict:
    """pie-vs-red's schema_version 1 file, parsed: the bad cases below mutate version 1 fields."""
    return yaml.safe_load(PIE_VS_RED_V1.read_text())


# --- the real experiment -------------------------------------------------------------------
def test_load_by_name_path_and_folder_agree(spec):
    assert spec.path == REAL
    assert load_spec(REAL).data == spec.data
    assert load_spec(REAL.parent).data == spec.data
    assert resolve_path("pie-vs-red") == REAL
    assert spec.name == "pie-vs-red"


def test_groups(spec, spec_v1):
    # schema_version 2: a group per node kind, in the plural, then the file's own groups
    assert spec.groups == {"hosts": ["client1", "client2", "client3", "server1", "server2", "server3"],
                           "routers": ["router"], "switches": [],
                           "clients": ["client1", "client2", "client3"],
                           "servers": ["server1", "server2", "server3"]}
    # schema_version 1: a group per role
    assert spec_v1.groups == {"clients": ["client1", "client2", "client3"],
                              "servers": ["server1", "server2", "server3"],
                              "routers": ["router"]}


def test_select(spec):
    assert spec.select(["clients"]) == ["client1", "client2", "client3"]
    assert spec.select(["server2", "router"]) == ["router", "server2"]  # file order, not selector order
    assert spec.select(["all"]) == list(spec.nodes)
    assert spec.select(["servers", "server1"]) == ["server1", "server2", "server3"]  # no duplicates
    assert spec.select(["nosuch"]) == []


def test_address_and_prefixlen(spec_v1):
    spec = spec_v1
    assert spec.address("client1", "clients_lan") == "10.10.1.1"
    assert spec.address("router", "servers_lan") == "10.10.2.254"
    assert spec.address("router", "clients_lan") == "10.10.1.254"
    with pytest.raises(KeyError, match="client1 has no interface on servers_lan"):
        spec.address("client1", "servers_lan")
    assert spec.prefixlen("clients_lan") == 24


def test_trials_duration_and_pie_limit(spec, spec_v1):
    for s in (spec, spec_v1):
        assert s.trial_ids == ["pie-unlimited", "red-unlimited", "pie-limited", "red-limited"]
        assert s.duration_s == 250
    assert spec_v1.pie_limit_packets() == 134  # ceil(200000 / 1500)


def test_scaled(spec_v1):
    spec = spec_v1
    s = spec.scaled(0.1)
    assert s["duration_s"] == pytest.approx(25.0)
    assert s["base_rtt_s"] == pytest.approx(3.0)
    assert [(p["name"], p["start_s"], p["end_s"], p["flows"]) for p in s["phases"]] == [
        (n, pytest.approx(a), pytest.approx(b), f) for n, a, b, f in
        [("p1", 0, 5, 10), ("p2", 5, 10, 30), ("p3", 10, 15, 50), ("p4", 15, 20, 30), ("p5", 20, 25, 10)]]
    assert [(f["client"], f["server"], f["flows"], f["start_s"], f["duration_s"]) for f in s["flows"]] == [
        ("client1", "server1", 10, pytest.approx(0), pytest.approx(25)),
        ("client2", "server2", 20, pytest.approx(5), pytest.approx(15)),
        ("client3", "server3", 20, pytest.approx(10), pytest.approx(5))]
    # the spec itself is not modified
    assert spec["phases"][1]["start_s"] == 50 and spec["flows"][1]["duration_s"] == 150
    assert spec.scaled(1)["duration_s"] == 250


@pytest.mark.parametrize("bad", [0, -1, -0.5, float("nan"), float("inf"), 1e-300, 1e300, 0.0009, 100.5])
def test_scaled_rejects_out_of_range(spec_v1, bad):
    with pytest.raises(ValueError, match="TIME_SCALE: expected a number from 0.001 to 100"):
        spec_v1.scaled(bad)


@pytest.mark.parametrize("given,expected", [("0.001", 0.001), ("1", 1.0), (0.1, 0.1), ("100", 100.0), ("1e-1", 0.1)])
def test_check_time_scale_accepts(given, expected):
    assert check_time_scale(given) == expected


@pytest.mark.parametrize("bad", ["", "abc", "nan", "inf", "-1", "1e-300", "1e300", None, True, [1]])
def test_check_time_scale_refuses(bad):
    with pytest.raises(ValueError) as ei:
        check_time_scale(bad)
    assert str(ei.value).startswith("TIME_SCALE: expected a number from 0.001 to 100") and "\n" not in str(ei.value)


def test_every_experiment_validates():
    files = sorted(EXPERIMENTS_DIR.glob("*/experiment.yml"))
    assert files, "no experiments found"
    for f in files:
        s = load_spec(f)
        assert s.name == f.parent.name, f"{f}: name does not match its folder"


def test_good_data_files_validate():
    files = sorted(DATA.glob("good-*.yml"))
    assert files
    for f in files:
        load_spec(f)


def test_minimal_spec_views():
    s = load_spec(DATA / "good-minimal.yml")
    assert s.groups == {"clients": ["c"], "servers": ["s"], "routers": ["r"]}
    assert s.trial_ids == ["fifo-only"]
    assert s.duration_s == 10
    assert s.pie_limit_packets() == 21  # ceil(30001 / 1500): rounded up, not down
    assert s.select(["routers", "clients"]) == ["r", "c"]
    assert s.scaled(2)["phases"] == [{"name": "all", "start_s": 0, "end_s": 20, "flows": 2}]


def _leaf_argv(spec, trial_id: str) -> list[str]:
    """The tc words of the AQM leaf of a trial's bottleneck stack (the model's HTB port)."""
    from netrepro import tc
    stack = next(st for st in spec.model.trial(trial_id)["qdiscs"].values() if st[0]["kind"] == "htb")
    return tc.stack_commands(stack)[-1]


def test_minimal_spec_model():
    """A spec without the optional ``sources`` has a model (it used to be a KeyError), whose
    trial stacks the AQM as written."""
    assert _leaf_argv(load_spec(DATA / "good-minimal.yml"), "fifo-only")[-3:] == ["pfifo", "limit", "100"]


# --- bad files -------------------------------------------------------------------------------
def _node_itf(d, node, i=0):
    return d["topology"]["nodes"][node]["interfaces"][i]


def _rename_red(d):
    """The RED AQM renamed red_static, with min_bytes above max_bytes."""
    d["aqms"]["red_static"] = d["aqms"].pop("red")
    d["aqms"]["red_static"]["params"]["min_bytes"] = 160000
    for t in d["trials"]:
        if t["aqm"] == "red":
            t["aqm"] = "red_static"
    d["claims"][1]["check"]["aqm"] = "red_static"
    d["claims"][2]["check"]["higher"] = "red_static"


# (id, mutation, field that must be named, words that must appear)
BAD = [
    ("unknown-top-level", lambda d: d.__setitem__("colour", "blue"),
     "(top level)", ["unknown field", "colour", "expected one of", "bottleneck"]),
    ("missing-bottleneck", lambda d: d.pop("bottleneck"),
     "(top level)", ["missing required field", "bottleneck"]),
    ("missing-rate", lambda d: d["bottleneck"].pop("rate_mbit"),
     "bottleneck", ["missing required field", "rate_mbit"]),
    ("rate-not-number", lambda d: d["bottleneck"].__setitem__("rate_mbit", "ten"),
     "bottleneck.rate_mbit", ["expected", "number", "'ten'"]),
    ("flows-count-string", lambda d: d["flows"][0].__setitem__("flows", "10"),
     "flows[0].flows", ["expected", "integer"]),
    ("address-outside-subnet", lambda d: _node_itf(d, "client1").__setitem__("address", "10.10.2.50"),
     "topology.nodes.client1.interfaces[0].address", ["10.10.2.50", "outside", "10.10.1.0/24"]),
    ("duplicate-address", lambda d: _node_itf(d, "client2").__setitem__("address", "10.10.1.1"),
     "topology.nodes.client2.interfaces", ["10.10.1.1", "client1"]),
    ("unknown-network", lambda d: _node_itf(d, "client1").__setitem__("network", "dmz"),
     "topology.nodes.client1.interfaces[0].network", ["unknown network 'dmz'", "expected one of", "clients_lan"]),
    ("phase-flows-mismatch", lambda d: d["phases"][1].__setitem__("flows", 25),
     "phases[1].flows", ["expected 30", "got 25", "p2"]),
    ("phases-not-contiguous", lambda d: d["phases"][2].__setitem__("start_s", 110),
     "phases[2]", ["expected contiguous", "100"]),
    ("red-min-above-max", lambda d: d["aqms"]["red"]["params"].__setitem__("min_bytes", 150000),
     "aqms.red.params", ["expected min_bytes < max_bytes < limit_bytes"]),
    ("trial-unknown-aqm", lambda d: d["trials"][0].__setitem__("aqm", "codel"),
     "trials[0].aqm", ["unknown AQM 'codel'", "expected one of", "pie", "red"]),
    ("trial-unknown-variant", lambda d: d["trials"][3].__setitem__("variant", "slow"),
     "trials[3].variant", ["unknown variant 'slow'", "expected one of", "unlimited"]),
    ("claim-unknown-phase", lambda d: d["claims"][0]["check"].__setitem__("phases", ["p1", "p9"]),
     "claims[0].check.phases", ["unknown phase 'p9'", "expected one of", "p5"]),
    ("flow-group-after-last-phase", lambda d: d["flows"][2].__setitem__("duration_s", 200),
     "flows[2]", ["300", "after the last phase", "250"]),
    ("flow-unknown-client", lambda d: d["flows"][0].__setitem__("client", "client9"),
     "flows[0].client", ["unknown node 'client9'"]),
    ("bottleneck-unknown-node", lambda d: d["bottleneck"].__setitem__("node", "router9"),
     "bottleneck.node", ["unknown node 'router9'"]),
    ("bottleneck-node-not-on-network", lambda d: d["bottleneck"].__setitem__("node", "server1"),
     "bottleneck.network", ["server1", "clients_lan"]),
    ("delay-network-without-node", lambda d: d["links"]["delays"][0].__setitem__("network", "servers_lan"),
     "links.delays[0].network", ["client1", "servers_lan"]),
    ("hosts-unknown-group", lambda d: d["hosts"][0].__setitem__("nodes", ["severs"]),
     "hosts[0].nodes", ["unknown node or group 'severs'", "expected one of", "servers"]),
    ("sources-unknown-group", lambda d: d["sources"].__setitem__("nodes", ["severs"]),
     "sources.nodes", ["unknown node or group 'severs'", "expected one of", "servers"]),
    ("collector-unknown-group", lambda d: d["collectors"][0].__setitem__("nodes", ["clientz"]),
     "collectors[0].nodes", ["unknown node or group 'clientz'"]),
    ("mtu-too-small", lambda d: d["links"].__setitem__("mtu_bytes", 100),
     "links.mtu_bytes", ["expected an integer >= 576 and <= 9000", "got 100", "bytes"]),
    ("wrong-schema-version", lambda d: d.__setitem__("schema_version", 3),
     "schema_version", ["expected 1 (the PIE vs RED format) or 2", "got 3"]),
    ("v1-body-as-version-2", lambda d: d.__setitem__("schema_version", 2),
     "(top level)", ["Additional properties are not allowed", "'aqms'"]),
    ("bad-name", lambda d: d.__setitem__("name", "PIE vs RED"),
     "name", ["expected pattern"]),
]


def _write(tmp_path: Path, data, name="experiment.yml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump(data, sort_keys=False))
    return p


def _assert_one_line(err: SpecError, path: Path, field: str, words: list[str]) -> None:
    msg = str(err)
    assert "\n" not in msg, f"more than one line: {msg!r}"
    assert msg.startswith(f"{path}: {field}: "), msg
    assert err.path == str(path) and err.field == field
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"


@pytest.mark.parametrize("case,mutate,field,words", BAD, ids=[b[0] for b in BAD])
def test_bad_spec(tmp_path, base_data, case, mutate, field, words):
    data = copy.deepcopy(base_data)
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(SpecError) as ei:
        load_spec(path)
    _assert_one_line(ei.value, path, field, words)


def test_unmutated_copy_is_valid(tmp_path, base_data):
    """The bad cases fail because of their mutation, not because of the round trip."""
    assert load_spec(_write(tmp_path, copy.deepcopy(base_data)))["schema_version"] == 1


def test_from_data_names_memory(base_data):
    data = copy.deepcopy(base_data)
    data["bottleneck"]["rate_mbit"] = -1
    with pytest.raises(SpecError) as ei:
        Spec.from_data(data)
    _assert_one_line(ei.value, Path("<memory>"), "bottleneck.rate_mbit", ["expected", "-1"])


@pytest.mark.parametrize("text, field, words", [
    ("name: pie-vs-red\ntopology: [unclosed\n", "line 3", ["not valid YAML"]),  # not YAML
    ("- just\n- a list\n", "(top level)", ["expected a mapping", "found a list"]),  # not a mapping
    ("", "(top level)", ["expected a mapping", "found an empty file"]),             # empty file
    ("just text\n", "(top level)", ["expected a mapping", "found text"]),
])
def test_file_that_is_not_a_yaml_mapping(tmp_path, text, field, words):
    p = tmp_path / "experiment.yml"
    p.write_text(text)
    with pytest.raises(SpecError) as ei:
        load_spec(p)
    _assert_one_line(ei.value, p, field, words)


@pytest.mark.parametrize("given", ["nosuch-experiment", "missing.yml"])
def test_missing_file(tmp_path, given):
    arg = given if given.startswith("nosuch") else tmp_path / given
    with pytest.raises(SpecError) as ei:
        load_spec(arg)
    expected = EXPERIMENTS_DIR / given / "experiment.yml" if given.startswith("nosuch") else tmp_path / given
    _assert_one_line(ei.value, expected, "(file)", ["no such experiment file", "known experiments", "pie-vs-red"])


def test_spec_error_is_value_error():
    assert issubclass(SpecError, ValueError)
    e = SpecError("f.yml", "a.b", "expected x")
    assert str(e) == "f.yml: a.b: expected x"


# --- bugs found by these tests, fixed -------------------------------------------------
@pytest.mark.parametrize("where,value,field", [
    ("address", "10.10.1.300", "topology.nodes.client1.interfaces[0].address"),
    ("subnet", "10.10.1.1/24", "topology.networks.clients_lan.subnet"),
    ("subnet", "10.10.1.0/33", "topology.networks.clients_lan.subnet"),
])
def test_invalid_ip_is_spec_error(tmp_path, base_data, where, value, field):
    data = copy.deepcopy(base_data)
    if where == "address":
        _node_itf(data, "client1")["address"] = value
    else:
        data["topology"]["networks"]["clients_lan"]["subnet"] = value
    path = _write(tmp_path, data)
    with pytest.raises(SpecError) as ei:
        load_spec(path)
    _assert_one_line(ei.value, path, field, [value])


def test_red_error_names_the_aqm(tmp_path, base_data):
    data = copy.deepcopy(base_data)
    _rename_red(data)
    path = _write(tmp_path, data)
    with pytest.raises(SpecError) as ei:
        load_spec(path)
    _assert_one_line(ei.value, path, "aqms.red_static.params", ["min_bytes < max_bytes"])


def test_collector_unknown_network(tmp_path, base_data):
    data = copy.deepcopy(base_data)
    data["collectors"][1]["network"] = "client_lan"
    path = _write(tmp_path, data)
    with pytest.raises(SpecError) as ei:
        load_spec(path)
    _assert_one_line(ei.value, path, "collectors[1].network", ["client_lan", "clients_lan"])


def test_unknown_peak_phase_names_peak_phase(tmp_path, base_data):
    data = copy.deepcopy(base_data)
    data["claims"][1]["check"]["peak_phase"] = "p9"
    path = _write(tmp_path, data)
    with pytest.raises(SpecError) as ei:
        load_spec(path)
    _assert_one_line(ei.value, path, "claims[1].check.peak_phase", ["p9"])


def test_claim_with_unknown_kind_is_one_line(tmp_path, base_data):
    data = copy.deepcopy(base_data)
    data["claims"][0]["check"]["kind"] = "bounds"
    path = _write(tmp_path, data)
    with pytest.raises(SpecError) as ei:
        load_spec(path)
    _assert_one_line(ei.value, path, "claims[0].check", ["bounds"])


# --- numbers, claims and generic AQMs (issue 6) ---------------------------------------------
def _numeric_schemas(node, where="schema"):
    """(where, subschema) of every subschema that admits numbers (not via $ref)."""
    if isinstance(node, dict):
        types = node.get("type", [])
        types = [types] if isinstance(types, str) else types
        if {"number", "integer"} & set(types):
            yield where, node
        for k, v in node.items():
            yield from _numeric_schemas(v, f"{where}.{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from _numeric_schemas(v, f"{where}[{i}]")


def test_every_number_in_the_schema_has_a_range_and_a_unit():
    import json
    found = list(_numeric_schemas(json.loads(SCHEMA_PATH.read_text())))
    assert len(found) > 20
    for where, sch in found:
        assert {"minimum", "exclusiveMinimum"} & set(sch), f"{where}: no lower bound"
        assert {"maximum", "exclusiveMaximum"} & set(sch), f"{where}: no upper bound"
        assert sch.get("description"), f"{where}: no description with the unit"


def test_claim_statistics_are_statistics_the_analysis_computes():
    """Every statistic a version 1 claim may read has its version 2 statistic (the analysis
    converts a version 1 file through netrepro.migrate), one the analysis computes."""
    import json

    from netrepro.migrate import STATISTIC_MAP
    from netrepro.model import STATISTICS
    enum = json.loads(SCHEMA_PATH.read_text())["$defs"]["statistic"]["enum"]
    assert set(enum) <= set(STATISTIC_MAP)
    assert {name for name, _ in STATISTIC_MAP.values()} <= {x for names in STATISTICS.values() for x in names}


def _add_codel(d, trial=False):
    d["aqms"]["codel"] = {"qdisc": "codel", "params": {"target_ms": 5, "interval_ms": 100, "ecn": False}}
    if trial:
        d["trials"].append({"aqm": "codel", "variant": "unlimited"})


BAD_NEW = [
    ("nan-in-a-list", lambda d: d["flows"][1].__setitem__("start_s", float("nan")),
     "flows[1].start_s", ["expected a finite number, got .nan"]),
    ("inf-in-a-mapping", lambda d: d["aqms"]["red"]["params"].__setitem__("probability", float("inf")),
     "aqms.red.params.probability", ["expected a finite number, got .inf"]),
    ("integer-key", lambda d: d["variants"].__setitem__(1, {"description": "x"}),
     "variants", ["expected text keys", "1"]),
    ("jitter-too-large", lambda d: d["links"]["delays"][0].__setitem__("jitter_ms", 20000),
     "links.delays[0].jitter_ms", ["<= 10000", "got 20000", "ms"]),
    ("probability-zero", lambda d: d["aqms"]["red"]["params"].__setitem__("probability", 0),
     "aqms.red.params.probability", ["expected a number > 0 and <= 1", "got 0"]),
    ("pie-target-1e-300", lambda d: d["aqms"]["pie"]["params"].__setitem__("target_ms", 1e-300),
     "aqms.pie.params.target_ms", [">= 0.001", "got 1e-300"]),
    ("claim-lower-aqm-not-run", lambda d: (_add_codel(d), d["claims"][2]["check"].__setitem__("lower", "codel")),
     "claims[2].check.lower", ["no trial runs AQM 'codel'", "pie, red"]),
    ("claim-compares-an-aqm-with-itself", lambda d: d["claims"][2]["check"].__setitem__("lower", "red"),
     "claims[2].check.lower", ["other than higher", "'red'"]),
    ("claim-pair-not-run", lambda d: d["trials"].pop(2),  # pie-limited
     "claims[0].check.variants", ["no trial runs AQM 'pie' (check.aqm) with variant 'limited'"]),
    ("phase-name-twice", lambda d: d["phases"][4].__setitem__("name", "p1"),
     "phases[4].name", ["'p1' already names phases[0]"]),
    ("claim-kind-wrong-field", lambda d: d["claims"][0]["check"].__setitem__("max", "forty"),
     "claims[0].check.max", ["expected type 'number'", "'forty'"]),
    ("generic-unknown-keyword", lambda d: (_add_codel(d), d["aqms"]["codel"]["params"].__setitem__("burst", 5)),
     "aqms.codel.params.burst", ["not a parameter of tc-codel(8)"]),
]


@pytest.mark.parametrize("case,mutate,field,words", BAD_NEW, ids=[b[0] for b in BAD_NEW])
def test_bad_spec_numbers_claims_aqms(base_data, case, mutate, field, words):
    data = copy.deepcopy(base_data)
    mutate(data)
    with pytest.raises(SpecError) as ei:
        Spec.from_data(data, "x.yml")
    _assert_one_line(ei.value, Path("x.yml"), field, words)


def test_generic_aqm_in_a_trial_validates_and_renders(base_data):
    data = copy.deepcopy(base_data)
    _add_codel(data, trial=True)
    data["aqms"]["fqc"] = {"qdisc": "fq_codel", "params": {"limit_packets": 10240, "quantum": 1514, "ecn": True}}
    data["trials"].append({"aqm": "fqc", "variant": "limited"})
    s = Spec.from_data(data)
    assert s.trial_ids[-2:] == ["codel-unlimited", "fqc-limited"]
    assert _leaf_argv(s, "codel-unlimited")[-6:] == ["codel", "target", "5ms", "interval", "100ms", "noecn"]
    assert _leaf_argv(s, "fqc-limited")[-6:] == ["fq_codel", "limit", "10240", "quantum", "1514", "ecn"]


def test_duplicate_key_names_the_line(tmp_path):
    text = REAL.read_text().replace("    client2:\n", "    client1:\n")
    p = tmp_path / "experiment.yml"
    p.write_text(text)
    with pytest.raises(SpecError) as ei:
        load_spec(p)
    line = text[: text.index("    client1:\n", text.index("    client1:\n") + 1)].count("\n") + 1
    _assert_one_line(ei.value, p, f"line {line}", ["duplicate key 'client1'", "first at line"])
