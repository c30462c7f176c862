package io.walhook.source;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.List;
import java.util.Properties;
import java.util.Set;
import java.util.TreeSet;

import org.jboss.logging.Logger;
import org.postgresql.PGConnection;

/**
 * What wakes the subscription poller: a session of its own that {@code LISTEN}s on the channels
 * every instance's API writes notify (subscriptions, backfills). A change made on any instance is
 * picked up as it commits, and no table need be queried every round to notice one. Without the
 * session (the server away, the connection broken) the wait is the whole timeout and
 * {@link #listening()} is false: the poller then looks at the tables itself, and the session is
 * opened again. Used by one thread.
 */
public final class SubscriptionChanges implements AutoCloseable {

    private static final Logger LOG = Logger.getLogger(SubscriptionChanges.class);
    /** How long the session may hear nothing before it is asked to answer. */
    private static final Duration QUIET = Duration.ofSeconds(30);
    private static final int ANSWER_SECONDS = 5;

    private final String jdbcUrl;
    private final Properties properties;
    private final List<String> channels;
    private final long quietNanos;
    private Connection connection;
    /** When (System.nanoTime) the session was last known to be there: opened, notified, or found answering. */
    private long heardNanos;
    private String lastProblem;
    private final java.util.Map<String, Set<String>> payloads = new java.util.HashMap<>();
    private boolean opened;

    /** @param channels what to listen on: plain identifiers */
    public SubscriptionChanges(String jdbcUrl, String user, String password, List<String> channels) {
        this(jdbcUrl, user, password, channels, QUIET);
    }

    SubscriptionChanges(String jdbcUrl, String user, String password, List<String> channels, Duration quiet) {
        this.jdbcUrl = jdbcUrl;
        this.properties = ActiveLock.sessionProperties(user, password, "walhook-listen");
        this.channels = List.copyOf(channels);
        this.quietNanos = quiet.toNanos();
    }

    /**
     * Waits until something was written, or {@code timeout} passed; returns the channels notified
     * meanwhile (empty when none was). The wait that opens the session returns at once, with every
     * channel ({@link #opened()}).
     */
    public Set<String> await(Duration timeout) throws InterruptedException {
        try {
            if (connection == null) {
                connection = DriverManager.getConnection(jdbcUrl, properties);
                try (Statement s = connection.createStatement()) {
                    for (String channel : channels) {
                        s.execute("LISTEN " + channel);
                    }
                }
                lastProblem = null;
                heardNanos = System.nanoTime();
                // what was written before the session listened (while it was away, or before it first opened) was
                // told to no one: every channel is taken as notified, for every subscription
                opened = true;
                payloads.clear();
                return new TreeSet<>(channels);
            }
            opened = false;
            org.postgresql.PGNotification[] notes = connection.unwrap(PGConnection.class)
                    .getNotifications((int) Math.max(1, timeout.toMillis()));
            Set<String> notified = new TreeSet<>();
            payloads.clear();
            if (notes != null) {
                for (org.postgresql.PGNotification note : notes) {
                    notified.add(note.getName());
                    payloads.computeIfAbsent(note.getName(), n -> new TreeSet<>()).add(note.getParameter());
                }
            }
            if (!notified.isEmpty()) {
                heardNanos = System.nanoTime();
            } else if (System.nanoTime() - heardNanos >= quietNanos) {
                // quiet for long: a session left half-open by a failover hears nothing, and says nothing of it
                if (!connection.isValid(ANSWER_SECONDS)) {
                    throw new SQLException("the listening session did not answer within " + ANSWER_SECONDS + " s");
                }
                heardNanos = System.nanoTime();
            }
            return notified;
        } catch (SQLException e) {
            if (!String.valueOf(e.getMessage()).equals(lastProblem)) {
                LOG.debugf("listening for subscription changes: %s; polling meanwhile", e.getMessage());
                lastProblem = String.valueOf(e.getMessage());
            }
            close();
            payloads.clear();
            opened = false;
            Thread.sleep(timeout.toMillis());
            return Set.of();
        }
    }

    /**
     * Whether the last {@link #await} opened the session: it then returned every channel, without
     * payloads, for what was written before it listened. What a payload names (a subscription whose
     * dead letters were dropped) is then unknown: every one is to be taken as named.
     */
    public boolean opened() {
        return opened;
    }

    /** The payloads notified on {@code channel} in the last {@link #await} (empty strings for none). */
    public Set<String> payloads(String channel) {
        return payloads.getOrDefault(channel, Set.of());
    }

    /**
     * Whether the session listens now. While it does, writes are announced as they commit, but for
     * one whose notification failed after it (the writer logs it): a slower round finds those.
     */
    public boolean listening() {
        return connection != null;
    }

    @Override
    public void close() {
        if (connection != null) {
            try {
                connection.close();
            } catch (SQLException e) {
                // gone already
            }
            connection = null;
        }
    }
}
