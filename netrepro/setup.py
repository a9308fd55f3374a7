"""``netrepro setup``: install what a site needs on this machine (idempotent).

For the local site, every executable the site's code, its generated scripts and the roles'
node scripts run is listed in :data:`LOCAL_EXECUTABLES` (and :data:`UML_EXECUTABLES` for the
User-Mode Linux mode, :data:`VM_EXECUTABLES` for the micro-VM mode) with the Debian package
that provides it. ``setup`` installs the packages of what is missing (apt-get, as root) and,
when the micro-VM is needed, caches its kernel. ``setup --check`` verifies each executable
and the kernel cache, names what is missing, and changes nothing: it creates no namespace,
file or process.

Which mode is needed (:func:`local_mode`) follows
:meth:`netrepro.sites.local.site.LocalSite.choose_mode`, decided without touching the system:
from ``LOCAL_MODE``, else from the running kernel's module lists (:func:`host_has_qdiscs`).
"""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

#: Executable -> Debian package, for every mode of the local site. Audited from
#: netrepro/sites/{local,netns,microvm,uml,capacity}.py, netrepro/runner/*.py, the generated
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
#: What fablib needs to build (requirements-fabric.txt, also in requirements-dev.txt: fablib
#: pulls in recordclass, which PyPI has only as source for CPython 3.11): a C compiler and the
#: headers. ``setup --site fabric`` and ``setup --dev`` install them.
DEV_FILES = {"gcc": "gcc", f"/usr/include/python3.{sys.version_info.minor}/Python.h": f"python3.{sys.version_info.minor}-dev"}
#: What the tests need besides: sudo, with which the FABRIC stand-in's nodes (tests/testbed)
#: let their non-root login user (``ubuntu``, as on FABRIC's images) escalate.
TEST_FILES = {"sudo": "sudo"}
#: The fabric site's Python packages (fablib, pinned), installed by ``setup --site fabric``
#: into the interpreter running netrepro (the virtual environment under make).
FABRIC_REQUIREMENTS = "requirements-fabric.txt"
#: The module fablib installs: present means the fabric site's packages are.
FABRIC_MODULE = "fabrictestbed_extensions"
#: Kernel modules (qdiscs) the local site needs in host mode for pie-vs-red (`up` probes each experiment's own, netrepro.sites.local.site.needed_qdisc_probes).
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


def local_mode(mode: str | None = None, *, tun: Path | None = None, release: str | None = None,
               modules_root: Path = Path("/lib/modules"), origin: str = "LOCAL_MODE") -> tuple[str, str]:
    """The mode the local site will run in here (``host``, ``uml`` or ``vm``), and why.

    ``mode`` is LOCAL_MODE (auto|host|uml|vm; default: the environment's, else auto), or the
    site option ``mode`` when ``origin`` says so (``--option``: errors and reasons name it). As
    :meth:`netrepro.sites.local.site.LocalSite.choose_mode` decides once setup has run: ``auto`` is
    ``host`` when the running kernel's module lists show every qdisc (``release`` and
    ``modules_root`` as :func:`host_has_qdiscs`'s; ``up`` probes for real later); else ``vm``
    (the QEMU micro-VM: its two vCPUs kept the nodes' CPU below UML's single one, see
    :data:`netrepro.sites.local.site.VM_OVER_UML`). ``tun`` is unused by ``auto`` and kept for
    callers checking UML's tap (:data:`netrepro.sites.local.uml.TUN_DEVICE`). Reads files only.

    Raises SiteError, worded as the site's own option check, when ``mode`` is not one of the
    local site's modes (``LocalSite.OPTIONS["mode"]``).
    """
    from netrepro.sites.local import uml
    from netrepro.sites.base import SiteError
    from netrepro.sites.local.site import LocalSite

    tun = tun or uml.TUN_DEVICE
    mode = mode or os.environ.get("LOCAL_MODE") or "auto"
    problem = LocalSite.OPTIONS["mode"].check(mode, None)
    if problem:
        raise SiteError(f"site local: option mode={mode!r} (from {origin}): {problem}")
    if mode != "auto":
        return mode, f"{'LOCAL_MODE=' if origin == 'LOCAL_MODE' else 'mode='}{mode}"
    has = host_has_qdiscs(release, modules_root)
    if has:
        return "host", f"the running kernel lists {', '.join(HOST_QDISC_MODULES)}"
    why = "the running kernel ships no module lists" if has is None else "the running kernel lacks some of " + ", ".join(HOST_QDISC_MODULES)
    from netrepro.sites.local.site import VM_OVER_UML
    return "vm", why + f"; the site will run in the QEMU micro-VM ({VM_OVER_UML})"


def mode_executables(mode: str) -> dict[str, str]:
    """Executable -> Debian package of everything the local site runs in ``mode`` (host|uml|vm)."""
    want = dict(LOCAL_EXECUTABLES)
    want.update({"uml": UML_EXECUTABLES, "vm": VM_EXECUTABLES}.get(mode, {}))
    return want


def missing_executables(mode: str) -> dict[str, str]:
    """Executable -> Debian package for each executable of ``mode`` (host|uml|vm) that is not found."""
    return {exe: pkg for exe, pkg in mode_executables(mode).items() if not _which(exe)}


def missing_packages(mode: str) -> list[str]:
    """Debian packages providing the executables of ``mode`` that are missing (sorted)."""
    return sorted(set(missing_executables(mode).values()))


