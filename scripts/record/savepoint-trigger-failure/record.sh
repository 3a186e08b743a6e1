#!/bin/bash
# Genuine logs of savepoints and stop-with-savepoint that fail, time out, or outlive the client waiting for them.
#
#   PORT_OFFSET=300 scripts/record/savepoint-trigger-failure/record.sh <flink-version> <dest-root> <scenario>...
#
# The job (job/SlowSnapshotJob.java) snapshots its state slowly (a sleep in snapshotState stands in for large state)
# and takes no periodic checkpoints unless a scenario asks for them. Scenarios:
#   stop-client-timeout       client.timeout 5 s, a snapshot of 25 s: `flink stop` gives up with a TimeoutException
#                             while the JobManager completes the savepoint and the job finishes
#   savepoint-client-timeout  the same with `flink savepoint`: the savepoint completes after the CLI failed
#   savepoint-expired         execution.checkpointing.timeout 10 s, a snapshot of 30 s: the savepoint expires
#   tasks-not-running         the job's task initialises for 60 s; `flink savepoint` while it is INITIALIZING
#   dir-not-configured        no savepoint directory configured, `flink savepoint <job>` without a target
#   dir-not-writable          the configured savepoint directory belongs to another user (not writable)
#   savepoint-ok              a snapshot of 3 s and the default client timeout: the savepoint completes (near miss)
#   near-miss-checkpoint-expired  periodic checkpoints every 5 s with a 10 s timeout and a 30 s snapshot, no savepoint
#                             requested: checkpoints expire (the checkpoint runbooks' case, not a savepoint's)
# Each scenario writes <dest-root>/<scenario>-<major.minor>/ with the CLI's output of the savepoint or stop command
# as cli/flink-savepoint.out or cli/flink-stop.out.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
VERSION=$1; DEST=$2; shift 2

savepoint_dir_conf() {  # the default savepoint directory, in the key this release reads
  if [[ "$VER" == 1.1[0-9].* ]]; then conf "state.savepoints.dir: file://$1"
  else conf "execution.checkpointing.savepoint-dir: file://$1"; fi
}
cli_out() {  # cli_out <name> <flink arguments> : the CLI's output kept as cli/<name>.out
  act "flink ${*:2}"
  as_flink "'$FH/bin/flink' ${*:2}" > "$RUN/cli-$1.out" 2>&1
  log "flink ${*:2} exited $?"
}
savepoints_completed() { curl -s -m 5 "$REST/jobs/$JOBID/checkpoints" | jq -r '[.history[]? | select(.is_savepoint and .status=="COMPLETED")] | length' 2>/dev/null; }

for scenario in "$@"; do
  init_run "savepoint-$scenario" "$VERSION" || exit 1
  conf "restart-strategy.type: fixed-delay"
  conf "restart-strategy.fixed-delay.attempts: 1"
  conf "restart-strategy.fixed-delay.delay: 2 s"
  snapshot_ms=25000; init_ms=0; interval_ms=0
  case $scenario in
    stop-client-timeout|savepoint-client-timeout) savepoint_dir_conf "$RUN/savepoints"; conf "client.timeout: 5 s";;
    savepoint-expired) savepoint_dir_conf "$RUN/savepoints"; conf "execution.checkpointing.timeout: 10 s"; snapshot_ms=30000;;
    tasks-not-running) savepoint_dir_conf "$RUN/savepoints"; snapshot_ms=0; init_ms=60000;;
    dir-not-configured) snapshot_ms=0;;
    dir-not-writable)
      mkdir -p "$RUN/shared-savepoints"; chown root:root "$RUN/shared-savepoints"; chmod 755 "$RUN/shared-savepoints"
      savepoint_dir_conf "$RUN/shared-savepoints"; snapshot_ms=0;;
    savepoint-ok) savepoint_dir_conf "$RUN/savepoints"; snapshot_ms=3000;;
    near-miss-checkpoint-expired)
      savepoint_dir_conf "$RUN/savepoints"; conf "execution.checkpointing.timeout: 10 s"; snapshot_ms=30000; interval_ms=5000;;
    *) echo "unknown scenario $scenario" >&2; exit 2;;
  esac
  compile_job "$HERE/job" || exit 1
  start_cluster 1 || { stop_cluster; exit 1; }
  submit -c SlowSnapshotJob "$JAR" "$snapshot_ms" "$init_ms" "$interval_ms"
  if [ "$scenario" = tasks-not-running ]; then
    wait_for "job RUNNING" 60 "[ \"\$(job_state)\" = RUNNING ]"; sleep 8
  else
    wait_for "task RUNNING" 90 "curl -s -m 5 $REST/jobs/$JOBID | jq -e '[.vertices[].status] | all(. == \"RUNNING\")' >/dev/null 2>&1"
    sleep 5
  fi
  case $scenario in
    stop-client-timeout)
      cli_out flink-stop stop "$JOBID"
      wait_for "job FINISHED after the savepoint" 90 "[ \"\$(job_state)\" = FINISHED ]"; sleep 3;;
    savepoint-client-timeout)
      cli_out flink-savepoint savepoint "$JOBID"
      wait_for "the savepoint completed" 90 "[ \"\$(savepoints_completed)\" -ge 1 ] 2>/dev/null"; sleep 3;;
    near-miss-checkpoint-expired)
      wait_for "a checkpoint expired" 90 "grep_logs 'expired before completing' >/dev/null"; sleep 10;;
    *)
      cli_out flink-savepoint savepoint "$JOBID"; sleep 3;;
  esac
  stop_cluster
  out=$DEST/$scenario-$(echo "$VER" | cut -d. -f1-2)
  collect "$out"
  rm -f "$out"/actions.log "$out"/log/*.out "$out"/cli/cli-submit-*.out "$out"/cli/cli-start-cluster.out "$out"/cli/cli-stop-cluster.out
  for f in "$out"/cli/cli-*.out; do [ -f "$f" ] && mv "$f" "$out/cli/$(basename "$f" | sed 's/^cli-//')"; done
done
