"""Detector sql-changelog-sink-mismatch: the node that produces the updates (a regular aggregation, a join, a Top-N or
deduplication, a changelog source) and the side that refuses them (an append-only sink, a DataStream conversion, an
operator that needs inserts) decide the verdict and the fix; no configuration key is proposed in their place."""
from __future__ import annotations

from corpus import example, incident_from_text, line
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import ingest, run_detectors

SLUG = "sql-changelog-sink-mismatch"
CLIENT = "flink-flink-client-host.log"


def _planner_error(message: str, cls: str = "org.apache.flink.table.api.TableException") -> str:
    return "\n".join([
        line("10:00:00,000", "Error while running the command.", level="ERROR",
             logger="org.apache.flink.client.cli.CliFrontend"),
        "org.apache.flink.client.program.ProgramInvocationException: The main method caused an error: " + message,
        "\tat org.apache.flink.client.program.PackagedProgram.callMainMethod(PackagedProgram.java:373)",
        f"Caused by: {cls}: {message}",
        "\tat org.apache.flink.table.planner.plan.optimize.program.FlinkChangelogModeInferenceProgram$"
        "SatisfyModifyKindSetTraitVisitor.createNewNode(FlinkChangelogModeInferenceProgram.scala:405)"])


def _detect(text: str, version: str = "1.20.3", file: str = CLIENT):
    return get_detector(SLUG).detect(incident_from_text(text, {}, version, file=file))


def _sink(table: str, kinds: str, node: str) -> str:
    return (f"Table sink '{table}' doesn't support consuming {kinds} changes which is produced by node {node}")


def test_genuine_regular_aggregation_into_files_on_both_releases(spark):
    for name in ("aggregation-into-files-1.20", "aggregation-into-files-2.3"):
        primary = run_detectors(ingest([str(example(SLUG, name))], spark)).primary
        assert (primary.runbook, primary.root_cause.slug) == (SLUG, "regular-aggregation-into-append-only-sink")
        assert primary.details["sink table"] == "default_catalog.default_database.order_totals"
        assert primary.details["producing operator"] == "GroupAggregate"
        assert primary.details["group keys"] == ["customer"]
        assert primary.details["refused changes"] == "update"
        assert primary.evidence[0].file.endswith("client-vm.log")
        upsert = next(p for p in primary.patches if p.key.startswith("declare the sink's primary key"))
        assert "CREATE TABLE order_totals (" in upsert.snippet and "PRIMARY KEY (customer) NOT ENFORCED" in upsert.snippet
        window = next(p for p in primary.patches if p.key == "aggregate per window instead")
        assert "TUMBLE(TABLE <source>" in window.snippet and "GROUP BY window_start, window_end, customer" in window.snippet
        assert not any(p.target == "flink" for p in primary.patches)  # no setting makes a file sink take updates


