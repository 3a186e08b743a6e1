"""Detector config-value-invalid: a value in the wrong format for the release (with the same value in the right one),
a key the release does not read (removed, renamed, or in flink-conf.yaml on 2.x), a misspelled key."""
from __future__ import annotations

import json

from corpus import DATA, example, incident_from_text
from flink_runbooks.diagnose import ingest
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.evidence.config_values import ParseFailure, closest_key, corrected_value, declared_keys
from flink_runbooks.model import Event
from flink_runbooks.render.patches import render_config_diff

SLUG = "config-value-invalid"


def test_a_duration_with_a_unit_on_a_release_that_reads_milliseconds(spark):
    d = run_detectors(ingest([str(example(SLUG, "duration-unit-for-old-release-1.17"))], spark))
    f = d.primary
    assert (f.runbook, f.root_cause.slug) == (SLUG, "value-format-for-version")
    [patch] = [p for p in f.patches if p.target == "flink"]
    assert (patch.key, patch.current, patch.proposed) == ("heartbeat.timeout", "2 min", "120000")
    assert "plain number" in f.summary and "Could not parse value '2 min'" in f.evidence[0].text
    diff = render_config_diff([patch], d.incident.config, d.incident.flink_version)
    assert "-heartbeat.timeout: 2 min" in diff and "+heartbeat.timeout: 120000" in diff


def test_a_fractional_duration_in_config_yaml_fails_the_client_only(spark):
    d = run_detectors(ingest([str(example(SLUG, "fractional-interval-2.3"))], spark))
    f = d.primary
    assert (f.runbook, f.root_cause.slug) == (SLUG, "value-format-for-version")
    assert f.evidence[0].file.endswith(".out")  # only the CLI output holds the error
    [patch] = [p for p in f.patches if p.target == "flink"]
    assert (patch.key, patch.proposed) == ("execution.checkpointing.interval", "90 s")
    assert "client failed to submit" in f.summary


def test_a_flink_conf_yaml_left_on_a_2x_cluster_is_not_read(spark):
    d = run_detectors(ingest([str(example(SLUG, "flink-conf-yaml-on-2.3"))], spark))
    f = d.primary
    assert (f.runbook, f.root_cause.slug, f.severity) == (SLUG, "key-not-read", "warning")
    assert set(f.details["keys_not_read"]) == {"execution.checkpointing.interval", "execution.checkpointing.dir",
                                               "restart-strategy.type", "restart-strategy.fixed-delay.attempts"}
    assert all(e.file.endswith("flink-conf.yaml") for e in f.evidence)
    [move] = f.patches
    assert move.key == "move the settings into config.yaml" and "execution.checkpointing.interval: 10 s" in move.snippet


def test_a_misspelled_key_names_the_key_it_meant(spark):
    d = run_detectors(ingest([str(example(SLUG, "misspelled-key-1.20"))], spark))
    f = d.primary
    assert (f.runbook, f.root_cause.slug) == (SLUG, "misspelled-key")
    assert f.details["misspelled_keys"]["execution.checkpointing.intervall"]["meant"] == "execution.checkpointing.interval"
    assert "Loading configuration property: execution.checkpointing.intervall" in f.evidence[0].text
    assert [(p.key, p.proposed) for p in f.patches] == [("execution.checkpointing.interval", "10 s"),
                                                        ("execution.checkpointing.intervall", None)]


def test_healthy_and_a_deprecated_key_give_nothing(spark):
    for name in ("healthy-1.20", "near-miss-deprecated-key-1.20"):
        d = run_detectors(ingest([str(example(SLUG, name))], spark))
        assert d.findings == [], (name, [(f.runbook, f.root_cause.slug, f.summary[:120]) for f in d.findings])


def test_a_removed_key_is_spelled_for_the_release():
    text = "2024-05-02 10:00:00,000 INFO  org.apache.flink.configuration.GlobalConfiguration [] - Loading configuration property: state.backend.local-recovery, true"
    inc = incident_from_text(text, version="2.0.0")
    inc.config.add("state.backend.local-recovery", "true",
                   __import__("flink_runbooks.parse.config", fromlist=["ConfigSource"]).ConfigSource("log", "jobmanager.log", 1))
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "key-not-read"
    assert f.details["keys_not_read"]["state.backend.local-recovery"]["reads_instead"] == "execution.state-recovery.from-local"
    assert ("execution.state-recovery.from-local", "true") in [(p.key, p.proposed) for p in f.patches]


def test_the_corrected_value_follows_what_the_release_expects():
    def failure(value, expects):
        return ParseFailure(Event("x", 1), "k", value, expects, "")
    assert corrected_value(failure("2 min", "number")) == "120000"
    assert corrected_value(failure("1.5 min", "duration")) == "90 s"
    assert corrected_value(failure("1.5g", "memory size")) == "1536m"
    assert corrected_value(failure("2 gigabytes", "memory size")) == "2g"
    assert corrected_value(failure("yes", "boolean")) == "true"
    assert corrected_value(failure("fast", "duration")) is None


def test_typos_are_one_edit_from_a_declared_key_and_real_keys_are_never_typos():
    declared = declared_keys((1, 20))
    assert closest_key("taskmanager.numberOfTaskSlot", declared) == "taskmanager.numberOfTaskSlots"
    assert closest_key("taskmanager.memory.proces.size", declared) == "taskmanager.memory.process.size"
    for key in ("taskmanager.numberOfTaskSlots", "state.backend", "metrics.reporter.prom.port",
                "execution.checkpointing.dir", "my.own.setting"):
        assert closest_key(key, declared) is None, key


