"""One report across runs of one experiment (``netrepro compare RUN RUN ...``): emulation,
simulation, testbeds, repeated or not, side by side, with the published results as
reference rows.

Each run is analysed by the current toolkit (:func:`analysis.analyze`; its write-once rules
hold: a run analysed before by the same toolkit is read, not rewritten). The comparison is
written once into ``results/<experiment>/compare-<UTC time>/``:

- ``compare.csv``: per run (and its rate scale k, ``rate_scale``, and time scale TS,
  ``time_scale``), trial, phase, subject and statistic the claims read: n (the repetitions),
  mean, 95 % Student-t interval (:func:`analysis.repetitions.across`);
- ``claims.csv``: per run (and its ``rate_scale`` and ``time_scale``) and per reference row
  (the experiment file's ``reference_results``; no scales), each claim's status (and, for a
  repeated run, how many repetitions it held in, and in how many its numbers alone held);
- ``figures/compare.png|pdf``: per statistic and trial, the phases on x, one series per run
  (the mean and its interval), and the numbers the published sources state over their
  phases (:func:`reference_marks`);
- when the runs have two or more rate scales (run.json ``rate_scale.k``; 1 when missing):
  ``rate-scale.csv`` and ``figures/rate-scale.png|pdf``, what each claim judges against k;
  when they have two or more time scales (run.json ``time_scale``): ``time-scale.csv`` and
  ``figures/time-scale.png|pdf``, the same against TS; both when they differ in both
  (:mod:`analysis.scales`), with the lowest scale at which each claim keeps its meaning
  where the experiment says it (a claim's ``rate_scale_min``/``time_scale_min``, else the
  experiment's ``rate_scale.min``/``time_scale.min``);
- ``report.md``: the runs, the claims table, where the runs disagree, the claims' statistics
  with what the published sources state of them (``reference_results[].values``: a number,
  ``about`` one, or a finding in words, per trial and phase), the figure (and the claims
  against the rate scale, then against the time scale).
"""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd

from netrepro.core.errors import RunFolderError
from netrepro.model import Claim
from netrepro.runfolder.layout import FIGURES, REPORT, run_json
from netrepro.runfolder.reading import read_record
from netrepro.runfolder.record import RunRecord


def run_label(run: RunRecord, run_dir: Path) -> str:
    """A run's short name: its site and mode, repetitions, time scale and rate scale when not
    1 (``ns3 (simulation) x3 TS 0.1 k 0.02``), then its folder name (``run``: its run.json)."""
    rep, k = run.repeat, run.rate_scale_k
    return (f"{run.site} ({run.mode or '?'})" + (f" x{rep}" if rep > 1 else "")
            + (f" TS {run.time_scale:g}" if run.time_scale not in (None, 1, 1.0) else "")
            + (f" k {k:g}" if k != 1 else "")
            + f" [{run_dir.name}]")


def load(run_dir: Path, out_dir: Path | None = None):
    """(run.json, AnalysisResult) of a run folder, analysed by this toolkit (figures off: they
    are the run's own report's business) into ``out_dir`` when given, so that the run folder
    is not written (compare never writes into a run)."""
    import analysis
    rdir, run, spec = read_record(run_dir)
    return run, analysis.analyze(rdir, spec, figures=False, out_dir=out_dir)


def _check_out_root(root: Path) -> Path:
    """``root`` (where compare-<time>/ goes) checked before anything is written: a folder, or
    a path whose nearest existing ancestor is a writable folder, and inside no run folder
    (a folder holding run.json: runs are written once). Returns the nearest existing ancestor.

    Raises:
        RunFolderError: naming ``--out`` and what was expected.
    """
    import os
    anc = root
    while not (anc.exists() or anc.is_symlink()) and anc != anc.parent:
        anc = anc.parent
    if not anc.is_dir():
        what = root if anc == root else f"{root} (its {anc})"
        raise RunFolderError("--out", f"{what}: not a folder; expected a folder to write compare-<time>/ into "
                                     "(made if missing)")
    if not os.access(anc, os.W_OK | os.X_OK):
        raise RunFolderError("--out", f"{anc}: not writable; expected a folder to write compare-<time>/ into")
    real = anc.resolve()
    for folder in (real, *real.parents):
        if (folder / "run.json").is_file():
            raise RunFolderError("--out", f"{root}: inside the run folder {folder}; runs are written once: expected a "
                                         "folder outside every run (default: the runs' experiment folder)")
    return anc


