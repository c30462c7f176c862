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
    private final String saveSql;
    private final String loadSavedSql;
    private final String resetSql;
    private final String forgetDropsSql;
    private final String renameSql;

    /** @param stateSchema a validated plain identifier */
    public CheckpointStore(DataSource dataSource, String stateSchema) {
        this.dataSource = dataSource;
        this.loadSavedSql = "SELECT end_lsn::text, system_id, timeline, earlier_history_up_to FROM " + stateSchema
                + ".checkpoint WHERE slot_name = ?";
        this.resetSql = "INSERT INTO " + stateSchema + ".checkpoint AS c (slot_name, end_lsn, system_id, timeline,"
                + " earlier_history_up_to, updated_at) VALUES (?, ?::pg_lsn, ?, ?, (SELECT coalesce(max(id), 0) FROM "
                + stateSchema + ".parked_event), now()) ON CONFLICT (slot_name) DO UPDATE SET end_lsn = excluded.end_lsn,"
                + " system_id = excluded.system_id, timeline = excluded.timeline,"
                + " earlier_history_up_to = greatest(c.earlier_history_up_to, excluded.earlier_history_up_to), updated_at = now()"
                + " RETURNING earlier_history_up_to";
        this.forgetDropsSql = "DELETE FROM " + stateSchema + ".dropped_event";
        this.renameSql = "UPDATE " + stateSchema + ".parked_event SET event_id = event_id || '~' || id"
                + " WHERE commit_lsn > ?::pg_lsn AND strpos(event_id, '~') = 0";
        this.saveSql = "INSERT INTO " + stateSchema + ".checkpoint AS c (slot_name, end_lsn, system_id, timeline, updated_at)"
                + " VALUES (?, ?::pg_lsn, ?, ?, now()) ON CONFLICT (slot_name) DO UPDATE"
                + " SET end_lsn = excluded.end_lsn, system_id = excluded.system_id, timeline = excluded.timeline,"
                + " updated_at = now() WHERE c.end_lsn < excluded.end_lsn";
    }

    /**
     * A slot's checkpoint, the server history it was read on, and the durable queues' newest row
     * of an earlier history (0: none), see {@link #leaveHistory}.
     */
    public record Saved(Lsn lsn, Timeline timeline, long earlierHistoryUpTo) {
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
                        rs.wasNull() ? Timeline.UNKNOWN : new Timeline(rs.getString(2), timeline), rs.getLong(4)));
            }
        }
    }

    /** The checkpoint's position, if one is stored. */
    public Optional<Lsn> load(String slot) throws SQLException {
        // 0/0: a checkpoint of another history left without a position of the server's (leaveHistory)
        return loadSaved(slot).map(Saved::lsn).filter(Lsn::isValid);
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
     * Replaces a checkpoint of another history (saved on a server the source failed over from) with
     * {@code lsn}, of the server's, even below it; in the same transaction marks every row the
     * durable queues hold now as of the earlier history (none is taken for a newer change of its
     * row than what the stream sends from now on: their positions are not comparable), and forgets
     * the dead letters dropped through the API (the new history's changes may have their ids).
     * Those rows' changes that committed after {@code lsn} take their row id after their event id
     * ({@code <id>~<row id>}): the new history's changes from there on may have their ids, and a
     * queue holds one row of an id (appended, the new change was taken for a resend of the old
     * and acknowledged unqueued; delivered, it dropped the old row by its id).
     * Done at once, so that a crash before the activation is done leaves neither half. With no
     * position ({@link Lsn#INVALID}) the stream resumes from the slot's own: {@link #load} finds none.
     *
     * @return the durable queues' newest row id of an earlier history
     */
    public long leaveHistory(String slot, Lsn lsn, Timeline timeline) throws SQLException {
        try (Connection c = dataSource.getConnection()) {
            c.setAutoCommit(false);
            try {
                long upTo;
                try (PreparedStatement s = c.prepareStatement(resetSql)) {
                    bind(s, slot, lsn, timeline);
                    try (ResultSet rs = s.executeQuery()) {
                        rs.next();
                        upTo = rs.getLong(1);
                    }
                }
                try (Statement s = c.createStatement()) {
                    s.execute(forgetDropsSql);
                }
                try (PreparedStatement s = c.prepareStatement(renameSql)) {
                    s.setString(1, lsn.isValid() ? lsn.toString() : "0/0");
                    s.executeUpdate();
                }
                c.commit();
                return upTo;
            } catch (SQLException e) {
                try {
                    c.rollback();
                } catch (SQLException broken) {
                    e.addSuppressed(broken);
                }
                throw e;
            }
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
}
