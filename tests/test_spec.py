"""Unit tests of netrepro/experiment/spec.py: loading an experiment file, its views (read from the
model), TIME_SCALE, the refusal of the earlier format with the command that converts it, and
one-line SpecErrors for files that are not experiments. The schema's and the model's own
checks are tested field by field in tests/test_bad_input_model.py and test_bad_input_spec.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from conftest import PIE_VS_RED_V1

from netrepro.model import SCHEMA_PATH
from netrepro.experiment.spec import EXPERIMENTS_DIR, Spec, SpecError, check_time_scale, load_spec, resolve_path

REAL = EXPERIMENTS_DIR / "pie-vs-red" / "experiment.yml"
DATA = Path(__file__).resolve().parent / "data" / "specs"


def _assert_one_line(err: SpecError, path: Path, field: str, words: list[str]) -> None:
    msg = str(err)
    assert "\n" not in msg, msg
    assert msg.startswith(f"{path}: {field}: "), msg
    for w in words:
        assert w in msg, f"{w!r} not in {msg!r}"


# --- the real experiment -------------------------------------------------------------------
def test_load_by_name_path_and_folder_agree(spec):
    assert spec.path == REAL
    assert load_spec(REAL).data == spec.data
    assert load_spec(REAL.parent).data == spec.data
    assert resolve_path("pie-vs-red") == REAL
    assert spec.name == "pie-vs-red"


def test_groups(spec):
    # a group per node kind, in the plural, then the file's own groups
    assert spec.groups == {"hosts": ["client1", "client2", "client3", "server1", "server2", "server3"],
                           "routers": ["router"], "switches": [],
                           "clients": ["client1", "client2", "client3"],
                           "servers": ["server1", "server2", "server3"]}


def test_select(spec):
    assert spec.select(["clients"]) == ["client1", "client2", "client3"]
    assert spec.select(["server2", "router"]) == ["router", "server2"]  # file order, not selector order
    assert spec.select(["all"]) == list(spec.nodes)
    assert spec.select(["servers", "server1"]) == ["server1", "server2", "server3"]  # no duplicates
    assert spec.select(["nosuch"]) == []


def test_trials_and_duration(spec):
    assert spec.trial_ids == ["pie-unlimited", "red-unlimited", "pie-limited", "red-limited"]
    assert spec.duration_s == 250


def test_at_rate_scale_scales_the_model_not_the_file(spec):
    half = spec.at_rate_scale(0.5)
    assert half.model.trial("pie-unlimited").qdiscs["router:eth1"][0].params["rate_mbit"] == 5
    assert spec.model.trial("pie-unlimited").qdiscs["router:eth1"][0].params["rate_mbit"] == 10
    assert half.data is spec.data and half.trial_ids == spec.trial_ids


@pytest.mark.parametrize("given,expected", [("0.001", 0.001), ("1", 1.0), (0.1, 0.1), ("100", 100.0), ("1e-1", 0.1)])
def test_check_time_scale_accepts(given, expected):
    assert check_time_scale(given) == expected


@pytest.mark.parametrize("bad", ["", "abc", "nan", "inf", "-1", "1e-300", "1e300", None, True, [1], 0, 0.0009, 100.5])
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
        assert s.data["schema_version"] == 2


def test_minimal_spec_views():
    s = load_spec(DATA / "good-minimal.yml")
    assert s.groups == {"hosts": ["c", "s"], "routers": ["r"], "switches": [], "clients": ["c"], "servers": ["s"]}
    assert s.trial_ids == ["fifo-only"]
    assert s.duration_s == 10
    assert s.select(["routers", "clients"]) == ["r", "c"]


# --- the earlier format --------------------------------------------------------------------
def test_a_version_1_file_is_refused_with_the_command_that_converts_it():
    with pytest.raises(SpecError) as ei:
        load_spec(PIE_VS_RED_V1)
    _assert_one_line(ei.value, PIE_VS_RED_V1, "schema_version", ["1 is the earlier format", "netrepro migrate"])


@pytest.mark.parametrize("version", [0, 3, "2", None, True])
def test_other_versions_are_refused(version):
    data = yaml.safe_load(REAL.read_text())
    data["schema_version"] = version
    with pytest.raises(SpecError) as ei:
        Spec.from_data(data, "x.yml")
    _assert_one_line(ei.value, Path("x.yml"), "schema_version", ["expected 2"])


# --- files that are not experiments ----------------------------------------------------------
def test_from_data_names_memory():
    data = yaml.safe_load(REAL.read_text())
    data["trials"][0]["qdiscs"]["router:eth1"][0]["rate_mbit"] = -1
    with pytest.raises(SpecError) as ei:
        Spec.from_data(data)
    _assert_one_line(ei.value, Path("<memory>"), "trials[0].qdiscs.router:eth1[0].rate_mbit", ["expected", "-1"])


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


def test_duplicate_key_names_the_line(tmp_path):
    text = REAL.read_text().replace("    client2:\n", "    client1:\n")
    p = tmp_path / "experiment.yml"
    p.write_text(text)
    with pytest.raises(SpecError) as ei:
        load_spec(p)
    line = text[: text.index("    client1:\n", text.index("    client1:\n") + 1)].count("\n") + 1
    _assert_one_line(ei.value, p, f"line {line}", ["duplicate key 'client1'", "first at line"])


# --- the schema ----------------------------------------------------------------------------
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
    found = list(_numeric_schemas(json.loads(SCHEMA_PATH.read_text())))
    assert len(found) > 20
    # a qdisc layer's parameters: tc.check_layer holds each to its unit's range (tc._UNIT_MAX),
    # with the keyword and unit in the message (tests/test_bad_input_model.py)
    found = [(where, sch) for where, sch in found if where != "schema.$defs.layer.additionalProperties"]
    missing = [where for where, sch in found
               if not ({"minimum", "exclusiveMinimum"} & set(sch) and {"maximum", "exclusiveMaximum"} & set(sch)
                       and sch.get("description"))]
    assert not missing, f"numbers without a range or a description with the unit: {missing}"


def test_version_1_claim_statistics_convert_to_statistics_the_analysis_computes():
    """Every statistic a version 1 claim may read has a statistic the analysis computes (a run
    recorded with a version 1 file is converted through netrepro.experiment.migrate)."""
    from netrepro.experiment.migrate import STATISTIC_MAP
    from netrepro.model import STATISTICS
    assert {name for name, _ in STATISTIC_MAP.values()} <= {x for names in STATISTICS.values() for x in names}
