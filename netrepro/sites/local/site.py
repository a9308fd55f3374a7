"""The ``local`` site: the experiment's nodes as network namespaces on this machine.

Three modes (``LOCAL_MODE``; ``auto`` chooses, see :meth:`LocalSite.choose_mode`):

- ``host``: the host kernel can add netem, htb, pie and red qdiscs; the namespaces are built
  on the host and the controller reaches each node's sshd over the management bridge.
- ``uml``: it cannot (as on these CI machines); the same namespaces are built inside a
  User-Mode Linux machine (Debian's stock UML kernel as a process, see
  :mod:`netrepro.sites.local.uml`), whose management bridge is joined to a tap on the host: the
  controller reaches the nodes' sshd directly.
- ``vm``: the same inside a QEMU micro-VM (virtme-ng + Debian's stock kernel, see
  :mod:`netrepro.sites.local.microvm`), reached through the VM's sshd as a jump host. Slower than
  ``uml`` on machines without KVM (docs/local-modes.md); the choice when UML is missing.

No account is needed. Everything the site makes is listed in its state and removed by
``release`` (``netrepro down``); running it twice is harmless.
"""

from __future__ import annotations

import ipaddress
import os
import re
import shlex
import shutil
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from netrepro.sites import inventory
from netrepro.sites.base import Site, at_once, process_group_alive
from netrepro.sites.errors import SiteError
from netrepro.sites.login import NodeLogin
from netrepro.sites.options import Option, matches, mgmt_subnet, number_in, origin_of
from netrepro.sites.local import capacity, microvm, netns, uml
from netrepro.sites.local.host import (captured, copy_subnet, host_routes_overlapping, mgmt_overlap,
                                       probe_host_congestion, probe_host_qdiscs)
from netrepro.sites.local.proc import boot_shell_line, kill_group, processes, started_identity, vm_group_is_ours
from netrepro.sites.local.setup import MODE_OPTION, VM_OVER_UML, setup_local
from netrepro.experiment.spec import REPO_ROOT, Spec

DEFAULT_MGMT_SUBNET = "172.30.0.0/24"


#: One forwarding-capacity measurement at a time in this process: the copies of a parallel
#: campaign's topology reserved at once would each measure the CPU the others use.
_CAPACITY_LOCK = threading.Lock()


#: The paths the local site writes into files that cannot quote (sshd_config(5) takes a
#: path up to the first space; a kernel command line parameter, such as UML's ``init=`` or
#: virtme's mounts, ends at a space): the state folder and the checkout must match this.
SAFE_PATH = re.compile(r"[A-Za-z0-9_./+@~-]+")


