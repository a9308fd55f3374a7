"""Shared site behaviour: plans without credentials, instageni's offline logic (credentials,
aggregates, waiting, state), lazy imports of optional dependencies."""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from pathlib import Path

import pytest
from lxml import etree

from netrepro.cli import site_commands as cli_sites
from netrepro.sites.instageni import rspec
from netrepro.sites import SITES, get_site, site_options
from netrepro.sites.base import SiteError
from netrepro.sites.instageni.aggregates import TLSPolicy, load_aggregates, resolve_aggregate, tls_context
from netrepro.sites.instageni.client import AggregateVersion, GeniClient, GeniError, poll_until, summarize_status
from netrepro.sites.instageni.credentials import load_client_cert, load_credentials
from netrepro.sites.instageni.site import default_slice_name
from netrepro.experiment.spec import SpecError

from testbed import pki

RSPEC_DATA = Path(__file__).resolve().parent / "data" / "rspec"  # copies of public RSpecs, see SOURCE.md
MANIFEST = RSPEC_DATA / "manifest" / "cloudlab-utah-2node-CS244-oncache.xml"


@pytest.mark.parametrize("site", ["instageni", "fabric", "static"])
def test_plan_for_every_site_names_every_node_and_address(spec, site):
    text = cli_sites.plan_text(spec, site, {"fabric_site": "UTAH"} if site == "fabric" else {})
    for node, nd in spec.nodes.items():
        assert node in text
        for itf in nd.interfaces.values():   # "10.10.1.254/24": fabric's plan shows the address bare
            assert itf.ip in text


def test_instageni_plan_is_a_valid_request_bound_to_the_aggregate(spec):
    text = cli_sites.plan_text(spec, "instageni", {"aggregate": "cl-utah", "image": "urn:publicid:IDN+emulab.net+image+emulab-ops//UBUNTU24-64-STD"})
    root = etree.fromstring(text.encode())
    assert {n.get("component_manager_id") for n in root.iter("{%s}node" % rspec.GENI_V3_NS)} == {"urn:publicid:IDN+utah.cloudlab.us+authority+cm"}
    assert "UBUNTU24-64-STD" in text and "https://www.utah.cloudlab.us:12369/protogeni/xmlrpc/am/3.0" in text
    assert rspec.validate_request(text, str(RSPEC_DATA / "schemas" / "protogeni-rspec-2" / "request.xsd")) == []


def test_aggregates_config(tmp_path):
    conf = load_aggregates()
    assert conf["default"] in conf["aggregates"] and len(conf["aggregates"]) > 30
    assert resolve_aggregate("ig-ukymcv")[1]["urn"] == "urn:publicid:IDN+mcv.sdn.uky.edu+authority+cm"
    with pytest.raises(SiteError, match=r"AGGREGATE=nowhere: unknown aggregate; expected one of: emulab, powder"):
        resolve_aggregate("nowhere")
    extra = tmp_path / "aggs.yml"
    extra.write_text("aggregates:\n  mine: {urn: 'urn:publicid:IDN+lab.example+authority+cm', url: 'https://lab.example:12369/protogeni/xmlrpc/am/3.0'}\n")
    assert "mine" in load_aggregates(extra)["aggregates"]
    extra.write_text("aggregates:\n  mine: {urn: 'lab', url: 'http://lab.example'}\n")
    with pytest.raises(SiteError, match=r"aggs.yml: aggregates.mine.urn: expected urn:publicid:IDN\+<domain>\+authority\+cm, got 'lab'"):
        load_aggregates(extra)


def test_reserve_without_credentials_fails_at_once(spec, tmp_path):
    site = get_site("instageni", spec, tmp_path / "run", {"env": {"NETREPRO_GENI_CONTEXT": str(tmp_path / "none.json")}})
    with pytest.raises(SiteError) as exc:
        site.reserve()
    msg = str(exc.value)
    for piece in ("NETREPRO_GENI_CERT", "NETREPRO_GENI_USER", "NETREPRO_GENI_PROJECT", "NETREPRO_GENI_PUBKEY", str(tmp_path / "none.json"), "docs/sites/instageni.md"):
        assert piece in msg
    assert "\n" not in msg and not site.state_file.exists()


