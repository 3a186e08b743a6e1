package com.acme.pipeline;

import com.acme.common.Event;
import com.acme.common.EventCodec;
import com.acme.geo.GeoIndex;
import com.google.common.base.Strings;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The order-enrichment job, one class-loading situation per argument:
 * cast (acme-common in lib/ and its Event also in the job jar), missing (geo-index not packaged),
 * guava (compiled against Guava 33, Guava 16 in lib/ loaded parent-first), leak (a refresher thread that outlives
 * the job), probe (an optional codec looked up and absent: logged, not fatal), ok.
 */
public class EnrichJob {
    private static final Logger LOG = LoggerFactory.getLogger(EnrichJob.class);

    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "ok";
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        if (!mode.equals("leak")) {
            env.enableCheckpointing(2000);
        }
        boolean bounded = mode.equals("ok") || mode.equals("probe");
        DataStream<Long> orders = env.fromSequence(1, bounded ? 400 : Long.MAX_VALUE).map(new Throttle());
        MapFunction<Long, String> enrich;
        switch (mode) {
            case "cast": enrich = new DecodeEvent(); break;
            case "missing": enrich = new Locate(); break;
            case "guava": enrich = new FormatLine(); break;
            case "leak": enrich = new CachedLookup(); break;
            case "probe": enrich = new Compress(); break;
            default: enrich = new Plain();
        }
        orders.map(enrich).print();
        env.execute("order-enrichment-" + mode);
    }

    public static class Throttle implements MapFunction<Long, Long> {
        @Override
        public Long map(Long v) throws Exception {
            Thread.sleep(20);
            return v;
        }
    }

    public static class Plain implements MapFunction<Long, String> {
        @Override
        public String map(Long v) {
            return "order-" + v;
        }
    }

    public static class DecodeEvent implements MapFunction<Long, String> {
        @Override
        public String map(Long v) {
            Event event = EventCodec.decode("order-" + v);
            return event.key;
        }
    }

    public static class Locate implements MapFunction<Long, String> {
        @Override
        public String map(Long v) {
            return "order-" + v + "@" + GeoIndex.regionOf(v);
        }
    }

    public static class FormatLine implements MapFunction<Long, String> {
        @Override
        public String map(Long v) {
            return Strings.lenientFormat("order %s", v);
        }
    }

    /** Starts a cache refresher thread on first use and never stops it. */
    public static class CachedLookup implements MapFunction<Long, String> {
        private transient Thread refresher;

        @Override
        public String map(Long v) {
            if (refresher == null) {
                final ClassLoader loader = Thread.currentThread().getContextClassLoader();
                refresher = new Thread(() -> {
                    int failures = 0;
                    while (failures < 6) {
                        try {
                            Thread.sleep(3000);
                            loader.loadClass("com.acme.pipeline.EnrichJob$Plain");
                        } catch (InterruptedException e) {
                            return;
                        } catch (Throwable t) {
                            failures++;
                            LOG.warn("Cache refresh failed", t);
                        }
                    }
                }, "acme-cache-refresher");
                refresher.setDaemon(true);
                refresher.start();
            }
            return "order-" + v;
        }
    }

    /** Looks for the optional zstd codec once; without it the records go out uncompressed. */
    public static class Compress implements MapFunction<Long, String> {
        private transient Boolean zstd;

        @Override
        public String map(Long v) {
            if (zstd == null) {
                try {
                    Class.forName("com.github.luben.zstd.Zstd");
                    zstd = true;
                } catch (ClassNotFoundException e) {
                    LOG.info("zstd-jni not on the classpath, writing uncompressed records", e);
                    zstd = false;
                }
            }
            return "order-" + v;
        }
    }
}
