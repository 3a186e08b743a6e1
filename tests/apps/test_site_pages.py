"""What a reader sees on the site's pages in headless Chromium, on a desktop and on a 390 px phone: the title on the
first screen, no sideways page scroll, the paste page's answer, the keys page's release picker, the decisions page's
sections. The pages are rendered from the committed notebooks without executing them (the pages' frame, not the
notebooks' outputs, is under test here; test_site.py covers the executed pages)."""
from __future__ import annotations

import gzip

import pytest

from corpus import DATA
from support import chromium, serve_directory
from flink_runbooks.apps import site, site_keys
from flink_runbooks.detectors import slugs

pytestmark = [pytest.mark.browser, pytest.mark.xdist_group("test_site_pages")]

DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}
SCREENS = pytest.mark.parametrize("screen", [DESKTOP, PHONE], ids=["desktop", "phone"])
ROCKSDB_RESTORE = "rocksdb-restore-corruption"


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    """Every page of the site, the runbook pages from the notebooks as committed (quick: nothing is executed)."""
    out = tmp_path_factory.mktemp("site-pages")
    runbooks, _ = site.collect_runbooks()
    executions = {rb.slug: site.Execution(rb.slug, "ok") for rb in runbooks}
    site.render_site(out, runbooks, executions, site.patched_keys(runbooks, []), built="test build")
    with serve_directory(out) as base:
        yield runbooks, base


@pytest.fixture(scope="module")
def context():
    with chromium(prefix="site-pages-") as browser_context:
        yield browser_context


@pytest.fixture
def page(context, rendered):
    _, base = rendered
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    # nothing may come from elsewhere: any request off the local server fails the page
    tab.route("**/*", lambda route: route.continue_() if route.request.url.startswith(base) else route.abort())
    tab.open = lambda path: (tab.goto(base + path, wait_until="load"), tab)[1]
    tab.errors = errors
    yield tab
    assert errors == []
    tab.close()


def _layout(tab) -> dict:
    return tab.evaluate("""() => ({
        scrollWidth: document.scrollingElement.scrollWidth, width: innerWidth, height: innerHeight,
        titleTop: document.querySelector('h1').getBoundingClientRect().top})""")


@SCREENS
@pytest.mark.parametrize("path", ["index.html", "keys.html", "decisions.html", "trace.html",
                                  f"runbooks/{ROCKSDB_RESTORE}.html", "runbooks/sql-connector-missing.html"])
def test_the_title_is_on_the_first_screen_and_the_page_never_scrolls_sideways(page, screen, path):
    page.set_viewport_size(screen)
    page.open(path)
    layout = _layout(page)
    assert layout["scrollWidth"] <= layout["width"], layout
    assert 0 <= layout["titleTop"] < layout["height"] / 2, layout


@SCREENS
def test_a_runbook_page_shows_its_facts_after_its_title_and_its_placeholders(page, screen):
    page.set_viewport_size(screen)
    page.open("runbooks/sql-connector-missing.html")
    title, facts = (page.locator(s).first.bounding_box() for s in ("h1", ".runbook-facts"))
    assert title["y"] < facts["y"] or title["x"] < facts["x"], (title, facts)
    assert "flink-connector-<name>" in page.locator("article").inner_text()


def _rocksdb_restore_trace() -> str:
    """A whole RocksDB restore failure as a TaskManager logged it: five exceptions deep, bad checksum at the bottom."""
    log = DATA / ROCKSDB_RESTORE / "remote-checkpoint-corrupt-v1.20" / "log" / "flink-flink-taskexecutor-0-vm.log.gz"
    lines = gzip.open(log, "rt").read().splitlines()
    start = next(i for i, line in enumerate(lines) if line == "java.lang.Exception: Exception while creating StreamOperatorStateContext.")
    end = next(i for i in range(start + 1, len(lines)) if lines[i][:4].isdigit())
    trace = lines[start - 1:end]
    assert sum(line.startswith("Caused by:") for line in trace) >= 4
    return "\n".join(trace)


