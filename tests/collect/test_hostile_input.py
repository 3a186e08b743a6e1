"""Broken and hostile input, generated at test time: a warning per bad file, never a trace, a hang, a crash.

Every run asserts the README's exit code, at most two lines on stderr and no stack trace, valid JSON, the good files
still diagnosed and nothing written outside the output directory. Many bad files share one run over a directory
that also holds a good incident, so one run proves each of them. Generated-only cases that take a while (lines of
hundreds of megabytes, 2 GiB of NUL bytes, a gzip bomb, 3,000 files, remote file systems) are marked ``slow``. How
long anything takes is measured by ``make bench``; the timeouts here only stop a hang.
"""
from __future__ import annotations

import gzip
import json
import os
import pathlib
import random
import shutil
import subprocess
import sys

import pytest
from flink_runbooks.detectors import prefilter

from corpus import example

# its module-scoped fixtures are built once: every test of the module runs on one worker
pytestmark = pytest.mark.xdist_group("test_hostile_input")

GOOD = ("checkpoint-tolerable-failure-threshold", "storage-permission-denied")
PRIMARY = "checkpoint-tolerable-failure-threshold"
CLI = [sys.executable, "-m", "flink_runbooks.apps.cli"]
TRACE_MARKERS = ("Traceback (most recent call last)", "\tat ", "Exception in thread", "py4j.protocol", "Caused by:")
TM_HEADER = "2026-11-22 02:55:00,000 ERROR org.apache.flink.runtime.taskmanager.Task                    [] - "


def run(args: list[str], cwd: pathlib.Path, hang_guard_s: float = 900,
        env: dict | None = None) -> tuple[int, str, str]:
    """The command line as a user runs it, in a fresh process; returns (exit code, stdout, stderr). The timeout is
    only there to end a hang, far above what a loaded machine needs."""
    proc = subprocess.run(CLI + args, cwd=cwd, capture_output=True, text=True, timeout=hang_guard_s,
                          env={**os.environ, **(env or {}), "FLINK_RUNBOOKS_DEBUG": ""},
                          errors="surrogateescape")
    err_lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(err_lines) <= 2, proc.stderr[-3000:]
    assert not any(marker in proc.stderr for marker in TRACE_MARKERS), proc.stderr[-3000:]
    return proc.returncode, proc.stdout, proc.stderr


def snapshot(*roots: pathlib.Path) -> dict[str, float]:
    return {str(p): p.lstat().st_mtime for root in roots for p in root.rglob("*")}