def apt_install(packages: list[str]) -> None:
    """apt-get update + install ``packages`` non-interactively. Raises RuntimeError on failure."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update", "-qq"],
                 ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]):
        r = subprocess.run(argv, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:3])} failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")


def _have(path_or_exe: str) -> bool:
    """An executable on PATH (or the sbin folders), or a file that exists (a header)."""
    return _which(path_or_exe) or os.path.exists(path_or_exe)


def _build_tools(check_only: bool, log, what: str, needs: dict[str, str] | None = None) -> int:
    """Install the files of ``needs`` (file or executable -> Debian package; default
    :data:`DEV_FILES`, the C compiler and Python headers) that are missing (apt-get, as root),
    for ``what``; exit code as :func:`setup` (1: missing and check only, or not root; the line
    says what to install)."""
    needs = needs or DEV_FILES
    missing = {f: pkg for f, pkg in needs.items() if not _have(f)}
    if not missing:
        log(f"[setup] present for {what}: {', '.join(sorted(Path(f).name for f in needs))}")
        return 0
    pkgs = sorted(set(missing.values()))
    if check_only or os.geteuid() != 0:
        log(f"[setup] missing for {what}: {', '.join(sorted(missing))}; install as root: apt-get install {' '.join(pkgs)}")
        return 1
    log(f"[setup] installing {' '.join(pkgs)} (for {what})")
    apt_install(pkgs)
    return 0


def setup_dev(check_only: bool = False, log=print) -> int:
    """Install what the tests need from Debian: the build tools of their Python packages
    (:data:`DEV_FILES`) and :data:`TEST_FILES`; exit code as setup."""
    return _build_tools(check_only, log, "the tests", {**DEV_FILES, **TEST_FILES})


def setup_fabric(check_only: bool = False, log=print) -> int:
    """The fabric site: fablib (:data:`FABRIC_REQUIREMENTS`, pip, into this interpreter's
    environment) and, first, what it needs to build (:data:`DEV_FILES`: gcc and the Python
    headers, apt-get as root). Exit code as :func:`setup`: 0 ready, 1 something missing
    (check only, or not root for the build tools). Raises RuntimeError when pip fails."""
    import importlib.util

    from netrepro.spec import REPO_ROOT

    if importlib.util.find_spec(FABRIC_MODULE) is not None:
        log(f"[setup] fabric site: fablib ({FABRIC_MODULE}) installed")
        return 0
    req = REPO_ROOT / FABRIC_REQUIREMENTS
    if check_only:
        _build_tools(True, log, "fablib")
        log(f"[setup] fabric site: missing fablib ({FABRIC_MODULE}); run `make setup SITE=fabric` "
            f"(pip install -r {FABRIC_REQUIREMENTS})")
        return 1
    if _build_tools(False, log, "fablib"):
        return 1
    log(f"[setup] installing fablib ({FABRIC_REQUIREMENTS}, pip)")
    r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-r", str(req)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"pip install -r {FABRIC_REQUIREMENTS} failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
    log("[setup] fabric site: fablib installed")
    return 0


def setup_ns3(check_only: bool = False, log=print) -> int:
    """The ns3 site: g++ (Debian package g++), the C++ libraries of the pinned PyPI ns3 wheel
    (netrepro.sites.ns3.site.NS3_WHEEL, ``pip install --no-deps``: its Python bindings are not
    used) and netrepro-sim built against them; exit code as :func:`setup`."""
    from netrepro.sites.ns3 import site as ns3
    missing = []
    if not _which("g++"):
        missing.append("g++")
    have = (ns3.ns3_dir() / "include" / "ns3" / "core-module.h").is_file()
    if check_only:
        if not have:
            missing.append(f"{ns3.NS3_WHEEL} (pip)")
        if not ns3.simulator_path().is_file():
            missing.append("netrepro-sim (built by make setup SITE=ns3)")
        log(f"[setup] ns3 site: missing {', '.join(missing)}" if missing else "[setup] ns3 site: ready")
        return 1 if missing else 0
    if missing:
        if os.geteuid() != 0:
            log("[setup] ns3 site: missing g++; install as root: apt-get install g++")
            return 1
        log("[setup] installing g++ (to build netrepro-sim against ns-3)")
        apt_install(["g++"])
    if not have:
        log(f"[setup] installing {ns3.NS3_WHEEL} (the C++ libraries of ns-3 {ns3.NS3_VERSION}, about 70 MB)")
        r = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", ns3.NS3_WHEEL],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"pip install {ns3.NS3_WHEEL} failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")
    path = ns3.build(log)
    log(f"[setup] ns3 site: netrepro-sim ready ({path})")
    return 0


def setup(site: str = "local", check_only: bool = False, log=print, dev: bool = False,
          mode: str | None = None, mode_origin: str = "--option") -> int:
    """Make this machine ready for ``site`` (or, with ``check_only``, say what it lacks).

    ``dev``: only the build tools of the tests' packages (:func:`setup_dev`), nothing else.
    ``mode``: the local site's mode (its option ``mode``, from ``mode_origin``; default
    LOCAL_MODE, else auto).
    The fabric site: :func:`setup_fabric`; ns3: :func:`setup_ns3`; instageni and static need
    nothing beyond the run-time Python packages.
    Returns a process exit code: 0 ready, 1 something is missing (check only, or not root).
    Raises RuntimeError when apt-get or pip fails, MicroVMError when the kernel cannot be
    fetched and SiteError when the mode is not one of the local site's.
    """
    if dev:
        return setup_dev(check_only, log)
    if site == "ns3":
        return setup_ns3(check_only, log)
    if site == "fabric":
        return setup_fabric(check_only, log)
    if site != "local":
        log(f"[setup] site {site}: nothing to install on this machine beyond the Python packages")
        return 0
    from netrepro.sites.local import microvm

    mode, why = local_mode(mode, origin=mode_origin if mode else "LOCAL_MODE")
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
