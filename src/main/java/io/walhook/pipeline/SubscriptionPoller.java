package io.walhook.pipeline;

import java.sql.SQLException;
import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.Supplier;

import org.jboss.logging.Logger;

import io.quarkus.runtime.Quarkus;
import io.walhook.backfill.BackfillStore;
import io.walhook.config.SourceUrl;
import io.walhook.delivery.Dispatcher;
import io.walhook.delivery.ParkedEventStore;
import io.walhook.routing.SubscriptionRegistry;
import io.walhook.routing.SubscriptionStore;
import io.walhook.source.ActiveLock;
import io.walhook.source.SubscriptionChanges;

/**
 * The thread that keeps an instance's subscriptions, backfills and lock current. API writes land
 * in the subscription table; every instance picks them up here, for its next transaction, as they
 * commit: their notification wakes it ({@link SubscriptionChanges}). It looks at the table itself
 * only while it cannot listen, and every {@link #FALLBACK} in case a notification failed. A
 * backfill another instance's API stored or changed wakes the backfill runner the same way. While
 * the instance is active it also checks every {@value #ROUND_MILLIS} ms that the session holding
 * its lock is alive (which renews its lease to send, {@link ActiveLock#sendableInNanos}, while it
 * stops too), takes the lock again on a new session when that one ended, and exits walhook when
 * another instance took it, so that two readers never race; and every 10 s that the publication is
 * still there ({@link io.walhook.source.PublicationWatch}).
 */
final class SubscriptionPoller {

    private static final Logger LOG = Logger.getLogger(SubscriptionPoller.class);
    /** The round, and how often the active instance checks its lock's session. */
    static final long ROUND_MILLIS = 2000;
    private static final long LOCK_CHECK_NANOS = TimeUnit.MILLISECONDS.toNanos(ROUND_MILLIS);
    private static final long PUBLICATION_LOOK_NANOS = io.walhook.source.PublicationWatch.EVERY.toNanos();
    /** How often the subscriptions are read though no notification said they changed. */
    static final Duration FALLBACK = Duration.ofSeconds(30);
    /** How long a stop waits for the round under way. */
    static final Duration STOP_WAIT = Duration.ofSeconds(10);

    private final SourceUrl source;
    private final SubscriptionRegistry registry;
    /** The dispatcher once the instance delivers (null before: a standby only keeps its registry current). */
    private final Supplier<Dispatcher> dispatcher;
    private final ActiveLock lock;
    /** Looked at every {@link io.walhook.source.PublicationWatch#EVERY} while the instance is active. */
    private final io.walhook.source.PublicationWatch publication;
    private final String slot;
    /** Whether this instance is active: it looks at its lock's session, which renews its lease to send. */
    private final BooleanSupplier active;
    /** Whether the lock is this instance's to keep: it is active and not stopping. */
    private final BooleanSupplier keepsLock;
    /** Wakes this instance's backfill runner, if it runs one. */
    private final Runnable backfillsChanged;
    /** Stops this instance's delivery at once: another instance holds the lock, and delivers. */
    private final Runnable lockLost;
    /** Has the replication stream let go: the database shuts down ({@link io.walhook.source.ReplicationReader#letGo}). */
    private final java.util.function.Consumer<String> shuttingDown;
    private final Thread thread;
    /** Set by {@link #stop}: what a round still under way fails on then is the stop's doing, not a problem. */
    private volatile boolean stopped;
    /** The dispatcher last told of the subscriptions in force, and the refresh that made them. */
    private Dispatcher syncedDispatcher;
    private long syncedGeneration = -1;

    SubscriptionPoller(SourceUrl source, SubscriptionRegistry registry, Supplier<Dispatcher> dispatcher, ActiveLock lock,
            io.walhook.source.PublicationWatch publication, String slot, BooleanSupplier active, BooleanSupplier keepsLock,
            Runnable backfillsChanged, Runnable lockLost, java.util.function.Consumer<String> shuttingDown) {
        this.active = active;
        this.publication = publication;
        this.source = source;
        this.registry = registry;
        this.dispatcher = dispatcher;
        this.lock = lock;
        this.slot = slot;
        this.keepsLock = keepsLock;
        this.backfillsChanged = backfillsChanged;
        this.lockLost = lockLost;
        this.shuttingDown = shuttingDown;
        this.thread = new Thread(this::run, "walhook-subscriptions");
        this.thread.setDaemon(true);
    }

