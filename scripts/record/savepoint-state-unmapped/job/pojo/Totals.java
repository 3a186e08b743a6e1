package com.example.restore;

/** A POJO (public no-argument constructor, public fields): Flink serializes it with its PojoSerializer. */
public class Totals {
    public long count;
    public long sum;

    public Totals() {}

    static Totals add(Totals t, long value) {
        Totals out = new Totals();
        out.count = (t == null ? 0 : t.count) + 1;
        out.sum = (t == null ? 0 : t.sum) + value;
        return out;
    }
}
