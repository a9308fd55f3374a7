"""``netrepro setup``: install what a site needs on this machine (idempotent).

For the local site, every executable the site's code, its generated scripts and the roles'
node scripts run is listed in :data:`LOCAL_EXECUTABLES` (and :data:`VM_EXECUTABLES` for the
micro-VM mode) with the Debian package that provides it. ``setup`` installs the packages of
what is missing (apt-get, as root) and, when the micro-VM is needed, caches its kernel.
``setup --check`` verifies each executable and the kernel cache, names what is missing, and
changes nothing: it creates no namespace, file or process.

Which mode is needed is decided without touching the system (:func:`host_has_qdiscs`): from
the running kernel's module lists, or from ``LOCAL_MODE``.
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

#: Executable -> Debian package, for both modes of the local site. Audited from
#: netrepro/sites/{local,netns,microvm}.py, netrepro/controller.py, the generated build and
#: teardown scripts and roles/*/files/*.sh (names as called there).
LOCAL_EXECUTABLES = {
    "ip": "iproute2", "tc": "iproute2", "ss": "iproute2", "bridge": "iproute2",
    "ssh": "openssh-client", "ssh-keygen": "openssh-client",
    "/usr/sbin/sshd": "openssh-server", "/usr/sbin/vsftpd": "vsftpd",
    "ping": "iputils-ping", "ethtool": "ethtool", "curl": "curl",
    "sysctl": "procps", "pkill": "procps", "pgrep": "procps",
    "modprobe": "kmod", "depmod": "kmod",
    "python3": "python3", "git": "git", "tar": "tar", "gzip": "gzip",
}
#: Executable -> Debian package, only when the site runs in the micro-VM. virtme-ng builds
#: its initramfs with busybox and calls file(1) on the kernel; the kernel package is fetched
#: with apt-get download and unpacked with dpkg -x (netrepro.sites.microvm).
VM_EXECUTABLES = {
    "qemu-system-x86_64": "qemu-system-x86", "busybox": "busybox-static", "file": "file",
    "apt-get": "apt", "apt-cache": "apt", "dpkg": "dpkg",
}
#: What the tests' Python packages need to build (requirements-dev.txt: fablib pulls in
#: recordclass, which PyPI has only as source for CPython 3.11): a C compiler and the headers.
DEV_FILES = {"gcc": "gcc", f"/usr/include/python3.{sys.version_info.minor}/Python.h": f"python3.{sys.version_info.minor}-dev"}
#: Kernel modules (qdiscs) the local site needs in host mode (netrepro.sites.local.PROBE_QDISCS).
HOST_QDISC_MODULES = ("sch_netem", "sch_htb", "sch_pie", "sch_red")


def _which(exe: str) -> bool:
    if exe.startswith("/"):
        return os.access(exe, os.X_OK)
    # sbin folders too: a non-root PATH may lack them.
    path = os.environ.get("PATH", "") + ":/usr/local/sbin:/usr/sbin:/sbin"
    return shutil.which(exe, path=path) is not None


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


def needs_vm(mode: str | None = None) -> tuple[bool, str]:
    """Whether the local site will need the micro-VM here, and why.

    ``mode`` is LOCAL_MODE (auto|host|vm; default auto). In auto mode the micro-VM is needed
    unless the running kernel's module lists show every qdisc (``up`` probes for real later).
    """
    mode = mode or os.environ.get("LOCAL_MODE") or "auto"
    if mode == "host":
        return False, "LOCAL_MODE=host"
    if mode == "vm":
        return True, "LOCAL_MODE=vm"
    has = host_has_qdiscs()
    if has:
        return False, f"the running kernel lists {', '.join(HOST_QDISC_MODULES)}"
    why = "the running kernel ships no module lists" if has is None else "the running kernel lacks some of " + ", ".join(HOST_QDISC_MODULES)
    return True, why + "; the site will run in the micro-VM"


def missing_executables(vm: bool) -> dict[str, str]:
    """Executable -> Debian package for each executable of the mode that is not found."""
    want = dict(LOCAL_EXECUTABLES)
    if vm:
        want.update(VM_EXECUTABLES)
    return {exe: pkg for exe, pkg in want.items() if not _which(exe)}


def missing_packages(needs_vm: bool) -> list[str]:
    """Debian packages providing the executables of the mode that are missing (sorted)."""
    return sorted(set(missing_executables(needs_vm).values()))


def apt_install(packages: list[str]) -> None:
    """apt-get update + install ``packages`` non-interactively. Raises RuntimeError on failure."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update", "-qq"],
                 ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]):
        r = subprocess.run(argv, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:3])} failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")


def setup_dev(check_only: bool = False, log=print) -> int:
    """Install what building the tests' Python packages needs (DEV_FILES); exit code as setup."""
    missing = {f: pkg for f, pkg in DEV_FILES.items() if not _which(f) and not os.path.exists(f)}
    if not missing:
        log("[setup] build tools for the tests' packages present")
        return 0
    pkgs = sorted(set(missing.values()))
    if check_only or os.geteuid() != 0:
        log(f"[setup] missing for the tests' packages: {', '.join(sorted(missing))}; install as root: apt-get install {' '.join(pkgs)}")
        return 1
    log(f"[setup] installing {' '.join(pkgs)} (to build the tests' Python packages)")
    apt_install(pkgs)
    return 0


def setup(site: str = "local", check_only: bool = False, log=print, dev: bool = False) -> int:
    """Make this machine ready for ``site`` (or, with ``check_only``, say what it lacks).

    ``dev``: only the build tools of the tests' packages (:func:`setup_dev`), nothing else.
    Returns a process exit code: 0 ready, 1 something is missing (check only, or not root).
    Raises RuntimeError when apt-get fails and MicroVMError when the kernel cannot be fetched.
    """
    if dev:
        return setup_dev(check_only, log)
    if site != "local":
        log(f"[setup] site {site}: nothing to install on this machine beyond the Python packages")
        return 0
    from netrepro.sites import microvm

    vm, why = needs_vm()
    log(f"[setup] local site, {'micro-VM' if vm else 'host'} mode: {why}")
    missing = missing_executables(vm)
    if missing:
        pkgs = sorted(set(missing.values()))
        names = ", ".join(f"{exe} ({pkg})" for exe, pkg in sorted(missing.items()))
        if check_only or os.geteuid() != 0:
            log(f"[setup] missing: {names}; install as root: apt-get install {' '.join(pkgs)}")
            return 1
        log(f"[setup] installing {' '.join(pkgs)} (for {names})")
        apt_install(pkgs)
        still = missing_executables(vm)
        if still:
            raise RuntimeError(f"after apt-get install, still missing: {', '.join(sorted(still))}")
    else:
        log(f"[setup] all {len(LOCAL_EXECUTABLES) + (len(VM_EXECUTABLES) if vm else 0)} executables present")
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
