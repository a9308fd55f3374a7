"""A test aggregate: the services a CloudLab run talks to, at their wire protocol, on the loopback.

One HTTPS server on 127.0.0.1 serves XML-RPC on the paths the Emulab/CloudLab portal uses:

- ``/protogeni/xmlrpc/geni-ma``: the member authority (Federation API v2): ``get_credentials``;
- ``/protogeni/xmlrpc/geni-sa/2``: the slice authority (Federation API v2): ``get_credentials``,
  ``create`` and ``update`` of a SLICE;
- ``/protogeni/xmlrpc/am/3.0``: the aggregate manager (GENI AM API v3): GetVersion, Allocate,
  Provision, PerformOperationalAction, Status, Describe, Renew, Delete.

TLS as the portal does it: the server's certificate is signed by a test CA (not a public one),
and the client's certificate is required and checked against that CA during the handshake; the
caller is the URN in its certificate's subjectAltName. Answers have the shapes of the real
services: ``{code, value, output}`` with ``code`` an integer for the authorities and
``{geni_code, am_type, am_code}`` for the AM; slivers go ``geni_allocated`` -> ``geni_provisioned``
and ``geni_notready`` -> ``geni_ready``; the manifest is the request with what ProtoGENI adds
(sliver and component ids, MAC addresses, ``<host>``, one ``<login>`` per slice member), shaped
like ../shared/fixtures/rspec/manifest.

Credentials are opaque XML documents netrepro only passes along; here they are signed with an
HMAC rather than xmlsec, and checked on every call (owner, target, expiry).

The nodes behind the logins: a *builder* (:class:`tests.testbed.nodes.LocalNodes`) makes real
ones when the slivers are provisioned, with the users' SSH keys; without one, the logins name
hosts that do not exist (for tests that stop before the nodes are used).

Faults a testbed really has are injected through :attr:`TestAggregate.faults` (see there).
Every call is recorded in :attr:`TestAggregate.calls` as (path, method, GENI code).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import itertools
import secrets
import socketserver
import ssl
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable
from xmlrpc.server import SimpleXMLRPCRequestHandler, SimpleXMLRPCServer

from lxml import etree

MA_PATH = "/protogeni/xmlrpc/geni-ma"
SA_PATH = "/protogeni/xmlrpc/geni-sa/2"
AM_PATH = "/protogeni/xmlrpc/am/3.0"
DATE_FMT = "%Y-%m-%dT%H:%M:%SZ"
GENI_NS = "http://www.geni.net/resources/rspec/3"
EMULAB_NS = "http://www.protogeni.net/resources/rspec/ext/emulab/1"
#: Most hours a lease may run from now (CloudLab grants up to a few days without an
#: administrator; a test lowers it to make a renewal fail).
MAX_LEASE_HOURS = 16 * 24


class Refused(Exception):
    """A call's error answer: ``code`` (GENI code) and ``output``."""

    def __init__(self, code: int, output: str):
        super().__init__(output)
        self.code, self.output = code, output


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0)


