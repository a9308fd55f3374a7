"""How sure a claim's values are: 95 % intervals, claims judged with them, and how many
repetitions would likely decide a claim that its interval leaves undecided.

A value a claim reads comes with an :class:`Estimate`: the value, a 95 % interval and the
standard deviation of one trial's value, from one of two sources:

- **within one trial, by batch means** (:func:`sectioning`): the trial's window (the whole
  trial or a phase) is cut into B contiguous batches that hold as many samples each of the
  trial's most sparsely sampled series (an iperf3 item's 1-s reports), the statistic is
  computed on each batch as on the window, and the interval is the window's value +-
  t(0.975, B-1) s_B / sqrt(B), s_B the batches' sample standard deviation. This is
  *sectioning* (S. Asmussen, P. W. Glynn, *Stochastic Simulation*, Springer 2007, sec.
  III.5a; batch means: A. M. Law, W. D. Kelton, *Simulation Modeling and Analysis*, 3rd ed.,
  sec. 9.5.3), which holds for a smooth function of means (a ratio, Jain's index) as for a
  mean. A trial's samples are a time series whose neighbours depend on each other (one
  second's throughput follows the previous second's congestion window), so an i.i.d.
  bootstrap over the samples would give too narrow an interval; batches much longer than
  that dependence are close to independent. B is at most :data:`MAX_BATCHES` (Schmeiser's 10
  to 30 batches: B. Schmeiser, "Batch size effects in the analysis of simulation output",
  Operations Research 30(3), 1982) and no more than the window holds samples of that series;
  a window with fewer than :data:`MIN_BATCHES` gets no interval.
  Statistics that are extremes (a maximum, a minimum), counts over the window (retransmits,
  drops, samples, classes in use), a dispersion (a coefficient of variation) or a ping
  item's received fraction have no within-trial interval: a batch's maximum or count is not
  a section of the window's (:data:`SECTIONED`).
- **across repetitions, by Student's t** (:func:`t_interval`): the mean of the n
  repetitions' values +- t(0.975, n-1) s / sqrt(n) (what ``repetitions.csv`` records).

A claim is judged on intervals (:func:`compare`): it *holds* when every interval it reads is
on the right side of its bound, *fails* when one is wholly on the wrong side, and is
*undecided* when an interval straddles the bound and none is wholly wrong. A value without an
interval is judged as a point. Differences and ratios of two values take the interval
arithmetic of their two intervals (:func:`difference`, :func:`ratio`): the result covers the
quantity with at least 90 % probability whatever the dependence of the two (Bonferroni's
inequality), so it never claims more certainty than the two values give.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from netrepro.core import tc
from netrepro.model import TRIAL_SUBJECT, path_ports

#: Two-sided level of every interval.
LEVEL = 0.95
#: Most batches a window is cut into (Schmeiser 1982: 10 to 30 batches are enough; fewer,
#: longer batches are closer to independent).
MAX_BATCHES = 10
#: Fewest batches that give an interval: with 4 degrees of freedom t(0.975) is 2.78; with
#: fewer the interval is too wide to decide anything (t(0.975, 2) = 4.30).
MIN_BATCHES = 5
#: The statistics (summary.csv, :data:`netrepro.model.STATISTICS`) that get a within-trial
#: interval by batch means: means, medians and quantiles of samples, throughputs, shares and
#: utilizations (ratios of sums) and Jain's index (a smooth function of the flows' means).
SECTIONED = frozenset({
    "throughput_mbit", "rtt_mean_ms", "cwnd_mean_bytes", "share", "stream_jain_index",
    "rtt_median_ms", "rtt_p95_ms", "queue_delay_median_ms", "queue_delay_mean_ms", "queue_delay_p95_ms",
    "backlog_mean_bytes", "backlog_mean_ms", "sent_utilization", "utilization",
    "total_throughput_mbit", "jain_index"})
#: The range of the quantity each sectioned statistic estimates, (low, high): every one is a
#: throughput, a delay, a window, a backlog or a utilization, none below 0; shares, Jain's
#: indices (R. Jain, D. Chiu and W. Hawe, DEC-TR-301, 1984: 1/n to 1) and the sent
#: utilization (clipped to 0..1 where it is computed) none above 1. A queueing delay measured
#: as RTT - base RTT can read below 0, but the delay it estimates cannot. Intervals are cut to
#: the range (:func:`within_range`): a symmetric interval around a median of 0 whose batches
#: were sometimes above it (RED's queue in a phase that empties) otherwise reaches -10 ms and
#: decides a comparison by delays that cannot be.
RANGE: dict[str, tuple[float, float]] = {
    **{s: (0.0, math.inf) for s in SECTIONED},
    **{s: (0.0, 1.0) for s in ("share", "jain_index", "stream_jain_index", "sent_utilization")},
}
#: Most repetitions :func:`repetitions_to_decide` names; beyond it the value sits on its bound.
MAX_REPETITIONS = 100


def t_quantile(df: int) -> float:
    """t(0.975, df): the two-sided 95 % quantile of Student's t (scipy.stats.t.ppf)."""
    from scipy import stats
    return float(stats.t.ppf(0.5 + LEVEL / 2, df))


