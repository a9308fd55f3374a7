"""The static site: machines the user already has, listed in a small YAML file.

This is the worked example of docs/adding-a-site.md. Nothing is reserved: ``reserve()``
reads the file (``options['static_file']``, ``STATIC_FILE=`` in make), checks that every
node accepts SSH and carries the topology's addresses, and saves the logins. ``release()``
only forgets them (the machines are the user's).

File format (validated by :data:`STATIC_SCHEMA`; errors name file, field and expectation)::

    # nodes.yml: one entry per node of the experiment's topology
    nodes:
      router:
        host: 192.0.2.10          # SSH host: DNS name, IPv4 or IPv6 (required)
        port: 22                  # SSH port (default 22)
        user: ubuntu              # login user; sudo is used when not root (default root)
        key: ~/.ssh/id_ed25519    # private key (default: SSH agent / ~/.ssh/config)
        proxy_jump: me@jump.example.org:22   # optional jump host (user@host:port)
        work_dir: /var/lib/netrepro          # where netrepro keeps its files there (default)
        addresses:                # network -> data-plane IPv4 address, as in the topology
          clients_lan: 10.10.1.254
          servers_lan: 10.10.2.254
      client1: {host: 192.0.2.11, user: ubuntu, addresses: {clients_lan: 10.10.1.1}}
      ...

A node's ``addresses`` are keyed as :meth:`netrepro.model.Model.data_plane` keys them: the
LAN's name for an interface on a LAN, else the model's interface name (``h1-eth0:
10.0.0.1``). A switch has no address: its ``ports`` name the device of
each of its interfaces where the machine's name differs (``ports: {s1-eth1: ens4}``;
unnamed ones are the model's names), and the provisioning bridges them (roles/switch_bridge).

``work_dir`` is the folder netrepro keeps its scripts, trial files and FTP root in on that
machine (default /var/lib/netrepro): an absolute path of letters, digits, ``_``, ``.`` and
``-``, no part starting with ``.``. Nodes that share one file system (containers or
namespaces of one host) each need their own.

The data-plane addresses must already be configured on the machines, each with the prefix
length of its network's subnet (``ip -j addr`` over SSH is compared with the topology).

Every field that reaches an ssh command line is checked strictly before anything runs:
``host`` a DNS name or an IP address, ``user`` a login name, ``proxy_jump`` the same two
plus a port, ``key`` an existing private key file; none may start with ``-`` (ssh would take
``-oProxyCommand=...`` as an option) or hold spaces or control characters. The argv built
here also ends its options with ``--`` before the destination.
"""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Callable

from netrepro.sites.base import Site, at_once, interfaces_text
from netrepro.sites.errors import SiteError
from netrepro.sites.login import NodeLogin, login_problem, private_key_problem, safe_path_problem
from netrepro.sites.options import Option, as_bool, boolean
from netrepro.sites import inventory
from netrepro.experiment.spec import Spec, SpecError
from netrepro.core.yamlfile import load_yaml_file

#: Nodes asked at once over SSH by reserve and wait_ready (:func:`netrepro.sites.base.at_once`). Each question is a
#: handshake with the node and, through a jump host, one with the jump host too. Seven at once
#: through the local site's micro-VM jump host (QEMU TCG) on a busy 2-core machine overran
#: :func:`ssh_argv`'s 10-s ConnectTimeout; four stays well below OpenSSH sshd's default
#: MaxStartups of 10 unauthenticated connections (sshd_config(5)).
MAX_PARALLEL_SSH = 4

