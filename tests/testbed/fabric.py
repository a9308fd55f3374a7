"""A FABRIC stand-in: the services fablib calls, at their wire protocol, on one loopback address.

fablib (fabrictestbed-extensions 2.0.9) is pointed at four hosts by its configuration
(fabric_rc: FABRIC_CREDMGR_HOST, FABRIC_ORCHESTRATOR_HOST, FABRIC_CORE_API_HOST,
FABRIC_BASTION_HOST). It checks each is reachable on port 443 (22 for the bastion) before it
uses them, and reaches the nodes through the bastion on port 22 only, so the stand-in takes
ports 443 and 22 of an address of its own in 127.0.0.0/8 (:func:`claim_loopback`), named in
the user's fabric_rc as all four hosts:

- HTTPS (a server certificate of a test CA, which the client trusts through
  ``REQUESTS_CA_BUNDLE``: fablib's clients are ``requests`` sessions), with the paths of
  FABRIC's REST APIs as fabrictestbed 2.0.8's clients call them. Every answer has the shape
  the service's OpenAPI document gives for its path, method and status (copies pinned in
  tests/data/fabric-openapi, with SOURCE.md), filled as the services' own controllers fill
  it; tests/test_fabric_models.py checks each against the document and the generated clients'
  models. Errors: :func:`error_body`.
  - credential manager (``/credmgr/tokens/refresh``, ``/credmgr/tokens/validate``): a
    refresh token is exchanged for an identity token, a JWT whose claims name the user and
    the project; every other call carries it as a bearer token, checked for signature and
    expiry;
  - core API (``/whoami``, ``/people/<uuid>?as_self=true``): the user, the bastion login and
    the bastion key's MD5 fingerprint and expiry, as the portal registered them;
  - orchestrator (``/slices/creates``, ``/slices``, ``/slices/<id>``, ``/slivers``,
    ``/slices/modify/<id>``, ``/slices/modify/<id>/accept``, ``/slices/renew/<id>``,
    ``/slices/delete/<id>``): answers ``{"data": [...], "size", "status", "type"}``; the slice
    model is the submitted ExperimentTopology (the FIM library, as the orchestrator uses it),
    kept under the slice's own graph id, with what the orchestrator adds once the slivers are
    active: each node's management address, reservation id and state, instance name; each
    interface's MAC; each network's reservation. Slice states go Configuring -> StableOK
    (StableError when a node fails), Closing -> Dead on delete.

  What it simplifies, against FABRIC: the identity token is signed with HMAC-SHA256 by a
  secret of the stand-in (FABRIC's are RS256, with keys published at the credential manager's
  ``/certs``, which the stand-in does not serve), and its claims are fixed; a refresh token is
  any string it issued, used once; one user in one project; a slice's nodes are all built at
  once and the orchestrator's other calls (resources, POAs, single slivers, metrics,
  version) are not served; the core API answers only the two calls fablib makes on the fabric
  site's path (whoami, the user's own record).
- the bastion: an OpenSSH sshd that lets the user's bastion login open TCP forwards (no
  shell), as FABRIC's bastion does, with the bastion key the core API lists.

The nodes behind it are real: :class:`tests.testbed.nodes.LocalNodes` in host mode, logged in
as ``ubuntu`` with sudo (the user of FABRIC's Ubuntu images), the slice key from the create
call authorized. Faults a testbed has are injected through :attr:`TestFabric.faults`, and every
request is recorded in :attr:`TestFabric.calls`. Root only.
"""

from __future__ import annotations

import base64
import datetime as dt
import fcntl
import hashlib
import hmac
import itertools
import json
import os
import secrets
import shlex
import shutil
import socket
import ssl
import subprocess
import tempfile
import threading
import time
import uuid
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import IO, Any
from urllib.parse import parse_qs, urlsplit

from testbed.nodes import free_id, shared_folder
from testbed.pki import TestPKI

