"""netrepro's GENI AM API v3 client (netrepro.sites.instageni.client) against answers given as
data: what each call sends (the arguments and options GAPI_AM_API_V3 requires) and which answers
it accepts (every form the specification allows) or refuses (in one line naming the aggregate,
the method and the field).

The client's XML-RPC proxy is replaced by :class:`Recorder`, which records each call and answers
from a table; nothing is reached over the network (the over-the-wire tests are
tests/test_instageni_wire*.py).
"""

from __future__ import annotations

import datetime as dt
import xmlrpc.client

import pytest

from netrepro.sites import get_site
from netrepro.sites.base import SiteError
from netrepro.sites.instageni import client as geni_client
from netrepro.sites.instageni.aggregates import TLSPolicy
from netrepro.sites.instageni.client import AnswerError, GeniClient, GeniError, parse_rfc3339
from netrepro.sites.instageni.credentials import GeniCredentials

from test_sites_common import MANIFEST, geni_env
import test_manifest

AM = "https://am.example:12369/protogeni/xmlrpc/am/3.0"
SA = "https://sa.example/sa"
MA = "https://sa.example/ma"
SLICE = "urn:publicid:IDN+emulab.net:netrepro+slice+s1"


def ok(value):
    """A successful AM API v3 answer (GAPI_AM_API_V3, "Return Structure")."""
    return {"code": {"geni_code": 0}, "value": value, "output": ""}


class Recorder:
    """Stands in for xmlrpc.client.ServerProxy: records (url, method, args) and answers
    ``answers[method]`` (a value, or a callable of the args)."""

    def __init__(self, answers):
        self.answers, self.calls = answers, []

    def proxy(self, url):
        rec = self

        class _P:
            def __getattr__(self, method):
                def call(*args):
                    rec.calls.append((url, method, args))
                    a = rec.answers[method]
                    a = a(*args) if callable(a) else a
                    # through XML-RPC and back, as the client receives it (booleans, ints, strings)
                    return xmlrpc.client.loads(xmlrpc.client.dumps((a,), methodresponse=True, allow_none=True))[0][0]
                return call
        return _P()


@pytest.fixture
def make_client(monkeypatch, tmp_path):
    """make_client(answers) -> (GeniClient, Recorder): a client whose calls go to a Recorder;
    the slice authority answers credentials."""
    monkeypatch.setattr(geni_client, "tls_context", lambda policy, warn: object())
    monkeypatch.setattr(geni_client, "load_client_cert", lambda ctx, creds, ask: None)

    def make(answers, warn=None):
        base = {"get_credentials": ok([{"geni_type": "geni_sfa", "geni_version": "3", "geni_value": "<cred/>"}])}
        rec = Recorder({**base, **answers})
        creds = GeniCredentials(str(tmp_path / "c.pem"), str(tmp_path / "c.pem"), "alice",
                                "urn:publicid:IDN+emulab.net+user+alice", "netrepro", str(tmp_path / "id.pub"), None, None)
        c = GeniClient(creds, TLSPolicy("aggregate t"), TLSPolicy("sa"), ma_url=MA, sa_url=SA,
                       warn=(warn or (lambda line: None)), sleep=lambda s: None)
        c._proxy = rec.proxy
        return c, rec
    return make


def am_calls(rec):
    return [(m, a) for url, m, a in rec.calls if url == AM]


# --- what the client sends --------------------------------------------------------------
#: GAPI_AM_API_V3: the options the specification requires per method ("The following option is
#: required"): geni_rspec_version {type, version} in ListResources, Describe and Provision.
@pytest.mark.parametrize("method, args", [
    ("Provision", ({"geni_users": []},)),
    ("Describe", ({},)),
])
def test_required_geni_rspec_version_is_sent(make_client, method, args):
    c, rec = make_client({method: ok({"geni_rspec": "<rspec/>", "geni_slivers": []})})
    c.am(AM, method, SLICE, *args)
    (m, sent), = am_calls(rec)
    assert m == method and sent[0] == [SLICE]                          # urns: an array
    assert sent[1] == [{"geni_type": "geni_sfa", "geni_version": "3", "geni_value": "<cred/>"}]
    options = sent[-1]
    assert options["geni_rspec_version"] == {"type": "GENI", "version": "3"}
    assert {k: v for k, v in options.items() if k != "geni_rspec_version"} == args[0]


