"""A MySQL CDC source asks for a binlog position the server no longer keeps.

Two places say so, in their own words:

- the connector's check before it reads the binlog (Flink CDC ``StatefulTaskContext#loadStartingOffsetState``,
  2.2 – 3.6, copied from Debezium's ``MySqlConnectorTask``): ``The connector is trying to read binlog starting at
  Struct{…,file=mysql-bin.000123,pos=88213,…}, but this is no longer available on the server. Reconfigure the
  connector to use a snapshot when needed.``, after its INFO ``Connector requires binlog file '…', but MySQL only
  has …`` (by file name) or ``Connector last known GTIDs are …, but MySQL has …`` / ``Some of the GTIDs needed to
  replicate have been already purged`` (by GTID set); Debezium's own connector prints ``… starting at SourceInfo
  [currentGtid=…, currentBinlogFilename=…]``;
- the server, when the binlog client asks for a file or GTIDs it purged (error 1236, wrapped by
  ``MySqlStreamingChangeEventSource#wrap`` as ``… Error code: 1236; SQLSTATE: HY000.``): ``Could not find first log
  file name in binary log index file``, or with GTIDs ``The slave is connecting using CHANGE MASTER TO
  MASTER_AUTO_POSITION = 1, but the master has purged binary logs containing GTIDs that the slave requires.`` (MySQL
  8.0.23+: ``Cannot replicate because the master|source purged required binary logs.``, to which Flink CDC 2.4+
  appends ``The required binary logs are no longer available on the server.``).

Why the position is gone is read around it: a restore from a savepoint or checkpoint (and how long the job was
stopped, how old the offset's last event is); a server whose binlog files or GTIDs are not the ones the offset was
taken on (a failover to another server); a start offset configured with ``scan.startup.mode`` that the server
already purged. Nothing in the connector can fetch purged binlog: the fixes are a new snapshot, or the server's
retention.
"""
from __future__ import annotations

import datetime as dt
import re

from flink_runbooks.detectors.base import Detector, signature
from flink_runbooks.evidence.episodes import failure_events, is_excerpt, wall_seconds
from flink_runbooks.evidence.restore import SAVEPOINT_START, SNAPSHOT_RESTORED
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording

SLUG = "cdc-binlog-unavailable"

# StatefulTaskContext#loadStartingOffsetState (Flink CDC 2.2 – 3.6), MySqlConnectorTask (Debezium 1.x)
CHECK = re.compile(r"The connector is trying to read binlog starting at (?P<at>.+?), but this is no longer "
                   r"available on the server")
# the server's answers to the binlog client (error 1236), as Debezium wraps them
FILE_PURGED = re.compile(r"Could not find first log file name in binary log index file")
GTID_PURGED = re.compile(r"the master has purged binary logs containing GTIDs that the slave requires|"
                         r"Cannot replicate because the (?:master|source) purged required binary logs")
