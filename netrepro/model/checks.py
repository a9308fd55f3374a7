"""Cross-checks of an experiment's analysis part that its schema cannot express: phases,
collectors, labels, item ids, fq buckets, claims, quantities and figures. Each raises
:class:`netrepro.model.experiment.ModelError` naming the file, field and what was expected.
"""

from __future__ import annotations

from dataclasses import dataclass

from netrepro.core import tc
from netrepro.model.claims import Check, Claim, Selection
from netrepro.model.experiment import Model, fail
from netrepro.model.figures import Figure
from netrepro.model.vocabulary import (RATE_SCALED_UNITS, RESERVED_COLUMNS, TRIAL_SUBJECT, WHOLE_TRIAL_STATISTICS, metrics, quantity_name,
    rate_scaled_reads, statistics)


def _metric_in(metric: str, names: list[str]) -> bool:
    return any(metric == x or (x.endswith("_*") and metric.startswith(x[:-1]) and len(metric) > len(x) - 1)
               for x in names)


def check_phases(m: Model, path) -> None:
    """Phase names are unique (a claim or figure names a phase by its name)."""
    names = [p["name"] for p in m.data["phases"]]
    for i, n in enumerate(names):
        if names.index(n) != i:
            fail(path, f"phases[{i}].name", f"{n!r} already names phases[{names.index(n)}]; expected unique phase names")


def check_collectors(m: Model, path) -> None:
    """At most one ``qdisc_stats`` collector per node: a node's collector writes one
    qdisc.jsonl and the trial's timeline keys it by node (:func:`trial_timeline`), so a second one
    would silently replace the first."""
    seen: dict[str, int] = {}
    for i, c in enumerate(m.collectors):
        if c.node in seen:
            fail(path, f"collectors[{i}].at", f"{c.node} already has a {c.kind} collector (collectors[{seen[c.node]}]); "
                                               f"expected one per node (its samples go to the node's one qdisc.jsonl)")
        seen[c.node] = i


def check_labels(m: Model, path) -> None:
    """No trial label is named like a column of the analysis's tables (:data:`RESERVED_COLUMNS`)."""
    for i, t in enumerate(m.trials):
        for k in t.labels:
            if k in RESERVED_COLUMNS:
                fail(path, f"trials[{i}].labels.{k}", f"{k!r} names a column of the analysis's statistics tables "
                                                       f"(summary.csv); expected another name, not one of: "
                                                       f"{', '.join(RESERVED_COLUMNS)}")


def _check_text(path, field: str, text: str) -> None:
    r"""A figure's title or line label is text matplotlib draws: where it holds a pair of
    unescaped ``$`` (matplotlib.cbook.is_math_text) it is mathtext, and must parse (else
    drawing the figure stops the analysis). Refused here, with the parser's reason, rather
    than drawn literally: a ``$`` pair is how a file asks for math (``$\mu$s``), and a typo in
    it is the author's to fix. matplotlib is imported only for such text."""
    if "$" not in text:
        return
    from matplotlib import cbook
    if not cbook.is_math_text(text):
        return
    from matplotlib.mathtext import MathTextParser
    try:
        MathTextParser("path").parse(text, dpi=72)
    except ValueError as exc:
        why = [ln for ln in str(exc).splitlines() if ln.strip()][-1:] or [""]
        why = why[0].split("Exception: ", 1)[-1].split("  (at char")[0]
        fail(path, field, f"matplotlib's mathtext cannot parse {text!r} ({why}); expected valid mathtext between "
                           f"$ signs, or \\$ for a dollar sign")


def check_item_ids(data: dict, path) -> None:
    """No traffic item is named like the subject of a trial's own statistics (:data:`TRIAL_SUBJECT`)."""
    lists = [("traffic", data["traffic"])] + [(f"trials[{i}].traffic", t["traffic"])
                                              for i, t in enumerate(data["trials"]) if "traffic" in t]
    for field, items in lists:
        for j, it in enumerate(items):
            if it["id"] == TRIAL_SUBJECT:
                fail(path, f"{field}[{j}].id", f"{TRIAL_SUBJECT!r} names the subject of a trial's own statistics "
                                                f"(total_throughput_mbit, jain_index); expected another id")


#: Bytes of an Ethernet header: a full-size frame is the MTU plus these (IEEE 802.3), and so
#: is a full-sized packet in a qdisc's byte count (the backlog counts ``qdisc_pkt_len(skb)``,
#: skb->len at the egress of an Ethernet device, include/net/sch_generic.h).
ETHERNET_HEADER_BYTES = 14


