"""Reading one failure: its deepest exception, the task it ended, the user-code frames and which component threw it.

Flink wraps a fault several times on its way to the JobManager (``JobException``, ``SerializedThrowable``,
``AsynchronousException``, ``WrappingRuntimeException``); the class worth naming is the deepest cause, and who
threw it is told by its package and by the frames: a plain ``java.lang`` exception thrown from a job's own class
is a bug in the job, the same class thrown from a Kafka client is the connector's.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from flink_runbooks.model import ChainLink, Event
from flink_runbooks.vocabulary.lifecycle import COORDINATOR_FAILOVER

# Packages whose frames are not the job's own code: the JDK, Flink, its RPC and network stacks, and the libraries
# connectors and file systems bring. A frame outside all of them is user code.
FRAMEWORK_PACKAGES = (
    "org.apache.flink.", "java.", "javax.", "jdk.", "sun.", "com.sun.", "scala.", "akka.", "org.apache.pekko.",
    "io.netty.", "org.apache.kafka.", "org.apache.hadoop.", "com.amazonaws.", "software.amazon.", "org.rocksdb.",
    "com.google.", "org.apache.commons.", "com.fasterxml.", "org.apache.calcite.", "org.codehaus.",
    "com.esotericsoftware.", "kotlin.", "org.slf4j.", "org.apache.logging.", "org.apache.log4j.", "io.grpc.",
    "org.eclipse.jetty.", "org.apache.zookeeper.", "org.apache.curator.", "io.fabric8.", "okhttp3.",
    "org.apache.http.", "org.apache.avro.", "org.apache.parquet.", "org.apache.orc.", "org.apache.hive.",
    "org.apache.iceberg.", "org.apache.hudi.", "org.apache.paimon.", "io.delta.", "org.apache.pulsar.",
    "org.elasticsearch.", "co.elastic.", "com.mysql.", "org.postgresql.", "io.debezium.", "com.ververica.",
    "com.rabbitmq.", "io.lettuce.", "redis.clients.", "com.datastax.", "com.mongodb.", "org.mongodb.",
    "oracle.jdbc.", "com.microsoft.", "org.apache.beam.", "py4j.", "net.bytebuddy.",
)
# Packages of connectors and the client libraries they run (a fault there is the external system's or the
# connector's, not Flink's core).
CONNECTOR_PACKAGES = (
    "org.apache.kafka.", "org.apache.flink.connector.", "org.apache.flink.connectors.",
    "org.apache.flink.streaming.connectors.", "org.apache.flink.formats.", "org.apache.pulsar.",
    "org.elasticsearch.", "co.elastic.", "com.mysql.", "org.postgresql.", "io.debezium.", "com.ververica.cdc",
    "org.apache.flink.cdc.", "com.rabbitmq.", "io.lettuce.", "redis.clients.", "com.datastax.", "com.mongodb.",
    "org.mongodb.", "oracle.jdbc.", "com.microsoft.sqlserver.", "java.sql.", "org.apache.iceberg.",
    "org.apache.hudi.", "org.apache.paimon.", "io.delta.", "org.apache.hive.", "org.apache.avro.",
    "org.apache.parquet.", "org.apache.orc.", "com.amazonaws.services.kinesis", "software.amazon.kinesis",
    "com.fasterxml.jackson.",  # JSON formats: a record the format cannot read
)
# The world around the job: storage, network, the file system, the cloud APIs behind checkpoints.
ENVIRONMENT_PACKAGES = ("java.net.", "java.nio.file.", "org.apache.hadoop.", "com.amazonaws.", "software.amazon.",
                        "com.google.cloud.", "com.microsoft.azure.", "com.azure.", "javax.net.ssl.")
ENVIRONMENT_MESSAGE = re.compile(
    r"(?i)No space left on device|Permission denied|Access Denied|Connection refused|Connection reset|"
    r"timed out|UnknownHost|No route to host|Name or service not known|Too many open files|Disk quota|"
    r"Read-only file system|certificate|Broken pipe")
# Errors the JVM itself raises: resources and class loading.
JVM_CLASSES = re.compile(
    r"^java\.lang\.(?:OutOfMemoryError|StackOverflowError|InternalError|VirtualMachineError|UnknownError|"
    r"NoClassDefFoundError|ClassNotFoundException|NoSuchMethodError|NoSuchFieldError|UnsatisfiedLinkError|"
    r"IncompatibleClassChangeError|AbstractMethodError|LinkageError|ExceptionInInitializerError|"
    r"ClassFormatError|UnsupportedClassVersionError|VerifyError)$")
CLASS_LOADING = re.compile(r"NoClassDefFoundError|ClassNotFoundException|NoSuchMethodError|NoSuchFieldError|"
                           r"IncompatibleClassChangeError|AbstractMethodError|LinkageError|UnsupportedClassVersionError")
_FRAME = re.compile(r"^\s*at (?:[\w.-]+//|[\w.-]+@[\w.-]+/|[\w.]+/)?(?P<name>[\w$.]+)\.(?P<method>[\w$<>]+)\((?P<where>[^)]*)\)")
_TASK = re.compile(r"(?P<task>[^\s(][^()]*? \(\d+/\d+\))(?:#\d+)?(?: \([0-9a-f_]+\))? switched from \w+ to FAILED")
_TASK_IN_TEXT = re.compile(r"(?:Task|task|operator|Operator) '?(?P<task>[^'()\n]+? \(\d+/\d+\))")

COMPONENTS = ("user code", "a connector", "Flink", "the JVM", "the environment")


@dataclass
class Fault:
    """What one failure record says about its fault."""

    event: Event
    deepest: ChainLink | None
    component: str | None  # one of COMPONENTS, or None when nothing tells
    why: str  # the evidence behind the component, in words
    task: str | None
    user_frames: list[str]

    @property
    def text(self) -> str:
        if self.deepest is None:
            return self.event.message
        return f"{self.deepest.cls}: {self.deepest.message}" if self.deepest.message else self.deepest.cls


def unshaded(cls: str) -> str:
    """``org.apache.flink.elasticsearch7.shaded.org.elasticsearch.ElasticsearchException`` ->
    ``org.elasticsearch.ElasticsearchException``: a connector's relocated library is still that library; Flink's own
    relocated netty/guava/jackson stay Flink's."""
    m = re.match(r"^org\.apache\.flink\.(?:[\w]+\.)*?shaded\.(?:[a-z]+\d+\.)?(?P<rest>.+)$", cls)
    if not m or not m.group("rest").startswith(CONNECTOR_PACKAGES):
        return cls
    return m.group("rest")


