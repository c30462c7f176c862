package io.walhook.delivery;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.List;

/**
 * A subscription's unfinished jobs in arrival (commit) order, each released for sending once every
 * earlier unfinished job it must stay in order with ({@link Ordering#follows}) is finished: per-row
 * order, and nothing else held back. A failing job holds back the later jobs of its own row (of its
 * table, for a TRUNCATE or the first change after its table was rekeyed), while every other row
 * keeps flowing; Sequin calls these message groups.
 *
 * <p>Each job waits on the latest earlier job of each of its keys, so adding and finishing cost a
 * few map operations; a TRUNCATE, or a job ordered against everything, walks the unfinished jobs
 * once. A batch may carry a run of one row's changes, in order ({@link #take} with {@code chain}):
 * a batch is delivered or retried whole.
 *
 * <p>Not thread-safe: its lane's.
 */
final class KeyedQueue {

    /** The latest job of each row key. */
    private final LongMap<Job> lastOfKey = new LongMap<>();
    /** The latest table-wide job of each table. */
    private final LongMap<Job> lastOfTable = new LongMap<>();
    /** The latest job ordered against everything. */
    private Job lastBarrier;
    /** Jobs nothing earlier holds back, not yet taken, in the order they became free. */
    private final ArrayDeque<Job> ready = new ArrayDeque<>();
    /**
     * The same for background jobs (a backfill's rows): taken only when no other job is ready, so a
     * backfill's thousands of rows do not queue ahead of live changes of other rows. A row's own
     * changes still wait for its read event, and it for them, in order.
     */
    private final ArrayDeque<Job> readyLater = new ArrayDeque<>();
    /** Every unfinished job in arrival order (a list through the jobs themselves). */
    private Job first;
    private Job last;
    /**
     * The first unfinished job of the stream ({@link Job#background} false) in that list: a backfill's
     * rows go when no live change is ready, and may lie before it by the thousand.
     */
    private Job firstLive;
    private int size;
    private int taken;

    /** Appends a job; it is ready at once unless an earlier unfinished one holds it back. */
    void add(Job job) {
        job.pending = 0;
        job.finished = false;
        job.taken = false;
        job.successors = null;
        waitFor(lastBarrier, job);
        Ordering ordering = job.ordering;
        switch (ordering.scope()) {
            case ROW -> {
                waitFor(lastOfKey.put(ordering.key(), job), job);
                if (ordering.otherKey() != ordering.key()) {
                    waitFor(lastOfKey.put(ordering.otherKey(), job), job);
                }
                if (lastOfTable.size() > 0) {
                    waitFor(lastOfTable.get(ordering.table()), job);
                }
            }
            case TABLE, REKEYED -> {
                for (Job earlier = first; earlier != null; earlier = earlier.next) {
                    if (earlier.ordering.table() == ordering.table() || earlier.ordering.scope() == Ordering.Scope.ALL) {
                        waitFor(earlier, job);
                    }
                }
                lastOfTable.put(ordering.table(), job);
            }
            case ALL -> {
                for (Job earlier = first; earlier != null; earlier = earlier.next) {
                    waitFor(earlier, job);
                }
                lastBarrier = job;
            }
        }
        append(job);
        if (job.pending == 0) {
            release(job);
        }
    }

    private void release(Job job) {
        (job.background ? readyLater : ready).addLast(job);
    }

    private Job next() {
        Job job = ready.pollFirst();
        return job != null ? job : readyLater.pollFirst();
    }

    private void append(Job job) {
        job.previous = last;
        job.next = null;
        if (last == null) {
            first = job;
        } else {
            last.next = job;
        }
        last = job;
        if (firstLive == null && !job.background) {
            firstLive = job; // every unfinished one before it is a backfill's row
        }
        size++;
    }

    private static void waitFor(Job earlier, Job job) {
        if (earlier != null && earlier != job && !earlier.finished) {
            earlier.addSuccessor(job);
            job.pending++;
        }
    }

    boolean hasReady() {
        return !ready.isEmpty() || !readyLater.isEmpty();
    }

    /**
     * Takes up to {@code max} ready jobs to send together. With {@code chain}, a job whose only
     * holders are in this batch may join it after them (a batch keeps its order and is delivered or
     * retried whole); without, a batch holds no two jobs of one row.
     */
    List<Job> take(int max, boolean chain) {
        // a batch is a run of groups: a ready job and the jobs of its row that follow it there ({@link Job#chained});
        // groups share no row, so a batch can be split between them
        List<Job> batch = new ArrayList<>(Math.min(max, Math.max(ready(), 1)));
        ArrayDeque<Job> chained = chain ? new ArrayDeque<>() : null;
        while (batch.size() < max) {
            boolean follows = chained != null && !chained.isEmpty();
            Job job = follows ? chained.pollFirst() : next();
            if (job == null) {
                break;
            }
            job.chained = follows;
            job.taken = true;
            taken++;
            batch.add(job);
            // the jobs only it holds back may follow it in this batch, if all of them fit
            if (chain && job.successors != null && batch.size() + chained.size() + job.successors.size() <= max
                    && job.successors.stream().allMatch(successor -> successor.pending == 1)) {
                for (Job successor : job.successors) {
                    successor.pending = 0;
                    chained.addLast(successor);
                }
                job.successors = null; // later arrivals wait for it again, until it finishes
            }
        }
        return batch;
    }

