"""The deposit metadata an archive needs to give an exported run a DOI: Zenodo's
(https://developers.zenodo.org/#representation, "Deposit metadata"), from the run, the
experiment file's ``reference`` and a CITATION.cff. ``netrepro export`` writes it beside the
crate as ``<crate>.zenodo.json``; docs/publishing-a-run.md says how to upload both.
"""

from __future__ import annotations

import html
import re

#: Zenodo's relation of this upload to the works the experiment file cites (DataCite's
#: relationType, as Zenodo's ``related_identifiers`` take it), and to the software that made it.
CITES, MADE_BY = "references", "isCompiledBy"
#: A DOI (https://www.doi.org/the-identifier/resources/handbook: prefix ``10.NNNN``, a suffix).
DOI_RE = re.compile(r"^10\.[0-9]{4,9}/\S+$")


def creator(author: dict) -> dict:
    """A CITATION.cff author as a Zenodo creator: ``{"name": "Family, Given"}`` (or the
    entity's name), with ``orcid`` (bare, without https://orcid.org/) and ``affiliation`` when
    it has them."""
    if author.get("family-names"):
        name = str(author["family-names"]) + (f", {author['given-names']}" if author.get("given-names") else "")
    else:
        name = str(author.get("name") or "unnamed")
    out = {"name": name}
    orcid = str(author.get("orcid") or "")
    if orcid:
        out["orcid"] = orcid.rsplit("/", 1)[-1]
    if author.get("affiliation"):
        out["affiliation"] = str(author["affiliation"])
    return out


def related(reference: dict, cff: dict) -> list[dict]:
    """Zenodo ``related_identifiers``: each ``<key>_doi`` or ``<key>_url`` of the experiment
    file's ``reference`` (:data:`CITES`), and the software's DOI or repository from the
    CITATION.cff (``doi``, ``repository-code``, ``url``; :data:`MADE_BY`)."""
    out = [{"identifier": str(v), "relation": CITES, "resource_type": "publication"}
           for k, v in reference.items() if k.endswith("_doi") or k.endswith("_url")]
    software = cff.get("doi") or cff.get("repository-code") or cff.get("url")
    if software:
        out.append({"identifier": str(software), "relation": MADE_BY, "resource_type": "software"})
    return out


def zenodo_metadata(title: str, description: str, published: str, license: str, version: str,
                    reference: dict, cff: dict, keywords: list[str]) -> dict:
    """``{"metadata": {...}}``, the body Zenodo's deposit API takes (``PUT
    /api/deposit/depositions/<id>``): ``upload_type`` dataset, ``title``, ``creators`` (the
    CITATION.cff's authors, :func:`creator`), ``description`` (HTML-escaped), ``access_right``
    open, ``license`` (the SPDX identifier in lower case, as Zenodo's licence ids are),
    ``publication_date`` (``published``'s date, YYYY-MM-DD), ``version``, ``keywords`` (the run's,
    not the CITATION.cff's, which describe the software) and
    ``related_identifiers`` (:func:`related`)."""
    return {"metadata": {
        "upload_type": "dataset", "title": title,
        "creators": [creator(a) for a in cff.get("authors") or [] if isinstance(a, dict)],
        "description": f"<p>{html.escape(description)}</p>", "access_right": "open", "license": license.lower(),
        "publication_date": published[:10], "version": version,
        "keywords": list(dict.fromkeys(keywords)),
        "related_identifiers": related(reference, cff)}}
