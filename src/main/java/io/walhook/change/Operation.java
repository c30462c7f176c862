package io.walhook.change;

/** The {@code op} of an event (docs/events.md). */
public enum Operation {
    INSERT("insert"),
    UPDATE("update"),
    DELETE("delete"),
    TRUNCATE("truncate"),
    MESSAGE("message"),
    /** A row as a backfill read it (docs/backfills.md): never a subscription's operation, never from the stream. */
    READ("read");

    /** What a subscription's {@code operations} can name: every operation but {@link #READ}. */
    public static final java.util.Set<Operation> SUBSCRIBABLE = java.util.Collections.unmodifiableSet(
            java.util.EnumSet.of(INSERT, UPDATE, DELETE, TRUNCATE, MESSAGE));

    private final String wireName;

    Operation(String wireName) {
        this.wireName = wireName;
    }

    /** The name in events, configuration and the API. */
    public String wireName() {
        return wireName;
    }
}
