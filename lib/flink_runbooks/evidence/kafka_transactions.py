"""Transactions of Flink's exactly-once Kafka sinks as the logs show them: the producers' transaction timeout, the
transactional ids, the transactional errors of the Kafka client, commits of restored transactions and how long the
job was down before it restored.

Two sink generations write these logs: the legacy ``FlinkKafkaProducer`` (a ``TwoPhaseCommitSinkFunction``, up to
Flink 1.14 in the main distribution and deprecated after) and the ``KafkaSink`` (FLIP-143, 1.14+ and the externalised
connector 3.x: ``KafkaWriter``, ``KafkaCommitter``, ``FlinkKafkaInternalProducer``). The Kafka client texts are the
client's own (``Errors``, ``TransactionManager``) in 2.x and 3.x.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from flink_runbooks.evidence.checkpoints import checkpoint_history
from flink_runbooks.evidence.kafka_clients import ClientConfig, as_int, client_configs
from flink_runbooks.model import Event, Incident
from flink_runbooks.parse.timestamps import seconds_between

BROKER_DEFAULT_MAX_TIMEOUT_MS = 900_000  # transaction.max.timeout.ms, Kafka broker default (15 min)

# Errors.INVALID_TRANSACTION_TIMEOUT, thrown by InitProducerId (TransactionManager: "Unexpected error in
# InitProducerIdResponse; ...") or as InvalidTxnTimeoutException.
TIMEOUT_ABOVE_MAX = re.compile(r"transaction timeout is larger than the maximum value allowed by the broker|"
                               r"InvalidTxnTimeoutException")
# ProducerFencedException in its 2.x (INVALID_PRODUCER_EPOCH) and 3.x (PRODUCER_FENCED, maybeFailWithError) wording,
# and InvalidProducerEpochException (2.7+).
FENCED = re.compile(r"ProducerFencedException|There is a newer producer with the same transactionalId|"
                    r"has been fenced by another producer|Producer attempted an operation with an old epoch|"
                    r"InvalidProducerEpochException|attempted to produce with an old epoch")
# Errors.INVALID_PRODUCER_ID_MAPPING: the coordinator no longer maps the transactional id to this producer id.
PID_MAPPING = re.compile(r"InvalidPidMappingException|producer id which is not currently assigned to its "
                         r"transactional id")
# A restored transaction whose commit failed: FlinkKafkaProducer.recoverAndCommit, TwoPhaseCommitSinkFunction after
# the timeout, KafkaCommitter (connector 3.x) on a fenced producer.
RECOVERY_COMMIT_FAILED = re.compile(
    r"while recovering transaction (?P<legacy>.+?)\. Presumably this transaction has been already committed before|"
    r"Transaction has been open for longer than the transaction timeout|"
    r"Unable to commit transaction \((?P<request>.*)\) because its producer is already fenced")
OPEN_TOO_LONG = re.compile(r"Transaction (?P<txn>.+?) has been open for (?P<open>\d+) ms\. This is close to or even "
                           r"exceeding the transaction timeout of (?P<timeout>\d+) ms")
COMMITTER_TIMEOUT = re.compile(r"recovery took longer than 'transaction\.timeout\.ms' \((?P<ms>\d+) ?ms\)")
LEGACY_DEFAULT = re.compile(r"Property \[transaction\.timeout\.ms\] not specified\. Setting it to (?P<ms>\d+) ms")
RESTORE = re.compile(r"Restoring job (?P<job>[0-9a-f]{32}) from (?:Checkpoint|Savepoint|CHECKPOINT|SAVEPOINT)\w* "
                     r"(?P<id>\d+) @ (?P<epoch>\d{13}) for (?P<of>[0-9a-f]{32})")
# "transactionalId=<id>]" (client prefix, KafkaTransactionState), "transactionalId '<id>'" (3.x fencing message);
# FlinkKafkaProducer ids hold spaces (the task name).
TRANSACTIONAL_ID = re.compile(r"transactional\.?[iI]d(?:=| ')(?P<id>[^,\]'\n}]+)")


@dataclass
class TransactionError:
    event: Event
    kind: str  # timeout-above-max | fenced | pid-mapping | recovery-commit | open-too-long
    transactional_id: str | None


def transaction_errors(incident: Incident) -> list[TransactionError]:
    """The transactional failures of the incident's Kafka producers, in time order."""
    out = []
    for ev in incident.events:
        text = ev.text
        kind = None
        if TIMEOUT_ABOVE_MAX.search(text):
            kind = "timeout-above-max"
        elif RECOVERY_COMMIT_FAILED.search(text):
            kind = "recovery-commit"
        elif OPEN_TOO_LONG.search(text):
            kind = "open-too-long"
        elif PID_MAPPING.search(text):
            kind = "pid-mapping"
        elif FENCED.search(text):
            kind = "fenced"
        if kind:
            tid = TRANSACTIONAL_ID.search(text)
            out.append(TransactionError(ev, kind, tid["id"] if tid else None))
    return out


