"""The figure options of schema_version 2 (analysis/figures.py) drawn from a real run:
tests/data/pie-vs-red-local-0.1 (four trials aqm x variant, three clients pinging every 0.1 s,
five phases of 10, 30, 50, 30 and 10 flows, TIME_SCALE 0.1), read as the analysis reads a run
recorded with a version 1 file (netrepro.experiment.migrate.migrate_data gives its trials the labels aqm
and variant). Each test
asserts on the drawn figure: its panels, lines and their data, phase patches and texts, and
the legend.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_hex

from conftest import distinct_run
from analysis.tidy import trial_tidy
from analysis.figures import draw, figure, rolling
from netrepro.model import Figure
from netrepro.experiment.migrate import migrate_data
from netrepro.experiment.spec import Spec

RUN = Path(__file__).resolve().parent / "data" / "pie-vs-red-local-0.1"
PINGS = ["ping-client1", "ping-client2", "ping-client3"]
#: Fig. 8 of Pan et al. (PIE, HPSR 2013) with the options: a panel per variant, a line per
#: AQM, the per-second median of the three clients' pings (10 s of the file = 1 s at
#: TIME_SCALE 0.1), the phases shaded and labelled, a reference line.
FIG8 = {"id": "fig8", "metric": "rtt_ms", "subjects": PINGS, "facet": "variant", "hue": "aqm",
        "rolling": {"window_s": 10, "statistic": "median"}, "shade_phases": True,
        "lines": [{"y": 120, "label": "a reference at 120 ms"}], "title": "Fig. 8"}


@pytest.fixture(scope="module")
def recorded():
    """(model, tidy, time_scale) of the recorded run; the phases labelled with their flows."""
    data = json.loads((RUN / "run.json").read_text())
    m = Spec.from_data(migrate_data(data["spec"])).model
    m.data["phases"] = [{**p, "label": f"{p['flows']} flows"} for p in m.data["phases"]]
    records = {t["id"]: t for t in data["trials"]}
    problems: list[str] = []
    tidy = pd.concat([trial_tidy(m, t, records[t.id], RUN / "raw" / t.id, data["time_scale"], problems)[0]
                      for t in m.trials], ignore_index=True)
    assert not problems
    return m, tidy, float(data["time_scale"])


def _lines(ax) -> dict[str, object]:
    return {ln.get_label(): ln for ln in ax.get_lines()}


def _legend(f) -> list[str]:
    assert len(f.legends) == 1
    return [t.get_text() for t in f.legends[0].get_texts()]


def test_fig8_panel_per_variant_median_per_aqm_phases_and_reference_line(recorded):
    m, tidy, ts = recorded
    f = figure(m, tidy, Figure.from_data(FIG8), ts)
    assert [ax.get_title() for ax in f.axes] == ["RTT (ms), variant: unlimited", "RTT (ms), variant: limited"]
    for ax in f.axes:
        assert sorted(_lines(ax)) == ["a reference at 120 ms", "pie (median per 1 s)", "red (median per 1 s)"]
        # five phases, each a patch spanning its scaled time, labelled at the top
        spans = [(round(p.get_x(), 6), round(p.get_x() + p.get_width(), 6)) for p in ax.patches]
        assert spans == [(0, 5), (5, 10), (10, 15), (15, 20), (20, 25)]
        assert [t.get_text() for t in ax.texts] == ["10 flows", "30 flows", "50 flows", "30 flows", "10 flows"]
        assert len({p.get_alpha() for p in ax.patches}) == 2  # alternately darker and lighter
    assert _legend(f) == ["pie (median per 1 s)", "red (median per 1 s)", "a reference at 120 ms"]
    # the pie line of the unlimited panel: the median of the three clients' samples pooled, per second
    line = _lines(f.axes[0])["pie (median per 1 s)"]
    s = tidy[(tidy["trial"] == "pie-unlimited") & (tidy["metric"] == "rtt_ms") & tidy["subject"].isin(PINGS)]
    want = s.groupby(np.floor(s["t_s"]).astype(int))["value"].median()
    assert np.allclose(line.get_xdata(), want.index + 0.5)
    assert np.allclose(line.get_ydata(), want.to_numpy())
    assert len(s["subject"].unique()) == 3 and len(want) == 25
    # pie and red have a colour each, the same in both panels
    colours = [{k: to_hex(v.get_color()) for k, v in _lines(ax).items()} for ax in f.axes]
    assert colours[0] == colours[1] and colours[0]["pie (median per 1 s)"] != colours[0]["red (median per 1 s)"]


def test_facet_pools_trials_sharing_a_label_and_style_tells_subjects_apart(recorded):
    """facet aqm: each panel holds both variants' trials; without rolling each trial's subject
    is a line, coloured by variant, its line style naming the client."""
    m, tidy, ts = recorded
    f = figure(m, tidy, Figure.from_data({"id": "x", "metric": "rtt_ms", "subjects": PINGS, "facet": "aqm", "hue": "variant"}), ts)
    assert [ax.get_title() for ax in f.axes] == ["RTT (ms), aqm: pie", "RTT (ms), aqm: red"]
    for ax in f.axes:
        lines = ax.get_lines()
        assert len(lines) == 6  # 2 trials x 3 clients
        assert len({to_hex(ln.get_color()) for ln in lines}) == 2
        assert len({ln.get_linestyle() for ln in lines}) == 3
        assert not ax.patches and not ax.texts
    labels = _legend(f)
    assert len(labels) == 6 and "unlimited, ping-client2" in labels and "limited, ping-client3" in labels
    # a line is one trial's subject, every sample of it in time order
    ln = _lines(f.axes[1])["limited, ping-client3"]
    s = tidy[(tidy["trial"] == "red-limited") & (tidy["subject"] == "ping-client3") & (tidy["metric"] == "rtt_ms")]
    assert np.allclose(ln.get_ydata(), s.sort_values("t_s", kind="stable")["value"].to_numpy())


def test_rolling_hue_subject_pools_each_subject_over_the_panels_trials(recorded):
    m, tidy, ts = recorded
    f = figure(m, tidy, Figure.from_data({"id": "x", "metric": "rtt_ms", "subjects": PINGS[:2], "facet": "aqm",
                         "rolling": {"window_s": 50, "statistic": "max"}}), ts)
    ax = f.axes[0]
    assert sorted(_lines(ax)) == ["ping-client1 (max per 5 s)", "ping-client2 (max per 5 s)"]
    s = tidy[tidy["trial"].isin(["pie-unlimited", "pie-limited"]) & (tidy["subject"] == "ping-client1")
             & (tidy["metric"] == "rtt_ms")]
    want = s.groupby(np.floor(s["t_s"] / 5).astype(int))["value"].max()
    assert np.allclose(_lines(ax)["ping-client1 (max per 5 s)"].get_ydata(), want.to_numpy())


def test_default_is_a_panel_per_trial_and_a_line_per_subject(recorded):
    m, tidy, ts = recorded
    f = figure(m, tidy, Figure.from_data({"id": "x", "metric": "rtt_ms", "lines": [{"y": 100, "label": "base"}]}), ts)
    assert [ax.get_title() for ax in f.axes] == [f"RTT (ms), {t.id}" for t in m.trials]
    for ax in f.axes:
        assert sorted(_lines(ax)) == ["base"] + PINGS
        assert {ln.get_linestyle() for ln in ax.get_lines() if ln.get_label() != "base"} == {"-"}
    assert _legend(f) == PINGS + ["base"]


def test_draw_writes_png_and_pdf(recorded, tmp_path):
    m, tidy, ts = recorded
    out = draw(m, tidy, Figure.from_data(FIG8), tmp_path, ts)
    assert [p.name for p in out] == ["fig8.png", "fig8.pdf"] and all(p.stat().st_size > 10_000 for p in out)
    assert draw(m, tidy, Figure.from_data({**FIG8, "metric": "cwnd_bytes"}), tmp_path, ts) == []


@pytest.mark.parametrize("statistic, want", [
    ("median", [2.0, np.nan, 10.0]), ("mean", [7 / 3, np.nan, 10.0]), ("max", [4.0, np.nan, 10.0]),
    ("min", [1.0, np.nan, 10.0]), ("p95", [3.8, np.nan, 10.0])])
def test_rolling_by_hand(statistic, want):
    """Windows [0, 2), [2, 4), [4, 6) of 2 s; the middle one is empty and gives a gap (NaN)."""
    d = pd.DataFrame({"t_s": [0.0, 0.5, 1.99, 4.0], "value": [1.0, 4.0, 2.0, 10.0]})
    r = rolling(d, 2.0, statistic)
    assert list(r["t_s"]) == [1.0, 3.0, 5.0]
    assert np.allclose(r["value"], want, equal_nan=True)


def test_rolling_refuses_a_window_of_zero_and_an_unknown_statistic():
    d = pd.DataFrame({"t_s": [0.0], "value": [1.0]})
    with pytest.raises(ValueError, match="expected > 0"):
        rolling(d, 0, "median")
    with pytest.raises(ValueError, match="expected one of median"):
        rolling(d, 1, "p50")


def test_the_file_options_validate(recorded):
    """The options pass validate on a real schema 2 file (pie-lab: labels aqm and rate)."""
    from netrepro.model import build
    from netrepro.core.yamlfile import load_yaml_file
    path = Path(__file__).resolve().parent.parent / "experiments" / "pie-lab" / "experiment.yml"
    data = copy.deepcopy(load_yaml_file(path))
    data["phases"] = [{"name": "a", "start_s": 0, "end_s": 45, "label": "$10^3$ packets"},
                      {"name": "b", "start_s": 45, "end_s": 90}]
    data["figures"].append({"id": "x", "metric": "rtt_ms", "subjects": ["h2-h3"], "facet": "rate", "hue": "aqm",
                            "rolling": {"window_s": 1, "statistic": "p95"}, "shade_phases": True})
    m = build(data, path)
    assert m.data["figures"][-1]["facet"] == "rate" and m.data["phases"][0]["label"] == "$10^3$ packets"


def test_analysis_scales_the_phases_like_the_run(tmp_path, monkeypatch):
    """Through the whole analysis of a recorded schema 2 run (pie-lab at TIME_SCALE 0.2, its
    file given phases and a figure using every option): the phases are shaded at their scaled
    times, and the window is scaled too."""
    import shutil

    from analysis import analyze, figures
    src = Path(__file__).resolve().parent / "data" / "labs" / "pie-lab-local-0.2"
    run_dir = tmp_path / "run"
    shutil.copytree(src, run_dir, ignore=shutil.ignore_patterns("expected", "README.md"))
    run = json.loads((run_dir / "run.json").read_text())
    assert run["time_scale"] == 0.2
    run["spec"]["phases"] = [{"name": "a", "start_s": 0, "end_s": 45, "label": "first half"},
                             {"name": "b", "start_s": 45, "end_s": 90}]
    run["spec"]["figures"] = [{"id": "shaded", "metric": "rtt_ms", "subjects": ["h2-h3"], "facet": "rate",
                               "hue": "aqm", "shade_phases": True, "rolling": {"window_s": 5, "statistic": "median"}}]
    (run_dir / "run.json").write_text(json.dumps(run))
    drawn = []
    real_save = figures.save_figure
    monkeypatch.setattr(figures, "save_figure", lambda f, target: drawn.append(f) or real_save(f, target))
    analyze(run_dir)
    assert (run_dir / "figures" / "shaded.png").stat().st_size > 10_000
    f = drawn[0]
    assert [ax.get_title() for ax in f.axes] == ["RTT (ms), rate: 1gbit", "RTT (ms), rate: 100mbit"]
    # the caption under the title names the run, its site and its scales
    assert f.get_suptitle().splitlines()[1] == "run run on site local, time scale 0.2, rate scale 0.02"
    for ax in f.axes:
        spans = [(round(p.get_x(), 6), round(p.get_x() + p.get_width(), 6)) for p in ax.patches]
        assert spans == [(0, 9), (9, 18)]
        assert [t.get_text() for t in ax.texts] == ["first half", "b"]
    assert _legend(f) == ["droptail (median per 1 s)", "pie (median per 1 s)"]


# --- names, units, shared axes, captions and reference values ----------------------------------
def test_axes_name_the_metric_in_words_with_its_unit_and_panels_share_y(recorded):
    """Never the raw column name: the y axis and each panel's title say "Queueing delay (ms)";
    the panels share one y range; the x axis says what time it counts; the caption line under
    the title names the run, the site, the time scale and the rate scale."""
    from analysis.figures import caption
    m, tidy, ts = recorded
    f = figure(m, tidy, Figure.from_data({**FIG8, "metric": "queue_delay_ms", "lines": []}), ts,
               caption("20261122T111651Z-local", "local", ts, 1))
    for ax in f.axes:
        assert ax.get_ylabel() == "Queueing delay (ms)" and "queue_delay" not in ax.get_title()
        assert ax.get_title().startswith("Queueing delay (ms), variant: ")
    assert f.axes[-1].get_xlabel() == "Time since the trial's start (s), TIME_SCALE 0.1"
    assert f.axes[0].get_shared_y_axes().joined(f.axes[0], f.axes[1])
    assert f.axes[0].get_ylim() == f.axes[1].get_ylim()
    assert f.get_suptitle() == "Fig. 8\nrun 20261122T111651Z-local on site local, time scale 0.1, rate scale 1"


@pytest.mark.parametrize("name, label", [
    ("queue_delay_ms", "Queueing delay (ms)"), ("throughput_mbit", "Throughput (Mbit/s)"),
    ("backlog_bytes", "Backlog (bytes)"), ("queue_delay_median_ms", "Median queueing delay (ms)"),
    ("jain_index", "Jain's index over the flows"), ("foo_sojourn_us", "Foo sojourn (µs)"), ("foo_marks", "Foo marks")])
def test_quantity_labels_default(name, label):
    from netrepro.model import quantity_label
    assert quantity_label(None, name) == label


def test_the_files_metrics_section_renames_a_metric(recorded):
    m, tidy, ts = recorded
    m = copy.deepcopy(m)
    m.data["metrics"] = {"rtt_ms": {"label": "Round trip of a ping", "unit": "ms"}}
    f = figure(m, tidy, Figure.from_data({"id": "x", "metric": "rtt_ms", "subjects": PINGS, "facet": "aqm", "hue": "variant"}), ts)
    assert {ax.get_ylabel() for ax in f.axes} == {"Round trip of a ping (ms)"}


def test_reference_values_are_drawn_over_their_phases_in_their_trials_colour(recorded):
    """A number a source states of a statistic of the figure's metric (queue_delay_median_ms
    of queue_delay_ms) is a segment over each phase it holds for, in the panel and colour of
    its trial; a finding in words is not drawn, nor a value of another metric's statistic."""
    m, tidy, ts = recorded
    m = copy.deepcopy(m)
    m.data["reference_results"] = [
        {"source": "Paper", "claims": {}, "values": [
            {"statistic": "queue_delay_median_ms", "trials": ["pie-unlimited"], "phases": ["p2", "p3"], "value": 20,
             "approximate": True, "quote": "about 20 ms"},
            {"statistic": "queue_delay_median_ms", "trials": ["red-unlimited"], "phases": ["p1"], "finding": "flat",
             "quote": "flat"},
            {"statistic": "rtt_median_ms", "trials": ["pie-unlimited"], "value": 120, "quote": "120 ms"}]},
        {"source": "Rerun", "claims": {}, "values": [
            {"statistic": "queue_delay_median_ms", "trials": ["red-limited"], "value": 55, "quote": "55 ms"}]}]
    f = figure(m, tidy, Figure.from_data({**FIG8, "metric": "queue_delay_ms", "lines": []}), ts)
    unlimited, limited = f.axes
    pie = _lines(unlimited)["pie (median per 1 s)"].get_color()
    red = _lines(limited)["red (median per 1 s)"].get_color()
    paper = [c for c in unlimited.collections if c.get_label() == "Paper: about 20"]
    assert len(paper) == 2 and not [c for c in limited.collections if c.get_label().startswith("Paper")]
    assert sorted(tuple(np.round(c.get_segments()[0], 6).ravel()) for c in paper) == [(5, 20, 10, 20), (10, 20, 15, 20)]
    assert to_hex(paper[0].get_colors()[0]) == to_hex(pie)
    rerun = [c for c in limited.collections if c.get_label() == "Rerun: 55"]  # no phases: the whole trial
    assert len(rerun) == 1 and np.allclose(rerun[0].get_segments()[0], [[0, 55], [25, 55]])
    assert to_hex(rerun[0].get_colors()[0]) == to_hex(red)
    assert rerun[0].get_linestyle() != paper[0].get_linestyle()  # a line style per source
    assert "Paper: about 20" in _legend(f) and "Rerun: 55" in _legend(f)
    assert not any("flat" in c.get_label() for ax in f.axes for c in ax.collections)
    g = figure(m, tidy, Figure.from_data({**FIG8, "lines": []}), ts)  # rtt_ms: only the rtt statistic's value, no phases
    assert [c.get_label() for ax in g.axes for c in ax.collections if c.get_label().startswith(("Paper", "Rerun"))] \
        == ["Paper: 120"]


