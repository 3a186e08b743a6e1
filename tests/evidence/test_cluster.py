"""cluster.py: the TaskManager inventory, losses and what surrounds them, restart strategies and budgets."""
from __future__ import annotations

from corpus import incident_from_text, incident_of, line
from flink_runbooks.evidence import cluster


JM_REGISTRATIONS = "\n".join([
    line("10:00:01,000", "Registering TaskManager with ResourceID container_e07_1690000000000_0042_01_000002(worker-3:8041) "
                         "(akka.tcp://flink@worker-3:39123/user/rpc/taskmanager_0) at ResourceManager"),
    line("10:00:01,100", "Registering TaskManager with ResourceID 10.0.0.7:35211-7ad2c1 "
                         "(pekko.tcp://flink@10.0.0.7:35211/user/rpc/taskmanager_0) at ResourceManager"),
])


def test_inventory_names_taskmanagers_and_hosts_across_id_formats():
    inv = cluster.inventory(incident_of({"jobmanager.log": JM_REGISTRATIONS}))
    yarn = inv.find("container_e07_1690000000000_0042_01_000002(worker-3:8041)")
    assert yarn is inv.taskmanagers["container_e07_1690000000000_0042_01_000002"] and yarn.host == "worker-3"
    assert inv.taskmanagers["10.0.0.7:35211-7ad2c1"].host == "10.0.0.7"


def test_loss_lines_about_one_taskmanager_merge_into_one_loss_of_the_strongest_kind():
    text = JM_REGISTRATIONS + "\n" + "\n".join([
        line("10:05:00,000", "TaskManager with id 10.0.0.7:35211-7ad2c1 is no longer reachable."),
        line("10:05:00,001", "Closing TaskExecutor connection 10.0.0.7:35211-7ad2c1 because: TaskManager with id "
                             "10.0.0.7:35211-7ad2c1 is no longer reachable."),
        line("10:05:00,050", "Disconnect TaskExecutor 10.0.0.7:35211-7ad2c1 because: TaskManager with id "
                             "10.0.0.7:35211-7ad2c1 is no longer reachable."),
    ])
    [loss] = cluster.inventory(incident_of({"jobmanager.log": text})).taskmanagers["10.0.0.7:35211-7ad2c1"].losses
    assert (loss.kind, loss.ts, len(loss.events)) == ("unreachable", "2024-03-01 10:05:00.000", 3)


def test_an_orderly_shutdown_and_a_finished_job_are_not_losses():
    text = JM_REGISTRATIONS + "\n" + "\n".join([
        line("10:05:00,000", "Disconnect TaskExecutor 10.0.0.7:35211-7ad2c1 because: Stopping JobMaster for job 'x' "
                             "(0123456789abcdef0123456789abcdef)."),
        line("10:06:00,000", "Closing TaskExecutor connection 10.0.0.7:35211-7ad2c1 because: The TaskExecutor is shutting down."),
    ])
    inv = cluster.inventory(incident_of({"jobmanager.log": text}))
    [loss] = inv.taskmanagers["10.0.0.7:35211-7ad2c1"].losses
    assert loss.orderly and inv.lost == []


def test_loss_context_tells_a_log_that_just_ends_from_one_that_goes_on():
    jm = JM_REGISTRATIONS + "\n" + line("10:05:00,000", "TaskManager with id 10.0.0.7:35211-7ad2c1 is no longer reachable.")
    tm = "\n".join([line("10:00:00,500", "Starting TaskManager with ResourceID: 10.0.0.7:35211-7ad2c1", logger="org.apache.flink.runtime.taskexecutor.TaskManagerRunner"),
                    line("10:04:40,000", "Some warning", level="WARN")])
    inc = incident_of({"jobmanager.log": jm, "taskmanager-7.log": tm})
    inv = cluster.inventory(inc)
    tm_ = inv.taskmanagers["10.0.0.7:35211-7ad2c1"]
    ctx = cluster.loss_context(inc, tm_, tm_.losses[0])
    assert ctx.has_own_log and not ctx.alive_after and ctx.orderly is None and ctx.last_own.ts.endswith("10:04:40.000")
    later = tm + "\n" + line("10:05:20,000", "The heartbeat of ResourceManager with id 4f6c timed out.", logger="org.apache.flink.runtime.taskexecutor.TaskExecutor")
    inc = incident_of({"jobmanager.log": jm, "taskmanager-7.log": later})
    tm_ = cluster.inventory(inc).taskmanagers["10.0.0.7:35211-7ad2c1"]
    ctx = cluster.loss_context(inc, tm_, tm_.losses[0])
    assert ctx.alive_after and ctx.tm_side_timeouts and ctx.silence_s() == 40.0


