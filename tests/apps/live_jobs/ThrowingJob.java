// A job whose user code throws on record 300 on every attempt. With the cluster's fixed-delay restart strategy
// (2 attempts) the job FAILS: restart-strategy-exhausted, with the user code's exception as the fault of every
// attempt. Compiles against Flink 1.20 and 2.x (no API that 2.0 removed).
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

public class ThrowingJob {
    public static void main(String[] args) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.fromSequence(0, Long.MAX_VALUE)
            .map(new MapFunction<Long, Long>() {
                @Override
                public Long map(Long value) throws Exception {
                    if (value == 300) {
                        throw new IllegalStateException("order 300 has no customer");
                    }
                    Thread.sleep(1);
                    return value;
                }
            })
            .print();
        env.execute("orders-enrichment");
    }
}
