"""Readings about restoring a job from a checkpoint or savepoint: which snapshot a job started from and with which
settings, the operators of the job that took it, and what the restore reported.

The JobManager logs ``Starting job <id> from savepoint <path> (allowing non restored state)`` (the parentheses are
empty without ``--allowNonRestoredState``) when a submission names a snapshot, and ``Restoring job <id> from
Checkpoint|Savepoint <n> @ <ts> for <id> located at <path>.`` once it is loaded. Every task deployment names its
vertex: ``Deploying counter -> Sink: sink (1/1) (attempt #0) with attempt id <graph>_<vertex>_0_0 and vertex id
<vertex>_0 ...``; the vertex id is the operator id of the chain's first operator, which is what a savepoint keys its
state by. An explicit ``.uid("x")`` makes that id the 128-bit Murmur3 hash of ``x`` (``StreamGraphHasherV2``), so an
operator id can be traced back to a uid when a candidate name is known.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

from flink_runbooks.model import Event, Incident
from flink_runbooks.parse.config import EffectiveConfig

# ------------------------------------------------------------------------------------------------ log lines

SAVEPOINT_START = re.compile(r"Starting job (?P<job>[0-9a-f]{32}) from savepoint (?P<path>\S+) "
                             r"\((?P<allow>allowing non restored state)?\)")
SNAPSHOT_RESTORED = re.compile(
    r"Restoring job (?P<job>[0-9a-f]{32}) from (?:latest valid checkpoint: )?(?:(?:Suspend|Terminate) )?"
    r"(?P<kind>Checkpoint|Savepoint) "
    r"(?P<id>\d+) @ (?P<at>\d+) for [0-9a-f]{32}(?: located at (?P<path>\S+?))?\.?$")
SKIPPED_STATE = re.compile(r"Skipping (?P<empty>empty )?savepoint state for operator (?P<op>[0-9a-f]{32})")
DEPLOYING = re.compile(r"Deploying (?P<task>.+?) \(\d+/\d+\)(?: \(attempt #\d+\))? (?:with attempt id|\(attempt)"
                       r".*?vertex id (?P<vertex>[0-9a-f]{32})")
TASK_SWITCH = re.compile(r"^(?P<task>\S.*?) \(\d+/\d+\)(?:#\d+)? \((?:[0-9a-f]{32}_)?(?P<vertex>[0-9a-f]{32})_\d+_\d+\) "
                         r"switched from")
# Operators the SQL/Table planner names (ExecNode descriptions with their plan id in brackets, or the legacy names).
SQL_OPERATOR = re.compile(
    r"\b(?:GroupAggregate|GlobalGroupAggregate|LocalGroupAggregate|GroupWindowAggregate|WindowAggregate|Calc|"
    r"TableSourceScan|ChangelogNormalize|SinkMaterializer|ConstraintEnforcer|Join|LookupJoin|IntervalJoin|Rank|"
    r"Deduplicate|Expand|OverAggregate|WatermarkAssigner|Sink: \w+)\[\d+\]|\bTableSourceScan\(table=\[\[|"
    r"\bStreamExecGroupAggregate\b|\bSourceConversion\(table=\[")


@dataclass
class SnapshotStart:
    """A submission that named a snapshot to start from."""

    event: Event
    job: str
    path: str
    allow_non_restored: bool


def savepoint_starts(incident: Incident) -> list[SnapshotStart]:
    return [SnapshotStart(ev, m["job"], m["path"], bool(m["allow"]))
            for ev, m in incident.find(SAVEPOINT_START)]


def restored_snapshots(incident: Incident) -> list[tuple[Event, re.Match[str]]]:
    return list(incident.find(SNAPSHOT_RESTORED))


def skipped_operators(incident: Incident) -> list[tuple[Event, str, bool]]:
    """``(event, operator id, empty)`` for every operator state a restore skipped (allowNonRestoredState)."""
    return [(ev, m["op"], bool(m["empty"])) for ev, m in incident.find(SKIPPED_STATE)]


@dataclass
class Vertex:
    vertex: str
    task: str  # "counter -> Sink: sink"
    event: Event

    @property
    def operators(self) -> list[str]:
        """The chained operators' names, ``Source: ``/``Sink: `` prefixes dropped."""
        return [re.sub(r"^(?:Source|Sink): ", "", op).strip() for op in self.task.split(" -> ")]


