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

import importlib
import json
import os
import signal
import subprocess
import threading
import time
from abc import ABC, abstractmethod
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable, ClassVar, Iterable, TypeVar

from netrepro.experiment.spec import Spec
from netrepro.sites.errors import SiteError
from netrepro.sites.login import NodeLogin, checked_logins, login_problem
from netrepro.sites.options import Option, check_options
from netrepro.sites.statefolder import STATE_MARKER, make_state_dir


def lease_kept_line(site: str, what: str, current: Any, hours: float) -> str:
    """The one line ``renew`` prints when the lease of ``what`` (``slice nr-x``) already ends at
    ``current`` (an aware datetime), not before ``hours`` from now: renew never shortens a
    lease, and changes nothing then."""
    import datetime as dt

    end = current.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    return (f"{site}: the lease of {what} already ends at {end} UTC, not before the {hours:g} h from now asked; "
            "nothing changed (renew never shortens a lease)")


class Site(ABC):
    """Base class of every site. Subclasses set ``name`` and implement the abstract methods.

    Args:
        spec: the validated experiment.
        state_dir: this reservation's folder (created if missing); ``state.json`` inside.
        options: site options from the command line / environment (``AGGREGATE``, ...),
            checked against ``OPTIONS`` at once (:func:`check_options`; SiteError).
        copy: which of a campaign's parallel reservations of the topology this is, 1 to N
            (``--parallel N``; netrepro.runner.parallel). Copy 1 is the reservation a run
            without ``--parallel`` uses; a site that can hold several copies at once
            (:attr:`PARALLEL`) names each one's resources apart (a slice name's ``-<k>``, the
            k-th nodes file, namespaces of their own). SiteError for a copy above 1 of a site
            that cannot.
    """

    name: str = ""
    #: The options a user may give (``--option key=value`` or the variables of
    #: ``netrepro.sites.OPTION_ENV``): key -> :class:`Option`. Others are refused.
    OPTIONS: ClassVar[dict[str, Option]] = {}
    #: Keys code may pass with a non-text object (tests' fakes, an environment dict).
    HOOKS: ClassVar[tuple[str, ...]] = ()
    #: The environment variables the site reads besides its options' (an account's files and
    #: settings): name -> one line. docs/reference.md lists them (netrepro.cli.reference).
    ENV: ClassVar[dict[str, str]] = {}
    #: A trial's wall time before any trial of the run has been timed (the progress ETA and
    #: ``--dry-run``'s estimate): ``TRIAL_WALL_PER_SCHEDULED_S`` s per second of its schedule and
    #: base-RTT pings, plus ``TRIAL_OVERHEAD_S`` s. A site that runs trials in real time takes 1 s
    #: per second; its overhead (arming, the barrier, fetching) was 40-60 s on the local site's
    #: micro-VM in the full runs of docs/runs, more on a testbed far away.
    TRIAL_WALL_PER_SCHEDULED_S: ClassVar[float] = 1.0
    TRIAL_OVERHEAD_S: ClassVar[float] = 60.0
    #: True for a site whose reservation is this machine's own and free to build again (the
    #: local site): ``netrepro clean`` tears a live one down and empties its state folder, where
    #: it keeps the folder of any other site's live reservation (only ``down`` may release it).
    TEARDOWN_ON_CLEAN: ClassVar[bool] = False
    #: What netrepro writes into this site's state folder: names (or fnmatch patterns) of its
    #: top-level entries. ``netrepro clean`` removes these and keeps, naming it, anything else
    #: found there (netrepro.runner.clean). Every site's: the marker (and its name while it is
    #: written), state.json (and save_state's temporary file), and what the runner writes for a
    #: site's nodes: ssh/ (known_hosts), ansible/ (playbook logs) and facts/ (Ansible's fact
    #: cache). A site adds its own: ``STATE_ENTRIES = Site.STATE_ENTRIES + ("manifest.xml",)``.
    STATE_ENTRIES: ClassVar[tuple[str, ...]] = (STATE_MARKER, STATE_MARKER + ".tmp", "state.json", "state.tmp",
                                                "ssh", "ansible", "facts")
    #: Whether the site can hold several copies of a topology at once, one per reservation of a
    #: campaign run in parallel (``--parallel N``, netrepro.runner.parallel): a testbed's
    #: slices, the static site's nodes files, the local site's namespaces in host mode. False
    #: (the default): a copy above 1 is refused when the site is made.
    PARALLEL: ClassVar[bool] = False

    def __init__(self, spec: Spec, state_dir: Path, options: dict[str, Any] | None = None, copy: int = 1):
        self.spec = spec
        self.state_dir = Path(state_dir)
        if not isinstance(copy, int) or isinstance(copy, bool) or copy < 1:
            raise SiteError(f"site {self.name}: copy {copy!r}: expected a whole number from 1")
        if copy > 1 and not self.PARALLEL:
            raise SiteError(self.parallel_refusal())
        self.copy = copy
        self.options = type(self).checked_options(spec, options)
        # the subprocesses of run_subprocess still running, and whether stop_subprocesses was called
        self._children: set[subprocess.Popen] = set()
        self._children_lock = threading.Lock()
        self._children_stopped = False

    @classmethod
    def parallel_refusal(cls) -> str:
        """The one line refusing ``--parallel`` above 1 on a site that is not :attr:`PARALLEL`."""
        return (f"site {cls.name}: --parallel: this site holds one reservation of an experiment at a time; expected "
                "--parallel 1" + ("; a simulating site runs trials at once with --jobs N"
                                  if getattr(cls, "SIMULATED", False) else ""))

    @classmethod
    def setup(cls, options: dict[str, str], check_only: bool = False, log=print) -> int:
        """The site's setup hook (``make setup SITE=<name>``, ``netrepro setup``): install what the
        site needs on the controller machine, idempotent, or with ``check_only`` say what it
        lacks and change nothing. ``options``: the site options given (``--option``), already
        checked against :attr:`OPTIONS`. Returns an exit status: 0 ready, 1 something missing
        (check only, or not root to install it). The base site needs nothing beyond the
        Python packages; a site that needs programs overrides it (netrepro.core.packages finds,
        names and installs Debian packages)."""
        log(f"[setup] site {cls.name}: nothing to install on this machine beyond the Python packages")
        return 0

    @classmethod
    def checked_options(cls, spec: Spec, options: dict[str, Any] | None) -> dict[str, Any]:
        """``options`` checked (:func:`check_options`), then the experiment checked against
        them (:meth:`refuse_experiment`); what the site is made with, and what ``plan`` and a
        dry run check before anything is built. Raises SiteError (one line)."""
        checked = check_options(cls, options, spec)
        cls.refuse_experiment(spec, checked, options)
        return checked

    @classmethod
    def refuse_experiment(cls, spec: Spec, options: dict[str, Any], given: dict[str, Any] | None = None) -> None:
        """Refuse (SiteError, one line) an experiment this site cannot build with ``options``
        (already checked; ``given``: as the user gave them, for where each came from). The
        base site refuses nothing; a site that makes names or addresses of its own overrides it."""

    # --- state ---------------------------------------------------------------------
    @property
    def state_file(self) -> Path:
        return self.state_dir / "state.json"

    def load_state(self) -> dict[str, Any]:
        """The saved state, or {} when nothing is reserved (:func:`read_state_file`)."""
        return read_state_file(self.state_file)

    def ensure_state_dir(self) -> Path:
        """Create this reservation's folder if missing, with its ownership marker
        (:func:`netrepro.sites.statefolder.make_state_dir`); every code path that creates the folder goes through here.
        Returns ``state_dir``."""
        return make_state_dir(self.state_dir, self.spec.name, self.name, self.copy)

    def save_state(self, state: dict[str, Any]) -> None:
        """Write state atomically (write to a temp file, then rename)."""
        self.ensure_state_dir()
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.state_file)

    def saved_logins(self) -> dict[str, NodeLogin]:
        """Logins saved by a previous ``reserve``/``wait_ready`` (``state['logins']``), each
        checked again as when it was made (:func:`checked_logins`): a state.json is a file on
        disk, and what it names reaches ssh, a ProxyCommand and ``down``. Raises SiteError
        (one line naming the state file and the field)."""
        return checked_logins(self.load_state().get("logins", {}), str(self.state_file))

    def check_state(self) -> None:
        """Check offline that the saved state names only what netrepro made for this
        reservation, before ``down`` closes, deletes or stops anything it names: every login
        (:meth:`saved_logins`). A site whose :meth:`release` stops processes or deletes
        devices named in its state checks those too. Raises SiteError (one line naming the
        state file and the field)."""
        self.saved_logins()

    def save_logins(self, logins: dict[str, NodeLogin], **more: Any) -> None:
        """Save ``logins`` in the state, each first checked (:func:`login_problem`, the check
        :meth:`saved_logins` makes again). Raises SiteError (one line naming the node and the
        field) for a login that may not reach ssh (a testbed's or a file's answer)."""
        for n, lg in logins.items():
            bad = login_problem(lg)
            if bad:
                raise SiteError(f"site {self.name}: node {n}: {bad[0]}: {bad[1]!r}: {bad[2]}")
        state = self.load_state()
        state["logins"] = {n: asdict(lg) for n, lg in logins.items()}
        state.update(more)
        self.save_state(state)

    # --- the interface -----------------------------------------------------------------
    @abstractmethod
    def plan(self) -> str:
        """Human-readable description of exactly what ``reserve`` would request. No I/O."""

    @classmethod
    def refusal(cls, spec: Spec) -> tuple[str, str] | None:
        """``(field, problem)``: what this site, with its default options, would refuse of the
        experiment ``spec`` before reserving anything (``netrepro validate`` asks the default
        site), or None; with the options given, :meth:`refuse_experiment` refuses. Offline, for
        the class: no state, no options. Default: None."""
        return None

    @classmethod
    def describe_status(cls, status: dict) -> str:
        """One line on the substrate for ``make bench`` (netrepro.cli.bench), from ``status``: a
        run's run.json ``site_status`` as this site's :meth:`status` recorded it (an empty dict
        when it is not an object; its fields may be missing or junk in an old or hand-edited
        run). Offline, for the class. Default: that no forwarding capacity was measured."""
        return "forwarding capacity not measured"

    def preflight(self) -> None:
        """Check offline everything ``reserve`` will need (files, credentials, configuration),
        creating, writing and contacting nothing; ``reserve`` calls it first. A caller may
        call it earlier, before it writes anything itself. Default: nothing to check.

        Raises:
            SiteError / SpecError: one line naming the file, field or option.
        """

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
        """Set the reservation's lease to end ``hours`` from now, never earlier than it ends: a
        site reads the lease's current end first, and when that is not before the end asked it
        prints :func:`lease_kept_line` and changes nothing at the testbed. Default: nothing
        expires."""

    def lease_end(self) -> float | None:
        """When the reservation's lease ends (epoch seconds), or None when it does not end
        (the default). The runner renews a lease that would end before the next trial does."""
        return None

    def held(self) -> str | None:
        """One line naming what this site holds for the experiment that someone must release
        (a testbed's slice, its aggregate, its expiry, the command that releases it), or None
        (the default: nothing that outlives this machine)."""
        return None

    @abstractmethod
    def release(self) -> None:
        """Give every resource back. Idempotent: releasing twice is harmless."""

    @classmethod
    def default_jobs(cls, options: dict[str, Any]) -> int | None:
        """How many trial instances a run with the site's ``options`` runs at once when
        ``--jobs`` does not say; None (the default): the runner's
        (netrepro.runner.instances.checked_jobs)."""
        return None

    def documents(self) -> dict[str, Path]:
        """The files that describe this reservation as the site granted it, kept with every
        run that uses it (the run folder's ``site/``, netrepro.runfolder.writing.keep_site_documents):
        file name (netrepro.runfolder.layout.SITE_DOCUMENT_RE) -> its path. A testbed's request and manifest, a
        slice's description; none by default (a site whose status says all of it)."""
        return {}

    # --- documents of an experiment, written or read offline (netrepro rspec, profile, inventory)
    @classmethod
    def _lacks(cls, method: str, what: str) -> SiteError:
        """The SiteError of a site without ``method`` (one of :data:`OFFLINE_DOCUMENTS`),
        naming ``what`` it lacks and the sites that have it (:func:`sites_offering`)."""
        return SiteError(f"site {cls.name}: {what}; expected a site that has one: "
                         f"{', '.join(sites_offering(method)) or 'none'}")

    @classmethod
    def write_request(cls, spec: Spec, path: Path) -> Path:
        """Write the request the site would send for ``spec`` with its default options, bound
        to no resource, to ``path`` (``netrepro rspec``: the committed rspecs/<experiment>.xml)
        and return ``path``. Offline. Default: SiteError (the site sends no request document)."""
        raise cls._lacks("write_request", "no request document to write")

    @classmethod
    def request_drift(cls, spec: Spec, path: Path) -> str | None:
        """None when the request at ``path`` is what :meth:`write_request` writes now, else one
        line saying how it differs (missing, stale). Offline. Default: SiteError."""
        raise cls._lacks("request_drift", "no request document to compare")

    @classmethod
    def write_profile(cls, spec: Spec, folder: Path) -> Path:
        """Write a testbed profile of ``spec`` into the new folder ``folder`` (``netrepro
        profile``) and return it. Offline. Default: SiteError (the site has no profiles)."""
        raise cls._lacks("write_profile", "no profile to write")

    @classmethod
    def manifest_logins(cls, spec: Spec, manifest: Path, user: str | None,
                        key_file: str | None = None) -> dict[str, NodeLogin]:
        """Node name -> :class:`NodeLogin` of every node of ``spec`` from a manifest the testbed
        gave and the user saved (``netrepro inventory --manifest``), logging in as ``user``
        with ``key_file``. Offline. Default: SiteError (the site has no manifest)."""
        raise cls._lacks("manifest_logins", "no manifest to read")

    def status(self) -> dict[str, Any]:
        """A small dict describing the reservation (state, expiry, nodes)."""
        st = self.load_state()
        return {"site": self.name, "reserved": bool(st.get("logins")), **{k: v for k, v in st.items() if k != "logins"}}

    # --- subprocesses of this machine (a simulating site's trials) ---------------------
    def run_subprocess(self, argv: list[str]) -> subprocess.CompletedProcess:
        """Run ``argv`` to its end with its stdout and stderr captured as text, as
        ``subprocess.run(argv, capture_output=True, text=True)`` does, but so that another
        thread can stop it (:meth:`stop_subprocesses`: several trials simulated at once in
        threads, stopped by the main thread on Ctrl-C or SIGTERM). An exception in the calling
        thread while it waits (KeyboardInterrupt) kills it first, as ``subprocess.run`` does.

        Returns the ``subprocess.CompletedProcess``; a process stopped by
        :meth:`stop_subprocesses` has the negative returncode of its signal (-15, or -9).

        Raises:
            SiteError: :meth:`stop_subprocesses` was called on this site: nothing is started.
            OSError: ``argv[0]`` cannot be run.
        """
        with self._children_lock:
            if self._children_stopped:
                raise SiteError(f"site {self.name}: stopped; {Path(argv[0]).name} was not started")
            p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            self._children.add(p)
        try:
            out, err = p.communicate()
        except BaseException:
            p.kill()
            p.wait()
            raise
        finally:
            with self._children_lock:
                self._children.discard(p)
        return subprocess.CompletedProcess(argv, p.returncode, out, err)

    def stop_subprocesses(self, grace_s: float = 5.0) -> int:
        """Stop every subprocess :meth:`run_subprocess` is running, from any thread: SIGTERM,
        then SIGKILL for one still running after ``grace_s`` seconds; from then on
        :meth:`run_subprocess` starts nothing on this site object (SiteError). Returns how
        many were running."""
        with self._children_lock:
            self._children_stopped = True
            children = list(self._children)
        for p in children:
            try:
                p.send_signal(signal.SIGTERM)
            except OSError:  # it ended meanwhile
                pass
        deadline = time.monotonic() + grace_s
        for p in children:
            try:
                p.wait(max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                p.kill()
        return len(children)

    # --- hooks used by the controller ------------------------------------------------
    def inventory_vars(self) -> dict[str, Any]:
        """Extra ``all.vars`` for the inventory (e.g. ``netrepro_site_kind``)."""
        return {}


_T = TypeVar("_T")


def at_once(fn: Callable[[_T], Any], items: Iterable[_T], max_workers: int | None = None) -> list[Any]:
    """``fn`` of each of ``items``, called in threads (at most ``max_workers`` at once; default
    one per item), the results in the order given. For questions to the nodes that wait on
    the network and on the node (an SSH handshake through a jump host takes seconds): asked
    one after another, N nodes wait N times as long. The first exception, in the order
    given, is raised once every call has returned."""
    items = list(items)
    if len(items) < 2:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(max_workers or len(items), len(items))) as pool:
        return list(pool.map(fn, items))


