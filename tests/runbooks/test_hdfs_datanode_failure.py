"""Detector hdfs-datanode-failure: the NameNode's counts and the client's pipeline messages tell the causes apart;
patches are computed from the datanodes seen and the incident's tolerance."""
from __future__ import annotations

from corpus import INCIDENT_REPORTS, example, incident_from_text
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest
from flink_runbooks.render.patches import render_config_diff

SLUG = "hdfs-datanode-failure"
JOB = "0123456789abcdef0123456789abcdef"
# An issue report, verbatim
HDFS_SNAPSHOT_FAILURE = INCIDENT_REPORTS / "hdfs-snapshot-failure-restart.txt"
DS = "org.apache.hadoop.hdfs.DataStreamer                         "
CC = "org.apache.flink.runtime.checkpoint.CheckpointCoordinator   "
POLICY = "flink.hadoop.dfs.client.block.write.replace-datanode-on-failure.policy"
BEST_EFFORT = "flink.hadoop.dfs.client.block.write.replace-datanode-on-failure.best-effort"


def detect(text, config=None, version=None):
    return get_detector(SLUG).detect(incident_from_text(text, config, version))


def dn(i):
    return f"DatanodeInfoWithStorage[10.42.{i}.9:9866,DS-{i}a1c3e5f-0b2d-4f6a-9c7e-1d3f5a7b9c02,DISK]"


def replace_failed(n_nodes, ts="2023-12-04 01:23:07,118"):
    original = ", ".join(dn(i) for i in range(n_nodes))
    return f"""{ts} WARN  {DS} [] - DataStreamer Exception
java.io.IOException: Failed to replace a bad datanode on the existing pipeline due to no more good datanodes being available to try. (Nodes: current=[{dn(0)}], original=[{original}]). The current failed datanode replacement policy is DEFAULT, and a client may configure this via 'dfs.client.block.write.replace-datanode-on-failure.policy' in its configuration.
\tat org.apache.hadoop.hdfs.DataStreamer.findNewDatanode(DataStreamer.java:1352)"""


def no_target(running, excluded, n=12, ts="2022-08-30 09:20:25,222"):
    return f"""{ts} WARN  {DS} [] - DataStreamer Exception
org.apache.hadoop.ipc.RemoteException(java.io.IOException): File /flink/checkpoints/{JOB}/chk-{n}/7e0f could only be written to 0 of the 1 minReplication nodes. There are {running} datanode(s) running and {excluded} node(s) are excluded in this operation.
\tat org.apache.hadoop.hdfs.server.blockmanagement.BlockManager.chooseTarget4NewBlock(BlockManager.java:2121)"""


def threshold(ts="2022-08-30 09:20:26,000"):
    return f"""{ts} INFO  org.apache.flink.runtime.jobmaster.JobMaster                 [] - Trying to recover from a global failure.
org.apache.flink.util.FlinkRuntimeException: Exceeded checkpoint tolerable failure threshold."""


def checkpoints(*outcomes, hdfs=None):
    """Checkpoint lifecycle lines: 'ok' completes, 'hdfs' is declined after the given DataStreamer record."""
    lines = []
    for i, outcome in enumerate(outcomes, start=1):
        lines.append(f"2024-03-01 10:{i:02d}:00,000 INFO  {CC} [] - Triggering checkpoint {i} (type=CHECKPOINT) @ {i} for job {JOB}.")
        if outcome == "ok":
            lines.append(f"2024-03-01 10:{i:02d}:01,000 INFO  {CC} [] - Completed checkpoint {i} for job {JOB} (1000 bytes, checkpointDuration=900 ms, finalizationTime=3 ms).")
        else:
            lines.append(hdfs(i, f"2024-03-01 10:{i:02d}:02,000"))
            lines.append(f"2024-03-01 10:{i:02d}:02,500 INFO  {CC} [] - Decline checkpoint {i} by task abc of job {JOB} at tm-1.\n"
                         f"org.apache.flink.util.SerializedThrowable: org.apache.flink.runtime.checkpoint.CheckpointException: Asynchronous task checkpoint failed.\n"
                         f"Caused by: org.apache.flink.util.SerializedThrowable: java.lang.Exception: Could not materialize checkpoint {i} for operator Map (1/1)#0.")
    return "\n".join(lines)


