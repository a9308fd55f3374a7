"""A campaign on several reservations at once (``--parallel N``): N reservations of the
topology, numbered 1 to N, reserved and provisioned alike (:func:`netrepro.runner.steps.up_reservations`,
:func:`~netrepro.runner.steps.provision_reservations`), each a :class:`Reservation` the run deals
trial instances to (netrepro.runner.run); and how the run tells a reservation that was lost
(its nodes no longer answer, :func:`unanswered`) from a trial that failed on a healthy one."""

from __future__ import annotations

import math
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from netrepro.experiment.spec import Spec
from netrepro.runner.ssh import inventory_hosts, node_ssh_argv
from netrepro.runner.steps import open_site, reservation_label, simulated, write_site_inventory
from netrepro.sites import Site
from netrepro.sites.base import at_once


@dataclass
class Reservation:
    """One reservation a run's trials run on: its number (1 to N; the site's
    :attr:`~netrepro.sites.base.Site.copy`, run.json's ``reservation``), the site object, its
    inventory (None: the site simulates its trials) and how the console names it."""

    number: int
    site: Site
    inv: Path | None
    label: str


def open_reservations(spec: Spec, site_name: str, options: dict[str, Any] | None, parallel: int) -> list[Reservation]:
    """The ``parallel`` reservations of ``spec`` on ``site_name`` a run uses, each provisioned,
    its inventory written again; each at the rate scale reservation 1 was provisioned at.

    Raises:
        SiteError: the site holds one reservation at a time (``parallel`` above 1).
        RuntimeError: a reservation is not provisioned, or was provisioned at another rate scale
            (one line naming it and the command that provisions the campaign).
    """
    found = []
    again = f"run `make provision SITE={site_name}" + (f" PARALLEL={parallel}" if parallel > 1 else "") + "` first"
    for k in range(1, parallel + 1):
        site = open_site(spec, site_name, options, k)
        label = reservation_label(site, parallel)
        st = site.load_state()
        if not st.get("provisioned"):
            raise RuntimeError(f"site {label}: not provisioned; {again}")
        found.append(Reservation(k, site, None if simulated(site) else write_site_inventory(spec, site), label))
    scales = [(r.label, (r.site.load_state().get("rate_scale") or {}).get("k")) for r in found]
    first = scales[0][1]
    for label, k in scales[1:]:
        if not (isinstance(k, (int, float)) and isinstance(first, (int, float)) and math.isclose(k, first)):
            raise RuntimeError(f"site {label}: provisioned at rate scale {k}, {scales[0][0]} at {first}; the "
                               f"campaign's trials must run at one: {again.replace(' first', ' again')}")
    return found


def unanswered(inv: Path, timeout_s: int = 10) -> list[str]:
    """The nodes of inventory ``inv`` that do not run a command over SSH (``true``, as Ansible
    reaches them: :func:`netrepro.runner.ssh.node_ssh_argv`) within ``timeout_s`` seconds to
    connect (twice that in all), asked all at once; [] when every node answers. What makes a
    failed trial's reservation lost rather than the trial failed (netrepro.runner.run)."""
    hosts = inventory_hosts(inv)

    def quiet(host: str) -> bool:
        try:
            p = subprocess.run(node_ssh_argv(host, hosts[host], "true", connect_timeout_s=timeout_s),
                               capture_output=True, timeout=2 * timeout_s, stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired):
            return True
        return p.returncode != 0
    names = sorted(hosts)
    return [h for h, q in zip(names, at_once(quiet, names)) if q]
