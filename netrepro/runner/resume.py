"""Resuming a run that stopped part-way, in its own folder: what is refused before anything
is written (:func:`load_resume`), and its record made ready to continue."""

from __future__ import annotations

import json
from pathlib import Path

from netrepro.runfolder.integrity import sha256_tree
from netrepro.experiment.spec import Spec, SpecError
from netrepro.runfolder.layout import INCOMPLETE, incomplete_marker, raw_dir, run_json
from netrepro.runfolder.writing import spec_as_recorded


def load_resume(spec: Spec, site_name: str, run_dir: Path, time_scale: float | None,
                trial_ids: list[str] | None, repeat: int | None = None) -> dict:
    """Check that ``run_dir`` is a run of ``spec`` on ``site_name`` that can be resumed, and
    return its run.json. Reads only; nothing is written.

    Refused (SpecError, one line): no such folder; no run.json, or not a JSON object; another
    experiment, site or experiment file content than the run's; ``--trial`` (a run's trials
    are fixed when it starts), a ``--time-scale`` or ``--repeat`` other than the run's; a run that is
    complete; a completed trial's raw file missing, altered (sha256 in run.json) or added to.
    """
    if trial_ids:
        raise SpecError("command line", "--trial", "not with --resume: a resumed run runs the trials it started with")
    if not run_dir.is_dir():
        raise SpecError(run_dir, "--resume", "no such run folder; expected a folder made by `netrepro run`")
    rj = run_json(run_dir)
    if not rj.is_file():
        raise SpecError(rj, "(file)", "missing; expected the run.json of a run made by `netrepro run`")
    try:
        meta = json.loads(rj.read_text())
    except (ValueError, UnicodeDecodeError) as exc:
        raise SpecError(rj, "(file)", f"not JSON ({str(exc).splitlines()[0][:80]}); expected the run's record") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("trials"), list):
        raise SpecError(rj, "trials", "missing; expected the run's record with its list of completed trials")
    if meta.get("experiment") != spec.name:
        raise SpecError(rj, "experiment", f"{meta.get('experiment')!r}: a run of another experiment; expected {spec.name!r}")
    if meta.get("site") != site_name:
        raise SpecError("command line", "--site", f"{site_name!r}: the run was made on {meta.get('site')!r}; "
                                                  f"resume it on the same site (--site {meta.get('site')})")
    if meta.get("spec") != spec_as_recorded(spec):
        raise SpecError(spec.path, "(file)", f"differs from the experiment as run (run.json 'spec' of {run_dir}); "
                                             "expected it unchanged to resume the run")
    if time_scale is not None and float(time_scale) != float(meta.get("time_scale", 1)):
        raise SpecError("command line", "--time-scale", f"{time_scale}: the run was made at TIME_SCALE "
                                                        f"{meta.get('time_scale')}; leave it out to resume")
    made = int((meta.get("repetitions") or {}).get("repeat", 1))
    if repeat is not None and int(repeat) != made:
        raise SpecError("command line", "--repeat", f"{repeat}: the run was made with REPEAT {made}; "
                                                    "leave it out to resume")
    done = {t.get("id") for t in meta["trials"] if isinstance(t, dict)}
    order = [t["id"] for t in meta.get("trial_status") or []] or spec.trial_ids
    if all(t in done for t in order) and not incomplete_marker(run_dir).exists():
        raise SpecError(run_dir, "--resume", f"the run is complete ({len(order)} trials, no {INCOMPLETE} marker); nothing to resume")
    recorded = meta.get("raw_sha256") or {}
    raw = raw_dir(run_dir)
    bad = []
    for tid in sorted(done):
        want = {k: v for k, v in recorded.items() if k.split("/", 1)[0] == tid}
        have = sha256_tree(raw / tid) if (raw / tid).is_dir() else {}
        have = {f"{tid}/{k}": v for k, v in have.items()}
        bad += [f"raw/{k} ({'missing' if k not in have else 'altered'})" for k in sorted(want) if have.get(k) != want[k]]
        bad += [f"raw/{k} (not in run.json)" for k in sorted(set(have) - set(want))]
        if not want:
            bad.append(f"raw/{tid} (no checksums in run.json)")
    if bad:
        more = f" and {len(bad) - 5} more" if len(bad) > 5 else ""
        raise SpecError(rj, "raw_sha256", f"the completed trials' data changed since they were recorded: "
                                          f"{', '.join(bad[:5])}{more}; expected them as recorded")
    return meta


def resume_record(meta: dict, known_ids: list[str], session: dict) -> list[str]:
    """Make a resumed run's record (its run.json ``meta``, checked by :func:`load_resume`) ready
    to continue, in place: every trial instance's status in the run's order (``known_ids``,
    the experiment's trials, for a run that recorded none), an instance and attempt left
    ``running`` by a process that ended without a word (SIGKILL, power) marked failed, and
    this resume (``session``: when, and what ran it) appended to ``resumes``. Returns the
    instances still to run, in order."""
    done = {t["id"] for t in meta["trials"]}
    order = [t["id"] for t in meta.get("trial_status") or []] or known_ids
    meta["trial_status"] = [next((s for s in meta.get("trial_status") or [] if s.get("id") == tid),
                                 {"id": tid, "trial": tid, "repetition": 1,
                                  "status": "complete" if tid in done else "pending", "attempts": []})
                            for tid in order]
    for ts in meta["trial_status"]:
        if ts["status"] == "running":  # the process running it ended without a word (SIGKILL, power)
            ts.update(status="failed", reason="the run's process ended without recording why (killed?)")
            for a in ts.get("attempts") or []:
                if a.get("status") == "running":
                    a.update(status="failed", reason=ts["reason"])
    pending = [ts["id"] for ts in meta["trial_status"] if ts["status"] != "complete"]
    meta.setdefault("resumes", []).append({**session, "from_trial": pending[0] if pending else None})
    return pending
