#!/bin/bash
# Genuine logs of a job failing in its own code: record.sh <flink-version> <scenario> <dest>
#   poison     one malformed order fails the parser at the same record on every restart, until restarts run out
#   deploy     version 1 of the job runs, is cancelled, version 2 fails from its first records (a bug in the release)
#   transient  an external call times out now and then; the job restarts and recovers each time
#   handled    the malformed order is caught and logged by the job (near miss: no failure)
#   healthy    the job runs and is cancelled
# PORT_OFFSET (default 40) keeps this cluster's ports apart from others'.
set -u
export PORT_OFFSET=${PORT_OFFSET:-40}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
VER=$1; SCENARIO=$2; DEST=$3
init_run "user-code-$SCENARIO" "$VER" || exit 1
conf "restart-strategy.type: fixed-delay"
conf "restart-strategy.fixed-delay.attempts: $([ "$SCENARIO" = transient ] && echo 10 || echo 3)"
conf "restart-strategy.fixed-delay.delay: 2 s"
conf "execution.checkpointing.dir: file://$RUN/ckpt"
compile_job "$HERE/job"
start_cluster 1 || { stop_cluster; exit 1; }
MAIN="-c com.acme.orders.OrdersJob $JAR"
case "$SCENARIO" in
  poison)
    act "submit the orders job; order 2500 in the feed has the amount n/a"
    submit $MAIN poison
    wait_for "job FAILED" 240 "[ \"\$(job_state)\" = FAILED ]" ;;
  deploy)
    act "submit release 1 of the job"
    submit $MAIN ok
    sleep 25
    act "cancel release 1 to deploy release 2"
    curl -s -X PATCH "$REST/jobs/$JOBID?mode=cancel" >/dev/null
    wait_for "release 1 canceled" 60 "[ \"\$(job_state)\" = CANCELED ]"
    act "submit release 2 of the job (it converts currencies with a new lookup)"
    submit $MAIN deploy-v2
    wait_for "job FAILED" 120 "[ \"\$(job_state)\" = FAILED ]" ;;
  transient)
    SVC_PORT=$((18000 + PORT_OFFSET))
    python3 "$HERE/customer_service.py" "$SVC_PORT" 1500 & SVC=$!
    act "start the customer service on port $SVC_PORT (every 1500th request stalls for 2 s)"
    act "submit the enrichment job (read timeout 500 ms)"
    submit $MAIN enrich "http://127.0.0.1:$SVC_PORT"
    sleep 75
    act "the job kept recovering; cancel it"
    kill "$SVC" ;;
  handled)
    act "submit the orders job that skips malformed orders; order 2500 has the amount n/a"
    submit $MAIN handled
    sleep 30 ;;
  healthy)
    act "submit the orders job"
    submit $MAIN ok
    sleep 25 ;;
esac
stop_cluster
collect "$DEST"
