"""The FABRIC stand-in's answers read with FABRIC's own models (issue 55, item 4).

Every endpoint the stand-in (tests/testbed/fabric.py) serves is called over HTTPS as FABRIC's
clients call it, in the states a slice passes through (nodes active, a node failed, deleted)
and with the errors the stand-in gives (a refresh token refused, a foreign project, no bearer
token, an unknown person or slice, a duplicate name, a bad lease, an unknown call). Each JSON
answer is then

- validated against the OpenAPI document its service is served from (tests/data/fabric-openapi,
  pinned with SOURCE.md): the response schema of its path, method and HTTP status, with every
  field FABRIC marks required present and of its type; and strictly: no field the document does
  not name (the documents allow more, so this is stricter than FABRIC; a stand-in that invents
  fields would teach the client to read them);
- for the orchestrator and the credential manager, deserialised by their generated clients
  (``fabric_cf.orchestrator.swagger_client``, ``fabric_cm.credmgr.swagger_client``, installed
  with fablib) with ``ApiClient.deserialize`` and the response type the generated API method
  declares (for an error status, the model of the document's error schema); their models raise
  ValueError when a required field is missing. The core API has no generated client in fablib
  (fabrictestbed's CoreApi is written by hand), so its document is its only reference.

No nodes are built: a recorder stands in for the node builder and gives each node an address of
TEST-NET-1 and each interface a MAC, what the orchestrator reports once slivers are active.
Root only (the stand-in binds ports 443 and 22 of a loopback address); about 15 s on 2 cores, 4 s of
them importing fablib.
"""

from __future__ import annotations

import datetime as dt
import functools
import importlib
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import requests
import yaml
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from netrepro.experiment.spec import load_spec
from netrepro.sites.fabric.site import FabricOptions, build_slice, offline_manager, segment_keys
from netrepro.sites.instageni.rspec import interface_id
from testbed.fabric import TIME_FORMAT, TestFabric

REPO = Path(__file__).resolve().parent.parent
EXP = REPO / "tests" / "data" / "experiments" / "gateway-fifo.yml"
DOCS = REPO / "tests" / "data" / "fabric-openapi"

#: The services, by the first part of the stand-in's path: (OpenAPI document, the path prefix
#: its server URL adds, the generated client's package or None).
SERVICES = {
    "orchestrator": ("orchestrator.yaml", "", "fabric_cf.orchestrator.swagger_client"),
    "credmgr": ("credmgr.yaml", "/credmgr", "fabric_cm.credmgr.swagger_client"),
    "core": ("core-api.yaml", "", None),
}

#: Every call the stand-in serves: (method, path template) -> (service, the generated API
#: class and method that makes this call, its required arguments). The generated method is
#: called with a recording ApiClient to learn the response type it declares.
ENDPOINTS = {
    ("POST", "/credmgr/tokens/refresh"): ("credmgr", "TokensApi", "tokens_refresh_post", {"body": {}}),
    ("POST", "/credmgr/tokens/validate"): ("credmgr", "TokensApi", "tokens_validate_post", {"body": {}}),
    ("GET", "/whoami"): ("core", None, None, {}),
    ("GET", "/people/{uuid}"): ("core", None, None, {}),
    ("POST", "/slices/creates"): ("orchestrator", "SlicesApi", "slices_creates_post", {"body": {}, "name": "n"}),
    ("GET", "/slices"): ("orchestrator", "SlicesApi", "slices_get", {}),
    ("GET", "/slices/{slice_id}"): ("orchestrator", "SlicesApi", "slices_slice_id_get", {"slice_id": "i", "graph_format": "GRAPHML"}),
    ("GET", "/slivers"): ("orchestrator", "SliversApi", "slivers_get", {"slice_id": "i"}),
    ("PUT", "/slices/modify/{slice_id}"): ("orchestrator", "SlicesApi", "slices_modify_slice_id_put", {"body": "g", "slice_id": "i"}),
    ("POST", "/slices/modify/{slice_id}/accept"): ("orchestrator", "SlicesApi", "slices_modify_slice_id_accept_post", {"slice_id": "i"}),
    ("POST", "/slices/renew/{slice_id}"): ("orchestrator", "SlicesApi", "slices_renew_slice_id_post", {"slice_id": "i", "lease_end_time": "t"}),
    ("DELETE", "/slices/delete/{slice_id}"): ("orchestrator", "SlicesApi", "slices_delete_slice_id_delete", {"slice_id": "i"}),
}


