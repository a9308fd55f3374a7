"""Every string of an experiment file is data (issue 20): fed a value that begins with ``-``
or holds ``;``, ``$(...)``, a newline or Jinja (``{{ }}``), each string field of the
committed experiments (every string leaf of experiments/codel-lab and
pie-lab's parsed YAML) is either

- refused by the file's validation: :func:`netrepro.model.build` raises ModelError naming
  that field (or a field that holds it); or
- carried through everything generated from the file only as data that cannot be read as an
  option, a shell word or a template:

  * in every argv netrepro builds (tc commands of each trial's stacks,
    :func:`netrepro.core.tc.stack_commands`; the capability probes and stacks of
    :func:`netrepro.experiment.rolevars.model_vars`; iperf3 clients, :func:`netrepro.experiment.rolevars.iperf3_argv`)
    the value is one whole element, never split over several, never the command's first word,
    and when it begins with ``-`` it stands where the program reads an option's value, not an
    option: tc reads options only before its object word (tc(8): ``tc [ OPTIONS ] qdisc ...``),
    iperf3's getopt_long takes the word after an option that needs an argument as that
    argument (iperf3(1)), and a ``tcp_congestion`` probe's name goes to grep and modprobe after
    ``--`` (roles/kernel_capability/files/probe.sh);
  * in every extra var handed to Ansible (:func:`netrepro.experiment.rolevars.model_vars`, and each
    trial's :func:`netrepro.runner.trialvars.trial_vars`, which holds
    :func:`netrepro.model.trial_timeline`), every string holding it, key or value, arrives as the
    same string and untrusted when Ansible reads the file :func:`netrepro.runner.ansible.run_playbook`
    passes (never templated), and
    the roles quote each word for the node's shell (tests/test_ansible.py runs them for real).

The test checks this property, not which fields have patterns today: a field that gains a
pattern moves from the second case to the first and still passes.
"""

from __future__ import annotations

import copy
import re
import tempfile
from pathlib import Path

import pytest
import yaml

from netrepro import model
from netrepro.runner import ansible
from netrepro.experiment import rolevars
from netrepro.core import tc
from netrepro.runner.trialvars import trial_vars
from netrepro.experiment.spec import Spec

REPO = Path(__file__).resolve().parent.parent
EXPERIMENTS = ["codel-lab", "pie-lab"]
#: Hostile values; each holds MARK once, so a value split over argv words shows as a word
#: that holds MARK without the whole value.
MARK = "nrINJ"
VALUES = {
    "dash": f"-b /tmp/{MARK}",
    "semicolon": f"x; touch /tmp/{MARK}",
    "substitution": f"$(touch /tmp/{MARK})",
    "newline": f"x\n{MARK}",
    "jinja": f"{{{{ lookup('pipe', 'touch /tmp/{MARK}') }}}}",
}
#: iperf3 options that take a value (iperf3(1)), as netrepro.experiment.rolevars.iperf3_argv writes them.
IPERF3_VALUE_OPTIONS = {"-c", "-p", "-t", "-i", "-P", "-O", "-C", "--fq-rate"}
#: What the first word of a tc command netrepro builds may be (tc(8) objects).
TC_OBJECTS = {"qdisc", "class", "filter"}


def string_leaves(node, path=()):
    """Paths (tuples of keys and indices) of every string leaf of parsed YAML."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from string_leaves(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from string_leaves(v, path + (i,))
    elif isinstance(node, str):
        yield path


def with_value(data: dict, path: tuple, value: str) -> dict:
    d = copy.deepcopy(data)
    target = d
    for p in path[:-1]:
        target = target[p]
    target[path[-1]] = value
    return d


def _tokens(field: str) -> list[str]:
    """A field name's parts, however written: ``a[0].b``, ``a.0.b``, ``a["x.y"]`` -> a 0 b / x y."""
    return re.findall(r"[^.\[\]\"']+", field)


def names_the_field(err: model.ModelError, path: tuple) -> bool:
    """Does ``err`` name the field at ``path`` or one that holds it?"""
    want, got = _tokens(".".join(str(p) for p in path)), _tokens(err.field)
    return bool(got) and want[: len(got)] == got


def argv_problems(argv: list[str], value: str, what: str) -> list[str]:
    """Where ``value`` sits in ``argv`` other than as one whole word that is not an option."""
    out = []
    for i, word in enumerate(argv):
        if MARK not in word:
            continue
        if value not in word:
            out.append(f"{what}: the value is split over words: {argv!r}")
        elif i == 0:
            out.append(f"{what}: the value is the command's first word: {argv!r}")
        elif word.startswith("-"):
            as_value = (argv[0] in TC_OBJECTS or (what.startswith("iperf3") and argv[i - 1] in IPERF3_VALUE_OPTIONS)
                        or (argv[0] == "tcp_congestion" and len(argv) == 2))
            if not as_value:
                out.append(f"{what}: {word!r} can be read as an option: {argv!r}")
    return out


