"""The thin service layer of the instageni site: XML-RPC over HTTPS with the user's certificate.

:class:`GeniClient` calls the slice authority (Federation API v2, geni-lib's ``emulab-ch2``
framework) for the slice and its credential, and the aggregate (AM API v3) for Allocate,
Provision, PerformOperationalAction, Status, Describe, Renew and Delete.
:func:`poll_until` drives a status function with a timeout and progress lines;
:func:`summarize_status` reads AM API v3 ``Status`` results.

Answers are read as the specification allows them to be written (GAPI_AM_API_V3 and its
DETAILS page, with what ProtoGENI's GeniAM and geni-tools' gcf-am -V 3 write where they differ):
:func:`read_code` (the GENI code in the code struct or as an int), :func:`parse_rfc3339` (any RFC
3339 time), :func:`xmlrpc_bool` (GetVersion's booleans), :func:`read_version` and
:func:`check_answer` (the fields netrepro reads); an answer outside that is refused in one line
naming the service, the method and the field (:class:`AnswerError`).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import ssl
import sys
import time
from typing import Any, Callable

from netrepro.sites.errors import SiteError
from netrepro.sites.instageni.aggregates import DEFAULT_MA, DEFAULT_SA, TLSPolicy, stderr_line, tls_context
from netrepro.sites.instageni.credentials import GeniCredentials, PORTAL_PEM, load_client_cert

#: Dates as netrepro writes them to the AM API v3 and the slice authority (UTC, RFC 3339).
DATE_FMT = "%Y-%m-%dT%H:%M:%SZ"


# --- reading answers --------------------------------------------------------------------
class AnswerError(SiteError):
    """An answer the specification does not allow: one line naming the service's URL (the
    aggregate or authority), the method and the field."""

    def __init__(self, url: str, method: str, field: str, got: Any, expected: str):
        shown = repr(got)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        super().__init__(f"{url}: {method}: {field} {shown}: expected {expected}")


#: RFC 3339 section 5.6 ``date-time``: full-date "T" full-time, where full-time is
#: partial-time (with an optional time-secfrac, any number of digits) and time-offset ("Z" or
#: "+hh:mm"/"-hh:mm"). Its NOTEs allow "t" and "z" in lower case and a space for the "T". A
#: time without its offset is read as UTC, as geni-tools' omni reads one (naiveUTC in
#: omnilib/util): RFC 3339 requires the offset, but aggregates have written times without it.
_RFC3339 = re.compile(r"(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?"
                      r"(?:([Zz])|([+-])(\d{2}):(\d{2}))?")


def parse_rfc3339(text: Any) -> dt.datetime:
    """``text``, an RFC 3339 date-time (section 5.6: ``2026-12-01T18:00:00Z``,
    ``2026-12-01T18:00:00.123456+00:00``, ``2026-12-01t20:00:00+02:00``, ...) as an aware
    datetime in UTC. Fractions beyond microseconds are cut; a leap second (``:60``, section
    5.7) is the first second after it; no offset is read as UTC (see :data:`_RFC3339`).
    GAPI_AM_API_V3 types sliver times as ``dateTime.rfc3339``; an XML-RPC ``dateTime.iso8601``
    value (``20261201T18:00:00``, which has no offset) is read too, as UTC.

    Raises:
        ValueError: not of that grammar, or a field out of range (month 13, offset hour 24).
    """
    import xmlrpc.client

    if isinstance(text, xmlrpc.client.DateTime):
        try:
            return dt.datetime.strptime(text.value, "%Y%m%dT%H:%M:%S").replace(tzinfo=dt.timezone.utc)
        except ValueError:
            raise ValueError(f"not an XML-RPC dateTime.iso8601: {text.value!r}") from None
    m = _RFC3339.fullmatch(text.strip()) if isinstance(text, str) else None
    if not m:
        raise ValueError(f"not an RFC 3339 date-time: {text!r}")
    year, month, day, hour, minute, second = (int(g) for g in m.groups()[:6])
    micro = int((m.group(7) or "0")[:6].ljust(6, "0"))
    if m.group(9):
        oh, om = int(m.group(10)), int(m.group(11))
        if oh > 23 or om > 59:
            raise ValueError(f"offset out of range: {text!r}")
        sign = 1 if m.group(9) == "+" else -1
        tz = dt.timezone(sign * dt.timedelta(hours=oh, minutes=om))
    else:
        tz = dt.timezone.utc
    leap = second == 60
    when = dt.datetime(year, month, day, hour, minute, 59 if leap else second, micro, tzinfo=tz)
    return (when + dt.timedelta(seconds=1 if leap else 0)).astimezone(dt.timezone.utc)


def xmlrpc_bool(value: Any) -> bool:
    """A boolean as aggregates write one: the XML-RPC boolean (the specification), an int 0 or
    1, or the string "0" or "1" (ProtoGENI's GeniAM writes ``geni_single_allocation`` as the
    string "1").

    Raises:
        ValueError: anything else.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str) and value.strip() in ("0", "1"):
        return value.strip() == "1"
    raise ValueError(f"not a boolean: {value!r}")


