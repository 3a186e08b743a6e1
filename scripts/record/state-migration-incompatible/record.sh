#!/bin/bash
# Genuine logs for the state-migration-incompatible runbook: a savepoint restored into a job whose key or state type
# changed. The job is scripts/record/savepoint-state-unmapped/job (shared by the state-restore recordings).
#   BACKEND=hashmap|rocksdb scripts/record/state-migration-incompatible/record.sh <flink-version> <dest-root> <scenario>...
# scenarios:
#   key-changed           keyBy String -> Integer
#   state-type-changed    ValueState<Long> -> ValueState<String> (same state name)
#   pojo-to-kryo          the state class loses its no-argument constructor: POJO -> Kryo
#   near-miss-pojo-evolved  the POJO state class gains a field: Flink migrates it (schema evolution)
#   healthy               the unchanged job restored from its savepoint
# Each scenario writes <dest-root>/<scenario>-<backend>-<version>/. PORT_OFFSET as for lib.sh.
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
source "$HERE/../savepoint-state-unmapped/restore-lib.sh"
VERSION=$1; DEST=$2; shift 2
BACKEND=${BACKEND:-hashmap}

for scenario in "$@"; do
  init_run "migration-$scenario-$BACKEND" "$VERSION" || exit 1
  restore_conf "$BACKEND"
  build_jars || exit 1
  start_cluster 1 || { stop_cluster; exit 1; }
  case $scenario in
    key-changed) before=("$JAR_POJO" -- --key string); after=("$JAR_POJO" -- --key int) ;;
    state-type-changed) before=("$JAR_POJO" -- --state long); after=("$JAR_POJO" -- --state string) ;;
    pojo-to-kryo) before=("$JAR_POJO" -- --state totals); after=("$JAR_KRYO" -- --state totals) ;;
    near-miss-pojo-evolved) before=("$JAR_POJO" -- --state totals); after=("$JAR_EVOLVED" -- --state totals) ;;
    healthy) before=("$JAR_POJO" --); after=("$JAR_POJO" --) ;;
  esac
  run_job "${before[@]}"
  wait_state RUNNING 90 && wait_checkpoints 2 && stop_with_savepoint
  act "restore the savepoint into the changed job (${after[*]})"
  run_job "${after[0]}" -s "$SAVEPOINT" "${after[@]:1}"
  case $scenario in
    near-miss-*|healthy) wait_state RUNNING 60 && wait_checkpoints 3 ;;
    *) wait_state FAILED 90 ;;
  esac
  finish_run "$DEST/$scenario-$BACKEND-$VERSION"
done
