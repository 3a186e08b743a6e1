"""``IllegalStateException: No ExecutorFactory found to execute the application.``: the program called ``execute()``
and ``DefaultExecutorServiceLoader`` found no ``PipelineExecutorFactory`` (registered in
``META-INF/services/org.apache.flink.core.execution.PipelineExecutorFactory``) whose name is the configured
``execution.target``. The executors and the modules that register them: ``local`` and ``remote`` (flink-clients),
``yarn-per-job`` (flink-yarn, up to 1.20) and ``yarn-session`` (flink-yarn), ``kubernetes-session``
(flink-kubernetes). The ``flink`` CLI always has them (flink-dist bundles every module); a program started from an
IDE, with ``java -jar`` or ``java -cp`` has only what its classpath brings.

Causes, each from its own evidence:
- ``services-file-overwritten``: the job's fat jar holds flink-clients' executor classes (a ``jar tf`` listing) but its
  service file is missing or lists only another module's executors: the shade plugin kept one module's copy.
- ``target-not-an-executor``: ``execution.target`` names no executor at all: an application-mode target
  (``yarn-application``, ``kubernetes-application``, deployed by the CLI, never by ``execute()``), ``yarn-per-job``
  on Flink 2.x, or a misspelling.
- ``target-module-missing``: the target is a YARN or Kubernetes session/per-job executor and the program was started
  without the module that registers it.
- ``flink-clients-missing``: the target is ``local`` or ``remote`` (an IDE's ``getExecutionEnvironment()`` is local)
  and the program was started outside the ``flink`` CLI; a classpath without flink-clients, or a jar listing without
  its executors, confirms it.
The same exception thrown inside ``flink run`` cannot be a missing flink-clients (the CLI is flink-clients). A YARN
executor that is found but lacks Hadoop says ``No Executor found. Please make sure to export the HADOOP_CLASSPATH``:
a different failure, not this runbook's.
"""
from __future__ import annotations

import difflib
import re

from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording

SLUG = "client-missing-executor"
NO_EXECUTOR = re.compile(r"No ExecutorFactory found to execute the application")
TARGET_PROPERTY = re.compile(r"Loading configuration property: execution\.target, (?P<t>\S+)")
TARGET_ARGUMENT = re.compile(r"(?:-D\s*execution\.target=|--target[= ]|\s-t\s+)(?P<t>[\w.-]+)")
# a command line or an IDE's run line: the classpath it was given, or the jar started with java -jar
CLASSPATH_ARGUMENT = re.compile(r"(?:\s-cp|\s-classpath|\s--class-path)[ =](?P<cp>'[^']+'|\"[^\"]+\"|\S+)")
JAVA_JAR = re.compile(r"\bjava\b[^\n]*?\s-jar\s+(?P<jar>\S+\.jar)")
CLIENTS_JAR = re.compile(r"(?:^|[/\\:;])flink-clients(?:_2\.1[12])?-\d[\w.-]*\.jar")
DIST_JAR = re.compile(r"(?:^|[/\\:;])flink-dist(?:_2\.1[12])?-\d[\w.-]*\.jar")
FLINK_JAR = re.compile(r"(?:^|[/\\:;])flink-[\w.-]+\.jar")
FLINK_JAR_VERSION = re.compile(r"^flink-[a-z-]+(?:_2\.1[12])?-(\d+\.\d+\.\d+)\.jar$")
JAR_NAME = re.compile(r"[^/\\:;'\"\s]+\.jar")
# a `jar tf` listing and the service file's content, as attached to a ticket (the record reader may join its lines)
SERVICE_FILE = "META-INF/services/org.apache.flink.core.execution.PipelineExecutorFactory"
LISTED_CLIENT_EXECUTOR = re.compile(r"^org/apache/flink/client/deployment/executors/(?:Local|Remote)ExecutorFactory"
                                    r"\.class$")
