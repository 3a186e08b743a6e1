package com.acme.orders;

import java.io.InputStream;
import java.net.HttpURLConnection;
import java.net.URL;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.flink.api.common.functions.FilterFunction;
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.java.functions.KeySelector;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An orders pipeline whose behaviour is chosen by its first argument, to provoke the failures of the user-code and
 * serialization runbooks: ok | poison | handled | deploy-v2 | enrich <url> | generic | kryo | kryo-mutable |
 * nonserializable.
 */
public class OrdersJob {

    static final long POISON_ORDER = 2500;

    /** Not a POJO: final fields and no default constructor, so Flink falls back to a generic (Kryo) type. */
    public static class Order {
        private final long id;
        private final String currency;
        private final List<String> tags;

        public Order(long id, String currency, List<String> tags) {
            this.id = id;
            this.currency = currency;
            this.tags = tags;
        }

        public long getId() { return id; }
        public String getCurrency() { return currency; }
        public List<String> getTags() { return tags; }
    }

    /** A client the operator holds as a field; it is not Serializable. */
    public static class PricingClient {
        double price(long id) { return id * 1.5; }
    }

    public static void main(String[] args) throws Exception {
        String mode = args.length > 0 ? args[0] : "ok";
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.enableCheckpointing(2000);
        DataStream<Long> ids = env.fromSequence(1, 10_000_000L).map(new Throttle());
        DataStream<String> out;
        switch (mode) {
            case "poison":
                out = ids.map(new ToLine()).map(new ParseAmount(false));
                break;
            case "handled":
                out = ids.map(new ToLine()).map(new ParseAmount(true));
                break;
            case "deploy-v2":
                out = ids.map(new Convert());
                break;
            case "enrich":
                out = ids.map(new Enrich(args[1]));
                break;
            case "generic":
            case "kryo":
                out = ids.map(new ToOrder()).keyBy(new ByCurrency()).map(new Describe());
                break;
            case "kryo-mutable":
                out = ids.map(new ToMutableOrder()).keyBy(new ByCurrency()).map(new Describe());
                break;
            case "nonserializable":
                out = ids.map(new Price());
                break;
            default:
                out = ids.map(new ToLine());
        }
        out.filter(new DropAll()).print();
        // both releases of the orders job run under the same name
        env.execute(mode.equals("ok") || mode.equals("deploy-v2") ? "orders" : "orders-" + mode);
    }

    public static class Throttle implements MapFunction<Long, Long> {
        @Override
        public Long map(Long v) throws Exception {
            Thread.sleep(5);
            return v;
        }
    }

    public static class ToLine implements MapFunction<Long, String> {
        @Override
        public String map(Long v) {
            // one malformed order in the feed: its amount is "n/a"
            return v + ",EUR," + (v == POISON_ORDER ? "n/a" : String.valueOf(v % 100 + 0.5));
        }
    }

    public static class ParseAmount implements MapFunction<String, String> {
        private static final Logger LOG = LoggerFactory.getLogger(ParseAmount.class);
        private final boolean skipMalformed;

        ParseAmount(boolean skipMalformed) { this.skipMalformed = skipMalformed; }

        @Override
        public String map(String line) {
            String[] f = line.split(",");
            try {
                double amount = Double.parseDouble(f[2]);
                return f[0] + ":" + amount;
            } catch (NumberFormatException e) {
                if (!skipMalformed) {
                    throw e;
                }
                LOG.warn("Skipping malformed order {} (sent to the dead-letter output)", line, e);
                return "";
            }
        }
    }

    public static class Convert implements MapFunction<Long, String> {
        private final Map<String, String> rates = new HashMap<>();

        @Override
        public String map(Long v) {
            // the new release looks up a currency the table does not have
            return rates.get("EUR").toUpperCase() + v;
        }
    }

    public static class Enrich implements MapFunction<Long, String> {
        private final String base;

        Enrich(String base) { this.base = base; }

        @Override
        public String map(Long v) throws Exception {
            HttpURLConnection c = (HttpURLConnection) new URL(base + "/customer?id=" + v).openConnection();
            c.setConnectTimeout(500);
            c.setReadTimeout(500);
            try (InputStream in = c.getInputStream()) {
                return v + ":" + new String(in.readAllBytes());
            } finally {
                c.disconnect();
            }
        }
    }

    public static class ToOrder implements MapFunction<Long, Order> {
        @Override
        public Order map(Long v) {
            return new Order(v, v % 2 == 0 ? "EUR" : "USD", Collections.unmodifiableList(List.of("web", "id" + v)));
        }
    }

    public static class ToMutableOrder implements MapFunction<Long, Order> {
        @Override
        public Order map(Long v) {
            // a plain ArrayList, which Kryo writes and reads back
            return new Order(v, v % 2 == 0 ? "EUR" : "USD", new java.util.ArrayList<>(List.of("web", "id" + v)));
        }
    }

    public static class ByCurrency implements KeySelector<Order, String> {
        @Override
        public String getKey(Order o) { return o.getCurrency(); }
    }

    public static class Describe implements MapFunction<Order, String> {
        @Override
        public String map(Order o) { return o.getId() + o.getCurrency() + o.getTags(); }
    }

    public static class Price implements MapFunction<Long, String> {
        private final PricingClient client = new PricingClient();

        @Override
        public String map(Long v) { return v + ":" + client.price(v); }
    }

    public static class DropAll implements FilterFunction<String> {
        @Override
        public boolean filter(String s) { return false; }
    }
}
