"""Records or functions Flink cannot serialize: generic types disabled, Kryo on Java 17 without ``--add-opens``, a
type that is not a POJO going through Kryo, a function holding a field that is not ``Serializable``, an Avro record
with a null in a non-nullable field.

Causes told apart from Flink's own message and what the processes logged (:mod:`~flink_runbooks.evidence.serialization`):
- ``generic-types-disabled``: "Generic types have been disabled ... type X is treated as a generic type" (with
  ``pipeline.generic-types: false`` and, when the client log is there, the TypeExtractor INFO saying why X is no POJO).
- ``missing-add-opens``: ``InaccessibleObjectException`` "module java.base does not "opens java.util"" on Java 17,
  and the failing process's logged JVM options hold no ``--add-opens`` for that package.
- ``not-a-pojo``: a Kryo failure (buffer underflow, unregistered class) for a type Flink logged as "cannot be used
  as a POJO type ... must be processed as GenericType".
- ``non-serializable-closure``: "... is not serializable. The object probably contains or references non
  serializable fields" (the client's ClosureCleaner), the field's class from ``NotSerializableException``.
- ``avro-null-field``: Avro's "null of <type> in field <f>": a record with null where the schema has no null.
"""
from __future__ import annotations

from flink_runbooks.detectors.base import Detector, version_key
from flink_runbooks.evidence.episodes import is_excerpt
from flink_runbooks.evidence.serialization import KIND_ORDER, failures, generic_types, jvm_views, opens_package
from flink_runbooks.evidence.serialization import SerializationFailure as Report
from flink_runbooks.model import Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording

# The module options Flink >= 1.18 ships in its default configuration for Java 17 (conf/config.yaml of 1.20).
JAVA17_OPENS = (
    "--add-exports=java.base/sun.net.util=ALL-UNNAMED --add-exports=java.rmi/sun.rmi.registry=ALL-UNNAMED "
    "--add-exports=jdk.compiler/com.sun.tools.javac.api=ALL-UNNAMED "
    "--add-exports=jdk.compiler/com.sun.tools.javac.file=ALL-UNNAMED "
    "--add-exports=jdk.compiler/com.sun.tools.javac.parser=ALL-UNNAMED "
    "--add-exports=jdk.compiler/com.sun.tools.javac.tree=ALL-UNNAMED "
    "--add-exports=jdk.compiler/com.sun.tools.javac.util=ALL-UNNAMED "
    "--add-exports=java.security.jgss/sun.security.krb5=ALL-UNNAMED "
    "--add-opens=java.base/java.lang=ALL-UNNAMED --add-opens=java.base/java.net=ALL-UNNAMED "
    "--add-opens=java.base/java.io=ALL-UNNAMED --add-opens=java.base/java.nio=ALL-UNNAMED "
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED --add-opens=java.base/java.lang.reflect=ALL-UNNAMED "
    "--add-opens=java.base/java.text=ALL-UNNAMED --add-opens=java.base/java.time=ALL-UNNAMED "
    "--add-opens=java.base/java.util=ALL-UNNAMED --add-opens=java.base/java.util.concurrent=ALL-UNNAMED "
    "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED "
    "--add-opens=java.base/java.util.concurrent.locks=ALL-UNNAMED")
# Flink supports Java 17 from 1.18 (FLINK-15736); older releases run on Java 8 and 11 only.
JAVA17_SINCE = (1, 18)
# The JVM options of every process (env.java.opts before 1.17) and each process's own, which Flink adds after them.
ALL_PROCESSES_KEY = "env.java.opts.all"
ROLE_KEYS = {"taskmanager": "env.java.opts.taskmanager", "jobmanager": "env.java.opts.jobmanager",
             "client": "env.java.opts.client"}

POJO_SNIPPET = """\
// A POJO Flink serializes itself (no Kryo): public class, public no-argument constructor, every field public
// and non-final or reachable through a getter and setter, field types Flink knows.
public class {name} {{
    public long id;
    public String currency;
    public List<String> tags;   // or a Flink-known type; declare it with Types.LIST(Types.STRING) if needed
    public {name}() {{}}
}}
// Or declare the type explicitly where it is produced:
//   .returns(Types.POJO({name}.class))   /   @TypeInfo({name}TypeInfoFactory.class)"""

