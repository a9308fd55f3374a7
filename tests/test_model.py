"""The experiment model, schema_version 2 (netrepro/model/): a lab-shaped file resolves into
links, L2 domains, complete trials and traffic with defaults; each kind of mistake gets one
line naming the field."""

from __future__ import annotations

import dataclasses
import copy
from pathlib import Path

import pytest

from conftest import PIE_VS_RED_V1
from netrepro import model
from netrepro.core import tc
from netrepro.core.yamlfile import load_yaml_file

DATA = Path(__file__).resolve().parent / "data" / "experiments"


def as_data(stack) -> tuple[dict, ...]:
    """A stack of :class:`netrepro.core.tc.Qdisc` layers in the file's form."""
    return tuple(layer.as_data() for layer in stack)


@pytest.fixture(scope="module")
def lab():
    return load_yaml_file(DATA / "lab19-like.yml", "experiment file")


def test_links_pair_both_ends_and_store_full_ports(lab):
    m = model.build(lab, "lab19-like.yml")
    assert m.data["links"] == [["h1:h1-eth0", "s1:s1-eth2"], ["h2:h2-eth0", "s1:s1-eth3"],
                               ["h3:h3-eth0", "s2:s2-eth2"], ["s1:s1-eth1", "s2:s2-eth1"]]
    assert m.nodes["s2"].interfaces["s2-eth1"].link == "s1:s1-eth1"
    assert m.nodes["s1"].kind == "switch" and m.nodes["h1"].kind == "host"


def test_trials_are_complete(lab):
    m = model.build(lab, "lab19-like.yml")
    drop, pie, bbr = m.trials
    assert as_data(drop.qdiscs["s2:s2-eth2"]) == (
        {"kind": "tbf", "rate_mbit": 1000, "burst_bytes": 500000, "limit_bytes": 26214400},)
    assert drop.qdiscs["s1:s1-eth1"] == pie.qdiscs["s1:s1-eth1"] == (tc.Qdisc("netem", params={"delay_ms": 20}),)
    assert [x.kind for x in pie.qdiscs["s2:s2-eth2"]] == ["tbf", "pie"]
    assert drop.sysctls["h1"]["net.ipv4.tcp_rmem"] == "10240 87380 52428800" and drop.sysctls["h2"] == {}
    assert bbr.sysctls["h1"]["net.ipv4.tcp_congestion_control"] == "bbr"
    assert drop.sysctls["h1"]["net.ipv4.tcp_congestion_control"] == "cubic"  # the file's, between trials
    # iperf3(1) defaults filled, ports one per iperf3 item from 5201
    assert drop.traffic[0].as_data() == {"kind": "iperf3", "id": "bulk", "from": "h1", "to": "h3", "duration_s": 90,
                                         "start_s": 0, "parallel": 1, "omit_s": 0, "interval_s": 1, "port": 5201}
    assert drop.traffic[0] == model.TrafficItem("iperf3", "bulk", "h1", "h3", 0, 90, parallel=1, omit_s=0, interval_s=1,
                                                port=5201)
    assert drop.duration_s == 90 and bbr.duration_s == 30 and len(bbr.traffic) == 1
    # iperf3 runs -O seconds before its -t seconds: the trial lasts their sum
    lab["trials"][2]["traffic"][0]["omit_s"] = 5
    assert model.build(lab, "lab19-like.yml").trials[2].duration_s == 35


def test_selectors_and_addresses(lab):
    m = model.build(lab, "lab19-like.yml")
    assert m.select(["switches"]) == ["s1", "s2"] and m.select(["hosts"]) == ["h1", "h2", "h3"]
    assert m.address_toward("h1", "h3") == "10.0.0.3"
    with pytest.raises(ValueError, match="s1 has no address"):
        m.address_toward("h1", "s1")


def _broken(lab, edit):
    d = copy.deepcopy(lab)
    edit(d)
    with pytest.raises(model.ModelError) as err:
        model.build(d, "x.yml")
    return str(err.value)


