package io.walhook.config;

import java.sql.Connection;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;

/**
 * How long walhook's sessions wait for a server that says nothing. A failover or a network
 * partition can leave a connection half-open: its server is gone and nothing tells the client (no
 * FIN, no RST; what it writes is taken, or retried by TCP for a quarter of an hour). A session
 * waiting for an answer on it would wait that long, holding whatever it holds: a pooled connection,
 * the subscription registry's lock, the backfill runner. So every session but the replication
 * stream (which asks the server to answer, {@code ReplicationReader}) gives up on a statement
 * whose answer has not come within {@link #LIMIT}, and its connection is replaced.
 *
 * <p>A server that is there but slow cancels the pool's statements itself first ({@link
 * #STATEMENT_LIMIT}, its {@code statement_timeout}): a statement walhook gave up on does not
 * linger on the server, holding its locks, to take effect later. Statements that may rightly wait
 * longer run {@link #unlimited}: a schema migration, a publication's or slot's creation (which wait
 * for locks and for the transactions open at that moment), dropping a queue of any size.
 */
public final class SessionTimeout {

    /** A statement's answer silent for longer breaks its session: far more than any of walhook's own statements takes. */
    public static final Duration LIMIT = Duration.ofSeconds(30);

    /** The pool's {@code statement_timeout}: the server gives up before the session does. */
    public static final Duration STATEMENT_LIMIT = Duration.ofSeconds(25);

    /** pgjdbc's property for it, in seconds: {@link #SOCKET_TIMEOUT} = {@link #SECONDS}. */
    public static final String SOCKET_TIMEOUT = "socketTimeout";
    public static final String SECONDS = String.valueOf(LIMIT.toSeconds());

    /** How long a session asked whether it is still there may take to answer. */
    private static final int ANSWER_SECONDS = 5;

    private SessionTimeout() {
    }

    /** pgjdbc's {@code options} for the pool's sessions: the server's own limit, {@link #STATEMENT_LIMIT}. */
    public static String poolOptions() {
        return "-c statement_timeout=" + STATEMENT_LIMIT.toMillis();
    }

    /** Work on a connection that may rightly wait longer than {@link #LIMIT} for the server. */
    public interface Work<T> {
        T run(Connection c) throws SQLException;
    }

    /**
     * Runs {@code work} on {@code c} without either limit, then puts them back. Only the work goes
     * without: the statements around it are answered within {@value #ANSWER_SECONDS} s, the first
     * of them asking whether the connection is still there (one a failover left half-open would
     * otherwise keep the work waiting forever). A question that fails, fails through the connection
     * as any statement does, so a pool discards a connection that did not answer (closing it from
     * here would not give its place back to the pool).
     */
    public static <T> T unlimited(Connection c, Work<T> work) throws SQLException {
        int before = c.getNetworkTimeout();
        c.setNetworkTimeout(Runnable::run, ANSWER_SECONDS * 1000);
        try {
            try (Statement s = c.createStatement()) {
                s.execute("SET statement_timeout = 0");
            }
            c.setNetworkTimeout(Runnable::run, 0);
            try {
                return work.run(c);
            } finally {
                answerable(c, ANSWER_SECONDS * 1000);
            }
        } finally {
            try (Statement s = c.createStatement()) {
                s.execute("RESET statement_timeout"); // to the session's own: the pool's, or the server's
            } catch (SQLException closed) {
                // closed: nothing to put back
            }
            answerable(c, before);
        }
    }

    private static void answerable(Connection c, int millis) {
        try {
            c.setNetworkTimeout(Runnable::run, millis);
        } catch (SQLException closed) {
            // closed: nothing to put back
        }
    }
}
