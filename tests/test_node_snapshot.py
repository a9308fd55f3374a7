"""The node snapshot script (roles/collectors/files/nr-meta.sh) run for real on this machine:
provisioning records the tools' versions once (``--record-versions``), each trial's snapshot
reads them back (``--versions``), and the record is the one a snapshot computing them afresh
gives."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "roles" / "collectors" / "files" / "nr-meta.sh"
#: What only a snapshot taken at one moment differs by.
MOMENT = ("clock_epoch_s", "cpu_ticks", "loadavg")

def _meta(*args: str) -> dict:
    out = subprocess.run(["sh", str(SCRIPT), *args], capture_output=True, text=True, check=True).stdout
    return {k: v for k, v in json.loads(out).items() if k not in MOMENT}


def _record(path: Path) -> str:
    return subprocess.run(["sh", str(SCRIPT), "--record-versions", str(path)], capture_output=True, text=True,
                          check=True).stdout.strip()


def test_recorded_versions_are_written_once_and_read_back_as_computed(tmp_path):
    versions = tmp_path / "node" / "tool-versions.txt"
    assert _record(versions) == "CHANGED"
    written = versions.read_bytes()
    assert _record(versions) == "unchanged" and versions.read_bytes() == written  # idempotent
    fresh, read_back = _meta(), _meta("--versions", str(versions))
    assert read_back == fresh
    assert fresh["iproute2"].startswith("ip utility, iproute2-")


def test_the_snapshot_takes_the_versions_from_the_file_and_computes_them_without_it(tmp_path):
    versions = tmp_path / "tool-versions.txt"
    versions.write_text('"iproute2":"as provisioned","vsftpd":"v","openssh":"o","curl":"c",\n')
    assert _meta("--versions", str(versions))["iproute2"] == "as provisioned"
    assert _meta("--versions", str(tmp_path / "missing.json"))["iproute2"].startswith("ip utility")
    # a changed tool is recorded again
    assert _record(versions) == "CHANGED" and "as provisioned" not in versions.read_text()
