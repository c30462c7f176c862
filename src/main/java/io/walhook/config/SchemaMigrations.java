package io.walhook.config;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.StringReader;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.zip.CRC32;

import javax.sql.DataSource;

import org.jboss.logging.Logger;

/**
 * Brings walhook's own schema ({@code WALHOOK_STATE_SCHEMA}) up to date: the versioned SQL files
 * of {@code db/migration}, each applied once, in order, each in a transaction of its own with the
 * row that records it. The record is {@code <schema>.flyway_schema_history}, in the form Flyway
 * writes it (the same table, columns, rows and checksums): walhook migrated its schema with Flyway
 * before, and a schema either migrated is carried on by the other. Instances starting together
 * take turns (Flyway's session advisory lock). Each file runs in one transaction, so a statement
 * that cannot (CREATE INDEX CONCURRENTLY) has no place in one. A recorded migration whose file has changed since, or one
 * that failed, stops start-up naming it; versions newer than this walhook's (a newer walhook
 * migrated the schema) are left as they are.
 */
public final class SchemaMigrations {

    private static final Logger LOG = Logger.getLogger(SchemaMigrations.class);
    /** Where the build puts the migrations, and their files in order: a new one is added here too (the test checks). */
    static final String LOCATION = "db/migration/";
    static final List<String> FILES = List.of("V1__checkpoint.sql", "V2__subscription.sql", "V3__parked_event.sql",
            "V4__parked_event_lane.sql", "V5__parked_event_address.sql", "V6__durable_queue.sql", "V7__backfill.sql",
            "V8__activation.sql", "V9__activation_token.sql",
            "V10__parked_event_address_parts.sql", "V11__activation_released.sql",
            "V12__subscription_matched_before.sql", "V13__dropped_event.sql",
            "V14__checkpoint_timeline.sql", "V15__queue_run.sql", "V16__gone_endpoint.sql",
            "V17__backfill_id_key.sql", "V18__backfill_moved.sql");
    /** The history table's name, Flyway's default. */
    public static final String HISTORY = "flyway_schema_history";
    /** The placeholder the files write for the schema, as Flyway spells it. */
    static final String SCHEMA_PLACEHOLDER = "${flyway:defaultSchema}";
    /** How long an instance waits for another one migrating the schema. */
    static final java.time.Duration LOCK_PATIENCE = java.time.Duration.ofMinutes(2);

    /** The tables of walhook's schema. */
    public static final java.util.Set<String> STATE_TABLES = java.util.Set.of(HISTORY, "checkpoint", "subscription",
            "parked_event", "backfill", "activation");
    /**
     * Every table of a state schema, those of later migrations too: the stream may meet any of them
     * first (after a restart, a take-over), and each makes it ask whether its schema holds state.
     */
    public static final java.util.Set<String> TABLE_NAMES = java.util.Set.of(HISTORY, "checkpoint", "subscription",
            "parked_event", "backfill", "activation", "subscription_matched_before", "dropped_event", "queue_run",
            "gone_endpoint", "backfill_moved");

    /** What the catalog says of a schema: whether it holds a walhook deployment's state. */
    public enum StateVerdict {
        /** No history table: not walhook's, now. */
        NONE,
        /** A walhook deployment's state. */
        STATE,
        /** A history without walhook's migrations (yet): a schema being made, or another tool's. */
        UNSURE
    }

    /**
     * Whether {@code schema} holds a walhook deployment's state: another deployment's, when
     * publications are shared, whose changes and rows must never be sent. Told by its history,
     * which records one of walhook's migrations with that file's checksum: no application's Flyway
     * history does, whatever its tables are called. A history this role may not read, or one
     * walhook's migrations never ran into (baselined), is told by walhook's tables, all there.
     */
    public static StateVerdict stateVerdict(Connection c, String schema) throws SQLException {
        try (PreparedStatement s = c.prepareStatement("SELECT pg_catalog.has_schema_privilege(n.oid, 'USAGE')"
                + " AND pg_catalog.has_table_privilege(c.oid, 'SELECT')"
                + " FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
                + " WHERE n.nspname = ? AND c.relname = '" + HISTORY + "' AND c.relkind IN ('r', 'p')")) {
            s.setString(1, schema);
            try (ResultSet rs = s.executeQuery()) {
                if (!rs.next()) {
                    return StateVerdict.NONE;
                }
                if (!rs.getBoolean(1)) {
                    return byTables(c, schema); // a history this role may not read
                }
            }
        }
        List<Migration> ours = Bundled.ALL;
        StringBuilder pairs = new StringBuilder();
        for (Migration m : ours) {
            pairs.append(pairs.length() == 0 ? "" : ", ").append("('").append(m.version()).append("', '").append(m.checksum())
                    .append("')");
        }
        try (Statement s = c.createStatement();
                ResultSet rs = s.executeQuery("SELECT EXISTS (SELECT 1 FROM \"" + schema.replace("\"", "\"\"") + "\"."
                        + HISTORY + " h WHERE (h.version::text, h.checksum::text) IN (VALUES " + pairs + "))")) {
            if (rs.next() && rs.getBoolean(1)) {
                return StateVerdict.STATE;
            }
        } catch (SQLException e) {
            if (e.getSQLState() == null || !e.getSQLState().startsWith("42")) {
                throw e; // the database, not the table: asked again
            }
            // a table of that name that is not a history as Flyway makes it
        }
        return byTables(c, schema);
    }

