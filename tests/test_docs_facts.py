"""What README.md and docs/ (not the run records of docs/runs, which are history) state about
the code is the code's (issue 56): every backticked identifier is one the code, an experiment
or a role defines (docs/sites/cloudlab.md named a health check ``collector_sampling`` that
does not exist); every range a page gives a variable is the range the code checks (RATE_SCALE
was documented as (0, 1], the code refuses below 0.001); and every program a page tells the
reader to run is installed by ``make setup`` or comes with its install step on that page
(getting-started.md said ``flent -i`` without saying how to get flent)."""

from __future__ import annotations

import importlib.metadata as md
import math
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from netrepro.core.tc.params import KIND_KEYWORDS, UNIT_SUFFIXES
from netrepro.experiment.spec import TIME_SCALE_MAX, TIME_SCALE_MIN
from netrepro.model.scales import RATE_SCALE_FLOOR
from netrepro.sites.fabric.site import MAX_HOURS as FABRIC_MAX_HOURS
from netrepro.sites.instageni.site import MAX_HOURS as INSTAGENI_MAX_HOURS
from netrepro.sites.local.setup import LOCAL_EXECUTABLES, UML_EXECUTABLES, VM_EXECUTABLES
from test_docs import PAGES, REPO

IDS = [str(p.relative_to(REPO)) for p in PAGES]
#: Where a name a page writes may be defined: the code, the experiments, the roles and
#: playbooks, the tools, the RSpecs and the Makefile (not the tests: a name only a test
#: writes is defined nowhere a user can reach).
DEFINING = ("netrepro", "analysis", "experiments", "roles", "playbooks", "tools", "rspecs", "inventory")


def _defined_words() -> set[str]:
    """Every word (letters, digits, ``_``, ``-``, ``.``; and its parts split at ``.``) of the
    files under :data:`DEFINING` and of the Makefile."""
    files = [REPO / "Makefile", *(f for d in DEFINING for f in (REPO / d).rglob("*") if f.is_file())]
    words: set[str] = set()
    for f in files:
        try:
            text = f.read_text()
        except (UnicodeDecodeError, OSError):
            continue
        for w in re.findall(r"[\w.-]+", text):
            words.add(w)
            words.update(w.split("."))
    return words


# --- identifiers ------------------------------------------------------------------------------

#: A backticked identifier: snake_case (a check, statistic, field, option) or kebab-case (a
#: claim, an aggregate, a trial), lower case, no path, space, ``=`` or option dash.
IDENT_RE = re.compile(r"`([a-z][a-z0-9]*(?:[_-][a-z0-9]+)+)`")
#: Names composed at run time from what tc prints (analysis/raw.py): a qdisc's own field as
#: ``<kind>_<field>`` (``pie_prob``, ``codel_ldelay``, ``fq_codel_new_flows_len``).
RAW_FIELDS = set(re.findall(r"\w+", (REPO / "analysis" / "raw.py").read_text()))


def composed(name: str) -> bool:
    """Whether ``name`` is a name the code composes rather than writes: a qdisc kind of
    :data:`KIND_KEYWORDS` and one of tc's field names (``pie_prob``), or a tc keyword with a
    unit suffix of its unit (``peakrate_mbit``: :data:`UNIT_SUFFIXES`)."""
    for kind, keywords in KIND_KEYWORDS.items():
        if name.startswith(kind + "_") and name[len(kind) + 1:] in RAW_FIELDS:
            return True
        for kw, spec in keywords.items():
            unit = getattr(spec, "unit", None) if spec is not None else None
            if any(name == kw + s for s in UNIT_SUFFIXES.get(unit, ())):
                return True
    return False


#: The tests' own functions and fixtures, and pytest's, which a page on the tests may name
#: (``test_every_declared_check_has_one_measurement``, ``no_process_left``, ``tmp_path``).
TEST_FUNCTIONS = {name for f in [*(REPO / "tests").rglob("*.py"), *Path(pytest.__file__).parent.parent.glob("_pytest/**/*.py")]
                  for name in re.findall(r"^\s*def (\w+)", f.read_text(), re.M)}


def unknown_identifiers(text: str, words: set[str]) -> list[str]:
    """The backticked identifiers of ``text`` (:data:`IDENT_RE`) that are neither a word of
    ``words``, nor :func:`composed`, nor a function of tests/ or pytest (:data:`TEST_FUNCTIONS`), sorted."""
    return sorted({m for m in IDENT_RE.findall(text) if m not in words and not composed(m) and m not in TEST_FUNCTIONS})


@pytest.fixture(scope="module")
def words() -> set[str]:
    return _defined_words()


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_backticked_identifier_is_defined_in_the_code(page, words):
    bad = unknown_identifiers(page.read_text(), words)
    assert not bad, f"{page.relative_to(REPO)} names what no code, experiment or role defines: {bad}"


