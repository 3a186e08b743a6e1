"""The CLI contract automation relies on: JSON schema, exit codes, one-line errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from corpus import ROOT, example
from flink_runbooks.apps import cli

SLUG = "checkpoint-tolerable-failure-threshold"


def run_cli(capsys, *args):
    code = cli.main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_json_contract_for_an_incident_with_a_finding(spark, capsys):
    code, out, _ = run_cli(capsys, "diagnose", str(example(SLUG, "storage-permission-denied")), "--format", "json")
    assert code == 1
    doc = json.loads(out)
    assert set(doc) >= {"flink_version", "inputs", "findings", "warnings"}
    assert doc["flink_version"] == "1.20.3"
    primary = [f for f in doc["findings"] if f["primary"]]
    assert len(primary) == 1 and primary[0] is doc["findings"][0]
    f = primary[0]
    assert set(f) >= {"runbook", "title", "root_cause", "summary", "confidence", "primary", "evidence", "patches"}
    assert f["runbook"] == SLUG and f["root_cause"]["slug"] == "storage-unwritable"
    ev = f["evidence"][0]
    assert set(ev) >= {"file", "line", "ts", "text"}
    assert ev["file"].endswith("flink-flink-standalonesession-0-vm.log") and ev["line"] == 412
    # a store that refuses writes gets access for the Flink user, never more tolerance (it would hide the fault)
    patch = next(p for p in f["patches"] if p["key"] == "checkpoint storage permissions")
    assert patch["target"] == "ops" and "chown -R <flink-user>" in patch["snippet"]
    assert not [p for p in f["patches"] if "tolerable" in p["key"]]
    assert f["would_change_verdict"]


def test_healthy_incident_exits_zero_with_no_findings(spark, capsys):
    code, out, _ = run_cli(capsys, "diagnose", str(example(SLUG, "healthy")), "--format", "json")
    assert code == 0
    assert json.loads(out)["findings"] == []


def test_text_output_leads_with_the_primary_finding_and_its_diff(spark, capsys):
    code, out, _ = run_cli(capsys, "diagnose", str(example(SLUG, "storage-permission-denied")))
    assert code == 1
    first = next(line for line in out.splitlines() if line.startswith("["))
    assert first.startswith(f"[PRIMARY] {SLUG}")
    assert "    1. checkpoint storage permissions: " in out and "chown -R <flink-user>" in out
    assert "Would change the verdict: If the same path is writable" in out
    assert "flink-flink-standalonesession-0-vm.log:412" in out


def test_runbook_selection(spark, capsys):
    code, out, _ = run_cli(capsys, "diagnose", str(example(SLUG, "storage-permission-denied")),
                           "--runbooks", SLUG, "--format", "json")
    assert code == 1 and {f["runbook"] for f in json.loads(out)["findings"]} == {SLUG}


def _subprocess(*args):
    env = dict(os.environ)
    return subprocess.run([sys.executable, "-m", "flink_runbooks", *args], capture_output=True, text=True,
                          cwd=ROOT, env=env, timeout=300)


def test_missing_path_exits_two_with_one_line_on_stderr(tmp_path):
    proc = _subprocess("diagnose", str(tmp_path / "missing"))
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [f"flink-runbooks: no such file or directory: {tmp_path / 'missing'}"]


@pytest.mark.parametrize("args", [(), ("diagnose",), ("diagnose", ".", "--format", "yaml"), ("explode",)])
def test_usage_errors_exit_two(args):
    proc = _subprocess(*args)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1


def test_unknown_runbook_exits_two(tmp_path):
    (tmp_path / "jobmanager.log").write_text("x\n")
    proc = _subprocess("diagnose", str(tmp_path), "--runbooks", "no-such-runbook")
    assert proc.returncode == 2 and "unknown runbook" in proc.stderr


def test_a_mistyped_runbook_gets_the_one_meant_not_the_whole_list(capsys, tmp_path):
    (tmp_path / "jobmanager.log").write_text("x\n")
    code, _, err = run_cli(capsys, "diagnose", str(tmp_path), "--runbooks", "rocksdb-restore-corrupt")
    assert code == 2
    assert err == "flink-runbooks: unknown runbook 'rocksdb-restore-corrupt'; did you mean rocksdb-restore-corruption?\n"
    code, _, err = run_cli(capsys, "diagnose", str(tmp_path), "--runbooks", "zzz")
    assert code == 2 and "oom-java-heap" not in err and "`flink-runbooks runbooks` lists them" in err


def test_a_reader_that_stops_early_ends_the_listing_quietly():
    """`runbooks | head`: the reader is gone before anything is written."""
    proc = subprocess.Popen([sys.executable, "-m", "flink_runbooks", "runbooks"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, cwd=ROOT)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == cli.EXIT_BROKEN_PIPE == 141
    assert err == ""


def test_version(capsys):
    from flink_runbooks import __version__

    with pytest.raises(SystemExit) as done:
        cli.main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"flink-runbooks {__version__}\n"


def test_every_serve_option_is_explained(capsys):
    with pytest.raises(SystemExit):
        cli.main(["serve", "--help"])
    import re

    help_text = capsys.readouterr().out
    options = re.findall(r"^  (--[a-z-]+)( [A-Z_]+)?(.*)$", help_text, flags=re.M)
    assert {name for name, _, _ in options} >= {"--host", "--port", "--logs-root", "--out-root"}
    unexplained = [name for name, _, rest in options if not rest.strip()
                   and not re.search(rf"^  {name}.*\n {{20,}}\S", help_text, flags=re.M)]
    assert unexplained == []
    assert "the address to listen on" in help_text and "the port to listen on (default 8089)" in help_text


def test_empty_directory_exits_two(spark, capsys, tmp_path):
    (tmp_path / "empty").mkdir()
    code, out, err = run_cli(capsys, "diagnose", str(tmp_path / "empty"))
    assert code == 2 and out == "" and "nothing to read" in err


def test_a_crash_exits_four_with_one_line_not_one_like_findings(spark, capsys, monkeypatch):
    import flink_runbooks.diagnose

    def broken(*_args, **_kwargs):
        raise RuntimeError("detector exploded")

    monkeypatch.setattr(flink_runbooks.diagnose, "run_detectors", broken)
    code, out, err = run_cli(capsys, "diagnose", str(example(SLUG, "storage-permission-denied")), "--format", "json")
    assert code == cli.EXIT_INTERNAL_ERROR == 4
    assert out == ""
    assert err.strip().splitlines() == [
        "flink-runbooks: internal error: RuntimeError: detector exploded (set FLINK_RUNBOOKS_DEBUG=1 for the traceback)"]


@pytest.mark.slow  # starts a JVM in a fresh process
def test_the_jvm_start_up_says_nothing_on_stderr(tmp_path):
    """Spark's launcher enables an incubating JDK module; the JVM's warning about it is not the user's business."""
    import subprocess
    import sys

    from corpus import example

    proc = subprocess.run([sys.executable, "-m", "flink_runbooks.apps.cli", "diagnose", "--master", "local[1]",
                           str(example("checkpoint-tolerable-failure-threshold", "storage-permission-denied")),
                           "--format", "json"], capture_output=True, text=True, timeout=180, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "incubator" not in proc.stderr and proc.stderr.strip() == "", proc.stderr


def test_an_internal_error_is_one_line_without_the_java_trace_or_a_secret(monkeypatch, capsys, tmp_path):
    from flink_runbooks.collect import ingest as ingest_module

    class JavaError(Exception):
        class java_exception:  # noqa: N801 - what Py4J hands over
            @staticmethod
            def toString():
                return ("java.io.IOException: cannot open s3a://AKIAIOSFODNN7EXAMPLE:Zq7secretValue@bucket/x\n"
                        "\tat org.apache.hadoop.fs.s3a.S3AFileSystem.open(S3AFileSystem.java:1)\n" * 200)

    def explode(*_a, **_k):
        raise JavaError("An error occurred while calling o42.collectToPython.\n" + "\tat x.Y(Y.java:1)\n" * 200)

    monkeypatch.setattr(ingest_module, "ingest", explode)
    (tmp_path / "x.log").write_text("x\n")
    assert cli.main(["diagnose", str(tmp_path / "x.log")]) == 4
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "java.io.IOException: cannot open" in err
    assert "Zq7secretValue" not in err and "AKIAIOSFODNN7EXAMPLE" not in err and "\tat " not in err


TICKET = ("Hi team, the orders job on Flink 1.18.1 died tonight, trace below:\n"
          "java.lang.OutOfMemoryError: Java heap space\n"
          "\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)\n")


def test_a_trace_pasted_on_standard_input_is_diagnosed():
    done = subprocess.run([str(ROOT / ".venv" / "bin" / "flink-runbooks"), "diagnose", "-", "--format", "json"],
                          input=TICKET, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["findings"][0]["runbook"] == "oom-java-heap"
    empty = subprocess.run([str(ROOT / ".venv" / "bin" / "flink-runbooks"), "diagnose", "-"], input="\n",
                           capture_output=True, text=True, timeout=300)
    assert empty.returncode == 2 and empty.stderr.startswith("flink-runbooks: nothing on standard input")


def test_a_version_named_in_the_text_but_not_printed_by_flink_is_a_hint_not_a_verdict(tmp_path):
    from corpus import incident_from_files

    incident = incident_from_files(tmp_path / "paste", {"ticket.txt": TICKET})
    assert incident.flink_version is None
    [hint] = [w for w in incident.warnings if "mentions Flink" in w]
    assert "Flink 1.18.1" in hint and "--flink-version 1.18.1" in hint
    typed = incident_from_files(tmp_path / "typed", {"ticket.txt": TICKET}, version="1.18.1")
    assert typed.flink_version == "1.18.1" and not [w for w in typed.warnings if "mentions Flink" in w]
