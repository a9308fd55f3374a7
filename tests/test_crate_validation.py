"""The RO-Crate check (netrepro/runfolder/cratecheck.py): roc-validator, in its own virtual
environment ``.venv-crate/`` (``make venv-crate``; ``make test`` makes it), judges the crates
``netrepro export`` will write, offline.

- a minimal Process Run Crate 0.5 built with the ``rocrate`` library (RO-Crate 1.1, the
  workflow-run context for ``sha256``, a SoftwareApplication instrument, a CreateAction with
  object and result files, times with a +00:00 offset), as a folder and as a zip, passes
  ``ro-crate-1.1`` and ``process-run-crate-0.5`` at REQUIRED level: ``validate_crate`` gives [];
- a crate that does not name the profile (no ``conformsTo``), or whose action names no
  instrument, fails, and the problems name the failed check;
- at RECOMMENDED level (``severity``), the SHOULD rules too: the minimal crate's
  SoftwareApplication without a ``url`` is named;
- all of it with the network unreachable: the validator's python runs under ``unshare -n`` (a
  network namespace whose only interface, lo, is down), through ``NETREPRO_CRATE_VALIDATOR``. A
  machine where that cannot be done fails these tests, saying so; none is skipped;
- what a user sees when the validator is not installed, when the variable points nowhere, or
  when it gives no verdict; the vendored contexts are the upstream files README.md names.

These need ``.venv-crate/`` (not .venv: roc-validator pins rich<14); each validation takes a
few seconds.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import zipfile
from pathlib import Path

import pytest
from rocrate.model.contextentity import ContextEntity
from rocrate.rocrate import ROCrate

from netrepro.core.errors import CrateValidatorError, RunFolderError
from netrepro.runfolder import cratecheck
from netrepro.runfolder.cratecheck import (CONTEXTS, JSONLD_DIR, PROFILES, VALIDATOR_ENV,
                                           validate_crate, validator_python)

PROFILE = "https://w3id.org/ro/wfrun/process/0.5"
WORKFLOW_RUN_CONTEXT = "https://w3id.org/ro/terms/workflow-run/context"
#: The check identifiers roc-validator 0.13.0 gives the two requirements the broken crates miss.
CHECK_CONFORMS_TO = "process-run-crate-0.5_2.1"
CHECK_INSTRUMENT = "process-run-crate-0.5_1.1"


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_crate(tmp: Path, out: Path, *, conforms_to: bool = True, instrument: bool = True) -> Path:
    """A minimal Process Run Crate 0.5 of a netrepro run, written to ``out`` (a folder, or a
    zip when ``out`` ends in .zip); without the profile's ``conformsTo`` or the action's
    ``instrument`` when asked. Returns ``out``."""
    src = tmp / "src"
    src.mkdir(exist_ok=True)
    (src / "experiment.yml").write_text("schema_version: 2\nname: pie-vs-red\n")
    (src / "summary.csv").write_text("trial,median_delay_ms\npie,14.2\nred,38.9\n")

    crate = ROCrate(version="1.1")
    crate.metadata.extra_contexts.append(WORKFLOW_RUN_CONTEXT)
    crate.name = "netrepro run pie-vs-red/20261129-000000"
    crate.description = "A network experiment run exported by netrepro"
    crate.datePublished = "2026-11-29T00:10:00+00:00"
    crate.license = crate.add(ContextEntity(crate, "https://spdx.org/licenses/CC-BY-4.0",
                                            properties={"@type": "CreativeWork", "name": "CC BY 4.0"}))
    if conforms_to:
        crate.root_dataset["conformsTo"] = crate.add(ContextEntity(crate, PROFILE, properties={
            "@type": "CreativeWork", "name": "Process Run Crate", "version": "0.5"}))
    files = {name: crate.add_file(src / name, dest_path=name, record_size=True, properties={
        "name": name, "encodingFormat": fmt, "sha256": _sha256(src / name)})
        for name, fmt in (("experiment.yml", "application/yaml"), ("summary.csv", "text/csv"))}
    tool = crate.add(ContextEntity(crate, "https://example.org/netrepro", properties={
        "@type": "SoftwareApplication", "name": "netrepro", "softwareVersion": "0.1.0"}))
    action = crate.add_action(tool if instrument else None, identifier="#run", object=[files["experiment.yml"]],
                              result=[files["summary.csv"]], properties={
                                  "name": "netrepro run pie-vs-red",
                                  "startTime": "2026-11-29T00:00:00+00:00",
                                  "endTime": "2026-11-29T00:09:30+00:00"})
    if not instrument:
        del action["instrument"]  # add_action wrote "instrument": null
    crate.root_dataset.append_to("mentions", action)
    if out.suffix == ".zip":
        crate.write_zip(out)
    else:
        crate.write(out)
    return out


def _metadata(crate: Path) -> dict:
    if crate.suffix == ".zip":
        with zipfile.ZipFile(crate) as z:
            return json.loads(z.read("ro-crate-metadata.json"))
    return json.loads((crate / "ro-crate-metadata.json").read_text())


# --- a good crate ------------------------------------------------------------------------------------
@pytest.mark.parametrize("form", ["folder", "zip"])
def test_a_process_run_crate_passes_offline(tmp_path, offline, form):
    crate = build_crate(tmp_path, tmp_path / ("crate.zip" if form == "zip" else "crate"))
    meta = _metadata(crate)
    assert meta["@context"] == list(CONTEXTS), "the crate names exactly the vendored contexts"
    assert validator_python() == offline
    assert validate_crate(crate) == []


def test_the_recommended_level_adds_the_should_rules(tmp_path, offline):
    # the minimal crate's SoftwareApplication has no url: a SHOULD of the Process Run Crate 0.5
    # ("url: SHOULD, Homepage, documentation or source for the tool"), not a MUST
    crate = build_crate(tmp_path, tmp_path / "crate")
    assert validate_crate(crate, profiles=("process-run-crate-0.5",)) == []
    problems = validate_crate(crate, profiles=("process-run-crate-0.5",), severity="RECOMMENDED")
    assert any(p.startswith("process-run-crate-0.5: RECOMMENDED ") and "The Application SHOULD have a url" in p
               and "[entity https://example.org/netrepro]" in p for p in problems), problems
    with pytest.raises(ValueError, match="severity 'SHOULD'"):
        validate_crate(crate, severity="SHOULD")


# --- broken crates -----------------------------------------------------------------------------------
@pytest.mark.parametrize("broken, check, words", [
    ({"conforms_to": False}, CHECK_CONFORMS_TO, "Root Data Entity conformsTo"),
    ({"instrument": False}, CHECK_INSTRUMENT, "Action instrument"),
], ids=["no-conformsTo", "no-instrument"])
def test_a_broken_crate_fails_naming_the_check(tmp_path, offline, broken, check, words):
    crate = build_crate(tmp_path, tmp_path / "crate", **broken)
    meta = {e["@id"]: e for e in _metadata(crate)["@graph"]}
    assert ("conformsTo" in meta["./"]) is broken.get("conforms_to", True)
    assert ("instrument" in meta["#run"]) is broken.get("instrument", True)
    problems = validate_crate(crate)
    assert problems, "a broken crate passed"
    ours = [p for p in problems if f" {check} " in p]
    assert ours, f"no problem names {check}: {problems}"
    assert all(re.match(r"process-run-crate-0\.5: REQUIRED \S+ ", p) for p in problems), problems
    assert words in ours[0], ours[0]


def test_a_context_that_is_not_vendored_is_a_problem_not_a_download(tmp_path, offline):
    crate = build_crate(tmp_path, tmp_path / "crate")
    meta = _metadata(crate)
    meta["@context"].append("https://example.org/not-vendored/context")
    (crate / "ro-crate-metadata.json").write_text(json.dumps(meta))
    problems = validate_crate(crate, profiles=("ro-crate-1.1",))
    assert problems and any("Unable to retrieve the JSON-LD context" in p and "not-vendored" in p
                            for p in problems), problems


# --- what a user sees when the validator cannot judge -------------------------------------------------
def test_a_missing_validator_names_the_make_target(tmp_path, monkeypatch):
    monkeypatch.delenv(VALIDATOR_ENV, raising=False)
    monkeypatch.setattr(cratecheck, "DEFAULT_VENV", tmp_path / ".venv-crate")
    crate = build_crate(tmp_path, tmp_path / "crate")
    with pytest.raises(CrateValidatorError) as err:
        validate_crate(crate)
    assert "make venv-crate" in str(err.value) and "\n" not in str(err.value)
    # The target the message names makes the virtual environment with the validator's requirements.
    make = subprocess.run(["make", "-n", "-B", "venv-crate"], cwd=cratecheck.REPO_ROOT, capture_output=True, text=True)
    assert make.returncode == 0, make.stderr
    assert "-m venv .venv-crate" in make.stdout and "pip install -q -r requirements-crate-validator.txt" in make.stdout


def test_the_variable_names_a_python_or_a_venv(tmp_path, monkeypatch):
    venv = tmp_path / "v"
    (venv / "bin").mkdir(parents=True)
    py = venv / "bin" / "python"
    py.write_text("#!/bin/sh\n")
    py.chmod(0o755)
    assert validator_python({VALIDATOR_ENV: str(venv)}) == py
    assert validator_python({VALIDATOR_ENV: str(py)}) == py
    monkeypatch.setattr(cratecheck, "DEFAULT_VENV", venv)
    assert validator_python({}) == py
    with pytest.raises(CrateValidatorError, match=rf"^{VALIDATOR_ENV}={re.escape(str(tmp_path))}/nowhere: .*make venv-crate"):
        validator_python({VALIDATOR_ENV: str(tmp_path / "nowhere")})


def test_a_missing_crate_is_a_run_folder_error(tmp_path):
    with pytest.raises(RunFolderError, match="no such RO-Crate"):
        validate_crate(tmp_path / "nothing")


def test_no_verdict_is_an_error_not_a_pass(tmp_path, offline):
    crate = build_crate(tmp_path, tmp_path / "crate")
    with pytest.raises(CrateValidatorError, match="unknown profile no-such-profile"):
        validate_crate(crate, profiles=("no-such-profile",))


# --- the vendored contexts ----------------------------------------------------------------------------
def test_the_vendored_contexts_are_the_upstream_files():
    readme = (JSONLD_DIR / "README.md").read_text()
    assert set(PROFILES) == {"ro-crate-1.1", "process-run-crate-0.5"}
    for url, name in CONTEXTS.items():
        path = JSONLD_DIR / name
        row = next(ln for ln in readme.splitlines() if ln.startswith(f"| `{name}` |"))
        assert f"`{url}`" in row and f"`{_sha256(path)}`" in row, f"{name}: README.md's row differs from the file"
        assert re.search(r"`[0-9a-f]{40}`", row) and "Licence" in readme
        json.loads(path.read_text())
