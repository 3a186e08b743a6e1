"""The published runbook site: every runbook executed against its example incident, as static HTML.

:func:`build_site` runs four steps, each its own function:

1. **Collect** (:func:`collect_runbooks`): which runbooks there are (a detector plus ``runbooks/<slug>.ipynb``), their
   metadata from the detector and the notebook's default incident.
2. **Execute** (:func:`read_examples`, :func:`execute_runbook`): the example incidents are read once, as
   ``flink-runbooks diagnose`` reads them, and saved; papermill runs each notebook, ``jobs`` at a time, on its saved incident
   (kernel ``flink-runbooks``, cwd the repository root), so no kernel starts Spark. The detectors declare which
   configuration keys each runbook may patch (:func:`patched_keys`).
3. **Export** (:func:`browser_signatures`, :func:`search_documents`): the detectors' signatures converted to
   JavaScript regexes for the "paste a stack trace" page, and the client-side search index.
4. **Render** (:func:`render_site`): nbconvert with the project template (``site_templates/runbook``) turns all
   executed notebooks into pages in one exporter, Jinja renders the index, the config-key and the stack-trace
   pages; every page passes :func:`~flink_runbooks.parse.redact.redact_text` (:func:`redact_html`), every exported
   string too; internal links are checked.

The site uses relative links only and loads nothing from the network, so any static host (or the file system)
serves it.
"""
from __future__ import annotations

import ast
import concurrent.futures
import datetime as _dt
import html.parser
import json
import os
import pathlib
import re
import shutil
import sys
import tempfile
import time
import urllib.parse
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

from flink_runbooks.parse import keys
from flink_runbooks.model import Finding
from flink_runbooks.notebook import PROJECT_ROOT
from flink_runbooks.parse.redact import redact_text
from flink_runbooks.render.decision_table import decision_table_html
from flink_runbooks.apps.notebook_runner import HIDDEN_INPUT_TAGS, run_notebook
from flink_runbooks import catalogue
from flink_runbooks.catalogue import CATEGORIES, category_label, category_rank

PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
TEMPLATES = PACKAGE_DIR / "site_templates"
STATIC = PACKAGE_DIR / "site_static"
RUNBOOK_TEMPLATE = "runbook"

# How much one matched pattern counts on the stack-trace page before it is shared out among the runbooks that
# declare it: frames only locate a failure, signatures and exception classes name it.
PATTERN_WEIGHT = {"signature": 1.0, "exception": 1.0, "frame": 0.5}
SITE_MARKER = ".flink-runbooks-site"

Say = Callable[[str], None]


class SiteError(Exception):
    """The site cannot be built as asked (unknown runbook, unusable output directory); one line for the user."""


# ================================================================================================== collect


@dataclass(frozen=True)
class Runbook(catalogue.Runbook):
    """One runbook of the site: the catalogue's runbook with its notebook's default example incident."""

    incident_paths: tuple[str, ...] = ()  # the notebook's default incident_paths
    incident: dict = field(default_factory=dict, compare=False)  # that incident's expected.json, when it has one

    @property
    def repo_path(self) -> str:
        """The notebook, relative to the repository root."""
        return self.notebook.relative_to(self.root).as_posix()

    @property
    def page(self) -> str:
        return f"runbooks/{self.slug}.html"

    @property
    def notebook_copy(self) -> str:
        return f"notebooks/{self.slug}.ipynb"

    @property
    def exceptions(self) -> list[tuple[str, str]]:
        """(simple name, fully qualified names) of the exception classes the runbook is about."""
        names: dict[str, list[str]] = {}
        for cls in self.detector.exception_classes:
            names.setdefault(cls.rsplit(".", 1)[-1], []).append(cls)
        return [(simple, ", ".join(full)) for simple, full in names.items()]

    @property
    def first_signature(self) -> str:
        return self.detector.signatures[0] if self.detector.signatures else ""


