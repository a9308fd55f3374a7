"""The local site's User-Mode Linux machine: Debian's ``user-mode-linux`` kernel as a process.

Used, like the QEMU micro-VM (:mod:`netrepro.sites.local.microvm`), when the host kernel cannot run
the experiment's qdiscs. UML runs a Linux kernel (Debian 12's ``user-mode-linux`` package,
6.1um, binary ``/usr/bin/linux.uml``) as an ordinary process: no CPU emulation, so it boots in
about 2 s and forwards about 4.5x more than QEMU's software emulation on these machines, but
has one CPU (docs/local-modes.md has the measurements).

- Root file system: the host's own, read-only (``rootfstype=hostfs ro``); /etc and /var are
  overlays whose upper layer is a tmpfs, /run and /tmp are tmpfs, so nothing the guest does
  reaches the host's files, except the run's state folder, mounted read-write through hostfs
  at the same path (keys, configuration, the guest's log and ready file).
- Modules: the package's tree (``/usr/lib/uml/modules/<release>``) is bound under a private
  root and the kernel's modprobe helper pointed at a wrapper using it (``modprobe -d``).
- Network: one tap device on the host (``vec0:transport=tap``, the UML vector driver),
  joined inside the guest to the site's management bridge. The host's end holds an address
  of the management subnet, so the controller reaches every node's sshd directly (no jump
  host, as in the host mode).
- Teardown: everything the site built lives in the guest's memory; killing the UML process
  group and deleting the tap removes it all.
"""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

from netrepro.sites.local.microvm import SOFTIRQ_REALTIME

UML_BINARY = "linux.uml"
MODULES_ROOT = Path("/usr/lib/uml/modules")
#: The host's tun/tap device (tun(4)): the management network's tap is made through it.
TUN_DEVICE = Path("/dev/net/tun")
#: Modules loaded before the site is built (the qdiscs and links the experiments use).
GUEST_MODULES = ["overlay", "veth", "bridge", "dummy", "sch_htb", "sch_netem", "sch_pie", "sch_red", "sch_tbf",
                 "sch_codel", "sch_fq_codel", "sch_fq", "sch_cake", "sch_ingress", "tcp_bbr"]


def binary() -> str | None:
    """Path of the UML kernel binary, None when ``user-mode-linux`` is not installed."""
    return shutil.which(UML_BINARY) or (f"/usr/bin/{UML_BINARY}" if Path(f"/usr/bin/{UML_BINARY}").exists() else None)


def modules_dir() -> Path | None:
    """The newest module tree the package ships (``/usr/lib/uml/modules/<release>``), or None."""
    found = sorted(p for p in MODULES_ROOT.glob("*") if (p / "modules.dep").exists()) if MODULES_ROOT.is_dir() else []
    return found[-1] if found else None


def available() -> tuple[bool, str]:
    """Whether this machine can run the UML mode, and why not (the package to install)."""
    if not binary():
        return False, f"{UML_BINARY} not found (Debian package user-mode-linux)"
    if not modules_dir():
        return False, f"no module tree under {MODULES_ROOT} (Debian package user-mode-linux)"
    if not TUN_DEVICE.exists():
        return False, f"{TUN_DEVICE} is missing (the tap device of the management network)"
    return True, f"{binary()} with modules {modules_dir().name}"


#: What a UML kernel prints when it cannot run on the host's CPU, and why, as a SiteError says
#: it: Debian 12's UML (6.1) panics at once with "ptrace set fp regs failed, errno = 14" on
#: hosts whose XSAVE area is larger than it expects (seen on an Intel Xeon with AVX-512,
#: 2026-11-26; the AMD EPYC machines of this kind before booted it).
CPU_REFUSALS = {
    "ptrace set fp regs failed": "Debian's UML kernel cannot run on this CPU (ptrace could not set its floating-point "
                                 "registers: the host's XSAVE area, e.g. with AVX-512, is larger than the UML kernel "
                                 "expects); use LOCAL_MODE=vm, the micro-VM",
}


def boot_refusal(console: str) -> str | None:
    """Why a UML machine could not boot on this host, from its console output (the reason of
    :data:`CPU_REFUSALS` whose signature it holds), or None when it does not say."""
    return next((why for sign, why in CPU_REFUSALS.items() if sign in console), None)


