package io.walhook.delivery;

import java.sql.Array;
import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

import javax.sql.DataSource;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.walhook.pgoutput.Lsn;

/**
 * Each subscription's durable queue ({@code <state schema>.parked_event}): events its destination
 * did not take in time, or that arrived while it had such a backlog, written here in order before
 * their delivery counts as done, so the slot can advance. A subscription's lane delivers from it
 * continuously, oldest first; the API lists, replays and drops its rows ("dead letters"). Rows
 * belong to the subscription's id.
 */
public final class ParkedEventStore {

    private static final ObjectMapper JSON = new ObjectMapper();
    private static final org.jboss.logging.Logger LOG = org.jboss.logging.Logger.getLogger(ParkedEventStore.class);
    private static final TypeReference<LinkedHashMap<String, String>> HEADERS = new TypeReference<>() { };

    /** One queued request. */
    public record Parked(long id, String subscriptionId, String eventId, Lsn commitLsn, Instant commitTime,
            String contentType, Map<String, String> headers, String address, byte[] body, int attempts,
            String lastError, long[] ordering, String rowKey, String[] addressParts) {
    }

    /**
     * A request to queue: {@code address} is the AMQP address it resolved to (null for webhooks),
     * {@code ordering} what it must stay in order with, {@code rowKey} its row's key as JSON (or null),
     * {@code addressParts} its event's schema, table and operation (an AMQP address template's parts;
     * null when unknown).
     */
    public record Entry(String eventId, Lsn commitLsn, Instant commitTime, String contentType,
            Map<String, String> headers, String address, byte[] body, long[] ordering, String rowKey,
            String[] addressParts) {

        public Entry(String eventId, Lsn commitLsn, Instant commitTime, String contentType, Map<String, String> headers,
                String address, byte[] body, long[] ordering, String rowKey) {
            this(eventId, commitLsn, commitTime, contentType, headers, address, body, ordering, rowKey, null);
        }
    }

    private static final String COLUMNS = "id, subscription_id, event_id, commit_lsn::text, commit_time, content_type,"
            + " headers::text, address, body, attempts, last_error, ordering, row_key::text, address_parts";

    /**
     * Checks, in an append's transaction before it writes, that this instance may still write
     * (it holds the slot's lock); throws if not, and nothing is written.
     */
    public interface Fence {
        Fence NONE = connection -> { };

        void check(Connection transaction) throws SQLException;
    }

    private final DataSource dataSource;
    /** Where the session of a statement without limits is asked after ({@code SessionTimeout.unlimited}). */
    private final DataSource watcher;
    private final String table;
    private final String subscriptions;
    /** Events dropped through the API while the slot may send their changes again ({@link #dropped()}). */
    private final String dropped;
    /** The subscriptions a 410 Gone disabled ({@link #gone}). */
    private final String goneTable;
    /**
     * Before which position the slot sends nothing again: every slot's acknowledged position (a
     * stale row of a slot that is gone holds nothing back), null while none is recorded.
     */
    private final String passed;
    private volatile long writtenBefore = Long.MAX_VALUE;
    /** The position the stream resumed from in this run (unsigned), 0 when unknown. */
    private volatile long resumedFrom;
    /** The runs before this one since the oldest row queued ({@link #markRun}). */
    private volatile EarlierRuns earlierRuns = EarlierRuns.NONE;
    private volatile long earlierHistoryUpTo;
    private final Fence fence;

    /** @param stateSchema a validated plain identifier */
    public ParkedEventStore(DataSource dataSource, String stateSchema) {
        this(dataSource, stateSchema, Fence.NONE);
    }

    /** @param fence what each append checks before it writes (an instance that lost the slot's lock writes nothing) */
    public ParkedEventStore(DataSource dataSource, String stateSchema, Fence fence) {
        this(dataSource, dataSource, stateSchema, fence);
    }

    /**
     * @param watcher the pool on which the server is asked whether the session of a count or a read
     *        without limits is still there: not {@code dataSource} when that is the API's pool of two,
     *        whose connections a failover breaks together
     */
    public ParkedEventStore(DataSource dataSource, DataSource watcher, String stateSchema, Fence fence) {
        this.dataSource = dataSource;
        this.watcher = watcher;
        this.table = stateSchema + ".parked_event";
        this.subscriptions = stateSchema + ".subscription";
        this.dropped = stateSchema + ".dropped_event";
        this.goneTable = stateSchema + ".gone_endpoint";
        this.passed = "(SELECT pg_catalog.min(k.end_lsn) FROM " + stateSchema + ".checkpoint k"
                + " JOIN pg_catalog.pg_replication_slots r ON r.slot_name = k.slot_name)";
        this.fence = fence;
    }

    /**
     * A row key as the queue's jsonb column takes it: a json column in a key (REPLICA IDENTITY FULL)
     * may hold NUL, whose escape jsonb refuses; it is kept as the text of its escape. Two keys alike
     * but for that are then filed together, which only lists them together; refused, the write would
     * fail again at every try and hold the lane.
     */
    static String storable(String rowKey) {
        if (rowKey == null || !rowKey.contains("\\u0000")) {
            return rowKey;
        }
        StringBuilder out = new StringBuilder(rowKey.length() + 8);
        for (int i = 0; i < rowKey.length(); i++) {
            char c = rowKey.charAt(i);
            out.append(c);
            if (c == '\\') {
                // an escape: NUL's becomes an escaped backslash and "u0000"; any other is copied whole
                if (rowKey.startsWith("u0000", i + 1)) {
                    out.append('\\');
                }
                out.append(rowKey.charAt(++i));
            }
        }
        return out.toString();
    }

