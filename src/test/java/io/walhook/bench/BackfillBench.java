package io.walhook.bench;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.URI;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import io.walhook.testing.EmbeddedPostgres;
import io.walhook.testing.WalhookProcess;

/**
 * Backfills, measured in one run against the drain of the same rows through the stream: a
 * backfill of a table of {@code --rows} rows into a local webhook alone, and again while a writer
 * commits single-row transactions at {@code --tps}; and the commit-to-arrival latency of those
 * live changes with and without the backfill running. Reported as ratios, never asserted.
 *
 * <pre>
 *   ./scripts/bench-backfill                     # 1,000,000 rows, batches of 500 (as scripts/bench), writes at 500 tx/s
 *   ./scripts/bench-backfill --rows 200000 --tps 1000
 * </pre>
 */
public final class BackfillBench {

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String TOKEN = "bench";

    /**
     * The webhook: counts read events and other events by a scan of the body (no parsing, so the
     * sink does not cap the rate), and while measuring parses the requests that carry live changes
     * for their commit-to-arrival latency.
     */
    private static final class Sink implements AutoCloseable {
        private static final byte[] READ = "\"op\":\"read\"".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
        private static final byte[] OP = "\"op\":\"".getBytes(java.nio.charset.StandardCharsets.US_ASCII);
        final HttpServer server;
        final ExecutorService executor = Executors.newFixedThreadPool(4, r -> {
            Thread t = new Thread(r, "bench-backfill-sink");
            t.setDaemon(true);
            return t;
        });
        final java.util.concurrent.atomic.LongAdder reads = new java.util.concurrent.atomic.LongAdder();
        final java.util.concurrent.atomic.LongAdder changes = new java.util.concurrent.atomic.LongAdder();
        final List<Long> latenciesMicros = Collections.synchronizedList(new ArrayList<>());
        volatile boolean measuring;

        Sink() throws IOException {
            server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 128);
            server.setExecutor(executor);
            server.createContext("/", this::handle);
            server.start();
        }

        private void handle(HttpExchange exchange) throws IOException {
            try (exchange; InputStream in = exchange.getRequestBody()) {
                byte[] body = in.readAllBytes();
                Instant now = Instant.now();
                int all = count(body, OP);
                int read = count(body, READ);
                reads.add(read);
                changes.add(all - read);
                if (measuring && all > read) {
                    JsonNode events = JSON.readTree(body);
                    for (JsonNode event : events.isArray() ? events : List.of(events)) {
                        if (!event.get("op").asText().equals("read")) {
                            Instant committed = Instant.parse(event.at("/tx/commit_time").asText());
                            latenciesMicros.add(Duration.between(committed, now).toNanos() / 1000);
                        }
                    }
                }
                exchange.sendResponseHeaders(204, -1);
            }
        }

        /** Occurrences of {@code needle} in {@code body} (the writer puts no space inside {@code "op":"..."}). */
        private static int count(byte[] body, byte[] needle) {
            int found = 0;
            outer:
            for (int i = 0; i <= body.length - needle.length; i++) {
                for (int j = 0; j < needle.length; j++) {
                    if (body[i + j] != needle[j]) {
                        continue outer;
                    }
                }
                found++;
                i += needle.length - 1;
            }
            return found;
        }

        String url() {
            return "http://127.0.0.1:" + server.getAddress().getPort() + "/hook";
        }

