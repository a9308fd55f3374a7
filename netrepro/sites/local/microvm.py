"""The local site's micro-VM: a stock Debian kernel booted by virtme-ng under QEMU.

Used when the host kernel cannot run the experiment's qdiscs (netem, pie, red). The kernel
package is downloaded once into a cache with ``apt-get download`` and unpacked with
``dpkg -x`` (never installed as the host's kernel); virtme-ng links its modules into the
guest (``virtme_link_mods``). The guest sees the host's filesystem read-only over 9p, with
the run's state folder written through (``--rwdir``).

The controller (Ansible) stays on the host and reaches the nodes through one forwarded SSH
port: QEMU user networking forwards ``127.0.0.1:<port>`` to the guest's sshd, the jump host
for every node, as FABRIC's bastion is for its VMs.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path

CACHE_DIR = Path(os.environ.get("NETREPRO_CACHE", Path.home() / ".cache" / "netrepro")) / "kernel"
#: Debian's meta package whose dependency names the current stock kernel image.
KERNEL_META = "linux-image-amd64"
#: qdisc modules the experiments need; loaded in the guest before the site is built.
GUEST_MODULES = ["virtio_net", "veth", "bridge", "dummy", "sch_htb", "sch_netem", "sch_pie", "sch_red",
                 "sch_tbf", "sch_codel", "sch_fq_codel", "sch_fq", "sch_cake"]
#: QEMU user-mode networking's fixed guest address and gateway (qemu-doc, "Network options").
SLIRP_GUEST = "10.0.2.15"
SLIRP_GATEWAY = "10.0.2.2"
#: Shell lines run by both emulated guests (micro-VM and UML) before the build: the kernel's
#: softirq threads get the real-time class (chrt(1), sched(7): SCHED_FIFO 50 preempts every
#: SCHED_OTHER process). All nodes share the guest's CPUs, so without this the processes
#: forked when 20 flows start (vsftpd sessions, FTP clients) starved ``ksoftirqd``, which
#: carries packet forwarding, netem's releases and the qdisc's dequeues once a softirq runs
#: past its 2 ms budget: in a full run's PIE trial, pings waited ~290 ms at a phase start
#: while PIE held 35 ms of backlog, and replies came back out of order. On a testbed each
#: node has CPUs of its own; this keeps one node's process creation off another's packets.
SOFTIRQ_REALTIME = ("for p in $(pgrep -x 'ksoftirqd/[0-9]*'); do chrt -f -p 50 \"$p\" || "
                    "echo \"guest: chrt ksoftirqd $p failed\"; done\n"
                    "echo \"guest: ksoftirqd real-time: $(pgrep -c -x 'ksoftirqd/[0-9]*') threads\"\n")


class MicroVMError(RuntimeError):
    """The micro-VM cannot be prepared or started; the message says what to install or do."""


@dataclass(frozen=True)
class Kernel:
    """An unpacked kernel in the cache: ``vmlinuz`` path, ``release`` (uname -r), ``root``."""

    vmlinuz: Path
    release: str
    root: Path


def kvm_usable() -> tuple[bool, str]:
    """Whether QEMU can use KVM here, and why. Decided from the CPU flags, not /dev/kvm alone:
    on these machines /dev/kvm exists but the CPU has no vmx/svm flag and KVM aborts."""
    try:
        flags = Path("/proc/cpuinfo").read_text()
    except OSError:
        return False, "cannot read /proc/cpuinfo"
    if not re.search(r"^flags\s*:.*\b(vmx|svm)\b", flags, re.M):
        return False, "the CPU has no vmx/svm flag (nested virtualization is off); using QEMU software emulation (TCG)"
    if not os.access("/dev/kvm", os.R_OK | os.W_OK):
        return False, "/dev/kvm is missing or not accessible; using QEMU software emulation (TCG)"
    return True, "vmx/svm present and /dev/kvm accessible; using KVM"


def cached_kernel() -> Kernel | None:
    """The newest kernel unpacked in the cache, or None."""
    found = sorted(CACHE_DIR.glob("*/boot/vmlinuz-*"))
    if not found:
        return None
    vmlinuz = found[-1]
    release = vmlinuz.name.removeprefix("vmlinuz-")
    return Kernel(vmlinuz=vmlinuz, release=release, root=vmlinuz.parent.parent)


def current_kernel_package() -> str:
    """Name of the stock kernel image package (``linux-image-6.1.0-NN-amd64``), from apt."""
    out = subprocess.run(["apt-cache", "depends", KERNEL_META], capture_output=True, text=True)
    m = re.search(r"Depends:\s*(linux-image-\S+)", out.stdout)
    if out.returncode != 0 or not m:
        raise MicroVMError(f"apt-cache depends {KERNEL_META} found no kernel package; run `apt-get update` first")
    return m.group(1)


def fetch_kernel(log=print) -> Kernel:
    """Download and unpack the stock Debian kernel into the cache (once); return it.

    Raises MicroVMError when apt-get/dpkg fail.
    """
    k = cached_kernel()
    if k:
        return k
    pkg = current_kernel_package()
    dest = CACHE_DIR / pkg
    tmp = CACHE_DIR / (pkg + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    log(f"[setup] downloading {pkg} into {CACHE_DIR} (apt-get download + dpkg -x; not installed as the host kernel)")
    r = subprocess.run(["apt-get", "download", pkg], cwd=tmp, capture_output=True, text=True)
    debs = list(tmp.glob("*.deb"))
    if r.returncode != 0 or not debs:
        raise MicroVMError(f"apt-get download {pkg} failed: {r.stderr.strip().splitlines()[-1:] or r.stdout}")
    root = tmp / "root"
    subprocess.run(["dpkg", "-x", str(debs[0]), str(root)], check=True)
    rel = next((root / "lib" / "modules").iterdir()).name
    subprocess.run(["depmod", "-b", str(root), rel], check=True)
    debs[0].unlink()
    shutil.rmtree(dest, ignore_errors=True)
    os.replace(root, dest)
    shutil.rmtree(tmp, ignore_errors=True)
    return cached_kernel()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (the kernel picks it)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def vng_command(kernel: Kernel, *, ssh_port: int, rwdir: Path, guest_cmd: str, cpus: int = 2,
                memory: str = "2G", use_kvm: bool = False) -> list[str]:
    """argv of ``vng`` booting ``kernel`` and running ``guest_cmd`` (a shell command line).

    A second NIC with QEMU user networking forwards ``127.0.0.1:ssh_port`` to the guest's
    port 22 (``hostfwd``); IPv6 is off on it. ``--disable-kvm`` unless ``use_kvm``.
    """
    vng = shutil.which("vng") or str(Path(os.sys.executable).parent / "vng")
    argv = [vng, "--run", str(kernel.vmlinuz), "--cpus", str(cpus), "--memory", memory,
            "--rwdir", str(rwdir),
            # One argv word with "=": the value starts with "-", which argparse would reject.
            f"--qemu-opts=-netdev user,id=nrmgmt,ipv6=off,hostfwd=tcp:127.0.0.1:{ssh_port}-:22 "
            "-device virtio-net-pci,netdev=nrmgmt"]
    if not use_kvm:
        argv.append("--disable-kvm")
    return argv + ["--", guest_cmd]


def guest_main_script(*, state_dir: Path, runtime_dir: str, build_script: Path, teardown_script: Path,
                      jump_sshd_config: Path, capacity_script: Path | None = None) -> str:
    """The script the guest runs: load modules, network for the jump host, build the site,
    start the jump sshd, say ready, then sleep until ``down`` stops the VM (SIGTERM to its
    process group: the nodes live in the guest's memory and go with it, as in UML mode). A
    build that fails is torn down and the guest exits (the VM powers off).

    ``capacity_script``, if given, runs before the build (the substrate's forwarding test,
    :mod:`netrepro.sites.local.capacity`); its failure is logged and does not stop the build.

    The guest's /etc and /run are throwaway overlays: root's home is pointed at a writable
    folder and its shell at /bin/sh (the host's ~/.bashrc may be slow to source under TCG),
    and pam_nologin's /run/nologin is removed so that sshd accepts logins.
    """
    q = shlex.quote
    mods = " ".join(GUEST_MODULES)
    cap = f"sh {q(str(capacity_script))} || echo 'guest: capacity test failed'\n" if capacity_script else ""
    return f"""#!/bin/sh
# Guest side of the netrepro local site (micro-VM); generated by netrepro.
exec >> {q(str(state_dir / 'vm-guest.log'))} 2>&1
set -u
echo "guest: booted $(uname -r) at $(date +%s.%N)"
for m in {mods}; do modprobe "$m" || echo "guest: modprobe $m failed"; done
{SOFTIRQ_REALTIME}ip link set lo up
ip link set eth0 up && ip addr add {SLIRP_GUEST}/24 dev eth0
mkdir -p {q(runtime_dir)}/home /run/sshd
rm -f /run/nologin
sed -i 's#^root:\\([^:]*\\):0:0:\\([^:]*\\):[^:]*:[^:]*$#root:\\1:0:0:\\2:{runtime_dir}/home:/bin/sh#' /etc/passwd
{cap}if sh {q(str(build_script))}; then
  /usr/sbin/sshd -f {q(str(jump_sshd_config))} -E {q(runtime_dir)}/jump-sshd.log
  echo "guest: site built at $(date +%s.%N)"
  echo ready > {q(str(state_dir / 'vm-ready'))}
  while :; do sleep 3600; done
else
  echo "guest: build failed"
  echo failed > {q(str(state_dir / 'vm-ready'))}
  sh {q(str(teardown_script))}
  echo "guest: torn down at $(date +%s.%N)"
fi
"""