@pytest.mark.parametrize("edit, field, words", [
    (lambda d: d["topology"]["nodes"]["s2"]["interfaces"].pop("s2-eth1"),
     "topology.nodes.s1.interfaces.s1-eth1.link", "expected s2:s2-eth1 with link: s1"),
    (lambda d: d["topology"]["nodes"]["h1"]["interfaces"]["h1-eth0"].update(link="h9"),
     "topology.nodes.h1.interfaces.h1-eth0.link", "unknown node 'h9'"),
    (lambda d: d["topology"]["nodes"]["s1"]["interfaces"]["s1-eth2"].update(address="10.0.0.9/24"),
     "topology.nodes.s1.interfaces.s1-eth2.address", "a switch bridges its interfaces"),
    (lambda d: d["topology"]["nodes"]["h2"]["interfaces"]["h2-eth0"].update(address="10.0.0.1/24"),
     "topology.nodes.h2.interfaces.h2-eth0.address", "10.0.0.1 is also h1:h1-eth0's"),
    (lambda d: d["topology"]["nodes"]["h3"]["interfaces"]["h3-eth0"].update(address="10.0.1.3/24"),
     "address", "share an L2 domain (links and switches) but not a subnet"),
    (lambda d: d["qdiscs"].update({"s2:s2-eth9": []}), "qdiscs.s2:s2-eth9", "unknown port 's2:s2-eth9'"),
    (lambda d: d["trials"][1]["qdiscs"]["s2:s2-eth2"].insert(0, {"kind": "pie"}),
     "trials[1].qdiscs.s2:s2-eth2[1]", "pie (layer 0) is classless"),
    (lambda d: d["trials"].append({"id": "pie"}), "trials[3].id", "'pie' is already trials[1]"),
    (lambda d: d["traffic"].append({"kind": "ping", "id": "x", "from": "h1", "to": "s1", "interval_s": 1, "duration_s": 1}),
     "traffic[2].to", "s1 is a switch"),
    (lambda d: d["traffic"].append({"kind": "iperf3", "id": "b2", "from": "h2", "to": "h3", "duration_s": 9, "port": 5201}),
     "traffic", "two iperf3 servers on h3 port 5201"),
    (lambda d: d["sysctls"][0].update(nodes=["hostz"]), "sysctls[0].nodes", "unknown node or kind 'hostz'"),
    (lambda d: d["claims"][0]["check"]["lower"].update(trials=["codel"]), "claims[0].check.lower.trials", "unknown trial 'codel'"),
    (lambda d: d["trials"][0].update(sysctls={"h2": {"net.core.rmem_max": 9}}), "trials[0].sysctls.h2.net.core.rmem_max",
     "set by this trial but not in the file's sysctls"),
    (lambda d: d.update(figures=[{"id": "f", "metric": "rtt_ms", "trials": ["codel"]}]), "figures[0].trials",
     "unknown trial 'codel'"),
    (lambda d: d["claims"][0].update(when={"select": {"statistic": "x", "phases": ["p9"]}, "min": 1}),
     "claims[0].when.select.phases", "unknown phase 'p9'"),
    (lambda d: d.update(health={"nodes_cpu_busy_max": 0.6}), "health", "'nodes_cpu_busy_max' was unexpected"),
    (lambda d: d["traffic"].append({"kind": "ping", "id": "p2", "from": "h2", "to": "h1", "interval_s": 1, "duration_s": 1}),
     "traffic", "h2 has two ping items; expected one per node"),
    (lambda d: d["topology"]["nodes"]["h1"]["interfaces"].update({"h1-eth0-too-long-name": {"link": "s1"}}),
     "topology.nodes.h1.interfaces", "h1-eth0-too-long-name"),
])
def test_each_mistake_gets_one_line_naming_the_field(lab, edit, field, words):
    msg = _broken(lab, edit)
    assert msg.startswith("x.yml: ") and "\n" not in msg
    assert field in msg and words in msg, msg


def _converted(path):
    """The model of a version 1 file, converted as the analysis and `netrepro migrate`
    convert it (:func:`netrepro.experiment.migrate.migrate_data`)."""
    from netrepro.experiment.migrate import migrate_data
    from netrepro.experiment.spec import Spec
    return Spec.from_data(migrate_data(load_yaml_file(path, "v1"), path), path)


