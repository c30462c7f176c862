package io.walhook.source;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Properties;

import org.jboss.logging.Logger;

/**
 * One active walhook per slot: a session-level PostgreSQL advisory lock, keyed by the slot name,
 * held on a connection of its own for as long as the instance is active. The server releases it
 * when that session ends, a crash or {@code kill -9} included, so a standby polling
 * {@link #tryAcquire()} takes over within its poll interval.
 */
public final class ActiveLock implements AutoCloseable {

    private static final Logger LOG = Logger.getLogger(ActiveLock.class);
    /** The lock's first key, 'walh': apart from other applications' advisory locks. */
    static final int NAMESPACE = 0x77616c68;

    private final String jdbcUrl;
    private final Properties properties;
    private final String slot;
    private Connection connection;
    private boolean held;

    public ActiveLock(String jdbcUrl, String user, String password, String slot) {
        this.jdbcUrl = jdbcUrl;
        this.properties = sessionProperties(user, password, "walhook-lock");
        this.slot = slot;
    }

    /** A plain session of walhook's own (not the pool's), named for {@code pg_stat_activity}. */
    static Properties sessionProperties(String user, String password, String applicationName) {
        Properties properties = new Properties();
        properties.setProperty("user", user);
        if (password != null) {
            properties.setProperty("password", password);
        }
        properties.setProperty("ApplicationName", applicationName);
        properties.setProperty("tcpKeepAlive", "true");
        return properties;
    }

    /** Takes the lock when no other session holds it; true while this instance holds it. */
    public synchronized boolean tryAcquire() throws SQLException {
        if (held) {
            return true;
        }
        if (connection == null || connection.isClosed()) {
            connection = DriverManager.getConnection(jdbcUrl, properties);
        }
        try (PreparedStatement s = connection.prepareStatement("SELECT pg_try_advisory_lock(?, hashtext(?))")) {
            s.setInt(1, NAMESPACE);
            s.setString(2, slot);
            try (ResultSet rs = s.executeQuery()) {
                rs.next();
                held = rs.getBoolean(1);
            }
        }
        return held;
    }

    /** Whether the session holding the lock is still there (a lost session has lost the lock). */
    public synchronized boolean stillHeld() {
        if (!held) {
            return false;
        }
        try {
            if (connection.isValid(5)) {
                return true;
            }
        } catch (SQLException e) {
            LOG.debugf("checking the lock session: %s", e.getMessage());
        }
        // the session is gone: the next tryAcquire opens a new one instead of failing on the dead one
        close();
        return false;
    }

    /** Releases the lock by ending its session. */
    @Override
    public synchronized void close() {
        held = false;
        if (connection != null) {
            try {
                connection.close();
            } catch (SQLException e) {
                LOG.debugf("closing the lock session: %s", e.getMessage());
            }
            connection = null;
        }
    }
}
