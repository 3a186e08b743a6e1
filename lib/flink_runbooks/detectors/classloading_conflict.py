"""Class-loading conflicts: a class the job needs is missing, present twice, of another version, or its loader is gone.

Flink loads the job jar with its own class loader (child-first by default: the job's classes win over lib/'s,
except for the ``classloader.parent-first-patterns``), below the loader of Flink's lib/ (``'app'``). Causes told
apart, each from the exception's own text and the classpath Flink logged:
- ``duplicate-class-lib-and-job-jar``: ``X cannot be cast to X``, one X from lib/ (``'app'``), the other from the job
  jar (``ChildFirstClassLoader``/``ParentFirstClassLoader``): the same class sits in both places.
- ``dependency-missing-from-job-jar``: ``ClassNotFoundException``/``NoClassDefFoundError``/``Cannot load user class``
  of a class outside Flink: the job jar does not package a library it uses.
- ``library-version-clash``: ``NoSuchMethodError``/``NoSuchFieldError``/``AbstractMethodError`` of a library class
  (Guava, Jackson, Kafka, Avro...): a different version of that library won, from lib/ or Hadoop's classpath.
- ``flink-class-missing``: the missing class or method is Flink's own: the job or a connector jar was built against
  another Flink release, or (only Flink's frames on the stack) a Flink module is not installed (the SQL client
  without the SQL gateway jar, the Table planner missing from lib/).
- ``classloader-leak``: ``Trying to access closed classloader``, or ``X cannot be cast to X`` between two job class
  loaders: something outlived the job that loaded it (a thread, a static cache). A Metaspace OOM with it is the
  ``oom-metaspace`` runbook's, which this runbook leaves alone.
Hadoop's own classes missing are ``filesystem-scheme-unsupported``'s; ``Could not initialize class`` is a failed
static initializer, not a missing class.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from flink_runbooks.detectors.base import Detector, signature
from flink_runbooks.evidence import dependencies
from flink_runbooks.evidence.episodes import failure_events, is_excerpt
from flink_runbooks.evidence.memory import oom
from flink_runbooks.evidence.faults import user_frames
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.lifecycle import GLOBAL_FAILURE, JOB_FAILOVER, JOB_FINISHED, TASK_FAILED
from flink_runbooks.vocabulary.wordings import Wording

SLUG = "classloading-conflict"
CLOSED_LOADER = re.compile(r"Trying to access closed classloader")
# Java 9+: "class a.X cannot be cast to class a.X (a.X is in unnamed module of loader 'app'; a.X is in unnamed
# module of loader org.apache.flink.util.ChildFirstClassLoader @5fc2f6df)"; Java 8: "a.X cannot be cast to a.X".
CAST_MODERN = re.compile(
    r"class (?P<a>[\w$.]+) cannot be cast to class (?P<b>[\w$.]+) \((?P=a) is in [^;]*?of loader "
    r"(?P<la>'[^']+'|[\w$.]+(?: @[0-9a-f]+)?)[^;]*; (?P=b) is in [^)]*?of loader (?P<lb>'[^']+'|[\w$.]+(?: @[0-9a-f]+)?)")
CAST_JAVA8 = re.compile(r"(?:^|: )(?P<a>[\w$.]+) cannot be cast to (?P<b>[\w$.]+)\s*$")
MISSING = re.compile(r"^java\.lang\.(?:NoClassDefFoundError|ClassNotFoundException)$")
CANNOT_LOAD = re.compile(r"Cannot load user class: (?P<cls>[\w$.]+)")
NOT_INITIALISED = re.compile(r"Could not initialize class")
CHANGED = re.compile(r"^java\.lang\.(?:NoSuchMethodError|NoSuchFieldError|AbstractMethodError|IncompatibleClassChangeError)$")
# NoSuchMethodError: Java 11+ "'java.lang.String com.google.common.base.Strings.lenientFormat(java.lang.String, ...)'",
# Java 8 "com.google.common.base.Strings.lenientFormat(Ljava/lang/String;[Ljava/lang/Object;)Ljava/lang/String;",
# NoSuchFieldError: just the field name (no owner).
MEMBER_MODERN = re.compile(r"'(?:[\w$.\[\]<>,? ]+ )?(?P<owner>[\w$.]+)\.(?P<member>[\w$<>]+)(?:\(|')")
MEMBER_JAVA8 = re.compile(r"^(?P<owner>[\w$/.]+)\.(?P<member>[\w$<>]+)\(")
LOADER_CONSTRAINT = re.compile(r"loader constraint violation")

# Libraries that Flink's lib/, Hadoop's classpath or the usual connectors also bring: a method missing from one of
# them is a version clash, not a missing jar.
SHARED_LIBRARIES = {
    "com.google.common.": "Guava", "com.google.protobuf.": "protobuf", "com.fasterxml.jackson.": "Jackson",
    "org.apache.kafka.": "Kafka clients", "org.apache.avro.": "Avro", "org.apache.commons.": "Apache Commons",
    "io.netty.": "Netty", "com.esotericsoftware.kryo.": "Kryo", "org.apache.parquet.": "Parquet",
    "org.apache.hadoop.": "Hadoop", "scala.": "Scala", "org.slf4j.": "SLF4J", "org.apache.logging.log4j.": "Log4j",
    "org.apache.calcite.": "Calcite", "org.codehaus.janino.": "Janino", "org.xerial.snappy.": "snappy-java",
    "org.lz4.": "lz4-java", "com.github.luben.zstd.": "zstd-jni", "org.apache.httpcomponents.": "HttpClient",
    "org.apache.http.": "HttpClient", "okhttp3.": "OkHttp", "org.yaml.snakeyaml.": "SnakeYAML", "org.json4s.": "json4s",
}
# Jar names that carry those libraries on a classpath (lib/ or HADOOP_CLASSPATH).
LIBRARY_JARS = {
    "Guava": r"guava|hadoop-client|hadoop-common|hive-exec", "Jackson": r"jackson", "Kafka clients": r"kafka",
    "Avro": r"avro", "Apache Commons": r"commons-", "Netty": r"netty", "Kryo": r"kryo", "Parquet": r"parquet",
    "Hadoop": r"hadoop", "protobuf": r"protobuf", "Scala": r"scala", "SnakeYAML": r"snakeyaml",
}
# Flink's default parent-first patterns (classloader.parent-first-patterns.default): these always come from lib/.
PARENT_FIRST_DEFAULT = ("java.", "scala.", "org.apache.flink.", "com.esotericsoftware.kryo", "org.apache.hadoop.",
                        "javax.annotation.", "org.xml", "javax.xml", "org.apache.xerces", "org.w3c", "org.rocksdb.",
                        "org.slf4j", "org.apache.log4j", "org.apache.logging", "org.apache.commons.logging",
                        "ch.qos.logback")

_LIST_JARS = "ops:compare the job jar with lib/"
SHADE = "code:relocate the library in the job jar"

SHADE_SNIPPET = """\
<!-- pom.xml, maven-shade-plugin: give the job its own copy of {lib} under a private package -->
<relocation>
  <pattern>{package}</pattern>
  <shadedPattern>com.mycompany.shaded.{package}</shadedPattern>