@dataclass(frozen=True)
class Estimate:
    """A value with its 95 % interval ``[low, high]`` (equal to the value when it has none),
    ``sd``: the standard deviation of one trial's value (NaN when unknown), ``n`` the batches
    or repetitions behind it (0: none) and ``method`` how the interval was made ("" for a
    point)."""

    value: float
    low: float
    high: float
    sd: float = math.nan
    n: int = 0
    method: str = ""

    @classmethod
    def point(cls, value: float) -> "Estimate":
        """A value without an interval."""
        return cls(value, value, value)

    @property
    def has_interval(self) -> bool:
        return self.n > 0 and math.isfinite(self.low) and math.isfinite(self.high)

    def text(self) -> str:
        """``0.79 (95 % 0.74 to 0.84, batch means of 5)``, or the value alone."""
        v = f"{self.value:.4g}" if math.isfinite(self.value) else "missing"
        return v + (f" (95 % {self.low:.4g} to {self.high:.4g}, {self.method})" if self.has_interval else "")


def within_range(e: Estimate, statistic: str, ceiling: float = math.inf) -> Estimate:
    """``e`` with its interval cut to the range of ``statistic``'s quantity (:data:`RANGE`;
    unchanged for a statistic not there), and below ``ceiling``, the most the topology lets
    the quantity be (:func:`rate_ceilings`). An end is cut only where the value itself lies
    within the range, so that an interval never leaves out its own value; ``sd`` is kept."""
    lo, hi = RANGE.get(statistic, (-math.inf, math.inf))
    hi = min(hi, ceiling)
    if not e.has_interval or not lo <= e.value <= hi:
        return e
    return replace(e, low=max(e.low, lo), high=min(e.high, hi))


#: The statistics that are a rate through the trial's network (:data:`netrepro.model.STATISTICS`):
#: an iperf3 item's throughput (its subject the item) and the trial's total over its iperf3
#: items (subject ``all``), in Mbit/s of goodput; and a port's utilization, that total over
#: the port's shaping rate.
ITEM_RATE, TOTAL_RATE, UTILIZATION = "throughput_mbit", "total_throughput_mbit", "utilization"


def rate_ceilings(model) -> dict[tuple[str, str, str], float]:
    """(trial, subject, statistic) -> the most the topology lets a rate statistic's quantity be
    (:data:`ITEM_RATE`, :data:`TOTAL_RATE`, :data:`UTILIZATION`), for ``model`` at the run's rate scale
    (:func:`netrepro.model.scale_rates`: its shapers' rates as run).

    The source is the model's topology: a port's rate is the lowest shaping rate of its stack
    in the trial (:func:`netrepro.core.tc.shaping_rate_mbit`: htb's rate, whose ceil is the
    same, or tbf's), and an item's packets leave by the ports of its path
    (:func:`netrepro.model.path_ports`). An iperf3 item's throughput (application goodput,
    Mbit/s) is at most the least rate on its path (a shaper counts whole frames); the trial's
    total throughput at most the least rate of a port that every item's path crosses, and at
    most the sum of the items' ceilings; a port's ``utilization`` (that total over the port's
    rate) at most the total's ceiling over the port's rate. A statistic whose path has no
    shaper, or cannot be traced, has no entry (no ceiling)."""
    out: dict[tuple[str, str, str], float] = {}
    for trial in model.trials:
        paths = {}
        for it in trial.items("iperf3"):
            try:
                paths[it.id] = path_ports(model, it.src, it.dst)
            except ValueError:
                paths[it.id] = []
        rate = {p: r for ps in paths.values() for p in ps if (r := tc.shaping_rate_mbit(trial.stack(p)))}
        item = {i: min((rate[p] for p in ps if p in rate), default=math.inf) for i, ps in paths.items()}
        shared = set.intersection(*(set(ps) for ps in paths.values())) if paths else set()
        total = min([sum(item.values())] + [rate[p] for p in shared if p in rate]) if paths else math.inf
        out.update({(trial.id, i, ITEM_RATE): c for i, c in item.items() if math.isfinite(c)})
        if math.isfinite(total):
            out[(trial.id, TRIAL_SUBJECT, TOTAL_RATE)] = total
            for c in model.collectors:
                port_rate = tc.shaping_rate_mbit(trial.stack(c.at))
                if port_rate:
                    out[(trial.id, c.at, UTILIZATION)] = total / port_rate
    return out


