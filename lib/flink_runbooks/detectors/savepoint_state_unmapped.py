"""``Failed to rollback to checkpoint/savepoint … Cannot map checkpoint/savepoint state for operator X to the new
program``: a submission named a snapshot that holds state for an operator the new job does not have.

The JobManager refuses the job while it starts (``JobInitializationException: Could not start the JobMaster``), so
the job is FAILED before any task runs. Which change made the operator disappear decides what to do:

- a DataStream job whose operator ids changed: the operator's ``.uid()`` was renamed or removed, or it never had
  one and the graph changed, so the auto-generated id changed. The id in the message is told apart by hashing the
  operator names the logs show (an explicit uid's id is its Murmur3 hash) and by the task that carried that id in the
  job that took the savepoint;
- a SQL/Table job whose query changed: the planner derives operator ids from the plan, users cannot pin them;
- the user meant to skip the state (the configuration asks to ignore unclaimed state) but the submission did not
  carry it: ``Starting job … from savepoint … ()`` shows the flag was off.

A restore that skipped state on purpose (``Skipping savepoint state for operator``) is not a failure.
"""
from __future__ import annotations

import re

from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence.episodes import is_excerpt
from flink_runbooks.evidence.restore import (
    IGNORE_UNCLAIMED_KEY, candidate_uids, ignore_unclaimed_configured, savepoint_starts, sql_operators, uid_for,
    vertices,
)
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording

UNMAPPED = re.compile(r"Failed to rollback to checkpoint/savepoint (?P<path>\S+?)\. Cannot map checkpoint/savepoint "
                      r"state for operator (?P<op>[0-9a-f]{32}) to the new program")
_SKIP_PATCH = "ops:restore without the unmapped state (allowNonRestoredState)"
_NEXT = ("the JobManager log from the submission that failed back to the job that took the snapshot "
         "(`grep -nE \"from savepoint|Deploying|Cannot map\" jobmanager.log`), whether the job is DataStream or "
         "SQL, and the operator ids in the snapshot (State Processor API `SavepointReader`) next to the new job's "
         "uids.")


