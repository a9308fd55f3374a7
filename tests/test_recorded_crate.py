"""The reference full-length run of pie-vs-red, kept in docs/runs as an RO-Crate with its raw
data (netrepro export), re-analyses to its recorded summary.csv and verdict.json, byte for byte,
and passes roc-validator offline: at REQUIRED level, and at RECOMMENDED level but for what
cannot be known before netrepro is published (docs/publishing-a-run.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from analysis import analyze
from netrepro.runfolder.cratecheck import validate_crate
from tests.test_deposit import problems
from tests.test_export import only_unknown_before_publication

RECORD = Path(__file__).resolve().parent.parent / "docs" / "runs" / "pie-vs-red-crate-local-vm-2026-11-29"


def test_the_reference_run_re_analyses_from_its_crate_to_its_recorded_verdict(tmp_path, offline):
    crate = tmp_path / "crate.zip"
    shutil.copy(next(RECORD.glob("*-crate.zip")), crate)
    assert validate_crate(crate) == []
    # RECOMMENDED: netrepro's address (the SoftwareApplication's url and absolute @id) and its
    # developers' website are not known yet; nothing else is found, and each once
    assert only_unknown_before_publication(validate_crate(crate, severity="RECOMMENDED"))
    again = analyze(crate, figures=False, out_dir=tmp_path / "again")
    assert (again.out_dir / "summary.csv").read_bytes() == (RECORD / "summary.csv").read_bytes()
    # the recorded verdict.json predates the counts of every status and the claims not judged
    # (issue 56): the rest is as recorded, key for key
    verdict = json.loads((again.out_dir / "verdict.json").read_text())
    assert (verdict.pop("counts"), verdict.pop("not_judged")) == ({"holds": 3}, [])
    assert verdict == json.loads((RECORD / "verdict.json").read_text())
    assert again.verdict["verdict"] == "reproduced"


def test_the_reference_runs_deposit_follows_zenodos_rules_and_names_its_creator_as_zenodo_will_cite_it():
    body = json.loads(next(RECORD.glob("*-crate.zenodo.json")).read_text())
    assert problems(body) == []
    assert body["metadata"]["creators"] == [{"person_or_org": {"type": "organizational",
                                                               "name": "The netrepro developers"}}]
