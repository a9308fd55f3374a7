"""The health checks of the flows' starts: the clients' recorded starts behind the schedule
(``flow_start_lag``), their spread at one time (``flow_start_skew``) and the data's start
(``data_start_lag``) of the iperf3 and FTP items; analysis/health.py describes and judges them."""

from __future__ import annotations

from pathlib import Path

from analysis.raw import parse_flows, parse_iperf3
from analysis.substrate.inputs import NotMeasured, Unmeasurable, number, phase_windows, raw_text, trial_items
from netrepro.model import STARTED_KINDS


def _phase_names(spec, record, time_scale) -> dict[float, str]:
    """Phase start (s from the trial's start, to 1 ms) -> its name: run.json's phases, else
    the file's at ``time_scale``."""
    phases = record.get("phases") if isinstance(record.get("phases"), list) else None
    if phases is None:
        phases = [p.scaled(time_scale) for p in spec.model.phases]
    return {round(p["start_s"], 3): p["name"] for p in phases
            if isinstance(p, dict) and number(p.get("start_s")) is not None}


def _flows_file(trial_dir: Path, it: dict, nth: dict) -> Path:
    """The flows.csv an FTP item's receiver wrote: its k-th FTP item of the trial (k >= 1)
    writes flows-<k>.csv (roles/flow_clients). ``nth``: receiver -> FTP items seen so far,
    updated; items must come in the trial's order."""
    k = nth[it.dst] = nth.get(it.dst, -1) + 1
    return trial_dir / it.dst / ("flows.csv" if k == 0 else f"flows-{k}.csv")


def _item_starts(spec, record, trial_dir: Path) -> dict[str, list[float]]:
    """Traffic item id -> the epoch times (s) its client recorded starting it: an iperf3
    item's ``iperf3-<id>.json.t0`` (nr-iperf3.sh), an FTP item's ``start_epoch_s`` of every
    flow in its receiver's flows.csv (the receiver's k-th FTP item of the trial, k >= 1:
    flows-<k>.csv; roles/flow_clients). Raises NotMeasured naming the files without one."""
    out, missing, nth = {}, [], {}
    for it in trial_items(spec, record, trial_dir, STARTED_KINDS):
        try:
            if it.kind == "iperf3":
                f = trial_dir / it.src / f"iperf3-{it.id}.json.t0"
                try:
                    out[it.id] = [float(raw_text(f).split()[0])]
                except (IndexError, ValueError):
                    raise NotMeasured(f"{it.src}/{f.name} has no start time") from None
            else:
                f = _flows_file(trial_dir, it, nth)
                starts = [float(x) for x in parse_flows(raw_text(f))["start_epoch_s"].dropna()]
                if not starts:
                    raise NotMeasured(f"{it.dst}/{f.name} has no flow start")
                out[it.id] = starts
        except NotMeasured as exc:
            missing.append(str(exc))
    if missing:
        raise NotMeasured("; ".join(missing))
    return out


def _start_slots(spec, record, trial_dir, start, time_scale) -> list[dict]:
    """The times at which traffic items start, in order: ``[{"label", "items", "lags_s"}]``,
    lags_s: every recorded start of those items minus (trial start + the item's start_s at
    ``time_scale``). A slot's label is the phase that opens then, else its items' ids."""
    starts = _item_starts(spec, record, trial_dir)
    names = _phase_names(spec, record, time_scale)
    slots: dict[float, dict] = {}
    for it in trial_items(spec, record, trial_dir, STARTED_KINDS):
        at = round(it.start_s * time_scale, 3)
        slot = slots.setdefault(at, {"at": at, "items": [], "lags_s": []})
        slot["items"].append(it.id)
        slot["lags_s"] += [s - (start + it.start_s * time_scale) for s in starts[it.id]]
    for at, slot in slots.items():
        slot["label"] = names.get(at) or ", ".join(slot["items"])
    return [slots[k] for k in sorted(slots)]


def flow_start_lag(spec, record, trial_dir, start, time_scale, **_) -> tuple[float, str]:
    """``flow_start_lag``: per start time, the latest recorded start of the items starting
    then behind their schedule; the largest, ms."""
    per = {s["label"]: 1000 * max(s["lags_s"]) for s in _start_slots(spec, record, trial_dir, start, time_scale)}
    worst = max(per, key=per.get)
    return per[worst], f"worst {worst}; " + ", ".join(f"{k} {round(v):+d}" for k, v in per.items()) + " ms"


