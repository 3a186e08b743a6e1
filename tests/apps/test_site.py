"""The published runbook site: collection, regex export, key table, redaction and links (fast); the full build
with every runbook executed (marked `notebook`); the pages in headless Chromium (marked `browser` and `notebook`)."""
from __future__ import annotations

import dataclasses
import html as html_lib
import json
import pathlib
import re

import nbformat
import pytest

from corpus import DATA, INCIDENT_REPORTS, ROOT
from support import chromium, serve_directory
from flink_runbooks.vocabulary import keys
from flink_runbooks import catalogue
from flink_runbooks.apps import site, site_keys, site_links, site_signatures
from flink_runbooks.parse.config import parse_conf
from flink_runbooks.detectors import get_detector, slugs
from flink_runbooks.parse.redact import REDACTED, is_sensitive_key

# its module-scoped fixtures are built once: every test of the module runs on one worker
pytestmark = pytest.mark.xdist_group("test_site")

THRESHOLD = "checkpoint-tolerable-failure-threshold"
KAFKA = "kafka-offset-commit-failure"
ROCKSDB_HARDLINK = "rocksdb-hardlink-not-supported"


# ====================================================================================================== collect


def test_collect_takes_every_runbook_with_a_detector_and_a_notebook():
    runbooks, skipped = site.collect_runbooks()
    notebooks = {p.stem for p in (ROOT / "runbooks").glob("*.ipynb")}
    assert {r.slug for r in runbooks} == notebooks & set(slugs())
    for slug in set(slugs()) - notebooks:
        assert any(line.startswith(f"{slug}:") for line in skipped)
    for rb in runbooks:
        assert rb.repo_path == f"runbooks/{rb.slug}.ipynb"
        assert rb.incident_paths and all((ROOT / p).exists() for p in rb.incident_paths)
        assert rb.detector is get_detector(rb.slug)
    categories = [catalogue.category_rank(r.category) for r in runbooks]
    assert categories == sorted(categories), "grouped by category in the catalogue's order"


def test_collect_rejects_a_runbook_that_does_not_exist():
    with pytest.raises(site.SiteError, match="no runbook no-such-runbook"):
        site.collect_runbooks(slugs=["no-such-runbook"])


