#!/bin/bash
# Genuine logs for the savepoint-state-unmapped runbook: a savepoint taken from one job, restored into a changed one.
#   scripts/record/savepoint-state-unmapped/record.sh <flink-version> <dest-root> <scenario>...
# scenarios:
#   uid-renamed          the counter's uid renamed (counter -> counter-v2) between savepoint and restore
#   no-uids-changed      a job without uids gets one more operator: every auto-generated id downstream changes
#   sql-plan-changed     a SQL aggregation gets a WHERE clause: the plan, and so its operator ids, change
#   rest-ignores-config  ignore-unclaimed-state set in the cluster's config, the job submitted through the REST API
#                        with a savepoint path and "allowNonRestoredState": false, as the web UI's submit form sends
#                        it (its checkbox unticked): the request's flag wins over the configuration
#   near-miss-config-allows  the same REST submission without the field: the configuration's setting applies and
#                        the unmapped state is skipped
#   near-miss-allowed    the renamed job restored with --allowNonRestoredState on purpose
#   healthy              the unchanged job restored from its savepoint
# Each scenario writes <dest-root>/<scenario>-<version>/. PORT_OFFSET as for lib.sh.
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
source "$HERE/restore-lib.sh"
VERSION=$1; DEST=$2; shift 2

savepoint_of() {  # savepoint_of <jar> [program args] : runs the job until two checkpoints, stops it with a savepoint
  local jar=$1; shift
  run_job "$jar" -- "$@"
  wait_state RUNNING 90 && wait_checkpoints 2 && stop_with_savepoint
}

for scenario in "$@"; do
  init_run "unmapped-$scenario" "$VERSION" || exit 1
  restore_conf hashmap
  [[ "$scenario" == rest-ignores-config || "$scenario" == near-miss-config-allows ]] && if [[ "$VER" == 1.1[0-9].* ]]; then conf "execution.savepoint.ignore-unclaimed-state: true"
                                           else conf "execution.state-recovery.ignore-unclaimed-state: true"; fi
  build_jars || exit 1
  start_cluster 1 || { stop_cluster; exit 1; }
  case $scenario in
    uid-renamed)
      savepoint_of "$JAR_POJO"
      act "restore into the job whose counter uid is now counter-v2"
      run_job "$JAR_POJO" -s "$SAVEPOINT" -- --counter-uid counter-v2
      wait_state FAILED 60 ;;
    no-uids-changed)
      savepoint_of "$JAR_POJO" --no-uids
      act "restore into the job without uids that now filters before keyBy"
      run_job "$JAR_POJO" -s "$SAVEPOINT" -- --no-uids --extra-filter
      wait_state FAILED 60 ;;
    sql-plan-changed)
      savepoint_of "$JAR_SQL"
      act "restore into the SQL job with a WHERE clause"
      run_job "$JAR_SQL" -s "$SAVEPOINT" -- --filtered
      wait_state FAILED 60 ;;
    rest-ignores-config|near-miss-config-allows)
      savepoint_of "$JAR_POJO"
      if [ "$scenario" = rest-ignores-config ]; then allow='false'; else allow='null'; fi
      act "upload the renamed job through the REST API and run it with savepointPath (allowNonRestoredState: $allow)"
      jarid=$(curl -s -m 30 -X POST -F "jarfile=@$JAR_POJO" "$REST/jars/upload" | jq -r .filename | xargs basename)
      body=$(jq -n --arg sp "$SAVEPOINT" --arg main "$MAIN" --argjson allow "$allow" \
             '{entryClass: $main, programArgsList: ["--counter-uid", "counter-v2"], savepointPath: $sp}
              + (if $allow == null then {} else {allowNonRestoredState: $allow} end)')
      echo "POST /jars/$jarid/run $body" > "$RUN/cli-rest-run.out"
      curl -s -m 60 -X POST -H 'Content-Type: application/json' -d "$body" "$REST/jars/$jarid/run" >> "$RUN/cli-rest-run.out" 2>&1
      echo >> "$RUN/cli-rest-run.out"
      JOBID=$(curl -s -m 5 "$REST/jobs" | jq -r '.jobs[] | select(.status != "FINISHED") | .id' | head -1)
      if [ "$scenario" = rest-ignores-config ]; then wait_state FAILED 60; else wait_state RUNNING 60 && wait_checkpoints 2; fi ;;
    near-miss-allowed)
      savepoint_of "$JAR_POJO"
      act "restore into the renamed job with --allowNonRestoredState"
      run_job "$JAR_POJO" -s "$SAVEPOINT" -n -- --counter-uid counter-v2
      wait_state RUNNING 60 && wait_checkpoints 2 ;;
    healthy)
      savepoint_of "$JAR_POJO"
      act "restore the unchanged job from its savepoint"
      run_job "$JAR_POJO" -s "$SAVEPOINT" --
      wait_state RUNNING 60 && wait_checkpoints 2 ;;
  esac
  finish_run "$DEST/$scenario-$VERSION"
done
