"""Unit tests of the routes and MTU parts of netrepro.rolevars.role_vars (roles/routes)."""

import copy

import pytest

from netrepro.rolevars import role_vars
from netrepro.spec import Spec, load_spec


@pytest.fixture(scope="module")
def spec():
    return load_spec("pie-vs-red")


@pytest.fixture(scope="module")
def rv(spec):
    return role_vars(spec)


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
