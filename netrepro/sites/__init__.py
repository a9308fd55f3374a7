"""Sites: where an experiment's nodes come from. One module per site, one class each.

``SITES`` maps a site name to ``module:Class``; modules are imported only when used, so a
site's optional dependencies (fablib, ...) are needed only by users of that site. To add a
site, write ``netrepro/sites/<name>.py`` with a :class:`~netrepro.sites.base.Site` subclass
and add one line here (docs/adding-a-site.md walks through it).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from netrepro.sites.base import NodeLogin, Site, SiteError
from netrepro.spec import Spec

SITES: dict[str, str] = {
    "local": "netrepro.sites.local:LocalSite",
    "instageni": "netrepro.sites.instageni:InstaGENISite",
    "fabric": "netrepro.sites.fabric:FabricSite",
    "static": "netrepro.sites.static:StaticSite",
}

__all__ = ["SITES", "NodeLogin", "Site", "SiteError", "get_site", "site_class"]


def site_class(name: str) -> type[Site]:
    """The Site subclass registered as ``name``. Raises SiteError for an unknown name."""
    if name not in SITES:
        raise SiteError(f"SITE={name}: unknown site; expected one of: {', '.join(SITES)}")
    module, _, cls = SITES[name].partition(":")
    return getattr(importlib.import_module(module), cls)


def get_site(name: str, spec: Spec, state_dir: Path, options: dict[str, Any] | None = None) -> Site:
    """Instantiate site ``name`` for ``spec`` with its state in ``state_dir``."""
    return site_class(name)(spec, state_dir, options)
