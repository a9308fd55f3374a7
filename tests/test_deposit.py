"""The deposit metadata ``netrepro export`` writes beside a crate (netrepro/runfolder/deposit.py)
checked against the field rules of the service that takes it, as its documentation writes them,
not against netrepro's writer.

The service: Zenodo's current REST API, which is InvenioRDM's (``POST /api/records``; Zenodo's
maintainers, zenodo/zenodo#2544: "the payloads at the InvenioRDM documentation ... would be valid
for the Zenodo REST API too"). The rules below are transcribed from:

- [MD] InvenioRDM's "Metadata reference", inveniosoftware/docs-invenio-rdm
  docs/reference/metadata.md at commit 8064a4b2b2e0dda7f8b1408a0c30a8fb881c991e (2026-08-07),
  https://inveniordm.docs.cern.ch/reference/metadata/ (section named in each rule);
- [API] its "Drafts and Records" page, docs/reference/rest_api_drafts_records.md at the same
  commit, "Create a draft record" (the body's keys, "Files Options");
- [CV] the controlled vocabularies the metadata reference links to: invenio-rdm-records
  fixtures/data/vocabularies/resource_types.yaml and relation_types.yaml at commit
  1f23bb9e5b651d6d181ee8019d63bdffe3457161 (ids only), and the identifier schemes of [MD]
  "Identifier schemes".

Why not the legacy deposit form: Zenodo loads it through zenodo-rdm's
``LegacyRecordTransform._creator``, which makes every creator personal and splits its name
(docs/publishing-a-run.md); the first test shows the legacy body netrepro wrote before fails
these rules, naming the creator.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from analysis import analyze
from netrepro.core.errors import RunFolderError
from netrepro.runfolder.citation import read_citation
from netrepro.runfolder.crate import export_run
from netrepro.runfolder.deposit import related, zenodo_metadata

ROOT = Path(__file__).resolve().parent.parent
RUN = ROOT / "tests" / "data" / "labs" / "pie-lab-local-0.2"

# --- the vocabularies ([CV], [MD] "Identifier schemes") ---------------------------------------------
RESOURCE_TYPES = set("""publication publication-annotationcollection publication-book publication-section
publication-conferencepaper publication-conferenceproceeding publication-datamanagementplan publication-journal
publication-article publication-patent publication-peerreview publication-preprint publication-deliverable
publication-milestone publication-proposal publication-report publication-softwaredocumentation
publication-taxonomictreatment publication-technicalnote publication-workingpaper publication-datapaper
publication-dissertation publication-standard publication-studyregistration publication-other poster presentation
event dataset image image-figure image-plot image-drawing image-diagram image-photo image-other model video audio
software lesson software-computationalnotebook other physicalobject workflow project instrument""".split())
RELATION_TYPES = set("""iscitedby cites issupplementto issupplementedby iscontinuedby continues isdescribedby
describes hasmetadata ismetadatafor hasversion isversionof isnewversionof ispreviousversionof ispartof haspart
ispublishedin isreferencedby references isdocumentedby documents iscompiledby compiles isvariantformof
isoriginalformof isidenticalto isreviewedby reviews isderivedfrom issourceof isrequiredby requires isobsoletedby
obsoletes istranslationof hastranslation iscollectedby collects other""".split())
IDENTIFIER_SCHEMES = set("""ark arxiv ads crossreffunderid doi ean13 eissn grid handle igsn isbn isni issn istc
lissn lsid pmid purl upc url urn w3id other""".split())
#: [MD] "Creators (1-n)": "Supported creator identifier schemes", lower case.
CREATOR_SCHEMES = {"orcid", "gnd", "isni", "ror"}
#: [MD] "Publication date (1)": EDTF level 0, a date (year, month or day precision) or an interval.
EDTF_DATE = r"\d{4}(-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?)?"
EDTF_L0 = re.compile(rf"^{EDTF_DATE}(/{EDTF_DATE})?$")

# --- the rules: (source and section, path, rule, argument) ------------------------------------------
# A path names values: "a.b" the key b of a, "a[]" each item of the list a. "keys", "any of" and
# "one of" judge each object the path names; the others each object its parent names, where the
# value may be missing unless the rule is "required", "list" or "if <type>" (cardinality 1).
RULES = [
    ("API Create a draft record: body parameters", "", "keys", {"access", "files", "metadata", "custom_fields", "pids"}),
    ("API Files Options: enabled *Required* (so the options are given)", "files", "required", None),
    ("API Files Options: enabled *Required*", "files.enabled", "required", None),
    ("API Files Options: enabled *Required*, boolean", "files.enabled", "bool", None),
    ("MD Metadata: the fields it lists", "metadata", "keys", {
        "resource_type", "title", "publication_date", "creators", "additional_titles", "description",
        "additional_descriptions", "rights", "copyright", "contributors", "subjects", "languages", "dates",
        "version", "publisher", "identifiers", "related_identifiers", "sizes", "formats", "locations", "funding",
        "references"}),
    ("MD Resource type (1)", "metadata.resource_type", "required", None),
    ("MD Resource type (1): id (1, CV)", "metadata.resource_type.id", "required", None),
    ("MD Resource type (1): id (1, CV)", "metadata.resource_type.id", "in", RESOURCE_TYPES),
    ("MD Title (1)", "metadata.title", "required", None),
    ("MD Title (1)", "metadata.title", "text", None),
    ("MD Publication date (1)", "metadata.publication_date", "required", None),
    ("MD Publication date (1): EDTF level 0", "metadata.publication_date", "re", EDTF_L0),
    ("MD Creators (1-n)", "metadata.creators", "list", 1),
    ("MD Creators: subfields", "metadata.creators[]", "keys", {"person_or_org", "role", "affiliations"}),
    ("MD Creators: person_or_org (1)", "metadata.creators[].person_or_org", "required", None),
    ("MD Creators: person_or_org subfields", "metadata.creators[].person_or_org", "keys",
     {"type", "given_name", "family_name", "name", "identifiers"}),
    ("MD Creators: type (1)", "metadata.creators[].person_or_org.type", "required", None),
    ("MD Creators: type (1), personal or organizational", "metadata.creators[].person_or_org.type", "in",
     {"personal", "organizational"}),
    ("MD Creators: given_name (1 if personal)", "metadata.creators[].person_or_org.given_name", "if personal", "text"),
    ("MD Creators: family_name (1 if personal)", "metadata.creators[].person_or_org.family_name", "if personal", "text"),
    ("MD Creators: name (0 if personal)", "metadata.creators[].person_or_org.name", "if personal", "absent"),
    ("MD Creators: name (1 if organizational)", "metadata.creators[].person_or_org.name", "if organizational", "text"),
    ("MD Creators: given_name (0 if organizational)", "metadata.creators[].person_or_org.given_name",
     "if organizational", "absent"),
    ("MD Creators: family_name (0 if organizational)", "metadata.creators[].person_or_org.family_name",
     "if organizational", "absent"),
    ("MD Creators: identifiers scheme (1, CV)", "metadata.creators[].person_or_org.identifiers[].scheme", "required",
     None),
    ("MD Creators: identifiers identifier (1)", "metadata.creators[].person_or_org.identifiers[].identifier",
     "required", None),
    ("MD Creators: identifiers scheme (1, CV), lower case", "metadata.creators[].person_or_org.identifiers[].scheme",
     "in", CREATOR_SCHEMES),
    ("MD Creators: identifiers identifier (1)", "metadata.creators[].person_or_org.identifiers[].identifier", "text",
     None),
    ("MD Creators: affiliations if type is personal", "metadata.creators[].affiliations", "if organizational",
     "absent"),
    ("MD Creators: an affiliation's id or name must be given", "metadata.creators[].affiliations[]", "any of",
     ("id", "name")),
    ("MD Description (0-1)", "metadata.description", "text", None),
    ("MD Rights (0-n): either id or title, not both", "metadata.rights[]", "one of", ("id", "title")),
    ("MD Subjects (0-n): either id or subject", "metadata.subjects[]", "any of", ("id", "subject")),
    ("MD Version (0-1)", "metadata.version", "text", None),
    ("MD Publisher (0-1)", "metadata.publisher", "text", None),
    ("MD Related identifiers: identifier (1)", "metadata.related_identifiers[].identifier", "required", None),
    ("MD Related identifiers: scheme (1, CV)", "metadata.related_identifiers[].scheme", "required", None),
    ("MD Related identifiers: relation_type.id (1, CV)", "metadata.related_identifiers[].relation_type.id", "required",
     None),
    ("MD Related identifiers: identifier (1)", "metadata.related_identifiers[].identifier", "text", None),
    ("MD Related identifiers: scheme (1, CV)", "metadata.related_identifiers[].scheme", "in", IDENTIFIER_SCHEMES),
    ("MD Related identifiers: relation_type (1)", "metadata.related_identifiers[].relation_type", "required", None),
    ("MD Related identifiers: relation_type.id (1, CV)", "metadata.related_identifiers[].relation_type.id", "in",
     RELATION_TYPES),
    ("MD Related identifiers: resource_type.id (1, CV)", "metadata.related_identifiers[].resource_type.id", "in",
     RESOURCE_TYPES),
]


def _values(doc, path: str) -> list:
    """The values ``path`` names in ``doc`` (missing keys name nothing)."""
    out = [doc]
    for part in [p for p in path.split(".") if p]:
        each, key = part.endswith("[]"), part.removesuffix("[]")
        out = [v[key] for v in out if isinstance(v, dict) and key in v]
        if each:
            out = [item for v in out for item in (v if isinstance(v, list) else [v])]
    return out


def _kind(obj: dict) -> str | None:
    """The name type of a creator or of its ``person_or_org``."""
    who = obj.get("person_or_org") if isinstance(obj.get("person_or_org"), dict) else obj
    return who.get("type")


def problems(body: dict) -> list[str]:
    """Every rule of :data:`RULES` the deposit ``body`` breaks, one line each:
    ``<source and section>: <path> <what is wrong>``."""
    out = []
    for section, path, rule, arg in RULES:
        parent, _, key = path.rpartition(".")
        key = key.removesuffix("[]")
        whole = rule in ("keys", "any of", "one of")   # these judge the object the path names
        for obj in _values(body, path if whole else parent):
            if not isinstance(obj, dict):
                out.append(f"{section}: {path or 'the body'} is not an object")
                continue
            if rule == "keys":
                out += [f"{section}: {path or 'the body'} has {k!r}, which the section does not list"
                        for k in sorted(set(obj) - arg)]
                continue
            if rule in ("any of", "one of"):
                given = [k for k in arg if obj.get(k)]
                if not given or (rule == "one of" and len(given) > 1):
                    out.append(f"{section}: {path} gives {given or 'none'} of {list(arg)}")
                continue
            conditional = rule.startswith("if ")   # "if personal": the path is then required as arg says
            if conditional:
                if _kind(obj) != rule[3:]:
                    continue
                rule, arg = arg, None
            value = obj.get(key)
            if rule == "absent":
                if key in obj:
                    out.append(f"{section}: {path} is given ({value!r})")
            elif key not in obj:
                if rule in ("required", "list") or conditional:
                    out.append(f"{section}: {path} is missing")
            elif rule == "text" and not (isinstance(value, str) and value.strip()):
                out.append(f"{section}: {path} is {value!r}, not a text")
            elif rule == "bool" and not isinstance(value, bool):
                out.append(f"{section}: {path} is {value!r}, not a boolean")
            elif rule == "in" and value not in arg:
                out.append(f"{section}: {path} is {value!r}, not in the vocabulary")
            elif rule == "re" and not (isinstance(value, str) and arg.match(value)):
                out.append(f"{section}: {path} is {value!r}")
            elif rule == "list" and not (isinstance(value, list) and len(value) >= arg):
                out.append(f"{section}: {path} is not a list of at least {arg}")
    return out


# --- the rules can fail: the legacy body netrepro wrote before, and broken creators -------------------
#: The body netrepro wrote before this change: the legacy deposit form (docs/runs' record had it).
LEGACY = {"metadata": {"upload_type": "dataset", "title": "t", "creators": [{"name": "The netrepro developers"}],
                       "description": "<p>d</p>", "access_right": "open", "license": "cc-by-4.0",
                       "publication_date": "2026-11-29", "version": "v", "keywords": ["k"],
                       "related_identifiers": [{"identifier": "10.1109/HPSR.2013.6602305", "relation": "references",
                                                "resource_type": "publication"}]}}


def _good() -> dict:
    return zenodo_metadata("t", "d", "2026-11-29T09:26:37.030+00:00", "CC-BY-4.0", "v", {}, {
        "authors": [{"name": "The netrepro developers"}]}, ["k"])


@pytest.mark.parametrize("change, words", [
    (lambda b: b.__setitem__("metadata", LEGACY["metadata"]), "person_or_org is missing"),
    (lambda b: b["metadata"]["creators"][0]["person_or_org"].pop("name"), "name (1 if organizational)"),
    (lambda b: b["metadata"]["creators"][0]["person_or_org"].update(type="personal"),
     "family_name (1 if personal): metadata.creators[].person_or_org.family_name is missing"),
    (lambda b: b["metadata"]["creators"][0].update(affiliations=[{"name": "CERN"}]), "affiliations if type is personal"),
    (lambda b: b["metadata"]["rights"][0].update(title={"en": "CC BY"}), "either id or title, not both"),
    (lambda b: b["metadata"].update(publication_date="2026-11-29T09:26:37"), "EDTF level 0"),
    (lambda b: b["metadata"].update(related_identifiers=[{"identifier": "x", "scheme": "doi",
                                                          "relation_type": {"id": "isCompiledBy"}}]), "not in the vocabulary"),
    (lambda b: b.pop("files"), "files is missing"),
], ids=["legacy-form", "org-without-name", "person-without-family-name", "org-with-affiliation", "rights-id-and-title",
        "date-and-time", "relation-not-lower-case", "no-files-option"])
def test_the_rules_fail_a_body_that_breaks_them(change, words):
    body = _good()
    assert problems(body) == []
    change(body)
    found = problems(body)
    assert any(words in p for p in found), found


# --- what netrepro writes -------------------------------------------------------------------------------
@pytest.fixture
def analysed(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("NETREPRO_RESULTS", str(tmp_path / "results"))
    run = tmp_path / RUN.name
    shutil.copytree(RUN, run, ignore=shutil.ignore_patterns("expected", "README.md"))
    analyze(run, figures=False)
    return run


def _cff(tmp: Path, text: str) -> Path:
    path = tmp / "CITATION.cff"
    path.write_text("cff-version: 1.2.0\nmessage: m\ntitle: t\n" + text)
    return path


def test_netrepros_own_citation_gives_an_organisation_cited_by_its_name(analysed, tmp_path):
    _, deposit = export_run(analysed, tmp_path / "c")
    body = json.loads(deposit.read_text())
    assert problems(body) == []
    # cited as written, never split into a family and a given name (the legacy loader's "developers, The netrepro")
    assert body["metadata"]["creators"] == [{"person_or_org": {"type": "organizational", "name": "The netrepro developers"}}]
    assert not [r for r in body["metadata"]["related_identifiers"] if r["relation_type"]["id"] == "iscompiledby"], \
        "netrepro's CITATION.cff gives no repository or DOI, so the deposit names none"


def test_people_from_a_citation_with_their_orcid_and_a_link_to_the_software(analysed, tmp_path):
    cff = _cff(tmp_path, "repository-code: https://git.example.org/lab/netrepro\nauthors:\n"
                         "  - family-names: Doe\n    given-names: Jane\n    orcid: https://orcid.org/0000-0002-1825-0097\n"
                         "    affiliation: Example University\n  - family-names: Roe\n    given-names: Richard\n")
    _, deposit = export_run(analysed, tmp_path / "c", "CC0-1.0", cff)
    body = json.loads(deposit.read_text())
    assert problems(body) == []
    meta = body["metadata"]
    assert meta["creators"] == [
        {"person_or_org": {"type": "personal", "family_name": "Doe", "given_name": "Jane",
                           "identifiers": [{"scheme": "orcid", "identifier": "0000-0002-1825-0097"}]},
         "affiliations": [{"name": "Example University"}]},
        {"person_or_org": {"type": "personal", "family_name": "Roe", "given_name": "Richard"}}]
    assert meta["rights"] == [{"id": "cc0-1.0"}] and meta["resource_type"] == {"id": "dataset"}
    assert {"identifier": "https://git.example.org/lab/netrepro", "scheme": "url", "relation_type": {"id": "iscompiledby"},
            "resource_type": {"id": "software"}} in meta["related_identifiers"]


@pytest.mark.parametrize("fields, link", [
    ({"doi": "10.5281/zenodo.1234567", "repository-code": "https://git.example.org/n"}, ("10.5281/zenodo.1234567", "doi")),
    ({"repository-code": "https://git.example.org/n", "url": "https://n.example.org"}, ("https://git.example.org/n", "url")),
    ({"url": "https://n.example.org"}, ("https://n.example.org", "url")),
    ({}, None),
], ids=["doi-first", "repository-code-then-url", "url", "none"])
def test_the_link_to_the_software_is_the_citations_doi_repository_or_url(fields, link):
    reference = {"paper": "Pan et al.", "paper_doi": "10.1109/HPSR.2013.6602305", "reproduction_url": "https://e.org/r"}
    out = related(reference, fields)
    assert out[:2] == [
        {"identifier": "10.1109/HPSR.2013.6602305", "scheme": "doi", "relation_type": {"id": "references"},
         "resource_type": {"id": "publication"}},
        {"identifier": "https://e.org/r", "scheme": "url", "relation_type": {"id": "references"},
         "resource_type": {"id": "publication"}}]
    made_by = [(r["identifier"], r["scheme"]) for r in out if r["relation_type"]["id"] == "iscompiledby"]
    assert made_by == ([link] if link else [])
    assert problems({"metadata": {"resource_type": {"id": "dataset"}, "title": "t", "publication_date": "2026",
                                  "creators": [{"person_or_org": {"type": "organizational", "name": "n"}}],
                                  "related_identifiers": out}, "files": {"enabled": True}}) == []


@pytest.mark.parametrize("text, field", [
    ("doi: https://doi.org/10.5281/zenodo.1\n", "doi:"),
    ("repository-code: git@example.org:lab/netrepro.git\n", "repository-code:"),
    ("url: [1]\n", "url:"),
    ("authors:\n  - name: Lab\n    website: example.org\n", "authors[0].website:"),
    ("authors:\n  - family-names: Doe\n    orcid: 0000-0002-1825-0097\n", "authors[0].orcid:"),
    ("authors:\n  - family-names: Doe\n    orcid: https://orcid.org/0000-0002-1825-009\n", "authors[0].orcid:"),
], ids=["doi-as-url", "repository-not-http", "url-a-list", "website-without-scheme", "orcid-bare", "orcid-short"])
def test_a_citation_whose_links_are_malformed_is_refused_naming_the_field(tmp_path, text, field):
    authors = "" if "authors:" in text else "authors:\n  - name: Lab\n"
    with pytest.raises(RunFolderError) as err:
        read_citation(_cff(tmp_path, authors + text))
    assert f"{field} " in str(err.value) and "Citation File Format 1.2.0" in str(err.value)

