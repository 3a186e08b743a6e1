#!/bin/bash
# Genuine logs for the pyflink-udf-failure runbook: a Table API job whose Python scalar function computes unit
# prices (job/orders_job.py), run on a standalone cluster with the Python worker's dependencies from a virtualenv.
#   PYFLINK_VENV=<venv with apache-flink==<version>> scripts/record/pyflink-udf-failure/record.sh <flink-version> <dest-root> <scenario>...
# scenarios:
#   udf-raises-process      an order line with quantity 0: the function raises ZeroDivisionError in the Beam worker
#   udf-raises-thread       the same with python.execution-mode: thread (the function runs in the TaskManager through
#                           PEMJA; python.pythonpath names the virtualenv's site-packages for the embedded interpreter)
#   thread-mode-venv-not-on-path  thread mode without python.pythonpath: the interpreter embedded in the TaskManager
#                           does not see the virtualenv's packages and cannot import pemja
#   module-missing          the function uses a module found on the client's PYTHONPATH, not shipped (no python.files)
#   bad-python-executable   python.executable names an interpreter the TaskManager host does not have
#   near-miss-udf-ok        the same job without the zero quantity: it runs and finishes
#   worker-killed           a slow function; the Python worker process is killed (SIGKILL, as the kernel's OOM killer
#                           or a container limit would) while it runs
#   near-miss-client-module-missing  the job needs order_rules but the client does not have it either: the job script
#                           fails where it is submitted (no Python worker ever starts)
# Each scenario writes <dest-root>/<scenario>-<version>/. PORT_OFFSET as for lib.sh. The virtualenv must be readable
# by the user the cluster runs as (made from a system interpreter, not one under /root).
HERE=$(cd "$(dirname "$0")" && pwd)
source "$HERE/../lib.sh"
source "$HERE/../savepoint-state-unmapped/restore-lib.sh"
VERSION=$1; DEST=$2; shift 2
VENV=${PYFLINK_VENV:?set PYFLINK_VENV to a virtualenv with apache-flink==$VERSION installed}

descendants() { local p; for p in $(pgrep -P "$1"); do echo "$p"; descendants "$p"; done; }
run_python_worker() {  # the Python worker process under this run's TaskManager
  local jvm p
  for jvm in $(our_java_pids); do
    for p in $(descendants "$jvm"); do
      grep -qa beam_boot "/proc/$p/cmdline" 2>/dev/null && { echo "$p"; return; }
    done
  done
}

for scenario in "$@"; do
  init_run "pyflink-$scenario" "$VERSION" || exit 1
  if [[ "$VER" == 1.1[0-9].* ]]; then conf "restart-strategy: fixed-delay"; else conf "restart-strategy.type: fixed-delay"; fi
  conf "restart-strategy.fixed-delay.attempts: 2"
  conf "restart-strategy.fixed-delay.delay: 2 s"
  conf "python.client.executable: $VENV/bin/python"
  if [ "$scenario" = bad-python-executable ]; then conf "python.executable: /usr/local/bin/python3.8"
  else conf "python.executable: $VENV/bin/python"; fi
  case $scenario in
    udf-raises-thread) conf "python.execution-mode: thread"
                       conf "python.pythonpath: $(ls -d "$VENV"/lib/python3*/site-packages)" ;;
    thread-mode-venv-not-on-path) conf "python.execution-mode: thread" ;;
  esac
  cp "$HERE/job/orders_job.py" "$RUN/job/"; cp -r "$HERE/job/client-lib" "$RUN/job/"
  chown -R "$RUN_USER:$RUN_USER" "$RUN/job"
  start_cluster 1 || { stop_cluster; exit 1; }
  args=""; env=""
  case $scenario in
    udf-raises-*|thread-mode-*) args="--lines zero-quantity" ;;
    module-missing) args="--rules on-client-only"; env="PYTHONPATH=$RUN/job/client-lib" ;;
    near-miss-client-module-missing) args="--rules on-client-only" ;;
    worker-killed) args="--lines slow" ;;
  esac
  act "run orders_job.py $args${env:+ with $env on the client}"
  out=$RUN/cli-submit-$(date +%H%M%S).out
  as_flink "${env:+export $env && }'$FH/bin/flink' run -d -py '$RUN/job/orders_job.py' $args" > "$out" 2>&1
  JOBID=$(grep -oE 'JobID [0-9a-f]{32}' "$out" | tail -1 | awk '{print $2}')
  log "submitted job '$JOBID'"; tail -3 "$out" >&2
  if [ "$scenario" = worker-killed ]; then
    wait_state RUNNING 60
    # only a process of this run's TaskManager (other clusters may run Python workers as the same user)
    wait_for "the Python worker process" 60 "[ -n \"\$(run_python_worker)\" ]"
    sleep 5
    worker=$(run_python_worker)
    act "kill -9 the Python worker process $worker"
    kill -9 "$worker"
    wait_for "job $JOBID ended" 180 "job_state | grep -qE 'FAILED|FINISHED'"
  fi
  if [ "$scenario" = near-miss-udf-ok ]; then wait_state FINISHED 120
  elif [ "$scenario" = worker-killed ]; then :
  elif [ -n "$JOBID" ]; then wait_state FAILED 180; fi
  finish_run "$DEST/$scenario-$VERSION"
  # the virtualenv's place on this machine and the other paths of the recorder, made neutral like the run's
  bash "$HERE/neutralise.sh" "$DEST/$scenario-$VERSION" "$VENV" "$FH" "$FLINK_LAB"
done