def test_compare_figure_names_its_axes_and_shares_y_per_statistic(tmp_path, monkeypatch):
    """netrepro compare's figure (two distinct copies of a recorded pie-lab run): every panel's x axis
    names the phases, the y axis the statistic in words with its unit, and the panels of one
    statistic share their y range."""

    from analysis import figures
    from analysis.compare import compare
    src = Path(__file__).resolve().parent / "data" / "labs" / "pie-lab-local-0.2"
    runs = []
    for name in ("a", "b"):
        runs.append(distinct_run(src, tmp_path / name / "run"))
    drawn = []
    real_save = figures.save_figure
    monkeypatch.setattr(figures, "save_figure", lambda f, target: drawn.append((target.name, f))
                        or real_save(f, target))
    compare(runs, tmp_path / "out")
    f = next(f for name, f in drawn if name == "compare.png")
    axes = [ax for ax in f.axes if ax.get_visible()]
    assert f.get_suptitle().startswith("2 runs of pie-lab: ")
    assert {ax.get_xlabel() for ax in axes} == {"Phase of the trial (all: the whole trial)"}
    rtt = [ax for ax in axes if ax.get_title().startswith("Median RTT (ms), ")]
    assert len(rtt) == 3 and rtt[0].get_ylabel() == "Median RTT (ms)"
    assert all(rtt[0].get_shared_y_axes().joined(rtt[0], ax) for ax in rtt[1:])
    assert not any("_" in ax.get_ylabel() for ax in axes)
