"""Repetitions: the order of a repeated run (netrepro.runner.schedule), its bookkeeping in run.json and
resume (netrepro.runner.run.run), the dry run, the progress lines (netrepro.runner.progress), and the
analysis across repetitions (analysis.repetitions) on recorded runs."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import analysis
from analysis import repetitions as reps
from conftest import distinct_run
from netrepro.runner import progress
from netrepro.runner import schedule
from netrepro.runner import attempt as run_attempt, instances, resume, run, steps
from netrepro.runner.console import StepIncomplete
from netrepro.runner.trial import TrialFailed
from netrepro.sites.local.site import LocalSite
from netrepro.sites.ns3.site import Ns3Site
from netrepro.experiment.spec import SpecError, load_spec

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
V1_RUN = DATA / "pie-vs-red-local-0.1"
LAB_RUN = DATA / "labs" / "pie-lab-local-0.2"


# --- the order --------------------------------------------------------------------------------------
def test_one_repetition_keeps_the_files_order_and_plain_ids():
    p = schedule.plan(["a", "b", "c"], 1, shuffle=True, seed=1)
    assert [(i.id, i.trial, i.repetition) for i in p] == [("a", "a", 1), ("b", "b", 1), ("c", "c", 1)]


def test_repetitions_are_blocks_of_one_of_each_in_an_order_the_seed_draws_again():
    ids = ["pie-unlimited", "red-unlimited", "pie-limited", "red-limited"]
    p = schedule.plan(ids, 5, shuffle=True, seed=42)
    assert len(p) == 20 and len({i.id for i in p}) == 20
    for k in range(1, 6):
        block = p[(k - 1) * 4:k * 4]
        assert sorted(i.trial for i in block) == sorted(ids) and {i.repetition for i in block} == {k}
        assert all(i.id == f"{i.trial}.r{k}" for i in block)
    assert schedule.plan(ids, 5, shuffle=True, seed=42) == p  # the recorded seed gives the same order
    assert any([i.trial for i in p[j:j + 4]] != ids for j in range(0, 20, 4))  # shuffled (seed 42: yes)
    assert [i.trial for i in schedule.plan(ids, 3, shuffle=False)] == ids * 3


@pytest.mark.parametrize("repeat", [0, -1, schedule.REPEAT_MAX + 1, 2.5, True])
def test_a_repeat_out_of_range_is_refused(repeat):
    with pytest.raises(ValueError, match="REPEAT: .*expected a whole number of repetitions from 1 to 100"):
        schedule.plan(["a"], repeat)


def test_instance_ids_are_distinct_even_for_a_trial_named_like_an_instance():
    p = schedule.plan(["a", "a.r1"], 2, shuffle=False)
    assert [i.id for i in p] == ["a.r1", "a.r1.r1", "a.r2", "a.r1.r2"]


def test_overhead_is_the_median_time_beyond_the_schedule():
    recs = [{"wall_s": 70, "duration_s": 25}, {"wall_s": 80, "duration_s": 25}, {"wall_s": 100, "duration_s": 25},
            {"id": "no wall"}]
    assert schedule.overhead_s(recs) == 55 and schedule.overhead_s([]) is None
    assert schedule.hms(3725.4) == "1:02:05" and schedule.hms(-3) == "0:00:00"


# --- the dry run ------------------------------------------------------------------------------------
def _nr(*args, env=None):
    return subprocess.run([sys.executable, "-m", "netrepro", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, timeout=120)


def test_the_dry_run_prints_every_instance_in_order_and_touches_nothing(tmp_path):
    results, state = tmp_path / "results", tmp_path / "state"
    p = _nr("run", "pie-vs-red", "--repeat", "3", "--seed", "5", "--dry-run", "--time-scale", "0.1",
            env={"NETREPRO_RESULTS": str(results), "NETREPRO_STATE": str(state)})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines[0] == ("[dry-run] pie-vs-red on local, TIME_SCALE=0.1, REPEAT=3, shuffled with seed 5 "
                        "(--seed 5 runs this order)")
    want = schedule.plan(load_spec("pie-vs-red").trial_ids, 3, True, 5)
    # last, what TIME_SCALE 0.1 does to the claims (pie-vs-red's time_scale.min is 0.25)
    assert lines.pop().startswith("[dry-run] TIME_SCALE=0.1 is shorter than ") and "every claim" in p.stdout
    rows = lines[1:-1]
    assert [r.split()[1] for r in rows] == [i.id for i in want]
    # the schedule (25 s) + base RTT (3 s) at TIME_SCALE 0.1, + the default overhead (no earlier run here)
    each = 25 + 3 + LocalSite.TRIAL_OVERHEAD_S
    assert f"~{schedule.hms(each)} (done by ~{schedule.hms(12 * each)})" in rows[-1]
    assert "aqm " in rows[0] and ", variant " in rows[0]
    assert lines[-1].startswith(f"[dry-run] 12 trial instances, about {schedule.hms(12 * each)} of trials")
    assert not results.exists() and not state.exists()


def test_the_dry_run_estimates_a_simulated_trial_at_the_simulations_pace(tmp_path):
    p = _nr("run", "pie-vs-red", "--site", "ns3", "--repeat", "2", "--dry-run",
            env={"NETREPRO_RESULTS": str(tmp_path / "results"), "NETREPRO_STATE": str(tmp_path / "state")})
    assert p.returncode == 0, p.stderr
    # (250 s schedule + 30 s base RTT) x 0.05 + 1 s: 15 s, not the 4 min 40 s of real time
    each = (250 + 30) * Ns3Site.TRIAL_WALL_PER_SCHEDULED_S + Ns3Site.TRIAL_OVERHEAD_S
    assert each < 60
    last = p.stdout.splitlines()[-1]
    assert last.startswith(f"[dry-run] 8 trial instances, about {schedule.hms(8 * each)} of trials "
                           f"({schedule.hms(each)} each: schedule 0:04:10 simulated + overhead)"), last


def test_make_passes_repeat_and_dry_run(tmp_path):
    p = subprocess.run(["make", "-n", "reproduce-pie-vs-red", "REPEAT=5", "DRY_RUN=1", "SEED=3", "NO_SHUFFLE=1"],
                       cwd=REPO, capture_output=True, text=True)
    assert "--repeat 5 --seed 3 --no-shuffle --dry-run" in p.stdout, p.stdout


@pytest.mark.parametrize("args, line", [
    (["--repeat", "0"], "netrepro: REPEAT: '0': expected a whole number of repetitions from 1 to 100"),
    (["--repeat", "x"], "netrepro: REPEAT: 'x': expected a whole number of repetitions from 1 to 100"),
    (["--seed", "-4"], "netrepro: SEED: '-4': expected a whole number from 0 to 4294967295"),
])
def test_bad_repetition_options_get_one_line(args, line):
    p = _nr("run", "pie-vs-red", "--dry-run", *args)
    assert p.returncode == 2 and p.stderr.strip() == line and p.stdout == ""


# --- the run's bookkeeping --------------------------------------------------------------------------
@pytest.fixture
def fake_site(recorded_site):
    """netrepro.runner.run.run with every trial replaced by the recorded one (tests/conftest.py)."""
    return recorded_site


def test_a_repeated_run_records_its_seed_order_and_instances(fake_site, capsys):
    spec = load_spec("pie-vs-red")
    run_dir = run.run(spec, "local", 0.1, repeat=2, seed=7, progress_tty=False)
    meta = json.loads((run_dir / "run.json").read_text())
    want = schedule.plan(spec.trial_ids, 2, True, 7)
    assert fake_site.ran == [i.id for i in want]
    assert meta["repetitions"]["repeat"] == 2 and meta["repetitions"]["seed"] == 7 and meta["repetitions"]["shuffle"]
    assert [(s["id"], s["trial"], s["repetition"], s["status"]) for s in meta["trial_status"]] == \
        [(i.id, i.trial, i.repetition, "complete") for i in want]
    assert [(t["id"], t["trial"], t["repetition"]) for t in meta["trials"]] == [(i.id, i.trial, i.repetition) for i in want]
    assert sorted(p.name for p in (run_dir / "raw").iterdir()) == sorted(i.id for i in want)
    assert not (run_dir / "INCOMPLETE").exists()
    out = capsys.readouterr().out
    # plain, timestamped progress lines (stdout is not a terminal here)
    assert f"] trial 1 of 8: {want[0].id} (aqm {want[0].trial.split('-')[0]}, variant" in out
    assert f"] trial {want[-1].id} complete in " in out and "8 of 8 done" in out


def test_an_interrupted_repeated_run_resumes_with_its_own_order(fake_site):
    spec = load_spec("pie-vs-red")
    want = schedule.plan(spec.trial_ids, 2, True, 9)
    fake_site.stop_at["id"] = want[5].id
    with pytest.raises(StepIncomplete) as exc:
        run.run(spec, "local", 0.1, repeat=2, seed=9, progress_tty=False)
    run_dir = exc.value.run_dir
    assert fake_site.ran == [i.id for i in want[:5]]
    assert f"run INCOMPLETE at trial {want[5].id}" in (run_dir / "INCOMPLETE").read_text()
    with pytest.raises(SpecError, match=r"--repeat: 3: the run was made with REPEAT 2; leave it out to resume"):
        resume.load_resume(spec, "local", run_dir, None, None, 3)
    fake_site.stop_at.clear()
    assert run.run(spec, "local", None, resume=run_dir, progress_tty=False) == run_dir
    assert fake_site.ran == [i.id for i in want]
    meta = json.loads((run_dir / "run.json").read_text())
    assert [t["id"] for t in meta["trials"]] == [i.id for i in want] and not (run_dir / "INCOMPLETE").exists()



def test_a_resume_with_another_repeat_is_refused_alike_by_run_its_dry_run_and_reproduce(fake_site, capsys,
                                                                                      monkeypatch):
    """A run's arguments are checked in one place (netrepro.runner.instances.plan_run) for every
    command that runs trials: run, its dry run and reproduce (before anything is reserved)
    refuse one resume with another REPEAT in the same line, exit 2 (the dry run once let it by)."""
    from netrepro.cli import commands as cli
    spec = load_spec("pie-vs-red")
    fake_site.stop_at["id"] = schedule.plan(spec.trial_ids, 2, True, 9)[5].id
    with pytest.raises(StepIncomplete) as exc:
        run.run(spec, "local", 0.1, repeat=2, seed=9, progress_tty=False)
    run_dir = exc.value.run_dir
    capsys.readouterr()
    monkeypatch.setattr(steps, "preflight_reservations", lambda *a, **k: pytest.fail("the site was contacted"))
    want = "--repeat: 3: the run was made with REPEAT 2; leave it out to resume"
    with pytest.raises(SpecError, match=want):
        run.run(spec, "local", None, resume=run_dir, repeat=3, progress_tty=False)
    with pytest.raises(SpecError, match=want):
        instances.dry_run(spec, "local", None, resume=run_dir, repeat=3)
    lines = []
    for argv in (["run"], ["run", "--dry-run"], ["reproduce"], ["reproduce", "--dry-run"]):
        assert cli.main([argv[0], "pie-vs-red", "--site", "local", "--resume", str(run_dir), "--repeat", "3",
                         *argv[1:]]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1, err
        lines.append(err)
    assert len(set(lines)) == 1 and want in lines[0], lines


def test_an_unhealthy_trial_runs_again_once_and_the_run_goes_on(fake_site, capsys):
    """A trial whose health checks fail is not kept while a retry is left
    (run_attempt.UNHEALTHY_RETRIES): it runs again at once, its first attempt recorded as failed with
    its checks; unhealthy twice, the second attempt is kept with its failed checks (its claims
    are then inconclusive), and the run goes on to the end either way."""
    assert run_attempt.UNHEALTHY_RETRIES == 1
    spec = load_spec("pie-vs-red")
    fake_site.unhealthy.update({"pie-limited": 1, "red-limited": 2})
    run_dir = run.run(spec, "local", 0.25, shuffle=False, progress_tty=False, judge=lambda *a: None)
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["unhealthy_retries"] == 1
    assert fake_site.ran == ["pie-unlimited", "red-unlimited", "pie-limited", "pie-limited", "red-limited",
                             "red-limited"]
    status = {s["id"]: s for s in meta["trial_status"]}
    assert all(s["status"] == "complete" for s in status.values()) and not (run_dir / "INCOMPLETE").exists()
    first = status["pie-limited"]["attempts"][0]
    assert first["status"] == "failed" and first["unhealthy"] is True and first["kept_in"] == "failed/pie-limited-1"
    assert first["reason"] == "health checks failed: flow_start_lag 216 ms (max 100 ms): FAILED"
    assert [a["status"] for a in status["pie-limited"]["attempts"]] == ["failed", "complete"]
    assert [a["status"] for a in status["red-limited"]["attempts"]] == ["failed", "complete"]
    records = {t["id"]: t for t in meta["trials"]}
    assert "health" not in records["pie-limited"]  # the healthy attempt (the fake records none)
    assert records["red-limited"]["health"]["passed"] is False  # unhealthy again: kept as it is
    assert [t["id"] for t in meta["trials"]] == ["pie-unlimited", "red-unlimited", "pie-limited", "red-limited"]
    out = capsys.readouterr().out
    assert "] trial pie-limited FAILED in " in out and "health checks failed: flow_start_lag 216 ms" in out
    assert "4 of 4 done" in out


def test_no_trial_runs_again_below_the_time_scale_of_every_claim(fake_site):
    """At a time scale shorter than every claim's time_scale_min (pie-vs-red's is 0.25) the
    verdict can only be inconclusive: an unhealthy trial is kept at once, and run.json says
    that no trial is run again (``unhealthy_retries`` 0)."""
    spec = load_spec("pie-vs-red")
    assert run_attempt.unhealthy_retries(spec, 0.25) == 1 and run_attempt.unhealthy_retries(spec, 0.24) == 0
    fake_site.unhealthy.update({"pie-limited": 1})
    run_dir = run.run(spec, "local", 0.1, shuffle=False, progress_tty=False, judge=lambda *a: None)
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["unhealthy_retries"] == 0
    assert fake_site.ran == ["pie-unlimited", "red-unlimited", "pie-limited", "red-limited"]
    status = {s["id"]: s for s in meta["trial_status"]}
    assert [a["status"] for a in status["pie-limited"]["attempts"]] == ["complete"]
    assert {t["id"]: t for t in meta["trials"]}["pie-limited"]["health"]["passed"] is False


def test_a_failed_trial_stops_the_run_and_run_json_says_why(fake_site, monkeypatch):
    """A trial that fails its checks (its processes stopped on the nodes, its data kept aside)
    stops the run: run.json records the attempt, its reason and where its data went,
    INCOMPLETE says where the run stopped, the exit status is 2 and ``latest`` is not moved.
    An unexpected error in a trial is recorded the same way, then raised again."""
    spec = load_spec("pie-vs-red")
    recorded_trial, stopped = run_attempt.run_trial, []

    def trial(spec, site, inv, tv, *args, **kwargs):
        if tv["id"] == "red-unlimited" and not stopped:  # its first attempt
            raise TrialFailed("queue sampler on router ended early", stop=True,
                               details={"kept_in": "failed/red-unlimited-1"})
        if tv["id"] == "pie-limited":
            raise TypeError("a bug")
        return recorded_trial(spec, site, inv, tv, *args, **kwargs)

    monkeypatch.setattr(run_attempt, "run_trial", trial)
    monkeypatch.setattr(run_attempt, "stop_trial", lambda spec, inv, site, tv: stopped.append(tv["id"]))
    with pytest.raises(StepIncomplete) as exc:
        run.run(spec, "local", 0.1, shuffle=False, progress_tty=False)
    run_dir = exc.value.run_dir
    assert exc.value.exit_code == 2 and stopped == ["red-unlimited"] and fake_site.ran == ["pie-unlimited"]
    assert str(exc.value).startswith("run INCOMPLETE at trial red-unlimited (queue sampler on router ended early); "
                                     f"1 of 4 trials kept in {run_dir}; resume with: netrepro run pie-vs-red --resume ")
    meta = json.loads((run_dir / "run.json").read_text())
    status = {s["id"]: s for s in meta["trial_status"]}
    assert [status[t]["status"] for t in spec.trial_ids] == ["complete", "failed", "pending", "pending"]
    [attempt] = status["red-unlimited"]["attempts"]
    assert attempt["status"] == "failed" and attempt["reason"] == "queue sampler on router ended early"
    assert attempt["kept_in"] == "failed/red-unlimited-1" and "ended_at" in attempt
    assert [t["id"] for t in meta["trials"]] == ["pie-unlimited"] and list(meta["raw_sha256"])
    assert (run_dir / "INCOMPLETE").read_text().startswith(
        "run INCOMPLETE at trial red-unlimited: queue sampler on router ended early\n"
        "kept: pie-unlimited (1 of 4 trials; raw files and their sha256 in run.json)\n")
    assert not (run_dir.parent / "latest").exists()

    with pytest.raises(TypeError, match="a bug"):
        run.run(spec, "local", None, resume=run_dir, progress_tty=False)
    meta = json.loads((run_dir / "run.json").read_text())
    status = {s["id"]: s for s in meta["trial_status"]}
    assert [status[t]["status"] for t in spec.trial_ids] == ["complete", "complete", "failed", "pending"]
    assert [a["status"] for a in status["red-unlimited"]["attempts"]] == ["failed", "complete"]
    assert status["pie-limited"]["reason"] == "TypeError: a bug" and len(meta["resumes"]) == 1
    assert (run_dir / "INCOMPLETE").read_text().startswith("run INCOMPLETE at trial pie-limited: TypeError: a bug\n")

# --- progress ---------------------------------------------------------------------------------------
PING = ("PING 10.10.2.2 (10.10.2.2) 56(84) bytes of data.\n"
        "[1795413918.924935] 64 bytes from 10.10.2.2: icmp_seq=1 ttl=63 time=105 ms\n"
        "[1795413919.032436] 64 bytes from 10.10.2.2: icmp_seq=2 ttl=63 time=131 ms\n"
        "[1795413919.132436] 64 bytes from 10.10.2.2: icmp_seq=3 ttl=63 time=125 ms\n")
BASE = ("[1795413912.849585] 64 bytes from 10.10.2.2: icmp_seq=2 ttl=63 time=102 ms\n"
        "[1795413912.951133] 64 bytes from 10.10.2.2: icmp_seq=3 ttl=63 time=101 ms\n"
        "[1795413913.051133] 64 bytes from 10.10.2.2: icmp_seq=4 ttl=63 time=100 ms\n")


def test_the_live_queueing_delay_is_the_median_rtt_above_the_base():
    assert progress.queueing_delay_ms(PING, BASE) == 24.0
    assert progress.queueing_delay_ms(PING, None) == 20.0  # above the least RTT seen
    assert progress.queueing_delay_ms("no reply\n", BASE) is None


def test_the_probe_reads_the_last_pings_of_the_trial_folder(tmp_path):
    (tmp_path / "ping.txt").write_text(PING)
    (tmp_path / "base_rtt.txt").write_text(BASE)
    probe = progress.queueing_delay_probe(lambda cmd: ["sh", "-c", cmd], str(tmp_path), samples=2)
    assert probe() == 27.0  # median of 131 and 125, less 101
    gone = progress.queueing_delay_probe(lambda cmd: ["sh", "-c", "exit 255"], str(tmp_path))
    assert gone() is None


def test_plain_progress_lines_name_each_phase_its_flows_the_delay_and_the_eta():
    out = io.StringIO()
    p = progress.RunProgress(4, done=1, estimate_s=100.0, tty=False, out=out)
    start = time.time()
    phases = [{"name": "p1", "start_s": 0, "end_s": 0.2, "flows": 10}, {"name": "p2", "start_s": 0.2, "end_s": 0.4, "flows": 30}]
    probes: list[int] = []
    p.trial("pie-limited.r2", "aqm pie, variant limited", phases, lambda: start,
            lambda: probes.append(1) or 12.5)
    time.sleep(1.5)
    p.end("pie-limited.r2", True)
    lines = out.getvalue().splitlines()
    assert lines[0].endswith("trial 2 of 4: pie-limited.r2 (aqm pie, variant limited); elapsed 0:00:00, ETA 0:05:00")
    ended = [ln for ln in lines if "ended" in ln]
    assert len(ended) == 2 and "phase p1 (1 of 2, 10 flows) ended; queueing delay median 12.5 ms" in ended[0]
    assert "phase p2 (2 of 2, 30 flows) ended; queueing delay median 12.5 ms" in ended[1]
    assert probes == [1]  # read once: the later marks came within PROBE_MIN_INTERVAL_S
    assert "trial pie-limited.r2 complete in 0:00:0" in lines[-1] and "2 of 4 done" in lines[-1]
    assert all(ln.startswith("[") and ln[9:11] == "Z]" for ln in lines)  # [HH:MM:SSZ]
    assert p.eta_s() == pytest.approx(2 * p.walls[0])  # the finished trial's wall time, not the estimate


def test_a_phase_without_a_flow_count_is_named_without_one():
    """A phase whose traffic is not counted in flows (iperf3 items, no FTP) says nothing of flows."""
    out = io.StringIO()
    p = progress.RunProgress(1, estimate_s=10.0, tty=False, out=out)
    start = time.time()
    p.trial("codel", "aqm codel", [{"name": "cubic", "start_s": 0, "end_s": 0.2}], lambda: start, lambda: None)
    time.sleep(1.2)
    p.end("codel", True)
    ended = [ln for ln in out.getvalue().splitlines() if "ended" in ln]
    assert len(ended) == 1 and "phase cubic (1 of 1) ended; queueing delay median n/a" in ended[0], ended
    assert "flows" not in ended[0]


def test_the_delay_is_read_at_phase_middles_only(monkeypatch):
    """Never at a phase's end, where the next phase's flows start: two phases, two readings
    even when no least interval holds them back."""
    monkeypatch.setattr(progress, "PROBE_MIN_INTERVAL_S", 0.0)
    p = progress.RunProgress(1, tty=False, out=io.StringIO())
    phases = [{"name": "p1", "start_s": 0, "end_s": 0.2, "flows": 10}, {"name": "p2", "start_s": 0.2, "end_s": 0.4, "flows": 30}]
    probes: list[int] = []
    start = time.time()
    p.trial("t", "", phases, lambda: start, lambda: probes.append(1) or 1.0)
    time.sleep(1.5)
    p.end("t", True)
    assert probes == [1, 1]


# --- the analysis across repetitions ----------------------------------------------------------------
def compose(dest: Path, sources: list[Path]) -> Path:
    """A repeated run folder from recorded runs of one experiment: run k's trials become
    instances ``<trial>.r<k>`` (raw folders copied unchanged), as netrepro run records them."""
    base = json.loads((sources[0] / "run.json").read_text())
    meta = {**base, "trials": [], "raw_sha256": {}, "trial_status": [],
            "repetitions": {"repeat": len(sources), "shuffle": False, "seed": None, "design": "composed by the test"}}
    for k, src in enumerate(sources, 1):
        for t in json.loads((src / "run.json").read_text())["trials"]:
            iid = f"{t['id']}.r{k}"
            shutil.copytree(src / "raw" / t["id"], dest / "raw" / iid)
            meta["trials"].append({**t, "id": iid, "trial": t["id"], "repetition": k})
            for f in sorted((dest / "raw" / iid).rglob("*")):
                if f.is_file():
                    meta["raw_sha256"][f.relative_to(dest / "raw").as_posix()] = hashlib.sha256(f.read_bytes()).hexdigest()
    (dest / "run.json").write_text(json.dumps(meta, indent=1))
    return dest


@pytest.mark.parametrize("recorded", [V1_RUN, LAB_RUN], ids=["schema-1", "schema-2"])
def test_identical_repetitions_agree_with_the_single_run(tmp_path, recorded):
    single = analysis.analyze(shutil.copytree(recorded, tmp_path / "single"), figures=False)
    run = compose(tmp_path / "rep", [recorded, recorded])
    res = analysis.analyze(run)
    v = res.verdict
    assert v["repetitions"] == 2
    for one, both in zip(single.verdict["claims"], v["claims"]):
        assert one["id"] == both["id"]
        if one["status"] in ("holds", "fails"):
            assert both["status"] == one["status"] and both["held"] == ("2 of 2" if one["status"] == "holds" else "0 of 2")
        assert both["by_repetition"]["r1"]["status"] == both["by_repetition"]["r2"]["status"] == one["status"]
    stats = pd.read_csv(run / "repetitions.csv")
    assert (stats["n"] <= 2).all() and ((stats["n"] < 2) | (stats["sd"] == 0) | stats["sd"].isna()).all()
    assert set(stats.loc[stats["n"] == 2, "cv"].dropna()) <= {0.0}
    summary = pd.read_csv(run / "summary.csv")
    assert set(summary["repetition"]) == {1, 2}
    assert (run / "figures" / "repetitions.png").is_file()
    for k in (1, 2):
        assert json.loads((run / "repetitions" / f"r{k}" / "verdict.json").read_text())["claims"] == single.verdict["claims"]
    assert "held in 2 of 2" in (run / "report.md").read_text() or "held in 0 of 2" in (run / "report.md").read_text()


def test_the_statistics_across_repetitions_are_t_intervals():
    long = pd.DataFrame({"trial": ["x"] * 5, "phase": ["p1"] * 5, "subject": ["all"] * 5,
                         "statistic": ["queue_delay_median_ms"] * 5, "value": [10.0, 12.0, 11.0, 13.0, 9.0], "repetition": range(1, 6)})
    r = reps.across(long).iloc[0]
    # mean 11, sd sqrt(2.5) = 1.5811; t(0.975, 4) = 2.7764: half width 1.9632
    assert r["n"] == 5 and r["mean"] == 11 and r["median"] == 11
    assert r["sd"] == pytest.approx(1.58114, abs=1e-5) and r["ci95_low"] == pytest.approx(9.0368, abs=1e-4)
    assert r["ci95_high"] == pytest.approx(12.9632, abs=1e-4) and r["cv"] == pytest.approx(0.143740, abs=1e-6)


def _v(*statuses):
    return {"verdict": "x", "health_failures": [], "claims": [
        {"id": f"c{i}", "text": "t", "status": s, "holds": {"holds": True, "fails": False}.get(s), "evidence": "e",
         **({"reason": "r"} if s == "inconclusive" else {})} for i, s in enumerate(statuses)]}


def test_a_claim_holds_only_when_it_held_in_every_repetition_where_it_applied():
    v = reps.combine_verdicts({1: _v("holds", "holds", "fails", "not applicable"),
                               2: _v("holds", "fails", "fails", "holds"),
                               3: _v("holds", "holds", "fails", "holds")})
    c = {x["id"]: x for x in v["claims"]}
    assert c["c0"]["status"] == "holds" and c["c0"]["held"] == "3 of 3"
    assert c["c1"]["status"] == "inconclusive" and c["c1"]["reason"].startswith("the repetitions disagree: 2 holds, 1 fails of 3")
    assert c["c2"]["status"] == "fails" and c["c2"]["held"] == "0 of 3"
    assert c["c3"]["status"] == "holds" and c["c3"]["held"] == "2 of 2"  # r1: its condition did not hold
    # c2 failed in every repetition: not reproduced, c1 (inconclusive) listed beside it (issue 56)
    assert v["verdict"] == "not reproduced" and v["reproduced"] is False and v["not_judged"] == ["c1"]
    v = reps.combine_verdicts({1: _v("holds", "inconclusive"), 2: _v("holds", "holds")})
    assert v["claims"][1]["reason"] == "not judged in every repetition: 1 inconclusive, 1 holds of 2; r1: r"
    assert v["claims"][1]["numbers_held"] == "1 of 1"  # r1 without numbers_hold: not counted
    r1 = _v("holds", "inconclusive")
    r1["claims"][1]["numbers_hold"] = True
    assert reps.combine_verdicts({1: r1, 2: _v("holds", "holds")})["claims"][1]["numbers_held"] == "2 of 2"
    assert reps.combine_verdicts({1: _v("holds"), 2: _v("holds")})["verdict"] == "reproduced"
    assert reps.combine_verdicts({1: _v("holds", "fails"), 2: _v("holds", "fails")})["verdict"] == "not reproduced"


# --- compare ----------------------------------------------------------------------------------------
def test_compare_places_runs_and_the_published_results_side_by_side(tmp_path):
    from analysis.compare import compare
    single = shutil.copytree(V1_RUN, tmp_path / "runs" / "single")
    repeated = compose(tmp_path / "runs" / "repeated", [V1_RUN, V1_RUN])
    out = compare([single, repeated], tmp_path / "out")
    assert out.parent == tmp_path / "out" and out.name.startswith("compare-")
    claims = pd.read_csv(out / "claims.csv", keep_default_na=False)
    spec = load_spec("pie-vs-red")
    ids = [c["id"] for c in spec.data["claims"]]
    refs = spec.data["reference_results"]
    assert len(claims) == len(ids) * (2 + len(refs))
    assert set(claims[claims["kind"] == "reference"]["row"]) == {r["source"] for r in refs}
    rep = claims[claims["row"].str.contains(r"x2 TS 0.1 \[repeated\]")]
    one = claims[claims["row"].str.contains(r"\[single\]")]
    assert list(rep["status"]) == list(one["status"])  # the same data twice: the same statuses
    assert set(rep["held"]) <= {"2 of 2", "0 of 2"} and set(one["held"]) == {""}
    stats = pd.read_csv(out / "compare.csv")
    # the claims' statistics (the recorded runs' version 1 file, converted: netrepro.experiment.migrate)
    assert set(stats["statistic"]) == {"queue_delay_median_ms", "sent_utilization"} and set(stats["n"]) == {1, 2}
    # recorded before rate scales (no rate_scale in run.json): k = 1, one rate scale, no rate-scale.csv
    assert set(stats["rate_scale"]) == {1} and not (out / "rate-scale.csv").exists()
    report = (out / "report.md").read_text()
    assert "| *Pan et al., HPSR 2013, Fig. 8 (ns-2 simulation)* | holds | holds | holds |" in report
    assert "Every claim has the same status in every run." in report
    # what the sources state, beside the runs' means: the paper's "about 20 ms" of PIE and
    # its finding in words of RED (experiments/pie-vs-red: reference_results[].values)
    paper = "*Pan et al., HPSR 2013, Fig. 8 (ns-2 simulation)*"
    assert f"| {paper} | queue_delay_median_ms | pie-unlimited | p1, p2, p3, p4, p5 | about 20 |" in report
    assert f"| {paper} | queue_delay_median_ms | red-unlimited | p1, p2, p3, p4, p5 | rises with the traffic |" in report
    assert (out / "figures" / "compare.png").stat().st_size > 10_000


def test_compare_marks_the_stated_numbers_over_their_phases():
    """compare.png draws each number a source states over its phase, in the source's line
    style, and neither a finding in words nor a phase off the panel's axis."""
    from analysis.compare import reference_marks
    from analysis.figures import REFERENCE_STYLES
    refs = load_spec("pie-vs-red").data["reference_results"]
    marks = reference_marks(refs, "queue_delay_median_ms", "pie-unlimited", ["p1", "p2", "p3", "p4", "p5"])
    # the paper's and the 2016 write-up's "about 20" ms of PIE, in every phase, each in its style
    assert {(m["x"], m["value"], m["label"]) for m in marks} == {
        (x, 20.0, f"{r['source']}: about 20") for x in range(5) for r in refs[:2]}
    assert {m["style"] for m in marks} == set(REFERENCE_STYLES[:2])
    assert reference_marks(refs, "queue_delay_median_ms", "red-unlimited", ["p1", "p2"]) == []   # findings in words
    assert [m["x"] for m in reference_marks(refs, "queue_delay_median_ms", "pie-unlimited", ["p3", "all"])] == [0, 0]
    assert reference_marks(refs, "sent_utilization", "pie-unlimited", ["p1"]) == []


