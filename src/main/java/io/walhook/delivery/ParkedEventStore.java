package io.walhook.delivery;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;

import javax.sql.DataSource;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.walhook.pgoutput.Lsn;

/**
 * Durable parking ({@code <state schema>.parked_event}): a request a destination did not take in
 * its retry window is written here before its delivery counts as done, so the slot can advance.
 * Rows are retried oldest first, per subscription.
 */
public final class ParkedEventStore {

    private static final ObjectMapper JSON = new ObjectMapper();

    /** One parked request. */
    public record Parked(long id, String subscription, int lane, String eventId, Lsn commitLsn, String contentType,
            Map<String, String> headers, String address, byte[] body, int attempts, String lastError) {
    }

    private static final String COLUMNS = "id, subscription, lane, event_id, commit_lsn::text, content_type, headers::text,"
            + " address, body, attempts, last_error";

    private final DataSource dataSource;
    private final String table;

    /** @param stateSchema a validated plain identifier */
    public ParkedEventStore(DataSource dataSource, String stateSchema) {
        this.dataSource = dataSource;
        this.table = stateSchema + ".parked_event";
    }

    /** A request to park: {@code address} is the AMQP address it resolved to, null for webhooks. */
    public record Entry(String eventId, Lsn commitLsn, String contentType, Map<String, String> headers, String address,
            byte[] body) {
    }

    /**
     * Parks requests of one lane, in this order, in one transaction, with the attempts already made
     * at them; parking an event twice (a redelivery after a restart) keeps the first.
     */
    public void park(String subscription, int lane, List<Entry> entries, int attempts, String lastError)
            throws SQLException {
        try (Connection c = dataSource.getConnection()) {
            boolean autoCommit = c.getAutoCommit();
            c.setAutoCommit(false);
            try (PreparedStatement s = c.prepareStatement("INSERT INTO " + table + " (subscription, event_id, commit_lsn,"
                    + " content_type, headers, body, attempts, last_error, lane, address)"
                    + " VALUES (?, ?, ?::pg_lsn, ?, ?::jsonb, ?, ?, ?, ?, ?) ON CONFLICT (subscription, event_id) DO NOTHING")) {
                for (Entry entry : entries) {
                    s.setString(1, subscription);
                    s.setString(2, entry.eventId());
                    s.setString(3, entry.commitLsn().toString());
                    s.setString(4, entry.contentType());
                    s.setString(5, JSON.writeValueAsString(entry.headers()));
                    s.setBytes(6, entry.body());
                    s.setInt(7, attempts);
                    s.setString(8, lastError);
                    s.setInt(9, lane);
                    s.setString(10, entry.address());
                    s.addBatch();
                }
                s.executeBatch();
                c.commit();
            } catch (SQLException | JsonProcessingException | RuntimeException e) {
                c.rollback();
                throw e;
            } finally {
                c.setAutoCommit(autoCommit);
            }
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("cannot write headers as JSON", e);
        }
    }

    /**
     * The oldest parked requests of one lane of a subscription ({@code lane} of {@code lanes}: a row
     * parked by a lane that no longer exists belongs to lane {@code its lane % lanes}).
     */
    public List<Parked> oldest(String subscription, int lane, int lanes, int limit) throws SQLException {
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("SELECT " + COLUMNS + " FROM " + table
                     + " WHERE subscription = ? AND lane % ? = ? ORDER BY id LIMIT ?")) {
            s.setString(1, subscription);
            s.setInt(2, lanes);
            s.setInt(3, lane);
            s.setInt(4, limit);
            return rows(s);
        }
    }

    /** A page of a subscription's parked requests, oldest first, after the given id (0 for the first page). */
    public List<Parked> page(String subscription, long afterId, int limit) throws SQLException {
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("SELECT " + COLUMNS + " FROM " + table
                     + " WHERE subscription = ? AND id > ? ORDER BY id LIMIT ?")) {
            s.setString(1, subscription);
            s.setLong(2, afterId);
            s.setInt(3, limit);
            return rows(s);
        }
    }

    private static List<Parked> rows(PreparedStatement query) throws SQLException {
        List<Parked> parked = new ArrayList<>();
        try (ResultSet rs = query.executeQuery()) {
            while (rs.next()) {
                parked.add(new Parked(rs.getLong(1), rs.getString(2), rs.getInt(3), rs.getString(4),
                        Lsn.parse(rs.getString(5)), rs.getString(6),
                        JSON.readValue(rs.getString(7), new TypeReference<LinkedHashMap<String, String>>() { }),
                        rs.getString(8), rs.getBytes(9), rs.getInt(10), rs.getString(11)));
            }
        } catch (JsonProcessingException e) {
            throw new IllegalStateException("a parked event's headers are not JSON", e);
        }
        return parked;
    }

    /** Which of these ids are parked requests of the subscription. */
    public Set<Long> existing(String subscription, List<Long> ids) throws SQLException {
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("SELECT id FROM " + table + " WHERE subscription = ? AND id = ANY (?)")) {
            s.setString(1, subscription);
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

    /** Forgets these parked requests of the subscription (none when {@code ids} is empty); returns how many. */
    public int delete(String subscription, List<Long> ids) throws SQLException {
        if (ids.isEmpty()) {
            return 0;
        }
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("DELETE FROM " + table + " WHERE subscription = ? AND id = ANY (?)")) {
            s.setString(1, subscription);
            s.setArray(2, c.createArrayOf("bigint", ids.toArray()));
            return s.executeUpdate();
        }
    }

    /** Forgets every parked request of the subscription; returns how many. */
    public int deleteAll(String subscription) throws SQLException {
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("DELETE FROM " + table + " WHERE subscription = ?")) {
            s.setString(1, subscription);
            return s.executeUpdate();
        }
    }

    /** These parked requests went through: they leave the table. */
    public void delivered(List<Long> ids) throws SQLException {
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("DELETE FROM " + table + " WHERE id = ANY (?)")) {
            s.setArray(1, c.createArrayOf("bigint", ids.toArray()));
            s.executeUpdate();
        }
    }

    /** Another failed attempt at these parked requests. */
    public void failed(List<Long> ids, String error) throws SQLException {
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("UPDATE " + table
                     + " SET attempts = attempts + 1, last_error = ? WHERE id = ANY (?)")) {
            s.setString(1, error);
            s.setArray(2, c.createArrayOf("bigint", ids.toArray()));
            s.executeUpdate();
        }
    }


    /** Parked requests of one lane ({@code lane} of {@code lanes}, as in {@link #oldest}). */
    public long count(String subscription, int lane, int lanes) throws SQLException {
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("SELECT count(*) FROM " + table
                     + " WHERE subscription = ? AND lane % ? = ?")) {
            s.setString(1, subscription);
            s.setInt(2, lanes);
            s.setInt(3, lane);
            try (ResultSet rs = s.executeQuery()) {
                rs.next();
                return rs.getLong(1);
            }
        }
    }

    /** Subscriptions with parked requests: their lanes start in parking mode. */
    public Set<String> subscriptionsWithParkedEvents() throws SQLException {
        Set<String> names = new TreeSet<>();
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("SELECT DISTINCT subscription FROM " + table);
             ResultSet rs = s.executeQuery()) {
            while (rs.next()) {
                names.add(rs.getString(1));
            }
        }
        return names;
    }
}
