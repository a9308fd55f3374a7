"""pie-vs-red in schema_version 2: ``netrepro migrate`` converts its version 1 file
(tests/data/specs/pie-vs-red-v1.yml), and :func:`netrepro.experiment.migrate.migrate_data` the same in
memory (the analysis converts the spec of a run recorded with a version 1 file through it:
tests/test_recorded_v1_runs.py checks that such a run gives the numbers and claim statuses the
version 1 analysis gave).
"""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path

import pytest
import yaml

from analysis import analyze
from conftest import PIE_VS_RED_V1
from netrepro.cli.commands import main
from netrepro.experiment.migrate import migrate, migrate_data
from netrepro.model import HEALTH_NEEDS
from netrepro.experiment.spec import Spec, SpecError, load_spec

RUN = Path(__file__).resolve().parent / "data" / "pie-vs-red-local-0.1"


def test_the_whole_converted_file_validates_health_thresholds_included():
    """Every health threshold of the version 1 file whose check the model measures is kept
    (flow_start_skew_max_ms is not: no two flow groups start together), so the file
    validates as it is, without filtering."""
    d = yaml.safe_load(migrate(PIE_VS_RED_V1))
    m = Spec.from_data(d, "migrated").model
    assert [t.id for t in m.trials] == ["pie-unlimited", "red-unlimited", "pie-limited", "red-limited"]
    assert [dict(t.labels) for t in m.trials][1] == {"aqm": "red", "variant": "unlimited"}
    assert {c["id"] for c in m.data["claims"]} == {"pie-near-target", "red-follows-load", "red-above-pie-under-load"}
    assert [f["name"] for f in d["sweep"]["factors"]] == ["rate_mbit", "pie_target_ms"]
    v1 = yaml.safe_load(PIE_VS_RED_V1.read_text())["health"]
    assert set(v1) <= set(HEALTH_NEEDS)
    assert m.data["health"] == {k: v for k, v in v1.items() if k != "flow_start_skew_max_ms"}


def test_migrate_data_is_the_files_conversion_in_memory():
    data = yaml.safe_load(PIE_VS_RED_V1.read_text())
    before = copy.deepcopy(data)
    out = migrate_data(data, "run.json:spec")
    assert data == before  # the input is not changed
    assert out == yaml.safe_load(migrate(PIE_VS_RED_V1))  # what the command writes, without its comments
    assert json.loads(json.dumps(out)) == out  # plain data (no YAML styling), as run.json would hold it
    with pytest.raises(SpecError, match=r"^run.json:spec: schema_version: expected 1 \(the file to migrate\), got 2: "
                                        r"it is already version 2$"):
        migrate_data(out, "run.json:spec")
    with pytest.raises(SpecError, match=r"^run.json:spec: .*trials"):
        migrate_data({**data, "trials": "none"}, "run.json:spec")


