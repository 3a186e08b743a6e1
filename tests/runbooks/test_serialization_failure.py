"""Detector serialization-failure: generic types disabled, Kryo on Java 17 without --add-opens, a non-POJO through Kryo,
a function holding a non-serializable field, an Avro null; each from Flink's own message and what the processes
logged."""
from __future__ import annotations

import json

from corpus import DATA, example, incident_from_text
from flink_runbooks.diagnose import ingest
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors

SLUG = "serialization-failure"


def _primary(spark, name):
    d = run_detectors(ingest([str(example(SLUG, name))], spark))
    return d, d.primary


def test_generic_types_disabled_names_the_type_and_why_it_is_no_pojo(spark):
    for name in ("generic-types-disabled-1.17", "generic-types-disabled-2.3"):
        d, f = _primary(spark, name)
        assert (f.runbook, f.root_cause.slug) == (SLUG, "generic-types-disabled"), name
        assert f.details["type"] == "com.acme.orders.OrdersJob$Order"
        assert "not all fields are valid POJO fields" in f.details["why_not_a_pojo"]
        assert f.details["pipeline.generic-types"].startswith("false")
        code, flag = f.patches
        assert code.target == "code" and "public Order() {}" in code.snippet
        assert (flag.key, flag.current, flag.proposed) == ("pipeline.generic-types", "false", "true")
        assert not any(x.runbook in ("user-code-exception", "unrecognised-failure") for x in d.findings), name


def test_java17_without_add_opens_in_the_client(spark):
    d, f = _primary(spark, "missing-add-opens-client-2.3")
    assert (f.runbook, f.root_cause.slug) == (SLUG, "missing-add-opens")
    assert f.details["package"] == "java.util" and f.details["java"] == 17
    [patch] = f.patches
    assert patch.key == "env.java.opts.all" and "--add-opens=java.base/java.util=ALL-UNNAMED" in patch.proposed


def test_kryo_on_java17_in_the_taskmanager_without_add_opens(spark):
    d, f = _primary(spark, "kryo-missing-add-opens-1.20")
    assert (f.runbook, f.root_cause.slug) == (SLUG, "missing-add-opens")
    assert f.details["failing_process_opens_it"] is False  # the TaskManager's logged JVM options lack the list
    assert any("JVM Options" in e.text or "JVM options" in e.note for e in f.evidence)
    assert f.patches[0].key == "env.java.opts.all"


def test_a_function_with_a_non_serializable_field(spark):
    d, f = _primary(spark, "non-serializable-field-1.20")
    assert (f.runbook, f.root_cause.slug) == (SLUG, "non-serializable-closure")
    assert f.details["field_class"] == "com.acme.orders.OrdersJob$PricingClient"
    assert "private transient PricingClient client" in f.patches[0].snippet


def test_kryo_failure_of_a_type_flink_logged_as_generic_is_not_a_pojo():
    text = "\n".join([
        "2024-05-02 10:00:00,000 INFO  org.apache.flink.api.java.typeutils.TypeExtractor [] - Class class com.acme.Event "
        "cannot be used as a POJO type because not all fields are valid POJO fields, and must be processed as GenericType. "
        "Please read the Flink documentation on \"Data Types & Serialization\" for details of the effect on performance "
        "and schema evolution.",
        "2024-05-02 10:05:00,000 WARN  org.apache.flink.runtime.taskmanager.Task [] - window (1/2)#0 (ab_cd_0_0) switched "
        "from RUNNING to FAILED with failure cause:",
        "com.esotericsoftware.kryo.KryoException: Encountered unregistered class ID: 13994",
        "\tat com.esotericsoftware.kryo.util.DefaultClassResolver.readClass(DefaultClassResolver.java:119)"])
    [f] = get_detector(SLUG).detect(incident_from_text(text, version="1.18.1"))
    assert f.root_cause.slug == "not-a-pojo" and f.details["generic_types"] == ["com.acme.Event"]
    assert "public Event() {}" in f.patches[0].snippet


def test_kryo_failure_without_the_generic_type_note_is_undetermined_and_says_what_to_collect():
    text = ("com.esotericsoftware.kryo.KryoException: java.lang.IndexOutOfBoundsException: Index 110 out of bounds for length 4\n"
            "Serialization trace:\nitems (com.acme.Basket)\n")
    d = run_detectors(incident_from_text(text))
    assert d.primary.runbook == SLUG and d.primary.root_cause.slug == "undetermined"
    assert "TypeExtractor" in d.primary.summary and d.primary.confidence <= 0.5


def test_avro_null_in_a_non_nullable_field():
    text = ("java.lang.NullPointerException: null of string in field email of com.acme.Customer\n"
            "\tat org.apache.avro.generic.GenericDatumWriter.npe(GenericDatumWriter.java:184)\n")
    d = run_detectors(incident_from_text(text))
    assert (d.primary.runbook, d.primary.root_cause.slug) == (SLUG, "avro-null-field")
    assert '"name": "email", "type": ["null", "string"]' in d.primary.patches[0].snippet


def test_healthy_and_kryo_with_the_generic_type_note_give_nothing(spark):
    for name in ("healthy-1.20", "near-miss-kryo-working-1.20"):
        d = run_detectors(ingest([str(example(SLUG, name))], spark))
        assert d.findings == [], (name, [(f.runbook, f.root_cause.slug) for f in d.findings])


def test_every_example_gives_its_expected_verdict(spark):
    folders = sorted(p.parent for p in (DATA / SLUG).glob("*/expected.json"))
    assert len(folders) >= 6
    for path in folders:
        expected = json.loads((path / "expected.json").read_text())
        d = run_detectors(ingest([str(path)], spark))
        got = (d.primary.runbook, d.primary.root_cause.slug) if d.primary else (None, None)
        assert got == (expected["primary"], expected["root_cause"] if expected["primary"] else None), path.name


