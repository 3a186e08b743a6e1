"""Detector sql-connector-missing: a misspelled identifier (the closest available one named), a DataStream jar in
place of the SQL jar, the SQL client's session without the jar, a program without the connector."""
from __future__ import annotations

from corpus import example, incident_from_text
from corpus import line
from flink_runbooks.diagnose import ingest
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.render.patches import render_config_diff

SLUG = "sql-connector-missing"


def _no_factory(identifier: str, available=("blackhole", "datagen", "filesystem", "print"),
                iface: str = "org.apache.flink.table.factories.DynamicTableFactory") -> list[str]:
    return [f"Caused by: org.apache.flink.table.api.ValidationException: Could not find any factory for identifier "
            f"'{identifier}' that implements '{iface}' in the classpath.", "", "Available factory identifiers are:", "",
            *available,
            "\tat org.apache.flink.table.factories.FactoryUtil.discoverFactory(FactoryUtil.java:608) ~[flink-table-api-java-uber-1.18.1.jar:1.18.1]"]


def _sql_client(identifier: str) -> str:
    return "\n".join([
        line("10:00:00,000", "Could not execute SQL statement.", level="WARN", logger="org.apache.flink.table.client.cli.CliClient"),
        "org.apache.flink.table.client.gateway.SqlExecutionException: Failed to parse statement: INSERT INTO order_totals SELECT * FROM orders;",
        "Caused by: org.apache.flink.table.api.ValidationException: Unable to create a source for reading table 'default_catalog.default_database.orders'.",
        *_no_factory(identifier)])


def _detect(text: str, config: dict | None = None, file: str = "flink-flink-sql-client-host.log"):
    return get_detector(SLUG).detect(incident_from_text(text, config or {}, "1.18.1", file=file))


