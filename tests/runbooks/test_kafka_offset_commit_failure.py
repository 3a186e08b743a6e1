"""Detector kafka-offset-commit-failure: blips are no finding, each cause told apart, client settings from the dumps."""
from __future__ import annotations

import datetime as dt

import pytest

from corpus import example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.detectors.kafka_offset_commit_failure import MAX_CONSECUTIVE_FAILED_CHECKPOINTS
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest
from flink_runbooks.evidence.kafka_clients import cadence, client_configs, commit_failures, source_assignment
from flink_runbooks.render.patches import render_kafka_properties

SLUG = "kafka-offset-commit-failure"
JOB = "0123456789abcdef0123456789abcdef"
T0 = dt.datetime(2024, 5, 2, 8, 0, 0)
READER = "org.apache.flink.connector.kafka.source.reader.KafkaSourceReader"
COORD = "org.apache.kafka.clients.consumer.internals.ConsumerCoordinator"
NET = "org.apache.kafka.clients.NetworkClient"
COORDINATOR_NA = "CoordinatorNotAvailableException: The coordinator is not available."
DISCONNECT = "DisconnectException: null"


def ts(seconds: float) -> str:
    t = T0 + dt.timedelta(seconds=seconds)
    return t.strftime("%Y-%m-%d %H:%M:%S,") + f"{t.microsecond // 1000:03d}"


def line(at: float, level: str, logger: str, message: str) -> str:
    return f"{ts(at)} {level:<5} {logger:<60} [] - {message}\n"


def dump(at: float, client: str = "orders-0", **overrides: str) -> str:
    values = {"bootstrap.servers": "[kafka-0:9092, kafka-1:9092]", "client.id": client, "group.id": "orders",
              "connections.max.idle.ms": "540000", "reconnect.backoff.max.ms": "1000", "reconnect.backoff.ms": "50",
              "request.timeout.ms": "30000", "client.rack": ""}
    values.update({k.replace("_", "."): v for k, v in overrides.items()})
    return (line(at, "INFO", "org.apache.kafka.clients.consumer.ConsumerConfig", "ConsumerConfig values: ")
            + "".join(f"\t{k} = {v}\n" for k, v in sorted(values.items())))


def failure(at: float, checkpoint: int, cause: str = COORDINATOR_NA) -> str:
    return (line(at, "WARN", READER, f"Failed to commit consumer offsets for checkpoint {checkpoint}")
            + "org.apache.kafka.clients.consumer.RetriableCommitFailedException: Offset commit failed with a retriable "
              "exception. You should retry committing the latest consumed offsets.\n"
            + f"Caused by: org.apache.kafka.common.errors.{cause}\n")


def completed(at: float, checkpoint: int) -> str:
    return line(at, "INFO", "org.apache.flink.runtime.checkpoint.CheckpointCoordinator",
                f"Completed checkpoint {checkpoint} for job {JOB} (4120 bytes, checkpointDuration=80 ms, "
                f"finalizationTime=2 ms).")


def client(at: float, message: str, level: str = "INFO", logger: str = COORD, who: str = "orders-0") -> str:
    return line(at, level, logger, f"[Consumer clientId={who}, groupId=orders] {message}")


def outage(first: int, count: int, interval: float = 30, cause: str = COORDINATOR_NA, start: float = 600) -> str:
    """Commits of ``count`` consecutive checkpoints fail, ``interval`` seconds apart."""
    return "".join(failure(start + i * interval, first + i, cause) for i in range(count))


def coordinator_outage(count: int = 8) -> str:
    text = dump(1)
    text += client(599, "Group coordinator kafka-1:9092 (id: 2147483646 rack: null) is unavailable or invalid due to "
                        "cause: coordinator unavailable. isDisconnected: true. Rediscovery will be attempted.")
    text += client(599.5, "Connection to node 1 (kafka-1/10.0.0.11:9092) could not be established. Broker may not be "
                          "available.", "WARN", NET)
    text += outage(20, count)
    end = 600 + count * 30
    text += client(end, "Discovered group coordinator kafka-1:9092 (id: 2147483646 rack: null)")
    text += "".join(completed(end + 5 + 30 * i, 20 + count + i) for i in range(4))
    return text


