"""Detector insufficient-network-buffers: buffers needed from the message, why the pool was small, sizes that fit."""
from __future__ import annotations

from corpus import example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest
from flink_runbooks.evidence.memory import derive_taskmanager_memory
from flink_runbooks.evidence.memory.incident import apply_changes, user_memory_config
from flink_runbooks.render.patches import render_config_diff

SLUG = "insufficient-network-buffers"
P = "taskmanager.memory."
MIB = 1 << 20


def failure(required, available, total, size=32768, legacy=False, task="Window(TumblingEventTimeWindows(300000)) (420/512)#0"):
    keys = ("'taskmanager.network.memory.fraction', 'taskmanager.network.memory.min', and "
            "'taskmanager.network.memory.max'" if legacy else
            "'taskmanager.memory.network.fraction', 'taskmanager.memory.network.min', and "
            "'taskmanager.memory.network.max'")
    return (f"2024-01-09 16:20:05,971 WARN  org.apache.flink.runtime.taskmanager.Task [] - {task} (abc) switched from "
            f"DEPLOYING to FAILED with failure cause:\n"
            f"java.io.IOException: Insufficient number of network buffers: required {required}, but only {available} "
            f"available. The total number of network buffers is currently set to {total} of {size} bytes each. You "
            f"can increase this number by setting the configuration keys {keys}.\n"
            f"\tat org.apache.flink.runtime.io.network.buffer.NetworkBufferPool.internalCreateBufferPool"
            f"(NetworkBufferPool.java:495)\n")


def _after(inc, finding):
    changes = {p.key: p.proposed for p in finding.patches if p.target == "flink"}
    return derive_taskmanager_memory(apply_changes(user_memory_config(inc), changes), inc.version_tuple)


def test_high_parallelism_grows_network_memory_from_the_message_numbers():
    inc = incident_from_text(failure(1032, 807, 5079), {P + "process.size": "2048m"}, "1.16.3")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "high-parallelism-shuffle"
    assert "2 (buffers-per-channel) x 512 + 8 (floating) = 1032 buffers" in finding.summary
    # (5079 - 807 + 1032) x 1.25 = 6630 buffers of 32k = 207.2m -> 208m
    assert finding.details["buffers_targeted"] == 6630
    proposed = {p.key: (p.current, p.proposed) for p in finding.patches if p.target == "flink"}
    assert proposed == {P + "network.min": (None, "208m"), P + "process.size": ("2048m", "2140m")}
    after = _after(inc, finding)
    assert after.network >= 208 * MIB - (64 << 10) and after.task_heap >= 537 * MIB


def test_segment_size_back_to_32kb_is_enough_on_its_own():
    conf = {P + "process.size": "4096m", P + "segment-size": "2mb", "taskmanager.network.memory.min": "256mb",
            "taskmanager.network.memory.max": "1024mb", "taskmanager.network.memory.buffers-per-channel": "8",
            "taskmanager.network.memory.floating-buffers-per-gate": "16"}
    inc = incident_from_text(failure(144, 27, 171, 2097152, task="CepOperator (12/16)"), conf, "1.11.2")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "segment-size-enlarged"
    assert "8 (buffers-per-channel) x 16 + 16 (floating) = 144" in finding.summary
    assert [(p.key, p.current, p.proposed) for p in finding.patches] == [(P + "segment-size", "2mb", None)]
    assert "10944 buffers" in finding.details["plan"]


def test_network_capped_by_the_pre_117_default_max():
    inc = incident_from_text(failure(2008, 1500, 32768, task="Join (611/1000)#0"),
                             {P + "process.size": "32g", "taskmanager.numberOfTaskSlots": "16"}, "1.14.6")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "network-capped-by-max"
    assert "> max 1g, max used" in finding.summary
    proposed = {p.key: p.proposed for p in finding.patches}
    assert proposed[P + "network.min"] == proposed[P + "network.max"] == "1300m"
    assert _after(inc, finding).network >= 1300 * MIB - (64 << 10)


def test_small_taskmanager_at_the_network_min():
    inc = incident_from_text(failure(300, 100, 2048, task="Map (3/100)#0"), {P + "process.size": "512m",
                                                                            P + "jvm-metaspace.size": "96m"}, "1.15.4")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.root_cause.slug == "network-at-min"


