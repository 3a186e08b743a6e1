package com.acme.sql;

import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;

/**
 * Order reports in Flink SQL from a Table API program, one query per scenario (first argument) over a bounded datagen
 * orders table; the second argument is the folder the filesystem tables write to.
 *   totals-to-files        regular GROUP BY into an append-only filesystem table (fails to plan)
 *   left-join-to-files     orders LEFT JOIN customers into the filesystem table (fails to plan)
 *   top3-to-files          the three largest orders per customer (ROW_NUMBER) into the filesystem table (fails)
 *   latest-to-files        the latest order per customer (ROW_NUMBER ... ORDER BY proctime DESC) into files (fails)
 *   over-after-totals      an OVER window ordered by processing time over the running totals (fails to plan)
 *   totals-to-upsert       the same GROUP BY into a table with PRIMARY KEY on a sink that accepts changes (runs)
 *   window-totals-to-files the totals per customer per 10-second tumbling window into the filesystem table (runs)
 */
public class OrderReportJob {
    public static void main(String[] args) throws Exception {
        String scenario = args.length > 0 ? args[0] : "totals-to-upsert";
        String out = args.length > 1 ? args[1] : "/tmp/order-report";
        TableEnvironment tEnv = TableEnvironment.create(EnvironmentSettings.inStreamingMode());
        tEnv.executeSql("CREATE TABLE orders (order_id BIGINT, customer STRING, amount DECIMAL(10, 2), "
                + "ts TIMESTAMP(3), pt AS PROCTIME(), WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) WITH ("
                + "'connector' = 'datagen', 'number-of-rows' = '200', 'rows-per-second' = '20', "
                + "'fields.customer.length' = '1')");
        tEnv.executeSql("CREATE TABLE customers (customer STRING, region STRING) WITH ("
                + "'connector' = 'datagen', 'number-of-rows' = '20', 'fields.customer.length' = '1')");
        String files = "WITH ('connector' = 'filesystem', 'path' = 'file://" + out + "/" + scenario + "', "
                + "'format' = 'csv')";
        String insert;
        switch (scenario) {
            case "totals-to-files":
                tEnv.executeSql("CREATE TABLE order_totals (customer STRING, total DECIMAL(10, 2)) " + files);
                insert = "INSERT INTO order_totals SELECT customer, SUM(amount) FROM orders GROUP BY customer";
                break;
            case "left-join-to-files":
                tEnv.executeSql("CREATE TABLE enriched_orders (order_id BIGINT, customer STRING, region STRING, "
                        + "amount DECIMAL(10, 2)) " + files);
                insert = "INSERT INTO enriched_orders SELECT o.order_id, o.customer, c.region, o.amount "
                        + "FROM orders o LEFT JOIN customers c ON o.customer = c.customer";
                break;
            case "top3-to-files":
                tEnv.executeSql("CREATE TABLE top_orders (customer STRING, order_id BIGINT, amount DECIMAL(10, 2)) "
                        + files);
                insert = "INSERT INTO top_orders SELECT customer, order_id, amount FROM (SELECT *, ROW_NUMBER() "
                        + "OVER (PARTITION BY customer ORDER BY amount DESC) AS rn FROM orders) WHERE rn <= 3";
                break;
            case "latest-to-files":
                tEnv.executeSql("CREATE TABLE latest_orders (customer STRING, order_id BIGINT, "
                        + "amount DECIMAL(10, 2)) " + files);
                insert = "INSERT INTO latest_orders SELECT customer, order_id, amount FROM (SELECT *, ROW_NUMBER() "
                        + "OVER (PARTITION BY customer ORDER BY pt DESC) AS rn FROM orders) WHERE rn = 1";
                break;
            case "over-after-totals":
                tEnv.executeSql("CREATE TABLE total_changes (customer STRING, total DECIMAL(10, 2), changes BIGINT) "
                        + "WITH ('connector' = 'print')");
                tEnv.executeSql("CREATE VIEW totals AS SELECT customer, SUM(amount) AS total, PROCTIME() AS pt "
                        + "FROM orders GROUP BY customer");
                insert = "INSERT INTO total_changes SELECT customer, total, COUNT(*) OVER (PARTITION BY customer "
                        + "ORDER BY pt ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) FROM totals";
                break;
            case "window-totals-to-files":
                tEnv.executeSql("CREATE TABLE order_totals_10s (window_start TIMESTAMP(3), customer STRING, "
                        + "total DECIMAL(10, 2)) " + files);
                insert = "INSERT INTO order_totals_10s SELECT window_start, customer, SUM(amount) FROM TABLE("
                        + "TUMBLE(TABLE orders, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
                        + "GROUP BY window_start, window_end, customer";
                break;
            default:  // totals-to-upsert
                tEnv.executeSql("CREATE TABLE order_totals (customer STRING, total DECIMAL(10, 2), "
                        + "PRIMARY KEY (customer) NOT ENFORCED) WITH ('connector' = 'print')");
                insert = "INSERT INTO order_totals SELECT customer, SUM(amount) FROM orders GROUP BY customer";
        }
        tEnv.executeSql(insert).await();
    }
}
