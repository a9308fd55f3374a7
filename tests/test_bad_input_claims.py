"""Bad input, schema_version 2 claims, figures, labels, health keys, collectors, sweeps and
YAML that expands or nests without bound (issue 20): one line naming the file, the field (or
line) and what was expected; exit 2; nothing changed.

Every row copies the committed experiments/pie-lab/experiment.yml into its temporary folder
and edits the text (each replaced text must occur exactly once, so a row cannot silently
stop testing anything when the experiment changes), then runs ``netrepro validate <file>``
through the real command line (tests/badinput.py). Each of these files used to pass
validate and fail later: in the analysis (a traceback, or a claim judged on nothing), in
``run --sweep`` (a MemoryError), or never (a hung validate).
"""

from __future__ import annotations


import pytest

from badinput import REPO, Row, edited_copy, run_row

REAL = REPO / "experiments" / "pie-lab" / "experiment.yml"
TEXT = REAL.read_text()
FILE = "{tmp}/experiment.yml"
VALIDATE = ["validate", FILE]


def edited(*pairs: tuple[str, str], tail: str = ""):
    """A row setup writing the committed experiment with each (old, new) text replaced and
    ``tail`` (top-level YAML) added at its end (:func:`badinput.edited_copy`)."""
    return edited_copy(REAL, *pairs, tail=tail)


def appended(extra: str):
    """A row setup writing the committed experiment with ``extra`` (top-level YAML) after it."""
    return edited(tail=extra)


CLAIMS = "\nclaims:\n"
UTILIZATION = 'select: {statistic: utilization, subjects: ["s2:s2-eth2"]}'
PIE_LOWER = "lower: {statistic: rtt_median_ms, trials: [pie], subjects: [h2-h3]}"
DROPTAIL_LABELS = "labels: {aqm: droptail, rate: 1gbit}"
COLLECTOR = '  - {kind: qdisc_stats, at: "s2:s2-eth2", interval_s: 0.1}\n'
IPERF3 = "{kind: iperf3, id: h1-h3, from: h1, to: h3, duration_s: 90}"
PING = "  - {kind: ping, id: h2-h3, from: h2, to: h3, interval_s: 1, duration_s: 90}\n"

