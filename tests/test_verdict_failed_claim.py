"""No verdict hides a failed claim (issue 56): a claim that fails on data that passed their
health checks makes the run "not reproduced", whatever another claim's status, and the
undecided, inconclusive and not evaluable claims are listed beside it; the verdict's line on
the console and in the report counts every status.

On a copy of the real recorded run tests/data/labs/pie-lab-local-0.2 (never modified), whose
claim ``link-used`` is undecided (an interval of the 100 Mbit/s trial's utilization straddles
0.8) and whose every health check passes; in the copy the recorded experiment's
``droptail-bufferbloat`` asks for an RTT of at least 300 ms where the run measured 218 ms
(95 % 189.5 to 246.5): wholly below, so it fails.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import analysis
from analysis.__main__ import main
from analysis.claims import verdict_of, verdict_record
from analysis.console import verdict_line

RUN = Path(__file__).resolve().parent / "data" / "labs" / "pie-lab-local-0.2"


def _with_claim_min(parent: Path, claim: str, least: float) -> Path:
    """A copy of the recorded run whose recorded experiment's ``claim`` has ``min: least``."""
    run = shutil.copytree(RUN, parent / "run", ignore=shutil.ignore_patterns("expected", "README.md"))
    data = json.loads((run / "run.json").read_text())
    check = next(c for c in data["spec"]["claims"] if c["id"] == claim)["check"]
    check["min"] = least
    (run / "run.json").write_text(json.dumps(data, indent=1))
    return run


@pytest.fixture(scope="module")
def failed_and_undecided(tmp_path_factory):
    run = _with_claim_min(tmp_path_factory.mktemp("failed"), "droptail-bufferbloat", 300)
    return run, analysis.analyze(run, figures=False)


def test_a_claim_failing_on_healthy_data_decides_not_reproduced_beside_an_undecided_one(failed_and_undecided):
    run, res = failed_and_undecided
    v = res.verdict
    status = {c["id"]: c["status"] for c in v["claims"]}
    assert status == {"droptail-bufferbloat": "fails", "pie-cuts-delay": "holds", "pie-near-target": "holds",
                      "link-used": "undecided"}
    assert v["health_failures"] == []  # the failed claim's data passed every health check
    assert v["verdict"] == "not reproduced" and v["reproduced"] is False
    assert v["counts"] == {"holds": 2, "fails": 1, "undecided": 1}
    assert v["not_judged"] == ["link-used"]  # listed beside the verdict
    assert json.loads((run / "verdict.json").read_text()) == v


def test_the_console_and_the_report_count_the_failed_claim(failed_and_undecided, capsys):
    run, res = failed_and_undecided
    line = verdict_line(res.verdict)
    assert line.startswith("not reproduced: 2 of 4 claims hold; 1 fails (droptail-bufferbloat); "
                           "1 undecided (link-used); the undecided claim's 95 % intervals straddle a bound; REPEAT=")
    report = (run / "report.md").read_text()
    first = next(x for x in report.splitlines() if x.startswith("**Verdict"))
    assert first.startswith("**Verdict: not reproduced** (2 of 4 claims hold; 1 fails (droptail-bufferbloat): ")
    assert "; 1 undecided (link-used): the 95 % interval" in first
    assert main([str(run), "--no-figures"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == f"verdict: {line}"
    assert "FAILS droptail-bufferbloat: rtt_median_ms within [300, inf]" in "\n".join(out)


def test_the_verdict_of_each_mix_of_statuses():
    assert verdict_of(["holds", "fails", "undecided"]) == "not reproduced"
    assert verdict_of(["fails", "inconclusive", "not evaluable"]) == "not reproduced"
    assert verdict_of(["holds", "undecided"]) == "inconclusive"  # undecided alone: inconclusive
    assert verdict_of(["holds", "inconclusive"]) == "inconclusive"
    assert verdict_of(["holds", "not applicable"]) == "reproduced"
    assert verdict_of(["not applicable"]) == verdict_of([]) == "inconclusive"  # nothing judged
    v = verdict_record([{"id": "a", "status": "fails", "holds": False}, {"id": "b", "status": "not evaluable",
                                                                         "holds": None}], health_failures=[])
    assert (v["verdict"], v["counts"], v["not_judged"]) == ("not reproduced", {"fails": 1, "not evaluable": 1}, ["b"])
    assert verdict_line(v) == "not reproduced: 0 of 2 claims hold; 1 fails (a); 1 not evaluable (b)"


def test_a_repeated_run_with_a_failed_claim_beside_an_undecided_one_is_not_reproduced():
    """The across-repetition verdict follows the same rule (analysis.repetitions.combine_verdicts)."""
    from analysis.repetitions import combine_verdicts

    def rep(a: str, b: str) -> dict:
        return {"claims": [{"id": "a", "text": "", "status": a, "holds": a == "holds", "evidence": ""},
                           {"id": "b", "text": "", "status": b, "holds": None, "evidence": ""}]}

    v = combine_verdicts({1: rep("fails", "inconclusive"), 2: rep("fails", "holds")})
    assert [c["status"] for c in v["claims"]] == ["fails", "inconclusive"]
    assert v["verdict"] == "not reproduced" and v["not_judged"] == ["b"]
