package com.example.keys;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

import java.util.Arrays;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.ThreadLocalRandom;

/**
 * A keyed counter whose key is chosen on the command line:
 * --key string     "customer-" + (n % 16), deterministic
 * --key random     "customer-" + a random number: the sender and the receiving subtask compute different keys
 * --key identity   a CustomerRef without hashCode/equals (and without a no-argument constructor, so Flink handles it
 *                  as a generic type): every instance has its own identity hash
 * --key enum       a POJO key whose hashCode includes an enum field: an enum's hashCode is its identity hash, the same
 *                  within one JVM and different in another TaskManager
 */
public class KeyGroupJob {

    public static void main(String[] args) throws Exception {
        List<String> a = Arrays.asList(args);
        int i = a.indexOf("--key");
        String key = i >= 0 ? a.get(i + 1) : "string";
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        DataStream<Long> orders = env.fromSequence(1, Long.MAX_VALUE).name("orders").uid("orders")
                .map(new Pace()).name("pace").uid("pace");
        if ("enum".equals(key)) {
            orders.keyBy(new TierKey()).process(new Count<TieredCustomer>(), TypeInformation.of(String.class))
                    .name("orders-per-customer").uid("orders-per-customer").print().name("sink").uid("sink");
        } else if ("identity".equals(key)) {
            orders.keyBy(new RefKey()).process(new Count<CustomerRef>(), TypeInformation.of(String.class))
                    .name("orders-per-customer").uid("orders-per-customer").print().name("sink").uid("sink");
        } else {
            KeySelector<Long, String> selector = "random".equals(key) ? new RandomKey() : new CustomerKey();
            orders.keyBy(selector).process(new Count<String>(), TypeInformation.of(String.class))
                    .name("orders-per-customer").uid("orders-per-customer").print().name("sink").uid("sink");
        }
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

    public static class RandomKey implements KeySelector<Long, String> {
        @Override
        public String getKey(Long value) {
            return "customer-" + ThreadLocalRandom.current().nextInt(16);
        }
    }

    /** A customer reference that inherits Object's identity hashCode and equals. */
    public static class CustomerRef {
        private final long id;

        public CustomerRef(long id) {
            this.id = id;
        }

        @Override
        public String toString() {
            return "customer-" + id;
        }
    }

    public enum Tier { BRONZE, SILVER, GOLD }

    /** A POJO key with a hashCode over an enum field: Objects.hash calls Tier.hashCode, Object's identity hash. */
    public static class TieredCustomer {
        public Tier tier;
        public long id;

        public TieredCustomer() {
        }

        public TieredCustomer(Tier tier, long id) {
            this.tier = tier;
            this.id = id;
        }

        @Override
        public int hashCode() {
            return Objects.hash(tier, id);
        }

        @Override
        public boolean equals(Object o) {
            return o instanceof TieredCustomer && ((TieredCustomer) o).tier == tier && ((TieredCustomer) o).id == id;
        }
    }

    public static class TierKey implements KeySelector<Long, TieredCustomer> {
        @Override
        public TieredCustomer getKey(Long value) {
            return new TieredCustomer(Tier.values()[(int) (value % 3)], value % 16);
        }
    }

    public static class RefKey implements KeySelector<Long, CustomerRef> {
        @Override
        public CustomerRef getKey(Long value) {
            return new CustomerRef(value % 16);
        }
    }

    /** Counts records per key; emits nothing. */
    public static class Count<K> extends KeyedProcessFunction<K, Long, String> {
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