def test_migrate_command(tmp_path, capsys):
    out = tmp_path / "pvr.yml"
    assert main(["migrate", str(PIE_VS_RED_V1), "-o", str(out)]) == 0
    assert yaml.safe_load(out.read_text())["schema_version"] == 2
    assert main(["validate", str(out)]) == 0  # the whole output is a valid version 2 file
    assert "health.flow_start_skew_max_ms is left out" in out.read_text()  # unmeasurable in version 2
    capsys.readouterr()
    assert main(["migrate", str(PIE_VS_RED_V1), "-o", str(out)]) == 2  # never overwrites
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(out) in err
    assert main(["migrate", str(out)]) == 2  # already version 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "schema_version" in err and str(out) in err
    assert main(["migrate", "pie-vs-red"]) == 2  # the committed file is version 2 already
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "it is already version 2" in err and "experiments/pie-vs-red/experiment.yml" in err
    bad = tmp_path / "bad.yml"
    bad.write_text("schema_version: [1\n")
    assert main(["migrate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(bad) in err


def test_queue_delay_is_rtt_minus_the_recorded_base_rtt(tmp_path):
    """queue_delay_ms is each ping sample's RTT minus its client's base RTT (run.json's
    base_rtt_ms when recorded, else the median of base_rtt.txt), sample by sample."""
    run_dir = shutil.copytree(RUN, tmp_path / "run", ignore=shutil.ignore_patterns("expected", "README.md"))
    tidy = analyze(run_dir, figures=False).tidy
    for t in ("pie-limited", "red-unlimited"):
        for client in ("client1", "client3"):
            rows = tidy[(tidy["trial"] == t) & (tidy["subject"] == f"ping-{client}")]
            rtt = rows[rows["metric"] == "rtt_ms"]["value"].to_numpy()
            qd = rows[rows["metric"] == "queue_delay_ms"]["value"].to_numpy()
            base = rtt - qd
            assert len(rtt) > 100 and base.max() - base.min() < 1e-9 and 100 <= base[0] < 120, (t, client, base)


def _as_compared(m) -> dict:
    """A model's data without what only describes or draws it: descriptions, the phases'
    labels (their text in the figures) and the figures."""
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in ("description", "label")}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x
    return strip({k: v for k, v in m.data.items() if k != "figures"})


def test_the_committed_version_2_file_is_the_migrated_version_1_file():
    """experiments/pie-vs-red/experiment.yml is the model `netrepro migrate` makes of the version
    1 file: the same topology, trials (stacks, sysctls, traffic), phases, collectors, claims,
    health thresholds and sweep; only descriptions and figures were written anew."""
    migrated = Spec.from_data(yaml.safe_load(migrate(PIE_VS_RED_V1)), "migrated").model
    committed = load_spec("pie-vs-red").model
    assert committed.data["schema_version"] == 2
    want, got = _as_compared(migrated), _as_compared(committed)
    # added to the committed file after the version 1 file's time: its time_scale.min and the
    # thresholds of the checks version 1 had not (data_start_lag, shaper_rate_off)
    assert got.pop("time_scale")["min"] == 0.25 and want.pop("time_scale") == {}
    added = {"data_start_lag_max_fraction", "shaper_rate_off_max_fraction"}
    assert set(got["health"]) - set(want["health"]) == added
    got["health"] = {k: v for k, v in got["health"].items() if k not in added}
    # rewritten in the committed file after the version 1 file's time (issue 24): pie-near-target
    # holds the delay to both sides of its target where the sources fill the link (version 1:
    # at most 40 ms everywhere), and the published results carry what each source states
    got_claims, want_claims = got.pop("claims"), want.pop("claims")
    assert [c["id"] for c in got_claims] == [c["id"] for c in want_claims] and got_claims[1:] == want_claims[1:]
    assert want_claims[0]["check"]["kind"] == "bound" and want_claims[0]["check"]["max"] == 40
    assert [c.get("min") for c in got_claims[0]["check"]["checks"]] == [10, 10, None]
    assert [{k: v for k, v in r.items() if k != "values"} for r in got.pop("reference_results")] == \
        want.pop("reference_results")
    # the works the reference cites, by DOI and URL, added for netrepro export (issue 39)
    assert {k: v for k, v in got.pop("reference").items() if not k.endswith(("_doi", "_url"))} == want.pop("reference")
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key] == want[key], key
    assert migrated.data["figures"] != committed.data["figures"]  # the committed file draws Fig. 8


def test_tc_words_with_units_become_version_2_keywords(tmp_path):
    """Version 1 accepted an AQM parameter as one tc word with its unit (``target: 20ms``) or a
    bare number in tc's base unit (``tupdate: 30000``, microseconds): migrate writes them as
    version 2's suffixed keywords, the same file as from ``target_ms: 20`` and ``tupdate_ms: 30``."""
    text = PIE_VS_RED_V1.read_text()
    assert text.count("      target_ms: 20\n") == 1 and text.count("      tupdate_ms: 30\n") == 1
    words = tmp_path / "words.yml"
    words.write_text(text.replace("      target_ms: 20\n", "      target: 20ms\n")
                     .replace("      tupdate_ms: 30\n", "      tupdate: 30000\n"))
    body = lambda t: t.split("\n", 1)[1]  # noqa: E731  (the first line names the input file)
    assert body(migrate(words)) == body(migrate(PIE_VS_RED_V1))
    bad = tmp_path / "bad.yml"
    bad.write_text(text.replace("      target_ms: 20\n", "      target: 20kbit\n"))
    with pytest.raises(SpecError, match=r"aqms\.pie\.params\.target: '20kbit': pie's target is a time"):
        migrate(bad)


def test_a_newline_in_the_input_path_stays_in_the_comment(tmp_path):
    """The output's first line names the input path with its escapes: a newline in the path
    cannot start a YAML line of the converted file."""
    odd = tmp_path / "x\nschema_version: 3\n#"
    odd.mkdir()
    src = odd / "v1.yml"
    shutil.copy(PIE_VS_RED_V1, src)
    out = migrate(src)
    assert out.splitlines()[0].endswith("x\\nschema_version: 3\\n#/v1.yml` from its schema_version 1 file.")
    assert yaml.safe_load(out)["schema_version"] == 2
