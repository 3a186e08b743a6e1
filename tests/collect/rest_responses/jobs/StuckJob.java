// A job whose map function blocks for a minute per record from record 50 on and ignores interruption. Its
// checkpoints cannot complete within the cluster's 1.5 s timeout, so after the tolerable number of failures the job
// fails over; the cancelled task stays in its map function (CANCELING) until the minute is up. Compiles against
// Flink 1.20 and 2.x.
package com.example.orders;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

public class StuckJob {
    public static void main(String[] args) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.fromSequence(0, Long.MAX_VALUE)
            .map(new MapFunction<Long, Long>() {
                @Override
                public Long map(Long value) {
                    long until = System.currentTimeMillis() + (value >= 50 ? 60_000 : 5);
                    while (System.currentTimeMillis() < until) {
                        try {
                            Thread.sleep(until - System.currentTimeMillis());
                        } catch (InterruptedException ignored) {
                            // the bug: an interrupt does not end the wait
                        }
                    }
                    return value;
                }
            })
            .print();
        env.execute("orders-slow-lookup");
    }
}
