"""The ns3 site's Slurm executor: each trial instance's simulation a Slurm job.

With the site option ``executor=slurm``, :meth:`netrepro.sites.ns3.site.Ns3Site.simulate`
runs netrepro-sim on a Slurm cluster instead of on this machine, through submitit (the
Python client of Slurm that Meta's researchers keep, https://github.com/facebookincubator/submitit):

- The simulations the runner begins together (``--jobs N`` at once,
  :func:`netrepro.runner.atonce.simulate_at_once`) are gathered for :data:`GATHER_S` and
  submitted as one job array (submitit's ``executor.batch()``: ``sbatch --array``).
- Each job runs :func:`run_simulator` on a node: netrepro-sim with the scenario and output
  folder the site wrote. Those paths, the simulator and this Python must therefore be the same
  on the nodes as here (a shared file system, as on most clusters; the folder of submitit's
  files is the site option ``slurm_folder``, default ``<state folder>/slurm``).
- A job that does not complete (FAILED, TIMEOUT, CANCELLED, OUT_OF_MEMORY, NODE_FAIL...)
  raises SiteError naming the job id and Slurm's state and exit code as sacct gives them; a
  simulator that fails in a job, its exit and first line of stderr. The runner records it as
  the trial's failure in one line, and the run stays resumable.
- :meth:`SlurmRunner.stop` cancels every job not finished (Ctrl-C, SIGTERM, a failed trial).

The partition, time limit, memory and CPUs of each job are site options
(:data:`OPTIONS`; docs/sites/ns3.md). sacct must answer (Slurm's accounting, slurmdbd): it is
how submitit, and this module, learn a job's state.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from netrepro.sites.errors import SiteError
from netrepro.sites.options import Option, matches, number_in, one_of

#: How long the first simulation begun waits for others to join its job array, s.
GATHER_S = 0.5
#: How often a job's end is looked for while it runs, s: its result file (submitit's done()),
#: and every :data:`FORCE_S` s its state from sacct (a job that failed or was cancelled writes
#: no result; submitit alone would ask sacct only every 2-60 s, later the older the job).
POLL_S = 0.5
FORCE_S = 5.0
#: The bounds of the job options (issue 54: every numeric option bounded where it is parsed), conservative:
#: a year of minutes, 4 TiB, 1024 CPUs, beyond what one simulation of netrepro-sim (one core, a few
#: hundred MB) could use; a partition's own limits (MaxTime, MaxMemPerNode) refuse less at sbatch.
MAX_TIME_MIN, MAX_MEM_MB, MAX_CPUS = 366 * 24 * 60, 4 << 20, 1024
#: The site options of the Slurm executor (netrepro.sites.ns3.site.Ns3Site.OPTIONS).
OPTIONS = {
    "executor": Option("where the simulations run: local (this machine's cores, the default) or slurm (jobs of a "
                       "Slurm cluster through submitit; docs/sites/ns3.md)", one_of("local", "slurm")),
    "slurm_partition": Option("executor=slurm: the partition of the jobs (sbatch --partition), default the cluster's",
                              matches(r"[A-Za-z0-9._-]{1,64}", "a Slurm partition name")),
    "slurm_time_min": Option("executor=slurm: each job's time limit, minutes (sbatch --time), default 60",
                             number_in(1, MAX_TIME_MIN, "a whole number of minutes", "a year, a conservative bound",
                                       whole=True)),
    "slurm_mem_mb": Option("executor=slurm: each job's memory, MB (sbatch --mem), default 1024",
                           number_in(1, MAX_MEM_MB, "a whole number of MB", "4 TiB, a conservative bound", whole=True)),
    "slurm_cpus": Option("executor=slurm: each job's CPUs (sbatch --cpus-per-task), default 1: netrepro-sim "
                         "uses one", number_in(1, MAX_CPUS, "a whole number of CPUs", "a conservative bound",
                                               whole=True)),
    "slurm_folder": Option("executor=slurm: the folder of submitit's job files (pickles, logs), on a file system "
                           "the nodes share; default <state folder>/slurm",
                           matches(r"/[A-Za-z0-9._/+-]{0,400}", "an absolute path")),
}
#: Each job's defaults, when the options do not say: a full pie-vs-red trial takes 5-15 s of
#: one core and under 200 MB (docs/sites/ns3.md); the labs at their manuals' rates minutes.
DEFAULT_TIME_MIN = 60
DEFAULT_MEM_MB = 1024
DEFAULT_CPUS = 1
#: How long a job whose result is written may take to reach a final state in sacct, s.
END_WAIT_S = 30.0
#: sacct's states of a job not ended yet.
RUNNING = ("PENDING", "RUNNING", "COMPLETING", "CONFIGURING", "REQUEUED", "RESIZING", "SUSPENDED", "STAGE_OUT")
#: How many trial instances are in the cluster at once when ``--jobs`` does not say (the
#: runner's default with the Slurm executor, Ns3Site.default_jobs): the rest wait for a slot.
JOBS_AT_ONCE = 32


def run_simulator(argv: list[str]) -> tuple[int, str, str]:
    """Run on a Slurm node by each job: ``argv`` (netrepro-sim, its scenario, its output
    folder) to its end. Returns (exit status, the last 2000 characters of its stdout, of its
    stderr); a negative status is the signal that ended it."""
    p = subprocess.run(argv, capture_output=True, text=True)
    return p.returncode, p.stdout[-2000:], p.stderr[-2000:]


def missing_commands() -> list[str]:
    """The Slurm commands this executor runs (through submitit and itself) that are not on the
    PATH: sbatch, sacct, scancel."""
    return [c for c in ("sbatch", "sacct", "scancel") if shutil.which(c) is None]


def uses_slurm(options: dict[str, Any]) -> bool:
    """Whether the site's options ask for the Slurm executor."""
    return options.get("executor") == "slurm"


