#!/bin/bash
# Genuine logs of TaskManagers that cannot register at the ResourceManager.
#
#   PORT_OFFSET=50 scripts/record/tm-registration-timeout/record.sh <flink-version> <scenario> <dest>
#
# scenarios:
#   wrong-rpc-port   the JobManager runs; a TaskManager started alone with a jobmanager.rpc.port one above the
#                    JobManager's, and a registration timeout of 40 s: it retries, then terminates
#   unknown-host     the TaskManager's jobmanager.rpc.address is a name no resolver knows
#   jobmanager-down  a running cluster whose JobManager is stopped (SIGTERM); the TaskManager keeps retrying and
#                    terminates after its registration timeout
#   late-jobmanager  the TaskManager starts 15 s before the JobManager and registers after a few retries (healthy)
set -u
source "$(dirname "$0")/../lib.sh"
VERSION=$1; SCENARIO=$2; DEST=$3
init_run "tm-registration-$SCENARIO" "$VERSION" || exit 1
conf "taskmanager.registration.timeout: 40 s"

tm_conf() {  # tm_conf <key> <value>: a TaskManager-only configuration directory differing in one key
  rm -rf "$RUN/conf-tm"; cp -r "$RUN/conf" "$RUN/conf-tm"
  sed -i "/^$1:/d" "$RUN/conf-tm/$CONF_NAME"; echo "$1: $2" >> "$RUN/conf-tm/$CONF_NAME"
  chown -R "$RUN_USER:$RUN_USER" "$RUN/conf-tm"
}
start_jm() { as_flink "'$FH/bin/jobmanager.sh' start" >> "$RUN/cli-jobmanager.out" 2>&1
             wait_for "REST up" 90 "curl -s -m 2 $REST/overview >/dev/null"; }
start_tm() { as_flink "FLINK_CONF_DIR='${1:-$RUN/conf}' '$FH/bin/taskmanager.sh' start" >> "$RUN/cli-taskmanager.out" 2>&1; }
tm_gone() { ! pgrep -u "$RUN_USER" -f "$RUN/.*TaskManagerRunner" >/dev/null && ! pgrep -u "$RUN_USER" -f "TaskManagerRunner.*$RUN" >/dev/null; }

case $SCENARIO in
  wrong-rpc-port)
    start_jm
    tm_conf jobmanager.rpc.port $((RPC_PORT + 1))
    act "start a TaskManager whose jobmanager.rpc.port is $((RPC_PORT + 1)); the JobManager listens on $RPC_PORT"
    start_tm "$RUN/conf-tm"
    wait_for "TaskManager terminated" 120 "grep -q 'Terminating now' $RUN/log/*taskexecutor*.log 2>/dev/null && tm_gone"
    ;;
  unknown-host)
    start_jm
    tm_conf jobmanager.rpc.address flink-jobmanager.flink.svc
    act "start a TaskManager whose jobmanager.rpc.address is flink-jobmanager.flink.svc (not resolvable here)"
    start_tm "$RUN/conf-tm"
    wait_for "TaskManager terminated" 120 "grep -q 'Terminating now' $RUN/log/*taskexecutor*.log 2>/dev/null && tm_gone"
    ;;
  jobmanager-down)
    start_cluster 1
    sleep 5
    act "stop the JobManager (SIGTERM) while the TaskManager runs"
    as_flink "'$FH/bin/jobmanager.sh' stop" >> "$RUN/cli-jobmanager.out" 2>&1
    wait_for "TaskManager terminated" 150 "grep -q 'Terminating now' $RUN/log/*taskexecutor*.log 2>/dev/null && tm_gone"
    ;;
  late-jobmanager)
    act "start the TaskManager 15 s before the JobManager"
    start_tm
    sleep 15
    act "start the JobManager"
    start_jm
    wait_for "TaskManager registered" 60 "[ \"\$(curl -s -m 2 $REST/overview | jq -r .taskmanagers 2>/dev/null)\" = '1' ]"
    sleep 5
    ;;
  *) echo "unknown scenario $SCENARIO" >&2; exit 2;;
esac
stop_cluster
as_flink "FLINK_CONF_DIR='$RUN/conf-tm' '$FH/bin/taskmanager.sh' stop-all" >/dev/null 2>&1
for p in $(our_java_pids); do log "left over: $p -> kill"; kill "$p"; done
collect "$DEST"
