"""Text from an incident stays text wherever it is shown.

Log lines, file names, config keys and values, job and operator names and Kafka client dumps are written by whoever
can get a string into a Flink log. Script planted in each of them must not run in the pages triage (and so serve)
and the site write, must not render as HTML or a link in report.md, and its escape sequences must not reach a
terminal. The fast tests check each renderer; the browser tests (marked `browser` and `notebook`, as the site's) open
every page written from a planted incident in Chromium.
"""
from __future__ import annotations

import contextlib
import pathlib
import re
import shutil

import nbformat
import pytest
from bs4 import BeautifulSoup

from corpus import DATA, ROOT
from support import chromium, serve_directory
from flink_runbooks.render.html_table import html_table
from flink_runbooks.render.markdown import code_block, code_span, render_markdown
from flink_runbooks.render.terminal import printable

USER_CODE = "user-code-exception"
RESTARTS = "restart-strategy-exhausted"
SOURCE = DATA / USER_CODE / "poison-record-1.20"

# One payload per place text enters; each sets window.__pwned to its place's name if it ever runs. Attributes are
# quoted, so that Markdown, too, would take them for HTML.
PAYLOADS = {
    "message": "<img src=\"x\" onerror=\"window.__pwned='message'\">",
    "frame": "<svg onload=\"window.__pwned='frame'\">",
    "file": "<img src=\"x\" onerror=\"window.__pwned='file'\">",
    "config key": "<svg onload=\"window.__pwned='config-key'\">",
    "config value": "<script>window.__pwned='config-value'</script>",
    "job": "<script>window.__pwned='job'</script>",
    "operator": "<img src=\"x\" onerror=\"window.__pwned='operator'\">",
    "kafka dump": "<svg onload=\"window.__pwned='kafka'\">",
}
# Where the user-code-exception runbook shows each (summary, evidence, config and warnings).
SHOWN_ON_THE_RUNBOOK_PAGE = ("message", "frame", "file", "config key", "config value", "operator")
# Terminal escape sequences: window title, screen clear, an OSC-8 hyperlink, a C1 CSI, DEL, bell.
ESCAPES = "\x1b]0;owned\x07\x1b[2J\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\\x9b31m\x7f"


def plant(dest: pathlib.Path, *, escapes: bool = False) -> pathlib.Path:
    """The poison-record example with a payload in every place text enters (escape sequences in the message and the
    file name too, with ``escapes``)."""
    (dest / "log").mkdir(parents=True)
    conf = (SOURCE / "flink-conf.yaml").read_text()
    conf = conf.replace("restart-strategy.fixed-delay.delay: 2 s", "restart-strategy.fixed-delay.delay: 2 s\n"
                        f"execution.checkpointing.interval: {PAYLOADS['config value']}")
    conf += f"{PAYLOADS['config key']}: 1\n{PAYLOADS['config key']}: 2\n"  # set twice: a warning names it
    (dest / "flink-conf.yaml").write_text(conf)
    message = PAYLOADS["message"] + (ESCAPES if escapes else "")
    for name in ("flink-flink-standalonesession-0-vm.log", "flink-flink-taskexecutor-0-vm.log"):
        text = (SOURCE / "log" / name).read_text()
        text = text.replace('For input string: "n/a"', f'For input string: "{message}"')
        text = text.replace("OrdersJob.java:108", f"{PAYLOADS['frame']}.java:108")
        text = text.replace("orders-poison", f"orders-{PAYLOADS['job']}")
        text = text.replace("-> Filter ->", f"-> {PAYLOADS['operator']} ->")
        if "taskexecutor" in name:
            lines = text.splitlines(keepends=True)
            at = next(i for i, line in enumerate(lines) if "switched from DEPLOYING to INITIALIZING" in line)
            lines.insert(at, f"{lines[at][:23]} INFO  org.apache.kafka.clients.consumer.ConsumerConfig [] - "
                             f"ConsumerConfig values: \n\tbootstrap.servers = [broker-1:9092]\n"
                             f"\tclient.id = {PAYLOADS['kafka dump']}\n\tgroup.id = orders\n\n")
            text = "".join(lines)
            name = name.replace("-vm.log", f"-{PAYLOADS['file']}{chr(27) + '[2J' if escapes else ''}.log")
        (dest / "log" / name).write_text(text)
    return dest


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """The planted incident, read in this process, and its diagnosis."""
    from flink_runbooks.diagnose import ingest
    from flink_runbooks.diagnose import run_detectors

    path = plant(tmp_path_factory.mktemp("planted") / "incident", escapes=True)
    incident = ingest([str(path)], None)
    return path, run_detectors(incident)


