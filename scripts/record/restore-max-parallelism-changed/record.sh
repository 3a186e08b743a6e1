#!/bin/bash
# Genuine logs for the restore-max-parallelism-changed runbook: a savepoint taken with one maximum parallelism,
# restored into a job with another one.
#   scripts/record/restore-max-parallelism-changed/record.sh <flink-version> <dest-root> <scenario>...
# scenarios:
#   config-max-changed     savepoint with the derived default (128), restore with -Dpipeline.max-parallelism=256
#   code-max-changed       savepoint of the job with env.setMaxParallelism(64), restored with setMaxParallelism(32)
#   parallelism-above-snapshot-max  savepoint at parallelism 1 (derived max 128), restore at parallelism 200: the
#                          new default (512) would be rescaled to the snapshot's 128, but 200 subtasks cannot share
#                          128 key groups
#   parallelism-above-max  no snapshot: the job's code sets env.setMaxParallelism(2) and is submitted with -p 4
#   near-miss-same-max     savepoint with the derived default, restore with pipeline.max-parallelism: 128 pinned
#   near-miss-default-rescaled  savepoint with -Dpipeline.max-parallelism=64, restore at parallelism 2 with the
#                          maximum unset (the derived default would be 128): Flink adopts the snapshot's 64
# Each scenario writes <dest-root>/<scenario>-<version>/. PORT_OFFSET as for lib.sh.
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
source "$HERE/../savepoint-state-unmapped/restore-lib.sh"
VERSION=$1; DEST=$2; shift 2

build_job() {
  compile_job "$HERE/job" || return 1
  JAR_MAX=$RUN/job/max-parallelism.jar; mv "$JAR" "$JAR_MAX"
}

submit_max() {  # submit_max [flink run options] -- [program args]
  local opts=() prog=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do opts+=("$1"); shift; done
  [ "${1:-}" = "--" ] && shift
  prog=("$@")
  submit "${opts[*]}" -c com.example.maxpar.MaxParallelismJob "$JAR_MAX" "${prog[*]}"
  [ -z "$JOBID" ] && JOBID=$(curl -s -m 5 "$REST/jobs/overview" | jq -r '.jobs | sort_by(."start-time") | last | .jid')
  log "job id: $JOBID"
}

savepoint_of() {  # savepoint_of [flink run options] -- [program args]
  submit_max "$@"
  wait_state RUNNING 90 && wait_checkpoints 2 && stop_with_savepoint
}

for scenario in "$@"; do
  init_run "maxpar-$scenario" "$VERSION" || exit 1
  restore_conf hashmap
  [ "$scenario" = near-miss-default-rescaled ] && sed -i "s/^taskmanager.numberOfTaskSlots: 1\$/taskmanager.numberOfTaskSlots: 2/" "$CONF"
  build_job || exit 1
  start_cluster 1 || { stop_cluster; exit 1; }
  case $scenario in
    config-max-changed)
      savepoint_of --
      act "restore with -Dpipeline.max-parallelism=256"
      submit_max -s "$SAVEPOINT" -Dpipeline.max-parallelism=256 --
      wait_state FAILED 60 ;;
    code-max-changed)
      savepoint_of -- --max-parallelism 64
      act "restore into the job that now calls env.setMaxParallelism(32)"
      submit_max -s "$SAVEPOINT" -- --max-parallelism 32
      wait_state FAILED 60 ;;
    parallelism-above-snapshot-max)
      savepoint_of --
      act "restore at parallelism 200"
      submit_max -s "$SAVEPOINT" -p 200 --
      wait_state FAILED 60 ;;
    parallelism-above-max)
      act "submit the job that sets env.setMaxParallelism(2) with -p 4"
      submit_max -p 4 -- --max-parallelism 2
      wait_state FAILED 60 ;;
    near-miss-same-max)
      savepoint_of --
      act "restore with -Dpipeline.max-parallelism=128, the maximum the savepoint was taken with"
      submit_max -s "$SAVEPOINT" -Dpipeline.max-parallelism=128 --
      wait_state RUNNING 60 && wait_checkpoints 2 ;;
    near-miss-default-rescaled)
      savepoint_of -Dpipeline.max-parallelism=64 --
      act "restore at parallelism 2 without a maximum parallelism"
      submit_max -s "$SAVEPOINT" -p 2 --
      wait_state RUNNING 60 && wait_checkpoints 2 ;;
  esac
  finish_run "$DEST/$scenario-$VERSION"
done
