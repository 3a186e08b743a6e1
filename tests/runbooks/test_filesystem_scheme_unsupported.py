"""Detector filesystem-scheme-unsupported: a plugin not installed, a plugin jar in lib/, a misspelled scheme, Hadoop
missing (for Flink or for the job's own Hadoop calls) and Hadoop without the store's connector, told apart from the
exception, the scheme and what the process logged at start-up."""
from __future__ import annotations

from corpus import example, incident_from_text
from corpus import line
from flink_runbooks.diagnose import ingest
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.render.patches import render_config_diff

SLUG = "filesystem-scheme-unsupported"
JOB = "29529cb576d5afdefaec38da85d003f8"
EP = "org.apache.flink.runtime.entrypoint.ClusterEntrypoint"
S3 = ("org.apache.flink.core.fs.UnsupportedFileSystemSchemeException: Could not find a file system implementation for "
      "scheme 's3'. The scheme is directly supported by Flink through the following plugin(s): flink-s3-fs-hadoop, "
      "flink-s3-fs-presto. Please ensure that each plugin resides within its own subfolder within the plugins directory. "
      "See https://nightlies.apache.org/flink/flink-docs-stable/docs/deployment/filesystems/plugins/ for more information. "
      "If you want to use a Hadoop file system for that scheme, please add the scheme to the configuration "
      "fs.allowed-fallback-filesystems. For a full list of supported file systems, please see "
      "https://nightlies.apache.org/flink/flink-docs-stable/ops/filesystems/.")


def _jm(cause: str, *more: str, lib: str = "", hadoop: str = " No Hadoop Dependency available") -> str:
    cp = ("/opt/flink/lib/flink-csv-1.18.1.jar:" + (f"/opt/flink/lib/{lib}:" if lib else "") +
          "/opt/flink/lib/flink-dist-1.18.1.jar")
    return "\n".join([
        line("10:00:00,000", "Starting StandaloneSessionClusterEntrypoint (Version: 1.18.1, Scala: 2.12, Rev:a, Date:2024-01-01T00:00:00+01:00)", logger=EP),
        line("10:00:00,010", hadoop, logger=EP),
        line("10:00:00,020", f" Classpath: {cp}", logger=EP),
        line("10:00:00,100", "Plugin loader with ID not found, creating it: metrics-prometheus",
             logger="org.apache.flink.core.plugin.DefaultPluginManager"),
        line("10:00:05,000", f"Job {JOB} reached terminal state FAILED.", logger="org.apache.flink.runtime.dispatcher.StandaloneDispatcher"),
        "org.apache.flink.runtime.client.JobInitializationException: Could not start the JobMaster.",
        "Caused by: org.apache.flink.util.FlinkRuntimeException: Failed to create checkpoint storage at checkpoint coordinator side.",
        f"Caused by: {cause}", *[f"Caused by: {m}" for m in more],
        "\tat org.apache.flink.core.fs.FileSystem.getUnguardedFileSystem(FileSystem.java:515) ~[flink-dist-1.18.1.jar:1.18.1]"])


