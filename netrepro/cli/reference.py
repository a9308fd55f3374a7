"""docs/reference.md, generated from the code: every make target and variable, every command
and option, every site option and every environment variable.

Sources, each read as declared (in declaration order, except where a table says it is sorted):

- the Makefile: the targets with a ``## help`` comment (their prerequisites and the
  commands their recipes run), and the variables a user may set (``NAME ?= default``, each
  after its description in ``#:`` lines; ``export`` marks those make hands to netrepro);
- the command line: :func:`netrepro.cli.commands.build_parser`, walked subcommand by subcommand;
- the sites: :data:`netrepro.sites.base.SITES` and each site class's ``OPTIONS``, with the
  variable of :data:`netrepro.sites.OPTION_ENV` that sets an option;
- the environment: :data:`netrepro.core.envvars.ENV_VARS`, each site class's ``ENV``,
  :data:`netrepro.sites.OPTION_ENV` and :data:`netrepro.runner.ansible.PASSTHROUGH_ENV`.

``python -m netrepro.cli.reference`` prints the page; ``--output FILE`` writes it (``make
reference``); ``--check FILE`` exits 1 when FILE differs from it. The page holds no time
stamp and no absolute path, so that it is the same on every machine (tests/test_reference.py).
"""

from __future__ import annotations

import argparse
import importlib
import os
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

from netrepro.runner.ansible import PASSTHROUGH_ENV
from netrepro.core.envvars import ENV_VARS
from netrepro.sites import DECLARED_OPTION_ENV, OPTION_ENV
from netrepro.sites.base import SITES, site_class
from netrepro.experiment.spec import REPO_ROOT

MAKEFILE = REPO_ROOT / "Makefile"
PAGE = REPO_ROOT / "docs" / "reference.md"
#: Variables make defines itself (GNU make manual, "Variables Used by Make").
MAKE_BUILTINS = ("MAKE", "MAKEFILE_LIST", "CURDIR", "MAKEFLAGS", "SHELL")


@dataclass
class MakeTarget:
    """A documented make target: ``name``, ``help`` (its ``##`` comment), ``needs`` (its
    prerequisites as a reader names them) and ``runs`` (the commands of its recipe)."""

    name: str
    help: str
    needs: list[str]
    runs: list[str]


@dataclass
class MakeVariable:
    """A make variable a user may set: ``name``, ``default`` (as written; "" for none),
    ``help`` (its ``#:`` lines joined) and ``exported`` (make hands it to every command)."""

    name: str
    default: str
    help: str
    exported: bool


def _logical_lines(text: str) -> list[str]:
    """The Makefile's lines with backslash continuations joined (one space between parts)."""
    out: list[str] = []
    buf = ""
    for line in text.splitlines():
        if line.endswith("\\"):
            buf += line[:-1].rstrip() + " "
            continue
        out.append(buf + (line.lstrip() if buf else line))
        buf = ""
    if buf:
        out.append(buf)
    return out


def _reader_names(text: str) -> str:
    """A prerequisite or recipe as a reader names it: the Makefile's own variables replaced
    (``$(NETREPRO)`` -> ``netrepro``, ``$(STAMP)`` -> ``venv``, ``$(CRATE_STAMP)`` -> ``venv-crate``, ...)."""
    for var, name in (("$(NETREPRO)", "netrepro"), ("$(PY)", "python"), ("$(VENV)/bin/", ""),
                      ("$(MAKE)", "make"), ("$(DEV_STAMP)", "the tests' packages (requirements-dev.txt)"),
                      ("$(CRATE_STAMP)", "venv-crate"), ("$(CRATE_VENV)/bin/", ""), ("$(STAMP)", "venv")):
        text = text.replace(var, name)
    return text


def _needs(prereqs: str) -> list[str]:
    """The prerequisites of a target, a conditional ``$(if $(filter 1,$(X)),A,B)`` read as
    "B (A when X=1)"."""
    out = []
    for m in re.finditer(r"\$\(if \$\(filter 1,\$\(([A-Z_]+)\)\),([^,()]*(?:\([^()]*\))?),([^()]*(?:\([^()]*\))?)\)|(\S+)",
                         prereqs):
        if m.group(4):
            out.append(_reader_names(m.group(4)))
        else:
            var, then, other = m.group(1), _reader_names(m.group(2)), _reader_names(m.group(3))
            out.append(f"{other} ({then} only, when {var}=1)")
    return out