def vars_problems(extravars: dict, what: str) -> list[str]:
    """Strings holding MARK that Ansible would trust as templates, or that change on the way,
    when it reads the extra-vars file of run_playbook as ansible-playbook reads ``-e @file``
    (ansible/utils/vars.py load_extra_vars: ``load_from_file(..., trusted_as_template=True)``,
    ansible-core 2.19)."""
    from ansible._internal._datatag._tags import TrustedAsTemplate
    from ansible.parsing.dataloader import DataLoader
    with tempfile.NamedTemporaryFile("w", suffix=".yml") as f:
        f.write(ansible.unsafe_yaml(extravars))
        f.flush()
        # cache="none", unsafe=True: the same parsed data, without the loader's cache and the
        # deep copy it hands out of it (most of this table's time)
        loaded = DataLoader().load_from_file(f.name, cache="none", unsafe=True, trusted_as_template=True)
    out = []
    stack = [(extravars, loaded)]
    while stack:
        given, got = stack.pop()
        if isinstance(given, dict):
            if sorted(given) != sorted(got):
                out.append(f"{what}: keys {sorted(given)[:5]} arrive as {sorted(got)[:5]}")
                continue
            stack += [(k, k2) for k, k2 in zip(sorted(given), sorted(got))]
            stack += [(given[k], got[k]) for k in given]
        elif isinstance(given, (list, tuple)):
            stack += list(zip(given, got))
        elif isinstance(given, str) and MARK in given:
            if got != given or not isinstance(got, str):
                out.append(f"{what}: {given!r} reaches Ansible as {got!r}")
            elif TrustedAsTemplate.is_tagged_on(got):
                out.append(f"{what}: {given!r} reaches Ansible trusted as a template")
    return out


def generated_problems(data: dict, path: Path, value: str) -> list[str]:
    """Everything netrepro generates from an accepted file, checked (see the module docstring)."""
    spec = Spec.from_data(data, path)
    m = spec.model
    out: list[str] = []
    trials: list[dict] = []
    for t in m.trials:
        for port, stack in t.qdiscs.items():
            for argv in tc.stack_commands(stack):
                out += argv_problems(argv, value, f"trial {t.id} tc on {port}")
        plan = model.trial_timeline(m, t)
        for node, items in plan["iperf3"].items():
            for x in items:
                out += argv_problems(rolevars.iperf3_argv(x["item"], x["address"]), value, f"iperf3 from {node}")
        trials.append(trial_vars(spec, t, 1.0, Path("/tmp/fetch"), 2.0))
    mv = rolevars.model_vars(spec)
    for node, probes in mv["probes"].items():
        for label, argv in probes.items():
            out += argv_problems(argv, value, f"probe {label!r} on {node}")
    for node, ports in mv["stacks"].items():
        for p in ports:
            for argv in p["commands"]:
                out += argv_problems(argv, value, f"provisioned stack on {node}")
    # One extra-vars file holds every trial's vars and the provisioning vars: Ansible's loader
    # reads each string alike wherever it stands, and one file per leaf, not one per
    # playbook, keeps the table's cost to one load per leaf.
    out += vars_problems({"netrepro": mv, "trials": trials}, "provisioning and trial vars")
    return out


CASES = [pytest.param(exp, tag, id=f"{exp}-{tag}") for exp in EXPERIMENTS for tag in VALUES]


@pytest.mark.parametrize("exp,tag", CASES)
def test_every_string_field_is_refused_or_carried_as_data(exp, tag):
    path = REPO / "experiments" / exp / "experiment.yml"
    data = yaml.safe_load(path.read_text())
    value = VALUES[tag]
    problems, accepted = [], []
    leaves = list(string_leaves(data))
    assert len(leaves) > 50  # the walk reaches the whole file
    for leaf in leaves:
        d = with_value(data, leaf, value)
        field = ".".join(map(str, leaf))
        try:
            model.build(d, path)
        except model.ModelError as err:
            if not names_the_field(err, leaf):
                problems.append(f"{field}: refused, but the error names {err.field!r}: {err}")
            continue
        accepted.append(field)
        try:
            problems += [f"{field}: {p}" for p in generated_problems(d, path, value)]
        except Exception as exc:  # noqa: BLE001 - a file that validates must not fail later
            problems.append(f"{field}: validates, then {type(exc).__name__}: {exc}")
    assert not problems, "\n".join(problems[:40])


def test_the_checks_can_fail():
    """The checks above find what they look for: a split value, an option, a templated string."""
    v = VALUES["dash"]
    assert argv_problems(["qdisc", "add", "dev", "x", "root", "pie", "target", *v.split()], v, "tc")
    assert argv_problems([v, "qdisc"], v, "tc")
    assert not argv_problems(["qdisc", "add", "dev", "x", "root", "pie", "target", v], v, "tc")
    assert argv_problems(["-c", "10.0.0.1", v], v, "iperf3")
    assert not argv_problems(["-c", "10.0.0.1", "-C", v], v, "iperf3")
    assert not vars_problems({"a": {VALUES["jinja"]: [VALUES["jinja"]]}}, "vars")
    assert vars_problems({"a": 1}, "vars") == []
    # what a dump without the root tag would hand Ansible: trusted as a template
    saved = ansible.unsafe_yaml
    try:
        ansible.unsafe_yaml = lambda d: yaml.safe_dump(d)
        assert vars_problems({"a": [VALUES["jinja"]]}, "vars")
    finally:
        ansible.unsafe_yaml = saved
    err = model.ModelError("f.yml", "claims[0].check", "bad")
    assert names_the_field(err, ("claims", 0, "check", "kind"))
    assert not names_the_field(err, ("claims", 1, "check", "kind"))
