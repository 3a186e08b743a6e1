"""``Could not perform checkpoint N for operator``: the synchronous part of a task's snapshot failed.

The synchronous part runs in the task thread when the barrier arrives (``snapshotState``,
``prepareSnapshotPreBarrier``, RocksDB's native checkpoint, sinks flushing). A failure there is thrown out of the
task: the task fails and the job restarts from its last completed checkpoint, whatever
``tolerable-failed-checkpoints`` says (Flink ≤ 1.8 could decline instead, with ``setFailOnCheckpointingErrors``).
The runbook names what failed underneath; datanode trouble and RocksDB hard links have their own, more specific
runbooks (``hdfs-datanode-failure``, ``rocksdb-hardlink-not-supported``), which is why this one is a wrapper (layer 1).
"""
from __future__ import annotations

import re
from collections import Counter

from flink_runbooks.evidence.checkpoints import checkpoint_history, last_completed_before
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.evidence.snapshot_failures import (FLUSH_CLOSE, HDFS_FAILURE, OPEN_STREAM, ROCKSDB, ROCKSDB_LINK, STORAGE_CLIENT,
                                 SnapshotFailure, checkpoint_dir, decline_instead_of_fail_patch, is_legacy,
                                 snapshot_failures, storage_actions, storage_error)
from flink_runbooks.detectors.base import Detector
from flink_runbooks.vocabulary.wordings import Wording

# Exceptions a sink raises at the checkpoint when records it sent earlier could not be delivered.
CONNECTOR_FLUSH = re.compile(
    r"Failed to send data to Kafka|org\.apache\.kafka\.common\.(?:errors\.|KafkaException)|FlinkKafkaException|"
    r"ElasticsearchException|Writing records to JDBC failed|BatchUpdateException|"
    r"An error occurred in ElasticsearchSink")
SNAPSHOT_FRAME = re.compile(
    r"^\s*at (?P<where>(?P<cls>[\w$.]+)\.(?:snapshotState|prepareSnapshotPreBarrier)\((?P<file>[^)]*)\))")
FRAMEWORK = re.compile(
    r"^(?:org\.apache\.flink\.|java\.|javax\.|jdk\.|sun\.|scala\.|org\.apache\.hadoop\.|org\.apache\.kafka\.|"
    r"com\.amazonaws\.|software\.amazon\.|org\.rocksdb\.|akka\.|org\.apache\.pekko\.)")
# Classes every snapshot passes through: never the code that owns the failing write.
PLUMBING = re.compile(
    r"\.(?:AbstractStreamOperator|AbstractUdfStreamOperator|StreamOperatorStateHandler|StreamingFunctionUtils|"
    r"RegularOperatorChain|OperatorChain|StreamTask|SubtaskCheckpointCoordinatorImpl)$")
# A chain made only of these says nothing about what failed underneath (a cut-off trace).
PERFORM_OR_COMPLETE = re.compile(r"Could not (?:perform checkpoint|complete snapshot) \d+ for operator")
# Deepest causes that are programming errors rather than I/O (when no user frame was kept).
PROGRAMMING_ERROR = re.compile(
    r"^java\.lang\.(?:NullPointerException|IllegalStateException|IllegalArgumentException|ClassCastException|"
    r"UnsupportedOperationException|ArrayIndexOutOfBoundsException|IndexOutOfBoundsException|ArithmeticException|"
    r"NumberFormatException|StackOverflowError)|^java\.util\.(?:ConcurrentModificationException|NoSuchElementException)")


