"""``report.md``: the run explained to an artifact evaluator who was not there."""

from __future__ import annotations

import datetime as dt
import json
import math

import pandas as pd

from analysis.run import RunInfo

FINDING_2016 = (
    "In the 2016 GENI reproduction (B. Yan, F. Fund, run-my-experiment-on-geni-blog, "
    "2016-08-23), unlimited FTP sources saturated the 10 Mbit/s link even with 10 flows, so "
    "RED's delay stayed flat across phases; only with rate-limited sources (vsftpd "
    "anon_max_rate=25000 B/s per connection) did RED's delay rise and fall with the number of "
    "flows, while PIE stayed near its 20 ms target. This is why the spec checks RED's rise and "
    "fall on the limited variant only."
)


def _utc(epoch: float | None) -> str:
    if epoch is None or not math.isfinite(epoch):
        return "not recorded"
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _cell(x, digits: int) -> str:
    if isinstance(x, float):
        return "" if math.isnan(x) else f"{x:.{digits}f}"
    return str(x).replace("|", "\\|")


def markdown_table(df: pd.DataFrame, digits: dict[str, int] | None = None) -> str:
    """A DataFrame as a GitHub-flavoured markdown table. Floats get ``digits[column]``
    decimals (default 1); NaN is an empty cell."""
    digits = digits or {}
    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    for row in df.itertuples(index=False):
        lines.append("| " + " | ".join(_cell(x, digits.get(c, 1)) for c, x in zip(df.columns, row)) + " |")
    return "\n".join(lines)


def _value(v) -> str:
    return json.dumps(v) if isinstance(v, (dict, list)) else str(v)


def _spec_file(v) -> str:
    """run.json's spec_file without the controller's absolute path (from experiments/ on)."""
    parts = str(v).replace("\\", "/").split("/")
    return "/".join(parts[parts.index("experiments"):]) if "experiments" in parts else parts[-1]


_STATUS = {"holds": "holds", "fails": "does not hold", "not evaluable": "not evaluable",
           "inconclusive": "inconclusive"}


def health_table(health: dict[str, dict]) -> pd.DataFrame:
    """Every check of every trial (trial id -> :func:`analysis.health.trial_health`) as one
    table: trial, check, value, threshold, result (pass, FAIL, or "not judged" when the
    experiment file sets no threshold), detail. Values in their units (% for fractions)."""
    from analysis.health import format_value

    rows = []
    for tid, h in health.items():
        for c in h.get("checks", []):
            rows.append({"trial": tid, "check": c["id"], "value": format_value(c["value"], c["unit"]),
                         "threshold": "" if c["threshold"] is None else format_value(c["threshold"], c["unit"]),
                         "result": {True: "pass", False: "FAIL", None: "not judged"}[c["passed"]],
                         "detail": c["detail"]})
    return pd.DataFrame(rows, columns=["trial", "check", "value", "threshold", "result", "detail"])


