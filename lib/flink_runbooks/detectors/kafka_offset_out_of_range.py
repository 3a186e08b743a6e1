"""``OffsetOutOfRangeException`` / ``NoOffsetForPartitionException``: a Kafka source has no valid position to read a
partition from, and its consumer has no reset policy (``auto.offset.reset=none``) to pick one.

Why the position is missing or invalid decides what was lost:

- The offsets Flink restores (from a checkpoint or savepoint) are older than the topic keeps records: the job was
  down, or lagged, longer than ``retention.ms``, and the records between the restored offset and today's log start
  were deleted unread. Evidence: the snapshot the job restored from is hours or days old.
- The partition has no committed offset for the consumer group (a new ``group.id``, a group whose offsets expired
  after ``offsets.retention.minutes``, or a job started without state) and the reset policy is ``none``
  (``OffsetsInitializer.committedOffsets()``, or the SQL connector's default ``group-offsets`` without
  ``properties.auto.offset.reset``). Nothing is lost; the source does not know where to begin. Evidence: the
  ``NoOffsetForPartitionException`` itself, with the client's ``Found no committed offset for partition …``.
- The topic was deleted and recreated (or the cluster rebuilt): the restored offsets lie beyond the end of the new
  partition. Evidence: the client seeing a new topic id for the same topic, or a new cluster id.

The client's wording changed with Kafka 2.6: older clients say ``Offsets out of range with no configured reset
policy for partitions: {orders-0=1843207}``, 2.6 and later ``Fetch position FetchPosition{offset=1843207, …} is out
of range for partition orders-0`` (the older text survives only in ``MockConsumer``). A consumer that has a reset
policy logs ``…, resetting offset`` and ``Resetting offset for partition … to position …`` and goes on: no failure,
but the records between the two offsets were never read. That is reported too, as a warning with the count.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from flink_runbooks.detectors.base import Detector, signature
from flink_runbooks.evidence.episodes import failure_events, is_excerpt
from flink_runbooks.evidence.kafka_clients import CLIENT_PREFIX, client_configs
from flink_runbooks.evidence.restore import SNAPSHOT_RESTORED, SQL_OPERATOR
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.parse.timestamps import seconds
from flink_runbooks.vocabulary.wordings import Wording

SLUG = "kafka-offset-out-of-range"

TP = r"[\w.-]+-\d+"
# SubscriptionState.FetchPosition#toString (Kafka 2.6 – 3.9): the offset, the epoch it was read at, the leader.
FETCH_POSITION = (r"FetchPosition\{offset=(?P<offset>\d+), offsetEpoch=[^,]*, currentLeader=LeaderAndEpoch\{"
                  r"leader=(?:Optional\.empty|Optional\[[^\]]*\]), epoch=\w+\}\}")
# Fetcher#handleOffsetOutOfRange (2.6 – 3.4), AbstractFetch (3.5, 3.6), FetchCollector (3.7 – 3.9): the exception's
# message and the INFO line before it, which ends ", raising error to the application since no reset policy is
# configured" or, with a reset policy, ", resetting offset".
OUT_OF_RANGE = re.compile(rf"Fetch position {FETCH_POSITION} is out of range for partition (?P<tp>{TP})")
# OffsetOutOfRangeException(Map) (0.10 – 2.5 in the fetch path; MockConsumer since).
OLD_OUT_OF_RANGE = re.compile(r"Offsets out of range with no configured reset policy for partitions: "
                              r"\{(?P<map>[^}]*)\}")
# Fetcher (0.10 – 2.5): the INFO line when a reset policy takes over.
OLD_RESETTING = re.compile(rf"Fetch offset (?P<offset>\d+) is out of range for partition (?P<tp>{TP}), resetting "
                           r"offset")
RESETTING = re.compile(OUT_OF_RANGE.pattern + r", resetting offset")
# NoOffsetForPartitionException (0.10 – 3.9): a set of partitions, or one partition.
NO_OFFSET = re.compile(rf"Undefined offset with no reset policy for partitions?: (?P<list>\[[^\]]*\]|{TP})")
# SubscriptionState#maybeSeekUnvalidated: where a reset policy moved the position (2.4: "to offset N.").
RESET_TO = re.compile(rf"Resetting offset for partition (?P<tp>{TP}) to (?:position FetchPosition\{{offset="
                      r"(?P<offset>\d+)|offset (?P<old>\d+)\.)")
# ConsumerCoordinator (2.4 – 3.9): the group has no committed offset for the partition.
NO_COMMITTED = re.compile(rf"Found no committed offset for partition (?P<tp>{TP})")
# KafkaConsumer#seek: where a KafkaSource puts a restored split.
SEEKING = re.compile(rf"Seeking to offset (?P<offset>\d+) for partition (?P<tp>{TP})")
# Metadata#updateLatestMetadata (2.8 – 3.9): logged for every partition on a client's first metadata ("from null");
# two different ids for one topic mean it was deleted and recreated.
TOPIC_ID = re.compile(rf"Resetting the last seen epoch of partition (?P<tp>{TP}) to \d+ since the associated topicId "
                      r"changed from (?P<old>\S+) to (?P<new>\S+)")
CLUSTER_ID = re.compile(r"\bCluster ID: (?P<id>[\w-]+)")
UNKNOWN_TOPIC = re.compile(rf"Received unknown topic (?:or partition|ID) error in fetch for partition (?P<tp>{TP})")
# KafkaSourceBuilder#maybeOverride: a KafkaSource takes auto.offset.reset from its OffsetsInitializer.
RESET_OVERRIDDEN = re.compile(r"Property auto\.offset\.reset is provided but will be overridden from (?P<user>\w+) to "
                              r"(?P<used>\w+)")
TRIGGER_AT = re.compile(r"Triggering (?:checkpoint|savepoint) \d+ .*?@ (?P<at>\d{13}) for job")
LEGACY = re.compile(r"KafkaConsumerThread|FlinkKafkaConsumer|Consumer subtask \d+ ")

# Kafka brokers keep records 7 days unless told otherwise (log.retention.hours=168); topics are often kept 1 – 3 days.
DEFAULT_RETENTION_S = 7 * 86_400
# A snapshot at least this old makes retention the likely reason its offsets are gone; younger ones are not evidence.
SUSPECT_AGE_S = 6 * 3_600


@dataclass
class OffsetFault:
    """One failure whose chain holds the Kafka consumer's out-of-range or undefined-offset exception."""

    event: Event
    kind: str  # out-of-range | no-offset
    text: str  # "Class: message" of the link
    offsets: dict[str, int] = field(default_factory=dict)  # partition -> the offset that was out of range
    partitions: list[str] = field(default_factory=list)


