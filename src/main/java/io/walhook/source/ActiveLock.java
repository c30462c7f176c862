package io.walhook.source;

import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.Properties;

import org.jboss.logging.Logger;

import io.walhook.config.SessionTimeout;

/**
 * One active walhook per slot: a session-level PostgreSQL advisory lock, keyed by the slot name,
 * held on a connection of its own for as long as the instance is active. The server releases it
 * when that session ends, a crash or {@code kill -9} included, so a standby polling
 * {@link #tryAcquire()} takes over within its poll interval.
 *
 * <p>It also fences the writes to the durable queues ({@link #fence}): an instance whose lock
 * session is gone learns it at its next look (within about 2 s) and meanwhile still holds events;
 * had it written them to a queue whose new lane already looked at it, they would be delivered
 * after newer changes of their rows. Each write checks, in its own transaction and under a shared
 * lock of the slot's fence key, that its instance's lock session still lives (it holds a token
 * lock beside the slot's, which a try in the write's transaction finds taken); a new holder takes
 * the fence key alone once, so writes that checked before it took over are committed (or ended)
 * before it looks at a queue, and later ones find the token free. It first waits for the token of
 * the session before it (recorded with the activation) to be free: a backend ending releases its
 * locks one part of the lock table at a time.
 *
 * <p>Requests to destinations are not fenced that way, so it holds a lease too ({@link
 * #sendableInNanos}): an instance starts requests only within {@link #LEASE} of the last time it
 * found its lock session alive, and one taking the lock from a holder that did not let it go
 * cleanly ({@link #release}: a crash, a lost session) starts none until that lease ran out. The
 * instance before started its last request by then, even one that never learnt it lost the lock:
 * a retry of an older change of a row it still held is not sent after the new holder's newer one
 * (though one it started just before may still be under way, up to its request timeout).
 *
 * <p>Each instance taking the lock counts an activation of the slot ({@code <state
 * schema>.activation}). One whose lock session ended takes the lock again only if the count is
 * still its own: had another instance been active in between, it may have queued or delivered
 * events this one knows nothing of, so this one lets go and exits instead.
 */
public final class ActiveLock implements AutoCloseable {

    private static final Logger LOG = Logger.getLogger(ActiveLock.class);
    /** The lock's first key, 'walh': apart from other applications' advisory locks. */
    static final int NAMESPACE = 0x77616c68;
    /** The fence's first key, 'walq': shared by each write to a durable queue, taken alone by a new holder. */
    static final int FENCE = 0x77616c71;
    /** This database, in pg_locks' terms: an advisory lock's keys are the same in every database of a cluster. */
    private static final String DATABASE = "(SELECT oid FROM pg_database WHERE datname = current_database())";
    /** How long a new holder waits for writes of the instance before it to end, before it ends them. */
    static final java.time.Duration FENCE_PATIENCE = java.time.Duration.ofSeconds(10);

    private final String jdbcUrl;
    private final Properties properties;
    private final String slot;
    private final String activationTable;
    private final java.time.Duration fencePatience;
    /** The slot's activation count when this instance took the lock first; 0 before. */
    private long activation;
    private Connection connection;
    private boolean held;
    /** How long finding the lock session alive lets this instance start requests (and a new holder wait). */
    public static final java.time.Duration LEASE = java.time.Duration.ofSeconds(5);
    private static final long LEASE_NANOS = LEASE.toNanos();
    /** When (System.nanoTime) the latest look that found the lock session alive began; valid while {@link #leased}. */
    private volatile long confirmedNanos;
    private volatile boolean leased;
    /** Before this (System.nanoTime) a new holder starts no request: the one before it may still send. */
    private volatile long sendNotBeforeNanos = System.nanoTime();
    /** Told when the lease is renewed after it ran out (requests may start again). */
    private volatile Runnable renewed = () -> { };
    /**
     * While held, the key of a lock the lock's session holds beside it (one 64-bit key), drawn at
     * random each time a session takes the lock; null when not held.
     * A fenced write finds it held, in the lock manager, for as long as that session lives, and
     * free once it ended: no look at pg_locks, and no pid, which a later backend may reuse.
     */
    private volatile Long holder;

    /** @param stateSchema a validated plain identifier, the schema of walhook's own tables */
    public ActiveLock(String jdbcUrl, String user, String password, String slot, String stateSchema) {
        this(jdbcUrl, user, password, slot, stateSchema, FENCE_PATIENCE);
    }

