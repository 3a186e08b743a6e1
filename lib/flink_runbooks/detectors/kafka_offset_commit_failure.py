"""``Failed to commit consumer offsets for checkpoint N``: why a Kafka source keeps failing to commit its offsets.

A failed commit does not break Flink's correctness: a Kafka source restores from the offsets stored in Flink's own
checkpoints. Committed offsets only feed external lag monitoring and a job started without state from
``group-offsets``. So a short blip (a broker restart moving the group coordinator) is no finding; only failures that
go on for several checkpoints or minutes are. An excerpt without a timeline cannot tell a blip from an outage: it
gets a lower-confidence finding that says persistence is unknown.

The cause is decided from the exceptions the commits fail with. More readers than partitions is reported but never
blamed: an idle reader has no offsets, and ``KafkaSourceFetcherManager.commitOffsets`` returns before contacting the
broker when its offset map is empty, so surplus readers cannot make commits fail.
"""
from __future__ import annotations

import collections

from flink_runbooks.evidence.checkpoints import checkpoint_history
from flink_runbooks.evidence.kafka_clients import (
    ClientLine, CommitFailure, CommitRound, as_int, cadence, client_lines, commit_failures, commit_rounds,
    consumer_config, current_value, longest_consecutive_run, seconds, source_assignment,
)
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.units import human_span
from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.vocabulary.wordings import Wording

# A coordinator move during a broker restart costs one or two checkpoints' commits; more than this many consecutive
# checkpoints failing to commit is no longer a blip.
MAX_CONSECUTIVE_FAILED_CHECKPOINTS = 5
# Failures that keep coming back for longer than this leave lag monitoring blind (counted from first to last failure).
MAX_FAILURE_SPAN_S = 5 * 60
# Commits further apart than this leave the coordinator connection idle long enough for NAT gateways, load balancers
# and firewalls to drop it.
IDLE_GAP_MIN_S = 60
# A cadence whose gaps vary less than this (coefficient of variation) is "regular".
REGULAR_CV = 0.3

# Reconnect back-off that stops a client hammering an unavailable coordinator in a tight loop (the values a production
# deployment on Flink 1.16 used to calm its commit/disconnect loop during broker trouble).
RECONNECT_BACKOFF = (("reconnect.backoff.ms", 1000), ("reconnect.backoff.max.ms", 5000))
# Load balancer idle timeouts met in practice start at 4 minutes (Azure); a client that closes idle connections first
# reconnects cleanly instead of writing its commit into a dead connection.
MAX_PROPOSED_IDLE_MS = 180_000
MIN_PROPOSED_IDLE_MS = 30_000


