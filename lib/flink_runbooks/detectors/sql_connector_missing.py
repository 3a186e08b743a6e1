"""A table's ``'connector'`` (or ``'format'``) has no factory on the classpath: ``ValidationException: Could not find any
factory for identifier 'kafka' that implements '...DynamicTableFactory' in the classpath``.

Flink lists the identifiers it did find under the message (``Available factory identifiers are:``); the causes are
told apart from that list, the identifier asked for and the process that failed:
- ``identifier-misspelled``: the identifier is no connector Flink knows and is close to one that is available
  (``datagenn`` for ``datagen``): the closest available identifier is named;
- ``datastream-jar-instead-of-sql-jar``: the connector's DataStream jar (``flink-connector-kafka-*.jar``) is on the
  classpath or in ``pipeline.jars``, not its SQL fat jar (``flink-sql-connector-kafka-*.jar``);
- ``sql-client-without-jar``: the SQL client (or SQL gateway) session planned the statement without the jar
  (``sql-client.sh -j``, ``ADD JAR``, ``pipeline.jars``);
- ``connector-jar-missing``: a Table API program or a cluster without the connector's jar (or a job jar that lost
  the factory's ``META-INF/services`` entry when it was shaded).
"""
from __future__ import annotations

import re

from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence import dependencies
from flink_runbooks.evidence.episodes import is_excerpt
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.versions import FlinkVersion, minor_text
from flink_runbooks.vocabulary.wordings import Wording

SLUG = "sql-connector-missing"
NO_FACTORY = re.compile(r"Could not find any factory for identifier '(?P<id>[^']*)' that implements "
                        r"'(?P<iface>[\w$.]+)'")
AVAILABLE = re.compile(r"Available factory identifiers are:")
IDENTIFIER_LINE = re.compile(r"^[a-z][a-z0-9_.-]{1,40}$")
SQL_CLIENT = re.compile(r"sql-client|sql-gateway|org\.apache\.flink\.table\.(?:client|gateway)")
# Identifier -> the SQL jar that serves it (the flink-sql-* "fat" jars bundle the client library too).
SQL_JARS = {
    "kafka": "flink-sql-connector-kafka", "upsert-kafka": "flink-sql-connector-kafka",
    "jdbc": "flink-connector-jdbc (plus the database's JDBC driver)", "elasticsearch-6": "flink-sql-connector-elasticsearch6",
    "elasticsearch-7": "flink-sql-connector-elasticsearch7", "opensearch": "flink-sql-connector-opensearch",
    "opensearch-2": "flink-sql-connector-opensearch2", "kinesis": "flink-sql-connector-kinesis",
    "firehose": "flink-sql-connector-aws-kinesis-firehose", "dynamodb": "flink-sql-connector-dynamodb",
    "hbase-1.4": "flink-sql-connector-hbase-1.4", "hbase-2.2": "flink-sql-connector-hbase-2.2",
    "mongodb": "flink-sql-connector-mongodb", "pulsar": "flink-sql-connector-pulsar",
    "rabbitmq": "flink-sql-connector-rabbitmq", "hive": "flink-sql-connector-hive-3.1.3_2.12",
    "mysql-cdc": "flink-sql-connector-mysql-cdc", "postgres-cdc": "flink-sql-connector-postgres-cdc",
    "oracle-cdc": "flink-sql-connector-oracle-cdc", "sqlserver-cdc": "flink-sql-connector-sqlserver-cdc",
    "mongodb-cdc": "flink-sql-connector-mongodb-cdc", "paimon": "paimon-flink", "iceberg": "iceberg-flink-runtime",
    "hudi": "hudi-flink-bundle", "starrocks": "flink-connector-starrocks", "doris": "flink-doris-connector",
    "clickhouse": "flink-connector-clickhouse", "redis": "flink-connector-redis",
    # formats
    "avro": "flink-sql-avro", "avro-confluent": "flink-sql-avro-confluent-registry",
    "debezium-avro-confluent": "flink-sql-avro-confluent-registry", "parquet": "flink-sql-parquet",
    "orc": "flink-sql-orc", "protobuf": "flink-sql-protobuf", "csv": "flink-csv", "json": "flink-json",
    "canal-json": "flink-json", "debezium-json": "flink-json", "maxwell-json": "flink-json", "ogg-json": "flink-json",
    "raw": "flink-table (built in)",
}
BUILT_IN = ("blackhole", "datagen", "filesystem", "print", "values")
# Connectors that left Flink's main repository: the first Flink minor their own releases support (the Flink version
# in the pom of each repository's first release tag, apache/flink-connector-*). Their jars are named
# <artifact>-<connector version>-<flink minor>.jar (flink-sql-connector-kafka-3.2.0-1.19.jar); before that minor only
# Flink's own release of the connector exists, named with Flink's version (flink-sql-connector-kafka-1.15.4.jar).
EXTERNALIZED_SINCE = {
    "flink-sql-connector-kafka": (1, 17),            # flink-connector-kafka v3.0.0 (Flink 1.17.0)
    "flink-connector-jdbc": (1, 16),                 # flink-connector-jdbc v3.0.0 (1.16.0)
    "flink-sql-connector-elasticsearch6": (1, 16),   # flink-connector-elasticsearch v3.0.0 (1.16.0)
    "flink-sql-connector-elasticsearch7": (1, 16),
    "flink-sql-connector-kinesis": (1, 16),          # flink-connector-aws v4.0.0 (1.16.0)
    "flink-sql-connector-aws-kinesis-firehose": (1, 16),
    "flink-sql-connector-dynamodb": (1, 16),         # flink-connector-aws v3.0.0 (1.16.0)
    "flink-sql-connector-hbase-1.4": (1, 16),        # flink-connector-hbase v3.0.0 (1.16.2)
    "flink-sql-connector-hbase-2.2": (1, 16),
    "flink-sql-connector-pulsar": (1, 16),           # flink-connector-pulsar v3.0.0 (1.16.0)
    "flink-sql-connector-rabbitmq": (1, 16),         # flink-connector-rabbitmq v3.0.0 (1.16.0)
    "flink-sql-connector-opensearch": (1, 16),       # flink-connector-opensearch v1.0.0 (1.16.0)
    "flink-sql-connector-opensearch2": (1, 18),      # flink-connector-opensearch v1.2.0 (1.18.0)
    "flink-sql-connector-mongodb": (1, 16),          # flink-connector-mongodb v1.0.0 (1.16.0)
    "flink-sql-connector-hive-3.1.3_2.12": (1, 20),  # flink-connector-hive v3.0.0 (1.20.0)
}
# Connectors that were never part of Flink's own releases: no jar exists for a Flink older than their first release.
NEVER_IN_FLINK = ("flink-sql-connector-opensearch", "flink-sql-connector-opensearch2", "flink-sql-connector-dynamodb",
                  "flink-sql-connector-mongodb")

