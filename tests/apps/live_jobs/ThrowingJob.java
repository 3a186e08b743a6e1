// A job whose user code throws after a few records on every attempt; two restarts, then the job fails
// (restart-strategy-exhausted, with user-code-exception as the fault of every attempt).
import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.restartstrategy.RestartStrategies;
import org.apache.flink.api.common.time.Time;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

public class ThrowingJob {
    public static void main(String[] args) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setRestartStrategy(RestartStrategies.fixedDelayRestart(2, Time.seconds(1)));
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
