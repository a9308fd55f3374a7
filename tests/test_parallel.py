"""A campaign on several reservations at once (``--parallel N``;
netrepro.runner.atonce.run_on_reservations, netrepro.runner.parallel): the trials dealt out in the run's order,
each record naming its reservation; a reservation whose nodes stop answering released and its
trial run on the others; a trial that fails on a healthy reservation stopping the run, resumable;
Ctrl-C stopping every reservation's trial. The trials are the recorded ones of
``conftest.recorded_site`` (real-node campaigns: tests/test_parallel_static.py); also the
names the copies of a topology get on each site."""

from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest

from netrepro.experiment.spec import load_spec
from netrepro.runner import atonce, attempt as run_attempt, run, schedule, steps
from netrepro.runner import trial as trials
from netrepro.runner.console import StepIncomplete
from netrepro.runner.trial import TrialFailed
from netrepro.sites import SiteError, get_site
from netrepro.sites.instageni.site import copy_slice_name
from netrepro.sites.local import netns
from netrepro.sites.local.site import copy_subnet
from netrepro.sites.statefolder import folder_name, make_state_dir, state_dir_owner


@pytest.fixture
def fake_site(recorded_site):
    return recorded_site


@pytest.fixture
def sigint():
    """SIGINT raising KeyboardInterrupt, as netrepro's main sets it (a pytest-xdist worker
    ignores SIGINT), restored after."""
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, before)


def _on(monkeypatch, fail=None, pace_s: float = 0.05):
    """Wrap the recorded site's trial: each takes ``pace_s`` (so both reservations get work) and
    ``fail(tid, copy)`` may raise first. Returns instance id -> the copies it ran on, in order."""
    inner = run_attempt.run_trial
    where: dict[str, list[int]] = {}
    lock = threading.Lock()

    def run_trial(spec, site, inv, tv, *a, **kw):
        with lock:
            where.setdefault(tv["id"], []).append(site.copy)
        time.sleep(pace_s)
        if fail is not None:
            fail(tv["id"], site.copy)
        return inner(spec, site, inv, tv, *a, **kw)
    monkeypatch.setattr(run_attempt, "run_trial", run_trial)
    return where


def _meta(run_dir):
    return json.loads((run_dir / "run.json").read_text())


def test_a_campaign_on_two_reservations_runs_every_instance_once_and_names_its_reservation(fake_site, monkeypatch, capsys):
    spec = load_spec("pie-vs-red")
    where = _on(monkeypatch)
    run_dir = run.run(spec, "local", 0.1, repeat=2, seed=7, progress_tty=False, parallel=2)
    meta = _meta(run_dir)
    want = [i.id for i in schedule.plan(spec.trial_ids, 2, True, 7)]
    assert sorted(fake_site.ran) == sorted(want) and all(len(v) == 1 for v in where.values())
    assert {v[0] for v in where.values()} == {1, 2}                     # both reservations ran trials
    assert all(s["status"] == "complete" for s in meta["trial_status"]) and not (run_dir / "INCOMPLETE").exists()
    for t in meta["trials"]:                                           # each record names its reservation
        assert t["reservation"] == where[t["id"]][0]
    for s in meta["trial_status"]:
        assert [a["reservation"] for a in s["attempts"]] == where[s["id"]]
    assert meta["parallel"] == 2 and [x["reservation"] for x in meta["reservations"]] == [1, 2]
    # the first two instances of the order begin at once, one on each reservation
    assert sorted(where[want[0]] + where[want[1]]) == [1, 2]
    out = capsys.readouterr().out
    assert f"trial 1 of 8: {want[0]} on recorded #" in out and "; 2 running" in out


def test_a_lost_reservation_is_released_and_its_trial_finishes_on_the_other(fake_site, monkeypatch, capsys):
    """Reservation #2's nodes stop answering during its second trial: that attempt fails, #2 is
    released (down, for copy 2 alone), and the trial runs again on #1; nothing is lost."""
    spec = load_spec("pie-vs-red")
    count = {"n": 0}

    def fail(tid, copy):
        if copy == 2:
            count["n"] += 1
            if count["n"] == 2:
                raise TrialFailed("client1 unreachable in task 'stop the flows': Connection refused", stop=True)
    where = _on(monkeypatch, fail)
    monkeypatch.setattr(atonce, "unanswered", lambda inv: ["client1", "router"] if inv.name == "inventory-2.yml" else [])
    released: list = []
    monkeypatch.setattr(atonce, "down", lambda spec, name, opts, reservations: released.append((name, reservations)))
    run_dir = run.run(spec, "local", 0.1, repeat=2, seed=3, progress_tty=False, parallel=2)
    meta = _meta(run_dir)
    assert released == [("local", [2])]
    lost = meta["lost_reservations"]
    assert [(x["reservation"], x["unanswered"], x["released"]) for x in lost] == [(2, ["client1", "router"], True)]
    moved = lost[0]["trial"]
    assert where[moved] == [2, 1]                                      # failed on #2, then complete on #1
    status = next(s for s in meta["trial_status"] if s["id"] == moved)
    assert [(a["reservation"], a["status"]) for a in status["attempts"]] == [(2, "failed"), (1, "complete")]
    assert all(s["status"] == "complete" for s in meta["trial_status"]) and len(meta["trials"]) == 8
    assert all(v[-1] == 1 for k, v in where.items() if k != moved and len(v) == 1 and v[0] != 2)
    assert sum(v.count(2) for v in where.values()) == 2               # nothing ran on #2 after it was lost
    out = capsys.readouterr().out
    assert f"[run] reservation recorded #2 lost: client1, router do not answer (trial {moved}: client1 unreachable" in out
    assert "its trials go to recorded #1" in out


