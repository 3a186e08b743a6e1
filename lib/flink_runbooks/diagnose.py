"""Run the detectors over an incident and decide which finding is the primary one."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

from flink_runbooks.detectors import Detector, all_detectors, get_detector
from flink_runbooks.model import Finding, Incident


@dataclass
class Diagnosis:
    incident: Incident
    findings: list[Finding] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # detectors that crashed (reported, never hidden)

    @property
    def primary(self) -> Finding | None:
        return next((f for f in self.findings if f.primary), None)


def run_detectors(incident: Incident, detectors: Sequence[Detector] | None = None) -> Diagnosis:
    detectors = list(detectors) if detectors is not None else all_detectors()
    diagnosis = Diagnosis(incident)
    for detector in detectors:
        try:
            diagnosis.findings.extend(detector.detect(incident))
        except Exception as exc:  # one broken detector must not hide the others' findings
            diagnosis.errors.append(f"detector {detector.slug} failed: {type(exc).__name__}: {exc}")
    diagnosis.findings = explained_away(diagnosis.findings)
    order_findings(diagnosis.findings)
    return diagnosis


# The finding for failures no catalogued runbook explains; it exists only when none does.
UNRECOGNISED = "unrecognised-failure"


def explained_away(findings: list[Finding]) -> list[Finding]:
    """Drop ``unrecognised-failure`` when a catalogued runbook reports a failure: that runbook explains it."""
    if any(f.runbook != UNRECOGNISED and f.severity == "failure" for f in findings):
        return [f for f in findings if f.runbook != UNRECOGNISED]
    return findings


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