    /** Walhook's tables, all in {@code schema}: a baselined history, or one this role may not read. */
    private static StateVerdict byTables(Connection c, String schema) throws SQLException {
        try (PreparedStatement s = c.prepareStatement("SELECT count(DISTINCT c.relname) FROM pg_catalog.pg_class c"
                + " JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
                + " WHERE n.nspname = ? AND c.relkind IN ('r', 'p') AND c.relname = ANY (?)")) {
            s.setString(1, schema);
            s.setArray(2, c.createArrayOf("text", STATE_TABLES.toArray()));
            try (ResultSet rs = s.executeQuery()) {
                return rs.next() && rs.getInt(1) == STATE_TABLES.size() ? StateVerdict.STATE : StateVerdict.UNSURE;
            }
        }
    }

    /** Whether {@code schema} holds a walhook deployment's state ({@link #stateVerdict}). */
    public static boolean holdsState(Connection c, String schema) throws SQLException {
        return stateVerdict(c, schema) == StateVerdict.STATE;
    }

    /** Walhook's migrations, read once. */
    private static final class Bundled {
        static final List<Migration> ALL = bundled();
    }

    /** One migration file: {@code V3__parked_event.sql} is version 3, "parked event". */
    record Migration(int version, String description, String script, String sql, int checksum) {
    }

    private SchemaMigrations() {
    }

