package com.example.maxpar;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

import java.util.Arrays;
import java.util.List;

/**
 * A keyed counter with stable uids whose maximum parallelism is set in code when asked:
 * --max-parallelism N  (env.setMaxParallelism(N); without it the job leaves the maximum to Flink or to
 * pipeline.max-parallelism)
 */
public class MaxParallelismJob {

    public static void main(String[] args) throws Exception {
        List<String> a = Arrays.asList(args);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        int i = a.indexOf("--max-parallelism");
        if (i >= 0) env.setMaxParallelism(Integer.parseInt(a.get(i + 1)));
        env.fromSequence(1, Long.MAX_VALUE).name("orders").uid("orders")
                .map(new Pace()).name("pace").uid("pace")
                .keyBy(new CustomerKey())
                .process(new Count(), TypeInformation.of(String.class)).name("order-counter").uid("order-counter")
                .print().name("sink").uid("sink");
        env.execute("orders-per-customer");
    }

    /** Slows the generator down to a few hundred records a second. */
    public static class Pace implements MapFunction<Long, Long> {
        @Override
        public Long map(Long value) throws Exception {
            Thread.sleep(3);
            return value;
        }
    }

    public static class CustomerKey implements KeySelector<Long, String> {
        @Override
        public String getKey(Long value) {
            return "customer-" + (value % 16);
        }
    }

    /** Counts records per key; emits nothing. */
    public static class Count extends KeyedProcessFunction<String, Long, String> {
        private transient ValueState<Long> count;

        @Override
        public void processElement(Long value, Context ctx, Collector<String> out) throws Exception {
            // obtained on first use: open(Configuration) / open(OpenContext) differ between Flink 1.x and 2.x
            if (count == null) count = getRuntimeContext().getState(
                    new ValueStateDescriptor<>("count", TypeInformation.of(Long.class)));
            Long c = count.value();
            count.update(c == null ? 1L : c + 1);
        }
    }
}
