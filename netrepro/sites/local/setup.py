"""What the local site needs on the controller machine (its setup hook,
:meth:`netrepro.sites.local.site.LocalSite.setup`): every executable the site's code, its
generated scripts and the roles' node scripts run, listed in :data:`LOCAL_EXECUTABLES` (and
:data:`UML_EXECUTABLES` for the User-Mode Linux mode, :data:`VM_EXECUTABLES` for the micro-VM
mode) with the Debian package that provides it, and the micro-VM's kernel. ``--check``
verifies each and names what is missing, and changes nothing: it creates no namespace, file or
process.

Which mode is needed (:func:`local_mode`) follows
:meth:`netrepro.sites.local.site.LocalSite.choose_mode`, decided without touching the system:
from the site option ``mode`` or ``LOCAL_MODE``, else from the running kernel's module lists
(:func:`host_has_qdiscs`).
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from netrepro.core.packages import apt_install, which
from netrepro.sites.errors import SiteError
from netrepro.sites.options import Option, one_of
from netrepro.sites.local import uml

#: The local site's option ``mode`` (:data:`netrepro.sites.local.site.LocalSite.OPTIONS`).
MODE_OPTION = Option("auto, host, uml or vm, default auto", one_of("auto", "host", "uml", "vm"))
#: What the console says of UML when ``auto`` picks the micro-VM. Why it picks it
#: (docs/sites/local.md): on a 2-core machine without KVM, pie-vs-red at TIME_SCALE=0.1
#: (`make reproduce-pie-vs-red TIME_SCALE=0.1 LOCAL_MODE=uml|vm`, one session), UML's single
#: CPU was 79-92 % busy during the trials and failed the health checks, QEMU's two vCPUs
#: 43-45 %, although UML builds the site in 23 s instead of 46 s.
VM_OVER_UML = "LOCAL_MODE=uml for a UML machine instead (one CPU: faster to start, busier during trials)"
#: Executable -> Debian package, for every mode of the local site. Audited from
#: netrepro/sites/local/*.py, netrepro/runner/*.py, the generated
#: build, teardown and capacity scripts and roles/*/files/*.sh (names as called there).
LOCAL_EXECUTABLES = {
    "ip": "iproute2", "tc": "iproute2", "ss": "iproute2", "bridge": "iproute2",
    "ssh": "openssh-client", "ssh-keygen": "openssh-client",
    "/usr/sbin/sshd": "openssh-server", "/usr/sbin/vsftpd": "vsftpd",
    "ping": "iputils-ping", "ethtool": "ethtool", "curl": "curl",
    "sysctl": "procps", "pkill": "procps", "pgrep": "procps",
    "modprobe": "kmod", "depmod": "kmod",
    "python3": "python3", "git": "git", "tar": "tar", "gzip": "gzip",
    "iperf3": "iperf3",  # the substrate's forwarding test (netrepro.sites.local.capacity), every mode
}
#: Executable -> Debian package, only when the site runs in User-Mode Linux
#: (netrepro.sites.local.uml): Debian's UML kernel, whose package also ships its module tree.
UML_EXECUTABLES = {"linux.uml": "user-mode-linux"}
#: Executable -> Debian package, only when the site runs in the micro-VM. virtme-ng builds
#: its initramfs with busybox and calls file(1) on the kernel; the kernel package is fetched
#: with apt-get download and unpacked with dpkg -x (netrepro.sites.local.microvm).
VM_EXECUTABLES = {
    "qemu-system-x86_64": "qemu-system-x86", "busybox": "busybox-static", "file": "file",
    "apt-get": "apt", "apt-cache": "apt", "dpkg": "dpkg",
}
#: Kernel modules (qdiscs) the local site needs in host mode for pie-vs-red (`up` probes each experiment's own, netrepro.sites.local.host.needed_qdisc_probes).
HOST_QDISC_MODULES = ("sch_netem", "sch_htb", "sch_pie", "sch_red")


def host_has_qdiscs(release: str | None = None, modules_root: Path = Path("/lib/modules")) -> bool | None:
    """Whether the running kernel provides every qdisc of HOST_QDISC_MODULES, read from its
    module lists (``modules.builtin`` and ``modules.dep`` under ``/lib/modules/<release>``,
    see modules.dep(5)); None when the kernel ships no lists (as a minimal VM kernel does).

    Reads files only: no namespace, module load or process.
    """
    d = modules_root / (release or platform.release())
    names = set()
    for f in ("modules.builtin", "modules.dep"):
        try:
            text = (d / f).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            path = line.split(":", 1)[0]
            names.add(Path(path).name.split(".ko")[0])
    if not names:
        return None
    return all(m in names for m in HOST_QDISC_MODULES)


def local_mode(mode: str | None = None, *, tun: Path | None = None, release: str | None = None,
               modules_root: Path = Path("/lib/modules"), origin: str = "LOCAL_MODE") -> tuple[str, str]:
    """The mode the local site will run in here (``host``, ``uml`` or ``vm``), and why.

    ``mode`` is LOCAL_MODE (auto|host|uml|vm; default: the environment's, else auto), or the
    site option ``mode`` when ``origin`` says so (``--option``: errors and reasons name it). As
    :meth:`netrepro.sites.local.site.LocalSite.choose_mode` decides once setup has run: ``auto`` is
    ``host`` when the running kernel's module lists show every qdisc (``release`` and
    ``modules_root`` as :func:`host_has_qdiscs`'s; ``up`` probes for real later); else ``vm``
    (the QEMU micro-VM: its two vCPUs kept the nodes' CPU below UML's single one, see
    :data:`VM_OVER_UML`). ``tun`` is unused by ``auto`` and kept for
    callers checking UML's tap (:data:`netrepro.sites.local.uml.TUN_DEVICE`). Reads files only.

    Raises SiteError, worded as the site's own option check, when ``mode`` is not one of the
    local site's modes (:data:`MODE_OPTION`).
    """
    tun = tun or uml.TUN_DEVICE
    mode = mode or os.environ.get("LOCAL_MODE") or "auto"
    problem = MODE_OPTION.validator(mode, None)
    if problem:
        raise SiteError(f"site local: option mode={mode!r} (from {origin}): {problem}")
    if mode != "auto":
        return mode, f"{'LOCAL_MODE=' if origin == 'LOCAL_MODE' else 'mode='}{mode}"
    has = host_has_qdiscs(release, modules_root)
    if has:
        return "host", f"the running kernel lists {', '.join(HOST_QDISC_MODULES)}"
    why = "the running kernel ships no module lists" if has is None else "the running kernel lacks some of " + ", ".join(HOST_QDISC_MODULES)
    return "vm", why + f"; the site will run in the QEMU micro-VM ({VM_OVER_UML})"


def mode_executables(mode: str) -> dict[str, str]:
    """Executable -> Debian package of everything the local site runs in ``mode`` (host|uml|vm)."""
    want = dict(LOCAL_EXECUTABLES)
    want.update({"uml": UML_EXECUTABLES, "vm": VM_EXECUTABLES}.get(mode, {}))
    return want


def missing_executables(mode: str) -> dict[str, str]:
    """Executable -> Debian package for each executable of ``mode`` (host|uml|vm) that is not found."""
    return {exe: pkg for exe, pkg in mode_executables(mode).items() if not which(exe)}


def missing_packages(mode: str) -> list[str]:
    """Debian packages providing the executables of ``mode`` that are missing (sorted)."""
    return sorted(set(missing_executables(mode).values()))


def setup_local(mode: str | None, origin: str, check_only: bool = False, log=print) -> int:
    """Make this machine ready for the local site in ``mode`` (None: LOCAL_MODE, else auto; named
    as coming from ``origin``, ``--option`` or ``LOCAL_MODE``), or with ``check_only`` say what
    it lacks and change nothing: every executable of the mode (:func:`mode_executables`,
    apt-get as root) and, in the micro-VM mode, its kernel (cached). Returns 0 ready, 1 something
    missing (check only, or not root). Raises RuntimeError when apt-get fails, MicroVMError when
    the kernel cannot be fetched, SiteError when the mode is not one of the site's."""
    from netrepro.sites.local import microvm

    mode, why = local_mode(mode, origin=origin)
    vm = mode == "vm"
    label = {"host": "host", "uml": "User-Mode Linux (uml)", "vm": "micro-VM (vm)"}[mode]
    log(f"[setup] local site, {label} mode: {why}")
    missing = missing_executables(mode)
    if missing:
        pkgs = sorted(set(missing.values()))
        names = ", ".join(f"{exe} ({pkg})" for exe, pkg in sorted(missing.items()))
        if check_only or os.geteuid() != 0:
            log(f"[setup] missing: {names}; install as root: apt-get install {' '.join(pkgs)}")
            return 1
        log(f"[setup] installing {' '.join(pkgs)} (for {names})")
        apt_install(pkgs)
        still = missing_executables(mode)
        if still:
            raise RuntimeError(f"after apt-get install, still missing: {', '.join(sorted(still))}")
    else:
        log(f"[setup] all {len(mode_executables(mode))} executables present")
    if vm:
        k = microvm.cached_kernel()
        if k:
            log(f"[setup] micro-VM kernel {k.release} cached in {k.root}")
        elif check_only:
            log(f"[setup] missing: the micro-VM kernel (not cached in {microvm.CACHE_DIR}); run `make setup`")
            return 1
        else:
            k = microvm.fetch_kernel(log)
            log(f"[setup] micro-VM kernel {k.release} cached in {k.root}")
    return 0
