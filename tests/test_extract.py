"""Unpacking a node's archive of raw files: safe with and without tarfile's "data" filter
(PEP 706; Debian 12's Python 3.11.2 predates it, which broke the main job on a fresh machine)."""

from __future__ import annotations

import io
import tarfile

import pytest

from netrepro.runner.fetch import extract_archive


def _archive(path, members):
    with tarfile.open(path, "w:gz") as tf:
        for name, kind in members:
            info = tarfile.TarInfo(name)
            if kind == "file":
                data = b"1 2 3\n"
                info.size = len(data)
                tf.addfile(info, io.BytesIO(data))
            elif kind == "dir":
                info.type = tarfile.DIRTYPE
                tf.addfile(info)
            else:
                info.type = tarfile.SYMTYPE
                info.linkname = kind
                tf.addfile(info)


@pytest.fixture(params=["with-data-filter", "without-data-filter"])
def python_kind(request, monkeypatch):
    if request.param == "without-data-filter":
        monkeypatch.delattr(tarfile, "data_filter", raising=False)
    return request.param


def test_regular_files_are_unpacked_and_the_archive_removed(tmp_path, python_kind):
    a = tmp_path / "client1.tar.gz"
    _archive(a, [("client1", "dir"), ("client1/ping.txt", "file")])
    extract_archive(a, tmp_path / "out")
    assert (tmp_path / "out" / "client1" / "ping.txt").read_bytes() == b"1 2 3\n"
    assert not a.exists()


def test_absolute_names_never_land_outside(tmp_path, python_kind):
    """The data filter strips the leading '/' (the file lands inside); the fallback refuses it."""
    a = tmp_path / "abs.tar.gz"
    name = f"/{tmp_path.name}-nr-abs.txt"
    _archive(a, [(name, "file")])
    try:
        extract_archive(a, tmp_path / "out")
        assert (tmp_path / "out" / name.lstrip("/")).is_file()
    except ValueError:
        pass
    assert not (tmp_path.anchor and (tmp_path.__class__("/") / name.lstrip("/")).exists())


@pytest.mark.parametrize("members", [
    [("../escape.txt", "file")],
    [("link", "/etc/passwd")],
], ids=["parent", "symlink-out"])
def test_members_outside_the_folder_are_refused(tmp_path, python_kind, members):
    a = tmp_path / "bad.tar.gz"
    _archive(a, members)
    with pytest.raises((ValueError, tarfile.TarError)):
        extract_archive(a, tmp_path / "out")
    assert not (tmp_path / "escape.txt").exists()
