"""Flink configuration key names across versions (FLIP-49, FLIP-406, the 1.18 Akka→Pekko switch, the 2.0 removals).

Each :class:`Concept` lists the spellings of one option, newest first, with the release line that introduced each
spelling and the one that removed it. Flink resolves a deprecated spelling when the newest one is absent, and the newest
spelling wins when both are set; :func:`resolution_order` reproduces that.

Where the reference could not pin the release of a rename, the later candidate is recorded: the old spelling keeps
working as a deprecated key, so a late ``since`` only costs a deprecation warning, never a silently ignored key.

Version arguments are tuples such as ``(1, 20)`` or ``(1, 20, 3)``; only major and minor are compared.
"""
from __future__ import annotations

from dataclasses import dataclass

from flink_runbooks.vocabulary.versions import FlinkVersion

# What every function here takes: a FlinkVersion or a plain tuple such as (1, 20); only major and minor count.
Version = FlinkVersion | tuple[int, ...]


@dataclass(frozen=True)
class KeyName:
    name: str
    since: Version | None = None  # None: understood by every release in scope
    removed_in: Version | None = None

    def valid_in(self, version: Version) -> bool:
        v = tuple(version[:2])
        if self.since is not None and v < self.since:
            return False
        return self.removed_in is None or v < self.removed_in


@dataclass(frozen=True)
class Concept:
    concept: str
    names: tuple[KeyName, ...]  # newest first
    default: str | None = None

    @property
    def newest(self) -> str:
        return self.names[0].name


def _c(concept: str, *names: str | tuple, default: str | None = None) -> Concept:
    """``names`` are plain strings or ``(name, since, removed_in)`` tuples, newest first."""
    parsed = [KeyName(n) if isinstance(n, str) else KeyName(*n) for n in names]
    return Concept(concept, tuple(parsed), default)


V1_10, V1_13, V1_14, V1_15, V1_17, V1_18, V1_19, V1_20, V2_0 = (
    (1, 10), (1, 13), (1, 14), (1, 15), (1, 17), (1, 18), (1, 19), (1, 20), (2, 0))

