"""Re-analysis with a changed experiment file says so (issue 56): ``netrepro analyze EXPERIMENT
--run RUN`` and ``python -m analysis RUN --experiment FILE`` judge the run by the claims recorded
in it (fixed before it ran), say in one line which claims of the given file differ, and with
``--rejudge`` judge with the file's claims into a new analysis folder whose verdict.json, report
and analysis.json record the re-judgement; the run folder's own outputs are never rewritten.

On copies of the real recorded run tests/data/labs/pie-lab-local-0.2 (never modified) and of its
recorded experiment, in which ``droptail-bufferbloat`` asks for an RTT of at least 300 ms (the
run measured 218 ms, 95 % 189.5 to 246.5): judged so, the claim fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import analysis
from analysis.__main__ import main
from analysis.claims import claims_changed
from analysis.provenance import VERSION_ENV
from netrepro.experiment.spec import Spec

REPO = Path(__file__).resolve().parent.parent
RUN = Path(__file__).resolve().parent / "data" / "labs" / "pie-lab-local-0.2"


def _run_and_file(parent: Path) -> tuple[Path, Path]:
    """A copy of the recorded run, analysed as recorded, and its experiment file with the one
    claim's threshold changed after the run."""
    run = shutil.copytree(RUN, parent / "run", ignore=shutil.ignore_patterns("expected", "README.md"))
    spec = json.loads((run / "run.json").read_text())["spec"]
    next(c for c in spec["claims"] if c["id"] == "droptail-bufferbloat")["check"]["min"] = 300
    exp = parent / "pie-lab.yml"
    exp.write_text(yaml.safe_dump(spec, sort_keys=False))
    return run, exp


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    """The run analysed as recorded, the toolkit's version named (as a user or CI can), so that
    the sources changing under the test cannot make its later analyses another version's."""
    saved = os.environ.get(VERSION_ENV)
    os.environ[VERSION_ENV] = "test-rejudge"
    run, exp = _run_and_file(tmp_path_factory.mktemp("rejudge"))
    yield run, exp, analysis.analyze(run, figures=False)
    if saved is None:
        os.environ.pop(VERSION_ENV)
    else:
        os.environ[VERSION_ENV] = saved


def _state(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.iterdir()) if p.is_file()}


def test_the_claims_that_differ_are_named_as_the_model_reads_them():
    spec = Spec.from_data(json.loads((RUN / "run.json").read_text())["spec"])
    data = json.loads(json.dumps(spec.data))
    data["claims"][0]["check"]["min"] = 300
    data["claims"][1]["text"] = data["claims"][1]["text"] + " "  # the text as written is part of the claim
    data["claims"].append({**data["claims"][-1], "id": "link-used-again"})
    del data["claims"][2]
    assert claims_changed(spec.model.claims, Spec.from_data(data).model.claims) == {
        "added": ["link-used-again"], "removed": ["pie-near-target"],
        "changed": ["droptail-bufferbloat", "pie-cuts-delay"]}
    assert claims_changed(spec.model.claims, Spec.from_data(spec.data).model.claims) == {}


def test_analyze_says_the_file_s_claims_differ_and_judges_by_the_recorded_ones(analysed, capsys):
    run, exp, first = analysed
    before = _state(run)
    assert main([str(run), "--no-figures", "--experiment", str(exp)]) == 0
    out = capsys.readouterr().out.splitlines()
    said = [x for x in out if "differ from those recorded in the run" in x]
    assert said == [f"the claims of {exp} differ from those recorded in the run (changed droptail-bufferbloat); "
                    "judged by the recorded claims, fixed before the run; add --rejudge to judge with the file's "
                    "claims (written as a re-judgement into a new analysis folder)"]
    assert out[-1] == "verdict: inconclusive: 3 of 4 claims hold; 1 undecided (link-used); the undecided claim's " \
                      "95 % intervals straddle a bound; REPEAT=5 would likely decide it"
    assert _state(run) == before  # the same analysis: not a byte rewritten
    assert "rejudgement" not in json.loads((run / "verdict.json").read_text())
    assert not list(run.glob("analysis-*"))


def test_rejudge_judges_with_the_file_s_claims_into_a_new_folder_that_says_so(analysed):
    run, exp, first = analysed
    before = _state(run)
    env = {k: v for k, v in os.environ.items() if not k.startswith("NETREPRO_") or k == VERSION_ENV}
    p = subprocess.run([sys.executable, "-m", "netrepro", "analyze", str(exp), "--run", str(run), "--rejudge"],
                       cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (f"[analyze] re-judged with the claims of {exp}, changed after the run (changed droptail-bufferbloat), "
            "not with those recorded in the run") in p.stdout
    assert "[analyze] not reproduced: 2 of 4 claims hold; 1 fails (droptail-bufferbloat); 1 undecided (link-used)" \
        in p.stdout
    assert _state(run) == before  # the run's own outputs, run.json and raw/ untouched
    (folder,) = run.glob("analysis-*")
    assert folder.name.endswith("-rejudged")
    verdict = json.loads((folder / "verdict.json").read_text())
    assert verdict["verdict"] == "not reproduced"
    assert verdict["rejudgement"] == {"experiment_file": "pie-lab.yml",
                                      "claims_changed": {"changed": ["droptail-bufferbloat"]}}
    report = (folder / "report.md").read_text()
    assert ("**A re-judgement with claims changed after the run**: judged with the claims of the experiment file "
            "`pie-lab.yml` (changed droptail-bufferbloat), not with those recorded in the run") in report
    record = json.loads((folder / "analysis.json").read_text())
    assert record["rejudgement"] == verdict["rejudgement"] and record["inputs"]["rejudged_claims_sha256"]
    # asked again, the same re-judgement is the same folder, its bytes unchanged
    again = analysis.analyze(run, given=Spec.from_data(yaml.safe_load(exp.read_text()), exp), rejudge=True)
    assert again.out_dir == folder and again.verdict == verdict


def test_rejudge_needs_the_file_to_judge_with(analysed, capsys):
    run, _, _ = analysed
    with pytest.raises(SystemExit) as refused:
        main([str(run), "--rejudge"])
    assert refused.value.code == 2
    assert capsys.readouterr().err.strip() == ("analysis: error: --rejudge needs --experiment FILE "
                                               "(the claims to judge with)")
