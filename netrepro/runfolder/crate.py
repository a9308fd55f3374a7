"""A run folder as an RO-Crate: written by ``netrepro export``, read back by the analysis.

The crate (RO-Crate 1.1, https://w3id.org/ro/crate/1.1, conforming to the Process Run Crate
profile 0.5, https://w3id.org/ro/wfrun/process/0.5) holds the run folder's files in the
run folder's own layout, so that the crate's folder *is* a run folder the analysis reads:
``run.json``, ``raw/<trial instance>/<node>/...``, the outputs of the analysis of the run as it
is (the run folder's own, or the ``analysis-*/`` one made after a change) with their
``analysis.json``, ``timings.json`` when there is one, the reservation's documents
(``site/``: a testbed's request RSpec and manifest, a FABRIC slice) and ``experiment.yml``, the experiment
file as run (run.json's ``spec``, written out). ``ro-crate-metadata.json`` describes them:

- every file with its ``sha256`` (the workflow-run vocabulary's term,
  https://w3id.org/ro/terms/workflow-run#sha256) and ``contentSize``; raw files' sums are
  run.json's ``raw_sha256`` and ``site_documents``, the outputs' analysis.json's (checked
  before writing);
- one ``CreateAction`` per trial instance: instrument netrepro at the run's commit (one
  SoftwareApplication per commit, with one version: :func:`_instrument`);
  object the experiment file and what the trial ran with (the site's documents and options, and from each
  node's snapshot before the trial, meta-before.json: kernel, iproute2, the sysctls and the
  qdiscs applied, as ``PropertyValue`` entities); result the trial's raw folder; start and end
  times; status (completed, or failed with the reason);
- one ``CreateAction`` for the analysis: object run.json and the raw folders, result the
  outputs, its end the time analysis.json was written;
- the root: the licence, the authors (a CITATION.cff; a person's affiliation an Organization),
  the publisher (the first organisation among them), the publication and the earlier
  reproduction the experiment file's ``reference`` cites (``*_doi`` and ``*_url`` keys).

Where the CITATION.cff says where the software lives (``doi``, ``repository-code``, ``url``),
netrepro's SoftwareApplication has that ``url`` and an absolute @id; docs/publishing-a-run.md
says what roc-validator still finds at RECOMMENDED level when it does not.

Nothing of the run folder is written; the crate is written once, to a new path. The authors
and cited works come from :mod:`netrepro.runfolder.citation`; a crate read back
(``netrepro analyze --run CRATE``) is checked by :mod:`netrepro.runfolder.cratereading`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import zipfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from netrepro.core.errors import RunFolderError
from netrepro.experiment.spec import REPO_ROOT
from netrepro.runfolder.citation import affiliation, cff_person, read_citation, references
from netrepro.runfolder.cratereading import first_mismatch
from netrepro.runfolder.deposit import software_url, zenodo_metadata
from netrepro.runfolder.integrity import no_links, sha256_file, verify_raw
from netrepro.runfolder.layout import (ANALYSIS_RECORD, RAW, RUN_JSON, SITE_DOCUMENT_RE, SITE_DOCUMENTS, TIMINGS, VERDICT,
                                      incomplete_problems, raw_dir, run_json)
from netrepro.runfolder.outputs import analysis_folders
from netrepro.runfolder.reading import read_run

#: The profile the crate conforms to (https://w3id.org/ro/wfrun/process/0.5).
PROCESS_RUN_CRATE = "https://w3id.org/ro/wfrun/process/0.5"
#: The JSON-LD context that defines ``sha256`` (the Process Run Crate profile's own context).
WORKFLOW_RUN_CONTEXT = "https://w3id.org/ro/terms/workflow-run/context"
#: The experiment file as run, in the crate (run.json's ``spec``, as YAML).
EXPERIMENT_FILE = "experiment.yml"
#: An SPDX licence identifier (https://spdx.org/licenses/): letters, digits, ``.``, ``+``, ``-``.
LICENSE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+-]{0,63}$")
#: The licence of a run's data unless the user names another (``netrepro export --license``).
DEFAULT_LICENSE = "CC-BY-4.0"
#: The CITATION.cff whose authors are the crate's unless the user names another.
DEFAULT_CITATION = REPO_ROOT / "CITATION.cff"
#: schema.org's action statuses (https://schema.org/ActionStatusType).
COMPLETED, FAILED = "http://schema.org/CompletedActionStatus", "http://schema.org/FailedActionStatus"
#: The snapshot of each node before a trial (roles/collectors), read for the environment.
SNAPSHOT = "meta-before.json"
#: Software versions a node's snapshot records, by its key.
SNAPSHOT_VERSIONS = ("kernel", "iproute2", "vsftpd", "openssh", "curl", "iperf3")
#: Media types of the files a run folder holds, by suffix (IANA media types).
MEDIA_TYPES = {".json": "application/json", ".jsonl": "application/jsonl", ".csv": "text/csv",
               ".gz": "application/gzip", ".png": "image/png", ".pdf": "application/pdf",
               ".md": "text/markdown", ".txt": "text/plain", ".yml": "application/yaml"}


def iso_time(value: Any) -> str | None:
    """A time as the Process Run Crate's validator accepts it: ISO 8601 in UTC with
    milliseconds and an explicit offset (``2026-11-23T06:15:05.468+00:00``); None when
    ``value`` is not an ISO 8601 time (run.json writes ``datetime.isoformat()``)."""
    try:
        t = datetime.fromisoformat(str(value))
    except ValueError:
        return None
    if t.tzinfo is None:
        t = t.replace(tzinfo=timezone.utc)
    return t.astimezone(timezone.utc).isoformat(timespec="milliseconds")


def media_type(path: str) -> str:
    """The IANA media type of a run folder's file by its suffix (``application/octet-stream``
    when unknown: raw tool outputs such as ``iperf3-h1-h3.json.t0``)."""
    return MEDIA_TYPES.get(Path(path).suffix, "application/octet-stream")


#: What a file the crate holds must be (:func:`netrepro.runfolder.integrity.no_links`).
OWN_FILE = "the run's own file or folder (a crate holds nothing from outside the run)"
#: The analysis.json ``inputs`` that name the run an analysis read (analysis/provenance.py run_record).
ANALYSED_INPUTS = ("run_json_sha256", "raw_tree_sha256")


def _read_analysis(folder: Path) -> dict:
    """``folder``'s analysis.json parsed (``outputs``: path relative to ``folder`` -> sha256),
    it and every output it lists checked to be a regular file inside ``folder`` reached
    through no link (:func:`no_links`). RunFolderError (one line naming the file): not
    analysed, a link or special file, analysis.json unreadable or without its outputs."""
    path = no_links(folder, ANALYSIS_RECORD, OWN_FILE)
    if not path.is_file():
        raise RunFolderError(path, f"missing: the run was not analysed; run `netrepro analyze --run {folder}` first")
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        outputs = record.get("outputs")
    except (OSError, ValueError, AttributeError) as exc:
        raise RunFolderError(path, f"expected the analysis record netrepro writes: {str(exc)[:80]}") from None
    if not isinstance(outputs, dict) or not outputs or not all(isinstance(k, str) for k in outputs):
        raise RunFolderError(path, "outputs: expected an object naming each output with its sha256")
    for rel in sorted(outputs):
        no_links(folder, rel, OWN_FILE)
    return record


def _of_this_run(record: dict, now: dict[str, str]) -> bool:
    """Whether the analysis ``record`` (analysis.json) read the run as it is ``now``
    (:data:`ANALYSED_INPUTS` -> sha256), complete and intact (not ``partial``)."""
    inputs = record.get("inputs")
    return (isinstance(inputs, dict) and all(inputs.get(k) == v for k, v in now.items())
            and inputs.get("incomplete_marker_sha256") is None and not record.get("partial"))


def _checked_analysis(rdir: Path, raw_tree: str) -> tuple[Path, dict]:
    """``(folder, analysis.json data)`` of the analysis to export: the run folder's own when it
    read the run as it is now (run.json's sha256 and ``raw_tree``, the raw tree's
    :meth:`RawCheck.tree_sha256`, as its ``inputs`` record them), else the first
    ``analysis-*/`` folder that did (the run analysed again after a change: analysis writes a
    new analysis beside the first, :func:`netrepro.runfolder.outputs.output_dir`); its outputs
    checked against its ``outputs`` sha256.

    Raises:
        RunFolderError: not analysed; analysis.json unreadable, a link or special file among
            it and its outputs; no analysis of the run as it is now (run.json or raw/ changed
            since: analyse it again); an output changed since (one line naming the file).
    """
    record = _read_analysis(rdir)
    now = {"run_json_sha256": sha256_file(run_json(rdir)), "raw_tree_sha256": raw_tree}
    again = f"analyse the run again with `netrepro analyze --run {rdir}`"
    if not _of_this_run(record, now):
        for folder in analysis_folders(rdir):
            try:
                other = _read_analysis(folder)
            except RunFolderError:
                continue
            if _of_this_run(other, now) and not first_mismatch(folder, other["outputs"]):
                return folder, other
        inputs = record.get("inputs") if isinstance(record.get("inputs"), dict) else {}
        if inputs.get("run_json_sha256") != now["run_json_sha256"]:
            raise RunFolderError(run_json(rdir), f"changed since the run was analysed (its sha256 is not "
                                                 f"{ANALYSIS_RECORD}'s inputs.run_json_sha256); expected the run "
                                                 f"as analysed: {again}, then export it")
        raise RunFolderError(raw_dir(rdir), f"changed since the run was analysed (the raw tree's sha256 is not "
                                            f"{ANALYSIS_RECORD}'s inputs.raw_tree_sha256, or that analysis was "
                                            f"partial); expected the run as analysed: {again}, then export it")
    bad = first_mismatch(rdir, record["outputs"])
    if bad:
        raise RunFolderError(rdir / bad[0], "differs from analysis.json's record (missing, altered or not a file); "
                                            f"expected the outputs as analysed: {again}")
    return rdir, record


def check_exportable(run_dir: Path | str) -> tuple[Path, dict, Any, Path, dict]:
    """``(run_dir, run.json data, spec, analysis folder, analysis.json data)`` of a run that can
    be exported: complete (no INCOMPLETE marker), every file the crate would hold a regular
    file of the run reached through no symbolic link (:func:`no_links`; raw/ through
    :func:`verify_raw`), its raw files and the reservation's documents as run.json records
    them, analysed as it is now with its outputs as analysis.json records them
    (:func:`_checked_analysis`: the folder is the run folder or one of its ``analysis-*/``).

    Raises:
        RunFolderError: one line naming the file and what was expected (:func:`read_run`'s
            refusals too); SpecError: the recorded experiment is invalid.
    """
    rdir, data, spec = read_run(run_dir)
    problems = incomplete_problems(rdir)
    if problems:
        raise RunFolderError(rdir, f"{problems[0]}; expected a complete run (finish it with `netrepro run --resume {rdir}`)")
    no_links(rdir, RUN_JSON, OWN_FILE)
    no_links(rdir, TIMINGS, OWN_FILE)   # absent: the crate has none
    check = verify_raw(raw_dir(rdir), data.get("raw_sha256"), run_json(rdir))
    if check.damaged:
        raise RunFolderError(run_json(rdir), check.describe() + "; expected the raw files as recorded")
    documents = data.get("site_documents") or {}
    if not isinstance(documents, dict) or not all(isinstance(k, str) and SITE_DOCUMENT_RE.match(k) for k in documents):
        raise RunFolderError(run_json(rdir), "site_documents: expected an object of file names and their sha256")
    for name in sorted(documents):
        no_links(rdir, f"{SITE_DOCUMENTS}/{name}", OWN_FILE)
    bad = first_mismatch(rdir / SITE_DOCUMENTS, documents)
    if bad:
        raise RunFolderError(rdir / SITE_DOCUMENTS / bad[0], f"{bad[1]}: expected the reservation's document "
                                                             "as run.json's site_documents records it")
    return (rdir, data, spec, *_checked_analysis(rdir, check.tree_sha256()))


def _file(crate, src: Path, rel: str, digest: str, name: str | None = None):
    """Add the run folder's file ``src`` as the crate's ``rel`` with its sha256 and size."""
    return crate.add_file(src, dest_path=rel, properties={
        "name": name or rel, "encodingFormat": media_type(rel), "sha256": digest,
        "contentSize": str(src.stat().st_size)})


def _value(crate, ident: str, name: str, value: Any, description: str | None = None):
    """A PropertyValue entity ``ident`` (``#...``): ``name`` = ``value`` (text; JSON for a
    mapping or a list)."""
    from rocrate.model.contextentity import ContextEntity
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    props = {"@type": "PropertyValue", "name": name, "value": text}
    if description:
        props["description"] = description
    return crate.add(ContextEntity(crate, ident, properties=props))


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")


def _settings(crate, data: dict) -> list:
    """The run's settings and its site's recorded status as PropertyValues (the object of
    every trial): site, mode, time scale, rate scale k, barrier lead, and the scalar entries of
    run.json's ``site_status``."""
    rate = data.get("rate_scale") if isinstance(data.get("rate_scale"), dict) else {}
    out = [_value(crate, f"#setting-{key}", key, str(value), what) for key, value, what in (
        ("site", data.get("site"), "the site the run reserved (docs/sites/)"),
        ("mode", data.get("mode"), "how the site built the nodes"),
        ("time_scale", data.get("time_scale"), "TIME_SCALE: every duration of the schedule multiplied by it"),
        ("rate_scale", rate.get("k", 1), "k: every rate and byte size multiplied by it"),
        ("lead_s", data.get("lead_s"), "the barrier's lead, s")) if value is not None]
    status = data.get("site_status") if isinstance(data.get("site_status"), dict) else {}
    out += [_value(crate, f"#site-{_slug(k)}", f"site {k}", str(v)) for k, v in sorted(status.items())
            if isinstance(v, (str, int, float, bool)) and not k.endswith(("port", "key", "password", "token"))]
    return out


