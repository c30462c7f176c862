package io.walhook.testing;

import java.io.IOException;
import java.net.HttpURLConnection;
import java.net.URI;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * The packaged walhook ({@code target/quarkus-app/quarkus-run.jar}) in its own process,
 * configured by environment variables only, as operators run it.
 */
public final class WalhookProcess implements AutoCloseable {

    /**
     * The JVM options walhook runs with, here as in deploy/ (Dockerfile.jvm, compose, k8s: DeployFilesTest
     * keeps them the same). Serial GC for the small heap; an exit, not a stalled thread, when the heap
     * runs out (a restart resumes from the checkpoint); and on a machine of one or two cores, a JIT
     * that does less while a backlog warms it up: tier 2 instead of tier 3's full profiling while C2
     * is behind (Tier3DelayOn/Off), and C2 calls a callee it already compiled to over 300 bytes
     * rather than compiling it again inline (InlineSmallCode); and no performance-data file, whose
     * sampler woke the JVM 20 times a second while idle (UsePerfData; docs/benchmarks.md, idle).
     * README "Drain" has the measurements.
     */
    public static final List<String> JVM_OPTIONS = List.of("-XX:+UseSerialGC", "-XX:+ExitOnOutOfMemoryError", "-XX:InlineSmallCode=300",
            "-XX:Tier3DelayOn=1", "-XX:Tier3DelayOff=1", "-XX:-UsePerfData");

    private final Process process;
    private final Path output;
    private final int httpPort;

    private WalhookProcess(Process process, Path output, int httpPort) {
        this.process = process;
        this.output = output;
        this.httpPort = httpPort;
    }

    /**
     * The jar the ITs start: target/quarkus-app's, or another build's with
     * {@code -Dwalhook.it.jar=/path/to/quarkus-run.jar} (a test that must fail on an older build runs against it).
     */
    public static Path jar() {
        Path jar = Path.of(System.getProperty("walhook.it.jar", "target/quarkus-app/quarkus-run.jar")).toAbsolutePath();
        if (!Files.isRegularFile(jar)) {
            throw new HarnessException(jar + " does not exist: run './mvnw package' first");
        }
        return jar;
    }

    /**
     * The native executable ({@code ./mvnw -Pnative verify} runs the ITs against it: failsafe sets
     * {@code walhook.it.native} and {@code native.image.path}).
     */
    public static Path nativeExecutable() {
        Path executable = Path.of(System.getProperty("native.image.path", "target/walhook-runner")).toAbsolutePath();
        if (!Files.isExecutable(executable)) {
            throw new HarnessException(executable + " does not exist: run './mvnw -Pnative package' first");
        }
        return executable;
    }

    /** Starts walhook with exactly these variables (plus PATH and HOME) and a free HTTP port. */
    public static WalhookProcess start(Map<String, String> env) {
        return start(env, "256m");
    }

    /** As {@link #start(Map)}, with this maximum heap ({@code -Xmx}, e.g. {@code 256m}). */
    public static WalhookProcess start(Map<String, String> env, String maxHeap) {
        return start(env, maxHeap, List.of());
    }

    /**
     * As {@link #start(Map, String)}, with more JVM options after {@link #JVM_OPTIONS} (a later one
     * wins: the benchmark compares other settings this way); the native executable takes none.
     */
    public static WalhookProcess start(Map<String, String> env, String maxHeap, List<String> jvmOptions) {
        return start(env, maxHeap, jvmOptions, false);
    }

    /**
     * As {@link #start(Map, String, List)}; {@code inJarDirectory} runs {@code java -jar quarkus-run.jar}
     * in the jar's directory, as an AppCDS archive made by the package step expects (its class path
     * is recorded as given).
     */
    public static WalhookProcess start(Map<String, String> env, String maxHeap, List<String> jvmOptions,
            boolean inJarDirectory) {
        return start(env, maxHeap, jvmOptions, inJarDirectory ? jar().getParent() : null, List.of());
    }

    /** As {@link #start(Map)}, in {@code directory} (where a {@code .env} file Quarkus reads may be). */
    public static WalhookProcess startIn(Path directory, Map<String, String> env) {
        return start(env, "256m", List.of(), directory, List.of());
    }