def test_pie_vs_red_as_a_model():
    """The version 1 file, converted, becomes a model with each trial's complete stacks,
    sysctls and traffic (what its version 1 roles applied, from the same numbers)."""
    m = _converted(PIE_VS_RED_V1).model
    assert [t.id for t in m.trials] == ["pie-unlimited", "red-unlimited", "pie-limited", "red-limited"]
    pie = m.trial("pie-unlimited")
    assert pie.labels == {"aqm": "pie", "variant": "unlimited"} and pie.duration_s == 250
    assert as_data(pie.qdiscs["router:eth1"]) == (
        {"kind": "htb", "rate_mbit": 10},
        {"kind": "pie", "handle": "10:", "target_ms": 20, "tupdate_ms": 30, "alpha": 2, "beta": 20, "ecn": False,
         "dq_rate_estimator": True, "limit_packets": 134})
    assert as_data(pie.qdiscs["client1:eth1"]) == ({"kind": "netem", "delay_ms": 100, "limit_packets": 1000},)
    # the stack gives the tc commands the version 1 path's bottleneck and AQM roles ran (an HTB
    # and its class, then the AQM leaf; those roles are gone, the commands are the same)
    cmds = tc.stack_commands(pie.qdiscs["router:eth1"])
    assert [" ".join(c) for c in cmds[1:]] == [
        "qdisc replace dev @dev@ root handle 1: htb default 10",
        "class replace dev @dev@ parent 1: classid 1:10 htb rate 10mbit ceil 10mbit burst 15140 cburst 15140",
        "qdisc replace dev @dev@ parent 1:10 handle 10: pie limit 134 target 20ms tupdate 30ms alpha 2 beta 20 noecn "
        "dq_rate_estimator"]
    assert pie.sysctls["server1"] == {"net.ipv4.tcp_congestion_control": "reno", "net.ipv4.tcp_sack": "1"}
    assert pie.sysctls["router"] == {"net.ipv4.ip_forward": "1"}
    ftp = pie.items("ftp")
    assert [(x.src, x.dst, x.flows, x.start_s, x.duration_s) for x in ftp] == [
        ("server1", "client1", 10, 0, 250), ("server2", "client2", 20, 50, 150), ("server3", "client3", 20, 100, 50)]
    assert {x.max_rate_bytes_per_s for x in ftp} == {0}
    assert {x.max_rate_bytes_per_s for x in m.trial("red-limited").items("ftp")} == {25000}
    pings = [(x.src, x.dst, x.interval_s) for x in pie.items("ping")]
    assert pings == [("client1", "server1", 0.1), ("client2", "server2", 0.1), ("client3", "server3", 0.1)]
    assert m.data["collectors"] == [{"kind": "qdisc_stats", "at": "router:eth1", "interval_s": 0.1}]
    assert m.address_toward("client1", "server1") == "10.10.2.1" and m.nodes["router"].kind == "router"


def test_trial_plan_says_what_each_node_does(lab):
    m = model.build(lab, "lab19-like.yml")
    p = model.trial_timeline(m, m.trial("pie"), 0.5)
    assert p["ping"] == {"h2": {"target": "10.0.0.3", "interval_s": 1, "id": "rtt"}}
    assert p["iperf3_servers"] == {"h3": [5201]} and p["duration_s"] == 45
    assert p["iperf3"]["h1"][0]["address"] == "10.0.0.3" and p["iperf3"]["h1"][0]["start_s"] == 0
    assert set(p["stacks"]) == {"s1", "s2"} and p["qdisc_stats"] == {
        "s2": {"interface": "s2-eth2", "network": None, "interval_s": 0.1, "classes": False}}
    assert p["flows"] == {} and p["ftp_sources"] == {}


def test_trial_plan_of_pie_vs_red_is_the_same_from_either_file():
    """The model's plan of pie-vs-red's version 1 file, converted, gives the collectors and flow
    groups its version 1 runs had (each client pings the server of its flow group; the same
    addresses, offsets and lengths); the committed file's plan of every trial is the same plan."""
    from netrepro.experiment.spec import load_spec
    spec = _converted(PIE_VS_RED_V1)
    p = model.trial_timeline(spec.model, spec.model.trial("red-limited"), 0.1)
    assert {n: {k: v[k] for k in ("target", "interval_s")} for n, v in p["ping"].items()} == {
        "client1": {"target": "10.10.2.1", "interval_s": 0.1}, "client2": {"target": "10.10.2.2", "interval_s": 0.1},
        "client3": {"target": "10.10.2.3", "interval_s": 0.1}}
    assert {n: [{k: g[k] for k in ("server_address", "flows", "start_s", "duration_s")} for g in gs]
            for n, gs in p["flows"].items()} == {
        "client1": [{"server_address": "10.10.2.1", "flows": 10, "start_s": 0.0, "duration_s": 25.0}],
        "client2": [{"server_address": "10.10.2.2", "flows": 20, "start_s": 5.0, "duration_s": 15.0}],
        "client3": [{"server_address": "10.10.2.3", "flows": 20, "start_s": 10.0, "duration_s": 5.0}]}
    assert p["ftp_sources"] == {"server1": 25000, "server2": 25000, "server3": 25000}
    assert p["qdisc_stats"]["router"]["network"] == "clients_lan"
    assert p["duration_s"] == 25
    v2 = load_spec("pie-vs-red").model
    assert v2.data["schema_version"] == 2
    for tid in spec.trial_ids:
        assert model.trial_timeline(v2, v2.trial(tid), 0.1) == model.trial_timeline(spec.model, spec.model.trial(tid), 0.1), tid
    with pytest.raises(ValueError, match="client1 has two ping items"):
        t = spec.model.trial("red-limited")
        model.trial_timeline(spec.model, dataclasses.replace(t, traffic=t.traffic + (t.traffic[3],)))


def test_every_site_that_builds_machines_builds_switches_and_named_links(tmp_path):
    """Every registered site that builds machines takes a file with switches and named links
    (the ns3 site simulates what it can build, tests/test_site_ns3.py): no site declares which
    files it builds."""
    from netrepro.sites import SITES, get_site, site_class
    from netrepro.experiment.spec import load_spec
    spec = load_spec(DATA / "lab19-like.yml")
    building = [n for n in SITES if not getattr(site_class(n), "SIMULATED", False)]
    assert building == ["local", "instageni", "fabric", "static"]
    assert not any(hasattr(site_class(n), "SCHEMA_VERSIONS") for n in SITES)
    for name in building:
        assert get_site(name, spec, tmp_path / name).spec is spec


