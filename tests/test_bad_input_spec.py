"""Bad input, experiment file and TIME_SCALE (issue 6, section 2): one line naming the file,
the field (or line, or option) and what was expected; exit 2; nothing changed.

Every experiment-file row copies pie-vs-red's experiment file
(experiments/pie-vs-red/experiment.yml, schema_version 2) into its temporary folder and edits
the text (each replaced text must occur exactly once, in the file or in one trial's block), so
a duplicate key is really a duplicate in the file the user would write, and runs
``netrepro validate <file>`` through the real command line (tests/badinput.py). The rows are
pie-vs-red's: its bottleneck stacks (HTB with PIE or RED as the leaf), netem delays, FTP
items, claims, collector and health thresholds; the lab file's mistakes (units per qdisc kind,
sysctl values, reserved names, addressing) are in tests/test_bad_input_model.py.

The version 1 rows give the earlier format's file (tests/data/specs/pie-vs-red-v1.yml,
conftest.PIE_VS_RED_V1): ``validate`` refuses it with the command that converts it, and
``netrepro migrate`` refuses one it cannot convert. The TIME_SCALE rows run ``netrepro run`` /
``reproduce``, which must refuse the value before anything touches a site (the harness checks
that no file of the temporary state folder or of the repository changed).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from badinput import REPO, Row, edited_copy, run_row
from conftest import PIE_VS_RED_V1

REAL = REPO / "experiments" / "pie-vs-red" / "experiment.yml"
TEXT = REAL.read_text()
V1_TEXT = PIE_VS_RED_V1.read_text()
FILE = "{tmp}/experiment.yml"
VALIDATE = ["validate", FILE]
MIGRATE = ["migrate", FILE]


def _line(text: str, within: str = TEXT) -> int:
    """1-based line of ``text`` (which must occur once in ``within``, a part of the file) in
    the file."""
    assert within.count(text) == 1, f"{text!r} occurs {within.count(text)} times in {REAL}"
    assert TEXT.count(within) == 1, f"the block holding {text!r} occurs {TEXT.count(within)} times in {REAL}"
    return TEXT[: TEXT.index(within) + within.index(text)].count("\n") + 1


def trial(tid: str) -> str:
    """The text of trial ``tid`` in the file: from its ``- id:`` line to the next trial or the
    blank line that ends ``trials``."""
    start = TEXT.index(f"  - id: {tid}\n")
    ends = [i for i in (TEXT.find("\n  - id: ", start + 1), TEXT.find("\n\n", start)) if i >= 0]
    return TEXT[start:min(ends) + 1]


def in_trial(tid: str, old: str, new: str) -> tuple[str, str]:
    """An (old, new) edit replacing ``old`` (once in the block) within trial ``tid``'s text."""
    block = trial(tid)
    assert block.count(old) == 1, f"{old!r} occurs {block.count(old)} times in trial {tid} of {REAL}"
    return block, block.replace(old, new)


def edited(*pairs: tuple[str, str]):
    """A row setup writing the schema_version 2 file with each (old, new) text replaced
    (:func:`badinput.edited_copy`)."""
    return edited_copy(REAL, *pairs)


def edited_v1(*pairs: tuple[str, str]):
    """A row setup writing the version 1 file with each (old, new) text replaced."""
    return edited_copy(PIE_VS_RED_V1, *pairs)


def v1_section(name: str) -> str:
    """The text of the version 1 file's top-level section ``name``, up to and with the blank
    line that ends it."""
    start = V1_TEXT.index(f"\n{name}:\n") + 1
    return V1_TEXT[start:V1_TEXT.index("\n\n", start) + 2]


def raw(data: bytes):
    """A row setup writing ``data`` as the experiment file."""
    def setup(tmp: Path) -> None:
        (tmp / "experiment.yml").write_bytes(data)
    return setup


def health_as(value: str):
    """The file with its whole ``health:`` section replaced by ``health: <value>``."""
    start = TEXT.index("\nhealth:\n") + 1
    end = TEXT.index("\n\n", start) + 1
    return edited((TEXT[start:end], f"health: {value}\n"))


#: The end of pie-unlimited's leaf layer (PIE under the HTB, trials[0].qdiscs.router:eth1[1]).
PIE_LEAF_END = "dq_rate_estimator: true}"
PIE_LEAF = "trials[0].qdiscs.router:eth1[1]"
#: pie-unlimited's HTB layer, the bottleneck's rate (trials[0].qdiscs.router:eth1[0]).
HTB = "{kind: htb, rate_mbit: 10}"


