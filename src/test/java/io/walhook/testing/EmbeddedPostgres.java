package io.walhook.testing;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.attribute.PosixFilePermission;
import java.nio.file.attribute.UserPrincipalLookupService;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.TimeUnit;

import com.sun.security.auth.module.UnixSystem;

/**
 * A throwaway PostgreSQL cluster: initdb into a temporary directory, started with pg_ctl on a
 * free port with {@code wal_level=logical}, destroyed by {@link #stop()}. PostgreSQL refuses to
 * run as root, so when the tests are root the server tools run as {@code nobody} through
 * {@code setpriv} and the data directory belongs to nobody.
 */
public final class EmbeddedPostgres implements PostgresServer {

    private static final String USER = "postgres";
    private static final String PASSWORD = "postgres";
    private static final Duration TOOL_TIMEOUT = Duration.ofSeconds(120);

    private final int major;
    private final Path bin;
    private final Path base;
    private final Path data;
    private final Path log;
    private final boolean asNobody;
    private volatile int port;
    private volatile boolean running;

    private EmbeddedPostgres(int major, Path bin, Path base, boolean asNobody) {
        this.major = major;
        this.bin = bin;
        this.base = base;
        this.data = base.resolve("data");
        this.log = base.resolve("postgres.log");
        this.asNobody = asNobody;
    }

    public static Builder builder() {
        return new Builder();
    }

    /** Options of one cluster; every field has a default that suits the tests. */
    public static final class Builder {
        private int major = TestPostgres.defaultMajor();
        private Path binDir;
        private Path parentDir = Path.of(System.getProperty("java.io.tmpdir"));
        private int port;
        private final Map<String, String> settings = new LinkedHashMap<>();

        private Builder() {
            settings.put("wal_level", "logical");
            settings.put("max_wal_senders", "100");
            settings.put("max_replication_slots", "100");
            settings.put("max_prepared_transactions", "20");
            settings.put("max_connections", "100");
            settings.put("fsync", "off");
            settings.put("full_page_writes", "off");
            settings.put("shared_buffers", "64MB");
            settings.put("log_min_messages", "warning");
        }

        public Builder major(int major) {
            this.major = major;
            return this;
        }

        /** Use these binaries instead of locating them with {@link PostgresBinaries}. */
        public Builder binDir(Path binDir) {
            this.binDir = binDir;
            return this;
        }

        /** Where the cluster's temporary directory is made. */
        public Builder parentDir(Path parentDir) {
            this.parentDir = parentDir;
            return this;
        }

        /** A fixed port; 0 (the default) picks a free one. */
        public Builder port(int port) {
            this.port = port;
            return this;
        }

        public Builder setting(String name, String value) {
            settings.put(name, value);
            return this;
        }

        /**
         * Commits that only the WAL writer flushes: synchronous_commit off, and nothing else that writes
         * WAL out (no background writer page writes, no autovacuum, no checkpoint on its own): see
         * {@link #holdWalWriter} and {@link #crashLosingUnflushedCommits}.
         */
        public Builder unflushedCommits() {
            return setting("synchronous_commit", "off").setting("bgwriter_lru_maxpages", "0")
                    .setting("autovacuum", "off").setting("checkpoint_timeout", "1h");
        }

        public EmbeddedPostgres start() {
            Path bin = binDir != null ? binDir : PostgresBinaries.locate(major);
            for (String tool : List.of("initdb", "pg_ctl", "postgres")) {
                if (!Files.isExecutable(bin.resolve(tool))) {
                    throw new HarnessException("PostgreSQL " + major + " binaries in " + bin + " are incomplete: "
                            + tool + " is missing or not executable");
                }
            }
            boolean asNobody = new UnixSystem().getUid() == 0;
            Path base;
            try {
                base = Files.createTempDirectory(parentDir, "walhook-pg" + major + "-");
            } catch (IOException e) {
                throw new HarnessException("cannot create a data directory under " + parentDir + ": " + e, e);
            }
            EmbeddedPostgres server = new EmbeddedPostgres(major, bin, base, asNobody);
            try {
                server.initdb(settings);
                server.startOnPort(port);
                return server;
            } catch (RuntimeException e) {
                server.stop();
                throw e;
            }
        }
    }

