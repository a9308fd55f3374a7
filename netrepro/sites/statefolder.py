"""A site's state folder, ``.state/<experiment>-<site>/``: made by netrepro with a marker in
it (:func:`make_state_dir`), so that ``netrepro clean`` removes only folders netrepro made
(:func:`state_dir_owner`). What a site writes into it is its ``Site.STATE_ENTRIES``
(:mod:`netrepro.sites.base`)."""

from __future__ import annotations

import json
import os
from pathlib import Path

#: The file netrepro writes into every state folder (``.state/<experiment>-<site>/``) when it
#: creates it: ``netrepro clean`` removes anything only from a folder holding this marker, naming
#: the folder it was written into (:func:`state_dir_owner`), and removes the marker last. Folders
#: made before the marker have none and are left alone (netrepro.runner.clean says how to remove
#: them by hand).
STATE_MARKER = ".netrepro-state"
#: The marker's ``made_by`` value.
STATE_MARKER_MADE_BY = "netrepro"


def make_state_dir(path: Path, experiment: str, site: str) -> Path:
    """Create the state folder ``path`` of ``experiment`` on ``site`` (parents too) and, when
    this call created it, write :data:`STATE_MARKER` into it: a JSON object
    ``{"made_by": "netrepro", "experiment", "site", "folder": <path's name>}``. An existing
    folder is left as it is (no marker is added to a folder netrepro did not just create).

    Returns ``path``. Raises OSError (a file in the way, no permission).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        path.mkdir()
    except FileExistsError:
        if not path.is_dir():
            raise
        return path
    mark = {"made_by": STATE_MARKER_MADE_BY, "experiment": experiment, "site": site, "folder": path.name}
    tmp = path / (STATE_MARKER + ".tmp")
    tmp.write_text(json.dumps(mark, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path / STATE_MARKER)
    return path


def state_dir_owner(path: Path) -> tuple[str, str] | None:
    """``(experiment, site)`` when ``path`` is a real folder (not a symbolic link) holding the
    marker :func:`make_state_dir` wrote, as a regular file whose ``folder`` is ``path``'s own
    name (a marker copied or moved elsewhere proves nothing); else None. Reads only."""
    path = Path(path)
    mark = path / STATE_MARKER
    try:
        if path.is_symlink() or not path.is_dir() or mark.is_symlink() or not mark.is_file():
            return None
        if mark.stat().st_size > 4096:
            return None
        data = json.loads(mark.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("made_by") != STATE_MARKER_MADE_BY or data.get("folder") != path.name:
        return None
    exp, site = data.get("experiment"), data.get("site")
    if not (isinstance(exp, str) and isinstance(site, str) and exp and site and path.name == f"{exp}-{site}"):
        return None
    return exp, site
