"""What the fabric site needs on the controller machine (its setup hook,
:meth:`netrepro.sites.fabric.site.FabricSite.setup`): fablib, pinned, and what it builds with.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys

from netrepro.core.packages import install_missing
from netrepro.experiment.spec import REPO_ROOT

#: The fabric site's Python packages (fablib, pinned), installed by :func:`setup_fabric`
#: into the interpreter running netrepro (the virtual environment under make).
FABRIC_REQUIREMENTS = "requirements-fabric.txt"
#: The module fablib installs: present means the fabric site's packages are.
FABRIC_MODULE = "fabrictestbed_extensions"


def setup_fabric(check_only: bool = False, log=print) -> int:
    """The fabric site: fablib (:data:`FABRIC_REQUIREMENTS`, pip, into this interpreter's
    environment) and, first, what it needs to build (:data:`DEV_FILES`: gcc and the Python
    headers, apt-get as root). Returns 0 ready, 1 something missing
    (check only, or not root for the build tools). Raises RuntimeError when pip fails."""
    if importlib.util.find_spec(FABRIC_MODULE) is not None:
        log(f"[setup] fabric site: fablib ({FABRIC_MODULE}) installed")
        return 0
    req = REPO_ROOT / FABRIC_REQUIREMENTS
    if check_only:
        install_missing(True, log, "fablib")
        log(f"[setup] fabric site: missing fablib ({FABRIC_MODULE}); run `make setup SITE=fabric` "
            f"(pip install -r {FABRIC_REQUIREMENTS})")
        return 1
    if install_missing(False, log, "fablib"):
        return 1
    log(f"[setup] installing fablib ({FABRIC_REQUIREMENTS}, pip)")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r", str(req)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"pip install -r {FABRIC_REQUIREMENTS} failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
    log("[setup] fabric site: fablib installed")
    return 0
