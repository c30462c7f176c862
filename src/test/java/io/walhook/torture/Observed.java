package io.walhook.torture;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ThreadLocalRandom;

import org.apache.qpid.proton.message.Message;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import io.walhook.testing.AmqpPeer;
import io.walhook.testing.AmqpReceiver;
import io.walhook.testing.HarnessException;

/**
 * The receivers and what reached them: one HTTP receiver for the webhook subscriptions (told apart
 * by path) that misbehaves as the run tells it, and an AMQP peer. An event counts as delivered
 * when the receiver answered 2xx for the request carrying it, or the peer accepted its message;
 * arrivals are kept in that order per subscription.
 */
final class Observed implements AutoCloseable {

    private static final ObjectMapper JSON = new ObjectMapper();

    /** How the HTTP receiver answers, for the paths starting with {@link #prefix} (all when null). */
    record Behaviour(String prefix, int failPercent, int status, String retryAfter, int slowPercent, long slowMillis,
            boolean goneOnce) {
        static final Behaviour HEALTHY = new Behaviour(null, 0, 204, null, 0, 0, false);

        boolean applies(String path) {
            return prefix == null || path.startsWith(prefix);
        }
    }

    /**
     * One event as a receiver got it: its id, the token of its change, op, and the TOASTed text when
     * present; {@code sentAt} the request's {@code webhook-timestamp} (when walhook made that attempt,
     * in seconds), {@link Long#MAX_VALUE} for an AMQP message; {@code backfill} the id of the backfill
     * a read event belongs to (null for a change).
     */
    record Arrival(String subscription, String id, String token, String op, String table, String big, boolean bigPresent,
            boolean bigUnchanged, long sentAt, String backfill) {
        boolean read() {
            return backfill != null;
        }
    }

    private final HttpServer server;
    private final ExecutorService executor = Executors.newCachedThreadPool(r -> {
        Thread t = new Thread(r, "torture-receiver");
        t.setDaemon(true);
        return t;
    });
    private final AmqpPeer amqp;
    private final java.util.concurrent.atomic.AtomicReference<Behaviour> behaviourRef =
            new java.util.concurrent.atomic.AtomicReference<>(Behaviour.HEALTHY);
    private final long requestTimeoutMillis;
    private final List<Arrival> arrivals = new ArrayList<>();
    private final List<String> malformed = new ArrayList<>();
    private final Map<String, Integer> statuses = new LinkedHashMap<>();
    private int amqpSeen;

