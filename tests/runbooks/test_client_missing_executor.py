"""Detector client-missing-executor: flink-clients missing from a program started with java, a fat jar whose service
file was overwritten by shading, a target whose module is missing, a target that is no executor; never a verdict
for the same exception inside flink run, nor for the YARN executor that lacks Hadoop."""
from __future__ import annotations

from corpus import example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import ingest, run_detectors

SLUG = "client-missing-executor"
NO_EXECUTOR = "java.lang.IllegalStateException: No ExecutorFactory found to execute the application."


def _trace(*environment_frames: str, main: str = "com.acme.orders.OrderCountJob.main(OrderCountJob.java:19)",
           uncaught: bool = True) -> list[str]:
    return [("Exception in thread \"main\" " if uncaught else "") + NO_EXECUTOR,
            "\tat org.apache.flink.core.execution.DefaultExecutorServiceLoader.getExecutorFactory(DefaultExecutorServiceLoader.java:88)",
            "\tat org.apache.flink.streaming.api.environment.StreamExecutionEnvironment.executeAsync(StreamExecutionEnvironment.java:2469)",
            "\tat org.apache.flink.streaming.api.environment.StreamExecutionEnvironment.execute(StreamExecutionEnvironment.java:2351)",
            *environment_frames, f"\tat {main}"]


def _detect(lines: list[str], config: dict | None = None, version: str | None = "1.20.3"):
    return get_detector(SLUG).detect(incident_from_text("\n".join(lines), config or {}, version, file="console.out"))


def _diagnose(name: str, spark):
    return run_detectors(ingest([str(example(SLUG, name))], spark))


def test_genuine_ide_run_without_flink_clients(spark):
    for name, version in (("no-clients-ide-1.20", "1.20.3"), ("no-clients-ide-2.3", "2.3.0")):
        primary = _diagnose(name, spark).primary
        assert (primary.runbook, primary.root_cause.slug) == (SLUG, "flink-clients-missing"), name
        assert primary.details["execution.target"] == "local"
        assert f"flink-without-clients-{version}.jar" in primary.details["classpath jars"]
        add = next(p for p in primary.patches if p.key == "add flink-clients")
        assert "<artifactId>flink-clients</artifactId>" in add.snippet and f"<version>{version}</version>" in add.snippet
        assert "provided" in add.reason and "run configuration" in add.reason
        assert primary.evidence[0].file.endswith(".out") and "No ExecutorFactory found" in primary.evidence[0].text


def test_genuine_target_whose_module_is_not_on_the_classpath(spark):
    primary = _diagnose("target-yarn-per-job-without-flink-yarn-1.20", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "target-module-missing")
    assert primary.details["execution.target"] == "yarn-per-job"
    assert any("execution.target, yarn-per-job" in e.text for e in primary.evidence)
    module = next(p for p in primary.patches if p.key == "add the executor's module")
    assert "<artifactId>flink-yarn</artifactId>" in module.snippet and "HADOOP_CLASSPATH" in module.snippet
    # flink-clients is there: adding it again fixes nothing
    assert not any(p.key == "add flink-clients" for p in primary.patches)
    k8s = _diagnose("target-kubernetes-session-without-flink-kubernetes-2.3", spark).primary
    assert (k8s.root_cause.slug, k8s.details["execution.target"]) == ("target-module-missing", "kubernetes-session")
    module = next(p for p in k8s.patches if p.key == "add the executor's module")
    assert "<artifactId>flink-kubernetes</artifactId>" in module.snippet and "<version>2.3.0</version>" in module.snippet
    assert "HADOOP_CLASSPATH" not in module.snippet


def test_genuine_fat_jar_whose_service_file_was_overwritten(spark):
    primary = _diagnose("services-file-overwritten-by-shading-2.3", spark).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "services-file-overwritten")
    assert primary.details["jar listing: client executors"] == ["RemoteExecutorFactory", "LocalExecutorFactory"]
    [shade] = primary.patches
    assert "ServicesResourceTransformer" in shade.snippet and "mergeServiceFiles()" in shade.snippet
    assert any(e.file.endswith("job-jar-listing.txt") for e in primary.evidence)


def test_genuine_yarn_executor_without_hadoop_and_a_healthy_run_are_not_this_runbook(spark):
    near = _diagnose("near-miss-yarn-executor-without-hadoop-1.20", spark)
    assert not any(f.runbook == SLUG for f in near.findings)
    assert "HADOOP_CLASSPATH" in near.primary.summary
    assert _diagnose("healthy-ide-run-1.20", spark).findings == []


