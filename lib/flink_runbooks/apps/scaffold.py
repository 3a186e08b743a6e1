"""``flink-runbooks new-runbook SLUG``: the parts of a new runbook, from templates.

The parts are the ones :mod:`flink_runbooks.catalogue` knows: a detector module (the runbook's declaration and its
judgement), a notebook, an example incident with the README that lists the examples, and a test file. The detector raises until it is written and the example incident expects a finding, so the
catalogue's tests fail until the judgement is filled in; nothing existing is ever overwritten.
"""
from __future__ import annotations

import json
import pathlib
import re

import nbformat

from flink_runbooks.catalogue import CATEGORIES, PROJECT_ROOT, module_name

SLUG = re.compile(r"^[a-z][a-z0-9]*(-[a-z0-9]+)+$")


class ScaffoldError(Exception):
    """The runbook cannot be created as asked; one line for the user."""


DETECTOR = '''\
"""Detector {slug}: {title}.

TODO: which causes this runbook tells apart, and the evidence that tells them apart.
"""
from __future__ import annotations

from flink_runbooks.detectors.base import Detector
from flink_runbooks.model import Finding, Incident, RootCause
from flink_runbooks.vocabulary.wordings import Wording  # noqa: F401 - for the wordings below


class {cls}(Detector):
    slug = "{slug}"
    title = "{title}"
    category = "{category}"
    meaning = "TODO: one line, what the exception means"
    # Line regexes in every Flink version's wording (they also feed the Spark pre-filter).
    signatures = ()
    # Flink's own message per release range, each with an example line as that release prints it, e.g.
    # Wording("{slug}", r"regex", "1.15 – 2.x", "the class that throws it", "the line as logged")
    wordings = ()
    exception_classes = ()
    # The settings the notebook shows, and what to collect when only Flink's message was found.
    config_keys = ()
    collect_next = "TODO: which log, setting or command tells this runbook's causes apart"
    root_causes = (
        RootCause("undetermined", "The evidence does not tell the causes apart.",
                  "TODO: what to collect next (which log, which setting, which command)"),
    )
    # Every sentence a user reads, with the {{fields}} detect() fills through self.say(name, **facts); a template
    # named after a root cause is that cause's verdict.
    templates = {{
        "undetermined": "TODO: the verdict when the evidence does not tell the causes apart ({{what}}).",
    }}

    def detect(self, incident: Incident) -> list[Finding]:
        raise NotImplementedError("{slug}: the judgement is not written yet")
'''

TEST = '''\
"""Detector {slug}: {title}."""
from __future__ import annotations

from corpus import example
from flink_runbooks.diagnose import ingest
from flink_runbooks.diagnose import run_detectors

SLUG = "{slug}"


def test_example_incident_gives_its_root_cause(spark):
    incident = ingest([str(example(SLUG, "{incident}"))], spark)
    diagnosis = run_detectors(incident)
    assert not diagnosis.errors
    assert diagnosis.primary is not None and diagnosis.primary.runbook == SLUG
    # TODO: assert the root cause, the evidence lines and the patches a user would act on.
'''

EXAMPLES_README = """\
# Example incidents of `{slug}`

TODO: where the logs come from (genuine, recorded with a real Flink, or written to a release's exact wording) and
what the examples tell apart.

<!-- example table: generated from each expected.json by `make regen` -->

<!-- end of example table -->
"""

EXPECTED = {
    "description": "TODO: what happened, in one or two sentences.",
    "source": "TODO: genuine Flink X.Y.Z logs (how they were recorded) or written to Flink X.Y.Z's format",
    "flink_version": "TODO",
    "primary": "{slug}",
    "root_cause": "TODO: the root cause slug this incident must give",
}


def notebook(slug: str, title: str, incident: str) -> nbformat.NotebookNode:
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    cells = [
        md(f"# {title}\n\n`TODO: the exception as Flink logs it`\n\nTODO: one paragraph, what this runbook tells "
           "apart.\n\n*Covers Flink TODO.*"),
        code(f'# Parameters (papermill: -p NAME VALUE). Every path may be a file, a directory, a glob or a Hadoop URI.\n'
             f'incident_paths = ["data/{slug}/{incident}"]  # logs and flink-conf.yaml/config.yaml of the incident\n'
             'flink_version = ""  # Flink version when the logs do not print it, e.g. "1.18.1" (empty: detect from the logs)\n'
             'incident_cache = ""  # directory of an incident already ingested by `flink-runbooks triage` (empty: read the logs)\n'
             'spark_master = ""  # Spark master, e.g. "spark://host:7077" (empty: local[2])',
             metadata={"tags": ["parameters"]}),
        code(f'from flink_runbooks import notebook as nb\n\nrun = nb.open_runbook("{slug}", incident_paths, '
             'flink_version=flink_version,\n                      incident_cache=incident_cache, '
             'spark_master=spark_master)', metadata={"tags": ["setup"]}),
        md("## Meaning\n\nTODO: what the exception means, in the terms of Flink's own mechanism."),
        md("## Impact\n\nTODO: what the user loses while it lasts."),
        md("## Diagnosis\n\nWhat the runbook checks, in order (commands to run by hand in brackets):\n1. TODO"),
        md("The verdict for this incident:"), code("run.summary()"),
        md("The evidence behind it (file and line in the incident's logs):"), code("run.evidence()"),
        md("What the runbook measured:"), code("run.details()"),
        md("The settings involved, and where each value came from:"), code("run.config()"),
        md("Warnings, errors and failures over time; the black diamonds are this runbook's evidence:"),
        code("nb.event_timeline(run)"),
        md("## Mitigation\n\nTODO: per root cause, what to do.\n\nProposed changes (proposals only; your files are "
           "not modified):"),
        code("run.patches()"),
        md("## References\n\n- TODO: Flink docs, JIRA issues and the classes that throw the exception."),
    ]
    nb = nbformat.v4.new_notebook(cells=cells)
    nb.metadata["kernelspec"] = {"name": "flink-runbooks", "display_name": "flink-runbooks (.venv)", "language": "python"}
    return nb


def new_runbook(slug: str, title: str, category: str, *, incident: str = "example",
                root: pathlib.Path = PROJECT_ROOT) -> list[pathlib.Path]:
    """Create the parts of runbook ``slug``; return the files written."""
    if not SLUG.match(slug):
        raise ScaffoldError(f"{slug!r} is not a runbook slug: lowercase words joined by '-', e.g. 'sql-connector-missing'")
    known = [c for c, _ in CATEGORIES]
    if category not in known:
        raise ScaffoldError(f"unknown category {category!r}; one of: {', '.join(known)}")
    module = module_name(slug)
    cls = "".join(part.capitalize() for part in slug.split("-"))
    files = {
        root / "lib" / "flink_runbooks" / "detectors" / f"{module}.py":
            DETECTOR.format(slug=slug, title=title, category=category, cls=cls),
        root / "tests" / "runbooks" / f"test_{module}.py": TEST.format(slug=slug, title=title, incident=incident),
        root / "data" / slug / incident / "expected.json": json.dumps(EXPECTED, indent=1).replace("{slug}", slug) + "\n",
        root / "data" / slug / "README.md": EXAMPLES_README.format(slug=slug),
        root / "runbooks" / f"{slug}.ipynb": nbformat.writes(notebook(slug, title, incident)) + "\n",
    }
    existing = [str(p.relative_to(root)) for p in files if p.exists()]
    if existing:
        raise ScaffoldError(f"runbook {slug} already has {', '.join(existing)}; nothing was written")
    for path, text in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return list(files)
