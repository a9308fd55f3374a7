"""Sweeps (netrepro/experiment/sweep.py, `--sweep`): the points of the factors' cross product, the refusals,
the run's bookkeeping, real ns-3 simulations of pie-vs-red's sweep analysed point by point
(analysis/sweep.py), and the dry run."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from netrepro.runner import schedule
from netrepro.experiment import sweep
from netrepro.runner import run, trialvars
from netrepro.experiment.spec import Spec, SpecError, load_spec

REPO = Path(__file__).resolve().parent.parent
V1_RUN = REPO / "tests" / "data" / "pie-vs-red-local-0.1"
PIES = ("pie-unlimited", "pie-limited")
#: PIE's target delay in pie-vs-red's pie-limited trial (its stack on router:eth1: HTB, then PIE)
PIE_TARGET = "trials.pie-limited.qdiscs.router:eth1.1.target_ms"


def _data(**sweep_block):
    data = copy.deepcopy(load_spec("pie-vs-red").data)
    if sweep_block:
        data["sweep"] = sweep_block
    return data


def _nr(*args, env=None):
    return subprocess.run([sys.executable, "-m", "netrepro", *args], cwd=REPO, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO), **(env or {})}, timeout=300)


# --- the points ---------------------------------------------------------------------------------------
def test_pie_vs_red_sweeps_rate_and_pies_target_with_red_run_once_per_rate():
    spec = load_spec("pie-vs-red")
    pts = sweep.points(spec)
    assert [(p.id, p.values) for p in pts] == [
        ("p1", {"rate_mbit": 5, "pie_target_ms": 5}), ("p2", {"rate_mbit": 5, "pie_target_ms": 20}),
        ("p3", {"rate_mbit": 10, "pie_target_ms": 5}), ("p4", {"rate_mbit": 10, "pie_target_ms": 20}),
        ("p5", {"rate_mbit": 20, "pie_target_ms": 5}), ("p6", {"rate_mbit": 20, "pie_target_ms": 20})]
    assert [p.trials for p in pts] == [tuple(spec.trial_ids), PIES] * 3
    assert len(sweep.cells(pts, spec.trial_ids)) == 18
    fs = sweep.factors(spec)
    # RED does not vary with PIE's target: p2's analysis reads RED's instances of p1
    assert sweep.source_point(pts, fs, pts[1], "red-limited").id == "p1"
    assert sweep.source_point(pts, fs, pts[1], "pie-limited").id == "p2"
    assert sweep.trial_factors(fs, pts[1], "red-limited") == {"rate_mbit": 5}


def _stack(data: dict, trial: str) -> list[dict]:
    """The qdisc stack on pie-vs-red's bottleneck port (router:eth1) in one trial of ``data``."""
    return next(t for t in data["trials"] if t["id"] == trial)["qdiscs"]["router:eth1"]


def _commands(spec: Spec, trial: str, tmp_path: Path) -> str:
    """Every tc command the trial playbook runs for one trial of ``spec``, joined."""
    tv = trialvars.trial_vars(spec, next(t for t in spec.model.trials if t.id == trial), 1.0, tmp_path, 2.0)
    return " ".join(" ".join(c) for s in tv["stacks"].values() for layer in s for c in layer["commands"])


def test_a_point_is_the_file_with_every_path_of_each_factor_set(tmp_path):
    spec = load_spec("pie-vs-red")
    p = sweep.point_spec(spec, {"rate_mbit": 20, "pie_target_ms": 5})
    assert _stack(p.data, "pie-limited")[0]["rate_mbit"] == 20 and _stack(p.data, "red-unlimited")[1]["bandwidth_mbit"] == 20
    assert _stack(p.data, "pie-unlimited")[1]["target_ms"] == 5 and "sweep" not in p.data
    assert _stack(spec.data, "pie-limited")[0]["rate_mbit"] == 10  # the file's own data untouched
    # what the trial playbooks apply: the bottleneck's HTB rate and PIE's target
    pie = _commands(p, "pie-unlimited", tmp_path)
    assert " rate 20mbit" in pie and " target 5ms " in pie and " rate 10mbit" not in pie
    assert " rate 20mbit" in _commands(p, "red-limited", tmp_path)


