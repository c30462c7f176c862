package io.walhook.bench;

import java.io.BufferedReader;
import java.io.File;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.Statement;
import java.time.Duration;
import java.time.Instant;
import java.time.OffsetDateTime;
import java.time.format.DateTimeFormatter;
import java.time.format.DateTimeFormatterBuilder;
import java.time.temporal.ChronoField;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import com.sun.net.httpserver.HttpExchange;
import com.sun.net.httpserver.HttpServer;

import io.walhook.testing.EmbeddedPostgres;
import io.walhook.testing.WalhookProcess;

/**
 * Commit-to-arrival latency from the first second: a fresh walhook is started as the README
 * starts it (its directory, the AppCDS archive), and the moment it is ready a load of single-row
 * transactions begins at a fixed rate; the receiver notes when each event arrives and subtracts
 * the event's {@code tx.commit_time}. Reported per phase (the first five seconds, then the rest)
 * as p50, p99 and max, beside the same load read by {@code pg_recvlogical} with test_decoding
 * (the server's own decoding and sending, the floor) in the same run. Reported, never asserted.
 *
 * <pre>
 *   ./scripts/bench-latency                          # 1,000 tx/s single events, then 5,000 tx/s batched; 20 s each
 *   ./scripts/bench-latency --rates 1000 --seconds 30
 *   ./scripts/bench-latency --jvm '-XX:TieredStopAtLevel=1'   # JVM options after walhook's own
  *   ./scripts/bench-latency --env WALHOOK_DELIVERY_CONCURRENCY=16  # walhook's environment
 * </pre>
 *
 * <p>A rate of 1,000 or less goes to a subscription of single events; above, to one with
 * {@code BATCH_MAX_EVENTS=100} (no wait), as a busy table would be set up. The load is open-loop:
 * transactions are due at fixed times, and a generator behind catches up, so a stall shows as
 * latency, not as a lower rate.
 */
public final class LatencyBench {

    private static final Duration FIRST = Duration.ofSeconds(5);
    private static final DateTimeFormatter PG_TIMESTAMP = new DateTimeFormatterBuilder()
            .appendPattern("yyyy-MM-dd HH:mm:ss").appendFraction(ChronoField.NANO_OF_SECOND, 0, 9, true)
            .appendPattern("x").toFormatter(Locale.ROOT);

    /** Latencies in microseconds, by when the transaction committed relative to the load's start. */
    private static final class Samples {
        private final long startMicros;
        private final List<long[]> first = new ArrayList<>();
        private final List<long[]> rest = new ArrayList<>();
        private long[] firstBuffer = new long[1 << 16];
        private long[] restBuffer = new long[1 << 16];
        private int firstCount;
        private int restCount;
        /** The worst latency of each 250 ms of the first five seconds, by commit time. */
        private final long[] worstByQuarter = new long[(int) (FIRST.toMillis() / 250)];

        Samples(Instant start) {
            this.startMicros = micros(start);
        }

        synchronized void add(long commitMicros, long arrivalMicros) {
            long latency = arrivalMicros - commitMicros;
            if (commitMicros - startMicros < FIRST.toNanos() / 1000) {
                int quarter = (int) Math.max(0, (commitMicros - startMicros) / 250_000);
                worstByQuarter[quarter] = Math.max(worstByQuarter[quarter], latency);
                if (firstCount == firstBuffer.length) {
                    first.add(firstBuffer);
                    firstBuffer = new long[firstBuffer.length];
                    firstCount = 0;
                }
                firstBuffer[firstCount++] = latency;
            } else {
                if (restCount == restBuffer.length) {
                    rest.add(restBuffer);
                    restBuffer = new long[restBuffer.length];
                    restCount = 0;
                }
                restBuffer[restCount++] = latency;
            }
        }

        synchronized String timeline() {
            StringBuilder line = new StringBuilder();
            for (long worst : worstByQuarter) {
                line.append(line.isEmpty() ? "" : " ").append(worst / 1000);
            }
            return line.toString();
        }

        synchronized long count() {
            return (long) first.size() * firstBuffer.length + firstCount + (long) rest.size() * restBuffer.length + restCount;
        }

        synchronized long[] phase(boolean firstPhase) {
            List<long[]> full = firstPhase ? first : rest;
            long[] tail = firstPhase ? firstBuffer : restBuffer;
            int tailCount = firstPhase ? firstCount : restCount;
            long[] all = new long[full.size() * tail.length + tailCount];
            int at = 0;
            for (long[] block : full) {
                System.arraycopy(block, 0, all, at, block.length);
                at += block.length;
            }
            System.arraycopy(tail, 0, all, at, tailCount);
            Arrays.sort(all);
            return all;
        }
    }