    private void initdb(Map<String, String> settings) {
        try {
            Files.setPosixFilePermissions(base, Set.of(PosixFilePermission.OWNER_READ,
                    PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_EXECUTE));
            if (asNobody) {
                requireSearchableByOthers(base.getParent());
                UserPrincipalLookupService users = base.getFileSystem().getUserPrincipalLookupService();
                Files.setOwner(base, users.lookupPrincipalByName("nobody"));
            }
        } catch (IOException e) {
            throw new HarnessException("cannot prepare " + base + " for the PostgreSQL server user: " + e, e);
        }
        run(List.of(tool("initdb"), "-D", data.toString(), "-U", USER, "-A", "trust", "-E", "UTF8",
                "--no-locale", "--no-sync"), "initdb");
        StringBuilder conf = new StringBuilder("\n# walhook test harness\n");
        conf.append("listen_addresses = '127.0.0.1'\n");
        conf.append("unix_socket_directories = '").append(base).append("'\n");
        settings.forEach((k, v) -> conf.append(k).append(" = '").append(v).append("'\n"));
        try {
            Files.writeString(data.resolve("postgresql.conf"), conf, StandardCharsets.UTF_8,
                    java.nio.file.StandardOpenOption.APPEND);
        } catch (IOException e) {
            throw new HarnessException("cannot write " + data.resolve("postgresql.conf") + ": " + e, e);
        }
    }

    /** As root the server runs as nobody, who must be able to walk down to its directory. */
    private static void requireSearchableByOthers(Path dir) throws IOException {
        for (Path p = dir.toAbsolutePath(); p != null; p = p.getParent()) {
            Set<PosixFilePermission> mode = Files.getPosixFilePermissions(p);
            if (!mode.contains(PosixFilePermission.OTHERS_EXECUTE)) {
                throw new HarnessException("permission: PostgreSQL runs as nobody (the tests run as root) and cannot"
                        + " enter " + p + " (mode " + java.nio.file.attribute.PosixFilePermissions.toString(mode)
                        + "); put the cluster elsewhere, e.g. in /tmp");
            }
        }
    }

    private void startOnPort(int requested) {
        int attempts = requested == 0 ? 5 : 1;
        for (int attempt = 1; ; attempt++) {
            int candidate = requested == 0 ? Ports.restartable() : requested;
            if (requested != 0 && !Ports.isFree(candidate)) {
                throw new HarnessException("port " + candidate + " on 127.0.0.1 is already in use: stop what listens"
                        + " there or let the harness pick a free port");
            }
            ToolResult result = runQuietly(List.of(tool("pg_ctl"), "-D", data.toString(), "-l", log.toString(),
                    "-w", "-t", "60", "-o", "-p " + candidate, "start"));
            if (result.exitCode == 0) {
                port = candidate;
                running = true;
                return;
            }
            String serverLog = logTail();
            boolean portTaken = serverLog.contains("could not bind") || serverLog.contains("Address already in use");
            if (portTaken && attempt < attempts) {
                continue;
            }
            throw new HarnessException((portTaken ? "port " + candidate + " on 127.0.0.1 is already in use; " : "")
                    + "PostgreSQL " + major + " did not start (pg_ctl exit " + result.exitCode + "): "
                    + result.output.strip() + "\n--- server log " + log + " ---\n" + serverLog);
        }
    }



    private String logTail() {
        try {
            List<String> lines = Files.readAllLines(log, StandardCharsets.UTF_8);
            return String.join("\n", lines.subList(Math.max(0, lines.size() - 30), lines.size()));
        } catch (IOException e) {
            return "(no server log: " + e.getMessage() + ")";
        }
    }

    private String tool(String name) {
        return bin.resolve(name).toString();
    }

    private record ToolResult(int exitCode, String output) {
    }

    private void run(List<String> command, String what) {
        ToolResult result = runQuietly(command);
        if (result.exitCode != 0) {
            String hint = result.output.contains("Permission denied") || result.output.contains("permission")
                    ? " (permission problem: the server user " + (asNobody ? "nobody" : System.getProperty("user.name"))
                    + " must own " + base + " and read " + bin + ")" : "";
            throw new HarnessException(what + " of PostgreSQL " + major + " failed with exit " + result.exitCode + hint
                    + ": " + result.output.strip());
        }
    }