def test_java17_without_add_exports_stops_the_jobmanager_of_an_old_release(spark):
    d, f = _primary(spark, "missing-add-exports-jobmanager-1.17")
    assert (f.runbook, f.root_cause.slug) == (SLUG, "missing-add-opens")
    assert f.details["package"] == "sun.net.util" and f.details["failing_process_opens_it"] is False
    assert "JobManager failed" in f.summary
    java, opts = f.patches  # 1.17 does not support Java 17: Java 11 or an upgrade first, the list as a workaround
    assert java.target == "ops" and "--add-exports=java.base/sun.net.util=ALL-UNNAMED" in opts.proposed


def _with_jvm_options(tmp_path, name, config_lines, logged=()):
    """The genuine incident ``name`` with JVM options of the user's own in its configuration (and, for the failing
    TaskManager, in its logged JVM options, as the start script passes them)."""
    import shutil

    folder = tmp_path / name
    shutil.copytree(example(SLUG, name), folder)
    conf = next(p for p in folder.iterdir() if p.name in ("flink-conf.yaml", "config.yaml"))
    conf.write_text(conf.read_text() + "".join(line + "\n" for line in config_lines))
    if logged:
        tm = folder / "log" / "flink-flink-taskexecutor-0-vm.log"
        head, sep, tail = tm.read_text().partition("[] -  JVM Options:\n")
        prefix = "2026-11-24 22:10:12,191 INFO  org.apache.flink.runtime.taskexecutor.TaskManagerRunner      [] -     "
        tm.write_text(head + sep + "".join(prefix + opt + "\n" for opt in logged) + tail)
    return folder


def test_add_opens_are_appended_to_the_options_every_process_already_has(spark, tmp_path):
    from flink_runbooks.render.patches import render_config_diff

    own = "-XX:+UseG1GC -Dacme.env=prod"
    folder = _with_jvm_options(tmp_path, "kryo-missing-add-opens-1.20", [f"env.java.opts.all: {own}"],
                               logged=own.split())
    inc = ingest([str(folder)], spark)
    f = run_detectors(inc).primary
    assert (f.runbook, f.root_cause.slug) == (SLUG, "missing-add-opens")
    [patch] = f.patches
    assert patch.key == "env.java.opts.all" and patch.current == own
    assert patch.proposed.startswith(own + " --add-exports=java.base/sun.net.util=ALL-UNNAMED")
    assert "--add-opens=java.base/java.util=ALL-UNNAMED" in patch.proposed
    assert "which stay" in patch.reason
    diff = render_config_diff(f.patches, inc.config, inc.version_tuple)
    assert f"-env.java.opts.all: {own}" in diff and f"+env.java.opts.all: {own} --add-exports" in diff


def test_add_opens_go_to_the_failing_process_own_options_when_only_those_are_set(spark, tmp_path):
    folder = _with_jvm_options(tmp_path, "kryo-missing-add-opens-1.20",
                               ["env.java.opts.taskmanager: -XX:+HeapDumpOnOutOfMemoryError"],
                               logged=["-XX:+HeapDumpOnOutOfMemoryError"])
    f = run_detectors(ingest([str(folder)], spark)).primary
    [patch] = f.patches
    assert patch.key == "env.java.opts.taskmanager" and patch.current == "-XX:+HeapDumpOnOutOfMemoryError"
    assert patch.proposed.startswith("-XX:+HeapDumpOnOutOfMemoryError --add-exports=")
    assert "TaskManager JVMs" in patch.reason


def test_before_flink_1_18_java17_is_unsupported_and_add_opens_only_a_workaround(spark, tmp_path):
    folder = _with_jvm_options(tmp_path, "missing-add-exports-jobmanager-1.17", ["env.java.opts: -Dacme.env=prod"])
    f = run_detectors(ingest([str(folder)], spark)).primary
    assert (f.runbook, f.root_cause.slug) == (SLUG, "missing-add-opens")
    # the release's support comes first: Java 11 or an upgrade; the list is the unsupported workaround after it
    assert f.summary.index("does not support Java 17") < f.summary.index("refused access")
    assert "run the cluster on Java 11, or upgrade to Flink 1.18" in f.summary
    java, opts = f.patches
    assert java.target == "ops" and "Java 11" in java.reason and "1.18" in java.reason
    # 1.17 reads env.java.opts.all (env.java.opts is its deprecated spelling); the user's option stays
    assert opts.key == "env.java.opts.all" and opts.proposed.startswith("-Dacme.env=prod --add-exports=")
    assert opts.reason.startswith("An unsupported workaround on Flink 1.17.2")


def test_a_release_before_1_17_gets_the_list_appended_to_env_java_opts():
    text = ("2023-03-02 10:00:00,000 WARN  org.apache.flink.runtime.taskmanager.Task [] - map (1/1)#0 (ab_cd_0_0) "
            "switched from RUNNING to FAILED with failure cause:\n"
            "java.lang.reflect.InaccessibleObjectException: Unable to make field private final java.lang.Object[] "
            "java.util.Arrays$ArrayList.a accessible: module java.base does not \"opens java.util\" to unnamed "
            "module @69eee410\n")
    [f] = get_detector(SLUG).detect(incident_from_text(text, {"env.java.opts": "-Dacme.env=prod"}, "1.16.3"))
    assert f.root_cause.slug == "missing-add-opens" and "Flink 1.16.3 does not support Java" in f.summary
    java, opts = f.patches
    assert java.key == "run on Java 11 or upgrade to Flink 1.18+"
    assert opts.key == "env.java.opts" and opts.proposed.startswith("-Dacme.env=prod --add-exports=")
