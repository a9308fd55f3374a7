"""The progress of a run with several trial instances at once (netrepro.runner.progress, ``--jobs``):
the ETA laid out on N slots, each running trial's lines, and the terminal display's bars.
The lines of a run one at a time are tested in tests/test_repetitions.py."""

from __future__ import annotations

import io
import re

import pytest

from netrepro.runner import progress


@pytest.mark.parametrize("per, remaining, running, jobs, want", [
    (100, 3, [], 1, 300),             # one at a time: the remaining instances one after another
    (100, 3, [40], 1, 260),           # ... less the running one's elapsed time
    (100, 2, [150], 1, 100),          # a running one past the estimate has nothing left, not less
    (100, 4, [], 2, 200),             # N at once: remaining x per / N when they divide evenly
    (100, 2, [], 4, 100),             # never less than one instance: / min(N, remaining)
    (100, 5, [], 2, 300),             # 5 on 2 slots take 3 rounds, not 2.5
    (100, 5, [30, 80], 2, 220),       # slots free at 70 and 20 s: 20+100, 70+100, 120+100
    (100, 3, [float("inf"), 0], 2, 100),  # one waiting to be recorded has nothing left: the third takes its slot
    (100, 0, [], 2, 0),
    (None, 3, [], 2, None),           # no estimate yet
])
def test_the_eta_lays_the_remaining_instances_on_n_slots(per, remaining, running, jobs, want):
    got = progress.eta_s(per, remaining, running, jobs)
    assert got is None if want is None else got == pytest.approx(want)


def test_the_eta_is_at_least_the_remaining_time_shared_by_n():
    """The brief's bound: remaining estimated seconds / min(N, remaining instances)."""
    for remaining in range(1, 9):
        for jobs in range(1, 5):
            for running in ([], [10.0], [10.0, 60.0][:jobs]):
                running = running[:remaining]
                left = remaining * 100 - sum(min(e, 100) for e in running)
                assert progress.eta_s(100, remaining, running, jobs) >= left / min(jobs, remaining) - 1e-9


def _stamped(lines: list[str]) -> list[str]:
    """The lines without their ``[HH:MM:SSZ] `` time stamp (each must have one)."""
    assert all(re.match(r"\[\d\d:\d\d:\d\dZ\] ", ln) for ln in lines), lines
    return [ln[12:] for ln in lines]


def test_two_trials_at_once_each_get_a_start_and_an_end_line_and_the_eta_counts_both():
    out = io.StringIO()
    p = progress.RunProgress(4, estimate_s=100.0, tty=False, out=out, jobs=2)
    phases = [{"name": "p1", "start_s": 0, "end_s": 1, "flows": 10}]
    p.trial("a.r1", "aqm x", phases, lambda: None)
    p.trial("b.r1", "aqm y", phases, lambda: None)
    # both running, barely begun: 4 of 100 s on 2 slots
    assert p.eta_s() == pytest.approx(200, abs=1)
    p.waiting("b.r1")  # simulated first: it waits for a.r1 to be recorded, with nothing left
    assert p.eta_s() == pytest.approx(200, abs=1)  # a.r1 then one more on one slot, one on the other
    p.trial("c.r1", "aqm x", phases, lambda: None)
    p.end("a.r1", True, wall_s=50.0)  # its own wall time, not the time since it began
    p.end("b.r1", True, wall_s=30.0)
    assert p.walls == [50.0, 30.0] and p.done == 2
    assert p.eta_s() == pytest.approx(40, abs=1)  # c.r1 and d.r1 at the mean, 40 s, on two slots
    p.end("c.r1", False, "site ns3: netrepro-sim failed")
    lines = _stamped(out.getvalue().splitlines())
    assert lines == [
        "trial 1 of 4: a.r1 (aqm x); elapsed 0:00:00, ETA 0:03:20; 1 running",
        "trial 2 of 4: b.r1 (aqm y); elapsed 0:00:00, ETA 0:03:20; 2 running",
        "trial 3 of 4: c.r1 (aqm x); elapsed 0:00:00, ETA 0:03:20; 2 running",  # b.r1 only waits
        # b.r1 has nothing left, c.r1 and d.r1 take the finished one's 50 s each, on two slots
        "trial a.r1 complete in 0:00:50; 1 of 4 done, elapsed 0:00:00, ETA 0:00:50",
        "trial b.r1 complete in 0:00:30; 2 of 4 done, elapsed 0:00:00, ETA 0:00:40",
        "trial c.r1 FAILED in 0:00:00: site ns3: netrepro-sim failed; 2 of 4 done, elapsed 0:00:00, ETA 0:00:40",
    ]


def test_one_at_a_time_the_lines_are_as_before():
    """jobs 1 (every site that does not simulate): no count of running trials, the ETA of the
    remaining instances one after another."""
    out = io.StringIO()
    p = progress.RunProgress(3, done=1, estimate_s=60.0, tty=False, out=out)
    p.trial("a.r2", "aqm x", [{"name": "p1", "start_s": 0, "end_s": 1}], lambda: None)
    p.end("a.r2", True)
    first, last = _stamped(out.getvalue().splitlines())
    assert first == "trial 2 of 3: a.r2 (aqm x); elapsed 0:00:00, ETA 0:02:00"
    assert last.startswith("trial a.r2 complete in 0:00:00; 2 of 3 done") and "running" not in last


def test_the_terminal_display_has_a_bar_per_running_trial_and_stops_with_the_last():
    p = progress.RunProgress(3, estimate_s=10.0, tty=True, out=io.StringIO(), jobs=2)
    phases = [{"name": "p1", "start_s": 0, "end_s": 1, "flows": 1}]
    p.trial("a", "x", phases, lambda: None)
    p.trial("b", "x", phases, lambda: None)
    live = p._live
    assert live is not None and len(live.tasks) == 3  # the run's bar and one per trial
    p.waiting("a")
    p.end("b", True)
    assert p._live is live and [t.description for t in live.tasks] == ["run 2/3", "a"]
    p.end("a", True)
    assert p._live is None and p.done == 2