def ssh_keypair(directory: Path, name: str = "id") -> Path:
    """A real ed25519 key pair (ssh-keygen, no passphrase) at directory/name{,.pub}."""
    key = directory / name
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", str(key)], check=True)
    return key


def make_cert(cn: str, issuer=None, ip: str | None = None, ca: bool = False):
    """(certificate, key) of the test PKI (tests/testbed/pki.py): self-signed, or signed by
    ``issuer`` = (certificate, key); ``ip`` as a subjectAltName; ``ca`` marks a CA. Valid for one day."""
    import ipaddress

    from cryptography import x509

    return pki.make_cert(cn, issuer, ca=ca, sans=[x509.IPAddress(ipaddress.ip_address(ip))] if ip else None)


pem = pki.pem


def portal_pem(path: Path, passphrase: bytes | None = b"portal secret") -> Path:
    """A portal-style PEM: the user's certificate followed by its (encrypted) private key."""
    path.write_bytes(pem(*make_cert("alice"), passphrase=passphrase))
    return path


def geni_env(tmp_path, **over):
    portal_pem(tmp_path / "cloudlab.pem", passphrase=None)
    ssh_keypair(tmp_path, "id")
    ctx = {"framework": "emulab-ch2", "cert-path": str(tmp_path / "cloudlab.pem"), "key-path": str(tmp_path / "cloudlab.pem"),
           "user-name": "alice", "user-urn": "urn:publicid:IDN+emulab.net+user+alice",
           "user-pubkeypath": str(tmp_path / "id.pub"), "project": "netrepro"}
    (tmp_path / "context.json").write_text(json.dumps(ctx))
    return {"NETREPRO_GENI_CONTEXT": str(tmp_path / "context.json"), **over}


def test_credentials_from_geni_lib_context_and_env(tmp_path):
    c = load_credentials(geni_env(tmp_path))
    assert (c.user, c.project, c.cert, c.key, c.ssh_key) == ("alice", "netrepro", str(tmp_path / "cloudlab.pem"), str(tmp_path / "cloudlab.pem"), str(tmp_path / "id"))
    c = load_credentials(geni_env(tmp_path, NETREPRO_GENI_PROJECT="other", NETREPRO_GENI_KEY_PASSPHRASE="pw"))
    assert (c.project, c.passphrase) == ("other", "pw")
    (tmp_path / "context.json").write_text("{not json")
    with pytest.raises(SiteError, match=r"context.json: line 1: not valid JSON"):
        load_credentials({"NETREPRO_GENI_CONTEXT": str(tmp_path / "context.json")})


def test_status_summary():
    st = {"geni_slivers": [{"geni_operational_status": "geni_ready"}] * 3 + [{"geni_operational_status": "geni_configuring"}] * 4}
    assert summarize_status(st) == (False, None, "3/7 ready, 4 geni_configuring")
    assert summarize_status({"geni_slivers": [{"geni_operational_status": "geni_ready"}] * 7})[:2] == (True, None)
    done, failed, _ = summarize_status({"geni_slivers": [{"geni_operational_status": "geni_failed", "geni_sliver_urn": "urn:x", "geni_error": "no Xen host"}]})
    assert not done and failed == "urn:x: no Xen host"
    assert summarize_status({"geni_slivers": []})[0] is False


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t

    def sleep(self, s):
        self.t += s


def test_poll_until_ready_prints_changes_only():
    clock, lines = FakeClock(), []
    seq = iter([(False, None, "0/7 ready"), (False, None, "0/7 ready"), (False, None, "5/7 ready"), (True, None, "7/7 ready")])
    assert poll_until(lambda: next(seq), 600, 20, "slice s", lines.append, clock, clock.sleep) == "7/7 ready"
    assert lines == ["slice s: 0/7 ready (0 s)", "slice s: 5/7 ready (40 s)", "slice s: 7/7 ready (60 s)"]