def test_paths_index_lists_by_position_or_by_an_items_id():
    data = {"flows": [{"flows": 1}, {"flows": 2}], "trials": [{"id": "a", "x": 1}, {"id": "b", "x": 2}]}
    sweep.set_path(data, "flows.1.flows", 7)
    sweep.set_path(data, "trials.b.x", 9)
    assert data == {"flows": [{"flows": 1}, {"flows": 7}], "trials": [{"id": "a", "x": 1}, {"id": "b", "x": 9}]}
    with pytest.raises(KeyError, match=r"trials: no item 'c' \(expected an index below 2 or an item's id\)"):
        sweep.set_path(data, "trials.c.x", 1)


@pytest.mark.parametrize("block, field, problem", [
    ({"factors": [{"name": "delay", "path": "topology.nodes.client1.interfaces.eth1.address", "values": ["10.10.1.9/24"]}]},
     "sweep.factors[0].paths", "'topology.nodes.client1.interfaces.eth1.address' is set when the nodes are provisioned, "
                               "not before each trial; expected paths that change only the trials (their qdiscs, "
                               "sysctls and traffic) or the phases"),
    ({"factors": [{"name": "rate", "path": "trials.pie-limited.qdiscs.router:eth1.0.rate_mbits", "values": [5]}]},
     "sweep.factors[0].paths", "trials.pie-limited.qdiscs.router:eth1.0: no key 'rate_mbits' (expected one of: "
                               "kind, rate_mbit)"),
    ({"factors": [{"name": "t", "path": PIE_TARGET, "values": [5], "trials": ["pie-fast"]}]},
     "sweep.factors[0].trials", "'pie-fast' is not a trial; expected one of: pie-unlimited, red-unlimited, "
                                "pie-limited, red-limited"),
    ({"factors": [{"name": "t", "path": PIE_TARGET, "values": [5]},
                  {"name": "t", "path": "trials.pie-limited.qdiscs.router:eth1.0.rate_mbit", "values": [5]}]},
     "sweep.factors[1].name", "'t' is used twice; expected unique names"),
])
def test_a_factor_the_trials_cannot_vary_is_refused_in_one_line(block, field, problem):
    with pytest.raises(SpecError) as exc:  # validating the file resolves its sweep as run --sweep does
        Spec.from_data(_data(**block), "x.yml")
    assert str(exc.value) == f"x.yml: {field}: {problem}"


def test_a_point_that_is_not_a_valid_experiment_is_refused_before_anything_runs():
    with pytest.raises(SpecError) as exc:
        Spec.from_data(_data(factors=[{"name": "target", "path": PIE_TARGET, "values": [20, -5]}]), "x.yml")
    msg = str(exc.value)
    assert msg.startswith("x.yml: sweep: the point target=-5 is not a valid experiment: x.yml: "
                          "trials[2].qdiscs.router:eth1[1].target_ms: expected a number > 0")
    assert "\n" not in msg


def test_the_schema_refuses_a_malformed_sweep():
    with pytest.raises(SpecError, match=r"sweep.factors\[0\]"):
        Spec.from_data(_data(factors=[{"name": "r", "values": [5]}]), "x.yml")  # neither path nor paths
    with pytest.raises(SpecError, match=r"sweep.factors\[0\].values"):
        Spec.from_data(_data(factors=[{"name": "r", "path": "bottleneck.rate_mbit", "values": []}]), "x.yml")


def test_sweep_without_factors_gets_one_line_and_exit_2(tmp_path):
    p = _nr("run", "codel-lab", "--sweep", "--dry-run",
            env={"NETREPRO_RESULTS": str(tmp_path / "r"), "NETREPRO_STATE": str(tmp_path / "s")})
    assert p.returncode == 2 and p.stdout == ""
    assert p.stderr.strip().endswith("sweep: --sweep needs factors to vary: add sweep.factors (name, paths, values) "
                                     "to the experiment file")
    assert len(p.stderr.strip().splitlines()) == 1 and not (tmp_path / "r").exists()


# --- schedule and dry run -----------------------------------------------------------------------------
def test_sweep_instances_are_blocks_of_every_cell_shuffled_by_the_seed():
    cells = [("a", "p1"), ("a", "p2"), ("b", "p1")]
    one = schedule.plan(cells, 1, True, 3)
    assert sorted(i.id for i in one) == ["a.p1", "a.p2", "b.p1"] and one == schedule.plan(cells, 1, True, 3)
    assert [i.point for i in one] == [i.id.split(".")[1] for i in one]
    two = schedule.plan(cells, 2, False)
    assert [i.id for i in two] == ["a.p1.r1", "a.p2.r1", "b.p1.r1", "a.p1.r2", "a.p2.r2", "b.p1.r2"]
    assert two[3].as_dict() == {"id": "a.p1.r2", "trial": "a", "repetition": 2, "point": "p1"}