def _environment(crate, instance: str, trial_dir: Path) -> list:
    """What each node ran the trial with, from its snapshot before the trial
    (``raw/<instance>/<node>/meta-before.json``): its software versions
    (:data:`SNAPSHOT_VERSIONS`), its sysctls, and the qdiscs on its interfaces (kind, handle,
    parent and options as ``tc -j qdisc show`` gives them; the kernel's ``noqueue`` left out)."""
    out = []
    for node_dir in sorted(p for p in trial_dir.iterdir() if p.is_dir()):
        node, snap = node_dir.name, node_dir / SNAPSHOT
        try:
            meta = json.loads(snap.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if not isinstance(meta, dict):
            continue
        base = f"#{_slug(instance)}-{_slug(node)}"
        out += [_value(crate, f"{base}-{key}", f"{key} on {node}", str(meta[key]))
                for key in SNAPSHOT_VERSIONS if isinstance(meta.get(key), str)]
        sysctls = meta.get("sysctls") if isinstance(meta.get("sysctls"), dict) else {}
        out += [_value(crate, f"{base}-{_slug(k)}", f"{k} on {node}", str(v)) for k, v in sorted(sysctls.items())]
        for q in meta.get("qdiscs") or []:
            if isinstance(q, dict) and q.get("kind") not in (None, "noqueue"):
                where = f"{node}:{q.get('dev')}"
                out.append(_value(crate, f"{base}-qdisc-{_slug(str(q.get('dev')))}-{_slug(str(q.get('handle')))}",
                                  f"qdisc {q['kind']} {q.get('handle')} on {where}"
                                  + (f" (parent {q['parent']})" if q.get("parent") else ""), q.get("options") or {}))
    return out


def _epoch(seconds: Any) -> str | None:
    """A Unix time (s) as :func:`iso_time` writes a time; None when it is not a number."""
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        return None
    return datetime.fromtimestamp(seconds, timezone.utc).isoformat(timespec="milliseconds")


def _attempt_times(status: dict, trial: dict) -> tuple[str | None, str | None, str, str | None]:
    """``(start, end, action status, error)`` of a trial: from run.json's ``trial_status`` entry
    (``status``), its last attempt's times, completed when the trial is complete, else failed
    with why; a run recorded before trial_status existed gives its trial record's (``trial``)
    common start and start + wall time instead."""
    attempts = [a for a in status.get("attempts") or [] if isinstance(a, dict)]
    if not attempts:
        start, wall = trial.get("start_epoch_s"), trial.get("wall_s")
        end = start + wall if _epoch(start) and _epoch(wall) else None
        done = trial.get("status", "complete") == "complete"
        return _epoch(start), _epoch(end), COMPLETED if done else FAILED, None if done else str(trial.get("status"))
    last = attempts[-1]
    done = status.get("status") == "complete"
    return (iso_time(last.get("started_at")), iso_time(last.get("ended_at")), COMPLETED if done else FAILED,
            None if done else str(status.get("reason") or status.get("status") or "not complete"))


def _root(crate, data: dict, spec, license: str, cff: dict, verdict: str):
    """The root dataset's name, description, dates, licence, profile, authors (each person's
    affiliation an Organization of its own, :func:`affiliation`), publisher and citations;
    returns the authors' entities.

    The publisher (RO-Crate 1.1, "Root Data Entity": an Organization) is the first
    Organization among the authors, else the first author's affiliation; none when the
    CITATION.cff names neither (then the validator says so at RECOMMENDED level)."""
    from rocrate.model.contextentity import ContextEntity
    title = str(spec.data.get("title") or spec.name)
    crate.name = f"{title}: run {data.get('run_id') or ''}".rstrip(": ")
    crate.description = (f"A run of the experiment {spec.name} on the {data.get('site')} site"
                         f"{' (' + str(data['mode']) + ')' if data.get('mode') else ''} at TIME_SCALE "
                         f"{data.get('time_scale', 1)}, made and analysed by netrepro: {verdict}. The files keep "
                         "the run folder's layout (docs/results-format.md); `netrepro analyze --run` reads the crate.")
    crate.datePublished = iso_time(data.get("finished_at")) or iso_time(data.get("started_at"))
    crate.license = crate.add(ContextEntity(crate, f"https://spdx.org/licenses/{license}",
                                            properties={"@type": "CreativeWork", "name": license}))
    crate.root_dataset["conformsTo"] = crate.add(ContextEntity(crate, PROCESS_RUN_CRATE, properties={
        "@type": "CreativeWork", "name": "Process Run Crate", "version": "0.5"}))
    authors, affiliations = [], []
    for a in cff["authors"]:
        if isinstance(a, dict):
            ident, props = cff_person(a)
            entity = crate.get(ident) or crate.add(ContextEntity(crate, ident, properties=props))
            org = affiliation(a)
            if org:
                entity["affiliation"] = crate.get(org[0]) or crate.add(ContextEntity(crate, org[0], properties=org[1]))
                affiliations.append(entity["affiliation"])
            authors.append(entity)
    organisations = [e for e in authors if e.type == "Organization"] + affiliations
    publisher = organisations[0] if organisations else None
    cited = [crate.add(ContextEntity(crate, ident, properties=props)) for ident, props in references(spec.model.reference)]
    for key, entities in (("author", authors), ("citation", cited), ("publisher", [publisher] if publisher else [])):
        if entities:  # one value alone, not a list of one (RO-Crate 1.1's JSON-LD recommendation)
            crate.root_dataset[key] = entities[0] if len(entities) == 1 else entities
    return authors


def commit_version(commit: Any) -> str:
    """A version string for netrepro at a git ``commit`` as run.json records it (40 hex digits,
    ``-dirty`` when the checkout had changes; ``unknown``): ``g<12 hex>[-dirty]``, the suffix
    git describe and the analysis' own version (analysis/provenance.py) give a commit; run.json
    does not record the package version. ``unknown`` when it is not a commit."""
    m = re.fullmatch(r"([0-9a-f]{40,64})(-dirty)?", str(commit or ""))
    return f"g{m.group(1)[:12]}{m.group(2) or ''}" if m else "unknown"


def _instrument(crate, version: str, commit: str | None, url: str | None):
    """netrepro as a SoftwareApplication at ``version`` and ``commit``: @id ``<url>#<version>``
    (an absolute URI: Process Run Crate 0.5, SoftwareApplication @id SHOULD) and ``url`` when
    the software's address is known (:func:`netrepro.runfolder.deposit.software_url`), else the
    local ``#netrepro-<version>`` (the profile's "local identifier for tools that are not
    otherwise described on the web"). One entity per version: a second call with the same
    version returns the first."""
    from rocrate.model.contextentity import ContextEntity
    ident = f"{url}#{quote(version, safe='')}" if url else f"#netrepro-{quote(version, safe='')}"
    if crate.get(ident) is not None:
        return crate.get(ident)
    props = {"@type": "SoftwareApplication", "name": "netrepro", "softwareVersion": version,
             "description": f"netrepro {version}, at commit {commit or 'unknown'}"}
    if url:
        props["url"] = url
    if commit:
        props["identifier"] = str(commit)
    return crate.add(ContextEntity(crate, ident, properties=props))


def build_crate(rdir: Path, data: dict, spec, analysis: dict, experiment: Path, license: str, cff: dict,
                analysed: Path | None = None):
    """The RO-Crate of a checked run (:func:`check_exportable`; ``analysis`` its analysis.json
    data, in the folder ``analysed``: the run folder unless given), not yet written: an
    ``rocrate.rocrate.ROCrate`` (RO-Crate 1.1) of the files and entities the module docstring
    lists, the analysis' outputs at the crate's top; ``experiment``: the experiment file as
    run, written out for the crate."""
    from rocrate.rocrate import ROCrate
    analysed = analysed or rdir
    crate = ROCrate(version="1.1")
    crate.metadata.extra_contexts.append(WORKFLOW_RUN_CONTEXT)
    try:
        verdict = json.loads((analysed / VERDICT).read_text(encoding="utf-8")).get("verdict", "not analysed")
    except (OSError, ValueError, AttributeError):
        verdict = "not analysed"
    authors = _root(crate, {**data, "run_id": rdir.name}, spec, license, cff, verdict)
    from netrepro import __version__
    made_by = analysis.get("made_by") if isinstance(analysis.get("made_by"), dict) else {}
    url = software_url(cff)
    analyser = _instrument(crate, str(made_by.get("version") or __version__), made_by.get("commit"), url)
    ran_at = data.get("toolkit_commit")
    # One commit, one version: the run made at the commit the analysis ran at has the analysis'
    # version string (made_by.version); a run of another commit its own (commit_version), and so
    # does one of a checkout with changes ("-dirty": its changes need not be the analysis').
    tool = analyser if ran_at and ran_at == made_by.get("commit") and not str(ran_at).endswith("-dirty") else \
        _instrument(crate, commit_version(ran_at), str(ran_at or "unknown"), url)
    exp = _file(crate, experiment, EXPERIMENT_FILE, sha256_file(experiment), "the experiment file as run (run.json's spec)")
    record = _file(crate, run_json(rdir), RUN_JSON, sha256_file(run_json(rdir)), "the run's record (run.json)")
    if (rdir / TIMINGS).is_file():
        _file(crate, rdir / TIMINGS, TIMINGS, sha256_file(rdir / TIMINGS), "the seconds of each stage")
    settings = _settings(crate, data)
    documents = [_file(crate, rdir / SITE_DOCUMENTS / name, f"{SITE_DOCUMENTS}/{name}", digest,
                       f"the {data.get('site')} site's {name}: the reservation the run used")
                 for name, digest in sorted((data.get("site_documents") or {}).items())]
    raw_sums = data.get("raw_sha256") or {}
    trials, folders = [], []
    statuses = {s.get("id"): s for s in data.get("trial_status") or [] if isinstance(s, dict)}
    records = {t.get("id"): t for t in data.get("trials") or [] if isinstance(t, dict)}
    for instance in sorted(p.name for p in raw_dir(rdir).iterdir() if p.is_dir()):
        folder = crate.add_dataset(dest_path=f"{RAW}/{instance}/", properties={"name": f"raw data of trial {instance}"})
        folder["hasPart"] = [_file(crate, raw_dir(rdir) / rel, f"{RAW}/{rel}", digest)
                             for rel, digest in sorted(raw_sums.items()) if rel.split("/", 1)[0] == instance]
        folders.append(folder)
        start, end, status, error = _attempt_times(statuses.get(instance, {}), records.get(instance, {}))
        props = {"name": f"trial {instance}", "description": f"netrepro run {spec.name} --site {data.get('site')}: "
                                                             f"trial instance {instance}", "actionStatus": status,
                 "agent": authors[0] if authors else None}
        props.update({k: v for k, v in (("startTime", start), ("endTime", end), ("error", error)) if v})
        trials.append(crate.add_action(tool, identifier=f"#trial-{_slug(instance)}",
                                       object=[exp, *documents, *settings, *_environment(crate, instance, raw_dir(rdir) / instance)],
                                       result=folder, properties={k: v for k, v in props.items() if v is not None}))
    results = [_file(crate, analysed / rel, rel, digest) for rel, digest in sorted(analysis["outputs"].items())]
    results.append(_file(crate, analysed / ANALYSIS_RECORD, ANALYSIS_RECORD, sha256_file(analysed / ANALYSIS_RECORD),
                         "what made the analysis' outputs, from which inputs (analysis.json)"))
    # The analysis ended when its last output, analysis.json, was written (runfolder/outputs.py
    # writes it last): its modification time, which a copy keeps with cp -p or rsync -t.
    ended = _epoch(os.stat(analysed / ANALYSIS_RECORD).st_mtime)
    analysis = crate.add_action(analyser, identifier="#analysis", object=[record, *folders], result=results,
                                properties={"name": "analysis", "description": f"netrepro analyze --run {rdir.name}",
                                            "actionStatus": COMPLETED, "endTime": ended,
                                            **({"agent": authors[0]} if authors else {})})
    crate.root_dataset["mentions"] = [*trials, analysis]
    return crate


def zip_folder(folder: Path, target: Path) -> Path:
    """``folder`` as the zip file ``target`` (deflated), every folder an entry of its own (a
    validator finds a Dataset such as ``raw/<trial>/`` in the payload only so), entries in
    path order with the zip format's earliest time, so that the same folder gives the same
    bytes; returns ``target``."""
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as z:
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder).as_posix() + ("/" if path.is_dir() else "")
            info = zipfile.ZipInfo(rel, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o40755 if path.is_dir() else 0o100644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, b"" if path.is_dir() else path.read_bytes())
    return target