def tap_name(site_id: str) -> str:
    """Host tap device of a site: ``nrt-<id>`` (at most 15 characters, IFNAMSIZ)."""
    return f"nrt-{site_id}"[:15]


def uml_command(*, binary_path: str, memory: str, guest_init: Path, tap: str) -> list[str]:
    """argv booting UML with the host's root read-only over hostfs and ``guest_init`` as init.

    ``memory``: a size such as ``2G`` (UML's ``mem=``). The console goes to stdout
    (``con0=null,fd:1``, every other console off); stdin must not be a terminal.
    """
    return [binary_path, f"mem={memory}", "rootfstype=hostfs", "ro", f"init={guest_init}",
            "con=null", "con0=null,fd:1", f"vec0:transport=tap,ifname={tap}", "quiet"]


def guest_init_script(*, state_dir: Path, runtime_dir: str, build_script: Path, mgmt_bridge: str,
                      modules: Path, capacity_script: Path | None = None) -> str:
    """The guest's init (PID 1): mounts, modules, build the site, join the tap to the
    management bridge, say ready, then idle until the site is killed.

    Writes ``<state_dir>/vm-guest.log`` and ``<state_dir>/vm-ready`` ("ready" or "failed").
    ``capacity_script``, if given, runs before the build (the substrate's forwarding test,
    :mod:`netrepro.sites.local.capacity`); its failure is logged and does not stop the build.
    """
    q = shlex.quote
    sd = q(str(state_dir))
    mods = " ".join(GUEST_MODULES)
    rel = modules.name
    cap = f"sh {q(str(capacity_script))} || echo 'guest: capacity test failed'\n" if capacity_script else ""
    return f"""#!/bin/sh
# Init of the netrepro local site's User-Mode Linux machine; generated by netrepro.
mount -t proc proc /proc; mount -t sysfs sys /sys; mount -t devtmpfs dev /dev 2>/dev/null
mount -t tmpfs -o mode=0755 run /run; mount -t tmpfs -o mode=1777 tmp /tmp
mkdir -p /dev/pts /dev/shm; mount -t devpts devpts /dev/pts; mount -t tmpfs shm /dev/shm
# What udev would add: bash's process substitution opens /dev/fd/N.
ln -sf /proc/self/fd /dev/fd; ln -sf /proc/self/fd/0 /dev/stdin; ln -sf /proc/self/fd/1 /dev/stdout; ln -sf /proc/self/fd/2 /dev/stderr
# The state folder may lie under /tmp or /run, now the guest's tmpfs: its mount point made there.
mkdir -p {sd}; mount -t hostfs -o {sd} state {sd}
exec >> {sd}/vm-guest.log 2>&1 < /dev/null
set -u
echo "guest: booted $(uname -r) at $(date +%s.%N)"
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
mkdir -p /run/nr-modules/lib/modules/{rel}
mount --bind {q(str(modules))} /run/nr-modules/lib/modules/{rel}
printf '#!/bin/sh\\nexec /sbin/modprobe -d /run/nr-modules "$@"\\n' > /run/nr-modprobe
chmod 755 /run/nr-modprobe
echo /run/nr-modprobe > /proc/sys/kernel/modprobe
for m in {mods}; do /run/nr-modprobe "$m" || echo "guest: modprobe $m failed"; done
{SOFTIRQ_REALTIME}for d in etc var; do
  mkdir -p /run/nr-overlay/$d/upper /run/nr-overlay/$d/work
  mount -t overlay -o lowerdir=/$d,upperdir=/run/nr-overlay/$d/upper,workdir=/run/nr-overlay/$d/work overlay /$d
done
mkdir -p {q(runtime_dir)}/home /run/sshd
rm -f /run/nologin
sed -i 's#^root:\\([^:]*\\):0:0:\\([^:]*\\):[^:]*:[^:]*$#root:\\1:0:0:\\2:{runtime_dir}/home:/bin/sh#' /etc/passwd
ip link set lo up
{cap}if sh {q(str(build_script))}; then
  ip link set vec0 master {q(mgmt_bridge)} && ip link set vec0 up
  echo "guest: site built at $(date +%s.%N)"
  echo ready > {sd}/vm-ready
else
  echo "guest: build failed"
  echo failed > {sd}/vm-ready
fi
# Init must not exit (the kernel would panic): idle until `netrepro down` kills the machine.
while :; do sleep 3600; done
"""
