"""Trial instances at once: up to ``--jobs`` simulated at a time on a site that simulates its
trials (:func:`simulate_at_once`), or one on each reservation of a campaign on several
(``--parallel``, :func:`run_on_reservations`), a reservation whose nodes no longer answer
lost (:func:`lose`) and its instance given to the others. Each attempt is begun and
concluded as a serial run's is (:mod:`netrepro.runner.attempt`)."""

from __future__ import annotations

from collections import deque
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from datetime import datetime, timezone

from netrepro.runner.attempt import Begun, Run, begin, conclude, discard, keep_leased, stop_attempt, trial_of
from netrepro.runner.console import SIGNAL_EXIT, log, signal_of, site_arg, spec_arg
from netrepro.runner.parallel import Reservation, unanswered
from netrepro.runner.playbooks import end_playbooks
from netrepro.runner.progress import RunProgress
from netrepro.runner.steps import down
from netrepro.runner.trial import STOPPING, kept_simulation, simulation_of
from netrepro.runfolder.record import LostReservation, add_lost_reservation, write_run


def simulate_at_once(r: Run, progress: RunProgress) -> None:
    """Run the pending trial instances of a simulating site (``r.inv`` None) ``r.jobs`` at a
    time: each is begun (:func:`begin`) and simulated (:func:`simulation_of`, in a worker
    thread, into its own staging folder) as a slot frees, in the pending order, and recorded
    (:func:`conclude`: data checked and moved to raw/, health judged, run.json) in this
    thread, one at a time, in the pending order: run.json lists the trials as a serial run
    does. An instance simulated before those ahead of it waits for them to be recorded.

    Where the run stops, as :func:`run_instance`'s run does: at the first instance in the
    pending order that fails (``r.outcome.failure``). Every instance before it has been recorded
    (it waited for them); those after it that were begun are discarded: their simulators are
    stopped (:meth:`netrepro.sites.base.Site.stop_subprocesses`), their data removed, their
    attempts recorded as failed ("not recorded: the run stopped at trial X") and they run
    again on resume. No instance is begun once one has failed. On Ctrl-C or SIGTERM
    (KeyboardInterrupt) the simulators are stopped the same way, the first instance not
    recorded is where the run stopped, and every begun instance's attempt is recorded as
    "interrupted by SIGINT" (or SIGTERM); the run is resumable as a serial one is.
    Something other than a trial's failure raised while recording is raised again, once
    every simulator has stopped."""
    queue = deque(r.pending)
    flight: deque[tuple[Begun, Future]] = deque()  # begun, in the pending order, not yet recorded
    # Every instance begun and not yet recorded, noted before its simulator is submitted: a
    # signal between the submit and its entry in ``flight`` (a loaded machine may run the
    # simulator first) must still find it to discard.
    unrecorded: list[Begun] = []
    pool = ThreadPoolExecutor(max_workers=r.jobs, thread_name_prefix="simulate")
    try:
        while queue or flight:
            while (queue and sum(not f.done() for _, f in flight) < r.jobs
                   and not any(f.done() and f.exception() is not None for _, f in flight)):
                b = begin(r, queue.popleft(), progress)
                unrecorded.append(b)
                flight.append((b, pool.submit(simulation_of, b.tspec, r.site, b.tv)))
            b, fut = flight[0]
            if not fut.done():
                done, _ = wait([f for _, f in flight if not f.done()], return_when=FIRST_COMPLETED)
                for b2, f2 in flight:
                    if f2 in done:  # simulated ahead of its turn: it waits to be recorded
                        progress.waiting(b2.tid)
                continue
            flight.popleft()
            unrecorded.remove(b)
            conclude(r, b, progress, lambda: kept_simulation(
                b.tspec, b.tv, *fut.result(), r.time_scale, r.run_dir, len(b.ts["attempts"]), b.started, judge=r.judge),
                timed=True)
            if r.outcome.failure is not None:
                break
    except KeyboardInterrupt as exc:
        if not unrecorded:
            raise
        sig = signal_of(exc)
        r.outcome.failure = (unrecorded[0].tid, f"interrupted by {sig}", SIGNAL_EXIT[sig])
    finally:
        if unrecorded:
            stop = getattr(r.site, "stop_subprocesses", None)
            if stop is not None:
                stop()
        pool.shutdown(wait=True, cancel_futures=True)
        if r.outcome.failure is None:
            why = "not recorded: the run stopped"
        elif r.outcome.failure[1].startswith("interrupted by "):
            why = r.outcome.failure[1]
        else:
            why = f"not recorded: the run stopped at trial {r.outcome.failure[0]}"
        for b in unrecorded:
            discard(r, b, progress, why)


