"""Tests of the command line (netrepro/cli/commands.py), run as ``python -m netrepro`` in a subprocess
with .state/ and results/ redirected to tmp_path (NETREPRO_STATE, NETREPRO_RESULTS): no
command here reserves, provisions or contacts anything."""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from netrepro.cli import commands as cli, options, step_commands
from netrepro.sites import OPTION_ENV
from netrepro.experiment.spec import EXPERIMENTS_DIR

REPO = Path(__file__).resolve().parent.parent
REAL = EXPERIMENTS_DIR / "pie-vs-red" / "experiment.yml"
SUBCOMMANDS = ["validate", "migrate", "setup", "plan", "rspec", "profile", "inventory", "up", "provision", "run", "analyze",
               "down", "status", "clean", "compare", "export", "renew", "quick", "reproduce"]


@pytest.fixture
def nr(tmp_path):
    """Run ``python -m netrepro ARGS`` with a clean environment; returns (rc, stdout, stderr)."""
    env = {k: v for k, v in os.environ.items() if k not in OPTION_ENV and k not in ("TIME_SCALE", "SITE", "RUN", "HOURS")}
    env.update(NETREPRO_STATE=str(tmp_path / "state"), NETREPRO_RESULTS=str(tmp_path / "results"),
               PYTHONPATH=str(REPO))

    def run(*args: str, extra_env: dict | None = None) -> tuple[int, str, str]:
        r = subprocess.run([sys.executable, "-m", "netrepro", *args], capture_output=True, text=True,
                           cwd=tmp_path, env={**env, **(extra_env or {})}, timeout=60)
        return r.returncode, r.stdout, r.stderr

    yield run
    # nothing may have been reserved or recorded
    assert not (tmp_path / "results").exists() or not any((tmp_path / "results").rglob("run.json"))


def _one_error_line(err: str) -> str:
    lines = err.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got: {err!r}"
    assert lines[0].startswith("netrepro: "), lines[0]
    return lines[0]


def test_help_lists_every_subcommand(nr):
    rc, out, err = nr("--help")
    assert rc == 0, err
    for cmd in SUBCOMMANDS:
        assert f"    {cmd} " in out, f"{cmd} missing from --help"
    assert set(cli.build_parser()._subparsers._group_actions[0].choices) == set(SUBCOMMANDS)


def test_no_subcommand_is_an_error(nr):
    rc, out, err = nr()
    assert rc == 2 and "required" in err


def test_validate_ok(nr):
    rc, out, err = nr("validate", "pie-vs-red")
    assert rc == 0, err
    assert out.strip() == f"{REAL}: valid (schema_version 2: 7 nodes, 4 trials, 5 phases)"
    assert err == ""


def test_validate_bad_file(nr, tmp_path):
    data = yaml.safe_load(REAL.read_text())
    bad = copy.deepcopy(data)
    bad["trials"][0]["qdiscs"]["router:eth1"][0]["rate_mbit"] = "ten"  # the bottleneck's HTB rate
    path = tmp_path / "bad.yml"
    path.write_text(yaml.safe_dump(bad))
    rc, out, err = nr("validate", str(path))
    assert rc == 2 and out == ""
    line = _one_error_line(err)
    assert str(path) in line and "trials[0].qdiscs.router:eth1[0].rate_mbit" in line and "expected" in line


def test_validate_missing_experiment(nr):
    rc, out, err = nr("validate", "no-such-experiment")
    assert rc == 2
    line = _one_error_line(err)
    assert "no-such-experiment" in line and "known experiments: codel-lab, pacing-lab, pie-lab, pie-vs-red" in line


def test_validate_not_yaml(nr, tmp_path):
    path = tmp_path / "broken.yml"
    path.write_text("name: [x\n")
    rc, out, err = nr("validate", str(path))
    assert rc == 2
    assert str(path) in _one_error_line(err) and "not valid YAML" in err


@pytest.mark.parametrize("value", ["0", "-1", "abc", "nan", "-0.5"])
def test_run_rejects_bad_time_scale(nr, value):
    rc, out, err = nr("run", "pie-vs-red", f"--time-scale={value}")
    assert rc == 2 and out == ""
    last = err.strip().splitlines()[-1]
    # argparse reports it (after its usage line): the message names TIME_SCALE and the value
    assert "TIME_SCALE: expected a number from 0.001 to 100" in last and repr(value) in last, err


@pytest.mark.parametrize("value", ["0", "-1", "abc"])
def test_run_rejects_bad_time_scale_as_separate_arg(nr, value):
    rc, out, err = nr("run", "pie-vs-red", "--time-scale", value)
    assert rc == 2
    assert "TIME_SCALE: expected a number from 0.001 to 100" in err.strip().splitlines()[-1], err


