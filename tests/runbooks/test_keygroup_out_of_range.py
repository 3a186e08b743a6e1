"""Detector keygroup-out-of-range: a key outside its subtask's key groups, where the key was set and what to change."""
from __future__ import annotations

import pytest

from corpus import example, incident_from_files, incident_from_text, line
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import ingest, run_detectors

SLUG = "keygroup-out-of-range"
MESSAGE = ("Key group 77 is not in KeyGroupRange{startKeyGroup=0, endKeyGroup=63}. Unless you're directly using low "
           "level state access APIs, this is most likely caused by non-deterministic shuffle key (hashCode and equals "
           "implementation).")
TASK = "orders-per-customer -> Sink: sink (1/2)#0 (60588f43a6b9f8f4302b4ec6fa4123cf_25afd583284baa21fbad98ede8b7bfc5_0_0)"
KEY_CONTEXT = [
    "\tat org.apache.flink.runtime.state.KeyGroupRangeOffsets.newIllegalKeyGroupException(KeyGroupRangeOffsets.java:37)",
    "\tat org.apache.flink.runtime.state.InternalKeyContextImpl.setCurrentKeyGroupIndex(InternalKeyContextImpl.java:74)",
    "\tat org.apache.flink.runtime.state.AbstractKeyedStateBackend.setCurrentKey(AbstractKeyedStateBackend.java:249)",
]


def _failure(frames: list[str]) -> str:
    return "\n".join([
        line("22:24:26,467", f"{TASK} switched from RUNNING to FAILED with failure cause:", level="WARN",
             logger="org.apache.flink.runtime.taskmanager.Task"),
        "java.lang.RuntimeException: Exception occurred while setting the current key context.",
        "\tat org.apache.flink.streaming.api.operators.StreamOperatorStateHandler.setCurrentKey(StreamOperatorStateHandler.java:409)",
        f"Caused by: java.lang.IllegalArgumentException: {MESSAGE}",
        *KEY_CONTEXT,
        *frames,
    ])


def test_a_key_set_on_flinks_record_path_is_not_deterministic():
    text = _failure([
        "\tat org.apache.flink.streaming.api.operators.AbstractStreamOperator.setCurrentKey(AbstractStreamOperator.java:567)",
        "\tat org.apache.flink.streaming.api.operators.AbstractStreamOperator.setKeyContextElement(AbstractStreamOperator.java:562)",
        "\tat org.apache.flink.streaming.runtime.tasks.OneInputStreamTask$StreamTaskNetworkOutput.emitRecord(OneInputStreamTask.java:238)",
    ])
    [f] = get_detector(SLUG).detect(incident_from_text(text, {}, "1.20.3", file="taskmanager.log"))
    assert f.root_cause.slug == "non-deterministic-key"
    assert f.details["task"] == "orders-per-customer -> Sink: sink"
    assert (f.details["key_group"], f.details["subtask_key_groups"]) == (77, "0–63")
    [p] = f.patches
    assert p.target == "code" and "hashCode" in p.snippet and "enum" in p.reason


def test_before_1_17_the_heap_state_table_refuses_it_when_the_function_reads_its_state():
    # 1.13 - 1.16: no check when the key is set; StateTable#getMapForKeyGroup throws on the function's state read
    text = "\n".join([
        line("22:24:26,467", f"{TASK} switched from RUNNING to FAILED with failure cause: "
             f"java.lang.IllegalArgumentException: {MESSAGE}", level="WARN",
             logger="org.apache.flink.runtime.taskmanager.Task"),
        f"java.lang.IllegalArgumentException: {MESSAGE}",
        "\tat org.apache.flink.runtime.state.KeyGroupRangeOffsets.newIllegalKeyGroupException(KeyGroupRangeOffsets.java:37)",
        "\tat org.apache.flink.runtime.state.heap.StateTable.getMapForKeyGroup(StateTable.java:305)",
        "\tat org.apache.flink.runtime.state.heap.StateTable.get(StateTable.java:261)",
        "\tat org.apache.flink.runtime.state.heap.StateTable.get(StateTable.java:143)",
        "\tat org.apache.flink.runtime.state.heap.HeapValueState.value(HeapValueState.java:72)",
        "\tat com.example.orders.CountPerCustomer.processElement(CountPerCustomer.java:31)",
        "\tat org.apache.flink.streaming.api.operators.KeyedProcessOperator.processElement(KeyedProcessOperator.java:83)",
        "\tat org.apache.flink.streaming.runtime.tasks.OneInputStreamTask$StreamTaskNetworkOutput.emitRecord(OneInputStreamTask.java:205)",
    ])
    [f] = get_detector(SLUG).detect(incident_from_text(text, {}, "1.13.6", file="taskmanager.log"))
    assert f.root_cause.slug == "non-deterministic-key"
    assert f.details["operator"] == "KeyedProcessOperator"
    assert f.details["function"].startswith("com.example.orders.CountPerCustomer.processElement")
    assert "CountPerCustomer.processElement" in f.summary


