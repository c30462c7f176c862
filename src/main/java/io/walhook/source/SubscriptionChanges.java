package io.walhook.source;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.Properties;

import org.jboss.logging.Logger;
import org.postgresql.PGConnection;

import io.walhook.routing.SubscriptionStore;

/**
 * What wakes the subscription poller: a session of its own that {@code LISTEN}s on
 * {@link SubscriptionStore#CHANNEL}, which every instance's API writes notify. A change made on
 * any instance is picked up as it commits, and the poller need not query the table twice a
 * second to notice one. Without the session (the server away, the connection broken) the wait is
 * the whole timeout: the poller's own round finds the change, and the session is opened again.
 * Used by one thread.
 */
public final class SubscriptionChanges implements AutoCloseable {

    private static final Logger LOG = Logger.getLogger(SubscriptionChanges.class);

    private final String jdbcUrl;
    private final Properties properties;
    private Connection connection;
    private String lastProblem;

    public SubscriptionChanges(String jdbcUrl, String user, String password) {
        this.jdbcUrl = jdbcUrl;
        this.properties = ActiveLock.sessionProperties(user, password, "walhook-listen");
    }

    /** Waits until a subscription was written (true) or {@code timeout} passed (false). */
    public boolean await(Duration timeout) throws InterruptedException {
        try {
            if (connection == null) {
                connection = DriverManager.getConnection(jdbcUrl, properties);
                try (Statement s = connection.createStatement()) {
                    s.execute("LISTEN " + SubscriptionStore.CHANNEL);
                }
                lastProblem = null;
            }
            org.postgresql.PGNotification[] notes = connection.unwrap(PGConnection.class)
                    .getNotifications((int) Math.max(1, timeout.toMillis()));
            return notes != null && notes.length > 0;
        } catch (SQLException e) {
            if (!String.valueOf(e.getMessage()).equals(lastProblem)) {
                LOG.debugf("listening for subscription changes: %s; polling meanwhile", e.getMessage());
                lastProblem = String.valueOf(e.getMessage());
            }
            close();
            Thread.sleep(timeout.toMillis());
            return false;
        }
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
