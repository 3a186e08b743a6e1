#!/bin/bash
# Helpers shared by the state-restore recordings (savepoint-state-unmapped, state-migration-incompatible,
# state-restore-files-missing): one job whose uids, key type and state type are chosen on its command line
# (job/common/RestoreJob.java, with the state class Totals as a POJO, as a non-POJO, or as an evolved POJO), and a
# SQL job (job/sql). Source after scripts/record/lib.sh.
RESTORE_JOB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/job
MAIN=com.example.restore.RestoreJob

# restore_conf <hashmap|rocksdb> [incremental] : state backend, checkpoint/savepoint dirs, retained checkpoints, a
# short restart budget so that a restore failure ends the job, in the key names of the recorded version
restore_conf() {
  local backend=$1 incremental=${2:-false}
  if [[ "$VER" == 1.1[0-9].* ]]; then
    conf "state.backend: $backend"
    conf "state.checkpoints.dir: file://$RUN/ckpt"
    conf "state.savepoints.dir: file://$RUN/savepoints"
    conf "state.backend.incremental: $incremental"
    conf "restart-strategy: fixed-delay"
  else
    conf "state.backend.type: $backend"
    conf "execution.checkpointing.dir: file://$RUN/ckpt"
    conf "execution.checkpointing.savepoint-dir: file://$RUN/savepoints"
    conf "execution.checkpointing.incremental: $incremental"
    conf "restart-strategy.type: fixed-delay"
  fi
  conf "restart-strategy.fixed-delay.attempts: 2"
  conf "restart-strategy.fixed-delay.delay: 2 s"
  conf "execution.checkpointing.interval: 6 s"
  conf "execution.checkpointing.externalized-checkpoint-retention: RETAIN_ON_CANCELLATION"
}

# inline_threshold_zero : every state handle in its own file (the job's state is small enough to be inlined into
# _metadata otherwise, and then there would be no file to lose)
inline_threshold_zero() {
  if [[ "$VER" == 1.1[0-9].* ]]; then conf "state.storage.fs.memory-threshold: 0 b"
  else conf "execution.checkpointing.data-inline-threshold: 0 b"; fi
}

# build_jars : $JAR_POJO (Totals a POJO), $JAR_KRYO (Totals without a no-argument constructor), $JAR_EVOLVED (the
# POJO with one more field), $JAR_SQL (the SQL job)
build_jars() {
  local variant tmp cache=$FLINK_LAB/runs/restore-jars-$VER
  JAR_POJO=$RUN/job/job-pojo.jar; JAR_KRYO=$RUN/job/job-kryo.jar; JAR_EVOLVED=$RUN/job/job-pojo-evolved.jar
  JAR_SQL=$RUN/job/job-sql.jar
  if [ -f "$cache/job-sql.jar" ] && [ -z "$(find "$RESTORE_JOB_DIR" -newer "$cache/job-sql.jar" -name '*.java')" ]; then
    cp "$cache"/*.jar "$RUN/job/"; chown -R "$RUN_USER:$RUN_USER" "$RUN/job"; return 0
  fi
  for variant in pojo kryo pojo-evolved sql; do
    tmp=$RUN/work/src-$variant; mkdir -p "$tmp"
    cp "$RESTORE_JOB_DIR"/common/*.java "$tmp/"
    if [ "$variant" = sql ]; then cp "$RESTORE_JOB_DIR"/pojo/*.java "$RESTORE_JOB_DIR"/sql/*.java "$tmp/"
    else cp "$RESTORE_JOB_DIR/$variant"/*.java "$tmp/"; fi
    rm -rf "$RUN/work/classes"
    compile_job "$tmp" || return 1
    cp "$JAR" "$RUN/job/job-$variant.jar"
  done
  mkdir -p "$cache" && cp "$RUN"/job/job-*.jar "$cache/"
  chown -R "$RUN_USER:$RUN_USER" "$RUN/job"
}

# run_job <jar> [flink run options] -- [program args] : submits in detached mode, sets JOBID
run_job() {
  local jar=$1; shift
  local opts=() prog=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do opts+=("$1"); shift; done
  [ "${1:-}" = "--" ] && shift
  prog=("$@")
  local main=$MAIN; [ "$jar" = "$JAR_SQL" ] && main=com.example.restore.SqlCounter
  submit "${opts[*]}" -c "$main" "$jar" "${prog[*]}"
  # a restore refused while the JobMaster starts fails the submission itself: take the job id from the REST API
  [ -z "$JOBID" ] && JOBID=$(curl -s -m 5 "$REST/jobs/overview" | jq -r '.jobs | sort_by(."start-time") | last | .jid')
  log "job id: $JOBID"
}

wait_checkpoints() {  # wait_checkpoints <n> : at least n completed checkpoints of $JOBID
  wait_for "$1 completed checkpoints of $JOBID" 120 "[ \"\$(ckpt_completed)\" -ge $1 ] 2>/dev/null"
}

wait_state() {  # wait_state <regex> [timeout]
  wait_for "job $JOBID in state $1" "${2:-90}" "job_state | grep -qE '$1'"
}

# stop_with_savepoint : stops $JOBID with a savepoint, sets SAVEPOINT (the path the CLI printed)
stop_with_savepoint() {
  local out=$RUN/cli-stop-$(date +%H%M%S).out
  act "flink stop --savepointPath file://$RUN/savepoints $JOBID"
  as_flink "'$FH/bin/flink' stop --savepointPath file://$RUN/savepoints $JOBID" > "$out" 2>&1
  SAVEPOINT=$(grep -oE 'Savepoint completed\. Path: \S+' "$out" | awk '{print $4}')
  log "savepoint: $SAVEPOINT"
  wait_state 'FINISHED|CANCELED' 60
  [ -n "$SAVEPOINT" ]
}

# cancel_job : cancels $JOBID (retained checkpoints stay), sets CHECKPOINT to its newest chk-N directory
cancel_job() {
  act "flink cancel $JOBID"
  flink_cli cancel "$JOBID"
  wait_state 'CANCELED' 60
  CHECKPOINT=$(ls -d "$RUN/ckpt/$JOBID"/chk-* 2>/dev/null | sort -t- -k2 -n | tail -1)
  log "retained checkpoint: $CHECKPOINT"
  [ -n "$CHECKPOINT" ]
}

finish_run() {  # finish_run <destination> : stop the cluster, check nothing is left, collect
  stop_cluster
  local left; left=$(our_java_pids)
  [ -n "$left" ] && log "java processes of the run still alive: $left"
  rm -rf "$RUN/work"
  collect "$1"
  find "$1" -type f -size 0 -delete
}