def _labels(loaded: list) -> list[str]:
    """One distinct :func:`run_label` per run (``loaded``: (folder, run.json, ...)): runs whose
    labels coincide (folders of one name in different places) are told apart by their path."""
    labels = [run_label(d, r) for r, d, *_ in loaded]
    return [lab.removesuffix(f"[{r.name}]") + f"[{r}]" if labels.count(lab) > 1 else lab
            for lab, (r, *_) in zip(labels, loaded)]


def compare(runs: list[Path], out_root: Path | None = None) -> Path:
    """Compare ``runs`` (folders of one experiment) and write the comparison (see the module
    docstring); return its folder.

    Every argument is checked before anything is written; each run is analysed into the
    comparison's own folder (never into the run), which is built under a temporary name next
    to where it goes and renamed into place at the end: an error leaves nothing behind.
    ``latest`` (or any link to a run) is resolved to the run folder it names.

    Raises:
        RunFolderError: no run; a run given twice (directly or through a link such as
            ``latest``); a sweep; a run.json whose ``rate_scale`` is not ``{k: a number > 0}``
            (or null) or whose ``time_scale`` is not a number > 0; an experiment whose
            claims' ``rate_scale_min``/``time_scale_min`` or whose ``rate_scale.min``/
            ``time_scale.min`` is not a number > 0 (:func:`analysis.scales.scale_mins`);
            runs of different experiments; ``out_root`` not a folder,
            not writable or inside a run folder; a ``reference_results`` entry naming a claim
            the experiment lacks (one line naming the file, field or argument); what
            :func:`analysis.analyze` raises for a run.
    """
    import os
    import shutil
    import tempfile

    if not runs:
        raise RunFolderError("command line", "RUN: expected at least one run folder")
    from analysis.scales import SCALES, scale_mins
    given, specs = _read_runs(runs)
    names = [run.experiment for _, _, run in given]
    odd = next((i for i, n in enumerate(names) if n != names[0]), None)
    if odd is not None:
        raise RunFolderError(given[odd][1] / "run.json", f"experiment: runs of {', '.join(sorted(map(str, set(names))))}; "
                                                        "expected runs of one experiment")
    name = names[0]
    first_dir, spec = given[0][1], specs[0]
    claims = spec.model.claims
    ids = [c.id for c in claims]
    for scale in SCALES:  # the lowest scales at which the claims keep their meaning, read before writing
        scale_mins(claims, {scale: getattr(spec.model, scale)}, scale, spec.path)
    refs = _references(spec, name, ids)
    root = Path(out_root) if out_root else first_dir.parent
    existing = _check_out_root(root)

    # nothing was written before this point; from here on, an error removes what was made
    made = [root, *root.parents][:len(root.relative_to(existing).parts)] if root != existing else []
    root.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    build = Path(tempfile.mkdtemp(prefix=f".compare-{stamp}-", suffix=".tmp", dir=root))
    try:
        _write(build, given, spec, name, claims, ids, refs)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(build, 0o777 & ~umask)
        final = root / f"compare-{stamp}"
        n = 1
        while final.exists() or final.is_symlink():
            n += 1
            final = root / f"compare-{stamp}-{n}"
        os.rename(build, final)
        return final
    except BaseException:
        shutil.rmtree(build, ignore_errors=True)
        for d in made:  # the folders made for --out, innermost first
            try:
                d.rmdir()
            except OSError:
                break
        raise


