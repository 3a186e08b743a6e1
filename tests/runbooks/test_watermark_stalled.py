"""Detector watermark-stalled: windows that never fire, told apart from the watermarks of the running job (a pull of
genuine 1.20.3 and 2.3.0 clusters) or of a pasted watermark table."""
from __future__ import annotations

import json

import pytest

from corpus import example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import ingest, run_detectors

SLUG = "watermark-stalled"
NO_WATERMARK = "-9223372036854775808"


def _diagnose(name: str):
    incident = ingest([str(example(SLUG, name))])
    diagnosis = run_detectors(incident)
    assert not diagnosis.errors
    return incident, diagnosis


@pytest.mark.parametrize("name", ["idle-split-1.20", "idle-split-2.3"])
def test_a_source_subtask_without_a_split_holds_every_window_back(name):
    incident, diagnosis = _diagnose(name)
    f = diagnosis.primary
    assert f is not None and f.runbook == SLUG and f.root_cause.slug == "idle-source-subtask"
    # the idle subtask and the one that read the clicks are named, with what each did (which subtask gets the one
    # split is the enumerator's choice)
    idle = next(s for s in f.details["sources"] if s["records"] == 0)
    assert idle["watermark"] is None
    assert f"Source subtask {idle['subtask']} of Source: clicks[1]" in f.summary and "read no records" in f.summary
    assert f"subtask {1 - idle['subtask']} read 120 records and reached 2026-03-14 02:01:58 UTC" in f.summary
    # the evidence points at the REST documents the pull wrote: the sources' metrics and the windows' watermarks
    assert f.evidence[0].file.endswith("-subtask-metrics.json")
    assert f"subtask {idle['subtask']}: 0 records" in f.evidence[0].text
    assert "GlobalWindowAggregate[5]" in f.evidence[1].text and "no watermark (Long.MIN_VALUE)" in f.evidence[1].text
    by_target = {p.target: p for p in f.patches}
    assert by_target["code"].key == "WatermarkStrategy.withIdleness" and "withIdleness" in by_target["code"].snippet
    assert (by_target["flink"].key, by_target["flink"].proposed) == ("table.exec.source.idle-timeout", "1 min")
    assert by_target["ops"].urgent is False and "partitions" in by_target["ops"].reason


def test_windows_that_fire_with_an_idle_timeout_are_no_finding():
    """The same job with table.exec.source.idle-timeout = 5 s: subtask 0 still reads nothing and has no watermark of
    its own, but it is marked idle, the windows' watermark advances and they fire."""
    incident, diagnosis = _diagnose("near-miss-idle-timeout-1.20")
    assert incident.rest and any(v.subtask_metrics for j in incident.rest[0].jobs for v in j.vertices)
    assert not [f for f in diagnosis.findings if f.runbook == SLUG]
    assert diagnosis.primary is None


def test_a_pasted_watermarks_tab_without_any_watermark_says_to_pull_the_cluster():
    incident, diagnosis = _diagnose("ticket-watermarks-tab")
    f = diagnosis.primary
    assert f.runbook == SLUG and f.root_cause.slug == "undetermined"
    assert "Long.MIN_VALUE on 4 subtasks" in f.summary
    assert "flink-runbooks diagnose http://<jobmanager>:8081" in f.summary
    assert f.evidence[0].file.endswith("ticket.txt") and not f.patches


def test_pasted_rest_json_with_one_subtask_without_a_watermark_names_the_idle_subtask():
    text = json.dumps([{"id": "0.currentInputWatermark", "value": "1773453718000"},
                       {"id": "1.currentInputWatermark", "value": NO_WATERMARK},
                       {"id": "2.currentInputWatermark", "value": "1773453716000"}])
    incident = incident_from_text("Watermarks of the window operator:\n" + text, {}, "1.20.3", file="ticket.txt")
    [f] = get_detector(SLUG).detect(incident)
    assert f.root_cause.slug == "idle-source-subtask"
    assert "Subtask 1 of the pasted watermark table has no watermark" in f.summary
    assert "subtasks 0, 2 reached 2026-03-14 02:01:58 UTC" in f.summary
    assert {p.key for p in f.patches} == {"WatermarkStrategy.withIdleness", "table.exec.source.idle-timeout",
                                          "source parallelism at most the partitions"}