def test_the_dry_run_of_a_sweep_lists_each_instance_with_its_factor_values(tmp_path):
    results, state = tmp_path / "results", tmp_path / "state"
    p = _nr("run", "pie-vs-red", "--sweep", "--seed", "4", "--dry-run", "--time-scale", "0.1",
            env={"NETREPRO_RESULTS": str(results), "NETREPRO_STATE": str(state)})
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert lines.pop().startswith("[dry-run] TIME_SCALE=0.1 is shorter than ")  # pie-vs-red's time_scale.min
    assert lines[0] == ("[dry-run] pie-vs-red on local, TIME_SCALE=0.1, REPEAT=1, sweep of 6 points, shuffled with "
                        "seed 4 (--seed 4 runs this order)")
    spec = load_spec("pie-vs-red")
    want = schedule.plan(sweep.cells(sweep.points(spec), spec.trial_ids), 1, True, 4)
    assert [r.split()[1] for r in lines[1:-1]] == [i.id for i in want]
    row = next(r for r in lines if " red-limited.p5 " in r)
    assert "aqm red, variant limited; rate_mbit=20;" in row and "pie_target" not in row
    row = next(r for r in lines if " pie-limited.p2 " in r)
    assert "aqm pie, variant limited; rate_mbit=5; pie_target_ms=20;" in row
    assert lines[-1].startswith("[dry-run] 18 trial instances")
    assert not results.exists() and not state.exists()


def test_make_passes_sweep():
    p = subprocess.run(["make", "-n", "reproduce-pie-vs-red", "SWEEP=1"], cwd=REPO, capture_output=True, text=True)
    assert "--sweep" in p.stdout, p.stdout


# --- the run's bookkeeping ----------------------------------------------------------------------------
@pytest.fixture
def fake_site(recorded_site):
    """netrepro.runner.run.run with each trial replaced by the recorded one (tests/conftest.py)."""
    return recorded_site


def _given(fake_site, instance: str) -> tuple:
    """(bottleneck rate of the instance's trial, PIE's target in pie-limited, point, factors) of
    the experiment and trial vars an instance ran with."""
    spec, tv = fake_site.given[instance]
    return (_stack(spec.data, tv["trial"])[0]["rate_mbit"], _stack(spec.data, "pie-limited")[1]["target_ms"],
            tv.get("point"), tv.get("factors"))


def test_each_instance_runs_its_points_experiment_and_records_its_factor_values(fake_site):
    spec = load_spec("pie-vs-red")
    run_dir = run.run(spec, "local", 0.1, seed=11, progress_tty=False, sweep=True)
    meta = json.loads((run_dir / "run.json").read_text())
    assert len(meta["trials"]) == 18 and meta["repetitions"]["shuffle"] and meta["repetitions"]["seed"] == 11
    assert [p["id"] for p in meta["sweep"]["points"]] == [f"p{i}" for i in range(1, 7)]
    assert _given(fake_site, "pie-limited.p5") == (20, 5, "p5", {"rate_mbit": 20, "pie_target_ms": 5})
    assert _given(fake_site, "red-unlimited.p3") == (10, 5, "p3", {"rate_mbit": 10})
    rec = next(t for t in meta["trials"] if t["id"] == "pie-unlimited.p2")
    assert (rec["trial"], rec["point"], rec["factors"]) == ("pie-unlimited", "p2", {"rate_mbit": 5, "pie_target_ms": 20})
    assert [s["point"] for s in meta["trial_status"]] == [s["id"].split(".")[1] for s in meta["trial_status"]]