def test_application_mode_target_is_deployed_by_the_cli_of_its_release():
    for version, command in (("1.20.3", "run-application -t kubernetes-application"),
                             ("2.3.0", "run -t kubernetes-application")):
        [f] = _detect(["$ java -Dexecution.target=kubernetes-application -jar order-count-1.0.jar", *_trace()],
                      version=version)
        assert f.root_cause.slug == "target-not-an-executor"
        assert "application mode is deployed by the flink CLI" in f.summary
        [cli] = f.patches
        assert command in cli.snippet
        assert not any(p.target == "flink" for p in f.patches)  # no session target to invent


def test_a_misspelled_target_gets_the_executor_it_resembles():
    [f] = _detect(_trace(), {"execution.target": "remtoe"})
    assert f.root_cause.slug == "target-not-an-executor" and "'remote' is the closest" in f.summary
    [fix] = f.patches
    assert (fix.target, fix.key, fix.proposed, fix.current) == ("flink", "execution.target", "remote", "remtoe")


def test_per_job_mode_is_gone_in_flink_2():
    [f] = _detect(_trace(), {"execution.target": "yarn-per-job"}, version="2.1.0")
    assert f.root_cause.slug == "target-not-an-executor" and "removed in Flink 2.0" in f.summary
    [old] = _detect(["$ java -cp classes:flink-clients-1.19.1.jar:flink-streaming-java-1.19.1.jar com.acme.Job",
                     *_trace()], {"execution.target": "yarn-per-job"}, version="1.19.1")
    assert old.root_cause.slug == "target-module-missing"


def test_inside_flink_run_it_is_never_a_missing_flink_clients():
    lines = _trace("\tat org.apache.flink.client.program.StreamContextEnvironment.execute(StreamContextEnvironment.java:117)",
                   uncaught=False) + [
        "\tat org.apache.flink.client.program.PackagedProgram.callMainMethod(PackagedProgram.java:356)",
        "\tat org.apache.flink.client.cli.CliFrontend.run(CliFrontend.java:247)"]
    [f] = _detect(lines, {"execution.target": "remote"})
    assert f.root_cause.slug == "undetermined" and "flink run" in f.summary
    assert f.details["started"] == "flink CLI"


def test_the_bare_message_asks_how_the_program_was_started():
    [f] = _detect([NO_EXECUTOR], version=None)
    assert f.root_cause.slug == "undetermined" and f.confidence < 0.5
    assert "jar tf job.jar" in f.summary


def test_a_fat_jar_listing_without_the_client_executors_is_flink_clients_missing():
    listing = ["$ jar tf order-count-1.0.jar | grep org/apache/flink/",
               "org/apache/flink/streaming/api/environment/StreamExecutionEnvironment.class",
               "org/apache/flink/core/execution/PipelineExecutorFactory.class"]
    [f] = _detect(["$ java -jar order-count-1.0.jar", *_trace(
        "\tat org.apache.flink.streaming.api.environment.LocalStreamEnvironment.execute(LocalStreamEnvironment.java:68)"),
        *listing])
    assert f.root_cause.slug == "flink-clients-missing" and f.confidence >= 0.9
    assert "java -jar does not pack it" in f.summary


def test_the_older_wording_of_a_dataset_program_in_flink_1_11():
    lines = ['Exception in thread "main" ' + NO_EXECUTOR,
             "\tat org.apache.flink.core.execution.DefaultExecutorServiceLoader.getExecutorFactory(DefaultExecutorServiceLoader.java:84)",
             "\tat org.apache.flink.api.java.ExecutionEnvironment.executeAsync(ExecutionEnvironment.java:938)",
             "\tat org.apache.flink.api.java.ExecutionEnvironment.execute(ExecutionEnvironment.java:860)",
             "\tat org.apache.flink.api.java.LocalEnvironment.execute(LocalEnvironment.java:84)",
             "\tat com.acme.batch.WordCount.main(WordCount.java:31)"]
    [f] = _detect(lines, version="1.11.4")
    assert f.root_cause.slug == "flink-clients-missing" and f.details["execution.target"] == "local"
    add = next(p for p in f.patches if p.key == "add flink-clients")
    # before 1.15 the module's artifact carries the Scala version
    assert "<artifactId>flink-clients_${scala.binary.version}</artifactId>" in add.snippet
