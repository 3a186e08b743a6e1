"""The triage page of an executed runbook: the verdict on the first screen, no code and no prompts, facts in words,
diffs formatted, nothing loaded from the network. Built from a notebook whose outputs are the runbook's own displays,
so no kernel is needed."""
from __future__ import annotations

import re

import nbformat
import pytest
from bs4 import BeautifulSoup

from corpus import example

SLUG = "checkpoint-tolerable-failure-threshold"


def _output(display) -> nbformat.NotebookNode:
    return nbformat.v4.new_output("display_data", data={"text/html": display.data})


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> str:
    from flink_runbooks import notebook as nb
    from flink_runbooks.render.notebook_html import notebook_page

    incident = [str(example(SLUG, "storage-permission-denied"))]
    run = nb.open_runbook(SLUG, incident)
    restarts = nb.open_runbook("restart-strategy-exhausted", incident)  # its patches hold a config diff
    notebook = nbformat.v4.new_notebook()
    parameters = nbformat.v4.new_code_cell('incident_paths = ["data/x"]', metadata={"tags": ["parameters"]})
    setup = nbformat.v4.new_code_cell(f'run = nb.open_runbook("{SLUG}", incident_paths)', metadata={"tags": ["setup"]})
    cells = {source: nbformat.v4.new_code_cell(source, execution_count=i)
             for i, source in enumerate(["run.summary()", "run.details()", "run.patches()"], 1)}
    cells["run.summary()"].outputs = [_output(run.summary())]
    cells["run.details()"].outputs = [_output(run.details())]
    cells["run.patches()"].outputs = [_output(run.patches()), _output(restarts.patches())]
    notebook.cells = [nbformat.v4.new_markdown_cell("# Exceeded checkpoint tolerable failure threshold\n\n"
                                                    + "A long introduction of the runbook. " * 40),
                      parameters, setup,
                      nbformat.v4.new_markdown_cell("## Meaning\n\nWhat the failure means."),
                      nbformat.v4.new_markdown_cell("## Diagnosis"), cells["run.summary()"], cells["run.details()"],
                      nbformat.v4.new_markdown_cell("## Mitigation"), cells["run.patches()"]]
    path = tmp_path_factory.mktemp("nb") / f"{SLUG}.ipynb"
    nbformat.write(notebook, path)
    return notebook_page(path)


def test_the_verdict_comes_right_under_the_title(page):
    text = BeautifulSoup(page, features="html.parser").body.get_text()
    assert text.index("Exceeded checkpoint tolerable failure threshold") < text.index("Root cause:") \
        < text.index("A long introduction") < text.index("Meaning")
    assert text.index("Do now") < text.index("A long introduction"), "what to do is on the first screen too"
    assert "confidence high" in text
    assert "chown -R <flink-user>:<flink-group>" in text, "placeholders of a command show as written"


def test_no_code_and_no_prompts(page):
    soup = BeautifulSoup(page, features="html.parser")
    assert "In&nbsp;[" not in page and not re.search(r"In\s*\[\d*\]:", soup.get_text())
    assert "Out[" not in soup.get_text()
    assert "run.summary()" not in soup.get_text() and "open_runbook(" not in soup.get_text()


def test_nothing_is_loaded_from_the_network(page):
    soup = BeautifulSoup(page, features="html.parser")
    assert soup.find("script") is None, "no require.js, MathJax or widget script"
    loaded = [t.get("src") or t.get("href") for t in soup.find_all(["script", "link", "img", "iframe"])]
    assert not [url for url in loaded if url and re.match(r"(?:https?:)?//", url)]
    assert "mathjax" not in page.lower()


def test_facts_read_as_words_and_the_diff_as_a_diff(page):
    soup = BeautifulSoup(page, features="html.parser")
    cells = [td.get_text() for td in soup.find_all("td")]
    assert not [c for c in cells if c in ("True", "False") or c.startswith(("{'", "['"))], cells
    added = [s.get_text() for s in soup.select("pre.patch-diff span.diff-add")]
    assert any(line.startswith("+execution.checkpointing.externalized-checkpoint-retention") for line in added)
    assert [s.get_text() for s in soup.select("pre.patch-diff span.diff-file")] == \
        ["--- a/flink-conf.yaml", "+++ b/flink-conf.yaml"]


@pytest.mark.parametrize("value,shown", [
    (True, "yes"), (False, "no"), ({"tasks cancelled": 1}, "tasks cancelled: 1"), ([], "none"),
    ([43, 44, 45], "43, 44, 45"), ("201326592b", "192 MiB (201326592b)"), (1.05, "1.05"), ("10 s", "10 s"),
])
def test_a_fact_is_shown_in_words(value, shown):
    from flink_runbooks.render.html_table import fact_text

    assert fact_text(value) == shown


def test_a_timeline_of_one_event_shows_minutes_around_it_not_years():
    import matplotlib.dates as mdates
    import pandas as pd

    from corpus import incident_from_text
    from flink_runbooks import notebook as nb
    from flink_runbooks.diagnose import run_detectors

    incident = incident_from_text(
        "2026-11-22 02:54:11,000 ERROR org.apache.flink.runtime.taskmanager.Task [] - Source (1/1) failed.\n"
        "java.lang.IllegalStateException: broken\n")
    run = nb.RunbookRun("user-code-exception", incident, run_detectors(incident))
    left, right = nb.event_timeline(run).axes[0].get_xlim()
    event = mdates.date2num(pd.Timestamp("2026-11-22 02:54:11"))
    assert left < event < right
    assert (right - left) * 24 * 60 <= 5, "a few minutes of context (limits are in days)"


def test_a_checkpoint_timeline_of_one_attempt_shows_minutes_around_it():
    import matplotlib.dates as mdates
    import pandas as pd

    from corpus import incident_from_text
    from flink_runbooks import notebook as nb
    from flink_runbooks.diagnose import run_detectors

    incident = incident_from_text(
        "2026-11-22 02:54:57,192 INFO  org.apache.flink.runtime.checkpoint.CheckpointCoordinator    [] - Triggering "
        "checkpoint 1 (type=CheckpointType{name='Checkpoint', sharingFilesStrategy=FORWARD_BACKWARD}) @ 1795316097171 "
        "for job 16febfa68a5912506eb6177427230acc.\n")
    run = nb.RunbookRun("checkpoint-expired", incident, run_detectors(incident))
    left, right = nb.checkpoint_timeline(run).axes[0].get_xlim()
    assert left < mdates.date2num(pd.Timestamp("2026-11-22 02:54:57")) < right
    assert (right - left) * 24 * 60 <= 5, "a few minutes of context (limits are in days)"