def test_genuine_left_join_names_the_join_and_append_only_joins(spark):
    primary = run_detectors(ingest([str(example(SLUG, "left-join-into-files-1.20"))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "regular-join-into-append-only-sink")
    assert primary.details["join type"] == "LeftOuterJoin"
    assert primary.details["refused changes"] == "update and delete"
    assert {p.key for p in primary.patches} == {"declare the sink's primary key and use a sink that consumes updates",
                                                 "join with an interval, temporal or lookup join instead"}


def test_genuine_top_n_keys_the_upsert_sink_by_partition_and_rank_number(spark):
    primary = run_detectors(ingest([str(example(SLUG, "top-n-into-files-2.3"))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "rank-into-append-only-sink")
    assert primary.details["partition keys"] == ["customer"] and primary.details["rank end"] == 3
    assert "Top-N" in primary.summary and "customer plus the rank number" in primary.summary
    upsert = next(p for p in primary.patches if p.key.startswith("declare the sink's primary key"))
    assert "PRIMARY KEY (customer, rn) NOT ENFORCED" in upsert.snippet
    first = next(p for p in primary.patches if p.key == "keep the first row instead")
    assert "PARTITION BY customer ORDER BY <time attribute> ASC" in first.snippet


def test_genuine_last_row_deduplication_on_both_releases(spark):
    for name in ("last-row-dedup-into-files-1.20", "last-row-dedup-into-files-2.3"):
        primary = run_detectors(ingest([str(example(SLUG, name))], spark)).primary
        assert (primary.runbook, primary.root_cause.slug) == (SLUG, "rank-into-append-only-sink"), name
        assert "deduplication keeping the last row" in primary.summary, name  # 2.3 calls it a Rank with rankEnd=1
        upsert = next(p for p in primary.patches if p.key.startswith("declare the sink's primary key"))
        assert "PRIMARY KEY (customer) NOT ENFORCED" in upsert.snippet, name


def test_genuine_jdbc_sink_without_a_primary_key(spark):
    primary = run_detectors(ingest([str(example(SLUG, "jdbc-sink-without-key-1.20"))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "jdbc-sink-without-primary-key")
    assert [p.key for p in primary.patches] == ["declare the JDBC table's primary key"]


def test_last_row_deduplication_is_told_from_a_top_n():
    node = "Deduplicate(keep=[LastRow], key=[customer], order=[PROCTIME])"
    [f] = _detect(_planner_error(_sink("default_catalog.default_database.latest_orders", "update and delete", node)))
    assert f.root_cause.slug == "rank-into-append-only-sink"
    assert "deduplication keeping the last row" in f.summary and f.details["keeps"] == "LastRow"
    upsert = next(p for p in f.patches if p.key.startswith("declare the sink's primary key"))
    assert "PRIMARY KEY (customer) NOT ENFORCED" in upsert.snippet  # no rank number for a deduplication


def test_genuine_over_window_fed_by_a_regular_aggregation(spark):
    primary = run_detectors(ingest([str(example(SLUG, "over-window-after-aggregation-1.20"))], spark)).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "operator-requires-insert-only-input")
    assert primary.details["refused by"] == "StreamPhysicalOverAggregate" and "sink table" not in primary.details
    assert "OverAggregate only consumes inserts" in primary.summary
    assert {p.key for p in primary.patches} == {"give the operator insert-only input", "aggregate per window instead"}
    assert not any(p.key.startswith("declare the sink's primary key") for p in primary.patches)


def test_a_first_row_deduplication_that_updates_is_not_told_to_keep_the_first_row():
    # 1.x emits updates from a first-row deduplication on event time
    node = "Deduplicate(keep=[FirstRow], key=[customer], order=[ROWTIME])"
    [f] = _detect(_planner_error(_sink("default_catalog.default_database.first_orders", "update and delete", node)))
    assert f.root_cause.slug == "rank-into-append-only-sink" and "keeping the first row" in f.summary
    assert [p.key for p in f.patches] == ["declare the sink's primary key and use a sink that consumes updates"]


def test_a_limit_that_only_passes_updates_on_is_undetermined():
    node = "Limit(offset=[0], fetch=[10])"
    [f] = _detect(_planner_error(_sink("default_catalog.default_database.sample", "update", node)))
    assert f.root_cause.slug == "undetermined" and f.details["producing operator"] == "Limit"
    assert "EXPLAIN CHANGELOG_MODE" in f.summary


def test_an_operator_named_in_the_1_11_form_is_the_refusing_side_too():
    message = ("IntervalJoin doesn't support consuming update changes which is produced by node "
               "GroupAggregate(groupBy=[customer], select=[customer, MAX(ts) AS last_ts])")
    [f] = _detect(_planner_error(message), version="1.11.4")
    assert f.root_cause.slug == "operator-requires-insert-only-input"
    assert "IntervalJoin only consumes inserts" in f.summary


def test_match_recognize_is_an_operator_too():
    message = ("Match Recognize doesn't support consuming update and delete changes which is produced by node "
               "Join(joinType=[InnerJoin], where=[(id = id0)], select=[id, v, id0], leftInputSpec=[NoUniqueKey], "
               "rightInputSpec=[NoUniqueKey])")
    [f] = _detect(_planner_error(message))
    assert f.root_cause.slug == "operator-requires-insert-only-input" and f.details["refused by"] == "Match Recognize"
    assert [p.key for p in f.patches] == ["give the operator insert-only input"]


def test_a_changelog_source_keys_the_sink_by_the_source_key():
    node = "ChangelogNormalize(key=[order_id])"
    [f] = _detect(_planner_error(_sink("default_catalog.default_database.orders_copy", "update and delete", node)))
    assert f.root_cause.slug == "changelog-source-into-append-only-sink"
    assert f.details["upsert keys"] == ["order_id"]
    fmt = next(p for p in f.patches if p.key == "write the changes in a changelog format")
    assert "'format' = 'debezium-json'" in fmt.snippet


def test_to_data_stream_of_an_updating_table_gets_to_changelog_stream():
    node = "GroupAggregate(groupBy=[customer], select=[customer, COUNT(*) AS cnt])"
    [f] = _detect(_planner_error(_sink("*anonymous_datastream_sink$1*", "update", node)))
    assert f.root_cause.slug == "datastream-conversion-of-updating-table"
    [p] = f.patches
    assert "toChangelogStream(table)" in p.snippet


def test_legacy_to_append_stream_check_is_the_datastream_conversion():
    [f] = _detect(_planner_error("Table is not an append-only table. Use the toRetractStream() in order to handle "
                                 "add and retract messages.", ), version="1.12.7")
    assert f.root_cause.slug == "datastream-conversion-of-updating-table"


def test_an_anonymous_sink_names_its_connector():
    node = "GroupAggregate(groupBy=[customer], select=[customer, COUNT(*) AS cnt])"
    [f] = _detect(_planner_error(_sink("*anonymous_filesystem$3*", "update", node)))
    assert f.root_cause.slug == "regular-aggregation-into-append-only-sink"
    assert f.details["sink connector"] == "filesystem"


def test_before_1_13_the_window_is_a_group_window():
    node = "GroupAggregate(groupBy=[customer], select=[customer, SUM(amount) AS EXPR$1])"
    [f] = _detect(_planner_error(_sink("default_catalog.default_database.totals", "update", node)), version="1.12.7")
    window = next(p for p in f.patches if p.key == "aggregate per window instead")
    assert "GROUP BY TUMBLE(<event-time column>, INTERVAL '1' MINUTE), customer" in window.snippet
    assert "before Flink 1.13" in window.reason


def test_jdbc_sink_without_a_primary_key():
    text = _planner_error("please declare primary key for sink table when query contains update/delete record.",
                          cls="java.lang.IllegalStateException")
    [f] = _detect(text)
    assert f.root_cause.slug == "jdbc-sink-without-primary-key"
    [p] = f.patches
    assert "'connector' = 'jdbc'" in p.snippet and "PRIMARY KEY (<key columns>) NOT ENFORCED" in p.snippet


def test_a_message_cut_before_the_node_is_undetermined_and_says_what_to_collect():
    text = ("org.apache.flink.table.api.TableException: Table sink 'default_catalog.default_database.totals' doesn't "
            "support consuming update and delete changes which is produced by node")
    [f] = _detect(text, file="ticket.txt")
    assert f.root_cause.slug == "undetermined" and f.confidence < 0.5
    assert "EXPLAIN CHANGELOG_MODE" in f.summary


def test_the_wording_is_read_from_a_pasted_excerpt_and_the_confidence_drops():
    node = "GroupAggregate(groupBy=[customer], select=[customer, SUM(amount) AS EXPR$1])"
    text = "Caused by: org.apache.flink.table.api.TableException: " + _sink("default_catalog.default_database.t",
                                                                         "update", node)
    [f] = _detect(text, file="ticket.txt")
    assert f.root_cause.slug == "regular-aggregation-into-append-only-sink" and f.confidence < 0.9
    assert "excerpt" in f.summary


def test_upsert_key_conflicts_and_other_planner_errors_are_not_this_runbook():
    for message in ("Can't generate a valid execution plan for the given query:\n\nLogicalSink(table=[t])",
                    "The query has an upsert key that differs from the primary key of the sink table "
                    "'default_catalog.default_database.t'."):
        assert _detect(_planner_error(message)) == []


def test_genuine_updating_queries_that_run_are_not_this_runbook(spark):
    for name in ("near-miss-upsert-sink-2.3", "near-miss-window-aggregation-1.20"):
        diagnosis = run_detectors(ingest([str(example(SLUG, name))], spark))
        assert not any(f.runbook == SLUG for f in diagnosis.findings), name
