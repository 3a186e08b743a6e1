"""Exactly-once Kafka sink (``KafkaSink`` / ``FlinkKafkaProducer``): its transactions time out, expire or get fenced.

An exactly-once sink writes each checkpoint's records in a Kafka transaction and commits it only after the
checkpoint completed; after a failure the job commits the transactions of the checkpoint it restores. So a
transaction must outlive the checkpoint interval, the checkpoint itself and any downtime before the restore, and the
broker caps how long a producer may ask for (``transaction.max.timeout.ms``, 15 min by default).

The causes are told apart by what the client and the sink logged: the broker refusing the producer's timeout at
``InitProducerId``; a restored transaction whose commit was fenced after the job was down longer than the timeout
(data lost) or a timeout shorter than the checkpoint interval; the broker expiring a transaction or forgetting its
transactional id while the job ran; a second job writing with the same transactional ids. A fenced commit of a
restored transaction after a short downtime is Flink's normal "already committed" path and no finding.
"""
from __future__ import annotations

import re

from flink_runbooks.evidence.episodes import is_excerpt
from flink_runbooks.evidence.kafka_transactions import (
    BROKER_DEFAULT_MAX_TIMEOUT_MS, COMMITTER_TIMEOUT, FENCED, OPEN_TOO_LONG, PID_MAPPING, RECOVERY_COMMIT_FAILED,
    TIMEOUT_ABOVE_MAX, TransactionError, checkpoint_interval_ms, longest_checkpoint_gap_s, restores,
    transaction_errors, transaction_timeout, transactional_id_prefix, transactional_producers,
)
from flink_runbooks.model import Finding, Incident, RootCause
from flink_runbooks.detectors.base import Detector, signature
from flink_runbooks.vocabulary.wordings import Wording
from flink_runbooks.vocabulary.units import format_duration
from flink_runbooks.vocabulary.lifecycle import JOB_STATE

SLUG = "kafka-eos-transaction-timeout"
# What both exactly-once sinks ask for when the job leaves transaction.timeout.ms unset: KafkaSinkBuilder puts
# DEFAULT_KAFKA_TRANSACTION_TIMEOUT = Duration.ofHours(1) into the producer properties (since KafkaSink came, 1.14),
# FlinkKafkaProducer its DEFAULT_KAFKA_TRANSACTION_TIMEOUT = Time.hours(1) (apache/flink-connector-kafka sources).
SINK_DEFAULT_TIMEOUT_MS = 3_600_000
BROKER_MAX = "ops:raise transaction.max.timeout.ms on the brokers"
LOST_DATA = "ops:find and replay the lost records"