class RecordedNodes:
    """The node builder's part (``build``, ``teardown``) without nodes: each node of the
    experiment at an address of TEST-NET-1 (RFC 5737), each of its interfaces with a MAC."""

    def __init__(self, experiment: Path):
        self.spec = load_spec(experiment)

    def build(self, keys: list[str], user: str = "root") -> dict[str, dict]:
        macs: dict[str, dict[str, str]] = {n: {} for n in self.spec.nodes}
        for k, (node, key) in enumerate(sorted((n, key) for (n, _), key in segment_keys(self.spec).items()), 1):
            macs[node][interface_id(node, key)] = f"02:00:00:00:00:{k:02x}"
        return {n: {"host": f"192.0.2.{k}", "port": 22, "macs": macs[n]} for k, n in enumerate(self.spec.nodes, 1)}

    def teardown(self) -> None:
        pass


def _camel(schema_name: str) -> str:
    """The generated clients' model name of an OpenAPI schema name (status_400_bad_request ->
    Status400BadRequest), as swagger-codegen names them."""
    return "".join(p[:1].upper() + p[1:] for p in schema_name.split("_"))


@functools.lru_cache(maxsize=None)
def _load(doc: str) -> tuple[dict, Registry, frozenset[str]]:
    """The OpenAPI document ``doc`` made strict, its registry (under ``urn:fabric:<doc>``) and
    the names of the schemas used as allOf parts. Strict: ``unevaluatedProperties: false`` on
    every object schema with properties or allOf, except allOf parts (their siblings' fields
    are evaluated beside them; an answer of such a schema is closed where it is checked)."""
    spec = yaml.safe_load((DOCS / doc).read_text())
    schemas = spec["components"]["schemas"]
    parts = frozenset(p["$ref"].split("/")[-1] for s in schemas.values() if isinstance(s, dict)
                      for p in s.get("allOf", []) if "$ref" in p)
    for name, sub in schemas.items():
        if name not in parts and isinstance(sub, dict) and ("properties" in sub or "allOf" in sub):
            sub["unevaluatedProperties"] = False
    return spec, Registry().with_resource(f"urn:fabric:{doc}", Resource(spec, specification=DRAFT202012)), parts


class _Recorder:
    """An ApiClient that records the response type a generated API method declares."""

    def __init__(self):
        self.client_side_validation = False

    def select_header_accept(self, accepts):
        return accepts[0] if accepts else None

    def select_header_content_type(self, types):
        return types[0] if types else None

    def call_api(self, path, method, *args, **kwargs):
        self.seen = (method, path, kwargs["response_type"])


def declared(package: str, api: str, method: str, args: dict) -> tuple[str, str, str]:
    """(HTTP method, path template, response type) the generated ``api.method`` declares."""
    mod = importlib.import_module(package)
    rec = _Recorder()
    getattr(getattr(mod, api)(api_client=rec), method)(**args)
    return rec.seen


