#!/bin/bash
# Genuine logs of a source that cannot deserialize a record: record.sh <flink-version> <scenario> <dest>
#   json-poison      OrderFeedTotalsJob reads an order feed (filesystem, format json) whose line 1043 was cut off
#                    mid-record; every restart reads the same line again, until the restarts run out
#   csv-poison       the same over a csv feed whose line 1043 has the amount "n/a"
#   json-skipped     near miss: the json feed with 'json.ignore-parse-errors' = 'true': the job finishes, the cut-off
#                    line is dropped without a word
#   healthy          the json feed without the bad line: the job finishes
# PORT_OFFSET (default 70) keeps this cluster's ports apart from others'.
set -u
export PORT_OFFSET=${PORT_OFFSET:-70}
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
VER=$1; SCENARIO=$2; DEST=$(realpath -m "$3")
init_run "deser-$SCENARIO" "$VER" || exit 1
conf "restart-strategy.type: fixed-delay"
conf "restart-strategy.fixed-delay.attempts: 2"
conf "restart-strategy.fixed-delay.delay: 2 s"
FEED=$RUN/job/order-feed
mkdir -p "$FEED"
FORMAT=json; EXTRA=""
case "$SCENARIO" in csv-*) FORMAT=csv ;; esac
[ "$SCENARIO" = json-skipped ] && EXTRA=ignore-parse-errors
python3 - "$FEED/orders-2026-11-28.$FORMAT" "$FORMAT" "$SCENARIO" <<'PY'
import json, sys
path, fmt, scenario = sys.argv[1:4]
with open(path, "w") as out:
    for n in range(1, 2001):
        order = {"order_id": 100000 + n, "customer": f"c-{n % 37:02d}", "amount": round(5 + (n * 7919 % 9000) / 100, 2)}
        if n == 1043 and scenario != "healthy":
            line = ('{"order_id": %d, "customer": "c-07", "amount": 1' % order["order_id"] if fmt == "json"
                    else '%d,c-07,n/a' % order["order_id"])
        else:
            line = json.dumps(order) if fmt == "json" else f'{order["order_id"]},{order["customer"]},{order["amount"]}'
        out.write(line + "\n")
PY
chown -R "$RUN_USER:$RUN_USER" "$RUN/job"
compile_job "$HERE/job"
start_cluster 1 || { stop_cluster; exit 1; }
act "submit OrderFeedTotalsJob over $FEED (format $FORMAT${EXTRA:+, $EXTRA})"
submit -c com.acme.orders.OrderFeedTotalsJob "$JAR" "$FEED" "$FORMAT" $EXTRA
[ -n "$JOBID" ] && wait_for "job terminal" 150 "job_state | grep -qE 'FAILED|FINISHED'"
stop_cluster
collect "$DEST"
exit 0
