"""The test aggregate and netrepro's client against the GENI AM API v3 as its specification writes it.

tests/data/am_api_v3.yaml transcribes, per method, what GAPI_AM_API_V3, GAPI_AM_API_V3_DETAILS
and GAPI_AM_API_V3/CommonConcepts say (arguments, required options, return fields and types,
error codes), each row with its section. Here the test aggregate (tests/testbed/aggregate.py)
is driven over the wire as any AM API client drives it (XML-RPC over TLS with a portal
certificate, as tests/test_instageni_wire.py), in both of its profiles (``spec``: as the
specification and geni-tools' gcf-am -V 3; ``protogeni``: where ProtoGENI's GeniAM chooses
among what the specification allows), and every answer is checked against the table. The same
table checks what netrepro's client (netrepro.sites.instageni) sends: the site reserves,
waits, renews and releases a slice at the test aggregate, which records each call's arguments
(:attr:`TestAggregate.requests`), and each AM API call is checked against its row.

No node is built: the aggregate runs without a builder, so these are unit tests (about a
second in all).
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import re
import ssl
import xmlrpc.client
import zlib
from pathlib import Path
from typing import Any

import pytest
import yaml
from lxml import etree

from testbed.account import write_account
from testbed.aggregate import AM_PATH, MA_PATH, PROFILES, SA_PATH, TestAggregate
from testbed.pki import TestPKI

REPO = Path(__file__).resolve().parent.parent
TABLE = yaml.safe_load((REPO / "tests" / "data" / "am_api_v3.yaml").read_text())
REQUEST = (REPO / "tests" / "data" / "rspec" / "request" / "tcp-ip-essentials-line.xml").read_text()
EXP = REPO / "tests" / "data" / "experiments" / "gateway-fifo.yml"
GENI_NS = "http://www.geni.net/resources/rspec/3"
XSI_NS = "http://www.w3.org/2001/XMLSchema-instance"
EMULAB_NS = "http://www.protogeni.net/resources/rspec/ext/emulab/1"
CODE = {name: code for code, name in TABLE["error_codes"].items()}
#: RFC 3339 section 5.6 date-time (T and Z in either case, section 5.6's note), which the
#: table's ``datetime`` is (GAPI_AM_API_V3/CommonConcepts "datetime").
DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})\Z")
#: ``geni_rspec_version`` as GetVersion lists it (GENI 3).
V3 = {"type": "GENI", "version": "3"}


# --- the table as a checker ----------------------------------------------------------------
def _rspec_problem(text: Any, kind: str | None) -> str | None:
    if not isinstance(text, str):
        return f"expected an RSpec string, got {type(text).__name__}"
    try:
        root = etree.fromstring(text.encode())
    except etree.XMLSyntaxError as exc:
        return f"RSpec does not parse: {exc}"
    if root.tag != f"{{{GENI_NS}}}rspec":
        return f"root {root.tag}, expected {{{GENI_NS}}}rspec"
    if kind:
        xsd = {"advertisement": "ad", "manifest": "manifest", "request": "request"}[kind]
        loc = (root.get(f"{{{XSI_NS}}}schemaLocation") or "").split()
        if root.get("type") != kind:
            return f"RSpec type={root.get('type')!r}, expected {kind!r}"
        if f"{GENI_NS}/{xsd}.xsd" not in loc:
            return f"schemaLocation {loc} lacks {GENI_NS}/{xsd}.xsd"
    return None


def problems(shape: dict, value: Any, where: str) -> list[str]:
    """What in ``value`` does not have the table's ``shape`` (a dict with ``type`` or ``ref``),
    each a line naming ``where``; [] when it conforms."""
    if "ref" in shape:
        return problems(TABLE["types"][shape["ref"]], value, where)
    t, out = shape["type"], []
    ok = {"int": lambda v: isinstance(v, int) and not isinstance(v, bool), "string": lambda v: isinstance(v, str),
          "boolean": lambda v: isinstance(v, bool), "struct": lambda v: isinstance(v, dict),
          "array": lambda v: isinstance(v, list), "any": lambda v: True,
          "datetime": lambda v: isinstance(v, str) and bool(DATETIME.match(v)),
          "urn": lambda v: isinstance(v, str) and v.startswith("urn:publicid:IDN+"),
          "rspec": lambda v: True}[t]
    if not ok(value):
        return [f"{where}: expected {t}, got {type(value).__name__} {str(value)[:60]!r}"]
    if t == "rspec" and (p := _rspec_problem(value, shape.get("rspec_type"))):
        out.append(f"{where}: {p}")
    if "value" in shape and value != shape["value"]:
        out.append(f"{where}: expected {shape['value']!r}, got {value!r}")
    if "one_of" in shape and value not in TABLE[shape["one_of"]]:
        out.append(f"{where}: {value!r} is not one of {shape['one_of']} {TABLE[shape['one_of']]}")
    if t == "struct":
        for name, f in shape.get("fields", {}).items():
            if name in value:
                out += problems(f, value[name], f"{where}.{name}")
            elif f.get("required", True):
                out.append(f"{where}: no {name}")
    if t == "array":
        for i, item in enumerate(value):
            out += problems(shape["items"], item, f"{where}[{i}]")
    return out


def answer_problems(method: str, res: Any, options: dict | None = None) -> list[str]:
    """An AM API v3 answer against the table: the return struct, the top-level fields, and
    (when geni_code is 0) the value; an error's geni_code one of the table's codes. ``options``:
    the call's, for a value the table says an option compresses (``compressed_by``)."""
    row = TABLE["methods"][method]
    out = problems({"type": "struct", "fields": TABLE["return_struct"]["fields"]}, res, method)
    if out:
        return out
    for name, f in row.get("top_level", {}).items():
        out += problems(f, res[name], f"{method}.{name}") if name in res else [f"{method}: no top-level {name}"]
    code = res["code"]["geni_code"]
    if code == 0:
        value = res["value"]
        if (options or {}).get(row["value"].get("compressed_by")):
            try:
                value = zlib.decompress(base64.b64decode(value, validate=True)).decode()
            except (ValueError, TypeError, zlib.error) as exc:
                return [f"{method}.value: not base64 of zlib data ({exc})"]
        out += problems(row["value"], value, f"{method}.value")
    else:
        if code not in TABLE["error_codes"]:
            out.append(f"{method}: geni_code {code} is not a code of the specification")
        if not isinstance(res.get("output"), str) or not res["output"]:
            out.append(f"{method}: an error without output")
    return out


