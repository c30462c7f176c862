package io.walhook.bench;

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalLong;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import io.walhook.testing.EmbeddedPostgres;
import io.walhook.testing.WalhookProcess;

/**
 * The drain benchmark behind {@code scripts/bench}: an embedded PostgreSQL with a backlog in a
 * table {@code bench}, two logical slots made before the backlog, one drained by
 * {@code pg_recvlogical} (the walsender's own limit), the other by the packaged walhook into a
 * local counting webhook sink. Prints rates, their ratio, walhook's CPU per event and peak RSS.
 * Test scope only: nothing here ships in the production artifact.
 */
public final class Bench {

    private static final String RECV_SLOT = "bench_recv";
    private static final String WALHOOK_SLOT = "walhook";
    private static final String PUBLICATION = "walhook";
    /** No delivery progress for this long fails the run. */
    private static final long STALL_SECONDS = 120;

    record Options(long rows, int txSize, String walhookHeap, int batch, int major, Path recvlogical, int sinkThreads,
            int recvRuns, String sink, int runs) {

        static Options parse(String[] args) {
            long rows = 500_000;
            int txSize = 100;
            String heap = "256m";
            int batch = 500;
            int major = 17;
            Path recvlogical = null;
            int sinkThreads = 2;
            int recvRuns = 1;
            int runs = 1;
            String sink = "webhook";
            for (int i = 0; i < args.length; i++) {
                switch (args[i]) {
                    case "--rows" -> rows = positive(args, ++i);
                    case "--tx-size" -> txSize = (int) positive(args, ++i);
                    case "--walhook-heap" -> heap = value(args, ++i);
                    case "--batch" -> batch = (int) positive(args, ++i);
                    case "--pg" -> major = (int) positive(args, ++i);
                    case "--recvlogical" -> recvlogical = Path.of(value(args, ++i));
                    case "--sink-threads" -> sinkThreads = (int) positive(args, ++i);
                    case "--recv-runs" -> recvRuns = (int) positive(args, ++i);
                    case "--runs" -> runs = (int) positive(args, ++i);
                    case "--sink" -> sink = value(args, ++i);
                    case "-h", "--help" -> {
                        System.out.println("usage: scripts/bench [--rows N (500000)] [--tx-size M (100)]"
                                + " [--walhook-heap 256m] [--batch 500] [--pg 17] [--recvlogical PATH] [--sink-threads 2]"
                                + " [--recv-runs 1] [--runs 1] [--sink webhook|amqp]");
                        System.exit(0);
                    }
                    default -> usage("unknown argument '" + args[i] + "' (try --help)");
                }
            }
            if (!heap.matches("[0-9]+[kKmMgG]?")) {
                usage("--walhook-heap takes a -Xmx size such as 256m");
            }
            if (recvRuns > 5) {
                usage("--recv-runs is at most 5");
            }
            if (runs > 5) {
                usage("--runs is at most 5");
            }
            if (!sink.equals("webhook") && !sink.equals("amqp")) {
                usage("--sink is webhook (a counting HTTP receiver) or amqp (an embedded Artemis broker), not '" + sink + "'");
            }
            return new Options(rows, txSize, heap, batch, major, recvlogical, sinkThreads, recvRuns, sink, runs);
        }

        private static String value(String[] args, int i) {
            if (i >= args.length) {
                usage(args[i - 1] + " needs a value");
            }
            return args[i];
        }

        private static long positive(String[] args, int i) {
            String v = value(args, i).replace("_", "").replace(",", "");
            try {
                long n = Long.parseLong(v);
                if (n > 0) {
                    return n;
                }
            } catch (NumberFormatException e) {
                // below
            }
            usage(args[i - 1] + " takes a positive whole number, not '" + args[i] + "'");
            return 0;
        }

        private static void usage(String problem) {
            System.err.println("bench: " + problem);
            System.exit(2);
        }

        long transactions() {
            return (rows + txSize - 1) / txSize;
        }

        /** The slots walhook drains, one per run (a fresh process each), all made before the backlog. */
        List<String> walhookSlots() {
            List<String> slots = new ArrayList<>();
            for (int i = 1; i <= runs; i++) {
                slots.add(i == 1 ? WALHOOK_SLOT : WALHOOK_SLOT + "_" + i);
            }
            return slots;
        }

        /** The slots pg_recvlogical drains, one per run, all made before the backlog. */
        List<String> recvSlots() {
            List<String> slots = new ArrayList<>();
            for (int i = 1; i <= recvRuns; i++) {
                slots.add(i == 1 ? RECV_SLOT : RECV_SLOT + "_" + i);
            }
            return slots;
        }
    }

