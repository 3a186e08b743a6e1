"""``StateMigrationException``: restored state was written by a serializer the new program's serializer cannot read.

Keyed state is checked twice on restore: the key serializer when the keyed backend is built (``The new key serializer
(<new>) must be compatible with the previous key serializer (<old>).``), each state's value serializer when the job
first asks for the state (``[For heap backends, ]The new state serializer (<new>) must not be incompatible with the
old state serializer (<old>).``). Flink 1.9 – 1.12 said the same without naming the serializers. What to do depends
on what changed, which the two serializers show:

- the key type (``keyBy`` returns another type);
- the state's type (``ValueState<Long>`` became ``ValueState<String>``, a POJO field changed its type);
- the same class switching between Flink's POJO serializer and Kryo (it gained or lost what makes it a POJO: a public
  no-argument constructor, public fields or getters/setters), which no schema evolution bridges.
"""
from __future__ import annotations

import re

from flink_runbooks.detectors.base import Detector
from flink_runbooks.evidence.episodes import is_excerpt
from flink_runbooks.evidence.restore import savepoint_starts, restored_snapshots
from flink_runbooks.evidence.trail import evidence_trail
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording

KEY_INCOMPATIBLE = re.compile(
    r"The new key serializer (?:\((?P<new>.*?)\) must be compatible with the previous key serializer \((?P<old>.*)\)"
    r"|must be compatible)")
STATE_INCOMPATIBLE = re.compile(
    r"(?P<heap>For heap backends, )?[Tt]he new state serializer (?:\((?P<new>.*?)\) must not be incompatible with the "
    r"old state serializer \((?P<old>.*)\)|must not be incompatible|cannot be incompatible)")
MIGRATION = re.compile(r"StateMigrationException")
# The heap backend reads every value with the snapshot's serializer while it restores: a class that was a POJO then
# and lost its no-argument constructor since fails inside PojoSerializer.createInstance.
POJO_GONE = re.compile(r"NoSuchMethodException: (?P<cls>[\w.$]+)\.<init>\(\)|Cannot instantiate class\.")
RESTORE_CONTEXT = re.compile(r"Could not restore keyed state backend|Exception while creating StreamOperatorStateContext|"
                             r"Failed when trying to restore heap backend")
_KRYO = re.compile(r"KryoSerializer|Kryo\w*Serializer|GenericTypeInfo")
_POJO = re.compile(r"PojoSerializer|PojoTypeInfo")
_CLASS = re.compile(r"(?:[a-z_][\w$]*\.)+(?P<name>[A-Z][\w$]*)")

_KEEP = "ops:restore the previous type and redeploy"
_SPA = "code:migrate the state with the State Processor API"
_DROP = "ops:start the changed operator without its state (new uid + allowNonRestoredState)"
_NEXT = ("the TaskManager log of the failed restore with the whole exception chain (`grep -n -A40 "
         "StateMigrationException taskmanager*.log`): the new and old serializers it names, and the diff of the job's "
         "key and state types between the snapshot's version and this one.")