def call_problems(method: str, params: tuple) -> list[str]:
    """A call's arguments against the table: each argument in order with its type, the
    options the specification requires, and the named options' types."""
    row = TABLE["methods"][method]
    args = row["args"]
    need = sum(1 for a in args if a.get("required", True))
    if not need <= len(params) <= len(args):
        return [f"{method}: {len(params)} arguments, expected {need} to {len(args)} ({[a['name'] for a in args]})"]
    out = []
    for a, value in zip(args, params):
        out += problems(a, value, f"{method}({a['name']})")
    options = params[-1] if len(params) == len(args) and args[-1]["name"] == "options" else {}
    if isinstance(options, dict):
        for name, f in row["required_options"].items():
            out += problems(f, options[name], f"{method} option {name}") if name in options else \
                [f"{method}: required option {name} not sent"]
        for name, f in row["options"].items():
            if name in options:
                out += problems(f, options[name], f"{method} option {name}")
    return out


# --- the aggregate, over the wire ----------------------------------------------------------------
class Session:
    """A portal user talking XML-RPC over TLS to a test aggregate of one ``profile``."""

    def __init__(self, base: Path, profile: str):
        self.agg = TestAggregate(TestPKI(base / "pki"), profile=profile)
        self.user = "urn:publicid:IDN+emulab.net+user+alice"
        pem = self.agg.pki.portal_user(self.user)
        self.ctx = ssl.create_default_context(cafile=str(self.agg.pki.ca_file))
        self.ctx.load_cert_chain(str(pem))
        self.ucred = self.call(MA_PATH, "get_credentials", self.user, [], {})["value"]

    def call(self, path: str, method: str, *args) -> dict:
        proxy = xmlrpc.client.ServerProxy(self.agg.url(path), context=self.ctx, allow_none=True)
        return getattr(proxy, method)(*args)

    def am(self, method: str, *args) -> dict:
        """An AM call whose answer must conform to the table (whatever its geni_code)."""
        res = self.call(AM_PATH, method, *args)
        options = args[-1] if args and isinstance(args[-1], dict) else {}
        assert answer_problems(method, res, options) == [], res
        return res

    def new_slice(self, name: str) -> tuple[str, list]:
        """(slice URN, its credentials) of a new slice made at the slice authority."""
        fields = {"SLICE_NAME": name, "SLICE_PROJECT_URN": "urn:publicid:IDN+emulab.net+project+ae"}
        res = self.call(SA_PATH, "create", "SLICE", self.ucred, {"fields": fields})
        assert res["code"] == 0, res
        urn = res["value"]["SLICE_URN"]
        return urn, self.call(SA_PATH, "get_credentials", urn, self.ucred, {})["value"]


