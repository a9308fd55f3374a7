"""The steps of a reproduction: up, provision, run (trials), analyze, down.

Each step is usable on its own (``netrepro up|provision|run|analyze|down``) and finds the
state of the previous ones on disk: the site's state in ``.state/<experiment>-<site>/``, the
inventory in ``inventory/<experiment>-<site>.yml``, results in
``results/<experiment>/<run-id>/`` (written once, never overwritten; ``latest`` points at
the newest).
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import tarfile
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from netrepro import ansible
from netrepro.inventory import build_inventory, write_inventory, write_known_hosts
from netrepro.rolevars import role_vars
from netrepro.sites import Site, get_site
from netrepro.spec import REPO_ROOT, Spec

STATE_ROOT = Path(os.environ.get("NETREPRO_STATE", REPO_ROOT / ".state"))
RESULTS_ROOT = Path(os.environ.get("NETREPRO_RESULTS", REPO_ROOT / "results"))
INVENTORY_DIR = REPO_ROOT / "inventory"
#: Seconds between choosing the common start time and the start: every node must have its
#: collectors and flow clients waiting by then. The local micro-VM (QEMU TCG) is slow.
DEFAULT_LEAD_S = {"vm": 30.0, "host": 10.0}


def log(msg: str) -> None:
    print(msg, flush=True)


def state_dir(spec: Spec, site: str) -> Path:
    return STATE_ROOT / f"{spec.name}-{site}"


def inventory_path(spec: Spec, site: str) -> Path:
    return INVENTORY_DIR / f"{spec.name}-{site}.yml"


def open_site(spec: Spec, site: str, options: dict[str, Any] | None = None) -> Site:
    return get_site(site, spec, state_dir(spec, site), options)


def control_dir() -> str:
    d = Path("/tmp/netrepro-cp")
    d.mkdir(mode=0o700, exist_ok=True)
    return str(d)


def write_site_inventory(spec: Spec, site: Site) -> Path:
    """Write inventory/<experiment>-<site>.yml from the site's logins; return its path.

    Host keys are checked against the reservation's known_hosts (state_dir/ssh/known_hosts):
    the keys the logins pin (the local site's), else accept-new (testbed nodes).
    """
    known = site.state_dir / "ssh" / "known_hosts"
    known.parent.mkdir(parents=True, exist_ok=True)
    logins = site.logins()
    write_known_hosts(logins, known)
    inv = build_inventory(spec, logins, site.name, site.inventory_vars(),
                          known_hosts=str(known), control_dir=control_dir())
    return write_inventory(inv, inventory_path(spec, site.name))


# --- steps ------------------------------------------------------------------------------
def up(spec: Spec, site_name: str, options: dict[str, Any] | None = None) -> Site:
    """Reserve the site, wait until every node answers, write the inventory."""
    site = open_site(spec, site_name, options)
    t0 = time.time()
    # Facts cached from an earlier reservation (interface names) may not hold any more.
    shutil_rm(ansible.fact_cache_dir(_vars_file_dir(site)))
    site.reserve()
    site.wait_ready()
    path = write_site_inventory(spec, site)
    st = site.load_state()
    st.setdefault("timings_s", {})["up"] = round(time.time() - t0, 1)
    site.save_state(st)
    log(f"[up] {site_name} ready in {time.time() - t0:.0f} s; inventory {path.relative_to(REPO_ROOT)}")
    return site


def _vars_file_dir(site: Site) -> Path:
    d = site.state_dir / "ansible"
    d.mkdir(parents=True, exist_ok=True)
    return d


def provision(spec: Spec, site_name: str, options: dict[str, Any] | None = None) -> ansible.PlaybookResult:
    """Run playbooks/provision.yml on the site's nodes."""
    site = open_site(spec, site_name, options)
    inv = write_site_inventory(spec, site)
    variant = spec["trials"][0]["variant"]
    t0 = time.time()
    res = ansible.run_playbook("provision", inv, {"netrepro": role_vars(spec, variant)}, _vars_file_dir(site))
    st = site.load_state()
    st.setdefault("timings_s", {})["provision"] = round(time.time() - t0, 1)
    st["provisioned"] = True
    st["variant"] = variant
    site.save_state(st)
    log(f"[provision] done in {res.seconds:.0f} s ({res.changed} changes)")
    return res


def trial_vars(spec: Spec, trial: dict, time_scale: float, fetch_dir: Path, lead_s: float) -> dict:
    """Extra var ``trial`` for playbooks/trial.yml (see its header for the shape).

    Durations and offsets are the spec's times ``time_scale``; the ping collector of a client
    targets the server of its (first) flow group.
    """
    sched = spec.scaled(time_scale)

    def data_addr(node: str) -> str:
        return spec.nodes[node]["interfaces"][0]["address"]

    server_of: dict[str, str] = {}
    flows: dict[str, list[dict]] = {}
    for fg in sched["flows"]:
        server_of.setdefault(fg["client"], fg["server"])
        flows.setdefault(fg["client"], []).append({
            "server_address": data_addr(fg["server"]), "flows": fg["flows"],
            "start_s": round(fg["start_s"], 3), "duration_s": round(fg["duration_s"], 3)})
    ping, qdisc = {}, {}
    for c in spec["collectors"]:
        for node in spec.select(c["nodes"]):
            if c["kind"] == "ping" and node in server_of:
                ping[node] = {"target": data_addr(server_of[node]), "interval_s": c["interval_s"]}
            elif c["kind"] == "qdisc_stats":
                qdisc[node] = {"network": c.get("network") or spec["bottleneck"]["network"], "interval_s": c["interval_s"]}
    files = role_vars(spec, trial["variant"]).get("ftp_source", {}) or {}
    return {
        "id": f"{trial['aqm']}-{trial['variant']}", "aqm": trial["aqm"], "variant": trial["variant"],
        "lead_s": lead_s, "duration_s": round(sched["duration_s"], 3),
        "base_rtt_s": round(sched["base_rtt_s"], 3), "files": files.get("files", []),
        "ping": ping, "qdisc_stats": qdisc, "flows": flows, "fetch_dir": str(fetch_dir),
    }


def new_run_dir(spec: Spec, site: str) -> Path:
    """Create results/<experiment>/<UTC time>-<site>/ (never an existing one)."""
    base = RESULTS_ROOT / spec.name
    base.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for i in range(100):
        d = base / (f"{stamp}-{site}" + (f"-{i}" if i else ""))
        try:
            d.mkdir()
            return d
        except FileExistsError:
            continue
    raise RuntimeError(f"cannot create a new run folder under {base}")


def point_latest(run_dir: Path) -> None:
    """Atomically point results/<experiment>/latest at ``run_dir``."""
    link = run_dir.parent / "latest"
    tmp = run_dir.parent / f".latest-{os.getpid()}"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run_dir.name)
    os.replace(tmp, link)


