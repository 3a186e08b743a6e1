"""What the on-call engineer reads in a terminal: the answer on the first screen, lines that fit it."""
from __future__ import annotations

import pytest

from corpus import example
from flink_runbooks.apps import cli

RESTORE = ("rocksdb-restore-corruption", "remote-checkpoint-corrupt-v1.20")
SCREEN_ROWS = 40


def diagnose_text(capsys, monkeypatch, *args, columns=100):
    monkeypatch.setenv("COLUMNS", str(columns))
    code = cli.main(["diagnose", *args])
    return code, capsys.readouterr().out


@pytest.fixture
def restore_incident(monkeypatch):
    path = example(*RESTORE)
    monkeypatch.chdir(path.parent)  # the directory is given as typed: relative
    return path.name


def test_do_now_comes_on_the_first_screen_after_the_headline(spark, capsys, monkeypatch, restore_incident):
    code, out = diagnose_text(capsys, monkeypatch, restore_incident)
    lines = out.splitlines()
    assert code == 1
    assert lines[0] == "[PRIMARY] rocksdb-restore-corruption: remote-checkpoint-corrupt (confidence high)"
    do_now = lines.index("  Do now:")
    assert do_now < 8, lines[:do_now]
    assert lines[do_now + 1].startswith("    1. restart from an older snapshot: ")
    assert "flink run -s <latest savepoint path>" in "\n".join(lines[:SCREEN_ROWS])
    config = lines.index("  Configuration change (proposed, not applied):")
    evidence = lines.index("  Evidence:")
    assert do_now < config < evidence, "actions, then the configuration change, then the evidence"


def test_prevention_is_not_under_do_now(spark, capsys, monkeypatch):
    """A poison record: skip or fix it now; an alert on restarts is for the next incident, after the fix."""
    path = example("user-code-exception", "poison-record-1.20")
    monkeypatch.chdir(path.parent)
    _, out = diagnose_text(capsys, monkeypatch, path.name)
    primary = out.split("\n[also]", 1)[0].split("\n[warning]", 1)[0]
    do_now = primary.split("  Do now:\n", 1)[1].split("\n  ", 1)[0] if "  Do now:" in primary else ""
    assert "alert on restarts" not in do_now
    later = primary.index("  Once the incident is over:")
    assert primary.index("    1. alert on restarts: ", later) > later
    assert "FlinkJobRestarting" not in primary, "its rule waits for --verbose"


def test_the_summary_of_what_was_read_comes_last_and_short(spark, capsys, monkeypatch, restore_incident):
    _, out = diagnose_text(capsys, monkeypatch, restore_incident)
    tail = out.splitlines()[-6:]
    assert any(line.startswith("Read: Flink 1.20.3 from start-up banner "
                               "(log/flink-flink-standalonesession-0-vm.log.gz:47)") for line in tail)
    assert f"Paths are relative to {restore_incident}/" in tail
    skipped = next(i for i, line in enumerate(tail) if line.startswith("Skipped 2 file(s)"))
    assert "expected.json" in tail[skipped] and "…" in "".join(tail[skipped:]), "a long name is elided"
    assert str(example(*RESTORE)) not in out, "no absolute path"
    assert out.index("Read: Flink") > out.index("[also]"), "the input summary after every finding"


@pytest.mark.parametrize("columns", [100, 72])
def test_every_line_fits_the_terminal_and_log_text_wraps_at_words(spark, capsys, monkeypatch, restore_incident,
                                                                  columns):
    _, out = diagnose_text(capsys, monkeypatch, restore_incident, columns=columns)
    assert max(len(line) for line in out.splitlines()) <= columns
    # the restore's log line wraps at words onto its second line, and its cut ends on a whole word
    logged = ("INFO org.apache.flink.runtime.checkpoint.CheckpointCoordinator - Restoring job "
              "1807ce3de9b569721463e999800e2432 from Checkpoint 3 @ 1795316327469 for "
              "1807ce3de9b569721463e999800e2432 located at").split()
    lines = out.splitlines()
    first = next(i for i, line in enumerate(lines) if line.strip().startswith("INFO org.apache.flink.runtime.checkpoint"))
    shown = " ".join(lines[first:first + 2]).split()
    assert shown[-1] == "…" and shown[:-1] == logged[:len(shown) - 1]


def test_verbose_shows_the_long_form(spark, capsys, monkeypatch, restore_incident):
    _, short = diagnose_text(capsys, monkeypatch, restore_incident)
    _, verbose = diagnose_text(capsys, monkeypatch, restore_incident, "--verbose")
    assert len(verbose.splitlines()) > len(short.splitlines())
    assert "1 action(s) and 5 change(s) proposed: --verbose shows them" in short
    assert "--verbose" not in verbose
    # a secondary finding's actions, said to be hardening rather than the fix, and every line of a trace
    assert verbose.count("  Do now:") == 1 and "  Actions (hardening, not the fix):" in verbose
    assert verbose.index("  Do now:") < verbose.index("[also]") < verbose.index("(hardening, not the fix)")
    assert "Caused by: java.io.IOException: Error while opening RocksDB" in verbose


