"""Detector kafka-offset-out-of-range: an old restored snapshot names retention (and the loss is measured), a
NoOffsetForPartitionException names a group without committed offsets, a new topic or cluster id names a recreated
topic; a bare trace stays undetermined with the queries that decide it; a reset policy that skipped records is
reported as a warning with their count; a restore that reads on is no finding."""
from __future__ import annotations

from corpus import example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import ingest, run_detectors
from flink_runbooks.render.patches import render_kafka_properties

SLUG = "kafka-offset-out-of-range"
TASK = "org.apache.flink.runtime.taskmanager.Task"
TAG = "[Consumer clientId=orders-0, groupId=orders]"
NEW_WORDING = ("org.apache.kafka.clients.consumer.OffsetOutOfRangeException: Fetch position FetchPosition{"
               "offset=52310, offsetEpoch=Optional.empty, currentLeader=LeaderAndEpoch{leader=Optional["
               "kafka-1:9092 (id: 1 rack: null)], epoch=3}} is out of range for partition orders-0")


def _line(ts: str, message: str, level: str = "INFO", logger: str = TASK) -> str:
    return f"2024-04-16 {ts} {level:<5} {logger:<60} [] - {message}"


def _failed(ts: str, cause: str) -> list[str]:
    return [_line(ts, "Source: orders (1/1)#0 (b3d5f7a9c1e3b5d7f9a1c3e5b7d9f1a3_cbc357ccb763df2852fee8c4fc7d55f2_0_0) "
                      "switched from RUNNING to FAILED with failure cause:", "WARN"),
            "java.lang.RuntimeException: One or more fetchers have encountered exception", f"Caused by: {cause}"]


def _restored(ts: str, snapshot_ms: int) -> str:
    job = "7a1c3e5b9d2f4a6c8e0b1d3f5a7c9e2b"
    return _line(ts, f"Restoring job {job} from Savepoint 12 @ {snapshot_ms} for {job} located at s3://sp/savepoint-1.",
                 logger="org.apache.flink.runtime.checkpoint.CheckpointCoordinator")


def _detect(lines: list[str]):
    return get_detector(SLUG).detect(incident_from_text("\n".join(lines) + "\n", {}, "1.17.2",
                                                        file="flink-taskexecutor.log"))


def _primary(name: str, spark=None):
    diagnosis = run_detectors(ingest([str(example(SLUG, name))], spark))
    assert not diagnosis.errors
    return diagnosis.primary


def test_a_savepoint_older_than_the_retention_names_retention_and_measures_the_loss(spark):
    f = _primary("retention-expired-savepoint-restore-1.17", spark)
    assert f.runbook == SLUG and f.root_cause.slug == "retention-expired" and f.confidence >= 0.85
    assert f.details["snapshot_age"] == "9 day(s) 2 h" and f.details["failing_offsets"] == {"orders-0": 1843207}
    assert "lost" in f.summary and "savepoint 212" in f.summary
    measure = f.patches[0]
    assert measure.key == "measure the lost records" and "--time -2" in measure.snippet
    assert "1843207 on orders-0" in measure.snippet
    # every way to resume says it accepts the loss and hides the next one
    code = next(p for p in f.patches if p.target == "code")
    assert "committedOffsets(OffsetResetStrategy.EARLIEST)" in code.snippet
    assert "'properties.auto.offset.reset' = 'earliest'" in code.snippet
    assert "accepts the loss" in code.reason and "silently" in code.reason
    reset = next(p for p in f.patches if p.target == "kafka")
    assert reset.key == "auto.offset.reset" and reset.proposed == "earliest" and reset.current == "none"
    assert "hides the next one" in reset.reason
    assert any("Restoring job" in e.text for e in f.evidence)


def test_a_reset_policy_that_skipped_deleted_records_is_a_warning_from_the_snapshot_s_age():
    """Whole logs: the client's 'Resetting offset … to' line is logged on every ordinary start too, so the scan
    does not keep it; the 9-day-old savepoint the positions came from names retention, the count is to measure."""
    f = _primary("reset-to-earliest-hides-loss-1.17")
    assert f.runbook == SLUG and f.root_cause.slug == "retention-expired" and f.severity == "warning"
    assert f.details["resets"] == {"orders-0": "1843207 -> unknown", "orders-1": "1839950 -> unknown"}
    assert "taken 9 day(s)" in f.summary and "The reset hid the loss" in f.summary
    assert [p.key for p in f.patches] == ["measure the lost records", "keep records longer than the longest outage"]
    assert not f.patches[1].urgent
    assert "1843207 on orders-0" in f.patches[0].snippet


