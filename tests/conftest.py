"""Fixtures shared by several test modules."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from netrepro.runner import attempt as run_attempt, run
from netrepro.sites import Site

#: A recorded run of pie-vs-red on the local site at TIME_SCALE 0.1 (its run.json says how it was made).
V1_RUN = Path(__file__).resolve().parent / "data" / "pie-vs-red-local-0.1"
#: pie-vs-red's schema_version 1 file, for the tests of the version 1 format (netrepro.experiment.spec.Spec,
#: netrepro migrate; experiments/pie-vs-red is schema_version 2); goes with that format.
PIE_VS_RED_V1 = Path(__file__).resolve().parent / "data" / "specs" / "pie-vs-red-v1.yml"
#: A schema_version 2 experiment with switches and named links (h1, h2 -- s1 -- s2 -- h3), written for the tests.
LAB19_LIKE = Path(__file__).resolve().parent / "data" / "experiments" / "lab19-like.yml"


@pytest.fixture(scope="module")
def spec():
    """experiments/pie-vs-red loaded (:func:`netrepro.experiment.spec.load_spec`), once per
    test module: the experiment most unit tests read. Shared by the module's tests, so a test
    that changes it changes a ``copy.deepcopy`` of it."""
    from netrepro.experiment.spec import load_spec
    return load_spec("pie-vs-red")


@pytest.fixture(scope="module")
def switched():
    """:data:`LAB19_LIKE` loaded once per test module: the switched topology a site must
    build, address and log into port by port (shared as :func:`spec` is)."""
    from netrepro.experiment.spec import load_spec
    return load_spec(LAB19_LIKE)


class _RecordedSite(SimpleNamespace):
    """The site of :func:`recorded_site`: its saved state, and a real-time site's pace."""

    TRIAL_WALL_PER_SCHEDULED_S = Site.TRIAL_WALL_PER_SCHEDULED_S
    TRIAL_OVERHEAD_S = Site.TRIAL_OVERHEAD_S

    def lease_end(self):   # a site whose reservation does not expire (Site's default)
        return None

    def documents(self):   # no reservation documents (Site's default)
        return {}


@pytest.fixture
def recorded_site(tmp_path, monkeypatch):
    """``netrepro.runner.run.run`` on a site that runs nothing: each trial instance becomes the recorded
    trial of the same trial id in :data:`V1_RUN` (its raw folder copied as a fetch leaves
    it, the same layout as the trial playbook's; its record with the instance's id, 60 s of
    wall time for a 25 s schedule, and the trial's labels in place of its aqm and variant), and
    the site is its saved state. Results go under ``tmp_path/results``.

    Returns a namespace: ``ran`` (instance ids in the order run), ``given`` (instance id ->
    the experiment and trial vars it was run with), ``stop_at`` (set ``stop_at["id"]`` to make
    that instance raise KeyboardInterrupt as it starts), ``unhealthy`` (instance id -> how many
    more of its attempts fail their health checks: with a retry left it is not kept, as
    ``run_trial`` does, else its record says so) and ``results`` (the results root)."""
    monkeypatch.setenv("NETREPRO_RESULTS", str(tmp_path / "results"))
    recorded = {t["id"]: t for t in json.loads((V1_RUN / "run.json").read_text())["trials"]}
    ran: list[str] = []
    given: dict[str, tuple] = {}
    stop_at: dict = {}
    unhealthy: dict[str, int] = {}

    def run_trial(spec, site, inv, tv, time_scale, run_dir, attempt, started=None, judge=None, retry_unhealthy=False):
        tid = tv["id"]
        if stop_at.get("id") == tid:
            raise KeyboardInterrupt("SIGINT")
        ran.append(tid)
        given[tid] = (spec, tv)
        sick = unhealthy.get(tid, 0) > 0
        if sick:
            unhealthy[tid] -= 1
        lag = {"id": "flow_start_lag", "value": 216.0, "threshold": 100.0, "unit": "ms", "passed": not sick, "detail": ""}
        if sick and retry_unhealthy:
            raise run_attempt.TrialFailed("health checks failed: flow_start_lag 216 ms (max 100 ms): FAILED",
                                   details={"kept_in": f"failed/{tid}-{attempt}", "unhealthy": True,
                                            "health": {"passed": False, "checks": [lag]}}, again=True)
        base = tv["trial"]  # the file's trial id: pie-vs-red's are the recorded run's
        shutil.copytree(V1_RUN / "raw" / base, run_dir / "raw" / tid)
        record = {k: v for k, v in recorded[base].items() if k not in ("aqm", "variant", "phase_start_skew_ms")}
        # the trial's labels, as netrepro.runner.trial.run_trial records them
        return {**record, "id": tid, "wall_s": 60.0, "duration_s": 25.0, "labels": tv["labels"],
                **({"health": {"passed": False, "checks": [lag]}} if sick else {})}

    def fake_site(copy: int) -> _RecordedSite:
        state = {"provisioned": True}
        return _RecordedSite(load_state=lambda: dict(state), save_state=state.update, status=lambda: {"mode": "vm"},
                             copy=copy, name="recorded")

    def reservations(spec, name, opts, parallel):
        return [run.Reservation(k, fake_site(k), tmp_path / f"inventory-{k}.yml", f"recorded #{k}" if parallel > 1
                                else "recorded") for k in range(1, parallel + 1)]

    monkeypatch.setattr(run_attempt, "run_trial", run_trial)
    monkeypatch.setattr(run, "open_reservations", reservations)
    monkeypatch.setattr(run_attempt, "delay_probe", lambda inv, tv: None)
    monkeypatch.setattr(run_attempt, "stop_trial", lambda *a: None)
    return SimpleNamespace(ran=ran, given=given, stop_at=stop_at, unhealthy=unhealthy, results=tmp_path / "results")