def offset_faults(incident: Incident) -> list[OffsetFault]:
    out = []
    for ev in failure_events(incident):
        for text in [f"{c.cls}: {c.message}" for c in ev.chain if c.kind != "suppressed"] + [ev.message]:
            if (m := OUT_OF_RANGE.search(text)) and "OffsetOutOfRangeException" in text:
                out.append(OffsetFault(ev, "out-of-range", text, {m["tp"]: int(m["offset"])}, [m["tp"]]))
            elif m := OLD_OUT_OF_RANGE.search(text):
                offsets = {tp.strip(): int(off) for tp, _, off in
                           (entry.partition("=") for entry in m["map"].split(",")) if off.strip().isdigit()}
                out.append(OffsetFault(ev, "out-of-range", text, offsets, list(offsets)))
            elif m := NO_OFFSET.search(text):
                parts = [p.strip() for p in m["list"].strip("[]").split(",") if p.strip()]
                out.append(OffsetFault(ev, "no-offset", text, {}, sorted(parts)))
            else:
                continue
            break
    return out


@dataclass
class Reset:
    """A consumer with a reset policy moving past an out-of-range position (no failure, records skipped)."""

    event: Event
    partition: str
    old: int
    new: int | None = None
    moved: Event | None = None


def silent_resets(incident: Incident) -> list[Reset]:
    resets: dict[str, Reset] = {}
    for ev in incident.events:
        # one record may hold several of the client's lines (a paste whose lines were joined): each is read
        text = ev.message
        for m in [*RESETTING.finditer(text), *OLD_RESETTING.finditer(text)]:
            resets.setdefault(m["tp"], Reset(ev, m["tp"], int(m["offset"])))
        for m in RESET_TO.finditer(text):
            if m["tp"] in resets and resets[m["tp"]].moved is None:
                r = resets[m["tp"]]
                r.new, r.moved = int(m["offset"] or m["old"]), ev
    return list(resets.values())


def _age(span_s: float) -> str:
    days, rest = divmod(int(span_s), 86_400)
    hours, rest = divmod(rest, 3_600)
    if days:
        return f"{days} day(s) {hours} h" if hours else f"{days} day(s)"
    return f"{hours} h {rest // 60} min" if hours else f"{rest // 60} min"


def _topic(tp: str) -> str:
    return tp.rsplit("-", 1)[0]


