"""The steps that touch a site: ``up`` (reserve it, wait until every node answers, write the
inventory), ``provision`` (playbooks/provision.yml) and ``down`` (release it); where each finds
the site's state (``.state/<experiment>-<site>/``) and inventory
(``inventory/<experiment>-<site>.yml``)."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from netrepro.runner import ansible
from netrepro.sites.inventory import (build_inventory, control_dir, foreign_inventory, generated_inventory, write_inventory,
                                write_known_hosts)
from netrepro.experiment.rolevars import model_vars
from netrepro.runner.console import SIGNAL_EXIT, StepIncomplete, site_arg, spec_arg, log, signal_of
from netrepro.runner.playbooks import playbook_path, playbook_failure
from netrepro.runfolder.writing import remove_tree
from netrepro.runner.ssh import close_ssh_masters, ssh_control_paths
from netrepro.runner.trialvars import spec_at_rate_scale
from netrepro.sites import Site, get_site
from netrepro.experiment.spec import REPO_ROOT, Spec

#: The sites' state folders: ``.state/`` in the repository, or ``$NETREPRO_STATE``.
STATE_ROOT = Path(os.environ.get("NETREPRO_STATE", REPO_ROOT / ".state"))
#: The generated Ansible inventories.
INVENTORY_DIR = REPO_ROOT / "inventory"


def state_dir(spec: Spec, site: str) -> Path:
    """The folder of ``site``'s state for ``spec``: ``<STATE_ROOT>/<experiment>-<site>/``."""
    return STATE_ROOT / f"{spec.name}-{site}"


def inventory_path(spec: Spec, site: str) -> Path:
    """The Ansible inventory netrepro writes for ``site``: ``inventory/<experiment>-<site>.yml``."""
    return INVENTORY_DIR / f"{spec.name}-{site}.yml"


def open_site(spec: Spec, site: str, options: dict[str, Any] | None = None) -> Site:
    """Site ``site`` (a name in :data:`netrepro.sites.base.SITES`) for ``spec``, with its state in
    :func:`state_dir` and its ``options`` (:func:`netrepro.sites.get_site`)."""
    return get_site(site, spec, state_dir(spec, site), options)


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
    return write_inventory(inv, inventory_path(spec, site.name))


def up(spec: Spec, site_name: str, options: dict[str, Any] | None = None) -> Site:
    """Reserve the site, wait until every node answers, write the inventory."""
    site = open_site(spec, site_name, options)
    problem = None if simulated(site) else foreign_inventory(inventory_path(spec, site_name))
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
    log(f"[up] {site_name} ready in {time.time() - t0:.0f} s"
        + (f"; inventory {path.relative_to(REPO_ROOT)}" if path else " (a simulation: no node, no inventory)"))
    return site


def simulated(site: Site) -> bool:
    """Whether ``site`` simulates its trials (``SIMULATED``, netrepro.sites.ns3.site): no node,
    inventory or playbook; each trial is its ``simulate``."""
    return bool(getattr(site, "SIMULATED", False))


def provision(spec: Spec, site_name: str, options: dict[str, Any] | None = None,
              rate_scale: str | float | None = None) -> ansible.PlaybookResult:
    """Run playbooks/provision.yml on the site's nodes, with the experiment at the site's rate
    scale (:func:`spec_at_rate_scale`, chosen here: ``rate_scale``, the command line's
    --rate-scale, wins over RATE_SCALE) as :func:`netrepro.experiment.rolevars.model_vars` gives it.

    The site counts as provisioned only once the playbook has succeeded (``run`` refuses
    until then).

    Raises:
        StepIncomplete: the playbook failed (the first failed task, node and message) or
            was interrupted (SIGINT/SIGTERM; exit code 128 + signal); the site stays up.
    """
    site = open_site(spec, site_name, options)
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
    again = f"run `netrepro provision {spec_arg(spec)}{site_arg(site_name)}` again, or `netrepro down {spec_arg(spec)}{site_arg(site_name)}`"
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
    log(f"[provision] done in {res.seconds:.0f} s ({res.changed} changes)")
    return res


def down(spec: Spec, site_name: str, options: dict[str, Any] | None = None) -> None:
    """Release the site, close the SSH connections kept open to its nodes and their jump
    host (ControlMaster sockets in the site's own folder, :func:`netrepro.sites.inventory.control_dir`)
    and remove its inventory. Harmless
    when nothing is up."""
    site = open_site(spec, site_name, options)
    sockets = ssh_control_paths(site)
    close_ssh_masters(sockets)
    site.release()
    close_ssh_masters(sockets)  # any the release itself opened, and stale sockets
    inv = inventory_path(spec, site_name)
    if generated_inventory(inv):  # a file netrepro did not write stays
        inv.unlink()
