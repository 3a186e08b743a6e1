"""The runbook catalogue (every runbook complete, the README's table generated from it) and the scaffold for the next
runbook."""
from __future__ import annotations

import importlib.util
import json

import nbformat
import pytest

from corpus import incident_from_text
from flink_runbooks import catalogue
from flink_runbooks.apps import cli
from flink_runbooks.apps.scaffold import ScaffoldError, new_runbook
from flink_runbooks.diagnose import run_detectors


def test_every_runbook_has_its_four_parts():
    incomplete = {r.slug: r.missing_parts() for r in catalogue.runbooks() if r.missing_parts()}
    assert incomplete == {}
    assert catalogue.orphan_notebooks() == [], "a notebook without a detector is not a runbook"


def test_every_example_incident_names_its_runbook_or_no_finding():
    for runbook in catalogue.runbooks():
        for example in runbook.examples:
            assert example.expected.get("primary") in (None, *catalogue.slugs()), example.path


def test_files_generated_from_the_declarations_are_current():
    """The README's runbook table, each notebook's title and each runbook's table of example incidents."""
    assert catalogue.stale_files() == [], "stale: run `make regen`"


def _load_detector(path, slug):
    spec = importlib.util.spec_from_file_location(f"scaffolded_{slug.replace('-', '_')}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return next(v() for v in vars(module).values() if isinstance(v, type) and getattr(v, "slug", None) == slug)


def test_new_runbook_creates_the_parts_that_fail_until_written(tmp_path):
    written = new_runbook("sql-connector-missing", "SQL connector jar missing", "connectors", root=tmp_path)
    rel = sorted(p.relative_to(tmp_path).as_posix() for p in written)
    assert rel == ["data/sql-connector-missing/README.md",
                   "data/sql-connector-missing/example/expected.json",
                   "lib/flink_runbooks/detectors/sql_connector_missing.py",
                   "runbooks/sql-connector-missing.ipynb",
                   "tests/runbooks/test_sql_connector_missing.py"]
    examples_readme = (tmp_path / rel[0]).read_text()
    assert catalogue.EXAMPLES_TABLE_START in examples_readme and catalogue.EXAMPLES_TABLE_END in examples_readme
    rel = rel[1:]

    detector = _load_detector(tmp_path / rel[1], "sql-connector-missing")
    assert (detector.title, detector.category) == ("SQL connector jar missing", "connectors")
    diagnosis = run_detectors(incident_from_text("2024-01-01 00:00:00,000 INFO x [] - started"), [detector])
    assert diagnosis.errors and "not written yet" in diagnosis.errors[0]

    expected = json.loads((tmp_path / rel[0]).read_text())
    assert expected["primary"] == "sql-connector-missing", "the example expects a finding, so accuracy fails until filled"

    nb = nbformat.read(tmp_path / rel[2], as_version=4)
    nbformat.validate(nb)
    sources = "\n".join(c.source for c in nb.cells)
    for section in ("## Meaning", "## Impact", "## Diagnosis", "## Mitigation", "## References"):
        assert section in sources
    assert 'open_runbook("sql-connector-missing"' in sources
    test_source = (tmp_path / rel[3]).read_text()
    compile(test_source, rel[3], "exec")
    # the generated test calls ingest as it is defined: the paths first, then the session
    import inspect

    from flink_runbooks.diagnose import ingest
    assert list(inspect.signature(ingest).parameters)[:2] == ["paths", "spark"]
    assert "ingest([str(example(SLUG, " in test_source and "], spark)" in test_source


def test_new_runbook_never_overwrites_and_rejects_bad_names(tmp_path):
    new_runbook("sql-connector-missing", "SQL connector jar missing", "connectors", root=tmp_path)
    before = (tmp_path / "runbooks/sql-connector-missing.ipynb").read_text()
    with pytest.raises(ScaffoldError, match="already has"):
        new_runbook("sql-connector-missing", "other", "connectors", root=tmp_path)
    assert (tmp_path / "runbooks/sql-connector-missing.ipynb").read_text() == before
    with pytest.raises(ScaffoldError, match="not a runbook slug"):
        new_runbook("SQL_Connector", "x", "connectors", root=tmp_path)
    with pytest.raises(ScaffoldError, match="unknown category"):
        new_runbook("sql-connector-missing2", "x", "sql", root=tmp_path)


def test_new_runbook_command_reports_a_bad_slug_in_one_line(capsys):
    assert cli.main(["new-runbook", "Bad Slug", "--title", "x", "--category", "connectors"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a runbook slug" in err[0]


def test_a_runbook_knows_the_keys_it_may_patch_without_reading_an_incident():
    threshold = next(r for r in catalogue.runbooks() if r.slug == "checkpoint-tolerable-failure-threshold")
    assert ("flink", "execution.checkpointing.tolerable-failed-checkpoints") in threshold.patched_keys
    kafka = next(r for r in catalogue.runbooks() if r.slug == "kafka-offset-commit-failure")
    assert all(target in ("flink", "kafka") for target, _ in kafka.patched_keys)
    assert any(target == "kafka" for target, _ in kafka.patched_keys)