def test_rate_scale_multiplies_rates_and_byte_sizes_only(lab):
    d = copy.deepcopy(lab)
    d["rate_scale"] = {"allowed": True, "min": 0.001}
    m = model.build(d, "x.yml")
    s = model.scale_rates(m, 0.02)
    pie = s.trial("pie")
    assert as_data(pie.qdiscs["s2:s2-eth2"]) == (
        {"kind": "tbf", "rate_mbit": 20, "burst_bytes": 10000, "limit_bytes": 524288},
        {"kind": "pie", "limit_packets": 17476, "target_ms": 22, "tupdate_ms": 5, "alpha": 2, "beta": 25})
    assert as_data(pie.qdiscs["s1:s1-eth1"]) == ({"kind": "netem", "delay_ms": 20},)  # delays kept
    assert pie.sysctls["h1"]["net.ipv4.tcp_rmem"] == "10240 87380 1048576"        # only the max scaled
    assert pie.traffic == m.trial("pie").traffic and s.data["rate_scale_applied"] == 0.02
    # a burst below one full frame would pass nothing (tc-tbf(8)): Lab 19's 100 Mbit/s TBF at k = 0.02
    d["trials"][1]["qdiscs"]["s2:s2-eth2"][0].update(rate_mbit=100, burst_bytes=50000)
    tbf = model.scale_rates(model.build(d, "x.yml"), 0.02).trial("pie").qdiscs["s2:s2-eth2"][0]
    assert (tbf.params["rate_mbit"], tbf.params["burst_bytes"]) == (2, 1514)
    assert m.trial("pie").qdiscs["s2:s2-eth2"][0].params["rate_mbit"] == 1000      # the original untouched
    assert model.scale_rates(m, 1) is m


def test_choose_rate_scale(lab):
    d = copy.deepcopy(lab)
    d["rate_scale"] = {"allowed": True, "min": 0.005}
    m = model.build(d, "x.yml")
    assert model.highest_rate_mbit(m) == 1000
    # 400 Mbit/s forwarded: a twentieth is 20 Mbit/s, so 1000 x 0.02
    k, why = model.choose_rate_scale(m, 400)
    assert k == 0.02 and "within 0.05 of this site's forwarding capacity 400 Mbit/s" in why
    d2 = copy.deepcopy(d)
    d2["rate_scale"]["capacity_share"] = 0.025  # an experiment that costs more CPU per packet
    assert model.choose_rate_scale(model.build(d2, "x.yml"), 400)[0] == 0.01
    assert model.choose_rate_scale(m, 300)[0] == 0.01 and model.choose_rate_scale(m, 1000)[0] == 0.05
    assert model.choose_rate_scale(m, 100000)[0] == 1
    assert model.choose_rate_scale(m, 500, "0.1") == (0.1, "RATE_SCALE=0.1")
    with pytest.raises(ValueError, match="RATE_SCALE: expected a number in"):
        model.choose_rate_scale(m, 500, "2")
    with pytest.raises(ValueError, match="below the experiment's rate_scale.min 0.005"):
        model.choose_rate_scale(m, 500, "0.001")
    k, why = model.choose_rate_scale(m, 40)  # would need 0.002: the min, said so
    assert k == 0.005 and "would need 0.002, below it" in why and "health checks" in why
    m2 = model.build(lab, "x.yml")  # no rate_scale: as written
    assert model.choose_rate_scale(m2, 500) == (1.0, "rates as written (the experiment does not allow scaling)")
    # RATE_SCALE asks for nothing the file forbids: k < 1 only where rate_scale.allowed
    with pytest.raises(ValueError, match=r"^RATE_SCALE=0.5: x.yml: rate_scale.allowed: "):
        model.choose_rate_scale(m2, 500, "0.5")
    assert model.choose_rate_scale(m2, 500, "1") == (1.0, "RATE_SCALE=1")
    for junk in ("0", "-0.5", "nan", "inf", "half", " "):
        assert junk == " " or pytest.raises(ValueError, model.rate_scale_option, m, junk)
    assert model.rate_scale_option(m, " ") is None and model.rate_scale_option(m, None) is None


def test_a_trials_stack_does_not_last_into_the_next(lab):
    """A port only one trial stacks gets [] (the kernel's default) in the others."""
    lab["trials"][1]["qdiscs"]["h1:h1-eth0"] = [{"kind": "fq", "maxrate_mbit": 5000}]
    drop, pie, bbr = model.build(lab, "lab19-like.yml").trials
    assert drop.qdiscs["h1:h1-eth0"] == bbr.qdiscs["h1:h1-eth0"] == ()
    assert as_data(pie.qdiscs["h1:h1-eth0"]) == ({"kind": "fq", "maxrate_mbit": 5000},)
    assert list(drop.qdiscs) == ["h1:h1-eth0", "s1:s1-eth1", "s2:s2-eth2"]  # the topology's order


