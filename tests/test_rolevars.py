"""Unit tests of netrepro.rolevars (the version 1 path's role variables) against pie-vs-red's
schema_version 1 file (conftest.PIE_VS_RED_V1)."""

import copy
import json

import pytest
from conftest import PIE_VS_RED_V1

from netrepro import tc
from netrepro.rolevars import role_vars
from netrepro.spec import Spec, load_spec


@pytest.fixture(scope="module")
def spec():
    return load_spec(PIE_VS_RED_V1)


@pytest.fixture(scope="module")
def rv(spec):
    return role_vars(spec)


def test_json_serialisable(rv):
    assert json.loads(json.dumps(rv)) == rv


def test_default_variant_is_first_trials(rv):
    assert rv["variant"] == "unlimited"
    assert rv["ftp_source"]["max_rate_bytes_per_s"] == 0


def test_servers_get_reno_and_sack(rv):
    for s in ("server1", "server2", "server3"):
        assert rv["sysctls"][s] == {"net.ipv4.tcp_congestion_control": "reno", "net.ipv4.tcp_sack": "1"}
    assert rv["sysctls"]["client1"] == {}
    assert rv["sysctls"]["router"] == {"net.ipv4.ip_forward": "1"}


def test_client_netem_on_clients_lan(rv):
    assert rv["netem"]["client1"] == [{
        "network": "clients_lan", "delay_ms": 100,
        "argv": ["qdisc", "replace", "dev", tc.DEV, "root", "netem", "delay", "100ms", "limit", "1000"],
        "probe_argv": ["qdisc", "add", "dev", tc.DEV, "root", "netem", "delay", "100ms", "limit", "1000"]}]
    assert rv["netem"]["router"] == [] and rv["netem"]["server1"] == []


def test_router_pie_argv(rv):
    assert rv["aqm"]["pie"] == {"qdisc": "pie", "argv": (
        "qdisc replace dev @dev@ parent 1:10 handle 10: pie limit 134 target 20ms tupdate 30ms "
        "alpha 2 beta 20 noecn dq_rate_estimator").split()}


def test_router_red_argv(rv):
    assert rv["aqm"]["red"]["argv"] == (
        "qdisc replace dev @dev@ parent 1:10 handle 10: red limit 200000 min 50000 max 150000 "
        "avpkt 1500 burst 56 probability 0.1 bandwidth 10mbit").split()


def test_bottleneck(rv):
    b = rv["bottleneck"]
    assert (b["node"], b["network"], b["rate_mbit"], b["parent"], b["handle"]) == (
        "router", "clients_lan", 10, "1:10", "10:")
    assert b["qdisc_argv"] == "qdisc replace dev @dev@ root handle 1: htb default 10".split()
    assert b["class_argv"][-8:] == ["rate", "10mbit", "ceil", "10mbit", "burst", "15140", "cburst", "15140"]


def test_probes(rv):
    assert set(rv["probes"]["router"]) == {"htb", "pie", "red"}
    assert rv["probes"]["router"]["pie"][:5] == ["qdisc", "add", "dev", tc.DEV, "root"]
    assert "dq_rate_estimator" in rv["probes"]["router"]["pie"]
    assert set(rv["probes"]["client2"]) == {"netem@clients_lan"}
    assert rv["probes"]["server1"] == {}


def test_offloads(rv):
    assert rv["offloads"] == {"tso": "off", "gso": "off", "gro": "off"}
    assert rv["offload_networks"]["router"] == ["clients_lan", "servers_lan"]
    assert rv["offload_networks"]["client1"] == ["clients_lan"]


def test_ftp_source(spec):
    f = role_vars(spec, "limited")["ftp_source"]
    assert f["nodes"] == ["server1", "server2", "server3"]
    assert f["listen_address"] == {"server1": "10.10.2.1", "server2": "10.10.2.2", "server3": "10.10.2.3"}
    assert f["files"][0] == "file01" and f["files"][-1] == "file20" and len(f["files"]) == 20
    assert f["file_size_bytes"] == 4294967296
    assert f["max_rate_by_variant"] == {"unlimited": 0, "limited": 25000}
    assert f["max_rate_bytes_per_s"] == 25000


def test_unknown_variant(spec):
    with pytest.raises(KeyError, match="expected one of: unlimited, limited"):
        role_vars(spec, "fast")


def test_variant_overrides_bottleneck_rate(spec):
    data = copy.deepcopy(spec.data)
    data["variants"]["limited"]["bottleneck"] = {"rate_mbit": 20}
    rv = role_vars(Spec.from_data(data), "limited")
    assert rv["bottleneck"]["rate_mbit"] == 20
    assert "20mbit" in rv["bottleneck"]["class_argv"]


def test_non_ftp_sources_give_none(spec):
    data = copy.deepcopy(spec.data)
    data["sources"] = {"kind": "iperf3", "nodes": ["servers"]}
    assert role_vars(Spec.from_data(data))["ftp_source"] is None


# --- routes and MTU (roles/routes) ------------------------------------------------------
def test_routes_of_every_node(rv):
    assert set(rv["routes"]) == set(rv["nodes"])
    for c in ("client1", "client2", "client3"):
        assert rv["routes"][c] == [{"to": "10.10.2.0/24", "via": "10.10.1.254"}]
    for s in ("server1", "server2", "server3"):
        assert rv["routes"][s] == [{"to": "10.10.1.0/24", "via": "10.10.2.254"}]
    assert rv["routes"]["router"] == []


def test_mtu_is_the_specs(rv):
    assert rv["mtu_bytes"] == 1500


def test_existing_keys_kept(rv):
    """The routes keys are additions: the other keys keep their values."""
    assert {"experiment", "variant", "nodes", "sysctls", "offloads", "offload_networks", "netem",
            "probes", "bottleneck", "aqm", "ftp_source"} <= set(rv)


def test_routes_are_copies_with_only_to_and_via(spec):
    data = copy.deepcopy(spec.data)
    data["links"]["mtu_bytes"] = 9000
    data["topology"]["nodes"]["client1"]["routes"].append({"to": "10.10.3.7/32", "via": "10.10.1.254"})
    rv = role_vars(Spec.from_data(data))
    assert rv["mtu_bytes"] == 9000
    assert rv["routes"]["client1"] == [{"to": "10.10.2.0/24", "via": "10.10.1.254"},
                                       {"to": "10.10.3.7/32", "via": "10.10.1.254"}]
    rv["routes"]["client1"].clear()  # the result does not share lists with the spec
    assert len(data["topology"]["nodes"]["client1"]["routes"]) == 2


def test_an_ftp_source_listens_where_its_clients_connect():
    """Schema 2 (the model): each FTP sender's vsftpd listens on the address its receiver's
    flows connect to (trial_plan's ``server_address``), its own, never the receiver's."""
    from netrepro.model import trial_plan
    from netrepro.rolevars import model_ftp_source
    m = load_spec("pie-vs-red").model
    listen = model_ftp_source(m)["listen_address"]
    assert listen == {"server1": "10.10.2.1", "server2": "10.10.2.2", "server3": "10.10.2.3"}
    for t in m.trials:
        for client, groups in trial_plan(m, t, 1.0)["flows"].items():
            for g in groups:
                assert g["server_address"] in listen.values()
