#!/bin/bash
# Genuine logs of file-system schemes Flink cannot serve: record.sh <flink-version> <scenario> <dest>
#   s3-checkpoints   checkpoints to s3://... on a distribution without the S3 plugins: the job cannot start
#   gcs-sink         a FileSink to gcs://... (Google's scheme is gs://) and no Hadoop: "not directly supported"
#   hadoop-missing   the job's own code uses Hadoop's FileSystem API, no Hadoop on the cluster: NoClassDefFoundError
#   hadoop-no-s3a    Hadoop's client jars on the cluster (HADOOP_CLASSPATH) but not hadoop-aws: the job's Hadoop
#                    FileSystem.get of s3a://... fails with "No FileSystem for scheme"
#   hdfs-down        near miss: Hadoop on the cluster, checkpoints to hdfs:// on a NameNode that does not answer
#   ok               healthy: checkpoints to a local directory, the job finishes
# Hadoop's client jars are taken from pyspark's (3.4.1) and installed under /opt/hadoop-3.4.1/share/hadoop/client.
# PORT_OFFSET (default 30) keeps this cluster's ports apart.
set -u
export PORT_OFFSET=${PORT_OFFSET:-30}
HERE=$(cd "$(dirname "$0")" && pwd)
VER=$1; SCENARIO=$2; DEST=$(realpath -m "$3")
HADOOP_CLIENT=/opt/hadoop-3.4.1/share/hadoop/client
source "$HERE/../lib.sh"
init_run "filesystem-$SCENARIO" "$VER" || exit 1
BUILD=$(mktemp -d)
javac -nowarn -d "$BUILD" -cp "$FH/lib/*:$HADOOP_CLIENT/*" $(find "$HERE/job" -name '*.java') || exit 1
JAR=$RUN/job/order-archive.jar
(cd "$BUILD" && jar cf "$JAR" .); rm -rf "$BUILD"
chown -R "$RUN_USER:$RUN_USER" "$RUN/job"
if [[ "$VER" == 2.* ]]; then CKPT_KEY=execution.checkpointing.dir; else CKPT_KEY=state.checkpoints.dir; fi
conf "restart-strategy.type: fixed-delay"
conf "restart-strategy.fixed-delay.attempts: 1"
conf "restart-strategy.fixed-delay.delay: 2 s"
ARGS=run
case "$SCENARIO" in
  s3-checkpoints) conf "$CKPT_KEY: s3://acme-flink-state/checkpoints/order-archive" ;;
  gcs-sink) conf "$CKPT_KEY: file://$RUN/ckpt"; ARGS="sink gcs://acme-archive/orders" ;;
  hadoop-missing) conf "$CKPT_KEY: file://$RUN/ckpt"; ARGS="hadoop s3a://acme-archive/orders" ;;
  hadoop-no-s3a) export HADOOP_CLASSPATH="$HADOOP_CLIENT/hadoop-client-api-3.4.1.jar:$HADOOP_CLIENT/hadoop-client-runtime-3.4.1.jar"
                 conf "$CKPT_KEY: file://$RUN/ckpt"; ARGS="hadoop s3a://acme-archive/orders" ;;
  hdfs-down) export HADOOP_CLASSPATH="$HADOOP_CLIENT/hadoop-client-api-3.4.1.jar:$HADOOP_CLIENT/hadoop-client-runtime-3.4.1.jar"
             conf "$CKPT_KEY: hdfs://localhost:$((9000 + PORT_OFFSET))/flink/checkpoints" ;;
  ok) conf "$CKPT_KEY: file://$RUN/ckpt"; ARGS=ok ;;
esac
start_cluster 1 || { stop_cluster; exit 1; }
act "submit the order-archive job ($ARGS)"
submit -c com.acme.archive.ArchiveJob "$JAR" $ARGS
[ -n "$JOBID" ] && wait_for "job terminal" 90 "job_state | grep -qE 'FAILED|FINISHED'"
stop_cluster
collect "$DEST"
exit 0