# --- times: RFC 3339 in every legal form --------------------------------------------------
UTC = dt.timezone.utc
T18 = dt.datetime(2026, 12, 1, 18, 0, 0, tzinfo=UTC)

#: (text, the instant it names, where the form comes from). GAPI_AM_API_V3 ("Sliver status",
#: geni_expires; Renew's expiration_time) says the times are RFC 3339.
RFC3339_LEGAL = [
    ("2026-12-01T18:00:00Z", T18, "RFC 3339 5.6 (time-offset Z); ProtoGENI's GeniAM and netrepro write it"),
    ("2026-12-01T18:00:00+00:00", T18, "RFC 3339 5.6 (time-numoffset); geni-tools' gcf am3 rfc3339format (isoformat)"),
    ("2026-12-01T18:00:00.123456+00:00", T18.replace(microsecond=123456), "5.6 time-secfrac; gcf's isoformat of a time with microseconds"),
    ("2026-12-01T18:00:00.5Z", T18.replace(microsecond=500000), "5.6 time-secfrac, one digit"),
    ("2026-12-01T18:00:00.123456789Z", T18.replace(microsecond=123456), "5.6 time-secfrac, any number of digits (cut to microseconds)"),
    ("2026-12-01T20:00:00+02:00", T18, "5.6 time-numoffset, east of UTC"),
    ("2026-12-01T12:30:00-05:30", T18, "5.6 time-numoffset, west of UTC"),
    ("2026-12-01t18:00:00z", T18, "5.6 NOTE: T and Z may be lower case"),
    ("2026-12-01 18:00:00Z", T18, "5.6 NOTE: a space may separate full-date and full-time"),
    ("2016-12-31T23:59:60Z", dt.datetime(2017, 1, 1, tzinfo=UTC), "5.7 and 5.6 time-second 60: a leap second"),
    (" 2026-12-01T18:00:00Z\n", T18, "white space around it (XML-RPC string content)"),
    ("2026-12-01T18:00:00", T18, "no offset: read as UTC, as omni reads it (omnilib naiveUTC)"),
    (xmlrpc.client.DateTime("20261201T18:00:00"), T18, "GAPI_AM_API_V3 types it dateTime.rfc3339: XML-RPC's dateTime.iso8601 (UTC)"),
]
#: Not RFC 3339 date-times (section 5.6's grammar or its ranges).
RFC3339_ILLEGAL = ["2026-12-01", "tomorrow", "2026-13-01T00:00:00Z", "2026-12-32T00:00:00Z", "2026-12-01T18:00Z",
                   "2026-12-01T18:00:00+24:00", "2026-12-01T18:00:00+0200", "2026-12-01T25:00:00Z", "1764612000", ""]


def status_answer(expires):
    return ok({"geni_urn": SLICE, "geni_slivers": [
        {"geni_sliver_urn": "urn:publicid:IDN+am.example+sliver+1", "geni_allocation_status": "geni_provisioned",
         "geni_operational_status": "geni_ready", "geni_expires": expires, "geni_error": ""}]})


@pytest.mark.parametrize("text, when, source", RFC3339_LEGAL, ids=[str(r[0]).strip() for r in RFC3339_LEGAL])
def test_every_legal_rfc3339_form_is_read(make_client, text, when, source):
    assert parse_rfc3339(text) == when and parse_rfc3339(text).tzinfo == UTC
    c, _ = make_client({"Status": status_answer(text)})
    value = c.am(AM, "Status", SLICE, {})                         # accepted in an answer
    assert parse_rfc3339(value["geni_slivers"][0]["geni_expires"]) == when


@pytest.mark.parametrize("text", RFC3339_ILLEGAL)
def test_an_illegal_time_is_refused_in_one_line(make_client, text):
    with pytest.raises(ValueError):
        parse_rfc3339(text)
    c, _ = make_client({"Status": status_answer(text)})
    with pytest.raises(AnswerError) as exc:
        c.am(AM, "Status", SLICE, {})
    msg = str(exc.value)
    assert msg.startswith(f"{AM}: Status: geni_slivers[0] (urn:publicid:IDN+am.example+sliver+1) geni_expires ")
    assert "expected an RFC 3339 time" in msg and "\n" not in msg


