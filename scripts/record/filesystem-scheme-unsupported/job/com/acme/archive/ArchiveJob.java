package com.acme.archive;

import java.net.URI;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.serialization.SimpleStringEncoder;
import org.apache.flink.connector.file.sink.FileSink;
import org.apache.flink.core.fs.Path;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * The order-archive job: checkpoints wherever the configuration says, and, per argument,
 * sink &lt;uri&gt; (a FileSink to that URI), hadoop &lt;uri&gt; (the job's own code lists that URI with Hadoop's
 * FileSystem API), run (unbounded) or ok (a bounded run that finishes).
 */
public class ArchiveJob {
    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "ok";
        String uri = args.length > 1 ? args[1] : "";
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.enableCheckpointing(2000);
        DataStream<String> orders = env.fromSequence(1, mode.equals("ok") ? 500 : Long.MAX_VALUE)
                .map(new Throttle());
        if (mode.equals("sink")) {
            orders.sinkTo(FileSink.forRowFormat(new Path(uri), new SimpleStringEncoder<String>("UTF-8")).build());
        } else if (mode.equals("hadoop")) {
            orders.map(new ArchiveIndex(uri)).print();
        } else {
            orders.print();
        }
        env.execute("order-archive-" + mode);
    }

    public static class Throttle implements MapFunction<Long, String> {
        @Override
        public String map(Long v) throws Exception {
            Thread.sleep(20);
            return "order-" + v;
        }
    }

    /** Checks the archive folder with Hadoop's FileSystem API before passing records on. */
    public static class ArchiveIndex implements MapFunction<String, String> {
        private final String uri;
        private transient Object fs;

        public ArchiveIndex(String uri) {
            this.uri = uri;
        }

        @Override
        public String map(String v) throws Exception {
            if (fs == null) {
                org.apache.hadoop.conf.Configuration conf = new org.apache.hadoop.conf.Configuration();
                org.apache.hadoop.fs.FileSystem hfs = org.apache.hadoop.fs.FileSystem.get(URI.create(uri), conf);
                hfs.exists(new org.apache.hadoop.fs.Path(uri));
                fs = hfs;
            }
            return v;
        }
    }
}