def test_a_pasted_reset_counts_the_records_it_skipped(tmp_path):
    """Pasted lines are read whole: the new positions are there and give the count."""
    from corpus import incident_from_files
    from flink_runbooks.diagnose import run_detectors

    log = example(SLUG, "reset-to-earliest-hides-loss-1.17") / "log" / "flink-flink-taskexecutor-0-flink-tm-0.log"
    lines = [line.split(" - ", 1)[1] for line in log.read_text().splitlines()
             if "is out of range for partition" in line or "Resetting offset for partition" in line]
    f = run_detectors(incident_from_files(tmp_path, {"ticket.txt": "\n".join(lines) + "\n"})).primary
    assert f.root_cause.slug == "retention-expired" and f.details["records_never_read"] == 731748
    assert f.details["resets"] == {"orders-0": "1843207 -> 2210034", "orders-1": "1839950 -> 2204871"}
    assert "366827 record(s) were never read" in f.summary
    # the job already resets: nothing proposes a reset policy again
    assert not [p for p in f.patches if p.target in ("kafka", "code")]


def test_a_sql_table_with_a_new_group_and_no_reset_policy():
    f = _primary("sql-group-offsets-new-group-1.20")
    assert f.runbook == SLUG and f.root_cause.slug == "no-committed-offsets"
    assert f.details["group"] == "orders-enricher-v2" and f.details["partitions"] == ["orders-0", "orders-1"]
    assert f.details["started_without_state"] is True
    assert "group-offsets without properties.auto.offset.reset" in f.summary and "No records are lost" in f.summary
    assert any("Found no committed offset" in e.text for e in f.evidence)
    assert any(p.key == "restore the offsets from Flink's state" for p in f.patches)
    rendered = render_kafka_properties(f.patches)
    assert "'properties.auto.offset.reset' = 'earliest'" in rendered["sql"]
    # a KafkaSource overrides the property: the DataStream form is its starting offsets, not setProperty
    assert "committedOffsets(OffsetResetStrategy.EARLIEST)" in rendered["datastream"]
    assert 'setProperty("auto.offset.reset"' not in rendered["datastream"]


def test_a_topic_recreated_under_a_running_job():
    f = _primary("topic-recreated-while-running-1.20")
    assert f.runbook == SLUG and f.root_cause.slug == "topic-recreated"
    assert "3AHjaoeBRs2ub-bsaFYbHg to tX4pQ9GkR1-vb0cRzWc8jA" in f.summary
    assert f.patches[0].key == "decide where to resume on the new topic"
    assert any("topicId changed from 3AHjaoeBRs2ub" in e.text for e in f.evidence)
    # the restore that follows is minutes old: it is not mistaken for retention
    assert "retention" not in f.root_cause.slug


def test_a_bare_legacy_trace_in_the_old_wording_stays_undetermined_with_the_queries_that_decide():
    f = _primary("ticket-excerpt-legacy-consumer-1.13")
    assert f.runbook == SLUG and f.root_cause.slug == "undetermined" and f.confidence < 0.5
    assert f.details["failing_offsets"] == {"clickstream-3": 48210555}
    assert f.details["source"] == "FlinkKafkaConsumer (legacy)"
    assert "--time -2" in f.patches[0].snippet and "--time -1" in f.patches[0].snippet
    assert not [p for p in f.patches if p.target == "kafka"]  # no reset is proposed before the loss is known


def test_a_bare_sql_trace_of_a_relocated_no_offset_exception():
    f = _primary("ticket-excerpt-sql-no-offset-1.20")
    assert f.runbook == SLUG and f.root_cause.slug == "no-committed-offsets"
    assert f.details["partitions"] == ["payments-0", "payments-1", "payments-2"]
    assert f.details["started_without_state"] == "unknown (an excerpt)"


def test_a_restore_that_reads_on_and_kafka_faults_of_other_runbooks_give_nothing():
    assert not [f for f in run_detectors(ingest([str(example(SLUG, "near-miss-savepoint-within-retention-1.17"))]))
                .findings if f.runbook == SLUG]
    for name in ("advertised-listeners-internal-hosts-1.17", "near-miss-broker-restart-blip-1.17"):
        assert get_detector(SLUG).detect(ingest([str(example("kafka-client-timeout", name))])) == []


def test_a_young_snapshot_is_no_evidence_of_retention():
    two_hours_before = 1713252600000 - 2 * 3_600_000  # 2024-04-16 07:30:00 UTC minus 2 h
    [f] = _detect([_restored("07:30:00,000", two_hours_before)] + _failed("07:30:05,000", NEW_WORDING))
    assert f.root_cause.slug == "undetermined"
    assert "too recent to blame retention" in f.summary
    [f] = _detect([_restored("07:30:00,000", two_hours_before - 5 * 86_400_000)] + _failed("07:30:05,000", NEW_WORDING))
    assert f.root_cause.slug == "retention-expired" and f.confidence < 0.85  # 5 days: within the default retention


