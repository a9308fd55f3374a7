"""``netrepro setup``: install what a site needs on this machine (idempotent).

For the local site: Debian packages (OpenSSH server, vsftpd, ping, iproute2, ethtool, kmod,
curl, and QEMU when the micro-VM is needed) and, when the host kernel lacks the qdiscs, the
micro-VM's kernel in the cache. Installs with apt-get when running as root; otherwise prints
the missing packages and exits non-zero.
"""

from __future__ import annotations

import os
import subprocess

#: Debian package -> a file it provides (to check without dpkg for each one).
LOCAL_PACKAGES = {
    "openssh-server": "/usr/sbin/sshd", "openssh-client": "/usr/bin/ssh", "vsftpd": "/usr/sbin/vsftpd",
    "iputils-ping": "/usr/bin/ping", "iproute2": "/usr/sbin/tc", "ethtool": "/usr/sbin/ethtool",
    "kmod": "/usr/sbin/depmod", "curl": "/usr/bin/curl",
}
VM_PACKAGES = {"qemu-system-x86": "/usr/bin/qemu-system-x86_64"}


def missing_packages(needs_vm: bool) -> list[str]:
    """Debian packages of the local site whose files are absent."""
    want = dict(LOCAL_PACKAGES)
    if needs_vm:
        want.update(VM_PACKAGES)
    return sorted(p for p, f in want.items() if not os.path.exists(f))


def apt_install(packages: list[str]) -> None:
    """apt-get update + install ``packages`` non-interactively. Raises RuntimeError on failure."""
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    for argv in (["apt-get", "update", "-qq"],
                 ["apt-get", "install", "-y", "-qq", "--no-install-recommends", *packages]):
        r = subprocess.run(argv, env=env, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:3])} failed: {(r.stderr or r.stdout).strip().splitlines()[-1:]}")


def setup(site: str = "local", check_only: bool = False, log=print) -> int:
    """Make this machine ready for ``site``; returns a process exit code."""
    if site != "local":
        log(f"[setup] site {site}: nothing to install on this machine beyond the Python packages")
        return 0
    from netrepro.sites import microvm
    from netrepro.sites.local import probe_host_qdiscs

    is_root = os.geteuid() == 0
    probe = probe_host_qdiscs() if is_root else {}
    needs_vm = not probe or not all(probe.values())
    missing = missing_packages(needs_vm)
    if missing:
        if check_only or not is_root:
            log(f"[setup] missing Debian packages: {' '.join(missing)}; install them as root: "
                f"apt-get install {' '.join(missing)}")
            return 1
        log(f"[setup] installing {' '.join(missing)}")
        apt_install(missing)
    else:
        log("[setup] Debian packages present")
    if needs_vm:
        k = microvm.cached_kernel()
        if k:
            log(f"[setup] micro-VM kernel {k.release} cached in {k.root}")
        elif check_only:
            log("[setup] the micro-VM kernel is not cached yet")
            return 1
        else:
            k = microvm.fetch_kernel(log)
            log(f"[setup] micro-VM kernel {k.release} cached in {k.root}")
    return 0