CONCEPTS: tuple[Concept, ...] = (
    # state / checkpoint storage (FLIP-406 moved these under execution.checkpointing.* in 1.20)
    _c("state backend", ("state.backend.type", V1_17), "state.backend", default="hashmap"),
    _c("checkpoint storage", ("execution.checkpointing.storage", V1_20), ("state.checkpoint-storage", V1_13)),
    _c("checkpoints dir", ("execution.checkpointing.dir", V1_20), "state.checkpoints.dir",
       "state.backend.fs.checkpointdir"),
    _c("savepoints dir", ("execution.checkpointing.savepoint-dir", V1_20), "state.savepoints.dir",
       "savepoints.state.backend.fs.dir"),
    _c("retained checkpoints", ("execution.checkpointing.num-retained", V1_20), "state.checkpoints.num-retained",
       default="1"),
    # the option came with 1.19 (CheckpointingOptions of the 1.18.1 and 1.19.1 jars); older releases always write
    # <dir>/<job id>/chk-N
    _c("job-id sub-directories", ("execution.checkpointing.create-subdir", V1_20),
       ("state.checkpoints.create-subdir", V1_19), default="true"),
    _c("incremental checkpoints", ("execution.checkpointing.incremental", V1_20), "state.backend.incremental",
       default="false"),
    _c("inline state threshold", ("execution.checkpointing.data-inline-threshold", V1_20),
       "state.storage.fs.memory-threshold", "state.backend.fs.memory-threshold", default="20kb"),
    _c("checkpoint write buffer", ("execution.checkpointing.write-buffer-size", V1_20),
       "state.storage.fs.write-buffer-size", "state.backend.fs.write-buffer-size", default="4096"),
    _c("local recovery", ("execution.state-recovery.from-local", V1_20),
       ("state.backend.local-recovery", None, V2_0), default="false"),
    _c("local state dirs", ("execution.checkpointing.local-backup.dirs", V1_20), "taskmanager.state.local.root-dirs"),
    _c("savepoint path", ("execution.state-recovery.path", V1_20), "execution.savepoint.path"),
    _c("ignore unclaimed state", ("execution.state-recovery.ignore-unclaimed-state", V1_20),
       "execution.savepoint.ignore-unclaimed-state", default="false"),
    _c("restore mode", ("execution.state-recovery.claim-mode", V1_20), ("execution.savepoint-restore-mode", V1_15),
       default="NO_CLAIM"),
    _c("approximate local recovery", ("execution.state-recovery.approximate-local-recovery", V1_20),
       "execution.checkpointing.approximate-local-recovery", default="false"),
    _c("checkpoint cleaner parallel mode", ("execution.checkpointing.cleaner.parallel-mode", V1_20),
       ("state.checkpoint.cleaner.parallel-mode", V1_19), default="true"),
    # introduction releases checked against the Flink jars of each line
    _c("unaligned checkpoints", ("execution.checkpointing.unaligned.enabled", V1_17),
       "execution.checkpointing.unaligned", default="false"),
    _c("aligned checkpoint timeout", ("execution.checkpointing.aligned-checkpoint-timeout", V1_14),
       "execution.checkpointing.alignment-timeout", default="0 s"),
    _c("checkpoints after tasks finish", ("execution.checkpointing.checkpoints-after-tasks-finish", V1_20),
       ("execution.checkpointing.checkpoints-after-tasks-finish.enabled", V1_14), default="true"),
    # same spelling in every release line
    _c("tolerable failed checkpoints", "execution.checkpointing.tolerable-failed-checkpoints"),
    _c("checkpoint timeout", "execution.checkpointing.timeout", default="10 min"),
    _c("checkpoint interval", "execution.checkpointing.interval"),
    _c("checkpoint min pause", "execution.checkpointing.min-pause", default="0 ms"),
    _c("max concurrent checkpoints", "execution.checkpointing.max-concurrent-checkpoints", default="1"),
    _c("externalized checkpoint retention", "execution.checkpointing.externalized-checkpoint-retention",
       default="NO_EXTERNALIZED_CHECKPOINTS"),
    _c("rocksdb local dir", "state.backend.rocksdb.localdir"),
    # runtime
    _c("restart strategy", ("restart-strategy.type", V1_17), "restart-strategy"),
    _c("fixed-delay attempts", "restart-strategy.fixed-delay.attempts"),
    # JVM options of every Flink process: env.java.opts.all since 1.17 (checked in the 1.16 and 1.17 jars)
    _c("JVM options of every process", ("env.java.opts.all", V1_17), "env.java.opts"),
    _c("rpc ask timeout", ("pekko.ask.timeout", V1_18), "akka.ask.timeout", default="10 s"),
    _c("rpc frame size", ("pekko.framesize", V1_18), "akka.framesize", default="10485760b"),
    _c("taskmanager registration timeout", "taskmanager.registration.timeout", "taskmanager.maxRegistrationDuration",
       default="5 min"),
    _c("heartbeat interval", "heartbeat.interval", default="10 s"),
    _c("heartbeat timeout", "heartbeat.timeout", default="50 s"),
    # Kerberos and delegation tokens: SecurityOptions of the 1.20.3 and 2.3.0 jars declare the older spellings as
    # deprecated keys (still read by 2.3); the token framework's switch took its name with the framework in 1.17
    _c("delegation tokens", ("security.delegation.tokens.enabled", V1_17), "security.kerberos.fetch.delegation-token",
       default="true"),
    # HighAvailabilityOptions of the 1.20.3 jar: high-availability.type, with high-availability and recovery.mode as
    # deprecated keys; the .type spelling recorded from 1.17 (the options of the 1.17 line declare it)
    _c("high availability", ("high-availability.type", V1_17), "high-availability", "recovery.mode", default="NONE"),
    # KubernetesConfigOptions: .ref and .amount are declared by 1.17's options (not by 1.14.6's), the older spellings
    # stay as deprecated keys
    _c("kubernetes image", ("kubernetes.container.image.ref", V1_17), "kubernetes.container.image"),
    _c("kubernetes taskmanager cpu", ("kubernetes.taskmanager.cpu.amount", V1_17), "kubernetes.taskmanager.cpu"),
    _c("kubernetes jobmanager cpu", ("kubernetes.jobmanager.cpu.amount", V1_17), "kubernetes.jobmanager.cpu"),
    _c("kerberos keytab", "security.kerberos.login.keytab", "security.keytab"),
    _c("kerberos principal", "security.kerberos.login.principal", "security.principal"),
    # FLIP-49 (1.10) memory model; the legacy network keys were removed in 2.0
    _c("network memory fraction", ("taskmanager.memory.network.fraction", V1_10),
       ("taskmanager.network.memory.fraction", None, V2_0), default="0.1"),
    _c("network memory min", ("taskmanager.memory.network.min", V1_10),
       ("taskmanager.network.memory.min", None, V2_0), default="64m"),
    _c("network memory max", ("taskmanager.memory.network.max", V1_10),
       ("taskmanager.network.memory.max", None, V2_0)),
)