def good_incident(root: pathlib.Path) -> pathlib.Path:
    target = root / "good"
    shutil.copytree(example(*GOOD), target, ignore=shutil.ignore_patterns("expected.json"))
    return target


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> dict:
    """One directory: a good incident plus every bad file of the fast tier; what each should be warned about."""
    root = tmp_path_factory.mktemp("hostile")
    inc = good_incident(root)
    logs = inc / "log"
    bad = inc / "bad"
    bad.mkdir()
    rng = random.Random(10)
    jm = next(logs.glob("*standalonesession*.log"))
    # Latin-1 bytes in 5 % of the JobManager's lines: still text, the diagnosis must not change.
    lines = jm.read_bytes().split(b"\n")
    jm.write_bytes(b"\n".join(line + b" caf\xe9 cr\xe8me" if rng.random() < 0.05 else line for line in lines))
    tm_text = next(logs.glob("*taskexecutor*.log")).read_text()
    expect: dict[str, str] = {}

    def put(name: str, data: bytes | str, warning: str | None) -> pathlib.Path:
        path = bad / name
        path.write_bytes(data if isinstance(data, bytes) else data.encode())
        if warning:
            expect[str(path)] = warning
        return path

    put("empty.log", b"", "is empty")
    put("binary.log", bytes(rng.randrange(256) for _ in range(200_000)), "looks binary")
    put("utf16.log", tm_text[:20_000].encode("utf-16"), "looks binary")
    packed = gzip.compress(tm_text.encode())
    put("truncated.log.gz", packed[: len(packed) // 2], "truncated")
    flipped = bytearray(packed)
    for i in range(200, len(flipped) - 20, 997):
        flipped[i] ^= 0x5A
    put("bitflip.log.gz", bytes(flipped), "skipped")
    put("plain-text.log.gz", "2026-11-22 02:53:48,460 INFO  x [] - plain text\n", "not gzip-compressed")
    put("crlf.log", tm_text[:30_000].replace("\n", "\r\n"), None)
    frames = "".join(f"\tat com.example.Deep.call{i}(Deep.java:{i})\n" for i in range(10_000))
    put("frames-10000.log", TM_HEADER + "deep recursion\njava.lang.StackOverflowError\n" + frames, None)
    chain = "".join(f"Caused by: java.io.IOException: level {i}\n\tat com.example.L{i}.run(L.java:1)\n" for i in range(500))
    put("caused-by-500.log", TM_HEADER + "failed\njava.lang.RuntimeException: top\n" + chain, None)
    put("line-5mb.log", TM_HEADER + "x" * (5 << 20) + "\n", None)
    put("passwd", "root:x:0:0:root:/root:/bin/bash\n", "unknown log layout")
    odd = put("with space ü [1] $(touch pwned) ;'\".log", "just words, no log records\n", "unknown log layout")
    os.mkfifo(bad / "pipe.log")
    expect[str(bad / "pipe.log")] = "not a regular file"
    # links: a loop back into the tree and a way out of it
    (logs / "self").symlink_to(".", target_is_directory=True)
    outside = root / "outside"
    outside.mkdir()
    (outside / "elsewhere.log").write_text(tm_text)
    (bad / "escape").symlink_to(outside, target_is_directory=True)
    expect[str(bad / "escape")] = "not followed"
    # broken configuration files, each in its own folder (a config file is recognised by its name)
    yamls = {
        "tabs": "execution:\n\tcheckpointing:\n\t\tinterval: 5s\n",
        "unclosed-quote": 'execution.checkpointing.interval: "5s\nstate.backend.type: rocksdb\n',
        "a-list": "- execution.checkpointing.interval\n- 5s\n",
        "alias-bomb": 'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n' + "".join(
            f"{n}: &{n} [{','.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi")),
    }
    for name, text in yamls.items():
        (bad / f"yaml-{name}").mkdir()
        path = bad / f"yaml-{name}" / "config.yaml"
        path.write_text(text)
        expect[str(path)] = "broken YAML"
    (bad / "yaml-duplicate").mkdir()
    dup = bad / "yaml-duplicate" / "config.yaml"
    dup.write_text("metrics.latency.interval: 0\nmetrics.latency.interval: 1000\n")
    expect[str(dup)] = "set again"
    conf = inc / "flink-conf.yaml"
    conf.write_text(conf.read_text() + "web.submit.enable:true\n")  # Flink skips a line without ': '
    expect[str(conf)] = "skipped"
    return {"root": root, "incident": inc, "expect": expect, "odd": odd, "outside": outside}


def test_one_run_over_every_bad_file_warns_about_each_and_still_diagnoses(corpus, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    before = snapshot(corpus["root"])
    code, out, err = run(["diagnose", str(corpus["incident"]), "--format", "json"], work)
    assert code == 1, err
    doc = json.loads(out)
    assert doc["findings"][0]["runbook"] == PRIMARY and doc["findings"][0]["primary"]
    warnings = doc["warnings"]
    for path, what in corpus["expect"].items():
        assert any(path in w and what in w for w in warnings), (path, what, warnings)
    jm = next(f for f in doc["inputs"]["files"] if "standalonesession" in f["path"])
    assert jm["role"] == "jobmanager" and jm["layout"] == "log4j2", "Latin-1 lines do not make a log binary"
    assert any("read with replacement characters" in w and jm["path"] in w for w in warnings)
    # links: the loop is read once, the way out not at all
    paths = [f["path"] for f in doc["inputs"]["files"]]
    assert not any("/self/" in p for p in paths) and not any("elsewhere.log" in p for p in paths)
    assert len(paths) == len(set(paths))
    # the odd file name is shown as it is, shell characters and all, and nothing was run
    assert str(corpus["odd"]) in paths and not (work / "pwned").exists()
    assert not list(work.iterdir()) and snapshot(corpus["root"]) == before, "nothing written anywhere"
    code, text, err = run(["diagnose", str(corpus["incident"])], work)
    assert code == 1 and "warning: bad/passwd: unknown log layout" in text, "relative to the directory given, not masked"


def test_a_link_given_as_an_input_is_followed(corpus, tmp_path):
    code, out, err = run(["diagnose", str(corpus["incident"] / "bad" / "escape"), "--format", "json"], tmp_path)
    assert code in (0, 1), err
    assert any(f["path"].endswith("elsewhere.log") for f in json.loads(out)["inputs"]["files"])


def test_a_file_that_cannot_be_read_is_named_and_the_rest_diagnosed(tmp_path):
    inc = good_incident(tmp_path)
    if os.geteuid() == 0:  # root reads any file mode: a kernel file that refuses reading stands in
        locked = tmp_path / "locked.log"
        locked.symlink_to("/sys/bus/pci/rescan")
    else:
        locked = inc / "log" / "locked.log"
        locked.write_text("x\n")
        locked.chmod(0)
    code, out, err = run(["diagnose", str(inc), str(locked), "--format", "json"], tmp_path)
    assert code == 1, err
    doc = json.loads(out)
    assert doc["findings"][0]["runbook"] == PRIMARY
    assert any(str(locked) in w and "cannot be read" in w for w in doc["warnings"]), doc["warnings"]


@pytest.mark.parametrize("args,message", [
    (["/no/such/incident"], "no such file or directory"),
    (["{empty}"], "nothing to read"),
    (["{truncated}"], "truncated"),
    (["{good}", "--flink-version", "abc"], "not a Flink version"),
    (["{good}", "--flink-version", "99.9"], "not a Flink version"),
])
def test_bad_input_is_exit_2_and_one_line(tmp_path, args, message):
    (tmp_path / "empty").mkdir()
    (tmp_path / "truncated.log.gz").write_bytes(gzip.compress(b"x" * 100_000)[:50])
    names = {"empty": tmp_path / "empty", "truncated": tmp_path / "truncated.log.gz", "good": tmp_path / "good"}
    if "{good}" in args:
        good_incident(tmp_path)
    code, out, err = run([a.format(**names) for a in ["diagnose", *args]], tmp_path)
    assert code == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and message in err, err


def test_a_typed_version_does_not_replace_the_one_the_logs_print(tmp_path):
    inc = good_incident(tmp_path)
    code, out, err = run(["diagnose", str(inc), "--flink-version", "1.18.1", "--format", "json"], tmp_path)
    doc = json.loads(out)
    assert code == 1 and doc["flink_version"] == "1.20.3"
    assert any("--flink-version 1.18.1 ignored" in w and "1.20.3" in w for w in doc["warnings"])
    excerpt = tmp_path / "ticket.txt"
    excerpt.write_text("java.io.IOException: disk full\n\tat com.example.A.b(A.java:1)\n")
    code, out, err = run(["diagnose", str(excerpt), "--flink-version", "1.18.1", "--format", "json"], tmp_path)
    assert json.loads(out)["flink_version"] == "1.18.1", "a version the logs do not print is taken from the user"


def test_existing_paths_with_glob_characters_spaces_and_non_ascii(spark, tmp_path, capsys):
    """Through Spark (which reports names percent-encoded and expands glob characters): no false warnings."""
    from flink_runbooks.apps import cli

    folder = tmp_path / "incident [2026] été"
    shutil.copytree(example(*GOOD), folder, ignore=shutil.ignore_patterns("expected.json"))
    for f in (folder / "log").iterdir():
        f.rename(f.with_name(f.name.replace("flink-flink", "flink flink ü")))
    code = cli.main(["diagnose", str(folder), "--master", "local[2]", "--format", "json"])
    out, err = capsys.readouterr()
    assert code == 1, err
    doc = json.loads(out)
    assert doc["findings"][0]["runbook"] == PRIMARY
    assert not [w for w in doc["warnings"] if "empty" in w or "no lines" in w], doc["warnings"]
    files = doc["inputs"]["files"]
    assert [f["kind"] for f in files].count("config") == 1 and doc["inputs"]["config_file"] == str(folder / "flink-conf.yaml")
    assert {f["role"] for f in files if f["kind"] == "log" and f["lines"]} == {"jobmanager", "taskmanager", "client"}
    assert "%20" not in out and "%5B" not in out
    assert all(e["file"].startswith(str(folder)) for f in doc["findings"] for e in f["evidence"])


def test_a_failed_triage_leaves_no_empty_out_behind(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "only.log.gz").write_bytes(b"not gzip at all\n")
    out = tmp_path / "report"
    code, stdout, err = run(["triage", str(tmp_path / "in"), "--out", str(out)], tmp_path)
    assert code == 2 and "not gzip-compressed" in err
    assert not out.exists()
    kept = tmp_path / "existing"
    kept.mkdir()
    code, _, _ = run(["triage", str(tmp_path / "in"), "--out", str(kept)], tmp_path)
    assert code == 2 and kept.is_dir(), "a directory the user made is left alone"


def test_yaml_alias_bombs_of_any_shape_fail_fast():
    from flink_runbooks.parse.config import ConfigError, parse_yaml_conf

    deep = 'a: &a ["x","x"]\n' + "".join(f"n{i}: &n{i} [*{'a' if i == 0 else f'n{i - 1}'},*{'a' if i == 0 else f'n{i - 1}'}]\n"
                                          for i in range(40))
    wide = 'a: &a ["lol"]\n' + "b: [" + ",".join(["*a"] * 60) + "]\n"
    for text in (deep, wide):
        with pytest.raises(ConfigError, match="alias"):
            parse_yaml_conf(text, "config.yaml")


# Names a shell, a URL parser, a terminal or the JVM could take for something else.
ODD_NAMES = {
    "query": "tm?attempt=1#frag 100%.log",
    "newline": "tm\nsecond line.log",
    "undecodable": os.fsdecode(b"tm-\xff\xfe-latin1.log"),
}


def _incident_with_odd_names(root: pathlib.Path) -> tuple[pathlib.Path, dict[str, pathlib.Path]]:
    inc = good_incident(root)
    tm = next((inc / "log").glob("*taskexecutor*.log"))
    odd = {what: inc / "log" / name for what, name in ODD_NAMES.items()}
    for path in odd.values():
        path.write_bytes(tm.read_bytes())
    return inc, odd


def test_odd_file_names_are_read_and_shown_escaped(tmp_path):
    inc, odd = _incident_with_odd_names(tmp_path)
    code, out, err = run(["diagnose", str(inc), "--format", "json"], tmp_path)
    assert code == 1, err
    doc = json.loads(out)
    assert doc["findings"][0]["runbook"] == PRIMARY
    files = {f["path"]: f for f in doc["inputs"]["files"]}
    tm_lines = next(f["lines"] for p, f in files.items() if p.endswith("taskexecutor-0-vm.log"))
    shown = {"query": str(odd["query"]),  # ? and # are part of the name, not a query or a fragment
             "newline": str(inc / "log" / "tm\\nsecond line.log"),
             "undecodable": str(inc / "log" / "tm-\\xff\\xfe-latin1.log")}
    for what, path in shown.items():
        assert files.get(path, {}).get("lines") == tm_lines, (what, sorted(files))
    # in a warning of the text report too, a name with a line break stays on its line
    (inc / "log" / "empty\nname.log").write_bytes(b"")
    code, text, err = run(["diagnose", str(inc)], tmp_path)
    assert code == 1 and "empty\\nname.log is empty" in text, text
    assert not any(line.startswith("name.log") for line in text.splitlines()), text
    # a path given as it is, ? and # included, is that file
    code, out, err = run(["diagnose", str(odd["query"]), "--format", "json"], tmp_path)
    assert code in (0, 1), err
    assert [f["path"] for f in json.loads(out)["inputs"]["files"]] == [str(odd["query"])]


def test_odd_file_names_read_through_spark_as_in_process(spark, tmp_path):
    """Through Spark the names are URI-escaped for Hadoop; a name Java cannot spell is read by the driver."""
    from flink_runbooks.diagnose import ingest
    from flink_runbooks.diagnose import run_detectors
    from flink_runbooks.render.report import to_json

    inc, odd = _incident_with_odd_names(tmp_path)
    through_spark = json.loads(to_json(run_detectors(ingest([str(inc)], spark, split_bytes=1 << 20))))
    in_process = json.loads(to_json(run_detectors(ingest([str(inc)]))))
    assert through_spark == in_process
    names = [f["path"] for f in through_spark["inputs"]["files"]]
    assert str(odd["query"]) in names and str(inc / "log" / "tm\\nsecond line.log") in names
    assert str(inc / "log" / "tm-\\xff\\xfe-latin1.log") in names


@pytest.mark.parametrize("command", ["diagnose", "triage"])
def test_an_input_of_only_unusable_files_is_exit_2_naming_each(tmp_path, command):
    folder = tmp_path / "incident"
    folder.mkdir()
    (folder / "empty.log").write_bytes(b"")
    (folder / "screenshot.log").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 40)
    args = [command, str(folder)] + (["--out", str(tmp_path / "report")] if command == "triage" else [])
    code, out, err = run(args, tmp_path)
    assert code == 2 and out == "", (code, out, err)
    assert len(err.strip().splitlines()) == 1 and "nothing readable" in err, err
    assert f"{folder}/empty.log is empty" in err and f"{folder}/screenshot.log looks binary" in err, err


def test_an_unusable_file_beside_a_readable_one_is_a_warning(tmp_path):
    inc = good_incident(tmp_path)
    (inc / "log" / "empty.log").write_bytes(b"")
    code, out, err = run(["diagnose", str(inc), "--format", "json"], tmp_path)
    assert code == 1 and any("empty.log is empty" in w for w in json.loads(out)["warnings"]), err


def test_a_line_past_the_limit_is_cut_and_the_rest_read_in_process(tmp_path, monkeypatch):
    """The limits made small: the same code reads a line of hundreds of megabytes (the slow tier does)."""
    from flink_runbooks.collect import ingest as ingest_module, local, scan

    for module in (local, scan, ingest_module):
        monkeypatch.setattr(module, "MAX_LINE_BYTES", 3000)
    monkeypatch.setattr(local, "_CHUNK_BYTES", 1024)
    inc = good_incident(tmp_path)
    long_file = _file_with_a_long_line(inc, 100_000)
    incident = ingest_module.ingest([str(inc)], prefilter=prefilter())
    assert _long_line_read(incident, long_file)


def _file_with_a_long_line(inc: pathlib.Path, length: int, byte: bytes = b"y") -> pathlib.Path:
    path = inc / "log" / "flink-flink-taskexecutor-1-vm.log"
    with open(path, "wb") as fh:
        fh.write(TM_HEADER.encode() + b"before the long line\n")
        chunk = byte * (1 << 20)
        fh.write(TM_HEADER.encode())
        for _ in range(length // len(chunk)):
            fh.write(chunk)
        fh.write(byte * (length % len(chunk)) + b"\n")
        fh.write(TM_HEADER.encode() + b"after the long line\njava.lang.IllegalStateException: still read\n")
    return path


def _long_line_read(incident, path: pathlib.Path) -> bool:
    """The file is read with exact line numbers around its long line, which is named in a warning."""
    info = next(f for f in incident.inputs if f.path == str(path))
    after = next(ev for ev in incident.events if ev.file == str(path) and "after the long line" in ev.message)
    assert info.lines == 4 and after.line == 3 and after.has_exception("IllegalStateException")
    assert any(str(path) in w and "line 2 is longer than" in w for w in incident.warnings), incident.warnings
    assert any(ev.file.endswith("standalonesession-0-vm.log") for ev in incident.events), "the rest is read"
    return True


def test_a_line_the_jvm_reader_would_skip_is_read_through_spark_with_exact_line_numbers(spark, tmp_path):
    """Hadoop's line reader skips a line past SPARK_LINE_BYTES; Spark's tasks read local files as byte ranges, so
    such a line (shorter than MAX_LINE_BYTES) is read whole, in a file cut into several splits."""
    from flink_runbooks.collect import ingest as ingest_module
    from flink_runbooks.collect.listing import MAX_LINE_BYTES, SPARK_LINE_BYTES

    inc = good_incident(tmp_path)
    length = SPARK_LINE_BYTES + (1 << 20)
    assert length < MAX_LINE_BYTES
    long_file = _file_with_a_long_line(inc, length)
    incident = ingest_module.ingest([str(inc)], spark, split_bytes=1 << 20, prefilter=prefilter())
    info = next(f for f in incident.inputs if f.path == str(long_file))
    after = next(ev for ev in incident.events if ev.file == str(long_file) and "after the long line" in ev.message)
    assert info.lines == 4 and after.line == 3 and after.has_exception("IllegalStateException")
    assert not any(str(long_file) in w for w in incident.warnings), incident.warnings


# --------------------------------------------------------------------------------------------------- slow tier

@pytest.mark.slow
def test_a_gzip_bomb_is_named_and_skipped(tmp_path):
    inc = good_incident(tmp_path)
    bomb = inc / "log" / "flink-flink-taskexecutor-1-vm.log.gz"
    with gzip.open(bomb, "wb", compresslevel=1) as fh:
        block = b"\0" * (1 << 20)
        for _ in range(1024):  # 1 GiB of zeros, about 1 MB on disk
            fh.write(block)
    code, out, err = run(["diagnose", str(inc), "--format", "json"], tmp_path)
    doc = json.loads(out)
    assert code == 1 and doc["findings"][0]["runbook"] == PRIMARY
    # stopped at whichever limit comes first: the ratio of a bomb or its endless line of zeros
    assert any(str(bomb) in w and ("decompression bomb" in w or "line longer than" in w) and "skipped" in w
               for w in doc["warnings"]), doc["warnings"]


@pytest.mark.slow
def test_50_mb_lines_through_spark(tmp_path):
    inc = good_incident(tmp_path)
    huge = inc / "log" / "flink-flink-taskexecutor-1-vm.log"
    with open(huge, "w") as fh:
        fh.write(TM_HEADER + "y" * (50 << 20) + "\n")
        fh.write(TM_HEADER + "after the long line\njava.lang.IllegalStateException: still read\n")
    code, out, err = run(["diagnose", str(inc), "--format", "json"], tmp_path)
    doc = json.loads(out)
    assert code == 1 and doc["findings"][0]["runbook"] == PRIMARY
    assert next(f for f in doc["inputs"]["files"] if f["path"] == str(huge))["lines"] == 3


def _many_small_files(root: pathlib.Path, count: int = 3000) -> pathlib.Path:
    folder = root / "rolled"
    folder.mkdir()
    line = "2026-11-22 02:53:48,460 INFO  org.apache.flink.runtime.taskexecutor.TaskExecutor        [] - rolled {:06d}\n"
    body = "".join(line.format(i) for i in range(38))
    assert len(body) <= 4096
    for i in range(count):
        (folder / f"flink-flink-taskexecutor-0-vm.log.{i}").write_text(body)
    shutil.copytree(example(*GOOD), folder / "current", ignore=shutil.ignore_patterns("expected.json"))
    return folder


@pytest.mark.slow
def test_3000_small_files_in_process(tmp_path):
    folder = _many_small_files(tmp_path)
    code, out, err = run(["diagnose", str(folder), "--format", "json"], tmp_path)
    doc = json.loads(out)
    assert code == 1 and doc["findings"][0]["runbook"] == PRIMARY
    assert sum(1 for f in doc["inputs"]["files"] if f["kind"] == "log") >= 3000


@pytest.mark.slow
def test_3000_small_files_through_spark(tmp_path):
    """Through Spark (a named master, or more than the in-process limit): every file read, many to a task."""
    folder = _many_small_files(tmp_path)
    code, out, err = run(["diagnose", str(folder), "--master", "local[2]", "--format", "json"], tmp_path)
    doc = json.loads(out)
    assert code == 1 and doc["findings"][0]["runbook"] == PRIMARY
    assert sum(f["lines"] for f in doc["inputs"]["files"] if ".log." in f["path"]) == 3000 * 38


@pytest.mark.slow
@pytest.mark.parametrize("uri", ["hdfs://127.0.0.1:1/logs", "s3a://missing-bucket/logs"])
def test_unreachable_remote_inputs_are_exit_2_and_one_line(tmp_path, uri):
    code, out, err = run(["diagnose", uri], tmp_path)
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1 and uri in err, err


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["in process", "through Spark"])
def test_a_200_mb_line_is_cut_with_a_warning(tmp_path, mode):
    inc = good_incident(tmp_path)
    huge = _file_with_a_long_line(inc, 200 << 20)
    code, out, err = run(["diagnose", str(inc), "--format", "json"] + _mode_args(mode), tmp_path, env=_mode_env(mode))
    doc = json.loads(out)
    assert code == 1 and doc["findings"][0]["runbook"] == PRIMARY, err
    assert next(f for f in doc["inputs"]["files"] if f["path"] == str(huge))["lines"] == 4
    assert any(str(huge) in w and "line 2 is longer than 64 MiB" in w for w in doc["warnings"]), doc["warnings"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["in process", "through Spark"])
def test_2_gib_of_nul_bytes_is_skipped_with_a_warning(tmp_path, mode):
    inc = good_incident(tmp_path)
    zeros = inc / "log" / "zeros.log"
    with open(zeros, "wb") as fh:
        fh.truncate(2 << 30)  # sparse: 2 GiB of NUL bytes without using the disk
    code, out, err = run(["diagnose", str(inc), "--format", "json"] + _mode_args(mode), tmp_path, env=_mode_env(mode))
    doc = json.loads(out)
    assert code == 1 and doc["findings"][0]["runbook"] == PRIMARY, err
    assert any(str(zeros) in w and "looks binary" in w and "skipped" in w for w in doc["warnings"]), doc["warnings"]


def _mode_args(mode: str) -> list[str]:
    return ["--master", "local[2]"] if mode == "through Spark" else []


def _mode_env(mode: str) -> dict:
    # in process whatever the size: the in-process reader must bound its memory on its own
    return {"FLINK_RUNBOOKS_LOCAL_LIMIT_BYTES": str(8 << 30)} if mode == "in process" else {}