def collect_runbooks(root: str | os.PathLike | None = None,
                     slugs: Sequence[str] | None = None) -> tuple[list[Runbook], list[str]]:
    """The runbooks to publish and, for those left out, why.

    A runbook needs both a registered detector and ``runbooks/<slug>.ipynb``. Asking for a slug that lacks either
    is an error; without ``slugs`` every complete runbook is taken and incomplete ones are reported as skipped.
    """
    import papermill

    base = (pathlib.Path(root) if root else PROJECT_ROOT).resolve()
    entries = {r.slug: r for r in catalogue.runbooks(base)}
    complete = [s for s, r in entries.items() if r.notebook.exists()]
    skipped: list[str] = []
    if slugs:
        wanted = list(dict.fromkeys(slugs))
        missing = [s for s in wanted if s not in complete]
        if missing:
            raise SiteError(f"no runbook {', '.join(missing)}: a runbook needs a detector and runbooks/<slug>.ipynb "
                            f"(complete runbooks: {', '.join(complete) or 'none'})")
    else:
        wanted = complete
        skipped += [f"{s}: detector without runbooks/{s}.ipynb" for s in entries if s not in complete]
        skipped += [f"{p.stem}: runbooks/{p.name} without a detector" for p in catalogue.orphan_notebooks(base)]
    found = []
    for slug in wanted:
        entry = entries[slug]
        default = papermill.inspect_notebook(str(entry.notebook)).get("incident_paths", {}).get("default")
        try:
            value = ast.literal_eval(default) if default else ()
        except (ValueError, SyntaxError):
            raise SiteError(f"runbooks/{slug}.ipynb: incident_paths default {default!r} is not a literal") from None
        paths = (value,) if isinstance(value, str) else tuple(value)
        found.append(Runbook(entry.detector, base, paths, _expected(base, paths)))
    return sorted(found, key=lambda r: (category_rank(r.category), r.title.lower())), skipped


def _expected(base: pathlib.Path, paths: Sequence[str]) -> dict:
    if len(paths) != 1:
        return {}
    expected = base / paths[0] / "expected.json"
    try:
        return json.loads(expected.read_text())
    except (OSError, ValueError):
        return {}


# ================================================================================================== execute


@dataclass
class Execution:
    slug: str
    status: str = "pending"  # ok | failed
    duration_s: float = 0.0
    error: str | None = None  # the failing cell and its message
    executed: pathlib.Path | None = None


def execute_runbook(runbook: Runbook, workdir: pathlib.Path, root: pathlib.Path, timeout_s: float,
                    incident_cache: pathlib.Path | None = None) -> Execution:
    """Run the notebook with its default parameters; a failing cell is reported, its partial output kept.

    With ``incident_cache`` (the example incident already read by :func:`read_examples`) the kernel loads the
    structured incident instead of starting Spark and reading the logs again."""
    run = run_notebook(runbook.notebook, workdir / f"{runbook.slug}.ipynb", cwd=root, timeout_s=timeout_s,
                       parameters={"incident_cache": str(incident_cache)} if incident_cache else {})
    return Execution(runbook.slug, "ok" if run.status == "ok" else "failed", round(run.duration_s, 1), run.error,
                     run.executed)


@dataclass
class PatchedKey:
    target: str  # flink | kafka
    key: str  # the canonical (newest) name for Flink keys
    runbooks: set[str] = field(default_factory=set)


def read_examples(runbooks: Sequence[Runbook], root: pathlib.Path, workdir: pathlib.Path, *, spark=None,
                  say: Say = lambda _m: None) -> Iterator[tuple[Runbook, pathlib.Path | None, list[Finding], str | None]]:
    """Read every runbook's example incident once and save it for its notebook.

    The reading is ``flink-runbooks diagnose``'s: in ``spark`` when given, else small local incidents in this
    process and the rest in one Spark session. Yields (runbook, saved incident or None, findings, error) as each
    is read, so the notebooks can start while the next incident is being read.
    """
    from flink_runbooks.collect.ingest import ingest
    from flink_runbooks.collect.store import save_incident
    from flink_runbooks.diagnose import run_detectors

    for runbook in runbooks:
        paths = [p if "://" in p or os.path.isabs(p) else str(root / p) for p in runbook.incident_paths]
        try:
            incident = ingest(paths, spark)
        except Exception as exc:
            yield runbook, None, [], f"{type(exc).__name__}: {exc}"
            continue
        saved = save_incident(incident, workdir / "incidents" / runbook.slug)
        say(f"example of {runbook.slug} read")
        yield runbook, saved, run_detectors(incident).findings, None


def patched_keys(runbooks: Sequence[Runbook], findings: Iterable[Finding]) -> list[PatchedKey]:
    """The Flink keys and Kafka properties the runbooks may propose, with the runbooks that do: every key their causes
    declare, and for declared patterns (``taskmanager.memory.*``) the keys their example incidents' findings propose."""
    found: dict[tuple[str, str], PatchedKey] = {}

    def add(target: str, key: str, slug: str) -> None:
        key = keys.canonical(key) if target == "flink" else key
        found.setdefault((target, key), PatchedKey(target, key)).runbooks.add(slug)

    published = {r.slug for r in runbooks}
    for runbook in runbooks:
        for target, key in runbook.patched_keys:
            if not any(c in key for c in "*?["):
                add(target, key, runbook.slug)
    for finding in findings:
        for patch in finding.patches:
            if finding.runbook in published and patch.target in ("flink", "kafka"):
                add(patch.target, patch.key, finding.runbook)
    return sorted(found.values(), key=lambda k: (k.target, k.key))