    /**
     * Whether walhook can be started with a {@code /etc/resolv.conf} of its own
     * ({@link #startResolvingWith}): as root, where a mount namespace may be made.
     */
    public static boolean ownResolverPossible() {
        try {
            Process probe = new ProcessBuilder("unshare", "-m", "true").redirectErrorStream(true).start();
            return probe.waitFor(10, TimeUnit.SECONDS) && probe.exitValue() == 0;
        } catch (IOException e) {
            return false;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /**
     * As {@link #start(Map)}, walhook seeing {@code resolvConf} as its {@code /etc/resolv.conf}
     * (in a mount namespace of its own, the machine's untouched): its host names are looked up
     * where that file says. Needs {@link #ownResolverPossible()}.
     */
    public static WalhookProcess startResolvingWith(Path resolvConf, Map<String, String> env) {
        return startSeeing(resolvConf, "/etc/resolv.conf", env);
    }

    /** As {@link #startResolvingWith}, walhook seeing {@code hosts} as its {@code /etc/hosts}. */
    public static WalhookProcess startWithHosts(Path hosts, Map<String, String> env) {
        return startSeeing(hosts, "/etc/hosts", env);
    }

    private static WalhookProcess startSeeing(Path file, String as, Map<String, String> env) {
        return start(env, "256m", List.of(), null, List.of("unshare", "-m", "sh", "-c",
                "mount --bind \"$0\" " + as + " && exec \"$@\"", file.toAbsolutePath().toString()));
    }

    private static WalhookProcess start(Map<String, String> env, String maxHeap, List<String> jvmOptions,
            Path directory, List<String> wrapper) {
        // below the ephemeral range: picked here and bound seconds later, a port of that range could be
        // given meanwhile to an outgoing connection (of a test JVM running beside this one, say) as its own
        int port = Ports.restartable();
        try {
            Path output = Files.createTempFile("walhook-process", ".log");
            List<String> command = new ArrayList<>(wrapper);
            if (Boolean.getBoolean("walhook.it.native")) {
                command.addAll(List.of(nativeExecutable().toString(), "-Xmx" + maxHeap));
            } else {
                command.addAll(List.of(Path.of(System.getProperty("java.home"), "bin", "java").toString(), "-Xmx" + maxHeap));
                command.addAll(JVM_OPTIONS);
                command.addAll(jvmOptions);
                command.addAll(List.of("-jar", jar().getParent().equals(directory) ? jar().getFileName().toString()
                        : jar().toString()));
            }
            ProcessBuilder builder = new ProcessBuilder(command).redirectErrorStream(true)
                    .redirectOutput(output.toFile());
            if (directory != null) {
                builder.directory(directory.toFile());
            }
            Map<String, String> environment = builder.environment();
            environment.keySet().removeIf(k -> !k.equals("PATH") && !k.equals("HOME") && !k.equals("TMPDIR"));
            environment.put("QUARKUS_HTTP_PORT", Integer.toString(port));
            environment.putAll(env);
            return new WalhookProcess(builder.start(), output, port);
        } catch (IOException e) {
            throw new HarnessException("cannot start walhook: " + e.getMessage(), e);
        }
    }

    /** The process id of walhook's JVM (for /proc: CPU time, RSS). */
    public long pid() {
        return process.pid();
    }

    public int httpPort() {
        return httpPort;
    }

    public URI uri(String path) {
        return URI.create("http://127.0.0.1:" + httpPort + path);
    }

    /** Everything the process printed so far. */
    public String output() {
        try {
            return Files.readString(output, StandardCharsets.UTF_8);
        } catch (IOException e) {
            return "(cannot read output: " + e.getMessage() + ")";
        }
    }

    /** Waits for the process to end by itself; returns its exit status. */
    public int awaitExit(Duration timeout) throws InterruptedException {
        if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
            throw new AssertionError("walhook did not exit within " + timeout + "; output:\n" + output());
        }
        return process.exitValue();
    }

    /** Waits until {@code /q/health/ready} answers 200, or fails with the process's output. */
    public void awaitReady(Duration timeout) throws InterruptedException {
        Instant deadline = Instant.now().plus(timeout);
        while (Instant.now().isBefore(deadline)) {
            if (!process.isAlive()) {
                throw new AssertionError("walhook exited with " + process.exitValue() + "; output:\n" + output());
            }
            if (status("/q/health/ready") == 200) {
                return;
            }
            Thread.sleep(200);
        }
        // the first line is what a build's summary shows: what readiness said, and walhook's last line
        String output = output();
        String[] lines = output.strip().split("\n");
        throw new AssertionError("walhook was not ready within " + timeout + " (readiness: " + readiness() + "; its last line: "
                + lines[lines.length - 1].strip() + ")\nits threads:\n" + threadDump() + "\noutput:\n" + output);
    }

    /** {@code /q/health/ready}'s status and body on one line, or why nothing answered. */
    private String readiness() {
        try {
            HttpURLConnection connection = (HttpURLConnection) uri("/q/health/ready").toURL().openConnection();
            connection.setConnectTimeout(1000);
            connection.setReadTimeout(5000);
            try {
                int code = connection.getResponseCode();
                java.io.InputStream body = code < 400 ? connection.getInputStream() : connection.getErrorStream();
                return code + " " + (body == null ? "" : new String(body.readAllBytes(), StandardCharsets.UTF_8)
                        .replaceAll("\\s+", " "));
            } finally {
                connection.disconnect();
            }
        } catch (IOException e) {
            return "no answer (" + e + ")";
        }
    }

    /** The HTTP status of a GET, or -1 when nothing answers. */
    public int status(String path) {
        try {
            HttpURLConnection connection = (HttpURLConnection) uri(path).toURL().openConnection();
            connection.setConnectTimeout(1000);
            connection.setReadTimeout(5000);
            try {
                return connection.getResponseCode();
            } finally {
                connection.disconnect();
            }
        } catch (IOException e) {
            return -1;
        }
    }

    /** Its threads as {@code jcmd Thread.print} shows them (for a test that gives up waiting), or why not. */
    public String threadDump() {
        try {
            Process jcmd = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "jcmd").toString(),
                    Long.toString(process.pid()), "Thread.print").redirectErrorStream(true).start();
            String dump = new String(jcmd.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            jcmd.waitFor(30, TimeUnit.SECONDS);
            return dump;
        } catch (IOException e) {
            return "(no thread dump: " + e.getMessage() + ")";
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return "(no thread dump: interrupted)";
        }
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    /** SIGTERM, as an orchestrator stops it. */
    public void terminate() {
        process.destroy();
    }

    @Override
    public void close() {
        process.destroyForcibly();
        try {
            process.waitFor(30, TimeUnit.SECONDS);
            // kept for a look after a failing test: target/walhook-logs, one file per process
            Path kept = Path.of("target", "walhook-logs");
            Files.createDirectories(kept);
            Files.move(output, kept.resolve(output.getFileName()), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (IOException ignored) {
            // a leftover log in the temp directory
        }
    }

}