def test_a_point_is_judged_by_what_its_model_changes():
    """What a point changes is read from its model, not from the path's first key: a path
    under ``collectors`` is refused (the queue sampler is read for the whole run), a factor
    whose values leave the model as it is passes, and two paths that are each invalid alone
    but together swap two clients' addresses are refused for the point, naming what changes."""
    with pytest.raises(SpecError, match=r"x.yml: sweep.factors\[0\].paths: 'collectors.0.interval_s' is set when the "
                                        r"nodes are provisioned, not before each trial"):
        Spec.from_data(_data(factors=[{"name": "iv", "path": "collectors.0.interval_s", "values": [0.1, 0.2]}]), "x.yml")
    same = Spec.from_data(_data(factors=[{"name": "mtu", "path": "links.mtu_bytes", "values": [1500]}]), "x.yml")
    assert [p.values for p in sweep.points(same)] == [{"mtu": 1500}]
    with pytest.raises(SpecError) as exc:  # each alone gives an address twice
        Spec.from_data(_data(factors=[
            {"name": "c2", "path": "topology.nodes.client2.interfaces.eth1.address", "values": ["10.10.1.3/24"]},
            {"name": "c3", "path": "topology.nodes.client3.interfaces.eth1.address", "values": ["10.10.1.2/24"]}]), "x.yml")
    assert str(exc.value) == ("x.yml: sweep: the point c2=10.10.1.3/24, c3=10.10.1.2/24 changes the experiment's nodes, "
                              "set when the nodes are provisioned, not before each trial; expected paths that change "
                              "only the trials (their qdiscs, sysctls and traffic) or the phases")


# --- real simulations, analysed point by point ----------------------------------------------------------
@pytest.fixture(scope="module")
def simulated_sweep(tmp_path_factory):
    """pie-vs-red's sweep on the ns3 site at TIME_SCALE 0.1 (18 simulations), analysed. Its PIE
    trials at 5 Mbit/s made ns-3 3.44 crash in a zero-window probe before netrepro-sim moved the
    probe beyond the trial (netrepro/sites/ns3/netrepro-sim.cc)."""
    from netrepro.sites.ns3 import site as ns3
    ns3.build()
    tmp = tmp_path_factory.mktemp("sweep")
    env = {"NETREPRO_RESULTS": str(tmp / "results"), "NETREPRO_STATE": str(tmp / "state")}
    p = _nr("reproduce", "pie-vs-red", "--site", "ns3", "--sweep", "--seed", "1", "--time-scale", "0.1", env=env)
    assert p.returncode == 0, (p.stdout + p.stderr)[-3000:]
    run_dir = tmp / "results" / "pie-vs-red" / "latest"
    return SimpleNamespace(dir=run_dir.resolve(), out=p.stdout, meta=json.loads((run_dir / "run.json").read_text()))


def test_each_simulation_ran_at_its_points_rate(simulated_sweep):
    for t in simulated_sweep.meta["trials"]:
        scen = (simulated_sweep.dir / "raw" / t["id"] / "scenario.txt").read_text().splitlines()
        rate = t["factors"]["rate_mbit"] * 1_000_000
        assert f"link router lan-clients_lan {rate} 0 1" in scen, t["id"]
        q = next(ln for ln in scen if ln.startswith("qdisc "))
        if t["trial"] in PIES:
            assert f"QueueDelayReference={t['factors']['pie_target_ms']}ms" in q.split()


def test_the_sweep_is_analysed_point_by_point_and_judged_at_the_files_settings(simulated_sweep):
    d = simulated_sweep.dir
    verdict = json.loads((d / "verdict.json").read_text())
    assert verdict["sweep"]["base_point"] == "p4" and set(verdict["sweep"]["by_point"]) == {f"p{i}" for i in range(1, 7)}
    p4 = json.loads((d / "sweep" / "p4" / "verdict.json").read_text())
    assert verdict["verdict"] == p4["verdict"]
    assert [c["status"] for c in verdict["claims"]] == [c["status"] for c in p4["claims"]]
    for pid in verdict["sweep"]["by_point"]:
        assert (d / "sweep" / pid / "report.md").is_file()
    summary = pd.read_csv(d / "summary.csv")
    assert list(summary.columns[:3]) == ["point", "rate_mbit", "pie_target_ms"]
    assert summary[summary["trial"].str.startswith("red")]["pie_target_ms"].isna().all()
    # p2's RED rows are RED's instances of p1 (it does not vary with PIE's target)
    def red(pid):
        return summary[(summary["point"] == pid) & (summary["trial"] == "red-unlimited")]["value"].reset_index(drop=True)
    assert len(red("p1")) > 10 and red("p1").equals(red("p2")) and not red("p1").equals(red("p5"))
    table = pd.read_csv(d / "sweep.csv")
    assert {"point", "rate_mbit", "pie_target_ms", "n", "mean", "ci95_low"} <= set(table.columns)
    assert (d / "figures" / "sweep.png").stat().st_size > 10_000
    report = (d / "report.md").read_text()
    assert "A sweep of 6 points" in report and "| [p4](sweep/p4/report.md) (base) | 10 | 20 |" in report


