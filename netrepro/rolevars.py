"""The provisioning playbooks' input, computed from the experiment spec.

:func:`role_vars` returns one JSON-serialisable dict that the controller passes to
``playbooks/provision.yml``, ``set-aqm.yml`` and ``set-variant.yml`` as the single extra var
``netrepro`` (``ansible-playbook -e @vars.json`` with ``{"netrepro": role_vars(spec)}``).
The playbooks map its parts onto role variables; the roles never read the spec themselves.

Per-node parts are keyed by node name (= inventory host name). tc commands are argv lists
without the leading ``tc`` and carry :data:`netrepro.tc.DEV` (``"@dev@"``) where the
device goes: the device name is found on the node from its address (roles/interfaces), and
the roles substitute it.
"""

from __future__ import annotations

from typing import Any

from netrepro import tc
from netrepro.model import congestion_controls, layer_probes, node_sysctls, trial_plan
from netrepro.spec import Spec

#: ethtool -K feature names of the spec's links.offloads keys.
OFFLOAD_FEATURES = ("tso", "gso", "gro")


def node_netem(spec: Spec) -> dict[str, list[dict[str, Any]]]:
    """Node -> list of {network, delay_ms, argv, probe_argv} netem settings (empty list: none).

    Raises ValueError when two delay entries put netem on the same node and network.
    """
    out: dict[str, list[dict[str, Any]]] = {n: [] for n in spec.nodes}
    for i, d in enumerate(spec["links"].get("delays", [])):
        q = tc.Netem(d["delay_ms"], d.get("limit_packets", 1000), d.get("jitter_ms"))
        for node in spec.select(d["nodes"]):
            if any(x["network"] == d["network"] for x in out[node]):
                raise ValueError(f"links.delays[{i}]: {node} already has netem on {d['network']}")
            out[node].append({"network": d["network"], "delay_ms": d["delay_ms"],
                              "argv": q.argv(tc.DEV), "probe_argv": q.probe_argv(tc.DEV)})
    return out


def bottleneck_vars(spec: Spec, variant: str | None) -> dict[str, Any]:
    """The router's HTB: {node, network, rate_mbit, burst_bytes, qdisc_argv, class_argv,
    parent, handle}. A variant's ``bottleneck.rate_mbit`` overrides the spec's rate."""
    b = spec["bottleneck"]
    rate = b["rate_mbit"]
    if variant is not None:
        rate = spec["variants"][variant].get("bottleneck", {}).get("rate_mbit", rate)
    htb = tc.HtbRoot(rate)
    return {
        "node": b["node"],
        "network": b["network"],
        "rate_mbit": rate,
        "burst_bytes": htb.burst,
        "qdisc_argv": htb.qdisc_argv(tc.DEV),
        "class_argv": htb.class_argv(tc.DEV),
        "parent": htb.classid,
        "handle": b.get("aqm_handle", "10:"),
    }


def aqm_builders(spec: Spec) -> dict[str, tc.Qdisc]:
    """AQM name -> its tc builder, as the leaf of the HTB class under ``aqm_handle``."""
    parent = tc.HtbRoot(spec["bottleneck"]["rate_mbit"]).classid
    handle = spec["bottleneck"].get("aqm_handle", "10:")
    return {name: tc.aqm_qdisc(a["qdisc"], a["params"], spec.pie_limit_packets(), parent, handle)
            for name, a in spec["aqms"].items()}


def capability_probes(spec: Spec) -> dict[str, dict[str, list[str]]]:
    """Node -> {label: tc argv} that must succeed on a throwaway device of that node.

    Nodes with netem probe their exact netem qdisc (label ``netem@<network>``); the
    bottleneck node probes
    htb and every AQM with its exact parameters (label = AQM name), so both the kernel
    module and tc's parser are checked. Other nodes get {} (the probe still reports the
    kernel and iproute2 versions).
    """
    out: dict[str, dict[str, list[str]]] = {n: {} for n in spec.nodes}
    for node, items in node_netem(spec).items():
        for it in items:
            out[node][f"netem@{it['network']}"] = it["probe_argv"]
    b = spec["bottleneck"]["node"]
    out[b]["htb"] = tc.HtbRoot(spec["bottleneck"]["rate_mbit"]).probe_argv(tc.DEV)
    for name, q in aqm_builders(spec).items():
        out[b][name] = q.probe_argv(tc.DEV)
    return out


