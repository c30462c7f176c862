package io.walhook.routing;

import java.util.Arrays;
import java.util.stream.Collectors;

/** How a subscription wants its events written (docs/events.md, "CloudEvents"). */
public enum EventFormat {
    /** The event object itself, {@code application/json}. */
    JSON("json"),
    /** A structured CloudEvent, {@code application/cloudevents+json}, with the event as {@code data}. */
    CLOUDEVENTS("cloudevents"),
    /** Binary content mode: CloudEvents attributes as {@code ce-*} headers, the event as the body. */
    CLOUDEVENTS_BINARY("cloudevents-binary");

    private final String wireName;

    EventFormat(String wireName) {
        this.wireName = wireName;
    }

    public String wireName() {
        return wireName;
    }

    /** Whether a request may carry several events: binary CloudEvents carry one, in headers and body. */
    public boolean batches() {
        return this != CLOUDEVENTS_BINARY;
    }

    /** @throws IllegalArgumentException listing the formats there are */
    public static EventFormat parse(String text) {
        for (EventFormat format : values()) {
            if (format.wireName.equals(text.strip())) {
                return format;
            }
        }
        throw new IllegalArgumentException("'" + text + "' is not a format; use one of "
                + Arrays.stream(values()).map(EventFormat::wireName).collect(Collectors.joining(", ")));
    }
}
