"""The instageni site: VMs on an InstaGENI rack, CloudLab, Emulab or POWDER via GENI AM API v3.

What happens, and where each part lives (modules of this package):

- request: :mod:`.rspec` builds the RSpec from the topology (``plan()`` prints it);
- aggregates: :mod:`.aggregates` reads ``aggregates.yml`` and makes each service's TLS context;
- credentials: :mod:`.credentials` reads a portal account from a geni-lib context file or
  environment variables; missing pieces fail at once, naming them;
- service calls and waiting: :mod:`.client` (:class:`~.client.GeniClient`, AM API v3 and the
  slice authority; :func:`~.client.poll_until`);
- logins: :mod:`.manifest` turns the manifest into NodeLogins.

Everything that can be checked offline (configuration, credential files, the key's
passphrase, the CA bundle) is checked by :meth:`InstaGENISite.preflight` before any request.
"""

from __future__ import annotations

import datetime as dt
import re
import sys
from pathlib import Path
from typing import Any, Callable

from netrepro.sites.base import Site, interfaces_text, lease_kept_line
from netrepro.sites.errors import SiteError
from netrepro.sites.login import NodeLogin, existing_file, login_user_problem, read_small_text
from netrepro.sites.options import Option, as_bool, boolean, matches, number_in
from netrepro.sites.instageni import manifest as geni_manifest
from netrepro.sites.instageni import rspec as geni_rspec
from netrepro.sites.instageni.aggregates import (AGGREGATES_FILE, load_aggregates, resolve_aggregate,
                                                 stderr_line)
from netrepro.sites.instageni.client import (DATE_FMT, GeniClient, GeniError, parse_rfc3339, poll_until,
                                             summarize_status)
from netrepro.sites.instageni.credentials import (ENV_VARS, GeniCredentials, PORTAL_PEM,
                                                  check_certificate_dates, load_credentials)
from netrepro.experiment.spec import Spec


#: The initial lease, hours (option ``hours``): a full pie-vs-red run with REPEAT=5 takes about
#: two hours; CloudLab grants a few days without asking an administrator.
DEFAULT_HOURS = 6
#: The longest lease asked for, hours (the option ``hours``' bound): two weeks, a conservative
#: bound. Aggregates set their own limit; GENI's "Long Lived Slices" (GENI-NSF/geni-tools wiki)
#: notes that some allow expirations at most 14 days ahead, and CloudLab grants longer
#: experiments only on request. A longer one: extend it in the portal.
MAX_HOURS = 14 * 24
#: The largest Xen VM asked for (bounds of ``vm_cores``, ``vm_ram_mb``): 64 vCPUs and 256 GiB,
#: a conservative bound (FABRIC's largest VM size, netrepro.sites.fabric.site.MAX_CORES; a Xen VM
#: lives on one host of the cluster).
MAX_VM_CORES, MAX_VM_RAM_MB = 64, 256 * 1024
#: How long the slivers may take to become ready, s (option ``ready_timeout_s``); then they are
#: deleted. Generous: how long a cluster takes to boot seven VMs has not been measured.
READY_TIMEOUT_S = 1800.0
#: The longest ``ready_timeout_s``, s: a day, a conservative bound (slivers not ready in a day
#: are failing, and the lease runs meanwhile).
MAX_READY_TIMEOUT_S = 86400.0

#: Operational states of a sliver already started (GAPI_AM_API_V3, "Operational states":
#: geni_configuring, on its way to geni_ready without an action; geni_ready).
STARTED_STATES = ("geni_configuring", "geni_ready")

SLICE_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,18}$")
#: The state folder's request RSpec as sent to Allocate, and the slice's manifest (Describe).
REQUEST_FILE = "request.xml"
MANIFEST_FILE = "manifest.xml"


