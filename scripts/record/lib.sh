#!/bin/bash
# Record genuine Flink logs of a provoked failure: a standalone session cluster from the PyPI apache-flink
# distribution, run as an unprivileged user, every port on localhost, everything it writes inside one run folder.
#
#   source scripts/record/lib.sh
#   init_run <run-name> <flink-version>        # e.g. init_run unmapped-uid 1.20.3
#   conf "key: value" ...; start_cluster 1; submit ...; wait_for ...; stop_cluster
#   collect data/<slug>/<incident>              # logs, conf and CLI output, paths made neutral
#
# Environment:
#   FLINK_LAB     where distributions live (default /opt/flink-lab; <version>/pyflink is FLINK_HOME), installed by
#                 install_flink <version> (pip install --no-deps --target of apache-flink + apache-flink-libraries)
#   PORT_OFFSET   added to the JobManager RPC port 6123 and REST port 8081, so that several clusters can run at
#                 once (default 0); every other port is chosen by the OS
#   RUN_USER      the unprivileged user the cluster runs as (default flink; root ignores chmod)
set -u
FLINK_LAB=${FLINK_LAB:-/opt/flink-lab}
PORT_OFFSET=${PORT_OFFSET:-0}
RUN_USER=${RUN_USER:-flink}
RPC_PORT=$((6123 + PORT_OFFSET))
REST_PORT=$((8081 + PORT_OFFSET))
REST=http://localhost:$REST_PORT
RECORD_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

log() { echo "[$(date +%H:%M:%S)] $*" >&2; }

