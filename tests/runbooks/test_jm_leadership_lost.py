"""Detector jm-leadership-lost: ZooKeeper session, Kubernetes API, two leaders, or undetermined."""
from __future__ import annotations

from corpus import example, incident_from_files
from flink_runbooks.diagnose import ingest
from flink_runbooks.detectors import get_detector
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.render.patches import render_config_diff

SLUG = "jm-leadership-lost"
JOB = "6f3c2a51d0e84b7a9c1d2e3f4a5b6c7d"


def _primary(inc):
    diagnosis = run_detectors(inc)
    assert not [e for e in diagnosis.errors if SLUG in e]
    return diagnosis.primary


def test_a_gc_pause_that_expires_the_zookeeper_session(spark):
    primary = _primary(ingest([str(example(SLUG, "zookeeper-session-expired-gc-1.17"))], spark))
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "zookeeper-session-timeout")
    assert primary.details["not_heard_from_zookeeper"] == "71234 ms"
    assert primary.details["jobmanager_gc_pause"] == "71.0 s"
    notes = [e.note for e in primary.evidence]
    assert any("GC pause" in n for n in notes) and any("session expired" in n for n in notes)
    patches = {p.key: p for p in primary.patches}
    assert list(patches)[0] == "find what paused the JobManager or cut it from ZooKeeper"  # the pause first
    assert patches["high-availability.zookeeper.client.session-timeout"].proposed == "120000"
    # the session expired: tolerating suspensions would not have kept the leadership
    assert "high-availability.zookeeper.client.tolerate-suspended-connections" not in patches
    assert "regained" in str(primary.details) or "granted again" in primary.summary


def test_throttled_lease_renewals_on_kubernetes(spark):
    primary = _primary(ingest([str(example(SLUG, "kubernetes-lease-throttled-1.20"))], spark))
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "kubernetes-api-failure")
    assert primary.details["kubernetes_statuses"] == ["429 TooManyRequests"]
    assert any("renew deadline" in e.note for e in primary.evidence)
    keys = {p.key: p.proposed for p in primary.patches if p.target == "flink"}
    assert keys == {"high-availability.kubernetes.leader-election.lease-duration": "60 s",
                    "high-availability.kubernetes.leader-election.renew-deadline": "60 s",
                    "high-availability.kubernetes.leader-election.retry-period": "5 s"}


def test_two_leaders_are_named_and_tolerating_suspensions_is_withdrawn(spark):
    primary = _primary(ingest([str(example(SLUG, "two-leaders-tolerated-suspension-1.20"))], spark))
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "two-leaders")
    files = {e.file.rsplit("/", 1)[-1] for e in primary.evidence}
    assert {"flink-flink-standalonesession-0-jm-a.log", "flink-flink-standalonesession-1-jm-b.log"} <= files
    assert any("does not match the expected job manager leader id" in e.text for e in primary.evidence)
    tolerate = next(p for p in primary.patches if p.key.endswith("tolerate-suspended-connections"))
    assert (tolerate.current, tolerate.proposed) == ("true", "false")
    assert "tolerate-suspended-connections: false" in render_config_diff(primary.patches, None, "1.20.3")


def test_a_suspension_that_reconnects_within_the_session_is_not_a_finding(spark):
    inc = ingest([str(example(SLUG, "near-miss-zookeeper-reconnected-2.3"))], spark)
    assert any("State change: SUSPENDED" in ev.text for ev in inc.events)
    assert get_detector(SLUG).detect(inc) == []


def test_a_suspension_alone_that_revoked_leadership_proposes_tolerating_it(tmp_path):
    head = "INFO  org.apache.flink.shaded.curator5.org.apache.curator.framework.state.ConnectionStateManager [] - "
    lines = [f"2026-11-23 11:21:31,523 {head}State change: SUSPENDED",
             "2026-11-23 11:21:31,540 INFO  org.apache.flink.runtime.jobmaster.JobMasterServiceLeadershipRunner [] - "
             f"JobMasterServiceLeadershipRunner for job {JOB} was revoked leadership with leader id "
             "b8c9d0e1-f2a3-4b4c-9d5e-6f7a8b9c0d1e. Stopping current JobMasterServiceProcess.",
             f"2026-11-23 11:21:38,720 {head}State change: RECONNECTED"]
    inc = incident_from_files(tmp_path, {"jobmanager.log": "\n".join(lines) + "\n"}, version="1.16.3")
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "zookeeper-session-timeout"
    tolerate = next(p for p in f.patches if p.key.endswith("tolerate-suspended-connections"))
    assert tolerate.proposed == "true" and not any(p.key.endswith("session-timeout") for p in f.patches)