    private final Options options;
    private final AtomicBoolean stopped = new AtomicBoolean();
    private volatile EmbeddedPostgres postgres;
    private volatile Process recvlogical;
    private volatile Path recvlogicalLog;
    private volatile Sink sink;
    private volatile WalhookProcess walhook;

    private Bench(Options options) {
        this.options = options;
    }

    public static void main(String[] args) {
        Bench bench = new Bench(Options.parse(args));
        AtomicBoolean interrupted = new AtomicBoolean();
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            if (!bench.stopped.get()) {
                interrupted.set(true);
                say("interrupted: stopping ...");
            }
            bench.stopAll();
        }, "bench-stop"));
        int status = 0;
        try {
            bench.run();
        } catch (Exception | AssertionError e) {
            if (!interrupted.get()) {
                System.err.println("[bench] FAILED: " + e.getMessage());
                if (!(e instanceof BenchException)) {
                    e.printStackTrace();
                }
            }
            status = 1;
        } finally {
            bench.stopAll();
        }
        System.exit(status);
    }

    /** A failure whose message says everything. */
    static final class BenchException extends RuntimeException {
        BenchException(String message) {
            super(message);
        }
    }

    private void run() throws Exception {
        Options o = options;
        say(String.format(Locale.ROOT, "%,d rows in %,d-row transactions; walhook -Xmx%s; webhook batches of %d",
                o.rows(), o.txSize(), o.walhookHeap(), o.batch()));
        say("starting an embedded PostgreSQL " + o.major() + " ...");
        postgres = EmbeddedPostgres.builder().major(o.major())
                .setting("max_wal_size", "4GB")
                .setting("checkpoint_timeout", "30min")
                .start();
        Path recvBinary = locateRecvlogical(o.recvlogical(), postgres.binDir());
        String recvVersion = version(recvBinary);
        String database = postgres.createDatabase("bench");
        String serverVersion;
        try (Connection c = postgres.connect(database); Statement s = c.createStatement()) {
            serverVersion = scalar(s, "SHOW server_version");
            s.execute("CREATE TABLE bench (id bigint PRIMARY KEY, customer text, amount numeric(10,2),"
                    + " created_at timestamptz DEFAULT now())");
            s.execute("CREATE PUBLICATION " + PUBLICATION + " FOR ALL TABLES");
            for (String slot : o.recvSlots()) {
                s.execute("SELECT pg_create_logical_replication_slot('" + slot + "', 'pgoutput')");
            }
            for (String slot : o.walhookSlots()) {
                s.execute("SELECT pg_create_logical_replication_slot('" + slot + "', 'pgoutput')");
            }
        }
        say("PostgreSQL " + serverVersion + " on port " + postgres.port() + ", database " + database
                + "; pg_recvlogical: " + recvBinary + " (" + recvVersion + ")");

        // the backlog
        long loadStart = System.nanoTime();
        String endLsn;
        double walMb;
        try (Connection c = postgres.connect(database); Statement s = c.createStatement()) {
            say(String.format(Locale.ROOT, "loading %,d rows in %,d transactions ...", o.rows(), o.transactions()));
            s.execute("DO $bench$ DECLARE i bigint := 0; BEGIN"
                    + " WHILE i < " + o.rows() + " LOOP"
                    + " INSERT INTO bench (id, customer, amount)"
                    + " SELECT g, 'customer-' || (g % 1000), (g % 100000) / 100.0"
                    + " FROM generate_series(i + 1, least(i + " + o.txSize() + ", " + o.rows() + ")) g;"
                    + " COMMIT; i := i + " + o.txSize() + "; END LOOP; END $bench$");
            long count = Long.parseLong(scalar(s, "SELECT count(*) FROM bench"));
            if (count != o.rows()) {
                throw new BenchException("loaded " + count + " rows, expected " + o.rows());
            }
            s.execute("CHECKPOINT");
            endLsn = scalar(s, "SELECT pg_current_wal_lsn()::text");
            walMb = Long.parseLong(scalar(s, "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), confirmed_flush_lsn)::bigint"
                    + " FROM pg_replication_slots WHERE slot_name = '" + RECV_SLOT + "'")) / 1e6;
        }
        say(String.format(Locale.ROOT, "loaded in %.1f s; backlog: %.1f MB of WAL up to %s",
                seconds(System.nanoTime() - loadStart), walMb, endLsn));

        List<Drain> runs = new ArrayList<>();
        for (String slot : o.recvSlots()) {
            Drain run = drainWithRecvlogical(recvBinary, database, slot, endLsn);
            runs.add(run);
            say(String.format(Locale.ROOT, "pg_recvlogical: %.2f s, %,.0f events/s; walsender CPU %s, pg_recvlogical CPU %s",
                    run.seconds, o.rows() / run.seconds, cpu(run.walsender), cpu(run.client)));
        }
        Drain baseline = runs.stream().min(Comparator.comparingDouble(Drain::seconds)).orElseThrow();

        // several walhook runs, for the shared machine's noise: the report shows the median by CPU per event
        List<WalhookDrain> drains = new ArrayList<>();
        for (String slot : o.walhookSlots()) {
            if (!drains.isEmpty()) {
                stopWalhookAndSink();
            }
            WalhookDrain drain = drainWithWalhook(database, endLsn, slot);
            drains.add(drain);
            say(String.format(Locale.ROOT, "walhook (slot %s): %.2f s, %,.0f events/s, %.1f us CPU per event", slot,
                    drain.seconds, o.rows() / drain.seconds, cpuPerEvent(drain)));
        }
        List<WalhookDrain> byCpu = new ArrayList<>(drains);
        byCpu.sort(Comparator.comparingDouble(this::cpuPerEvent));
        print(serverVersion, recvVersion, walMb, baseline, runs, byCpu.get((byCpu.size() - 1) / 2), drains);
    }

    private double cpuPerEvent(WalhookDrain drain) {
        return (double) ProcStats.ticksToMicros(drain.cpu.ticks()) / options.rows();
    }

    /** Ends one walhook run: the process and its sink (before the next run starts its own, and at the end). */
    private void stopWalhookAndSink() {
        WalhookProcess w = walhook;
        walhook = null;
        if (w != null) {
            w.terminate();
            try {
                w.awaitExit(java.time.Duration.ofSeconds(30));
            } catch (InterruptedException | AssertionError e) {
                // close() kills it
            }
            w.close();
        }
        Sink s = sink;
        sink = null;
        if (s != null) {
            s.close();
        }
    }

    // --- baseline --------------------------------------------------------------------------

    private record Drain(double seconds, ProcStats.ThreadTicks walsender, ProcStats.ThreadTicks client) {
    }

    private Drain drainWithRecvlogical(Path binary, String database, String slot, String endLsn) throws Exception {
        List<String> command = List.of(binary.toString(), "-d", database, "-h", "127.0.0.1",
                "-p", Integer.toString(postgres.port()), "-U", "postgres", "-w", "--slot", slot, "--start",
                "-o", "proto_version=1", "-o", "publication_names=" + PUBLICATION, "-f", "/dev/null", "--no-loop",
                "--endpos=" + endLsn);
        say("draining slot " + slot + " with: " + String.join(" ", command));
        recvlogicalLog = Files.createTempFile("bench-recvlogical", ".log");
        ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true)
                .redirectOutput(recvlogicalLog.toFile()).redirectInput(ProcessBuilder.Redirect.from(new File("/dev/null")));
        builder.environment().put("PGPASSWORD", postgres.password());
        long start = System.nanoTime();
        Process process = builder.start();
        recvlogical = process;
        ProcStats.CpuWatch client = new ProcStats.CpuWatch(process.pid());
        ProcStats.CpuWatch walsender = null;
        try (Connection c = postgres.connect(database)) {
            while (walsender == null && process.isAlive()) {
                OptionalLong pid = activePid(c, slot);
                if (pid.isPresent()) {
                    walsender = new ProcStats.CpuWatch(pid.getAsLong());
                } else {
                    Thread.sleep(2);
                }
            }
        }
        if (!process.waitFor(30, TimeUnit.MINUTES)) {
            throw new BenchException("pg_recvlogical did not reach " + endLsn + " within 30 minutes");
        }
        long elapsed = System.nanoTime() - start;
        Thread.sleep(50); // let the watches note the last values
        client.close();
        ProcStats.ThreadTicks walsenderTicks = new ProcStats.ThreadTicks("?", 0, 0);
        if (walsender != null) {
            walsender.close();
            walsenderTicks = walsender.ticks();
        }
        String output = Files.readString(recvlogicalLog, StandardCharsets.UTF_8);
        Files.deleteIfExists(recvlogicalLog);
        recvlogicalLog = null;
        if (process.exitValue() != 0) {
            throw new BenchException("pg_recvlogical exited with " + process.exitValue() + ":\n" + output);
        }
        try (Connection c = postgres.connect(database); Statement s = c.createStatement()) {
            String confirmed = scalar(s, "SELECT confirmed_flush_lsn::text FROM pg_replication_slots WHERE slot_name = '"
                    + slot + "'");
            if (!output.isBlank()) {
                say("pg_recvlogical said: " + output.strip());
            }
            say("slot " + slot + " confirmed_flush_lsn after the drain: " + confirmed);
        }
        return new Drain(seconds(elapsed), walsenderTicks, client.ticks());
    }

    // --- walhook ---------------------------------------------------------------------------

    private record WalhookDrain(double seconds, double toFirstEvent, ProcStats.ThreadTicks cpu, long peakRssKb,
            ProcStats.ThreadTicks walsender, long requests, long batchRequests, long events, long bytes, double ackSeconds,
            List<Map.Entry<String, Long>> threads, String startLine, long contextSwitches, long secondHalfEvents,
            ProcStats.ThreadTicks secondHalfCpu) {
    }

    /** WALHOOK_BENCH_JAVA_OPTIONS, split: JVM options after walhook's own. */
    static final List<String> EXTRA_JVM_OPTIONS = List.of(System.getenv()
            .getOrDefault("WALHOOK_BENCH_JAVA_OPTIONS", "").strip().split("\\s+")).stream().filter(o -> !o.isEmpty()).toList();

    /** Every JVM option walhook's process gets, as one line. */
    private String jvmOptions() {
        List<String> all = new ArrayList<>(List.of("-Xmx" + options.walhookHeap()));
        all.addAll(WalhookProcess.JVM_OPTIONS);
        all.addAll(EXTRA_JVM_OPTIONS);
        return String.join(" ", all);
    }

    private WalhookDrain drainWithWalhook(String database, String endLsn, String slot) throws Exception {
        Options o = options;
        sink = o.sink().equals("amqp") ? AmqpCountingSink.start(o.rows()) : CountingSink.start(o.rows(), o.sinkThreads());
        Map<String, String> env = new LinkedHashMap<>();
        env.put("WALHOOK_SOURCE_URL", postgres.sourceUrl(database));
        env.put("WALHOOK_SLOT", slot);
        env.put("WALHOOK_PUBLICATION", PUBLICATION);
        env.put("WALHOOK_ALLOW_PRIVATE_DESTINATIONS", "true");
        env.put("WALHOOK_SUBSCRIPTIONS_BENCH_TABLES", "public.bench");
        env.putAll(new java.util.TreeMap<>(sink.subscription("WALHOOK_SUBSCRIPTIONS_BENCH_", o.batch())));
        // more JVM options after walhook's own (a later one wins), e.g. a profiler:
        // WALHOOK_BENCH_JAVA_OPTIONS=-XX:StartFlightRecording=filename=/tmp/wh.jfr,settings=profile
        say("starting walhook (target/quarkus-app/quarkus-run.jar, " + jvmOptions() + ") with:");
        env.forEach((k, v) -> System.out.println("    " + k + "=" + v));
        WalhookProcess process = WalhookProcess.start(env, o.walhookHeap(), EXTRA_JVM_OPTIONS);
        walhook = process;
        long pid = process.pid();

        // the clock starts when walhook says it streams the slot
        String startLine = null;
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(120);
        while (startLine == null) {
            if (!process.isAlive()) {
                throw new BenchException("walhook exited before streaming; its output:\n" + process.output());
            }
            if (System.nanoTime() > deadline) {
                throw new BenchException("walhook did not start streaming within 120 s; its output:\n" + process.output());
            }
            startLine = streamingLine(process.output());
            if (startLine == null) {
                Thread.sleep(5);
            }
        }
        long start = System.nanoTime();
        ProcStats.ThreadTicks cpuStart = ProcStats.process(pid);
        long switchesStart = ProcStats.contextSwitches(pid);
        Map<Long, ProcStats.ThreadTicks> threadsStart = ProcStats.threads(pid);
        say("walhook streams (" + startLine.strip() + "); draining ...");

        ProcStats.CpuWatch walsender = null;
        // the second half of the drain, for the steady state (the JIT compiles the hot paths in the first)
        ProcStats.ThreadTicks cpuMid = null;
        long eventsMid = 0;
        long lastCount = -1;
        long lastChange = System.nanoTime();
        long lastReport = System.nanoTime();
        try (Connection c = postgres.connect(database)) {
            while (!sink.tally().await(walsender == null ? 5 : cpuMid == null ? 20 : 1000, TimeUnit.MILLISECONDS)) {
                if (cpuMid == null && sink.tally().events() >= o.rows() / 2) {
                    cpuMid = ProcStats.process(pid);
                    eventsMid = sink.tally().events();
                }
                if (walsender == null) {
                    OptionalLong ws = activePid(c, slot);
                    if (ws.isPresent()) {
                        walsender = new ProcStats.CpuWatch(ws.getAsLong());
                    }
                }
                if (!process.isAlive()) {
                    throw new BenchException("walhook exited mid-drain after " + sink.tally().events() + " events; its output:\n"
                            + tail(process.output()));
                }
                long now = System.nanoTime();
                long count = sink.tally().events();
                if (count != lastCount) {
                    lastCount = count;
                    lastChange = now;
                } else if (now - lastChange > TimeUnit.SECONDS.toNanos(STALL_SECONDS)) {
                    throw new BenchException("no delivery for " + STALL_SECONDS + " s at " + count + " of " + o.rows()
                            + " events; walhook's output:\n" + tail(process.output()));
                }
                if (now - lastReport >= TimeUnit.SECONDS.toNanos(10)) {
                    lastReport = now;
                    double s = seconds(now - start);
                    say(String.format(Locale.ROOT, "  %5.0f s: %,d of %,d events delivered (%,.0f/s) in %,d requests",
                            s, count, o.rows(), count / s, sink.requests()));
                }
            }
        }
        long end = sink.tally().completedNanos();
        ProcStats.ThreadTicks cpuEnd = ProcStats.process(pid);
        long switches = ProcStats.contextSwitches(pid) - switchesStart;
        Map<Long, ProcStats.ThreadTicks> threadsEnd = ProcStats.threads(pid);
        ProcStats.ThreadTicks walsenderTicks = walsender == null ? new ProcStats.ThreadTicks("?", 0, 0) : walsender.ticksNow();
        if (walsender != null) {
            walsender.close();
        }
        long peak = ProcStats.peakRssKb(pid);
        double toFirst = sink.tally().firstEventNanos() == 0 ? Double.NaN : seconds(sink.tally().firstEventNanos() - start);

        // informative: how long after the last delivery the slot confirms the backlog's end
        double ackSeconds = Double.NaN;
        try (Connection c = postgres.connect(database);
             PreparedStatement s = c.prepareStatement("SELECT confirmed_flush_lsn >= ?::pg_lsn FROM pg_replication_slots"
                     + " WHERE slot_name = ?")) {
            s.setString(1, endLsn);
            s.setString(2, slot);
            long ackDeadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
            while (System.nanoTime() < ackDeadline) {
                try (ResultSet rs = s.executeQuery()) {
                    if (rs.next() && rs.getBoolean(1)) {
                        ackSeconds = seconds(System.nanoTime() - end);
                        break;
                    }
                }
                Thread.sleep(20);
            }
        }
        // a little later, in case of redeliveries
        Thread.sleep(200);
        ProcStats.ThreadTicks used = new ProcStats.ThreadTicks("walhook", cpuEnd.user() - cpuStart.user(),
                cpuEnd.sys() - cpuStart.sys());
        return new WalhookDrain(seconds(end - start), toFirst, used, peak, walsenderTicks,
                sink.requests(), sink.batchRequests(), sink.tally().events(), sink.tally().bytes(), ackSeconds,
                threadBreakdown(threadsStart, threadsEnd), startLine.strip(), switches,
                cpuMid == null ? 0 : o.rows() - eventsMid,
                cpuMid == null ? null : new ProcStats.ThreadTicks("walhook", cpuEnd.user() - cpuMid.user(), cpuEnd.sys() - cpuMid.sys()));
    }

    private static String streamingLine(String output) {
        int at = output.indexOf("streaming slot");
        if (at < 0) {
            return null;
        }
        int end = output.indexOf('\n', at);
        if (end < 0) {
            return null; // the line is still being written
        }
        int begin = output.lastIndexOf('\n', at) + 1;
        return output.substring(begin, end);
    }

    /** CPU ticks per thread name (pool threads summed) over the drain, most first. */
    private static List<Map.Entry<String, Long>> threadBreakdown(Map<Long, ProcStats.ThreadTicks> before,
            Map<Long, ProcStats.ThreadTicks> after) {
        Map<String, Long> byName = new HashMap<>();
        after.forEach((tid, t) -> {
            ProcStats.ThreadTicks b = before.get(tid);
            long used = t.ticks() - (b == null ? 0 : b.ticks());
            if (used > 0) {
                byName.merge(t.name().replaceAll("[#-]?[0-9]+$", "*"), used, Long::sum);
            }
        });
        List<Map.Entry<String, Long>> list = new ArrayList<>(byName.entrySet());
        list.sort(Map.Entry.<String, Long>comparingByValue(Comparator.reverseOrder()));
        return list;
    }

    // --- output ----------------------------------------------------------------------------

    private void print(String serverVersion, String recvVersion, double walMb, Drain base, List<Drain> runs,
            WalhookDrain w, List<WalhookDrain> drains) {
        Options o = options;
        long n = o.rows();
        double recvRate = n / base.seconds;
        double walhookRate = n / w.seconds;
        double ratio = walhookRate / recvRate;
        double cpuPerEvent = (double) ProcStats.ticksToMicros(w.cpu.ticks()) / n;
        String mode = o.sink().equals("amqp")
                ? String.format(Locale.ROOT, "AMQP 1.0 to an embedded Artemis (%,d durable messages)", w.requests)
                : w.batchRequests > 0
                ? String.format(Locale.ROOT, "batched (%,d requests, %.1f events each)", w.requests,
                        (double) w.events / w.requests)
                : String.format(Locale.ROOT, "per-event (%,d requests)", w.requests);
        System.out.println();
        System.out.println("walhook drain benchmark (" + "PostgreSQL " + serverVersion + ", " + recvVersion + ", "
                + Runtime.getRuntime().availableProcessors() + " CPUs)");
        row("rows (insert events)", String.format(Locale.ROOT, "%,d", n));
        row("transactions", String.format(Locale.ROOT, "%,d of %,d rows", o.transactions(), o.txSize()));
        row("backlog WAL", String.format(Locale.ROOT, "%.1f MB", walMb));
        StringBuilder others = new StringBuilder();
        if (runs.size() > 1) {
            others.append("; fastest of");
            runs.forEach(r -> others.append(String.format(Locale.ROOT, " %.2f", r.seconds)));
            others.append(" s");
        }
        row("pg_recvlogical", String.format(Locale.ROOT, "%.2f s, %,.0f events/s%s", base.seconds, recvRate, others));
        row("  its CPU", "walsender " + cpu(base.walsender) + "; pg_recvlogical " + cpu(base.client));
        row("walhook", String.format(Locale.ROOT, "%.2f s, %,.0f events/s (first event after %.2f s)",
                w.seconds, walhookRate, w.toFirstEvent));
        row("  its JVM options", jvmOptions());
        row("  its CPU", "walsender " + cpu(w.walsender) + "; walhook " + cpu(w.cpu));
        if (drains.size() > 1) {
            StringBuilder all = new StringBuilder();
            for (WalhookDrain d : drains) {
                all.append(all.length() == 0 ? "" : "; ").append(String.format(Locale.ROOT, "%,.0f events/s %.1f us",
                        n / d.seconds, cpuPerEvent(d)));
            }
            row("  all " + drains.size() + " runs", all + " (the median by CPU per event is shown)");
        }
        row("ratio walhook/pg_recvlogical", String.format(Locale.ROOT, "%.3f  (goal >= 0.5: %s)", ratio,
                ratio >= 0.5 ? "met" : "not met"));
        row("walhook CPU per event", String.format(Locale.ROOT, "%.1f us  (goal < 5 us: %s)", cpuPerEvent,
                cpuPerEvent < 5 ? "met" : "not met"));
        long compiling = w.threads.stream().filter(t -> t.getKey().startsWith("C1 Compiler") || t.getKey().startsWith("C2 Compiler"))
                .mapToLong(Map.Entry::getValue).sum();
        row("  outside the JIT compilers", String.format(Locale.ROOT, "%.1f us per event (the compiler threads: %.1f)",
                (double) ProcStats.ticksToMicros(w.cpu.ticks() - compiling) / n, (double) ProcStats.ticksToMicros(compiling) / n));
        if (w.secondHalfCpu != null && w.secondHalfEvents > 0) {
            row("  second half of the drain", String.format(Locale.ROOT, "%.1f us per event over its last %,d events"
                    + " (the JIT compiles the hot paths in the first)",
                    (double) ProcStats.ticksToMicros(w.secondHalfCpu.ticks()) / w.secondHalfEvents, w.secondHalfEvents));
        }
        row("walhook peak RSS", w.peakRssKb < 0 ? "unknown" : String.format(Locale.ROOT, "%.0f MB (VmHWM, -Xmx%s)",
                w.peakRssKb / 1024.0, o.walhookHeap()));
        row("delivery mode", mode);
        row("delivered", String.format(Locale.ROOT, "%,d events, %.1f MB of bodies%s", w.events, w.bytes / 1e6,
                w.events > n ? " (MORE than the rows: redeliveries)" : ""));
        row("slot acknowledged", Double.isNaN(w.ackSeconds) ? "not within 30 s of the last delivery"
                : String.format(Locale.ROOT, "backlog end %.2f s after the last delivery", w.ackSeconds));
        StringBuilder threads = new StringBuilder();
        long total = Math.max(1, w.cpu.ticks());
        for (int i = 0; i < Math.min(6, w.threads.size()); i++) {
            Map.Entry<String, Long> t = w.threads.get(i);
            threads.append(i == 0 ? "" : ", ").append(t.getKey()).append(' ')
                    .append(String.format(Locale.ROOT, "%.0f%%", 100.0 * t.getValue() / total));
        }
        row("walhook CPU by thread", threads.toString());
        row("walhook context switches", String.format(Locale.ROOT, "%,d (%.2f per event)", w.contextSwitches,
                (double) w.contextSwitches / n));
    }

    private static void row(String name, String value) {
        System.out.printf(Locale.ROOT, "  %-30s %s%n", name, value);
    }

    /** "5.66 s (sys 2.10 s)" */
    private static String cpu(ProcStats.ThreadTicks t) {
        return String.format(Locale.ROOT, "%.2f s (sys %.2f s)", ProcStats.ticksToMicros(t.ticks()) / 1e6,
                ProcStats.ticksToMicros(t.sys()) / 1e6);
    }

    // --- helpers ---------------------------------------------------------------------------

    /** pg_recvlogical: from the server's binaries, else the machine's PostgreSQL packages, else PATH. */
    static Path locateRecvlogical(Path explicit, Optional<Path> binDir) {
        if (explicit != null) {
            if (!Files.isExecutable(explicit)) {
                throw new BenchException("--recvlogical " + explicit + " is not an executable");
            }
            return explicit;
        }
        List<Path> candidates = new ArrayList<>();
        binDir.ifPresent(b -> candidates.add(b.resolve("pg_recvlogical")));
        try (var versions = Files.list(Path.of("/usr/lib/postgresql"))) {
            versions.filter(p -> p.getFileName().toString().matches("[0-9]+"))
                    .sorted(Comparator.comparingInt((Path p) -> Integer.parseInt(p.getFileName().toString())).reversed())
                    .forEach(p -> candidates.add(p.resolve("bin").resolve("pg_recvlogical")));
        } catch (IOException e) {
            // no packaged PostgreSQL
        }
        for (String dir : System.getenv().getOrDefault("PATH", "").split(File.pathSeparator)) {
            if (!dir.isEmpty()) {
                candidates.add(Path.of(dir, "pg_recvlogical"));
            }
        }
        for (Path p : candidates) {
            if (Files.isExecutable(p)) {
                return p;
            }
        }
        throw new BenchException("no pg_recvlogical: the embedded server's binaries (" + binDir.map(Path::toString)
                .orElse("none") + ") have none, nor /usr/lib/postgresql/*/bin or PATH; install a PostgreSQL client"
                + " (e.g. the Debian package postgresql-client) or pass --recvlogical PATH");
    }

    private static String version(Path binary) {
        try {
            Process p = new ProcessBuilder(binary.toString(), "--version").redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8).strip();
            p.waitFor(10, TimeUnit.SECONDS);
            return out;
        } catch (IOException e) {
            return "pg_recvlogical (version unknown: " + e.getMessage() + ")";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "pg_recvlogical";
        }
    }

    private static OptionalLong activePid(Connection c, String slot) throws SQLException {
        try (PreparedStatement s = c.prepareStatement("SELECT active_pid FROM pg_replication_slots WHERE slot_name = ?")) {
            s.setString(1, slot);
            try (ResultSet rs = s.executeQuery()) {
                if (rs.next()) {
                    long pid = rs.getLong(1);
                    if (!rs.wasNull()) {
                        return OptionalLong.of(pid);
                    }
                }
            }
        }
        return OptionalLong.empty();
    }

    private static String scalar(Statement s, String sql) throws SQLException {
        try (ResultSet rs = s.executeQuery(sql)) {
            rs.next();
            return rs.getString(1);
        }
    }

    private static String tail(String output) {
        String[] lines = output.split("\n");
        return String.join("\n", java.util.Arrays.asList(lines).subList(Math.max(0, lines.length - 40), lines.length));
    }

    private static double seconds(long nanos) {
        return nanos / 1e9;
    }

    private static void say(String line) {
        System.out.println("[bench] " + line);
    }

    /** Stops whatever runs: pg_recvlogical, walhook (SIGTERM, then kill), the sink, PostgreSQL; removes temp files. */
    private synchronized void stopAll() {
        if (!stopped.compareAndSet(false, true)) {
            return;
        }
        Process recv = recvlogical;
        if (recv != null && recv.isAlive()) {
            recv.destroy();
            try {
                if (!recv.waitFor(10, TimeUnit.SECONDS)) {
                    recv.destroyForcibly();
                }
            } catch (InterruptedException e) {
                recv.destroyForcibly();
            }
        }
        stopWalhookAndSink();
        EmbeddedPostgres pg = postgres;
        if (pg != null) {
            pg.stop();
        }
        Path log = recvlogicalLog;
        if (log != null) {
            try {
                Files.deleteIfExists(log);
            } catch (IOException ignored) {
                // a leftover log in the temp directory
            }
        }
        say("stopped: walhook, sink and PostgreSQL; temporary files removed");
    }
}