LISTED_FLINK_CLASS = re.compile(r"^org/apache/flink/[\w/$]+\.class$")
SERVICE_ENTRY = re.compile(r"^org\.apache\.flink\.[\w.]+\.(?P<name>\w+ExecutorFactory)$")
# frames: how the program was started
LOCAL_ENV = re.compile(r"\.(?:LocalStreamEnvironment|LocalEnvironment)\.execute")
REMOTE_ENV = re.compile(r"\.(?:RemoteStreamEnvironment|RemoteEnvironment)\.execute")
THROUGH_CLI = re.compile(r"org\.apache\.flink\.client\.(?:cli\.CliFrontend|program\.PackagedProgram)\.")
UNCAUGHT = re.compile(r'^Exception in thread "(?P<thread>[^"]*)"')
USER_MAIN = re.compile(r"^(?:at )?(?P<cls>(?!org\.apache\.flink\.|java\.|jdk\.|sun\.)[\w$.]+)\.main\(")

# executor name -> the module whose service file registers it, and the releases that have it
EXECUTORS = {
    "local": ("flink-clients", None),
    "remote": ("flink-clients", None),
    "yarn-session": ("flink-yarn", None),
    "yarn-per-job": ("flink-yarn", (2, 0)),  # per-job mode was removed in 2.0
    "kubernetes-session": ("flink-kubernetes", None),
}
APPLICATION_TARGETS = {"yarn-application": "yarn-session", "kubernetes-application": "kubernetes-session"}

_CLIENTS = "code:add flink-clients"
_SHADE = "code:merge the service files when shading"
_MODULE = "code:add the executor's module"
_CLI = "ops:submit with the flink CLI"