def test_bad_time_scale_environment_is_one_line(nr):
    rc, out, err = nr("run", "pie-vs-red", extra_env={"TIME_SCALE": "abc"})
    assert rc == 2
    assert _one_error_line(err) == ("netrepro: TIME_SCALE: expected a number from 0.001 to 100 "
                                    "(the factor of every duration), got 'abc'")


def test_bad_time_scale_environment_does_not_break_other_commands(nr):
    rc, out, err = nr("validate", "pie-vs-red", extra_env={"TIME_SCALE": "0"})
    assert rc == 0, err


def test_time_scale_must_be_finite():
    import argparse
    with pytest.raises(argparse.ArgumentTypeError, match="TIME_SCALE"):
        options.time_scale_arg("inf")


def test_time_scale_parser_values():
    assert options.time_scale_arg("0.1") == 0.1
    assert options.time_scale_arg("2") == 2.0
    args = cli.build_parser().parse_args(["run", "pie-vs-red", "--time-scale", "0.25", "--trial", "pie-limited"])
    assert args.time_scale == 0.25 and args.trial == ["pie-limited"] and args.func is step_commands.cmd_run


def test_analyze_empty_run_folder(nr, tmp_path):
    empty = tmp_path / "emptyrun"
    empty.mkdir()
    rc, out, err = nr("analyze", "pie-vs-red", "--run", str(empty))
    assert rc == 2 and out == ""
    line = _one_error_line(err)
    assert str(empty / "run.json") in line and "no run.json" in line


def test_analyze_default_is_latest_of_results(nr, tmp_path):
    rc, out, err = nr("analyze", "pie-vs-red")
    assert rc == 2
    line = _one_error_line(err)
    assert str(tmp_path / "results" / "pie-vs-red" / "latest" / "run.json") in line


def test_plan_local_prints_nodes_and_addresses(nr, tmp_path):
    rc, out, err = nr("plan", "pie-vs-red", "--site", "local")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0] == "local site for pie-vs-red: one network namespace per node"
    assert "management network 172.30.0.0/24 on bridge nr-mgmt" in lines
    assert "LAN clients_lan 10.10.1.0/24 on bridge nr-clients_lan" in lines
    assert "LAN servers_lan 10.10.2.0/24 on bridge nr-servers_lan" in lines
    node_lines = {ln.split()[0]: ln for ln in lines if ln.startswith("  ")}
    assert list(node_lines) == ["router", "client1", "client2", "client3", "server1", "server2", "server3"]
    assert node_lines["client1"].split() == ["client1", "client", "eth0", "172.30.0.12", "(mgmt),",
                                             "eth1", "10.10.1.1", "(clients_lan)"]
    assert "eth1 10.10.1.254 (clients_lan), eth2 10.10.2.254 (servers_lan)" in node_lines["router"]
    assert "eth0 172.30.0.17 (mgmt)" in node_lines["server3"]
    assert not (tmp_path / "state").exists()  # plan makes nothing


def test_plan_local_mgmt_subnet_option(nr):
    rc, out, err = nr("plan", "pie-vs-red", "--site", "local", "-o", "mgmt_subnet=10.99.0.0/24")
    assert rc == 0, err
    assert "management network 10.99.0.0/24" in out and "eth0 10.99.0.12 (mgmt)" in out


def test_plan_unknown_site(nr):
    rc, out, err = nr("plan", "pie-vs-red", "--site", "nosuch")
    assert rc == 2 and out == ""
    line = _one_error_line(err)
    assert "nosuch" in line
    for site in ("local", "instageni", "fabric", "static"):
        assert site in line


def test_bad_option_syntax(nr):
    rc, out, err = nr("plan", "pie-vs-red", "--site", "local", "-o", "mgmt_subnet")
    assert rc == 2
    line = _one_error_line(err)
    assert "--option" in line and "KEY=VALUE" in line


