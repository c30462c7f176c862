package io.walhook.routing;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.UUID;

import javax.sql.DataSource;

import org.jboss.logging.Logger;

import io.walhook.config.DurableWrite;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Subscriptions created through the API, in {@code <state schema>.subscription}. A row that no
 * longer parses (written by another version, or by hand) is reported and left out, never fatal.
 */
public final class SubscriptionStore {

    private static final Logger LOG = Logger.getLogger(SubscriptionStore.class);
    private static final ObjectMapper JSON = new ObjectMapper();

    private final DataSource dataSource;
    private final String table;
    private final String matchedBefore;
    private final String checkpoint;

    /** Notified (from the writing session) whenever a subscription is written; instances listen to pick changes up. */
    public static final String CHANNEL = "walhook_subscriptions";

    /** @param stateSchema a validated plain identifier */
    public SubscriptionStore(DataSource dataSource, String stateSchema) {
        this.dataSource = dataSource;
        this.table = stateSchema + ".subscription";
        this.matchedBefore = stateSchema + ".subscription_matched_before";
        this.checkpoint = stateSchema + ".checkpoint";
    }

    /**
     * A stored subscription's id, when it was last written (created, changed, paused or resumed),
     * whether it is paused, and when it was created (microseconds since the epoch: its place in the
     * list, with its id).
     */
    public record Written(UUID id, String written, boolean paused, long created) {
    }

    /**
     * Every stored subscription's id and when it was last written, oldest first: a narrow read that
     * changes whenever one is created, changed, paused, resumed or deleted, and says which to read
     * again ({@link #list(List, java.util.Map)}). With 10,000 subscriptions, reading every body at
     * each change took about 50 ms, and a hash of them all 20 ms more.
     */
    public List<Written> written() throws SQLException {
        List<Written> listed = new ArrayList<>();
        try (Connection c = dataSource.getConnection(); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT id, updated_at::text, paused, (extract(epoch FROM created_at)"
                     + " * 1000000)::bigint FROM " + table + " ORDER BY created_at, id")) {
            while (rs.next()) {
                listed.add(new Written(rs.getObject(1, UUID.class), rs.getString(2), rs.getBoolean(3), rs.getLong(4)));
            }
        }
        return listed;
    }

    /**
     * A stored subscription with its id.
     *
     * @param written when its body was last written ({@code updated_at}): the same, the same body
     */
    public record Stored(UUID id, Subscription subscription, boolean paused, String written) {
    }

    public List<Subscription> loadAll() throws SQLException {
        return list().stream().map(Stored::subscription).toList();
    }

    /** Every stored subscription that parses, oldest first. */
    public List<Stored> list() throws SQLException {
        return list(java.util.Map.of());
    }

    /**
     * As {@link #list()}, taking the parsed subscription from {@code known} for each one written
     * when it was there (parsing compiles its filter: with thousands of subscriptions, a change to
     * one should not compile them all again).
     */
    public List<Stored> list(java.util.Map<UUID, Stored> known) throws SQLException {
        return list(written(), known);
    }

    /**
     * The subscriptions {@code listed} (by {@link #written()}), in its order: those {@code known} as
     * written then taken from it, the others read in one statement and parsed. One deleted since
     * the listing is left out; one written again since is read as it is now.
     */
    public List<Stored> list(List<Written> listed, java.util.Map<UUID, Stored> known) throws SQLException {
        List<UUID> unknown = new ArrayList<>();
        for (Written w : listed) {
            Stored before = known.get(w.id());
            if (before == null || !before.written().equals(w.written())) {
                unknown.add(w.id());
            }
        }
        java.util.Map<UUID, Stored> read = new java.util.HashMap<>();
        if (!unknown.isEmpty()) {
            try (Connection c = dataSource.getConnection();
                 PreparedStatement s = c.prepareStatement("SELECT id, name, body::text, paused, updated_at::text FROM "
                         + table + " WHERE id = ANY (?)")) {
                s.setArray(1, c.createArrayOf("uuid", unknown.toArray()));
                try (ResultSet rs = s.executeQuery()) {
                    while (rs.next()) {
                        Stored parsed = parsed(rs);
                        if (parsed != null) {
                            read.put(parsed.id(), parsed);
                        }
                    }
                }
            }
        }
        List<Stored> subscriptions = new ArrayList<>(listed.size());
        for (Written w : listed) {
            Stored stored = read.get(w.id());
            if (stored == null) {
                Stored before = known.get(w.id());
                if (before == null || !before.written().equals(w.written())) {
                    continue; // deleted since the listing, or does not parse
                }
                stored = before.paused() == w.paused() ? before : new Stored(w.id(), before.subscription(), w.paused(), w.written());
            }
            subscriptions.add(stored);
        }
        return subscriptions;
    }