def netrepro_on_this_host(tmp_path_factory, name: str, unset: tuple[str, ...] = (), timeout_s: float = 1800):
    """What a test that builds namespaces on this host runs netrepro with: root required (the
    test fails saying so otherwise), a folder of its own (``base``, ``tmp_path_factory``'s
    ``name``), the environment (``env``) with the sites' state, the inventories and the results under it and
    ``unset`` removed (the machine's settings must not steer the test), and ``nr(*args)``:
    ``python -m netrepro *args`` from the repository in that environment, its output captured,
    stopped after ``timeout_s`` s (subprocess.TimeoutExpired)."""
    if os.geteuid() != 0:
        pytest.fail("needs root (network namespaces); run `make test` as root")
    base = tmp_path_factory.mktemp(name)
    env = dict(os.environ, NETREPRO_STATE=str(base / "state"), NETREPRO_INVENTORY=str(base / "inventory"),
               NETREPRO_RESULTS=str(base / "results"))
    for var in unset:
        env.pop(var, None)

    def nr(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "netrepro", *args], cwd=Path(__file__).resolve().parent.parent,
                              env=env, capture_output=True, text=True, timeout=timeout_s)
    return SimpleNamespace(base=base, env=env, nr=nr)


def static_nodes_of_local(state: dict, spec, base: Path) -> dict:
    """A static site's ``nodes`` (as a user writes them in their YAML file) for the nodes the
    local site built (``state``: its state.json): each node's login, its addresses, and a work
    folder of its own under ``base`` (the nodes are namespaces of one host, sharing its files)."""
    nodes = {}
    for name, lg in state["logins"].items():
        nodes[name] = {"host": lg["host"], "port": lg["port"], "user": lg["user"], "key": lg["key_file"],
                       "work_dir": f"{base}/work/{name}"}
        if lg.get("proxy_jump"):
            nodes[name]["proxy_jump"] = lg["proxy_jump"]
        addrs = {k: i["address"] for k, i in spec.model.data_plane(name).items() if i["address"]}
        if addrs:
            nodes[name]["addresses"] = addrs
    return nodes


