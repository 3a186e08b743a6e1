"""The memory models of Flink's processes and what an incident says about them.

``options`` (units, options per version), ``model`` (the derivations Flink performs), ``logged`` (the memory
Flink logs at start-up), ``repair`` (valid configurations from invalid ones), ``incident`` (the memory settings
and observations of one incident) and ``oom`` (OutOfMemoryErrors and what ran out).
"""
from flink_runbooks.evidence.memory.options import (MemoryConfigError, flink_human_size, CONSTRAINTS, MIB, USABLE_TASK_HEAP, DISTRO_PROCESS_SIZE, DEFAULT_VERSION,
    LONG_MAX)
from flink_runbooks.evidence.memory.model import (TaskManagerMemory, JobManagerMemory, derive_taskmanager_memory, derive_jobmanager_memory, POOLS)
from flink_runbooks.evidence.memory.logged import parse_logged_breakdown, parse_logged_jobmanager_breakdown, summarize
from flink_runbooks.evidence.memory.repair import GROW_SLACK, suggest_fix, grow_pool

__all__ = [
    "MemoryConfigError", "TaskManagerMemory", "JobManagerMemory",
    "derive_taskmanager_memory", "derive_jobmanager_memory",
    "parse_logged_breakdown", "parse_logged_jobmanager_breakdown",
    "suggest_fix", "grow_pool", "summarize", "flink_human_size",
    "POOLS", "CONSTRAINTS",
    "GROW_SLACK", "MIB", "USABLE_TASK_HEAP", "DISTRO_PROCESS_SIZE", "DEFAULT_VERSION", "LONG_MAX",
]