    ActiveLock(String jdbcUrl, String user, String password, String slot, String stateSchema,
            java.time.Duration fencePatience) {
        this.jdbcUrl = jdbcUrl;
        this.properties = sessionProperties(user, password, "walhook-lock");
        // every wait for a lock ends on the server after fencePatience: a statement walhook gave up on
        // (its activation row held by another session) must not go on waiting there holding the slot's lock
        this.properties.setProperty("options", SessionTimeout.poolOptions() + " -c lock_timeout="
                + Math.max(1, fencePatience.toMillis()) + " " + DEAD_PEER_OPTIONS);
        this.slot = slot;
        this.activationTable = stateSchema + ".activation";
        this.fencePatience = fencePatience;
    }

    /**
     * The server gives the lock's session up once this instance has been silent for about 11 s
     * (TCP keepalive probes after 5 s idle, 3 of them 2 s apart; 10 s for data it sent unanswered):
     * a node that died, or a network cut, sends no FIN, and the session's backend held the lock
     * until the server's own TCP keepalive gave up, over two hours with Linux's defaults, while
     * every standby found the lock taken. The active instance looks at its session every 2 s.
     */
    static final String DEAD_PEER_OPTIONS = "-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2"
            + " -c tcp_keepalives_count=3 -c tcp_user_timeout=10000";

    /** A setting of the lock's session as the server has it (tests), or null without a session. */
    synchronized String setting(String name) throws SQLException {
        if (connection == null) {
            return null;
        }
        try (PreparedStatement s = connection.prepareStatement("SELECT setting FROM pg_catalog.pg_settings WHERE name = ?")) {
            s.setString(1, name);
            try (ResultSet rs = s.executeQuery()) {
                return rs.next() ? rs.getString(1) : null;
            }
        }
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
        properties.setProperty(SessionTimeout.SOCKET_TIMEOUT, SessionTimeout.SECONDS);
        properties.setProperty("options", SessionTimeout.poolOptions()); // the server gives up before the client does
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
        long asked = System.nanoTime();
        try (PreparedStatement s = connection.prepareStatement("SELECT pg_try_advisory_lock(?, hashtext(?))")) {
            s.setInt(1, NAMESPACE);
            s.setString(2, slot);
            try (ResultSet rs = s.executeQuery()) {
                rs.next();
                held = rs.getBoolean(1);
            }
        }
        if (held) {
            boolean ours;
            long token;
            try {
                // the first time: an instance before that did not let go cleanly may still be sending (the
                // same instance taking it again stopped sending when its lease ran out, as the other would)
                boolean waitOutLease = activation == 0 && !previousReleased();
                awaitPreviousHolder();
                token = takeToken();
                ours = countActivation(token);
                if (waitOutLease) {
                    sendNotBeforeNanos = asked + LEASE_NANOS;
                    LOG.infof("the instance active on slot %s before did not stop cleanly: this one sends nothing for %s,"
                            + " until its lease has run out", slot, LEASE);
                }
            } catch (SQLException e) {
                close(); // taken again at the next try, fence and all
                throw e;
            }
            if (!ours) {
                LOG.errorf("another instance was active on slot %s while this one had lost its lock; letting it go", slot);
                close();
                return false;
            }
            holder = token;
            renew(asked);
        }
        return held;
    }

    /**
     * When this instance may start requests to destinations: 0 now, else in that many nanoseconds,
     * or {@link Long#MAX_VALUE} while its lease ran out (not held, or its lock session not found
     * alive for {@link #LEASE}): not before the next look finds it alive.
     */
    public long sendableInNanos() {
        long now = System.nanoTime(); // before the reads: a renewal that began after them tells it (renew)
        if (!leased) {
            return Long.MAX_VALUE;
        }
        if (now - confirmedNanos >= LEASE_NANOS) {
            return Long.MAX_VALUE;
        }
        return Math.max(0, sendNotBeforeNanos - now);
    }

    /** {@code whenRenewed} runs when the lease is renewed after it ran out (on the thread that looked). */
    public void onRenewed(Runnable whenRenewed) {
        this.renewed = whenRenewed;
    }

    /**
     * The look that began at {@code lookedAt} found the lock session alive. Whoever found the lease
     * run out before this renewal is told: whether it ran out counts until now, after the new time
     * is there, not when the look began (a look may take seconds).
     */
    private void renew(long lookedAt) {
        boolean wasLeased = leased;
        long before = confirmedNanos;
        confirmedNanos = lookedAt;
        leased = true;
        if (!wasLeased || System.nanoTime() - before >= LEASE_NANOS) {
            renewed.run();
        }
    }

