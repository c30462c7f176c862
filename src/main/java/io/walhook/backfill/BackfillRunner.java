package io.walhook.backfill;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.time.Duration;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Deque;
import java.util.HashMap;
import java.util.HexFormat;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.Supplier;

import org.jboss.logging.Logger;

import io.walhook.config.ServerErrorText;
import io.walhook.config.SessionTimeout;
import io.walhook.pgoutput.TupleData;
import io.walhook.routing.CelFilter;
import io.walhook.routing.CelFilterException;
import io.walhook.routing.Subscription;

/**
 * Runs the backfills that are running, on the active instance, one chunk at a time each, round
 * robin: low watermark, the chunk read in a repeatable-read transaction that also writes the high
 * watermark, then {@link Watermarks} sends it from the stream. A few chunks of a backfill are in
 * flight at once; progress is persisted when a chunk's rows are all delivered (or durably queued),
 * in key order, so a restart resumes from the last chunk done and reads again at most what was in
 * flight (with the same event ids). Its own connection, with the replication session's settings, so
 * values read are the text the stream would carry.
 */
public final class BackfillRunner implements Runnable {

    private static final Logger LOG = Logger.getLogger(BackfillRunner.class);
    /** Chunks of one backfill read ahead of the oldest not yet delivered. */
    static final int IN_FLIGHT = 4;
    /**
     * The most a chunk holds, in bytes of its rows' values (as Java keeps them): a chunk stops at the
     * row that reaches it, whatever its size in rows, so a table of large documents is read a few
     * rows at a time and {@link #IN_FLIGHT} chunks of it fit in the heap.
     */
    static final long CHUNK_BYTES = 8L << 20;
    /**
     * The most the chunks of every backfill under way hold together before another is read: each
     * backfill's own bound alone let eight backfills begun at once (a subscription's initial one
     * each) hold 130 MB or more while the stream was behind, past a small heap, and started again
     * after the OutOfMemoryError, walhook met the same backfills.
     */
    static final long ALL_CHUNK_BYTES = 4 * CHUNK_BYTES;
    /** Rows fetched from the server at a time, at most: fewer when rows are large ({@link #fetchSize}). */
    static final int MAX_FETCH = 1000;
    /**
     * Readings of one range, its rows never sent, after which the log says why ({@link
     * #warnIfReadOverAndOver}): about 7 s of readings, the pause between them growing to 2 s.
     */
    public static final int READ_AGAIN_WARN = 8;
    /** Readings between two such warnings of one range: about 5 minutes, at one every 2 s. */
    static final int READ_AGAIN_WARN_EVERY = 150;
    /** How often a table being read is described again from the catalog (its columns, key, publication). */
    static final Duration DESCRIBE_EVERY = Duration.ofSeconds(1);
    /**
     * How often the table is looked at when nothing is running. Backfills are started at once: this
     * instance's API wakes the runner ({@link #wake}), and another's notifies (BackfillStore.CHANNEL),
     * which the subscription poller passes on; the round is for a notification that failed.
     */
    static final Duration IDLE_POLL = Duration.ofSeconds(30);
    /**
     * Times in a row one backfill's read may fail for a reason of its own (an error the server gives
     * for its table, not a lost connection; or a defect of walhook's) before it fails: it is read
     * again after a pause growing from 1 s, the other backfills going on meanwhile.
     */
    static final int REFUSALS = 5;

    /**
     * Rows moved out of reach of a backfill's reads ({@link Watermarks.Moved}) kept for it at most:
     * past them, the tables they moved in are read again from their start.
     */
    static final int MOVED_MAX = 10_000;
    /**
     * Rows moved read again together at most: a row-value IN list of composite keys past about
     * 7,500 overflows PostgreSQL's stack (54001), which failed the backfill.
     */
    static final int MOVED_BATCH = 1_000;

    /** What the runner needs to know. */
    /** @param stateSchema walhook's own schema, whose tables are never read */
    public record Settings(String jdbcUrl, String user, String password, String publication, String stateSchema,
            Duration chunkTarget, Duration statementTimeout) {

        /** Without the password, should the settings ever be logged. */
        @Override
        public String toString() {
            return "BackfillRunner.Settings[" + jdbcUrl + ", user " + user + ", publication " + publication + "]";
        }
    }

    /** Counts rows sent per subscription (metrics). */
    public interface Counter {
        Counter NONE = (subscription, rows) -> {
        };

        void sent(Subscription subscription, long rows);
    }

    private final Settings settings;
    private final BackfillStore store;
    private final Watermarks watermarks;
    private final Supplier<List<Subscription>> inForce;
    /** Whether a subscription not in force is held (shadowed, or its stored body unreadable here) rather than gone. */
    private final java.util.function.Predicate<String> held;
    private final Counter counter;
    private final Map<UUID, Run> runs = new LinkedHashMap<>();
    /**
     * Rows to read again at their new key, by backfill ({@link Watermarks.Moved}): added by the
     * routing thread, taken by the runner. A backfill paused keeps its own for when it resumes.
     */
    private final Map<UUID, java.util.concurrent.BlockingDeque<Watermarks.Moved>> movedRows =
            new java.util.concurrent.ConcurrentHashMap<>();
    /**
     * Rows moved the routing thread met, each with the hold on its update's acknowledgement: saved
     * ({@link BackfillStore#saveMoved}) by the runner, then let go to be acknowledged and queued in
     * {@link #movedRows}. Kept in memory alone, one waiting for its backfill to resume (or read later
     * than its update was acknowledged) was never read after a restart.
     */
    private final java.util.concurrent.ConcurrentLinkedQueue<MovedRow> unsaved =
            new java.util.concurrent.ConcurrentLinkedQueue<>();

    private record MovedRow(Watermarks.Moved moved, Runnable saved) {
    }

    /** Backfills that had more than {@link #MOVED_MAX} rows moved, with the tables they moved in. */
    private final Map<UUID, java.util.Set<String>> movedTooMany = new java.util.concurrent.ConcurrentHashMap<>();
    /**
     * Runs of backfills that ended (cancelled) with chunks the stream had met: their rows are on
     * their way, and counted in {@code rows_sent} once delivered ({@link #countFinishing}).
     */
    private final List<Run> finishing = new ArrayList<>();
    /**
     * When each backfill's subscription was first found not in force: it is cancelled only after
     * {@link #GONE_AFTER}, since a subscription created on another instance reaches this one's
     * subscriptions up to a reload later.
     */
    private final Map<UUID, Long> missingSince = new HashMap<>();
    static final Duration GONE_AFTER = Duration.ofSeconds(5);
    /**
     * How long the stream may take to meet a chunk's high watermark before the runner makes sure its
     * connection, on which the watermark committed, is still alive (and at most how often it does).
     */
    static final Duration LATE_AFTER = Duration.ofSeconds(10);
    /** What {@link #running()} shows: the runner's runs, copied after each round. */
    private volatile List<Running> published = List.of();
    private final AtomicLong tokens = new AtomicLong();
    private Connection connection;
    /**
     * The runner's first transaction id (64 bits), taken on its first connection; -1 before. Every
     * transaction the stream delivered before this runner began (before a restart, or on the instance
     * this one took over from) is older: one the stream did not deliver since, which a chunk's snapshot
     * does not see though it committed, reads the chunk again (Chunk#unheard).
     */
    private long firstXid = -1;
    /** How many connections the runner has opened: the chunks committed on an earlier one may have been lost with it. */
    private long connections;
    /** When the runner last made sure its connection is alive for a chunk the stream is late with (System.nanoTime). */
    private long lastLook = System.nanoTime() - LATE_AFTER.toNanos();
    /** {@link #chunkBytes()}: written by the runner's thread, read by any. */
    private volatile long chunkBytes;
    private volatile boolean stopped;
    private final Object idle = new Object();
    /** Guarded by {@link #idle}: something changed since the runner last looked. */
    private boolean woken;
    private long backoffMillis;
    /**
     * When the last round wants the next (System.nanoTime; 0 for none): a backfill held by its rate
     * may read its next chunk, or a missing subscription's grace ends. A backfill whose subscription
     * is held has none: it waits for a change, which wakes the runner.
     */
    private long[] dues = new long[0];

    public BackfillRunner(Settings settings, BackfillStore store, Watermarks watermarks,
            Supplier<List<Subscription>> inForce, java.util.function.Predicate<String> held, Counter counter) {
        this.settings = settings;
        this.store = store;
        this.watermarks = watermarks;
        this.inForce = inForce;
        this.held = held;
        this.counter = counter;
        watermarks.onMoved(this::rowMoved);
    }

    /**
     * Watches the tables backfills (running or paused) have begun and not read to their end, as their
     * progress was saved, for rows moved out of reach of their reads: before the stream starts after a
     * restart or a take-over. Watched only once a chunk of them was read again, a row moved before
     * then (any, while the backfill stayed paused) was missed.
     */
    public void watchTablesUnderWay() throws SQLException {
        for (Backfill backfill : store.unfinished()) {
            backfill.progress().forEach((table, progress) -> {
                if (progress.cursor() != null && !progress.done() && progress.oid() != 0 && progress.keyNames() != null) {
                    watermarks.watch(backfill.id(), new Watermarks.Watch(progress.oid(), table, progress.keyNames()));
                }
            });
        }
    }

