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

Nothing of the run folder is written; the crate is written once, to a new path.

A crate read back (:func:`open_crate`, for ``netrepro analyze --run CRATE``) may come from
anyone, and is input only, never written: a folder crate is walked without following links
(:func:`verify_crate`: no link, FIFO or device, no file its metadata does not list, every file
as its sha256); a zip's central directory is checked before a byte is unpacked
(:func:`check_zip`: names, entry types, :data:`MAX_ENTRIES`, :data:`MAX_ENTRY_BYTES`,
:data:`MAX_TOTAL_BYTES`, :data:`MAX_RATIO`, the metadata), then it is unpacked into a
temporary folder, its sizes and sha256 enforced as it is read (:func:`unpack_crate`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import tempfile
import zipfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from netrepro.core.errors import RunFolderError
from netrepro.experiment.spec import REPO_ROOT
from netrepro.runfolder.deposit import software_url, zenodo_metadata
from netrepro.runfolder.integrity import no_links, plain_files, read_regular, sha256_file, verify_raw
from netrepro.runfolder.layout import (ANALYSIS_RECORD, RAW, RUN_JSON, SITE_DOCUMENT_RE, SITE_DOCUMENTS, TIMINGS,
                                      incomplete_problems, raw_dir, run_json)
from netrepro.runfolder.outputs import analysis_folders
from netrepro.runfolder.reading import read_run

#: The crate's metadata file (RO-Crate 1.1, section "RO-Crate Metadata File Descriptor").
CRATE_METADATA = "ro-crate-metadata.json"
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
#: How the Citation File Format 1.2.0 writes an ORCID: this prefix, then the bare iD.
ORCID_URL = "https://orcid.org/"
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


def first_mismatch(folder: Path, sums: dict[str, str]) -> tuple[str, str] | None:
    """The first file (path order) of ``sums`` (path relative to ``folder`` -> sha256 hex) that
    is not as recorded: ``(path, "missing")`` when it is absent, a link, not a plain file or
    outside ``folder``, ``(path, "altered")`` when its sha256 differs; None when all match."""
    for rel, digest in sorted(sums.items()):
        f = folder / rel
        if ".." in Path(rel).parts or f.is_symlink() or not f.is_file():
            return rel, "missing"
        if sha256_file(f) != digest:
            return rel, "altered"
    return None


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


#: The most bytes a CITATION.cff may hold. Citation files are a few kB (netrepro's own is
#: 2.6 kB; the Citation File Format 1.2.0 schema's longest fields are free text); 1 MiB is
#: hundreds of times that and still read and parsed at once.
CITATION_BYTES_MAX = 1 << 20


def read_citation(path: Path | str) -> dict:
    """A CITATION.cff (Citation File Format 1.2.0, https://citation-file-format.github.io)
    parsed: its mapping. The file comes from the user, maybe from a stranger: it must be a
    regular file (a link to one is followed; a FIFO or device is refused unread) of at most
    :data:`CITATION_BYTES_MAX` bytes (:func:`read_regular`), UTF-8, and is parsed by the strict
    YAML reader within its bounds on aliases and nesting (:func:`netrepro.core.yamlfile.loads`).

    Raises:
        RunFolderError: the file cannot be read, is not a regular file, is too large, is not
            UTF-8, or has no ``authors`` list; SpecError: not YAML, or past the reader's bounds
            (one line naming the file).
    """
    from netrepro.core.yamlfile import loads

    path = Path(path)
    what = "a CITATION.cff (Citation File Format 1.2.0)"
    raw = read_regular(path, CITATION_BYTES_MAX, what)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise RunFolderError(path, f"not UTF-8 text (at byte {exc.start}); expected {what}") from None
    data = loads(text, path)
    if not isinstance(data, dict) or not isinstance(data.get("authors"), list) or not data["authors"]:
        raise RunFolderError(path, "authors: expected a list of people or entities (Citation File Format 1.2.0)")
    _check_links(data, path)
    return data


def _check_links(data: dict, path: Path) -> None:
    """Check the fields of a CITATION.cff that the crate and the deposit link to: ``doi`` a
    DOI (:data:`~netrepro.runfolder.deposit.DOI_RE`), ``repository-code`` and ``url`` and each
    author's ``website`` http(s) URLs (:data:`~netrepro.runfolder.deposit.URL_RE`), each
    author's ``orcid`` ``https://orcid.org/<iD>`` (the Citation File Format 1.2.0's
    definitions ``doi``, ``url`` and ``orcid``). RunFolderError naming the field otherwise."""
    from netrepro.runfolder.deposit import DOI_RE, ORCID_RE, URL_RE

    def check(field: str, value: Any, ok: bool, what: str) -> None:
        if value is not None and not ok:
            raise RunFolderError(path, f"{field}: {str(value)[:80]!r} is not {what} (Citation File Format 1.2.0)")

    def matches(value: Any, rule: re.Pattern) -> bool:
        return isinstance(value, str) and bool(rule.match(value))

    check("doi", data.get("doi"), matches(data.get("doi"), DOI_RE), "a DOI (10.NNNN/suffix, without https://doi.org/)")
    for key in ("repository-code", "url"):
        check(key, data.get(key), matches(data.get(key), URL_RE), "an http(s) URL")
    for i, author in enumerate(data["authors"]):
        if isinstance(author, dict):
            site, iid = author.get("website"), author.get("orcid")
            check(f"authors[{i}].website", site, matches(site, URL_RE), "an http(s) URL")
            check(f"authors[{i}].orcid", iid, isinstance(iid, str) and iid.startswith(ORCID_URL)
                  and matches(iid[len(ORCID_URL):], ORCID_RE), f"an ORCID ({ORCID_URL}0000-0000-0000-000X)")


def _local_id(prefix: str, name: str) -> str:
    """A local @id ``#<prefix>-<name in lower case, runs of other characters as ->``."""
    return f"#{prefix}-" + re.sub(r"[^A-Za-z0-9]+", "-", name).strip("-").lower()


def cff_person(author: dict) -> tuple[str, dict]:
    """``(@id, properties)`` of a CITATION.cff author as a schema.org Person (``given-names``,
    ``family-names``) or Organization (``name``), with ``url`` its ``website`` when it has one:
    @id its ORCID URL when it has one, else ``#author-<name>``. A person's ``affiliation`` is
    not among the properties: :func:`affiliation` makes it an entity of its own."""
    if author.get("family-names"):
        name = " ".join(str(author[k]) for k in ("given-names", "family-names") if author.get(k))
        props = {"@type": "Person", "name": name, "familyName": str(author["family-names"])}
        if author.get("given-names"):
            props["givenName"] = str(author["given-names"])
    else:
        name = str(author.get("name") or "unnamed")
        props = {"@type": "Organization", "name": name}
    if author.get("website"):
        props["url"] = str(author["website"])
    ident = str(author["orcid"]) if str(author.get("orcid", "")).startswith(ORCID_URL) else _local_id("author", name)
    return ident, props


def affiliation(author: dict) -> tuple[str, dict] | None:
    """``(@id, properties)`` of a CITATION.cff person's ``affiliation`` as a schema.org
    Organization ``#org-<name>`` (RO-Crate 1.1, "Contextual entities", People: an affiliation
    is an Organization entity), or None without one. A CITATION.cff gives an affiliation's
    name only, so the Organization has no ``url``."""
    if not author.get("family-names") or not author.get("affiliation"):
        return None
    name = str(author["affiliation"])
    return _local_id("org", name), {"@type": "Organization", "name": name}


def references(reference: dict) -> list[tuple[str, dict]]:
    """``(@id, properties)`` of each work the experiment file's ``reference`` cites: a
    ``<key>_doi`` (``10.NNNN/...``) as a ScholarlyArticle at https://doi.org/<doi>, a
    ``<key>_url`` as a CreativeWork at the URL, each named by the ``<key>`` text (``paper``,
    ``reproduction``) when the file has one; the other texts, as the file states them, in
    one CreativeWork ``#reference`` (none when there are none)."""
    out, linked = [], set()
    for key, value in reference.items():
        for suffix, kind, url in (("_doi", "ScholarlyArticle", "https://doi.org/{}"), ("_url", "CreativeWork", "{}")):
            if key.endswith(suffix):
                base = key[:-len(suffix)]
                linked |= {key, base}
                out.append((url.format(value), {"@type": kind, "name": str(reference.get(base) or value)}))
    rest = [f"{k}: {v}" for k, v in reference.items() if k not in linked]
    if rest:
        out.append(("#reference", {"@type": "CreativeWork", "name": "; ".join(rest)}))
    return out


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
        verdict = json.loads((analysed / "verdict.json").read_text(encoding="utf-8")).get("verdict", "not analysed")
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


#: The most entries a crate may hold (files and folders). The largest recorded crate
#: (docs/runs/pie-vs-red-crate-local-vm-2026-11-29: pie-vs-red's four trials of seven nodes at
#: full length) holds 271; 20,000 is 70 times that: a sweep of 10 points at REPEAT=5 fits.
MAX_ENTRIES = 20_000
#: The most bytes one file of a crate may unpack to. The recorded crate's largest is 1.7 MB
#: (a router's qdisc.jsonl, 1230 s of samples); 256 MiB is 150 times that.
MAX_ENTRY_BYTES = 256 << 20
#: The most bytes a crate may unpack to in all. The recorded crate unpacks to 14.4 MB; 2 GiB is
#: 140 times that, and bounds what a zip can make the disk hold.
MAX_TOTAL_BYTES = 2 << 30
#: The most a file may inflate: its size over its compressed size. The recorded crate's highest
#: is 15 (qdisc.jsonl); 100 is Apache POI's bound against zip bombs (``ZipSecureFile``'s
#: default ``MIN_INFLATE_RATIO`` 0.01), while deflate reaches about 1032 on zeros (zlib's
#: technical details, https://www.zlib.net/zlib_tech.html).
MAX_RATIO = 100
#: Files smaller than this are not held to :data:`MAX_RATIO` (an empty or tiny file inflates
#: far, harmlessly): POI's ``GRACE_ENTRY_SIZE``, 100 kB.
RATIO_GRACE_BYTES = 100_000
#: The most bytes the crate's metadata file may hold; it is read whole and parsed. The recorded
#: crate's is 253 kB for 271 entries (about 1 kB each); 32 MiB holds :data:`MAX_ENTRIES`.
MAX_METADATA_BYTES = 32 << 20
#: The most bytes of one name in a path, and of a whole path (Linux's NAME_MAX and PATH_MAX,
#: <linux/limits.h>): a longer name cannot be made on the disk.
NAME_MAX, PATH_MAX = 255, 4096
#: What a crate must be, in the messages that refuse one.
EXPORTED = "a crate as `netrepro export` writes it"


def _shown(name: str) -> str:
    """A name from a crate for a message: its repr, cut to 80 characters with its length."""
    return repr(name) if len(name) <= 80 else f"{name[:80]!r}... ({len(name)} characters)"


def path_problem(rel: str) -> str | None:
    """Why ``rel`` (a zip entry's name without its trailing ``/``, or a file's ``@id`` in the
    metadata) cannot be a path inside a crate, or None: empty; absolute or with a backslash; a
    control character; an empty, ``.`` or ``..`` part; a part longer than :data:`NAME_MAX`
    bytes or the whole longer than :data:`PATH_MAX` bytes (UTF-8)."""
    if not rel:
        return "an empty name"
    if rel.startswith("/") or "\\" in rel:
        return "an absolute name or one with a backslash"
    if any(ord(c) < 32 or ord(c) == 127 for c in rel):
        return "a control character in the name"
    parts = rel.split("/")
    if any(p in ("", ".", "..") for p in parts):
        return "an empty, '.' or '..' part in the name"
    size = len(rel.encode("utf-8", "surrogatepass"))
    longest = max(len(p.encode("utf-8", "surrogatepass")) for p in parts)
    if longest > NAME_MAX or size > PATH_MAX:
        return f"a name too long for a disk (parts of at most {NAME_MAX} bytes, paths of at most {PATH_MAX})"
    return None


def metadata_files(raw: bytes, path: Path | str) -> dict[str, str]:
    """The files an RO-Crate metadata file (``raw``: its bytes, read from ``path``) lists:
    path relative to the crate -> sha256 hex (64 lowercase hex digits).

    The metadata must be JSON-LD whose ``@graph`` is a list of entities (objects with an
    ``@id``), each ``@id`` once, the metadata descriptor (``@id`` :data:`CRATE_METADATA`,
    RO-Crate 1.1 section "RO-Crate Metadata File Descriptor") among them; every entity of
    ``@type`` File with its ``sha256``, a path inside the crate (:func:`path_problem`).

    Raises:
        RunFolderError: naming ``path`` (and the entity) and what was expected.
    """
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as exc:
        raise RunFolderError(path, f"not UTF-8 JSON ({str(exc)[:80]}); expected an RO-Crate's metadata (JSON-LD)") from None
    graph = doc.get("@graph") if isinstance(doc, dict) else None
    if not isinstance(graph, list):
        raise RunFolderError(path, "@graph: expected a list of the crate's entities (JSON-LD, RO-Crate 1.1)")
    seen: set[str] = set()
    out: dict[str, str] = {}
    for i, e in enumerate(graph):
        ident = e.get("@id") if isinstance(e, dict) else None
        if not isinstance(ident, str):
            raise RunFolderError(path, f"@graph[{i}]: expected an entity, an object with an @id")
        if ident in seen:
            raise RunFolderError(path, f"@graph: {_shown(ident)} appears twice; expected each entity once")
        seen.add(ident)
        types = e.get("@type") if isinstance(e.get("@type"), list) else [e.get("@type")]
        if "sha256" not in e and "File" not in types:
            continue
        digest = e.get("sha256")
        if not (isinstance(digest, str) and re.fullmatch(r"[0-9a-f]{64}", digest)):
            raise RunFolderError(path, f"{_shown(ident)}: sha256: expected the file's sha256 (64 hex digits), "
                                       f"as {EXPORTED}")
        problem = path_problem(ident)
        if problem:
            raise RunFolderError(path, f"{_shown(ident)}: {problem}; expected a path inside the crate")
        out[ident] = digest
    if CRATE_METADATA not in seen:
        raise RunFolderError(path, f"@graph: no entity {CRATE_METADATA!r}; expected the metadata descriptor (RO-Crate 1.1)")
    if not out:
        raise RunFolderError(path, f"lists no file with its sha256; expected every file's sha256, as {EXPORTED}")
    return out


def is_crate(path: Path | str) -> bool:
    """Whether ``path`` is an RO-Crate: a folder holding :data:`CRATE_METADATA`, or a readable
    zip file holding it at its top (False for a damaged zip: :func:`open_crate` says why)."""
    path = Path(path)
    if path.is_dir():
        return (path / CRATE_METADATA).is_file()
    try:
        with zipfile.ZipFile(path) as z:
            return CRATE_METADATA in z.namelist()
    except (OSError, ValueError, EOFError, zipfile.BadZipFile):
        return False


def crate_tree(folder: Path) -> list[str]:
    """The files of the folder crate ``folder``: paths relative to it (POSIX), sorted. Walked
    without following any link (:func:`netrepro.runfolder.integrity.plain_files`), so that a
    link cannot lead a reader outside the crate, and a FIFO cannot block it.

    Raises:
        RunFolderError: naming the first symbolic link or special file (FIFO, socket, device),
            or a crate of more than :data:`MAX_ENTRIES` files.
    """
    files = plain_files(folder, "expected only plain files and folders in a crate (links are not followed)")
    if len(files) > MAX_ENTRIES:
        raise RunFolderError(folder, f"more than {MAX_ENTRIES} files; expected {EXPORTED}")
    return [f.relative_to(folder).as_posix() for f in files]


def crate_files(folder: Path) -> dict[str, str]:
    """The files the metadata of the folder crate ``folder`` lists: path relative to the crate
    -> sha256 hex (:func:`metadata_files`). The metadata file is read only when it is a
    regular file (``os.lstat``: not a link) whose size is at most :data:`MAX_METADATA_BYTES`,
    and then at most one byte more is read (:func:`read_regular`).

    Raises:
        RunFolderError: naming the metadata file: missing, not a regular file, too large, or
            not the metadata of a crate netrepro exported.
    """
    path = folder / CRATE_METADATA
    what = f"an RO-Crate's metadata of at most {MAX_METADATA_BYTES} bytes"
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise RunFolderError(path, f"cannot be read ({exc.strerror}); expected {what}") from None
    if not stat.S_ISREG(st.st_mode):
        raise RunFolderError(path, f"not a regular file; expected {what}")
    if st.st_size > MAX_METADATA_BYTES:
        raise RunFolderError(path, f"{st.st_size} bytes; expected {what}")
    return metadata_files(read_regular(path, MAX_METADATA_BYTES, what), path)


def verify_crate(folder: Path) -> None:
    """Check the folder crate ``folder`` as it is, reading nothing through a link: only plain
    files and folders (:func:`crate_tree`), each file listed in the metadata
    (:func:`crate_files`; the metadata file itself excepted) with the bytes the metadata
    records (``sha256``). Returns nothing.

    Raises:
        RunFolderError: naming the first link or special file, the metadata's problem, the
            first file the metadata does not list, or the first file whose bytes differ from
            the record, or that is missing.
    """
    files = crate_tree(folder)
    sums = crate_files(folder)
    unlisted = [f for f in files if f not in sums and f != CRATE_METADATA]
    if unlisted:
        raise RunFolderError(folder / unlisted[0], f"not listed in {CRATE_METADATA}; expected only the files the "
                                                   "crate's metadata lists")
    bad = first_mismatch(folder, sums)
    if bad and bad[1] == "missing":
        raise RunFolderError(folder / bad[0], "missing or not a file; expected the file the crate's metadata lists")
    if bad:
        raise RunFolderError(folder / bad[0], f"its sha256 differs from the crate's record ({CRATE_METADATA}); "
                                              "expected the file as exported")


#: What reading a damaged zip raises: zipfile's own error (a bad CRC, a bad local header, a
#: local name that is not the central directory's), zlib's (bad deflate data), a cut file.
_DAMAGED = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError)


