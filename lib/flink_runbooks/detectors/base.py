"""The detector contract shared by every runbook."""
from __future__ import annotations

from typing import ClassVar, Iterable

from flink_runbooks.model import Event, Evidence, Finding, Incident, Patch, RootCause, earliest_ts


class Detector:
    """Judge one kind of failure from structured evidence.

    Class attributes are the declaration (what the runbook is about and what it needs from the logs);
    :meth:`detect` is the judgement. Signatures are regexes in the syntax Java and Python share: Spark keeps a log
    line when it matches any detector's signature, so a signature that is too narrow loses evidence and one that
    is too wide costs throughput.
    """

    slug: ClassVar[str]
    title: ClassVar[str]
    category: ClassVar[str]  # checkpointing | state-backends | memory | cluster | connectors
    meaning: ClassVar[str]  # one line: what the exception means
    signatures: ClassVar[tuple[str, ...]] = ()  # line regexes (header or continuation lines)
    frames: ClassVar[tuple[str, ...]] = ()  # stack-frame regexes this detector needs to see
    root_causes: ClassVar[tuple[RootCause, ...]] = ()
    versions: ClassVar[str] = "1.x, 2.x"
    exception_classes: ClassVar[tuple[str, ...]] = ()  # the exception classes the runbook is about (for search)
    # 0: a root cause; 1: a wrapper that reports another fault (e.g. the tolerable-failure threshold);
    # 2: an umbrella outcome (e.g. restarts exhausted). The primary finding prefers the lowest layer.
    layer: ClassVar[int] = 0

    def detect(self, incident: Incident) -> list[Finding]:
        raise NotImplementedError

    # helpers for subclasses -------------------------------------------------------------------------------------

    def cause(self, slug: str) -> RootCause:
        for rc in self.root_causes:
            if rc.slug == slug:
                return rc
        raise KeyError(f"{self.slug}: undeclared root cause {slug!r}")

    def finding(
        self,
        cause: str,
        summary: str,
        events: Iterable[Event],
        *,
        confidence: float,
        patches: Iterable[Patch] = (),
        severity: str = "failure",
        notes: dict[int, str] | None = None,
        details: dict | None = None,
        max_evidence: int = 8,
    ) -> Finding:
        evs = list(events)
        notes = notes or {}
        evidence = [Evidence.of(ev, notes.get(i, "")) for i, ev in enumerate(evs[:max_evidence])]
        return Finding(
            runbook=self.slug,
            title=self.title,
            root_cause=self.cause(cause),
            summary=summary,
            confidence=confidence,
            evidence=evidence,
            patches=list(patches),
            severity=severity,
            first_seen=earliest_ts(evs),
            details=dict(details or {}),
        )

    @staticmethod
    def flink_patch(incident: Incident, key: str, proposed: str | None, reason: str) -> Patch:
        """A Flink config change with the incident's current value and where that value came from."""
        current = incident.config.lookup(key)
        return Patch(
            target="flink",
            key=key,
            proposed=proposed,
            reason=reason,
            current=current.value if current else None,
            current_source=str(current.source) if current else None,
        )

    @staticmethod
    def kafka_patch(key: str, proposed: str, reason: str, current: str | None = None,
                    current_source: str | None = None) -> Patch:
        return Patch(target="kafka", key=key, proposed=proposed, reason=reason, current=current,
                     current_source=current_source)

    @staticmethod
    def code_patch(key: str, snippet: str, reason: str) -> Patch:
        return Patch(target="code", key=key, proposed=None, reason=reason, snippet=snippet)

    @staticmethod
    def ops_patch(key: str, reason: str, snippet: str | None = None) -> Patch:
        return Patch(target="ops", key=key, proposed=None, reason=reason, snippet=snippet)