def test_poll_until_times_out_and_fails():
    clock = FakeClock()
    with pytest.raises(SiteError, match=r"slice s: not ready after 100 s \(2/7 ready\)"):
        poll_until(lambda: (False, None, "2/7 ready"), 100, 20, "slice s", lambda _: None, clock, clock.sleep)
    assert clock.t <= 100
    with pytest.raises(SiteError, match="slice s: failed: urn:x: boom"):
        poll_until(lambda: (False, "urn:x: boom", "0/7"), 100, 20, "slice s", lambda _: None, clock, clock.sleep)


class FakeGeni:
    """Records the calls a GeniClient would make; answers like an aggregate."""

    def __init__(self, manifest: str, statuses):
        self.calls, self.manifest, self.statuses, self.deleted = [], manifest, iter(statuses), False

    def get_version(self, url):
        self.calls.append(("GetVersion", url))
        return AggregateVersion(3, True, "geni_disjoint")   # as ProtoGENI's GeniAM advertises

    def user_credential(self):
        self.calls.append(("get_credentials", "user"))

    def create_slice(self, name, project_urn, expires):
        self.calls.append(("create_slice", name, project_urn))

    def renew_slice(self, slice_urn, expires):
        self.calls.append(("renew_slice", slice_urn))

    def am(self, url, method, slice_urn, *args):
        self.calls.append((method, slice_urn))
        if method == "Status":
            return next(self.statuses, {"geni_slivers": []})   # renew reads the expiry too
        if method in ("Describe", "Provision"):
            return {"geni_rspec": self.manifest, "geni_slivers": [{"geni_operational_status": "geni_notready"}] * 7}
        if method == "Delete":
            if self.deleted:
                raise GeniError("Delete", 12, "no such slice")
            self.deleted = True
        return {}


def test_instageni_lifecycle_with_a_fake_aggregate(spec, tmp_path, monkeypatch):
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import test_manifest as tm
    manifest = tm.seven_node_manifest(MANIFEST, spec, tmp_path / "m.xml").read_text()
    ready = {"geni_slivers": [{"geni_operational_status": "geni_ready"}] * 7}
    fake = FakeGeni(manifest, [{"geni_slivers": [{"geni_operational_status": "geni_notready"}] * 7}, ready])
    monkeypatch.setattr("time.sleep", lambda s: None)
    opts = {"env": geni_env(tmp_path), "client": fake, "aggregate": "cl-utah", "user": "ingino", "hours": "3"}
    site = get_site("instageni", spec, tmp_path / "run", opts)
    site.reserve()
    st = site.load_state()
    assert st["slice_name"] == default_slice_name("pie-vs-red", "alice") == "nr-pievsred-alice"
    assert st["slice_urn"] == "urn:publicid:IDN+emulab.net:netrepro+slice+nr-pievsred-alice"
    assert (st["aggregate"], st["aggregate_url"]) == ("cl-utah", "https://www.utah.cloudlab.us:12369/protogeni/xmlrpc/am/3.0")
    assert [c[0] for c in fake.calls] == ["GetVersion", "get_credentials", "create_slice", "Allocate", "Provision",
                                          "PerformOperationalAction"]
    site.reserve()                                   # idempotent: nothing new requested
    assert len(fake.calls) == 6
    site.wait_ready(timeout_s=600, interval_s=1)
    logins = site.logins()
    assert set(logins) == set(spec.nodes) and logins["router"].user == "ingino" and logins["router"].key_file == str(tmp_path / "id")
    assert (site.state_dir / "manifest.xml").read_text() == manifest
    # the request as sent and the manifest as answered, kept with each run (the run folder's site/)
    docs = site.documents()
    assert sorted(docs) == ["manifest.xml", "request.xml"] and docs["manifest.xml"].read_text() == manifest
    assert docs["request.xml"].read_text() == site.request_xml()
    # A new process (new Site object) finds the reservation again.
    again = get_site("instageni", spec, tmp_path / "run", opts)
    assert again.status()["slice_name"] == "nr-pievsred-alice" and again.status()["reserved"] is True
    again.renew(5)
    assert ("Renew", st["slice_urn"]) in fake.calls and again.load_state()["expires"] != st["expires"]
    again.release()
    assert not again.state_file.exists() and again.documents() == {}
    assert {p.name for p in again.state_dir.iterdir()}.isdisjoint({"manifest.xml", "request.xml"})
    again.release()                                   # nothing reserved: harmless
    site.save_state(st)
    site.release()                                    # slivers already gone at the aggregate (code 12)
    assert not site.state_file.exists()


