"""A streaming SQL query produces update (or delete) changes that the sink or the next operator cannot consume:
``TableException: Table sink 'default_catalog.default_database.order_totals' doesn't support consuming update changes
which is produced by node GroupAggregate(groupBy=[customer], select=[customer, SUM(amount) AS EXPR$1])``.

The planner's changelog-mode inference (``FlinkChangelogModeInferenceProgram``) names both ends: the one that refuses
the changes (a table sink, a DataStream conversion, or an operator that needs insert-only input such as an interval
join or an OVER window) and the node that produces them. The causes follow the producing node, because it decides the
fix:
- ``regular-aggregation-into-append-only-sink``: a regular GROUP BY (``GroupAggregate``) updates its result for every
  input row; the sink (filesystem, Kafka with a json/avro/csv format...) only appends;
- ``regular-join-into-append-only-sink``: a regular join (``Join``), an outer join above all, retracts and updates rows;
- ``rank-into-append-only-sink``: a Top-N (``Rank``, ``SortLimit``) or a deduplication keeping the last row
  (``Deduplicate(keep=[LastRow])``) replaces the rows it emitted;
- ``changelog-source-into-append-only-sink``: the source itself is a changelog (CDC, upsert-kafka, ``ChangelogNormalize``);
- ``datastream-conversion-of-updating-table``: ``toDataStream``/``toAppendStream`` of an updating table;
- ``operator-requires-insert-only-input``: an operator that only takes appends (interval join, OVER window, MATCH_RECOGNIZE,
  window Top-N...) is fed by an updating node;
- ``jdbc-sink-without-primary-key``: the JDBC sink refuses updates because its table declares no PRIMARY KEY.
"""
from __future__ import annotations

import re

from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence.episodes import is_excerpt
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording

SLUG = "sql-changelog-sink-mismatch"

# FlinkChangelogModeInferenceProgram.SatisfyModifyKindSetTraitVisitor.createNewNode (1.11 - 2.x):
#   s"$requester doesn't support consuming $kinds changes which is produced by node ${node.getRelDetailedDescription}"
# The requester is "Table sink '<identifier>'", an operator's physical node type (getNodeName strips "StreamExec", the
# prefix of 1.11.4's nodes: "OverAggregate" there, "StreamPhysicalOverAggregate" in 1.15.4 to 2.3.0, as 1.20.3 logs it),
# "Match Recognize", or a legacy sink type ("AppendStreamTableSink", "toAppendStream").
MISMATCH = re.compile(r"(?P<requester>Table sink '[^']*'|Match Recognize|\w+) doesn't support consuming "
                      r"(?P<kinds>update and delete|update|delete) changes which is produced by node"
                      r"(?: (?P<node>(?P<node_name>\w+)(?:\((?P<args>.*))?))?")
# The legacy sinks' checks (StreamExecLegacySink in 1.11.4, CommonExecLegacySink in 1.15.4, 1.20.3 and 2.3.0).
LEGACY_APPEND = re.compile(r"AppendStreamTableSink requires that Table has only insert changes"
                           r"|Table is not an append-only table\. Use the toRetractStream\(\)")
# flink-connector-jdbc, JdbcDynamicTableSink.validatePrimaryKey (since the connector's first release, FLINK-17029).
JDBC_NO_KEY = re.compile(r"please declare primary key for sink table when query contains update/delete record")

# Regular aggregations. A group window (GroupWindowAggregate) only updates with early/late firing or an updating
# input, and a Limit or a Union only passes its input's updates on: those stay undetermined.
AGGREGATES = ("GroupAggregate", "GlobalGroupAggregate", "IncrementalGroupAggregate", "PythonGroupAggregate",
              "GroupTableAggregate", "PythonGroupTableAggregate")
JOINS = ("Join", "MultiJoin")
RANKS = ("Rank", "Deduplicate", "SortLimit")
CHANGELOG_SOURCES = ("TableSourceScan", "ChangelogNormalize", "DataStreamScan", "LegacyTableSourceScan",
                     "DropUpdateBefore")