def _runs(recipe: list[str]) -> list[str]:
    """The distinct commands of a recipe, in order: ``netrepro <command>``, ``make <target>``,
    ``python -m <module>`` or the program's name (environment assignments and shell
    keywords skipped)."""
    out: list[str] = []
    for line in recipe:
        line = _reader_names(line.lstrip("@-+ \t"))
        for part in re.split(r";|&&|\|\|", line):
            words = part.split()
            while words and (re.fullmatch(r"[A-Z_]+=\S*", words[0]) or words[0] in ("if", "then", "else", "fi")):
                words = words[1:]
            if not words or words[0] in ("[", "test"):
                continue
            first = words[0]
            if first in ("netrepro", "make") and len(words) > 1:
                cmd = f"{first} {words[1]}"
            elif first == "python" and len(words) > 2 and words[1] == "-m":
                cmd = "pytest" if words[2] == "pytest" else f"python -m {words[2]}"
            else:
                cmd = first
            if cmd not in out:
                out.append(cmd)
    return out


def make_targets(text: str) -> list[MakeTarget]:
    """The targets of Makefile ``text`` that carry a ``## help`` comment, in file order."""
    lines = _logical_lines(text)
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"^([a-zA-Z_-]+):(?!=)(.*?)## (.*)$", line)
        if not m:
            continue
        recipe = []
        for nxt in lines[i + 1:]:
            if not nxt.startswith("\t"):
                break
            recipe.append(nxt.strip())
        needs = [n for n in _needs(m.group(2).strip()) if n != m.group(1)]  # venv: its own stamp
        out.append(MakeTarget(m.group(1), m.group(3).strip(), needs, _runs(recipe)))
    return out


def make_variables(text: str) -> list[MakeVariable]:
    """The variables of Makefile ``text`` a user may set (``NAME ?= default``), in file order,
    each with its ``#:`` description lines (empty when it has none)."""
    lines = text.splitlines()
    exported: set[str] = set()
    for line in lines:
        if line.startswith("export "):
            exported.update(line.split()[1:])
    out = []
    for i, line in enumerate(lines):
        m = re.match(r"^([A-Z_][A-Z0-9_]*) \?=(.*)$", line)
        if not m:
            continue
        doc = []
        j = i - 1
        while j >= 0 and lines[j].startswith("#:"):
            doc.insert(0, lines[j][2:].strip())
            j -= 1
        out.append(MakeVariable(m.group(1), m.group(2).strip(), " ".join(doc), m.group(1) in exported))
    return out


def make_references(text: str) -> set[str]:
    """Every upper-case variable Makefile ``text`` expands (``$(NAME)``, ``$(NAME:...)``)."""
    return set(re.findall(r"\$\(([A-Z_][A-Z0-9_]*)[):]", text))


def make_defined(text: str) -> set[str]:
    """Every variable Makefile ``text`` assigns (``=``, ``:=``, ``?=``, ``+=``)."""
    return set(re.findall(r"^([A-Z_][A-Z0-9_]*) *(?:\?|:|\+)?=", text, flags=re.M))


def _parser() -> argparse.ArgumentParser:
    """netrepro's parser, built with none of the environment variables its defaults read
    (SITE, TIME_SCALE, ...), so that nothing of this machine reaches the page."""
    from netrepro.cli.commands import build_parser

    with mock.patch.dict(os.environ, {k: v for k, v in os.environ.items() if k not in ENV_VARS}, clear=True):
        return build_parser()


def _flags(action: argparse.Action) -> str:
    """An argument as a user types it: ``--site SITE``, ``--dry-run``, ``EXPERIMENT``."""
    if not action.option_strings:
        return action.metavar or action.dest
    takes = action.nargs != 0
    meta = action.metavar or action.dest.upper()
    return ", ".join(f"{o} {meta}" if takes else o for o in action.option_strings)


