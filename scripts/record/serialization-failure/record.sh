#!/bin/bash
# Genuine logs of records or functions Flink cannot serialize: record.sh <flink-version> <scenario> <dest>
#   generic          pipeline.generic-types: false and an order type that is not a POJO: the submission fails
#   kryo-java17      the same type through Kryo on Java 17 without the --add-opens list (env.java.opts.all removed)
#   kryo-java17-tm   the same, but only the client keeps the list (env.java.opts.client): the TaskManager fails
#   nonserializable  a function holding a client that is not Serializable: the submission fails in the client
#   kryo-ok          the non-POJO type (an unmodifiable list inside) through Kryo with the --add-opens list: Kryo
#                    cannot read the list back
#   kryo-near-miss   a non-POJO type holding a plain ArrayList through Kryo (near miss: Flink's INFO about the generic
#                    type, no failure)
#   healthy          the orders job without generic types
# The job is the orders job of ../user-code-exception/job. PORT_OFFSET (default 40) keeps this cluster's ports apart.
set -u
export PORT_OFFSET=${PORT_OFFSET:-40}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
VER=$1; SCENARIO=$2; DEST=$3
init_run "serialization-$SCENARIO" "$VER" || exit 1
compile_job "$HERE/../user-code-exception/job"
MAIN="-c com.acme.orders.OrdersJob $JAR"
conf "restart-strategy.type: fixed-delay"
conf "restart-strategy.fixed-delay.attempts: 2"
conf "restart-strategy.fixed-delay.delay: 2 s"
case "$SCENARIO" in
  generic) conf "pipeline.generic-types: false"; JOBARG=generic ;;
  kryo-java17) sed -i '/^env.java.opts.all:/d' "$CONF"; JOBARG=kryo ;;
  kryo-java17-tm) sed -i '/^env.java.opts.all:/d' "$CONF"; conf "env.java.opts.client: $JAVA_OPTS_ALL"; JOBARG=kryo ;;
  nonserializable) JOBARG=nonserializable ;;
  kryo-ok) JOBARG=kryo ;;
  kryo-near-miss) JOBARG=kryo-mutable ;;
  healthy) JOBARG=ok ;;
esac
start_cluster 1 || { stop_cluster; exit 1; }
act "submit the orders job ($JOBARG)"
submit $MAIN $JOBARG
if [ -n "$JOBID" ]; then
  wait_for "job FAILED or running a while" "${RUN_SECONDS:-60}" "[ \"\$(job_state)\" = FAILED ]"
fi
stop_cluster
collect "$DEST"
exit 0