def test_pretty_printed_rest_json_is_read_too():
    rows = []
    for subtask, value in (("0", NO_WATERMARK), ("1", "1773453718000")):
        rows += ["  {", f'    "id": "{subtask}.currentInputWatermark",', f'    "value": "{value}"', "  },"]
    incident = incident_from_text("\n".join(["[", *rows, "]"]), {}, None, file="watermarks.json")
    [f] = get_detector(SLUG).detect(incident)
    assert f.root_cause.slug == "idle-source-subtask" and "Subtask 0" in f.summary


def test_an_idle_timeout_already_configured_is_not_proposed_again():
    text = (f'[{{"id":"0.currentInputWatermark","value":"{NO_WATERMARK}"}},'
            '{"id":"1.currentInputWatermark","value":"1773453718000"}]')
    incident = incident_from_text(text, {"table.exec.source.idle-timeout": "30 s"}, "1.20.3", file="ticket.txt")
    [f] = get_detector(SLUG).detect(incident)
    assert "An idle timeout of 30 s is configured" in f.summary
    assert "table.exec.source.idle-timeout" not in {p.key for p in f.patches}


def test_one_subtask_far_behind_is_named_with_its_lag():
    text = "\n".join(["SubTask\tWatermark\tDatetime of Watermark Timestamp",
                      "0\t1773453718000\t3/14/2026, 2:01:58 AM",
                      "1\t1773450118000\t3/14/2026, 1:01:58 AM"])
    [f] = get_detector(SLUG).detect(incident_from_text(text, {}, "2.3.0", file="ticket.txt"))
    assert f.root_cause.slug == "watermark-behind"
    assert "Subtask 1" in f.summary and "1 h behind subtask 0" in f.summary
    assert {p.target for p in f.patches} == {"code", "ops"}  # no configuration key fixes event timestamps


def test_watermarks_close_together_are_no_finding():
    text = ('[{"id":"0.currentInputWatermark","value":"1773453718000"},'
            '{"id":"1.currentInputWatermark","value":"1773453716000"}]')
    assert get_detector(SLUG).detect(incident_from_text(text, {}, "1.20.3", file="ticket.txt")) == []


@pytest.mark.live
@pytest.mark.xdist_group("live")
@pytest.mark.parametrize("version", ["1.20.3", "2.3.0"])
def test_a_running_job_whose_windows_wait_on_an_idle_subtask_is_pulled_and_diagnosed(version, tmp_path):
    """A real cluster runs the recordings' SQL job over one CSV file (one split, two source subtasks):
    `flink-runbooks diagnose <REST URL>` pulls the watermarks while it runs and names the idle subtask."""
    import subprocess

    from corpus import ROOT
    from live_cluster import CLI, cluster

    from flink_runbooks.apps.bench.flink_cluster import get_json, job_jar, wait_until

    clicks = tmp_path / "clicks"
    clicks.mkdir()
    (clicks / "clicks-0.csv").write_text("".join(f"page-{i % 3},{1000 + i},2026-03-14 02:{i // 60:02d}:{i % 60:02d}\n"
                                                 for i in range(120)))
    source = ROOT / "scripts" / "record" / "watermark-stalled" / "job" / "com" / "acme" / "wm" / "ClickWindowJob.java"
    with cluster(version, tmp_path / "cluster", slots=2, config={"execution.target": "remote"}) as running:
        job = running.submit(job_jar(running.home, source, running.folder), "com.acme.wm.ClickWindowJob",
                             "one-file", str(clicks), "")
        wait_until("the clicks to reach the windows", 180, lambda: any(
            v["metrics"].get("write-records") for v in get_json(f"{running.url}/jobs/{job}")["vertices"]), 2)
        run = subprocess.run(CLI + ["diagnose", running.url, "--format", "json",
                                    "--pull-dir", str(tmp_path / "pulled")], capture_output=True, text=True, timeout=300)
    doc = json.loads(run.stdout)
    primary = next(f for f in doc["findings"] if f["primary"])
    assert (primary["runbook"], primary["root_cause"]["slug"]) == (SLUG, "idle-source-subtask"), primary["summary"]
    assert "read 120 records" in primary["summary"]


