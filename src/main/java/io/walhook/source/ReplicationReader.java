package io.walhook.source;

import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Optional;
import java.util.Properties;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

import org.jboss.logging.Logger;
import org.jboss.logging.MDC;
import org.postgresql.PGConnection;
import org.postgresql.PGProperty;
import org.postgresql.replication.LogSequenceNumber;
import org.postgresql.replication.PGReplicationStream;
import org.postgresql.replication.fluent.logical.ChainedLogicalStreamBuilder;

import io.walhook.change.ChangeEvent;
import io.walhook.change.TransactionAssembler;
import io.walhook.change.TxInfo;
import io.walhook.checkpoint.AckTracker;
import io.walhook.checkpoint.CheckpointStore;
import io.walhook.checkpoint.HandOffQueue;
import io.walhook.pgoutput.Lsn;
import io.walhook.checkpoint.PendingEvent;
import io.walhook.checkpoint.Timeline;

/**
 * The one thread that owns the replication stream: START_REPLICATION with options chosen by
 * server version, hand-off of events to delivery through a bounded queue (waiting in short steps
 * that keep answering the server while it is full), and acknowledgement: the watermark of fully
 * delivered transactions is persisted, then sent as flush LSN; with nothing pending, the
 * keepalive position is, so an idle or filtered database does not hold WAL. A broken connection
 * is retried with backoff; the server then resends what was not acknowledged, and transactions
 * already handed on are skipped.
 */
public final class ReplicationReader {

    private static final Logger LOG = Logger.getLogger(ReplicationReader.class);
    /** Events handed over at once, at the latest: one wake-up of the routing thread per chunk, not per event. */
    static final int CHUNK = 256;
    /**
     * The longest an idle reader blocks on the socket before it looks at acknowledgements and stop
     * requests (shorter when the checkpoint or status interval is).
     */
    static final int IDLE_WAIT_MILLIS = 1000;
    /** Status intervals a connection may stay silent after it was asked to answer before it counts as broken, at least. */
    static final int REPLY_PATIENCE_INTERVALS = 3;
    /** How long a connection asked to answer may stay silent before it counts as broken ({@link #replyPatience}). */
    private long replyPatienceNanos;
    /**
     * The longest any read of the connection waits before the stream's reply patience is known:
     * the start-up, the authentication, the question for the server's timeout, START_REPLICATION.
     */
    static final int SETUP_READ_TIMEOUT_SECONDS = 30;
    /** When the server, silent for a status interval, was asked for a reply (0: not since it was last heard). */
    private long askedNanos;
    /** Session settings that make every text value independent of server defaults (docs/protocol.md section 1). */
    static final String SESSION_OPTIONS = io.walhook.change.ValueConverters.SESSION_OPTIONS;

    /** Everything the reader needs to know. */
    public record Settings(String jdbcUrl, String user, String password, String slot, String publication,
            String stateSchema, int serverMajor, Duration statusInterval, Duration checkpointInterval,
            Duration maxBackoff, int handoffCapacity, long handoffBytes, Path spillDirectory, long streamMemoryBytes,
            java.util.function.BiPredicate<String, String> stateTable,
            java.util.function.LongFunction<java.util.List<String>> primaryKey) {

        /** Only {@code stateSchema}'s tables hold walhook's state. */
        public Settings(String jdbcUrl, String user, String password, String slot, String publication,
                String stateSchema, int serverMajor, Duration statusInterval, Duration checkpointInterval,
                Duration maxBackoff, int handoffCapacity, long handoffBytes, Path spillDirectory, long streamMemoryBytes) {
            this(jdbcUrl, user, password, slot, publication, stateSchema, serverMajor, statusInterval, checkpointInterval,
                    maxBackoff, handoffCapacity, handoffBytes, spillDirectory, streamMemoryBytes,
                    (schema, table) -> schema.equals(stateSchema), oid -> null);
        }

        /** Without the password, should the settings ever be logged. */
        @Override
        public String toString() {
            return "ReplicationReader.Settings[" + jdbcUrl + ", user " + user + ", slot " + slot + ", publication "
                    + publication + "]";
        }
    }

    private final Settings settings;
    private final CheckpointStore checkpoints;
    private final HandOffQueue<PendingEvent> events;
    private final AckTracker tracker;
    private final TransactionAssembler assembler;
    private final AtomicLong eventCount = new AtomicLong();
    private final Thread thread;

    private volatile boolean running;
    private volatile boolean draining;
    private volatile long drainDeadline;
    private volatile SourceStatus.State state = SourceStatus.State.CONNECTING;
    /** Whether the last connection got as far as streaming (the reconnect backoff then starts over). */
    private boolean streamed;
    private volatile String lastError;
    private volatile Lsn received = Lsn.INVALID;
    private volatile Lsn acknowledged;
    /** The checkpoint it was made to resume from: the stream sends nothing that committed before it. */
    private final Lsn resumesFrom;
    /** Set by {@link #resuming}: see {@link #otherHistory()}. */
    private boolean otherHistory;
    /** See {@link #earlierHistoryUpTo()}. */
    private long earlierHistoryUpTo;
    /** The server history this reader's positions were read on (unknown until its first connection, without a checkpoint). */
    private volatile Timeline timeline = Timeline.UNKNOWN;
    private Lsn handedOnEnd;
    /**
     * The commit position of the latest transaction some of whose events were handed on before its
     * commit arrived (abandoned when the connection broke): what was delivered of it is of the history
     * read, as a transaction handed on whole is ({@link #reached}).
     */
    private volatile Lsn handedOnPart = Lsn.INVALID;
    private AckTracker.Ticket current;
    /** Events of the open transaction not yet handed over (a transaction's are, at its commit). */
    private final List<PendingEvent> staged = new ArrayList<>(CHUNK);
    /** Their {@link ChangeEvent#memoryBytes()}. */
    private long stagedBytes;
    private PGReplicationStream stream;
    /** Set by {@link #letGo}: why the stream is given up at the reader's next look (within a second). */
    private volatile String letGo;