def producer_configs(incident: Incident) -> list[ClientConfig]:
    return [c for c in client_configs(incident) if c.kind == "producer"]


def transactional_producers(incident: Incident) -> list[ClientConfig]:
    return [c for c in producer_configs(incident)
            if c.values.get("transactional.id") not in (None, "", "null")]


def transaction_timeout(incident: Incident) -> tuple[int | None, str | None]:
    """``(ms, where it was read)``: a transactional producer's dump, FlinkKafkaProducer's default warning, the
    committer's or the two-phase sink's own message."""
    for cfg in transactional_producers(incident):
        ms = as_int(cfg.values.get("transaction.timeout.ms"))
        if ms is not None:
            return ms, cfg.source
    for rx, what in ((LEGACY_DEFAULT, "FlinkKafkaProducer's default (not set in the job)"),
                     (COMMITTER_TIMEOUT, "KafkaCommitter's message"), (OPEN_TOO_LONG, "the sink's timeout warning")):
        hit = incident.first(rx)
        if hit:
            ev, m = hit
            return int(m["ms"] if "ms" in m.groupdict() else m["timeout"]), f"{what}, {_where(ev)}"
    return None, None


def transactional_id_prefix(transactional_id: str | None) -> str | None:
    """``orders-eos-0-42`` -> ``orders-eos`` (KafkaSink: prefix-subtask-offset); a FlinkKafkaProducer id
    ``<task name>-<operator id>-<n>`` keeps its task name and operator id."""
    if not transactional_id:
        return None
    m = re.match(r"^(?P<prefix>.+?)-\d+-\d+$", transactional_id) or re.match(r"^(?P<prefix>.+)-\d+$", transactional_id)
    return m["prefix"] if m else transactional_id


@dataclass
class Restore:
    event: Event
    job: str
    checkpoint_id: int
    downtime_s: float | None  # from the restored checkpoint's completion (as logged) to the restore


def restores(incident: Incident) -> list[Restore]:
    """Jobs restored from a checkpoint, with how long after that checkpoint completed (when the logs show both)."""
    completed = {(a.job, a.checkpoint_id): a for a in checkpoint_history(incident) if a.outcome == "completed"}
    out = []
    for ev, m in incident.find(RESTORE):
        # a resubmitted job restores another job's checkpoint ("for <that job>")
        att = completed.get((m["of"], int(m["id"]))) or completed.get((None, int(m["id"])))
        gap = seconds_between(att.finished or att.triggered, ev.ts) if att and ev.ts else None
        out.append(Restore(ev, m["job"], int(m["id"]), gap))
    return out


def checkpoint_interval_ms(incident: Incident) -> tuple[int | None, str | None]:
    ms = incident.config.get_duration_ms("execution.checkpointing.interval")
    if ms:
        current = incident.config.lookup("execution.checkpointing.interval")
        return ms, str(current.source) if current else "configuration"
    return None, None


def longest_checkpoint_gap_s(incident: Incident) -> float | None:
    """The longest time between two consecutive completed checkpoints of one job (an open transaction lives that
    long at least)."""
    by_job: dict[str | None, list[str]] = {}
    for a in checkpoint_history(incident):
        if a.outcome == "completed" and (a.finished or a.triggered):
            by_job.setdefault(a.job, []).append(a.finished or a.triggered)
    gaps = [seconds_between(x, y) for times in by_job.values() for x, y in zip(times, times[1:])]
    gaps = [g for g in gaps if g is not None]
    return max(gaps) if gaps else None


def _where(ev: Event) -> str:
    import os

    return f"{os.path.basename(ev.file)}:{ev.line}"
