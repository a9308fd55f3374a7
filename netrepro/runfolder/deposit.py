"""The deposit metadata an archive needs to give an exported run a DOI, from the run, the
experiment file's ``reference`` and a CITATION.cff. ``netrepro export`` writes it beside the
crate as ``<crate>.zenodo.json``; docs/publishing-a-run.md says how to upload both.

The form is the current Zenodo REST API's: the draft record of InvenioRDM, the software Zenodo
runs since October 2023 (``POST https://zenodo.org/api/records``; the fields are InvenioRDM's
"Metadata reference", https://inveniordm.docs.cern.ch/reference/metadata/, and its
"Drafts and Records" REST API page; Zenodo's maintainers confirm that those payloads are valid
for Zenodo, zenodo/zenodo#2544). Not the legacy deposit form (``/api/deposit/depositions``,
https://developers.zenodo.org "Deposit metadata"): Zenodo now loads that form through
``LegacyRecordTransform._creator`` (zenodo-rdm, site/zenodo_rdm/legacy/deserializers/schemas.py),
which makes every creator ``"type": "personal"`` and splits its ``name`` with nameparser, so an
organisation such as "The netrepro developers" could only be cited as a person. In the
current form an organisation is ``{"type": "organizational", "name": ...}`` and is cited by
its name.
"""

from __future__ import annotations

import html
import re

#: The relation of this record to the works the experiment file cites, and to the software
#: that made it: ids of InvenioRDM's ``relation_types`` vocabulary (DataCite's relationType,
#: lower case; invenio-rdm-records, fixtures/data/vocabularies/relation_types.yaml).
CITES, MADE_BY = "references", "iscompiledby"
#: The record's type and the related works' types: ids of InvenioRDM's ``resource_types``
#: vocabulary (invenio-rdm-records, fixtures/data/vocabularies/resource_types.yaml).
DATASET, PUBLICATION, SOFTWARE = "dataset", "publication", "software"
#: A DOI (https://www.doi.org/the-identifier/resources/handbook: prefix ``10.NNNN``, a suffix).
DOI_RE = re.compile(r"^10\.[0-9]{4,9}/\S+$")
#: An ORCID iD, bare (ORCID's "Structure of the ORCID Identifier": four groups of four
#: digits, the last character a digit or X, the checksum).
ORCID_RE = re.compile(r"^[0-9]{4}-[0-9]{4}-[0-9]{4}-[0-9]{3}[0-9X]$")
#: A web address a CITATION.cff may give (``repository-code``, ``url``, an author's
#: ``website``: the Citation File Format 1.2.0's ``url`` definition, an http(s) URI).
URL_RE = re.compile(r"^https?://[^\s/$.?#][^\s]*$")


def orcid(author: dict) -> str | None:
    """The bare ORCID iD (``0000-0002-1825-0097``) of a CITATION.cff author, whose ``orcid``
    the Citation File Format 1.2.0 writes as ``https://orcid.org/<iD>``; None when it has none
    or it is not one."""
    value = str(author.get("orcid") or "").rsplit("/", 1)[-1]
    return value if ORCID_RE.match(value) else None


def creator(author: dict) -> dict:
    """A CITATION.cff author as an InvenioRDM creator (Metadata reference, "Creators (1-n)"):

    - a person (``family-names``): ``{"person_or_org": {"type": "personal", "family_name",
      "given_name" (when it has ``given-names``), "identifiers": [{"scheme": "orcid",
      "identifier": <bare iD>}] (when it has an ORCID)}, "affiliations": [{"name"}] (when it
      has one)}``;
    - an entity (``name``): ``{"person_or_org": {"type": "organizational", "name"}}``, cited by
      its name as written ("affiliations" are a person's only, by the same section).
    """
    if author.get("family-names"):
        who = {"type": "personal", "family_name": str(author["family-names"])}
        if author.get("given-names"):
            who["given_name"] = str(author["given-names"])
        out = {"person_or_org": who}
        if author.get("affiliation"):
            out["affiliations"] = [{"name": str(author["affiliation"])}]
    else:
        out = {"person_or_org": {"type": "organizational", "name": str(author.get("name") or "unnamed")}}
    iid = orcid(author)
    if iid:
        out["person_or_org"]["identifiers"] = [{"scheme": "orcid", "identifier": iid}]
    return out