@pytest.mark.parametrize("name", ["pie-lab", "codel-lab", "pacing-lab"])
def test_the_lab_experiments_as_models(name):
    """Each lab file builds, every trial has the same ports stacked (none lasts into the next),
    and what the local site will probe and scale follows from the file alone."""
    from netrepro.experiment.spec import load_spec
    m = load_spec(name).model
    ports = [list(t.qdiscs) for t in m.trials]
    assert all(p == ports[0] for p in ports)
    small = model.scale_rates(m, m.data["rate_scale"]["min"])
    for t in small.trials:
        for stack in t.qdiscs.values():
            for layer in stack:
                assert all(v >= 1514 for k, v in layer.params.items() if k.endswith("_bytes")), layer


def test_the_labs_own_needs():
    from netrepro.experiment.spec import load_spec
    codel = load_spec("codel-lab").model
    assert model.congestion_controls(codel) == {"h1": ["cubic"], "h2": ["bbr"]}
    assert [t.duration_s for t in codel.trials] == [60] * 5
    pacing = load_spec("pacing-lab").model
    by_id = {t.id: t for t in pacing.trials}
    assert by_id["fq-maxrate"].duration_s == 15  # -O 5 before -t 10
    assert by_id["fq-rate"].qdiscs["h1:h1-eth0"] == () and by_id["fq-maxrate"].qdiscs["h1:h1-eth0"][0].kind == "fq"
    k = 0.002
    assert model.scale_rates(pacing, k).trials[6].traffic[0].pacing_rate_mbit == 3.8  # 1.9 Gbit/s x k


def test_health_needs_is_what_the_health_checks_measure():
    """netrepro.model.HEALTH_NEEDS (what validate refuses, from HEALTH_CHECKS) agrees with
    analysis/health.py: a version 2 experiment gets a check using a threshold exactly when the
    table says its data are there, and never one using a threshold the table leaves out."""
    import json

    from analysis import health
    from netrepro.experiment.spec import Spec
    keys = json.loads(model.SCHEMA_PATH.read_text())["properties"]["health"]
    keys = set(keys["properties"])
    assert set(model.HEALTH_NEEDS) == keys  # one set of checks: the schema's thresholds
    for name in ("pie-lab", "codel-lab", "pacing-lab"):
        spec = Spec.from_data(load_yaml_file(model.SCHEMA_PATH.parents[2] / "experiments" / name / "experiment.yml"))
        have = model.health_data(spec.model)
        used = {check.threshold for check, _ in health.measures(spec)}
        assert used <= set(model.HEALTH_NEEDS), used
        # every threshold validate accepts has its check reported (a reported check whose
        # data the file lacks says "not measured")
        accepted = {k for k, needs in model.HEALTH_NEEDS.items() if set(needs) <= have}
        # tolerances are read by the check their threshold judges: not judged by themselves
        assert accepted - {"queue_delay_excess_max_ms", "shaper_rate_tolerance_fraction",
                           "pacing_rate_tolerance_fraction"} <= used, (name, accepted, used)
        no_ping = copy.deepcopy(spec.data)
        for t in no_ping["trials"]:
            t.pop("traffic", None)
        no_ping["traffic"] = [it for it in no_ping["traffic"] if it["kind"] != "ping"]
        no_ping["collectors"] = []
        no_ping["figures"] = []
        no_ping["claims"] = [{"id": "c", "text": "t", "rate_scaling": "proportional", "check": {"kind": "bound", "select": {
            "statistic": "total_throughput_mbit"}, "min": 0}}]
        no_ping["health"] = {"nodes_cpu_busy_max_fraction": 0.6}
        # the sources' values name statistics of the ports whose collectors are gone, as the claims did
        for ref in no_ping.get("reference_results") or []:
            ref.pop("values", None)
        m = Spec.from_data(no_ping).model
        assert "collector_sampling_min_fraction" not in {
            check.threshold for check, _ in health.measures(Spec.from_data(no_ping))}
        with pytest.raises(model.ModelError, match="health.collector_sampling_min_fraction: nothing in this file"):
            model.build({**no_ping, "health": {"collector_sampling_min_fraction": 0.9}})
        assert m.trials


