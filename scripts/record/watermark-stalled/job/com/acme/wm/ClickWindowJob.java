package com.acme.wm;

import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;

/**
 * Clicks per page per 10-second tumbling event-time window, in Flink SQL from a Table API program, parallelism 2.
 * First argument: the scenario; second: the folder holding the clicks file (read continuously); third: the idle
 * timeout of table.exec.source.idle-timeout ("" for none).
 *   one-file    the clicks are one CSV file: one split, so one of the two source subtasks never gets data
 *   datagen     random clicks on both subtasks (datagen), for the periodic-watermark scenarios
 */
public class ClickWindowJob {
    public static void main(String[] args) throws Exception {
        String scenario = args.length > 0 ? args[0] : "one-file";
        String in = args.length > 1 ? args[1] : "/tmp/clicks";
        String idle = args.length > 2 ? args[2] : "";
        TableEnvironment tEnv = TableEnvironment.create(EnvironmentSettings.inStreamingMode());
        tEnv.getConfig().set("parallelism.default", "2");
        if (!idle.isEmpty()) {
            tEnv.getConfig().set("table.exec.source.idle-timeout", idle);
        }
        String columns = "(page STRING, user_id BIGINT, ts TIMESTAMP(3), "
                + "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND) ";
        if (scenario.equals("datagen")) {
            tEnv.executeSql("CREATE TABLE clicks " + columns + "WITH ('connector' = 'datagen', "
                    + "'rows-per-second' = '5', 'fields.page.length' = '1')");
        } else {
            tEnv.executeSql("CREATE TABLE clicks " + columns + "WITH ('connector' = 'filesystem', "
                    + "'path' = 'file://" + in + "', 'format' = 'csv', 'source.monitor-interval' = '5 s')");
        }
        tEnv.executeSql("CREATE TABLE clicks_per_page (window_start TIMESTAMP(3), page STRING, clicks BIGINT) "
                + "WITH ('connector' = 'print')");
        tEnv.executeSql("INSERT INTO clicks_per_page SELECT window_start, page, COUNT(*) FROM TABLE("
                + "TUMBLE(TABLE clicks, DESCRIPTOR(ts), INTERVAL '10' SECOND)) "
                + "GROUP BY window_start, window_end, page");
    }
}
