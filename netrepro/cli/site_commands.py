"""Site functions the command line calls (``netrepro plan``, ``netrepro inventory``,
``netrepro rspec``, ``netrepro profile``). No credentials and no network are used by any of
them. The documents a site writes or reads offline are asked of the site by name
(:data:`netrepro.sites.base.OFFLINE_DOCUMENTS`): the command line imports no site's package.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from netrepro.sites.base import site_class, site_offering
from netrepro.sites.errors import SiteError
from netrepro.experiment.spec import REPO_ROOT, Spec, SpecError

#: The committed request RSpec of an experiment: rspecs/<name>.xml.
RSPECS_DIR = REPO_ROOT / "rspecs"


def committed_rspec_path(spec: Spec) -> Path:
    """Where the committed request RSpec of ``spec`` lives (rspecs/<experiment>.xml)."""
    return RSPECS_DIR / f"{spec.name}.xml"


def plan_text(spec: Spec, site_name: str, options: dict[str, Any] | None = None) -> str:
    """What ``netrepro plan <exp> --site <site>`` prints: exactly what ``reserve`` would
    request (instageni: the RSpec; fabric: the fablib slice built offline; every site: the
    nodes and addresses). Raises SiteError for an unknown site or a bad option."""
    from netrepro.sites import get_site

    with tempfile.TemporaryDirectory(prefix="netrepro-plan-") as tmp:
        return get_site(site_name, spec, Path(tmp), options).plan()


def inventory_from_manifest(spec: Spec, manifest_path: Path | str, user: str | None,
                            site: str | None = None, key_file: str | None = None) -> str:
    """YAML inventory text from a manifest saved by hand (``netrepro inventory <exp> --site
    instageni --manifest FILE --user NAME``): the logins the site reads in it
    (:meth:`netrepro.sites.base.Site.manifest_logins`; ``site`` None: the one site that reads
    manifests).

    Raises:
        SiteError: ``user`` or ``key_file`` unfit for ssh; a site that reads no manifest; the
            manifest is unreadable, or lacks a node, login or address of the spec (one line
            naming the file, the field and what was expected).
    """
    from netrepro.sites.inventory import build_inventory, dump_inventory
    from netrepro.sites.login import existing_file, login_user_problem

    for opt, value, check in (("--user", user, login_user_problem), ("--key", key_file, existing_file)):
        problem = check(value) if value is not None else None
        if problem:
            raise SiteError(f"{opt} {value!r}: {problem}")
    cls = site_class(site) if site is not None else site_offering("manifest_logins")
    logins = cls.manifest_logins(spec, Path(manifest_path), user, key_file)
    return dump_inventory(build_inventory(spec, logins, cls.name))


def check_name_matches_folder(spec: Spec) -> None:
    """Refuse an experiment whose ``name:`` differs from its folder (``experiments/<name>/
    experiment.yml``; for another file name, its stem): files named after the experiment
    (rspecs/<name>.xml, results/<name>/, state) would belong to another experiment.

    Raises:
        SpecError: ``<file>: name: ...`` (one line) naming both names.
    """
    path = Path(spec.path)
    folder = path.parent.name if path.name == "experiment.yml" else path.stem
    if spec.name != folder:
        raise SpecError(path, "name", f"{spec.name!r} differs from the experiment's folder {folder!r}; expected "
                        f"name: {folder} (or rename the folder), so that rspecs/{spec.name}.xml of another "
                        "experiment is not overwritten")


def write_rspec(spec: Spec, path: Path | str | None = None) -> Path:
    """Write the default request of ``spec`` (``make rspec``) to ``path`` (default
    rspecs/<experiment>.xml) and return the path: the one site that writes requests
    (:meth:`netrepro.sites.base.Site.write_request`), bound to no resource.

    Raises:
        SpecError: the experiment's ``name:`` differs from its folder (nothing written).
        SiteError: no site, or several, write requests.
    """
    check_name_matches_folder(spec)
    return site_offering("write_request").write_request(spec, Path(path or committed_rspec_path(spec)))


def rspec_drift(spec: Spec, path: Path | str | None = None) -> str | None:
    """None when the committed request (default rspecs/<experiment>.xml) equals a fresh one,
    else a one-line message (:meth:`netrepro.sites.base.Site.request_drift`)."""
    return site_offering("request_drift").request_drift(spec, Path(path or committed_rspec_path(spec)))


def write_profile(spec: Spec, folder: Path | str) -> Path:
    """Write a testbed profile of ``spec`` into the new folder ``folder`` (``netrepro
    profile``): the one site that writes profiles (:meth:`netrepro.sites.base.Site.write_profile`).
    Returns the folder.

    Raises:
        SiteError: no site, or several, write profiles; the site's refusals (one line).
    """
    return site_offering("write_profile").write_profile(spec, Path(folder))