def test_bad_slice_name_and_hours(spec, tmp_path):
    base = {"env": geni_env(tmp_path), "client": FakeGeni("", [])}
    with pytest.raises(SiteError, match=r"option slice_name='Bad_Name': expected 1-19 characters"):
        get_site("instageni", spec, tmp_path / "a", {**base, "slice_name": "Bad_Name"}).reserve()
    with pytest.raises(SiteError, match=r"option hours='-1': expected a number of hours above 0 and at most 336"):
        get_site("instageni", spec, tmp_path / "b", {**base, "hours": "-1"}).reserve()
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.parametrize("opts, pattern", [
    ({"agregate": "apt"}, r"site instageni: unknown option 'agregate'; expected one of the site's options: aggregate: .*; image: "),
    ({"aggregate": "nowhere"}, r"option aggregate='nowhere': expected an aggregate of aggregates.yml .*: emulab, powder"),
    ({"image": "UBUNTU22"}, r"option image='UBUNTU22': expected an image URN"),
    ({"routable_control_ip": "maybe"}, r"option routable_control_ip='maybe': expected true or false"),
    ({"vm_cores": "0"}, r"option vm_cores='0': expected a whole number of vCPUs from 1 to 64"),
    ({"user": "-oProxyCommand=x"}, r"option user='-oProxyCommand=x': expected a login name"),
    ({"key_file": "/nonexistent/key"}, r"option key_file='/nonexistent/key': no such file"),
    ({"client": "fake"}, r"unknown option 'client'"),
])
def test_instageni_options_are_checked_when_the_site_is_made(spec, tmp_path, opts, pattern):
    with pytest.raises(SiteError, match=pattern) as exc:
        get_site("instageni", spec, tmp_path / "run", opts)
    assert "\n" not in str(exc.value) and not (tmp_path / "run").exists()


def test_option_origin_is_named(spec, tmp_path):
    from netrepro.sites import site_options

    opts = site_options(["vm_ram_mb=lots"], {"AGGREGATE": "apt", "FABRIC_SITE": "UTAH"})
    assert dict(opts) == {"aggregate": "apt", "fabric_site": "UTAH", "vm_ram_mb": "lots"}
    with pytest.raises(SiteError, match=r"unknown option 'fabric_site' \(from FABRIC_SITE\)"):
        get_site("instageni", spec, tmp_path, opts)
    del opts["fabric_site"]
    with pytest.raises(SiteError, match=r"option vm_ram_mb='lots' \(from --option\): expected a whole number of MiB"):
        get_site("instageni", spec, tmp_path, opts)


# --- TLS to the aggregates and the portal certificate ------------------------------------------
def test_tls_is_verified_by_default(tmp_path):
    warned = []
    ctx = tls_context(TLSPolicy("aggregate x"), warned.append)
    assert (ctx.verify_mode, ctx.check_hostname, warned) == (ssl.CERT_REQUIRED, True, [])
    ca, ca_key = make_cert("Test CA", ca=True)
    (tmp_path / "ca.pem").write_bytes(pem(ca))
    ctx = tls_context(TLSPolicy("aggregate x", ca_bundle=str(tmp_path / "ca.pem"), source="f: ca_bundle"), warned.append)
    assert (ctx.verify_mode, ctx.check_hostname, warned) == (ssl.CERT_REQUIRED, True, [])
    assert [c["subject"] for c in ctx.get_ca_certs()] == [((("commonName", "Test CA"),),)]