# the check's opening words alone: a pasted message wrapped at 80 or 120 columns keeps them on its first line
CHECK_START = re.compile(r"The connector is trying to read binlog starting at")
UNAVAILABLE = re.compile(rf"{CHECK_START.pattern}|{FILE_PURGED.pattern}|{GTID_PURGED.pattern}")
# StatefulTaskContext's INFO/WARN lines before the check
REQUIRES_FILE = re.compile(r"Connector requires binlog file '(?P<file>[^']+)', but MySQL only has (?P<has>[^\n]*)")
GTIDS_DIFFER = re.compile(r"Connector last known GTIDs are (?P<ours>\S.*?), but MySQL has (?P<server>\S[^\n]*)")
NO_GTIDS = re.compile(r"Connector used GTIDs previously, but MySQL does not know of any GTIDs or they are not enabled")
GTIDS_PURGED_WARN = re.compile(r"Some of the GTIDs needed to replicate have been already purged")
STARTING_OFFSET = re.compile(r"Starting offset is initialized to \{(?P<offset>[^}]*)\}")
# BinlogSplitReader#checkReadException (Flink CDC 2.x – 3.x): the split, with its starting offset, that failed
READ_SPLIT = re.compile(r"Read split MySqlBinlogSplit\{splitId='[^']*', offset=\{(?P<offset>[^}]*)\}")
# the offset as the check prints it: Debezium's SourceInfo struct, or its toString in Debezium's own connector
OFFSET_FILE = re.compile(r"(?:\bfile=|currentBinlogFilename=)(?P<file>[\w.-]+)")
OFFSET_POS = re.compile(r"(?:\bpos=|currentBinlogPosition=)(?P<pos>\d+)")
OFFSET_GTIDS = re.compile(r"\bgtids=(?P<gtids>[0-9a-fA-F-]+:[\d:,\s0-9a-fA-F-]*?)(?=, \w+=|$)")
OFFSET_TS = re.compile(r"\bts_sec=(?P<ts>\d+)")
# a start offset chosen in the table (or the DataStream builder): the job started there, not from a snapshot
CONFIGURED_START = re.compile(r"'?scan\.startup\.mode'?\s*[=:]\s*'?(?P<mode>specific-offset|timestamp|"
                              r"earliest-offset)|StartupOptions\.(?P<builder>specificOffset|timestamp|earliest)")
STOP_WITH_SAVEPOINT = re.compile(r"Triggering stop-with-savepoint for job|Triggering (?:cancel-with-)?savepoint for job")
BINLOG_NAME = re.compile(r"^(?P<base>.+)\.(?P<seq>\d+)$")
SCHEMA_UNKNOWN = re.compile(r"whose schema isn't known to this connector")

_SNAPSHOT = "code:scan.startup.mode"
_RETENTION = "ops:raise the server's binlog retention"
_GTID = "ops:use GTIDs on the server"
_KEEP_FRESH = "ops:restore only from recent snapshots"
_COLLECT = "ops:find the offset and the server's binlog"


