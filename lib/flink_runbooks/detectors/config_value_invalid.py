"""A configuration value the Flink release cannot parse, or a key it does not read (removed, renamed, misspelled, or
left in ``flink-conf.yaml`` on 2.x, which reads only ``config.yaml``).

Causes told apart (:mod:`~flink_runbooks.evidence.config_values`):
- ``value-format-for-version``: "Could not parse value 'X' for key 'Y'", with the deepest cause saying which format
  the release expects (a plain number of milliseconds where newer releases take "2 min", a duration or size in whole
  numbers with a known unit...). The patch writes the same value in that format for the incident's release.
- ``key-not-read``: a key the release no longer reads (removed in it, or renamed: keys.py), or a whole
  ``flink-conf.yaml`` on a 2.x cluster. Flink only logs the keys it loaded, so these settings silently keep defaults.
- ``misspelled-key``: a key no option of the release declares, one typo away from one that does (difflib over the
  release's own option keys, keys.py and the memory model's options).
Memory-model failures (sizes that do not add up) stay with ``tm-memory-misconfiguration``.
"""
from __future__ import annotations

import os

from flink_runbooks.detectors.base import Detector, version_key
from flink_runbooks.evidence.config_values import (COULD_NOT_PARSE, KeyProblem, ParseFailure, corrected_value,
                                                   key_problems, parse_failures, same_problem)
from flink_runbooks.evidence.episodes import is_excerpt
from flink_runbooks.model import Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording

_ANY_KEY = "flink:*"
_MOVE = "ops:move the settings into config.yaml"
_REWRITE = "ops:rewrite the removed setting"
_CHECK_TYPE = "ops:check the option's type for this release"

# Keys the memory model reads: a parse error there still names the value, but sizes that do not add up are
# tm-memory-misconfiguration's.
_MEMORY_PREFIXES = ("taskmanager.memory.", "jobmanager.memory.")


