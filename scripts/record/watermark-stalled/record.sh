#!/bin/bash
# Genuine REST pulls of an event-time window job whose windows never fire, and of its near misses:
#   record.sh <flink-version> <scenario> <destination>
# The jobs (job/), parallelism 2, print sink: ClickWindowJob, clicks per page per 10-second tumbling window in SQL;
# ClickCountJob, the latest click per page per 10-second tumbling window in the DataStream API.
# scenarios:
#   idle-split      the clicks are one CSV file read continuously: one split, so source subtask 1 never reads a
#                   record and holds the windows' watermark at Long.MIN_VALUE; no idle timeout: no window fires
#   idle-timeout    near miss: the same job with table.exec.source.idle-timeout = 5 s: the idle subtask is marked
#                   idle and the windows fire
#   no-interval     random clicks on both subtasks with pipeline.auto-watermark-interval: 0
#   datastream-no-interval  ClickCountJob (a periodic bounded-out-of-orderness generator) with
#                   pipeline.auto-watermark-interval: 0: both subtasks read clicks, no watermark is ever emitted
#   lagging-file    two CSV files, two splits: the second file's clicks are an hour older, so its subtask holds
#                   the windows' watermark an hour behind the other (windows fire, an hour late)
# The destination is the folder the project's own pull writes (python -m flink_runbooks pull), taken while the
# job runs; the logs come with it.
set -u
export PORT_OFFSET=${PORT_OFFSET:-200}
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
PYTHON=${PYTHON:-python3}
VER=$1; SCENARIO=$2; DEST=$(realpath -m "$3")
source "$HERE/../lib.sh"
init_run "watermark-$SCENARIO" "$VER" || exit 1
sed -i 's/^taskmanager.numberOfTaskSlots: 1$/taskmanager.numberOfTaskSlots: 2/' "$CONF"
conf "execution.target: remote"
case $SCENARIO in
  idle-split)   MODE=one-file; IDLE="" ;;
  idle-timeout) MODE=one-file; IDLE="5 s" ;;
  no-interval)  MODE=datagen; IDLE=""; conf "pipeline.auto-watermark-interval: 0" ;;
  lagging-file) MODE=one-file; IDLE="" ;;
  datastream-no-interval) MODE=datastream; IDLE=""; conf "pipeline.auto-watermark-interval: 0" ;;
  *) echo "unknown scenario $SCENARIO" >&2; exit 2 ;;
esac
# 120 clicks, one a second from 2026-03-14 02:00:00, on 3 pages: one file, so one split
mkdir -p "$RUN/work/clicks"
for i in $(seq 0 119); do
  printf 'page-%d,%d,2026-03-14 02:%02d:%02d\n' $((i % 3)) $((1000 + i)) $((i / 60)) $((i % 60))
done > "$RUN/work/clicks/clicks-0.csv"
if [ "$SCENARIO" = lagging-file ]; then
  for i in $(seq 0 119); do
    printf 'page-%d,%d,2026-03-14 01:%02d:%02d\n' $((i % 3)) $((2000 + i)) $((i / 60)) $((i % 60))
  done > "$RUN/work/clicks/clicks-1.csv"
fi
chown -R "$RUN_USER:$RUN_USER" "$RUN/work"
compile_job "$HERE/job" || exit 1
start_cluster 1 || { stop_cluster; exit 1; }
if [ "$MODE" = datastream ]; then
  act "submit ClickCountJob"
  submit -c com.acme.wm.ClickCountJob "$JAR"
else
  act "submit ClickWindowJob ($MODE, idle timeout '${IDLE:-none}')"
  submit -c com.acme.wm.ClickWindowJob "$JAR" "$MODE" "$RUN/work/clicks" "'$IDLE'"
fi
wait_for "job RUNNING" 60 '[ "$(job_state)" = RUNNING ]'
sleep 40
act "pull the running job's REST documents"
rm -rf "$DEST"
PYTHONPATH=$REPO/lib "$PYTHON" -m flink_runbooks pull "$REST" --out "$DEST" --job "$JOBID"
stop_cluster
for f in $(find "$DEST" -type f); do
  sed -i -e "s#$RUN#/data/flink/$NAME#g" -e "s#$FH#/opt/flink#g" -e "s#$FLINK_LAB#/opt#g" "$f"
done
cp "$RUN/actions.log" "$DEST/actions.log"
sed -i -e "s#$RUN#/data/flink/$NAME#g" "$DEST/actions.log"
exit 0