    /**
     * Appends requests to a subscription's queue, in this order, in one transaction, with the
     * attempts already made at them; queueing an event twice (read again after a restart) keeps the
     * first, and one dropped through the API ({@link #dropped()}) is not queued again. Returns how
     * many rows were added.
     */
    public int append(String subscriptionId, String name, List<Entry> entries, int attempts, String lastError)
            throws SQLException {
        try (Connection c = dataSource.getConnection()) {
            boolean autoCommit = c.getAutoCommit();
            c.setAutoCommit(false);
            try {
                // acknowledged once committed: the slot passes its changes, and a crash must not take it back
                io.walhook.config.DurableWrite.durable(c);
                fence.check(c); // in the transaction: holds until it commits
                int added = 0;
                try (PreparedStatement s = c.prepareStatement("INSERT INTO " + table + " (subscription_id, subscription,"
                        + " event_id, commit_lsn, commit_time, content_type, headers, body, attempts, last_error, address,"
                        + " ordering, row_key, address_parts) VALUES (?, ?, ?, ?::pg_lsn, ?, ?, ?::jsonb, ?, ?, ?, ?, ?,"
                        + " ?::jsonb, ?)"
                        + " ON CONFLICT (subscription_id, event_id) DO NOTHING")) {
                    for (Entry entry : entries) {
                        s.setString(1, subscriptionId);
                        s.setString(2, name);
                        s.setString(3, entry.eventId());
                        s.setString(4, entry.commitLsn().toString());
                        s.setTimestamp(5, entry.commitTime() == null ? null : Timestamp.from(entry.commitTime()));
                        s.setString(6, entry.contentType());
                        s.setString(7, JSON.writeValueAsString(entry.headers()));
                        s.setBytes(8, entry.body());
                        s.setInt(9, attempts);
                        s.setString(10, lastError == null ? null : lastError.replace((char) 0, (char) 0xfffd)); // text takes no NUL
                        s.setString(11, entry.address());
                        s.setArray(12, entry.ordering() == null ? null : c.createArrayOf("bigint", boxed(entry.ordering())));
                        s.setString(13, storable(entry.rowKey()));
                        s.setArray(14, entry.addressParts() == null ? null : c.createArrayOf("text", entry.addressParts()));
                        s.addBatch();
                    }
                    for (int count : s.executeBatch()) {
                        added += Math.max(count, 0);
                    }
                }
                if (added > 0) {
                    // dropped through the API since the stream sent them (again, after a crash): deleted in this
                    // transaction, unsent. A drop committing while this one waited for its row (the conflict) is
                    // seen here, as this statement's snapshot is taken after the insert's wait
                    try (PreparedStatement s = c.prepareStatement("DELETE FROM " + table + " p USING " + dropped + " d"
                            + " WHERE p.subscription_id = ? AND p.event_id = ANY (?) AND d.subscription_id = p.subscription_id"
                            + " AND d.event_id = p.event_id")) {
                        s.setString(1, subscriptionId);
                        s.setArray(2, c.createArrayOf("text", entries.stream().map(Entry::eventId).toArray()));
                        added = Math.max(0, added - s.executeUpdate());
                    }
                }
                c.commit();
                c.setAutoCommit(autoCommit);
                return added;
            } catch (SQLException | JsonProcessingException | RuntimeException e) {
                io.walhook.config.DurableWrite.rollBack(c, autoCommit, e);
                throw e;
            }
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("cannot write headers as JSON", e);
        }
    }

    private static Long[] boxed(long[] values) {
        Long[] boxed = new Long[values.length];
        for (int i = 0; i < values.length; i++) {
            boxed[i] = values[i];
        }
        return boxed;
    }

    /**
     * A page of a subscription's queue, oldest first, after the given row id (0 for the first page):
     * at most {@code limit} rows, and only as many as fit in {@code maxBodyBytes} of bodies (the first
     * whatever its size), as a lane's read-back is; with {@code rowKey}, only the rows of that key
     * (found by reading the subscription's queue: as long as that takes). {@code more} says whether
     * rows follow the page.
     */
    public Page page(String subscriptionId, long afterId, int limit, Optional<String> rowKey, long maxBodyBytes)
            throws SQLException {
        try (Connection c = dataSource.getConnection()) {
            return io.walhook.config.SessionTimeout.unlimited(watcher, c, u -> {
                // one more candidate than the limit says whether rows follow; a body's length is read from its TOAST
                // pointer, so rows left out are not fetched
                try (PreparedStatement s = u.prepareStatement("WITH candidates AS (SELECT id, octet_length(body) AS len"
                        + " FROM " + table + " WHERE subscription_id = ? AND id > ?"
                        + (rowKey.isPresent() ? " AND row_key = ?::jsonb" : "") + " ORDER BY id LIMIT ?),"
                        + " fitting AS (SELECT id, len, sum(len) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) AS upto,"
                        + " row_number() OVER (ORDER BY id) AS n FROM candidates)"
                        + " SELECT " + COLUMNS + ", (SELECT count(*) FROM candidates) FROM " + table
                        + " JOIN fitting USING (id) WHERE fitting.n <= ? AND (fitting.upto <= ? OR fitting.n = 1)"
                        + " ORDER BY id")) {
                    int next = 1;
                    s.setString(next++, subscriptionId);
                    s.setLong(next++, afterId);
                    if (rowKey.isPresent()) {
                        s.setString(next++, storable(rowKey.get()));
                    }
                    s.setInt(next++, limit + 1);
                    s.setInt(next++, limit);
                    s.setLong(next, maxBodyBytes);
                    long[] candidates = new long[1];
                    List<Parked> rows = rows(s, candidates);
                    return new Page(rows, candidates[0] > rows.size());
                }
            });
        }
    }

    /** A page of a queue, and whether rows follow it. */
    public record Page(List<Parked> rows, boolean more) {
    }