def test_compare_refuses_runs_of_different_experiments(tmp_path):
    from analysis.compare import compare
    from netrepro.core.errors import RunFolderError
    a = shutil.copytree(V1_RUN, tmp_path / "a")
    b = shutil.copytree(LAB_RUN, tmp_path / "b")
    with pytest.raises(RunFolderError, match=r"b/run.json: experiment: runs of pie-lab, pie-vs-red; expected runs of one experiment"):
        compare([a, b], tmp_path / "out")
    assert not (tmp_path / "out").exists()


def _files(root: Path) -> dict[str, tuple]:
    """Everything under root: (sha256, mtime_ns, inode) of files, link targets, folders."""
    out = {}
    for p in sorted(root.rglob("*")):
        rel = p.relative_to(root).as_posix()
        if p.is_symlink():
            out[rel] = ("link", os.readlink(p))
        elif p.is_file():
            st = p.stat()
            out[rel] = (hashlib.sha256(p.read_bytes()).hexdigest(), st.st_mtime_ns, st.st_ino)
        else:
            out[rel] = ("dir",)
    return out


def test_compare_given_latest_leaves_the_run_byte_identical_and_names_the_real_folder(tmp_path):
    """Runs are written once (issue 20): compare analyses a run into its own folder, never into
    the run, and resolves `latest` to the run it points at."""
    from analysis.compare import compare
    exp = tmp_path / "results" / "pie-vs-red"
    run = shutil.copytree(V1_RUN, exp / "20261101T000000Z-local")
    (exp / "latest").symlink_to(run.name)
    analysis.analyze(run, figures=False)  # analysed before, as `netrepro run` leaves it
    before = _files(exp)
    out = compare([exp / "latest"])
    assert out.parent == exp and out.name.startswith("compare-")
    after = _files(exp)
    assert {k: v for k, v in after.items() if not k.startswith(out.name)} == before  # no byte, mtime or inode
    assert sorted(p.name for p in exp.iterdir()) == sorted([run.name, "latest", out.name])  # no temporary left
    report = (out / "report.md").read_text()
    assert f"[{run.name}]" in report and "latest" not in report
    assert json.loads((out / "runs.json").read_text()) == [str(run.resolve())]
    assert not (out / ".runs").exists()


