"""Who and what a crate cites: a CITATION.cff read and checked (its authors, their
affiliations, the software's address) and the works an experiment file's ``reference`` names,
as schema.org entities (``(@id, properties)``) for :mod:`netrepro.runfolder.crate` and the
deposit (:mod:`netrepro.runfolder.deposit`).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from netrepro.core.errors import RunFolderError
from netrepro.runfolder.integrity import read_regular

#: How the Citation File Format 1.2.0 writes an ORCID: this prefix, then the bare iD.
ORCID_URL = "https://orcid.org/"
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