# ================================================================================================== config keys


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


def _fmt_version(v: keys.Version) -> str:
    return ".".join(str(x) for x in v)


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
            not_understood.append((name, f"removed in {_fmt_version(removed)}"))
        else:
            since = next((kn.since for kn in concept.names if kn.name == name), None) if concept else None
            not_understood.append((name, f"since {_fmt_version(since)}" if since else "not in this release"))
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
            label = f"{_fmt_version(first)} and later"
        elif i == 0 and first not in keys.KNOWN_RELEASES and first == lines[0]:
            label = f"{_fmt_version(last)} and older" if first == last else f"up to {_fmt_version(last)}"
        else:
            label = _fmt_version(first) if first == last else f"{_fmt_version(first)} – {_fmt_version(last)}"
        out.append(ReleaseSection(label, "flink-" + _fmt_version(first).replace(".", "-"), versions, rows))
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
                               "since": _fmt_version(kn.since) if kn.since else None,
                               "removed_in": _fmt_version(kn.removed_in) if kn.removed_in else None}
                              for kn in concept.names]})
    return out


# ================================================================================================== export


class UnsupportedRegex(ValueError):
    """A signature uses syntax that has no JavaScript equivalent here."""


_POSIX_CLASSES = {
    "Lower": "a-z", "Upper": "A-Z", "ASCII": "\\x00-\\x7F", "Alpha": "a-zA-Z", "Digit": "0-9", "Alnum": "a-zA-Z0-9",
    "Punct": "!-\\/:-@\\[-`{-~", "Graph": "!-~", "Print": " -~", "Blank": " \\t", "Cntrl": "\\x00-\\x1F\\x7F",
    "XDigit": "0-9a-fA-F", "Space": " \\t\\n\\x0B\\f\\r",
}
_HORIZONTAL_SPACE = " \\t\\xA0\\u1680\\u180E\\u2000-\\u200A\\u202F\\u205F\\u3000"
_GLOBAL_FLAGS = re.compile(r"^\(\?([imsx]+)\)")


def to_js_regex(pattern: str) -> tuple[str, str]:
    """A signature (the regex syntax Java and Python share) as a JavaScript ``(source, flags)`` pair.

    Converted: leading ``(?i)``/``(?s)``/``(?m)`` to flags, scoped ``(?i:…)`` by spelling both cases out (older
    browsers lack regex modifiers), ``\\A``/``\\Z``/``\\z``, ``\\Q…\\E``, ``\\h``/``\\H``, POSIX ``\\p{Alpha}``
    classes and ``\\e``/``\\a``. Syntax that would change meaning (possessive quantifiers, atomic groups, class
    intersections, inline flags mid-pattern, Python-only groups) raises :class:`UnsupportedRegex`.
    """
    flags = ""
    m = _GLOBAL_FLAGS.match(pattern)
    if m:
        if "x" in m.group(1):
            raise UnsupportedRegex(f"{pattern!r}: verbose mode (?x)")
        flags = "".join(sorted(set(m.group(1))))
        pattern = pattern[m.end():]
    out: list[str] = []
    fold: list[bool] = []  # per open group: does it fold case?
    i, n = 0, len(pattern)

    def folding() -> bool:
        return any(fold)

    def literal(ch: str) -> str:
        if folding() and ch.isalpha() and ch.lower() != ch.upper():
            return f"[{ch.lower()}{ch.upper()}]"
        return ch

    while i < n:
        c = pattern[i]
        if c == "\\":
            if i + 1 >= n:
                raise UnsupportedRegex(f"{pattern!r}: trailing backslash")
            e = pattern[i + 1]
            if e == "Q":
                end = pattern.find("\\E", i + 2)
                text = pattern[i + 2:] if end < 0 else pattern[i + 2:end]
                out.append("".join(literal(ch) if ch.isalnum() else re.escape(ch) if not ch.isspace() else ch
                                   for ch in text))
                i = n if end < 0 else end + 2
                continue
            if e in "pP" and pattern.startswith("{", i + 2):
                end = pattern.index("}", i + 2)
                name = pattern[i + 3:end].removeprefix("Is")
                if name not in _POSIX_CLASSES:
                    raise UnsupportedRegex(f"{pattern!r}: \\{e}{{{name}}}")
                out.append(("[^" if e == "P" else "[") + _POSIX_CLASSES[name] + "]")
                i = end + 1
                continue
            simple = {"A": "^", "Z": "$", "z": "$", "h": f"[{_HORIZONTAL_SPACE}]", "H": f"[^{_HORIZONTAL_SPACE}]",
                      "e": "\\x1B", "a": "\\x07"}
            if e in simple:
                out.append(simple[e])
            elif e == "x" and pattern.startswith("{", i + 2) or e in "GRXK":
                raise UnsupportedRegex(f"{pattern!r}: \\{e}")
            else:
                out.append("\\" + e)
            i += 2
            continue
        if c == "[":
            end, cls = _char_class(pattern, i, folding())
            out.append(cls)
            i = end
            continue
        if c == "(":
            if pattern.startswith("(?", i):
                rest = pattern[i + 2:]
                if rest.startswith(("P<", "P=", "P>")):
                    raise UnsupportedRegex(f"{pattern!r}: Python-only group (?P")
                if rest.startswith(">"):
                    raise UnsupportedRegex(f"{pattern!r}: atomic group (?>")
                scoped = re.match(r"([a-zA-Z-]+)([:)])", rest)
                if scoped:
                    if scoped.group(2) == ")" or scoped.group(1) != "i":
                        raise UnsupportedRegex(f"{pattern!r}: inline flags (?{scoped.group(1)}{scoped.group(2)}")
                    fold.append(True)
                    out.append("(?:")
                    i += 2 + len(scoped.group(0))
                    continue
            fold.append(False)
            out.append(c)
            i += 1
            continue
        if c == ")":
            if fold:
                fold.pop()
            out.append(c)
            i += 1
            continue
        if c in "*+?}" and i + 1 < n and pattern[i + 1] == "+":
            raise UnsupportedRegex(f"{pattern!r}: possessive quantifier {c}+")
        out.append(literal(c) if c.isalpha() else c)
        i += 1
    return "".join(out), flags


