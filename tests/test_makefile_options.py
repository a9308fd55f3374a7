"""The Makefile's header lists the variables that set a site option: the list must be the
code's (netrepro.sites.OPTION_ENV and DECLARED_OPTION_ENV), not a copy kept by hand that
drifts (issue 56: KERNEL_UPGRADE was left out)."""

from __future__ import annotations

import re
from pathlib import Path

from netrepro.sites import DECLARED_OPTION_ENV, OPTION_ENV

REPO = Path(__file__).resolve().parent.parent


def header(text: str) -> str:
    """The Makefile's header: its leading comment lines (``#``, not ``#:``), joined into one
    line of words."""
    lines = []
    for ln in text.splitlines():
        if not ln.startswith("#"):
            break
        lines.append(ln.lstrip("#").strip())
    return " ".join(lines)


def header_list(words: str, name: str) -> set[str]:
    """The variables ``words`` (:func:`header`) lists in parentheses right after ``name``
    (``netrepro.sites.OPTION_ENV (A, B, ...)``), or that it names each followed by ``(name)``
    (``HOURS (netrepro.sites.DECLARED_OPTION_ENV)``): a set of upper-case names, empty when
    it lists none."""
    m = re.search(re.escape(name) + r" \(([A-Z_, ]+)\)", words)
    if m:
        return {v.strip() for v in m.group(1).split(",")}
    return set(re.findall(r"\b([A-Z][A-Z_]+) \(" + re.escape(name) + r"\)", words))


def test_the_header_lists_every_option_variable_of_the_code():
    words = header((REPO / "Makefile").read_text())
    assert header_list(words, "netrepro.sites.OPTION_ENV") == set(OPTION_ENV)
    assert header_list(words, "netrepro.sites.DECLARED_OPTION_ENV") == set(DECLARED_OPTION_ENV)


def test_the_check_can_fail():
    text = ("# the variables of netrepro.sites.OPTION_ENV (LOCAL_MODE, AGGREGATE,\n"
            "# IMAGE), read by netrepro, and HOURS (netrepro.sites.DECLARED_OPTION_ENV).\n\nSHELL := bash\n")
    assert header_list(header(text), "netrepro.sites.OPTION_ENV") == {"LOCAL_MODE", "AGGREGATE", "IMAGE"}
    assert header_list(header(text), "netrepro.sites.OPTION_ENV") != set(OPTION_ENV)
    assert header_list(header(text), "netrepro.sites.DECLARED_OPTION_ENV") == {"HOURS"}
