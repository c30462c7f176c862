package io.walhook.routing;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;

import javax.sql.DataSource;

import org.jboss.logging.Logger;

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

    /** Notified (from the writing session) whenever a subscription is written; instances listen to pick changes up. */
    public static final String CHANNEL = "walhook_subscriptions";

    /** @param stateSchema a validated plain identifier */
    public SubscriptionStore(DataSource dataSource, String stateSchema) {
        this.dataSource = dataSource;
        this.table = stateSchema + ".subscription";
    }

    /** Changes whenever a subscription is created, changed, paused, resumed or deleted. */
    public String version() throws SQLException {
        try (Connection c = dataSource.getConnection(); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT count(*) || ':' || coalesce(md5(string_agg(id::text || updated_at::text"
                     + " || paused::text, ',' ORDER BY id)), '') FROM " + table)) {
            rs.next();
            return rs.getString(1);
        }
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
        List<Stored> subscriptions = new ArrayList<>();
        try (Connection c = dataSource.getConnection(); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT id, name, body::text, paused, updated_at::text FROM " + table
                     + " ORDER BY created_at, id")) {
            while (rs.next()) {
                Stored parsed = parsed(rs, known);
                if (parsed != null) {
                    subscriptions.add(parsed);
                }
            }
        }
        return subscriptions;
    }

    public java.util.Optional<Stored> find(UUID id) throws SQLException {
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("SELECT id, name, body::text, paused, updated_at::text FROM "
                     + table + " WHERE id = ?")) {
            s.setObject(1, id);
            try (ResultSet rs = s.executeQuery()) {
                return rs.next() ? java.util.Optional.ofNullable(parsed(rs, java.util.Map.of())) : java.util.Optional.empty();
            }
        }
    }

    /** The row at the result set's cursor; null (and logged) when it does not parse. */
    private static Stored parsed(ResultSet rs, java.util.Map<UUID, Stored> known) throws SQLException {
        UUID id = rs.getObject(1, UUID.class);
        String written = rs.getString(5);
        boolean paused = rs.getBoolean(4);
        Stored before = known.get(id);
        if (before != null && before.written().equals(written)) {
            return new Stored(id, before.subscription(), paused, written);
        }
        try {
            return new Stored(id, SubscriptionJson.parse(JSON.readTree(rs.getString(3))).withId(id.toString()), paused,
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

    /** Stores a validated subscription body; returns its id. */
    public UUID insert(JsonNode body) throws SQLException {
        Subscription parsed = SubscriptionJson.parse(body);
        UUID id = UUID.randomUUID();
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("INSERT INTO " + table + " (id, name, body) VALUES (?, ?, ?::jsonb)")) {
            s.setObject(1, id);
            s.setString(2, parsed.name());
            s.setString(3, body.toString());
            s.executeUpdate();
            changed(c);
        }
        return id;
    }

    /** Replaces a subscription's body; false when there is no such subscription. */
    public boolean replace(UUID id, JsonNode body) throws SQLException {
        Subscription parsed = SubscriptionJson.parse(body);
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("UPDATE " + table + " SET name = ?, body = ?::jsonb,"
                     + " updated_at = clock_timestamp() WHERE id = ?")) {
            s.setString(1, parsed.name());
            s.setString(2, body.toString());
            s.setObject(3, id);
            return changed(c, s.executeUpdate());
        }
    }

    /** Pauses or resumes delivery to a subscription; false when there is no such subscription. */
    public boolean setPaused(UUID id, boolean paused) throws SQLException {
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("UPDATE " + table + " SET paused = ?, updated_at = clock_timestamp()"
                     + " WHERE id = ?")) {
            s.setBoolean(1, paused);
            s.setObject(2, id);
            return changed(c, s.executeUpdate());
        }
    }

    public boolean delete(UUID id) throws SQLException {
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement("DELETE FROM " + table + " WHERE id = ?")) {
            s.setObject(1, id);
            return changed(c, s.executeUpdate());
        }
    }

    /** Whether one row changed; if so, every listening instance is told. */
    private static boolean changed(Connection c, int rows) throws SQLException {
        if (rows == 1) {
            changed(c);
        }
        return rows == 1;
    }

    /** The write is done (committed): a failed notification costs only a wait for the pollers' next round. */
    private static void changed(Connection c) {
        try (Statement s = c.createStatement()) {
            s.execute("SELECT pg_notify('" + CHANNEL + "', '')");
        } catch (SQLException e) {
            LOG.warnf("subscription written; telling the other instances failed (they see it within 2 s): %s",
                    e.getMessage());
        }
    }
}
