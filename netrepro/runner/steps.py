"""The steps that touch a site: ``up`` (reserve it, wait until every node answers, write the
inventory), ``provision`` (playbooks/provision.yml) and ``down`` (release it); where each finds
the site's state (``.state/<experiment>-<site>/``) and inventory
(``inventory/<experiment>-<site>.yml``). A campaign run on N reservations at once
(``--parallel N``) holds N reservations of the topology, numbered 1 to N (the number is
:attr:`netrepro.sites.base.Site.copy`): reservation k above 1 keeps its state in
``.state/<experiment>-<site>.<k>/`` and its inventory in ``inventory/<experiment>-<site>.<k>.yml``
(:func:`netrepro.sites.statefolder.folder_name`); :func:`up_reservations` and
:func:`provision_reservations` make them together, and :func:`down` releases every one it finds."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

from netrepro.runner import ansible
from netrepro.sites.inventory import (build_inventory, control_dir, foreign_inventory, generated_inventory, write_inventory,
                                write_known_hosts)
from netrepro.experiment.rolevars import model_vars
from netrepro.runner.console import SIGNAL_EXIT, StepIncomplete, site_arg, spec_arg, log, signal_of
from netrepro.runner.playbooks import end_playbooks, playbook_path, playbook_failure
from netrepro.runfolder.writing import remove_tree
from netrepro.runner.ssh import close_ssh_masters, ssh_control_paths
from netrepro.runner.trialvars import spec_at_rate_scale
from netrepro.sites import Site, SiteError, get_site
from netrepro.sites.base import at_once
from netrepro.sites.statefolder import folder_name, state_dir_owner
from netrepro.experiment.spec import REPO_ROOT, Spec

#: The sites' state folders: ``.state/`` in the repository, or ``$NETREPRO_STATE``.
STATE_ROOT = Path(os.environ.get("NETREPRO_STATE", REPO_ROOT / ".state"))
#: The generated Ansible inventories: ``inventory/`` in the repository, or ``$NETREPRO_INVENTORY``
#: (tests that run side by side each give their own).
INVENTORY_DIR = Path(os.environ.get("NETREPRO_INVENTORY", REPO_ROOT / "inventory"))


#: The most reservations a campaign holds at once (``--parallel N``).
PARALLEL_MAX = 16


def state_dir(spec: Spec, site: str, number: int = 1) -> Path:
    """The folder of ``site``'s state for ``spec``'s reservation ``number``:
    ``<STATE_ROOT>/<experiment>-<site>/`` (``...-<site>.<number>/`` above 1)."""
    return STATE_ROOT / folder_name(spec.name, site, number)


def inventory_path(spec: Spec, site: str, number: int = 1) -> Path:
    """The Ansible inventory netrepro writes for ``site``'s reservation ``number``:
    ``inventory/<experiment>-<site>.yml`` (``...-<site>.<number>.yml`` above 1)."""
    return INVENTORY_DIR / f"{folder_name(spec.name, site, number)}.yml"


def open_site(spec: Spec, site: str, options: dict[str, Any] | None = None, number: int = 1) -> Site:
    """Site ``site`` (a name in :data:`netrepro.sites.base.SITES`) for ``spec``, its reservation
    ``number``, with its state in :func:`state_dir` and its ``options``
    (:func:`netrepro.sites.get_site`; SiteError: a number above 1 on a site that holds one)."""
    return get_site(site, spec, state_dir(spec, site, number), options, number)


def reservations_on_disk(spec: Spec, site: str) -> list[int]:
    """The numbers above 1 of ``spec``'s reservations on ``site`` that have a state folder
    netrepro made (:func:`netrepro.sites.statefolder.state_dir_owner`), in order: what
    :func:`down` releases besides reservation 1, whatever ``--parallel`` says now."""
    found = []
    prefix = folder_name(spec.name, site) + "."
    if STATE_ROOT.is_dir():
        for entry in STATE_ROOT.iterdir():
            owner = state_dir_owner(entry) if entry.name.startswith(prefix) else None
            if owner is not None and owner[:2] == (spec.name, site) and owner[2] > 1:
                found.append(owner[2])
    return sorted(found)


def reservation_label(site: Site, parallel: int = 1) -> str:
    """How the console names ``site``'s reservation: the site's name, and ``#k`` of a campaign
    on several (``parallel`` above 1, or a number above 1)."""
    return site.name + (f" #{site.copy}" if parallel > 1 or site.copy > 1 else "")


def write_site_inventory(spec: Spec, site: Site) -> Path:
    """Write inventory/<experiment>-<site>.yml from the site's logins; return its path.

    Host keys are checked against the reservation's known_hosts (state_dir/ssh/known_hosts):
    the keys the logins pin (the local site's), else accept-new (testbed nodes).
    """
    known = site.ensure_state_dir() / "ssh" / "known_hosts"
    known.parent.mkdir(exist_ok=True)
    logins = site.logins()
    write_known_hosts(logins, known)
    inv = build_inventory(spec, logins, site.name, site.inventory_vars(),
                          known_hosts=str(known), control_dir=control_dir(site.state_dir, make=True))
    return write_inventory(inv, inventory_path(spec, site.name, site.copy))


def preflight_reservations(spec: Spec, site_name: str, options: dict[str, Any] | None = None, parallel: int = 1) -> None:
    """Check offline each of ``parallel`` reservations' files and credentials (``Site.preflight``),
    before anything is reserved or written. Raises SiteError / SpecError (one line): a site
    that holds one reservation at a time (``parallel`` above 1), or what a reservation lacks."""
    for k in range(1, parallel + 1):
        open_site(spec, site_name, options, k).preflight()


def _each_reservation(fn: Callable[[int], Any], parallel: int) -> tuple[dict[int, Any], dict[int, Exception]]:
    """``fn(k)`` for each reservation k from 1 to ``parallel``, all at once (threads), each tried
    whatever the others do: (k -> what it returned, k -> what it raised), in order."""
    done: dict[int, Any] = {}
    failed: dict[int, Exception] = {}

    def one(k: int) -> None:
        try:
            done[k] = fn(k)
        except Exception as exc:  # noqa: BLE001 - every reservation's outcome is reported together
            failed[k] = exc
    at_once(one, range(1, parallel + 1))
    return dict(sorted(done.items())), dict(sorted(failed.items()))


def up_reservations(spec: Spec, site_name: str, options: dict[str, Any] | None = None, parallel: int = 1) -> list[Site]:
    """:func:`up` for each of ``parallel`` reservations of the topology, all at once (threads);
    one is :func:`up` itself. The callers check each first (:func:`preflight_reservations`).

    Raises:
        SiteError: the site holds one reservation at a time (``parallel`` above 1), or one
            could not be reserved: one line naming each that failed and why; those that were
            reserved stay up, named, for ``down`` (which releases every one).
    """
    if parallel == 1:
        return [up(spec, site_name, options)]
    ready, failed = _each_reservation(lambda k: up(spec, site_name, options, number=k, parallel=parallel), parallel)
    if failed:
        raise SiteError("; ".join(f"reservation #{k} on {site_name} failed: {exc}" for k, exc in failed.items())
                        + (f"; reservation(s) {', '.join(f'#{k}' for k in ready)} are up: release them with "
                           f"`netrepro down {spec_arg(spec)}{site_arg(site_name)}`" if ready else ""))
    return list(ready.values())


def up(spec: Spec, site_name: str, options: dict[str, Any] | None = None, number: int = 1, parallel: int = 1) -> Site:
    """Reserve the site (its reservation ``number``, one of ``parallel``), wait until every
    node answers, write the inventory."""
    site = open_site(spec, site_name, options, number)
    problem = None if simulated(site) else foreign_inventory(inventory_path(spec, site_name, number))
    if problem:  # checked before anything is reserved
        raise ValueError(problem)
    t0 = time.time()
    # Facts cached from an earlier reservation (interface names) may not hold any more.
    # (Nothing is created here: a site that fails to reserve leaves no folder behind.)
    remove_tree(ansible.fact_cache_dir(site.state_dir / "ansible"))
    site.reserve()
    site.wait_ready()
    path = None if simulated(site) else write_site_inventory(spec, site)
    st = site.load_state()
    st.setdefault("timings_s", {})["up"] = round(time.time() - t0, 1)
    site.save_state(st)
    log(f"[up] {reservation_label(site, parallel)} ready in {time.time() - t0:.0f} s"
        + (f"; inventory {shown_path(path)}" if path else " (a simulation: no node, no inventory)"))
    return site


def shown_path(path: Path) -> Path:
    """``path`` as the console shows it: relative to the repository when inside it."""
    return path.relative_to(REPO_ROOT) if path.is_relative_to(REPO_ROOT) else path


def simulated(site: Site) -> bool:
    """Whether ``site`` simulates its trials (``SIMULATED``, netrepro.sites.ns3.site): no node,
    inventory or playbook; each trial is its ``simulate``."""
    return bool(getattr(site, "SIMULATED", False))


def provision_reservations(spec: Spec, site_name: str, options: dict[str, Any] | None = None,
                           rate_scale: str | float | None = None, parallel: int = 1) -> None:
    """:func:`provision` each of ``parallel`` reservations, all at once (threads), alike: the
    same playbook, the same experiment at one rate scale (a reservation that would choose
    another than reservation 1 did is refused: the campaign's trials must be comparable). One
    is :func:`provision` itself.

    Raises:
        StepIncomplete: a reservation's provisioning failed: one line naming each that failed
            and why; the others stay provisioned, every one stays up.
        KeyboardInterrupt: every playbook is ended first.
    """
    if parallel == 1:
        provision(spec, site_name, options, rate_scale=rate_scale)
        return
    first = open_site(spec, site_name, options, 1)
    for k in range(2, parallel + 1):
        open_site(spec, site_name, options, k)   # SiteError: a site that holds one reservation
    spec_at_rate_scale(spec, first, choose=True, rate_scale=rate_scale)   # said on the console
    scale = rate_scale if rate_scale is not None else float(first.load_state()["rate_scale"]["k"])
    try:
        _, failed = _each_reservation(lambda k: provision(spec, site_name, options, rate_scale=scale, number=k,
                                                          parallel=parallel), parallel)
    except KeyboardInterrupt as exc:
        end_playbooks()
        sig = signal_of(exc)
        raise StepIncomplete(f"provisioning interrupted by {sig}", exit_code=SIGNAL_EXIT[sig],
                             hint=f"the nodes are partly provisioned and every reservation is still up: run "
                                  f"`netrepro provision {spec_arg(spec)}{site_arg(site_name)} --parallel {parallel}` "
                                  f"again, or `netrepro down {spec_arg(spec)}{site_arg(site_name)}`") from None
    if failed:
        raise StepIncomplete("; ".join(f"reservation #{k}: {getattr(e, 'account', None) or e}" for k, e in failed.items()),
                             hint=f"every reservation is still up: run `netrepro provision {spec_arg(spec)}"
                                  f"{site_arg(site_name)} --parallel {parallel}` again, or "
                                  f"`netrepro down {spec_arg(spec)}{site_arg(site_name)}`")


def provision(spec: Spec, site_name: str, options: dict[str, Any] | None = None,
              rate_scale: str | float | None = None, number: int = 1, parallel: int = 1) -> ansible.PlaybookResult:
    """Run playbooks/provision.yml on the site's nodes, with the experiment at the site's rate
    scale (:func:`spec_at_rate_scale`, chosen here: ``rate_scale``, the command line's
    --rate-scale, wins over RATE_SCALE) as :func:`netrepro.experiment.rolevars.model_vars` gives it.

    The site counts as provisioned only once the playbook has succeeded (``run`` refuses
    until then).

    Raises:
        StepIncomplete: the playbook failed (the first failed task, node and message) or
            was interrupted (SIGINT/SIGTERM; exit code 128 + signal); the site stays up.
    """
    site = open_site(spec, site_name, options, number)
    label = reservation_label(site, parallel)
    if simulated(site):
        st = site.load_state()
        if not st.get("reserved"):
            raise RuntimeError(f"site {site_name}: not up; run `make up SITE={site_name}` first")
        st["provisioned"] = True
        st.pop("rate_scale", None)  # chosen again by the next run, with its --rate-scale or RATE_SCALE
        site.save_state(st)
        log("[provision] nothing to provision: the site simulates its trials")
        return ansible.PlaybookResult("(none)", 0, {}, 0.0)
    inv = write_site_inventory(spec, site)
    st = site.load_state()
    st["provisioned"] = False
    site.save_state(st)
    again = (f"run `netrepro provision {spec_arg(spec)}{site_arg(site_name)}"
             + (f" --parallel {parallel}" if parallel > 1 else "") + f"` again, or `netrepro down {spec_arg(spec)}{site_arg(site_name)}`")
    t0 = time.time()
    try:
        scaled = spec_at_rate_scale(spec, site, choose=True, rate_scale=rate_scale)
        res = playbook_path("provision", inv, {"netrepro": model_vars(scaled)}, site)
    except ansible.PlaybookError as exc:
        raise StepIncomplete(f"provisioning failed ({playbook_failure(exc)})",
                             hint=f"the site is still up: {again}") from None
    except KeyboardInterrupt as exc:
        sig = signal_of(exc)
        raise StepIncomplete(f"provisioning interrupted by {sig} after {time.time() - t0:.0f} s",
                             hint=f"the nodes are partly provisioned and the site is still up: {again}",
                             exit_code=SIGNAL_EXIT[sig]) from None
    st = site.load_state()
    st.setdefault("timings_s", {})["provision"] = round(time.time() - t0, 1)
    st["provisioned"] = True
    site.save_state(st)
    log(f"[provision] {label + ': ' if parallel > 1 else ''}done in {res.seconds:.0f} s ({res.changed} changes)")
    return res


def down(spec: Spec, site_name: str, options: dict[str, Any] | None = None,
         reservations: list[int] | None = None) -> None:
    """Release the site's reservations of ``spec``: ``reservations`` (numbers from 1), by
    default 1 and every other with a state folder (:func:`reservations_on_disk`: a parallel
    campaign's, whatever ``--parallel`` says now). For each: close the SSH connections kept
    open to its nodes and their jump host (ControlMaster sockets in the site's own folder,
    :func:`netrepro.sites.inventory.control_dir`), release it and remove its inventory.
    Harmless when nothing is up.

    Every reservation's state is checked first (``Site.check_state``: its logins as when they were
    made, what its release would stop), so that nothing is closed, deleted or stopped when a
    state file names what netrepro did not make.

    Raises:
        SiteError: one line naming the state file and the field; nothing was released.
    """
    sites = [open_site(spec, site_name, options, k)
             for k in (reservations if reservations is not None else [1, *reservations_on_disk(spec, site_name)])]
    for site in sites:
        site.check_state()
    for site in sites:
        number = site.copy
        sockets = ssh_control_paths(site)
        close_ssh_masters(sockets)
        site.release()
        close_ssh_masters(sockets)  # any the release itself opened, and stale sockets
        inv = inventory_path(spec, site_name, number)
        if generated_inventory(inv):  # a file netrepro did not write stays
            inv.unlink()
        if number > 1:
            log(f"[down] {reservation_label(site)} released")