def _open_zip(path: Path) -> zipfile.ZipFile:
    """``path`` opened as a zip; RunFolderError naming it when it is not a readable one."""
    try:
        return zipfile.ZipFile(path)
    except _DAMAGED as exc:
        raise RunFolderError(path, f"not a readable zip file ({str(exc)[:80]}); expected {EXPORTED}") from None


def check_zip(z: zipfile.ZipFile, path: Path) -> dict[str, str]:
    """The files the crate zip ``z`` (opened from ``path``) lists in its metadata (path ->
    sha256 hex), after checking its central directory, before anything is unpacked: at most
    :data:`MAX_ENTRIES` entries; names that are paths inside the crate (:func:`path_problem`),
    each once, none both a file and a folder; only files and folders (no link, FIFO or
    device), stored or deflated, unencrypted; each file at most :data:`MAX_ENTRY_BYTES`,
    inflating at most :data:`MAX_RATIO` times, all at most :data:`MAX_TOTAL_BYTES`; the
    metadata at most :data:`MAX_METADATA_BYTES` (:func:`metadata_files`); every file listed
    in it and every listed file there.

    Raises:
        RunFolderError: naming ``path``, the entry and what was expected.
    """
    infos = z.infolist()
    if len(infos) > MAX_ENTRIES:
        raise RunFolderError(path, f"{len(infos)} entries; expected at most {MAX_ENTRIES} (the largest recorded crate "
                                   "holds 271)")
    files: dict[str, zipfile.ZipInfo] = {}
    folders: set[str] = set()
    total = 0
    for info in infos:
        name, shown = info.filename, _shown(info.filename)
        rel = name[:-1] if name.endswith("/") else name
        problem = path_problem(rel)
        if problem:
            raise RunFolderError(path, f"entry {shown}: {problem}; expected a path inside the crate")
        kind = (info.external_attr >> 16) & 0o170000
        if kind not in (0, stat.S_IFREG, stat.S_IFDIR) or (kind == stat.S_IFDIR) != name.endswith("/"):
            raise RunFolderError(path, f"entry {shown}: a link or special file; expected only files and folders")
        if rel in files or rel in folders:
            raise RunFolderError(path, f"entry {shown}: a second entry of this name; expected each file and folder once")
        parents = {"/".join(rel.split("/")[:i]) for i in range(1, rel.count("/") + 1)}
        if parents & files.keys() or (not name.endswith("/") and any(f.startswith(rel + "/") for f in folders)):
            raise RunFolderError(path, f"entry {shown}: a file and a folder of one name; expected each name to be one")
        folders |= parents
        if name.endswith("/"):
            folders.add(rel)
            continue
        if rel in folders:
            raise RunFolderError(path, f"entry {shown}: a file and a folder of one name; expected each name to be one")
        if info.flag_bits & 0x1 or info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise RunFolderError(path, f"entry {shown}: encrypted or compressed with method {info.compress_type}; "
                                       "expected stored or deflated, unencrypted (as netrepro export writes)")
        limit = MAX_METADATA_BYTES if rel == CRATE_METADATA else MAX_ENTRY_BYTES
        total += info.file_size
        if info.file_size > limit:
            raise RunFolderError(path, f"entry {shown}: unpacks to {info.file_size} bytes; expected at most {limit}")
        if total > MAX_TOTAL_BYTES:
            raise RunFolderError(path, f"unpacks to more than {MAX_TOTAL_BYTES} bytes; expected at most that in all")
        if info.file_size > RATIO_GRACE_BYTES and info.file_size > MAX_RATIO * info.compress_size:
            raise RunFolderError(path, f"entry {shown}: {info.compress_size} bytes inflate to {info.file_size}; "
                                       f"expected at most {MAX_RATIO} times (a zip bomb?)")
        files[rel] = info
    if CRATE_METADATA not in files:
        raise RunFolderError(path, f"no {CRATE_METADATA} at its top; expected {EXPORTED}")
    where = f"{path}: {CRATE_METADATA}"
    try:
        with z.open(files[CRATE_METADATA]) as fh:
            raw = fh.read(MAX_METADATA_BYTES + 1)
    except _DAMAGED as exc:
        raise RunFolderError(where, f"damaged ({str(exc)[:80]}); expected {EXPORTED}") from None
    if len(raw) > MAX_METADATA_BYTES:
        raise RunFolderError(where, f"more than {MAX_METADATA_BYTES} bytes; expected at most that")
    sums = metadata_files(raw, where)
    unlisted = sorted(set(files) - set(sums) - {CRATE_METADATA})
    if unlisted:
        raise RunFolderError(path, f"entry {_shown(unlisted[0])}: not listed in {CRATE_METADATA}; expected only the "
                                   "files the crate's metadata lists")
    missing = sorted(set(sums) - set(files))
    if missing:
        raise RunFolderError(path, f"{_shown(missing[0])}: missing; expected the file the crate's metadata lists")
    return sums


