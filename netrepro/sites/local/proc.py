"""The local site's machine (the micro-VM or UML kernel) as a process group of its own: the
``sh -c`` line that starts it, who a process is beyond its reusable pid (read from /proc), and
the group stopped only while it still is the one netrepro started."""

from __future__ import annotations

import os
import shlex
import signal
import time
from pathlib import Path
from typing import NamedTuple

from netrepro.sites.base import process_group_alive


def boot_shell_line(argv: list[str], log_path: Path) -> str:
    """The ``sh -c`` line that starts the machine: ``argv`` with stdin from /dev/null and its
    console (stdout and stderr) piped to ``cat >> log_path``; a pipe keeps the console
    appendable, and UML cannot poll a file. Every word of ``argv`` and the log path is quoted
    with :func:`shlex.quote`, so that sh(1) sees each as one literal word, whatever it holds
    (spaces, quotes, ``$(...)``, ``;``): a checkout or state folder may be under any path."""
    return f"{shlex.join(argv)} < /dev/null 2>&1 | cat >> {shlex.quote(str(log_path))}"


class ProcIdentity(NamedTuple):
    """Who a process is, beyond its pid (which the kernel reuses once it is free)."""

    starttime: int      #: field 22 of /proc/<pid>/stat: start, in clock ticks after boot (proc(5))
    cmdline: list[str]  #: /proc/<pid>/cmdline split at NULs; [] for a zombie
    state: str          #: field 3 of /proc/<pid>/stat (R, S, Z, ...)
    pgrp: int           #: field 5: process group
    session: int        #: field 6: session
    ppid: int           #: field 4: parent


def proc_identity(pid: int) -> ProcIdentity | None:
    """The :class:`ProcIdentity` of process ``pid`` read from /proc, None when there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
    except (FileNotFoundError, ProcessLookupError):
        return None
    # Field 2 (the name) is in parentheses and may hold spaces and ')': count after the last ')'.
    f = stat[stat.rindex(b")") + 2:].split()  # f[0] is field 3
    return ProcIdentity(int(f[19]), [a.decode(errors="replace") for a in cmd.split(b"\0")[:-1]],
                        f[0].decode(), int(f[2]), int(f[3]), int(f[1]))


def processes() -> dict[int, ProcIdentity]:
    """pid -> :class:`ProcIdentity` of every process /proc lists now (those gone meanwhile left out)."""
    found = ((int(d.name), proc_identity(int(d.name))) for d in Path("/proc").iterdir() if d.name.isdigit())
    return {pid: ident for pid, ident in found if ident is not None}


def started_identity(pid: int, timeout_s: float = 5.0) -> ProcIdentity | None:
    """:func:`proc_identity` of a process just started by ``subprocess.Popen``, once its command
    line is readable: Popen returns while the kernel is still in exec(), when
    /proc/<pid>/cmdline reads empty. None when the process is gone (or a zombie) by then."""
    deadline = time.monotonic() + timeout_s
    while True:
        ident = proc_identity(pid)
        if ident is None or ident.cmdline or ident.state == "Z" or time.monotonic() > deadline:
            return ident if ident is not None and ident.cmdline else None
        time.sleep(0.01)


def vm_group_is_ours(pgid: int, starttime: int | None, cmdline: list[str] | None) -> bool:
    """Is process group ``pgid`` still the one whose leader (pid ``pgid``, started in its own
    session) had ``starttime`` and ``cmdline``? False when those were not recorded.

    A live leader must match both (a zombie's command line is empty: its start time alone). A
    group whose leader has exited is the same group while it has members: Linux, as POSIX
    requires, does not reuse a pid while a process group of that id exists; its members
    must then be in the leader's session and have started after it.
    """
    if not starttime or not cmdline:
        return False
    lead = proc_identity(pgid)
    if lead is not None:
        return lead.starttime == starttime and (lead.cmdline == list(cmdline) or (lead.state == "Z" and not lead.cmdline))
    members = [p for p in processes().values() if p.pgrp == pgid]
    return bool(members) and all(p.session == pgid and p.starttime >= starttime for p in members)


def kill_group(pgid: int, starttime: int | None, cmdline: list[str] | None) -> bool:
    """SIGTERM to process group ``pgid``, then SIGKILL if it still lives 2 s later, only if it
    still is the one :func:`vm_group_is_ours` describes (checked before the first signal; the
    id cannot be reused while the group lives). Returns whether it was signalled."""
    if not vm_group_is_ours(pgid, starttime, cmdline):
        return False
    try:
        os.killpg(pgid, signal.SIGTERM)
        deadline = time.monotonic() + 2
        while process_group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if process_group_alive(pgid):
            os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    return True