def _markup_from_input(html: str) -> list[str]:
    """Elements and attributes that only a payload would have put there."""
    soup = BeautifulSoup(html, features="html.parser")
    found = [str(t)[:80] for t in soup.find_all(["script", "img", "svg", "iframe", "object", "embed"])]
    found += [f"{t.name} {a}" for t in soup.find_all(True) for a in t.attrs if a.lower().startswith("on")]
    found += [f"a href={t['href']}" for t in soup.find_all("a", href=True) if t["href"].strip().lower().startswith("javascript:")]
    return found


# ====================================================================================================== HTML tables


def test_table_cells_and_headers_are_text():
    rows = [{"file": PAYLOADS["file"], "text": "line 1\n  at <init>(Foo.java:1)\n" + PAYLOADS["message"]},
            {"file": "chown -R <flink-user> /data", "text": "a & b \"quoted\" 'single'"}]
    page = html_table(rows, preformatted=("text",), code=("file",))
    assert _markup_from_input(page) == []
    soup = BeautifulSoup(page, features="html.parser")
    assert [th.get_text() for th in soup.select("thead th")] == ["file", "text"]
    cells = [[td.get_text() for td in tr.select("td")] for tr in soup.select("tbody tr")]
    assert cells == [[r["file"], r["text"]] for r in rows], "placeholders and payloads show literally"
    text_cells = soup.select("tbody td:nth-child(2)")
    assert all("pre-wrap" in td["style"] and "monospace" in td["style"] for td in text_cells)
    assert not soup.select("tbody td:nth-child(1)[style]")


def test_a_header_from_the_input_is_text_too():
    page = html_table([{PAYLOADS["config key"]: 1}])
    assert _markup_from_input(page) == []
    assert BeautifulSoup(page, features="html.parser").th.get_text() == PAYLOADS["config key"]


def test_every_runbook_display_escapes_what_the_incident_says(planted):
    from flink_runbooks.notebook import RunbookRun

    _, diagnosis = planted
    run = RunbookRun(USER_CODE, diagnosis.incident, diagnosis,
                     [f for f in diagnosis.findings if f.runbook == USER_CODE])
    assert run.findings, "the planted incident is still a user-code exception"
    displays = {"summary": run.summary(), "evidence": run.evidence(), "details": run.details(),
                "patches": run.patches(), "inputs": run.inputs(),
                "config": run.config(["execution.checkpointing.interval", PAYLOADS["config key"]])}
    text = ""
    for name, shown in displays.items():
        html = shown.data if hasattr(shown, "data") else shown._repr_html_()
        assert _markup_from_input(html) == [], f"{name} renders markup from the incident"
        text += BeautifulSoup(html, features="html.parser").get_text()
    for place in ("message", "frame", "file", "operator", "config key", "config value"):
        assert PAYLOADS[place] in text, f"the planted {place} is shown as text"


# ====================================================================================================== report.md


def _render_markdown(md: str) -> str:
    """A permissive renderer: raw HTML passes through and bare URLs become links, as in many Markdown viewers."""
    import mistune

    return mistune.create_markdown(escape=False, plugins=["table", "url"])(md)