class KafkaOffsetOutOfRange(Detector):
    slug = SLUG
    title = "Kafka source offsets out of range or undefined"
    category = "connectors"
    meaning = ("A Kafka source has no valid offset to read a partition from (deleted by retention, never committed, "
               "or beyond the end of a recreated topic) and its consumer has no reset policy, so the task fails.")
    versions = "1.x – 2.x (FlinkKafkaConsumer, KafkaSource, the SQL Kafka connector); Kafka clients 2.x and 3.x"
    exception_classes = (
        "org.apache.kafka.clients.consumer.OffsetOutOfRangeException",
        "org.apache.kafka.clients.consumer.NoOffsetForPartitionException",
    )
    config_keys = ("execution.checkpointing.interval", "restart-strategy.type")
    collect_next = ("the TaskManager log from the source's start (the `ConsumerConfig values:` dump, the client's "
                    "`Seeking to offset` / `Found no committed offset` lines), the JobManager's `Restoring job … "
                    "from …` line, and the partitions' earliest and latest offsets (`kafka-get-offsets.sh --time -2` "
                    "and `--time -1`)")
    signatures = (
        r"is out of range for partition",
        r"Offsets out of range with no configured reset policy",
        r"Undefined offset with no reset policy",
        r"OffsetOutOfRangeException|NoOffsetForPartitionException",
        r"Found no committed offset for partition",
        r"Seeking to offset \d+ for partition",
        r"since the associated topicId changed from",
        r"\bCluster ID: ",
        r"Received unknown topic (?:or partition|ID) error in fetch",
        r"Property auto\.offset\.reset is provided but will be overridden",
        r"(?:ConsumerConfig) values:",
        r"^\s*(?:auto\.offset\.reset|group\.id|bootstrap\.servers|client\.id) = ",
    )
    frames = (r"org\.apache\.flink\.streaming\.connectors\.kafka\.internals\.KafkaConsumerThread\.run",
              r"org\.apache\.flink\.connector\.kafka\.source\.reader\.KafkaPartitionSplitReader\.")
    wordings = (
        Wording(SLUG, signature(OUT_OF_RANGE),
                "1.15 – 2.x", "org.apache.kafka.clients.consumer.internals.Fetcher#handleOffsetOutOfRange (Kafka "
                "clients 2.6 – 3.4; AbstractFetch 3.5 – 3.6, FetchCollector 3.7 – 3.9), the client of the connector "
                "since Flink 1.15",
                "org.apache.kafka.clients.consumer.OffsetOutOfRangeException: Fetch position FetchPosition{"
                "offset=1843207, offsetEpoch=Optional.empty, currentLeader=LeaderAndEpoch{leader=Optional["
                "kafka-1.prod.example.com:9092 (id: 1 rack: null)], epoch=7}} is out of range for partition orders-0"),
        Wording(SLUG, r"Offsets out of range with no configured reset policy for partitions: \{",
                "1.7 – 1.14", "org.apache.kafka.clients.consumer.OffsetOutOfRangeException(Map) thrown by Fetcher "
                "(Kafka clients up to 2.5, the client of the connector up to Flink 1.14)",
                "org.apache.kafka.clients.consumer.OffsetOutOfRangeException: Offsets out of range with no "
                "configured reset policy for partitions: {clickstream-3=48210555}"),
        Wording(SLUG, r"Undefined offset with no reset policy for partitions?: ",
                "1.7 – 2.x", "org.apache.kafka.clients.consumer.NoOffsetForPartitionException thrown by "
                "SubscriptionState#resetInitializingPositions (resetMissingPositions before Kafka 2.5)",
                "org.apache.kafka.clients.consumer.NoOffsetForPartitionException: Undefined offset with no reset "
                "policy for partitions: [orders-1, orders-0]"),
    )
    root_causes = (
        RootCause("retention-expired",
                  "The offsets the source resumed from are older than the topic keeps records: the job was down or "
                  "lagging longer than the topic's retention.ms, and the records between those offsets and the "
                  "partition's log start were deleted before the job read them.",
                  "OffsetOutOfRangeException after restoring a checkpoint or savepoint that is hours or days old; or "
                  "a consumer with a reset policy moving forward from an out-of-range offset ('Resetting offset for "
                  "partition … to position FetchPosition{offset=…}').",
                  patches=("ops:measure the lost records", "code:KafkaSource starting offsets",
                           "kafka:auto.offset.reset", "ops:keep records longer than the longest outage"),
                  would_change="If the partition's earliest offset (kafka-get-offsets.sh --time -2) is not above the "
                               "failing offset, retention did not delete it: an offset above the latest one "
                               "(--time -1) means the topic was recreated or truncated."),
        RootCause("no-committed-offsets",
                  "The consumer group has no committed offset for these partitions (a new group.id, a group whose "
                  "offsets expired after offsets.retention.minutes, or a job started without its state) and the "
                  "source's reset policy is none, so it does not know where to start.",
                  "NoOffsetForPartitionException ('Undefined offset with no reset policy for partitions: …'), with "
                  "the client's 'Found no committed offset for partition …'.",
                  patches=("code:KafkaSource starting offsets", "kafka:auto.offset.reset",
                           "ops:restore the offsets from Flink's state"),
                  would_change="An OffsetOutOfRangeException instead would mean offsets exist but are no longer "
                               "valid (retention or a recreated topic)."),
        RootCause("topic-recreated",
                  "The topic was deleted and recreated (or the Kafka cluster rebuilt): its offsets restarted from 0, "
                  "so the offsets the source resumed from lie beyond the end of the new partitions.",
                  "OffsetOutOfRangeException with the client seeing a new topic id for the same topic ('topicId "
                  "changed from <old> to <new>') or a new Kafka cluster id, often after 'Received unknown topic or "
                  "partition error in fetch'.",
                  patches=("ops:decide where to resume on the new topic", "code:KafkaSource starting offsets",
                           "kafka:auto.offset.reset"),
                  would_change="If the topic id and the cluster id stayed the same, the topic was not recreated: "
                               "compare the failing offset with the partition's earliest and latest offsets."),
        RootCause("undetermined",
                  "The source's offsets are out of range, but the logs do not show whether retention deleted the "
                  "records or the topic was recreated.",
                  "OffsetOutOfRangeException without a snapshot old enough to blame retention and without a change "
                  "of topic or cluster id.",
                  patches=("ops:compare the offset with the partition's range",),
                  next_evidence="each failing partition's earliest and latest offsets (`kafka-get-offsets.sh "
                                "--bootstrap-server <servers> --topic <topic> --time -2`, then `--time -1`): a "
                                "failing offset below the earliest means retention deleted the records, above the "
                                "latest that the topic was recreated or truncated; the topic's `retention.ms` "
                                "(`kafka-configs.sh --describe --entity-type topics --entity-name <topic>`); the "
                                "JobManager's `Restoring job … from …` line with its `@ <timestamp>`."),
    )

    templates = {
        "head": "The Kafka source failed with {exception}: {what}. ",
        "what out of range": "the offset to read is out of range ({offsets})",
        "what no offset": "no offset to start from for {partitions}",
        "head reset": "The Kafka consumer found its position out of range for {partitions} and its reset policy "
                      "moved it on without failing the task. ",
        "retention-expired": "The job resumed from {snapshot} taken {age} earlier{default}: the topic no longer "
                             "holds records that old, so those offsets were deleted by retention. Records from "
                             "offset {offsets} up to each partition's current log start are lost to the job: they "
                             "were deleted before it read them. Measure how many with the partitions' earliest "
                             "offsets (the action below).",
        "older than default": ", longer than Kafka's default retention of 7 days",
        "retention reset": "The position moved forward from offset {old} to {new} on {partition}: {count} record(s) "
                           "were never read by the job ({why}). The reset hid the loss; nothing failed.",
        "why deleted": "deleted by retention before it read them",
        "why skipped": "deleted by retention, or skipped by a reset to latest",
        "no-committed-offsets": "The consumer group {group} has no committed offset for {partitions}{found}, and the "
                                "source's reset policy is none{how}, so it cannot choose a starting point. No "
                                "records are lost; the source needs to be told where to begin.",
        "found in log": " (the client logged 'Found no committed offset' for them)",
        "how committed": " (OffsetsInitializer.committedOffsets() without a reset strategy)",
        "how sql": " (the SQL connector's scan.startup.mode group-offsets without properties.auto.offset.reset)",
        "how overridden": " (auto.offset.reset={user} was overridden to {used} by the KafkaSource's starting offsets)",
        "how config": " (auto.offset.reset = {value} in the consumer's settings)",
        "without state": " The job started without Flink state, so the source had only the group's committed "
                         "offsets to go by.",
        "topic-recreated": "The topic {topic} was recreated{how}: its offsets start again from 0, so offset {offsets} "
                           "lies beyond the end of the new partition. The unread records of the old topic went with "
                           "it; nothing of the new topic has been read yet.",
        "new topic id": " (its topic id changed from {old} to {new})",
        "new cluster id": " (the brokers answer with a new cluster id: {old}, then {new})",
        "recreated reset": "The position of {partition} moved back from offset {old} to {new}: the partition now "
                           "ends before the offset the job had reached (a recreated or truncated topic).",
        "undetermined": "Whether retention deleted the records at offset {offsets} or the topic was recreated is "
                        "not in the logs{restore}.",
        "restore age": " (the job resumed from {snapshot} taken {age} earlier, too recent to blame retention)",
        "unknown partitions": "unknown partitions",
        "failure note": "the source's consumer had no valid position",
        "restore note": "the job resumed from {snapshot}, taken {age} earlier",
        "seek note": "the restored position of {partition}",
        "no committed note": "the group has no committed offset",
        "raising note": "the client raises the error: no reset policy",
        "topic id note": "the topic id changed: the topic was recreated",
        "cluster id note": "a different Kafka cluster id",
        "unknown topic note": "the topic disappeared while the job read it",
        "override note": "the KafkaSource replaced the configured reset policy",
        "config note": "the consumer's settings (auto.offset.reset = {value})",
        "reset note": "the consumer's reset policy moved the position",
        "out of range note": "the position was out of range",
        "measure": "Measure what was lost: for each failing partition, the records between the failing offset and "
                   "the partition's earliest offset were deleted unread (earliest − failing offset = records "
                   "lost). Keep the numbers with the incident before anything restarts the source.",
        "measure snippet": "kafka-get-offsets.sh --bootstrap-server {servers} --topic {topic} --time -2   # earliest "
                           "offset per partition (Kafka 3.0+; older: kafka-run-class.sh kafka.tools.GetOffsetShell "
                           "--broker-list {servers} --topic {topic} --time -2)\n"
                           "# records lost on a partition = earliest offset - failing offset ({offsets})",
        "starting offsets retention": "To resume, the source needs a reset strategy for offsets that are gone. This "
                                      "accepts the loss measured above: restored offsets below the log start jump "
                                      "to the earliest record still kept. It keeps doing so silently on every later "
                                      "fall-behind; go back to a policy of none once the source has caught up if the "
                                      "next loss should stop the job instead.",
        "starting offsets no offsets": "Tell the source where to start for partitions without a committed offset: "
                                       "earliest reads everything the topic still holds, latest skips it and reads "
                                       "only new records. If the job should have resumed from earlier progress, "
                                       "restore its checkpoint or savepoint instead (the action below).",
        "starting offsets recreated": "Resume at the start of the recreated topic: a reset to earliest reads the new "
                                      "partitions from offset 0, skipping nothing of the new topic. It also resets "
                                      "silently on any later out-of-range offset; go back to none afterwards if that "
                                      "should stop the job.",
        "starting offsets snippet": "// DataStream KafkaSource: the reset strategy comes from the starting offsets "
                                    "(a KafkaSource overrides auto.offset.reset with it)\n"
                                    "KafkaSource.<String>builder()\n"
                                    "    .setStartingOffsets(OffsetsInitializer.committedOffsets("
                                    "OffsetResetStrategy.{strategy}))\n"
                                    "-- Flink SQL (scan.startup.mode group-offsets, the default): the strategy for "
                                    "partitions without a valid offset\n"
                                    "'scan.startup.mode' = 'group-offsets',\n"
                                    "'properties.auto.offset.reset' = '{value}'\n"
                                    "-- or ignore committed offsets entirely: 'scan.startup.mode' = "
                                    "'{mode}-offset'",
        "reset property retention": "For the SQL connector (properties.auto.offset.reset) and FlinkKafkaConsumer: "
                                    "out-of-range offsets jump to the earliest record still kept, which accepts the "
                                    "loss measured above and hides the next one unless you set it back to none.",
        "reset property no offsets": "For the SQL connector (properties.auto.offset.reset, with group-offsets) and "
                                     "FlinkKafkaConsumer: partitions without a committed offset start at the earliest "
                                     "record the topic holds. A KafkaSource ignores this property: it takes the "
                                     "strategy from OffsetsInitializer (the code change).",
        "reset property recreated": "For the SQL connector (properties.auto.offset.reset) and FlinkKafkaConsumer: "
                                    "offsets beyond the end of the recreated partitions restart at its first "
                                    "record; any later out-of-range offset is reset silently too.",
        "keep records longer": "Keep records longer than the longest time the job may be stopped or behind: raise "
                               "the topic's retention.ms above your recovery objective{resumed}, and alert on "
                               "the source's consumer lag (records-lag-max, or kafka-consumer-groups.sh --describe) "
                               "long before it nears the retention.",
        "resumed after": " (this time the job resumed from offsets {age} old)",
        "retention snippet": "kafka-configs.sh --bootstrap-server {servers} --describe --entity-type topics "
                             "--entity-name {topic}   # retention.ms, retention.bytes\n"
                             "kafka-configs.sh --bootstrap-server {servers} --alter --entity-type topics "
                             "--entity-name {topic} --add-config retention.ms=<longer than the longest outage, ms>",
        "restore state": "If this job ran before, its offsets are in its last checkpoint or savepoint, not in the "
                         "consumer group: start it from that snapshot (flink run -s <path>) instead of without "
                         "state. Check whether the group ever had offsets: a changed group.id, or committed offsets "
                         "removed after offsets.retention.minutes (7 days by default) of the group being empty.",
        "restore snippet": "kafka-consumer-groups.sh --bootstrap-server {servers} --describe --group {group}\n"
                           "flink run -s <latest savepoint or retained checkpoint> <your job arguments>",
        "decide recreated": "Decide where the job resumes on the new topic and whether the old topic's unread "
                            "records matter (they were deleted with it). Resume from the new topic's beginning (the "
                            "code change) or, if its first records are already processed elsewhere, from a chosen "
                            "offset or timestamp (OffsetsInitializer.timestamp / scan.startup.mode timestamp).",
        "recreated snippet": "kafka-topics.sh --bootstrap-server {servers} --describe --topic {topic}   # TopicId and "
                             "partitions\n"
                             "kafka-get-offsets.sh --bootstrap-server {servers} --topic {topic} --time -1   # latest "
                             "offset per partition: below {offsets}",
        "compare range": "Compare each failing offset with its partition's range: below the earliest offset, "
                         "retention deleted the records (they are lost; earliest − failing offset of them); above "
                         "the latest, the topic was recreated or truncated.",
        "compare snippet": "kafka-get-offsets.sh --bootstrap-server {servers} --topic {topic} --time -2   # earliest\n"
                           "kafka-get-offsets.sh --bootstrap-server {servers} --topic {topic} --time -1   # latest\n"
                           "# failing offsets: {offsets}",
        "retention unmeasured": "The job resumed from {snapshot} taken {age} earlier: the positions it restored "
                                "({offsets}) were older than the topic keeps, so the reset moved past records "
                                "retention had deleted before the job read them. The reset hid the loss; nothing "
                                "failed. How many: each partition's earliest offset minus the restored one (the "
                                "action below).",
        "unmeasured reset": "Where it moved from offset {offsets} is not in what was read: a move forward skipped "
                            "records retention had deleted (or a reset to latest skipped), a move back means a "
                            "recreated topic. The client's next 'Resetting offset for partition' line names the new "
                            "position; the partition's earliest and latest offsets tell it too (the action below).",
        "measure reset": "The reset hid records the job never read ({lost} on the partitions above). Check whether "
                         "they matter downstream; a policy of none would have stopped the job instead.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        faults = offset_faults(incident)
        if faults:
            return [self._failure(incident, faults)]
        resets = silent_resets(incident)
        moved = [r for r in resets if r.new is not None and r.new != r.old]
        if moved:
            return [self._reset(incident, moved)]
        unmeasured = [r for r in resets if r.new is None]
        return [self._unmeasured_reset(incident, unmeasured)] if unmeasured else []

    # ------------------------------------------------------------------------------------------------ readings

    def _restore(self, incident: Incident, before: Event) -> tuple[Event, str, float] | None:
        """The last snapshot the job restored before the failure, and how old it was then."""
        found = None
        for ev, m in incident.find(SNAPSHOT_RESTORED):
            if before.ts and ev.ts and ev.ts > before.ts:
                break
            found = (ev, m)
        if found is None or not found[0].ts or not found[1]["at"]:
            return None
        ev, m = found
        age = seconds(ev.ts) - int(m["at"]) / 1000 - _zone_offset_s(incident)
        return ev, f"{m['kind'].lower()} {m['id']}", age

    @staticmethod
    def _servers_group(incident: Incident) -> tuple[str, str]:
        configs = [c for c in client_configs(incident) if c.kind == "consumer"]
        servers = configs[0].values.get("bootstrap.servers", "").strip("[]").split(",")[0].strip() if configs else ""
        group = next((c.group_id for c in configs if c.group_id), None)
        if group is None:
            group = next((m["group"] for _, m in incident.find(CLIENT_PREFIX) if m["group"]), None)
        return servers or "<bootstrap servers>", group or "<group.id>"

    def _reset_value(self, incident: Incident) -> tuple[str | None, Event | None]:
        for c in client_configs(incident):
            if c.kind == "consumer" and "auto.offset.reset" in c.values:
                return c.values["auto.offset.reset"], c.event
        return None, None

    # ------------------------------------------------------------------------------------------------ failures

    def _failure(self, incident: Incident, faults: list[OffsetFault]) -> Finding:
        fault = faults[0]
        offsets: dict[str, int] = {}
        partitions: list[str] = []
        for f in faults:
            for tp, off in f.offsets.items():
                offsets.setdefault(tp, off)
            partitions += [p for p in f.partitions if p not in partitions]
        topics = sorted({_topic(tp) for tp in partitions})
        servers, group = self._servers_group(incident)
        evidence, notes, add = evidence_trail()
        add(fault.event, self.say("failure note"))
        details: dict = {"failure": fault.text[:300], "partitions": partitions,
                         "source": self._source_kind(incident)}
        if offsets:
            details["failing_offsets"] = offsets
        restore = self._restore(incident, fault.event)
        ids = _topic_ids(incident, topics)
        clusters = _cluster_ids(incident, group)
        excerpt = is_excerpt(incident)

        if fault.kind == "no-offset":
            cause, confidence = "no-committed-offsets", 0.9
            found = [ev for ev, m in incident.find(NO_COMMITTED) if m["tp"] in partitions]
            add(found[0] if found else None, self.say("no committed note"))
            how, how_event = self._how_none(incident)
            if how_event is not None:
                add(how_event, self.say("override note") if RESET_OVERRIDDEN.search(how_event.text)
                    else self.say("config note", value="none"))
            summary = self.say(cause, group=group if group != "<group.id>" else "of the source",
                               partitions=", ".join(partitions) or self.say("unknown partitions"),
                               found=self.say("found in log") if found else "", how=how)
            if not excerpt and restore is None:
                summary += self.say("without state")
            details["group"] = group
            details["started_without_state"] = restore is None if not excerpt else "unknown (an excerpt)"
        else:
            offsets_text = ", ".join(f"{off} on {tp}" for tp, off in offsets.items()) or "?"
            raising = [ev for ev in incident.events if "raising error to the application" in ev.message]
            changed = [(ev, m) for ev, m in ids if m["old"] != "null"] or _id_change_across_runs(ids)
            if changed:
                cause, confidence = "topic-recreated", 0.85
                ev, m = changed[-1]
                how = self.say("new topic id", old=m["old"] if m["old"] != "null" else _previous_id(ids, m),
                               new=m["new"])
                add(next((e for e, _ in incident.find(UNKNOWN_TOPIC)), None), self.say("unknown topic note"))
                add(ev, self.say("topic id note"))
            elif len(clusters) >= 2:
                cause, confidence = "topic-recreated", 0.75
                how = self.say("new cluster id", old=clusters[0][1], new=clusters[-1][1])
                add(clusters[-1][0], self.say("cluster id note"))
            elif restore is not None and restore[2] >= SUSPECT_AGE_S:
                cause = "retention-expired"
                confidence = 0.85 if restore[2] >= DEFAULT_RETENTION_S else 0.7
                how = ""
            else:
                cause, confidence, how = "undetermined", 0.4, ""
            if restore is not None:
                add(restore[0], self.say("restore note", snapshot=restore[1], age=_age(restore[2])))
                details["restored_from"] = restore[1]
                details["snapshot_age"] = _age(restore[2])
            for ev, m in incident.find(SEEKING):
                if m["tp"] in offsets:
                    add(ev, self.say("seek note", partition=m["tp"]))
                    break
            add(raising[0] if raising else None, self.say("raising note"))
            if cause == "retention-expired":
                summary = self.say(cause, snapshot=restore[1], age=_age(restore[2]), offsets=offsets_text,
                                   default=self.say("older than default") if restore[2] >= DEFAULT_RETENTION_S
                                   else "")
            elif cause == "topic-recreated":
                summary = self.say(cause, topic=", ".join(topics) or "?", how=how, offsets=offsets_text)
            else:
                summary = self.say(cause, offsets=offsets_text, restore=self.say(
                    "restore age", snapshot=restore[1], age=_age(restore[2])) if restore else "")
        value, config_event = self._reset_value(incident)
        if value is not None:
            details["auto.offset.reset"] = value
            if fault.kind != "no-offset":
                add(config_event, self.say("config note", value=value))
        if excerpt:
            confidence -= 0.1
        exception = fault.text.split(":", 1)[0].rsplit(".", 1)[-1]
        what = (self.say("what no offset", partitions=", ".join(partitions) or self.say("unknown partitions"))
                if fault.kind == "no-offset" else self.say("what out of range", offsets=", ".join(
                    f"{off} on {tp}" for tp, off in offsets.items()) or self.say("unknown partitions")))
        summary = self.say("head", exception=exception, what=what) + summary
        patches = self._patches(cause, incident, servers, group, topics, offsets, restore)
        return self.finding(cause, summary, evidence, notes=notes, confidence=confidence, patches=patches,
                            details=details)

    def _how_none(self, incident: Incident) -> tuple[str, Event | None]:
        """How the reset policy came to be none, as far as the logs tell."""
        for ev, m in incident.find(RESET_OVERRIDDEN):
            if m["used"] == "none":
                return self.say("how overridden", user=m["user"], used=m["used"]), ev
        sql = any(SQL_OPERATOR.search(ev.message) for ev in incident.events)
        value, event = self._reset_value(incident)
        if sql:
            return self.say("how sql"), event
        if value == "none" and not self._legacy(incident):
            return self.say("how committed"), event
        if value is not None:
            return self.say("how config", value=value), event
        return "", None

    def _legacy(self, incident: Incident) -> bool:
        return any(LEGACY.search(ev.text) or any("KafkaConsumerThread" in f for f in ev.frames)
                   for ev in incident.events if ev.chain or "Consumer subtask" in ev.message)

    def _source_kind(self, incident: Incident) -> str:
        if self._legacy(incident):
            return "FlinkKafkaConsumer (legacy)"
        if any(SQL_OPERATOR.search(ev.message) for ev in incident.events):
            return "Kafka SQL connector (KafkaSource)"
        return "KafkaSource"

    # ------------------------------------------------------------------------------------------------ resets

    def _reset(self, incident: Incident, resets: list[Reset]) -> Finding:
        first = resets[0]
        forward = [r for r in resets if r.new > r.old]
        value, config_event = self._reset_value(incident)
        evidence, notes, add = evidence_trail()
        add(first.event, self.say("out of range note"))
        add(first.moved, self.say("reset note"))
        if forward:
            cause = "retention-expired"
            lost = sum(r.new - r.old for r in forward)
            summary = self.say("head reset", partitions=", ".join(r.partition for r in forward)) + " ".join(
                self.say("retention reset", old=r.old, new=r.new, partition=r.partition, count=r.new - r.old,
                         why=self.say("why skipped") if value == "latest" else self.say("why deleted"))
                for r in forward)
        else:
            cause = "topic-recreated"
            lost = 0
            summary = self.say("head reset", partitions=", ".join(r.partition for r in resets)) + " ".join(
                self.say("recreated reset", partition=r.partition, old=r.old, new=r.new) for r in resets)
        add(config_event, self.say("config note", value=value) if value else "")
        servers, _ = self._servers_group(incident)
        topics = sorted({_topic(r.partition) for r in resets})
        restore = self._restore(incident, first.event)
        if restore is not None:
            add(restore[0], self.say("restore note", snapshot=restore[1], age=_age(restore[2])))
        details = {"resets": {r.partition: f"{r.old} -> {r.new}" for r in resets}, "auto.offset.reset": value or
                   "unknown (no ConsumerConfig dump)"}
        patches = []
        if forward:
            details["records_never_read"] = lost
            patches.append(self.ops_patch("measure the lost records", self.say("measure reset", lost=lost),
                                          snippet=self.say("measure snippet", servers=servers, topic=topics[0],
                                                           offsets=", ".join(f"{r.old} on {r.partition}"
                                                                             for r in forward))))
            patches.append(self.ops_patch("keep records longer than the longest outage",
                                          self.say("keep records longer", resumed=self.say(
                                              "resumed after", age=_age(restore[2])) if restore else ""),
                                          snippet=self.say("retention snippet", servers=servers, topic=topics[0]),
                                          urgent=False))
        else:
            patches.append(self.ops_patch("decide where to resume on the new topic", self.say("decide recreated"),
                                          snippet=self.say("recreated snippet", servers=servers, topic=topics[0],
                                                           offsets=", ".join(str(r.old) for r in resets))))
        return self.finding(cause, summary, evidence, notes=notes, confidence=0.8, patches=patches,
                            severity="warning", details=details)

    def _unmeasured_reset(self, incident: Incident, resets: list[Reset]) -> Finding:
        """A reset whose new position the logs do not show: the client's 'Resetting offset for partition … to' line
        is logged for every ordinary start too, so the scan does not keep it from whole logs. A snapshot old enough
        for retention to have deleted its offsets names the cause; otherwise it stays undetermined."""
        first = resets[0]
        evidence, notes, add = evidence_trail()
        add(first.event, self.say("out of range note"))
        value, config_event = self._reset_value(incident)
        add(config_event, self.say("config note", value=value) if value else "")
        servers, _ = self._servers_group(incident)
        offsets = ", ".join(f"{r.old} on {r.partition}" for r in resets)
        summary = self.say("head reset", partitions=", ".join(r.partition for r in resets))
        restore = self._restore(incident, first.event)
        topic = _topic(first.partition)
        details = {"resets": {r.partition: f"{r.old} -> unknown" for r in resets},
                   "auto.offset.reset": value or "unknown (no ConsumerConfig dump)"}
        if restore is not None and restore[2] >= SUSPECT_AGE_S:
            add(restore[0], self.say("restore note", snapshot=restore[1], age=_age(restore[2])))
            summary += self.say("retention unmeasured", snapshot=restore[1], age=_age(restore[2]), offsets=offsets)
            patches = [self.ops_patch("measure the lost records", self.say("measure"),
                                      snippet=self.say("measure snippet", servers=servers, topic=topic,
                                                       offsets=offsets)),
                       self.ops_patch("keep records longer than the longest outage",
                                      self.say("keep records longer",
                                               resumed=self.say("resumed after", age=_age(restore[2]))),
                                      snippet=self.say("retention snippet", servers=servers, topic=topic),
                                      urgent=False)]
            return self.finding("retention-expired", summary, evidence, notes=notes, confidence=0.7,
                                patches=patches, severity="warning", details=details)
        summary += self.say("unmeasured reset", offsets=offsets)
        patch = self.ops_patch("compare the offset with the partition's range", self.say("compare range"),
                               snippet=self.say("compare snippet", servers=servers, topic=topic,
                                                offsets=", ".join(str(r.old) for r in resets)))
        return self.finding("undetermined", summary, evidence, notes=notes, confidence=0.5, patches=[patch],
                            severity="warning", details=details)

    # ------------------------------------------------------------------------------------------------ patches

    def _patches(self, cause, incident, servers, group, topics, offsets, restore):
        topic = topics[0] if topics else "<topic>"
        offsets_text = ", ".join(f"{off} on {tp}" for tp, off in offsets.items()) or "?"
        value, config_event = self._reset_value(incident)
        source = config_event and f"ConsumerConfig values, {config_event.file.rsplit('/', 1)[-1]}:{config_event.line}"
        code = lambda reason: self.code_patch(  # noqa: E731 - one snippet, three reasons
            "KafkaSource starting offsets", self.say("starting offsets snippet", strategy="EARLIEST",
                                                     value="earliest", mode="earliest"), reason)
        if cause == "retention-expired":
            return [
                self.ops_patch("measure the lost records", self.say("measure"),
                               snippet=self.say("measure snippet", servers=servers, topic=topic,
                                                offsets=offsets_text)),
                code(self.say("starting offsets retention")),
                self.kafka_patch("auto.offset.reset", "earliest", self.say("reset property retention"), value, source),
                self.ops_patch("keep records longer than the longest outage",
                               self.say("keep records longer", resumed=self.say(
                                   "resumed after", age=_age(restore[2])) if restore else ""),
                               snippet=self.say("retention snippet", servers=servers, topic=topic), urgent=False),
            ]
        if cause == "no-committed-offsets":
            return [
                code(self.say("starting offsets no offsets")),
                self.kafka_patch("auto.offset.reset", "earliest", self.say("reset property no offsets"), value,
                                 source),
                self.ops_patch("restore the offsets from Flink's state", self.say("restore state"),
                               snippet=self.say("restore snippet", servers=servers, group=group)),
            ]
        if cause == "topic-recreated":
            return [
                self.ops_patch("decide where to resume on the new topic", self.say("decide recreated"),
                               snippet=self.say("recreated snippet", servers=servers, topic=topic,
                                                offsets=offsets_text)),
                code(self.say("starting offsets recreated")),
                self.kafka_patch("auto.offset.reset", "earliest", self.say("reset property recreated"), value, source),
            ]
        return [self.ops_patch("compare the offset with the partition's range", self.say("compare range"),
                               snippet=self.say("compare snippet", servers=servers, topic=topic,
                                                offsets=offsets_text))]


def _zone_offset_s(incident: Incident) -> float:
    """How far the logs' clock runs from UTC, read from a trigger line (log time next to epoch milliseconds),
    rounded to the quarter hour; 0 without one."""
    for ev, m in incident.find(TRIGGER_AT):
        local = seconds(ev.ts)
        if local is not None:
            return round((local - int(m["at"]) / 1000) / 900) * 900
    return 0.0


def _topic_ids(incident: Incident, topics: list[str]) -> list[tuple[Event, re.Match[str]]]:
    return [(ev, m) for ev, m in incident.find(TOPIC_ID) if not topics or _topic(m["tp"]) in topics]


def _id_change_across_runs(ids: list[tuple[Event, re.Match[str]]]) -> list[tuple[Event, re.Match[str]]]:
    """A client's first metadata logs "from null to <id>": two clients seeing different ids for one topic saw it
    before and after it was recreated."""
    seen: dict[str, str] = {}
    for ev, m in ids:
        topic = _topic(m["tp"])
        if topic in seen and seen[topic] != m["new"]:
            return [(ev, m)]
        seen.setdefault(topic, m["new"])
    return []


def _previous_id(ids: list[tuple[Event, re.Match[str]]], changed: re.Match[str]) -> str:
    return next((m["new"] for _, m in ids if _topic(m["tp"]) == _topic(changed["tp"]) and m["new"] != changed["new"]),
                "?")


def _cluster_ids(incident: Incident, group: str) -> list[tuple[Event, str]]:
    """The Kafka cluster ids the failing group's consumers saw, in order, each change once (producers, and sources of
    other groups, may talk to other clusters)."""
    out: list[tuple[Event, str]] = []
    for ev, m in incident.find(CLUSTER_ID):
        prefix = CLIENT_PREFIX.search(ev.message)
        if prefix is None or prefix["kind"] != "Consumer" or (group != "<group.id>" and prefix["group"] != group):
            continue
        if not out or out[-1][1] != m["id"]:
            out.append((ev, m["id"]))
    return out
