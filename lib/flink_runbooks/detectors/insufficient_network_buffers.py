"""``IOException: Insufficient number of network buffers``: how many buffers the task needed, why the pool was smaller,
and the network memory that fits."""
from __future__ import annotations

import math
import re

from flink_runbooks.vocabulary import keys
from flink_runbooks.evidence.memory import MemoryConfigError, derive_taskmanager_memory, grow_pool
from flink_runbooks.evidence.memory.incident import (apply_changes, breakdown_rows, config_evidence, deployment_of,
                               derived_taskmanager_memory, effective_taskmanager_memory, model_applies, size_text,
                               user_memory_config)
from flink_runbooks.model import Event, Finding, Incident, RootCause
from flink_runbooks.vocabulary.units import parse_memory_size
from flink_runbooks.detectors.base import Detector
from flink_runbooks.vocabulary.wordings import Wording

INSUFFICIENT = re.compile(
    r"Insufficient number of network buffers: required (?P<required>\d+), but only (?P<available>\d+) available\. "
    r"The total number of network buffers is currently set to (?P<total>\d+) of (?P<size>\d+) bytes each\.")
EXCLUSIVE_TIMEOUT = re.compile(
    r"Timeout triggered when requesting exclusive buffers: The total number of network buffers is currently set to "
    r"(?P<total>\d+) of (?P<size>\d+) bytes each")
# Before 1.3 the message sends the user to the one key that sized the pool (1.3 to 1.9 name the three
# taskmanager.network.memory.* keys, 1.10 on the taskmanager.memory.network.* ones).
BUFFER_COUNT_NAMED = re.compile(r"setting the configuration key '?taskmanager\.network\.numberOfBuffers")
_SUBTASK = re.compile(r"\((?P<index>\d+)/(?P<parallelism>\d+)\)")
DEFAULT_SEGMENT = 32 << 10
MIB = 1 << 20
HEADROOM = 1.25  # other tasks of the same TaskManager are deployed after the one that failed
DEFAULT_BUFFERS_PER_CHANNEL = 2
DEFAULT_FLOATING_PER_GATE = 8
LEGACY_DEFAULT_MAX = 1 << 30  # taskmanager.memory.network.max before 1.17
SEGMENT_KEY = "taskmanager.memory.segment-size"
BUFFERS_PER_CHANNEL = "taskmanager.network.memory.buffers-per-channel"
FLOATING_PER_GATE = "taskmanager.network.memory.floating-buffers-per-gate"


