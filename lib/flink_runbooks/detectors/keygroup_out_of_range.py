"""``Key group N is not in KeyGroupRange{startKeyGroup=a, endKeyGroup=b}``: a keyed operator's subtask was asked to
work on a key whose key group belongs to another subtask.

``keyBy`` sends a record to the subtask that owns ``murmur(key.hashCode()) % maxParallelism``, computed on the
sending side; the receiving subtask extracts the key again from the record it deserialized and computes its group
again. When the two disagree, the key is not deterministic:

- the key selector is not (a random number, the current time, a counter);
- or the key's ``hashCode`` is not: a class without ``hashCode``/``equals`` (Object's identity hash differs for every
  instance, and a deserialized copy is another instance), an enum's or an array's identity hash, a mutable key
  changed after ``keyBy``.

Neither the key selector nor the key's ``hashCode`` is on the stack when Flink throws (both returned already), so
the logs tell the two apart only through the job's code; the operator and its task are named from the trace.
The other cause is code that sets the key itself (low-level state access: ``setCurrentKey`` from the job's own
class, ``reinterpretAsKeyedStream`` on a stream not partitioned by that key): the frames show the job's class
calling the state backend without a ``setKeyContextElement`` of Flink's record path.
"""
from __future__ import annotations

import re

from flink_runbooks.detectors.base import Detector, signature
from flink_runbooks.evidence.episodes import is_excerpt
from flink_runbooks.evidence.faults import frame_class, is_framework, task_name
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording

OUT_OF_RANGE = re.compile(r"Key group (?P<group>\d+) is not in KeyGroupRange\{startKeyGroup=(?P<start>\d+), "
                          r"endKeyGroup=(?P<end>\d+)\}")
# The TypeExtractor's INFO on a class it will serialize with Kryo: a key class without hashCode is often one.
GENERIC_TYPE = re.compile(r"(?:Class|POJO type '?) ?(?:class )?(?P<cls>[\w.$]+)'? (?:is missing a default constructor|"
                          r"cannot be used as a POJO type|is not public|contains custom serialization)")
# Flink's record path: the operator sets the key of each incoming record itself (checked there since 1.17) ...
RECORD_PATH = re.compile(r"\.setKeyContextElement\d?\(|\.setAsyncKeyedContextElement\(")
# ... or, before 1.17, the heap backend's state table checks it when the function reads its state.
HEAP_STATE = re.compile(r"org\.apache\.flink\.runtime\.state\.heap\.StateTable\.")
KEY_ENTRY = re.compile(r"\.setCurrentKey\(|KeyedStateBackend\.\w+\(|\.applyToAllKeys\(|\.getPartitionedState\(")
OPERATOR_FRAME = re.compile(r"org\.apache\.flink\.[\w.]*?\.(?P<op>\w*Operator\w*)\.(?:processElement\w*|"
                            r"onEventTime|onProcessingTime)\(")

_CODE_KEY = "code:a deterministic key"
_NEXT = ("the TaskManager log with the whole trace of the failure and the job's key selector and key class (`grep -n "
         "-A40 \"is not in KeyGroupRange\" taskmanager*.log`; in the code: keyBy(...), the key class's hashCode and "
         "equals).")


