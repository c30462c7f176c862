package io.walhook.testing;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.function.Consumer;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

/**
 * A real HTTP receiver on 127.0.0.1 that records every request it gets and answers 204.
 * Tests read {@link #requests()}; the quick start prints them as they arrive.
 */
public final class WebhookReceiver implements AutoCloseable {

    /**
     * The {@code webhook-id} walhook gives a batch of events with these ids, in order, as
     * docs/events.md says: the first id, {@code +}, the count, {@code -}, and the first 16 hex
     * digits of SHA-256 over the ids, each followed by a newline.
     */
    public static String batchId(List<String> ids) {
        try {
            java.security.MessageDigest sha = java.security.MessageDigest.getInstance("SHA-256");
            for (String id : ids) {
                sha.update((id + "\n").getBytes(StandardCharsets.UTF_8));
            }
            return ids.get(0) + "+" + ids.size() + "-" + java.util.HexFormat.of().formatHex(sha.digest()).substring(0, 16);
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** {@link #batchId(List)} of a batch as a receiver gets it: a JSON array of events, each with its {@code id}. */
    public static String batchId(com.fasterxml.jackson.databind.JsonNode batch) {
        List<String> ids = new java.util.ArrayList<>();
        batch.forEach(event -> ids.add(event.get("id").asText()));
        return batchId(ids);
    }

    /** One request as received: method, path, headers (lower-case names), body, arrival time and query (or null). */
    public record Request(String method, String path, Map<String, List<String>> headers, String body,
            java.time.Instant receivedAt, String query) {
        public String header(String name) {
            List<String> values = headers.get(name.toLowerCase(java.util.Locale.ROOT));
            return values == null || values.isEmpty() ? null : values.get(0);
        }
    }

    private final HttpServer server;
    private final ExecutorService executor;
    private final List<Request> requests = new CopyOnWriteArrayList<>();
    private final Consumer<Request> listener;
    private volatile java.util.function.ToIntFunction<Request> responder = request -> 204;
    private volatile java.util.function.Function<Request, Map<String, String>> responseHeaders = request -> Map.of();

    private WebhookReceiver(Consumer<Request> listener) throws IOException {
        this.listener = listener;
        this.server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 64);
        this.executor = Executors.newFixedThreadPool(16, r -> {
            Thread t = new Thread(r, "webhook-receiver");
            t.setDaemon(true);
            return t;
        });
        server.setExecutor(executor);
        server.createContext("/", this::handle);
        server.start();
    }

    public static WebhookReceiver start() {
        return start(request -> { });
    }

    public static WebhookReceiver start(Consumer<Request> listener) {
        try {
            return new WebhookReceiver(listener);
        } catch (IOException e) {
            throw new HarnessException("cannot start the webhook receiver: " + e.getMessage(), e);
        }
    }

    private void handle(HttpExchange exchange) throws IOException {
        try (exchange; InputStream in = exchange.getRequestBody()) {
            String body = new String(in.readAllBytes(), StandardCharsets.UTF_8);
            Map<String, List<String>> headers = new java.util.TreeMap<>();
            exchange.getRequestHeaders().forEach((k, v) -> headers.put(k.toLowerCase(java.util.Locale.ROOT), List.copyOf(v)));
            Request request = new Request(exchange.getRequestMethod(), exchange.getRequestURI().getPath(), headers, body,
                    java.time.Instant.now(), exchange.getRequestURI().getRawQuery());
            requests.add(request);
            listener.accept(request);
            int status = responder.applyAsInt(request);
            Map<String, String> answerHeaders = responseHeaders.apply(request);
            if ((status == 429 || status == 503) && !answerHeaders.containsKey("Retry-After")) {
                exchange.getResponseHeaders().add("Retry-After", "1");
            }
            answerHeaders.forEach((name, value) -> exchange.getResponseHeaders().add(name, value));
            exchange.sendResponseHeaders(status, -1);
        }
    }

    /**
     * Chooses each response's status (204 unless told otherwise); 429 and 503 come with
     * {@code Retry-After: 1}.
     */
    public void respond(java.util.function.ToIntFunction<Request> responder) {
        this.responder = responder;
    }

    /** Headers to answer each request with (a 429 or 503 without a Retry-After of its own gets {@code Retry-After: 1}). */
    public void respondHeaders(java.util.function.Function<Request, Map<String, String>> headers) {
        this.responseHeaders = headers;
    }

    /** The requests received on one path, in arrival order. */
    public List<Request> requests(String path) {
        return requests.stream().filter(r -> r.path().equals(path)).toList();
    }

    /** The URL of a path on this receiver. */
    public String url(String path) {
        return "http://127.0.0.1:" + server.getAddress().getPort() + path;
    }

    public List<Request> requests() {
        return List.copyOf(requests);
    }

    @Override
    public void close() {
        server.stop(0);
        executor.shutdownNow();
    }
}
