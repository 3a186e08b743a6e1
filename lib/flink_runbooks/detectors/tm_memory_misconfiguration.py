"""TaskManager memory options that do not fit: Flink's ``IllegalConfigurationException`` at start-up, recomputed with
the FLIP-49 model, and RocksDB's native memory taken out of the TaskManager's budget."""
from __future__ import annotations

import re

from flink_runbooks.vocabulary import keys
from flink_runbooks.evidence.memory import CONSTRAINTS, MemoryConfigError, derive_taskmanager_memory, suggest_fix
from flink_runbooks.evidence.memory.incident import (KILL_SIGNATURES, MEMORY_CONFIG_ERROR, STATE_BACKEND_SIGNATURES,
                               TM_START_SCRIPT_FAILED, apply_changes, breakdown_rows, config_evidence,
                               container_memory_kills, deployment_of, derived_taskmanager_memory,
                               effective_taskmanager_memory, error_evidence, logged_taskmanager_memory,
                               memory_config_error_events, model_applies, rocksdb_fix, rocksdb_memory, size_text,
                               user_memory_config)
from flink_runbooks.model import Event, Evidence, Finding, Incident, RootCause, earliest_ts
from flink_runbooks.vocabulary.units import parse_memory_size
from flink_runbooks.detectors.base import Detector
from flink_runbooks.vocabulary.wordings import Wording

_CAUSE_OF_CONSTRAINT = {
    "fractions-exceed-total": "fractions-exceed-total",
    "fixed-exceeds-flink-memory": "fixed-sizes-exceed-total",
    "process-less-than-flink-plus-metaspace": "fixed-sizes-exceed-total",
    "metaspace-overhead-exceed-process": "fixed-sizes-exceed-total",
    "flink-size-mismatch": "fixed-sizes-exceed-total",
    "process-size-mismatch": "fixed-sizes-exceed-total",
    "network-out-of-range": "network-range-invalid",
    "network-min-gt-max": "network-range-invalid",
    "network-buffers-mismatch": "network-range-invalid",
    "overhead-min-gt-max": "jvm-overhead-range-invalid",
    "overhead-out-of-range": "jvm-overhead-range-invalid",
    "no-size-configured": "no-total-memory",
    "negative-legacy-heap": "no-total-memory",
    "invalid-value": "invalid-memory-value",
    "invalid-segment-size": "invalid-memory-value",
    "fraction-out-of-range": "invalid-memory-value",
    "overflow": "invalid-memory-value",
}
# When only the log says what failed (no configuration in the incident): the message names the constraint.
_CAUSE_OF_MESSAGE = (
    (re.compile(r"Sum of configured .*Task Heap Memory|Total Process Memory size .* is less than the sum"),
     "fixed-sizes-exceed-total"),
    (re.compile(r"Sum of configured .*exceed configured Total Flink Memory"), "fractions-exceed-total"),
    (re.compile(r"Network Memory|'taskmanager\.(?:memory\.network|network\.memory)\.fraction'"), "network-range-invalid"),
    (re.compile(r"JVM Overhead|'taskmanager\.memory\.jvm-overhead\.fraction'"), "jvm-overhead-range-invalid"),
    (re.compile(r"Either required fine-grained memory"), "no-total-memory"),
    (re.compile(r"do not add up"), "fixed-sizes-exceed-total"),
)
_SIZE_IN_MESSAGE = re.compile(
    r"(Framework Heap|Framework Off-Heap|Task Heap|Task Off-Heap|Managed|Network|Total Flink|Total Process|"
    r"JVM Metaspace|JVM Overhead)(?: Memory)?(?: size)?\s+\((?:[\d.]+[kmgt]?b \()?(\d+) bytes\)?\)")
_JOBMANAGER_ERROR = re.compile(r"JobManager memory configuration failed|\(jobmanager\.memory\.|JVM Heap Memory \(")
_REMOVED_IN_2 = ("taskmanager.heap.size", "taskmanager.heap.mb")
OVERHEAD_DEFAULT_FRACTION = 0.1