def test_a_split_an_hour_behind_holds_the_windows_an_hour_back():
    incident, diagnosis = _diagnose("partition-behind-1.20")
    f = diagnosis.primary
    assert (f.runbook, f.root_cause.slug) == (SLUG, "watermark-behind")
    assert "Subtask 0 of Source: clicks[1]" in f.summary and "1 h behind subtask 1" in f.summary
    assert "after reading 120 records" in f.summary
    # both the source subtasks and the windows' input watermark are shown
    assert "01:01:58" in f.evidence[0].text and "GlobalWindowAggregate[5]" in f.evidence[1].text
    assert {p.target for p in f.patches} == {"code", "ops"}


def test_a_datastream_job_with_the_interval_at_0_reads_records_and_emits_no_watermark():
    incident, diagnosis = _diagnose("periodic-off-datastream-1.20")
    f = diagnosis.primary
    assert (f.runbook, f.root_cause.slug) == (SLUG, "periodic-watermarks-off")
    assert "pipeline.auto-watermark-interval is 0" in f.summary and "Source subtasks 0, 1" in f.summary
    assert "subtask 0: 392 records, no watermark (Long.MIN_VALUE)" in f.evidence[0].text
    [patch] = f.patches
    assert (patch.key, patch.current, patch.proposed) == ("pipeline.auto-watermark-interval", "0", "200 ms")


def _pulled(vertices):
    """An incident whose pulled cluster holds one running job of ``vertices`` (as read_bundle gives them)."""
    from flink_runbooks.model import ClusterSnapshot, RestJob

    incident = incident_from_text("", {}, "1.20.3")
    incident.rest = [ClusterSnapshot(bundle="pulled", flink_version="1.20.3",
                                     jobs=[RestJob("0" * 32, name="clicks", state="RUNNING", vertices=vertices)])]
    return incident


def test_windows_without_a_watermark_and_no_source_metrics_say_what_to_pull():
    from flink_runbooks.model import RestVertex

    windows = RestVertex("Window(TumblingEventTimeWindows(10000)) -> Sink", parallelism=2, id="1" * 32,
                         watermarks={"0": int(NO_WATERMARK), "1": int(NO_WATERMARK)},
                         documents={"watermarks": "pulled/rest/jobs/x/vertices/y-watermarks.json"})
    [f] = get_detector(SLUG).detect(_pulled([windows]))
    assert f.root_cause.slug == "undetermined" and "Long.MIN_VALUE on 2 subtasks" in f.summary
    assert "Window(TumblingEventTimeWindows(10000)) -> Sink" in f.summary
    assert f.evidence[0].file.endswith("y-watermarks.json")


def test_a_source_that_read_nothing_at_all_is_no_stalled_watermark():
    """No subtask read a record: there is nothing to window yet, whatever the watermarks say."""
    from flink_runbooks.model import RestVertex

    source = RestVertex("Source: clicks", parallelism=2, id="2" * 32, subtask_metrics={
        s: {"Source__clicks.numRecordsOut": 0, "Source__clicks.currentOutputWatermark": int(NO_WATERMARK)}
        for s in ("0", "1")})
    windows = RestVertex("Window(TumblingEventTimeWindows(10000))", parallelism=2, id="3" * 32,
                         watermarks={"0": int(NO_WATERMARK), "1": int(NO_WATERMARK)})
    assert get_detector(SLUG).detect(_pulled([source, windows])) == []


def test_windows_without_a_watermark_after_a_restart_or_while_deploying_are_no_stall():
    """A TaskManager lost, the job restarted: its windows have no watermark yet, which says nothing of a stall
    (found by the live loop, where this otherwise outranked the lost TaskManager)."""
    from flink_runbooks.model import RestFailure, RestFailureEntry, RestVertex

    def windows(status=None):
        return RestVertex("Window(TumblingEventTimeWindows(10000)) -> Sink", status=status, parallelism=2,
                          id="1" * 32, watermarks={"0": int(NO_WATERMARK), "1": int(NO_WATERMARK)})

    restarted = _pulled([windows("RUNNING")])
    lost = RestFailure(exception="org.apache.flink.runtime.jobmaster.JobMasterException",
                       stacktrace="org.apache.flink.runtime.jobmaster.JobMasterException: TaskManager with id tm-1 "
                                  "is no longer reachable.", timestamp_ms=1)
    restarted.rest[0].jobs[0].history.append(RestFailureEntry(root=lost))
    assert get_detector(SLUG).detect(restarted) == []
    assert get_detector(SLUG).detect(_pulled([windows("DEPLOYING")])) == []
    [still] = get_detector(SLUG).detect(_pulled([windows("RUNNING")]))
    assert still.root_cause.slug == "undetermined"