def test_each_health_check_is_declared_once_and_whole():
    """HEALTH_CHECKS: one entry per id; the checks sharing a threshold (sampling_ping and
    sampling_qdisc_stats) judge it alike and need the same data; a tuning threshold belongs
    to one check; every data name is one validate can say (HEALTH_DATA); HEALTH_NEEDS is the
    registry's thresholds and tunings with their checks' needs."""
    checks = model.HEALTH_CHECKS
    assert len({c.id for c in checks}) == len(checks)
    by_threshold: dict[str, list] = {}
    for c in checks:
        by_threshold.setdefault(c.threshold, []).append(c)
        assert c.sense in ("max", "min") and c.unit and c.description, c
        assert set(c.needs) | set(c.measured_with) <= set(model.HEALTH_DATA), c
        assert model.health_check(c.id) is c
    assert [c.id for c in by_threshold["collector_sampling_min_fraction"]] == ["sampling_ping", "sampling_qdisc_stats"]
    for shared in by_threshold.values():
        assert len({(c.unit, c.sense, c.needs, c.tuning) for c in shared}) == 1, shared
    tunings = [k for c in checks for k in c.tuning]
    assert len(tunings) == len(set(tunings)) and not set(tunings) & set(by_threshold)
    assert model.HEALTH_NEEDS == {**{k: c.needs for c in checks for k in c.tuning},
                                  **{c.threshold: c.needs for c in checks}}
    assert model.health_check("health") is None


def test_reserved_columns_are_the_analysis_columns():
    from analysis import repetitions
    from analysis.summary import SUMMARY_KEYS
    assert set(SUMMARY_KEYS) | set(repetitions.STATS_COLUMNS) <= set(model.RESERVED_COLUMNS)


# --- names of metrics and the published results' values ----------------------------------------
PIE_VS_RED = Path(__file__).resolve().parent.parent / "experiments" / "pie-vs-red" / "experiment.yml"


@pytest.fixture(scope="module")
def pvr():
    return load_yaml_file(PIE_VS_RED, "experiment file")


def test_the_files_reference_values_and_metric_names_are_in_the_model(pvr):
    """reference_results (with what each source states) and metrics reach the model, which
    the report and the figures read; the file states numbers only as "about" its sources' 20 ms."""
    data = copy.deepcopy(pvr)
    data["metrics"] = {"queue_delay_ms": {"label": "Delay in the queue", "unit": "ms"}, "pie_prob": {"label": "p"}}
    m = model.build(data, "x.yml")
    assert model.quantity_label(m, "queue_delay_ms") == "Delay in the queue (ms)"
    assert model.quantity_label(m, "pie_prob") == "p" and model.quantity_label(m, "rtt_ms") == "RTT (ms)"
    values = [v for r in m.data["reference_results"] for v in r.get("values", [])]
    assert values and {v.get("value") for v in values} == {20, None}
    assert all(v.get("approximate") for v in values if "value" in v) and all(v["quote"] for v in values)


@pytest.mark.parametrize("edit, field, words", [
    (lambda d: d.update(metrics={"queue_delay_p99_ms": {"label": "x"}}), "metrics.queue_delay_p99_ms",
     "unknown metric or statistic 'queue_delay_p99_ms'"),
    (lambda d: d["reference_results"][0]["values"][0].update(statistic="queue_delay_p99_ms"),
     "reference_results[0].values[0].statistic", "unknown statistic 'queue_delay_p99_ms'"),
    (lambda d: d["reference_results"][0]["values"][0].update(trials=["codel-unlimited"]),
     "reference_results[0].values[0].trials", "unknown trial 'codel-unlimited'"),
    (lambda d: d["reference_results"][0]["values"][0].update(phases=["p6"]),
     "reference_results[0].values[0].phases", "unknown phase 'p6'"),
    (lambda d: d["reference_results"][0]["values"][0].update(subject="router:eth1"),
     "reference_results[0].values[0].subject", "computes no queue_delay_median_ms of router:eth1"),
    (lambda d: d["reference_results"][0]["values"][0].update(finding="flat"),
     "reference_results[0].values[0]", "expected value (the number the source states) or finding"),
    (lambda d: d["reference_results"][0]["values"][0].pop("value"), "reference_results[0].values[0]",
     "or finding (its words where it states none), one of them"),
    (lambda d: d["reference_results"][0]["values"][1].update(approximate=True),
     "reference_results[0].values[1].approximate", "qualifies a value"),
])
def test_bad_reference_values_and_metric_names_are_refused_naming_the_field(pvr, edit, field, words):
    data = copy.deepcopy(pvr)
    edit(data)
    with pytest.raises(model.ModelError) as e:
        model.build(data, "x.yml")
    assert e.value.field.startswith(field) and words in e.value.problem, str(e.value)