    /** A taken job was delivered: the jobs it held back move on. */
    void finish(Job job) {
        if (job.finished) {
            return;
        }
        job.finished = true;
        if (job.successors != null) {
            for (Job successor : job.successors) {
                if (--successor.pending == 0 && !successor.finished) {
                    release(successor);
                }
            }
        }
        job.successors = null;
        if (job.taken) {
            taken--;
        }
        unlink(job);
        forget(job);
    }

    /**
     * Takes every job not taken out of the queue (they are queued durably instead), in arrival order;
     * the taken ones stay, holding back what later arrives for their rows.
     */
    List<Job> removeUntaken() {
        return removeAllBut(job -> true);
    }

    /**
     * Takes every job out of the queue but the taken ones {@code keep} accepts, in arrival order;
     * those stay, holding back what later arrives for their rows.
     */
    List<Job> removeAllBut(java.util.function.Predicate<Job> keep) {
        List<Job> removed = new ArrayList<>(size - taken);
        List<Job> kept = new ArrayList<>(taken);
        for (Job job = first; job != null; job = job.next) {
            (job.taken && keep.test(job) ? kept : removed).add(job);
        }
        ready.clear();
        readyLater.clear();
        lastOfKey.clear();
        lastOfTable.clear();
        lastBarrier = null;
        first = null;
        last = null;
        firstLive = null;
        size = 0;
        taken = 0;
        for (Job job : removed) {
            job.finished = true;
            job.successors = null;
            job.previous = null;
            job.next = null;
        }
        // the taken ones again, in their order: they wait for nothing (they are under way), and
        // what arrives later waits for them
        for (Job job : kept) {
            job.successors = null;
            job.pending = 0;
            append(job);
            taken++;
            switch (job.ordering.scope()) {
                case ROW -> {
                    lastOfKey.put(job.ordering.key(), job);
                    lastOfKey.put(job.ordering.otherKey(), job);
                }
                case TABLE, REKEYED -> lastOfTable.put(job.ordering.table(), job);
                case ALL -> lastBarrier = job;
            }
        }
        return removed;
    }

    private void unlink(Job job) {
        if (job == firstLive) {
            Job next = job.next;
            while (next != null && next.background) {
                next = next.next; // each row passed once: the next first live job lies after it
            }
            firstLive = next;
        }
        if (job.previous == null) {
            first = job.next;
        } else {
            job.previous.next = job.next;
        }
        if (job.next == null) {
            last = job.previous;
        } else {
            job.next.previous = job.previous;
        }
        job.previous = null;
        job.next = null;
        size--;
    }

    private void forget(Job job) {
        Ordering ordering = job.ordering;
        switch (ordering.scope()) {
            case ROW -> {
                lastOfKey.remove(ordering.key(), job);
                if (ordering.otherKey() != ordering.key()) {
                    lastOfKey.remove(ordering.otherKey(), job);
                }
            }
            case TABLE, REKEYED -> lastOfTable.remove(ordering.table(), job);
            case ALL -> {
                if (lastBarrier == job) {
                    lastBarrier = null;
                }
            }
        }
    }

    /**
     * Whether an unfinished job is ordered against everything ({@link Ordering.Scope#ALL}): the
     * latest one is, as each waits for the one before to finish.
     */
    boolean holdsBarrier() {
        return lastBarrier != null;
    }

    /** Unfinished jobs: taken (under way or retrying), ready, or held back. */
    int size() {
        return size;
    }

    int taken() {
        return taken;
    }

    int ready() {
        return ready.size() + readyLater.size();
    }

    /** Jobs held back by an earlier unfinished job of their row (or table). */
    int heldBack() {
        return size - taken - ready();
    }

    /** The ready job taken next, or null. */
    Job firstReady() {
        Job job = ready.peekFirst();
        return job != null ? job : readyLater.peekFirst();
    }

    /** The ready jobs, in the order they would be taken. */
    List<Job> readyJobs() {
        List<Job> jobs = new ArrayList<>(ready);
        jobs.addAll(readyLater);
        return List.copyOf(jobs);
    }

    /** The oldest unfinished job, or null. */
    Job oldest() {
        return first;
    }

    /** The oldest unfinished job of the stream (not a backfill's row), or null. */
    Job oldestLive() {
        return firstLive;
    }
}