class LocalSite(Site):
    """Network namespaces on this machine, on the host or in a micro-VM.

    Options: ``mode`` (auto|host|uml|vm, default auto), ``mgmt_subnet`` (default 172.30.0.0/24),
    ``vm_cpus`` (2, QEMU only), ``vm_memory`` ("2G"), ``boot_timeout_s`` (600).
    """

    name = "local"
    TEARDOWN_ON_CLEAN = True
    PARALLEL = True  # in host mode: each copy's namespaces and bridges carry its number (netns.Layout)
    #: Besides Site's: nodes/ (host keys, sshd_config), run/ (the nodes' runtime folders in
    #: host mode), the build and teardown scripts, the forwarding test's script, result and
    #: scratch files (capacity.json.err, .iperf3, .tmp), and the machine's (UML or micro-VM)
    #: init script, jump sshd_config, console log, guest log and ready flag.
    STATE_ENTRIES = Site.STATE_ENTRIES + (
        "nodes", "run", "build.sh", "teardown.sh", capacity.SCRIPT_FILE, capacity.RESULT_FILE,
        capacity.RESULT_FILE + ".*", "vm-main.sh", "jump_sshd_config", "vm-console.log", "vm-guest.log", "vm-ready")
    OPTIONS = {
        "mode": MODE_OPTION,
        "mgmt_subnet": Option(f"management network, IPv4 CIDR, default {DEFAULT_MGMT_SUBNET}", mgmt_subnet()),
        "vm_cpus": Option("micro-VM vCPUs, default 2", number_in(1, 256, "a whole number of vCPUs",
            "conservative: the vCPUs share the host's cores", whole=True)),
        "vm_memory": Option("memory of the micro-VM or UML machine, default 2G", matches(
            r"[1-9][0-9]{0,3}[Gg]|[1-9][0-9]{0,6}[Mm]?", "a size such as 2G or 2048M (at most 9999G, or 9999999M)")),
        "boot_timeout_s": Option("seconds to wait for the micro-VM, default 600", number_in(
            0, 86400, "a number of seconds", "a day; a boot under QEMU's emulation takes minutes")),
    }
    HOOKS = ("authorized_keys",)
    #: A trial's wall time beyond its schedule and base-RTT pings (arming, the barrier's lead,
    #: packing, fetching, checks): the median per experiment was 16-28 s in the micro-VM under
    #: QEMU TCG on 2 cores (docs/runs, 2026-11-25/26: pie-lab 16, codel-lab 21, pie-vs-red 26-28,
    #: pacing-lab 26); less in host mode. The base class's 60 s made `--dry-run` say 66 s for
    #: a trial that takes 26 s.
    TRIAL_OVERHEAD_S = 25.0

    @classmethod
    def setup(cls, options: dict[str, str], check_only: bool = False, log=print) -> int:
        """The executables of the mode the site will run in (option ``mode``, else LOCAL_MODE,
        else chosen from the running kernel) and the micro-VM's kernel
        (:func:`netrepro.sites.local.setup.setup_local`, which says what it raises)."""
        mode = options.get("mode") or None
        return setup_local(mode, "--option" if mode else "LOCAL_MODE", check_only, log)

    @classmethod
    def refuse_experiment(cls, spec, options: dict[str, Any], given: dict[str, Any] | None = None) -> None:
        """The management subnet (option ``mgmt_subnet`` or :data:`DEFAULT_MGMT_SUBNET`) must
        not overlap any subnet, address or route of the experiment (:func:`mgmt_overlap`).
        Raises SiteError (one line naming the option, or the default, and the file's field)."""
        value = options.get("mgmt_subnet") or DEFAULT_MGMT_SUBNET
        clash = mgmt_overlap(spec.model, str(value))
        if clash is None:
            return
        field, what = clash
        if options.get("mgmt_subnet"):
            raise SiteError(f"site local: option mgmt_subnet={value!r}{origin_of(given, 'mgmt_subnet')}: overlaps "
                            f"{spec.path}: {field} ({what}); expected a management subnet apart from the experiment's")
        raise SiteError(f"site local: the default management subnet {value} overlaps {spec.path}: {field} ({what}); "
                        f"choose another with --option mgmt_subnet=<CIDR>")

    # --- paths -----------------------------------------------------------------------
    @property
    def config_dir(self) -> Path:
        return self.state_dir / "nodes"

    def _layout(self, mode: str) -> netns.Layout:
        runtime = str(self.state_dir / "run") if mode == "host" else "/run/netrepro"
        return netns.Layout(
            mgmt_subnet=copy_subnet(self.options.get("mgmt_subnet") or DEFAULT_MGMT_SUBNET, self.copy),
            config_dir=str(self.config_dir),
            runtime_dir=runtime,
            authorized_keys=str(self.state_dir / "ssh" / "authorized_keys"),
            copy=self.copy,
        )

    @property
    def client_key(self) -> Path:
        return self.state_dir / "ssh" / "id_ed25519"

    @property
    def known_hosts(self) -> Path:
        """The run's pinned host keys (nodes and jump host), written by ``reserve``."""
        return self.state_dir / "ssh" / "known_hosts"

    # --- plan --------------------------------------------------------------------------
    def choose_mode(self, log=print) -> str:
        """``host``, ``uml`` or ``vm``: the option if given, else by what this machine can do.

        ``auto``: ``host`` when the host kernel can add the qdiscs (probed in a throwaway
        namespace); otherwise ``vm``, because its two vCPUs were measured to keep the nodes' CPU
        less busy than UML's one during trials (:data:`VM_OVER_UML`), and a busy CPU fails the
        health checks. ``uml`` (faster to boot and provision) only by option. Says why in one line.
        """
        mode = self.options.get("mode") or "auto"
        if mode in ("host", "uml", "vm"):
            log(f"[local] mode {mode}: chosen by option")
            return mode
        if mode != "auto":
            raise SiteError(f"LOCAL_MODE={mode}: expected auto, host, uml or vm")
        found = {**probe_host_qdiscs(self.spec.model), **probe_host_congestion(self.spec.model)}
        missing = [k for k, ok in found.items() if not ok]
        if not missing:
            log("[local] mode host: the host kernel has " + ", ".join(found))
            return "host"
        log(f"[local] mode vm: the host kernel lacks {', '.join(missing)} (qdiscs probed in a throwaway "
            f"namespace); running the site in a QEMU micro-VM ({VM_OVER_UML})")
        return "vm"

    @classmethod
    def refusal(cls, spec: Spec) -> tuple[str, str] | None:
        """An address or route of the experiment inside the default management subnet
        (:data:`DEFAULT_MGMT_SUBNET`), which ``reserve`` would refuse (:func:`mgmt_overlap`)."""
        clash = mgmt_overlap(spec.model, DEFAULT_MGMT_SUBNET)
        if clash is None:
            return None
        field, value = clash
        return field, (f"{value} overlaps the local site's default management subnet {DEFAULT_MGMT_SUBNET}; "
                       f"expected addresses apart from it (or run the local site with --option mgmt_subnet=<CIDR>)")

    @classmethod
    def describe_status(cls, status: dict) -> str:
        """The forwarding test recorded at reserve time (``status["capacity"]``, :func:`capacity.describe`)."""
        return capacity.describe(status.get("capacity"))

    def plan(self) -> str:
        layout = self._layout("host")
        mgmt = netns.mgmt_addresses(self.spec, layout)
        lines = [f"local site for {self.spec.name}: one network namespace per node",
                 f"management network {layout.mgmt_subnet} on bridge {layout.mgmt_bridge}"]
        m = self.spec.model
        for net, nd in m.networks.items():
            lines.append(f"LAN {net} {nd['subnet']} on bridge {layout.lan(net)}")
        for node, nd in m.nodes.items():
            itfs = ", ".join(f"{name} {x.ip or '(bridged)'} ({x.network or 'to ' + x.link})"
                             for name, x in nd.interfaces.items())
            role = (nd.groups or [nd.kind + "s"])[0].removesuffix("s")
            lines.append(f"  {node:8} {role:6} eth0 {mgmt[node]} (mgmt), {itfs}")
        return "\n".join(lines)

    # --- reserve -------------------------------------------------------------------------
    def _prepare_files(self, layout: netns.Layout, extra_keys: list[str]) -> None:
        ssh_dir = self.ensure_state_dir() / "ssh"
        ssh_dir.mkdir(exist_ok=True)
        if not self.client_key.exists():
            captured(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", f"netrepro-{self.spec.name}",
                  "-f", str(self.client_key)]).check_returncode()
        pub = self.client_key.with_suffix(".pub").read_text()
        (ssh_dir / "authorized_keys").write_text(pub + "".join(k.rstrip() + "\n" for k in extra_keys))
        mgmt = netns.mgmt_addresses(self.spec, layout)
        for node in self.spec.nodes:
            d = self.config_dir / node
            d.mkdir(parents=True, exist_ok=True)
            key = d / "ssh_host_ed25519_key"
            if not key.exists():
                captured(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", node, "-f", str(key)]).check_returncode()
            (d / "sshd_config").write_text(netns.sshd_config(node, mgmt[node], layout))
        (self.state_dir / "build.sh").write_text(netns.render_script(
            netns.build_commands(self.spec, layout), strict=True, title=f"build the local site of {self.spec.name}"))
        (self.state_dir / "teardown.sh").write_text(self._teardown_script())
        # The substrate's forwarding test, run where the site is built, before it is built.
        (self.state_dir / capacity.RESULT_FILE).unlink(missing_ok=True)
        (self.state_dir / capacity.SCRIPT_FILE).write_text(capacity.script(
            self.state_dir / capacity.RESULT_FILE,
            name_prefix=capacity.prefix() + (f"-{self.copy}" if self.copy > 1 else "")))

    def _record_capacity(self, result: dict, log) -> None:
        """Keep the forwarding test's result (:mod:`netrepro.sites.local.capacity`) in the state, for
        ``status()`` (run.json's site_status) and ``make bench``; a failed test is recorded, not raised."""
        st = self.load_state()
        st["capacity"] = result
        self.save_state(st)
        log(f"[local] substrate: {capacity.describe(result)}")

    def reserve(self, log=print) -> None:
        """Build the site (idempotent: does nothing when this site is already up).

        Any failure or interruption (Ctrl-C) on the way removes what was made so far.
        Raises SiteError naming what is missing (root, tools, the micro-VM kernel).
        """
        if self.load_state().get("logins"):
            log(f"[local] already up in {self.load_state()['mode']} mode (state {self.state_file})")
            return
        for what, folder in (("the state folder (NETREPRO_STATE)", self.state_dir), ("the checkout", REPO_ROOT)):
            if not SAFE_PATH.fullmatch(str(Path(folder).resolve())):
                raise SiteError(f"site local: {what} {str(folder)!r} holds a character other than letters, digits and "
                                f"'_./+@~-'; expected such a path: it goes into sshd_config files and the micro-VM's "
                                f"kernel command line, which cannot quote a space")
        try:
            self._reserve(log)
        except BaseException:
            self.release(log)
            raise

    def _reserve(self, log) -> None:
        if os.geteuid() != 0:
            raise SiteError("site local: needs root (network namespaces, bridges, sshd); run as root, e.g. `sudo make reproduce EXPERIMENT=<name>`")
        for tool in ("ip", "tc", "ssh", "ssh-keygen", "/usr/sbin/sshd"):
            if not shutil.which(tool):
                raise SiteError(f"site local: {tool} not found; run `make setup` (installs iproute2, openssh-server, ...)")
        mode = self.choose_mode(log)
        if self.copy > 1 and mode != "host":
            raise SiteError(f"site local: --parallel: mode {mode} builds one copy of the topology in one machine "
                            "and this host's cores would be shared by several; expected LOCAL_MODE=host (a kernel "
                            "with the experiment's qdiscs) or --parallel 1")
        layout = self._layout(mode)
        if mode == "uml":
            ok, why = uml.available()
            if not ok:
                raise SiteError(f"site local: mode uml: {why}; run `make setup` or use LOCAL_MODE=vm")
            clash = host_routes_overlapping(layout.mgmt_subnet)
            if clash:
                raise SiteError(f"site local: the management subnet {layout.mgmt_subnet} overlaps this host's "
                                f"{', '.join(clash)}; choose another with --option mgmt_subnet=<CIDR>")
        if mode == "host":
            have_ns = set(captured(["ip", "netns", "list"]).stdout.split())
            have_links = {ln.split(":")[1].strip().split("@")[0] for ln in captured(["ip", "-o", "link"]).stdout.splitlines() if ":" in ln}
            clash = netns.existing_conflicts(self.spec, layout, have_ns, have_links)
            if clash:
                raise SiteError(f"site local: {', '.join(clash)} already exist on this host and were not made by "
                                f"netrepro; remove them or use LOCAL_MODE=vm")
        self.ensure_state_dir()
        self._prepare_files(layout, self.options.get("authorized_keys", []))
        self.save_state({"site": "local", "experiment": self.spec.name, "mode": mode, "id": uuid.uuid4().hex[:8],
                         "created_at": time.time(), "runtime_dir": layout.runtime_dir,
                         "mgmt_subnet": layout.mgmt_subnet})
        if mode == "host":
            with _CAPACITY_LOCK:
                result = capacity.run_here(self.state_dir / capacity.SCRIPT_FILE, self.state_dir / capacity.RESULT_FILE)
            self._record_capacity(result, log)
            r = captured(["sh", str(self.state_dir / "build.sh")])
            if r.returncode != 0:
                why = (r.stderr.strip() or r.stdout.strip() or f"exit status {r.returncode}")[-500:]
                raise SiteError(f"site local: build failed: {why}")
            jump = None
        elif mode == "uml":
            self._start_uml(layout, log)
            jump = None
        else:
            jump = self._start_vm(layout, log)
        if mode != "host":  # run by the guest before its build (uml.guest_init_script, microvm.guest_main_script)
            self._record_capacity(capacity.read_result(self.state_dir / capacity.RESULT_FILE,
                                                       log_hint=str(self.state_dir / "vm-guest.log")), log)
        mgmt = netns.mgmt_addresses(self.spec, layout)
        # The host keys made for this run are pinned: known_hosts holds exactly them.
        jump_key = {"jump_host_key": (self.config_dir / "jump_host_ed25519_key.pub").read_text()} if jump else {}
        logins = {n: NodeLogin(name=n, host=mgmt[n], port=22, user="root", key_file=str(self.client_key),
                               proxy_jump=jump, extra={"node_dir": f"{layout.runtime_dir}/{n}", **jump_key,
                                                       "host_key": (self.config_dir / n / "ssh_host_ed25519_key.pub").read_text()})
                  for n in self.spec.nodes}
        inventory.write_known_hosts(logins, self.known_hosts)
        self.save_logins(logins)

    def _start_uml(self, layout: netns.Layout, log) -> None:
        """Make the host's tap, boot the UML machine on it and wait until it has built the
        site (``vm-ready``). Raises SiteError naming the log to read."""
        st = self.load_state()
        tap = uml.tap_name(st["id"])
        st["tap"] = tap
        self.save_state(st)
        host_addr = f"{layout.controller_address()}/{ipaddress.ip_network(layout.mgmt_subnet).prefixlen}"
        for argv in (["ip", "tuntap", "add", "name", tap, "mode", "tap"], ["ip", "addr", "add", host_addr, "dev", tap],
                     ["ip", "link", "set", tap, "up"],
                     # Offloads off on the host's end: with them on, TCP from the host into the
                     # guest's bridge lost segments and stalled in retransmission back-off
                     # (a 100 KB Ansible module took minutes); with them off, 1.3 Gbit/s.
                     ["ethtool", "-K", tap, "tx", "off", "sg", "off", "tso", "off", "gso", "off"]):
            r = captured(argv)
            if r.returncode != 0:
                raise SiteError(f"site local: {' '.join(argv)} failed: {r.stderr.strip()}")
        for f in ("vm-ready", "vm-guest.log"):
            (self.state_dir / f).unlink(missing_ok=True)
        init = self.state_dir / "vm-main.sh"
        init.write_text(uml.guest_init_script(
            state_dir=self.state_dir, runtime_dir=layout.runtime_dir, build_script=self.state_dir / "build.sh",
            mgmt_bridge=layout.mgmt_bridge, modules=uml.modules_dir(),
            capacity_script=self.state_dir / capacity.SCRIPT_FILE))
        init.chmod(0o755)
        argv = uml.uml_command(binary_path=uml.binary(), memory=str(self.options.get("vm_memory", "2G")),
                               guest_init=init, tap=tap)
        self._boot(argv, kernel=f"uml {uml.modules_dir().name}", log=log, what="UML machine")

    def _record_uml(self, shell_pid: int) -> None:
        """Record the UML kernel process: it calls setsid(2), so its own session and process
        group (its pid), where all its guest processes live, is not the shell's."""
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            for pid, ident in processes().items():
                if ident.cmdline[:1] == [uml.binary()] and ident.ppid == shell_pid:
                    st = self.load_state()
                    st.update({"uml_pgid": pid, "uml_starttime": ident.starttime, "uml_cmdline": ident.cmdline})
                    self.save_state(st)
                    return
            time.sleep(0.05)

    def _boot(self, argv: list[str], *, kernel: str, log, what: str, env: dict | None = None,
              extra_state: dict | None = None) -> None:
        """Start ``argv`` in its own session with its console appended to vm-console.log, record
        who it is in the state, and wait for the guest's ``vm-ready`` (boot_timeout_s)."""
        shell = boot_shell_line(argv, self.state_dir / "vm-console.log")
        t0 = time.time()
        proc = subprocess.Popen(["sh", "-c", shell], start_new_session=True, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        st = self.load_state()
        # Who the process group's leader is: `down` kills the group only if it still is that.
        ident = started_identity(proc.pid)
        if ident:
            st.update({"vm_starttime": ident.starttime, "vm_cmdline": ident.cmdline})
        st.update({"vm_pgid": proc.pid, "kernel": kernel, **(extra_state or {})})
        self.save_state(st)
        if st["mode"] == "uml":
            self._record_uml(proc.pid)
        log(f"[local] booting the {what} (pgid {proc.pid})")
        timeout = float(self.options.get("boot_timeout_s", 600))
        ready = self.state_dir / "vm-ready"
        while time.time() - t0 < timeout:
            if ready.exists() and ready.read_text().strip():
                break
            if proc.poll() is not None:
                console = self.state_dir / "vm-console.log"
                refusal = uml.boot_refusal(console.read_text(errors="replace")) if console.is_file() else None
                if refusal:
                    raise SiteError(f"site local: the {what} exited during boot: {refusal}; see {console}")
                raise SiteError(f"site local: the {what} exited during boot; see {console} and {self.state_dir / 'vm-guest.log'}")
            time.sleep(0.2)
        else:
            raise SiteError(f"site local: the {what} was not ready after {timeout:.0f} s; see {self.state_dir / 'vm-guest.log'}")
        if ready.read_text().strip() != "ready":
            raise SiteError(f"site local: building the site inside the {what} failed; see {self.state_dir / 'vm-guest.log'}")
        st = self.load_state()
        st["vm_boot_s"] = round(time.time() - t0, 1)
        self.save_state(st)
        log(f"[local] {what} up and site built in {st['vm_boot_s']} s")

    def _start_vm(self, layout: netns.Layout, log) -> str:
        kernel = microvm.cached_kernel()
        if not kernel:
            raise SiteError("site local: no micro-VM kernel in the cache; run `make setup` (downloads Debian's stock kernel)")
        use_kvm, why = microvm.kvm_usable()
        log(f"[local] micro-VM kernel {kernel.release}; {why}")
        port = microvm.free_port()
        jump_cfg = self.state_dir / "jump_sshd_config"
        jump_cfg.write_text(jump_sshd_config(layout))
        hk = self.config_dir / "jump_host_ed25519_key"
        if not hk.exists():
            captured(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(hk)]).check_returncode()
        for f in ("vm-ready", "vm-guest.log"):
            (self.state_dir / f).unlink(missing_ok=True)
        main = self.state_dir / "vm-main.sh"
        main.write_text(microvm.guest_main_script(
            state_dir=self.state_dir, runtime_dir=layout.runtime_dir, build_script=self.state_dir / "build.sh",
            teardown_script=self.state_dir / "teardown.sh", jump_sshd_config=jump_cfg,
            capacity_script=self.state_dir / capacity.SCRIPT_FILE))
        argv = microvm.vng_command(kernel, ssh_port=port, rwdir=self.state_dir, guest_cmd=f"sh {main}",
                                   cpus=int(self.options.get("vm_cpus", 2)), memory=str(self.options.get("vm_memory", "2G")),
                                   use_kvm=use_kvm)
        env = dict(os.environ)
        env["PATH"] = f"{Path(os.sys.executable).parent}:{env.get('PATH', '')}"
        self._boot(argv, kernel=kernel.release, log=log, what="micro-VM", env=env,
                   extra_state={"ssh_port": port, "kvm": use_kvm, "vm_why": why})
        return f"root@127.0.0.1:{port}"

    # --- wait / release / status ---------------------------------------------------------
    def ssh_argv(self, login: NodeLogin, command: str) -> list[str]:
        """ssh(1) argv running ``command`` on a node (through the jump host if any)."""
        known = str(self.state_dir / "ssh" / "known_hosts")
        # Multiplexed through one jump connection (the micro-VM's handshakes are slow); the
        # node masters are the ones Ansible reuses (the inventory names the same folder).
        return (["ssh", "-o", "BatchMode=yes", "-o", "ConnectTimeout=30", "-i", str(self.client_key),
                 "-o", "IdentitiesOnly=yes", "-p", str(login.port)]
                + shlex.split(inventory.ssh_common_args(login, known, inventory.control_dir(self.state_dir, make=True)))
                + [f"{login.user}@{login.host}", command])

    def wait_ready(self, timeout_s: float = 300, log=print) -> None:
        """Wait until every node's sshd answers (``true`` over SSH)."""
        logins = self.logins()
        t0 = time.time()
        pending = set(logins)

        def answers(n: str) -> bool:
            try:
                return captured(self.ssh_argv(logins[n], "true"), timeout=60).returncode == 0
            except subprocess.TimeoutExpired:
                return False

        # One node first, so that the others find the jump connection open.
        first = sorted(pending)[0]
        while time.time() - t0 < timeout_s and not answers(first):
            time.sleep(1)
        while pending and time.time() - t0 < timeout_s:
            names = sorted(pending)
            for n, ok in zip(names, at_once(answers, names)):
                if ok:
                    pending.discard(n)
            if pending:
                time.sleep(1)
        if pending:
            raise SiteError(f"site local: no SSH answer from {', '.join(sorted(pending))} after {timeout_s:.0f} s")
        log(f"[local] all {len(logins)} nodes answer SSH ({time.time() - t0:.1f} s)")

    def _teardown_script(self) -> str:
        """The host mode's teardown script (:func:`netrepro.sites.local.netns.teardown_commands`), as
        ``reserve`` writes it to ``teardown.sh``; ``release`` runs this text, not the file's."""
        return netns.render_script(netns.teardown_commands(self.spec, self._layout("host")), strict=False,
                                   title=f"tear down the local site of {self.spec.name}")

    def _booted_by_us(self, key: str, cmdline: Any) -> bool:
        """Whether ``cmdline`` (a state's ``<key>_cmdline``) is one netrepro starts this state
        folder's machine with: ``vm``, the boot shell ``sh -c '<argv> ... | cat >> <this
        folder>/vm-console.log'`` (:func:`boot_shell_line`); ``uml``, the UML kernel booting
        ``init=<this folder>/vm-main.sh`` (:func:`netrepro.sites.local.uml.uml_command`)."""
        if not (isinstance(cmdline, list) and cmdline and all(isinstance(a, str) for a in cmdline)):
            return False
        if key == "vm":
            tail = boot_shell_line([], self.state_dir / "vm-console.log")
            return len(cmdline) == 3 and cmdline[:2] == ["sh", "-c"] and cmdline[2].endswith(tail) \
                and len(cmdline[2]) > len(tail)
        return f"init={self.state_dir / 'vm-main.sh'}" in cmdline[1:]

    def check_state(self) -> None:
        """The logins (:meth:`Site.check_state`), and what :meth:`release` would stop or delete:
        each process group the state names (``vm_pgid``, ``uml_pgid``) a whole number above 1,
        not netrepro's own group, and, where a command line is recorded (what lets ``down``
        signal it: :func:`vm_group_is_ours`), one netrepro boots this folder's machine with
        (:meth:`_booted_by_us`), with a start time; the tap (``tap``) the one named after the
        state's ``id`` (:func:`netrepro.sites.local.uml.tap_name`).

        Raises:
            SiteError: one line naming the state file, the field and what was expected; the
                process group or device is left alone.
        """
        super().check_state()
        st = self.load_state()
        where = str(self.state_file)
        for key, what in (("vm", "micro-VM's boot shell"), ("uml", "UML kernel")):
            pgid = st.get(f"{key}_pgid")
            if pgid is None:
                continue
            if type(pgid) is not int or pgid <= 1 or pgid == os.getpgrp():
                raise SiteError(f"{where}: {key}_pgid: {pgid!r}: expected the process group id of the {what} "
                                "netrepro started (a whole number above 1, not netrepro's own group); nothing stopped")
            cmdline, start = st.get(f"{key}_cmdline"), st.get(f"{key}_starttime")
            if cmdline is None and start is None:
                continue   # never recorded (it ended while it started): nothing will be signalled
            if not self._booted_by_us(key, cmdline):
                raise SiteError(f"{where}: {key}_cmdline: {cmdline!r}: expected the command line of the {what} "
                                f"netrepro starts for {self.state_dir}; process group {pgid} left alone")
            if type(start) is not int or start <= 0:
                raise SiteError(f"{where}: {key}_starttime: {start!r}: expected the {what}'s start time in clock "
                                f"ticks (proc(5)); process group {pgid} left alone")
        teardown = self.state_dir / "teardown.sh"
        if st.get("mode") == "host" and teardown.is_file() and teardown.read_text(errors="replace") != self._teardown_script():
            raise SiteError(f"{teardown}: (file): differs from the teardown netrepro writes for {self.spec.name} "
                            f"(copy {self.copy}); expected the script `up` wrote (the experiment's nodes and LANs "
                            "changed since, or the file was edited): read it and run it by hand, then delete "
                            f"{self.state_file}; nothing torn down")
        tap = st.get("tap")
        if tap is not None and not (isinstance(st.get("id"), str) and re.fullmatch(r"[0-9a-f]{8}", st["id"])
                                    and tap == uml.tap_name(st["id"])):
            raise SiteError(f"{where}: tap: {tap!r}: expected the tap netrepro names after the state's id "
                            f"(nrt-<8 hex digits>); no device deleted")

    def release(self, log=print) -> None:
        """Remove everything the site made; harmless when nothing is up. Raises SiteError
        (one line), stopping and deleting nothing, when the state names a process group or
        device netrepro did not make for this folder (:meth:`check_state`)."""
        self.check_state()
        st = self.load_state()
        mode = st.get("mode")
        if not mode:
            log(f"[local] nothing to tear down for {self.spec.name}")
            return
        if mode == "host":   # the script rendered now, never the file's text (check_state compared them)
            captured(["sh", "-c", self._teardown_script()])
        elif mode == "uml":
            self._stop_uml(st, log)
        else:
            self._stop_vm(st, log)
        # Keys are per run: the next `up` makes new ones (and a new known_hosts).
        for f in ("state.json", "vm-ready", "build.sh", "teardown.sh", "vm-main.sh", "jump_sshd_config",
                  capacity.SCRIPT_FILE, capacity.RESULT_FILE):
            (self.state_dir / f).unlink(missing_ok=True)
        for d in ("run", "ssh", "nodes"):
            shutil.rmtree(self.state_dir / d, ignore_errors=True)
        log(f"[local] torn down ({mode} mode)")

    def _stop_uml(self, st: dict[str, Any], log) -> None:
        """Kill the UML machine (everything the site built is in its memory) and delete the tap."""
        for key in ("uml", "vm"):  # the UML kernel's own group first, then the shell and its console pipe
            pgid = st.get(f"{key}_pgid")
            if pgid and process_group_alive(pgid) and not kill_group(pgid, st.get(f"{key}_starttime"), st.get(f"{key}_cmdline")):
                log(f"[local] process group {pgid} is not the UML machine that `up` started; leaving it alone")
        if st.get("tap"):
            captured(["ip", "link", "del", st["tap"]])

    def _stop_vm(self, st: dict[str, Any], log) -> None:
        pgid = st.get("vm_pgid")
        if not pgid or not process_group_alive(pgid):
            return
        if not vm_group_is_ours(pgid, st.get("vm_starttime"), st.get("vm_cmdline")):
            log(f"[local] process group {pgid} is not the micro-VM that `up` started (its start time or command "
                f"line differ, or were not recorded); leaving it alone")
            return
        # Everything the site built lives in the guest's memory (namespaces, processes, the
        # nodes' folders under its /run): stopping the VM removes it all at once. A teardown
        # inside the guest first, then QEMU's power-off, took 12-16 s under TCG for nothing.
        if kill_group(pgid, st.get("vm_starttime"), st.get("vm_cmdline")):
            log("[local] micro-VM stopped")
        else:
            log(f"[local] process group {pgid} is no longer the micro-VM; not stopped")

    def status(self) -> dict[str, Any]:
        st = self.load_state()
        out = {"site": "local", "reserved": bool(st.get("mode"))}
        out.update({k: st[k] for k in ("mode", "kernel", "kvm", "ssh_port", "vm_boot_s", "capacity") if k in st})
        key = "uml" if st.get("uml_pgid") else "vm"
        if type(st.get(f"{key}_pgid")) is int and st[f"{key}_pgid"] > 1:   # else not netrepro's (check_state)
            out["vm_running"] = process_group_alive(st[f"{key}_pgid"]) and vm_group_is_ours(
                st[f"{key}_pgid"], st.get(f"{key}_starttime"), st.get(f"{key}_cmdline"))
        return out

    def inventory_vars(self) -> dict[str, Any]:
        st = self.load_state()
        return {"netrepro_local_mode": st.get("mode", ""), "packages_install": False,
                "kernel_capability_upgrade": False,
                "kernel_capability_upgrade_hint": "Use LOCAL_MODE=vm: the micro-VM boots a Debian kernel that has them."}


def jump_sshd_config(layout: netns.Layout) -> str:
    """sshd_config(5) text of the micro-VM's jump sshd (its root namespace, on QEMU's user
    network address): keys only, as the nodes' sshd (netns.sshd_config)."""
    return "\n".join([
        "# sshd of the micro-VM's root namespace: the jump host to the nodes", "Port 22",
        f"ListenAddress {microvm.SLIRP_GUEST}", f"HostKey {layout.config_dir}/jump_host_ed25519_key",
        f"AuthorizedKeysFile {layout.authorized_keys}", "PermitRootLogin prohibit-password",
        "AuthenticationMethods publickey", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
        "UsePAM yes", "StrictModes no", "UseDNS no", f"PidFile {layout.runtime_dir}/jump-sshd.pid", ""])