def test_build_refuses_an_output_directory_that_is_not_a_site(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    with pytest.raises(site.SiteError, match="not an earlier site"):
        site.build_site(str(tmp_path), runbooks=[THRESHOLD])
    assert (tmp_path / "notes.txt").read_text() == "mine"


# ====================================================================================================== regexes


@pytest.mark.parametrize("pattern, js, flags", [
    (r"(?i)exceeded checkpoint", "exceeded checkpoint", "i"),
    (r"Caused by: (?i:rocksdb)Exception", "Caused by: (?:[rR][oO][cC][kK][sS][dD][bB])Exception", ""),
    (r"(?i:[a-c]x)", "(?:[a-cA-C][xX])", ""),
    (r"\AStarting\z", "^Starting$", ""),
    (r"\Qchk-1.tmp\E", r"chk\-1\.tmp", ""),
    (r"\p{Alpha}+ \p{Digit}", "[a-zA-Z]+ [0-9]", ""),
    (r"[\p{Upper}_]+", "[A-Z_]+", ""),
    (r"^\s+\(none\)\s*$", r"^\s+\(none\)\s*$", ""),
    (r"(?<![\w$.])Foo(?=:)", r"(?<![\w$.])Foo(?=:)", ""),
])
def test_java_regex_converts_to_javascript(pattern, js, flags):
    assert site_signatures.to_js_regex(pattern) == (js, flags)


@pytest.mark.parametrize("pattern", [r"a++", r"(?>ab)", r"[a-z&&[^b]]", r"(?P<n>a)", r"x(?i)y", r"[a[b]]",
                                     r"\x{263a}", r"(?x) a b"])
def test_java_only_regex_syntax_is_refused_not_mistranslated(pattern):
    with pytest.raises(site_signatures.UnsupportedRegex):
        site_signatures.to_js_regex(pattern)


def test_converted_case_folding_matches_the_same_lines():
    pattern = r"(?i:while link file to) \S+: (?i:not supported)"
    js, flags = site_signatures.to_js_regex(pattern)
    for line in ("While Link File to /a: Not Supported", "while link file to /a: NOT SUPPORTED",
                 "While link file to /a: unsupported", "WHILE LINK FILE TO /a:  not supported"):
        assert bool(re.search(pattern, line)) == bool(re.search(js, line)), line


def test_every_detector_signature_is_exported_for_the_browser():
    runbooks, _ = site.collect_runbooks()
    exported = site_signatures.browser_signatures(runbooks)
    by_slug = {e["slug"]: e for e in exported["runbooks"]}
    # the runbook for failures outside the catalogue is where "no match" points, never a match itself
    assert site_signatures.UNRECOGNISED not in by_slug
    assert exported["unrecognised"]["url"] == f"runbooks/{site_signatures.UNRECOGNISED}.html"
    for rb in runbooks:
        if rb.slug == site_signatures.UNRECOGNISED:
            continue
        patterns = by_slug[rb.slug]["patterns"]
        assert [p["source"] for p in patterns if p["kind"] == "wording"] == [w.pattern for w in rb.detector.wordings]
        assert [p["source"] for p in patterns if p["kind"] == "signature"] == list(dict.fromkeys(rb.detector.signatures))
        assert [p["source"] for p in patterns if p["kind"] == "frame"] == list(dict.fromkeys(rb.detector.frames))
        assert {p["source"] for p in patterns if p["kind"] == "exception"} == set(rb.detector.exception_classes)
        for p in patterns:
            re.compile(p["python"])
            assert 0 < p["weight"] <= 1
            # a reader is told what matched in words: no regex syntax
            assert not re.search(r"\(\?|\\[dswS]|\[\^", p["message"]), p["message"]


def test_a_pattern_shared_by_runbooks_counts_less_for_each():
    runbooks, _ = site.collect_runbooks()
    exported = site_signatures.browser_signatures(runbooks)
    declared: dict[tuple[str, str], int] = {}
    for entry in exported["runbooks"]:
        for p in entry["patterns"]:
            declared[(p["kind"], p["source"])] = declared.get((p["kind"], p["source"]), 0) + 1
    for entry in exported["runbooks"]:
        for p in entry["patterns"]:
            assert p["shared_by"] == declared[(p["kind"], p["source"])]
            assert p["weight"] == pytest.approx(site_signatures.PATTERN_WEIGHT[p["kind"]] / p["shared_by"], abs=1e-4)


@pytest.mark.parametrize("line, found", [
    ("Caused by: org.rocksdb.RocksDBException: while link file to /x", True),
    ("org.rocksdb.RocksDBException", True),
    ("RocksDBException: Bad table magic number", True),
    ("\tat org.rocksdb.RocksDBExceptionHandler.handle(Handler.java:1)", False),
    ("com.example.RocksDBException: not the same class", False),
    ("the RocksDBException we saw yesterday", False),
])
def test_exception_class_pattern(line, found):
    assert bool(re.search(site_signatures.exception_regex("org.rocksdb.RocksDBException"), line)) is found


def test_generic_exception_class_is_not_found_in_prose():
    rx = site_signatures.exception_regex("java.lang.Exception")
    assert re.search(rx, "java.lang.Exception: Exception while creating StreamOperatorStateContext.")
    assert not re.search(rx, "Exception while creating StreamOperatorStateContext.")


@pytest.mark.parametrize("signature, words", [
    (r"[Ww]hile link file to ", "While link file to"),
    (r"Could not materialize checkpoint \d+", "Could not materialize checkpoint"),
    (r"_metadata(?: for client \S+)? already exists", "_metadata for client already exists"),
    (r"Container killed on request\. Exit code is", "Container killed on request. Exit code is"),
])
def test_signature_wording_is_searchable_without_regex_syntax(signature, words):
    assert site_signatures.signature_text(signature) == words


# ====================================================================================================== keys


def _section_for(sections, version: tuple[int, int]) -> site_keys.ReleaseSection:
    return next(s for s in sections if tuple(version) in s.versions)


def test_key_table_gives_each_release_line_its_spelling():
    patched = [site_keys.PatchedKey("flink", "execution.checkpointing.dir", {"checkpoint-metadata-already-exists"}),
               site_keys.PatchedKey("flink", "taskmanager.memory.network.max", {"insufficient-network-buffers"}),
               site_keys.PatchedKey("flink", "execution.checkpointing.tolerable-failed-checkpoints", {THRESHOLD})]
    sections = site_keys.key_sections(patched)
    rows = lambda v: {r.key: r for r in _section_for(sections, v).rows}  # noqa: E731

    old = rows((1, 18))["execution.checkpointing.dir"]
    assert old.use == "state.checkpoints.dir"
    assert ("execution.checkpointing.dir", "since 1.20") in old.not_understood
    new = rows((1, 20))["execution.checkpointing.dir"]
    assert new.use == "execution.checkpointing.dir" and "state.checkpoints.dir" in new.deprecated

    assert rows((1, 9))["taskmanager.memory.network.max"].use == "taskmanager.network.memory.max"
    v2 = rows((2, 0))["taskmanager.memory.network.max"]
    assert v2.use == "taskmanager.memory.network.max"
    assert ("taskmanager.network.memory.max", "removed in 2.0") in v2.not_understood
    for version in site_keys.release_lines():
        row = rows(version)["execution.checkpointing.tolerable-failed-checkpoints"]
        assert row.use == keys.name_for(row.key, version) and not row.deprecated and not row.not_understood


def test_key_table_merges_release_lines_where_nothing_changes():
    sections = site_keys.key_sections([site_keys.PatchedKey("flink", "execution.checkpointing.timeout", {THRESHOLD})])
    assert [s.label for s in sections] == ["every release"]


# ====================================================================================================== render


FAKE_SECRETS = ("FAKE-S3-SECRET-7c41e0", "FAKE-JAAS-PW-93b2aa", "AKIAFAKEFAKEFAKE1234")


def _with_secrets(tmp_path: pathlib.Path) -> tuple[pathlib.Path, nbformat.NotebookNode]:
    """A repository holding one runbook whose notebook text and executed outputs carry secrets."""
    root = tmp_path / "repo"
    (root / "runbooks").mkdir(parents=True)
    (root / "data" / THRESHOLD / "example").mkdir(parents=True)
    nb = nbformat.read(ROOT / "runbooks" / f"{THRESHOLD}.ipynb", as_version=4)
    leak = (f"Seen in the ticket: `s3.secret-key: {FAKE_SECRETS[0]}` and\n"
            f"`sasl.jaas.config = org.apache.kafka.common.security.plain.PlainLoginModule required "
            f"username=\"svc\" password=\"{FAKE_SECRETS[1]}\";` with `s3.access-key: {FAKE_SECRETS[2]}`")
    nb.cells.insert(1, nbformat.v4.new_markdown_cell(leak))
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    params.source = re.sub(r'incident_paths = \[[^\]]*\]', f'incident_paths = ["data/{THRESHOLD}/example"]',
                           params.source)
    nbformat.write(nb, root / "runbooks" / f"{THRESHOLD}.ipynb")
    executed = nbformat.read(root / "runbooks" / f"{THRESHOLD}.ipynb", as_version=4)
    code = next(c for c in executed.cells if c.cell_type == "code" and "setup" not in c.metadata.get("tags", [])
                and "parameters" not in c.metadata.get("tags", []))
    code.outputs = [
        nbformat.v4.new_output("stream", name="stdout", text=f"Loading configuration property: s3.secret-key, {FAKE_SECRETS[0]}\n"),
        nbformat.v4.new_output("display_data", data={
            "text/html": f"<table><tr><td>s3.access-key={FAKE_SECRETS[2]}</td></tr></table>",
            "text/plain": f"password={FAKE_SECRETS[1]}"}),
    ]
    path = tmp_path / "executed.ipynb"
    nbformat.write(executed, path)
    return root, path


def test_no_page_shows_a_secret_value(tmp_path):
    root, executed = _with_secrets(tmp_path)
    runbooks, _ = site.collect_runbooks(root, [THRESHOLD])
    out = tmp_path / "site"
    out.mkdir()
    executions = {THRESHOLD: site.Execution(THRESHOLD, "ok", 1.0, None, executed)}
    site.render_site(out, runbooks, executions, [], built="test", root=root)
    files = [p for p in out.rglob("*") if p.is_file()]
    assert any(p.suffix == ".ipynb" for p in files) and any(p.name == f"{THRESHOLD}.html" for p in files)
    for path in files:
        text = path.read_text(errors="replace")
        for secret in FAKE_SECRETS:
            assert secret not in text, f"{secret} published in {path.relative_to(out)}"
    page = (out / "runbooks" / f"{THRESHOLD}.html").read_text()
    assert page.count(REDACTED) >= 3
    assert len(re.findall(r"<code\b", page)) == page.count("</code>"), "redaction keeps the markup around values"
    copy = json.loads((out / "notebooks" / f"{THRESHOLD}.ipynb").read_text())
    assert nbformat.validate(nbformat.from_dict(copy)) is None, "the redacted copy is still a valid notebook"


def test_html_redaction_scrubs_what_readers_see_and_keeps_the_markup():
    page = ('<p><code>s3.secret-key</code>: hunter2hunter2 and <b>more</b></p>'
            '<pre><span class="n">password</span><span class="o">=</span><span class="s">"zz-top-9"</span></pre>'
            '<p><code>ssl.key.password: ******</code>. Done</p><a title="token=abc123abc">x</a>')
    out = site.redact_html(page)
    for secret in ("hunter2hunter2", "zz-top-9", "abc123abc"):
        assert secret not in out
    assert "<b>" not in out.split("</p>")[0] and "<p>s3.secret-key: ****** and more</p>" in out
    assert "<pre>password=******</pre>" in out
    assert "<p><code>ssl.key.password: ******</code>. Done</p>" in out, "an already redacted value is left as is"


def test_runbook_page_hides_setup_code_and_its_noise_and_links_other_runbooks(tmp_path):
    nb = nbformat.read(ROOT / "runbooks" / f"{THRESHOLD}.ipynb", as_version=4)
    setup = next(c for c in nb.cells if "setup" in c.metadata.get("tags", []))
    setup.outputs = [nbformat.v4.new_output("stream", name="stderr", text="WARNING: Using incubator modules\n")]
    nb.cells.append(nbformat.v4.new_markdown_cell("See `checkpoint-expired` and `no-such-runbook`."))
    executed = tmp_path / "executed.ipynb"
    nbformat.write(nb, executed)
    runbooks, _ = site.collect_runbooks()
    out = tmp_path / "site"
    out.mkdir()
    executions = {rb.slug: site.Execution(rb.slug, "failed", 0.0, "cell 2: RuntimeError: no JVM", None)
                  for rb in runbooks}
    executions[THRESHOLD] = site.Execution(THRESHOLD, "ok", 3.0, None, executed)
    site.render_site(out, runbooks, executions, [], built="test")
    page = (out / "runbooks" / f"{THRESHOLD}.html").read_text()
    text = html_lib.unescape(re.sub(r"<[^>]+>", "", page))
    assert "open_runbook(" not in text and "incident_paths =" not in text
    assert "incubator modules" not in text
    assert "run.summary()" in text, "the calls that show something stay visible"
    if "checkpoint-expired" in {r.slug for r in runbooks}:
        assert '<a href="checkpoint-expired.html"><code>checkpoint-expired</code></a>' in page
    assert "<code>no-such-runbook</code>" in page and 'href="no-such-runbook.html"' not in page
    assert get_detector(THRESHOLD).versions in text
    failed = next(r for r in runbooks if r.slug != THRESHOLD)
    assert "failed against its example incident" in (out / failed.page).read_text()
    assert site_links.broken_links(out) == []


def test_link_checker_reports_missing_files_and_anchors(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "index.html").write_text(
        '<a href="sub/page.html#here">ok</a><a href="sub/page.html#gone">anchor</a><a href="missing.html">file</a>'
        '<img src="img.png"><a href="https://flink.apache.org/">external</a><a href="#top" id="top">self</a>')
    (tmp_path / "sub" / "page.html").write_text('<h2 id="here">x</h2><a href="../index.html">up</a>')
    broken = site_links.broken_links(tmp_path)
    assert broken == ["index.html: sub/page.html#gone (no anchor #gone)", "index.html: missing.html (no such file)",
                      "index.html: img.png (no such file)"]


# ====================================================================================================== full build


@dataclasses.dataclass
class Built:
    out: pathlib.Path
    report: site.SiteReport
    messages: list[str]
    expected: list[str]  # the complete runbooks when the build started
    runbooks: list[site.Runbook]  # the published ones


@pytest.fixture(scope="session")
def built_site(tmp_path_factory, spark) -> Built:
    """The whole site, every runbook executed once (slow: this is what `flink-runbooks site` does)."""
    out = tmp_path_factory.mktemp("site") / "site"
    messages: list[str] = []
    expected = [r.slug for r in site.collect_runbooks()[0]]
    report = site.build_site(str(out), jobs=2, spark=spark, progress=messages.append)
    published = {r.slug for r in report.runbooks}
    return Built(out, report, messages, expected, [r for r in site.collect_runbooks()[0] if r.slug in published])


def _known_secret_values() -> set[str]:
    """Values of sensitive keys in the example incidents' configs and logged configuration."""
    values = set()
    for path in DATA.glob("*/*/**/*"):
        if not path.is_file() or path.stat().st_size > 5_000_000:
            continue
        text = path.read_text(errors="replace")
        if path.name in ("flink-conf.yaml", "config.yaml"):
            values |= {v for k, v, _ in parse_conf(text, str(path)) if is_sensitive_key(k)}
        for key, value in re.findall(r"Loading configuration property: ([^,\s]+), (\S+)", text):
            if is_sensitive_key(key):
                values.add(value)
        for key, value in re.findall(r"^\s*([\w.\-]+) = (\S.*)$", text, re.M):
            if is_sensitive_key(key):
                values.add(value.strip())
    return {v.strip("'\"") for v in values} - {REDACTED, "null", "none", "", "true", "false"}


@pytest.mark.notebook
def test_full_build_publishes_every_runbook(built_site):
    out, report, messages, runbooks = built_site.out, built_site.report, built_site.messages, built_site.runbooks
    assert not report.failed, "\n".join(f"{r.slug}: {r.error}" for r in report.failed)
    assert report.ok and report.broken_links == []
    assert [r.slug for r in report.runbooks] == built_site.expected
    assert report.duration_s > 0 and f"in {report.duration_s:.1f}s" in messages[-1]
    assert json.loads((out / "build.json").read_text())["duration_s"] == report.duration_s
    for rb in runbooks:
        page = (out / rb.page).read_text()
        assert rb.detector.versions in html_lib.unescape(page)
        assert f'href="../{rb.notebook_copy}"' in page and rb.repo_path in page
        assert json.loads((out / rb.notebook_copy).read_text()) == json.loads(rb.notebook.read_text())
        assert "data:image/png;base64," in page, f"{rb.slug}: the timeline plot"
        assert "open_runbook(" not in page, f"{rb.slug}: setup code is hidden"
        # the root cause this runbook gives on its default incident, as pinned (it may be a secondary finding there)
        assert f"<code>{_pinned_root_cause(rb.notebook)}</code>" in page, f"{rb.slug}: its verdict"
        assert "patch-diff" in page or "<pre>" in page, f"{rb.slug}: its patch"
    assert site_links.broken_links(out) == []


def _pinned_root_cause(notebook: pathlib.Path) -> str:
    """The first root cause the golden pins give this notebook's runbook on the notebook's default incident."""
    parameters = next(c.source for c in nbformat.read(notebook, as_version=4).cells
                      if "parameters" in c.metadata.get("tags", []))
    default = re.search(r'incident_paths = \["([^"]+)"\]', parameters).group(1)
    pins = json.loads((ROOT / "tests" / "golden" / "diagnoses.json").read_text())
    own = [f.split()[0].split("/", 1)[1] for f in pins[default.removeprefix("data/")]["findings"]
           if f.startswith(f"{notebook.stem}/")]
    assert own, f"{notebook.stem} gives no finding on its default incident {default}"
    return own[0]


@pytest.mark.notebook
def test_index_groups_runbooks_by_category_with_signature_and_meaning(built_site):
    from bs4 import BeautifulSoup

    index = BeautifulSoup((built_site.out / "index.html").read_text(), features="html.parser")
    for rb in built_site.runbooks:
        card = index.select_one(f'section.category#{rb.category} li.runbook-card[data-slug="{rb.slug}"]')
        assert card is not None, f"{rb.slug} is not listed under {rb.category}"
        link = card.select_one("h3 a")
        assert link["href"] == rb.page and link.get_text() == rb.title
        assert card.select_one(".meaning").get_text() == rb.detector.meaning
        text = card.get_text()
        if rb.exceptions:
            assert rb.exceptions[0][0] in text
        assert rb.message in text


@pytest.mark.notebook
def test_keys_page_lists_what_the_runbooks_patch(built_site):
    assert built_site.report.patched_keys > 0
    page = (built_site.out / "keys.html").read_text()
    assert 'data-key="execution.checkpointing.tolerable-failed-checkpoints"' in page
    assert f'href="runbooks/{THRESHOLD}.html"' in page
    releases = re.findall(r'<tbody [^>]*\bdata-release="(flink-[\d-]+)"', page)
    assert releases and releases[0] == "flink-" + "-".join(map(str, site_keys.release_lines()[0]))
    assert page.count('<table class="keys">') <= 3, "one table of keys, with the renames and Kafka's beside it"


@pytest.mark.notebook
def test_no_page_of_the_full_build_shows_an_example_secret(built_site):
    out = built_site.out
    secrets = _known_secret_values()
    for path in out.rglob("*"):
        if path.is_file() and path.suffix in (".html", ".json", ".js", ".ipynb"):
            text = path.read_text(errors="replace")
            leaked = [s for s in secrets if s in text]
            assert not leaked, f"{path.relative_to(out)} shows {leaked}"


@pytest.mark.notebook
def test_pages_load_nothing_from_the_network(built_site):
    out = built_site.out
    for path in out.rglob("*.html"):
        text = path.read_text()
        external = re.findall(r'<(?:script|link|img|iframe|source)\b[^>]*\b(?:src|href)="((?:https?:)?//[^"]+)"', text)
        assert not external, f"{path.relative_to(out)} loads {external}"


# ====================================================================================================== browser


@pytest.fixture(scope="module")
def served(built_site):
    with serve_directory(built_site.out) as base:
        yield base


@pytest.fixture(scope="module")
def browser_context():
    with chromium(prefix="site-browser-") as context:
        yield context


class _Watched:
    """A page with everything that went wrong on it recorded: console errors, uncaught exceptions, failed
    requests, and requests that left the machine (blocked)."""

    def __init__(self, context, base: str):
        self.page = context.new_page()
        self.base = base
        self.errors: list[str] = []
        self.external: list[str] = []
        self.page.on("console", lambda m: self.errors.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(f"page error: {e}"))
        self.page.on("requestfailed", lambda r: self.errors.append(f"request failed: {r.url}")
                     if r.url.startswith(base) else None)
        self.page.on("response", lambda r: self.errors.append(f"HTTP {r.status}: {r.url}") if r.status >= 400 else None)
        self.page.route("**/*", self._route)

    def _route(self, route):
        if route.request.url.startswith(self.base) or route.request.url.startswith("data:"):
            route.continue_()
        else:
            self.external.append(route.request.url)
            route.abort()

    def open(self, path: str):
        self.page.goto(self.base + path, wait_until="load")
        return self.page

    def close(self):
        self.page.close()


@pytest.fixture
def watched(browser_context, served):
    w = _Watched(browser_context, served)
    yield w
    w.close()


def _assert_published(built_site, slug: str):
    assert slug in {r.slug for r in built_site.runbooks}, f"runbook {slug} is not on the site"


@pytest.mark.browser
@pytest.mark.notebook
def test_index_loads_without_console_errors(built_site, watched):
    page = watched.open("index.html")
    assert page.locator(".runbook-card").count() == len(built_site.runbooks)
    assert watched.errors == [] and watched.external == []


@pytest.mark.browser
@pytest.mark.notebook
@pytest.mark.parametrize("query, exception", [("FlinkRuntimeException", "org.apache.flink.util.FlinkRuntimeException"),
                                              ("RocksDBException", "org.rocksdb.RocksDBException")])
def test_search_finds_runbooks_by_exception_class(built_site, watched, query, exception):
    expected = {r.slug for r in built_site.runbooks if exception in r.detector.exception_classes}
    assert expected, f"no published runbook is about {exception}"
    page = watched.open("index.html")
    page.fill("#search-input", query)
    results = page.locator("#search-results a[data-slug]")
    results.first.wait_for()
    found = [results.nth(i).get_attribute("data-slug") for i in range(results.count())]
    assert set(found[:len(expected)]) == expected, found
    if exception == "org.apache.flink.util.FlinkRuntimeException":
        assert found[0] == THRESHOLD
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/runbooks/{found[0]}.html")
    assert watched.errors == []


@pytest.mark.browser
@pytest.mark.notebook
@pytest.mark.parametrize("query, slug", [("tolerable failure threshold", THRESHOLD),
                                         ("while link file", ROCKSDB_HARDLINK),
                                         ("commit consumer offsets", KAFKA)])
def test_search_finds_a_runbook_by_message_text(built_site, watched, query, slug):
    _assert_published(built_site, slug)
    page = watched.open("trace.html")
    page.fill("#search-input", query)
    first = page.locator("#search-results a[data-slug]").first
    first.wait_for()
    assert first.get_attribute("data-slug") == slug
    assert watched.errors == []


@pytest.mark.browser
@pytest.mark.notebook
def test_every_exported_signature_compiles_in_the_browser(built_site, watched):
    exported = json.loads((built_site.out / "assets" / "signatures.json").read_text())
    page = watched.open("trace.html")
    state = page.evaluate("() => window.FlinkRunbooks.trace")
    assert state["errors"] == []
    assert state["compiled"] == state["patterns"] == sum(len(r["patterns"]) for r in exported["runbooks"])
    assert watched.errors == []


def _sample_lines() -> list[str]:
    """Real log lines: the production write-ups and the example incidents (lines that some pattern matches, and
    others)."""
    lines = []
    for path in sorted(INCIDENT_REPORTS.glob("*.txt")):
        lines += path.read_text(errors="replace").splitlines()
    for path in sorted(DATA.glob("*/*/**/*")):
        if path.is_file() and path.suffix in (".log", ".out", ".txt") and path.stat().st_size < 2_000_000:
            file_lines = path.read_text(errors="replace").splitlines()
            lines += file_lines[::7][:400]
    return list(dict.fromkeys(lines))[:20000]


@pytest.mark.browser
@pytest.mark.notebook
def test_browser_regexes_match_the_same_lines_as_the_detectors(built_site, watched):
    exported = json.loads((built_site.out / "assets" / "signatures.json").read_text())
    patterns = [p for r in exported["runbooks"] for p in r["patterns"]]
    lines = _sample_lines()
    expected = sorted([pi, li] for pi, p in enumerate(patterns) for li, line in enumerate(lines)
                      if re.search(p["python"], line))
    page = watched.open("trace.html")
    got = page.evaluate("""([patterns, lines]) => {
        const pairs = [];
        patterns.forEach((p, pi) => {
            const re = new RegExp(p.js, p.flags);
            lines.forEach((line, li) => { if (re.test(line)) pairs.push([pi, li]); });
        });
        return pairs;
    }""", [patterns, lines])
    assert len(expected) > 100, "the sample exercises the patterns"
    differ = [(patterns[pi]["source"], lines[li]) for pi, li in
              sorted({tuple(x) for x in expected} ^ {tuple(x) for x in got})]
    assert not differ, differ[:10]


def _paste(watched, text: str):
    page = watched.open("trace.html")
    page.fill("#trace-input", text)
    page.click("#trace-match")
    page.locator("#trace-results li[data-slug]").first.wait_for()
    return page


@pytest.mark.browser
@pytest.mark.notebook
def test_stack_trace_page_identifies_the_kafka_commit_failure_a_blog_post_shows(built_site, watched):
    _assert_published(built_site, KAFKA)
    lines = (INCIDENT_REPORTS / "flink-exceptions-in-deployment.txt").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if re.search(r"KafkaSourceReader .*Failed to$", line))
    end = next(i for i in range(start, len(lines)) if lines[i].startswith("Reason:"))
    page = _paste(watched, "\n".join(lines[start:end]))
    best = page.locator("#trace-results li[data-slug]").first
    assert best.get_attribute("data-slug") == KAFKA
    why = best.locator("table.why").inner_text()
    assert "commit consumer offsets for checkpoint" in why
    assert "CoordinatorNotAvailableException" in why
    assert watched.errors == []