    /**
     * Gives up the stream at the reader's next look, and reconnects as it can: the server shuts down
     * (its other sessions ended, new ones are refused), and its walsender waits for this reader to
     * confirm all it sent, which it cannot while the changes wait for deliveries the shutdown stopped
     * (the lease is off, the durable queue refuses writes); answering every keepalive, it held the
     * shutdown for good. Nothing is lost: the stream resumes from what was acknowledged.
     */
    public void letGo(String why) {
        letGo = why;
    }

    /** The stream's socket, waited on when there is nothing to read. */
    private CoalescingSocketFactory.CoalescingSocket socket;
    /** Times the reader found nothing to read (and waited): an idle reader wakes a few times a second. */
    private final AtomicLong idleWakeUps = new AtomicLong();
    private long lastAckNanos;
    /** Messages read since acknowledge was last asked, while they stream without a pause. */
    private int messagesSinceAck;
    /**
     * Events handed on, as of the last acknowledgement round, and how far the stream had been read then
     * (or the end of the last transaction with events, if that is further): a checkpoint is saved until
     * it covers this.
     */
    private long eventsSeen;
    private Lsn eventsUpTo = Lsn.INVALID;
    /** The position last persisted as the checkpoint. */
    private Lsn saved;
    /** Checkpoint saves that failed in a row, and when the next may be tried. */
    private int saveFailures;
    private long saveAgainAtNanos;
    private static final Duration SAVE_AGAIN_FIRST = Duration.ofSeconds(1);
    private static final Duration SAVE_AGAIN_MAX = Duration.ofSeconds(30);
    private long lastStatusNanos;

    public ReplicationReader(Settings settings, CheckpointStore checkpoints, Lsn checkpoint) {
        this.resumesFrom = checkpoint;
        this.settings = settings;
        this.checkpoints = checkpoints;
        this.events = new HandOffQueue<>(settings.handoffCapacity(), settings.handoffBytes(),
                PendingEvent::bytes);
        this.tracker = new AckTracker(checkpoint);
        this.acknowledged = checkpoint;
        this.saved = checkpoint;
        this.handedOnEnd = checkpoint;
        this.assembler = new TransactionAssembler(new HandOff(), settings.stateTable(), settings.primaryKey(),
                settings.spillDirectory(), settings.slot(), settings.streamMemoryBytes());
        int stale = assembler.removeStaleSpills();
        if (stale > 0) {
            LOG.infof("removed %d spill file(s) of slot %s left in %s by a reader that stopped mid-stream", stale,
                    settings.slot(), settings.spillDirectory());
        }
        this.thread = new Thread(this::run, "walhook-replication-" + settings.slot());
        this.thread.setDaemon(true);
    }

    /**
     * Reads the persisted checkpoint and builds a reader that resumes from it, unless the checkpoint
     * is not of the server's history: past the end of its WAL, or past where its timeline left the
     * one the checkpoint was read on (an asynchronous standby promoted since, before it received
     * what the checkpoint passed), where resuming would skip every new transaction committing below
     * it. It then resumes from that switch point, or, without one (another cluster), from the slot's
     * own position.
     */
    public static ReplicationReader resuming(Settings settings, CheckpointStore checkpoints) throws SQLException {
        CheckpointStore.Saved saved = checkpoints.loadSaved(settings.slot())
                .orElse(new CheckpointStore.Saved(Lsn.INVALID, Timeline.UNKNOWN, 0));
        Lsn checkpoint = saved.lsn();
        Timeline timeline = saved.timeline();
        long earlierHistoryUpTo = saved.earlierHistoryUpTo();
        boolean otherHistory = false;
        if (checkpoint.isValid()) {
            // the server's history is read with replication commands
            Properties p = replicationLogin(settings);
            // a server taking the connection but never answering (a failover under way) does not hold the activation
            p.setProperty(io.walhook.config.SessionTimeout.SOCKET_TIMEOUT, io.walhook.config.SessionTimeout.SECONDS);
            PGProperty.LOGIN_TIMEOUT.set(p, io.walhook.config.SessionTimeout.SECONDS);
            try (Connection c = historyConnection(settings.jdbcUrl(), p)) {
                WalEnd end = walEnd(c, settings.slot());
                Timeline server = identify(c);
                Lsn shared = sharedUpTo(c, timeline, server);
                // where the server's history left the one the checkpoint was read on: resumed from there
                Lsn from = shared != null && shared.isValid() && shared.compareTo(checkpoint) < 0 ? shared
                        : end.slotConfirmed();
                if (end.end().isValid() && end.end().compareTo(checkpoint) < 0 && !end.inRecovery()) {
                    LOG.errorf("the checkpoint of slot %s (%s) is past the end of the server's WAL (%s): it was saved on"
                            + " another server, or this one lost WAL (an asynchronous standby promoted). Resuming from %s:"
                            + " changes may be delivered again (their ids may repeat ids of the old server's changes),"
                            + " and those the old server had that this one lacks cannot be read again",
                            settings.slot(), checkpoint, end.end(), from.isValid() ? from : "the slot's own position");
                    checkpoint = from;
                    otherHistory = true;
                } else if (!(end.inRecovery() && replayingAgain(timeline, server))
                        && !ofItsHistory(checkpoint, shared, timeline, server, end.slotConfirmed())) {
                    LOG.errorf("the checkpoint of slot %s (%s, read on %s) is past where the server's history (%s) left"
                            + " that one (%s): the server never had the changes read from there on (a standby promoted"
                            + " before it received them, or another cluster). Resuming from %s: changes the old server"
                            + " had that this one lacks cannot be read again, and this one's own from there on are read",
                            settings.slot(), checkpoint, timeline, server,
                            shared.isValid() ? shared : "no position: not one of its ancestors",
                            from.isValid() ? from : "the slot's own position");
                    checkpoint = from;
                    otherHistory = true;
                }
                if (otherHistory) {
                    timeline = server;
                    // for good: a save never moves the checkpoint back, and kept, the next start would resume from it;
                    // with the queues' rows of the old history marked and its dropped ids forgotten, at once
                    earlierHistoryUpTo = checkpoints.leaveHistory(settings.slot(), checkpoint, server);
                }
            }
        }
        ReplicationReader reader = new ReplicationReader(settings, checkpoints, checkpoint);
        reader.otherHistory = otherHistory;
        reader.timeline = timeline;
        reader.earlierHistoryUpTo = earlierHistoryUpTo;
        return reader;
    }