def deposit_path(out: Path) -> Path:
    """Where the deposit metadata of the crate at ``out`` goes: ``<out without .zip>.zenodo.json``."""
    return out.with_name(out.name.removesuffix(".zip") + ".zenodo.json")


def export_run(run_dir: Path | str, out: Path | str, license: str = DEFAULT_LICENSE,
               citation: Path | str = DEFAULT_CITATION) -> tuple[Path, Path]:
    """Write the run in ``run_dir`` as an RO-Crate at ``out`` (a folder, or a zip file when
    ``out`` ends in ``.zip``), licensed ``license`` (an SPDX identifier), its authors those of
    ``citation`` (a CITATION.cff), and beside it the deposit metadata Zenodo takes
    (:func:`deposit_path`, :func:`netrepro.runfolder.deposit.zenodo_metadata`); returns both
    paths. Written once: neither may exist, and nothing is left at them when anything fails;
    nothing is written inside the run folder.

    Raises:
        RunFolderError: ``out`` exists, its folder does not or cannot be written, or it is
            inside the run folder (either path, links resolved); a bad licence; the run
            cannot be exported (:func:`check_exportable`); the CITATION.cff is unreadable
            (:func:`read_citation`); a file cannot be read or written meanwhile (one line
            naming it). SpecError: the recorded experiment is invalid; the CITATION.cff is
            not YAML within the strict reader's bounds.
    """
    out = Path(out)
    option = f"--output {out}"
    if not LICENSE_RE.match(license):
        raise RunFolderError("command line", f"--license {license!r}: expected an SPDX licence identifier "
                                             "(CC-BY-4.0, CC0-1.0, MIT; https://spdx.org/licenses/)")
    for target in (out, deposit_path(out)):
        if target.exists() or target.is_symlink():
            raise RunFolderError("command line", f"{option}: {target} exists; expected a new path "
                                                 "(a crate is written once)")
    if not out.parent.is_dir():
        raise RunFolderError("command line", f"{option}: {out.parent} is not a folder; expected a path in one")
    run_real = Path(run_dir).resolve()
    for target in (out, deposit_path(out)):
        if target.resolve().is_relative_to(run_real):
            raise RunFolderError("command line", f"{option}: {target} is inside the run folder {run_dir}; expected "
                                                 "a path outside the run (a run folder is never written)")
    rdir, data, spec, analysed, analysis = check_exportable(run_dir)
    cff = read_citation(citation)
    try:
        staging = tempfile.TemporaryDirectory(prefix=f".{out.name}.", dir=out.parent)
    except OSError as exc:
        raise RunFolderError("command line", f"{option}: {out.parent} cannot be written ({exc.strerror}); "
                                             "expected a path in a folder you can write") from None
    try:
        with staging as tmp:
            experiment = Path(tmp) / EXPERIMENT_FILE
            experiment.write_text(yaml.safe_dump(data["spec"], sort_keys=False, allow_unicode=True), encoding="utf-8")
            crate = build_crate(rdir, data, spec, analysis, experiment, license, cff, analysed)
            staged = Path(tmp) / "crate"
            crate.write(staged)
            if out.suffix == ".zip":
                staged = zip_folder(staged, Path(tmp) / "crate.zip")
            published = iso_time(data.get("finished_at")) or iso_time(data.get("started_at")) or ""
            metadata = zenodo_metadata(crate.name, crate.description, published, license, rdir.name,
                                       spec.model.reference, cff, ["netrepro", "reproducibility", spec.name, str(data.get("site"))])
            (Path(tmp) / "deposit.json").write_text(json.dumps(metadata, indent=1) + "\n", encoding="utf-8")
            staged.rename(out)
            try:
                (Path(tmp) / "deposit.json").rename(deposit_path(out))
            except OSError:
                (shutil.rmtree if out.is_dir() and not out.is_symlink() else Path.unlink)(out)
                raise
    except OSError as exc:
        raise RunFolderError(exc.filename or out, f"{exc.strerror or exc}; expected to read the run and write "
                                                  f"the crate at {out}: nothing was written") from None
    return out, deposit_path(out)


