"""The Kafka client of a source or sink cannot work with the brokers: ``TimeoutException`` (positions, metadata, node
assignment), authentication, authorization or a missing topic fails the task.

A Kafka ``TimeoutException`` says only that an answer did not come in time; the reason is in what the client logged
before it: connections to the bootstrap servers that cannot be established (brokers unreachable), a bootstrap that
answers but brokers advertised under addresses the TaskManagers cannot reach (``advertised.listeners``), a broker
refusing the credentials, an ACL refusing the topic or group, or metadata saying the topic does not exist. Timeouts
that a client rides out (a broker restart, then work goes on) fail no task and are no finding; offset-commit
failures of a source are the ``kafka-offset-commit-failure`` runbook's.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from flink_runbooks.detectors.base import Detector, signature
from flink_runbooks.evidence.episodes import failure_events, is_excerpt
from flink_runbooks.evidence.kafka_clients import (
    LEGACY_COMMIT_FAILED, LEGACY_THREAD_COMMIT_FAILED, SOURCE_COMMIT_FAILED, ClientConfig, client_configs,
)
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording

SLUG = "kafka-client-timeout"

# The client's own texts (2.x and 3.x): KafkaConsumer.position, KafkaProducer.waitOnMetadata, KafkaAdminClient,
# Fetcher/metadata, Errors.*.
POSITION_TIMEOUT = re.compile(r"Timeout of (?P<ms>\d+)ms expired before the position for partition (?P<tp>\S+) could "
                              r"be determined")
METADATA_TIMEOUT = re.compile(r"Topic (?P<topic>\S+) not present in metadata after (?P<ms>\d+) ms|"
                              r"Timeout expired while fetching topic metadata|"
                              r"Partition \d+ of topic (?P<topic2>\S+) with partition count \d+ is not present in "
                              r"metadata after (?P<ms2>\d+) ms")
NODE_ASSIGNMENT = re.compile(r"Timed out waiting for a node assignment|Timed out waiting to send the call|"
                             r"Timed out waiting for a node assignment\. Call: (?P<call>\w+)")


CLIENT_TIMEOUT = re.compile(rf"{signature(POSITION_TIMEOUT)}|{signature(METADATA_TIMEOUT)}|{signature(NODE_ASSIGNMENT)}|"
                            r"org\.apache\.kafka\.common\.errors\.TimeoutException|"
                            r"Timeout expired after \d+ ?milliseconds while awaiting \w+")
AUTHENTICATION = re.compile(r"SaslAuthenticationException|SslAuthenticationException|"
                            r"failed authentication due to: (?P<why>.*)")
# A GSSAPI login without a valid ticket: the credentials are the Kerberos login's (kerberos-token-expired), not the
# client's SASL settings that this runbook checks.
KERBEROS_TICKET_MISSING = re.compile(r"Failed to find any Kerberos tgt|TGT is expired|\(Mechanism level: Ticket expired")
AUTHORIZATION = re.compile(r"(?:Topic|Group|TransactionalId|Cluster)AuthorizationException|"
                           r"Not authorized to access (?:topics|group): ?(?P<what>.*)|"
                           r"(?:Topic|Group|Transactional Id|Cluster) authorization failed|"
                           r"=TOPIC_AUTHORIZATION_FAILED|Topic authorization failed for topics (?P<topics>\[[^\]]*\])")
TOPIC_MISSING = re.compile(r"UnknownTopicOrPartitionException|This server does not host this topic-partition|"
                           r"=UNKNOWN_TOPIC_OR_PARTITION")
KAFKA_FAULT = re.compile(rf"{CLIENT_TIMEOUT.pattern}|{signature(AUTHENTICATION)}|{signature(AUTHORIZATION)}|"
                         rf"{TOPIC_MISSING.pattern}")
# NetworkClient: a connection that could not be made, a host that does not resolve, the bootstrap dropping us.
CONNECT_FAILED = re.compile(r"Connection to node (?P<node>-?\d+) \((?P<addr>[^)]*)\) could not be established\. "
                            r"Broker may not be available")
CONNECT_ERROR = re.compile(r"Error connecting to node (?P<host>[^\s:]+):(?P<port>\d+) \(id: (?P<node>-?\d+) rack: "
                           r"\S+\)")
BOOTSTRAP_DISCONNECTED = re.compile(r"Bootstrap broker (?P<host>[^\s:]+):(?P<port>\d+) \(id: -1 rack: \S+\) "
                                    r"disconnected")
UNRESOLVED_BOOTSTRAP = re.compile(r"Couldn't resolve server (?P<url>\S+) from bootstrap\.servers|"
                                  r"No resolvable bootstrap urls given in bootstrap\.servers")
_REFUSED = re.compile(r"Not authorized to access (?P<kind>topics|group): ?(?P<what>[^\n]+)|"
                      r"Topic authorization failed for topics (?P<topics>\[[^\]]*\])")
METADATA_ERRORS = re.compile(r"Error while fetching metadata with correlation id \d+ : \{(?P<errors>[^}]*)\}")


@dataclass
class NodeProblem:
    event: Event
    node: int
    host: str | None
    unresolved: bool


def node_problems(incident: Incident) -> list[NodeProblem]:
    out = []
    for ev in incident.events:
        text = ev.text
        m = CONNECT_FAILED.search(text)
        if m:
            addr = m["addr"]
            host = addr.split("/", 1)[0] or None if "/" in addr else addr.rsplit(":", 1)[0]
            out.append(NodeProblem(ev, int(m["node"]), host, "<unresolved>" in addr))
            continue
        m = CONNECT_ERROR.search(text)
        if m:
            out.append(NodeProblem(ev, int(m["node"]), m["host"], "UnknownHostException" in text))
            continue
        m = BOOTSTRAP_DISCONNECTED.search(text)
        if m:
            out.append(NodeProblem(ev, -1, m["host"], False))
    return out


def bootstrap_hosts(configs: list[ClientConfig]) -> set[str]:
    hosts = set()
    for cfg in configs:
        for server in re.split(r"[,\s\[\]]+", cfg.values.get("bootstrap.servers", "")):
            if server:
                hosts.add(re.sub(r"^\w+://", "", server).rsplit(":", 1)[0])
    return hosts


class KafkaClientTimeout(Detector):
    slug = SLUG
    title = "Kafka client cannot reach or use the brokers"
    category = "connectors"
    meaning = ("A Kafka source or sink failed because its client got no usable answer from the brokers: a timeout "
               "(positions, metadata, node assignment), refused credentials, a missing ACL or a missing topic.")
    versions = "1.x – 2.x (FlinkKafkaConsumer/Producer, KafkaSource/KafkaSink); Kafka clients 2.x and 3.x"
    exception_classes = (
        "org.apache.kafka.common.errors.TimeoutException",
        "org.apache.kafka.common.errors.SaslAuthenticationException",
        "org.apache.kafka.common.errors.SslAuthenticationException",
        "org.apache.kafka.common.errors.TopicAuthorizationException",
        "org.apache.kafka.common.errors.GroupAuthorizationException",
        "org.apache.kafka.common.errors.UnknownTopicOrPartitionException",
    )
    config_keys = (
        "restart-strategy.type",
        "execution.checkpointing.interval",
    )
    signatures = (
        signature(POSITION_TIMEOUT),
        r"not present in metadata after \d+ ms|Timeout expired while fetching topic metadata",
        r"Timed out waiting for a node assignment|Timed out waiting to send the call",
        r"org\.apache\.kafka\.common\.errors\.(?:TimeoutException|SaslAuthenticationException|"
        r"SslAuthenticationException|TopicAuthorizationException|GroupAuthorizationException|"
        r"UnknownTopicOrPartitionException)",
        r"failed authentication due to|Not authorized to access (?:topics|group)",
        r"This server does not host this topic-partition",
        r"Connection to node -?\d+ \([^)]*\) could not be established",
        r"Error connecting to node \S+ \(id: -?\d+ rack:",
        r"Bootstrap broker \S+ \(id: -1 rack: \S+\) disconnected",
        r"Couldn't resolve server \S+ from bootstrap\.servers|No resolvable bootstrap urls",
        r"Error while fetching metadata with correlation id",
        r"UnknownHostException",
        r"(?:Consumer|Producer|AdminClient)Config values:",
        r"^\s*(?:bootstrap\.servers|security\.protocol|sasl\.mechanism|group\.id|client\.id) = ",
    )
    wordings = (
        Wording(SLUG, r"Timeout of \d+ms expired before the position for partition \S+ could be determined",
                "1.7 – 2.x", "org.apache.kafka.clients.consumer.KafkaConsumer#position (Kafka 2.0+, the client of the "
                "universal connector since Flink 1.7)",
                "org.apache.kafka.common.errors.TimeoutException: Timeout of 60000ms expired before the position for "
                "partition orders-0 could be determined"),
        Wording(SLUG, r"Topic \S+ not present in metadata after \d+ ms",
                "1.9 – 2.x", "org.apache.kafka.clients.producer.KafkaProducer#waitOnMetadata (Kafka 2.2+, the client "
                "of the connector since Flink 1.9)",
                "org.apache.kafka.common.errors.TimeoutException: Topic orders-enriched not present in metadata after "
                "60000 ms."),
    )
    root_causes = (
        RootCause("authentication-failed",
                  "The brokers refused the client's credentials (SASL or TLS), so no request could be made.",
                  "SaslAuthenticationException / SslAuthenticationException, or NetworkClient's 'Connection to node … "
                  "failed authentication due to: …'.",
                  patches=("ops:check the client credentials",)),
        RootCause("not-authorized",
                  "The client authenticated, but the brokers' ACLs do not allow it the topic, the consumer group or "
                  "the transactional id.",
                  "TopicAuthorizationException / GroupAuthorizationException ('Not authorized to access topics: […]' / "
                  "'group: …'), or TOPIC_AUTHORIZATION_FAILED in the metadata errors.",
                  patches=("ops:grant the missing ACLs",)),
        RootCause("topic-missing",
                  "The topic (or partition) the job reads or writes does not exist on the cluster it connects to.",
                  "UnknownTopicOrPartitionException ('This server does not host this topic-partition') or "
                  "UNKNOWN_TOPIC_OR_PARTITION in the client's metadata errors before the timeout.",
                  patches=("ops:create the topic or fix its name",)),
        RootCause("advertised-listeners-unreachable",
                  "The bootstrap servers answer, but the brokers advertise addresses (advertised.listeners) the "
                  "TaskManagers cannot resolve or reach, so every request after the first metadata call times out.",
                  "Connections to broker ids >= 0 at hosts that are not the bootstrap servers fail (unresolved host, "
                  "'could not be established') while the bootstrap connection does not.",
                  patches=("ops:advertise addresses the TaskManagers can reach",)),
        RootCause("brokers-unreachable",
                  "The client cannot open a connection to the bootstrap servers at all (wrong address or port, DNS, "
                  "firewall, security groups, the brokers down) from the TaskManagers, or from the JobManager where a "
                  "KafkaSource's enumerator runs.",
                  "'Connection to node -1 (…) could not be established. Broker may not be available.', 'Bootstrap "
                  "broker … disconnected' or an unresolvable bootstrap server, with no refusal of credentials.",
                  patches=("ops:check the route from the TaskManagers to the brokers",)),
        RootCause("undetermined",
                  "The Kafka client timed out, and the logs do not show the connections, credentials, ACLs or "
                  "metadata behind it.",
                  "A Kafka TimeoutException failed a task without any connection, authentication, authorization or "
                  "metadata message of the client in the logs.",
                  patches=("ops:test the brokers from a TaskManager host",),
                  next_evidence="the TaskManager log from the client's start (its `ConsumerConfig values:` / "
                                "`ProducerConfig values:` dump and NetworkClient warnings; DEBUG for "
                                "org.apache.kafka.clients.NetworkClient if there are none), and from a TaskManager "
                                "host `kafka-broker-api-versions.sh --bootstrap-server <bootstrap.servers>`."),
    )

    templates = {
        "head": "A Kafka client's error failed the job: {failure}. {verdict}{extra}",
        "advertised-listeners-unreachable": " The bootstrap servers ({bootstrap}) answered, but the brokers they "
                                            "advertise ({advertised}) cannot be reached from the TaskManagers.",
        "brokers-unreachable": " Unreachable: {brokers}.",
        "not-authorized": " Refused: {refused}.",
        "topic-missing": " Raising client timeouts would only make the job wait longer for a topic that is not there.",
        "authentication-failed": " Raising client timeouts would not help: every connection is refused.",
        "excerpt": "The Kafka client could not connect to {brokers}. Whether it gave up (a failed task) or "
                   "reconnected (a broker restart it rode out) is not in this excerpt. {verdict}",
        "failure note": "the Kafka client's failure that failed the task",
        "before note": "what the client logged before it gave up",
        "connection note": "a connection the client could not make",
        "credentials": "Compare the job's security.protocol, sasl.mechanism and sasl.jaas.config with what the "
                       "brokers' listener expects (now: {security}); a rotated password or a wrong SCRAM/PLAIN "
                       "mechanism gives exactly this. Pass secrets through the deployment's secret store, never in "
                       "the job's code.",
        "security unknown": "not in the logs",
        "grant ACLs": "The broker refused {refused}: grant the job's principal the operations it needs (Read and "
                      "Describe on the source topics and its consumer group, Write and Describe on the sink topics, "
                      "Write/Describe on the transactional id for exactly-once sinks).",
        "create the topic": "Create the topic with the partitions and replication the job expects, or correct the "
                            "topic name (and the cluster the job connects to). Relying on broker-side auto-creation "
                            "hides typos.",
        "advertise reachable addresses": "The brokers advertise {hosts}, which the TaskManagers cannot resolve or "
                                         "reach. Give the brokers a listener whose advertised address is reachable "
                                         "from where Flink runs (an external listener for clients outside the Kafka "
                                         "network), and point bootstrap.servers at that listener.",
        "check the route": "Check the bootstrap.servers addresses and ports, DNS, firewalls and security groups "
                           "between the TaskManager hosts (and the JobManager, where a KafkaSource's enumerator lists "
                           "partitions) and the brokers, and that the brokers are up.",
        "test the brokers": "Nothing in the logs says why the client timed out: test the connection and the client's "
                            "settings from where the TaskManagers run.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        faults = _kafka_failures(incident)
        if not faults:
            return self._excerpt_without_failure(incident)
        fault = faults[0]
        text = "\n".join(ev.text for ev in incident.events if not _is_commit_failure(ev))
        configs = [c for c in client_configs(incident) if c.kind in ("consumer", "producer", "admin")]
        bootstrap = bootstrap_hosts(configs)
        problems = node_problems(incident)
        unreachable_bootstrap = [p for p in problems if p.node == -1 or (p.host and p.host in bootstrap)]
        internal = [p for p in problems if p.node >= 0 and p.host and bootstrap and p.host not in bootstrap]
        metadata_errors = [ev for ev, _ in incident.find(METADATA_ERRORS)]
        details: dict = {"failure": _deepest(fault)[:300]}
        if bootstrap:
            details["bootstrap_servers"] = sorted(bootstrap)
        timeout = POSITION_TIMEOUT.search(text) or METADATA_TIMEOUT.search(text)
        if timeout:
            details["client_timeout"] = next((f"{int(v)} ms" for k, v in timeout.groupdict().items()
                                              if k.startswith("ms") and v), "")
            details["waiting_for"] = (f"the position of {timeout['tp']}" if "tp" in timeout.groupdict()
                                      and timeout["tp"] else "topic metadata")
        evidence = [fault]
        notes = {0: self.say("failure note")}
        auth = AUTHENTICATION.search(text)
        if auth and KERBEROS_TICKET_MISSING.search(text):
            return []
        authz = AUTHORIZATION.search(fault.text) or AUTHORIZATION.search(text)
        missing = TOPIC_MISSING.search(text)
        if auth:
            cause = "authentication-failed"
            evidence += [ev for ev in incident.events if AUTHENTICATION.search(ev.text) and ev is not fault][:2]
            details["security"] = {k: v for c in configs[:1] for k, v in c.values.items()
                                   if k in ("security.protocol", "sasl.mechanism")}
        elif authz:
            cause = "not-authorized"
            evidence += [ev for ev in incident.events if AUTHORIZATION.search(ev.text) and ev is not fault][:2]
            named = _REFUSED.search(fault.text) or _REFUSED.search(text)
            details["refused"] = (f"{named['kind'] or 'topics'} {(named['what'] or named['topics']).strip()}" if named
                                  else authz.group(0))
        elif missing:
            cause = "topic-missing"
            evidence += [ev for ev in metadata_errors + [ev for ev in incident.events if TOPIC_MISSING.search(ev.text)]
                         if ev is not fault][:2]
        elif internal and not [p for p in unreachable_bootstrap if p.node == -1]:
            cause = "advertised-listeners-unreachable"
            hosts = sorted({p.host for p in internal})
            details["unreachable_brokers"] = [f"node {p.node}: {p.host}" + (" (does not resolve)" if p.unresolved else "")
                                             for p in _first_per_node(internal)]
            evidence += [p.event for p in _first_per_node(internal)][:3]
            details["advertised_hosts"] = hosts
        elif unreachable_bootstrap or internal:
            cause = "brokers-unreachable"
            details["unreachable_brokers"] = [f"node {p.node}: {p.host}" for p in _first_per_node(
                unreachable_bootstrap or internal)]
            evidence += [p.event for p in _first_per_node(unreachable_bootstrap or internal)][:3]
            unresolved = [ev for ev, _ in incident.find(UNRESOLVED_BOOTSTRAP)]
            evidence += unresolved[:1]
        else:
            cause = "undetermined"
        for i in range(1, len(evidence)):
            notes.setdefault(i, self.say("before note"))
        excerpt = is_excerpt(incident)
        confidence = (0.5 if cause == "undetermined" else 0.85) - (0.15 if excerpt else 0.0)
        summary = self._summary(cause, fault, details)
        return [self.finding(cause, summary, evidence, notes=notes, confidence=confidence,
                             patches=self._patches(cause, details, configs), details=details)]

    def _excerpt_without_failure(self, incident: Incident) -> list[Finding]:
        """A pasted run of connection failures without the exception or what came after: whether the client gave up
        or rode it out is unknown, so the reading comes at low confidence and says so."""
        if not is_excerpt(incident) or any(_is_commit_failure(ev) for ev in incident.events):
            return []
        problems = node_problems(incident)
        if len(problems) < 2:
            return []
        configs = [c for c in client_configs(incident) if c.kind in ("consumer", "producer", "admin")]
        bootstrap = bootstrap_hosts(configs)
        internal = [p for p in problems if p.node >= 0 and p.host and bootstrap and p.host not in bootstrap]
        shown = _first_per_node(problems)
        if internal and not [p for p in problems if p.node == -1]:
            cause = "advertised-listeners-unreachable"
            details = {"advertised_hosts": sorted({p.host for p in internal}), "bootstrap_servers": sorted(bootstrap)}
        else:
            cause = "brokers-unreachable"
            details = {"bootstrap_servers": sorted(bootstrap)} if bootstrap else {}
        details["unreachable_brokers"] = [f"node {p.node}: {p.host}" for p in shown]
        details["outcome"] = "unknown (no failure and nothing after the warnings in this excerpt)"
        summary = self.say("excerpt", brokers="; ".join(details["unreachable_brokers"]),
                           verdict=self.cause(cause).summary)
        return [self.finding(cause, summary, [p.event for p in shown[:3]],
                             notes={i: self.say("connection note") for i in range(3)}, confidence=0.35,
                             patches=self._patches(cause, details, configs), details=details)]

    def _summary(self, cause: str, fault: Event, details: dict) -> str:
        extra = ""
        if cause == "advertised-listeners-unreachable":
            extra = self.say(cause, bootstrap=", ".join(details.get("bootstrap_servers", [])),
                             advertised=", ".join(details.get("advertised_hosts", [])))
        elif cause == "brokers-unreachable":
            extra = self.say(cause, brokers="; ".join(details.get("unreachable_brokers", [])))
        elif cause == "not-authorized":
            extra = self.say(cause, refused=details.get("refused"))
        elif cause in ("topic-missing", "authentication-failed"):
            extra = self.say(cause)
        return self.say("head", failure=_deepest(fault)[:240].rstrip("."), verdict=self.cause(cause).summary,
                        extra=extra)

    def _patches(self, cause: str, details: dict, configs: list[ClientConfig]):
        servers = ",".join(details.get("bootstrap_servers", [])) or "<bootstrap.servers>"
        if cause == "authentication-failed":
            sec = details.get("security") or {}
            return [self.ops_patch(
                "check the client credentials",
                self.say("credentials", security=", ".join(f"{k}={v}" for k, v in sec.items())
                         or self.say("security unknown")),
                snippet=f"kafka-broker-api-versions.sh --bootstrap-server {servers} --command-config client.properties")]
        if cause == "not-authorized":
            return [self.ops_patch(
                "grant the missing ACLs", self.say("grant ACLs", refused=details.get("refused")),
                snippet=f"kafka-acls.sh --bootstrap-server {servers} --add --allow-principal User:<job principal> \\\n"
                        "  --operation Read --operation Describe --topic <topic> --group <group.id>")]
        if cause == "topic-missing":
            return [self.ops_patch(
                "create the topic or fix its name", self.say("create the topic"),
                snippet=f"kafka-topics.sh --bootstrap-server {servers} --list\n"
                        f"kafka-topics.sh --bootstrap-server {servers} --create --topic <topic> --partitions <n> "
                        "--replication-factor 3")]
        if cause == "advertised-listeners-unreachable":
            hosts = ", ".join(details.get("advertised_hosts", []))
            return [self.ops_patch(
                "advertise addresses the TaskManagers can reach",
                self.say("advertise reachable addresses", hosts=hosts),
                snippet="# server.properties of broker <id>\nlisteners=INTERNAL://0.0.0.0:9092,EXTERNAL://0.0.0.0:9094\n"
                        "advertised.listeners=INTERNAL://<internal host>:9092,EXTERNAL://<address reachable from "
                        "Flink>:9094\nlistener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL\n"
                        "# then check from a TaskManager host:\n"
                        f"kafka-broker-api-versions.sh --bootstrap-server {servers}")]
        if cause == "brokers-unreachable":
            return [self.ops_patch(
                "check the route from the TaskManagers to the brokers", self.say("check the route"),
                snippet="# from a TaskManager host or pod\n"
                        + "".join(f"nc -vz {h} <port>\n" for h in details.get("bootstrap_servers", ["<broker>"]))
                        + f"kafka-broker-api-versions.sh --bootstrap-server {servers}")]
        return [self.ops_patch(
            "test the brokers from a TaskManager host", self.say("test the brokers"),
            snippet=f"kafka-broker-api-versions.sh --bootstrap-server {servers}")]


def _is_commit_failure(ev: Event) -> bool:
    text = ev.text
    return bool(SOURCE_COMMIT_FAILED.search(text) or LEGACY_COMMIT_FAILED.search(text)
                or LEGACY_THREAD_COMMIT_FAILED.search(text))


def _kafka_failures(incident: Incident) -> list[Event]:
    """Failures (a task or job failing, a fatal error, or an excerpt's exception) that a Kafka client fault caused:
    a timeout a client rode out fails nothing and is not here."""
    out = []
    for ev in failure_events(incident):
        if _is_commit_failure(ev):
            continue
        if any(KAFKA_FAULT.search(f"{c.cls}: {c.message}") for c in ev.chain) or KAFKA_FAULT.search(ev.message):
            if _only_other_kafka_runbook(ev):
                continue
            out.append(ev)
    return out


def _only_other_kafka_runbook(ev: Event) -> bool:
    """Transactional faults of exactly-once sinks are kafka-eos-transaction-timeout's."""
    return bool(re.search(r"ProducerFencedException|InvalidTxnTimeoutException|InvalidPidMappingException|"
                          r"transaction timeout is larger than the maximum", ev.text))


def _deepest(ev: Event) -> str:
    kafka = [c for c in ev.chain if c.kind != "suppressed" and KAFKA_FAULT.search(f"{c.cls}: {c.message}")]
    link = kafka[-1] if kafka else (ev.root_cause or None)
    if link is None:
        # Flink 1.12 - 1.14 put the cause on the state-change line itself ("... with failure cause: <exception>")
        inline = re.search(r"(?:[a-z_$][\w$]*\.)+[A-Z][\w$]*(?:Exception|Error): .*", ev.message)
        return inline.group(0) if inline else ev.message
    return f"{link.cls}: {link.message}" if link.message else link.cls


def _first_per_node(problems: list[NodeProblem]) -> list[NodeProblem]:
    seen, out = set(), []
    for p in problems:
        if (p.node, p.host) not in seen:
            seen.add((p.node, p.host))
            out.append(p)
    return out
