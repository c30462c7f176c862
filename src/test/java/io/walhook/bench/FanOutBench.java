package io.walhook.bench;

import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.TimeUnit;

import io.walhook.testing.EmbeddedPostgres;
import io.walhook.testing.WalhookProcess;

/**
 * Fan-out to tenant subscriptions: the same backlog, each row of one tenant
 * ({@code tenant_id = 1 + id % N}), drained by a fresh walhook with N subscriptions filtered
 * {@code new.tenant_id == i}, for each N asked. Every row reaches exactly one subscription, so
 * each drain delivers the whole backlog; the rate is reported as a ratio of the one-subscription
 * drain in the same run, with the process's threads and peak RSS. Reported, never asserted.
 *
 * <pre>
 *   ./scripts/bench-fanout                         # 100,000 rows; 1, 100 and 1,000 subscriptions
 *   ./scripts/bench-fanout --tenants 1,1000,10000 --rows 200000 --heap 1g
 *   ./scripts/bench-fanout --tenants 1,10000 --api --heap 256m   # created through the API, stored
 * </pre>
 *
 * <p>With {@code --api} the tenant subscriptions (all but the one-subscription baseline) are
 * created through {@code POST /subscriptions} of an instance on a slot of its own, so the drain's
 * instance loads them from its state tables at start: the way to have 10,000 of them (as
 * environment variables they exceed what Linux passes to a process). The drain's walhook takes
 * {@code WALHOOK_BENCH_JAVA_OPTIONS} after its own JVM options, as {@code scripts/bench} does (a GC
 * log, a flight recording).
 */
public final class FanOutBench {

    private record Result(int tenants, double seconds, double toReady, long threads, long peakRssKb, long requests) {
    }

    /** {@code --env NAME=VALUE}: set for every drain's walhook, after the bench's own settings. */
    private static final Map<String, String> EXTRA_ENV = new LinkedHashMap<>();

    public static void main(String[] args) throws Exception {
        long rows = 100_000;
        int batch = 100;
        String heap = "512m";
        List<Integer> counts = List.of(1, 100, 1000);
        boolean api = false;
        for (int i = 0; i < args.length; i++) {
            if (args[i].equals("--env") && i + 1 < args.length && args[i + 1].contains("=")) {
                String[] setting = args[++i].split("=", 2);
                EXTRA_ENV.put(setting[0], setting[1]); // every drain's walhook, e.g. WALHOOK_DELIVERY_MEMORY_BYTES=16777216
                continue;
            }
            switch (args[i]) {
                case "--rows" -> rows = Long.parseLong(args[++i].replace("_", "").replace(",", ""));
                case "--batch" -> batch = Integer.parseInt(args[++i]);
                case "--heap" -> heap = args[++i];
                case "--api" -> api = true;
                case "--tenants" -> {
                    counts = new ArrayList<>();
                    for (String n : args[++i].split(",")) {
                        counts.add(Integer.parseInt(n.strip().replace("_", "")));
                    }
                    if (counts.get(0) != 1) {
                        counts.add(0, 1); // the baseline
                    }
                }
                default -> {
                    System.err.println("usage: scripts/bench-fanout [--rows 100000] [--batch 100] [--heap 512m]"
                            + " [--tenants 1,100,1000] [--api] [--env NAME=VALUE]...");
                    System.exit(2);
                }
            }
        }
        EmbeddedPostgres postgres = EmbeddedPostgres.builder().major(17).setting("max_wal_size", "4GB").start();
        try {
            String database = postgres.createDatabase("fanout");
            try (Connection c = postgres.connect(database); Statement s = c.createStatement()) {
                s.execute("CREATE TABLE orders (id bigint PRIMARY KEY, tenant_id int NOT NULL, amount numeric(10,2),"
                        + " note text)");
                s.execute("CREATE PUBLICATION walhook FOR ALL TABLES");
            }
            List<Result> results = new ArrayList<>();
            for (int i = 0; i < counts.size(); i++) {
                // each drain's slot begins after the previous drain's rows were truncated: it reads its own load
                try (Connection c = postgres.connect(database); Statement s = c.createStatement()) {
                    s.execute("SELECT pg_create_logical_replication_slot('fanout_" + i + "', 'pgoutput')");
                }
                load(postgres, database, rows, counts.get(i));
                boolean stored = api && counts.get(i) > 1;
                try (CountingSink sink = CountingSink.start(rows, 4)) {
                    if (stored) {
                        createThroughTheApi(postgres, database, sink, counts.get(i), batch, heap);
                    }
                    results.add(drain(postgres, database, sink, "fanout_" + i, counts.get(i), batch, heap, stored));
                }
            }
            print(results, rows, batch, heap);
        } finally {
            postgres.stop();
        }
        System.exit(0);
    }