# --- the site ----------------------------------------------------------------------------
def _aggregate_problem(value: Any) -> str | None:
    """Option check: ``value`` names a configured aggregate (reads the configuration)."""
    names = load_aggregates()["aggregates"]
    if str(value) in names:
        return None
    return f"expected an aggregate of {AGGREGATES_FILE.name} / $NETREPRO_AGGREGATES: {', '.join(names)}"


def _terminal_ask() -> Callable[[str], str] | None:
    """getpass (prompt on the terminal, nothing echoed) when stdin is a terminal, else None."""
    import getpass

    return getpass.getpass if sys.stdin.isatty() else None


def default_slice_name(spec_name: str, user: str) -> str:
    """A short slice name (Emulab: at most 19 characters, [a-z0-9-]) from spec and user."""
    base = re.sub(r"[^a-z0-9]", "", spec_name.lower())[:10] or "exp"
    return f"nr-{base}-{re.sub(r'[^a-z0-9]', '', user.lower())[:5] or 'u'}"[:19]


def copy_slice_name(name: str, copy: int) -> str:
    """The slice of copy ``copy`` of a campaign's parallel reservations: ``name`` for copy 1,
    else ``name`` cut to leave room for ``-<copy>`` within Emulab's 19 characters, then
    ``-<copy>`` (``nr-pievsred-alice-2``)."""
    if copy == 1:
        return name
    tail = f"-{copy}"
    return name[: 19 - len(tail)].rstrip("-") + tail


