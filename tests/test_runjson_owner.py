"""run.json has one owner, netrepro/runfolder/ (issue 56): no module outside it spells one of
run.json's keys as a string subscript or a ``.get``/``.setdefault``/``.pop`` key, so that its
fields are read and written through the record (:mod:`netrepro.runfolder.record`).

The keys checked are those only run.json has (:data:`RUN_JSON_KEYS`): a key that other dicts
share (``id``, ``status``, the experiment file's ``rate_scale``, flows.csv's ``start_epoch_s``)
would flag unrelated code. :data:`NOT_YET` (the modules still spelling such keys, with how many
times) is empty: every module outside netrepro/runfolder/ reads and writes run.json through the
record.
"""

from __future__ import annotations

import ast
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: Keys of run.json (or of its trial records) that no other file or dict of netrepro uses.
RUN_JSON_KEYS = frozenset({
    "lost_reservations", "raw_sha256", "toolkit_commit", "spec_file", "trial_status", "unhealthy_retries",
    "site_documents", "started_at", "finished_at", "controller_loadavg", "controller_cpu_busy", "controller_cores",
    "bottleneck_cpu_busy", "qdisc_before", "qdisc_after", "steps_s", "bottleneck_interface",
})

#: The modules outside netrepro/runfolder/ that still spell run.json's keys (module -> occurrences):
#: none since the runner builds and updates its record through netrepro.runfolder.record
#: (first_record, instance_status, add_raw_sha256, set_finished, ...) and the report reads
#: it through RunRecord. Kept empty, so that any key spelled outside runfolder fails.
NOT_YET: dict[str, int] = {}


def _key(node: ast.AST) -> str | None:
    """The string key ``node`` reads or writes: ``x["k"]`` or ``x.get("k")`` (``setdefault``, ``pop``)."""
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant):
        key = node.slice.value
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
          and node.func.attr in ("get", "setdefault", "pop") and node.args and isinstance(node.args[0], ast.Constant)):
        key = node.args[0].value
    else:
        return None
    return key if isinstance(key, str) else None


def spelled(source: str) -> Counter:
    """run.json keys (:data:`RUN_JSON_KEYS`) spelled as subscripts or ``.get`` keys in ``source``."""
    return Counter(k for node in ast.walk(ast.parse(source)) if (k := _key(node)) in RUN_JSON_KEYS)


def _modules() -> list[Path]:
    return sorted(p for top in ("netrepro", "analysis") for p in (ROOT / top).rglob("*.py")
                  if not p.is_relative_to(ROOT / "netrepro" / "runfolder"))


def test_no_module_outside_runfolder_spells_a_run_json_key():
    found = {str(p.relative_to(ROOT)): sum(c.values()) for p in _modules() if (c := spelled(p.read_text()))}
    new = {m: n for m, n in found.items() if m not in NOT_YET}
    assert not new, f"run.json's keys spelled outside netrepro/runfolder/ (use the record): {new}"
    more = {m: (n, NOT_YET[m]) for m, n in found.items() if m in NOT_YET and n > NOT_YET[m]}
    assert not more, f"more run.json keys spelled than before (found, listed): {more}"
    done = sorted(set(NOT_YET) - set(found))
    assert not done, f"no longer spelling run.json's keys, remove from NOT_YET: {done}"


def test_the_check_finds_what_it_looks_for():
    """The scan sees each form it forbids, and not a key in other positions."""
    src = ('a = d["raw_sha256"]; b = d.get("toolkit_commit"); d.setdefault("lost_reservations", []); '
           'd.pop("finished_at", None); e = {"trial_status": 1}; f = "steps_s"; g = d["id"]')
    assert spelled(src) == Counter({"raw_sha256": 1, "toolkit_commit": 1, "lost_reservations": 1, "finished_at": 1})