@pytest.mark.parametrize("text", ["plain", "a ` b", "``", "`starts", "ends`", " both ", "x ``` y ```` z",
                                  "pipe | and \\ backslash", "two\nlines", "<b>bold</b> [l](javascript:x)"])
def test_code_span_holds_any_text(text):
    html = _render_markdown(f"before {code_span(text)} after")
    soup = BeautifulSoup(html, features="html.parser")
    assert len(soup.find_all("code")) == 1 and soup.find_all(True)[0].name == "p"
    assert soup.code.get_text() == text.replace("\n", "\\n")


def test_code_block_cannot_be_closed_by_its_text():
    text = "```\n</code></pre><script>window.__pwned=1</script>\n````\n- [x](javascript:alert(1))"
    html = _render_markdown("- item\n\n" + "\n".join(code_block(text, indent="  ")) + "\n\nafter")
    soup = BeautifulSoup(html, features="html.parser")
    assert [p.get_text() for p in soup.find_all("pre")] == [text + "\n"]
    assert _markup_from_input(html) == [] and soup.find("a") is None


def test_report_md_shows_input_only_as_code(planted, tmp_path):
    from flink_runbooks.apps.triage import RunbookResult, TriageReport

    _, diagnosis = planted
    diagnosis.incident.warnings.append("odd file [click](javascript:window.__pwned=1) <b>x</b> ``` | ` end")
    try:
        html_path = tmp_path / "runbooks" / f"{USER_CODE}.html"
        report = TriageReport(tmp_path, diagnosis, runbooks=[
            RunbookResult(USER_CODE, "ok", 1.0, None, None, str(html_path)),
            RunbookResult(RESTARTS, "failed", 1.0, f"cell 3: ValueError: {PAYLOADS['job']} | <i>x</i>", None, None)])
        md = render_markdown(report)
    finally:
        diagnosis.incident.warnings.pop()
    assert "\x1b" not in md and "\x9b" not in md, "no terminal escape sequence in the report"
    html = _render_markdown(md)
    assert _markup_from_input(html) == []
    soup = BeautifulSoup(html, features="html.parser")
    assert [a["href"] for a in soup.find_all("a")] == [f"runbooks/{USER_CODE}.html"], "the only link is ours"
    assert not soup.find_all(["b", "i"]), "no markup from the input"
    code = "\n".join(c.get_text() for c in soup.find_all("code"))
    for place in ("message", "frame", "file", "operator", "config key", "job"):
        assert PAYLOADS[place] in code, f"the planted {place} is shown, as code"
    assert "[click](javascript:window.__pwned=1)" in code
    headings = [h.get_text() for h in soup.find_all(["h1", "h2"])]
    assert headings[0] == "Triage report" and any(h.startswith("Primary: ") for h in headings), "our words stay prose"
    assert len(soup.find_all("table")) == 1 and len(soup.table.find_all("tr")) == 3


# ====================================================================================================== terminal


def test_printable_escapes_control_characters():
    assert printable("a\tb\nc") == "a\tb\nc"
    assert printable("title\x1b]0;x\x07 \r\x00\x7f\x85\x9b \u202eevil") == \
        "title\\x1b]0;x\\x07 \\r\\x00\\x7f\\x85\\x9b \\u202eevil"
    assert printable("two\nlines", newlines=False) == "two\\nlines"
    assert printable("é ü 日本 → ✓") == "é ü 日本 → ✓"


def test_terminal_output_carries_no_control_character_from_the_input(planted):
    from flink_runbooks.render.report import to_text

    _, diagnosis = planted
    for color in (False, True):
        text = to_text(diagnosis, color=color)
        if color:
            text = text.replace("\x1b[1m", "").replace("\x1b[0m", "")  # our own bold, nothing else
        bad = sorted({hex(ord(c)) for c in text if (ord(c) < 0x20 and c not in "\n\t") or 0x7f <= ord(c) <= 0x9f})
        assert bad == [], f"control characters reach the terminal: {bad}"
        assert "\\x1b]0;owned\\x07" in text, "the sequence is shown, escaped, for the engineer to see"
        assert "\\x1b[2J.log" in text, "a file name's escape sequence too"
    warning = next(line for line in to_text(diagnosis).splitlines() if "set again" in line)
    assert warning.startswith("warning: ")


