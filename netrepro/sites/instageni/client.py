"""The thin service layer of the instageni site: XML-RPC over HTTPS with the user's certificate.

:class:`GeniClient` calls the slice authority (Federation API v2, geni-lib's ``emulab-ch2``
framework) for the slice and its credential, and the aggregate (AM API v3) for Allocate,
Provision, PerformOperationalAction, Status, Describe, Renew and Delete.
:func:`poll_until` drives a status function with a timeout and progress lines;
:func:`summarize_status` reads AM API v3 ``Status`` results.
"""

from __future__ import annotations

import datetime as dt
import ssl
import sys
import time
from typing import Any, Callable

from netrepro.sites.base import SiteError
from netrepro.sites.instageni.aggregates import DEFAULT_MA, DEFAULT_SA, TLSPolicy, stderr_line, tls_context
from netrepro.sites.instageni.credentials import GeniCredentials, PORTAL_PEM, load_client_cert

#: Dates as the AM API v3 and the slice authority write them (UTC).
DATE_FMT = "%Y-%m-%dT%H:%M:%SZ"


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


#: The manifest RSpec format asked for: GENI RSpec 3, the version every GENI aggregate lists in
#: GetVersion's ``geni_ad_rspec_versions`` (type and version are case-insensitive strings;
#: GAPI_AM_API_V3_DETAILS, "geni_rspec_version").
RSPEC_VERSION = {"type": "GENI", "version": "3"}
#: Options AM API v3 lists as required, per method (GAPI_AM_API_V3: ListResources, Describe and
#: Provision each say "The following option is required ... geni_rspec_version"; an aggregate
#: answers 1 BADARGS without it, as geni-tools' gcf-am -V 3 does: "option geni_rspec_version
#: was not supplied"). ProtoGENI does not require it, but accepts it.
REQUIRED_OPTIONS: dict[str, dict[str, Any]] = {
    "ListResources": {"geni_rspec_version": RSPEC_VERSION},
    "Describe": {"geni_rspec_version": RSPEC_VERSION},
    "Provision": {"geni_rspec_version": RSPEC_VERSION},
}


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
                 ask: Callable[[str], str] | None = None, warn: Callable[[str], None] = stderr_line,
                 sleep: Callable[[float], None] = time.sleep):
        self.creds, self.ma_url, self.sa_url = creds, ma_url, sa_url
        self._ucred: str | None = None
        self._scred: dict[str, str] = {}
        self.stderr_line, self._sleep = warn, sleep
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
                self.stderr_line(f"instageni: {method} at {url}: the aggregate is busy ({exc.output or 'GENI code 14'}); "
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
        """AM API v3 call ``method`` on ``slice_urn`` with the slice credential.

        ``args`` are the method's arguments after the credentials, the options struct last
        (``{}`` for none). The options each method requires are added to it
        (:data:`REQUIRED_OPTIONS`, e.g. ``geni_rspec_version`` for Provision and Describe);
        an option the caller gave is kept as given.
        """
        cred = _cred_list(self.slice_credential(slice_urn))
        if method in REQUIRED_OPTIONS:
            *rest, options = args if args else ({},)
            args = (*rest, {**REQUIRED_OPTIONS[method], **options})
        if method == "Allocate":
            return self._call(am_url, method, slice_urn, cred, *args)
        return self._call(am_url, method, [slice_urn], cred, *args)


