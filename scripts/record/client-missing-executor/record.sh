#!/bin/bash
# Genuine output of programs that find no PipelineExecutorFactory: record.sh <flink-version> <scenario> <dest>
# The program (OrderCountJob) is started with plain `java`, as an IDE or `java -jar` starts it, against Flink's own
# classes split the way Maven modules split them: Flink without flink-clients (its distribution jar with the
# org.apache.flink.client, yarn and kubernetes packages and their executor service files removed) and, where the
# scenario has it, flink-clients (those client classes with flink-clients' own service file).
#   no-clients     the classpath has no flink-clients: getExecutionEnvironment() runs locally, no executor
#   target-yarn    flink-clients is there, the program loads a configuration with execution.target: yarn-per-job
#                  (as the cluster's flink-conf.yaml says) and flink-yarn is not on the classpath
#   target-k8s     the same with execution.target: kubernetes-session and without flink-kubernetes
#   shaded         a fat jar with flink-clients and flink-yarn shaded in without merging service files: its
#                  META-INF/services/...PipelineExecutorFactory is flink-yarn's alone; `jar tf` and the service file
#                  are saved next to the output, as a user attaches them
#   ok             healthy: flink-clients on the classpath, the program runs locally and finishes
#   cluster-client near miss: `flink run -t yarn-per-job` of the distribution without Hadoop: the executor is
#                  found, the YARN cluster client is not ("No ClusterClientFactory found")
# PORT_OFFSET (default 30) keeps the run's ports apart (no cluster is started).
set -u
export PORT_OFFSET=${PORT_OFFSET:-30}
HERE=$(cd "$(dirname "$0")" && pwd)
VER=$1; SCENARIO=$2; DEST=$(realpath -m "$3")
source "$HERE/../lib.sh"
init_run "executor-$SCENARIO" "$VER" || exit 1
DIST=$(ls "$FH"/lib/flink-dist*.jar)
W=$RUN/work
compile_job "$HERE/job" || exit 1
CLASSES=$W/classes
SERVICE=META-INF/services/org.apache.flink.core.execution.PipelineExecutorFactory
NO_CLIENTS=$W/flink-without-clients-$VER.jar
cp "$DIST" "$NO_CLIENTS"
zip -q -d "$NO_CLIENTS" 'org/apache/flink/client/*' 'org/apache/flink/yarn/*' 'org/apache/flink/kubernetes/*' \
  "$SERVICE" 'META-INF/services/org.apache.flink.client.deployment.ClusterClientFactory' >/dev/null
mkdir -p "$W/clients/META-INF/services" "$W/yarn/META-INF/services"
(cd "$W/clients" && unzip -q -o "$DIST" 'org/apache/flink/client/*')
printf '%s\n' org.apache.flink.client.deployment.executors.RemoteExecutorFactory \
  org.apache.flink.client.deployment.executors.LocalExecutorFactory > "$W/clients/$SERVICE"
CLIENTS=$W/flink-clients-$VER.jar
(cd "$W/clients" && jar cf "$CLIENTS" .)
(cd "$W/yarn" && unzip -q -o "$DIST" 'org/apache/flink/yarn/*')
grep -o 'org\.apache\.flink\.yarn\.executors\.[A-Za-z]*' <(unzip -p "$DIST" "$SERVICE") > "$W/yarn/$SERVICE"
LOG4J=$(ls "$FH"/lib/log4j-*.jar | tr '\n' ':')
mkdir -p "$W/resources" && cp "$HERE/log4j2.properties" "$W/resources/"
chown -R "$RUN_USER:$RUN_USER" "$W"
run_java() {  # run_java <classpath> [program args]: the console output into cli-java-run-*.out
  local cp=$1; shift
  # the command as the run line shows it, every entry by its file name (the build's classes and resources folders)
  act "java -cp $(echo "$cp" | tr ':' '\n' | grep . | sed -e 's#.*/##' | paste -sd:) com.acme.orders.OrderCountJob $*"
  as_flink "java $JAVA_OPTS_ALL -cp '$cp' com.acme.orders.OrderCountJob $*" \
    > "$RUN/cli-java-run-$(date +%H%M%S).out" 2>&1
}
case "$SCENARIO" in
  no-clients)
    run_java "$CLASSES:$W/resources:$NO_CLIENTS:$LOG4J" ;;
  target-yarn|target-k8s)
    if [ "$SCENARIO" = target-yarn ]; then conf "execution.target: yarn-per-job"; else conf "execution.target: kubernetes-session"; fi
    run_java "$CLASSES:$W/resources:$NO_CLIENTS:$CLIENTS:$LOG4J" --conf-dir conf ;;
  shaded)
    FAT=$RUN/job/order-count-1.0.jar
    cp "$NO_CLIENTS" "$FAT"
    # the last module shaded in wins the service file: flink-yarn's
    (cd "$W/clients" && zip -q -r "$FAT" org) && (cd "$W/yarn" && zip -q -r "$FAT" org META-INF) \
      && (cd "$CLASSES" && zip -q -r "$FAT" com) && (cd "$W/resources" && zip -q -r "$FAT" log4j2.properties)
    chown "$RUN_USER:$RUN_USER" "$FAT"
    act "jar tf order-count-1.0.jar | grep -E 'ExecutorFactory|$SERVICE' > job-jar-listing.txt"
    (echo "\$ jar tf order-count-1.0.jar | grep -E 'ExecutorFactory|PipelineExecutorFactory'"
     jar tf "$FAT" | grep -E 'ExecutorFactory|PipelineExecutorFactory'
     echo "\$ unzip -p order-count-1.0.jar $SERVICE"
     unzip -p "$FAT" "$SERVICE") > "$RUN/job-jar-listing.txt"
    run_java "$FAT:$LOG4J" ;;
  ok)
    run_java "$CLASSES:$W/resources:$NO_CLIENTS:$CLIENTS:$LOG4J" ;;
  cluster-client)
    act "flink run -t yarn-per-job -c com.acme.orders.OrderCountJob job.jar"
    submit -t yarn-per-job -c com.acme.orders.OrderCountJob "$JAR" ;;
esac
collect "$DEST"
# a program started with java reads no Flink configuration unless it loads one (target-yarn, target-k8s)
case "$SCENARIO" in no-clients|shaded|ok) rm -f "$DEST/$CONF_NAME" ;; esac
[ -f "$RUN/job-jar-listing.txt" ] && cp "$RUN/job-jar-listing.txt" "$DEST/"
rm -rf "$DEST/log" 2>/dev/null; [ -d "$RUN/log" ] && [ -n "$(ls "$RUN/log")" ] && { mkdir -p "$DEST/log"; cp "$RUN"/log/* "$DEST/log/"; sed -i -e "s#$RUN#/data/flink/$NAME#g" -e "s#$FH#/opt/flink#g" -e "s#$FLINK_LAB#/opt#g" "$DEST"/log/*; }
exit 0