def _when(text: str) -> dt.datetime:
    try:
        return dt.datetime.strptime(text, DATE_FMT).replace(tzinfo=dt.timezone.utc)
    except (TypeError, ValueError):
        raise Refused(1, f"bad time {text!r}; expected {DATE_FMT}") from None


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

    Attributes:
        faults: what to get wrong, set by a test before the calls:
            ``busy``: {method: n} answers BUSY (14) to the first n calls of method;
            ``no_resources``: Allocate fails as ProtoGENI's mapper does;
            ``fail_node``: (node, message): that node's sliver becomes geni_failed;
            ``never_ready``: slivers stay geni_notready;
            ``max_lease_hours``: longest lease granted (Renew and update beyond it refused).
        calls: (path, method, geni_code) of every call, in order.
        held: slice URN -> :class:`Held`, the slivers of each slice that holds some here (as a
            real aggregate, any number of slices at once: a campaign's parallel reservations).
        slivers: sliver URN -> {"node", "allocation", "operational", "expires", "error"} of
            what is reserved now, every slice's (empty when nothing is).
    """

    __test__ = False

    def __init__(self, pki, urn: str = "urn:publicid:IDN+test.netrepro.example+authority+cm",
                 builder=None, other_members: tuple[str, ...] = ("peer",), authority: str = "emulab.net"):
        self.pki, self.urn, self.builder, self.authority = pki, urn, builder, authority
        self.domain = urn.split("+")[1]
        self.other_members = list(other_members)
        self.faults: dict[str, Any] = {}
        self.calls: list[tuple[str, str, int]] = []
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

    # --- dispatch --------------------------------------------------------------------
    def _answer(self, path: str, method: str, params: tuple, peer: dict | None) -> dict[str, Any]:
        caller = next((v for k, v in (peer or {}).get("subjectAltName", ()) if k == "URI"), None)
        am = path == AM_PATH
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
            return {"code": {"geni_code": code, "am_type": "protogeni", "am_code": code}, "value": value, "output": out}
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

    def _check(self, creds: list, caller: str | None, target: str | None, kind: str) -> None:
        """A credential of ``kind`` (user/slice) we issued, owned by the caller, for ``target``."""
        for c in creds or []:
            text = c.get("geni_value", "") if isinstance(c, dict) else ""
            try:
                root = etree.fromstring(text.encode())
            except etree.XMLSyntaxError:
                continue
            cred = root.find("credential")
            sig = root.findtext("signatures/Signature") or ""
            if cred is None:
                continue
            body = etree.tostring(cred).decode()
            if not hmac.compare_digest(sig, hmac.new(self._secret, body.encode(), hashlib.sha256).hexdigest()):
                continue
            if cred.findtext("kind") != kind or cred.findtext("owner_urn") != caller:
                continue
            if target is not None and cred.findtext("target_urn") != target:
                continue
            if _when(cred.findtext("expires")) < _now():
                raise Refused(15, f"credential for {target or caller} has expired")
            return
        raise Refused(3, f"no valid {kind} credential for {target or caller} from {caller}")

    # --- member authority ----------------------------------------------------------------
    def _ma_get_credentials(self, caller, member_urn, creds, options):
        if member_urn != caller:
            raise Refused(3, f"{caller} may not get the credential of {member_urn}")
        return self._credential(caller, member_urn, _now() + dt.timedelta(days=30), "user")

    # --- slice authority -------------------------------------------------------------------
    def _slice_urn(self, project_urn: str, name: str) -> str:
        project = project_urn.rsplit("+", 1)[-1]
        return f"urn:publicid:IDN+{self.authority}:{project}+slice+{name}"

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
        self.slices[urn] = {"owner": caller, "expires": expires}
        return {"SLICE_URN": urn, "SLICE_NAME": f["SLICE_NAME"], "SLICE_EXPIRATION": expires.strftime(DATE_FMT)}

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

    def _lease_ok(self, expires: dt.datetime) -> None:
        most = float(self.faults.get("max_lease_hours", MAX_LEASE_HOURS))
        if expires > _now() + dt.timedelta(hours=most):
            raise Refused(7, f"Cannot extend the expiration beyond {most:g} hours from now without administrator "
                             "approval; request an extension in the portal")

    # --- aggregate manager -----------------------------------------------------------------
    def _am_GetVersion(self, caller, options=None):
        return {"geni_api": 3, "geni_api_versions": {"3": self.url()},
                "geni_request_rspec_versions": [{"type": "GENI", "version": "3"}],
                "geni_ad_rspec_versions": [{"type": "GENI", "version": "3"}],
                "geni_credential_types": [{"geni_type": "geni_sfa", "geni_version": "3"}],
                "geni_single_allocation": 0, "geni_allocate": "geni_many", "urn": self.urn}

    def _sliver_list(self, h: "Held") -> list[dict[str, Any]]:
        out = []
        for urn, s in h.slivers.items():
            d = {"geni_sliver_urn": urn, "geni_expires": s["expires"].strftime(DATE_FMT),
                 "geni_allocation_status": s["allocation"], "geni_operational_status": s["operational"]}
            if s.get("error"):
                d["geni_error"] = s["error"]
            out.append(d)
        return out

    def _am_Allocate(self, caller, slice_urn, creds, rspec, options):
        self._check(creds, caller, slice_urn, "slice")
        if slice_urn in self.held and self.held[slice_urn].slivers:
            raise Refused(17, f"slice {slice_urn} already has slivers here")
        h = Held()
        if self.faults.get("no_resources"):
            raise Refused(2, "*** ERROR: mapper: Reached run limit. Giving up.\n"
                             "Could not map to physical resources: not enough free Xen hosts for 7 VMs")
        try:
            root = etree.fromstring(rspec.encode(), etree.XMLParser(resolve_entities=False, no_network=True))
        except etree.XMLSyntaxError as exc:
            raise Refused(1, f"request rspec: {exc}") from None
        expires = _when((options or {}).get("geni_end_time")) if (options or {}).get("geni_end_time") else \
            self.slices[slice_urn]["expires"]
        for node in root.iter(f"{{{GENI_NS}}}node"):
            cm = node.get("component_manager_id")
            if cm and cm != self.urn:
                raise Refused(1, f"node {node.get('client_id')}: component_manager_id {cm} is not this aggregate ({self.urn})")
            sid = f"urn:publicid:IDN+{self.domain}+sliver+{next(self._ids)}"
            node.set("sliver_id", sid)
            node.set("component_manager_id", self.urn)
            h.slivers[sid] = {"node": node.get("client_id"), "allocation": "geni_allocated",
                                 "operational": "geni_pending_allocation", "expires": expires}
            for itf in node.iter(f"{{{GENI_NS}}}interface"):
                itf.set("sliver_id", f"urn:publicid:IDN+{self.domain}+sliver+{next(self._ids)}")
        for link in root.iter(f"{{{GENI_NS}}}link"):
            sid = f"urn:publicid:IDN+{self.domain}+sliver+{next(self._ids)}"
            link.set("sliver_id", sid)
            h.slivers[sid] = {"node": None, "link": link.get("client_id"), "allocation": "geni_allocated",
                                 "operational": "geni_pending_allocation", "expires": expires}
        root.set("type", "manifest")
        h.request = root
        self.held[slice_urn] = h
        self.manifest = etree.tostring(root, encoding="unicode")
        return {"geni_rspec": self.manifest, "geni_slivers": self._sliver_list(h)}

    def _am_Provision(self, caller, urns, creds, options):
        self._check(creds, caller, urns[0], "slice")
        h = self.held.get(urns[0])
        if h is None or not h.slivers:
            raise Refused(12, f"no slivers in {urns[0]}")
        users = (options or {}).get("geni_users", [])
        keys = [k for u in users for k in u.get("keys", [])]
        members = [u["urn"].rsplit("+", 1)[-1] for u in users] + self.other_members
        for s in h.slivers.values():
            s["allocation"], s["operational"] = "geni_provisioned", "geni_notready"
        h.members = members
        if self.builder is not None:
            h.build = threading.Thread(target=self._build_nodes, args=(h, keys), daemon=True)
            h.build.start()
        else:   # no nodes to wait for: ready at the first Status
            h.nodes = {}
            h.polls_to_ready = 0
        return self._sliver_list(h)

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
        self._check(creds, caller, urns[0], "slice")
        if action != "geni_start":
            raise Refused(13, f"{action}: unsupported")
        return self._sliver_list(self._of(urns[0]))

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
            if s["operational"] == "geni_notready":
                s["operational"] = "geni_ready"

    def _am_Status(self, caller, urns, creds, options):
        self._check(creds, caller, urns[0], "slice")
        h = self._of(urns[0])
        self._advance(h)
        return {"geni_urn": urns[0], "geni_slivers": self._sliver_list(h)}

    def _am_Describe(self, caller, urns, creds, options):
        self._check(creds, caller, urns[0], "slice")
        h = self._of(urns[0])
        return {"geni_rspec": self._manifest(h), "geni_urn": urns[0], "geni_slivers": self._sliver_list(h)}

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
            etree.SubElement(node, f"{{{GENI_NS}}}host", name=f"{cid}.{self.domain}", ipv4=got["host"])
            if ready:   # logins appear once the slivers are ready (as the real manifest's do)
                services = etree.SubElement(node, f"{{{GENI_NS}}}services")
                for user in h.members:
                    etree.SubElement(services, f"{{{GENI_NS}}}login", authentication="ssh-keys",
                                     hostname=got["host"], port=str(got["port"]), username=user)
        return etree.tostring(root, encoding="unicode")

    def _am_Renew(self, caller, urns, creds, expiration, options):
        self._check(creds, caller, urns[0], "slice")
        when = _when(expiration)
        self._lease_ok(when)
        if when > self.slices[urns[0]]["expires"]:
            raise Refused(7, "cannot renew slivers beyond the slice's expiration; renew the slice first")
        h = self._of(urns[0])
        for s in h.slivers.values():
            s["expires"] = when
        return self._sliver_list(h)

    def _am_Delete(self, caller, urns, creds, options):
        self._check(creds, caller, urns[0], "slice")
        h = self._of(urns[0])
        if h.build is not None:
            h.build.join(600)
        gone = [{"geni_sliver_urn": u, "geni_allocation_status": "geni_unallocated",
                 "geni_expires": s["expires"].strftime(DATE_FMT)} for u, s in h.slivers.items()]
        del self.held[urns[0]]
        if self.builder is not None:
            self.builder.teardown()
        return gone

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
    builder's thread and its error. A builder builds one slice's nodes at a time."""

    slivers: dict[str, dict[str, Any]] = field(default_factory=dict)
    request: Any = None
    members: list[str] = field(default_factory=list)
    nodes: dict | None = None
    polls_to_ready: int | None = None
    build: threading.Thread | None = None
    build_error: str | None = None


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
