package io.walhook.change;

/** The {@code op} of an event (docs/events.md). */
public enum Operation {
    INSERT("insert"),
    UPDATE("update"),
    DELETE("delete"),
    TRUNCATE("truncate"),
    MESSAGE("message");

    private final String wireName;

    Operation(String wireName) {
        this.wireName = wireName;
    }

    /** The name in events, configuration and the API. */
    public String wireName() {
        return wireName;
    }
}