def test_renew_reads_the_expiry_in_any_legal_form(spec, tmp_path, make_client):
    """renew keeps a lease that already ends after the end asked; the slivers' expiry is read
    from Status in gcf's form (fractional seconds, +00:00) and another offset."""
    far = dt.datetime.now(UTC).replace(microsecond=250000) + dt.timedelta(hours=30)
    forms = [far.isoformat(), far.astimezone(dt.timezone(dt.timedelta(hours=-7))).isoformat().replace("T", "t")]
    for form in forms:
        c, rec = make_client({"Status": status_answer(form)})
        site = get_site("instageni", spec, tmp_path / form[:4], {"env": geni_env(tmp_path), "client": c, "aggregate": "cl-utah",
                                                         "user": "ingino"})
        site.save_state({"slice_name": "s1", "slice_urn": SLICE, "aggregate": "cl-utah", "aggregate_url": AM,
                         "expires": "2026-01-01T00:00:00Z"})
        site.renew(5)
        assert [m for _, m, _ in rec.calls] == ["get_credentials", "get_credentials", "Status"]   # nothing renewed
        assert site.load_state()["expires"] == far.strftime("%Y-%m-%dT%H:%M:%SZ")


# --- GetVersion: booleans in any legal form, geni_allocate ---------------------------------
def version(**over):
    v = {"geni_api": 3, "geni_api_versions": {"3": AM},
         "geni_request_rspec_versions": [{"type": "GENI", "version": "3", "schema": "http://www.geni.net/resources/rspec/3/request.xsd",
                                          "namespace": "http://www.geni.net/resources/rspec/3", "extensions": []}],
         "geni_ad_rspec_versions": [{"type": "GENI", "version": "3", "schema": "http://www.geni.net/resources/rspec/3/ad.xsd",
                                     "namespace": "http://www.geni.net/resources/rspec/3", "extensions": []}],
         "geni_credential_types": [{"geni_type": "geni_sfa", "geni_version": "3"}]}
    v.update(over)
    return {k: x for k, x in v.items() if x is not None}


#: (GetVersion's fields, (single_allocation, allocate) read, where the answer comes from).
VERSION_LEGAL = [
    ({"geni_single_allocation": "1", "geni_allocate": "geni_disjoint"}, (True, "geni_disjoint"),
     "ProtoGENI's GeniAM (CloudLab, InstaGENI): the string \"1\" and geni_disjoint"),
    ({"geni_single_allocation": True, "geni_allocate": "geni_single"}, (True, "geni_single"),
     "GAPI_AM_API_V3 GetVersion: an XML-RPC boolean"),
    ({"geni_single_allocation": False, "geni_allocate": "geni_many"}, (False, "geni_many"), "the XML-RPC boolean false"),
    ({"geni_single_allocation": 0, "geni_allocate": "geni_many"}, (False, "geni_many"), "SFA's aggregate: the int 0"),
    ({"geni_single_allocation": 1}, (True, "geni_single"), "the int 1; geni_allocate absent"),
    ({"geni_single_allocation": "0", "geni_allocate": "GENI_MANY"}, (False, "geni_many"), "the string \"0\""),
    ({}, (False, "geni_single"), "geni-tools' gcf am3: both absent, the specification's defaults (false, geni_single)"),
    ({"geni_api": "3"}, (False, "geni_single"), "geni_api as the string \"3\" (SFA)"),
]
VERSION_ILLEGAL = [
    ({"geni_single_allocation": "yes"}, "geni_single_allocation 'yes': expected a boolean"),
    ({"geni_single_allocation": 2}, "geni_single_allocation 2: expected a boolean"),
    ({"geni_allocate": "geni_some"}, "geni_allocate 'geni_some': expected one of geni_single, geni_disjoint, geni_many"),
    ({"geni_api": 2, "geni_api_versions": {"2": AM, "3": AM + "/3.0"}},
     f"geni_api 2: expected 3, the AM API netrepro speaks; this aggregate serves it at {AM}/3.0"),
    ({"geni_api": None}, "geni_api None: expected 3"),
    ({"geni_request_rspec_versions": [{"type": "ProtoGENI", "version": "2"}]},
     "geni_request_rspec_versions [{'type': 'ProtoGENI', 'version': '2'}]: expected a list naming type GENI version 3"),
]


