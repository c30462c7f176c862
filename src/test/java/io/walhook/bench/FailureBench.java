package io.walhook.bench;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import io.walhook.testing.EmbeddedPostgres;
import io.walhook.testing.WalhookProcess;

/**
 * Delivery under partial failure: the same backlog drained by a fresh walhook into a webhook
 * that fails a share of requests (0, 10%, 30%), then one that fails every request for a while
 * and recovers. For each: the drain rate as a ratio of the healthy drain in the same run, and
 * how long after the faults end (for the failing ones, after the slot's backlog was read) the
 * durable queue is empty. Reported, never asserted.
 *
 * <pre>
 *   ./scripts/bench-failures                    # 100,000 rows, batches of 100, a 10 s outage
 *   ./scripts/bench-failures --rows 200000 --outage 20
 * </pre>
 */
public final class FailureBench {

    private static final ObjectMapper JSON = new ObjectMapper();

    /** One scenario: the share of requests failed (per mille), or an outage of that many seconds first. */
    /** {@code --env NAME=VALUE}: set for every drain's walhook, after the bench's own settings. */
    private static final Map<String, String> EXTRA_ENV = new LinkedHashMap<>();

    private record Scenario(String name, int failPerMille, int outageSeconds) {
    }

    /** What one drain took. */
    private record Result(Scenario scenario, double seconds, double emptySeconds, long requests, long failed, long queued) {
    }

    /** The webhook: fails as its scenario says, counts each event's first acceptance. */
    private static final class FlakySink implements AutoCloseable {
        final HttpServer server;
        final ExecutorService executor = Executors.newFixedThreadPool(4, r -> {
            Thread t = new Thread(r, "bench-flaky-sink");
            t.setDaemon(true);
            return t;
        });
        final Set<String> ids = ConcurrentHashMap.newKeySet();
        final Random random = new Random(42);
        final int failPerMille;
        volatile long outageEndsNanos;
        volatile long lastNewNanos;
        final java.util.concurrent.atomic.LongAdder requests = new java.util.concurrent.atomic.LongAdder();
        final java.util.concurrent.atomic.LongAdder failed = new java.util.concurrent.atomic.LongAdder();

        FlakySink(int failPerMille) throws IOException {
            this.failPerMille = failPerMille;
            server = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 128);
            server.setExecutor(executor);
            server.createContext("/", this::handle);
            server.start();
        }