def test_compare_that_fails_while_analysing_leaves_nothing(tmp_path):
    """A run the analysis refuses (a raw file deleted) is found only while analysing: the
    half-built comparison and the --out folders made for it are removed."""
    from analysis.compare import compare
    from netrepro.core.errors import RunFolderError
    good = shutil.copytree(V1_RUN, tmp_path / "runs" / "good")
    bad = distinct_run(V1_RUN, tmp_path / "runs" / "bad")
    (bad / "raw" / "pie-limited" / "client1" / "ping.txt").unlink()
    before = _files(tmp_path)
    with pytest.raises(RunFolderError, match=r"bad/run.json: raw_sha256: 1 raw file differs"):
        compare([good, bad], tmp_path / "new" / "deep")
    assert _files(tmp_path) == before and not (tmp_path / "new").exists()


# --- the Flent export -------------------------------------------------------------------------------
FLENT = Path(sys.executable).parent / "flent"


@pytest.mark.parametrize("recorded, trial, want", [
    # FTP flows, counted only at their end: the bottleneck's sent rate is the upload series
    (V1_RUN, "red-limited", ["Ping (ms) ICMP ", "Ping (ms) ICMP ping-client3 (extra)", "TCP upload::1 ",
                             "qdisc_stats_router_eth1::backlog_bytes", "qdisc_stats_router_eth1::dropped"]),
    (LAB_RUN, "pie", ["Ping (ms) ICMP ", "TCP upload::1 ", "qdisc_stats_s2_s2-eth2::backlog_pkts"]),
], ids=["schema-1", "schema-2"])
def test_each_trial_opens_in_the_real_flent(tmp_path, recorded, trial, want):
    run = shutil.copytree(recorded, tmp_path / "run")
    res = analysis.analyze(run, figures=False)
    f = res.out_dir / "flent" / f"{trial}.flent.gz"
    assert f in res.outputs
    p = subprocess.run([str(FLENT), "-i", str(f), "-f", "summary"], capture_output=True, text=True, cwd=tmp_path,
                       timeout=120)
    out = p.stdout + p.stderr
    assert p.returncode == 0 and "ERROR" not in out and "Traceback" not in out, out
    for series in want:
        assert series in out, out
    for plot in ("ping", "totals", "backlog"):
        png = tmp_path / f"{plot}.png"
        p = subprocess.run([str(FLENT), "-i", str(f), "-p", plot, "-o", str(png)], capture_output=True, text=True,
                           cwd=tmp_path, timeout=120)
        assert p.returncode == 0 and "ERROR" not in p.stdout + p.stderr, p.stdout + p.stderr
        assert png.stat().st_size > 10_000