def test_tls_off_only_when_asked_and_warns():
    warned = []
    ctx = tls_context(TLSPolicy("aggregate ig-x", verify=False, source="mine.yml: aggregates.ig-x.verify_tls"), warned.append)
    assert (ctx.verify_mode, ctx.check_hostname) == (ssl.CERT_NONE, False)
    assert len(warned) == 1 and "aggregate ig-x" in warned[0] and "NOT verified" in warned[0]
    assert "mine.yml: aggregates.ig-x.verify_tls" in warned[0]


@pytest.mark.parametrize("content, pattern", [
    (None, r"ca.pem: \(file\): no such file; expected a PEM bundle of the CA certificates to trust \(conf.yml: ca_bundle; "),
    (b"\x00\x01junk", r"ca.pem: \(file\): binary data \(a NUL byte\)"),
    (b"not a certificate", r"ca.pem: \(content\): no certificate"),
    (b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", r"ca.pem: \(content\): not a usable CA bundle"),
])
def test_bad_ca_bundle_is_named(tmp_path, content, pattern):
    if content is not None:
        (tmp_path / "ca.pem").write_bytes(content)
    with pytest.raises(SiteError, match=pattern) as exc:
        tls_context(TLSPolicy("aggregate x", ca_bundle=str(tmp_path / "ca.pem"), source="conf.yml: ca_bundle"))
    assert "\n" not in str(exc.value)


def test_aggregates_tls_settings(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    conf = load_aggregates()
    committed = conf["aggregates"]["emulab"]["tls"]
    assert committed.verify and committed.ca_bundle == str(tmp_path / ".bssw/geni/emulab-ca.pem")
    assert all(a["tls"].verify for a in conf["aggregates"].values())   # never off in the committed file
    assert conf["slice_authority_tls"].ca_bundle == committed.ca_bundle
    extra = tmp_path / "conf" / "aggs.yml"
    extra.parent.mkdir()
    extra.write_text("ca_bundle: null\n"
                     "aggregates:\n"
                     "  mine: {urn: 'urn:publicid:IDN+lab.example+authority+cm', url: 'https://lab.example:12369/am/3.0',"
                     " ca_bundle: lab-ca.pem}\n"
                     "  old: {urn: 'urn:publicid:IDN+old.example+authority+cm', url: 'https://old.example:12369/am/3.0',"
                     " verify_tls: false}\n")
    conf = load_aggregates(extra)
    assert conf["aggregates"]["emulab"]["tls"].ca_bundle is None            # the system trust store
    mine, old = conf["aggregates"]["mine"]["tls"], conf["aggregates"]["old"]["tls"]
    assert (mine.verify, mine.ca_bundle) == (True, str(extra.parent / "lab-ca.pem"))
    assert (old.verify, old.source) == (False, f"{extra}: aggregates.old.verify_tls")


@pytest.mark.parametrize("text, pattern", [
    ("aggregates:\n  mine: {urn: 'urn:publicid:IDN+l+authority+cm', url: 'https://l/am', verify_tsl: false}\n",
     r"aggs.yml: aggregates.mine.verify_tsl: unknown field; expected one of: urn, url, kind, ca_bundle, verify_tls"),
    ("aggregates:\n  mine: {urn: 'urn:publicid:IDN+l+authority+cm', url: 'https://l/am', verify_tls: 'no'}\n",
     r"aggs.yml: aggregates.mine.verify_tls: expected true or false, got 'no'"),
    ("verify_tls: false\n", r"aggs.yml: verify_tls: unknown field; .*verify_tls is set per aggregate"),
    ("ca_bundle: [a, b]\n", r"aggs.yml: ca_bundle: expected a path to a PEM CA bundle, or null"),
    ("aggregates: [\n", r"aggs.yml: line 2: not valid YAML"),
    ("aggregates:\n  a: {urn: 'urn:publicid:IDN+l+authority+cm', url: 'https://l/am'}\n"
     "  a: {urn: 'urn:publicid:IDN+m+authority+cm', url: 'https://m/am'}\n", r"aggs.yml: line 3: not valid YAML: duplicate key 'a'"),
])
def test_bad_aggregates_files(tmp_path, text, pattern):
    (tmp_path / "aggs.yml").write_text(text)
    with pytest.raises((SiteError, SpecError), match=pattern):
        load_aggregates(tmp_path / "aggs.yml")


def test_portal_certificate_and_passphrase(tmp_path):
    from netrepro.sites.instageni.credentials import GeniCredentials

    def creds(path, pw=None):
        return GeniCredentials(str(path), str(path), "alice", "urn:x", "p", "id.pub", None, pw)

    pem_file = portal_pem(tmp_path / "cloudlab.pem", b"portal secret")
    c = creds(pem_file, "portal secret")
    load_client_cert(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), c)
    assert "portal secret" not in repr(c)
    asked = []
    c = creds(pem_file)
    load_client_cert(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), c, ask=lambda prompt: asked.append(prompt) or "portal secret")
    assert asked == [f"Passphrase for {pem_file}: "] and c.passphrase == "portal secret"
    for pw, pattern in ((None, r"cloudlab.pem: \(key\): protected by a passphrase; expected it in NETREPRO_GENI_KEY_PASSPHRASE"),
                        ("wrong", r"cloudlab.pem: \(key\): the passphrase does not decrypt it")):
        with pytest.raises(SiteError, match=pattern) as exc:
            load_client_cert(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), creds(pem_file, pw))
        assert "wrong" not in str(exc.value) and "portal secret" not in str(exc.value)
    other_key = make_cert("bob")[1]
    mismatched = tmp_path / "mismatch.pem"
    mismatched.write_bytes(pem(make_cert("alice")[0]) + pem(key=other_key))
    with pytest.raises(SiteError, match=r"mismatch.pem: \(content\): certificate and key do not load together"):
        load_client_cert(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), creds(mismatched))
    (tmp_path / "junk.pem").write_bytes(b"[]")
    with pytest.raises(SiteError, match=r"junk.pem: \(content\): no certificate; expected the PEM from the portal"):
        load_client_cert(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT), creds(tmp_path / "junk.pem"))


