"""A test aggregate: the services a CloudLab run talks to, at their wire protocol, on the loopback.

One HTTPS server on 127.0.0.1 serves XML-RPC on the paths the Emulab/CloudLab portal uses:

- ``/protogeni/xmlrpc/geni-ma``: the member authority (Federation API v2): ``get_version``,
  ``get_credentials``, ``lookup`` of a MEMBER;
- ``/protogeni/xmlrpc/geni-sa/2``: the slice authority (Federation API v2): ``get_version``,
  ``get_credentials``, ``create``, ``update`` and ``lookup`` of a SLICE; CHAPI v1's
  ``create_slice`` (omni's default, ``speakv2 = false``) is answered with an error naming the
  omni_config setting that makes omni speak version 2, as this portal's path is version 2;
- ``/protogeni/xmlrpc/am/3.0``: the aggregate manager (GENI AM API v3): GetVersion,
  ListResources, Allocate, Provision, PerformOperationalAction, Status, Describe, Renew, Delete,
  Shutdown.

The aggregate follows GAPI_AM_API_V3, GAPI_AM_API_V3_DETAILS and GAPI_AM_API_V3/CommonConcepts
(groups.geni.net/geni/wiki), with geni-tools' reference aggregate (``gcf-am -V 3``,
src/gcf/geni/am/am3.py) where the text leaves a choice open. Its ``profile`` says which of the
behaviours the specification allows it shows:

- ``"spec"``: as the specification writes it and gcf-am v3 does: ``geni_rspec_version`` required
  on ListResources, Describe and Provision (1 BADARGS without it, 4 BADVERSION for a format
  not advertised); operations on individual slivers (sliver URNs) accepted
  (``geni_single_allocation`` false); slivers become ready only after ``geni_start``; times
  written as gcf-am writes them (``...+00:00``);
- ``"protogeni"`` (the default: what CloudLab and InstaGENI run, ProtoGENI's GeniAM, as issue 55
  records it): ``geni_single_allocation`` true, so a sliver URN given to any method is refused
  with 7 REFUSED "Must pass only slice URN"; ``geni_rspec_version`` not required on Provision
  or Describe (checked when given); the emulab RSpec extension advertised; slivers started by
  the aggregate after Provision; times written ``...Z``.

Both advertise ``geni_allocate: geni_disjoint`` and do it: a further Allocate into a slice that
holds slivers here adds its nodes and links when none of their ``client_id`` is in the slice
already (else 17 ALREADYEXISTS).

TLS as the portal does it: the server's certificate is signed by a test CA (not a public one),
and the client's certificate is required and checked against that CA during the handshake; the
caller is the URN in its certificate's subjectAltName. Answers have the shapes of the real
services: ``{code, value, output}`` with ``code`` an integer for the authorities and
``{geni_code, am_type, am_code}`` for the AM, beside ``geni_api: 3`` at the top of GetVersion's
answer; slivers go ``geni_allocated`` -> ``geni_provisioned`` and ``geni_notready`` ->
``geni_ready``; the manifest is the request with what ProtoGENI adds (sliver and component ids,
MAC addresses, ``<host>``, one ``<login>`` per slice member), shaped like
tests/data/rspec/manifest, ``type="manifest"`` with manifest.xsd in its schemaLocation.

Credentials are opaque XML documents netrepro only passes along; here they are signed with an
HMAC rather than xmlsec, and checked on every call (owner, target, expiry).

The nodes behind the logins: a *builder* (:class:`tests.testbed.nodes.LocalNodes`) makes real
ones when the slivers are provisioned, with the users' SSH keys; without one, the logins name
hosts that do not exist (for tests that stop before the nodes are used), and ``<host ipv4=>``
an address of TEST-NET-1 (RFC 5737), which is never routed.

Faults a testbed really has are injected through :attr:`TestAggregate.faults` (see there).
Every call is recorded in :attr:`TestAggregate.calls` as (path, method, GENI code), and with
its arguments in :attr:`TestAggregate.requests`.
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import ipaddress
import itertools
import re
import secrets
import socketserver
import ssl
import threading
import time
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable
from xmlrpc.server import SimpleXMLRPCRequestHandler, SimpleXMLRPCServer

from lxml import etree

MA_PATH = "/protogeni/xmlrpc/geni-ma"
SA_PATH = "/protogeni/xmlrpc/geni-sa/2"
AM_PATH = "/protogeni/xmlrpc/am/3.0"
#: How the slice authority writes times, and the ``protogeni`` profile the AM's (UTC, ``Z``).
DATE_FMT = "%Y-%m-%dT%H:%M:%SZ"
GENI_NS = "http://www.geni.net/resources/rspec/3"
EMULAB_NS = "http://www.protogeni.net/resources/rspec/ext/emulab/1"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
#: Most hours a lease may run from now (CloudLab grants up to a few days without an
#: administrator; a test lowers it to make a renewal fail).
MAX_LEASE_HOURS = 16 * 24
#: The profiles of :class:`TestAggregate` (see the module's docstring).
PROFILES = ("spec", "protogeni")
#: Hosts the advertisement RSpec lists (ListResources), each a ``pcN`` of the aggregate's domain.
AD_HOSTS = 20

#: RFC 3339 section 5.6 ``date-time``: full-date "T" full-time, the time-offset ``Z`` or
#: ``+hh:mm``/``-hh:mm`` required, fractions of a second of any length; "T" and "Z" may be
#: lower case (the note in section 5.6). GAPI_AM_API_V3/CommonConcepts "datetime" says every
#: time of the API is RFC 3339.
RFC3339 = re.compile(r"(\d{4}-\d{2}-\d{2})[Tt ](\d{2}:\d{2}:\d{2})(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z")


class Refused(Exception):
    """A call's error answer: ``code`` (GENI code) and ``output``."""

    def __init__(self, code: int, output: str):
        super().__init__(output)
        self.code, self.output = code, output


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


