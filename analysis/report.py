"""``report.md`` of one run (or of one repetition or sweep point of a run): the run explained to
an artifact evaluator who was not there.

Sections: the reference the experiment reproduces, the verdict with each claim's evidence, how
the run was made (site, time and rate scale, toolkit, raw files checked, the trials, the
software on the nodes), the health of the substrate (every check of every trial), the
statistics of each whole trial, the data problems, the figures and how to regenerate the
outputs. Everything comes from run.json, the analysis's tables and its record (analysis.json):
no wall-clock time of the analysis and no absolute path, so equal inputs give equal text.
Nothing here knows an experiment by name.
"""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import pandas as pd

from analysis.health import format_value

#: A claim's status in a sentence.
STATUS_WORDS = {"holds": "holds", "fails": "does not hold", "not evaluable": "not evaluable",
                "inconclusive": "inconclusive", "not applicable": "not applicable"}


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


def _verdict_line(verdict: dict) -> str:
    claims = verdict["claims"]
    count = {s: sum(c["status"] == s for c in claims) for s in STATUS_WORDS}
    parts = [f"{count['holds']} of {len(claims)} claims hold"]
    if count["not evaluable"]:
        parts.append(f"{count['not evaluable']} not evaluable: their data are incomplete or missing")
    if count["inconclusive"]:
        parts.append(f"{count['inconclusive']} inconclusive: a trial they read failed a health check of its substrate")
    if count["not applicable"]:
        parts.append(f"{count['not applicable']} not applicable")
    return f"**Verdict: {verdict['verdict']}** ({'; '.join(parts)})."