class InsufficientNetworkBuffers(Detector):
    slug = "insufficient-network-buffers"
    title = "Insufficient number of network buffers"
    category = "memory"
    meaning = ("A task could not get the network buffers its input gates and result partitions need: the "
               "TaskManager's network memory, divided into segments, holds fewer buffers than its tasks require.")
    exception_classes = ("java.io.IOException",)
    versions = "1.5 – 2.x (taskmanager.network.memory.* keys up to 1.9, taskmanager.memory.network.* since 1.10)"
    layer = 0
    config_keys = (
        "taskmanager.memory.network.fraction",
        "taskmanager.memory.network.min",
        "taskmanager.memory.network.max",
        "taskmanager.memory.segment-size",
        "taskmanager.network.memory.buffers-per-channel",
        "taskmanager.network.memory.floating-buffers-per-gate",
        "taskmanager.memory.process.size",
        "taskmanager.numberOfTaskSlots",
        "parallelism.default",
    )
    signatures = (
        r"Insufficient number of network buffers",
        r"Timeout triggered when requesting exclusive buffers",
        r"Allocated \d+ MB for network buffer pool",
    )
    root_causes = (
        RootCause("segment-size-enlarged",
                  "taskmanager.memory.segment-size was raised, so the same network memory holds far fewer buffers "
                  "(2mb segments: 64 times fewer than the default 32kb).",
                  "The message reports buffers of more than 32768 bytes each.",
                  patches=("flink:taskmanager.memory.segment-size", "flink:taskmanager.memory.*")),
        RootCause("network-capped-by-max",
                  "Network memory is held at taskmanager.memory.network.max (1g by default before 1.17, or an "
                  "explicit max or fixed size), below what the fraction would give.",
                  "The model derives network memory as 'max used' (or min = max), total x segment size equals the max.",
                  patches=("flink:taskmanager.memory.network.max", "flink:taskmanager.memory.network.min",
                           "flink:taskmanager.memory.process.size", "flink:taskmanager.memory.*")),
        RootCause("network-at-min",
                  "A small TaskManager: the network fraction gives less than network.min, so only the min (64m "
                  "by default, 2048 buffers) is there.",
                  "The model derives network memory as 'min used' (2048 buffers of 32kb = 64m by default).",
                  patches=("flink:taskmanager.heap.size", "flink:taskmanager.memory.network.min", "flink:taskmanager.memory.*")),
        RootCause("buffer-count-too-low",
                  "Before 1.3 the network memory is a fixed count of buffers, taskmanager.network.numberOfBuffers "
                  "(2048 by default), whatever the TaskManager's size.",
                  "The message names taskmanager.network.numberOfBuffers as the key to raise (the releases before the "
                  "network memory fraction).",
                  patches=("flink:taskmanager.network.numberOfBuffers",)),
        RootCause("high-parallelism-shuffle",
                  "The job's exchanges need more buffers than the fraction-derived network memory holds: an "
                  "all-to-all exchange needs buffers-per-channel x parallelism + floating buffers per gate.",
                  "Network memory at its fraction (not capped), high subtask parallelism in the failing task.",
                  patches=("flink:taskmanager.memory.network.min", "flink:taskmanager.memory.process.size",
                           "ops:fewer buffers per channel", "flink:taskmanager.memory.*")),
    )

    wordings = (
        Wording("insufficient-network-buffers", r"Insufficient number of network buffers: required \d+, but only \d+ available",
                "1.3 – 2.x", "NetworkBufferPool#requestMemorySegments / tryRedistributeBuffers",
                "java.io.IOException: Insufficient number of network buffers: required 408, but only 203 available. The total number of network buffers is currently set to 2048 of 32768 bytes each."),
        Wording("insufficient-network-buffers", r"You can increase this number by setting the configuration keys "
                r"'taskmanager\.network\.memory\.fraction', 'taskmanager\.network\.memory\.min', and "
                r"'taskmanager\.network\.memory\.max'",
                "1.3 – 1.9", "NetworkBufferPool (the keys are the release's own option keys: checked in 1.9.3; "
                "taskmanager.memory.network.* in 1.12.5)",
                "java.io.IOException: Insufficient number of network buffers: required 65, but only 38 available. The "
                "total number of network buffers is currently set to 2048 of 32768 bytes each. You can increase this "
                "number by setting the configuration keys 'taskmanager.network.memory.fraction', "
                "'taskmanager.network.memory.min', and 'taskmanager.network.memory.max'."),
    )

    templates = {
        "needed": "A task needed {required} network buffers but only {available} of the TaskManager's {total} were "
                  "left ({total} x {segment} = {network} of network memory); the failure is reported {failures} "
                  "time(s) in these logs.",
        "timed out": "Tasks timed out waiting for exclusive network buffers: the pool holds {total} x {segment} = "
                     "{network}.",
        "gate": " At parallelism {parallelism} one all-to-all input gate alone takes {per_channel} "
                "(buffers-per-channel) x {parallelism} + {floating} (floating) = {gate} buffers.",
        "segment-size-enlarged": " The segment size is {segment} instead of 32kb, so the network memory is cut into "
                                 "{factor} times fewer buffers.",
        "network-capped-by-max": " Network memory sits at its max{derivation}, below what its fraction would give.",
        "derivation": " ({how})",
        "network-at-min": " The TaskManager is small: its network fraction gives less than network.min, so only the "
                          "min is there.",
        "high-parallelism-shuffle": " Network memory follows its fraction; the job's exchanges simply need more.",
        "buffer-count-too-low": " This release sizes the network pool as a count of buffers "
                                "(taskmanager.network.numberOfBuffers), not from the TaskManager's memory.",
        "count reason": "The pool is a count of buffers on this release: {plan}; each buffer is taken from the "
                        "TaskManager's memory, so the heap must have room for them.",
        "target": " Target: {plan}.",
        "needed note": "needed {required} buffers, {available} were left of {total} x {segment}",
        "timed out note": "timed out waiting for buffers ({total} x {segment})",
        "again note": "the same failure, reported again",
        "setting note": "network memory setting",
        "plan": "{buffers} buffers x {segment} = {network} of network memory",
        "plan same memory": "with 32kb segments the same {network} hold {buffers} buffers, more than the {needed} "
                            "needed",
        "segment reason": "Back to the default 32kb segments: at {segment} each buffer is {factor} times bigger and "
                          "the pool holds that many times fewer ({plan}).",
        "min reason": "Network memory for the buffers the tasks need: {plan}.",
        "max reason": "The max must not be below the new min{legacy}.",
        "legacy max": " (1g by default before 1.17)",
        "total reason": "The total grows by the added network memory so heap, managed memory and the rest keep their "
                        "sizes (network memory is part of the process).",
        "buffer count reason": "The legacy buffer count is ignored once network.min/max are set; remove it to avoid "
                               "confusion.",
        "managed reason": "Managed memory keeps its size inside the larger total.",
        "other reason": "{key}: {value}",
        "fewer buffers": "With very high parallelism the exclusive buffers grow with parallelism squared: "
                         "taskmanager.network.memory.buffers-per-channel: 1 (keep >= 1 with unaligned checkpoints) or "
                         "fewer slots per TaskManager lower the requirement instead of adding memory.",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        hits = [(ev, m) for ev, m in incident.find(INSUFFICIENT)]
        timeouts = [(ev, m) for ev, m in incident.find(EXCLUSIVE_TIMEOUT)] if not hits else []
        if not hits and not timeouts:
            return []
        first, m = (hits or timeouts)[0]
        total, size = int(m["total"]), int(m["size"])
        required = int(m["required"]) if hits else None
        available = int(m["available"]) if hits else None
        network_bytes = total * size
        parallelism = _parallelism(incident, [ev for ev, _ in hits or timeouts])
        needed = (total - available + required) if required is not None else None
        mem, source = effective_taskmanager_memory(incident)
        derived, _ = derived_taskmanager_memory(incident)  # the model says how the network size came about
        cause = self._cause(incident, [ev for ev, _ in hits], size, network_bytes, derived)
        per_channel = incident.config.get_int(BUFFERS_PER_CHANNEL) or DEFAULT_BUFFERS_PER_CHANNEL
        floating = incident.config.get_int(FLOATING_PER_GATE)
        floating = DEFAULT_FLOATING_PER_GATE if floating is None else floating
        target_buffers = math.ceil((needed if needed is not None else total) * HEADROOM)
        if needed is None:
            target_buffers = max(target_buffers, total * 2)
        patches, after, plan = self._patches(incident, cause, size, network_bytes, target_buffers, mem)
        how = derived.derivation.get("network", "") if derived is not None else ""
        details = {
            "required_buffers": required,
            "available_buffers": available,
            "total_buffers": total,
            "segment_size": size_text(size),
            "network_memory": size_text(network_bytes),
            "buffers_needed_at_least": needed,
            "buffers_targeted": target_buffers,
            "failures": len(hits or timeouts),
            "memory_source": source,
            "plan": plan,
        }
        if parallelism:
            details["parallelism"] = parallelism
            details["buffers_per_all_to_all_gate"] = per_channel * parallelism + floating
        details["buffers_per_channel"] = per_channel
        details["floating_buffers_per_gate"] = floating
        if how:
            details["network_derivation"] = how
        if mem is not None:
            details["breakdown"] = breakdown_rows(mem)
        if after is not None:
            details["breakdown_after_patch"] = breakdown_rows(after)
        if required is not None:
            summary = self.say("needed", required=required, available=available, total=total, segment=size_text(size),
                               network=size_text(network_bytes), failures=len(hits or timeouts))
        else:
            summary = self.say("timed out", total=total, segment=size_text(size), network=size_text(network_bytes))
        if parallelism:
            summary += self.say("gate", parallelism=parallelism, per_channel=per_channel, floating=floating,
                                gate=per_channel * parallelism + floating)
        if cause == "segment-size-enlarged":
            summary += self.say(cause, segment=size_text(size), factor=size // DEFAULT_SEGMENT)
        elif cause == "network-capped-by-max":
            summary += self.say(cause, derivation=self.say("derivation", how=how) if how else "")
        else:
            summary += self.say(cause)
        summary += self.say("target", plan=plan)
        notes = {0: (self.say("needed note", required=required, available=available, total=total,
                              segment=size_text(size))
                     if required is not None else self.say("timed out note", total=total, segment=size_text(size))),
                 1: self.say("again note"), 2: self.say("again note")}
        events: list[Event] = [first] + [ev for ev, _ in (hits or timeouts)[1:3]]
        finding = self.finding(cause, summary, events, confidence=0.9 if mem is not None else 0.8, patches=patches,
                               notes=notes, details=details)
        for key in (SEGMENT_KEY, "taskmanager.memory.network.max", "taskmanager.memory.network.min",
                    "taskmanager.memory.network.fraction"):
            ev = config_evidence(incident, key, self.say("setting note"))
            if ev is not None and len(finding.evidence) < 8:
                finding.evidence.append(ev)
        return [finding]

    def _cause(self, incident: Incident, failures: list[Event], size: int, network_bytes: int, derived) -> str:
        if any(BUFFER_COUNT_NAMED.search(ev.text) for ev in failures):
            return "buffer-count-too-low"
        if size > DEFAULT_SEGMENT:
            return "segment-size-enlarged"
        how = derived.derivation.get("network", "") if derived is not None else ""
        if "max used" in how:
            return "network-capped-by-max"
        if "min used" in how:
            return "network-at-min"
        conf = user_memory_config(incident)
        low, high = (parse_memory_size(_first(conf, k)) for k in ("taskmanager.memory.network.min",
                                                                   "taskmanager.memory.network.max"))
        if low is not None and high is not None and low == high:
            return "network-capped-by-max"
        if derived is None:
            version = incident.version_tuple
            if network_bytes == (high or LEGACY_DEFAULT_MAX) and (high or not version or tuple(version[:2]) < (1, 17)):
                return "network-capped-by-max"
            if network_bytes == (low or 64 * MIB):
                return "network-at-min"
        return "high-parallelism-shuffle"

    def _patches(self, incident: Incident, cause: str, size: int, network_bytes: int, target_buffers: int, mem):
        conf = user_memory_config(incident)
        version = incident.version_tuple
        deployment = deployment_of(incident)
        changes: dict[str, str | None] = {}
        segment = size
        if cause == "segment-size-enlarged":
            changes[SEGMENT_KEY] = None
            segment = DEFAULT_SEGMENT
        if cause == "buffer-count-too-low":
            plan = self.say("plan", buffers=target_buffers, segment=size_text(segment),
                            network=size_text(target_buffers * segment))
            return [self.flink_patch(incident, "taskmanager.network.numberOfBuffers", str(target_buffers),
                                     self.say("count reason", plan=plan))], None, plan
        target = math.ceil(target_buffers * segment / MIB) * MIB
        # The message is what the TaskManager had; a model that disagrees describes another configuration.
        model_matches = mem is not None and abs(mem.network - network_bytes) <= MIB
        current = mem.network if model_matches else network_bytes
        plan = self.say("plan", buffers=target_buffers, segment=size_text(segment), network=size_text(target))
        if cause == "segment-size-enlarged" and network_bytes // DEFAULT_SEGMENT >= target_buffers:
            plan = self.say("plan same memory", network=size_text(network_bytes),
                            buffers=network_bytes // DEFAULT_SEGMENT, needed=target_buffers)
            target = None
        after = None
        if target is not None and target > current:
            if model_matches and model_applies(incident):
                try:
                    changes.update(grow_pool(apply_changes(conf, changes), version, "network", target - current,
                                             deployment=deployment))
                except (ValueError, MemoryConfigError):
                    changes.update(_direct_sizes(incident, target))
            else:
                changes.update(_direct_sizes(incident, target))
        if "taskmanager.network.numberOfBuffers" in conf and any(k.startswith("taskmanager.memory.network")
                                                                   for k in changes):
            changes["taskmanager.network.numberOfBuffers"] = None
        if mem is not None and model_applies(incident):
            try:
                after = derive_taskmanager_memory(apply_changes(conf, changes), version, deployment=deployment)
            except (MemoryConfigError, ValueError):
                after = None
        patches = []
        for key, value in changes.items():
            if key == SEGMENT_KEY:
                why = self.say("segment reason", segment=size_text(size), factor=size // DEFAULT_SEGMENT, plan=plan)
            elif key.endswith("network.min"):
                why = self.say("min reason", plan=plan)
            elif key.endswith("network.max"):
                why = self.say("max reason", legacy=self.say("legacy max") if cause == "network-capped-by-max" else "")
            elif key.endswith(("process.size", "flink.size", "heap.size")):
                why = self.say("total reason")
            elif key.endswith("numberOfBuffers"):
                why = self.say("buffer count reason")
            elif key.endswith("managed.fraction"):
                why = self.say("managed reason")
            else:
                why = self.say("other reason", key=key, value=value)
            patches.append(self.flink_patch(incident, key, value, why))
        if cause == "high-parallelism-shuffle":
            patches.append(self.ops_patch("fewer buffers per channel", self.say("fewer buffers")))
        return patches, after, plan


def _first(conf: dict[str, str], key: str) -> str | None:
    """The value of ``key`` under its newest spelling present in ``conf``."""
    return next((conf[k] for k in keys.aliases(key) if k in conf), None)


def _direct_sizes(incident: Incident, target: int) -> dict[str, str]:
    """Without the model (before 1.10, or no configuration): raise min (and max when below) to the target."""
    value = f"{math.ceil(target / MIB)}m"
    changes = {"taskmanager.memory.network.min": value}
    high = incident.config.get_bytes("taskmanager.memory.network.max")
    version = incident.version_tuple
    default_high = LEGACY_DEFAULT_MAX if not version or tuple(version[:2]) < (1, 17) else None
    if (high if high is not None else default_high) is not None and (high or default_high) < target:
        changes["taskmanager.memory.network.max"] = value
    legacy_heap = incident.config.get_bytes("taskmanager.heap.size")
    current = incident.config.get_bytes("taskmanager.memory.network.min") or 64 * MIB
    if legacy_heap and version and tuple(version[:2]) < (1, 10):
        # before 1.10 the network memory is carved out of taskmanager.heap.size
        changes["taskmanager.heap.size"] = f"{math.ceil((legacy_heap + target - current) / MIB)}m"
    return changes


def _parallelism(incident: Incident, events: list[Event]) -> int | None:
    for ev in events:
        m = _SUBTASK.search(ev.message)
        if m:
            return int(m["parallelism"])
    return incident.config.get_int("parallelism.default")