def _read_runs(runs: list[Path]) -> tuple[list[tuple[Path, Path, RunRecord]], list]:
    """Each run read (:func:`netrepro.runfolder.reading.read_record`) and checked for :func:`compare`: ``(as
    given, the real folder, run.json)`` per run, and its experiment as run. Raises
    RunFolderError for a sweep, a run's scales of the wrong type, a run given twice or a copy
    of another (the same raw files: a copy is not a repetition)."""
    from analysis.scales import SCALES, scale_of
    given: list[tuple[Path, Path, RunRecord]] = []  # (as given, the real folder, run.json)
    specs = []
    for r in runs:
        rdir, run, spec = read_record(Path(r))
        specs.append(spec)
        if run.swept:
            raise RunFolderError(run_json(rdir), "sweep: a sweep's points have different settings; expected runs "
                                                   "at one setting (the sweep's own report.md compares its points)")
        for scale in SCALES:
            scale_of(run, scale, run_json(rdir))
        real = rdir.resolve()
        sums = run.raw_sha256
        for prev, prev_real, prev_run in given:
            if real == prev_real:
                same = f"{prev}" + ("" if prev == real else f" ({real})")
                raise RunFolderError(f"RUN {r}", f"the same run as {same}; expected each run once")
            # A copy of a run (its raw files, byte for byte) is not a repetition of it.
            if isinstance(sums, dict) and sums and sums == prev_run.raw_sha256:
                raise RunFolderError(f"RUN {r}", f"a copy of RUN {prev} (the same raw files: run.json raw_sha256); "
                                                "expected each run once, a repetition being a run of its own")
        given.append((Path(r), real, run))
    return given, specs


def _references(spec, name: str, ids: list[str]) -> list[dict]:
    """The published results as the experiment file says them now (runs made before it had
    them recorded none), else as the first run recorded them (``spec``). Raises RunFolderError
    for an entry naming a claim the experiment lacks (``ids``)."""
    try:
        from netrepro.experiment.spec import load_spec
        refs = load_spec(name).data.get("reference_results") or []
    except (ValueError, OSError):
        refs = spec.data.get("reference_results") or []
    for i, ref in enumerate(refs):
        for cid in ref["claims"]:
            if cid not in ids:
                raise RunFolderError(f"{spec.path}", f"reference_results[{i}].claims.{cid}: not a claim of {name}; "
                                                    f"expected one of: {', '.join(ids)}")
    return refs


def reference_marks(refs: list[dict], statistic: str, trial: str, phases: list[str]) -> list[dict]:
    """The numbers the published sources (``refs``: the file's ``reference_results``) state
    of ``statistic`` in ``trial`` (:func:`analysis.figures.stated_numbers`), placed on
    a compare panel whose x axis is ``phases`` (in order): ``[{"x", "value", "style",
    "label"}]``, ``x`` the phase's index, ``style`` and ``label`` as each run's figures draw
    them. Findings in words and phases not on the axis are left out."""
    from analysis.figures import stated_numbers
    return [{"x": phases.index(n["phase"]), "value": n["value"], "style": n["style"], "label": n["label"]}
            for n in stated_numbers(refs)
            if n["statistic"] == statistic and n["trial"] == trial and n["phase"] in phases]


def _write(out: Path, given: list[tuple[Path, Path, dict]], spec, name: str, claims: Sequence[Claim], ids: list[str],
           refs: list[dict]) -> Path:
    """Analyse each run (``given``: (as given, real folder, run.json)) into ``out/.runs/<i>/``
    (removed at the end) and write the comparison into ``out`` (for :func:`compare`, which
    checked everything first); returns ``out``."""
    import shutil

    from netrepro.runfolder.atomic import write_text
    from analysis.repetitions import claim_statistics
    from analysis.scales import SCALES, report_section, scale_mins, scale_table
    loaded = [(real, *load(real, out / ".runs" / str(i))) for i, (_, real, _) in enumerate(given)]
    labels = _labels(loaded)
    statistics = claim_statistics(claims)
    stats, claims_df, per_run = _analysed(loaded, labels, statistics, refs, ids)
    # what each claim judges against each scale (k, TS) the runs ran at two values or more of
    scaled = {scale: scale_table(per_run, claims, scale) for scale in SCALES
              if len({round(r[scale], 12) for r in per_run}) > 1}
    mins = {scale: scale_mins(claims, {scale: getattr(spec.model, scale)}, scale, spec.path) for scale in scaled}

    shutil.rmtree(out / ".runs")
    scale_figs = _write_tables(out, stats, claims_df, scaled, claims, mins)
    figs = _compare_figure(out, stats, spec, name, statistics, refs)
    lines = _report_lines(loaded, labels, name, ids, stats, claims_df, refs, figs)
    held = {(r["row"], r["claim"]): r["held"] for _, r in claims_df[claims_df["kind"] == "run"].iterrows()
            if r["held"]}
    for scale, t in scaled.items():
        figure = f"figures/{SCALES[scale].file}.png" if scale_figs[scale] else None
        lines += report_section(t, claims, held, figure, scale=scale, mins=mins[scale])
    write_text(out / REPORT, "\n".join(lines) + "\n")
    write_text(out / "runs.json", json.dumps([str(r) for r, _, _ in loaded], indent=1) + "\n")
    return out


