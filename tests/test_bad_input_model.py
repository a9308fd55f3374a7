"""Bad input, schema_version 2 experiment file (issue 20): units per qdisc kind, sysctl values,
names that mean something else, impossible addressing, and a management subnet that overlaps
the experiment. One line naming the file, the field (or option) and what was expected; exit 2;
nothing changed.

Every row copies the committed experiments/pie-lab/experiment.yml (schema_version 2) into its
temporary folder, edits its text (each replaced text must occur exactly once), and runs the real
command line (tests/badinput.py): ``netrepro validate <file>``, or ``plan`` / ``run --dry-run``
for the local site's management subnet, which must be refused before anything is built.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from badinput import REPO, Row, edited_copy, run_row

REAL = REPO / "experiments" / "pie-lab" / "experiment.yml"
TEXT = REAL.read_text()
FILE = "{tmp}/experiment.yml"
VALIDATE = ["validate", FILE]

#: Texts of the committed file the rows edit (each occurs once).
NETEM = '"s1:s1-eth1": [{kind: netem, delay_ms: 20}]'
H1 = "    h1: {interfaces: {h1-eth0: {link: s1, address: 10.0.0.1/8}}}"
H2 = "    h2: {interfaces: {h2-eth0: {link: s1, address: 10.0.0.2/8}}}"
H3 = "    h3: {interfaces: {h3-eth0: {link: s2, address: 10.0.0.3/8}}}"
RMEM = 'net.ipv4.tcp_rmem: "10240 87380 52428800"'
TOPOLOGY = "topology:\n  nodes:\n"
S1_ETH3 = "        s1-eth3: {link: h2}"


def edited(*pairs: tuple[str, str]):
    """A row setup writing the committed experiment with each (old, new) text replaced
    (:func:`badinput.edited_copy`)."""
    return edited_copy(REAL, *pairs)


def layer(extra: str):
    """The netem stack of s1:s1-eth1 with one more layer, ``extra`` (a YAML flow mapping)."""
    return edited((NETEM, f'"s1:s1-eth1": [{{kind: netem, delay_ms: 20}}, {extra}]'))


def rmem(value: str):
    """net.ipv4.tcp_rmem set to ``value`` (YAML text, quoted as the row gives it)."""
    return edited((RMEM, f"net.ipv4.tcp_rmem: {value}"))


L1 = "qdiscs.s1:s1-eth1[1]"
RMEM_FIELD = "sysctls[0].set.net.ipv4.tcp_rmem"
SYSCTL_EXPECTED = ("expected the sysctl's value: a whole number of at most 64 bits (0 .. 2^64-1), or text of one to "
                   "eight space-separated whole numbers")
ROWS = [
    # --- units: each qdisc kind takes only the suffixes of its keywords' own units ----------
    Row("bfifo-limit-in-packets", VALIDATE,
        [FILE, f"{L1}.limit_packets", "bfifo's limit is in bytes; expected limit_bytes"],
        setup=layer("{kind: bfifo, limit_packets: 40}")),
    Row("pfifo-limit-in-bytes", VALIDATE,
        [FILE, f"{L1}.limit_bytes", "pfifo's limit is in packets; expected limit_packets"],
        setup=layer("{kind: pfifo, limit_bytes: 60000}")),
    Row("codel-target-in-bytes", VALIDATE,
        [FILE, f"{L1}.target_bytes", "codel's target is a time; expected target_ms or target_us"],
        setup=layer("{kind: codel, target_bytes: 5}")),
    Row("codel-target-without-unit", VALIDATE,
        [FILE, f"{L1}.target", "codel's target is a time; expected target_ms or target_us"],
        setup=layer("{kind: codel, target: 5}")),
    Row("tbf-latency-in-packets", VALIDATE,
        [FILE, f"{L1}.latency_packets", "tbf's latency is a time"],
        setup=layer("{kind: tbf, rate_mbit: 10, burst_bytes: 15140, latency_packets: 50}")),
    Row("htb-rate-in-kbit", VALIDATE,
        [FILE, f"{L1}.rate_kbit", "htb's rate is a rate; expected rate_mbit"],
        setup=layer("{kind: htb, rate_kbit: 10000}")),
    Row("pie-alpha-with-a-unit", VALIDATE,
        [FILE, f"{L1}.alpha_ms", "pie's alpha is a plain number; expected alpha"],
        setup=layer("{kind: pie, alpha_ms: 2}")),
    Row("same-keyword-twice", VALIDATE,
        [FILE, f"{L1}.target_us", "codel's target is already given as target_ms"],
        setup=layer("{kind: codel, target_ms: 5, target_us: 5000}")),
    Row("tbf-without-a-limit", VALIDATE,
        [FILE, "qdiscs.s1:s1-eth1[1]", "tbf needs one of its limit, latency", "expected limit_bytes or latency_ms"],
        setup=layer("{kind: tbf, rate_mbit: 10, burst_bytes: 15140}")),
    Row("red-without-its-thresholds", VALIDATE,
        [FILE, f"{L1}.min_bytes", "red needs its min"],
        setup=layer("{kind: red, limit_bytes: 400000, max_bytes: 150000, avpkt_bytes: 1000, burst_packets: 55, "
                    "probability: 0.1, bandwidth_mbit: 10}")),
    # --- ranges: zero or negative rates, limits, bursts, gains, intervals --------------------
    Row("zero-rate", VALIDATE,
        [FILE, "trials[2].qdiscs.s2:s2-eth2[0].rate_mbit", "expected a number > 0", "got 0"],
        setup=edited(("rate_mbit: 100, burst_bytes: 50000", "rate_mbit: 0, burst_bytes: 50000"))),
    Row("negative-limit", VALIDATE,
        [FILE, "qdiscs.s1:s1-eth1[0].limit_packets", "expected a number > 0", "got -5"],
        setup=edited((NETEM, '"s1:s1-eth1": [{kind: netem, delay_ms: 20, limit_packets: -5}]'))),
    Row("zero-burst", VALIDATE,
        [FILE, "trials[2].qdiscs.s2:s2-eth2[0].burst_bytes", "expected a number > 0", "got 0"],
        setup=edited(("rate_mbit: 100, burst_bytes: 50000", "rate_mbit: 100, burst_bytes: 0"))),
    Row("tbf-burst-below-a-frame", VALIDATE,
        [FILE, "trials[2].qdiscs.s2:s2-eth2[0].burst_bytes", "1000 B holds no full-size frame",
         "expected at least 1514 B"],
        setup=edited(("rate_mbit: 100, burst_bytes: 50000", "rate_mbit: 100, burst_bytes: 1000"))),
    Row("zero-gain", VALIDATE,
        [FILE, f"{L1}.alpha", "expected a whole number from 1 to 32", "got 0"],
        setup=layer("{kind: pie, alpha: 0}")),
    Row("zero-interval", VALIDATE,
        [FILE, f"{L1}.interval_ms", "expected a number > 0", "got 0"],
        setup=layer("{kind: codel, interval_ms: 0}")),
    Row("probability-above-one", VALIDATE,
        [FILE, f"{L1}.probability", "expected a fraction > 0 and <= 1", "got 2"],
        setup=layer("{kind: red, limit_bytes: 400000, min_bytes: 50000, max_bytes: 150000, avpkt_bytes: 1000, "
                    "burst_packets: 55, probability: 2, bandwidth_mbit: 10}")),
    Row("packets-not-whole", VALIDATE,
        [FILE, f"{L1}.limit_packets", "expected a whole number of packets", "got 1.5"],
        setup=layer("{kind: pfifo, limit_packets: 1.5}")),
    # --- flags and words: closed sets, never free text -----------------------------------
    Row("pie-ecn-no", VALIDATE,
        [FILE, f"{L1}.ecn", "expected true or false (pie's ecn is a flag)", "got 'no'"],
        setup=layer('{kind: pie, ecn: "no"}')),
    Row("codel-ecn-as-number", VALIDATE,
        [FILE, f"{L1}.ecn", "expected true or false", "got 1"],
        setup=layer("{kind: codel, ecn: 1}")),
    Row("free-text-param", VALIDATE,
        [FILE, f"{L1}.linklayer", "expected a number in the unit of the name's suffix", "got 'eth; reboot'"],
        setup=layer('{kind: tbf, rate_mbit: 10, burst_bytes: 15140, limit_bytes: 30000, linklayer: "eth; reboot"}')),
    Row("word-outside-its-set", VALIDATE,
        [FILE, f"{L1}.linklayer", "expected one of ethernet, atm, adsl", "got 'token'"],
        setup=layer("{kind: tbf, rate_mbit: 10, burst_bytes: 15140, limit_bytes: 30000, linklayer: token}")),
    Row("text-for-a-time", VALIDATE,
        [FILE, f"{L1}.target_ms", "expected a number in the unit of the name's suffix", "got '5'"],
        setup=layer("{kind: codel, target_ms: '5'}")),
    # --- sysctl values: integers, numbers separated by spaces, or one lower-case word ------
    Row("sysctl-template", VALIDATE,
        [FILE, RMEM_FIELD, SYSCTL_EXPECTED, "lookup"],
        setup=rmem("\"{{ lookup('pipe', 'id; echo reno') }}\"")),
    Row("sysctl-option-like", VALIDATE,
        [FILE, RMEM_FIELD, SYSCTL_EXPECTED, "'-b'"],
        setup=rmem('"-b"')),
    Row("sysctl-colon", VALIDATE,
        [FILE, RMEM_FIELD, SYSCTL_EXPECTED, "'y:-b /some/file'"],
        setup=rmem('"y:-b /some/file"')),
    Row("sysctl-newline", VALIDATE,
        [FILE, RMEM_FIELD, SYSCTL_EXPECTED],
        setup=rmem('"reno\\n"')),
    Row("sysctl-dollar", VALIDATE,
        [FILE, RMEM_FIELD, SYSCTL_EXPECTED, "'$(id)'"],
        setup=rmem('"$(id)"')),
    Row("sysctl-negative-integer", VALIDATE,
        [FILE, RMEM_FIELD, "expected a number >= 0", "got -1"],
        setup=rmem("-1")),
    # --- names that mean something else --------------------------------------------------
    Row("node-named-all", VALIDATE,
        [FILE, "topology.nodes.all", "'all' is a selector", "expected another node name"],
        setup=edited((H2, H2.replace("h2:", "all:")))),
    Row("node-named-hosts", VALIDATE,
        [FILE, "topology.nodes.hosts", "'hosts' is a selector"],
        setup=edited((H3, H3.replace("h3:", "hosts:")))),
    Row("node-named-switches", VALIDATE,
        [FILE, "topology.nodes.switches", "'switches' is a selector"],
        setup=edited((H3, H3.replace("h3:", "switches:")))),
    Row("group-named-like-a-node", VALIDATE,
        [FILE, "topology.nodes.h1.groups[0]", "'h2' is a node's name", "expected a group name of its own"],
        setup=edited((H1, H1.replace("h1: {", "h1: {groups: [h2], ")))),
    Row("group-named-like-a-selector", VALIDATE,
        [FILE, "topology.nodes.h1.groups[0]", "'routers' is a selector"],
        setup=edited((H1, H1.replace("h1: {", "h1: {groups: [routers], ")))),
    Row("interface-lo", VALIDATE,
        [FILE, "topology.nodes.h1.interfaces.lo", "'lo' is an interface the sites or the kernel use"],
        setup=edited((H1, H1.replace("h1-eth0:", "lo:")))),
    Row("interface-eth0", VALIDATE,
        [FILE, "topology.nodes.h1.interfaces.eth0", "'eth0' is an interface the sites or the kernel use"],
        setup=edited((H1, H1.replace("h1-eth0:", "eth0:")))),
    Row("interface-br0", VALIDATE,
        [FILE, "topology.nodes.s2.interfaces.br0", "'br0' is an interface the sites or the kernel use"],
        setup=edited(("        s2-eth2: {link: h3}", "        br0: {link: h3}"))),
    Row("interface-named-up", VALIDATE,
        [FILE, "topology.nodes.h1.interfaces.up", "'up' is a keyword of ip link"],
        setup=edited((H1, H1.replace("h1-eth0:", "up:")))),
    Row("interface-named-type", VALIDATE,
        [FILE, "topology.nodes.h1.interfaces.type", "'type' is a keyword of ip link"],
        setup=edited((H1, H1.replace("h1-eth0:", "type:")))),
    Row("network-mgmt", VALIDATE,
        [FILE, "topology.networks.mgmt", "'mgmt' is the sites' management network"],
        setup=edited((TOPOLOGY, "topology:\n  networks:\n    mgmt: {subnet: 192.168.50.0/24}\n  nodes:\n"))),
    # --- impossible addressing -----------------------------------------------------------
    Row("overlapping-subnets", VALIDATE,
        [FILE, "topology.networks.spare.subnet", "10.9.0.0/24 overlaps 10.0.0.0/8", "another L2 domain"],
        setup=edited((TOPOLOGY, "topology:\n  networks:\n    spare: {subnet: 10.9.0.0/24}\n  nodes:\n"))),
    Row("network-address", VALIDATE,
        [FILE, "topology.nodes.h1.interfaces.h1-eth0.address", "10.0.0.0/8 is the network address of 10.0.0.0/8"],
        setup=edited((H1, H1.replace("10.0.0.1/8", "10.0.0.0/8")))),
    Row("broadcast-address", VALIDATE,
        [FILE, "topology.nodes.h3.interfaces.h3-eth0.address", "is the broadcast address of 10.0.0.0/8"],
        setup=edited((H3, H3.replace("10.0.0.3/8", "10.255.255.255/8")))),
    Row("subnet-with-host-bits", VALIDATE,
        [FILE, "topology.networks.spare.subnet", "expected an IPv4 network with no host bits"],
        setup=edited((TOPOLOGY, "topology:\n  networks:\n    spare: {subnet: 192.168.7.9/24}\n  nodes:\n"))),
    Row("route-via-off-subnet", VALIDATE,
        [FILE, "topology.nodes.h1.routes[0].via", "192.168.1.1 is on no subnet of h1 (10.0.0.0/8)"],
        setup=edited((H1, H1.replace("h1: {", "h1: {routes: [{to: 192.168.5.0/24, via: 192.168.1.1}], ")))),
    Row("route-via-own-address", VALIDATE,
        [FILE, "topology.nodes.h1.routes[0].via", "10.0.0.1 is h1's own address"],
        setup=edited((H1, H1.replace("h1: {", "h1: {routes: [{to: 192.168.5.0/24, via: 10.0.0.1}], ")))),
    Row("route-to-with-host-bits", VALIDATE,
        [FILE, "topology.nodes.h1.routes[0].to", "expected an IPv4 network with no host bits"],
        setup=edited((H1, H1.replace("h1: {", "h1: {routes: [{to: 192.168.5.7/24, via: 10.0.0.9}], ")))),
    # issue 54: a node on one LAN (or one L2 domain) by two interfaces: two addresses of one subnet
    Row("two-interfaces-on-one-lan", VALIDATE,
        [FILE, "topology.nodes.h1.interfaces.h1-eth2.network", "h1's interfaces h1-eth1 and h1-eth2 are both on LAN "
         "'lan'", "expected one interface of a node on a LAN"],
        setup=edited((TOPOLOGY, "topology:\n  networks:\n    lan: {subnet: 192.168.9.0/24}\n  nodes:\n"),
                     (H1, H1.replace("}}}", "}, h1-eth1: {network: lan, address: 192.168.9.1/24}, "
                                           "h1-eth2: {network: lan, address: 192.168.9.2/24}}}")))),
    Row("two-interfaces-on-one-switch", VALIDATE,
        [FILE, "topology.nodes.h1.interfaces.h1-eth1", "h1's interfaces h1-eth0 and h1-eth1 are in one L2 domain",
         "expected one interface of a node in an L2 domain"],
        setup=edited((H1, H1.replace("}}}", "}, h1-eth1: {link: \"s1:s1-eth4\", address: 10.0.0.11/8}}}")),
                     (S1_ETH3, S1_ETH3 + "\n        s1-eth4: {link: \"h1:h1-eth1\"}"))),
    # --- the local site's management subnet ----------------------------------------------
    Row("address-in-default-mgmt-subnet", VALIDATE,
        [FILE, "topology.nodes.h1.interfaces.h1-eth0.address",
         "172.30.0.1/24 overlaps the local site's default management subnet 172.30.0.0/24", "mgmt_subnet"],
        setup=edited((H1, H1.replace("10.0.0.1/8", "172.30.0.1/24")), (H2, H2.replace("10.0.0.2/8", "172.30.0.2/24")),
                     (H3, H3.replace("10.0.0.3/8", "172.30.0.3/24")))),
    Row("mgmt-subnet-overlap-by-option-plan", ["plan", FILE, "--site", "local", "-o", "mgmt_subnet=10.9.0.0/24"],
        ["site local", "mgmt_subnet='10.9.0.0/24' (from --option)", FILE,
         "topology.nodes.h1.interfaces.h1-eth0.address (10.0.0.1/8)", "expected a management subnet apart"],
        setup=edited()),
    Row("mgmt-subnet-overlap-by-option-dry-run", ["run", FILE, "--site", "local", "--dry-run", "-o",
                                                  "mgmt_subnet=10.0.0.0/24"],
        ["site local", "mgmt_subnet='10.0.0.0/24' (from --option)", "topology.nodes.h1.interfaces.h1-eth0.address"],
        setup=edited()),
    Row("mgmt-subnet-overlap-by-route", ["plan", FILE, "--site", "local", "-o", "mgmt_subnet=192.168.5.0/24"],
        ["site local", "mgmt_subnet='192.168.5.0/24'", "topology.nodes.h1.routes[0].to (192.168.5.0/25)"],
        setup=edited((H1, H1.replace("h1: {", "h1: {routes: [{to: 192.168.5.0/25, via: 10.0.0.9}], ")))),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_bad_input(row, tmp_path):
    run_row(row, tmp_path)


def test_rows_are_many_and_unique():
    ids = [r.id for r in ROWS]
    assert len(ids) == len(set(ids)) and len(ids) >= 20


def test_a_default_route_is_not_a_management_overlap(tmp_path):
    """A route wider than the management subnet (a default route) loses to the node's own
    route to it: the local site plans it."""
    import os
    edited((H1, H1.replace("h1: {", "h1: {routes: [{to: 0.0.0.0/0, via: 10.0.0.9}], ")))(tmp_path)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("NETREPRO_")},
           "NETREPRO_STATE": str(tmp_path / "state"), "NETREPRO_RESULTS": str(tmp_path / "results")}
    proc = subprocess.run([sys.executable, "-m", "netrepro", "plan", str(tmp_path / "experiment.yml"), "--site",
                           "local", "-o", "mgmt_subnet=192.168.77.0/24"], cwd=REPO, capture_output=True, text=True,
                          timeout=120, env=env)
    assert proc.returncode == 0 and "management network 192.168.77.0/24" in proc.stdout, proc.stderr


def test_unedited_copy_validates_and_plans(tmp_path):
    """The rows fail because of their edit: the same copy, unedited, is valid, and the local
    site plans it with a management subnet apart from its addresses."""
    edited()(tmp_path)
    f = str(tmp_path / "experiment.yml")
    env_state = {"NETREPRO_STATE": str(tmp_path / "state"), "NETREPRO_RESULTS": str(tmp_path / "results")}
    import os
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("NETREPRO_")}, **env_state}
    proc = subprocess.run([sys.executable, "-m", "netrepro", "validate", f], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0 and "valid (schema_version 2: 5 nodes, 3 trials" in proc.stdout, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "netrepro", "plan", f, "--site", "local", "-o",
                           "mgmt_subnet=192.168.77.0/24"], cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
    assert proc.returncode == 0 and "management network 192.168.77.0/24" in proc.stdout, proc.stderr
