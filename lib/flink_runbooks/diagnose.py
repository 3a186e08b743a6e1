"""Run the detectors over an incident and decide which finding is the primary one."""
from __future__ import annotations

from typing import Sequence

from flink_runbooks.evidence.episodes import with_failure_labels
from flink_runbooks.detectors import Detector, all_detectors, all_wordings, get_detector, prefilter, slugs
from flink_runbooks.model import Diagnosis, Evidence, Finding, Incident, RootCause, earliest_ts


def ingest(paths: Sequence[str], spark=None, **options) -> Incident:
    """Read an incident for the catalogue: :func:`flink_runbooks.collect.ingest.ingest` keeping every line the
    runbooks' declarations ask for (signatures, Flink's wordings, stack frames)."""
    from flink_runbooks.collect import ingest as collect

    return collect.ingest(paths, spark, prefilter=prefilter(), **options)


def run_detectors(incident: Incident, detectors: Sequence[Detector] | None = None) -> Diagnosis:
    detectors = list(detectors) if detectors is not None else all_detectors()
    diagnosis = Diagnosis(incident)
    for detector in detectors:
        try:
            diagnosis.findings.extend(detector.detect(incident))
        except Exception as exc:  # one broken detector must not hide the others' findings
            diagnosis.errors.append(f"detector {detector.slug} failed: {type(exc).__name__}: {exc}")
    diagnosis.findings = recognised_by_wording(incident, explained_away(diagnosis.findings))
    with_failure_labels(incident, diagnosis.findings)
    cap_without_time(incident, diagnosis.findings)
    order_findings(diagnosis.findings)
    return diagnosis


# The finding for failures no catalogued runbook explains; it exists only when none does.
UNRECOGNISED = "unrecognised-failure"


def explained_away(findings: list[Finding]) -> list[Finding]:
    """Drop ``unrecognised-failure`` when a catalogued runbook reports a failure: that runbook explains it."""
    if any(f.runbook != UNRECOGNISED and f.severity == "failure" for f in findings):
        return [f for f in findings if f.runbook != UNRECOGNISED]
    # A catalogued warning that names the very fault (e.g. a job's own exception it recovered from) explains it too.
    named = {(e.file, e.line) for f in findings if f.runbook != UNRECOGNISED for e in f.evidence}
    return [f for f in findings
            if f.runbook != UNRECOGNISED or not f.evidence or (f.evidence[0].file, f.evidence[0].line) not in named]


def _layer(finding: Finding) -> int:
    try:
        return get_detector(finding.runbook).layer
    except KeyError:
        return 0


def order_findings(findings: list[Finding]) -> None:
    """Mark the primary finding and sort: primary first, then by time.

    The primary is the first fault of the episode: findings that explain a failure beat warnings; among those,
    root causes beat wrappers (the tolerable-failure threshold) and umbrella outcomes (restarts exhausted); ties
    go to the earliest evidence, then to the more confident finding. ``unrecognised-failure`` comes last.
    """
    if not findings:
        return
    for f in findings:
        f.primary = False

    def rank(f: Finding):
        # A catalogued finding always outranks the one that only says the failure is outside the catalogue.
        return (f.runbook == UNRECOGNISED, 0 if f.severity == "failure" else 1, _layer(f), f.first_seen or "~",
                -f.confidence)

    findings.sort(key=rank)
    findings[0].primary = True


def recognised_by_wording(incident: Incident, findings: list[Finding]) -> list[Finding]:
    """Turn ``unrecognised-failure`` into a low-confidence finding of the catalogued runbook whose Flink wording
    (:mod:`~flink_runbooks.vocabulary.wordings`) the first fault holds, when that runbook's own judgement could not
    decide from what the logs show (an excerpt without the timeline, a count of failures, the configuration)."""
    from flink_runbooks.evidence.episodes import failure_events, first_fault, is_excerpt
    from flink_runbooks.vocabulary.wordings import recognise

    unrecognised = next((f for f in findings if f.runbook == UNRECOGNISED), None)
    if unrecognised is None:
        return _excerpt_wordings(incident, findings) if is_excerpt(incident) else findings
    first = first_fault(incident)
    events = ([first] if first is not None else []) + [ev for ev in failure_events(incident) if ev is not first]
    for ev in events:
        # The deepest cause first: the wording nearest the origin names the failure, wrappers only carry it.
        texts = [f"{c.cls}: {c.message}" for c in reversed(ev.chain) if c.kind != "suppressed"] + [ev.message]
        for text in texts:
            found = [w for w in recognise(text, all_wordings()) if w.runbook in slugs()
                     and (w.runbook != "restart-strategy-exhausted" or text == texts[-1])]
            if found:
                wording = found[0]
                return [f for f in findings if f is not unrecognised] + [_wording_finding(incident, ev, wording, text)]
    return findings


def _wording_finding(incident: Incident, event, wording, text: str) -> Finding:
    detector = get_detector(wording.runbook)
    declared = next((rc for rc in detector.root_causes if rc.slug == "undetermined"), None)
    needs = detector.collect_next
    cause = declared or RootCause("undetermined", "Recognised from Flink's own message; the logs lack what tells "
                                                  "this runbook's causes apart.", next_evidence=needs)
    summary = (f"The logs hold Flink's own message for this failure ({text[:240].rstrip('.')}; "
               f"{wording.source}, Flink {wording.versions}), but not what this runbook reads to name a root cause: "
               f"{needs}. Reported at low confidence until that is collected.")
    return Finding(
        runbook=detector.slug, title=detector.title, root_cause=cause, summary=summary, confidence=0.35,
        evidence=[Evidence.of(event, f"Flink's wording ({wording.versions}): {wording.pattern[:80]}")],
        severity="failure", first_seen=earliest_ts([event]),
        details={"recognised_by": wording.source, "flink_versions": wording.versions, "unknown": needs},
    )


def _excerpt_wordings(incident: Incident, findings: list[Finding]) -> list[Finding]:
    """In an excerpt, Flink's wording of a catalogued failure whose runbook stayed silent (its judgement needs what
    the excerpt lacks: a timeline, a count of failures, the configuration) still gives that runbook's finding, at
    low confidence and saying what is unknown, rather than nothing."""
    from flink_runbooks.vocabulary.wordings import recognise

    have = {f.runbook for f in findings}
    known = set(slugs())
    added: dict[str, Finding] = {}
    for ev in incident.events:
        if ev.level not in (None, "ERROR", "FATAL") and not (ev.logger or "").startswith("org.apache.flink."):
            continue  # an application's warning that quotes an error is not that error
        texts = [f"{c.cls}: {c.message}" for c in reversed(ev.chain) if c.kind != "suppressed"] + [ev.message, *ev.body]
        for text in texts:
            for wording in recognise(text, all_wordings()):
                if wording.runbook in known and wording.runbook not in have and wording.runbook not in added:
                    added[wording.runbook] = _wording_finding(incident, ev, wording, text)
    return findings + list(added.values())


def cap_without_time(incident: Incident, findings: list[Finding]) -> None:
    """Logs without any time stamp cannot order events across files or measure how long anything took: every
    judgement that rests on a timeline is weaker, so no finding claims more than :data:`UNTIMED_CONFIDENCE`."""
    if not incident.events or any(ev.ts for ev in incident.events):
        return
    for f in findings:
        if f.confidence > UNTIMED_CONFIDENCE:
            f.confidence = UNTIMED_CONFIDENCE
            f.summary = (f"{f.summary.rstrip()} (These logs carry no time stamps: the order of events across files "
                         f"and any duration are unknown, so the confidence is capped.)")


UNTIMED_CONFIDENCE = 0.7
