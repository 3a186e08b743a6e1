"""A JDBC sink or lookup lost its database connection (MySQL ``Communications link failure``, PostgreSQL ``An I/O
error occurred while sending to the backend``).

What the connector does (flink-connector-jdbc 3.0.0 – 4.1.0, ``JdbcOutputFormat#flush`` and
``JdbcRowDataLookupFunction#lookup``): a failed statement is logged at ERROR as ``JDBC executeBatch error, retry
times = i`` (the lookup logs the same words); below ``sink.max-retries`` / ``lookup.max-retries`` (3 by default) it
checks the connection with ``Connection#isValid`` (timeout ``connection.max-retry-timeout``, 60 s), opens a new one
if it is not valid, sleeps ``i`` seconds and tries again. A failure therefore reaches the job only when the retries
are spent (``Writing records to JDBC failed.`` / ``Execution of JDBC statement failed.``) or a new connection cannot
be opened (``JDBC connection is not valid, and reestablish connection failed`` → ``Reestablish JDBC connection
failed``): the retry count logged last is the table's max-retries.

What tells the causes apart is MySQL Connector/J's own timing (``ExceptionFactory#createLinkFailureMessageBasedOn
Heuristics``, 5.1 – 9.x): ``The last packet successfully received from the server was N milliseconds ago. The last
packet sent successfully to the server was M milliseconds ago.`` A connection unused for hours, or the driver's
``… is longer than the server configured value of 'wait_timeout'``, was closed by the server while idle (or by a
proxy or firewall that cuts idle connections); one that answered seconds ago was cut while in use (a restart, a
failover, the network); ``The driver has not received any packets from the server`` and ``Connection refused``
mean no new connection could be opened. PostgreSQL's driver (pgjdbc) prints no timing, so its errors name a cause
only with the connector's retry lines or a refused connection.
"""
from __future__ import annotations

import re

from flink_runbooks.detectors.base import Detector, signature
from flink_runbooks.evidence.episodes import failure_events, is_excerpt
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording

SLUG = "jdbc-connection-lost"

# MySQL Connector/J, LocalizedErrorMessages (CommunicationsException.ServerPacketTimingInfo), 5.1 – 9.x; the numbers
# are formatted by MessageFormat, with the locale's grouping ("28,803,112")
MYSQL_TIMING = re.compile(r"The last packet successfully received from the server was (?P<received>[\d,. ]+) "
                          r"milliseconds ago\. ?The last packet sent successfully to the server was "
                          r"(?P<sent>[\d,. ]+) milliseconds ago\.")
# CommunicationsException.ServerPacketTimingInfoNoRecv: a connection that never got an answer (could not be opened)
MYSQL_NO_ANSWER = re.compile(r"The last packet sent successfully to the server was [\d,. ]+ milliseconds ago\. "
                             r"The driver has not received any packets from the server\.")
# CommunicationsException.2 + .3/.4: the driver read the server's timeout and the connection sat idle longer
MYSQL_SERVER_TIMEOUT = re.compile(r"is longer than the server configured value of '(?P<var>wait_timeout|"
                                  r"interactive_timeout)'")
MYSQL_LINK_FAILURE = re.compile(r"Communications link failure")
MYSQL_CLOSED = re.compile(r"No operations allowed after connection closed")
MYSQL_EOF = re.compile(r"Can not read response from server\. Expected to read \d+ bytes, read \d+ bytes before "
                       r"connection was unexpectedly lost")
# pgjdbc (42.x): PgConnection#checkClosed, QueryExecutorImpl, ConnectionFactoryImpl
PG_CLOSED = re.compile(r"This connection has been closed\.")
PG_IO = re.compile(r"An I/O error occurred while sending to the backend")
PG_REFUSED = re.compile(r"Connection to (?P<address>\S+) refused\. Check that the hostname and port are correct")
REFUSED = re.compile(r"java\.net\.ConnectException: Connection refused|java\.net\.(?:NoRouteToHost|UnknownHost)"
                     r"Exception|Connection to \S+ refused")
