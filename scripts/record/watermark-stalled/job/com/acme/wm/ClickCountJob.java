package com.acme.wm;

import java.time.Duration;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;

/**
 * The latest click per page per 10-second tumbling event-time window in the DataStream API, parallelism 2: an endless sequence
 * of clicks, ten a second per subtask, one second of event time apart from 2026-03-14 02:00:00, with a bounded
 * out-of-orderness WatermarkStrategy (a periodic generator) assigned after the source.
 */
public class ClickCountJob {
    static final long START = 1773453600000L;  // 2026-03-14 02:00:00 UTC

    public static void main(String[] args) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(2);
        env.fromSequence(0, Long.MAX_VALUE)
                .map(new SlowClicks()).name("clicks")
                .assignTimestampsAndWatermarks(WatermarkStrategy
                        .<Tuple2<String, Long>>forBoundedOutOfOrderness(Duration.ofSeconds(1))
                        .withTimestampAssigner((click, previous) -> START + click.f1 * 1000))
                .keyBy(click -> click.f0)
                .window(TumblingEventTimeWindows.of(Duration.ofSeconds(10)))
                .reduce((a, b) -> Tuple2.of(a.f0, Math.max(a.f1, b.f1))).name("latest-click-per-page")
                .print();
        env.execute("latest-click-per-page");
    }

    /** The n-th click of this subtask happened n seconds after START (the sequence's own numbers are far apart). */
    static class SlowClicks implements MapFunction<Long, Tuple2<String, Long>> {
        private long clicks;

        @Override
        public Tuple2<String, Long> map(Long n) throws Exception {
            Thread.sleep(100);
            return Tuple2.of("page-" + (n % 3), clicks++);
        }
    }
}
