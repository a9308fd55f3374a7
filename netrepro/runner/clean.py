"""``netrepro clean`` (``make clean``): remove generated state, never a live reservation, and
never anything netrepro did not write.

``clean`` looks at each entry of the state root (``.state/``, or ``$NETREPRO_STATE``) and
touches only the state folders netrepro made: a folder holding the marker netrepro writes when
it creates one (:data:`netrepro.sites.statefolder.STATE_MARKER`, :func:`~netrepro.sites.statefolder.state_dir_owner`).
Anything else (files, symbolic links, folders without the marker: a state root pointed at the
wrong place, or a folder made by a netrepro from before the marker) is left as it is and named
on the console.

The state folders ``.state/<experiment>-<site>/`` are what ``down`` needs to release a
reservation: removing the state of a testbed slice that still holds resources would make
it impossible to release with ``make down`` (it would run until it expires). So, among
netrepro's own folders:

- a site that is up and whose reservation is this machine's own (the local site:
  :attr:`netrepro.sites.base.Site.TEARDOWN_ON_CLEAN`) is torn down first (``down``), then its
  folder is emptied;
- a folder of any other site whose reservation is still held is kept whole, and the console
  says which and how to release it;
- a folder whose state.json cannot be read as the run state netrepro writes (not JSON, not
  a JSON object: :func:`netrepro.sites.base.read_state_file`) is kept whole, before its site
  is asked anything: whether it holds a reservation cannot be told;
- every other folder (released reservations, leftovers) is emptied, and the inventory
  generated from it is removed (``inventory/<experiment>-<site>.yml``, only when it begins
  with the header netrepro writes, :data:`netrepro.sites.inventory.GENERATED_HEADER`).

Emptying a folder removes only the entries its site declares it writes there
(:attr:`netrepro.sites.base.Site.STATE_ENTRIES`, judged by the names of the folder's
top-level entries: a declared folder such as ``ssh/`` goes with all it holds; a symbolic link
is removed, never followed), then the marker last, then the folder. Anything else found in it
(a user's notes, a copy of a log) is kept and named on the console, one line each, with the
command that removes it by hand; the folder then stays with its marker, so that a later
``clean`` removes it once those entries are gone.

Results (``results/``) are never touched.
"""

from __future__ import annotations

import fnmatch
import shlex
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from netrepro.sites.base import Site, SiteError, read_state_file
from netrepro.sites.statefolder import STATE_MARKER, state_dir_owner
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
        unreadable: netrepro's state folders kept whole because their state.json is not the
            run state netrepro writes -> the one-line problem (naming the file and what was
            expected).
        foreign: entries found in netrepro's state folders that their site does not declare
            (:func:`foreign_entries`): kept, once netrepro's own entries around them were
            removed. Each one's folder (its ``parent``) stays, with its marker, and is in
            no other list.
    """

    removed: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    refused: list[Path] = field(default_factory=list)
    foreign: list[Path] = field(default_factory=list)
    unreadable: dict[Path, str] = field(default_factory=dict)

    def unreadable_line(self) -> str:
        """One line on the folders kept for their unreadable state.json (``unreadable``, not
        empty): the one file's problem, or every file with what was expected of each."""
        if len(self.unreadable) == 1:
            (folder, problem), = self.unreadable.items()
            return f"{problem}; clean removed nothing of {folder}"
        files = ", ".join(str(f / "state.json") for f in self.unreadable)
        return (f"{len(self.unreadable)} state files unreadable ({files}; listed above): expected each a JSON "
                "object, the run state netrepro wrote; clean removed nothing of their folders; release their sites "
                "by hand if they hold resources, then delete the files")


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


def foreign_entries(folder: Path, site_cls: type[Site]) -> list[Path]:
    """The entries of the state folder ``folder`` that ``site_cls`` does not declare it writes
    there (none of its :attr:`~netrepro.sites.base.Site.STATE_ENTRIES` matches the entry's name,
    :func:`fnmatch.fnmatchcase`), sorted; [] when it declares them all. Reads only; raises
    OSError when ``folder`` cannot be listed."""
    return sorted(e for e in folder.iterdir()
                  if not any(fnmatch.fnmatchcase(e.name, pattern) for pattern in site_cls.STATE_ENTRIES))