def vertices(incident: Incident) -> dict[str, Vertex]:
    """Every job vertex the logs deployed, by vertex id (the first time it shows)."""
    def compute(inc: Incident) -> dict[str, Vertex]:
        out: dict[str, Vertex] = {}
        for ev in inc.events:
            for rx in (DEPLOYING, TASK_SWITCH):
                m = rx.search(ev.message)
                if m and m["vertex"] not in out:
                    out[m["vertex"]] = Vertex(m["vertex"], m["task"].strip(), ev)
        return out

    return incident.derived("restore.vertices", compute)


def sql_operators(incident: Incident) -> list[Event]:
    """Events that name operators only the SQL/Table planner creates."""
    return [ev for ev, _ in incident.find(SQL_OPERATOR)]


# ------------------------------------------------------------------------------------------------ operator ids

def murmur3_128(data: bytes, seed: int = 0) -> bytes:
    """Murmur3 x64 128-bit, as Guava's ``Hashing.murmur3_128(seed)`` returns it (``asBytes``).

    >>> murmur3_128(b"counter").hex()
    '0da08f51eaa85fc298e176a139b3649a'
    """
    mask = 0xFFFFFFFFFFFFFFFF
    c1, c2 = 0x87C37B91114253D5, 0x4CF5AD432745937F

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (64 - r))) & mask

    def fmix(k: int) -> int:
        k ^= k >> 33
        k = (k * 0xFF51AFD7ED558CCD) & mask
        k ^= k >> 33
        k = (k * 0xC4CEB9FE1A85EC53) & mask
        return k ^ (k >> 33)

    h1 = h2 = seed
    blocks = len(data) // 16
    for i in range(blocks):
        k1 = int.from_bytes(data[16 * i:16 * i + 8], "little")
        k2 = int.from_bytes(data[16 * i + 8:16 * i + 16], "little")
        h1 ^= (rotl((k1 * c1) & mask, 31) * c2) & mask
        h1 = (rotl(h1, 27) + h2) & mask
        h1 = (h1 * 5 + 0x52DCE729) & mask
        h2 ^= (rotl((k2 * c2) & mask, 33) * c1) & mask
        h2 = (rotl(h2, 31) + h1) & mask
        h2 = (h2 * 5 + 0x38495AB5) & mask
    tail = data[16 * blocks:]
    k1 = int.from_bytes(tail[:8], "little")
    k2 = int.from_bytes(tail[8:], "little")
    if len(tail) > 8:
        h2 ^= (rotl((k2 * c2) & mask, 33) * c1) & mask
    if tail:
        h1 ^= (rotl((k1 * c1) & mask, 31) * c2) & mask
    h1 ^= len(data)
    h2 ^= len(data)
    h1 = (h1 + h2) & mask
    h2 = (h2 + h1) & mask
    h1, h2 = fmix(h1), fmix(h2)
    h1 = (h1 + h2) & mask
    h2 = (h2 + h1) & mask
    return h1.to_bytes(8, "little") + h2.to_bytes(8, "little")


def operator_id_of_uid(uid: str) -> str:
    """The operator id Flink derives from an explicit ``.uid(uid)``.

    >>> operator_id_of_uid("numbers")
    'ca88eee0095684d687a1b6495617f957'
    """
    return murmur3_128(uid.encode("utf-8")).hex()


def uid_for(operator_id: str, candidates: list[str]) -> str | None:
    """The candidate whose uid hash is ``operator_id``, if any."""
    return next((c for c in candidates if operator_id_of_uid(c) == operator_id), None)


def candidate_uids(incident: Incident) -> list[str]:
    """Names the logs show for operators: uids are often the operator's name."""
    names: list[str] = []
    for v in vertices(incident).values():
        for name in [v.task, *v.operators]:
            if name and name not in names:
                names.append(name)
    return names


# ------------------------------------------------------------------------------------------------ configuration

IGNORE_UNCLAIMED_KEY = "execution.state-recovery.ignore-unclaimed-state"
CLAIM_MODE_KEY = "execution.state-recovery.claim-mode"
CHECKPOINT_DIR_KEY = "execution.checkpointing.dir"


def ignore_unclaimed_configured(config: EffectiveConfig) -> bool | None:
    return config.get_bool(IGNORE_UNCLAIMED_KEY)