def test_reported_all_datanodes_bad_in_the_synchronous_phase_fails_the_job_over():
    [finding] = detect(HDFS_SNAPSHOT_FAILURE.read_text())
    assert finding.root_cause.slug == "pipeline-recovery-failure"
    assert finding.severity == "failure" and finding.details["snapshot_phase"] == "sync"
    assert finding.details["where"] == "checkpoint storage"
    assert "synchronous snapshot phase" in finding.summary
    keys = {p.key for p in finding.patches}
    assert "datanode health" in keys
    assert POLICY not in keys, "no replacement failed: the policy is not the problem"
    assert not any("tolerable" in k for k in keys), "tolerating failures does not help the synchronous phase"
    assert any("setFailOnCheckpointingErrors(false)" in (p.snippet or "") for p in finding.patches)


def test_small_cluster_without_a_spare_datanode_gets_the_never_policy():
    text = replace_failed(3) + "\n" + threshold("2023-12-04 01:23:08,000")
    [finding] = detect(text, version="1.17.2")
    assert finding.root_cause.slug == "pipeline-recovery-failure" and finding.severity == "failure"
    assert finding.details["datanodes_seen"] == ["10.42.0.9:9866", "10.42.1.9:9866", "10.42.2.9:9866"]
    assert finding.details["replace_datanode_policy"] == "DEFAULT"
    policy = next(p for p in finding.patches if p.key == POLICY)
    assert (policy.current, policy.proposed) == (None, "NEVER")
    xml = next(p for p in finding.patches if p.key == "hdfs-site.xml of the Flink processes")
    assert "<name>dfs.client.block.write.replace-datanode-on-failure.policy</name>" in xml.snippet


def test_larger_cluster_keeps_replacing_but_does_not_abort_the_write():
    [finding] = detect(replace_failed(6) + "\n" + threshold("2023-12-04 01:23:08,000"), version="1.17.2")
    patch = next(p for p in finding.patches if p.key.startswith("flink.hadoop."))
    assert (patch.key, patch.proposed) == (BEST_EFFORT, "true")


def test_no_datanode_running_is_datanodes_down():
    [finding] = detect(no_target(0, "no") + "\n" + threshold(), version="1.12.7")
    assert finding.root_cause.slug == "datanodes-down"
    assert finding.details["datanodes_running"] == 0
    # a store with no datanode up is broken, not flaky: tolerating failures would only postpone the failover
    assert not [p for p in finding.patches if "olerable" in p.key]


def test_full_datanode_disks_get_no_tolerance_either():
    [finding] = detect(no_target(4, "no") + "\n" + threshold(), version="1.18.1")
    assert finding.root_cause.slug == "datanode-disks-full"
    assert not [p for p in finding.patches if "olerable" in p.key]


def test_running_datanodes_refused_by_the_namenode_are_full():
    [finding] = detect(no_target(4, "no") + "\n" + threshold(), version="1.12.7")
    assert finding.root_cause.slug == "datanode-disks-full"
    assert finding.details["datanodes_excluded"] == "no"
    assert "DFS Remaining" in next(p for p in finding.patches if p.key == "datanode disk space").snippet


def test_explicit_disk_space_error_is_disks_full_with_more_confidence():
    text = no_target(4, 4) + "\nCaused by: org.apache.hadoop.util.DiskChecker$DiskOutOfSpaceException: Out of space: The volume with the most available space (=1048576 B) is less than the block size (=134217728 B).\n" + threshold()
    [finding] = detect(text, version="1.12.7")
    assert finding.root_cause.slug == "datanode-disks-full" and finding.confidence >= 0.9