class CheckpointSyncPhaseFailure(Detector):
    slug = "checkpoint-sync-phase-failure"
    title = "Could not perform checkpoint (synchronous snapshot failed)"
    category = "checkpointing"
    meaning = ("The synchronous part of a task's snapshot (snapshotState, pre-barrier flush, RocksDB native "
               "checkpoint) threw, so the task failed and the job restarted from its last completed checkpoint.")
    exception_classes = ("org.apache.flink.runtime.checkpoint.CheckpointException", "java.io.IOException",
                         "java.lang.Exception")
    versions = ("1.x, 2.x ('Could not complete snapshot N' is a CheckpointException with 'Failure reason: "
                "Checkpoint was declined.' since 1.10)")
    layer = 1  # wraps the fault underneath; datanode and RocksDB hard-link faults have more specific runbooks
    collect_next = ("the operator whose snapshot failed and the deepest cause under it (the TaskManager log of the "
        "failing task)")
    config_keys = (
        "execution.checkpointing.tolerable-failed-checkpoints",
        "execution.checkpointing.interval",
        "execution.checkpointing.dir",
        "state.backend.type",
        "state.backend.rocksdb.localdir",
        "restart-strategy.type",
    )
    signatures = (
        r"Could not perform checkpoint \d+ for operator",
        r"Could not complete snapshot \d+ for operator",
    )
    frames = (r"\.(?:snapshotState|prepareSnapshotPreBarrier|triggerCheckpointOnBarrier)\(",)
    root_causes = (
        RootCause("hdfs-datanodes-bad",
                  "Writing the snapshot to HDFS failed because the write pipeline ran out of datanodes (see the "
                  "hdfs-datanode-failure runbook).",
                  "'All datanodes ... are bad. Aborting...' / 'could only be written to 0 of the N minReplication "
                  "nodes' under 'Could not complete snapshot'.",
                  patches=("code:CheckpointConfig#setFailOnCheckpointingErrors", "ops:HDFS datanodes")),
        RootCause("storage-write-failure",
                  "Writing state or sink files to the storage failed during the synchronous part.",
                  "'Could not flush and close the file system output stream', storage-client exceptions (HDFS, S3) "
                  "or permission/quota errors under 'Could not complete snapshot'.",
                  patches=("code:CheckpointConfig#setFailOnCheckpointingErrors", "ops:checkpoint storage health",
                           "ops:storage write permissions")),
        RootCause("rocksdb-native-checkpoint-failure",
                  "RocksDB could not create its native checkpoint of the local database (hard links, local disk).",
                  "org.rocksdb.RocksDBException under 'Could not complete snapshot' (hard-link errors: see "
                  "rocksdb-hardlink-not-supported).",
                  patches=("ops:RocksDB working directory",)),
        RootCause("connector-flush-failure",
                  "A sink flushed its pending records at the checkpoint and the external system rejected them.",
                  "Kafka 'Failed to send data to Kafka', Elasticsearch or JDBC batch errors under the snapshot "
                  "failure.",
                  patches=("ops:sink target system",)),
        RootCause("user-code-failure",
                  "The job's own snapshotState / prepareSnapshotPreBarrier threw.",
                  "A frame of a job class in snapshotState/prepareSnapshotPreBarrier, or a programming error "
                  "(NullPointerException, IllegalStateException...) as the deepest cause.",
                  patches=("ops:job code",)),
        RootCause("undetermined",
                  "The logs show the failed snapshot but not what failed underneath.",
                  "The trace stops at 'Could not perform checkpoint' / 'Could not complete snapshot'.",
                  patches=("ops:full stack trace",),
                  next_evidence="the failing task's full stack trace in its TaskManager log (the 'Caused by' lines "
                                "under 'Could not complete snapshot N')."),
    )

    wordings = (
        Wording("checkpoint-sync-phase-failure", r"Could not complete snapshot \d+ for operator .+",
                "1.3 – 2.x", "AbstractStreamOperator#snapshotState up to 1.10, StreamOperatorStateHandler#snapshotState since 1.11 (the CheckpointException's message; in 1.17.2 and 2.3.0 too)",
                "2019-03-21 09:14:02,551 INFO  org.apache.flink.streaming.api.operators.AbstractStreamOperator  - Could not complete snapshot 42 for operator Sink: kafka-out (3/4)."),
        Wording("checkpoint-sync-phase-failure", r"Could not perform checkpoint \d+ for operator .+",
                "1.4 – 2.x", "StreamTask#triggerCheckpointOnBarrier / performCheckpoint",
                "java.lang.Exception: Could not perform checkpoint 42 for operator Sink: kafka-out (3/4)."),
        Wording("checkpoint-sync-phase-failure", r"Task local checkpoint failure\.",
                "1.9 – 2.x", "CheckpointFailureReason.TASK_CHECKPOINT_FAILURE",
                "org.apache.flink.runtime.checkpoint.CheckpointException: Task local checkpoint failure."),
    )

    templates = {
        "head": "The synchronous snapshot{operator} failed for checkpoint(s) {ids}; each failure failed the task, so "
                "the job restarted {restart} and must replay and catch up everything since. ",
        "of operator": " of {operator}",
        "restart from": "from checkpoint {checkpoint} (completed {finished})",
        "restart from last": "from its last completed checkpoint",
        "why": "Why: {cause}{failing_code}{deepest}",
        "failing code": " Failing code: {where}.",
        "deepest cause": " Deepest cause: {deepest}",
        "tolerance does not apply": " tolerable-failed-checkpoints does not apply to synchronous-phase failures: fix "
                                    "the cause.",
        "declined up to 1.8": " Up to Flink 1.8 setFailOnCheckpointingErrors(false) declines such checkpoints "
                              "instead.",
        "declining hides": " Up to Flink 1.8 setFailOnCheckpointingErrors(false) would decline such checkpoints "
                           "instead, which would only hide this fault: fix the cause.",
        "failed note": "checkpoint {checkpoint}: the synchronous snapshot failed and failed the task",
        "same way note": "checkpoint {checkpoint} failed the same way",
        "last completed note": "last completed checkpoint before the failure: {checkpoint}",
        "HDFS datanodes": "The snapshot write failed in the HDFS pipeline: follow the hdfs-datanode-failure runbook "
                          "for the datanode and client-side fixes.",
        "hard links": "RocksDB's native checkpoint hard-links SST files inside its working directory; this file "
                      "system refuses hard links. Follow rocksdb-hardlink-not-supported: put "
                      "state.backend.rocksdb.localdir on a local disk.",
        "local dir": "RocksDB could not write its native checkpoint into the local working directory ({localdir}): "
                     "check its free space and that it is a local disk.",
        "no local dir": "io.tmp.dirs, state.backend.rocksdb.localdir unset",
        "sink target system": "The sink delivers buffered records at every checkpoint and the target system rejected "
                              "them; fix the target (broker, cluster, database) or the sink's delivery settings named "
                              "in the deepest cause.",
        "job code": "{code} threw {exception}: snapshotState must not throw for data it can handle, because every "
                    "throw fails the task and restarts the job. Hand this to the job's developers:",
        "unknown code": "The job’s snapshotState",
        "unknown exception": "an exception",
        "full stack trace": "Read the TaskManager log of the failed task: the 'Caused by' below 'Could not complete "
                            "snapshot' names what failed.",
        "decline instead of fail": "Flink <= 1.8 only: a failed snapshot then declines the checkpoint instead of "
                                   "failing the task. From 1.9 on no setting does this: synchronous-phase failures "
                                   "always fail the task, and tolerable-failed-checkpoints does not count them.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        failures = snapshot_failures(incident, "sync")
        if not failures:
            return []
        judged = [(f, *self._cause(f)) for f in failures]
        lead, cause, confidence, where = next((j for j in judged if j[1] != "undetermined"), judged[0])
        history = checkpoint_history(incident)
        last_ok = last_completed_before(history, min((ev.ts for ev in lead.events if ev.ts), default=None))
        legacy = is_legacy(incident)

        evidence: list[Event] = [max(lead.events, key=lambda e: (len(e.chain), len(e.frames)))]
        notes = {0: self.say("failed note", checkpoint=lead.checkpoint_id)}
        for f in failures[1:4]:
            if f is not lead:
                notes[len(evidence)] = self.say("same way note", checkpoint=f.checkpoint_id)
                evidence.append(max(f.events, key=lambda e: len(e.chain)))
        if last_ok is not None and last_ok.events:
            notes[len(evidence)] = self.say("last completed note", checkpoint=last_ok.checkpoint_id)
            evidence.append(last_ok.events[-1])
        details = {
            "failed_checkpoints": [f.checkpoint_id for f in failures],
            "task_failures": len(failures),
            "operators": sorted({f.operator for f in failures if f.operator}),
            "causes": dict(Counter(c for _, c, _, _ in judged)),
            "deepest_cause": lead.cause,
            "failing_code": where,
            "last_completed_checkpoint": last_ok.checkpoint_id if last_ok else None,
            "tolerable_failed_checkpoints_applies": False,
        }
        ids = ", ".join(str(f.checkpoint_id) for f in failures[:6]) + (" …" if len(failures) > 6 else "")
        summary = self.say(
            "head", ids=ids, operator=self.say("of operator", operator=lead.operator) if lead.operator else "",
            restart=(self.say("restart from", checkpoint=last_ok.checkpoint_id, finished=last_ok.finished or "?")
                     if last_ok else self.say("restart from last")))
        summary += self.say("why", cause=self.cause(cause).summary,
                            failing_code=self.say("failing code", where=where) if where else "",
                            deepest=self.say("deepest cause", deepest=lead.cause) if lead.cause else "")
        if legacy is False:
            summary += self.say("tolerance does not apply")
        elif cause in ("hdfs-datanodes-bad", "storage-write-failure"):
            summary += self.say("declined up to 1.8")
        else:
            summary += self.say("declining hides")
        return [self.finding(
            cause, summary, evidence,
            confidence=confidence, notes=notes, details={k: v for k, v in details.items() if v is not None},
            patches=self._patches(incident, cause, lead, legacy, where),
        )]

    def _cause(self, failure: SnapshotFailure) -> tuple[str, float, str | None]:
        """(cause, confidence, the code that threw when a frame names it)."""
        text = failure.text
        frames = [m for ev in failure.events for line in ev.frames if (m := SNAPSHOT_FRAME.match(line))]
        user = next((m["where"] for m in frames if not FRAMEWORK.match(m["cls"])), None)
        if HDFS_FAILURE.search(text):
            return "hdfs-datanodes-bad", 0.85, None
        if ROCKSDB.search(text):
            return "rocksdb-native-checkpoint-failure", 0.85, None
        if CONNECTOR_FLUSH.search(text):
            return "connector-flush-failure", 0.8, frames[0]["where"] if frames else None
        if storage_error(text) or FLUSH_CLOSE.search(text) or OPEN_STREAM.search(text) or STORAGE_CLIENT.search(text):
            writer = [m["where"] for m in frames if not PLUMBING.search(m["cls"])]
            return "storage-write-failure", 0.85, writer[-1] if writer else None
        if user:
            return "user-code-failure", 0.85, user
        deepest = failure.cause or ""
        wrappers_only = all(PERFORM_OR_COMPLETE.search(f"{c.cls}: {c.message}")
                            for ev in failure.events for c in ev.chain if c.kind != "suppressed")
        if wrappers_only:
            return "undetermined", 0.5, None
        if PROGRAMMING_ERROR.search(deepest) or not FRAMEWORK.match(deepest):
            return "user-code-failure", 0.6, None
        return "undetermined", 0.5, None

    def _patches(self, incident: Incident, cause: str, lead: SnapshotFailure, legacy: bool | None, where: str | None):
        text = lead.text
        patches = []
        if cause == "hdfs-datanodes-bad":
            patches.append(self.ops_patch("HDFS datanodes", self.say("HDFS datanodes")))
        elif cause == "storage-write-failure":
            kind = (storage_error(text) or ("io", ""))[0]
            directory = checkpoint_dir(text) or _written_dir(text) or incident.config.get("execution.checkpointing.dir")
            patches += storage_actions(self, kind, text, directory)
        elif cause == "rocksdb-native-checkpoint-failure":
            localdir = incident.config.get("state.backend.rocksdb.localdir")
            if ROCKSDB_LINK.search(text):
                reason = self.say("hard links")
            else:
                reason = self.say("local dir", localdir=localdir or self.say("no local dir"))
            patches.append(self.ops_patch("RocksDB working directory", reason,
                                          snippet=f"df -h {localdir}" if localdir else None))
        elif cause == "connector-flush-failure":
            patches.append(self.ops_patch(
                "sink target system", self.say("sink target system"),
                snippet=f"Caused by: {lead.cause}" + (f"\n\tat {where}" if where else "")))
        elif cause == "user-code-failure":
            patches.append(self.ops_patch(
                "job code",
                self.say("job code", code=where or self.say("unknown code"),
                         exception=lead.cause or self.say("unknown exception")),
                snippet=f"Caused by: {lead.cause}" + (f"\n\tat {where}" if where else "")))
        else:
            patches.append(self.ops_patch(
                "full stack trace", self.say("full stack trace"),
                snippet=f'grep -n -A60 "Could not complete snapshot {lead.checkpoint_id} " taskmanager*.log'))
        # Declining instead of failing only bridges a storage outage; for a sink or the job's code it would hide
        # records that were never delivered or state that was never written.
        if legacy is not False and cause in ("hdfs-datanodes-bad", "storage-write-failure"):
            patches.append(decline_instead_of_fail_patch(self, self.say("decline instead of fail")))
        return patches


_STORAGE_URI = re.compile(r"(?:hdfs|s3[anp]?|oss|gs|abfss?|wasbs?|viewfs)://[^\s:,;]+(?::\d+)?[^\s:,;]*")


def _written_dir(text: str) -> str | None:
    """The directory of the first storage URI in ``text`` (a sink's part file, a state file)."""
    m = _STORAGE_URI.search(text)
    return m.group(0).rsplit("/", 1)[0] if m else None