def pie_param(extra: str):
    """pie-unlimited's PIE layer with ``extra`` (YAML flow-mapping entries) added."""
    return edited(in_trial("pie-unlimited", PIE_LEAF_END, f"dq_rate_estimator: true, {extra}}}"))


def leaf_as(layer: str):
    """pie-unlimited's leaf layer (PIE) replaced by ``layer`` (a YAML flow mapping)."""
    block = trial("pie-unlimited")
    start = block.index("        - {kind: pie")
    end = block.index(PIE_LEAF_END) + len(PIE_LEAF_END)
    return edited((block, block[:start] + f"        - {layer}" + block[end:]))


#: claims[0]'s first check's selection (pie-near-target: PIE's queueing delay in every phase with
#: unlimited sources).
CLAIM0_TRIALS = "trials: [pie-unlimited], subjects: [all],\n"
#: claims[1]'s selection (red-follows-load: RED's queueing delay, limited sources).
CLAIM1_SELECT = ("select: {statistic: queue_delay_median_ms, trials: [red-limited], subjects: [all], "
                 "phases: [p1, p2, p3, p4, p5]}")
NETEM1 = '"client1:eth1": [{kind: netem, delay_ms: 100, limit_packets: 1000}]'
FTP1 = ("{kind: ftp, id: group1, from: server1, to: client1, flows: 10, start_s: 0, duration_s: 250, "
        "max_rate_bytes_per_s: 25000}")

