package io.walhook.routing;

/** A subscription body walhook cannot accept; {@link #field()} is a JSON pointer to the culprit. */
public final class SubscriptionException extends RuntimeException {

    private final String field;

    public SubscriptionException(String field, String detail) {
        super((field.isEmpty() ? "the body" : field) + " " + detail);
        this.field = field;
    }

    public String field() {
        return field;
    }
}