def test_the_jobs_own_class_setting_the_key_is_low_level_access():
    text = _failure([
        "\tat com.example.reports.StateScanner.visit(StateScanner.java:88)",
        "\tat com.example.reports.StateScanner.processElement(StateScanner.java:41)",
        "\tat org.apache.flink.streaming.api.operators.ProcessOperator.processElement(ProcessOperator.java:66)",
    ])
    [f] = get_detector(SLUG).detect(incident_from_text(text, {}, "1.20.3", file="taskmanager.log"))
    assert f.root_cause.slug == "low-level-state-access"
    assert "com.example.reports.StateScanner.visit" in f.summary
    assert [p.key for p in f.patches] == ["set keys only through keyBy"]


def test_a_kryo_serialized_class_of_the_job_is_named_as_the_key_to_check():
    generic = line("22:25:17,817", "Class class com.example.CustomerRef cannot be used as a POJO type because not all "
                   "fields are valid POJO fields, and must be processed as GenericType. Please read the Flink "
                   "documentation on \"Data Types & Serialization\" for details of the effect on performance and "
                   "schema evolution.", logger="org.apache.flink.api.java.typeutils.TypeExtractor")
    text = generic + "\n" + _failure([
        "\tat org.apache.flink.streaming.api.operators.AbstractStreamOperator.setKeyContextElement(AbstractStreamOperator.java:562)"])
    [f] = get_detector(SLUG).detect(incident_from_text(text, {}, "1.20.3", file="taskmanager.log"))
    assert f.root_cause.slug == "non-deterministic-key"
    assert f.details["kryo_serialized_classes"] == ["com.example.CustomerRef"]
    assert "com.example.CustomerRef" in f.summary


def test_the_bare_message_is_undetermined(tmp_path):
    inc = incident_from_files(tmp_path, {"ticket.txt": f"java.lang.IllegalArgumentException: {MESSAGE}\n"}, "1.18.1")
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "undetermined")
    assert "Collect next" in primary.summary


def test_the_short_wording_of_older_releases_is_recognised(tmp_path):
    text = ("java.lang.IllegalArgumentException: Key group 45 is not in KeyGroupRange{startKeyGroup=64, "
            "endKeyGroup=127}.\n")
    primary = run_detectors(incident_from_files(tmp_path, {"ticket.txt": text}, "1.11.4")).primary
    assert primary.runbook == SLUG and primary.details["key_group"] == 45


@pytest.mark.parametrize("name", ["random-key-selector-1.20.3", "random-key-selector-2.3.0",
                                  "identity-hash-key-1.20.3", "enum-in-key-two-taskmanagers-1.20.3"])
def test_genuine_non_deterministic_keys(spark, name):
    primary = run_detectors(ingest([str(example(SLUG, name))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "non-deterministic-key")
    assert primary.details["task"] == "orders-per-customer -> Sink: sink"
    assert primary.details["failures"] > 1 and len(primary.details["key_groups_seen"]) > 1
    assert primary.patches and all(p.target == "code" for p in primary.patches)


def test_genuine_identity_hash_key_names_the_class(spark):
    primary = run_detectors(ingest([str(example(SLUG, "identity-hash-key-1.20.3"))], spark)).primary
    assert primary.details["kryo_serialized_classes"] == ["com.example.keys.KeyGroupJob$CustomerRef"]
