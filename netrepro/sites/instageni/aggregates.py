"""The GENI aggregates the instageni site knows, and how their TLS certificates are checked.

Aggregates are configuration: ``netrepro/sites/instageni/aggregates.yml`` (and
``$NETREPRO_AGGREGATES``), each with its URN, AM API v3 URL and kind, and how its TLS
certificate is verified (:class:`TLSPolicy`, :func:`tls_context`): against a CA bundle the
configuration names, or the system trust store; never silently off.
"""

from __future__ import annotations

import os
import re
import ssl
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from netrepro.sites.errors import SiteError
from netrepro.sites.login import read_small_text

AGGREGATES_FILE = Path(__file__).resolve().parent / "aggregates.yml"
#: The Emulab/CloudLab portal's member and slice authorities (Federation API v2; geni-lib
#: 0.9.9.4 geni/aggregate/frameworks.py, class EmulabCH2).
DEFAULT_MA = "https://www.emulab.net:12369/protogeni/xmlrpc/geni-ma"
DEFAULT_SA = "https://www.emulab.net:12369/protogeni/xmlrpc/geni-sa/2"


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
        data = _read_file(f)
        if "ca_bundle" in data:
            default_tls = _tls_fields(f, "", data)
        if data.get("slice_authority") is not None:
            sa_tls = _slice_authority(f, data["slice_authority"], conf["slice_authority"]) or sa_tls
        for name, agg in data.get("aggregates", {}).items():
            conf["aggregates"][name] = _aggregate(f, name, agg)
            own_tls[name] = _tls_fields(f, f"aggregates.{name}.", agg)
        if data.get("default"):
            conf["default"] = data["default"]
    for name, agg in conf["aggregates"].items():
        agg["tls"] = _policy(f"aggregate {name}", default_tls, own_tls.get(name, {}))
    conf["slice_authority_tls"] = _policy("the slice authority", default_tls, sa_tls)
    return conf


def _read_file(f: Path) -> dict[str, Any]:
    """The aggregates file ``f`` read (strict YAML; an empty file is ``{}``), with its top-level
    fields checked (:data:`TOP_KEYS`, ``aggregates`` a mapping). Raises SiteError (or SpecError
    for YAML that does not parse) naming the file and the field."""
    from netrepro.core.yamlfile import load_yaml_file

    if not f.is_file():
        raise SiteError(f"{f}: (file): no such aggregates file; expected YAML with an 'aggregates' mapping")
    data = load_yaml_file(f, "aggregates YAML") or {}
    if not isinstance(data, dict) or not isinstance(data.get("aggregates", {}), dict):
        raise SiteError(f"{f}: aggregates: expected a mapping name -> {{urn, url}}")
    unknown = [k for k in data if k not in TOP_KEYS]
    if unknown:
        raise SiteError(f"{f}: {unknown[0]}: unknown field; expected one of: {', '.join(TOP_KEYS)} "
                        "(verify_tls is set per aggregate)")
    return data


def _slice_authority(f: Path, sa: Any, conf_sa: dict[str, Any]) -> dict[str, Any]:
    """The TLS fields (:func:`_tls_fields`) of file ``f``'s ``slice_authority`` entry ``sa``, once
    checked (:data:`SA_KEYS`, URLs, the domain); its ``url``, ``ma_url`` and ``authority`` are set
    in ``conf_sa`` (the configuration's ``slice_authority``). Raises SiteError naming the field."""
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
            conf_sa[key] = sa[key]
    if "authority" in sa:
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9.-]{0,99}", str(sa["authority"])):
            raise SiteError(f"{f}: slice_authority.authority: expected the portal's domain such as emulab.net, "
                            f"got {sa['authority']!r}")
        conf_sa["authority"] = sa["authority"]
    return _tls_fields(f, "slice_authority.", sa)


def _aggregate(f: Path, name: str, agg: Any) -> dict[str, Any]:
    """``{urn, url, kind}`` of file ``f``'s aggregate ``name`` (its entry ``agg``), checked
    (:data:`AGGREGATE_KEYS`, the URN's and the URL's form). Raises SiteError naming the field."""
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
    return {"urn": urn, "url": url, "kind": agg.get("kind", "")}


def _policy(name: str, default_tls: dict[str, Any], own_tls: dict[str, Any]) -> TLSPolicy:
    """The TLS policy of the service ``name``: its own TLS fields (``own_tls``) over the
    top-level ``ca_bundle`` (``default_tls``), else the system trust store, verified."""
    merged = {"ca_bundle": default_tls.get("ca_bundle"), "source": default_tls.get("source", "")}
    merged.update(own_tls)
    return TLSPolicy(name=name, **merged)


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


def stderr_line(line: str) -> None:
    """Print one warning ``line`` on standard error at once (the default ``warn`` of
    :func:`tls_context` and of the client)."""
    print(line, file=sys.stderr, flush=True)


def tls_context(policy: TLSPolicy, warn: Callable[[str], None] = stderr_line) -> ssl.SSLContext:
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