def flow_start_skew(spec, record, trial_dir, start, time_scale, **_) -> tuple[float, str]:
    """``flow_start_skew``: per start time at which two or more items start, max - min of
    their recorded starts; the largest, ms. Without such a time the check measures nothing
    (the flows of one FTP item are one curl process with one start): not measured."""
    slots = [s for s in _start_slots(spec, record, trial_dir, start, time_scale) if len(s["items"]) > 1]
    if not slots:
        raise Unmeasurable("no two iperf3 or FTP items of this trial start at the same time (each start time "
                           "opens one item): there is no skew to measure")
    per = {s["label"]: 1000 * (max(s["lags_s"]) - min(s["lags_s"])) for s in slots}
    worst = max(per, key=per.get)
    return per[worst], f"worst {worst}; " + ", ".join(f"{k} {round(v):d}" for k, v in per.items()) + " ms"


def _item_data_starts(spec, record, trial_dir: Path, it: dict, nth: dict) -> tuple[float, str]:
    """(epoch s, how) at which the data of traffic item ``it`` started flowing.

    FTP: per flow of its receiver's flows.csv (the k-th FTP item of that receiver:
    flows-<k>.csv), its start + ``data_start_s`` (curl's time_starttransfer: the login, PASV
    and data connection come first); a flow that got no byte (no time, or 0, as curl writes
    it) counts at its end; the item's data start is the median flow's: half of its flows carry
    data by then. iperf3: its ``.json.t0`` + the start of the first reporting interval in which
    any stream sent bytes (a lower bound by the control exchange before iperf3's test timer,
    a few RTTs: iperf3 -J times its intervals from the test's start). ``nth``: receiver ->
    FTP items seen so far (updated). Raises NotMeasured naming the file without the data."""
    if it.kind == "iperf3":
        f = trial_dir / it.src / f"iperf3-{it.id}.json"
        try:
            t0 = float(raw_text(f.with_name(f.name + ".t0")).split()[0])
        except (IndexError, ValueError):
            raise NotMeasured(f"{it.src}/{f.name}.t0 has no start time") from None
        try:
            iv, _ = parse_iperf3(raw_text(f))
        except ValueError as exc:
            raise NotMeasured(f"{it.src}/{f.name}: {exc}") from None
        per = iv.groupby("t_s", sort=True)["bits_per_second"].sum()
        ends = per.index.to_numpy()
        sent = [i for i, b in enumerate(per.to_numpy()) if b > 0]
        if not sent:
            raise NotMeasured(f"{it.src}/{f.name} has no interval with bytes")
        return t0 + (float(ends[sent[0] - 1]) if sent[0] else 0.0), "first interval with bytes"
    f = _flows_file(trial_dir, it, nth)
    fl = parse_flows(raw_text(f))
    if fl.empty or fl["start_epoch_s"].isna().all():
        raise NotMeasured(f"{it.dst}/{f.name} has no flow start")
    if fl["data_start_s"].isna().all():
        raise NotMeasured(f"{it.dst}/{f.name} has no data_start_s (recorded before flows.csv had it)")
    got = (fl["data_start_s"] > 0) & (fl["bytes"] > 0)
    at = (fl["start_epoch_s"] + fl["data_start_s"]).where(got, fl["end_epoch_s"])
    return float(at.median()), f"median of {len(fl)} flows' first byte ({int((~got).sum())} without data)"


def data_start_lag(spec, record, trial_dir, start, duration, time_scale, **_) -> tuple[float, str]:
    """``data_start_lag``: per iperf3 or FTP item, how late its data started
    (:func:`_item_data_starts`) behind its scheduled start, as a share of the phase it opens
    (the phase whose start is the item's; else the item's own length); the largest."""
    windows = {round(lo, 3): (name, hi - lo) for name, lo, hi in phase_windows(spec, record, duration, time_scale)}
    per, nth = {}, {}
    for it in trial_items(spec, record, trial_dir, STARTED_KINDS):
        at = it.start_s * time_scale
        data, how = _item_data_starts(spec, record, trial_dir, it, nth)
        name, length = windows.get(round(at, 3), (it.id, it.duration_s * time_scale))
        lag = data - (start + at)
        per[it.id] = (min(max(lag, 0.0) / length, 1.0), lag, name, length, how, at)  # 1: the whole phase lost
    worst = max(per, key=lambda i: per[i][0])
    share, lag, name, length, how, _ = per[worst]
    # per phase (or item) opened: the latest data start of the items opening it, for the
    # report's table of effective phase windows
    opened: dict[str, dict] = {}
    for _, lag_i, name_i, length_i, _, at in per.values():
        o = opened.setdefault(name_i, {"phase": name_i, "start_s": round(at, 3), "length_s": round(length_i, 3),
                                       "data_lag_s": lag_i})
        o["data_lag_s"] = round(max(o["data_lag_s"], lag_i), 3)
    return share, (f"worst {worst}: data {lag * 1000:.0f} ms after its start, {share:.1%} of {name} "
                   f"({length:g} s; {how}); " + ", ".join(f"{i} {v[1] * 1000:+.0f} ms" for i, v in per.items())), \
        sorted(opened.values(), key=lambda o: o["start_s"])
