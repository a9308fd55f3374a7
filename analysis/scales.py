"""The claims against the rate scale and the time scale, for ``netrepro compare``
(:mod:`analysis.compare`) of runs made at two or more rate scales, or time scales, or both.

A run's scales (:data:`SCALES`, :func:`scale_of`): its rate scale k (run.json ``rate_scale:
{k, why}``; :func:`rate_scale_of`) multiplied every rate and byte size of the experiment by k;
its time scale TS (run.json ``time_scale``; :func:`time_scale_of`) every duration (the
schedule, the phases, the traffic's start and length). What a claim judges need not scale
(a utilization, a ratio of two flows) or may (a throughput in Mbit/s, a count of
retransmits), and a simulation and a testbed may part ways at some scale. For each scale the
runs differ in, the comparison then writes (``<scale>``: ``rate-scale`` or ``time-scale``):

- ``<scale>.csv`` (:func:`scale_table`, columns :func:`columns`): per claim, per part of it
  (its check; an ``all_of``'s checks ``1``, ``2``, ...; its ``when`` condition), per value
  its selection reads (trial, subject, phase) and per run: the run's site and scale, the
  claim's status in the run, and over the run's repetitions the n, mean and 95 % Student-t
  interval (:func:`analysis.repetitions.across`) of the quantity the check judges: a
  ``bound``'s or a ``rise_and_fall``'s statistic itself, a ``ratio``'s or a ``difference``'s
  value of each pair of its ``higher`` and ``lower`` selections
  (:func:`analysis.claims.pair_value`, computed per repetition, as each repetition's verdict
  judged it), with the check's limits (:meth:`netrepro.model.Check.limits`);
- ``figures/<scale>.png|pdf`` (:func:`draw_scale`): a panel per claim, part and value: x the
  scale (log), y the mean with its interval, a series per site, the limits as horizontal
  lines, and the lowest scale at which the claim keeps its meaning (:func:`scale_mins`: the
  claim's ``rate_scale_min`` / ``time_scale_min``, else the experiment's ``rate_scale.min`` /
  ``time_scale.min``) as a dotted vertical line;
- the section "Claims against the rate scale" / "Claims against the time scale" of report.md
  (:func:`report_section`).

One implementation serves both scales: each function takes ``scale`` (a key of
:data:`SCALES`, default ``rate_scale``). Nothing here names an experiment: the claims come from the experiment file.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Mapping, NamedTuple, Sequence

import numpy as np
import pandas as pd

from netrepro.core.errors import RunFolderError
from netrepro.runfolder.record import RunRecord
from analysis.claims import pair_value, select, selection_keys
from analysis.repetitions import across
from netrepro.model import Claim, quantity_name


class Scale(NamedTuple):
    """What the comparison reads and says of one scale of the runs."""

    #: run.json's field, the column of compare.csv, claims.csv and the scale's csv
    key: str
    #: the file name of its csv and figure, without the suffix
    file: str
    #: in words, in the report's section title and the figure
    words: str
    #: its symbol in run labels, tables and axes
    symbol: str
    #: what it multiplies: ``every duration`` (of the experiment, times the scale)
    meaning: str
    #: the adjective for the lowest value at which a claim keeps its meaning
    lowest: str


#: The scales a comparison sets the claims against, in the order the report gives them.
SCALES: dict[str, Scale] = {
    "rate_scale": Scale("rate_scale", "rate-scale", "rate scale", "k",
                        "every rate and byte size", "smallest"),
    "time_scale": Scale("time_scale", "time-scale", "time scale", "TS",
                        "every duration", "shortest"),
}


def _scale(scale: str) -> Scale:
    """:data:`SCALES`'s entry of ``scale``; ValueError (a caller's mistake, not the input's)
    for another name."""
    try:
        return SCALES[scale]
    except KeyError:
        raise ValueError(f"scale: {scale!r}: expected one of {', '.join(SCALES)}") from None


def columns(scale: str = "rate_scale") -> list[str]:
    """The columns of ``<scale>.csv``, in order (:func:`scale_table`): ``claim, part, check,
    quantity, statistic, trial, subject, phase, site, run, <scale>, status, n, mean,
    ci95_low, ci95_high, threshold_min, threshold_max``."""
    return ["claim", "part", "check", "quantity", "statistic", "trial", "subject", "phase", "site", "run",
            _scale(scale).key, "status", "n", "mean", "ci95_low", "ci95_high", "threshold_min", "threshold_max"]


#: The columns of rate-scale.csv, in order (:func:`rate_scale_table`; :func:`columns`).
COLUMNS = columns("rate_scale")
#: What identifies a panel of the figure: one claim's part and one value it reads.
PANEL_KEYS = ["claim", "part", "check", "quantity", "statistic", "trial", "subject", "phase"]

def rate_scale_of(run: RunRecord) -> float:
    """The rate scale k of a run (``run``: its run.json, read and checked:
    :class:`netrepro.runfolder.record.RunRecord`): ``rate_scale.k``; 1 when ``rate_scale`` is
    missing or null (runs made before rate scales) or has no ``k``."""
    return run.rate_scale_k


def time_scale_of(run: RunRecord, where: str | Path = "run.json") -> float:
    """The time scale TS of a run (``run``: its run.json, read and checked, a ``time_scale``
    that is not a number > 0 refused there): the factor of every duration (the analysis
    requires it: :func:`netrepro.runfolder.reading.model_run_records`).

    Raises:
        RunFolderError: naming ``where`` and ``time_scale``: missing.
    """
    if run.time_scale is None:
        raise RunFolderError(where, "time_scale: missing; expected a number > 0 (the factor of every duration)")
    return run.time_scale


def scale_of(run: RunRecord, scale: str = "rate_scale", where: str | Path = "run.json") -> float:
    """A run's ``scale`` (a key of :data:`SCALES`) from its run.json ``run``:
    :func:`rate_scale_of` or :func:`time_scale_of`.

    Raises:
        RunFolderError: as those, naming ``where`` and the field.
    """
    return rate_scale_of(run) if _scale(scale).key == "rate_scale" else time_scale_of(run, where)


class ScaleMin(NamedTuple):
    """The lowest ``scale`` at which a claim keeps its meaning (:func:`scale_mins`)."""

    #: the scale (k or TS)
    value: float
    #: where it is said: ``the claim's time_scale_min`` or ``the experiment's time_scale.min``
    source: str
    #: the experiment's ``<scale>.note`` when the value is the experiment's ("" otherwise)
    note: str


def _positive(value, where: str | Path, field: str, scale: Scale) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise RunFolderError(where, f"{field}: expected a number > 0 (the {scale.lowest} {scale.words} at which the "
                                   f"claims keep their meaning), got {str(value)[:60]!r}")
    return float(value)


def scale_mins(claims: Sequence[Claim], experiment: Mapping | None, scale: str = "rate_scale",
               where: str | Path = "experiment file") -> dict[str, ScaleMin]:
    """Claim id -> the lowest ``scale`` at which the claim keeps its meaning, for the claims
    that have one: the claim's own ``<scale>_min`` (``rate_scale_min``, ``time_scale_min``),
    else the experiment's ``<scale>.min`` (``experiment``: scale name -> the experiment's
    block, :attr:`netrepro.model.Model.time_scale` and ``rate_scale``; its ``<scale>``
    ``{min, note}`` may be missing, null or empty). Below it a run's numbers do not test the claim.

    Raises:
        RunFolderError: naming ``where`` and the field (``claims[i].time_scale_min``,
            ``time_scale.min``, ``time_scale``): not a finite number > 0, or the experiment's
            ``<scale>`` not an object.
    """
    sc = _scale(scale)
    block = (experiment or {}).get(sc.key)
    if block is None:
        block = {}
    if not isinstance(block, dict):
        raise RunFolderError(where, f"{sc.key}: expected an object {{min, note}} (or nothing), got {str(block)[:60]!r}")
    default = None
    if block.get("min") is not None:
        default = ScaleMin(_positive(block["min"], where, f"{sc.key}.min", sc), f"the experiment's {sc.key}.min",
                           str(block.get("note") or ""))
    out = {}
    for i, c in enumerate(claims):
        own = c.scale_min(sc.key)
        if own is not None:
            out[c.id] = ScaleMin(_positive(own, where, f"claims[{i}].{sc.key}_min", sc),
                                    f"the claim's {sc.key}_min", "")
        elif default is not None:
            out[c.id] = default
    return out


def axis_label(quantity: str, statistic: str) -> str:
    """A y-axis label in words for a check's ``quantity`` (``value``, ``ratio``,
    ``difference``, ``absolute difference``) of ``statistic`` (``a vs b`` when a pair's two
    statistics differ), each statistic named in words (:func:`netrepro.model.quantity_name`),
    with its unit: ``Median RTT (ms)``, ``ratio of Median RTT, higher / lower (no unit)``."""
    parts = statistic.split(" vs ")
    words = " vs ".join(quantity_name(None, p)[0] for p in parts)
    unit = quantity_name(None, parts[0])[1]
    if quantity == "ratio":
        return f"ratio of {words}, higher / lower (no unit)"
    if quantity in ("difference", "absolute difference"):
        sign = "|higher - lower|" if quantity == "absolute difference" else "higher - lower"
        return f"{quantity} of {words}, {sign}" + (f" ({unit})" if unit else " (no unit)")
    return f"{words} ({unit})" if unit else words


def _joined(a: str, b: str) -> str:
    return a if a == b else f"{a} vs {b}"


def claim_values(summary: pd.DataFrame, claim: Claim, trial_ids: list[str],
                 computed: dict[str, dict[str, list[str]]] | None = None) -> pd.DataFrame:
    """What one claim judges, repetition by repetition: a row per part (:attr:`netrepro.model.Claim.parts`),
    value read and repetition with ``part, check, quantity, statistic, trial, subject, phase,
    threshold_min, threshold_max, repetition, value``.

    ``summary``: summary.csv's long rows (``trial, phase, subject, statistic, value``) with a
    ``repetition`` column; ``trial_ids`` and ``computed``: the run's, as
    :func:`analysis.claims.select` takes them. A bound's or a rise_and_fall's value is its
    statistic's (``quantity`` ``value``); a ratio's or difference's the quantity of each pair
    (:func:`analysis.claims.pair_value`; ``trial`` etc. ``<higher's> vs <lower's>`` where
    they differ). A missing value is NaN; a pair check whose selections differ in length
    gives no row (its claim is not evaluable). Limits: the check's
    (:meth:`netrepro.model.Check.limits`), NaN where open or where the kind has none."""
    rows = []
    for rep, s in summary.groupby("repetition", sort=True):
        for part, check in claim.parts:
            kind = check.kind
            lo, hi = check.limits() if kind in ("bound", "ratio", "difference") else (math.nan, math.nan)
            limits = {"threshold_min": lo if math.isfinite(lo) else math.nan,
                      "threshold_max": hi if math.isfinite(hi) else math.nan}
            if kind in ("ratio", "difference"):
                hk = selection_keys(s, check.higher, trial_ids, computed)
                lk = selection_keys(s, check.lower, trial_ids, computed)
                hv = select(s, check.higher, trial_ids, computed)
                lv = select(s, check.lower, trial_ids, computed)
                if len(hv) != len(lv):
                    continue
                quantity = "absolute difference" if kind == "difference" and check.absolute else kind
                stat = _joined(check.higher.statistic, check.lower.statistic)
                for (ht, hs, hp), (lt, ls, lp), (_, vh), (_, vl) in zip(hk, lk, hv, lv):
                    rows.append({"part": part, "check": kind, "quantity": quantity, "statistic": stat,
                                 "trial": _joined(ht, lt), "subject": _joined(hs, ls), "phase": _joined(hp, lp),
                                 **limits, "repetition": rep, "value": pair_value(check, vh, vl)})
            else:
                keys = selection_keys(s, check.select, trial_ids, computed)
                vals = select(s, check.select, trial_ids, computed)
                for (t, subj, ph), (_, v) in zip(keys, vals):
                    rows.append({"part": part, "check": kind, "quantity": "value",
                                 "statistic": check.select.statistic, "trial": t, "subject": subj, "phase": ph,
                                 **limits, "repetition": rep, "value": v})
    return pd.DataFrame(rows, columns=["part", "check", "quantity", "statistic", "trial", "subject", "phase",
                                       "threshold_min", "threshold_max", "repetition", "value"])


def scale_table(runs: list[dict], claims: Sequence[Claim], scale: str = "rate_scale") -> pd.DataFrame:
    """``<scale>.csv`` (:func:`columns`): every claim's quantities (:func:`claim_values`) per
    run, across the run's repetitions (n, mean, ``ci95_low``/``ci95_high``:
    :func:`analysis.repetitions.across`; a single run: n 1, its value, no interval).

    ``runs``: one dict per run with ``run`` (its label), ``site``, ``<scale>`` (its k or TS;
    the other scale's key is not read), ``summary`` (summary.csv's rows, with ``repetition``
    for a repeated run), ``trial_ids``, ``computed`` (:func:`netrepro.model.statistics`) and
    ``status`` (claim id -> the claim's status in the run). Rows in the order of ``claims``,
    their parts and values, then by the scale, site and run. ``scale``: a key of
    :data:`SCALES` (else ValueError)."""
    key = _scale(scale).key
    cols = columns(key)
    frames = []
    for r in runs:
        summary = r["summary"] if "repetition" in r["summary"].columns else r["summary"].assign(repetition=1)
        for c in claims:
            v = claim_values(summary, c, r["trial_ids"], r["computed"])
            if v.empty:
                continue
            st = across(v)
            frames.append(st.assign(claim=c.id, site=r["site"], run=r["run"], **{key: r[key]},
                                    status=r["status"].get(c.id, "not evaluated")))
    if not frames:
        return pd.DataFrame(columns=cols)
    out = pd.concat(frames, ignore_index=True)
    order = {c.id: i for i, c in enumerate(claims)}
    # each claim's parts and values in the order it reads them (the first run's, then any new)
    first = {panel: i for i, panel in enumerate(dict.fromkeys(map(tuple, out[PANEL_KEYS].astype(str).to_numpy())))}
    out = out.assign(_c=out["claim"].map(order), _v=[first[tuple(x)] for x in out[PANEL_KEYS].astype(str).to_numpy()])
    out = out.sort_values(["_c", "_v", key, "site", "run"], kind="stable")
    return out[cols].reset_index(drop=True)


def rate_scale_table(runs: list[dict], claims: Sequence[Claim]) -> pd.DataFrame:
    """rate-scale.csv (:data:`COLUMNS`): :func:`scale_table` against the rate scale k (each
    run's ``rate_scale``)."""
    return scale_table(runs, claims, "rate_scale")


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def mean_ci(r) -> str:
    """``mean [low, high]`` of a row of :func:`scale_table` (just the mean when the
    interval is undefined: one repetition), ``none (missing or undefined)`` when no
    repetition has a value."""
    if not math.isfinite(r["mean"]):
        return "none (missing or undefined)"
    if not (math.isfinite(r["ci95_low"]) and math.isfinite(r["ci95_high"])):
        return _fmt(r["mean"])
    return f"{_fmt(r['mean'])} [{_fmt(r['ci95_low'])}, {_fmt(r['ci95_high'])}]"


def _selection(r) -> str:
    """A value's name in a table: the part, the quantity and what it reads
    (``trial/subject/phase``, a pair's ``(higher vs lower)`` where they differ)."""
    part = f"({r['part']}) " if r["part"] else ""
    what = r["statistic"] if r["quantity"] == "value" else f"{r['quantity']} of {r['statistic']}"
    where = "/".join(f"({x})" if " vs " in str(x) else str(x) for x in (r["trial"], r["subject"], r["phase"]))
    return f"{part}{what} {where}"


def _mins_of(claims: Sequence[Claim], scale: str, mins: dict[str, ScaleMin] | None) -> dict[str, ScaleMin]:
    """``mins`` as given, or (None) the claims' own ``<scale>_min`` (:func:`scale_mins`
    without the experiment's)."""
    return scale_mins(claims, None, scale) if mins is None else mins


def scale_figure(table: pd.DataFrame, claims: Sequence[Claim], scale: str = "rate_scale",
                 mins: dict[str, ScaleMin] | None = None):
    """The figure of :func:`scale_table`'s ``table`` against ``scale`` (a matplotlib Figure
    on the Agg canvas; None for an empty table): a panel per claim, part and value read
    (:data:`PANEL_KEYS`), three panels a row, its title the claim id (and its part) over what
    it reads; x the scale (k or TS) on a log axis (a tick at each scale of the runs, the same
    range in every panel), y the mean of the check's quantity with its 95 % interval as error
    bars, one colour per site (the sites' points drawn slightly apart along x so that their
    bars do not hide each other, joined by a line when a site has one run per scale), a filled
    mark where the claim holds in that run and an open one otherwise, the check's limits
    (min, max) as dashed lines and the lowest scale at which the claim keeps its meaning
    (``mins``: :func:`scale_mins`; None: the claims' own ``<scale>_min``) as a dotted vertical
    line, inside the x range; a panel without any value says so."""
    # plotting libraries only here: the command line imports this module for every command, and
    # matplotlib writes its font cache into HOME when first imported
    import seaborn as sns
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    sc = _scale(scale)
    if table.empty:
        return None
    mins = _mins_of(claims, scale, mins)
    panels = list(dict.fromkeys(map(tuple, table[PANEL_KEYS].astype(str).to_numpy())))
    sites = list(dict.fromkeys(table["site"].astype(str)))
    palette = dict(zip(sites, sns.color_palette("colorblind", len(sites))))
    ks = sorted(set(table[sc.key]))
    # the same x range in every panel: the scales (and the claims' minimums) with a margin on a log axis
    drawn = set(table["claim"])
    span = sorted(set(ks) | {m.value for cid, m in mins.items() if cid in drawn})
    pad = 10 ** max(0.12, 0.08 * math.log10(span[-1] / span[0]))
    ncols = min(3, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = Figure(figsize=(4.4 * ncols, 3.3 * nrows + 0.8), layout="constrained")
    FigureCanvasAgg(fig)
    axes = np.atleast_2d(fig.subplots(nrows, ncols, squeeze=False))
    keyed = table.assign(_key=list(map(tuple, table[PANEL_KEYS].astype(str).to_numpy())))
    for i, key in enumerate(panels):
        ax = axes[i // ncols, i % ncols]
        p = keyed[keyed["_key"] == key]
        first = p.iloc[0]
        _scale_series(ax, p, sites, palette, sc)
        if not p["mean"].notna().any():
            ax.text(0.5, 0.5, f"no value at any {sc.words}\n(the claim's data are missing or undefined)",
                    transform=ax.transAxes, ha="center", va="center", fontsize=7, color="0.4")
        for col, what in (("threshold_min", "the claim's min"), ("threshold_max", "the claim's max")):
            y = first[col]
            if pd.notna(y):
                ax.axhline(float(y), color="0.35", ls="--", lw=0.9, label=what)
        low = mins.get(first["claim"])
        if low is not None:
            ax.axvline(low.value, color="0.35", ls=":", lw=0.9, label=low.source)
        ax.set_xscale("log")
        ax.set_xlim(span[0] / pad, span[-1] * pad)
        ax.set_xticks(ks, [f"{k:g}" for k in ks])
        ax.minorticks_off()
        ax.grid(True, alpha=0.3)
        title = first["claim"] + (f" ({first['part']})" if first["part"] else "")
        ax.set_title(f"{title}\n{first['trial']}, {first['subject']}, phase {first['phase']}", fontsize=8)
        ax.set_ylabel(axis_label(first["quantity"], first["statistic"]), fontsize=7)
        ax.tick_params(labelsize=7)
        if i + ncols >= len(panels):  # the lowest panel of its column
            ax.set_xlabel(f"{sc.words} {sc.symbol} ({sc.meaning} times {sc.symbol})", fontsize=7)
    for ax in axes.ravel()[len(panels):]:
        ax.set_visible(False)
    handles: dict[str, object] = {}
    for ax in axes.ravel()[:len(panels)]:
        for hd, lb in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lb, hd)
    handles = {lb: handles[lb] for lb in sorted(handles, key=lambda lb: lb not in sites)}  # the sites first
    fig.legend(list(handles.values()), list(handles), loc="outside lower center", ncol=min(5, len(handles)),
               fontsize=7, frameon=False)
    fig.suptitle(f"What each claim judges against the {sc.words}: mean and 95 % t interval over each run's "
                 "repetitions, a colour per site;\nfilled: the claim holds in that run, open: it does not "
                 "(fails, inconclusive, not evaluable or not applicable)", fontsize=9)
    return fig


def _scale_series(ax, p: pd.DataFrame, sites: list[str], palette: dict, sc) -> None:
    """One panel's values (``p``: its rows of :func:`scale_table`) against the scale ``sc``, a
    series per site: the means with their 95 % intervals (the sites drawn slightly apart along
    x), a line through them when a site has one run per scale, a filled mark where the claim
    holds and an open one where it does not."""
    for j, site in enumerate(sites):
        s = p[p["site"].astype(str) == site].sort_values([sc.key, "run"], kind="stable")
        if s.empty:
            continue
        x = s[sc.key].to_numpy(float) * 10 ** (0.015 * (j - (len(sites) - 1) / 2))
        err = np.vstack([s["mean"] - s["ci95_low"], s["ci95_high"] - s["mean"]])
        ax.errorbar(x, s["mean"], yerr=np.nan_to_num(err), fmt="none", capsize=3, lw=0.9, color=palette[site])
        if s[sc.key].is_unique:  # one run per scale: a line through them
            ok = s["mean"].notna().to_numpy()
            ax.plot(x[ok], s["mean"].to_numpy(float)[ok], lw=0.8, color=palette[site])
        holds = (s["status"] == "holds").to_numpy()
        for filled in (True, False):
            sel = holds == filled
            if sel.any():
                ax.plot(x[sel], s["mean"].to_numpy(float)[sel], "o", ms=5, color=palette[site],
                        mfc=palette[site] if filled else "white", label=site)


def draw_scale(table: pd.DataFrame, claims: Sequence[Claim], out_dir: Path, formats=("png", "pdf"),
               scale: str = "rate_scale", mins: dict[str, ScaleMin] | None = None) -> list[Path]:
    """``figures/<scale>.<format>`` (``rate-scale``, ``time-scale``) of :func:`scale_figure`
    into ``out_dir``; returns the files written (``formats``: png, pdf, svg), none for an
    empty table."""
    from analysis.figures import save_figure

    fig = scale_figure(table, claims, scale, mins)
    if fig is None:
        return []
    return [save_figure(fig, Path(out_dir) / f"{_scale(scale).file}.{ext}") for ext in formats]


def draw_rate_scale(table: pd.DataFrame, claims: Sequence[Claim], out_dir: Path, formats=("png", "pdf")) -> list[Path]:
    """figures/rate-scale.<format>: :func:`draw_scale` against the rate scale k, with the
    claims' own ``rate_scale_min``."""
    return draw_scale(table, claims, out_dir, formats, "rate_scale")


def report_section(table: pd.DataFrame, claims: Sequence[Claim], held: dict[tuple[str, str], str],
                   figure: str | None, scale: str = "rate_scale",
                   mins: dict[str, ScaleMin] | None = None) -> list[str]:
    """The lines of report.md's section "Claims against the rate scale" (or "... the time
    scale": ``scale``, a key of :data:`SCALES`): the runs' scales, the lowest scale at which
    each claim keeps its meaning when the experiment says it (``mins``: :func:`scale_mins`;
    None: the claims' own ``<scale>_min``), the figure (``figure``: its path relative to
    report.md, or None) and a table with a row per claim and run (by scale): the run's scale,
    the claim's status (with ``held``: (run label, claim id) -> ``k of N`` repetitions, when
    the run repeated; and ``below <scale>_min`` when the run's scale is below the claim's
    minimum) and each value the claim reads as ``mean [95 % CI]`` (:func:`mean_ci`)."""
    sc = _scale(scale)
    mins = _mins_of(claims, scale, mins)
    ks = sorted(set(table[sc.key]))
    lines = ["", f"## Claims against the {sc.words}", "",
             f"The runs ran at {len(ks)} {sc.words}s ({sc.symbol} = {', '.join(f'{k:g}' for k in ks)}: "
             f"{sc.meaning} of the experiment times {sc.symbol}). Each claim's quantity per run: the statistic a bound reads, or the "
             "ratio or difference of each pair of values a ratio or difference reads, computed in each repetition "
             "as its verdict judged it; mean and 95 % Student-t interval over the run's repetitions (one "
             f"repetition: its value). Every row is in `{sc.file}.csv`."]
    said = [c.id for c in claims if c.id in mins]
    if said:
        lines += ["", f"The {sc.lowest} {sc.words} at which a claim keeps its meaning (a dotted line in the "
                      "figure; a run below it does not test the claim):", ""]
        groups: dict[ScaleMin, list[str]] = {}
        for cid in said:
            groups.setdefault(mins[cid], []).append(cid)
        for low, ids in groups.items():
            lines.append(f"- {', '.join(f'`{c}`' for c in ids)}: {sc.symbol} = {low.value:g} ({low.source}"
                         + (f": {low.note}" if low.note else "") + ")")
    if figure:
        lines += ["", f"![{sc.words}]({figure})"]
    lines += ["", f"| claim | run | {sc.symbol} | status | quantity: mean [95 % CI] |", "|---|---|---|---|---|"]
    for c in claims:
        t = table[table["claim"] == c.id]
        low = mins.get(c.id)
        for run in dict.fromkeys(t.sort_values([sc.key, "site", "run"], kind="stable")["run"]):
            r = t[t["run"] == run]
            at = r[sc.key].iloc[0]
            status = (r["status"].iloc[0] + (f" ({held[(run, c.id)]})" if held.get((run, c.id)) else "")
                      + (f"; below {sc.key}_min {low.value:g}" if low is not None and at < low.value else ""))
            cells = "; ".join(f"{_selection(x)}: {mean_ci(x)}" for _, x in r.iterrows())
            lines.append(f"| `{c.id}` | {run} | {at:g} | {status} | {cells} |")
    return lines