# flink-connector-jdbc 3.0.0 – 4.1.0 (JdbcOutputFormat, JdbcRowDataLookupFunction; the same in Flink's own JDBC
# connector before it moved out)
RETRY = re.compile(r"JDBC executeBatch error, retry times = (?P<n>\d+)")
REESTABLISH_FAILED = re.compile(r"reestablish connection failed|Reestablish JDBC connection failed")
SINK_FAILED = re.compile(r"Writing records to JDBC failed")
LOOKUP_FAILED = re.compile(r"Execution of JDBC statement failed")
LOOKUP = re.compile(r"JdbcRowDataLookupFunction|Execution of JDBC statement failed|LookupJoin")
SINK = re.compile(r"JdbcOutputFormat|JdbcBatchingOutputFormat|GenericJdbcSinkFunction|JdbcWriter|"
                  r"Writing records to JDBC failed")
CONNECTOR = re.compile(rf"{SINK.pattern}|{LOOKUP.pattern}|{RETRY.pattern}|{REESTABLISH_FAILED.pattern}")
# A MySQL CDC source reads the binlog over its own connection: its losses are not a sink's or a lookup's
CDC_SOURCE = re.compile(r"MySqlSource|MySqlSplitReader|BinaryLogClient|io\.debezium|com\.ververica\.cdc|"
                        r"org\.apache\.flink\.cdc")
LOST = re.compile("|".join(rx.pattern for rx in (MYSQL_TIMING, MYSQL_NO_ANSWER, MYSQL_LINK_FAILURE, MYSQL_CLOSED,
                                                  MYSQL_EOF, PG_CLOSED, PG_IO, PG_REFUSED, REESTABLISH_FAILED)))

IDLE_S = 300  # a connection unused this long and then dead was closed while idle
ACTIVE_S = 60  # one that answered this recently was cut while in use
WAIT_TIMEOUT_DEFAULT_S = 28800  # MySQL's wait_timeout (and Connector/J's DEFAULT_WAIT_TIMEOUT_SECONDS)
MAX_RETRIES_DEFAULT = 3  # sink.max-retries and lookup.max-retries, flink-connector-jdbc 3.0.0 – 4.1.0

_SINK_RETRIES = "code:sink.max-retries"
_LOOKUP_RETRIES = "code:lookup.max-retries"
_IDLE = "ops:raise the idle timeout on the database side"
_AVAILABILITY = "ops:check the database's availability"
_WHY = "ops:find why the database drops the connection"