class ConfigValueInvalid(Detector):
    slug = "config-value-invalid"
    title = "Configuration value invalid, removed or misspelled"
    category = "dependencies"
    meaning = ("Flink could not parse a configuration value (the cluster or the job does not start), or a key is "
               "set that this release does not read (removed, renamed, misspelled, or in a file it ignores), so the "
               "option silently keeps its default.")
    versions = "1.10 – 2.x (config.yaml only since 2.0)"
    exception_classes = ("org.apache.flink.configuration.IllegalConfigurationException",
                         "java.lang.IllegalArgumentException")
    config_keys = (
        "heartbeat.timeout",
        "execution.checkpointing.interval",
        "execution.checkpointing.dir",
        "restart-strategy.type",
        "state.backend.type",
    )
    signatures = (
        r"Could not parse value '[^']*' for key '[^']+'",
        r"Time interval unit label '[^']*' does not match|Memory size unit '[^']*' does not match",
        r"Loading configuration property: ",
        r"Config uses deprecated configuration key '",
    )
    wordings = (
        Wording("config-value-invalid", r"Could not parse value '[^']*' for key '[^']+'", "1.10 – 2.x",
                "org.apache.flink.configuration.ConfigurationUtils (Configuration before 1.15)",
                "java.lang.IllegalArgumentException: Could not parse value '2 min' for key 'heartbeat.timeout'."),
    )
    root_causes = (
        RootCause("value-format-for-version", "The value is written in a format this Flink release cannot parse "
                  "(a unit where it reads plain milliseconds, a fraction where it takes whole numbers, an unknown "
                  "unit).", "'Could not parse value ... for key ...' with a deepest cause that says which format the "
                  "option takes.", patches=(_ANY_KEY, _CHECK_TYPE),
                  would_change="A deepest cause that does not say which format the option takes (undetermined)."),
        RootCause("key-not-read", "A key this release no longer reads: removed or renamed in it, or set in "
                  "flink-conf.yaml on a 2.x cluster, which reads only config.yaml. The option keeps its default.",
                  "The key (or file) is set, the incident's release does not declare it (its own option classes, "
                  "the renames across releases), or the file is flink-conf.yaml with Flink 2.x.",
                  patches=(_ANY_KEY, _MOVE, _REWRITE),
                  would_change="The key in the release's logged configuration with the value (it is read), or "
                               "another Flink version."),
        RootCause("misspelled-key", "A key no option of this release knows, one typo away from one that it does: "
                  "Flink loads and logs it, then nothing reads it.",
                  "A configured key that the release does not declare, within one or two characters of a declared "
                  "key.", patches=(_ANY_KEY,),
                  would_change="The key being a connector's, a plugin's or a reporter's own option."),
        RootCause("undetermined", "Flink rejected a configuration value, but the logs do not say which format the "
                  "option takes.", "'Could not parse value' without a deepest cause that names the format.",
                  patches=(_CHECK_TYPE,),
                  next_evidence="the complete stack trace under 'Could not parse value' (its deepest 'Caused by') and "
                                "the option's type in the configuration reference of this exact Flink version."),
    )

    templates = {
        "could not parse": "Flink {version} could not parse '{value}' for {key}: {detail}{same}.",
        "same value": "; the same value in its format is {key}: {fix}",
        "undetermined": " The logs do not say which format the option takes.",
        "same problem": "Flink stops at the first value it cannot read: {count} other key(s) this release reads the "
                        "same way are written the same way and would fail the next start: {keys}.",
        "same problem key": "{key}: {value} (in its format: {fix})",
        "same problem key without fix": "{key}: {value}",
        "reformat too": "'{value}' for {key} has the same problem ({detail}) and would be refused once {failed} is "
                        "fixed; {fix} is the same setting in the format Flink {version} reads.",
        "same problem note": "{key}: {value}, refused the same way once {failed} is fixed",
        "neither started": "Neither the JobManager nor the TaskManager started ({files}).",
        "taskmanager failed": "A TaskManager failed to start ({file}).",
        "jobmanager failed": "The JobManager failed to start or to run the job ({file}).",
        "client failed": "The client failed to submit the job ({file}).",
        "reported in": "Reported in {file}.",
        "reformat": "'{value}' is not a value Flink {version} reads for this option ({detail}); {fix} is the same "
                    "setting in the format it does read.",
        "check the option's type": "The configuration reference of this exact release gives each option's type "
                                   "(Duration, MemorySize, Integer, an enum's values); the deepest 'Caused by' under "
                                   "'Could not parse value' names the part it could not read.",
        "refusal": "Flink's refusal of '{value}' for '{key}'",
        "file not read": "Flink {version} reads only config.yaml, so the settings in {files} are ignored: {keys} "
                         "keep their defaults.",
        "renamed": "{key} ({where}) is not read by Flink {version}; it reads {replacement}.",
        "removed": "{key} ({where}) is not read by Flink {version}; this release has no option of that name, its "
                   "setting keeps the default.",
        "rewrite": "Flink {version} removed {key}; {replacement} replaces it with another shape of value (a list of "
                   "classes, each with its serializer), so the setting is rewritten, not renamed.",
        "rewrite snippet": "# config.yaml\n"
                           "{rewrite}",
        "use the new key": "{key} is not read by Flink {version}; {replacement} is.",
        "remove the old key": "Flink {version} ignores {key}: remove it so nobody relies on it.",
        "move the settings": "Flink 2.x reads only conf/config.yaml (standard YAML). Move each setting there (the "
                             "migration script bin/migrate-config-file.sh of 1.19/1.20 converts a whole file), then "
                             "delete flink-conf.yaml so nobody edits it again.",
        "move snippet": "# add to conf/config.yaml\n"
                        "{settings}",
        "not read": "in {where}: not read by Flink {version}",
        "misspelled-key": "{key} ({where}) is not an option of Flink {version}; it is one typo away from "
                          "{replacement}, which keeps its default while this key is loaded and never read.",
        "intended key": "The intended key: {key} is read by nothing.",
        "misspelled key": "The misspelled key: remove it.",
        "typo": "'{key}': no option of Flink {version} has this name (did you mean '{replacement}'?)",
    }

    def detect(self, incident: Incident) -> list[Finding]:
        failures = [f for f in parse_failures(incident)]
        findings: list[Finding] = []
        if failures:
            findings.append(self._parse_finding(incident, failures))
        problems = key_problems(incident)
        # A key Flink rejected is already reported by its parse failure.
        problems = [p for p in problems if p.key not in {f.key for f in failures}]
        if problems:
            findings.extend(self._key_findings(incident, problems))
        return findings

    # -- a value Flink could not parse ---------------------------------------------------------------------------

    def _parse_finding(self, incident: Incident, failures: list[ParseFailure]) -> Finding:
        first = failures[0]
        proposed = {f.key: corrected_value(f) for f in failures}
        decided = [f for f in failures if proposed[f.key] is not None]
        cause = "value-format-for-version" if decided or any(f.expects != "unknown" for f in failures) else "undetermined"
        version = incident.flink_version or "this release"
        parts = []
        for f in failures:
            key = version_key(incident, f.key)
            fix = proposed[f.key]
            parts.append(self.say("could not parse", version=version, value=f.value, key=key, detail=f.detail,
                                  same=self.say("same value", key=key, fix=fix) if fix else ""))
        failed = {f.key for f in failures}
        siblings: list[tuple[ParseFailure, ParseFailure]] = []  # (a key with the same problem, the refusal it shares)
        for f in failures:
            for other in same_problem(incident, f):
                if other.key not in failed and all(other.key != s.key for s, _f in siblings):
                    siblings.append((other, f))
        sibling_fix = {s.key: corrected_value(s) for s, _f in siblings}
        if siblings:
            parts.append(self.say("same problem", count=len(siblings), keys="; ".join(
                self.say("same problem key", key=version_key(incident, s.key), value=s.value, fix=sibling_fix[s.key])
                if sibling_fix[s.key] else
                self.say("same problem key without fix", key=version_key(incident, s.key), value=s.value)
                for s, _f in siblings)))
        where = self._where(first)
        summary = " ".join(parts + [where])
        if cause == "undetermined":
            summary += self.say(cause)
        patches = []
        for f in failures:
            fix = proposed[f.key]
            if fix is not None:
                patches.append(self.flink_patch(incident, f.key, fix, self.say(
                    "reformat", value=f.value, version=version, detail=f.detail, fix=fix)))
        for s, f in siblings:
            if sibling_fix[s.key] is not None:
                patches.append(self.flink_patch(incident, s.key, sibling_fix[s.key], self.say(
                    "reformat too", value=s.value, key=version_key(incident, s.key), detail=s.detail,
                    failed=version_key(incident, f.key), fix=sibling_fix[s.key], version=version)))
        if cause == "undetermined" or len(patches) < len(failures):
            patches.append(self.ops_patch(
                "check the option's type for this release", self.say("check the option's type"),
                snippet="grep -n -A20 \"Could not parse value\" log/*.log cli/*.out | grep 'Caused by'"))
        details = {
            "keys": {version_key(incident, f.key): {"value": f.value, "expects": f.expects, "proposed": proposed[f.key]}
                     for f in failures},
            "where_it_failed": where,
        }
        if siblings:
            details["same_problem_keys"] = {version_key(incident, s.key): {"value": s.value,
                                                                          "proposed": sibling_fix[s.key]}
                                            for s, _f in siblings}
        evidence = [f.event for f in failures] + [s.event for s, _f in siblings]
        notes = {i: self.say("refusal", value=f.value, key=f.key) for i, f in enumerate(failures)}
        notes.update({len(failures) + i: self.say("same problem note", key=s.key, value=s.value,
                                                  failed=version_key(incident, f.key))
                      for i, (s, f) in enumerate(siblings)})
        confidence = 0.9 if cause != "undetermined" else 0.5
        if is_excerpt(incident):
            confidence = min(confidence, 0.75)
        return self.finding(cause, summary, evidence, confidence=confidence, patches=patches, notes=notes,
                            details=details)

    def _where(self, failure: ParseFailure) -> str:
        """Which process the refusal stopped, from the file (or role) it was logged in."""
        ev = failure.event
        name = os.path.basename(ev.file)
        names = failure.files or {name}
        if (any("taskexecutor" in n for n in names)
                and any("standalonesession" in n or "jobmanager" in n for n in names)):
            return self.say("neither started", files=", ".join(sorted(names)))
        if "taskexecutor" in name or ev.role == "taskmanager":
            return self.say("taskmanager failed", file=name)
        if "standalonesession" in name or "jobmanager" in name or ev.role == "jobmanager":
            return self.say("jobmanager failed", file=name)
        if name.endswith(".out") or "client" in name or ev.role == "client":
            return self.say("client failed", file=name)
        return self.say("reported in", file=name)

    # -- keys the release does not read --------------------------------------------------------------------------

    def _key_findings(self, incident: Incident, problems: list[KeyProblem]) -> list[Finding]:
        out = []
        version = incident.flink_version or "this release"
        not_read = sorted((p for p in problems if p.kind in ("removed", "file-not-read")),
                          key=lambda p: (p.event.file, p.event.line))
        typos = [p for p in problems if p.kind == "misspelled"]
        if not_read:
            files = sorted({p.where.split(":")[0] for p in not_read if p.kind == "file-not-read"})
            parts = []
            if files:
                parts.append(self.say("file not read", version=version, files=", ".join(files),
                                      keys=", ".join(p.key for p in not_read if p.kind == "file-not-read")))
            removed = [p for p in not_read if p.kind == "removed"]
            for p in removed:
                if p.replacement:
                    parts.append(self.say("renamed", key=p.key, where=p.where, version=version,
                                          replacement=p.replacement))
                else:
                    parts.append(self.say("removed", key=p.key, where=p.where, version=version))
            patches = []
            for p in not_read:
                if p.kind == "file-not-read":
                    continue
                if p.rewrite:
                    patches.append(self.ops_patch(
                        "rewrite the removed setting",
                        self.say("rewrite", version=version, key=p.key, replacement=p.replacement),
                        snippet=self.say("rewrite snippet", rewrite=p.rewrite)))
                elif p.replacement:
                    patches.append(self.flink_patch(incident, p.replacement, p.value, self.say(
                        "use the new key", key=p.key, version=version, replacement=p.replacement)))
                patches.append(self.flink_patch(incident, p.key, None,
                                                self.say("remove the old key", version=version, key=p.key)))
            if files:
                moved = "\n".join(f"{p.key}: {p.value}" for p in not_read if p.kind == "file-not-read")
                patches.append(self.ops_patch(
                    "move the settings into config.yaml", self.say("move the settings"),
                    snippet=self.say("move snippet", settings=moved)))
            out.append(self.finding(
                "key-not-read", " ".join(parts), [p.event for p in not_read],
                notes={i: self.say("not read", where=p.where, version=version) for i, p in enumerate(not_read)},
                confidence=0.85 if incident.flink_version else 0.6, patches=patches, severity="warning",
                details={"keys_not_read": {p.key: {"value": p.value, "where": p.where,
                                                   "reads_instead": p.replacement or "nothing"} for p in not_read}}))
        if typos:
            parts = [self.say("misspelled-key", key=p.key, where=p.where, version=version, replacement=p.replacement)
                     for p in typos]
            patches = []
            for p in typos:
                patches.append(self.flink_patch(incident, p.replacement, p.value,
                                                self.say("intended key", key=p.key)))
                patches.append(self.flink_patch(incident, p.key, None, self.say("misspelled key")))
            out.append(self.finding(
                "misspelled-key", " ".join(parts), [p.event for p in typos],
                notes={i: self.say("typo", key=p.key, version=version, replacement=p.replacement)
                       for i, p in enumerate(typos)},
                confidence=0.8, patches=patches, severity="warning",
                details={"misspelled_keys": {p.key: {"value": p.value, "where": p.where, "meant": p.replacement}
                                             for p in typos}}))
        return out


__all__ = ["ConfigValueInvalid", "COULD_NOT_PARSE"]