def commands() -> list[dict]:
    """The subcommands of netrepro in declaration order: ``{name, help, args: [{flags, help,
    notes}]}`` (notes: required, repeatable, one or more)."""
    p = _parser()
    sub = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    helps = {a.dest: a.help for a in sub._choices_actions}
    out = []
    for name, sp in sub.choices.items():
        args = []
        for a in sp._actions:
            if isinstance(a, argparse._HelpAction):
                continue
            notes = []
            if a.option_strings and a.required:
                notes.append("required")
            if isinstance(a, argparse._AppendAction) and "repeatable" not in (a.help or ""):
                notes.append("repeatable")
            if a.nargs == "+":
                notes.append("one or more")
            args.append({"flags": _flags(a), "help": a.help or "", "notes": notes})
        out.append({"name": name, "help": helps.get(name, ""), "args": args})
    return out


def _first_paragraph(doc: str | None) -> str:
    """The first paragraph of a docstring, on one line, without reST's double back quotes."""
    para = (doc or "").strip().split("\n\n")[0]
    return " ".join(para.split()).replace("``", "`")


def sites() -> list[dict]:
    """Every site of :data:`SITES` in its order: ``{name, about, options: [{key, variable, help}],
    env: {variable: help}}`` (an option's variable: the OPTION_ENV or DECLARED_OPTION_ENV variable that sets it, or "";
    ``env``: the site's own variables, its class's ``ENV``)."""
    by_key: dict[str, str] = {}
    for var, key in [*OPTION_ENV.items(), *DECLARED_OPTION_ENV.items()]:
        by_key.setdefault(key, var)
    out = []
    for name in SITES:
        cls = site_class(name)
        module = importlib.import_module(cls.__module__)
        opts = [{"key": k, "variable": by_key.get(k, ""), "help": o.help} for k, o in cls.OPTIONS.items()]
        out.append({"name": name, "about": _first_paragraph(module.__doc__), "options": opts, "env": dict(cls.ENV)})
    return out


def _md(text: str) -> str:
    """``text`` as Markdown shows it literally: outside its code spans (between back quotes),
    ``<``, ``>`` and ``*`` escaped (``<experiment>`` would be read as an HTML tag)."""
    parts = str(text).split("`")
    for i in range(0, len(parts), 2):
        parts[i] = re.sub(r"([<>*])", r"\\\1", parts[i])
    return "`".join(parts)


def _cell(text: str) -> str:
    """Text fit for one Markdown table cell (one line, ``|`` escaped, see :func:`_md`)."""
    return _md(" ".join(str(text).split())).replace("|", "\\|")


