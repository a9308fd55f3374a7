"""The ns3 site's Slurm executor (netrepro/sites/ns3/slurm.py) against a real Slurm: a
single-node cluster of Debian's slurm-wlm 22.05 with munge, MariaDB and slurmdbd
(tools/slurm-cluster), started by the fixture in a folder of its own and stopped after, with no
daemon left. Root (slurmd runs jobs as root here).

A campaign's trials go to the cluster as one job array and give the summaries the local
executor gives for the same seed and clock; a job cancelled with scancel and a job that dies
are each named in one line with the job id and Slurm's state, and the run resumes to
completion."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from analysis import analyze_run
from netrepro.cli.step_commands import judge_trial
from netrepro.experiment.spec import REPO_ROOT, load_spec
from netrepro.runner import run, steps
from netrepro.runner.console import StepIncomplete
from netrepro.sites.ns3 import site as ns3

CLUSTER = REPO_ROOT / "tools" / "slurm-cluster"
TRIALS = ["pie-unlimited", "red-limited"]
ORDER = ["pie-unlimited.r1", "red-limited.r1", "pie-unlimited.r2", "red-limited.r2"]


def _free_base_port() -> int:
    """Four free consecutive TCP ports on 127.0.0.1 (MariaDB, slurmdbd, slurmctld, slurmd)."""
    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            base = s.getsockname()[1]
        if base > 60000:
            continue
        socks = []
        try:
            for p in range(base, base + 4):
                s = socket.socket()
                socks.append(s)
                s.bind(("127.0.0.1", p))
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    pytest.fail("no four free consecutive ports on 127.0.0.1")


def _daemons(folder: Path) -> list[str]:
    out = subprocess.run(["pgrep", "-af", str(folder)], capture_output=True, text=True).stdout
    return [ln for ln in out.splitlines() if "pgrep" not in ln and "slurm-cluster" not in ln]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A running single-node Slurm cluster; SLURM_CONF set for this module's tests."""
    if os.geteuid() != 0:
        pytest.fail("needs root (slurmd, munged and MariaDB run as root here); run `make test` as root")
    missing = [p for p in ("slurmctld", "slurmd", "slurmdbd", "munged", "mariadbd") if shutil.which(p) is None]
    if missing:
        pytest.fail(f"{', '.join(missing)} missing: install Debian's slurm-wlm, slurmdbd, munge and mariadb-server "
                    "(`make slurm-packages`; make test does)")
    folder = tmp_path_factory.mktemp("slurm")
    p = subprocess.run([str(CLUSTER), "start", str(folder), str(_free_base_port())], capture_output=True, text=True,
                       timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SLURM_CONF", str(folder / "slurm.conf"))
        try:
            yield folder
        finally:
            stop = subprocess.run([str(CLUSTER), "stop", str(folder)], capture_output=True, text=True, timeout=120)
            assert stop.returncode == 0, stop.stdout + stop.stderr
            assert _daemons(folder) == [], "a daemon of the test cluster outlived it"


@pytest.fixture
def ns3_site(cluster, tmp_path, monkeypatch):
    """pie-vs-red on a provisioned ns3 site, state and results under tmp_path, every simulation
    starting at the same second of the wall clock (so that two runs give the same files)."""
    monkeypatch.setattr(steps, "STATE_ROOT", tmp_path / "state")
    monkeypatch.setenv("NETREPRO_RESULTS", str(tmp_path / "results"))
    epoch0 = float(int(time.time()))
    monkeypatch.setattr(ns3, "time", SimpleNamespace(time=lambda: epoch0))
    spec = load_spec("pie-vs-red")
    steps.up(spec, "ns3")
    steps.provision(spec, "ns3")
    return spec


def _campaign(spec, options=None, resume=None, jobs=None):
    """Two trials of pie-vs-red twice each in the file's order (:data:`ORDER`) at TIME_SCALE
    0.02, or the run ``resume`` continued."""
    given = {"resume": resume} if resume else {"trial_ids": TRIALS, "repeat": 2, "shuffle": False}
    return run.run(spec, "ns3", 0.02, options=options, progress_tty=False, judge=judge_trial, jobs=jobs, **given)


def _sacct() -> list[list[str]]:
    p = subprocess.run(["sacct", "-n", "-P", "-X", "-o", "JobID,JobName,State"], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    return [ln.split("|") for ln in p.stdout.splitlines()]


def test_a_campaign_runs_as_one_job_array_and_gives_the_local_executors_summaries(ns3_site, cluster, tmp_path, capsys):
    spec = ns3_site
    before = {row[0] for row in _sacct()}
    local = _campaign(spec, jobs=2)
    capsys.readouterr()
    on_slurm = _campaign(spec, options={"executor": "slurm", "slurm_time_min": "5"})
    said = [ln for ln in capsys.readouterr().err.splitlines() if "submitted to Slurm" in ln]
    assert len(said) == 1 and said[0].startswith("site ns3: 4 simulation(s) submitted to Slurm as job array "), said
    for d in (local, on_slurm):
        analyze_run(d)
    assert (local / "summary.csv").read_bytes() == (on_slurm / "summary.csv").read_bytes()
    meta = json.loads((on_slurm / "run.json").read_text())
    assert meta["jobs"] == 32 and [t["id"] for t in meta["trials"]] == ORDER
    # one array of four tasks (<array id>_<task>), each completed
    jobs = [row for row in _sacct() if row[0] not in before]
    assert len(jobs) == 4 and len({j[0].split("_")[0] for j in jobs}) == 1, jobs
    assert all(name == "netrepro-sim" and state == "COMPLETED" for _, name, state in jobs), jobs
    # the job files are the site's (its state folder's slurm/)
    assert any((tmp_path / "state" / "pie-vs-red-ns3" / "slurm").iterdir())


def _wrapper(tmp_path: Path, real: str) -> Path:
    """A stand-in for netrepro-sim that runs the real one, except for the trial instance named
    in ``cancel`` (its job id written to ``job``, then a minute's sleep, for the test to
    scancel) and the one named in ``die`` (it kills the job's own Python: the job fails)."""
    w = tmp_path / "sim-wrapper"
    w.write_text(f"""#!/bin/sh
ctl={tmp_path}
case "$2" in
  *"/$(cat "$ctl/cancel" 2>/dev/null)/"*)
    if [ -n "$SLURM_ARRAY_JOB_ID" ]; then echo "${{SLURM_ARRAY_JOB_ID}}_$SLURM_ARRAY_TASK_ID"; else echo "$SLURM_JOB_ID"; fi > "$ctl/job"
    sleep 60; exit 0 ;;
  *"/$(cat "$ctl/die" 2>/dev/null)/"*) kill -9 "$PPID"; sleep 5; exit 0 ;;
esac
exec {real} "$@"
""")
    w.chmod(0o755)
    return w


def test_a_cancelled_job_and_a_failed_one_are_named_and_the_run_resumes_to_completion(ns3_site, cluster, tmp_path):
    spec = ns3_site
    site = steps.open_site(spec, "ns3")
    state = site.load_state()
    real = state["simulator"]
    site.save_state({**state, "simulator": str(_wrapper(tmp_path, real))})
    opts = {"executor": "slurm", "slurm_time_min": "5"}
    (tmp_path / "cancel").write_text("red-limited.r1")
    (tmp_path / "die").write_text("nothing")

    def scancel_when_running():
        deadline = time.monotonic() + 120
        while not (tmp_path / "job").is_file() and time.monotonic() < deadline:
            time.sleep(0.2)
        subprocess.run(["scancel", (tmp_path / "job").read_text().strip()], check=True)

    t = threading.Thread(target=scancel_when_running)
    t.start()
    with pytest.raises(StepIncomplete) as stopped:
        _campaign(spec, options=opts, jobs=2)
    t.join()
    job = (tmp_path / "job").read_text().strip()
    run_dir = stopped.value.run_dir
    meta = json.loads((run_dir / "run.json").read_text())
    failed = next(s for s in meta["trial_status"] if s["id"] == "red-limited.r1")
    assert failed["status"] == "failed"
    assert failed["reason"].startswith(f"site ns3: Slurm job {job} CANCELLED"), failed["reason"]
    assert "\n" not in failed["reason"]
    assert [s["id"] for s in meta["trial_status"] if s["status"] == "complete"] == ["pie-unlimited.r1"]

    # resumed: this time the job of pie-unlimited.r2 dies (its Python killed): FAILED
    (tmp_path / "cancel").write_text("nothing")
    (tmp_path / "die").write_text("pie-unlimited.r2")
    with pytest.raises(StepIncomplete):
        _campaign(spec, options=opts, resume=run_dir, jobs=2)
    meta = json.loads((run_dir / "run.json").read_text())
    failed = next(s for s in meta["trial_status"] if s["id"] == "pie-unlimited.r2")
    assert failed["status"] == "failed" and " FAILED" in failed["reason"] and "Slurm job " in failed["reason"], failed
    assert "exit code" in failed["reason"] and "\n" not in failed["reason"]

    # resumed with the real simulator: complete, and what the local executor gives
    site.save_state({**site.load_state(), "simulator": real})
    done = _campaign(spec, options=opts, resume=run_dir)
    assert done == run_dir
    meta = json.loads((run_dir / "run.json").read_text())
    assert all(s["status"] == "complete" for s in meta["trial_status"]) and not (run_dir / "INCOMPLETE").exists()
    local = _campaign(spec, jobs=2)
    for d in (run_dir, local):
        analyze_run(d)
    assert (run_dir / "summary.csv").read_bytes() == (local / "summary.csv").read_bytes()
    assert subprocess.run(["squeue", "-h"], capture_output=True, text=True).stdout.strip() == "", "no job left"


@pytest.mark.parametrize("option, expected", [
    ("executor=pbs", "option executor='pbs' (from --option): expected one of: local, slurm"),
    ("slurm_time_min=0", "option slurm_time_min='0' (from --option): expected a whole number of minutes from 1 to 527040 "
                         "(a year, a conservative bound)"),
    ("slurm_mem_mb=99999999999", "option slurm_mem_mb='99999999999' (from --option): expected a whole number of MB "
                                 "from 1 to 4194304 (4 TiB, a conservative bound)"),
    ("slurm_cpus=1025", "option slurm_cpus='1025' (from --option): expected a whole number of CPUs from 1 to 1024 "
                        "(a conservative bound)"),
    ("rate_ceiling_mbit=1e308", "option rate_ceiling_mbit='1e308' (from --option): expected a rate in Mbit/s above 0 "
                                "and at most 800000 (800 Gbit/s, the fastest Ethernet rate)"),
    ("slurm_folder=relative/path", "option slurm_folder='relative/path' (from --option): expected an absolute path"),
])
def test_a_bad_slurm_option_is_refused_in_one_line(option, expected, capsys):
    from netrepro.cli import commands as cli
    assert cli.main(["plan", "pie-vs-red", "--site", "ns3", "--option", option]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"netrepro: site ns3: {expected}", err


def test_the_dry_run_gives_the_slurm_executors_jobs_at_once(capsys):
    """--jobs unsaid: 32 trial instances at once with the Slurm executor, one per core without."""
    from netrepro.cli import commands as cli
    assert cli.main(["run", "pie-vs-red", "--site", "ns3", "--dry-run", "--option", "executor=slurm"]) == 0
    assert ", 32 at a time: " in capsys.readouterr().out
    assert cli.main(["run", "pie-vs-red", "--site", "ns3", "--dry-run"]) == 0
    assert ", 32 at a time: " not in capsys.readouterr().out