    /** The backlog: {@code rows} rows, row {@code g} of tenant {@code 1 + g % tenants}. */
    private static void load(EmbeddedPostgres postgres, String database, long rows, int tenants) throws Exception {
        say(String.format(Locale.ROOT, "loading %,d rows for %,d tenants in 100-row transactions ...", rows, tenants));
        try (Connection c = postgres.connect(database); Statement s = c.createStatement()) {
            s.execute("DO $b$ DECLARE i bigint := 0; BEGIN WHILE i < " + rows + " LOOP"
                    + " INSERT INTO orders SELECT g, 1 + g % " + tenants + ", (g % 100000) / 100.0, 'order ' || g"
                    + " FROM generate_series(i + 1, least(i + 100, " + rows + ")) g; COMMIT; i := i + 100; END LOOP;"
                    + " END $b$");
        }
    }

    /**
     * Stores the tenant subscriptions through the API of an instance on a slot of its own (the
     * drain's instance then loads them at start, before it streams), and removes that slot.
     */
    private static void createThroughTheApi(EmbeddedPostgres postgres, String database, CountingSink sink, int tenants,
            int batch, String heap) throws Exception {
        Map<String, String> env = Map.of("WALHOOK_SOURCE_URL", postgres.sourceUrl(database), "WALHOOK_SLOT",
                "fanout_setup", "WALHOOK_API_TOKEN", "bench-token", "WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true");
        java.net.http.HttpClient http = java.net.http.HttpClient.newHttpClient();
        say(String.format(Locale.ROOT, "creating %,d subscriptions through the API ...", tenants));
        try (WalhookProcess setup = WalhookProcess.start(env, heap)) {
            setup.awaitReady(Duration.ofSeconds(300));
            long start = System.nanoTime();
            for (int t = 1; t <= tenants; t++) {
                String body = "{\"name\": \"t" + t + "\", \"tables\": [\"public.orders\"], \"operations\": [\"insert\"],"
                        + " \"filter\": \"new.tenant_id == " + t + "\", \"destination\": {\"type\": \"webhook\", \"url\": \""
                        + sink.url("/bench") + "\"}, \"batch\": {\"max_events\": " + batch + ", \"max_wait_ms\": 20}}";
                java.net.http.HttpResponse<String> created = http.send(java.net.http.HttpRequest.newBuilder(
                        setup.uri("/subscriptions")).header("Authorization", "Bearer bench-token")
                        .header("Content-Type", "application/json")
                        .POST(java.net.http.HttpRequest.BodyPublishers.ofString(body)).build(),
                        java.net.http.HttpResponse.BodyHandlers.ofString());
                if (created.statusCode() != 201) {
                    throw new IllegalStateException("POST /subscriptions: " + created.statusCode() + " " + created.body());
                }
            }
            double seconds = (System.nanoTime() - start) / 1e9;
            say(String.format(Locale.ROOT, "  %.1f s, %.1f ms per subscription", seconds, seconds * 1000 / tenants));
            setup.terminate();
            setup.awaitExit(Duration.ofSeconds(120));
        }
        try (Connection c = postgres.connect(database); Statement s = c.createStatement()) {
            s.execute("SELECT pg_drop_replication_slot('fanout_setup')");
        }
    }