def test_genuine_s3_checkpoints_without_the_plugin_on_flink_2(spark):
    inc = ingest([str(example(SLUG, "plugin-not-installed-2.3"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "plugin-not-installed")
    assert primary.evidence[0].file.endswith("standalonesession-0-vm.log")  # the JobManager, not the CLI's copy
    assert primary.details["scheme"] == "s3" and "metrics-prometheus" in primary.details["plugin folders loaded"]
    assert primary.details["path configured in"] == "execution.checkpointing.dir"
    assert any("Plugin loader with ID" in e.text for e in primary.evidence)
    [install] = primary.patches
    assert "ENABLE_BUILT_IN_PLUGINS=flink-s3-fs-hadoop-2.3.0.jar" in install.snippet
    assert "plugins/s3-fs-hadoop" in install.snippet


def test_genuine_gcs_sink_names_the_gs_scheme(spark):
    inc = ingest([str(example(SLUG, "wrong-scheme-1.17"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "wrong-scheme")
    assert "'gs'" in primary.summary and primary.details["scheme"] == "gcs"
    [fix] = primary.patches
    assert fix.target == "code" and "gs://" in fix.snippet  # the path is in the job's code, not the configuration


def test_a_misspelled_configured_checkpoint_path_is_corrected_in_the_configuration():
    cause = ("org.apache.flink.core.fs.UnsupportedFileSystemSchemeException: Could not find a file system implementation "
             "for scheme 's3n'. The scheme is not directly supported by Flink and no Hadoop file system to support this "
             "scheme could be loaded. For a full list of supported file systems, please see https://nightlies.apache.org/flink/flink-docs-stable/ops/filesystems/.")
    inc = incident_from_text(_jm(cause, "org.apache.flink.core.fs.UnsupportedFileSystemSchemeException: Hadoop is not in the classpath/dependencies."),
                             {"state.checkpoints.dir": "s3n://bucket/ckpt"}, "1.18.1")
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "wrong-scheme"
    [fix] = f.patches
    assert (fix.key, fix.current, fix.proposed) == ("state.checkpoints.dir", "s3n://bucket/ckpt", "s3a://bucket/ckpt")
    assert "state.checkpoints.dir: s3a://bucket/ckpt" in render_config_diff(f.patches, None, "1.18.1")


def test_the_plugin_jar_in_lib_is_told_from_the_classpath_line():
    [f] = get_detector(SLUG).detect(incident_from_text(_jm(S3, lib="flink-s3-fs-hadoop-1.18.1.jar"), {}, "1.18.1"))
    assert f.root_cause.slug == "plugin-jar-in-lib"
    [move] = f.patches
    assert "mv /opt/flink/lib/flink-s3-fs-hadoop-1.18.1.jar $FLINK_HOME/plugins/s3-fs-hadoop/" in move.snippet
    [g] = get_detector(SLUG).detect(incident_from_text(_jm(S3), {}, "1.18.1"))
    assert g.root_cause.slug == "plugin-not-installed"


def test_hdfs_without_hadoop_asks_for_hadoop_classpath():
    cause = ("org.apache.flink.core.fs.UnsupportedFileSystemSchemeException: Could not find a file system implementation "
             "for scheme 'hdfs'. The scheme is not directly supported by Flink and no Hadoop file system to support this "
             "scheme could be loaded. For a full list of supported file systems, please see https://nightlies.apache.org/flink/flink-docs-stable/ops/filesystems/.")
    [f] = get_detector(SLUG).detect(incident_from_text(_jm(cause, "org.apache.flink.core.fs.UnsupportedFileSystemSchemeException: Hadoop is not in the classpath/dependencies."), {}, "1.18.1"))
    assert f.root_cause.slug == "hadoop-not-on-classpath"
    assert "HADOOP_CLASSPATH" in f.patches[0].snippet


def test_hadoop_present_without_the_store_connector():
    cause = ("org.apache.flink.core.fs.UnsupportedFileSystemSchemeException: Could not find a file system implementation for "
             "scheme 'cosn'. The scheme is not directly supported by Flink and no Hadoop file system to support this scheme could be loaded.")
    more = ("org.apache.flink.core.fs.UnsupportedFileSystemSchemeException: Hadoop File System abstraction does not support "
            "scheme 'cosn'. Either no file system implementation exists for that scheme, or the relevant classes are missing from the classpath.",
            'org.apache.hadoop.fs.UnsupportedFileSystemException: No FileSystem for scheme "cosn"')
    [f] = get_detector(SLUG).detect(incident_from_text(_jm(cause, *more, hadoop=" Hadoop version: 3.3.6"), {}, "1.18.1"))
    assert f.root_cause.slug == "hadoop-connector-missing" and f.details["Hadoop on the classpath"] == "yes"


def test_the_jobs_own_hadoop_calls_without_hadoop():
    text = "\n".join([
        line("10:00:05,000", "Map (1/1) (a_b_0_0) switched from RUNNING to FAILED on localhost:1 @ localhost (dataPort=2).", level="WARN"),
        "java.lang.NoClassDefFoundError: org/apache/hadoop/conf/Configuration",
        "\tat com.acme.archive.ArchiveJob$ArchiveIndex.map(ArchiveJob.java:58) ~[?:?]",
        "Caused by: java.lang.ClassNotFoundException: org.apache.hadoop.conf.Configuration"])
    [f] = get_detector(SLUG).detect(incident_from_text(text, {}, "1.20.3"))
    assert f.root_cause.slug == "job-uses-hadoop-without-jars"
    assert {p.key for p in f.patches} == {"put Hadoop on the classpath", "use Flink's FileSystem API or package the Hadoop client"}
    assert get_detector("classloading-conflict").detect(incident_from_text(text, {}, "1.20.3")) == []


def test_start_up_lines_about_hadoop_alone_are_not_a_failure():
    text = "\n".join([
        line("10:00:00,000", "Hadoop is not in the classpath/dependencies. The extended set of supported File Systems via Hadoop is not available.",
             logger="org.apache.flink.core.fs.FileSystem"),
        line("10:00:00,100", 'Hadoop FS is not available (not packaged with this application): NoClassDefFoundError : "org/apache/hadoop/conf/Configuration".',
             logger="org.apache.flink.runtime.security.token.hadoop.HadoopFSDelegationTokenProvider")])
    assert get_detector(SLUG).detect(incident_from_text(text, {}, "1.20.3")) == []


def test_an_excerpt_gives_the_runbook_at_lower_confidence():
    [f] = get_detector(SLUG).detect(incident_from_text(S3))
    assert f.root_cause.slug == "plugin-not-installed" and f.confidence < 0.9 and "excerpt" in f.summary


def test_genuine_job_hadoop_calls_without_hadoop(spark):
    inc = ingest([str(example(SLUG, "job-uses-hadoop-without-jars-1.20"))], spark)
    primary = run_detectors(inc).primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "job-uses-hadoop-without-jars")
    assert primary.details["Hadoop on the classpath"] == "no"
    assert any("No Hadoop Dependency available" in e.text for e in primary.evidence)
    assert not any(f.runbook == "classloading-conflict" for f in run_detectors(inc).findings)


def test_genuine_hadoop_without_hadoop_aws(spark):
    inc = ingest([str(example(SLUG, "hadoop-connector-missing-2.3"))], spark)
    diagnosis = run_detectors(inc)
    primary = diagnosis.primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "hadoop-connector-missing")
    assert primary.details["scheme"] == "s3a" and primary.details["Hadoop on the classpath"] == "yes"
    assert "S3AFileSystem not found" in primary.evidence[0].text
    assert {p.key for p in primary.patches} >= {"add the Hadoop connector for the scheme", "install the file system plugin"}
    exhausted = next(f for f in diagnosis.findings if f.runbook == "restart-strategy-exhausted")
    assert exhausted.details["recurring_fault_runbook"] == SLUG


def test_genuine_unreachable_hdfs_is_not_a_missing_scheme(spark):
    inc = ingest([str(example(SLUG, "near-miss-hdfs-unreachable-1.17"))], spark)
    diagnosis = run_detectors(inc)
    assert not any(f.runbook == SLUG for f in diagnosis.findings)
    assert (diagnosis.primary.runbook, diagnosis.primary.root_cause.slug) == ("unrecognised-failure", "thrown-by-environment")


def test_genuine_healthy_local_checkpoints_give_nothing(spark):
    inc = ingest([str(example(SLUG, "healthy-1.20"))], spark)
    assert any("Hadoop is not in the classpath" in ev.text for ev in inc.events)
    assert run_detectors(inc).findings == []


OLD_S3 = ("org.apache.flink.core.fs.UnsupportedFileSystemSchemeException: Could not find a file system implementation "
          "for scheme 's3'. The scheme is not directly supported by Flink and no Hadoop file system to support this "
          "scheme could be loaded.\nCaused by: org.apache.flink.core.fs.UnsupportedFileSystemSchemeException: Hadoop is "
          "not in the classpath/dependencies.")


def test_a_release_before_plugins_is_told_to_put_the_jar_into_lib():
    """Flink 1.8 has no plugins/ folder: the S3 jar goes from opt/ into lib/."""
    incident = ingest([str(example(SLUG, "s3-jar-not-in-lib-1.8"))])
    [f] = get_detector(SLUG).detect(incident)
    assert f.root_cause.slug == "filesystem-jar-not-in-lib"
    [copy] = f.patches
    assert copy.snippet == "cp $FLINK_HOME/opt/flink-s3-fs-hadoop-1.8.3.jar $FLINK_HOME/lib/"
    assert "plugins/" not in copy.snippet and "ENABLE_BUILT_IN_PLUGINS" not in f.summary


def test_the_same_jar_in_lib_before_plugins_is_not_moved_to_plugins():
    [f] = get_detector(SLUG).detect(incident_from_text(OLD_S3, {}, "1.8.3"))
    assert f.root_cause.slug == "filesystem-jar-not-in-lib"
    [g] = get_detector(SLUG).detect(incident_from_text(_jm(OLD_S3, lib="flink-s3-fs-hadoop-1.8.3.jar"), {}, "1.8.3"))
    assert g.root_cause.slug == "undetermined" and not any("plugins/" in (p.snippet or "") for p in g.patches)


def test_an_old_wording_without_a_release_names_both_places():
    [f] = get_detector(SLUG).detect(incident_from_text(OLD_S3))
    assert f.root_cause.slug == "plugin-not-installed"
    assert "before 1.9 there are no plugins and the jar goes into lib/" in f.summary