def test_a_trial_failing_on_a_healthy_reservation_stops_the_campaign_resumably(fake_site, monkeypatch):
    """Every node still answers: the trial failed, not the reservation. The trial running on the
    other reservation ends and is kept; nothing more is begun; the resume completes the run."""
    spec = load_spec("pie-vs-red")
    want = [i.id for i in schedule.plan(spec.trial_ids, 2, True, 5)]
    bad = want[2]

    def fail(tid, copy):
        if tid == bad and broken["on"]:
            raise TrialFailed("the ping data of client1 ends 12 s before the schedule does")
    broken = {"on": True}
    _on(monkeypatch, fail)
    monkeypatch.setattr(atonce, "unanswered", lambda inv: [])
    monkeypatch.setattr(atonce, "down", lambda *a, **k: pytest.fail("a healthy reservation was released"))
    with pytest.raises(StepIncomplete) as exc:
        run.run(spec, "local", 0.1, repeat=2, seed=5, progress_tty=False, parallel=2)
    run_dir = exc.value.run_dir
    meta = _meta(run_dir)
    done = [s["id"] for s in meta["trial_status"] if s["status"] == "complete"]
    assert bad not in done and set(done) <= set(want[:4]) and len(done) >= 2
    assert f"run INCOMPLETE at trial {bad}" in (run_dir / "INCOMPLETE").read_text()
    broken["on"] = False
    assert run.run(spec, "local", None, resume=run_dir, progress_tty=False, parallel=2) == run_dir
    meta = _meta(run_dir)
    assert all(s["status"] == "complete" for s in meta["trial_status"]) and not (run_dir / "INCOMPLETE").exists()
    assert len(meta["resumes"]) == 1 and meta["resumes"][0]["parallel"] == 2


def test_ctrl_c_stops_the_trial_of_every_reservation_and_the_campaign_resumes(fake_site, monkeypatch, sigint):
    """SIGINT reaches the main thread while both reservations run a trial: the one waiting for
    its schedule's end stops at once (trial.STOPPING), each is recorded as interrupted and
    stopped on its nodes, and the run resumes to completion."""
    spec = load_spec("pie-vs-red")
    want = [i.id for i in schedule.plan(spec.trial_ids, 1, False, None)]
    stopped: list = []
    monkeypatch.setattr(run_attempt, "stop_trial", lambda spec, inv, site, tv: stopped.append((tv["id"], site.copy)))
    armed = {"on": True}
    third_begun = threading.Event()

    def fail(tid, copy):
        if armed["on"] and tid == want[2]:
            assert third_begun.wait(10)   # both reservations run a trial when the signal comes
            os.kill(os.getpid(), signal.SIGINT)
        if armed["on"] and tid == want[3]:
            third_begun.set()
        if armed["on"] and tid in want[2:]:
            assert trials.STOPPING.wait(10)
            raise TrialFailed("stopped: the run is being interrupted", stop=True)
    _on(monkeypatch, fail)
    with pytest.raises(StepIncomplete) as exc:
        run.run(spec, "local", 0.1, shuffle=False, progress_tty=False, parallel=2)
    assert exc.value.exit_code == 130 and not trials.STOPPING.is_set()
    run_dir = exc.value.run_dir
    meta = _meta(run_dir)
    status = {s["id"]: s for s in meta["trial_status"]}
    assert [status[t]["status"] for t in want[:2]] == ["complete", "complete"]
    assert [status[t]["reason"] for t in want[2:]] == ["interrupted by SIGINT"] * 2
    assert sorted(t for t, _ in stopped) == sorted(want[2:])
    armed["on"] = False
    assert run.run(spec, "local", None, resume=run_dir, progress_tty=False, parallel=2) == run_dir
    assert all(s["status"] == "complete" for s in _meta(run_dir)["trial_status"])


