#!/bin/bash
# Genuine logs for the keygroup-out-of-range runbook: a keyed counter at parallelism 2 whose key is not deterministic.
#   scripts/record/keygroup-out-of-range/record.sh <flink-version> <dest-root> <scenario>...
# scenarios:
#   random-key-selector      the key selector returns a random customer: the receiving subtask computes another key
#   identity-hash-key        the key is a class without hashCode/equals: every instance hashes differently
#   enum-in-key-two-taskmanagers  a POJO key whose hashCode includes an enum, on two TaskManagers of one slot each:
#                            the enum's identity hash differs between the two JVMs
#   near-miss-deterministic-key  the same job keyed by a String: it runs and checkpoints
# Each scenario writes <dest-root>/<scenario>-<version>/. PORT_OFFSET as for lib.sh.
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
source "$HERE/../savepoint-state-unmapped/restore-lib.sh"
VERSION=$1; DEST=$2; shift 2

for scenario in "$@"; do
  init_run "keygroup-$scenario" "$VERSION" || exit 1
  restore_conf hashmap
  tms=1
  if [ "$scenario" = enum-in-key-two-taskmanagers ]; then tms=2; set_workers 2
  else sed -i "s/^taskmanager.numberOfTaskSlots: 1\$/taskmanager.numberOfTaskSlots: 2/" "$CONF"; fi  # two subtasks
  compile_job "$HERE/job" || exit 1
  start_cluster $tms || { stop_cluster; exit 1; }
  case $scenario in
    random-key-selector) key=random ;;
    identity-hash-key) key=identity ;;
    enum-in-key-two-taskmanagers) key=enum ;;
    near-miss-deterministic-key) key=string ;;
  esac
  act "run the keyed counter at parallelism 2 with --key $key"
  submit -p 2 -c com.example.keys.KeyGroupJob "$JAR" --key $key
  if [ "$scenario" = near-miss-deterministic-key ]; then wait_state RUNNING 60 && wait_checkpoints 2
  else wait_state FAILED 90; fi
  finish_run "$DEST/$scenario-$VERSION"
done