def run_on_reservations(r: Run, progress: RunProgress, estimate_s: float) -> None:
    """Run the pending trial instances on the run's reservations (``r.reservations``, a
    campaign's ``--parallel N``), one at a time on each: a free reservation takes the next
    instance in the pending order (the shuffled blocks), begun here (:func:`begin`, run.json
    written), run in a worker thread (:func:`netrepro.runner.attempt.trial_of`: armed, released by its own barrier,
    fetched, checked and judged against its reservation's inventory) and recorded here as it
    ends (:func:`conclude`), in the order the instances end; an unhealthy attempt with a retry
    left goes back to the front of the queue.

    A trial that fails on a reservation some of whose nodes no longer answer
    (:func:`unanswered`) while another is left loses that reservation: its attempt is recorded
    as failed, the reservation is released (:func:`netrepro.runner.steps.down`, said on the
    console) and the instance goes back to the front of the queue for the others, as a resume
    would run it again. Any other failure (or the last reservation's) is where the run stops
    (``r.outcome.failure``): no instance is begun after it, the ones running on the other reservations
    end and are recorded, and the run is resumable as a serial one is.

    On Ctrl-C or SIGTERM (KeyboardInterrupt) the trials still running are stopped: their waits
    end (:data:`netrepro.runner.trial.STOPPING`), their playbooks are ended
    (:func:`netrepro.runner.playbooks.end_playbooks`), their processes on the nodes stopped
    (stop-trial.yml) and their attempts recorded as "interrupted by SIGINT" (or SIGTERM); one
    that ended as the signal came is recorded as it ended (its data are in raw/ already)."""
    queue = deque(r.pending)
    free = deque(r.reservations)
    live = list(r.reservations)
    flight: dict[Future, Begun] = {}
    pool = ThreadPoolExecutor(max_workers=len(r.reservations), thread_name_prefix="reservation")
    try:
        while flight or (queue and free and r.outcome.failure is None):
            while queue and free and r.outcome.failure is None:
                res = free.popleft()
                tid = queue.popleft()
                keep_leased(r, tid, len(queue) // len(live) + 1, estimate_s, res.site)
                if r.outcome.failure is not None:
                    queue.appendleft(tid)
                    break
                b = begin(r, tid, progress, res)
                flight[pool.submit(trial_of(r, b))] = b
            if not flight:
                break
            done, _ = wait(list(flight), return_when=FIRST_COMPLETED)
            for fut in sorted(done, key=lambda f: flight[f].tid):
                b = flight.pop(fut)
                failed_before = r.outcome.failure
                again = conclude(r, b, progress, fut.result)
                if again:
                    queue.appendleft(b.tid)
                elif (r.outcome.failure is not None and failed_before is None and r.outcome.failure[0] == b.tid
                      and len(live) > 1):
                    lost = unanswered(b.inv)
                    if lost:
                        lose(r, b, lost, live)
                        queue.appendleft(b.tid)
                        continue
                if b.res in live:
                    free.append(b.res)
    except KeyboardInterrupt as exc:
        sig = signal_of(exc)
        if not flight:
            raise
        STOPPING.set()
        end_playbooks()
        wait(list(flight))
        ended = sorted(flight.items(), key=lambda fb: fb[1].tid)
        stopped = [b for f, b in ended if f.exception() is not None]
        r.outcome.failure = r.outcome.failure or (stopped[0].tid if stopped else ended[0][1].tid,
                                                  f"interrupted by {sig}", SIGNAL_EXIT[sig])
        for fut, b in ended:
            if fut.exception() is None:   # it ended as the signal came: kept, its data in raw/
                conclude(r, b, progress, fut.result)
            else:
                stop_attempt(b)
                discard(r, b, progress, f"interrupted by {sig}")
        flight.clear()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        STOPPING.clear()


def lose(r: Run, b: Begun, lost: list[str], live: list[Reservation]) -> None:
    """Reservation ``b.res`` is lost: trial instance ``b`` failed on it (``r.outcome.failure``) and its
    nodes ``lost`` do not answer. The failure is taken back (the instance is recorded as
    failed, its attempt naming the reservation), the reservation released and taken out of
    ``live``, and run.json written with the loss (``lost_reservations``)."""
    res = b.res
    why = r.outcome.failure[1] if r.outcome.failure else "failed"
    r.outcome.failure = None
    live.remove(res)
    log(f"[run] reservation {res.label} lost: {', '.join(lost)} do{'es' if len(lost) == 1 else ''} not answer "
        f"(trial {b.tid}: {why}); releasing it; its trials go to {', '.join(x.label for x in live)}")
    try:
        down(r.spec, r.site_name, r.options, reservations=[res.number])
        released = True
    except Exception as exc:  # noqa: BLE001 - the campaign goes on; the reservation stays named
        log(f"[run] reservation {res.label} could not be released ({exc}); release it with "
            f"`netrepro down {spec_arg(r.spec)}{site_arg(r.site_name)}`")
        released = False
    add_lost_reservation(r.meta, LostReservation(res.number, datetime.now(timezone.utc).isoformat(), b.tid, why,
                                                 tuple(lost), released))
    write_run(r.run_dir, r.meta)
