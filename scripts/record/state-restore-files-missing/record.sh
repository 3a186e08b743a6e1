#!/bin/bash
# Genuine logs for the state-restore-files-missing runbook: snapshots whose files are gone when a job restores them.
# The job is scripts/record/savepoint-state-unmapped/job (shared by the state-restore recordings).
#   BACKEND=hashmap|rocksdb scripts/record/state-restore-files-missing/record.sh <flink-version> <dest-root> <scenario>...
# scenarios:
#   metadata-deleted        a savepoint's _metadata removed, then `flink run -s <savepoint dir>`
#   savepoint-file-deleted  a savepoint's state files removed (its _metadata kept), then `flink run -s`
#   shared-file-deleted     incremental RocksDB checkpoints retained on cancel; the files under shared/ removed (as a
#                           clean-up job or an object-store lifecycle rule would), then `flink run -s <chk-N>`
#   claim-then-deleted      the cluster configured to restore in CLAIM mode: a retained checkpoint restored by a
#                           new job, which owns it and deletes it once subsumed; a second deployment restores the
#                           same path
#   near-miss-no-claim      a retained checkpoint restored in NO_CLAIM mode (the default): it stays, the job runs
#   checkpoint-relocated    a retained checkpoint's job directory moved to another directory (as a copy to a new
#                           bucket or mount would), then `flink run -s <new place>/chk-N`: its _metadata still names
#                           the state files at their old, absolute paths
#   healthy                 the job checkpoints and is cancelled
# Each scenario writes <dest-root>/<scenario>-<backend>-<version>/. PORT_OFFSET as for lib.sh.
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
source "$HERE/../savepoint-state-unmapped/restore-lib.sh"
VERSION=$1; DEST=$2; shift 2
BACKEND=${BACKEND:-hashmap}

for scenario in "$@"; do
  init_run "files-$scenario-$BACKEND" "$VERSION" || exit 1
  incremental=false; [ "$BACKEND" = rocksdb ] && incremental=true
  restore_conf "$BACKEND" "$incremental"
  inline_threshold_zero
  if [ "$scenario" = claim-then-deleted ]; then
    if [[ "$VER" == 1.1[0-9].* ]]; then conf "execution.savepoint-restore-mode: CLAIM"
    else conf "execution.state-recovery.claim-mode: CLAIM"; fi
  fi
  build_jars || exit 1
  start_cluster 1 || { stop_cluster; exit 1; }
  run_job "$JAR_POJO" --
  wait_state RUNNING 90 && wait_checkpoints 3
  case $scenario in
    metadata-deleted)
      stop_with_savepoint
      act "rm ${SAVEPOINT#file:}/_metadata"
      rm -f "${SAVEPOINT#file:}/_metadata"
      run_job "$JAR_POJO" -s "$SAVEPOINT" --
      wait_state FAILED 60 ;;
    savepoint-file-deleted)
      stop_with_savepoint
      act "rm every state file of ${SAVEPOINT#file:} except _metadata"
      find "${SAVEPOINT#file:}" -type f ! -name _metadata -print -delete >> "$RUN/actions.log"
      run_job "$JAR_POJO" -s "$SAVEPOINT" --
      wait_state FAILED 90 ;;
    shared-file-deleted)
      cancel_job
      act "rm $RUN/ckpt/$JOBID/shared/* (files of incremental checkpoints)"
      find "$RUN/ckpt/$JOBID/shared" -type f -print -delete >> "$RUN/actions.log"
      run_job "$JAR_POJO" -s "file://$CHECKPOINT" --
      wait_state FAILED 90 ;;
    claim-then-deleted)
      cancel_job; first=$CHECKPOINT
      act "restore $first (claim mode CLAIM from the configuration)"
      run_job "$JAR_POJO" -s "file://$first" --
      wait_state RUNNING 60 && wait_checkpoints 3
      ls -d "$first" >> "$RUN/actions.log" 2>&1 || act "$first no longer exists"
      flink_cli cancel "$JOBID"; wait_state CANCELED 60
      act "a second deployment restores $first again"
      run_job "$JAR_POJO" -s "file://$first" --
      wait_state FAILED 60 ;;
    checkpoint-relocated)
      cancel_job
      moved="$RUN/ckpt-moved/$JOBID"
      act "mv $RUN/ckpt/$JOBID $moved (the checkpoint relocated)"
      mkdir -p "$RUN/ckpt-moved" && mv "$RUN/ckpt/$JOBID" "$moved"
      run_job "$JAR_POJO" -s "file://$moved/${CHECKPOINT##*/}" --
      wait_state FAILED 90 ;;
    near-miss-no-claim)
      cancel_job
      act "restore $CHECKPOINT in NO_CLAIM mode (the default)"
      run_job "$JAR_POJO" -s "file://$CHECKPOINT" --
      wait_state RUNNING 60 && wait_checkpoints 3 ;;
    healthy)
      wait_checkpoints 5 ;;
  esac
  finish_run "$DEST/$scenario-$BACKEND-$VERSION"
done
