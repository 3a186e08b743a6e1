package com.acme.orders;

import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;

/**
 * Totals per customer in Flink SQL over an order feed exported as files: arguments are the feed's directory, its
 * format (json or csv) and optionally "ignore-parse-errors", which sets the format's own skip option.
 */
public class OrderFeedTotalsJob {
    public static void main(String[] args) throws Exception {
        String path = args[0];
        String format = args[1];
        boolean skipBadRows = args.length > 2 && args[2].equals("ignore-parse-errors");
        TableEnvironment tEnv = TableEnvironment.create(EnvironmentSettings.inStreamingMode());
        tEnv.executeSql("CREATE TABLE order_feed (order_id BIGINT, customer STRING, amount DECIMAL(10, 2)) WITH ("
                + "'connector' = 'filesystem', 'path' = '" + path + "', 'format' = '" + format + "'"
                + (skipBadRows ? ", '" + format + ".ignore-parse-errors' = 'true'" : "") + ")");
        tEnv.executeSql("CREATE TABLE customer_totals (customer STRING, total DECIMAL(10, 2)) WITH ("
                + "'connector' = 'print')");
        tEnv.executeSql("INSERT INTO customer_totals SELECT customer, SUM(amount) FROM order_feed GROUP BY customer")
                .await();
    }
}