# ====================================================================================================== browser


@pytest.fixture(scope="module")
def browser():
    with chromium(prefix="untrusted-browser-") as context:
        yield context


@contextlib.contextmanager
def _opened(browser, url: str):
    """The page at ``url`` with every dialog recorded (and dismissed) and every request off this machine refused."""
    page = browser.new_page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.route("**/*", lambda route: route.continue_() if re.match(r"(file:|data:|http://127\.0\.0\.1[:/])",
                                                                    route.request.url) else route.abort())
    page.goto(url, wait_until="load")  # images (and their onerror) hold the load event back; scripts run before it
    try:
        yield page, dialogs
    finally:
        page.close()


def _assert_nothing_ran(browser, url: str) -> str:
    """Open ``url``: no payload ran, no dialog opened; returns the page's visible text."""
    with _opened(browser, url) as (page, dialogs):
        assert page.evaluate("() => window.__pwned === undefined"), \
            f"{url}: script from the incident ran ({page.evaluate('() => window.__pwned')})"
        assert dialogs == [], f"{url}: {dialogs}"
        return page.evaluate("() => document.body.innerText")


def _hostile_notebook(path: pathlib.Path) -> pathlib.Path:
    """An executed notebook whose outputs carry markup: raw HTML and JavaScript, as a careless display would."""
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell("run.summary()")
    cell.outputs = [nbformat.v4.new_output("display_data", data={
        "text/html": "<p>shown</p><img src=x onerror=window.__pwned='html-output'><script>window.__pwned='script'</script>"}),
        nbformat.v4.new_output("display_data", data={"application/javascript": "window.__pwned='js-output'"})]
    nb.cells = [nbformat.v4.new_markdown_cell("# Runbook"), cell]
    nbformat.write(nb, path)
    return path


@pytest.mark.browser
@pytest.mark.notebook
def test_triage_page_forbids_script_and_loads_nothing(browser, tmp_path):
    from flink_runbooks.render.notebook_html import render_html

    page = render_html(_hostile_notebook(tmp_path / "hostile.ipynb"))
    html = page.read_text()
    soup = BeautifulSoup(html, features="html.parser")
    assert soup.head.find("script") is None and soup.find("script", src=True) is None, \
        "no require.js, MathJax, Mermaid or widget manager"
    assert "window.__pwned='js-output'" not in html, "JavaScript outputs are left out"
    assert not re.findall(r'\b(?:src|href)="(?:https?:)?//', html), "nothing from the network"
    csp = soup.find("meta", attrs={"http-equiv": "Content-Security-Policy"})
    assert csp is not None and "script-src 'none'" in csp["content"]
    assert "shown" in _assert_nothing_ran(browser, page.as_uri())


@pytest.mark.browser
@pytest.mark.notebook
def test_site_pages_run_only_the_sites_own_scripts(browser, tmp_path):
    from flink_runbooks.apps import site

    slug = "checkpoint-tolerable-failure-threshold"
    runbooks, _ = site.collect_runbooks(slugs=[slug])
    out = tmp_path / "site"
    out.mkdir()
    executions = {slug: site.Execution(slug, "ok", 1.0, None, _hostile_notebook(tmp_path / "executed.ipynb"))}
    site.render_site(out, runbooks, executions, [], built="test")
    with serve_directory(out) as base:
        for path in sorted(out.rglob("*.html")):
            html = path.read_text()
            assert "Content-Security-Policy" in html and "script-src 'self'" in html, path.name
            _assert_nothing_ran(browser, base + path.relative_to(out).as_posix())
        with _opened(browser, base + f"runbooks/{slug}.html") as (page, _):
            page.fill("#search-input", "tolerable failure threshold")
            first = page.locator("#search-results a[data-slug]").first
            first.wait_for()
            assert first.get_attribute("data-slug") == slug, "the site's own search script runs"
            assert page.evaluate("() => window.__pwned === undefined")


