#!/bin/bash
# Genuine logs of RPC calls that time out or are dropped for their size.
#
#   PORT_OFFSET=50 scripts/record/rpc-timeout/record.sh <flink-version> <scenario> <dest>
#
# scenarios:
#   oversized-deployment  akka.framesize / pekko.framesize of 100 KiB and a job whose map function carries 400 KB:
#                         the task deployment message is dropped by the RPC system and the call times out
#   frozen-jobmanager     a running job; the JobManager is frozen (SIGSTOP) for 45 s while `flink savepoint` waits
#                         with a client timeout of 20 s
#   savepoint-ok          the same job and a savepoint that completes (healthy)
set -u
source "$(dirname "$0")/../lib.sh"
VERSION=$1; SCENARIO=$2; DEST=$3
init_run "rpc-timeout-$SCENARIO" "$VERSION" || exit 1
if [[ "$VERSION" == 1.1[0-7].* ]]; then RPC=akka; else RPC=pekko; fi
conf "restart-strategy.type: fixed-delay"
conf "restart-strategy.fixed-delay.attempts: 1"
conf "restart-strategy.fixed-delay.delay: 2 s"
if [[ "$VERSION" == 1.1[0-9].* ]]; then conf "state.savepoints.dir: file://$RUN/savepoints"
else conf "execution.checkpointing.savepoint-dir: file://$RUN/savepoints"; fi
compile_job "$RECORD_DIR/rpc-timeout/job" || exit 1

case $SCENARIO in
  oversized-deployment)
    conf "$RPC.framesize: 102400b"
    conf "$RPC.ask.timeout: 10 s"
    start_cluster 1
    submit -c BigClosureJob "$JAR" 400000
    wait_for "job FAILED" 150 "[ \"\$(job_state)\" = FAILED ]"
    ;;
  frozen-jobmanager|savepoint-ok)
    conf "client.timeout: 20 s"
    start_cluster 1
    submit -c BigClosureJob "$JAR" 0
    wait_for "two checkpoints" 90 "[ \"\$(ckpt_completed)\" -ge 2 ] 2>/dev/null"
    if [ "$SCENARIO" = frozen-jobmanager ]; then
      JM=$(pgrep -u "$RUN_USER" -f "StandaloneSessionClusterEntrypoint.*$RUN/" | head -1)
      act "freeze the JobManager (SIGSTOP, pid $JM) and trigger a savepoint from the CLI"
      kill -STOP "$JM"
      (sleep 45; act "resume the JobManager (SIGCONT)"; kill -CONT "$JM") &
      flink_cli savepoint "$JOBID"
      wait
      sleep 15
    else
      act "trigger a savepoint from the CLI"
      flink_cli savepoint "$JOBID"
      sleep 5
    fi
    ;;
  *) echo "unknown scenario $SCENARIO" >&2; exit 2;;
esac
stop_cluster
collect "$DEST"
rm -f "$DEST"/log/*.out
