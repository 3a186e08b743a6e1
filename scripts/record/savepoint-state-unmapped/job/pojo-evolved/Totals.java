package com.example.restore;

/** The POJO with one more field: a change Flink's PojoSerializer migrates on restore (schema evolution). */
public class Totals {
    public long count;
    public long sum;
    public long largest;

    public Totals() {}

    static Totals add(Totals t, long value) {
        Totals out = new Totals();
        out.count = (t == null ? 0 : t.count) + 1;
        out.sum = (t == null ? 0 : t.sum) + value;
        out.largest = Math.max(t == null ? 0 : t.largest, value);
        return out;
    }
}
