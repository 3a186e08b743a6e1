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
    )

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
        cause = self._classify(incident, size, network_bytes, derived)
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
        summary = self._summary(cause, required, available, total, size, network_bytes, parallelism, how, plan,
                                len(hits or timeouts), per_channel, floating)
        notes = {0: (f"needed {required} buffers, {available} were left of {total} x {size_text(size)}"
                     if required is not None else f"timed out waiting for buffers ({total} x {size_text(size)})"),
                 1: "the same failure, reported again", 2: "the same failure, reported again"}
        events: list[Event] = [first] + [ev for ev, _ in (hits or timeouts)[1:3]]
        finding = self.finding(cause, summary, events, confidence=0.9 if mem is not None else 0.8, patches=patches,
                               notes=notes, details=details)
        for key in (SEGMENT_KEY, "taskmanager.memory.network.max", "taskmanager.memory.network.min",
                    "taskmanager.memory.network.fraction"):
            ev = config_evidence(incident, key, "network memory setting")
            if ev is not None and len(finding.evidence) < 8:
                finding.evidence.append(ev)
        return [finding]

    def _summary(self, cause, required, available, total, size, network_bytes, parallelism, how, plan,
                 failures, per_channel, floating) -> str:
        if required is not None:
            text = (f"A task needed {required} network buffers but only {available} of the TaskManager's {total} were "
                    f"left ({total} x {size_text(size)} = {size_text(network_bytes)} of network memory); "
                    f"the failure is reported {failures} time(s) in these logs.")
        else:
            text = (f"Tasks timed out waiting for exclusive network buffers: the pool holds {total} x "
                    f"{size_text(size)} = {size_text(network_bytes)}.")
        if parallelism:
            text += (f" At parallelism {parallelism} one all-to-all input gate alone takes {per_channel} "
                     f"(buffers-per-channel) x {parallelism} + {floating} (floating) = "
                     f"{per_channel * parallelism + floating} buffers.")
        why = {
            "segment-size-enlarged": f" The segment size is {size_text(size)} instead of 32kb, so the network memory "
                                     f"is cut into {size // DEFAULT_SEGMENT} times fewer buffers.",
            "network-capped-by-max": " Network memory sits at its max" + (f" ({how})" if how else "")
                                     + ", below what its fraction would give.",
            "network-at-min": " The TaskManager is small: its network fraction gives less than network.min, so only "
                              "the min is there.",
            "high-parallelism-shuffle": " Network memory follows its fraction; the job's exchanges simply need more.",
        }[cause]
        return text + why + f" Target: {plan}."

    def _classify(self, incident: Incident, size: int, network_bytes: int, derived) -> str:
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
        target = math.ceil(target_buffers * segment / MIB) * MIB
        # The message is what the TaskManager had; a model that disagrees describes another configuration.
        model_matches = mem is not None and abs(mem.network - network_bytes) <= MIB
        current = mem.network if model_matches else network_bytes
        plan = f"{target_buffers} buffers x {size_text(segment)} = {size_text(target)} of network memory"
        if cause == "segment-size-enlarged" and network_bytes // DEFAULT_SEGMENT >= target_buffers:
            plan = (f"with 32kb segments the same {size_text(network_bytes)} hold {network_bytes // DEFAULT_SEGMENT} "
                    f"buffers, more than the {target_buffers} needed")
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
        patches = [self.flink_patch(incident, key, value, _reason(key, value, cause, size, plan, conf))
                   for key, value in changes.items()]
        if cause == "high-parallelism-shuffle":
            patches.append(self.ops_patch(
                "fewer buffers per channel",
                "With very high parallelism the exclusive buffers grow with parallelism squared: "
                "taskmanager.network.memory.buffers-per-channel: 1 (keep >= 1 with unaligned checkpoints) or "
                "fewer slots per TaskManager lower the requirement instead of adding memory."))
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


def _reason(key: str, value: str | None, cause: str, size: int, plan: str, conf: dict[str, str]) -> str:
    if key == SEGMENT_KEY:
        return (f"Back to the default 32kb segments: at {size_text(size)} each buffer is {size // DEFAULT_SEGMENT} "
                f"times bigger and the pool holds that many times fewer ({plan}).")
    if key.endswith("network.min"):
        return f"Network memory for the buffers the tasks need: {plan}."
    if key.endswith("network.max"):
        return "The max must not be below the new min" + (" (1g by default before 1.17)." if cause ==
                                                          "network-capped-by-max" else ".")
    if key.endswith(("process.size", "flink.size", "heap.size")):
        return ("The total grows by the added network memory so heap, managed memory and the rest keep their "
                "sizes (network memory is part of the process).")
    if key.endswith("numberOfBuffers"):
        return "The legacy buffer count is ignored once network.min/max are set; remove it to avoid confusion."
    if key.endswith("managed.fraction"):
        return "Managed memory keeps its size inside the larger total."
    return f"{key}: {value}"