def interfaces_text(spec: Spec, node: str) -> str:
    """One line of ``node``'s experiment interfaces for a site's plan:
    ``key=A.B.C.D/N`` for each addressed one, ``key (port)`` for a switch's port
    (:meth:`netrepro.model.Model.data_plane`)."""
    return ", ".join(f"{k}={i['address']}/{i['prefixlen']}" if i["address"] else f"{k} (port)"
                     for k, i in spec.model.data_plane(node).items())


def process_group_alive(pgid: int) -> bool:
    """Whether process group ``pgid`` has a process (``killpg(pgid, 0)``, kill(2)); False when
    it has none or this user may not signal it. The local site's micro-VM and the runner's
    ansible-playbook runs are each a group of their own."""
    try:
        os.killpg(pgid, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


#: Site name -> ``module:Class``; :func:`site_class` imports a site's module only when it is
#: used, so a site's optional dependencies (fablib, ...) are needed only by users of that site.
SITES: dict[str, str] = {
    "local": "netrepro.sites.local.site:LocalSite",
    "instageni": "netrepro.sites.instageni.site:InstaGENISite",
    "fabric": "netrepro.sites.fabric.site:FabricSite",
    "static": "netrepro.sites.static.site:StaticSite",
    "ns3": "netrepro.sites.ns3.site:Ns3Site",
}
#: The site a command uses when none is named (no account needed: README, Makefile's SITE).
DEFAULT_SITE = "local"


def read_state_file(path: Path) -> dict[str, Any]:
    """A site's saved run state, ``path`` (``<state folder>/state.json``) as :meth:`Site.save_state`
    wrote it, or {} when there is no such file. Raises SiteError (one line naming the file and
    what was expected) when it cannot be read, is not JSON, or is not a JSON object."""
    if not path.is_file():
        return {}
    try:
        state = json.loads(path.read_bytes())
    except (ValueError, OSError) as exc:
        raise SiteError(f"{path}: (file): unreadable run state ({exc}); expected the JSON netrepro "
                        "wrote; release the site by hand if it holds resources, then delete the file") from None
    if not isinstance(state, dict):
        raise SiteError(f"{path}: (top level): expected a JSON object (the run state netrepro wrote)")
    return state


def site_class(name: str) -> type[Site]:
    """The Site subclass registered as ``name``. Raises SiteError for an unknown name."""
    if name not in SITES:
        raise SiteError(f"SITE={name}: unknown site; expected one of: {', '.join(SITES)}")
    module, _, cls = SITES[name].partition(":")
    return getattr(importlib.import_module(module), cls)


#: What a site may write or read offline from an experiment alone (:class:`Site`'s methods of
#: that name): its request (``netrepro rspec``), how a request on disk differs from it, a
#: testbed profile (``netrepro profile``), the logins of a manifest saved by hand
#: (``netrepro inventory --manifest``). The command line asks for them by these names only.
OFFLINE_DOCUMENTS = ("write_request", "request_drift", "write_profile", "manifest_logins")


def sites_offering(method: str) -> list[str]:
    """The names of the sites (in :data:`SITES` order) whose class has ``method`` (one of
    :data:`OFFLINE_DOCUMENTS`) of its own rather than :class:`Site`'s refusal. Imports every
    site's module (each imports its optional dependencies only when used)."""
    base = getattr(Site, method).__func__
    return [name for name in SITES if getattr(site_class(name), method).__func__ is not base]


def site_offering(method: str) -> type[Site]:
    """The one site class that has ``method`` (:func:`sites_offering`), for the commands that
    take no ``--site`` (``netrepro rspec``, ``netrepro profile``).

    Raises:
        SiteError: no site, or more than one, has it (then the command must name a site).
    """
    names = sites_offering(method)
    if len(names) != 1:
        raise SiteError(f"{method}: {len(names)} sites have it ({', '.join(names) or 'none'}); expected one")
    return site_class(names[0])
