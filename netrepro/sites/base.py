"""The site interface: one small class per testbed, everything else shared.

A *site* turns an experiment's topology into reachable nodes. Each site is one module in
``netrepro/sites/`` with one :class:`Site` subclass registered in ``SITES``
(``netrepro/sites/__init__.py``). The controller calls, in order::

    site.reserve()            # ask for resources (slice, namespaces, VMs ...)
    site.wait_ready(timeout)  # block until every node accepts SSH
    site.logins()             # node name -> NodeLogin: how Ansible reaches it
    ...                       # provisioning and trials (shared, site-independent)
    site.release()            # give everything back; idempotent

plus ``renew(hours)`` and ``status()``, and ``plan()`` which prints what ``reserve`` would
request without credentials and without contacting anything.

The run state of a reservation (slice name, aggregate, expiry, node logins, what was
created) lives in ``state_dir/state.json`` so that a later ``down``, ``status`` or
``provision`` in a new process finds it again. See docs/adding-a-site.md.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from netrepro.spec import Spec


class SiteError(RuntimeError):
    """A site cannot do what was asked; the message says what is missing and where to set it."""


def positive_int_option(options: dict[str, Any], key: str, error: type[Exception] | None = None) -> int | None:
    """``options[key]`` as a positive integer, None when unset or empty.

    Raises SiteError (one line, naming the option) for anything else, or
    ``error("site options", key, problem)`` when ``error`` is given (e.g. SpecError).
    """
    raw = options.get(key)
    if raw in (None, ""):
        return None
    try:
        val = int(raw)
    except (TypeError, ValueError):
        val = 0
    if val <= 0:
        if error is not None:
            raise error("site options", key, f"expected a positive integer, got {raw!r}")
        raise SiteError(f"site option {key}={raw!r}: expected a positive integer")
    return val


@dataclass
class NodeLogin:
    """How the controller reaches one node over SSH.

    Attributes:
        name: node name from the spec (``client1``).
        host: SSH host name or address (IPv4, IPv6 or DNS name).
        port: SSH port (InstaGENI shares one public host among VMs on high ports).
        user: login user; Ansible escalates with sudo when it is not root.
        key_file: private key path, or None to use the SSH agent / defaults.
        proxy_jump: ``user@host:port`` of a jump host (FABRIC bastion, the local micro-VM),
            or None.
        extra: site-specific facts (sliver URN, management address, ...), kept in state.
    """

    name: str
    host: str
    port: int = 22
    user: str = "root"
    key_file: str | None = None
    proxy_jump: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)


class Site(ABC):
    """Base class of every site. Subclasses set ``name`` and implement the abstract methods.

    Args:
        spec: the validated experiment.
        state_dir: this reservation's folder (created if missing); ``state.json`` inside.
        options: site options from the command line / environment (``AGGREGATE``, ...).
    """

    name: str = ""

    def __init__(self, spec: Spec, state_dir: Path, options: dict[str, Any] | None = None):
        self.spec = spec
        self.state_dir = Path(state_dir)
        self.options = dict(options or {})

    # --- state ---------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    def load_state(self) -> dict[str, Any]:
        """The saved state, or {} when nothing is reserved."""
        if not self.state_file.is_file():
            return {}
        return json.loads(self.state_file.read_text())

    def save_state(self, state: dict[str, Any]) -> None:
        """Write state atomically (write to a temp file, then rename)."""
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.state_file)

    def saved_logins(self) -> dict[str, NodeLogin]:
        """Logins saved by a previous ``reserve``/``wait_ready`` (``state['logins']``)."""
        return {n: NodeLogin(**d) for n, d in self.load_state().get("logins", {}).items()}

    def save_logins(self, logins: dict[str, NodeLogin], **more: Any) -> None:
        state = self.load_state()
        state["logins"] = {n: asdict(lg) for n, lg in logins.items()}
        state.update(more)
        self.save_state(state)

    # --- the interface -----------------------------------------------------------------
    @abstractmethod
    def plan(self) -> str:
        """Human-readable description of exactly what ``reserve`` would request. No I/O."""

    @abstractmethod
    def reserve(self) -> None:
        """Request the resources. Raises SiteError with a clear message when it cannot."""

    @abstractmethod
    def wait_ready(self, timeout_s: float = 1800) -> None:
        """Block until every node accepts SSH, printing progress; SiteError on timeout."""

    def logins(self) -> dict[str, NodeLogin]:
        """Node name -> NodeLogin, for every node of the spec. Default: the saved logins."""
        logins = self.saved_logins()
        if not logins:
            raise SiteError(f"site {self.name}: nothing reserved for {self.spec.name} (state {self.state_file}); run `make up` first")
        return logins

    def renew(self, hours: float) -> None:
        """Extend the reservation by ``hours``. Default: nothing expires."""

    @abstractmethod
    def release(self) -> None:
        """Give every resource back. Idempotent: releasing twice is harmless."""

    def status(self) -> dict[str, Any]:
        """A small dict describing the reservation (state, expiry, nodes)."""
        st = self.load_state()
        return {"site": self.name, "reserved": bool(st.get("logins")), **{k: v for k, v in st.items() if k != "logins"}}

    # --- hooks used by the controller ------------------------------------------------
    def ansible_env(self) -> dict[str, str]:
        """Extra environment for ansible-playbook (e.g. ControlPath). Default: none."""
        return {}

    def inventory_vars(self) -> dict[str, Any]:
        """Extra ``all.vars`` for the inventory (e.g. ``netrepro_site_kind``)."""
        return {}