def _char_class(pattern: str, start: int, fold: bool) -> tuple[int, str]:
    """Copy the character class at ``start``; returns the index after it and its JavaScript spelling."""
    i = start + 1
    out = ["["]
    if i < len(pattern) and pattern[i] == "^":
        out.append("^")
        i += 1
    if i < len(pattern) and pattern[i] == "]":  # a leading ] is literal in Java and Python
        out.append("\\]")
        i += 1
    items: list[str] = []
    while i < len(pattern) and pattern[i] != "]":
        c = pattern[i]
        if c == "[":
            raise UnsupportedRegex(f"{pattern!r}: nested character class (Java union)")
        if pattern.startswith("&&", i):
            raise UnsupportedRegex(f"{pattern!r}: character class intersection &&")
        if c == "\\":
            e = pattern[i + 1]
            if e in "pP" and pattern.startswith("{", i + 2):
                end = pattern.index("}", i + 2)
                name = pattern[i + 3:end].removeprefix("Is")
                if e == "P" or name not in _POSIX_CLASSES:
                    raise UnsupportedRegex(f"{pattern!r}: \\{e}{{{name}}} inside a class")
                items.append(_POSIX_CLASSES[name])
                i = end + 1
                continue
            if e in "hH":
                if e == "H":
                    raise UnsupportedRegex(f"{pattern!r}: \\H inside a class")
                items.append(_HORIZONTAL_SPACE)
            elif e == "e":
                items.append("\\x1B")
            else:
                items.append("\\" + e)
            i += 2
            continue
        if i + 2 < len(pattern) and pattern[i + 1] == "-" and pattern[i + 2] != "]":
            lo, hi = c, pattern[i + 2]
            items.append(f"{lo}-{hi}")
            if fold and lo.isalpha() and hi.isalpha() and lo.islower() == hi.islower():
                other = (lo.upper(), hi.upper()) if lo.islower() else (lo.lower(), hi.lower())
                items.append(f"{other[0]}-{other[1]}")
            i += 3
            continue
        items.append(c)
        if fold and c.isalpha() and c.lower() != c.upper():
            items.append(c.swapcase())
        i += 1
    if i >= len(pattern):
        raise UnsupportedRegex(f"{pattern!r}: unterminated character class")
    return i + 1, "".join(out) + "".join(items) + "]"


def exception_regex(cls: str) -> str:
    """Where an exception class shows in a log: its full name anywhere, or its simple name as an exception line
    (``RocksDBException: …``, ``Caused by: RocksDBException``), never inside another identifier."""
    simple = cls.rsplit(".", 1)[-1]
    return rf"(?<![\w$.])(?:{re.escape(cls)}(?![\w$])|{re.escape(simple)}(?=:|\s*$))"