def ftp_source_vars(spec: Spec, variant: str) -> dict[str, Any] | None:
    """FTP sources: {nodes, listen_address: {node: ip}, files: [names], file_size_bytes,
    max_rate_by_variant: {variant: bytes/s}, max_rate_bytes_per_s} or None when the spec's
    sources are not FTP or the spec has none (``sources`` is optional in the schema). File
    names are ``file01`` .. ``fileNN`` (zero-padded to the width of the count);
    ``max_rate_bytes_per_s`` is ``variant``'s (0 = unlimited)."""
    src = spec.get("sources")
    if not src or src["kind"] != "ftp":
        return None
    nodes = spec.select(src["nodes"])
    n = src.get("files", 20)
    rates = {v: vd.get("source", {}).get("max_rate_bytes_per_s", 0)
             for v, vd in spec["variants"].items()}
    return {
        "nodes": nodes,
        "listen_address": {node: spec.nodes[node]["interfaces"][0]["address"] for node in nodes},
        "files": ftp_file_names(n),
        "file_size_bytes": src.get("file_size_bytes", 1 << 30),
        "max_rate_by_variant": rates,
        "max_rate_bytes_per_s": rates[variant],
    }


def ftp_file_names(count: int) -> list[str]:
    """The FTP sources' file names: ``file01`` .. ``fileNN``, zero-padded to the width of
    ``count`` (at least two digits)."""
    width = max(2, len(str(count)))
    return [f"file{i:0{width}d}" for i in range(1, count + 1)]


def node_routes(spec: Spec) -> dict[str, list[dict[str, str]]]:
    """Node -> list of static routes {to, via} (``topology.nodes.<node>.routes``; empty
    list: none), for every node, in file order."""
    return {node: [{"to": r["to"], "via": r["via"]} for r in nd.get("routes", [])]
            for node, nd in spec.nodes.items()}


def role_vars(spec: Spec, variant: str | None = None) -> dict[str, Any]:
    """Every variable the provisioning playbooks need, as one JSON-serialisable dict.

    Args:
        spec: the validated experiment.
        variant: the traffic variant the sources are set up for; None means the variant of
            the first trial (what ``provision.yml`` starts with).
    Returns:
        ``{"experiment", "variant", "nodes", "sysctls", "offloads", "offload_networks",
        "netem", "probes", "bottleneck", "aqm", "ftp_source", "routes", "mtu_bytes"}``; see
        docs in the keys' builders: :func:`netrepro.model.node_sysctls`, :func:`node_netem`,
        :func:`capability_probes`, :func:`bottleneck_vars`, :func:`ftp_source_vars`,
        :func:`node_routes`. ``aqm`` is {AQM name: {qdisc, argv}}; ``offloads`` is
        {feature: "on"|"off"} for ethtool -K; ``offload_networks`` node -> every network
        the node is on; ``mtu_bytes`` is links.mtu_bytes, the MTU of every experiment
        interface (roles/routes).
    Raises:
        KeyError: unknown variant (message lists the known ones).
    """
    if variant is None:
        variant = spec["trials"][0]["variant"]
    if variant not in spec["variants"]:
        raise KeyError(f"unknown variant {variant!r}; expected one of: {', '.join(spec['variants'])}")
    offl = spec["links"].get("offloads", {})
    return {
        "experiment": spec.name,
        "variant": variant,
        "nodes": list(spec.nodes),
        "sysctls": node_sysctls(spec),
        "offloads": {k: ("on" if offl[k] else "off") for k in OFFLOAD_FEATURES if k in offl},
        "offload_networks": {n: [i["network"] for i in nd["interfaces"]] for n, nd in spec.nodes.items()},
        "netem": node_netem(spec),
        "probes": capability_probes(spec),
        "bottleneck": bottleneck_vars(spec, variant),
        "aqm": {name: {"qdisc": spec["aqms"][name]["qdisc"], "argv": q.argv(tc.DEV)}
                for name, q in aqm_builders(spec).items()},
        "ftp_source": ftp_source_vars(spec, variant),
        "routes": node_routes(spec),
        "mtu_bytes": spec["links"]["mtu_bytes"],
    }