def test_durations_are_written_as_the_release_reads_them():
    assert cluster.duration_value(130_000, (1, 20, 3)) == "130 s"
    assert cluster.duration_value(130_000, (1, 14)) == "130000"
    assert cluster.duration_value(130_000, None) == "130000"


def test_restart_strategy_logged_by_the_jobmaster_beats_the_configuration_and_reveals_code():
    text = line("10:00:00,000", "Using restart back off time strategy FixedDelayRestartBackoffTimeStrategy("
                                "maxNumberRestartAttempts=3, backoffTimeMS=10000) for job (0123456789abcdef0123456789abcdef).",
                logger="org.apache.flink.runtime.jobmaster.JobMaster")
    strategy = cluster.restart_strategy(incident_from_text(text, {"execution.checkpointing.interval": "1 min"}))
    assert (strategy.kind, strategy.attempts, strategy.delay_ms, strategy.set_in_code) == ("fixed-delay", 3, 10_000, True)
    same = cluster.restart_strategy(incident_from_text(text, {"restart-strategy": "fixed-delay",
                                                              "restart-strategy.fixed-delay.attempts": "3"}))
    assert not same.set_in_code


def test_default_restart_strategy_follows_version_and_checkpointing():
    on = {"execution.checkpointing.interval": "30 s"}
    assert cluster.restart_strategy(incident_from_text("", on, "1.18.1")).kind == "fixed-delay"
    assert cluster.restart_strategy(incident_from_text("", on, "1.19.0")).kind == "exponential-delay"
    # no sign of checkpointing: the job's code may still enable it, so the default is unknown, not "none"
    unknown = cluster.restart_strategy(incident_from_text("", {}, "1.19.0"))
    assert unknown.kind == "unknown" and "NoRestartBackoffTimeStrategy" not in unknown.describe()


def test_restart_budget_is_computed_from_the_observed_fault_spacing():
    inc = incident_from_text("", {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "3",
                                  "restart-strategy.fixed-delay.delay": "20 s"}, "1.18.1")
    budget = {k: v for k, v, _ in cluster.restart_budget(
        inc, ["2024-03-01 10:00:00.000", "2024-03-01 10:02:30.000", "2024-03-01 10:04:00.000"], infrastructure=True)}
    assert budget == {"restart-strategy.type": "exponential-delay",
                      "restart-strategy.exponential-delay.initial-backoff": "20 s",
                      "restart-strategy.exponential-delay.max-backoff": "8 min",
                      "restart-strategy.exponential-delay.backoff-multiplier": "2.0",
                      "restart-strategy.exponential-delay.reset-backoff-threshold": "1 h"}
    old = {k: v for k, v, _ in cluster.restart_budget(incident_from_text("", {}, "1.12.7"), ["2024-03-01 10:00:00.000"] * 4,
                                                      infrastructure=False)}
    assert old == {"restart-strategy.type": "fixed-delay", "restart-strategy.fixed-delay.attempts": "12",
                   "restart-strategy.fixed-delay.delay": "1 s"}


def test_heartbeat_timeout_proposal_covers_the_observed_silence():
    inc = incident_from_text("", {"heartbeat.timeout": "60000"})
    assert cluster.heartbeat_timeout_proposal(inc, 95) == (60_000, 150_000)
    assert cluster.heartbeat_timeout_proposal(incident_from_text(""), None) == (50_000, 100_000)