    private static List<Parked> rows(PreparedStatement query) throws SQLException {
        return rows(query, null);
    }

    /** The rows; {@code count}, when given, gets the long in the column after the row's (the same on every row). */
    private static List<Parked> rows(PreparedStatement query, long[] count) throws SQLException {
        List<Parked> parked = new ArrayList<>();
        try (ResultSet rs = query.executeQuery()) {
            while (rs.next()) {
                if (count != null) {
                    count[0] = rs.getLong(15);
                }
                Timestamp commitTime = rs.getTimestamp(5);
                parked.add(new Parked(rs.getLong(1), rs.getString(2), rs.getString(3), Lsn.parse(rs.getString(4)),
                        commitTime == null ? null : commitTime.toInstant(), rs.getString(6),
                        headers(rs.getString(7)), rs.getString(8), rs.getBytes(9), rs.getInt(10),
                        rs.getString(11), longs(rs.getArray(12)), rs.getString(13), texts(rs.getArray(14))));
            }
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("a parked event's headers are not JSON", e);
        }
        return parked;
    }

    /**
     * A row's stored headers: an object of strings as walhook writes them; read leniently otherwise
     * (written by hand, or by another version), so that the row is delivered, not read again and
     * again: a value that is not a string is sent as its JSON text, a null one left out, and
     * anything but an object is no headers.
     */
    static Map<String, String> headers(String stored) throws JsonProcessingException {
        try {
            Map<String, String> headers = JSON.readValue(stored, HEADERS); // numbers and booleans read as their text
            if (headers.values().removeIf(java.util.Objects::isNull)) {
                LOG.warnf("a queued event's stored headers hold null values; sent without them: %s", headers.keySet());
            }
            return headers;
        } catch (JsonProcessingException notStrings) {
            com.fasterxml.jackson.databind.JsonNode tree = JSON.readTree(stored);
            Map<String, String> headers = new LinkedHashMap<>();
            if (tree != null && tree.isObject()) {
                tree.fields().forEachRemaining(field -> {
                    com.fasterxml.jackson.databind.JsonNode value = field.getValue();
                    if (!value.isNull()) {
                        headers.put(field.getKey(), value.isTextual() ? value.asText() : value.toString());
                    }
                });
            }
            LOG.warnf("a queued event's stored headers are not an object of strings; sent as read: %s", headers.keySet());
            return headers;
        }
    }

    private static String[] texts(Array array) throws SQLException {
        if (array == null) {
            return null;
        }
        Object[] values = (Object[]) array.getArray();
        String[] texts = new String[values.length];
        for (int i = 0; i < values.length; i++) {
            texts[i] = values[i] == null ? "" : values[i].toString();
        }
        return texts;
    }

    private static long[] longs(Array array) throws SQLException {
        if (array == null) {
            return null;
        }
        Object[] values = (Object[]) array.getArray();
        long[] longs = new long[values.length];
        for (int i = 0; i < values.length; i++) {
            if (values[i] == null) {
                return null;
            }
            longs[i] = ((Number) values[i]).longValue();
        }
        return longs;
    }