def test_a_taskmanagers_view_alone_is_undetermined(tmp_path):
    trace = (f"java.lang.Exception: Job leader for job id {JOB} lost leadership.\n"
             "\tat org.apache.flink.runtime.taskexecutor.TaskExecutor$JobLeaderListenerImpl.lambda$null$2(TaskExecutor.java:2444)\n")
    inc = incident_from_files(tmp_path, {"ticket.txt": trace})
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "undetermined" and f.confidence <= 0.5
    assert "Collect next" in f.summary and [p.target for p in f.patches] == ["ops"]


def test_a_revocation_while_the_jobmanager_is_being_stopped_is_not_a_lost_leadership(tmp_path):
    lines = ["2026-11-23 11:21:31,523 INFO  org.apache.flink.runtime.entrypoint.ClusterEntrypoint [] - RECEIVED SIGNAL "
             "15: SIGTERM. Shutting down as requested.",
             "2026-11-23 11:21:31,540 INFO  org.apache.flink.runtime.jobmaster.JobMasterServiceLeadershipRunner [] - "
             f"JobMasterServiceLeadershipRunner for job {JOB} was revoked leadership with leader id "
             "b8c9d0e1-f2a3-4b4c-9d5e-6f7a8b9c0d1e. Stopping current JobMasterServiceProcess."]
    inc = incident_from_files(tmp_path, {"jobmanager.log": "\n".join(lines) + "\n"})
    assert get_detector(SLUG).detect(inc) == []


def test_flink_1_9_wordings_of_grants_and_revocations_are_read(spark):
    """Up to 1.12 the contenders log their job's name and id or their address, not a leader id."""
    inc = ingest([str(example(SLUG, "zookeeper-suspended-1.9"))], spark)
    primary = _primary(inc)
    assert (primary.runbook, primary.root_cause.slug) == (SLUG, "zookeeper-session-timeout")
    assert "was revoked leadership at akka.tcp://" in primary.evidence[0].text
    # the JobManager, the ResourceManager, the Dispatcher, and the TaskManager twice (its log line, the task's failure)
    assert primary.details["leadership_losses"] == 5
    assert "granted again" in primary.summary
    # 1.9 has no option to tolerate a suspension: no key it would ignore, an upgrade once the incident is over
    assert not [p for p in primary.patches if p.target == "flink"]
    upgrade = next(p for p in primary.patches if p.key.startswith("upgrade"))
    assert not upgrade.urgent and "from 1.14 on" in upgrade.reason


def test_a_1_12_revocation_with_the_address_before_the_verb_is_a_lost_leadership(tmp_path):
    lines = ["2021-08-10 02:00:01,100 WARN  org.apache.flink.runtime.leaderelection.ZooKeeperLeaderElectionDriver [] - "
             "Connection to ZooKeeper suspended. The contender akka.tcp://flink@jm:6123/user/rpc/jobmanager_2 no longer "
             "participates in the leader election.",
             "2021-08-10 02:00:01,130 INFO  org.apache.flink.runtime.jobmaster.JobManagerRunnerImpl [] - JobManager for "
             f"job Payments (score) v2 ({JOB}) at akka.tcp://flink@jm:6123/user/rpc/jobmanager_2 was revoked leadership."]
    inc = incident_from_files(tmp_path, {"jobmanager.log": "\n".join(lines) + "\n"}, version="1.12.5")
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "zookeeper-session-timeout"
    assert "was revoked leadership." in f.evidence[0].text  # the job's name may hold parentheses


def test_a_grant_in_two_processes_of_1_9_is_two_leaders(tmp_path):
    def grant(session):
        return ("2020-03-04 03:20:11,311 INFO  org.apache.flink.runtime.jobmaster.JobManagerRunner           - "
                f"JobManager runner for job Orders ETL ({JOB}) was granted leadership with session id {session} at "
                "akka.tcp://flink@jm:6123/user/jobmanager_0.\n")
    inc = incident_from_files(tmp_path, {"jm-a/jobmanager.log": grant("4a6e5f1e-2d8a-4b1c-9a6e-1f2d3c4b5a69"),
                                         "jm-b/jobmanager.log": grant("0d9c8b7a-6f5e-4d3c-2b1a-09f8e7d6c5b4")},
                              version="1.9.3")
    from flink_runbooks.evidence.leadership import overlapping_leaders
    assert len(overlapping_leaders(inc)) == 1