def _extract(z: zipfile.ZipFile, path: Path, into: Path, sums: dict[str, str]) -> None:
    """Write the files and folders of the checked zip ``z`` (:func:`check_zip`) into the new
    folder ``into``, each file created anew (``open(..., "xb")``) and streamed in 1 MiB blocks,
    never more bytes than its entry declares nor :data:`MAX_TOTAL_BYTES` in all (a lying
    header: zipfile stops at the declared size, and a short or long stream fails its CRC), its
    sha256 checked against ``sums``.

    Raises:
        RunFolderError: naming ``path`` and the entry (damaged, too long, not as recorded);
        OSError: ``into`` cannot be written.
    """
    total = 0
    for info in z.infolist():
        target, shown = into / info.filename, _shown(info.filename)
        if info.filename.endswith("/"):
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        digest, size = hashlib.sha256(), 0
        with open(target, "xb") as dst:
            try:
                with z.open(info) as src:
                    while block := src.read(1 << 20):
                        size, total = size + len(block), total + len(block)
                        if size > info.file_size:
                            raise RunFolderError(path, f"entry {shown}: inflates past its declared {info.file_size} "
                                                       "bytes; expected the sizes the zip declares")
                        if total > MAX_TOTAL_BYTES:
                            raise RunFolderError(path, f"unpacks to more than {MAX_TOTAL_BYTES} bytes; expected at "
                                                       "most that in all")
                        digest.update(block)
                        dst.write(block)
            except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
                raise RunFolderError(path, f"entry {shown}: damaged ({str(exc)[:80]}); expected {EXPORTED}") from None
        if info.filename != CRATE_METADATA and digest.hexdigest() != sums[info.filename]:
            raise RunFolderError(path, f"entry {shown}: its sha256 differs from the crate's record ({CRATE_METADATA}); "
                                       "expected the file as exported")