    /** @param requestTimeoutMillis walhook's request timeout: an answer later than that is no delivery */
    Observed(long requestTimeoutMillis) {
        this.requestTimeoutMillis = requestTimeoutMillis;
        amqp = AmqpPeer.start();
        try {
            server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 256);
        } catch (IOException e) {
            amqp.close();
            throw new HarnessException("cannot start the torture receiver: " + e.getMessage(), e);
        }
        server.setExecutor(executor);
        server.createContext("/", this::handle);
        server.start();
    }

    String url(String path) {
        return "http://127.0.0.1:" + server.getAddress().getPort() + path;
    }

    String amqpUrl() {
        return amqp.url();
    }

    /** What every request to {@code /hooks/...} must carry: its URL's query, one header, a signature by the secret. */
    private record Credentials(String query, String header, String value, byte[] key) {
    }

    private volatile Credentials hooksCredentials;

    /**
     * Checks from now on that every request to {@code /hooks/...} has this query, this header value
     * and a Standard Webhooks signature by this secret ({@code whsec_...}): an edit that loses one
     * (a PATCH of something else) shows as a malformed delivery, the values not repeated.
     */
    void hooksCredentials(String query, String header, String value, String secret) {
        hooksCredentials = new Credentials(query, header, value,
                java.util.Base64.getDecoder().decode(secret.substring("whsec_".length())));
    }

    private void checkCredentials(HttpExchange exchange, String path, String body) {
        Credentials expected = hooksCredentials;
        if (expected == null || !path.startsWith("/hooks/")) {
            return;
        }
        List<String> wrong = new ArrayList<>();
        if (!expected.query().equals(exchange.getRequestURI().getRawQuery())) {
            wrong.add("not the URL's query string");
        }
        if (!expected.value().equals(exchange.getRequestHeaders().getFirst(expected.header()))) {
            wrong.add("not the " + expected.header() + " header's value");
        }
        try {
            javax.crypto.Mac mac = javax.crypto.Mac.getInstance("HmacSHA256");
            mac.init(new javax.crypto.spec.SecretKeySpec(expected.key(), "HmacSHA256"));
            String signed = exchange.getRequestHeaders().getFirst("webhook-id") + "."
                    + exchange.getRequestHeaders().getFirst("webhook-timestamp") + "." + body;
            String signature = "v1," + java.util.Base64.getEncoder().encodeToString(
                    mac.doFinal(signed.getBytes(StandardCharsets.UTF_8)));
            String given = exchange.getRequestHeaders().getFirst("webhook-signature");
            if (given == null || !List.of(given.split(" ")).contains(signature)) {
                wrong.add("not signed by the secret");
            }
        } catch (java.security.GeneralSecurityException e) {
            wrong.add("signature not checked: " + e);
        }
        if (!wrong.isEmpty()) {
            synchronized (this) {
                malformed.add("a request to " + path + ": " + String.join(", ", wrong));
            }
        }
    }

    void behave(Behaviour behaviour) {
        behaviourRef.set(behaviour);
    }

    /** The AMQP peer rejects this share of messages from now on. */
    void amqpRejects(int percent) {
        amqp.reject(message -> percent > 0 && ThreadLocalRandom.current().nextInt(100) < percent);
    }

    void restartAmqp() {
        amqp.restart();
    }

    private void handle(HttpExchange exchange) throws IOException {
        try (exchange; InputStream in = exchange.getRequestBody()) {
            String body = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            String path = exchange.getRequestURI().getPath();
            checkCredentials(exchange, path, body);
            Behaviour b = behaviourRef.get();
            int status = 204;
            String retryAfter = null;
            if (b.applies(path)) {
                ThreadLocalRandom random = ThreadLocalRandom.current();
                if (b.goneOnce()) {
                    if (behaviourRef.compareAndSet(b, Behaviour.HEALTHY)) {
                        status = 410; // once: the requests that raced it are answered as healthy
                    }
                } else if (random.nextInt(100) < b.slowPercent()) {
                    try {
                        Thread.sleep(b.slowMillis()); // a slow receiver
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                        return;
                    }
                    if (b.slowMillis() >= requestTimeoutMillis) {
                        // walhook gave up on it: answered, but not delivered as far as walhook knows
                        exchange.sendResponseHeaders(204, -1);
                        return;
                    }
                } else if (random.nextInt(100) < b.failPercent()) {
                    status = b.status();
                    retryAfter = b.retryAfter();
                }
            }
            if (status / 100 == 2) {
                record(path, body, exchange.getRequestHeaders().getFirst("webhook-timestamp"));
            }
            synchronized (this) {
                statuses.merge(path.split("/")[1] + " " + status, 1, Integer::sum);
            }
            if (retryAfter != null) {
                exchange.getResponseHeaders().add("Retry-After", retryAfter);
            }
            exchange.sendResponseHeaders(status, -1);
        }
    }

    private void record(String path, String body, String timestamp) {
        String subscription = path.split("/")[1];
        try {
            long sentAt = Long.parseLong(timestamp);
            JsonNode root = JSON.readTree(body);
            List<JsonNode> events = new ArrayList<>();
            collect(root, events);
            synchronized (this) {
                for (JsonNode event : events) {
                    arrivals.add(arrival(subscription, event, sentAt));
                }
            }
        } catch (IOException | RuntimeException e) {
            synchronized (this) {
                malformed.add(subscription + ": " + e + " in " + body.substring(0, Math.min(200, body.length())));
            }
        }
    }

    /** The events of a body: one, a JSON array of them, a structured CloudEvent or a batch of those. */
    static void collect(JsonNode node, List<JsonNode> events) {
        if (node.isArray()) {
            node.forEach(n -> collect(n, events));
        } else if (node.has("specversion")) {
            collect(node.get("data"), events);
        } else {
            events.add(node);
        }
    }

    static Arrival arrival(String subscription, JsonNode event, long sentAt) {
        String op = event.path("op").asText();
        String id = event.path("id").asText();
        String token;
        String big = null;
        boolean bigPresent = false;
        boolean bigUnchanged = false;
        switch (op) {
            case "message" -> token = event.path("message").path("content").asText();
            case "truncate" -> token = "T:" + event.path("table").asText() + ":" + event.path("tx").path("xid").asLong();
            case "delete" -> token = "D:" + event.path("table").asText() + ":" + event.path("key").path("id").asText() + ":"
                    + event.path("tx").path("xid").asLong();
            default -> {
                token = "w" + event.path("new").path("w").asLong();
                JsonNode value = event.path("new").get("big");
                if (value != null) {
                    bigPresent = true;
                    big = value.isNull() ? null : value.asText();
                }
                for (JsonNode column : event.path("unchanged")) {
                    bigUnchanged |= column.asText().equals("big");
                }
            }
        }
        String table = event.path("table").isNull() ? null : event.path("table").asText(null);
        String backfill = op.equals("read") ? event.path("backfill").path("id").asText("?") : null;
        return new Arrival(subscription, id, token, op, table, big, bigPresent, bigUnchanged, sentAt, backfill);
    }

    /** Everything delivered so far: webhook arrivals in order, then the AMQP peer's accepted messages in settlement order. */
    synchronized List<Arrival> arrivals() {
        List<Message> accepted = amqp.accepted();
        for (int i = amqpSeen; i < accepted.size(); i++) {
            Message message = accepted.get(i);
            try {
                JsonNode event = JSON.readTree(AmqpReceiver.body(message));
                Arrival arrival = arrival("queue", event, Long.MAX_VALUE);
                if (!arrival.id().equals(String.valueOf(message.getMessageId()))) {
                    malformed.add("queue: message-id " + message.getMessageId() + " is not the event's id " + arrival.id());
                }
                arrivals.add(arrival);
            } catch (IOException | RuntimeException e) {
                malformed.add("queue: " + e);
            }
        }
        amqpSeen = accepted.size();
        return List.copyOf(arrivals);
    }

    synchronized List<String> malformed() {
        return List.copyOf(malformed);
    }

    synchronized Map<String, Integer> statuses() {
        return Map.copyOf(statuses);
    }

    @Override
    public void close() {
        server.stop(0);
        executor.shutdownNow();
        amqp.close();
    }
}