def check_buckets(path, data: dict, mtu_bytes: int) -> None:
    """A TBF's bucket (:data:`netrepro.core.tc.BUCKET_KEYS`) holds at least one full-size frame
    (``links.mtu_bytes`` + 14 B of Ethernet header): tbf_enqueue drops a packet larger than the bucket (sch_tbf.c, unless it
    can segment a GSO packet), so a smaller burst passes no full-size frame at all (tc-tbf(8):
    the burst must be at least the MTU). Checked where the file gives a stack (``qdiscs`` and
    each trial's), so the message names the field written. Raises ModelError."""
    frame = mtu_bytes + ETHERNET_HEADER_BYTES
    where = [("qdiscs", data.get("qdiscs", {}))]
    where += [(f"trials[{i}].qdiscs", t.get("qdiscs", {})) for i, t in enumerate(data["trials"])]
    for field, qd in where:
        for port, stack in qd.items():
            for j, layer in enumerate(map(tc.Qdisc.from_data, stack)):
                for key in tc.bucket_keys(layer):
                    v = layer.params.get(key)
                    if isinstance(v, (int, float)) and not isinstance(v, bool) and v < frame:
                        fail(path, f"{field}.{port}[{j}].{key}", f"{v:g} B holds no full-size frame; expected at least "
                              f"{frame} B (links.mtu_bytes {mtu_bytes} + {ETHERNET_HEADER_BYTES} B of Ethernet header)")


@dataclass(frozen=True)
class _Known:
    """What the analysis has for one file, as claims and figures may select it: trial ids,
    phase names, ``stats`` (:func:`statistics`: ``{trial: {subject: [statistic]}}``), every
    statistic (sorted) and every subject (in file order)."""
    tids: list[str]
    phases: list[str]
    stats: dict[str, dict[str, list[str]]]
    all_stats: list[str]
    subjects: list[str]


def _known(m: Model) -> _Known:
    """The trials, phases, statistics and subjects the analysis has for ``m`` (:class:`_Known`)."""
    stats = statistics(m)
    return _Known(tids=[t.id for t in m.trials], phases=[p["name"] for p in m.data["phases"]], stats=stats,
                  all_stats=sorted({x for subj in stats.values() for names in subj.values() for x in names}),
                  subjects=list(dict.fromkeys(s for subj in stats.values() for s in subj)))


def _check_unique_ids(m: Model, path) -> None:
    """Nothing; raises ModelError at the first claim, then figure, whose id an earlier one has."""
    for section in ("claims", "figures"):
        ids: dict[str, int] = {}
        for i, item in enumerate(getattr(m, section)):
            if item.id in ids:
                fail(path, f"{section}[{i}].id", f"{item.id!r} is already {section}[{ids[item.id]}]'s; "
                                                  f"expected unique {section[:-1]} ids")
            ids[item.id] = i


def _check_selection(path, field: str, trials: tuple[str, ...], phases: tuple[str, ...], known: _Known) -> None:
    """Nothing; raises ModelError unless every trial and phase named is one of ``known``'s."""
    for t in trials:
        if t not in known.tids:
            fail(path, field + ".trials", f"unknown trial {t!r}; expected one of: {', '.join(known.tids)}")
    for p in phases:
        if p not in known.phases:
            fail(path, field + ".phases", f"unknown phase {p!r}; expected one of: "
                                           f"{', '.join(known.phases) or '(no phases)'}")


def _selected_values(path, field: str, sel: Selection, known: _Known) -> int:
    """The number of values a claim's selection ``sel`` reads (trials x subjects x phases),
    once its trials, phases, statistic and subjects are checked to be ones the analysis has."""
    _check_selection(path, field, sel.trials, sel.phases, known)
    st = sel.statistic
    if st not in known.all_stats:
        fail(path, field + ".statistic", f"unknown statistic {st!r}; the analysis computes, for this file: "
                                          f"{', '.join(known.all_stats) or '(none)'}")
    for s in sel.subjects:
        if s not in known.subjects:
            fail(path, field + ".subjects", f"unknown subject {s!r}; expected one of: {', '.join(known.subjects)} "
                                             f"(traffic item ids, collectors' ports, {TRIAL_SUBJECT})")
    if st in WHOLE_TRIAL_STATISTICS and any(p != "all" for p in sel.phases):
        fail(path, field + ".phases", f"{st} is computed for the whole trial only; expected no phases")
    n = 0
    for t in sel.trials or known.tids:
        have = known.stats[t]
        subs = sel.subjects or [s for s, names in have.items() if st in names]
        if not subs:
            fail(path, field, f"trial {t} computes no {st} (no subject of it has one); "
                               f"expected a trial whose traffic or collectors give it")
        for s in subs:
            if st not in have.get(s, []):
                fail(path, field + ".subjects", f"trial {t} computes no {st} of {s}; its statistics of {s}: "
                                                 f"{', '.join(have.get(s, [])) or '(none: not in this trial)'}")
        n += len(subs)
    return n * len(sel.phases or ["all"])


