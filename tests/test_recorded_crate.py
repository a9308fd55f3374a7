"""The reference full-length run of pie-vs-red, kept in docs/runs as an RO-Crate with its raw
data (netrepro export), re-analyses to its recorded summary.csv and verdict.json, byte for byte,
and passes roc-validator offline."""

from __future__ import annotations

import shutil
from pathlib import Path

from analysis import analyze
from netrepro.runfolder.cratecheck import validate_crate

RECORD = Path(__file__).resolve().parent.parent / "docs" / "runs" / "pie-vs-red-crate-local-vm-2026-11-29"


def test_the_reference_run_re_analyses_from_its_crate_to_its_recorded_verdict(tmp_path, offline):
    crate = tmp_path / "crate.zip"
    shutil.copy(next(RECORD.glob("*-crate.zip")), crate)
    assert validate_crate(crate) == []
    again = analyze(crate, figures=False, out_dir=tmp_path / "again")
    for name in ("summary.csv", "verdict.json"):
        assert (again.out_dir / name).read_bytes() == (RECORD / name).read_bytes(), name
    assert again.verdict["verdict"] == "reproduced"
