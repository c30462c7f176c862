package io.walhook.bench;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

/**
 * The benchmark's webhook destination: counts requests, events and bytes, answers 204, keeps
 * nothing. A body that is a JSON array is a batch and counts as its elements (found by a scan
 * of the top level, not parsed); any other non-empty body is one event.
 */
final class CountingSink implements Sink {

    private final HttpServer server;
    private final ExecutorService executor;
    private final Tally tally;
    private final LongAdder requests = new LongAdder();
    private final LongAdder batchRequests = new LongAdder();

    private CountingSink(long target, int threads) throws IOException {
        this.tally = new Tally(target);
        this.server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 128);
        this.executor = Executors.newFixedThreadPool(threads, r -> {
            Thread t = new Thread(r, "bench-sink");
            t.setDaemon(true);
            return t;
        });
        server.setExecutor(executor);
        server.createContext("/", this::handle);
        server.start();
    }

    /** A sink that notes the moment it has received {@code target} events. */
    static CountingSink start(long target, int threads) throws IOException {
        return new CountingSink(target, threads);
    }

    String url(String path) {
        return "http://127.0.0.1:" + server.getAddress().getPort() + path;
    }

    @Override
    public java.util.Map<String, String> subscription(String prefix, int batch) {
        return java.util.Map.of(prefix + "URL", url("/bench"),
                prefix + "BATCH_MAX_EVENTS", Integer.toString(batch),
                // let a lane wait a little for its batch to fill: fewer, fuller requests
                prefix + "BATCH_MAX_WAIT_MS", "20");
    }

    private void handle(HttpExchange exchange) throws IOException {
        try (exchange; InputStream in = exchange.getRequestBody()) {
            byte[] body = in.readAllBytes();
            long n;
            if (isArray(body)) {
                n = countElements(body);
                batchRequests.increment();
            } else {
                n = body.length == 0 ? 0 : 1;
            }
            requests.increment();
            tally.record(n, body.length);
            exchange.sendResponseHeaders(204, -1);
        }
    }

    private static boolean isArray(byte[] body) {
        for (byte b : body) {
            if (b == '[') {
                return true;
            }
            if (b != ' ' && b != '\n' && b != '\r' && b != '\t') {
                return false;
            }
        }
        return false;
    }

    /** The number of elements of the top-level JSON array {@code body} (which must start with '['). */
    static long countElements(byte[] body) {
        int depth = 0;
        boolean inString = false;
        boolean escaped = false;
        boolean any = false;
        long commas = 0;
        for (byte b : body) {
            if (inString) {
                if (escaped) {
                    escaped = false;
                } else if (b == '\\') {
                    escaped = true;
                } else if (b == '"') {
                    inString = false;
                }
                continue;
            }
            switch (b) {
                case ' ', '\n', '\r', '\t' -> { }
                case '"' -> {
                    inString = true;
                    any |= depth == 1;
                }
                case '[', '{' -> {
                    any |= depth == 1;
                    depth++;
                }
                case ']', '}' -> depth--;
                case ',' -> {
                    if (depth == 1) {
                        commas++;
                    }
                }
                default -> any |= depth == 1;
            }
        }
        return any ? commas + 1 : 0;
    }

    @Override
    public Tally tally() {
        return tally;
    }

    @Override
    public long requests() {
        return requests.sum();
    }

    @Override
    public long batchRequests() {
        return batchRequests.sum();
    }

    @Override
    public void close() {
        server.stop(0);
        executor.shutdownNow();
    }
}
