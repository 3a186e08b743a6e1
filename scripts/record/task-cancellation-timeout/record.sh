#!/bin/bash
# Record a task that does not leave its code when the job is cancelled.
#   record.sh <flink-version> <scenario> <destination>
# scenarios:
#   swallow          map() swallows interrupts; task.cancellation.timeout 10 s -> the watchdog kills the TaskManager
#   slow-close       close() needs 20 s of uninterruptible flushing; timeout 10 s -> the TaskManager is killed
#   patient          map() ignores 3 interrupts, then gives up; timeout 30 s -> warnings, then CANCELED (near miss)
#   normal           a clean cancellation (healthy)
# PORT_OFFSET (see ../lib.sh) keeps the cluster apart from others running at the same time.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
VER=$1; SCENARIO=$2; DEST=$3
init_run "task-cancellation-$SCENARIO" "$VER" || exit 1
conf "task.cancellation.interval: 2000"
case $SCENARIO in
  swallow)       conf "task.cancellation.timeout: 10000"; ARGS="--mode swallow --after 2000" ;;
  slow-close)    conf "task.cancellation.timeout: 10000"; ARGS="--mode slow-close --batches 20 --batch-ms 1000" ;;
  patient)       conf "task.cancellation.timeout: 30000"; ARGS="--mode patient --after 2000 --give-up 3" ;;
  normal)        ARGS="--mode normal" ;;
  *) echo "unknown scenario $SCENARIO" >&2; exit 2 ;;
esac
conf "restart-strategy.type: none"
compile_job "$HERE/job" || exit 1
start_cluster 1 || { stop_cluster; exit 1; }
submit -c scenario.CancellationJob "$JAR" $ARGS
wait_for "job RUNNING" 60 '[ "$(job_state)" = RUNNING ]'
sleep 12
act "cancel job $JOBID"
flink_cli cancel "$JOBID"
wait_for "job terminal" 90 "job_state | grep -qE 'CANCELED|FAILED'"
case $SCENARIO in
  swallow|slow-close) wait_for "TaskManager exited" 60 "! pgrep -u $RUN_USER -f 'TaskManagerRunner.*$RUN/' >/dev/null" ;;
  *) sleep 5 ;;
esac
stop_cluster
collect "$DEST"