class SlurmRunner:
    """Runs argv lists as Slurm jobs (:func:`run_simulator`), those submitted within
    :data:`GATHER_S` of each other as one job array; thread-safe (one thread per trial
    instance simulated at once).

    Args:
        folder: submitit's folder of job files (made if missing).
        options: the site's options (:data:`OPTIONS`).
    """

    def __init__(self, folder: Path, options: dict[str, Any]):
        import submitit
        self.folder = Path(folder)
        self.executor = submitit.SlurmExecutor(folder=str(self.folder / "%j"), python=sys.executable)
        params: dict[str, Any] = {
            "time": int(options.get("slurm_time_min") or DEFAULT_TIME_MIN),
            "mem": f"{int(options.get('slurm_mem_mb') or DEFAULT_MEM_MB)}M",
            "cpus_per_task": int(options.get("slurm_cpus") or DEFAULT_CPUS),
            "job_name": "netrepro-sim",
        }
        if options.get("slurm_partition"):
            params["partition"] = str(options["slurm_partition"])
        self.executor.update_parameters(**params)
        self._lock = threading.Lock()
        self._gathered: list[tuple[list[str], Future]] = []
        self._jobs: list[Any] = []
        self._stopped = False

    def _flush(self) -> None:
        """Submit every gathered argv as one job array; each waiter's future gets its job (or
        the SiteError of a refused submission)."""
        with self._lock:
            batch, self._gathered = self._gathered, []
        if not batch:
            return
        try:
            with self.executor.batch():
                jobs = [self.executor.submit(run_simulator, argv) for argv, _ in batch]
        except Exception as exc:   # submitit: sbatch refused (a bad partition, a limit), or is missing
            error = SiteError(f"site ns3: Slurm refused {len(batch)} job(s): {' '.join(str(exc).split())[:300]}")
            for _, fut in batch:
                fut.set_exception(error)
            return
        first, last = jobs[0].job_id, jobs[-1].job_id
        print(f"site ns3: {len(jobs)} simulation(s) submitted to Slurm as job "
              + (first if first == last else f"array {first.split('_')[0]} ({first} to {last})")
              + f"; their files in {self.folder}", file=sys.stderr, flush=True)
        with self._lock:
            self._jobs.extend(jobs)
            stopped = self._stopped
        for (_, fut), job in zip(batch, jobs):
            fut.set_result(job)
        if stopped:
            self.stop()

    def submit(self, argv: list[str]) -> Any:
        """The Slurm job (a submitit Job) running ``argv``, submitted with those asked for
        within :data:`GATHER_S` as one array. SiteError: stopped, or Slurm refused it."""
        fut: Future = Future()
        with self._lock:
            if self._stopped:
                raise SiteError("site ns3: stopped; no Slurm job was submitted")
            self._gathered.append((argv, fut))
            first = len(self._gathered) == 1
        if first:
            threading.Timer(GATHER_S, self._flush).start()
        return fut.result()

    def run(self, argv: list[str]) -> subprocess.CompletedProcess:
        """``argv`` run as a Slurm job to its end: its CompletedProcess (stdout and stderr
        their last 2000 characters).

        Raises:
            SiteError: the job did not complete (its id, and sacct's state, exit code and
                reason), or it was stopped (:meth:`stop`), or refused.
        """
        job = self.submit(argv)
        next_force = time.monotonic() + FORCE_S
        while True:
            force = time.monotonic() >= next_force
            if job.done(force_check=force):
                break
            if force:
                next_force = time.monotonic() + FORCE_S
            time.sleep(POLL_S)
        # A job's result file may be written before Slurm has ended it (a job cancelled while
        # its simulator was stopping): sacct says how it ended.
        state, said = self._ended(str(job.job_id), str(job.state))
        if state != "COMPLETED":
            raise SiteError(f"site ns3: Slurm job {job.job_id} {said}; its log: {job.paths.stderr}")
        try:
            code, out, err = job.result()
        except Exception as exc:   # submitit's FailedJobError/UncompletedJobError: a job that died
            raise SiteError(f"site ns3: Slurm job {job.job_id} {said}: {' '.join(str(exc).split())[:300]}") from None
        return subprocess.CompletedProcess(argv, code, out, err)

    @staticmethod
    def _ended(job_id: str, fallback: str) -> tuple[str, str]:
        """(the first word of sacct's State for ``job_id`` once it is final, and State, ExitCode
        and Reason in words), asked until the state is final for at most :data:`END_WAIT_S`;
        ``fallback`` (submitit's state) when sacct cannot say."""
        deadline = time.monotonic() + END_WAIT_S
        while True:
            p = subprocess.run(["sacct", "-n", "-P", "-X", "-j", job_id, "-o", "State,ExitCode,Reason"],
                               capture_output=True, text=True)
            if p.returncode != 0:   # no accounting: submitit's own word
                return (fallback.split() or ["UNKNOWN"])[0], fallback or "in an unknown state"
            fields = (p.stdout.strip().splitlines() or [""])[0].split("|")
            if len(fields) == 3 and fields[0] and fields[0].split()[0] not in RUNNING:
                state, code, reason = fields
                return state.split()[0], (f"{state}, exit code {code}"
                                          + (f" (reason {reason})" if reason and reason != "None" else ""))
            if time.monotonic() >= deadline:   # not in sacct yet, or still running
                return "UNKNOWN", f"not ended in Slurm's accounting {END_WAIT_S:g} s after its result: " + (
                    fields[0] if len(fields) == 3 else "no record")
            time.sleep(POLL_S)

    def stop(self) -> int:
        """Cancel every job not finished (scancel, through submitit), from any thread; from
        then on :meth:`submit` submits nothing. Returns how many were cancelled."""
        with self._lock:
            self._stopped = True
            jobs = list(self._jobs)
        n = 0
        for job in jobs:
            try:
                if not job.done():
                    job.cancel(check=False)
                    n += 1
            except Exception:   # a job Slurm already forgot, scancel missing: nothing left to cancel
                pass
        return n
