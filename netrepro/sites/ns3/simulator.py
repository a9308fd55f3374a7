"""The simulator of the ns3 site: ns-3's C++ libraries (the pinned PyPI wheel) and netrepro-sim
(netrepro-sim.cc, beside this module) built against them, kept by the sha256 of its source.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

from netrepro.sites.errors import SiteError

#: The ns-3 release of the PyPI wheel whose C++ headers and libraries netrepro-sim is built
#: against (``pip install --no-deps ns3==3.44.post0``: its cppyy Python bindings are not used).
NS3_VERSION = "3.44"
NS3_WHEEL = "ns3==3.44.post0"
#: The ns-3 libraries netrepro-sim links (``-Wl,--no-as-needed``: the traffic-control library
#: registers the queue discs' TypeIds only when it is loaded).
NS3_MODULES = ("core", "network", "internet", "point-to-point", "applications", "internet-apps",
               "traffic-control", "stats", "bridge", "mobility")
SOURCE = Path(__file__).resolve().parent / "netrepro-sim.cc"


def ns3_dir() -> Path:
    """The installed wheel's ``ns3`` folder (headers in include/, libraries in lib64/)."""
    return Path(sysconfig.get_paths()["purelib"]) / "ns3"


def simulator_path() -> Path:
    """Where the built netrepro-sim is kept: named by the sha256 of its source and the ns-3
    version, so a changed source is built again (``.venv/share/netrepro/``)."""
    h = hashlib.sha256(SOURCE.read_bytes() + NS3_VERSION.encode()).hexdigest()[:12]
    return Path(sys.prefix) / "share" / "netrepro" / f"netrepro-sim-{h}"


def build_command(out: Path) -> list[str]:
    """The g++ command line that builds netrepro-sim from :data:`SOURCE` into ``out``."""
    ns3 = ns3_dir()
    libs = [f"-lns{NS3_VERSION}-{m}" for m in NS3_MODULES]
    return ["g++", "-std=c++20", "-O2", f"-I{ns3 / 'include'}", str(SOURCE), f"-L{ns3 / 'lib64'}",
            "-Wl,--no-as-needed", *libs, f"-Wl,-rpath,{ns3 / 'lib64'}", "-rdynamic", "-ldl", "-o", str(out)]


def build(log=print) -> Path:
    """Build netrepro-sim when missing (g++, about 10 s) and remove the builds of earlier
    sources; return its path.

    Raises:
        SiteError: the wheel is not installed or g++ is missing or fails (one line).
    """
    out = simulator_path()
    if out.is_file():
        return out
    if not (ns3_dir() / "include" / "ns3" / "core-module.h").is_file():
        raise SiteError(f"site ns3: the ns-3 {NS3_VERSION} libraries are not installed ({ns3_dir()}); "
                        "run `make setup SITE=ns3`")
    if shutil.which("g++") is None:
        raise SiteError("site ns3: g++ is missing; run `make setup SITE=ns3`")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + f".{os.getpid()}.tmp")
    log(f"[ns3] building {out.name} against ns-3 {NS3_VERSION}")
    p = subprocess.run(build_command(tmp), capture_output=True, text=True)
    if p.returncode != 0:
        tmp.unlink(missing_ok=True)
        first = next((ln for ln in p.stderr.splitlines() if "error" in ln), p.stderr.strip()[:200])
        raise SiteError(f"site ns3: building netrepro-sim failed: {first}")
    os.replace(tmp, out)
    for old in out.parent.glob("netrepro-sim-*"):  # builds of earlier sources
        if old != out and not old.name.endswith(".tmp"):
            old.unlink(missing_ok=True)
    return out
