"""Run the project's playbooks with ansible-runner.

Every playbook gets the repository's ansible.cfg (roles path, pipelining, SSH control
sockets under /tmp) and one extra-vars dict. Output is kept as one log file per playbook run
in ``artifact_dir/logs/`` and streams to the terminal only when asked (``quiet=False``; the
command line's ``-v``); nothing else of ansible-runner's stays on disk.

Two of ansible-runner's (2.4.3) defaults are unsafe here and are overridden:

- It seeds the playbook's environment with the controller's whole environment
  (``ansible_runner/config/_base.py``, ``prepare_env``: ``os.environ.copy()``) and writes it
  to ``artifacts/<ident>/command`` (``ansible_runner/runner.py``, ``Runner.run``), secrets
  such as ``NETREPRO_GENI_KEY_PASSPHRASE`` included. ansible-playbook gets only
  :data:`PASSTHROUGH_ENV`, our own settings and runner's own callback settings.
- It sets ``ANSIBLE_HOST_KEY_CHECKING=False`` when unset (same ``prepare_env``), which makes
  Ansible's ssh connection plugin put ``-o StrictHostKeyChecking=no`` before the inventory's
  ``ansible_ssh_common_args`` (``ansible/plugins/connection/ssh.py``, ``_build_command``);
  ssh(1) takes the first value of an option, so the inventory's checking was void. Here it
  is set to True: host keys are checked as the inventory says (netrepro/sites/inventory.py).

Extra vars are data, never templates. ansible-core 2.19 renders Jinja found in a string it
trusts as a template, and it trusts the extra vars given on the command line
(``ansible/cli/arguments/option_helpers.py``: a ``-e`` argument is tagged TrustedAsTemplate)
and those read from an ``-e @file`` (``ansible/utils/vars.py``, ``load_extra_vars``:
``load_from_file(..., trusted_as_template=True)``), which is how ansible-runner passes a dict
(as inline JSON). A string tagged ``!unsafe`` in that file is never trusted
(``ansible/_internal/_yaml/_constructor.py``, ``AnsibleConstructor.trusted_as_template`` is
false inside ``construct_yaml_unsafe``): the playbooks' own expressions use it as a value
(conditionals, loops, filters, module arguments) but never render its text. So
:func:`run_playbook` writes the extra vars to a YAML file in which every string, key or value,
is tagged ``!unsafe`` (:func:`unsafe_yaml`), and passes ``-e @file``: a value from an
experiment file such as ``{{ lookup('pipe', 'id') }}`` reaches the nodes as those characters.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from netrepro.experiment.spec import REPO_ROOT

PLAYBOOKS = REPO_ROOT / "playbooks"

#: Variables of the controller's environment that ansible-playbook gets, and no others: the
#: home folder (~/.ssh/config, ~/.ansible), the user, the locale, the time zone, the temporary
#: folder and the SSH agent's socket (testbed keys held by an agent).
PASSTHROUGH_ENV = ("HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "SSH_AUTH_SOCK")

#: Variables ansible-runner 2.4.3 sets itself and needs (``prepare_env`` in
#: ansible_runner/config/_base.py): its event callback, the fact cache, retry files and host key
#: checking (set by us before runner sees it).
RUNNER_ENV = ("ANSIBLE_CALLBACK_PLUGINS", "ANSIBLE_STDOUT_CALLBACK", "ANSIBLE_RETRY_FILES_ENABLED",
              "ANSIBLE_HOST_KEY_CHECKING", "AWX_ISOLATED_DATA_DIR", "ANSIBLE_CACHE_PLUGIN",
              "ANSIBLE_CACHE_PLUGIN_CONNECTION")


class PlaybookError(RuntimeError):
    """A playbook failed; the message names it, the failed hosts and where the log is
    (``log``: that file's path, when the playbook ran)."""

    log: Path | None = None


@dataclass
class PlaybookResult:
    """Outcome of one playbook run: ``stats`` is ansible's per-host recap
    (``{"ok": {host: n}, "changed": {...}, "failures": {...}, ...}``), ``seconds`` wall time,
    ``log`` the file holding the run's output."""

    playbook: str
    rc: int
    stats: dict[str, Any]
    seconds: float
    facts_set: dict[str, dict[str, Any]] = field(default_factory=dict)
    log: Path | None = None

    @property
    def changed(self) -> int:
        """Total number of changed tasks over all hosts."""
        return sum((self.stats.get("changed") or {}).values())


def _facts_set(events: list[dict]) -> dict[str, dict[str, Any]]:
    """host -> facts set by set_fact tasks during the run (from the runner's events)."""
    out: dict[str, dict[str, Any]] = {}
    for ev in events:
        data = ev.get("event_data") or {}
        if ev.get("event") == "runner_on_ok" and data.get("task_action") in ("ansible.builtin.set_fact", "set_fact"):
            out.setdefault(data.get("host", ""), {}).update((data.get("res") or {}).get("ansible_facts") or {})
    return out


def _stats(events: list[dict]) -> dict[str, Any]:
    """Ansible's recap (the ``playbook_on_stats`` event), as ansible-runner's ``Runner.stats``."""
    for ev in events:
        if ev.get("event") == "playbook_on_stats":
            d = ev.get("event_data") or {}
            return {k: d.get(k, {}) for k in ("skipped", "ok", "dark", "failures", "ignored", "rescued",
                                              "processed", "changed")}
    return {}


def task_times(events: list[dict], started: float) -> list[tuple[str, float]]:
    """Where a playbook run's wall time went: ``[(what, seconds), ...]`` in order, from the
    runner's events' ``created`` times (UTC, ISO 8601). The first row, ``(startup)``, is from
    ``started`` (epoch seconds) to the first task; each task runs until the next one starts
    (over all hosts, as the linear strategy runs them); the last until the recap."""
    from datetime import datetime, timezone

    marks: list[tuple[str, float]] = [("(startup)", started)]
    for ev in events:
        kind, created = ev.get("event"), ev.get("created")
        if kind not in ("playbook_on_task_start", "playbook_on_stats") or not created:
            continue
        t = datetime.fromisoformat(created)
        t = (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()
        name = (ev.get("event_data") or {}).get("task", "") if kind == "playbook_on_task_start" else ""
        marks.append((name, t))
    return [(name, round(marks[i + 1][1] - t, 2)) for i, (name, t) in enumerate(marks[:-1])]


class _QuotedDumper(yaml.SafeDumper):
    """YAML dumper that writes every string as a double-quoted scalar, so that a reader never
    resolves one as another type (``1:10`` is a sexagesimal int, ``yes`` a bool in YAML 1.1)."""


_QuotedDumper.add_representer(
    str, lambda dumper, s: dumper.represent_scalar("tag:yaml.org,2002:str", s, style='"'))


def unsafe_yaml(data: dict[str, Any]) -> str:
    """``data`` (JSON-serialisable: dicts, lists, strings, numbers, booleans, None) as YAML text
    whose root mapping is tagged ``!unsafe``: Ansible reads everything in it as plain data and
    never renders Jinja in it (see the module docstring). Tuples become lists.

    Only the root carries the tag. ansible-core 2.19 resolves the type of a node tagged
    ``!unsafe`` as if it were a plain scalar (``_constructor.py``,
    ``_resolve_and_construct_object``): a tagged ``"1:10"`` (an HTB class id) arrives as the
    integer 70 and ``"yes"`` as True. Under a tagged root, each string keeps its double-quoted
    style and so its type, and is still untrusted (the constructor's ``_unsafe_depth``).

    Raises:
        TypeError: ``data`` holds something JSON cannot represent.
    """
    plain = json.loads(json.dumps(data))
    return "--- !unsafe\n" + yaml.dump(plain, Dumper=_QuotedDumper, sort_keys=False, allow_unicode=False,
                                        width=1 << 16)


def _write_extravars(folder: Path, extravars: dict[str, Any]) -> Path:
    """Write :func:`unsafe_yaml` of ``extravars`` to a new file in ``folder`` (mode 0600)."""
    fd, name = tempfile.mkstemp(prefix="extravars-", suffix=".yml", dir=folder)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(unsafe_yaml(extravars))
    return Path(name)


def fact_cache_dir(artifact_dir: Path) -> Path:
    """Where the fact cache of a site lives (beside its artifacts); cleared by ``up``."""
    return artifact_dir.parent / "facts"


def playbook_env(bindir: str | None = None) -> dict[str, str]:
    """The whole environment ansible-playbook runs with, but ansible-runner's own
    :data:`RUNNER_ENV`: :data:`PASSTHROUGH_ENV` from ours, PATH with ``bindir`` (default: this
    interpreter's folder, where ansible-playbook is) first, and netrepro's Ansible settings."""
    bindir = bindir or str(Path(sys.executable).parent)
    path = os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    env = {k: os.environ[k] for k in PASSTHROUGH_ENV if k in os.environ}
    env.update({
        "PATH": path if bindir in path.split(os.pathsep) else bindir + os.pathsep + path,
        "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(REPO_ROOT / "roles"),
        # Slow nodes (the micro-VM under TCG) need more than the default 10 s to connect.
        "ANSIBLE_TIMEOUT": os.environ.get("ANSIBLE_TIMEOUT", "60"),
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_CACHE_PLUGIN_TIMEOUT": "0",
        # ansible-runner sets False when unset (see the module docstring).
        "ANSIBLE_HOST_KEY_CHECKING": "True",
    })
    return env


def _keep_log(artifact_dir: Path, ident_dir: Path, name: str, started: float,
              times: list[tuple[str, float]] = ()) -> Path:
    """Move the run's output to ``artifact_dir/logs/<time>-<name>.log`` (mode 0600), followed by
    ``times`` (:func:`task_times`), and delete every other file ansible-runner wrote
    (``command``, ``env/``, ``job_events/``, ``rc``, ...)."""
    logs = artifact_dir / "logs"
    logs.mkdir(mode=0o700, parents=True, exist_ok=True)
    log = logs / f"{time.strftime('%Y%m%dT%H%M%S', time.localtime(started))}-{name}.log"
    n = 1
    while log.exists():
        n += 1
        log = logs / f"{time.strftime('%Y%m%dT%H%M%S', time.localtime(started))}-{name}-{n}.log"
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        for part in ("stdout", "stderr"):
            f = ident_dir / part
            if f.is_file():
                out.write(f.read_text(encoding="utf-8", errors="replace"))
        if times:
            out.write("\nWALL TIME BY TASK (s)\n")
            out.writelines(f"{secs:8.2f}  {what}\n" for what, secs in times)
    shutil.rmtree(ident_dir, ignore_errors=True)
    # What earlier versions left: finished runs' artifacts (their `command` holds the whole
    # environment) and env/ files. A run still going has no `status` file yet.
    arts = artifact_dir / "artifacts"
    for d in (arts.iterdir() if arts.is_dir() else []):
        if d.is_dir() and (d / "status").exists():
            shutil.rmtree(d, ignore_errors=True)
    if arts.is_dir() and not any(arts.iterdir()):
        arts.rmdir()
    shutil.rmtree(artifact_dir / "env", ignore_errors=True)
    return log


def run_playbook(name: str, inventory: Path, extravars: dict[str, Any], artifact_dir: Path,
                 limit: str | None = None, quiet: bool = False, verbosity: int = 0) -> PlaybookResult:
    """Run ``playbooks/<name>.yml`` against ``inventory`` with ``extravars``.

    ``artifact_dir`` is ansible-runner's private data folder; afterwards it holds only
    ``logs/<time>-<name>.log`` (the run's output) besides earlier logs. The environment of
    ansible-playbook is :func:`playbook_env`; ``extravars`` reach it as ``-e @file`` with
    every string tagged ``!unsafe`` (:func:`unsafe_yaml`), a file in ``artifact_dir`` that is
    removed afterwards (see the module docstring).

    Raises:
        PlaybookError: the playbook failed or a host was unreachable; names the log file.
    """
    from ansible_runner.interface import init_runner  # slow to import; only needed for runs

    playbook = PLAYBOOKS / f"{name}.yml"
    artifact_dir.mkdir(parents=True, exist_ok=True)
    env = playbook_env()
    varsfile = _write_extravars(artifact_dir, extravars) if extravars else None
    events: list[dict] = []

    def keep_event(ev: dict) -> bool:
        events.append(ev)
        return False  # kept in memory only: no job_events/ files

    t0 = time.time()
    try:
        r = init_runner(
            private_data_dir=str(artifact_dir),
            playbook=str(playbook),
            inventory=str(inventory),
            # never runner's extravars: it passes them as inline JSON, which Ansible templates
            cmdline=shlex.join(["-e", f"@{varsfile}"]) if varsfile else None,
            envvars=env,
            limit=limit,
            quiet=quiet,
            verbosity=verbosity,
            suppress_env_files=True,
            json_mode=False,
            event_handler=keep_event,
            # Facts set with cacheable=true (interfaces_by_network, kernel versions) outlive one
            # playbook run, so the trial playbooks need not find the interfaces again. An
            # absolute path: ansible-runner's default is a new cache per run.
            fact_cache_type="jsonfile",
            fact_cache=str(fact_cache_dir(artifact_dir)),
        )
        # Runner copied our whole environment into its config; it is written to disk by run().
        keep = set(env) | set(RUNNER_ENV)
        r.config.env = {k: v for k, v in r.config.env.items() if k in keep}
        try:
            r.run()
        finally:
            log = _keep_log(artifact_dir, Path(r.config.artifact_dir), name, t0, task_times(events, t0))
    finally:
        if varsfile is not None:
            varsfile.unlink(missing_ok=True)
    res = PlaybookResult(name, r.rc, _stats(events), time.time() - t0, _facts_set(events), log)
    if r.rc != 0 or r.status != "successful":
        failed = sorted(set((res.stats.get("failures") or {})) | set((res.stats.get("dark") or {})))
        err = PlaybookError(f"playbook {name}.yml {r.status} (rc {r.rc})"
                            + (f" on {', '.join(failed)}" if failed else "") + f"; log: {log}")
        err.log = log
        raise err
    return res
