package io.walhook.routing;

import java.net.URI;
import java.util.List;
import java.util.Map;

/** Where a subscription's events go. */
public sealed interface Destination {

    /**
     * An HTTP endpoint. {@code secrets} are Standard Webhooks signing keys (the decoded part of
     * {@code whsec_...}); several at once sign with each, for rotation. Never logged or returned.
     */
    record Webhook(URI url, List<byte[]> secrets, Map<String, String> headers) implements Destination {
        public Webhook {
            secrets = List.copyOf(secrets);
            headers = Map.copyOf(headers);
        }

        @Override
        public String toString() {
            return "webhook " + url + (secrets.isEmpty() ? "" : " (signed)");
        }
    }

    /** An AMQP 1.0 address; {@code {schema}}, {@code {table}} and {@code {op}} are substituted per event. */
    record Amqp(String address) implements Destination {
    }
}