def assert_judged_as_reproduced(verdict: dict) -> None:
    """A 10-s gateway-fifo run's verdict: reproduced, or inconclusive only because a claim's
    95 % interval straddled its bound while its values alone hold (link-used reads iperf3's
    per-second sender counts, which swing around the link's rate while the socket buffers fill:
    its interval in a 10-s trial reached from 14.7 to 25.6 Mbit/s against a bound of 15).
    Fails on a failed claim, a failed health check or an undecided claim whose values fail."""
    if verdict["verdict"] == "reproduced":
        return
    assert verdict["verdict"] == "inconclusive" and not verdict["health_failures"], verdict
    for c in verdict["claims"]:
        assert c["status"] == "holds" or (c["status"] == "undecided" and c.get("values_alone") == "holds"), c



def distinct_run(src: Path, dst: Path) -> Path:
    """A copy of the recorded run ``src`` at ``dst`` whose raw files differ from it by one
    file the analysis does not read (raw/distinct.txt, recorded in run.json's raw_sha256):
    compare refuses a plain copy of a run as a second run of it (analysis/compare.py)."""
    import hashlib

    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("expected", "README.md"))
    text = f"a copy of {src.name} at {dst}, made distinct for a test\n".encode()
    (dst / "raw" / "distinct.txt").write_bytes(text)
    data = json.loads((dst / "run.json").read_text())
    data["raw_sha256"]["distinct.txt"] = hashlib.sha256(text).hexdigest()
    (dst / "run.json").write_text(json.dumps(data, indent=1))
    return dst


def _process_table() -> dict[int, tuple[int, str, str]]:
    """Every running process of the host but this one (zombies are done): pid -> (parent pid,
    start time in clock ticks since boot, command line), from /proc/<pid>/stat (fields 3, 4
    and 22, proc(5)) and cmdline. The start time tells a process from a later one given the
    same pid."""
    table = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit() or int(d.name) == os.getpid():
            continue
        try:
            stat = (d / "stat").read_text()
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:   # ended meanwhile
            continue
        fields = stat[stat.rindex(")") + 2:].split()   # after "pid (comm) ": field 3 on
        if fields[0] not in ("Z", "X"):
            table[int(d.name)] = (int(fields[1]), fields[19], cmd)
    return table


def processes_mentioning(text: str, pids: set[int] | None = None) -> list[str]:
    """Processes on the host (or among ``pids``) whose command line contains ``text`` (not this
    test's own), as "pid: command line"."""
    return [f"{pid}: {cmd[:200]}" for pid, (_, _, cmd) in _process_table().items()
            if text in cmd and (pids is None or pid in pids)]


def processes_of_folder(folder: Path) -> dict[int, tuple[str, str]]:
    """The processes that belong to a test's ``folder``: those whose command line names it (or
    a path in it), and every descendant of theirs (a daemon's sessions and what they run, which
    name nothing of it). pid -> (start time, command line)."""
    table = _process_table()
    named = re.compile(re.escape(str(folder)) + r"(/|\s|$)")
    found = {pid for pid, (_, _, cmd) in table.items() if named.search(cmd)}
    children: dict[int, list[int]] = {}
    for pid, (ppid, _, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    todo = list(found)
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return {pid: table[pid][1:] for pid in found}


_STARTED = pytest.StashKey[dict]()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item):
    """Before a test's fixtures are torn down: the processes of its ``tmp_path``
    (:func:`processes_of_folder`), while their daemons still hold their sessions as children;
    :func:`no_process_left` checks they are gone after."""
    tmp = getattr(item, "funcargs", {}).get("tmp_path")
    if tmp is not None:
        item.stash[_STARTED] = processes_of_folder(tmp)
    yield


@pytest.fixture(autouse=True)
def no_process_left(request):
    """After every test that has a ``tmp_path`` and after its fixtures' teardown: no process it
    started is still running, i.e. none of those :func:`pytest_runtest_teardown` found before
    the teardown (the same pid and start time), nor any other naming ``tmp_path``. Those still
    there after 10 s are killed (SIGKILL) and the test fails naming them: a test stops what it
    starts, daemons and their sessions too (tests/test_ssh_keepalive.py's node sshd and its
    ``sleep 600`` once outlived ``make test``)."""
    yield
    tmp = request.node.funcargs.get("tmp_path")
    if tmp is None:
        return
    before = request.node.stash.get(_STARTED, {})
    deadline = time.monotonic() + 10
    while True:
        now = processes_of_folder(tmp)
        table = _process_table()
        now.update({pid: info for pid, info in before.items() if table.get(pid, (0, None))[1] == info[0]})
        if not now or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    for pid in now:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    assert not now, (f"the test left {len(now)} process(es) running (killed now): "
                     + "; ".join(f"{pid}: {cmd[:160]}" for pid, (_, cmd) in sorted(now.items())))


