"""Detector classloading-conflict: a duplicate, a missing dependency, a version clash, a foreign Flink build and a leak
are told apart from the exception's own words and the classpath Flink logged."""
from __future__ import annotations

from corpus import example, incident_from_text
from corpus import line
from flink_runbooks.diagnose import ingest
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.render.patches import render_config_diff

SLUG = "classloading-conflict"
JOB = "d6b596ee9c80fe2128d619997c4a4466"
TASK = "Map (1/1) (379e_857e_0_0) switched from RUNNING to FAILED on localhost:35839-571af0 @ localhost (dataPort=33865)."
CLASSPATH = ("Classpath: /opt/flink/lib/flink-cep-1.20.3.jar:/opt/flink/lib/flink-csv-1.20.3.jar:"
             "/opt/flink/lib/guava-16.0.1.jar:/opt/flink/lib/flink-dist-1.20.3.jar:/opt/flink/lib/log4j-api-2.24.3.jar")


def _failed(fault: str, *caused_by: str, frame: str = "\tat com.acme.pipeline.EnrichJob$Format.map(EnrichJob.java:74) ~[?:?]") -> str:
    lines = [line("10:00:00,000", "Starting StandaloneSessionClusterEntrypoint (Version: 1.20.3, Scala: 2.12, Rev:abc, Date:2025-01-01T00:00:00+01:00)",
                  logger="org.apache.flink.runtime.entrypoint.ClusterEntrypoint"),
             line("10:00:00,100", " " + CLASSPATH, logger="org.apache.flink.runtime.entrypoint.ClusterEntrypoint"),
             line("10:00:05,000", f"Job order-enrichment ({JOB}) switched from state CREATED to RUNNING."),
             line("10:00:06,000", TASK, level="WARN"), fault, frame]
    lines += [f"Caused by: {c}" for c in caused_by]
    lines += [line("10:00:06,010", f"Job order-enrichment ({JOB}) switched from state RUNNING to FAILING."),
              "org.apache.flink.runtime.JobException: Recovery is suppressed by NoRestartBackoffTimeStrategy",
              f"Caused by: {fault}", frame,
              line("10:00:06,020", f"Job order-enrichment ({JOB}) switched from state FAILING to FAILED.")]
    return "\n".join(lines)


def _detect(text: str, config: dict | None = None, version: str = "1.20.3"):
    return get_detector(SLUG).detect(incident_from_text(text, config or {}, version))


