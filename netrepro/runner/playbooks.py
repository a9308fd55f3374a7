"""Running the playbooks (``ansible-playbook`` through :func:`netrepro.runner.ansible.run_playbook`)
for the runner: in a worker thread so that SIGINT and SIGTERM stay the runner's, ending them
on an interruption, and the one-line reason of a failed playbook read from its log."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import threading
import time
from pathlib import Path
from typing import Any

from netrepro.runner import ansible
from netrepro.sites import Site
from netrepro.sites.base import process_group_alive


#: Ansible's task lines on the console (the command line's -v, or NETREPRO_VERBOSE=1); else
#: they go only to each playbook's log file (the site's state folder, and the run's logs/).
VERBOSE = os.environ.get("NETREPRO_VERBOSE", "") not in ("", "0")


def _vars_file_dir(site: Site) -> Path:
    d = site.ensure_state_dir() / "ansible"
    d.mkdir(exist_ok=True)
    return d


def playbook_path(name: str, inv: Path, extravars: dict, site: Site, quiet: bool = False,
              keep_log: Path | None = None) -> ansible.PlaybookResult:
    """:func:`netrepro.runner.ansible.run_playbook` in a worker thread, so that SIGINT and SIGTERM
    stay the controller's. Its output reaches the console only when :data:`VERBOSE` (and not
    ``quiet``); ``keep_log``: also copy its log file there (a run's ``logs/<trial>-<n>-<name>.log``),
    whether it succeeded or not.

    ansible-runner 2.4 replaces the SIGINT and SIGTERM handlers when it runs in the main
    thread (``ansible_runner.utils.signal_handler``, called by ``interface.init_runner``) and
    never restores them, so a signal that came between two playbooks was lost. Here the main
    thread only waits; on KeyboardInterrupt it ends the playbook (:func:`end_playbooks`) and
    re-raises.

    Raises: what run_playbook raises (PlaybookError), KeyboardInterrupt.
    """
    box: dict[str, Any] = {}

    def work() -> None:
        try:
            box["result"] = ansible.run_playbook(name, inv, extravars, _vars_file_dir(site),
                                                 quiet=quiet or not VERBOSE)
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread
            box["error"] = exc

    worker = threading.Thread(target=work, name=f"playbook-{name}", daemon=True)
    worker.start()
    try:
        while worker.is_alive():
            worker.join(0.2)
    except KeyboardInterrupt:
        end_playbooks()
        worker.join(30)
        raise
    log_file = getattr(box.get("error"), "log", None) or getattr(box.get("result"), "log", None)
    if keep_log is not None and log_file is not None:
        try:
            keep_log.parent.mkdir(exist_ok=True)
            shutil.copyfile(log_file, keep_log)
        except OSError:
            pass  # the state folder keeps it; a full results disk is reported by the trial
    if "error" in box:
        raise box["error"]
    return box["result"]


def end_playbooks(grace_s: float = 5.0) -> list[int]:
    """End every ansible-playbook this process started, with its workers and ssh clients:
    SIGTERM to its process group (pexpect gives it a session of its own), SIGKILL to what is
    left after ``grace_s``. Returns the process ids found."""
    me, own_group = os.getpid(), os.getpgid(0)
    found: list[tuple[int, int]] = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            if ppid == me and b"ansible-playbook" in (d / "cmdline").read_bytes():
                found.append((int(d.name), os.getpgid(int(d.name))))
        except (OSError, ValueError, IndexError):
            continue

    def send(sig: int) -> bool:
        alive = False
        for pid, group in found:
            try:
                if group != own_group:
                    os.killpg(group, sig)
                else:
                    os.kill(pid, sig)
                alive = True
            except ProcessLookupError:
                pass
        return alive

    if send(signal.SIGTERM):
        t0 = time.time()
        while time.time() - t0 < grace_s and any(process_group_alive(g) for _, g in found if g != own_group):
            time.sleep(0.2)
        send(signal.SIGKILL)
    return [pid for pid, _ in found]


_FATAL = re.compile(r"^fatal: \[([^\]]+)\]: (FAILED|UNREACHABLE)! => (.*)$")


_SSH_CLOSED = re.compile(r"^Shared connection to \S+ closed\.$")


def playbook_failure(exc: Exception) -> str:
    """A one-line reason for a failed playbook: the first failed or unreachable task, its node
    and its message ("task 'T' failed on NODE: MSG", "NODE unreachable in task 'T': MSG"), read from the log the PlaybookError names ("...; log: FILE"); the
    error's own text when the log says no more.

    Ansible's default callback prints ``fatal: [node]: FAILED! => {json result}`` (or
    ``UNREACHABLE!``) under ``TASK [role : name]``; a failure followed by ``...ignoring``
    does not count.
    """
    text = str(exc)
    m = re.search(r"; log: (.+)$", text)
    try:
        lines = Path(m.group(1).strip()).read_text(errors="replace").splitlines() if m else []
    except OSError:
        lines = []
    task = ""
    for i, line in enumerate(lines):
        if line.startswith("TASK [") and "]" in line:
            task = line[6:line.rindex("]")].split(" : ")[-1]
            continue
        f = _FATAL.match(line.strip())
        if not f or (i + 1 < len(lines) and lines[i + 1].strip() == "...ignoring"):
            continue
        host, kind, rest = f.groups()
        result: Any = None
        for j in range(i + 1, min(i + 200, len(lines)) + 1):
            try:
                result = json.loads(rest)
                break
            except ValueError:
                if j < len(lines):
                    rest += "\n" + lines[j]
        msg = str(result.get("msg") or "") if isinstance(result, dict) else rest[:200]
        if isinstance(result, dict):
            # ssh's own "Shared connection to ... closed." (ansible.builtin.raw on a pty, whose
            # stdout holds the command's stderr too) says nothing about the failure.
            tail = [ln for ln in "\n".join(str(result.get(k) or "") for k in ("stdout", "stderr")).splitlines()
                    if ln.strip() and not _SSH_CLOSED.match(ln.strip())]
            if tail and tail[-1].strip() not in msg:
                msg = f"{msg}: {tail[-1].strip()}" if msg else tail[-1].strip()
        msg = " ".join(msg.split()).removeprefix("Task failed: ")  # (ansible-core 2.19's prefix)
        msg = msg if len(msg) <= 300 else msg[:297] + "..."
        task = f"task '{task}'" if task else "a task"
        return f"{host} unreachable in {task}: {msg}" if kind == "UNREACHABLE" else f"{task} failed on {host}: {msg}"
    return text