    /**
     * A write committed that this instance could not read the subscriptions again for (its API's
     * own refresh failed): read at the next round, within {@value #ROUND_MILLIS} ms, not left to a
     * notification that may have failed too (then only {@link #FALLBACK} would find it).
     */
    void refreshOwed() {
        owed = true;
    }

    private volatile boolean owed;

    /**
     * Tells the dispatcher the subscriptions in force, when a refresh changed them since it was last
     * told: by the refresh that made them, not by whether the caller's did (the API's threads refresh
     * too, and call this after). One at a time, each with the latest refresh: never an older one last.
     * Completes once the lanes the latest sync changed ended their turns under way ({@link Dispatcher#sync}).
     */
    synchronized java.util.concurrent.CompletableFuture<Void> syncDelivery() {
        SubscriptionRegistry.InForce now = registry.inForce();
        Dispatcher delivering = dispatcher.get(); // after the refresh: a dispatcher made meanwhile saw it
        if (delivering == null) {
            syncedTurns = java.util.concurrent.CompletableFuture.completedFuture(null); // not delivering here
        } else if (delivering != syncedDispatcher || now.generation() != syncedGeneration) {
            syncedTurns = delivering.sync(now.subscriptions(), now.held(), id -> registry.inForce().ids().contains(id));
            backfillsChanged.run(); // a backfill whose subscription was held or missing may go on, or end
            syncedDispatcher = delivering;
            syncedGeneration = now.generation();
        }
        return syncedTurns; // synced by another caller already (the notification's): its turns are this refresh's too
    }

    /** The turns the last sync waits for. */
    private java.util.concurrent.CompletableFuture<Void> syncedTurns = java.util.concurrent.CompletableFuture.completedFuture(null);

    void start() {
        thread.start();
    }

