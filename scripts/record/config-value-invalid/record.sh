#!/bin/bash
# Genuine logs of a configuration Flink cannot use: record.sh <flink-version> <scenario> <dest>
#   duration-unit   heartbeat.timeout written with a unit ("2 min") on a release whose option is a number of ms
#                   (<= 1.18): the JobManager does not start
#   interval-format execution.checkpointing.interval "1.5 min" (durations take whole numbers): the job submission fails
#   old-file        a 2.x cluster with the user's settings left in flink-conf.yaml, which 2.x no longer reads
#   removed-key     pipeline.registered-kryo-types on 2.x, which removed it (pipeline.serialization-config replaces it):
#                   loaded, logged and ignored
#   typo            execution.checkpointing.intervall (one l too many): the job runs without checkpoints
#   deprecated      state.backend instead of state.backend.type (near miss: a deprecation warning, the key still works)
#   healthy         a valid configuration, the job runs
# The job is the orders job of ../user-code-exception/job. PORT_OFFSET (default 40) keeps this cluster's ports apart.
set -u
export PORT_OFFSET=${PORT_OFFSET:-40}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
VER=$1; SCENARIO=$2; DEST=$3
init_run "config-$SCENARIO" "$VER" || exit 1
compile_job "$HERE/../user-code-exception/job"
MAIN="-c com.acme.orders.OrdersJob $JAR"
run_job() { act "submit the orders job"; submit $MAIN ok; sleep "${1:-20}"; }
case "$SCENARIO" in
  duration-unit)
    conf "heartbeat.timeout: 2 min"
    act "start the cluster with heartbeat.timeout: 2 min"
    as_flink "'$FH/bin/start-cluster.sh'" >> "$RUN/cli-start-cluster.out" 2>&1
    sleep 25 ;;
  interval-format)
    conf "execution.checkpointing.interval: 1.5 min"
    start_cluster 1 || { stop_cluster; exit 1; }
    run_job 5 ;;
  old-file)
    cat > "$RUN/conf/flink-conf.yaml" <<EOC
# settings kept from the 1.x deployment
execution.checkpointing.interval: 10 s
execution.checkpointing.dir: file://$RUN/ckpt
restart-strategy.type: fixed-delay
restart-strategy.fixed-delay.attempts: 10
EOC
    chown "$RUN_USER" "$RUN/conf/flink-conf.yaml"
    start_cluster 1 || { stop_cluster; exit 1; }
    run_job 20 ;;
  removed-key)
    conf "pipeline.registered-kryo-types: com.acme.orders.OrdersJob\$Order"
    start_cluster 1 || { stop_cluster; exit 1; }
    act "submit the orders job (its Order type goes through Kryo)"; submit $MAIN kryo-mutable; sleep 20 ;;
  typo)
    conf "execution.checkpointing.intervall: 10 s"
    conf "execution.checkpointing.dir: file://$RUN/ckpt"
    start_cluster 1 || { stop_cluster; exit 1; }
    run_job 20 ;;
  deprecated)
    conf "state.backend: hashmap"
    conf "execution.checkpointing.interval: 5 s"
    conf "execution.checkpointing.dir: file://$RUN/ckpt"
    start_cluster 1 || { stop_cluster; exit 1; }
    run_job 20 ;;
  healthy)
    conf "execution.checkpointing.interval: 5 s"
    conf "execution.checkpointing.dir: file://$RUN/ckpt"
    start_cluster 1 || { stop_cluster; exit 1; }
    run_job 20 ;;
esac
stop_cluster
[ "$SCENARIO" = old-file ] && cp "$RUN/conf/flink-conf.yaml" "$RUN/flink-conf.yaml.keep"
collect "$DEST"
[ "$SCENARIO" = old-file ] && { cp "$RUN/flink-conf.yaml.keep" "$DEST/flink-conf.yaml"; sed -i "s#$RUN#/data/flink/$NAME#g" "$DEST/flink-conf.yaml"; }
exit 0
