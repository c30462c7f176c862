package io.walhook.pipeline;

import java.sql.SQLException;

import org.jboss.logging.Logger;

import io.walhook.config.StartupCheck;
import io.walhook.source.SourceSetupException;

/**
 * Runs start-up steps against the database, each again while the database is restarting (shutting
 * down, starting up, a connection broken), for up to {@link StartupCheck#RESTART_PATIENCE}: an
 * operator restarting PostgreSQL does not make walhook exit as if it were misconfigured. A refused
 * connection at a step's first try is a wrong address, and stops the start at once, unless the
 * database answered an earlier step of this start: then it is a restart under way too (one begun
 * between reading the subscriptions and taking the slot's lock made walhook exit).
 */
final class StartupPatience {

    private static final Logger LOG = Logger.getLogger(StartupPatience.class);

    interface Step<T> {
        T run() throws SQLException, SourceSetupException;
    }

    private final long pauseMillis;
    /** Whether a step of this start has succeeded: the address is right. */
    private volatile boolean answered;

    StartupPatience() {
        this(1000);
    }

    StartupPatience(long pauseMillis) {
        this.pauseMillis = pauseMillis;
    }

    <T> T run(Step<T> step) throws SQLException, SourceSetupException {
        long deadline = System.nanoTime() + StartupCheck.RESTART_PATIENCE.toNanos();
        for (int attempt = 1; ; attempt++) {
            try {
                T done = step.run();
                answered = true;
                return done;
            } catch (SQLException e) {
                if (!StartupCheck.restarting(e, answered ? attempt + 1 : attempt) || System.nanoTime() - deadline > 0) {
                    throw e;
                }
                if (attempt == 1) {
                    LOG.warnf("the database went away during start-up (%s); trying again for up to %s", e.getMessage(),
                            StartupCheck.RESTART_PATIENCE);
                }
                try {
                    Thread.sleep(pauseMillis);
                } catch (InterruptedException interrupted) {
                    Thread.currentThread().interrupt();
                    throw e;
                }
            }
        }
    }
}
