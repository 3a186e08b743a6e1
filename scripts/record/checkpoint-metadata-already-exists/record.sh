#!/bin/bash
# Genuine logs for the checkpoint-metadata-already-exists runbook: two jobs checkpointing into one directory.
# The job is scripts/record/savepoint-state-unmapped/job (shared by the state recordings).
#   scripts/record/checkpoint-metadata-already-exists/record.sh <flink-version> <dest-root> <scenario>...
# scenarios:
#   shared-dir-without-job-subdir  job-id sub-directories turned off (create-subdir: false, Flink >= 1.19) and two
#                                  jobs submitted one after the other into the same checkpoint directory: both write
#                                  <dir>/chk-N, and the second one's chk-N/_metadata already exists (three
#                                  checkpoints retained, so the first job's older chk-N are still there)
# Each scenario writes <dest-root>/<scenario>-<version>/. PORT_OFFSET as for lib.sh.
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
source "$HERE/../savepoint-state-unmapped/restore-lib.sh"
VERSION=$1; DEST=$2; shift 2

for scenario in "$@"; do
  init_run "metadata-$scenario" "$VERSION" || exit 1
  restore_conf hashmap false
  case $scenario in
    shared-dir-without-job-subdir)
      if [[ "$VER" == 1.19.* ]]; then conf "state.checkpoints.create-subdir: false"
      else conf "execution.checkpointing.create-subdir: false"; fi
      if [[ "$VER" == 1.19.* ]]; then conf "state.checkpoints.num-retained: 3"
      else conf "execution.checkpointing.num-retained: 3"; fi ;;
  esac
  build_jars || exit 1
  set_workers 2
  start_cluster 2 || { stop_cluster; exit 1; }
  run_job "$JAR_POJO" --
  first=$JOBID
  act "a second job into the same checkpoint directory"
  run_job "$JAR_POJO" --
  second=$JOBID
  wait_state RUNNING 90
  sleep 40
  JOBID=$first; log "first job $first: $(job_state)"; JOBID=$second; log "second job $second: $(job_state)"
  ls -R "$RUN/ckpt" >> "$RUN/actions.log" 2>&1
  finish_run "$DEST/$scenario-$VERSION"
done