STATIC_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "required": ["nodes"],
    "additionalProperties": False,
    "properties": {
        "nodes": {
            "type": "object",
            "minProperties": 1,
            "additionalProperties": {
                "type": "object",
                "required": ["host"],
                "additionalProperties": False,
                "properties": {
                    "host": {"type": "string", "minLength": 1},
                    "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                    "user": {"type": "string", "minLength": 1},
                    "key": {"type": "string", "minLength": 1},
                    "proxy_jump": {"type": "string", "pattern": r"^[^@\s]+@[^\s]+:[0-9]+$"},
                    "work_dir": {"type": "string", "pattern": r"^(/[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}){1,16}$"},
                    "addresses": {
                        "type": "object",
                        "additionalProperties": {"type": "string", "format": "ipv4"},
                    },
                    "ports": {
                        "type": "object",
                        "additionalProperties": {"type": "string", "pattern": r"^[A-Za-z0-9_][A-Za-z0-9_.@:-]{0,14}$"},
                    },
                },
            },
        },
    },
}

#: Run a command (argv list) with a timeout in seconds; returns (exit code, stdout, stderr).
Runner = Callable[[list[str], float], tuple[int, str, str]]


def _run(argv: list[str], timeout_s: float) -> tuple[int, str, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return 124, "", f"timed out after {timeout_s:.0f} s"
    return p.returncode, p.stdout, p.stderr


def _where(parts) -> str:
    out = ""
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else (f".{p}" if out else str(p))
    return out or "(top level)"


def load_static_file(spec: Spec, path: Path | str) -> dict[str, NodeLogin]:
    """Read and validate the static nodes file; return node name -> NodeLogin.

    Checks, in order: YAML syntax; the schema (types, required fields, IPv4 addresses,
    device names); every node listed and no unknown node; each node's addresses equal to
    the topology's (same keys, same addresses: :meth:`netrepro.model.Model.data_plane`);
    ``ports`` naming only the node's interfaces without an address. ``extra`` keeps
    ``addresses`` and ``ports``.

    Raises:
        SiteError: one line ``<file>: <field>: <problem; expected ...>``.
    """
    import jsonschema

    path = Path(path).expanduser()
    if not path.is_file():
        raise SiteError(f"{path}: (file): no such file; expected the static nodes YAML (STATIC_FILE=..., see docs/adding-a-site.md)")
    try:
        data = load_yaml_file(path, "static nodes YAML")
    except SpecError as exc:   # missing, binary junk, not YAML, a node defined twice
        hint = "" if "expected" in exc.problem else "; expected a mapping with 'nodes' (docs/adding-a-site.md)"
        raise SiteError(f"{exc}{hint}") from None
    validator = jsonschema.Draft202012Validator(STATIC_SCHEMA, format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(data), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))))
    if errors:
        err = jsonschema.exceptions.best_match(errors)
        if err.validator == "required":
            problem = f"missing required field ({err.message})"
        elif err.validator == "additionalProperties":
            allowed = ", ".join(sorted(err.schema.get("properties", {}))) or "node names"
            problem = f"unknown field ({err.message}); expected one of: {allowed}"
        elif err.validator == "format":
            problem = f"expected an IPv4 address, got {err.instance!r}"
        elif err.validator == "pattern" and "ports" in err.absolute_path:
            problem = f"expected a network device name (1-15 characters, not starting with '-'), got {err.instance!r}"
        elif err.validator == "pattern" and "work_dir" in err.absolute_path:
            problem = (f"expected an absolute path of letters, digits, '_', '.' and '-' (no part starting with '.'), "
                       f"got {err.instance!r}")
        elif err.validator == "pattern":
            problem = f"expected user@host:port, got {err.instance!r}"
        else:
            problem = f"expected {err.validator} {err.validator_value!r}, got {err.instance!r}"
        raise SiteError(f"{path}: {_where(err.absolute_path)}: {problem}")
    nodes = data["nodes"]
    missing = [n for n in spec.nodes if n not in nodes]
    if missing:
        raise SiteError(f"{path}: nodes: missing {', '.join(missing)}; expected every node of {spec.name}: {', '.join(spec.nodes)}")
    unknown = [n for n in nodes if n not in spec.nodes]
    if unknown:
        raise SiteError(f"{path}: nodes.{unknown[0]}: not a node of {spec.name}; expected one of: {', '.join(spec.nodes)}")
    out = {}
    for name in spec.nodes:
        entry = nodes[name]
        check_login_fields(path, f"nodes.{name}", entry)
        dp = spec.model.data_plane(name)
        want = {k: i["address"] for k, i in dp.items() if i["address"]}
        if entry.get("addresses", {}) != want:
            raise SiteError(f"{path}: nodes.{name}.addresses: {entry.get('addresses', {})}; expected the topology's {want}")
        unaddressed = [k for k, i in dp.items() if not i["address"]]
        ports = entry.get("ports", {})
        odd = [k for k in ports if k not in unaddressed]
        if odd:
            raise SiteError(f"{path}: nodes.{name}.ports.{odd[0]}: not a port of {name} without an address; expected one "
                            f"of: {', '.join(unaddressed) or '(none: this node has none)'}")
        out[name] = NodeLogin(name=name, host=entry["host"], port=entry.get("port", 22), user=entry.get("user", "root"),
                              key_file=str(Path(entry["key"]).expanduser()) if entry.get("key") else None,
                              proxy_jump=entry.get("proxy_jump"),
                              extra={"addresses": want, "ports": dict(ports),
                                     **({"node_dir": entry["work_dir"]} if entry.get("work_dir") else {})})
    return out


