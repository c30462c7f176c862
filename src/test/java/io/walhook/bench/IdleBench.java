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

import io.walhook.testing.EmbeddedPostgres;
import io.walhook.testing.WalhookProcess;

/**
 * The packaged jar started as the README starts it, on an idle database with one subscription:
 * time from exec to ready, RSS when ready, then CPU and wake-ups (context switches) over an idle
 * window. With several jars (this build's and an older one), runs alternate between them and
 * each figure is given as a median and as a ratio to the first jar's. Reported, never asserted.
 *
 * <pre>
 *   ./scripts/bench-idle                                  # this build as the README starts it (its AppCDS archive), 3 runs, 30 s idle each
 *   ./scripts/bench-idle --log                            # and walhook's log up to readiness, run by run
 *   ./scripts/bench-idle --jars target/quarkus-app/quarkus-run.jar,/tmp/old/quarkus-run.jar --runs 5
 *   ./scripts/bench-idle --jars 'A,A@-XX:TieredStopAtLevel=1'   # JVM options after @
 *   ./scripts/bench-idle --jars 'A,cds:A'                       # A with the AppCDS archive beside it
 * </pre>
 */
public final class IdleBench {

    /** Start-up work (JIT compilation, first polls) is left to settle this long before the idle window. */
    private static final int SETTLE_SECONDS = 10;

    private record Run(String jar, double readySeconds, long rssKb, double idleCpuPercent, double wakeUpsPerSecond) {
    }

    public static void main(String[] args) throws Exception {
        // by default as the README starts it: with the AppCDS archive the package step made beside the jar
        Path built = WalhookProcess.jar();
        List<String> jars = List.of((Files.exists(built.resolveSibling("app-cds.jsa")) ? "cds:" : "") + built);
        int runs = 3;
        int idleSeconds = 30;
        boolean showLog = false;
        for (int i = 0; i < args.length; i++) {
            switch (args[i]) {
                case "--jars" -> jars = List.of(args[++i].split(","));
                case "--runs" -> runs = Integer.parseInt(args[++i]);
                case "--idle" -> idleSeconds = Integer.parseInt(args[++i]);
                case "--log" -> showLog = true;
                default -> {
                    System.err.println("usage: scripts/bench-idle [--jars A,B] [--runs 3] [--idle 30] [--log]");
                    System.exit(2);
                }
            }
        }
        EmbeddedPostgres postgres = EmbeddedPostgres.builder().major(17).start();
        List<Run> results = new ArrayList<>();
        try (CountingSink sink = CountingSink.start(Long.MAX_VALUE, 2)) {
            String database = postgres.createDatabase("idle");
            try (Connection c = postgres.connect(database); Statement s = c.createStatement()) {
                s.execute("CREATE TABLE orders (id bigint PRIMARY KEY, note text)");
            }
            for (int run = 0; run < runs; run++) {
                // alternate the order: neither jar always goes first on a noisy machine
                List<String> order = new ArrayList<>(jars);
                if (run % 2 == 1) {
                    java.util.Collections.reverse(order);
                }
                for (String jar : order) {
                    results.add(measure(postgres, database, sink, jar, idleSeconds, showLog));
                }
            }
        } finally {
            postgres.stop();
        }
        print(results, jars, idleSeconds);
        System.exit(0);
    }