def test_a_new_cluster_id_of_the_consumer_names_a_recreated_topic_but_a_sinks_cluster_does_not():
    consumer = "org.apache.kafka.clients.Metadata"
    lines = [_line("07:00:00,000", f"{TAG} Cluster ID: AAAAAAAAAAAAAAAAAAAAAA", logger=consumer),
             _line("07:00:01,000", "[Producer clientId=producer-1] Cluster ID: BBBBBBBBBBBBBBBBBBBBBB", logger=consumer)]
    [f] = _detect(lines + _failed("07:30:05,000", NEW_WORDING))
    assert f.root_cause.slug == "undetermined"
    lines.append(_line("07:20:00,000", f"{TAG} Cluster ID: CCCCCCCCCCCCCCCCCCCCCC", logger=consumer))
    [f] = _detect(lines + _failed("07:30:05,000", NEW_WORDING))
    assert f.root_cause.slug == "topic-recreated" and "AAAAAAAAAAAAAAAAAAAAAA, then CCCCCCCCCCCCCCCCCCCCCC" in f.summary


def test_another_groups_cluster_is_no_evidence_of_a_rebuilt_cluster():
    consumer = "org.apache.kafka.clients.Metadata"
    lines = [_line("07:00:00,000", "ConsumerConfig values: ", logger="org.apache.kafka.clients.consumer.ConsumerConfig"),
             "\tgroup.id = orders", "",
             _line("07:00:01,000", f"{TAG} Cluster ID: AAAAAAAAAAAAAAAAAAAAAA", logger=consumer),
             _line("07:00:02,000", "[Consumer clientId=audit-0, groupId=audit] Cluster ID: DDDDDDDDDDDDDDDDDDDDDD",
                   logger=consumer)]
    [f] = _detect(lines + _failed("07:30:05,000", NEW_WORDING))
    assert f.root_cause.slug == "undetermined"


def test_a_first_start_whose_reset_policy_picks_the_start_is_no_finding():
    state = "org.apache.kafka.clients.consumer.internals.SubscriptionState"
    lines = [_line("07:00:01,000", f"{TAG} Found no committed offset for partition orders-0",
                   logger="org.apache.kafka.clients.consumer.internals.ConsumerCoordinator"),
             _line("07:00:01,020", f"{TAG} Resetting offset for partition orders-0 to position FetchPosition{{offset=0, "
                                   "offsetEpoch=Optional.empty, currentLeader=LeaderAndEpoch{leader=Optional[kafka-1:"
                                   "9092 (id: 1 rack: null)], epoch=0}}.", logger=state)]
    assert _detect(lines) == []


def test_the_kafkasource_override_of_a_configured_reset_is_named():
    lines = [_line("07:00:00,000", "Property auto.offset.reset is provided but will be overridden from earliest to none",
                   "WARN", "org.apache.flink.connector.kafka.source.KafkaSourceBuilder")] + _failed(
        "07:00:05,000", "org.apache.kafka.clients.consumer.NoOffsetForPartitionException: Undefined offset with no "
                        "reset policy for partition: orders-0")
    [f] = _detect(lines)
    assert f.root_cause.slug == "no-committed-offsets" and f.details["partitions"] == ["orders-0"]
    assert "auto.offset.reset=earliest was overridden to none" in f.summary
    assert any("will be overridden" in e.text for e in f.evidence)


def test_the_old_wording_with_several_partitions_and_a_reset_to_latest():
    [f] = _detect(_failed("07:00:05,000", "org.apache.kafka.clients.consumer.OffsetOutOfRangeException: Offsets out of "
                                          "range with no configured reset policy for partitions: {orders-0=120, "
                                          "orders-1=98}"))
    assert f.details["failing_offsets"] == {"orders-0": 120, "orders-1": 98}
    fetcher = "org.apache.kafka.clients.consumer.internals.Fetcher"
    lines = [_line("07:00:00,000", "ConsumerConfig values: ", logger="org.apache.kafka.clients.consumer.ConsumerConfig"),
             "\tauto.offset.reset = latest", "\tgroup.id = orders", "",
             _line("07:00:01,000", f"{TAG} Fetch offset 120 is out of range for partition orders-0, resetting offset",
                   logger=fetcher),
             _line("07:00:01,050", f"{TAG} Resetting offset for partition orders-0 to offset 9000.",
                   logger="org.apache.kafka.clients.consumer.internals.SubscriptionState")]
    [f] = _detect(lines)
    assert f.severity == "warning" and f.details["records_never_read"] == 8880
    assert "or skipped by a reset to latest" in f.summary


def test_the_wordings_match_their_examples():
    for wording in get_detector(SLUG).wordings:
        assert __import__("re").search(wording.pattern, wording.example), wording.pattern
