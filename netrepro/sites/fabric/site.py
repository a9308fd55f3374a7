"""The fabric site: a FABRIC slice built with fablib (fabrictestbed-extensions 2.x).

The slice mirrors the topology (:func:`build_slice`): one VM per node at one FABRIC site
(a switch too), one ``NIC_Basic`` per interface of a host or router in fablib's ``config``
mode with its address (fablib writes it on the VM after boot, so the provisioning roles
find the interface by address as on every other site), a switch's ports on dedicated NICs
(found by the MAC the slice reports), one ``L2Bridge`` network per LAN and per cable. Nodes are reached
through the FABRIC bastion: ``proxy_jump = <bastion user>@<bastion host>:22``, with the
bastion key in ``NodeLogin.extra['proxy_key_file']`` and the slice key as ``key_file``.
Management addresses are often IPv6; NodeLogin.host holds them bare (no brackets).

Configuration comes from fablib's ``fabric_rc`` (``$FABRIC_RC`` or
~/work/fabric_config/fabric_rc; ``export NAME=value`` lines) and the environment:
FABRIC_PROJECT_ID, FABRIC_TOKEN_LOCATION, FABRIC_BASTION_USERNAME, FABRIC_BASTION_KEY_LOCATION,
FABRIC_BASTION_HOST (default bastion.fabric-testbed.net), FABRIC_SLICE_PRIVATE_KEY_FILE,
FABRIC_SLICE_PUBLIC_KEY_FILE. fablib is imported only inside the functions that need it.
:func:`load_fabric_config` checks, before fablib is used, that every setting is present and
every file it names holds what it should (the token JSON, PEM/OpenSSH keys, an OpenSSH
public key line), so junk fails at once with one line naming the file.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import io
import ipaddress
import logging
import os
import shlex
import sys
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from netrepro.sites.base import Site, lease_kept_line
from netrepro.sites.errors import SiteError
from netrepro.sites.login import (NodeLogin, login_user_problem, private_key_problem, public_key_problem,
                                  read_json_object, read_small_text, ssh_host_problem)
from netrepro.sites.options import Option, as_bool, boolean, matches, number_in, positive_int_option
from netrepro.experiment.spec import Spec

DEFAULT_RC = "~/work/fabric_config/fabric_rc"
#: The initial lease, hours (option ``hours``): fablib's own default (Slice.submit, 24 h).
DEFAULT_HOURS = 24
#: The longest lease FABRIC grants, hours (the option ``hours``' bound): two weeks, the
#: orchestrator's Constants.DEFAULT_MAX_DURATION (fabric-testbed/ControlFramework,
#: fabric_cf/actor/core/common/constants.py); only a project with FABRIC's long-lived slice
#: permission may hold one longer (extend it in the portal).
MAX_HOURS = 14 * 24
#: How long the slice may take to become ready (StableOK), s (option ``ready_timeout_s``);
#: then it is deleted. fablib's own default (Slice.submit's wait_timeout).
READY_TIMEOUT_S = 1800
#: The longest ``ready_timeout_s``, s: a day, 48 times the default; a conservative bound (a
#: slice not ready in a day is failing, and its lease runs meanwhile).
MAX_READY_TIMEOUT_S = 86400
#: The largest VM size FABRIC offers (option bounds of ``cores``, ``ram_gb``, ``disk_gb``): the
#: largest instance of fabric-fim 2.0.0's catalog fim/slivers/data/instance_sizes.json, to which
#: the orchestrator maps a request (64 cores, 256 GB RAM, 1000 GB disk).
MAX_CORES, MAX_RAM_GB, MAX_DISK_GB = 64, 256, 1000
#: fablib's time format for lease ends (fabrictestbed OrchestratorClient.TIME_FORMAT).
LEASE_FORMAT = "%Y-%m-%d %H:%M:%S %z"
#: The state folder's description of the ready slice (:func:`describe_slice`).
SLICE_FILE = "slice.txt"
DEFAULT_BASTION_HOST = "bastion.fabric-testbed.net"
#: What each setting is for; checked by :func:`load_fabric_config` before any network use.
REQUIRED = {
    "FABRIC_PROJECT_ID": "your project's ID (FABRIC portal, Projects)",
    "FABRIC_TOKEN_LOCATION": "the token JSON file (FABRIC portal, Experiments > Manage Tokens)",
    "FABRIC_BASTION_USERNAME": "your bastion login (FABRIC portal, User Profile > My SSH Keys)",
    "FABRIC_BASTION_KEY_LOCATION": "your bastion private key file (expires after six months)",
    "FABRIC_SLICE_PRIVATE_KEY_FILE": "the slice SSH private key file",
    "FABRIC_SLICE_PUBLIC_KEY_FILE": "the slice SSH public key file",
}
FILES = ("FABRIC_TOKEN_LOCATION", "FABRIC_BASTION_KEY_LOCATION", "FABRIC_SLICE_PRIVATE_KEY_FILE", "FABRIC_SLICE_PUBLIC_KEY_FILE")


@dataclass(frozen=True)
class FabricOptions:
    """Slice shape. ``site``: FABRIC site name (``UTAH``, ``STAR``...; None = random site
    with capacity at submit); ``cores`` (vCPUs), ``ram_gb``, ``disk_gb``, ``image``
    (fablib image name); ``slice_name``; ``switch_nic``: the NIC model of a switch's ports
    (see :func:`build_slice`)."""

    site: str | None = None
    cores: int = 2
    ram_gb: int = 8
    disk_gb: int = 10
    image: str = "default_ubuntu_22"
    slice_name: str = "netrepro"
    switch_nic: str = "NIC_ConnectX_5"

    @classmethod
    def from_options(cls, spec: Spec, options: dict[str, Any] | None) -> "FabricOptions":
        """From site options ``fabric_site``, ``cores``, ``ram_gb``, ``disk_gb``, ``image``,
        ``slice_name``. Raises SiteError naming a malformed option."""
        o = dict(options or {})
        kw: dict[str, Any] = {"slice_name": o.get("slice_name") or f"netrepro-{spec.name}"}
        if o.get("fabric_site"):
            kw["site"] = str(o["fabric_site"]).upper()
        if o.get("image"):
            kw["image"] = str(o["image"])
        if o.get("switch_nic"):
            kw["switch_nic"] = str(o["switch_nic"])
        for key in ("cores", "ram_gb", "disk_gb"):
            val = positive_int_option(o, key)
            if val is not None:
                kw[key] = val
        return cls(**kw)


def nic_name(key: str) -> str:
    """The NIC component's name for an interface of a host or router (fablib interface
    ``<node>-<nic>-p1``): ``nic_<key>``, the key of :meth:`netrepro.model.Model.data_plane`
    (the LAN's name, else the interface's)."""
    return f"nic_{key}"


#: NIC models with one port (each of a switch's ports is then its own NIC); others have two.
ONE_PORT_NICS = ("NIC_Basic",)


def build_slice(fablib_manager, spec: Spec, opts: FabricOptions):
    """Add the topology to a new fablib slice and return it (no submit, no network).

    ``fablib_manager``: a FablibManager (``offline=True`` works: nothing is contacted).
    Read from the experiment's model: one VM per node, one ``L2Bridge`` per L2 segment
    (:meth:`netrepro.model.Model.segments`: each LAN with its subnet, each cable ``link-N``). A
    host's or router's interface is a ``NIC_Basic`` in mode ``config`` with its address. A
    switch's ports (no address) are the ports of ``opts.switch_nic`` NICs (default
    ``NIC_ConnectX_5``, two ports each, named ``ports<k>``): a shared ``NIC_Basic`` is an SR-IOV
    virtual function, and a virtual function normally drops frames whose source MAC is not its
    own (spoof checking), which a bridge must send; the provisioning bridges them
    (roles/switch_bridge). Raises SiteError when ``opts.site`` is None with an offline manager
    (fablib would query the service for a random site).
    """
    if opts.site is None and getattr(fablib_manager, "offline", False):
        raise SiteError("FABRIC_SITE: expected a site name to build the slice offline (e.g. UTAH)")
    m = spec.model
    planes = {n: m.data_plane(n) for n in m.nodes}
    slc = fablib_manager.new_slice(name=opts.slice_name)
    ifaces: dict[tuple[str, str], Any] = {}
    for node_name, nd in m.nodes.items():
        node = slc.add_node(name=node_name, site=opts.site, cores=opts.cores, ram=opts.ram_gb,
                            disk=opts.disk_gb, image=opts.image)
        free: list = []
        cards = 0
        for key, itf in planes[node_name].items():
            if itf["address"] or not nd.is_switch:
                ifaces[(node_name, key)] = node.add_component(model="NIC_Basic", name=nic_name(key)).get_interfaces()[0]
                continue
            if not free:
                free = list(node.add_component(model=opts.switch_nic, name=f"ports{cards}").get_interfaces())
                cards += 1
                if opts.switch_nic in ONE_PORT_NICS:
                    free = free[:1]
            ifaces[(node_name, key)] = free.pop(0)
    for seg in m.segments():
        members = [ifaces[member] for member in seg["members"]]
        extra = {"subnet": ipaddress.IPv4Network(seg["subnet"])} if seg["subnet"] else {}
        slc.add_l2network(name=seg["name"], interfaces=members, type="L2Bridge", **extra)
        for node_name, key in seg["members"]:
            address = planes[node_name][key]["address"]
            if address:
                ifaces[(node_name, key)].set_mode("config")
                ifaces[(node_name, key)].set_ip_addr(ipaddress.IPv4Address(address))
    return slc


def segment_keys(spec: Spec) -> dict[tuple[str, str], str]:
    """(node, segment name) -> the node's interface key on it
    (:meth:`netrepro.model.Model.segments`): how a slice's interface, known by its node and
    its network, is matched back to the experiment."""
    return {(n, seg["name"]): key for seg in spec.model.segments() for n, key in seg["members"]}


def describe_slice(slc) -> str:
    """A text description of a (built or submitted) fablib slice: nodes with site, cores,
    RAM, disk, image, and each NIC's interface, network and address; then the networks.
    Components, interfaces and networks are listed sorted by name: fablib (2.0.9) returns
    them in no fixed order, and the same plan must print the same text."""
    lines = [f"slice {slc.get_name()}"]
    for node in slc.get_nodes():
        lines.append(f"  node {node.get_name()}: site {node.get_site()}, {node.get_requested_cores()} cores, "
                     f"{node.get_requested_ram()} GB RAM, {node.get_requested_disk()} GB disk, image {node.get_image()}")
        for comp in sorted(node.get_components(), key=lambda c: c.get_name()):
            for iface in sorted(comp.get_interfaces(), key=lambda i: i.get_name()):
                net = iface.get_network()
                lines.append(f"    {comp.get_model()} {comp.get_name()}: {iface.get_name()} -> "
                             f"{net.get_name() if net else '-'} {iface.get_ip_addr()} (mode {iface.get_mode()})")
    for net in sorted(slc.get_networks(), key=lambda n: n.get_name()):
        members = ", ".join(sorted(i.get_name() for i in net.get_interfaces()))
        lines.append(f"  network {net.get_name()}: {net.get_type()} {net.get_subnet()} [{members}]")
    return "\n".join(lines)


def offline_manager(project_id: str = "00000000-0000-0000-0000-000000000000",
                    bastion_username: str = "planning_only", workdir: str | None = None):
    """A FablibManager that contacts nothing (plans and tests). Logs go to ``workdir``."""
    from fabrictestbed_extensions.fablib.fablib import FablibManager

    workdir = workdir or tempfile.mkdtemp(prefix="netrepro-fablib-")
    return FablibManager(offline=True, project_id=project_id, bastion_username=bastion_username,
                         validate_config=False, log_file=os.path.join(workdir, "fablib.log"),
                         data_dir=workdir, fabric_rc=os.path.join(workdir, "fabric_rc"))


def read_rc(path: Path | str) -> dict[str, str]:
    """``NAME=value`` pairs from a fabric_rc file (``export`` optional, quotes removed,
    ``#`` comments and blank lines skipped).

    Raises:
        SiteError: the file unreadable or binary (:func:`read_small_text`), or a malformed
            line: one line naming the file and the line's number, never its text (a fabric_rc
            given by mistake may be a credential file: a password hash, a private key).
    """
    out: dict[str, str] = {}
    path = Path(path).expanduser()
    text = read_small_text(path, "fablib's fabric_rc (export NAME=value lines)")
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export "):].strip()
        name, eq, value = line.partition("=")
        if not eq or not name.strip().isidentifier():
            raise SiteError(f"{path}: line {n}: expected `export NAME=value` (fablib's fabric_rc); the line is not shown")
        try:
            parts = shlex.split(value)
        except ValueError:
            parts = [value]
        out[name.strip()] = os.path.expandvars(parts[0] if parts else "")
    return out


def load_fabric_config(env: dict[str, str] | None = None, rc_path: str | None = None) -> dict[str, str]:
    """The FABRIC settings: the fabric_rc file's values overridden by the environment.

    Raises:
        SiteError: one line naming every missing setting or file and where to set it.
    """
    env = dict(os.environ if env is None else env)
    rc = Path(rc_path or env.get("FABRIC_RC") or DEFAULT_RC).expanduser()
    conf = read_rc(rc) if rc.is_file() else {}
    conf.update({k: v for k, v in env.items() if k.startswith("FABRIC_") and v})
    conf.setdefault("FABRIC_BASTION_HOST", DEFAULT_BASTION_HOST)
    missing = []
    for key, what in REQUIRED.items():
        if not conf.get(key):
            missing.append(f"{key} ({what})")
        elif key in FILES and not Path(conf[key]).expanduser().is_file():
            missing.append(f"{key}={conf[key]} (file not found)")
    if missing:
        raise SiteError(f"site fabric: missing {'; '.join(missing)}: set them in {rc} (fablib's fabric_rc, "
                        "see docs/sites/fabric.md) or in the environment")
    check_fabric_files(conf, rc)
    conf["FABRIC_RC"] = str(rc)
    return conf


def check_fabric_files(conf: dict[str, str], rc: Path) -> None:
    """Check what the settings name: the token file is fablib's token JSON (an object with
    ``id_token`` or ``refresh_token``), the two private keys are PEM/OpenSSH private keys,
    the public key is one OpenSSH public key line, the bastion login and host are fit for ssh.

    Raises:
        SiteError: one line naming the file (or the setting and ``rc``) and what was expected.
    """
    token = conf["FABRIC_TOKEN_LOCATION"]
    what = "the FABRIC token JSON, an object with id_token or refresh_token (portal: Experiments > Manage Tokens), FABRIC_TOKEN_LOCATION"
    data = read_json_object(token, what)
    if not ({"id_token", "refresh_token"} & set(data)):
        raise SiteError(f"{Path(token).expanduser()}: (top level): no id_token or refresh_token; expected {what}")
    for key in ("FABRIC_BASTION_KEY_LOCATION", "FABRIC_SLICE_PRIVATE_KEY_FILE"):
        problem = private_key_problem(conf[key], f"an SSH private key ({key})")
        if problem:
            raise SiteError(problem)
    problem = public_key_problem(conf["FABRIC_SLICE_PUBLIC_KEY_FILE"], "an SSH public key (FABRIC_SLICE_PUBLIC_KEY_FILE)")
    if problem:
        raise SiteError(problem)
    for key, check in (("FABRIC_BASTION_USERNAME", login_user_problem), ("FABRIC_BASTION_HOST", ssh_host_problem)):
        problem = check(conf[key])
        if problem:
            raise SiteError(f"{rc}: {key}={conf[key]!r}: {problem}")


def login_for(node_name: str, host: str, user: str, conf: dict[str, str], extra: dict[str, Any] | None = None) -> NodeLogin:
    """NodeLogin reaching a FABRIC VM at management address ``host`` through the bastion."""
    ip = host.strip("[]")
    return NodeLogin(name=node_name, host=ip, port=22, user=user,
                     key_file=str(Path(conf["FABRIC_SLICE_PRIVATE_KEY_FILE"]).expanduser()),
                     proxy_jump=f"{conf['FABRIC_BASTION_USERNAME']}@{conf['FABRIC_BASTION_HOST']}:22",
                     extra={"proxy_key_file": str(Path(conf["FABRIC_BASTION_KEY_LOCATION"]).expanduser()),
                            "management_ip_version": ipaddress.ip_address(ip).version, **(extra or {})})


def _lease_time(value: Any, slice_name: str) -> dt.datetime:
    """A lease end as the orchestrator writes it (:data:`LEASE_FORMAT`, with its UTC offset),
    as an aware datetime. Raises SiteError (one line naming the slice) for anything else."""
    try:
        return dt.datetime.strptime(str(value), LEASE_FORMAT)
    except ValueError:
        raise SiteError(f"FABRIC answered lease_end_time {str(value)[:60]!r} for slice {slice_name}; expected a time "
                        "such as '2026-12-01 18:00:00 +0000'; nothing changed") from None


def fabric_problem(exc: BaseException, conf: dict[str, str]) -> str:
    """One line saying why fablib could not use FABRIC's services, from the exception its
    first authenticated call raised (fablib and fabrictestbed raise bare Exceptions and
    FabricManagerException with the service's answer in the text): the server's certificate
    not trusted, the token refused, a service not reached, or else the exception's last line."""
    text = " ".join(str(exc).split())
    hosts = {conf.get(k) for k in ("FABRIC_CREDMGR_HOST", "FABRIC_ORCHESTRATOR_HOST", "FABRIC_CORE_API_HOST")} - {None}
    where = ", ".join(f"https://{h}" for h in sorted(hosts)) or "FABRIC's services"
    if "CERTIFICATE_VERIFY_FAILED" in text or "SSLError" in text:
        bundle = os.environ.get("REQUESTS_CA_BUNDLE")
        trust = f"the CA bundle REQUESTS_CA_BUNDLE={bundle}" if bundle else "this machine's CA bundle (certifi)"
        return (f"site fabric: {where}: TLS: certificate not trusted by {trust}; check the FABRIC_*_HOST settings "
                f"in {conf.get('FABRIC_RC')} and REQUESTS_CA_BUNDLE")
    if any(w in text for w in ("401", "Unauthorized", "token expired", "Refresh token", "refresh token")):
        return (f"site fabric: FABRIC refused the token in {conf.get('FABRIC_TOKEN_LOCATION')} ({text[:160]}); create a new "
                "FABRIC token in the portal (Experiments > Manage Tokens) and save it there (FABRIC_TOKEN_LOCATION)")
    if any(w in text for w in ("Connection refused", "ConnectionError", "Max retries", "not reachable", "Name or service")):
        return f"site fabric: cannot reach {where} ({text[:160]}); check the network and the FABRIC_*_HOST settings"
    return f"site fabric: FABRIC's services refused: {text[-300:]}"


class FabricSite(Site):
    """One VM per node at one FABRIC site (option ``fabric_site``), reached through the bastion."""

    name = "fabric"
    PARALLEL = True  # one slice per reservation (_opts)
    #: Besides Site's: fablib's log (a rotating log: fablib keeps older ones as fablib.log.1 ...)
    #: and the ready slice's description (wait_ready).
    STATE_ENTRIES = Site.STATE_ENTRIES + ("fablib.log", "fablib.log.[0-9]*", SLICE_FILE)
    OPTIONS = {
        "fabric_site": Option("FABRIC site name such as UTAH, FABRIC_SITE",
                              matches(r"[A-Za-z][A-Za-z0-9-]{1,15}", "a FABRIC site name such as UTAH")),
        "cores": Option("vCPUs per VM, CORES, default 2",
                        number_in(1, MAX_CORES, "a whole number of vCPUs", "FABRIC's largest VM", whole=True)),
        "ram_gb": Option("GB of memory per VM, RAM_GB, default 8",
                         number_in(1, MAX_RAM_GB, "a whole number of GB", "FABRIC's largest VM", whole=True)),
        "disk_gb": Option("GB of disk per VM, DISK_GB, default 10",
                          number_in(1, MAX_DISK_GB, "a whole number of GB", "FABRIC's largest VM", whole=True)),
        "image": Option("fablib image name, IMAGE, default default_ubuntu_22",
                        matches(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", "a fablib image name such as default_ubuntu_22")),
        "slice_name": Option("slice name, SLICE_NAME, default netrepro-<experiment>",
                             matches(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}", "letters, digits, '_', '.', '-' (at most 64)")),
        "fabric_rc": Option("fablib's fabric_rc file, default ~/work/fabric_config/fabric_rc"),
        "switch_nic": Option("NIC model of a switch's ports, SWITCH_NIC, default NIC_ConnectX_5",
                             matches(r"NIC_[A-Za-z0-9_]{1,32}", "a fablib NIC model such as NIC_ConnectX_5")),
        "hours": Option(f"initial lease in hours, HOURS, default {DEFAULT_HOURS}, "
                        f"at most {MAX_HOURS}",
                        number_in(0, MAX_HOURS, "a number of hours", "FABRIC's longest lease, two weeks")),
        "ready_timeout_s": Option(f"seconds the slice may take to become ready before it is deleted, default {READY_TIMEOUT_S}",
                                  number_in(0, MAX_READY_TIMEOUT_S, "a number of seconds", "a day")),
        "install_packages": Option("install the experiment's packages with apt, INSTALL_PACKAGES (default true; "
                                   "false: the image already has them, only checked)", boolean),
    }
    HOOKS = ("env",)
    #: Read by :func:`load_fabric_config` (every ``FABRIC_*`` variable overrides fabric_rc's line).
    ENV = {"FABRIC_RC": f"fablib's fabric_rc file (export NAME=value lines); the option fabric_rc wins; "
                        f"default {DEFAULT_RC}",
           **REQUIRED, "FABRIC_BASTION_HOST": f"the bastion host, default {DEFAULT_BASTION_HOST}",
           "REQUESTS_CA_BUNDLE": "the CA certificates fablib's HTTPS clients (requests) trust, default certifi's; "
                                 "set only for services with a CA of their own (a stand-in, a private deployment)"}

    @classmethod
    def setup(cls, options: dict[str, str], check_only: bool = False, log=print) -> int:
        """fablib and its build tools (:func:`netrepro.sites.fabric.setup.setup_fabric`)."""
        from netrepro.sites.fabric.setup import setup_fabric
        return setup_fabric(check_only, log)

    def preflight(self) -> None:
        """Check offline, before anything is requested or written: the fabric_rc settings and
        the files they name (:func:`load_fabric_config`). Raises SiteError (one line)."""
        load_fabric_config(self.options.get("env"), self.options.get("fabric_rc"))

    def _opts(self) -> FabricOptions:
        """The options, with the slice name of this copy: ``<slice_name>-<copy>`` above copy 1
        (a campaign's parallel reservations, ``--parallel``)."""
        opts = FabricOptions.from_options(self.spec, self.options)
        return opts if self.copy == 1 else replace(opts, slice_name=f"{opts.slice_name}-{self.copy}")

    def plan(self) -> str:
        opts = self._opts()
        site_note = opts.site or "a random site with capacity (chosen at submit; planned here as UTAH)"
        plan_opts = opts if opts.site else FabricOptions(**{**opts.__dict__, "site": "UTAH"})
        lines = [f"# site fabric: FABRIC site {site_note}",
                 "# nodes reached through the bastion (ProxyJump) with the slice key; addresses set by fablib (mode config)"]
        try:
            with tempfile.TemporaryDirectory(prefix="netrepro-fablib-") as tmp:
                slc = build_slice(offline_manager(workdir=tmp), self.spec, plan_opts)
                return "\n".join(lines) + "\n" + describe_slice(slc) + "\n"
        except ImportError:
            lines.append("# (fabrictestbed-extensions not installed: description from the spec)")
            m = self.spec.model
            for node in m.nodes:
                lines.append(f"  node {node}: site {plan_opts.site}, {opts.cores} cores, {opts.ram_gb} GB RAM, "
                             f"{opts.disk_gb} GB disk, image {opts.image}")
                for key, itf in m.data_plane(node).items():
                    nic = "NIC_Basic" if itf["address"] or not m.nodes[node].is_switch else opts.switch_nic
                    lines.append(f"    {nic} {key} {itf['address'] or '(port)'}")
            for seg in m.segments():
                lines.append(f"  network {seg['name']}: L2Bridge {seg['subnet'] or '(no subnet)'}")
            return "\n".join(lines) + "\n"

    def _manager(self, conf: dict[str, str]):
        """A FablibManager for ``conf``, signed in: its first authenticated calls (token
        refresh, the user's record and bastion key) are made here, so that a token, CA or
        host problem is one line (:func:`fabric_problem`) before anything is requested.

        Raises:
            SiteError: fablib could not sign in.
        """
        from fabrictestbed_extensions.fablib.fablib import FablibManager

        self.ensure_state_dir()
        log_file = str(self.state_dir / "fablib.log")
        # fabrictestbed's clients log to the "fabric.*" loggers, which have no handler: their
        # warnings (a failed token refresh, with the service's answer) would reach the console.
        fabric_log = logging.getLogger("fabric")
        if not any(getattr(h, "baseFilename", None) == log_file for h in fabric_log.handlers):
            fabric_log.addHandler(logging.FileHandler(log_file))
        fabric_log.setLevel(logging.INFO)
        fm = FablibManager(fabric_rc=conf["FABRIC_RC"], log_file=log_file,
                           project_id=conf["FABRIC_PROJECT_ID"], token_location=conf["FABRIC_TOKEN_LOCATION"],
                           bastion_username=conf["FABRIC_BASTION_USERNAME"],
                           bastion_key_location=conf["FABRIC_BASTION_KEY_LOCATION"])
        said = io.StringIO()   # fablib prints its configuration check ("Configuration is valid") each time
        try:
            with contextlib.redirect_stdout(said):
                fm.get_manager()
        except Exception as exc:   # fablib and fabrictestbed raise bare Exceptions
            raise SiteError(fabric_problem(exc, conf)) from None
        finally:
            if said.getvalue().strip():
                logging.getLogger("fabric").info("fablib said: %s", " ".join(said.getvalue().split()))
        return fm

    def reserve(self) -> None:
        """Build and submit the slice with a lease of option ``hours`` (no wait). Idempotent:
        an existing slice is kept. Raises SiteError at once when fabric_rc settings or key
        files are missing."""
        conf = load_fabric_config(self.options.get("env"), self.options.get("fabric_rc"))
        opts = self._opts()
        earlier = self.load_state()
        if earlier.get("slice_id"):
            print(f"fabric: slice {opts.slice_name} already reserved", file=sys.stderr)
            return
        if earlier.get("submitting"):
            raise SiteError(f"{self.held()}; an earlier submit was interrupted before FABRIC answered")
        hours = float(self.options.get("hours") or DEFAULT_HOURS)
        fm = self._manager(conf)
        site = opts.site or fm.get_random_site()
        slc = build_slice(fm, self.spec, FabricOptions(**{**opts.__dict__, "site": site}))
        end = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) + dt.timedelta(hours=hours)
        # Named before it is asked for: a Ctrl-C while fablib submits (the create call made,
        # its answer not yet read) must not leave a slice that no state names.
        pending = {"slice_name": opts.slice_name, "fabric_site": site, "expires": end.strftime(LEASE_FORMAT),
                   "submitting": True}
        self.save_state(pending)
        try:
            slice_id = slc.submit(wait=False, lease_end_time=end)
        except Exception:   # FABRIC refused (fablib raises bare Exceptions): nothing was made
            self.state_file.unlink(missing_ok=True)
            raise
        except BaseException:   # Ctrl-C, SIGTERM while submitting: find what was made, give it back
            self._withdraw(fm, pending, end)
            raise
        self.save_state({"slice_name": opts.slice_name, "slice_id": slice_id, "fabric_site": site,
                         "expires": end.strftime(LEASE_FORMAT)})

    def _withdraw(self, fm, pending: dict[str, Any], end: dt.datetime) -> None:
        """Give back the slice an interrupted submit may have made (``pending``: the state saved
        before it, ``end``: the lease end it asked for). The slice is looked up by name and
        deleted only when its lease ends when this submit asked (``lease_end_time``, a query
        parameter of the orchestrator's ``POST /slices/creates``), so that a slice of the same
        name that netrepro did not make is never deleted: another end, or FABRIC not answering,
        prints :meth:`held`'s line and keeps the state, for the user to check and ``down``; no
        slice of that name: the state is removed."""
        name = pending["slice_name"]
        try:
            try:
                slc = fm.get_slice(name=name)
            except Exception as exc:   # fablib raises a bare Exception when the slice is unknown
                if "not found" not in str(exc).lower():
                    raise
                self.state_file.unlink(missing_ok=True)
                return
            made = _lease_time(slc.get_lease_end(), name)
            if abs((made - end).total_seconds()) > 1:   # perhaps not this submit's: kept, named, for the user
                print(f"fabric: slice {name} exists with a lease to {made:%Y-%m-%d %H:%M:%S} UTC, not the "
                      f"{end:%Y-%m-%d %H:%M:%S} UTC this submit asked for, so it may not be netrepro's: left as it is; "
                      f"{self.held()}", file=sys.stderr)
                return
            self._delete(slc)
        except BaseException:   # FABRIC unreachable, or a second Ctrl-C: say what may be held
            print(self.held() or "", file=sys.stderr)

    def wait_ready(self, timeout_s: float | None = None) -> None:
        """fablib's wait (StableOK), SSH through the bastion and post-boot address
        configuration; then save the logins (management IP, user, MACs). ``timeout_s``:
        option ``ready_timeout_s``, else this, else :data:`READY_TIMEOUT_S`.

        Raises:
            SiteError: the slice failed (StableError) or did not become ready within the
                timeout: the slice is deleted first and the line names each failed node with
                what FABRIC said; if deleting fails too, the line ends with :meth:`held`'s.
        """
        timeout_s = float(self.options.get("ready_timeout_s") or timeout_s or READY_TIMEOUT_S)
        conf = load_fabric_config(self.options.get("env"), self.options.get("fabric_rc"))
        state = self.load_state()
        if not state.get("slice_id"):
            raise SiteError(f"site fabric: nothing reserved for {self.spec.name} (state {self.state_file}); run `make up` first")
        fm = self._manager(conf)
        slc = None
        try:
            slc = fm.get_slice(name=state["slice_name"])
            try:
                slc.wait(timeout=max(1, int(timeout_s)), interval=min(10, max(1, int(timeout_s) // 3)), progress=True)
            except Exception as exc:   # fablib raises bare Exceptions for StableError and timeouts
                self._give_back(slc, state, exc, timeout_s)
            slc.wait_ssh(timeout=int(timeout_s), progress=True)
            slc.post_boot_config()
            logins = self._logins(slc, conf)
        except SiteError:
            raise
        except Exception as exc:   # fablib's SSH and post-boot steps raise bare Exceptions
            if slc is None:   # the slice could not be read back: it stays held, named
                raise SiteError(f"{' '.join(str(exc).split())[:300]}; {self.held()}") from None
            self._give_back(slc, state, exc, timeout_s, f"no SSH through the bastion {conf['FABRIC_BASTION_HOST']}")
        except BaseException:   # Ctrl-C, SIGTERM: give the slice back, or say what is held
            try:
                self._delete(slc if slc is not None else fm.get_slice(name=state["slice_name"]))
            except BaseException:
                print(self.held() or "", file=sys.stderr)
            raise
        state["expires"] = str(slc.get_lease_end() or state.get("expires"))
        self.save_state(state)
        self.save_logins(logins, expires=state["expires"])
        (self.state_dir / SLICE_FILE).write_text(describe_slice(slc) + "\n", encoding="utf-8")

    def documents(self) -> dict[str, Path]:
        """The ready slice as fablib described it (``slice.txt``, :func:`describe_slice`: its
        nodes with site, cores, RAM, disk and image, each NIC's network and address)."""
        path = self.state_dir / SLICE_FILE
        return {SLICE_FILE: path} if self.load_state().get("slice_id") and path.is_file() else {}

    def _logins(self, slc, conf: dict[str, str]) -> dict[str, NodeLogin]:
        """Each node's login (management IP, user, site, the MAC of each interface by its
        key in the experiment) from a ready slice."""
        logins = {}
        keys = segment_keys(self.spec)
        for node in slc.get_nodes():
            macs = {}
            for iface in node.get_interfaces():
                net = iface.get_network()
                key = keys.get((node.get_name(), net.get_name())) if net is not None else None
                if key is not None:
                    macs[key] = iface.get_mac()
            logins[node.get_name()] = login_for(node.get_name(), str(node.get_management_ip()), node.get_username(),
                                                conf, {"site": node.get_site(), "macs": macs})
        return logins

    def _delete(self, slc) -> None:
        """Delete slice ``slc`` (fablib's Slice.delete) and forget the reservation; fablib's
        exceptions pass through, and the state is then kept."""
        slc.delete()
        self.state_file.unlink(missing_ok=True)
        (self.state_dir / SLICE_FILE).unlink(missing_ok=True)

    def _give_back(self, slc, state: dict[str, Any], exc: Exception, timeout_s: float, stage: str = "") -> None:
        """Delete a slice that failed or was not ready after ``timeout_s`` and raise SiteError
        naming its failed nodes and what FABRIC said (each node's reservation state and error
        message), or the timeout and the option that raises it; ``stage``: what failed after
        the slice was ready (the SSH and post-boot steps), said first."""
        failed = []
        for node in slc.get_nodes():
            if str(node.get_reservation_state()) in ("Failed", "Closed"):
                failed.append(f"node {node.get_name()} ({node.get_reservation_state()}: {node.get_error_message() or 'no message'})")
        if failed:
            what = "; ".join(failed)
        elif "timeout" in str(exc).lower():
            what = (f"not ready after {timeout_s:g} s (state {slc.get_state()}); raise the option ready_timeout_s "
                    "(READY_TIMEOUT_S)")
        else:
            what = str(exc).strip().splitlines()[-1][:300] if str(exc).strip() else type(exc).__name__
        if stage and not failed:
            what = f"{stage}: {what}"
        try:
            self._delete(slc)
        except Exception as gone:   # fablib raises bare Exceptions
            raise SiteError(f"site fabric: slice {state['slice_name']} failed ({what}) and deleting it failed too "
                            f"({str(gone)[:200]}); {self.held()}") from None
        raise SiteError(f"site fabric: slice {state['slice_name']} at {state.get('fabric_site')} failed and was deleted: "
                        f"{what}; try another site with FABRIC_SITE=<site> (or later)") from None

    def renew(self, hours: float) -> None:
        """Set the lease end to now + ``hours`` (idempotent), never earlier than it ends: the
        slice's lease end is read first (the orchestrator's slice record, ``lease_end_time``:
        fabrictestbed's FabricManagerV2.list_slices); when it is not before the end asked, one
        line says so (:func:`netrepro.sites.base.lease_kept_line`), the state records that end
        and nothing is renewed. Else the orchestrator's renew (FabricManagerV2.renew_slice)
        with that end.

        Raises:
            SiteError: nothing reserved, FABRIC refused or answered a lease end that is not
                its time format (the line says what it said).
        """
        conf = load_fabric_config(self.options.get("env"), self.options.get("fabric_rc"))
        state = self.load_state()
        if not state.get("slice_id"):
            raise SiteError(f"site fabric: nothing reserved for {self.spec.name}; run `make up` first")
        end = dt.datetime.now(dt.timezone.utc).replace(microsecond=0) + dt.timedelta(hours=float(hours))
        fm = self._manager(conf)   # a sign-in problem is its own line (SiteError), not a refusal
        try:
            rows = fm.get_manager().list_slices(slice_id=state["slice_id"], graph_format="NONE")
        except Exception as exc:   # fablib raises bare Exceptions with the orchestrator's answer
            said = " ".join(str(exc).split())
            raise SiteError(f"FABRIC did not say when slice {state['slice_name']}'s lease ends: {said[:300]}; "
                            "nothing changed") from None
        current = _lease_time(rows[0].get("lease_end_time") if rows and isinstance(rows[0], dict) else None,
                              state["slice_name"])
        if current >= end:
            print(lease_kept_line("fabric", f"slice {state['slice_name']}", current, hours), file=sys.stderr)
            if state.get("expires") != current.strftime(LEASE_FORMAT):
                state["expires"] = current.strftime(LEASE_FORMAT)
                self.save_state(state)
            return
        try:
            # The orchestrator's renew with the exact end: fablib 2.0.9's Slice.renew rounds the
            # time left down to whole days and, under one day, sends a modify, not a renew.
            fm.get_manager().renew_slice(slice_id=state["slice_id"], lease_end_time=end.strftime(LEASE_FORMAT))
        except Exception as exc:   # fablib raises bare Exceptions with the orchestrator's answer
            said = " ".join(str(exc).split())
            raise SiteError(f"FABRIC refused to renew slice {state['slice_name']}: {said[:300]}") from None
        state["expires"] = end.strftime(LEASE_FORMAT)
        self.save_state(state)

    def lease_end(self) -> float | None:
        """The slice's lease end (epoch seconds, from the state), or None when nothing is reserved."""
        st = self.load_state()
        if not st.get("expires"):
            return None
        return dt.datetime.strptime(st["expires"], LEASE_FORMAT).timestamp()

    def held(self) -> str | None:
        """One line naming the slice held (name, id, FABRIC site, lease end) and the commands
        that release it; None when nothing is."""
        st = self.load_state()
        exp = self.spec.name
        if not st.get("slice_id") and st.get("submitting"):
            return (f"fabric: slice {st['slice_name']} may have been made at FABRIC site {st.get('fabric_site', '?')} "
                    f"(its submit was interrupted); release it with `netrepro down {exp} --site fabric` "
                    f"(or `make down EXPERIMENT={exp} SITE=fabric`), or in the portal (Experiments > Slices)")
        if not st.get("slice_id"):
            return None
        return (f"fabric: slice {st['slice_name']} ({st['slice_id']}) is reserved at FABRIC site {st.get('fabric_site', '?')} "
                f"until {st.get('expires', '?')}; release it with `netrepro down {exp} --site fabric` "
                f"(or `make down EXPERIMENT={exp} SITE=fabric`), or in the portal (Experiments > Slices)")

    def inventory_vars(self) -> dict[str, Any]:
        """The VMs are this reservation's own: roles/kernel_capability may install a kernel and
        reboot one that lacks a qdisc (``kernel_capability_upgrade``); ``packages_install``
        false when option ``install_packages`` says so."""
        out: dict[str, Any] = {"kernel_capability_upgrade": True}
        if self.options.get("install_packages") not in (None, ""):
            out["packages_install"] = as_bool(self.options["install_packages"])
        return out

    def release(self) -> None:
        """Delete the slice. Idempotent: nothing reserved, or slice already gone, succeeds.

        Raises:
            SiteError: FABRIC could not be asked or refused; the line ends with :meth:`held`'s
                (the slice, its site and lease end, how to release it), and the state is kept.
        """
        state = self.load_state()
        if not (state.get("slice_id") or state.get("submitting")):
            print(f"fabric: nothing reserved for {self.spec.name}", file=sys.stderr)
            return
        conf = load_fabric_config(self.options.get("env"), self.options.get("fabric_rc"))
        try:
            fm = self._manager(conf)
            try:
                slc = fm.get_slice(name=state["slice_name"])
            except Exception as exc:  # fablib raises a bare Exception when the slice is unknown
                if "not found" not in str(exc).lower():
                    raise
                slc = None
            if slc is not None:
                self._delete(slc)
        except Exception as exc:   # SiteError from _manager, fablib's bare Exceptions
            said = " ".join(str(exc).split())
            raise SiteError(f"{said[:300]}; {self.held()}") from None
        self.state_file.unlink(missing_ok=True)   # the slice was already gone
        (self.state_dir / SLICE_FILE).unlink(missing_ok=True)