def browser_signatures(runbooks: Sequence[Runbook]) -> dict:
    """What the stack-trace page matches: each runbook's signatures, frames and exception classes as JS regexes.

    A pattern's weight is its kind's weight shared out among the runbooks that declare the same pattern, so a line
    every checkpoint runbook looks at counts little and a runbook's own wording counts fully.
    """
    declared: list[tuple[Runbook, str, str]] = []
    for rb in runbooks:
        d = rb.detector
        declared += [(rb, "signature", s) for s in dict.fromkeys(d.signatures)]
        declared += [(rb, "frame", s) for s in dict.fromkeys(d.frames)]
        declared += [(rb, "exception", c) for c in dict.fromkeys(d.exception_classes)]
    sharing: dict[tuple[str, str], int] = {}
    for _rb, kind, value in declared:
        sharing[(kind, value)] = sharing.get((kind, value), 0) + 1
    entries: dict[str, dict] = {}
    for rb, kind, value in declared:
        entry = entries.setdefault(rb.slug, {"slug": rb.slug, "title": rb.title, "url": rb.page,
                                             "category": rb.category, "versions": rb.detector.versions,
                                             "patterns": []})
        python = exception_regex(value) if kind == "exception" else value
        try:
            js, flags = to_js_regex(python)
        except UnsupportedRegex as exc:
            raise SiteError(f"{rb.slug}: {kind} {exc} cannot run in the browser") from None
        entry["patterns"].append({
            "kind": kind,
            "source": value,
            "python": python,
            "js": js,
            "flags": flags,
            "shared_by": sharing[(kind, value)],
            "weight": round(PATTERN_WEIGHT[kind] / sharing[(kind, value)], 4),
        })
    return {"format": 1, "frame_line": r"^\s*at ", "runbooks": list(entries.values())}


_CHAR_CLASS = re.compile(r"\[(\^?)((?:\\.|[^\]\\])*)\]")


def signature_text(signature: str) -> str:
    """The words of a signature without its regex syntax, for full-text search (``[Ww]hile link file to`` →
    ``While link file to``)."""
    def char_class(m: re.Match[str]) -> str:
        inner = m.group(2)
        return inner[0] if not m.group(1) and inner.isalpha() and len(set(inner.lower())) == 1 else " "

    text = _CHAR_CLASS.sub(char_class, signature)
    text = re.sub(r"\\[A-Za-z]", " ", text)
    text = re.sub(r"\\(.)", r"\1", text)
    text = re.sub(r"\(\?(?:<?[=!]|:)?|[\^$*+?(){}|]", " ", text)
    return " ".join(text.split())


def search_documents(runbooks: Sequence[Runbook], narrative: dict[str, str]) -> list[dict]:
    """One search document per runbook: title, exception classes, message text (signature wording), meaning, root
    causes and the page's narrative."""
    return [{
        "slug": rb.slug,
        "title": rb.title,
        "url": rb.page,
        "category": category_label(rb.category),
        "meaning": rb.detector.meaning,
        "exceptions": list(rb.detector.exception_classes),
        "messages": [signature_text(s) for s in rb.detector.signatures],
        "causes": [f"{rc.slug}: {rc.summary}" for rc in rb.detector.root_causes],
        "text": narrative.get(rb.slug, ""),
    } for rb in runbooks]


def _redact_data(value: Any) -> Any:
    """Redact every string of a JSON-like structure (a scrubbed value must not break the JSON around it)."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [_redact_data(v) for v in value]
    if isinstance(value, dict):
        return {k: _redact_data(v) for k, v in value.items()}
    return value


# ================================================================================================== render


def _exporter():
    from nbconvert import HTMLExporter
    from traitlets.config import Config

    cfg = Config()
    cfg.TagRemovePreprocessor.enabled = True
    cfg.TagRemovePreprocessor.remove_input_tags = set(HIDDEN_INPUT_TAGS)
    cfg.TemplateExporter.exclude_input_prompt = True
    cfg.TemplateExporter.exclude_output_prompt = True
    cfg.HTMLExporter.extra_template_basedirs = [str(TEMPLATES)]
    cfg.HTMLExporter.extra_template_paths = [str(TEMPLATES / "pages")]
    cfg.HTMLExporter.template_name = RUNBOOK_TEMPLATE
    return HTMLExporter(config=cfg)


def _page_env():
    import jinja2

    return jinja2.Environment(loader=jinja2.FileSystemLoader(str(TEMPLATES / "pages")), autoescape=True,
                              trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)


def _notebook_css(exporter) -> str:
    """JupyterLab's stylesheet as nbconvert ships it, written once for every runbook page."""
    env = exporter.environment
    return "\n".join(env.loader.get_source(env, f"static/{name}")[0] for name in ("index.css", "theme-light.css"))