    /**
     * The routing thread met a row moved out of reach of {@code m}'s backfill: it is saved, then read
     * again (see {@link #step}); its update is acknowledged once it is saved ({@code saved}).
     */
    private void rowMoved(Watermarks.Moved m, Runnable saved) {
        unsaved.add(new MovedRow(m, saved));
        if (stopped) {
            // no round will save it: the stream stops, and its update waits to be acknowledged until it is saved
            saveMovedQuietly();
        }
        wake();
    }

    /**
     * Saves the rows moved the routing thread met, then lets their updates be acknowledged and
     * queues them to be read again. A failure keeps them (and their updates unacknowledged) for the
     * next try.
     */
    private synchronized void saveMoved() throws SQLException {
        while (!unsaved.isEmpty()) {
            List<MovedRow> batch = new ArrayList<>();
            for (java.util.Iterator<MovedRow> rows = unsaved.iterator(); rows.hasNext() && batch.size() < MOVED_BATCH;) {
                batch.add(rows.next());
            }
            store.saveMoved(batch.stream().map(MovedRow::moved).toList());
            for (MovedRow row : batch) {
                unsaved.poll(); // the same, in order: only this method takes them
                if (!moves(row.moved().backfillId()).offerLast(row.moved())) {
                    tooMany(row.moved().backfillId(), row.moved().table());
                }
                row.saved().run();
            }
        }
    }