def check_login_fields(path: Path | str, where: str, entry: dict[str, Any]) -> None:
    """Check the fields of one node entry that reach ssh (``host``, ``port``, ``user``,
    ``proxy_jump``, ``key``) with the check every login gets when it is made and when it is
    read back from state.json (:func:`netrepro.sites.login.login_problem`); see the module
    docstring. The key file must exist and hold a private key.

    Raises:
        SiteError: ``<file>: nodes.<node>.<field>: <value>: expected ...`` (one line; the
            value is shown with its control characters escaped).
    """
    login = NodeLogin(name=where, host=entry.get("host"), port=entry.get("port", 22), user=entry.get("user", "root"),
                      key_file=entry.get("key"), proxy_jump=entry.get("proxy_jump"))
    bad = login_problem(login)
    if bad:
        field_name, value, problem = bad
        raise SiteError(f"{path}: {where}.{'key' if field_name == 'key_file' else field_name}: {value!r}: {problem}")
    if entry.get("key"):
        key = Path(entry["key"]).expanduser()
        if not key.is_file():
            raise SiteError(f"{path}: {where}.key: no such file {str(key)!r}; expected the node's SSH private key")
        problem = private_key_problem(key, "an SSH private key")
        if problem:
            raise SiteError(f"{path}: {where}.key: {problem}")


def machine(login: NodeLogin) -> tuple[str | None, str, int]:
    """Which machine ``login`` reaches, as far as the file says: (its jump host, its host, its
    port); the host lower-case without a DNS name's final dot, an IP address in its one
    written form (:mod:`ipaddress`), the jump host's likewise (its user aside). Two logins with the same
    machine reach the same sshd (a name and an address of one machine are not told apart)."""
    def norm(host: str) -> str:
        try:
            return str(ipaddress.ip_address(host))
        except ValueError:
            return host.lower().rstrip(".")
    jump = None
    if login.proxy_jump:
        user_host, _, port = login.proxy_jump.rpartition(":")
        host = user_host.partition("@")[2]
        jump = f"{norm(host)}:{int(port)}"
    return jump, norm(login.host), int(login.port)


def parse_ip_addr_json(text: str) -> list[tuple[str, str, int]]:
    """(interface name, IPv4 address, prefix length) triples from ``ip -j addr`` output.

    Raises SiteError when ``text`` is not that JSON (a list of links with ``addr_info``).
    """
    try:
        links = json.loads(text)
        out = []
        for link in links:
            for a in link.get("addr_info", []):
                if a.get("family") == "inet":
                    out.append((link["ifname"], a["local"], int(a["prefixlen"])))
        return out
    except (ValueError, TypeError, KeyError, AttributeError):
        raise SiteError("ip -j addr: unexpected output; expected iproute2's JSON list of links with addr_info") from None


