#!/bin/bash
# Genuine logs of SQL queries whose changes a sink or an operator cannot consume:
#   record.sh <flink-version> <scenario> <dest>
# The job is OrderReportJob (job/), a Table API program submitted with flink run over a bounded datagen table; its
# first argument is the scenario:
#   totals-to-files         regular GROUP BY into an append-only filesystem table: the planner refuses it
#   left-join-to-files      orders LEFT JOIN customers into the filesystem table
#   top3-to-files           top 3 orders per customer (ROW_NUMBER) into the filesystem table
#   latest-to-files         latest order per customer (ROW_NUMBER ... ORDER BY proctime DESC) into the filesystem table
#   over-after-totals       an OVER window ordered by processing time over the running totals
#   totals-to-upsert        near miss: the same GROUP BY into a table with a PRIMARY KEY on the print connector,
#                           which consumes changes: planned, runs and finishes
#   window-totals-to-files  near miss: totals per 10-second tumbling window into the filesystem table: finishes
# PORT_OFFSET (default 400) keeps this cluster's ports apart.
set -u
export PORT_OFFSET=${PORT_OFFSET:-400}
HERE=$(cd "$(dirname "$0")" && pwd)
VER=$1; SCENARIO=$2; DEST=$(realpath -m "$3")
source "$HERE/../lib.sh"
init_run "sql-$SCENARIO" "$VER" || exit 1
conf "execution.target: remote"
start_cluster 1 || { stop_cluster; exit 1; }
compile_job "$HERE/job"
act "submit OrderReportJob ($SCENARIO)"
submit -c com.acme.sql.OrderReportJob "$JAR" "$SCENARIO" "$RUN/work/out"
[ -n "$JOBID" ] && wait_for "job terminal" 120 "job_state | grep -qE 'FAILED|FINISHED'"
stop_cluster
collect "$DEST"
exit 0