@pytest.mark.browser
@pytest.mark.notebook
def test_stack_trace_page_identifies_the_rocksdb_hard_link_failure_of_a_knowledge_base_article(built_site, watched):
    _assert_published(built_site, ROCKSDB_HARDLINK)
    lines = (INCIDENT_REPORTS / "rocksdb-not-supported-on-nfs.txt").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if "Could not complete snapshot" in line)
    end = start + 1
    while end < len(lines) and (lines[end].lstrip().startswith("at ") or "Exception" in lines[end]):
        end += 1
    page = _paste(watched, "\n".join(lines[start:end]))
    best = page.locator("#trace-results li[data-slug]").first
    assert best.get_attribute("data-slug") == ROCKSDB_HARDLINK
    row = best.locator("tr", has_text="while link file to").first
    assert row.locator("mark").inner_text().lower().startswith("while link file to")
    assert row.locator("td.ln").inner_text() == "2"
    assert watched.errors == []


@pytest.mark.browser
@pytest.mark.notebook
def test_runbook_page_shows_its_plot_and_its_patch(threshold_site, browser_context):
    watched = _Watched(browser_context, threshold_site[1])
    page = watched.open(f"runbooks/{THRESHOLD}.html")
    img = page.locator(".jp-RenderedImage img").first
    img.scroll_into_view_if_needed()
    page.wait_for_function("img => img.complete && img.naturalWidth > 0", arg=img.element_handle())
    assert img.evaluate("img => img.naturalWidth") > 0
    # the example's store refuses writes: the fix is access for the Flink user, never more tolerance
    action = page.locator(".jp-RenderedHTMLCommon pre", has_text="chown -R <flink-user>").first
    assert action.is_visible()
    assert "tolerable-failed-checkpoints" not in " ".join(page.locator("pre.patch-diff").all_inner_texts())
    assert page.locator(".runbook-facts .versions").inner_text() == get_detector(THRESHOLD).versions
    assert page.locator(f'a.notebook-link[href="../notebooks/{THRESHOLD}.ipynb"]').count() == 1
    assert watched.errors == [] and watched.external == []
    watched.close()