class KeygroupOutOfRange(Detector):
    slug = "keygroup-out-of-range"
    title = "Key group out of range: non-deterministic key"
    category = "job-code"
    meaning = ("A keyed operator received a record whose key, computed again on arrival, belongs to another "
               "subtask's key groups: the job's key (its selector or its hashCode) is not deterministic.")
    exception_classes = ("java.lang.IllegalArgumentException",)
    versions = ("1.11 – 2.x (the hint on non-deterministic keys since 1.13; checked in 1.11.4, 1.12.5, 1.13.6, "
                "1.17.2, 1.20.3 and 2.3.0)")
    config_keys = ("pipeline.max-parallelism", "parallelism.default", "state.backend.type")
    signatures = (
        signature(OUT_OF_RANGE),
        r"must be processed as GenericType",
    )
    frames = (
        r"\.setKeyContextElement\d?\(",
        r"\.setCurrentKey(?:GroupIndex)?\(",
        r"KeyedStateBackend\.(?:setCurrentKey|applyToAllKeys|getPartitionedState)\(",
        r"org\.apache\.flink\.[\w.]*Operator\w*\.(?:processElement\w*|onEventTime|onProcessingTime)\(",
        r"org\.apache\.flink\.runtime\.state\.heap\.StateTable\.",
    )
    wordings = (
        Wording("keygroup-out-of-range",
                r"Key group \d+ is not in KeyGroupRange\{startKeyGroup=\d+, endKeyGroup=\d+\}\. Unless you're "
                r"directly using low level state access APIs, this is most likely caused by non-deterministic "
                r"shuffle key \(hashCode and equals implementation\)\.",
                "1.13 – 2.x", "o.a.f.runtime.state.KeyGroupRangeOffsets#newIllegalKeyGroupException, thrown by the "
                "heap StateTable and (1.17+) InternalKeyContextImpl#setCurrentKeyGroupIndex for every state backend "
                "(the same text in 1.13.6, 1.17.2, 1.20.3 and 2.3.0)",
                "java.lang.IllegalArgumentException: Key group 45 is not in KeyGroupRange{startKeyGroup=64, "
                "endKeyGroup=127}. Unless you're directly using low level state access APIs, this is most likely "
                "caused by non-deterministic shuffle key (hashCode and equals implementation)."),
        Wording("keygroup-out-of-range",
                r"Key group \d+ is not in KeyGroupRange\{startKeyGroup=\d+, endKeyGroup=\d+\}\.$",
                "1.11 – 1.12", "o.a.f.runtime.state.KeyGroupRangeOffsets (checked in 1.11.4 and 1.12.5: the short "
                "text, thrown when a keyed snapshot is written or read)",
                "java.lang.IllegalArgumentException: Key group 45 is not in KeyGroupRange{startKeyGroup=64, "
                "endKeyGroup=127}."),
    )
    root_causes = (
        RootCause("non-deterministic-key",
                  "The key a record is routed by differs from the key its subtask computes again on arrival: the key "
                  "selector is not deterministic (random, time, a counter), or the key's hashCode is not (a class "
                  "without hashCode/equals, an enum's or an array's identity hash, a mutable key changed after "
                  "keyBy).",
                  "The failure is thrown on the keyed operator's record path (Flink sets the key of the incoming "
                  "record: setKeyContextElement in the trace; before 1.17 the heap state table as the function reads "
                  "its state under the operator's processElement), with no code of the job setting keys itself.",
                  patches=(_CODE_KEY,)),
        RootCause("low-level-state-access",
                  "Code of the job sets the current key itself (setCurrentKey, a KeyedStateBackend call, or a "
                  "stream reinterpreted as keyed that Flink did not partition by that key), so a key lands on a "
                  "subtask that does not own it.",
                  "A class of the job calls the keyed state backend directly in the trace (setCurrentKey, "
                  "applyToAllKeys, getPartitionedState), without Flink's setKeyContextElement record path.",
                  patches=("code:set keys only through keyBy",)),
        RootCause("undetermined",
                  "A keyed operator got a key outside its key groups, but the logs keep no trace showing where the "
                  "key was set.",
                  "The message alone (an excerpt or a trace without frames).",
                  patches=(_CODE_KEY,),
                  would_change="The trace of the failure: Flink's setKeyContextElement (a non-deterministic key) or "
                               "a class of the job calling setCurrentKey (low-level state access).",
                  next_evidence=_NEXT),
    )

    templates = {
        "head": "Task '{task}' failed: key group {group} is not among the key groups {start}–{end} its subtask "
                "owns, so the record's key, computed again on arrival, is not the key keyBy routed it by. ",
        "head without task": "A keyed operator failed: key group {group} is not among the key groups {start}–{end} its "
                             "subtask owns, so the record's key, computed again on arrival, is not the key keyBy "
                             "routed it by. ",
        "operator": "The keyed operator is {operator}. ",
        "operator and function": "The keyed operator is {operator}, running {function}. ",
        "repeats": "{count} failures with key groups {groups}: a deterministic key would fail on the same record the "
                   "same way. ",
        "non-deterministic-key": "Flink set the key of the incoming record itself, so the key is not "
                                 "deterministic: a key selector that uses randomness, time or a counter, or a key "
                                 "type without a value-based hashCode/equals (Object's identity hash, an enum's or an "
                                 "array's). Key by a String or Long derived from the record's fields, or by a "
                                 "class with hashCode and equals over immutable fields.",
        "generic types": "Classes Flink serializes with Kryo in this job (a key class without hashCode often is "
                         "one): {classes}. ",
        "low-level-state-access": "The job's own code sets the key: {frame} calls the keyed state backend outside "
                                  "Flink's record path. Let keyBy choose the subtask, or set only keys that belong "
                                  "to the subtask's key group range.",
        "undetermined": "The logs keep no trace showing where the key was set: root cause undetermined; most often "
                        "a non-deterministic key selector or hashCode.",
        "failure note": "key group {group} outside {start}–{end}, thrown {where}",
        "where record path": "while the operator set the key of an incoming record",
        "where state read": "while {function} read its keyed state for an incoming record",
        "where user code": "from the job's code ({frame})",
        "where unknown": "(no frames kept)",
        "generic note": "{cls} is serialized with Kryo",
        "deterministic key": "Route and look up by the same value every time: a key computed from the record's fields "
                             "alone (String, Long, or a class with value-based hashCode and equals over immutable "
                             "fields). Never an array, an enum's identity hash (use name()), Object's identity hash, "
                             "randomness or the current time.",
        "only keyBy": "Set keys through keyBy only; reinterpretAsKeyedStream is safe only on a stream partitioned by "
                      "exactly that key and maximum parallelism; direct setCurrentKey must stay within the subtask's "
                      "key group range (KeyGroupRangeAssignment).",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        failures = [(ev, m) for ev, m in incident.find(OUT_OF_RANGE)]
        if not failures:
            return []
        event, match = _most_complete(failures)
        group, start, end = match["group"], match["start"], match["end"]
        frames = event.frames
        caller = _user_caller(frames)
        operator = next((m["op"] for f in frames for m in [OPERATOR_FRAME.search(f)] if m), None)
        state_read = (not caller and operator is not None and any(HEAP_STATE.search(f) for f in frames))
        record_path = state_read or any(RECORD_PATH.search(f) for f in frames)
        function = next((_short(f) for f in frames if _is_user(f)), None) if state_read else None
        if caller and not record_path:
            cause = "low-level-state-access"
        elif record_path:
            cause = "non-deterministic-key"
        else:
            cause = "undetermined"
        task = _task(failures)
        groups = sorted({int(m["group"]) for _, m in failures})
        generic = sorted({m["cls"] for _, m in incident.find(GENERIC_TYPE) if not is_framework(m["cls"])})

        evidence, notes, add = evidence_trail()
        where = (self.say("where state read", function=function or operator) if state_read else
                 self.say("where record path") if record_path else
                 self.say("where user code", frame=caller) if caller else self.say("where unknown"))
        add(event, self.say("failure note", group=group, start=start, end=end, where=where))
        for ev, m in incident.find(GENERIC_TYPE):
            if m["cls"] in generic:
                add(ev, self.say("generic note", cls=m["cls"]))
                break
        summary = (self.say("head", task=task, group=group, start=start, end=end) if task else
                   self.say("head without task", group=group, start=start, end=end))
        if operator and function:
            summary += self.say("operator and function", operator=operator, function=function)
        elif operator:
            summary += self.say("operator", operator=operator)
        if len(failures) > 1:
            summary += self.say("repeats", count=len(failures), groups=", ".join(map(str, groups[:8])))
        if cause == "low-level-state-access":
            summary += self.say(cause, frame=caller)
        else:
            summary += self.say(cause)
            if generic:
                summary += self.say("generic types", classes=", ".join(generic[:5]))
        details = {
            "task": task or "not in these logs",
            "operator": operator or "not in the trace",
            "function": function or "not in the trace",
            "key_group": int(group),
            "subtask_key_groups": f"{start}–{end}",
            "failures": len(failures),
            "key_groups_seen": groups[:20],
            "set_by": ("Flink's record path (the function's state read)" if state_read else
                       "Flink's record path (setKeyContextElement)" if record_path else
                       f"the job's code ({caller})" if caller else "unknown (no frames)"),
            "kryo_serialized_classes": generic or "none logged",
        }
        if cause == "low-level-state-access":
            patches = [self.code_patch("set keys only through keyBy",
                                       "stream.keyBy(order -> order.getCustomerId())   // let keyBy pick the subtask\n"
                                       "       .process(new CountPerCustomer());",
                                       self.say("only keyBy"))]
        else:
            patches = [self.code_patch(
                "a deterministic key",
                "// the key from the record's fields alone: the same value on the sending and the receiving side\n"
                "stream.keyBy(order -> order.getCustomerId());          // String or Long\n"
                "// a key class needs value-based hashCode/equals over immutable fields:\n"
                "public final class CustomerKey {\n"
                "    private final String region; private final long id;\n"
                "    @Override public int hashCode() { return Objects.hash(region, id); }\n"
                "    @Override public boolean equals(Object o) { ... compare region and id ... }\n"
                "}\n"
                "// an enum: key by status.name(), never by the enum (its hashCode is the identity hash)",
                self.say("deterministic key"))]
        confidence = {"non-deterministic-key": 0.85, "low-level-state-access": 0.8, "undetermined": 0.5}[cause]
        if is_excerpt(incident) and cause != "undetermined":
            confidence -= 0.1
        return [self.finding(cause, summary, evidence, notes=notes, confidence=confidence, patches=patches,
                             details=details)]


def _user_caller(frames: list[str]) -> str | None:
    """The job's own frame right below (the caller of) Flink's key-setting frames, if any."""
    for i, frame in enumerate(frames):
        if KEY_ENTRY.search(frame):
            for below in frames[i + 1:]:
                if _is_user(below):
                    return _short(below)
                cls = frame_class(below)
                if cls and not cls.startswith("org.apache.flink.runtime.state"):
                    break
    return None


def _is_user(frame: str) -> bool:
    cls = frame_class(frame)
    return bool(cls and "." in cls and not is_framework(cls))


def _short(frame: str) -> str:
    return re.sub(r"\s+[~\[].*$", "", frame.strip().removeprefix("at "))


def _task(failures: list[tuple[Event, re.Match[str]]]) -> str | None:
    for ev, _ in failures:
        name = task_name(ev)
        if name:
            return re.sub(r"\s*\(\d+/\d+\)(?:#\d+)?$", "", name)
    return None


def _most_complete(failures: list[tuple[Event, re.Match[str]]]) -> tuple[Event, re.Match[str]]:
    """The TaskManager's record (the task's own failure, the message near its top) over the JobManager's copy under
    the restart strategy's verdict; then the one with the most frames."""
    return sorted(failures, key=lambda f: (f[0].role != "taskmanager", -len(f[0].frames), f[0].line))[0]