@pytest.mark.parametrize("fields, read, source", VERSION_LEGAL, ids=[r[2][:40] for r in VERSION_LEGAL])
def test_getversion_legal_forms(make_client, fields, read, source):
    c, rec = make_client({"GetVersion": {**ok(version(**fields)), "geni_api": 3}})
    v = c.get_version(AM)
    assert (v.api, v.single_allocation, v.allocate) == (3, *read)
    assert rec.calls == [(AM, "GetVersion", ({},))]                 # options: a struct, no credential


@pytest.mark.parametrize("fields, words", VERSION_ILLEGAL)
def test_getversion_illegal_answers_are_refused_in_one_line(make_client, fields, words):
    c, _ = make_client({"GetVersion": ok(version(**fields))})
    with pytest.raises(AnswerError) as exc:
        c.get_version(AM)
    assert str(exc.value).startswith(f"{AM}: GetVersion: {words}") and "\n" not in str(exc.value)


# --- the GENI code, where the references put it --------------------------------------------
#: (answer, code the client reads, words of its message, source).
CODES = [
    ({"code": {"geni_code": 7, "am_type": "protogeni", "am_code": 7,
               "protogeni_error_url": "https://boss.example/spewlogfile.php3?logfile=x"},
      "value": 0, "output": "Must pass only slice URN"},
     7, "Status: GENI error 7 (REFUSED): Must pass only slice URN (log: https://boss.example/spewlogfile.php3?logfile=x)",
     "ProtoGENI: code struct with am_type, am_code and its log (omni's _get_pg_log)"),
    ({"code": {"geni_code": 12}, "value": None, "output": "No such slice here"}, 12,
     "Status: GENI error 12 (SEARCHFAILED): No such slice here", "GAPI_AM_API_V3 Return Structure: code.geni_code"),
    ({"code": 2, "value": None, "output": "boom\nsecond line"}, 2, "Status: GENI error 2 (ERROR): boom / second line",
     "an int code: the Federation API v2 return structure; omni reads it from an AM too"),
    ({"code": {"geni_code": 2}, "value": None}, 2, "Status: GENI error 2 (ERROR): ", "no output"),
]


@pytest.mark.parametrize("answer, code, words, source", CODES, ids=[r[3][:30] for r in CODES])
def test_geni_code_in_either_place(make_client, answer, code, words, source):
    c, _ = make_client({"Status": answer})
    with pytest.raises(GeniError) as exc:
        c.am(AM, "Status", SLICE, {})
    assert exc.value.code == code and str(exc.value) == words


def test_success_with_an_int_code_and_busy_then_success(make_client):
    lines = []
    answers = iter([{"code": {"geni_code": 14, "am_type": "protogeni", "am_code": 14}, "value": None, "output": "slice is busy"},
                    {"code": 0, "value": {"geni_urn": SLICE, "geni_slivers": []}, "output": None}])
    c, rec = make_client({"Status": lambda *a: next(answers)}, warn=lines.append)
    assert c.am(AM, "Status", SLICE, {}) == {"geni_urn": SLICE, "geni_slivers": []}
    assert len(lines) == 1 and "busy (slice is busy); trying again in 2 s" in lines[0]


@pytest.mark.parametrize("answer, words", [
    ({"value": {}, "output": ""}, "code None: expected an int GENI code"),
    ({"code": "0", "value": {}}, "code '0': expected an int GENI code"),
    ({"code": {"am_code": 0}, "value": {}}, "code.geni_code None: expected an int GENI code"),
    ({"code": {"geni_code": True}, "value": {}}, "code.geni_code True: expected an int GENI code"),
    (["not", "a", "struct"], "answer ['not', 'a', 'struct']: expected a GENI result {code, value, output}"),
])
def test_an_answer_without_a_code_is_refused_in_one_line(make_client, answer, words):
    c, _ = make_client({"Status": answer})
    with pytest.raises(AnswerError) as exc:
        c.am(AM, "Status", SLICE, {})
    assert str(exc.value).startswith(f"{AM}: Status: {words}") and "\n" not in str(exc.value)


