"""Detector restart-strategy-exhausted: which fault kept recurring, whether restarting could ever help, what budget fits."""
from __future__ import annotations

from corpus import example, incident_from_text
from corpus import line
from flink_runbooks.detectors import get_detector
from flink_runbooks.vocabulary.keys import canonical
from flink_runbooks.diagnose import run_detectors
from flink_runbooks.diagnose import ingest
from flink_runbooks.render.patches import render_config_diff

SLUG = "restart-strategy-exhausted"
JOB = "d6b596ee9c80fe2128d619997c4a4466"
FIXED = "FixedDelayRestartBackoffTimeStrategy(maxNumberRestartAttempts=3, backoffTimeMS=10000)"


def _failure(ts: str, fault: str, last: bool = False, strategy: str = FIXED) -> list[str]:
    out = [line(f"{ts},000", "stateful-map (1/1) (379e_857e_0_0) switched from RUNNING to FAILED on localhost:35839-571af0 @ localhost (dataPort=33865)."),
           fault, "\tat com.acme.Scorer.map(Scorer.java:42) ~[job.jar:?]"]
    if last:
        out += [line(f"{ts},010", f"Job invoice-validator ({JOB}) switched from state RUNNING to FAILING."),
                f"org.apache.flink.runtime.JobException: Recovery is suppressed by {strategy}",
                "\tat org.apache.flink.runtime.executiongraph.failover.flip1.ExecutionFailureHandler.handleFailure(ExecutionFailureHandler.java:139)",
                f"Caused by: {fault}",
                line(f"{ts},020", f"Job invoice-validator ({JOB}) switched from state FAILING to FAILED.")]
    else:
        out += [line(f"{ts},010", f"Job invoice-validator ({JOB}) switched from state RUNNING to RESTARTING."),
                line(f"{ts},900", f"Job invoice-validator ({JOB}) switched from state RESTARTING to RUNNING.")]
    return out


def _log(faults: list[tuple[str, str]], strategy: str = FIXED, header: list[str] | None = None) -> str:
    lines = list(header or []) + [line("10:00:00,000", f"Job invoice-validator ({JOB}) switched from state CREATED to RUNNING.")]
    for i, (ts, fault) in enumerate(faults):
        lines += _failure(ts, fault, last=i == len(faults) - 1, strategy=strategy)
    return "\n".join(lines)


SAME = [("10:01:00", "java.lang.IllegalStateException: cannot process record 300"),
        ("10:01:15", "java.lang.IllegalStateException: cannot process record 485"),
        ("10:01:30", "java.lang.IllegalStateException: cannot process record 485"),
        ("10:01:45", "java.lang.IllegalStateException: cannot process record 512")]
TRANSIENT = [("10:00:30", "java.net.SocketTimeoutException: Read timed out"),
             ("11:10:00", "java.net.ConnectException: Connection refused (Connection refused)"),
             ("12:40:00", "java.net.SocketTimeoutException: Read timed out"),
             ("14:00:30", "java.net.ConnectException: Connection refused (Connection refused)")]
CONF = {"restart-strategy": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3",
        "restart-strategy.fixed-delay.delay": "10 s", "execution.checkpointing.interval": "1 min"}


def test_the_same_fault_every_attempt_means_restarting_cannot_help():
    [f] = get_detector(SLUG).detect(incident_from_text(_log(SAME), CONF, "1.20.3"))
    assert f.root_cause.slug == "same-fault-every-attempt"
    assert f.details["failure_episodes"] == 4 and f.details["distinct_faults"] == 1 and f.details["restarts_before_failing"] == 3
    assert "IllegalStateException" in f.details["recurring_fault"]
    assert not any(p.key.startswith("restart-strategy") for p in f.patches)
    assert any(p.key == "fix the recurring fault" for p in f.patches)
    assert "stays FAILED" in f.summary


def test_transient_faults_get_an_exponential_budget_sized_from_their_spacing():
    [f] = get_detector(SLUG).detect(incident_from_text(_log(TRANSIENT), CONF, "1.20.3"))
    assert f.root_cause.slug == "restart-budget-too-small" and f.details["trouble_span"] == "4 h"
    flink = {p.key: p for p in f.patches if p.target == "flink"}
    assert (flink["restart-strategy.type"].current, flink["restart-strategy.type"].proposed) == ("fixed-delay", "exponential-delay")
    assert flink["restart-strategy.exponential-delay.initial-backoff"].proposed == "10 s"
    assert flink["restart-strategy.exponential-delay.max-backoff"].proposed == "30 min"  # 2 x 4 h, capped
    assert "restart-strategy.type: exponential-delay" in render_config_diff(f.patches, None, "1.20.3")


