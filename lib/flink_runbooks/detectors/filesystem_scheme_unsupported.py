"""No file system for a path's scheme: ``UnsupportedFileSystemSchemeException`` and Hadoop's ``No FileSystem for scheme``.

Flink serves ``s3``/``s3a``/``s3p``/``gs``/``oss``/``abfs``/``wasb`` only through plugins (one subfolder of
``plugins/`` each), ``hdfs`` and the rest through Hadoop when Hadoop is on the classpath. Causes told apart from the
exception, the scheme, the ``Classpath:`` line and the plugin folders every process logs at start:
- ``plugin-not-installed``: the scheme is one Flink serves through a plugin, and no such plugin folder was loaded;
- ``filesystem-jar-not-in-lib``: a release before plugins (before 1.9) whose file system jar is not in lib/;
- ``plugin-jar-in-lib``: the plugin's jar is on the classpath (lib/) instead of in its own plugins/ subfolder;
- ``wrong-scheme``: the scheme is none Flink or Hadoop knows and is a misspelling of one that is (``gcs`` for ``gs``);
- ``hadoop-not-on-classpath``: a scheme only Hadoop serves (``hdfs``, ``viewfs``...) and no Hadoop on the classpath;
- ``job-uses-hadoop-without-jars``: the job's own code calls Hadoop's FileSystem API, and Hadoop's classes are absent;
- ``hadoop-connector-missing``: Hadoop is there but has no implementation for the scheme (``hadoop-aws`` for s3a...).
"""
from __future__ import annotations

import re

from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence import dependencies
from flink_runbooks.evidence.episodes import failure_events, is_excerpt
from flink_runbooks.evidence.faults import user_frames
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.versions import FlinkVersion
from flink_runbooks.vocabulary.wordings import Wording

SLUG = "filesystem-scheme-unsupported"
NO_IMPLEMENTATION = re.compile(r"Could not find a file system implementation for scheme '(?P<scheme>[^']*)'")
THROUGH_PLUGINS = re.compile(r"(?:directly supported by Flink|supported by Flink) through the following plugin\(?s?\)?: "
                             r"(?P<plugins>[\w., -]+?)\. ")
NOT_DIRECT = re.compile(r"The scheme is not directly supported by Flink")
HADOOP_MISSING = re.compile(r"Hadoop is not in the classpath/dependencies|because Hadoop is not in the classpath")
HADOOP_NO_FS = re.compile(r"No FileSystem for scheme:? \"?(?P<scheme>[\w.+-]+)\"?")
# Hadoop's Configuration names the class a scheme maps to (fs.<scheme>.impl) when that class is absent.
HADOOP_IMPL_MISSING = re.compile(r"Class (?P<cls>[\w.$]+FileSystem) not found")
HADOOP_IMPL_SCHEMES = {"S3AFileSystem": "s3a", "GoogleHadoopFileSystem": "gs", "AzureBlobFileSystem": "abfs",
                       "SecureAzureBlobFileSystem": "abfss", "NativeAzureFileSystem": "wasb",
                       "AliyunOSSFileSystem": "oss", "CosNFileSystem": "cosn", "OBSFileSystem": "obs"}
HADOOP_CLASS_MISSING = re.compile(r"(?:NoClassDefFoundError|ClassNotFoundException): (?P<cls>org[./]apache[./]hadoop[./][\w/.$]+)")

# Flink's own map of schemes to plugins (FileSystem.DIRECTLY_SUPPORTED_FILESYSTEM, 1.13 – 2.x).
PLUGIN_SCHEMES = {
    "s3": ("flink-s3-fs-hadoop", "flink-s3-fs-presto"), "s3a": ("flink-s3-fs-hadoop",), "s3p": ("flink-s3-fs-presto",),
    "gs": ("flink-gs-fs-hadoop",), "oss": ("flink-oss-fs-hadoop",), "abfs": ("flink-azure-fs-hadoop",),
    "abfss": ("flink-azure-fs-hadoop",), "wasb": ("flink-azure-fs-hadoop",), "wasbs": ("flink-azure-fs-hadoop",),
}
# Schemes Hadoop serves (with its connector jars) and Flink's own built-in ones.
HADOOP_SCHEMES = ("hdfs", "viewfs", "webhdfs", "har", "ftp", "sftp", "s3a", "gs", "abfs", "abfss", "wasb", "wasbs",
                  "oss", "cosn", "obs", "jfs", "alluxio", "ofs", "o3fs")
