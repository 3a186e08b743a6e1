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
serves it. Text from the example incidents reaches the pages escaped (the notebooks' tables and summaries escape
every value), and every page carries a Content-Security-Policy (``site_templates/pages/site-layout.html.j2``) that
runs only the site's own script files: no inline script, no event-handler attribute, nothing from elsewhere.
"""
from __future__ import annotations

import ast
import concurrent.futures
import datetime as _dt
import json
import os
import pathlib
import re
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Iterable, Iterator, Sequence

from flink_runbooks.vocabulary import keys
from flink_runbooks.model import Finding
from flink_runbooks.notebook import PROJECT_ROOT
from flink_runbooks.parse.redact import redact_text
from flink_runbooks.render.decision_table import decision_table_html
from flink_runbooks.apps.notebook_runner import run_notebook
from flink_runbooks.render.notebook_html import HIDDEN_INPUT_TAGS
from flink_runbooks import catalogue
from flink_runbooks.catalogue import CATEGORIES, category_label, category_rank
from flink_runbooks.apps.site_keys import PatchedKey, key_renames, key_sections
from flink_runbooks.apps.site_signatures import UnsupportedRegex, browser_signatures, signature_text
from flink_runbooks.apps.site_links import broken_links

PACKAGE_DIR = pathlib.Path(__file__).resolve().parent
TEMPLATES = PACKAGE_DIR / "site_templates"
STATIC = PACKAGE_DIR / "site_static"
RUNBOOK_TEMPLATE = "runbook"

SITE_MARKER = ".flink-runbooks-site"
MESSAGE_SHOWN = 160  # characters of a runbook's message on its index card
_LOG_PREFIX = re.compile(r"^\d{4}-\d{2}-\d{2}[ T][\d:,.]+\s+[A-Z]+\s+[\w.$]+\s+(?:\[[^\]]*\]\s+)?-\s+")

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

    @property
    def message(self) -> str:
        """The message a reader recognises the failure by: Flink's own wording as a release prints it, without a
        log record's prefix (a signature is a regex, often of a context line, so it is never shown instead)."""
        if not self.detector.wordings:
            return ""
        text = _LOG_PREFIX.sub("", self.detector.wordings[0].example)
        return text if len(text) <= MESSAGE_SHOWN else text[:MESSAGE_SHOWN].rstrip() + "…"


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


def read_examples(runbooks: Sequence[Runbook], root: pathlib.Path, workdir: pathlib.Path, *, spark=None,
                  say: Say = lambda _m: None) -> Iterator[tuple[Runbook, pathlib.Path | None, list[Finding], str | None]]:
    """Read every runbook's example incident once and save it for its notebook.

    The reading is ``flink-runbooks diagnose``'s: in ``spark`` when given, else small local incidents in this
    process and the rest in one Spark session. Yields (runbook, saved incident or None, findings, error) as each
    is read, so the notebooks can start while the next incident is being read.
    """
    from flink_runbooks.diagnose import ingest
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


def collapsible_sections(fragment: str) -> str:
    """Each ``<h2>`` and what follows it up to the next one as a closed ``<details>``, its heading the summary: a
    page of one section per runbook reads as a list of runbooks, each opened on demand."""
    from bs4 import BeautifulSoup

    soup = BeautifulSoup(fragment, features="html.parser")
    for heading in soup.find_all("h2"):
        section = soup.new_tag("details", attrs={"class": "section"})
        summary = soup.new_tag("summary")
        body = []
        for sibling in heading.next_siblings:
            if getattr(sibling, "name", None) == "h2":
                break
            body.append(sibling)
        heading.replace_with(section)
        summary.append(heading)
        section.append(summary)
        for node in body:
            section.append(node.extract())
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
            "current": "decisions",
            "table": collapsible_sections(decision_table_html(pages={rb.slug: rb.page for rb in runbooks}))}),
    }
    for name, (template, extra) in page_specs.items():
        _write_page(out / name, env.get_template(template).render(**context, **extra))
        pages.append(name)
    try:
        signatures = browser_signatures(runbooks)
    except UnsupportedRegex as exc:
        raise SiteError(str(exc)) from None
    _write_data(assets, "signatures", "signatures", signatures)
    _write_data(assets, "search-index", "searchIndex", {"documents": search_documents(runbooks, narrative)})
    return sorted(pages)


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
