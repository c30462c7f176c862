package io.walhook.source;

import java.sql.SQLException;
import java.time.Duration;

import org.jboss.logging.Logger;

/**
 * Whether walhook's publication is still the one its stream started with. A publication dropped
 * while walhook streams loses changes: the server decodes each change with the catalog of its
 * time, so on PostgreSQL 18 it sends none of those committed while the publication is missing
 * (it only warns in its own log), and on 14 to 17 the stream stops at the first of them. Creating
 * it again brings none back. The active instance looks every {@link #EVERY}: while it is missing
 * walhook is not ready and says so, and one found dropped and created again since the last look
 * is logged as such.
 */
public final class PublicationWatch {

    private static final Logger LOG = Logger.getLogger(PublicationWatch.class);
    /** How often the active instance looks. */
    public static final Duration EVERY = Duration.ofSeconds(10);

    private final SourceDatabase database;
    private final String name;
    /** Whether the stream has started: only then is it looked at. */
    private boolean started;
    /** The publication's oid when last seen; null while it is missing. */
    private Long oid;
    /** Why the publication is not as the stream needs it, while it is missing; null otherwise. */
    private volatile String problem;
    /** Times it was found missing, or dropped and created again, since walhook started. */
    private volatile long dropped;

    public PublicationWatch(SourceDatabase database, String name) {
        this.database = database;
        this.name = name;
    }

    /**
     * The stream starts with the publication as it is now; {@code created}: walhook created it just
     * now, for a slot it had streamed from before (it was dropped while walhook was away).
     */
    public synchronized void starting(boolean created) throws SQLException {
        started = true;
        oid = null;
        problem = null;
        look(); // dropped again since it was made sure of: missing from the start (a failure here is tried again whole)
        if (created) {
            dropped++;
            LOG.errorf("publication %s did not exist and walhook created it, though it streamed from its slot before: it was"
                    + " dropped while walhook was away, and %s", name, CONSEQUENCE);
        }
    }

    private static final String CONSEQUENCE = "the changes committed while it was missing are lost (PostgreSQL 18 sends"
            + " none of them; 14 to 17 stop the stream at the first of them, until the slot is moved past them)";

    /** Looks at the publication once; the caller paces it ({@link #EVERY}). */
    public synchronized void look() throws SQLException {
        if (!started) {
            return;
        }
        Long now = database.publicationOid(name);
        if (now == null) {
            if (problem == null) {
                dropped++;
                problem = "publication " + name + " does not exist: it was dropped while walhook streams, and " + CONSEQUENCE
                        + ". Create it again (walhook does so when it starts)";
                LOG.error(problem);
            }
            return;
        }
        if (problem != null) {
            LOG.infof("publication %s exists again", name);
        } else if (oid != null && !now.equals(oid)) {
            dropped++; // dropped and created again between two looks
            LOG.errorf("publication %s was dropped and created again: %s", name, CONSEQUENCE);
        }
        oid = now;
        problem = null;
    }

    /** Why walhook is not ready because of its publication; null while it is as the stream needs. */
    public String problem() {
        return problem;
    }

    /** Times the publication was found missing, or dropped and created again, since walhook started. */
    public long dropped() {
        return dropped;
    }
}