# A PyFlink job's own KeyError, as the Java side reports it: an io.grpc frame and a jar of the job, nothing Flink
# names as a failure of its own.
PYFLINK_KEY_ERROR = """\
2024-03-05 11:02:17,431 WARN  org.apache.flink.runtime.taskmanager.Task [] - Map -> Sink (1/1)#0 switched from RUNNING to FAILED.
java.lang.RuntimeException: Error received from SDK harness for instruction 4: Traceback (most recent call last):
  File "/opt/venv/lib/python3.10/site-packages/apache_beam/runners/worker/sdk_worker.py", line 287, in _execute
    response = task()
  File "/opt/job/enrich.py", line 41, in map
    return self.lookup[value['country']]
KeyError: 'XK'
\tat org.apache.beam.runners.fnexecution.control.FnApiControlClient$ResponseStreamObserver.onNext(FnApiControlClient.java:180) ~[blob_p-5c1a2b3c4d5e6f708192a3b4c5d6e7f8091a2b3c-0d1e2f3a4b5c6d7e8f90a1b2c3d4e5f6:?]
\tat io.grpc.stub.ServerCalls$StreamingServerCallHandler$StreamingServerCallListener.onMessage(ServerCalls.java:262) ~[flink-python-1.18.1.jar:1.18.1]
\tat java.lang.Thread.run(Thread.java:829) ~[?:?]"""

# A client library's failure no runbook covers (the Redis pool of a job's own sink).
OUTSIDE_THE_CATALOGUE = """\
2024-03-05 11:02:17,431 WARN  org.apache.flink.runtime.taskmanager.Task [] - Sink: cache (1/1)#0 switched from RUNNING to FAILED.
java.lang.RuntimeException: redis.clients.jedis.exceptions.JedisConnectionException: Could not get a resource from the pool
\tat redis.clients.jedis.util.Pool.getResource(Pool.java:84)
\tat redis.clients.jedis.JedisPool.getResource(JedisPool.java:370)"""


def _paste(tab, text: str):
    tab.open("trace.html")
    tab.fill("#trace-input", text)
    tab.click("#trace-match")
    tab.locator("#trace-results > li").first.wait_for()
    return tab


@SCREENS
def test_the_paste_page_names_the_runbook_of_a_whole_catalogue_trace(page, screen):
    page.set_viewport_size(screen)
    _paste(page, _rocksdb_restore_trace())
    matches = page.locator("#trace-results li[data-slug]")
    assert matches.first.get_attribute("data-slug") == ROCKSDB_RESTORE
    assert page.locator("#trace-results .badge-best").count() == 1
    assert matches.count() <= 3, [matches.nth(i).get_attribute("data-slug") for i in range(matches.count())]
    why = " ".join(matches.first.locator("td.by").all_inner_texts())
    assert "bad checksum type" in why and "|" not in why and "\\" not in why, why
    assert matches.first.locator("mark", has_text="bad checksum type").count() >= 1
    layout = _layout(page)
    assert layout["scrollWidth"] <= layout["width"], layout


def test_the_paste_page_reads_a_trace_pasted_as_one_escaped_line(page):
    _paste(page, _rocksdb_restore_trace().replace("\n", "\\n").replace("\t", "\\t"))
    best = page.locator("#trace-results li[data-slug]").first
    assert best.get_attribute("data-slug") == ROCKSDB_RESTORE
    shown = best.locator("td.text").all_inner_texts()
    assert shown and max(map(len, shown)) < 200, "each row shows its line, not the whole paste"
    assert int(best.locator("td.ln").first.inner_text()) > 1


@SCREENS
def test_the_paste_page_says_plainly_when_nothing_in_the_catalogue_matches(page, screen):
    page.set_viewport_size(screen)
    _paste(page, OUTSIDE_THE_CATALOGUE)
    assert page.locator("#trace-results li[data-slug]").count() == 0
    answer = page.locator("#trace-results .trace-none")
    assert answer.is_visible()
    assert answer.locator("h2").inner_text().startswith("No match")
    assert "flink-runbooks diagnose -" in answer.inner_text()
    assert "best match" not in page.locator("#trace-results").inner_text()


def test_a_python_function_failing_inside_a_java_trace_names_the_pyflink_runbook(page):
    _paste(page, PYFLINK_KEY_ERROR)
    best = page.locator("#trace-results li[data-slug]").first
    assert best.get_attribute("data-slug") == "pyflink-udf-failure"