#: The orchestrator's time format (fabrictestbed's OrchestratorClient.TIME_FORMAT).
TIME_FORMAT = "%Y-%m-%d %H:%M:%S %z"
#: The credential manager's (CredmgrClient.TIME_FORMAT).
TOKEN_TIME_FORMAT = "%Y-%m-%d %H:%M:%S %z"
#: Longest lease FABRIC grants from now without a project's extension: 2 weeks
#: (FABRIC knowledge base, "Slice lifetime").
MAX_LEASE_HOURS = 14 * 24
#: The login user of FABRIC's Ubuntu images (fablib's Constants.IMAGE_NAMES default_user).
NODE_USER = "ubuntu"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def claim_loopback(ports: tuple[int, ...] = (443, 22)) -> tuple[str, IO]:
    """An address of 127.0.0.0/8 (from 127.0.0.42 up) on which every port of ``ports`` can be
    bound now, and its claim: an open lock file (``<tmp>/netrepro-testbed-<address>.lock``,
    flock'd) that no other process holds; closing it frees the address. Stand-ins started at
    once by tests run side by side (pytest-xdist workers) thus never take one address between
    probing and binding it. Raises RuntimeError naming the ports when none is found (a
    service of this machine holds them on every address, e.g. an sshd on 0.0.0.0:22)."""
    for last in range(42, 255):
        addr = f"127.0.0.{last}"
        claim = open(Path(tempfile.gettempdir()) / f"netrepro-testbed-{addr}.lock", "w")
        socks = []
        try:
            fcntl.flock(claim, fcntl.LOCK_EX | fcntl.LOCK_NB)   # OSError: another stand-in's
            for port in ports:
                s = socket.socket()
                socks.append(s)
                s.bind((addr, port))
            return addr, claim
        except OSError:
            claim.close()
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError(f"no address of 127.0.0.0/8 has ports {ports} free: fablib reaches its services on 443 "
                       "and the bastion on 22; stop what listens there on every address")


class _Bastion:
    """OpenSSH's sshd on ``addr``:22 letting ``login`` (a user only this sshd's mount
    namespace has) open TCP forwards with the key of ``authorized_keys``; no shell, no tty."""

    def __init__(self, base: Path, addr: str, login: str, authorized_key: str):
        q = shlex.quote
        self.base = base
        base.mkdir(parents=True, exist_ok=True)
        self.shared = shared_folder()   # sshd reads the login's keys as the login
        hostkey = base / "bastion_host_ed25519_key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(hostkey)], check=True)
        (self.shared / "authorized_keys").write_text(authorized_key.strip() + "\n")
        uid = free_id()
        passwd = Path("/etc/passwd").read_text().rstrip("\n") + f"\n{login}:x:{uid}:{uid}:bastion login:/nonexistent:/usr/sbin/nologin\n"
        (base / "passwd").write_text(passwd)
        (base / "shadow").write_text(f"{login}:*:20000:0:99999:7:::\n")
        (base / "sshd_config").write_text("\n".join([
            f"ListenAddress {addr}:22", f"HostKey {hostkey}", f"AuthorizedKeysFile {self.shared / 'authorized_keys'}",
            f"AllowUsers {login}", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "PermitRootLogin no", "AllowTcpForwarding yes", "PermitTTY no", "X11Forwarding no",
            "ForceCommand /usr/sbin/nologin", "UsePAM no", "StrictModes no", "UseDNS no",
            f"PidFile {base / 'sshd.pid'}", "LogLevel VERBOSE", ""]))
        inner = (f"mount --bind {q(str(base / 'passwd'))} /etc/passwd && mount --bind {q(str(base / 'shadow'))} /etc/shadow && "
                 f"exec /usr/sbin/sshd -D -f {q(str(base / 'sshd_config'))} -E {q(str(base / 'sshd.log'))}")
        subprocess.run(["mkdir", "-p", "/run/sshd"], check=True)
        self.proc = subprocess.Popen(["unshare", "--mount", "--propagation", "private", "sh", "-c", inner])
        end = time.monotonic() + 20
        while True:
            try:
                with socket.create_connection((addr, 22), timeout=2) as s:
                    if s.recv(4).startswith(b"SSH"):
                        break
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > end:
                log = (base / "sshd.log").read_text() if (base / "sshd.log").exists() else ""
                raise RuntimeError(f"the bastion's sshd did not start on {addr}:22: {log.strip()[-300:]}")
            time.sleep(0.1)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        shutil.rmtree(self.shared, ignore_errors=True)