class JdbcConnectionLost(Detector):
    slug = SLUG
    title = "JDBC connection lost by a sink or a lookup"
    category = "connectors"
    meaning = ("A JDBC sink or lookup join found its database connection closed (MySQL 'Communications link failure', "
               "PostgreSQL 'An I/O error occurred while sending to the backend'): the connector retries and "
               "reconnects, and fails the task when it cannot.")
    versions = ("1.16 – 2.x (flink-connector-jdbc 3.0.0 – 4.1.0); MySQL Connector/J 8.0 – 9.x and pgjdbc 42.x "
                "wordings")
    exception_classes = ("com.mysql.cj.jdbc.exceptions.CommunicationsException",
                         "com.mysql.cj.exceptions.CJCommunicationsException",
                         "org.postgresql.util.PSQLException", "java.sql.BatchUpdateException")
    config_keys = ("restart-strategy.type",)
    collect_next = ("the TaskManager log of the failing sink or lookup (its `JDBC executeBatch error, retry times = N` "
                    "lines with their complete exception, including MySQL's `The last packet successfully received "
                    "from the server was N milliseconds ago`), the table's WITH options (`sink.max-retries`, "
                    "`lookup.max-retries`) and the database's error log and timeouts (`SHOW VARIABLES LIKE "
                    "'%timeout%'` in MySQL, `SHOW idle_session_timeout` in PostgreSQL)")
    # The drivers' own messages are chained exceptions, kept with their record; the signatures keep the MySQL timing
    # (a continuation line of the message) and the connector's lines. A driver's error alone is no signature: a
    # job's own connection pool loses connections too, and that is the job's code (user-code-exception).
    signatures = (
        signature(MYSQL_TIMING),
        r"The last packet sent successfully to the server was",
        signature(RETRY),
        signature(REESTABLISH_FAILED),
        signature(SINK_FAILED),
        signature(LOOKUP_FAILED),
    )
    frames = (r"JdbcRowDataLookupFunction|JdbcOutputFormat|JdbcBatchingOutputFormat|GenericJdbcSinkFunction|"
              r"JdbcWriter",)
    wordings = (
        Wording(SLUG, signature(MYSQL_TIMING), "1.16 – 2.x",
                "com.mysql.cj.exceptions.ExceptionFactory#createLinkFailureMessageBasedOnHeuristics (MySQL "
                "Connector/J 8.0 – 9.x, CommunicationsException.ServerPacketTimingInfo)",
                "com.mysql.cj.jdbc.exceptions.CommunicationsException: The last packet successfully received from the "
                "server was 28,803,112 milliseconds ago. The last packet sent successfully to the server was "
                "28,803,113 milliseconds ago. is longer than the server configured value of 'wait_timeout'."),
        Wording(SLUG, REESTABLISH_FAILED.pattern, "1.16 – 2.x",
                "org.apache.flink.connector.jdbc.internal.JdbcOutputFormat#flush and JdbcRowDataLookupFunction#lookup "
                "(flink-connector-jdbc 3.0.0 – 4.1.0)",
                "java.io.IOException: Reestablish JDBC connection failed"),
    )
    root_causes = (
        RootCause("idle-connection-closed",
                  "The connection sat unused until the database (MySQL's wait_timeout, 8 hours by default) or a proxy, "
                  "load balancer or firewall between them closed it; the next write or lookup found it dead.",
                  "MySQL Connector/J's 'The last packet successfully received from the server was N milliseconds "
                  "ago' with N of minutes or hours, or '… is longer than the server configured value of "
                  "'wait_timeout''.",
                  patches=(_IDLE, _SINK_RETRIES, _LOOKUP_RETRIES)),
        RootCause("database-unavailable",
                  "The database could not be reached: it restarted, failed over or refused connections, or the "
                  "network cut a connection in use; the connector could not open a new one.",
                  "'Connection refused', 'The driver has not received any packets from the server', 'reestablish "
                  "connection failed', or a MySQL connection that answered seconds before it broke.",
                  patches=(_AVAILABILITY,)),
        RootCause("retries-exhausted",
                  "Every retry of the connector found the connection broken again, and it gave up after "
                  "sink.max-retries / lookup.max-retries attempts.",
                  "The connector's 'JDBC executeBatch error, retry times = N' up to the table's max-retries, each on "
                  "a connection error, then the task failed; no timing or refusal tells why.",
                  patches=(_WHY, _SINK_RETRIES, _LOOKUP_RETRIES)),
        RootCause("undetermined",
                  "A JDBC connection was lost, but nothing tells whether it was closed while idle, the database was "
                  "unavailable or the retries ran out.",
                  "A connection error without the driver's timing, a refusal or the connector's retry lines.",
                  patches=(_WHY,),
                  next_evidence="the TaskManager log of the failing sink or lookup with its `JDBC executeBatch error, "
                                "retry times = N` lines and their complete exception (MySQL's `The last packet "
                                "successfully received from the server was N milliseconds ago`), the table's "
                                "`sink.max-retries` / `lookup.max-retries`, and the database's error log at that "
                                "time (a restart, a failover, connections killed as idle)."),
    )

    templates = {
        "head": "The JDBC {user} lost its database connection ({driver}). ",
        "user sink": "sink",
        "user lookup": "lookup join",
        "user unknown": "sink or lookup",
        "driver mysql": "MySQL Connector/J: {wording}",
        "driver postgres": "PostgreSQL's driver: {wording}",
        "driver other": "{wording}",
        "idle-connection-closed": "The connection had been idle for {idle} (the last packet received {received_ms:,} "
                                  "ms before): {closer} closed it while nothing was written or looked up.{outcome}",
        "closer wait_timeout": "the MySQL server, at its {var} (28800 s, 8 h, by default; the driver says the idle "
                               "time is longer)",
        "closer default": "the MySQL server, at its wait_timeout (28800 s, 8 h, by default)",
        "closer proxy": "something shorter than MySQL's default wait_timeout of 8 h, a proxy, load balancer or "
                        "firewall between the job and the database (or a lowered wait_timeout)",
        "outcome reconnected": " The connector reconnected and the retry went through: nothing failed, but each "
                               "such reconnection costs an ERROR and a retry.",
        "outcome no retry": " The connector's {option} is {retries}, so it gave up at the first error instead of "
                            "checking the connection and opening a new one.",
        "outcome failed": " The task failed after {attempts} attempt(s).",
        "database-unavailable": "{why} The fix is on the database's side; the job recovers by restarting once the "
                                "database accepts connections again.{outcome}",
        "why refused": "No new connection could be opened ({detail}).",
        "why active": "The connection had answered {received_ms:,} ms before it broke: it was cut while in use (a "
                      "restart, a failover or the network), not closed as idle.",
        "retries-exhausted": "The connector retried {attempts} time(s) (its {option} is {retries}) and each "
                             "attempt failed on the connection again; nothing in the logs says why the database "
                             "dropped it.",
        "undetermined": "Nothing tells whether it was closed while idle, the database was unavailable or the "
                        "connector's retries ran out.{timing}",
        "timing": " The last packet was received {received_ms:,} ms before: neither idle for long nor recent.",
        "excerpt": " This is an excerpt: the connector's retry lines and the table's options are not in it.",
        "note failure": "the task failed on the lost connection",
        "note retry": "the connector's attempt {n} failed: {what}",
        "note timing": "MySQL's timing: the last packet received {received_ms:,} ms before",
        "note refused": "no new connection could be opened",
        "idle reason": "The database side closes connections unused for {limit}. Keep its idle timeout above the "
                       "longest quiet period of this {user} (a sink that writes rarely, a lookup on a rare key), or "
                       "shorten the quiet periods; the connector reconnects on its next attempt when its "
                       "max-retries is above 0.",
        "idle limit wait_timeout": "the server's {var}",
        "idle limit proxy": "less than MySQL's default 8 h (a proxy, load balancer or firewall, or a lowered "
                            "wait_timeout)",
        "idle snippet": "-- MySQL: the server's idle limits (seconds)\n"
                        "SHOW GLOBAL VARIABLES LIKE '%_timeout';\n"
                        "SET GLOBAL wait_timeout = 86400;   -- and in my.cnf, [mysqld] wait_timeout = 86400\n"
                        "-- a proxy or load balancer: raise its idle timeout (e.g. ProxySQL "
                        "mysql-wait_timeout, an AWS NLB's 350 s idle timeout cannot be raised)",
        "retries reason": "With max-retries above 0 the connector checks the connection (Connection#isValid) after "
                          "an error and opens a new one before it tries again; at {current} it fails the task on the "
                          "first error. {value} is the connector's default (each retry waits one second more than "
                          "the one before).",
        "retries snippet": "'{option}' = '{value}'",
        "availability reason": "Check the database at {when}: a restart or failover (MySQL's error log 'ready for "
                               "connections', `SHOW GLOBAL STATUS LIKE 'Uptime'`; PostgreSQL's log 'database system "
                               "is ready to accept connections'), the address the job connects to, and the network "
                               "between them.",
        "why reason": "The connection broke on every attempt: read the database's error log at {when} (connections "
                      "killed, a restart, max_connections reached) and the network between the TaskManagers and "
                      "the database.",
        "unknown time": "the time of the failure",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        lost = [ev for ev, _ in incident.find(LOST) if not CDC_SOURCE.search(ev.text)]
        # in a process's log, the connector must be involved: a job's own pool (open() connecting with HikariCP, a
        # driver called from user code) loses connections too, but neither the connector's retries nor its options
        # apply; a pasted trace may be cut above the connector's frames
        if not lost or not is_excerpt(incident) and not any(CONNECTOR.search(ev.text) for ev in lost):
            return []
        evidence, notes, add = evidence_trail()
        retries = [(ev, int(m["n"])) for ev, m in incident.find(RETRY) if LOST.search(ev.text)]
        user = self._user(incident, lost)
        option = "lookup.max-retries" if user == "lookup" else "sink.max-retries"
        # the connector's own ERROR per attempt is not a failure: it retries after it
        failures = [ev for ev in failure_events(incident) if LOST.search(ev.text) and not RETRY.search(ev.message)]
        failed = bool(failures) or any(SINK_FAILED.search(ev.text) or LOOKUP_FAILED.search(ev.text) or
                                       REESTABLISH_FAILED.search(ev.text) for ev in lost)
        first = failures[0] if failures else lost[0]
        add(first, self.say("note failure") if failed else self.say("note retry", n=0, what=self._wording(first)))
        for ev, n in retries[:3]:
            add(ev, self.say("note retry", n=n, what=self._wording(ev)))

        timing = self._timing(lost)
        refused = next((ev for ev in lost if REFUSED.search(ev.text) or MYSQL_NO_ANSWER.search(ev.text) or
                        REESTABLISH_FAILED.search(ev.text)), None)
        server_timeout = next((m for ev in lost for m in [MYSQL_SERVER_TIMEOUT.search(ev.text)] if m), None)
        details: dict = {"user": {"sink": "JDBC sink", "lookup": "JDBC lookup join"}.get(user, "not shown"),
                         "driver": self._driver(lost)}
        attempts = max((n for _, n in retries), default=None)
        if attempts is not None:
            details["last retry logged"] = attempts
        # the loop gives up at the attempt numbered max-retries: after a failure, that is the table's setting
        configured = attempts if failed and attempts is not None else None
        if configured is not None:
            details[option] = configured

        driver = details["driver"]
        head = self.say("head", user=self.say(f"user {user}"),
                        driver=self.say(f"driver {driver}", wording=self._wording(first)))
        received_ms = timing[1] if timing else None
        if timing:
            add(timing[0], self.say("note timing", received_ms=received_ms))
            details["last packet received (ms before)"] = received_ms
        if refused is not None:
            add(refused, self.say("note refused"))

        confidence, by_proxy = 0.85, False
        if failed and configured == 0:
            outcome = self.say("outcome no retry", option=option, retries=0)
        elif failed:
            outcome = self.say("outcome failed", attempts=(attempts or 0) + 1) if attempts is not None else ""
        else:
            outcome = self.say("outcome reconnected")
        when = first.ts or self.say("unknown time")
        if refused is not None:
            cause = "database-unavailable"
            detail = self._wording(refused)
            summary = self.say(cause, why=self.say("why refused", detail=detail), outcome="")
        elif received_ms is not None and received_ms >= IDLE_S * 1000 or server_timeout:
            cause = "idle-connection-closed"
            received_ms = received_ms or 0
            if server_timeout:
                closer = self.say("closer wait_timeout", var=server_timeout["var"])
            elif received_ms >= WAIT_TIMEOUT_DEFAULT_S * 1000 * 0.95:
                closer = self.say("closer default")
            else:
                closer, by_proxy = self.say("closer proxy"), True
            details["idle for"] = _duration(received_ms / 1000)
            summary = self.say(cause, idle=_duration(received_ms / 1000), received_ms=received_ms, closer=closer,
                               outcome=outcome)
        elif received_ms is not None and received_ms < ACTIVE_S * 1000:
            cause = "database-unavailable"
            summary = self.say(cause, why=self.say("why active", received_ms=received_ms),
                               outcome=outcome if failed else "")
        elif failed and attempts is not None:
            cause = "retries-exhausted"
            summary = self.say(cause, attempts=attempts, option=option, retries=attempts)
            confidence = 0.7
        else:
            cause, confidence = "undetermined", 0.4
            summary = self.say(cause, timing=self.say("timing", received_ms=received_ms) if received_ms else "")
        if is_excerpt(incident) and not retries:
            summary += self.say("excerpt")
            confidence -= 0.1
        patches = self._patches(cause, user, option, configured, server_timeout, by_proxy, when)
        return [self.finding(cause, head + summary, evidence, notes=notes, confidence=confidence, patches=patches,
                             details=details, severity="failure" if failed else "warning")]

    # ------------------------------------------------------------------------------------------------ readings

    @staticmethod
    def _user(incident: Incident, lost: list[Event]) -> str:
        texts = [ev.text for ev in lost] + [ev.logger or "" for ev in lost]
        if any(LOOKUP.search(t) for t in texts):
            return "lookup"
        if any(SINK.search(t) for t in texts):
            return "sink"
        return "unknown"

    @staticmethod
    def _driver(lost: list[Event]) -> str:
        text = "\n".join(ev.text for ev in lost)
        if re.search(r"com\.mysql|Communications link failure|The last packet", text):
            return "mysql"
        if re.search(r"org\.postgresql|PSQLException", text):
            return "postgres"
        return "other"

    @staticmethod
    def _timing(lost: list[Event]) -> tuple[Event, int] | None:
        for ev in lost:
            m = MYSQL_TIMING.search(ev.text)
            if m:
                return ev, int(re.sub(r"\D", "", m["received"]))
        return None

    @staticmethod
    def _wording(ev: Event) -> str:
        """The deepest connection error of the record, as the driver worded it (its first line)."""
        for c in reversed([c for c in ev.chain if c.kind != "suppressed"]):
            text = f"{c.cls.rsplit('.', 1)[-1]}: {c.message}" if c.message else c.cls
            if LOST.search(text) or REFUSED.search(text):
                return text.splitlines()[0][:200]
        m = LOST.search(ev.text)
        return m.group(0) if m else ev.message[:200]

    # ------------------------------------------------------------------------------------------------ patches

    def _patches(self, cause, user, option, configured, server_timeout, by_proxy, when):
        out = []
        key_user = self.say(f"user {user}")
        if cause == "idle-connection-closed":
            limit = self.say("idle limit proxy") if by_proxy else self.say(
                "idle limit wait_timeout", var=server_timeout["var"] if server_timeout else "wait_timeout")
            out.append(self.ops_patch("raise the idle timeout on the database side",
                                      self.say("idle reason", limit=limit, user=key_user),
                                      snippet=self.say("idle snippet")))
        # only a table that retries never (0) is fixed by retrying: a reconnection is what the retry brings
        if cause in ("idle-connection-closed", "retries-exhausted") and configured == 0:
            out.append(self.code_patch(option, self.say("retries snippet", option=option, value=MAX_RETRIES_DEFAULT),
                                       self.say("retries reason", current=configured, value=MAX_RETRIES_DEFAULT)))
        if cause == "database-unavailable":
            out.append(self.ops_patch("check the database's availability", self.say("availability reason", when=when)))
        if cause in ("retries-exhausted", "undetermined"):
            out.append(self.ops_patch("find why the database drops the connection", self.say("why reason", when=when)))
        return out


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 60:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"