# --- the values read: Provision's struct, Describe, Status, the credentials ----------------
SLIVER = {"geni_sliver_urn": "urn:publicid:IDN+am.example+sliver+1", "geni_allocation_status": "geni_provisioned",
          "geni_operational_status": "geni_notready", "geni_expires": "2026-12-01T18:00:00Z", "geni_error": ""}


@pytest.mark.parametrize("method, value, words", [
    ("Provision", [SLIVER], "value [{"),                               # the bare list: neither the spec nor ProtoGENI
    ("Provision", {"geni_slivers": [SLIVER]}, "geni_rspec None: expected a manifest RSpec"),
    ("Provision", {"geni_rspec": "<rspec/>", "geni_slivers": SLIVER}, "geni_slivers {"),
    ("Describe", "<rspec/>", "value '<rspec/>': expected the struct {geni_rspec, geni_slivers}"),
    ("Status", {"geni_urn": SLICE, "geni_slivers": [{**SLIVER, "geni_operational_status": 3}]},
     "geni_slivers[0] (urn:publicid:IDN+am.example+sliver+1) geni_operational_status 3: expected a string"),
    ("Status", {"geni_urn": SLICE}, "geni_slivers None: expected a list of sliver structs"),
    ("Allocate", {"geni_rspec": "<rspec/>", "geni_slivers": ["x"]}, "geni_slivers[0] 'x': expected a sliver struct"),
])
def test_illegal_values_are_refused_in_one_line(make_client, method, value, words):
    c, _ = make_client({method: ok(value)})
    with pytest.raises(AnswerError) as exc:
        c.am(AM, method, SLICE, *(("<rspec/>", {}) if method == "Allocate" else ({},)))
    assert str(exc.value).startswith(f"{AM}: {method}: {words}") and "\n" not in str(exc.value)


@pytest.mark.parametrize("method, value", [
    ("Provision", {"geni_rspec": "<rspec/>", "geni_slivers": [SLIVER]}),           # GAPI_AM_API_V3 Provision; ProtoGENI
    ("Allocate", {"geni_rspec": "<rspec/>", "geni_slivers": [{k: SLIVER[k] for k in ("geni_sliver_urn", "geni_expires",
                                                                                      "geni_allocation_status")}]}),  # ProtoGENI: no op status
    ("Describe", {"geni_rspec": "<rspec/>", "geni_urn": SLICE, "geni_slivers": []}),   # ProtoGENI: a slice with nothing here
    ("Status", {"geni_urn": SLICE, "geni_slivers": [{**SLIVER, "geni_operational_status": "unknown"}]}),  # ProtoGENI GetOpState
])
def test_legal_values_are_accepted(make_client, method, value):
    c, _ = make_client({method: ok(value)})
    assert c.am(AM, method, SLICE, *(("<rspec/>", {}) if method == "Allocate" else ({},))) == value


@pytest.mark.parametrize("creds, got", [
    ([{"geni_type": "geni_sfa", "geni_version": "3", "geni_value": "<sfa/>"}], "<sfa/>"),
    ([{"geni_type": "geni_abac", "geni_version": "1", "geni_value": "<abac/>"},
      {"geni_type": "GENI_SFA", "geni_version": "2", "geni_value": "<sfa/>"}], "<sfa/>"),   # type case-insensitive
])
def test_the_sfa_credential_is_taken_from_the_list(make_client, creds, got):
    c, _ = make_client({"get_credentials": {"code": 0, "value": creds, "output": ""}})
    assert c.user_credential() == got


def test_no_sfa_credential_is_refused_in_one_line(make_client):
    c, _ = make_client({"get_credentials": {"code": 0, "value": [], "output": ""}})
    with pytest.raises(AnswerError, match=rf"^{MA}: get_credentials: value \[\]: expected a list of credentials"):
        c.user_credential()


