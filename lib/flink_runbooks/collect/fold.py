"""Repeated records fold into one entry, so what reaches the driver is bounded whatever the size of the logs.

A crash-looping cluster prints the same records at every start (its configuration, plugins, state backend, memory
layout) and the same failure at every restart; a healthy one two checkpoint lines per checkpoint for months. Records
that differ only in numbers and ids share a *fingerprint*. Of each fingerprint the first :data:`KEEP_FIRST` and the
last :data:`KEEP_LAST` records are kept whole (where a failure started, and how it looks now); the ones between are
counted, with the place and time of the first and last of them. The workers fold what their partition holds and the
driver folds what the partitions send, so neither holds more than a few hundred records per fingerprint, and at most
:data:`MAX_FINGERPRINTS` fingerprints.

Lines that say which process a file is (the start-up banner, the TaskManager's resource id) are folded per file, and
configuration lines only when they are identical (a value is not a number to blur).
"""
from __future__ import annotations

import collections
import dataclasses
import re
from typing import Iterable, Iterator

KEEP_FIRST = 50
KEEP_LAST = 200
# Configuration lines repeat word for word at every start and only the latest value counts: fewer are kept.
CONFIG_KEEP_FIRST = 2
CONFIG_KEEP_LAST = 8
MAX_FINGERPRINTS = 20_000
_CONFIG_KIND = "config"
# the fingerprint of a repeat row that counts records dropped beyond MAX_FINGERPRINTS
DROPPED = "\x00dropped"

# UUIDs, ids in hexadecimal (also inside a longer token: an attempt id is two of them joined with "_"), numbers
_VARIABLE = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}|(?=[0-9a-f]*\d)[0-9a-f]{8,}|\d+")
# Which process a file is, and the "-D" that marks the next program argument as a property (per file, so each kept
# property keeps the marker before it)
_PER_FILE = re.compile(r"Starting \w+.* \(Version: |Starting TaskManager with ResourceID: |^\s*-D$")
_CONFIGURATION = re.compile(r"Loading (?:dynamic )?configuration property: |^\s*(?:dynamic_configs|jvm_params): "
                            r"|^\s{2,}[a-z][\w.-]*=")


def fingerprint(row: dict) -> str:
    """What a record says, without the numbers and ids that change from one repetition to the next."""
    message = row.get("message") or ""
    if _CONFIGURATION.search(message):
        return f"{_CONFIG_KIND}\x1f{row.get('file') or ''}\x1f{message}"
    head = _VARIABLE.sub("#", message[:500])
    chain = "|".join(f"{c['cls']}:{_VARIABLE.sub('#', (c.get('message') or '')[:200])}" for c in row.get("chain") or [])
    where = row.get("file") or "" if _PER_FILE.search(message) else ""
    return f"{where}\x1f{row.get('level') or ''}\x1f{row.get('logger') or ''}\x1f{head}\x1f{chain}"


def _order(row: dict) -> tuple:
    return (row.get("ts") or "", row.get("file") or "", row.get("block") or 0, row.get("line_index") or 0)


@dataclasses.dataclass
class Omitted:
    """The records of one fingerprint between the kept first and last ones."""

    count: int = 0
    first: dict | None = None  # {file, block, line_index, ts} of the earliest
    last: dict | None = None

    def add(self, count: int, first: dict, last: dict) -> None:
        self.count += count
        if self.first is None or _order(first) < _order(self.first):
            self.first = first
        if self.last is None or _order(last) > _order(self.last):
            self.last = last


def _place(row: dict) -> dict:
    return {k: row.get(k) for k in ("file", "block", "line_index", "ts")}


class Folder:
    """Folds a stream of record rows (dicts with ``fingerprint``) and repeat rows (from another folder)."""

    def __init__(self, keep_first: int = KEEP_FIRST, keep_last: int = KEEP_LAST,
                 max_fingerprints: int = MAX_FINGERPRINTS) -> None:
        self.keep_first, self.keep_last, self.max_fingerprints = keep_first, keep_last, max_fingerprints
        self.kept: dict[str, list[dict]] = {}
        self.omitted: dict[str, Omitted] = collections.defaultdict(Omitted)
        self.dropped = 0  # records of fingerprints beyond max_fingerprints
        self.received = 0

    def add(self, row: dict) -> None:
        self.received += 1
        if row["kind"] == "repeat":
            fp = row["fingerprint"]
            if fp == DROPPED:
                self.dropped += row["count"]
                return
            self.omitted[fp].add(row["count"], _place(row), {"file": row["last_file"], "block": row["last_block"],
                                                              "line_index": row["last_line_index"], "ts": row["last_ts"]})
            return
        fp = row["fingerprint"]
        rows = self.kept.get(fp)
        if rows is None:
            if len(self.kept) >= self.max_fingerprints:
                self.dropped += 1
                return
            rows = self.kept[fp] = []
        rows.append(row)
        if len(rows) > 2 * (self.keep_first + self.keep_last):
            self._trim(fp)

    def _limits(self, fp: str) -> tuple[int, int]:
        if fp.startswith(_CONFIG_KIND + "\x1f"):
            return min(self.keep_first, CONFIG_KEEP_FIRST), min(self.keep_last, CONFIG_KEEP_LAST)
        return self.keep_first, self.keep_last

    def _trim(self, fp: str) -> None:
        rows = self.kept[fp]
        first, last = self._limits(fp)
        if len(rows) <= first + last:
            return
        rows.sort(key=_order)
        middle = rows[first:len(rows) - last]
        self.omitted[fp].add(len(middle), _place(middle[0]), _place(middle[-1]))
        del rows[first:len(rows) - last]

    def records(self) -> Iterator[dict]:
        """Every kept record, each fingerprint trimmed to its first and last ones."""
        for fp in list(self.kept):
            self._trim(fp)
            yield from self.kept[fp]

    def repeat_rows(self) -> Iterator[dict]:
        """One row per fingerprint with omitted records, in the shape :meth:`add` takes back."""
        for fp, gone in self.omitted.items():
            if gone.count:
                first, last = gone.first or {}, gone.last or {}
                yield {"kind": "repeat", "fingerprint": fp, "count": gone.count, **first,
                       "last_file": last.get("file"), "last_block": last.get("block"),
                       "last_line_index": last.get("line_index"), "last_ts": last.get("ts")}


def fold_rows(rows: Iterable[dict], folder: Folder | None = None) -> tuple[list[dict], Folder]:
    """Records and statistics rows, folded; repeat rows are kept on the folder (see :meth:`Folder.repeat_rows`)."""
    folder = folder or Folder()
    others = []
    for row in rows:
        if row["kind"] in ("record", "repeat"):
            folder.add(row)
        else:
            others.append(row)
    return others + list(folder.records()), folder
