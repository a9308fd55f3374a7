"""The version is set in one place (netrepro/__init__.py); `netrepro --version`, the package
metadata, CITATION.cff and the CHANGELOG's newest released section agree with it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import yaml

from netrepro import __version__

ROOT = Path(__file__).resolve().parent.parent


def test_the_command_line_says_the_version():
    out = subprocess.run([sys.executable, "-m", "netrepro", "--version"], capture_output=True, text=True, cwd=ROOT)
    assert out.returncode == 0 and out.stdout.strip() == f"netrepro {__version__}"


def test_citation_changelog_and_pyproject_agree_with_the_one_version():
    assert re.fullmatch(r"\d+\.\d+\.\d+", __version__)
    cff = yaml.safe_load((ROOT / "CITATION.cff").read_text())
    assert cff["version"] == __version__
    released = re.findall(r"^## (\d+\.\d+\.\d+) \((\d{4}-\d{2}-\d{2})\)$", (ROOT / "CHANGELOG.md").read_text(), re.M)
    assert released, "CHANGELOG.md has a section `## X.Y.Z (YYYY-MM-DD)` per release"
    assert released[0] == (__version__, str(cff["date-released"])), "the newest release is the version, on its date"
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert 'dynamic = ["version"]' in pyproject and 'version = {attr = "netrepro.__version__"}' in pyproject
    assert not re.search(r'^version = "', pyproject, re.M), "no second version in pyproject.toml"
