package com.example.restore;

import org.apache.flink.api.common.functions.FilterFunction;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.datastream.KeyedStream;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

import java.util.Arrays;
import java.util.List;

/**
 * A keyed counter whose operator uids, key type and state type are chosen on the command line, so that a savepoint
 * of one variant can be restored into another:
 * --name NAME  --no-uids  --counter-uid UID  --extra-filter  --key string|int  --state long|string|totals
 */
public class RestoreJob {

    public static void main(String[] args) throws Exception {
        List<String> a = Arrays.asList(args);
        String name = option(a, "--name", "order-counter");
        boolean uids = !a.contains("--no-uids");
        String counterUid = option(a, "--counter-uid", "counter");
        String key = option(a, "--key", "string");
        String state = option(a, "--state", "long");

        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        SingleOutputStreamOperator<Long> numbers = env.fromSequence(1, Long.MAX_VALUE).name("numbers");
        if (uids) numbers = numbers.uid("numbers");
        SingleOutputStreamOperator<Long> paced = numbers.map(new Pace()).name("pace");
        if (uids) paced = paced.uid("pace");
        DataStream<Long> input = paced;
        if (a.contains("--extra-filter")) {
            SingleOutputStreamOperator<Long> filtered = paced.filter(new Positive()).name("positive");
            if (uids) filtered = filtered.uid("positive");
            input = filtered;
        }
        SingleOutputStreamOperator<String> counted = "int".equals(key)
                ? count(input.keyBy(new IntKey()), state) : count(input.keyBy(new StringKey()), state);
        if (uids) counted = counted.uid(counterUid);
        if (uids) counted.print().name("sink").uid("sink");
        else counted.print().name("sink");
        env.execute(name);
    }

    static <K> SingleOutputStreamOperator<String> count(KeyedStream<Long, K> keyed, String state) {
        return keyed.process(new Count<K>(state), TypeInformation.of(String.class)).name("counter");
    }

    static String option(List<String> a, String name, String fallback) {
        int i = a.indexOf(name);
        return i >= 0 && i + 1 < a.size() ? a.get(i + 1) : fallback;
    }

    /** Slows the generator down to a few hundred records a second. */
    public static class Pace implements MapFunction<Long, Long> {
        @Override
        public Long map(Long value) throws Exception {
            Thread.sleep(3);
            return value;
        }
    }

    public static class Positive implements FilterFunction<Long> {
        @Override
        public boolean filter(Long value) {
            return value > 0;
        }
    }

    public static class StringKey implements KeySelector<Long, String> {
        @Override
        public String getKey(Long value) {
            return "customer-" + (value % 16);
        }
    }

    public static class IntKey implements KeySelector<Long, Integer> {
        @Override
        public Integer getKey(Long value) {
            return (int) (value % 16);
        }
    }

    /** Counts records per key in a ValueState named "count"; emits nothing (the print sink stays quiet). */
    public static class Count<K> extends KeyedProcessFunction<K, Long, String> {
        private final String kind;
        private transient ValueState<Long> longs;
        private transient ValueState<String> strings;
        private transient ValueState<Totals> totals;

        Count(String kind) {
            this.kind = kind;
        }

        @Override
        public void processElement(Long value, Context ctx, Collector<String> out) throws Exception {
            // Obtained on first use: open(Configuration) / open(OpenContext) differ between Flink 1.x and 2.x.
            if ("string".equals(kind)) {
                if (strings == null) strings = getRuntimeContext().getState(
                        new ValueStateDescriptor<>("count", TypeInformation.of(String.class)));
                String s = strings.value();
                strings.update(String.valueOf((s == null ? 0 : Long.parseLong(s)) + 1));
            } else if ("totals".equals(kind)) {
                if (totals == null) totals = getRuntimeContext().getState(
                        new ValueStateDescriptor<>("count", TypeInformation.of(Totals.class)));
                totals.update(Totals.add(totals.value(), value));
            } else {
                if (longs == null) longs = getRuntimeContext().getState(
                        new ValueStateDescriptor<>("count", TypeInformation.of(Long.class)));
                Long c = longs.value();
                longs.update(c == null ? 1L : c + 1);
            }
        }
    }
}