def test_a_file_that_allows_rate_scaling_says_how_each_claim_on_a_rate_follows_it(tmp_path):
    """validate refuses, in one line naming the claim, a claim with a threshold on a value the
    rate scale changes (here Mbit/s) in a file that allows rate scaling, without rate_scaling;
    and a rate_scaling on a claim that sets none (here ms). A recorded run's spec written before
    the field is judged as it was (rate_scaling: none filled in, netrepro.experiment.migrate)."""
    import yaml

    from netrepro.experiment.migrate import recorded_rate_scaling
    from netrepro.experiment.spec import SpecError, load_spec

    data = yaml.safe_load((Path(__file__).resolve().parent / "data" / "experiments" / "gateway-fifo.yml").read_text())
    data["rate_scale"] = {"allowed": True, "min": 0.1, "note": "the gateway's rate and its FIFO limits follow k"}
    f = tmp_path / "scaled.yml"
    f.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError) as exc:
        load_spec(f)
    line = str(exc.value)
    assert line.startswith(f"{f}: claims[0].rate_scaling: missing: claim link-used sets thresholds on "
                           "total_throughput_mbit (Mbit/s), which the rate scale changes"), line
    assert "expected rate_scaling: proportional" in line and "\n" not in line
    fixed = recorded_rate_scaling(data)
    assert [c.get("rate_scaling") for c in fixed["claims"]] == ["none", "none", None]
    assert "rate_scaling" not in data["claims"][0]   # a copy
    data["claims"][0]["rate_scaling"] = "proportional"
    data["claims"][1]["rate_scaling"] = "proportional"
    data["claims"][2]["rate_scaling"] = "proportional"
    f.write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError) as exc:
        load_spec(f)
    assert str(exc.value).startswith(f"{f}: claims[2].rate_scaling: claim delay-bounded sets no threshold on a value "
                                     "the rate scale changes")
    del data["claims"][2]["rate_scaling"]
    f.write_text(yaml.safe_dump(data))
    assert load_spec(f).model.data["claims"][0]["rate_scaling"] == "proportional"


def test_nodes_are_typed_immutable_records_that_copy_and_pickle():
    """The model's nodes are records read by attribute, in file order; neither a node, its
    interfaces nor the mapping of them can be changed, and they survive deepcopy and pickle
    (the ns3 site's process pool) unchanged."""
    import copy
    import dataclasses
    import pickle

    from netrepro.experiment.spec import load_spec
    from netrepro.model import Interface, Node, Route

    m = load_spec("pie-vs-red").model
    assert list(m.nodes) == list(m.data["nodes"])
    router = m.nodes["router"]
    assert isinstance(router, Node) and router.kind == "router" and not router.is_switch
    assert all(isinstance(i, Interface) and i.address for i in router.interfaces.values())
    client = m.nodes["client1"]
    assert client.routes and all(isinstance(r, Route) for r in client.routes)
    assert client.interfaces[next(iter(client.interfaces))].ip == m.addresses("client1")[0].ip.compressed
    with pytest.raises(dataclasses.FrozenInstanceError):
        router.kind = "host"
    with pytest.raises(TypeError):
        router.interfaces["x"] = Interface("x")  # type: ignore[index]
    with pytest.raises(TypeError):
        m.nodes["x"] = router  # type: ignore[index]
    assert copy.deepcopy(m.nodes) == m.nodes and pickle.loads(pickle.dumps(m.nodes)) == m.nodes


@pytest.mark.parametrize("name", sorted(p.name for p in (Path(__file__).resolve().parent.parent / "experiments").iterdir()
                                        if (p / "experiment.yml").is_file()))
def test_trials_and_items_are_typed_records_that_give_back_the_file(name):
    """Every experiment's trials are immutable records whose items, written back as the file
    writes them (``from``/``to``, ``fq_rate_mbit``), are the model's items exactly; a trial's
    stacks, sysctls and labels cannot be changed."""
    import dataclasses

    from netrepro.experiment.spec import load_spec
    from netrepro.model import TrafficItem, Trial

    m = load_spec(name).model
    assert [t.id for t in m.trials] == [t["id"] for t in m.data["trials"]]
    for t, data in zip(m.trials, m.data["trials"]):
        assert isinstance(t, Trial) and all(isinstance(it, TrafficItem) for it in t.traffic)
        assert [it.as_data() for it in t.traffic] == data["traffic"], (name, t.id)
        assert t.qdiscs_data() == data["qdiscs"]
        assert t.sysctls_data() == data["sysctls"] and t.labels_data() == data["labels"]
        assert t.duration_s == max(it.start_s + it.length_s for it in t.traffic)
        with pytest.raises(dataclasses.FrozenInstanceError):
            t.traffic[0].duration_s = 1  # type: ignore[misc]
        with pytest.raises(TypeError):
            t.labels["x"] = "y"  # type: ignore[index]
        for st in t.qdiscs.values():
            for layer in st:
                with pytest.raises(dataclasses.FrozenInstanceError):
                    layer.kind = "x"  # type: ignore[misc]
                with pytest.raises(TypeError):
                    layer.params["x"] = 1  # type: ignore[index]


@pytest.mark.parametrize("name", sorted(p.name for p in (Path(__file__).resolve().parent.parent / "experiments").iterdir()
                                        if (p / "experiment.yml").is_file()))