@pytest.fixture(scope="module")
def planted_outputs(tmp_path_factory):
    """triage on the planted incident (two runbooks executed by papermill) and a site built from it."""
    from flink_runbooks.apps import site
    from flink_runbooks.apps.triage import triage

    base = tmp_path_factory.mktemp("planted-outputs")
    incident = plant(base / "incident")
    report = triage([str(incident)], base / "triage", runbooks=[USER_CODE, RESTARTS], jobs=2)
    assert [r.status for r in report.runbooks] == ["ok", "ok"], [r.error for r in report.runbooks]

    # a repository whose user-code-exception notebook has the planted incident as its example
    repo = base / "repo"
    (repo / "runbooks").mkdir(parents=True)
    shutil.copytree(incident, repo / "data" / "planted")
    nb = nbformat.read(ROOT / "runbooks" / f"{USER_CODE}.ipynb", as_version=4)
    params = next(c for c in nb.cells if "parameters" in c.metadata.get("tags", []))
    params.source = re.sub(r'incident_paths = \[[^\]]*\]', 'incident_paths = ["data/planted"]', params.source)
    nbformat.write(nb, repo / "runbooks" / f"{USER_CODE}.ipynb")
    built = site.build_site(str(base / "site"), runbooks=[USER_CODE], root=repo, jobs=1)
    assert built.ok, [r.error for r in built.failed]
    return base / "triage", base / "site"


@pytest.mark.slow
@pytest.mark.notebook
@pytest.mark.browser
def test_no_page_written_from_a_planted_incident_runs_its_script(planted_outputs, browser):
    triage_out, site_out = planted_outputs
    pages = sorted(triage_out.rglob("*.html"))
    assert {p.name for p in pages} == {f"{USER_CODE}.html", f"{RESTARTS}.html"}
    for path in pages:  # opened from the disk, as an engineer opens them
        text = _assert_nothing_ran(browser, path.as_uri())
        if path.stem == USER_CODE:
            for place in SHOWN_ON_THE_RUNBOOK_PAGE:
                assert PAYLOADS[place] in text, f"{path.name}: the planted {place} is visible as text"
    with serve_directory(site_out) as base:
        site_pages = sorted(p.relative_to(site_out).as_posix() for p in site_out.rglob("*.html"))
        assert f"runbooks/{USER_CODE}.html" in site_pages and "index.html" in site_pages
        for name in site_pages:
            text = _assert_nothing_ran(browser, base + name)
            if name == f"runbooks/{USER_CODE}.html":
                for place in SHOWN_ON_THE_RUNBOOK_PAGE:
                    assert PAYLOADS[place] in text, f"{name}: the planted {place} is visible as text"
    md = _render_markdown((triage_out / "report.md").read_text())
    assert _markup_from_input(md) == []


def test_a_file_name_with_dollar_signs_is_drawn_on_the_timeline_as_it_is():
    import io

    from corpus import incident_from_text
    from flink_runbooks import notebook as nb
    from flink_runbooks.diagnose import run_detectors

    incident = incident_from_text(
        "2026-11-22 02:54:11,000 ERROR org.apache.flink.runtime.taskmanager.Task [] - Source (1/1) failed.\n"
        "java.lang.IllegalStateException: broken\n", file=r"tm-$\frac{x$.log")
    run = nb.RunbookRun("user-code-exception", incident, run_detectors(incident))
    figure = nb.event_timeline(run)
    figure.savefig(io.BytesIO(), format="png")  # math markup would fail to parse here
    assert [t.get_text() for t in figure.axes[0].get_yticklabels()] == [r"tm-\$\frac{x\$.log"]