def _check_range(path, field: str, ch: Check) -> None:
    """Nothing; raises ModelError if ``ch`` has both ``min`` and ``max`` and min > max."""
    if ch.min is not None and ch.max is not None and ch.min > ch.max:
        fail(path, field + ".min", f"{ch.min} is above max {ch.max}; expected min <= max")


def _check_claim_check(path, f: str, ch: Check, known: _Known) -> None:
    """Nothing; raises ModelError unless one claim check ``ch`` (each check of an ``all_of``)
    selects what the analysis has, with min <= max, as many values in higher as in lower, and a
    rise_and_fall's one value per step of its order, which holds its peak."""
    if ch.kind == "all_of":
        for j, sub in enumerate(ch.checks):
            _check_claim_check(path, f"{f}.checks[{j}]", sub, known)
        return
    counts = {key: _selected_values(path, f"{f}.{key}", getattr(ch, key), known) for key in ("select", "higher", "lower")
              if getattr(ch, key) is not None}
    if ch.kind in ("bound", "difference"):
        _check_range(path, f, ch)
    if ch.kind in ("difference", "ratio") and counts["higher"] != counts["lower"]:
        fail(path, f + ".lower", f"selects {counts['lower']} values and higher {counts['higher']}; expected the "
                                  f"same number (each value of higher is compared with the one of lower in its place)")
    elif ch.kind == "rise_and_fall":
        order = ch.select.steps(ch.order)
        if ch.peak not in order:
            fail(path, f + ".peak", f"{ch.peak!r} is not in the selection's {ch.order}; expected one of: "
                                     f"{', '.join(order) or '(none: give select.' + ch.order + ')'}")
        if counts["select"] != len(order):
            fail(path, f + ".select", f"selects {counts['select']} values over {len(order)} {ch.order}; expected "
                                       f"one value per step of the order (one subject, and one "
                                       f"{'trial' if ch.order == 'phases' else 'phase'})")


def _check_claim(m: Model, path, i: int, cl: Claim, known: _Known, scalable: bool) -> None:
    """Nothing; raises ModelError unless claim ``i`` (``cl``)'s ``when`` and ``check`` select what
    the analysis has, and it gives ``rate_scaling`` exactly when it sets a threshold on a value the
    rate scale changes (and, if the file allows rate scaling, must then give it)."""
    if cl.when:
        _selected_values(path, f"claims[{i}].when.select", cl.when.select, known)
        _check_range(path, f"claims[{i}].when", cl.when)
    _check_claim_check(path, f"claims[{i}].check", cl.check, known)
    reads = rate_scaled_reads(m, cl)
    named = ", ".join(f"{st} ({quantity_name(m, st)[1]})" for st in reads)
    if scalable and reads and cl.rate_scaling is None:
        fail(path, f"claims[{i}].rate_scaling", f"missing: claim {cl.id} sets thresholds on {named}, which the "
                                                  "rate scale changes, and the file allows rate scaling; expected "
                                                  "rate_scaling: proportional (its thresholds on them are multiplied "
                                                  "by k) or none (judged as written at every k)")
    if cl.rate_scaling is not None and not reads:
        fail(path, f"claims[{i}].rate_scaling", f"claim {cl.id} sets no threshold on a value the rate scale "
                                                  f"changes (units {', '.join(RATE_SCALED_UNITS)}); expected no "
                                                  "rate_scaling")


def _check_figure_draws(path, i: int, fig: Figure, known: _Known, mets: dict[str, list[str]]) -> None:
    """Nothing; raises ModelError unless figure ``i`` (``fig``) draws trials, phases, a metric and
    subjects the analysis has (``mets``: :func:`metrics`), with a title and line labels matplotlib
    can draw (:func:`_check_text`)."""
    all_mets = list(dict.fromkeys(x for names in mets.values() for x in names))
    f = f"figures[{i}]"
    _check_selection(path, f, fig.trials, (), known)
    if not _metric_in(fig.metric, all_mets):
        fail(path, f + ".metric", f"unknown metric {fig.metric!r}; the analysis records, for this file: "
                                   f"{', '.join(all_mets) or '(none)'}")
    for s in fig.subjects:
        if s not in mets:
            fail(path, f + ".subjects", f"unknown subject {s!r}; expected one of: {', '.join(mets)}")
        if not _metric_in(fig.metric, mets[s]):
            fail(path, f + ".subjects", f"{s} records no {fig.metric}; its metrics: {', '.join(mets[s])}")
    if fig.title is not None:
        _check_text(path, f + ".title", fig.title)
    for j, line in enumerate(fig.lines):
        _check_text(path, f"{f}.lines[{j}].label", line.label)