def test_old_releases_get_a_bigger_fixed_delay_budget_under_the_old_key():
    [f] = get_detector(SLUG).detect(incident_from_text(_log(TRANSIENT), CONF, "1.12.7"))
    assert "restart-strategy" in {p.key for p in f.patches}  # the key 1.12 reads, in the JSON too
    flink = {canonical(p.key): p.proposed for p in f.patches if p.target == "flink"}
    assert flink["restart-strategy.type"] == "fixed-delay" and flink["restart-strategy.fixed-delay.attempts"] == "12"
    diff = render_config_diff(f.patches, None, "1.12.7")
    assert "restart-strategy: fixed-delay" in diff and "restart-strategy.type" not in diff


def test_a_strategy_set_in_job_code_is_changed_in_the_code():
    header = [line("09:59:59,000", f"Using restart back off time strategy {FIXED} for invoice-validator ({JOB}).",
                   logger="org.apache.flink.runtime.jobmaster.JobMaster")]
    [f] = get_detector(SLUG).detect(incident_from_text(_log(TRANSIENT, header=header),
                                                       {"execution.checkpointing.interval": "1 min"}, "1.16.3"))
    assert "set in the job's code" in f.details["strategy_source"]
    code = next(p for p in f.patches if p.target == "code")
    assert "exponentialDelayRestart" in code.snippet and "Time.of(1800, TimeUnit.SECONDS)" in code.snippet


def test_no_restart_strategy_without_checkpointing_proposes_both():
    text = _log([("10:01:00", "java.lang.NullPointerException")], strategy="NoRestartBackoffTimeStrategy")
    [f] = get_detector(SLUG).detect(incident_from_text(text, {}, "1.10.3"))
    assert f.root_cause.slug == "no-restart-strategy"
    keys = {p.key for p in f.patches}
    assert {"restart-strategy", "execution.checkpointing.interval"} <= keys  # 1.10 spelling
    assert "restart-strategy: fixed-delay" in render_config_diff(f.patches, None, "1.10.3")


def test_recurring_lost_taskmanagers_are_named_and_the_loss_is_primary():
    fault = ("org.apache.flink.runtime.io.network.netty.exception.RemoteTransportException: Connection unexpectedly closed "
             "by remote task manager '10.0.0.7/10.0.0.7:33113 [ 10.0.0.7:35211-7ad2c1 ] '. This might indicate that the remote task manager was lost.")
    inc = incident_from_text(_log([(ts, fault) for ts, _ in TRANSIENT]), CONF, "1.20.3")
    [f] = get_detector(SLUG).detect(inc)
    assert f.root_cause.slug == "restart-budget-too-small"
    assert f.details["recurring_fault_runbook"] == "taskmanager-lost" and "taskmanager-lost runbook" in f.summary
    assert run_detectors(inc).primary.runbook == "taskmanager-lost"


def test_retained_checkpoints_are_proposed_so_a_failed_job_can_be_resubmitted():
    [f] = get_detector(SLUG).detect(incident_from_text(_log(SAME), CONF, "1.20.3"))
    retention = next(p for p in f.patches if p.key == "execution.checkpointing.externalized-checkpoint-retention")
    assert retention.current is None and retention.proposed == "RETAIN_ON_CANCELLATION"
    kept = dict(CONF, **{"execution.checkpointing.externalized-checkpoint-retention": "RETAIN_ON_CANCELLATION"})
    [g] = get_detector(SLUG).detect(incident_from_text(_log(SAME), kept, "1.20.3"))
    assert not any(p.key.endswith("externalized-checkpoint-retention") for p in g.patches)


def test_restarts_that_recovered_are_not_this_runbook():
    text = "\n".join([line("10:00:00,000", f"Job invoice-validator ({JOB}) switched from state CREATED to RUNNING.")]
                     + _failure("10:01:00", "java.net.SocketTimeoutException: Read timed out"))
    assert get_detector(SLUG).detect(incident_from_text(text, CONF)) == []


def test_genuine_exhausted_incident(spark):
    inc = ingest([str(example(SLUG, "same-fault-every-attempt"))], spark)
    diagnosis = run_detectors(inc)
    # the recurring fault is the job's own exception: that runbook is primary, this one its outcome
    assert diagnosis.primary.runbook == "user-code-exception"
    primary = next(f for f in diagnosis.findings if f.runbook == SLUG)
    assert primary.root_cause.slug == "same-fault-every-attempt"
    assert primary.details["strategy_parameters"] == {"maxNumberRestartAttempts": "2", "backoffTimeMS": "3000"}
    assert primary.details["restarts_before_failing"] == 2 and primary.details["distinct_faults"] == 1


def test_genuine_threshold_incident_names_the_checkpoint_runbook(spark):
    inc = ingest([str(example("checkpoint-tolerable-failure-threshold", "storage-permission-denied"))], spark)
    diagnosis = run_detectors(inc)
    mine = next(f for f in diagnosis.findings if f.runbook == SLUG)
    assert not mine.primary and mine.details["recurring_fault_runbook"] == "checkpoint-tolerable-failure-threshold"
