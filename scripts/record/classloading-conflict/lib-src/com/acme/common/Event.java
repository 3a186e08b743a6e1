package com.acme.common;

import java.io.Serializable;

/** The event model of acme-common 1.0, the shared library installed in Flink's lib/. */
public class Event implements Serializable {
    public final String key;

    public Event(String key) {
        this.key = key;
    }

    @Override
    public String toString() {
        return "Event(" + key + ")";
    }
}
