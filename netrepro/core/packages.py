"""Debian packages the controller machine needs for a site or the tests: found (an executable
on PATH or in the sbin folders, or a file such as a header), named with the package that
provides it when missing, and installed (apt-get, as root). The sites' setup hooks
(:meth:`netrepro.sites.base.Site.setup`) and ``netrepro setup --dev`` use them.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

#: What fablib needs to build (requirements-fabric.txt, also in requirements-dev.txt: fablib
#: pulls in recordclass, which PyPI has only as source for CPython 3.11): a C compiler and the
#: headers. The fabric site's setup and ``setup --dev`` install them.
DEV_FILES = {"gcc": "gcc", f"/usr/include/python3.{sys.version_info.minor}/Python.h": f"python3.{sys.version_info.minor}-dev"}


def which(exe: str) -> bool:
    """Whether ``exe`` (a name, or an absolute path) is an executable this machine has."""
    if exe.startswith("/"):
        return os.access(exe, os.X_OK)
    # sbin folders too: a non-root PATH may lack them.
    path = os.environ.get("PATH", "") + ":/usr/local/sbin:/usr/sbin:/sbin"
    return shutil.which(exe, path=path) is not None


def apt_install(packages: list[str]) -> None:
    """apt-get update + install ``packages`` non-interactively. Raises RuntimeError on failure."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update", "-qq"],
                 ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]):
        r = subprocess.run(argv, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:3])} failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")


def have(path_or_exe: str) -> bool:
    """An executable on PATH (or the sbin folders), or a file that exists (a header)."""
    return which(path_or_exe) or os.path.exists(path_or_exe)


def install_missing(check_only: bool, log, what: str, needs: dict[str, str] | None = None) -> int:
    """Install the files of ``needs`` (file or executable -> Debian package; default
    :data:`DEV_FILES`, the C compiler and Python headers) that are missing (apt-get, as root),
    for ``what``; exit status as a site's setup (1: missing and check only, or not root; the line
    says what to install)."""
    needs = needs or DEV_FILES
    missing = {f: pkg for f, pkg in needs.items() if not have(f)}
    if not missing:
        log(f"[setup] present for {what}: {', '.join(sorted(Path(f).name for f in needs))}")
        return 0
    pkgs = sorted(set(missing.values()))
    if check_only or os.geteuid() != 0:
        log(f"[setup] missing for {what}: {', '.join(sorted(missing))}; install as root: apt-get install {' '.join(pkgs)}")
        return 1
    log(f"[setup] installing {' '.join(pkgs)} (for {what})")
    apt_install(pkgs)
    return 0