def render_report(spec, data: dict, summary: pd.DataFrame, verdict: dict, problems: list[str],
                  figures: list[str], health: dict[str, dict], run_dir: Path | None = None,
                  out_dir: Path | None = None, record: dict | None = None,
                  incomplete: dict[str, list[str]] | None = None) -> str:
    """report.md's text (see the module docstring).

    Args:
        spec: the experiment as run (:class:`netrepro.spec.Spec`); data: run.json (or one
            repetition's or sweep point's view of it: :mod:`analysis.repetitions`).
        summary: summary.csv's long table; verdict: verdict.json's dict
            (:func:`analysis.generic.evaluate`).
        problems: data problems, one line each; figures: the figures' paths relative to
            the report's folder.
        health: trial id -> its checks (:func:`analysis.health.trial_health`).
        run_dir: the run folder; out_dir: the folder the report goes into (the run folder,
            an ``analysis-*`` folder in it, or a repetition's or point's folder).
        record: analysis.json's record (toolkit version, raw check), if any.
        incomplete: trial id -> why its data are incomplete (damaged raw files).
    Returns:
        Markdown text.
    """
    m = spec.model
    ref = m.data.get("reference") or {}
    rs = data.get("rate_scale") or {"k": 1, "why": "rates as written"}
    lines = [f"# {m.data['title']}", ""]
    if ref.get("paper"):
        lines.append(f"- Paper: {' '.join(str(ref['paper']).split())}" + (f", {ref['figure']}" if ref.get("figure") else ""))
    if ref.get("reproduction"):
        lines.append(f"- Earlier reproduction: {' '.join(str(ref['reproduction']).split())}")
    lines += [f"- Run directory: `{run_dir.name if run_dir else '?'}` (experiment `{data.get('experiment', m.name)}`)", "",
              _verdict_line(verdict), ""]
    for c in verdict["claims"]:
        lines.append(f"- `{c['id']}` **{c['status']}**: {c['text']}  \n  {c['evidence']}"
                     + (f"  \n  ({c['reason']})" if c.get("reason") else "")
                     + (f"  \n  (applies: {c['condition']})" if c.get("condition") and not c.get("reason") else ""))
    lines += ["", "Thresholds are those of the experiment file (section `claims`), fixed before any run.", ""]

    lines += ["## How this run was made", "",
              f"- Site: {data.get('site', 'not recorded')}; mode: {data.get('mode', 'not recorded')}",
              f"- Time scale: {data.get('time_scale')} (every phase and traffic start multiplied by it)",
              f"- Rate scale: {rs['k']:g} ({rs['why']}): every rate and byte size of the experiment file was "
              "multiplied by it; delays, AQM time constants and packet counts were kept"]
    if m.data["rate_scale"].get("note"):
        lines.append(f"- What keeps its meaning at a rate scale: {m.data['rate_scale']['note']}")
    trials = [t for t in data.get("trials") or [] if isinstance(t, dict)]
    starts = [t["start_epoch_s"] for t in trials if isinstance(t.get("start_epoch_s"), (int, float))]
    lines += [f"- First trial start: {_utc(min(starts) if starts else None)}",
              f"- Toolkit commit: {data.get('toolkit_commit', 'not recorded')}"]
    if data.get("spec_file"):
        lines.append(f"- Experiment file: {_spec_file(data['spec_file'])}")
    if isinstance(data.get("raw_sha256"), dict):
        lines.append(f"- Raw files: {len(data['raw_sha256'])}, each with its sha256 in run.json (`raw_sha256`)")
    if record:
        if (record.get("inputs") or {}).get("raw_check"):
            lines.append(f"- Raw files checked before this analysis: {record['inputs']['raw_check']}")
        mb = record.get("made_by") or {}
        lines.append(f"- Analysed by toolkit version {mb.get('version')} ({mb.get('version_from')}); "
                     "what made this analysis and from what: `analysis.json`")
    if trials:
        labels = {t["id"]: t["labels"] for t in m.trials}

        def base(t: dict) -> str:
            if not m.data["base_rtt"]:
                return "none (no base_rtt)"
            rec = t.get("base_rtt_ms") if isinstance(t.get("base_rtt_ms"), dict) else {}
            return ", ".join(f"{k} {v:.1f}" for k, v in rec.items() if isinstance(v, (int, float))) or \
                f"each node's {m.data['base_rtt'].get('statistic', 'median')} of its base_rtt.txt"
        lines += ["", "Trials, in run order:", "", markdown_table(pd.DataFrame([{
            "record": t.get("id"), "trial": t.get("trial") or t.get("id"),
            "labels": ", ".join(f"{k}={v}" for k, v in labels.get(t.get("trial") or t.get("id"), {}).items()),
            "start": _utc(t.get("start_epoch_s")), "base RTT (ms)": base(t)} for t in trials]))]
    nodes = data.get("nodes")
    if isinstance(nodes, dict) and nodes:
        rows = []
        for name, info in nodes.items():
            info = info if isinstance(info, dict) else {}
            rows.append({"node": name, **{k: info.get(k, "") for k in ("kernel", "iproute2", "iperf3", "vsftpd")},
                         "sysctls": ", ".join(f"{k}={v}" for k, v in (info.get("sysctls") or {}).items())})
        lines += ["", "Software on the nodes:", "", markdown_table(pd.DataFrame(rows))]

    lines += ["", "## Health of the substrate", ""]
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

    lines += ["", "## Statistics (whole trials)", ""]
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

    lines += ["", "## Data problems", ""]
    lines += [f"- trial {t} incomplete: {', '.join(why)}" for t, why in (incomplete or {}).items()]
    lines += [f"- {p}" for p in problems]
    if not problems and not incomplete:
        lines.append("None: every raw file the analysis reads was there.")
    if figures:
        lines += ["", "## Figures", ""] + [f"![{f}]({f})" for f in figures]
    if run_dir is not None:
        where = f"results/{data.get('experiment', m.name)}/{run_dir.name}"
        sub = ("" if out_dir is None or out_dir == run_dir
               else f" (this one is in `{out_dir.relative_to(run_dir).as_posix()}/`)"
               if out_dir.is_relative_to(run_dir) else f" (this one is in `{out_dir.name}/`)")
        lines += ["", "## Regenerate", "",
                  f"`python -m analysis {where}{' --partial' if (record or {}).get('partial') else ''}` checks raw/ "
                  "against run.json and writes tidy.csv.gz, summary.csv, verdict.json, figures/, report.md and "
                  "analysis.json from run.json and raw/ (both only read). The same toolkit version writes the same "
                  "bytes again; another version writes into a new `analysis-<version>/` folder of the run, keeping "
                  f"this one{sub}."]
    return "\n".join(lines) + "\n"


__all__ = ["render_report", "markdown_table", "health_table", "phase_windows_table", "STATUS_WORDS"]