def match_addresses(spec: Spec, node: str, found: list[tuple[str, str, int]],
                    ports: dict[str, str] | None = None, devices: list[str] | None = None) -> dict[str, str]:
    """Check that ``node`` carries each of its topology addresses with its prefix length,
    and has the device of each port without an address (``ports[key]``, else the model's
    interface name); return key -> interface name (an address's found from the address,
    never assumed). ``devices``: every device name on the node (default: those of ``found``).

    Raises SiteError naming the node, the interface and what was found instead.
    """
    out = {}
    names = set(devices if devices is not None else (ifn for ifn, _, _ in found))
    for key, itf in spec.model.data_plane(node).items():
        addr, plen = itf["address"], itf["prefixlen"]
        if not addr:
            dev = (ports or {}).get(key) or itf["interface"]
            if dev not in names:
                raise SiteError(f"node {node}: {key}: no device {dev}; expected the switch's port (name it in the "
                                f"static file's nodes.{node}.ports.{key}), found {', '.join(sorted(names)) or 'none'}")
            out[key] = dev
            continue
        hits = [(ifn, p) for ifn, a, p in found if a == addr]
        if not hits:
            have = ", ".join(f"{a}/{p} on {ifn}" for ifn, a, p in found if not ipaddress.ip_address(a).is_loopback) or "none"
            raise SiteError(f"node {node}: {key}: address {addr}/{plen} not configured; expected it on one interface, found {have}")
        ifn, p = hits[0]
        if p != plen:
            subnet = ipaddress.ip_interface(f"{addr}/{plen}").network
            raise SiteError(f"node {node}: {key}: {addr} has prefix /{p} on {ifn}; expected /{plen} ({subnet})")
        others = [i for i, a, _ in found if a == addr and i != ifn]
        if others:
            raise SiteError(f"node {node}: {key}: {addr} is on several interfaces ({ifn}, {', '.join(others)}); expected one")
        out[key] = ifn
    return out


