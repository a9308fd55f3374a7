"""The playbooks' input, computed from the experiment's model (:mod:`netrepro.model`).

:func:`model_vars` returns one JSON-serialisable dict that the controller passes to
``playbooks/provision.yml`` and ``playbooks/trial.yml`` as the single extra var ``netrepro``
(``ansible-playbook -e @vars.json`` with ``{"netrepro": model_vars(spec)}``); the trial
playbook's own var ``trial`` is :func:`netrepro.runner.trialvars.trial_vars`. The playbooks map
their parts onto role variables; the roles never read the experiment themselves.

Per-node parts are keyed by node name (= inventory host name). tc commands are argv lists
without the leading ``tc`` and carry :data:`netrepro.core.tc.DEV` (``"@dev@"``) where the
device goes: the device is found on the node from its address or MAC (roles/interfaces),
and the roles substitute it.
"""

from __future__ import annotations

from typing import Any

from netrepro.core import tc
from netrepro.model import TrafficItem, congestion_controls, layer_probes, trial_timeline
from netrepro.experiment.spec import Spec


def ftp_file_names(count: int) -> list[str]:
    """The FTP sources' file names: ``file01`` .. ``fileNN``, zero-padded to the width of
    ``count`` (at least two digits)."""
    width = max(2, len(str(count)))
    return [f"file{i:0{width}d}" for i in range(1, count + 1)]


def iperf3_argv(item: TrafficItem, address: str, time_scale: float = 1.0) -> list[str]:
    """The iperf3 client's arguments for a traffic item of kind iperf3 (iperf3(1), 3.12 as in
    Debian 12): ``-c ADDRESS -p PORT -t DURATION -i INTERVAL -P N -O OMIT -J``, and
    ``-C CC`` (the flow's congestion control, TCP_CONGESTION) and ``--fq-rate R`` (its
    pacing rate, SO_MAX_PACING_RATE, bits/s with iperf3's M suffix) when the item gives them.
    Durations are multiplied by ``time_scale`` (the omitted start too; the interval is not).
    """
    out = ["-c", address, "-p", str(item.port), "-t", tc.num(round(item.duration_s * time_scale, 3)),
           "-i", tc.num(item.interval_s), "-P", str(item.parallel),
           "-O", tc.num(round(item.omit_s * time_scale, 3)), "-J"]
    if item.congestion:
        out += ["-C", item.congestion]
    if item.pacing_rate_mbit:
        out += ["--fq-rate", tc.num(item.pacing_rate_mbit) + "M"]
    return out


#: The size of each FTP source file, bytes (sparse, never read to its end: 4 GiB lasts 57 min
#: at 10 Mbit/s).
FTP_FILE_SIZE_BYTES = 4 << 30


def model_vars(spec: Spec) -> dict[str, Any]:
    """The playbooks' ``netrepro`` var, from the experiment's model.

    Returns ``{"experiment", "nodes", "probes": {node: {label: tc argv}}, "routes",
    "mtu_bytes", "offloads": {feature: on|off}, "offload_networks": {node: [key]},
    "sysctls": {node: {...}} (the first trial's), "stacks": {node: [...]} (the first
    trial's, :func:`netrepro.model.stack_vars`), "ftp_source": {nodes, listen_address, files,
    file_size_bytes, max_rate_bytes_per_s: {node: B/s} (the first trial's)} | None}``. ``offload_networks`` lists each node's experiment interfaces
    by the key roles/interfaces maps to a device (the LAN for a LAN interface, else the
    interface's name). ``probes``: every distinct qdisc layer any trial puts on the node,
    with its parameters (label ``<kind>@<interface>``), and every TCP congestion control a
    trial asks of the node (label ``tcp_<name>``, argv ``["tcp_congestion", name]``,
    :func:`netrepro.model.congestion_controls`), for roles/kernel_capability.
    """
    m = spec.model
    offl = m.offloads
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
    first = trial_timeline(m, m.trials[0])
    return {
        "experiment": spec.name,
        "nodes": list(m.nodes),
        "probes": probes,
        "routes": {n: [{"to": r.to, "via": r.via} for r in nd.routes] for n, nd in m.nodes.items()},
        "mtu_bytes": m.mtu_bytes,
        "offloads": {k: ("on" if v else "off") for k, v in offl.items()},
        "offload_networks": {n: [i.network or name for name, i in nd.interfaces.items()]
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
        for it in t.traffic:
            if it.kind == "ftp":
                # the address its receiver's curl connects to (trial_timeline's server_address)
                senders.setdefault(it.src, m.address_toward(it.dst, it.src))
                flows = max(flows, it.flows)
    if not senders:
        return None
    return {"nodes": list(senders), "listen_address": senders, "files": ftp_file_names(flows),
            "file_size_bytes": FTP_FILE_SIZE_BYTES}
