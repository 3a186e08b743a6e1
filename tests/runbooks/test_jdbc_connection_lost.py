"""Detector jdbc-connection-lost: a connection MySQL closed while idle (named with the idle time, the server's
wait_timeout and a retry for a table that never retries), a database that refused connections, retries that all broke,
a reconnection after an idle close as a warning, too little evidence as undetermined; a key conflict under the same
retry line is not this runbook's."""
from __future__ import annotations

from corpus import example, incident_from_text, line
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import ingest, run_detectors

SLUG = "jdbc-connection-lost"
OUTPUT_FORMAT = "org.apache.flink.connector.jdbc.internal.JdbcOutputFormat"
COMMS = "com.mysql.cj.jdbc.exceptions.CommunicationsException"


def _detect(text: str, version: str | None = "1.20.3"):
    return get_detector(SLUG).detect(incident_from_text(text, {}, version, file="taskmanager.log"))


def _diagnose(name: str, spark):
    return run_detectors(ingest([str(example(SLUG, name))], spark))


def _timing(received: str, sent: str) -> str:
    return (f"The last packet successfully received from the server was {received} milliseconds ago. The last packet "
            f"sent successfully to the server was {sent} milliseconds ago.")


def test_mysql_closed_the_idle_connection_of_a_sink_that_never_retries(spark):
    primary = _diagnose("idle-wait-timeout-sink-1.20", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "idle-connection-closed")
    assert primary.severity == "failure"
    assert primary.details["user"] == "JDBC sink" and primary.details["driver"] == "mysql"
    assert primary.details["last packet received (ms before)"] == 28803112
    assert primary.details["idle for"] == "8.0 h" and primary.details["sink.max-retries"] == 0
    assert "wait_timeout" in primary.summary and "sink.max-retries is 0" in primary.summary
    retry = next(p for p in primary.patches if p.target == "code")
    assert (retry.key, retry.snippet) == ("sink.max-retries", "'sink.max-retries' = '3'")
    server = next(p for p in primary.patches if p.target == "ops")
    assert server.key == "raise the idle timeout on the database side" and "wait_timeout" in server.snippet
    assert any("retry times = 0" in e.text for e in primary.evidence)


def test_every_retry_broken_on_postgres_names_the_exhausted_retries(spark):
    primary = _diagnose("postgres-retries-exhausted-1.20", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "retries-exhausted")
    assert primary.details["driver"] == "postgres" and primary.details["sink.max-retries"] == 2
    assert "An I/O error occurred while sending to the backend" in primary.summary
    # more retries would not reconnect better: the action is on the database's side
    assert [p.key for p in primary.patches] == ["find why the database drops the connection"]


def test_a_pasted_lookup_that_could_not_reconnect_names_the_database(spark):
    primary = _diagnose("ticket-lookup-reconnect-refused", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "database-unavailable")
    assert primary.details["user"] == "JDBC lookup join"
    assert "No new connection could be opened" in primary.summary
    assert [p.key for p in primary.patches] == ["check the database's availability"]
    assert not any(p.target == "code" for p in primary.patches)


def test_a_duplicate_key_under_the_retry_line_is_not_this_runbook(spark):
    d = _diagnose("near-miss-duplicate-key-1.20", spark)
    assert not any(f.runbook == SLUG for f in d.findings)


def test_an_idle_close_the_connector_recovered_from_is_a_warning():
    text = "\n".join([
        line("06:18:25,861", "JDBC executeBatch error, retry times = 0", level="ERROR", logger=OUTPUT_FORMAT),
        f"java.sql.BatchUpdateException: {_timing('2,400,118', '2,400,119')}",
        f"Caused by: {COMMS}: {_timing('2,400,118', '2,400,119')}"])
    [f] = _detect(text)
    assert f.root_cause.slug == "idle-connection-closed" and f.severity == "warning"
    assert "reconnected" in f.summary and "proxy, load balancer or firewall" in f.summary
    assert not any(p.target == "code" for p in f.patches)  # the table already retries


def test_a_connection_cut_while_in_use_is_the_database_not_idleness():
    text = (f"java.io.IOException: Writing records to JDBC failed.\n"
            f"Caused by: {COMMS}: Communications link failure\n\n{_timing('1,204', '1,205')}")
    [f] = _detect(text)
    assert f.root_cause.slug == "database-unavailable"
    assert "1,204 ms before it broke" in f.summary


def test_a_closed_connection_under_the_connectors_retries_is_named_by_its_retries():
    for error in (f"{COMMS}: No operations allowed after connection closed.",
                  "org.postgresql.util.PSQLException: This connection has been closed."):
        text = "\n".join([
            *[line(f"06:18:2{i},000", f"JDBC executeBatch error, retry times = {i}", level="ERROR",
                   logger=OUTPUT_FORMAT) + f"\njava.sql.BatchUpdateException: x\nCaused by: {error}" for i in range(4)],
            f"java.io.IOException: Writing records to JDBC failed.\nCaused by: {error}"])
        [f] = _detect(text)
        assert f.root_cause.slug == "retries-exhausted" and f.details["sink.max-retries"] == 3, error
        assert not any(p.target == "code" for p in f.patches)  # the default retries were spent: more do not help


def test_without_timing_refusal_or_retries_it_asks_for_the_taskmanager_log():
    [f] = _detect("org.postgresql.util.PSQLException: This connection has been closed.")
    assert f.root_cause.slug == "undetermined" and f.confidence < 0.5
    assert "retry times = N" in f.summary  # what to collect next
    assert [p.key for p in f.patches] == ["find why the database drops the connection"]


def test_a_mysql_cdc_source_losing_its_connection_is_not_a_sink_or_lookup():
    text = (f"java.lang.RuntimeException: One or more fetchers have encountered exception\n"
            f"Caused by: {COMMS}: Communications link failure\n\tat io.debezium.jdbc.JdbcConnection.connect("
            f"JdbcConnection.java:1)")
    assert _detect(text) == []


def test_every_wording_names_this_runbook():
    for wording in get_detector(SLUG).wordings:
        [f] = _detect(wording.example)
        assert f.runbook == SLUG, wording.example