        private void handle(HttpExchange exchange) throws IOException {
            try (exchange; InputStream in = exchange.getRequestBody()) {
                byte[] body = in.readAllBytes();
                requests.increment();
                boolean fail;
                synchronized (random) {
                    fail = System.nanoTime() < outageEndsNanos || random.nextInt(1000) < failPerMille;
                }
                if (fail) {
                    failed.increment();
                    exchange.sendResponseHeaders(500, -1);
                    return;
                }
                JsonNode events = JSON.readTree(body);
                for (JsonNode event : events.isArray() ? events : List.of(events)) {
                    if (ids.add(event.get("id").asText())) {
                        lastNewNanos = System.nanoTime();
                    }
                }
                exchange.sendResponseHeaders(204, -1);
            }
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

    public static void main(String[] args) throws Exception {
        long rows = 100_000;
        int batch = 100;
        int outage = 10;
        boolean outageOnly = false;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--rows" -> rows = Long.parseLong(args[++i].replace("_", ""));
                case "--batch" -> batch = Integer.parseInt(args[++i]);
                case "--outage" -> outage = Integer.parseInt(args[++i]);
                case "--outage-only" -> outageOnly = true;
                case "--env" -> {
                    String[] setting = args[++i].split("=", 2);
                    if (setting.length != 2) {
                        System.err.println("--env takes NAME=VALUE, not " + args[i]);
                        System.exit(2);
                    }
                    EXTRA_ENV.put(setting[0], setting[1]); // every drain's walhook, e.g. WALHOOK_DELIVERY_RETRY_WINDOW=1s
                }
                default -> {
                    System.err.println("usage: scripts/bench-failures [--rows 100000] [--batch 100] [--outage 10]"
                            + " [--outage-only] [--env NAME=VALUE]...");
                    System.exit(2);
                }
            }
        }
        Scenario down = new Scenario("100% for " + outage + " s, then healthy", 0, outage);
        List<Scenario> scenarios = outageOnly ? List.of(down) : List.of(new Scenario("healthy", 0, 0),
                new Scenario("10% failing", 100, 0), new Scenario("30% failing", 300, 0), down);
        EmbeddedPostgres postgres = EmbeddedPostgres.builder().major(17).setting("max_wal_size", "4GB").start();
        try {
            String database = postgres.createDatabase("failbench");
            try (Connection c = postgres.connect(database); Statement s = c.createStatement()) {
                s.execute("CREATE TABLE bench (id bigint PRIMARY KEY, customer text, amount numeric(10,2))");
                s.execute("CREATE PUBLICATION walhook FOR ALL TABLES");
                for (int i = 0; i < scenarios.size(); i++) {
                    s.execute("SELECT pg_create_logical_replication_slot('fail_" + i + "', 'pgoutput')");
                }
                say(String.format(Locale.ROOT, "loading %,d rows in 100-row transactions ...", rows));
                s.execute("DO $b$ DECLARE i bigint := 0; BEGIN WHILE i < " + rows + " LOOP"
                        + " INSERT INTO bench SELECT g, 'customer-' || (g % 1000), (g % 100000) / 100.0"
                        + " FROM generate_series(i + 1, least(i + 100, " + rows + ")) g; COMMIT; i := i + 100; END LOOP;"
                        + " END $b$");
            }
            List<Result> results = new ArrayList<>();
            for (int i = 0; i < scenarios.size(); i++) {
                results.add(drain(postgres, database, "fail_" + i, scenarios.get(i), rows, batch));
            }
            print(results, rows, batch);
        } finally {
            postgres.stop();
        }
        System.exit(0);
    }

    private static Result drain(EmbeddedPostgres postgres, String database, String slot, Scenario scenario, long rows,
            int batch) throws Exception {
        try (FlakySink sink = new FlakySink(scenario.failPerMille())) {
            Map<String, String> env = new LinkedHashMap<>();
            env.put("WALHOOK_SOURCE_URL", postgres.sourceUrl(database));
            env.put("WALHOOK_SLOT", slot);
            env.put("WALHOOK_SUBSCRIPTIONS_BENCH_URL", sink.url());
            env.put("WALHOOK_SUBSCRIPTIONS_BENCH_TABLES", "public.bench");
            env.put("WALHOOK_SUBSCRIPTIONS_BENCH_BATCH_MAX_EVENTS", Integer.toString(batch));
            env.putAll(EXTRA_ENV);
            long queuedBefore = queuedEver(postgres, database);
            say("draining " + rows + " rows into a webhook, " + scenario.name() + " ...");
            if (scenario.outageSeconds() > 0) {
                sink.outageEndsNanos = Long.MAX_VALUE; // from before walhook starts
            }
            try (WalhookProcess walhook = WalhookProcess.start(env)) {
                walhook.awaitReady(java.time.Duration.ofSeconds(120));
                long start = System.nanoTime();
                if (scenario.outageSeconds() > 0) {
                    sink.outageEndsNanos = start + TimeUnit.SECONDS.toNanos(scenario.outageSeconds());
                }
                long deadline = start + TimeUnit.MINUTES.toNanos(15);
                while (sink.ids.size() < rows) {
                    if (System.nanoTime() > deadline) {
                        throw new IllegalStateException(scenario.name() + ": " + sink.ids.size() + " of " + rows
                                + " after 15 minutes");
                    }
                    Thread.sleep(5);
                }
                double seconds = (sink.lastNewNanos - start) / 1e9;
                // the durable queue empty: measured from the faults' end, or the slot's backlog read
                long faultsEnd = scenario.outageSeconds() > 0 ? sink.outageEndsNanos : start;
                long empty;
                try (Connection c = postgres.connect(database); Statement s = c.createStatement()) {
                    while (true) {
                        try (ResultSet rs = s.executeQuery("SELECT count(*) FROM walhook.parked_event")) {
                            rs.next();
                            if (rs.getLong(1) == 0) {
                                empty = System.nanoTime();
                                break;
                            }
                        }
                        Thread.sleep(20);
                    }
                }
                double emptySeconds = (Math.max(empty, sink.lastNewNanos) - faultsEnd) / 1e9;
                long queued = queuedEver(postgres, database) - queuedBefore;
                say(String.format(Locale.ROOT, "  %.2f s, %,.0f events/s; %,d requests, %,d failed; %,d events queued",
                        seconds, rows / seconds, sink.requests.sum(), sink.failed.sum(), queued));
                walhook.terminate();
                walhook.awaitExit(java.time.Duration.ofSeconds(60));
                return new Result(scenario, seconds, emptySeconds, sink.requests.sum(), sink.failed.sum(), queued);
            }
        }
    }

    /** Rows ever written to the durable queue (its id sequence; 0 before walhook made it). */
    private static long queuedEver(EmbeddedPostgres postgres, String database) throws java.sql.SQLException {
        try (Connection c = postgres.connect(database); Statement s = c.createStatement()) {
            try (ResultSet rs = s.executeQuery("SELECT to_regclass('walhook.parked_event_id_seq') IS NULL")) {
                rs.next();
                if (rs.getBoolean(1)) {
                    return 0;
                }
            }
            try (ResultSet rs = s.executeQuery("SELECT CASE WHEN is_called THEN last_value ELSE 0 END"
                    + " FROM walhook.parked_event_id_seq")) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }

    private static void print(List<Result> results, long rows, int batch) {
        Result healthy = results.get(0);
        System.out.println();
        System.out.printf(Locale.ROOT, "walhook under partial failure (%,d rows, batches of %d, 2 CPUs)%n", rows, batch);
        System.out.printf(Locale.ROOT, "  %-34s %10s %14s %8s %22s %18s %10s%n", "destination", "drain", "events/s", "ratio",
                "requests (failed)", "queue empty after", "queued");
        for (Result r : results) {
            System.out.printf(Locale.ROOT, "  %-34s %9.2fs %14s %8.2f %22s %17.2fs %10s%n", r.scenario().name(), r.seconds(),
                    String.format(Locale.ROOT, "%,.0f", rows / r.seconds()), healthy.seconds() / r.seconds(),
                    String.format(Locale.ROOT, "%,d (%,d)", r.requests(), r.failed()), r.emptySeconds(),
                    String.format(Locale.ROOT, "%,d", r.queued()));
        }
        System.out.println("  ratio: the healthy drain's time over this one's (1.00 = as fast); queue empty after: from the"
                + " drain's start, or for the outage from its end, until walhook.parked_event is empty; queued: events"
                + " written to it");
    }

    private static void say(String line) {
        System.out.println("[bench-failures] " + line);
    }
}