def _analysed(loaded: list, labels: list[str], statistics: list[str], refs: list[dict],
              ids: list[str]) -> tuple[pd.DataFrame, pd.DataFrame, list[dict]]:
    """What the analysed runs (``loaded``: (folder, run.json, analysis result)) say: the claims'
    statistics across each run's repetitions (a row per run, trial, phase and statistic, with
    the run's scales), each claim's status per run and per published source (``claims.csv``'s
    rows), and per run what :func:`analysis.scales.scale_table` reads."""
    from analysis.repetitions import across
    from analysis.scales import SCALES, scale_of
    from netrepro.model import statistics as computed_statistics
    rows, table, per_run = [], [], []
    for (run_dir, run, res), label in zip(loaded, labels):
        at = {scale: scale_of(run, scale, run_json(run_dir)) for scale in SCALES}
        summary = res.summary
        if "repetition" not in summary.columns:
            summary = summary.assign(repetition=1)
        stats = across(summary[summary["statistic"].isin(statistics)])
        rows.append(stats.assign(run=label, **at))
        for c in res.verdict["claims"]:
            table.append({"row": label, "kind": "run", **at, "claim": c["id"], "status": c["status"],
                          "held": c.get("held", ""), "numbers_held": c.get("numbers_held", ""),
                          "verdict": res.verdict["verdict"]})
        model = res.run.spec.model
        per_run.append({"run": label, "site": str(run.site), **at, "summary": summary,
                        "trial_ids": [t.id for t in model.trials], "computed": computed_statistics(model),
                        "status": {c["id"]: c["status"] for c in res.verdict["claims"]}})
    for ref in refs:
        for cid in ids:
            table.append({"row": ref["source"], "kind": "reference", **dict.fromkeys(SCALES), "claim": cid,
                          "status": ref["claims"].get(cid, "not stated"), "held": "", "numbers_held": "", "verdict": ""})
    stats = pd.concat(rows, ignore_index=True)
    claims_df = pd.DataFrame(table, columns=["row", "kind", *SCALES, "claim", "status", "held", "numbers_held",
                                             "verdict"])
    return stats, claims_df, per_run


def _write_tables(out: Path, stats: pd.DataFrame, claims_df: pd.DataFrame, scaled: dict, claims: Sequence[Claim],
                  mins: dict) -> dict:
    """compare.csv, claims.csv and, per scale the runs differ in, its table and figure; returns
    scale -> the figure's paths (none when nothing was drawn)."""
    from netrepro.runfolder.atomic import atomic_path
    from analysis.scales import SCALES, draw_scale
    first = ["run", *SCALES]
    with atomic_path(out / "compare.csv") as tmp:
        stats[first + [c for c in stats.columns if c not in first]].to_csv(tmp, index=False, lineterminator="\n",
                                                                           float_format="%.6g")
    with atomic_path(out / "claims.csv") as tmp:
        claims_df.to_csv(tmp, index=False, lineterminator="\n", float_format="%.6g")
    scale_figs = {}
    for scale, t in scaled.items():
        with atomic_path(out / f"{SCALES[scale].file}.csv") as tmp:
            t.to_csv(tmp, index=False, lineterminator="\n", float_format="%.6g")
        scale_figs[scale] = draw_scale(t, claims, out / FIGURES, scale=scale, mins=mins[scale])
    return scale_figs


