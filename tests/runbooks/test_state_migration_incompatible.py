"""Detector state-migration-incompatible: which serializer could not read the snapshot, and what changed."""
from __future__ import annotations

import pytest

from corpus import example, incident_from_files, incident_from_text
from corpus import line
from flink_runbooks.diagnose import ingest
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.render.patches import render_config_diff

SLUG = "state-migration-incompatible"
BASE = "org.apache.flink.api.common.typeutils.base"
POJO = "org.apache.flink.api.java.typeutils.runtime.PojoSerializer@6d1c2a3b"
KRYO = "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializer@54e7a1c0"


def _task_failure(cause: str) -> str:
    return "\n".join([
        line("10:00:05,000", "counter -> Sink: sink (1/1)#0 (e8ab61cb2bf0a101f77d23e61747861c_0da08f51eaa85fc298e176a139b3649a_0_0) "
             "switched from INITIALIZING to FAILED with failure cause:", level="WARN",
             logger="org.apache.flink.runtime.taskmanager.Task"),
        "java.lang.Exception: Exception while creating StreamOperatorStateContext.",
        "Caused by: org.apache.flink.util.FlinkException: Could not restore keyed state backend for "
        "KeyedProcessOperator_0da08f51eaa85fc298e176a139b3649a_(1/1) from any of the 1 provided restore options.",
        "Caused by: org.apache.flink.runtime.state.BackendBuildingException: Failed when trying to restore heap backend",
        f"Caused by: org.apache.flink.util.StateMigrationException: {cause}",
        "\tat org.apache.flink.runtime.state.heap.HeapRestoreOperation.restore(HeapRestoreOperation.java:152)",
    ])


def test_a_changed_key_type_names_both_serializers():
    cause = (f"The new key serializer ({BASE}.IntSerializer@1b5ca8d1) must be compatible with the previous key "
             f"serializer ({BASE}.StringSerializer@4d9c7cb5).")
    [f] = get_detector(SLUG).detect(incident_from_text(_task_failure(cause), {}, "1.20.3"))
    assert f.root_cause.slug == "key-type-changed"
    assert "StringSerializer in the snapshot, IntSerializer now" in f.summary
    assert f.details["operator"].startswith("KeyedProcessOperator_0da08f51")
    keys = {p.key for p in f.patches}
    assert {"restore the previous type and redeploy", "migrate the state with the State Processor API"} <= keys
    drop = next(p for p in f.patches if "allowNonRestoredState" in p.key)
    assert "data-loss" in drop.reason


def test_a_changed_state_type_on_heap():
    cause = (f"For heap backends, the new state serializer ({BASE}.StringSerializer@5c3e0a41) must not be incompatible "
             f"with the old state serializer ({BASE}.LongSerializer@1a2b3c4d).")
    [f] = get_detector(SLUG).detect(incident_from_text(_task_failure(cause), {}, "1.17.2"))
    assert f.root_cause.slug == "state-type-changed" and f.details["state_backend"] == "heap"
    assert any(p.key == "evolvable state types" for p in f.patches)


@pytest.mark.parametrize("new,old", [(KRYO, POJO), (POJO, KRYO)])
def test_pojo_and_kryo_either_way_is_a_serializer_switch(new, old):
    cause = f"The new state serializer ({new}) must not be incompatible with the old state serializer ({old})."
    [f] = get_detector(SLUG).detect(incident_from_text(_task_failure(cause), {}, "1.20.3"))
    assert f.root_cause.slug == "kryo-pojo-switch"
    pojo = next(p for p in f.patches if p.key == "make the class a POJO again")
    assert "public Totals() {}" in pojo.snippet
    guard = next(p for p in f.patches if p.key == "pipeline.generic-types")
    assert guard.proposed == "false" and "does not restore this snapshot" in guard.reason
    assert "pipeline.generic-types: false" in render_config_diff(f.patches, None, "1.20.3")


def test_the_wording_before_1_13_still_names_the_key_at_lower_confidence():
    [f] = get_detector(SLUG).detect(incident_from_text(_task_failure("The new key serializer must be compatible."),
                                                       {}, "1.9.3"))
    assert f.root_cause.slug == "key-type-changed" and f.confidence < 0.9
    assert f.details["new_serializer"] == "not named in the message"


def test_an_exception_without_the_serializer_message_is_undetermined(tmp_path):
    text = ("org.apache.flink.util.StateMigrationException: Error while trying to migrate RocksDB state.\n"
            "\tat org.apache.flink.state.rocksdb.AbstractRocksDBState.migrateSerializedValue(AbstractRocksDBState.java:196)\n")
    primary = run_detectors(incident_from_files(tmp_path, {"ticket.txt": text}, "2.0.0")).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "undetermined")
    assert "Collect next" in primary.summary


def test_a_state_migration_that_succeeds_is_no_finding():
    text = line("10:00:05,000", "Performing state migration for state ValueStateDescriptor{name=count} because the "
                "state serializer's schema, i.e. serialization format, has changed.",
                logger="org.apache.flink.state.rocksdb.RocksDBKeyedStateBackend")
    assert get_detector(SLUG).detect(incident_from_text(text, {}, "2.3.0")) == []


@pytest.mark.parametrize("name,cause,note", [
    ("key-changed-hashmap-1.20.3", "key-type-changed", "the key serializer cannot read the snapshot's keys"),
    ("pojo-to-kryo-hashmap-1.20.3", "kryo-pojo-switch", "the snapshot's POJO serializer cannot instantiate the class"),
    ("state-type-changed-rocksdb-2.3.0", "state-type-changed", "a state's serializer cannot read the snapshot's values"),
    ("state-type-changed-hashmap-1.17.2", "state-type-changed", "a state's serializer cannot read the snapshot's values"),
])
def test_genuine_incidents(spark, name, cause, note):
    diagnosis = run_detectors(ingest([str(example(SLUG, name))], spark))
    primary = diagnosis.primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, cause)
    assert primary.details["failed_restores"] == 3  # fixed-delay, 2 restarts: every attempt reads the same snapshot
    assert any(e.note.startswith(note) for e in primary.evidence)
    assert primary.details["snapshot"].startswith("file:/data/flink/migration-")
    exhausted = next(f for f in diagnosis.findings if f.runbook == "restart-strategy-exhausted")
    assert not exhausted.primary