def drive(base: Path) -> list[tuple[str, str, dict, int, str, Any]]:
    """Drive a stand-in in ``base`` through every endpoint; returns its answers as (method,
    path template, query, status, content type, JSON body)."""
    fab = TestFabric(base / "fabric", builder=RecordedNodes(EXP), experiment=EXP)
    answers: list[tuple[str, str, dict, int, str, Any]] = []
    url = f"https://{fab.address}"
    try:
        fab.write_account(base / "account")
        token_file = json.loads((base / "account" / "id_token.json").read_text())
        ca = str(fab.pki.ca_file)

        def call(method: str, tpl: str, path: str | None = None, params=None, auth: str | None = None, headers=None, **kw):
            headers = {**({"Authorization": f"Bearer {auth}"} if auth else {}), **(headers or {})}
            r = requests.request(method, url + (path or tpl), params=params, headers=headers, verify=ca, timeout=30, **kw)
            answers.append((method, tpl, params or {}, r.status_code, r.headers.get("Content-Type", ""), r.json()))
            return r

        # credential manager: a refresh token for an identity token (and a refused one, a foreign project)
        pid = fab.project["uuid"]
        r = call("POST", "/credmgr/tokens/refresh", params={"project_id": pid}, json={"refresh_token": token_file["refresh_token"]})
        assert r.status_code == 200, r.text
        tok = r.json()["data"][0]["id_token"]
        call("POST", "/credmgr/tokens/refresh", params={"project_id": pid}, json={"refresh_token": "NB2HI4DTHIXSnone"})
        call("POST", "/credmgr/tokens/refresh", params={"project_id": "a-project-of-others"},
             json={"refresh_token": r.json()["data"][0]["refresh_token"]})
        call("POST", "/credmgr/tokens/validate", json={"type": "identity", "token": tok})
        call("POST", "/credmgr/tokens/validate", json={"type": "identity", "token": tok[:-4] + "AAAA"})
        # core API: who the token names, and their record with the bastion key
        who = call("GET", "/whoami", auth=tok).json()["results"][0]["uuid"]
        call("GET", "/whoami")
        call("GET", "/people/{uuid}", f"/people/{who}", params={"as_self": "true"}, auth=tok)
        call("GET", "/people/{uuid}", "/people/00000000-0000-4000-8000-000000000000", params={"as_self": "true"}, auth=tok)
        # orchestrator: the slice fablib builds for gateway-fifo, as it submits it
        fm = offline_manager(project_id=pid, bastion_username=fab.user["bastion_login"], workdir=str(base / "fablib"))
        slc = build_slice(fm, load_spec(EXP), FabricOptions(site="UTAH", cores=2, ram_gb=8, disk_gb=10,
                                                            image="default_ubuntu_22", slice_name="ok"))
        graph = slc.get_fim_topology().serialize()
        keys = [(base / "account" / "slice_key.pub").read_text().strip()]
        ids = {}
        for name in ("ok", "failing"):
            fab.faults["fail_node"] = ("gw", "Insufficient resources: no host at UTAH has 2 cores left") if name == "failing" else None
            r = call("POST", "/slices/creates", params={"name": name, "lifetime": 24}, auth=tok,
                     json={"graph_model": graph, "ssh_keys": keys})
            assert r.status_code == 200, r.text
            ids[name] = r.json()["data"][0]["slice_id"]
            fab._build.join(60)
        call("POST", "/slices/creates", params={"name": "ok"}, auth=tok, json={"graph_model": graph, "ssh_keys": keys})
        call("POST", "/slices/creates", params={"name": "long", "lifetime": 10000}, auth=tok,
             json={"graph_model": graph, "ssh_keys": keys})
        call("GET", "/slices", params={"name": "ok", "exact_match": "True", "states": ["StableOK", "StableError"]}, auth=tok)
        call("GET", "/slices", auth=tok)
        for name, sid in ids.items():
            call("GET", "/slices/{slice_id}", f"/slices/{sid}", params={"graph_format": "GRAPHML"}, auth=tok)
            call("GET", "/slices/{slice_id}", f"/slices/{sid}", params={"graph_format": "NONE"}, auth=tok)
            call("GET", "/slivers", params={"slice_id": sid}, auth=tok)
        call("GET", "/slices/{slice_id}", "/slices/00000000-0000-4000-8000-000000000000", params={"graph_format": "GRAPHML"}, auth=tok)
        ok = ids["ok"]
        # fablib's modify sends the graph as text/plain (payload_slices_modify)
        for text in (graph, "<graphml/>"):
            call("PUT", "/slices/modify/{slice_id}", f"/slices/modify/{ok}", auth=tok, data=text,
                 headers={"Content-Type": "text/plain"})
        call("POST", "/slices/modify/{slice_id}/accept", f"/slices/modify/{ok}/accept", auth=tok)
        end = (dt.datetime.now(dt.timezone.utc) + dt.timedelta(hours=48)).strftime(TIME_FORMAT)
        call("POST", "/slices/renew/{slice_id}", f"/slices/renew/{ok}", params={"lease_end_time": end}, auth=tok)
        call("POST", "/slices/renew/{slice_id}", f"/slices/renew/{ok}", params={"lease_end_time": "tomorrow"}, auth=tok)
        for sid in ids.values():
            call("DELETE", "/slices/delete/{slice_id}", f"/slices/delete/{sid}", auth=tok)
        call("GET", "/slivers", params={"slice_id": ok}, auth=tok)
        call("GET", "/slices/{slice_id}", f"/slices/{ok}", params={"graph_format": "GRAPHML"}, auth=tok)
        call("GET", "/slices/unknown/call", auth=tok)
    finally:
        fab.close()
    return answers


