package io.walhook.checkpoint;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Optional;

import javax.sql.DataSource;

import io.walhook.pgoutput.Lsn;

/**
 * The acknowledged position of each slot, in {@code <state schema>.checkpoint}: written before
 * the position is reported to the server as flush LSN, read on start to resume and to skip what
 * was already delivered. Positions only move forward.
 */
public final class CheckpointStore {

    private final DataSource dataSource;
    private final String loadSql;
    private final String saveSql;
    private final String loadSavedSql;

    /** @param stateSchema a validated plain identifier */
    public CheckpointStore(DataSource dataSource, String stateSchema) {
        this.dataSource = dataSource;
        this.loadSql = "SELECT end_lsn::text FROM " + stateSchema + ".checkpoint WHERE slot_name = ?";
        this.loadSavedSql = "SELECT end_lsn::text, system_id, timeline FROM " + stateSchema + ".checkpoint WHERE slot_name = ?";
        this.saveSql = "INSERT INTO " + stateSchema + ".checkpoint AS c (slot_name, end_lsn, system_id, timeline, updated_at)"
                + " VALUES (?, ?::pg_lsn, ?, ?, now()) ON CONFLICT (slot_name) DO UPDATE"
                + " SET end_lsn = excluded.end_lsn, system_id = excluded.system_id, timeline = excluded.timeline,"
                + " updated_at = now() WHERE c.end_lsn < excluded.end_lsn";
    }

    /** A slot's checkpoint and the server history it was read on. */
    public record Saved(Lsn lsn, Timeline timeline) {
    }

    /** The checkpoint with the history it was read on ({@link Timeline#UNKNOWN} for one saved before walhook kept it). */
    public Optional<Saved> loadSaved(String slot) throws SQLException {
        try (Connection c = dataSource.getConnection(); PreparedStatement s = c.prepareStatement(loadSavedSql)) {
            s.setString(1, slot);
            try (ResultSet rs = s.executeQuery()) {
                if (!rs.next()) {
                    return Optional.empty();
                }
                long timeline = rs.getLong(3);
                return Optional.of(new Saved(Lsn.parse(rs.getString(1)),
                        rs.wasNull() ? Timeline.UNKNOWN : new Timeline(rs.getString(2), timeline)));
            }
        }
    }

    public Optional<Lsn> load(String slot) throws SQLException {
        try (Connection c = dataSource.getConnection(); PreparedStatement s = c.prepareStatement(loadSql)) {
            s.setString(1, slot);
            try (ResultSet rs = s.executeQuery()) {
                return rs.next() ? Optional.of(Lsn.parse(rs.getString(1))) : Optional.empty();
            }
        }
    }

    /** Persists {@code lsn}, read on {@code timeline}, unless a later position is already stored. */
    public void save(String slot, Lsn lsn, Timeline timeline) throws SQLException {
        try (Connection c = dataSource.getConnection()) {
            c.setAutoCommit(false);
            try {
                try (Statement s = c.createStatement()) {
                    // the replication stream waits for this write: a row another session holds (an operator's
                    // transaction) makes it fail soon, and the stream goes on, rather than wait with it
                    s.execute("SET LOCAL lock_timeout = '" + LOCK_TIMEOUT.toMillis() + "ms'");
                }
                try (PreparedStatement s = c.prepareStatement(saveSql)) {
                    bind(s, slot, lsn, timeline);
                    s.executeUpdate();
                }
                c.commit();
            } catch (SQLException e) {
                try {
                    c.rollback();
                    c.setAutoCommit(true);
                } catch (SQLException broken) {
                    e.addSuppressed(broken);
                }
                throw e;
            }
            c.setAutoCommit(true);
        }
    }

    /** How long a save waits for a lock on its row. */
    public static final java.time.Duration LOCK_TIMEOUT = java.time.Duration.ofSeconds(1);

    /**
     * Stores {@code lsn} even below the stored position: one of another history (saved on a server
     * the source failed over from) is replaced by the new server's.
     */
    public void reset(String slot, Lsn lsn, Timeline timeline) throws SQLException {
        try (Connection c = dataSource.getConnection(); PreparedStatement s = c.prepareStatement(
                saveSql.substring(0, saveSql.indexOf(" WHERE c.end_lsn"))) ) {
            bind(s, slot, lsn, timeline);
            s.executeUpdate();
        }
    }

    private static void bind(PreparedStatement s, String slot, Lsn lsn, Timeline timeline) throws SQLException {
        s.setString(1, slot);
        s.setString(2, lsn.toString());
        s.setString(3, timeline.known() ? timeline.systemId() : null);
        if (timeline.known()) {
            s.setLong(4, timeline.id());
        } else {
            s.setNull(4, java.sql.Types.BIGINT);
        }
    }

    /** Forgets a slot's position (the operator starts it afresh). */
    public void delete(String slot) throws SQLException {
        try (Connection c = dataSource.getConnection();
             PreparedStatement s = c.prepareStatement(loadSql.replace("SELECT end_lsn::text FROM", "DELETE FROM"))) {
            s.setString(1, slot);
            s.executeUpdate();
        }
    }
}
