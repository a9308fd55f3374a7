"""run.json as a typed record owned by netrepro/runfolder/record.py (issue 56): every recorded run
reads into the record and back to the same JSON (the version added), an earlier version is
upgraded on reading and a newer one refused in one line naming the field, the writer writes the
version and refuses what the reader would, and timings.json is written and read there too."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from netrepro.core.errors import RunFolderError
from netrepro.runfolder.layout import TIMINGS
from netrepro.runfolder.reading import read_record
from netrepro.runfolder.record import (RUN_VERSION, RateScale, RunRecord, add_raw_sha256, first_record,
                                       instance_status, instance_statuses, kept_instances, read_timings, set_finished,
                                       set_site_documents, set_steps, set_unhealthy_retries, unhealthy_retries_of,
                                       upgraded, write_run, write_timings)

ROOT = Path(__file__).resolve().parent.parent
#: Every run.json the repository records: docs/runs (the published runs) and tests/data.
RECORDED = sorted([*(ROOT / "docs" / "runs").rglob("run.json"), *(ROOT / "tests" / "data").rglob("run.json")])


def test_recorded_runs_found():
    """The recorded runs are where this test looks (39 in docs/runs, 4 in tests/data at issue 56)."""
    assert len(RECORDED) >= 43


@pytest.mark.parametrize("path", RECORDED, ids=lambda p: str(p.relative_to(ROOT)))
def test_recorded_run_round_trip(path):
    """Each recorded run.json read into the record and back: the same JSON but for the added
    version; its typed fields are what the JSON holds."""
    data = json.loads(path.read_text())
    rec = RunRecord.from_json(data, path)
    assert rec.version == RUN_VERSION
    out = rec.to_json()
    assert out.pop("version") == RUN_VERSION and "version" not in data
    assert out == data
    assert rec.experiment == data["experiment"] and rec.site == data["site"]
    assert rec.time_scale == data["time_scale"] and rec.lead_s == data.get("lead_s")
    assert rec.rate_scale_k == (data["rate_scale"]["k"] if data.get("rate_scale") else 1.0)
    assert [t.id for t in rec.trials] == [t["id"] for t in data["trials"]]
    assert [t.start_epoch_s for t in rec.trials] == [t["start_epoch_s"] for t in data["trials"]]
    assert [t.trial for t in rec.trials] == [t.get("trial", t["id"]) for t in data["trials"]]
    assert dict(rec.raw_sha256) == data["raw_sha256"]
    assert [(s.id, s.status) for s in rec.instances] == [(s["id"], s["status"]) for s in data.get("trial_status", [])]
    assert rec.repeat == data.get("repetitions", {}).get("repeat", 1)
    # read again from what was written: the same record
    assert RunRecord.from_json(rec.to_json(), path) == rec


def test_read_record_of_a_recorded_run():
    """read_record gives the record of a whole run folder (its spec converted as read_run does)."""
    run = ROOT / "tests" / "data" / "pie-vs-red-local-0.1"
    _, rec, spec = read_record(run)
    assert rec.experiment == spec.name == "pie-vs-red"
    assert rec.version == RUN_VERSION and rec.rate_scale is None and rec.rate_scale_k == 1.0


def test_newer_version_refused():
    """A run.json of a newer version than this netrepro reads: one line naming the file and field."""
    with pytest.raises(RunFolderError) as e:
        RunRecord.from_json({"version": RUN_VERSION + 1, "experiment": "x"}, "r/run.json")
    msg = str(e.value)
    assert msg.startswith("r/run.json: version: ") and "newer netrepro" in msg and "\n" not in msg


@pytest.mark.parametrize("bad", [0, -1, "2", 2.0, True, None])
def test_version_not_a_whole_number_refused(bad):
    with pytest.raises(RunFolderError, match=r"run.json: version: expected a whole number"):
        RunRecord.from_json({"version": bad}, "run.json")


def test_version_1_upgraded_once():
    """A record without ``version`` is version 1, upgraded to the current one on reading; the
    upgrade does not change the caller's data."""
    data = {"experiment": "x", "trials": []}
    assert upgraded("run.json", data) == {"version": RUN_VERSION, "experiment": "x", "trials": []}
    assert "version" not in data


def test_record_is_read_only():
    rec = RunRecord.from_json({"experiment": "x", "rate_scale": {"k": 0.5, "why": "w"}})
    assert rec.rate_scale == RateScale(0.5, "w")
    with pytest.raises(AttributeError):
        rec.experiment = "y"
    with pytest.raises(TypeError):
        rec.fields["experiment"] = "y"


