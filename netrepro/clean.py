"""``netrepro clean`` (``make clean``): remove generated state, never a live reservation.

The state folders ``.state/<experiment>-<site>/`` are what ``down`` needs to release a
reservation: removing the state of a testbed slice that still holds resources would make
it impossible to release with ``make down`` (it would run until it expires). So:

- a local site that is up is torn down first (``down``), then its folder is removed;
- a folder of any other site whose reservation is still held is kept, and the console says
  which and how to release it;
- everything else (released reservations, leftovers) is removed, with the inventory
  generated from it.

Results (``results/``) are never touched.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from netrepro.spec import SpecError, load_spec


def _split(folder: Path, sites: list[str]) -> tuple[str, str] | None:
    """``(experiment, site)`` from a state folder named ``<experiment>-<site>``, or None."""
    for site in sorted(sites, key=len, reverse=True):
        if folder.name.endswith("-" + site) and len(folder.name) > len(site) + 1:
            return folder.name[: -len(site) - 1], site
    return None


def clean(state_root: Path, inventory_dir: Path, log=print) -> list[Path]:
    """Remove the state folders under ``state_root`` that hold no live reservation.

    Returns the folders kept (each still holds a reservation; ``down`` releases it).
    A folder whose experiment file can no longer be read is kept too when its state says
    something is reserved, since only ``down`` may release it.
    """
    from netrepro.controller import down
    from netrepro.sites import SITES, get_site

    kept: list[Path] = []
    if not state_root.is_dir():
        return kept
    for folder in sorted(p for p in state_root.iterdir() if p.is_dir()):
        parsed = _split(folder, list(SITES))
        held = (folder / "state.json").is_file()
        if parsed and held:
            exp, site_name = parsed
            try:
                spec = load_spec(exp)
                site = get_site(site_name, spec, folder, {})
                held = bool(site.status().get("reserved"))
                if held and site_name == "local":
                    down(spec, "local", {})
                    held = False
            except (SpecError, OSError, ValueError) as exc:
                log(f"[clean] kept {folder}: cannot tell whether it still holds a reservation ({exc})")
                kept.append(folder)
                continue
        if held:
            hint = f"`make down SITE={parsed[1]} EXPERIMENT={parsed[0]}`" if parsed else "`make down` with its SITE and EXPERIMENT"
            log(f"[clean] kept {folder}: its reservation is still held; release it with {hint}, then clean again")
            kept.append(folder)
            continue
        shutil.rmtree(folder)
        if parsed:
            (inventory_dir / f"{folder.name}.yml").unlink(missing_ok=True)
        log(f"[clean] removed {folder}")
    return kept