def test_the_identifier_check_can_fail(words):
    text = "| `ping_received`, `collector_sampling` | samples missing | `pie_prob`, `peakrate_mbit`, `cl-utah` |"
    assert unknown_identifiers(text, words) == ["collector_sampling"]
    assert unknown_identifiers("`test_the_identifier_check_can_fail`, `test_no_such_test`", words) == ["test_no_such_test"]
    assert "sampling_ping" in words and "sampling_qdisc_stats" in words


# --- ranges -----------------------------------------------------------------------------------

#: The variables whose range the pages state, how a page names each, and the range the code
#: checks: (low, low included, high, high included).
RANGES = {
    "TIME_SCALE": (r"TIME_SCALE|--time-scale", (TIME_SCALE_MIN, True, TIME_SCALE_MAX, True)),
    "RATE_SCALE": (r"RATE_SCALE|--rate-scale|rate scale [kK]\b", (RATE_SCALE_FLOOR, True, 1.0, True)),
    "HOURS": (r"\bHOURS\b|`hours`|--hours", (0.0, False, float(INSTAGENI_MAX_HOURS), True)),
}
#: A range as the pages write one: an interval ``(0, 1]`` / ``[0.001, 1]``, ``0.001 to 100``,
#: ``1 .. 32``, ``at most 336``.
RANGE_RE = re.compile(r"(?P<open>[\[(])\s*(?P<lo>-?[\d.]+)\s*,\s*(?P<hi>[\d.]+|inf)\s*(?P<close>[\])])"
                      r"|\b(?P<lo2>\d[\d.]*)\s*(?:to|\.\.)\s*(?P<hi2>\d[\d.]*)\b"
                      r"|\bat most (?P<most>\d[\d.]*\d|\d)")


def stated_ranges(text: str) -> list[tuple[str, str, tuple]]:
    """(variable, the range as written, (low, low included, high, high included); None where a
    form does not say) of every range ``text`` states in a sentence or table row naming a
    variable of :data:`RANGES`."""
    units = []
    for para in re.split(r"\n\s*\n", text):
        if para.lstrip().startswith("|"):
            units += para.splitlines()
        else:
            units += re.split(r"(?<=[.;:])\s+(?=[A-Z(`])", " ".join(para.split()))
    out = []
    for u in units:
        for var, (pattern, _) in RANGES.items():
            if not re.search(pattern, u):
                continue
            for m in RANGE_RE.finditer(u):
                if m.group("open"):
                    got = (float(m.group("lo")), m.group("open") == "[", float(m.group("hi")), m.group("close") == "]")
                elif m.group("lo2"):
                    got = (float(m.group("lo2")), True, float(m.group("hi2")), True)
                else:
                    got = (None, None, float(m.group("most")), True)
                out.append((var, m.group(0), got))
    return out


def wrong_ranges(text: str) -> list[str]:
    """The ranges of :func:`stated_ranges` that differ from the code's (:data:`RANGES`)."""
    bad = []
    for var, written, got in stated_ranges(text):
        want = RANGES[var][1]
        if any(g is not None and not (math.isclose(g, w) if isinstance(g, float) else g == w)
               for g, w in zip(got, want)):
            bad.append(f"{var}: {written}")
    return bad


def test_the_sites_lease_bounds_are_one():
    assert FABRIC_MAX_HOURS == INSTAGENI_MAX_HOURS   # RANGES["HOURS"] names one


@pytest.mark.parametrize("page", [*PAGES, REPO / "Makefile"], ids=[*IDS, "Makefile"])
def test_every_range_a_page_gives_a_variable_is_the_codes(page):
    text = page.read_text()
    if page.name == "Makefile":   # its #: descriptions, one paragraph per variable
        text = "\n\n".join(re.findall(r"((?:^#:.*\n)+)", text, re.M)).replace("#:", "")
    bad = wrong_ranges(text)
    assert not bad, f"{page.relative_to(REPO)} gives ranges the code does not check: {bad}"


def test_the_range_check_can_fail():
    assert wrong_ranges("the rate scale k in (0, 1], every rate times k (RATE_SCALE)") == ["RATE_SCALE: (0, 1]"]
    assert wrong_ranges("`TIME_SCALE`: 0.01 to 100.") == ["TIME_SCALE: 0.01 to 100"]
    assert wrong_ranges("HOURS=12 (the option `hours`; at most 168).") == ["HOURS: at most 168"]
    assert wrong_ranges("`RATE_SCALE`: the rate scale k in [0.001, 1]; `TIME_SCALE` 0.001 to 100.") == []


# --- programs ---------------------------------------------------------------------------------

#: Programs every reader has: the shell's builtins, and programs of Debian 12's essential
#: packages (coreutils, grep, dash, util-linux) and of the README's prerequisites (python3,
#: make, git, ca-certificates, which pulls in openssl; python3-venv, which gives the virtual
#: environment its pip).
BASE = {"cd", "export", "cp", "mkdir", "grep", "sh", "unshare", "make", "python3", "python", "git", "openssl", "pip"}