def _extract(archive: Path, dest: Path) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(archive) as tf:
        tf.extractall(dest, filter="data")
    archive.unlink()


def _git_commit() -> str:
    try:
        rev = subprocess.run(["git", "-C", str(REPO_ROOT), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(REPO_ROOT), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return rev + ("-dirty" if dirty else "") if rev else "unknown"
    except OSError:
        return "unknown"


def phase_start_skew(spec: Spec, time_scale: float, trial_dir: Path, start_epoch_s: float) -> dict[str, dict]:
    """Per phase: when the flow events that open it happened, against the schedule.

    The events of a phase boundary are the actual starts of the flows scheduled to start
    there and the actual ends of those scheduled to end there (each client's flows.csv).
    For each phase with events: ``events``; ``lag_ms``, the median of (actual - scheduled);
    ``spread_ms``, max - min of (actual - scheduled) over the events; and ``skew_ms``,
    ``lag_ms`` minus the first phase's ``lag_ms``: how far this phase boundary moved relative
    to the schedule as the first clients realized it. That is the phase-start skew across
    clients (each phase is opened by a different client here).
    """
    import csv
    import statistics

    sched = spec.scaled(time_scale)
    events: dict[float, list[float]] = {}
    for fg, path in zip(sched["flows"], flows_files(spec, trial_dir)):
        if not path.is_file():
            continue
        with path.open() as fh:
            for row in csv.DictReader(fh):
                try:
                    s, e = float(row["start_epoch_s"]), float(row["end_epoch_s"])
                except (KeyError, TypeError, ValueError):
                    continue
                t_start = start_epoch_s + fg["start_s"]
                t_end = t_start + fg["duration_s"]
                events.setdefault(round(fg["start_s"], 3), []).append(s - t_start)
                events.setdefault(round(fg["start_s"] + fg["duration_s"], 3), []).append(e - t_end)
    out: dict[str, dict] = {}
    first_lag = None
    for ph in sched["phases"]:
        ev = events.get(round(ph["start_s"], 3))
        if not ev:
            continue
        lag = statistics.median(ev) * 1000
        if first_lag is None:
            first_lag = lag
        out[ph["name"]] = {"events": len(ev), "lag_ms": round(lag, 1),
                           "spread_ms": round((max(ev) - min(ev)) * 1000, 1),
                           "skew_ms": round(lag - first_lag, 1)}
    return out


def flows_files(spec: Spec, trial_dir: Path) -> list[Path]:
    """The flows CSV of each flow group, in spec order: a client's first group writes
    flows.csv, its k-th (k >= 1) flows-<k>.csv (roles/flow_clients)."""
    seen: dict[str, int] = {}
    out = []
    for fg in spec["flows"]:
        k = seen.get(fg["client"], 0)
        seen[fg["client"]] = k + 1
        out.append(trial_dir / fg["client"] / ("flows.csv" if k == 0 else f"flows-{k}.csv"))
    return out


def sha256_tree(root: Path) -> dict[str, str]:
    """Relative path -> sha256 hex of every file under ``root``."""
    out = {}
    for p in sorted(root.rglob("*")):
        if p.is_file():
            out[str(p.relative_to(root))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _node_meta(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


def run(spec: Spec, site_name: str, time_scale: float = 1.0, options: dict[str, Any] | None = None,
        trial_ids: list[str] | None = None, lead_s: float | None = None) -> Path:
    """Run the spec's trials (or ``trial_ids``) on a provisioned site; return the run folder.

    The run folder holds raw/<trial>/<node>/ as fetched and run.json; it is new for every
    call. An interrupted run stops its trial's processes on the nodes and is marked
    INCOMPLETE.
    """
    site = open_site(spec, site_name, options)
    if not site.load_state().get("provisioned"):
        raise RuntimeError(f"site {site_name}: not provisioned; run `make provision SITE={site_name}` first")
    inv = write_site_inventory(spec, site)
    status = site.status()
    mode = status.get("mode", "remote")
    lead = lead_s if lead_s is not None else float(os.environ.get("NETREPRO_LEAD_S", DEFAULT_LEAD_S.get(mode, 20.0)))
    run_dir = new_run_dir(spec, site_name)
    raw = run_dir / "raw"
    log(f"[run] {spec.name} on {site_name} ({mode}), TIME_SCALE={time_scale}; results in {run_dir.relative_to(REPO_ROOT) if run_dir.is_relative_to(REPO_ROOT) else run_dir}")
    meta: dict[str, Any] = {
        "experiment": spec.name, "spec": spec.data, "spec_file": str(spec.path), "site": site_name,
        "mode": mode, "site_status": status, "time_scale": time_scale, "lead_s": lead,
        "toolkit_commit": _git_commit(), "controller": {"python": platform.python_version(), "host": platform.node()},
        "started_at": datetime.now(timezone.utc).isoformat(), "trials": [], "nodes": {},
        "packet": {"mtu_bytes": spec["links"]["mtu_bytes"], "note": "Linux sends MSS-sized segments (MTU - 52 B of TCP/IP headers with timestamps); the paper's 1000 B packets are not reproduced"},
    }
    wanted = [t for t in spec["trials"] if not trial_ids or f"{t['aqm']}-{t['variant']}" in trial_ids]
    t_run = time.time()
    current = None
    try:
        for trial in wanted:
            tv = trial_vars(spec, trial, time_scale, run_dir / ".fetch" / f"{trial['aqm']}-{trial['variant']}", lead)
            st = site.load_state()
            tv["variant_changed"] = st.get("variant") != trial["variant"]
            if tv["variant_changed"]:
                st["variant"] = None  # unknown until the trial's set-variant step succeeds
                site.save_state(st)
            current = tv
            log(f"[run] trial {tv['id']}: base RTT {tv['base_rtt_s']} s, schedule {tv['duration_s']} s")
            load_before = os.getloadavg()
            t0 = time.time()
            res = ansible.run_playbook("trial", inv, {"netrepro": role_vars(spec, trial["variant"]), "aqm_name": trial["aqm"],
                                                      "trial": tv}, _vars_file_dir(site))
            wall = time.time() - t0
            st = site.load_state()
            st["variant"] = trial["variant"]
            site.save_state(st)
            tdir = raw / tv["id"]
            for archive in sorted(Path(tv["fetch_dir"]).glob("*.tar.gz")):
                _extract(archive, tdir / archive.name.removesuffix(".tar.gz"))
            bn = spec["bottleneck"]["node"]
            before = _node_meta(tdir / bn / "meta-before.json")
            after = _node_meta(tdir / bn / "meta-after.json")
            # The common start chosen on the bottleneck node (its set_fact), else inferred.
            chosen = (res.facts_set.get(bn) or {}).get("trial_start_epoch_s")
            start = float(chosen) if chosen else _trial_start(tdir, spec, tv)
            bdev = _bottleneck_dev(before, spec.address(bn, spec["bottleneck"]["network"]))
            meta["trials"].append({
                "id": tv["id"], "aqm": tv["aqm"], "variant": tv["variant"], "start_epoch_s": start,
                "phases": spec.scaled(time_scale)["phases"], "duration_s": tv["duration_s"],
                "base_rtt_s": tv["base_rtt_s"], "wall_s": round(wall, 1), "bottleneck_interface": bdev,
                "qdisc_before": [q for q in before.get("qdiscs") or [] if q.get("dev") == bdev],
                "qdisc_after": [q for q in after.get("qdiscs") or [] if q.get("dev") == bdev],
                "phase_start_skew_ms": phase_start_skew(spec, time_scale, tdir, start) if start else {},
                # how busy the bottleneck node's CPU was (all nodes' in the local micro-VM)
                "bottleneck_cpu_busy": cpu_busy(before, after),
                # the controller machine's 1/5/15-min load averages before and after the trial
                # (in vm mode the nodes' CPUs are emulated on this machine's)
                "controller_loadavg": {"before": [round(x, 2) for x in load_before],
                                       "after": [round(x, 2) for x in os.getloadavg()]},
            })
            log(f"[run] trial {tv['id']} done in {wall:.0f} s (schedule {tv['duration_s']} s)")
            current = None
    except BaseException as exc:
        (run_dir / "INCOMPLETE").write_text(f"interrupted or failed: {type(exc).__name__}: {exc}\n")
        if current is not None:
            _stop_trial(spec, inv, site, current)
        raise
    finally:
        shutil_rm(run_dir / ".fetch")
        meta["finished_at"] = datetime.now(timezone.utc).isoformat()
        meta["wall_s"] = round(time.time() - t_run, 1)
        meta["nodes"] = _nodes_meta(raw, spec)
        meta["phase_start_skew_ms"] = {t["id"]: t["phase_start_skew_ms"] for t in meta["trials"]}
        meta["timings_s"] = {**site.load_state().get("timings_s", {}), "trials": meta["wall_s"]}
        meta["raw_sha256"] = sha256_tree(raw) if raw.exists() else {}
        (run_dir / "run.json").write_text(json.dumps(meta, indent=1, default=str) + "\n")
    point_latest(run_dir)
    return run_dir


def shutil_rm(path: Path) -> None:
    """Remove a folder tree if it exists."""
    shutil.rmtree(path, ignore_errors=True)


def _trial_start(tdir: Path, spec: Spec, tv: dict) -> float | None:
    """The common start time chosen on the bottleneck node, read back from the qdisc sampler
    (it starts ``margin`` = 1 s before) or from the flow clients' files."""
    import csv
    for fg, p in zip(spec["flows"], flows_files(spec, tdir)):
        if fg["start_s"] == 0 and p.is_file():
            with p.open() as fh:
                starts = [float(r["start_epoch_s"]) for r in csv.DictReader(fh) if r.get("start_epoch_s")]
            if starts:
                return round(min(starts), 3)
    return None


def cpu_busy(before: dict, after: dict) -> float | None:
    """Share of CPU time (0..1) not idle between two node snapshots (``cpu_ticks``: the
    ``cpu`` line of /proc/stat, proc(5): user nice system idle iowait irq softirq steal ...)."""
    try:
        a = [int(x) for x in before["cpu_ticks"].split()]
        b = [int(x) for x in after["cpu_ticks"].split()]
    except (KeyError, ValueError, AttributeError):
        return None
    d = [y - x for x, y in zip(a, b)]
    total = sum(d[:8])
    idle = d[3] + (d[4] if len(d) > 4 else 0)
    return round(1 - idle / total, 3) if total > 0 else None


def _bottleneck_dev(meta: dict, address: str) -> str | None:
    """The interface holding ``address`` in a node's ``ip -j addr`` dump (meta "addresses")."""
    for link in meta.get("addresses") or []:
        for ai in link.get("addr_info", []):
            if ai.get("local") == address:
                return link.get("ifname")
    return None


def _nodes_meta(raw: Path, spec: Spec) -> dict:
    out = {}
    for node in spec.nodes:
        metas = sorted(raw.glob(f"*/{node}/meta-before.json"))
        if not metas:
            continue
        m = _node_meta(metas[0])
        out[node] = {k: m.get(k) for k in ("kernel", "iproute2", "vsftpd", "openssh", "curl", "sysctls")}
        out[node]["offloads"] = m.get("offloads")
    return out


def _stop_trial(spec: Spec, inv: Path, site: Site, tv: dict) -> None:
    """Stop a trial's collectors and flows on every node after an interruption."""
    try:
        ansible.run_playbook("stop-trial", inv, {"trial": tv}, _vars_file_dir(site), quiet=True)
        log(f"[run] stopped trial {tv['id']}'s processes on the nodes")
    except Exception as exc:  # noqa: BLE001 - best effort while already failing
        log(f"[run] could not stop trial {tv['id']} on the nodes: {exc}")


def analyze(run_dir: Path, partial: bool = False) -> dict:
    """Run the analysis package on ``run_dir`` (its raw files are checked against run.json's
    sha256 sums first; see analysis.analyze); returns the verdict dict.

    Raises analysis.AnalysisError (a ValueError, one line) for a damaged run unless ``partial``.
    """
    from analysis import analyze_run
    return analyze_run(run_dir, partial=partial)


def down(spec: Spec, site_name: str, options: dict[str, Any] | None = None) -> None:
    """Release the site and remove its inventory. Harmless when nothing is up."""
    site = open_site(spec, site_name, options)
    site.release()
    inventory_path(spec, site_name).unlink(missing_ok=True)