# --- the site through the client: every call, an aggregate that starts slivers itself -----
CL_UTAH = "https://www.utah.cloudlab.us:12369/protogeni/xmlrpc/am/3.0"
CL_SLICE = "urn:publicid:IDN+emulab.net:netrepro+slice+nr-pievsred-alice"


def lifecycle_answers(manifest: str, provisioned_state: str = "geni_notready", poa=None, **over):
    """A ProtoGENI-like aggregate and slice authority as answer data: GetVersion as GeniAM
    writes it, Provision's struct, Status ready at once."""
    def slivers(state):
        return [{**SLIVER, "geni_sliver_urn": f"urn:publicid:IDN+utah.cloudlab.us+sliver+{i}",
                 "geni_operational_status": state} for i in range(7)]
    answers = {
        "GetVersion": {**ok(version(geni_single_allocation="1", geni_allocate="geni_disjoint")), "geni_api": 3},
        "create": {"code": 0, "value": {"SLICE_URN": CL_SLICE}, "output": ""},
        "update": {"code": 0, "value": None, "output": ""},
        "Allocate": ok({"geni_rspec": manifest, "geni_slivers": slivers("geni_pending_allocation")}),
        "Provision": ok({"geni_rspec": manifest, "geni_slivers": slivers(provisioned_state)}),
        "PerformOperationalAction": poa or ok(slivers("geni_ready")),
        "Status": ok({"geni_urn": CL_SLICE, "geni_slivers": slivers("geni_ready")}),
        "Describe": ok({"geni_rspec": manifest, "geni_urn": CL_SLICE, "geni_slivers": slivers("geni_ready")}),
        "Renew": ok(slivers("geni_ready")),
        "Delete": ok([{**s, "geni_allocation_status": "geni_unallocated"} for s in slivers("geni_ready")]),
    }
    return {**answers, **over}


@pytest.fixture
def manifest(spec, tmp_path):
    return test_manifest.seven_node_manifest(MANIFEST, spec, tmp_path / "m.xml").read_text()


def test_every_call_carries_what_the_specification_requires(spec, tmp_path, make_client, manifest, monkeypatch):
    """reserve, wait_ready, renew and release through the client: each AM API v3 call's
    arguments in the specification's order and types (GAPI_AM_API_V3: urns an array holding
    the slice URN only, credentials an array of {geni_type, geni_version, geni_value}, options
    a struct last with what the method requires)."""
    monkeypatch.setattr("time.sleep", lambda s: None)
    c, rec = make_client(lifecycle_answers(manifest))
    site = get_site("instageni", spec, tmp_path / "run", {"env": geni_env(tmp_path), "client": c, "aggregate": "cl-utah",
                                                         "user": "ingino"})
    site.reserve()
    site.wait_ready(timeout_s=60, interval_s=1)
    assert set(site.logins()) == set(spec.nodes)
    site.renew(30)
    site.release()
    calls = [(m, a) for url, m, a in rec.calls if url == CL_UTAH]
    assert [m for m, _ in calls] == ["GetVersion", "Allocate", "Provision", "PerformOperationalAction", "Status",
                                     "Describe", "Status", "Renew", "Delete"]
    cred = [{"geni_type": "geni_sfa", "geni_version": "3", "geni_value": "<cred/>"}]
    for m, a in calls[1:]:
        assert a[1] == cred and isinstance(a[-1], dict), m
        assert a[0] == (CL_SLICE if m == "Allocate" else [CL_SLICE]), m   # never a sliver URN (ProtoGENI: 7 REFUSED)
    args = dict(calls)
    assert args["Allocate"][2] == site.request_xml() and set(args["Allocate"][3]) == {"geni_end_time"}
    parse_rfc3339(args["Allocate"][3]["geni_end_time"])
    prov = args["Provision"][2]
    assert prov["geni_rspec_version"] == {"type": "GENI", "version": "3"}
    assert prov["geni_users"][0]["urn"] == "urn:publicid:IDN+emulab.net+user+alice" and prov["geni_users"][0]["keys"]
    assert args["PerformOperationalAction"][2:] == ("geni_start", {"geni_best_effort": True})
    assert args["Describe"][2] == {"geni_rspec_version": {"type": "GENI", "version": "3"}}
    parse_rfc3339(args["Renew"][2])
    assert not site.state_file.exists()
    # The slice authority (Federation API v2 "Slice Authority" and "Member Authority":
    # get_credentials(urn, credentials, options), create(type, credentials, options {fields}),
    # update(type, urn, credentials, options {fields}); SLICE_NAME and SLICE_PROJECT_URN
    # required at create, times RFC 3339).
    sa = [(url, m, a) for url, m, a in rec.calls if url != CL_UTAH]
    assert [m for _, m, _ in sa] == ["get_credentials", "create", "get_credentials", "update"]
    assert sa[0][2] == ("urn:publicid:IDN+emulab.net+user+alice", [], {})
    kind, creds, opts = sa[1][2]
    assert kind == "SLICE" and creds == cred and set(opts) == {"fields"}
    assert opts["fields"]["SLICE_NAME"] == "nr-pievsred-alice"
    assert opts["fields"]["SLICE_PROJECT_URN"] == "urn:publicid:IDN+emulab.net+project+netrepro"
    parse_rfc3339(opts["fields"]["SLICE_EXPIRATION"])
    assert sa[2][2] == (CL_SLICE, cred, {})
    kind, urn, creds, opts = sa[3][2]
    assert (kind, urn, len(creds)) == ("SLICE", CL_SLICE, 2) and set(opts["fields"]) == {"SLICE_EXPIRATION"}