def _requirement_names(path: Path) -> list[str]:
    """The distributions a requirements file lists (and the files it includes with -r)."""
    names = []
    for ln in path.read_text().splitlines():
        ln = ln.split("#")[0].strip()
        if ln.startswith("-r "):
            names += _requirement_names(path.parent / ln[3:].strip())
        elif ln:
            names.append(re.split(r"[=<>!~\[; ]", ln)[0])
    return names


def _closure(names: list[str]) -> set[str]:
    """The installed distributions ``names`` need, transitively (lower case)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        n = todo.pop().lower().replace("_", "-")
        if n in seen:
            continue
        try:
            dist = md.distribution(n)
        except md.PackageNotFoundError:
            continue
        seen.add(n)
        todo += [re.split(r"[=<>!~\[; (]", r)[0] for r in dist.requires or [] if "extra ==" not in r]
    return seen


def _scripts(dists: set[str]) -> dict[str, str]:
    """Console script -> its distribution, for ``dists``."""
    return {ep.name: d for d in dists for ep in md.distribution(d).entry_points if ep.group == "console_scripts"}


def setup_programs() -> set[str]:
    """Every program ``make setup`` gives: :data:`BASE`, netrepro, the console scripts of
    requirements.txt's distributions, and the Debian packages' executables the local site
    installs (netrepro.sites.local.setup)."""
    exes = {Path(e).name for e in (*LOCAL_EXECUTABLES, *UML_EXECUTABLES, *VM_EXECUTABLES)}
    return BASE | exes | {"netrepro"} | set(_scripts(_closure(_requirement_names(REPO / "requirements.txt"))))


#: A command line as the pages write one: optional ``$ ``/``sudo ``/variables, then a program
#: (a name or a path such as .venv/bin/flent).
PROGRAM_RE = re.compile(r"^(?:\$ )?(?:sudo )?(?:[A-Z_]+=\S+ )*([a-z./][\w./-]*)(?=\s|$)")


def programs(text: str) -> set[str]:
    """The programs ``text`` tells the reader to run: the first word of each line of a fenced
    or indented code block, and of each inline span that starts with a word and an option
    (``flent -i ...``), kept when it is an executable (on PATH, or in .venv/bin) and named
    by its file name; not the repository's own scripts (tools/fresh-root-check)."""
    lines = [s for s in re.findall(r"`([^`\n]+)`", text) if re.match(r"^(?:sudo )?[a-z][\w./-]* -{1,2}\w", s)]
    fenced = False
    for ln in text.splitlines():
        if ln.lstrip().startswith("```"):
            fenced = not fenced
        elif fenced or ln.startswith("    "):
            lines.append(ln.strip())
    out = set()
    for ln in lines:
        m = PROGRAM_RE.match(ln)
        if m:
            name = Path(m.group(1)).name
            if (REPO / m.group(1)).is_file() and not m.group(1).startswith(".venv/"):
                continue
            if shutil.which(name) or (REPO / ".venv" / "bin" / name).exists():
                out.add(name)
    return out


def install_named(text: str, program: str) -> bool:
    """Whether ``text`` says how to install ``program``: ``pip install <its distribution>``
    or a requirements file that lists it, for a console script; ``apt-get install <its
    Debian package>`` (dpkg -S) for another."""
    scripts = _scripts({d.metadata["Name"].lower() for d in md.distributions() if d.metadata["Name"]})
    dist = scripts.get(program)
    if dist:
        if re.search(r"pip install [^\n`]*\b" + re.escape(dist) + r"\b", text, re.I):
            return True
        return any(f.name in text and dist in {n.lower() for n in _requirement_names(f)}
                   for f in REPO.glob("requirements*.txt"))
    where = shutil.which(program)
    if not where:
        return False
    r = subprocess.run(["dpkg", "-S", where], capture_output=True, text=True)
    pkg = r.stdout.split(":")[0] if r.returncode == 0 else None
    return bool(pkg) and re.search(r"apt-get install [^\n`]*\b" + re.escape(pkg) + r"\b", text) is not None


@pytest.fixture(scope="module")
def have() -> set[str]:
    return setup_programs()


@pytest.mark.parametrize("page", PAGES, ids=IDS)
def test_every_program_a_page_runs_is_installed_or_its_install_named(page, have):
    text = page.read_text()
    bad = sorted(p for p in programs(text) if p not in have and not install_named(text, p))
    assert not bad, (f"{page.relative_to(REPO)} runs programs make setup does not install, "
                     f"without their install step: {bad}")


def test_the_program_check_can_fail(have):
    text = "Open it with `flent -i results/x/flent/a.flent.gz -p ping`, then\n\n    make analyze\n"
    assert programs(text) == {"flent", "make"}
    assert "flent" not in have and "make" in have and "ansible-playbook" in have
    assert not install_named(text, "flent")
    assert install_named(text + "\n    .venv/bin/pip install flent==2.3.0\n", "flent")