    private ToolResult runQuietly(List<String> command) {
        List<String> full = new ArrayList<>();
        if (asNobody) {
            full.addAll(List.of("setpriv", "--reuid=nobody", "--regid=" + nobodyGroup(), "--clear-groups", "--"));
        }
        full.addAll(command);
        try {
            Path output = Files.createTempFile("walhook-pg-tool", ".out");
            try {
                Process process = new ProcessBuilder(full).directory(base.toFile())
                        .redirectErrorStream(true).redirectOutput(output.toFile())
                        .redirectInput(ProcessBuilder.Redirect.from(new java.io.File("/dev/null")))
                        .start();
                if (!process.waitFor(TOOL_TIMEOUT.toSeconds(), TimeUnit.SECONDS)) {
                    process.destroyForcibly();
                    throw new HarnessException(String.join(" ", command) + " did not finish within " + TOOL_TIMEOUT);
                }
                return new ToolResult(process.exitValue(), Files.readString(output));
            } finally {
                Files.deleteIfExists(output);
            }
        } catch (IOException e) {
            throw new HarnessException("cannot run " + full.get(0) + ": " + e.getMessage()
                    + (asNobody ? " (as root the harness needs setpriv from util-linux)" : ""), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new HarnessException("interrupted while running " + command.get(0), e);
        }
    }

    private static String nobodyGroup() {
        try {
            for (String line : Files.readAllLines(Path.of("/etc/group"))) {
                if (line.startsWith("nogroup:")) {
                    return "nogroup";
                }
            }
        } catch (IOException ignored) {
            // fall through to the name most other distributions use
        }
        return "nobody";
    }

    @Override
    public int major() {
        return major;
    }

    @Override
    public String host() {
        return "127.0.0.1";
    }

    @Override
    public int port() {
        return port;
    }

    @Override
    public String user() {
        return USER;
    }

    @Override
    public String password() {
        return PASSWORD;
    }

    @Override
    public String defaultDatabase() {
        return "postgres";
    }

    @Override
    public Optional<Path> binDir() {
        return Optional.of(bin);
    }

    public Path dataDirectory() {
        return data;
    }

    /** How long {@link #pause} waits for a fast shutdown. */
    static final int FAST_STOP_SECONDS = 15;

    /** Stops the server (fast shutdown: clients are disconnected) and starts it again on the same port. */
    public synchronized void restart() {
        pause();
        resume();
    }

    /**
     * Stops the server (fast shutdown: clients are disconnected), keeping its data: an outage, until
     * {@link #resume}. Gives up after {@value #FAST_STOP_SECONDS} s (pg_ctl's own default is 60): a
     * logical walsender waits at shutdown for its client to confirm all it sent, which a client
     * whose deliveries wait for this very database cannot; a caller then crashes the server
     * instead, and a test's time is not spent waiting.
     */
    public synchronized void pause() {
        ToolResult stopped = runQuietly(List.of(tool("pg_ctl"), "-D", data.toString(), "-m", "fast", "-w",
                "-t", Integer.toString(FAST_STOP_SECONDS), "stop"));
        if (stopped.exitCode != 0) {
            throw new HarnessException("pg_ctl stop failed: " + stopped.output.strip());
        }
        running = false;
    }

    /**
     * A crash and restart on the same port: {@code pg_ctl stop -m immediate} (every process ends
     * at once, no checkpoint; the next start replays the WAL). Also what a fast stop that cannot
     * finish comes to: a logical walsender waits at shutdown until its client confirmed all it sent.
     */
    public synchronized void crashAndRestart() {
        ToolResult stopped = runQuietly(List.of(tool("pg_ctl"), "-D", data.toString(), "-m", "immediate", "-w", "stop"));
        if (stopped.exitCode != 0) {
            throw new HarnessException("pg_ctl stop -m immediate failed: " + stopped.output.strip());
        }
        running = false;
        resume();
    }

    private String walWriter;

    /**
     * Stops the WAL writer (SIGSTOP): with {@link Builder#unflushedCommits}, what commits from now on
     * stays in memory, acknowledged but not flushed, and logical replication sends none of it. A
     * {@code CHECKPOINT} still flushes everything before it.
     */
    public synchronized void holdWalWriter() {
        try (java.sql.Connection c = connect(defaultDatabase()); java.sql.Statement s = c.createStatement();
             java.sql.ResultSet rs = s.executeQuery("SELECT pid FROM pg_stat_activity WHERE backend_type = 'walwriter'")) {
            if (!rs.next()) {
                throw new HarnessException("no WAL writer in pg_stat_activity");
            }
            walWriter = rs.getString(1);
        } catch (java.sql.SQLException e) {
            throw new HarnessException("cannot find the WAL writer: " + e.getMessage(), e);
        }
        signal("STOP", walWriter);
    }

    /**
     * Kills the held WAL writer: PostgreSQL ends every other process, as after any server process's
     * crash, and recovers from the WAL on disk, without the commits the writer held. The server is
     * back on the same port by itself a moment later.
     */
    public synchronized void crashLosingUnflushedCommits() {
        if (walWriter == null) {
            throw new HarnessException("holdWalWriter() first");
        }
        signal("KILL", walWriter);
        walWriter = null;
    }

    /**
     * Stops the postmaster (SIGSTOP): connections are taken by the kernel and never answered, no
     * backend starts, as with a server too busy to answer; the sessions open go on. {@link #thaw}
     * lets it go on.
     */
    public synchronized void freeze() {
        signal("STOP", postmaster());
    }

    /** Lets a {@link #freeze frozen} postmaster go on (SIGCONT). */
    public synchronized void thaw() {
        signal("CONT", postmaster());
    }

    /** The postmaster's pid, the first line of {@code postmaster.pid}. */
    private String postmaster() {
        try {
            return java.nio.file.Files.readAllLines(data.resolve("postmaster.pid")).get(0).strip();
        } catch (java.io.IOException e) {
            throw new HarnessException("cannot read postmaster.pid: " + e.getMessage(), e);
        }
    }

    private static void signal(String signal, String pid) {
        try {
            Process kill = new ProcessBuilder("kill", "-" + signal, pid).redirectErrorStream(true).start();
            String output = new String(kill.getInputStream().readAllBytes(), java.nio.charset.StandardCharsets.UTF_8);
            if (kill.waitFor() != 0) {
                throw new HarnessException("kill -" + signal + " " + pid + " failed: " + output.strip());
            }
        } catch (java.io.IOException e) {
            throw new HarnessException("cannot run kill: " + e.getMessage(), e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new HarnessException("interrupted while signalling " + pid, e);
        }
    }

    /**
     * A physical standby of this server with its replication slots, as failover tools copied logical
     * slots before PostgreSQL 17: this server is stopped (fast), its data directory copied, and both
     * started, the copy in recovery streaming this server's WAL until {@link #promote} or until
     * {@link #stopStreaming}.
     */
    public synchronized EmbeddedPostgres standbyWithSlots() {
        pause();
        Path copyBase;
        try {
            copyBase = Files.createTempDirectory(base.getParent(), "walhook-pg" + major + "-standby-");
        } catch (IOException e) {
            throw new HarnessException("cannot create a data directory under " + base.getParent() + ": " + e, e);
        }
        EmbeddedPostgres standby = new EmbeddedPostgres(major, bin, copyBase, asNobody);
        try {
            Files.setPosixFilePermissions(copyBase, Set.of(PosixFilePermission.OWNER_READ,
                    PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_EXECUTE));
            if (asNobody) {
                Files.setOwner(copyBase, copyBase.getFileSystem().getUserPrincipalLookupService()
                        .lookupPrincipalByName("nobody"));
            }
            standby.run(List.of("cp", "-a", data.toString(), standby.data.toString()), "copying the data directory");
            standby.run(List.of("rm", "-f", standby.data.resolve("postmaster.pid").toString()), "removing postmaster.pid");
            standby.run(List.of("touch", standby.data.resolve("standby.signal").toString()), "writing standby.signal");
            standby.run(List.of("sh", "-c", "printf '%s\\n' \"unix_socket_directories = '" + copyBase + "'\" "
                    + "\"primary_conninfo = 'host=127.0.0.1 port=" + port + " user=" + USER + "'\" >> "
                    + standby.data.resolve("postgresql.auto.conf")), "configuring the standby");
        } catch (IOException | RuntimeException e) {
            resume();
            standby.stop();
            throw e instanceof HarnessException h ? h : new HarnessException("cannot make a standby: " + e, e);
        }
        resume();
        try {
            standby.startOnPort(0);
        } catch (RuntimeException e) {
            standby.stop();
            throw e;
        }
        return standby;
    }

    /** Ends a standby's streaming from its primary (an empty {@code primary_conninfo}): it falls behind. */
    public synchronized void stopStreaming() {
        try (java.sql.Connection c = connect(defaultDatabase()); java.sql.Statement s = c.createStatement()) {
            s.execute("ALTER SYSTEM SET primary_conninfo = ''");
            s.execute("SELECT pg_reload_conf()");
        } catch (java.sql.SQLException e) {
            throw new HarnessException("cannot stop the standby's streaming: " + e.getMessage(), e);
        }
    }

    /** Promotes a standby: it ends recovery on a new timeline and takes writes. */
    public synchronized void promote() {
        run(List.of(tool("pg_ctl"), "-D", data.toString(), "-w", "-t", "60", "promote"), "pg_ctl promote");
    }

    /** Starts a paused server again on the same port. */
    public synchronized void resume() {
        startOnPort(port);
    }

    @Override
    public synchronized void stop() {
        if (running) {
            runQuietly(List.of(tool("pg_ctl"), "-D", data.toString(), "-m", "immediate", "-w", "stop"));
            running = false;
        }
        try {
            PostgresBinaries.deleteRecursively(base);
        } catch (IOException e) {
            System.err.println("walhook test harness: could not delete " + base + ": " + e);
        }
    }

    @Override
    public String toString() {
        return "embedded PostgreSQL " + major + " on 127.0.0.1:" + port + " (" + bin + ")";
    }
}
