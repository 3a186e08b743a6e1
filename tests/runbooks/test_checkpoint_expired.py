"""Detector checkpoint-expired: each root cause told apart from its evidence, patches from the incident's values."""
from __future__ import annotations

import pytest

from corpus import example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest
from flink_runbooks.render.patches import render_config_diff

SLUG = "checkpoint-expired"
JOB = "0123456789abcdef0123456789abcdef"
CC = "org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - "


def _ts(second: int) -> str:
    return f"2024-03-01 {10 + second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d},000"


def _history(rows, trigger_every: int = 60) -> str:
    """rows: ("ok", duration_s, size_bytes) or ("expired", timeout_s); 1.17 wording."""
    lines = []
    for i, row in enumerate(rows, 1):
        start = i * trigger_every
        lines.append(f"{_ts(start)} INFO  {CC}Triggering checkpoint {i} (type=CheckpointType{{name='Checkpoint', "
                     f"sharingFilesStrategy=FORWARD_BACKWARD}}) @ {start} for job {JOB}.")
        if row[0] == "ok":
            _, dur, size = row
            lines.append(f"{_ts(start + dur)} INFO  {CC}Completed checkpoint {i} for job {JOB} ({size} bytes, "
                         f"checkpointDuration={dur * 1000} ms, finalizationTime=2 ms).")
        else:
            lines.append(f"{_ts(start + row[1])} INFO  {CC}Checkpoint {i} of job {JOB} expired before completing.")
    return "\n".join(lines)


def _detect(text, config=None, version="1.17.2"):
    return get_detector(SLUG).detect(incident_from_text(text, config or {}, version))


def test_no_completion_with_aligned_checkpoints_is_backpressure():
    [f] = _detect(_history([("expired", 10)] * 4, trigger_every=15), {"execution.checkpointing.timeout": "10s",
                                                                       "execution.checkpointing.interval": "5s"})
    assert f.root_cause.slug == "backpressure-alignment"
    assert f.severity == "warning"  # no threshold in the logs
    # ...but expirations count against tolerable-failed-checkpoints (unset: 0): never claim the job kept running
    assert "kept running" not in f.summary.replace("whether it kept running is unknown", "")
    assert "whether it kept running is unknown" in f.summary
    assert f.details["expired_count"] == 4 and f.details["completed_count"] == 0
    patches = {p.key: p for p in f.patches if p.target == "flink"}
    # no observed duration: back to the default, computed from the current 10 s
    assert (patches["execution.checkpointing.timeout"].current, patches["execution.checkpointing.timeout"].proposed) == ("10s", "10 min")
    assert patches["execution.checkpointing.unaligned.enabled"].proposed == "true"
    assert patches["execution.checkpointing.aligned-checkpoint-timeout"].proposed == "30 s"


def test_durations_near_the_timeout_with_stable_size_is_a_short_timeout():
    rows = [("ok", 70, 300_000_000), ("ok", 95, 310_000_000), ("expired", 120), ("ok", 88, 305_000_000),
            ("ok", 101, 302_000_000), ("expired", 120)]
    [f] = _detect(_history(rows, trigger_every=180), {"execution.checkpointing.timeout": "2 min",
                                                     "execution.checkpointing.interval": "3 min"})
    assert f.root_cause.slug == "timeout-too-short"
    timeout = next(p for p in f.patches if p.key == "execution.checkpointing.timeout")
    # three times the slowest completed checkpoint (101 s), rounded up to 10 s
    assert (timeout.current, timeout.proposed) == ("2 min", "310 s")
    pause = next(p for p in f.patches if p.key == "execution.checkpointing.min-pause")
    assert pause.proposed == "46 s"  # half the median duration (91.5 s), more than a quarter of the interval
    assert not any(p.key == "execution.checkpointing.unaligned.enabled" for p in f.patches)


def test_growing_state_is_a_slow_upload_and_gets_incremental_checkpoints_with_rocksdb():
    rows = [("ok", 40 + 25 * i, 500_000_000 * (i + 1)) for i in range(9)] + [("expired", 600)]
    [f] = _detect(_history(rows, trigger_every=600), {"state.backend.type": "rocksdb",
                                                     "execution.checkpointing.interval": "10 min"})
    assert f.root_cause.slug == "slow-state-upload"
    assert f.details["size_growth"] >= 2
    incremental = next(p for p in f.patches if p.key == "state.backend.incremental")  # 1.17 spelling
    assert incremental.proposed == "true"


def test_growing_durations_with_flat_size_are_backpressure():
    rows = [("ok", 5 * (i + 1) ** 2, 100_000_000) for i in range(6)] + [("expired", 600)]
    [f] = _detect(_history(rows, trigger_every=600))
    assert f.root_cause.slug == "backpressure-alignment"
    assert "grew" in f.details["why"]


def test_unaligned_checkpoints_that_still_expire_are_not_blamed_on_alignment():
    [f] = _detect(_history([("expired", 600)] * 2, trigger_every=600),
                  {"execution.checkpointing.unaligned": "true"})
    assert f.root_cause.slug == "slow-state-upload"
    assert not any(p.key == "execution.checkpointing.unaligned.enabled" for p in f.patches)