# --- the copies' names -----------------------------------------------------------------------------
def test_copies_of_a_topology_have_names_of_their_own(tmp_path):
    spec = load_spec("pie-vs-red")
    one, two = (netns.Layout("172.30.0.0/24", "/c", "/r", "/k", copy=k) for k in (1, 2))
    assert one.mgmt_bridge == "nr-mgmt" and one.ns("router") == "router"         # copy 1: as ever
    assert two.mgmt_bridge == "nr2-mgmt" and two.ns("router") == "router.2"
    names = {}
    for lay in (one, two):
        ns = {c[3] for c in netns.build_commands(spec, lay) if c[:3] == ["ip", "netns", "add"]}
        links = set(netns.existing_conflicts(spec, lay, set(), {"x"}))
        names[lay.copy] = ns
        assert netns.existing_conflicts(spec, lay, ns, set()) == sorted(ns) and not links
    assert not names[1] & names[2]
    built1 = {a for c in netns.build_commands(spec, one) for a in c[3:4] if c[:3] == ["ip", "link", "add"]}
    assert netns.existing_conflicts(spec, two, names[1], built1) == []    # copy 2 clashes with nothing of copy 1
    assert all(len(x) <= netns.IFNAMSIZ for c in netns.build_commands(spec, two) if c[:3] == ["ip", "link", "add"]
               for x in c[3:4])
    assert copy_subnet("172.30.0.0/24", 1) == "172.30.0.0/24" and copy_subnet("172.30.0.0/24", 3) == "172.30.2.0/24"
    assert copy_slice_name("nr-pievsred-alice", 2) == "nr-pievsred-alice-2"
    assert len(copy_slice_name("nr-pievsred-alice1", 12)) <= 19 and copy_slice_name("nr-a", 1) == "nr-a"
    assert folder_name("pie-vs-red", "static", 2) == "pie-vs-red-static.2"
    d = make_state_dir(tmp_path / folder_name("pie-vs-red", "static", 2), "pie-vs-red", "static", 2)
    assert state_dir_owner(d) == ("pie-vs-red", "static", 2)
    (tmp_path / "pie-vs-red-static.3").mkdir()
    (tmp_path / "pie-vs-red-static.3" / ".netrepro-state").write_text((d / ".netrepro-state").read_text())
    assert state_dir_owner(tmp_path / "pie-vs-red-static.3") is None     # a marker moved elsewhere proves nothing


def test_a_site_of_one_reservation_refuses_a_second_copy_and_static_needs_a_file_each(tmp_path):
    spec = load_spec("pie-vs-red")
    with pytest.raises(SiteError, match=r"site ns3: --parallel: .*expected --parallel 1; a simulating site runs "
                                        r"trials at once with --jobs N"):
        get_site("ns3", spec, tmp_path / "n", {}, 2)
    static = get_site("static", spec, tmp_path / "s", {"static_file": "a.yml"}, 2)
    with pytest.raises(SiteError, match=r"STATIC_FILE=a.yml: names 1 nodes file\(s\), and reservation #2 .*one file per "
                                        r"reservation, separated by commas"):
        static.preflight()
    assert get_site("static", spec, tmp_path / "s", {"static_file": "a.yml,b.yml"}, 2)._file().name == "b.yml"


def test_down_releases_every_copy_it_finds(tmp_path, monkeypatch):
    monkeypatch.setattr(steps, "STATE_ROOT", tmp_path / "state")
    monkeypatch.setattr(steps, "INVENTORY_DIR", tmp_path / "inventory")
    spec = load_spec("pie-vs-red")
    for k in (1, 2, 3):
        site = steps.open_site(spec, "static", {"static_file": "a,b,c"}, k)
        site.save_state({"logins": {"client1": {"name": "client1", "host": "192.0.2.1"}}})
    assert steps.reservations_on_disk(spec, "static") == [2, 3]
    steps.down(spec, "static", {"static_file": "a,b,c"})
    for k in (1, 2, 3):
        assert not steps.open_site(spec, "static", {"static_file": "a,b,c"}, k).load_state()


def test_a_trial_that_ends_as_the_signal_comes_is_kept(fake_site, monkeypatch, sigint):
    """Of the two trials running when SIGINT comes, the one that ends normally is recorded as
    complete (its data are in raw/ already: discarding it would break the resume)."""
    spec = load_spec("pie-vs-red")
    want = [i.id for i in schedule.plan(spec.trial_ids, 1, False, None)]
    third_begun = threading.Event()
    armed = {"on": True}

    def fail(tid, copy):
        if armed["on"] and tid == want[2]:
            assert third_begun.wait(10)
            os.kill(os.getpid(), signal.SIGINT)
            assert trials.STOPPING.wait(10)
            raise TrialFailed("stopped: the run is being interrupted", stop=True)
        if armed["on"] and tid == want[3]:
            third_begun.set()
            assert trials.STOPPING.wait(10)   # it ends as the run stops, its data complete
    _on(monkeypatch, fail)
    with pytest.raises(StepIncomplete) as exc:
        run.run(spec, "local", 0.1, shuffle=False, progress_tty=False, parallel=2)
    run_dir = exc.value.run_dir
    status = {s["id"]: s for s in _meta(run_dir)["trial_status"]}
    assert status[want[3]]["status"] == "complete" and (run_dir / "raw" / want[3]).is_dir()
    assert status[want[2]]["reason"] == "interrupted by SIGINT"
    assert f"run INCOMPLETE at trial {want[2]}" in (run_dir / "INCOMPLETE").read_text()
    armed["on"] = False
    assert run.run(spec, "local", None, resume=run_dir, progress_tty=False, parallel=2) == run_dir
    assert all(s["status"] == "complete" for s in _meta(run_dir)["trial_status"])