class TmMemoryMisconfiguration(Detector):
    slug = "tm-memory-misconfiguration"
    title = "TaskManager memory configuration does not fit"
    category = "memory"
    meaning = ("The TaskManager memory options contradict each other, so Flink refuses to start the TaskManager, or "
               "they let RocksDB's native memory grow outside the TaskManager's memory budget.")
    exception_classes = ("org.apache.flink.configuration.IllegalConfigurationException",)
    versions = "1.10 – 2.x (FLIP-49 memory model; the legacy taskmanager.heap.size is gone in 2.0)"
    layer = 0
    config_keys = (
        "taskmanager.memory.process.size",
        "taskmanager.memory.flink.size",
        "taskmanager.memory.managed.fraction",
        "taskmanager.memory.network.fraction",
        "taskmanager.memory.network.min",
        "taskmanager.memory.network.max",
        "taskmanager.memory.jvm-overhead.fraction",
        "taskmanager.memory.task.heap.size",
        "taskmanager.memory.managed.size",
        "state.backend.rocksdb.memory.managed",
        "state.backend.rocksdb.memory.fixed-per-slot",
        "taskmanager.numberOfTaskSlots",
    )
    signatures = (
        r"(?:TaskManager|JobManager) memory configuration failed",
        r"Sum of configured .*exceed configured Total (?:Flink|Process) Memory",
        r"Derived JVM Overhead size .* is not in configured JVM Overhead range",
        r"Derived Network Memory size .* is not in configured Network Memory range",
        r"the derived Network Memory is inconsistent with its configuration",
        r"Inconsistently configured Key: 'taskmanager\.(?:memory|network)\.",
        r"Configured and Derived (?:Flink internal )?memory sizes \(total .*\) do not add up",
        r"The configured Total Process Memory size .* is less than the sum of the derived Total Flink Memory",
        r"Either required fine-grained memory \(taskmanager\.memory\.task\.heap\.size",
        r"Could not get JVM parameters (?:and dynamic configurations )?properly",
        *STATE_BACKEND_SIGNATURES,
        *KILL_SIGNATURES,
    )
    root_causes = (
        RootCause("fractions-exceed-total",
                  "Managed and network fractions (with the fixed framework sizes) take more than Total Flink Memory: "
                  "nothing is left for the task heap.",
                  "'Sum of configured ... Managed Memory ... and Network Memory ... exceed configured Total Flink "
                  "Memory' with managed/network fractions set; the model of the configuration fails the same way.",
                  patches=("flink:taskmanager.memory.jvm-overhead.fraction",
                           "flink:taskmanager.memory.managed.fraction", "flink:taskmanager.memory.network.fraction",
                           "ops:TaskManager memory configuration", "flink:taskmanager.memory.*", "flink:taskmanager.heap.size")),
        RootCause("fixed-sizes-exceed-total",
                  "Explicit sizes (task heap, managed size, framework or off-heap sizes) add up to more than the "
                  "configured total process or Flink memory.",
                  "'Sum of configured ... Task Heap Memory ...' or 'Total Process Memory size ... is less than the "
                  "sum of the derived Total Flink Memory' with explicit sizes next to process.size/flink.size.",
                  patches=("flink:taskmanager.memory.task.heap.size", "flink:taskmanager.memory.*", "flink:taskmanager.heap.size")),
        RootCause("network-range-invalid",
                  "Network memory min/max contradict each other or the network memory left over.",
                  "'Inconsistently configured ... network.fraction ... min ... max' (min > max; max defaults to 1g "
                  "before 1.17) or 'Derived Network Memory size ... is not in configured Network Memory range'.",
                  patches=("flink:taskmanager.memory.network.max", "flink:taskmanager.memory.*", "flink:taskmanager.heap.size")),
        RootCause("jvm-overhead-range-invalid",
                  "The JVM overhead left over, or its min/max, contradict each other.",
                  "'Derived JVM Overhead size ... is not in configured JVM Overhead range' or an inconsistently "
                  "configured jvm-overhead.fraction/min/max.",
                  patches=("flink:taskmanager.memory.flink.size", "flink:taskmanager.memory.jvm-overhead.max", "flink:taskmanager.memory.*", "flink:taskmanager.heap.size")),
        RootCause("no-total-memory",
                  "No total memory size is configured (the legacy taskmanager.heap.size was removed in 2.0).",
                  "'Either required fine-grained memory ... or Total Flink Memory size ... or Total Process Memory "
                  "size ... need to be configured explicitly'.",
                  patches=("flink:taskmanager.memory.process.size", "flink:taskmanager.memory.*", "flink:taskmanager.heap.size")),
        RootCause("invalid-memory-value",
                  "A memory option has a value Flink cannot use (fraction outside [0, 1), unparseable size, "
                  "segment size not a power of two).",
                  "The model rejects one value: the key is named in the error.",
                  patches=("flink:taskmanager.memory.managed.fraction", "flink:taskmanager.memory.*", "flink:taskmanager.heap.size")),
        RootCause("jobmanager-memory-invalid",
                  "The JobManager memory options contradict each other.",
                  "'JobManager memory configuration failed: ...' in the JobManager start-up output.",
                  patches=("flink:jobmanager.memory.flink.size", "flink:jobmanager.memory.*", "ops:JobManager memory configuration")),
        RootCause("rocksdb-unmanaged-memory",
                  "RocksDB's memory is not taken from managed memory (memory.managed: false, or a fixed-per-slot "
                  "size larger than the budget), so the process grows past its size until it is killed.",
                  "RocksDB state backend with state.backend.rocksdb.memory.managed: false and no fixed size, or "
                  "fixed-per-slot x slots above managed + task off-heap memory; container kills make it a failure.",
                  patches=("flink:state.backend.rocksdb.memory.fixed-per-slot",
                           "flink:state.backend.rocksdb.memory.managed", "flink:taskmanager.memory.managed.fraction",
                           "flink:taskmanager.memory.process.size", "flink:taskmanager.memory.*")),
    )

    wordings = (
        Wording("tm-memory-misconfiguration", r"Either required fine-grained memory \([\w.]+\), or Total Flink Memory size \(.+\), or Total Process Memory size \(.+\) need to be configured explicitly",
                "1.10 – 2.x", "ProcessMemoryUtils#failBecauseRequiredOptionsNotConfigured (TaskManager since 1.10, JobManager since 1.11)",
                "org.apache.flink.configuration.IllegalConfigurationException: Either required fine-grained memory (jobmanager.memory.heap.size), or Total Flink Memory size (Key: 'jobmanager.memory.flink.size' , default: null (fallback keys: [])), or Total Process Memory size (Key: 'jobmanager.memory.process.size' , default: null (fallback keys: [])) need to be configured explicitly."),
        Wording("tm-memory-misconfiguration", r"The configured Total Process Memory size \(.+\) is less than the sum of the derived Total Flink Memory size",
                "1.10 – 2.x", "ProcessMemoryUtils#deriveJvmMetaspaceAndOverheadWithTotalProcessMemory",
                "The configured Total Process Memory size (2.000gb (2147483648 bytes)) is less than the sum of the derived Total Flink Memory size (2.500gb (2684354564 bytes)) and the configured or default JVM Metaspace size  (256.000mb (268435456 bytes))."),
        Wording("tm-memory-misconfiguration", r"Sum of configured (?:Framework Heap Memory|JVM Metaspace) .+ exceed",
                "1.10 – 2.x", "TaskExecutorFlinkMemoryUtils / ProcessMemoryUtils",
                "org.apache.flink.configuration.IllegalConfigurationException: Sum of configured Framework Heap Memory (128.000mb (134217728 bytes)), Framework Off-Heap Memory (128.000mb (134217728 bytes)), Task Off-Heap Memory (0 bytes), Managed Memory (2.000gb (2147483648 bytes)) and Network Memory (1.000gb (1073741824 bytes)) exceed configured Total Flink Memory (2.000gb (2147483648 bytes))."),
        Wording("tm-memory-misconfiguration", r"Inconsistently configured .+ and its min \(.+\), max \(.+\) value",
                "1.10 – 2.x", "ProcessMemoryUtils#getRangeFraction (network or JVM overhead fraction against its min and max; TaskExecutorResourceUtils in 1.10)",
                "org.apache.flink.configuration.IllegalConfigurationException: Inconsistently configured Key: 'taskmanager.memory.network.fraction' , default: 0.1 (fallback keys: [{key=taskmanager.network.memory.fraction, isDeprecated=true}]) (0.10000000149011612) and its min (2.000gb (2147483648 bytes)), max (1024.000mb (1073741824 bytes)) value"),
    )

    templates = {
        # the configuration Flink refuses (every TaskManager cause but RocksDB's)
        "head": "Flink refuses to start the TaskManager: its memory options do not fit together. {explanation}",
        "start script": " The start script could not compute the JVM parameters, so no TaskManager process ran.",
        "also": " Also in this configuration: {notes}",
        "with the patch": " With the patch below the model starts it ({patched}).",
        "patched": "process {process}: task heap {task_heap}, managed {managed}, network {network}, JVM overhead "
                   "{overhead}",
        "no configuration": "The configuration behind this error is not in the incident: add the "
                            "flink-conf.yaml/config.yaml the TaskManagers load (or their 'Loading configuration "
                            "property' lines) to get a computed patch. Until then: set one total "
                            "(taskmanager.memory.process.size), keep managed.fraction + network.fraction well below 1 "
                            "and drop explicit task/framework heap sizes.",
        "rejected note": "Flink's memory model rejected the configuration",
        "start script note": "the TaskManager start script failed: no TaskManager JVM was started",
        "configured note": "configured value taking part in the failed check",
        # the explanation, per constraint
        "over total": "Total Flink Memory is {total}, but {listing} = {used}, {excess} more than there is (the task "
                      "heap would be negative).",
        "fractions": " {fractions} = {share:g} of Total Flink Memory.",
        "overhead fraction": " The JVM overhead fraction {fraction:g} is of the process size: it takes {taken} of "
                             "{process} before Flink memory is even computed.",
        "explicit sizes": "The explicit sizes ({listed}) with the other pools make {flink} of Flink memory; plus JVM "
                          "metaspace {metaspace} that is more than the configured process size {process}.",
        "keep sizes": " To keep those sizes instead, taskmanager.memory.process.size must be at least {mib}m.",
        "network max default": "network.min is {low} but network.max is not set, and before Flink 1.17 its default is "
                               "1g: min > max.",
        "network min over max": "network.min {low} is larger than network.max {high}.",
        "network left over": "The network memory left over once the explicit sizes are placed is outside "
                             "[network.min, network.max]: {message}",
        "overhead min over max": "jvm-overhead.min {low} is larger than jvm-overhead.max {high}.",
        "overhead left over": "Both process.size and flink.size (or the explicit sizes) are set, and what is left "
                              "between them for the JVM overhead is outside [jvm-overhead.min, jvm-overhead.max]: "
                              "{message}",
        "legacy removed": "Only the legacy {legacy} sizes the TaskManager, and Flink 2.0 removed it: set "
                          "taskmanager.memory.process.size instead.",
        "no total": "None of taskmanager.memory.process.size, taskmanager.memory.flink.size or task.heap.size + "
                    "managed.size is set.",
        "rejected value": "Flink rejected a memory option's value.",
        # the computed changes' reasons
        "drop overhead fraction": "Remove {key} ({old}): it is a fraction of the whole process, so {old} hands the "
                                  "JVM overhead far more than it needs (taken from the task heap, or added on top of "
                                  "a fixed Flink size); the default is 0.1 (min 192m, max 1g).",
        "drop fraction": "Remove {key} ({old}): Flink's default fraction leaves room for the task heap; the fractions "
                         "of managed and network memory share one Total Flink Memory.",
        "drop explicit size": "Remove the explicit {key} ({old}): it does not fit next to the configured total; Flink "
                              "derives it.",
        "drop": "Remove {key} ({old}): back to Flink's default, which fits the configured total.",
        "lower fraction": "Lower {name} from {old} to {value} so the other pools fit into Total Flink Memory.",
        "smallest total": "The smallest total in which these memory options fit ({old} -> {value}).",
        "set range": "Set {key} to {value} ({old} before) so the ranges are consistent.",
        # legacy and unusual keys next to the FLIP-49 ones
        "legacy total": "{legacy} ({value}) is the pre-1.10 total, mixed with FLIP-49 keys: Flink reads it as "
                        "{target} only while that is unset, so the file does not say which total applies (and 2.0 "
                        "ignores it).",
        "legacy under its new name": "The total {legacy} stood for, under its FLIP-49 name.",
        "replaced": "Replaced by {target} (same value).",
        "deprecated spelling": "{old} is the deprecated spelling of {new}.",
        "new spelling": "The FLIP-49 name of {old} (same value), next to the other taskmanager.memory.* keys.",
        "large segment": "taskmanager.memory.segment-size is {segment}, {factor}x the 32 KiB default: every network "
                         "buffer is that large, so each channel's {per_channel} exclusive buffers take {taken} and "
                         "network memory runs out {factor}x sooner.",
        "default segment": "Back to the 32 KiB default: larger segments only multiply the memory each channel needs; "
                           "Flink recommends changing it only for very large records, with measurements.",
        # the JobManager
        "jobmanager-memory-invalid": "Flink refuses to start the JobManager: {message}",
        "one jobmanager total": "Keep one consistent JobManager memory total; Flink derives the rest.",
        "default jobmanager size": "The distribution's default JobManager size.",
        "jobmanager configuration": "Set jobmanager.memory.process.size alone and remove conflicting "
                                    "jobmanager.memory.* sizes.",
        "jobmanager rejected note": "the JobManager memory model rejected the configuration",
        # RocksDB outside the budget
        "rocksdb-unmanaged-memory": "RocksDB's memory is outside the TaskManager's memory budget: {problem}. The "
                                    "process grows past its configured size{outcome}",
        "killed": "; containers were killed for memory ({count} report(s)).",
        "until killed": " until the container or the OS kills it (or heartbeats time out while it swaps).",
        "managed rocksdb": "Bound RocksDB's block cache and write buffers by the slot's managed memory, which the "
                           "TaskManager budget already reserves for it (Flink's default).",
        "drop fixed size": "A fixed size overrides the managed-memory bound and is not part of the TaskManager "
                           "budget.",
        "rocksdb in budget": "Give RocksDB the {demand} it was meant to have, now inside the budget (managed memory "
                             "grows, and with it the total).",
        "rocksdb setting note": "RocksDB memory setting",
        "state backend note": "state backend",
        "kill note": "container killed for memory",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        errors = memory_config_error_events(incident)
        tm_errors = [ev for ev in errors if not _JOBMANAGER_ERROR.search(ev.text)]
        jm_errors = [ev for ev in errors if ev not in tm_errors]
        start_failed = [ev for ev, _ in incident.find(TM_START_SCRIPT_FAILED)]
        _derived, model_error = derived_taskmanager_memory(incident)
        logged, _ = logged_taskmanager_memory(incident)
        findings = []
        # A configuration the model rejects only counts when no TaskManager started with it: a logged breakdown
        # without any error means the TaskManagers read another configuration than the one in the incident.
        if tm_errors or (model_error is not None and logged is None):
            findings.append(self._invalid(incident, tm_errors, start_failed, model_error))
        elif jm_errors:
            findings.append(self._jobmanager(incident, jm_errors))
        else:
            finding = self._rocksdb(incident)
            if finding is not None:
                findings.append(finding)
        return findings

    # -- the configuration Flink refuses ------------------------------------------------------------------------

    def _invalid(self, incident: Incident, events: list[Event], start_failed: list[Event],
                 model_error: MemoryConfigError | None) -> Finding:
        logged_text = events[0].text if events else ""
        if model_error is not None:
            cause = _CAUSE_OF_CONSTRAINT.get(model_error.constraint, "invalid-memory-value")
            constraint = model_error.constraint
        else:
            cause = next((c for rx, c in _CAUSE_OF_MESSAGE if rx.search(logged_text)), "invalid-memory-value")
            constraint = None
        message = model_error.flink_message if model_error is not None else _logged_message(logged_text)
        conf = user_memory_config(incident)
        version = incident.version_tuple
        explanation = self._explain(cause, message, conf, incident)
        details = {
            "constraint": f"{constraint}: {CONSTRAINTS[constraint]}" if constraint else "(from the log message)",
            "flink_message": message,
            "configured": dict(model_error.values) if model_error is not None else {},
            "explanation": explanation,
            "deployment": deployment_of(incident),
            "model_agrees_with_log": (model_error is not None and bool(events)
                                      and _same_message(model_error.flink_message, logged_text)),
        }
        if model_error is not None and model_error.notes:
            details["flink_notes"] = list(model_error.notes)
        patches = []
        after = None
        if model_error is not None and model_applies(incident):
            try:
                changes = suggest_fix(conf, version, model_error, deployment=deployment_of(incident))
            except MemoryConfigError:
                changes = {}
            changes.update(_oversized_overhead(conf, changes, version, deployment_of(incident)))
            patches = [self.flink_patch(incident, keys.canonical(k), v, self._change_reason(k, v, conf, cause))
                       for k, v in changes.items()]
            try:
                after = derive_taskmanager_memory(apply_changes(conf, changes), version,
                                                  deployment=deployment_of(incident))
            except MemoryConfigError:
                after = None
            if after is not None:
                details["breakdown_after_patch"] = breakdown_rows(after)
                details["patched_summary"] = self.say(
                    "patched", process=size_text(after.process), task_heap=size_text(after.task_heap),
                    managed=size_text(after.managed), network=size_text(after.network),
                    overhead=size_text(after.overhead))
        mixed_notes, mixed_patches = self._legacy_mix(incident, conf, {canonical_of(p.key) for p in patches})
        patches += mixed_patches
        if not patches:
            patches.append(self.ops_patch("TaskManager memory configuration", self.say("no configuration")))
        summary = self.say("head", explanation=explanation)
        if start_failed:
            summary += self.say("start script")
        if mixed_notes:
            summary += self.say("also", notes=" ".join(mixed_notes))
            details["legacy_and_unusual_keys"] = mixed_notes
        if after is not None:
            summary += self.say("with the patch", patched=details["patched_summary"])
        evidence = [error_evidence(ev, self.say("rejected note")) for ev in events[:2]]
        evidence += [Evidence.of(ev, self.say("start script note")) for ev in start_failed[:1]]
        for key in (model_error.values if model_error is not None else {}):
            ev = config_evidence(incident, key, self.say("configured note"))
            if ev is not None and len(evidence) < 8:
                evidence.append(ev)
        finding = self.finding(cause, summary, [], confidence=0.95 if events and model_error else 0.85,
                               patches=patches, details=details)
        finding.evidence = evidence
        finding.first_seen = earliest_ts(events + start_failed)
        return finding

    def _change_reason(self, key: str, value: str | None, conf: dict[str, str], cause: str) -> str:
        old = conf.get(key)
        name = key.rsplit(".", 1)[-1] if key.endswith("fraction") else key
        if value is None:
            if key.endswith("jvm-overhead.fraction"):
                return self.say("drop overhead fraction", key=key, old=old)
            if key.endswith(".fraction"):
                return self.say("drop fraction", key=key, old=old)
            if key.endswith(("task.heap.size", "managed.size")):
                return self.say("drop explicit size", key=key, old=old)
            return self.say("drop", key=key, old=old)
        if key.endswith("fraction"):
            return self.say("lower fraction", name=name, old=old, value=value)
        if key.endswith(("process.size", "flink.size")):
            return self.say("smallest total", old=old or "unset", value=value)
        return self.say("set range", key=key, value=value, old=old or "unset")

    def _legacy_mix(self, incident: Incident, conf: dict[str, str], changed: set[str]):
        """Pre-1.10 memory keys next to FLIP-49 ones, and an enlarged network segment: legal, but they hide which
        value Flink uses or multiply network memory. Returns (notes for the summary, patches)."""
        notes: list[str] = []
        patches = []
        flip49 = any(k.startswith("taskmanager.memory.") for k in conf)
        version = incident.version_tuple
        if flip49 and (version is None or version < (2, 0)):
            for legacy in ("taskmanager.heap.size", "taskmanager.heap.mb"):
                if legacy in conf:
                    target = ("taskmanager.memory.process.size" if deployment_of(incident) in ("yarn", "kubernetes")
                              else "taskmanager.memory.flink.size")
                    notes.append(self.say("legacy total", legacy=legacy, value=conf[legacy], target=target))
                    if target not in changed and legacy == "taskmanager.heap.size":
                        patches.append(self.flink_patch(incident, target, conf[legacy],
                                                        self.say("legacy under its new name", legacy=legacy)))
                        patches.append(self.flink_patch(incident, legacy, None, self.say("replaced", target=target)))
            for old in ("taskmanager.network.memory.min", "taskmanager.network.memory.max",
                        "taskmanager.network.memory.fraction"):
                new = keys.canonical(old)
                if old in conf and new not in changed and new not in conf:
                    notes.append(self.say("deprecated spelling", old=old, new=new))
                    patches.append(self.flink_patch(incident, new, conf[old], self.say("new spelling", old=old)))
        segment = conf.get("taskmanager.memory.segment-size")
        size = parse_memory_size(segment) if segment else None
        if size and size > DEFAULT_SEGMENT:
            per_channel = conf.get("taskmanager.network.memory.buffers-per-channel") or "2"
            notes.append(self.say("large segment", segment=segment, factor=size // DEFAULT_SEGMENT,
                                  per_channel=per_channel,
                                  taken=size_text(size * int(per_channel)) if per_channel.isdigit() else "more"))
            patches.append(self.flink_patch(incident, "taskmanager.memory.segment-size", None,
                                            self.say("default segment")))
        return notes, patches

    def _explain(self, cause: str, message: str, conf: dict[str, str], incident: Incident) -> str:
        sizes = {}
        for label, num in _SIZE_IN_MESSAGE.findall(message or ""):
            sizes.setdefault(label, int(num))
        cfg = incident.config
        if cause in ("fractions-exceed-total", "fixed-sizes-exceed-total") and "Total Flink" in sizes and \
                "Sum of configured" in (message or ""):
            parts = {k: v for k, v in sizes.items() if not k.startswith(("Total", "JVM"))}
            total, used = sizes["Total Flink"], sum(parts.values())
            listing = " + ".join(f"{k.lower()} {size_text(v)}" for k, v in parts.items() if v)
            text = self.say("over total", total=size_text(total), listing=listing, used=size_text(used),
                            excess=size_text(max(0, used - total)))
            fractions = [(k, cfg.get(f"taskmanager.memory.{k}.fraction")) for k in ("managed", "network")]
            fractions = [(k, float(v)) for k, v in fractions if v and _is_number(v)]
            if fractions:
                text += self.say("fractions", fractions=" + ".join(f"{k}.fraction {v:g}" for k, v in fractions),
                                 share=sum(v for _, v in fractions))
            overhead = cfg.get("taskmanager.memory.jvm-overhead.fraction")
            process = cfg.get_bytes("taskmanager.memory.process.size")
            if overhead and _is_number(overhead) and process:
                text += self.say("overhead fraction", fraction=float(overhead),
                                 taken=size_text(int(process * float(overhead))), process=size_text(process))
            return text
        if cause == "fixed-sizes-exceed-total" and "Total Process" in sizes and "Total Flink" in sizes:
            explicit = [(k, cfg.get(k)) for k in ("taskmanager.memory.task.heap.size", "taskmanager.memory.managed.size",
                                                  "taskmanager.memory.framework.heap.size",
                                                  "taskmanager.memory.framework.off-heap.size",
                                                  "taskmanager.memory.task.off-heap.size") if cfg.get(k)]
            listed = ", ".join(f"{k.removeprefix('taskmanager.memory.')} {v}" for k, v in explicit)
            text = self.say("explicit sizes", listed=listed, flink=size_text(sizes["Total Flink"]),
                            metaspace=size_text(sizes.get("JVM Metaspace", 0)),
                            process=size_text(sizes["Total Process"]))
            keep = _process_for_explicit_sizes(conf, incident)
            if keep:
                text += self.say("keep sizes", mib=-(-keep // (1 << 20)))
            return text
        if cause == "network-range-invalid":
            low, high = cfg.get_bytes("taskmanager.memory.network.min"), cfg.get_bytes("taskmanager.memory.network.max")
            version = incident.version_tuple
            if low is not None and high is None and version and tuple(version[:2]) < (1, 17) and low > 1 << 30:
                return self.say("network max default", low=size_text(low))
            if low is not None and high is not None and low > high:
                return self.say("network min over max", low=size_text(low), high=size_text(high))
            return self.say("network left over", message=message or "")
        if cause == "jvm-overhead-range-invalid":
            low = cfg.get_bytes("taskmanager.memory.jvm-overhead.min")
            high = cfg.get_bytes("taskmanager.memory.jvm-overhead.max")
            if low is not None and high is not None and low > high:
                return self.say("overhead min over max", low=size_text(low), high=size_text(high))
            return self.say("overhead left over", message=message or "")
        if cause == "no-total-memory":
            legacy = [k for k in _REMOVED_IN_2 if k in conf]
            version = incident.version_tuple
            if legacy and version and version[0] >= 2:
                return self.say("legacy removed", legacy=legacy[0])
            return self.say("no total")
        return message or self.say("rejected value")

    # -- the JobManager ----------------------------------------------------------------------------------------

    def _jobmanager(self, incident: Incident, events: list[Event]) -> Finding:
        from flink_runbooks.evidence.memory import derive_jobmanager_memory

        conf = user_memory_config(incident)
        version = incident.version_tuple
        deployment = deployment_of(incident)
        message = _logged_message(events[0].text)
        candidates = [{}, {"jobmanager.memory.flink.size": None}, {"jobmanager.memory.heap.size": None},
                      {"jobmanager.memory.off-heap.size": None},
                      {"jobmanager.memory.flink.size": None, "jobmanager.memory.heap.size": None,
                       "jobmanager.memory.off-heap.size": None}]
        changes = None
        for candidate in candidates:
            trial = {k: v for k, v in candidate.items() if k in conf}
            if candidate and not trial:
                continue
            patched = apply_changes(conf, trial)
            if not any(k.startswith("jobmanager.memory.") and k.endswith(("process.size", "flink.size", "heap.size"))
                       for k in patched):
                trial["jobmanager.memory.process.size"] = "1600m"
                patched = apply_changes(conf, trial)
            try:
                derive_jobmanager_memory(patched, version, deployment=deployment)
            except (MemoryConfigError, ValueError):
                continue
            changes = trial
            break
        patches = [self.flink_patch(incident, k, v, self.say("one jobmanager total") if v is None
                                    else self.say("default jobmanager size"))
                   for k, v in (changes or {}).items()]
        if not patches:
            patches.append(self.ops_patch("JobManager memory configuration", self.say("jobmanager configuration")))
        finding = self.finding(
            "jobmanager-memory-invalid",
            self.say("jobmanager-memory-invalid", message=message), [], confidence=0.85, patches=patches,
            details={"flink_message": message, "deployment": deployment})
        finding.evidence = [error_evidence(ev, self.say("jobmanager rejected note")) for ev in events[:2]]
        finding.first_seen = earliest_ts(events)
        return finding

    # -- RocksDB outside the budget ---------------------------------------------------------------------------

    def _rocksdb(self, incident: Incident) -> Finding | None:
        mem, source = effective_taskmanager_memory(incident)
        rocks = rocksdb_memory(incident, mem)
        if rocks is None or rocks.problem is None:
            return None
        kills = [k for k in container_memory_kills(incident) if k.kind != "virtual" and not k.jobmanager]
        changes = rocksdb_fix(incident, rocks)
        conf = user_memory_config(incident)
        patches = []
        for key, value in changes.items():
            if key == "state.backend.rocksdb.memory.managed":
                reason = self.say("managed rocksdb")
            elif value is None:
                reason = self.say("drop fixed size")
            else:
                reason = self.say("rocksdb in budget", demand=size_text(rocks.demand))
            patches.append(self.flink_patch(incident, key, value, reason))
        after = None
        try:
            after = derive_taskmanager_memory(apply_changes(conf, {k: v for k, v in changes.items()
                                                                   if k.startswith("taskmanager.")}),
                                              incident.version_tuple, deployment=deployment_of(incident))
        except (MemoryConfigError, ValueError):
            after = None
        details = {
            "state_backend": rocks.backend_source,
            "rocksdb_memory_managed": rocks.managed,
            "fixed_per_slot": size_text(rocks.fixed_per_slot) if rocks.fixed_per_slot else "unset",
            "slots_per_taskmanager": rocks.slots,
            "managed_memory": size_text(rocks.managed_memory),
            "native_demand": size_text(rocks.demand) if rocks.demand else "unbounded",
            "room_in_budget": size_text(rocks.room),
            "memory_source": source,
            "container_kills": len(kills),
        }
        if mem is not None:
            details["breakdown"] = breakdown_rows(mem)
        if after is not None:
            details["breakdown_after_patch"] = breakdown_rows(after)
        summary = self.say("rocksdb-unmanaged-memory", problem=rocks.describe(),
                           outcome=self.say("killed", count=len(kills)) if kills else self.say("until killed"))
        evidence = []
        for key in ("state.backend.rocksdb.memory.managed", "state.backend.rocksdb.memory.fixed-per-slot",
                    "state.backend.rocksdb.memory.fixed-per-tm", "state.backend.type"):
            ev = config_evidence(incident, key, self.say("rocksdb setting note") if "rocksdb" in key
                                 else self.say("state backend note"))
            if ev is not None:
                evidence.append(ev)
        kill_events = [k.event for k in kills]
        evidence += [Evidence.of(ev, self.say("kill note")) for ev in kill_events[:3]]
        # The kill itself is container-memory-exceeded's finding (it leads, being timestamped); this one names the
        # configuration behind it.
        finding = self.finding("rocksdb-unmanaged-memory", summary, [], confidence=0.7,
                               patches=patches, severity="failure" if kills else "warning", details=details)
        finding.evidence = evidence
        return finding


def _process_for_explicit_sizes(conf: dict[str, str], incident: Incident) -> int | None:
    """The process size Flink derives when only the explicit task heap and managed sizes are given."""
    if not all(k in conf for k in ("taskmanager.memory.task.heap.size", "taskmanager.memory.managed.size")):
        return None
    trial = {k: v for k, v in conf.items() if k not in ("taskmanager.memory.process.size",
                                                       "taskmanager.memory.flink.size")}
    try:
        return derive_taskmanager_memory(trial, incident.version_tuple, deployment=deployment_of(incident)).process
    except MemoryConfigError:
        return None


def _oversized_overhead(conf: dict[str, str], changes: dict, version, deployment: str) -> dict[str, str | None]:
    """Back to the default JVM overhead fraction when the configured one is far above it and dropping it leaves
    the fixed configuration valid with a larger task heap: not needed to start, but an overhead fraction like 0.4
    hands 40 % of the process to the JVM's own allocations and starves the task heap."""
    key = "taskmanager.memory.jvm-overhead.fraction"
    value = conf.get(key)
    if key in changes or not value or not _is_number(value) or float(value) < 2 * OVERHEAD_DEFAULT_FRACTION:
        return {}
    fixed = apply_changes(conf, changes)
    try:
        before = derive_taskmanager_memory(fixed, version, deployment=deployment)
        after = derive_taskmanager_memory(apply_changes(fixed, {key: None}), version, deployment=deployment)
    except MemoryConfigError:
        return {}
    return {key: None} if after.task_heap > before.task_heap or after.process < before.process else {}


def _logged_message(text: str) -> str:
    """The deepest memory-model message in a logged exception (without Flink's 'TaskManager memory configuration
    failed: ' prefix, which the cause repeats)."""
    lines = [line for line in text.splitlines() if MEMORY_CONFIG_ERROR.search(line)]
    if not lines:
        return text.strip()
    line = lines[-1]
    m = re.search(r"IllegalConfigurationException: (.*)", line)
    return (m.group(1) if m else line).strip()


def _same_message(model_message: str, logged_text: str) -> bool:
    core = re.sub(r"^(?:TaskManager|JobManager) memory configuration failed: ", "", model_message)
    return core in logged_text


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


DEFAULT_SEGMENT = 32 * 1024


def canonical_of(key: str) -> str:
    return keys.canonical(key)