def _when(text: Any) -> dt.datetime:
    """An RFC 3339 time (:data:`RFC3339`, any offset, any fraction) as an aware UTC datetime.

    Raises:
        Refused: 1 BADARGS for anything else (not a string, no offset, not a date).
    """
    m = RFC3339.match(text.strip()) if isinstance(text, str) else None
    try:
        if m is None:
            raise ValueError
        frac = (m.group(3) or ".0")[1:7].ljust(6, "0")
        off = "+00:00" if m.group(4) in "Zz" else m.group(4)
        return dt.datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}.{frac}{off}").astimezone(dt.timezone.utc)
    except ValueError:
        raise Refused(1, f"bad time {str(text)[:80]!r}; expected an RFC 3339 date-time such as "
                         "2026-12-01T18:00:00Z") from None


def _urn_type(urn: Any) -> str | None:
    """The type of a GENI URN (``urn:publicid:IDN+<authority>+<type>+<name>``), else None."""
    parts = urn.split("+") if isinstance(urn, str) and urn.startswith("urn:publicid:IDN+") else []
    return parts[2] if len(parts) >= 4 else None


class _Server(socketserver.ThreadingMixIn, SimpleXMLRPCServer):
    daemon_threads = True


class TestAggregate:
    """The portal's authorities and one aggregate, served over TLS on 127.0.0.1.

    Args:
        pki: a :class:`tests.testbed.pki.TestPKI` (its CA checks the clients' certificates).
        urn: the aggregate's component manager URN.
        builder: makes the nodes (``build(keys) -> {node: {"host", "port", "macs": {iface_id: mac}}}``,
            ``teardown()``), or None.
        other_members: user names of the slice's other members (each gets a ``<login>``).
        profile: ``"protogeni"`` (default) or ``"spec"`` (:data:`PROFILES`; the module's
            docstring says how they differ). ValueError for another.

    Attributes:
        faults: what to get wrong, set by a test before the calls:
            ``busy``: {method: n} answers BUSY (14) to the first n calls of method;
            ``no_resources``: Allocate fails as ProtoGENI's mapper does;
            ``fail_node``: (node, message): that node's sliver becomes geni_failed;
            ``never_ready``: slivers stay geni_notready;
            ``max_lease_hours``: longest lease granted (Renew and update beyond it refused).
        calls: (path, method, geni_code) of every call, in order.
        requests: (path, method, params) of every call, in order: the arguments as decoded
            from the XML-RPC request (for checking what a client sends).
        held: slice URN -> :class:`Held`, the slivers of each slice that holds some here (as a
            real aggregate, any number of slices at once: a campaign's parallel reservations).
        slivers: sliver URN -> {"node", "allocation", "operational", "expires", "error"} of
            what is reserved now, every slice's (empty when nothing is).
    """

    __test__ = False

    def __init__(self, pki, urn: str = "urn:publicid:IDN+test.netrepro.example+authority+cm",
                 builder=None, other_members: tuple[str, ...] = ("peer",), authority: str = "emulab.net",
                 profile: str = "protogeni"):
        if profile not in PROFILES:
            raise ValueError(f"profile {profile!r}: expected one of {', '.join(PROFILES)}")
        self.pki, self.urn, self.builder, self.authority, self.profile = pki, urn, builder, authority, profile
        self.domain = urn.split("+")[1]
        self.other_members = list(other_members)
        self.faults: dict[str, Any] = {}
        self.calls: list[tuple[str, str, int]] = []
        self.requests: list[tuple[str, str, tuple]] = []
        self.held: dict[str, Held] = {}
        self.slices: dict[str, dict[str, Any]] = {}
        self.manifest: str | None = None   # the latest Allocate's
        self._secret = secrets.token_bytes(32)
        self._ids = itertools.count(4101)
        self._lock = threading.RLock()
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(pki.server())
        ctx.verify_mode = ssl.CERT_REQUIRED
        ctx.load_verify_locations(pki.ca_file)
        agg = self

        class Handler(SimpleXMLRPCRequestHandler):
            rpc_paths = (MA_PATH, SA_PATH, AM_PATH)

            def log_message(self, *args):   # quiet
                pass

            def _dispatch(self, method, params):
                return agg._answer(self.path, method, params, self.request.getpeercert())

        self.server = _Server(("127.0.0.1", 0), Handler, logRequests=False, allow_none=True)
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.port = self.server.server_address[1]
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    @property
    def spec(self) -> bool:
        """True in the ``spec`` profile."""
        return self.profile == "spec"

    # --- configuration a user writes -------------------------------------------------
    def url(self, path: str = AM_PATH) -> str:
        return f"https://127.0.0.1:{self.port}{path}"

    def aggregates_yaml(self, name: str = "test") -> str:
        """The aggregates file a user would write for this aggregate (NETREPRO_AGGREGATES)."""
        return (f"default: {name}\nca_bundle: {self.pki.ca_file}\n"
                f"slice_authority:\n  url: {self.url(SA_PATH)}\n  ma_url: {self.url(MA_PATH)}\n"
                f"  authority: {self.authority}\n"
                f"aggregates:\n  {name}: {{kind: cloudlab, urn: \"{self.urn}\", url: \"{self.url()}\"}}\n")

    def close(self) -> None:
        """Stop serving; tear down any nodes still built (what a test left reserved)."""
        self.server.shutdown()
        self.server.server_close()
        for h in self.held.values():
            if h.build is not None:
                h.build.join(600)
        if self.builder is not None:
            self.builder.teardown()

    @property
    def slivers(self) -> dict[str, dict[str, Any]]:
        """Every slice's slivers: sliver URN -> its state (a copy to read)."""
        return {u: s for h in self.held.values() for u, s in h.slivers.items()}

    @property
    def build_error(self) -> str | None:
        return next((h.build_error for h in self.held.values() if h.build_error), None)

    def _of(self, slice_urn: str) -> "Held":
        """The slivers of ``slice_urn``; Refused SEARCHFAILED (12) when it holds none here."""
        h = self.held.get(slice_urn)
        if h is None or not h.slivers:
            raise Refused(12, f"No slice or aggregate here: {slice_urn}")
        return h

    def _time(self, when: dt.datetime) -> str:
        """A time as this profile writes it: ``...Z`` (ProtoGENI) or ``...+00:00`` (gcf-am v3's
        ``rfc3339format``: Python's isoformat of an aware UTC time); both RFC 3339."""
        return when.strftime(DATE_FMT) if not self.spec else when.astimezone(dt.timezone.utc).isoformat()

    # --- dispatch --------------------------------------------------------------------
    def _answer(self, path: str, method: str, params: tuple, peer: dict | None) -> dict[str, Any]:
        caller = next((v for k, v in (peer or {}).get("subjectAltName", ()) if k == "URI"), None)
        am = path == AM_PATH
        self.requests.append((path, method, params))
        try:
            busy = self.faults.get("busy", {})
            if busy.get(method, 0) > 0:
                busy[method] -= 1
                raise Refused(14, "resource is busy; try again later")
            handler = getattr(self, f"_{'am' if am else 'ma' if path == MA_PATH else 'sa'}_{method}", None)
            if handler is None:
                raise Refused(13, f"{method}: not implemented at {path}")
            with self._lock:
                value = handler(caller, *params)
            code, out = 0, ""
        except Refused as exc:
            code, value, out = exc.code, 0, exc.output
        except TypeError as exc:   # wrong number of arguments
            code, value, out = 1, 0, f"{method}: bad arguments ({exc})"
        self.calls.append((path, method, code))
        if am:
            # GAPI_AM_API_V3/CommonConcepts "ReturnStruct": code {geni_code, am_type, am_code}, value,
            # output; GAPI_AM_API_V3_DETAILS "GetVersion": geni_api beside them, the API's version.
            res = {"code": {"geni_code": code, "am_type": "protogeni" if not self.spec else "netrepro-test",
                            "am_code": code}, "value": value, "output": out}
            if method == "GetVersion":
                res["geni_api"] = 3
            return res
        return {"code": code, "value": value, "output": out}

    # --- credentials -----------------------------------------------------------------
    def _credential(self, owner: str, target: str, expires: dt.datetime, kind: str) -> list[dict[str, str]]:
        body = (f"<credential xml:id=\"ref{secrets.token_hex(4)}\"><type>privilege</type>"
                f"<owner_urn>{owner}</owner_urn><target_urn>{target}</target_urn>"
                f"<expires>{expires.strftime(DATE_FMT)}</expires><privileges><privilege><name>*</name>"
                f"<can_delegate>1</can_delegate></privilege></privileges><kind>{kind}</kind></credential>")
        sig = hmac.new(self._secret, body.encode(), hashlib.sha256).hexdigest()
        value = f"<?xml version=\"1.0\"?>\n<signed-credential>{body}<signatures><Signature>{sig}</Signature></signatures></signed-credential>"
        return [{"geni_type": "geni_sfa", "geni_version": "3", "geni_value": value}]

    def _check(self, creds: list, caller: str | None, target: str | None, kind: str | tuple[str, ...]) -> None:
        """A credential of ``kind`` (user/slice, or any of a tuple) we issued, owned by the caller,
        for ``target`` (any target when None)."""
        kinds = (kind,) if isinstance(kind, str) else kind
        for c in creds or []:
            text = c.get("geni_value", "") if isinstance(c, dict) else ""
            try:
                root = etree.fromstring(text.encode())
            except (etree.XMLSyntaxError, ValueError):
                continue
            cred = root.find("credential")
            sig = root.findtext("signatures/Signature") or ""
            if cred is None:
                continue
            body = etree.tostring(cred).decode()
            if not hmac.compare_digest(sig, hmac.new(self._secret, body.encode(), hashlib.sha256).hexdigest()):
                continue
            if cred.findtext("kind") not in kinds or cred.findtext("owner_urn") != caller:
                continue
            if target is not None and cred.findtext("target_urn") != target:
                continue
            if _when(cred.findtext("expires")) < _now():
                raise Refused(15, f"credential for {target or caller} has expired")
            return
        raise Refused(3, f"no valid {'/'.join(kinds)} credential for {target or caller} from {caller}")

    # --- member authority ----------------------------------------------------------------
    def _fed_version(self, services: list[str]) -> dict[str, Any]:
        """Federation API v2 ``get_version``'s value (CommonFederationAPIv2, "get_version": VERSION,
        SERVICES, CREDENTIAL_TYPES, FIELDS; unguarded, no argument)."""
        return {"VERSION": "2", "SERVICES": services,
                "CREDENTIAL_TYPES": [{"type": "geni_sfa", "version": "3"}], "FIELDS": {}}

    def _ma_get_version(self, caller):
        return self._fed_version(["MEMBER"])

    def _ma_get_credentials(self, caller, member_urn, creds, options):
        if member_urn != caller:
            raise Refused(3, f"{caller} may not get the credential of {member_urn}")
        return self._credential(caller, member_urn, _now() + dt.timedelta(days=30), "user")

    def _ma_lookup(self, caller, kind, creds, options):
        """Federation API v2 ``lookup(type, credentials, options)`` of MEMBERs (the caller only:
        a member's own record), ``options = {match: {MEMBER_URN: urn or [urns]}, filter: [fields]}``;
        the value is ``{member URN: {field: value}}``."""
        if kind != "MEMBER":
            raise Refused(1, f"lookup: type {kind!r}: this member authority looks up MEMBER")
        match = (options or {}).get("match") or {}
        wanted = match.get("MEMBER_URN", [caller])
        wanted = [wanted] if isinstance(wanted, str) else wanted
        rec = {"MEMBER_URN": caller, "MEMBER_USERNAME": caller.rsplit("+", 1)[-1]} if caller else {}
        return _filtered({u: rec for u in wanted if u == caller}, (options or {}).get("filter"))

    # --- slice authority -------------------------------------------------------------------
    def _slice_urn(self, project_urn: str, name: str) -> str:
        project = project_urn.rsplit("+", 1)[-1]
        return f"urn:publicid:IDN+{self.authority}:{project}+slice+{name}"

    def _sa_get_version(self, caller):
        return self._fed_version(["SLICE"])

    def _sa_create(self, caller, kind, creds, options):
        self._check(creds, caller, None, "user")
        f = (options or {}).get("fields", {})
        if kind != "SLICE" or not f.get("SLICE_NAME") or not f.get("SLICE_PROJECT_URN"):
            raise Refused(1, "expected SLICE with SLICE_NAME and SLICE_PROJECT_URN")
        urn = self._slice_urn(f["SLICE_PROJECT_URN"], f["SLICE_NAME"])
        old = self.slices.get(urn)
        if old and old["expires"] > _now():
            raise Refused(17, f"slice {f['SLICE_NAME']} already exists")
        expires = _when(f["SLICE_EXPIRATION"]) if f.get("SLICE_EXPIRATION") else _now() + dt.timedelta(hours=2)
        self._lease_ok(expires)
        self.slices[urn] = {"owner": caller, "expires": expires, "name": f["SLICE_NAME"],
                            "project": f["SLICE_PROJECT_URN"]}
        return {"SLICE_URN": urn, "SLICE_NAME": f["SLICE_NAME"], "SLICE_EXPIRATION": expires.strftime(DATE_FMT)}

    def _sa_create_slice(self, caller, *args):
        """CHAPI v1 ``create_slice`` (UniformClearinghouseAPI, version 1), which omni's ``chapi``
        framework calls unless ``speakv2`` is set (geni-tools framework_chapi.py): this path is the
        portal's Federation API v2 slice authority, so an honest error naming the setting."""
        raise Refused(13, "create_slice is CHAPI v1; this slice authority speaks the Federation API v2 "
                          "(create('SLICE', credentials, options)): set speakv2 = true in the chapi framework "
                          "section of omni_config")

    def _sa_get_credentials(self, caller, slice_urn, creds, options):
        self._check(creds, caller, None, "user")
        sl = self.slices.get(slice_urn)
        if sl is None:
            raise Refused(12, f"no such slice {slice_urn}")
        return self._credential(caller, slice_urn, sl["expires"], "slice")

    def _sa_update(self, caller, kind, slice_urn, creds, options):
        self._check(creds, caller, slice_urn, "slice")
        f = (options or {}).get("fields", {})
        if "SLICE_EXPIRATION" in f:
            expires = _when(f["SLICE_EXPIRATION"])
            self._lease_ok(expires)
            self.slices[slice_urn]["expires"] = expires
        return None

    def _sa_lookup(self, caller, kind, creds, options):
        """Federation API v2 ``lookup(type, credentials, options)`` of SLICEs the caller owns,
        ``options = {match: {SLICE_URN or SLICE_NAME: value or [values]}, filter: [fields]}``;
        the value is ``{slice URN: {field: value}}`` (CommonFederationAPIv2, "lookup")."""
        self._check(creds, caller, None, ("user", "slice"))
        if kind != "SLICE":
            raise Refused(1, f"lookup: type {kind!r}: this slice authority looks up SLICE")
        match = (options or {}).get("match") or {}
        out = {}
        for urn, sl in self.slices.items():
            rec = {"SLICE_URN": urn, "SLICE_NAME": sl.get("name", urn.rsplit("+", 1)[-1]),
                   "SLICE_PROJECT_URN": sl.get("project"), "SLICE_EXPIRATION": sl["expires"].strftime(DATE_FMT),
                   "SLICE_EXPIRED": sl["expires"] <= _now(), "SLICE_OWNER": sl["owner"]}
            if sl["owner"] != caller:
                continue
            if all(rec.get(k) in ([v] if not isinstance(v, list) else v) for k, v in match.items()):
                out[urn] = rec
        return _filtered(out, (options or {}).get("filter"))

    def _lease_ok(self, expires: dt.datetime) -> None:
        most = float(self.faults.get("max_lease_hours", MAX_LEASE_HOURS))
        if expires > _now() + dt.timedelta(hours=most):
            raise Refused(7, f"Cannot extend the expiration beyond {most:g} hours from now without administrator "
                             "approval; request an extension in the portal")

    # --- aggregate manager -----------------------------------------------------------------
    def _am_GetVersion(self, caller, options=None):
        """GAPI_AM_API_V3_DETAILS "GetVersion": geni_api, geni_api_versions, the request and
        advertisement RSpec versions (type, version, schema, namespace, extensions),
        geni_credential_types; geni_single_allocation (boolean) and geni_allocate
        (GAPI_AM_API_V3/CommonConcepts "OperationsonIndividualSlivers")."""
        ext = [] if self.spec else [EMULAB_NS]   # ProtoGENI lists its emulab extension
        rspec = [{"type": "GENI", "version": "3", "schema": f"{GENI_NS}/{kind}.xsd", "namespace": GENI_NS,
                  "extensions": ext} for kind in ("request", "ad")]
        return {"geni_api": 3, "geni_api_versions": {"3": self.url()},
                "geni_request_rspec_versions": [rspec[0]], "geni_ad_rspec_versions": [rspec[1]],
                "geni_credential_types": [{"geni_type": "geni_sfa", "geni_version": "3"}],
                "geni_single_allocation": not self.spec, "geni_allocate": "geni_disjoint",
                "geni_am_type": "protogeni" if not self.spec else "netrepro-test", "urn": self.urn}

    def _rspec_version(self, method: str, options: dict, required: bool) -> None:
        """The ``geni_rspec_version`` option (GAPI_AM_API_V3: "The following option is required"
        for ListResources, Describe and Provision): 1 BADARGS when missing (if ``required``) or
        without type and version, 4 BADVERSION when not an advertised format (GENI 3, case
        insensitive: GAPI_AM_API_V3/CommonConcepts "RSpecdatatype")."""
        v = (options or {}).get("geni_rspec_version")
        if v is None:
            if required:
                raise Refused(1, f"Bad Arguments: option geni_rspec_version was not supplied to {method}")
            return
        if not isinstance(v, dict) or "type" not in v or "version" not in v:
            raise Refused(1, f"Bad Arguments: {method}: option geni_rspec_version needs a type and a version")
        if str(v["type"]).strip().lower() != "geni" or str(v["version"]).strip() != "3":
            raise Refused(4, f"Bad Version: {method}: RSpec {v['type']} {v['version']} is not supported; "
                             "GetVersion lists GENI 3")

    def _targets(self, urns: Any, creds: list, caller: str | None) -> tuple[str, "Held", list[str]]:
        """The slice and slivers ``urns`` name (GAPI_AM_API_V3/CommonConcepts "urns": a slice URN,
        or sliver URNs of one slice), with the caller's slice credential checked.

        A slice URN names every sliver of the slice here (12 SEARCHFAILED when it holds none);
        sliver URNs name themselves in the ``spec`` profile (12 for one unknown, 1 BADARGS for
        slivers of several slices) and are refused with 7 REFUSED in the ``protogeni`` profile,
        which advertises geni_single_allocation.

        Returns (slice URN, its :class:`Held`, the sliver URNs named).
        """
        if not isinstance(urns, list) or not urns or not all(isinstance(u, str) for u in urns):
            raise Refused(1, "Bad Arguments: urns must be a non-empty array of URN strings")
        slices = [u for u in urns if _urn_type(u) == "slice"]
        slivers = [u for u in urns if _urn_type(u) == "sliver"]
        if len(slices) + len(slivers) != len(urns):
            raise Refused(1, f"Bad Arguments: not a slice or sliver URN: {[u for u in urns if u not in slices + slivers]}")
        if slivers and not self.spec:
            raise Refused(7, "Must pass only slice URN")
        if len(slices) > 1:
            raise Refused(1, "Bad Arguments: URNs of more than one slice")
        if slices:
            self._check(creds, caller, slices[0], "slice")
            h = self._of(slices[0])
            return slices[0], h, list(h.slivers)
        owners = {next((s for s, h in self.held.items() if u in h.slivers), None) for u in slivers}
        if None in owners:
            raise Refused(12, f"Search Failed: no such sliver here: {[u for u in slivers if u not in self.slivers]}")
        if len(owners) > 1:
            raise Refused(1, "Bad Arguments: slivers of more than one slice")
        slice_urn = owners.pop()
        self._check(creds, caller, slice_urn, "slice")
        return slice_urn, self.held[slice_urn], list(dict.fromkeys(slivers))

    @staticmethod
    def _not_shut(slice_urn: str, h: "Held") -> None:
        if h.shutdown:
            raise Refused(7, f"Refused: slice {slice_urn} is shut down")

    def _sliver_list(self, h: "Held", only: list[str] | None = None, fields: tuple[str, ...] = (
            "geni_allocation_status", "geni_operational_status")) -> list[dict[str, Any]]:
        """The slivers (``only`` these URNs, when given) as the AM API v3 returns them:
        geni_sliver_urn, geni_expires, the ``fields`` and geni_error when there is one."""
        out = []
        for urn, s in h.slivers.items():
            if only is not None and urn not in only:
                continue
            d = {"geni_sliver_urn": urn, "geni_expires": self._time(s["expires"]),
                 "geni_allocation_status": s["allocation"], "geni_operational_status": s["operational"]}
            d = {k: v for k, v in d.items() if k in ("geni_sliver_urn", "geni_expires", *fields)}
            if s.get("error"):
                d["geni_error"] = s["error"]
            out.append(d)
        return out

    def _am_ListResources(self, caller, creds, options):
        """GAPI_AM_API_V3 "ListResources": any credential of the caller's; the advertisement RSpec
        (a string; base64 of its zlib compression with ``geni_compressed``), only the hosts free
        now with ``geni_available``."""
        self._check(creds, caller, None, ("user", "slice"))
        options = options or {}
        if not isinstance(options, dict):
            raise Refused(1, "Bad Arguments: options must be a struct")
        self._rspec_version("ListResources", options, True)
        used = sum(1 for h in self.held.values() for s in h.slivers.values() if s.get("node"))
        free = 0 if self.faults.get("no_resources") else max(0, AD_HOSTS - used)
        root = etree.Element(f"{{{GENI_NS}}}rspec", nsmap={None: GENI_NS, "xsi": XSI_NS}, type="advertisement")
        root.set(f"{{{XSI_NS}}}schemaLocation", f"{GENI_NS} {GENI_NS}/ad.xsd")
        for i in range(1, AD_HOSTS + 1):
            available = i <= free
            if options.get("geni_available") and not available:
                continue
            node = etree.SubElement(root, f"{{{GENI_NS}}}node", component_id=f"urn:publicid:IDN+{self.domain}+node+pc{i}",
                                    component_manager_id=self.urn, component_name=f"pc{i}", exclusive="false")
            etree.SubElement(node, f"{{{GENI_NS}}}sliver_type", name="emulab-xen")
            etree.SubElement(node, f"{{{GENI_NS}}}available", now="true" if available else "false")
        text = etree.tostring(root, encoding="unicode")
        if options.get("geni_compressed"):
            return base64.b64encode(zlib.compress(text.encode())).decode()
        return text

    def _am_Allocate(self, caller, slice_urn, creds, rspec, options):
        """GAPI_AM_API_V3 "Allocate": {geni_rspec (manifest of the new slivers), geni_slivers
        [{geni_sliver_urn, geni_expires, geni_allocation_status}]}. A slice that holds slivers
        here takes a disjoint request (geni_allocate geni_disjoint, advertised by GetVersion)."""
        self._check(creds, caller, slice_urn, "slice")
        options = options or {}
        h = self.held.get(slice_urn) or Held()
        self._not_shut(slice_urn, h)
        if self.faults.get("no_resources"):
            raise Refused(2, "*** ERROR: mapper: Reached run limit. Giving up.\n"
                             "Could not map to physical resources: not enough free Xen hosts for 7 VMs")
        if not isinstance(rspec, str):
            raise Refused(1, "Bad Arguments: rspec must be a string")
        try:
            root = etree.fromstring(rspec.encode(), etree.XMLParser(resolve_entities=False, no_network=True))
        except etree.XMLSyntaxError as exc:
            raise Refused(1, f"request rspec: {exc}") from None
        expires = _when(options["geni_end_time"]) if options.get("geni_end_time") else \
            self.slices[slice_urn]["expires"]
        held_ids = {e.get("client_id") for e in (h.request.iter() if h.request is not None else ())
                    if e.tag in (f"{{{GENI_NS}}}node", f"{{{GENI_NS}}}link")}
        new = {}
        for el in root.iter(f"{{{GENI_NS}}}node", f"{{{GENI_NS}}}link"):
            if el.get("client_id") in held_ids:
                raise Refused(17, f"{el.get('client_id')} is already allocated in {slice_urn}; this aggregate takes "
                                  "only requests disjoint from a slice's slivers (geni_allocate geni_disjoint)")
        for node in root.iter(f"{{{GENI_NS}}}node"):
            cm = node.get("component_manager_id")
            if cm and cm != self.urn:
                raise Refused(1, f"node {node.get('client_id')}: component_manager_id {cm} is not this aggregate ({self.urn})")
            sid = f"urn:publicid:IDN+{self.domain}+sliver+{next(self._ids)}"
            node.set("sliver_id", sid)
            node.set("component_manager_id", self.urn)
            new[sid] = {"node": node.get("client_id"), "allocation": "geni_allocated",
                        "operational": "geni_pending_allocation", "expires": expires}
            for itf in node.iter(f"{{{GENI_NS}}}interface"):
                itf.set("sliver_id", f"urn:publicid:IDN+{self.domain}+sliver+{next(self._ids)}")
        for link in root.iter(f"{{{GENI_NS}}}link"):
            sid = f"urn:publicid:IDN+{self.domain}+sliver+{next(self._ids)}"
            link.set("sliver_id", sid)
            new[sid] = {"node": None, "link": link.get("client_id"), "allocation": "geni_allocated",
                        "operational": "geni_pending_allocation", "expires": expires}
        _as_manifest(root)
        if h.request is None:
            h.request = root
        else:   # one manifest for the slice: the new nodes and links beside the earlier ones
            for el in list(root):
                h.request.append(etree.fromstring(etree.tostring(el)))
        h.slivers.update(new)
        self.held[slice_urn] = h
        self.manifest = etree.tostring(root, encoding="unicode")
        return {"geni_rspec": self.manifest,
                "geni_slivers": self._sliver_list(h, list(new), ("geni_allocation_status",))}

    def _am_Provision(self, caller, urns, creds, options):
        """GAPI_AM_API_V3 "Provision": {geni_rspec (manifest), geni_slivers [{geni_sliver_urn,
        geni_allocation_status, geni_operational_status, geni_expires, geni_error?}]};
        ``geni_rspec_version`` required (``spec``), ``geni_users`` [{urn, keys}], ``geni_end_time``."""
        options = options or {}
        slice_urn, h, named = self._targets(urns, creds, caller)
        self._not_shut(slice_urn, h)
        self._rspec_version("Provision", options, self.spec)
        if self.builder is not None and h.build is not None:
            raise Refused(13, "Unsupported: the test aggregate's node builder builds a slice's nodes once; "
                              "allocate and provision a slice's nodes together")
        users = options.get("geni_users", [])
        keys = [k for u in users for k in u.get("keys", [])]
        members = [u["urn"].rsplit("+", 1)[-1] for u in users] + self.other_members
        until = _when(options["geni_end_time"]) if options.get("geni_end_time") else None
        for u in named:
            s = h.slivers[u]
            s["allocation"], s["operational"] = "geni_provisioned", "geni_notready"
            s["started"] = not self.spec   # ProtoGENI boots the slivers itself
            if until is not None:
                s["expires"] = min(until, self.slices[slice_urn]["expires"])
        h.members = members
        if self.builder is not None:
            h.build = threading.Thread(target=self._build_nodes, args=(h, keys), daemon=True)
            h.build.start()
        else:   # no nodes to wait for: ready at the first Status
            h.nodes = {}
            h.polls_to_ready = 0
        return {"geni_rspec": self._manifest(h), "geni_slivers": self._sliver_list(h, named)}

    def _build_nodes(self, h: "Held", keys: list[str]) -> None:
        try:
            nodes = self.builder.build(keys)
        except Exception as exc:   # the slivers fail, as a VM that does not boot
            with self._lock:
                h.build_error = f"{type(exc).__name__}: {exc}"
                for s in h.slivers.values():
                    s["operational"], s["error"] = "geni_failed", f"VM did not boot: {h.build_error}"
            return
        with self._lock:
            h.nodes = nodes
            h.polls_to_ready = 0

    def _am_PerformOperationalAction(self, caller, urns, creds, action, options):
        """GAPI_AM_API_V3 "PerformOperationalAction": geni_start, geni_restart, geni_stop on
        provisioned slivers (1 BADARGS for one not provisioned), 13 UNSUPPORTED for another
        action; the slivers' list (geni_sliver_urn, statuses, geni_expires)."""
        slice_urn, h, named = self._targets(urns, creds, caller)
        self._not_shut(slice_urn, h)
        if action not in ("geni_start", "geni_restart", "geni_stop"):
            raise Refused(13, f"Unsupported: action {action} is not supported")
        unprovisioned = [u for u in named if h.slivers[u]["allocation"] != "geni_provisioned"]
        if unprovisioned:
            raise Refused(1, f"Bad Arguments: {action}: slivers not provisioned: {unprovisioned}")
        for u in named:
            s = h.slivers[u]
            if action == "geni_stop":
                s["started"] = False
                if s["operational"] == "geni_ready":
                    s["operational"] = "geni_notready"
            else:
                s["started"] = True
        return self._sliver_list(h, named)

    def _advance(self, h: "Held") -> None:
        """Move a slice's slivers towards ready as the nodes come up (and inject the status faults)."""
        if not h.slivers or h.polls_to_ready is None or self.faults.get("never_ready"):
            return
        fail = self.faults.get("fail_node")
        for s in h.slivers.values():
            if fail and s.get("node") == fail[0] and s["operational"] != "geni_failed":
                s["operational"], s["error"] = "geni_failed", fail[1]
        if h.polls_to_ready > 0:
            h.polls_to_ready -= 1
            return
        for s in h.slivers.values():
            if s["operational"] == "geni_notready" and s.get("started"):
                s["operational"] = "geni_ready"

    def _am_Status(self, caller, urns, creds, options):
        """GAPI_AM_API_V3 "Status": {geni_urn, geni_slivers [{geni_sliver_urn, geni_allocation_status,
        geni_operational_status, geni_expires, geni_error?}]}."""
        slice_urn, h, named = self._targets(urns, creds, caller)
        self._advance(h)
        return {"geni_urn": slice_urn, "geni_slivers": self._sliver_list(h, named)}

    def _am_Describe(self, caller, urns, creds, options):
        """GAPI_AM_API_V3 "Describe": {geni_rspec (manifest), geni_urn, geni_slivers};
        ``geni_rspec_version`` required (``spec``). A slice with no slivers here is described by
        a manifest of no node in the ``spec`` profile (as GAPI_AM_API_V3 says it shall be), and
        refused with 12 SEARCHFAILED in the ``protogeni`` one."""
        self._rspec_version("Describe", options, self.spec)
        if self.spec and isinstance(urns, list) and len(urns) == 1 and _urn_type(urns[0]) == "slice" \
                and not (self.held.get(urns[0]) and self.held[urns[0]].slivers):
            self._check(creds, caller, urns[0], "slice")
            empty = etree.Element(f"{{{GENI_NS}}}rspec", nsmap={None: GENI_NS}, type="manifest")
            _as_manifest(empty)
            return {"geni_rspec": etree.tostring(empty, encoding="unicode"), "geni_urn": urns[0], "geni_slivers": []}
        slice_urn, h, named = self._targets(urns, creds, caller)
        return {"geni_rspec": self._manifest(h), "geni_urn": slice_urn, "geni_slivers": self._sliver_list(h, named)}

    def _manifest(self, h: "Held") -> str:
        """The slice's request with what the aggregate adds once the slivers are provisioned."""
        root = etree.fromstring(etree.tostring(h.request))
        ready = all(s["operational"] == "geni_ready" for s in h.slivers.values())
        nodes = h.nodes or {}
        for i, node in enumerate(root.iter(f"{{{GENI_NS}}}node"), 1):
            cid = node.get("client_id")
            got = nodes.get(cid, {"host": f"pc{i}.{self.domain}", "port": 22, "macs": {}})
            node.set("component_id", f"urn:publicid:IDN+{self.domain}+node+pc{i}")
            for k, itf in enumerate(node.iter(f"{{{GENI_NS}}}interface"), 1):
                itf.set("component_id", f"urn:publicid:IDN+{self.domain}+interface+pc{i}:eth{k}")
                mac = got["macs"].get(itf.get("client_id")) or f"02:00:{i:02x}:{k:02x}:00:01"
                itf.set("mac_address", mac.replace(":", ""))
            etree.SubElement(node, f"{{{EMULAB_NS}}}vnode", name=f"pc{i}", hardware_type="pcvm")
            etree.SubElement(node, f"{{{GENI_NS}}}host", name=f"{cid}.{self.domain}", ipv4=_ipv4(got["host"], i))
            if ready:   # logins appear once the slivers are ready (as the real manifest's do)
                services = etree.SubElement(node, f"{{{GENI_NS}}}services")
                for user in h.members:
                    etree.SubElement(services, f"{{{GENI_NS}}}login", authentication="ssh-keys",
                                     hostname=got["host"], port=str(got["port"]), username=user)
        return etree.tostring(root, encoding="unicode")

    def _am_Renew(self, caller, urns, creds, expiration, options):
        """GAPI_AM_API_V3 "Renew": ``expiration_time`` any RFC 3339 time; ``geni_extend_alap``
        renews as far as policy allows instead of refusing; the renewed slivers' list."""
        slice_urn, h, named = self._targets(urns, creds, caller)
        self._not_shut(slice_urn, h)
        when = _when(expiration)
        most = min(self.slices[slice_urn]["expires"],
                   _now() + dt.timedelta(hours=float(self.faults.get("max_lease_hours", MAX_LEASE_HOURS))))
        if (options or {}).get("geni_extend_alap"):
            when = min(when, most)
        self._lease_ok(when)
        if when > self.slices[slice_urn]["expires"]:
            raise Refused(7, "cannot renew slivers beyond the slice's expiration; renew the slice first")
        for u in named:
            h.slivers[u]["expires"] = when
        return self._sliver_list(h, named)

    def _am_Delete(self, caller, urns, creds, options):
        """GAPI_AM_API_V3 "Delete": the deleted slivers [{geni_sliver_urn, geni_allocation_status
        (geni_unallocated), geni_expires}]; the nodes torn down when the slice holds no more."""
        slice_urn, h, named = self._targets(urns, creds, caller)
        self._not_shut(slice_urn, h)
        if h.build is not None:
            h.build.join(600)
        gone = [{"geni_sliver_urn": u, "geni_allocation_status": "geni_unallocated",
                 "geni_expires": self._time(h.slivers[u]["expires"])} for u in named]
        for u in named:
            del h.slivers[u]
        if not h.slivers:
            del self.held[slice_urn]
            if self.builder is not None:
                self.builder.teardown()
        return gone

    def _am_Shutdown(self, caller, slice_urn, creds, options):
        """GAPI_AM_API_V3 "Shutdown": an operator's emergency stop of a slice (slice URN only,
        1 BADARGS else): true; afterwards the slice's slivers are kept for forensics and every
        change is refused (7 REFUSED, as gcf-am v3 refuses a shut-down slice); Status and
        Describe still answer."""
        if _urn_type(slice_urn) != "slice":
            raise Refused(1, "Bad Arguments: Shutdown takes a slice URN")
        self._check(creds, caller, slice_urn, "slice")
        h = self._of(slice_urn)
        h.shutdown = True
        return True

    # --- for the tests -----------------------------------------------------------------
    def methods(self, path: str | None = None) -> list[str]:
        """The methods called, in order (at ``path`` only, when given)."""
        return [m for p, m, _ in self.calls if path is None or p == path]

    def wait_idle(self, timeout_s: float = 60) -> None:
        """Wait until no node is being built (after a test's run)."""
        for h in list(self.held.values()):
            if h.build is not None:
                h.build.join(timeout_s)


