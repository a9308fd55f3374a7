"""The instageni site: VMs on an InstaGENI rack, CloudLab, Emulab or POWDER via GENI AM API v3.

What happens, and where each part lives:

- request: ``netrepro/rspec.py`` builds the RSpec from the topology (``plan()`` prints it);
- credentials: a CloudLab/Emulab portal account, read from a geni-lib context file or from
  environment variables (:func:`load_credentials`); missing pieces fail at once, naming them;
- service calls: :class:`GeniClient`, a thin XML-RPC client over HTTPS with the user's
  certificate: the slice authority (Federation API v2, geni-lib's ``emulab-ch2`` framework)
  for the slice and its credential, the aggregate (AM API v3) for Allocate, Provision,
  PerformOperationalAction, Status, Describe, Renew and Delete;
- waiting: :func:`poll_until` drives a status function with a timeout and progress lines;
  :func:`summarize_status` reads AM API v3 ``Status`` results;
- logins: ``netrepro/manifest.py`` turns the manifest into NodeLogins.

Aggregates are configuration: ``netrepro/aggregates.yml`` (and ``$NETREPRO_AGGREGATES``).
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import ssl
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import yaml

from netrepro.sites.base import NodeLogin, Site, SiteError

AGGREGATES_FILE = Path(__file__).resolve().parent.parent / "aggregates.yml"
#: geni-lib's default context file (written by its ``build-context`` / ``context-from-bundle``).
DEFAULT_CONTEXT = "~/.bssw/geni/context.json"
#: The Emulab/CloudLab portal's member and slice authorities (Federation API v2; geni-lib
#: 0.9.9.4 geni/aggregate/frameworks.py, class EmulabCH2).
DEFAULT_MA = "https://www.emulab.net:12369/protogeni/xmlrpc/geni-ma"
DEFAULT_SA = "https://www.emulab.net:12369/protogeni/xmlrpc/geni-sa/2"
DATE_FMT = "%Y-%m-%dT%H:%M:%SZ"

#: Environment variables read by :func:`load_credentials` (documented in the README).
ENV_VARS = {
    "NETREPRO_GENI_CONTEXT": f"geni-lib context JSON (default {DEFAULT_CONTEXT})",
    "NETREPRO_GENI_CERT": "PEM from the portal's 'Download Credentials' (certificate + key)",
    "NETREPRO_GENI_KEY": "private key PEM, if not inside the certificate file",
    "NETREPRO_GENI_KEY_PASSPHRASE": "passphrase of that key (asked on a terminal if unset)",
    "NETREPRO_GENI_PROJECT": "portal project the slice belongs to",
    "NETREPRO_GENI_USER": "portal user name (login user on the nodes)",
    "NETREPRO_GENI_PUBKEY": "SSH public key installed on the nodes (default ~/.ssh/id_ed25519.pub or id_rsa.pub)",
    "NETREPRO_GENI_SSH_KEY": "matching SSH private key used by Ansible (default: the .pub path without .pub)",
}

SLICE_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,18}$")


# --- configuration ----------------------------------------------------------------------
def load_aggregates(extra: Path | str | None = None) -> dict[str, Any]:
    """The aggregates configuration: ``{'default': name, 'aggregates': {name: {urn, url, kind}}}``.

    Reads ``netrepro/aggregates.yml``, then ``extra`` (or ``$NETREPRO_AGGREGATES``) whose
    entries override or add to it.
    Raises SiteError (file, field, expected) for a malformed entry.
    """
    files = [AGGREGATES_FILE]
    extra = extra or os.environ.get("NETREPRO_AGGREGATES")
    if extra:
        files.append(Path(extra).expanduser())
    conf: dict[str, Any] = {"default": None, "aggregates": {}}
    for f in files:
        if not f.is_file():
            raise SiteError(f"{f}: (file): no such aggregates file; expected YAML with an 'aggregates' mapping")
        data = yaml.safe_load(f.read_text()) or {}
        if not isinstance(data, dict) or not isinstance(data.get("aggregates", {}), dict):
            raise SiteError(f"{f}: aggregates: expected a mapping name -> {{urn, url}}")
        for name, agg in data.get("aggregates", {}).items():
            if not isinstance(agg, dict):
                raise SiteError(f"{f}: aggregates.{name}: expected a mapping with urn and url")
            urn, url = agg.get("urn", ""), agg.get("url", "")
            if not re.match(r"^urn:publicid:IDN\+[^+]+\+authority\+(cm|am)$", str(urn)):
                raise SiteError(f"{f}: aggregates.{name}.urn: expected urn:publicid:IDN+<domain>+authority+cm, got {urn!r}")
            if not str(url).startswith("https://"):
                raise SiteError(f"{f}: aggregates.{name}.url: expected an https:// AM API v3 URL, got {url!r}")
            conf["aggregates"][name] = {"urn": urn, "url": url, "kind": agg.get("kind", "")}
        if data.get("default"):
            conf["default"] = data["default"]
    return conf


def resolve_aggregate(name: str | None, conf: dict[str, Any] | None = None) -> tuple[str, dict[str, str]]:
    """(name, {urn, url, kind}) of aggregate ``name`` (None: the configured default).

    Raises SiteError listing the known names when ``name`` is unknown.
    """
    conf = conf or load_aggregates()
    name = name or conf["default"]
    if name not in conf["aggregates"]:
        raise SiteError(f"AGGREGATE={name}: unknown aggregate; expected one of: {', '.join(conf['aggregates'])} "
                        f"(or add it to {AGGREGATES_FILE} / $NETREPRO_AGGREGATES)")
    return name, conf["aggregates"][name]


@dataclass
class GeniCredentials:
    """A portal account: certificate/key (PEM paths), user name and URN, project, SSH keys."""

    cert: str
    key: str
    user: str
    user_urn: str
    project: str
    pubkey: str
    ssh_key: str | None
    passphrase: str | None = None


def load_credentials(env: dict[str, str] | None = None) -> GeniCredentials:
    """Read the account from the geni-lib context file and/or ``NETREPRO_GENI_*`` variables.

    Order: the context JSON (``$NETREPRO_GENI_CONTEXT`` or ~/.bssw/geni/context.json; keys
    ``cert-path``, ``key-path``, ``user-name``, ``user-urn``, ``user-pubkeypath``,
    ``project``), each then overridden by its environment variable. No network.

    Raises:
        SiteError: one line naming every missing piece and where to set it.
    """
    env = dict(os.environ if env is None else env)
    ctx_path = Path(env.get("NETREPRO_GENI_CONTEXT") or DEFAULT_CONTEXT).expanduser()
    ctx: dict[str, Any] = {}
    if ctx_path.is_file():
        try:
            ctx = json.loads(ctx_path.read_text())
        except json.JSONDecodeError as exc:
            raise SiteError(f"{ctx_path}: line {exc.lineno}: not valid JSON; expected a geni-lib context file") from None
    cert = env.get("NETREPRO_GENI_CERT") or ctx.get("cert-path")
    key = env.get("NETREPRO_GENI_KEY") or ctx.get("key-path") or cert
    user = env.get("NETREPRO_GENI_USER") or ctx.get("user-name")
    project = env.get("NETREPRO_GENI_PROJECT") or ctx.get("project")
    pubkey = env.get("NETREPRO_GENI_PUBKEY") or ctx.get("user-pubkeypath")
    if not pubkey:
        for cand in ("~/.ssh/id_ed25519.pub", "~/.ssh/id_rsa.pub"):
            if Path(cand).expanduser().is_file():
                pubkey = cand
                break
    missing = []
    if not cert or not Path(cert).expanduser().is_file():
        missing.append(f"certificate (NETREPRO_GENI_CERT, or cert-path in {ctx_path}){': ' + cert + ' not found' if cert else ''}")
    if not user:
        missing.append(f"user name (NETREPRO_GENI_USER, or user-name in {ctx_path})")
    if not project:
        missing.append(f"project (NETREPRO_GENI_PROJECT, or project in {ctx_path})")
    if not pubkey or not Path(pubkey).expanduser().is_file():
        missing.append(f"SSH public key (NETREPRO_GENI_PUBKEY, or user-pubkeypath in {ctx_path})")
    if missing:
        raise SiteError("site instageni: no GENI credentials: missing " + "; ".join(missing)
                        + ". Download them from your CloudLab/Emulab portal (Download Credentials) and see README, section instageni")
    ssh_key = env.get("NETREPRO_GENI_SSH_KEY")
    if not ssh_key and str(pubkey).endswith(".pub"):
        ssh_key = str(pubkey)[:-4]
    return GeniCredentials(
        cert=str(Path(cert).expanduser()), key=str(Path(key).expanduser()), user=user,
        user_urn=ctx.get("user-urn") or f"urn:publicid:IDN+emulab.net+user+{user}",
        project=project, pubkey=str(Path(pubkey).expanduser()),
        ssh_key=str(Path(ssh_key).expanduser()) if ssh_key else None,
        passphrase=env.get("NETREPRO_GENI_KEY_PASSPHRASE"))


# --- waiting ---------------------------------------------------------------------------
def summarize_status(value: dict[str, Any]) -> tuple[bool, str | None, str]:
    """Read an AM API v3 ``Status`` value: ``{'geni_urn', 'geni_slivers': [{'geni_sliver_urn',
    'geni_allocation_status', 'geni_operational_status', 'geni_error'?}]}``.

    Returns (every sliver ready, failure message or None, one-line summary such as
    ``3/7 ready, 4 geni_configuring``).
    """
    slivers = value.get("geni_slivers", []) or []
    counts: dict[str, int] = {}
    failed = []
    for s in slivers:
        op = s.get("geni_operational_status", "unknown")
        counts[op] = counts.get(op, 0) + 1
        if op == "geni_failed":
            failed.append(f"{s.get('geni_sliver_urn', '?')}: {s.get('geni_error') or 'failed'}")
    ready = counts.get("geni_ready", 0)
    others = ", ".join(f"{n} {st}" for st, n in sorted(counts.items()) if st != "geni_ready")
    summary = f"{ready}/{len(slivers)} ready" + (f", {others}" if others else "")
    return (bool(slivers) and ready == len(slivers), "; ".join(failed) or None, summary)


def poll_until(status_fn: Callable[[], tuple[bool, str | None, str]], timeout_s: float,
               interval_s: float = 20.0, what: str = "slice",
               progress: Callable[[str], None] | None = None,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep) -> str:
    """Call ``status_fn`` every ``interval_s`` seconds until it reports done.

    ``status_fn`` returns (done, failure message or None, summary). A progress line
    ``<what>: <summary> (<elapsed> s)`` is printed when the summary changes.
    Returns the last summary.

    Raises:
        SiteError: a failure was reported, or ``timeout_s`` seconds passed (message carries
            the last summary).
    """
    progress = progress or (lambda line: print(line, file=sys.stderr, flush=True))
    start = clock()
    last = None
    while True:
        done, failure, summary = status_fn()
        elapsed = clock() - start
        if summary != last:
            progress(f"{what}: {summary} ({elapsed:.0f} s)")
            last = summary
        if failure:
            raise SiteError(f"{what}: failed: {failure}")
        if done:
            return summary
        if elapsed + interval_s > timeout_s:
            raise SiteError(f"{what}: not ready after {timeout_s:.0f} s ({summary}); "
                            "wait longer with `make wait` or release with `make down`")
        sleep(interval_s)


# --- the thin service layer ---------------------------------------------------------------
class GeniError(SiteError):
    """An XML-RPC call returned a non-zero GENI code. ``code`` holds it (12 = not found)."""

    def __init__(self, method: str, code: int, output: str):
        self.code = code
        super().__init__(f"{method}: GENI error {code}: {output}")


def _cred_list(*creds: str) -> list[dict[str, str]]:
    return [{"geni_type": "geni_sfa", "geni_version": "3", "geni_value": c} for c in creds if c]


class GeniClient:
    """XML-RPC over HTTPS with the user's certificate; one method per remote call.

    Not exercised offline (the services are unreachable here); every method is a single
    call whose arguments follow AM API v3 and the Federation API v2 (geni-lib minigcf).
    """

    def __init__(self, creds: GeniCredentials, ma_url: str = DEFAULT_MA, sa_url: str = DEFAULT_SA):
        self.creds, self.ma_url, self.sa_url = creds, ma_url, sa_url
        self._ucred: str | None = None

    def _proxy(self, url: str):
        import getpass
        import xmlrpc.client

        ctx = ssl.create_default_context()
        # Emulab-family servers present certificates from their own CA, not a public one.
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        pw = self.creds.passphrase
        if pw is None and sys.stdin.isatty():
            pw = getpass.getpass(f"Passphrase for {self.creds.key}: ")
            self.creds.passphrase = pw
        try:
            ctx.load_cert_chain(self.creds.cert, self.creds.key, password=pw or None)
        except ssl.SSLError as exc:
            raise SiteError(f"{self.creds.key}: cannot load certificate/key ({exc.reason}); "
                            "expected the portal PEM and its passphrase in NETREPRO_GENI_KEY_PASSPHRASE") from None
        return xmlrpc.client.ServerProxy(url, context=ctx, allow_none=True)

    def _call(self, url: str, method: str, *args):
        res = getattr(self._proxy(url), method)(*args)
        code = res.get("code")
        code = code.get("geni_code", 0) if isinstance(code, dict) else code
        if code:
            raise GeniError(method, int(code), str(res.get("output", "")))
        return res.get("value")

    def user_credential(self) -> str:
        if self._ucred is None:
            self._ucred = self._call(self.ma_url, "get_credentials", self.creds.user_urn, [], {})[0]["geni_value"]
        return self._ucred

    def slice_credential(self, slice_urn: str) -> str:
        return self._call(self.sa_url, "get_credentials", slice_urn, _cred_list(self.user_credential()), {})[0]["geni_value"]

    def create_slice(self, name: str, project_urn: str, expires: dt.datetime) -> None:
        fields = {"SLICE_NAME": name, "SLICE_PROJECT_URN": project_urn,
                  "SLICE_EXPIRATION": expires.strftime(DATE_FMT), "SLICE_DESCRIPTION": "netrepro"}
        self._call(self.sa_url, "create", "SLICE", _cred_list(self.user_credential()), {"fields": fields})

    def renew_slice(self, slice_urn: str, expires: dt.datetime) -> None:
        self._call(self.sa_url, "update", "SLICE", slice_urn,
                   _cred_list(self.slice_credential(slice_urn), self.user_credential()),
                   {"fields": {"SLICE_EXPIRATION": expires.strftime(DATE_FMT)}})

    def am(self, am_url: str, method: str, slice_urn: str, *args):
        """AM API v3 call ``method`` on ``slice_urn`` with the slice credential."""
        cred = _cred_list(self.slice_credential(slice_urn))
        if method == "Allocate":
            return self._call(am_url, method, slice_urn, cred, *args)
        return self._call(am_url, method, [slice_urn], cred, *args)


# --- the site ----------------------------------------------------------------------------
def default_slice_name(spec_name: str, user: str) -> str:
    """A short slice name (Emulab: at most 19 characters, [a-z0-9-]) from spec and user."""
    base = re.sub(r"[^a-z0-9]", "", spec_name.lower())[:10] or "exp"
    return f"nr-{base}-{re.sub(r'[^a-z0-9]', '', user.lower())[:5] or 'u'}"[:19]


class InstaGENISite(Site):
    """VMs from one GENI AM API v3 aggregate (``options['aggregate']``, ``AGGREGATE=``).

    Options: ``aggregate``, ``image``, ``vm_type``, ``routable_control_ip``, ``vm_cores``,
    ``vm_ram_mb`` (see :class:`netrepro.rspec.RSpecOptions`), ``slice_name``, ``hours``
    (initial lease, default 6), ``user`` (login user in manifests; default: the portal user).
    ``client`` may hold a ready :class:`GeniClient`-like object (tests).
    """

    name = "instageni"

    def _rspec_opts(self, agg_urn: str | None):
        from netrepro.rspec import RSpecOptions

        o = dict(self.options)
        o["component_manager_id"] = agg_urn
        return RSpecOptions.from_options(o)

    def request_xml(self) -> str:
        """The request RSpec sent to the chosen aggregate (nodes bound to it)."""
        from netrepro.rspec import request_xml

        _, agg = resolve_aggregate(self.options.get("aggregate"))
        return request_xml(self.spec, self._rspec_opts(agg["urn"]))

    def plan(self) -> str:
        """The request RSpec, preceded (as XML comments, so the output stays a valid
        request file) by the aggregate and each node's addresses."""
        name, agg = resolve_aggregate(self.options.get("aggregate"))
        lines = [f"<!-- site instageni: aggregate {name} ({agg['urn']}), AM API v3 {agg['url']} -->"]
        for node, nd in self.spec.nodes.items():
            addrs = ", ".join(f"{i['network']}={i['address']}/{self.spec.prefixlen(i['network'])}" for i in nd["interfaces"])
            lines.append(f"<!--   {node:8s} {addrs} -->")
        decl, _, body = self.request_xml().partition("\n")
        return decl + "\n" + "\n".join(lines) + "\n" + body

    def _client(self, creds: GeniCredentials):
        return self.options.get("client") or GeniClient(creds)

    def _hours(self) -> float:
        try:
            hours = float(self.options.get("hours", 6))
        except (TypeError, ValueError):
            hours = -1
        if hours <= 0:
            raise SiteError(f"HOURS={self.options.get('hours')}: expected a positive number of hours")
        return hours

    def reserve(self) -> None:
        """Create the slice, Allocate + Provision + start the request on the aggregate.

        With option ``manifest`` (MANIFEST=, a manifest saved from a web portal after
        reserving there), nothing is requested: the manifest's logins for option ``user``
        are adopted, and ``release`` later only forgets them (release the slice in the portal).
        Idempotent: with a slice already in the state it does nothing.
        Raises SiteError at once when credentials are missing (before any network use).
        """
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
        slice_name = self.options.get("slice_name") or default_slice_name(self.spec.name, creds.user)
        if not SLICE_NAME_RE.match(slice_name):
            raise SiteError(f"SLICE_NAME={slice_name}: expected 1-19 characters [a-z0-9-] starting with a letter")
        slice_urn = f"urn:publicid:IDN+emulab.net:{creds.project}+slice+{slice_name}"
        expires = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) + dt.timedelta(hours=self._hours())
        client = self._client(creds)
        rspec = self.request_xml()
        try:
            client.create_slice(slice_name, f"urn:publicid:IDN+emulab.net+project+{creds.project}", expires)
        except GeniError as exc:
            if "exist" not in str(exc).lower():
                raise
        self.save_state({"slice_name": slice_name, "slice_urn": slice_urn, "aggregate": name,
                         "aggregate_url": agg["url"], "aggregate_urn": agg["urn"],
                         "expires": expires.strftime(DATE_FMT), "user": self.options.get("user") or creds.user})
        end = {"geni_end_time": expires.strftime(DATE_FMT)}
        client.am(agg["url"], "Allocate", slice_urn, rspec, end)
        users = [{"urn": creds.user_urn, "keys": [Path(creds.pubkey).read_text().strip()]}]
        client.am(agg["url"], "Provision", slice_urn, {"geni_users": users, **end})
        try:
            client.am(agg["url"], "PerformOperationalAction", slice_urn, "geni_start", {})
        except GeniError as exc:   # ProtoGENI starts provisioned slivers by itself
            print(f"instageni: geni_start: {exc} (continuing)", file=sys.stderr)

    def wait_ready(self, timeout_s: float = 1800, interval_s: float = 20) -> None:
        """Poll AM API v3 Status until every sliver is geni_ready, then read the manifest
        (Describe), save it as ``state_dir/manifest.xml`` and the logins in the state.
        An adopted manifest (reserved through a portal) is taken as ready."""
        if self.load_state().get("adopted"):
            return
        state = self._need_state()
        creds = load_credentials(self.options.get("env"))
        client = self._client(creds)

        def status():
            return summarize_status(client.am(state["aggregate_url"], "Status", state["slice_urn"], {}))

        poll_until(status, timeout_s, interval_s, what=f"slice {state['slice_name']}")
        desc = client.am(state["aggregate_url"], "Describe", state["slice_urn"], {"geni_rspec_version": {"type": "GENI", "version": "3"}})
        manifest = self.state_dir / "manifest.xml"
        manifest.write_text(desc["geni_rspec"] if isinstance(desc, dict) else str(desc))
        self.adopt_manifest(manifest, state.get("user") or creds.user, creds.ssh_key)

    def adopt_manifest(self, manifest: Path | str, user: str | None, key_file: str | None = None) -> dict[str, NodeLogin]:
        """Parse ``manifest`` into logins (see netrepro.manifest) and save them in the state."""
        from netrepro.manifest import logins_from_manifest

        logins = logins_from_manifest(self.spec, manifest, user, key_file)
        self.save_logins(logins, manifest=str(manifest))
        return logins

    def _need_state(self) -> dict[str, Any]:
        state = self.load_state()
        if not state.get("slice_urn"):
            raise SiteError(f"site instageni: nothing reserved for {self.spec.name} (state {self.state_file}); run `make up` first")
        return state

    def renew(self, hours: float) -> None:
        """Extend slice and slivers to now + ``hours`` (idempotent: same target, same result)."""
        state = self._need_state()
        creds = load_credentials(self.options.get("env"))
        client = self._client(creds)
        expires = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) + dt.timedelta(hours=float(hours))
        client.renew_slice(state["slice_urn"], expires)
        client.am(state["aggregate_url"], "Renew", state["slice_urn"], expires.strftime(DATE_FMT), {})
        state["expires"] = expires.strftime(DATE_FMT)
        self.save_state(state)

    def release(self) -> None:
        """Delete the slivers (AM API v3 Delete) and forget the reservation. Idempotent:
        with nothing reserved, or slivers already gone (GENI code 12), it succeeds."""
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
        client = self._client(creds)
        try:
            client.am(state["aggregate_url"], "Delete", state["slice_urn"], {})
        except GeniError as exc:
            if exc.code != 12:   # SEARCHFAILED: nothing there any more
                raise
        self.state_file.unlink(missing_ok=True)