@pytest.mark.browser
@pytest.mark.notebook
def test_every_link_of_every_page_resolves(built_site, watched):
    base = watched.base
    seen: set[str] = set()
    queue = [base + "index.html"]
    checked: set[str] = set()
    request = watched.page.context.request
    while queue:
        url = queue.pop()
        if url in seen:
            continue
        seen.add(url)
        page = watched.page
        page.goto(url, wait_until="load")
        refs = page.evaluate("""() => [
            ...[...document.querySelectorAll('a[href]')].map(a => a.href),
            ...[...document.querySelectorAll('link[href]')].map(l => l.href),
            ...[...document.querySelectorAll('script[src], img[src]')].map(e => e.src),
        ]""")
        for ref in refs:
            target = ref.split("#", 1)[0]
            if not target.startswith(base):
                assert not target.startswith("http://127.0.0.1"), f"{url} links to another local server: {ref}"
                continue
            if target.endswith(".html") and target not in seen:
                queue.append(target)
            elif target not in checked:
                checked.add(target)
                response = request.get(target)
                assert response.ok, f"{url} links to {ref}: HTTP {response.status}"
    pages = {p.relative_to(built_site.out).as_posix() for p in built_site.out.rglob("*.html")}
    assert {u.removeprefix(base) for u in seen} == pages, "every page is reachable from the index"
    assert watched.errors == [] and watched.external == []


