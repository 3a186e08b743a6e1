package com.acme.orders;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.GlobalConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/** Counts orders per shop; started with `java` (as from an IDE), optionally with a Flink configuration directory. */
public class OrderCountJob {
    public static void main(String[] args) throws Exception {
        StreamExecutionEnvironment env;
        if (args.length == 2 && "--conf-dir".equals(args[0])) {
            Configuration conf = GlobalConfiguration.loadConfiguration(args[1]);
            env = new StreamExecutionEnvironment(conf);
        } else {
            env = StreamExecutionEnvironment.getExecutionEnvironment();
        }
        env.fromSequence(1, 200).map(new ShopOf()).print();
        env.execute("order-count");
    }

    /** The shop an order id belongs to. */
    public static class ShopOf implements MapFunction<Long, String> {
        @Override
        public String map(Long orderId) {
            return "shop-" + (orderId % 7);
        }
    }
}