def detect(text: str, config: dict | None = None, version: str | None = None):
    return get_detector(SLUG).detect(incident_from_text(text, config, version))


# ------------------------------------------------------------------------------------------------ blips and thresholds


def test_a_short_coordinator_blip_is_no_finding():
    text = dump(1) + failure(600, 212, "NotCoordinatorException: This is not the correct coordinator.") + failure(620, 213)
    text += client(621, "Discovered group coordinator kafka-2:9092 (id: 2147483645 rack: null)")
    text += "".join(completed(640 + 20 * i, 214 + i) for i in range(10))
    assert detect(text) == []


def test_threshold_is_more_than_the_named_number_of_consecutive_checkpoints():
    at_threshold = dump(1) + outage(20, MAX_CONSECUTIVE_FAILED_CHECKPOINTS)  # 2.5 min: still a blip
    resumed = completed(600 + 30 * MAX_CONSECUTIVE_FAILED_CHECKPOINTS + 5, 20 + MAX_CONSECUTIVE_FAILED_CHECKPOINTS)
    assert detect(at_threshold + resumed) == []
    [finding] = detect(dump(1) + outage(20, MAX_CONSECUTIVE_FAILED_CHECKPOINTS + 1))
    assert finding.details["longest_consecutive_run"] == MAX_CONSECUTIVE_FAILED_CHECKPOINTS + 1


def test_failures_that_keep_coming_back_for_minutes_are_a_finding_even_when_not_consecutive():
    text = dump(1) + failure(0, 3) + failure(200, 10) + failure(420, 17)
    [finding] = detect(text)
    assert finding.details["longest_consecutive_run"] == 1
    assert finding.details["failure_span"] == "7 min"


PASTED_EXCERPT = """\
2023-04-10 13:51:20,060 INFO  org.apache.kafka.clients.FetchSessionHandler                 [] - [Consumer
clientId=event-executor-client-1, groupId=event-executor-grp] Error sending fetch request (sessionId=INVALID,
epoch=INITIAL) to node 16:
org.apache.kafka.common.errors.DisconnectException: null
2023-04-10 13:51:48,469 WARN  org.apache.flink.connector.kafka.source.reader.KafkaSourceReader [] - Failed to
commit consumer offsets for checkpoint 4
org.apache.kafka.clients.consumer.RetriableCommitFailedException: Offset commit failed with a retriable
exception. You should retry committing the latest consumed offsets.
Caused by: org.apache.kafka.common.errors.CoordinatorNotAvailableException: The coordinator is not available.
2023-04-10 13:51:48,829 WARN  org.apache.flink.connector.kafka.source.reader.KafkaSourceReader [] - Failed to
commit consumer offsets for checkpoint 4
org.apache.kafka.clients.consumer.RetriableCommitFailedException: Offset commit failed with a retriable
exception. You should retry committing the latest consumed offsets.
Caused by: org.apache.kafka.common.errors.CoordinatorNotAvailableException: The coordinator is not available.
"""


def test_a_pasted_excerpt_without_a_timeline_is_a_lower_confidence_finding_with_persistence_unknown():
    # Two failed commits of one checkpoint and nothing after them: a blip and an outage look the same.
    inc = incident_from_text(PASTED_EXCERPT, version="1.16.0")
    assert [f.checkpoint_id for f in commit_failures(inc)] == [4, 4]  # the wrapped wording is still read
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "coordinator-unavailable"  # the commits' own exception says so
    assert finding.confidence <= 0.5
    assert finding.details["persistence"].startswith("unknown")
    assert "whether they went on or were a short blip is unknown" in finding.summary
    assert any(p.key == "check the brokers, do not restart the job" for p in finding.patches)


def test_the_same_failures_followed_by_completed_checkpoints_are_a_blip():
    text = PASTED_EXCERPT + "2023-04-10 13:52:10,001 INFO  " + completed(0, 5).split(" INFO  ", 1)[1]
    assert get_detector(SLUG).detect(incident_from_text(text)) == []


def test_failures_at_the_end_of_a_long_log_are_not_judged_a_blip():
    [finding] = detect(dump(1) + outage(20, MAX_CONSECUTIVE_FAILED_CHECKPOINTS))
    assert finding.details["persistence"].startswith("unknown") and finding.confidence <= 0.5