class KafkaOffsetCommitFailure(Detector):
    slug = "kafka-offset-commit-failure"
    title = "Kafka source keeps failing to commit consumer offsets"
    category = "connectors"
    meaning = ("The Kafka source could not commit its offsets to the consumer group after checkpoints; Flink's "
               "correctness is unaffected (offsets live in its checkpoints), only lag monitoring goes blind.")
    exception_classes = (
        "org.apache.kafka.clients.consumer.RetriableCommitFailedException",
        "org.apache.kafka.common.errors.CoordinatorNotAvailableException",
        "org.apache.kafka.common.errors.NotCoordinatorException",
        "org.apache.kafka.common.errors.DisconnectException",
        "org.apache.kafka.common.errors.TimeoutException",
    )
    versions = "1.12 – 2.x (KafkaSource); legacy FlinkKafkaConsumer up to 1.17"
    layer = 0
    config_keys = (
        "execution.checkpointing.interval",
        "parallelism.default",
        "execution.checkpointing.timeout",
    )
    signatures = (
        r"commit consumer offsets for\s+checkpoint",
        r"Async Kafka commit failed|failed async Kafka commit|Committing offsets to Kafka failed",
        r"\bNode -?\d+ disconnected\.",
        r"Error sending fetch request",
        r"Cancelled in-flight [A-Z_]+ request with correlation id",
        r"Disconnecting from node -?\d+ due to request timeout",
        r"Group coordinator \S+ \(id: -?\d+ rack: \S+\) is unavailable or invalid|Discovered group coordinator"
        r"|Requesting disconnect from last known coordinator",
        r"registering reader for parallel task \d+",
        r"Assigning splits to readers|Adding split\(s\) to reader|Discovered new partitions",
        r"initially has no partitions to read from|will start reading the following \d+ partitions",
        r"(?:Assigned to|Subscribed to) partition\(s\):",
    )
    root_causes = (
        RootCause("coordinator-unavailable",
                  "The consumer group's coordinator was unavailable (broker restarts or a rolling upgrade moved "
                  "or took down the __consumer_offsets partition leader).",
                  "CoordinatorNotAvailableException / NotCoordinatorException clustered in time, 'Group coordinator "
                  "… is unavailable', brokers unreachable, then 'Discovered group coordinator' as it recovers.",
                  patches=("kafka:reconnect.backoff.ms", "kafka:reconnect.backoff.max.ms",
                           "ops:check the brokers, do not restart the job", "code:KafkaSource parallelism"),
                  would_change="If the commits fail with DisconnectException or request timeouts (no coordinator "
                               "error) at a regular cadence minutes apart, idle connections are being reaped; if the "
                               "broker logs show the coordinator healthy at those times, look at the network path "
                               "instead."),
        RootCause("idle-connection-reaped",
                  "The coordinator connection sat idle between commits and was dropped by the network (load "
                  "balancer, NAT or firewall idle timeout) or the broker, so the next commit hit a dead connection.",
                  "DisconnectException / request timeouts on commits that come minutes apart at a regular cadence, "
                  "'Node N disconnected' at regular intervals, no coordinator errors.",
                  patches=("kafka:connections.max.idle.ms", "code:KafkaSource parallelism"),
                  would_change="If the commits carry CoordinatorNotAvailableException / NotCoordinatorException, or "
                               "the disconnects are not regular and commits come seconds apart, the brokers or the "
                               "coordinator went away: not idle reaping."),
        RootCause("undetermined",
                  "The commits fail, but nothing in the logs points at the coordinator or at idle connections.",
                  "Commit failures whose exceptions are neither coordinator errors nor disconnects on idle "
                  "connections, or disconnects on busy connections without a broker-side sign.",
                  patches=("code:KafkaSource parallelism",),
                  would_change="Coordinator errors on the commits, a broker log showing the group coordinator moving, "
                               "or disconnects at a regular cadence minutes apart would each name a cause.",
                  next_evidence="the broker logs (server.log, controller.log) around the failed commits; "
                                "`kafka-consumer-groups.sh --describe --group <group.id>` while it happens; the "
                                "consumer's `ConsumerConfig values:` dump (connections.max.idle.ms, "
                                "request.timeout.ms); DEBUG logging for org.apache.kafka.clients.NetworkClient on "
                                "one TaskManager."),
    )

    wordings = (
        Wording("kafka-offset-commit-failure", r"Failed to commit consumer offsets for checkpoint \d+",
                "1.14 – 2.x", "KafkaSourceReader#notifyCheckpointComplete",
                "Failed to commit consumer offsets for checkpoint 42"),
        Wording("kafka-offset-commit-failure", r"Async Kafka commit failed",
                "1.3 – 1.17", "FlinkKafkaConsumerBase / KafkaFetcher (legacy FlinkKafkaConsumer)",
                "Async Kafka commit failed."),
    )

    templates = {
        "head": "Kafka offset commits failed for {count} checkpoint(s) ({first}–{last}, up to {run} in a "
                "row){over}{exceptions}. ",
        "head without ids": "Kafka offset commits failed {count} time(s){over}{exceptions}. ",
        "over": " over {span}",
        "exceptions": " ({top})",
        "exception count": "{exception} ×{count}",
        "coordinator-unavailable": "The group coordinator was unavailable: the failures carry coordinator "
                                   "errors{unreachable}. {recovery}",
        "brokers unreachable": " and brokers were unreachable",
        "recovered": "Commits recovered at {when}, as they do once the coordinator is back.",
        "not recovered": "The commits had not recovered by the end of the logs: check the brokers.",
        "idle-connection-reaped": "{idles}{kept}{found_dead}, so each commit goes out on a dead connection and fails "
                                  "with a disconnect.",
        "idles every": "Commits come every {gap} s, so the coordinator connection idles in between",
        "idles": "The coordinator connection idles between commits",
        "kept idle": "; the client keeps idle connections for {idle} ms, longer than the network does",
        "found dead": " (the coordinator connection was found dead every ~{period} s)",
        "undetermined": "Root cause undetermined: the failures carry neither coordinator errors nor disconnects on "
                        "connections idle between commits.",
        "surplus readers": " Also: the source runs {readers} readers for {partitions} partition(s) of {topics}, so "
                           "{idle} reader(s) sit idle. That wastes slots but does not make commits fail: an idle "
                           "reader has no offsets to commit.",
        "excerpt": " The input ends with these failures (an excerpt without a timeline), so whether they went on or "
                   "were a short blip is unknown: a blip of one or two checkpoints needs no action; look at the logs "
                   "after the last failure for commits or checkpoints succeeding again.",
        "no harm": " A failed commit does not affect Flink's correctness: the source restores from the offsets in "
                   "Flink's checkpoints; committed offsets only feed lag monitoring and jobs started without state.",
        "first failure": "first failed commit{checkpoint}",
        "last failure": "last failed commit in the logs{checkpoint}",
        "checkpoint": " (checkpoint {id})",
        "coordinator lost": "the client lost its group coordinator",
        "broker unreachable": "a broker was unreachable",
        "coordinator back": "the coordinator is back",
        "dead connection": "the request went out on a connection that was already dead",
        "connection dropped": "the broker connection dropped",
        "idle readers": "{readers} readers for {partitions} partition(s): the surplus ones are idle and commit "
                        "nothing",
        "consumer settings": "the consumer's effective settings",
        "back off": "Back off between reconnect attempts instead of hammering an unavailable broker or coordinator "
                    "in a tight loop while it moves.",
        "close idle": "Close idle connections on the client before the network drops them silently, so each commit "
                      "opens a fresh connection instead of failing on a dead one{apart}.",
        "commits apart": " (commits are {gap} s apart)",
        "KafkaSource parallelism": "Not a fix for the commit failures (idle readers commit nothing): {surplus} "
                                   "surplus reader(s) can never be assigned a partition of {topics} and only hold "
                                   "slots. If the topic will get more partitions, use a divisor of the partition "
                                   "count.",
        "parallelism snippet": "env.fromSource(kafkaSource, watermarkStrategy, \"kafka-source\")\n"
                               "   .setParallelism({partitions});  // {topics}: {partitions} partition(s), was "
                               "{readers} readers\n"
                               "// the KafkaSink that writes to it likewise: "
                               "stream.sinkTo(kafkaSink).setParallelism({partitions});\n"
                               "// Flink SQL: SET 'parallelism.default' = '{partitions}'; (or per source with "
                               "'scan.parallelism' where the connector supports it)",
        "check the brokers": "Commits resume by themselves once the coordinator is back; restarting the job changes "
                             "nothing. If the failures last, find out why the __consumer_offsets partition of the "
                             "group has no leader (broker down, rolling restart without controlled shutdown, "
                             "under-replicated partitions).",
        "broker commands": "kafka-topics.sh --bootstrap-server {servers} --describe --topic __consumer_offsets "
                           "--under-replicated-partitions\n"
                           "kafka-consumer-groups.sh --bootstrap-server {servers} --describe --group {group}",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        failures = commit_failures(incident)
        if not failures:
            return []
        rounds = commit_rounds(failures)
        run = longest_consecutive_run(rounds)
        times = [r.ts for r in rounds if r.ts]
        span = (seconds(times[-1]) - seconds(times[0])) if len(times) >= 2 else 0.0
        persistent = len(run) > MAX_CONSECUTIVE_FAILED_CHECKPOINTS or (span > MAX_FAILURE_SPAN_S and len(rounds) >= 3)
        if not times and not run:
            persistent = len(rounds) > MAX_CONSECUTIVE_FAILED_CHECKPOINTS  # a bare excerpt: count what is there
        lines = client_lines(incident)
        # Without anything after the last failure (commits working again, checkpoints completing) the input is an
        # excerpt: a blip and an outage look the same, so persistence is unknown rather than judged.
        persistence = "persistent" if persistent else (
            "stopped" if _commits_resumed(incident, lines, rounds) else "unknown")
        if persistence == "stopped":
            return []

        groups = {cl.group_id for cl in lines if cl.group_id}
        config = consumer_config(incident, groups)
        assignment = source_assignment(incident)
        gap, gap_cv = cadence(times)
        interval_ms = incident.config.get_duration_ms("execution.checkpointing.interval")
        commit_gap_s = gap if gap is not None else (interval_ms / 1000 if interval_ms else None)
        counts = collections.Counter(c for f in failures for c in f.causes
                                     if c.endswith("Exception") and c != "RetriableCommitFailedException")
        # A coordinator marked unknown because its connection dropped is a consequence, not a coordinator error.
        coordinator = sum(1 for f in failures if f.coordinator) + sum(
            1 for cl in lines if cl.what == "coordinator-unavailable" and "isDisconnected: true" not in cl.event.text)
        connection = sum(1 for f in failures if f.connection and not f.coordinator) + sum(
            1 for cl in lines if cl.what in ("cancelled-in-flight", "request-timeout")
            and cl.api in (None, "OFFSET_COMMIT", "FIND_COORDINATOR"))
        disconnect_period = _disconnect_period(lines)
        recovered_at = _recovered_at(incident, lines, rounds)
        idle_gap = bool(commit_gap_s and commit_gap_s >= IDLE_GAP_MIN_S)
        regular = (gap_cv is not None and gap_cv <= REGULAR_CV) or disconnect_period is not None
        broker_down = any(cl.what == "connect-failed" for cl in lines)

        # The commits' own exceptions decide; the reader count never does (idle readers commit nothing).
        if connection > coordinator and idle_gap and regular:
            cause, confidence = "idle-connection-reaped", 0.8
        elif coordinator:
            cause, confidence = "coordinator-unavailable", 0.85 if (broker_down or recovered_at) else 0.7
        else:
            cause, confidence = "undetermined", 0.4
        if persistence == "unknown":
            confidence = min(confidence, 0.5)

        ids = sorted({r.checkpoint_id for r in rounds if r.checkpoint_id is not None})
        details = {
            "failed_commit_rounds": len(rounds),
            "failure_lines": len(failures),
            "checkpoints_failing": f"{ids[0]}–{ids[-1]}" if ids else "ids not logged (legacy consumer)",
            "longest_consecutive_run": len(run),
            "failure_span": human_span(span) if times else "unknown (no timestamps)",
            "persistence": {"persistent": "persistent (over the thresholds)",
                            "unknown": "unknown: the input ends with the failures (no timeline after them)"}[persistence],
            "thresholds": f"more than {MAX_CONSECUTIVE_FAILED_CHECKPOINTS} consecutive checkpoints or more than "
                          f"{human_span(MAX_FAILURE_SPAN_S)} of failures",
            "causes": dict(counts.most_common()),
            "commit_cadence": f"{round(gap)} s" if gap else (f"{interval_ms // 1000} s (checkpoint interval)"
                                                            if interval_ms else "unknown"),
            "recovered_at": recovered_at or "not within the logs",
            "readers": assignment.readers if assignment.readers is not None else "unknown",
            "partitions": len(assignment.partitions) if assignment.partitions else "unknown",
            "consumer_config": config.source if config else "no ConsumerConfig values: dump in the logs",
        }
        if disconnect_period:
            details["node_disconnect_period"] = f"{round(disconnect_period)} s"
        timeouts = sum(1 for cl in lines if cl.what == "request-timeout")
        if timeouts:
            # a silently dropped connection is only noticed when request.timeout.ms runs out
            details["requests_timed_out"] = timeouts
        for key in ("reconnect.backoff.ms", "reconnect.backoff.max.ms", "connections.max.idle.ms",
                    "request.timeout.ms"):
            details[key] = current_value(config, key)[0]

        evidence, notes = self._evidence(failures, rounds, lines, assignment, config, cause)
        summary = self._summary(cause, rounds, run, span, times, counts, assignment, commit_gap_s, disconnect_period,
                                recovered_at, config, broker_down, persistence)
        patches = self._patches(cause, config, assignment, commit_gap_s, disconnect_period)
        return [self.finding(cause, summary, evidence, confidence=confidence, patches=patches, severity="warning",
                             notes=notes, details=details)]

    # ------------------------------------------------------------------------------------------------ narrative

    def _summary(self, cause, rounds, run, span, times, counts, assignment, commit_gap_s, disconnect_period,
                 recovered_at, config, broker_down, persistence) -> str:
        ids = sorted({r.checkpoint_id for r in rounds if r.checkpoint_id is not None})
        top = ", ".join(self.say("exception count", exception=name, count=n) for name, n in counts.most_common(3))
        over = self.say("over", span=human_span(span)) if times else ""
        exceptions = self.say("exceptions", top=top) if top else ""
        if ids:
            summary = self.say("head", count=len(ids), first=ids[0], last=ids[-1], run=len(run), over=over,
                               exceptions=exceptions)
        else:
            summary = self.say("head without ids", count=len(rounds), over=over, exceptions=exceptions)
        if cause == "coordinator-unavailable":
            summary += self.say(cause, unreachable=self.say("brokers unreachable") if broker_down else "",
                                recovery=self.say("recovered", when=recovered_at) if recovered_at
                                else self.say("not recovered"))
        elif cause == "idle-connection-reaped":
            idle, _ = current_value(config, "connections.max.idle.ms")
            summary += self.say(
                cause, idles=self.say("idles every", gap=round(commit_gap_s)) if commit_gap_s else self.say("idles"),
                kept=self.say("kept idle", idle=idle) if idle else "",
                found_dead=self.say("found dead", period=round(disconnect_period)) if disconnect_period else "")
        else:
            summary += self.say(cause)
        if assignment.exceeds:
            idle = (len(assignment.idle_readers) if assignment.idle_readers
                    else (assignment.readers or 0) - len(assignment.partitions))
            summary += self.say("surplus readers", readers=assignment.readers or "?",
                                partitions=len(assignment.partitions) or "?",
                                topics=", ".join(sorted(assignment.topics)) or "the topic", idle=idle)
        if persistence == "unknown":
            summary += self.say("excerpt")
        return summary + self.say("no harm")

    def _evidence(self, failures: list[CommitFailure], rounds: list[CommitRound], lines: list[ClientLine],
                  assignment, config, cause) -> tuple[list[Event], dict[int, str]]:
        evidence, notes, add = evidence_trail()

        first = failures[0]
        add(first.event, self.say("first failure", checkpoint=self.say("checkpoint", id=first.checkpoint_id)
                                  if first.checkpoint_id else ""))
        if cause == "coordinator-unavailable":
            add(next((cl.event for cl in lines if cl.what == "coordinator-unavailable"), None),
                self.say("coordinator lost"))
            add(next((cl.event for cl in lines if cl.what == "connect-failed"), None), self.say("broker unreachable"))
            add(next((cl.event for cl in reversed(lines) if cl.what == "coordinator-discovered"), None),
                self.say("coordinator back"))
        elif cause == "idle-connection-reaped":
            add(next((cl.event for cl in lines if cl.what in ("cancelled-in-flight", "request-timeout")), None),
                self.say("dead connection"))
            add(next((cl.event for cl in lines if cl.what == "disconnected"), None), self.say("connection dropped"))
        if assignment.exceeds:
            readers = [ev for ev in assignment.events if "registering reader" in ev.message
                       or "no partitions to read from" in ev.message]
            if readers:
                add(readers[-1], self.say("idle readers", readers=assignment.readers,
                                          partitions=len(assignment.partitions) or "?"))
        last = failures[-1]
        add(last.event, self.say("last failure", checkpoint=self.say("checkpoint", id=last.checkpoint_id)
                                 if last.checkpoint_id else ""))
        if config is not None:
            add(config.event, self.say("consumer settings"))
        return evidence, notes

    # ------------------------------------------------------------------------------------------------ patches

    def _patches(self, cause, config, assignment, commit_gap_s, disconnect_period):
        patches = []
        # Back-off only helps against an unavailable coordinator; it does nothing against reaped idle connections.
        for key, wanted in (RECONNECT_BACKOFF if cause == "coordinator-unavailable" else ()):
            current, source = current_value(config, key)
            value = as_int(current)
            if value is None or value < wanted:
                patches.append(self.kafka_patch(key, str(wanted), self.say("back off"), current, source))
        if cause == "idle-connection-reaped":
            current, source = current_value(config, "connections.max.idle.ms")
            proposed = _proposed_idle_ms(as_int(current), commit_gap_s, disconnect_period)
            if proposed is not None:
                patches.append(self.kafka_patch(
                    "connections.max.idle.ms", str(proposed),
                    self.say("close idle", apart=self.say("commits apart", gap=round(commit_gap_s))
                             if commit_gap_s else ""),
                    current, source))
        if assignment.exceeds:
            partitions = len(assignment.partitions)
            readers = assignment.readers
            topics = ", ".join(sorted(assignment.topics)) or "the topic"
            if partitions:
                patches.append(self.code_patch(
                    "KafkaSource parallelism",
                    self.say("parallelism snippet", partitions=partitions, topics=topics, readers=readers),
                    self.say("KafkaSource parallelism", surplus=readers - partitions if readers else "the",
                             topics=topics)))
        if cause == "coordinator-unavailable":
            servers = (config.values.get("bootstrap.servers", "") if config else "").strip("[]").split(",")[0].strip()
            patches.append(self.ops_patch(
                "check the brokers, do not restart the job", self.say("check the brokers"),
                snippet=self.say("broker commands", servers=servers or "<bootstrap servers>",
                                 group=config.group_id if config and config.group_id else "<group.id>")))
        return patches


def _proposed_idle_ms(current: int | None, commit_gap_s: float | None, disconnect_period: float | None) -> int | None:
    bounds = [MAX_PROPOSED_IDLE_MS]
    if commit_gap_s:
        bounds.append(int(commit_gap_s * 1000 / 2))
    if disconnect_period:
        bounds.append(int(disconnect_period * 1000 * 3 / 4))
    proposed = max(MIN_PROPOSED_IDLE_MS, round(min(bounds) / 10_000) * 10_000)
    if current is not None and current <= proposed:
        return None
    return proposed


def _disconnect_period(lines: list[ClientLine]) -> float | None:
    """The period of the most regular 'Node N disconnected' series of one client and node (None if none is)."""
    series: dict[tuple, list[str]] = collections.defaultdict(list)
    for cl in lines:
        if cl.what == "disconnected" and cl.event.ts:
            series[(cl.client_id, cl.node)].append(cl.event.ts)
    best = None
    for ts in series.values():
        period, cv = cadence(ts)
        if period is not None and cv is not None and cv <= REGULAR_CV and period >= IDLE_GAP_MIN_S:
            if best is None or period < best:
                best = period
    return best


def _commits_resumed(incident: Incident, lines: list[ClientLine], rounds: list[CommitRound]) -> bool:
    """Whether the input shows the commits working again after the last failure: the coordinator rediscovered or a
    checkpoint completing later (a later commit then went out on a working connection)."""
    last = max((r.ts for r in rounds if r.ts), default=None)
    if last is None:
        return False
    if any(cl.what == "coordinator-discovered" and cl.event.ts and cl.event.ts > last for cl in lines):
        return True
    return any(a.outcome == "completed" and a.finished and a.finished > last for a in checkpoint_history(incident))


def _recovered_at(incident: Incident, lines: list[ClientLine], rounds: list[CommitRound]) -> str | None:
    """When commits came back: the coordinator rediscovered after the last failure, or checkpoints completing."""
    last = max((r.ts for r in rounds if r.ts), default=None)
    if last is None:
        return None
    discovered = [cl.event.ts for cl in lines
                  if cl.what == "coordinator-discovered" and cl.event.ts and cl.event.ts >= last]
    history = checkpoint_history(incident)
    completed = [a.finished for a in history if a.outcome == "completed" and a.finished and a.finished > last]
    if len(completed) >= 3:
        return min(discovered) if discovered else completed[0]
    if discovered and not history:  # TaskManager logs only: the rediscovery is all there is to go by
        return min(discovered)
    return None

