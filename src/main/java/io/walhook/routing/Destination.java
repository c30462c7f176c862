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

        /** The address of this event: {@code {schema}}, {@code {table}} and {@code {op}} substituted (empty where an event has none). */
        public String address(io.walhook.change.ChangeEvent event) {
            if (address.indexOf('{') < 0) {
                return address;
            }
            return address.replace("{schema}", event.schema() == null ? "" : event.schema())
                    .replace("{table}", event.table() == null ? "" : event.table())
                    .replace("{op}", event.op().wireName());
        }

        @Override
        public String toString() {
            return "amqp address " + address;
        }
    }
}
