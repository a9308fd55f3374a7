"""Bad input from the environment (issue 20): the variables the Makefile exports or a user
sets (HOURS, RATE_SCALE, SWEEP, NETREPRO_LEAD_S, ANSIBLE_TIMEOUT) are checked by the commands
that read them, before any site is touched: one line naming the variable (and, where the
experiment file forbids the value, the file and its field) and what was expected; exit 2;
nothing changed (tests/badinput.py). Commands that do not read a variable ignore it.

The RATE_SCALE rows run ``run`` and ``reproduce`` with ``--dry-run`` too: a dry run must refuse
what the real run would refuse. ``reproduce`` is run only as a dry run here: were the check
lost, a real ``reproduce`` would bring a site up; ``run`` and ``provision`` on a site that is
not up stop before touching anything. The experiment rows copy the committed
experiments/pie-lab/experiment.yml (schema_version 2) into the row's folder and edit its text.

The ``--jobs`` rows (make's JOBS): a count out of range, and more than one trial at a time
on a site that does not simulate its trials, refused before anything is built or reserved;
the real ``reproduce`` row runs on the static site, whose missing nodes file would stop it
before anything is reserved were the check lost (the row would then fail on its message).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from badinput import REPO, Row, run_row

REAL = REPO / "experiments" / "pie-lab" / "experiment.yml"
TEXT = REAL.read_text()
FILE = "{tmp}/experiment.yml"
RATE_SCALE_NUMBER = "RATE_SCALE: expected a number in [0.001, 1]"


def edited(*pairs: tuple[str, str]):
    """A row setup writing the committed pie-lab experiment with each (old, new) text replaced
    (each ``old`` must occur exactly once)."""
    def setup(tmp: Path) -> None:
        text = TEXT
        for old, new in pairs:
            assert text.count(old) == 1, f"{old!r} occurs {text.count(old)} times in {REAL}"
            text = text.replace(old, new)
        (tmp / "experiment.yml").write_text(text)
    return setup


COPY = edited()
NOT_ALLOWED = edited(("rate_scale:\n  allowed: true\n", "rate_scale:\n  allowed: false\n"))


def _rate_rows() -> list[Row]:
    rows = []
    for cmd in (["run", FILE, "--dry-run"], ["reproduce", FILE, "--dry-run"], ["run", FILE], ["provision", FILE]):
        name = "-".join(a.strip("-") for a in cmd if a != FILE)
        for value, tag in (("junk", "junk"), ("0", "zero"), ("-0.5", "negative"), ("2", "above-1"),
                           ("nan", "nan"), ("inf", "inf"), ("1e-300", "below-the-floor")):
            rows.append(Row(f"rate-scale-{tag}-{name}", cmd, [RATE_SCALE_NUMBER, repr(value)], setup=COPY,
                            env={"RATE_SCALE": value}))
        rows.append(Row(f"rate-scale-not-allowed-{name}", cmd,
                        ["RATE_SCALE=0.5", FILE, "rate_scale.allowed", "expected rate_scale.allowed: true"],
                        setup=NOT_ALLOWED, env={"RATE_SCALE": "0.5"}))
        rows.append(Row(f"rate-scale-below-min-{name}", cmd,
                        ["RATE_SCALE=0.01", FILE, "rate_scale.min", "below the experiment's rate_scale.min 0.02"],
                        setup=COPY, env={"RATE_SCALE": "0.01"}))
    return rows


def _rate_option_rows() -> list[Row]:
    """--rate-scale (provision, run, reproduce, dry runs too): checked as RATE_SCALE is, the
    line naming --rate-scale; it wins over RATE_SCALE (a good RATE_SCALE does not save a bad
    --rate-scale)."""
    rows = []
    for cmd in (["run", FILE, "--dry-run"], ["reproduce", FILE, "--dry-run"], ["run", FILE], ["provision", FILE]):
        name = "-".join(a.strip("-") for a in cmd if a != FILE)
        rows.append(Row(f"rate-scale-option-junk-{name}", [*cmd, "--rate-scale", "junk"],
                        ["netrepro: --rate-scale: expected a number in [0.001, 1], got 'junk'"], setup=COPY,
                        env={"RATE_SCALE": "0.5"}))
        rows.append(Row(f"rate-scale-option-not-allowed-{name}", [*cmd, "--rate-scale", "0.5"],
                        ["--rate-scale=0.5", FILE, "rate_scale.allowed", "expected rate_scale.allowed: true",
                         "leave out --rate-scale or give it 1"], setup=NOT_ALLOWED))
        rows.append(Row(f"rate-scale-option-below-min-{name}", [*cmd, "--rate-scale", "0.01"],
                        ["--rate-scale=0.01", FILE, "rate_scale.min", "below the experiment's rate_scale.min 0.02"],
                        setup=COPY))
    return rows


#: An /etc/shadow line, the kind of file a mistaken fabric_rc option may name.
SHADOW = "root:$6$Qs4Fy3hZ$SECRETHASHSECRETHASHSECRETHASH.0123456789abcdef:19700:0:99999:7:::\n"


def _bound_rows() -> list[Row]:
    """Each numeric option of instageni, fabric and local beyond its bound (and hours' junk), on up:
    one line naming the option, the value and the range. The options are checked in one place
    (netrepro.sites.options.check_options) whatever the command; hours=1e308, which passed plan and
    the dry run and then crashed up, is also tried on plan and a dry run of reproduce."""
    rows = []
    cases = [("instageni", "hours", "1e308", "expected a number of hours above 0 and at most 336"),
             ("instageni", "hours", "337", "expected a number of hours above 0 and at most 336"),
             ("instageni", "hours", "0", "expected a number of hours above 0 and at most 336"),
             ("instageni", "ready_timeout_s", "1e308", "expected a number of seconds above 0 and at most 86400"),
             ("instageni", "vm_cores", "65", "expected a whole number of vCPUs from 1 to 64"),
             ("instageni", "vm_ram_mb", "99999999999999999999", "expected a whole number of MiB from 1 to 262144"),
             ("fabric", "hours", "1e308", "expected a number of hours above 0 and at most 336 (FABRIC's longest lease"),
             ("fabric", "hours", "inf", "expected a number of hours above 0 and at most 336"),
             ("fabric", "ready_timeout_s", "86401", "expected a number of seconds above 0 and at most 86400"),
             ("fabric", "cores", "65", "expected a whole number of vCPUs from 1 to 64 (FABRIC's largest VM)"),
             ("fabric", "ram_gb", "257", "expected a whole number of GB from 1 to 256"),
             ("fabric", "disk_gb", "1e3", "expected a whole number of GB from 1 to 1000"),
             ("local", "vm_cpus", "300", "expected a whole number of vCPUs from 1 to 256"),
             ("local", "vm_memory", "99999999G", "expected a size such as 2G or 2048M (at most 9999G"),
             ("local", "boot_timeout_s", "1e308", "expected a number of seconds above 0 and at most 86400")]
    for site, key, value, expected in cases:
        for cmd in (["plan"], ["reproduce", "--dry-run"], ["up"]) if (key, value) == ("hours", "1e308") else (["up"],):
            rows.append(Row(f"{site}-{key}-{value}-{'-'.join(c.strip('-') for c in cmd)}",
                            [cmd[0], "pie-vs-red", *cmd[1:], "--site", site, "-o", f"{key}={value}"],
                            [f"site {site}: option {key}={value!r} (from --option): {expected}"]))
    return rows


ROWS = [
    # --- -v shows Ansible's task lines: only the commands that run Ansible take it -----------
    *[Row(f"verbose-without-ansible-{cmd[0]}", [*cmd, "-v"], ["unrecognized arguments: -v"])
      for cmd in (["validate", "pie-lab"], ["migrate", "pie-lab"], ["compare", "results/pie-lab/none"],
                  ["analyze", "pie-lab"], ["status", "pie-lab"])],
    # --- HOURS (renew; the Makefile exports it to every command) --------------------------
    Row("hours-words", ["renew", "pie-lab"], ["HOURS", "'six'", "expected a number of hours above 0"],
        env={"HOURS": "six"}),
    Row("hours-zero", ["renew", "pie-lab"], ["HOURS", "'0'", "expected a number of hours above 0"],
        env={"HOURS": "0"}),
    Row("hours-negative", ["renew", "pie-lab"], ["HOURS", "'-3'", "expected a number of hours above 0"],
        env={"HOURS": "-3"}),
    Row("hours-nan", ["renew", "pie-lab"], ["HOURS", "'nan'", "expected a number of hours above 0"],
        env={"HOURS": "nan"}),
    Row("hours-option-words", ["renew", "pie-lab", "--hours", "six"], ["HOURS", "'six'", "expected a number of hours"]),
    # --- the testbed sites' numeric options (issue 54): bounded where they are parsed, so that
    # plan and a dry run refuse what up could not use (hours=1e308 overflowed datetime in up)
    *_bound_rows(),
    # --- a fabric_rc that is not one (a credential file given by mistake): never echoed -------
    Row("fabric-rc-a-shadow-file-up", ["up", "pie-vs-red", "--site", "fabric", "-o", "fabric_site=UTAH",
                                        "-o", "fabric_rc={tmp}/shadow"],
        ["{tmp}/shadow: line 1: expected `export NAME=value` (fablib's fabric_rc); the line is not shown"],
        setup=lambda tmp: (tmp / "shadow").write_text(SHADOW) and None),
    # --- RATE_SCALE (run, reproduce, their dry runs, provision) ---------------------------
    *_rate_rows(),
    *_rate_option_rows(),
    Row("rate-scale-pie-vs-red-run-dry-run", ["run", "pie-vs-red", "--dry-run"],
        ["RATE_SCALE=0.5", "experiments/pie-vs-red/experiment.yml", "rate_scale.allowed",
         "expected rate_scale.allowed: true"], env={"RATE_SCALE": "0.5"}),
    # --- SWEEP, NETREPRO_LEAD_S, ANSIBLE_TIMEOUT ------------------------------------------
    Row("sweep-yes-run-dry-run", ["run", FILE, "--dry-run"], ["SWEEP", "'yes'", "expected 1"], setup=COPY,
        env={"SWEEP": "yes"}),
    Row("sweep-yes-reproduce-dry-run", ["reproduce", FILE, "--dry-run"], ["SWEEP", "'yes'", "expected 1"],
        setup=COPY, env={"SWEEP": "yes"}),
    Row("sweep-yes-run", ["run", FILE], ["SWEEP", "'yes'", "expected 1"], setup=COPY, env={"SWEEP": "yes"}),
    Row("lead-words-run", ["run", FILE], ["NETREPRO_LEAD_S", "'soon'", "expected the barrier's lead in seconds"],
        setup=COPY, env={"NETREPRO_LEAD_S": "soon"}),
    Row("lead-zero-reproduce-dry-run", ["reproduce", FILE, "--dry-run"], ["NETREPRO_LEAD_S", "'0'", "from 0.2 to 3600"],
        setup=COPY, env={"NETREPRO_LEAD_S": "0"}),
    Row("ansible-timeout-words-run", ["run", FILE], ["ANSIBLE_TIMEOUT", "'ten'", "whole number of seconds"],
        setup=COPY, env={"ANSIBLE_TIMEOUT": "ten"}),
    Row("ansible-timeout-words-reproduce-dry-run", ["reproduce", FILE, "--dry-run"],
        ["ANSIBLE_TIMEOUT", "'ten'", "whole number of seconds"], setup=COPY, env={"ANSIBLE_TIMEOUT": "ten"}),
    Row("ansible-timeout-zero-provision", ["provision", FILE], ["ANSIBLE_TIMEOUT", "'0'", "from 1 to 3600"],
        setup=COPY, env={"ANSIBLE_TIMEOUT": "0"}),
    # --- --jobs (make's JOBS) -------------------------------------------------------------
    *[Row(f"jobs-{tag}-{'-'.join(a.strip('-') for a in cmd if a != FILE)}", [*cmd, "--site", "ns3", "--jobs", value],
          [f"netrepro: JOBS: '{value}': expected a whole number of trials to run at once (--jobs N) from 1 to 64"],
          setup=COPY)
      for value, tag in (("0", "zero"), ("65", "above-64"), ("two", "words"), ("-1", "negative"), ("1.5", "fraction"))
      for cmd in (["run", FILE], ["run", FILE, "--dry-run"], ["reproduce", FILE, "--dry-run"])],
    *[Row(f"jobs-2-on-{site}-{'-'.join(a.strip('-') for a in cmd if a != FILE)}", [*cmd, "--site", site, "--jobs", "2"],
          [f"netrepro: command line: --jobs: 2: site {site} runs its trials one at a time (a trial on machines "
           "measures correctly only alone); expected 1, or more on a site that simulates its trials (SITE=ns3)"],
          setup=COPY)
      for site in ("local", "static", "fabric")
      for cmd in (["run", FILE], ["run", FILE, "--dry-run"], ["reproduce", FILE, "--dry-run"])],
    Row("jobs-2-on-static-reproduce", ["reproduce", FILE, "--site", "static", "--jobs", "2"],
        ["command line: --jobs: 2: site static runs its trials one at a time"], setup=COPY),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_bad_input(row, tmp_path):
    run_row(row, tmp_path)


def test_a_wrong_fabric_rc_is_never_echoed(tmp_path):
    """A fabric_rc option naming a credential file by mistake: the refusal names the file and
    the line, and shows none of its text (it printed the line's first 80 characters)."""
    row = next(r for r in ROWS if r.id == "fabric-rc-a-shadow-file-up")
    err = run_row(row, tmp_path).stderr
    assert "SECRETHASH" not in err and "root:" not in err, err


def test_rows_are_many_and_unique():
    ids = [r.id for r in ROWS]
    assert len(ids) == len(set(ids)) and len(ids) >= 40


@pytest.mark.parametrize("env", [{"HOURS": "six"}, {"RATE_SCALE": "junk"}, {"SWEEP": "yes"},
                                 {"NETREPRO_LEAD_S": "soon"}, {"ANSIBLE_TIMEOUT": "ten"}],
                         ids=lambda e: next(iter(e)))
def test_commands_that_do_not_read_a_variable_ignore_it(env, tmp_path):
    """``validate`` and ``plan`` read none of these: a junk value does not stop them."""
    import os
    COPY(tmp_path)
    full = {**{k: v for k, v in os.environ.items() if not k.startswith("NETREPRO_")}, **env,
            "NETREPRO_STATE": str(tmp_path / "state"), "NETREPRO_RESULTS": str(tmp_path / "results")}
    for argv in (["validate", str(tmp_path / "experiment.yml")], ["plan", str(tmp_path / "experiment.yml")]):
        proc = subprocess.run([sys.executable, "-m", "netrepro", *argv], cwd=REPO, env=full,
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"{argv[0]} with {env}: {proc.stderr}"


def test_good_values_pass_the_check(tmp_path):
    """The control: the same dry runs with good values (RATE_SCALE at the min, at 1, unset
    on a file that forbids scaling; SWEEP=0) succeed."""
    import os
    base = {k: v for k, v in os.environ.items() if k not in ("RATE_SCALE", "SWEEP") and not k.startswith("NETREPRO_")}
    base.update(NETREPRO_STATE=str(tmp_path / "state"), NETREPRO_RESULTS=str(tmp_path / "results"))
    COPY(tmp_path)
    allowed = tmp_path / "experiment.yml"
    (tmp_path / "forbids").mkdir()
    NOT_ALLOWED(tmp_path / "forbids")
    forbids = tmp_path / "forbids" / "experiment.yml"
    for path, env, extra in ((allowed, {"RATE_SCALE": "0.02"}, []), (allowed, {"RATE_SCALE": "1", "SWEEP": "0"}, []),
                             (forbids, {"RATE_SCALE": "1"}, []), (forbids, {"RATE_SCALE": ""}, []), (forbids, {}, []),
                             # --rate-scale wins over a RATE_SCALE the file would refuse
                             (allowed, {"RATE_SCALE": "junk"}, ["--rate-scale", "0.02"]),
                             (forbids, {"RATE_SCALE": "0.5"}, ["--rate-scale", "1"])):
        proc = subprocess.run([sys.executable, "-m", "netrepro", "run", str(path), "--dry-run", *extra], cwd=REPO,
                              env={**base, **env}, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0 and "[dry-run]" in proc.stdout, f"{path} {env}: {proc.stderr}"
