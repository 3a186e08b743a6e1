"""Serialization of records and functions: which failure Flink reported, the types it treated as generic (Kryo), the
Java version and module options of each process.

Flink decides a type's serializer when the job is built, in the client: a class that is not a valid POJO is logged
at INFO by ``TypeExtractor`` ("... must be processed as GenericType") and goes to Kryo; with
``pipeline.generic-types: false`` building the job fails instead. Kryo reflects into the fields of JDK classes, which
Java 17 forbids unless the JVM runs with ``--add-opens`` (Flink >= 1.18 ships that list in ``env.java.opts.all``).
Functions are Java-serialized into the job graph: a field that is not ``Serializable`` fails the client's
``ClosureCleaner``.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from flink_runbooks.model import Event, Incident

GENERIC_DISABLED = re.compile(
    r"Generic types have been disabled in the ExecutionConfig and type (?P<type>[\w.$\[\]<>, ]+?) is treated as a "
    r"generic type")
NOT_POJO = re.compile(
    r"(?:Class|class) (?:class )?(?P<type>[\w.$]+) (?:cannot be used as a POJO type because not all fields are valid "
    r"POJO fields|is missing a default constructor so it cannot be used as a POJO type|is not public so it cannot be "
    r"used as a POJO type|contains custom serialization methods we do not call)")
FIELD_GENERIC = re.compile(r"Field (?P<type>[\w.$]+)#(?P<field>\w+) will be processed as GenericType")
INACCESSIBLE = re.compile(
    r"Unable to make (?P<member>.+?) accessible: module (?P<module>[\w.]+) does not \"opens (?P<package>[\w.]+)\" to "
    r"unnamed module")
NOT_EXPORTED = re.compile(
    r"cannot access class (?P<member>[\w.$]+) \(in module (?P<module>[\w.]+)\) because module [\w.]+ does not export "
    r"(?P<package>[\w.]+) to unnamed module")
KRYO = re.compile(r"com\.esotericsoftware\.kryo\.(?:KryoException|\w+Exception)|KryoException|"
                  r"Encountered unregistered class ID: \d+|Class is not registered: [\w.$]+|Buffer underflow")
AVRO_NULL = re.compile(r"(?:NullPointerException: )?null (?:value )?(?:of|for) (?P<type>[\w.\[\]]+) in field "
                       r"(?P<field>[\w.]+)(?: of (?P<record>[\w.$]+))?")
AVRO = re.compile(r"org\.apache\.avro\.(?:AvroRuntimeException|AvroTypeException|UnresolvedUnionException|"
                  r"SchemaParseException)")
NOT_SERIALIZABLE = re.compile(
    r"(?P<object>[\w.$@]+) is not serializable\. The object probably contains or references non serializable fields"
    r"|The implementation of the (?P<impl>[\w.$]+) is not serializable")
NOT_SERIALIZABLE_CAUSE = re.compile(r"java\.io\.NotSerializableException: (?P<cls>[\w.$]+)")
JVM_LINE = re.compile(r"JVM: .* - (?P<major>\d+)(?:\.\d+)*/(?P<full>[\w.+-]+)")
JVM_OPTIONS = re.compile(r"JVM Options:")
ADD_OPENS = re.compile(r"--add-(?:opens|exports)[= ](?P<spec>[\w./]+=[\w-]+)")

KIND_ORDER = ("generic-disabled", "inaccessible", "not-serializable", "avro-null", "kryo", "avro")


@dataclass
class SerializationFailure:
    event: Event
    kind: str  # one of KIND_ORDER
    subject: str | None  # the type, field, package or function the message names
    detail: str  # the matched message


def failures(incident: Incident) -> list[SerializationFailure]:
    """Every record reporting a serialization failure, first ones first; the kind told by Flink's message."""
    out: list[SerializationFailure] = []
    for ev in incident.events:
        if not ev.chain and ev.level not in ("ERROR", None):
            continue
        text = "\n".join([ev.message] + [f"{c.cls}: {c.message}" for c in ev.chain])
        found = _classify(text)
        if found:
            out.append(SerializationFailure(ev, *found))
    return out


def _classify(text: str) -> tuple[str, str | None, str] | None:
    if m := GENERIC_DISABLED.search(text):
        return "generic-disabled", m["type"], m.group(0)
    if m := INACCESSIBLE.search(text) or NOT_EXPORTED.search(text):
        return "inaccessible", m["package"], m.group(0)
    if m := NOT_SERIALIZABLE.search(text):
        cause = NOT_SERIALIZABLE_CAUSE.search(text)
        subject = (cause["cls"] if cause else None) or m["object"] or m["impl"]
        subject = re.sub(r"@[0-9a-f]+$", "", subject or "") or None  # Object.toString's identity hash
        return "not-serializable", subject, m.group(0)
    if (m := AVRO_NULL.search(text)) and ("avro" in text.lower() or "in field" in text):
        return "avro-null", m["field"], m.group(0)
    if m := KRYO.search(text):
        return "kryo", None, m.group(0)
    if m := AVRO.search(text):
        return "avro", None, m.group(0)
    return None


@dataclass
class GenericType:
    event: Event
    type: str
    field: str | None


def generic_types(incident: Incident) -> list[GenericType]:
    """The classes Flink logged as not valid POJOs (processed by Kryo), in order."""
    out: list[GenericType] = []
    for ev in incident.events:
        if m := NOT_POJO.search(ev.message):
            out.append(GenericType(ev, m["type"], None))
        elif m := FIELD_GENERIC.search(ev.message):
            out.append(GenericType(ev, m["type"], m["field"]))
    return out


@dataclass
class JvmView:
    """What one process logged about its JVM at start-up."""

    file: str
    java_major: int | None
    options_logged: bool
    opens: list[str]  # the --add-opens specs it ran with
    event: Event | None


def jvm_views(incident: Incident) -> list[JvmView]:
    views: dict[str, JvmView] = {}
    for ev in incident.events:
        text = " ".join([ev.message] + ev.body)
        if m := JVM_LINE.search(text):
            views.setdefault(ev.file, JvmView(ev.file, None, False, [], ev)).java_major = int(m["major"])
        if JVM_OPTIONS.search(text):
            views.setdefault(ev.file, JvmView(ev.file, None, False, [], ev)).options_logged = True
        # Only the JVM's own option lines (one per option under "JVM Options:"), not a configuration value that
        # merely holds the list (env.java.opts.client is not the TaskManager's).
        for line in [ev.message] + ev.body:
            m = ADD_OPENS.match(line.strip())
            if m:
                views.setdefault(ev.file, JvmView(ev.file, None, True, [], ev)).opens.append(m["spec"])
    return list(views.values())


def opens_package(view: JvmView, package: str) -> bool:
    return any(spec.split("=")[0].endswith("/" + package) for spec in view.opens)
