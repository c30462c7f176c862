package io.walhook.config;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;

/**
 * A write to walhook's own state that an answer acknowledges (a subscription created, edited,
 * paused or deleted through the API, a backfill started or moved on): one transaction whose
 * commit waits for its WAL to reach the disk, so that a crash just after the answer does not take
 * it back. With {@code synchronous_commit = off} (the server's or role's default) a commit is
 * acknowledged before that: such a write commits with {@code local} instead. Any other setting
 * already flushes, and is kept (a stronger one, waiting for synchronous standbys, is not weakened;
 * {@code on} where the default is {@code local} would wait for standbys that may be down). Events
 * written to a durable queue are such writes too: the slot's position passes them once written.
 * Writes that may be repeated after a crash (progress, positions) keep the default.
 */
public final class DurableWrite {

    /** The statements of the write, on the transaction's connection. */
    public interface Work<T> {
        T run(Connection c) throws SQLException;
    }

    private DurableWrite() {
    }

    public static <T> T run(Connection c, Work<T> work) throws SQLException {
        boolean autoCommit = c.getAutoCommit();
        c.setAutoCommit(false);
        T result;
        try {
            durable(c);
            result = work.run(c);
            c.commit();
        } catch (Throwable e) {
            rollBack(c, autoCommit, e); // not committed by the autocommit restored after
            throw e;
        }
        c.setAutoCommit(autoCommit);
        return result;
    }

    /**
     * Rolls back the transaction {@code failure} ended and restores the autocommit mode. On a broken
     * connection both fail too: what broke it (a timeout, say) stays what the caller hears of.
     */
    public static void rollBack(Connection c, boolean autoCommit, Throwable failure) {
        try {
            c.rollback();
            c.setAutoCommit(autoCommit);
        } catch (SQLException broken) {
            failure.addSuppressed(broken);
        }
    }

    /** Makes the transaction open on {@code c} commit durably (at least flushed locally). */
    public static void durable(Connection c) throws SQLException {
        try (Statement s = c.createStatement()) {
            s.execute("SELECT pg_catalog.set_config('synchronous_commit', 'local', true)"
                    + " WHERE pg_catalog.current_setting('synchronous_commit') = 'off'");
        }
    }
}