class CdcBinlogUnavailable(Detector):
    slug = SLUG
    title = "MySQL CDC binlog position no longer on the server"
    category = "connectors"
    meaning = ("A MySQL CDC source starts (or resumes) reading the binlog at a file and position or GTID set the "
               "server has purged: the source fails at every restart until it is given a new snapshot or a "
               "position the server still has.")
    versions = ("1.13 – 2.x with Flink CDC 2.2 – 3.6 (com.ververica.cdc up to 3.0, org.apache.flink.cdc since 3.1; "
                "Debezium 1.9 inside); the server's error 1236 through Debezium's binlog client")
    exception_classes = ("java.lang.IllegalStateException", "io.debezium.DebeziumException",
                         "com.github.shyiko.mysql.binlog.network.ServerException")
    config_keys = ("execution.checkpointing.interval", "restart-strategy.type")
    collect_next = ("the TaskManager log of the CDC source (StatefulTaskContext's `Starting offset is initialized to` "
                    "and `Connector requires binlog file` lines), the JobManager's `Restoring job … from …` or "
                    "`Starting job … from savepoint` line, and on the server `SHOW BINARY LOGS;`, "
                    "`SELECT @@gtid_purged, @@binlog_expire_logs_seconds;` (5.7: `@@expire_logs_days`)")
    signatures = (
        CHECK_START.pattern,
        FILE_PURGED.pattern,
        GTID_PURGED.pattern,
        r"Connector requires binlog file '",
        r"Connector last known GTIDs are ",
        NO_GTIDS.pattern,
        GTIDS_PURGED_WARN.pattern,
        r"Starting offset is initialized to \{",
        r"scan\.startup\.mode'?\s*[=:]",
    )
    wordings = (
        Wording(SLUG, signature(CHECK), "1.13 – 2.x",
                "org.apache.flink.cdc.connectors.mysql.debezium.task.context.StatefulTaskContext#"
                "loadStartingOffsetState (Flink CDC 2.2 – 3.6; com.ververica.cdc before 3.1)",
                "java.lang.IllegalStateException: The connector is trying to read binlog starting at "
                "Struct{version=1.9.8.Final,connector=mysql,name=mysql_binlog_source,ts_ms=1733563125071,db=,"
                "server_id=0,file=mysql-bin.000123,pos=88213,row=0}, but this is no longer available on the server. "
                "Reconfigure the connector to use a snapshot when needed."),
        Wording(SLUG, FILE_PURGED.pattern, "1.13 – 2.x",
                "the MySQL server's error 1236 to the binlog client, wrapped by "
                "io.debezium.connector.mysql.MySqlStreamingChangeEventSource#wrap (Debezium 1.9)",
                "io.debezium.DebeziumException: Could not find first log file name in binary log index file Error "
                "code: 1236; SQLSTATE: HY000."),
        Wording(SLUG, GTID_PURGED.pattern, "1.13 – 2.x",
                "the MySQL server's error 1236 with GTIDs (before 8.0.23; quoted in Flink CDC's FAQ), and "
                "ER_SOURCE_HAS_PURGED_REQUIRED_GTIDS (8.0.23+, matched by Flink CDC's ErrorMessageUtils)",
                "io.debezium.DebeziumException: The slave is connecting using CHANGE MASTER TO MASTER_AUTO_POSITION "
                "= 1, but the master has purged binary logs containing GTIDs that the slave requires. Error code: "
                "1236; SQLSTATE: HY000."),
    )
    root_causes = (
        RootCause("restored-offset-expired",
                  "The job resumed from a savepoint or checkpoint whose binlog offset the server has purged since: "
                  "the job was stopped, or restored from a snapshot, for longer than the server keeps its binlog.",
                  "The connector's check (or error 1236) right after a 'Restoring job … from' / 'Starting job … from "
                  "savepoint' line; the downtime, the offset's last event and the files the server still has say "
                  "how far apart they are.",
                  patches=(_SNAPSHOT, _RETENTION, _KEEP_FRESH)),
        RootCause("server-binlog-history-differs",
                  "The server the source connects to is not the one the offset was taken on (a failover to a "
                  "replica, a rebuilt primary): its binlog files or GTIDs do not continue the offset's.",
                  "'Connector used GTIDs previously, but MySQL does not know of any GTIDs', GTID sets of other "
                  "servers ('Connector last known GTIDs are …, but MySQL has …'), or a required binlog file newer "
                  "than every file the server has or with another base name.",
                  patches=(_SNAPSHOT, _GTID)),
        RootCause("reader-fell-behind",
                  "The source's position was already days old when the checkpoint it resumed from was taken: the "
                  "reader lagged behind the server (back pressure, a long snapshot phase) until the server purged "
                  "what it had not read yet.",
                  "A restore from a checkpoint whose time ('Checkpoint N @ <ms>') is days after the offset's last "
                  "event (ts_sec in 'Starting offset is initialized to {…}'): both are epoch times.",
                  patches=(_SNAPSHOT, _RETENTION, "ops:find what slows the source")),
        RootCause("configured-offset-not-kept",
                  "The job started without state at a position chosen in its options (scan.startup.mode "
                  "'specific-offset', 'timestamp' or 'earliest-offset') that the server no longer keeps.",
                  "The check failing in a job started without a snapshot, with a configured start mode in the "
                  "table options or the builder.",
                  patches=(_SNAPSHOT, _RETENTION)),
        RootCause("undetermined",
                  "The binlog position is gone from the server, but nothing says why: a restore, another server, a "
                  "configured offset, or a reader that fell behind the retention.",
                  "Only the connector's message or the server's error.",
                  patches=(_COLLECT, _SNAPSHOT),
                  next_evidence="the TaskManager log of the CDC source (`Starting offset is initialized to …`, "
                                "`Connector requires binlog file …`), the JobManager's restore line and whether the "
                                "job was stopped before, the table's `scan.startup.mode`, and on the server `SHOW "
                                "BINARY LOGS;` and `SELECT @@gtid_purged, @@binlog_expire_logs_seconds;`"),
    )

    templates = {
        "head": "The MySQL CDC source asked for a binlog position the server no longer keeps ({what}{where}). ",
        "what check": "the connector's check before reading",
        "what file": "the server's error 1236, the binlog file is gone",
        "what gtid": "the server's error 1236, GTIDs it purged",
        "where": ": {position}",
        "position file": "{file}, position {pos}",
        "position file only": "{file}",
        "restored-offset-expired": "The job resumed from {snapshot}{downtime}; {offset_age}the server has purged "
                                   "that part of its binlog meanwhile.{files} A restarted job asks for the same "
                                   "position: every restore from this snapshot fails the same way.",
        "snapshot savepoint": "savepoint {path}",
        "snapshot checkpoint": "{kind} {id}",
        "downtime": " after the job had been stopped for {duration} (stopped {stopped}, started {started})",
        "offset age": "the offset's last event is from {when} UTC (about {days} days before the failure); ",
        "files": " The offset needs {needed}; the server's oldest binlog is {oldest}{gap}.",
        "gap": ", {count} file(s) later",
        "server-binlog-history-differs": "{why} The offset belongs to another server's binlog: resuming from it "
                                         "would skip or repeat changes even if a file of that name existed.",
        "why no gtids": "The offset carries GTIDs, but this server reports none (GTIDs off, or another server).",
        "why other gtids": "The offset's GTIDs ({ours}) are not among the server's ({server}).",
        "why newer file": "The offset needs {file}, newer than every file this server has ({has}): its binlog "
                          "numbering is another server's.",
        "why other name": "The offset needs {file}, while this server's binlog files are named {name}.*.",
        "reader-fell-behind": "The job resumed from {kind} {id}, whose offset was already {lag} day(s) behind "
                              "when the checkpoint was taken: the source read the binlog more slowly than the server "
                              "wrote and purged it (back pressure, a long snapshot phase), not a late restore.{files}",
        "lag reason": "The source was {lag} day(s) behind the server when it checkpointed: look for back pressure "
                      "downstream of the CDC source (busy sinks, skewed joins) and for a snapshot phase longer than "
                      "the binlog retention; read its lag (the source's currentFetchEventTimeLag / "
                      "currentEmitEventTimeLag metrics) before the next failure.",
        "configured-offset-not-kept": "The job started without a snapshot, at the offset its options chose "
                                      "(scan.startup.mode '{mode}'), and the server has already purged it.{files}",
        "undetermined": "Nothing says why it is gone: no restore, no other server, no configured start offset in "
                        "the logs.",
        "excerpt": " This is an excerpt: the restore line and the source's offset lines are not in it.",
        "note failure": "the source failed: {what}",
        "note requires": "the file the offset needs and the files the server has",
        "note gtids": "the offset's GTIDs against the server's",
        "note offset": "the offset the source resumed from",
        "note restore": "the job resumed from a snapshot",
        "note stop": "the job was stopped with a savepoint",
        "note configured": "the start offset configured in the options",
        "snapshot reason": "Nothing can read the purged binlog: start a NEW job WITHOUT the snapshot (no -s, no "
                           "restored checkpoint) with '{option}' = 'initial', which reads the tables again and then "
                           "follows the binlog from there. Lost: the source's position and the state of every other "
                           "operator (aggregates, joins, windows) unless rebuilt from the re-read rows; the changes "
                           "between the offset and the new snapshot are not replayed as changes (deletes in between "
                           "never reach the sinks), and the sinks receive every row again (upserts converge, "
                           "appends duplicate).",
        "snapshot snippet": "'{option}' = 'initial'   -- in a new job, started without -s / a restored checkpoint",
        "retention reason": "Keep the binlog longer than the longest time the job may be stopped or behind{need}: "
                            "the server's binlog_expire_logs_seconds (MySQL 8.0+, 30 days by default; expire_logs_days "
                            "on 5.7, 0 = never), or the managed service's own setting.",
        "retention need": " (here at least {duration})",
        "retention snippet": "SHOW BINARY LOGS;\n"
                             "SELECT @@binlog_expire_logs_seconds, @@gtid_mode, @@gtid_purged;\n"
                             "SET PERSIST binlog_expire_logs_seconds = 1209600;   -- 14 days (MySQL 8.0+)\n"
                             "-- Amazon RDS / Aurora: CALL mysql.rds_set_configuration('binlog retention hours', 336);",
        "gtid reason": "With gtid_mode=ON on every server (and the CDC offset carrying GTIDs), a source can resume on "
                       "a replica that has the same transactions; binlog file names and positions never carry over "
                       "between servers. After a failover, a new snapshot is the safe way back.",
        "gtid snippet": "SELECT @@server_uuid, @@gtid_mode, @@gtid_executed, @@gtid_purged;   -- on the old and the "
                        "new server",
        "fresh reason": "Restore a CDC job only from a snapshot younger than the binlog retention: keep checkpoints "
                        "frequent and retained, take a savepoint just before a planned stop, and do not leave a job "
                        "stopped longer than the retention.",
        "collect reason": "Read the offset the source asked for (`Starting offset is initialized to` in the "
                          "TaskManager log), whether the job was restored and from what, and compare with the "
                          "server's `SHOW BINARY LOGS;` and `@@gtid_purged`.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        found = [(ev, m) for ev, m in incident.find(UNAVAILABLE) if not SCHEMA_UNKNOWN.search(ev.text)]
        if not found:
            return []
        failures = [ev for ev in failure_events(incident) if UNAVAILABLE.search(ev.text)]
        first = failures[0] if failures else found[0][0]
        m = UNAVAILABLE.search(first.text)
        kind = "check" if CHECK_START.search(m.group(0)) else "file" if FILE_PURGED.search(m.group(0)) else "gtid"
        evidence, notes, add = evidence_trail()
        add(first, self.say("note failure", what=self.say(f"what {kind}")))

        # the offset the check prints (its struct may be wrapped over several lines of a paste)
        offset_text = next((ev.text[cm.end():cm.end() + 600] for ev, _ in found
                            for cm in [CHECK_START.search(ev.text)] if cm), "")
        starting = [(ev, sm) for ev, sm in incident.find(STARTING_OFFSET)]
        if starting:
            offset_text = offset_text + " " + starting[-1][1]["offset"]
            add(starting[-1][0], self.say("note offset"))
        elif not offset_text:
            offset_text = next((rm["offset"] for _, rm in incident.find(READ_SPLIT)), "")
        file_m, pos_m = OFFSET_FILE.search(offset_text), OFFSET_POS.search(offset_text)
        requires = list(incident.find(REQUIRES_FILE))
        needed = requires[-1][1]["file"] if requires else (file_m["file"] if file_m else None)
        has = [f.strip() for f in requires[-1][1]["has"].split(",") if f.strip()] if requires else []
        if requires:
            add(requires[-1][0], self.say("note requires"))
        details: dict = {}
        if needed:
            details["binlog file needed"] = needed
        if pos_m:
            details["position"] = int(pos_m["pos"])
        if has:
            details["server's binlog files"] = f"{has[0]} … {has[-1]}" if len(has) > 2 else ", ".join(has)
        where = ""
        if needed:
            where = self.say("where", position=self.say("position file", file=needed, pos=pos_m["pos"]) if pos_m
                             else self.say("position file only", file=needed))
        head = self.say("head", what=self.say(f"what {kind}"), where=where)

        no_gtids = next((ev for ev, _ in incident.find(NO_GTIDS)), None)
        gtids = list(incident.find(GTIDS_DIFFER))
        other_server = self._other_server(needed, has)
        restores = [(ev, rm) for ev, rm in incident.find(SNAPSHOT_RESTORED) if _before(ev, first)]
        savepoints = [s for s in incident.find(SAVEPOINT_START) if _before(s[0], first)]
        configured = next(((ev, cm) for ev, cm in incident.find(CONFIGURED_START)), None)
        confidence, retention_need = 0.85, None
        if no_gtids is not None or (gtids and _foreign_gtids(gtids[-1][1])) or other_server:
            cause = "server-binlog-history-differs"
            if no_gtids is not None:
                add(no_gtids, self.say("note gtids"))
                why = self.say("why no gtids")
            elif gtids and _foreign_gtids(gtids[-1][1]):
                add(gtids[-1][0], self.say("note gtids"))
                why = self.say("why other gtids", ours=gtids[-1][1]["ours"], server=gtids[-1][1]["server"])
            elif other_server == "newer":
                why = self.say("why newer file", file=needed, has=details["server's binlog files"])
            else:
                why = self.say("why other name", file=needed, name=BINLOG_NAME.match(has[0])["base"])
            summary = self.say(cause, why=why)
        elif not savepoints and restores and self._lag_days(offset_text, restores[-1][1]) is not None:
            cause = "reader-fell-behind"
            rm = restores[-1][1]
            lag = self._lag_days(offset_text, rm)
            add(restores[-1][0], self.say("note restore"))
            details["offset behind the checkpoint (days)"] = lag
            summary = self.say(cause, kind=rm["kind"].lower(), id=rm["id"], lag=lag, files=self._files(needed, has))
            retention_need = f"{lag} days"
        elif restores or savepoints:
            cause = "restored-offset-expired"
            if savepoints:
                snapshot = self.say("snapshot savepoint", path=savepoints[-1][1]["path"])
                add(savepoints[-1][0], self.say("note restore"))
            else:
                rm = restores[-1][1]
                snapshot = self.say("snapshot checkpoint", kind=rm["kind"].lower(), id=rm["id"])
                add(restores[-1][0], self.say("note restore"))
            downtime, down_s = self._downtime(incident, savepoints, add)
            if down_s is not None:
                details["job stopped for"] = _duration(down_s)
            age = self._offset_age(offset_text, first)
            if age:
                details["offset's last event (UTC)"] = age[0]
            summary = self.say(cause, snapshot=snapshot, downtime=downtime,
                               offset_age=self.say("offset age", when=age[0], days=age[1]) if age else "",
                               files=self._files(needed, has))
            retention_need = _duration(down_s) if down_s is not None else (f"{age[1]} days" if age else None)
        elif configured is not None:
            cause = "configured-offset-not-kept"
            mode = configured[1]["mode"] or {"specificOffset": "specific-offset", "timestamp": "timestamp",
                                            "earliest": "earliest-offset"}[configured[1]["builder"]]
            details["scan.startup.mode"] = mode
            add(configured[0], self.say("note configured"))
            summary = self.say(cause, mode=mode, files=self._files(needed, has))
        else:
            cause, confidence = "undetermined", 0.4
            summary = self.say(cause)
        if is_excerpt(incident) and not starting and not requires:
            summary += self.say("excerpt")
            confidence -= 0.1
        patches = self._patches(incident, cause, retention_need)
        return [self.finding(cause, head + summary, evidence, notes=notes, confidence=confidence, patches=patches,
                             details=details)]

    # ------------------------------------------------------------------------------------------------ readings

    @staticmethod
    def _other_server(needed: str | None, has: list[str]) -> str | None:
        """'newer' when the file the offset needs is numbered after every file the server has (a new numbering),
        'name' when the server's files have another base name; a purge leaves only later files."""
        want = BINLOG_NAME.match(needed or "")
        names = [BINLOG_NAME.match(f) for f in has]
        if not want or not names or not all(names):
            return None
        if all(n["base"] != want["base"] for n in names):
            return "name"
        if all(int(n["seq"]) < int(want["seq"]) for n in names if n["base"] == want["base"]):
            return "newer"
        return None

    def _downtime(self, incident: Incident, savepoints, add) -> tuple[str, float | None]:
        """How long the job was stopped: from its stop-with-savepoint to the start from that savepoint."""
        if not savepoints:
            return "", None
        start = savepoints[-1][0]
        stops = [ev for ev, _ in incident.find(STOP_WITH_SAVEPOINT) if _before(ev, start)]
        if not stops:
            return "", None
        stopped, started = wall_seconds(stops[-1].ts), wall_seconds(start.ts)
        if stopped is None or started is None or started <= stopped:
            return "", None
        add(stops[-1], self.say("note stop"))
        return self.say("downtime", duration=_duration(started - stopped), stopped=stops[-1].ts,
                        started=start.ts), started - stopped

    @staticmethod
    def _offset_age(offset_text: str, failure: Event) -> tuple[str, int] | None:
        """The offset's last event (ts_sec, epoch seconds) and its age in whole days: the log's clock has no zone,
        so only an age of days is told (a zone moves it by hours)."""
        ts = OFFSET_TS.search(offset_text)
        at = wall_seconds(failure.ts)
        if not ts or int(ts["ts"]) == 0 or at is None:
            return None
        days = int((at - int(ts["ts"])) // 86400)
        if days < 2:
            return None
        when = dt.datetime.fromtimestamp(int(ts["ts"]), dt.timezone.utc).strftime("%Y-%m-%d %H:%M")
        return when, days

    @staticmethod
    def _lag_days(offset_text: str, restored: re.Match[str]) -> int | None:
        """Whole days between the offset's last event and the checkpoint that holds it (two epoch times, no zone)."""
        ts = OFFSET_TS.search(offset_text)
        if not ts or int(ts["ts"]) == 0 or int(restored["at"]) == 0:
            return None
        days = int((int(restored["at"]) / 1000 - int(ts["ts"])) // 86400)
        return days if days >= 1 else None

    def _files(self, needed: str | None, has: list[str]) -> str:
        if not needed or not has:
            return ""
        want, oldest = BINLOG_NAME.match(needed), BINLOG_NAME.match(has[0])
        gap = self.say("gap", count=int(oldest["seq"]) - int(want["seq"])) if want and oldest and \
            want["base"] == oldest["base"] and int(oldest["seq"]) > int(want["seq"]) else ""
        return self.say("files", needed=needed, oldest=has[0], gap=gap)

    # ------------------------------------------------------------------------------------------------ patches

    def _patches(self, incident: Incident, cause: str, retention_need: str | None):
        option = "scan.startup.mode"
        snapshot = self.code_patch(option, self.say("snapshot snippet", option=option),
                                   self.say("snapshot reason", option=option))
        retention = self.ops_patch("raise the server's binlog retention", self.say(
            "retention reason", need=self.say("retention need", duration=retention_need) if retention_need else ""),
            snippet=self.say("retention snippet"), urgent=False)
        if cause == "restored-offset-expired":
            return [snapshot, retention, self.ops_patch("restore only from recent snapshots", self.say("fresh reason"),
                                                        urgent=False)]
        if cause == "server-binlog-history-differs":
            return [snapshot, self.ops_patch("use GTIDs on the server", self.say("gtid reason"),
                                             snippet=self.say("gtid snippet"), urgent=False)]
        if cause == "configured-offset-not-kept":
            return [snapshot, retention]
        if cause == "reader-fell-behind":
            return [snapshot, retention, self.ops_patch("find what slows the source",
                                                        self.say("lag reason", lag=retention_need.split()[0]),
                                                        urgent=False)]
        return [self.ops_patch("find the offset and the server's binlog", self.say("collect reason")), snapshot]


def _before(ev: Event, other: Event) -> bool:
    """``ev`` happened before ``other`` (by time when both have one, else it counts)."""
    a, b = wall_seconds(ev.ts), wall_seconds(other.ts)
    return a is None or b is None or a <= b


def _foreign_gtids(m: re.Match[str]) -> bool:
    """The offset's GTID set names a server UUID the server's set does not know."""
    uuid = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
    ours, server = set(uuid.findall(m["ours"])), set(uuid.findall(m["server"]))
    return bool(ours) and bool(server) and not ours <= server


def _duration(seconds: float) -> str:
    if seconds >= 86400:
        return f"{seconds / 86400:.1f} days"
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min"