class SavepointStateUnmapped(Detector):
    slug = "savepoint-state-unmapped"
    title = "Savepoint state cannot be mapped to the new program"
    category = "state-restore"
    meaning = ("The job was submitted from a checkpoint or savepoint that holds state of an operator the new program "
               "does not have, so the JobManager refused to start it: the operator's id changed or it was removed.")
    # JobInitializationException wraps any failure of a JobMaster's start: not evidence for this runbook alone.
    exception_classes = ("java.lang.IllegalStateException",)
    versions = "1.9 – 2.x (same wording in 1.9.3, 1.13.6, 1.17.2, 1.20.3 and 2.3.0)"
    config_keys = (
        "execution.state-recovery.ignore-unclaimed-state",
        "execution.state-recovery.path",
        "execution.state-recovery.claim-mode",
    )
    signatures = (
        r"Cannot map checkpoint/savepoint state for operator [0-9a-f]{32} to the new program",
        r"Starting job [0-9a-f]{32} from savepoint ",
        r"Skipping (?:empty )?savepoint state for operator [0-9a-f]{32}",
        r"Deploying .+ with attempt id .+ and vertex id [0-9a-f]{32}",
    )
    wordings = (
        Wording("savepoint-state-unmapped",
                r"Cannot map checkpoint/savepoint state for operator [0-9a-f]{32} to the new program, because the "
                r"operator is not available in the new program",
                "1.9 – 2.x", "o.a.f.runtime.checkpoint.Checkpoints#throwNonRestoredStateException (loadAndValidateCheckpoint "
                "in older releases; the same text in 1.9.3, 1.13.6, 1.17.2, 1.20.3 and 2.3.0)",
                "java.lang.IllegalStateException: Failed to rollback to checkpoint/savepoint file:/data/flink/"
                "savepoints/savepoint-e3719e-79ecd409895c. Cannot map checkpoint/savepoint state for operator "
                "0da08f51eaa85fc298e176a139b3649a to the new program, because the operator is not available in the "
                "new program. If you want to allow to skip this, you can set the --allowNonRestoredState option on "
                "the CLI."),
    )
    root_causes = (
        RootCause("uid-missing-or-changed",
                  "A DataStream job's operator ids changed between the snapshot and the new program: an operator's "
                  ".uid() was renamed or removed, or it never had one and the job graph changed, so its "
                  "auto-generated id changed with it.",
                  "A DataStream job (no SQL planner operators in the logs) whose snapshot holds state for an "
                  "operator id the new program lacks; the id is the hash of a uid the logs name, or the logs show "
                  "which task carried it in the job that took the snapshot.",
                  patches=("code:stable operator uids", "code:map the old operator id (setUidHash)", _SKIP_PATCH)),
        RootCause("sql-plan-changed",
                  "A SQL/Table job's query or plan changed: the planner derives operator ids from the plan, so the "
                  "new plan's operators do not match the snapshot's and users cannot pin them.",
                  "Operators only the SQL planner creates (GroupAggregate[n], Calc[n], TableSourceScan…) in the "
                  "logs of the failed job or of the job that took the snapshot.",
                  patches=("ops:keep the old query or start the new one without state", _SKIP_PATCH,
                           "code:compiled plan for upgrades")),
        RootCause("allow-non-restored-not-propagated",
                  "Skipping the unmapped state was asked for, but the submission did not carry it: the job started "
                  "without allowNonRestoredState (a platform, the REST API or the Kubernetes operator did not pass "
                  "the setting on).",
                  "The configuration asks to ignore unclaimed state (execution.state-recovery.ignore-unclaimed-state "
                  "/ execution.savepoint.ignore-unclaimed-state: true) while the JobManager logged 'Starting job … "
                  "from savepoint … ()' without 'allowing non restored state'.",
                  patches=("ops:pass allowNonRestoredState with the submission",)),
        RootCause("undetermined",
                  "A snapshot's state could not be mapped to the new program, but the logs do not show whether the "
                  "job is DataStream or SQL, nor which operator the state belonged to.",
                  "The failure alone (an excerpt): no task names, no 'Starting job … from savepoint' line.",
                  patches=(_SKIP_PATCH,),
                  would_change="Task names of the job that took the snapshot (DataStream operators: uids; SQL "
                               "planner operators: the plan changed), or a configuration that asks to ignore "
                               "unclaimed state.",
                  next_evidence=_NEXT),
    )

    templates = {
        "head": "The job was refused at start: snapshot {path} holds state for operator {operator}, which the new "
                "program does not have, so the JobManager failed the job before any task ran. ",
        "where": "In the job that took the snapshot that id belonged to task '{task}'. ",
        "allow-non-restored-not-propagated": "The configuration asks to ignore unclaimed state ({key}: true), but the "
                                             "submission started the job without allowNonRestoredState: the setting "
                                             "did not reach the job (a REST or web UI submission, a platform or the "
                                             "Kubernetes operator passes its own flag, which wins). Pass it with the "
                                             "submission; skipping drops that operator's state for good.",
        "sql-plan-changed": "The job is a SQL/Table job: the planner derives operator ids from the plan, so a changed "
                            "query (a new filter, join, aggregate or projection) or a planner upgrade gives the "
                            "stateful operators new ids that no uid can pin. Keep the old query, or start the new one "
                            "without the old state.",
        "uid-missing-or-changed": "No operator name in the logs hashes to that id, so the operator either had no "
                                  ".uid() (an auto-generated id, which changes when operators are added, removed or "
                                  "chained differently) or a uid that was changed. Set the old id on the operator "
                                  "that should own the state (.setUidHash(\"{operator}\")), then give every stateful "
                                  "operator a stable uid.",
        "uid known": "That id is the hash of the explicit uid '{uid}': the new program has no operator with uid "
                     "'{uid}' any more (renamed or removed). Give the operator back its uid to keep its state.",
        "undetermined": "The logs do not show which operator that was nor whether the job is DataStream or SQL: root "
                        "cause undetermined.",
        "submission note": "the submission named the snapshot{without}",
        "without flag": " without allowNonRestoredState",
        "unmapped note": "the snapshot holds state for operator {operator}, which the new program does not have",
        "task note": "operator {operator} was the first operator of task '{task}' in the job that took the snapshot",
        "sql note": "an operator only the SQL planner creates: a SQL/Table job",
        "old uid": "Give the operator that should own the state its old uid '{uid}' again; change uids only together "
                   "with a State Processor API migration.",
        "set uid hash": "Maps the snapshot's auto-generated operator id onto the operator that should own its state, "
                        "so this one restore keeps it; after the job has taken a new savepoint, replace it with a "
                        "stable .uid(...) (Flink's docs: setUidHash is for this migration only).",
        "stable uids": "Without .uid() Flink derives ids from the graph's shape: adding, removing or re-chaining an "
                       "operator changes the ids downstream and orphans their state.",
        "keep the old query": "A changed SQL query cannot take over the old query's state: either keep running the "
                              "old statement, or start the new one without the old state and let it rebuild from the "
                              "sources (from earliest offsets or a bootstrap), running both side by side until the "
                              "new one has caught up.",
        "compiled plan": "A compiled plan (Flink 1.15+) keeps the operator ids of an unchanged query stable across "
                         "Flink upgrades; it does not make a changed query's state restorable.",
        "pass the flag": "Drops the state of operator {operator} for good: do it only if that operator was removed on "
                         "purpose. The flag must travel with the submission itself: a REST or web UI submission's own "
                         "allowNonRestoredState (false unless given) wins over the cluster's configuration file.",
        "skip the state": "A conscious data-loss choice: the state of operator {operator} (and of any other operator "
                          "the new program lacks) is dropped for good and the operator starts empty. Only when that "
                          "operator was removed on purpose, or its state can be rebuilt.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        failures = [(ev, m) for ev, m in incident.find(UNMAPPED)]
        if not failures:
            return []
        event, match = _most_complete(failures)
        path, operator = match["path"], match["op"]
        starts = [s for s in savepoint_starts(incident) if _same_path(s.path, path)]
        start = starts[-1] if starts else None
        known = vertices(incident)
        vertex = known.get(operator)
        uid = uid_for(operator, candidate_uids(incident))
        sql = sql_operators(incident)
        configured = ignore_unclaimed_configured(incident.config)
        if configured and not (start and start.allow_non_restored):
            cause = "allow-non-restored-not-propagated"
        elif sql:
            cause = "sql-plan-changed"
        elif uid or known:
            cause = "uid-missing-or-changed"
        else:
            cause = "undetermined"
        excerpt = is_excerpt(incident)
        confidence = {"allow-non-restored-not-propagated": 0.85, "sql-plan-changed": 0.85,
                      "uid-missing-or-changed": 0.9 if uid or vertex else 0.75, "undetermined": 0.5}[cause]
        if excerpt and cause != "undetermined":
            confidence -= 0.15

        details = {
            "snapshot": path,
            "unmapped_operator_id": operator,
            "operator_in_snapshot_job": vertex.task if vertex else "not in these logs",
            "explicit_uid": uid or "no operator name in the logs hashes to this id",
            "allow_non_restored_state_at_submission": (
                "yes" if start and start.allow_non_restored else "no" if start else "unknown (no 'Starting job … "
                "from savepoint' line)"),
            "ignore_unclaimed_state_configured": {True: "true", False: "false", None: "not set (false)"}[configured],
            "job_api": "SQL/Table" if sql else "DataStream" if known else "unknown",
        }
        evidence, notes, add = evidence_trail()
        add(start.event if start else None,
            self.say("submission note",
                     without="" if start and start.allow_non_restored else self.say("without flag")))
        add(event, self.say("unmapped note", operator=operator))
        if vertex:
            add(vertex.event, self.say("task note", operator=operator, task=vertex.task))
        if sql:
            add(sql[0], self.say("sql note"))
        summary = self.say("head", path=path, operator=operator)
        if cause != "undetermined" and vertex:
            summary += self.say("where", task=vertex.task)
        if cause == "allow-non-restored-not-propagated":
            summary += self.say(cause, key="/".join(sorted({IGNORE_UNCLAIMED_KEY,
                                                             "execution.savepoint.ignore-unclaimed-state"})))
        elif cause == "uid-missing-or-changed":
            summary += self.say("uid known", uid=uid) if uid else self.say(cause, operator=operator)
        else:
            summary += self.say(cause)
        patches = self._patches(incident, cause, path, operator, vertex, uid)
        return [self.finding(cause, summary, evidence, notes=notes, confidence=confidence, patches=patches,
                             details=details)]

    def _patches(self, incident, cause, path, operator, vertex, uid):
        patches = []
        name = vertex.operators[0] if vertex else "<operator>"
        if cause == "uid-missing-or-changed":
            if uid:
                patches.append(self.code_patch(
                    "stable operator uids",
                    f'stream.keyBy(...).process(new ...).name("{name}").uid("{uid}");  // the uid the snapshot knows',
                    self.say("old uid", uid=uid)))
            else:
                patches.append(self.code_patch(
                    "map the old operator id (setUidHash)",
                    f'.process(new ...).name("{name}").setUidHash("{operator}");',
                    self.say("set uid hash")))
                patches.append(self.code_patch(
                    "stable operator uids",
                    'env.fromSource(...).uid("orders-source");\nstream.keyBy(...).process(...).uid("counter");\n'
                    '// and every other stateful operator: ids stay the same when the job graph changes',
                    self.say("stable uids")))
        if cause == "sql-plan-changed":
            patches.append(self.ops_patch(
                "keep the old query or start the new one without state",
                self.say("keep the old query")))
            patches.append(self.code_patch(
                "compiled plan for upgrades",
                "COMPILE PLAN 'file:///plans/orders.json' FOR INSERT INTO totals SELECT ...;\n"
                "EXECUTE PLAN 'file:///plans/orders.json';",
                self.say("compiled plan")))
        if cause == "allow-non-restored-not-propagated":
            patches.append(self.ops_patch(
                "pass allowNonRestoredState with the submission",
                self.say("pass the flag", operator=operator),
                snippet=(f"flink run -s {path} --allowNonRestoredState ...\n"
                         f"# REST: POST /jars/<jar-id>/run {{\"savepointPath\": \"{path}\", \"allowNonRestoredState\": true}}\n"
                         "# Kubernetes operator: spec.job.allowNonRestoredState: true")))
        if cause in ("uid-missing-or-changed", "sql-plan-changed", "undetermined"):
            patches.append(self.ops_patch(
                "restore without the unmapped state (allowNonRestoredState)",
                self.say("skip the state", operator=operator),
                snippet=f"flink run -s {path} --allowNonRestoredState <your job arguments>"))
        return patches


def _most_complete(failures: list[tuple[Event, re.Match[str]]]) -> tuple[Event, re.Match[str]]:
    """The JobManager's record of the failure (the whole chain) over the client's copy of it."""
    ranked = sorted(failures, key=lambda f: (f[0].role != "jobmanager", -len(f[0].chain), f[0].line))
    return ranked[0]


def _same_path(a: str, b: str) -> bool:
    def norm(p: str) -> str:
        return re.sub(r"^file:/*", "/", p).rstrip("/.")
    return norm(a) == norm(b)