#: geni_allocate's values (GAPI_AM_API_V3, GetVersion): one Allocate per slice until its
#: slivers are deleted; more, each disjoint from what the slice holds; any number.
ALLOCATE_MODES = ("geni_single", "geni_disjoint", "geni_many")


@dataclasses.dataclass(frozen=True)
class AggregateVersion:
    """What an aggregate's GetVersion says (GAPI_AM_API_V3, GetVersion): ``api`` (3),
    ``single_allocation`` (``geni_single_allocation``: operations must name every sliver of
    the slice, or the slice; default False), ``allocate`` (``geni_allocate``, one of
    :data:`ALLOCATE_MODES`; default ``geni_single``)."""

    api: int
    single_allocation: bool = False
    allocate: str = "geni_single"


def read_version(url: str, value: Any) -> AggregateVersion:
    """GetVersion's ``value`` as an :class:`AggregateVersion`.

    Raises:
        AnswerError: not a struct; ``geni_api`` not 3 (naming the AM API v3 URL in
            ``geni_api_versions`` when it lists one); ``geni_single_allocation`` not a boolean;
            ``geni_allocate`` not one of :data:`ALLOCATE_MODES`; ``geni_request_rspec_versions``
            without GENI 3 (the RSpec netrepro writes).
    """
    if not isinstance(value, dict):
        raise AnswerError(url, "GetVersion", "value", value, "a struct (GAPI_AM_API_V3, GetVersion)")
    api = value.get("geni_api")
    if str(api).strip() != "3":   # an int; "3" from some aggregates
        v3 = (value.get("geni_api_versions") or {}).get("3") if isinstance(value.get("geni_api_versions"), dict) else None
        raise AnswerError(url, "GetVersion", "geni_api", api,
                          "3, the AM API netrepro speaks" + (f"; this aggregate serves it at {v3}" if v3 else ""))
    single = value.get("geni_single_allocation", False)
    try:
        single = xmlrpc_bool(single)
    except ValueError:
        raise AnswerError(url, "GetVersion", "geni_single_allocation", single, "a boolean (GAPI_AM_API_V3, GetVersion)") from None
    allocate = value.get("geni_allocate", "geni_single")
    if not isinstance(allocate, str) or allocate.strip().lower() not in ALLOCATE_MODES:
        raise AnswerError(url, "GetVersion", "geni_allocate", allocate, f"one of {', '.join(ALLOCATE_MODES)}")
    versions = value.get("geni_request_rspec_versions")
    if not isinstance(versions, list) or not any(
            isinstance(v, dict) and str(v.get("type", "")).strip().lower() == "geni" and str(v.get("version", "")).strip() == "3"
            for v in versions):
        raise AnswerError(url, "GetVersion", "geni_request_rspec_versions", versions,
                          "a list naming type GENI version 3, the request RSpec netrepro sends")
    return AggregateVersion(3, single, allocate.strip().lower())