@pytest.fixture(params=PROFILES)
def s(request, tmp_path):
    sess = Session(tmp_path, request.param)
    yield sess
    sess.agg.close()


def code(res: dict) -> int:
    return res["code"]["geni_code"]


def test_getversion_answers_what_the_specification_lists(s):
    res = s.am("GetVersion", {})
    assert code(res) == 0 and res["geni_api"] == 3
    v = res["value"]
    assert v["geni_allocate"] == "geni_disjoint"
    assert v["geni_single_allocation"] is (s.agg.profile == "protogeni")
    exts = v["geni_request_rspec_versions"][0]["extensions"]
    assert (EMULAB_NS in exts) is (s.agg.profile == "protogeni")   # ProtoGENI lists the emulab extension
    assert code(s.am("GetVersion")) == 0   # options are optional


def test_the_checker_finds_what_the_old_test_aggregate_answered():
    """The answers issue 55 found (rows 1, 2, 3, 7) are found by the table's checker."""
    old = {"code": {"geni_code": 0, "am_type": "protogeni", "am_code": 0}, "output": "",
           "value": {"geni_api": 3, "geni_api_versions": {"3": "https://x"},
                     "geni_request_rspec_versions": [{"type": "GENI", "version": "3"}],
                     "geni_ad_rspec_versions": [{"type": "GENI", "version": "3"}],
                     "geni_credential_types": [{"geni_type": "geni_sfa", "geni_version": "3"}],
                     "geni_single_allocation": 0, "geni_allocate": "geni_many"}}
    found = "\n".join(answer_problems("GetVersion", old))
    assert "no top-level geni_api" in found
    old["geni_api"] = 3
    found = "\n".join(answer_problems("GetVersion", old))
    for missing in ("schema", "namespace", "extensions"):
        assert f"geni_request_rspec_versions[0]: no {missing}" in found
    assert "geni_single_allocation: expected boolean, got int" in found
    prov = {"code": {"geni_code": 0}, "output": "", "value": [{"geni_sliver_urn": "urn:publicid:IDN+a+sliver+1"}]}
    assert "Provision.value: expected struct, got list" in answer_problems("Provision", prov)[0]
    assert call_problems("Provision", (["urn:publicid:IDN+a+slice+s"], [], {})) == [
        "Provision: required option geni_rspec_version not sent"]


def test_listresources_needs_the_rspec_version_and_advertises(s):
    no_version = s.am("ListResources", s.ucred, {})
    assert code(no_version) == CODE["BADARGS"] and "geni_rspec_version" in no_version["output"]
    assert code(s.am("ListResources", s.ucred, {"geni_rspec_version": {"type": "GENI", "version": "2"}})) == CODE["BADVERSION"]
    assert code(s.am("ListResources", [], {"geni_rspec_version": V3})) == CODE["FORBIDDEN"]   # no credential
    ad = s.am("ListResources", s.ucred, {"geni_rspec_version": {"type": "geni", "version": "3"}})["value"]
    packed = s.am("ListResources", s.ucred, {"geni_rspec_version": V3, "geni_compressed": True})["value"]
    assert zlib.decompress(base64.b64decode(packed)).decode() == ad
    free = etree.fromstring(s.am("ListResources", s.ucred, {"geni_rspec_version": V3, "geni_available": True})["value"].encode())
    assert {a.get("now") for a in free.iter(f"{{{GENI_NS}}}available")} == {"true"}