def render_report(run: RunInfo, summary: pd.DataFrame, verdict: dict, problems: list[str],
                  figures: list[str], record: dict | None = None, out_dir=None,
                  health: dict[str, dict] | None = None) -> str:
    """Build report.md's text: only from the run's data and the analysis's record (no
    wall-clock time of the analysis, no absolute path), so equal inputs give equal text.

    Args:
        run: the run (run.json fields used when present: site, mode, time_scale, nodes,
            toolkit_commit, phase_start_skew_ms, spec_file; other fields are listed as is).
        summary: summary.csv's table; verdict: verdict.json's dict.
        problems: data problems from :func:`analysis.tidy.build_tidy`.
        figures: figure paths relative to the report's folder.
        record: analysis.json's content (toolkit version, raw check), if any.
        out_dir: the folder the report goes into (the run folder or an analysis-* folder in it).
        health: trial id -> its health checks (:func:`analysis.health.trial_health`), for
            the section "Health of the substrate".
    Returns:
        Markdown text.
    """
    spec, d = run.spec, run.data
    ref = spec.get("reference", {})
    n_hold = sum(c["holds"] is True for c in verdict["claims"])
    n_na = sum(c.get("status") == "not evaluable" for c in verdict["claims"])
    n_inc = sum(c.get("status") == "inconclusive" for c in verdict["claims"])
    out = [f"# {spec.get('title', spec.name)}", ""]
    out += [f"- Paper: {ref.get('paper', '').strip()}, {ref.get('figure', '')}",
            f"- Earlier reproduction: {ref.get('reproduction', '').strip()}",
            f"- Run directory: `{run.dir.name}` (experiment `{d.get('experiment', spec.name)}`)", ""]
    from analysis.verdict import verdict_line

    word = verdict.get("verdict") or ("reproduced" if verdict["reproduced"] else "not reproduced")
    out += [f"**Verdict: {word}** "
            f"({n_hold} of {len(verdict['claims'])} claims hold"
            + (f"; {n_na} not evaluable: their data are incomplete" if n_na else "")
            + (f"; {n_inc} inconclusive: a trial they read failed a health check of its substrate" if n_inc else "")
            + ")."
            + (f" Inconclusive because {verdict_line(verdict)[len(word) + 2:]}; see \"Health of the substrate\"."
               if word == "inconclusive" and verdict.get("health_failures") else ""), ""]

    out += ["## How this run was made", ""]
    starts = [t.start_epoch_s for t in run.trials if t.start_epoch_s is not None]
    out += [f"- Site: {d.get('site', 'not recorded')}; mode: {d.get('mode', 'not recorded')}",
            f"- Time scale: {run.time_scale:g} (every phase and flow offset multiplied by it; "
            f"one trial lasts {max((p['end_s'] for t in run.trials for p in t.phases), default=0):g} s)",
            f"- First trial start: {_utc(min(starts) if starts else None)}",
            f"- Toolkit commit: {d.get('toolkit_commit', 'not recorded')}"]
    skip = {"experiment", "spec", "trials", "nodes", "site", "mode", "time_scale", "toolkit_commit",
            "phase_start_skew_ms", "raw_sha256", "spec_file"}
    if "spec_file" in d:
        out.append(f"- Experiment file: {_spec_file(d['spec_file'])}")
    for k, v in d.items():
        if k not in skip:
            out.append(f"- {k}: {_value(v)}")
    if isinstance(d.get("raw_sha256"), dict):
        out.append(f"- Raw files: {len(d['raw_sha256'])}, each with its sha256 in run.json (`raw_sha256`)")
    if run.raw_check is not None:
        out.append(f"- Raw files checked before this analysis: {run.raw_check.summary()}")
    if record:
        mb = record.get("made_by", {})
        out.append(f"- Analysed by toolkit version {mb.get('version')} ({mb.get('version_from')}); "
                   "what made this analysis and from what: `analysis.json`")
    skew = d.get("phase_start_skew_ms")
    if isinstance(skew, dict) and skew:
        out += ["", "Phase-start skew (ms): for each phase, the median lag of the flow starts/ends that open it "
                "behind the schedule, minus the first phase's (`skew_ms`); `lag_ms` is relative to the start "
                "recorded for the trial.", ""]
        rows = [{"trial": tid, **{ph: (v.get("skew_ms") if isinstance(v, dict) else v) for ph, v in phs.items()}}
                for tid, phs in skew.items() if isinstance(phs, dict)]
        if rows:
            out.append(markdown_table(pd.DataFrame(rows)))
    out += ["", "Trials, in run order:", ""]
    out += [markdown_table(pd.DataFrame([{
        "trial": t.id, "aqm": t.aqm, "variant": t.variant, "start": _utc(t.start_epoch_s),
        "bottleneck interface": t.bottleneck_interface or "", "bottleneck rate (Mbit/s)": t.rate_mbit,
        "base RTT (ms)": ", ".join(f"{k} {v:.1f} ({t.base_rtt_origin.get(k, 'run.json')})"
                                   for k, v in t.base_rtt_ms.items()) or "none",
    } for t in run.trials])), ""]
    nodes = d.get("nodes")
    if isinstance(nodes, dict) and nodes:
        rows = []
        for name, info in nodes.items():
            info = info if isinstance(info, dict) else {}
            rows.append({"node": name, **{k: info.get(k, "") for k in ("kernel", "iproute2", "vsftpd", "openssh")},
                         "sysctls": ", ".join(f"{k}={v}" for k, v in (info.get("sysctls") or {}).items())})
        out += ["Software on the nodes:", "", markdown_table(pd.DataFrame(rows)), ""]

    out += ["## Queueing delay", ""]
    for f in figures:
        if f.endswith("queueing-delay.png"):
            out += [f"![Queueing delay of PIE and RED vs time]({f})", ""]
    others = [f for f in figures if not f.endswith("queueing-delay.png")]
    if others:
        out += ["Also: " + ", ".join(f"[{f}]({f})" for f in others), ""]
    out += ["Queueing delay = ping RTT minus the client's base RTT (the "
            f"{spec.get('base_rtt', {}).get('statistic', 'median')} of a ping run before any load).", ""]

    out += ["## Summary per phase", "",
            "samples = ping samples of all clients in the phase; delay statistics in ms over those "
            "samples; utilization = bytes sent on the bottleneck in the phase / (rate x duration).", "",
            markdown_table(summary, {"utilization": 2}), ""]

    out += ["## The paper's claims", ""]
    for c in verdict["claims"]:
        status = c.get("status") or ("holds" if c["holds"] else "fails")
        out += [f"### {c['id']}: {_STATUS.get(status, status)}", "", f"> {c['text']}", ""]
        if c.get("reason"):
            what = "Inconclusive" if status == "inconclusive" else "Not evaluable"
            out += [f"{what}: {c['reason']}. What is there: {c['evidence']}", ""]
        else:
            out += [c["evidence"], ""]
    out += ["Thresholds are those fixed in the experiment spec before any run (section `claims`).", ""]

    if health:
        out += ["## Health of the substrate", "",
                "Each trial's own data checked against the thresholds of the experiment file (section "
                "`health`; analysis/health.py says how each is measured): CPU busy of the nodes' machine, "
                "ping samples received, flow-start lag and skew per phase, the collectors' sampling, "
                "queueing delay beyond the buffer's drain time, and the controller machine's load. A trial "
                "that fails one makes the claims reading it inconclusive.", "",
                markdown_table(health_table(health)), ""]

    out += ["## Data problems", ""]
    incomplete = [t for t in run.trials if t.incomplete]
    out += [f"- trial {t.id} incomplete: {', '.join(t.incomplete)}" for t in incomplete]
    out += [f"- {p}" for p in problems]
    if not problems and not incomplete:
        out += ["None: every expected raw file was present."]
    if spec.name == "pie-vs-red":
        out += ["", "## The 2016 finding", "", FINDING_2016]
    where = f"results/{d.get('experiment', spec.name)}/{run.dir.name}"
    sub = "" if out_dir is None or out_dir == run.dir else f" (this one is in `{out_dir.name}/`)"
    out += ["", "## Regenerate", "", f"`python -m analysis {where}{' --partial' if (record or {}).get('partial') else ''}` "
            "checks raw/ against run.json and writes tidy.csv.gz, summary.csv, verdict.json, figures/, "
            "this report and analysis.json from run.json and raw/ (both only read). The same toolkit "
            "version writes the same bytes again; another version writes into a new "
            f"`analysis-<version>/` folder of the run, keeping this one{sub}.", ""]
    return "\n".join(out)