def test_a_faster_bottleneck_drains_redss_queue_faster(simulated_sweep):
    """Unlimited sources keep RED's average queue near its thresholds in bytes, so its delay
    in time falls as the rate rises: a check that the rate reached the simulation."""
    table = pd.read_csv(simulated_sweep.dir / "sweep.csv")
    sel = table[(table["trial"] == "red-unlimited") & (table["phase"] == "p3") & (table["subject"] == "all")
                & (table["statistic"] == "queue_delay_median_ms")].groupby("rate_mbit")["mean"].first()
    assert sel[5] > sel[10] > sel[20], sel


def test_compare_refuses_a_sweep_in_one_line(simulated_sweep):
    p = _nr("compare", str(simulated_sweep.dir))
    assert p.returncode == 2
    assert p.stderr.strip() == (f"netrepro: {simulated_sweep.dir / 'run.json'}: sweep: a sweep's points have different "
                                "settings; expected runs at one setting (the sweep's own report.md compares its points)")


def test_a_repeated_sweep_is_analysed_across_each_points_repetitions(fake_site):
    import analysis
    spec = load_spec("pie-vs-red")
    run_dir = run.run(spec, "local", 0.1, repeat=2, seed=3, progress_tty=False, sweep=True)
    meta = json.loads((run_dir / "run.json").read_text())
    assert len(meta["trials"]) == 36 and {t["id"].rsplit(".", 1)[1] for t in meta["trials"]} == {"r1", "r2"}
    res = analysis.analyze(run_dir, figures=False)
    # every instance is a copy of the same recorded trial: each point's repetitions agree
    for pid in (f"p{i}" for i in range(1, 7)):
        v = json.loads((run_dir / "sweep" / pid / "verdict.json").read_text())
        assert v["repetitions"] == 2 and all(c["held"].endswith("of 2") for c in v["claims"] if c["status"] != "not applicable")
        assert (run_dir / "sweep" / pid / "repetitions" / "r2" / "summary.csv").is_file()
    assert {"point", "rate_mbit", "pie_target_ms", "repetition"} <= set(res.summary.columns)
    table = pd.read_csv(run_dir / "sweep.csv")
    assert set(table["n"]) <= {0, 2} and (table["n"] == 2).mean() > 0.9 and (table["sd"].fillna(0) == 0).all()
    assert res.verdict["sweep"]["base_point"] == "p4"


def test_a_version_2_file_sweeps_a_trials_qdisc_and_every_trials_traffic(tmp_path):
    """codel-lab: CoDel's target (the codel trial only, by its id) and the iperf3 flows'
    duration (every trial's traffic); each point's trial plan carries the values."""
    data = copy.deepcopy(load_spec("codel-lab").data)
    data["sweep"] = {"factors": [
        {"name": "codel_target_ms", "path": "trials.codel.qdiscs.s2:s2-eth2.1.target_ms", "values": [5, 10],
         "trials": ["codel"]},
        {"name": "duration_s", "paths": ["traffic.0.duration_s", "traffic.1.duration_s"], "values": [30, 60]}]}
    spec = Spec.from_data(data, "codel.yml")
    pts = sweep.points(spec)
    assert [p.values for p in pts] == [{"codel_target_ms": t, "duration_s": d} for t in (5, 10) for d in (30, 60)]
    # the trials other than codel run once per duration
    assert [sorted(p.trials) for p in pts] == [sorted(spec.trial_ids), sorted(spec.trial_ids), ["codel"], ["codel"]]
    p = sweep.point_spec(spec, pts[3].values)
    codel = next(t for t in p.model.trials if t.id == "codel")
    tv = trialvars.trial_vars(p, codel, 1.0, tmp_path, 2.0)
    commands = " ".join(" ".join(c) for s in tv["stacks"].values() for layer in s for c in layer["commands"])
    assert " codel " in commands and " target 10ms " in commands and " target 5ms " not in commands
    assert tv["duration_s"] == 60
    with pytest.raises(SpecError, match=r"codel.yml: sweep.factors\[0\].paths: 'collectors.0.interval_s' is set when "
                                         r"the nodes are provisioned, not before each trial; expected paths that change "
                                         r"only the trials \(their qdiscs, sysctls and traffic\) or the phases"):
        bad = copy.deepcopy(data)
        bad["sweep"]["factors"][0] = {"name": "interval", "path": "collectors.0.interval_s", "values": [0.1, 0.2]}
        sweep.points(Spec.from_data(bad, "codel.yml"))