def rows_within_ceilings(rows: list[dict], ceilings: dict[tuple[str, str, str], float]) -> list[dict]:
    """Interval rows (intervals.csv's: ``trial``, ``subject``, ``statistic``, ``value``,
    ``low``, ``high``, ``sd``, ``batches``) with each interval cut below its statistic's
    ceiling (``ceilings``: :func:`rate_ceilings`) as :func:`within_range` cuts it; a row
    without a ceiling is kept as it is."""
    out = []
    for r in rows:
        top = ceilings.get((r["trial"], r["subject"], r["statistic"]))
        if top is not None:
            e = within_range(Estimate(r["value"], r["low"], r["high"], r["sd"], int(r["batches"])), r["statistic"], top)
            r = {**r, "low": e.low, "high": e.high}
        out.append(r)
    return out


def batch_count(samples: int) -> int:
    """How many batches a window holding ``samples`` samples of its most sparsely sampled
    series is cut into: at most :data:`MAX_BATCHES`, and no more than those samples (so that
    each batch has a sample of every series); 0 when that is fewer than :data:`MIN_BATCHES`."""
    b = min(MAX_BATCHES, int(samples))
    return b if b >= MIN_BATCHES else 0


def sectioning(value: float, batches) -> Estimate:
    """The sectioning interval of a window's ``value`` from its batches' values
    (module docstring): value +- t(0.975, B-1) s_B / sqrt(B). NaN batches are left out; a
    point (no interval) when fewer than :data:`MIN_BATCHES` are left or ``value`` is not
    finite. ``sd`` is s_B / sqrt(B), the standard error of the window's value."""
    b = np.asarray([x for x in batches if x is not None and math.isfinite(x)], dtype=float)
    if b.size < MIN_BATCHES or not math.isfinite(value):
        return Estimate.point(value)
    se = float(b.std(ddof=1) / math.sqrt(b.size))
    half = t_quantile(b.size - 1) * se
    return Estimate(float(value), float(value) - half, float(value) + half, se, int(b.size),
                    f"batch means of {b.size}")


def t_interval(values) -> Estimate:
    """Student's t interval of the mean of ``values`` (repetitions; NaN left out): mean +-
    t(0.975, n-1) s / sqrt(n); ``sd`` is s (one repetition's). A point for one value, NaN for
    none."""
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=float)
    if v.size == 0:
        return Estimate.point(math.nan)
    mean = float(v.mean())
    if v.size < 2:
        return Estimate.point(mean)
    sd = float(v.std(ddof=1))
    half = t_quantile(v.size - 1) * sd / math.sqrt(v.size)
    return Estimate(mean, mean - half, mean + half, sd, int(v.size), f"t over {v.size} repetitions")