@pytest.fixture
def tls_aggregate(tmp_path):
    """An XML-RPC server over TLS on 127.0.0.1 (loopback only) whose certificate is signed by
    a test CA; answers GetVersion like an aggregate. Yields (url, path of the CA's PEM)."""
    import threading
    from xmlrpc.server import SimpleXMLRPCRequestHandler, SimpleXMLRPCServer

    class Handler(SimpleXMLRPCRequestHandler):
        rpc_paths = ("/am/3.0",)

    ca = make_cert("Test aggregate CA", ca=True)
    cert, key = make_cert("127.0.0.1", issuer=ca, ip="127.0.0.1")
    (tmp_path / "server.pem").write_bytes(pem(cert, key))
    (tmp_path / "ca.pem").write_bytes(pem(ca[0]))
    server = SimpleXMLRPCServer(("127.0.0.1", 0), Handler, logRequests=False, allow_none=True)
    sctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    sctx.load_cert_chain(tmp_path / "server.pem")
    server.socket = sctx.wrap_socket(server.socket, server_side=True)
    server.register_function(lambda *a: {"code": {"geni_code": 0}, "value": {"geni_api": 3}}, "GetVersion")
    t = threading.Thread(target=server.serve_forever, daemon=True)
    t.start()
    yield f"https://127.0.0.1:{server.server_address[1]}/am/3.0", tmp_path / "ca.pem"
    server.shutdown()
    server.server_close()


