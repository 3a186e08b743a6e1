package com.acme.sql;

import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;

/**
 * Order totals in Flink SQL from a Table API program: the orders table's connector is the first argument; a second
 * argument "misspelled-option" writes the datagen option 'rows-per-second' as 'rows-per-sec'.
 */
public class OrderTotalsJob {
    public static void main(String[] args) throws Exception {
        String connector = args.length > 0 ? args[0] : "datagen";
        TableEnvironment tEnv = TableEnvironment.create(EnvironmentSettings.inStreamingMode());
        String options = connector.equals("kafka")
                ? "'topic' = 'orders', 'properties.bootstrap.servers' = 'kafka-1.acme.internal:9092', "
                  + "'properties.group.id' = 'order-totals', 'format' = 'json'"
                : "'number-of-rows' = '200', "
                  + (args.length > 1 && args[1].equals("misspelled-option") ? "'rows-per-sec'" : "'rows-per-second'")
                  + " = '20', 'fields.customer.length' = '4'";
        tEnv.executeSql("CREATE TABLE orders (order_id BIGINT, customer STRING, amount DECIMAL(10, 2)) WITH ("
                + "'connector' = '" + connector + "', " + options + ")");
        tEnv.executeSql("CREATE TABLE order_totals (customer STRING, total DECIMAL(10, 2)) WITH ('connector' = 'print')");
        tEnv.executeSql("INSERT INTO order_totals SELECT customer, SUM(amount) FROM orders GROUP BY customer").await();
    }
}
