// A job that runs until it is stopped: a slow source of numbers and a keyed running count, so it has state to
// checkpoint. The live loop checkpoints it into a directory that stops being writable, and kills the TaskManager it
// runs on. Compiles against Flink 1.20 and 2.x (no API that 2.0 removed).
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

public class CountingJob {
    public static void main(String[] args) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.fromSequence(0, Long.MAX_VALUE)
            .map(new MapFunction<Long, Long>() {
                @Override
                public Long map(Long value) throws Exception {
                    Thread.sleep(20);
                    return value % 16;
                }
            })
            .keyBy(value -> value)
            .reduce((a, b) -> a + b)
            .print();
        env.execute("orders-counting");
    }
}
