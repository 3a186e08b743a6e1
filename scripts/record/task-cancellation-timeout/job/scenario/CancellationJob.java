package scenario;

import org.apache.flink.api.common.functions.RichMapFunction;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * An order-enrichment job whose map function reacts to cancellation in one of four ways (--mode):
 *   normal          sleeps 1 ms per record and stops when interrupted (a clean cancellation)
 *   swallow         after --after records waits for a "lookup service" in a loop that catches InterruptedException
 *                   and retries: the task thread never leaves map(), whatever Flink does
 *   patient         like swallow, but gives up after --give-up interrupts and lets the task end
 *   slow-close      close() flushes --batches buffered batches of --batch-ms each, busy and not interruptible
 *                   (a synchronous client flush): the close takes batches * batch-ms
 * Only APIs that Flink 1.12 to 2.x share are used, so the same source compiles against every release.
 */
public class CancellationJob {

    public static void main(String[] args) throws Exception {
        String mode = arg(args, "mode", "normal");
        long after = Long.parseLong(arg(args, "after", "2000"));
        int batches = Integer.parseInt(arg(args, "batches", "10"));
        long batchMs = Long.parseLong(arg(args, "batch-ms", "1000"));
        int giveUp = Integer.parseInt(arg(args, "give-up", "3"));
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        env.setParallelism(1);
        env.fromSequence(0, Long.MAX_VALUE)
                .name("order-ids")
                .map(new EnrichOrders(mode, after, batches, batchMs, giveUp))
                .name("enrich-orders")
                .filter(v -> v < 0)
                .print()
                .name("print-sink");
        env.execute(arg(args, "name", "order-enrichment"));
    }

    private static String arg(String[] args, String name, String fallback) {
        for (int i = 0; i + 1 < args.length; i++) {
            if (args[i].equals("--" + name)) {
                return args[i + 1];
            }
        }
        return fallback;
    }

    public static class EnrichOrders extends RichMapFunction<Long, Long> {
        private static final Logger LOG = LoggerFactory.getLogger(EnrichOrders.class);
        private final String mode;
        private final long after;
        private final int batches;
        private final long batchMs;
        private final int giveUp;
        private long seen;
        private volatile long sink;

        EnrichOrders(String mode, long after, int batches, long batchMs, int giveUp) {
            this.giveUp = giveUp;
            this.mode = mode;
            this.after = after;
            this.batches = batches;
            this.batchMs = batchMs;
        }

        @Override
        public Long map(Long id) throws Exception {
            if (++seen == after && (mode.equals("swallow") || mode.equals("patient"))) {
                LOG.info("Waiting for the customer lookup service before enriching order {}", id);
                awaitLookupService();
            }
            Thread.sleep(1);
            return id;
        }

        private void awaitLookupService() {
            int interrupts = 0;
            while (true) {
                try {
                    Thread.sleep(500);
                } catch (InterruptedException e) {
                    // retries until the service answers, and it never does ("patient" gives up after a few)
                    if (mode.equals("patient") && ++interrupts >= giveUp) {
                        LOG.info("Giving up on the customer lookup service after {} interrupts", interrupts);
                        Thread.currentThread().interrupt();
                        return;
                    }
                }
            }
        }

        @Override
        public void close() throws Exception {
            if (mode.equals("slow-close")) {
                LOG.info("Flushing {} buffered batches to the order store", batches);
                for (int i = 1; i <= batches; i++) {
                    flushBatch();
                    LOG.info("Flushed batch {}/{}", i, batches);
                }
            }
            super.close();
        }

        private void flushBatch() {
            long end = System.nanoTime() + batchMs * 1_000_000L;
            double x = 0;
            while (System.nanoTime() < end) {
                x += Math.sqrt(x + 1);
            }
            sink = (long) x;
        }
    }
}
