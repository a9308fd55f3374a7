"""The analysis of a sweep (``netrepro run --sweep``, :mod:`netrepro.experiment.sweep`).

Each point is analysed as a run of its own experiment (the file with the point's values set,
:func:`netrepro.experiment.sweep.point_spec`), by the same code as a single or repeated run, into
``sweep/<point>/`` (summary.csv, verdict.json, report.md; repetitions/ when repeated). A
trial that a factor does not apply to ran once per combination of the other factors; each
point's analysis reads that instance (:func:`netrepro.experiment.sweep.source_point`). The run folder
then gets, beside analysis.json:

- ``tidy.csv.gz`` and ``summary.csv``: every point's rows, with a ``point`` column and a
  column per factor (its value; empty for a trial it does not apply to);
- ``sweep.csv``: every statistic per point, trial, phase and subject across the point's
  repetitions (n, mean, median, sd, Student-t 95 % interval, CV, min, max:
  :func:`analysis.repetitions.across`; n = 1 without repetitions);
- ``figures/sweep.png|pdf``: each claim statistic per phase against the points, one series
  per trial (the interval drawn when repeated);
- ``verdict.json``: each point's verdict, and each claim's status at every point. The run's
  verdict is the one at the point with the file's own settings (the *base point*: the
  published claims are about those); a sweep without it is inconclusive, saying so;
- ``report.md``: the factors, the points with their values and verdicts, the claims at each
  point, the figure.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from analysis.claims import verdict_record
from analysis.figures import save_figure
from analysis.outputs import analyze, checked_and_written, write_outputs
from analysis.report import verdict_sentence
from analysis.repetitions import across, claim_statistics, repeated, repeated_into
from netrepro.experiment import sweep as sweeps
from netrepro.model import quantity_label
from netrepro.runfolder.layout import FIGURES, INCOMPLETE_PROBLEM, REPORT, SWEEP, SWEEP_TABLE
from netrepro.runfolder.record import RunRecord


def swept(data: dict) -> bool:
    """Whether run.json ``data`` is of a sweep."""
    sw = data.get("sweep")
    return isinstance(sw, dict) and isinstance(sw.get("points"), list) and bool(sw["points"])


def view(data: dict, spec, point) -> dict:
    """run.json ``data`` as a run of ``point`` alone: for each trial, the records of its
    instances at the point where it ran with this point's values (every repetition); no
    ``sweep``; ``spec`` is the point's experiment data."""
    fs = data["sweep"]["factors"]
    pts = sweeps.from_record(None, data["sweep"])
    src = {t: sweeps.source_point(pts, fs, point, t) for t in spec.trial_ids}
    out = {k: v for k, v in data.items() if k != "sweep"}
    out["spec"] = spec.data
    out["trials"] = [r for r in data.get("trials") or [] if isinstance(r, dict)
                     and src.get(r.get("trial")) is not None and r.get("point") == src[r["trial"]].id]
    return out


def base_values(spec, fs: list[dict]) -> dict:
    """Each factor's value in the experiment file as written (its first path)."""
    out = {}
    for f in fs:
        node = spec.data
        for seg in f["paths"][0].split("."):
            if isinstance(node, list):
                node = node[int(seg)] if seg.isdigit() else next(x for x in node if isinstance(x, dict) and x.get("id") == seg)
            else:
                node = node[seg]
        out[f["name"]] = node
    return out


def combine(per_point: dict[str, dict], pts, base_id: str | None) -> dict:
    """One verdict from each point's (point id -> verdict.json): see the module docstring."""
    label = {p.id: p.label() for p in pts}
    base = per_point.get(base_id) if base_id else None
    order = [c["id"] for v in per_point.values() for c in v["claims"]]
    claims = []
    for cid in dict.fromkeys(order):
        per = {pid: next((c for c in v["claims"] if c["id"] == cid), None) for pid, v in per_point.items()}
        at = per.get(base_id) if base_id else None
        held = [pid for pid, c in per.items() if c and c["status"] == "holds"]
        applied = [pid for pid, c in per.items() if c and c["status"] != "not applicable"]
        first = next(c for c in per.values() if c)
        status = at["status"] if at else "inconclusive"
        entry = {"id": cid, "text": first["text"], "status": status,
                 "holds": True if status == "holds" else False if status == "fails" else None,
                 "held": f"{len(held)} of {len(applied)} points",
                 "evidence": (f"at the file's settings ({base_id}: {label[base_id]}): {at['evidence']}; " if at else "")
                             + "; ".join(f"{pid} {c['status'] if c else 'not run'}" for pid, c in per.items()),
                 "by_point": {pid: ({"status": c["status"], "evidence": c["evidence"]} if c else None)
                              for pid, c in per.items()}}
        if at and at.get("reason"):
            entry["reason"] = at["reason"]
        elif not at:
            entry["reason"] = "no point of the sweep has the file's own settings; the claims are judged per point"
        claims.append(entry)
    failures = [{**f, "point": pid} for pid, v in per_point.items() for f in v.get("health_failures") or []]
    # the claims' statuses are the base point's (each inconclusive without one): its verdict
    return verdict_record(claims, health_failures=[f for f in failures if f["point"] == base_id] if base else failures,
                          sweep={"points": len(per_point), "base_point": base_id,
                                 "by_point": {pid: v["verdict"] for pid, v in per_point.items()}},
                          rule="the run's verdict is the one at the point with the experiment file's own settings; "
                               "every point is judged by the claims as a run of its own")


