"""Small inputs read in this process give exactly what the Spark pass gives; larger or remote ones go to Spark."""
from __future__ import annotations

import gzip

import pytest

import corpus
from corpus import expected_incidents, swept
from flink_runbooks.collect import local
from flink_runbooks.diagnose import ingest

# the corpus is diagnosed once per worker: the suites that read it run on one
pytestmark = pytest.mark.xdist_group(corpus.GROUP)
INCIDENTS = expected_incidents()


@pytest.mark.parametrize("slug,name,path,expected", swept(INCIDENTS, [f"{s}/{n}" for s, n, _, _ in INCIDENTS]))
def test_in_process_and_spark_give_the_same_json(spark, slug, name, path, expected):
    assert local.fits_locally([(str(p), p.stat().st_size) for p in path.rglob("*") if p.is_file()], []), \
        "every example incident is small enough to be read in process"
    assert corpus.diagnosis(path) == corpus.diagnosis(path, through_spark=True)


def test_gzipped_and_plain_files_read_alike_in_process(tmp_path, data_dir):
    source = next((data_dir / "checkpoint-tolerable-failure-threshold" / "storage-permission-denied").rglob("*standalonesession*.log"))
    plain = tmp_path / "plain" / "jobmanager.log"
    packed = tmp_path / "packed" / "jobmanager.log.gz"
    plain.parent.mkdir()
    packed.parent.mkdir()
    plain.write_bytes(source.read_bytes())
    packed.write_bytes(gzip.compress(source.read_bytes()))
    a, b = ingest([str(plain)]), ingest([str(packed)])
    assert [(e.line, e.message) for e in a.events] == [(e.line, e.message) for e in b.events]
    assert a.events and a.flink_version == "1.20.3"


def test_only_small_local_plain_or_gzipped_inputs_stay_in_process(tmp_path, monkeypatch):
    monkeypatch.setattr(local, "LOCAL_LIMIT_BYTES", 1000)
    assert local.fits_locally([(f"file:{tmp_path}/a.log", 600), (f"{tmp_path}/b.log", 400)], [f"{tmp_path}/flink-conf.yaml"])
    assert not local.fits_locally([(f"{tmp_path}/a.log", 1001)], []), "too large: Spark"
    assert not local.fits_locally([(f"{tmp_path}/a.log.gz", 200)], []), "a gzipped file counts ten times its size"
    assert not local.fits_locally([("hdfs://nn:8020/logs/a.log", 10)], []), "other file systems: Spark"
    assert not local.fits_locally([(f"{tmp_path}/a.log.bz2", 10)], []), "compressions only Hadoop reads: Spark"


def test_splits_of_a_file_hold_each_line_once_and_only_overlong_ones_are_cut(monkeypatch):
    import io
    import random

    monkeypatch.setattr(local, "MAX_LINE_BYTES", 50)
    monkeypatch.setattr(local, "LONG_LINE_HEAD_BYTES", 8)
    rng = random.Random(7)
    for _ in range(3000):
        lines = [bytes(rng.choice(b"ab\r\x00") for _ in range(rng.choice([0, 1, 5, 49, 50, 51, 120])))
                 for _ in range(rng.randrange(6))]
        data = b"\n".join(lines) + rng.choice([b"", b"\n"])
        # a file cut into splits at arbitrary bytes, each read on its own, as Spark's tasks read them
        cuts = sorted({0, len(data), *(rng.randrange(len(data) + 1) for _ in range(rng.randrange(4)))})
        read, cut = [], {}
        for start, end in zip(cuts, cuts[1:]):
            for block, long in local.line_blocks(io.BytesIO(data), start, end, chunk_bytes=rng.choice([1, 3, 16, 64])):
                block_lines = block.split(b"\n")
                if block.endswith(b"\n"):
                    block_lines.pop()
                cut.update({len(read) + i: n for i, n in long.items()})
                read.extend(block_lines)
        expected = data.split(b"\n")
        if expected[-1] == b"":  # a final line break ends the last line
            expected.pop()
        assert len(read) == len(expected), (data, cuts)
        for index, (got, want) in enumerate(zip(read, expected)):
            if len(want) > 50:
                assert cut[index] == len(want) and got == want[:8]
            else:
                assert got == want and index not in cut


def test_a_log_written_in_terminal_colours_reads_as_the_plain_one(spark, tmp_path, data_dir):
    """The Kubernetes operator's default layout colours each part of a line (%style, %highlight): the escape
    sequences are taken out before any matching, in process and through Spark, and the line numbers stay."""
    import re

    source = next((data_dir / "operator-last-state-ha-missing" / "no-ha-last-state-operator-1.13").rglob("*.log"))
    plain = tmp_path / "plain" / "operator.log"
    coloured = tmp_path / "coloured" / "operator.log"
    plain.parent.mkdir()
    coloured.parent.mkdir()
    text = source.read_text()
    plain.write_text(text)
    coloured.write_text(re.sub(r"^(\S+ \S+) (\S+) (\[\w+ *\])(.*)$", "\x1b[33m\\1\x1b[m \x1b[36m\\2\x1b[m \x1b[1;31m\\3\\4\x1b[m",
                               text, flags=re.M))
    assert "\x1b[" in coloured.read_text()
    read = [(e.line, e.level, e.message) for e in ingest([str(plain)]).events]
    assert read and [(e.line, e.level, e.message) for e in ingest([str(coloured)]).events] == read
    assert [(e.line, e.level, e.message) for e in ingest([str(coloured)], spark).events] == read
