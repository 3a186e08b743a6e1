package com.acme.common;

/** acme-common's decoder: generic, so callers cast the result to their own Event type. */
public final class EventCodec {
    private EventCodec() {}

    @SuppressWarnings("unchecked")
    public static <T> T decode(String wire) {
        return (T) new Event(wire.trim());
    }
}