PLANTED = '<img src="planted.png" onerror="window.planted = 1"><b id="planted">bold</b>'


def test_markup_in_a_pasted_trace_shows_as_text(page):
    """A trace carries whatever the job logged; markup in it is shown, never run or drawn."""
    trace = _rocksdb_restore_trace().replace("bad checksum type", "bad checksum type " + PLANTED, 1)
    _paste(page, trace)
    results = page.locator("#trace-results")
    assert results.locator("li[data-slug]").first.get_attribute("data-slug") == ROCKSDB_RESTORE
    assert results.locator("img, #planted").count() == 0
    assert '<b id="planted">bold</b>' in results.inner_text()
    assert page.evaluate("() => window.planted") is None


def test_markup_typed_into_the_search_shows_as_text(page):
    page.open("index.html")
    page.fill("#search-input", PLANTED)
    page.locator("#search-results .empty").wait_for()
    assert page.locator("#search-results img, #planted").count() == 0
    assert page.evaluate("() => window.planted") is None


def test_an_empty_search_points_to_the_paste_page(page):
    page.open("index.html")
    page.fill("#search-input", "zzqx nothing like this")
    link = page.locator("#search-results .empty a.paste-link")
    link.wait_for()
    assert link.get_attribute("href") == "trace.html"


def test_index_cards_show_flink_s_message_not_a_regex(page, rendered):
    runbooks, _ = rendered
    page.open("index.html")
    for rb in runbooks:
        card = page.locator(f'li.runbook-card[data-slug="{rb.slug}"]')
        text = card.inner_text()
        if rb.message:
            assert rb.message in text
        assert "(?:" not in text and "\\d" not in text and "\\S" not in text, f"{rb.slug}: {text}"


@SCREENS
def test_the_keys_page_is_one_table_with_a_release_picker(page, screen, rendered):
    runbooks, _ = rendered
    sections = site_keys.key_sections(site.patched_keys(runbooks, []))
    page.set_viewport_size(screen)
    page.open("keys.html")
    assert page.locator("#release-keys table.keys").count() == 1
    options = page.locator("#release-picker option")
    assert options.count() == len(sections)
    visible = page.locator("#release-keys tbody:visible")
    assert visible.count() == 1 and visible.get_attribute("data-release") == sections[-1].anchor
    page.select_option("#release-picker", sections[0].anchor)
    assert visible.count() == 1 and visible.get_attribute("data-release") == sections[0].anchor
    assert visible.locator("tr").count() == len(sections[0].rows)
    layout = _layout(page)
    assert layout["scrollWidth"] <= layout["width"], layout


def test_a_link_to_a_release_line_picks_it(page, rendered):
    runbooks, _ = rendered
    oldest = site_keys.key_sections(site.patched_keys(runbooks, []))[0].anchor
    page.open(f"keys.html#{oldest}")
    assert page.locator("#release-picker").input_value() == oldest
    assert page.locator("#release-keys tbody:visible").get_attribute("data-release") == oldest


@SCREENS
def test_the_decisions_page_has_one_closed_section_per_runbook(page, screen):
    page.set_viewport_size(screen)
    page.open("decisions.html")
    sections = page.locator("details.section")
    assert sections.count() == len(slugs())
    assert page.locator("details.section[open]").count() == 0
    assert page.evaluate("document.scrollingElement.scrollHeight") < 20 * screen["height"]
    section = page.locator(f"details.section:has(h2#{ROCKSDB_RESTORE})")
    section.locator("summary").click(position={"x": 4, "y": 10})  # the marker: the heading holds a link
    table = section.locator("table.decisions")
    assert table.is_visible()
    layout = _layout(page)
    assert layout["scrollWidth"] <= layout["width"], layout


def test_a_link_into_the_decisions_page_opens_its_section(page):
    page.open(f"decisions.html#{ROCKSDB_RESTORE}")
    assert page.locator(f"details.section:has(h2#{ROCKSDB_RESTORE})").get_attribute("open") is not None
    assert page.locator(f"details.section:has(h2#{ROCKSDB_RESTORE}) table.decisions").is_visible()