def test_write_run_writes_the_version_and_checks(tmp_path):
    """The writer adds the version, writes what the reader reads, and refuses a field the
    reader would refuse (naming it), writing nothing."""
    rec = write_run(tmp_path, {"experiment": "x", "lead_s": 2.0, "trials": [{"id": "t1", "start_epoch_s": 5.0}]})
    written = json.loads((tmp_path / "run.json").read_text())
    assert written["version"] == RUN_VERSION and written["trials"] == [{"id": "t1", "start_epoch_s": 5.0}]
    assert RunRecord.from_json(written) == rec
    with pytest.raises(RunFolderError, match=r"lead_s: expected the barrier's lead"):
        write_run(tmp_path / "new", {"experiment": "x", "lead_s": 0.0})
    assert not (tmp_path / "new").exists()


def test_timings_written_and_read(tmp_path):
    write_timings(tmp_path, {"up_s": 1.5, "total_s": 3})
    assert json.loads((tmp_path / TIMINGS).read_text()) == {"up_s": 1.5, "total_s": 3}
    assert read_timings(tmp_path) == {"up_s": 1.5, "total_s": 3.0}
    assert read_timings(tmp_path / "none") == {}
    with pytest.raises(RunFolderError, match=r"timings.json: down_s: expected seconds"):
        write_timings(tmp_path, {"down_s": float("nan")})
    (tmp_path / TIMINGS).write_text('{"up_s": "soon"}')
    with pytest.raises(RunFolderError, match=r"timings.json: expected a JSON object of step -> seconds"):
        read_timings(tmp_path)


def test_runner_record_replayed_gives_the_recorded_run_json():
    """A recorded run's run.json rebuilt as the runner builds it (first_record, then the
    updates in the runner's order): the same bytes as json.dumps writes them, so the keys,
    their order and the values are the runner's (issue 56: the runner's record moved here)."""
    path = ROOT / "docs" / "runs" / "pie-lab-sweep-slurm-ns3-2026-11-29" / "run.json"
    data = json.loads(path.read_text())
    data.pop("version", None)
    session = {"at": data["started_at"], "toolkit_commit": data["toolkit_commit"], "mode": data["mode"],
               "site_status": data["site_status"], "controller": data["controller"]}
    statuses = data["trial_status"]
    meta = first_record(experiment=data["experiment"], spec=data["spec"], spec_file=data["spec_file"],
                        site=data["site"], session=session, time_scale=data["time_scale"], lead_s=data["lead_s"],
                        packet=data["packet"], repetitions=data["repetitions"],
                        instances=[{k: v for k, v in s.items() if k not in ("status", "attempts", "reason")}
                                   for s in statuses])
    assert [s["status"] for s in instance_statuses(meta)] == ["pending"] * len(statuses)
    meta["sweep"], meta["rate_scale"] = data["sweep"], data["rate_scale"]
    set_site_documents(meta, data["site_documents"])
    meta["jobs"] = data["jobs"]
    set_unhealthy_retries(meta, data["unhealthy_retries"])
    assert unhealthy_retries_of(meta) == data["unhealthy_retries"]
    for s, t in zip(statuses, data["trials"]):
        instance_status(meta, s["id"]).update(s)
        meta["trials"].append(t)
        add_raw_sha256(meta, {k: v for k, v in data["raw_sha256"].items() if k.startswith(s["id"] + "/")})
    set_finished(meta, data["finished_at"])
    meta["wall_s"], meta["nodes"], meta["timings_s"] = data["wall_s"], data["nodes"], data["timings_s"]
    assert kept_instances(meta) == [s["id"] for s in statuses if s["status"] == "complete"]
    assert json.dumps(meta, indent=1) == json.dumps(data, indent=1)


def test_record_reads_the_report_s_fields():
    """The fields the report reads through the record: the experiment file, each instance's
    reason and attempts (objects only), none when missing."""
    rec = RunRecord.from_json({"spec_file": "/x/experiments/a.yaml", "trial_status": [
        {"id": "t1", "status": "failed", "reason": "why", "attempts": [{"status": "failed"}, 3]}, {"id": "t2"}]})
    assert rec.spec_file == "/x/experiments/a.yaml"
    assert [(s.reason, s.attempts) for s in rec.instances] == [("why", ({"status": "failed"},)), (None, ())]
    assert RunRecord.from_json({}).spec_file is None


def test_set_steps_and_raw_sha256_add():
    record: dict = {"id": "t1"}
    set_steps(record, {"run": 1.5})
    assert record == {"id": "t1", "steps_s": {"run": 1.5}}
    meta: dict = {}
    add_raw_sha256(meta, {"t1/a": "00"})
    add_raw_sha256(meta, {"t2/b": "11"})
    assert meta == {"raw_sha256": {"t1/a": "00", "t2/b": "11"}}
