"""``netrepro setup`` (``make setup``): install what a site needs on this machine, idempotent.

Each site says what it needs in its setup hook (:meth:`netrepro.sites.base.Site.setup`; the
local site: :mod:`netrepro.sites.local.setup`, ns3: :mod:`netrepro.sites.ns3.setup`, fabric:
:mod:`netrepro.sites.fabric.setup`; the others need nothing beyond the Python packages).
``--dev`` installs what the tests' packages build with instead (:func:`setup_dev`).
"""

from __future__ import annotations

from netrepro.core.packages import DEV_FILES, install_missing
from netrepro.sites import DEFAULT_SITE, site_class

#: What the tests need besides: sudo, with which the FABRIC stand-in's nodes (tests/testbed)
#: let their non-root login user (``ubuntu``, as on FABRIC's images) escalate.
TEST_FILES = {"sudo": "sudo"}


def setup_dev(check_only: bool = False, log=print) -> int:
    """Install what the tests need from Debian: the build tools of their Python packages
    (:data:`DEV_FILES`) and :data:`TEST_FILES`; exit status as :func:`setup`."""
    return install_missing(check_only, log, "the tests", {**DEV_FILES, **TEST_FILES})


def setup(site: str = DEFAULT_SITE, check_only: bool = False, log=print, dev: bool = False,
          options: dict[str, str] | None = None) -> int:
    """Make this machine ready for ``site`` (or, with ``check_only``, say what it lacks and
    change nothing): the site's setup hook (:meth:`netrepro.sites.base.Site.setup`) with the
    site ``options`` given (``--option``, checked against the site's OPTIONS by the caller).
    ``dev``: only the build tools of the tests' packages (:func:`setup_dev`), nothing else.

    Returns a process exit status: 0 ready, 1 something is missing (check only, or not root).
    Raises what the site's hook raises (RuntimeError when apt-get or pip fails; the local
    site: MicroVMError when the kernel cannot be fetched, SiteError for a mode it lacks).
    """
    if dev:
        return setup_dev(check_only, log)
    return site_class(site).setup(dict(options or {}), check_only, log)
