package io.walhook.config;

import java.sql.Connection;
import java.sql.SQLException;
import java.time.Duration;

/**
 * How long walhook's sessions wait for a server that says nothing. A failover or a network
 * partition can leave a connection half-open: its server is gone and nothing tells the client (no
 * FIN, no RST; what it writes is taken, or retried by TCP for a quarter of an hour). A session
 * waiting for an answer on it would wait that long, holding whatever it holds: a pooled connection,
 * the subscription registry's lock, the backfill runner. So every session but the replication
 * stream (which asks the server to answer, {@code ReplicationReader}) gives up on a statement
 * whose answer has not begun within {@link #LIMIT}, and its connection is replaced.
 *
 * <p>Statements that may rightly wait longer run {@link #unlimited}: a schema migration, a slot's
 * creation (which waits for the transactions open at that moment), dropping a queue of any size.
 */
public final class SessionTimeout {

    /** A statement's answer silent for longer breaks its session: far more than any of walhook's own statements takes. */
    public static final Duration LIMIT = Duration.ofSeconds(30);

    /** pgjdbc's property for it, in seconds: {@link #SOCKET_TIMEOUT} = {@link #SECONDS}. */
    public static final String SOCKET_TIMEOUT = "socketTimeout";
    public static final String SECONDS = String.valueOf(LIMIT.toSeconds());

    private SessionTimeout() {
    }

    /** {@link #SOCKET_TIMEOUT}'s value for a session whose statements the server may run for up to {@code statementTimeout}. */
    public static String beyond(Duration statementTimeout) {
        return String.valueOf(statementTimeout.plus(LIMIT).toSeconds());
    }

    /** Work on a connection that may rightly wait longer than {@link #LIMIT} for the server. */
    public interface Work<T> {
        T run(Connection c) throws SQLException;
    }

    /** Runs {@code work} on {@code c} without the limit, then puts the connection's limit back. */
    public static <T> T unlimited(Connection c, Work<T> work) throws SQLException {
        int before = c.getNetworkTimeout();
        c.setNetworkTimeout(Runnable::run, 0);
        try {
            return work.run(c);
        } finally {
            try {
                c.setNetworkTimeout(Runnable::run, before);
            } catch (SQLException closed) {
                // a closed connection cannot wait on anything: nothing to put back
            }
        }
    }
}
