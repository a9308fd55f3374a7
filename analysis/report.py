"""``report.md`` of one run (or of one repetition or sweep point of a run): the run explained to
an artifact evaluator who was not there, in the order a paper tells its result
(:data:`SECTIONS`):

1. the title, the reference the experiment reproduces, the verdict and each claim with its
   evidence;
2. the experiment's figures;
3. what each found (:func:`found_by_table`, :func:`statistic_tables`): each claim's status in
   this run beside the published results of the file's ``reference_results``, then per
   statistic the claims read a table per trial and phase of this run's value beside what each
   source states of it (a number, about a number, a finding in words, or *not stated*);
4. the health of the substrate: every check of every trial, the effective phase windows, the
   link-fidelity figure and the data problems;
5. the statistics of each whole trial;
6. how the run was made, last: settings, the site's state, the trials and their status, the
   software on the nodes, the versions and checksums of this analysis, and how to regenerate
   it, every value as readable text in a table (:func:`plain`, :func:`flatten`), never as a
   JSON dump.

Everything comes from run.json, the experiment as run, the analysis's tables and its record
(analysis.json): no wall-clock time of the analysis and no absolute path, so equal inputs
give equal text. Nothing here knows an experiment by name.
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import pandas as pd

from analysis.console import changes_text, status_counts
from analysis.health import format_value
from netrepro.model import quantity_label, statistics
from netrepro.runfolder.record import RunRecord

#: The report's sections after its title, verdict and claims, in order.
SECTIONS = ("Figures", "What each found", "Health of the substrate", "Statistics of each whole trial",
            "How this run was made")
#: The column of the table "what each found" that names who found a value.
FOUND_BY = "found by"
#: This run's row in the tables "what each found".
THIS_RUN = "this run"
#: A source's cell where it states nothing of a value.
NOT_STATED = "not stated"

#: A claim's status in a sentence.
STATUS_WORDS = {"holds": "holds", "fails": "does not hold", "not evaluable": "not evaluable",
                "inconclusive": "inconclusive", "undecided": "undecided", "not applicable": "not applicable"}


def _utc(epoch) -> str:
    if not isinstance(epoch, (int, float)) or isinstance(epoch, bool) or not math.isfinite(epoch):
        return "not recorded"
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _cell(x, digits: int) -> str:
    if isinstance(x, float):
        return "" if math.isnan(x) else f"{x:.{digits}f}"
    return str(x).replace("|", "\\|").replace("\n", " ")


def markdown_table(df: pd.DataFrame, digits: dict[str, int] | None = None) -> str:
    """A DataFrame as a GitHub-flavoured markdown table. Floats get ``digits[column]``
    decimals (default 1); NaN is an empty cell."""
    digits = digits or {}
    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(x, digits.get(c, 1)) for c, x in zip(df.columns, row)) + " |")
    return "\n".join(lines)


def _spec_file(v) -> str:
    """run.json's spec_file without the controller's absolute path (from experiments/ on)."""
    parts = str(v).replace("\\", "/").split("/")
    return "/".join(parts[parts.index("experiments"):]) if "experiments" in parts else parts[-1]


def health_table(health: dict[str, dict]) -> pd.DataFrame:
    """Every check of every trial (trial id -> :func:`analysis.health.trial_health`) as one
    table: trial, check, value, threshold, result (pass, FAIL, or "not judged" when the
    experiment file sets no threshold or the check does not apply), detail. Values in their
    units (% for fractions)."""
    rows = []
    for tid, h in health.items():
        for c in h.get("checks", []):
            rows.append({"trial": tid, "check": c["id"], "value": format_value(c["value"], c["unit"]),
                         "threshold": "" if c["threshold"] is None else format_value(c["threshold"], c["unit"]),
                         "result": {True: "pass", False: "FAIL", None: "not judged"}[c["passed"]],
                         "detail": c["detail"]})
    return pd.DataFrame(rows, columns=["trial", "check", "value", "threshold", "result", "detail"])


def phase_windows_table(health: dict[str, dict]) -> pd.DataFrame:
    """The effective phase windows of every trial (its ``data_start_lag`` check's ``windows``,
    :func:`analysis.health.trial_health`): trial, phase, scheduled from (s from the trial's
    start), data from (s), length (s), effective length (s), share lost; empty without one."""
    rows = []
    for tid, h in health.items():
        for c in h.get("checks", []):
            for w in c.get("windows") or []:
                lag = max(float(w["data_lag_s"]), 0.0)
                rows.append({"trial": tid, "phase": w["phase"], "scheduled from (s)": float(w["start_s"]),
                             "data from (s)": float(w["start_s"]) + lag, "length (s)": float(w["length_s"]),
                             "effective length (s)": max(float(w["length_s"]) - lag, 0.0),
                             "lost": f"{min(lag / float(w['length_s']), 1):.0%}" if w["length_s"] else ""})
    return pd.DataFrame(rows, columns=["trial", "phase", "scheduled from (s)", "data from (s)", "length (s)",
                                       "effective length (s)", "lost"])


def plain(v) -> str:
    """A value of run.json or analysis.json as text for a table cell: a number (``:g``), a
    string as it is, ``yes``/``no``, ``not recorded`` for None, a list as its items joined by
    ``, `` and a mapping as ``key value`` pairs joined by ``; `` (nested alike): never
    Python's or JSON's brackets and quotes."""
    if v is None:
        return "not recorded"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, dict):
        return "; ".join(f"{k} {plain(x)}" for k, x in v.items()) or "none"
    if isinstance(v, (list, tuple)):
        return ", ".join(plain(x) for x in v) or "none"
    return str(v)


def flatten(d: dict, prefix: str = "") -> list[tuple[str, str]]:
    """A nested mapping (run.json's ``site_status``, ``controller``, ...) as ``(key, text)``
    rows: nested keys joined by ``.``, the items of a list of mappings numbered
    (``attempts.1.status``), any other value as :func:`plain` text. Empty for an empty or
    non-mapping ``d``."""
    rows: list[tuple[str, str]] = []
    if not isinstance(d, dict):
        return rows
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and v:
            rows += flatten(v, key + ".")
        elif isinstance(v, list) and v and all(isinstance(x, dict) for x in v):
            for i, x in enumerate(v, 1):
                rows += flatten(x, f"{key}.{i}.")
        else:
            rows.append((key, plain(v)))
    return rows


#: What a claim status means, beside its count in a report's verdict line (:func:`verdict_sentence`).
STATUS_MEANS = {"fails": "a value they read is wholly on the wrong side of its bound, on data that passed their "
                         "health checks",
                "undecided": "the 95 % interval of a value they read straddles its bound, and more repetitions "
                             "(REPEAT) would decide them",
                "inconclusive": "a trial they read failed a health check of its substrate",
                "not evaluable": "their data are incomplete or missing"}


def verdict_sentence(verdict: dict, rule: str | None = None) -> str:
    """The verdict line of a report (one run's, a repeated run's or a sweep's): the verdict,
    then every claim status counted, the non-zero ones, each with the claims' ids and what it
    means (:func:`analysis.console.status_counts`, :data:`STATUS_MEANS`), so that a failed
    claim is counted beside the undecided ones; then ``rule``, how the kind combined its
    parts, when given: ``**Verdict: not reproduced** (1 of 2 claims hold; 1 fails (x): ...).``
    A re-judgement (verdict.json's ``rejudgement``: :func:`analysis.analyze` with ``rejudge``)
    says so in a paragraph after it, naming the claims changed after the run."""
    parts = status_counts(verdict, STATUS_MEANS) or ["no claims"]
    line = f"**Verdict: {verdict['verdict']}** ({'; '.join(parts + ([rule] if rule else []))})."
    again = verdict.get("rejudgement")
    if again:
        line += (f"\n\n**A re-judgement with claims changed after the run**: judged with the claims of the experiment "
                 f"file `{again['experiment_file']}` ({changes_text(again['claims_changed'])}), not with those recorded "
                 "in the run, which were fixed before it ran (`verdict.json`'s `rejudgement`).")
    return line


def found_by_table(verdict: dict, references: list[dict], this_run: str = THIS_RUN) -> pd.DataFrame:
    """Each claim's status in this run and in each published source (the file's
    ``reference_results``): a row per source, this run first (``this_run`` names it), a
    column per claim (its id), :data:`NOT_STATED` where a source says nothing of a claim."""
    ids = [c["id"] for c in verdict["claims"]]
    rows = [{FOUND_BY: this_run, **{c["id"]: c["status"] for c in verdict["claims"]}}]
    rows += [{FOUND_BY: r["source"], **{i: r.get("claims", {}).get(i, NOT_STATED) for i in ids}} for r in references]
    return pd.DataFrame(rows, columns=[FOUND_BY, *ids])


def claim_selections(model) -> list[dict]:
    """What the claims read, grouped by statistic and subject, in the order the claims name
    them: ``[{"statistic", "subject", "trials", "phased"}]``, ``trials`` in the file's order,
    ``phased`` when a selection names phases. A selection without ``subjects`` reads every
    subject that computes the statistic (:func:`netrepro.model.statistics`), and without
    ``trials`` every trial; the ``when`` conditions count too."""
    computed = statistics(model)
    order = [t.id for t in model.trials]
    groups: dict[tuple[str, str], dict] = {}

    for c in model.claims:
        for sel in c.check.selections + (c.when.selections if c.when else ()):
            for t in sel.trials or order:
                subjects = sel.subjects or [s for s, n in computed.get(t, {}).items() if sel.statistic in n]
                for subj in subjects:
                    g = groups.setdefault((sel.statistic, subj), {"statistic": sel.statistic, "subject": subj,
                                                                  "trials": [], "phased": False})
                    if t not in g["trials"]:
                        g["trials"].append(t)
                    g["phased"] |= bool(sel.phases)
    for g in groups.values():
        g["trials"].sort(key=order.index)
    return list(groups.values())


def reference_selections(model, known: list[dict]) -> list[dict]:
    """The statistics the file's ``reference_results`` state that ``known`` (the claims'
    :func:`claim_selections`) does not read, grouped like them: ``[{"statistic", "subject",
    "trials", "phased"}]``, a value's ``subject`` or else every subject of its trials that
    computes the statistic (:func:`netrepro.model.statistics`), trials in the file's order."""
    computed = statistics(model)
    order = [t.id for t in model.trials]
    have = {(g["statistic"], g["subject"]) for g in known}
    groups: dict[tuple[str, str], dict] = {}
    for ref in model.reference_results:
        for v in ref.get("values") or []:
            for t in v["trials"]:
                subjects = [v["subject"]] if v.get("subject") else \
                    [s for s, n in computed.get(t, {}).items() if v["statistic"] in n]
                for subj in subjects:
                    if (v["statistic"], subj) in have:
                        continue
                    g = groups.setdefault((v["statistic"], subj), {"statistic": v["statistic"], "subject": subj,
                                                                   "trials": [], "phased": False})
                    if t not in g["trials"]:
                        g["trials"].append(t)
                    g["phased"] |= any(p != "all" for p in v.get("phases") or [])
    for g in groups.values():
        g["trials"].sort(key=order.index)
    return list(groups.values())


def _value(v: float) -> str:
    return "missing" if not math.isfinite(v) else f"{v:.4g}"


def stated_value(v: dict) -> str:
    """What a reference value (an item of ``reference_results[].values``) says, for a cell:
    ``about 20`` (``approximate``), ``20``, or its ``finding`` in words."""
    if "value" in v:
        return ("about " if v.get("approximate") else "") + f"{float(v['value']):g}"
    return str(v["finding"])


def statistic_table(summary: pd.DataFrame, group: dict, phases: list[str], references: list[dict],
                    this_run: str = THIS_RUN) -> pd.DataFrame:
    """One statistic of one subject (``group``: an item of :func:`claim_selections`) per trial
    and phase: for each of its trials a row of this run's values (``missing`` where
    summary.csv has none) and a row per source of ``references`` that states anything of
    the statistic, with what it states (:data:`NOT_STATED` elsewhere). Columns: trial,
    :data:`FOUND_BY`, then ``phases``."""
    st, subj = group["statistic"], group["subject"]
    mine = summary[(summary["statistic"] == st) & (summary["subject"] == subj)]
    speaking = [r for r in references if any(v["statistic"] == st and (v.get("subject") in (None, subj))
                                             for v in r.get("values") or [])]
    rows = []
    for t in group["trials"]:
        have = mine[mine["trial"] == t].set_index("phase")["value"]
        rows.append({"trial": t, FOUND_BY: this_run,
                     **{ph: _value(float(have[ph])) if ph in have.index else "missing" for ph in phases}})
        for r in speaking:
            cells = dict.fromkeys(phases, NOT_STATED)
            for v in r.get("values") or []:
                if v["statistic"] == st and v.get("subject") in (None, subj) and t in v["trials"]:
                    for ph in v.get("phases") or ["all"]:
                        if ph in cells:
                            cells[ph] = stated_value(v)
            rows.append({"trial": t, FOUND_BY: r["source"], **cells})
    return pd.DataFrame(rows, columns=["trial", FOUND_BY, *phases])


def statistic_tables(model, summary: pd.DataFrame, references: list[dict], this_run: str = THIS_RUN) -> list[str]:
    """Markdown lines: for each statistic and subject the claims read
    (:func:`claim_selections`), then each other one a source states
    (:func:`reference_selections`), a heading naming it in words with its unit
    (:func:`netrepro.model.quantity_label`) and its :func:`statistic_table` over the file's
    phases (the whole trial when no selection names a phase), its rows of this run named
    ``this_run``, a line when no source states it, then where each stated value comes from
    (the source's words and place)."""
    names = [p.name for p in model.phases]
    lines: list[str] = []
    known = claim_selections(model)
    for g in known + reference_selections(model, known):
        phases = names if g["phased"] and names else ["all"]
        lines += ["", f"### {quantity_label(model, g['statistic'])}: `{g['statistic']}` of `{g['subject']}`", "",
                  markdown_table(statistic_table(summary, g, phases, references, this_run))]
        if not any(v["statistic"] == g["statistic"] for r in references for v in r.get("values") or []):
            lines += ["", f"No source of the experiment file (`reference_results`) states a value of "
                          f"`{g['statistic']}`: {NOT_STATED}."]
    quotes = [(r["source"], v) for r in references for v in r.get("values") or []]
    if quotes:
        lines += ["", "Where each source states it (its own words):", ""]
        for source, v in quotes:
            where = f", {v['where']}" if v.get("where") else ""
            lines.append(f"- *{source}*{where}: {', '.join(v['trials'])}, "
                         f"{', '.join(v.get('phases') or ['all'])}: {stated_value(v)} (`{v['statistic']}`): \"{v['quote']}\"")
    return lines


def _figure_title(model, path: str) -> str:
    """The title the experiment file gives the figure at ``path`` (``figures/<id>.png``), else its id."""
    fid = Path(path).stem
    return next((f.title or fid for f in model.figures if f.id == fid), fid)


def render_report(spec, data: dict, verdict: dict, figures: list[str], problems: list[str], *,
                  summary: pd.DataFrame, health: dict[str, dict], run_dir: Path | None = None,
                  out_dir: Path | None = None, record: dict | None = None,
                  incomplete: dict[str, list[str]] | None = None, health_figures: list[str] | None = None) -> str:
    """report.md's text (see the module docstring for its sections). The three reports (one
    run's, :func:`analysis.repetitions.render_report`, :func:`analysis.sweep.render_report`)
    take ``spec, data, verdict, figures, problems`` first, in that order, then their kind's
    parts by name.

    Args:
        spec: the experiment as run (:class:`netrepro.experiment.spec.Spec`); data: run.json (or one
            repetition's or sweep point's view of it: :mod:`analysis.repetitions`).
        verdict: verdict.json's dict (:func:`analysis.claims.evaluate`).
        figures: the experiment's figures' paths relative to the report's folder; problems:
            data problems, one line each.
        summary: summary.csv's long table; health_figures: the paths of the figures about
            the substrate (link fidelity), shown with its health.
        health: trial id -> its checks (:func:`analysis.health.trial_health`).
        run_dir: the run folder; out_dir: the folder the report goes into (the run folder,
            an ``analysis-*`` folder in it, or a repetition's or point's folder).
        record: analysis.json's record (toolkit version, libraries, input checksums), if any.
        incomplete: trial id -> why its data are incomplete (damaged raw files).
    Returns:
        Markdown text; no value of run.json is written as a JSON or Python literal.
    """
    m = spec.model
    rs = data.get("rate_scale") or {"k": 1, "why": "rates as written"}
    run_id = run_dir.name if run_dir else "?"
    lines = _title_lines(m, data, verdict, rs, run_id)
    lines += _figure_lines(m, figures)
    lines += _found_lines(m, summary, verdict, run_id)
    lines += _health_lines(health, health_figures, problems, incomplete)
    lines += _whole_trial_lines(summary)
    lines += _provenance_lines(m, data, RunRecord.from_json(data), rs, run_id, record)
    if run_dir is not None:
        lines += _regenerate_lines(m, data, run_dir, out_dir, record)
    return "\n".join(lines) + "\n"


def _title_lines(m, data: dict, verdict: dict, rs: dict, run_id: str) -> list[str]:
    """The report's first lines: its title, the reference the experiment reproduces, the run,
    the verdict and each claim with its evidence."""
    ref = m.reference
    lines = [f"# {m.title}", ""]
    if ref.get("paper"):
        lines.append(f"- Paper: {' '.join(str(ref['paper']).split())}" + (f", {ref['figure']}" if ref.get("figure") else ""))
    if ref.get("reproduction"):
        lines.append(f"- Earlier reproduction: {' '.join(str(ref['reproduction']).split())}")
    for k, v in ref.items():
        if k not in ("paper", "figure", "reproduction"):
            lines.append(f"- {k.capitalize()}: {' '.join(str(v).split())}")
    lines += [f"- Run `{run_id}` of experiment `{data.get('experiment', m.name)}` on site {plain(data.get('site'))}, "
              f"time scale {plain(data.get('time_scale'))}, rate scale {float(rs.get('k', 1)):g}", "",
              verdict_sentence(verdict), ""]
    for c in verdict["claims"]:
        lines.append(f"- `{c['id']}` **{c['status']}**: {c['text']}  \n  {c['evidence']}"
                     + (f"  \n  (thresholds follow the rate scale: {c['thresholds']})" if c.get("thresholds") else "")
                     + (f"  \n  Recorded finding: {c['finding']['text']} (docs/runs: {', '.join(c['finding']['runs'])})"
                        if c.get("finding") else "")
                     + (f"  \n  ({c['reason']})" if c.get("reason") else "")
                     + (f"  \n  (applies: {c['condition']})" if c.get("condition") and not c.get("reason") else ""))
    lines += ["", "Thresholds are those of the experiment file (section `claims`), fixed before any run. "
              + ("A value is judged with its 95 % interval where it has one (within a trial by batch means, across "
                 "repetitions by Student's t; `intervals.csv`): a claim holds when every interval is on the right side "
                 "of its bounds, fails when one is wholly on the wrong side, and is undecided when one straddles a bound."
                 if any(c.get("values") for c in verdict["claims"]) else ""), ""]
    return lines


def _figure_lines(m, figures: list[str]) -> list[str]:
    """The section of the experiment's figures (paths relative to the report's folder)."""
    lines = [f"## {SECTIONS[0]}", ""]
    if figures:
        for f in figures:
            lines += [f"![{_figure_title(m, f)}]({f})", ""]
    else:
        lines += ["None drawn (the analysis ran without figures, or no trial had samples of a figure's metric).", ""]
    return lines


def _found_lines(m, summary: pd.DataFrame, verdict: dict, run_id: str) -> list[str]:
    """The section "what each found": each claim's status in this run and in the published
    results (:func:`found_by_table`), then the statistics the claims read (:func:`statistic_tables`)."""
    references = m.reference_results
    lines = [f"## {SECTIONS[1]}", "",
             f"Each claim's status in {THIS_RUN} (`{run_id}`) and in the published results the experiment file "
             "records (`reference_results`):", "", markdown_table(found_by_table(verdict, references))]
    for r in references:
        if r.get("note"):
            lines.append(f"\n*{r['source']}*: {' '.join(str(r['note']).split())}")
    lines += ["", "The statistics the claims read, per trial and phase: this run's value beside what each source "
                  "states of it (a number, *about* a number, a finding in words, or *not stated*)."]
    lines += statistic_tables(m, summary, references)
    lines.append("")
    return lines


def _health_lines(health: dict[str, dict], health_figures: list[str] | None, problems: list[str],
                  incomplete: dict[str, list[str]] | None) -> list[str]:
    """The section on the health of the substrate: every check of every trial, the effective
    phase windows, the figures about the substrate and the data problems."""
    lines = [f"## {SECTIONS[2]}", ""]
    if health:
        lines += ["Each trial's own data checked against the thresholds of the experiment file (section `health`; "
                  "analysis/health.py says how each is measured). A trial that fails one makes the claims reading "
                  "it inconclusive.", ""]
        lines += [markdown_table(health_table(health))]
        windows = phase_windows_table(health)
        if len(windows):
            lines += ["", "Effective phase windows: each phase from the schedule's start and from the moment the "
                      "data of the traffic opening it flowed (`data_start_lag`: FTP's median flow's first byte, "
                      "iperf3's first interval with bytes). The statistics read the whole scheduled phase.", "",
                      markdown_table(windows, {"scheduled from (s)": 2, "data from (s)": 2, "length (s)": 2,
                                               "effective length (s)": 2})]
    else:
        lines.append("No trial was measured.")
    for f in health_figures or []:
        lines += ["", f"![{Path(f).stem}]({f})"]
    lines += ["", "### Data problems", ""]
    lines += [f"- trial {t} incomplete: {', '.join(why)}" for t, why in (incomplete or {}).items()]
    lines += [f"- {p}" for p in problems]
    if not problems and not incomplete:
        lines.append("None: every raw file the analysis reads was there.")
    return lines


def _whole_trial_lines(summary: pd.DataFrame) -> list[str]:
    """The section of the statistics of each whole trial (phase ``all``), a row per trial and subject."""
    lines = ["", f"## {SECTIONS[3]}", ""]
    whole = summary[summary["phase"] == "all"]
    if len(whole):
        wide = whole.pivot_table(index=["trial", "subject"], columns="statistic", values="value", sort=False)
        cols = list(wide.columns)
        lines.append("| trial | subject | " + " | ".join(cols) + " |")
        lines.append("|---|---|" + "---|" * len(cols))
        for (t, s), r in wide.iterrows():
            lines.append(f"| {t} | {s} | " + " | ".join("" if pd.isna(r[c]) else f"{r[c]:.4g}" for c in cols) + " |")
        lines.append("")
    lines.append("Every statistic of every phase is in `summary.csv`; every sample in `tidy.csv.gz`.")
    return lines


def _provenance_lines(m, data: dict, run: RunRecord, rs: dict, run_id: str, record: dict | None) -> list[str]:
    """The section on how the run was made (``data``: run.json, ``run`` its record): its
    settings, the site's state, the trials, the software on the nodes, and the versions and
    checksums of the analysis."""
    lines = ["", f"## {SECTIONS[4]}", "", _settings_table(m, data, run, rs, run_id)]
    site_rows = flatten(data.get("site_status") or {})
    if site_rows:
        lines += ["", "The site's state when the run started (run.json `site_status`):", "",
                  markdown_table(pd.DataFrame(site_rows, columns=["site status", "value"]))]
    lines += _trial_lines(m, data, run)
    lines += _node_lines(data)
    lines += ["", "Versions and checksums:", "", _versions_table(run, record)]
    return lines


def _regenerate_lines(m, data: dict, run_dir: Path, out_dir: Path | None, record: dict | None) -> list[str]:
    """The report's last lines: the command that regenerates the analysis of the run in ``run_dir``
    and where this copy of it is (``out_dir``)."""
    where = f"results/{data.get('experiment', m.name)}/{run_dir.name}"
    sub = ("" if out_dir is None or out_dir == run_dir
           else f" (this one is in `{out_dir.relative_to(run_dir).as_posix()}/`)"
           if out_dir.is_relative_to(run_dir) else f" (this one is in `{out_dir.name}/`)")
    return ["", "### Regenerate", "",
            f"`python -m analysis {where}{' --partial' if (record or {}).get('partial') else ''}"
            + (f" --experiment {again['experiment_file']} --rejudge" if (again := (record or {}).get("rejudgement")) else "")
            + "` checks raw/ "
            "against run.json and writes tidy.csv.gz, summary.csv, verdict.json, figures/, report.md and "
            "analysis.json from run.json and raw/ (both only read). The same toolkit version writes the same "
            "bytes again; another version writes into a new `analysis-<version>/` folder of the run, keeping "
            f"this one{sub}."]


def _settings_table(m, data: dict, run: RunRecord, rs: dict, run_id: str) -> str:
    """How the run was made, a row per setting (run.json ``data``, ``run`` its record), as a
    two-column table."""
    trials = [t for t in data.get("trials") or [] if isinstance(t, dict)]
    starts = [t["start_epoch_s"] for t in trials if isinstance(t.get("start_epoch_s"), (int, float))]
    rows = [("run", run_id), ("experiment", data.get("experiment", m.name))]
    if run.spec_file:
        rows.append(("experiment file", _spec_file(run.spec_file)))
    rows += [("site", data.get("site", "not recorded")), ("mode", data.get("mode", "not recorded")),
             ("time scale", f"{plain(data.get('time_scale'))}: every phase and traffic start multiplied by it"),
             ("rate scale", f"{float(rs.get('k', 1)):g} ({rs.get('why', '')}): every rate and byte size of the "
                            "experiment file multiplied by it; delays, AQM time constants and packet counts kept")]
    if m.rate_scale.get("note"):
        rows.append(("what keeps its meaning at a rate scale", " ".join(str(m.rate_scale["note"]).split())))
    rows.append(("first trial start", _utc(min(starts) if starts else None)))
    for key, words in (("started_at", "run started"), ("finished_at", "run finished"), ("lead_s", "barrier lead (s)"),
                       ("jobs", "trials at a time"), ("wall_s", "wall time of the trials (s)"),
                       ("repetitions", "repetitions"), ("packet", "packets"), ("controller", "controller machine"),
                       ("timings_s", "wall time of each step (s)"), ("toolkit_commit", "toolkit commit (run)")):
        if key in data:
            rows.append((words, plain(data[key])))
    return markdown_table(pd.DataFrame(rows, columns=["setting", "value"]))


def _trial_lines(m, data: dict, run: RunRecord) -> list[str]:
    """The trials in run order (record, trial, labels, start, base RTT) and each trial's
    status and attempts (run.json ``trial_status``: ``run.instances``), as tables."""
    out: list[str] = []
    trials = [t for t in data.get("trials") or [] if isinstance(t, dict)]
    if trials:
        labels = {t.id: t.labels for t in m.trials}

        def base(t: dict) -> str:
            if not m.base_rtt:
                return "none (no base_rtt)"
            rec = t.get("base_rtt_ms") if isinstance(t.get("base_rtt_ms"), dict) else {}
            return ", ".join(f"{k} {v:.1f}" for k, v in rec.items() if isinstance(v, (int, float))) or \
                f"each node's {m.base_rtt.statistic} of its base_rtt.txt"
        out += ["", "Trials, in run order:", "", markdown_table(pd.DataFrame([{
            "record": t.get("id"), "trial": t.get("trial") or t.get("id"),
            "labels": ", ".join(f"{k}={v}" for k, v in labels.get(t.get("trial") or t.get("id"), {}).items()),
            "start": _utc(t.get("start_epoch_s")), "base RTT (ms)": base(t)} for t in trials]))]
    if run.instances:
        rows = []
        for s in run.instances:
            reasons = [plain(a["reason"]) for a in s.attempts if a.get("reason")] or \
                ([plain(s.reason)] if s.reason else [])
            rows.append({"record": plain(s.id), "status": plain(s.status), "attempts": len(s.attempts),
                         "reasons": "; ".join(reasons)})
        out += ["", "Each trial's status (run.json `trial_status`):", "", markdown_table(pd.DataFrame(rows))]
    return out


def _node_lines(data: dict) -> list[str]:
    """The software and sysctls of each node (run.json ``nodes``), as a table."""
    nodes = data.get("nodes")
    if not isinstance(nodes, dict) or not nodes:
        return []
    rows = []
    for name, info in nodes.items():
        info = info if isinstance(info, dict) else {}
        rows.append({"node": name, **{k: plain(info[k]) if k in info else "" for k in ("kernel", "iproute2", "iperf3",
                                                                                         "vsftpd")},
                     "sysctls": ", ".join(f"{k}={plain(v)}" for k, v in (info.get("sysctls") or {}).items())})
    return ["", "Software on the nodes:", "", markdown_table(pd.DataFrame(rows))]


def _versions_table(run: RunRecord, record: dict | None) -> str:
    """The toolkit and libraries that made this analysis and the checksums of its inputs
    (analysis.json's record; the raw files' count from run.json's record ``run``), as a
    two-column table."""
    rows = []
    if isinstance(run.raw_sha256, dict):
        rows.append(("raw files", f"{len(run.raw_sha256)}, each with its sha256 in run.json (`raw_sha256`)"))
    if record:
        inputs = record.get("inputs") or {}
        if inputs.get("raw_check"):
            rows.append(("raw files checked before this analysis", plain(inputs["raw_check"])))
        mb = record.get("made_by") or {}
        rows.append(("analysed by toolkit version", f"{plain(mb.get('version'))} (from {plain(mb.get('version_from'))})"))
        for key, words in (("commit", "its commit"), ("sources_sha256", "sha256 of its sources")):
            if mb.get(key):
                rows.append((words, plain(mb[key])))
        rows += [(f"library {k}", plain(v)) for k, v in (record.get("libraries") or {}).items()]
        for key, words in (("run_json_sha256", "sha256 of run.json"), ("raw_tree_sha256", "sha256 of the raw tree"),
                           ("incomplete_marker_sha256", "sha256 of the INCOMPLETE marker")):
            if key in inputs:
                rows.append((words, plain(inputs[key]) if inputs[key] else "none"))
        rows.append(("what made this analysis and from what", "`analysis.json`"))
    if not rows:
        rows.append(("analysis record", "none (not written by netrepro's analysis)"))
    return markdown_table(pd.DataFrame(rows, columns=["what", "value"]))


__all__ = ["render_report", "markdown_table", "health_table", "phase_windows_table", "found_by_table",
           "claim_selections", "reference_selections", "statistic_table", "statistic_tables", "plain", "flatten", "STATUS_WORDS", "SECTIONS",
           "FOUND_BY", "THIS_RUN", "NOT_STATED"]
