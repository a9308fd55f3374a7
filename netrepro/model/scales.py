"""Time and rate scales: the shortest time scale a claim keeps its meaning at, the note a
run at a shorter one carries, and the rate scale k that fits an experiment to what a site
forwards (:func:`choose_rate_scale`, :func:`scale_rates`).
"""

from __future__ import annotations

import math

from netrepro.model.claims import Claim
from netrepro.model.experiment import Model


def claim_time_scale_min(m: Model, claim: Claim) -> float:
    """The shortest TIME_SCALE at which ``claim`` keeps its meaning: its own
    ``time_scale_min``, else the file's ``time_scale.min``, else 0 (any)."""
    own = claim.time_scale_min
    return float((own if own is not None else m.time_scale.get("min", 0)) or 0)


def time_scale_note(m: Model, time_scale: float) -> str | None:
    """One line saying which claims a run at ``time_scale`` reports not applicable
    (:func:`claim_time_scale_min` above it), or None when every claim applies."""
    short = [c.id for c in m.claims if claim_time_scale_min(m, c) > time_scale]
    if not short:
        return None
    lo = max(claim_time_scale_min(m, c) for c in m.claims)
    every = "every claim" if len(short) == len(m.claims) else "claims " + ", ".join(short)
    return (f"TIME_SCALE={time_scale:g} is shorter than {m.path}'s time_scale.min ({lo:g}): {every} will be "
            f"reported not applicable (phases too short for the claims' meaning); the verdict can only be inconclusive"
            if len(short) == len(m.claims) else
            f"TIME_SCALE={time_scale:g} is shorter than the time_scale_min of {every} in {m.path}: they will be "
            f"reported not applicable")


#: The buffer sysctls whose largest value is a byte size (tcp(7): min, default, max).
BUFFER_SYSCTLS = ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")


#: A site runs an experiment whose rates exceed what it forwards at a scale k chosen so that
#: its highest rate is at most this share of the measured forwarding capacity (one iperf3
#: flow through a router, netrepro.sites.local.capacity, which saturates the emulated CPUs). A
#: twentieth, from the nodes' CPU measured in the micro-VM (2 vCPUs under QEMU TCG, capacity
#: 415-519 Mbit/s): 20 Mbit/s kept pie-lab's nodes 43-46 % busy and codel-lab's (two flows,
#: three switches) 51-61 %, while 50 Mbit/s (a tenth, as first chosen) left pacing-lab's
#: 75 % busy, above the 60 % its health checks allow. Checked again by every run's
#: nodes_cpu_busy.
RATE_SCALE_CAPACITY_SHARE = 0.05


#: The smallest rate scale k netrepro runs (rate_scale.min, a claim's rate_scale_min, RATE_SCALE,
#: the ladder of :func:`choose_rate_scale`): rates and byte sizes a thousandth of the file's, a
#: 10 Gbit/s link at 10 Mbit/s. Far below it a rate rounds to 0 bit/s (k = 1e-300 made the
#: simulator divide by it: SIGFPE mid-run); the experiments' own minimums are 0.02-0.05.
RATE_SCALE_FLOOR = 0.001


def highest_rate_mbit(m: Model) -> float:
    """The highest rate any trial's stacks or traffic ask for (Mbit/s; 0 when none)."""
    rates = [float(v) for t in m.trials for st in t.qdiscs.values() for layer in st
             for k, v in layer.params.items() if k.endswith("_mbit")]
    rates += [float(it.pacing_rate_mbit) for t in m.trials for it in t.traffic if it.pacing_rate_mbit]
    return max(rates, default=0.0)


def rate_scale_option(m: Model, option: str | float | None, name: str = "RATE_SCALE") -> float | None:
    """The rate scale asked for (``option``: RATE_SCALE from the environment, or the command
    line's --rate-scale; ``name`` says which, for the messages) checked against the experiment
    before anything is built: None when unset or empty, else the scale k.

    Raises:
        ValueError: one line naming ``name`` and, when the file forbids it, the file and
            its field: ``option`` is not a number in [:data:`RATE_SCALE_FLOOR`, 1]; or it asks for k < 1 while the
            file's ``rate_scale.allowed`` is not true; or k is below the file's
            ``rate_scale.min``.
    """
    if option is None or (isinstance(option, str) and not option.strip()):
        return None
    try:
        k = float(option)
    except (TypeError, ValueError):
        k = math.nan
    if not (math.isfinite(k) and RATE_SCALE_FLOOR <= k <= 1):
        raise ValueError(f"{name}: expected a number in [{RATE_SCALE_FLOOR:g}, 1], got {option!r}")
    if k == 1:
        return k
    rs = m.data["rate_scale"]
    if not rs.get("allowed"):
        fix = "unset RATE_SCALE or set it to 1" if name == "RATE_SCALE" else f"leave out {name} or give it 1"
        raise ValueError(f"{name}={option}: {m.path}: rate_scale.allowed: the file does not allow scaling its "
                         f"rates (expected rate_scale.allowed: true); {fix}")
    lo = float(rs.get("min", 0) or 0)
    if k < lo:
        raise ValueError(f"{name}={option}: {m.path}: rate_scale.min: {k:g} is below the experiment's "
                         f"rate_scale.min {lo:g}, where its claims lose their meaning")
    return k


