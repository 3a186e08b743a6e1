package com.acme.common;

import java.io.Serializable;

/** The event model as the acme-model artifact packs it into the job jar. */
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