# Keys that were superseded by an option with different semantics (so they are not aliases: a value of one cannot be
# read as the other). ``taskmanager.heap.size`` meant Flink memory on standalone and process memory on YARN/K8s.
_TM_TOTAL_MEMORY = "taskmanager.memory.process.size (containers) / taskmanager.memory.flink.size (standalone)"
LEGACY_KEYS: dict[str, tuple[str, Version | None]] = {
    "taskmanager.heap.size": (_TM_TOTAL_MEMORY, V2_0),
    "taskmanager.heap.mb": (_TM_TOTAL_MEMORY, V2_0),
    "jobmanager.heap.size": ("jobmanager.memory.process.size", V2_0),
    "jobmanager.heap.mb": ("jobmanager.memory.process.size", V2_0),
    "taskmanager.network.numberOfBuffers": ("taskmanager.memory.network.fraction / .min / .max", V2_0),
    "pipeline.registered-kryo-types": ("pipeline.serialization-config", V2_0),
    "pipeline.default-kryo-serializers": ("pipeline.serialization-config", V2_0),
    "pipeline.registered-pojo-types": ("pipeline.serialization-config", V2_0),
}

# Options that read another option when unset (Flink "fallback keys"); not renames, so not in ``aliases``.
FALLBACKS: dict[str, str] = {
    "execution.checkpointing.local-backup.enabled": "execution.state-recovery.from-local",
}

# Release lines used to judge which spelling is understood most widely when the version is unknown: the ones still
# met in production (the catalogue's 1.13 – 1.20 focus) and 2.x.
KNOWN_RELEASES: tuple[Version, ...] = tuple((1, m) for m in range(13, 21)) + ((2, 0), (2, 1))

_BY_NAME: dict[str, Concept] = {kn.name: c for c in CONCEPTS for kn in c.names}


def concept_of(key: str) -> Concept | None:
    return _BY_NAME.get(key)


def canonical(key: str) -> str:
    """The newest spelling of ``key`` (``key`` itself when it has no other names)."""
    c = _BY_NAME.get(key)
    return c.newest if c else key


def aliases(key: str) -> tuple[str, ...]:
    """Every spelling of ``key``, newest first (``(key,)`` for a key without renames)."""
    c = _BY_NAME.get(key)
    return tuple(kn.name for kn in c.names) if c else (key,)


def resolution_order(key: str) -> tuple[str, ...]:
    """The keys Flink consults for ``key``, in order: its spellings newest first, then its fallback option's."""
    order = aliases(key)
    fallback = FALLBACKS.get(canonical(key))
    return order + aliases(fallback) if fallback else order


def removed_in(key: str) -> Version | None:
    """The release that stopped understanding this exact spelling, or None."""
    c = _BY_NAME.get(key)
    if c:
        return next(kn.removed_in for kn in c.names if kn.name == key)
    legacy = LEGACY_KEYS.get(key)
    return legacy[1] if legacy else None


def superseded_by(key: str) -> str | None:
    """Replacement advice for a legacy key that has no one-to-one rename (``taskmanager.heap.size``…)."""
    legacy = LEGACY_KEYS.get(key)
    return legacy[0] if legacy else None


def is_valid_in(key: str, version: Version) -> bool:
    """Whether ``version`` understands this exact spelling (unknown keys are assumed valid)."""
    c = _BY_NAME.get(key)
    if c:
        return next(kn for kn in c.names if kn.name == key).valid_in(version)
    removed = removed_in(key)
    return removed is None or tuple(version[:2]) < removed


def name_for(key: str, version: Version | None) -> str:
    """The spelling of ``key`` that ``version`` expects.

    Known version: the newest spelling that version understands (deprecated spellings are renamed, removed ones are
    never chosen). Unknown version: the spelling understood by the most release lines in :data:`KNOWN_RELEASES`
    (1.13 … 2.1), ties going to the newer one. So a spelling valid from 1.13 through 2.x wins when there is one
    (``restart-strategy`` over ``restart-strategy.type``, ``taskmanager.memory.network.max`` over its removed legacy
    name); otherwise the widest one does (``state.backend.local-recovery``, 1.x up to 1.20, over
    ``execution.state-recovery.from-local``, 1.20+).
    Keys without renames are returned unchanged.
    """
    c = _BY_NAME.get(key)
    if c is None:
        return key
    if version is None:
        coverage = [sum(kn.valid_in(r) for r in KNOWN_RELEASES) for kn in c.names]
        return c.names[coverage.index(max(coverage))].name
    for kn in c.names:
        if kn.valid_in(version):
            return kn.name
    # Older than every spelling: the oldest one is the closest match.
    return c.names[-1].name
