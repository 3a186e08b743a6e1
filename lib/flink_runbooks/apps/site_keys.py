"""The site's page of configuration keys: every key the runbooks may patch, per Flink release line, with
the spelling each release reads."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Sequence
from flink_runbooks.vocabulary import keys
from flink_runbooks.vocabulary.versions import release_text


@dataclass
class PatchedKey:
    target: str  # flink | kafka
    key: str  # the canonical (newest) name for Flink keys
    runbooks: set[str] = field(default_factory=set)



@dataclass
class KeyRow:
    key: str  # canonical name
    concept: str
    use: str | None  # the spelling this release line expects; None when it has no such option
    deprecated: list[str]  # older spellings it still accepts
    not_understood: list[tuple[str, str]]  # (spelling, why: "since 1.20" / "removed in 2.0")
    default: str | None
    note: str | None
    runbooks: list[str]


@dataclass
class ReleaseSection:
    label: str  # "1.13 – 1.16"
    anchor: str
    versions: list[keys.Version]  # the release lines of :func:`release_lines` it covers
    rows: list[KeyRow]


def release_lines() -> list[keys.Version]:
    """Release lines where some key spelling changes, plus the ones in production use (from keys.py)."""
    bounds = {kn.since for c in keys.CONCEPTS for kn in c.names if kn.since}
    bounds |= {kn.removed_in for c in keys.CONCEPTS for kn in c.names if kn.removed_in}
    bounds |= {removed for _, removed in keys.LEGACY_KEYS.values() if removed}
    lines = sorted(bounds | set(keys.KNOWN_RELEASES))
    first = lines[0]
    return [(first[0], first[1] - 1)] + lines if first[1] > 0 else lines


def _key_row(key: str, version: keys.Version, runbooks: Iterable[str]) -> KeyRow:
    concept = keys.concept_of(key)
    names = keys.aliases(key)
    use = keys.name_for(key, version)
    if not keys.is_valid_in(use, version):
        use = None
    not_understood = []
    for name in names:
        if keys.is_valid_in(name, version):
            continue
        removed = keys.removed_in(name)
        if removed and tuple(version[:2]) >= removed:
            not_understood.append((name, f"removed in {release_text(removed)}"))
        else:
            since = next((kn.since for kn in concept.names if kn.name == name), None) if concept else None
            not_understood.append((name, f"since {release_text(since)}" if since else "not in this release"))
    superseded = keys.superseded_by(key)
    return KeyRow(
        key=key,
        concept=concept.concept if concept else "",
        use=use,
        deprecated=[n for n in names if n != use and keys.is_valid_in(n, version)],
        not_understood=not_understood,
        default=concept.default if concept else None,
        note=f"superseded by {superseded}" if superseded else None,
        runbooks=sorted(runbooks),
    )


def key_sections(patched: Sequence[PatchedKey]) -> list[ReleaseSection]:
    """Per release line, the Flink keys the runbooks patch under the name that line expects.

    Adjacent release lines in which none of these keys changes its spelling share one section.
    """
    flink = [k for k in patched if k.target == "flink"]
    lines = release_lines()
    sections: list[tuple[list[keys.Version], list[KeyRow]]] = []
    for version in lines:
        rows = [_key_row(k.key, version, k.runbooks) for k in flink]
        if sections and sections[-1][1] == rows:
            sections[-1][0].append(version)
        else:
            sections.append(([version], rows))
    out = []
    for i, (versions, rows) in enumerate(sections):
        first, last = versions[0], versions[-1]
        if i + 1 < len(sections):
            following = sections[i + 1][0][0]
            if following[0] == last[0] and following[1] - 1 > last[1]:
                last = (following[0], following[1] - 1)
        if len(sections) == 1:
            label = "every release"
        elif i == len(sections) - 1:
            label = f"{release_text(first)} and later"
        elif i == 0 and first not in keys.KNOWN_RELEASES and first == lines[0]:
            label = f"{release_text(last)} and older" if first == last else f"up to {release_text(last)}"
        else:
            label = release_text(first) if first == last else f"{release_text(first)} – {release_text(last)}"
        out.append(ReleaseSection(label, "flink-" + release_text(first).replace(".", "-"), versions, rows))
    return out


def key_renames(patched: Sequence[PatchedKey]) -> list[dict]:
    """Every spelling of each patched Flink key that has more than one, with the releases that understand it."""
    out = []
    for k in patched:
        concept = keys.concept_of(k.key)
        if k.target != "flink" or concept is None or len(concept.names) < 2:
            continue
        out.append({"key": k.key, "concept": concept.concept,
                    "names": [{"name": kn.name,
                               "since": release_text(kn.since) if kn.since else None,
                               "removed_in": release_text(kn.removed_in) if kn.removed_in else None}
                              for kn in concept.names]})
    return out
