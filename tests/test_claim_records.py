"""The claims and figures of every experiment are typed, immutable records
(netrepro/model/claims.py, figures.py) that hold every field the schema gives them."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import pytest

from netrepro.experiment.spec import load_spec
from netrepro.model import SCHEMA_PATH, Check, Claim, Figure, ReferenceLine, Rolling, Selection
from netrepro.model.claims import Finding

EXPERIMENTS = sorted(p.name for p in (Path(__file__).resolve().parent.parent / "experiments").iterdir()
                     if (p / "experiment.yml").is_file())


def _fields(cls) -> set[str]:
    return {f.name for f in dataclasses.fields(cls)}


def test_the_records_hold_every_field_the_schema_gives():
    """A field the schema adds to a claim, a check, a selection or a figure and the records
    lack would be dropped silently on the way to the analysis; so would one they keep that the
    schema no longer has."""
    schema = json.loads(Path(SCHEMA_PATH).read_text())
    defs, props = schema["$defs"], schema["properties"]
    assert _fields(Claim) == set(props["claims"]["items"]["properties"])
    assert _fields(Check) == {k for variant in defs["check"]["oneOf"] for k in variant["properties"]}
    assert _fields(Selection) == set(defs["selection"]["properties"])
    assert _fields(Finding) == set(props["claims"]["items"]["properties"]["finding"]["properties"])
    figure = props["figures"]["items"]["properties"]
    assert _fields(Figure) == set(figure)
    assert _fields(Rolling) == set(figure["rolling"]["properties"])
    assert _fields(ReferenceLine) == set(figure["lines"]["items"]["properties"])
    when = props["claims"]["items"]["properties"]["when"]["properties"]
    assert set(when) <= _fields(Check)


def _statistics(x) -> list[str]:
    """Every ``statistic`` of a claim's data, in the file's order (an independent walk)."""
    if isinstance(x, dict):
        return ([x["statistic"]] if isinstance(x.get("statistic"), str) else []) + [
            s for k, v in x.items() if k != "statistic" for s in _statistics(v)]
    if isinstance(x, list):
        return [s for v in x for s in _statistics(v)]
    return []


@pytest.mark.parametrize("name", EXPERIMENTS)
def test_every_experiments_claims_and_figures_are_records_of_its_file(name):
    m = load_spec(name).model
    data = m.data
    assert [c.id for c in m.claims] == [c["id"] for c in data["claims"]]
    for c, d in zip(m.claims, data["claims"]):
        assert isinstance(c, Claim) and c.text == d["text"] and c.rate_scaling == d.get("rate_scaling")
        assert c.time_scale_min == d.get("time_scale_min") and c.rate_scale_min == d.get("rate_scale_min")
        assert [s.statistic for s in c.check.selections] == _statistics(d["check"]), (name, c.id)
        assert (c.when is not None) == ("when" in d)
        if c.when:
            assert c.when.kind == "bound" and c.when.select.statistic == d["when"]["select"]["statistic"]
            assert (c.when.min, c.when.max) == (d["when"].get("min"), d["when"].get("max"))
        assert ("when" in [p for p, _ in c.parts]) == (c.when is not None)
        with pytest.raises(dataclasses.FrozenInstanceError):
            c.check.min = 0  # type: ignore[misc]
    assert [f.id for f in m.figures] == [f["id"] for f in data["figures"]]
    for f, d in zip(m.figures, data["figures"]):
        assert (f.metric, f.title, list(f.trials), list(f.subjects)) == (
            d["metric"], d.get("title"), d.get("trials", []), d.get("subjects", []))
        assert [(x.y, x.label) for x in f.lines] == [(x["y"], x["label"]) for x in d.get("lines", [])]
        with pytest.raises(dataclasses.FrozenInstanceError):
            f.metric = "x"  # type: ignore[misc]


def test_a_checks_limits_follow_its_kinds_defaults():
    sel = {"statistic": "s"}
    assert Check.from_data({"kind": "bound", "select": sel, "max": 3}).limits() == (-math.inf, 3)
    assert Check.from_data({"kind": "ratio", "higher": sel, "lower": sel}).limits() == (1, math.inf)
    assert Check.from_data({"kind": "difference", "higher": sel, "lower": sel}).limits() == (0, math.inf)
    assert Check.from_data({"kind": "difference", "higher": sel, "lower": sel, "max": 5}).limits() == (-math.inf, 5)
    with pytest.raises(ValueError, match="rise_and_fall"):
        Check.from_data({"kind": "rise_and_fall", "select": sel, "order": "phases", "peak": "p",
                         "tolerance": 0, "min_rise": 0}).limits()


def test_rate_scaling_multiplies_only_values_of_rate_scaled_statistics():
    """Mbit/s thresholds follow k, inside an all_of too; a ratio's and a delay's do not."""
    scaled = lambda st: st.endswith("_mbit")  # noqa: E731
    check = Check.from_data({"kind": "all_of", "checks": [
        {"kind": "bound", "select": {"statistic": "total_throughput_mbit"}, "min": 15, "max": 20},
        {"kind": "bound", "select": {"statistic": "rtt_median_ms"}, "max": 40},
        {"kind": "ratio", "higher": {"statistic": "throughput_mbit"}, "lower": {"statistic": "throughput_mbit"},
         "min": 2}]})
    half = check.at_rate_scale(0.5, scaled)
    assert [(c.min, c.max) for c in half.checks] == [(7.5, 10), (None, 40), (2, None)]
    assert check.checks[0].min == 15  # the record itself is unchanged
