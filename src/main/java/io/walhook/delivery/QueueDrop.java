package io.walhook.delivery;

import java.util.concurrent.RejectedExecutionException;
import java.util.concurrent.TimeUnit;

import org.jboss.logging.Logger;

/**
 * Drops a deleted subscription's durable queue, {@link #BATCH} rows a turn of the
 * database threads, so other subscriptions' calls go between; rows another session holds (the
 * API dropping the same queue, an operator's transaction) are tried again from the timer, after
 * 200 ms doubling to 30 s. Waiting for them, as one unlimited statement did, two deletions took
 * both threads every subscription's queue needs, and a take-over waited behind them for as long as
 * the rows were held.
 */
final class QueueDrop {

    private static final Logger LOG = Logger.getLogger(QueueDrop.class);
    private static final long MAX_WAIT_MILLIS = 30_000;
    /** Rows dropped in one statement. */
    static final int BATCH = 10_000;

    private final Dispatcher.Context context;
    private final String id;
    /** How the subscription is named in the log: its name, or its id once nothing else is known of it. */
    private final String named;
    /** Told when the subscription turns out to be stored: its queue is kept, for a lane to deliver. */
    private final Runnable whenStored;
    private volatile String problem;

    private QueueDrop(Dispatcher.Context context, String id, String named, Runnable whenStored) {
        this.context = context;
        this.id = id;
        this.named = named;
        this.whenStored = whenStored;
    }

    /** Starts dropping the queue of subscription {@code id}, known in the log as {@code named}; returns at once. */
    static void start(Dispatcher.Context context, String id, String named) {
        start(context, id, named, () -> { });
    }

    /** As {@link #start(Dispatcher.Context, String, String)}; {@code whenStored} runs if the subscription is stored. */
    static void start(Dispatcher.Context context, String id, String named, Runnable whenStored) {
        new QueueDrop(context, id, named, whenStored).next(Lane.UNEXPECTED_FIRST_MILLIS);
    }

    private void next(long wait) {
        try {
            context.database().submit(() -> turn(wait));
        } catch (RejectedExecutionException stopping) {
            // walhook stops: the next start drops what is left of a deleted subscription's queue
        }
    }

    private void turn(long wait) {
        try {
            ParkedEventStore.Dropped dropped = context.store().dropSome(id, BATCH);
            if (dropped.stored()) {
                LOG.warnf("subscription %s is stored: its durable queue is kept, not dropped as a deleted one's", named);
                whenStored.run();
                return;
            }
            if (dropped.deleted() > 0) {
                LOG.debugf("subscription %s deleted: dropped %d events of its durable queue", named, dropped.deleted());
            }
            if (!dropped.left()) {
                return;
            }
            if (dropped.deleted() == BATCH) {
                next(wait); // more: behind the calls waiting meanwhile
                return;
            }
        } catch (java.sql.SQLException | RuntimeException e) {
            String now = String.valueOf(e.getMessage());
            if (!now.equals(problem)) {
                LOG.warnf("subscription %s deleted: its durable queue cannot be dropped yet (%s); trying again", named, now);
                problem = now;
            }
        }
        try {
            context.timer().schedule(() -> next(Math.min(wait * 2, MAX_WAIT_MILLIS)), wait, TimeUnit.MILLISECONDS);
        } catch (RejectedExecutionException stopping) {
            // walhook stops: the next start drops what is left of a deleted subscription's queue
        }
    }
}