def test_genuine_duplicate_class_names_both_loaders_and_the_jar_added_to_lib(spark):
    inc = ingest([str(example(SLUG, "duplicate-class-lib-and-job-jar-1.20"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "duplicate-class-lib-and-job-jar")
    assert primary.details["loaders"][0] == "'app'" and "ChildFirstClassLoader" in primary.details["loaders"][1]
    assert primary.details["jars added to lib/"] == ["acme-common-1.0.jar"]
    assert "cannot be cast to class com.acme.common.Event" in primary.evidence[0].text
    assert any("Classpath:" in e.text for e in primary.evidence)
    pattern = next(p for p in primary.patches if p.key == "classloader.parent-first-patterns.additional")
    assert pattern.proposed == "com.acme.common."
    assert "classloader.parent-first-patterns.additional: com.acme.common." in render_config_diff(primary.patches, None, "1.20.3")
    assert any(p.target == "code" and "<relocation>" in p.snippet for p in primary.patches)


def test_genuine_missing_dependency_on_flink_2(spark):
    inc = ingest([str(example(SLUG, "dependency-missing-2.3"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "dependency-missing-from-job-jar")
    assert primary.details["class"] == "com.acme.geo.GeoIndex"
    assert primary.details["job frames"][0].startswith("com.acme.pipeline.EnrichJob$Locate.map")
    assert "NoClassDefFoundError: com/acme/geo/GeoIndex" in primary.evidence[0].text
    assert any(p.key == "package the dependency in the job jar" for p in primary.patches)
    assert not any(p.target == "flink" for p in primary.patches)  # no setting brings a jar that is not there


def test_guava_method_missing_under_parent_first_proposes_child_first_and_names_the_jar():
    fault = ("java.lang.NoSuchMethodError: 'java.lang.String com.google.common.base.Strings.lenientFormat("
             "java.lang.String, java.lang.Object[])'")
    [f] = _detect(_failed(fault), {"classloader.resolve-order": "parent-first"})
    assert f.root_cause.slug == "library-version-clash"
    assert f.details["library"] == "Guava" and f.details["jars that carry it"] == ["guava-16.0.1.jar"]
    order = next(p for p in f.patches if p.key == "classloader.resolve-order")
    assert (order.current, order.proposed) == ("parent-first", "child-first")
    assert "parent-first" in f.summary and "lenientFormat" in f.summary


def test_version_clash_under_child_first_proposes_no_resolve_order_change():
    fault = "java.lang.NoSuchMethodError: com.fasterxml.jackson.databind.ObjectMapper.readerFor(Ljava/lang/Class;)Lcom/fasterxml/jackson/databind/ObjectReader;"
    [f] = _detect(_failed(fault))
    assert f.root_cause.slug == "library-version-clash" and f.details["library"] == "Jackson"
    assert not any(p.key == "classloader.resolve-order" for p in f.patches)
    assert any(p.key == "relocate the library in the job jar" for p in f.patches)


def test_a_missing_flink_class_means_a_build_for_another_flink_version():
    fault = "java.lang.NoClassDefFoundError: org/apache/flink/streaming/api/functions/sink/SinkFunction"
    [f] = _detect(_failed(fault, "java.lang.ClassNotFoundException: org.apache.flink.streaming.api.functions.sink.SinkFunction"),
                  version="2.0.0")
    assert f.root_cause.slug == "flink-class-missing"
    assert "2.0.0" in f.summary


def test_java8_cast_wording_is_read_too():
    [f] = _detect(_failed("java.lang.ClassCastException: com.acme.common.Event cannot be cast to com.acme.common.Event"))
    assert f.root_cause.slug == "duplicate-class-lib-and-job-jar" and f.details["class"] == "com.acme.common.Event"


def test_a_cast_between_two_job_loaders_is_a_leak_not_a_duplicate():
    fault = ("java.lang.ClassCastException: class com.acme.Order cannot be cast to class com.acme.Order (com.acme.Order is in "
             "unnamed module of loader org.apache.flink.util.ChildFirstClassLoader @1a2b3c; com.acme.Order is in unnamed module "
             "of loader org.apache.flink.util.ChildFirstClassLoader @4d5e6f)")
    [f] = _detect(_failed(fault))
    assert f.root_cause.slug == "classloader-leak"


def test_an_ordinary_cast_and_a_failed_static_initializer_are_not_this_runbook():
    other = "java.lang.ClassCastException: class java.lang.Long cannot be cast to class java.lang.String (java.lang.Long and java.lang.String are in module java.base of loader 'bootstrap')"
    assert _detect(_failed(other)) == []
    init = "java.lang.NoClassDefFoundError: Could not initialize class com.acme.geo.GeoIndex"
    assert _detect(_failed(init)) == []


def test_hadoop_classes_are_left_to_the_file_system_runbook():
    fault = "java.lang.NoClassDefFoundError: org/apache/hadoop/conf/Configuration"
    assert _detect(_failed(fault, "java.lang.ClassNotFoundException: org.apache.hadoop.conf.Configuration")) == []


def test_closed_classloader_warning_is_a_leak_warning_and_the_check_is_only_a_diagnostic():
    leak = "\n".join([
        line("10:00:05,000", f"Job order-enrichment ({JOB}) switched from state CREATED to RUNNING."),
        line("10:00:20,000", f"Job order-enrichment ({JOB}) switched from state RUNNING to CANCELED."),
        line("10:00:23,000", "Cache refresh failed", level="WARN", logger="com.acme.pipeline.EnrichJob"),
        "java.lang.IllegalStateException: Trying to access closed classloader. Please check if you store classloaders "
        "directly or indirectly in static fields. If the stacktrace suggests that the leak occurs in a third party library "
        "and cannot be fixed immediately, you can disable this check with the configuration 'classloader.check-leaked-classloader'.",
        "\tat org.apache.flink.util.FlinkUserCodeClassLoaders$SafetyNetWrapperClassLoader.ensureInner(FlinkUserCodeClassLoaders.java:184) ~[flink-dist-1.20.3.jar:1.20.3]",
        "\tat com.acme.pipeline.EnrichJob$CachedLookup.lambda$map$0(EnrichJob.java:91) ~[?:?]"])
    [f] = _detect(leak)
    assert f.root_cause.slug == "classloader-leak" and f.severity == "warning"
    assert not any(p.key == "classloader.check-leaked-classloader" for p in f.patches)  # on by default: nothing to propose
    [g] = _detect(leak, {"classloader.check-leaked-classloader": "false"})
    check = next(p for p in g.patches if p.key == "classloader.check-leaked-classloader")
    assert check.proposed == "true" and "Diagnostic only" in check.reason
    # the same warning before a Metaspace OOM is the oom-metaspace runbook's verdict, not this one's
    oom = leak + "\n" + "\n".join([
        line("10:05:00,000", "Fatal error occurred in TaskExecutor akka://flink/user/rpc/taskmanager_0.", level="ERROR",
             logger="org.apache.flink.runtime.taskexecutor.TaskManagerRunner"),
        "java.lang.OutOfMemoryError: Metaspace. The metaspace out-of-memory error has occurred. "])
    assert _detect(oom) == []


def test_an_excerpt_gives_the_runbook_at_lower_confidence():
    text = ("java.lang.NoClassDefFoundError: com/acme/geo/GeoIndex\n"
            "\tat com.acme.pipeline.EnrichJob$Locate.map(EnrichJob.java:67)\n"
            "Caused by: java.lang.ClassNotFoundException: com.acme.geo.GeoIndex\n"
            "\tat java.net.URLClassLoader.findClass(URLClassLoader.java:445)")
    [f] = get_detector(SLUG).detect(incident_from_text(text))
    assert f.root_cause.slug == "dependency-missing-from-job-jar" and f.confidence < 0.9
    assert "excerpt" in f.summary


def test_genuine_sql_client_without_its_gateway_jar_is_a_missing_flink_module(spark):
    inc = ingest([str(example(SLUG, "flink-module-missing-sql-client-1.20"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "flink-class-missing")
    assert primary.evidence[0].file.endswith("sql-client-vm.log")
    assert "a Flink module this tool needs is not installed" in primary.summary
    assert [p.key for p in primary.patches] == ["install the missing Flink module"]


def test_genuine_healthy_job_gives_nothing_despite_flinks_own_hadoop_probe(spark):
    path = example(SLUG, "healthy-2.3")
    assert "NoClassDefFoundError" in (path / "log" / "flink-flink-standalonesession-0-vm.log").read_text()
    inc = ingest([str(path)], spark)
    assert run_detectors(inc).findings == []


def test_genuine_guava_clash_under_parent_first(spark):
    inc = ingest([str(example(SLUG, "version-clash-guava-1.17"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "library-version-clash")
    assert primary.details["jars that carry it"] == ["guava-16.0.1.jar"]
    order = next(p for p in primary.patches if p.key == "classloader.resolve-order")
    assert (order.current, order.proposed) == ("parent-first", "child-first")
    assert "classloader.resolve-order: child-first" in render_config_diff(primary.patches, None, "1.17.2")


def test_genuine_leaked_threads_after_three_submissions(spark):
    inc = ingest([str(example(SLUG, "classloader-leak-1.20"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug, primary.severity) == (SLUG, "classloader-leak", "warning")
    assert primary.details["job submissions in the logs"] == 3 and primary.details["closed-loader errors"] == 18
    assert "EnrichJob$CachedLookup" in primary.details["job frames"][0]
    assert not any(p.key == "classloader.check-leaked-classloader" for p in primary.patches)


_CLOSED = ("java.lang.IllegalStateException: Trying to access closed classloader. Please check if you store "
           "classloaders directly or indirectly in static fields. If the stacktrace suggests that the leak occurs in "
           "a third party library and cannot be fixed immediately, you can disable this check with the configuration "
           "'classloader.check-leaked-classloader'.")
_SAFETY_NET = ("\tat org.apache.flink.util.FlinkUserCodeClassLoaders$SafetyNetWrapperClassLoader.ensureInner"
               "(FlinkUserCodeClassLoaders.java:184) ~[flink-dist-1.20.3.jar:1.20.3]")


def test_a_closed_loader_after_the_job_finished_is_a_warning_that_says_the_job_finished():
    d = run_detectors(ingest([str(example(SLUG, "closed-loader-after-job-finished-1.20"))]))
    f = d.primary
    assert (f.runbook, f.root_cause.slug, f.severity) == (SLUG, "classloader-leak", "warning")
    assert "finished successfully before it" in f.summary and "not a failure of the job" in f.summary
    assert "whether the job failed are unknown" not in f.summary
    assert any("has finished." in e.text for e in f.evidence)
    assert not [other for other in d.findings if other.severity == "failure"]


def test_an_error_logged_after_the_job_finished_is_a_warning_but_one_that_fails_a_running_task_stays_a_failure():
    after = "\n".join([
        line("10:00:05,000", f"Job daily-invoices ({JOB}) switched from state CREATED to RUNNING."),
        line("10:00:50,000", f"Job daily-invoices ({JOB}) switched from state RUNNING to FINISHED."),
        line("10:00:51,000", "Uncaught error in the metrics flusher", level="ERROR",
             logger="com.acme.billing.metrics.PushGatewayReporter"),
        _CLOSED, _SAFETY_NET])
    [f] = _detect(after)
    assert f.severity == "warning" and "finished successfully before it" in f.summary
    running = "\n".join([
        line("10:00:05,000", f"Job daily-invoices ({JOB}) switched from state CREATED to RUNNING."),
        line("10:00:50,000", TASK), _CLOSED, _SAFETY_NET,
        line("10:00:50,010", f"Job daily-invoices ({JOB}) switched from state RUNNING to RESTARTING.")])
    [g] = _detect(running)
    assert g.severity == "failure" and "finished successfully" not in g.summary
    # an earlier job finished, then a running one failed on the closed loader: still that job's failure
    [h] = _detect(after.split("\n")[0] + "\n" + after.split("\n")[1] + "\n" + running)
    assert h.severity == "failure"