_ADD_JAR = "ops:add the connector's SQL jar"
_PIPELINE_JARS = "flink:pipeline.jars"


class SqlConnectorMissing(Detector):
    slug = SLUG
    title = "SQL connector factory not found for a table's 'connector'"
    category = "dependencies"
    meaning = ("A table's 'connector' (or 'format') names a factory that is not on the classpath of the process "
               "that planned the statement: the connector's SQL jar is missing there, or the identifier is misspelled.")
    versions = "1.12 – 2.x (FactoryUtil's wording checked in 1.12.5, 1.17.2 and 2.3.0; DynamicTableFactory since 1.11)"
    # ValidationException is every planning error's class (unsupported options, unknown columns...): the runbook is
    # about Flink's factory-discovery wording, not that class.
    exception_classes = ()
    config_keys = (
        "pipeline.jars",
        "execution.target",
    )
    signatures = (
        r"Could not find any factory for identifier '[^']*' that implements",
        r"Available factory identifiers are:",
        # the identifiers Flink lists, one per line, under the message
        r"^[a-z][a-z0-9_.-]{1,40}$",
        r"Classpath: ",
        r"ADD JAR '",
    )
    wordings = (
        Wording(SLUG, r"Could not find any factory for identifier '[^']*' that implements '[\w$.]+' in the classpath",
                "1.12 – 2.x", "FactoryUtil.discoverFactory (checked in 1.12.5, 1.17.2 and 2.3.0)",
                "org.apache.flink.table.api.ValidationException: Could not find any factory for identifier 'kafka' "
                "that implements 'org.apache.flink.table.factories.DynamicTableFactory' in the classpath."),
    )
    root_causes = (
        RootCause("identifier-misspelled",
                  "The table's 'connector' (or 'format') is misspelled: the connector is there under another name.",
                  "The identifier is no connector Flink knows, and an available identifier is one or two letters "
                  "away from it.",
                  patches=("code:correct the identifier",)),
        RootCause("datastream-jar-instead-of-sql-jar",
                  "The connector's DataStream jar is on the classpath instead of its SQL fat jar: it lacks the "
                  "client library (or, for older releases, the table factory).",
                  "A flink-connector-<name> jar on the classpath, in pipeline.jars or ADD JAR, and no "
                  "flink-sql-connector-<name> jar.",
                  patches=(_ADD_JAR, _PIPELINE_JARS)),
        RootCause("sql-client-without-jar",
                  "The SQL client (or SQL gateway) session planned the statement without the connector's jar.",
                  "The failure is logged by the SQL client or gateway, and the identifier is a known connector "
                  "absent from the available identifiers.",
                  patches=(_ADD_JAR, _PIPELINE_JARS)),
        RootCause("connector-jar-missing",
                  "The program that planned the statement has no jar for the connector: neither in the job jar "
                  "(or its factory's META-INF/services entry was lost when shading) nor in lib/.",
                  "The identifier is a known connector absent from the available identifiers, outside the SQL client.",
                  patches=(_ADD_JAR, "code:package the connector in the job jar", _PIPELINE_JARS)),
        RootCause("undetermined",
                  "A factory was not found, but the logs do not say which identifier or what was available.",
                  "The ValidationException without its identifier or its list of available identifiers.",
                  patches=(_ADD_JAR,),
                  next_evidence="the complete ValidationException with its 'Available factory identifiers are:' "
                                "list (the SQL client's output or the client log), the CREATE TABLE statement, and "
                                "the jars of the session (`SHOW JARS;`, -j, pipeline.jars, `ls $FLINK_HOME/lib`)."),
    )

    templates = {
        "identifier-misspelled": "'{identifier}' is no {kind} Flink knows{available}: the closest available "
                                 "identifier is '{closest}'. Correct the table's '{kind}' option.",
        "datastream-jar-instead-of-sql-jar": "{where} has {jars} (the connector's DataStream jar) but not its SQL jar "
                                             "{known}-<version>.jar, so no '{identifier}' factory is available"
                                             "{available}. Use the flink-sql-connector jar, which bundles the client "
                                             "library.",
        "sql-client-without-jar": "The SQL client planned the statement without a jar for '{identifier}'{available}: "
                                  "start it with -j {jar}-<version>.jar, run ADD JAR, or install the jar in lib/ of "
                                  "the client and of the cluster.",
        "connector-jar-missing": "{where} has no factory for the {kind} '{identifier}'{available}: {jar} is neither "
                                 "in the job jar nor in lib/ (a job jar shaded without merging META-INF/services "
                                 "loses it too).",
        "undetermined": "No factory for '{identifier}', and the logs do not show what was available.",
        "sql client": "The SQL client",
        "program": "The program that planned the statement",
        "available": " (available: {identifiers})",
        "some connector jar": "<connector jar>",
        "its jar": "its jar",
        "excerpt": "This is an excerpt: where the statement was planned and which jars it had are unknown.",
        "note no factory": "no {kind} factory for '{identifier}'",
        "correct the identifier": "'{identifier}' is not an identifier any factory on the classpath declares; "
                                  "'{closest}' is.",
        "add the sql jar": "The SQL jar ({jar}) bundles the connector, its table factory and its client library; it "
                           "must be where the statement is planned (the SQL client or the program) and on the "
                           "cluster.",
        "pipeline jars": "Ships the connector jar with every job of the session (SQL client, SQL gateway, Table API "
                         "programs started from this configuration).",
        "no release for": "no release of {artifact} supports Flink {version} (its first release is for Flink "
                          "{first}): upgrade Flink or use another connector",
        "package the connector": "A Table API program finds factories through "
                                 "META-INF/services/org.apache.flink.table.factories.Factory: package the connector "
                                 "and merge the service files when shading.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        hits = [(ev, m) for ev, m in incident.find(NO_FACTORY)]
        if not hits:
            return []
        event, m = _deepest(hits)
        identifier, iface = m["id"], m["iface"]
        kind = "format" if "FormatFactory" in iface else "catalog" if "Catalog" in iface else "connector"
        available = available_identifiers(event)
        known = SQL_JARS.get(identifier.lower())
        closest = dependencies.closest(identifier, available) if available else None
        if closest is None and identifier.lower() not in SQL_JARS and identifier.lower() not in BUILT_IN:
            closest = dependencies.closest(identifier, tuple(SQL_JARS) + BUILT_IN)
        jars = self._session_jars(incident)
        stem = (known or "").split(" ")[0]
        datastream = [j for j in jars if stem and _datastream_variant(stem) and _datastream_variant(stem) in j
                      and stem not in j]
        in_client = bool(SQL_CLIENT.search(" ".join(x for x in (event.file.rsplit("/", 1)[-1], event.logger or "") if x)))
        if not identifier:
            cause = "undetermined"
        elif closest and not known:
            cause = "identifier-misspelled"
        elif datastream:
            cause = "datastream-jar-instead-of-sql-jar"
        elif in_client:
            cause = "sql-client-without-jar"
        elif known or available:
            cause = "connector-jar-missing"
        else:
            cause = "undetermined"
        excerpt = is_excerpt(incident) and not in_client
        same = [ev for ev, mm in hits if ev is not event and mm["id"] == identifier]
        evidence = [event] + same[:2]
        notes = {0: self.say("note no factory", kind=kind, identifier=identifier)}
        details = {"identifier": identifier, "kind": kind, "interface": iface,
                   "available identifiers": available or "not in the logs",
                   "jar that serves it": known or "unknown", "planned by": "the SQL client" if in_client else
                   (event.role if event.role != "unknown" else "unknown")}
        if closest:
            details["closest available identifier"] = closest
        if jars:
            details["jars of the session"] = jars[:10]
        summary = self._summary(incident, cause, identifier, kind, available, known, closest, datastream, in_client)
        if excerpt:
            summary += " " + self.say("excerpt")
        confidence = (0.9 if cause != "undetermined" else 0.4) - (0.25 if excerpt else 0)
        patches = self._patches(incident, cause, identifier, known, closest, datastream, in_client)
        return [self.finding(cause, summary, evidence, confidence=confidence, patches=patches, notes=notes,
                             details=details)]

    @staticmethod
    def _session_jars(incident: Incident) -> list[str]:
        """Jars the planning process had besides Flink's own: the classpath's added lib/ jars, pipeline.jars and
        the SQL client's ADD JAR / -j lines."""
        out = []
        for cp in dependencies.classpaths(incident):
            out += [j for j in cp.added_lib_jars if j not in out]
        for value in filter(None, [incident.config.get("pipeline.jars")]):
            out += [j.strip().rsplit("/", 1)[-1] for j in re.split(r"[;,]", value) if j.strip()]
        for _, m in incident.find(r"ADD JAR '([^']+)'|\s-j\s+(\S+\.jar)"):
            jar = (m.group(1) or m.group(2)).rsplit("/", 1)[-1]
            if jar not in out:
                out.append(jar)
        return out

    def _summary(self, incident, cause, identifier, kind, available, known, closest, datastream, in_client) -> str:
        where = self.say("sql client") if in_client else self.say("program")
        avail = self.say("available", identifiers=", ".join(available)) if available else ""
        if cause == "identifier-misspelled":
            return self.say(cause, identifier=identifier, kind=kind, available=avail, closest=closest)
        if cause == "datastream-jar-instead-of-sql-jar":
            return self.say(cause, where=where, jars=", ".join(datastream), known=known, identifier=identifier,
                            available=avail)
        if cause == "sql-client-without-jar":
            return self.say(cause, identifier=identifier, available=avail,
                            jar=known or self.say("some connector jar"))
        if cause == "connector-jar-missing":
            return self.say(cause, where=where, kind=kind, identifier=identifier, available=avail,
                            jar=known or self.say("its jar"))
        return self.say("undetermined", identifier=identifier)

    def _patches(self, incident, cause, identifier, known, closest, datastream, in_client):
        artifact = (known or "flink-sql-connector-" + identifier).split(" ")[0]
        jar = sql_jar(artifact, incident.flink_version)
        out = []
        if cause == "identifier-misspelled":
            out.append(self.code_patch("correct the identifier", f"'connector' = '{closest}'",
                                       self.say("correct the identifier", identifier=identifier, closest=closest)))
            return out
        if jar is None:
            first = ".".join(map(str, EXTERNALIZED_SINCE[artifact]))
            return [self.ops_patch("add the connector's SQL jar", self.say(
                "no release for", artifact=artifact, version=incident.flink_version, first=first))]
        out.append(self.ops_patch(
            "add the connector's SQL jar", self.say("add the sql jar", jar=jar),
            snippet=(f"# SQL client: sql-client.sh -j /opt/flink/usrlib/{jar}\n"
                     f"ADD JAR '/opt/flink/usrlib/{jar}';\nSHOW JARS;\n"
                     f"# or for every session and job: cp {jar} $FLINK_HOME/lib/ (every JobManager and TaskManager)")
            + (f"\n# replace: {', '.join(datastream)}" if datastream else "")))
        if cause in ("sql-client-without-jar", "datastream-jar-instead-of-sql-jar", "connector-jar-missing"):
            current = incident.config.get("pipeline.jars")
            value = f"file:///opt/flink/usrlib/{jar}"
            if current and cause != "datastream-jar-instead-of-sql-jar":
                value = f"{current};{value}"
            out.append(self.flink_patch(incident, "pipeline.jars", value, self.say("pipeline jars")))
        if cause == "connector-jar-missing":
            out.append(self.code_patch(
                "package the connector in the job jar",
                "<dependency>\n  <groupId>org.apache.flink</groupId>\n  <artifactId>"
                + (known or "flink-connector-" + identifier).split(" ")[0].replace("flink-sql-connector", "flink-connector")
                + "</artifactId>\n  <version>…</version>  <!-- compile scope -->\n</dependency>\n"
                "<!-- maven-shade-plugin: keep every factory's META-INF/services entry -->\n"
                "<transformer implementation=\"org.apache.maven.plugins.shade.resource.ServicesResourceTransformer\"/>",
                self.say("package the connector")))
        return out


def sql_jar(artifact: str, version: str | None) -> str | None:
    """The file name of ``artifact``'s jar for Flink ``version``, with placeholders only for what the logs cannot
    tell (the connector's own version); None when no release of it supports that Flink."""
    v = FlinkVersion.parse(version) if version else None
    minor = minor_text(version) if v is not None else None
    if artifact.endswith("-cdc"):  # Flink CDC: its own version only (flink-sql-connector-mysql-cdc-3.1.0.jar)
        return f"{artifact}-<Flink CDC version>.jar"
    if not artifact.startswith("flink-"):  # lakehouse and vendor connectors name their Flink line their own way
        return f"{artifact}-<its release for Flink {minor or '<flink minor>'}>.jar"
    since = EXTERNALIZED_SINCE.get(artifact)
    if since is not None and (v is None or tuple(v[:2]) >= since):
        return f"{artifact}-<connector version>-{minor or '<flink minor>'}.jar"
    if since is not None and artifact in NEVER_IN_FLINK:
        return None
    # released with Flink itself: formats, and connectors before they left the main repository
    if v is None:
        return f"{artifact}-<flink version>.jar"
    return f"{artifact}-{version}.jar" if len(v) >= 3 else f"{artifact}-{minor}.<patch>.jar"


def available_identifiers(event: Event) -> list[str]:
    """The identifiers Flink listed under ``Available factory identifiers are:`` in this record (one per line in the
    log; the record reader joins a message's lines with spaces)."""
    lines = event.text.splitlines()
    start = next((i for i, line in enumerate(lines) if AVAILABLE.search(line)), None)
    if start is None:
        return []
    words = AVAILABLE.split(lines[start], 1)[1].split()
    for line in lines[start + 1:]:
        if not IDENTIFIER_LINE.match(line.strip() or "-"):
            break
        words.append(line.strip())
    out: list[str] = []
    for word in words:
        if not IDENTIFIER_LINE.match(word):
            break
        if word not in out:
            out.append(word)
    return out


def _deepest(hits: list[tuple[Event, re.Match]]) -> tuple[Event, re.Match]:
    """The first record that lists the available identifiers, else the first one."""
    # a log record (with its level and logger) before the same trace printed by a command line tool
    ordered = sorted(hits, key=lambda h: h[0].level is None)
    return next(((ev, m) for ev, m in ordered if available_identifiers(ev)), ordered[0])


def _datastream_variant(sql_jar: str) -> str | None:
    return sql_jar.replace("flink-sql-connector-", "flink-connector-") if sql_jar.startswith("flink-sql-connector-") else None