def check_crate(path: Path | str) -> None:
    """Every check of the crate at ``path`` that writes nothing: a folder crate in full
    (:func:`verify_crate`); a zip's central directory and metadata (:func:`check_zip`; its
    bytes are checked as it is unpacked, :func:`unpack_crate`). Returns nothing.

    Raises:
        RunFolderError: one line naming the file and what was expected.
    """
    path = Path(path)
    if path.is_dir() and is_crate(path):
        verify_crate(path)
        return
    if not path.is_file():
        raise RunFolderError(path, f"not an RO-Crate; expected a folder or zip holding {CRATE_METADATA}")
    with _open_zip(path) as z:
        check_zip(z, path)


def unpack_crate(zip_path: Path | str, into: Path | str) -> Path:
    """Unpack the crate zip ``zip_path`` into the new folder ``into`` (its parent must exist)
    and return ``into``: its central directory and metadata checked first (:func:`check_zip`),
    then every file written and checked against its sha256 (:func:`_extract`). On any error
    ``into`` is removed.

    Raises:
        RunFolderError: naming the zip and the entry (or ``into`` when it cannot be made or
            written: exists, no room) and what was expected.
    """
    zip_path, into = Path(zip_path), Path(into)
    with _open_zip(zip_path) as z:
        sums = check_zip(z, zip_path)
        try:
            into.mkdir()
        except OSError as exc:
            raise RunFolderError(into, f"cannot be made ({exc.strerror}); expected a new folder to unpack "
                                       f"{zip_path.name} into") from None
        try:
            _extract(z, zip_path, into, sums)
        except BaseException as exc:
            shutil.rmtree(into, ignore_errors=True)
            if isinstance(exc, OSError):
                raise RunFolderError(into, f"cannot be written ({exc.strerror}); expected room to unpack "
                                           f"{zip_path.name} (at most {MAX_TOTAL_BYTES} bytes)") from None
            raise
    return into