def _schema(method: str, tpl: str, status: int) -> tuple[str, dict, Registry, str]:
    """(service, response schema, registry, schema name) for an answer, from its document."""
    service = ENDPOINTS[(method, tpl)][0] if (method, tpl) in ENDPOINTS else "orchestrator"
    doc, prefix, _ = SERVICES[service]
    spec, registry, parts = _load(doc)
    op_path = tpl[len(prefix):] if tpl.startswith(prefix) else tpl
    ops = spec["paths"].get(op_path, {})
    if method.lower() in ops:
        responses = ops[method.lower()]["responses"]
    else:   # an unknown call: the error schemas are the same for every path of the document
        responses = spec["paths"]["/slices"]["get"]["responses"]
    assert str(status) in responses, f"{method} {tpl}: status {status} is not an answer the document lists ({sorted(responses)})"
    ref = responses[str(status)]["content"]["application/json"]["schema"]["$ref"]
    name = ref.split("/")[-1]
    schema = {"$ref": f"urn:fabric:{doc}{ref}"}
    if name in parts:
        schema["unevaluatedProperties"] = False
    return service, schema, registry, name


def test_every_answer_of_the_stand_in_reads_with_fabrics_own_models(tmp_path):
    """One test, so that one stand-in serves it (pytest-xdist would run separate tests of
    this module on two workers, each with a stand-in of its own)."""
    if os.geteuid() != 0:
        pytest.fail("needs root (the stand-in binds ports 443 and 22 of a loopback address); run `make test` as root")
    answers = drive(tmp_path)
    every_endpoint_called_with_success_and_error_answers(answers)
    failures = openapi_failures(answers) + model_failures(answers)
    assert not failures, "\n".join(failures)
    a_slice_of_active_nodes_reports_what_the_orchestrator_adds(answers)


def every_endpoint_called_with_success_and_error_answers(answers: list) -> None:
    """Each endpoint answered 200 at least once; the errors 400, 401, 403 and 404 were given;
    the slices were seen active, failed and deleted."""
    ok = {(m, t) for m, t, _, status, _, _ in answers if status == 200}
    assert ok == set(ENDPOINTS)
    errors = {(m, t, s) for m, t, _, s, _, _ in answers if s != 200}
    assert {s for _, _, s in errors} == {400, 401, 403, 404}
    assert {(m, t) for m, t, _ in errors} >= {("POST", "/credmgr/tokens/refresh"), ("GET", "/whoami"),
                                               ("GET", "/people/{uuid}"), ("POST", "/slices/creates"),
                                               ("POST", "/slices/renew/{slice_id}"), ("GET", "/slices/{slice_id}")}
    # the slices were in the states a user meets: active nodes, a failed node, deleted
    states = {s["state"] for m, t, _, status, _, body in answers if t == "/slices/{slice_id}" and status == 200
              for s in body["data"]}
    assert {"StableOK", "StableError", "Dead"} <= states


