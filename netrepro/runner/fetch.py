"""A trial's data from the nodes to the controller: each node's packed trial fetched over SSH
(:func:`fetch_archives`), unpacked (:func:`extract_archive`), and the nodes' software and
settings as they recorded them (:func:`nodes_meta`); the files' checksums are the run folder's
(:func:`netrepro.runfolder.integrity.sha256_tree`)."""

from __future__ import annotations

import errno
import json
import shlex
import shutil
import subprocess
import tarfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from netrepro.runner.ssh import inventory_hosts, node_ssh_argv, node_trial_dir
from netrepro.experiment.spec import Spec


class FetchFailed(RuntimeError):
    """A node's archive could not be fetched; the message names each node and says when the
    controller's disk was full."""


def fetch_archives(inv: Path, hosts: list[str], trial_id: str, dest_dir: Path, timeout_s: float = 600) -> dict[str, int]:
    """Fetch each node's packed trial (``<netrepro_node_dir>/trials/<trial_id>.tar.gz``, made
    by the collectors role's pack step) to ``dest_dir/<node>.tar.gz``, in parallel over the
    nodes' SSH control connections (one ``cat`` each: no Python on the node, where
    ansible.builtin.fetch runs two modules per node).

    Each file is written as ``<node>.tar.gz.part`` and renamed once whole, its size checked
    against the node's (``stat -c %s``). Returns node ->
    bytes. Raises FetchFailed naming every node that failed (and saying when the controller's
    disk was full); its partial files are removed.
    """
    hv = inventory_hosts(inv)
    dest_dir.mkdir(parents=True, exist_ok=True)

    def one(host: str) -> tuple[int | None, str, bool]:
        src = node_trial_dir(hv[host], trial_id) + ".tar.gz"
        part = dest_dir / f"{host}.tar.gz.part"
        try:
            # The node says the archive's size first (on stderr): ssh does not fail when it
            # cannot write what it receives (a full disk), so the size is checked here.
            with part.open("wb") as out:
                p = subprocess.run(node_ssh_argv(host, hv[host], f"stat -c %s {shlex.quote(src)} >&2 && exec cat {shlex.quote(src)}", as_root=True),
                                   stdout=out, stderr=subprocess.PIPE, text=False, timeout=timeout_s, stdin=subprocess.DEVNULL)
            err = p.stderr.decode(errors="replace").strip().splitlines()
            size = part.stat().st_size
            want = next((int(ln) for ln in reversed(err) if ln.strip().isdigit()), None)
            if p.returncode != 0 or size != want:
                full = shutil.disk_usage(dest_dir).free < 64 << 10 or any("No space left" in ln for ln in err)
                part.unlink(missing_ok=True)
                if p.returncode != 0:
                    return None, (err or [f"ssh exit {p.returncode}"])[-1], full
                return None, f"got {size} of {want if want is not None else '?'} bytes", full
            part.rename(dest_dir / f"{host}.tar.gz")
            return size, "", False
        except subprocess.TimeoutExpired:
            part.unlink(missing_ok=True)
            return None, f"no end in {timeout_s:.0f} s", False
        except OSError as exc:
            part.unlink(missing_ok=True)
            return None, exc.strerror or str(exc), exc.errno == errno.ENOSPC

    with ThreadPoolExecutor(max_workers=max(1, len(hosts))) as pool:
        got = dict(zip(hosts, pool.map(one, hosts), strict=True))
    bad = {h: r for h, r in got.items() if r[0] is None}
    if bad:
        full = any(r[2] for r in bad.values())
        raise FetchFailed("could not fetch the raw data of " + "; ".join(f"{h} ({r[1]})" for h, r in sorted(bad.items()))
                          + (" (the results folder's disk is full)" if full else ""))
    return {h: r[0] for h, r in got.items()}


def extract_archive(archive: Path, dest: Path) -> None:
    """Unpack a node's archive of raw files into ``dest``, then delete the archive.

    Only regular files and folders inside ``dest`` are accepted (tarfile's "data" filter,
    PEP 706, where this Python has it: Debian 12's 3.11.2 does not, it came in 3.11.4).
    Raises ValueError naming the archive for any other member.
    """
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tf:
        if hasattr(tarfile, "data_filter"):
            tf.extractall(dest, filter="data")
        else:
            root = dest.resolve()
            for m in tf.getmembers():
                target = (dest / m.name).resolve()
                if not (m.isfile() or m.isdir()) or m.name.startswith("/") or not target.is_relative_to(root):
                    raise ValueError(f"{archive}: {m.name}: expected a regular file or folder inside the archive")
                m.mode &= 0o755
            tf.extractall(dest)  # noqa: S202 - every member checked above
    archive.unlink()


def node_meta(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def nodes_meta(raw: Path, spec: Spec) -> dict:
    out = {}
    for node in spec.model.nodes:
        metas = sorted(raw.glob(f"*/{node}/meta-before.json"))
        if not metas:
            continue
        m = node_meta(metas[0])
        out[node] = {k: m.get(k) for k in ("kernel", "iproute2", "vsftpd", "openssh", "curl", "sysctls")}
        out[node]["offloads"] = m.get("offloads")
    return out
