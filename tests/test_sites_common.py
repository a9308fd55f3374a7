"""Shared site behaviour: plans without credentials, instageni's offline logic (credentials,
aggregates, waiting, state), lazy imports of optional dependencies."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from lxml import etree

from netrepro import cli_sites, rspec
from netrepro.sites import SITES, get_site
from netrepro.sites.base import SiteError
from netrepro.sites.instageni import (GeniError, default_slice_name, load_aggregates, load_credentials,
                                      poll_until, resolve_aggregate, summarize_status)
from netrepro.spec import load_spec

RSPEC_DATA = Path(__file__).resolve().parent / "data" / "rspec"  # copies of public RSpecs, see SOURCE.md
MANIFEST = RSPEC_DATA / "manifest" / "cloudlab-utah-2node-CS244-oncache.xml"


@pytest.fixture(scope="module")
def spec():
    return load_spec("pie-vs-red")


@pytest.mark.parametrize("site", ["instageni", "fabric", "static"])
def test_plan_for_every_site_names_every_node_and_address(spec, site):
    text = cli_sites.plan_text(spec, site, {"fabric_site": "UTAH"})
    for node, nd in spec.nodes.items():
        assert node in text
        for itf in nd["interfaces"]:
            assert itf["address"] in text


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
    for piece in ("NETREPRO_GENI_CERT", "NETREPRO_GENI_USER", "NETREPRO_GENI_PROJECT", "NETREPRO_GENI_PUBKEY", str(tmp_path / "none.json"), "README"):
        assert piece in msg
    assert "\n" not in msg and not site.state_file.exists()


def geni_env(tmp_path, **over):
    (tmp_path / "cloudlab.pem").write_text("cert")
    (tmp_path / "id.pub").write_text("ssh-ed25519 AAAA me@here")
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

    def create_slice(self, name, project_urn, expires):
        self.calls.append(("create_slice", name, project_urn))

    def renew_slice(self, slice_urn, expires):
        self.calls.append(("renew_slice", slice_urn))

    def am(self, url, method, slice_urn, *args):
        self.calls.append((method, slice_urn))
        if method == "Status":
            return next(self.statuses)
        if method == "Describe":
            return {"geni_rspec": self.manifest}
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
    assert [c[0] for c in fake.calls] == ["create_slice", "Allocate", "Provision", "PerformOperationalAction"]
    site.reserve()                                   # idempotent: nothing new requested
    assert len(fake.calls) == 4
    site.wait_ready(timeout_s=600, interval_s=1)
    logins = site.logins()
    assert set(logins) == set(spec.nodes) and logins["router"].user == "ingino" and logins["router"].key_file == str(tmp_path / "id")
    assert (site.state_dir / "manifest.xml").read_text() == manifest
    # A new process (new Site object) finds the reservation again.
    again = get_site("instageni", spec, tmp_path / "run", opts)
    assert again.status()["slice_name"] == "nr-pievsred-alice" and again.status()["reserved"] is True
    again.renew(5)
    assert ("Renew", st["slice_urn"]) in fake.calls and again.load_state()["expires"] != st["expires"]
    again.release()
    assert not again.state_file.exists()
    again.release()                                   # nothing reserved: harmless
    site.save_state(st)
    site.release()                                    # slivers already gone at the aggregate (code 12)
    assert not site.state_file.exists()


def test_bad_slice_name_and_hours(spec, tmp_path):
    base = {"env": geni_env(tmp_path), "client": FakeGeni("", [])}
    with pytest.raises(SiteError, match=r"SLICE_NAME=Bad_Name: expected 1-19 characters"):
        get_site("instageni", spec, tmp_path / "a", {**base, "slice_name": "Bad_Name"}).reserve()
    with pytest.raises(SiteError, match=r"HOURS=-1: expected a positive number"):
        get_site("instageni", spec, tmp_path / "b", {**base, "hours": "-1"}).reserve()


def test_site_modules_do_not_import_optional_dependencies():
    code = ("import sys, netrepro.sites.instageni, netrepro.sites.fabric, netrepro.sites.static, netrepro.cli_sites, netrepro.manifest;"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('fabrictestbed_extensions', 'fabrictestbed', 'fim', 'geni', 'paramiko')];"
            "print(bad); sys.exit(1 if bad else 0)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=Path(__file__).resolve().parent.parent)
    assert p.returncode == 0, p.stdout + p.stderr


def test_every_registered_site_but_local_is_here():
    for name in ("instageni", "fabric", "static"):
        module, _, cls = SITES[name].partition(":")
        assert getattr(__import__(module, fromlist=[cls]), cls).name == name
