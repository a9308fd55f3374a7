"""Bad input, experiment file and TIME_SCALE (issue 6, section 2): one line naming the file,
the field (or line, or option) and what was expected; exit 2; nothing changed.

Every experiment-file row copies pie-vs-red's schema_version 1 file
(tests/data/specs/pie-vs-red-v1.yml, conftest.PIE_VS_RED_V1: these rows check the version 1
schema and cross-checks) into its temporary folder and edits the text, so a duplicate key is really a duplicate in the
file the user would write, and runs ``netrepro validate <file>`` through the real command
line (tests/badinput.py). The TIME_SCALE rows run ``netrepro run`` / ``reproduce``, which
must refuse the value before anything touches a site (the harness checks that no file of
the temporary state folder or of the repository changed).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from badinput import REPO, Row, edited_copy, run_row
from conftest import PIE_VS_RED_V1

REAL = PIE_VS_RED_V1
TEXT = REAL.read_text()
FILE = "{tmp}/experiment.yml"
VALIDATE = ["validate", FILE]


def _line(text: str) -> int:
    """1-based line of ``text`` (which must occur once) in the version 1 file."""
    assert TEXT.count(text) == 1, f"{text!r} occurs {TEXT.count(text)} times in {REAL}"
    return TEXT[: TEXT.index(text)].count("\n") + 1


def edited(*pairs: tuple[str, str]):
    """A row setup writing the version 1 file with each (old, new) text replaced
    (:func:`badinput.edited_copy`)."""
    return edited_copy(REAL, *pairs)


def raw(data: bytes):
    """A row setup writing ``data`` as the experiment file."""
    def setup(tmp: Path) -> None:
        (tmp / "experiment.yml").write_bytes(data)
    return setup


#: An AQM that no trial runs, inserted at the top of ``aqms``.
CODEL = "aqms:\n  codel:\n    qdisc: codel\n    params: {target_ms: 5, interval_ms: 100}\n"
#: The first claim's AQM (``bound`` on pie) and the RED claims' variants.
CLAIM0_AQM = "      kind: bound                 # every selected row's statistic within [min, max]\n      aqm: pie\n"


def health_as(value: str):
    """The version 1 file with its whole ``health:`` section replaced by ``health: <value>``."""
    start = TEXT.index("\nhealth:\n") + 1
    end = TEXT.index("\n\n", start) + 1
    return edited((TEXT[start:end], f"health: {value}\n"))


def bad_param(params: str):
    """A codel AQM (not in any trial) whose params are ``params`` (YAML flow mapping)."""
    return edited(("aqms:\n", f"aqms:\n  codel:\n    qdisc: codel\n    params: {params}\n"))


ROWS = [
    # --- duplicate keys: refused with the file, the line and the key ---------------------
    Row("node-defined-twice", VALIDATE,
        [FILE, f"line {_line('    client2:')}", "duplicate key 'client1'", f"first at line {_line('    client1:')}"],
        setup=edited(("    client2:\n", "    client1:\n"))),
    Row("aqm-parameter-twice", VALIDATE,
        [FILE, f"line {_line('      target_ms: 20') + 1}", "duplicate key 'target_ms'"],
        setup=edited(("      target_ms: 20\n", "      target_ms: 20\n      target_ms: 5\n"))),
    Row("trial-key-twice-in-flow-mapping", VALIDATE,
        [FILE, f"line {_line('  - {aqm: red, variant: unlimited}')}", "duplicate key 'aqm'"],
        setup=edited(("  - {aqm: red, variant: unlimited}", "  - {aqm: red, variant: unlimited, aqm: pie}"))),
    Row("top-level-section-twice", VALIDATE,
        [FILE, "duplicate key 'base_rtt'"],
        setup=edited(("base_rtt:\n", "base_rtt: {duration_s: 5, interval_s: 0.1}\nbase_rtt:\n"))),
    # --- claims about what no trial runs -------------------------------------------------
    Row("claim-on-aqm-no-trial-runs", VALIDATE,
        [FILE, "claims[0].check.aqm", "no trial runs AQM 'codel'", "pie, red"],
        setup=edited(("aqms:\n", CODEL), (CLAIM0_AQM, CLAIM0_AQM.replace("aqm: pie", "aqm: codel")))),
    Row("claim-on-variant-no-trial-runs", VALIDATE,
        [FILE, "claims[1].check.variants", "no trial runs variant 'slow'", "unlimited, limited"],
        setup=edited(("variants:\n", "variants:\n  slow: {description: \"declared, never run\"}\n"),
                     ("variants: [limited]", "variants: [slow]"))),
    Row("claim-on-pair-no-trial-runs", VALIDATE,
        [FILE, "claims[2].check.variants", "no trial runs AQM 'red' (check.higher) with variant 'unlimited'"],
        setup=edited(("  - {aqm: red, variant: unlimited}\n", ""))),
    Row("claim-peak-outside-its-phases", VALIDATE,
        [FILE, "claims[1].check.peak_phase", "expected one of the claim's phases (p1, p2, p4, p5)", "'p3'"],
        setup=edited(("      phases: [p1, p2, p3, p4, p5]\n      peak_phase: p3",
                      "      phases: [p1, p2, p4, p5]\n      peak_phase: p3"))),
    Row("claim-statistic-not-in-summary", VALIDATE,
        [FILE, "claims[1].check.statistic", "delay_median", "summary.csv"],
        setup=edited(("      peak_phase: p3\n      statistic: delay_median_ms",
                      "      peak_phase: p3\n      statistic: delay_median"))),
    Row("same-trial-twice", VALIDATE,
        [FILE, "trials[4]", "pie-unlimited is already trials[0]"],
        setup=edited(("  - {aqm: red, variant: limited}\n",
                      "  - {aqm: red, variant: limited}\n  - {aqm: pie, variant: unlimited}\n"))),
    # --- numbers: finite, within a sane range, with their unit ---------------------------
    Row("delay-inf", VALIDATE,
        [FILE, "links.delays[0].delay_ms", "expected a finite number, got .inf"],
        setup=edited(("delay_ms: 100,", "delay_ms: .inf,"))),
    Row("rate-nan", VALIDATE,
        [FILE, "bottleneck.rate_mbit", "expected a finite number, got .nan"],
        setup=edited(("  rate_mbit: 10 ", "  rate_mbit: .nan "))),
    Row("claim-bound-minus-inf", VALIDATE,
        [FILE, "claims[0].check.max", "expected a finite number, got -.inf"],
        setup=edited(("      max: 40 ", "      max: -.inf "))),
    Row("float-overflowing-to-inf", VALIDATE,
        [FILE, "base_rtt.duration_s", "expected a finite number, got .inf"],
        setup=edited(("  duration_s: 30\n", "  duration_s: 1.0e+999\n"))),
    Row("delay-1e12-ms", VALIDATE,
        [FILE, "links.delays[0].delay_ms", "expected a number >= 0 and <= 10000", "got 1e+12", "ms"],
        setup=edited(("delay_ms: 100,", "delay_ms: 1.0e+12,"))),
    Row("delay-1e12-read-as-text", VALIDATE,
        [FILE, "links.delays[0].delay_ms", "expected type 'number'", "'1e12'", "write 1.0e+12"],
        setup=edited(("delay_ms: 100,", "delay_ms: 1e12,"))),
    Row("base-rtt-1e15-s", VALIDATE,
        [FILE, "base_rtt.duration_s", "expected a number > 0 and <= 3600", "got 1e+15", "base RTT"],
        setup=edited(("  duration_s: 30\n", "  duration_s: 1.0e+15\n"))),
    Row("negative-bottleneck-rate", VALIDATE,
        [FILE, "bottleneck.rate_mbit", "expected a number >= 0.01 and <= 100000", "got -10", "Mbit/s"],
        setup=edited(("  rate_mbit: 10 ", "  rate_mbit: -10 "))),
    Row("negative-source-rate", VALIDATE,
        [FILE, "variants.limited.source.max_rate_bytes_per_s", "expected an integer >= 0 and <= 4294967295", "got -25000", "bytes/s"],
        setup=edited(("max_rate_bytes_per_s: 25000", "max_rate_bytes_per_s: -25000"))),
    Row("buffer-1e12-bytes", VALIDATE,
        [FILE, "bottleneck.buffer_bytes", "expected an integer >= 1 and <= 1000000000", "got 1000000000000", "bytes"],
        setup=edited(("  buffer_bytes: 200000 ", "  buffer_bytes: 1000000000000 "))),
    Row("collector-interval-zero", VALIDATE,
        [FILE, "collectors[0].interval_s", "expected a number >= 0.01 and <= 60", "got 0"],
        setup=edited(("target: flow_server, interval_s: 0.1}", "target: flow_server, interval_s: 0}"))),
    Row("phase-end-1e9-s", VALIDATE,
        [FILE, "phases[4].end_s", "<= 86400", "1000000000"],
        setup=edited(("{name: p5, start_s: 200, end_s: 250,", "{name: p5, start_s: 200, end_s: 1000000000,"))),
    Row("key-read-as-boolean", VALIDATE,
        [FILE, "variants", "expected text keys", "True", "quote it"],
        setup=edited(("variants:\n", "variants:\n  on: {description: \"YAML reads on as true\"}\n"))),
    # --- health thresholds: bounded numbers with their unit, on what is measured -----------
    Row("health-fraction-above-one", VALIDATE,
        [FILE, "health.nodes_cpu_busy_max_fraction", "expected a number >= 0 and <= 1", "got 1.5", "a fraction"],
        setup=edited(("  nodes_cpu_busy_max_fraction: 0.6\n", "  nodes_cpu_busy_max_fraction: 1.5\n"))),
    Row("health-negative-lag", VALIDATE,
        [FILE, "health.flow_start_lag_max_ms", "expected a number >= 0 and <= 60000", "got -100", "ms"],
        setup=edited(("  flow_start_lag_max_ms: 100\n", "  flow_start_lag_max_ms: -100\n"))),
    Row("health-skew-1e12-ms", VALIDATE,
        [FILE, "health.flow_start_skew_max_ms", "expected a number >= 0 and <= 60000", "got 1e+12"],
        setup=edited(("  flow_start_skew_max_ms: 20\n", "  flow_start_skew_max_ms: 1.0e+12\n"))),
    Row("health-load-per-core-1e6", VALIDATE,
        [FILE, "health.controller_load_per_core_max", "expected a number >= 0 and <= 1000", "per core"],
        setup=edited(("  controller_load_per_core_max: 1.5\n", "  controller_load_per_core_max: 1.0e+6\n"))),
    Row("health-threshold-nan", VALIDATE,
        [FILE, "health.queue_delay_excess_max_ms", "expected a finite number, got .nan"],
        setup=edited(("  queue_delay_excess_max_ms: 20\n", "  queue_delay_excess_max_ms: .nan\n"))),
    Row("health-threshold-as-text", VALIDATE,
        [FILE, "health.ping_received_min_fraction", "expected type 'number'", "'85%'"],
        setup=edited(("  ping_received_min_fraction: 0.85\n", "  ping_received_min_fraction: 85%\n"))),
    Row("health-threshold-without-unit", VALIDATE,
        [FILE, "health", "unknown field", "'flow_start_lag_ms' was unexpected", "flow_start_lag_max_ms"],
        setup=edited(("  flow_start_lag_max_ms: 100\n", "  flow_start_lag_ms: 100\n"))),
    Row("health-threshold-twice", VALIDATE,
        [FILE, f"line {_line('  flow_start_skew_max_ms: 20')}", "duplicate key 'flow_start_lag_max_ms'"],
        setup=edited(("  flow_start_skew_max_ms: 20\n", "  flow_start_lag_max_ms: 50\n"))),
    Row("health-not-a-mapping", VALIDATE,
        [FILE, "health", "expected type 'object'"],
        setup=health_as("0.6")),
    Row("health-empty", VALIDATE,
        [FILE, "health", "should be non-empty", "thresholds of the substrate's health checks"],
        setup=health_as("{}")),
    Row("health-ping-threshold-without-ping-collector", VALIDATE,
        [FILE, "health.ping_received_min_fraction", "no ping collector measures it", "or leave this threshold out"],
        setup=edited(("  - {kind: ping, nodes: [clients], target: flow_server, interval_s: 0.1}\n", ""))),
    # --- TIME_SCALE: refused before any site is touched ----------------------------------
    Row("time-scale-1e-300-option", ["run", "pie-vs-red", "--time-scale", "1e-300"],
        ["TIME_SCALE", "expected a number from 0.001 to 100", "'1e-300'"]),
    Row("time-scale-1e300-option", ["reproduce", "pie-vs-red", "--time-scale", "1e300"],
        ["TIME_SCALE", "expected a number from 0.001 to 100", "'1e300'"]),
    Row("time-scale-nan-option", ["run", "pie-vs-red", "--time-scale", "nan"],
        ["TIME_SCALE", "expected a number from 0.001 to 100", "'nan'"]),
    Row("time-scale-1e-300-env", ["run", "pie-vs-red"],
        ["TIME_SCALE", "expected a number from 0.001 to 100", "'1e-300'"], env={"TIME_SCALE": "1e-300"}),
    Row("time-scale-1e300-env", ["reproduce", "pie-vs-red"],
        ["TIME_SCALE", "expected a number from 0.001 to 100", "'1e300'"], env={"TIME_SCALE": "1e300"}),
    Row("time-scale-nan-env", ["reproduce", "pie-vs-red"],
        ["TIME_SCALE", "expected a number from 0.001 to 100", "'nan'"], env={"TIME_SCALE": "nan"}),
    Row("time-scale-inf-env", ["run", "pie-vs-red", "--site", "static"],
        ["TIME_SCALE", "'inf'"], env={"TIME_SCALE": "inf"}),
    # --- generic AQM parameters: tc words only -------------------------------------------
    Row("aqm-param-value-with-command", VALIDATE,
        [FILE, "aqms.codel.params.target", "'5ms; reboot'", "expected pattern"],
        setup=bad_param('{target: "5ms; reboot"}')),
    Row("aqm-param-value-with-dollar", VALIDATE,
        [FILE, "aqms.codel.params.interval", "'$(reboot)'"],
        setup=bad_param("{interval: '$(reboot)'}")),
    Row("aqm-param-value-option-like", VALIDATE,
        [FILE, "aqms.codel.params.limit", "'-1000'"],
        setup=bad_param("{limit: '-1000'}")),
    Row("aqm-param-key-with-space", VALIDATE,
        [FILE, "aqms.codel.params", "'tar get'", "expected pattern"],
        setup=bad_param("{'tar get': 5}")),
    Row("aqm-param-unknown-keyword", VALIDATE,
        [FILE, "aqms.codel.params.targett_ms", "'targett' is not a parameter of tc-codel(8)", "interval", "target"],
        setup=bad_param("{targett_ms: 5}")),
    Row("aqm-param-text-for-unit-key", VALIDATE,
        [FILE, "aqms.codel.params.target_ms", "expected a number (the unit is in the name, _ms)", "'5'"],
        setup=bad_param("{target_ms: '5'}")),
    Row("aqm-param-flag-without-negation", VALIDATE,
        [FILE, "aqms.cake.params.diffserv4", "no negative form of diffserv4"],
        setup=edited(("aqms:\n", "aqms:\n  cake:\n    qdisc: cake\n    params: {diffserv4: false}\n"))),
    Row("aqm-param-negative-number", VALIDATE,
        [FILE, "aqms.codel.params.limit", "expected a number >= 0 and <= 4294967295", "got -5"],
        setup=bad_param("{limit: -5}")),
    # --- not an experiment at all --------------------------------------------------------
    Row("binary-junk", VALIDATE,
        [FILE, "(file)", "expected a UTF-8 text experiment file, found binary data"],
        setup=raw(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)),
    Row("nul-bytes", VALIDATE,
        [FILE, "(file)", "expected a UTF-8 text experiment file, found a NUL byte"],
        setup=raw(TEXT.encode()[:200] + b"\x00\x00\x00")),
    Row("yaml-list", VALIDATE,
        [FILE, "(top level)", "expected a mapping of the experiment's fields", "found a list"],
        setup=raw(b"- schema_version: 1\n- name: pie-vs-red\n")),
    Row("yaml-scalar", VALIDATE,
        [FILE, "(top level)", "expected a mapping", "found text"],
        setup=raw(b"pie-vs-red\n")),
    Row("empty-file", VALIDATE,
        [FILE, "(top level)", "expected a mapping", "found an empty file"],
        setup=raw(b"# nothing but a comment\n")),
    Row("yaml-syntax-error", VALIDATE,
        [FILE, "not valid YAML"],
        setup=edited(("  rate_mbit: 10 ", "  rate_mbit: [10 "))),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_bad_input(row, tmp_path):
    run_row(row, tmp_path)


def test_rows_are_many_and_unique():
    ids = [r.id for r in ROWS]
    assert len(ids) == len(set(ids)) and len(ids) >= 15


def test_unedited_copy_validates(tmp_path):
    """The rows fail because of their edit: the same copy, unedited, is valid."""
    import subprocess
    import sys
    edited()(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "netrepro", "validate", str(tmp_path / "experiment.yml")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "valid (schema_version 1: 7 nodes, 4 trials, 5 phases)" in proc.stdout, proc.stderr