class ClientMissingExecutor(Detector):
    slug = SLUG
    title = "No ExecutorFactory found: the program has no executor for its execution.target"
    category = "dependencies"
    meaning = ("The program called execute() and no PipelineExecutorFactory on its classpath is named like its "
               "execution.target: flink-clients (the local and remote executors) or the YARN / Kubernetes module "
               "is missing, its service file was lost when shading, or the target names no executor.")
    versions = ("1.11 – 2.x (DefaultExecutorServiceLoader's wording checked in 1.11.4, 1.20.3 and 2.3.0; yarn-per-job "
                "up to 1.20)")
    exception_classes = ()  # IllegalStateException is every precondition's class: the runbook is about the wording
    config_keys = ("execution.target",)
    collect_next = ("how the program was started (IDE run configuration, `java -jar`, `flink run`) with its classpath "
                    "(the IDE's first console line, `mvn dependency:tree | grep flink`), the value of execution.target, "
                    "and for a fat jar `jar tf job.jar | grep ExecutorFactory` and `unzip -p job.jar " + SERVICE_FILE
                    + "`")
    signatures = (
        NO_EXECUTOR.pattern,
        r"Loading configuration property: execution\.target, ",
        r"execution\.target=|--target[= ]|\s-t\s+[\w-]+",
        r"\s-cp\s|\s-classpath\s|--class-path|\bjava\b.*\s-jar\s",
        r"^org/apache/flink/[\w/$]+\.class\s*$",
        re.escape(SERVICE_FILE),
        r"^org\.apache\.flink\.[\w.]+\.\w+ExecutorFactory\s*$",
    )
    frames = (
        r"org\.apache\.flink\.streaming\.api\.environment\.(?:Local|Remote)StreamEnvironment\.execute",
        r"org\.apache\.flink\.api\.java\.(?:Local|Remote)Environment\.execute",
        r"org\.apache\.flink\.client\.(?:cli\.CliFrontend|program\.PackagedProgram)\.",
        r"\.main\(",
    )
    wordings = (
        Wording(SLUG, NO_EXECUTOR.pattern + r"\.", "1.11 – 2.x",
                "org.apache.flink.core.execution.DefaultExecutorServiceLoader#getExecutorFactory (checked in 1.11.4, "
                "1.20.3 and 2.3.0)",
                'Exception in thread "main" java.lang.IllegalStateException: No ExecutorFactory found to execute the '
                "application."),
    )
    root_causes = (
        RootCause("services-file-overwritten",
                  "The job's fat jar packs flink-clients' executors, but its META-INF/services file for "
                  "PipelineExecutorFactory is another module's copy (or missing): the shade plugin kept one file "
                  "instead of merging them, so the executors are never registered.",
                  "A jar listing with org/apache/flink/client/deployment/executors/LocalExecutorFactory.class and a "
                  "service file that is missing or lists no local/remote executor.",
                  patches=(_SHADE,)),
        RootCause("target-not-an-executor",
                  "execution.target names no executor a program can run with: an application-mode target (deployed "
                  "by the flink CLI, never by execute()), a target the release no longer has, or a misspelling.",
                  "execution.target (in the configuration, a -D or -t argument) is not local, remote, yarn-session, "
                  "yarn-per-job (before 2.0) or kubernetes-session.",
                  patches=("flink:execution.target", _CLI)),
        RootCause("target-module-missing",
                  "execution.target names a YARN or Kubernetes executor and the program runs without the module "
                  "that registers it (flink-yarn, flink-kubernetes).",
                  "execution.target is yarn-session, yarn-per-job or kubernetes-session and the program was started "
                  "outside the flink CLI (or with a classpath without that module).",
                  patches=(_MODULE, _CLI)),
        RootCause("flink-clients-missing",
                  "The program runs with the local or remote executor, and flink-clients, the module that has them, "
                  "is not on its classpath: an IDE run without provided-scope dependencies, or a fat jar started "
                  "with java -jar that does not pack flink-clients.",
                  "The exception thrown from a program's main() outside the flink CLI, with the target local or "
                  "remote (a LocalStreamEnvironment frame, or the configuration); a classpath or jar listing without "
                  "flink-clients confirms it.",
                  patches=(_CLIENTS, _CLI)),
        RootCause("undetermined",
                  "No executor was found, but how the program was started and with which execution.target is not in "
                  "the logs.",
                  "The exception without the program's frames, its classpath or its execution.target.",
                  patches=(_CLIENTS,),
                  next_evidence="how the program was started (IDE, java -jar, flink run) with its classpath, "
                                "execution.target, and for a fat jar `jar tf job.jar | grep ExecutorFactory` with "
                                "`unzip -p job.jar " + SERVICE_FILE + "`."),
    )

    templates = {
        "head": "The program found no executor for execution.target '{target}'{started}. ",
        "started java": " (started with java, outside the flink CLI)",
        "started cli": " (inside flink run)",
        "services-file-overwritten": "Its jar packs flink-clients' executors ({classes}) but its service file {state}: "
                                     "the shade plugin kept one module's copy instead of merging them, so no executor "
                                     "is registered.",
        "service missing": "is not in the jar",
        "service lists": "lists only {entries}",
        "service without them": "does not register them",
        "target-not-an-executor": "'{target}' is no executor a program's execute() can use{why}.",
        "why application": ": application mode is deployed by the flink CLI ({command}), which runs the program "
                           "inside the cluster; a program started with java runs with {session} or remote",
        "why removed": ": per-job mode was removed in Flink 2.0 (use yarn-application with the CLI, or yarn-session)",
        "why misspelled": ": the executors are local, remote, yarn-session, yarn-per-job and kubernetes-session"
                          "{closest}",
        "closest": "; '{executor}' is the closest",
        "target-module-missing": "'{target}' is registered by {module}, which is not on the program's classpath{seen}. "
                                 "Add {module} (with its dependencies{hadoop}), or submit the jar with the flink CLI, "
                                 "whose flink-dist has it.",
        "hadoop": ": Hadoop's classpath for YARN",
        "module seen": " ({jars})",
        "flink-clients-missing": "The local and remote executors live in flink-clients, and the program's classpath "
                                 "has no flink-clients{seen}{how}.",
        "seen classpath": " (its classpath: {jars})",
        "seen listing": " (the jar listing shows Flink's classes but no org/apache/flink/client/ executors)",
        "how ide": ": an IDE run whose Flink dependencies are provided-scope leaves it out unless the run "
                   "configuration includes provided dependencies",
        "how fat jar": ": the fat jar started with java -jar does not pack it",
        "how unknown": " (or, in a fat jar, its service file was overwritten: `jar tf` tells)",
        "undetermined": "No executor was found for the program, and the logs show neither how it was started nor its "
                        "execution.target.",
        "cli note": "Thrown inside flink run, whose classpath always has flink-clients.",
        "note exception": "no PipelineExecutorFactory named '{target}'",
        "note target": "execution.target = {target}",
        "note classpath": "the program's classpath",
        "note listing": "the job jar's listing",
        "add clients reason": "flink-clients registers the local and remote executors (META-INF/services/"
                              "org.apache.flink.core.execution.PipelineExecutorFactory). For the IDE keep it "
                              "provided and enable 'Add dependencies with \"provided\" scope to classpath' in the run "
                              "configuration; a jar started with java -jar must pack it (compile scope).",
        "shade reason": "ServicesResourceTransformer concatenates every module's "
                        "META-INF/services file instead of keeping the first (or last) copy.",
        "module reason": "{module} registers the '{target}' executor; it must be on the program's classpath with the "
                         "client's other dependencies{hadoop}.",
        "cli reason": "The flink CLI of a distribution (bin/flink) has flink-clients and every executor module in "
                      "flink-dist; the job jar then keeps Flink's modules provided-scope.",
        "target reason": "'{target}' is no pipeline executor{why}; the executors are local, remote, yarn-session, "
                         "yarn-per-job (before 2.0) and kubernetes-session.",
        "cli application reason": "A program started with java cannot deploy '{target}'. The flink CLI deploys "
                                  "application mode and runs the program's main() inside the cluster; drop "
                                  "execution.target from the program's own configuration.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        hits = [ev for ev, _ in incident.find(NO_EXECUTOR)]
        if not hits:
            return []
        event = next((ev for ev in hits if ev.chain or ev.frames), hits[0])
        frames = [f for ev in hits for f in ev.frames]
        through_cli = any(THROUGH_CLI.search(f) for f in frames) or any(THROUGH_CLI.search(ev.text) for ev in hits)
        started_with_java = not through_cli and (
            any(UNCAUGHT.search(ev.text) for ev in hits) or any(USER_MAIN.search(f) for f in frames))
        target, target_event = self._target(incident, frames)
        classpath, classpath_event = self._classpath(incident)
        listing = self._listing(incident)
        version = incident.version_tuple
        evidence, notes, add = evidence_trail()
        add(event, self.say("note exception", target=target or "?"))
        if target_event is not None:
            add(target_event, self.say("note target", target=target))
        details: dict = {"execution.target": target or "unknown",
                         "started": "flink CLI" if through_cli else "java (IDE, java -jar)" if started_with_java
                         else "unknown"}
        if classpath is not None:
            details["classpath jars"] = classpath[:12]
            add(classpath_event, self.say("note classpath"))
        if listing["any"]:
            details["jar listing: client executors"] = listing["client executors"]
            details["jar listing: service file"] = ("missing" if not listing["service file"] else
                                                    listing["entries"] or "listed, content not shown")
            add(listing["event"], self.say("note listing"))

        module, removed_in = EXECUTORS.get((target or "").lower(), (None, None))
        is_executor = module is not None and not (removed_in and version and version >= removed_in)
        cause, confidence, summary = "undetermined", 0.4, ""
        registered = [e for e in listing["entries"] if e in ("LocalExecutorFactory", "RemoteExecutorFactory")]
        # the classes are packed and the executor was not found: the service file does not register them, whether
        # or not its content was attached
        if listing["client executors"] and not registered and (target or "local").lower() in ("local", "remote"):
            cause, confidence = "services-file-overwritten", 0.9
            if not listing["service file"]:
                state = self.say("service missing")
            elif listing["entries"]:
                state = self.say("service lists", entries=", ".join(listing["entries"]))
            else:
                state = self.say("service without them")
            summary = self.say(cause, classes=", ".join(listing["client executors"]), state=state)
        elif target and not is_executor:
            cause, confidence = "target-not-an-executor", 0.9
            summary = self.say(cause, target=target, why=self._why_not(target, version))
        elif module in ("flink-yarn", "flink-kubernetes") and (started_with_java or classpath is not None):
            on_path = [j for j in classpath or [] if module in j or DIST_JAR.search(j)]
            if not on_path:
                cause, confidence = "target-module-missing", 0.85
                summary = self.say(cause, target=target, module=module,
                                   seen=self.say("module seen", jars=", ".join(classpath[:6])) if classpath else "",
                                   hadoop=self.say("hadoop") if module == "flink-yarn" else "")
        elif module == "flink-clients" or (target is None and classpath is not None):
            clients_on_path = classpath is not None and any(CLIENTS_JAR.search(j) or DIST_JAR.search(j)
                                                            for j in classpath)
            if through_cli or clients_on_path:
                cause = "undetermined"
            elif started_with_java or classpath is not None or listing["any"]:
                cause = "flink-clients-missing"
                confirmed = (classpath is not None and any(FLINK_JAR.search(j) for j in classpath)) or (
                    listing["any"] and not listing["client executors"])
                # the trace alone does not tell a missing flink-clients from a fat jar's lost service file
                confidence = 0.9 if confirmed else 0.6
                if classpath is not None:
                    seen = self.say("seen classpath", jars=", ".join(classpath[:8]))
                elif listing["any"]:
                    seen = self.say("seen listing")
                else:
                    seen = ""
                fat = (classpath is not None and len(classpath) == 1) or listing["any"]
                how = (self.say("how fat jar") if fat else self.say("how ide") if classpath is not None or
                       not confirmed else "")
                if not confirmed:
                    how = self.say("how ide") + self.say("how unknown")
                summary = self.say(cause, seen=seen, how=how)
        if cause == "undetermined":
            summary = self.say("undetermined")
            if through_cli:
                summary += " " + self.say("cli note")
        started = (self.say("started cli") if through_cli else self.say("started java") if started_with_java else "")
        summary = self.say("head", target=target or "?", started=started) + summary
        release = incident.flink_version or next(
            (m[1] for j in classpath or [] if (m := FLINK_JAR_VERSION.search(j))), None)
        if release:
            details["flink version"] = release
        patches = self._patches(incident, cause, target, module, version, release)
        return [self.finding(cause, summary, evidence, notes=notes, confidence=confidence, patches=patches,
                             details=details)]

    # ------------------------------------------------------------------------------------------------ readings

    @staticmethod
    def _target(incident: Incident, frames: list[str]) -> tuple[str | None, Event | None]:
        """execution.target as the program had it: an argument, a logged configuration, the file, else the
        environment the frames show (a local environment sets 'local')."""
        for rx in (TARGET_ARGUMENT, TARGET_PROPERTY):
            found = [(ev, m) for ev, m in incident.find(rx)]
            if found:
                ev, m = found[-1]
                return m["t"], ev
        configured = incident.config.get("execution.target")
        if configured:
            return configured, None
        if any(LOCAL_ENV.search(f) for f in frames):
            return "local", None
        if any(REMOTE_ENV.search(f) for f in frames):
            return "remote", None
        return None, None

    @staticmethod
    def _classpath(incident: Incident) -> tuple[list[str] | None, Event | None]:
        """The jars of the program's command line (-cp / -classpath / java -jar), as the run line shows them."""
        for ev, m in incident.find(CLASSPATH_ARGUMENT):
            jars = JAR_NAME.findall(m["cp"].strip("'\""))
            return [j.rsplit("/", 1)[-1].rsplit("\\", 1)[-1] for j in jars], ev
        for ev, m in incident.find(JAVA_JAR):
            return [m["jar"].rsplit("/", 1)[-1]], ev
        return None, None

    @staticmethod
    def _listing(incident: Incident) -> dict:
        """What a `jar tf` listing of the job jar (and `unzip -p` of its service file) shows, token by token: a
        listed path stands alone, unlike the same path inside a grep pattern or after `unzip -p job.jar`."""
        out = {"any": False, "client executors": [], "service file": False, "entries": [], "event": None}
        for ev in incident.events:
            tokens = "\n".join([ev.text, *ev.body]).split()
            for before, token in zip([""] + tokens, tokens):
                if LISTED_FLINK_CLASS.match(token):
                    out["any"] = True
                    out["event"] = out["event"] or ev
                    if LISTED_CLIENT_EXECUTOR.match(token):
                        name = token.rsplit("/", 1)[-1].removesuffix(".class")
                        if name not in out["client executors"]:
                            out["client executors"].append(name)
                elif token == SERVICE_FILE and not before.endswith(".jar"):
                    out["any"] = out["service file"] = True
                    out["event"] = out["event"] or ev
                elif (m := SERVICE_ENTRY.match(token)) and m["name"] != "PipelineExecutorFactory":
                    if m["name"] not in out["entries"]:
                        out["entries"].append(m["name"])
        return out

    def _why_not(self, target: str, version) -> str:
        low = target.lower()
        if low in APPLICATION_TARGETS:
            return self.say("why application", command=_application_command(target, version),
                            session=APPLICATION_TARGETS[low])
        if low == "yarn-per-job":
            return self.say("why removed")
        close = difflib.get_close_matches(low, list(EXECUTORS), n=1, cutoff=0.7)
        return self.say("why misspelled", closest=self.say("closest", executor=close[0]) if close else "")

    # ------------------------------------------------------------------------------------------------ patches

    def _patches(self, incident, cause, target, module, version, release):
        flink_version = release or "${flink.version}"
        cli = self.ops_patch("submit with the flink CLI", self.say("cli reason"), urgent=False,
                             snippet=f"./bin/flink run -t {target if target in ('remote', 'yarn-session', 'kubernetes-session', 'yarn-per-job') else 'remote'} "
                                     "-c <main class> job.jar")
        if cause == "services-file-overwritten":
            return [self.code_patch("merge the service files when shading", _SHADE_SNIPPET, self.say("shade reason"))]
        if cause == "target-not-an-executor":
            low = target.lower()
            close = difflib.get_close_matches(low, list(EXECUTORS), n=1, cutoff=0.7)
            if low not in APPLICATION_TARGETS and low != "yarn-per-job" and close:
                # a misspelling: the key's value is what is wrong
                return [self.flink_patch(incident, "execution.target", close[0],
                                         self.say("target reason", target=target, why=""))]
            application = target if low in APPLICATION_TARGETS else "yarn-application"
            return [self.ops_patch("submit with the flink CLI", self.say("cli application reason", target=target),
                                   snippet=f"./bin/flink {_application_command(application, version)} "
                                           "-c <main class> <job jar>")]
        if cause == "target-module-missing":
            return [self.code_patch("add the executor's module",
                                    _dependency(module, flink_version, "compile") + (
                                        "\n<!-- and Hadoop's client jars: export HADOOP_CLASSPATH=`hadoop classpath` -->"
                                        if module == "flink-yarn" else ""),
                                    self.say("module reason", module=module, target=target,
                                             hadoop=self.say("hadoop") if module == "flink-yarn" else "")),
                    cli]
        if cause == "flink-clients-missing":
            return [self.code_patch("add flink-clients", _dependency("flink-clients", flink_version, "provided"),
                                    self.say("add clients reason")), cli]
        return [self.code_patch("add flink-clients", _dependency("flink-clients", flink_version, "provided"),
                                self.say("add clients reason"))]


_SHADE_SNIPPET = """<plugin>
  <groupId>org.apache.maven.plugins</groupId>
  <artifactId>maven-shade-plugin</artifactId>
  <configuration>
    <transformers>
      <!-- merge every module's META-INF/services files instead of keeping one copy -->
      <transformer implementation="org.apache.maven.plugins.shade.resource.ServicesResourceTransformer"/>
    </transformers>
  </configuration>
</plugin>
<!-- Gradle shadowJar: mergeServiceFiles() -->"""


def _dependency(artifact: str, version: str, scope: str) -> str:
    """A Maven dependency on a Flink module; before 1.15 the client modules carried a Scala suffix."""
    release = tuple(int(x) for x in re.findall(r"\d+", version)[:2])
    if len(release) == 2 and release < (1, 15):
        artifact += "_${scala.binary.version}"
    return (f"<dependency>\n  <groupId>org.apache.flink</groupId>\n  <artifactId>{artifact}</artifactId>\n"
            f"  <version>{version}</version>\n  <scope>{scope}</scope>\n</dependency>")


def _application_command(target: str, version) -> str:
    """Flink 1.x deploys application mode with `run-application`; 2.0 folded it into `run`."""
    action = "run" if version and version >= (2, 0) else "run-application"
    return f"{action} -t {target.lower()}"