def test_heartbeat_timeout_while_pending_is_a_taskmanager_stall():
    text = _history([("ok", 3, 80_000_000), ("expired", 60)]) + (
        f"\n{_ts(150)} INFO  org.apache.flink.runtime.resourcemanager.StandaloneResourceManager [] - "
        f"The heartbeat of TaskManager with id 10.0.0.7:6122-abc123 timed out.")
    [f] = _detect(text)
    assert f.root_cause.slug == "tm-stall"
    assert f.details["taskmanager_stalls"] == ["10.0.0.7:6122-abc123"]


def test_late_acknowledgements_from_one_of_several_taskmanagers_are_a_stall():
    reg = "\n".join(f"{_ts(1)} INFO  org.apache.flink.runtime.resourcemanager.StandaloneResourceManager [] - "
                    f"Registering TaskManager with ResourceID tm-{n} (pekko.tcp://flink@tm-{n}:6122/user/rpc/taskmanager_0) "
                    f"at ResourceManager" for n in (1, 2, 3))
    late = (f"{_ts(200)} INFO  {CC}Received late message for now expired checkpoint attempt 2 from task "
            f"abc_def_1_0 of job {JOB} at tm-2 @ 10.0.0.8 (dataPort=39121).")
    [f] = _detect(reg + "\n" + _history([("ok", 3, 80_000_000), ("expired", 60), ("ok", 4, 80_000_000)]) + "\n" + late)
    assert f.root_cause.slug == "tm-stall"
    assert "tm-2" in f.details["why"]


def test_expirations_that_exhaust_the_threshold_are_a_failure_with_tolerance_patch():
    text = _history([("expired", 10)] * 3, trigger_every=15) + f"""
{_ts(46)} INFO  org.apache.flink.runtime.jobmaster.JobMaster                 [] - Trying to recover from a global failure.
org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold. The latest checkpoint failed due to Checkpoint expired before completing., view the Checkpoint History tab or the Job Manager log to find out why continuous checkpoints failed.
{_ts(46)} INFO  org.apache.flink.runtime.executiongraph.ExecutionGraph       [] - Job x ({JOB}) switched from state RUNNING to RESTARTING."""
    [f] = _detect(text, {"execution.checkpointing.tolerable-failed-checkpoints": "2"})
    assert f.severity == "failure" and f.details["failovers"] == 1
    tolerable = next(p for p in f.patches if p.key == "execution.checkpointing.tolerable-failed-checkpoints")
    assert (tolerable.current, tolerable.proposed) == ("2", "3")


def test_a_bare_excerpt_without_ids_is_still_recognised():
    text = ("org.apache.flink.runtime.checkpoint.CheckpointException: Checkpoint expired before completing.\n"
            "\tat org.apache.flink.runtime.checkpoint.CheckpointCoordinator$CheckpointCanceller.run(CheckpointCoordinator.java:2143)")
    [f] = _detect(text, version=None)
    assert f.details["expired_checkpoints"] == "ids not in the excerpt"
    assert f.confidence < 0.8


def test_completed_checkpoints_only_give_no_finding():
    assert _detect(_history([("ok", 500, 7_000_000_000)] * 5, trigger_every=600)) == []


def test_unaligned_key_is_rendered_for_the_version():
    [f] = _detect(_history([("expired", 10)] * 2, trigger_every=15))
    old = render_config_diff(f.patches, None, (1, 15))
    new = render_config_diff(f.patches, None, (1, 20))
    assert "+execution.checkpointing.unaligned: true" in old
    assert "+execution.checkpointing.aligned-checkpoint-timeout: 30 s" in old  # the new name exists since 1.14
    assert "+execution.checkpointing.unaligned.enabled: true" in new  # config.yaml since 1.19: nested keys
    assert "aligned-checkpoint-timeout: 30 s" in new


def test_no_unaligned_patch_before_it_existed():
    [f] = _detect(_history([("expired", 10)] * 2, trigger_every=15), version="1.10.3")
    assert not any(p.key.startswith("execution.checkpointing.unaligned") for p in f.patches)
    assert any(p.target == "ops" and "1.11" in p.reason for p in f.patches)


@pytest.mark.parametrize("name,cause,severity", [
    ("backpressure-aligned-timeout-10s", "backpressure-alignment", "failure"),
    ("state-growing-rocksdb", "slow-state-upload", "failure"),
])
def test_example_incidents(spark, name, cause, severity):
    inc = ingest([str(example(SLUG, name))], spark)
    diagnosis = run_detectors(inc)
    primary = diagnosis.primary
    assert (primary.runbook, primary.root_cause.slug, primary.severity) == (SLUG, cause, severity)
    # the threshold runbook reports the same failover as a wrapper, never as the primary finding
    assert any(f.runbook == "checkpoint-tolerable-failure-threshold" and not f.primary for f in diagnosis.findings)
    if name == "state-growing-rocksdb":
        diff = render_config_diff(primary.patches, inc.config, inc.flink_version)
        assert "-state.backend.incremental: false" in diff and "+state.backend.incremental: true" in diff


def test_healthy_and_near_miss_examples_give_nothing(spark):
    for name in ("healthy", "near-miss-slow-but-completing"):
        inc = ingest([str(example(SLUG, name))], spark)
        assert run_detectors(inc).findings == [], name