    /** Whether the holder before this one let the lock go cleanly ({@link #release}), or there was none. */
    private boolean previousReleased() throws SQLException {
        try (PreparedStatement s = connection.prepareStatement("SELECT released FROM " + activationTable
                + " WHERE slot_name = ?")) {
            s.setString(1, slot);
            try (ResultSet rs = s.executeQuery()) {
                return !rs.next() || rs.getBoolean(1);
            }
        }
    }

    /**
     * Lets the lock go cleanly, once this instance sends nothing more (its requests ended or were
     * cut): the next holder starts at once instead of waiting out the lease. Not while this
     * instance still waits out the lease of the one before it: that one may still be sending.
     */
    public synchronized void release() {
        Long token = holder;
        if (held && token != null && System.nanoTime() - sendNotBeforeNanos >= 0) {
            try (PreparedStatement s = connection.prepareStatement("UPDATE " + activationTable + " SET released = true"
                    + " WHERE slot_name = ? AND activations = ? AND token = ?")) {
                s.setString(1, slot);
                s.setLong(2, activation);
                s.setLong(3, token);
                s.executeUpdate();
            } catch (SQLException e) {
                LOG.warnf("cannot record that this instance let the lock of slot %s go (%s): the next waits out the"
                        + " lease", slot, e.getMessage());
            }
        }
        close();
    }

    /** Takes a lock of a random 64-bit key on the lock's session (drawn again in the unlikely case it is taken). */
    private long takeToken() throws SQLException {
        java.security.SecureRandom random = new java.security.SecureRandom();
        try (PreparedStatement s = connection.prepareStatement("SELECT pg_try_advisory_lock(?)")) {
            while (true) {
                long token = random.nextLong();
                s.setLong(1, token);
                try (ResultSet rs = s.executeQuery()) {
                    rs.next();
                    if (rs.getBoolean(1)) {
                        return token;
                    }
                }
            }
        }
    }

    /**
     * Counts this instance's activation of the slot, the first time it takes the lock; after that,
     * whether the count is still its own (no other instance was active since). Either way, records
     * the key of its session's token for the next holder ({@link #awaitPreviousHolder}).
     */
    private boolean countActivation(long token) throws SQLException {
        if (activation == 0) {
            try (PreparedStatement s = connection.prepareStatement("INSERT INTO " + activationTable + " AS a (slot_name,"
                    + " activations, token) VALUES (?, 1, ?) ON CONFLICT (slot_name) DO UPDATE SET activations ="
                    + " a.activations + 1, activated_at = now(), token = excluded.token, released = false"
                    + " RETURNING activations")) {
                s.setString(1, slot);
                s.setLong(2, token);
                try (ResultSet rs = s.executeQuery()) {
                    rs.next();
                    activation = rs.getLong(1);
                }
            }
            return true;
        }
        try (PreparedStatement s = connection.prepareStatement("UPDATE " + activationTable + " SET token = ?"
                + " WHERE slot_name = ? AND activations = ?")) {
            s.setLong(1, token);
            s.setString(2, slot);
            s.setLong(3, activation);
            return s.executeUpdate() == 1;
        }
    }

    /** The token key the holder before this one recorded; null if none did (or it was a walhook from before tokens). */
    private Long previousToken() throws SQLException {
        try (PreparedStatement s = connection.prepareStatement("SELECT token FROM " + activationTable
                + " WHERE slot_name = ?")) {
            s.setString(1, slot);
            try (ResultSet rs = s.executeQuery()) {
                if (!rs.next()) {
                    return null;
                }
                long token = rs.getLong(1);
                return rs.wasNull() ? null : token;
            }
        }
    }

    /**
     * Waits, before this instance looks at any durable queue, for the holder before it to be gone
     * and for the writes it began while it held the lock (they checked the lock before it was gone)
     * to end. First the previous session's token, which it may still hold: a backend ending releases
     * its locks one part of the lock table at a time, so the slot's lock can be free while the token
     * is not, and a write checking meanwhile would pass. Then the fence's key alone, once: the writes
     * that passed are committed or rolled back by then, and later ones find the token free. A session
     * or a write that hangs (its instance frozen, its connection cut without the server knowing) is
     * ended after {@code fencePatience}: what it wrote is rolled back, and the slot, which it never
     * acknowledged, has it still.
     */
    private void awaitPreviousHolder() throws SQLException {
        Long previous = previousToken();
        if (previous != null) {
            // in pg_locks a 64-bit key is its high half (classid) and its low half (objid), objsubid 1
            awaitAlone("SELECT pg_advisory_lock(?), pg_advisory_unlock(?)", s -> {
                s.setLong(1, previous);
                s.setLong(2, previous);
            }, "classid = ?::oid AND objid = ?::oid AND objsubid = 1", s -> {
                s.setLong(1, previous >>> 32);
                s.setLong(2, previous & 0xffffffffL);
            }, "sessions of the instance that held slot %s before, still holding its lock after %s");
        }
        awaitAlone("SELECT pg_advisory_lock(?, hashtext(?)), pg_advisory_unlock(?, hashtext(?))", s -> {
            s.setInt(1, FENCE);
            s.setString(2, slot);
            s.setInt(3, FENCE);
            s.setString(4, slot);
        }, "classid = ?::oid AND objid = hashtext(?)::oid AND objsubid = 2", s -> {
            s.setInt(1, FENCE);
            s.setString(2, slot);
        }, "writes to durable queues of the instance that held slot %s before, which did not end within %s;"
                + " what they wrote is rolled back and read again from the slot");
    }

