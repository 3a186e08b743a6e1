"""The detector contract shared by every runbook."""
from __future__ import annotations

import fnmatch
import re
import string
from typing import ClassVar, Iterable

from flink_runbooks.model import Event, Evidence, Finding, Incident, Patch, RootCause, earliest_ts
from flink_runbooks.vocabulary import keys
from flink_runbooks.vocabulary.wordings import Wording


# The whole exception chain of an evidence record (message and every "Caused by", not the frames): the deepest cause
# is usually the line that proves the verdict, so it must not be cut off.
EVIDENCE_TEXT_LIMIT = 4000


class Detector:
    """Judge one kind of failure from structured evidence.

    Class attributes are the declaration (what the runbook is about and what it needs from the logs);
    :meth:`detect` is the judgement. Signatures are regexes in the syntax Java and Python share: Spark keeps a log
    line when it matches any detector's signature, so a signature that is too narrow loses evidence and one that
    is too wide costs throughput.
    """

    slug: ClassVar[str]
    title: ClassVar[str]
    category: ClassVar[str]  # one of flink_runbooks.catalogue.CATEGORIES
    meaning: ClassVar[str]  # one line: what the exception means
    signatures: ClassVar[tuple[str, ...]] = ()  # line regexes (header or continuation lines)
    frames: ClassVar[tuple[str, ...]] = ()  # stack-frame regexes this detector needs to see
    root_causes: ClassVar[tuple[RootCause, ...]] = ()
    versions: ClassVar[str] = "1.x, 2.x"
    exception_classes: ClassVar[tuple[str, ...]] = ()  # the exception classes the runbook is about (for search)
    # Flink's own wording of this failure per release range (vocabulary.wordings): recognised in excerpts and in
    # failures no judgement could decide, kept by the pre-filter, each tested against its example line.
    wordings: ClassVar[tuple[Wording, ...]] = ()
    # The runbook's sentences (verdicts, patch reasons, actions): templates whose {fields} detect() fills with what
    # it measured, through say(). A template keyed by a cause's slug is that cause's verdict. The fields are checked
    # when the class is defined and on every use, so the prose and the judgement cannot drift apart.
    templates: ClassVar[dict[str, str]] = {}
    # The settings the notebook shows with where each value came from (newest spelling; shown as the incident's).
    config_keys: ClassVar[tuple[str, ...]] = ()
    # What the judgement reads besides Flink's message: named when only the wording was found (an excerpt).
    collect_next: ClassVar[str] = "the JobManager and TaskManager logs of the failure episode and the Flink configuration"
    # 0: a root cause; 1: a wrapper that reports another fault (e.g. the tolerable-failure threshold);
    # 2: an umbrella outcome (e.g. restarts exhausted). The primary finding prefers the lowest layer.
    layer: ClassVar[int] = 0

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        for name, template in cls.templates.items():
            template_fields(f"{cls.__name__}.templates[{name!r}]", template)

    def detect(self, incident: Incident) -> list[Finding]:
        raise NotImplementedError

    def say(self, name: str, **facts) -> str:
        """The template ``name`` filled with ``facts``: exactly the fields it names, no more and no fewer."""
        try:
            template = self.templates[name]
        except KeyError:
            raise KeyError(f"{self.slug}: no template {name!r}") from None
        wanted = template_fields(f"{self.slug}/{name}", template)
        if wanted != facts.keys():
            missing, unused = sorted(wanted - facts.keys()), sorted(facts.keys() - wanted)
            raise ValueError(f"{self.slug}/{name}: " + "; ".join(
                part for part in (f"missing {', '.join(missing)}" if missing else "",
                                  f"not in the template: {', '.join(unused)}" if unused else "") if part))
        return template.format(**facts)

    # helpers for subclasses -------------------------------------------------------------------------------------

    def cause(self, slug: str) -> RootCause:
        for rc in self.root_causes:
            if rc.slug == slug:
                return rc
        raise KeyError(f"{self.slug}: undeclared root cause {slug!r}")

    def would_change(self, slug: str) -> str:
        """What would change the verdict ``slug``: its own declaration, else the evidence of the other causes."""
        rc = self.cause(slug)
        if rc.would_change:
            return rc.would_change
        others = [o for o in self.root_causes if o.slug != slug and o.evidence_hint and o.slug != "undetermined"]
        if not others:
            return ""
        return "Another cause would be named if the logs showed: " + "; or ".join(
            f"{o.evidence_hint.rstrip('.')} ({o.slug})" for o in others[:3]) + "."

    def check_declared(self, slug: str, patches: Iterable[Patch]) -> None:
        """Refuse a patch the cause does not declare: the decision table is generated from the declarations."""
        declared = [_declared_key(d) for d in self.cause(slug).patches]
        for p in patches:
            key = (p.target, keys.canonical(p.key) if p.target == "flink" else p.key)
            # "flink:taskmanager.memory.*" covers the memory model's derived changes, whose keys depend on the config
            if not any(t == key[0] and fnmatch.fnmatchcase(key[1], k) for t, k in declared):
                raise ValueError(f"{self.slug}/{slug}: patch {p.target}:{p.key} is not declared in its root cause")

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
        would_change: str = "",
    ) -> Finding:
        evs = list(events)
        notes = notes or {}
        evidence = [Evidence.of(ev, notes.get(i, ""), limit=EVIDENCE_TEXT_LIMIT)
                    for i, ev in enumerate(evs[:max_evidence])]
        rc = self.cause(cause)
        would_change = would_change or self.would_change(cause)
        details = dict(details or {})
        patches = list(patches)
        self.check_declared(cause, patches)
        if rc.next_evidence and rc.next_evidence not in summary:
            summary = f"{summary.rstrip()} Collect next: {rc.next_evidence}"
        return Finding(
            runbook=self.slug,
            title=self.title,
            root_cause=rc,
            summary=summary,
            confidence=confidence,
            evidence=evidence,
            patches=patches,
            severity=severity,
            first_seen=earliest_ts(evs),
            details=details,
            would_change=would_change,
        )

    @staticmethod
    def flink_patch(incident: Incident, key: str, proposed: str | None, reason: str) -> Patch:
        """A Flink config change with the incident's current value and where that value came from.

        The key is spelled for the incident's Flink version (an unknown version keeps the spelling the configuration
        already uses, else the one most releases understand), so JSON, tables and snippets never name a key the
        version ignores.
        """
        current = incident.config.lookup(key)
        return Patch(
            target="flink",
            key=version_key(incident, key),
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
    def ops_patch(key: str, reason: str, snippet: str | None = None, *, urgent: bool = True) -> Patch:
        """An operational action; ``urgent`` false for prevention, done once the incident is over."""
        return Patch(target="ops", key=key, proposed=None, reason=reason, snippet=snippet, urgent=urgent)


def template_fields(where: str, template: str) -> set[str]:
    """The fields a template names; each must be a plain name (``{count}``, ``{size:,}``), not an expression."""
    names = set()
    for _, field, _, _ in string.Formatter().parse(template):
        if field is None:
            continue
        if not field.isidentifier():
            raise ValueError(f"{where}: field {{{field}}} is not a plain name")
        names.add(field)
    return names


def signature(rx) -> str:
    """A compiled reading's pattern as a signature: its named groups made plain, because the pre-filter joins every
    signature into one expression (a group name may occur once) and the site runs them in the browser."""
    return re.sub(r"\(\?P<\w+>", "(?:", rx.pattern)


def version_key(incident: Incident, key: str) -> str:
    """``key`` as the incident's Flink version spells it."""
    version = incident.version_tuple
    if version is None:
        current = incident.config.lookup(key)
        if current is not None:
            return current.key
    return keys.name_for(key, version)


def _declared_key(declared: str) -> tuple[str, str]:
    target, _, key = declared.partition(":")
    return (target, keys.canonical(key) if target == "flink" else key)