def iperf3_argv(item: dict, address: str, time_scale: float = 1.0) -> list[str]:
    """The iperf3 client's arguments for a traffic item of kind iperf3 (iperf3(1), 3.12 as in
    Debian 12): ``-c ADDRESS -p PORT -t DURATION -i INTERVAL -P N -O OMIT -J``, and
    ``-C CC`` (the flow's congestion control, TCP_CONGESTION) and ``--fq-rate R`` (its
    pacing rate, SO_MAX_PACING_RATE, bits/s with iperf3's M suffix) when the item gives them.
    Durations are multiplied by ``time_scale`` (the omitted start too; the interval is not).
    """
    out = ["-c", address, "-p", str(item["port"]), "-t", tc.num(round(item["duration_s"] * time_scale, 3)),
           "-i", tc.num(item["interval_s"]), "-P", str(item["parallel"]),
           "-O", tc.num(round(item["omit_s"] * time_scale, 3)), "-J"]
    if item.get("congestion"):
        out += ["-C", item["congestion"]]
    if item.get("fq_rate_mbit"):
        out += ["--fq-rate", tc.num(item["fq_rate_mbit"]) + "M"]
    return out


#: The size of each FTP source file, bytes (sparse, never read to its end: 4 GiB lasts 57 min
#: at 10 Mbit/s), when the experiment is a schema_version 2 file.
FTP_FILE_SIZE_BYTES = 4 << 30


def model_vars(spec: Spec) -> dict[str, Any]:
    """The provisioning playbooks' ``netrepro`` var for any experiment, from its model.

    Returns ``{"experiment", "nodes", "probes": {node: {label: tc argv}}, "routes",
    "mtu_bytes", "offloads": {feature: on|off}, "offload_networks": {node: [key]},
    "sysctls": {node: {...}} (the first trial's), "stacks": {node: [...]} (the first
    trial's, :func:`netrepro.model.stack_vars`), "ftp_source": {nodes, listen_address, files,
    file_size_bytes} | None}``. ``offload_networks`` lists each node's experiment interfaces
    by the key roles/interfaces maps to a device (the LAN for a LAN interface, else the
    interface's name). ``probes``: every distinct qdisc layer any trial puts on the node,
    with its parameters (label ``<kind>@<interface>``), and every TCP congestion control a
    trial asks of the node (label ``tcp_<name>``, argv ``["tcp_congestion", name]``,
    :func:`netrepro.model.congestion_controls`), for roles/kernel_capability.
    """
    m = spec.model
    offl = m.data["offloads"]
    probes: dict[str, dict[str, list[str]]] = {n: {} for n in m.nodes}
    for node, itf, kind, argv in layer_probes(m, tc.DEV):
        label, n = f"{kind}@{itf}", 1
        while label in probes[node] and probes[node][label] != argv:
            n += 1
            label = f"{kind}@{itf}#{n}"
        probes[node][label] = argv
    for node, ccs in congestion_controls(m).items():
        for cc in ccs:
            probes[node][f"tcp_{cc}"] = ["tcp_congestion", cc]
    ftp = model_ftp_source(m)
    first = trial_plan(m, m.trials[0])
    return {
        "experiment": spec.name,
        "nodes": list(m.nodes),
        "probes": probes,
        "routes": {n: [{"to": r["to"], "via": r["via"]} for r in nd["routes"]] for n, nd in m.nodes.items()},
        "mtu_bytes": m.data["mtu_bytes"],
        "offloads": {k: ("on" if v else "off") for k, v in offl.items()},
        "offload_networks": {n: [i["network"] or name for name, i in nd["interfaces"].items()]
                             for n, nd in m.nodes.items()},
        "sysctls": first["sysctls"],
        "stacks": first["stacks"],
        "ftp_source": {**ftp, "max_rate_bytes_per_s": first["ftp_sources"]} if ftp else None,
    }


def model_ftp_source(m) -> dict[str, Any] | None:
    """The FTP sources of a model's trials: ``{nodes, listen_address: {node: ip},
    files, file_size_bytes}`` (each sender listens on the address its first receiver
    connects to, :meth:`netrepro.model.Model.address_toward` from the receiver; as many files as the largest item has flows, :func:`ftp_file_names`), or None
    when no trial has an FTP item."""
    senders: dict[str, str] = {}
    flows = 1
    for t in m.trials:
        for it in t["traffic"]:
            if it["kind"] == "ftp":
                # the address its receiver's curl connects to (trial_plan's server_address)
                senders.setdefault(it["from"], m.address_toward(it["to"], it["from"]))
                flows = max(flows, it["flows"])
    if not senders:
        return None
    return {"nodes": list(senders), "listen_address": senders, "files": ftp_file_names(flows),
            "file_size_bytes": FTP_FILE_SIZE_BYTES}