def draw(stats: pd.DataFrame, statistics: list[str], pts, out_dir: Path) -> list[Path]:
    """figures/sweep.png and .pdf: a panel per claim statistic and phase, the points on x, a
    series per trial (and subject): the mean over the point's repetitions, with its 95 %
    interval when there are several."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    statistics = [s for s in statistics if (stats["statistic"] == s).any()]
    if not statistics:
        return []
    phases = list(dict.fromkeys(stats["phase"]))
    fig = Figure(figsize=(3.2 * len(phases), 3.0 * len(statistics)), layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(len(statistics), len(phases), squeeze=False, sharex=True)
    ids = [p.id for p in pts]
    ticks = [p.id + "\n" + "\n".join(f"{k}={v}" for k, v in p.values.items()) for p in pts]
    keys = [c for c in ("trial", "subject") if c in stats.columns]
    for i, st in enumerate(statistics):
        for j, ph in enumerate(phases):
            ax = axes[i, j]
            s = stats[(stats["statistic"] == st) & (stats["phase"] == ph)]
            for key, g in s.groupby(keys, sort=False):
                key = key if isinstance(key, tuple) else (key,)
                g = g.set_index("point").reindex(ids)
                err = np.vstack([g["mean"] - g["ci95_low"], g["ci95_high"] - g["mean"]])
                ax.errorbar(np.arange(len(ids)), g["mean"], yerr=np.nan_to_num(err), fmt="o-", capsize=3, ms=4,
                            label="/".join(str(v) for v in key if v != "all"))
            ax.set_xticks(np.arange(len(ids)), ticks, fontsize=6)
            ax.grid(True, axis="y", alpha=0.3)
            if i == 0:
                ax.set_title(str(ph), fontsize=9)
            if j == 0:
                ax.set_ylabel(quantity_label(None, st), fontsize=8)
            if i == len(statistics) - 1:
                ax.set_xlabel("Sweep point (its factors' values)", fontsize=8)
    axes[0, -1].legend(fontsize=6)
    return [save_figure(fig, out_dir / f"sweep.{ext}") for ext in ("png", "pdf")]


def render_report(spec, data: dict, verdict: dict, figures: list[str], problems: list[str], *, pts, fs: list[dict],
                  per_point: dict[str, dict]) -> str:
    """report.md of a sweep (see the module docstring): the arguments as
    :func:`analysis.report.render_report`'s, then the points ``pts``, the factors ``fs`` and
    each point's verdict (``per_point``: point id -> verdict.json)."""
    title = spec.model.title
    run = RunRecord.from_json(data)
    base = verdict["sweep"]["base_point"]
    lines = [f"# {title}", "",
             f"Experiment `{run.experiment}`, site {run.site} ({run.mode}), "
             f"TIME_SCALE {run.time_scale}, toolkit {str(run.toolkit_commit)[:12]}.", "",
             f"A sweep of {len(pts)} points ({run.sweep.get('design')}), {run.repeat} repetition(s), "
             f"order {'shuffled with seed ' + str(run.seed) if run.shuffle else 'as in the file'}. "
             f"Each point is analysed as a run of its own (`{SWEEP}/<point>/`).", "", "## Factors", ""]
    for f in fs:
        lines.append(f"- `{f['name']}` ({', '.join(f['paths'])}): {', '.join(map(str, f['values']))}"
                     + (f"; trials {', '.join(f['trials'])}" if f.get("trials") else ""))
    lines += ["", verdict_sentence(verdict, verdict["rule"] + (f"; base point {base}" if base else
                                                            "; no point has the file's settings")), "",
              "## Points", "", "| point | " + " | ".join(f["name"] for f in fs) + " | verdict | "
              + " | ".join(c["id"] for c in verdict["claims"]) + " |",
              "|---" * (len(fs) + 2 + len(verdict["claims"])) + "|"]
    for p in pts:
        v = per_point[p.id]
        status = {c["id"]: c["status"] for c in v["claims"]}
        lines.append(f"| [{p.id}]({SWEEP}/{p.id}/{REPORT}){' (base)' if p.id == base else ''} | "
                     + " | ".join(str(p.values[f["name"]]) for f in fs) + f" | {v['verdict']} | "
                     + " | ".join(status.get(c["id"], "") for c in verdict["claims"]) + " |")
    lines += ["", f"Every statistic of every point is in `{SWEEP_TABLE}`."]
    if figures:
        lines += ["", "## Figures", ""] + [f"![{f}]({f})" for f in figures]
    if problems:
        lines += ["", "## Data problems", ""] + [f"- {p}" for p in problems]
    return "\n".join(lines) + "\n"