def _check_slivers(url: str, method: str, slivers: Any) -> list[dict[str, Any]]:
    """The ``geni_slivers`` list of an answer, each sliver a struct whose fields netrepro
    reads have their specified types (GAPI_AM_API_V3, "Sliver status"): ``geni_sliver_urn``,
    ``geni_allocation_status`` and ``geni_operational_status`` strings, ``geni_expires`` an
    RFC 3339 time. Absent fields are left to the reader.

    Raises:
        AnswerError: naming the field (and the sliver).
    """
    if not isinstance(slivers, list):
        raise AnswerError(url, method, "geni_slivers", slivers, "a list of sliver structs")
    for i, s in enumerate(slivers):
        if not isinstance(s, dict):
            raise AnswerError(url, method, f"geni_slivers[{i}]", s, "a sliver struct")
        who = f"geni_slivers[{i}] ({str(s.get('geni_sliver_urn'))[:200]})"
        for key in ("geni_sliver_urn", "geni_allocation_status", "geni_operational_status"):
            if key in s and not isinstance(s[key], str):
                raise AnswerError(url, method, f"{who} {key}", s[key], "a string")
        if s.get("geni_expires") is not None:
            try:
                parse_rfc3339(s["geni_expires"])
            except ValueError:
                raise AnswerError(url, method, f"{who} geni_expires", s["geni_expires"],
                                  "an RFC 3339 time such as 2026-12-01T18:00:00Z") from None
    return slivers


def check_answer(url: str, method: str, value: Any) -> Any:
    """``value`` of AM API v3 ``method``, checked where netrepro reads it (GAPI_AM_API_V3):
    Allocate, Provision and Describe answer a struct ``{geni_rspec, geni_slivers}`` (Describe
    also ``geni_urn``), Status ``{geni_urn, geni_slivers}``; the other methods' values are not
    read and pass as they are. Returns ``value``.

    Raises:
        AnswerError: a value of another shape (Provision's bare sliver list included: neither
            the specification nor ProtoGENI's GeniAM nor geni-tools' gcf answers one).
    """
    if method not in ("Allocate", "Provision", "Describe", "Status"):
        return value
    shape = "{geni_urn, geni_slivers}" if method == "Status" else "{geni_rspec, geni_slivers}"
    if not isinstance(value, dict):
        raise AnswerError(url, method, "value", value, f"the struct {shape} (GAPI_AM_API_V3, {method})")
    if method != "Status" and not isinstance(value.get("geni_rspec"), str):
        raise AnswerError(url, method, "geni_rspec", value.get("geni_rspec"), "a manifest RSpec (a string)")
    _check_slivers(url, method, value.get("geni_slivers"))
    return value


# --- waiting ---------------------------------------------------------------------------
def summarize_status(value: dict[str, Any], names: dict[str, str] | None = None) -> tuple[bool, str | None, str]:
    """Read an AM API v3 ``Status`` value: ``{'geni_urn', 'geni_slivers': [{'geni_sliver_urn',
    'geni_allocation_status', 'geni_operational_status', 'geni_error'?}]}``.

    ``names`` maps a node's sliver URN to the node's name (from the manifest:
    :func:`netrepro.sites.instageni.manifest.sliver_nodes`), used in the failure message
    (``node router (urn:...): <geni_error>``) and to count the nodes: a slice's links and LANs
    are slivers too (pie-vs-red: 7 VMs and 2 LANs, 9 slivers), and the summary counts the
    nodes only. Every sliver, node or link, must be ready for the slice to be; a link not yet
    ready once every node is, is said after the count. Without ``names`` matching any sliver,
    every sliver is counted.

    Returns (every sliver ready, failure message or None, one-line summary such as
    ``3/7 ready, 4 geni_configuring`` or ``7/7 ready, 2 link slivers not ready``).
    """
    names = names or {}
    slivers = value.get("geni_slivers", []) or []
    nodes = [s for s in slivers if s.get("geni_sliver_urn") in names] or slivers
    links = [s for s in slivers if all(s is not n for n in nodes)]
    counts: dict[str, int] = {}
    for s in nodes:
        op = s.get("geni_operational_status", "unknown")
        counts[op] = counts.get(op, 0) + 1
    failed = []
    for s in slivers:
        if s.get("geni_operational_status") == "geni_failed":
            urn = s.get("geni_sliver_urn", "?")
            who = f"node {names[urn]} ({urn})" if urn in names else urn
            failed.append(f"{who}: {s.get('geni_error') or 'failed'}")
    ready = counts.get("geni_ready", 0)
    others = ", ".join(f"{n} {st}" for st, n in sorted(counts.items()) if st != "geni_ready")
    summary = f"{ready}/{len(nodes)} ready" + (f", {others}" if others else "")
    links_waiting = sum(s.get("geni_operational_status") != "geni_ready" for s in links)
    if ready == len(nodes) and links_waiting:
        summary += f", {links_waiting} link sliver{'s' * (links_waiting > 1)} not ready"
    all_ready = ready == len(nodes) and not links_waiting
    return (bool(slivers) and all_ready, "; ".join(failed) or None, summary)


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