ROWS = [
    # --- duplicate keys: refused with the file, the line and the key ---------------------
    Row("node-defined-twice", VALIDATE,
        [FILE, f"line {_line('    client2:')}", "duplicate key 'client1'", f"first at line {_line('    client1:')}"],
        setup=edited(("    client2:\n", "    client1:\n"))),
    Row("aqm-parameter-twice", VALIDATE,
        [FILE, f"line {_line('target_ms: 20', trial('pie-unlimited'))}", "duplicate key 'target_ms'"],
        setup=edited(in_trial("pie-unlimited", "target_ms: 20,", "target_ms: 20, target_ms: 5,"))),
    Row("trial-label-twice-in-flow-mapping", VALIDATE,
        [FILE, f"line {_line('labels: {aqm: red, variant: unlimited}')}", "duplicate key 'aqm'"],
        setup=edited(("labels: {aqm: red, variant: unlimited}", "labels: {aqm: red, variant: unlimited, aqm: pie}"))),
    Row("top-level-section-twice", VALIDATE,
        [FILE, "duplicate key 'base_rtt'"],
        setup=edited(("base_rtt:\n", "base_rtt: {duration_s: 5}\nbase_rtt:\n"))),
    # --- claims about trials, statistics, subjects and phases the file does not have -------
    Row("claim-on-trial-not-in-file", VALIDATE,
        [FILE, "claims[0].check.checks[0].select.trials", "unknown trial 'codel-unlimited'", "pie-unlimited"],
        setup=edited((CLAIM0_TRIALS, CLAIM0_TRIALS.replace("pie-unlimited", "codel-unlimited")))),
    Row("claim-on-subject-without-the-statistic", VALIDATE,
        [FILE, "claims[0].check.checks[0].select.subjects",
         "trial pie-unlimited computes no queue_delay_median_ms of router:eth1",
         "its statistics of router:eth1:", "sent_utilization"],
        setup=edited((CLAIM0_TRIALS, CLAIM0_TRIALS.replace("[all]", '["router:eth1"]')))),
    Row("claim-on-trial-removed", VALIDATE,
        [FILE, "claims[2].check.checks[0].higher.trials", "unknown trial 'red-unlimited'"],
        setup=edited((trial("red-unlimited"), ""))),
    Row("claim-peak-outside-its-phases", VALIDATE,
        [FILE, "claims[1].check.peak", "'p3' is not in the selection's phases", "expected one of: p1, p2, p4, p5"],
        setup=edited((CLAIM1_SELECT, CLAIM1_SELECT.replace("p1, p2, p3, p4, p5", "p1, p2, p4, p5")))),
    Row("claim-statistic-not-in-summary", VALIDATE,
        [FILE, "claims[1].check.select.statistic", "unknown statistic 'queue_delay_median'", "queue_delay_median_ms"],
        setup=edited((CLAIM1_SELECT, CLAIM1_SELECT.replace("queue_delay_median_ms", "queue_delay_median")))),
    Row("claim-phase-not-in-file", VALIDATE,
        [FILE, "claims[1].check.select.phases", "unknown phase 'p6'", "p1, p2, p3, p4, p5"],
        setup=edited((CLAIM1_SELECT, CLAIM1_SELECT.replace("p4, p5", "p4, p5, p6")))),
    Row("same-trial-twice", VALIDATE,
        [FILE, "trials[4].id", "'pie-unlimited' is already trials[0]", "expected unique trial ids"],
        setup=edited(("    traffic: *limited\n", "    traffic: *limited\n  - {id: pie-unlimited}\n"))),
    # --- numbers: finite, within a sane range, with their unit ---------------------------
    Row("delay-inf", VALIDATE,
        [FILE, "qdiscs.client1:eth1[0].delay_ms", "expected a finite number, got .inf"],
        setup=edited((NETEM1, NETEM1.replace("delay_ms: 100", "delay_ms: .inf")))),
    Row("rate-nan", VALIDATE,
        [FILE, "trials[0].qdiscs.router:eth1[0].rate_mbit", "expected a finite number, got .nan"],
        setup=edited(in_trial("pie-unlimited", HTB, "{kind: htb, rate_mbit: .nan}"))),
    Row("claim-bound-minus-inf", VALIDATE,
        [FILE, "claims[0].check.checks[2].max", "expected a finite number, got -.inf"],
        setup=edited(("          max: 40\n", "          max: -.inf\n"))),
    Row("float-overflowing-to-inf", VALIDATE,
        [FILE, "base_rtt.duration_s", "expected a finite number, got .inf"],
        setup=edited(("  duration_s: 30\n", "  duration_s: 1.0e+999\n"))),
    Row("delay-1e12-ms", VALIDATE,
        [FILE, "qdiscs.client1:eth1[0].delay_ms", "expected a number >= 0 and <= 3600000", "got 1e+12"],
        setup=edited((NETEM1, NETEM1.replace("delay_ms: 100", "delay_ms: 1.0e+12")))),
    Row("delay-1e12-read-as-text", VALIDATE,
        [FILE, "qdiscs.client1:eth1[0].delay_ms", "expected a number in the unit of the name's suffix", "got '1e12'",
         "write 1.0e+12"],
        setup=edited((NETEM1, NETEM1.replace("delay_ms: 100", "delay_ms: 1e12")))),
    Row("base-rtt-1e15-s", VALIDATE,
        [FILE, "base_rtt.duration_s", "expected a number > 0 and <= 3600", "got 1e+15"],
        setup=edited(("  duration_s: 30\n", "  duration_s: 1.0e+15\n"))),
    Row("negative-bottleneck-rate", VALIDATE,
        [FILE, "trials[0].qdiscs.router:eth1[0].rate_mbit", "expected a number > 0 and <= 100000", "got -10"],
        setup=edited(in_trial("pie-unlimited", HTB, "{kind: htb, rate_mbit: -10}"))),
    Row("negative-source-rate", VALIDATE,
        [FILE, "trials[2].traffic[0].max_rate_bytes_per_s", "expected an integer >= 0 and <= 4294967295",
         "got -25000", "bytes/s"],
        setup=edited((FTP1, FTP1.replace("max_rate_bytes_per_s: 25000", "max_rate_bytes_per_s: -25000")))),
    Row("buffer-1e12-bytes", VALIDATE,
        [FILE, "trials[1].qdiscs.router:eth1[1].limit_bytes", "expected a number > 0 and <= 4294967295",
         "got 1000000000000"],
        setup=edited(in_trial("red-unlimited", "limit_bytes: 200000,", "limit_bytes: 1000000000000,"))),
    Row("collector-interval-zero", VALIDATE,
        [FILE, "collectors[0].interval_s", "expected a number >= 0.01 and <= 60", "got 0", "a sampling interval, s"],
        setup=edited(('at: "router:eth1", interval_s: 0.1}', 'at: "router:eth1", interval_s: 0}'))),
    Row("phase-end-1e9-s", VALIDATE,
        [FILE, "phases[4].end_s", "expected a number > 0 and <= 86400", "got 1000000000", "s (0 < d <= 86400 s)"],
        setup=edited(("{name: p5, start_s: 200, end_s: 250,", "{name: p5, start_s: 200, end_s: 1000000000,"))),
    Row("key-read-as-boolean", VALIDATE,
        [FILE, "trials[0].labels", "expected text keys", "True", "quote it"],
        setup=edited(("labels: {aqm: pie, variant: unlimited}", "labels: {aqm: pie, variant: unlimited, on: yes}"))),
    # --- health thresholds: bounded numbers with their unit, on what is measured -----------
    Row("health-fraction-above-one", VALIDATE,
        [FILE, "health.nodes_cpu_busy_max_fraction", "expected a number >= 0 and <= 1", "got 1.5", "a fraction"],
        setup=edited(("  nodes_cpu_busy_max_fraction: 0.6\n", "  nodes_cpu_busy_max_fraction: 1.5\n"))),
    Row("health-negative-lag", VALIDATE,
        [FILE, "health.flow_start_lag_max_ms", "expected a number >= 0 and <= 60000", "got -100", "ms"],
        setup=edited(("  flow_start_lag_max_ms: 100\n", "  flow_start_lag_max_ms: -100\n"))),
    Row("health-excess-1e12-ms", VALIDATE,
        [FILE, "health.queue_delay_excess_max_ms", "expected a number >= 0 and <= 10000", "got 1e+12", "ms"],
        setup=edited(("  queue_delay_excess_max_ms: 20\n", "  queue_delay_excess_max_ms: 1.0e+12\n"))),
    Row("health-load-per-core-1e6", VALIDATE,
        [FILE, "health.controller_load_per_core_max", "expected a number >= 0 and <= 1000", "per core"],
        setup=edited(("  controller_load_per_core_max: 1.5\n", "  controller_load_per_core_max: 1.0e+6\n"))),
    Row("health-threshold-nan", VALIDATE,
        [FILE, "health.collector_sampling_min_fraction", "expected a finite number, got .nan"],
        setup=edited(("  collector_sampling_min_fraction: 0.9\n", "  collector_sampling_min_fraction: .nan\n"))),
    Row("health-threshold-as-text", VALIDATE,
        [FILE, "health.ping_received_min_fraction", "expected type 'number'", "'85%'"],
        setup=edited(("  ping_received_min_fraction: 0.85\n", "  ping_received_min_fraction: 85%\n"))),
    Row("health-threshold-without-unit", VALIDATE,
        [FILE, "health", "unknown field", "'flow_start_lag_ms' was unexpected", "flow_start_lag_max_ms"],
        setup=edited(("  flow_start_lag_max_ms: 100\n", "  flow_start_lag_ms: 100\n"))),
    Row("health-threshold-twice", VALIDATE,
        [FILE, f"line {_line('  collector_sampling_min_fraction: 0.9')}", "duplicate key 'flow_start_lag_max_ms'"],
        setup=edited(("  collector_sampling_min_fraction: 0.9\n", "  flow_start_lag_max_ms: 50\n"))),
    Row("health-not-a-mapping", VALIDATE,
        [FILE, "health", "expected type 'object'"],
        setup=health_as("0.6")),
    Row("health-empty", VALIDATE,
        [FILE, "health", "should be non-empty", "thresholds of the substrate's health checks"],
        setup=health_as("{}")),
    Row("health-skew-threshold-nothing-measures", VALIDATE,
        [FILE, "health.flow_start_skew_max_ms", "nothing in this file measures it",
         "two iperf3 or FTP items of one trial starting at the same time", "or leave this threshold out"],
        setup=edited(("  flow_start_lag_max_ms: 100\n",
                      "  flow_start_lag_max_ms: 100\n  flow_start_skew_max_ms: 20\n"))),
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
    # --- qdisc parameters of a trial's stack: tc words only ------------------------------
    Row("qdisc-param-value-with-command", VALIDATE,
        [FILE, f"{PIE_LEAF}.target_ms", "expected a number in the unit of the name's suffix", "got '20ms; reboot'"],
        setup=edited(in_trial("pie-unlimited", "target_ms: 20,", 'target_ms: "20ms; reboot",'))),
    Row("qdisc-param-value-with-dollar", VALIDATE,
        [FILE, f"{PIE_LEAF}.tupdate_ms", "expected a number in the unit of the name's suffix", "got '$(reboot)'"],
        setup=edited(in_trial("pie-unlimited", "tupdate_ms: 30,", "tupdate_ms: '$(reboot)',"))),
    Row("qdisc-param-value-option-like", VALIDATE,
        [FILE, f"{PIE_LEAF}.limit_packets", "expected a number in the unit of the name's suffix", "got '-1000'"],
        setup=edited(in_trial("pie-unlimited", "limit_packets: 134,", "limit_packets: '-1000',"))),
    Row("qdisc-param-key-with-space", VALIDATE,
        [FILE, PIE_LEAF, "the name 'tar get' is not allowed here", "expected a parameter name: its tc keyword"],
        setup=pie_param("'tar get': 5")),
    Row("qdisc-param-unknown-keyword", VALIDATE,
        [FILE, f"{PIE_LEAF}.targett_ms", "'targett' is not a parameter of tc-pie(8)", "target", "tupdate"],
        setup=pie_param("targett_ms: 5")),
    Row("qdisc-param-text-for-unit-key", VALIDATE,
        [FILE, "trials[1].qdiscs.router:eth1[1].min_bytes", "expected a number in the unit of the name's suffix",
         "got '50000'"],
        setup=edited(in_trial("red-unlimited", "min_bytes: 50000,", "min_bytes: '50000',"))),
    Row("qdisc-param-flag-without-negation", VALIDATE,
        [FILE, f"{PIE_LEAF}.diffserv4", "no negative form of diffserv4"],
        setup=leaf_as('{kind: cake, handle: "10:", diffserv4: false}')),
    Row("qdisc-param-negative-number", VALIDATE,
        [FILE, f"{PIE_LEAF}.limit_packets", "expected a number > 0 and <= 4294967295", "got -5"],
        setup=edited(in_trial("pie-unlimited", "limit_packets: 134,", "limit_packets: -5,"))),
    # --- not an experiment at all --------------------------------------------------------
    Row("binary-junk", VALIDATE,
        [FILE, "(file)", "expected a UTF-8 text experiment file, found binary data"],
        setup=raw(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 4)),
    Row("nul-bytes", VALIDATE,
        [FILE, "(file)", "expected a UTF-8 text experiment file, found a NUL byte"],
        setup=raw(TEXT.encode()[:200] + b"\x00\x00\x00")),
    Row("yaml-list", VALIDATE,
        [FILE, "(top level)", "expected a mapping of the experiment's fields", "found a list"],
        setup=raw(b"- schema_version: 2\n- name: pie-vs-red\n")),
    Row("yaml-scalar", VALIDATE,
        [FILE, "(top level)", "expected a mapping", "found text"],
        setup=raw(b"pie-vs-red\n")),
    Row("empty-file", VALIDATE,
        [FILE, "(top level)", "expected a mapping", "found an empty file"],
        setup=raw(b"# nothing but a comment\n")),
    Row("yaml-syntax-error", VALIDATE,
        [FILE, f"line {_line(HTB, trial('pie-unlimited'))}", "not valid YAML"],
        setup=edited(in_trial("pie-unlimited", HTB, "{kind: htb, rate_mbit: [10}"))),
    # --- the earlier format (schema_version 1) -------------------------------------------
    Row("v1-file-given-to-validate", VALIDATE,
        [FILE, "schema_version", "1 is the earlier format", f"netrepro migrate {FILE}"],
        setup=edited_v1()),
    Row("v1-migrate-without-bottleneck", MIGRATE,
        [FILE, "bottleneck: missing", "expected a schema_version 1 experiment"],
        setup=edited_v1((v1_section("bottleneck"), ""))),
    Row("v1-migrate-claim-on-trial-not-run", MIGRATE,
        [FILE, "(converted) claims[2].check.checks[0].higher.trials", "unknown trial 'red-unlimited'",
         "pie-unlimited, pie-limited, red-limited"],
        setup=edited_v1(("  - {aqm: red, variant: unlimited}\n", ""))),
]


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r.id)
def test_bad_input(row, tmp_path):
    run_row(row, tmp_path)


def test_rows_are_many_and_unique():
    ids = [r.id for r in ROWS]
    assert len(ids) == len(set(ids)) and len(ids) >= 15


def test_unedited_copy_validates(tmp_path):
    """The rows fail because of their edit: the same copy, unedited, is valid (one line on
    stdout, nothing on stderr)."""
    edited()(tmp_path)
    f = tmp_path / "experiment.yml"
    proc = subprocess.run([sys.executable, "-m", "netrepro", "validate", str(f)],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    assert proc.stdout == f"{f}: valid (schema_version 2: 7 nodes, 4 trials, 5 phases)\n"


def test_unedited_v1_copy_migrates(tmp_path):
    """The migrate rows fail because of their edit: the version 1 file, unedited, converts to
    a file that validates."""
    edited_v1()(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "netrepro", "migrate", str(tmp_path / "experiment.yml"), "-o",
                           str(tmp_path / "v2.yml")], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    proc = subprocess.run([sys.executable, "-m", "netrepro", "validate", str(tmp_path / "v2.yml")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "valid (schema_version 2: 7 nodes, 4 trials, 5 phases)" in proc.stdout, proc.stderr
