"""Runbook notebooks: their shape (fast) and their execution under papermill as users run them, on other incidents
(marked `notebook`). Every notebook's run on its own example incident, verdict and patch included, is checked on the
site build that executes them all (``test_site.test_full_build_publishes_every_runbook``)."""
from __future__ import annotations

import os
import pathlib
import re

import nbformat
import pytest

from corpus import DATA, ROOT
from flink_runbooks.detectors import slugs

RUNBOOKS = ROOT / "runbooks"
NOTEBOOKS = sorted(RUNBOOKS.glob("*.ipynb"))
SECTIONS = ("## Meaning", "## Impact", "## Diagnosis", "## Mitigation", "## References")


def test_every_detector_has_a_notebook_and_examples_and_vice_versa():
    assert sorted(p.stem for p in NOTEBOOKS) == slugs()
    for slug in slugs():
        assert list((DATA / slug).glob("*/expected.json")), f"{slug} has no example incident"
        assert (ROOT / "tests" / "runbooks" / f"test_{slug.replace('-', '_')}.py").exists(), f"{slug} has no tests"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_shape(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not any(c.outputs or c.execution_count for c in code), "commit notebooks without outputs"
    params = [c for c in code if "parameters" in c.metadata.get("tags", [])]
    assert len(params) == 1, "exactly one cell tagged parameters"
    for line in params[0].source.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            assert "#" in line, f"parameter without help text: {line}"
    markdown = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    for section in SECTIONS:
        assert section in markdown, f"missing section {section}"
    assert not any(re.search(r"^\s*(def|class) ", c.source, re.M) for c in code), "notebooks call lib/, they define nothing"
    assert f'open_runbook("{path.stem}"' in "\n".join(c.source for c in code)
    default = re.search(r'incident_paths = \["([^"]+)"\]', params[0].source).group(1)
    assert (ROOT / default).exists(), f"default incident {default} does not exist"


def _outputs(nb) -> str:
    parts = []
    for c in nb.cells:
        for o in c.get("outputs", []):
            if o.get("output_type") == "error":
                parts.append(f"CELL-ERROR {o.get('ename')}: {o.get('evalue')}")
            for kind, data in (o.get("data") or {}).items():
                parts.append(f"[{kind}]" + (data if isinstance(data, str) and not kind.startswith("image/") else ""))
            parts.append(o.get("text", ""))
    return "\n".join(parts)


def _execute(path: pathlib.Path, out: pathlib.Path, **parameters):
    import papermill

    papermill.execute_notebook(str(path), str(out), parameters=parameters, cwd=str(ROOT), kernel_name="flink-runbooks",
                               execution_timeout=600, progress_bar=False)
    return nbformat.read(out, as_version=4)


@pytest.mark.notebook
def test_notebook_parameters_point_it_at_another_incident(tmp_path):
    path = RUNBOOKS / "checkpoint-tolerable-failure-threshold.ipynb"
    nb = _execute(path, tmp_path / "healthy.ipynb",
                  incident_paths=["data/checkpoint-tolerable-failure-threshold/healthy"])
    text = _outputs(nb)
    assert "does not apply to this incident" in text
    assert "Nothing to change." in text


# A runbook reference: a backticked name on a "Related runbooks" line, "the <slug> runbook", "see <slug>", or a link
# to a runbook page or notebook. Config keys (with dots) are never references.
_SLUG = r"[a-z0-9]+(?:-[a-z0-9]+)+"
_REFERENCES = (
    re.compile(rf"`({_SLUG})`(?=[^\n]*)"),  # only applied to "Related runbooks" lines
    re.compile(rf"\b(?:the|see|See) `?({_SLUG})`? runbook"),
    re.compile(rf"\b({_SLUG}) runbook\b"),
    re.compile(rf"\(see `?({_SLUG})`?\)"),
    re.compile(rf"runbooks/({_SLUG})\.(?:ipynb|html)"),
    re.compile(rf"\]\(({_SLUG})\.html\)"),
)
# Words that are followed by "runbook" in prose without being one ("the memory runbook" is not a slug anyway).
_NOT_SLUGS = {"oom-*", "comma-separated"}


# A slug being created (`flink-runbooks new-runbook <slug>` in the instructions for adding one) is not a reference.
_CREATED = re.compile(rf"new-runbook ({_SLUG})")


def runbook_references(text: str) -> set[str]:
    found: set[str] = set()
    for line in text.splitlines():
        if "Related runbooks" in line:
            found |= set(_REFERENCES[0].findall(line))
        for rx in _REFERENCES[1:]:
            found |= set(rx.findall(line))
    return found - _NOT_SLUGS - set(_CREATED.findall(text))


def _texts_that_reference_runbooks() -> list[tuple[str, str]]:
    texts = []
    for path in NOTEBOOKS:
        nb = nbformat.read(path, as_version=4)
        texts.append((path.name, "\n".join(c.source for c in nb.cells)))
    for path in sorted((ROOT / "lib" / "flink_runbooks").rglob("*.py")):
        texts.append((str(path.relative_to(ROOT)), path.read_text()))
    for path in sorted((ROOT / "lib" / "flink_runbooks" / "apps").rglob("*.j2")):
        texts.append((str(path.relative_to(ROOT)), path.read_text()))
    texts.append(("README.md", (ROOT / "README.md").read_text()))
    return texts


def test_the_reference_finder_sees_each_kind_of_reference():
    text = ("- Related runbooks: `oom-java-heap`, `no-such-runbook`.\n"
            "see the hdfs-datanode-failure runbook, or (see `tm-memory-misconfiguration`); [x](gone-away.html)\n"
            "`execution.checkpointing.dir` and `restart-strategy` are keys, not references\n"
            "flink-runbooks new-runbook brand-new --title x, then edit runbooks/brand-new.ipynb")
    assert runbook_references(text) == {"oom-java-heap", "no-such-runbook", "hdfs-datanode-failure",
                                        "tm-memory-misconfiguration", "gone-away"}


def test_every_runbook_reference_names_a_runbook_of_the_catalogue():
    known = set(slugs())
    dangling = [f"{name}: {ref}" for name, text in _texts_that_reference_runbooks()
                for ref in sorted(runbook_references(text)) if ref not in known]
    assert not dangling, "references to runbooks that do not exist:\n" + "\n".join(dangling)


def test_no_text_users_read_mentions_the_source_documents():
    # Users never saw the source documents: production cases are described in their own words, in the tests too.
    wording = re.compile(r"\b(?:the|a|our|this) seed\b|\bseed(?:'s| \d{3}| deployment| question| example)|"
                         r"test_\w*seed|seeds/|(?-i:\bSEED\w*|\w+_SEED\b)", re.IGNORECASE)
    tests = [(str(path.relative_to(ROOT)), path.read_text()) for path in sorted((ROOT / "tests").rglob("*"))
             if path.is_file() and path.suffix in (".py", ".md", ".txt") and path.name != "test_notebooks.py"]
    hits = [f"{name}: {m.group(0)}" for name, text in _texts_that_reference_runbooks() + tests
            for m in wording.finditer(text)]
    for path in sorted(DATA.glob("*/*/expected.json")) + sorted(DATA.glob("*/README.md")) + sorted(DATA.rglob("*.yaml")):
        hits += [f"{path.relative_to(DATA)}: {m.group(0)}" for m in wording.finditer(path.read_text())]
    assert not hits, "\n".join(hits)


def test_tests_read_nothing_outside_the_repository():
    # A clone with nothing beside it must pass: what a test reads is copied into the repository, its origin stated.
    # Spelled from where this clone sits: the folder that holds it, as an absolute path or as "../<what is beside it>"
    # (the Makefile runs the tests from the repository's root), or reached from the root's own parent.
    # A clone in the system's temporary folder is held by the folder Flink's own defaults name (io.tmp.dirs: /tmp),
    # which tests spell as values: there only the relative ways out count.
    import tempfile

    holder = pathlib.Path(os.path.dirname(ROOT))
    beside = [re.escape(p.name) for p in holder.iterdir() if p != ROOT] or ["(?!)"]
    shared = str(holder) in {"/", "/tmp", "/var/tmp", tempfile.gettempdir()}
    absolute = "(?!)" if shared else re.escape(str(holder).rstrip("/") + "/")
    outside = re.compile(rf"""["']{absolute}|["'](?:\.\./)+(?:{"|".join(beside)})\b"""
                         r"|ROOT\.parent\b|parents\[[2-9]\]")
    hits = [f"{path.relative_to(ROOT)}:{n}: {line.strip()}" for path in sorted((ROOT / "tests").rglob("*.py"))
            for n, line in enumerate(path.read_text().splitlines(), 1) if outside.search(line)]
    assert not hits, "\n".join(hits)


def test_a_json_list_given_as_a_string_is_that_list_of_paths():
    from flink_runbooks.notebook import PROJECT_ROOT, resolve_paths

    assert resolve_paths('["/var/log/flink", "data/x"]') == ["/var/log/flink", str(PROJECT_ROOT / "data/x")]
    assert resolve_paths("/var/log/flink") == ["/var/log/flink"]
    assert resolve_paths("[not json") == ["[not json"]  # a glob, taken as it is


@pytest.mark.notebook
def test_the_readme_s_papermill_command_runs_a_runbook_on_another_incident(tmp_path):
    """As documented: papermill's `-p` hands the list over as text."""
    import subprocess

    incident = "data/checkpoint-tolerable-failure-threshold/healthy"
    out = tmp_path / "out.ipynb"
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "papermill"),
                           str(RUNBOOKS / "checkpoint-tolerable-failure-threshold.ipynb"), str(out),
                           "-p", "incident_paths", f'["{incident}"]', "--cwd", str(ROOT), "--no-progress-bar"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    text = _outputs(nbformat.read(out, as_version=4))
    assert "does not apply to this incident" in text and "CELL-ERROR" not in text


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_the_masking_leaves_every_notebooks_prose_as_written(path):
    """Every published page passes the secrets masking: prose that reads like a secret's key and value ('"token":
    Flink's own log') would be published with words starred out."""
    from flink_runbooks.parse.redact import redact_text

    for cell in nbformat.read(path, as_version=4).cells:
        masked = redact_text(cell.source)
        changed = [(a, b) for a, b in zip(cell.source.splitlines(), masked.splitlines()) if a != b]
        assert not changed, changed[:2]