class KafkaEosTransactionTimeout(Detector):
    slug = SLUG
    title = "Kafka exactly-once sink: transaction timeout or fenced producer"
    category = "connectors"
    meaning = ("An exactly-once Kafka sink could not keep its transactions: the broker refused the producer's "
               "transaction timeout, aborted a transaction before Flink committed it, or another producer with the "
               "same transactional id fenced it.")
    versions = "1.4 – 2.x (FlinkKafkaProducer up to connector 3.x; KafkaSink since 1.14); Kafka clients 2.x and 3.x"
    exception_classes = (
        "org.apache.kafka.common.errors.InvalidTxnTimeoutException",
        "org.apache.kafka.common.errors.ProducerFencedException",
        "org.apache.kafka.common.errors.InvalidPidMappingException",
        "org.apache.kafka.common.errors.InvalidProducerEpochException",
    )
    frames = (r"org\.apache\.flink\.(?:connector\.kafka\.sink|streaming\.connectors\.kafka)\.",)
    config_keys = (
        "execution.checkpointing.interval",
        "execution.checkpointing.timeout",
        "execution.checkpointing.externalized-checkpoint-retention",
    )
    signatures = (
        signature(TIMEOUT_ABOVE_MAX),
        signature(FENCED),
        signature(PID_MAPPING),
        signature(RECOVERY_COMMIT_FAILED),
        signature(OPEN_TOO_LONG),
        signature(COMMITTER_TIMEOUT),
        r"Property \[transaction\.timeout\.ms\] not specified",
        r"Restoring job \w+ from",
        r"ProducerConfig values:",
        r"^\s*(?:transaction\.timeout\.ms|transactional\.id|bootstrap\.servers|client\.id) = ",
    )
    wordings = (
        Wording(SLUG, r"while recovering transaction .+\. Presumably this transaction has been already committed before",
                "1.4 – 1.17", "org.apache.flink.streaming.connectors.kafka.FlinkKafkaProducer#recoverAndCommit",
                "Encountered error org.apache.kafka.common.errors.ProducerFencedException: Producer attempted an "
                "operation with an old epoch. Either there is a newer producer with the same transactionalId, or the "
                "producer's transaction has been expired by the broker. while recovering transaction "
                "KafkaTransactionState [transactionalId=Sink: orders-0, producerId=4012, epoch=0]. Presumably this "
                "transaction has been already committed before"),
        Wording(SLUG, r"has been open for \d+ ms\. This is close to or even exceeding the transaction timeout of \d+ ms",
                "1.4 – 1.17", "org.apache.flink.streaming.api.functions.sink.TwoPhaseCommitSinkFunction (read in the "
                "1.13.6 jar)",
                "Transaction KafkaTransactionState [transactionalId=Sink: orders-0, producerId=4012, epoch=0] has been "
                "open for 5434021 ms. This is close to or even exceeding the transaction timeout of 900000 ms."),
        Wording(SLUG, r"Unable to commit transaction \(.*\) because its producer is already fenced",
                "1.15 – 2.x", "org.apache.flink.connector.kafka.sink.KafkaCommitter",
                "Unable to commit transaction (CommitRequestImpl{...}) because its producer is already fenced. This "
                "means that you either have a different producer with the same 'transactional.id' (this is unlikely "
                "with the 'KafkaSink' as all generated ids are unique and shouldn't be reused) or recovery took "
                "longer than 'transaction.timeout.ms' (900000ms)."),
    )
    root_causes = (
        RootCause("timeout-above-broker-max",
                  "The sink asks for a transaction timeout longer than the brokers allow, so no transactional "
                  "producer can start and the sink fails at start-up.",
                  "'The transaction timeout is larger than the maximum value allowed by the broker (as configured by "
                  "transaction.max.timeout.ms)' / InvalidTxnTimeoutException from InitProducerId.",
                  patches=("kafka:transaction.timeout.ms", BROKER_MAX),
                  would_change="Only the broker's refusal names this cause; a producer fenced later is another one."),
        RootCause("transaction-timeout-too-short",
                  "The transaction timeout is shorter than a transaction must live: the checkpoint interval plus the "
                  "time to complete the checkpoint plus any downtime before a restore. The broker aborts "
                  "transactions Flink still means to commit: data loss.",
                  "A restored transaction's commit failed (fenced / 'already committed before' / 'open for longer "
                  "than the transaction timeout') after the job was down longer than transaction.timeout.ms, or "
                  "transaction.timeout.ms is shorter than the checkpoint interval.",
                  patches=("kafka:transaction.timeout.ms", BROKER_MAX, "flink:execution.checkpointing.interval",
                           LOST_DATA),
                  would_change="If the restore came well within transaction.timeout.ms, the fenced commit is "
                               "Flink's normal path for an already committed transaction (no finding)."),
        RootCause("broker-expired-transaction",
                  "The broker ended a transaction or forgot the transactional id while the job was running: a "
                  "checkpoint took longer than the transaction timeout, or the id sat unused past "
                  "transactional.id.expiration.ms.",
                  "InvalidPidMappingException ('producer id which is not currently assigned to its transactional "
                  "id'), or fencing while completed checkpoints were further apart than transaction.timeout.ms, "
                  "without a restore and without a second job.",
                  patches=("kafka:transaction.timeout.ms", BROKER_MAX,
                           "ops:raise transactional.id.expiration.ms on the brokers", LOST_DATA),
                  would_change="A second job with the same transactional id prefix, or a restore after a long "
                               "downtime, would name another cause."),
        RootCause("shared-transactional-id-prefix",
                  "Two jobs (or two copies of one job) write with the same transactional ids, so each one's "
                  "producers fence the other's: ProducerFencedException while nothing restarted.",
                  "Fencing ('There is a newer producer with the same transactionalId') while another job was "
                  "running at the same time whose producers use the same transactional id prefix or that is the "
                  "same job under another id.",
                  patches=("code:a transactional id prefix of its own per job", "ops:stop the duplicate job",
                           LOST_DATA),
                  would_change="If only one job ran, fencing comes from the broker's expiry or a restore."),
        RootCause("undetermined",
                  "A transactional producer of the sink was fenced or failed, and the logs do not show why.",
                  "ProducerFencedException / InvalidProducerEpochException without a restore, a second job, an "
                  "expiry or the producer's timeout in the logs.",
                  patches=("ops:check the brokers' transactions",),
                  next_evidence="the producers' `ProducerConfig values:` (transaction.timeout.ms, transactional.id), "
                                "the JobManager log with the checkpoint history and any restore, the broker's "
                                "transaction.max.timeout.ms and transactional.id.expiration.ms, and "
                                "`kafka-transactions.sh --bootstrap-server <broker> list` to see which producers hold "
                                "the sink's transactional ids."),
    )

    templates = {
        "timeout-above-broker-max": "The brokers refused the sink's transaction timeout ({timeout}): it is larger "
                                    "than their transaction.max.timeout.ms (15 min unless the brokers set it), so "
                                    "InitProducerId fails and the sink cannot start a single transaction. "
                                    "{legacy_default}Either lower the producer's transaction.timeout.ms to at most "
                                    "the brokers' maximum, or raise the brokers' maximum; the timeout must still "
                                    "cover the checkpoint interval plus the longest downtime after which the job "
                                    "should restore without losing data.",
        "legacy default": "FlinkKafkaProducer asks for 1 h when the job does not set transaction.timeout.ms. ",
        "kafkasink default": "KafkaSink, like FlinkKafkaProducer, asks for 1 h when the job does not set "
                             "transaction.timeout.ms (KafkaSinkBuilder's default). ",
        "either default": "Both exactly-once Kafka sinks (KafkaSink and FlinkKafkaProducer) ask for 1 h when the job "
                          "does not set transaction.timeout.ms. ",
        "default timeout": "{timeout}, the sink's default: the logs do not show the producer's value, and KafkaSink "
                           "and FlinkKafkaProducer both set 1 h when the job leaves transaction.timeout.ms unset",
        "default source": "the sink's default when unset (KafkaSink and FlinkKafkaProducer: 1 h); not in the logs",
        "default in summary": "{timeout}, the sink's default; the logs do not show the producer's own value",
        "interval above max": " The checkpoint interval ({interval}) is not shorter than 15 min: a 15 min timeout "
                              "would expire transactions before their checkpoint; raise the brokers' maximum.",
        "at most broker max": "At most the brokers' transaction.max.timeout.ms (900000 ms by default). It bounds how "
                              "long the job may be down before a restore loses data: if outages can last longer, "
                              "raise the brokers' maximum instead.",
        "raise broker max": "The alternative that keeps a long timeout (a long restore window): set "
                            "transaction.max.timeout.ms on every broker at least as high as the sink's "
                            "transaction.timeout.ms, then restart the brokers one by one.",
        "refused note": "the broker refuses the producer's transaction timeout",
        # A restored transaction's commit fails when the restore came after the transaction had timed out; the margin
        # covers the time between the checkpoint's completion and the transaction's start.
        "transaction-timeout-too-short": "{why}{summary} {data_loss}",
        "restored too late": "The job restored transactions that had been open for {open}, longer than "
                             "transaction.timeout.ms ({timeout}): the broker had already aborted them, and their "
                             "commit at restore failed. ",
        "shorter than interval": "transaction.timeout.ms ({timeout}) is shorter than the checkpoint interval "
                                 "({interval}): every transaction stays open at least one interval, so the broker "
                                 "aborts them before Flink commits. ",
        "data loss": "Records of the transactions the broker aborted are lost for read_committed consumers: the "
                     "source offsets in the restored checkpoint are past them, so they are not written again.",
        "cover downtime": "Longer than the checkpoint interval plus the checkpoint's duration plus the longest "
                          "downtime the job should survive without data loss. Above the brokers' "
                          "transaction.max.timeout.ms (15 min by default) the brokers' maximum must be raised first.",
        "broker max for": "A {timeout} transaction timeout needs a broker maximum at least that high.",
        "checkpoint more often": "Or checkpoint more often than the transaction timeout allows: transactions are "
                                 "committed on every completed checkpoint.",
        "replay the window": "{data_loss} Compare the sink topic with the source for the window between the restored "
                             "checkpoint and the restore, and replay that window (from the source offsets or a "
                             "savepoint taken before the outage).",
        "aborted note": "a restored transaction the broker had aborted",
        "fenced note": "the producer was fenced",
        "restored note": "the job restored checkpoint {checkpoint}, {downtime} after it completed",
        "broker-expired-transaction": "{why}{summary} {data_loss}",
        "pid mapping": "The transaction coordinator no longer mapped the sink's transactional id to its producer id "
                       "(InvalidPidMappingException): the broker expired the transactional id after it sat unused "
                       "(transactional.id.expiration.ms, 7 days by default), or aborted it on timeout. ",
        "checkpoints too far apart": "Completed checkpoints were up to {gap} apart, longer than "
                                     "transaction.timeout.ms ({timeout}): the broker aborted the transaction of a "
                                     "checkpoint that took too long, and the producer was fenced. ",
        "cover the gap": "Longer than the longest time between two completed checkpoints, so a slow checkpoint does "
                         "not let the broker abort its transaction.",
        "broker max needed": "Needed for a {timeout} producer timeout.",
        "raise id expiration": "Sink subtasks that receive no records for days keep their transactional id idle; the "
                               "broker forgets it after transactional.id.expiration.ms. Raise it above the longest "
                               "idle period (or restart the job from a checkpoint, which re-initialises the ids).",
        "expired note": "the broker ended or forgot the transaction",
        "shared-transactional-id-prefix": "The sink's producer was fenced while another job ({job_name}, {job}) ran "
                                          "in the same cluster with the same transactional id prefix{prefix}. "
                                          "{summary} Each job aborts or fences the other's open transactions: both "
                                          "lose data or keep failing.",
        "prefix": " {prefix!r}",
        "unique prefix": "Transactional ids must be unique per running job across every cluster writing to the same "
                         "Kafka cluster; two copies of a job (a blue/green deployment, a job restarted while the old "
                         "one still runs) need different prefixes.",
        "stop the duplicate job": "Cancel one of the two jobs ({job} or this one) if it is a leftover copy.",
        "shared note": "fenced by another producer with the same transactional id",
        "other job note": "the other job with the same transactional ids is running ({why})",
        "undetermined": "A transactional producer of the exactly-once Kafka sink was fenced{restored}, and these logs "
                        "do not show whether the job was down longer than the transaction timeout, whether the broker "
                        "expired the transaction, or whether another job uses the same transactional ids. If a "
                        "transaction was aborted, its records are lost for read_committed consumers.",
        "restored": " while committing a restored transaction",
        "check the brokers' transactions": "List the producers holding the sink's transactional ids and compare the "
                                           "broker's limits with the sink's timeout.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        errors = transaction_errors(incident)
        if not errors:
            return []
        timeout_ms, timeout_where = transaction_timeout(incident)
        interval_ms, interval_where = checkpoint_interval_ms(incident)
        excerpt = is_excerpt(incident)
        details = {
            # not in the logs: what the sink sets when the job leaves it unset (a verdict never rests on it)
            "transaction_timeout": (_fmt(timeout_ms) + (f" ({timeout_where})" if timeout_where else "")
                                    if timeout_ms is not None else
                                    self.say("default timeout", timeout=_fmt(SINK_DEFAULT_TIMEOUT_MS))),
            "transaction_timeout_source": timeout_where or self.say("default source"),
            "checkpoint_interval": _fmt(interval_ms) + (f" ({interval_where})" if interval_where else ""),
            "sink": _sink_api(incident, errors),
        }
        ids = sorted({e.transactional_id for e in errors if e.transactional_id})
        if ids:
            details["transactional_ids"] = ids[:6]
        above = [e for e in errors if e.kind == "timeout-above-max"]
        if above:
            return [self._above_max(incident, above, timeout_ms, interval_ms, details, excerpt)]

        recovery = [e for e in errors if e.kind in ("recovery-commit", "open-too-long")]
        restored = restores(incident)
        downtime = max((r.downtime_s for r in restored if r.downtime_s is not None), default=None)
        open_ms = max((int(OPEN_TOO_LONG.search(e.event.text)["open"]) for e in recovery
                       if OPEN_TOO_LONG.search(e.event.text)), default=None)
        if open_ms is None and downtime is not None:
            open_ms = int(downtime * 1000)
        if open_ms is not None:
            details["open_before_commit"] = _fmt(open_ms)
        if downtime is not None:
            details["downtime_before_restore"] = _fmt(int(downtime * 1000))
        if recovery:
            if timeout_ms is not None and open_ms is not None and open_ms <= timeout_ms:
                return []  # restored well within the timeout: the transaction had been committed before
            if timeout_ms is not None and open_ms is not None:
                return [self._too_short(incident, recovery, timeout_ms, interval_ms, open_ms, details, excerpt,
                                        after_restore=True)]
            if timeout_ms is not None and interval_ms is not None and timeout_ms < interval_ms:
                return [self._too_short(incident, recovery, timeout_ms, interval_ms, open_ms, details, excerpt,
                                        after_restore=True)]
            return [self._undetermined(incident, recovery, details, excerpt, restore_unknown=True)]

        fenced = [e for e in errors if e.kind in ("fenced", "pid-mapping")]
        if timeout_ms is not None and interval_ms is not None and timeout_ms < interval_ms:
            return [self._too_short(incident, fenced, timeout_ms, interval_ms, None, details, excerpt,
                                    after_restore=False)]
        twin = _concurrent_twin(incident, fenced[0])
        if twin:
            details["other_job"] = {k: v for k, v in twin.items() if k != "events"}
            return [self._shared(incident, fenced, twin, details, excerpt)]
        gap_s = longest_checkpoint_gap_s(incident)
        if gap_s is not None:
            details["longest_gap_between_checkpoints"] = format_duration(round(gap_s) * 1000)
        pid = [e for e in fenced if e.kind == "pid-mapping"]
        if pid or (timeout_ms is not None and gap_s is not None and gap_s * 1000 > timeout_ms):
            return [self._expired(incident, fenced, pid, timeout_ms, gap_s, details, excerpt)]
        return [self._undetermined(incident, fenced, details, excerpt, restore_unknown=False)]

    # -- the verdicts -------------------------------------------------------------------------------------------

    def _above_max(self, incident, above, timeout_ms, interval_ms, details, excerpt) -> Finding:
        proposed = BROKER_DEFAULT_MAX_TIMEOUT_MS
        default = ("legacy default" if "FlinkKafkaProducer" in details["sink"] else
                   "kafkasink default" if details["sink"] == "KafkaSink" else "either default")
        summary = self.say("timeout-above-broker-max",
                           timeout=_fmt(timeout_ms) if timeout_ms is not None else
                           self.say("default in summary", timeout=_fmt(SINK_DEFAULT_TIMEOUT_MS)),
                           legacy_default=self.say(default) if timeout_ms in (None, SINK_DEFAULT_TIMEOUT_MS) else "")
        patches = [self.kafka_patch(
            "transaction.timeout.ms", str(proposed), self.say("at most broker max"),
            current=str(timeout_ms if timeout_ms is not None else SINK_DEFAULT_TIMEOUT_MS),
            current_source=details["transaction_timeout_source"])]
        patches.append(self.ops_patch(
            "raise transaction.max.timeout.ms on the brokers", self.say("raise broker max"),
            snippet="# server.properties of every broker\ntransaction.max.timeout.ms=3600000"))
        if interval_ms is not None and interval_ms >= proposed:
            summary += self.say("interval above max", interval=_fmt(interval_ms))
            patches = patches[1:]
        notes = {i: self.say("refused note") for i in range(3)}
        return self.finding("timeout-above-broker-max", summary, [e.event for e in above[:3]], notes=notes,
                            confidence=0.8 if excerpt else 0.95, patches=patches, details=details)

    def _too_short(self, incident, errors: list[TransactionError], timeout_ms, interval_ms, open_ms, details,
                   excerpt, after_restore: bool) -> Finding:
        needed = max(x for x in (open_ms or 0, (interval_ms or 0) * 3, timeout_ms) if x is not None)
        proposed = max(BROKER_DEFAULT_MAX_TIMEOUT_MS, _round_up_min(int(needed * 1.5)))
        if after_restore and open_ms is not None and open_ms > (timeout_ms or 0):
            why = self.say("restored too late", open=_fmt(open_ms), timeout=_fmt(timeout_ms))
        else:
            why = self.say("shorter than interval", timeout=_fmt(timeout_ms), interval=_fmt(interval_ms))
        summary = self.say("transaction-timeout-too-short", why=why,
                           summary=self.cause("transaction-timeout-too-short").summary,
                           data_loss=self.say("data loss"))
        patches = [self.kafka_patch(
            "transaction.timeout.ms", str(proposed), self.say("cover downtime"),
            current=str(timeout_ms) if timeout_ms is not None else None,
            current_source=details["transaction_timeout_source"] if timeout_ms is not None else None)]
        if proposed > BROKER_DEFAULT_MAX_TIMEOUT_MS:
            patches.append(self.ops_patch(
                "raise transaction.max.timeout.ms on the brokers", self.say("broker max for", timeout=_fmt(proposed)),
                snippet=f"# server.properties of every broker\ntransaction.max.timeout.ms={proposed}"))
        if interval_ms is not None and timeout_ms is not None and timeout_ms < interval_ms:
            patches.append(self.flink_patch(
                incident, "execution.checkpointing.interval", f"{max(1, timeout_ms // 3 // 1000)} s",
                self.say("checkpoint more often")))
        patches.append(self.ops_patch(
            "find and replay the lost records", self.say("replay the window", data_loss=self.say("data loss"))))
        notes = {i: self.say("aborted note" if e.kind in ("recovery-commit", "open-too-long") else "fenced note")
                 for i, e in enumerate(errors[:3])}
        evidence = [e.event for e in errors[:3]]
        restored = [r for r in restores(incident) if r.downtime_s is not None]
        if after_restore and restored:
            notes[len(evidence)] = self.say("restored note", checkpoint=restored[-1].checkpoint_id,
                                            downtime=_fmt(int(restored[-1].downtime_s * 1000)))
            evidence.append(restored[-1].event)
        return self.finding("transaction-timeout-too-short", summary, evidence, notes=notes,
                            confidence=0.7 if excerpt else 0.9, patches=patches, details=details, severity="failure")

    def _expired(self, incident, errors, pid, timeout_ms, gap_s, details, excerpt) -> Finding:
        if pid:
            why = self.say("pid mapping")
        else:
            why = self.say("checkpoints too far apart", gap=format_duration(round(gap_s) * 1000),
                           timeout=_fmt(timeout_ms))
        summary = self.say("broker-expired-transaction", why=why,
                           summary=self.cause("broker-expired-transaction").summary, data_loss=self.say("data loss"))
        patches = []
        if not pid and timeout_ms is not None:
            proposed = max(BROKER_DEFAULT_MAX_TIMEOUT_MS, _round_up_min(int(gap_s * 1000 * 1.5)))
            patches.append(self.kafka_patch(
                "transaction.timeout.ms", str(proposed), self.say("cover the gap"), current=str(timeout_ms),
                current_source=details["transaction_timeout_source"]))
            if proposed > BROKER_DEFAULT_MAX_TIMEOUT_MS:
                patches.append(self.ops_patch("raise transaction.max.timeout.ms on the brokers",
                                              self.say("broker max needed", timeout=_fmt(proposed))))
        if pid:
            patches.append(self.ops_patch(
                "raise transactional.id.expiration.ms on the brokers", self.say("raise id expiration"),
                snippet="# server.properties of every broker\ntransactional.id.expiration.ms=1209600000"))
        patches.append(self.ops_patch("find and replay the lost records", self.say("data loss")))
        notes = {i: self.say("expired note") for i in range(3)}
        return self.finding("broker-expired-transaction", summary, [e.event for e in errors[:3]], notes=notes,
                            confidence=0.65 if excerpt else 0.8, patches=patches, details=details)

    def _shared(self, incident, errors, twin, details, excerpt) -> Finding:
        prefix = transactional_id_prefix(errors[0].transactional_id) or twin.get("prefix")
        summary = self.say("shared-transactional-id-prefix", job_name=twin['name'], job=twin['job'],
                           prefix=self.say("prefix", prefix=prefix) if prefix else "",
                           summary=self.cause("shared-transactional-id-prefix").summary)
        patches = [self.code_patch(
            "a transactional id prefix of its own per job",
            'KafkaSink.<Order>builder()\n    .setDeliveryGuarantee(DeliveryGuarantee.EXACTLY_ONCE)\n'
            '    .setTransactionalIdPrefix("orders-enricher-" + environment + "-" + deploymentColour)  // unique per job\n'
            '    ...\n// FlinkKafkaProducer derives its ids from the task name and operator uid: run one copy per cluster',
            self.say("unique prefix"))]
        patches.append(self.ops_patch("stop the duplicate job", self.say("stop the duplicate job", job=twin['job'])))
        patches.append(self.ops_patch("find and replay the lost records", self.say("data loss")))
        evidence = [e.event for e in errors[:2]] + twin["events"]
        notes = {i: self.say("shared note") for i in range(len(errors[:2]))}
        notes[len(errors[:2])] = self.say("other job note", why=twin['why'])
        return self.finding("shared-transactional-id-prefix", summary, evidence,
                            notes=notes, confidence=0.85, patches=patches, details=details)

    def _undetermined(self, incident, errors, details, excerpt, restore_unknown: bool) -> Finding:
        summary = self.say("undetermined", restored=self.say("restored") if restore_unknown else "")
        patches = [self.ops_patch(
            "check the brokers' transactions", self.say("check the brokers' transactions"),
            snippet="kafka-transactions.sh --bootstrap-server <broker:9092> list\n"
                    "kafka-transactions.sh --bootstrap-server <broker:9092> describe --transactional-id <id>\n"
                    "kafka-configs.sh --bootstrap-server <broker:9092> --describe --entity-type brokers --all "
                    "| grep -E 'transaction.max.timeout.ms|transactional.id.expiration.ms'")]
        return self.finding("undetermined", summary, [e.event for e in errors[:3]],
                            notes={i: self.say("fenced note") for i in range(3)}, confidence=0.4 if excerpt else 0.5,
                            patches=patches, details=details)


def _fmt(ms: int | None) -> str:
    if ms is None:
        return "unknown"
    if ms % 1000 == 0:
        return f"{format_duration(ms)} ({ms} ms)"
    return f"{ms / 60_000:.0f} min ({ms} ms)" if ms >= 120_000 else f"{ms / 1000:.1f} s ({ms} ms)"


def _round_up_min(ms: int) -> int:
    return -(-ms // 60_000) * 60_000


def _sink_api(incident: Incident, errors: list[TransactionError]) -> str:
    text = "\n".join(e.event.text for e in errors) + "\n" + "\n".join(
        ev.logger or "" for ev in incident.events[:2000])
    if re.search(r"FlinkKafkaProducer|TwoPhaseCommitSinkFunction|KafkaTransactionState", text):
        return "FlinkKafkaProducer (legacy two-phase commit sink)"
    # a Sink V2 writer task ("<sink name> Writer (1/4)") failing on Kafka transactions: of the Kafka sinks, only
    # KafkaSink is a Sink V2 (FlinkKafkaProducer's task is the plain "Sink: <name>")
    if re.search(r"org\.apache\.flink\.connector\.kafka\.sink|KafkaWriter|KafkaCommitter|KafkaSink|"
                 r"\bWriter \(\d+/\d+\)", text):
        return "KafkaSink"
    return "unknown (no sink class in the logs)"


def _concurrent_twin(incident: Incident, fenced: TransactionError) -> dict | None:
    """Another job RUNNING when the producer was fenced whose sink shares the fenced producer's transactional id
    prefix (its own producer dumps show it), or the same job under another id."""
    running: dict[str, tuple[str, str | None]] = {}  # job id -> (name, since)
    ended: set[str] = set()
    fenced_at = fenced.event.ts
    for ev, m in incident.find(JOB_STATE):
        if fenced_at and ev.ts and ev.ts > fenced_at:
            break
        if m["to"] == "RUNNING":
            running[m["job"]] = (m["name"], ev.ts)
            ended.discard(m["job"])
        elif m["to"] in ("CANCELED", "FAILED", "FINISHED", "SUSPENDED"):
            ended.add(m["job"])
    live = {j: v for j, v in running.items() if j not in ended}
    if len(live) < 2:
        return None
    fenced_job = _job_of(fenced)
    prefix = transactional_id_prefix(fenced.transactional_id)
    prefixes = {}
    for cfg in transactional_producers(incident):
        p = transactional_id_prefix(cfg.values.get("transactional.id"))
        prefixes.setdefault(p, []).append(cfg)
    names = {}
    for j, (name, _) in live.items():
        names.setdefault(name, []).append(j)
    for j, (name, since) in sorted(live.items(), key=lambda kv: kv[1][1] or ""):
        if j == fenced_job:
            continue
        same_name = len(names.get(name, [])) > 1
        shared = prefix is not None and len(prefixes.get(prefix, [])) > 1
        if same_name or shared:
            evs = [ev for ev, m in incident.find(JOB_STATE) if m["job"] == j and m["to"] == "RUNNING"][:1]
            return {"job": j, "name": name, "running_since": since, "prefix": prefix, "events": evs,
                    "why": "same job name" if same_name else "producers with the same transactional id prefix"}
    return None


def _job_of(error: TransactionError) -> str | None:
    m = re.search(r"\b([0-9a-f]{32})\b", error.event.text)
    return m.group(1) if m else None

