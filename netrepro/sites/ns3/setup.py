"""What the ns3 site needs on the controller machine (its setup hook,
:meth:`netrepro.sites.ns3.site.Ns3Site.setup`): a C++ compiler, ns-3's libraries and the simulator
built against them.
"""

from __future__ import annotations

import os
import subprocess
import sys

from netrepro.core.packages import apt_install, which
from netrepro.sites.ns3 import simulator as ns3


def setup_ns3(check_only: bool = False, log=print) -> int:
    """The ns3 site: g++ (Debian package g++), the C++ libraries of the pinned PyPI ns3 wheel
    (netrepro.sites.ns3.simulator.NS3_WHEEL, ``pip install --no-deps``: its Python bindings are not
    used) and netrepro-sim built against them; returns 0 ready, 1 something missing (check only, or not root). Raises
    RuntimeError when apt-get or pip fails."""
    missing = []
    if not which("g++"):
        missing.append("g++")
    have = (ns3.ns3_dir() / "include" / "ns3" / "core-module.h").is_file()
    if check_only:
        if not have:
            missing.append(f"{ns3.NS3_WHEEL} (pip)")
        if not ns3.simulator_path().is_file():
            missing.append("netrepro-sim (built by make setup SITE=ns3)")
        log(f"[setup] ns3 site: missing {', '.join(missing)}" if missing else "[setup] ns3 site: ready")
        return 1 if missing else 0
    if missing:
        if os.geteuid() != 0:
            log("[setup] ns3 site: missing g++; install as root: apt-get install g++")
            return 1
        log("[setup] installing g++ (to build netrepro-sim against ns-3)")
        apt_install(["g++"])
    if not have:
        log(f"[setup] installing {ns3.NS3_WHEEL} (the C++ libraries of ns-3 {ns3.NS3_VERSION}, about 70 MB)")
        r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", ns3.NS3_WHEEL],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"pip install {ns3.NS3_WHEEL} failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
    path = ns3.build(log)
    log(f"[setup] ns3 site: netrepro-sim ready ({path})")
    return 0
