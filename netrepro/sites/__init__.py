"""Sites: where an experiment's nodes come from. One package per site, its helpers inside it.

``SITES`` (defined in :mod:`netrepro.sites.base`, next to the Site class) maps a site name to
``module:Class``; modules are imported only when used, so a site's optional dependencies
(fablib, ...) are needed only by users of that site. What the sites and the runner share is in
this package's own modules: :mod:`netrepro.sites.base` (the Site interface and its helpers),
:mod:`netrepro.sites.errors` (SiteError), :mod:`netrepro.sites.options` (a site's options and
their checks), :mod:`netrepro.sites.login` (a node's login and its checks),
:mod:`netrepro.sites.statefolder` (a site's state folder and its marker) and
:mod:`netrepro.sites.inventory` (the Ansible inventory and SSH options). To add a
site, write a package ``netrepro/sites/<name>/`` whose ``site.py`` holds a
:class:`~netrepro.sites.base.Site` subclass and add one line to ``SITES``
(docs/adding-a-site.md walks through it); the import contracts (.importlinter) keep it
independent of the other sites without being edited.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Collection

from netrepro.sites.base import DEFAULT_SITE, SITES, Site, site_class
from netrepro.sites.errors import SiteError
from netrepro.sites.login import NodeLogin
from netrepro.sites.options import SiteOptions
from netrepro.experiment.spec import Spec, SpecError

#: Environment variables (make variables) passed as site options: variable -> option key.
#: A variable that is set must name an option of the chosen site (else it is refused).
OPTION_ENV: dict[str, str] = {
    "LOCAL_MODE": "mode", "AGGREGATE": "aggregate", "IMAGE": "image", "VM_TYPE": "vm_type",
    "FABRIC_SITE": "fabric_site", "CORES": "cores", "RAM_GB": "ram_gb", "DISK_GB": "disk_gb",
    "STATIC_FILE": "static_file", "SLICE_NAME": "slice_name", "GENI_USER": "user",
    "MANIFEST": "manifest", "SSH_KEY": "key_file", "SWITCH_NIC": "switch_nic",
    "INSTALL_PACKAGES": "install_packages", "KERNEL_UPGRADE": "kernel_upgrade",
}

#: Environment variables passed as a site option only to a site that declares that option, and
#: ignored by the others: ``HOURS`` (make exports it to every command, and renew reads it as its
#: --hours) is the initial lease of a site that has one (its option ``hours``: instageni, fabric),
#: and means nothing to a site without a lease.
DECLARED_OPTION_ENV: dict[str, str] = {"HOURS": "hours"}

__all__ = ["OPTION_ENV", "DECLARED_OPTION_ENV", "DEFAULT_SITE", "SITES", "NodeLogin", "Site", "SiteError", "SiteOptions", "get_site", "site_class",
           "site_options"]


def get_site(name: str, spec: Spec, state_dir: Path, options: dict[str, Any] | None = None, copy: int = 1) -> Site:
    """Instantiate site ``name`` for ``spec`` with its state in ``state_dir``: its ``copy``-th
    reservation of the topology (:class:`~netrepro.sites.base.Site`; SiteError)."""
    return site_class(name)(spec, state_dir, options, copy)


def site_options(pairs: list[str] | None, environ: dict[str, str] | None = None,
                 declared: Collection[str] = ()) -> SiteOptions:
    """Site options from the environment (:data:`OPTION_ENV`, set and non-empty; and
    :data:`DECLARED_OPTION_ENV` for the option keys in ``declared``, the chosen site's) and then
    ``--option KEY=VALUE`` ``pairs`` (which win), remembering where each came from.

    Keys and values are checked when the site is made (:func:`netrepro.sites.options.check_options`).
    Raises:
        SpecError: a pair without ``=`` (one line naming ``--option``).
    """
    environ = os.environ if environ is None else environ
    opts = SiteOptions()
    for var, key in [*OPTION_ENV.items(), *((v, k) for v, k in DECLARED_OPTION_ENV.items() if k in declared)]:
        if environ.get(var):
            opts[key] = environ[var]
            opts.origins[key] = var
    for kv in pairs or []:
        if "=" not in kv:
            raise SpecError("command line", "--option", f"expected KEY=VALUE, got {kv!r}")
        k, v = kv.split("=", 1)
        opts[k] = v
        opts.origins[k] = "--option"
    return opts
