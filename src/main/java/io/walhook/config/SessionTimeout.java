package io.walhook.config;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import javax.sql.DataSource;

import org.jboss.logging.Logger;
import org.postgresql.PGConnection;

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

    /** How often the server is asked whether the session of a statement without a limit is still there. */
    static final Duration WATCH_EVERY = Duration.ofSeconds(10);

    private static final Logger LOG = Logger.getLogger(SessionTimeout.class);

    /** A session's start as pg_stat_activity has it, in microseconds: the same whatever the sessions' time zones. */
    private static final String STARTED = "(extract(epoch FROM backend_start) * 1000000)::bigint";

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
     * of them asking whether the connection is still there. A question that fails, fails through
     * the connection as any statement does, so a pool discards a connection that did not answer
     * (closing it from here would not give its place back to the pool).
     *
     * <p>While the work waits, the server is asked every {@link #WATCH_EVERY} on a connection of
     * {@code watcher} (another pool than {@code c}'s, where that one is small: a failover breaks
     * every connection of a pool at once) whether {@code c}'s session is still there. One a failover
     * left half-open is not (the new server never had it; the old one ended it once it found its
     * client gone): {@code c}'s socket is closed, and the work fails through the connection rather
     * than wait forever. A server that cannot be asked (a partition, no connection free) is not taken
     * for one without the session.
     */
    public static <T> T unlimited(DataSource watcher, Connection c, Work<T> work) throws SQLException {
        int before = c.getNetworkTimeout();
        c.setNetworkTimeout(Runnable::run, ANSWER_SECONDS * 1000);
        try {
            int pid;
            Long started;
            // the server's pid, not the one the connection was told (a pooler in between tells another)
            try (Statement s = c.createStatement(); ResultSet r = s.executeQuery("SELECT set_config('statement_timeout',"
                    + " '0', false), pg_backend_pid(), (SELECT " + STARTED + " FROM pg_catalog.pg_stat_activity"
                    + " WHERE pid = pg_backend_pid())")) {
                r.next();
                pid = r.getInt(2);
                started = r.getObject(3, Long.class);
            }
            c.setNetworkTimeout(Runnable::run, 0);
            AtomicBoolean over = new AtomicBoolean();
            ScheduledFuture<?> watch = Watch.EXECUTOR.scheduleWithFixedDelay(() -> {
                if (gone(watcher, pid, started)) {
                    synchronized (over) { // never once the work is over: the connection may be another's by then
                        if (!over.get()) {
                            LOG.warnf("the database no longer has session %d, whose statement walhook waits for (a"
                                    + " failover left its connection half-open): closing it", pid);
                            abort(c);
                        }
                    }
                }
            }, WATCH_EVERY.toMillis(), WATCH_EVERY.toMillis(), TimeUnit.MILLISECONDS);
            try {
                return work.run(c);
            } finally {
                synchronized (over) {
                    over.set(true);
                }
                watch.cancel(false);
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

    /** Whether the server says the session of {@code pid} started at {@code started} is gone (not when it cannot say). */
    private static boolean gone(DataSource watcher, int pid, Long started) {
        if (started == null) {
            return false;
        }
        try (Connection w = watcher.getConnection()) {
            int before = w.getNetworkTimeout();
            w.setNetworkTimeout(Runnable::run, ANSWER_SECONDS * 1000);
            try (PreparedStatement s = w.prepareStatement("SELECT 1 FROM pg_catalog.pg_stat_activity WHERE pid = ?"
                    + " AND " + STARTED + " = ?")) {
                s.setInt(1, pid);
                s.setLong(2, started);
                try (ResultSet r = s.executeQuery()) {
                    return !r.next();
                }
            } finally {
                answerable(w, before); // a pooled connection goes back as it came (its pool does not put this back)
            }
        } catch (SQLException | RuntimeException e) {
            LOG.debugf("asking after session %d: %s", pid, e.getMessage());
            return false;
        }
    }

    /** Closes the socket under {@code c} (its pool's wrapper, if any, learns of it from the work's failure). */
    private static void abort(Connection c) {
        try {
            ((Connection) c.unwrap(PGConnection.class)).abort(Runnable::run);
        } catch (SQLException | RuntimeException e) {
            LOG.debugf("closing a session's connection: %s", e.getMessage());
        }
    }

    /** The thread that watches unlimited work, made on first use; it sleeps while there is none. */
    private static final class Watch {
        static final ScheduledThreadPoolExecutor EXECUTOR = new ScheduledThreadPoolExecutor(1, r -> {
            Thread t = new Thread(r, "walhook-session-watch");
            t.setDaemon(true);
            return t;
        });

        static {
            EXECUTOR.setRemoveOnCancelPolicy(true);
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