def test_a_pasted_loop_without_timestamps_counts_consecutive_checkpoints():
    text = "".join(
        f"WARN  {READER} [] - Failed to commit consumer offsets for checkpoint {cid}\n"
        "org.apache.kafka.clients.consumer.RetriableCommitFailedException: Offset commit failed with a retriable "
        "exception. You should retry committing the latest consumed offsets.\n"
        f"Caused by: org.apache.kafka.common.errors.{COORDINATOR_NA}\n" for cid in range(40, 48))
    [finding] = detect(text)
    assert finding.details["failure_span"] == "unknown (no timestamps)"
    assert finding.root_cause.slug == "coordinator-unavailable"


# ------------------------------------------------------------------------------------------------ causes


def test_coordinator_outage_during_broker_restart():
    [finding] = detect(coordinator_outage())
    assert finding.root_cause.slug == "coordinator-unavailable"
    assert finding.severity == "warning"
    assert finding.confidence >= 0.85
    assert finding.details["checkpoints_failing"] == "20–27"
    assert finding.details["recovered_at"].startswith("2024-05-02 08:14:00")
    assert "Commits recovered at" in finding.summary
    assert "does not affect Flink's correctness" in finding.summary
    notes = [e.note for e in finding.evidence]
    assert "a broker was unreachable" in notes and "the coordinator is back" in notes
    ops = next(p for p in finding.patches if p.target == "ops")
    assert "--topic __consumer_offsets" in ops.snippet and "kafka-0:9092" in ops.snippet and "--group orders" in ops.snippet


def idle_reaping(interval: float = 300, count: int = 6) -> str:
    text = dump(1)
    for i in range(count):
        at = 300 + i * interval
        text += client(at, "Node 2147483645 disconnected.", logger=NET)
        text += client(at, "Cancelled in-flight OFFSET_COMMIT request with correlation id 1882 due to node 2147483645 "
                           "being disconnected (elapsed time since creation: 2ms, elapsed time since send: 2ms, request "
                           "timeout: 30000ms)", logger=NET)
        text += client(at, "Group coordinator b-2:9094 (id: 2147483645 rack: null) is unavailable or invalid due to "
                           "cause: coordinator unavailable. isDisconnected: true. Rediscovery will be attempted.")
        text += failure(at + 0.01, 2 + i, DISCONNECT)
        text += client(at + 0.06, "Discovered group coordinator b-2:9094 (id: 2147483645 rack: null)")
    return text


def test_idle_connections_reaped_between_commits_minutes_apart():
    [finding] = detect(idle_reaping())
    assert finding.root_cause.slug == "idle-connection-reaped"
    assert finding.details["commit_cadence"] == "300 s"
    assert finding.details["node_disconnect_period"] == "300 s"
    idle = next(p for p in finding.patches if p.key == "connections.max.idle.ms")
    # half the 300 s between commits: the client closes the idle connection before the network drops it
    assert (idle.current, idle.proposed) == ("540000", "150000")
    assert idle.current_source.startswith("ConsumerConfig values, jobmanager.log:")


def test_the_same_disconnects_on_commits_seconds_apart_are_not_idle_reaping_and_name_no_cause():
    [finding] = detect(idle_reaping(interval=20, count=8))
    # busy connections that drop: nothing points at the coordinator or at idle reaping, so no cause is named
    assert finding.root_cause.slug == "undetermined" and finding.confidence < 0.5
    assert "Collect next: the broker logs" in finding.summary
    assert "kafka-consumer-groups.sh --describe" in finding.summary
    assert not [p for p in finding.patches if p.target == "kafka"]  # no patch for a cause nobody named


def test_reconnect_backoff_is_not_proposed_against_idle_reaping():
    [finding] = detect(idle_reaping())
    assert not [p for p in finding.patches if p.key.startswith("reconnect.backoff")]