@pytest.mark.parametrize("state", ["geni_ready", "geni_configuring"])
def test_an_aggregate_that_starts_slivers_itself_is_not_asked_to(spec, tmp_path, make_client, manifest, monkeypatch,
                                                                  capsys, state):
    monkeypatch.setattr("time.sleep", lambda s: None)
    c, rec = make_client(lifecycle_answers(manifest, provisioned_state=state))
    site = get_site("instageni", spec, tmp_path / "run", {"env": geni_env(tmp_path), "client": c, "aggregate": "cl-utah",
                                                         "user": "ingino"})
    site.reserve()
    site.wait_ready(timeout_s=60, interval_s=1)
    assert "PerformOperationalAction" not in [m for _, m, _ in rec.calls]
    assert f"the aggregate started the slivers itself ({state}); no geni_start needed" in capsys.readouterr().err
    assert site.logins()


def test_geni_start_refused_by_an_aggregate_that_started_them_is_not_a_failure(spec, tmp_path, make_client, manifest,
                                                                                monkeypatch, capsys):
    """geni-tools' gcf answers geni_start on slivers not geni_notready with an error
    (am3 PerformOperationalAction, without geni_best_effort); the slivers are then left to Status."""
    monkeypatch.setattr("time.sleep", lambda s: None)
    refused = {"code": {"geni_code": 13}, "value": None, "output": "Sliver is not in the right state for action geni_start"}
    c, rec = make_client(lifecycle_answers(manifest, poa=refused))
    site = get_site("instageni", spec, tmp_path / "run", {"env": geni_env(tmp_path), "client": c, "aggregate": "cl-utah",
                                                         "user": "ingino"})
    site.reserve()
    site.wait_ready(timeout_s=60, interval_s=1)
    assert "geni_start: PerformOperationalAction: GENI error 13" in capsys.readouterr().err
    assert site.logins() and "Delete" not in [m for _, m, _ in rec.calls]


@pytest.mark.parametrize("mode, words", [
    ("geni_single", "it takes one Allocate per slice (geni_allocate geni_single)"),
    ("geni_disjoint", "it takes another Allocate only for resources disjoint from them (geni_allocate geni_disjoint)"),
    ("geni_many", "netrepro acts on the slice as a whole (Status, Provision, Delete)"),
])
def test_a_slice_that_already_holds_slivers_is_refused_before_allocate(spec, tmp_path, make_client, manifest, mode, words):
    """The slice authority answers 17 ALREADYEXISTS (a slice of that name) and Status lists
    slivers in it: nothing is allocated, whatever geni_allocate says, and the line says why."""
    c, rec = make_client(lifecycle_answers(
        manifest, GetVersion=ok(version(geni_allocate=mode)),
        create={"code": 17, "value": None, "output": "slice already exists"}))
    site = get_site("instageni", spec, tmp_path / "run", {"env": geni_env(tmp_path), "client": c, "aggregate": "cl-utah",
                                                         "user": "ingino"})
    with pytest.raises(SiteError) as exc:
        site.reserve()
    msg = str(exc.value)
    assert msg.startswith(f"slice nr-pievsred-alice ({CL_SLICE}) already holds 7 sliver(s) on aggregate cl-utah ({CL_UTAH}) "
                          f"and {words}: nothing was requested") and "\n" not in msg
    assert [m for _, m, _ in rec.calls if m in ("Allocate", "Delete")] == [] and not site.load_state().get("slice_urn")


