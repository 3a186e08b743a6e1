"""The signature matcher keeps the lines RE2 keeps, and its compiled form is cached safely."""
from __future__ import annotations

import pyarrow as pa
import pytest

from corpus import DATA
from flink_runbooks.collect import matcher
from flink_runbooks.collect.scan import line_patterns
from flink_runbooks.detectors import prefilter


@pytest.fixture(scope="module")
def example_lines() -> pa.Array:
    lines = []
    for path in sorted(DATA.rglob("*")):
        if path.is_file() and path.suffix not in (".json", ".yaml", ".gz", ".md"):
            lines.extend(path.read_text(encoding="utf-8", errors="replace").splitlines())
    return pa.array(lines)


def test_one_pass_keeps_exactly_the_lines_each_signature_keeps_alone(example_lines):
    signatures = line_patterns(prefilter())["signatures"]
    one_pass = matcher.SignatureMatcher(signatures)
    assert one_pass.engine == "hyperscan"
    # RE2, a dozen signatures per expression (one expression of all of them exceeds RE2's DFA and crawls)
    by_re2 = one_pass._lines_re2(example_lines)
    by_one_pass = one_pass.lines(example_lines)
    differing = [line for line, a, b in zip(example_lines.to_pylist(), by_re2, by_one_pass) if a != b]
    assert not differing, differing[:5]
    assert by_one_pass.sum() > 1000


def test_a_set_of_signatures_hyperscan_alone_would_lose_a_match_on_keeps_the_line():
    """Hyperscan's multi-line mode loses this line when both signatures are in one database and the line before is
    20 characters or longer (found in the examples: a JobManager's cluster listing after a state change)."""
    signatures = (r"^\s+\(none\)\s*$", r"^\s*(?:transaction\.timeout\.ms|transactional\.id|bootstrap\.servers|client\.id) = ")
    texts = pa.array(["Application (647f88eb) switched from state RUNNING to CANCELING.", "\t(none)", "next"])
    assert matcher.SignatureMatcher(signatures).lines(texts).tolist() == [False, True, False]


def test_no_match_runs_from_one_line_into_the_next():
    one_pass = matcher.SignatureMatcher([r"checkpoint\s+failed", r"Completed [^)]*done"])
    lines = pa.array(["checkpoint", "failed", "Completed (", "done", "checkpoint  failed", "Completed x done"])
    assert one_pass.lines(lines).tolist() == [False, False, False, False, True, True]


def test_the_compiled_signatures_are_cached_and_a_damaged_cache_is_rebuilt(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    signatures = (r"Completed checkpoint \d+", r"Decline checkpoint \d+")
    lines = pa.array(["Completed checkpoint 5 for job", "nothing", "Decline checkpoint 6"])
    assert matcher.SignatureMatcher(signatures).lines(lines).tolist() == [True, False, True]
    [cached] = list((tmp_path / "flink-runbooks").iterdir())
    assert matcher.SignatureMatcher(signatures).lines(lines).tolist() == [True, False, True]
    cached.write_bytes(cached.read_bytes()[:100])
    assert matcher.SignatureMatcher(signatures).lines(lines).tolist() == [True, False, True]
    assert len(cached.read_bytes()) > 100, "rebuilt"


def test_without_hyperscan_re2_groups_keep_the_same_lines(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_hyperscan(name, *args, **kwargs):
        if name == "hyperscan":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_hyperscan)
    fallback = matcher.SignatureMatcher([r"Completed checkpoint \d+", r"^\s*-D$"])
    assert fallback.engine == "re2"
    assert fallback.lines(pa.array(["Completed checkpoint 1", "x", "  -D"])).tolist() == [True, False, True]