def test_legacy_19_keys_are_rendered_for_the_old_version_and_the_new_ones_for_new():
    text = failure(408, 203, 2048, legacy=True, task="Source: Kafka (17/200)")
    old = incident_from_text(text, {"taskmanager.heap.size": "512m"}, "1.9.1")
    [finding] = get_detector(SLUG).detect(old)
    assert finding.root_cause.slug == "network-at-min"
    proposed = {p.key: p.proposed for p in finding.patches}
    assert proposed == {"taskmanager.network.memory.min": "89m", "taskmanager.heap.size": "537m"}  # 1.9 names
    old_diff = render_config_diff(finding.patches, old.config, (1, 9))
    assert "+taskmanager.network.memory.min: 89m" in old_diff and "taskmanager.heap.size: 537m" in old_diff
    assert "+taskmanager.memory.network.min: 89m" in render_config_diff(finding.patches, old.config, (1, 16))


def test_exclusive_buffer_timeout_variant_doubles_the_pool_at_least():
    text = ("java.io.IOException: Timeout triggered when requesting exclusive buffers: The total number of network "
            "buffers is currently set to 4096 of 32768 bytes each. You can increase this number by setting the "
            "configuration keys 'taskmanager.memory.network.fraction', 'taskmanager.memory.network.min', and "
            "'taskmanager.memory.network.max', or you may increase the timeout which is 30000ms by setting the key "
            "'taskmanager.network.memory.exclusive-buffers-request-timeout-ms'.")
    inc = incident_from_text(text, {P + "process.size": "1728m"}, "1.13.6")
    [finding] = get_detector(SLUG).detect(inc)
    assert finding.details["required_buffers"] is None and finding.details["buffers_targeted"] == 8192
    assert {p.key: p.proposed for p in finding.patches if p.target == "flink"}[P + "network.min"] == "256m"


def test_near_misses_give_nothing():
    capped = ("INFO  [] - The derived from fraction network memory (1.533gb (1646019379 bytes)) is greater than its "
              "max value 1024.000mb (1073741824 bytes), max value will be used instead\n"
              "2023-05-17 11:40:12,001 INFO  org.apache.flink.runtime.io.network.buffer.NetworkBufferPool [] - "
              "Allocated 1024 MB for network buffer pool (number of memory segments: 32768, bytes per segment: 32768).")
    assert get_detector(SLUG).detect(incident_from_text(capped, {P + "process.size": "24g"}, "1.15.4")) == []
    destroyed = "java.lang.IllegalStateException: Buffer pool is destroyed."
    assert get_detector(SLUG).detect(incident_from_text(destroyed)) == []


def test_example_segment_size_through_spark(spark):
    inc = ingest([str(example(SLUG, "segment-size-2mb-v1.11"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "segment-size-enlarged")
    assert primary.details["total_buffers"] == 171 and primary.details["segment_size"] == "2m"
    assert [(p.key, p.proposed) for p in primary.patches] == [(P + "segment-size", None)]


def test_example_healthy_through_spark(spark):
    assert run_detectors(ingest([str(example(SLUG, "healthy-v1.17"))], spark)).findings == []


def test_a_pasted_message_without_version_is_answered_in_the_keys_it_names(spark):
    """A bare excerpt naming taskmanager.network.memory.*: the release is 1.9 or older, so is the advice."""
    inc = ingest([str(example(SLUG, "ticket-excerpt-legacy-keys-1.9"))], spark)
    assert inc.version_source.startswith("fingerprint")
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "network-at-min")
    assert [p.key for p in primary.patches if p.target == "flink"] == ["taskmanager.network.memory.min"]
    assert "+taskmanager.network.memory.min: 82m" in render_config_diff(primary.patches, None, inc.version_tuple)


def test_the_same_message_of_1_10_or_later_is_not_taken_for_an_old_release():
    inc = incident_from_text(failure(65, 38, 2048))  # names taskmanager.memory.network.*
    from flink_runbooks.collect.ingest import detect_version
    assert detect_version(inc.events, {}) == (None, None)
    [finding] = get_detector(SLUG).detect(inc)
    assert [p.key for p in finding.patches if p.target == "flink"] == [P + "network.min"]


def test_before_1_3_the_pool_is_a_count_of_buffers(spark):
    inc = ingest([str(example(SLUG, "ticket-excerpt-buffer-count-1.2"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "buffer-count-too-low")
    # (2048 - 48 + 120) x 1.25 = 2650 buffers: no memory key those releases do not read
    assert [(p.key, p.proposed) for p in primary.patches] == [("taskmanager.network.numberOfBuffers", "2650")]