def test_client_excluded_every_datanode_it_could_not_reach():
    excluded = "\n".join(
        f"2021-03-02 04:0{6 + i}:46,224 INFO  {DS} - Excluding datanode DatanodeInfoWithStorage[10.20.0.1{i}:50010,DS-{i},DISK]"
        for i in (1, 2, 3))
    hadoop2 = (f"2021-03-02 04:09:46,236 WARN  {DS} - DataStreamer Exception\n"
               f"org.apache.hadoop.ipc.RemoteException(java.io.IOException): File /flink/checkpoints/{JOB}/chk-388/3a9c could only be "
               f"replicated to 0 nodes instead of minReplication (=1).  There are 3 datanode(s) running and 3 node(s) are excluded in this operation.")
    [finding] = detect(excluded + "\n" + hadoop2 + "\n" + threshold("2021-03-02 04:09:47,000"), version="1.10.3")
    assert finding.root_cause.slug == "datanodes-unreachable"
    probes = next(p for p in finding.patches if p.key == "network from the Flink hosts to the datanodes").snippet
    assert probes.splitlines() == ["nc -vz 10.20.0.11 50010", "nc -vz 10.20.0.12 50010", "nc -vz 10.20.0.13 50010"]
    assert finding.details["checkpoints_affected"] == [388]


def test_message_without_counts_is_only_datanodes_unavailable():
    text = (f"2019-01-01 10:00:00,000 WARN  {DS} - DataStreamer Exception\n"
            f"org.apache.hadoop.ipc.RemoteException(java.io.IOException): File /flink/x could only be replicated to 0 nodes instead of minReplication (=1).\n"
            + threshold("2019-01-01 10:00:01,000"))
    [finding] = detect(text)
    assert finding.root_cause.slug == "datanodes-unavailable" and finding.confidence < 0.7


def test_tolerance_from_the_observed_streak_in_the_asynchronous_phase():
    def hdfs(i, ts):
        return no_target(3, 3, n=i, ts=ts)

    text = checkpoints("ok", "hdfs", "hdfs", "ok", "hdfs", "ok", hdfs=hdfs)
    [finding] = detect(text, {"execution.checkpointing.tolerable-failed-checkpoints": "3"}, version="1.18.1")
    assert finding.severity == "warning", "the job rode out two bursts of failures"
    assert finding.details["checkpoints_affected"] == [2, 3, 5]
    tol = next(p for p in finding.patches if p.key == "execution.checkpointing.tolerable-failed-checkpoints")
    assert (tol.current, tol.proposed) == ("3", "4")


def test_one_short_hiccup_the_job_rode_out_is_not_a_finding():
    def hdfs(i, ts):
        return no_target(3, 3, n=i, ts=ts)

    text = checkpoints("ok", "hdfs", "hdfs", "ok", "ok", hdfs=hdfs)
    assert detect(text, {"execution.checkpointing.tolerable-failed-checkpoints": "3"}, version="1.19.1") == []


def test_excluded_datanode_with_a_recovered_pipeline_is_not_a_finding():
    text = (f"2022-11-07 10:29:42,158 INFO  {DS} [] - Exception in createBlockOutputStream blk_1073842211_101447\n"
            f"java.io.IOException: Got error, status=ERROR, status message , ack with firstBadLink as 10.0.7.32:9866\n"
            f"2022-11-07 10:29:42,171 INFO  {DS} [] - Excluding datanode DatanodeInfoWithStorage[10.0.7.32:9866,DS-0c3e,DISK]\n"
            + checkpoints("ok", "ok"))
    assert detect(text, version="1.14.6") == []


def test_flink_hadoop_key_lands_in_both_file_generations():
    [finding] = detect(replace_failed(2) + "\n" + threshold("2023-12-04 01:23:08,000"), version="1.17.2")
    flat = render_config_diff(finding.patches, None, "1.17.2")
    assert "+++ b/flink-conf.yaml" in flat and f"+{POLICY}: NEVER" in flat
    nested = render_config_diff(finding.patches, None, "1.19.1")
    assert "+++ b/config.yaml" in nested and "NEVER" in nested


def test_example_incidents(spark):
    inc = ingest([str(example(SLUG, "replace-datanode-small-cluster-1.17"))], spark)
    diagnosis = run_detectors(inc)
    primary = diagnosis.primary
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "pipeline-recovery-failure")
    assert {p.key: p.proposed for p in primary.patches}[POLICY] == "NEVER"
    assert {f.runbook for f in diagnosis.findings} == {SLUG, "checkpoint-tolerable-failure-threshold"}

    inc = ingest([str(example(SLUG, "unreachable-datanodes-1.10"))], spark)
    assert run_detectors(inc).primary.root_cause.slug == "datanodes-unreachable"

    inc = ingest([str(example(SLUG, "pipeline-recovered-1.14"))], spark)
    assert run_detectors(inc).findings == []