    /**
     * Ends the thread, and waits up to {@link #STOP_WAIT} for a round under way (a JDBC call does not
     * end at an interrupt): the caller goes on to close what the round uses, and a failed start-up to
     * shut the container down under it.
     */
    void stop() {
        stopped = true;
        thread.interrupt();
        if (Thread.currentThread() != thread) {
            try {
                thread.join(STOP_WAIT.toMillis());
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private void run() {
        try (SubscriptionChanges changes = new SubscriptionChanges(source.jdbcUrl(), source.user(), source.password(),
                List.of(SubscriptionStore.CHANNEL, BackfillStore.CHANNEL, ParkedEventStore.DROPS_CHANNEL,
                        ParkedEventStore.REPLAYS_CHANNEL))) {
            run(changes);
        } catch (RuntimeException | Error e) {
            if (stopped) {
                return;
            }
            // this thread also takes the slot's lock again after its session ended: without it, no instance would
            // stream after the next blip; a restart resumes from the checkpoint
            LOG.errorf(e, "watching subscriptions and the slot's lock ended unexpectedly (%s): walhook stops", e);
            Quarkus.asyncExit(1);
        }
    }

    private void run(SubscriptionChanges changes) {
        String lastProblem = null;
        String lastLockProblem = null;
        long lastLockCheck = System.nanoTime();
        long lastPublicationLook = System.nanoTime();
        long lastRefresh = System.nanoTime();
        while (!Thread.currentThread().isInterrupted()) {
            Set<String> notified;
            try {
                // until a write is notified, or the next lock check is due
                long untilCheck = LOCK_CHECK_NANOS - (System.nanoTime() - lastLockCheck);
                notified = changes.await(Duration.ofMillis(Math.max(1, Math.min(ROUND_MILLIS, untilCheck / 1_000_000))));
            } catch (InterruptedException e) {
                return;
            }
            try {
                Dispatcher delivering = dispatcher.get();
                if (delivering != null) {
                    // dead letters dropped through the API of any instance: the lane holds none of them back
                    if (changes.opened()) {
                        // the session was away, or opened only now while the lanes had read their queues already: drops
                        // and replays told meanwhile were heard by no one
                        delivering.readQueuesAgain();
                        delivering.retryDisabled();
                    }
                    changes.payloads(ParkedEventStore.DROPS_CHANNEL).forEach(delivering::droppedHeard);
                    Set<String> replays = changes.payloads(ParkedEventStore.REPLAYS_CHANNEL);
                    if (!replays.isEmpty()) {
                        // a replay asked of any instance: this one delivers
                        registry.inForce().subscriptions().stream().filter(s -> replays.contains(s.id()))
                                .forEach(delivering::retryNow);
                    }
                }
                if (notified.contains(BackfillStore.CHANNEL) || !changes.listening()) {
                    backfillsChanged.run();
                }
                if (notified.contains(SubscriptionStore.CHANNEL) || !changes.listening() || lastProblem != null || owed
                        || System.nanoTime() - lastRefresh >= FALLBACK.toNanos()) {
                    lastRefresh = System.nanoTime();
                    owed = false; // before the read: a write told after it is read at the next round
                    registry.refresh();
                    syncDelivery();
                }
                lastProblem = null;
            } catch (SQLException | RuntimeException e) {
                if (stopped) {
                    return; // what the round used is going away
                }
                // whatever it is, this thread goes on: it also watches the lock
                String problem = String.valueOf(e.getMessage());
                if (!problem.equals(lastProblem)) {
                    if (e instanceof SQLException) {
                        LOG.warnf("cannot reload subscriptions: %s", problem);
                    } else {
                        LOG.errorf(e, "cannot reload subscriptions: %s", problem);
                    }
                    lastProblem = problem;
                }
            }
            if (System.nanoTime() - lastPublicationLook >= PUBLICATION_LOOK_NANOS && active.getAsBoolean()) {
                lastPublicationLook = System.nanoTime();
                try {
                    publication.look();
                } catch (SQLException | RuntimeException e) {
                    if (stopped) {
                        return;
                    }
                    // the database away: the stream, the lock and the reload say so; looked at again next time
                    LOG.debugf("cannot look at the publication: %s", e.getMessage());
                }
            }
            if (System.nanoTime() - lastLockCheck >= LOCK_CHECK_NANOS && active.getAsBoolean()) {
                lastLockCheck = System.nanoTime();
                try {
                    if (!keepsLock.getAsBoolean()) {
                        lock.stillHeld(); // stopping: the lease goes on while deliveries drain, or runs out; no new session
                    } else if (!keepLock()) {
                        return;
                    }
                    lastLockProblem = null;
                } catch (SQLException | RuntimeException e) {
                    if (stopped) {
                        return;
                    }
                    if (e instanceof SQLException sql && sql.getSQLState() != null && sql.getSQLState().startsWith("57P")) {
                        // a shutdown (or crash) ended the lock's session and refuses a new one: its walsender waits
                        // for the stream to confirm what it sent, which deliveries without the lock cannot
                        shuttingDown.accept("the database is shutting down (" + sql.getMessage() + "): letting go of"
                                + " the stream so that it can");
                    }
                    String problem = String.valueOf(e.getMessage());
                    if (!problem.equals(lastLockProblem)) {
                        LOG.warnf("cannot take the lock of slot %s again: %s", slot, problem);
                        lastLockProblem = problem;
                    }
                }
            }
        }
    }

    /** False when another instance holds the lock now; this one then stops, so two readers never race. */
    private boolean keepLock() throws SQLException {
        if (lock.stillHeld()) {
            return true;
        }
        if (!lock.tryAcquire()) {
            // before anything else: the other instance delivers what this one holds, and a retry sent from here
            // after its newer change of the same row would undo it at the destination
            lockLost.run();
            LOG.errorf("lost the lock of slot %s to another instance; stopped delivering, and stopping so that one"
                    + " stays active", slot);
            Quarkus.asyncExit(1);
            return false;
        }
        LOG.warnf("the session holding the lock of slot %s ended; took the lock again on a new session", slot);
        return true;
    }
}