    private static Result drain(EmbeddedPostgres postgres, String database, CountingSink sink, String slot, int tenants,
            int batch, String heap, boolean stored) throws Exception {
        long rows = sink.tally().target();
        Map<String, String> env = new LinkedHashMap<>();
        env.put("WALHOOK_SOURCE_URL", postgres.sourceUrl(database));
        env.put("WALHOOK_SLOT", slot);
        if (stored) {
            env.put("WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true"); // the sink is on 127.0.0.1, checked at connect too
        }
        for (int t = 1; t <= (stored ? 0 : tenants); t++) {
            String prefix = "WALHOOK_SUBSCRIPTIONS_T" + t + "_";
            env.putAll(sink.subscription(prefix, batch));
            env.put(prefix + "TABLES", "public.orders");
            env.put(prefix + "OPERATIONS", "insert");
            env.put(prefix + "FILTER", "new.tenant_id == " + t);
        }
        env.putAll(EXTRA_ENV);
        say(String.format(Locale.ROOT, "draining into %,d tenant subscriptions ...", tenants));
        long exec = System.nanoTime();
        try (WalhookProcess walhook = WalhookProcess.start(env, heap, Bench.EXTRA_JVM_OPTIONS)) {
            walhook.awaitReady(Duration.ofSeconds(300));
            Map<Long, ProcStats.ThreadTicks> before = ProcStats.threads(walhook.pid());
            long start = System.nanoTime();
            if (!sink.tally().await(30, TimeUnit.MINUTES)) {
                throw new IllegalStateException(tenants + " tenants: " + sink.tally().events() + " of " + rows
                        + " events after 30 minutes");
            }
            double seconds = (sink.tally().completedNanos() - start) / 1e9;
            long threads = threads(walhook.pid());
            Map<Long, ProcStats.ThreadTicks> after = ProcStats.threads(walhook.pid());
            say("  CPU by thread: " + after.entrySet().stream()
                    .map(e -> Map.entry(e.getValue().name(), e.getValue().ticks()
                            - (before.containsKey(e.getKey()) ? before.get(e.getKey()).ticks() : 0)))
                    .filter(e -> e.getValue() > 0).sorted((a, b) -> Long.compare(b.getValue(), a.getValue()))
                    .limit(6).map(e -> e.getKey() + " " + ProcStats.ticksToMicros(e.getValue()) / 1000 + " ms")
                    .collect(java.util.stream.Collectors.joining(", ")));
            if (Boolean.getBoolean("fanout.histogram")) {
                // what the heap holds once drained (-Dfanout.histogram=true): the per-subscription cost
                Process jcmd = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "jcmd").toString(),
                        Long.toString(walhook.pid()), "GC.class_histogram").redirectErrorStream(true).start();
                String histogram = new String(jcmd.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
                histogram.lines().limit(25).forEach(l -> say("  heap " + l));
                histogram.lines().filter(l -> l.startsWith("Total")).forEach(l -> say("  heap " + l));
            }
            long rss = ProcStats.peakRssKb(walhook.pid());
            // a drain every tenant keeps pace with holds no one back: none of them should go through its durable queue
            long durable = walhook.output().lines().filter(l -> l.contains("go to the durable queue")).count();
            say(String.format(Locale.ROOT, "  %.2f s, %,.0f events/s, %,d threads, %,d MB peak RSS, %,d subscriptions sent"
                    + " to their durable queue", seconds, rows / seconds, threads, rss / 1024, durable));
            walhook.terminate();
            walhook.awaitExit(Duration.ofSeconds(120));
            try (Connection c = postgres.connect(database); Statement s = c.createStatement()) {
                s.execute("TRUNCATE orders");
                s.execute("DELETE FROM walhook.subscription"); // the stored ones of this drain, if any
            }
            return new Result(tenants, seconds, (start - exec) / 1e9, threads, rss, sink.requests());
        }
    }

    private static long threads(long pid) throws Exception {
        for (String line : Files.readAllLines(Path.of("/proc", Long.toString(pid), "status"))) {
            if (line.startsWith("Threads:")) {
                return Long.parseLong(line.substring("Threads:".length()).strip());
            }
        }
        return -1;
    }

    private static void print(List<Result> results, long rows, int batch, String heap) {
        Result one = results.get(0);
        System.out.println();
        System.out.printf(Locale.ROOT, "walhook fan-out to tenant subscriptions (%,d rows, batches of %d, -Xmx%s, 2 CPUs)%n",
                rows, batch, heap);
        System.out.printf(Locale.ROOT, "  %14s %10s %12s %8s %10s %10s %10s %10s%n", "subscriptions", "drain", "events/s",
                "ratio", "requests", "ready", "threads", "peak RSS");
        for (Result r : results) {
            System.out.printf(Locale.ROOT, "  %,14d %9.2fs %12s %8.2f %,10d %9.1fs %,10d %8d MB%n", r.tenants(),
                    r.seconds(), String.format(Locale.ROOT, "%,.0f", rows / r.seconds()), one.seconds() / r.seconds(),
                    r.requests(), r.toReady(), r.threads(), r.peakRssKb() / 1024);
        }
        System.out.println("  ratio: the one-subscription drain's time over this one's (1.00 = as fast); ready: from exec"
                + " to /q/health/ready");
    }

    private static void say(String line) {
        System.out.println("[bench-fanout] " + line);
    }
}