def check_claims(m: Model, path) -> None:
    """Every trial, phase, statistic and subject a claim selects, and every trial, phase,
    metric and subject a figure draws, is one the analysis has for this file
    (:func:`statistics`, :func:`metrics`), in every check of an ``all_of`` too; ``min`` <=
    ``max`` (bound, difference, when); a difference or ratio
    selects as many values in ``higher`` as in ``lower`` (they are compared in pairs); a
    ``rise_and_fall`` selects one value per step of its ``order``, which holds its ``peak``;
    figure titles and line labels are text matplotlib can draw (:func:`_check_text`); claim
    ids, and figure ids, are unique (a claim's verdict and a figure's files are named by it)."""
    _check_unique_ids(m, path)
    known = _known(m)
    scalable = bool((m.data.get("rate_scale") or {}).get("allowed"))
    for i, cl in enumerate(m.claims):
        _check_claim(m, path, i, cl, known, scalable)
    mets = metrics(m)
    for i, fig in enumerate(m.figures):
        _check_figure_draws(path, i, fig, known, mets)


def check_quantities(m: Model, path) -> None:
    """``metrics`` renames only a metric the analysis records or a statistic it computes for
    this file, in text matplotlib can draw; each value of ``reference_results[i].values``
    names a statistic, trials, subject and phases the analysis has for this file (phase
    ``all`` is the whole trial) and states either a ``value`` (a number, maybe
    ``approximate``) or a ``finding`` (words). Raises ModelError naming the field."""
    tids = [t.id for t in m.trials]
    phases = [p["name"] for p in m.data["phases"]]
    stats = statistics(m)
    all_stats = sorted({x for subj in stats.values() for names in subj.values() for x in names})
    all_mets = list(dict.fromkeys(x for names in metrics(m).values() for x in names))
    for name, d in (m.data.get("metrics") or {}).items():
        if name not in all_stats and not _metric_in(name, all_mets):
            fail(path, f"metrics.{name}", f"unknown metric or statistic {name!r}; the analysis records, for this "
                                           f"file: {', '.join(all_mets + all_stats)}")
        _check_text(path, f"metrics.{name}.label", d["label"])
    for i, ref in enumerate(m.data.get("reference_results") or []):
        for j, v in enumerate(ref.get("values") or []):
            f = f"reference_results[{i}].values[{j}]"
            if ("value" in v) == ("finding" in v):
                fail(path, f, "expected value (the number the source states) or finding (its words where it states "
                               "none), " + ("not both" if "value" in v else "one of them"))
            if v.get("approximate") is not None and "value" not in v:
                fail(path, f + ".approximate", "qualifies a value; expected it beside value, not finding")
            if v["statistic"] not in all_stats:
                fail(path, f + ".statistic", f"unknown statistic {v['statistic']!r}; the analysis computes, for this "
                                              f"file: {', '.join(all_stats) or '(none)'}")
            for t in v["trials"]:
                if t not in tids:
                    fail(path, f + ".trials", f"unknown trial {t!r}; expected one of: {', '.join(tids)}")
                if v.get("subject") and v["statistic"] not in stats[t].get(v["subject"], []):
                    fail(path, f + ".subject", f"trial {t} computes no {v['statistic']} of {v['subject']}; its "
                                                f"subjects with it: {', '.join(s for s, n in stats[t].items() if v['statistic'] in n) or '(none)'}")
            for p in v.get("phases", []):
                if p != "all" and p not in phases:
                    fail(path, f + ".phases", f"unknown phase {p!r}; expected all or one of: {', '.join(phases) or '(no phases)'}")


#: The columns a figure's ``facet`` and ``hue`` may name besides the trials' label keys
#: (analysis/figures.py ``figure``): each trial's id and each line's subject.
FIGURE_COLUMNS = ("trial", "subject")


def check_figures(m: Model, path) -> None:
    """A figure's ``facet`` and ``hue`` name ``trial``, ``subject`` or a label key some trial
    has; ``shade_phases`` needs the file's phases; a phase's ``label`` is text matplotlib can
    draw (:func:`_check_text`). (Metrics, subjects, trials, titles and lines: :func:`check_claims`;
    ``rolling``'s window and statistic: the schema.)"""
    keys = list(dict.fromkeys(k for t in m.trials for k in t.labels))
    for i, ph in enumerate(m.data["phases"]):
        if "label" in ph:
            _check_text(path, f"phases[{i}].label", ph["label"])
    for i, fig in enumerate(m.figures):
        for opt in ("facet", "hue"):
            if getattr(fig, opt) not in FIGURE_COLUMNS + tuple(keys):
                fail(path, f"figures[{i}].{opt}", f"unknown column {getattr(fig, opt)!r}; expected trial, subject or a "
                                                   f"label key of the trials: {', '.join(keys) or '(the trials have no labels)'}")
        if fig.shade_phases and not m.phases:
            fail(path, f"figures[{i}].shade_phases", "the file has no phases to shade; expected top-level "
                                                      "phases: [{name, start_s, end_s}] or no shade_phases")
