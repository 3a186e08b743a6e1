package com.example.restore;

import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;

import java.util.Arrays;
import java.util.List;

/** A SQL aggregation over generated orders; --filtered adds a WHERE clause, which changes the plan and its operator ids. */
public class SqlCounter {
    public static void main(String[] args) {
        List<String> a = Arrays.asList(args);
        TableEnvironment tEnv = TableEnvironment.create(EnvironmentSettings.inStreamingMode());
        tEnv.getConfig().getConfiguration().setString("pipeline.name", "orders-per-customer-sql");
        tEnv.executeSql("CREATE TABLE orders (customer INT, amount DOUBLE) WITH ('connector' = 'datagen', "
                + "'rows-per-second' = '200', 'fields.customer.min' = '1', 'fields.customer.max' = '50')");
        tEnv.executeSql("CREATE TABLE totals (customer INT, orders BIGINT, amount DOUBLE) WITH ('connector' = 'blackhole')");
        String where = a.contains("--filtered") ? " WHERE amount > 0" : "";
        tEnv.executeSql("INSERT INTO totals SELECT customer, COUNT(*), SUM(amount) FROM orders" + where
                + " GROUP BY customer");
    }
}
