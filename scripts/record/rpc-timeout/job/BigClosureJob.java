import java.util.Random;

import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * A job whose map function carries a lookup table of {@code size} random bytes in its closure, so the task
 * deployment message sent to the TaskManager is at least that big (random bytes do not compress). With
 * {@code size} 0 it is a plain long-running job (used for savepoints).
 */
public class BigClosureJob {
    public static void main(String[] args) throws Exception {
        int size = args.length > 0 ? Integer.parseInt(args[0]) : 0;
        byte[] table = new byte[size];
        new Random(42).nextBytes(table);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.enableCheckpointing(5000);
        env.fromSequence(1, Long.MAX_VALUE)
                .map(new Enrich(table)).name("enrich-with-lookup-table")
                .filter(x -> x < 0).name("drop-all")
                .print();
        env.execute("lookup-enrichment");
    }

    static class Enrich implements MapFunction<Long, Long> {
        private final byte[] table;

        Enrich(byte[] table) { this.table = table; }

        @Override
        public Long map(Long value) throws Exception {
            if (value % 1000 == 0) Thread.sleep(1);
            return table.length == 0 ? value : value + table[(int) (value % table.length)];
        }
    }
}
