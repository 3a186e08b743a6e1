"""A restore refused because the maximum parallelism changed: the snapshot's keyed state is split into as many key
groups as the maximum parallelism of the job that took it, and a restore cannot split it another way.

Flink's rule (``Checkpoints#loadAndValidateCheckpoint``, ``SchedulerBase#computeVertexParallelismStore``,
``StateAssignmentOperation#checkParallelismPreconditions``, the same in 1.11.4, 1.12.5, 1.13.6, 1.17.2, 1.20.3 and
2.3.0):

- a maximum the new job leaves unset is derived from its parallelism
  (``KeyGroupRangeAssignment#computeDefaultMaxParallelism``: the power of two at or above parallelism × 1.5, at
  least 128, at most 32768) and is then *replaced by the snapshot's*, so a derived default that changed (a
  parallelism that crossed 85, the last one that derives 128) is no failure by itself;
- a maximum the new job sets (``pipeline.max-parallelism``, ``env.setMaxParallelism`` or an operator's
  ``setMaxParallelism``) must equal the snapshot's: ``Max parallelism mismatch … Cannot map operator X with max
  parallelism A to new program with max parallelism B``;
- whatever the maximum, a parallelism above the snapshot's maximum cannot be served: ``The maximum parallelism (A)
  of the restored state is lower than the configured parallelism (P)``.

Restoring without that state (allowNonRestoredState) is never a fix: it drops the keyed state of every such operator.
"""
from __future__ import annotations

import re

from flink_runbooks.detectors.base import Detector, signature, version_key
from flink_runbooks.evidence.episodes import is_excerpt
from flink_runbooks.evidence.restore import candidate_uids, savepoint_starts, uid_for, vertices
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording

SLUG = "restore-max-parallelism-changed"
MAX_KEY = "pipeline.max-parallelism"
PARALLELISM_KEY = "parallelism.default"

MISMATCH = re.compile(
    r"Failed to rollback to checkpoint/savepoint (?P<path>.+?)\. Max parallelism mismatch between checkpoint/savepoint "
    r"state and new program\. Cannot map operator (?P<op>[0-9a-f]{32}) with max parallelism (?P<old>\d+) to new "
    r"program with max parallelism (?P<new>\d+)")
# Reached when the snapshot is assigned to the tasks (the latest checkpoint after a failover, or an operator of a
# chain whose maximum another one already set): the vertex is printed without a toString, as ``ExecutionJobVertex@…``.
CHANGED = re.compile(
    r"The maximum parallelism \((?P<old>\d+)\) with which the latest checkpoint of the execution job vertex "
    r"(?P<vertex>\S+) has been taken and the current maximum parallelism \((?P<new>\d+)\) changed")
BELOW = re.compile(
    r"The state for task (?P<op>[0-9a-f]{32}) can not be restored\. The maximum parallelism \((?P<old>\d+)\) of the "
    r"restored state is lower than the configured parallelism \((?P<parallelism>\d+)\)")
ABOVE_MAX = re.compile(
    r"Vertex (?P<task>.+?)'s parallelism \((?P<parallelism>\d+)\) is higher than the max parallelism "
    r"\((?P<max>\d+)\)")
# The client logs its arguments one per line: ``-Dpipeline.max-parallelism=256`` is how a submission sets it.
DYNAMIC_MAX = re.compile(r"(?:^|\s)-Dpipeline\.max-parallelism=(?P<value>\d+)\s*$")

_NEXT = ("the JobManager log of the refused submission and of the job that took the snapshot, the Flink "
         "configuration and the client log of the submission (`grep -nE \"max-parallelism|setMaxParallelism\" "
         "flink-conf.yaml config.yaml log/*client*.log` and the job's code), so that the new maximum can be traced to "
         "a setting.")
_SUBMIT_LOWER = "ops:submit with a lower parallelism"
_CODE_LOWER = "code:set a lower parallelism in the code"
_REWRITE = "ops:rewrite the snapshot with another maximum parallelism (State Processor API)"