def _manifest_checks(text: str, clients: set[str]) -> None:
    root = etree.fromstring(text.encode())
    assert _rspec_problem(text, "manifest") is None
    assert {n.get("client_id") for n in root.iter(f"{{{GENI_NS}}}node")} == clients
    for host in root.iter(f"{{{GENI_NS}}}host"):
        ipaddress.IPv4Address(host.get("ipv4"))   # an address, never a host name (row 12)


def test_a_slice_through_every_method(s):
    spec = s.agg.profile == "spec"
    urn, cred = s.new_slice("every")
    alloc = s.am("Allocate", urn, cred, REQUEST, {})
    assert code(alloc) == 0
    _manifest_checks(alloc["value"]["geni_rspec"], {"romeo", "juliet", "router"})
    extra = (f'<rspec xmlns="{GENI_NS}" type="request"><node client_id="mercutio" exclusive="false">'
             '<sliver_type name="emulab-xen"/></node></rspec>')
    more = s.am("Allocate", urn, cred, extra, {"geni_end_time": "2099-01-01T00:00:00Z"})
    assert code(more) == 0 and len(more["value"]["geni_slivers"]) == 1   # disjoint: combined
    assert code(s.am("Allocate", urn, cred, extra, {})) == CODE["ALREADYEXISTS"]
    bare = s.am("Provision", [urn], cred, {})
    assert code(bare) == (CODE["BADARGS"] if spec else 0)   # ProtoGENI does not require geni_rspec_version
    prov = s.am("Provision", [urn], cred, {"geni_rspec_version": V3, "geni_users": [{"urn": s.user, "keys": ["ssh-ed25519 AAAA k"]}]})
    assert code(prov) == 0
    assert {x["geni_allocation_status"] for x in prov["value"]["geni_slivers"]} == {"geni_provisioned"}
    assert code(s.am("PerformOperationalAction", [urn], cred, "geni_explode", {})) == CODE["UNSUPPORTED"]
    assert code(s.am("PerformOperationalAction", [urn], cred, "geni_start", {})) == 0
    status = s.am("Status", [urn], cred, {})
    assert status["value"]["geni_urn"] == urn
    assert {x["geni_operational_status"] for x in status["value"]["geni_slivers"]} == {"geni_ready"}
    if spec:
        assert code(s.am("Describe", [urn], cred, {})) == CODE["BADARGS"]
    desc = s.am("Describe", [urn], cred, {"geni_rspec_version": V3})
    _manifest_checks(desc["value"]["geni_rspec"], {"romeo", "juliet", "router", "mercutio"})
    one = status["value"]["geni_slivers"][0]["geni_sliver_urn"]
    for method, args in (("Status", ({},)), ("Describe", ({"geni_rspec_version": V3},))):
        res = s.am(method, [one], cred, *args)
        if spec:   # operations on individual slivers (geni_single_allocation false)
            assert code(res) == 0 and [x["geni_sliver_urn"] for x in res["value"]["geni_slivers"]] == [one]
        else:      # ProtoGENI: 7 REFUSED "Must pass only slice URN" (row 8)
            assert code(res) == CODE["REFUSED"] and res["output"] == "Must pass only slice URN"
    assert code(s.am("Status", ["urn:publicid:IDN+test.netrepro.example+sliver+1"], cred, {})) == \
        (CODE["SEARCHFAILED"] if spec else CODE["REFUSED"])
    soon = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)).replace(microsecond=0)
    west = soon.astimezone(dt.timezone(dt.timedelta(hours=-1)))
    for when in (soon.isoformat(), west.strftime("%Y-%m-%dt%H:%M:%S.5-01:00"), soon.strftime("%Y-%m-%dT%H:%M:%SZ")):
        renew = s.am("Renew", [urn], cred, when, {})   # any RFC 3339 form (row 9)
        assert code(renew) == 0, renew
        assert {x["geni_expires"][:19] for x in renew["value"]} == {soon.strftime("%Y-%m-%dT%H:%M:%S")}
    assert code(s.am("Renew", [urn], cred, soon.strftime("%Y-%m-%d %H:%M"), {})) == CODE["BADARGS"]
    gone = s.am("Delete", [urn], cred, {})
    assert code(gone) == 0 and {x["geni_allocation_status"] for x in gone["value"]} == {"geni_unallocated"}
    assert code(s.am("Status", [urn], cred, {})) == CODE["SEARCHFAILED"] and s.agg.slivers == {}