def read_code(url: str, method: str, answer: dict[str, Any]) -> tuple[int, str]:
    """The GENI code and the message of an answer ``{code, value, output}``.

    The code is where the references put it: a struct ``code`` holding ``geni_code``
    (GAPI_AM_API_V3, "Return Structure"; ProtoGENI adds ``am_type``, ``am_code`` and
    ``protogeni_error_url``, a log of the failure, added to the message as omni adds it), or
    an int ``code`` (the Federation API v2 slice and member authorities' return structure;
    omni also reads an AM's int code). The message is ``output``, one line.

    Raises:
        AnswerError: no code, or one that is not an int (``geni_code`` 0 is success).
    """
    code = answer.get("code")
    where = "code"
    if isinstance(code, dict):
        code, where = code.get("geni_code"), "code.geni_code"
    if isinstance(code, bool) or not isinstance(code, int):
        raise AnswerError(url, method, where, code, "an int GENI code (0: success)")
    output = answer.get("output")
    output = "" if output is None else str(output)
    log = answer["code"].get("protogeni_error_url") if isinstance(answer.get("code"), dict) else None
    if code and isinstance(log, str) and log:
        output = f"{output} (log: {log})" if output else f"log: {log}"
    return code, output


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
            raise AnswerError(url, method, "answer", res, "a GENI result {code, value, output}")
        code, output = read_code(url, method, res)
        if code:
            raise GeniError(method, code, output)
        return res.get("value")

    def get_version(self, am_url: str) -> AggregateVersion:
        """AM API v3 ``GetVersion`` (no credential): checks the aggregate's TLS and ours
        before anything is requested, and that it speaks AM API v3 (:func:`read_version`).

        Raises:
            SiteError, GeniError: as :meth:`_call`; AnswerError: see :func:`read_version`.
        """
        return read_version(am_url, self._call(am_url, "GetVersion", {}))

    def _sfa_credential(self, url: str, *args) -> str:
        """Federation API v2 ``get_credentials`` at ``url``: the ``geni_value`` of the first
        credential of ``geni_type`` geni_sfa (case-insensitive) in the list it answers (an
        authority may list other types beside it, e.g. ABAC).

        Raises:
            AnswerError: not a list holding a geni_sfa credential with a string geni_value.
        """
        creds = self._call(url, "get_credentials", *args)
        for c in creds if isinstance(creds, list) else []:
            if (isinstance(c, dict) and str(c.get("geni_type", "")).strip().lower() == "geni_sfa"
                    and isinstance(c.get("geni_value"), str)):
                return c["geni_value"]
        raise AnswerError(url, "get_credentials", "value", creds,
                          "a list of credentials {geni_type, geni_version, geni_value} with one of geni_type geni_sfa")

    def user_credential(self) -> str:
        """The user's credential from the member authority, asked once per client."""
        if self._ucred is None:
            self._ucred = self._sfa_credential(self.ma_url, self.creds.user_urn, [], {})
        return self._ucred

    def slice_credential(self, slice_urn: str) -> str:
        """The slice's credential from the slice authority, asked once per client and slice."""
        if slice_urn not in self._scred:
            self._scred[slice_urn] = self._sfa_credential(self.sa_url, slice_urn, _cred_list(self.user_credential()), {})
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
        an option the caller gave is kept as given. Returns the value, checked by
        :func:`check_answer`.

        Raises:
            SiteError, GeniError: as :meth:`_call`; AnswerError: see :func:`check_answer`.
        """
        cred = _cred_list(self.slice_credential(slice_urn))
        if method in REQUIRED_OPTIONS:
            *rest, options = args if args else ({},)
            args = (*rest, {**REQUIRED_OPTIONS[method], **options})
        if method == "Allocate":
            return check_answer(am_url, method, self._call(am_url, method, slice_urn, cred, *args))
        # Every other call names the slice, never its slivers: ProtoGENI answers 7 REFUSED
        # "Must pass only slice URN" to a sliver URN (GeniAM's Describe, Status, Provision).
        return check_answer(am_url, method, self._call(am_url, method, [slice_urn], cred, *args))


