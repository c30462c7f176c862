package io.walhook.backfill;

import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Timestamp;
import java.sql.Types;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.UUID;

import javax.sql.DataSource;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

/** Backfills in {@code <state schema>.backfill}: the API writes them, the active instance runs them. */
public final class BackfillStore {

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final String COLUMNS = "id, subscription_id, origin, state, tables, filter, chunk_size,"
            + " max_rows_per_second, progress::text, error, created_at, updated_at, finished_at";

    private final DataSource dataSource;
    private final String table;
    private final String movedTable;

    /** What every instance's backfill writes notify, so that the active one starts or controls them at once. */
    public static final String CHANNEL = "walhook_backfills";

    public BackfillStore(DataSource dataSource, String stateSchema) {
        this.dataSource = dataSource;
        this.table = stateSchema + ".backfill";
        this.movedTable = stateSchema + ".backfill_moved";
    }

    /**
     * Keeps rows moved out of reach of their backfills' reads ({@link Watermarks.Moved}) until they
     * are read again, across a restart or a take-over: written before the updates that moved them are
     * acknowledged. One written already (its update sent again after a restart) is kept once.
     */
    public void saveMoved(List<Watermarks.Moved> moved) throws SQLException {
        // durable: the updates are acknowledged once it returns. A backfill gone meanwhile (deleted by hand) is no
        // foreign-key error failing every later save
        try (Connection c = dataSource.getConnection()) {
            io.walhook.config.DurableWrite.run(c, t -> {
                try (PreparedStatement s = t.prepareStatement("INSERT INTO " + movedTable + " (backfill_id, table_name,"
                        + " row_key, moved_at) SELECT ?, ?, ?, ?::pg_lsn WHERE EXISTS (SELECT 1 FROM " + table
                        + " WHERE id = ?) ON CONFLICT DO NOTHING")) {
                    for (Watermarks.Moved m : moved) {
                        bind(t, s, m);
                        s.setObject(5, m.backfillId());
                        s.addBatch();
                    }
                    return s.executeBatch();
                }
            });
        }
    }

    /** The rows of the backfill {@code id} waiting to be read again, in the order they moved: the first {@code limit}. */
    public List<Watermarks.Moved> moved(UUID id, int limit) throws SQLException {
        List<Watermarks.Moved> moved = new ArrayList<>();
        try (Connection c = dataSource.getConnection(); PreparedStatement s = c.prepareStatement("SELECT table_name,"
                + " row_key, moved_at::text FROM " + movedTable + " WHERE backfill_id = ? ORDER BY moved_at, table_name"
                + " LIMIT ?")) {
            s.setObject(1, id);
            s.setInt(2, limit);
            try (ResultSet rs = s.executeQuery()) {
                while (rs.next()) {
                    moved.add(new Watermarks.Moved(id, rs.getString(1), List.of((String[]) rs.getArray(2).getArray()),
                            io.walhook.pgoutput.Lsn.parse(rs.getString(3))));
                }
            }
        }
        return moved;
    }

    /** The tables the backfill {@code id} has rows moved in. */
    public java.util.Set<String> movedTables(UUID id) throws SQLException {
        java.util.Set<String> tables = new java.util.TreeSet<>();
        try (Connection c = dataSource.getConnection(); PreparedStatement s = c.prepareStatement("SELECT DISTINCT table_name"
                + " FROM " + movedTable + " WHERE backfill_id = ?")) {
            s.setObject(1, id);
            try (ResultSet rs = s.executeQuery()) {
                while (rs.next()) {
                    tables.add(rs.getString(1));
                }
            }
        }
        return tables;
    }

    /** Forgets rows moved that were read again. */
    public void forgetMoved(List<Watermarks.Moved> read) throws SQLException {
        try (Connection c = dataSource.getConnection(); PreparedStatement s = c.prepareStatement("DELETE FROM " + movedTable
                + " WHERE backfill_id = ? AND table_name = ? AND row_key = ? AND moved_at = ?::pg_lsn")) {
            for (Watermarks.Moved m : read) {
                bind(c, s, m);
                s.addBatch();
            }
            s.executeBatch();
        }
    }

    /** Binds a row moved as {@code backfill_moved}'s four columns, in order, from the first parameter. */
    private static void bind(Connection c, PreparedStatement s, Watermarks.Moved m) throws SQLException {
        s.setObject(1, m.backfillId());
        s.setString(2, m.table());
        s.setArray(3, c.createArrayOf("text", m.key().toArray()));
        s.setString(4, m.lsn().toString());
    }