def ssh_argv(login: NodeLogin, command: str, connect_timeout_s: int = 10,
             known_hosts: str | None = None) -> list[str]:
    """OpenSSH argv running ``command`` on ``login``'s node, non-interactively.

    The jump host (if any) is reached with the same key, through the ProxyCommand that the
    inventory uses too (ssh's own -J would not pass the key on). ``known_hosts``: a file
    instead of the user's ~/.ssh/known_hosts. The destination follows ``--``.
    """
    import shlex


    argv = ["ssh", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={connect_timeout_s}", "-p", str(login.port)]
    if not known_hosts:
        argv += ["-o", "StrictHostKeyChecking=accept-new"]
    if login.key_file:
        argv += ["-i", login.key_file, "-o", "IdentitiesOnly=yes"]
    argv += shlex.split(inventory.ssh_common_args(login, known_hosts))
    # '--' ends ssh's options: the destination is never read as one (ssh(1), getopt(3)).
    return argv + ["--", f"{login.user}@{login.host}", command]


#: What a static node lacking a qdisc is told (roles/kernel_capability's failure message).
STATIC_UPGRADE_HINT = ("Install a kernel that has them, or let netrepro install one and reboot this machine: "
                       "kernel_upgrade=true (KERNEL_UPGRADE=true).")


class StaticSite(Site):
    """Existing machines from a YAML file (option ``static_file``). See the module docstring.

    Options: ``static_file`` (required), ``known_hosts`` (a known_hosts file to use instead
    of ~/.ssh/known_hosts), ``install_packages`` (false: roles/packages only checks that the
    programs are there, for machines without a package mirror), ``kernel_upgrade`` (true:
    a machine lacking a qdisc may get kernel packages and a reboot; default false). Hook: ``runner`` (a
    :data:`Runner`, tests).
    """

    name = "static"
    PARALLEL = True  # one nodes file per reservation (_file)
    #: Site's only: the logins in state.json, and the runner's ssh/, ansible/ and facts/.
    STATE_ENTRIES = Site.STATE_ENTRIES
    OPTIONS = {
        "static_file": Option("the nodes YAML file, STATIC_FILE; with --parallel N, N files separated by commas, "
                              "one per reservation"),
        "known_hosts": Option("a known_hosts file to use instead of ~/.ssh/known_hosts", safe_path_problem),
        "install_packages": Option("install the experiment's packages with apt, INSTALL_PACKAGES (default true; "
                                   "false: machines without a package mirror, only checked)", boolean),
        "kernel_upgrade": Option("let netrepro install kernel packages and REBOOT a machine that lacks a qdisc, "
                                 "KERNEL_UPGRADE (default false: provisioning fails naming the node and the qdisc)",
                                 boolean),
    }
    HOOKS = ("runner",)

    def _file(self) -> Path:
        """The nodes file of this copy: ``static_file`` names one per reservation of a campaign
        on several (``--parallel N``), separated by commas; copy k reads the k-th. Raises
        SiteError when none is given, or fewer than this copy's number."""
        f = self.options.get("static_file")
        if not f:
            raise SiteError("site static: no nodes file; expected STATIC_FILE=<nodes.yml> (format in docs/adding-a-site.md)")
        files = [x for x in str(f).split(",") if x]
        if len(files) < self.copy:
            raise SiteError(f"site static: STATIC_FILE={f}: names {len(files)} nodes file(s), and reservation #{self.copy} "
                            "of --parallel needs its own; expected one file per reservation, separated by commas")
        return Path(files[self.copy - 1])

    def _runner(self) -> Runner:
        return self.options.get("runner") or _run

    def plan(self) -> str:
        lines = [f"# site static: existing machines from {self._file() if self.options.get('static_file') else 'STATIC_FILE (not set)'}",
                 "# each must accept SSH and carry these addresses (checked by reserve):"]
        for node in self.spec.nodes:
            addrs = interfaces_text(self.spec, node)
            lines.append(f"  {node:8s} {addrs}")
        return "\n".join(lines) + "\n"

    def unreachable(self, login: NodeLogin, timeout_s: float = 20) -> str | None:
        """None when ``ssh -o BatchMode=yes ... true`` succeeds on the node, else why not."""
        rc, _, err = self._runner()(ssh_argv(login, "true", known_hosts=self.options.get("known_hosts")), timeout_s)
        if rc == 0:
            return None
        return (f"node {login.name}: ssh {login.user}@{login.host} -p {login.port} failed "
                f"({(err.strip().splitlines() or ['exit ' + str(rc)])[-1]})")

    def check_node(self, login: NodeLogin, timeout_s: float = 20) -> dict[str, str]:
        """Read ``ip -j addr`` on the node over SSH and match the topology (addresses, and
        the devices of its ports without one, ``login.extra['ports']``). Returns key ->
        interface name. Raises SiteError naming the node and the cause."""
        run = self._runner()
        rc, out, err = run(ssh_argv(login, "ip -j addr", known_hosts=self.options.get("known_hosts")), timeout_s)
        if rc != 0:
            raise SiteError(f"node {login.name}: `ip -j addr` failed ({err.strip() or rc}); expected iproute2 on the node")
        found = parse_ip_addr_json(out)
        devices = [link["ifname"] for link in json.loads(out)]   # parsed once already: valid
        return match_addresses(self.spec, login.name, found, login.extra.get("ports"), devices)

    def _own_logins(self) -> dict[str, NodeLogin]:
        """The logins of this copy's nodes file (:func:`load_static_file`), whose machines
        (:func:`machine`) no earlier copy's file names: a reservation's machines are held by
        one copy only, else two trials would run at once on one machine and measure each other.

        Raises:
            SiteError: one line naming the files and the node (as :func:`load_static_file`
                does for the file itself): this copy's file is an earlier copy's (the same
                path twice in ``static_file``), or names a machine an earlier one names.
        """
        path = self._file()
        logins = load_static_file(self.spec, path)
        given = str(self.options.get("static_file"))
        mine = {machine(lg): n for n, lg in logins.items()}
        for k, other in enumerate([x for x in given.split(",") if x][:self.copy - 1], 1):
            other_path = Path(other).expanduser()
            try:
                same = os.path.samefile(other_path, path.expanduser())
            except OSError:
                same = other_path.resolve() == path.expanduser().resolve()
            if same:
                raise SiteError(f"site static: STATIC_FILE={given}: {path} is the nodes file of reservations #{k} and "
                                f"#{self.copy}; expected one nodes file per reservation of --parallel, each naming "
                                "machines of its own")
            for n, lg in load_static_file(self.spec, other_path).items():
                if machine(lg) in mine:
                    node = mine[machine(lg)]
                    raise SiteError(f"{path}: nodes.{node}.host: {logins[node].host!r} port {logins[node].port} is "
                                    f"also nodes.{n} of {other} (reservation #{k})"
                                    + (f" behind {lg.proxy_jump}" if lg.proxy_jump else "")
                                    + "; expected machines of its own for each reservation of --parallel (one "
                                    "machine in two would run two trials at once)")
        return logins

    def preflight(self) -> None:
        """Validate the nodes file without contacting any node, and that no earlier copy's
        file names its machines (:meth:`_own_logins`)."""
        self._own_logins()

    def reserve(self) -> None:
        """Validate the file (:meth:`_own_logins`), check that every node answers SSH (all
        reported at once), then that each carries its addresses; save the logins (with the
        interface names found). The nodes are asked at once (one SSH connection each, at most
        :data:`MAX_PARALLEL_SSH` at a time); a node that fails is named as the file orders them."""
        logins = self._own_logins()
        down = [why for why in at_once(self.unreachable, logins.values(), MAX_PARALLEL_SSH) if why]
        if down:
            raise SiteError("; ".join(down) + "; expected SSH logins without a password (BatchMode=yes)")
        for lg, interfaces in zip(logins.values(), at_once(self.check_node, logins.values(), MAX_PARALLEL_SSH)):
            lg.extra["interfaces"] = interfaces
        self.save_logins(logins, static_file=str(self._file()))

    def wait_ready(self, timeout_s: float = 1800, interval_s: float = 5) -> None:
        """Wait until every saved node answers SSH (``true``), up to ``timeout_s`` seconds;
        the nodes still waited for are asked at once every ``interval_s`` seconds."""
        logins = self.logins()
        deadline = time.monotonic() + timeout_s
        pending = dict(logins)
        while pending:
            for name, why in zip(list(pending), at_once(self.unreachable, pending.values(), MAX_PARALLEL_SSH)):
                if why is None:
                    del pending[name]
            if not pending:
                break
            if time.monotonic() + interval_s > deadline:
                raise SiteError(f"site static: no SSH after {timeout_s:.0f} s to {', '.join(pending)}")
            print(f"static: waiting for {', '.join(pending)}", file=sys.stderr)
            time.sleep(interval_s)

    def inventory_vars(self) -> dict[str, Any]:
        """``packages_install: false`` when option ``install_packages`` says so;
        ``kernel_capability_upgrade`` true only when option ``kernel_upgrade`` says so (the
        machines are the user's own: roles/kernel_capability may install a kernel and reboot
        them only when asked), with the hint naming that option."""
        out: dict[str, Any] = {"kernel_capability_upgrade": as_bool(self.options.get("kernel_upgrade") or False),
                               "kernel_capability_upgrade_hint": STATIC_UPGRADE_HINT}
        value = self.options.get("install_packages")
        if value not in (None, ""):
            out["packages_install"] = as_bool(value)   # checked: boolean
        return out

    def release(self) -> None:
        """Forget the logins (the machines stay as they are). Idempotent."""
        self.state_file.unlink(missing_ok=True)
