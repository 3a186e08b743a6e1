"""report.md and patches/: the fix first and apart from hardening, actions shown as actions, placeholders visible."""
from __future__ import annotations

import pathlib

import pytest
from bs4 import BeautifulSoup

from corpus import example
from flink_runbooks.apps.triage import TriageReport, write_patches
from flink_runbooks.render.markdown import render_markdown


def _report(path: pathlib.Path, out: pathlib.Path) -> tuple[TriageReport, str]:
    from flink_runbooks.diagnose import ingest, run_detectors

    diagnosis = run_detectors(ingest([str(path)], None))
    report = TriageReport(out, diagnosis)
    report.patches = write_patches(diagnosis, out / "patches")
    return report, render_markdown(report)


def _viewer_html(md: str) -> str:
    """As a permissive viewer shows it: raw HTML passes through (a placeholder read as a tag vanishes)."""
    import mistune

    return mistune.create_markdown(escape=False, plugins=["table", "url"])(md)


def _sections(md: str) -> list[str]:
    return [line for line in md.splitlines() if line.startswith("#")]


@pytest.fixture(scope="module")
def permission_denied(tmp_path_factory):
    """A checkpoint store the job may not write to: the fix is a change of owner, the restart-strategy finding beside
    it proposes retaining checkpoints."""
    out = tmp_path_factory.mktemp("out")
    return _report(example("checkpoint-tolerable-failure-threshold", "storage-permission-denied"), out)


def test_the_fix_is_an_action_first_and_the_secondary_findings_changes_are_hardening(permission_denied):
    report, md = permission_denied
    out = report.out
    assert not (out / "patches" / "flink-conf.yaml.diff").exists(), "the fix changes no configuration"
    hardening = (out / "patches" / "hardening" / "flink-conf.yaml.diff").read_text()
    assert "+execution.checkpointing.externalized-checkpoint-retention: RETAIN_ON_CANCELLATION" in hardening
    sections = _sections(md)
    primary = next(i for i, s in enumerate(sections) if s.startswith("## Primary: "))
    assert sections[primary + 1] == "### Do now", "the primary finding's actions come right after its verdict"
    assert sections.index("## Hardening (not the fix: once the incident is over)") > primary
    do_now = md.split("### Do now", 1)[1].split("\n## ", 1)[0]
    assert "**checkpoint storage permissions**" in do_now and "chown" in do_now
    assert "RETAIN_ON_CANCELLATION" not in md.split("## Hardening", 1)[0], "hardening stays out of the fix"
    assert md.index("**Verdict:**") < md.index("## Primary: ") < md.index("## Input")


def test_an_operations_action_is_not_shown_as_a_key_with_a_value(permission_denied, tmp_path):
    _, md = permission_denied
    assert "→ **—**" not in md and "— →" not in md
    eos_report, eos = _report(example("kafka-eos-transaction-timeout", "transaction-expired-after-downtime-1.13"),
                              tmp_path)
    action = next(line for line in eos.splitlines() if "raise transaction.max.timeout.ms on the brokers" in line)
    assert "→" not in action, "an action has no current and proposed value"
    soup = BeautifulSoup(_viewer_html(eos), features="html.parser")
    assert any(pre.get_text().startswith("# server.properties") for pre in soup.find_all("pre")), \
        "the snippet is a block of its own, its comment included"
    assert "server.properties" not in " ".join(s.get_text() for s in soup.find_all("strong"))


def test_a_restart_cap_from_one_fault_claims_no_measured_span(tmp_path):
    _, md = _report(example("rocksdb-restore-corruption", "remote-checkpoint-corrupt-v1.20"), tmp_path)
    assert "(0 ms)" not in md
    fix = [line for line in (tmp_path / "patches" / "flink-conf.yaml.diff").read_text().splitlines()
           if line.startswith("+") and not line.startswith("+++")]
    assert fix == ["+execution.checkpointing.num-retained: 3"], "the fix diff holds the fix alone"
    assert "+restart-strategy.type: exponential-delay" in \
        (tmp_path / "patches" / "hardening" / "flink-conf.yaml.diff").read_text()
    sections = _sections(md)
    assert sections[:2] == ["# Triage report", "## Primary: RocksDB state restore fails on a corrupt SST file "
                                                "(`rocksdb-restore-corruption`)"]
    do_now = md.split("### Do now", 1)[1]
    assert do_now.lstrip().startswith("1. **restart from an older snapshot**")


def test_prevention_is_apart_from_do_now(tmp_path):
    _, md = _report(example("user-code-exception", "poison-record-1.20"), tmp_path)
    primary = md.split("\n## ", 2)[1]
    assert "### Once the incident is over" in primary
    assert "alert on restarts" in primary.split("### Once the incident is over", 1)[1]
    assert "alert on restarts" not in primary.split("### Once the incident is over", 1)[0]


def test_the_hardening_diff_applies_after_the_fix(tmp_path):
    """Both diffs start from what the user has: applied one after the other, as a reader would, both apply."""
    import subprocess

    incident = example("rocksdb-restore-corruption", "remote-checkpoint-corrupt-v1.20")
    report, _ = _report(incident, tmp_path / "out")
    config = tmp_path / "conf"
    config.mkdir()
    source = report.diagnosis.incident.config.file_path
    original = pathlib.Path(source).read_text() if source else ""
    (config / "flink-conf.yaml").write_text(original)
    for diff in ("flink-conf.yaml.diff", "hardening/flink-conf.yaml.diff"):
        done = subprocess.run(["patch", "-p1", "--forward", "-i", str(tmp_path / "out" / "patches" / diff)],
                              cwd=config, capture_output=True, text=True)
        assert done.returncode == 0 and "offset" not in done.stdout and "fuzz" not in done.stdout, done.stdout
    patched = (config / "flink-conf.yaml").read_text()
    assert "execution.checkpointing.num-retained: 3" in patched and "restart-strategy.type: exponential-delay" in patched


def test_placeholders_in_the_catalogues_words_stay_visible(tmp_path):
    report, md = _report(example("sql-connector-missing", "connector-jar-missing-2.3"), tmp_path)
    text = BeautifulSoup(_viewer_html(md), features="html.parser").get_text()
    assert "A flink-connector-<name> jar on the classpath" in text
    from flink_runbooks.render.markdown import finding_html

    page = BeautifulSoup(finding_html(report.diagnosis.primary), features="html.parser").get_text()
    assert "flink-sql-connector-<name> jar" in page


def test_evidence_names_files_relative_to_the_input_folder(permission_denied):
    report, md = permission_denied
    root = str(example("checkpoint-tolerable-failure-threshold", "storage-permission-denied"))
    evidence = [line for line in md.splitlines() if line.startswith("- `") and ".log" in line]
    assert evidence and not [line for line in evidence if root in line]
    assert "- `log/flink-flink-standalonesession-0-vm.log:412`" in md
    assert f"Evidence names files relative to `{root}`." in md.split("## Input", 1)[1]