BUILT_IN = ("file", "local")
KNOWN_SCHEMES = tuple(sorted(set(PLUGIN_SCHEMES) | set(HADOOP_SCHEMES) | set(BUILT_IN)))
# Names people use for a scheme that is spelled differently.
ALIASES = {"gcs": "gs", "s3n": "s3a", "azure": "abfss", "adl": "abfss", "aliyun": "oss", "hfds": "hdfs",
           "hadoop": "hdfs", "minio": "s3"}
# Where a path with a scheme is configured: a config patch can correct it there.
PATH_KEYS = ("execution.checkpointing.dir", "execution.checkpointing.savepoint-dir", "high-availability.storageDir",
             "jobmanager.archive.fs.dir", "historyserver.archive.fs.dir")

_INSTALL = "ops:install the file system plugin"
_INTO_LIB = "ops:copy the file system jar into lib/"
# Plugins (plugins/<name>/) exist since Flink 1.9 (FLINK-11952); before, a file system's jar is loaded from lib/.
FIRST_PLUGIN_RELEASE = (1, 9)
_HADOOP = "ops:put Hadoop on the classpath"


class FilesystemSchemeUnsupported(Detector):
    slug = SLUG
    title = "No file system for the path's scheme (plugin or Hadoop missing)"
    category = "dependencies"
    meaning = ("A path's scheme (s3://, gs://, hdfs://...) has no file system implementation in this process: its "
               "plugin is not in plugins/, Hadoop is not on the classpath, or the scheme is misspelled.")
    versions = ("1.4 – 2.x (file system jars in lib/ before 1.9, S3 only as a plugin since 1.10; the message names "
                "the plugins since 1.12, checked in 1.10.3, 1.12.5, 1.17.2, 1.20.3 and 2.3.0)")
    exception_classes = ("org.apache.flink.core.fs.UnsupportedFileSystemSchemeException",
                         "org.apache.hadoop.fs.UnsupportedFileSystemException")
    config_keys = (
        "execution.checkpointing.dir",
        "execution.checkpointing.savepoint-dir",
        "high-availability.storageDir",
        "fs.allowed-fallback-filesystems",
    )
    signatures = (
        r"Could not find a file system implementation for scheme",
        r"UnsupportedFileSystemSchemeException|UnsupportedFileSystemException",
        r"No FileSystem for scheme",
        r"[\w.]*ClassNotFoundException: Class [\w.$]+FileSystem not found",
        r"Hadoop File System abstraction does not support scheme",
        r"[\w.]*(?:NoClassDefFoundError: org/apache/hadoop/|ClassNotFoundException: org\.apache\.hadoop\.)",
        *dependencies.SIGNATURES,
    )
    wordings = (
        Wording(SLUG, r"Could not find a file system implementation for scheme '[^']*'\. The scheme is directly "
                      r"supported by Flink through the following plugin", "1.12 – 2.x",
                "FileSystem.getUnguardedFileSystem (checked in 1.12.5, 1.17.2, 1.20.3, 2.3.0; not in 1.10.3)",
                "org.apache.flink.core.fs.UnsupportedFileSystemSchemeException: Could not find a file system "
                "implementation for scheme 's3'. The scheme is directly supported by Flink through the following "
                "plugin(s): flink-s3-fs-hadoop, flink-s3-fs-presto. Please ensure that each plugin resides within "
                "its own subfolder within the plugins directory."),
        Wording(SLUG, r"Could not find a file system implementation for scheme '[^']*'\. The scheme is not directly "
                      r"supported by Flink and no Hadoop file system", "1.10 – 2.x",
                "FileSystem.getUnguardedFileSystem (checked in 1.10.3, 1.12.5, 1.17.2, 1.20.3, 2.3.0)",
                "org.apache.flink.core.fs.UnsupportedFileSystemSchemeException: Could not find a file system "
                "implementation for scheme 'gcs'. The scheme is not directly supported by Flink and no Hadoop file "
                "system to support this scheme could be loaded. For a full list of supported file systems, please "
                "see https://nightlies.apache.org/flink/flink-docs-stable/ops/filesystems/."),
        Wording(SLUG, r"Hadoop File System abstraction does not support scheme '[^']*'", "1.10 – 2.x",
                "HadoopFsFactory.create (checked in 1.10.3, 1.12.5, 1.17.2, 2.3.0)",
                "org.apache.flink.core.fs.UnsupportedFileSystemSchemeException: Hadoop File System abstraction does "
                "not support scheme 'gcs'. Either no file system implementation exists for that scheme, or the "
                "relevant classes are missing from the classpath."),
    )
    root_causes = (
        RootCause("plugin-not-installed",
                  "The scheme is served by a Flink plugin, and that plugin is not in its own subfolder of plugins/ on "
                  "the process that needed it (or was not shipped to the YARN/Kubernetes containers).",
                  "'The scheme is directly supported by Flink through the following plugin(s)', and no plugin folder "
                  "of that name among those the process loaded (nor its jar on the classpath).",
                  patches=(_INSTALL,)),
        RootCause("filesystem-jar-not-in-lib",
                  "A release before plugins (Flink before 1.9): the scheme's file system jar is not in lib/ of the "
                  "process that needed it.",
                  "A scheme Flink serves with its own jar (s3, oss, abfs...), no such jar on the classpath, and a "
                  "release before 1.9 (from the logs or --flink-version).",
                  patches=(_INTO_LIB,), versions="1.4 – 1.8"),
        RootCause("plugin-jar-in-lib",
                  "The plugin's jar is in lib/ (on the classpath) instead of in its own plugins/ subfolder: file "
                  "systems of this family load only as plugins.",
                  "The Classpath line lists the flink-*-fs-* jar of the scheme.",
                  patches=("ops:move the plugin jar from lib/ to plugins/",)),
        RootCause("wrong-scheme",
                  "The path's scheme is none that Flink or Hadoop serves: it is a misspelling of one that is.",
                  "A scheme outside Flink's and Hadoop's lists, close to one in them (gcs for gs, s3n for s3a).",
                  patches=("flink:execution.checkpointing.dir", "flink:execution.checkpointing.savepoint-dir",
                           "flink:high-availability.storageDir", "flink:jobmanager.archive.fs.dir",
                           "flink:historyserver.archive.fs.dir", "code:correct the path's scheme")),
        RootCause("hadoop-not-on-classpath",
                  "The scheme is served through Hadoop, and Hadoop is not on Flink's classpath.",
                  "'Hadoop is not in the classpath/dependencies' under the failure, for a Hadoop scheme (hdfs...).",
                  patches=(_HADOOP,)),
        RootCause("job-uses-hadoop-without-jars",
                  "The job's own code uses Hadoop's FileSystem API, and neither the job jar nor the cluster has "
                  "Hadoop's classes.",
                  "NoClassDefFoundError / ClassNotFoundException of org.apache.hadoop classes from the job's frames.",
                  patches=(_HADOOP, "code:use Flink's FileSystem API or package the Hadoop client")),
        RootCause("hadoop-connector-missing",
                  "Hadoop is on the classpath, but none of its jars implements the scheme (hadoop-aws for s3a, the "
                  "GCS connector for gs, hadoop-azure for abfs).",
                  "Hadoop's 'No FileSystem for scheme' or 'Class …FileSystem not found' (fs.<scheme>.impl) with "
                  "Hadoop on the classpath.",
                  patches=("ops:add the Hadoop connector for the scheme", _INSTALL)),
        RootCause("undetermined",
                  "No file system for the scheme, but the logs do not tell which part is missing.",
                  "The exception without its message or the process's start-up lines.",
                  patches=(_INSTALL,),
                  next_evidence="the start-up log of the process that failed (its Classpath line and the 'Plugin "
                                "loader with ID' lines), `ls -R $FLINK_HOME/plugins` on that host or image, and "
                                "`echo $HADOOP_CLASSPATH`."),
    )

    templates = {
        "who": "The {role}",
        "who unknown": "A process",
        "head": "{who} has no file system for '{scheme}://' paths",
        "head without scheme": "{who} lacks Hadoop's classes",
        "plugin-not-installed": "{head}: Flink serves '{scheme}' only through the plugin(s) {plugins}, and none was "
                                "installed{seen}. Copy one from opt/ into its own folder plugins/<name>/ on every "
                                "JobManager and TaskManager (on Kubernetes/Docker: ENABLE_BUILT_IN_PLUGINS="
                                "{plugin}-{version}.jar).",
        "filesystem-jar-not-in-lib": "{head}: Flink {version} has no plugins yet (they arrived in 1.9): the file "
                                     "system's jar {plugin}-{version}.jar is loaded from lib/, and it is not there. "
                                     "Copy it from opt/ into lib/ on every JobManager and TaskManager.",
        "old wording": " The message's wording is Flink's before 1.12: before 1.9 there are no plugins and the jar "
                       "goes into lib/ instead (pass --flink-version to be told which).",
        "into lib": "Before Flink 1.9 a file system's jar is loaded from lib/, on every JobManager and TaskManager "
                    "(images included); the jar is in the distribution's opt/ folder.",
        "folders loaded": "; the plugin folders it loaded were {folders}",
        "no folder loaded": "; it loaded no plugin folder at all",
        "plugin-jar-in-lib": "{head}: {jar} is on the classpath (lib/) instead of in its own folder under plugins/. "
                             "File systems of this family load only as plugins: move it to plugins/{folder}/.",
        "wrong-scheme": "{head}: '{scheme}' is not a scheme Flink or Hadoop knows; the nearest one that is, is "
                        "'{suggestion}' ({suggestion}://bucket/path). Correct the path.",
        "hadoop-not-on-classpath": "{head}: '{scheme}' is served only through Hadoop, and Hadoop is not on the "
                                   "classpath ('Hadoop is not in the classpath/dependencies'). Export "
                                   "HADOOP_CLASSPATH before starting Flink.",
        "job-uses-hadoop-without-jars": "{head}: the job's own code uses Hadoop's FileSystem API ({exception}), and "
                                        "neither the job jar nor the cluster has Hadoop{no_hadoop}. Use Flink's "
                                        "FileSystem API with a plugin, or put Hadoop on the classpath.",
        "no hadoop logged": " (the process logged no Hadoop dependency at start-up)",
        "hadoop-connector-missing": "{head}: Hadoop is on the classpath but has no implementation for '{scheme}' "
                                    "({exception}): its connector jar (hadoop-aws for s3a, gcs-connector for gs, "
                                    "hadoop-azure for abfs) is missing{or_plugin}.",
        "or plugin": ", or use Flink's own plugin {plugin} through Flink's FileSystem API",
        "undetermined": "{head}, and the logs do not show which part is missing ({exception}).",
        "excerpt": " This is an excerpt: the process's start-up lines (classpath, plugin folders, Hadoop) are not in "
                   "it.",
        "note scheme": "no file system for scheme '{scheme}'",
        "note hadoop classes": "Hadoop's classes are missing",
        "note jar in lib": "the classpath (lib/) holds {jar}",
        "note classpath": "the classpath this process started with: no file system plugin jar on it",
        "note plugin folders": "the plugin folders loaded at start-up: none for this scheme",
        "note hadoop": "whether the process found Hadoop at start-up",
        "install": "Each plugin in its own folder of plugins/, on every JobManager and TaskManager (images included); "
                   "the jar is in the distribution's opt/ folder.",
        "move": "The file system's jar must not be on the classpath: move it into its own plugins/ folder.",
        "correct the key": "'{scheme}' is no file system scheme; '{suggestion}' is.",
        "correct the code": "The job's code builds the path with '{scheme}://'; the scheme is '{suggestion}://'.",
        "hadoop classpath": "Flink finds Hadoop through HADOOP_CLASSPATH on every JobManager and TaskManager (set "
                            "before start-up); on YARN it is there already.",
        "flink api": "The job calls Hadoop directly; either go through Flink's FileSystem (plugins) or ship Hadoop's "
                     "client with the job.",
        "hadoop connector": "Hadoop needs a connector jar per object store, matching its own version.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        failures = failure_events(incident)
        hits = [(ev, r) for ev in failures for r in [_read(ev)] if r]
        if not hits:
            return []
        # The process that needed the file system (a JobManager or TaskManager) before the client that reports it.
        hit = min(hits, key=lambda h: (h[0].role not in ("jobmanager", "taskmanager"), h[0].level is None))
        event, reading = hit
        scheme = reading.get("scheme")
        plugins = reading.get("plugins") or list(PLUGIN_SCHEMES.get(scheme or "", ()))
        loaded = dependencies.plugin_ids(incident)
        hadoop = dependencies.hadoop_present(incident)
        in_lib = [(cp, jar) for cp, jar in dependencies.jars_matching(incident, r"^flink-[\w.-]*fs[\w.-]*\.jar$")
                  if any(p in jar for p in plugins)]
        suggestion = _closest_scheme(scheme)
        if reading["kind"] == "hadoop-class":
            cause = "job-uses-hadoop-without-jars" if user_frames(event) or not reading.get("flink") else "hadoop-not-on-classpath"
        elif scheme and scheme not in KNOWN_SCHEMES and suggestion:
            cause = "wrong-scheme"
        elif scheme in PLUGIN_SCHEMES and reading["kind"] == "flink" and _before_plugins(incident):
            # the jar in lib/ is where such a release loads it from: something else is missing
            cause = "undetermined" if in_lib else "filesystem-jar-not-in-lib"
        elif scheme in PLUGIN_SCHEMES and reading["kind"] == "flink":
            cause = "plugin-jar-in-lib" if in_lib else "plugin-not-installed"
        elif reading["kind"] == "hadoop-no-fs" or (reading["kind"] == "flink" and hadoop):
            cause = "hadoop-connector-missing" if hadoop is not False else "hadoop-not-on-classpath"
        elif reading.get("hadoop_missing") or hadoop is False:
            cause = "hadoop-not-on-classpath"
        else:
            cause = "undetermined"
        excerpt = is_excerpt(incident)
        same = [ev for ev, _ in hits if ev is not event]
        evidence: list[Event] = [event] + same[:2]
        notes = {0: self.say("note scheme", scheme=scheme) if scheme else self.say("note hadoop classes")}
        startup = [cp.event for cp in dependencies.classpaths(incident)[:1]]
        hadoop_ev = dependencies.hadoop_event(incident)
        if cause == "plugin-jar-in-lib":
            evidence.append(in_lib[0][0].event)
            notes[len(evidence) - 1] = self.say("note jar in lib", jar=in_lib[0][1].rsplit('/', 1)[-1])
        elif cause == "plugin-not-installed" and loaded is not None:
            for ev, note in [(e, self.say("note classpath")) for e in startup] + [
                    (e, self.say("note plugin folders")) for e in dependencies.plugin_events(incident)[:1]]:
                evidence.append(ev)
                notes[len(evidence) - 1] = note
        elif cause in ("hadoop-not-on-classpath", "hadoop-connector-missing", "job-uses-hadoop-without-jars") and hadoop_ev:
            evidence.append(hadoop_ev)
            notes[len(evidence) - 1] = self.say("note hadoop")
        configured = _configured_key(incident, scheme)
        details = {
            "scheme": scheme or "unknown", "plugins that serve it": plugins or "none (not a plugin scheme)",
            "plugin folders loaded": sorted(loaded) if loaded else ("none" if loaded is not None else "unknown (no start-up lines)"),
            "Hadoop on the classpath": {True: "yes", False: "no", None: "unknown"}[hadoop],
            "path configured in": configured[0] if configured else "not in the configuration (the job's code)",
            "exception": reading["text"][:400],
        }
        if in_lib:
            details["plugin jar on the classpath"] = in_lib[0][1]
        summary = self._summary(incident, cause, scheme, plugins, loaded, hadoop, in_lib, suggestion, event, reading)
        if excerpt:
            summary += self.say("excerpt")
        confidence = (0.9 if cause != "undetermined" else 0.4) - (0.25 if excerpt else 0)
        patches = self._patches(incident, cause, scheme, plugins, suggestion, configured, in_lib)
        return [self.finding(cause, summary, evidence, confidence=confidence, patches=patches, notes=notes,
                             details=details)]

    def _summary(self, incident, cause, scheme, plugins, loaded, hadoop, in_lib, suggestion, event, reading) -> str:
        who = self.say("who", role=event.role) if event.role != "unknown" else self.say("who unknown")
        head = self.say("head", who=who, scheme=scheme) if scheme else self.say("head without scheme", who=who)
        version = incident.flink_version or "<version>"
        if cause == "plugin-not-installed":
            seen = (self.say("folders loaded", folders=", ".join(sorted(loaded))) if loaded else
                    self.say("no folder loaded") if loaded is not None else "")
            old = "" if incident.flink_version or reading.get("plugins") else self.say("old wording")
            return self.say(cause, head=head, scheme=scheme, plugins=", ".join(plugins), seen=seen, plugin=plugins[0],
                            version=version) + old
        if cause == "filesystem-jar-not-in-lib":
            return self.say(cause, head=head, plugin=plugins[0], version=version)
        if cause == "plugin-jar-in-lib":
            return self.say(cause, head=head, jar=in_lib[0][1].rsplit("/", 1)[-1],
                            folder=plugins[0].removeprefix("flink-"))
        if cause == "wrong-scheme":
            return self.say(cause, head=head, scheme=scheme, suggestion=suggestion)
        if cause == "hadoop-not-on-classpath":
            return self.say(cause, head=head, scheme=scheme)
        if cause == "job-uses-hadoop-without-jars":
            return self.say(cause, head=head, exception=reading["text"][:160],
                            no_hadoop=self.say("no hadoop logged") if hadoop is False else "")
        if cause == "hadoop-connector-missing":
            return self.say(cause, head=head, scheme=scheme, exception=reading["text"][:160],
                            or_plugin=self.say("or plugin", plugin=plugins[0]) if plugins else "")
        return self.say("undetermined", head=head, exception=reading["text"][:200])

    def _patches(self, incident, cause, scheme, plugins, suggestion, configured, in_lib):
        version = incident.flink_version or "<version>"
        out = []
        if cause in ("plugin-not-installed", "undetermined", "hadoop-connector-missing") and plugins \
                and not _before_plugins(incident):
            name = plugins[0]
            out.append(self.ops_patch(
                "install the file system plugin", self.say("install"),
                snippet=(f"mkdir -p $FLINK_HOME/plugins/{name.removeprefix('flink-')}\n"
                         f"cp $FLINK_HOME/opt/{name}-{version}.jar $FLINK_HOME/plugins/{name.removeprefix('flink-')}/\n"
                         f"# Docker / Kubernetes (official image): env ENABLE_BUILT_IN_PLUGINS={name}-{version}.jar\n"
                         f"# Flink Kubernetes Operator: spec.podTemplate ... env: [{{name: ENABLE_BUILT_IN_PLUGINS, "
                         f"value: {name}-{version}.jar}}]")))
        if cause == "filesystem-jar-not-in-lib":
            out.append(self.ops_patch("copy the file system jar into lib/", self.say("into lib"),
                                      snippet=f"cp $FLINK_HOME/opt/{plugins[0]}-{version}.jar $FLINK_HOME/lib/"))
        if cause == "plugin-jar-in-lib":
            jar = in_lib[0][1]
            name = plugins[0].removeprefix("flink-")
            out.append(self.ops_patch(
                "move the plugin jar from lib/ to plugins/", self.say("move"),
                snippet=f"mkdir -p $FLINK_HOME/plugins/{name}\nmv {jar} $FLINK_HOME/plugins/{name}/"))
        if cause == "wrong-scheme" and suggestion:
            if configured:
                key, value = configured
                out.append(self.flink_patch(incident, key, re.sub(rf"^{re.escape(scheme)}:", f"{suggestion}:", value),
                                            self.say("correct the key", scheme=scheme, suggestion=suggestion)))
            else:
                out.append(self.code_patch("correct the path's scheme", f'new Path("{suggestion}://<bucket>/<path>")',
                                           self.say("correct the code", scheme=scheme, suggestion=suggestion)))
        if cause in ("hadoop-not-on-classpath", "job-uses-hadoop-without-jars"):
            out.append(self.ops_patch(
                "put Hadoop on the classpath", self.say("hadoop classpath"),
                snippet="export HADOOP_CLASSPATH=$(hadoop classpath)   # before bin/start-cluster.sh / in the image"))
        if cause == "job-uses-hadoop-without-jars":
            out.append(self.code_patch(
                "use Flink's FileSystem API or package the Hadoop client",
                "// Flink's own API reaches every scheme a plugin serves, without Hadoop on the classpath\n"
                "org.apache.flink.core.fs.FileSystem fs = new org.apache.flink.core.fs.Path(uri).getFileSystem();\n"
                "// or package org.apache.hadoop:hadoop-client-api + hadoop-client-runtime (compile scope)",
                self.say("flink api")))
        if cause == "hadoop-connector-missing":
            out.append(self.ops_patch(
                "add the Hadoop connector for the scheme", self.say("hadoop connector"),
                snippet="# s3a: hadoop-aws-<hadoop version>.jar + its AWS SDK bundle; gs: gcs-connector-hadoop3; "
                        "abfs: hadoop-azure\nls $(hadoop classpath | tr ':' ' ') | grep -E 'hadoop-aws|gcs-connector|hadoop-azure'"))
        return out


def _read(ev: Event) -> dict | None:
    """What a failure record says about a missing file system, from its deepest relevant exception."""
    links = [c for c in ev.chain if c.kind != "suppressed"]
    texts = [f"{c.cls}: {c.message}" if c.message else c.cls for c in links] or [ev.message]
    hadoop_missing = any(HADOOP_MISSING.search(t) for t in texts)
    for text in reversed(texts):
        m = NO_IMPLEMENTATION.search(text)
        if m:
            p = THROUGH_PLUGINS.search(text)
            return {"kind": "flink", "scheme": m["scheme"].lower(), "text": text, "hadoop_missing": hadoop_missing,
                    "plugins": [x.strip() for x in p["plugins"].split(",")] if p else None}
        m = HADOOP_NO_FS.search(text)
        if m:
            return {"kind": "hadoop-no-fs", "scheme": m["scheme"].lower(), "text": text}
        m = HADOOP_IMPL_MISSING.search(text)
        if m:
            simple = m["cls"].rsplit(".", 1)[-1]
            return {"kind": "hadoop-no-fs", "scheme": HADOOP_IMPL_SCHEMES.get(simple), "text": text,
                    "impl": m["cls"]}
        m = HADOOP_CLASS_MISSING.search(text)
        if m:
            flink = any("org.apache.flink.runtime.fs.hdfs" in f for f in ev.frames)
            return {"kind": "hadoop-class", "scheme": None, "text": text, "flink": flink}
    return None


def _before_plugins(incident: Incident) -> bool:
    """Whether the incident's Flink release predates plugins (known, not guessed)."""
    version = FlinkVersion.parse(incident.flink_version)
    return version is not None and version < FIRST_PLUGIN_RELEASE


def _closest_scheme(scheme: str | None) -> str | None:
    if not scheme:
        return None
    if scheme in ALIASES:
        return ALIASES[scheme]
    return dependencies.closest(scheme, KNOWN_SCHEMES)


def _configured_key(incident: Incident, scheme: str | None) -> tuple[str, str] | None:
    if not scheme:
        return None
    for key in PATH_KEYS:
        value = incident.config.get(key)
        if value and value.lower().startswith(f"{scheme}:"):
            return key, value
    return None
