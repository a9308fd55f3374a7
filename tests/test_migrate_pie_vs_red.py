"""pie-vs-red in schema_version 2: ``netrepro migrate`` converts its version 1 file, and the
generic analysis (analysis/generic.py) of the converted file computes what version 1's
analysis (analysis/summary.py, analysis/verdict.py) computes and judges, on the recorded run
tests/data/pie-vs-red-local-0.1 (the only recorded pie-vs-red run with its raw files):
the same per-phase queueing delays of the three clients' pings pooled, the same
utilisation of the bottleneck, the same claim statuses.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
import yaml

from analysis import analyze
from analysis import generic
from analysis.verdict import CHECKS
from conftest import PIE_VS_RED_V1
from netrepro.cli import main
from netrepro.migrate import migrate
from netrepro.model import HEALTH_NEEDS, data_kinds, statistics
from netrepro.spec import Spec, load_spec

RUN = Path(__file__).resolve().parent / "data" / "pie-vs-red-local-0.1"
#: Version 1 summary column -> (version 2 statistic, subject); the bottleneck port is the router's eth1.
SAME = {"delay_median_ms": ("queue_delay_median_ms", "all"), "delay_mean_ms": ("queue_delay_mean_ms", "all"),
        "delay_p95_ms": ("queue_delay_p95_ms", "all"), "samples": ("queue_delay_samples", "all"),
        "utilization": ("sent_utilization", "router:eth1")}


def _v2_data(v1_file: Path) -> dict:
    """The converted file, without the health thresholds version 2 does not judge yet
    (version 1's ping_received, flow_start_skew and queue_delay_excess, and flow_start_lag,
    which version 2 measures on iperf3 items only)."""
    d = yaml.safe_load(migrate(v1_file))
    m = Spec.from_data({k: v for k, v in d.items() if k != "health"}, "migrated").model
    kinds = data_kinds(m)
    health = {k: v for k, v in d.pop("health", {}).items()
              if k in HEALTH_NEEDS and (not HEALTH_NEEDS[k] or kinds & set(HEALTH_NEEDS[k]))}
    return {**d, "health": health} if health else d


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    base = tmp_path_factory.mktemp("pvr")
    run_dir = base / "run"
    shutil.copytree(RUN, run_dir, ignore=shutil.ignore_patterns("expected", "README.md"))
    data = json.loads((run_dir / "run.json").read_text())
    v1_file = base / "v1.yml"
    v1_file.write_text(yaml.safe_dump(data["spec"], sort_keys=False))
    v1 = analyze(run_dir, figures=False, out_dir=base / "v1")
    spec2 = Spec.from_data(_v2_data(v1_file), base / "v2.yml")
    out = base / "v2"
    out.mkdir()
    v2 = generic.analyze(run_dir, spec2, data, out, {}, figures=False)
    return v1, v2, spec2, data


def test_the_converted_file_validates_but_for_the_health_thresholds_v2_lacks():
    d = _v2_data(PIE_VS_RED_V1)
    m = Spec.from_data(d, "migrated").model
    assert [t["id"] for t in m.trials] == ["pie-unlimited", "red-unlimited", "pie-limited", "red-limited"]
    assert [t["labels"] for t in m.trials][1] == {"aqm": "red", "variant": "unlimited"}
    assert {c["id"] for c in m.data["claims"]} == {"pie-near-target", "red-follows-load", "red-above-pie-under-load"}
    assert [f["name"] for f in d["sweep"]["factors"]] == ["rate_mbit", "pie_target_ms"]


def test_same_per_phase_numbers(both):
    v1, v2, _, _ = both
    s2 = v2["summary"]
    compared = 0
    for r in v1.summary.itertuples():
        for col, (stat, subject) in SAME.items():
            want = getattr(r, col)
            got = s2[(s2["trial"] == f"{r.aqm}-{r.variant}") & (s2["phase"] == r.phase) & (s2["subject"] == subject)
                     & (s2["statistic"] == stat)]["value"]
            if isinstance(want, float) and math.isnan(want):
                assert got.empty, (r.aqm, r.variant, r.phase, col)
                continue
            assert len(got) == 1, (r.aqm, r.variant, r.phase, col)
            assert float(got.iloc[0]) == pytest.approx(float(want), rel=1e-9, abs=1e-9), (r.aqm, r.variant, r.phase, col)
            compared += 1
    assert compared >= 20 * 4  # 4 trials x 5 phases, each with its delays and utilisation


def test_same_claim_statuses_on_the_same_numbers(both):
    """Each claim, judged on its numbers alone (health aside: version 2 has fewer checks of
    the substrate today), holds or fails in both versions alike; and the statuses of the
    recorded verdict come out the same."""
    v1, v2, spec2, _ = both
    m = spec2.model
    ids = [t["id"] for t in m.trials]
    for c1, c2 in zip(v1.run.spec["claims"], m.data["claims"]):
        holds1, _ = CHECKS[c1["check"]["kind"]](v1.summary, c1["check"])
        holds2, evidence = generic.check_claim(v2["summary"], c2["check"], ids, statistics(m))
        assert holds2 is not None, evidence
        assert bool(holds1) == holds2, (c1["id"], evidence)
    status1 = {c["id"]: c["status"] for c in v1.verdict["claims"]}
    status2 = {c["id"]: c["status"] for c in v2["verdict"]["claims"]}
    assert status1 == status2
    assert set(status1.values()) >= {"holds", "fails"}  # the comparison reads both outcomes


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


def test_queue_delay_is_rtt_minus_the_recorded_base_rtt(both):
    """queue_delay_ms is each ping sample's RTT minus its client's base RTT (run.json's
    base_rtt_ms when recorded, else the median of base_rtt.txt), sample by sample."""
    _, v2, _, data = both
    tidy = v2["tidy"]
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
    assert sorted(got) == sorted(want)
    for key in want:
        assert got[key] == want[key], key
    assert migrated.data["figures"] != committed.data["figures"]  # the committed file draws Fig. 8
