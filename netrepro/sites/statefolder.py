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


def folder_name(experiment: str, site: str, copy: int = 1) -> str:
    """The name of the state folder of ``experiment``'s ``copy``-th reservation on ``site``:
    ``<experiment>-<site>``, and ``<experiment>-<site>.<copy>`` for a copy above 1 (a campaign's
    parallel reservations, ``--parallel``). The dot keeps it apart from any experiment's or
    site's name, which have none."""
    return f"{experiment}-{site}" + (f".{copy}" if copy > 1 else "")


def make_state_dir(path: Path, experiment: str, site: str, copy: int = 1) -> Path:
    """Create the state folder ``path`` of ``experiment`` on ``site`` (parents too) and, when
    this call created it, write :data:`STATE_MARKER` into it: a JSON object
    ``{"made_by": "netrepro", "experiment", "site", "folder": <path's name>}``, with ``copy``
    when it is above 1 (:func:`folder_name`). An existing
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
    if copy > 1:
        mark["copy"] = copy
    tmp = path / (STATE_MARKER + ".tmp")
    tmp.write_text(json.dumps(mark, indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path / STATE_MARKER)
    return path


def state_dir_owner(path: Path) -> tuple[str, str, int] | None:
    """``(experiment, site, copy)`` when ``path`` is a real folder (not a symbolic link) holding
    the marker :func:`make_state_dir` wrote, as a regular file whose ``folder`` is ``path``'s own
    name (a marker copied or moved elsewhere proves nothing) and the name :func:`folder_name`
    gives; else None. Reads only."""
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
    exp, site, copy = data.get("experiment"), data.get("site"), data.get("copy", 1)
    if not (isinstance(exp, str) and isinstance(site, str) and exp and site and type(copy) is int and copy >= 1
            and path.name == folder_name(exp, site, copy)):
        return None
    return exp, site, copy