class InstaGENISite(Site):
    """VMs from one GENI AM API v3 aggregate (``options['aggregate']``, ``AGGREGATE=``).

    Options: ``aggregate``, ``image``, ``vm_type``, ``routable_control_ip``, ``vm_cores``,
    ``vm_ram_mb`` (see :class:`netrepro.sites.instageni.rspec.RSpecOptions`), ``slice_name``, ``hours``
    (initial lease, default :data:`DEFAULT_HOURS`), ``user`` (login user in manifests; default:
    the portal user), ``ready_timeout_s`` (how long the slivers may take to become ready,
    default :data:`READY_TIMEOUT_S`), ``install_packages`` (false: the disk image already has
    the experiment's programs; they are only checked).
    ``client`` may hold a ready :class:`GeniClient`-like object (tests).

    Whatever stops ``reserve`` or ``wait_ready`` part-way (an error, a sliver that failed or
    never became ready, Ctrl-C) deletes the slivers it made; if that is impossible, one line
    names the slice, its aggregate, its expiry and the command that releases it.
    """

    name = "instageni"
    PARALLEL = True  # one slice per reservation (copy_slice_name)
    #: Besides Site's: the request RSpec as sent (reserve) and the manifest of the slice, read
    #: from the aggregate (wait_ready).
    STATE_ENTRIES = Site.STATE_ENTRIES + (REQUEST_FILE, MANIFEST_FILE)
    OPTIONS = {
        "aggregate": Option("aggregate name in netrepro/sites/instageni/aggregates.yml or $NETREPRO_AGGREGATES, AGGREGATE",
                            lambda v, spec: _aggregate_problem(v)),
        "image": Option("disk image URN, IMAGE", matches(r"urn:publicid:IDN\+[^+\s]+\+image\+\S+",
                                                        "an image URN such as urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU22-64-STD")),
        "vm_type": Option("sliver type such as emulab-xen, VM_TYPE",
                          matches(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", "a sliver type name such as emulab-xen")),
        "routable_control_ip": Option("true or false: a public control address per VM, default true", boolean),
        "vm_cores": Option("vCPUs per Xen VM",
                           number_in(1, MAX_VM_CORES, "a whole number of vCPUs", "a conservative bound", whole=True)),
        "vm_ram_mb": Option("MiB of memory per Xen VM",
                            number_in(1, MAX_VM_RAM_MB, "a whole number of MiB", "256 GiB, a conservative bound",
                                      whole=True)),
        "slice_name": Option("slice name, SLICE_NAME",
                             matches(SLICE_NAME_RE.pattern.strip("^$"), "1-19 characters [a-z0-9-] starting with a letter")),
        "hours": Option(f"initial lease in hours, HOURS, default {DEFAULT_HOURS}, "
                        f"at most {MAX_HOURS}",
                        number_in(0, MAX_HOURS, "a number of hours", "two weeks; longer leases: in the portal")),
        "user": Option("your login user on the nodes, GENI_USER", login_user_problem),
        "manifest": Option("a manifest saved from a portal, MANIFEST"),
        "key_file": Option("SSH private key for the nodes, SSH_KEY", existing_file),
        "ready_timeout_s": Option("seconds the slivers may take to become ready before they are deleted, default 1800",
                                  number_in(0, MAX_READY_TIMEOUT_S, "a number of seconds", "a day")),
        "install_packages": Option("install the experiment's packages with apt, INSTALL_PACKAGES (default true; "
                                   "false: the image already has them, only checked)", boolean),
    }
    HOOKS = ("client", "env")
    ENV = {**ENV_VARS, "NETREPRO_AGGREGATES": "a YAML file of more aggregates, in netrepro/sites/instageni/aggregates.yml's shape; "
                                              "its entries override that file's"}

    def _rspec_opts(self, agg_urn: str | None):

        o = dict(self.options)
        o["component_manager_id"] = agg_urn
        return geni_rspec.RSpecOptions.from_options(o)

    def request_xml(self) -> str:
        """The request RSpec sent to the chosen aggregate (nodes bound to it)."""

        _, agg = resolve_aggregate(self.options.get("aggregate"))
        return geni_rspec.request_xml(self.spec, self._rspec_opts(agg["urn"]))

    def plan(self) -> str:
        """The request RSpec, preceded (as XML comments, so the output stays a valid
        request file) by the aggregate and each node's addresses."""
        name, agg = resolve_aggregate(self.options.get("aggregate"))
        lines = [f"<!-- site instageni: aggregate {name} ({agg['urn']}), AM API v3 {agg['url']} -->"]
        for node in self.spec.nodes:
            addrs = interfaces_text(self.spec, node)
            lines.append(f"<!--   {node:8s} {addrs} -->")
        decl, _, body = self.request_xml().partition("\n")
        return decl + "\n" + "\n".join(lines) + "\n" + body

    def _client(self, creds: GeniCredentials, aggregate: str, ask: Callable[[str], str] | None = None,
                warn: Callable[[str], None] = stderr_line, keep: bool = True):
        """The ``client`` hook, else a :class:`GeniClient` with the TLS settings of
        ``aggregate`` and the slice authority's URLs and TLS settings (contexts made now: no
        network)."""
        if self.options.get("client"):
            return self.options["client"]
        if keep and getattr(self, "_made_client", None) is not None and self._made_client[0] == aggregate:
            return self._made_client[1]   # one client per site object: its credentials are asked once
        conf = load_aggregates()
        if aggregate not in conf["aggregates"]:
            raise SiteError(f"aggregate {aggregate!r} (of the reservation in {self.state_file}) is not configured any more; "
                            f"expected it in {AGGREGATES_FILE} or $NETREPRO_AGGREGATES")
        sa = conf["slice_authority"]
        client = GeniClient(creds, conf["aggregates"][aggregate]["tls"], conf["slice_authority_tls"],
                            ma_url=sa["ma_url"], sa_url=sa["url"],
                            ask=_terminal_ask() if ask is None else ask, warn=warn)
        if keep:
            self._made_client = (aggregate, client)
        return client

    def preflight(self) -> None:
        """Check offline, before anything is requested or written, what ``reserve`` needs:
        the manifest to adopt (option ``manifest``), or the aggregates configuration, the
        credentials (files, certificate and its validity dates, key and its passphrase) and
        the TLS trust settings. Never asks for the passphrase (``reserve`` does, on a
        terminal) and prints nothing.

        Raises:
            SiteError / SpecError: one line naming the file, field or option.
        """
        if self.options.get("manifest"):

            geni_manifest.logins_from_manifest(self.spec, self.options["manifest"], self.options.get("user"), self.options.get("key_file"))
            return
        name, _ = resolve_aggregate(self.options.get("aggregate"))
        creds = load_credentials(self.options.get("env"))
        check_certificate_dates(creds.cert, read_small_text(creds.cert, PORTAL_PEM))
        if creds.passphrase is None and _terminal_ask() is not None:
            return   # the key may be encrypted: reserve asks, then checks the same way
        self._client(creds, name, ask=None, warn=lambda _: None, keep=False)

    def _hours(self) -> float:
        """The initial lease, hours: option ``hours`` (checked when the site was made:
        above 0, at most :data:`MAX_HOURS`), else :data:`DEFAULT_HOURS`."""
        return float(self.options.get("hours") or DEFAULT_HOURS)

    def held(self) -> str | None:
        """One line naming what is reserved (slice, aggregate, expiry) and the commands that
        release it; None when nothing is (or only an adopted portal manifest)."""
        st = self.load_state()
        if not st.get("slice_urn"):
            return None
        exp = self.spec.name
        return (f"instageni: slice {st['slice_name']} ({st['slice_urn']}) is reserved on aggregate {st['aggregate']} "
                f"({st.get('aggregate_url', '?')}) until {st.get('expires', '?')}; release it with "
                f"`netrepro down {exp} --site instageni` (or `make down EXPERIMENT={exp} SITE=instageni`), "
                "or in the portal")

    def lease_end(self) -> float | None:
        """The reservation's expiry (epoch seconds, from the state), or None."""
        st = self.load_state()
        if not st.get("expires"):
            return None
        return dt.datetime.strptime(st["expires"], DATE_FMT).replace(tzinfo=dt.timezone.utc).timestamp()

    def _delete(self, client, state: dict[str, Any]) -> None:
        """Delete the slivers of ``state`` (AM API v3 Delete; GENI code 12, nothing there,
        counts as done) and forget the reservation (its state, request and manifest).

        Raises:
            SiteError: the aggregate could not be asked or refused; the message ends with
                :meth:`held`'s line (slice, aggregate, expiry, how to release it).
        """
        try:
            client.am(state["aggregate_url"], "Delete", state["slice_urn"], {})
        except GeniError as exc:
            if exc.code != 12:   # SEARCHFAILED: nothing there any more
                raise SiteError(f"Delete refused ({exc}); {self.held()}") from None
        except SiteError as exc:
            raise SiteError(f"{exc}; {self.held()}") from None
        self.state_file.unlink(missing_ok=True)
        for name in (REQUEST_FILE, MANIFEST_FILE):   # they described the slivers now deleted
            (self.state_dir / name).unlink(missing_ok=True)

    def _give_back(self, client, state: dict[str, Any]) -> bool:
        """:meth:`_delete` after a failure or interruption. Returns True when nothing is held
        any more; else prints the reason and :meth:`held`'s line, keeps the state and
        returns False."""
        try:
            self._delete(client, state)
        except SiteError as exc:
            stderr_line(f"instageni: {exc}")
            return False
        except KeyboardInterrupt:
            stderr_line(self.held() or "")
            raise
        return True

    def reserve(self) -> None:
        """Create the slice, Allocate + Provision + start the request on the aggregate.

        Before anything is requested: GetVersion at the aggregate and the user credential at
        the member authority, so that a CA that does not match either service, or a
        certificate they refuse, stops here. An aggregate that cannot give the resources
        (Allocate refused) leaves nothing reserved and is named with what it said.

        With option ``manifest`` (MANIFEST=, a manifest saved from a web portal after
        reserving there), nothing is requested: the manifest's logins for option ``user``
        are adopted, and ``release`` later only forgets them (release the slice in the portal).
        Idempotent: with a slice already in the state it does nothing.

        Raises:
            SiteError: credentials missing (before any network use), TLS refused, the
                aggregate refused or failed (after deleting what was allocated).
        """
        self.preflight()
        if self.options.get("manifest"):
            if not self.load_state().get("logins"):
                self.adopt_manifest(self.options["manifest"], self.options.get("user"), self.options.get("key_file"))
                state = self.load_state()
                state["adopted"] = True
                self.save_state(state)
            return
        creds = load_credentials(self.options.get("env"))
        name, agg = resolve_aggregate(self.options.get("aggregate"))
        state = self.load_state()
        if state.get("slice_urn"):
            print(f"instageni: slice {state['slice_name']} already reserved on {state['aggregate']}", file=sys.stderr)
            return
        slice_name = copy_slice_name(self.options.get("slice_name") or default_slice_name(self.spec.name, creds.user),
                                     self.copy)
        if not SLICE_NAME_RE.match(slice_name):
            raise SiteError(f"SLICE_NAME={slice_name}: expected 1-19 characters [a-z0-9-] starting with a letter")
        authority = load_aggregates()["slice_authority"]["authority"]
        slice_urn = f"urn:publicid:IDN+{authority}:{creds.project}+slice+{slice_name}"
        expires = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) + dt.timedelta(hours=self._hours())
        client = self._client(creds, name)
        rspec = self.request_xml()
        # Before anything is requested: the aggregate's TLS and ours (GetVersion), and the
        # portal's acceptance of our certificate (the user credential).
        version = client.get_version(agg["url"])
        client.user_credential()
        try:
            client.create_slice(slice_name, f"urn:publicid:IDN+{authority}+project+{creds.project}", expires)
        except GeniError as exc:
            if exc.code != 17 and "exist" not in str(exc).lower():   # ALREADYEXISTS: a slice of that name, ours
                raise
            self._refuse_a_slice_with_slivers(client, name, agg["url"], slice_name, slice_urn, version)
        state = {"slice_name": slice_name, "slice_urn": slice_urn, "aggregate": name,
                 "aggregate_url": agg["url"], "aggregate_urn": agg["urn"],
                 "expires": expires.strftime(DATE_FMT), "user": self.options.get("user") or creds.user}
        self.save_state(state)
        (self.state_dir / REQUEST_FILE).write_text(rspec, encoding="utf-8")
        end = {"geni_end_time": expires.strftime(DATE_FMT)}
        print(f"instageni: requesting {len(self.spec.nodes)} VMs on aggregate {name} ({agg['url']}) in slice "
              f"{slice_name}, lease until {state['expires']}", file=sys.stderr, flush=True)
        try:
            alloc = client.am(agg["url"], "Allocate", slice_urn, rspec, end)
        except GeniError as exc:
            self._give_back(client, state)
            raise SiteError(f"aggregate {name} ({agg['url']}) refused the request: {exc}. Nothing is reserved "
                            f"(slice {slice_name} holds no VMs and expires by itself). Try another aggregate "
                            "(AGGREGATE=<name>, see netrepro/sites/instageni/aggregates.yml and docs/sites/cloudlab.md), fewer or "
                            "smaller VMs (vm_cores, vm_ram_mb), or later") from None
        except BaseException:
            self._give_back(client, state)
            raise
        text = alloc.get("geni_rspec") if isinstance(alloc, dict) else None
        state["slivers"] = geni_manifest.sliver_nodes(text) if isinstance(text, str) else {}
        self.save_state(state)
        try:
            users = [{"urn": creds.user_urn, "keys": [Path(creds.pubkey).read_text().strip()]}]
            provisioned = client.am(agg["url"], "Provision", slice_urn, {"geni_users": users, **end})
            self._start(client, agg["url"], slice_urn, provisioned["geni_slivers"])
        except BaseException:
            self._give_back(client, state)
            raise

    @staticmethod
    def _start(client, url: str, slice_urn: str, slivers: list[dict[str, Any]]) -> None:
        """Start the provisioned slivers (PerformOperationalAction geni_start, with
        ``geni_best_effort`` so that slivers already started do not fail the others: GAPI_AM_API_V3,
        PerformOperationalAction). An aggregate may start slivers by itself at Provision
        (ProtoGENI does): when Provision's answer shows every sliver already
        :data:`STARTED_STATES`, nothing is asked; an error answered to geni_start is said in
        one line and the slivers are left to Status (:meth:`wait_ready`), which tells whether
        they come up."""
        if slivers and all(s.get("geni_operational_status") in STARTED_STATES for s in slivers):
            print(f"instageni: the aggregate started the slivers itself "
                  f"({', '.join(sorted({s['geni_operational_status'] for s in slivers}))}); no geni_start needed",
                  file=sys.stderr)
            return
        try:
            client.am(url, "PerformOperationalAction", slice_urn, "geni_start", {"geni_best_effort": True})
        except GeniError as exc:   # e.g. slivers the aggregate started by itself meanwhile
            print(f"instageni: geni_start: {exc} (continuing: Status tells whether the slivers come up)", file=sys.stderr)

    def _refuse_a_slice_with_slivers(self, client, name: str, url: str, slice_name: str, slice_urn: str,
                                     version) -> None:
        """A slice of this name existed before (ALREADYEXISTS at the slice authority): refuse
        it, before anything is allocated, when it holds slivers at this aggregate (Status;
        12 SEARCHFAILED: none). netrepro acts on a slice as a whole (ProtoGENI takes only the
        slice URN), so slivers already there would be provisioned, waited for and deleted with
        its own; and an aggregate advertising ``geni_allocate`` ``geni_single`` refuses a
        second Allocate into the slice anyway (GAPI_AM_API_V3, GetVersion), while
        ``geni_disjoint`` (ProtoGENI) refuses a request that is not disjoint from them.

        Raises:
            SiteError: one line naming the slice, the aggregate, how many slivers and what to do.
        """
        try:
            held = client.am(url, "Status", slice_urn, {}).get("geni_slivers") or []
        except GeniError as exc:
            if exc.code == 12:
                return
            raise
        if not held:
            return
        mode = getattr(version, "allocate", None)
        why = {"geni_single": "it takes one Allocate per slice (geni_allocate geni_single)",
               "geni_disjoint": "it takes another Allocate only for resources disjoint from them (geni_allocate geni_disjoint)",
               "geni_many": "netrepro acts on the slice as a whole (Status, Provision, Delete)"}.get(mode, "netrepro acts on the slice as a whole")
        raise SiteError(f"slice {slice_name} ({slice_urn}) already holds {len(held)} sliver(s) on aggregate {name} ({url}) "
                        f"and {why}: nothing was requested. Release them (`netrepro down` of the run that made them, or "
                        "the portal) or choose another slice name (SLICE_NAME=)")

    def _ready_timeout(self, timeout_s: float | None) -> float:
        return float(self.options.get("ready_timeout_s") or timeout_s or READY_TIMEOUT_S)

    def wait_ready(self, timeout_s: float | None = None, interval_s: float = 20) -> None:
        """Poll AM API v3 Status until every sliver is geni_ready, then read the manifest
        (Describe), save it as ``state_dir/manifest.xml`` and the logins in the state.
        An adopted manifest (reserved through a portal) is taken as ready.

        ``timeout_s``: option ``ready_timeout_s``, else this, else :data:`READY_TIMEOUT_S`.

        Raises:
            SiteError: a sliver failed (naming its node and what the aggregate said), or the
                slivers were not ready in time; the slivers are deleted first.
        """
        if self.load_state().get("adopted"):
            return
        state = self._need_state()
        creds = load_credentials(self.options.get("env"))
        client = self._client(creds, state["aggregate"])
        timeout = self._ready_timeout(timeout_s)

        def status():
            return summarize_status(client.am(state["aggregate_url"], "Status", state["slice_urn"], {}),
                                    state.get("slivers"))

        try:
            poll_until(status, timeout, interval_s, what=f"slice {state['slice_name']}",
                       timeout_hint="raise the option ready_timeout_s or try another aggregate")
            desc = client.am(state["aggregate_url"], "Describe", state["slice_urn"],
                             {})   # the client adds geni_rspec_version (client.REQUIRED_OPTIONS)
            manifest = self.state_dir / MANIFEST_FILE
            manifest.write_text(desc["geni_rspec"])   # a string: the client checked the answer
            self.adopt_manifest(manifest, state.get("user") or creds.user, creds.ssh_key)
        except SiteError as exc:
            gone = self._give_back(client, state)
            raise SiteError(f"aggregate {state['aggregate']}: {exc}; "
                            + ("the slivers were deleted: nothing is reserved" if gone else "the slice is still reserved")) from None
        except BaseException:
            self._give_back(client, state)
            raise

    def documents(self) -> dict[str, Path]:
        """The request RSpec as sent to the aggregate (``request.xml``) and the slice's manifest
        as it answered Describe, or as adopted from a portal (``manifest.xml``), those that exist."""
        manifest = self.load_state().get("manifest")
        found = {REQUEST_FILE: self.state_dir / REQUEST_FILE, MANIFEST_FILE: Path(manifest) if manifest else None}
        return {name: path for name, path in found.items() if path is not None and path.is_file()}

    @classmethod
    def write_request(cls, spec: Spec, path: Path) -> Path:
        """The request RSpec of ``spec`` for no aggregate in particular, written to ``path``
        (:func:`netrepro.sites.instageni.rspec.write_request`, the default options)."""
        return geni_rspec.write_request(spec, path)

    @classmethod
    def request_drift(cls, spec: Spec, path: Path) -> str | None:
        """How the request RSpec at ``path`` differs from :meth:`write_request`'s, or None
        (:func:`netrepro.sites.instageni.rspec.drift`)."""
        return geni_rspec.drift(spec, path)

    @classmethod
    def write_profile(cls, spec: Spec, folder: Path) -> Path:
        """A CloudLab repository-based profile of ``spec`` (profile.rspec and README.md) in the
        new folder ``folder`` (:func:`netrepro.sites.instageni.rspec.write_profile`)."""
        return geni_rspec.write_profile(spec, folder)

    @classmethod
    def manifest_logins(cls, spec: Spec, manifest: Path, user: str | None,
                        key_file: str | None = None) -> dict[str, NodeLogin]:
        """The logins of a manifest RSpec saved from a portal
        (:func:`netrepro.sites.instageni.manifest.logins_from_manifest`)."""
        return geni_manifest.logins_from_manifest(spec, manifest, user, key_file)

    def adopt_manifest(self, manifest: Path | str, user: str | None, key_file: str | None = None) -> dict[str, NodeLogin]:
        """Parse ``manifest`` into logins (see netrepro.sites.instageni.manifest) and save them in the state."""

        logins = geni_manifest.logins_from_manifest(self.spec, manifest, user, key_file)
        self.save_logins(logins, manifest=str(manifest))
        return logins

    def _need_state(self) -> dict[str, Any]:
        state = self.load_state()
        if not state.get("slice_urn"):
            raise SiteError(f"site instageni: nothing reserved for {self.spec.name} (state {self.state_file}); run `make up` first")
        return state

    def renew(self, hours: float) -> None:
        """Set the lease of slice and slivers to end ``hours`` from now (not ``hours`` added to
        the current end; idempotent: the same target gives the same result), never earlier
        than it ends: the slivers' current expiry is read first (each sliver's
        ``geni_expires`` in AM API v3 Status's ``geni_slivers``: GENI AM API v3, "Status"); when the
        first of them to expire does not expire before the end asked, one line says so
        (:func:`netrepro.sites.base.lease_kept_line`), the state records that end and nothing
        is renewed. Else the slice authority first, then the aggregate (AM API v3 Renew), as
        the portal does.

        Raises:
            SiteError / GeniError: either refused, or Status answered an expiry that is not a
                date (the state keeps the old expiry).
        """
        state = self._need_state()
        creds = load_credentials(self.options.get("env"))
        client = self._client(creds, state["aggregate"])
        expires = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) + dt.timedelta(hours=float(hours))
        current = self._sliver_expiry(client, state)
        if current is not None and current >= expires:
            stderr_line(lease_kept_line("instageni", f"slice {state['slice_name']}", current, hours))
            if state.get("expires") != current.strftime(DATE_FMT):
                state["expires"] = current.strftime(DATE_FMT)
                self.save_state(state)
            return
        client.renew_slice(state["slice_urn"], expires)
        client.am(state["aggregate_url"], "Renew", state["slice_urn"], expires.strftime(DATE_FMT), {})
        state["expires"] = expires.strftime(DATE_FMT)
        self.save_state(state)

    def _sliver_expiry(self, client, state: dict[str, Any]) -> dt.datetime | None:
        """When the first of the slice's slivers expires on its aggregate (UTC), from AM API v3
        Status (``geni_slivers``' ``geni_expires``, RFC 3339); None when it lists none.

        Raises:
            SiteError: a ``geni_expires`` that is not an RFC 3339 date (one line naming the
                aggregate and the sliver).
        """
        value = client.am(state["aggregate_url"], "Status", state["slice_urn"], {})
        slivers = value.get("geni_slivers") if isinstance(value, dict) else None
        ends = []
        for s in slivers if isinstance(slivers, list) else []:
            raw = s.get("geni_expires") if isinstance(s, dict) else None
            if raw is None:
                continue
            try:
                ends.append(parse_rfc3339(raw))
            except ValueError:
                urn = s.get("geni_sliver_urn", "?")
                raise SiteError(f"aggregate {state['aggregate']}: Status: geni_expires {str(raw)[:60]!r} of sliver "
                                f"{str(urn)[:200]}: expected an RFC 3339 date such as 2026-12-01T18:00:00Z; "
                                "nothing changed") from None
        return min(ends) if ends else None

    def inventory_vars(self) -> dict[str, Any]:
        """The VMs are this reservation's own: roles/kernel_capability may install a kernel and
        reboot one that lacks a qdisc; ``packages_install`` false when option
        ``install_packages`` says so."""
        out: dict[str, Any] = {"kernel_capability_upgrade": True}
        if self.options.get("install_packages") not in (None, ""):
            out["packages_install"] = as_bool(self.options["install_packages"])
        return out

    def release(self) -> None:
        """Delete the slivers (AM API v3 Delete) and forget the reservation. Idempotent:
        with nothing reserved, or slivers already gone (GENI code 12), it succeeds.

        Raises:
            SiteError: the aggregate could not be asked or refused; the message is
                :meth:`held`'s line (slice, aggregate, expiry, how to release it).
        """
        state = self.load_state()
        if state.get("adopted"):
            print(f"instageni: forgetting the nodes of {state.get('manifest')}; release the slice in the portal "
                  "that reserved it", file=sys.stderr)
            self.state_file.unlink(missing_ok=True)
            return
        if not state.get("slice_urn"):
            print(f"instageni: nothing reserved for {self.spec.name}", file=sys.stderr)
            return
        creds = load_credentials(self.options.get("env"))
        self._delete(self._client(creds, state["aggregate"]), state)
        print(f"instageni: slice {state['slice_name']}: slivers deleted on {state['aggregate']}", file=sys.stderr)