@contextmanager
def open_crate(path: Path | str, scratch: Path | None = None) -> Iterator[Path]:
    """The run folder of the crate at ``path``, checked, for the time of a ``with`` block:
    a folder crate is read in place (:func:`verify_crate`; nothing is written into it); a zip
    is unpacked (:func:`unpack_crate`) into a new temporary folder in ``scratch`` (default:
    the system's temporary folder), as ``<zip name without .zip>/``, removed when the block
    ends. A crate is input only: it stays byte for byte as published.

    Raises:
        RunFolderError: one line naming the file and what was expected: not a crate, a link or
            special file, bad metadata, a file not listed or not as recorded, a damaged zip or
            one past the bounds (:data:`MAX_ENTRIES`, ...), ``scratch`` not writable.
    """
    path = Path(path)
    if path.is_dir() and is_crate(path):
        verify_crate(path)
        yield path
        return
    if not path.is_file():
        raise RunFolderError(path, f"not an RO-Crate; expected a folder or zip holding {CRATE_METADATA}")
    try:
        tmp = tempfile.TemporaryDirectory(prefix=".crate-", dir=scratch)
    except OSError as exc:
        raise RunFolderError(scratch or tempfile.gettempdir(), f"cannot hold a temporary folder ({exc.strerror}); "
                                                               f"expected a folder to unpack {path.name} into") from None
    with tmp:
        yield unpack_crate(path, Path(tmp.name) / path.name.removesuffix(".zip"))