def test_genuine_table_program_without_the_kafka_connector(spark):
    inc = ingest([str(example(SLUG, "connector-jar-missing-2.3"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "connector-jar-missing")
    assert primary.details["available identifiers"] == ["blackhole", "datagen", "filesystem", "legacy-csv", "print"]
    assert primary.details["jar that serves it"] == "flink-sql-connector-kafka"
    assert primary.evidence[0].file.endswith("client-vm.log")
    keys = {p.key for p in primary.patches}
    assert {"add the connector's SQL jar", "pipeline.jars", "package the connector in the job jar"} <= keys
    shade = next(p for p in primary.patches if p.key == "package the connector in the job jar")
    assert "ServicesResourceTransformer" in shade.snippet and "flink-connector-kafka" in shade.snippet
    assert "pipeline.jars: file:///opt/flink/usrlib/flink-sql-connector-kafka-<connector version>-2.3.jar" in \
        render_config_diff(primary.patches, None, "2.3.0")


def test_genuine_misspelled_identifier_names_the_closest_available_one(spark):
    inc = ingest([str(example(SLUG, "identifier-misspelled-1.17"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "identifier-misspelled")
    assert primary.details["closest available identifier"] == "datagen"
    [fix] = primary.patches
    assert fix.snippet == "'connector' = 'datagen'"
    assert not any(p.target == "flink" for p in primary.patches)  # no jar to add: the connector is there


def test_sql_client_session_without_the_jar_gets_add_jar_and_pipeline_jars():
    [f] = _detect(_sql_client("kafka"))
    assert f.root_cause.slug == "sql-client-without-jar"
    add = next(p for p in f.patches if p.key == "add the connector's SQL jar")
    assert "ADD JAR '/opt/flink/usrlib/flink-sql-connector-kafka-<connector version>-1.18.jar';" in add.snippet
    assert "sql-client.sh -j" in add.snippet


def test_the_datastream_jar_in_place_of_the_sql_jar():
    [f] = _detect(_sql_client("kafka"), {"pipeline.jars": "file:///opt/jars/flink-connector-kafka-3.2.0-1.18.jar"})
    assert f.root_cause.slug == "datastream-jar-instead-of-sql-jar"
    assert "flink-connector-kafka-3.2.0-1.18.jar" in f.summary
    jars = next(p for p in f.patches if p.key == "pipeline.jars")
    assert jars.current == "file:///opt/jars/flink-connector-kafka-3.2.0-1.18.jar" and "flink-sql-connector-kafka" in jars.proposed


def test_a_missing_format_is_named_as_a_format():
    text = "\n".join(_no_factory("avro-confluent", ("csv", "json", "raw"),
                                 "org.apache.flink.table.factories.DeserializationFormatFactory"))
    [f] = _detect(text, file="jobmanager.log")
    assert f.details["kind"] == "format" and f.details["jar that serves it"] == "flink-sql-avro-confluent-registry"
    assert f.root_cause.slug == "connector-jar-missing" and f.confidence < 0.9  # an excerpt


def test_an_unsupported_option_of_a_present_connector_is_not_this_runbook():
    text = "\n".join([
        line("10:00:00,000", "Error while running the command.", level="ERROR", logger="org.apache.flink.client.cli.CliFrontend"),
        "org.apache.flink.table.api.ValidationException: Unsupported options found for 'datagen'.", "", "Unsupported options:", "",
        "rows-per-sec"])
    assert _detect(text, file="flink-client.log") == []


def test_genuine_unsupported_option_and_healthy_program_are_not_this_runbook(spark):
    near = run_detectors(ingest([str(example(SLUG, "near-miss-unsupported-option-1.20"))], spark))
    assert not any(f.runbook == SLUG for f in near.findings)
    assert "Unsupported options found for 'datagen'" in near.primary.summary
    assert run_detectors(ingest([str(example(SLUG, "healthy-1.20"))], spark)).findings == []


def _jar_of(text: str, version: str, file: str = "flink-flink-sql-client-host.log", config: dict | None = None):
    [f] = get_detector(SLUG).detect(incident_from_text(text, config or {}, version, file=file))
    return f, next(p for p in f.patches if p.key == "add the connector's SQL jar")


def test_before_kafka_left_flinks_repository_its_sql_jar_carries_flinks_version():
    # Kafka's own releases start with 3.0.0-1.17: a 1.16 or 1.15 cluster takes the jar Flink released itself
    for version in ("1.16.2", "1.15.4"):
        f, add = _jar_of(_sql_client("kafka"), version)
        assert f"ADD JAR '/opt/flink/usrlib/flink-sql-connector-kafka-{version}.jar';" in add.snippet, version
        assert "<connector version>" not in add.snippet
        jars = next(p for p in f.patches if p.key == "pipeline.jars")
        assert jars.proposed == f"file:///opt/flink/usrlib/flink-sql-connector-kafka-{version}.jar"
    f, add = _jar_of(_sql_client("kafka"), "1.16")  # the patch release unknown: no invented one
    assert "flink-sql-connector-kafka-1.16.<patch>.jar" in add.snippet and "-1.16.jar" not in add.snippet


def test_an_externalized_connector_jar_carries_its_own_version_and_the_flink_minor():
    _, kafka = _jar_of(_sql_client("kafka"), "1.17.2")
    assert "flink-sql-connector-kafka-<connector version>-1.17.jar" in kafka.snippet
    # JDBC and Elasticsearch left with 1.16 (their first own releases are 3.0.0-1.16)
    _, jdbc = _jar_of(_sql_client("jdbc"), "1.16.3")
    assert "flink-connector-jdbc-<connector version>-1.16.jar" in jdbc.snippet
    _, jdbc_old = _jar_of(_sql_client("jdbc"), "1.15.4")
    assert "flink-connector-jdbc-1.15.4.jar" in jdbc_old.snippet


def test_a_connector_with_no_release_for_that_flink_is_said_so():
    f, add = _jar_of(_sql_client("mongodb"), "1.15.4")  # MongoDB's first release is 1.0.0-1.16
    assert add.snippet is None and "no release of flink-sql-connector-mongodb supports Flink 1.15.4" in add.reason
    assert not any(p.key == "pipeline.jars" for p in f.patches)


def test_formats_and_cdc_connectors_keep_their_own_naming():
    text = "\n".join(_no_factory("avro-confluent", ("csv", "json", "raw"),
                                 "org.apache.flink.table.factories.DeserializationFormatFactory"))
    _, avro = _jar_of(text, "1.18.1", file="jobmanager.log")
    assert "flink-sql-avro-confluent-registry-1.18.1.jar" in avro.snippet
    _, cdc = _jar_of(_sql_client("mysql-cdc"), "1.18.1")
    assert "flink-sql-connector-mysql-cdc-<Flink CDC version>.jar" in cdc.snippet and "-1.18.jar" not in cdc.snippet