    private record Phase(long count, double p50, double p99, double max) {
        static Phase of(long[] sorted) {
            if (sorted.length == 0) {
                return new Phase(0, Double.NaN, Double.NaN, Double.NaN);
            }
            return new Phase(sorted.length, sorted[(int) (sorted.length * 0.50)] / 1000.0,
                    sorted[Math.min(sorted.length - 1, (int) (sorted.length * 0.99))] / 1000.0,
                    sorted[sorted.length - 1] / 1000.0);
        }
    }

    private record Result(String who, int rate, double achievedRate, double ready, Phase first, Phase rest) {
    }

    public static void main(String[] args) throws Exception {
        List<Integer> rates = List.of(1000, 5000);
        int seconds = 20;
        List<String> jvm = List.of();
        Map<String, String> extraEnv = new LinkedHashMap<>();
        boolean warmReceiver = true;
        String jar = WalhookProcess.jar().toString();
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--rates" -> rates = Arrays.stream(args[++i].split(",")).map(s -> Integer.parseInt(s.strip())).toList();
                case "--seconds" -> seconds = Integer.parseInt(args[++i]);
                case "--cold-receiver" -> warmReceiver = false;
                case "--jvm" -> jvm = List.of(args[++i].strip().split("\\s+"));
                case "--env" -> {
                    String[] kv = args[++i].split("=", 2);
                    extraEnv.put(kv[0], kv[1]);
                }
                default -> {
                    System.err.println("usage: scripts/bench-latency [--rates 1000,5000] [--seconds 20] [--jvm OPTIONS]"
                            + " [--env NAME=VALUE] [--cold-receiver]");
                    System.exit(2);
                }
            }
        }
        if (seconds <= FIRST.toSeconds()) {
            throw new IllegalArgumentException("--seconds must be more than " + FIRST.toSeconds());
        }
        // PostgreSQL 15 from the system: it has test_decoding, which pg_recvlogical reads as text
        EmbeddedPostgres postgres = EmbeddedPostgres.builder().major(15).setting("max_wal_size", "4GB").start();
        List<Result> results = new ArrayList<>();
        try {
            String database = postgres.createDatabase("latency");
            try (Connection c = postgres.connect(database); Statement s = c.createStatement()) {
                s.execute("CREATE TABLE ticks (id bigint PRIMARY KEY, note text)");
                s.execute("CREATE PUBLICATION walhook FOR ALL TABLES");
            }
            AtomicLong ids = new AtomicLong();
            for (int rate : rates) {
                results.add(recvlogical(postgres, database, rate, seconds, ids));
                results.add(walhook(postgres, database, rate, seconds, ids, jvm, extraEnv, warmReceiver));
            }
        } finally {
            postgres.stop();
        }
        print(results, seconds, jar);
        System.exit(0);
    }

    // --- the floor: pg_recvlogical ------------------------------------------------------------

    private static Result recvlogical(EmbeddedPostgres postgres, String database, int rate, int seconds, AtomicLong ids)
            throws Exception {
        String slot = "floor_" + rate;
        try (Connection c = postgres.connect(database); Statement s = c.createStatement()) {
            s.execute("SELECT pg_create_logical_replication_slot('" + slot + "', 'test_decoding')");
        }
        Path binary = postgres.binDir().orElseThrow().resolve("pg_recvlogical");
        ProcessBuilder builder = new ProcessBuilder(binary.toString(), "-d", database, "-h", "127.0.0.1", "-p",
                Integer.toString(postgres.port()), "-U", postgres.user(), "-w", "--slot", slot, "--start", "-o",
                "include-timestamp=1", "-o", "skip-empty-xacts=1", "-F", "1", "-f", "-")
                .redirectError(ProcessBuilder.Redirect.INHERIT).redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
        builder.environment().put("PGPASSWORD", postgres.password());
        say(String.format(Locale.ROOT, "%,d tx/s for %d s read by pg_recvlogical ...", rate, seconds));
        Process process = builder.start();
        try (Connection c = postgres.connect(database)) {
            // the load starts once the walsender streams
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (!active(c, slot)) {
                if (System.nanoTime() > deadline || !process.isAlive()) {
                    throw new IllegalStateException("pg_recvlogical did not start streaming");
                }
                Thread.sleep(5);
            }
        }
        Instant start = Instant.now();
        Samples samples = new Samples(start);
        Thread reader = new Thread(() -> readCommits(process.getInputStream(), samples), "recvlogical-reader");
        reader.setDaemon(true);
        reader.start();
        double achieved = load(postgres, database, rate, seconds, start, ids);
        awaitCount(samples, (long) (achieved * seconds) - 1, Duration.ofSeconds(30));
        process.destroy();
        process.waitFor(10, TimeUnit.SECONDS);
        try (Connection c = postgres.connect(database); Statement s = c.createStatement()) {
            // its walsender may outlive it by a moment: the slot is dropped once it is released
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (active(c, slot) && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            s.execute("SELECT pg_drop_replication_slot('" + slot + "')");
        }
        say("  worst latency (ms) of each 250 ms of the first 5 s: " + samples.timeline());
        return new Result("pg_recvlogical", rate, achieved, Double.NaN, Phase.of(samples.phase(true)),
                Phase.of(samples.phase(false)));
    }

    /** test_decoding's "COMMIT 123 (at 2026-12-01 22:00:00.123456+00)": one sample per transaction. */
    private static void readCommits(InputStream output, Samples samples) {
        try (BufferedReader in = new BufferedReader(new InputStreamReader(output, StandardCharsets.UTF_8))) {
            String line;
            while ((line = in.readLine()) != null) {
                long arrival = micros(Instant.now());
                int at = line.indexOf("(at ");
                if (line.startsWith("COMMIT") && at > 0) {
                    String text = line.substring(at + 4, line.indexOf(')', at));
                    samples.add(micros(OffsetDateTime.parse(text, PG_TIMESTAMP).toInstant()), arrival);
                }
            }
        } catch (IOException e) {
            // the process was stopped
        }
    }

    // --- walhook ------------------------------------------------------------------------------

    private static Result walhook(EmbeddedPostgres postgres, String database, int rate, int seconds, AtomicLong ids,
            List<String> jvm, Map<String, String> extraEnv, boolean warmReceiver) throws Exception {
        String slot = "walhook_" + rate;
        try (Connection c = postgres.connect(database); Statement s = c.createStatement()) {
            s.execute("SELECT pg_create_logical_replication_slot('" + slot + "', 'pgoutput')");
        }
        Samples[] current = new Samples[1];
        HttpServer receiver = HttpServer.create(new InetSocketAddress(InetAddress.getLoopbackAddress(), 0), 128);
        ExecutorService threads = Executors.newFixedThreadPool(4, r -> {
            Thread t = new Thread(r, "latency-receiver");
            t.setDaemon(true);
            return t;
        });
        receiver.setExecutor(threads);
        receiver.createContext("/", exchange -> arrived(exchange, current[0]));
        receiver.start();
        int batch = rate > 1000 ? 100 : 1;
        if (warmReceiver) {
            // a destination in production is a warm server of its own: the receiver in this JVM takes as many
            // requests as the measured load before walhook starts, so its own JIT does not count as walhook's
            current[0] = new Samples(Instant.now());
            warm(receiver.getAddress().getPort(), rate * seconds);
            current[0] = null;
        }
        Map<String, String> env = new LinkedHashMap<>();
        env.put("WALHOOK_SOURCE_URL", postgres.sourceUrl(database));
        env.put("WALHOOK_SLOT", slot);
        env.put("WALHOOK_SUBSCRIPTIONS_TICKS_URL", "http://127.0.0.1:" + receiver.getAddress().getPort() + "/ticks");
        env.put("WALHOOK_SUBSCRIPTIONS_TICKS_BATCH_MAX_EVENTS", Integer.toString(batch));
        env.putAll(extraEnv);
        say(String.format(Locale.ROOT, "%,d tx/s for %d s to walhook (batches of up to %d), from its readiness ...", rate,
                seconds, batch));
        long exec = System.nanoTime();
        List<String> options = new ArrayList<>(WalhookProcess.JVM_OPTIONS);
        if (jvm.stream().noneMatch(o -> o.startsWith("-XX:SharedArchiveFile") || o.startsWith("-XX:AOTCache")
                || o.startsWith("-Xshare"))) {
            options.add("-XX:SharedArchiveFile=app-cds.jsa"); // the JVM allows only one archive option
        }
        options.addAll(jvm);
        try (WalhookProcess walhook = WalhookProcess.start(env, "256m", options, true)) {
            long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
            while (walhook.status("/q/health/ready") != 200) {
                if (System.nanoTime() > deadline || !walhook.isAlive()) {
                    throw new IllegalStateException("walhook was not ready:\n" + walhook.output());
                }
                Thread.sleep(5);
            }
            double ready = (System.nanoTime() - exec) / 1e9;
            Instant start = Instant.now();
            current[0] = new Samples(start);
            Map<Long, ProcStats.ThreadTicks> before = ProcStats.threads(walhook.pid());
            long benchBefore = ProcStats.cpuTicks(ProcessHandle.current().pid());
            double achieved = load(postgres, database, rate, seconds, start, ids);
            Map<Long, ProcStats.ThreadTicks> after = ProcStats.threads(walhook.pid());
            say("  CPU of this benchmark (load and receiver) over the load: "
                    + ProcStats.ticksToMicros(ProcStats.cpuTicks(ProcessHandle.current().pid()) - benchBefore) / 1000 + " ms");
            say("  CPU by thread over the load: " + after.entrySet().stream()
                    .map(e -> Map.entry(e.getValue().name(), e.getValue().ticks()
                            - (before.containsKey(e.getKey()) ? before.get(e.getKey()).ticks() : 0)))
                    .filter(e -> e.getValue() > 0).sorted((a, b) -> Long.compare(b.getValue(), a.getValue()))
                    .limit(8).map(e -> e.getKey() + " " + ProcStats.ticksToMicros(e.getValue()) / 1000 + " ms")
                    .collect(java.util.stream.Collectors.joining(", ")));
            awaitCount(current[0], (long) (achieved * seconds) - 1, Duration.ofSeconds(60));
            say("  worst latency (ms) of each 250 ms of the first 5 s: " + current[0].timeline());
            walhook.output().lines().filter(l -> l.contains(System.getProperty("latency.show", "warm-up"))).forEach(l -> say("  walhook: " + l.strip()));
            walhook.terminate();
            walhook.awaitExit(Duration.ofSeconds(60));
            return new Result("walhook", rate, achieved, ready, Phase.of(current[0].phase(true)),
                    Phase.of(current[0].phase(false)));
        } finally {
            receiver.stop(0);
            threads.shutdownNow();
            try (Connection c = postgres.connect(database); Statement s = c.createStatement()) {
                s.execute("SELECT pg_drop_replication_slot('" + slot + "')");
                s.execute("DROP SCHEMA IF EXISTS walhook CASCADE"); // the next run starts as fresh as this one
            }
        }
    }

    /** {@code requests} POSTs of an event like walhook's, from four threads, as walhook would send them. */
    private static void warm(int port, int requests) throws Exception {
        java.net.http.HttpClient client = java.net.http.HttpClient.newBuilder()
                .version(java.net.http.HttpClient.Version.HTTP_1_1).build();
        String body = "{\"id\":\"0000000001A2B3C0-0001\",\"op\":\"insert\",\"schema\":\"public\",\"table\":\"ticks\","
                + "\"key\":null,\"new\":{\"id\":1,\"note\":\"tick\"},\"old\":null,\"lsn\":\"0/1A2B3B08\",\"tx\":{\"xid\":7781,"
                + "\"commit_lsn\":\"0/1A2B3C0\",\"commit_time\":\"2026-11-29T16:00:00.123456Z\",\"seq\":1}}";
        java.net.http.HttpRequest request = java.net.http.HttpRequest.newBuilder(
                java.net.URI.create("http://127.0.0.1:" + port + "/ticks"))
                .POST(java.net.http.HttpRequest.BodyPublishers.ofString(body)).build();
        ExecutorService senders = Executors.newFixedThreadPool(4);
        try {
            List<java.util.concurrent.Future<?>> done = new ArrayList<>();
            for (int t = 0; t < 4; t++) {
                done.add(senders.submit(() -> {
                    for (int i = 0; i < requests / 4; i++) {
                        client.send(request, java.net.http.HttpResponse.BodyHandlers.discarding());
                    }
                    return null;
                }));
            }
            for (var f : done) {
                f.get();
            }
        } finally {
            senders.shutdownNow();
        }
    }

    /** Every {@code "commit_time":"..."} of the body (one event or a batch's array) is a sample. */
    private static void arrived(HttpExchange exchange, Samples samples) throws IOException {
        try (exchange; InputStream in = exchange.getRequestBody()) {
            byte[] body = in.readAllBytes();
            long arrival = micros(Instant.now());
            String text = new String(body, StandardCharsets.UTF_8);
            int at = 0;
            while (samples != null && (at = text.indexOf("\"commit_time\":\"", at)) >= 0) {
                at += "\"commit_time\":\"".length();
                samples.add(micros(Instant.parse(text.substring(at, text.indexOf('"', at)))), arrival);
            }
            exchange.sendResponseHeaders(204, -1);
        }
    }

    // --- the load -----------------------------------------------------------------------------

    /**
     * Single-row inserts, each its own transaction, due at fixed times from {@code start} on four
     * connections; returns the rate reached. Commits are synchronous, as by default: with
     * {@code synchronous_commit = off} the server sends a commit only once its WAL writer flushed
     * it (every 200 ms), which would be most of what is measured.
     */
    private static double load(EmbeddedPostgres postgres, String database, int rate, int seconds, Instant start,
            AtomicLong ids) throws Exception {
        int writers = 4;
        long total = (long) rate * seconds;
        long startNanos = System.nanoTime() - Duration.between(start, Instant.now()).toNanos();
        List<Thread> threads = new ArrayList<>();
        AtomicLong done = new AtomicLong();
        List<Exception> failures = java.util.Collections.synchronizedList(new ArrayList<>());
        for (int w = 0; w < writers; w++) {
            int writer = w;
            Thread t = new Thread(() -> {
                try (Connection c = postgres.connect(database)) {
                    try (PreparedStatement insert = c.prepareStatement("INSERT INTO ticks VALUES (?, 'tick')")) {
                        for (long k = writer; k < total; k += writers) {
                            long due = startNanos + k * 1_000_000_000L / rate;
                            long wait = due - System.nanoTime();
                            if (wait > 0) {
                                TimeUnit.NANOSECONDS.sleep(wait);
                            }
                            insert.setLong(1, ids.incrementAndGet());
                            insert.executeUpdate();
                            done.incrementAndGet();
                        }
                    }
                } catch (Exception e) {
                    failures.add(e);
                }
            }, "load-" + w);
            t.start();
            threads.add(t);
        }
        for (Thread t : threads) {
            t.join();
        }
        if (!failures.isEmpty()) {
            throw failures.get(0);
        }
        double elapsed = (System.nanoTime() - startNanos) / 1e9;
        return done.get() / elapsed;
    }

    private static void awaitCount(Samples samples, long count, Duration timeout) throws InterruptedException {
        long deadline = System.nanoTime() + timeout.toNanos();
        while (samples.count() < count && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        if (samples.count() < count) {
            say(String.format(Locale.ROOT, "  only %,d of %,d events arrived", samples.count(), count));
        }
    }

    private static boolean active(Connection c, String slot) throws Exception {
        try (Statement s = c.createStatement(); var rs = s.executeQuery(
                "SELECT active FROM pg_replication_slots WHERE slot_name = '" + slot + "'")) {
            return rs.next() && rs.getBoolean(1);
        }
    }

    private static long micros(Instant t) {
        return t.getEpochSecond() * 1_000_000L + t.getNano() / 1000;
    }

    private static void print(List<Result> results, int seconds, String jar) {
        System.out.println();
        System.out.printf(Locale.ROOT, "commit-to-arrival latency, ms (%d s of load from readiness; %s; 2 CPUs)%n", seconds,
                jar);
        System.out.printf(Locale.ROOT, "  %-15s %8s %8s %7s | %-26s | %-26s | %s%n", "reader", "tx/s", "reached", "ready",
                "first 5 s: p50 p99 max", "after: p50 p99 max", "p99 over the floor (first, after)");
        Map<Integer, Result> floors = new LinkedHashMap<>();
        for (Result r : results) {
            if (r.who().equals("pg_recvlogical")) {
                floors.put(r.rate(), r);
            }
        }
        for (Result r : results) {
            Result floor = floors.get(r.rate());
            String ratio = r == floor || floor == null ? "" : String.format(Locale.ROOT, "%.1f, %.1f",
                    r.first().p99() / floor.first().p99(), r.rest().p99() / floor.rest().p99());
            System.out.printf(Locale.ROOT, "  %-15s %,8d %,8.0f %6s | %7.1f %8.1f %9.1f | %7.1f %8.1f %9.1f | %s%n",
                    r.who(), r.rate(), r.achievedRate(), Double.isNaN(r.ready()) ? "" : String.format(Locale.ROOT,
                            "%.2fs", r.ready()), r.first().p50(), r.first().p99(), r.first().max(), r.rest().p50(),
                    r.rest().p99(), r.rest().max(), ratio);
        }
        System.out.println("  floor: pg_recvlogical with test_decoding on the same load (the server's decoding and"
                + " sending); ready: exec to /q/health/ready");
    }

    private static void say(String line) {
        System.out.println("[bench-latency] " + line);
    }
}
