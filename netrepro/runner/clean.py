"""``netrepro clean`` (``make clean``): remove generated state, never a live reservation, and
never anything netrepro did not make.

``clean`` looks at each entry of the state root (``.state/``, or ``$NETREPRO_STATE``) and
removes only the state folders netrepro made: a folder holding the marker netrepro writes when
it creates one (:data:`netrepro.sites.base.STATE_MARKER`, :func:`~netrepro.sites.base.state_dir_owner`).
Anything else (files, symbolic links, folders without the marker: a state root pointed at the
wrong place, or a folder made by a netrepro from before the marker) is left as it is and named
on the console.

The state folders ``.state/<experiment>-<site>/`` are what ``down`` needs to release a
reservation: removing the state of a testbed slice that still holds resources would make
it impossible to release with ``make down`` (it would run until it expires). So, among
netrepro's own folders:

- a site that is up and whose reservation is this machine's own (the local site:
  :attr:`netrepro.sites.base.Site.TEARDOWN_ON_CLEAN`) is torn down first (``down``), then its
  folder is removed;
- a folder of any other site whose reservation is still held is kept, and the console says
  which and how to release it;
- everything else (released reservations, leftovers) is removed, with the inventory
  generated from it (``inventory/<experiment>-<site>.yml``, only when it begins with the
  header netrepro writes, :data:`netrepro.sites.inventory.GENERATED_HEADER`).

Results (``results/``) are never touched.
"""

from __future__ import annotations

import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from netrepro.sites.inventory import generated_inventory
from netrepro.experiment.spec import SpecError, load_spec


@dataclass
class CleanResult:
    """What :func:`clean` did. Each list holds paths, sorted.

    Attributes:
        removed: state folders removed (netrepro made them; no reservation held).
        kept: netrepro's state folders kept because they (may) still hold a reservation.
        refused: entries of the state root netrepro did not make (or made before it marked
            its folders), left as they are; and netrepro's folders it could not remove.
    """

    removed: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    refused: list[Path] = field(default_factory=list)


def _split(folder: Path, sites: list[str]) -> tuple[str, str] | None:
    """``(experiment, site)`` from a state folder named ``<experiment>-<site>``, or None."""
    for site in sorted(sites, key=len, reverse=True):
        if folder.name.endswith("-" + site) and len(folder.name) > len(site) + 1:
            return folder.name[: -len(site) - 1], site
    return None


def _refuse(entry: Path, sites: list[str], log) -> None:
    """Say why ``entry`` (not made by netrepro, as far as clean can tell) is left alone."""
    q = shlex.quote(str(entry))
    if entry.is_symlink():
        log(f"[clean] left {entry}: a symbolic link, not a state folder netrepro made; not followed, not removed")
        return
    if not entry.is_dir():
        log(f"[clean] left {entry}: a file, not a state folder netrepro made; not removed")
        return
    parsed = _split(entry, sites)
    if parsed:
        held = (entry / "state.json").is_file()
        how = (f"if netrepro made it, release its reservation first (`make down SITE={parsed[1]} "
               f"EXPERIMENT={parsed[0]}`), then remove it by hand: rm -r {q}") if held else \
              f"if netrepro made it, remove it by hand: rm -r {q}"
        log(f"[clean] left {entry}: it has no netrepro marker ({entry.name}/.netrepro-state): made by a netrepro "
            f"from before the marker, or not by netrepro; {how}")
        return
    log(f"[clean] left {entry}: a folder without netrepro's marker, not made by netrepro; not removed")


def clean(state_root: Path, inventory_dir: Path, log=print) -> CleanResult:
    """Remove the state folders under ``state_root`` that netrepro made and that hold no live
    reservation (see the module docstring).

    Args:
        state_root: the folder of state folders (``.state/`` or ``$NETREPRO_STATE``); never
            removed itself.
        inventory_dir: where the generated inventories are (``inventory/``).
        log: where the console lines go (one per entry kept, refused or removed).
    Returns:
        :class:`CleanResult`. A netrepro folder whose experiment file can no longer be read
        is kept when its state says something is reserved, since only ``down`` may release it.
    """
    from netrepro.runner.steps import down
    from netrepro.sites import SITES, get_site, site_class
    from netrepro.sites.base import state_dir_owner

    res = CleanResult()
    if not state_root.is_dir():
        return res
    for entry in sorted(state_root.iterdir()):
        owner = state_dir_owner(entry)
        if owner is None or owner[1] not in SITES:
            _refuse(entry, list(SITES), log)
            res.refused.append(entry)
            continue
        exp, site_name = owner
        held = (entry / "state.json").is_file()
        if held:
            try:
                spec = load_spec(exp)
                site = get_site(site_name, spec, entry, {})
                held = bool(site.status().get("reserved"))
                if held and site_class(site_name).TEARDOWN_ON_CLEAN:
                    down(spec, site_name, {})
                    held = False
            except (SpecError, OSError, ValueError) as exc:
                log(f"[clean] kept {entry}: cannot tell whether it still holds a reservation ({exc})")
                res.kept.append(entry)
                continue
        if held:
            log(f"[clean] kept {entry}: its reservation is still held; release it with "
                f"`make down SITE={site_name} EXPERIMENT={exp}`, then clean again")
            res.kept.append(entry)
            continue
        try:
            shutil.rmtree(entry)
        except OSError as exc:  # no permission on part of it: the rest stays, named
            log(f"[clean] left {entry}: cannot remove {exc.filename or entry} ({exc.strerror}); "
                f"remove it by hand: rm -r {shlex.quote(str(entry))}")
            res.refused.append(entry)
            continue
        res.removed.append(entry)
        log(f"[clean] removed {entry}")
        inv = inventory_dir / f"{entry.name}.yml"
        if generated_inventory(inv):
            inv.unlink()
            log(f"[clean] removed {inv}")
        elif inv.exists() or inv.is_symlink():
            log(f"[clean] left {inv}: it does not begin with the header netrepro writes; not removed")
    return res