TRANSIENT_SNIPPET = """\
public class {function} extends RichMapFunction<...> {{
    private transient {field} client;           // not serialized with the function

    @Override
    public void open(OpenContext ctx) {{          // open(Configuration) before Flink 1.19
        client = new {field}(...);              // created on the TaskManager, once per parallel instance
    }}
}}"""

AVRO_SNIPPET = """\
// Avro schema: let the field be null (a union with "null", default null)
{{"name": "{field}", "type": ["null", "string"], "default": null}}
// or fill the field before the record reaches the Avro serializer"""


class SerializationFailure(Detector):
    slug = "serialization-failure"
    title = "Records or functions cannot be serialized"
    category = "job-code"
    meaning = ("Flink could not serialize a record type or a user function: the job fails when it is built in "
               "the client (generic types disabled, a function that is not Serializable) or when records cross the "
               "network or are copied (Kryo, Avro).")
    versions = "1.9 – 2.x (Java 17 module checks with Flink >= 1.18 / Java 17; Kryo 5 since 2.0)"
    exception_classes = ("java.lang.UnsupportedOperationException", "java.lang.reflect.InaccessibleObjectException",
                         "java.lang.IllegalAccessError",
                         "com.esotericsoftware.kryo.KryoException",
                         "org.apache.flink.api.common.InvalidProgramException", "java.io.NotSerializableException",
                         "org.apache.avro.AvroRuntimeException")
    config_keys = (
        "pipeline.generic-types",
        "env.java.opts.all",
        "env.java.opts.taskmanager",
        "env.java.opts.client",
    )
    signatures = (
        r"Generic types have been disabled in the ExecutionConfig and type .* is treated as a generic type",
        r"accessible: module [\w.]+ does not \"opens [\w.]+\" to unnamed module",
        r"because module [\w.]+ does not export [\w.]+ to unnamed module",
        r"KryoException|Encountered unregistered class ID|Class is not registered: ",
        r"is not serializable\. The object probably contains or references non serializable fields",
        r"java\.io\.NotSerializableException: ",
        r"null (?:value )?(?:of|for) [\w.\[\]]+ in field \w+",
        r"cannot be used as a POJO type|must be processed as GenericType",
        r"JVM: .* - \d+(?:\.\d+)*/|JVM Options:|--add-opens[= ]",
    )
    wordings = (
        Wording("serialization-failure",
                r"Generic types have been disabled in the ExecutionConfig and type .* is treated as a generic type",
                "1.9 – 2.x", "org.apache.flink.api.java.typeutils.GenericTypeInfo",
                "java.lang.UnsupportedOperationException: Generic types have been disabled in the ExecutionConfig and "
                "type com.acme.orders.OrdersJob$Order is treated as a generic type."),
        Wording("serialization-failure",
                r"is not serializable\. The object probably contains or references non serializable fields",
                "1.9 – 2.x", "org.apache.flink.api.java.ClosureCleaner",
                "org.apache.flink.api.common.InvalidProgramException: com.acme.orders.OrdersJob$Price@5e5792a0 is not "
                "serializable. The object probably contains or references non serializable fields."),
    )
    root_causes = (
        RootCause("generic-types-disabled", "The job forbids generic types (pipeline.generic-types: false) and a "
                  "type it uses is not a POJO, so Flink would need Kryo for it.",
                  "'Generic types have been disabled ... type X is treated as a generic type'.",
                  patches=("code:make the type a POJO or declare its type information",
                           "flink:pipeline.generic-types")),
        RootCause("missing-add-opens", "Java 17 forbids reflection into the JDK's packages unless the JVM opens "
                  "them; the process ran without Flink's --add-opens list (env.java.opts.all).",
                  "InaccessibleObjectException 'does not \"opens <package>\" to unnamed module', and the process's "
                  "logged JVM options without --add-opens for that package.",
                  patches=("flink:env.java.opts.all", "flink:env.java.opts", "flink:env.java.opts.taskmanager",
                           "flink:env.java.opts.jobmanager", "flink:env.java.opts.client",
                           "ops:run on Java 11 or upgrade to Flink 1.18+"),
                  versions="Java 17+; the list ships with Flink >= 1.18 (before 1.18 Java 17 is not supported)",
                  would_change="The JVM options logged by the failing process holding --add-opens for the package "
                               "(then a library's own reflection: undetermined)."),
        RootCause("not-a-pojo", "A type that is not a valid POJO goes through Kryo, and Kryo fails on it (fields "
                  "Kryo cannot read back, unregistered classes, buffer underflow).",
                  "A Kryo failure and Flink's INFO 'Class X cannot be used as a POJO type ... must be processed as "
                  "GenericType' for the job's type.",
                  patches=("code:make the type a POJO or declare its type information",)),
        RootCause("non-serializable-closure", "A function of the job holds a field whose class is not "
                  "Serializable; Flink serializes functions into the job graph, so the client refuses the job.",
                  "'... is not serializable. The object probably contains or references non serializable fields' "
                  "(and NotSerializableException naming the field's class).",
                  patches=("code:make the field transient and create it in open()",)),
        RootCause("avro-null-field", "An Avro record has null in a field whose schema does not allow null.",
                  "Avro's 'null of <type> in field <name>'.",
                  patches=("code:make the Avro field nullable or fill it",)),
        RootCause("undetermined", "A serializer failed, but the logs do not show which type or why.",
                  "A Kryo or Avro exception without Flink's note of the generic type.",
                  patches=("ops:collect the client log",),
                  next_evidence="the client's log of the job submission (TypeExtractor INFO lines naming the types "
                                "processed as GenericType), the record type's class and the JVM's Java version."),
    )

    templates = {
        "where client": "The client could not build or submit the job ({file}).",
        "where taskmanager": "A task failed on the TaskManager ({file}).",
        "where jobmanager": "The JobManager failed ({file}).",
        "where unknown": "The job failed ({file}).",
        "generic-types-disabled": "{where} Generic types are disabled (pipeline.generic-types: false) and {type} is "
                                  "not a POJO, so Flink would need Kryo for it.{logged_why}",
        "logged why": " Flink logged why: {why}",
        "missing-add-opens": "{where} {unsupported}Java {java} refused access to {package} ({failure}): the process "
                             "ran without Flink's --add-opens/--add-exports list, which Flink >= 1.18 ships in "
                             "env.java.opts.all.",
        "java 17 unsupported": "Flink {version} does not support Java {java} (Java 17 is supported from Flink 1.18; "
                               "older releases run on Java 8 and 11): run the cluster on Java 11, or upgrade to Flink "
                               "1.18 or later. ",
        "non-serializable-closure": "{where} A function of the job holds a field of class {field_class}, which is not "
                                    "Serializable; Flink serializes every function into the job graph.",
        "avro-null-field": "{where} An Avro record has null in field '{field}', which its schema does not allow.",
        "not-a-pojo": "{where} Kryo failed ({failure}) on records of a type Flink logged as not a POJO ({types}): "
                      "Kryo serializes it field by field and cannot read it back.",
        "undetermined": "{where} A serializer failed ({failure}), but the logs do not show which type or why.",
        "message note": "Flink's message: {detail}",
        "why note": "Flink's own note why the type is not a POJO",
        "jvm options note": "the JVM options this process logged at start-up{not_opened}",
        "not opened": ": no --add-opens/--add-exports for {package}",
        "kryo note": "Flink's note: this type goes through Kryo",
        "pojo reason": "{type} is not a POJO (Flink's INFO says why): a POJO gets Flink's own serializer, which is "
                       "faster than Kryo and supports schema evolution.",
        "generic types reason": "Only if Kryo for this type is acceptable (slower, no state schema evolution): "
                                "generic types were disabled precisely to catch such types.",
        "add-opens reason": "{workaround}The --add-opens/--add-exports list of Flink's default configuration: it "
                            "opens {package} (and the other JDK packages Kryo and Flink reflect into) to {scope}. "
                            "{kept}Restart the cluster (the client reads it too) after changing it.",
        "every jvm": "every Flink JVM",
        "role jvm": "the {role} JVMs (the options of {key})",
        "kept options": "It is appended to the options already set there ({current}), which stay. ",
        "unsupported workaround": "An unsupported workaround on Flink {version}, which is not built or tested for "
                                  "Java 17; prefer Java 11 or Flink 1.18+. ",
        "java 11 or upgrade": "Flink {version} does not support Java {java}: run its JVMs on Java 11 (set JAVA_HOME or "
                              "env.java.home, or use a Java 11 image), or upgrade the job and cluster to Flink 1.18 "
                              "or later, the first release supporting Java 17.",
        "transient reason": "{field_class} cannot be serialized with the function: create it on the TaskManager in "
                            "open() and mark the field transient.",
        "avro reason": "The schema of field '{field}' has no null branch.",
        "collect the client log": "The client log of the submission names every type Flink processes as GenericType "
                                  "(TypeExtractor, INFO) and the Java version.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        found = failures(incident)
        if not found:
            return []
        first = min(found, key=lambda f: (KIND_ORDER.index(f.kind), incident.events.index(f.event)))
        same = [f for f in found if f.kind == first.kind]
        generics = generic_types(incident)
        views = jvm_views(incident)
        cause, extra, notes, details = self._cause(incident, first, generics, views)
        evidence = [first.event] + [ev for ev in extra if ev is not first.event]
        notes = {0: self.say("message note", detail=first.detail[:160]), **notes}
        details = {"failure": first.detail[:300], "reports": len(same), **details}
        confidence = {"undetermined": 0.45}.get(cause, 0.9)
        if is_excerpt(incident):
            confidence = min(confidence, 0.7)
        file = first.event.file.rsplit("/", 1)[-1]
        where = self.say(f"where {_role(first)}", file=file)
        if cause == "generic-types-disabled":
            logged_why = (self.say("logged why", why=details["why_not_a_pojo"].split(" - ", 1)[-1][:200])
                          if "why_not_a_pojo" in details else "")
            summary = self.say(cause, where=where, type=first.subject, logged_why=logged_why)
        elif cause == "missing-add-opens":
            java = details["java"] if details.get("java") != "unknown" else "17+"
            unsupported = (self.say("java 17 unsupported", version=incident.flink_version, java=java)
                           if _java17_unsupported(incident) else "")
            summary = self.say(cause, where=where, unsupported=unsupported, java=java, package=details["package"],
                               failure=first.detail[:160])
        elif cause == "non-serializable-closure":
            summary = self.say(cause, where=where, field_class=first.subject)
        elif cause == "avro-null-field":
            summary = self.say(cause, where=where, field=first.subject)
        elif cause == "not-a-pojo":
            summary = self.say(cause, where=where, failure=first.detail[:160],
                               types=", ".join(details["generic_types"]))
        else:
            summary = self.say("undetermined", where=where, failure=first.detail[:200])
        return [self.finding(cause, summary, evidence, confidence=confidence, notes=notes, details=details,
                             patches=self._patches(incident, cause, first, details))]

    def _cause(self, incident: Incident, first: Report, generics, views):
        notes: dict[int, str] = {}
        extra = []
        details: dict = {}
        if first.kind == "generic-disabled":
            details["type"] = first.subject
            why = next((g for g in generics if g.type == first.subject), None)
            if why:
                extra.append(why.event)
                notes[len(extra)] = self.say("why note")
                details["why_not_a_pojo"] = why.event.message[:300]
            setting = incident.config.lookup("pipeline.generic-types")
            if setting:
                details["pipeline.generic-types"] = f"{setting.value} ({setting.source})"
            return "generic-types-disabled", extra, notes, details
        if first.kind == "inaccessible":
            package = first.subject or "java.util"
            failing = next((v for v in views if v.file == first.event.file), None)
            details["package"] = package
            details["java"] = next((v.java_major for v in views if v.java_major), "unknown")
            if failing and failing.options_logged:
                details["failing_process_opens_it"] = opens_package(failing, package)
                if failing.event is not None:
                    extra.append(failing.event)
                    not_opened = "" if details["failing_process_opens_it"] else self.say("not opened", package=package)
                    notes[len(extra)] = self.say("jvm options note", not_opened=not_opened)
                if details["failing_process_opens_it"]:
                    return "undetermined", extra, notes, details
            return "missing-add-opens", extra, notes, details
        if first.kind == "not-serializable":
            details["field_class"] = first.subject
            return "non-serializable-closure", extra, notes, details
        if first.kind == "avro-null":
            details["field"] = first.subject
            return "avro-null-field", extra, notes, details
        if first.kind == "kryo" and generics:
            extra.append(generics[0].event)
            notes[len(extra)] = self.say("kryo note")
            details["generic_types"] = sorted({g.type for g in generics})[:5]
            return "not-a-pojo", extra, notes, details
        return "undetermined", extra, notes, details

    def _add_opens_patches(self, incident: Incident, role: str, details: dict):
        """The --add-opens list appended to the JVM options the incident already sets: those of every process when
        it sets them, else the failing process's own, else a new env.java.opts.all (env.java.opts before 1.17)."""
        cfg = incident.config
        key = ALL_PROCESSES_KEY
        if cfg.lookup(ALL_PROCESSES_KEY) is None and role in ROLE_KEYS and cfg.lookup(ROLE_KEYS[role]) is not None:
            key = ROLE_KEYS[role]
        current = cfg.lookup(key)
        proposed = _appended(current.value if current else "", JAVA17_OPENS)
        spelled = version_key(incident, key)
        scope = (self.say("every jvm") if key == ALL_PROCESSES_KEY
                 else self.say("role jvm", role=_ROLE_NAMES[role], key=spelled))
        kept = self.say("kept options", current=f"{spelled}: {current.value}") if current and current.value else ""
        out = []
        workaround = ""
        if _java17_unsupported(incident):
            java = details["java"] if details.get("java") != "unknown" else "17"
            out.append(self.ops_patch("run on Java 11 or upgrade to Flink 1.18+",
                                      self.say("java 11 or upgrade", version=incident.flink_version, java=java)))
            workaround = self.say("unsupported workaround", version=incident.flink_version)
        out.append(self.flink_patch(incident, key, proposed,
                                    self.say("add-opens reason", workaround=workaround, scope=scope, kept=kept,
                                             package=details.get("package", "java.util"))))
        return out

    def _patches(self, incident: Incident, cause: str, first: Report, details: dict):
        if cause in ("generic-types-disabled", "not-a-pojo"):
            name = (first.subject or (details.get("generic_types") or ["MyType"])[0]).rsplit(".", 1)[-1].split("$")[-1]
            out = [self.code_patch("make the type a POJO or declare its type information",
                                   POJO_SNIPPET.format(name=name),
                                   self.say("pojo reason", type=first.subject or name))]
            if cause == "generic-types-disabled":
                out.append(self.flink_patch(incident, "pipeline.generic-types", "true",
                                            self.say("generic types reason")))
            return out
        if cause == "missing-add-opens":
            return self._add_opens_patches(incident, _role(first), details)
        if cause == "non-serializable-closure":
            field = (first.subject or "Client").rsplit(".", 1)[-1].split("$")[-1]
            return [self.code_patch("make the field transient and create it in open()",
                                    TRANSIENT_SNIPPET.format(function="MyFunction", field=field),
                                    self.say("transient reason", field_class=first.subject))]
        if cause == "avro-null-field":
            return [self.code_patch("make the Avro field nullable or fill it",
                                    AVRO_SNIPPET.format(field=first.subject),
                                    self.say("avro reason", field=first.subject))]
        return [self.ops_patch("collect the client log", self.say("collect the client log"),
                               snippet="grep -n -E 'GenericType|JVM: ' log/flink-*-client-*.log")]


_ROLE_NAMES = {"taskmanager": "TaskManager", "jobmanager": "JobManager", "client": "client"}


def _role(report: Report) -> str:
    """The process that failed: client, taskmanager, jobmanager or unknown (from the file name when not logged)."""
    ev = report.event
    file = ev.file.rsplit("/", 1)[-1]
    if file.endswith(".out") or "client" in file or ev.role == "client":
        return "client"
    if "taskexecutor" in file or ev.role == "taskmanager":
        return "taskmanager"
    if "standalonesession" in file or "jobmanager" in file or ev.role == "jobmanager":
        return "jobmanager"
    return "unknown"


def _java17_unsupported(incident: Incident) -> bool:
    v = incident.version_tuple
    return v is not None and tuple(v[:2]) < JAVA17_SINCE


def _appended(current: str, options: str) -> str:
    """``current`` JVM options followed by those of ``options`` they do not hold yet."""
    have = set(current.split())
    missing = [o for o in options.split() if o not in have]
    return " ".join(p for p in (current.strip(), *missing) if p)
