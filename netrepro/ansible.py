"""Run the project's playbooks with ansible-runner.

Every playbook gets the repository's ansible.cfg (roles path, pipelining, SSH control
sockets under /tmp) and one extra-vars dict. Output streams to the terminal as
ansible-playbook prints it; artifacts (events, stdout) go to ``artifact_dir``.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from netrepro.spec import REPO_ROOT

PLAYBOOKS = REPO_ROOT / "playbooks"


class PlaybookError(RuntimeError):
    """A playbook failed; the message names it, the failed hosts and where the log is."""


@dataclass
class PlaybookResult:
    """Outcome of one playbook run: ``stats`` is ansible's per-host recap
    (``{"ok": {host: n}, "changed": {...}, "failures": {...}, ...}``), ``seconds`` wall time."""

    playbook: str
    rc: int
    stats: dict[str, Any]
    seconds: float
    facts_set: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def changed(self) -> int:
        """Total number of changed tasks over all hosts."""
        return sum((self.stats.get("changed") or {}).values())


def _facts_set(runner) -> dict[str, dict[str, Any]]:
    """host -> facts set by set_fact tasks during the run (from the runner's events)."""
    out: dict[str, dict[str, Any]] = {}
    for ev in runner.events:
        data = ev.get("event_data") or {}
        if ev.get("event") == "runner_on_ok" and data.get("task_action") in ("ansible.builtin.set_fact", "set_fact"):
            out.setdefault(data.get("host", ""), {}).update((data.get("res") or {}).get("ansible_facts") or {})
    return out


def fact_cache_dir(artifact_dir: Path) -> Path:
    """Where the fact cache of a site lives (beside its artifacts); cleared by ``up``."""
    return artifact_dir.parent / "facts"


def run_playbook(name: str, inventory: Path, extravars: dict[str, Any], artifact_dir: Path,
                 limit: str | None = None, quiet: bool = False, verbosity: int = 0) -> PlaybookResult:
    """Run ``playbooks/<name>.yml`` against ``inventory`` with ``extravars``.

    Raises:
        PlaybookError: the playbook failed or a host was unreachable.
    """
    import ansible_runner  # imported here: it is slow to import and only needed for runs

    playbook = PLAYBOOKS / f"{name}.yml"
    # ansible-playbook lives beside this interpreter (the project's virtual environment).
    bindir = str(Path(sys.executable).parent)
    if bindir not in os.environ.get("PATH", "").split(os.pathsep):
        os.environ["PATH"] = bindir + os.pathsep + os.environ.get("PATH", "")
    artifact_dir.mkdir(parents=True, exist_ok=True)
    env = {
        "ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(REPO_ROOT / "roles"),
        # Slow nodes (the micro-VM under TCG) need more than the default 10 s to connect.
        "ANSIBLE_TIMEOUT": os.environ.get("ANSIBLE_TIMEOUT", "60"),
        "ANSIBLE_FORCE_COLOR": "0",
        "ANSIBLE_CACHE_PLUGIN_TIMEOUT": "0",
    }
    t0 = time.time()
    r = ansible_runner.run(
        private_data_dir=str(artifact_dir),
        playbook=str(playbook),
        inventory=str(inventory),
        extravars=extravars,
        envvars=env,
        limit=limit,
        quiet=quiet,
        verbosity=verbosity,
        suppress_env_files=True,
        json_mode=False,
        # Facts set with cacheable=true (interfaces_by_network, kernel versions) outlive one
        # playbook run, so the trial playbooks need not find the interfaces again. An
        # absolute path: ansible-runner's default is a new cache per run.
        fact_cache_type="jsonfile",
        fact_cache=str(fact_cache_dir(artifact_dir)),
    )
    res = PlaybookResult(name, r.rc, r.stats or {}, time.time() - t0, _facts_set(r))
    if r.rc != 0 or r.status != "successful":
        failed = sorted(set((res.stats.get("failures") or {})) | set((res.stats.get("dark") or {})))
        raise PlaybookError(f"playbook {name}.yml {r.status} (rc {r.rc})"
                            + (f" on {', '.join(failed)}" if failed else "")
                            + f"; log: {artifact_dir}/artifacts/{r.config.ident}/stdout")
    return res