def parallelism_loop(readers: int = 6, partitions: int = 3) -> str:
    sc = "org.apache.flink.runtime.source.coordinator.SourceCoordinator"
    enum = "org.apache.flink.connector.kafka.source.enumerator.KafkaSourceEnumerator"
    text = line(0, "INFO", enum, "Discovered new partitions: [" + ", ".join(f"events-{p}" for p in range(partitions)) + "]")
    text += "".join(line(0.5, "INFO", sc, f"Source Source: events registering reader for parallel task {k} (#0) @ 10.9.2.0")
                    for k in range(readers))
    splits = ", ".join(f"{p}=[[Partition: events-{p}, StartingOffset: -3, StoppingOffset: -9223372036854775808]]"
                       for p in range(partitions))
    text += line(1, "INFO", enum, f"Assigning splits to readers {{{splits}}}")
    text += dump(2, "event-executor-client-1")
    text += "".join(failure(600 + 30 * i, 20 + i, COORDINATOR_NA if i % 2 else DISCONNECT) for i in range(12))
    return text


def test_more_readers_than_partitions_is_reported_but_never_the_cause():
    # Idle readers commit nothing, so the commits' own exceptions (coordinator errors first) decide.
    [finding] = detect(parallelism_loop())
    assert finding.root_cause.slug == "coordinator-unavailable"
    assert (finding.details["readers"], finding.details["partitions"]) == (6, 3)
    code = next(p for p in finding.patches if p.target == "code")
    assert ".setParallelism(3);" in code.snippet and "was 6 readers" in code.snippet
    assert code.reason.startswith("Not a fix for the commit failures")
    assert "3 reader(s) sit idle" in finding.summary and "does not make commits fail" in finding.summary


def test_rolling_broker_restart_with_surplus_readers_keeps_the_check_the_brokers_action():
    sc = "org.apache.flink.runtime.source.coordinator.SourceCoordinator"
    readers = "".join(line(0.5, "INFO", sc, f"Source Source: events registering reader for parallel task {k} (#0) "
                                            f"@ 10.9.2.0") for k in range(6))
    enum = "org.apache.flink.connector.kafka.source.enumerator.KafkaSourceEnumerator"
    text = line(0, "INFO", enum, "Discovered new partitions: [events-0, events-1, events-2]") + readers
    [finding] = detect(text + coordinator_outage())
    assert finding.root_cause.slug == "coordinator-unavailable" and finding.confidence >= 0.85
    assert any(p.key == "check the brokers, do not restart the job" for p in finding.patches)


def test_the_same_loop_with_one_reader_per_partition_is_a_coordinator_problem():
    [finding] = detect(parallelism_loop(readers=3, partitions=3))
    assert finding.root_cause.slug == "coordinator-unavailable"
    assert not any(p.target == "code" for p in finding.patches)


def test_legacy_flink_kafka_consumer_wording():
    text = ""
    for i in range(4):
        at = 100 + i * 150
        text += line(at, "WARN", "org.apache.flink.streaming.connectors.kafka.internals.KafkaConsumerThread",
                     "Committing offsets to Kafka failed. This does not compromise Flink's checkpoints.")
        text += ("org.apache.kafka.clients.consumer.RetriableCommitFailedException: Offset commit failed with a "
                 "retriable exception. You should retry committing the latest consumed offsets.\n"
                 f"Caused by: org.apache.kafka.common.errors.{COORDINATOR_NA}\n")
        text += line(at + 0.002, "WARN", "org.apache.flink.streaming.connectors.kafka.FlinkKafkaConsumerBase",
                     "Consumer subtask 1 failed async Kafka commit.")
        text += ("org.apache.kafka.clients.consumer.RetriableCommitFailedException: Offset commit failed with a "
                 "retriable exception. You should retry committing the latest consumed offsets.\n"
                 f"Caused by: org.apache.kafka.common.errors.{COORDINATOR_NA}\n")
    inc = incident_from_text(text, version="1.13.6")
    failures = commit_failures(inc)
    assert len(failures) == 4 and {f.api for f in failures} == {"FlinkKafkaConsumer"}  # one per commit, not two
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.details["checkpoints_failing"] == "ids not logged (legacy consumer)"
    assert finding.root_cause.slug == "coordinator-unavailable"


# ------------------------------------------------------------------------------------------------ patches