def test_a_memory_model_failure_stays_with_its_runbook():
    text = "\n".join([
        "2024-05-02 10:00:00,000 ERROR org.apache.flink.runtime.taskexecutor.TaskManagerRunner [] - Terminating TaskManagerRunner with exit code 1.",
        "org.apache.flink.configuration.IllegalConfigurationException: TaskManager memory configuration failed: Sum of configured "
        "Framework Heap Memory (128.000mb (134217728 bytes)), Framework Off-Heap Memory (128.000mb (134217728 bytes)), Task "
        "Off-Heap Memory (0 bytes), Managed Memory (2.000gb (2147483648 bytes)) and Network Memory (64.000mb (67108864 bytes)) "
        "exceed configured Total Flink Memory (1.000gb (1073741824 bytes))."])
    assert get_detector(SLUG).detect(incident_from_text(text, version="1.17.2")) == []


def test_an_excerpt_of_the_parse_error_gives_this_runbook():
    text = ("java.lang.IllegalArgumentException: Could not parse value '10 sek' for key 'execution.checkpointing.timeout'.\n"
            "Caused by: java.lang.IllegalArgumentException: Time interval unit label 'sek' does not match any of the "
            "recognized units: DAYS: (d | day | days), HOURS: (h | hour | hours)\n")
    d = run_detectors(incident_from_text(text))
    assert d.primary.runbook == SLUG and d.primary.root_cause.slug == "value-format-for-version"
    assert d.primary.confidence <= 0.75
    assert not [p for p in d.primary.patches if p.target == "flink"]  # no unit to guess from 'sek'


def test_every_example_gives_its_expected_verdict(spark):
    folders = sorted(p.parent for p in (DATA / SLUG).glob("*/expected.json"))
    assert len(folders) >= 6
    for path in folders:
        expected = json.loads((path / "expected.json").read_text())
        d = run_detectors(ingest([str(path)], spark))
        got = (d.primary.runbook, d.primary.root_cause.slug) if d.primary else (None, None)
        assert got == (expected["primary"], expected["root_cause"] if expected["primary"] else None), path.name


def test_a_removed_option_with_a_new_shape_is_rewritten_not_renamed(spark):
    d = run_detectors(ingest([str(example(SLUG, "removed-key-2.3"))], spark))
    f = d.primary
    assert (f.runbook, f.root_cause.slug) == (SLUG, "key-not-read")
    assert f.details["keys_not_read"]["pipeline.registered-kryo-types"]["reads_instead"] == "pipeline.serialization-config"
    rewrite = next(p for p in f.patches if p.key == "rewrite the removed setting")
    assert "- com.acme.orders.OrdersJob$Order: {type: kryo}" in rewrite.snippet
    assert ("pipeline.registered-kryo-types", None) in [(p.key, p.proposed) for p in f.patches if p.target == "flink"]
    assert not any(p.key == "pipeline.serialization-config" for p in f.patches)  # not the same value under a new name


def test_every_key_written_the_same_wrong_way_is_fixed_not_only_the_one_flink_stopped_at(tmp_path):
    # Flink 1.17 stops at heartbeat.timeout; the same file writes three more options 1.17 reads as plain milliseconds
    # with a unit. A Duration option (read with its unit) and a plain number stay as they are.
    import shutil

    incident = tmp_path / "incident"
    shutil.copytree(example(SLUG, "duration-unit-for-old-release-1.17"), incident)
    with (incident / "flink-conf.yaml").open("a") as conf:
        conf.write("heartbeat.interval: 20 s\nslot.request.timeout: 5 min\nweb.timeout: 1 min\n"
                   "execution.checkpointing.interval: 1 min\ntaskmanager.numberOfTaskSlots: 2\n")
    d = run_detectors(ingest([str(incident)]))
    f = d.primary
    assert (f.runbook, f.root_cause.slug) == (SLUG, "value-format-for-version")
    proposed = {p.key: (p.current, p.proposed) for p in f.patches if p.target == "flink"}
    assert proposed == {"heartbeat.timeout": ("2 min", "120000"), "heartbeat.interval": ("20 s", "20000"),
                        "slot.request.timeout": ("5 min", "300000"), "web.timeout": ("1 min", "60000")}
    assert "3 other key(s)" in f.summary and "heartbeat.interval: 20 s (in its format: 20000)" in f.summary
    diff = render_config_diff([p for p in f.patches if p.target == "flink"], d.incident.config, "1.17.2")
    for line in ("+heartbeat.interval: 20000", "+slot.request.timeout: 300000", "+web.timeout: 60000"):
        assert line in diff
    assert "+execution.checkpointing.interval" not in diff and "+taskmanager.numberOfTaskSlots" not in diff


def test_a_fraction_in_one_duration_fixes_every_fractional_duration_of_the_file():
    text = ("java.lang.IllegalArgumentException: Could not parse value '1.5 min' for key "
            "'execution.checkpointing.interval'.\n"
            "Caused by: java.lang.IllegalArgumentException: Time interval unit label '.5 min' does not match any of "
            "the recognized units: DAYS: (d | day | days), HOURS: (h | hour | hours)\n")
    config = {"execution.checkpointing.interval": "1.5 min", "execution.checkpointing.timeout": "2.5 min",
              "heartbeat.timeout": "0.5 min", "pekko.ask.timeout": "10 s", "taskmanager.memory.process.size": "1.5g"}
    [f] = get_detector(SLUG).detect(incident_from_text(text, config, "2.3.0"))
    proposed = {p.key: p.proposed for p in f.patches if p.target == "flink"}
    assert proposed == {"execution.checkpointing.interval": "90 s", "execution.checkpointing.timeout": "150 s",
                        "heartbeat.timeout": "30 s"}  # a size is another type, a whole duration is read
