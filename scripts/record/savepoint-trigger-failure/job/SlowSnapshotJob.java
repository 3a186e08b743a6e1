import org.apache.flink.api.common.functions.MapFunction;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.runtime.state.FunctionInitializationContext;
import org.apache.flink.runtime.state.FunctionSnapshotContext;
import org.apache.flink.streaming.api.checkpoint.CheckpointedFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

/**
 * A long-running job whose stateful map takes {@code snapshotSleepMs} to snapshot its state (a stand-in for large
 * or slow state: every checkpoint and savepoint takes at least that long) and {@code initSleepMs} to initialise it
 * (its task stays INITIALIZING that long). Periodic checkpoints every {@code intervalMs} (0: none).
 */
public class SlowSnapshotJob {
    public static void main(String[] args) throws Exception {
        long snapshotSleepMs = args.length > 0 ? Long.parseLong(args[0]) : 0;
        long initSleepMs = args.length > 1 ? Long.parseLong(args[1]) : 0;
        long intervalMs = args.length > 2 ? Long.parseLong(args[2]) : 0;
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        if (intervalMs > 0) env.enableCheckpointing(intervalMs);
        env.fromSequence(1, Long.MAX_VALUE)
                .map(new SlowState(snapshotSleepMs, initSleepMs)).uid("slow-state").name("slow-state")
                .filter(x -> x < 0).name("drop-all")
                .print();
        env.execute("orders-enrichment");
    }

    static class SlowState implements MapFunction<Long, Long>, CheckpointedFunction {
        private final long snapshotSleepMs;
        private final long initSleepMs;
        private transient ListState<Long> seenState;
        private long seen;

        SlowState(long snapshotSleepMs, long initSleepMs) {
            this.snapshotSleepMs = snapshotSleepMs;
            this.initSleepMs = initSleepMs;
        }

        @Override
        public Long map(Long value) throws Exception {
            if (value % 1000 == 0) Thread.sleep(1);
            seen++;
            return value;
        }

        @Override
        public void snapshotState(FunctionSnapshotContext context) throws Exception {
            Thread.sleep(snapshotSleepMs);
            seenState.clear();
            seenState.add(seen);
        }

        @Override
        public void initializeState(FunctionInitializationContext context) throws Exception {
            seenState = context.getOperatorStateStore().getListState(new ListStateDescriptor<>("seen", Long.class));
            for (Long s : seenState.get()) seen = s;
            Thread.sleep(initSleepMs);
        }
    }
}