    /** Forgets the backfill {@code id}'s rows moved in {@code tables} (read again from their start), or all of them when null (it ended). */
    public void forgetMoved(UUID id, java.util.Collection<String> tables) throws SQLException {
        try (Connection c = dataSource.getConnection(); PreparedStatement s = c.prepareStatement("DELETE FROM " + movedTable
                + " WHERE backfill_id = ?" + (tables == null ? "" : " AND table_name = ANY (?)"))) {
            s.setObject(1, id);
            if (tables != null) {
                s.setArray(2, c.createArrayOf("text", tables.toArray()));
            }
            s.executeUpdate();
        }
    }

    /** What {@link #insertUnlessBusy} did: the backfill written, or the unfinished one holding a table and which table. */
    public record Inserted(Backfill backfill, Backfill holder, String heldTable) {
    }

    /**
     * Writes a new backfill, running, unless an unfinished backfill of the subscription holds one of
     * its tables: checked and written under a lock per subscription, so two requests at once cannot
     * both start one.
     */
    public Inserted insertUnlessBusy(String subscriptionId, String origin, List<String> tables, String filter,
            int chunkSize, Integer maxRowsPerSecond) throws SQLException {
        try (Connection c = dataSource.getConnection()) {
            return io.walhook.config.DurableWrite.run(c, t -> { // the 202 says it is started
                lockBackfillsOf(t, subscriptionId);
                try (PreparedStatement busy = t.prepareStatement("SELECT " + COLUMNS + " FROM " + table
                        + " WHERE subscription_id = ? AND state IN ('running', 'paused') AND tables && ?"
                        + " ORDER BY created_at LIMIT 1")) {
                    busy.setString(1, subscriptionId);
                    busy.setArray(2, t.createArrayOf("text", tables.toArray()));
                    try (ResultSet rs = busy.executeQuery()) {
                        if (rs.next()) {
                            Backfill holder = read(rs);
                            String held = tables.stream().filter(holder.tables()::contains).findFirst().orElse(null);
                            return new Inserted(null, holder, held); // nothing written: the commit releases the lock
                        }
                    }
                }
                try (PreparedStatement s = t.prepareStatement("INSERT INTO " + table
                        + " (id, subscription_id, origin, state, tables, filter, chunk_size, max_rows_per_second, id_key)"
                        + " VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?) RETURNING " + COLUMNS)) {
                    bind(t, s, UUID.randomUUID(), subscriptionId, origin, tables, filter, chunkSize, maxRowsPerSecond);
                    try (ResultSet rs = s.executeQuery()) {
                        rs.next();
                        return new Inserted(read(rs), null, null);
                    }
                }
            });
        }
    }

    /** Holds the subscription's backfills' lock until the transaction ends: one start checked and written at a time. */
    private void lockBackfillsOf(Connection t, String subscriptionId) throws SQLException {
        try (PreparedStatement lock = t.prepareStatement("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))")) {
            lock.setString(1, table + ":" + subscriptionId);
            lock.execute();
        }
    }

    /** Whether the subscription's initial backfill was stored (it is, once ever). */
    public boolean hasInitial(String subscriptionId) throws SQLException {
        try (Connection c = dataSource.getConnection(); PreparedStatement s = c.prepareStatement("SELECT 1 FROM " + table
                + " WHERE subscription_id = ? AND origin = 'initial'")) {
            s.setString(1, subscriptionId);
            try (java.sql.ResultSet rs = s.executeQuery()) {
                return rs.next();
            }
        }
    }

    /**
     * The backfill a configured subscription's {@code BACKFILL=initial} asks for, written once: true
     * when it was written now, false when one was already (at an earlier start).
     */
    public boolean insertInitial(String subscriptionId, List<String> tables) throws SQLException {
        try (Connection c = dataSource.getConnection()) {
            return io.walhook.config.DurableWrite.run(c, t -> {
                // under the API's lock: a table an unfinished backfill of the subscription reads is left out, as
                // the API refuses a second one of it (each of its rows was sent twice, under two ids)
                lockBackfillsOf(t, subscriptionId);
                List<String> left = new java.util.ArrayList<>(tables);
                List<String> leftOut = new java.util.ArrayList<>();
                try (PreparedStatement busy = t.prepareStatement("SELECT id, pg_catalog.unnest(tables) FROM " + table
                        + " WHERE subscription_id = ? AND state IN ('running', 'paused') AND origin <> 'initial'")) {
                    busy.setString(1, subscriptionId);
                    try (ResultSet rs = busy.executeQuery()) {
                        while (rs.next()) {
                            if (left.remove(rs.getString(2))) {
                                leftOut.add("table " + rs.getString(2) + " out: backfill " + rs.getString(1) + " reads it");
                            }
                        }
                    }
                }
                try (PreparedStatement s = t.prepareStatement("INSERT INTO " + table
                        + " (id, subscription_id, origin, state, tables, filter, chunk_size, max_rows_per_second, id_key)"
                        + " VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?) ON CONFLICT (subscription_id) WHERE origin = 'initial'"
                        + " DO NOTHING")) {
                    bind(t, s, UUID.randomUUID(), subscriptionId, Backfill.INITIAL, left, null, Backfill.DEFAULT_CHUNK_SIZE,
                            null);
                    boolean written = s.executeUpdate() == 1;
                    if (written) {
                        leftOut.forEach(why -> org.jboss.logging.Logger.getLogger(BackfillStore.class).infof(
                                "the initial backfill of subscription %s leaves %s", subscriptionId, why));
                    }
                    return written;
                }
            });
        }
    }

