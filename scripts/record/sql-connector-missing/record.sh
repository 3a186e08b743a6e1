#!/bin/bash
# Genuine logs of SQL tables whose connector factory is not on the classpath: record.sh <flink-version> <scenario> <dest>
#   client-kafka      the SQL client (sql-client.sh -f) runs sql/kafka.sql: 'connector' = 'kafka', no Kafka jar. The
#                     PyPI distribution has no SQL gateway jar, so the client itself cannot start (NoClassDefFoundError
#                     of a Flink class): a class-loading incident, not this runbook's
#   job-kafka         a Table API program (OrderTotalsJob) submitted with flink run, 'connector' = 'kafka'
#   job-datagenn      the same program with the identifier misspelled ('datagenn')
#   job-option        near miss: the connector is there, one of its options is misspelled ('rows-per-sec')
#   job-ok            healthy: OrderTotalsJob with datagen, finishes
# (client-datagenn, client-option and client-ok are kept as names for the job-* runs.)
# PORT_OFFSET (default 30) keeps this cluster's ports apart.
set -u
export PORT_OFFSET=${PORT_OFFSET:-30}
HERE=$(cd "$(dirname "$0")" && pwd)
VER=$1; SCENARIO=$2; DEST=$(realpath -m "$3")
source "$HERE/../lib.sh"
init_run "sql-$SCENARIO" "$VER" || exit 1
cp "$HERE"/sql/*.sql "$RUN/job/"; chown -R "$RUN_USER:$RUN_USER" "$RUN/job"
conf "execution.target: remote"
start_cluster 1 || { stop_cluster; exit 1; }
sql_client() {  # sql_client <file.sql>
  act "sql-client.sh -f $1"
  as_flink "'$FH/bin/sql-client.sh' -f '$RUN/job/$1'" > "$RUN/cli-sql-client-$(date +%H%M%S).out" 2>&1
}
case "$SCENARIO" in
  client-kafka) sql_client kafka.sql ;;
  *)
    case "$SCENARIO" in
      job-kafka) ARGS=kafka ;;
      job-datagenn|client-datagenn) ARGS=datagenn ;;
      job-option|client-option) ARGS="datagen misspelled-option" ;;
      *) ARGS=datagen ;;
    esac
    compile_job "$HERE/job"
    act "submit OrderTotalsJob ($ARGS)"
    submit -c com.acme.sql.OrderTotalsJob "$JAR" $ARGS
    [ -n "$JOBID" ] && wait_for "job terminal" 90 "job_state | grep -qE 'FAILED|FINISHED'" ;;
esac
stop_cluster
collect "$DEST"
exit 0