#: The "billion laughs": nine levels of nine aliases, 9^9 = 387,420,489 strings in 300 bytes.
BOMB = "laughs:\n  a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"  {n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi"))


#: The line where the bomb passes 100,000 values: level f (1 + 9 x 66,430 = 597,871 values),
#: the bomb's 7th line, inserted before ``schema_version: 2``.
BOMB_LINE = TEXT[:TEXT.index("schema_version: 2\n")].count("\n") + 1 + 6


def claim(check: str) -> tuple[str, str]:
    """An edit putting a claim with the flow-mapping ``check`` first among the claims."""
    return (CLAIMS, f"{CLAIMS}  - id: added\n    text: an added claim\n    check: {check}\n")


def sweep(*factors: str) -> str:
    return "sweep:\n  factors:\n" + "".join(f"    - {f}\n" for f in factors)


#: The pie trial's PIE layer, by path (the trial's id, the port, the layer's place).
PIE = "trials.pie.qdiscs.s2:s2-eth2.1"
#: The queue figure, the file's figures[2], without its closing brace.
QUEUE_FIGURE = 'title: "Queue of s2-eth2 (bytes)"'
RISE = ("{kind: rise_and_fall, select: {statistic: rtt_median_ms, subjects: [h2-h3], trials: [droptail, pie]}, "
        "order: trials, peak: pie-100m, tolerance: 1, min_rise: 1}")

ROWS = [
    # --- ids that name a verdict's line and a figure's files ---------------------------------
    Row("claim-id-twice", VALIDATE, ["experiment.yml", "claims[1].id", "'droptail-bufferbloat' is already claims[0]'s",
                                     "expected unique claim ids"],
        setup=edited(claim("{kind: bound, select: {statistic: rtt_median_ms, trials: [droptail], subjects: [h2-h3]}, "
                           "min: 1}"), ("id: added\n", "id: droptail-bufferbloat\n"))),
    Row("figure-id-twice", VALIDATE, ["experiment.yml", "figures[1].id", "'ping-rtt' is already figures[0]'s",
                                      "expected unique figure ids"],
        setup=edited(("{id: throughput, metric: throughput_mbit", "{id: ping-rtt, metric: throughput_mbit"))),
    # a rate scale whose rates round to 0 bit/s (the simulator died of SIGFPE at 1e-300)
    Row("rate-scale-min-below-the-floor", VALIDATE, [FILE, "rate_scale.min", "expected a number >= 0.001", "1e-300"],
        setup=edited(("  min: 0.02\n", "  min: 1.0e-300\n"))),
    # --- claims that select what the analysis does not compute --------------------------
    Row("claim-unknown-statistic", VALIDATE,
        [FILE, "claims[3].check.select.statistic", "unknown statistic 'utilisation'", "utilization"],
        setup=edited((UTILIZATION, UTILIZATION.replace("utilization", "utilisation")))),
    Row("claim-unknown-subject", VALIDATE,
        [FILE, "claims[1].check.lower.subjects", "unknown subject 'h9-h3'", "h2-h3"],
        setup=edited((PIE_LOWER, PIE_LOWER.replace("h2-h3", "h9-h3")))),
    Row("claim-statistic-its-subject-lacks", VALIDATE,
        [FILE, "claims[3].check.select.subjects", "trial droptail computes no utilization of h1-h3"],
        setup=edited((UTILIZATION, UTILIZATION.replace('"s2:s2-eth2"', "h1-h3")))),
    Row("claim-when-unknown-statistic", VALIDATE,
        [FILE, "claims[0].when.select.statistic", "unknown statistic 'jain'"],
        setup=edited(claim("{kind: bound, select: {statistic: rtt_median_ms, subjects: [h2-h3]}, max: 500}\n"
                           "    when: {select: {statistic: jain}, min: 0.5}"))),
    Row("claim-min-above-max", VALIDATE,
        [FILE, "claims[0].check.min", "100 is above max 50", "expected min <= max"],
        setup=edited(("      min: 100\n", "      min: 100\n      max: 50\n"))),
    Row("claim-ratio-counts-differ", VALIDATE,
        [FILE, "claims[1].check.lower", "selects 2 values and higher 1", "expected the same number"],
        setup=edited((PIE_LOWER, PIE_LOWER.replace("trials: [pie]", "trials: [pie, pie-100m]")))),
    Row("claim-rise-and-fall-peak-not-in-order", VALIDATE,
        [FILE, "claims[0].check.peak", "'pie-100m' is not in the selection's trials", "droptail, pie"],
        setup=edited(claim(RISE))),
    Row("claim-rise-and-fall-two-values-per-step", VALIDATE,
        [FILE, "claims[0].check.select", "selects 4 values over 2 trials", "one value per step"],
        setup=edited(claim(RISE.replace("peak: pie-100m", "peak: pie").replace(
            "trials: [droptail, pie]}", "trials: [droptail, pie], phases: [a, b]}")),
            ("\nfigures:\n", "\nphases:\n  - {name: a, start_s: 0, end_s: 45}\n  - {name: b, start_s: 45, end_s: 90}\n"
                             "\nfigures:\n"))),
    Row("claim-whole-trial-statistic-per-phase", VALIDATE,
        [FILE, "claims[0].check.select.phases", "ping_received_fraction is computed for the whole trial only"],
        setup=edited(claim("{kind: bound, select: {statistic: ping_received_fraction, phases: [a]}, min: 0.9}"),
                     ("\nfigures:\n", "\nphases:\n  - {name: a, start_s: 0, end_s: 90}\n\nfigures:\n"))),
    Row("traffic-item-named-all", VALIDATE,
        [FILE, "traffic[1].id", "'all' names the subject of a trial's own statistics"],
        setup=edited(("id: h2-h3, from: h2", "id: all, from: h2"))),
    # --- phases ----------------------------------------------------------------------------
    Row("phase-name-twice", VALIDATE,
        [FILE, "phases[1].name", "'a' already names phases[0]", "unique phase names"],
        setup=edited(("\nfigures:\n", "\nphases:\n  - {name: a, start_s: 0, end_s: 45}\n"
                                      "  - {name: a, start_s: 45, end_s: 90}\n\nfigures:\n"))),
    # --- figures ---------------------------------------------------------------------------
    Row("figure-unknown-metric", VALIDATE,
        [FILE, "figures[3].metric", "unknown metric 'cwnd_byte'", "cwnd_bytes"],
        setup=edited(("metric: cwnd_bytes,", "metric: cwnd_byte,"))),
    Row("figure-unknown-subject", VALIDATE,
        [FILE, "figures[1].subjects", "unknown subject 'h1-h4'"],
        setup=edited(("subjects: [h1-h3]", "subjects: [h1-h4]"))),
    Row("figure-subject-without-the-metric", VALIDATE,
        [FILE, "figures[2].subjects", "h2-h3 records no backlog_bytes"],
        setup=edited(('subjects: ["s2:s2-eth2"], title: "Queue', 'subjects: [h2-h3], title: "Queue'))),
    Row("figure-title-bad-mathtext", VALIDATE,
        [FILE, "figures[1].title", "mathtext cannot parse", "nosuchmacro", "expected valid mathtext"],
        setup=edited(('title: "iperf3 throughput h1 -> h3"', 'title: "$\\\\nosuchmacro{x}$"'))),
    Row("figure-line-label-bad-mathtext", VALIDATE,
        [FILE, "figures[0].lines[0].label", "mathtext cannot parse", "x_"],
        setup=edited(("label: \"20 ms base + PIE's 22 ms target\"", 'label: "$x_$ ms"'))),
    Row("figure-facet-unknown-label", VALIDATE,
        [FILE, "figures[2].facet", "unknown column 'variant'", "expected trial, subject or a label key", "aqm, rate"],
        setup=edited((QUEUE_FIGURE, QUEUE_FIGURE + ", facet: variant"))),
    Row("figure-hue-unknown-label", VALIDATE,
        [FILE, "figures[2].hue", "unknown column 'qdisc'", "expected trial, subject or a label key", "aqm, rate"],
        setup=edited((QUEUE_FIGURE, QUEUE_FIGURE + ", hue: qdisc"))),
    Row("figure-rolling-window-zero", VALIDATE,
        [FILE, "figures[2].rolling.window_s", "expected a number > 0 and <= 86400, got 0"],
        setup=edited((QUEUE_FIGURE, QUEUE_FIGURE + ", rolling: {window_s: 0, statistic: median}"))),
    Row("figure-rolling-window-negative", VALIDATE,
        [FILE, "figures[2].rolling.window_s", "expected a number > 0 and <= 86400, got -1"],
        setup=edited((QUEUE_FIGURE, QUEUE_FIGURE + ", rolling: {window_s: -1, statistic: median}"))),
    Row("figure-rolling-unknown-statistic", VALIDATE,
        [FILE, "figures[2].rolling.statistic", "expected enum ['median', 'mean', 'p95', 'max', 'min'], got 'p50'", "'median', 'mean', 'p95', 'max', 'min'"],
        setup=edited((QUEUE_FIGURE, QUEUE_FIGURE + ", rolling: {window_s: 1, statistic: p50}"))),
    Row("figure-shade-phases-without-phases", VALIDATE,
        [FILE, "figures[2].shade_phases", "the file has no phases to shade", "expected top-level phases"],
        setup=edited((QUEUE_FIGURE, QUEUE_FIGURE + ", shade_phases: true"))),
    Row("phase-label-bad-mathtext", VALIDATE,
        [FILE, "phases[0].label", "mathtext cannot parse", "expected valid mathtext"],
        setup=edited(("\nfigures:\n", '\nphases:\n  - {name: a, start_s: 0, end_s: 90, label: "$10^$ flows"}\n'
                                      "\nfigures:\n"))),
    # --- labels named like a column of the statistics tables -----------------------------
    Row("label-named-value", VALIDATE,
        [FILE, "trials[0].labels.value", "'value' names a column of the analysis's statistics tables"],
        setup=edited((DROPTAIL_LABELS, "labels: {aqm: droptail, value: 1gbit}"))),
    Row("label-named-trial", VALIDATE,
        [FILE, "trials[0].labels.trial", "'trial' names a column"],
        setup=edited((DROPTAIL_LABELS, "labels: {aqm: droptail, trial: 1gbit}"))),
    Row("label-named-phase", VALIDATE,
        [FILE, "trials[0].labels.phase", "'phase' names a column"],
        setup=edited((DROPTAIL_LABELS, "labels: {aqm: droptail, phase: 1gbit}"))),
    # --- health thresholds without data to judge ------------------------------------------
    Row("health-flow-start-lag-without-iperf3-or-ftp", VALIDATE,
        [FILE, "health.flow_start_lag_max_ms", "nothing in this file measures it", "an iperf3 or FTP item"],
        setup=edited(("  - " + IPERF3 + "\n", ""))),
    Row("health-skew-without-two-items-starting-together", VALIDATE,
        [FILE, "health.flow_start_skew_max_ms", "nothing in this file measures it",
         "two iperf3 or FTP items of one trial starting at the same time", "or leave this threshold out"],
        setup=edited(("  flow_start_lag_max_ms: 100\n", "  flow_start_lag_max_ms: 100\n  flow_start_skew_max_ms: 20\n"))),
    Row("health-ping-received-without-ping-item", VALIDATE,
        [FILE, "health.ping_received_min_fraction", "nothing in this file measures it", "expected a ping item"],
        setup=edited((PING, ""), ("  flow_start_lag_max_ms: 100\n",
                                  "  flow_start_lag_max_ms: 100\n  ping_received_min_fraction: 0.9\n"))),
    Row("health-queue-delay-excess-without-base-rtt", VALIDATE,
        [FILE, "health.queue_delay_excess_max_fraction", "nothing in this file measures it", "expected base_rtt"],
        setup=edited(("  flow_start_lag_max_ms: 100\n",
                      "  flow_start_lag_max_ms: 100\n  queue_delay_excess_max_fraction: 0.01\n"))),
    Row("health-queue-delay-tolerance-without-shaped-buffer-on-the-ping-path", VALIDATE,
        [FILE, "health.queue_delay_excess_max_ms", "nothing in this file measures it",
         "a ping item whose path crosses a port with a shaper"],
        setup=edited((PING, PING.replace("to: h3", "to: h1")),
                     ("  flow_start_lag_max_ms: 100\n", "  flow_start_lag_max_ms: 100\n  queue_delay_excess_max_ms: 20\n"),
                     tail="base_rtt: {duration_s: 10, statistic: median}\n")),
    Row("health-sampling-without-collector-or-ping", VALIDATE,
        [FILE, "health.collector_sampling_min_fraction", "nothing in this file measures it", "a ping item or a qdisc_stats collector"],
        setup=edited((PING, ""),
                     ("\ncollectors:\n" + "  # The manual plots the queue of s2-eth2 (plot_q.sh); here it is sampled "
                      "every 0.1 s.\n" + COLLECTOR, "\ncollectors: []\n"))),
    # --- two qdisc_stats collectors on one node: the second would replace the first -------
    Row("qdisc-stats-twice-on-a-node", VALIDATE,
        [FILE, "collectors[1].at", "s2 already has a qdisc_stats collector (collectors[0])", "one per node"],
        setup=edited((COLLECTOR, COLLECTOR + COLLECTOR.replace("s2-eth2", "s2-eth1")))),
    # --- resource exhaustion: refused in bounded time and memory --------------------------
    Row("yaml-alias-bomb", VALIDATE,
        [FILE, f"line {BOMB_LINE}", "expected at most 100000 values once aliases are expanded"],
        setup=edited(("schema_version: 2\n", BOMB + "schema_version: 2\n")), timeout_s=20),
    Row("yaml-deep-nesting", VALIDATE,
        [FILE, "expected collections nested at most 64 deep"],
        setup=edited(("schema_version: 2\n", "deep: " + "[" * 100_000 + "]" * 100_000 + "\nschema_version: 2\n")),
        timeout_s=20),
    Row("yaml-deep-nesting-mappings", VALIDATE,
        [FILE, "expected collections nested at most 64 deep"],
        setup=edited(("schema_version: 2\n", "deep: " + "{a: " * 5000 + "1" + "}" * 5000 + "\nschema_version: 2\n")),
        timeout_s=20),
    # --- sweeps: validate resolves them as run --sweep does --------------------------------
    Row("sweep-grid-too-large", VALIDATE,
        [FILE, "sweep.factors", "60 x 60 x 60 x 60 x 60 x 60 values make 46656000000 points", "at most 200"],
        setup=appended(sweep(*[f"{{name: f{k}, path: {p}, values: [{', '.join(str(v) for v in range(1, 61))}]}}"
                               for k, p in enumerate([f"{PIE}.target_ms", f"{PIE}.tupdate_ms", f"{PIE}.alpha",
                                                      f"{PIE}.beta", f"{PIE}.limit_packets",
                                                      "trials.pie-100m.qdiscs.s2:s2-eth2.1.target_ms"])])),
        timeout_s=30),
    Row("sweep-too-many-trial-instances", VALIDATE,
        [FILE, "sweep.factors", "1200 trial instances (200 points of 6 trials)", "at most 1000"],
        # three more trials: 6 trials x 100 x 2 points
        setup=edited(("\ntraffic:\n", "  - {id: x1}\n  - {id: x2}\n  - {id: x3}\n\ntraffic:\n"), tail=sweep(
            *[f"{{name: f{k}, path: {p}, values: [{', '.join(str(v) for v in range(1, n))}]}}"
              for k, (p, n) in enumerate([(f"{PIE}.target_ms", 101), (f"{PIE}.tupdate_ms", 3)])])),
        timeout_s=30),
    Row("sweep-path-does-not-exist", VALIDATE,
        [FILE, "sweep.factors[0].paths", "no key 'target_mss'"],
        setup=appended(sweep(f"{{name: target, path: {PIE}.target_mss, values: [5, 20]}}"))),
    Row("sweep-path-set-at-provisioning", VALIDATE,
        [FILE, "sweep.factors[0].paths", "is set when the nodes are provisioned"],
        setup=appended(sweep("{name: mtu, path: topology.nodes.h1.interfaces.h1-eth0.address, values: [10.0.0.9/8]}"))),
    Row("sweep-value-out-of-range", VALIDATE,
        [FILE, "sweep", "the point target=-5 is not a valid experiment", "trials[1].qdiscs.s2:s2-eth2[1]", "-5"],
        setup=appended(sweep(f"{{name: target, path: {PIE}.target_ms, values: [22, -5]}}"))),
    Row("sweep-unknown-trial", VALIDATE,
        [FILE, "sweep.factors[0].trials", "'pie-1g' is not a trial"],
        setup=appended(sweep(f"{{name: target, path: {PIE}.target_ms, values: [22, 5], trials: [pie-1g]}}"))),
    Row("sweep-trial-not-a-name", VALIDATE,
        [FILE, "sweep.factors[0].trials[0]", "expected pattern", "$(touch /tmp/nrINJ)"],
        setup=appended(sweep(f"{{name: target, path: {PIE}.target_ms, values: [22, 5], trials: ['$(touch /tmp/nrINJ)']}}"))),
    Row("sweep-factor-named-like-a-label", VALIDATE,
        [FILE, "sweep.factors[0].name", "'aqm' names a column"],
        setup=appended(sweep(f"{{name: aqm, path: {PIE}.target_ms, values: [22, 5]}}"))),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_bad_input_claims(row, tmp_path):
    run_row(row, tmp_path)


def test_the_committed_experiment_is_valid(tmp_path):
    """The rows' starting point passes, so each row's refusal is its own edit's."""
    import subprocess
    import sys
    (tmp_path / "experiment.yml").write_text(TEXT)
    proc = subprocess.run([sys.executable, "-m", "netrepro", "validate", str(tmp_path / "experiment.yml")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