def test_tls_handshake_with_a_real_server(tmp_path, tls_aggregate):
    from netrepro.sites.instageni.credentials import GeniCredentials

    url, ca = tls_aggregate
    creds = GeniCredentials(str(portal_pem(tmp_path / "cloudlab.pem")), str(tmp_path / "cloudlab.pem"), "alice",
                            "urn:x", "p", "id.pub", None, "portal secret")
    sa = TLSPolicy("the slice authority", ca_bundle=str(ca))
    trusted = GeniClient(creds, TLSPolicy("aggregate t", ca_bundle=str(ca), source="t.yml: aggregates.t.ca_bundle"), sa)
    assert trusted._call(url, "GetVersion") == {"geni_api": 3}
    untrusted = GeniClient(creds, TLSPolicy("aggregate t", source="t.yml: ca_bundle"), sa)
    with pytest.raises(SiteError, match=r"/am/3.0: TLS: certificate not trusted \(.*\); expected one signed by a CA in "
                                         r"the system trust store \(t.yml: ca_bundle\)"):
        untrusted._call(url, "GetVersion")
    warned = []
    unverified = GeniClient(creds, TLSPolicy("aggregate t", verify=False, source="t.yml: aggregates.t.verify_tls"), sa,
                            warn=warned.append)
    assert unverified._call(url, "GetVersion") == {"geni_api": 3} and len(warned) == 1
    with pytest.raises(SiteError, match=r"/nope: GetVersion: ProtocolError: .*404 Not Found"):
        trusted._call(url.replace("/am/3.0", "/nope"), "GetVersion")


def test_site_modules_do_not_import_optional_dependencies():
    code = ("import sys, netrepro.sites.instageni.site, netrepro.sites.fabric.site, netrepro.sites.static.site, netrepro.cli.site_commands, netrepro.sites.instageni.manifest;"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('fabrictestbed_extensions', 'fabrictestbed', 'fim', 'geni', 'paramiko')];"
            "print(bad); sys.exit(1 if bad else 0)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    assert p.returncode == 0, p.stdout + p.stderr


def test_every_registered_site_but_local_is_here():
    for name in ("instageni", "fabric", "static"):
        module, _, cls = SITES[name].partition(":")
        assert getattr(__import__(module, fromlist=[cls]), cls).name == name


def test_hours_is_the_option_of_a_site_with_a_lease_only():
    """HOURS (netrepro.sites.DECLARED_OPTION_ENV) sets the option hours of a site that declares it,
    named as its origin; --option hours= wins; a site without a lease ignores it."""
    from netrepro.sites import site_class
    fabric = site_options(None, {"HOURS": "48"}, site_class("fabric").OPTIONS)
    assert fabric == {"hours": "48"} and fabric.origins == {"hours": "HOURS"}
    given = site_options(["hours=30"], {"HOURS": "48"}, site_class("instageni").OPTIONS)
    assert given == {"hours": "30"} and given.origins == {"hours": "--option"}
    assert site_options(None, {"HOURS": "48"}, site_class("local").OPTIONS) == {}
    assert site_options(None, {"HOURS": "48"}) == {}


def test_the_command_line_asks_the_site_for_its_documents(spec, tmp_path):
    """netrepro rspec, profile and inventory --manifest reach the instageni site through the Site
    interface (netrepro.sites.base.OFFLINE_DOCUMENTS): the one site that has them answers; a
    site without one refuses in one line naming the sites that have it."""
    from netrepro.sites.base import OFFLINE_DOCUMENTS, site_class, sites_offering

    assert {m: sites_offering(m) for m in OFFLINE_DOCUMENTS} == {m: ["instageni"] for m in OFFLINE_DOCUMENTS}
    path = cli_sites.write_rspec(spec, tmp_path / "r.xml")
    assert path.read_bytes() == rspec.write_request(spec, tmp_path / "direct.xml").read_bytes()
    folder = cli_sites.write_profile(spec, tmp_path / "profile")
    assert (folder / "profile.rspec").is_file()
    with pytest.raises(SiteError, match="node/@client_id: no node named router"):   # read by instageni's manifest reader
        cli_sites.inventory_from_manifest(spec, MANIFEST, "ingino", site="instageni")
    for method, args in (("write_request", (spec, tmp_path / "x.xml")), ("request_drift", (spec, path)),
                         ("write_profile", (spec, tmp_path / "p2")), ("manifest_logins", (spec, MANIFEST, "ingino"))):
        with pytest.raises(SiteError, match=r"^site local: no .*; expected a site that has one: instageni$"):
            getattr(site_class("local"), method)(*args)
    with pytest.raises(SiteError, match="^site fabric: no manifest to read"):
        cli_sites.inventory_from_manifest(spec, MANIFEST, "ingino", site="fabric")
    assert not (tmp_path / "x.xml").exists() and not (tmp_path / "p2").exists()