def default_max_parallelism(parallelism: int) -> int:
    """The maximum parallelism Flink derives when none is set (``KeyGroupRangeAssignment#computeDefaultMaxParallelism``
    in 1.20.3 and 2.3.0: ``min(max(roundUpToPowerOfTwo(p + p / 2), 128), 32768)``).

    >>> [default_max_parallelism(p) for p in (1, 85, 86, 200)]
    [128, 128, 256, 512]
    """
    wanted = parallelism + parallelism // 2
    power = 1
    while power < wanted:
        power *= 2
    return min(max(power, 128), 32768)


class RestoreMaxParallelismChanged(Detector):
    slug = SLUG
    title = "Restore refused: maximum parallelism changed"
    category = "state-restore"
    meaning = ("The job was restored from a checkpoint or savepoint taken with another maximum parallelism (the "
               "number of key groups its keyed state is split into), or with a parallelism above it: the JobManager "
               "refused to start it.")
    exception_classes = ("java.lang.IllegalStateException",)
    versions = "1.11 – 2.x (same wordings in 1.11.4, 1.12.5, 1.13.6, 1.17.2, 1.20.3 and 2.3.0)"
    config_keys = (MAX_KEY, PARALLELISM_KEY, "execution.state-recovery.path")
    signatures = (
        signature(MISMATCH),
        signature(CHANGED),
        signature(BELOW),
        signature(ABOVE_MAX),
        signature(DYNAMIC_MAX),
        r"Starting job [0-9a-f]{32} from savepoint ",
        r"Deploying .+ with attempt id .+ and vertex id [0-9a-f]{32}",
    )
    wordings = (
        Wording(SLUG,
                r"Max parallelism mismatch between checkpoint/savepoint state and new program\. Cannot map operator "
                r"[0-9a-f]{32} with max parallelism \d+ to new program with max parallelism \d+",
                "1.11 – 2.x", "o.a.f.runtime.checkpoint.Checkpoints#loadAndValidateCheckpoint (the same text in "
                "1.11.4, 1.12.5, 1.13.6, 1.17.2, 1.20.3 and 2.3.0; the path is the metadata's name, "
                "'Checkpoint Metadata')",
                "java.lang.IllegalStateException: Failed to rollback to checkpoint/savepoint Checkpoint Metadata. Max "
                "parallelism mismatch between checkpoint/savepoint state and new program. Cannot map operator "
                "acfc6037bce502a9aa3bb5b361f1ed1f with max parallelism 128 to new program with max parallelism 256. "
                "This indicates that the program has been changed in a non-compatible way after the "
                "checkpoint/savepoint."),
        Wording(SLUG,
                r"The maximum parallelism \(\d+\) with which the latest checkpoint of the execution job vertex \S+ "
                r"has been taken and the current maximum parallelism \(\d+\) changed\. This is currently not "
                r"supported\.",
                "1.11 – 2.x", "o.a.f.runtime.checkpoint.StateAssignmentOperation#checkParallelismPreconditions (the "
                "same text in 1.11.4, 1.12.5, 1.13.6, 1.17.2, 1.20.3 and 2.3.0)",
                "java.lang.IllegalStateException: The maximum parallelism (128) with which the latest checkpoint of "
                "the execution job vertex org.apache.flink.runtime.executiongraph.ExecutionJobVertex@5b0e2c1f has "
                "been taken and the current maximum parallelism (256) changed. This is currently not supported."),
        Wording(SLUG,
                r"The state for task [0-9a-f]{32} can not be restored\. The maximum parallelism \(\d+\) of the "
                r"restored state is lower than the configured parallelism \(\d+\)\. Please reduce the parallelism "
                r"of the task to be lower or equal to the maximum parallelism\.",
                "1.11 – 2.x", "o.a.f.runtime.checkpoint.StateAssignmentOperation#checkParallelismPreconditions (the "
                "same text in 1.11.4, 1.12.5, 1.13.6, 1.17.2, 1.20.3 and 2.3.0)",
                "java.lang.IllegalStateException: The state for task acfc6037bce502a9aa3bb5b361f1ed1f can not be "
                "restored. The maximum parallelism (128) of the restored state is lower than the configured "
                "parallelism (200). Please reduce the parallelism of the task to be lower or equal to the maximum "
                "parallelism."),
        Wording(SLUG,
                r"Vertex .+'s parallelism \(\d+\) is higher than the max parallelism \(\d+\)\. Please lower the "
                r"parallelism or increase the max parallelism\.",
                "1.11 – 2.x", "o.a.f.runtime.executiongraph.ExecutionJobVertex (a JobException; the same text in "
                "1.11.4, 1.12.5, 1.13.6, 1.17.2, 1.20.3 and 2.3.0)",
                "org.apache.flink.runtime.JobException: Vertex order-counter -> Sink: sink's parallelism (4) is "
                "higher than the max parallelism (2). Please lower the parallelism or increase the max "
                "parallelism."),
    )
    root_causes = (
        RootCause("max-parallelism-configured-differently",
                  "The configuration (pipeline.max-parallelism, in the file or as -D with the submission) sets a "
                  "maximum parallelism other than the one the snapshot was taken with.",
                  "The refusal names the snapshot's and the new maximum, and the configuration or the submission's "
                  "-Dpipeline.max-parallelism sets the new one.",
                  patches=(f"flink:{MAX_KEY}", _REWRITE)),
        RootCause("max-parallelism-set-in-code",
                  "The job's code sets a maximum parallelism (env.setMaxParallelism or an operator's "
                  "setMaxParallelism) other than the one the snapshot was taken with.",
                  "The refusal names a new maximum that Flink only refuses when it is set explicitly, while neither "
                  "the configuration the logs show nor the refused submission's client log sets "
                  "pipeline.max-parallelism to it.",
                  patches=("code:set the snapshot's maximum parallelism", _REWRITE)),
        RootCause("parallelism-above-snapshot-max",
                  "The new parallelism is above the snapshot's maximum parallelism: its keyed state has only that "
                  "many key groups, so no more subtasks can share it.",
                  "'The maximum parallelism (A) of the restored state is lower than the configured parallelism (P)'.",
                  patches=(f"flink:{PARALLELISM_KEY}", _SUBMIT_LOWER, _CODE_LOWER, _REWRITE)),
        RootCause("parallelism-above-max-parallelism",
                  "A vertex's parallelism is above the maximum parallelism the job sets, so the JobManager refuses "
                  "the job before any state is read.",
                  "'Vertex …'s parallelism (P) is higher than the max parallelism (M)'.",
                  patches=(f"flink:{PARALLELISM_KEY}", _SUBMIT_LOWER, _CODE_LOWER,
                           "code:raise the maximum parallelism of a job without state")),
        RootCause("undetermined",
                  "A restore was refused because the maximum parallelism changed, but the logs show neither the "
                  "configuration nor the submission, so the place that sets the new maximum is unknown.",
                  "The refusal alone (an excerpt): no configuration, no client log of the submission.",
                  patches=(f"flink:{MAX_KEY}", "code:set the snapshot's maximum parallelism"),
                  would_change="The configuration and the submission's arguments: pipeline.max-parallelism set "
                               "there (configuration), or not set (the job's code).",
                  next_evidence=_NEXT),
    )

    templates = {
        "head mismatch": "The restore was refused: the snapshot's state of {operator} was taken with maximum "
                         "parallelism {old} (its keyed state is split into {old} key groups) and the new job sets "
                         "{new}. Flink adopts the snapshot's maximum only when the new job leaves it unset. ",
        "head below": "The restore was refused: the snapshot's state of {operator} was taken with maximum "
                      "parallelism {old} (the number of key groups the job's keyed state is split into), and the new "
                      "job runs it with parallelism {parallelism}: a restored vertex cannot run more subtasks than "
                      "its snapshot's maximum. ",
        "head above": "The job was refused before any state was read: vertex '{task}' runs with parallelism "
                      "{parallelism}, above the maximum parallelism {max} the job sets. ",
        "max-parallelism-configured-differently": "{key}: {new} ({source}) sets the new maximum. Set {key}: {old}, "
                                                  "the value the snapshot was taken with, and keep it from now on.",
        "max-parallelism-set-in-code": "Neither the configuration nor the submission sets {key} to {new}, so the "
                                       "job's code does (env.setMaxParallelism or an operator's setMaxParallelism, "
                                       "which win over {key}): set it back to {old}.",
        "parallelism-above-snapshot-max": "Run it with parallelism {old} or less ({key}, -p or the job's "
                                          "setParallelism), or rewrite the snapshot with a larger maximum "
                                          "(State Processor API) before scaling beyond {old}.",
        "derived default": "{old} is the maximum Flink derives for any parallelism up to 85 when none is set: the "
                           "job that took the snapshot most likely never set one, and a parallelism of "
                           "{parallelism} derives {derived} now, which a restore cannot use. ",
        "parallelism-above-max-parallelism": "Lower the parallelism to {max} or less; raise the maximum only for a "
                                             "job that starts without state, because a snapshot's maximum cannot "
                                             "change.",
        "undetermined": "The logs show neither the configuration nor the submission, so where {new} is set is "
                        "unknown: set the maximum back to {old} where it is set (pipeline.max-parallelism or "
                        "setMaxParallelism in the code).",
        "submission note": "the submission named the snapshot",
        "refusal note": "the snapshot's maximum parallelism {old}, the new {new}",
        "below note": "the snapshot's maximum parallelism {old} is below the parallelism {parallelism}",
        "above note": "parallelism {parallelism} is above the job's maximum parallelism {max}",
        "dynamic note": "the submission sets pipeline.max-parallelism={value}",
        "task note": "operator {operator} was the first operator of task '{task}'",
        "set max key": "The snapshot's keyed state has {old} key groups; only the same maximum parallelism can "
                       "read it. A job's code that calls setMaxParallelism wins over this setting.",
        "set max dynamic": "The submission gives -D{key}={new}, which wins over the configuration file: submit "
                           "with -D{key}={old} (or drop the -D and keep this line in the file). The snapshot's keyed "
                           "state has {old} key groups; only the same maximum parallelism can read it.",
        "set max code": "The job sets maximum parallelism {new}, the snapshot was taken with {old}: set it back to "
                        "{old} (on the environment, or on the operator that sets its own) and keep it fixed for "
                        "the life of the job's state.",
        "share key groups": "at most {old} subtasks can share the snapshot's {old} key groups.",
        "lower parallelism": "{why} A job whose code or submission (-p) sets the parallelism needs the change there: "
                             "they win over this setting.",
        "lower parallelism cli": "The configuration does not set parallelism {parallelism}, so the submission (-p, "
                                 "which wins over the configuration) or the job's code does: {why}",
        "lower parallelism code": "When the job's code sets parallelism {parallelism} (it wins over -p and the "
                                  "configuration): {why}",
        "lower to max": "no vertex can run more subtasks than the job's maximum parallelism {max}.",
        "raise max": "Only for a job that starts without a snapshot: a snapshot's maximum parallelism is fixed, so "
                     "a job restored from one must keep its maximum.",
        "rewrite keep": "To keep the new maximum {new}: read the snapshot with the State Processor API and write a new "
                        "savepoint with maximum parallelism {new}, then restore from that one. The state is kept; "
                        "restoring without it (allowNonRestoredState) would drop it for good and is no fix.",
        "rewrite scale": "To run more than {old} subtasks: read the snapshot with the State Processor API and write a "
                         "new savepoint with a larger maximum parallelism (at least {parallelism}), restore from it and "
                         "set that maximum explicitly from then on. The state is kept; restoring without it "
                         "(allowNonRestoredState) would drop it for good and is no fix.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        refusals = ([("mismatch", ev, m) for ev, m in incident.find(MISMATCH)]
                    + [("mismatch", ev, m) for ev, m in incident.find(CHANGED)]
                    + [("below", ev, m) for ev, m in incident.find(BELOW)]
                    + [("above", ev, m) for ev, m in incident.find(ABOVE_MAX)])
        if not refusals:
            return []
        kind, event, match = _most_complete(refusals)
        refused = [ev for _, ev, _ in refusals]
        starts = savepoint_starts(incident)
        start = starts[-1] if starts else None
        path = match["path"] if "path" in match.re.groupindex else None
        if start and (not path or path == "Checkpoint Metadata"):
            path = start.path
        operator_id = match["op"] if "op" in match.re.groupindex else None
        vertex = vertices(incident).get(operator_id) if operator_id else None
        uid = uid_for(operator_id, candidate_uids(incident)) if operator_id else None
        operator = (f"operator '{uid}' ({operator_id})" if uid else
                    f"'{vertex.task}' ({operator_id})" if vertex else
                    f"operator {operator_id}" if operator_id else "a vertex")
        evidence, notes, add = evidence_trail()
        add(start.event if start else None, self.say("submission note"))
        details = {"snapshot": path or "not in these logs"}

        if kind == "above":
            parallelism, top = int(match["parallelism"]), int(match["max"])
            cause = "parallelism-above-max-parallelism"
            add(event, self.say("above note", parallelism=parallelism, max=top))
            summary = (self.say("head above", task=match["task"], parallelism=parallelism, max=top)
                       + self.say(cause, max=top))
            details.update(vertex=match["task"], parallelism=parallelism, max_parallelism=top)
            patches = self._parallelism_patches(incident, refused, top, parallelism, path,
                                                self.say("lower to max", max=top))
            if not start:
                patches.append(self.code_patch("raise the maximum parallelism of a job without state",
                                               f"env.setMaxParallelism({default_max_parallelism(parallelism)});",
                                               self.say("raise max")))
            confidence = 0.75 if is_excerpt(incident) else 0.9
            return [self.finding(cause, summary, evidence, notes=notes, confidence=confidence, patches=patches,
                                 details=details)]

        old = int(match["old"])
        if vertex:
            add(vertex.event, self.say("task note", operator=operator_id, task=vertex.task))
        if kind == "below":
            parallelism = int(match["parallelism"])
            cause = "parallelism-above-snapshot-max"
            add(event, self.say("below note", old=old, parallelism=parallelism))
            summary = self.say("head below", operator=operator, old=old, parallelism=parallelism)
            if old == 128:
                summary += self.say("derived default", old=old, parallelism=parallelism,
                                    derived=default_max_parallelism(parallelism))
            summary += self.say(cause, old=old, key=self._key(incident, PARALLELISM_KEY))
            details.update(operator=operator, snapshot_max_parallelism=old, new_parallelism=parallelism,
                           derived_max_parallelism_for_new_parallelism=default_max_parallelism(parallelism))
            patches = self._parallelism_patches(incident, refused, old, parallelism, path,
                                                self.say("share key groups", old=old))
            patches += [self._rewrite(self.say("rewrite scale", old=old, parallelism=parallelism),
                                     default_max_parallelism(parallelism))]
            details["new_parallelism_set_by"] = next(
                (p.current_source or "the configuration" for p in patches if p.target == "flink" and p.current),
                "the submission (-p) or the job's code")
            confidence = 0.75 if is_excerpt(incident) else 0.9
            return [self.finding(cause, summary, evidence, notes=notes, confidence=confidence, patches=patches,
                                 details=details)]

        new = int(match["new"])
        add(event, self.say("refusal note", old=old, new=new))
        dynamic = [(ev, m) for ev, m in incident.find(DYNAMIC_MAX)]
        configured = incident.config.lookup(MAX_KEY)
        key = self._key(incident, MAX_KEY)
        if dynamic and int(dynamic[-1][1]["value"]) == new:
            ev, _ = dynamic[-1]
            add(ev, self.say("dynamic note", value=new))
            cause, source = "max-parallelism-configured-differently", f"-D with the submission, {ev.file}:{ev.line}"
        elif configured is not None and configured.value.strip() == str(new):
            cause, source = "max-parallelism-configured-differently", str(configured.source)
        elif _submission_known(incident, refused):
            # nothing outside the code sets the new value (a configured other value is overridden by the code)
            cause, source = "max-parallelism-set-in-code", ""
        else:
            cause, source = "undetermined", ""
        summary = self.say("head mismatch", operator=operator, old=old, new=new)
        if cause == "max-parallelism-configured-differently":
            summary += self.say(cause, key=key, new=new, old=old, source=source)
        elif cause == "max-parallelism-set-in-code":
            summary += self.say(cause, key=key, new=new, old=old)
        else:
            summary += self.say(cause, new=new, old=old)
        details.update(operator=operator, snapshot_max_parallelism=old, new_max_parallelism=new,
                       new_max_parallelism_set_by={"max-parallelism-configured-differently": source,
                                                   "max-parallelism-set-in-code": "the job's code",
                                                   "undetermined": "unknown"}[cause])
        patches = []
        if cause != "max-parallelism-set-in-code":
            reason = (self.say("set max dynamic", key=key, new=new, old=old) if source.startswith("-D")
                      else self.say("set max key", old=old))
            patches.append(self.flink_patch(incident, MAX_KEY, str(old), reason))
        if cause != "max-parallelism-configured-differently":
            patches.append(self.code_patch("set the snapshot's maximum parallelism",
                                           f"env.setMaxParallelism({old});  // the snapshot's maximum; was {new}",
                                           self.say("set max code", old=old, new=new)))
        if cause != "undetermined":
            patches.append(self._rewrite(self.say("rewrite keep", new=new), new))
        confidence = {"max-parallelism-configured-differently": 0.9, "max-parallelism-set-in-code": 0.8,
                      "undetermined": 0.5}[cause]
        return [self.finding(cause, summary, evidence, notes=notes, confidence=confidence, patches=patches,
                             details=details)]

    def _parallelism_patches(self, incident: Incident, refused: list[Event], limit: int, parallelism: int,
                             path: str | None, why: str) -> list:
        """Lower the parallelism to ``limit`` where it is set: -p wins over the configuration, the code over both."""
        configured = incident.config.lookup(PARALLELISM_KEY)
        if configured is not None and configured.value.strip() == str(parallelism):
            return [self.flink_patch(incident, PARALLELISM_KEY, str(limit), self.say("lower parallelism", why=why))]
        restore = f"-s {path} " if path else ""
        submit = self.ops_patch("submit with a lower parallelism",
                                self.say("lower parallelism cli", parallelism=parallelism, why=why),
                                snippet=f"flink run {restore}-p {limit} <your job arguments>")
        code = self.code_patch("set a lower parallelism in the code",
                               f"env.setParallelism({limit});  // or the operator's setParallelism; was {parallelism}",
                               self.say("lower parallelism code", parallelism=parallelism, why=why))
        if _submission_known(incident, refused) or configured is not None:
            return [submit, code]
        return [self.flink_patch(incident, PARALLELISM_KEY, str(limit), self.say("lower parallelism", why=why)),
                submit, code]

    def _rewrite(self, reason: str, new: int):
        return self.ops_patch(
            "rewrite the snapshot with another maximum parallelism (State Processor API)",
            reason,
            snippet=("SavepointReader old = SavepointReader.read(env, \"<snapshot path>\",\n"
                     "                                            new HashMapStateBackend());\n"
                     "// read each keyed operator's state (old.readKeyedState(OperatorIdentifier.forUid(...), ...)),\n"
                     f"SavepointWriter.newSavepoint(env, new HashMapStateBackend(), {new})  // the new maximum\n"
                     "    .withOperator(OperatorIdentifier.forUid(\"<uid>\"), transformation)\n"
                     "    .write(\"<new savepoint path>\");"),
            urgent=False)

    @staticmethod
    def _key(incident: Incident, key: str) -> str:
        return version_key(incident, key)


def _submission_known(incident: Incident, refusals: list[Event]) -> bool:
    """The configuration (a file or the logged properties) and the client log of the refused submission (it prints
    the refusal, after the arguments it was given) are both there: a -D or -p given with the submission reaches the
    job but is logged only by the client."""
    config = incident.config.file_path is not None or bool(incident.config.items())
    return config and any(ev.role == "client" for ev in refusals)


def _most_complete(refusals: list[tuple[str, Event, re.Match[str]]]) -> tuple[str, Event, re.Match[str]]:
    """The JobManager's record of the refusal (the whole chain) over the client's copy of it."""
    return sorted(refusals, key=lambda r: (r[1].role != "jobmanager", -len(r[1].chain), r[1].line))[0]