def test_main_in_process(capsys, monkeypatch):
    import signal
    monkeypatch.setattr(signal, "signal", lambda *a: None)  # main() would install a SIGTERM handler in pytest
    assert cli.main(["validate", "pie-vs-red"]) == 0
    assert "valid (schema_version 2: 7 nodes" in capsys.readouterr().out
    assert cli.main(["validate", "/nonexistent/x.yml"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("netrepro: /nonexistent/x.yml: (file): ") and err.count("\n") == 1


def test_sigint_interrupts_even_when_started_ignored():
    """A background job of a non-interactive shell (CI, make) starts with SIGINT ignored, and
    Python keeps SIG_IGN: netrepro installs its own handler, so SIGINT still stops a run."""
    import signal as _signal
    code = (
        "import signal, sys, time\n"
        "signal.signal(signal.SIGINT, signal.SIG_IGN)\n"
        "from netrepro.cli import commands as cli\n"
        "def slow(args):\n"
        "    print('ready', flush=True); time.sleep(60); return 0\n"
        "cli.cmd_validate = slow\n"
        "sys.exit(cli.main(['validate', 'pie-vs-red']))\n")
    p = subprocess.Popen([sys.executable, "-c", code], cwd=Path(__file__).resolve().parent.parent,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    p.send_signal(_signal.SIGINT)
    out, err = p.communicate(timeout=30)
    assert p.returncode == 130, (out, err)
    assert err.strip() == ("netrepro: interrupted; what this step made was removed, or is named above with the command "
                           "that releases it")


# --- --jobs (make's JOBS) ---------------------------------------------------------------------------
def test_jobs_option_values():
    import argparse
    parse = cli.build_parser().parse_args
    assert parse(["run", "pie-vs-red", "--site", "ns3", "--jobs", "3"]).jobs == 3
    assert parse(["reproduce", "pie-vs-red", "--jobs", "64"]).jobs == 64
    assert parse(["run", "pie-vs-red"]).jobs is None  # the site's default (netrepro.runner.instances.checked_jobs)
    assert options.schedule_args(parse(["run", "pie-vs-red", "--jobs", "2"]))["jobs"] == 2
    for bad in ("0", "65", "x", "2.5", ""):
        with pytest.raises(argparse.ArgumentTypeError, match=r"JOBS: .*expected a whole number of trials to run at "
                                                             r"once \(--jobs N\) from 1 to 64"):
            options.jobs_arg(bad)


def test_a_dry_run_says_how_long_n_at_once_take(nr):
    """4 simulated instances of 15 s each (Ns3Site's pace at full length) two at once: 30 s."""
    rc, out, err = nr("run", "pie-vs-red", "--site", "ns3", "--jobs", "2", "--dry-run")
    assert rc == 0, err
    assert out.splitlines()[-1] == ("[dry-run] 4 trial instances, about 0:01:00 of trials (0:00:15 each: schedule "
                                    "0:04:10 simulated + overhead), 2 at a time: about 0:00:30; nothing was run or "
                                    "written")
    rc, out, err = nr("run", "pie-vs-red", "--site", "local", "--jobs", "1", "--dry-run")
    assert rc == 0 and "at a time" not in out, err  # one at a time, given explicitly: accepted


def test_make_passes_jobs_to_run_and_reproduce_only_when_set():
    for target in ("run", "reproduce"):
        given = subprocess.run(["make", "-n", target, "SITE=ns3", "JOBS=3"], cwd=REPO, capture_output=True, text=True)
        assert f"-m netrepro {target} pie-vs-red --site ns3 " in given.stdout and " --jobs 3" in given.stdout, given
        unset = subprocess.run(["make", "-n", target, "SITE=ns3"], cwd=REPO, capture_output=True, text=True)
        assert f"-m netrepro {target} pie-vs-red" in unset.stdout and "--jobs" not in unset.stdout, unset
    helped = subprocess.run(["make", "help"], cwd=REPO, capture_output=True, text=True).stdout
    for target in ("run", "reproduce"):
        line = next(ln for ln in helped.splitlines() if ln.split()[:1] == [target])
        assert "JOBS=N: trials simulated at once, ns3 only, default one per core" in line, line


def test_the_command_line_does_not_import_the_plotting_libraries(tmp_path):
    """seaborn (and matplotlib's font manager with it) writes a font cache into HOME when first
    imported: the command line imports it only where a figure is drawn, so that a command that
    fails on bad input leaves HOME as it was (tests/test_bad_input_sites.py)."""
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", "import sys, netrepro.cli.commands; print('seaborn' in sys.modules)"],
                       capture_output=True, text=True, env={**__import__("os").environ, "HOME": str(tmp_path)})
    assert p.returncode == 0 and p.stdout.strip() == "False", p.stderr
    assert list(tmp_path.iterdir()) == []


def test_the_command_line_starts_without_the_analysis():
    """Every command but those that analyse starts without pandas, numpy or matplotlib: they
    cost ~0.4 s of each start on a 2-core machine, and the bad-input tables start the command
    line hundreds of times (the analysis is imported where a command first needs it)."""
    code = ("import sys, netrepro.cli.commands; "
            "print(sorted(m for m in ('pandas', 'numpy', 'matplotlib', 'seaborn', 'analysis') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]", out.stdout


def test_the_analysis_refuses_a_run_folder_before_it_loads_the_figure_libraries():
    """The analysis' modules import matplotlib and seaborn (about 1 s of a start on a 2-core
    machine) only where a figure is drawn, so that a damaged run folder is refused first: the
    run-folder bad-input table (tests/test_bad_input_runs.py) starts it dozens of times."""
    code = ("import sys, analysis.repetitions, analysis.compare, analysis.sweep, netrepro.cli.bench; "
            "print(sorted(m for m in ('matplotlib', 'seaborn') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]", out.stdout