    /** How long {@link #resuming} waits for a walsender of the server's {@code max_wal_senders} to be free. */
    static final Duration WALSENDER_PATIENCE = Duration.ofSeconds(30);

    /**
     * A replication connection for reading the server's history; while every walsender is taken
     * (53300: an instance before this one still connected, its walsender not yet gone) tried again
     * every second, for {@link #WALSENDER_PATIENCE}.
     */
    private static Connection historyConnection(String url, Properties p) throws SQLException {
        long deadline = System.nanoTime() + WALSENDER_PATIENCE.toNanos();
        while (true) {
            try {
                return DriverManager.getConnection(url, p);
            } catch (SQLException e) {
                if (!"53300".equals(e.getSQLState()) || System.nanoTime() - deadline > 0) {
                    throw e;
                }
                LOG.debugf("no walsender free to read the server's history yet: %s", e.getMessage());
                try {
                    Thread.sleep(1000);
                } catch (InterruptedException interrupted) {
                    Thread.currentThread().interrupt();
                    throw e;
                }
            }
        }
    }

    /**
     * Whether this reader resumes from where the server's history left its checkpoint's, or from the
     * slot's own position, because its checkpoint was of another history: what was queued from that
     * history is no guide to the changes the stream sends now.
     */
    public boolean otherHistory() {
        return otherHistory;
    }

    /**
     * The durable queues' newest row id of a history before the server's (0: none): queued when a
     * checkpoint of that history was replaced, now or at an earlier start. None of them is taken for
     * a newer change of its row than the changes the stream sends.
     */
    public long earlierHistoryUpTo() {
        return earlierHistoryUpTo;
    }

    /** The end of a server's WAL, whether it is in recovery, and the slot's confirmed position (invalid when unknown). */
    private record WalEnd(Lsn end, boolean inRecovery, Lsn slotConfirmed) {
    }

    /**
     * The end of the server's WAL that a walsender sends from (flushed on a primary, replayed on a
     * standby), read in one statement with whether it is in recovery: a promotion between two
     * statements would compare a standby's position with a primary's.
     */
    private static WalEnd walEnd(Connection c, String slot) throws SQLException {
        try (PreparedStatement s = c.prepareStatement("SELECT r, (CASE WHEN r THEN pg_catalog.pg_last_wal_replay_lsn()"
                + " ELSE pg_catalog.pg_current_wal_flush_lsn() END)::text, (SELECT confirmed_flush_lsn::text FROM"
                + " pg_catalog.pg_replication_slots WHERE slot_name = ?) FROM pg_catalog.pg_is_in_recovery() r")) {
            s.setString(1, slot);
            try (ResultSet rs = s.executeQuery()) {
                rs.next();
                return new WalEnd(rs.getString(2) == null ? Lsn.INVALID : Lsn.parse(rs.getString(2)), rs.getBoolean(1),
                        rs.getString(3) == null ? Lsn.INVALID : Lsn.parse(rs.getString(3)));
            }
        }
    }