def difference(a: Estimate, b: Estimate, absolute: bool = False) -> Estimate:
    """a - b (|a - b| with ``absolute``) with the interval arithmetic of the two intervals
    ([a.low - b.high, a.high - b.low]; its absolute value's is from 0 when it holds 0).
    ``sd`` is sqrt(sd_a^2 + sd_b^2), the two taken as independent (for
    :func:`repetitions_to_decide` only)."""
    value = a.value - b.value
    lo, hi = a.low - b.high, a.high - b.low
    if absolute:
        value = abs(value)
        lo, hi = (0.0 if lo <= 0 <= hi else min(abs(lo), abs(hi))), max(abs(lo), abs(hi))
    return Estimate(value, lo, hi, math.hypot(a.sd, b.sd), min(a.n, b.n) if a.n and b.n else max(a.n, b.n),
                    _methods(a, b))


def ratio(a: Estimate, b: Estimate) -> Estimate:
    """a / b with the interval arithmetic of the two intervals (the least and greatest of
    the endpoints' quotients; unbounded when b's interval holds 0). ``sd`` by the delta
    method, the two taken as independent: |a/b| sqrt((sd_a/a)^2 + (sd_b/b)^2). NaN value when
    b is 0."""
    if b.value == 0 or not (math.isfinite(a.value) and math.isfinite(b.value)):
        return Estimate.point(math.nan)
    value = a.value / b.value
    if b.low <= 0 <= b.high:
        lo, hi = -math.inf, math.inf
    else:
        q = [x / y for x in (a.low, a.high) for y in (b.low, b.high)]
        lo, hi = min(q), max(q)
    sd = abs(value) * math.hypot(a.sd / a.value if a.value else math.nan, b.sd / b.value)
    return Estimate(value, lo, hi, sd, min(a.n, b.n) if a.n and b.n else max(a.n, b.n), _methods(a, b))


def _methods(a: Estimate, b: Estimate) -> str:
    return " and ".join(dict.fromkeys(m for m in (a.method, b.method) if m))


def compare(e: Estimate, least: float, most: float) -> str:
    """Whether ``e`` is within [least, most]: ``holds`` when its whole interval is, ``fails``
    when its whole interval is outside, ``undecided`` when it straddles an end."""
    if e.low >= least and e.high <= most:
        return "holds"
    if e.high < least or e.low > most:
        return "fails"
    return "undecided"


def at_least(e: Estimate, bound: float) -> str:
    """:func:`compare` against [bound, inf)."""
    return compare(e, bound, math.inf)


def at_most(e: Estimate, bound: float) -> str:
    """:func:`compare` against (-inf, bound]."""
    return compare(e, -math.inf, bound)


def combine(outcomes) -> str:
    """Several outcomes that must all hold: ``fails`` when one fails, ``holds`` when all hold,
    else ``undecided``."""
    outcomes = list(outcomes)
    if "fails" in outcomes:
        return "fails"
    return "holds" if all(o == "holds" for o in outcomes) else "undecided"


def repetitions_to_decide(e: Estimate, least: float, most: float) -> int | None:
    """How many repetitions would likely decide a value that straddles [least, most]: the
    least n >= 2 with t(0.975, n-1) sd / sqrt(n) < the distance from the value to the
    nearer end it straddles, ``sd`` the standard deviation of one trial's value (a sample
    size for a t interval of given half-width: D. C. Montgomery, *Design and Analysis of
    Experiments*, sec. 2.4). From one trial's batches it assumes trials vary no more than
    their batches say, so it is a least number. None when ``sd`` is unknown, when the value
    sits on the bound, or when more than :data:`MAX_REPETITIONS` would be needed."""
    if not (math.isfinite(e.sd) and e.sd > 0 and math.isfinite(e.value)):
        return None
    ends = [x for x in (least, most) if math.isfinite(x) and e.low <= x <= e.high]
    if not ends:
        return None
    gap = min(abs(e.value - x) for x in ends)
    if gap == 0:
        return None
    for n in range(2, MAX_REPETITIONS + 1):
        if t_quantile(n - 1) * e.sd / math.sqrt(n) < gap:
            return n
    return None


__all__ = ["LEVEL", "MAX_BATCHES", "MIN_BATCHES", "SECTIONED", "RANGE", "MAX_REPETITIONS", "Estimate", "within_range",
           "ITEM_RATE", "TOTAL_RATE", "UTILIZATION", "rate_ceilings", "rows_within_ceilings",
           "t_quantile",
           "batch_count", "sectioning", "t_interval", "difference", "ratio", "compare", "at_least", "at_most",
           "combine", "repetitions_to_decide"]