    private static void bind(Connection c, PreparedStatement s, UUID id, String subscriptionId, String origin,
            List<String> tables, String filter, int chunkSize, Integer maxRowsPerSecond) throws SQLException {
        s.setObject(1, id);
        s.setString(2, subscriptionId);
        s.setString(3, origin);
        s.setArray(4, c.createArrayOf("text", tables.toArray()));
        s.setString(5, filter);
        s.setInt(6, chunkSize);
        if (maxRowsPerSecond == null) {
            s.setNull(7, Types.INTEGER);
        } else {
            s.setInt(7, maxRowsPerSecond);
        }
        // the key of its ids (idKey), written here rather than a default of the column: a backfill an older walhook
        // inserts (a rolling upgrade) has none, and keeps the ids it runs with, whichever walhook runs it (a random
        // generator made here, not held in a static field: a native image would hold it, seeded, in its heap)
        byte[] idKey = new byte[32];
        new java.security.SecureRandom().nextBytes(idKey);
        s.setBytes(8, idKey);
    }

    /**
     * Tells every listening instance that a backfill was written (the write is committed: a failed
     * notification costs only a wait for the active instance's slower round).
     */
    public void announce() {
        try (Connection c = dataSource.getConnection(); java.sql.Statement s = c.createStatement()) {
            s.execute("SELECT pg_notify('" + CHANNEL + "', '')");
        } catch (SQLException e) {
            org.jboss.logging.Logger.getLogger(BackfillStore.class).warnf(
                    "backfill written; telling the other instances failed (the active one sees it within %s): %s",
                    BackfillRunner.IDLE_POLL, e.getMessage());
        }
    }

    /** A subscription's backfills, oldest first. */
    public List<Backfill> list(String subscriptionId) throws SQLException {
        return query("SELECT " + COLUMNS + " FROM " + table + " WHERE subscription_id = ? ORDER BY created_at, id",
                subscriptionId);
    }

    public Optional<Backfill> find(UUID id) throws SQLException {
        List<Backfill> found = query("SELECT " + COLUMNS + " FROM " + table + " WHERE id = ?", id);
        return found.stream().findFirst();
    }

    /** Every backfill that is running or paused, oldest first. */
    public List<Backfill> unfinished() throws SQLException {
        return query("SELECT " + COLUMNS + " FROM " + table + " WHERE state IN ('running', 'paused')"
                + " ORDER BY created_at, id");
    }

    /**
     * Moves a backfill to {@code to} if it is in one of {@code from} now (so that a cancel is never
     * undone by a late progress write); {@code error} is kept when given. False when it was not.
     */
    public boolean transition(UUID id, List<Backfill.State> from, Backfill.State to, String error) throws SQLException {
        try (Connection c = dataSource.getConnection()) {
            // an answer (pause, resume, cancel) or a backfill's end says so: not taken back by a crash
            return io.walhook.config.DurableWrite.run(c, t -> {
                try (PreparedStatement s = t.prepareStatement("UPDATE " + table
                        + " SET state = ?, error = coalesce(?, error), updated_at = now(),"
                        + " finished_at = CASE WHEN ? THEN now() ELSE finished_at END WHERE id = ? AND state = ANY (?)")) {
                    s.setString(1, to.wireName());
                    s.setString(2, error);
                    s.setBoolean(3, to.ended());
                    s.setObject(4, id);
                    s.setArray(5, t.createArrayOf("text", from.stream().map(Backfill.State::wireName).toArray()));
                    if (s.executeUpdate() != 1) {
                        return false;
                    }
                }
                if (to.ended()) {
                    // its rows moved are read by no one now (a paused one's, after a restart, were never loaded)
                    try (PreparedStatement s = t.prepareStatement("DELETE FROM " + movedTable + " WHERE backfill_id = ?")) {
                        s.setObject(1, id);
                        s.executeUpdate();
                    }
                }
                return true;
            });
        }
    }