def test_an_existing_slice_with_nothing_here_is_used(spec, tmp_path, make_client, manifest, monkeypatch):
    """ALREADYEXISTS at the slice authority, 12 SEARCHFAILED at the aggregate's Status (ProtoGENI's
    Describe: "No such slice here"): the slice is ours to allocate into."""
    monkeypatch.setattr("time.sleep", lambda s: None)
    statuses = iter([{"code": {"geni_code": 12}, "value": None, "output": "No such slice here"}])
    ready = lifecycle_answers(manifest)["Status"]
    c, rec = make_client(lifecycle_answers(manifest, create={"code": 17, "value": None, "output": "exists"},
                                           Status=lambda *a: next(statuses, ready)))
    site = get_site("instageni", spec, tmp_path / "run", {"env": geni_env(tmp_path), "client": c, "aggregate": "cl-utah",
                                                         "user": "ingino"})
    site.reserve()
    assert [m for _, m, _ in rec.calls if m[0].isupper()] == ["GetVersion", "Status", "Allocate", "Provision",
                                                              "PerformOperationalAction"]


def test_the_readiness_progress_counts_the_nodes_not_the_lans(spec, tmp_path, make_client, manifest, monkeypatch, capsys):
    """pie-vs-red at an aggregate: 7 VMs and 2 LANs are 9 slivers (the test aggregate's Allocate
    gives each <node> and each <link> a sliver_id, as ProtoGENI does); the progress counts the
    VMs, which Allocate's manifest names (``0/7 ... 7/7``, where it said ``0/9 ... 9/9``), and
    the slice is ready only once the LANs are too."""
    from lxml import etree

    monkeypatch.setattr("time.sleep", lambda s: None)
    root = etree.fromstring(manifest.encode())
    nodes = [e for e in root.iter() if etree.QName(e).localname == "node"]
    for i, node in enumerate(nodes):
        node.set("sliver_id", f"urn:publicid:IDN+utah.cloudlab.us+sliver+{4101 + i}")
    manifest = etree.tostring(root, encoding="unicode")
    lans = [f"urn:publicid:IDN+utah.cloudlab.us+sliver+{4201 + i}" for i in range(2)]
    urns = [n.get("sliver_id") for n in nodes] + lans
    assert len(nodes) == 7

    def slivers(states):
        return [{**SLIVER, "geni_sliver_urn": u, "geni_operational_status": st} for u, st in zip(urns, states)]
    polls = iter([["geni_notready"] * 9, ["geni_ready"] * 3 + ["geni_notready"] * 6,
                  ["geni_ready"] * 7 + ["geni_notready"] * 2, ["geni_ready"] * 9])
    answers = lifecycle_answers(manifest, Status=lambda *a: ok({"geni_urn": CL_SLICE, "geni_slivers": slivers(next(polls))}))
    answers["Allocate"] = ok({"geni_rspec": manifest, "geni_slivers": slivers(["geni_pending_allocation"] * 9)})
    c, _ = make_client(answers)
    site = get_site("instageni", spec, tmp_path / "run", {"env": geni_env(tmp_path), "client": c, "aggregate": "cl-utah",
                                                         "user": "ingino"})
    site.reserve()
    capsys.readouterr()
    site.wait_ready(timeout_s=60, interval_s=1)
    said = [ln.split(": ", 1)[1].rsplit(" (", 1)[0] for ln in capsys.readouterr().err.splitlines() if "ready" in ln]
    assert said == ["0/7 ready, 7 geni_notready", "3/7 ready, 4 geni_notready", "7/7 ready, 2 link slivers not ready",
                    "7/7 ready"]
