package com.example.restore;

/** The same class made immutable: no no-argument constructor, so it is no longer a POJO and Flink falls back to Kryo. */
public class Totals {
    private final long count;
    private final long sum;

    public Totals(long count, long sum) {
        this.count = count;
        this.sum = sum;
    }

    static Totals add(Totals t, long value) {
        return t == null ? new Totals(1, value) : new Totals(t.count + 1, t.sum + value);
    }
}
