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
 * take turns (a session advisory lock). A recorded migration whose file has changed since, or one
 * that failed, stops start-up naming it; versions newer than this walhook's (a newer walhook
 * migrated the schema) are left as they are.
 */
public final class SchemaMigrations {

    private static final Logger LOG = Logger.getLogger(SchemaMigrations.class);
    /** Where the build puts the migrations, and their files in order: a new one is added here too (the test checks). */
    static final String LOCATION = "db/migration/";
    static final List<String> FILES = List.of("V1__checkpoint.sql", "V2__subscription.sql", "V3__parked_event.sql",
            "V4__parked_event_lane.sql", "V5__parked_event_address.sql", "V6__durable_queue.sql", "V7__backfill.sql");
    /** The history table's name, Flyway's default. */
    public static final String HISTORY = "flyway_schema_history";
    /** The placeholder the files write for the schema, as Flyway spells it. */
    static final String SCHEMA_PLACEHOLDER = "${flyway:defaultSchema}";

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
     * breaks (and without a byte order mark), as a signed int.
     */
    static int checksum(String sql) {
        CRC32 crc = new CRC32();
        try (BufferedReader lines = new BufferedReader(new StringReader(sql))) {
            String line = lines.readLine();
            if (line != null && line.startsWith("\uFEFF")) {
                line = line.substring(1);
            }
            for (; line != null; line = lines.readLine()) {
                crc.update(line.getBytes(StandardCharsets.UTF_8));
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
            try (Statement s = c.createStatement()) {
                s.execute("SELECT pg_advisory_lock(" + lock + ")");
            }
            try {
                return migrate(c, schema, migrations);
            } finally {
                c.setAutoCommit(true);
                try (Statement s = c.createStatement()) {
                    s.execute("SELECT pg_advisory_unlock(" + lock + ")");
                }
            }
        }
    }

    private static int migrate(Connection c, String schema, List<Migration> migrations) throws SQLException {
        String history = schema + "." + HISTORY;
        boolean schemaExisted = exists(c, "SELECT 1 FROM pg_namespace WHERE nspname = ?", schema);
        if (!exists(c, "SELECT 1 FROM pg_tables WHERE schemaname = ? AND tablename = '" + HISTORY + "'", schema)) {
            try (Statement s = c.createStatement()) {
                s.execute("CREATE SCHEMA IF NOT EXISTS " + schema);
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
        }
        Map<Integer, Integer> applied = new HashMap<>();
        int rank = 0;
        int newest = 0;
        try (Statement s = c.createStatement();
                ResultSet r = s.executeQuery("SELECT installed_rank, version, checksum, success, script FROM " + history
                        + " ORDER BY installed_rank")) {
            while (r.next()) {
                rank = Math.max(rank, r.getInt(1));
                if (!r.getBoolean(4)) {
                    throw new SQLException("the migration " + r.getString(5) + " of schema " + schema + " failed earlier"
                            + " (" + history + " says so): repair the schema by hand and delete that row");
                }
                if (r.getString(2) != null) {
                    int version = Integer.parseInt(r.getString(2));
                    applied.put(version, r.getObject(3) == null ? null : r.getInt(3));
                    newest = Math.max(newest, version);
                }
            }
        }
        int count = 0;
        for (Migration m : migrations) {
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
            apply(c, schema, history, m, ++rank);
            count++;
        }
        int known = migrations.get(migrations.size() - 1).version();
        if (newest > known) {
            LOG.warnf("schema %s is at version %d, newer than this walhook's %d (a newer walhook migrated it); left as it is",
                    schema, newest, known);
        }
        return count;
    }

    private static void apply(Connection c, String schema, String history, Migration m, int rank) throws SQLException {
        long start = System.nanoTime();
        c.setAutoCommit(false);
        try (Statement s = c.createStatement()) {
            s.execute(m.sql().replace(SCHEMA_PLACEHOLDER, schema));
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
            c.commit();
        } catch (SQLException e) {
            c.rollback();
            throw e;
        }
        LOG.infof("migrated schema %s to version %d (%s)", schema, m.version(), m.description());
    }

    private static boolean exists(Connection c, String query, String schema) throws SQLException {
        try (PreparedStatement s = c.prepareStatement(query)) {
            s.setString(1, schema);
            try (ResultSet r = s.executeQuery()) {
                return r.next();
            }
        }
    }

    /** The advisory lock instances take while they migrate {@code schema}. */
    static long lockKey(String schema) {
        CRC32 crc = new CRC32();
        crc.update(("walhook migrations " + schema).getBytes(StandardCharsets.UTF_8));
        return crc.getValue();
    }
}