DATASTREAM_REQUESTERS = ("toAppendStream", "AppendStreamTableSink", "StreamTableSink")
ANONYMOUS_DATASTREAM = re.compile(r"\*anonymous_datastream_sink\$\d+\*")
ANONYMOUS_SINK = re.compile(r"\*anonymous_(?P<connector>[\w.-]+)\$\d+\*")

_UPSERT_SINK = "code:declare the sink's primary key and use a sink that consumes updates"
_WINDOW = "code:aggregate per window instead"
_INTERVAL_JOIN = "code:join with an interval, temporal or lookup join instead"
_FIRST_ROW = "code:keep the first row instead"
_CHANGELOG_FORMAT = "code:write the changes in a changelog format"
_CHANGELOG_STREAM = "code:convert with toChangelogStream"
_APPEND_INPUT = "code:give the operator insert-only input"
_JDBC_KEY = "code:declare the JDBC table's primary key"


class SqlChangelogSinkMismatch(Detector):
    slug = SLUG
    title = "SQL sink or operator cannot consume a query's update changes"
    category = "job-code"
    meaning = ("A streaming query produces update or delete changes (a regular aggregation, join, Top-N, "
               "deduplication or a changelog source) and the table sink or the next operator only accepts inserts: "
               "the planner rejects the statement.")
    versions = ("1.11 – 2.x (FlinkChangelogModeInferenceProgram's wording checked in 1.11.4, 1.15.4, 1.20.3 and 2.3.0; "
                "the legacy sinks' checks in the same releases)")
    exception_classes = ()
    config_keys = (
        "execution.runtime-mode",
        "table.exec.sink.upsert-materialize",
        "table.exec.mini-batch.enabled",
    )
    collect_next = ("the whole TableException (its 'which is produced by node ...' part), the sink table's CREATE "
                    "TABLE statement and the query's `EXPLAIN CHANGELOG_MODE INSERT INTO ...` plan")
    signatures = (
        r"doesn't support consuming (?:update and delete|update|delete) changes",
        LEGACY_APPEND.pattern,
        JDBC_NO_KEY.pattern,
    )
    wordings = (
        Wording(SLUG, r"doesn't support consuming (?:update and delete|update|delete) changes which is produced by node",
                "1.11 – 2.x", "FlinkChangelogModeInferenceProgram$SatisfyModifyKindSetTraitVisitor.createNewNode "
                "(checked in 1.11.4, 1.15.4, 1.20.3 and 2.3.0)",
                "org.apache.flink.table.api.TableException: Table sink 'default_catalog.default_database.order_totals' "
                "doesn't support consuming update changes which is produced by node GroupAggregate(groupBy=[customer], "
                "select=[customer, SUM(amount) AS EXPR$1])"),
        Wording(SLUG, r"AppendStreamTableSink requires that Table has only insert changes",
                "1.11 – 2.x", "StreamExecLegacySink (checked in 1.11.4), CommonExecLegacySink (checked in "
                "1.15.4, 1.20.3 and 2.3.0)",
                "org.apache.flink.table.api.TableException: AppendStreamTableSink requires that Table has only "
                "insert changes."),
        Wording(SLUG, r"Table is not an append-only table\. Use the toRetractStream\(\)",
                "1.11 – 2.x", "StreamExecLegacySink (checked in 1.11.4), CommonExecLegacySink (checked in "
                "1.15.4, 1.20.3 and 2.3.0)",
                "org.apache.flink.table.api.TableException: Table is not an append-only table. Use the "
                "toRetractStream() in order to handle add and retract messages."),
        Wording(SLUG, JDBC_NO_KEY.pattern, "1.11 – 2.x",
                "flink-connector-jdbc JdbcDynamicTableSink.validatePrimaryKey (the connector's source)",
                "java.lang.IllegalStateException: please declare primary key for sink table when query contains "
                "update/delete record."),
    )
    root_causes = (
        RootCause("regular-aggregation-into-append-only-sink",
                  "A regular (non-windowed) GROUP BY updates its result for every input row, and the sink only "
                  "appends rows.",
                  "The refusing side is a table sink and the producing node is a GroupAggregate (or another "
                  "regular aggregation).",
                  patches=(_UPSERT_SINK, _WINDOW)),
        RootCause("regular-join-into-append-only-sink",
                  "A regular join retracts and updates the rows it emitted (an outer join whenever the other side "
                  "arrives, any join of updating inputs), and the sink only appends rows.",
                  "The refusing side is a table sink and the producing node is a Join.",
                  patches=(_UPSERT_SINK, _INTERVAL_JOIN)),
        RootCause("rank-into-append-only-sink",
                  "A Top-N or a deduplication keeping the last row replaces rows it already emitted, and the sink "
                  "only appends rows.",
                  "The refusing side is a table sink and the producing node is a Rank, SortLimit or a Deduplicate.",
                  patches=(_UPSERT_SINK, _FIRST_ROW)),
        RootCause("changelog-source-into-append-only-sink",
                  "The source table is itself a changelog (CDC, upsert-kafka, a changelog format) and the sink only "
                  "appends rows.",
                  "The refusing side is a table sink and the producing node is the source scan or its "
                  "ChangelogNormalize.",
                  patches=(_UPSERT_SINK, _CHANGELOG_FORMAT)),
        RootCause("datastream-conversion-of-updating-table",
                  "An updating table is converted to a DataStream of inserts (toDataStream, toAppendStream).",
                  "The refusing side is the DataStream conversion ('*anonymous_datastream_sink$N*', toAppendStream) "
                  "or the legacy 'Table is not an append-only table' check.",
                  patches=(_CHANGELOG_STREAM,)),
        RootCause("operator-requires-insert-only-input",
                  "An operator that only consumes inserts (an interval join, an OVER window, MATCH_RECOGNIZE, a window "
                  "Top-N or join...) is fed by a node that produces updates.",
                  "The refusing side is an operator, not a sink.",
                  patches=(_APPEND_INPUT, _WINDOW)),
        RootCause("jdbc-sink-without-primary-key",
                  "The JDBC sink writes updates only by key, and its table declares no PRIMARY KEY.",
                  "flink-connector-jdbc's 'please declare primary key for sink table' check.",
                  patches=(_JDBC_KEY,),
                  versions="1.11 – 2.x (the JDBC connector's check since its first release, FLINK-17029; read in its "
                           "3.3.0 source)"),
        RootCause("undetermined",
                  "A sink or operator refused the query's changes, but the logs do not say which node produced them.",
                  "The wording without its 'which is produced by node ...' part, or a node this runbook does not "
                  "know.",
                  patches=(_UPSERT_SINK,),
                  next_evidence="the whole TableException, the sink table's CREATE TABLE statement and the query's "
                                "`EXPLAIN CHANGELOG_MODE INSERT INTO ...` plan (its changelogMode=[I,UB,UA,D] per node "
                                "shows which one first produces updates)."),
    )

    templates = {
        "regular-aggregation-into-append-only-sink":
            "{refuser} only appends rows, and the query's regular aggregation {node} updates its result for every "
            "input row ({kinds} changes). Write the result to a sink that consumes updates, keyed by {keys}, or "
            "aggregate per window if the output must stay append-only.",
        "regular-join-into-append-only-sink":
            "{refuser} only appends rows, and the query's regular join {node} retracts and updates the rows it "
            "emitted ({kinds} changes). Write the result to a sink that consumes updates, keyed by the result's "
            "unique key, or use an interval, temporal or lookup join, which append.",
        "rank-into-append-only-sink":
            "{refuser} only appends rows, and the query's {what} {node} replaces rows it already emitted ({kinds} "
            "changes). Write the result to a sink that consumes updates, keyed by {keys}, or keep the first row "
            "per key, which appends.",
        "changelog-source-into-append-only-sink":
            "{refuser} only appends rows, and the source {node} is itself a changelog ({kinds} changes). Write the "
            "changes to a sink that consumes them: keyed by {keys}, or in a changelog format (debezium-json, "
            "canal-json...).",
        "datastream-conversion-of-updating-table":
            "The query's table is converted to a DataStream of inserts ({refuser}), but {node} produces {kinds} "
            "changes: convert it with toChangelogStream, which carries each row's kind.",
        "operator-requires-insert-only-input":
            "{refuser} only consumes inserts, and it is fed by {node}, which produces {kinds} changes. Apply "
            "{refuser} to the insert-only rows before {producer}, or make {producer} append-only.",
        "jdbc-sink-without-primary-key":
            "The JDBC sink gets update or delete changes, and its table declares no PRIMARY KEY: the JDBC sink "
            "writes changes only by key (an upsert statement). Declare the key in the Flink table (and the same "
            "unique key in the database).",
        "undetermined":
            "{refuser} does not accept the query's {kinds} changes, and the logs do not say which node produces "
            "them.",
        "undetermined node":
            "{refuser} does not accept the {kinds} changes of {node}: a node this runbook cannot tell the cause "
            "from (it may pass on the updates of a node before it).",
        "legacy refuser": "A legacy append-only sink (AppendStreamTableSink)",
        "to append stream": "toAppendStream",
        "some changes": "update or delete",
        "the group keys": "the GROUP BY columns ({columns})",
        "no group keys": "a key column (a global aggregation has none: prefer a windowed aggregation)",
        "the rank keys": "{columns}",
        "the rank keys and number": "{columns} plus the rank number (select it)",
        "unknown keys": "the result's unique key",
        "the query": "the query",
        "top-n": "Top-N",
        "last-row deduplication": "deduplication keeping the last row",
        "first-row deduplication": "deduplication keeping the first row (on event time before 2.x; with "
                                   "mini-batch or an updating input on 2.x)",
        "note refused": "{refuser} refuses {kinds} changes from {producer}",
        "excerpt": "This is an excerpt: the planning process's log was not part of it.",
        "upsert sink":
            "An upsert sink stores the latest row per primary key: the planner sends it inserts, updates and "
            "deletes by key, so the same query runs. upsert-kafka needs a PRIMARY KEY; a JDBC table needs it "
            "(and the database table the same unique key) to write updates; 'print' and 'blackhole' accept any "
            "change. table.exec.sink.upsert-materialize does not apply: it only orders changes for a sink that "
            "already has a primary key.",
        "window":
            "A windowed aggregation emits each window's result once, when the watermark passes the window's end: "
            "its output is insert-only, so the append-only sink can stay.{legacy}",
        "window for operator":
            "A windowed aggregation emits each window's result once, when the watermark passes the window's end: "
            "its output is insert-only, so {refuser} can consume it.",
        "window legacy note": " (before Flink 1.13 the window table functions do not exist: GROUP BY TUMBLE(...) "
                              "is the same insert-only group window)",
        "interval join":
            "An interval join (a time bound between both sides), an event-time temporal join of an append-only "
            "stream with a versioned table, or a lookup join emits each joined row once, with no retraction.",
        "first row":
            "A deduplication that keeps the first row per key (ORDER BY the time attribute ASC) emits each key "
            "once: insert-only on processing time in every release, and on Flink 2.x also on event time when "
            "table.exec.mini-batch.enabled is false (its default).",
        "changelog format":
            "A Kafka sink takes its changelog mode from its value format: 'json', 'avro' and 'csv' only insert; "
            "'debezium-json' (or 'canal-json', 'ogg-json') encodes inserts, updates and deletes.",
        "changelog stream":
            "toChangelogStream emits every change with its RowKind (+I, -U, +U, -D); toDataStream and "
            "toAppendStream only accept inserts.",
        "append input":
            "{refuser} keeps no history of rows that can be retracted: it needs insert-only input. Apply it to the "
            "rows before {producer}, or replace {producer} by an insert-only equivalent (a windowed aggregation, a "
            "first-row deduplication).",
        "jdbc key":
            "The JDBC sink writes by key when its table declares a PRIMARY KEY (an upsert statement per dialect); "
            "without one it can only insert.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        hits = [(ev, m) for ev, m in incident.find(MISMATCH)]
        legacy = [(ev, m) for ev, m in incident.find(LEGACY_APPEND)]
        jdbc = [(ev, m) for ev, m in incident.find(JDBC_NO_KEY)]
        if not (hits or legacy or jdbc):
            return []
        if jdbc:
            event, _ = _first_logged(jdbc)
            return [self._finding(incident, "jdbc-sink-without-primary-key", self.say("jdbc-sink-without-primary-key"),
                                  event, [ev for ev, _ in jdbc], {"refused by": "the JDBC sink (no PRIMARY KEY)"},
                                  [self.code_patch(_JDBC_KEY[5:], _jdbc_ddl(), self.say("jdbc key"))])]
        if hits:
            event, m = _first_logged(hits)
            requester, kinds = m["requester"], m["kinds"]
            node, name, args = (m["node"] or "").strip(), m["node_name"] or "", m["args"] or ""
            same = [ev for ev, mm in hits if mm["requester"] == requester]
        else:
            event, m = _first_logged(legacy)
            to_stream = "toRetractStream" in m.group(0)
            requester = self.say("to append stream") if to_stream else self.say("legacy refuser")
            kinds, node, name, args = self.say("some changes"), "", "", ""
            same = [ev for ev, _ in legacy]
        sink = requester.startswith("Table sink '")
        table = requester[len("Table sink '"):-1] if sink else None
        to_datastream = bool(table and ANONYMOUS_DATASTREAM.fullmatch(table)) or requester in DATASTREAM_REQUESTERS \
            or (not hits and "toRetractStream" in m.group(0))
        # the operator as a user writes it: "OverAggregate" of "StreamPhysicalOverAggregate"
        refuser = requester if sink else requester.removeprefix("StreamPhysical")
        if to_datastream:
            cause = "datastream-conversion-of-updating-table"
        elif not name:
            cause = "undetermined"
        elif not sink and requester not in ("AppendStreamTableSink", "StreamTableSink", "RetractStreamTableSink",
                                             "UpsertStreamTableSink"):
            cause = "operator-requires-insert-only-input"
        elif name in AGGREGATES:
            cause = "regular-aggregation-into-append-only-sink"
        elif name in JOINS:
            cause = "regular-join-into-append-only-sink"
        elif name in RANKS:
            cause = "rank-into-append-only-sink"
        elif name in CHANGELOG_SOURCES:
            cause = "changelog-source-into-append-only-sink"
        else:
            cause = "undetermined"
        facts = _node_facts(name, args)
        details = {"refused by": requester, "refused changes": kinds,
                   "producing node": node or "not in the logs", "producing operator": name or "unknown"}
        if table:
            details["sink table"] = table
            anonymous = ANONYMOUS_SINK.fullmatch(table)
            if anonymous and not to_datastream:
                details["sink connector"] = anonymous["connector"]
        details.update({k: v for k, v in facts.items() if v})
        node_text = node or name or "?"
        keys = self._keys(cause, name, facts)
        if cause == "regular-aggregation-into-append-only-sink":
            summary = self.say(cause, refuser=refuser, node=node_text, kinds=kinds, keys=keys)
        elif cause == "regular-join-into-append-only-sink":
            summary = self.say(cause, refuser=refuser, node=node_text, kinds=kinds)
        elif cause == "rank-into-append-only-sink":
            summary = self.say(cause, refuser=refuser, what=self._rank_kind(name, facts), node=node_text,
                               kinds=kinds, keys=keys)
        elif cause == "changelog-source-into-append-only-sink":
            summary = self.say(cause, refuser=refuser, node=node_text, kinds=kinds, keys=keys)
        elif cause == "datastream-conversion-of-updating-table":
            summary = self.say(cause, refuser=refuser, node=node_text if name else self.say("the query"), kinds=kinds)
        elif cause == "operator-requires-insert-only-input":
            summary = self.say(cause, refuser=refuser, node=node_text, kinds=kinds, producer=name)
        elif name:
            summary = self.say("undetermined node", refuser=refuser, kinds=kinds, node=node_text)
        else:
            summary = self.say("undetermined", refuser=refuser, kinds=kinds)
        patches = self._patches(incident, cause, refuser, table, name, facts, keys)
        return [self._finding(incident, cause, summary, event, same, details, patches,
                              note=self.say("note refused", refuser=refuser, kinds=kinds, producer=name or "?"))]

    def _finding(self, incident, cause, summary, event, same, details, patches, note=""):
        excerpt = is_excerpt(incident) and event.role != "client" and "client" not in event.file
        if excerpt:
            summary += " " + self.say("excerpt")
        evidence = [event] + [ev for ev in same if ev is not event][:2]
        confidence = (0.9 if cause != "undetermined" else 0.45) - (0.1 if excerpt else 0)
        return self.finding(cause, summary, evidence, confidence=confidence, patches=patches,
                            notes={0: note} if note else None, details=details)

    def _keys(self, cause: str, name: str, facts: dict) -> str:
        columns = facts.get("group keys") or facts.get("partition keys") or facts.get("upsert keys")
        if cause == "regular-aggregation-into-append-only-sink":
            return self.say("the group keys", columns=", ".join(columns)) if columns else self.say("no group keys")
        if cause == "rank-into-append-only-sink" and columns:
            if name == "Rank" and facts.get("rank end") not in (None, 1):
                return self.say("the rank keys and number", columns=", ".join(columns))
            return self.say("the rank keys", columns=", ".join(columns))
        if cause == "changelog-source-into-append-only-sink" and columns:
            return self.say("the rank keys", columns=", ".join(columns))
        return self.say("unknown keys")

    def _rank_kind(self, name: str, facts: dict) -> str:
        if name == "Deduplicate" or (name == "Rank" and facts.get("rank end") == 1):
            return self.say("last-row deduplication") if facts.get("keeps") != "FirstRow" \
                else self.say("first-row deduplication")
        return self.say("top-n")

    def _patches(self, incident, cause, refuser, table, name, facts, keys):
        out = []
        object_name = (table or "<sink table>").rsplit(".", 1)[-1].strip("`")
        columns = facts.get("group keys") or facts.get("partition keys") or facts.get("upsert keys") or []
        if cause in ("regular-aggregation-into-append-only-sink", "regular-join-into-append-only-sink",
                     "rank-into-append-only-sink", "changelog-source-into-append-only-sink", "undetermined") \
                and (table or cause != "undetermined"):
            key_columns = list(columns)
            if name == "Rank" and facts.get("rank end") not in (None, 1):
                key_columns.append("rn")
            out.append(self.code_patch(_UPSERT_SINK[5:], _upsert_ddl(object_name, key_columns), self.say("upsert sink")))
        if cause == "regular-aggregation-into-append-only-sink":
            version = incident.version_tuple
            legacy = version is not None and version < (1, 13)
            out.append(self.code_patch(_WINDOW[5:], _window_sql(object_name, facts.get("group keys") or [], legacy),
                                       self.say("window", legacy=self.say("window legacy note") if legacy else "")))
        elif cause == "regular-join-into-append-only-sink":
            out.append(self.code_patch(_INTERVAL_JOIN[5:], _interval_join_sql(), self.say("interval join")))
        elif cause == "rank-into-append-only-sink" and facts.get("keeps") != "FirstRow":
            out.append(self.code_patch(_FIRST_ROW[5:], _first_row_sql(facts.get("partition keys") or []),
                                       self.say("first row")))
        elif cause == "changelog-source-into-append-only-sink":
            out.append(self.code_patch(_CHANGELOG_FORMAT[5:], _changelog_format_ddl(object_name),
                                       self.say("changelog format")))
        elif cause == "datastream-conversion-of-updating-table":
            out.append(self.code_patch(_CHANGELOG_STREAM[5:], _changelog_stream_java(), self.say("changelog stream")))
        elif cause == "operator-requires-insert-only-input":
            out.append(self.code_patch(_APPEND_INPUT[5:], _append_input_sql(refuser, name),
                                       self.say("append input", refuser=refuser, producer=name)))
            if name in AGGREGATES:
                out.append(self.code_patch(_WINDOW[5:], _window_sql("<result>", facts.get("group keys") or [], False),
                                           self.say("window for operator", refuser=refuser)))
        return out


def _first_logged(hits: list[tuple[Event, re.Match]]) -> tuple[Event, re.Match]:
    """A log record (with its level and logger) before the same trace printed by a command line tool; among those,
    one that names the producing node."""
    ordered = sorted(hits, key=lambda h: (h[0].level is None, not _names_node(h[1])))
    return ordered[0]


def _names_node(m: re.Match) -> bool:
    return "node_name" in m.re.groupindex and bool(m["node_name"])


def _bracketed(args: str, key: str) -> list[str] | None:
    """The columns of ``key=[a, b]`` in a node description, None when the node has no such attribute."""
    found = re.search(r"(?:^|[\s,(])" + re.escape(key) + r"=\[([^\]]*)\]", args)
    if not found:
        return None
    return [c.strip() for c in found.group(1).split(",") if c.strip()]


def _node_facts(name: str, args: str) -> dict:
    """What the node's description says about its keys: the GROUP BY columns of an aggregation, the partition of a
    Top-N or deduplication and what it keeps, the key of a ChangelogNormalize, the type of a join."""
    facts: dict = {}
    if name in AGGREGATES:
        facts["group keys"] = _bracketed(args, "groupBy") or _bracketed(args, "finalAggGrouping") or []
    elif name in ("Rank", "SortLimit"):
        facts["partition keys"] = _bracketed(args, "partitionBy") or []
        end = re.search(r"rankEnd=(\d+)", args)
        if end:
            facts["rank end"] = int(end.group(1))
        order = _bracketed(args, "orderBy")
        if order:
            facts["order"] = ", ".join(order)
            if facts.get("rank end") == 1:
                facts["keeps"] = "LastRow" if "DESC" in order[0] else "FirstRow"
    elif name == "Deduplicate":
        facts["partition keys"] = _bracketed(args, "key") or []
        keep = _bracketed(args, "keep")
        if keep:
            facts["keeps"] = keep[0]
        order = _bracketed(args, "order")
        if order:
            facts["order"] = order[0]
    elif name == "ChangelogNormalize":
        facts["upsert keys"] = _bracketed(args, "key") or []
    elif name in JOINS:
        kind = _bracketed(args, "joinType")
        if kind:
            facts["join type"] = kind[0]
    elif name in CHANGELOG_SOURCES:
        table = re.search(r"table=\[\[([^\]]*)\]", args)
        if table:
            facts["source table"] = ".".join(p.strip() for p in table.group(1).split(","))
    return facts


def _upsert_ddl(table: str, keys: list[str]) -> str:
    key = ", ".join(keys) if keys else "<key columns>"
    return (f"CREATE TABLE {table} (\n"
            f"  -- the same columns as before, then:\n"
            f"  PRIMARY KEY ({key}) NOT ENFORCED\n"
            f") WITH (\n"
            f"  'connector' = 'upsert-kafka',  -- or 'jdbc' (a database table with that key), or another sink that\n"
            f"                                 -- consumes updates\n"
            f"  'topic' = '{table}',\n"
            f"  'properties.bootstrap.servers' = '<brokers>',\n"
            f"  'key.format' = 'json',\n"
            f"  'value.format' = 'json'\n"
            f");")


def _window_sql(table: str, keys: list[str], legacy: bool) -> str:
    cols = ", ".join(keys) if keys else "<group columns>"
    if legacy:
        return (f"INSERT INTO {table}\n"
                f"SELECT TUMBLE_START(<event-time column>, INTERVAL '1' MINUTE), {cols}, <aggregates>\n"
                f"FROM <source>\n"
                f"GROUP BY TUMBLE(<event-time column>, INTERVAL '1' MINUTE), {cols};")
    return (f"INSERT INTO {table}\n"
            f"SELECT window_start, window_end, {cols}, <aggregates>\n"
            f"FROM TABLE(TUMBLE(TABLE <source>, DESCRIPTOR(<event-time column>), INTERVAL '1' MINUTE))\n"
            f"GROUP BY window_start, window_end, {cols};\n"
            f"-- the sink gets window_start/window_end columns; the source needs a WATERMARK")


def _interval_join_sql() -> str:
    return ("-- interval join: both sides append-only, a time bound between them\n"
            "SELECT ... FROM orders o JOIN shipments s ON o.order_id = s.order_id\n"
            "  AND s.ship_time BETWEEN o.order_time AND o.order_time + INTERVAL '4' HOUR;\n"
            "-- lookup join: enrich each row with the dimension table's current value\n"
            "SELECT ... FROM orders o JOIN customers FOR SYSTEM_TIME AS OF o.proc_time AS c\n"
            "  ON o.customer = c.customer;")


def _first_row_sql(keys: list[str]) -> str:
    cols = ", ".join(keys) if keys else "<key columns>"
    return ("SELECT * FROM (\n"
            f"  SELECT *, ROW_NUMBER() OVER (PARTITION BY {cols} ORDER BY <time attribute> ASC) AS rn\n"
            "  FROM <source>\n"
            ") WHERE rn = 1;")


def _changelog_format_ddl(table: str) -> str:
    return (f"CREATE TABLE {table} (\n"
            f"  -- the same columns as before\n"
            f") WITH (\n"
            f"  'connector' = 'kafka',\n"
            f"  'topic' = '{table}',\n"
            f"  'properties.bootstrap.servers' = '<brokers>',\n"
            f"  'format' = 'debezium-json'  -- encodes inserts, updates and deletes\n"
            f");")


def _changelog_stream_java() -> str:
    return ("DataStream<Row> changes = tableEnv.toChangelogStream(table);\n"
            "// each Row carries its kind: row.getKind() is INSERT, UPDATE_BEFORE, UPDATE_AFTER or DELETE")


def _append_input_sql(refuser: str, producer: str) -> str:
    return (f"-- {refuser} needs insert-only input; {producer} emits updates.\n"
            f"-- Either apply {refuser} to the source rows first and {producer} after it,\n"
            f"-- or replace {producer} by an insert-only form:\n"
            f"--   a window aggregation: FROM TABLE(TUMBLE(...)) GROUP BY window_start, window_end, ...\n"
            f"--   a first-row deduplication:\n"
            f"--     ROW_NUMBER() OVER (PARTITION BY ... ORDER BY <time attribute> ASC) = 1")


def _jdbc_ddl() -> str:
    return ("CREATE TABLE <sink table> (\n"
            "  -- the same columns as before, then the key the query updates by (the GROUP BY columns,\n"
            "  -- the partition of a Top-N...):\n"
            "  PRIMARY KEY (<key columns>) NOT ENFORCED\n"
            ") WITH (\n"
            "  'connector' = 'jdbc',\n"
            "  'url' = '<jdbc url>',\n"
            "  'table-name' = '<database table with the same unique key>'\n"
            ");")
