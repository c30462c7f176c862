package io.walhook.api;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.time.Instant;
import java.util.Map;
import java.util.UUID;

import io.quarkus.runtime.annotations.RegisterForReflection;
import io.walhook.delivery.Transport;
import io.walhook.delivery.WebhookClient;
import io.walhook.pipeline.ReplicationSource;
import io.walhook.routing.Destination;
import io.walhook.routing.Subscription;

/**
 * {@code POST /subscriptions/{id}/test}: one test event ({@code "op": "test"}) sent once to the
 * subscription's destination, through the client and transport its deliveries use, and the
 * outcome reported; nothing is retried or recorded.
 */
final class TestFire {

    /** The answer (openapi.yaml's testSubscription): {@code status} when a webhook answered, {@code error} when none came. */
    @RegisterForReflection
    public record Outcome(String eventId, boolean delivered, Integer status, String error, long latencyMs) {
    }

    private final ReplicationSource source;
    private final Duration timeout;
    private final boolean privateAllowed;

    TestFire(ReplicationSource source, Duration timeout, boolean privateAllowed) {
        this.source = source;
        this.timeout = timeout;
        this.privateAllowed = privateAllowed;
    }

    Outcome fire(Subscription subscription) {
        String eventId = "test_" + UUID.randomUUID();
        String event = "{\"id\":" + quoted(eventId) + ",\"op\":\"test\",\"subscription\":" + quoted(subscription.name())
                + ",\"time\":" + quoted(Instant.now().toString()) + "}";
        byte[] body = event.getBytes(StandardCharsets.UTF_8);
        long start = System.nanoTime();
        try {
            if (subscription.destination() instanceof Destination.Amqp amqp) {
                // the address the test event resolves to: {schema} and {table} empty, {op} test
                String address = amqp.address(new String[] {"", "", "test"});
                Transport.Attempt attempt = source.transport(subscription)
                        .attempt(new Transport.Request(eventId, body, "application/json", Map.of(), address), timeout);
                boolean delivered = attempt.outcome() == Transport.Outcome.DELIVERED;
                return new Outcome(eventId, delivered, null, delivered ? null : attempt.problem(), since(start));
            }
            // an API-created subscription checks the address it connects to, as its deliveries do
            boolean publicOnly = !subscription.readOnly() && !privateAllowed;
            try {
                int status = WebhookClient.await(source.webhooks().postAsync((Destination.Webhook) subscription.destination(),
                        eventId, body, "application/json", Map.of(), Instant.now().getEpochSecond(), timeout, publicOnly),
                        timeout).status();
                return new Outcome(eventId, status >= 200 && status < 300, status, null, since(start));
            } catch (IOException e) {
                return new Outcome(eventId, false, null, e.getMessage(), since(start));
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ApiProblem(503, "Service Unavailable", "interrupted while test-firing", null);
        }
    }

    private static long since(long start) {
        return (System.nanoTime() - start) / 1_000_000;
    }

    private static String quoted(String text) {
        return com.fasterxml.jackson.databind.node.TextNode.valueOf(text).toString();
    }
}