class StateMigrationIncompatible(Detector):
    slug = "state-migration-incompatible"
    title = "Restored state is incompatible with the new serializer"
    category = "state-restore"
    meaning = ("A task restored keyed state written by a serializer that the new program's serializer cannot read "
               "(StateMigrationException): the key type, a state's type or the way a class is serialized changed "
               "since the snapshot was taken.")
    exception_classes = ("org.apache.flink.util.StateMigrationException",
                         "org.apache.flink.runtime.state.BackendBuildingException")
    versions = "1.9 – 2.x (serializers named in the message since 1.13)"
    config_keys = (
        "pipeline.generic-types",
        "state.backend.type",
        "execution.state-recovery.path",
    )
    signatures = (
        r"StateMigrationException",
        r"NoSuchMethodException: [\w.$]+\.<init>\(\)",
        r"Cannot instantiate class\.",
        r"[Tt]he new (?:key|state|namespace) serializer .*(?:must be compatible|must not be incompatible|cannot be incompatible)",
    )
    wordings = (
        Wording("state-migration-incompatible", r"The new key serializer must be compatible\.",
                "1.9 – 1.12", "HeapRestoreOperation / AbstractRocksDBRestoreOperation (1.9.3)",
                "org.apache.flink.util.StateMigrationException: The new key serializer must be compatible."),
        Wording("state-migration-incompatible",
                r"The new key serializer \(.*\) must be compatible with the previous key serializer \(.*\)\.",
                "1.13 – 2.x", "HeapRestoreOperation, FullSnapshotRestoreOperation, RocksDBIncrementalRestoreOperation "
                "(1.13.6, 1.17.2, 1.20.3, 2.3.0)",
                "org.apache.flink.util.StateMigrationException: The new key serializer (org.apache.flink.api.common."
                "typeutils.base.IntSerializer@1b5ca8d1) must be compatible with the previous key serializer (org."
                "apache.flink.api.common.typeutils.base.StringSerializer@4d9c7cb5)."),
        Wording("state-migration-incompatible",
                r"(?:For heap backends, the|The) new state serializer (?:must not|cannot) be incompatible\.",
                "1.9 – 1.12", "HeapKeyedStateBackend / RocksDBKeyedStateBackend (1.9.3)",
                "org.apache.flink.util.StateMigrationException: For heap backends, the new state serializer must not "
                "be incompatible."),
        Wording("state-migration-incompatible",
                r"(?:For heap backends, the|The) new state serializer \(.*\) must not be incompatible with the old "
                r"state serializer \(.*\)\.",
                "1.13 – 2.x", "HeapKeyedStateBackend / RocksDBKeyedStateBackend#updateRestoredStateMetaInfo "
                "(1.13.6, 1.17.2, 1.20.3, 2.3.0)",
                "org.apache.flink.util.StateMigrationException: The new state serializer (org.apache.flink.api."
                "common.typeutils.base.StringSerializer@5c3e0a41) must not be incompatible with the old state "
                "serializer (org.apache.flink.api.common.typeutils.base.LongSerializer@1a2b3c4d)."),
    )
    root_causes = (
        RootCause("key-type-changed",
                  "The key type changed (keyBy returns another type, or the key class is serialized differently): "
                  "every key in the snapshot is unreadable, the whole keyed state of the operator is affected.",
                  "'The new key serializer … must be compatible with the previous key serializer …'.",
                  patches=(_KEEP, _SPA, _DROP)),
        RootCause("state-type-changed",
                  "A state's type changed (ValueState<Long> became ValueState<String>, a field changed its type, a "
                  "Kryo/Avro/Scala type changed incompatibly): Flink only evolves POJO and Avro schemas, and only "
                  "compatible changes (fields added or removed, not retyped).",
                  "'The new state serializer (<new>) must not be incompatible with the old state serializer (<old>)' "
                  "with serializers of different types (not a POJO/Kryo pair).",
                  patches=(_KEEP, _SPA, _DROP, "code:evolvable state types")),
        RootCause("kryo-pojo-switch",
                  "The same state or key class is now serialized by Kryo where the snapshot used Flink's POJO "
                  "serializer, or the other way round: the class gained or lost what makes it a POJO (public "
                  "no-argument constructor, public fields or getters/setters), and no schema evolution bridges the "
                  "two formats.",
                  "One of the two serializers in the message is Kryo's and the other Flink's PojoSerializer; or the "
                  "snapshot's POJO serializer cannot instantiate the class on restore (NoSuchMethodException "
                  "<init>(), 'Cannot instantiate class.').",
                  patches=(_KEEP, "code:make the class a POJO again", _SPA, "flink:pipeline.generic-types", _DROP)),
        RootCause("undetermined",
                  "Restored state is incompatible with the new program, but the message does not say which "
                  "serializers are involved.",
                  "A StateMigrationException without the key/state serializer message (an excerpt cut short, or "
                  "another wording).",
                  patches=(_KEEP,),
                  would_change="The serializer message: 'new key serializer' names a key type change, 'new state "
                               "serializer (X) … (Y)' a state type change, a Kryo/POJO pair a serializer switch.",
                  next_evidence=_NEXT),
    )

    templates = {
        "head": "Restoring{state_of} from {snapshot} failed{times}: the state in the snapshot cannot be read by the "
                "new program's serializer. ",
        "state of": " the state of {operator}",
        "times": " {attempts} time(s)",
        "pair": " ({old} in the snapshot, {new} now)",
        "key-type-changed": "The key serializer changed{pair}: the operator's keyBy returns another type than when "
                            "the snapshot was taken, so none of its keyed state can be restored. Restarting cannot "
                            "help: every attempt reads the same snapshot.",
        "pojo gone": "The snapshot wrote {cls} with Flink's POJO serializer, which needs a public no-argument "
                     "constructor to read it back; the class no longer has one, so it stopped being a POJO (Flink now "
                     "serializes it with Kryo) and the old values cannot be read. Give the class its POJO shape back "
                     "to restore them.",
        "kryo-pojo-switch": "The serializer switched between Flink's POJO serializer and Kryo{pair}: the class gained "
                            "or lost what makes it a POJO (a public no-argument constructor, public fields or "
                            "getters/setters), and the two formats cannot be migrated into each other.",
        "state-type-changed": "A state's type changed{pair}{unnamed}: Flink evolves only POJO and Avro schemas, and "
                              "only for compatible changes (fields added or removed), so this state cannot be "
                              "migrated on restore.",
        "unnamed": " (this Flink version does not name the serializers)",
        "undetermined": "The message does not say which serializers: root cause undetermined.",
        "restored note": "the job restores this snapshot",
        "submitted note": "the submission names this snapshot",
        "key note": "the key serializer cannot read the snapshot's keys",
        "state note": "a state's serializer cannot read the snapshot's values",
        "pojo-gone note": "the snapshot's POJO serializer cannot instantiate the class: it lost its no-argument "
                          "constructor",
        "unknown note": "restored state is incompatible",
        "previous type": "The snapshot is fine: deploy the program with the key and state types it was taken with, "
                         "and change types only through a migration.",
        "pojo again": "The snapshot holds the class as written by the serializer it had then; give the class that "
                      "shape back to restore it, then evolve it the POJO way (add/remove fields).",
        "generic types": "Makes Flink refuse, when the job is built, any type that would fall back to Kryo, so a "
                         "class that stops being a POJO is caught before it reaches a restore. It does not restore "
                         "this snapshot.",
        "migrate": "Rewrites the snapshot with the new types (read with the old ones, convert, write with the new "
                   "ones) and keeps the state; then start the new program from the rewritten savepoint.",
        "evolvable": "POJO and Avro types evolve on restore (fields added or removed); retyping a field or a state "
                     "needs a new state name (its old value is dropped) or a State Processor API migration.",
        "new uid": "A conscious data-loss choice: give the changed operator a new uid and restore with "
                   "--allowNonRestoredState; the operator's old state is dropped for good and it starts empty, the "
                   "other operators keep theirs.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        failures = [ev for ev, _ in incident.find(MIGRATION)]
        failures += [ev for ev, _ in incident.find(KEY_INCOMPATIBLE) if ev not in failures]
        failures += [ev for ev, _ in incident.find(STATE_INCOMPATIBLE) if ev not in failures]
        failures += [ev for ev, _ in incident.find(POJO_GONE) if ev not in failures and RESTORE_CONTEXT.search(ev.text)]
        if not failures:
            return []
        readings = [_reading(ev) for ev in failures]
        informative = [r for r in readings if r.kind != "unknown"]
        # the TaskManager's own report of the first attempt carries the whole chain
        best = max(informative or readings, key=lambda r: (r.new is not None, r.kind == "key",
                                                           r.event.role == "taskmanager", len(r.event.chain)))
        if best.kind == "unknown":
            cause = "undetermined"
        elif best.kind == "pojo-gone" or (best.new and best.old and _is_switch(best.new, best.old)):
            cause = "kryo-pojo-switch"
        elif best.kind == "key":
            cause = "key-type-changed"
        else:
            cause = "state-type-changed"
        confidence = {"key-type-changed": 0.9, "kryo-pojo-switch": 0.9, "state-type-changed": 0.85,
                      "undetermined": 0.45}[cause]
        if best.kind in ("key", "state") and best.new is None:
            confidence -= 0.15  # the wording of 1.9 – 1.12: the serializers are not named
        if is_excerpt(incident) and cause != "undetermined":
            confidence -= 0.1
        restored = restored_snapshots(incident)
        starts = savepoint_starts(incident)
        snapshot = (restored[-1][1]["path"] if restored and restored[-1][1]["path"] else
                    starts[-1].path if starts else None)
        # one task failure per attempt (the restore's own WARN line repeats the same attempt)
        switched = [ev for ev in failures if re.search(r"switched from \w+ to FAILED", ev.message)]
        attempts = (len([ev for ev in switched if ev.role == "taskmanager"])
                    or len([ev for ev in switched if ev.role != "taskmanager"]) or 1)
        operator = _operator(best.event)
        details = {
            "incompatible": {"key": "the key serializer", "state": "a state's value serializer",
                             "pojo-gone": f"the snapshot's POJO serializer cannot create {best.cls or 'the class'} any more",
                             "unknown": "not named"}[best.kind],
            "new_serializer": best.new or "not named in the message",
            "old_serializer": best.old or "not named in the message",
            "operator": operator or "unknown",
            "snapshot": snapshot or "unknown",
            "failed_restores": attempts,
        }
        backend = best.backend or incident.config.get("state.backend.type")
        if backend:
            details["state_backend"] = backend
        evidence, notes, add = evidence_trail()
        if restored:
            add(restored[-1][0], self.say("restored note"))
        elif starts:
            add(starts[-1].event, self.say("submitted note"))
        add(best.event, self.say(f"{best.kind} note"))
        summary = self.say("head", state_of=self.say("state of", operator=operator) if operator else "",
                           snapshot=snapshot or "the snapshot",
                           times=self.say("times", attempts=attempts) if attempts > 1 else "")
        pair = self.say("pair", old=_short(best.old), new=_short(best.new)) if best.new and best.old else ""
        if cause == "key-type-changed":
            summary += self.say(cause, pair=pair)
        elif cause == "kryo-pojo-switch" and best.kind == "pojo-gone":
            summary += self.say("pojo gone", cls=best.cls or "the state class")
        elif cause == "kryo-pojo-switch":
            summary += self.say(cause, pair=pair)
        elif cause == "state-type-changed":
            summary += self.say(cause, pair=pair, unnamed="" if best.new else self.say("unnamed"))
        else:
            summary += self.say(cause)
        patches = self._patches(incident, cause, best, operator, snapshot)
        return [self.finding(cause, summary, evidence, notes=notes, confidence=confidence, patches=patches,
                             details=details)]

    def _patches(self, incident, cause, best, operator, snapshot):
        target = snapshot or "<savepoint path>"
        patches = [self.ops_patch(
            "restore the previous type and redeploy",
            self.say("previous type"),
            snippet=f"flink run -s {target} <previous job jar>")]
        if cause == "kryo-pojo-switch":
            patches.append(self.code_patch(
                "make the class a POJO again",
                "public class Totals {            // public, standalone or static nested\n"
                "    public long count;           // public fields, or private ones with getters and setters\n"
                "    public long sum;\n"
                "    public Totals() {}           // a public no-argument constructor\n"
                "}\n"
                "// declare the type so a change is a compile-time matter, not a silent Kryo fallback:\n"
                "new ValueStateDescriptor<>(\"count\", Types.POJO(Totals.class));",
                self.say("pojo again")))
            patches.append(self.flink_patch(
                incident, "pipeline.generic-types", "false",
                self.say("generic types")))
        if cause in ("key-type-changed", "state-type-changed", "kryo-pojo-switch"):
            patches.append(self.code_patch(
                "migrate the state with the State Processor API",
                "SavepointReader old = SavepointReader.read(env, \"" + target + "\", new HashMapStateBackend());\n"
                "DataStream<KeyedValue> rows = old.readKeyedState(OperatorIdentifier.forUid(\"<uid>\"), new ReadOld());\n"
                "SavepointWriter.fromExistingSavepoint(env, \"" + target + "\", new HashMapStateBackend())\n"
                "    .removeOperator(OperatorIdentifier.forUid(\"<uid>\"))\n"
                "    .withOperator(OperatorIdentifier.forUid(\"<uid>\"), OperatorTransformation.bootstrapWith(rows)\n"
                "        .keyBy(r -> r.newKey).transform(new WriteNew()))\n"
                "    .write(\"<new savepoint path>\");",
                self.say("migrate")))
        if cause == "state-type-changed":
            patches.append(self.code_patch(
                "evolvable state types",
                "new ValueStateDescriptor<>(\"count-v2\", Types.STRING);  // a new state name: starts empty\n"
                "// or for a record type: a POJO or an Avro-generated class, changed only by adding/removing fields",
                self.say("evolvable")))
        if cause in ("key-type-changed", "state-type-changed", "kryo-pojo-switch"):
            patches.append(self.ops_patch(
                "start the changed operator without its state (new uid + allowNonRestoredState)",
                self.say("new uid"),
                snippet=f'.uid("{(operator or "counter").split(" ")[0].lower()}-v2")\nflink run -s {target} '
                        "--allowNonRestoredState <new job jar>"))
        return patches


class _Reading:
    def __init__(self, event: Event, kind: str, new: str | None, old: str | None, backend: str | None):
        self.event, self.kind, self.new, self.old, self.backend = event, kind, new, old, backend
        self.cls: str | None = None  # the state class, when the message names it


def _reading(ev: Event) -> _Reading:
    text = ev.text
    backend = ("heap" if "For heap backends" in text or "HeapRestoreOperation" in text or "HeapKeyedStateBackend" in text
               else "RocksDB" if "RocksDB" in text else None)
    m = KEY_INCOMPATIBLE.search(text)
    if m:
        return _Reading(ev, "key", m["new"], m["old"], backend)
    m = STATE_INCOMPATIBLE.search(text)
    if m:
        return _Reading(ev, "state", m["new"], m["old"], backend)
    m = POJO_GONE.search(text)
    if m and RESTORE_CONTEXT.search(text):
        cls = m["cls"] or next((c.message for c in ev.chain if c.simple_name == "InstantiationException"), None)
        reading = _Reading(ev, "pojo-gone", f"Kryo ({cls or 'the class'} is no longer a POJO)",
                           f"PojoSerializer of {cls or 'the class'}", backend)
        reading.cls = cls
        return reading
    return _Reading(ev, "unknown", None, None, backend)


def _is_switch(new: str, old: str) -> bool:
    return bool((_KRYO.search(new) and _POJO.search(old)) or (_POJO.search(new) and _KRYO.search(old)))


def _short(serializer: str | None) -> str:
    """``org.apache.flink.api.common.typeutils.base.LongSerializer@1a2b`` -> ``LongSerializer``."""
    if not serializer:
        return "?"
    m = _CLASS.search(serializer)
    return m["name"] if m else serializer.split("@")[0][:80]


def _operator(ev: Event) -> str | None:
    m = re.search(r"Could not restore keyed state backend for (?P<op>\S+?)(?:_\(\d+/\d+\))? from any", ev.text)
    if m:
        return m["op"]
    m = re.search(r"^(?P<task>\S.*?) \(\d+/\d+\)#\d+ ", ev.message) or re.search(r"^(?P<task>\S.*?) \(\d+/\d+\)", ev.message)
    return m["task"] if m else None