def _table(head: list[str], rows: list[list[str]]) -> list[str]:
    return (["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
            + ["| " + " | ".join(_cell(c) for c in r) + " |" for r in rows])


def render(makefile_text: str | None = None) -> str:
    """The whole page, as Markdown text ending in one newline."""
    text = MAKEFILE.read_text(encoding="utf-8") if makefile_text is None else makefile_text
    out = ["# Reference", "",
           "Generated from the code by `make reference` (`python -m netrepro.cli.reference`): the Makefile, the "
           "command line (netrepro/cli/commands.py), the sites' `OPTIONS` (netrepro/sites/) and the environment "
           "variables' registry (netrepro/core/envvars.py). Do not edit it by hand: tests/test_reference.py fails "
           "when it differs from what the code says.", "",
           "- [Make targets](#make-targets)", "- [Make variables](#make-variables)",
           "- [Commands](#commands)", "- [Site options](#site-options)",
           "- [Environment variables](#environment-variables)", ""]

    out += ["## Make targets", "",
            "`make <target> [VARIABLE=value ...]`. *Needs*: what make brings up to date first (venv: the "
            "virtual environment .venv with requirements.txt). *Runs*: the commands of its recipe.", ""]
    out += _table(["Target", "What it does", "Needs", "Runs"],
                  [[f"`{t.name}`", t.help, ", ".join(t.needs), ", ".join(f"`{r}`" for r in t.runs)]
                   for t in make_targets(text)])

    out += ["", "## Make variables", "",
            "`make <target> NAME=value`. *Exported*: make also hands it to every command in the environment, "
            "where netrepro reads it (see [Environment variables](#environment-variables)). The site options' "
            "variables (`LOCAL_MODE`, `AGGREGATE`, ...) are read from the environment by netrepro itself: see "
            "[Site options](#site-options).", ""]
    out += _table(["Variable", "Default", "Exported", "What it sets"],
                  [[f"`{v.name}`", f"`{v.default}`" if v.default else "", "yes" if v.exported else "", v.help]
                   for v in make_variables(text)])

    out += ["", "## Commands", "",
            "`netrepro <command> ...` (or `python -m netrepro <command> ...`); `netrepro <command> --help` prints "
            "the same. Bad input: one line `netrepro: ...` naming the option or variable and what was "
            "expected, exit status 2.", ""]
    for c in commands():
        out += [f"### `netrepro {c['name']}`", "", _md(c["help"][:1].upper() + c["help"][1:]) + ".", ""]
        out += _table(["Argument", "What it does"],
                      [[f"`{a['flags']}`", a["help"] + (f" ({', '.join(a['notes'])})" if a["notes"] else "")]
                       for a in c["args"]])
        out.append("")

    out += ["## Site options", "",
            "`--option KEY=VALUE` (repeatable), `make ... OPTIONS=\"KEY=VALUE KEY=VALUE\"`, or the variable "
            "named beside the option; `--option` wins over the variable. A site refuses an option it does not "
            "declare, and a variable naming another site's option, in one line listing its own.", ""]
    for s in sites():
        out += [f"### `{s['name']}`", "", _md(s["about"]), ""]
        if s["options"]:
            out += _table(["Option", "Variable", "What it sets"],
                          [[f"`{o['key']}`", f"`{o['variable']}`" if o["variable"] else "", o["help"]]
                           for o in s["options"]])
        else:
            out.append("No options.")
        if s["env"]:
            out += ["", f"The {s['name']} site also reads these environment variables:", ""]
            out += _table(["Variable", "What it sets"], [[f"`{k}`", v] for k, v in s["env"].items()])
        out.append("")

    out += ["## Environment variables", "",
            "Read by netrepro, its analysis and tools/fresh-root-check (netrepro/core/envvars.py).", ""]
    out += _table(["Variable", "What it sets"], [[f"`{k}`", v] for k, v in ENV_VARS.items()])
    out += ["", "The sites' own variables (each site class's `ENV`, listed with its options above): "
            + "; ".join(f"{s['name']}: " + ", ".join(f"`{k}`" for k in s["env"]) for s in sites() if s["env"]) + "."]
    out += ["", "The site options' variables (netrepro.sites.OPTION_ENV), read by every command that opens a "
            "site; set one only for a site that declares its option:", ""]
    sites_of: dict[str, list[str]] = {}
    for s in sites():
        for o in s["options"]:
            sites_of.setdefault(o["key"], []).append(s["name"])
    out += _table(["Variable", "Site option"],
                  [[f"`{var}`", f"`{key}` of " + ", ".join(sites_of.get(key, [])) if sites_of.get(key) else f"`{key}`"]
                   for var, key in OPTION_ENV.items()])
    out += ["", "Read as a site option only by a site that declares it, and ignored by the others "
            "(netrepro.sites.DECLARED_OPTION_ENV): "
            + "; ".join(f"`{var}`: `{key}` of " + ", ".join(sites_of.get(key, [])) for var, key in DECLARED_OPTION_ENV.items())
            + "."]
    out += ["", "Handed on unchanged to ansible-playbook (netrepro.runner.ansible.PASSTHROUGH_ENV): "
            + ", ".join(f"`{v}`" for v in PASSTHROUGH_ENV) + ". Of this machine's other variables, it gets only "
            "`PATH` and `ANSIBLE_TIMEOUT` (above).", ""]
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    """``python -m netrepro.cli.reference [--output FILE | --check FILE]``: print the page, write it
    to FILE, or compare FILE with it (exit 1 and one line when they differ)."""
    ap = argparse.ArgumentParser(prog="python -m netrepro.cli.reference", description="Generate docs/reference.md.")
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--output", metavar="FILE", help="write the page to FILE")
    g.add_argument("--check", metavar="FILE", help="exit 1 when FILE differs from the page the code gives")
    args = ap.parse_args(argv)
    page = render()
    if args.check:
        try:
            have = Path(args.check).read_text(encoding="utf-8")
        except OSError as exc:
            print(f"netrepro.cli.reference: {args.check}: cannot read it ({exc.strerror})", file=sys.stderr)
            return 2
        if have != page:
            print(f"netrepro.cli.reference: {args.check} differs from the code; run `make reference`", file=sys.stderr)
            return 1
        return 0
    if args.output:
        Path(args.output).write_text(page, encoding="utf-8")
        print(f"wrote {args.output}")
        return 0
    sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