def is_framework(name: str) -> bool:
    return name.startswith(FRAMEWORK_PACKAGES)


def frame_class(frame: str) -> str | None:
    m = _FRAME.match(frame)
    return m.group("name") if m else None


def user_frames(event: Event) -> list[str]:
    """The stack frames of the job's own classes (outside the JDK, Flink and the libraries it runs)."""
    out = []
    for frame in event.frames:
        cls = frame_class(frame)
        if cls and "." in cls and not is_framework(cls):
            out.append(frame.strip())
    return out


def deepest_cause(event: Event) -> ChainLink | None:
    """The deepest ``Caused by`` (Java prints the origin last), skipping the restart strategy's verdict."""
    causes = [c for c in event.chain if c.kind != "suppressed" and not c.message.startswith("Recovery is suppressed")]
    return causes[-1] if causes else None


def task_name(event: Event) -> str | None:
    m = _TASK.search(event.message) or _TASK_IN_TEXT.search(event.text)
    if m:
        return m.group("task").strip()
    coordinator = COORDINATOR_FAILOVER.search(event.message)
    if coordinator:
        return f"the split enumerator of {coordinator['source'] or coordinator['coordinator']} (on the JobManager)"
    if event.thread and re.search(r"\(\d+/\d+\)", event.thread):
        return re.sub(r"#\d+$", "", event.thread)
    return None


def component(link: ChainLink | None, frames: list[str], thrown_at: str | None = None) -> tuple[str | None, str]:
    """Which component threw ``link``: its package first, then (for the JDK's generic exceptions) the frames.
    ``thrown_at`` is the frame that threw it, when the log keeps it (a Flink exception thrown by a connector's
    class is the connector's)."""
    if link is None:
        return None, "no exception is logged with the failure"
    cls, msg = unshaded(link.cls), link.message or ""
    simple = cls.rsplit(".", 1)[-1]
    if JVM_CLASSES.match(cls) or (("." not in cls) and JVM_CLASSES.match("java.lang." + simple)):
        if CLASS_LOADING.search(simple):
            return "the JVM", (f"{simple} is raised by the JVM's class loading: a class the job needs is missing from "
                               f"its jar or clashes with a different version in Flink's lib/")
        return "the JVM", f"{simple} is raised by the JVM when one of its resources runs out"
    if cls.startswith(CONNECTOR_PACKAGES):
        return "a connector", f"{cls} belongs to a connector or the client library it runs"
    if cls.startswith(ENVIRONMENT_PACKAGES) or (cls.startswith(("java.io.", "java.util.concurrent.Timeout"))
                                               and ENVIRONMENT_MESSAGE.search(msg)):
        return "the environment", f"{simple} ({msg[:80] or 'no message'}) comes from the network, storage or file system"
    where = re.sub(r"\s+[~\[].*$", "", thrown_at.strip().removeprefix("at ")) if thrown_at else ""
    if cls.startswith("org.apache.flink.") and where.startswith(CONNECTOR_PACKAGES):
        return "a connector", f"{simple} was thrown by a connector ({where})"
    if cls.startswith("org.apache.flink."):
        return "Flink", f"{cls} is raised by Flink itself"
    if "." in cls and not is_framework(cls):
        return "user code", f"{cls} is a class of the job's own code"
    if frames:
        first = re.sub(r"\s+[~\[].*$", "", frames[0].strip().removeprefix("at "))
        return "user code", f"{simple} is a generic exception, thrown from the job's own code ({first})"
    if cls.startswith(("java.lang.", "java.util.")) or "." not in cls:
        return None, (f"{simple} is a generic exception that user code, Flink and connectors all throw; the log "
                      f"keeps no frame that says which")
    if ENVIRONMENT_MESSAGE.search(msg):
        return "the environment", f"the message ({msg[:80]}) points at the network, storage or file system"
    return None, f"{cls} does not say which component threw it"


def read_fault(event: Event) -> Fault:
    link = deepest_cause(event)
    frames = user_frames(event)
    # The record's first frame is where its top-level exception was thrown; deeper causes' frames follow it.
    top = event.chain[0] if event.chain else None
    comp, why = component(link, frames, event.frames[0] if event.frames and link is top else None)
    return Fault(event, link, comp, why, task_name(event), frames)