class Refused(Exception):
    """An error answer: HTTP ``status`` (400, 401, 403 or 404) and ``message``, the text
    FABRIC gives in the error's ``details`` (:func:`error_body` makes the JSON)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def error_body(status: int, details: str, service: str) -> dict[str, Any]:
    """The JSON of an error answer of ``service`` ("orchestrator", "credmgr" or "core"), as
    the services' OpenAPI documents define it (components/schemas/status_<status>_*, in
    tests/data/fabric-openapi) and their cors_<status> functions fill it (cors_response.py of
    each): one error, ``message`` the schema's default (the HTTP reason phrase), ``details``
    the service's text; then ``type`` "error", ``size`` 1 and ``status``. The orchestrator's and
    the credential manager's 400 schema puts those three inside the error, not beside it."""
    error = {"message": HTTPStatus(status).phrase, "details": details}
    extra = {"type": "error", "size": 1, "status": status}
    if status == 400 and service in ("orchestrator", "credmgr"):
        return {"errors": [{**error, **extra}]}
    return {"errors": [error], **extra}


class TestFabric:
    """FABRIC's credential manager, core API, orchestrator and bastion for one user and project.

    Args:
        base: a folder for the CA, the bastion and the nodes.
        builder: makes the nodes (``build(keys, user) -> {node: {"host", "port", "macs"}}``,
            ``teardown()``; :class:`tests.testbed.nodes.LocalNodes`), or None.
        experiment: the experiment file the builder builds (its nodes and networks are the
            ones a submitted slice must have).
        user: the user's short name.

    Attributes:
        faults: what to get wrong, set by a test before the calls:
            ``fail_node``: (node, message): that node's reservation fails, the slice is StableError;
            ``max_lease_hours``: longest lease granted (a renewal beyond it is refused);
            ``never_ready``: the slice stays Configuring, its nodes Ticketed;
            ``token_expired``: refresh tokens are refused as expired.
        calls: (HTTP method, path without query, status) of every request, in the order they
            came in (the status None while one is answered): a request the client gave up
            (Ctrl-C) stays before the ones it sent after, however long its answer takes.
        slices: slice id -> its record (name, state, lease end, topology, reservations).
    """

    __test__ = False

    def __init__(self, base: Path, builder=None, experiment: Path | None = None, user: str = "alice"):
        self.base = Path(base)
        self.base.mkdir(parents=True, exist_ok=True)
        self.builder, self.experiment = builder, experiment
        self.address, self._claim = claim_loopback()
        self.pki = TestPKI(self.base / "pki", "Test FABRIC CA")
        self.faults: dict[str, Any] = {}
        self.calls: list[tuple[str, str, int | None]] = []
        self.slices: dict[str, dict[str, Any]] = {}
        uid = str(uuid.uuid4())
        self.user = {"uuid": uid, "email": f"{user}@example.org", "name": user.title(),
                     "bastion_login": f"{user}_0000012345", "sub": f"http://cilogon.org/serverA/users/{uid[:8]}"}
        self.project = {"uuid": str(uuid.uuid4()), "name": "netrepro-ae"}
        self._secret = secrets.token_bytes(32)
        self._refresh: set[str] = set()
        self._ids = itertools.count(1)
        self._lock = threading.RLock()
        self._build: threading.Thread | None = None
        self.build_error: str | None = None
        self.keys = self.base / "keys"
        self.keys.mkdir(exist_ok=True)
        for name in ("bastion_key", "slice_key"):
            if not (self.keys / name).exists():
                subprocess.run(["ssh-keygen", "-q", "-t", "rsa", "-b", "3072", "-N", "", "-C", name, "-f",
                                str(self.keys / name)], check=True)
        self.bastion_expires = _now() + dt.timedelta(days=180)
        self.bastion = _Bastion(self.base / "bastion", self.address, self.user["bastion_login"],
                                (self.keys / "bastion_key.pub").read_text())
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(self.pki.server(self.address))
        fab = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):   # quiet
                pass

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                status, payload = fab._answer(method, self.path, dict(self.headers), body)
                if method == "POST" and self.path.startswith("/slices/creates"):
                    # fault: the slice is made but its answer is slow (a Ctrl-C meets the client
                    # between the create call and the slice id it returns)
                    time.sleep(float(fab.faults.get("create_answer_delay_s", 0)))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                try:
                    self.wfile.write(data)
                except (ConnectionError, ssl.SSLError):   # the client went away (a Ctrl-C test)
                    pass

            def do_GET(self):
                self._serve("GET")

            def do_POST(self):
                self._serve("POST")

            def do_PUT(self):
                self._serve("PUT")

            def do_DELETE(self):
                self._serve("DELETE")

        class Server(ThreadingHTTPServer):
            daemon_threads = True

        try:
            self.server = Server((self.address, 443), Handler)
        except OSError:
            self.bastion.close()
            self._claim.close()
            raise
        self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    # --- what a user has after the portal's steps (docs/sites/fabric.md) --------------
    def write_account(self, folder: Path) -> dict[str, str]:
        """Write the user's fablib configuration into ``folder``: the token file (a refresh
        token, as the portal's "Manage Tokens" gives it), the bastion key, the slice key pair and
        a fabric_rc naming this stand-in's address as every host. Returns the environment that
        makes netrepro use them (this process's without FABRIC_* and NETREPRO_*, plus
        FABRIC_RC, REQUESTS_CA_BUNDLE, and NETREPRO_STATE, NETREPRO_INVENTORY and NETREPRO_RESULTS
        under ``folder``, so that tests run side by side share none of them)."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        token = folder / "id_token.json"
        refresh = "NB2HI4DTHIXS" + secrets.token_hex(16)
        with self._lock:
            self._refresh.add(refresh)
        token.write_text(json.dumps({"id_token": self._jwt(), "refresh_token": refresh}, indent=2) + "\n")
        for name in ("bastion_key", "slice_key", "slice_key.pub", "bastion_key.pub"):
            (folder / name).write_bytes((self.keys / name).read_bytes())
            (folder / name).chmod(0o600)
        rc = folder / "fabric_rc"
        a = self.address
        rc.write_text("\n".join([
            f"export FABRIC_CREDMGR_HOST={a}", f"export FABRIC_ORCHESTRATOR_HOST={a}", f"export FABRIC_CORE_API_HOST={a}",
            f"export FABRIC_AM_HOST={a}", f"export FABRIC_BASTION_HOST={a}",
            f"export FABRIC_PROJECT_ID={self.project['uuid']}", f"export FABRIC_TOKEN_LOCATION={token}",
            f"export FABRIC_BASTION_USERNAME={self.user['bastion_login']}",
            f"export FABRIC_BASTION_KEY_LOCATION={folder / 'bastion_key'}",
            f"export FABRIC_SLICE_PRIVATE_KEY_FILE={folder / 'slice_key'}",
            f"export FABRIC_SLICE_PUBLIC_KEY_FILE={folder / 'slice_key.pub'}",
            "export FABRIC_LOG_LEVEL=INFO", ""]))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NETREPRO_", "FABRIC_"))}
        env.update({"FABRIC_RC": str(rc), "REQUESTS_CA_BUNDLE": str(self.pki.ca_file),
                    "NETREPRO_STATE": str(folder / "state"), "NETREPRO_INVENTORY": str(folder / "inventory"),
                    "NETREPRO_RESULTS": str(folder / "results")})
        return env

    def close(self) -> None:
        """Stop serving and the bastion, freeing the address; tear down any nodes still built (what a
        test left reserved)."""
        self.server.shutdown()
        self.server.server_close()
        self.bastion.close()
        self._claim.close()
        if self._build is not None:
            self._build.join(600)
        if self.builder is not None:
            self.builder.teardown()

    def methods(self) -> list[str]:
        """The calls in order, as ``METHOD /path`` with ids replaced by ``{id}``."""
        out = []
        for method, path, _ in self.calls:
            parts = [("{id}" if len(p) == 36 and p.count("-") == 4 else p) for p in path.split("/")]
            out.append(f"{method} {'/'.join(parts)}")
        return out

    def reserved(self) -> list[str]:
        """Names of the slices not Dead (what the user still holds)."""
        with self._lock:
            return [s["name"] for s in self.slices.values() if s["state"] != "Dead"]

    # --- tokens --------------------------------------------------------------------------
    def _jwt(self, hours: float = 1.0) -> str:
        now = int(time.time())
        claims = {"iss": "https://cm.fabric-testbed.net/", "sub": self.user["sub"],
                  "aud": "cilogon:/client_id/netrepro-test", "iat": now, "exp": now + int(hours * 3600),
                  "email": self.user["email"], "name": self.user["name"], "uuid": self.user["uuid"], "scope": "all",
                  "projects": [{"uuid": self.project["uuid"], "name": self.project["name"], "active": True,
                                "memberships": {"is_member": True, "is_token_holder": True}}],
                  "roles": [{"name": f"{self.project['uuid']}-pm", "description": "project member"}]}
        head = _b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
        body = _b64(json.dumps(claims).encode())
        sig = _b64(hmac.new(self._secret, f"{head}.{body}".encode(), hashlib.sha256).digest())
        return f"{head}.{body}.{sig}"

    def _claims(self, token: str) -> dict[str, Any]:
        try:
            head, body, sig = token.split(".")
            good = _b64(hmac.new(self._secret, f"{head}.{body}".encode(), hashlib.sha256).digest())
            if not hmac.compare_digest(good, sig):
                raise ValueError
            claims = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        except ValueError:
            raise Refused(401, "Unauthorized: invalid token signature") from None
        if claims["exp"] < time.time():
            raise Refused(401, "Unauthorized: token expired")
        return claims

    def _bearer(self, headers: dict[str, str]) -> dict[str, Any]:
        auth = headers.get("Authorization") or headers.get("authorization") or ""
        if not auth.startswith("Bearer "):
            raise Refused(401, "Unauthorized: no bearer token")
        return self._claims(auth[len("Bearer "):])

    # --- dispatch --------------------------------------------------------------------------
    def _answer(self, method: str, raw_path: str, headers: dict[str, str], body: bytes) -> tuple[int, Any]:
        parts = urlsplit(raw_path)
        path, query = parts.path.rstrip("/") or "/", parse_qs(parts.query)
        q = {k: v[-1] for k, v in query.items()}
        with self._lock:
            self.calls.append((method, path, None))
            at = len(self.calls) - 1
        try:
            status, payload = 200, self._route(method, path, q, query, headers, body)
        except Refused as exc:
            service = "credmgr" if path.startswith("/credmgr/") else "core" if path == "/whoami" or path.startswith("/people/") \
                else "orchestrator"
            status, payload = exc.status, error_body(exc.status, exc.message, service)
        with self._lock:
            self.calls[at] = (method, path, status)
        return status, payload

    def _route(self, method, path, q, query, headers, body):
        seg = path.strip("/").split("/")
        if seg[0] == "credmgr":
            return self._credmgr(method, seg[1:], q, body)
        if path == "/whoami" and method == "GET":
            # core API whoami (components/schemas/whoami, whoami_results; whoami_controller.py):
            # active, email, enrolled, name and uuid are required
            claims = self._bearer(headers)
            return {"results": [{"active": True, "email": claims["email"], "enrolled": True, "name": claims["name"],
                                 "uuid": claims["uuid"]}], "size": 1, "status": 200, "type": "whoami"}
        if seg[0] == "people" and len(seg) == 2 and method == "GET":
            self._bearer(headers)
            if seg[1] != self.user["uuid"]:
                raise Refused(404, f"No match for Person with uuid = '{seg[1]}'")
            return {"results": [self._person()], "size": 1, "status": 200, "type": "people.details"}
        claims = self._bearer(headers)
        return self._orchestrator(method, seg, q, query, body, claims)

    def _credmgr(self, method, seg, q, body):
        req = json.loads(body or b"{}")
        if seg == ["tokens", "refresh"] and method == "POST":
            if self.faults.get("token_expired") or req.get("refresh_token") not in self._refresh:
                raise Refused(401, "Refresh token expired or revoked: create a new token in the portal (Experiments > Manage Tokens)")
            if q.get("project_id") not in (None, self.project["uuid"]):
                raise Refused(403, f"user is not a member of project {q.get('project_id')}")
            new = "NB2HI4DTHIXS" + secrets.token_hex(16)
            with self._lock:
                self._refresh.discard(req["refresh_token"])
                self._refresh.add(new)
            now = _now()
            return {"data": [{"id_token": self._jwt(), "refresh_token": new, "state": "Valid", "created_from": "netrepro test",
                              "token_hash": hashlib.sha256(new.encode()).hexdigest(), "comment": "refreshed",
                              "created_at": now.strftime(TOKEN_TIME_FORMAT),
                              "expires_at": (now + dt.timedelta(hours=1)).strftime(TOKEN_TIME_FORMAT)}],
                    "size": 1, "status": 200, "type": "token"}
        if seg == ["tokens", "validate"] and method == "POST":
            # components/schemas/decoded_token: status_200_ok_no_content with the claims in
            # ``token`` (tokens_controller.tokens_validate_post)
            claims = self._claims(req.get("token", ""))
            return {"data": [{"message": "No Content", "details": "Token is Valid!"}], "size": 1, "status": 200,
                    "type": "no_content", "token": claims}
        raise Refused(404, f"no such credential manager call: {method} /credmgr/{'/'.join(seg)}")

    def _person(self) -> dict[str, Any]:
        """The user as the core API gives them to themselves (``/people/<uuid>?as_self=true``):
        components/schemas/people_one, whose required fields are affiliation, name,
        registered_on and uuid; ``sshkeys`` of sshkeys_one, the active bastion and sliver keys
        (people_controller.people_uuid_get, sshkeys_utils.sshkeys_from_fab_person). A field
        without a value is left out, as the documents type none of them nullable."""
        pub = (self.keys / "bastion_key.pub").read_text().split()
        digest = hashlib.md5(base64.b64decode(pub[1])).hexdigest()
        fingerprint = "MD5:" + ":".join(digest[i:i + 2] for i in range(0, len(digest), 2))
        created = self.bastion_expires - dt.timedelta(days=180)
        key = {"uuid": str(uuid.uuid5(uuid.NAMESPACE_URL, pub[1])), "fingerprint": fingerprint, "public_key": pub[1],
               "ssh_key_type": pub[0], "fabric_key_type": "bastion", "comment": "bastion_key", "description": "bastion",
               "created_on": created.isoformat(), "expires_on": self.bastion_expires.isoformat()}
        return {"uuid": self.user["uuid"], "name": self.user["name"], "email": self.user["email"],
                "email_addresses": [self.user["email"]], "affiliation": "Example University",
                "registered_on": created.isoformat(), "bastion_login": self.user["bastion_login"],
                "cilogon_id": self.user["sub"], "user_org_affiliations": [], "sshkeys": [key]}

    # --- orchestrator ----------------------------------------------------------------------
    def _orchestrator(self, method, seg, q, query, body, claims):
        if seg == ["slices", "creates"] and method == "POST":
            return self._create(q, json.loads(body or b"{}"), claims)
        if seg == ["slices"] and method == "GET":
            states = query.get("states")
            with self._lock:
                found = [s for s in self.slices.values()
                         if (not q.get("name") or (s["name"] == q["name"] if q.get("exact_match") == "True" else q["name"] in s["name"]))
                         and (not states or s["state"] in states)]
            return self._data([self._slice_dto(s, "NONE") for s in found], "slices")
        if len(seg) == 2 and seg[0] == "slices" and method == "GET":
            s = self._slice(seg[1])
            return self._data([self._slice_dto(s, q.get("graph_format", "GRAPHML"))], "slice_details")
        if seg == ["slivers"] and method == "GET":
            s = self._slice(q.get("slice_id", ""))
            return self._data(self._slivers(s), "slivers")
        if len(seg) == 3 and seg[:2] == ["slices", "modify"] and method == "PUT":
            return self._modify(self._slice(seg[2]), body.decode())
        if len(seg) == 4 and seg[:2] == ["slices", "modify"] and seg[3] == "accept" and method == "POST":
            s = self._slice(seg[2])
            with self._lock:
                s["state"] = "StableOK"
            return self._data([self._slice_dto(s, "GRAPHML")], "slice_details")
        if len(seg) == 3 and seg[:2] == ["slices", "renew"] and method == "POST":
            return self._renew(self._slice(seg[2]), q.get("lease_end_time", ""))
        if len(seg) == 3 and seg[:2] == ["slices", "delete"] and method == "DELETE":
            return self._delete(self._slice(seg[2]))
        raise Refused(404, f"no such orchestrator call: {method} /{'/'.join(seg)}")

    @staticmethod
    def _data(items: list, kind: str) -> dict[str, Any]:
        """An orchestrator's answer of ``items`` (components/schemas/slices, slice_details,
        slivers): ``type`` as slices_controller.py sets it ("slices", "slice_details", "slivers")."""
        return {"data": items, "size": len(items), "status": 200, "type": kind}

    @staticmethod
    def _no_content(details: str) -> dict[str, Any]:
        """The orchestrator's answer to renew and delete (components/schemas/status_200_ok_no_content;
        slices_controller.slices_renew_slice_id_post, slices_delete_slice_id_delete)."""
        return {"data": [{"message": "No Content", "details": details}], "size": 1, "status": 200, "type": "no_content"}

    def _slice(self, slice_id: str) -> dict[str, Any]:
        with self._lock:
            s = self.slices.get(slice_id)
        if s is None:
            raise Refused(404, f"Slice# {slice_id} not found")
        return s

    def _slice_dto(self, s: dict[str, Any], graph_format: str) -> dict[str, Any]:
        with self._lock:
            dto = {"slice_id": s["id"], "name": s["name"], "state": s["state"],
                   "lease_start_time": s["start"].strftime(TIME_FORMAT), "lease_end_time": s["end"].strftime(TIME_FORMAT),
                   "project_id": self.project["uuid"], "project_name": self.project["name"], "graph_id": s["graph_id"],
                   "owner_user_id": self.user["sub"], "owner_email": self.user["email"]}
            if graph_format != "NONE":
                dto["model"] = s["topology"].serialize()
        return dto

    def _slivers(self, s: dict[str, Any]) -> list[dict[str, Any]]:
        """The slice's reservations as the orchestrator lists them (components/schemas/sliver;
        ResponseBuilder.get_reservation_summary): ``sliver`` is FIM's dictionary of the sliver
        (ABCPropertyGraph.sliver_to_dict), ``sliver_type`` its class, ``notice`` only when the
        reservation has one (a failure's message), lease times in the orchestrator's format."""
        from fim.graph.abc_property_graph import ABCPropertyGraph

        out = []
        with self._lock:
            topo = s["topology"]
            for obj in list(topo.nodes.values()) + list(topo.network_services.values()):
                info = obj.get_property("reservation_info")
                sliver = obj.get_sliver()
                one = {"sliver_id": info.reservation_id, "slice_id": s["id"], "graph_node_id": obj.node_id,
                       "sliver_type": type(sliver).__name__, "sliver": ABCPropertyGraph.sliver_to_dict(sliver),
                       "state": info.reservation_state, "lease_start_time": s["start"].strftime(TIME_FORMAT),
                       "lease_end_time": s["end"].strftime(TIME_FORMAT), "owner_user_id": self.user["sub"],
                       "owner_email": self.user["email"]}
                if info.error_message:
                    one["notice"] = info.error_message
                out.append(one)
        return out

    def _create(self, q, req, claims):
        from fim.slivers.capacities_labels import ReservationInfo
        from fim.user.topology import ExperimentTopology

        name = q.get("name") or ""
        with self._lock:
            if any(s["name"] == name and s["state"] not in ("Dead", "Closing") for s in self.slices.values()):
                raise Refused(400, f"Slice {name} already exists")
        # The orchestrator keeps each slice's model under a graph id of its own (the slice's
        # graph_id, ResponseBuilder.get_slice_summary): FIM's graph store is keyed by graph id, so
        # two slices from one submitted graph would otherwise be one graph.
        graph_id = str(uuid.uuid4())
        topo = ExperimentTopology()
        try:
            topo.load(graph_string=req.get("graph_model") or "", new_graph_id=graph_id)
        except Exception as exc:   # FIM raises bare exceptions for a bad graph
            raise Refused(400, f"Unable to load graph: {exc}") from None
        keys = req.get("ssh_keys") or []
        if not keys:
            raise Refused(400, "ssh_keys must be specified")
        hours = float(q.get("lifetime") or 24)
        if hours > MAX_LEASE_HOURS:
            raise Refused(400, f"Requested lease of {hours} hours exceeds the maximum of {MAX_LEASE_HOURS} hours")
        start = _now().replace(microsecond=0)
        end = dt.datetime.strptime(q["lease_end_time"], TIME_FORMAT) if q.get("lease_end_time") else start + dt.timedelta(hours=hours)
        slice_id = str(uuid.uuid4())
        for obj in list(topo.nodes.values()) + list(topo.network_services.values()):
            obj.set_properties(reservation_info=ReservationInfo(reservation_id=str(uuid.uuid4()), reservation_state="Ticketed"))
        s = {"id": slice_id, "name": name, "state": "Configuring", "start": start, "end": end, "topology": topo,
             "graph_id": graph_id, "keys": keys}
        with self._lock:
            self.slices[slice_id] = s
        self._build = threading.Thread(target=self._provision, args=(s,), daemon=True)
        self._build.start()
        return self._data(self._slivers(s), "slivers")

    def _provision(self, s: dict[str, Any]) -> None:
        """Build the nodes, then write what the orchestrator reports once slivers are active."""
        from fim.slivers.capacities_labels import Labels, ReservationInfo

        from netrepro.sites.fabric.site import segment_keys
        from netrepro.sites.instageni.rspec import interface_id
        from netrepro.experiment.spec import load_spec

        topo = s["topology"]
        failed = self.faults.get("fail_node")
        if self.faults.get("never_ready"):
            return
        nodes, keys, error = {}, {}, None
        try:
            if self.builder is not None:
                nodes = self.builder.build(list(s["keys"]), user=NODE_USER)
                keys = segment_keys(load_spec(self.experiment))
        except Exception as exc:   # the node builder's failure becomes the slivers'
            error = self.build_error = str(exc)
        with self._lock:
            ns_of = {itf.name: ns_name for ns_name, ns in topo.network_services.items() for itf in ns.interface_list}
            ok = True
            for k, (name, node) in enumerate(topo.nodes.items(), 1):
                info = node.get_property("reservation_info")
                bad = error or (failed[1] if failed and failed[0] == name else None)
                if bad or name not in nodes:
                    ok = False
                    node.set_properties(reservation_info=ReservationInfo(
                        reservation_id=info.reservation_id, reservation_state="Failed",
                        error_message=bad or "no node behind the stand-in"))
                    continue
                node.set_properties(management_ip=nodes[name]["host"],
                                    reservation_info=ReservationInfo(reservation_id=info.reservation_id, reservation_state="Active"),
                                    label_allocations=Labels(instance=f"instance-{next(self._ids):08x}"))
                for comp in node.components.values():
                    for itf in comp.interface_list:
                        peer = [p.name for p in (itf.get_peers() or [])]
                        network = ns_of.get(peer[0]) if peer else None
                        key = keys.get((name, network))
                        mac = nodes[name]["macs"].get(interface_id(name, key)) if key else None
                        if mac:
                            itf.set_properties(label_allocations=Labels(mac=mac.upper()))
            for ns in topo.network_services.values():
                info = ns.get_property("reservation_info")
                ns.set_properties(reservation_info=ReservationInfo(reservation_id=info.reservation_id,
                                                                   reservation_state="Active" if ok else "Closed"))
            s["state"] = "StableOK" if ok else "StableError"

    def _modify(self, s: dict[str, Any], graph: str):
        """fablib saves its per-node data (user_data) with a modify: keep the slivers' state,
        take the submitted graph's user data."""
        from fim.user.topology import ExperimentTopology

        new = ExperimentTopology()
        try:   # under a graph id of its own, not the slice's (FIM's graph store is keyed by graph id)
            new.load(graph_string=graph, new_graph_id=str(uuid.uuid4()))
        except Exception as exc:   # FIM raises bare exceptions for a bad graph
            raise Refused(400, f"Unable to load graph: {exc}") from None
        with self._lock:
            if set(new.nodes) != set(s["topology"].nodes):
                raise Refused(400, "adding or removing nodes is not supported by this stand-in")
            for name, node in new.nodes.items():
                data = node.get_property("user_data")
                if data is not None:
                    s["topology"].nodes[name].set_properties(user_data=data)
            s["state"] = "ModifyOK"
        return self._data(self._slivers(s), "slivers")

    def _renew(self, s: dict[str, Any], when: str):
        try:
            end = dt.datetime.strptime(when, TIME_FORMAT)
        except ValueError:
            raise Refused(400, f"Lease End Time {when} should be in format: {TIME_FORMAT}") from None
        longest = float(self.faults.get("max_lease_hours", MAX_LEASE_HOURS))
        if end > _now() + dt.timedelta(hours=longest):
            raise Refused(400, f"Requested new lease end time {when} exceeds the maximum of {longest:g} hours from now "
                               f"for project {self.project['name']}")
        with self._lock:
            if s["state"] in ("Dead", "Closing"):
                raise Refused(400, f"Slice {s['name']} is {s['state']}")
            s["end"] = end
        return self._no_content(f"Slice '{s['id']}' has been successfully renewed")

    def _delete(self, s: dict[str, Any]):
        from fim.slivers.capacities_labels import ReservationInfo

        if self._build is not None:
            self._build.join(600)
        with self._lock:
            s["state"] = "Closing"
        if self.builder is not None:
            self.builder.teardown()
        with self._lock:
            for obj in list(s["topology"].nodes.values()) + list(s["topology"].network_services.values()):
                info = obj.get_property("reservation_info")
                obj.set_properties(reservation_info=ReservationInfo(reservation_id=info.reservation_id, reservation_state="Closed"))
            s["state"] = "Dead"
        return self._no_content(f"Slice '{s['id']}' has been successfully deleted")