@dataclass
class Held:
    """One slice's slivers at the test aggregate: sliver URN -> state (``slivers``), its request
    as Allocate made it a manifest (``request``), the members given logins, the nodes the
    builder made (``nodes``), the Status polls left before ready (None before Provision), the
    builder's thread and its error, whether an operator shut the slice down (Shutdown). A
    builder builds one slice's nodes at a time."""

    slivers: dict[str, dict[str, Any]] = field(default_factory=dict)
    request: Any = None
    members: list[str] = field(default_factory=list)
    nodes: dict | None = None
    polls_to_ready: int | None = None
    build: threading.Thread | None = None
    build_error: str | None = None
    shutdown: bool = False


def _as_manifest(root) -> None:
    """Make a request RSpec's root a manifest's: ``type="manifest"`` and each schema of its
    ``xsi:schemaLocation`` the manifest one (GAPI_AM_API_V3/CommonConcepts "RSpecdatatype": the
    manifest schemas are at the base URL of the request ones, ``manifest.xsd`` for
    ``request.xsd``; tests/data/rspec/manifest has real ones)."""
    root.set("type", "manifest")
    loc = root.get(f"{{{XSI_NS}}}schemaLocation")
    pairs = (loc or f"{GENI_NS} {GENI_NS}/request.xsd").split()
    root.set(f"{{{XSI_NS}}}schemaLocation",
             " ".join(re.sub(r"/request\.xsd$", "/manifest.xsd", x) for x in pairs))


def _ipv4(host: str, i: int) -> str:
    """``<host ipv4=>``: the node's IPv4 address when its login host is one, else 192.0.2.i of
    TEST-NET-1 (RFC 5737 section 3: for documentation, never routed), so that the attribute is
    always an address as the manifest schema's ``ipv4`` is, never a host name."""
    try:
        return str(ipaddress.IPv4Address(host))
    except ValueError:
        return f"192.0.2.{i % 254 + 1}"


def _filtered(records: dict[str, dict[str, Any]], fields: Any) -> dict[str, dict[str, Any]]:
    """Federation API v2 lookup's ``filter``: only the named fields of each record (all when none)."""
    if not fields:
        return records
    return {k: {f: v for f, v in r.items() if f in fields} for k, r in records.items()}


def counts(calls: list[tuple[str, str, int]]) -> dict[str, int]:
    """Method -> number of calls, for the record of a run."""
    out: dict[str, int] = {}
    for _, m, _ in calls:
        out[m] = out.get(m, 0) + 1
    return out


def wait_for(cond: Callable[[], bool], timeout_s: float = 30) -> bool:
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.1)
    return cond()