        @Override
        public void close() {
            server.stop(0);
            executor.shutdownNow();
        }
    }

    /** Commits single-row transactions at a steady rate until stopped. */
    private static final class Writer implements AutoCloseable {
        final AtomicBoolean running = new AtomicBoolean(true);
        final Thread thread;
        long written;

        Writer(EmbeddedPostgres pg, String database, int tps, long rows) {
            thread = new Thread(() -> {
                Random random = new Random(7);
                long period = TimeUnit.SECONDS.toNanos(1) / tps;
                long next = System.nanoTime();
                try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                    while (running.get()) {
                        if (random.nextBoolean()) {
                            s.execute("INSERT INTO live (at) VALUES (clock_timestamp())");
                        } else {
                            s.execute("UPDATE bench SET amount = amount + 1 WHERE id = " + (1 + random.nextInt((int) rows)));
                        }
                        written++;
                        next += period;
                        long wait = next - System.nanoTime();
                        if (wait > 0) {
                            TimeUnit.NANOSECONDS.sleep(wait);
                        }
                    }
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            }, "bench-writer");
            thread.start();
        }

        @Override
        public void close() throws InterruptedException {
            running.set(false);
            thread.join();
        }
    }

    public static void main(String[] args) throws Exception {
        long rows = 1_000_000;
        int batch = 500;
        int tps = 500;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--rows" -> rows = Long.parseLong(args[++i].replace("_", ""));
                case "--batch" -> batch = Integer.parseInt(args[++i]);
                case "--tps" -> tps = Integer.parseInt(args[++i]);
                default -> {
                    System.err.println("usage: scripts/bench-backfill [--rows 1000000] [--batch 500] [--tps 500]");
                    System.exit(2);
                }
            }
        }
        EmbeddedPostgres pg = EmbeddedPostgres.builder().major(17).setting("max_wal_size", "4GB").start();
        try {
            String database = pg.createDatabase("backfillbench");
            try (Connection c = pg.connect(database); Statement s = c.createStatement()) {
                s.execute("CREATE TABLE bench (id bigint PRIMARY KEY, customer text, amount numeric(10,2))");
                s.execute("CREATE TABLE live (id bigserial PRIMARY KEY, at timestamptz)");
                s.execute("CREATE PUBLICATION walhook FOR ALL TABLES");
                s.execute("SELECT pg_create_logical_replication_slot('drain', 'pgoutput')");
                say(String.format(Locale.ROOT, "loading %,d rows in 1,000-row transactions ...", rows));
                s.execute("DO $b$ DECLARE i bigint := 0; BEGIN WHILE i < " + rows + " LOOP"
                        + " INSERT INTO bench SELECT g, 'customer-' || (g % 1000), (g % 100000) / 100.0"
                        + " FROM generate_series(i + 1, least(i + 1000, " + rows + ")) g; COMMIT; i := i + 1000; END LOOP;"
                        + " END $b$");
            }
            double drain = drain(pg, database, rows, batch);
            double[] latencyAlone = latency(pg, database, rows, batch, tps);
            double[] alone = backfill(pg, database, rows, batch, tps, false);
            double[] loaded = backfill(pg, database, rows, batch, tps, true);
            System.out.println();
            System.out.printf(Locale.ROOT, "walhook backfills (%,d rows, batches of %d, 2 CPUs)%n", rows, batch);
            System.out.printf(Locale.ROOT, "  %-44s %10s %12s %10s%n", "", "seconds", "rows/s", "ratio");
            System.out.printf(Locale.ROOT, "  %-44s %9.2fs %12s %10s%n", "drain of the same rows through the stream", drain,
                    String.format(Locale.ROOT, "%,.0f", rows / drain), "1.00");
            System.out.printf(Locale.ROOT, "  %-44s %9.2fs %12s %10.2f%n", "backfill, no writes", alone[0],
                    String.format(Locale.ROOT, "%,.0f", rows / alone[0]), drain / alone[0]);
            System.out.printf(Locale.ROOT, "  %-44s %9.2fs %12s %10.2f%n", "backfill, writes at " + tps + " tx/s", loaded[0],
                    String.format(Locale.ROOT, "%,.0f", rows / loaded[0]), drain / loaded[0]);
            System.out.printf(Locale.ROOT, "  live changes at %d tx/s, commit to arrival: %-10s %8s %8s %8s%n", tps, "",
                    "p50 ms", "p99 ms", "max ms");
            System.out.printf(Locale.ROOT, "  %-56s %8.1f %8.1f %8.1f%n", "  without a backfill", latencyAlone[0],
                    latencyAlone[1], latencyAlone[2]);
            System.out.printf(Locale.ROOT, "  %-56s %8.1f %8.1f %8.1f%n", "  while the backfill runs", loaded[1], loaded[2],
                    loaded[3]);
            System.out.printf(Locale.ROOT, "  p99 ratio (with / without a backfill): %.2f%n", loaded[2] / latencyAlone[1]);
            System.out.println("  ratio: the drain's time over the backfill's (1.00 = as fast; aim at least 0.5);"
                    + " latency aim: p99 at most doubled");
        } finally {
            pg.stop();
        }
        System.exit(0);
    }

    private static Map<String, String> env(EmbeddedPostgres pg, String database, String slot, Sink sink, int batch) {
        Map<String, String> env = new LinkedHashMap<>();
        env.put("WALHOOK_SOURCE_URL", pg.sourceUrl(database));
        env.put("WALHOOK_SLOT", slot);
        env.put("WALHOOK_API_TOKEN", TOKEN);
        env.put("WALHOOK_SUBSCRIPTIONS_BENCH_URL", sink.url());
        env.put("WALHOOK_SUBSCRIPTIONS_BENCH_BATCH_MAX_EVENTS", Integer.toString(batch));
        env.put("WALHOOK_SUBSCRIPTIONS_BENCH_BATCH_MAX_WAIT_MS", "20");
        return env;
    }

    /** The baseline: the same rows drained from the slot created before they were written. */
    private static double drain(EmbeddedPostgres pg, String database, long rows, int batch) throws Exception {
        try (Sink sink = new Sink(); WalhookProcess walhook = WalhookProcess.start(env(pg, database, "drain", sink, batch))) {
            say("draining " + rows + " rows through the stream ...");
            walhook.awaitReady(Duration.ofSeconds(120));
            long start = System.nanoTime();
            while (sink.changes.sum() < rows) {
                if (System.nanoTime() - start > TimeUnit.MINUTES.toNanos(15)) {
                    throw new IllegalStateException("drain: " + sink.changes.sum() + " of " + rows);
                }
                Thread.sleep(5);
            }
            long last = System.nanoTime();
            stop(walhook);
            return (last - start) / 1e9;
        }
    }

    /** p50, p99, max (ms) of live changes at {@code tps} for 10 s, without a backfill. */
    private static double[] latency(EmbeddedPostgres pg, String database, long rows, int batch, int tps)
            throws Exception {
        try (Sink sink = new Sink();
             WalhookProcess walhook = WalhookProcess.start(env(pg, database, "latency", sink, batch))) {
            walhook.awaitReady(Duration.ofSeconds(120));
            say("live changes at " + tps + " tx/s for 10 s, no backfill ...");
            try (Writer writer = new Writer(pg, database, tps, rows)) {
                Thread.sleep(2000); // warm
                sink.measuring = true;
                Thread.sleep(10_000);
                sink.measuring = false;
            }
            stop(walhook);
            return percentiles(sink.latenciesMicros);
        }
    }

    /** Seconds of a backfill of every row ([0]) and, with writes, p50, p99, max (ms) of live changes meanwhile. */
    private static double[] backfill(EmbeddedPostgres pg, String database, long rows, int batch, int tps, boolean writes)
            throws Exception {
        String slot = writes ? "loaded" : "alone";
        try (Sink sink = new Sink(); WalhookProcess walhook = WalhookProcess.start(env(pg, database, slot, sink, batch))) {
            walhook.awaitReady(Duration.ofSeconds(120));
            Writer writer = writes ? new Writer(pg, database, tps, rows) : null;
            try {
                if (writer != null) {
                    Thread.sleep(2000);
                    sink.measuring = true;
                }
                say("backfilling " + rows + " rows" + (writes ? " while writes go on at " + tps + " tx/s" : "") + " ...");
                long start = System.nanoTime();
                HttpResponse<String> started = HttpClient.newHttpClient().send(HttpRequest.newBuilder(
                        walhook.uri("/subscriptions/config:bench/backfills")).header("Authorization", "Bearer " + TOKEN)
                        .header("Content-Type", "application/json")
                        .POST(HttpRequest.BodyPublishers.ofString("{\"tables\": [\"public.bench\"]}")).build(),
                        HttpResponse.BodyHandlers.ofString());
                if (started.statusCode() != 202) {
                    throw new IllegalStateException("backfill not started: " + started.body());
                }
                // done: every row sent, or left out because the stream carried a newer version meanwhile
                String path = "/subscriptions/config:bench/backfills/" + JSON.readTree(started.body()).get("id").asText();
                while (!JSON.readTree(get(walhook, path)).get("state").asText().equals("done")) {
                    if (System.nanoTime() - start > TimeUnit.MINUTES.toNanos(20)) {
                        throw new IllegalStateException("backfill: " + sink.reads.sum() + " of " + rows);
                    }
                    Thread.sleep(20);
                }
                sink.measuring = false;
                double seconds = (System.nanoTime() - start) / 1e9; // within the 20 ms of a poll
                say(String.format(Locale.ROOT, "  %.2f s, %,.0f rows/s", seconds, rows / seconds));
                double[] latency = writes ? percentiles(sink.latenciesMicros) : new double[3];
                return new double[] {seconds, latency[0], latency[1], latency[2]};
            } finally {
                if (writer != null) {
                    writer.close();
                }
                stop(walhook);
            }
        }
    }

    private static String get(WalhookProcess walhook, String path) throws IOException, InterruptedException {
        return HttpClient.newHttpClient().send(HttpRequest.newBuilder(walhook.uri(path))
                .header("Authorization", "Bearer " + TOKEN).build(), HttpResponse.BodyHandlers.ofString()).body();
    }

    private static double[] percentiles(List<Long> micros) {
        List<Long> sorted;
        synchronized (micros) {
            sorted = new ArrayList<>(micros);
        }
        Collections.sort(sorted);
        if (sorted.isEmpty()) {
            return new double[] {Double.NaN, Double.NaN, Double.NaN};
        }
        return new double[] {sorted.get(sorted.size() / 2) / 1000.0,
                sorted.get(Math.min(sorted.size() - 1, (int) Math.ceil(sorted.size() * 0.99) - 1)) / 1000.0,
                sorted.get(sorted.size() - 1) / 1000.0};
    }

    private static void stop(WalhookProcess walhook) throws InterruptedException {
        walhook.terminate();
        walhook.awaitExit(Duration.ofSeconds(60));
    }

    private static void say(String line) {
        System.out.println("[bench-backfill] " + line);
    }
}