def analyze_swept(run_dir: Path, data: dict, spec, figures: bool, partial: bool, out: Path | None = None,
                  rejudgement: dict | None = None):
    """:func:`analysis.analyze` for a sweep (see the module docstring), into ``out`` when
    given (else the run's own place, :func:`netrepro.runfolder.outputs.output_dir`). Returns an
    AnalysisResult whose ``verdict`` is the combined one (:func:`combine`) and whose ``tidy``
    and ``summary`` have the ``point`` and factor columns (the summary in long rows).
    ``rejudgement``: as :func:`analysis.outputs.checked_and_written`'s.

    Raises: as :func:`analysis.analyze`; SpecError when a recorded point is no longer a valid
    experiment (run.json's records and the raw files are checked once, before anything is
    written)."""
    pts = sweeps.from_record(spec, data["sweep"])
    specs = {p.id: sweeps.point_spec(spec, p.values) for p in pts}  # before anything is written
    return checked_and_written(run_dir, data, spec, figures, partial, out, lambda d, o, rec, problems, damaged:
                               swept_into(run_dir, d, spec, specs, figures, o, rec, problems, damaged), rejudgement)


def swept_into(run_dir: Path, data: dict, spec, specs: dict, figures: bool, out: Path, record: dict,
               problems: list[str], damaged: dict[str, list[str]]) -> dict:
    """The analysis of a sweep written into ``out`` (:func:`analysis.outputs.write_outputs`):
    sweep/<point>/ (each point as a run of its experiment ``specs[point id]``, repeated when
    the run is), tidy.csv.gz, summary.csv, sweep.csv, figures/, verdict.json and report.md.
    ``problems``: lines known beforehand, extended; ``damaged``: raw folder -> its damaged
    files. Returns ``{"tidy", "summary", "verdict", "problems", "outputs", "health",
    "incomplete"}`` (health and incomplete keyed ``<point>/<trial>``); writes no analysis.json."""
    fs = data["sweep"]["factors"]
    pts = sweeps.from_record(spec, data["sweep"])
    problems = list(problems)
    tidies, summaries, per_point, health, incomplete, outputs = [], [], {}, {}, {}, []
    for p in pts:
        pspec = specs[p.id]
        v = view(data, pspec, p)
        sub = out / SWEEP / p.id
        sub.mkdir(parents=True, exist_ok=True)
        if repeated(v):
            res = repeated_into(run_dir, v, pspec, False, sub, record, [], damaged)
        else:
            res = analyze(run_dir, pspec, v, sub, record, figures=False, tidy_file=False, damaged=damaged)
        summary = res["summary"].copy()
        if "repetition" not in summary.columns:
            summary = summary.assign(repetition=1)
        tidy = res["tidy"]
        for f in fs:
            applies = {t: sweeps.applies(f, t) for t in spec.trial_ids}
            value = p.values[f["name"]]
            summary[f["name"]] = [value if applies.get(t, True) else None for t in summary["trial"]]
            tidy = tidy.assign(**{f["name"]: value})
        tidies.append(tidy.assign(point=p.id))
        summaries.append(summary.assign(point=p.id))
        per_point[p.id] = res["verdict"]
        health.update({f"{p.id}/{k}": h for k, h in res["health"].items()})
        incomplete.update({f"{p.id}/{k}": why for k, why in res["incomplete"].items()})
        problems += [f"{p.id}: {x}" for x in res["problems"] if not x.startswith(INCOMPLETE_PROBLEM)]
        outputs += res["outputs"]
    base = base_values(spec, fs)
    base_id = next((p.id for p in pts if p.values == base), None)
    verdict = combine(per_point, pts, base_id)
    tidy = pd.concat(tidies, ignore_index=True)
    summary = pd.concat(summaries, ignore_index=True)
    lead = ["point"] + [f["name"] for f in fs]
    summary = summary[lead + [c for c in summary.columns if c not in lead]]
    stats = across(summary.drop(columns=[f["name"] for f in fs]))
    table = pd.DataFrame([{"point": p.id, **p.values} for p in pts]).merge(stats, on="point", how="right")
    figs = draw(stats, claim_statistics(spec.model.claims), pts, out / FIGURES) if figures else []
    written, verdict = write_outputs(out, record, summary, verdict, lambda v: render_report(
        spec, data, v, [p.relative_to(out).as_posix() for p in figs if p.suffix == ".png"], problems,
        pts=pts, fs=fs, per_point=per_point), tidy=tidy, tables=[(SWEEP_TABLE, table)], drawn=figs)
    return {"tidy": tidy, "summary": summary, "verdict": verdict, "problems": problems, "outputs": outputs + written,
            "health": health, "incomplete": incomplete}