    /** {@link #saveMoved} when stopping, the thread's interrupt aside: what is not saved stays unacknowledged. */
    private void saveMovedQuietly() {
        boolean interrupted = Thread.interrupted();
        try {
            saveMoved();
        } catch (SQLException | RuntimeException e) {
            LOG.warnf("backfills: %d rows moved to other keys were not saved (%s); the updates that moved them are not"
                    + " acknowledged, and are read again from the stream", unsaved.size(), e.getMessage());
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    /**
     * The backfill's rows moved that were saved (before a restart, a take-over, or since it paused) and
     * are not queued here: queued first, in the order they moved.
     */
    private void loadMoved(UUID backfill) throws SQLException {
        List<Watermarks.Moved> saved = store.moved(backfill, MOVED_MAX + 1);
        if (saved.isEmpty()) {
            return;
        }
        if (saved.size() > MOVED_MAX) {
            // more than are kept: the tables they moved in are read again from their start (see step)
            for (String table : store.movedTables(backfill)) {
                tooMany(backfill, table);
            }
            return;
        }
        java.util.Set<Watermarks.Moved> queued = new java.util.HashSet<>(moves(backfill));
        putBack(backfill, saved.stream().filter(m -> !queued.contains(m)).toList());
    }

    private java.util.concurrent.BlockingDeque<Watermarks.Moved> moves(UUID backfill) {
        return movedRows.computeIfAbsent(backfill, id -> new java.util.concurrent.LinkedBlockingDeque<>(MOVED_MAX));
    }

    private void tooMany(UUID backfill, String table) {
        movedTooMany.computeIfAbsent(backfill, id -> java.util.concurrent.ConcurrentHashMap.newKeySet()).add(table);
    }

    /**
     * Rows moved taken to be read and not read (their reading given up, or cut at its byte bound):
     * first again, the same objects (a row's read keeps its id).
     */
    private void putBack(UUID backfill, List<Watermarks.Moved> unread) {
        java.util.concurrent.BlockingDeque<Watermarks.Moved> moves = moves(backfill);
        for (int i = unread.size() - 1; i >= 0; i--) {
            if (!moves.offerFirst(unread.get(i))) {
                tooMany(backfill, unread.get(i).table());
            }
        }
    }

    /**
     * A chunk of rows moved ({@code moved}) cut at its byte bound: it keeps those it read (read
     * again, it reads only them), and the others are returned, to be read next. None matched (the
     * stream's text of a key other than the query's): the others are let go with a warning, or the
     * same rows were read over and over.
     */
    static List<Watermarks.Moved> cutAt(Chunk chunk, List<Watermarks.Moved> moved) {
        java.util.Set<String> read = new java.util.HashSet<>();
        chunk.rows.forEach(row -> read.add(row.key()));
        List<Watermarks.Moved> taken = new ArrayList<>();
        List<Watermarks.Moved> rest = new ArrayList<>();
        for (Watermarks.Moved m : moved) {
            (read.contains(String.join("\0", m.key())) ? taken : rest).add(m);
        }
        if (taken.isEmpty()) {
            LOG.warnf("backfill %s: rows moved in %s were read under other keys than the stream gave; %d of them are not"
                    + " read again", chunk.backfillId, chunk.table.qualifiedName(), rest.size());
            return List.of();
        }
        chunk.moved = List.copyOf(taken);
        return rest;
    }

    /** A backfill being run: where it is, and its chunks in flight. */
    private static final class Run {
        Backfill backfill;
        final CelFilter filter;
        int table;
        List<String> after;
        final Map<String, Backfill.TableProgress> progress;
        final Deque<Chunk> inFlight = new ArrayDeque<>();
        final Map<String, SnapshotTable> shapes = new HashMap<>();
        /** The latest description of each table, and when it was made (System.nanoTime). */
        final Map<String, SnapshotTable> described = new HashMap<>();
        final Map<String, Long> describedAt = new HashMap<>();
        /** Each table's columns when it was last described ({@link #COLUMNS}): a chunk that finds others reads again. */
        final Map<String, String> describedColumns = new HashMap<>();
        /**
         * Chunk reads in a row refused because the table was altered since its description (a column dropped, a key
         * column retyped): described again each time.
         */
        int staleReads;
        /** Chunk reads in a row that could not get the table's lock within {@link #LOCK_WAIT}. */
        int lockWaits;
        /** Steps in a row that failed for a reason of this backfill's own ({@link #REFUSALS}). */
        int refusals;
        /** Whether this walhook's role may lock each table (table-wide SELECT; not so when granted only some columns). */
        final Map<String, Boolean> lockable = new HashMap<>();
        int size;
        long nextChunkAt;
        /** Tables to read again from their start when the run comes to them (too many rows moved in them). */
        final java.util.Set<String> fromStart = new java.util.HashSet<>();
        /** The largest row read of each table, in bytes as {@link #CHUNK_BYTES} counts them: never lowered. */
        final Map<String, Long> largestRow = new HashMap<>();

        /** The MAC of its read events' ids, under its key ({@link #eventId}); null for a backfill from before keys. */
        final javax.crypto.Mac idMac;

        Run(Backfill backfill, CelFilter filter, byte[] idKey) {
            this.backfill = backfill;
            this.filter = filter;
            this.idMac = idKey == null ? null : idMac(idKey);
            this.progress = new LinkedHashMap<>(backfill.progress());
            this.size = backfill.chunkSize();
            while (table < backfill.tables().size() && backfill.progressOf(backfill.tables().get(table)).done()) {
                table++;
            }
            after = table < backfill.tables().size() ? backfill.progressOf(backfill.tables().get(table)).cursor() : null;
        }
    }

    /** Where the run reads {@code table} from: its last key done, or its start when it is to be read again whole. */
    private static List<String> startOf(Run run, String table) {
        return run.fromStart.remove(table) ? null : run.backfill.progressOf(table).cursor();
    }

    /** A backfill this instance runs now, and the rows it has sent (its chunks done). */
    public record Running(UUID id, String subscriptionId, long rowsSent) {
    }

    /** The backfills this instance runs now (for /status). */
    public List<Running> running() {
        return published;
    }

    public void stop() {
        stopped = true;
        wake();
    }

    /** Looks at the backfills now rather than at the next idle poll: one was started or changed here. */
    public void wake() {
        synchronized (idle) {
            woken = true;
            idle.notifyAll();
        }
    }

    /**
     * Waits for {@link #IDLE_POLL}, until woken, or until a backfill held by its rows-per-second
     * limit may read its next chunk, whichever comes first.
     */
    private void idle() throws InterruptedException {
        synchronized (idle) {
            long now = System.nanoTime();
            long deadline = idleDeadline(now, dues);
            for (long left = deadline - now; !woken && !stopped && left > 0; left = deadline - System.nanoTime()) {
                java.util.concurrent.TimeUnit.NANOSECONDS.timedWait(idle, left);
            }
            woken = false;
        }
    }

    /**
     * When an idle round ends (System.nanoTime): after {@link #IDLE_POLL}, or when the first
     * backfill held by its rows-per-second limit may read its next chunk ({@code nextChunkAt}, 0
     * for one that is not held), whichever comes first.
     */
    static long idleDeadline(long now, long... nextChunkAt) {
        long deadline = now + IDLE_POLL.toNanos();
        for (long due : nextChunkAt) {
            if (due != 0 && due - deadline < 0) {
                deadline = due;
            }
        }
        return deadline;
    }

    @Override
    public void run() {
        try {
            work();
        } finally {
            // ended however (stopped, interrupted, an Error): a row moved from now on is saved where it is met, or its
            // update held for good would hold every later acknowledgement
            stopped = true;
            saveMovedQuietly();
            closeConnection();
        }
    }

    private void work() {
        while (!stopped && !Thread.currentThread().isInterrupted()) {
            try {
                boolean worked = round();
                backoffMillis = 0;
                if (!worked) {
                    idle();
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                break;
            } catch (SQLException e) {
                if (stopped) {
                    break; // stopping: what the round used (its pool, its container) may be gone already
                }
                // the database went away (restart, failover, network): nothing is lost, try again
                closeConnectionIfBroken(); // a failure of the pool's alone does not cost the chunks in flight
                backoffMillis = Math.min(10_000, Math.max(500, backoffMillis * 2));
                LOG.warnf("backfills wait %d ms: %s", backoffMillis, e.getMessage());
                if (!backOff()) {
                    break;
                }
            } catch (RuntimeException e) {
                if (stopped) {
                    break;
                }
                // a defect: the same round would fail again at once, a watermark written and a chunk read each time
                backoffMillis = Math.min(10_000, Math.max(500, backoffMillis * 2));
                LOG.errorf(e, "backfills stopped a round, and wait %d ms: %s", backoffMillis, e.getMessage());
                if (!backOff()) {
                    break;
                }
            }
        }
    }

    /** Sleeps {@link #backoffMillis}; false when interrupted (stopping). */
    private boolean backOff() {
        try {
            Thread.sleep(backoffMillis);
            return true;
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /** Gives up the run's chunks the stream has not met; the rows moved among them wait to be read again. */
    private void giveUp(Run run) {
        for (Chunk chunk : run.inFlight) {
            boolean givenUp = watermarks.abandon(chunk);
            Chunk.Outcome done = chunk.outcome.getNow(null);
            // given up now, or back already to be read again (harvested after this, it would have been)
            if (chunk.moved != null && (givenUp || done != null && (done.again() || done.leftOut()))) {
                putBack(run.backfill.id(), chunk.moved);
            }
        }
    }

    /** One chunk's worth of work on every running backfill; false when there was nothing to do. */
    boolean round() throws SQLException, InterruptedException {
        long began = System.nanoTime(); // before step() looks at a rate: a due it was held for is not missed
        saveMoved();
        List<Backfill> unfinished = store.unfinished();
        Map<UUID, Backfill> current = new HashMap<>();
        unfinished.forEach(b -> current.put(b.id(), b));
        // one look at the subscriptions in force for the whole round
        java.util.Set<String> subscriptions = new java.util.HashSet<>();
        inForce.get().forEach(s -> subscriptions.add(s.id()));
        runs.values().removeIf(run -> {
            Backfill b = current.get(run.backfill.id());
            if (b != null && b.state() == Backfill.State.RUNNING) {
                return false;
            }
            // cancelled or paused: chunks the stream has met finish on their own; the others are given up
            // (read again on resuming, from the last chunk done; rows moved, from where they wait), so none waits
            // for a watermark forever
            giveUp(run);
            if (b == null && subscriptions.contains(run.backfill.subscriptionId())) {
                // cancelled: what the stream met is delivered, and counted as sent once it is (a paused one's is read
                // again on resuming, and counted then; a deleted subscription's rows are dropped with its lane)
                run.inFlight.removeIf(chunk -> chunk.abandoned);
                if (!run.inFlight.isEmpty()) {
                    run.inFlight.forEach(chunk -> chunk.outcome.thenRun(this::wake));
                    finishing.add(run);
                }
            }
            return true;
        });
        countFinishing();
        boolean worked = false;
        java.util.Set<UUID> stepped = new java.util.HashSet<>();
        List<Long> due = new ArrayList<>();
        for (Backfill backfill : unfinished) {
            if (!subscriptions.contains(backfill.subscriptionId()) && held.test(backfill.subscriptionId())) {
                // held out of force, not deleted: its backfill waits (chunks it sent come back to be read again), and
                // gives its chunks up as a paused one does, read again from its last chunk done: kept, their rows
                // held their place among every backfill's (ALL_CHUNK_BYTES) for as long as it was held
                missingSince.remove(backfill.id());
                Run waiting = runs.remove(backfill.id());
                if (waiting != null) {
                    giveUp(waiting);
                }
                continue;
            }
            if (!subscriptions.contains(backfill.subscriptionId())) {
                long since = missingSince.computeIfAbsent(backfill.id(), id -> System.nanoTime());
                if (System.nanoTime() - since < GONE_AFTER.toNanos()) {
                    due.add(since + GONE_AFTER.toNanos());
                    continue;
                }
                missingSince.remove(backfill.id());
                if (store.transition(backfill.id(), List.of(Backfill.State.RUNNING, Backfill.State.PAUSED),
                        Backfill.State.CANCELLED, "its subscription was deleted")) {
                    LOG.infof("backfill %s cancelled: its subscription %s was deleted", backfill.id(),
                            backfill.subscriptionId());
                }
                continue;
            }
            missingSince.remove(backfill.id());
            if (backfill.state() != Backfill.State.RUNNING) {
                continue;
            }
            Run run = runs.get(backfill.id());
            if (run == null) {
                CelFilter filter;
                try {
                    filter = backfill.filter() == null ? null : CelFilter.compile(backfill.filter());
                } catch (CelFilterException e) {
                    fail(backfill, "its filter no longer compiles: " + e.getMessage());
                    continue;
                }
                run = new Run(backfill, filter, store.idKey(backfill.id()));
                loadMoved(backfill.id());
                runs.put(backfill.id(), run);
            }
            run.backfill = backfill;
            if (run.refusals > 0 && began - run.nextChunkAt < 0) {
                due.add(run.nextChunkAt); // its step failed: nothing of it, harvest included, before its pause ends
                continue;
            }
            stepped.add(backfill.id());
            try {
                worked |= step(run);
            } catch (RuntimeException e) {
                if (stopped) {
                    throw e; // stopping: not this backfill's failure, and the round ends
                }
                // a defect met on this backfill's rows or state: the others go on, this one is tried again
                LOG.errorf(e, "backfill %s stopped a step", backfill.id());
                if (runs.containsKey(backfill.id())) {
                    refused(run, e.toString());
                }
                worked = true;
            }
            if (run.nextChunkAt != 0 && began - run.nextChunkAt < 0) {
                due.add(run.nextChunkAt); // held by its rate (one past is no reason to wake: step read if it could)
            }
            Chunk head = run.inFlight.peekFirst();
            if (head != null && head.againAt != 0) {
                due.add(head.againAt); // to be read again after its pause
            }
        }
        for (UUID id : movedTooMany.keySet()) {
            Backfill waiting = current.get(id);
            if (waiting != null && !runs.containsKey(id)) {
                readAgainFromStart(waiting, movedTooMany.remove(id));
                worked = true;
            }
        }
        worked |= lookAfterLateChunks();
        // ended (done, cancelled, failed), or gone: what the stream still tells of them is let go
        watermarks.unwatch(id -> !current.containsKey(id));
        for (UUID ended : movedRows.keySet()) {
            if (!current.containsKey(ended)) {
                store.forgetMoved(ended, null);
                movedRows.remove(ended);
            }
        }
        movedTooMany.keySet().removeIf(id -> !current.containsKey(id));
        chunkBytes = allInFlightBytes();
        List<Running> now = new ArrayList<>();
        runs.forEach((id, run) -> now.add(new Running(id, run.backfill.subscriptionId(),
                run.progress.values().stream().mapToLong(Backfill.TableProgress::rowsSent).sum())));
        published = List.copyOf(now);
        dues = due.stream().mapToLong(Long::longValue).toArray();
        if (!worked) {
            // chunks in flight only: wait for the oldest a little rather than spin (not for one of a
            // backfill left waiting this round, held or its subscription missing: its chunks may be done)
            for (Run run : runs.values()) {
                Chunk head = run.inFlight.peekFirst();
                if (!waitsOn(head, stepped.contains(run.backfill.id()), run.nextChunkAt, System.nanoTime())) {
                    continue;
                }
                awaitQuietly(head, 50); // returns at once when it is done meanwhile: the next round takes it in
                return true;
            }
        }
        return worked;
    }

    /**
     * Whether an idle round waits a little for a backfill's oldest chunk in flight ({@code head}):
     * not when there is none, when the backfill was left waiting this round (held, or its
     * subscription missing: its chunks may be done), when the chunk is to be read again after its
     * pause, nor when it is to be read again (or its table was left out) and that reading is held
     * by the backfill's rate or a pause for a table's lock. Those are dues, which the idle wait ends
     * at; a wait for a chunk that is done returns at once, and the runner spun until then. A chunk
     * done as sent is waited for: the next round takes it in.
     */
    static boolean waitsOn(Chunk head, boolean stepped, long nextChunkAt, long now) {
        if (head == null || !stepped || head.againAt != 0 && now - head.againAt < 0) {
            return false;
        }
        Chunk.Outcome done = head.outcome.getNow(null);
        return !(done != null && (done.again() || done.leftOut()) && nextChunkAt != 0 && now - nextChunkAt < 0);
    }

    /**
     * A chunk whose high watermark the stream has not met for {@link #LATE_AFTER} may have lost it: a
     * server that crashed, or one failed over to, can lack a transaction it had acknowledged
     * (synchronous_commit off, an asynchronous standby), and the stream never meets it. Such a loss
     * ends the connection the chunk committed on (unless the old server lives on beside the new
     * one): the runner makes sure its connection is alive, and one found broken is replaced
     * ({@link #connection}), giving up on the chunks committed before. A stream that is only behind
     * costs nothing but this look. True when it gave any up.
     */
    private boolean lookAfterLateChunks() throws SQLException {
        long now = System.nanoTime();
        if (now - lastLook < LATE_AFTER.toNanos()) {
            return false;
        }
        boolean late = false;
        for (Run run : runs.values()) {
            for (Chunk chunk : run.inFlight) {
                late |= now - chunk.committedAt >= LATE_AFTER.toNanos() && watermarks.awaiting(chunk);
            }
        }
        if (!late) {
            return false;
        }
        long before = connections;
        if (!connection().isValid(5)) {
            closeConnection();
            connection(); // a new one: the chunks committed on the old one are read again
        }
        lastLook = now;
        return connections != before;
    }

    /** Gives up on the chunks in flight that committed on a connection before the current one and the stream has not met. */
    private void abandonChunksOfEarlierConnections() {
        int given = 0;
        for (Run run : runs.values()) {
            for (Chunk chunk : run.inFlight) {
                if (chunk.connection < connections && watermarks.abandon(chunk, "it committed on a connection to the"
                        + " database that was lost before the stream met its high watermark, which may be lost with it")) {
                    given++;
                }
            }
        }
        if (given > 0) {
            LOG.warnf("backfills: %d chunks committed before the connection to the database was lost are read again"
                    + " (a crash or failover can lose their high watermarks)", given);
        }
    }

    private static void awaitQuietly(Chunk chunk, long millis) throws InterruptedException {
        try {
            chunk.outcome.get(millis, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
            // not yet
        }
    }

    /**
     * Rows moved ({@link Watermarks.Moved}) to read again together, at most {@code limit} (the
     * backfill's chunk size), of the first one's table; none when none waits. Each in a chunk of its
     * own, a workload moving rows faster than four chunks a round kept the table's reads waiting.
     */
    private static List<Watermarks.Moved> moved(java.util.Queue<Watermarks.Moved> moves, int limit) {
        List<Watermarks.Moved> taken = new ArrayList<>();
        if (moves == null) {
            return taken;
        }
        java.util.Set<List<String>> keys = new java.util.HashSet<>();
        for (Watermarks.Moved m = moves.peek(); m != null && taken.size() < Math.max(1, limit)
                && (taken.isEmpty() || m.table().equals(taken.get(0).table())); m = moves.peek()) {
            moves.poll();
            if (keys.add(m.key())) {
                taken.add(m); // a row moved twice to one key is read once
            }
        }
        return taken;
    }

    /**
     * A backfill not running now (paused, held) had more rows moved than are kept: the tables they
     * moved in are to be read again from their start, saved so (and their rows moved let go), or its
     * rows moved would pile up, in memory and in the state, for as long as it waits.
     */
    private void readAgainFromStart(Backfill backfill, java.util.Set<String> moved) throws SQLException {
        if (moved == null) {
            return;
        }
        java.util.Set<String> again = new java.util.TreeSet<>(moved);
        java.util.Queue<Watermarks.Moved> waiting = movedRows.get(backfill.id());
        if (waiting != null) {
            waiting.forEach(m -> again.add(m.table()));
        }
        again.retainAll(backfill.tables());
        Map<String, Backfill.TableProgress> progress = new LinkedHashMap<>(backfill.progress());
        for (String table : again) {
            Backfill.TableProgress before = progress.getOrDefault(table, Backfill.TableProgress.NONE);
            progress.put(table, new Backfill.TableProgress(null, before.rowsSent(), false, before.oid(), before.key(),
                    before.keyNames()));
        }
        store.saveProgress(backfill.id(), backfill.tables(), progress);
        store.forgetMoved(backfill.id(), again);
        if (waiting != null) {
            waiting.removeIf(m -> again.contains(m.table()));
        }
        LOG.warnf("backfill %s: more than %d rows of %s moved to other keys leaving a TOASTed value out of the stream"
                + " while it waited; read again from their start when it goes on", backfill.id(), MOVED_MAX, again);
    }

    /** Takes in what finished, then reads the next chunk if there is room; true when it did something. */
    private boolean step(Run run) throws SQLException, InterruptedException {
        boolean worked = harvest(run);
        // rows moved before the high watermarks of the chunks just taken in were met before them: queued now, before
        // the backfill is found to be done without them
        saveMoved();
        if (run.backfill.state() != Backfill.State.RUNNING || !runs.containsKey(run.backfill.id())) {
            return worked;
        }
        List<String> tables = run.backfill.tables();
        java.util.Set<String> tooMany = movedTooMany.remove(run.backfill.id());
        if (tooMany != null) {
            // more rows moved than are kept: the tables they moved in are read again from their start, whole (those
            // that wait are let go: their tables are among them)
            java.util.Set<String> again = new java.util.TreeSet<>(tooMany);
            java.util.Queue<Watermarks.Moved> dropped = movedRows.remove(run.backfill.id());
            if (dropped != null) {
                dropped.forEach(m -> again.add(m.table()));
            }
            again.retainAll(tables);
            LOG.warnf("backfill %s: more than %d rows of %s moved to other keys leaving a TOASTed value out of the"
                    + " stream; read again from their start", run.backfill.id(), MOVED_MAX, again);
            run.fromStart.addAll(again);
            // their chunks under way are given up (harvested after this, they set the position back where it was), and
            // the position saved as the start: a pause or a restart from now on reads them again whole too
            run.inFlight.removeIf(chunk -> {
                if (!again.contains(chunk.table.qualifiedName())) {
                    return false;
                }
                watermarks.abandon(chunk);
                return true;
            });
            for (String table : again) {
                Backfill.TableProgress before = run.progress.getOrDefault(table, Backfill.TableProgress.NONE);
                run.progress.put(table, new Backfill.TableProgress(null, before.rowsSent(), false, before.oid(),
                        before.key(), before.keyNames()));
            }
            store.saveProgress(run.backfill.id(), tables, run.progress);
            store.forgetMoved(run.backfill.id(), again);
            int first = again.stream().mapToInt(tables::indexOf).min().orElse(Integer.MAX_VALUE);
            if (first <= run.table) { // the one read now, or one read already: from there on (later ones as they come)
                run.table = first;
                run.after = startOf(run, tables.get(first));
            }
        }
        java.util.Queue<Watermarks.Moved> moves = movedRows.get(run.backfill.id());
        if (run.table >= tables.size() && (moves == null || moves.isEmpty())) {
            if (run.inFlight.isEmpty()) {
                watermarks.unwatch(run.backfill.id()::equals);
                movedRows.remove(run.backfill.id());
                store.saveProgress(run.backfill.id(), tables, run.progress);
                store.transition(run.backfill.id(), List.of(Backfill.State.RUNNING), Backfill.State.DONE, null);
                runs.remove(run.backfill.id());
                LOG.infof("backfill %s done: %d rows sent", run.backfill.id(),
                        run.progress.values().stream().mapToLong(Backfill.TableProgress::rowsSent).sum());
                return true;
            }
            return worked;
        }
        chunkBytes = allInFlightBytes();
        if (run.inFlight.size() >= IN_FLIGHT || inFlightBytes(run) >= 2 * CHUNK_BYTES || chunkBytes >= ALL_CHUNK_BYTES) {
            // the rows of at least one chunk are under way (of this backfill, or of all): it has a place again once
            // they are delivered
            return worked;
        }
        long now = System.nanoTime();
        if (run.nextChunkAt != 0 && now - run.nextChunkAt < 0) {
            return worked; // the rows-per-second limit
        }
        List<Watermarks.Moved> move = moved(moves, Math.min(MOVED_BATCH, limit(run)));
        if (!move.isEmpty()) {
            String table = move.get(0).table();
            if (leftOut(run, table)) {
                return true; // no more of its rows are sent
            }
            Chunk these = read(run, table, null, null, -1, move);
            if (these == null) {
                putBack(run.backfill.id(), move); // to be tried again (a failed backfill's are let go with it)
            } else {
                if (these.cut) {
                    putBack(run.backfill.id(), cutAt(these, move)); // at its byte bound: the rest read next
                }
                run.inFlight.addLast(these);
                chunkBytes += these.bytes;
            }
            return true;
        }
        if (run.table >= tables.size()) {
            return worked;
        }
        String name = tables.get(run.table);
        if (leftOut(run, name)) {
            // edited to leave the table out: it counts as done now, and is not read on
            tableLeftOut(run, name);
            return true;
        }
        Chunk chunk = read(run, name, run.after, null, limit(run), null);
        if (chunk == null) {
            return true; // failed, or to be tried again smaller
        }
        run.inFlight.addLast(chunk);
        chunkBytes += chunk.bytes;
        if (chunk.lastOfTable) {
            run.table++;
            run.after = run.table < tables.size() ? startOf(run, tables.get(run.table)) : null;
        } else {
            run.after = chunk.last;
        }
        return true;
    }

    /**
     * The subscription left the table out: it counts as done, at its last key done, and its chunks in
     * flight are given up (one whose high watermark the stream met already still has its rows
     * delivered, uncounted: reads of rows as they were, the same table's, taken back meanwhile).
     */
    private void tableLeftOut(Run run, String table) throws SQLException {
        List<String> tables = run.backfill.tables();
        Backfill.TableProgress before = run.progress.getOrDefault(table, Backfill.TableProgress.NONE);
        run.progress.put(table, new Backfill.TableProgress(before.cursor(), before.rowsSent(), true, before.oid(),
                before.key(), before.keyNames()));
        store.saveProgress(run.backfill.id(), tables, run.progress);
        LOG.infof("backfill %s: its subscription no longer takes table %s, which counts as done", run.backfill.id(), table);
        run.inFlight.removeIf(chunk -> {
            if (!chunk.table.qualifiedName().equals(table)) {
                return false;
            }
            watermarks.abandon(chunk); // its rows are not sent when the stream meets it later (taken back by then)
            return true;
        });
        if (run.table < tables.size() && tables.get(run.table).equals(table)) {
            run.table++;
            run.after = run.table < tables.size() ? startOf(run, tables.get(run.table)) : null;
        }
    }

    /**
     * A table's columns (name, type, modifier, whether generated) in order, its replica identity and
     * its primary key and replica identity indexes, as one text: what changes when the table is
     * altered. Without the indexes, a primary key moved to other columns went unseen until the
     * table was next described (up to {@link #DESCRIBE_EVERY}): a chunk read meanwhile by the old
     * key took no account of a delete the stream sent by the new one, and sent the deleted row.
     */
    static final String COLUMNS = "(SELECT pg_catalog.string_agg(a.attname || ' ' || a.atttypid || ' ' || a.atttypmod"
            + " || ' ' || a.attgenerated::text, ',' ORDER BY a.attnum) || ' ' || (SELECT r.relreplident::text FROM pg_catalog.pg_class r"
            + " WHERE r.oid = a.attrelid LIMIT 1) || ' ' || coalesce((SELECT pg_catalog.string_agg(i.indexrelid::text || ':'"
            + " || i.indisprimary::text || i.indisreplident::text || ':' || i.indkey::text, ';' ORDER BY i.indexrelid)"
            + " FROM pg_catalog.pg_index i WHERE i.indrelid = a.attrelid AND (i.indisprimary OR i.indisreplident)), '')"
            + " FROM pg_catalog.pg_attribute a WHERE a.attrelid = pg_catalog.to_regclass(?)"
            + " AND a.attnum > 0 AND NOT a.attisdropped GROUP BY a.attrelid)";
    /** How long a chunk waits for the table's lock (an ALTER TABLE holding it, or queued for it) before it is read later. */
    private static final Duration LOCK_WAIT = Duration.ofSeconds(1);

    /** Whether the backfill's subscription, in force, no longer takes the table (held or missing: not known). */
    private boolean leftOut(Run run, String table) {
        int dot = table.indexOf('.');
        return inForce.get().stream().filter(s -> s.id().equals(run.backfill.subscriptionId())).findFirst()
                .map(s -> !s.matchesTable(table.substring(0, dot), table.substring(dot + 1))).orElse(false);
    }

    private long allInFlightBytes() {
        long bytes = 0;
        for (Run run : runs.values()) {
            bytes += inFlightBytes(run);
        }
        return bytes;
    }

    /** The bytes the chunks read and not yet delivered hold, of every backfill, as last counted. */
    long chunkBytes() {
        return chunkBytes;
    }

    private static long inFlightBytes(Run run) {
        long bytes = 0;
        for (Chunk chunk : run.inFlight) {
            bytes += chunk.bytes;
        }
        return bytes;
    }

    private static String recreated(String table) {
        return "table " + table + " was dropped and created again during the backfill (the rows after its last key done"
                + " would be another table's); start a new backfill to read it as it is now";
    }

    private int limit(Run run) {
        Integer rate = run.backfill.maxRowsPerSecond();
        return rate == null ? run.size : Math.max(1, Math.min(run.size, rate));
    }

    /** The rows of ended backfills' chunks delivered since they ended, added to their {@code rows_sent}. */
    private void countFinishing() throws SQLException {
        for (java.util.Iterator<Run> runsLeft = finishing.iterator(); runsLeft.hasNext(); ) {
            Run run = runsLeft.next();
            List<Chunk> done = run.inFlight.stream().filter(chunk -> chunk.outcome.isDone()).toList();
            Map<String, Backfill.TableProgress> progress = new LinkedHashMap<>(run.progress);
            long sent = 0;
            for (Chunk chunk : done) {
                int rows = chunk.outcome.join().sent();
                if (rows > 0) {
                    String table = chunk.table.qualifiedName();
                    Backfill.TableProgress before = progress.getOrDefault(table, Backfill.TableProgress.NONE);
                    progress.put(table, new Backfill.TableProgress(before.cursor(), before.rowsSent() + rows,
                            before.done(), chunk.table.oid(), chunk.table.keyShape(), chunk.table.chunkKeyNames()));
                    sent += rows;
                }
            }
            if (sent > 0) {
                // saved before the chunks are let go: a save that fails is tried again the next round
                store.saveProgress(run.backfill.id(), run.backfill.tables(), progress);
                long counted = sent;
                inForce.get().stream().filter(s -> s.id().equals(run.backfill.subscriptionId())).findFirst()
                        .ifPresent(subscription -> counter.sent(subscription, counted));
            }
            run.progress.putAll(progress);
            run.inFlight.removeAll(done);
            if (run.inFlight.isEmpty()) {
                runsLeft.remove();
            }
        }
    }

    /**
     * A range read {@link #READ_AGAIN_WARN} times without its rows being sent says so, and every
     * {@link #READ_AGAIN_WARN_EVERY} times after: a transaction that never becomes visible (a session
     * waiting for a synchronous standby that is gone) keeps the backfill {@code running} with no
     * progress, and without this nothing told the operator why.
     */
    private static void warnIfReadOverAndOver(Run run, Chunk done, String why) {
        int readings = done.readings;
        if (readings == READ_AGAIN_WARN || readings > READ_AGAIN_WARN && (readings - READ_AGAIN_WARN) % READ_AGAIN_WARN_EVERY == 0) {
            LOG.warnf("backfill %s: a chunk of %s was read %d times in %d s and is read again: %s", run.backfill.id(),
                    done.table.qualifiedName(), readings, TimeUnit.NANOSECONDS.toSeconds(System.nanoTime() - done.since), why);
        }
    }

    /** Chunks done, oldest first, become progress; one to read again is read again now. */
    private boolean harvest(Run run) throws SQLException, InterruptedException {
        boolean changed = false;
        List<Watermarks.Moved> read = new ArrayList<>(); // rows moved read again: forgotten once the progress is saved
        while (!run.inFlight.isEmpty() && run.inFlight.peekFirst().outcome.isDone()) {
            Chunk done = run.inFlight.peekFirst();
            Chunk.Outcome outcome = done.outcome.join();
            if (outcome.leftOut() && leftOut(run, done.table.qualifiedName())) {
                tableLeftOut(run, done.table.qualifiedName());
                changed = false; // saved with it
                continue;
            }
            // met while the subscription left its table out, which it takes again now: its rows were not sent
            // (counted as sent, the runner read on, and the backfill ended done without them)
            if (outcome.again() || outcome.leftOut()) {
                // the same range again: after its start, up to its end (the rows after it are in later chunks);
                // again at once the first time, then after a growing pause (a transaction still committing);
                // the runner meanwhile goes on with the other backfills (round() waits for the earliest due)
                if (done.attempt > 0) {
                    long now = System.nanoTime();
                    if (done.againAt == 0) {
                        done.againAt = now + TimeUnit.MILLISECONDS.toNanos(Math.min(2000, 50L << Math.min(done.attempt, 6)));
                    }
                    if (now - done.againAt < 0) {
                        break;
                    }
                }
                if (run.nextChunkAt != 0 && System.nanoTime() - run.nextChunkAt < 0) {
                    break; // its rate, or a pause after a chunk could not get the table's lock
                }
                if (changed) {
                    store.saveProgress(run.backfill.id(), run.backfill.tables(), run.progress);
                }
                forgetRead(read);
                // whole the first time again, then its first half, of that its first half, and so on down to one
                // row (the rest read after it): a row changed between the watermarks at every reading (updated
                // over and over, its TOASTed value left out of the stream) falls, in a part read fast, between
                // two of its changes; read whole, it never did
                int part = done.attempt > 0 && done.rows != null && done.rows.size() > 1 ? done.rows.size() / 2 : 0;
                // rows moved: in halves from the second reading on, as a range (a hot row among them falls between two
                // of its changes read alone), the other half read after it
                List<Watermarks.Moved> now = done.moved == null ? null
                        : done.attempt > 0 && done.moved.size() > 1 ? done.moved.subList(0, done.moved.size() / 2) : done.moved;
                Chunk again = done.moved != null
                        ? read(run, done.table.qualifiedName(), null, null, -1, List.copyOf(now))
                        : read(run, done.table.qualifiedName(), done.after, done.lastOfTable ? null : done.last,
                                part > 0 ? part : done.lastOfTable ? 0 : -1, null);
                if (again == null) {
                    return true;
                }
                again.attempt = done.attempt + 1;
                again.readings = done.readings + 1;
                again.since = done.since;
                warnIfReadOverAndOver(run, done, outcome.why());
                if (done.moved != null) {
                    List<Watermarks.Moved> later = new ArrayList<>(again.cut ? cutAt(again, now) : List.of());
                    later.addAll(done.moved.subList(now.size(), done.moved.size()));
                    putBack(run.backfill.id(), later);
                    run.inFlight.pollFirst();
                    run.inFlight.addFirst(again); // rows moved: the table's position is not theirs
                    return true;
                }
                again.cut |= part > 0 && again.rows.size() >= part;
                run.inFlight.pollFirst();
                if (again.cut) {
                    // it stopped at its byte bound, or its part: the rest of the range is read again once it is done
                    run.inFlight.addFirst(done.rest(again.last));
                } else {
                    again.lastOfTable = done.lastOfTable;
                    if (!done.lastOfTable || again.last == null) {
                        again.last = done.last; // the next chunk starts after it
                    }
                }
                run.inFlight.addFirst(again);
                return true;
            }
            run.inFlight.pollFirst();
            String table = done.table.qualifiedName();
            Backfill.TableProgress before = run.progress.getOrDefault(table, Backfill.TableProgress.NONE);
            boolean moves = done.moved == null; // a moved row's reading counts its row, and does not move the position
            if (!moves) {
                read.addAll(done.moved);
            }
            run.progress.put(table, new Backfill.TableProgress(moves && done.last != null ? done.last : before.cursor(),
                    before.rowsSent() + outcome.sent(), moves && done.lastOfTable || before.done(), done.table.oid(),
                    done.table.keyShape(), done.table.chunkKeyNames()));
            if (moves && done.lastOfTable && !run.fromStart.contains(table)) {
                // read to its end: a row moved in it now was read, or streamed whole, before it moved
                watermarks.unwatch(run.backfill.id(), done.table.oid());
            }
            Subscription subscription = inForce.get().stream()
                    .filter(s -> s.id().equals(run.backfill.subscriptionId())).findFirst().orElse(null);
            if (subscription != null && outcome.sent() > 0) {
                counter.sent(subscription, outcome.sent());
            }
            changed = true;
        }
        if (changed) {
            store.saveProgress(run.backfill.id(), run.backfill.tables(), run.progress);
        }
        forgetRead(read);
        return changed;
    }

    /** Forgets the rows moved that were read again (their progress saved), and clears {@code read}. */
    private void forgetRead(List<Watermarks.Moved> read) throws SQLException {
        if (!read.isEmpty()) {
            store.forgetMoved(read);
            read.clear();
        }
    }

    /**
     * Reads one chunk between two watermarks: rows after {@code after} (null: from the start), up to
     * {@code upTo} when given, at most {@code limit} (0: no limit; -1: no limit, bounded by upTo). Null
     * when it could not be read: the backfill failed, or it is to be tried again with a smaller chunk.
     * With {@code moved}, the rows at those keys (rows moved there), {@code after} and {@code upTo} null.
     */
    private Chunk read(Run run, String name, List<String> after, List<String> upTo, int limit,
            List<Watermarks.Moved> moved)
            throws SQLException, InterruptedException {
        Backfill backfill = run.backfill;
        Connection c = connection();
        SnapshotTable table = run.described.get(name);
        Long at = run.describedAt.get(name);
        if (table == null || System.nanoTime() - at > DESCRIBE_EVERY.toNanos()) {
            // looked at again at most every DESCRIBE_EVERY (and whenever a chunk finds its columns changed): a table
            // dropped, or altered in its key, fails the backfill; its columns are taken as they are now
            // before the description: an ALTER in between makes the next chunk find other columns, and describe again
            String columns;
            try (PreparedStatement s = c.prepareStatement("SELECT " + COLUMNS + ", pg_catalog.has_table_privilege("
                    + "pg_catalog.to_regclass(?), 'SELECT')")) {
                String quoted = SnapshotTable.quoted(name);
                s.setString(1, quoted);
                s.setString(2, quoted);
                try (ResultSet rs = s.executeQuery()) {
                    rs.next();
                    columns = rs.getString(1);
                    // LOCK TABLE asks for SELECT on the whole table: a role granted only some columns reads unlocked
                    run.lockable.put(name, rs.getBoolean(2));
                }
            }
            try {
                table = SnapshotTable.describe(c, name, settings.publication(), settings.stateSchema());
            } catch (SnapshotTable.Refused e) {
                fail(backfill, e.getMessage());
                return null;
            }
            run.described.put(name, table);
            run.describedAt.put(name, System.nanoTime());
            run.describedColumns.put(name, columns);
        }
        SnapshotTable first = run.shapes.putIfAbsent(name, table);
        Backfill.TableProgress saved = run.progress.getOrDefault(name, Backfill.TableProgress.NONE);
        long began = first != null ? first.oid() : saved.oid();
        if (began != 0 && began != table.oid()) {
            fail(backfill, recreated(name));
            return null;
        }
        if (first == null && saved.key() != null && !saved.key().equals(table.keyShape())) {
            // a run resumed (after a pause, a restart, a failover) under another key order than its position's
            fail(backfill, "table " + name + "'s key changed since the backfill's saved position (" + saved.key()
                    + "; now " + table.keyShape() + "); start a new backfill to read it as it is now");
            return null;
        }
        if (first != null && !first.sameShape(table)) {
            if (!first.keyShape().equals(table.keyShape())) {
                // the same words as a resumed run's, which it may as well have been (a pause, an ALTER and a resume
                // between two rounds keep the run)
                fail(backfill, "table " + name + " was altered during the backfill: its key changed since the backfill's"
                        + " saved position (" + first.keyShape() + "; now " + table.keyShape() + "); start a new"
                        + " backfill to read it as it is now");
                return null;
            }
            if (!first.sameKey(table)) {
                fail(backfill, "table " + name + " was altered during the backfill (its replica identity or row filter"
                        + " changed); start a new backfill to read it as it is now");
                return null;
            }
            // columns added, dropped or retyped: the next chunks are read with the columns as they are now
            LOG.infof("backfill %s: table %s was altered; its next chunks are read with its columns as they are now",
                    backfill.id(), name);
            run.shapes.put(name, table);
        }
        int keyColumns = table.chunkKey().length;
        if (after != null && after.size() != keyColumns) {
            if (after.size() < keyColumns) {
                fail(backfill, "table " + name + "'s key has more columns than the backfill's saved position (" + after.size()
                        + "); start a new backfill to read it as it is now");
                return null;
            }
            // saved by an earlier walhook that read by a key index's INCLUDE columns too: its key columns come first,
            // and are unique on their own
            after = List.copyOf(after.subList(0, keyColumns));
        }
        if (moved == null) {
            // from before its first chunk's snapshot: a row moved out of reach of the reads from then on is read again
            watermarks.watch(backfill.id(), new Watermarks.Watch(table.oid(), name, table.chunkKeyNames()));
        } else if (moved.stream().anyMatch(m -> m.key().size() != keyColumns)) {
            fail(backfill, "table " + name + "'s key changed during the backfill (rows moved to other keys are to be read"
                    + " again by the key they had); start a new backfill to read it as it is now");
            return null;
        }
        String token = backfill.id() + ":" + tokens.incrementAndGet() + ":" + Long.toHexString(System.nanoTime());
        Chunk chunk = new Chunk(token, backfill.id(), backfill.subscriptionId(), table, run.filter, after);
        chunk.moved = moved;
        watermarks.expect(chunk);
        long started = System.nanoTime();
        boolean readingTable = false; // the statements that read the table itself: an error of theirs is the table's own
        try {
            emit(c, Watermarks.LOW + token);
            // before the snapshot: one the snapshot does not see though its commit came before the low
            // watermark was still in the proc array then, waiting for a standby
            java.util.Set<Long> committing = waitingForStandby(c, firstXid);
            c.setAutoCommit(false);
            // the chunk's read may rightly run until the server cancels it
            c.setNetworkTimeout(Runnable::run, (int) settings.statementTimeout().plus(SessionTimeout.LIMIT).toMillis());
            try (Statement s = c.createStatement()) {
                s.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ");
                if (Boolean.TRUE.equals(run.lockable.get(name))) {
                    // locked as the chunk's query locks it, but before the snapshot: an ALTER TABLE committed before
                    // it (the columns check below sees it) or waits for this chunk's commit; committed in between, a
                    // rewriting one (a column's type changed) hid every row from the snapshot, and the chunk read
                    // none. (A role granted only some columns cannot lock the table: it reads as before.)
                    s.execute("SET LOCAL lock_timeout = " + LOCK_WAIT.toMillis());
                    readingTable = true;
                    s.execute(table.lockSql());
                    readingTable = false;
                }
                s.execute("SET LOCAL statement_timeout = " + settings.statementTimeout().toMillis());
            }
            try (Statement s = c.createStatement();
                 ResultSet rs = s.executeQuery("SELECT pg_catalog.pg_current_snapshot()::text")) {
                rs.next(); // the transaction's snapshot, taken here: the chunk is read with it
                chunk.unseen = unseen(rs.getString(1)).committedBefore(committing);
            }
            List<Chunk.Row> rows = new ArrayList<>();
            int[] key = table.chunkKey();
            int columns = table.relation().columns().size();
            boolean limited = limit > 0;
            try (PreparedStatement s = c.prepareStatement(moved != null ? table.keysSql(moved.size()) : table.chunkSql(after != null, upTo != null, limited))) {
                int p = 1;
                if (moved != null) {
                    for (Watermarks.Moved m : moved) {
                        for (String v : m.key()) {
                            s.setString(p++, v);
                        }
                    }
                }
                if (after != null) {
                    for (String v : after) {
                        s.setString(p++, v);
                    }
                }
                if (upTo != null) {
                    for (String v : upTo) {
                        s.setString(p++, v);
                    }
                }
                if (limited) {
                    s.setInt(p, limit);
                }
                // rows of a table not read yet one at a time, then twice as many each time up to what the
                // byte bound takes of its largest row yet; fewer at once when a larger one comes
                long largest = run.largestRow.getOrDefault(name, 0L);
                int fetch = fetchSize(largest);
                int fetched = 0;
                s.setFetchSize(fetch);
                long bytes = 0;
                readingTable = true;
                try (ResultSet rs = s.executeQuery()) {
                    String[] last = null;
                    while (!chunk.cut && rs.next()) {
                        TupleData.Builder tuple = TupleData.builder();
                        String[] values = new String[columns];
                        long rowBytes = ROW_OVERHEAD;
                        for (int i = 0; i < columns; i++) {
                            values[i] = rs.getString(i + 1);
                            if (values[i] == null) {
                                tuple.nullValue();
                            } else {
                                tuple.text(values[i]);
                                rowBytes += ROW_OVERHEAD + 2L * values[i].length();
                            }
                        }
                        largest = Math.max(largest, rowBytes);
                        bytes += rowBytes;
                        chunk.cut = bytes >= CHUNK_BYTES;
                        int next = ++fetched >= fetch ? Math.min(2 * fetch, fetchSize(largest)) : Math.min(fetch, fetchSize(largest));
                        if (next != fetch) {
                            fetch = next;
                            fetched = 0;
                            rs.setFetchSize(fetch);
                        }
                        StringBuilder k = new StringBuilder();
                        last = new String[key.length];
                        for (int j = 0; j < key.length; j++) {
                            last[j] = values[key[j]];
                            if (j > 0) {
                                k.append('\0');
                            }
                            k.append(values[key[j]]);
                        }
                        String rowKey = k.toString();
                        // a moved row's own id: a read of its key before (another row, deleted since) may have been
                        // taken in by a consumer that skips an id it has seen
                        rows.add(new Chunk.Row(rowKey, idUnder(backfill.id(), run.idMac, name, moved == null ? rowKey
                                : rowKey + "\0moved at " + movedAt(moved, last)), tuple.build()));
                    }
                    chunk.last = last == null ? null : List.of(last);
                }
                readingTable = false;
                if (largest > 0) {
                    run.largestRow.put(name, largest);
                }
                chunk.bytes = bytes;
            }
            long now;
            String columnsNow;
            try (PreparedStatement s = c.prepareStatement("SELECT pg_catalog.to_regclass(?)::oid, " + COLUMNS)) {
                s.setString(1, table.quotedName());
                s.setString(2, table.quotedName());
                try (ResultSet rs = s.executeQuery()) {
                    now = rs.next() ? rs.getLong(1) : 0;
                    columnsNow = now == 0 ? null : rs.getString(2);
                }
            }
            if (now == table.oid() && !java.util.Objects.equals(columnsNow, run.describedColumns.get(name))) {
                // altered between its description and this chunk's snapshot: read it again with its columns as they are
                rollbackQuietly(c);
                watermarks.abandon(chunk);
                run.described.remove(name);
                return null;
            }
            if (now != table.oid()) {
                rollbackQuietly(c);
                watermarks.abandon(chunk);
                fail(backfill, now == 0 ? "table " + name + " was dropped or renamed during the backfill" : recreated(name));
                return null;
            }
            chunk.lastOfTable = !chunk.cut && (limit == 0 || limited && rows.size() < limit);
            chunk.rows = List.copyOf(rows);
            chunk.connection = connections;
            emit(c, Watermarks.HIGH + token);
            c.commit();
            chunk.committedAt = System.nanoTime();
        } catch (RuntimeException e) {
            watermarks.abandon(chunk); // its window must not stay open
            rollbackQuietly(c);
            throw e;
        } catch (SQLException e) {
            watermarks.abandon(chunk);
            rollbackQuietly(c);
            if ("57014".equals(e.getSQLState())) {
                if (run.size <= 1) {
                    fail(backfill, "reading one row of " + name + " took longer than the statement timeout ("
                            + settings.statementTimeout() + ")");
                    return null;
                }
                run.size = Math.max(1, run.size / 4);
                LOG.warnf("backfill %s: a chunk of %s hit the statement timeout; reading %d rows at a time", backfill.id(),
                        name, run.size);
                return null;
            }
            if ("55P03".equals(e.getSQLState())) {
                // an ALTER TABLE (or VACUUM FULL, CLUSTER...) holds the table or waits for it: read again after a
                // pause growing from 1 s to 10 s, which the other backfills do not wait for
                run.lockWaits++;
                run.nextChunkAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(
                        Math.min(10_000, 1000L << Math.min(run.lockWaits - 1, 4)));
                return null;
            }
            if (readingTable && run.staleReads < 3 && ("42703".equals(e.getSQLState())
                    || e.getSQLState() != null && (e.getSQLState().startsWith("22") || e.getSQLState().startsWith("42"))
                    && alteredSinceDescribed(c, run, name))) {
                // read by its description's columns, types and collations, altered since (a column dropped, a key
                // column retyped): described again, and read again; a key changed fails the backfill then
                run.staleReads++;
                run.described.remove(name);
                return null;
            }
            if ("42P01".equals(e.getSQLState()) || "42703".equals(e.getSQLState())) {
                fail(backfill, "table " + name + " was dropped or altered during the backfill: "
                        + shown(e, backfill, name));
                return null;
            }
            if (e.getSQLState() != null && (e.getSQLState().startsWith("22") || e.getSQLState().startsWith("42"))) {
                fail(backfill, "cannot read " + name + ": " + shown(e, backfill, name));
                return null;
            }
            if (readingTable && ownError(e) && alive(c)) {
                // the server refused this table's read (a function of a row security policy raising, an
                // internal error on one relation, ...): tried again alone, then failed; not every backfill's wait.
                // Not so the watermarks' writes, the snapshot or the commit: a standby or a server near
                // wraparound refuses those for every backfill (XX000, 54000), which waits for the server
                refused(run, "cannot read " + name + ": " + shown(e, backfill, name));
                return null;
            }
            throw e;
        } finally {
            try {
                if (!c.isClosed()) {
                    c.setAutoCommit(true);
                    c.setNetworkTimeout(Runnable::run, (int) SessionTimeout.LIMIT.toMillis());
                }
            } catch (SQLException ignored) {
                // the connection is broken: the next call opens another
            }
        }
        run.staleReads = 0;
        run.lockWaits = 0;
        run.refusals = 0;
        adapt(run, Duration.ofNanos(System.nanoTime() - started), chunk.rows.size());
        return chunk;
    }

    /**
     * Whether the table's columns are no longer those of its description: a chunk the server refused was then read
     * by columns, types or collations it no longer has. False when the table is gone, or that cannot be told.
     */
    private boolean alteredSinceDescribed(Connection c, Run run, String name) {
        rollbackQuietly(c);
        try (PreparedStatement s = c.prepareStatement("SELECT " + COLUMNS)) {
            s.setString(1, SnapshotTable.quoted(name));
            try (ResultSet rs = s.executeQuery()) {
                // gone (null): the refusal says so itself
                String now = rs.next() ? rs.getString(1) : null;
                return now != null && !now.equals(run.describedColumns.get(name));
            }
        } catch (SQLException e) {
            return false;
        }
    }

    /** What a row and each of its values cost beside their characters, roughly (objects, arrays, the driver's bytes). */
    private static final long ROW_OVERHEAD = 48;

    /** Rows to fetch at a time when the largest row yet had {@code rowBytes} (0: unknown, one). */
    static int fetchSize(long rowBytes) {
        if (rowBytes <= 0) {
            return 1;
        }
        return (int) Math.max(1, Math.min(MAX_FETCH, CHUNK_BYTES / 4 / rowBytes));
    }

    /**
     * The transactions older than {@code first} (64 bits) whose commit records are written and that wait
     * for a synchronous standby before they leave the proc array (lower 32 bits): the stream may have
     * delivered them before this runner began, while snapshots still do not see them. Only those of
     * sessions the runner's role may look at (its own role's; every one with pg_read_all_stats).
     */
    static java.util.Set<Long> waitingForStandby(Connection c, long first) throws SQLException {
        java.util.Set<Long> waiting = new java.util.HashSet<>();
        // this database's only (a snapshot lists every database's transactions; another's changes none of its
        // tables), each xid with the epoch of the snapshot's xmax, which no running transaction is 2^31 from
        try (Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT a.backend_xid::text, pg_catalog.pg_snapshot_xmax("
                     + "pg_catalog.pg_current_snapshot())::text FROM pg_catalog.pg_stat_activity a WHERE a.wait_event ="
                     + " 'SyncRep' AND a.backend_xid IS NOT NULL AND a.datid = (SELECT oid FROM pg_catalog.pg_database"
                     + " WHERE datname = pg_catalog.current_database())")) {
            while (rs.next()) {
                long xid = widened(Long.parseLong(rs.getString(1)), Long.parseLong(rs.getString(2)));
                if (xid < first) {
                    waiting.add(xid & 0xFFFF_FFFFL);
                }
            }
        }
        return waiting;
    }

    /**
     * Whether waits for synchronous standbys of every session can be seen: none are configured, or the
     * role sees every session's wait (superuser, pg_read_all_stats).
     */
    private static final String SEES_STANDBY_WAITS = "pg_catalog.current_setting('synchronous_standby_names') = ''"
            + " OR (SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = current_user)"
            + " OR pg_catalog.pg_has_role('pg_read_all_stats', 'MEMBER')";

    /** A 32-bit xid as the 64-bit one within 2^31 of {@code near} (a 64-bit xid). */
    static long widened(long xid32, long near) {
        return near + (int) (xid32 - near); // the difference modulo 2^32, signed
    }

    /** What a {@code pg_snapshot}'s text ({@code xmin:xmax:xip,...}) does not see, in 32-bit xids. */
    static Chunk.Unseen unseen(String snapshot) {
        String[] parts = snapshot.split(":", 3);
        if (parts.length != 3) {
            throw new IllegalArgumentException("not a snapshot (xmin:xmax:xip,...): " + snapshot);
        }
        java.util.Set<Long> xids = new java.util.HashSet<>();
        if (!parts[2].isEmpty()) {
            for (String xid : parts[2].split(",")) {
                xids.add(Long.parseLong(xid.strip()) & 0xFFFF_FFFFL);
            }
        }
        return new Chunk.Unseen(Long.parseLong(parts[1].strip()) & 0xFFFF_FFFFL, java.util.Set.copyOf(xids));
    }

    /** Smaller chunks when one takes longer than the target, back up to the asked size when quick; the rate limit. */
    private void adapt(Run run, Duration took, int rows) {
        long target = settings.chunkTarget().toNanos();
        if (took.toNanos() > target && run.size > 10) {
            run.size = Math.max(10, run.size / 2);
        } else if (took.toNanos() < target / 4 && run.size < run.backfill.chunkSize()) {
            run.size = Math.min(run.backfill.chunkSize(), run.size * 2);
        }
        Integer rate = run.backfill.maxRowsPerSecond();
        if (rate != null && rows > 0) {
            run.nextChunkAt = System.nanoTime() + TimeUnit.SECONDS.toNanos(rows) / rate;
        }
    }

    /**
     * Whether an error of a statement reading a table may be the table's own rather than the
     * server's or the session's as a whole: not a connection lost (08), a transaction's state (25), a rollback
     * asked by the server (40), resources short (53), an operator's intervention (57) or a system
     * error (58). Those make every backfill wait; the others are counted against this one.
     */
    static boolean ownError(SQLException e) {
        String state = e.getSQLState();
        if (state == null || state.length() != 5) {
            return false; // pgjdbc's own, about the connection
        }
        return switch (state.substring(0, 2)) {
            case "08", "25", "40", "53", "57", "58" -> false;
            default -> true;
        };
    }

    private static boolean alive(Connection c) {
        try {
            return !c.isClosed() && c.isValid(5);
        } catch (SQLException e) {
            return false;
        }
    }

    /**
     * A step of this backfill failed for a reason of its own: it is tried again after a pause of 1 s,
     * doubling, the other backfills going on; failed at the {@link #REFUSALS}th time in a row.
     */
    private void refused(Run run, String error) throws SQLException {
        run.refusals++;
        if (run.refusals >= REFUSALS) {
            fail(run.backfill, error + " (" + REFUSALS + " times in a row)");
            return;
        }
        long pause = 1000L << (run.refusals - 1);
        run.nextChunkAt = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(pause);
        LOG.warnf("backfill %s tried again in %d ms (%d of %d times in a row): %s", run.backfill.id(), pause,
                run.refusals, REFUSALS, error);
    }

    /** A server's error as a backfill's {@code error} shows it; its whole text, which may quote rows, to the debug log. */
    private static String shown(SQLException e, Backfill backfill, String table) {
        LOG.debugf(e, "backfill %s, %s: the server's whole text", backfill.id(), table);
        return ServerErrorText.of(e);
    }

    private void fail(Backfill backfill, String error) throws SQLException {
        LOG.errorf("backfill %s failed: %s", backfill.id(), error);
        store.transition(backfill.id(), List.of(Backfill.State.RUNNING, Backfill.State.PAUSED), Backfill.State.FAILED,
                error);
        Run run = runs.remove(backfill.id());
        if (run != null) {
            run.inFlight.forEach(watermarks::abandon);
        }
    }

    /** Where the row at {@code key} moved there (the update's position), as its read's id takes it. */
    private static String movedAt(List<Watermarks.Moved> moved, String[] key) {
        List<String> values = java.util.Arrays.asList(key);
        return moved.stream().filter(m -> m.key().equals(values)).map(m -> m.lsn().toString()).findFirst().orElse("");
    }

    /**
     * A read event's id: the backfill's id and 128 bits of an HMAC-SHA256, under the backfill's own
     * key, of the row's table and key, so the same row of the same backfill has the same id across
     * chunks read again and restarts, two rows practically never share one (the durable queue keeps
     * one row per id), and an id shown (a log line, /status) says nothing of the row's key. A
     * backfill from before it had a key ({@code idKey} null) hashes them with SHA-256, as it did,
     * which a guessed key could be matched to.
     */
    static String eventId(UUID backfill, byte[] idKey, String table, String rowKey) {
        return idUnder(backfill, idKey == null ? null : idMac(idKey), table, rowKey);
    }

    /** {@link #eventId(UUID, byte[], String, String)} with the key's MAC made (once per run: it is the runner's). */
    private static String idUnder(UUID backfill, javax.crypto.Mac idMac, String table, String rowKey) {
        byte[] tableBytes = table.getBytes(StandardCharsets.UTF_8);
        byte[] keyBytes = rowKey.getBytes(StandardCharsets.UTF_8);
        byte[] digest;
        if (idMac == null) {
            try {
                MessageDigest sha = MessageDigest.getInstance("SHA-256");
                sha.update(tableBytes);
                sha.update((byte) 0);
                digest = sha.digest(keyBytes);
            } catch (NoSuchAlgorithmException e) {
                throw new IllegalStateException(e);
            }
        } else {
            idMac.update(tableBytes);
            idMac.update((byte) 0);
            digest = idMac.doFinal(keyBytes); // and the MAC is ready for the next id
        }
        return backfill + "-" + HexFormat.of().formatHex(digest, 0, 16);
    }

    private static javax.crypto.Mac idMac(byte[] idKey) {
        try {
            javax.crypto.Mac mac = javax.crypto.Mac.getInstance("HmacSHA256");
            mac.init(new javax.crypto.spec.SecretKeySpec(idKey, "HmacSHA256"));
            return mac;
        } catch (NoSuchAlgorithmException | java.security.InvalidKeyException e) {
            throw new IllegalStateException(e);
        }
    }

    private static void emit(Connection c, String content) throws SQLException {
        try (PreparedStatement s = c.prepareStatement("SELECT pg_catalog.pg_logical_emit_message(true, ?, ?)")) {
            s.setString(1, Watermarks.PREFIX);
            s.setString(2, content);
            s.execute();
        }
    }

    private Connection connection() throws SQLException {
        if (connection == null || connection.isClosed()) {
            Properties p = new Properties();
            p.setProperty("user", settings.user());
            if (settings.password() != null) {
                p.setProperty("password", settings.password());
            }
            p.setProperty("ApplicationName", "walhook-backfill");
            // text values exactly as the stream carries them: the replication session's settings, no binary transfer
            p.setProperty("options", io.walhook.change.ValueConverters.SESSION_OPTIONS);
            p.setProperty("binaryTransfer", "false");
            p.setProperty("tcpKeepAlive", "true");
            p.setProperty(SessionTimeout.SOCKET_TIMEOUT, SessionTimeout.SECONDS); // a chunk's read waits longer
            Connection opened = DriverManager.getConnection(settings.jdbcUrl(), p);
            try {
                io.walhook.change.ValueConverters.pinTimeZone(opened); // keys, and their rows' ids, in UTC
                if (firstXid < 0) {
                    // its commit, of no write, need not wait for a synchronous standby (one that is down would hold it)
                    try (Statement s = opened.createStatement();
                         ResultSet rs = s.executeQuery("SELECT pg_catalog.pg_current_xact_id()::text,"
                                 + " pg_catalog.set_config('synchronous_commit', 'local', true), "
                                 + SEES_STANDBY_WAITS)) {
                        rs.next();
                        firstXid = Long.parseLong(rs.getString(1));
                        if (!rs.getBoolean(3)) {
                            LOG.warnf("synchronous standbys are configured, and the role %s cannot see which other roles'"
                                    + " sessions wait for one (pg_stat_activity): a backfill chunk may, just after a restart"
                                    + " or take-over, send a row older than a change delivered before it; grant it"
                                    + " pg_read_all_stats", settings.user());
                        }
                    }
                }
            } catch (SQLException e) {
                try {
                    opened.close();
                } catch (SQLException ignored) {
                    // it failed already
                }
                throw e;
            }
            connection = opened;
            connections++;
            abandonChunksOfEarlierConnections();
        }
        return connection;
    }

    private static void rollbackQuietly(Connection c) {
        try {
            if (!c.isClosed() && !c.getAutoCommit()) {
                c.rollback();
            }
        } catch (SQLException ignored) {
            // broken: replaced on next use
        }
    }

    private void closeConnectionIfBroken() {
        try {
            if (connection != null && connection.isValid(5)) {
                return;
            }
        } catch (SQLException broken) {
            // closed below
        }
        closeConnection();
    }

    private void closeConnection() {
        if (connection != null) {
            try {
                connection.close();
            } catch (SQLException ignored) {
                // closing
            }
            connection = null;
        }
    }
}