def _link_runbook_mentions(soup, slugs: set[str]) -> None:
    """``<code>slug</code>`` naming another published runbook becomes a link to its page (a sibling file)."""
    for code in soup.find_all("code"):
        text = code.get_text()
        if text in slugs and code.find_parent("a") is None and code.find_parent("pre") is None:
            code.wrap(soup.new_tag("a", href=f"{text}.html"))


def _publishable(nb):
    """Drop what plumbing cells print on stderr (JVM start-up warnings): their code is hidden, so is their noise."""
    for cell in nb.cells:
        if cell.cell_type == "code" and HIDDEN_INPUT_TAGS & set(cell.metadata.get("tags", [])):
            cell.outputs = [o for o in cell.outputs if not (o.output_type == "stream" and o.get("name") == "stderr")]
    return nb


def _runbook_page(exporter, runbook: Runbook, execution: Execution, site: dict, slugs: set[str],
                  root: pathlib.Path) -> tuple[str, str]:
    """The page HTML and its narrative text for search. Paths inside the repository are shown relative to it."""
    import nbformat
    from bs4 import BeautifulSoup

    source = execution.executed if execution.executed else runbook.notebook
    nb = _publishable(nbformat.read(source, as_version=4))
    resources = {"metadata": {"name": runbook.title, "path": str(runbook.notebook.parent)},
                 "site": dict(site, root="../", runbook=runbook, execution=execution, current="runbooks",
                              category_label=category_label(runbook.category))}
    body, _ = exporter.from_notebook_node(nb, resources=resources)
    body = re.sub(r"(?<![\w:/])" + re.escape(str(root) + os.sep), "", body)
    soup = BeautifulSoup(body, features="html.parser")
    _link_runbook_mentions(soup, slugs - {runbook.slug})
    narrative = " ".join(cell.get_text(" ", strip=True).replace(exporter.anchor_link_text, "")
                         for cell in soup.select(".jp-MarkdownCell"))
    return str(soup), redact_text(re.sub(r"\s+", " ", narrative).strip())


def _copy_notebook(source: pathlib.Path, target: pathlib.Path) -> None:
    """The un-executed notebook as committed, its cell sources redacted."""
    doc = json.loads(source.read_text())
    redacted = dict(doc, cells=[dict(c, source=_redact_data(c.get("source", ""))) for c in doc.get("cells", [])])
    target.parent.mkdir(parents=True, exist_ok=True)
    if redacted == doc:
        shutil.copyfile(source, target)
    else:
        target.write_text(json.dumps(redacted, indent=1, ensure_ascii=False) + "\n")


# Elements that may be flattened to plain text when a secret is split across their children (highlighted code,
# ``<code>key</code>: value`` in prose); anything larger would lose the page's structure.
_FLATTENABLE = frozenset({"pre", "code", "span", "a", "em", "strong", "b", "i", "p", "li", "td", "th", "dt", "dd",
                          "h1", "h2", "h3", "h4", "h5", "h6"})


def redact_html(page: str) -> str:
    """:func:`redact_text` applied to what a reader sees: every text node and attribute, then every text element
    whose text still holds a secret split across its children (highlighted code) is flattened to redacted text.

    Markup itself is left alone, so a redacted value never swallows the tag that follows it. A secret that spans
    larger elements raises :class:`SiteError` rather than being published.
    """
    from bs4 import BeautifulSoup, NavigableString

    soup = BeautifulSoup(page, features="html.parser")
    for node in soup.find_all(string=True):
        redacted = redact_text(str(node))
        if redacted != str(node):
            node.replace_with(NavigableString(redacted))
    tags = soup.find_all(True)
    for tag in tags:
        for name, value in tag.attrs.items():
            if isinstance(value, str) and not value.startswith("data:"):
                tag.attrs[name] = redact_text(value)
    def leaks(tag) -> bool:  # text nodes joined by newlines: a value never runs into the next node's text
        text = tag.get_text("\n")
        return redact_text(text) != text

    for tag in reversed(tags):  # descendants before their ancestors
        if tag.name in _FLATTENABLE and leaks(tag):
            text = redact_text(tag.get_text())
            tag.clear()
            tag.append(NavigableString(text))
    if leaks(soup):
        text = soup.get_text("\n")
        line = next(b for a, b in zip(redact_text(text).splitlines(), text.splitlines()) if a != b)
        raise SiteError(f"a secret-looking value spans page elements and cannot be redacted in place: {line[:60]}")
    return str(soup)