def software_link(cff: dict) -> tuple[str, str] | None:
    """``(identifier, scheme)`` of the software a CITATION.cff describes, as a related
    identifier takes it: its ``doi`` (scheme ``doi``), else its ``repository-code``, else its
    ``url`` (scheme ``url``); None when it gives none that is a DOI or an http(s) URL
    (:data:`DOI_RE`, :data:`URL_RE`; :func:`netrepro.runfolder.citation.read_citation` refuses
    a malformed one)."""
    doi = str(cff.get("doi") or "")
    if DOI_RE.match(doi):
        return doi, "doi"
    for key in ("repository-code", "url"):
        value = str(cff.get(key) or "")
        if URL_RE.match(value):
            return value, "url"
    return None


def software_url(cff: dict) -> str | None:
    """The web address of the software a CITATION.cff describes (:func:`software_link`; a DOI
    as its resolver's URL, ``https://doi.org/<doi>``), or None."""
    link = software_link(cff)
    if link is None:
        return None
    return f"https://doi.org/{link[0]}" if link[1] == "doi" else link[0]


def related(reference: dict, cff: dict) -> list[dict]:
    """InvenioRDM ``related_identifiers`` (Metadata reference, "Related identifiers/works
    (0-n)"): each ``<key>_doi`` (scheme ``doi``) or ``<key>_url`` (scheme ``url``) of the
    experiment file's ``reference``, related by :data:`CITES` as a :data:`PUBLICATION`; and the
    software that made the run (:func:`software_link`, from the CITATION.cff's ``doi``,
    ``repository-code`` or ``url``), related by :data:`MADE_BY` as :data:`SOFTWARE`. Each
    ``{"identifier", "scheme", "relation_type": {"id"}, "resource_type": {"id"}}``."""
    def item(identifier: str, scheme: str, relation: str, kind: str) -> dict:
        return {"identifier": identifier, "scheme": scheme, "relation_type": {"id": relation},
                "resource_type": {"id": kind}}

    out = [item(str(v), "doi" if k.endswith("_doi") else "url", CITES, PUBLICATION)
           for k, v in reference.items() if k.endswith("_doi") or k.endswith("_url")]
    software = software_link(cff)
    if software:
        out.append(item(*software, MADE_BY, SOFTWARE))
    return out


def zenodo_metadata(title: str, description: str, published: str, license: str, version: str,
                    reference: dict, cff: dict, keywords: list[str]) -> dict:
    """The body of InvenioRDM's "Create a draft record" (``POST /api/records``, Drafts and
    Records REST API), as Zenodo takes it: ``{"metadata": {...}, "files": {"enabled": true}}``
    (files: the crate is uploaded to the draft). ``access`` is left out: the record and its
    files are then public (Metadata reference, "Access"), and Zenodo refused a personal token
    that set it ("You don't have permissions to manage record access",
    galaxyproject/galaxy#16900). The metadata: ``resource_type`` :data:`DATASET`; ``title``;
    ``creators`` (the CITATION.cff's authors, :func:`creator`); ``description`` (HTML-escaped text in a
    paragraph: the field takes HTML); ``rights`` ``[{"id": <the SPDX identifier in lower
    case>}]`` (the licences vocabulary's ids, SPDX's by default); ``publication_date``
    (``published``'s date, YYYY-MM-DD, EDTF level 0); ``version``; ``subjects`` (the run's
    keywords as free ``{"subject"}``s, each once: not the CITATION.cff's, which describe the
    software); ``related_identifiers`` (:func:`related`). ``publisher`` is left to the archive
    (it defaults to the archive's name, "Zenodo")."""
    return {"metadata": {
        "resource_type": {"id": DATASET}, "title": title,
        "creators": [creator(a) for a in cff.get("authors") or [] if isinstance(a, dict)],
        "description": f"<p>{html.escape(description)}</p>", "rights": [{"id": license.lower()}],
        "publication_date": published[:10], "version": version,
        "subjects": [{"subject": k} for k in dict.fromkeys(keywords)],
        "related_identifiers": related(reference, cff)},
        "files": {"enabled": True}}
