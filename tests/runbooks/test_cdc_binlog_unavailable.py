"""Detector cdc-binlog-unavailable: a job started from a savepoint after longer than the binlog retention (the
downtime, the offset's age and the purged files named), a source restarted against another server (GTIDs, file
numbering), a configured start offset already purged, the server's error 1236 alone as undetermined; Debezium's
unknown-schema error is not this runbook's."""
from __future__ import annotations

from corpus import example, incident_from_text, line
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import ingest, run_detectors

SLUG = "cdc-binlog-unavailable"
CONTEXT = "org.apache.flink.cdc.connectors.mysql.debezium.task.context.StatefulTaskContext"


def _detect(text: str, version: str | None = "1.20.3"):
    return get_detector(SLUG).detect(incident_from_text(text, {}, version, file="taskmanager.log"))


def _diagnose(name: str, spark):
    return run_detectors(ingest([str(example(SLUG, name))], spark))


def _check(file: str, pos: int) -> str:
    return ("java.lang.IllegalStateException: The connector is trying to read binlog starting at Struct{version="
            "1.9.8.Final,connector=mysql,name=mysql_binlog_source,ts_ms=1733563125071,db=,server_id=0,"
            f"file={file},pos={pos},row=0}}, but this is no longer available on the server. Reconfigure the connector "
            "to use a snapshot when needed.")


def test_a_savepoint_started_after_nine_days_names_the_downtime_and_the_purged_files(spark):
    primary = _diagnose("savepoint-restore-after-downtime-1.20", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "restored-offset-expired")
    assert primary.details["binlog file needed"] == "mysql-bin.000123" and primary.details["position"] == 88213
    assert primary.details["job stopped for"] == "9.5 days"
    assert primary.details["offset's last event (UTC)"] == "2026-11-24 21:45"
    assert "the server's oldest binlog is mysql-bin.000131, 8 file(s) later" in primary.summary
    assert any("stop-with-savepoint" in e.text for e in primary.evidence)
    snapshot = next(p for p in primary.patches if p.target == "code")
    assert (snapshot.key, snapshot.snippet.split("   --")[0]) == ("scan.startup.mode", "'scan.startup.mode' = 'initial'")
    assert "NEW job WITHOUT the snapshot" in snapshot.reason and "Lost:" in snapshot.reason
    retention = next(p for p in primary.patches if p.key == "raise the server's binlog retention")
    assert "at least 9.5 days" in retention.reason and "binlog_expire_logs_seconds" in retention.snippet
    assert not retention.urgent


def test_a_source_restarted_against_a_promoted_replica_is_another_server(spark):
    primary = _diagnose("failover-replica-gtids-1.20", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "server-binlog-history-differs")
    assert "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-104811" in primary.summary
    assert [p.key for p in primary.patches] == ["scan.startup.mode", "use GTIDs on the server"]


def test_the_servers_error_alone_is_undetermined_and_says_what_to_collect(spark):
    primary = _diagnose("ticket-error-1236-trace", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "undetermined")
    assert primary.confidence < 0.5 and "error 1236" in primary.summary
    assert "SHOW BINARY LOGS" in primary.summary
    assert primary.patches[0].key == "find the offset and the server's binlog"


def test_an_unknown_table_schema_is_not_this_runbook(spark):
    d = _diagnose("near-miss-schema-unknown", spark)
    assert not any(f.runbook == SLUG for f in d.findings)


def test_a_checkpoint_whose_offset_was_days_behind_is_a_lagging_reader():
    text = "\n".join([
        line("09:00:00,000", "Restoring job 44a1c7e0d3b6f9a2c5e8b1d4f7a0c3e6 from latest valid checkpoint: Checkpoint 384 "
             "@ 1764666000000 for 44a1c7e0d3b6f9a2c5e8b1d4f7a0c3e6.",
             logger="org.apache.flink.runtime.checkpoint.CheckpointCoordinator"),
        line("09:00:02,000", "Starting offset is initialized to {ts_sec=1764320400, file=mysql-bin.000077, pos=4, "
             "kind=SPECIFIC, row=0, event=0, server_id=1}", logger=CONTEXT),
        _check("mysql-bin.000077", 4)])
    [f] = _detect(text)
    assert f.root_cause.slug == "reader-fell-behind" and f.details["offset behind the checkpoint (days)"] == 4
    assert "not a late restore" in f.summary
    assert [p.key for p in f.patches] == ["scan.startup.mode", "raise the server's binlog retention",
                                          "find what slows the source"]


def test_a_recent_checkpoint_with_a_fresh_offset_is_a_restore():
    text = "\n".join([
        line("09:00:00,000", "Restoring job 44a1c7e0d3b6f9a2c5e8b1d4f7a0c3e6 from latest valid checkpoint: Checkpoint 384 "
             "@ 1764666000000 for 44a1c7e0d3b6f9a2c5e8b1d4f7a0c3e6.",
             logger="org.apache.flink.runtime.checkpoint.CheckpointCoordinator"),
        line("09:00:02,000", "Starting offset is initialized to {ts_sec=1764665990, file=mysql-bin.000077, pos=4, "
             "kind=SPECIFIC, row=0, event=0, server_id=1}", logger=CONTEXT),
        _check("mysql-bin.000077", 4)])
    [f] = _detect(text)
    assert f.root_cause.slug == "restored-offset-expired"


def test_a_configured_start_offset_already_purged():
    text = "\n".join([
        "CREATE TABLE orders (...) WITH ('connector' = 'mysql-cdc', 'scan.startup.mode' = 'specific-offset', "
        "'scan.startup.specific-offset.file' = 'mysql-bin.000040', 'scan.startup.specific-offset.pos' = '4');",
        line("10:00:00,000", "Connector requires binlog file 'mysql-bin.000040', but MySQL only has mysql-bin.000052, "
             "mysql-bin.000053", logger=CONTEXT),
        _check("mysql-bin.000040", 4)])
    [f] = _detect(text)
    assert f.root_cause.slug == "configured-offset-not-kept" and f.details["scan.startup.mode"] == "specific-offset"
    assert "mysql-bin.000052, 12 file(s) later" in f.summary
    assert [p.key for p in f.patches] == ["scan.startup.mode", "raise the server's binlog retention"]


def test_a_binlog_numbering_of_another_server():
    text = "\n".join([
        line("10:00:00,000", "Connector requires binlog file 'mysql-bin.000412', but MySQL only has mysql-bin.000003, "
             "mysql-bin.000004", logger=CONTEXT),
        _check("mysql-bin.000412", 5127733)])
    [f] = _detect(text)
    assert f.root_cause.slug == "server-binlog-history-differs"
    assert "newer than every file this server has" in f.summary


def test_gtids_off_on_the_server_is_another_server():
    text = "\n".join([
        line("10:00:00,000", "Connector used GTIDs previously, but MySQL does not know of any GTIDs or they are not "
             "enabled", level="WARN", logger=CONTEXT),
        _check("mysql-bin.000012", 120)])
    [f] = _detect(text)
    assert f.root_cause.slug == "server-binlog-history-differs"


def test_a_purged_file_without_a_restore_is_not_named_a_restore():
    [f] = _detect(_check("mysql-bin.000123", 88213))
    assert f.root_cause.slug == "undetermined"
    assert not any(p.key == "raise the server's binlog retention" for p in f.patches)


def test_every_wording_names_this_runbook():
    for wording in get_detector(SLUG).wordings:
        [f] = _detect(wording.example)
        assert f.runbook == SLUG, wording.example
