"""Unit tests of netrepro.experiment.rolevars (the playbooks' ``netrepro`` var, :func:`model_vars`)
against pie-vs-red's file (experiments/pie-vs-red/experiment.yml): what provisioning applies
to each node, and what each trial finds there."""

import copy
import json

import pytest

from netrepro.core import tc
from netrepro.model import trial_timeline
from netrepro.experiment.rolevars import model_ftp_source, model_vars
from netrepro.experiment.spec import Spec, load_spec


@pytest.fixture(scope="module")
def mv(spec):
    return model_vars(spec)


def _words(argv: list[str]) -> str:
    return " ".join(argv)


def test_json_serialisable(mv):
    assert json.loads(json.dumps(mv)) == mv


def test_the_first_trials_settings_are_provisioned(mv):
    """Provisioning leaves the nodes as the first trial (pie-unlimited) wants them: its FTP
    rate (unlimited), its stacks; each trial sets its own again (playbooks/trial.yml)."""
    assert mv["ftp_source"]["max_rate_bytes_per_s"] == {"server1": 0, "server2": 0, "server3": 0}
    router = mv["stacks"]["router"]
    assert [(p["interface"], p["key"]) for p in router] == [("eth1", "clients_lan")]
    assert [_words(c) for c in router[0]["commands"]] == [
        "qdisc del dev @dev@ root",
        "qdisc replace dev @dev@ root handle 1: htb default 10",
        "class replace dev @dev@ parent 1: classid 1:10 htb rate 10mbit ceil 10mbit burst 15140 cburst 15140",
        "qdisc replace dev @dev@ parent 1:10 handle 10: pie limit 134 target 20ms tupdate 30ms alpha 2 beta 20 noecn "
        "dq_rate_estimator"]


def test_servers_get_reno_and_sack(mv):
    for s in ("server1", "server2", "server3"):
        assert mv["sysctls"][s] == {"net.ipv4.tcp_congestion_control": "reno", "net.ipv4.tcp_sack": "1"}
    assert mv["sysctls"]["client1"] == {}
    assert mv["sysctls"]["router"] == {"net.ipv4.ip_forward": "1"}


def test_client_netem_on_clients_lan(mv):
    assert mv["stacks"]["client1"] == [{"interface": "eth1", "key": "clients_lan", "commands": [
        ["qdisc", "del", "dev", tc.DEV, "root"],
        ["qdisc", "replace", "dev", tc.DEV, "root", "handle", "1:", "netem", "delay", "100ms", "limit", "1000"]]}]
    assert "server1" not in mv["stacks"]  # no stack: the kernel's default qdisc


def test_probes_cover_every_trials_layers(mv):
    """The router probes the HTB and both AQMs with the trials' parameters (RED is in no
    first trial, but a later one needs it); the servers probe reno, which their sysctl asks."""
    assert set(mv["probes"]["router"]) == {"htb@eth1", "pie@eth1", "red@eth1"}
    assert mv["probes"]["router"]["pie@eth1"][:5] == ["qdisc", "add", "dev", tc.DEV, "root"]
    assert "dq_rate_estimator" in mv["probes"]["router"]["pie@eth1"]
    assert _words(mv["probes"]["router"]["red@eth1"]) == (
        "qdisc add dev @dev@ root red limit 200000 min 50000 max 150000 avpkt 1500 burst 56 probability 0.1 "
        "bandwidth 10mbit")
    assert set(mv["probes"]["client2"]) == {"netem@eth1"}
    assert mv["probes"]["server1"] == {"tcp_reno": ["tcp_congestion", "reno"]}


def test_offloads(mv):
    assert mv["offloads"] == {"tso": "off", "gso": "off", "gro": "off"}
    assert mv["offload_networks"]["router"] == ["clients_lan", "servers_lan"]
    assert mv["offload_networks"]["client1"] == ["clients_lan"]


def test_ftp_source(spec, mv):
    f = mv["ftp_source"]
    assert f["nodes"] == ["server1", "server2", "server3"]
    assert f["listen_address"] == {"server1": "10.10.2.1", "server2": "10.10.2.2", "server3": "10.10.2.3"}
    # as many files as the largest item has flows (20), named as flow_clients fetches them
    assert f["files"][0] == "file01" and f["files"][-1] == "file20" and len(f["files"]) == 20
    assert f["file_size_bytes"] == 4294967296
    # a later trial's rate is its own: pie-limited's items ask 25 kB/s
    assert trial_timeline(spec.model, spec.model.trial("pie-limited"))["ftp_sources"] == {
        "server1": 25000, "server2": 25000, "server3": 25000}


def test_no_ftp_items_give_none():
    assert model_vars(load_spec("codel-lab"))["ftp_source"] is None


# --- routes and MTU (roles/routes) ------------------------------------------------------
def test_routes_of_every_node(mv):
    assert set(mv["routes"]) == set(mv["nodes"])
    for c in ("client1", "client2", "client3"):
        assert mv["routes"][c] == [{"to": "10.10.2.0/24", "via": "10.10.1.254"}]
    for s in ("server1", "server2", "server3"):
        assert mv["routes"][s] == [{"to": "10.10.1.0/24", "via": "10.10.2.254"}]
    assert mv["routes"]["router"] == []


def test_mtu_is_the_files(mv):
    assert mv["mtu_bytes"] == 1500


def test_routes_are_copies_with_only_to_and_via(spec):
    data = copy.deepcopy(spec.data)
    data["links"]["mtu_bytes"] = 9000
    data["topology"]["nodes"]["client1"]["routes"].append({"to": "10.10.3.7/32", "via": "10.10.1.254"})
    s = Spec.from_data(data)
    mv = model_vars(s)
    assert mv["mtu_bytes"] == 9000
    assert mv["routes"]["client1"] == [{"to": "10.10.2.0/24", "via": "10.10.1.254"},
                                       {"to": "10.10.3.7/32", "via": "10.10.1.254"}]
    mv["routes"]["client1"].clear()  # the result does not share lists with the model
    assert len(s.model.nodes["client1"].routes) == 2


def test_an_ftp_source_listens_where_its_clients_connect():
    """Each FTP sender's vsftpd listens on the address its receiver's flows connect to
    (trial_timeline's ``server_address``), its own, never the receiver's."""
    m = load_spec("pie-vs-red").model
    listen = model_ftp_source(m)["listen_address"]
    assert listen == {"server1": "10.10.2.1", "server2": "10.10.2.2", "server3": "10.10.2.3"}
    for t in m.trials:
        for client, groups in trial_timeline(m, t, 1.0)["flows"].items():
            for g in groups:
                assert g["server_address"] in listen.values()