def _remove_entry(path: Path) -> None:
    """Remove ``path``: a folder with everything in it, a file or a symbolic link (not followed)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink()


def _empty(folder: Path, site_cls: type[Site]) -> list[Path]:
    """Remove the entries of netrepro's state folder ``folder`` that ``site_cls`` declares, then,
    when nothing else is left, the marker and the folder. Returns the entries kept
    (:func:`foreign_entries`; [] when the folder is gone). Raises OSError (no permission): what
    was removed before stays removed, the marker stays."""
    foreign = foreign_entries(folder, site_cls)
    for entry in sorted(folder.iterdir()):
        if entry.name != STATE_MARKER and entry not in foreign:
            _remove_entry(entry)
    if not foreign:
        (folder / STATE_MARKER).unlink(missing_ok=True)
        folder.rmdir()
    return foreign


def _state_problem(entry: Path) -> str | None:
    """What is wrong with the state.json of netrepro's state folder ``entry`` (one line naming
    the file and what was expected, :func:`netrepro.sites.base.read_state_file`), or None when it
    is the run state netrepro writes or there is none. Reads only."""
    try:
        read_state_file(entry / "state.json")
    except SiteError as exc:
        return str(exc)
    return None


def _still_held(entry: Path, exp: str, site_name: str, number: int, log) -> bool:
    """Whether netrepro's state folder ``entry`` of ``exp`` on ``site_name`` (may) still hold a
    reservation (its ``number`` in a parallel campaign), said on the console when it does; a live reservation of a site that is
    :attr:`~netrepro.sites.base.Site.TEARDOWN_ON_CLEAN` is torn down first (``down``). A folder
    with a state.json whose experiment file can no longer be read counts as held."""
    from netrepro.runner.steps import down
    from netrepro.sites import get_site, site_class

    if not (entry / "state.json").is_file():
        return False
    try:
        spec = load_spec(exp)
        held = bool(get_site(site_name, spec, entry, {}, number).status().get("reserved"))
        if held and site_class(site_name).TEARDOWN_ON_CLEAN:
            down(spec, site_name, {}, reservations=[number])
            held = False
    except (SpecError, SiteError, OSError, ValueError) as exc:   # SiteError: a state down refuses (check_state)
        log(f"[clean] kept {entry}: cannot tell whether it still holds a reservation ({exc})")
        return True
    if held:
        log(f"[clean] kept {entry}: its reservation is still held; release it with "
            f"`make down SITE={site_name} EXPERIMENT={exp}`, then clean again")
    return held


def _clean_folder(entry: Path, site_name: str, inventory_dir: Path, res: CleanResult, log) -> None:
    """Empty netrepro's state folder ``entry`` of site ``site_name`` (:func:`_empty`), naming on
    the console each entry kept and the folder that stays for them, then remove the inventory
    generated from it; record each in ``res``."""
    from netrepro.sites import site_class

    q = shlex.quote(str(entry))
    try:
        foreign = _empty(entry, site_class(site_name))
    except OSError as exc:  # no permission on part of it: the rest stays, named
        log(f"[clean] left {entry}: cannot remove {exc.filename or entry} ({exc.strerror}); "
            f"remove it by hand: rm -r {q}")
        res.refused.append(entry)
        return
    for kept in foreign:
        log(f"[clean] left {kept}: not something netrepro writes into a state folder of the {site_name} site; kept; "
            f"if you no longer need it, remove it by hand: rm -r {shlex.quote(str(kept))}")
    if foreign:
        n = len(foreign)
        log(f"[clean] left {entry}: netrepro's own entries removed; the folder stays, with its marker, for the "
            f"{n} entr{'y' if n == 1 else 'ies'} above; remove {'it' if n == 1 else 'them'} and `netrepro clean` "
            f"removes the folder, or remove it all by hand: rm -r {q}")
        res.foreign.extend(foreign)
    else:
        res.removed.append(entry)
        log(f"[clean] removed {entry}")
    inv = inventory_dir / f"{entry.name}.yml"
    if generated_inventory(inv):
        inv.unlink()
        log(f"[clean] removed {inv}")
    elif inv.exists() or inv.is_symlink():
        log(f"[clean] left {inv}: it does not begin with the header netrepro writes; not removed")


def clean(state_root: Path, inventory_dir: Path, log=print) -> CleanResult:
    """Empty and remove the state folders under ``state_root`` that netrepro made and that hold
    no live reservation, keeping what netrepro did not write (see the module docstring).

    Args:
        state_root: the folder of state folders (``.state/`` or ``$NETREPRO_STATE``); never
            removed itself.
        inventory_dir: where the generated inventories are (``inventory/``).
        log: where the console lines go (one per entry kept, refused or removed).
    Returns:
        :class:`CleanResult`. A netrepro folder whose experiment file can no longer be read
        is kept when its state says something is reserved, since only ``down`` may release it;
        one whose state.json is unreadable is kept whole (``unreadable``).
    """
    from netrepro.sites import SITES

    res = CleanResult()
    if not state_root.is_dir():
        return res
    for entry in sorted(state_root.iterdir()):
        owner = state_dir_owner(entry)
        if owner is None or owner[1] not in SITES:
            _refuse(entry, list(SITES), log)
            res.refused.append(entry)
        elif (problem := _state_problem(entry)) is not None:
            log(f"[clean] kept {entry}: nothing in it removed: {problem}")
            res.unreadable[entry] = problem
        elif _still_held(entry, *owner, log):
            res.kept.append(entry)
        else:
            _clean_folder(entry, owner[1], inventory_dir, res, log)
    return res