def test_a_slice_with_no_slivers_is_described_empty_or_not_found(s):
    urn, cred = s.new_slice("empty")
    res = s.am("Describe", [urn], cred, {"geni_rspec_version": V3})
    if s.agg.profile == "spec":   # GAPI_AM_API_V3 "Describe": a manifest of no node, geni_slivers may be empty
        assert code(res) == 0 and res["value"]["geni_slivers"] == []
        assert etree.fromstring(res["value"]["geni_rspec"].encode()).find(f"{{{GENI_NS}}}node") is None
    else:
        assert code(res) == CODE["SEARCHFAILED"]


def test_shutdown_freezes_the_slice(s):
    urn, cred = s.new_slice("shut")
    assert code(s.am("Allocate", urn, cred, REQUEST, {})) == 0
    sliver = next(iter(s.agg.slivers))
    assert code(s.am("Shutdown", sliver, cred, {})) == CODE["BADARGS"]
    res = s.am("Shutdown", urn, cred, {})
    assert code(res) == 0 and res["value"] is True
    soon = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert code(s.am("Renew", [urn], cred, soon, {})) == CODE["REFUSED"]
    assert code(s.am("Status", [urn], cred, {})) == 0


def test_the_slice_authority_answers_what_omni_and_geni_lib_ask(s):
    for path, service in ((SA_PATH, "SLICE"), (MA_PATH, "MEMBER")):
        v = s.call(path, "get_version")
        assert v["code"] == 0 and v["value"]["VERSION"] == "2" and service in v["value"]["SERVICES"]
    urn, _ = s.new_slice("looked")
    found = s.call(SA_PATH, "lookup", "SLICE", s.ucred, {"match": {"SLICE_URN": [urn]}, "filter": ["SLICE_NAME"]})
    assert found["code"] == 0 and found["value"] == {urn: {"SLICE_NAME": "looked"}}
    me = s.call(MA_PATH, "lookup", "MEMBER", s.ucred, {"match": {"MEMBER_URN": [s.user]}})
    assert me["code"] == 0 and me["value"][s.user]["MEMBER_USERNAME"] == "alice"
    v1 = s.call(SA_PATH, "create_slice", s.ucred, {"fields": {"SLICE_NAME": "x"}})
    assert v1["code"] != 0 and "speakv2 = true" in v1["output"]


# --- netrepro's client, checked by the same table --------------------------------------------------
@pytest.mark.parametrize("profile", PROFILES)
def test_netrepros_client_sends_what_the_specification_requires(profile, tmp_path, monkeypatch):
    """The instageni site reserves, waits, renews and releases a slice at the test aggregate;
    each AM API call it made carries the arguments and required options of its row, and each
    was answered with geni_code 0."""
    from netrepro.experiment.spec import load_spec
    from netrepro.sites import get_site

    agg = TestAggregate(TestPKI(tmp_path / "pki"), profile=profile)
    try:
        env, _ = write_account(tmp_path / "account", agg)
        for k, v in env.items():
            if k.startswith("NETREPRO_"):
                monkeypatch.setenv(k, v)
        site = get_site("instageni", load_spec(EXP), tmp_path / "state", {})
        site.reserve()
        site.wait_ready(interval_s=0)
        site.renew(10)
        site.release()
    finally:
        agg.close()
    am = [(m, p) for path, m, p in agg.requests if path == AM_PATH]
    assert {m for m, _ in am} >= {"GetVersion", "Allocate", "Provision", "PerformOperationalAction", "Status",
                                  "Describe", "Renew", "Delete"}
    for method, params in am:
        assert call_problems(method, params) == [], (method, params)
    assert [c for c in agg.calls if c[2] != 0] == []