def test_spread_figure_names_its_axes_and_the_run(tmp_path, monkeypatch):
    """figures/repetitions.png: the phases on the lowest panel's x axis, each statistic in
    words with its unit on its y axis, and the run under the title."""
    from analysis import repetitions
    rows = [{"trial": t, "phase": ph, "subject": "all", "statistic": "queue_delay_median_ms", "value": v + k,
             "repetition": k} for k in (1, 2, 3) for t, v in (("a", 20.0), ("b", 80.0)) for ph in ("p1", "p2")]
    summary = pd.DataFrame(rows)
    drawn = []
    monkeypatch.setattr(repetitions, "save_figure", lambda f, target: drawn.append(f) or target)
    out = repetitions.draw_spread(repetitions.across(summary), summary, ["queue_delay_median_ms"], tmp_path,
                                  None, "run r on site ns3, time scale 1, rate scale 1")
    assert [p.name for p in out] == ["repetitions.png", "repetitions.pdf"]
    ax = drawn[0].axes[-1]
    assert ax.get_xlabel() == "Phase of the trial (all: the whole trial)"
    assert ax.get_ylabel() == "Median queueing delay (ms)"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["p1", "p2"]
    assert drawn[0].get_suptitle().splitlines()[-1] == "run r on site ns3, time scale 1, rate scale 1"