    /** The server's system identifier and timeline ({@code IDENTIFY_SYSTEM}, on a replication connection). */
    private static Timeline identify(Connection c) throws SQLException {
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("IDENTIFY_SYSTEM")) {
            if (!rs.next()) {
                throw new SQLException("IDENTIFY_SYSTEM returned no row");
            }
            return new Timeline(rs.getString("systemid"), rs.getLong("timeline"));
        }
    }

    /**
     * Up to where positions read on {@code read} are of the server's history too: all of them (null)
     * on the same timeline, or when {@code read} is unknown; up to the point where the server's
     * history left {@code read} when the server is on a later timeline descending from it; none
     * ({@link Lsn#INVALID}) on another system, an earlier timeline or one not among its ancestors.
     */
    private static Lsn sharedUpTo(Connection c, Timeline read, Timeline server) throws SQLException {
        if (!read.known() || read.equals(server)) {
            return null;
        }
        if (!read.systemId().equals(server.systemId()) || server.id() < read.id()) {
            return Lsn.INVALID;
        }
        try (Statement s = c.createStatement(); ResultSet rs = s.executeQuery("TIMELINE_HISTORY " + server.id())) {
            if (!rs.next()) {
                throw new SQLException("TIMELINE_HISTORY " + server.id() + " returned no row");
            }
            // bytea before PostgreSQL 16, text since, sent as the file's bytes either way: read as sent
            return switchPoint(rs.getString(2), read.id());
        }
    }

    /**
     * Whether a standby is on an earlier timeline of the same system than the one read: replaying
     * again after a crash, it comes back to the later one (waited for). On a later timeline it does
     * not come back: a history that left the one read is another, as on a primary.
     */
    static boolean replayingAgain(Timeline read, Timeline server) {
        return read.known() && read.systemId().equals(server.systemId()) && server.id() < read.id();
    }

    /**
     * Whether positions up to {@code reached}, read on {@code read}, are of the server's history:
     * within what it shares with {@code read} ({@link #sharedUpTo}); or acknowledged to this very
     * server's slot past the switch point (a standby source promoted, or following its upstream onto
     * a new timeline, while the stream went on: read from it, on a timeline not yet recorded); or, on
     * another cluster, within its slot's position (a slot carried over by pg_upgrade, which keeps
     * logical slots from PostgreSQL 17, having consumed all the old cluster's WAL).
     */
    static boolean ofItsHistory(Lsn reached, Lsn shared, Timeline read, Timeline server, Lsn slotConfirmed) {
        if (shared == null || !reached.isValid() || reached.compareTo(shared) <= 0) {
            return true;
        }
        if (!slotConfirmed.isValid()) {
            return false;
        }
        boolean sameSystem = read.systemId().equals(server.systemId());
        return sameSystem ? shared.isValid() && slotConfirmed.compareTo(shared) > 0 : slotConfirmed.compareTo(reached) >= 0;
    }

    /**
     * Where a timeline history file's text says {@code timeline} ended: each line is a parent
     * timeline, the position where the next began, and a reason. {@link Lsn#INVALID} when the
     * timeline is not among them.
     *
     * @throws SQLException naming the line that is not of that form
     */
    static Lsn switchPoint(String history, long timeline) throws SQLException {
        for (String line : history.split("\n")) {
            String entry = line.strip();
            if (entry.isEmpty() || entry.startsWith("#")) {
                continue;
            }
            String[] fields = entry.split("\\s+", 3);
            try {
                if (fields.length < 2) {
                    throw new IllegalArgumentException("no switch point");
                }
                if (Long.parseLong(fields[0]) == timeline) {
                    return Lsn.parse(fields[1]);
                }
            } catch (IllegalArgumentException e) {
                throw new SQLException("a timeline history line is not \"<timeline> <switch point> <reason>\": \""
                        + entry + "\" (" + e.getMessage() + ")", e);
            }
        }
        return Lsn.INVALID;
    }

    /** The server's WAL is of another history than the positions this reader holds: it stops. */
    static final class OtherHistory extends IllegalStateException {
        OtherHistory(String message) {
            super(message);
        }
    }

    /** The position the stream resumes from (its checkpoint; invalid when none: then the slot's own). */
    public Lsn resumesFrom() {
        return resumesFrom;
    }

    /** Events for delivery, in commit order, handed over a transaction (or {@value #CHUNK} events) at a time. */
    public HandOffQueue<PendingEvent> events() {
        return events;
    }

    /** Delivery completes the tickets of the events it took. */
    public AckTracker tracker() {
        return tracker;
    }

    public void start() {
        running = true;
        thread.start();
    }

    /**
     * Told when the reader's thread ends on an unexpected error (an {@link Error}: out of memory
     * where the JVM is not told to exit on it, a defect): the stream is then read no more, and
     * {@link #status()} says STOPPED with the error.
     */
    public void onFailure(Thread.UncaughtExceptionHandler failed) {
        thread.setUncaughtExceptionHandler(failed);
    }

    /**
     * Stops reading at once, then keeps acknowledging while delivery finishes what it was handed,
     * until every closed transaction is delivered or parked or the grace period ends; acknowledges
     * a last time and closes the stream.
     */
    public void drain(Duration grace) throws InterruptedException {
        drainDeadline = System.nanoTime() + grace.toNanos();
        draining = true;
        thread.join(grace.toMillis() + 5000);
        if (thread.isAlive()) {
            stop(Duration.ofSeconds(5));
        }
        state = SourceStatus.State.STOPPED;
        LOG.infof("slot %s: stopped reading; acknowledged %s (%s)", settings.slot(), acknowledged,
                tracker.settled() ? "every event read was delivered or parked"
                        : tracker.pendingTransactions() + " transactions not delivered in time are read again on restart");
    }

    /** Stops reading, acknowledges what is delivered, and closes the stream. */
    public void stop(Duration timeout) throws InterruptedException {
        running = false;
        thread.interrupt();
        thread.join(timeout.toMillis());
        state = SourceStatus.State.STOPPED;
    }

    public SourceStatus status() {
        return new SourceStatus(state, lastError, received, acknowledged, tracker.pendingTransactions(),
                assembler.openStreams(), assembler.spilledTransactions(), eventCount.get());
    }

    private void run() {
        try {
            read();
        } catch (Error e) {
            lastError = describe(e);
            state = SourceStatus.State.STOPPED;
            throw e;
        }
    }

    private void read() {
        MDC.put("slot", settings.slot());
        long backoffMillis = 1000;
        while (running) {
            try {
                stream();
            } catch (InterruptedException e) {
                if (running) {
                    lastError = "interrupted";
                }
            } catch (OtherHistory e) {
                throw e; // walhook stops: its positions in memory are of another history
            } catch (Exception e) {
                if (!running) {
                    break;
                }
                lastError = describe(e);
                if (isSlotLost(e)) {
                    state = SourceStatus.State.SLOT_INVALID;
                    LOG.errorf("replication slot %s cannot be used: %s. Changes were lost to it: drop and recreate"
                            + " the slot, delete its checkpoint, and restart walhook", settings.slot(), lastError);
                } else {
                    state = SourceStatus.State.DISCONNECTED;
                    LOG.warnf("replication stream of slot %s broke at %s: %s; reconnecting in %d ms", settings.slot(),
                            received, lastError, backoffMillis);
                }
            } finally {
                try {
                    abandonOpenTransaction();
                    assembler.reset();
                } catch (RuntimeException e) {
                    // whatever giving up the stream meets, the reader goes on: the next connection starts over
                    LOG.warnf("slot %s: giving up the broken stream: %s", settings.slot(), describe(e));
                }
            }
            if (!running || draining) {
                break;
            }
            if (streamed) {
                backoffMillis = 1000; // it had worked: start the backoff over
                streamed = false;
            }
            try {
                Thread.sleep(ThreadLocalRandom.current().nextLong(backoffMillis / 2, backoffMillis + 1));
            } catch (InterruptedException e) {
                break;
            }
            backoffMillis = Math.min(backoffMillis * 2, settings.maxBackoff().toMillis());
        }
        state = SourceStatus.State.STOPPED;
    }

    private void stream() throws SQLException, InterruptedException {
        state = SourceStatus.State.CONNECTING;
        try (Connection connection = DriverManager.getConnection(settings.jdbcUrl(), replicationProperties())) {
            socket = CoalescingSocketFactory.takeCreated();
            io.walhook.change.ValueConverters.pinTimeZone(connection);
            askedNanos = 0;
            replyPatienceNanos = replyPatience(connection);
            // a read in the middle of a message waits for its rest at most this long: a connection cut half-open
            // there (a failover) would otherwise hold the reader in pgjdbc's read forever, never back in the
            // idle wait that finds a silent server out, and never logging a word
            connection.setNetworkTimeout(Runnable::run,
                    (int) Math.min(Integer.MAX_VALUE, TimeUnit.NANOSECONDS.toMillis(replyPatienceNanos)));
            WalEnd server = walEnd(connection, settings.slot());
            Lsn end = server.end();
            Lsn reached = reached(handedOnEnd, acknowledged, handedOnPart);
            if (end.isValid() && reached.isValid() && end.compareTo(reached) < 0) {
                if (server.inRecovery()) {
                    // a standby (PostgreSQL 16's decoding on a standby) after a crash replays again from its last
                    // restartpoint, and takes connections before it is back where it was: tried again later
                    throw new SQLException("the standby's replayed WAL ends at " + end + ", before " + reached
                            + ", which this reader read: it is still recovering");
                }
                // the server never had what this reader read or acknowledged: another server behind the same
                // address, or this one after losing WAL (an asynchronous standby promoted). Resumed here, it skipped
                // every new transaction committing below these positions: lost
                state = SourceStatus.State.STOPPED;
                lastError = "the server's WAL ends at " + end + ", before " + reached + ", which this reader read or"
                        + " acknowledged: it is past the end of the server's WAL, whose history is another";
                throw new OtherHistory("slot " + settings.slot() + ": " + lastError + "; walhook stops, and started"
                        + " again it resumes from its checkpoint, or from the slot's own position if that too is past the"
                        + " server's WAL (changes of the history lost with the old server cannot be read again)");
            }
            Timeline history = identify(connection);
            Lsn shared = sharedUpTo(connection, timeline, history);
            if (!ofItsHistory(reached, shared, timeline, history, server.slotConfirmed())) {
                if (server.inRecovery() && replayingAgain(timeline, history)) {
                    // a standby replaying again after a crash may be back on an earlier timeline for a while
                    throw new SQLException("the standby is on " + history + ", whose history left " + timeline
                            + ", which this reader read, before " + reached + ": it is still recovering");
                }
                // a standby promoted before it received what this reader read: the server's history left the one
                // read at the switch point, and by now it may have written past these positions (compared alone,
                // they do not tell). Resumed here, it skipped every new transaction committing below them: lost
                state = SourceStatus.State.STOPPED;
                lastError = "the server is on " + history + ", whose history left " + timeline + ", which this reader"
                        + " read, at " + (shared.isValid() ? shared : "no position (not one of its ancestors)")
                        + ", before " + reached + ", which this reader read or acknowledged";
                throw new OtherHistory("slot " + settings.slot() + ": " + lastError + "; walhook stops, and started"
                        + " again it resumes from where the server's history left the one it read (changes of the"
                        + " history lost with the old server cannot be read again)");
            }
            timeline = history;
            assembler.skipCommittedBefore(handedOnEnd);
            Lsn start = acknowledged;
            ChainedLogicalStreamBuilder builder = connection.unwrap(PGConnection.class).getReplicationAPI()
                    .replicationStream().logical()
                    .withSlotName(settings.slot())
                    .withStartPosition(start.isValid() ? LogSequenceNumber.valueOf(start.value()) : LogSequenceNumber.INVALID_LSN)
                    .withStatusInterval((int) settings.statusInterval().toMillis(), TimeUnit.MILLISECONDS)
                    .withAutomaticFlush(false)
                    .withSlotOption("proto_version", protocolVersion(settings.serverMajor()))
                    .withSlotOption("publication_names", "\"" + settings.publication().replace("\"", "\"\"") + "\"")
                    .withSlotOption("messages", true)
                    .withSlotOption("streaming", "on");
            letGo = null; // asked while the server was going away, before this connection: it is back
            stream = builder.start();
            boolean ended = false;
            try {
                state = SourceStatus.State.STREAMING;
                streamed = true;
                lastError = null;
                LOG.infof("streaming slot %s from %s (protocol %d, PostgreSQL %d)", settings.slot(),
                        start.isValid() ? start : "its confirmed position", protocolVersion(settings.serverMajor()),
                        settings.serverMajor());
                while (running) {
                    // draining: finish the transaction being handed on (so that nothing of it is sent twice
                    // after a restart), then read nothing more; what was read is delivered, then acknowledged
                    if (draining && (current == null || System.nanoTime() - drainDeadline > 0)) {
                        acknowledge(false);
                        if (System.nanoTime() - lastStatusNanos >= TimeUnit.SECONDS.toNanos(1)) {
                            // nothing is read while draining: without a word the server ends the stream after its
                            // wal_sender_timeout, and what deliveries finish later in the grace period is not acknowledged
                            stream.forceUpdateStatus();
                            lastStatusNanos = System.nanoTime();
                        }
                        if (tracker.settled() || System.nanoTime() - drainDeadline > 0) {
                            running = false;
                            break;
                        }
                        Thread.sleep(10);
                        continue;
                    }
                    ByteBuffer message = stream.readPending();
                    if (message == null) {
                        Lsn keptAlive = Lsn.of(stream.getLastReceiveLSN().asLong()); // a keepalive's, or the last message's
                        if (keptAlive.isValid() && keptAlive.compareTo(received) > 0) {
                            received = keptAlive;
                        }
                        acknowledge(false);
                        awaitData();
                        continue;
                    }
                    Lsn lsn = Lsn.of(stream.getLastReceiveLSN().asLong());
                    if (lsn.isValid()) {
                        received = lsn;
                    }
                    assembler.accept(message, lsn);
                    // the clock is read every 64 messages while they stream (and at every pause)
                    if (++messagesSinceAck == 64) {
                        messagesSinceAck = 0;
                        acknowledge(false);
                    }
                }
                saveAgainAtNanos = System.nanoTime(); // the last chance to save before stopping: not skipped for a backoff
                acknowledge(true);
                ended = true;
            } finally {
                PGReplicationStream closing = stream;
                CoalescingSocketFactory.CoalescingSocket raw = socket;
                stream = null;
                socket = null;
                if (!ended && raw != null) {
                    // broken: closing the stream politely waits for the server's answer, which a connection gone
                    // silent never brings; its socket is closed first, and the stream's close fails at once
                    try {
                        raw.close();
                    } catch (java.io.IOException e) {
                        LOG.debugf("closing the broken replication connection: %s", e.getMessage());
                    }
                }
                try {
                    closing.close();
                } catch (SQLException e) {
                    LOG.debugf("closing the replication stream: %s", e.getMessage());
                }
            }
        }
    }

    /**
     * With nothing to read: blocks on the socket until the server sends something or the idle wait
     * passes (so acknowledgements, pgjdbc's status updates and a stop are never later than that);
     * the server's keepalives wake it and are answered by the next read. Bytes already buffered
     * (a TLS record pgjdbc has not decoded yet) are read again after a millisecond, not in a spin;
     * a connection the server closed is a broken stream, reconnected with backoff.
     */
    private void awaitData() throws InterruptedException, SQLException {
        idleWakeUps.incrementAndGet();
        if (socket == null) {
            Thread.sleep(5); // a socket factory of the URL's own: poll, as pgjdbc alone allows
            return;
        }
        try {
            if (socket.buffered() > 0) {
                Thread.sleep(1);
            } else if (!socket.awaitData(idleWaitMillis())) {
                checkServerThere();
            }
        } catch (java.io.IOException e) {
            // closed without an error message (a proxy, a reset): reconnect, as for any broken stream
            throw new SQLException("replication connection: " + e.getMessage(), "08006", e);
        }
    }

    /**
     * A connection silent for a status interval is asked for an answer (a status update asking for
     * a reply, which the server answers with a keepalive); one that stays silent longer than the
     * server may take ({@link #replyPatience}) is broken, and reconnected. Without this, a connection
     * whose other end went away without a word (a network partition, a failover whose old address
     * vanished) looks alive, the status updates walhook writes keeping TCP from noticing for many
     * minutes: while an idle server sends nothing, its silence says nothing.
     */
    private void checkServerThere() throws java.io.IOException, SQLException {
        long now = System.nanoTime();
        long heard = socket.lastHeardNanos();
        long interval = settings.statusInterval().toNanos();
        if (now - heard < interval) {
            return;
        }
        if (askedNanos == 0 || askedNanos - heard < 0) {
            stream.forceUpdateStatus(); // asks for a reply
            askedNanos = now;
        } else if (now - askedNanos >= replyPatienceNanos) {
            String problem = "replication connection: nothing from the server for "
                    + java.time.Duration.ofNanos(now - heard).toSeconds() + " s, though asked to answer "
                    + java.time.Duration.ofNanos(now - askedNanos).toSeconds() + " s ago";
            askedNanos = 0;
            throw new SQLException(problem, "08006");
        }
    }

    /**
     * How long the server may take to answer: {@value #REPLY_PATIENCE_INTERVALS} status intervals,
     * and never less than its {@code wal_sender_timeout} and one interval more. A walsender decoding
     * a large transaction that sends nothing (its changes are not published) reads what the client
     * sent only every half of that timeout; one with no timeout (0), at its leisure: 5 minutes.
     */
    private long replyPatience(Connection connection) throws SQLException {
        long interval = settings.statusInterval().toNanos();
        long serverTimeoutMillis = 60_000;
        try (java.sql.Statement s = connection.createStatement();
                java.sql.ResultSet rs = s.executeQuery(
                        "SELECT setting FROM pg_settings WHERE name = 'wal_sender_timeout'")) {
            if (rs.next()) {
                serverTimeoutMillis = Long.parseLong(rs.getString(1));
            }
        }
        long server = serverTimeoutMillis <= 0 ? TimeUnit.MINUTES.toNanos(5) : TimeUnit.MILLISECONDS.toNanos(serverTimeoutMillis);
        return Math.max(REPLY_PATIENCE_INTERVALS * interval, server + interval);
    }

    /** At most {@value #IDLE_WAIT_MILLIS} ms, and less than the status and checkpoint intervals. */
    private int idleWaitMillis() {
        long shortest = Math.min(settings.statusInterval().toMillis(), settings.checkpointInterval().toMillis());
        return (int) Math.max(1, Math.min(IDLE_WAIT_MILLIS, shortest));
    }

    /** How many times the reader found nothing to read and waited. */
    long idleWakeUps() {
        return idleWakeUps.get();
    }

    /** 2 (streaming) on 14, 3 on 15, 4 on 16 and later; walhook enables neither two_phase nor parallel. */
    static int protocolVersion(int serverMajor) {
        return serverMajor >= 16 ? 4 : serverMajor == 15 ? 3 : 2;
    }

    /** How a replication connection logs in: {@code replication=database}, simple queries (replication commands). */
    private static Properties replicationLogin(Settings settings) {
        Properties p = new Properties();
        PGProperty.USER.set(p, settings.user());
        if (settings.password() != null) {
            PGProperty.PASSWORD.set(p, settings.password());
        }
        PGProperty.REPLICATION.set(p, "database");
        PGProperty.PREFER_QUERY_MODE.set(p, "simple");
        PGProperty.ASSUME_MIN_SERVER_VERSION.set(p, "10");
        PGProperty.OPTIONS.set(p, SESSION_OPTIONS);
        PGProperty.APPLICATION_NAME.set(p, "walhook");
        PGProperty.TCP_KEEP_ALIVE.set(p, true);
        return p;
    }

    private Properties replicationProperties() {
        Properties p = replicationLogin(settings);
        // until the reply patience replaces it ({@link #stream}): no read of the set-up waits forever
        PGProperty.SOCKET_TIMEOUT.set(p, SETUP_READ_TIMEOUT_SECONDS);
        // reads that carry many messages, not one: see the factory
        PGProperty.SOCKET_FACTORY.set(p, CoalescingSocketFactory.class.getName());
        return p;
    }

    /**
     * Persists, then reports, the position to acknowledge: the watermark of delivered transactions,
     * or, with nothing at all pending, the last position the server told us about.
     */
    private void acknowledge(boolean force) throws SQLException {
        String away = letGo;
        if (away != null) {
            letGo = null;
            throw new SQLException(away, "57P03"); // the stream breaks, and reconnects as it can
        }
        long now = System.nanoTime();
        if (!force && now - lastAckNanos < settings.checkpointInterval().toNanos()) {
            return;
        }
        lastAckNanos = now;
        Lsn target = tracker.watermark();
        // an open streamed transaction (prepared and awaiting COMMIT PREPARED, say) must not hold the
        // slot: outside its blocks the server's position can be acknowledged
        if (!assembler.receivingTransaction() && tracker.idle()) {
            Lsn serverPosition = Lsn.of(stream.getLastReceiveLSN().asLong());
            if (serverPosition.compareTo(target) > 0) {
                target = serverPosition;
            }
        }
        long handedOn = eventCount.get();
        if (handedOn != eventsSeen) {
            // every event handed on so far was read at or before the stream's last received position
            eventsSeen = handedOn;
            Lsn received = Lsn.of(stream.getLastReceiveLSN().asLong());
            if (received.compareTo(eventsUpTo) > 0) {
                eventsUpTo = received;
            }
        }
        if (target.compareTo(acknowledged) > 0) {
            if (saved.compareTo(eventsUpTo) < 0) {
                // Only positions past events need to survive a restart: between them, the server's
                // confirmed position suffices, and writing one would itself be new WAL to
                // acknowledge, so an idle database would be written to forever. Saved until the
                // checkpoint covers every event read, even when the last ones complete later.
                if (saveFailures > 0 && now - saveAgainAtNanos < 0) {
                    return; // a save that failed waits its turn: nothing is acknowledged meanwhile
                }
                try {
                    checkpoints.save(settings.slot(), target, timeline);
                } catch (SQLException e) {
                    if (goingAway(e)) {
                        throw e; // the database away or shutting down: the stream breaks and reconnects (a server
                                 // stopping waits for its walsender's client to confirm what it sent, or to go)
                    }
                    // a row held by another session, the state database refusing the write (read-only, out of
                    // connections, a permission taken away): the stream goes on (broken, it read the same changes
                    // again and again, and one taking longer to read than a try never came through; waited for, a
                    // held row held the stream); the slot keeps what is not acknowledged
                    saveFailures++;
                    saveAgainAtNanos = now + Math.min(SAVE_AGAIN_FIRST.toNanos() << Math.min(saveFailures - 1, 5),
                            SAVE_AGAIN_MAX.toNanos());
                    lastError = "cannot save the checkpoint, so nothing is acknowledged: " + e.getMessage();
                    if (saveFailures % 10 == 1) { // then about every 5 minutes
                        LOG.warnf("cannot save the checkpoint of slot %s (%s): nothing is acknowledged until it is;"
                                + " trying again (%d tries)", settings.slot(), e.getMessage(), saveFailures);
                    }
                    return;
                }
                if (saveFailures > 0) {
                    LOG.infof("the checkpoint of slot %s is saved again after %d failed tries", settings.slot(), saveFailures);
                    saveFailures = 0;
                    lastError = null;
                }
                saved = target;
            }
            LogSequenceNumber position = LogSequenceNumber.valueOf(target.value());
            stream.setFlushedLSN(position);
            stream.setAppliedLSN(position);
            stream.forceUpdateStatus();
            lastStatusNanos = now;
            acknowledged = target;
        }
    }

    /**
     * A save that failed as the database goes away: a connection's failure (08...), a shutdown
     * (57P01, 57P02), a server starting or stopping (57P03), or no connection had (the pool's wait,
     * which says no state): the stream breaks (a source shutting down waits for its walsender's
     * client to confirm what it sent, or to go). Any other failure (a lock, a refusal by a state
     * database that answers) leaves the stream as it is.
     */
    private static boolean goingAway(SQLException e) {
        if (e.getSQLState() == null || e instanceof java.sql.SQLTransientConnectionException) {
            return true; // the pool's wait for a connection (a state database that does not answer), or none known
        }
        String state = e.getSQLState();
        return state.startsWith("08") || java.util.Set.of("57P01", "57P02", "57P03").contains(state);
    }

    /** {@link #handedOnPart}, for tests. */
    Lsn handedOnPart() {
        return handedOnPart;
    }

    /**
     * How far this reader read of the server's history: the end of the last transaction handed on,
     * the acknowledged position, and the commit of one handed on in part before the connection broke
     * (its changes were delivered: a server whose history never had it is another history, as for
     * one handed on whole; without it, a standby promoted before it received that transaction was
     * read on as if nothing of it had been delivered).
     */
    static Lsn reached(Lsn handedOnEnd, Lsn acknowledged, Lsn handedOnPart) {
        Lsn reached = handedOnEnd.compareTo(acknowledged) > 0 ? handedOnEnd : acknowledged;
        return handedOnPart.isValid() && (!reached.isValid() || handedOnPart.compareTo(reached) > 0) ? handedOnPart : reached;
    }

    private void abandonOpenTransaction() {
        if (current != null) {
            tracker.abandon(current);
            current = null;
        }
        staged.clear();
        stagedBytes = 0;
    }

    private static boolean isSlotLost(Exception e) {
        String message = String.valueOf(e.getMessage());
        return message.contains("can no longer get changes from replication slot")
                || message.contains("can no longer access replication slot")
                || message.contains("does not exist") && message.contains("replication slot")
                || message.contains("This slot has been invalidated");
    }

    /**
     * The failure as {@code last_error} (in /status, for every read-token holder) and the log show it:
     * a server's error without the values it quotes ({@link io.walhook.config.ServerErrorText}: a
     * publication's row filter failing on a row quotes the row's value), anything else its first line.
     */
    private static String describe(Throwable e) {
        if (e instanceof org.postgresql.util.PSQLException server && server.getServerErrorMessage() != null) {
            return io.walhook.config.ServerErrorText.of(server);
        }
        String message = e.getMessage() == null ? e.getClass().getSimpleName() : e.getMessage();
        int newline = message.indexOf('\n');
        return newline < 0 ? message : message.substring(0, newline);
    }

    /** Receives the assembler's transactions on the reader thread and hands their events on. */
    private final class HandOff implements TransactionAssembler.Output {

        @Override
        public void begin(TxInfo tx) {
            current = tracker.open(tx.commitLsn());
        }

        @Override
        public void event(ChangeEvent event) {
            long bytes = event.memoryBytes();
            staged.add(new PendingEvent(event, current, bytes));
            stagedBytes += bytes;
            // a chunk, or a quarter of the hand-off's bytes: big rows do not pile up here either
            if (staged.size() >= CHUNK || stagedBytes >= settings.handoffBytes() / 4) {
                handOver();
            }
        }

        @Override
        public void commit(TxInfo tx, Lsn endLsn, int eventsInTransaction) {
            handOver();
            tracker.close(current, endLsn);
            current = null;
            if (endLsn.compareTo(handedOnEnd) > 0) {
                handedOnEnd = endLsn;
            }
            if (eventsInTransaction > 0 && endLsn.compareTo(eventsUpTo) > 0) {
                // its events are read up to its end: a round that saw them all before this Commit arrived knew the
                // stream only up to its changes, which may lie before the checkpoint saved for a transaction
                // committed in between, and the server was then told this end with no checkpoint saved for it
                eventsUpTo = endLsn;
            }
        }

        /**
         * Hands the staged events (all of the open transaction) to delivery, waiting in short steps
         * while it is full; the transaction's count grows by them first, routing shrinks it.
         */
        private void handOver() {
            if (staged.isEmpty()) {
                return;
            }
            // counted first: routing may complete an event as soon as it is queued
            tracker.add(current, staged.size());
            int next = 0;
            try {
                while (next < staged.size()) {
                    next = events.offerAll(staged, next, 100, TimeUnit.MILLISECONDS);
                    if (Thread.interrupted()) {
                        throw new InterruptedException("interrupted after queuing " + next + " events"); // counted right
                    }
                    if (next < staged.size()) {
                        if (!running) {
                            throw new InterruptedException("stopping");
                        }
                        keepAnswering();
                    }
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new StopReading(e);
            } finally {
                // what was never queued is nobody's to complete: it leaves the count, so the transaction
                // (abandoned now, sent again whole by the server) does not hold the watermark forever
                if (next < staged.size()) {
                    tracker.complete(current, staged.size() - next);
                }
                eventCount.addAndGet(next);
                if (next > 0 && current.commitLsn().compareTo(handedOnPart) > 0) {
                    handedOnPart = current.commitLsn();
                }
                staged.clear();
                stagedBytes = 0;
            }
        }

        /**
         * A streamed transaction read back at its commit, without a Stream Stop for a long while:
         * the server, which hears nothing from a reader busy in one message, ended the connection
         * after its wal_sender_timeout, and the transaction was streamed again, and again.
         */
        @Override
        public void working() {
            keepAnswering();
        }

        /** While delivery is full, tell the server we are alive (and what is delivered) well before it gives up. */
        private void keepAnswering() {
            long now = System.nanoTime();
            if (now - lastStatusNanos < TimeUnit.SECONDS.toNanos(1)) {
                return;
            }
            try {
                acknowledge(true);
                stream.forceUpdateStatus();
                lastStatusNanos = now;
            } catch (SQLException e) {
                throw new StopReading(e);
            }
        }
    }

    /** Unwinds the assembler when the stream must stop mid-message. */
    private static final class StopReading extends RuntimeException {
        StopReading(Throwable cause) {
            super(cause.getMessage(), cause);
        }
    }
}