    /** The migrations this walhook carries, in order. */
    static List<Migration> bundled() {
        List<Migration> migrations = new ArrayList<>();
        for (String file : FILES) {
            String sql;
            try (InputStream in = SchemaMigrations.class.getClassLoader().getResourceAsStream(LOCATION + file)) {
                if (in == null) {
                    throw new IllegalStateException(LOCATION + file + " is not in the jar");
                }
                sql = new String(in.readAllBytes(), StandardCharsets.UTF_8);
                if (sql.startsWith("\uFEFF")) {
                    sql = sql.substring(1); // a byte order mark is no SQL
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            int separator = file.indexOf("__");
            migrations.add(new Migration(Integer.parseInt(file.substring(1, separator)),
                    file.substring(separator + 2, file.length() - ".sql".length()).replace('_', ' '), LOCATION + file, sql,
                    checksum(sql)));
        }
        return migrations;
    }

    /**
     * Flyway's checksum of a migration: the CRC-32 of its lines' UTF-8 bytes, without their line
     * breaks (a lone CR, LF or CRLF) and without a byte order mark, as a signed int.
     */
    static int checksum(String sql) {
        CRC32 crc = new CRC32();
        try (BufferedReader lines = new BufferedReader(new StringReader(sql))) {
            for (String line = lines.readLine(); line != null; line = lines.readLine()) {
                crc.update((line.startsWith("\uFEFF") ? line.substring(1) : line).getBytes(StandardCharsets.UTF_8));
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return (int) crc.getValue();
    }

    /**
     * Migrates {@code schema} (a plain lower-case identifier, {@link StartupCheck} checked it),
     * creating it when missing; returns how many migrations it applied.
     *
     * @throws SQLException from the database, or naming the recorded migration that stops start-up
     */
    public static int migrate(DataSource dataSource, String schema) throws SQLException {
        List<Migration> migrations = bundled();
        try (Connection c = dataSource.getConnection()) {
            c.setAutoCommit(true);
            long lock = lockKey(schema);
            takeLock(c, schema, lock);
            boolean unlocked = false;
            try {
                int applied = migrate(dataSource, c, schema, migrations);
                c.setAutoCommit(true);
                try (Statement s = c.createStatement()) {
                    s.execute("SELECT pg_advisory_unlock(" + lock + ")");
                }
                unlocked = true;
                return applied;
            } finally {
                if (!unlocked) {
                    release(c);
                }
            }
        }
    }

    /**
     * The session lock every instance (and Flyway, which walhook used before) takes to migrate the
     * schema, waited for at most {@link #LOCK_PATIENCE}, saying so once.
     */
    private static void takeLock(Connection c, String schema, long lock) throws SQLException {
        long deadline = System.nanoTime() + LOCK_PATIENCE.toNanos();
        for (boolean said = false; ; ) {
            try (Statement s = c.createStatement(); ResultSet r = s.executeQuery("SELECT pg_try_advisory_lock(" + lock + ")")) {
                r.next();
                if (r.getBoolean(1)) {
                    return;
                }
            }
            if (System.nanoTime() - deadline > 0) {
                throw new SQLException("another session has been migrating schema " + schema + " for " + LOCK_PATIENCE
                        + " (it holds advisory lock " + lock + "); see pg_locks, and end that session if it is stuck");
            }
            if (!said) {
                LOG.infof("another instance is migrating schema %s: waiting for it", schema);
                said = true;
            }
            try {
                Thread.sleep(200);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new SQLException("interrupted while waiting to migrate schema " + schema, e);
            }
        }
    }

    /**
     * After a migration that failed: the session's locks are let go, and the connection goes back to
     * its pool clean. One the database broke off fails this through the connection, so the pool
     * discards it (its session, and its lock, ended with it). Not aborted: Agroal 3.0.1 neither ends
     * the session of a connection aborted through it nor gives its place back, so the lock stayed
     * held and start-up's next try waited {@link #LOCK_PATIENCE} for it.
     */
    private static void release(Connection c) {
        try {
            if (!c.getAutoCommit()) {
                c.rollback();
                c.setAutoCommit(true);
            }
            try (Statement s = c.createStatement()) {
                s.execute("SELECT pg_advisory_unlock_all()");
            }
        } catch (SQLException e) {
            LOG.debugf("letting the migration's session go: %s", e.getMessage());
        }
    }

    private static int migrate(DataSource dataSource, Connection c, String schema, List<Migration> migrations)
            throws SQLException {
        String history = schema + "." + HISTORY;
        if (!exists(c, "SELECT 1 FROM pg_tables WHERE schemaname = ? AND tablename = '" + HISTORY + "'", schema)) {
            SessionTimeout.unlimited(dataSource, c, u -> {
                createHistory(u, schema, history);
                return null;
            });
        }
        Map<Integer, Integer> applied = new HashMap<>();
        int rank = 0;
        int newest = 0;
        int baseline = 0;
        try (Statement s = c.createStatement();
                ResultSet r = s.executeQuery("SELECT installed_rank, version, checksum, success, script, type FROM "
                        + history + " ORDER BY installed_rank")) {
            while (r.next()) {
                rank = Math.max(rank, r.getInt(1));
                if (!r.getBoolean(4)) {
                    throw new SQLException("the migration " + r.getString(5) + " of schema " + schema + " failed earlier"
                            + " (" + history + " says so): repair the schema by hand and delete that row");
                }
                if (r.getString(2) == null) {
                    continue; // the schema's creation, or a repeatable migration (walhook has none)
                }
                int version;
                try {
                    version = Integer.parseInt(r.getString(2));
                } catch (NumberFormatException e) {
                    throw new SQLException(history + " records version '" + r.getString(2) + "' (" + r.getString(5)
                            + "): walhook's versions are whole numbers; this schema was migrated by something else");
                }
                if ("BASELINE".equals(r.getString(6))) {
                    baseline = Math.max(baseline, version); // taken as migrated up to here
                } else {
                    applied.put(version, r.getObject(3) == null ? null : r.getInt(3));
                }
                newest = Math.max(newest, version);
            }
        }
        int count = 0;
        for (Migration m : migrations) {
            if (m.version() <= baseline && !applied.containsKey(m.version())) {
                continue;
            }
            if (applied.containsKey(m.version())) {
                Integer recorded = applied.get(m.version());
                if (recorded == null || recorded != m.checksum()) {
                    throw new SQLException(m.script() + " was applied to schema " + schema + " with checksum " + recorded
                            + ", but this walhook's has " + m.checksum() + ": the schema is not the one it expects");
                }
                continue;
            }
            if (m.version() < newest) {
                throw new SQLException(m.script() + " was never applied to schema " + schema + ", which is at version "
                        + newest + " already: the schema is not the one this walhook expects");
            }
            int at = ++rank;
            // a migration rewriting a large table may take its time; reading the history above may not: a restart's
            // check on a connection a failover left half-open gives up, and start-up tries again
            SessionTimeout.unlimited(dataSource, c, u -> {
                apply(u, schema, history, m, at);
                return null;
            });
            count++;
        }
        int known = migrations.get(migrations.size() - 1).version();
        if (newest > known) {
            LOG.warnf("schema %s is at version %d, newer than this walhook's %d (a newer walhook migrated it); left as it is",
                    schema, newest, known);
        }
        return count;
    }

    /**
     * The schema (when missing) and its history, in one transaction, as Flyway makes them: a row of
     * rank 0 records that it created the schema. A schema that exists with relations in it and no
     * history is not walhook's: it is refused rather than migrated into.
     */
    private static void createHistory(Connection c, String schema, String history) throws SQLException {
        boolean schemaExisted = exists(c, "SELECT 1 FROM pg_namespace WHERE nspname = ?", schema);
        if (schemaExisted && exists(c, "SELECT 1 FROM pg_class k JOIN pg_namespace n ON n.oid = k.relnamespace"
                + " WHERE n.nspname = ? LIMIT 1", schema)) {
            throw new SQLException("schema " + schema + " holds tables but no " + HISTORY + ": it is not walhook's;"
                    + " set WALHOOK_STATE_SCHEMA to a schema of walhook's own (it is created when missing)");
        }
        inTransaction(c, () -> {
            try (Statement s = c.createStatement()) {
                if (!schemaExisted) {
                    // not IF NOT EXISTS: that needs CREATE on the database even for a schema a DBA made
                    s.execute("CREATE SCHEMA " + schema);
                }
                s.execute("CREATE TABLE " + history + " (installed_rank integer NOT NULL, version varchar(50),"
                        + " description varchar(200) NOT NULL, type varchar(20) NOT NULL, script varchar(1000) NOT NULL,"
                        + " checksum integer, installed_by varchar(100) NOT NULL,"
                        + " installed_on timestamp NOT NULL DEFAULT now(), execution_time integer NOT NULL,"
                        + " success boolean NOT NULL, CONSTRAINT " + HISTORY + "_pk PRIMARY KEY (installed_rank))");
                s.execute("CREATE INDEX " + HISTORY + "_s_idx ON " + history + " (success)");
                if (!schemaExisted) {
                    s.execute("INSERT INTO " + history + " (installed_rank, version, description, type, script, checksum,"
                            + " installed_by, execution_time, success) VALUES (0, NULL, '<< Flyway Schema Creation >>',"
                            + " 'SCHEMA', '\"" + schema + "\"', NULL, current_user, 0, true)");
                }
            }
        });
    }

    private static void apply(Connection c, String schema, String history, Migration m, int rank) throws SQLException {
        long start = System.nanoTime();
        String sql = m.sql().replace(SCHEMA_PLACEHOLDER, schema);
        if (sql.contains("${")) {
            throw new IllegalStateException(m.script() + " has a placeholder walhook does not fill: "
                    + sql.substring(sql.indexOf("${"), Math.min(sql.length(), sql.indexOf("${") + 40)));
        }
        inTransaction(c, () -> {
            try (Statement s = c.createStatement()) {
                s.execute("SET LOCAL search_path TO " + schema);
                s.execute(sql);
            }
            try (PreparedStatement insert = c.prepareStatement("INSERT INTO " + history + " (installed_rank, version,"
                    + " description, type, script, checksum, installed_by, execution_time, success)"
                    + " VALUES (?, ?, ?, 'SQL', ?, ?, current_user, ?, true)")) {
                insert.setInt(1, rank);
                insert.setString(2, Integer.toString(m.version()));
                insert.setString(3, m.description());
                insert.setString(4, m.script());
                insert.setInt(5, m.checksum());
                insert.setInt(6, (int) ((System.nanoTime() - start) / 1_000_000));
                insert.executeUpdate();
            }
        });
        LOG.infof("migrated schema %s to version %d (%s)", schema, m.version(), m.description());
    }

    private interface Work {
        void run() throws SQLException;
    }

    /** {@code work} in one transaction: all of it, or (on any failure) none of it. */
    private static void inTransaction(Connection c, Work work) throws SQLException {
        c.setAutoCommit(false);
        try {
            work.run();
            c.commit();
        } catch (SQLException | RuntimeException e) {
            try {
                c.rollback();
            } catch (SQLException rollback) {
                e.addSuppressed(rollback);
            }
            throw e;
        }
        c.setAutoCommit(true);
    }

    private static boolean exists(Connection c, String query, String schema) throws SQLException {
        try (PreparedStatement s = c.prepareStatement(query)) {
            s.setString(1, schema);
            try (ResultSet r = s.executeQuery()) {
                return r.next();
            }
        }
    }

    /**
     * The advisory lock instances take while they migrate {@code schema}: Flyway's own for the
     * same history table, so that an instance still on a Flyway walhook and one on this take turns.
     */
    static long lockKey(String schema) {
        return 77431708279161L + ("\"" + schema + "\".\"" + HISTORY + "\"").hashCode();
    }
}