    private interface Parameters {
        void set(PreparedStatement statement) throws SQLException;
    }

    /**
     * Takes an advisory lock alone and lets it go ({@code lockAndUnlock}), under the session's lock
     * timeout; when that runs out, ends the other sessions holding it ({@code held}: which key in
     * pg_locks' terms) and takes it again.
     */
    private void awaitAlone(String lockAndUnlock, Parameters lockKey, String held, Parameters heldKey, String ended)
            throws SQLException {
        try (PreparedStatement s = connection.prepareStatement(lockAndUnlock)) {
            lockKey.set(s);
            try {
                s.execute();
                return;
            } catch (SQLException e) {
                if (!"55P03".equals(e.getSQLState())) {
                    throw e;
                }
            }
            try (PreparedStatement end = connection.prepareStatement("SELECT count(pg_terminate_backend(pid)) FROM pg_locks"
                    + " WHERE locktype = 'advisory' AND granted AND " + held + " AND database = " + DATABASE
                    + " AND pid <> pg_backend_pid()")) {
                heldKey.set(end);
                try (ResultSet rs = end.executeQuery()) {
                    rs.next();
                    LOG.warnf("ended %d " + ended, rs.getLong(1), slot, fencePatience);
                }
            }
            s.execute();
        }
    }

    /**
     * Fences a write to a durable queue, on the connection of the write's transaction (not in
     * autocommit), before it writes: throws if this instance no longer holds the lock, so that
     * nothing is written (and nothing acknowledged: the slot keeps the events for whoever holds it).
     */
    public void fence(Connection write) throws SQLException {
        Long token = holder;
        boolean holds = false;
        if (token != null) {
            // the fence's key first (the subquery, kept apart by OFFSET 0, yields its row before the outer
            // select is computed); then whether the lock's session still holds its token: a shared try
            // fails while it does, and takes it (until this transaction ends) once that session is gone
            try (PreparedStatement s = write.prepareStatement("SELECT NOT pg_try_advisory_xact_lock_shared(?) FROM"
                    + " (SELECT pg_advisory_xact_lock_shared(?, hashtext(?)) OFFSET 0) fence")) {
                s.setLong(1, token);
                s.setInt(2, FENCE);
                s.setString(3, slot);
                try (ResultSet rs = s.executeQuery()) {
                    rs.next();
                    holds = rs.getBoolean(1);
                }
            }
        }
        if (!holds) {
            throw new SQLException("this instance no longer holds the lock of slot " + slot + " (its session ended):"
                    + " nothing is written to the durable queue until it holds it again; another instance may be taking over",
                    "55000");
        }
    }

    /** Whether the session holding the lock is still there (a lost session has lost the lock). */
    public synchronized boolean stillHeld() {
        if (!held) {
            return false;
        }
        long asked = System.nanoTime();
        try {
            if (connection.isValid(5)) {
                renew(asked);
                return true;
            }
        } catch (SQLException e) {
            LOG.debugf("checking the lock session: %s", e.getMessage());
        }
        // the session is gone: the next tryAcquire opens a new one instead of failing on the dead one
        close();
        return false;
    }

    /**
     * Lets the lock go as after a crash (the next holder waits out this instance's lease) and
     * forgets this instance's activation: it stands by again, and taking the lock later is a
     * take-over of its own (counted anew; before, the count it kept found the activations of
     * those that took over meanwhile, and it let the lock go at every try, for good).
     */
    public synchronized void abandon() {
        close();
        activation = 0;
    }

    /** Releases the lock by ending its session. */
    @Override
    public synchronized void close() {
        held = false;
        leased = false;
        holder = null;
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