    private static Run measure(EmbeddedPostgres postgres, String database, CountingSink sink, String jar,
            int idleSeconds, boolean showLog) throws Exception {
        // "path@option option": the jar, with JVM options after its own; "cds:path": with the AppCDS
        // archive the package step made beside it (-Dquarkus.package.jar.appcds.enabled=true), run in its directory
        boolean cds = jar.startsWith("cds:");
        String[] parts = (cds ? jar.substring(4) : jar).split("@", 2);
        System.setProperty("walhook.it.jar", parts[0]);
        List<String> options = new ArrayList<>(parts.length > 1 ? List.of(parts[1].split(" ")) : List.of());
        if (cds) {
            options.add("-XX:SharedArchiveFile=app-cds.jsa");
        }
        Map<String, String> env = new LinkedHashMap<>();
        env.put("WALHOOK_SOURCE_URL", postgres.sourceUrl(database));
        env.putAll(sink.subscription("WALHOOK_SUBSCRIPTIONS_ORDERS_", 1));
        env.put("WALHOOK_SUBSCRIPTIONS_ORDERS_TABLES", "public.orders");
        say("starting " + jar + " ...");
        long exec = System.nanoTime();
        try (WalhookProcess walhook = WalhookProcess.start(env, "256m", options, cds)) {
            while (walhook.status("/q/health/ready") != 200) {
                if (!walhook.isAlive() || System.nanoTime() - exec > Duration.ofMinutes(2).toNanos()) {
                    throw new IllegalStateException("walhook did not become ready:\n" + walhook.output());
                }
                Thread.sleep(10);
            }
            double ready = (System.nanoTime() - exec) / 1e9;
            long rss = rssKb(walhook.pid());
            if (showLog) {
                say("  its log up to readiness:\n" + walhook.output());
            }
            // let start-up work (JIT, first polls) settle, then watch it idle
            Thread.sleep(SETTLE_SECONDS * 1000L);
            Map<String, Long> threadsBefore = switchesByThread(walhook.pid());
            Map<Long, ProcStats.ThreadTicks> ticksBefore = ProcStats.threads(walhook.pid());
            long cpuBefore = ProcStats.cpuTicks(walhook.pid());
            long switchesBefore = ProcStats.contextSwitches(walhook.pid());
            long from = System.nanoTime();
            Thread.sleep(idleSeconds * 1000L);
            double seconds = (System.nanoTime() - from) / 1e9;
            long cpu = ProcStats.cpuTicks(walhook.pid()) - cpuBefore;
            long switches = ProcStats.contextSwitches(walhook.pid()) - switchesBefore;
            double percent = ProcStats.ticksToMicros(cpu) / 1e4 / seconds;
            Map<String, Long> threadsAfter = switchesByThread(walhook.pid());
            String busiest = threadsAfter.entrySet().stream()
                    .map(e -> Map.entry(e.getKey(), e.getValue() - threadsBefore.getOrDefault(e.getKey(), 0L)))
                    .filter(e -> e.getValue() > 0)
                    .sorted((a, b) -> Long.compare(b.getValue(), a.getValue())).limit(6)
                    .map(e -> String.format(Locale.ROOT, "%s %.1f/s", e.getKey(), e.getValue() / seconds))
                    .collect(java.util.stream.Collectors.joining(", "));
            Run r = new Run(jar, ready, rss, percent, switches / seconds);
            say(String.format(Locale.ROOT, "  ready %.2f s, RSS %d MB; idle %.3f%% of a core, %.0f wake-ups/s", ready,
                    rss / 1024, percent, r.wakeUpsPerSecond()));
            say("  most wake-ups: " + busiest);
            Map<Long, ProcStats.ThreadTicks> ticksAfter = ProcStats.threads(walhook.pid());
            say("  most CPU: " + ticksAfter.entrySet().stream()
                    .map(e -> Map.entry(e.getValue().name(), e.getValue().ticks()
                            - (ticksBefore.containsKey(e.getKey()) ? ticksBefore.get(e.getKey()).ticks() : 0)))
                    .filter(e -> e.getValue() > 0).sorted((a, b) -> Long.compare(b.getValue(), a.getValue())).limit(6)
                    .map(e -> String.format(Locale.ROOT, "%s %d ms", e.getKey(), ProcStats.ticksToMicros(e.getValue()) / 1000))
                    .collect(java.util.stream.Collectors.joining(", ")));
            walhook.terminate();
            walhook.awaitExit(Duration.ofSeconds(60));
            return r;
        }
    }

    /** Context switches so far of each thread, by "name (tid)". */
    private static Map<String, Long> switchesByThread(long pid) {
        Map<String, Long> byThread = new java.util.HashMap<>();
        try (java.nio.file.DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc", Long.toString(pid),
                "task"))) {
            for (Path task : tasks) {
                try {
                    String name = Files.readString(task.resolve("comm")).strip();
                    long sum = 0;
                    for (String line : Files.readAllLines(task.resolve("status"))) {
                        if (line.startsWith("voluntary_ctxt_switches:") || line.startsWith("nonvoluntary_ctxt_switches:")) {
                            sum += Long.parseLong(line.substring(line.indexOf(':') + 1).strip());
                        }
                    }
                    byThread.put(name + " (" + task.getFileName() + ")", sum);
                } catch (java.io.IOException e) {
                    // the thread ended
                }
            }
        } catch (java.io.IOException e) {
            // the process is gone
        }
        return byThread;
    }

    private static long rssKb(long pid) throws Exception {
        for (String line : Files.readAllLines(Path.of("/proc", Long.toString(pid), "status"))) {
            if (line.startsWith("VmRSS:")) {
                return Long.parseLong(line.substring(6).replace("kB", "").strip());
            }
        }
        return -1;
    }

    private static double median(List<Double> values) {
        List<Double> sorted = values.stream().sorted().toList();
        int n = sorted.size();
        return n % 2 == 1 ? sorted.get(n / 2) : (sorted.get(n / 2 - 1) + sorted.get(n / 2)) / 2;
    }

    private static void print(List<Run> results, List<String> jars, int idleSeconds) {
        System.out.println();
        System.out.printf(Locale.ROOT, "walhook idle and start-up (medians of %d runs each, %d s idle, 2 CPUs)%n",
                results.size() / jars.size(), idleSeconds);
        System.out.printf(Locale.ROOT, "  %-50s %10s %10s %14s %12s%n", "jar", "ready", "RSS", "idle CPU", "wake-ups/s");
        double[] first = null;
        for (String jar : jars) {
            List<Run> mine = results.stream().filter(r -> r.jar().equals(jar)).toList();
            double ready = median(mine.stream().map(Run::readySeconds).toList());
            double rss = median(mine.stream().map(r -> (double) r.rssKb()).toList()) / 1024;
            double cpu = median(mine.stream().map(Run::idleCpuPercent).toList());
            double wakeUps = median(mine.stream().map(Run::wakeUpsPerSecond).toList());
            String name = jar.length() > 50 ? "..." + jar.substring(jar.length() - 47) : jar;
            System.out.printf(Locale.ROOT, "  %-50s %9.2fs %7.0f MB %13.3f%% %12.0f%n", name, ready, rss, cpu, wakeUps);
            if (first == null) {
                first = new double[] {ready, rss, cpu, wakeUps};
            } else {
                System.out.printf(Locale.ROOT, "  %-50s %10.2f %10.2f %14.2f %12.2f%n", "  ratio to the first jar",
                        ready / first[0], rss / first[1], cpu / Math.max(first[2], 1e-9), wakeUps / first[3]);
            }
        }
    }

    private static void say(String line) {
        System.out.println("[bench-idle] " + line);
    }
}