def test_backoff_patches_carry_the_current_values_of_the_dump():
    [finding] = detect(coordinator_outage())
    kafka = {p.key: p for p in finding.patches if p.target == "kafka"}
    assert (kafka["reconnect.backoff.ms"].current, kafka["reconnect.backoff.ms"].proposed) == ("50", "1000")
    assert (kafka["reconnect.backoff.max.ms"].current, kafka["reconnect.backoff.max.ms"].proposed) == ("1000", "5000")
    rendered = render_kafka_properties(finding.patches)
    assert ".setProperty(\"reconnect.backoff.ms\", \"1000\")" in rendered["datastream"]
    assert "'properties.reconnect.backoff.max.ms' = '5000'" in rendered["sql"]


def test_backoff_already_as_high_is_not_proposed_again():
    text = coordinator_outage().replace("reconnect.backoff.ms = 50", "reconnect.backoff.ms = 2000").replace(
        "reconnect.backoff.max.ms = 1000", "reconnect.backoff.max.ms = 10000")
    [finding] = detect(text)
    assert not [p for p in finding.patches if p.key.startswith("reconnect.backoff")]


def test_without_a_dump_the_current_value_is_the_kafka_default_and_says_so():
    [finding] = detect(outage(20, 8))
    backoff = next(p for p in finding.patches if p.key == "reconnect.backoff.ms")
    assert backoff.current == "50"
    assert backoff.current_source == "Kafka client default (no ConsumerConfig dump in the logs)"


# ------------------------------------------------------------------------------------------------ helpers


def test_client_config_dump_is_parsed_from_the_event_body():
    [cfg] = client_configs(incident_from_text(dump(1, "orders-2", connections_max_idle_ms="180000")))
    assert cfg.kind == "consumer" and cfg.client_id == "orders-2" and cfg.group_id == "orders"
    assert cfg.values["connections.max.idle.ms"] == "180000"
    assert cfg.values["client.rack"] == ""


def test_cadence_needs_three_gaps():
    assert cadence(["2024-01-01 00:00:00.000", "2024-01-01 00:05:00.000"]) == (None, None)
    period, cv = cadence([f"2024-01-01 00:{m:02d}:00.000" for m in (0, 5, 10, 15)])
    assert period == 300 and cv == 0


def test_legacy_assignment_lines_reveal_idle_subtasks():
    consumer = "org.apache.flink.streaming.connectors.kafka.FlinkKafkaConsumerBase"
    text = (line(0, "INFO", consumer, "Consumer subtask 0 will start reading the following 1 partitions from the "
                                      "committed group offsets in Kafka: [KafkaTopicPartition{topic='clicks', partition=0}]")
            + line(0, "INFO", consumer, "Consumer subtask 1 initially has no partitions to read from."))
    assignment = source_assignment(incident_from_text(text))
    assert assignment.partitions == {"clicks-0"} and assignment.idle_readers == {1} and assignment.exceeds


# ------------------------------------------------------------------------------------------------ example incidents


@pytest.mark.parametrize("name,cause", [
    ("coordinator-unavailable-rolling-restart", "coordinator-unavailable"),
    ("idle-connections-reaped-docker", "idle-connection-reaped"),
    ("coordinator-loop-with-surplus-readers-1.16", "coordinator-unavailable"),
])
def test_example_incidents_through_spark(spark, name, cause):
    inc = ingest([str(example(SLUG, name))], spark)
    primary = run_detectors(inc).primary
    assert primary.runbook == SLUG and primary.root_cause.slug == cause
    assert primary.details["consumer_config"].startswith("ConsumerConfig values, ")


@pytest.mark.parametrize("name", ["healthy", "near-miss-broker-restart-blip"])
def test_healthy_and_near_miss_give_nothing_from_any_runbook(spark, name):
    inc = ingest([str(example(SLUG, name))], spark)
    assert commit_failures(inc) or name == "healthy"
    assert run_detectors(inc).findings == []


def test_the_production_ticket_excerpt_through_spark_is_a_finding_with_persistence_unknown(spark):
    inc = ingest([str(example(SLUG, "ticket-excerpt-1.16"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "coordinator-unavailable")
    assert primary.confidence <= 0.5 and primary.details["persistence"].startswith("unknown")