def openapi_failures(answers: list) -> list[str]:
    """What in each answer its OpenAPI document does not allow (strictly: no undeclared field)."""
    failures = []
    for method, tpl, query, status, ctype, body in answers:
        assert ctype.split(";")[0] == "application/json", (method, tpl, ctype)
        service, schema, registry, name = _schema(method, tpl, status)
        for err in Draft202012Validator(schema, registry=registry).iter_errors(body):
            failures.append(f"{method} {tpl} {query} -> {status} ({service} {name}): {'/'.join(map(str, err.absolute_path))}: {err.message[:300]}")
        if tpl == "/people/{uuid}" and status == 200:
            # people_one.sshkeys is typed `object`: the core API fills it with sshkeys_one
            # (server/swagger_server/response_code/sshkeys_utils.py, sshkeys_from_fab_person)
            doc = SERVICES["core"][0]
            registry = _load(doc)[1]
            one = Draft202012Validator({"$ref": f"urn:fabric:{doc}#/components/schemas/sshkeys_one"}, registry=registry)
            for key in body["results"][0].get("sshkeys", []):
                failures += [f"GET /people sshkey: {e.message}" for e in one.iter_errors(key)]
    return failures


def model_failures(answers: list) -> list[str]:
    """The answers of the orchestrator and the credential manager that their generated
    clients' models refuse, each read as the response type the generated API method declares
    (an error, as the model of its status's schema)."""
    failures = []
    for method, tpl, _, status, _, body in answers:
        service, _, _, name = _schema(method, tpl, status)
        package = SERVICES[service][2]
        if package is None:
            continue
        if status == 200:
            _, api, fn, args = ENDPOINTS[(method, tpl)]
            d_method, d_path, rtype = declared(package, api, fn, args)
            assert (d_method, SERVICES[service][1] + d_path) == (method, tpl)
            assert rtype == _camel(name), (method, tpl, rtype, name)
        else:
            rtype = _camel(name)
        client = importlib.import_module(package).ApiClient()
        try:
            obj = client.deserialize(SimpleNamespace(data=json.dumps(body)), rtype)
        except (ValueError, TypeError, AttributeError) as exc:
            failures.append(f"{method} {tpl} -> {status} as {rtype}: {exc}")
            continue
        if status == 200 and hasattr(obj, "data"):
            assert len(obj.data or []) == len(body.get("data") or []), (method, tpl)
    return failures


def a_slice_of_active_nodes_reports_what_the_orchestrator_adds(answers: list) -> None:
    """The answers carry what fablib reads once a slice is up: each node sliver's management
    address, each interface's MAC in the graph, a failed node's notice."""
    from fim.user.topology import ExperimentTopology

    details = [b["data"][0] for m, t, q, s, _, b in answers
               if t == "/slices/{slice_id}" and s == 200 and q.get("graph_format") == "GRAPHML"]
    up = next(d for d in details if d["name"] == "ok" and d["state"] == "StableOK")
    topo = ExperimentTopology()
    topo.load(graph_string=up["model"])
    assert {str(n.management_ip) for n in topo.nodes.values()} == {f"192.0.2.{k}" for k in range(1, len(topo.nodes) + 1)}
    macs = [i.get_property("label_allocations") for n in topo.nodes.values() for c in n.components.values()
            for i in c.interface_list if i.get_peers()]   # a port of a two-port NIC may be unused
    assert macs and all(m is not None and m.mac for m in macs), macs
    slivers = [b["data"] for m, t, q, s, _, b in answers if t == "/slivers" and s == 200]
    failed = [v for data in slivers for v in data if v["state"] == "Failed"]
    assert failed and all("Insufficient resources" in v["notice"] for v in failed)
    for v in (v for data in slivers for v in data):   # the orchestrator's LEASE_TIME_FORMAT
        dt.datetime.strptime(v["lease_end_time"], TIME_FORMAT)