    public java.util.Optional<Stored> find(UUID id) throws SQLException {
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("SELECT id, name, body::text, paused, updated_at::text FROM "
                     + table + " WHERE id = ?")) {
            s.setObject(1, id);
            try (ResultSet rs = s.executeQuery()) {
                return rs.next() ? java.util.Optional.ofNullable(parsed(rs)) : java.util.Optional.empty();
            }
        }
    }

    /** The row at the result set's cursor; null (and logged) when it does not parse. */
    private static Stored parsed(ResultSet rs) throws SQLException {
        UUID id = rs.getObject(1, UUID.class);
        String written = rs.getString(5);
        boolean paused = rs.getBoolean(4);
        try {
            return new Stored(id, SubscriptionJson.parseStored(JSON.readTree(rs.getString(3))).withId(id.toString()), paused,
                    written);
        } catch (SubscriptionException | com.fasterxml.jackson.core.JsonProcessingException e) {
            LOG.errorf("subscription %s (%s) is left out: %s", rs.getString(2), rs.getString(1), e.getMessage());
            return null;
        }
    }

    /** Whether a stored subscription other than {@code except} has this name. */
    public boolean nameTaken(String name, UUID except) throws SQLException {
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("SELECT 1 FROM " + table + " WHERE name = ? AND id IS DISTINCT FROM ?")) {
            s.setString(1, name);
            s.setObject(2, except);
            try (ResultSet rs = s.executeQuery()) {
                return rs.next();
            }
        }
    }

    /**
     * What a subscription matched before it was created ({@link #matchedBefore}): nothing. Written
     * as tables and operations no change has (a walhook reading it without knowing this one reads
     * the same), so that a change committed before the creation gets to it neither when the stream
     * lags nor when the slot sends it again after a crash.
     */
    static final String NOTHING = "{\"tables\": [\"pg_catalog.walhook_nothing\"], \"operations\": [\"truncate\"]}";

    /**
     * Stores a validated subscription body; returns its id. It matches the changes committed after
     * it ({@link #NOTHING} before).
     */
    public UUID insert(JsonNode body) throws SQLException {
        Subscription parsed = SubscriptionJson.parse(body);
        UUID id = UUID.randomUUID();
        try (Connection c = dataSource.getConnection()) {
            String[] from = new String[1];
            DurableWrite.run(c, t -> {
                try (PreparedStatement s = t.prepareStatement("INSERT INTO " + table + " (id, name, body) VALUES (?, ?,"
                        + " ?::jsonb)");
                        PreparedStatement before = t.prepareStatement("INSERT INTO " + matchedBefore + " (subscription_id,"
                                + " until_lsn, matching) VALUES (?, pg_catalog.pg_current_wal_insert_lsn(), ?::jsonb)"
                                + " RETURNING until_lsn::text")) {
                    s.setObject(1, id);
                    s.setString(2, parsed.name());
                    s.setString(3, body.toString());
                    int rows = s.executeUpdate();
                    before.setObject(1, id);
                    before.setString(2, NOTHING);
                    try (ResultSet rs = before.executeQuery()) {
                        from[0] = rs.next() ? rs.getString(1) : null;
                    }
                    return rows;
                }
            });
            if (from[0] != null) {
                keptUntilCommitted(c, id, from[0]);
            }
            changed(c);
        }
        return id;
    }

    /**
     * Replaces a subscription's body; false when there is no such subscription. When its tables,
     * operations or filter change, what they were is kept with the WAL position of the edit
     * ({@link #matchedBefore}): a change committed before it is routed as they said, however late
     * it is routed (after a crash, the slot sends it again).
     */
    public boolean replace(UUID id, JsonNode body) throws SQLException {
        return replace(id, body, null) == Replaced.DONE;
    }

    /** What {@link #replace(UUID, JsonNode, JsonNode)} did. */
    public enum Replaced {
        DONE,
        /** There is no such subscription. */
        GONE,
        /** Its body was no longer the one expected: nothing was written. */
        CHANGED
    }

    /**
     * As {@link #replace(UUID, JsonNode)}, only while the stored body is still {@code expected}
     * (unless that is null): a body made from the one read before (a patch) does not undo a write
     * made in between.
     */
    public Replaced replace(UUID id, JsonNode body, JsonNode expected) throws SQLException {
        Subscription parsed = SubscriptionJson.parse(body);
        try (Connection c = dataSource.getConnection()) {
            String[] kept = new String[1];
            int rows = DurableWrite.run(c, t -> {
                // the row locked first: an edit made meanwhile is the "before" of this one, never skipped
                try (PreparedStatement lock = t.prepareStatement("SELECT body::text FROM " + table + " WHERE id = ?"
                        + " FOR UPDATE")) {
                    lock.setObject(1, id);
                    try (ResultSet rs = lock.executeQuery()) {
                        if (!rs.next()) {
                            return 0;
                        }
                        if (expected != null && !expected.equals(tree(rs.getString(1)))) {
                            return -1;
                        }
                    }
                }
                try (PreparedStatement keep = t.prepareStatement("INSERT INTO " + matchedBefore + " (subscription_id,"
                        + " until_lsn, matching) SELECT id, pg_catalog.pg_current_wal_insert_lsn(),"
                        + " pg_catalog.jsonb_strip_nulls(pg_catalog.jsonb_build_object('tables', body -> 'tables',"
                        + " 'operations', body -> 'operations', 'filter', body -> 'filter')) FROM " + table
                        + " WHERE id = ? AND (body -> 'tables', body -> 'operations', body -> 'filter') IS DISTINCT FROM"
                        + " (?::jsonb -> 'tables', ?::jsonb -> 'operations', ?::jsonb -> 'filter')"
                        + " ON CONFLICT DO NOTHING RETURNING until_lsn::text");
                     PreparedStatement update = t.prepareStatement("UPDATE " + table + " SET name = ?, body = ?::jsonb,"
                             + " updated_at = clock_timestamp() WHERE id = ?")) {
                    keep.setObject(1, id);
                    for (int i = 2; i <= 4; i++) {
                        keep.setString(i, body.toString());
                    }
                    try (ResultSet rs = keep.executeQuery()) {
                        kept[0] = rs.next() ? rs.getString(1) : null;
                    }
                    update.setString(1, parsed.name());
                    update.setString(2, body.toString());
                    update.setObject(3, id);
                    return update.executeUpdate();
                }
            });
            if (rows < 0) {
                return Replaced.CHANGED;
            }
            if (kept[0] != null) {
                keptUntilCommitted(c, id, kept[0]);
            }
            return changed(c, rows) ? Replaced.DONE : Replaced.GONE;
        }
    }

    /** A subscription's body as stored (secrets and all, for a patch), if there is such a subscription. */
    public Optional<JsonNode> body(UUID id) throws SQLException {
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("SELECT body::text FROM " + table + " WHERE id = ?")) {
            s.setObject(1, id);
            try (ResultSet rs = s.executeQuery()) {
                return rs.next() ? Optional.of(tree(rs.getString(1))) : Optional.empty();
            }
        }
    }

    private static JsonNode tree(String json) throws SQLException {
        try {
            return JSON.readTree(json);
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new SQLException("a stored subscription body is not JSON: " + e.getOriginalMessage(), e);
        }
    }

    /**
     * The old matching's end moved past the edit's commit, before the answer: a change committed
     * between the position read in the edit's transaction and its commit record is routed as the
     * subscription matched before, as it committed before the answer. If this fails, the position
     * read in the transaction stays: only a change committed in that moment is then routed anew.
     */
    private void keptUntilCommitted(Connection c, UUID id, String until) {
        // its row written again with it: a refresh in between (another write's notification, a fallback round)
        // read the end as the transaction read it, and every later one took the subscriptions as unchanged
        // the subscription's row locked first, as its delete does (which then deletes these rows): the other
        // order could deadlock with it; and not past a later edit's, which committed after this one
        try (PreparedStatement s = c.prepareStatement("WITH locked AS (SELECT id FROM " + table + " WHERE id = ? FOR UPDATE),"
                + " moved AS (UPDATE " + matchedBefore + " m SET until_lsn = pg_catalog.pg_current_wal_insert_lsn()"
                + " WHERE m.subscription_id IN (SELECT id FROM locked) AND m.until_lsn = ?::pg_lsn AND NOT EXISTS (SELECT 1"
                + " FROM " + matchedBefore + " later WHERE later.subscription_id = m.subscription_id AND later.until_lsn"
                + " > m.until_lsn) RETURNING m.subscription_id) UPDATE " + table + " SET updated_at ="
                + " pg_catalog.clock_timestamp() WHERE id IN (SELECT subscription_id FROM moved)")) {
            s.setObject(1, id);
            s.setString(2, until);
            s.executeUpdate();
        } catch (SQLException e) {
            LOG.debugf("what subscription %s matched before its edit ends where the edit's transaction read it: %s", id,
                    e.getMessage());
        }
    }

    /**
     * What a stored subscription matched before an edit, until the WAL position {@code until} (a
     * change committed before it is routed as {@code matching} says).
     */
    public record MatchedBefore(String subscriptionId, io.walhook.pgoutput.Lsn until, SubscriptionJson.Matching matching) {
        /** Whether it is what the subscription matched before it was created: nothing ({@link #NOTHING}). */
        public boolean created() {
            return matching.tables().equals(NOTHING_TABLES);
        }
    }

    private static final List<TablePattern> NOTHING_TABLES = List.of(TablePattern.parse("pg_catalog.walhook_nothing"));

    /**
     * What stored subscriptions matched before their edits, oldest edit first, for the changes the
     * slot may still send: those the acknowledged position ({@code <state schema>.checkpoint})
     * passed are deleted first. One that does not parse any more is left out (reported).
     */
    public List<MatchedBefore> matchedBefore() throws SQLException {
        List<MatchedBefore> kept = new ArrayList<>();
        try (Connection c = dataSource.getConnection(); Statement s = c.createStatement()) {
            try {
                // behind every slot's acknowledged position (a stale row of a slot that is gone holds nothing back)
                s.execute("DELETE FROM " + matchedBefore + " WHERE until_lsn <= (SELECT pg_catalog.min(k.end_lsn) FROM "
                        + checkpoint + " k JOIN pg_catalog.pg_replication_slots r ON r.slot_name = k.slot_name)");
            } catch (SQLException e) {
                LOG.debugf("what subscriptions matched before their edits is not pruned this time: %s", e.getMessage());
            }
            try (ResultSet rs = s.executeQuery("SELECT subscription_id, until_lsn::text, matching::text FROM "
                    + matchedBefore + " ORDER BY until_lsn")) {
                while (rs.next()) {
                    try {
                        kept.add(new MatchedBefore(rs.getString(1), io.walhook.pgoutput.Lsn.parse(rs.getString(2)),
                                SubscriptionJson.parseMatching(JSON.readTree(rs.getString(3)))));
                    } catch (SubscriptionException | com.fasterxml.jackson.core.JsonProcessingException e) {
                        LOG.errorf("what subscription %s matched before its edit at %s is left out: %s", rs.getString(1),
                                rs.getString(2), e.getMessage());
                    }
                }
            }
        }
        return kept;
    }

    /** Pauses or resumes delivery to a subscription; false when there is no such subscription. */
    public boolean setPaused(UUID id, boolean paused) throws SQLException {
        return write("UPDATE " + table + " SET paused = ?, updated_at = clock_timestamp() WHERE id = ?", paused, id);
    }

    public boolean delete(UUID id) throws SQLException {
        return delete(id, t -> Boolean.TRUE).isPresent();
    }

    /**
     * Deletes the subscription and, in the same transaction, reads with {@code alongside} what goes
     * with it (its durable queue as it is at that instant): that answer, or empty when no such
     * subscription was stored (nothing deleted).
     */
    public <T> Optional<T> delete(UUID id, DurableWrite.Work<T> alongside) throws SQLException {
        try (Connection c = dataSource.getConnection()) {
            Optional<T> read = DurableWrite.run(c, t -> {
                try (PreparedStatement s = t.prepareStatement("DELETE FROM " + table + " WHERE id = ?")) {
                    s.setObject(1, id);
                    if (s.executeUpdate() != 1) {
                        return Optional.<T>empty();
                    }
                }
                return Optional.of(alongside.run(t));
            });
            changed(c, read.isPresent() ? 1 : 0);
            return read;
        }
    }

    /** One statement changing at most one subscription, committed durably; whether it changed one. */
    private boolean write(String sql, Object... parameters) throws SQLException {
        try (Connection c = dataSource.getConnection()) {
            int rows = DurableWrite.run(c, t -> {
                try (PreparedStatement s = t.prepareStatement(sql)) {
                    for (int i = 0; i < parameters.length; i++) {
                        s.setObject(i + 1, parameters[i]);
                    }
                    return s.executeUpdate();
                }
            });
            return changed(c, rows);
        }
    }

    /** Whether one row changed; if so, every listening instance is told. */
    private boolean changed(Connection c, int rows) throws SQLException {
        if (rows == 1) {
            changed(c);
        }
        return rows == 1;
    }

    /**
     * The write is done (committed): every listening instance is told. The write's connection may
     * have broken since its commit: then told on a new one, else the others take the write up at
     * their next look at the table without a notification (every 30 s).
     */
    private void changed(Connection c) {
        try (Statement s = c.createStatement()) {
            s.execute(NOTIFY);
        } catch (SQLException e) {
            try (Connection again = dataSource.getConnection(); Statement s = again.createStatement()) {
                s.execute(NOTIFY);
            } catch (SQLException | RuntimeException failed) {
                LOG.warnf("subscription written; telling the other instances failed (they see it within 30 s): %s",
                        failed.getMessage());
            }
        }
    }

    private static final String NOTIFY = "SELECT pg_notify('" + CHANNEL + "', '')";
}
