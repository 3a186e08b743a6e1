// A failure enricher (Flink 1.18+) as a plugin: it labels every failure with the team that owns the job and whether
// the job's own code threw it, so the exception history carries failureLabels.
package com.example.orders;

import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.failure.FailureEnricher;
import org.apache.flink.core.failure.FailureEnricherFactory;

public class OrdersFailureEnricher implements FailureEnricher {
    @Override
    public Set<String> getOutputKeys() {
        return Set.of("type", "team");
    }

    @Override
    public CompletableFuture<Map<String, String>> processFailure(Throwable cause, Context context) {
        Throwable root = cause;
        while (root.getCause() != null) {
            root = root.getCause();
        }
        String type = root instanceof IllegalStateException ? "USER" : "SYSTEM";
        return CompletableFuture.completedFuture(Map.of("type", type, "team", "orders"));
    }

    public static class Factory implements FailureEnricherFactory {
        @Override
        public FailureEnricher createFailureEnricher(Configuration conf) {
            return new OrdersFailureEnricher();
        }
    }
}
