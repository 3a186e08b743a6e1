#!/bin/bash
# Genuine logs of class-loading failures: record.sh <flink-version> <scenario> <dest>
#   cast      acme-common-1.0.jar in lib/ and its Event class also packed into the job jar (child-first, the
#             default): "Event cannot be cast to Event", the two loaders named
#   missing   the job calls the geo-index library it was compiled against but does not package: NoClassDefFoundError
#   guava     Guava 16 in lib/ (as Hadoop-era jars bring it), classloader.resolve-order: parent-first, the job compiled
#             against Guava 33 (and packing it): NoSuchMethodError Strings.lenientFormat
#   leak      a cache-refresher thread started by the job and never stopped, the job cancelled and resubmitted twice:
#             "Trying to access closed classloader"
#   probe     near miss: the job looks for an optional codec, logs the ClassNotFoundException at INFO and finishes
#   ok        healthy: the same job, everything packaged, finishes
# lib/ additions go into a private copy of the distribution (hard links, under /opt/flink-lab-p$PORT_OFFSET) so the
# shared one is never changed. PORT_OFFSET (default 30) keeps this cluster's ports apart.
set -u
export PORT_OFFSET=${PORT_OFFSET:-30}
HERE=$(cd "$(dirname "$0")" && pwd)
VER=$1; SCENARIO=$2; DEST=$(realpath -m "$3")
M2=${M2:-$HOME/.m2/repository}
GUAVA_NEW=$M2/com/google/guava/guava/33.4.0-jre/guava-33.4.0-jre.jar
GUAVA_OLD=$M2/com/google/guava/guava/16.0.1/guava-16.0.1.jar
BUILD=$(mktemp -d)
# the libraries the job is compiled against: acme-common, geo-index
mkdir -p "$BUILD/acme" "$BUILD/geo" "$BUILD/classes"
javac -nowarn -d "$BUILD/acme" $(find "$HERE/lib-src" -name '*.java') || exit 1
(cd "$BUILD/acme" && jar cf "$BUILD/acme-common-1.0.jar" .)
javac -nowarn -d "$BUILD/geo" $(find "$HERE/geo-src" -name '*.java') || exit 1
(cd "$BUILD/geo" && jar cf "$BUILD/geo-index-2.1.jar" .)

case "$SCENARIO" in
  cast) EXTRA_LIB="$BUILD/acme-common-1.0.jar" ;;
  guava) EXTRA_LIB="$GUAVA_OLD" ;;
  *) EXTRA_LIB="" ;;
esac
if [ -n "$EXTRA_LIB" ]; then
  export FLINK_LAB=/opt/flink-lab-p$PORT_OFFSET/$SCENARIO
  rm -rf "$FLINK_LAB/$VER"; mkdir -p "$FLINK_LAB/$VER"
  cp -al "/opt/flink-lab/$VER/pyflink" "$FLINK_LAB/$VER/pyflink"
  cp "$EXTRA_LIB" "$FLINK_LAB/$VER/pyflink/lib/"; chmod a+r "$FLINK_LAB/$VER/pyflink/lib/"*
fi
source "$HERE/../lib.sh"
init_run "classloading-$SCENARIO" "$VER" || exit 1
# a private copy has no 1.20.3 next to it to take the Java 17 options from: take them from the shared one
if ! grep -q "^env.java.opts.all: ." "$CONF"; then
  sed -i "s#^env.java.opts.all:.*#env.java.opts.all: $(grep -m1 '^ *all: ' /opt/flink-lab/1.20.3/pyflink/conf/config.yaml | sed 's/^ *all: //')#" "$CONF"
fi
# the job jar: the job, the acme-model copy of Event, Guava 33 packed in (a fat jar); never geo-index
javac -nowarn -d "$BUILD/classes" -cp "$GUAVA_NEW:$FH/lib/*:$BUILD/acme-common-1.0.jar:$BUILD/geo-index-2.1.jar" \
  $(find "$HERE/job" -name '*.java') $(find "$HERE/job-model" -name '*.java') || exit 1
(cd "$BUILD/classes" && unzip -qo "$GUAVA_NEW" 'com/*' && jar cf "$RUN/job/order-enrichment.jar" .)
JAR=$RUN/job/order-enrichment.jar
chown -R "$RUN_USER:$RUN_USER" "$RUN/job"
conf "restart-strategy.type: fixed-delay"
conf "restart-strategy.fixed-delay.attempts: 1"
conf "restart-strategy.fixed-delay.delay: 2 s"
# the leak scenario runs without checkpoints: the refresher thread, not checkpointing, is the subject
[ "$SCENARIO" != leak ] && conf "execution.checkpointing.interval: 2 s"
[ "$SCENARIO" = guava ] && conf "classloader.resolve-order: parent-first"
start_cluster 1 || { stop_cluster; exit 1; }
case "$SCENARIO" in
  leak)
    for round in 1 2 3; do
      act "submit the order-enrichment job (leak), round $round"
      submit -c com.acme.pipeline.EnrichJob "$JAR" leak
      wait_for "job running" 60 "[ \"\$(job_state)\" = RUNNING ]"
      sleep 8
      act "cancel job $JOBID"
      flink_cli cancel "$JOBID"
      wait_for "job canceled" 60 "[ \"\$(job_state)\" = CANCELED ]"
    done
    sleep 25 ;;
  *)
    act "submit the order-enrichment job ($SCENARIO)"
    submit -c com.acme.pipeline.EnrichJob "$JAR" "$SCENARIO"
    [ -n "$JOBID" ] && wait_for "job terminal" 90 "job_state | grep -qE 'FAILED|FINISHED'" ;;
esac
stop_cluster
collect "$DEST"
rm -rf "$BUILD"
[ -n "$EXTRA_LIB" ] && rm -rf "$FLINK_LAB/$VER/pyflink"
exit 0