    /** Which of these row ids are in the subscription's queue. */
    public Set<Long> existing(String subscriptionId, List<Long> ids) throws SQLException {
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("SELECT id FROM " + table
                     + " WHERE subscription_id = ? AND id = ANY (?)")) {
            s.setString(1, subscriptionId);
            s.setArray(2, c.createArrayOf("bigint", ids.toArray()));
            Set<Long> found = new TreeSet<>();
            try (ResultSet rs = s.executeQuery()) {
                while (rs.next()) {
                    found.add(rs.getLong(1));
                }
            }
            return found;
        }
    }

    /**
     * What the API's drop of dead letters notifies, with the subscription's id as payload: the
     * active instance, whichever instance served the request, has its lane read the queue again
     * (rows it read back to retry are not sent once dropped) and count it again.
     */
    public static final String DROPS_CHANNEL = "walhook_dead_letters_dropped";
    /**
     * What the API's replay notifies, with the subscription's id: the active instance, whichever
     * served the request, tries its queue now (and enables it again after a 410).
     */
    public static final String REPLAYS_CHANNEL = "walhook_dead_letters_replayed";

    /**
     * The API's drop: these rows, or with {@code ids} null the whole queue as it is now; returns
     * how many. When it dropped any, every listening instance is told ({@link #DROPS_CHANNEL}).
     */
    public int drop(String subscriptionId, List<Long> ids) throws SQLException {
        int deleted = ids == null ? deleteAll(subscriptionId, upTo(subscriptionId), true) : deleteIds(subscriptionId, ids);
        if (deleted > 0) {
            try {
                forgetPassedDrops();
            } catch (SQLException e) {
                LOG.debugf("dropped events are not pruned this time: %s", e.getMessage());
            }
            // dropped for good all the same; only rows the active instance read back before may still go
            announce(DROPS_CHANNEL, subscriptionId, "dead letters of subscription %s dropped; telling the active instance"
                    + " failed (rows it read back to retry may still be sent once): %s");
        }
        return deleted;
    }

    /** The API's replay, asked of every listening instance ({@link #REPLAYS_CHANNEL}): the active one acts on it. */
    public void replay(String subscriptionId) throws SQLException {
        notGone(subscriptionId); // first: a lane made or a session listening again from now on finds it enabled
        announce(REPLAYS_CHANNEL, subscriptionId, "replay of subscription %s: telling the active instance failed (its"
                + " queue is delivered at its destination's pace all the same): %s");
    }

    /**
     * Records that the subscription's endpoint ({@code endpoint}, its key: Lane.endpointKey) answered
     * 410 Gone: the subscription stays disabled for it across restarts and take-overs, until a
     * replay or another endpoint enables it again ({@link #notGone}).
     */
    public void gone(String subscriptionId, String endpoint) throws SQLException {
        try (Connection c = dataSource.getConnection();
                PreparedStatement s = c.prepareStatement("INSERT INTO " + goneTable + " (subscription_id, endpoint,"
                        + " disabled_at) VALUES (?, ?, now()) ON CONFLICT (subscription_id) DO UPDATE"
                        + " SET endpoint = excluded.endpoint, disabled_at = excluded.disabled_at")) {
            s.setString(1, subscriptionId);
            s.setString(2, endpoint);
            s.executeUpdate();
        }
    }

    /** The subscription is enabled again: no 410 disables it any more ({@link #gone}). */
    public void notGone(String subscriptionId) throws SQLException {
        try (Connection c = dataSource.getConnection()) {
            notGone(c, subscriptionId);
        }
    }

    /** As {@link #notGone(String)}, on {@code c} (in the transaction that deletes the subscription). */
    public void notGone(Connection c, String subscriptionId) throws SQLException {
        try (PreparedStatement s = c.prepareStatement("DELETE FROM " + goneTable + " WHERE subscription_id = ?")) {
            s.setString(1, subscriptionId);
            s.executeUpdate();
        }
    }

    /** Of these subscriptions, those a 410 disabled ({@link #gone}), with the key of the endpoint that answered it. */
    public Map<String, String> gone(java.util.Collection<String> subscriptionIds) throws SQLException {
        Map<String, String> gone = new java.util.HashMap<>();
        if (subscriptionIds.isEmpty()) {
            return gone;
        }
        try (Connection c = dataSource.getConnection();
                PreparedStatement s = c.prepareStatement("SELECT subscription_id, endpoint FROM " + goneTable
                        + " WHERE subscription_id = ANY (?::text[])")) {
            s.setArray(1, c.createArrayOf("text", subscriptionIds.toArray()));
            try (ResultSet rs = s.executeQuery()) {
                while (rs.next()) {
                    gone.put(rs.getString(1), rs.getString(2));
                }
            }
        }
        return gone;
    }

    private void announce(String channel, String subscriptionId, String failure) {
        try (Connection c = dataSource.getConnection();
                PreparedStatement s = c.prepareStatement("SELECT pg_notify(?, ?)")) {
            s.setString(1, channel);
            s.setString(2, subscriptionId);
            s.execute();
        } catch (SQLException e) {
            LOG.warnf(failure, subscriptionId, e.getMessage());
        }
    }

    /** Drops these rows (the API; none when {@code ids} is empty: {@link #deleteAll} drops every one); returns how many. */
    public int deleteIds(String subscriptionId, List<Long> ids) throws SQLException {
        if (ids.isEmpty()) {
            return 0;
        }
        try (Connection c = dataSource.getConnection()) {
            // the answer says they are dropped for good: not brought back by a crash (DurableWrite)
            return io.walhook.config.DurableWrite.run(c, t -> {
                try (PreparedStatement s = t.prepareStatement("WITH d AS (DELETE FROM " + table
                        + " WHERE subscription_id = ? AND id = ANY (?) RETURNING subscription_id, event_id, commit_lsn)"
                        + remembered("d") + " SELECT count(*) FROM d")) {
                    s.setString(1, subscriptionId);
                    s.setArray(2, t.createArrayOf("bigint", ids.toArray()));
                    try (ResultSet r = s.executeQuery()) {
                        r.next();
                        return r.getInt(1);
                    }
                }
            });
        }
    }

    /** Rows {@link #deleteAll} deletes in one transaction. */
    static final int DELETE_CHUNK = 10_000;

    /**
     * Drops the subscription's whole queue as it is now (the API's drop of every dead letter, or the
     * subscription deleted); returns how many. A transaction per {@link #DELETE_CHUNK} rows, each
     * committed before the next: one statement over a queue of millions held every row locked until
     * it ended, and the lane's own statements on them (deleting what it delivered, counting
     * attempts) waited as long, its memory full meanwhile and routing held back for every
     * subscription. A row another session holds is skipped and taken again after it, as long as it
     * takes.
     */
    public int deleteAll(String subscriptionId) throws SQLException {
        return deleteAll(subscriptionId, upTo(subscriptionId));
    }

    /** The last row of the subscription's queue now: rows queued after a drop began are not the queue it drops. */
    private long upTo(String subscriptionId) throws SQLException {
        long upTo;
        try (Connection c = dataSource.getConnection();
                PreparedStatement s = c.prepareStatement("SELECT coalesce(max(id), 0) FROM " + table
                        + " WHERE subscription_id = ?")) {
            s.setString(1, subscriptionId);
            try (ResultSet r = s.executeQuery()) {
                r.next();
                upTo = r.getLong(1);
            }
        }
        return upTo;
    }

    /**
     * A statement's {@code WITH} item keeping the rows {@code deleted} (subscription_id, event_id,
     * commit_lsn) returned, of changes the slot may send again, in {@link #dropped}.
     */
    private String remembered(String deleted) {
        return ", m AS (INSERT INTO " + dropped + " (subscription_id, event_id, commit_lsn) SELECT subscription_id,"
                + " event_id, commit_lsn FROM " + deleted + " WHERE commit_lsn >= coalesce(" + passed + ", '0/0')"
                + " ON CONFLICT DO NOTHING)";
    }

    /**
     * The events dropped through the API whose changes the slot may send again, as
     * {@link #droppedKey}s: a crash, a restart or a take-over before its acknowledged position
     * passed them reads them again, and they are not queued nor sent again. Those the position
     * passed are deleted first.
     */
    public DroppedEvents dropped() throws SQLException {
        forgetPassedDrops();
        return dropped(null);
    }

    /** Deletes the kept drops of changes every slot's acknowledged position passed: no slot sends them again. */
    private void forgetPassedDrops() throws SQLException {
        try (Connection c = dataSource.getConnection(); Statement s = c.createStatement()) {
            s.execute("DELETE FROM " + dropped + " WHERE commit_lsn < " + passed);
        }
    }

    /** Events {@link #dropped()} keeps: their {@link #droppedKey}s, and the last commit position among them (-1: none). */
    public record DroppedEvents(Set<String> keys, long lastCommit) {
    }

    /** As {@link #dropped()}, the subscription's only (null: every one's), none deleted. */
    public DroppedEvents dropped(String subscriptionId) throws SQLException {
        try (Connection c = dataSource.getConnection();
                PreparedStatement s = c.prepareStatement("SELECT subscription_id, event_id, commit_lsn::text FROM " + dropped
                        + (subscriptionId == null ? "" : " WHERE subscription_id = ?"))) {
            if (subscriptionId != null) {
                s.setString(1, subscriptionId);
            }
            Set<String> keys = new java.util.HashSet<>();
            long last = -1;
            try (ResultSet r = s.executeQuery()) {
                while (r.next()) {
                    keys.add(droppedKey(r.getString(1), r.getString(2)));
                    last = Math.max(last, Lsn.parse(r.getString(3)).value());
                }
            }
            return new DroppedEvents(keys, last);
        }
    }

    /** An event of a subscription, as {@link #dropped()} names it. */
    public static String droppedKey(String subscriptionId, String eventId) {
        return subscriptionId + ' ' + eventId;
    }

    /** How many rows a subscription's queue holds, and the last one's id (0 for none). */
    public record Held(int count, long upTo) {
    }

    /**
     * The subscription's queue as {@code c} sees it now (in its transaction, if one is open),
     * counted however long that takes: under the pool's statement limit, a queue of millions made
     * a subscription impossible to delete.
     */
    public Held held(Connection c, String subscriptionId) throws SQLException {
        return io.walhook.config.SessionTimeout.unlimited(watcher, c, u -> {
            try (PreparedStatement s = u.prepareStatement("SELECT count(*), coalesce(max(id), 0) FROM " + table
                    + " WHERE subscription_id = ?")) {
                s.setString(1, subscriptionId);
                try (ResultSet r = s.executeQuery()) {
                    r.next();
                    return new Held(r.getInt(1), r.getLong(2));
                }
            }
        });
    }

    /**
     * As {@link #deleteAll(String)}, the rows up to id {@code upTo}; returns how many this call
     * deleted (rows a deleted subscription's lane drops meanwhile are not among them).
     */
    public int deleteAll(String subscriptionId, long upTo) throws SQLException {
        return deleteAll(subscriptionId, upTo, false);
    }

    /** As {@link #deleteAll(String, long)}; {@code remember}: the API's drop, kept in {@link #dropped} too. */
    private int deleteAll(String subscriptionId, long upTo, boolean remember) throws SQLException {
        if (upTo <= 0) {
            return 0;
        }
        int deleted = 0;
        long after = 0; // the sweep goes forward, not over the rows it deleted again; then back for the rows held
        long pause = 20;
        while (true) {
            long from = after;
            long[] result;
            try (Connection c = dataSource.getConnection()) {
                result = io.walhook.config.DurableWrite.run(c, t -> {
                    long n;
                    long last;
                    try (PreparedStatement s = t.prepareStatement("WITH d AS (DELETE FROM " + table + " WHERE id IN"
                            + " (SELECT id FROM " + table + " WHERE subscription_id = ? AND id > ? AND id <= ? ORDER BY id"
                            + " LIMIT ? FOR UPDATE SKIP LOCKED) RETURNING id, subscription_id, event_id, commit_lsn)"
                            + (remember ? remembered("d") : "") + " SELECT count(*), max(id) FROM d")) {
                        s.setString(1, subscriptionId);
                        s.setLong(2, from);
                        s.setLong(3, upTo);
                        s.setInt(4, DELETE_CHUNK);
                        try (ResultSet r = s.executeQuery()) {
                            r.next();
                            n = r.getLong(1);
                            last = r.getLong(2);
                        }
                    }
                    if (n == DELETE_CHUNK) {
                        return new long[] {n, last, 1};
                    }
                    try (PreparedStatement s = t.prepareStatement("SELECT EXISTS (SELECT 1 FROM " + table
                            + " WHERE subscription_id = ? AND id <= ?)")) {
                        s.setString(1, subscriptionId);
                        s.setLong(2, upTo);
                        try (ResultSet r = s.executeQuery()) {
                            r.next();
                            return new long[] {n, last, r.getBoolean(1) ? 1 : 0};
                        }
                    }
                });
            }
            deleted += (int) result[0];
            if (result[2] == 0) {
                return deleted;
            }
            if (result[0] == DELETE_CHUNK) {
                after = result[1];
                pause = 20;
                continue;
            }
            // the sweep reached the end; what is left another session holds (a lane's statement, an operator's
            // transaction): from the start again, after it
            after = 0;
            try {
                Thread.sleep(pause);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new SQLException("interrupted while dropping the queue of " + subscriptionId, e);
            }
            pause = result[0] > 0 ? 20 : Math.min(pause * 2, 1_000);
        }
    }

    /**
     * What {@link #dropSome} did: rows deleted, whether rows of the queue are left (locked by another
     * session), and whether none was, the subscription being stored (not deleted).
     */
    public record Dropped(int deleted, boolean left, boolean stored) {
        Dropped(int deleted, boolean left) {
            this(deleted, left, false);
        }
    }

    /**
     * A deleted subscription's queue dropped by delivery, {@code limit} rows at a time: rows another
     * session holds (the API dropping the same queue, an operator's transaction) are skipped, not
     * waited for, so a drop never holds one of the threads every subscription's queue needs. Rows
     * left are dropped by a later call.
     */
    public Dropped dropSome(String subscriptionId, int limit) throws SQLException {
        try (Connection c = dataSource.getConnection()) {
            return io.walhook.config.DurableWrite.run(c, t -> {
                try (PreparedStatement s = t.prepareStatement("SELECT EXISTS (SELECT 1 FROM " + subscriptions
                        + " WHERE id::text = ?)")) {
                    // stored: not deleted, whatever an instance's older look at the subscriptions said (a standby
                    // taking over with a list from before the subscription was created)
                    s.setString(1, subscriptionId);
                    try (ResultSet r = s.executeQuery()) {
                        r.next();
                        if (r.getBoolean(1)) {
                            return new Dropped(0, false, true);
                        }
                    }
                }
                int deleted;
                try (PreparedStatement s = t.prepareStatement("DELETE FROM " + table + " WHERE id IN (SELECT id FROM "
                        + table + " WHERE subscription_id = ? LIMIT ? FOR UPDATE SKIP LOCKED)")) {
                    s.setString(1, subscriptionId);
                    s.setInt(2, limit);
                    deleted = s.executeUpdate();
                }
                if (deleted == limit) {
                    return new Dropped(deleted, true);
                }
                try (PreparedStatement s = t.prepareStatement("SELECT EXISTS (SELECT 1 FROM " + table
                        + " WHERE subscription_id = ?)")) {
                    s.setString(1, subscriptionId);
                    try (java.sql.ResultSet r = s.executeQuery()) {
                        r.next();
                        return new Dropped(deleted, r.getBoolean(1));
                    }
                }
            });
        }
    }

    /**
     * What {@link #sync} did: how many delivered rows it deleted, the page it read (empty when none
     * was asked), and whether rows after it are left.
     */
    public record Synced(int deleted, List<Parked> page, boolean more) {
    }

    /**
     * A lane's round trip, in one transaction: deletes the rows of these delivered events, counts
     * another failed attempt at these (by error text), then reads the next page after {@code afterId}:
     * at most {@code limit} rows (0: none), and only as many as fit in {@code maxBodyBytes} of
     * bodies (with {@code firstAnyway}, the first whatever its size), so what a lane reads back is
     * bounded in bytes. Deletions commit flushed, as writes do: a delivered row a server crash
     * brought back would be delivered again after its row's newer changes sent directly since.
     */
    public Synced sync(String subscriptionId, List<String> delivered, Map<String, List<String>> failed, long afterId,
            int limit, long maxBodyBytes, boolean firstAnyway) throws SQLException {
        try (Connection c = dataSource.getConnection()) {
            boolean autoCommit = c.getAutoCommit();
            c.setAutoCommit(false);
            try {
                int deleted = 0;
                if (!delivered.isEmpty()) {
                    io.walhook.config.DurableWrite.durable(c);
                    try (PreparedStatement s = c.prepareStatement("DELETE FROM " + table
                            + " WHERE subscription_id = ? AND event_id = ANY (?)")) {
                        s.setString(1, subscriptionId);
                        s.setArray(2, c.createArrayOf("text", delivered.toArray()));
                        deleted = s.executeUpdate();
                    }
                }
                if (!failed.isEmpty()) {
                    try (PreparedStatement s = c.prepareStatement("UPDATE " + table + " SET attempts = attempts + 1,"
                            + " last_error = ? WHERE subscription_id = ? AND event_id = ANY (?)")) {
                        for (Map.Entry<String, List<String>> failure : failed.entrySet()) {
                            s.setString(1, failure.getKey().replace((char) 0, (char) 0xfffd)); // text takes no NUL
                            s.setString(2, subscriptionId);
                            s.setArray(3, c.createArrayOf("text", failure.getValue().toArray()));
                            s.addBatch();
                        }
                        s.executeBatch();
                    }
                }
                List<Parked> page = List.of();
                boolean more = false;
                if (limit > 0) {
                    // a body's length is read from its TOAST pointer: rows left out are not fetched
                    try (PreparedStatement s = c.prepareStatement("WITH candidates AS (SELECT id, octet_length(body) AS len"
                            + " FROM " + table + " WHERE subscription_id = ? AND id > ? ORDER BY id LIMIT ?),"
                            + " fitting AS (SELECT id, sum(len) OVER (ORDER BY id ROWS UNBOUNDED PRECEDING) AS upto, len"
                            + " FROM candidates)"
                            + " SELECT " + COLUMNS + ", (SELECT count(*) FROM candidates) FROM " + table
                            + " JOIN fitting USING (id) WHERE fitting.upto <= ? OR (? AND fitting.upto = fitting.len)"
                            + " ORDER BY id")) {
                        s.setString(1, subscriptionId);
                        s.setLong(2, afterId);
                        s.setInt(3, limit);
                        s.setLong(4, maxBodyBytes);
                        s.setBoolean(5, firstAnyway);
                        long[] candidates = new long[1];
                        page = rows(s, candidates);
                        more = candidates[0] == limit || page.size() < candidates[0];
                    }
                    if (page.isEmpty()) {
                        // no row fitted (or none is left): the count came with none, so ask
                        try (PreparedStatement s = c.prepareStatement("SELECT EXISTS (SELECT 1 FROM " + table
                                + " WHERE subscription_id = ? AND id > ?)")) {
                            s.setString(1, subscriptionId);
                            s.setLong(2, afterId);
                            try (ResultSet rs = s.executeQuery()) {
                                more = rs.next() && rs.getBoolean(1);
                            }
                        }
                    }
                }
                c.commit();
                c.setAutoCommit(autoCommit);
                return new Synced(deleted, page, more);
            } catch (SQLException | RuntimeException e) {
                io.walhook.config.DurableWrite.rollBack(c, autoCommit, e);
                throw e;
            }
        }
    }

    /** Rows in the subscription's queue (counted: as long as that takes). */
    public long count(String subscriptionId) throws SQLException {
        try (Connection c = dataSource.getConnection()) {
            return io.walhook.config.SessionTimeout.unlimited(watcher, c, u -> {
                try (PreparedStatement s = u.prepareStatement("SELECT count(*) FROM " + table + " WHERE subscription_id = ?")) {
                    s.setString(1, subscriptionId);
                    try (ResultSet rs = s.executeQuery()) {
                        rs.next();
                        return rs.getLong(1);
                    }
                }
            });
        }
    }

    /**
     * How many rows each of these subscriptions' queues holds (those with none are absent), if the
     * server counts them within {@code limit}; null when it does not (queues of millions, the state
     * database away): the counts are for /status and the metrics, and must not hold delivery back.
     */
    public Map<String, Long> countsWithin(java.util.Collection<String> subscriptionIds, java.time.Duration limit) {
        Map<String, Long> counts = new java.util.HashMap<>();
        if (subscriptionIds.isEmpty()) {
            return counts;
        }
        try (Connection c = dataSource.getConnection()) {
            boolean autoCommit = c.getAutoCommit();
            c.setAutoCommit(false); // for SET LOCAL: the limit ends with the transaction
            try {
                try (java.sql.Statement s = c.createStatement()) {
                    s.execute("SET LOCAL statement_timeout = " + limit.toMillis());
                }
                try (PreparedStatement s = c.prepareStatement("SELECT subscription_id, count(*) FROM " + table
                        + " WHERE subscription_id = ANY (?) GROUP BY subscription_id")) {
                    s.setArray(1, c.createArrayOf("text", subscriptionIds.toArray()));
                    try (ResultSet rs = s.executeQuery()) {
                        while (rs.next()) {
                            counts.put(rs.getString(1), rs.getLong(2));
                        }
                    }
                }
            } finally {
                c.rollback();
                c.setAutoCommit(autoCommit);
            }
            return counts;
        } catch (SQLException | RuntimeException e) {
            LOG.debugf("durable queues not counted within %s: %s", limit, e.getMessage());
            return null;
        }
    }

    /**
     * New lanes' first look ({@link Dispatcher}): which of these subscriptions' queues hold rows,
     * and the endpoint of each one's recorded 410 ({@link #gone}), in one round trip: asked
     * apart, the two doubled the state database's round trips of a drain that makes lanes.
     */
    public FirstLook firstLook(java.util.Collection<String> subscriptionIds) throws SQLException {
        Set<String> withRows = new TreeSet<>();
        Map<String, String> gone = new java.util.HashMap<>();
        if (subscriptionIds.isEmpty()) {
            return new FirstLook(withRows, gone);
        }
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("SELECT s, EXISTS (SELECT 1 FROM " + table
                     + " WHERE subscription_id = s), (SELECT endpoint FROM " + goneTable + " WHERE subscription_id = s)"
                     + " FROM unnest(?::text[]) s")) {
            s.setArray(1, c.createArrayOf("text", subscriptionIds.toArray()));
            try (ResultSet rs = s.executeQuery()) {
                while (rs.next()) {
                    if (rs.getBoolean(2)) {
                        withRows.add(rs.getString(1));
                    }
                    if (rs.getString(3) != null) {
                        gone.put(rs.getString(1), rs.getString(3));
                    }
                }
            }
        }
        return new FirstLook(withRows, gone);
    }

    /** {@link #firstLook}: the subscriptions whose queues hold rows, and the recorded 410s' endpoints by subscription. */
    public record FirstLook(Set<String> withRows, Map<String, String> gone) {
    }

    /**
     * Marks the start of this run's writes (an instance starting or taking over, fenced from the one
     * before): rows up to the queues' newest id now were written before; see {@link #writtenBefore}.
     * It records the run with the position its stream resumes from ({@link #resumesFrom}, set
     * before), and keeps the positions of the runs since the one that wrote the oldest row queued
     * (of the source's history) for {@link #resendsFrom}: a resend an earlier run queued is as old
     * as its own run's position, which the checkpoint may have passed since.
     */
    public void markRun() throws SQLException {
        if (writtenBefore != Long.MAX_VALUE) {
            return; // marked by an earlier try of the same start
        }
        String runs = table.substring(0, table.length() - "parked_event".length()) + "queue_run";
        try (Connection c = dataSource.getConnection()) {
            boolean autoCommit = c.getAutoCommit();
            c.setAutoCommit(false);
            try {
                // not fenced: the lock's session ending between the take and here failed the start as a configuration
                // error (a torture seed); a record written without the lock only lowers what later runs remember from
                long newest;
                long oldest;
                try (PreparedStatement s = c.prepareStatement("SELECT coalesce(max(id), 0),"
                        + " (SELECT min(id) FROM " + table + " WHERE id > ?) FROM " + table)) {
                    s.setLong(1, earlierHistoryUpTo);
                    try (ResultSet rs = s.executeQuery()) {
                        rs.next();
                        newest = rs.getLong(1);
                        oldest = rs.getObject(2) == null ? newest + 1 : rs.getLong(2);
                    }
                }
                // the run that wrote the oldest row: the latest to start at or before it
                long writer = 0;
                try (PreparedStatement s = c.prepareStatement("SELECT max(first_id) FROM " + runs + " WHERE first_id <= ?")) {
                    s.setLong(1, oldest);
                    try (ResultSet rs = s.executeQuery()) {
                        rs.next();
                        writer = rs.getLong(1); // 0 when none
                    }
                }
                // the runs before it wrote nothing left, and a run whose first id is past the newest row left none
                try (PreparedStatement s = c.prepareStatement("DELETE FROM " + runs + " WHERE first_id < ? OR first_id > ?")) {
                    s.setLong(1, writer);
                    s.setLong(2, newest + 1);
                    s.executeUpdate();
                }
                List<long[]> before = new ArrayList<>();
                try (PreparedStatement s = c.prepareStatement("SELECT first_id, resumed_from FROM " + runs
                        + " WHERE first_id <= ? ORDER BY first_id")) {
                    s.setLong(1, newest); // not a run of the same first id as this one: it left nothing either
                    try (ResultSet rs = s.executeQuery()) {
                        while (rs.next()) {
                            before.add(new long[] {rs.getLong(1), rs.getLong(2)});
                        }
                    }
                }
                try (PreparedStatement s = c.prepareStatement("INSERT INTO " + runs + " (first_id, resumed_from) VALUES (?, ?)"
                        + " ON CONFLICT (first_id) DO UPDATE SET resumed_from = EXCLUDED.resumed_from")) {
                    // the same first id: the run before wrote nothing that is left
                    s.setLong(1, newest + 1);
                    s.setLong(2, resumedFrom == -1 ? 0 : resumedFrom);
                    s.executeUpdate();
                }
                c.commit();
                c.setAutoCommit(autoCommit);
                earlierRuns = EarlierRuns.of(before, writer == 0 && oldest <= newest);
                writtenBefore = newest;
            } catch (SQLException | RuntimeException e) {
                io.walhook.config.DurableWrite.rollBack(c, autoCommit, e);
                throw e;
            }
        }
    }

    /** The position the stream resumes from in this run (unsigned; 0 when unknown), set before it starts. */
    public void resumesFrom(long lsn) {
        resumedFrom = lsn;
    }

    /**
     * The earliest position a change sent again and queued after row {@code rowId} (written before
     * this run) can have committed at (unsigned; 0 when unknown): that of this run, or of a run
     * between the row's and this one, if earlier ({@link #markRun}). A row committed before it
     * precedes every resend queued behind it. -1 (no row written before counts) after a history
     * left in this run.
     */
    public long resendsFrom(long rowId) {
        long run = resumedFrom;
        if (run == -1) {
            return -1;
        }
        long earlier = earlierRuns.after(rowId);
        return Long.compareUnsigned(run, earlier) <= 0 ? run : earlier;
    }

    /**
     * The runs recorded before this one since the one that wrote the oldest row queued, as
     * {@link #markRun} found them: their first row ids, ascending, and for each the earliest
     * position of it and every run after it (unsigned). Rows below {@code unrecordedBelow} were
     * written by runs not recorded (a walhook before runs were), of any position.
     */
    private record EarlierRuns(long[] firstIds, long[] earliestFrom, long unrecordedBelow) {

        static final EarlierRuns NONE = new EarlierRuns(new long[0], new long[0], 0);

        static EarlierRuns of(List<long[]> runs, boolean oldestUnrecorded) {
            long[] firstIds = new long[runs.size()];
            long[] earliest = new long[runs.size()];
            long least = -1;
            for (int i = runs.size() - 1; i >= 0; i--) {
                firstIds[i] = runs.get(i)[0];
                if (Long.compareUnsigned(runs.get(i)[1], least) < 0) {
                    least = runs.get(i)[1];
                }
                earliest[i] = least;
            }
            long unrecordedBelow = !oldestUnrecorded ? 0 : firstIds.length > 0 ? firstIds[0] : Long.MAX_VALUE;
            return new EarlierRuns(firstIds, earliest, unrecordedBelow);
        }

        /** The earliest position of the runs that began after row {@code rowId} was written (-1: none). */
        long after(long rowId) {
            if (rowId < unrecordedBelow) {
                return 0;
            }
            int at = java.util.Arrays.binarySearch(firstIds, rowId + 1);
            int first = at >= 0 ? at : -at - 1; // the first run whose first id is past the row
            return first < firstIds.length ? earliestFrom[first] : -1;
        }
    }

    /**
     * The newest row id queued in a history before the source's (a checkpoint of it replaced after a
     * failover; 0: none), set before the stream starts: none is taken for a newer change of its row.
     */
    public void earlierHistoryUpTo(long id) {
        earlierHistoryUpTo = id;
    }

    /** See {@link #earlierHistoryUpTo(long)}. */
    public long earlierHistoryUpTo() {
        return earlierHistoryUpTo;
    }

    /** The newest row id written before this run ({@link #markRun}); every id until it is marked. */
    public long writtenBefore() {
        return writtenBefore;
    }

    /**
     * Subscriptions (by id) with rows in their queue: their lanes start at once, to deliver them. One
     * probe of the queue's index per subscription found (a loose index scan), not a read of every
     * row: a queue of millions takes milliseconds, well within the session's limit.
     */
    public Set<String> subscriptionsWithParkedEvents() throws SQLException {
        Set<String> ids = new TreeSet<>();
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("WITH RECURSIVE found (id) AS ("
                     + "(SELECT subscription_id FROM " + table + " ORDER BY subscription_id LIMIT 1)"
                     + " UNION ALL SELECT (SELECT subscription_id FROM " + table + " WHERE subscription_id > found.id"
                     + " ORDER BY subscription_id LIMIT 1) FROM found WHERE found.id IS NOT NULL)"
                     + " SELECT id FROM found WHERE id IS NOT NULL");
             ResultSet rs = s.executeQuery()) {
            while (rs.next()) {
                ids.add(rs.getString(1));
            }
        }
        return ids;
    }
}
