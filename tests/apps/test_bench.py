"""The benchmark's parts: the generated bundle is diagnosed as planted, and the baselines do the same work as the
Spark pipeline (the grep patterns select the same lines, the plain-Python reader builds the same records)."""
from __future__ import annotations

import json
import re
import subprocess

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from corpus import DATA
from flink_runbooks.apps import cli
from flink_runbooks.apps.bench import baselines
from flink_runbooks.apps.bench.__main__ import injected_found, log_files
from flink_runbooks.apps.bench.generate import generate, parse_size
from flink_runbooks.diagnose import ingest
from flink_runbooks.collect.matcher import signature_matcher
from flink_runbooks.collect.scan import line_patterns
from flink_runbooks.detectors import prefilter

# its module-scoped fixtures are built once: every test of the module runs on one worker
pytestmark = pytest.mark.xdist_group("test_bench")


def _example_lines() -> list[str]:
    lines = []
    for path in sorted(DATA.rglob("*")):
        if path.is_file() and path.suffix not in (".json", ".yaml", ".gz", ".md"):
            lines.extend(path.read_text(encoding="utf-8", errors="replace").splitlines())
    return lines


@pytest.fixture(scope="module")
def example_lines() -> list[str]:
    lines = _example_lines()
    assert len(lines) > 10_000
    return lines


@pytest.fixture(scope="module")
def small_bundle(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench") / "bundle"
    return out, generate(out, parse_size("3MB"))


@pytest.mark.parametrize("every", [pytest.param(7, id="every-7th-line"),
                                   pytest.param(1, id="every-line", marks=pytest.mark.sweep)])
def test_workers_and_python_keep_the_same_lines(example_lines, every):
    # The workers run RE2 (the structure of traces and dumps) and the signatures in one Hyperscan pass, on the
    # lookahead-free form; the plain-Python reader runs Python's re on the original union of both (about 70 s for
    # every example line, hence a seventh of them in the fast tier).
    patterns = line_patterns(prefilter())
    lines = example_lines[::every]
    texts = pa.array(lines)
    kept_by_workers = (pc.match_substring_regex(texts, patterns["structure"]).to_numpy(zero_copy_only=False)
                       | signature_matcher(patterns["signatures"]).lines(texts))
    kept_python = re.compile(patterns["kept"])
    differing = [line for line, flag in zip(lines, kept_by_workers) if flag != bool(kept_python.search(line))]
    assert not differing, differing[:5]
    assert kept_by_workers.sum() > len(lines) // 4


@pytest.mark.slow  # grep -E with every signature takes about 4 ms a line: a twentieth of the example lines, ~25 s
def test_grep_patterns_select_the_lines_the_workers_keep(example_lines, tmp_path):
    lines = example_lines[::20]
    sample = tmp_path / "lines.log"
    sample.write_text("\n".join(lines) + "\n", encoding="utf-8")
    patterns = line_patterns(prefilter())
    kept = re.compile(patterns["kept"])
    pattern_file = tmp_path / "kept.patterns"
    pattern_file.write_text(baselines.to_ere(patterns["kept"]) + "\n")
    done = subprocess.run(["grep", "-E", "-n", "-f", str(pattern_file), str(sample)], capture_output=True,
                          env={"LC_ALL": "C.UTF-8", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0 and not done.stderr, done.stderr
    by_grep = {int(line.split(b":", 1)[0]) for line in done.stdout.splitlines()}
    by_python = {i + 1 for i, line in enumerate(lines) if kept.search(line)}
    assert by_grep == by_python, sorted(by_grep ^ by_python)[:5]


def test_generated_bundle_has_rolled_files_layouts_and_the_incidents_where_planted(small_bundle, spark, capsys):
    path, manifest = small_bundle
    names = [p.name for p in log_files(path)]
    assert any(n.endswith(".gz") for n in names)
    assert any(n.endswith("-container.log") for n in names) and any(n.endswith(".json.log") for n in names)
    assert manifest["log_bytes"] >= parse_size("3MB") * 0.95
    assert cli.main(["diagnose", str(path), "--format", "json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert injected_found(report, manifest) == []
    primary = next(f for f in report["findings"] if f["primary"])
    assert (primary["runbook"], primary["root_cause"]["slug"]) == (
        "checkpoint-tolerable-failure-threshold", "storage-unwritable")


@pytest.mark.slow  # Python's re over 3 MB with every signature: ~20 s
def test_plain_python_reader_builds_the_same_records_as_spark(small_bundle, spark):
    path, _manifest = small_bundle
    incident = ingest([str(path)], spark)
    _seconds, records = baselines.python_reader(log_files(path))
    # every record is either kept or counted in a fold
    assert not incident.scan["dropped"]
    assert records == len(incident.events) + incident.scan["folded"] == incident.records_read


# What the pre-filter may keep of a bundle's lines: the records of a failure, its context and the checkpoint and
# job lifecycle; healthy INFO lines that merely mention a signature's words are a few per process start.
KEPT_FRACTION = 0.12


@pytest.mark.parametrize("shape,size", [("healthy", "8MB"), ("crashloop", "8MB")])
def test_the_pre_filter_keeps_evidence_not_noise(shape, size, tmp_path):
    path = tmp_path / shape
    generate(path, parse_size(size), shape=shape)
    incident = ingest([str(path)])
    scan = incident.scan
    assert scan["lines"] > 10_000
    assert scan["kept_lines"] <= KEPT_FRACTION * scan["lines"], scan
    if shape == "crashloop":
        # repeated records fold: a crash loop prints the same start-up records at every start
        assert scan["folded"] > 0 and scan["records"] < scan["kept_lines"] / 2, scan


def test_grep_baseline_counts_matching_lines(small_bundle):
    path, _manifest = small_bundle
    _seconds, matches = baselines.run_grep(log_files(path))
    assert matches > 100