    /** Persists how far each table got (after a chunk's rows were all delivered or durably queued). */
    public void saveProgress(UUID id, List<String> tables, Map<String, Backfill.TableProgress> progress)
            throws SQLException {
        try (Connection c = dataSource.getConnection(); PreparedStatement s = c.prepareStatement("UPDATE " + table
                + " SET progress = ?::jsonb, updated_at = now() WHERE id = ?")) {
            s.setString(1, progressJson(tables, progress));
            s.setObject(2, id);
            s.executeUpdate();
        }
    }

    static String progressJson(List<String> tables, Map<String, Backfill.TableProgress> progress) {
        ObjectNode json = JSON.createObjectNode();
        for (String name : tables) {
            Backfill.TableProgress p = progress.get(name);
            if (p == null) {
                continue;
            }
            ObjectNode t = json.putObject(name);
            if (p.cursor() == null) {
                t.putNull("cursor");
            } else {
                ArrayNode cursor = t.putArray("cursor");
                p.cursor().forEach(cursor::add);
            }
            t.put("rows_sent", p.rowsSent());
            t.put("done", p.done());
            if (p.oid() != 0) {
                t.put("oid", p.oid());
            }
            if (p.key() != null) {
                t.put("key", p.key());
            }
            if (p.keyNames() != null) {
                ArrayNode names = t.putArray("key_names");
                p.keyNames().forEach(names::add);
            }
        }
        return json.toString();
    }

    private List<Backfill> query(String sql, Object... parameters) throws SQLException {
        List<Backfill> found = new ArrayList<>();
        try (Connection c = dataSource.getConnection(); PreparedStatement s = c.prepareStatement(sql)) {
            for (int i = 0; i < parameters.length; i++) {
                s.setObject(i + 1, parameters[i]);
            }
            try (ResultSet rs = s.executeQuery()) {
                while (rs.next()) {
                    found.add(read(rs));
                }
            }
        }
        return found;
    }

    /**
     * The key of a backfill's read events' ids ({@link BackfillRunner#eventId}); null for one made
     * before backfills had one (its ids stay as they were) or one that is gone.
     */
    public byte[] idKey(UUID id) throws SQLException {
        try (Connection c = dataSource.getConnection();
                PreparedStatement s = c.prepareStatement("SELECT id_key FROM " + table + " WHERE id = ?")) {
            s.setObject(1, id);
            try (ResultSet rs = s.executeQuery()) {
                return rs.next() ? rs.getBytes(1) : null;
            }
        }
    }

    private static Backfill read(ResultSet rs) throws SQLException {
        Array tables = rs.getArray(5);
        List<String> names = Arrays.asList((String[]) tables.getArray());
        int max = rs.getInt(8);
        Integer maxRowsPerSecond = rs.wasNull() ? null : max;
        return new Backfill(rs.getObject(1, UUID.class), rs.getString(2), rs.getString(3),
                Backfill.State.parse(rs.getString(4)), names, rs.getString(6), rs.getInt(7), maxRowsPerSecond,
                progress(rs.getString(9)), rs.getString(10), instant(rs.getTimestamp(11)), instant(rs.getTimestamp(12)),
                instant(rs.getTimestamp(13)));
    }

    private static Map<String, Backfill.TableProgress> progress(String text) throws SQLException {
        Map<String, Backfill.TableProgress> progress = new LinkedHashMap<>();
        try {
            JsonNode json = JSON.readTree(text);
            json.fields().forEachRemaining(e -> {
                JsonNode cursor = e.getValue().path("cursor");
                List<String> values = null;
                if (cursor.isArray()) {
                    values = new ArrayList<>();
                    for (JsonNode v : cursor) {
                        values.add(v.asText());
                    }
                }
                List<String> keyNames = null;
                if (e.getValue().path("key_names").isArray()) {
                    keyNames = new ArrayList<>();
                    for (JsonNode name : e.getValue().path("key_names")) {
                        keyNames.add(name.asText());
                    }
                }
                progress.put(e.getKey(), new Backfill.TableProgress(values, e.getValue().path("rows_sent").asLong(),
                        e.getValue().path("done").asBoolean(), e.getValue().path("oid").asLong(0),
                        e.getValue().path("key").isTextual() ? e.getValue().path("key").asText() : null, keyNames));
            });
        } catch (JsonProcessingException e) {
            throw new SQLException("a backfill's progress is not JSON: " + e.getOriginalMessage());
        }
        return progress;
    }

    private static Instant instant(Timestamp t) {
        return t == null ? null : t.toInstant();
    }
}
