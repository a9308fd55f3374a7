"""The instageni site: VMs on an InstaGENI rack, CloudLab, Emulab or POWDER via GENI AM API v3.

What happens, and where each part lives:

- request: ``netrepro/sites/instageni/rspec.py`` builds the RSpec from the topology (``plan()`` prints it);
- credentials: a CloudLab/Emulab portal account, read from a geni-lib context file or from
  environment variables (:func:`load_credentials`); missing pieces fail at once, naming them;
- service calls: :class:`GeniClient`, a thin XML-RPC client over HTTPS with the user's
  certificate: the slice authority (Federation API v2, geni-lib's ``emulab-ch2`` framework)
  for the slice and its credential, the aggregate (AM API v3) for Allocate, Provision,
  PerformOperationalAction, Status, Describe, Renew and Delete;
- waiting: :func:`poll_until` drives a status function with a timeout and progress lines;
  :func:`summarize_status` reads AM API v3 ``Status`` results;
- logins: ``netrepro/sites/instageni/manifest.py`` turns the manifest into NodeLogins.

Aggregates are configuration: ``netrepro/sites/instageni/aggregates.yml`` (and ``$NETREPRO_AGGREGATES``),
including how their TLS certificates are verified (:class:`TLSPolicy`, :func:`tls_context`):
against a CA bundle the configuration names, or the system trust store; never silently off.
Everything that can be checked offline (configuration, credential files, the key's
passphrase, the CA bundle) is checked by :meth:`InstaGENISite.preflight` before any request.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import ssl
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from netrepro.sites.base import (PRIVATE_KEY_RE, NodeLogin, Option, Site, SiteError, as_bool, boolean, existing_file, interfaces_text,
                                 login_user_problem, matches, positive_int, positive_number, private_key_problem,
                                 public_key_problem, read_json_object, read_small_text)
from netrepro.sites.instageni import manifest as geni_manifest
from netrepro.sites.instageni import rspec as geni_rspec

AGGREGATES_FILE = Path(__file__).resolve().parent / "aggregates.yml"
#: geni-lib's default context file (written by its ``build-context`` / ``context-from-bundle``).
DEFAULT_CONTEXT = "~/.bssw/geni/context.json"
#: The Emulab/CloudLab portal's member and slice authorities (Federation API v2; geni-lib
#: 0.9.9.4 geni/aggregate/frameworks.py, class EmulabCH2).
DEFAULT_MA = "https://www.emulab.net:12369/protogeni/xmlrpc/geni-ma"
DEFAULT_SA = "https://www.emulab.net:12369/protogeni/xmlrpc/geni-sa/2"
DATE_FMT = "%Y-%m-%dT%H:%M:%SZ"
#: The initial lease, hours (option ``hours``): a full pie-vs-red run with REPEAT=5 takes about
#: two hours; CloudLab grants a few days without asking an administrator.
DEFAULT_HOURS = 6
#: How long the slivers may take to become ready, s (option ``ready_timeout_s``); then they are
#: deleted. Generous: how long a cluster takes to boot seven VMs has not been measured.
READY_TIMEOUT_S = 1800.0

#: Environment variables read by :func:`load_credentials` (listed in docs/reference.md, with
#: NETREPRO_AGGREGATES: :attr:`InstaGENISite.ENV`).
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
@dataclass(frozen=True)
class TLSPolicy:
    """How the TLS certificate of one service (an aggregate, the slice authority) is checked.

    Attributes:
        name: the service's name in messages (``aggregate emulab``).
        verify: False only when the configuration says ``verify_tls: false`` for it.
        ca_bundle: PEM file of the CA(s) to trust (``~`` expanded), or None for the system
            trust store (``ssl.create_default_context()``).
        source: where ``ca_bundle`` / ``verify_tls`` was set (``<file>: aggregates.emulab``).
    """

    name: str
    verify: bool = True
    ca_bundle: str | None = None
    source: str = ""


#: Keys of the aggregates file, at the top level, of ``slice_authority`` and per aggregate.
TOP_KEYS = ("default", "ca_bundle", "slice_authority", "aggregates")
SA_KEYS = ("url", "ma_url", "authority", "ca_bundle", "verify_tls")
AGGREGATE_KEYS = ("urn", "url", "kind", "ca_bundle", "verify_tls")
#: The portal's domain in slice, project and user URNs (``urn:publicid:IDN+emulab.net:<project>+slice+<name>``;
#: geni-lib 0.9.9.4 frameworks.py, EmulabCH2.sliceNameToURN).
DEFAULT_AUTHORITY = "emulab.net"
_URL_RE = re.compile(r"^https://[A-Za-z0-9.-]+(:[0-9]+)?/\S*$")


def _tls_fields(f: Path, where: str, entry: dict[str, Any]) -> dict[str, Any]:
    """``ca_bundle`` (path, relative to the file's folder, or null) and ``verify_tls`` (bool)
    of one entry, checked. Returns only the keys present."""
    out: dict[str, Any] = {}
    if "ca_bundle" in entry:
        cab = entry["ca_bundle"]
        if cab is not None and (not isinstance(cab, str) or not cab.strip()):
            raise SiteError(f"{f}: {where}ca_bundle: expected a path to a PEM CA bundle, or null for the system "
                            f"trust store, got {cab!r}")
        out["ca_bundle"] = None if cab is None else str(f.parent / Path(cab).expanduser())
        out["source"] = f"{f}: {where}ca_bundle"
    if "verify_tls" in entry:
        if not isinstance(entry["verify_tls"], bool):
            raise SiteError(f"{f}: {where}verify_tls: expected true or false, got {entry['verify_tls']!r}")
        out["verify"] = entry["verify_tls"]
        out["source"] = f"{f}: {where}verify_tls"
    return out


def load_aggregates(extra: Path | str | None = None) -> dict[str, Any]:
    """The aggregates configuration::

        {'default': name, 'aggregates': {name: {urn, url, kind, tls: TLSPolicy}},
         'slice_authority': {'url', 'ma_url', 'authority'}, 'slice_authority_tls': TLSPolicy}

    ``slice_authority``: the portal's slice authority (``url``, Federation API v2), member
    authority (``ma_url``) and the domain of its URNs (``authority``), defaults
    :data:`DEFAULT_SA`, :data:`DEFAULT_MA`, :data:`DEFAULT_AUTHORITY` (the Emulab/CloudLab
    portal, which every aggregate listed accepts).

    Reads ``netrepro/sites/instageni/aggregates.yml``, then ``extra`` (or ``$NETREPRO_AGGREGATES``) whose
    entries override or add to it (strict YAML: duplicate keys refused). TLS: an aggregate's
    own ``ca_bundle``, else the top-level ``ca_bundle`` (the last file's that sets one), else
    the system trust store; ``verify_tls: false`` only where an aggregate says so.

    Raises:
        SiteError / SpecError: one line naming the file, the field and what was expected.
    """
    from netrepro.yamlfile import load_yaml_file

    files = [AGGREGATES_FILE]
    extra = extra or os.environ.get("NETREPRO_AGGREGATES")
    if extra:
        files.append(Path(extra).expanduser())
    conf: dict[str, Any] = {"default": None, "aggregates": {},
                            "slice_authority": {"url": DEFAULT_SA, "ma_url": DEFAULT_MA, "authority": DEFAULT_AUTHORITY}}
    default_tls: dict[str, Any] = {}
    sa_tls: dict[str, Any] = {}
    own_tls: dict[str, dict[str, Any]] = {}
    for f in files:
        if not f.is_file():
            raise SiteError(f"{f}: (file): no such aggregates file; expected YAML with an 'aggregates' mapping")
        data = load_yaml_file(f, "aggregates YAML") or {}
        if not isinstance(data, dict) or not isinstance(data.get("aggregates", {}), dict):
            raise SiteError(f"{f}: aggregates: expected a mapping name -> {{urn, url}}")
        unknown = [k for k in data if k not in TOP_KEYS]
        if unknown:
            raise SiteError(f"{f}: {unknown[0]}: unknown field; expected one of: {', '.join(TOP_KEYS)} "
                            "(verify_tls is set per aggregate)")
        if "ca_bundle" in data:
            default_tls = _tls_fields(f, "", data)
        if data.get("slice_authority") is not None:
            sa = data["slice_authority"]
            if not isinstance(sa, dict):
                raise SiteError(f"{f}: slice_authority: expected a mapping ({', '.join(SA_KEYS)})")
            unknown = [k for k in sa if k not in SA_KEYS]
            if unknown:
                raise SiteError(f"{f}: slice_authority.{unknown[0]}: unknown field; expected one of: {', '.join(SA_KEYS)}")
            for key in ("url", "ma_url"):
                if key in sa:
                    if not _URL_RE.match(str(sa[key])):
                        raise SiteError(f"{f}: slice_authority.{key}: expected an https:// URL of the portal's "
                                        f"{'slice' if key == 'url' else 'member'} authority, got {sa[key]!r}")
                    conf["slice_authority"][key] = sa[key]
            if "authority" in sa:
                if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]{0,99}", str(sa["authority"])):
                    raise SiteError(f"{f}: slice_authority.authority: expected the portal's domain such as emulab.net, "
                                    f"got {sa['authority']!r}")
                conf["slice_authority"]["authority"] = sa["authority"]
            sa_tls = _tls_fields(f, "slice_authority.", sa) or sa_tls
        for name, agg in data.get("aggregates", {}).items():
            if not isinstance(agg, dict):
                raise SiteError(f"{f}: aggregates.{name}: expected a mapping with urn and url")
            unknown = [k for k in agg if k not in AGGREGATE_KEYS]
            if unknown:
                raise SiteError(f"{f}: aggregates.{name}.{unknown[0]}: unknown field; expected one of: {', '.join(AGGREGATE_KEYS)}")
            urn, url = agg.get("urn", ""), agg.get("url", "")
            if not re.match(r"^urn:publicid:IDN\+[^+]+\+authority\+(cm|am)$", str(urn)):
                raise SiteError(f"{f}: aggregates.{name}.urn: expected urn:publicid:IDN+<domain>+authority+cm, got {urn!r}")
            if not _URL_RE.match(str(url)):
                raise SiteError(f"{f}: aggregates.{name}.url: expected an https:// AM API v3 URL, got {url!r}")
            conf["aggregates"][name] = {"urn": urn, "url": url, "kind": agg.get("kind", "")}
            own_tls[name] = _tls_fields(f, f"aggregates.{name}.", agg)
        if data.get("default"):
            conf["default"] = data["default"]
    for name, agg in conf["aggregates"].items():
        merged = {"ca_bundle": default_tls.get("ca_bundle"), "source": default_tls.get("source", "")}
        merged.update(own_tls.get(name, {}))
        agg["tls"] = TLSPolicy(name=f"aggregate {name}", **merged)
    merged = {"ca_bundle": default_tls.get("ca_bundle"), "source": default_tls.get("source", "")}
    merged.update(sa_tls)
    conf["slice_authority_tls"] = TLSPolicy(name="the slice authority", **merged)
    return conf


def resolve_aggregate(name: str | None, conf: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
    """(name, {urn, url, kind, tls}) of aggregate ``name`` (None: the configured default).

    Raises SiteError listing the known names when ``name`` is unknown.
    """
    conf = conf or load_aggregates()
    name = name or conf["default"]
    if name not in conf["aggregates"]:
        raise SiteError(f"AGGREGATE={name}: unknown aggregate; expected one of: {', '.join(conf['aggregates'])} "
                        f"(or add it to {AGGREGATES_FILE} / $NETREPRO_AGGREGATES)")
    return name, conf["aggregates"][name]


def _warn(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def tls_context(policy: TLSPolicy, warn: Callable[[str], None] = _warn) -> ssl.SSLContext:
    """A client TLS context for one service, following ``policy``. No network.

    Verified (the default): ``ssl.create_default_context`` (``CERT_REQUIRED``, host name
    checked) trusting ``policy.ca_bundle``, or the system trust store when None. Not verified
    only when ``policy.verify`` is False (``verify_tls: false`` in the configuration), which
    calls ``warn`` with one line naming the service and the setting.

    Raises:
        SiteError: the CA bundle is missing, unreadable or holds no certificate (one line
            naming the file and the setting that names it).
    """
    if not policy.verify:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        warn(f"netrepro: warning: the TLS certificate of {policy.name} is NOT verified ({policy.source}: false); "
             "anyone on the path could impersonate it and see your credentials")
        return ctx
    if policy.ca_bundle is None:
        return ssl.create_default_context()
    what = (f"a PEM bundle of the CA certificates to trust ({policy.source}; for Emulab-software aggregates "
            "the Emulab CA, see netrepro/sites/instageni/aggregates.yml), or ca_bundle: null for the system trust store")
    text = read_small_text(policy.ca_bundle, what, limit=8 << 20)
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise SiteError(f"{policy.ca_bundle}: (content): no certificate; expected {what}")
    try:
        return ssl.create_default_context(cafile=policy.ca_bundle)
    except ssl.SSLError as exc:
        raise SiteError(f"{policy.ca_bundle}: (content): not a usable CA bundle ({exc.reason or exc.strerror}); "
                        f"expected {what}") from None


@dataclass
class GeniCredentials:
    """A portal account: certificate/key (PEM paths), user name and URN, project, SSH keys.
    ``passphrase`` (of the key) is kept in memory only and never shown (``repr`` omits it)."""

    cert: str
    key: str
    user: str
    user_urn: str
    project: str
    pubkey: str
    ssh_key: str | None
    passphrase: str | None = field(default=None, repr=False)


#: The context file's keys that hold text (geni-lib ``build-context`` output).
CONTEXT_TEXT_KEYS = ("cert-path", "key-path", "user-name", "user-urn", "user-pubkeypath", "project")


def read_context(path: Path) -> dict[str, Any]:
    """The geni-lib context JSON at ``path`` as a dict ({} when the file does not exist).

    Raises:
        SiteError: binary junk, not JSON, not a JSON object, or a known key that is not text
            (one line naming the file and the field).
    """
    if not path.is_file():
        return {}
    what = "a geni-lib context file (a JSON object with cert-path, user-name, project, ...)"
    ctx = read_json_object(path, what)
    for key in CONTEXT_TEXT_KEYS:
        if key in ctx and not (isinstance(ctx[key], str) and ctx[key].strip()):
            raise SiteError(f"{path}: {key}: expected text, got {ctx[key]!r}")
    return ctx


#: What the certificate file must be, for messages.
PORTAL_PEM = "the PEM from the portal's Download Credentials (NETREPRO_GENI_CERT / cert-path)"


def check_certificate_dates(path: str, text: str, now: dt.datetime | None = None) -> None:
    """Check offline that the first certificate of the PEM ``text`` (file ``path``) is valid
    at ``now`` (UTC; default the present), as a portal checks it on every call: the portal's
    Download Credentials certificate is valid for a limited time (CloudLab: about a year) and
    an expired one is refused by every service. Read with the ``cryptography`` library.

    Raises:
        SiteError: not a PEM certificate, expired, or not yet valid (one line naming the file,
            the date, and where to get a new one).
    """
    from cryptography import x509

    now = now or dt.datetime.now(dt.timezone.utc)
    if "-----BEGIN CERTIFICATE-----" not in text:
        raise SiteError(f"{path}: (content): no certificate; expected {PORTAL_PEM}")
    try:
        cert = x509.load_pem_x509_certificate(text.encode())
    except ValueError:
        raise SiteError(f"{path}: (content): not a readable PEM certificate; expected {PORTAL_PEM}") from None
    if cert.not_valid_after_utc < now:
        raise SiteError(f"{path}: (certificate): expired on {cert.not_valid_after_utc:%Y-%m-%d %H:%M} UTC; expected a "
                        "current one: download your credentials again from the portal (Download Credentials), "
                        "nothing was requested")
    if cert.not_valid_before_utc > now:
        raise SiteError(f"{path}: (certificate): not valid before {cert.not_valid_before_utc:%Y-%m-%d %H:%M} UTC; "
                        "expected a current one (is this machine's clock right?), nothing was requested")


def load_client_cert(ctx: ssl.SSLContext, creds: GeniCredentials,
                     ask: Callable[[str], str] | None = None) -> None:
    """Load the portal certificate and its key into ``ctx``, checking them offline.

    The key's passphrase is ``creds.passphrase``, else asked with ``ask(prompt)`` (getpass on
    a terminal) and kept in ``creds`` for the next context; OpenSSL is never left to prompt
    by itself. The passphrase is never written or printed.

    Raises:
        SiteError: the certificate or key file is junk, the key is encrypted and no passphrase
            is available, the passphrase is wrong, or key and certificate do not match (one
            line naming the file).
    """
    what = PORTAL_PEM
    cert_text = read_small_text(creds.cert, what)
    if "-----BEGIN CERTIFICATE-----" not in cert_text:
        raise SiteError(f"{creds.cert}: (content): no certificate; expected {what}")
    check_certificate_dates(creds.cert, cert_text)
    key_what = "the private key of that certificate (in the same PEM, or NETREPRO_GENI_KEY / key-path)"
    key_text = cert_text if creds.key == creds.cert else read_small_text(creds.key, key_what)
    m = PRIVATE_KEY_RE.search(key_text)
    if not m:
        raise SiteError(f"{creds.key}: (content): no private key; expected {key_what}")
    encrypted = "ENCRYPTED" in m.group(0)
    if encrypted and creds.passphrase is None and ask is not None:
        creds.passphrase = ask(f"Passphrase for {creds.key}: ")
    if encrypted and not creds.passphrase:
        raise SiteError(f"{creds.key}: (key): protected by a passphrase; expected it in NETREPRO_GENI_KEY_PASSPHRASE "
                        "(or run on a terminal to type it)")
    pw = creds.passphrase or ""
    try:
        ctx.load_cert_chain(creds.cert, creds.key, password=lambda: pw)
    except ssl.SSLError as exc:
        if encrypted and exc.reason != "KEY_VALUES_MISMATCH":
            raise SiteError(f"{creds.key}: (key): the passphrase does not decrypt it; expected the passphrase you "
                            "chose on the portal (NETREPRO_GENI_KEY_PASSPHRASE or typed)") from None
        raise SiteError(f"{creds.cert}: (content): certificate and key do not load together ({exc.reason or 'damaged'}); "
                        f"expected {what}") from None


def load_credentials(env: dict[str, str] | None = None) -> GeniCredentials:
    """Read the account from the geni-lib context file and/or ``NETREPRO_GENI_*`` variables.

    Order: the context JSON (``$NETREPRO_GENI_CONTEXT`` or ~/.bssw/geni/context.json; keys
    ``cert-path``, ``key-path``, ``user-name``, ``user-urn``, ``user-pubkeypath``,
    ``project``), each then overridden by its environment variable. No network.

    Raises:
        SiteError: one line naming every missing piece and where to set it; or naming a
            context or public key file whose content is junk. (The certificate and key are
            checked by :func:`load_client_cert`.)
    """
    env = dict(os.environ if env is None else env)
    ctx_path = Path(env.get("NETREPRO_GENI_CONTEXT") or DEFAULT_CONTEXT).expanduser()
    ctx = read_context(ctx_path)
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
                        + ". Download them from your CloudLab/Emulab portal (Download Credentials) and see docs/sites/instageni.md")
    problem = public_key_problem(pubkey, "the SSH public key to install on the nodes (NETREPRO_GENI_PUBKEY)")
    if problem:
        raise SiteError(problem)
    ssh_key = env.get("NETREPRO_GENI_SSH_KEY")
    if ssh_key:
        problem = private_key_problem(ssh_key, "the SSH private key for the nodes (NETREPRO_GENI_SSH_KEY)")
        if problem:
            raise SiteError(problem)
    if not ssh_key and str(pubkey).endswith(".pub"):
        ssh_key = str(pubkey)[:-4]
    return GeniCredentials(
        cert=str(Path(cert).expanduser()), key=str(Path(key).expanduser()), user=user,
        user_urn=ctx.get("user-urn") or f"urn:publicid:IDN+emulab.net+user+{user}",
        project=project, pubkey=str(Path(pubkey).expanduser()),
        ssh_key=str(Path(ssh_key).expanduser()) if ssh_key else None,
        passphrase=env.get("NETREPRO_GENI_KEY_PASSPHRASE"))


# --- waiting ---------------------------------------------------------------------------
def summarize_status(value: dict[str, Any], names: dict[str, str] | None = None) -> tuple[bool, str | None, str]:
    """Read an AM API v3 ``Status`` value: ``{'geni_urn', 'geni_slivers': [{'geni_sliver_urn',
    'geni_allocation_status', 'geni_operational_status', 'geni_error'?}]}``.

    ``names`` maps a sliver URN to its node's name (from the manifest), used in the failure
    message (``node router (urn:...): <geni_error>``).

    Returns (every sliver ready, failure message or None, one-line summary such as
    ``3/7 ready, 4 geni_configuring``).
    """
    names = names or {}
    slivers = value.get("geni_slivers", []) or []
    counts: dict[str, int] = {}
    failed = []
    for s in slivers:
        op = s.get("geni_operational_status", "unknown")
        counts[op] = counts.get(op, 0) + 1
        if op == "geni_failed":
            urn = s.get("geni_sliver_urn", "?")
            who = f"node {names[urn]} ({urn})" if urn in names else urn
            failed.append(f"{who}: {s.get('geni_error') or 'failed'}")
    ready = counts.get("geni_ready", 0)
    others = ", ".join(f"{n} {st}" for st, n in sorted(counts.items()) if st != "geni_ready")
    summary = f"{ready}/{len(slivers)} ready" + (f", {others}" if others else "")
    return (bool(slivers) and ready == len(slivers), "; ".join(failed) or None, summary)


def poll_until(status_fn: Callable[[], tuple[bool, str | None, str]], timeout_s: float,
               interval_s: float = 20.0, what: str = "slice",
               progress: Callable[[str], None] | None = None,
               clock: Callable[[], float] = time.monotonic,
               sleep: Callable[[float], None] = time.sleep,
               timeout_hint: str = "wait longer with `make wait` or release with `make down`") -> str:
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
            raise SiteError(f"{what}: not ready after {timeout_s:.0f} s ({summary}); {timeout_hint}")
        sleep(interval_s)


# --- the thin service layer ---------------------------------------------------------------
#: GENI codes (AM API v3, "Error codes": geni_code): those named in messages and decisions.
GENI_CODES = {1: "BADARGS", 2: "ERROR", 3: "FORBIDDEN", 5: "SERVERERROR", 6: "TOOBIG", 7: "REFUSED",
              8: "TIMEDOUT", 11: "UNAVAILABLE", 12: "SEARCHFAILED", 14: "BUSY", 15: "EXPIRED",
              17: "ALREADYEXISTS", 24: "VLAN_UNAVAILABLE", 25: "INSUFFICIENT_BANDWIDTH"}
#: geni_code BUSY: the aggregate (or the slice) is locked by another operation; AM API v3 says
#: to try again later.
BUSY = 14
#: Seconds waited before each new try of a call answered BUSY: bounded, about a minute in all,
#: then the error is raised (geni-tools' Omni retries BUSY the same way, a few times).
BUSY_WAITS_S = (2.0, 4.0, 8.0, 16.0, 30.0)


class GeniError(SiteError):
    """An XML-RPC call returned a non-zero GENI code. ``code`` holds it (12 = not found);
    ``output`` the service's message, on one line."""

    def __init__(self, method: str, code: int, output: str):
        output = " / ".join(ln.strip() for ln in str(output).splitlines() if ln.strip())   # one line
        self.code, self.output = code, output
        name = GENI_CODES.get(code)
        super().__init__(f"{method}: GENI error {code}{' (' + name + ')' if name else ''}: {output}")


def _cred_list(*creds: str) -> list[dict[str, str]]:
    return [{"geni_type": "geni_sfa", "geni_version": "3", "geni_value": c} for c in creds if c]


class GeniClient:
    """XML-RPC over HTTPS with the user's certificate; one method per remote call.

    The TLS contexts (server verification per :func:`tls_context`, the client certificate per
    :func:`load_client_cert`) are made when the client is made, before any call, so every
    offline problem surfaces first. ``am_tls`` applies to aggregate URLs, ``sa_tls`` to the
    member and slice authorities. The calls themselves are not exercised offline (the
    services are unreachable here); their arguments follow AM API v3 and the Federation API
    v2 (geni-lib minigcf).
    """

    def __init__(self, creds: GeniCredentials, am_tls: TLSPolicy, sa_tls: TLSPolicy,
                 ma_url: str = DEFAULT_MA, sa_url: str = DEFAULT_SA,
                 ask: Callable[[str], str] | None = None, warn: Callable[[str], None] = _warn,
                 sleep: Callable[[float], None] = time.sleep):
        self.creds, self.ma_url, self.sa_url = creds, ma_url, sa_url
        self._ucred: str | None = None
        self._scred: dict[str, str] = {}
        self._warn, self._sleep = warn, sleep
        self._tls = {"am": am_tls, "sa": sa_tls}
        self._ctx = {}
        for kind, policy in self._tls.items():
            ctx = tls_context(policy, warn)
            load_client_cert(ctx, creds, ask)
            self._ctx[kind] = ctx

    def _kind(self, url: str) -> str:
        return "sa" if url in (self.ma_url, self.sa_url) else "am"

    def _proxy(self, url: str):
        import xmlrpc.client

        return xmlrpc.client.ServerProxy(url, context=self._ctx[self._kind(url)], allow_none=True)

    def _call(self, url: str, method: str, *args):
        """One XML-RPC call; its ``value``. A BUSY answer (geni_code 14) is tried again after
        each of :data:`BUSY_WAITS_S`, saying so in one line each time.

        Raises:
            SiteError: TLS refused either way (the server's certificate not trusted, or ours
                refused), the service unreachable; GeniError: a non-zero geni_code (BUSY
                after the last wait).
        """
        for wait in (*BUSY_WAITS_S, None):
            try:
                return self._call_once(url, method, *args)
            except GeniError as exc:
                if exc.code != BUSY or wait is None:
                    raise
                self._warn(f"instageni: {method} at {url}: the aggregate is busy ({exc.output or 'GENI code 14'}); "
                           f"trying again in {wait:.0f} s")
                self._sleep(wait)
        raise AssertionError("unreachable")

    def _call_once(self, url: str, method: str, *args):
        import xmlrpc.client

        policy = self._tls[self._kind(url)]
        try:
            res = getattr(self._proxy(url), method)(*args)
        except ssl.SSLCertVerificationError as exc:
            trust = policy.ca_bundle or "the system trust store"
            raise SiteError(f"{url}: TLS: certificate not trusted ({exc.verify_message}); expected one signed by a CA "
                            f"in {trust} ({policy.source or 'no ca_bundle configured'})") from None
        except ssl.SSLError as exc:   # the server ended the handshake: it refused our certificate
            raise SiteError(f"{url}: TLS: the service refused your certificate {self.creds.cert} ({exc.reason or exc}); "
                            f"expected {PORTAL_PEM}, current and issued by this portal") from None
        except (OSError, xmlrpc.client.Error) as exc:
            raise SiteError(f"{url}: {method}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
        if not isinstance(res, dict):
            raise SiteError(f"{url}: {method}: answered {type(res).__name__}; expected a GENI result "
                            "{code, value, output}")
        code = res.get("code")
        code = code.get("geni_code", 0) if isinstance(code, dict) else code
        if code:
            raise GeniError(method, int(code), str(res.get("output", "")))
        return res.get("value")

    def get_version(self, am_url: str) -> dict[str, Any]:
        """AM API v3 ``GetVersion`` (no credential): checks the aggregate's TLS and ours
        before anything is requested. Returns its value."""
        return self._call(am_url, "GetVersion", {})

    def user_credential(self) -> str:
        if self._ucred is None:
            self._ucred = self._call(self.ma_url, "get_credentials", self.creds.user_urn, [], {})[0]["geni_value"]
        return self._ucred

    def slice_credential(self, slice_urn: str) -> str:
        """The slice's credential from the slice authority, asked once per client and slice."""
        if slice_urn not in self._scred:
            self._scred[slice_urn] = self._call(self.sa_url, "get_credentials", slice_urn,
                                                _cred_list(self.user_credential()), {})[0]["geni_value"]
        return self._scred[slice_urn]

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
    OPTIONS = {
        "aggregate": Option("aggregate name in netrepro/sites/instageni/aggregates.yml or $NETREPRO_AGGREGATES, AGGREGATE",
                            lambda v, spec: _aggregate_problem(v)),
        "image": Option("disk image URN, IMAGE", matches(r"urn:publicid:IDN\+[^+\s]+\+image\+\S+",
                                                        "an image URN such as urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU22-64-STD")),
        "vm_type": Option("sliver type such as emulab-xen, VM_TYPE",
                          matches(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", "a sliver type name such as emulab-xen")),
        "routable_control_ip": Option("true or false: a public control address per VM, default true", boolean),
        "vm_cores": Option("vCPUs per Xen VM", positive_int),
        "vm_ram_mb": Option("MiB of memory per Xen VM", positive_int),
        "slice_name": Option("slice name, SLICE_NAME",
                             matches(SLICE_NAME_RE.pattern.strip("^$"), "1-19 characters [a-z0-9-] starting with a letter")),
        "hours": Option("initial lease in hours, default 6", positive_number),
        "user": Option("your login user on the nodes, GENI_USER", login_user_problem),
        "manifest": Option("a manifest saved from a portal, MANIFEST"),
        "key_file": Option("SSH private key for the nodes, SSH_KEY", existing_file),
        "ready_timeout_s": Option("seconds the slivers may take to become ready before they are deleted, default 1800",
                                  positive_number),
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
        for node, nd in self.spec.nodes.items():
            addrs = interfaces_text(self.spec, node)
            lines.append(f"<!--   {node:8s} {addrs} -->")
        decl, _, body = self.request_xml().partition("\n")
        return decl + "\n" + "\n".join(lines) + "\n" + body

    def _client(self, creds: GeniCredentials, aggregate: str, ask: Callable[[str], str] | None = None,
                warn: Callable[[str], None] = _warn, keep: bool = True):
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
        try:
            hours = float(self.options.get("hours", DEFAULT_HOURS))
        except (TypeError, ValueError):
            hours = -1
        if hours <= 0:
            raise SiteError(f"HOURS={self.options.get('hours')}: expected a positive number of hours")
        return hours

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
        counts as done) and forget the reservation.

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

    def _give_back(self, client, state: dict[str, Any]) -> bool:
        """:meth:`_delete` after a failure or interruption. Returns True when nothing is held
        any more; else prints the reason and :meth:`held`'s line, keeps the state and
        returns False."""
        try:
            self._delete(client, state)
        except SiteError as exc:
            _warn(f"instageni: {exc}")
            return False
        except KeyboardInterrupt:
            _warn(self.held() or "")
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
        slice_name = self.options.get("slice_name") or default_slice_name(self.spec.name, creds.user)
        if not SLICE_NAME_RE.match(slice_name):
            raise SiteError(f"SLICE_NAME={slice_name}: expected 1-19 characters [a-z0-9-] starting with a letter")
        authority = load_aggregates()["slice_authority"]["authority"]
        slice_urn = f"urn:publicid:IDN+{authority}:{creds.project}+slice+{slice_name}"
        expires = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) + dt.timedelta(hours=self._hours())
        client = self._client(creds, name)
        rspec = self.request_xml()
        # Before anything is requested: the aggregate's TLS and ours (GetVersion), and the
        # portal's acceptance of our certificate (the user credential).
        client.get_version(agg["url"])
        client.user_credential()
        try:
            client.create_slice(slice_name, f"urn:publicid:IDN+{authority}+project+{creds.project}", expires)
        except GeniError as exc:
            if exc.code != 17 and "exist" not in str(exc).lower():   # ALREADYEXISTS: a slice of that name, ours
                raise
        state = {"slice_name": slice_name, "slice_urn": slice_urn, "aggregate": name,
                 "aggregate_url": agg["url"], "aggregate_urn": agg["urn"],
                 "expires": expires.strftime(DATE_FMT), "user": self.options.get("user") or creds.user}
        self.save_state(state)
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
            client.am(agg["url"], "Provision", slice_urn, {"geni_users": users, **end})
            try:
                client.am(agg["url"], "PerformOperationalAction", slice_urn, "geni_start", {})
            except GeniError as exc:   # ProtoGENI starts provisioned slivers by itself
                print(f"instageni: geni_start: {exc} (continuing)", file=sys.stderr)
        except BaseException:
            self._give_back(client, state)
            raise

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
                             {"geni_rspec_version": {"type": "GENI", "version": "3"}})
            manifest = self.state_dir / "manifest.xml"
            manifest.write_text(desc["geni_rspec"] if isinstance(desc, dict) else str(desc))
            self.adopt_manifest(manifest, state.get("user") or creds.user, creds.ssh_key)
        except SiteError as exc:
            gone = self._give_back(client, state)
            raise SiteError(f"aggregate {state['aggregate']}: {exc}; "
                            + ("the slivers were deleted: nothing is reserved" if gone else "the slice is still reserved")) from None
        except BaseException:
            self._give_back(client, state)
            raise

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
        the current end; idempotent: the same target gives the same result). The slice
        authority first, then the aggregate (AM API v3 Renew), as the portal does.

        Raises:
            SiteError / GeniError: either refused (the state keeps the old expiry).
        """
        state = self._need_state()
        creds = load_credentials(self.options.get("env"))
        client = self._client(creds, state["aggregate"])
        expires = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) + dt.timedelta(hours=float(hours))
        client.renew_slice(state["slice_urn"], expires)
        client.am(state["aggregate_url"], "Renew", state["slice_urn"], expires.strftime(DATE_FMT), {})
        state["expires"] = expires.strftime(DATE_FMT)
        self.save_state(state)

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