def choose_rate_scale(m: Model, capacity_mbit: float | None, option: str | float | None = None,
                      ceiling_mbit: float | None = None, name: str = "RATE_SCALE") -> tuple[float, str]:
    """(k, why): the rate scale to run ``m`` at. ``option`` (RATE_SCALE, or --rate-scale as
    ``name`` says; ``why`` names it) wins; else, when the
    site has a rate ceiling (``ceiling_mbit``: the fastest link a simulator runs in reasonable
    time, netrepro.sites.ns3.site) and the experiment allows scaling, the largest k of the ladder
    below that brings the highest rate to the ceiling (no capacity share: a simulation's
    results do not depend on the machine's speed, only its wall time does); else, when
    the experiment allows scaling (``rate_scale.allowed``) and the site measured its
    forwarding capacity, the largest of 1, 0.5, 0.2, 0.1, 0.05, ... that brings the highest
    rate within :data:`RATE_SCALE_CAPACITY_SHARE` of it, or the file's
    ``rate_scale.capacity_share`` (a value from this fixed ladder, so that machines of one
    kind pick the same k); else 1.

    When the capacity asks for a k below the file's ``rate_scale.min``, the min is used and
    ``why`` says so: running where the claims keep their meaning, and letting the health
    checks judge the site, tells a user more than refusing (a machine of this kind measured
    387-525 Mbit/s from one run to the next).

    Raises:
        ValueError: ``option`` is refused by :func:`rate_scale_option` (not a number in
            (0, 1], scaling not allowed by the file, below ``rate_scale.min``).
    """
    rs = m.data["rate_scale"]
    lo = max(float(rs.get("min", 0) or 0), RATE_SCALE_FLOOR)
    named = (f"rate_scale.min {lo:g}" if float(rs.get("min", 0) or 0) >= RATE_SCALE_FLOOR
             else f"netrepro's smallest rate scale {lo:g} (RATE_SCALE_FLOOR)")
    k_option = rate_scale_option(m, option, name)
    if k_option is not None:
        return k_option, f"{name}={k_option:g}"
    top = highest_rate_mbit(m)
    ladder = [round(m_ * 10.0 ** -e, 12) for e in range(0, 7) for m_ in (1, 0.5, 0.2)]
    if ceiling_mbit and rs.get("allowed") and top > ceiling_mbit:
        k = next((x for x in ladder if top * x <= ceiling_mbit * (1 + 1e-9)), ladder[-1])
        if k < lo:
            return lo, (f"{named}: this site's rate ceiling {ceiling_mbit:g} Mbit/s would need {k:g}, "
                        f"below it; running at {lo:g}, {top * lo:g} Mbit/s at most")
        return k, (f"highest rate {top:g} Mbit/s x {k:g} = {top * k:g} Mbit/s, within this site's rate ceiling "
                   f"{ceiling_mbit:g} Mbit/s")
    share = float(rs.get("capacity_share") or RATE_SCALE_CAPACITY_SHARE)
    if not rs.get("allowed") or not capacity_mbit or top <= capacity_mbit * share:
        return 1.0, ("rates as written" if rs.get("allowed") or not top
                     else "rates as written (the experiment does not allow scaling)")
    k = 1.0
    for k in ladder:
        if top * k <= capacity_mbit * share * (1 + 1e-9):
            break
    if k < lo:
        return lo, (f"{named}: this site forwards {capacity_mbit:.0f} Mbit/s, and {share:.3g} of it would "
                    f"need {k:g}, below it, where the claims lose their meaning; running at {lo:g}, "
                    f"{top * lo:g} Mbit/s at most: the health checks (nodes_cpu_busy) judge whether the site kept up")
    return k, (f"highest rate {top:g} Mbit/s x {k:g} = {top * k:g} Mbit/s, within {share:.3g} of "
               f"this site's forwarding capacity {capacity_mbit:.0f} Mbit/s")


def scale_rates(m: Model, k: float) -> Model:
    """The model with every rate and byte size multiplied by ``k`` (delays, AQM time
    constants, packet counts and durations kept): in each stack, every ``*_mbit``,
    ``*_kbit`` and ``*_bytes`` parameter; each iperf3 item's ``fq_rate_mbit``; and the
    largest value of :data:`BUFFER_SYSCTLS` (not below their default, the middle value).
    A byte size of a stack never goes below one full-size frame (MTU + 14 B of Ethernet
    header): a TBF whose burst is smaller than a frame passes no frame at all (tc-tbf(8):
    burst must be at least the MTU), so Lab 19's 50000 B burst at k = 0.02 is 1514 B, not
    1000 B. ``k`` = 1 returns ``m`` itself."""
    if k == 1:
        return m
    import copy
    d = copy.deepcopy(m.data)
    frame = int(d["mtu_bytes"]) + 14

    def layer(lay: dict) -> dict:
        out = {}
        for key, v in lay.items():
            if key.endswith(("_mbit", "_kbit")) and isinstance(v, (int, float)) and not isinstance(v, bool):
                out[key] = round(v * k, 6)
            elif key.endswith("_bytes") and isinstance(v, (int, float)) and not isinstance(v, bool):
                out[key] = max(min(int(v), frame), int(round(v * k)))
            else:
                out[key] = v
        return out

    for t in d["trials"]:
        t["qdiscs"] = {p: [layer(x) for x in st] for p, st in t["qdiscs"].items()}
        for it in t["traffic"]:
            if it.get("fq_rate_mbit"):
                it["fq_rate_mbit"] = round(it["fq_rate_mbit"] * k, 6)
        for node, kv in t["sysctls"].items():
            for key in BUFFER_SYSCTLS:
                if key in kv:
                    parts = kv[key].split()
                    if len(parts) == 3 and all(x.isdigit() for x in parts):
                        parts[2] = str(max(int(parts[1]), int(round(int(parts[2]) * k))))
                        kv[key] = " ".join(parts)
    d["rate_scale_applied"] = k
    return Model(d, m.path)