def claim_records(claims: list[dict]) -> list:
    """Claims written as the experiment file writes them, as the model's records
    (:class:`netrepro.model.Claim`), for tests that judge claims without a file (a claim
    without ``text`` gets ``t``)."""
    from netrepro.model import Claim
    return [Claim.from_data({"text": "t", **c}) for c in claims]


@pytest.fixture(scope="session")
def offline_python(tmp_path_factory) -> Path:
    """A "python" for NETREPRO_CRATE_VALIDATOR that runs .venv-crate's python in a new network
    namespace (``unshare -n``): no interface but lo, and lo down. Checked to be so; fails (never
    skips) where it cannot be made."""
    from netrepro.runfolder.cratecheck import DEFAULT_VENV
    real = DEFAULT_VENV / "bin" / "python"
    if not real.is_file():
        pytest.fail(f"{real} is missing: these tests need the RO-Crate validator's virtual environment; "
                    f"run `make venv-crate` (make test makes it)")
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.fail("unshare (util-linux) is missing: the RO-Crate tests prove the validator needs no network by "
                    "running it in a network namespace (unshare -n, as root); install util-linux")
    wrapper = tmp_path_factory.mktemp("offline") / "python"
    wrapper.write_text(f'#!/bin/sh\nexec {unshare} --net -- {real} "$@"\n')
    wrapper.chmod(0o755)
    probe = subprocess.run(
        [str(wrapper), "-c",
         "import socket, errno\n"
         "print(sorted(n for _, n in socket.if_nameindex()))\n"
         "try:\n"
         "    socket.create_connection(('127.0.0.1', 9), timeout=2)\n"
         "except OSError as e:\n"
         "    print(errno.errorcode.get(e.errno, e.errno))\n"],
        capture_output=True, text=True, timeout=60)
    if probe.returncode != 0:
        pytest.fail(f"cannot run the validator's python in a network namespace ({wrapper}: unshare --net): "
                    f"{probe.stderr.strip()[-300:]}; these tests need root (or user namespaces) for unshare -n")
    assert probe.stdout.split("\n")[:2] == ["['lo']", "ENETUNREACH"], \
        f"the namespace is not cut off from the network: {probe.stdout!r}"
    return wrapper


@pytest.fixture
def offline(offline_python, monkeypatch) -> Path:
    """NETREPRO_CRATE_VALIDATOR set to :func:`offline_python`: every validation runs offline."""
    from netrepro.runfolder.cratecheck import VALIDATOR_ENV
    monkeypatch.setenv(VALIDATOR_ENV, str(offline_python))
    return offline_python


def assert_exports_and_reads_back(run_dir: Path, out: Path) -> Path:
    """Export the analysed run ``run_dir`` as a zipped crate under the new folder ``out``
    (netrepro export), check it with roc-validator (offline when the :func:`offline` fixture is
    in use) and analyse it anew: its summary.csv and verdict.json must be the run's, byte for
    byte. Returns the crate's folder (unpacked into ``out/unpacked``)."""
    from analysis import analyze
    from netrepro.runfolder.crate import export_run
    from netrepro.runfolder.cratereading import unpack_crate
    from netrepro.runfolder.cratecheck import validate_crate

    out.mkdir(parents=True)
    crate, _ = export_run(run_dir, out / "crate.zip")
    assert validate_crate(crate) == []
    again = analyze(crate, figures=False, out_dir=out / "again")
    for name in ("summary.csv", "verdict.json"):
        assert (again.out_dir / name).read_bytes() == (Path(run_dir) / name).read_bytes(), name
    return unpack_crate(crate, out / "unpacked")
