"""The readiness progress the docs show is what the instageni site prints for pie-vs-red's
request (issue 56: the code counted the LAN slivers as nodes, ``0/9 ... 9/9 ready`` for 7 VMs,
while docs/sites/cloudlab.md showed ``3/7``).

Every ``N/M ready[, K <state>...]`` a page writes is rebuilt as an AM API v3 Status answer for
the slivers pie-vs-red's request asks for (its nodes and links, from the request RSpec the site
sends), N of the nodes ready and the others in the states the example names, and read with the
site's own :func:`netrepro.sites.instageni.client.summarize_status`: the line it gives must be
the example.
"""

from __future__ import annotations

import re

import pytest
from lxml import etree

from netrepro.experiment.spec import load_spec
from netrepro.sites.instageni.client import summarize_status
from netrepro.sites.instageni.rspec import request_xml
from test_docs import PAGES, REPO

#: A readiness line as the site prints it: ``3/7 ready, 4 geni_notready``, ``7/7 ready, 2 link slivers not ready``.
READY_RE = re.compile(r"\b(\d+)/(\d+)\s+ready((?:,\s+\d+\s+(?:geni_\w+|link\s+slivers?\s+not\s+ready))*)")


def request_slivers(experiment: str = "pie-vs-red") -> tuple[list[str], list[str]]:
    """(node names, link names) of the request RSpec the instageni site sends for ``experiment``."""
    root = etree.fromstring(request_xml(load_spec(experiment)).encode())
    names = [(etree.QName(e).localname, e.get("client_id")) for e in root if isinstance(e.tag, str)]
    return [n for kind, n in names if kind == "node"], [n for kind, n in names if kind == "link"]


def printed(example: re.Match, nodes: list[str], links: list[str]) -> str:
    """What :func:`summarize_status` says for a Status answer in the state ``example`` (a
    :data:`READY_RE` match) describes: its ready nodes ready, the others in the states it
    names (in order), its waiting links not ready and the other links ready."""
    ready = int(example.group(1))
    states = [st for n, st in re.findall(r",\s+(\d+)\s+(geni_\w+)", example.group(3)) for _ in range(int(n))]
    waiting = sum(int(n) for n in re.findall(r",\s+(\d+)\s+link\s+slivers?\s+not\s+ready", example.group(3)))
    op = ["geni_ready"] * ready + states + ["geni_ready"] * max(0, len(nodes) - ready - len(states))
    slivers = [{"geni_sliver_urn": f"urn:sliver+{n}", "geni_operational_status": s} for n, s in zip(nodes, op)]
    slivers += [{"geni_sliver_urn": f"urn:sliver+{n}",
                 "geni_operational_status": "geni_notready" if i < waiting else "geni_ready"} for i, n in enumerate(links)]
    return summarize_status({"geni_slivers": slivers}, {f"urn:sliver+{n}": n for n in nodes})[2]


def wrong_examples(text: str, nodes: list[str], links: list[str]) -> list[str]:
    """The readiness examples of ``text`` the site would not print for these slivers."""
    return [f"{m.group(0)} (the site prints {printed(m, nodes, links)!r})" for m in READY_RE.finditer(text)
            if printed(m, nodes, links) != " ".join(m.group(0).split())]


@pytest.fixture(scope="module")
def slivers():
    return request_slivers()


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(REPO)) for p in PAGES])
def test_every_readiness_example_is_what_the_site_prints(page, slivers):
    bad = wrong_examples(page.read_text(), *slivers)
    assert not bad, f"{page.relative_to(REPO)}: {bad}"


def test_the_docs_show_the_progress(slivers):
    nodes, links = slivers
    assert (len(nodes), len(links)) == (7, 2)
    assert any(READY_RE.search(p.read_text()) for p in PAGES if p.name == "cloudlab.md")


def test_the_check_can_fail(slivers):
    assert wrong_examples("`slice x: 3/7 ready, 4 geni_notready`, then `7/7 ready, 2 link slivers not ready`", *slivers) == []
    assert wrong_examples("`slice x: 0/9 ready, 9 geni_notready`", *slivers) != []
    assert wrong_examples("`9/9 ready`", *slivers) != []