def _write_page(path: pathlib.Path, page: str) -> None:
    """Every HTML page goes out through here, redacted."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(redact_html(page))


def _write_data(directory: pathlib.Path, name: str, variable: str, data: Any) -> None:
    """``name.json`` for tools and ``name.js`` for pages (a script tag also works from the file system)."""
    text = json.dumps(_redact_data(data), ensure_ascii=False, separators=(",", ":"))
    (directory / f"{name}.json").write_text(text + "\n")
    (directory / f"{name}.js").write_text(
        f"window.FlinkRunbooks = window.FlinkRunbooks || {{}};\nwindow.FlinkRunbooks.{variable} = {text};\n")


def render_site(out: pathlib.Path, runbooks: Sequence[Runbook], executions: dict[str, Execution],
                patched: Sequence[PatchedKey], *, built: str, root: pathlib.Path = PROJECT_ROOT) -> list[str]:
    """Write every page and asset into ``out`` (an empty directory); returns the pages written."""
    exporter = _exporter()
    env = _page_env()
    assets = out / "assets"
    shutil.copytree(STATIC, assets)
    (assets / "notebook.css").write_text(_notebook_css(exporter))
    (out / SITE_MARKER).write_text("flink-runbooks site; rebuilt as a whole by `flink-runbooks site`\n")
    site = {"built": built, "categories": CATEGORIES}
    slugs = {rb.slug for rb in runbooks}
    pages: list[str] = []
    narrative: dict[str, str] = {}
    for rb in runbooks:
        page, narrative[rb.slug] = _runbook_page(exporter, rb, executions[rb.slug], site, slugs, root)
        _write_page(out / rb.page, page)
        _copy_notebook(rb.notebook, out / rb.notebook_copy)
        pages.append(rb.page)

    groups = []
    for category in dict.fromkeys([c for c, _ in CATEGORIES] + [rb.category for rb in runbooks]):
        members = [rb for rb in runbooks if rb.category == category]
        if members:
            groups.append({"category": category, "label": category_label(category), "runbooks": members})
    context = dict(site, root="", executions=executions, runbooks=runbooks)
    page_specs = {
        "index.html": ("page-index.html.j2", {"groups": groups, "current": "index"}),
        "keys.html": ("page-keys.html.j2", {
            "current": "keys", "sections": key_sections(patched), "renames": key_renames(patched),
            "kafka": [k for k in patched if k.target == "kafka"], "pages": {rb.slug: rb.page for rb in runbooks}}),
        "trace.html": ("page-trace.html.j2", {"current": "trace"}),
        "decisions.html": ("page-decisions.html.j2", {
            "current": "decisions", "table": decision_table_html(pages={rb.slug: rb.page for rb in runbooks})}),
    }
    for name, (template, extra) in page_specs.items():
        _write_page(out / name, env.get_template(template).render(**context, **extra))
        pages.append(name)
    _write_data(assets, "signatures", "signatures", browser_signatures(runbooks))
    _write_data(assets, "search-index", "searchIndex", {"documents": search_documents(runbooks, narrative)})
    return sorted(pages)


# ================================================================================================== links


class _Links(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.refs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name in ("id", "name") and value:
                self.ids.add(value)
            if value and (name == "src" or (name == "href" and tag in ("a", "link", "area"))):
                self.refs.append(value)


def _parse(path: pathlib.Path) -> _Links:
    parser = _Links()
    parser.feed(path.read_text())
    return parser


def broken_links(site: pathlib.Path) -> list[str]:
    """Relative links and resources of every page that point at no file (or no anchor) of the site."""
    site = site.resolve()
    parsed = {p: _parse(p) for p in sorted(site.rglob("*.html"))}
    broken = []
    for page, links in parsed.items():
        for ref in links.refs:
            url = urllib.parse.urlsplit(ref)
            if url.scheme or url.netloc or ref.startswith(("data:", "javascript:")):
                continue
            target = (page.parent / urllib.parse.unquote(url.path)).resolve() if url.path else page
            where = f"{page.relative_to(site)}: {ref}"
            if site not in target.parents and target != site:
                broken.append(f"{where} (outside the site)")
            elif target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{where} (no such file)")
            elif url.fragment and target.suffix == ".html":
                ids = parsed[target].ids if target in parsed else _parse(target).ids
                if urllib.parse.unquote(url.fragment) not in ids:
                    broken.append(f"{where} (no anchor #{url.fragment})")
    return broken


# ================================================================================================== build


@dataclass
class RunbookPage:
    slug: str
    title: str
    page: str
    status: str  # ok | failed
    duration_s: float
    error: str | None = None


@dataclass
class SiteReport:
    out: pathlib.Path
    duration_s: float
    runbooks: list[RunbookPage]
    pages: list[str]
    skipped: list[str] = field(default_factory=list)  # incomplete runbooks left out (detector or notebook missing)
    warnings: list[str] = field(default_factory=list)
    broken_links: list[str] = field(default_factory=list)
    patched_keys: int = 0

    @property
    def failed(self) -> list[RunbookPage]:
        return [r for r in self.runbooks if r.status != "ok"]

    @property
    def ok(self) -> bool:
        return not self.failed and not self.broken_links

    def to_dict(self) -> dict:
        return dict(asdict(self), out=str(self.out), ok=self.ok)


def _prepare_out(out: pathlib.Path) -> pathlib.Path:
    """A fresh staging directory beside ``out``; ``out`` itself must be absent, empty or an earlier site."""
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / SITE_MARKER).exists())):
        raise SiteError(f"{out} exists and is not an earlier site; choose an empty or new directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    return pathlib.Path(tempfile.mkdtemp(prefix=f".{out.name}-", dir=out.parent))


def _publish(staging: pathlib.Path, out: pathlib.Path) -> None:
    """Replace ``out`` with the staged site in one rename, so a failed build never leaves half a site."""
    if out.exists():
        old = pathlib.Path(tempfile.mkdtemp(prefix=f".{out.name}-old-", dir=out.parent))
        out.rename(old / "site")
        staging.rename(out)
        shutil.rmtree(old)
    else:
        staging.rename(out)
    out.chmod(0o755)


def build_site(out: str | os.PathLike, *, runbooks: list[str] | None = None, jobs: int = 2,
               progress: Say | None = None, root: str | os.PathLike | None = None, timeout_s: float = 600,
               spark=None) -> SiteReport:
    """Build the runbook site into ``out`` and return what happened, including the build's duration.

    ``runbooks`` restricts the site to those slugs (default: every runbook with a detector and a notebook);
    ``jobs`` notebooks execute in parallel; ``progress`` receives one line per step (without it, only the final
    line with the duration is printed, on stderr); ``root`` is the repository whose ``runbooks/`` and ``data/``
    are published; ``timeout_s`` bounds each notebook cell; ``spark``, when given, reads the example incidents
    (by default small ones are read in this process, as ``diagnose`` does). A runbook whose notebook fails still gets its page, with the error shown, and is
    listed in :attr:`SiteReport.failed`.
    """
    started = time.monotonic()
    say = progress or (lambda _msg: None)
    base = pathlib.Path(root).resolve() if root else PROJECT_ROOT
    target = pathlib.Path(out).resolve()
    selected, skipped = collect_runbooks(base, runbooks)
    for line in skipped:
        say(f"skipped {line}")
    staging = _prepare_out(target)
    try:
        with tempfile.TemporaryDirectory(prefix="flink-runbooks-site-") as work:
            workdir = pathlib.Path(work)
            executions: dict[str, Execution] = {}
            findings: list[Finding] = []
            warnings: list[str] = []
            with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
                say(f"executing {len(selected)} runbook(s), {max(1, jobs)} at a time")
                futures = []
                for rb, saved, found, error in read_examples(selected, base, workdir, spark=spark, say=say):
                    if error:  # the notebook then reads the logs itself and its page shows the error
                        warnings.append(f"{rb.slug}: example incident not read: {error}")
                    findings += found
                    futures.append(pool.submit(execute_runbook, rb, workdir, base, timeout_s, saved))
                patched = patched_keys(selected, findings)
                for future in concurrent.futures.as_completed(futures):
                    ex = future.result()
                    executions[ex.slug] = ex
                    say(f"runbook {ex.slug}: {ex.status} in {ex.duration_s:.1f}s" + (f" ({ex.error})" if ex.error else ""))
            built = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
            pages = render_site(staging, selected, executions, patched, built=built, root=base)
        broken = broken_links(staging)
        report = SiteReport(target, 0.0, [
            RunbookPage(rb.slug, rb.title, rb.page, executions[rb.slug].status, executions[rb.slug].duration_s,
                        executions[rb.slug].error) for rb in selected],
            pages, skipped, warnings, broken, sum(1 for k in patched if k.target == "flink"))
        report.duration_s = round(time.monotonic() - started, 1)
        record = {k: v for k, v in report.to_dict().items() if k not in ("out", "pages")}
        (staging / "build.json").write_text(json.dumps(_redact_data(dict(record, built=built)), indent=2) + "\n")
        _publish(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    summary = (f"built {len(report.runbooks)} runbook page(s) into {target} in {report.duration_s:.1f}s"
               + (f"; {len(report.failed)} runbook(s) failed" if report.failed else "")
               + (f"; {len(report.broken_links)} broken link(s)" if report.broken_links else ""))
    if progress:
        progress(summary)
    else:
        print(f"flink-runbooks site: {summary}", file=sys.stderr, flush=True)
    return report