def test_an_undetermined_primary_does_not_read_like_a_verdict(spark, capsys, monkeypatch):
    path = example("container-memory-exceeded", "oomkilled-without-config-1.17")
    monkeypatch.chdir(path.parent)
    _, out = diagnose_text(capsys, monkeypatch, path.name)
    lines = out.splitlines()
    assert lines[0].startswith("[PRIMARY] container-memory-exceeded: cause UNDETERMINED (40%")
    assert "confidence high" not in out and "confidence medium" not in out
    assert lines[3].startswith("  Collect next: the flink-conf.yaml / config.yaml the TaskManagers ran with")


def test_a_pasted_ticket_is_shown_as_stdin_with_the_version_it_names(capsys, monkeypatch):
    import io

    ticket = ("Hi team, the orders job on Flink 1.18.1 died tonight, trace below:\n"
              "java.lang.OutOfMemoryError: Java heap space\n"
              "\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)\n")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(ticket.encode())))
    code, out = diagnose_text(capsys, monkeypatch, "-")
    assert code == 1
    assert "    stdin:1  " in out and "/stdin.log" not in out
    assert "--flink-version 1.18.1" in out


def test_confidence_in_words_is_the_one_serve_uses():
    from flink_runbooks.render.terminal import confidence_words

    assert [confidence_words(c, "x") for c in (0.9, 0.75, 0.6, 0.49)] == ["high", "high", "medium", "undetermined"]
    assert confidence_words(0.95, "undetermined") == "undetermined"


def test_wrapping_never_cuts_a_word_and_ends_a_cut_with_an_ellipsis():
    from flink_runbooks.render.terminal import _wrap

    text = "switched from INITIALIZING to FAILED with failure cause java.lang.Exception: while creating " * 3
    lines = _wrap(text, 60, "  ", max_lines=2)
    assert len(lines) == 2 and all(len(line) <= 60 for line in lines)
    words = set(text.split())
    assert all(w in words for line in lines for w in line.replace(" …", "").split())
    assert lines[-1].endswith(" …")


def test_a_file_name_longer_than_the_line_stays_whole_to_be_copied():
    from flink_runbooks.render.terminal import _wrap

    path = "/srv/incidents/2024-03-05-orders/attachments/from-the-ticket/taskmanager-host-17/passwd"
    lines = _wrap(f"{path}: unknown log layout, read as plain text", 40, "      ", first="warning: ", whole_words=True)
    assert lines[0] == f"warning: {path}:", lines
    # log text keeps to the width: a long word in it is split
    assert all(len(line) <= 40 for line in _wrap(f"logged {path}", 40, "  "))


def test_no_control_character_from_a_log_reaches_the_terminal(tmp_path):
    from corpus import incident_from_files
    from flink_runbooks.diagnose import run_detectors
    from flink_runbooks.render.terminal import answer

    incident = incident_from_files(tmp_path / "paste", {"ticket.txt": (
        "the job died \x1b]0;owned\x07 tonight\njava.lang.OutOfMemoryError: Java heap space\x1b[2J\n")})
    text = answer(run_detectors(incident), width=80)
    assert "oom-java-heap" in text
    assert not [c for c in text if (ord(c) < 0x20 and c != "\n") or 0x7f <= ord(c) <= 0x9f]
    assert "\\x1b]0;owned\\x07" in text


def test_the_readme_shows_what_diagnose_prints(spark, capsys, monkeypatch, restore_incident):
    from corpus import ROOT

    _, out = diagnose_text(capsys, monkeypatch, restore_incident)
    readme = (ROOT / "README.md").read_text()
    assert f"flink-runbooks diagnose {restore_incident}`" in readme
    assert "```text\n" + out + "```" in readme, "regenerate the README's example from the command it names"


def test_an_action_named_after_credentials_keeps_its_reason_readable():
    """The masking reads 'credentials: Compare' as a secret's value: the action's name and its reason are masked
    apart, so prose stays readable while a secret quoted in the reason is still hidden."""
    from flink_runbooks.model import Patch
    from flink_runbooks.render.terminal import _actions, _Lines

    out = _Lines(width=100, inputs=(), color=False)
    _actions(out, [Patch(target="ops", key="check the client credentials", proposed=None,
                         reason="Compare the job's sasl.mechanism; the logs show password=hunter2.")], "Do now:")
    text = "\n".join(out.lines)
    assert "check the client credentials: Compare the job's" in text
    assert "hunter2" not in text