def test_a_repeated_runs_report_shows_the_figures_then_what_each_found(tmp_path):
    """A repeated run of pie-lab (the recorded run twice), analysed with the experiment file as
    it stands: its report gives the figures after the claims, then each claim's status beside
    the manual's, and the mean over the repetitions of each statistic the claims read, and of
    one the manual states (rtt_mean_ms: its ping summaries), beside the manual's number."""
    run = compose(tmp_path / "rep", [LAB_RUN, LAB_RUN])
    analysis.analyze(run, load_spec("pie-lab"))
    lines = (run / "report.md").read_text().splitlines()
    heads = [ln for ln in lines if ln.startswith("## ")]
    assert heads[:3] == ["## Figures", "## What each found", "## Run-to-run variation of the claims' statistics"]
    source = "Lab 19 manual (Mininet, Linux, 1 Gbit/s and 100 Mbit/s, 20 ms)"
    assert f"| {source} | holds | holds | holds | holds |" in lines
    stats = pd.read_csv(run / "repetitions.csv")
    mean = stats[(stats["trial"] == "droptail") & (stats["subject"] == "h2-h3") & (stats["statistic"] == "rtt_mean_ms")
                 & (stats["phase"] == "all")]["mean"].iloc[0]
    at = lines.index("### Mean RTT (ms): `rtt_mean_ms` of `h2-h3`")
    assert lines[at + 4] == f"| droptail | this run, mean of 2 | {mean:.4g} |"
    assert lines[at + 5] == f"| droptail | {source} | 192.823 |"
    assert lines.index("### Median RTT (ms): `rtt_median_ms` of `h2-h3`") < at  # the claims' statistics first