</relocation>
// Gradle (com.gradleup.shadow): shadowJar {{ relocate '{package}', 'com.mycompany.shaded.{package}' }}"""


@dataclass
class ClassProblem:
    """One class-loading failure read from a record: what kind, which class, which loaders."""

    kind: str  # cast | missing | changed | cannot-load | closed
    event: Event
    text: str  # the exception line that says it
    cls: str | None = None  # the class (or the owner of the missing member)
    member: str | None = None
    loaders: tuple[str, str] | None = None

    @property
    def package(self) -> str | None:
        if not self.cls or "." not in self.cls:
            return None
        parts = self.cls.split(".")
        return ".".join(parts[: min(len(parts) - 1, 3)])


class ClassloadingConflict(Detector):
    slug = SLUG
    title = "Class-loading conflict: a class missing, duplicated or of the wrong version"
    category = "dependencies"
    meaning = ("A class the job needs could not be loaded, was loaded twice by different class loaders (X cannot be "
               "cast to X), came from another version of its library (NoSuchMethodError), or was asked of a class "
               "loader that had already been closed.")
    versions = ("1.10 – 2.x (Flink's own wordings checked in 1.10.3, 1.12.5, 1.17.2, 1.20.3 and 2.3.0; 'Trying to "
                "access closed classloader' not in 1.10.3; the JVM's 'X cannot be cast to X' names both loaders on "
                "Java 11 and later)")
    exception_classes = ("java.lang.ClassCastException", "java.lang.ClassNotFoundException",
                         "java.lang.NoClassDefFoundError", "java.lang.NoSuchMethodError", "java.lang.NoSuchFieldError",
                         "java.lang.AbstractMethodError", "java.lang.LinkageError",
                         "org.apache.flink.streaming.runtime.tasks.StreamTaskException")
    config_keys = (
        "classloader.resolve-order",
        "classloader.parent-first-patterns.additional",
        "classloader.check-leaked-classloader",
        "taskmanager.memory.jvm-metaspace.size",
    )
    signatures = (
        r"cannot be cast to (?:class )?[\w$.]+",
        r"(?:NoClassDefFoundError|ClassNotFoundException|NoSuchMethodError|NoSuchFieldError|AbstractMethodError|"
        r"IncompatibleClassChangeError)(?::|$)",
        r"loader constraint violation",
        r"Cannot load user class: ",
        r"ClassLoader info: |Class not resolvable through given classloader|Class was actually found in classloader",
        r"Trying to access closed classloader",
        signature(JOB_FINISHED),
        *dependencies.SIGNATURES,
    )
    wordings = (
        Wording(SLUG, r"Trying to access closed classloader\. Please check if you store classloaders directly or "
                      r"indirectly in static fields", "1.12 – 2.x",
                "FlinkUserCodeClassLoaders$SafetyNetWrapperClassLoader.ensureInner (checked in 1.12.5, 1.17.2, "
                "1.20.3, 2.3.0)",
                "java.lang.IllegalStateException: Trying to access closed classloader. Please check if you store "
                "classloaders directly or indirectly in static fields. If the stacktrace suggests that the leak "
                "occurs in a third party library and cannot be fixed immediately, you can disable this check with "
                "the configuration 'classloader.check-leaked-classloader'."),
        Wording(SLUG, r"Cannot load user class: [\w$.]+", "1.10 – 2.x",
                "StreamConfig.getStreamOperatorFactory (checked in 1.10.3, 1.12.5, 1.17.2, 1.20.3, 2.3.0)",
                "org.apache.flink.streaming.runtime.tasks.StreamTaskException: Cannot load user class: "
                "com.acme.pipeline.EnrichJob$Locate"),
    )
    root_causes = (
        RootCause("duplicate-class-lib-and-job-jar",
                  "The same class is in Flink's lib/ and in the job jar: objects made by one copy cannot be used as "
                  "the other (X cannot be cast to X).",
                  "'X cannot be cast to X' with one X from the 'app' loader (lib/) and one from the job's "
                  "ChildFirstClassLoader/ParentFirstClassLoader.",
                  patches=("flink:classloader.parent-first-patterns.additional", _LIST_JARS, SHADE,
                           "ops:keep the library in one place")),
        RootCause("dependency-missing-from-job-jar",
                  "The job uses a library that its jar does not package and that is not in lib/.",
                  "ClassNotFoundException / NoClassDefFoundError (or 'Cannot load user class') of a class outside "
                  "Flink, not 'Could not initialize class'.",
                  patches=(_LIST_JARS, "code:package the dependency in the job jar")),
        RootCause("library-version-clash",
                  "A library the job was compiled against was loaded in another version (from lib/, Hadoop's "
                  "classpath or another jar), which lacks a method or field the job calls.",
                  "NoSuchMethodError / NoSuchFieldError / AbstractMethodError of a library class that Flink's lib/, "
                  "Hadoop or the connectors also bring (Guava, Jackson, Kafka, Avro...).",
                  patches=("flink:classloader.resolve-order", "flink:classloader.parent-first-patterns.additional",
                           SHADE, _LIST_JARS)),
        RootCause("flink-class-missing",
                  "A Flink class or method does not exist in this installation: the job or a connector jar was built "
                  "against another Flink release, or a Flink module (a jar of opt/, the Table planner, the SQL "
                  "gateway) is not installed.",
                  "A missing class or member of org.apache.flink itself (not a shaded library).",
                  patches=("ops:rebuild against the cluster's Flink version", "ops:install the missing Flink module",
                           _LIST_JARS)),
        RootCause("classloader-leak",
                  "Something the job started or registered outlived it (a thread, a timer, a static cache in a "
                  "library of lib/) and keeps its class loader: it fails once the loader is closed, and every "
                  "resubmission or restart leaves another loader in Metaspace.",
                  "'Trying to access closed classloader', or 'X cannot be cast to X' between two job class loaders.",
                  patches=("code:stop what the job started in close()", "flink:classloader.check-leaked-classloader",
                           "ops:watch Metaspace over resubmissions")),
        RootCause("undetermined",
                  "A class-loading error, but the logs do not say which class or which loaders.",
                  "A class-loading error whose message names no class (cut off, or without its cause).",
                  patches=(_LIST_JARS,),
                  next_evidence="the complete exception (every 'Caused by:'), the Classpath line of the process's "
                                "start-up log, `jar tf <job jar> | grep <class path>`, `ls $FLINK_HOME/lib` and "
                                "classloader.resolve-order."),
    )

    templates = {
        "excerpt": " This is an excerpt: the classpath Flink logged at start-up and the job's state changes are not "
                   "in it, so which jars were in lib/ and whether the job failed are unknown.",
        "error note": "the class-loading error",
        "classpath note": "the classpath this process started with (lib/ first)",
        "where": " in {role}",
        "duplicate-class-lib-and-job-jar": "{cls} exists twice{where}: one copy loaded by {loader_a}, the other by "
                                           "{loader_b}. An object made by one copy cannot be cast to the other, so "
                                           "the same class must live in one place only. ",
        "lib loader": "Flink's lib/ ('app', the parent class loader)",
        "job loader": "the job jar ({loader})",
        "added jars": "Jars added to lib/: {jars}; one of them carries {package}. ",
        "resolve order": "Class loading is {order} ({source}): the job jar's copy wins for the job's own code, lib/'s "
                         "for everything lib/ creates.",
        "dependency-missing-from-job-jar": "The job needs {cls}, which neither its jar nor Flink's lib/ "
                                           "provides{where} ({exception}). The library it belongs to was a "
                                           "compile-time dependency that the build did not package (Maven scope "
                                           "'provided', or the thin jar instead of the shaded one).",
        "used at": " It is used at {frame}.",
        "library-version-clash": "The job calls {member}, which the {library} version loaded at run time does not "
                                 "have ({exception}): the job was compiled against another version of {it}. ",
        "jars carry": "On the classpath Flink logged, {jars} carry {library}. ",
        "jar carries": "On the classpath Flink logged, {jars} carries {library}. ",
        "parent-first order": "classloader.resolve-order is parent-first ({source}), so lib/'s version wins over the "
                              "one in the job jar.",
        "parent-first pattern": "{package} matches a parent-first pattern, so lib/'s version wins over the job jar's.",
        "child-first": "Class loading is child-first: the job jar does not package it (or packages an older version), "
                       "so another copy was used.",
        "flink-class-missing": "{cls} is Flink's own, and this Flink installation ({release}) does not have {what} "
                               "({exception}). ",
        "its member": "its member {member}",
        "module missing": "Only Flink's own code is on the stack: a Flink module this tool needs is not installed (a "
                          "jar of the distribution's opt/ folder, such as the SQL gateway for the SQL client, or the "
                          "Table planner in lib/).",
        "other release": "The job or a connector jar was built against another Flink release.",
        "leaked object": "{cls} made by one job class loader ({loader_a}) reached code of another ({loader_b}): an "
                         "object of an earlier job or attempt was kept (a static cache or registry in lib/) after its "
                         "loader was released.",
        "classloader-leak": "Code of a job whose class loader Flink had already closed tried to load a class {count} "
                            "time(s){threads}: something the job started (a thread, a timer, a shutdown hook) or a "
                            "static field in lib/ kept the loader after the job ended. ",
        "threads": " (thread {threads})",
        "submissions": "{count} job submission(s) in these logs: every one leaves its loader and classes in Metaspace "
                       "while the leak holds them; if Metaspace runs out, see the oom-metaspace runbook.",
        "did not fail": " The job itself did not fail from it.",
        "finished before": " The job had finished successfully before it ({place}): its class loader was closed "
                           "with it, and what touched the loader afterwards ({who}) ran once the job's results were "
                           "complete. A warning to fix the leak, not a failure of the job.",
        "after finish who": "thread {thread}",
        "after finish who unknown": "a shutdown hook or a thread the job or a library left behind",
        "finished note": "the job finished successfully before the closed-loader error",
        "undetermined": "A class-loading error{where} ({exception}), but the record does not name the class or the "
                        "loaders involved.",
        "compare": "Find every copy of the class: the job jar, Flink's lib/ on every JobManager and TaskManager "
                   "image, and the Hadoop classpath.",
        "one place": "Either remove {package} from the job jar (Maven scope 'provided': lib/ has it) or remove the "
                     "jar that carries it from lib/. Both copies together break every object that crosses between "
                     "them.",
        "load from lib": "When the library must stay in lib/ (shared by several jobs), load {package} from lib/ for "
                         "the job too: one copy, no cast between copies.",
        "own version": "When the job needs its own version, relocate it so it no longer has the same name as lib/'s.",
        "package it": "Package the library that holds {cls} in the job jar (or install it in lib/ of every JobManager "
                      "and TaskManager, then it must never be in the job jar as well).",
        "child-first reason": "The job jar packs the version it was compiled against; child-first (Flink's default) "
                              "lets it win over lib/'s for the job's own classes.",
        "drop parent-first": "{package} is listed as parent-first, so lib/'s version always wins; drop it so the job "
                             "jar's version is used.",
        "relocate": "Relocating the job's copy makes it independent of whatever version lib/ or Hadoop bring, "
                    "whatever the resolve order.",
        "install the module": "Install the Flink jar that holds {cls} (the same release as flink-dist) where the "
                              "failing tool runs: the full binary distribution ships it in lib/ or opt/.",
        "rebuild": "Build the job with flink.version={version} (Flink's artifacts in scope 'provided') and use the "
                   "connector release made for this Flink version.",
        "stop in close": "A thread, timer or pool started by the job keeps its class loader alive after the job "
                         "ended; stop it in close() (and in the job's shutdown hooks) so the loader can be collected.",
        "check leaks": "Diagnostic only: with the check on, a leaked loader fails loudly with its stack trace (who "
                       "still uses it) instead of silently loading classes of a finished job. Turning it off never "
                       "fixes a leak.",
        "watch metaspace": "Each leaked loader keeps the job's classes in Metaspace; in a session cluster they add up "
                           "until OutOfMemoryError: Metaspace (the oom-metaspace runbook).",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        problems = self._problems(incident)
        failing = [p for p in problems if p.kind != "closed" or _is_failure(p, incident)]
        if not problems:
            return []
        first = failing[0] if failing else problems[0]
        if first.kind == "closed" and oom.occurrences(incident, "metaspace"):
            return []  # the leak ended in a Metaspace OOM: the oom-metaspace runbook names it
        cause = self._cause(first)
        same = [p for p in problems if p.kind == first.kind and p.cls == first.cls]
        excerpt = is_excerpt(incident)
        confidence = (0.9 if cause != "undetermined" else 0.4) - (0.25 if excerpt else 0)
        severity = "failure" if failing else "warning"
        summary, notes, extra, details = self._explain(incident, cause, first, same, failing)
        if excerpt and not (first.kind == "closed" and not failing and _finished_before(first, incident)):
            summary += self.say("excerpt")  # (an excerpt that shows the job finished does say it did not fail)
        evidence = [first.event] + [p.event for p in same[1:3]] + extra
        patches = self._patches(incident, cause, first)
        return [self.finding(cause, summary, evidence, confidence=confidence, patches=patches, severity=severity,
                             notes=notes, details=details)]

    # reading ------------------------------------------------------------------------------------------------------

    def _problems(self, incident: Incident) -> list[ClassProblem]:
        seen: set[int] = set()
        out = []
        # failures of the job, errors that stopped a process or a tool (the SQL client), closed-loader warnings
        candidates = (failure_events(incident) + [ev for ev, _ in incident.find(CLOSED_LOADER)] +
                      [ev for ev in incident.events if ev.chain and ev.level in ("ERROR", "FATAL")])
        order = {id(ev): i for i, ev in enumerate(incident.events)}
        for ev in sorted(candidates, key=lambda e: order.get(id(e), 0)):
            if id(ev) in seen:
                continue
            seen.add(id(ev))
            problem = read_problem(ev)
            if problem is not None:
                out.append(problem)
        return out

    @staticmethod
    def _cause(p: ClassProblem) -> str:
        if p.kind == "closed":
            return "classloader-leak"
        if p.kind == "cast":
            if p.loaders and all(_is_job_loader(x) for x in p.loaders):
                return "classloader-leak"
            return "duplicate-class-lib-and-job-jar" if p.loaders or p.cls else "undetermined"
        if not p.cls:
            return "undetermined"
        if p.cls.startswith("org.apache.flink.") and ".shaded." not in p.cls:
            return "flink-class-missing"
        if p.kind in ("missing", "cannot-load"):
            return "dependency-missing-from-job-jar"
        return "library-version-clash"

    # explaining ---------------------------------------------------------------------------------------------------

    def _explain(self, incident: Incident, cause: str, p: ClassProblem, same: list[ClassProblem],
                 failing: list[ClassProblem]):
        cps = dependencies.classpaths(incident)
        added = sorted({j for cp in cps for j in cp.added_lib_jars})
        order, order_source = dependencies.resolve_order(incident)
        frames = [re.sub(r"\s+[~\[].*$", "", f.strip().removeprefix("at ")) for f in user_frames(p.event)][:3]
        details: dict = {"exception": p.text[:400], "class": p.cls or "unknown",
                         "occurrences": len(same), "classloader.resolve-order": f"{order} ({order_source})",
                         "jars added to lib/": added or ("none" if cps else "unknown (no Classpath line)")}
        if frames:
            details["job frames"] = frames
        notes = {0: self.say("error note")}
        extra: list[Event] = []
        where = self.say("where", role=p.event.role) if p.event.role != "unknown" else ""
        if cause == "duplicate-class-lib-and-job-jar":
            a, b = p.loaders or ("?", "?")
            details["loaders"] = [a, b]
            loader_a, loader_b = (self.say("lib loader") if x.strip("'") == "app"
                                  else self.say("job loader", loader=x.rsplit(".", 1)[-1]) if _is_job_loader(x)
                                  else x for x in (a, b))
            summary = self.say(cause, cls=p.cls, where=where, loader_a=loader_a, loader_b=loader_b)
            summary += self.say("added jars", jars=", ".join(added), package=p.package) if added else ""
            summary += self.say("resolve order", order=order, source=order_source)
        elif cause == "dependency-missing-from-job-jar":
            summary = self.say(cause, cls=p.cls, where=where, exception=p.text[:200])
            if frames:
                summary += self.say("used at", frame=frames[0])
        elif cause == "library-version-clash":
            lib = _library(p.cls)
            suspects = sorted({jar.rsplit("/", 1)[-1] for _, jar in dependencies.jars_matching(
                incident, LIBRARY_JARS.get(lib or "", r"^$"))})
            details["library"] = lib or "unknown"
            details["jars that carry it"] = suspects or "none on the logged classpath"
            summary = self.say(cause, member=f"{p.cls}.{p.member}" if p.member else p.cls, library=lib or "library",
                               exception=p.text[:200], it=lib or "it")
            if suspects:
                summary += self.say("jars carry" if len(suspects) > 1 else "jar carries", jars=", ".join(suspects),
                                    library=lib)
            if order == "parent-first":
                summary += self.say("parent-first order", source=order_source)
            elif _parent_first(incident, p.cls):
                summary += self.say("parent-first pattern", package=p.package)
            else:
                summary += self.say("child-first")
        elif cause == "flink-class-missing":
            summary = self.say(cause, cls=p.cls, release=incident.flink_version or "version unknown",
                               what=self.say("its member", member=p.member) if p.member else "it",
                               exception=p.text[:200])
            summary += self.say("module missing") if _only_flink_frames(p.event) else self.say("other release")
        elif cause == "classloader-leak":
            closed = [x for x in same if x.kind == "closed"]
            threads = sorted({x.event.thread for x in same if x.event.thread})
            submissions = len({m.group(1) for _, m in incident.find(r"Received JobGraph submission.*?\b([0-9a-f]{32})\b")})
            details.update({"closed-loader errors": len(closed) or len(same), "job submissions in the logs": submissions})
            if threads:
                details["threads"] = threads
            if p.kind == "cast":
                summary = self.say("leaked object", cls=p.cls, loader_a=p.loaders[0], loader_b=p.loaders[1])
            else:
                summary = self.say(cause, count=len(same),
                                   threads=self.say("threads", threads=", ".join(threads[:3])) if threads else "")
                summary += self.say("submissions", count=submissions) if submissions else ""
            finished = _finished_before(p, incident)
            if finished is not None and p not in failing:
                summary += self.say("finished before", place=f"{finished.file}:{finished.line}", who=(
                    self.say("after finish who", thread=p.event.thread) if p.event.thread
                    else self.say("after finish who unknown")))
                notes[1 + len(same[1:3])] = self.say("finished note")
                extra.append(finished)
            elif failing is not None and p not in failing:
                summary += self.say("did not fail")
        else:
            summary = self.say(cause, where=where, exception=p.text[:200])
        if cps and cause in ("duplicate-class-lib-and-job-jar", "library-version-clash", "dependency-missing-from-job-jar"):
            extra.append(cps[0].event)
            notes[1 + len([x for x in same[1:3]])] = self.say("classpath note")
        return summary, notes, extra, details

    def _patches(self, incident: Incident, cause: str, p: ClassProblem):
        cls_path = (p.cls or "<class>").replace(".", "/")
        compare = self.ops_patch(
            "compare the job jar with lib/",
            self.say("compare"),
            snippet=(f"jar tf <job jar> | grep '{cls_path}'\n"
                     f"for j in $FLINK_HOME/lib/*.jar; do unzip -l \"$j\" | grep -q '{cls_path}' && echo \"$j\"; done\n"
                     "mvn dependency:tree -Dincludes=<groupId>   # which dependency brings it into the job"))
        out = []
        if cause == "duplicate-class-lib-and-job-jar":
            out.append(self.ops_patch(
                "keep the library in one place",
                self.say("one place", package=p.package), urgent=False))
            if p.package:
                current = incident.config.get("classloader.parent-first-patterns.additional")
                value = f"{current.rstrip(';')};{p.package}." if current else f"{p.package}."
                out.append(self.flink_patch(
                    incident, "classloader.parent-first-patterns.additional", value,
                    self.say("load from lib", package=p.package)))
            out.append(self.code_patch("relocate the library in the job jar",
                                       SHADE_SNIPPET.format(lib=p.package, package=p.package),
                                       self.say("own version")))
            out.append(compare)
        elif cause == "dependency-missing-from-job-jar":
            out.append(self.code_patch(
                "package the dependency in the job jar",
                "<!-- pom.xml: compile scope (not provided), then build the shaded jar -->\n<dependency>\n"
                "  <groupId>…</groupId>\n  <artifactId>…</artifactId>  <!-- the library of " + (p.cls or "the class") +
                " -->\n  <scope>compile</scope>\n</dependency>\n# check: jar tf target/<job>.jar | grep '" + cls_path + "'",
                self.say("package it", cls=p.cls)))
            out.append(compare)
        elif cause == "library-version-clash":
            order, _ = dependencies.resolve_order(incident)
            if order == "parent-first":
                out.append(self.flink_patch(
                    incident, "classloader.resolve-order", "child-first",
                    self.say("child-first reason")))
            elif p.package:
                pattern = incident.config.get("classloader.parent-first-patterns.additional") or ""
                if any(p.cls.startswith(x.strip()) for x in pattern.split(";") if x.strip()):
                    kept = ";".join(x for x in pattern.split(";") if x.strip() and not p.cls.startswith(x.strip()))
                    out.append(self.flink_patch(
                        incident, "classloader.parent-first-patterns.additional", kept or None,
                        self.say("drop parent-first", package=p.package)))
            if p.package:
                out.append(self.code_patch("relocate the library in the job jar",
                                           SHADE_SNIPPET.format(lib=_library(p.cls) or p.package, package=p.package),
                                           self.say("relocate")))
            out.append(compare)
        elif cause == "flink-class-missing":
            if _only_flink_frames(p.event):
                out.append(self.ops_patch(
                    "install the missing Flink module",
                    self.say("install the module", cls=p.cls),
                    snippet=(f"for j in $FLINK_HOME/lib/*.jar $FLINK_HOME/opt/*.jar; do unzip -l \"$j\" | "
                             f"grep -q '{cls_path}' && echo \"$j\"; done\nls $FLINK_HOME/opt   # e.g. "
                             f"flink-sql-gateway-<version>.jar for the SQL client")))
            else:
                out.append(self.ops_patch(
                    "rebuild against the cluster's Flink version",
                    self.say("rebuild", version=incident.flink_version or "<the cluster version>"),
                    snippet="mvn dependency:tree -Dincludes=org.apache.flink   # every Flink artifact at one version"))
                out.append(compare)
        elif cause == "classloader-leak":
            out.append(self.code_patch(
                "stop what the job started in close()",
                "@Override\npublic void close() throws Exception {\n    refresher.interrupt();      // threads the "
                "function started\n    refresher.join(5000);\n    executor.shutdownNow();     // pools, timers, "
                "clients\n    super.close();\n}\n// libraries in lib/ must not keep job objects in static fields "
                "(caches keyed by class, registries): clear them or move the library into the job jar",
                self.say("stop in close")))
            check = incident.config.lookup("classloader.check-leaked-classloader")
            if check is not None and check.value.strip().lower() == "false":
                out.append(self.flink_patch(
                    incident, "classloader.check-leaked-classloader", "true",
                    self.say("check leaks")))
            out.append(self.ops_patch(
                "watch Metaspace over resubmissions",
                self.say("watch metaspace"),
                snippet="jcmd <taskmanager pid> VM.classloader_stats | grep -c ChildFirstClassLoader\n"
                        "curl -s http://<tm>:<port>/taskmanagers/<id>/metrics?get=Status.JVM.Memory.Metaspace.Used",
                urgent=False))
        else:
            out.append(compare)
        return out


def read_problem(ev: Event) -> ClassProblem | None:
    """The class-loading problem a record shows, from its deepest class-loading exception, or None."""
    for link in reversed([c for c in ev.chain if c.kind != "suppressed"]):
        text = f"{link.cls}: {link.message}" if link.message else link.cls
        if CLOSED_LOADER.search(link.message):
            return ClassProblem("closed", ev, text)
        if link.simple_name == "ClassCastException":
            m = CAST_MODERN.search(link.message)
            if m and m["a"] == m["b"]:
                return ClassProblem("cast", ev, text, m["a"], loaders=(m["la"], m["lb"]))
            m = CAST_JAVA8.search(link.message)
            if m and m["a"] == m["b"]:
                return ClassProblem("cast", ev, text, m["a"])
            continue
        m = CANNOT_LOAD.search(link.message)
        if m:
            return _unless_hadoop(ClassProblem("cannot-load", ev, text, m["cls"]))
        if MISSING.match(_java_lang(link.cls)):
            if NOT_INITIALISED.search(link.message):
                return None  # a static initializer failed: the class is there
            # "com/acme/Geo", "com.acme.Geo", or Hadoop's "Class com.acme.Geo not found"
            named = re.match(r"Class (\S+) not found", link.message.strip())
            cls = (named.group(1) if named else link.message.strip().split()[0]).replace("/", ".") \
                if link.message.strip() else None
            return _unless_hadoop(ClassProblem("missing", ev, text, cls))
        if CHANGED.match(_java_lang(link.cls)):
            m = MEMBER_MODERN.search(link.message) or MEMBER_JAVA8.search(link.message.strip())
            if m:
                return ClassProblem("changed", ev, text, m["owner"].replace("/", "."), m["member"])
            return ClassProblem("changed", ev, text)
        if link.simple_name == "LinkageError" and LOADER_CONSTRAINT.search(link.message):
            m = re.search(r"for the type ([\w$.]+)|different Class objects for the type ([\w$.]+)", link.message)
            name = (m.group(1) or m.group(2)) if m else None
            return ClassProblem("cast", ev, text, name, loaders=("'app'", "the job's class loader"))
    m = CLOSED_LOADER.search(ev.message)
    return ClassProblem("closed", ev, ev.message[:300]) if m else None


def _unless_hadoop(p: ClassProblem) -> ClassProblem | None:
    # Hadoop's own classes missing: a file system without Hadoop (filesystem-scheme-unsupported)
    return None if p.cls and p.cls.startswith("org.apache.hadoop.") else p


def _java_lang(cls: str) -> str:
    return cls if "." in cls else "java.lang." + cls


def _is_job_loader(name: str) -> bool:
    return "ChildFirstClassLoader" in name or "ParentFirstClassLoader" in name or "FlinkUserCodeClassLoader" in name


def _library(cls: str | None) -> str | None:
    if not cls:
        return None
    return next((lib for prefix, lib in SHARED_LIBRARIES.items() if cls.startswith(prefix)), None)


def _parent_first(incident: Incident, cls: str | None) -> bool:
    if not cls:
        return False
    extra = incident.config.get("classloader.parent-first-patterns.additional") or ""
    patterns = PARENT_FIRST_DEFAULT + tuple(x.strip() for x in extra.split(";") if x.strip())
    return any(cls.startswith(x) for x in patterns)


def _only_flink_frames(ev: Event) -> bool:
    """The stack holds Flink's and the JDK's frames only: Flink's own tool failed, no job code involved."""
    frames = [f for f in ev.frames if f.strip().startswith("at ")]
    return bool(frames) and not user_frames(ev)


def _is_failure(p: ClassProblem, incident: Incident) -> bool:
    """A closed-loader error counts as the failure only when it failed a task or the job: a task's or the job's
    failure record, else an ERROR or an uncaught exception while the job was not yet finished. After the job finished
    successfully (a shutdown hook, a thread or a library still running at exit) it failed nothing."""
    if TASK_FAILED.search(p.event.message) or JOB_FAILOVER.search(p.event.message) or GLOBAL_FAILURE.search(
            p.event.message):
        return True
    if _finished_before(p, incident) is not None:
        return False
    return p.event.level in ("ERROR", "FATAL") or any(ev is p.event for ev in failure_events(incident))


def _finished_before(p: ClassProblem, incident: Incident) -> Event | None:
    """The record of the job finishing successfully that precedes the error (earlier in the same file, or earlier in
    time), with no failure of a task or the job between them; None when the job had not finished."""
    order = {id(ev): i for i, ev in enumerate(incident.events)}

    def before(a: Event, b: Event) -> bool:
        if a.file == b.file:
            return a.line < b.line
        return bool(a.ts and b.ts and a.ts <= b.ts)

    finished = [ev for ev, _m in incident.find(JOB_FINISHED) if before(ev, p.event)]
    if not finished:
        return None
    last = max(finished, key=lambda ev: order.get(id(ev), 0))
    failed_since = [ev for ev in incident.events if before(last, ev) and before(ev, p.event)
                    and (TASK_FAILED.search(ev.message) or JOB_FAILOVER.search(ev.message))]
    return None if failed_since else last