def _compare_figure(out: Path, stats: pd.DataFrame, spec, name: str, statistics: list[str],
                    refs: list[dict]) -> list[Path]:
    """figures/compare.png and .pdf: a row of panels per statistic, a column per trial (the
    experiment file's order); phases on x, each run's mean and 95 % interval as a series, the
    published values over their phase. Returns the paths written (none without trials or
    statistics)."""
    from analysis.figures import new_figure, save_figure
    order = {t: i for i, t in enumerate(spec.trial_ids)}  # the experiment file's order
    trials = sorted(dict.fromkeys(stats["trial"]), key=lambda t: order.get(t, len(order)))
    if not (trials and statistics):
        return []
    present = [s for s in statistics if (stats["statistic"] == s).any()]
    ncols = min(2, len(trials))
    per = math.ceil(len(trials) / ncols)  # rows of panels per statistic
    fig, axes = new_figure(len(present) * per, ncols)
    axes = np.atleast_2d(axes).reshape(len(present) * per, ncols)
    labels = list(dict.fromkeys(stats["run"]))
    used: set[int] = set()
    for i, st in enumerate(present):
        first = axes[i * per, 0]  # the panels of one statistic share its y axis
        for j0, tr in enumerate(trials):
            ax = axes[i * per + j0 // ncols, j0 % ncols]
            if ax is not first:
                ax.sharey(first)
            used.add(id(ax))
            _compare_panel(ax, stats, spec, st, tr, labels, refs, ylabel=j0 % ncols == 0)
    for ax in axes.ravel():
        if id(ax) not in used:
            ax.set_visible(False)
    # the runs in the first panel's legend; a stated value in the legend of each panel it is drawn in
    for ax in axes.ravel():
        handles, names = ax.get_legend_handles_labels()
        keep = {n: h for n, h in zip(names, handles) if ax is axes[0, 0] or n not in labels}
        if id(ax) in used and keep:
            ax.legend(keep.values(), keep.keys(), fontsize=6)
    fig.suptitle(f"{len(labels)} runs of {name}: mean and 95 % t interval over each run's repetitions",
                 fontsize=9)
    return [save_figure(fig, out / FIGURES / f"compare.{ext}") for ext in ("png", "pdf")]


def _compare_panel(ax, stats: pd.DataFrame, spec, st: str, tr: str, labels: list[str], refs: list[dict],
                   ylabel: bool) -> None:
    """One panel of :func:`_compare_figure`: statistic ``st`` of trial ``tr``, a series per run
    (``labels``) over the phases, and what the sources state (``refs``)."""
    from netrepro.model import quantity_label
    s = stats[(stats["statistic"] == st) & (stats["trial"] == tr)]
    phases = list(dict.fromkeys(s["phase"]))
    width = 0.7 / max(1, len(labels))
    for k, lab in enumerate(labels):
        r = s[s["run"] == lab]
        if r.empty:
            continue
        r = r.groupby("phase", sort=False).first().reindex(phases)
        x = np.arange(len(phases)) - 0.35 + width * (k + 0.5)
        err = np.vstack([r["mean"] - r["ci95_low"], r["ci95_high"] - r["mean"]])
        ax.errorbar(x, r["mean"], yerr=np.nan_to_num(err), fmt="o", ms=4, capsize=2, label=lab)
    for mk in reference_marks(refs, st, tr, phases):  # what the sources state, over its phase
        ax.hlines(mk["value"], mk["x"] - 0.4, mk["x"] + 0.4, colors="0.3", linestyles=mk["style"],
                  lw=1.2, label=mk["label"])
    ax.set_xticks(np.arange(len(phases)), phases)
    ax.set_title(f"{quantity_label(spec.model, st)}, {tr}", fontsize=8)
    ax.set_xlabel("Phase of the trial (all: the whole trial)", fontsize=7)
    ax.grid(True, axis="y", alpha=0.3)
    if ylabel:
        ax.set_ylabel(quantity_label(spec.model, st), fontsize=8)


def _report_lines(loaded: list, labels: list[str], name: str, ids: list[str], stats: pd.DataFrame,
                  claims_df: pd.DataFrame, refs: list[dict], figs: list[Path]) -> list[str]:
    """report.md's lines up to the scales' sections: the runs and their verdicts, the claims
    run by run and in the published results, where the runs disagree, the claims' statistics,
    what the sources state of them and the figure."""
    from analysis.report import markdown_table, stated_value
    lines = [f"# Comparison of {len(loaded)} runs of `{name}`", "",
             "| run | experiment as run | verdict |", "|---|---|---|"]
    for (run_dir, run, res), label in zip(loaded, labels):
        lines.append(f"| {label} | toolkit {str(run.toolkit_commit)[:12]}, "
                     f"{len(run.trials)} trial records | {res.verdict['verdict']} |")
    lines += _claim_lines(loaded, labels, ids, claims_df, refs)
    lines += ["", "## The claims' statistics", "",
              "Mean and 95 % Student-t interval over each run's repetitions (a single run: its value).", "",
              "| run | trial | phase | statistic | n | mean | 95 % CI |", "|---|---|---|---|---|---|---|"]
    for _, r in stats.iterrows():
        ci = "" if not math.isfinite(r["ci95_low"]) else f"{r['ci95_low']:.4g} .. {r['ci95_high']:.4g}"
        lines.append(f"| {r['run']} | {r['trial']} | {r['phase']} | {r['statistic']} | {r['n']} | {r['mean']:.4g} | {ci} |")
    stated = [{"source": f"*{r['source']}*", "statistic": v["statistic"], "trials": ", ".join(v["trials"]),
               "phases": ", ".join(v.get("phases") or ["all"]), "states": stated_value(v), "where": v.get("where", "")}
              for r in refs for v in r.get("values") or []]
    if stated:
        lines += ["", "What the published sources state of the runs' statistics (the experiment file's "
                      "`reference_results`), to read beside the means above; each run's report.md quotes "
                      "their words:", "", markdown_table(pd.DataFrame(stated))]
    if figs:
        lines += ["", "## Figure", "", "![compare](figures/compare.png)"]
    return lines


def _claim_lines(loaded: list, labels: list[str], ids: list[str], claims_df: pd.DataFrame,
                 refs: list[dict]) -> list[str]:
    """report.md's claims, run by run and in the published results (a repeated run: in how many
    repetitions it held, and its numbers alone where a health check made it inconclusive:
    analysis.repetitions.combine_verdicts), then where the runs disagree, with each run's
    evidence."""
    wide = claims_df.assign(cell=[s + (f" (held {h}; numbers alone {nh})" if h else "")
                                  for s, h, nh in zip(claims_df["status"], claims_df["held"], claims_df["numbers_held"])])
    lines = ["", "## Claims, run by run and in the published results", "",
             "| | " + " | ".join(f"`{c}`" for c in ids) + " |", "|---|" + "---|" * len(ids)]
    for row in dict.fromkeys(wide["row"]):
        cells = wide[wide["row"] == row].set_index("claim")["cell"]
        kind = wide[wide["row"] == row]["kind"].iloc[0]
        lines.append(f"| {'*' + row + '*' if kind == 'reference' else row} | "
                     + " | ".join(cells.get(c, "") for c in ids) + " |")
    for ref in refs:
        if ref.get("note"):
            lines.append(f"\n*{ref['source']}*: {ref['note']}")
    runs_only = claims_df[claims_df["kind"] == "run"]
    differ = [c for c in ids if runs_only[runs_only["claim"] == c]["status"].nunique() > 1]
    lines += ["", "## Where the runs disagree", ""]
    if not differ:
        lines.append("Every claim has the same status in every run.")
    for c in differ:
        per = runs_only[runs_only["claim"] == c]
        lines.append(f"- `{c}`: " + "; ".join(f"{r['row']}: {r['status']}" for _, r in per.iterrows()))
        for (run_dir, data, res), label in zip(loaded, labels):
            ev = next((x for x in res.verdict["claims"] if x["id"] == c), None)
            if ev:
                lines.append(f"  - {label}: {ev['evidence'][:400]}")
    return lines