# ====================================================================================================== one page


@pytest.fixture(scope="module")
def threshold_site(tmp_path_factory, spark):
    """A site with the one runbook whose example has the longest evidence lines (quick to build)."""
    out = tmp_path_factory.mktemp("site-one") / "site"
    report = site.build_site(str(out), runbooks=[THRESHOLD], jobs=1, spark=spark)
    assert report.ok and not report.failed
    with serve_directory(out) as base:
        yield out, base


@pytest.mark.browser
@pytest.mark.notebook
def test_evidence_table_shows_every_log_line_whole(threshold_site, browser_context):
    out, base = threshold_site
    watched = _Watched(browser_context, base)
    try:
        page = watched.page
        page.set_viewport_size({"width": 1280, "height": 900})
        watched.open(f"runbooks/{THRESHOLD}.html")
        cells = page.evaluate("""() => {
          const th = [...document.querySelectorAll('th')].find(t => t.textContent.trim() === 'why it matters');
          const table = th.closest('table');
          const col = [...th.parentElement.children].findIndex(c => c.textContent.trim() === 'text');
          return [...table.querySelectorAll('tbody tr')].map(tr => {
            const td = tr.children[col];
            let clip = td.parentElement;
            while (clip && getComputedStyle(clip).overflowX === 'visible') clip = clip.parentElement;
            const r = td.getBoundingClientRect(), c = clip.getBoundingClientRect();
            return {text: td.innerText, right: r.right, left: r.left, clipLeft: c.left, clipRight: c.right,
                    overflowing: td.scrollWidth > td.clientWidth + 1};
          });
        }""")
        assert len(cells) >= 3
        for cell in cells:
            # the whole cell lies inside what its scroll container shows, and nothing inside it overflows
            assert cell["left"] >= cell["clipLeft"] - 1 and cell["right"] <= cell["clipRight"] + 1, cell
            assert not cell["overflowing"], cell
        longest = max((c["text"] for c in cells), key=len)
        assert "Mkdirs failed to create" in "".join(c["text"] for c in cells)
        assert len(longest) > 300  # long log lines are there, wrapped, not cut
        assert watched.errors == [] and watched.external == []
    finally:
        watched.close()