install_flink() {  # install_flink <version>
  local v=$1
  [ -x "$FLINK_LAB/$v/pyflink/bin/flink" ] && return 0
  pip install -q --no-deps --no-compile --target "$FLINK_LAB/$v" "apache-flink==$v" "apache-flink-libraries==$v"
  # the sdist of older releases lacks the executable bit on its scripts
  chmod -R a+rX "$FLINK_LAB/$v"; chmod a+x "$FLINK_LAB/$v"/pyflink/bin/*
}

init_run() {  # init_run <run-name> <flink-version>
  NAME=$1; VER=$2
  id "$RUN_USER" >/dev/null 2>&1 || useradd -m "$RUN_USER"
  install_flink "$VER" || return 1
  FH=$FLINK_LAB/$VER/pyflink
  if [[ "$VER" == 2.* ]]; then CONF_NAME=config.yaml; else CONF_NAME=flink-conf.yaml; fi
  RUN=$FLINK_LAB/runs/$NAME-$VER
  if curl -s -m 2 "$REST/overview" >/dev/null 2>&1; then log "a cluster already answers on $REST; aborting"; return 1; fi
  rm -rf "$RUN"; mkdir -p "$RUN"/{conf,log,pid,tmp,ckpt,savepoints,localstate,work,job}
  cp "$FH"/conf/log4j*.properties "$FH"/conf/logback*.xml "$RUN/conf/" 2>/dev/null
  echo "localhost:$REST_PORT" > "$RUN/conf/masters"
  echo "localhost" > "$RUN/conf/workers"
  CONF=$RUN/conf/$CONF_NAME
  # Java 17 needs the --add-opens list Flink >= 1.18 ships in its default config; older releases reuse 1.20's.
  local jconf
  for jconf in "$FH/conf/config.yaml" "$FLINK_LAB/1.20.3/pyflink/conf/config.yaml"; do [ -f "$jconf" ] && break; done
  JAVA_OPTS_ALL=$(grep -m1 '^ *all: ' "$jconf" | sed 's/^ *all: //')
  cat > "$CONF" <<EOC
env.java.opts.all: $JAVA_OPTS_ALL
env.log.dir: $RUN/log
env.pid.dir: $RUN/pid
jobmanager.bind-host: localhost
jobmanager.rpc.address: localhost
jobmanager.rpc.port: $RPC_PORT
jobmanager.memory.process.size: 1600m
taskmanager.bind-host: localhost
taskmanager.host: localhost
taskmanager.numberOfTaskSlots: 1
taskmanager.memory.process.size: 1728m
parallelism.default: 1
rest.address: localhost
rest.bind-address: localhost
rest.port: $REST_PORT
io.tmp.dirs: $RUN/tmp
EOC
  chown -R "$RUN_USER:$RUN_USER" "$RUN"
  T0=$(date +%s)
  log "init $NAME flink=$VER conf=$CONF rest=$REST"
}

conf() { echo "$*" >> "$CONF"; }  # append one "key: value" line
set_workers() { : > "$RUN/conf/workers"; local i; for i in $(seq 1 "$1"); do echo localhost >> "$RUN/conf/workers"; done; }
as_flink() { su "$RUN_USER" -s /bin/bash -c "cd '$RUN' && export FLINK_CONF_DIR='$RUN/conf' && $*"; }
act() { echo "[$(date '+%Y-%m-%d %H:%M:%S')] $*" >> "$RUN/actions.log"; log "ACTION: $*"; }

# compile_job <java-source-dir> : a job jar at $JAR, compiled against this version's lib/ (and opt/ for SQL)
compile_job() {
  local src=$1 classes=$RUN/work/classes
  mkdir -p "$classes"
  javac -nowarn -d "$classes" -cp "$FH/lib/*:$FH/opt/*" $(find "$src" -name '*.java') || return 1
  JAR=$RUN/job/job.jar
  (cd "$classes" && jar cf "$JAR" .)
  chown -R "$RUN_USER:$RUN_USER" "$RUN/job" "$RUN/work"
}

start_cluster() {  # start_cluster <expected-TaskManagers>
  local n=${1:-1}
  as_flink "'$FH/bin/start-cluster.sh'" >> "$RUN/cli-start-cluster.out" 2>&1
  wait_for "REST up with $n TaskManagers" 150 "[ \"\$(curl -s -m 2 $REST/overview | jq -r .taskmanagers 2>/dev/null)\" = '$n' ]"
}

our_java_pids() { pgrep -u "$RUN_USER" -f "$RUN/" | tr '\n' ' '; }

stop_cluster() {
  local j
  for j in $(curl -s -m 5 "$REST/jobs" | jq -r '.jobs[]? | select(.status=="RUNNING" or .status=="RESTARTING" or .status=="CREATED" or .status=="INITIALIZING") | .id' 2>/dev/null); do
    act "cancel still-running job $j before stopping the cluster"
    curl -s -m 10 -X PATCH "$REST/jobs/$j?mode=cancel" >/dev/null
    wait_for "job $j terminal" 60 "curl -s -m 5 $REST/jobs/$j | jq -r .state | grep -qE 'CANCELED|FAILED|FINISHED'"
  done
  as_flink "'$FH/bin/stop-cluster.sh'" >> "$RUN/cli-stop-cluster.out" 2>&1
  local i p
  for i in $(seq 1 40); do [ -z "$(our_java_pids)" ] && break; sleep 1; done
  for p in $(our_java_pids); do log "still alive after stop-cluster: $p -> kill -9"; kill -9 "$p"; done
}

wait_for() {  # wait_for <description> <timeout-s> <shell condition>
  local desc=$1 to=$2 cond=$3 s; s=$(date +%s)
  while ! eval "$cond"; do
    if [ $(( $(date +%s) - s )) -ge "$to" ]; then log "TIMEOUT waiting for: $desc"; return 1; fi
    sleep 2
  done
  log "ok: $desc ($(( $(date +%s) - s ))s)"
}

submit() {  # submit [flink run options] -c <main class> : uses $JAR; sets JOBID (empty when the submission failed)
  local out=$RUN/cli-submit-$(date +%H%M%S).out
  as_flink "'$FH/bin/flink' run -d $* " > "$out" 2>&1
  JOBID=$(grep -oE 'JobID [0-9a-f]{32}' "$out" | tail -1 | awk '{print $2}')
  log "submitted job '$JOBID' ($*)"; tail -3 "$out" >&2
}
flink_cli() { as_flink "'$FH/bin/flink' $*" >> "$RUN/cli-flink-$(date +%H%M%S).out" 2>&1; }

job_state() { curl -s -m 5 "$REST/jobs/${1:-$JOBID}" | jq -r .state 2>/dev/null; }
ckpt_completed() { curl -s -m 5 "$REST/jobs/${1:-$JOBID}/checkpoints" | jq -r .counts.completed 2>/dev/null; }
grep_logs() { grep -l -E "$1" "$RUN"/log/*.log* 2>/dev/null; }

# collect <destination> : the run's logs, config and CLI output, with the run's paths and user made neutral
collect() {
  local out=$1
  rm -rf "$out"; mkdir -p "$out/log"
  cp "$RUN"/log/* "$out/log/" 2>/dev/null
  cp "$CONF" "$out/"
  if ls "$RUN"/cli-*.out >/dev/null 2>&1; then mkdir -p "$out/cli"; cp "$RUN"/cli-*.out "$out/cli/"; fi
  [ -f "$RUN/actions.log" ] && cp "$RUN/actions.log" "$out/"
  find "$out" -type f -size 0 -delete
  local f real_fh real_lab
  # Flink's scripts print the distribution's resolved path: FLINK_LAB may be reached through a link
  real_fh=$(readlink -f "$FH"); real_lab=$(readlink -f "$FLINK_LAB")
  for f in $(find "$out" -type f); do
    sed -i -e "s#$RUN#/data/flink/$NAME#g" -e "s#$FH#/opt/flink#g" -e "s#$real_fh#/opt/flink#g" \
      -e "s#$FLINK_LAB#/opt#g" -e "s#$real_lab#/opt#g" "$f"
  done
  chown -R "$(id -u):$(id -g)" "$out"; chmod -R a+rX,u+w "$out"
  log "collected into $out ($(du -sh "$out" | cut -f1))"
}
