"""netrepro's GENI AM API v3 client (netrepro.sites.instageni.client) against answers given as
data: what each call sends (the arguments and options GAPI_AM_API_V3 requires) and which answers
it accepts (every form the specification allows) or refuses (in one line naming the aggregate,
the method and the field).

The client's XML-RPC proxy is replaced by :class:`Recorder`, which records each call and answers
from a table; nothing is reached over the network (the over-the-wire tests are
tests/test_instageni_wire*.py).
"""

from __future__ import annotations

import pytest

from netrepro.sites.instageni import client as geni_client
from netrepro.sites.instageni.aggregates import TLSPolicy
from netrepro.sites.instageni.client import GeniClient
from netrepro.sites.instageni.credentials import GeniCredentials

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
                    return a(*args) if callable(a) else a
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
