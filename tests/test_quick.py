"""`netrepro quick` (make quick): the time scale it picks, the side-by-side table it prints,
and the file's ``time_scale`` checked before anything runs. The two reproductions themselves
are those of `netrepro reproduce` (tests/test_site_ns3.py, tests/test_integration.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from netrepro.cli.reproduce import quick_table, quick_time_scale
from netrepro.experiment.spec import REPO_ROOT, SpecError, load_spec


def _spec_with(tmp_path: Path, **time_scale):
    data = yaml.safe_load((REPO_ROOT / "experiments/pie-vs-red/experiment.yml").read_text())
    data.pop("time_scale", None)
    if time_scale:
        data["time_scale"] = time_scale
    f = tmp_path / "experiment.yml"
    f.write_text(yaml.safe_dump(data))
    return f


def test_the_quick_time_scale_is_the_files_quick_else_its_min_else_full_length(tmp_path):
    assert quick_time_scale(load_spec(_spec_with(tmp_path, min=0.2, quick=0.25))) == (
        0.25, "the experiment's time_scale.quick")
    assert quick_time_scale(load_spec(_spec_with(tmp_path, min=0.2))) == (0.2, "the experiment's time_scale.min")
    assert quick_time_scale(load_spec(_spec_with(tmp_path)))[0] == 1.0


def test_a_quick_time_scale_below_the_min_is_refused_naming_the_field(tmp_path):
    f = _spec_with(tmp_path, min=0.25, quick=0.1)
    with pytest.raises(SpecError, match=r"time_scale\.quick: expected at least time_scale\.min \(0\.25\), got 0\.1"):
        load_spec(f)
    r = subprocess.run([sys.executable, "-m", "netrepro", "quick", str(f)], capture_output=True, text=True,
                       cwd=REPO_ROOT, timeout=120)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1 and "time_scale.quick" in r.stderr
    assert r.stdout == ""


def test_the_verdicts_are_printed_side_by_side(tmp_path):
    v_sim = {"verdict": "reproduced", "claims": [{"id": "pie-near-target", "status": "holds"},
                                                 {"id": "red-follows-load", "status": "holds"}]}
    v_emu = {"verdict": "inconclusive", "claims": [{"id": "pie-near-target", "status": "inconclusive"},
                                                   {"id": "red-follows-load", "status": "holds"}]}
    lines = quick_table([("ns3", 1.0, tmp_path / "a", v_sim, {"total_s": 41.2}),
                         ("local", 0.25, tmp_path / "b", v_emu, {"total_s": 288.0})])
    assert lines[0].split() == ["claim", "ns3", "(TIME_SCALE", "1,", "41", "s)", "local", "(TIME_SCALE", "0.25,",
                                "288", "s)"]
    assert lines[1].split() == ["pie-near-target", "holds", "inconclusive"]
    assert lines[3].split() == ["verdict", "reproduced", "inconclusive"]
    # the columns line up: each status starts where its header does
    assert lines[1].index("inconclusive") == lines[0].index("local")
    assert lines[-1].endswith(str(tmp_path / "b" / "report.md"))