@pytest.mark.browser
@pytest.mark.notebook
def test_evidence_table_reads_on_a_phone(threshold_site, browser_context):
    out, base = threshold_site
    watched = _Watched(browser_context, base)
    try:
        page = watched.page
        page.set_viewport_size({"width": 390, "height": 844})
        watched.open(f"runbooks/{THRESHOLD}.html")
        seen = page.evaluate("""() => {
          const th = [...document.querySelectorAll('th')].find(t => t.textContent.trim() === 'why it matters');
          const table = th.closest('table');
          const cells = [...table.querySelectorAll('tbody td')];
          return {height: table.getBoundingClientRect().height, title: document.querySelector('h1').getBoundingClientRect().top,
                  scrollWidth: document.scrollingElement.scrollWidth, width: innerWidth,
                  clipped: cells.filter(td => td.scrollWidth > td.clientWidth + 1 || td.getBoundingClientRect().right > innerWidth + 1).length,
                  labelled: cells.filter(td => td.dataset.label).length, cells: cells.length};
        }""")
        assert seen["title"] < 844 / 2, seen
        assert seen["scrollWidth"] <= seen["width"], seen
        assert seen["clipped"] == 0, seen
        assert seen["labelled"] == seen["cells"], "each cell says which column it is"
        assert seen["height"] < 4 * 844, seen
        assert watched.errors == [] and watched.external == []
    finally:
        watched.close()


@pytest.mark.browser
@pytest.mark.notebook
def test_decision_table_page_lists_every_runbook_and_links_the_published_ones(threshold_site, browser_context):
    out, base = threshold_site
    watched = _Watched(browser_context, base)
    try:
        page = watched.open("index.html")
        page.locator(".site-nav a", has_text="Decision table").click()
        page.wait_for_load_state("load")
        assert page.url.endswith("decisions.html")
        for slug in slugs():
            assert page.locator(f"h2#{slug}").count() == 1
        assert page.locator(f'h2#{THRESHOLD} a[href="runbooks/{THRESHOLD}.html"]').count() == 1
        rows = page.locator(f"details.section:has(h2#{THRESHOLD}) .table-scroll table.decisions tbody tr")
        assert rows.count() == len(get_detector(THRESHOLD).root_causes)
        undetermined = rows.filter(has_text="undetermined").first.text_content()  # its section is closed
        assert "Collect next:" in undetermined
        assert watched.errors == [] and watched.external == []
    finally:
        watched.close()