def test_links_and_ports_are_typed_records_that_give_back_the_file(name):
    """Every experiment's links are immutable records of two ports, which written back are the
    model's ``links`` exactly; each end's interface names the other end as its peer, and each
    collector's port is the one its ``at`` names."""
    from netrepro.experiment.spec import load_spec
    from netrepro.model import Link, Port

    m = load_spec(name).model
    assert [link.as_data() for link in m.links] == m.data["links"]
    for link in m.links:
        assert isinstance(link, Link) and all(isinstance(p, Port) for p in link.ports)
        assert link.nodes == (link.a.node, link.b.node) and link.a != link.b
        assert m.nodes[link.a.node].interfaces[link.a.interface].peer == link.b
        assert m.nodes[link.b.node].interfaces[link.b.interface].peer == link.a
        with pytest.raises(dataclasses.FrozenInstanceError):
            link.a = link.b  # type: ignore[misc]
        with pytest.raises(dataclasses.FrozenInstanceError):
            link.a.node = "x"  # type: ignore[misc]
    for c, data in zip(m.collectors, m.data["collectors"]):
        assert str(c.port) == c.port.name == data["at"] and (c.node, c.interface) == (c.port.node, c.port.interface)
        assert Port.parse(data["at"]) == c.port and c.port.interface in m.nodes[c.node].interfaces
    assert isinstance(m.links, tuple)


@pytest.mark.parametrize("text", ["s1", "s1:", ":eth0", "s1:eth0:x", ""])
def test_a_port_is_one_node_and_one_interface(text):
    with pytest.raises(ValueError, match="expected a port NODE:INTERFACE"):
        model.Port.parse(text)
    assert model.Port.parse("s2:s2-eth2") == model.Port("s2", "s2-eth2")


@pytest.mark.parametrize("name", sorted(p.name for p in (Path(__file__).resolve().parent.parent / "experiments").iterdir()
                                        if (p / "experiment.yml").is_file()))
def test_stacks_are_qdisc_records_that_give_back_the_file(name):
    """Every layer the file writes (its default ``qdiscs`` and each trial's) read as a
    :class:`netrepro.core.tc.Qdisc` and written back is the file's layer, keys in the file's
    order; every trial's stacks written back are the model's data; a layer cannot be changed
    and survives deepcopy and pickle (the ns3 site's process pool)."""
    import pickle

    from netrepro.experiment.spec import REPO_ROOT, load_spec

    raw = load_yaml_file(REPO_ROOT / "experiments" / name / "experiment.yml", "experiment file")
    written = [raw.get("qdiscs") or {}] + [t.get("qdiscs") or {} for t in raw["trials"]]
    layers = [layer for qd in written for st in qd.values() for layer in st]
    assert layers, name
    for layer in layers:
        q = tc.Qdisc.from_data(layer)
        assert q.as_data() == layer and list(q.as_data()) == list(layer)
        assert q.kind == layer["kind"] and q.handle == layer.get("handle")
        assert dict(q.params) == {k: v for k, v in layer.items() if k not in ("kind", "handle")}
    m = load_spec(name).model
    for t, data in zip(m.trials, m.data["trials"]):
        assert t.qdiscs_data() == data["qdiscs"], (name, t.id)
        for port, st in t.qdiscs.items():
            assert all(isinstance(q, tc.Qdisc) for q in st) and t.stack(port) == st
            assert tc.stack_commands(st) == tc.stack_commands(tuple(map(tc.Qdisc.from_data, data["qdiscs"][port])))
            for q in st:
                with pytest.raises(dataclasses.FrozenInstanceError):
                    q.params = {}  # type: ignore[misc]
                with pytest.raises(TypeError):
                    del q.params["kind"]  # type: ignore[attr-defined]
                assert copy.deepcopy(q) == q and pickle.loads(pickle.dumps(q)) == q


def test_a_qdisc_record_reads_the_file_form_and_places_its_handle():
    q = tc.Qdisc("fq_codel", params={"limit_packets": 100, "target_ms": 5})
    assert q.as_data() == {"kind": "fq_codel", "limit_packets": 100, "target_ms": 5}
    assert q.handle is None and q.handle_at(0) == "1:" and q.handle_at(10) == "b:"
    assert tc.Qdisc("pie", "10:").handle_at(0) == "10:" and tc.Qdisc("pie", "10:").as_data() == {"kind": "pie",
                                                                                                   "handle": "10:"}
    assert isinstance(q.params, model.FrozenMap) and q == tc.Qdisc.from_data(q.as_data())
    with pytest.raises(KeyError):
        tc.Qdisc.from_data({"target_ms": 5})
    # a record, not a mapping: read by attribute only
    with pytest.raises(TypeError):
        q["kind"]  # type: ignore[index]
    with pytest.raises(TypeError):
        "kind" in q  # type: ignore[operator]
