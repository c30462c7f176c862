package io.walhook.delivery;

import java.sql.SQLException;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;

import org.jboss.logging.Logger;
import org.jboss.logging.MDC;

import io.walhook.change.ChangeEvent;
import io.walhook.change.Operation;
import io.walhook.change.RelationInfo;
import io.walhook.config.UrlAuthority;
import io.walhook.delivery.Transport.Attempt;
import io.walhook.delivery.Transport.Outcome;
import io.walhook.routing.Destination;
import io.walhook.routing.EventEncoder;
import io.walhook.routing.Subscription;

/**
 * One subscription's delivery: its jobs in per-row order ({@link KeyedQueue}), the requests under
 * way or waiting to be retried, and its durable queue. It has one state, changed only on its own
 * turn: routing, transports, timers and the state database post to its inbox, and the lane runs on
 * a shared pool, one turn at a time. No thread is held while a request is under way.
 *
 * <p>Two modes. <b>Direct</b>: events go from memory to the destination, their acknowledgement
 * waiting on the delivery; a failing request is retried with backoff while every other row keeps
 * flowing. <b>Durable</b>: once a request has failed for its retry window (or attempts), once the
 * memory budget is full while requests fail, or while the subscription is paused or disabled,
 * every event in memory is written to the durable queue in order, which acknowledges it, and so is
 * every later event; the lane delivers from the queue continuously at the destination's pace,
 * with the same per-row isolation, and goes back to direct once the queue is empty.
 */
final class Lane {

    private static final Logger LOG = Logger.getLogger(Lane.class);
    /** The first wait before a state-database call that failed unexpectedly is tried again. */
    static final long UNEXPECTED_FIRST_MILLIS = 200;
    /** How often lanes that cannot reach their durable queues say so, together. */
    private static final long QUEUE_WARNING_NANOS = TimeUnit.SECONDS.toNanos(10);
    /** Rows written to the durable queue in one transaction. */
    static final int WRITE_CHUNK = 1000;
    /** Bytes of events written to the durable queue in one transaction, at most (one event whatever its size). */
    static final long WRITE_CHUNK_BYTES = 4L << 20;
    /** Rows read from the durable queue at once. */
    static final int PAGE = 1000;
    /** Durable jobs kept in memory at most: the next page is read once fewer are. */
    static final int RESIDENT_LIMIT = 4 * PAGE;
    /**
     * What a row read back from the durable queue holds in memory besides its body, counted
     * generously (a job, its ids, headers and place in the queue: {@link Job#memoryBytes()} counts
     * 640 and the headers' text): a page's rows take at most half the room it is read into, its
     * bodies the other half.
     */
    static final long ROW_OVERHEAD = 1024;
    /** {@link #ROW_OVERHEAD}, or more when this lane's rows were seen to hold more (their headers: CloudEvents'). */
    private long rowOverhead = ROW_OVERHEAD;
    /**
     * How long the oldest failing request must have failed before a full memory budget, most of it
     * behind failing requests, sends the events to the durable queue: a destination failing only
     * some requests keeps them in memory (and routing waits); one row failing for good does not.
     */
    static final Duration STUCK_AFTER = Duration.ofSeconds(5);
    /** A batch that failed this many attempts is split, so that one bad event does not hold back the others. */
    static final int SPLIT_AFTER = 2;
    /** AMQP messages under way at once. */
    static final int AMQP_WINDOW = io.walhook.routing.DeliveryLimits.MAX_IN_FLIGHT_AMQP;
    /**
     * The outcome of a request this lane gave up (its webhook moved to another host, its
     * subscription deleted): no attempt, and not counted as one; told apart by identity.
     */
    private static final Attempt GIVEN_UP = new Attempt(Outcome.RETRY, Optional.empty(), "given up");

    /** What a lane is doing, for /status and metrics. */
    record Status(String id, String name, String mode, long queued, long inFlight, long retrying, long heldBack,
            long durableBacklog, Instant oldestParkedCommit, double drainRate, long delivered, String lastError,
            boolean disabled, boolean paused) {
    }

    enum Mode { DIRECT, DURABLE }

    /**
     * A batch's {@code webhook-id}: its first event's id, its count, and 64 bits of SHA-256 over
     * every id in it, in order. The same events have the same id; others have another, so a
     * receiver that skips a {@code webhook-id} it has seen (as Standard Webhooks advises) never
     * skips an event it has not had. {@code <first>+<count>} alone named two batches cut
     * differently alike ({@code [e1, e3, e4]}, then after a crash or from the queue
     * {@code [e1, e2, e3]}), and such a receiver dropped {@code e2}.
     */
    static String batchId(List<Job> jobs) {
        java.security.MessageDigest sha;
        try {
            sha = java.security.MessageDigest.getInstance("SHA-256");
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
        for (Job job : jobs) {
            sha.update(job.eventId.getBytes(java.nio.charset.StandardCharsets.UTF_8));
            sha.update((byte) '\n');
        }
        return jobs.get(0).eventId + "+" + jobs.size() + "-" + java.util.HexFormat.of().formatHex(sha.digest(), 0, 8);
    }

    /** A request under way, or failed and waiting for its next attempt: the same jobs, the same id. */
    private static final class Outgoing {
        final List<Job> jobs;
        final String id;
        /** Formed as a batch (a JSON array, its id made from its events: {@link #batchId}), as it is sent at every attempt. */
        final boolean batched;
        int attempts;
        Instant firstFailure;
        /** Not tried again before this, as its destination's {@code Retry-After} asked (null: it asked nothing). */
        Instant notBefore;
        Instant due;
        boolean underWay;
        /** Under way as a retry ({@link #retriesUnderWay}). */
        boolean retryUnderWay;
        /** Where its latest attempt went: an answer from a destination replaced since speaks for that one only. */
        io.walhook.routing.Destination sentTo;
        /** The API dropped queue rows while it was under way: not retried if it fails, but read again (its rows may be gone). */
        boolean readAgain;
        /** Its latest attempt's outcome, to come; completed with {@link #GIVEN_UP} to give the attempt up. */
        CompletableFuture<Attempt> sending;

        Outgoing(List<Job> jobs, boolean batch) {
            this.jobs = jobs;
            // a batch's id is made from its events: the same run has the same id on every attempt
            this.batched = batch || jobs.size() > 1;
            this.id = batched ? batchId(jobs) : jobs.get(0).eventId;
            for (Job job : jobs) {
                attempts = Math.max(attempts, job.attempts);
            }
        }

        boolean hasVolatile() {
            for (Job job : jobs) {
                if (job.done != null) {
                    return true;
                }
            }
            return false;
        }
    }

    final String id;
    private final Dispatcher.Context context;
    private volatile Subscription subscription;
    /** The object of the registry's latest sync, null before one: routing does not replace it ({@link #follow}). */
    private Subscription syncedTo;
    /** The number of the sync that gave it {@link #syncedTo}: an older one's object is not taken after it. */
    private long syncNumber;
    private final Object followLock = new Object();
    private Transport transport;
    /** The subscription {@link #transport} was made for: it is made again when the destination changes. */
    private Subscription transportFor;

    // posted to from any thread
    private final ConcurrentLinkedQueue<Runnable> inbox = new ConcurrentLinkedQueue<>();
    private final AtomicBoolean scheduled = new AtomicBoolean();
    /** Volatile jobs handed over and not yet delivered or durably queued: what routing waits on. */
    private final AtomicLong volatileJobs = new AtomicLong();
    private final AtomicLong volatileBytes = new AtomicLong();
    private final Object room = new Object();
    /** How long routing has waited for this lane's room since it last had room to spare (nanoseconds). */
    private final AtomicLong heldRouting = new AtomicLong();
    /** Counts each time the hold is forgotten: a wait under way then does not add its time to the new count. */
    private final AtomicLong holdEpoch = new AtomicLong();
    /** Set by routing: this lane held it back past the hold limit while another lane starved. */
    private volatile boolean holdsOthers;
    /**
     * When it last went to its durable queue for holding routing back past its hold limit while
     * another lane starved, or went direct again after that (System.nanoTime): see {@link #holdLimitNanos}.
     */
    private volatile long heldOthersNanos = System.nanoTime() - (1L << 62);
    /** It delivers from its durable queue because it held routing back ({@link #holdsOthers}). */
    private boolean queuedForHolding;
    /** Set at the end of each turn: events wait to start (for a free request, or a place at the destination). */
    private volatile boolean backlogged;
    /** When routing last handed this lane events (System.nanoTime). */
    private volatile long handedOverNanos = System.nanoTime() - (1L << 62);
    /** When routing last began to wait for this lane's room ({@link #starving}). */
    private volatile long holdStart = System.nanoTime();
    /** Routing's own: jobs routed in the current chunk, handed over at its end. */
    final List<Job> routed = new ArrayList<>();
    /** Routing's own: per table, the key shape ({@link RelationInfo#keyShape}) of its last change routed here. */
    private final LongMap<int[]> keyShapes = new LongMap<>();
    /**
     * Per table: the queue row id and key shape of the newest row read from the durable queue that
     * had one; and the rows read as the first of their table after its key changed. Rows read
     * again (the cursor moved back) keep what their first read decided.
     */
    private final LongMap<long[]> readShapes = new LongMap<>();
    private final Set<Long> rekeyedRows = new HashSet<>();
    /** Places granted by destination gates and not yet taken by a turn (or given back at once, the lane closed). */
    private final ConcurrentLinkedQueue<DestinationGate> offered = new ConcurrentLinkedQueue<>();
    /** The gates this lane asked a place of and found none: closed, it waits at them no more. */
    private final Set<DestinationGate> waitedAt = java.util.concurrent.ConcurrentHashMap.newKeySet();
    /**
     * What a destination's gate calls to give this lane a place it waited for: taken on its next turn.
     * A lane closed (its dispatcher closed, the client and its gates live on) gives it back at once,
     * to the next lane waiting: no turn of it may ever run again.
     */
    private final java.util.function.Consumer<DestinationGate> granted = gate -> {
        offered.add(gate);
        if (this.closed) {
            giveBackOffered();
            return;
        }
        post(() -> {
            for (DestinationGate place; (place = offered.poll()) != null; ) {
                this.grants.add(place);
            }
            this.awaitingPlace = false;
        });
    };

    // the lane's own
    private Mode mode = Mode.DURABLE;
    /** {@link #mode} is direct, for routing's question of other lanes ({@link #starving}). */
    private volatile boolean direct;
    private final KeyedQueue queue = new KeyedQueue();
    /** Places granted by destination gates and not used yet: used by this turn's requests, or left at its end. */
    private final List<DestinationGate> grants = new ArrayList<>(1);
    /** The place {@link #reserve} took for the request {@link #start} starts next. */
    private DestinationGate reserved;
    /** {@link #reserve} found no place: the gate posts a turn with one ({@link #granted}), nothing else need wake the lane. */
    private boolean awaitingPlace;
    /**
     * While every attempt fails, one request at a time probes the destination, whichever waits: not
     * before this, which each failure meanwhile pushes back by the schedule's backoff (at most the
     * probe interval). Each waiting request's own backoff says only which is due, not that the
     * destination gets it: a lane with hundreds waiting sends no more than one with a single one.
     * Retries and new events take turns ({@link #newEventsTurn}), new ones within the lane's memory
     * ({@link #mayTryNew}): rows the destination refuses for good, three or more failing alone again
     * and again ({@link RetrySchedule#DIFFERENT}), look like a destination that is down, and the
     * changes to other rows after them must still be tried, and then flow.
     */
    private Instant nextProbe = Instant.MIN;
    /** Whether the next probe ({@link #nextProbe}) is a new event's, if one may go: the last was a retry. */
    private boolean newEventsTurn;
    /**
     * Requests waiting to be retried below which a durable lane may try a new event without weighing
     * their memory ({@link #mayTryNew}): a few requests are small next to any lane's share.
     */
    private static final int RETRIED_UNWEIGHED = 4;
    private int probesFailed;
    /** The destination in force at the last turn: another one is a replacement ({@link #followReplacement}). */
    private Destination checkedFor;
    /**
     * The subscription as this turn's pump found it: its requests reserve and start with it, so that
     * one replaced in the middle of the turn is followed ({@link #followReplacement}) before any goes to it.
     */
    private Subscription pumping;
    /** The subscription whose tables, operations and filter the last turn saw ({@link #followNarrowing}). */
    private Subscription matchedFor;
    /** Jobs routed under another definition than the lane's arrived since the last turn ({@link Job#routedBy}). */
    private boolean routedUnderOther;
    /** Every request not delivered yet, under way or waiting. */
    private final Set<Outgoing> outgoing = new java.util.LinkedHashSet<>();
    /** Failed requests waiting for their next attempt, soonest first. */
    private final java.util.PriorityQueue<Outgoing> retrying = new java.util.PriorityQueue<>(
            Comparator.comparing((Outgoing o) -> o.due));
    /** Failed requests, in the order they first failed (their retry windows end in this order). */
    private final Set<Outgoing> failing = new java.util.LinkedHashSet<>();
    private String outOfAttempts;
    private int underWay;
    /** Of those, retries: they take at most all requests but one while new changes wait ({@link #retriesYield}). */
    private int retriesUnderWay;
    /** When the last request started (System.nanoTime), once one has: the rate limit counts from it. */
    private long lastStartNanos;
    private boolean startedOnce;
    private long underWayJobs;
    private boolean writeTurn;
    /** Jobs at the head of {@link #toWrite} that must be written before anything else: what a switch to durable moved there. */
    private int mustWrite;
    /** Since when events go through the durable queue, when something sent them there (not at start-up). */
    private Instant queuedSince;
    private final ArrayDeque<Job> toWrite = new ArrayDeque<>();
    /** The chunk the durable queue's write under way holds: acknowledged once written, or when the subscription is deleted. */
    private List<Job> writing = List.of();
    private final List<Job> toDelete = new ArrayList<>();
    /** Changes the stream sent again after a restart, found in the queue behind a newer change of their row. */
    private final ReplayedRows replayed = new ReplayedRows();
    /** Whether the lane said in its log that its queue held more rows than {@link ReplayedRows} remembers. */
    private boolean warnedUnremembered;
    /** Whether the lane said in its log that it reads past changes held back behind refused ones. */
    private boolean warnedReadPast;
    private final Map<String, List<String>> toFail = new LinkedHashMap<>();
    /** Durable jobs in memory whose rows the cursor has not passed: a read of the queue skips them. */
    private final Set<String> resident = new HashSet<>();
    private int durableInMemory;
    /** The memory those durable jobs take ({@link Job#memoryBytes()}): this lane's part of the read-back budget. */
    private long residentBytes;
    /** Read-back memory taken for the page being read (the room it may fill), until the page is in. */
    private long readReserved;
    /** The last read found its next row too big for the room it had: no read until this lane frees some. */
    private boolean nextRowTooBig;
    private boolean busy;
    private long cursor;
    private boolean exhausted;
    /**
     * Reading past the later changes of rows refused for good: they filled what the lane holds, all
     * held back, and it read no further. From this row id on ({@link #NOT_SKIPPING} when it does not
     * read past any), the queue's rows of {@link #skippedKeys} are left where they are; the cursor
     * goes back to it once one of those rows' changes in memory is delivered ({@link #skipEnds}).
     */
    private long skippedFrom = NOT_SKIPPING;
    private static final long NOT_SKIPPING = Long.MAX_VALUE;
    /** The row keys whose later changes are read past, and their tables. */
    private final Set<Long> skippedKeys = new HashSet<>();
    private final Set<Long> skippedTables = new HashSet<>();
    /** The tables read past whole: a TRUNCATE of one followed a row read past. */
    private final Set<Long> skippedWholeTables = new HashSet<>();
    /**
     * Reading met a row ordered against everything (parked before orderings were kept): it reads
     * nothing more until it reads the rows read past again.
     */
    private boolean skipBarrier;
    /** A change of a row read past was delivered: its next durable turn reads the queue again from {@link #skippedFrom}. */
    private boolean skipEnds;
    /** Made, it waits for the dispatcher's answer whether its durable queue holds rows ({@link #probed}). */
    private boolean probing;
    /** The API dropped rows of its durable queue: its next durable turn counts the queue again ({@link #backlog}). */
    private boolean uncounted;
    /**
     * The API dropped rows of its durable queue: its next durable turn gives back what it read of
     * it ({@link #recount}), and nothing starts before.
     */
    private boolean readAgain;
    /**
     * Set by {@link #recount} the moment rows of its queue were dropped, before its turn takes the
     * message: a turn under way starts nothing more (it may be starting what it read back, the
     * dropped rows among them, while the API answers that none is sent).
     */
    private volatile boolean dropUnheard;
    /**
     * Set by a drop heard in the durable mode: what arrived and waits in memory to go direct is
     * written first (the write leaves out what was dropped, ParkedEventStore#append). A change the
     * stream sent again, kept in memory while the dropped row's first queueing was under way, was
     * sent a second time when the lane went direct.
     */
    private boolean writeBeforeDirect;
    private boolean writtenSinceRead = true;
    private final RetrySchedule schedule;
    private volatile boolean disabled;
    /** Its 410 in the state ({@link #recordGone}); the lane's. */
    private GoneRecord goneRecord = GoneRecord.NONE;
    /** Counts the lane's writes of its 410 (and forgets): an answer to an earlier one does not set {@link #goneRecord}. */
    private long goneGeneration;
    /** Writes of its 410 that failed in a row (the first is logged). */
    private int goneRetries;
    /** A replay was asked while the lane waited for its first look at its queue: a 410 that look read is cleared. */
    private boolean replayedWhileProbing;
    /** The lane's writes of its 410 to the state, in its order. */
    private volatile java.util.concurrent.CompletableFuture<Void> goneWrites =
            java.util.concurrent.CompletableFuture.completedFuture(null);
    /** The destination whose 410 disabled the lane: a replacement at another endpoint is not disabled for it. */
    private Destination disabledBy;
    private volatile boolean deleted;
    /**
     * Set by {@link #close} at shutdown: the lane starts nothing more and acknowledges nothing it did
     * not deliver or write; unlike {@link #deleted} it never discards anything (what is undelivered
     * is read again, from the slot or the durable queue, by the next instance).
     */
    private volatile boolean closed;
    /** Set at once by {@link #delete}, before its turn sets {@link #deleted}: routing stops using the lane. */
    private volatile boolean doomed;
    private long arrivals;
    private ScheduledFuture<?> wake;
    private Instant wakeAt;

    // read by /status from other threads
    private volatile long delivered;
    private volatile long backlog;
    private volatile String lastError;
    private volatile long deliveredFromQueue;
    private volatile Status last;
    /** Events delivered from the queue, and when, at the start of the drain rate's window; under {@link #rateLock}. */
    private long rateMark;
    private long rateMarkNanos = System.nanoTime();
    /** Events a second delivered from the queue over the last whole window; under {@link #rateLock}. */
    private double drainRate;
    private final Object rateLock = new Object();
    private static final long RATE_WINDOW_NANOS = TimeUnit.SECONDS.toNanos(5);

    /**
     * @param probed the dispatcher asks whether its durable queue holds rows, together with other
     *     new lanes' ({@link #probed}); else it reads its queue itself
     */
    Lane(Subscription subscription, Dispatcher.Context context, boolean probed) {
        this.id = subscription.id();
        this.subscription = subscription;
        this.context = context;
        this.schedule = new RetrySchedule(subscription.retry().maxBackoff().orElse(context.settings().maxBackoff()),
                context.settings().parkedRetryInterval());
        // the queue may hold rows from before a restart: they go first (direct once it is known empty)
        probing = probed;
        if (!probed) {
            post(() -> { });
        }
    }

    Subscription subscription() {
        return subscription;
    }

    /** Whether the subscription was deleted (the lane delivers nothing more). */
    boolean isDeleted() {
        return deleted || doomed;
    }

    // --- from routing ---------------------------------------------------------------------------

    /** Routing's chunk ends: the jobs routed to this lane go to it; waits while its budget is full. */
    void handOver() throws InterruptedException {
        if (routed.isEmpty()) {
            return;
        }
        List<Job> jobs = new ArrayList<>(routed);
        routed.clear();
        long bytes = 0;
        long now = System.nanoTime();
        for (Job job : jobs) {
            bytes += job.memoryBytes();
            job.handedOverNanos = now;
        }
        handedOverNanos = now;
        if (volatileJobs.getAndAdd(jobs.size()) == 0) {
            context.memory().holding(1);
        }
        volatileBytes.addAndGet(bytes);
        context.memory().take(bytes);
        post(() -> accept(jobs));
        awaitRoom();
    }

    /** Its own budget is full: {@code bufferEvents} undelivered events, or {@code bufferBytes} of them. */
    private boolean ownFull() {
        return volatileJobs.get() >= context.settings().bufferEvents() || volatileBytes.get() >= context.settings().bufferBytes();
    }

    /**
     * Full: its own budget, or its share of all lanes' memory while that is spent. Either way
     * routing waits for it, and a lane that holds routing back so for the hold limit while another
     * starves goes to its durable queue: slow subscriptions that each hold far less than their own
     * budget, but together all the memory there is, do not hold the others to their pace.
     */
    private boolean full() {
        return ownFull() || context.memory().spent() && volatileBytes.get() >= context.memory().share();
    }

    /**
     * Its own budget is full, or all lanes' together ({@link MemoryBudget}) while it holds some of
     * it: either way what it holds must move, to its destination or to its durable queue.
     */
    private boolean pressed() {
        return full() || volatileJobs.get() > 0 && context.memory().spent();
    }

    /** Which budget {@link #pressed} says is full, for the log line that sends it to its durable queue. */
    private String pressedBudget() {
        return ownFull() ? "its memory budget (" + context.settings().bufferEvents() + " events or "
                + (context.settings().bufferBytes() >> 20) + " MiB)" : "delivery's memory (" + context.memory() + ")";
    }

    /** Routing waits for all lanes' memory: a lane holding some of it looks at its events again. */
    void lookAgainIfHolding() {
        if (volatileJobs.get() > 0) {
            post(() -> { });
        }
    }

    /**
     * Whether this lane starves while routing waits for another since {@code holdStart}: it
     * delivers directly, is not paused or disabled, has nothing waiting to start (for a free
     * request or a place at its destination), was handed events within {@code window}
     * (nanoseconds) before the hold began or since (unless {@code idleCounts}: the hold lasted so
     * long that an idle one may have its next change waiting behind it), and holds less than a tenth
     * of its memory budget. An idle subscription (nothing for it lately) does not starve at first,
     * nor does one as busy as the lane routing waits for (it is as full). Counted from the hold's
     * start, not from now: routing held back hands nothing, so a lane it starves would otherwise
     * stop counting as starved just as the hold reaches its limit.
     */
    boolean starving(long holdStart, long window, boolean idleCounts) {
        return direct && !closed && !deleted && !disabled && !backlogged && !context.paused().test(id)
                && (idleCounts || holdStart - handedOverNanos < window)
                && volatileJobs.get() * 10 < context.settings().bufferEvents()
                && volatileBytes.get() * 10 < context.settings().bufferBytes();
    }

    /** The bytes of undelivered events it holds of delivery's memory. */
    long memoryHeld() {
        return volatileBytes.get();
    }

    /** Whether it delivers directly (its durable queue empty), not from its durable queue. */
    boolean isDirect() {
        return direct;
    }

    /** When routing last began to wait for this lane's room. */
    long holdStart() {
        return holdStart;
    }

    /**
     * How long routing waits for this lane's room, while another subscription starves, before the
     * lane goes to its durable queue: the settings' hold limit, or a tenth of it while the lane held
     * routing back so within {@link #HOLDS_REMEMBERED} hold limits (since it went direct again). A
     * receiver that hangs, answers for a while, then hangs again had routing wait the whole limit
     * (5 s; 30 s where the others were quiet) at every turn.
     */
    long holdLimitNanos() {
        long limit = context.settings().holdLimit().toNanos();
        return System.nanoTime() - heldOthersNanos < HOLDS_REMEMBERED * limit ? limit / REPEATED_HOLD_DIVISOR : limit;
    }

    /** Hold limits for which a lane that held routing back keeps the shorter one ({@link #holdLimitNanos}). */
    static final int HOLDS_REMEMBERED = 60;
    /** How much shorter a lane's hold limit is while it is remembered holding routing back. */
    static final int REPEATED_HOLD_DIVISOR = 10;

    /** How long routing has waited for this lane's room, in nanoseconds, counted as the hold limit counts it. */
    long heldFor() {
        return heldFor;
    }

    /** {@link #heldFor}: set by routing's wait before it asks whether another subscription starves. */
    private volatile long heldFor;

    /** The hold is counted afresh: after a switch of mode, or once the lane had room to spare. */
    private void forgetHold() {
        // zeroed before the new epoch shows: routing, seeing the new epoch, counts afresh from zero
        heldRouting.set(0);
        holdsOthers = false;
        holdEpoch.incrementAndGet();
    }

    /**
     * Back-pressure: while this subscription holds its whole memory budget of undelivered events,
     * routing waits. That happens while its destination is slower than the stream but takes
     * events; a failing one has them written to the durable queue instead, and routing goes on.
     * So does one that held routing back for the settings' hold limit in all while another
     * subscription ran out of events ({@link #starving}): the others are not held to the pace of
     * the slowest.
     */
    void awaitRoom() throws InterruptedException {
        awaitRoom(System.nanoTime(), Long.MAX_VALUE, false);
    }

    /**
     * As {@link #awaitRoom()}, for a hold of routing that began at {@code holdBegan} (which lanes
     * starve is counted from then), waiting {@code maxNanos} at most; with {@code forAll}, routing
     * waits for all lanes' memory, not this lane's room, and the wait ends once that has room.
     */
    void awaitRoom(long holdBegan, long maxNanos, boolean forAll) throws InterruptedException {
        if (!full()) {
            return;
        }
        post(() -> { }); // a turn that sees the budget full and decides
        long since = System.nanoTime();
        long began = since;
        holdStart = holdBegan;
        long epoch = holdEpoch.get();
        long limit = holdLimitNanos();
        try {
            while (full() && !deleted && !closed && System.nanoTime() - began < maxNanos
                    && (!forAll || context.memory().spent())) {
                if (ownFull()) {
                    synchronized (room) {
                        if (ownFull() && !deleted && !closed) {
                            room.wait(100);
                        }
                    }
                } else {
                    context.memory().awaitRoom(100); // its share of all lanes' memory: any lane delivering may end the wait
                }
                long now = System.nanoTime();
                if (holdEpoch.get() != epoch) {
                    // counted afresh from now (it went direct again, say, once its queue turned out empty): before, the
                    // rest of this hold was not counted at all, and a receiver that never answers held routing until
                    // ten of its requests had timed out
                    epoch = holdEpoch.get();
                    since = now;
                }
                heldFor = heldRouting.get() + (now - since);
                if (direct && !holdsOthers && heldFor >= limit && context.starvingElsewhere().test(this)) {
                    holdsOthers = true;
                    post(() -> { }); // its turn sends it to the durable queue
                }
            }
        } finally {
            if (holdEpoch.get() == epoch) {
                heldRouting.addAndGet(System.nanoTime() - since);
            }
        }
    }

    private void settled(Job job) {
        if (job.done != null) {
            settleAll(List.of(job));
        }
    }

    /**
     * Acknowledges the volatile ones of these jobs (runs of one transaction are counted down at
     * once) and frees their share of the memory budget.
     */
    private void settleAll(List<Job> jobs) {
        List<Runnable> acknowledgements = new ArrayList<>(jobs.size());
        long bytes = 0;
        for (Job job : jobs) {
            if (job.done != null) {
                acknowledgements.add(job.done);
                job.done = null;
                bytes += job.memoryBytes();
            }
        }
        if (acknowledgements.isEmpty()) {
            return;
        }
        io.walhook.checkpoint.AckTracker.completeAll(acknowledgements);
        boolean wasFull = full();
        long left = volatileJobs.addAndGet(-acknowledgements.size());
        if (left == 0) {
            context.memory().holding(-1);
        }
        long leftBytes = volatileBytes.addAndGet(-bytes);
        context.memory().release(bytes);
        // room to spare again, in its own budget and its share of all (whether or not that is spent now: routing
        // took the room back at once), or nothing held at all: a later hold counts afresh
        if ((left == 0 || left * 2 < context.settings().bufferEvents() && leftBytes * 2 < context.settings().bufferBytes()
                && leftBytes * 2 < context.memory().share()) && heldRouting.get() > 0) {
            forgetHold();
        }
        if (wasFull && !full()) {
            synchronized (room) {
                room.notifyAll();
            }
            context.memory().wake(); // routing may wait for its share on the budget's monitor
        }
    }

    // --- the turn -------------------------------------------------------------------------------

    /** Runs {@code message} on the lane's next turn. */
    void post(Runnable message) {
        inbox.add(message);
        if (scheduled.compareAndSet(false, true)) {
            execute();
        }
    }

    private void execute() {
        try {
            context.lanes().execute(this::turn);
        } catch (java.util.concurrent.RejectedExecutionException shuttingDown) {
            scheduled.set(false); // walhook stops: what is undelivered is read again on restart
            noTurnComes();
        }
    }

    private void turn() {
        // every log line of a turn names its subscription (JSON logs: the "mdc" object)
        MDC.put("subscription", subscription.name());
        MDC.put("subscription_id", id);
        try {
            Runnable message;
            while ((message = inbox.poll()) != null) {
                try {
                    message.run();
                } catch (RuntimeException e) {
                    contained(e);
                }
            }
            try {
                pump();
            } catch (RuntimeException e) {
                contained(e);
            }
            if (!grants.isEmpty()) {
                List<DestinationGate> unused = new ArrayList<>(grants);
                grants.clear(); // first: a place is left once, whatever leaving it does
                for (DestinationGate place : unused) {
                    place.leave(granted); // to the next lane waiting
                }
            }
            backlogged = queue.hasReady() || awaitingPlace;
            last = snapshot();
        } finally {
            MDC.remove("subscription");
            MDC.remove("subscription_id");
            scheduled.set(false);
            if (!inbox.isEmpty() && scheduled.compareAndSet(false, true)) {
                execute();
            }
        }
    }

    /** A lane's own failure stays in the lane: logged, shown in /status, and retried on the next tick. */
    private void contained(RuntimeException e) {
        String problem = "internal error: " + e;
        if (!problem.equals(lastError)) {
            LOG.errorf(e, "subscription %s: %s; delivery goes on", subscription.name(), problem);
        }
        lastError = problem;
        wakeIn(Duration.ofSeconds(1));
    }

    /**
     * Routing's own: what {@code event} must stay in order with here. The first change of a table
     * whose key shape changed since its last one routed here is ordered against its whole table
     * ({@link Ordering.Scope#REKEYED}): its row's earlier changes hash by another key.
     */
    Ordering ordering(ChangeEvent event) {
        RelationInfo relation = event.relation();
        if (relation == null || event.op() == Operation.TRUNCATE) {
            return Ordering.of(event);
        }
        int shape = relation.keyShape();
        int[] last = keyShapes.get(relation.oid());
        if (last == null) {
            keyShapes.put(relation.oid(), new int[] {shape});
            return Ordering.of(event);
        }
        boolean rekeyed = last[0] != shape;
        last[0] = shape;
        return Ordering.of(event, rekeyed);
    }

    private void accept(List<Job> jobs) {
        if (closed) {
            return; // shutting down: unacknowledged, read again from the slot
        }
        for (Job job : jobs) {
            job.arrival = ++arrivals;
            Subscription routedBy = job.routedBy;
            job.routedBy = null;
            if (routedBy != null && routedBy != subscription && !sameMatching(routedBy, subscription)) {
                routedUnderOther = true; // a crash's resend would be routed under the lane's: kept durably
            }
            if (deleted) {
                settled(job); // deleted: discarded, as the API said
            } else if (mode == Mode.DIRECT) {
                queue.add(job);
            } else {
                toWrite.addLast(job);
            }
        }
    }

    private boolean held() {
        return disabled || context.paused().test(id);
    }

    private void pump() {
        if (deleted || closed) {
            return;
        }
        pumping = subscription;
        followReplacement();
        followNarrowing();
        Instant now = context.clock().instant();
        if (mode == Mode.DIRECT) {
            String why = reasonToQueue(now);
            if (why != null) {
                queueDurably(why);
            }
        }
        if (mode == Mode.DURABLE && !busy) {
            durableWork(now);
        }
        long sendableIn = context.sendableIn().getAsLong();
        // rows of its queue were dropped: nothing read back before is sent until the rest is read again
        if (!held() && sendableIn == 0 && !((readAgain || dropUnheard) && mode == Mode.DURABLE)) {
            sendDue(now);
            sendNew(now);
        }
        scheduleWake(now, sendableIn);
    }

    /** Why the events in memory should go to the durable queue now, or null. */
    private String reasonToQueue(Instant now) {
        if (held()) {
            return disabled ? "a 410 Gone disabled it" : "it is paused";
        }
        if (outOfAttempts != null) {
            return outOfAttempts;
        }
        if (holdsOthers) {
            return "it held routing back for " + holdLimitNanos() / 1_000_000 / 1000.0 + " s while other"
                    + " subscriptions ran out of events: its destination takes them more slowly than the stream brings them";
        }
        if (pressed() && heldByRate(now)) {
            // slower than the stream by the operator's choice: holding every subscription back to its rate is not back-pressure
            return pressedBudget() + " is full behind its rate limit of " + subscription.limits().rate().get();
        }
        Duration window = subscription.retry().window().orElse(context.settings().retryWindow());
        if (!failing.isEmpty()) {
            Outgoing first = firstFailing();
            if (!now.isBefore(first.firstFailure.plus(window))) {
                return first.id + " still failing after its retry window of " + window + " (" + lastError + ")";
            }
            if (pressed()) {
                // full while the destination takes some events is back-pressure; full of what cannot move is not
                if (schedule.everyAttemptFailing(now)) {
                    return pressedBudget() + " is full and its destination takes nothing (" + lastError + ")";
                }
                long stuck = queue.heldBack() + retryingJobs();
                if (stuck * 2 >= volatileJobs.get() && !now.isBefore(first.firstFailure.plus(STUCK_AFTER))) {
                    return pressedBudget() + " is full and most of its events wait behind failing requests (" + lastError
                            + ")";
                }
            }
        }
        long waited = oldestWaitNanos();
        Duration slow = slowAfter(window);
        if (waited >= slow.toNanos()) {
            // nothing of it fails, and nothing is full: the destination answers, slowly (a receiver that trickles its
            // answer takes the request timeout each time), or at a rate limit under the stream's; unacknowledged, its
            // events held the slot's position, and the WAL behind it, for as long as it took
            return "its oldest event waited " + slow + " undelivered: its destination takes events more slowly than"
                    + " they come";
        }
        return null;
    }

    /**
     * How long an event may wait in memory, nothing of it failing, before what the lane holds goes to
     * the durable queue: its retry window, and no less than two request timeouts nor 10 s (a window
     * of a second, or one request taking longer than it, would send healthy bursts there).
     */
    private Duration slowAfter(Duration window) {
        Duration floor = context.settings().requestTimeout().multipliedBy(2);
        floor = floor.compareTo(SLOW_AFTER_LEAST) < 0 ? SLOW_AFTER_LEAST : floor;
        return window.compareTo(floor) < 0 ? floor : window;
    }

    static final Duration SLOW_AFTER_LEAST = Duration.ofSeconds(10);

    /**
     * How long the oldest event routed to it has waited undelivered, never attempted, nanoseconds
     * (-1 for none): past {@link #slowAfter}, what it holds goes to the durable queue
     * ({@link #reasonToQueue}). A backfill's row does not count (its chunk waits for it, not the
     * slot's position; counted, a slow destination copied a backfill's table into the queue), nor one
     * whose request failed (its retry window, from its first failure, says when it goes).
     */
    private long oldestWaitNanos() {
        Job oldest = queue.oldestLive();
        return oldest == null || oldest.durable || oldest.attempts > 0 ? -1 : System.nanoTime() - oldest.handedOverNanos;
    }

    /** The failing request that first failed (split batches keep their first failure, so the set is nearly in order). */
    private Outgoing firstFailing() {
        Outgoing first = null;
        for (Outgoing o : failing) {
            if (first == null || o.firstFailure.isBefore(first.firstFailure)) {
                first = o;
            }
        }
        return first;
    }

    private long retryingJobs() {
        long jobs = 0;
        for (Outgoing o : retrying) {
            jobs += o.jobs.size();
        }
        return jobs;
    }

    /**
     * Direct to durable: every volatile job in memory, under way or not, is written to the durable
     * queue in arrival order, which acknowledges them; those under way stay under way, the others
     * are read back from the queue.
     */
    private void queueDurably(String why) {
        if (holdsOthers) {
            heldOthersNanos = System.nanoTime(); // after the reason named the limit it held routing back for
        }
        queuedForHolding = holdsOthers || queuedForHolding && mode == Mode.DURABLE;
        mode = Mode.DURABLE;
        direct = false;
        forgetHold();
        queuedSince = context.clock().instant();
        outOfAttempts = null;
        failing.clear(); // windows and attempts count in direct mode only: queued, a request is retried as long as it fails
        LOG.warnf("subscription %s: %s; its events go to the durable queue and are delivered from there", subscription.name(),
                why);
        List<Job> writing = new ArrayList<>(queue.removeUntaken());
        for (Outgoing o : outgoing) {
            for (Job job : o.jobs) {
                if (job.done != null) {
                    writing.add(job);
                }
            }
        }
        writing.sort(Comparator.comparingLong(job -> job.arrival));
        writing.addAll(toWrite);
        toWrite.clear();
        toWrite.addAll(writing);
        mustWrite = toWrite.size();
        exhausted = false;
        context.metrics().parked(subscription, writing.size());
    }

    /**
     * The durable queue's work, one statement at a time, taking turns: writing what arrived,
     * deleting what was delivered, counting failed attempts, reading the next page. New arrivals
     * are written only behind rows not yet read; once every row was read they wait in memory while
     * the last ones are delivered, and the lane then goes direct with them.
     */
    private void durableWork(Instant now) {
        if (probing) {
            return; // what arrives waits in memory until the dispatcher says whether the queue holds rows
        }
        if (skipEnds) {
            skipEnds = false;
            readSkippedAgain(); // between its own calls: a page under way read past them too
        }
        if (readAgain && mustWrite == 0) {
            // between its own calls, everything in memory durable: the rows still there are read again, in order
            readAgain = false;
            giveBack(true);
        }
        if (uncounted) {
            // between its own calls: the rows it writes and deletes from now on are added and taken from this count;
            // one the server cannot count soon (a queue of millions) leaves the count as it was, not tried again
            uncounted = false;
            database(() -> context.store().countsWithin(List.of(id), Dispatcher.QUEUE_COUNT_LIMIT),
                    counts -> backlog = counts.getOrDefault(id, 0L));
            return;
        }
        if (mustWrite > 0) {
            writeNext();
            return;
        }
        boolean allRead = exhausted && !writtenSinceRead;
        if (allRead && durableInMemory == 0 && resident.isEmpty() && toDelete.isEmpty() && !held() && !dropUnheard
                && skippedFrom == NOT_SKIPPING && !(writeBeforeDirect && !toWrite.isEmpty())) {
            writeBeforeDirect = false;
            mode = Mode.DIRECT;
            direct = true;
            replayed.clear();
            readShapes.clear();
            rekeyedRows.clear();
            forgetHold();
            if (queuedForHolding) {
                heldOthersNanos = System.nanoTime(); // the shorter hold limit counts from here
                queuedForHolding = false;
            }
            backlog = 0;
            if (queuedSince != null) {
                LOG.infof("subscription %s: its durable queue is empty after %s; delivering directly again",
                        subscription.name(), Duration.between(queuedSince, context.clock().instant()));
                queuedSince = null;
            }
            while (!toWrite.isEmpty()) {
                queue.add(toWrite.pollFirst());
            }
            return;
        }
        // two kinds of round trip, taking turns: writing what arrived, and syncing (deleting what was
        // delivered, counting failed attempts, reading the next page), so neither starves the other
        boolean wantsWrite = !toWrite.isEmpty() && (!allRead || !mayWaitToGoDirect());
        // held, it sends nothing; while every attempt fails, only its next new probe (a batch) besides its retries
        boolean failingAll = schedule.everyAttemptFailing(now);
        // ready: jobs it could send next (not those waiting behind an earlier change of their row)
        if (held() || failingAll && queue.ready() > batchSize()) {
            giveBack(held()); // what it cannot send now is read again when it can
        }
        int untaken = queue.size() - queue.taken();
        int maxRows = held() ? 0 : failingAll ? batchSize() - queue.ready() : RESIDENT_LIMIT - durableInMemory;
        // nothing it could send now: all it holds is under way or to be retried, or held back behind those (later
        // changes of a row refused for good, counted as waiting they kept it from reading past a big row, for good),
        // within its share of the read-back memory
        boolean nothingWaiting = untaken == 0 || queue.ready() == 0 && residentBytes <= readBackShare();
        long room = allRead || maxRows <= 0 ? 0 : readRoom(nothingWaiting, untaken == 0);
        if ((durableInMemory >= RESIDENT_LIMIT || residentBytes >= readBackShare()) && !allRead && untaken > 0
                && queue.ready() == 0 && underWay == 0 && !retrying.isEmpty() && !held() && !skipBarrier
                && !queue.holdsBarrier()) {
            // its own room is full of changes held back behind refused ones, nothing else: it reads past them
            readPast();
            untaken = 0;
            nothingWaiting = true;
            maxRows = failingAll ? batchSize() : RESIDENT_LIMIT - durableInMemory;
            room = maxRows <= 0 ? 0 : readRoom(true, true);
        }
        boolean wantsSync = room > 0 || !toDelete.isEmpty() || !toFail.isEmpty();
        if (wantsWrite && (!wantsSync || writeTurn)) {
            writeTurn = false;
            writeNext();
        } else if (wantsSync) {
            writeTurn = true;
            sync(room, maxRows, nothingWaiting);
        }
    }

    /**
     * Durable jobs in memory go back to the durable queue alone (its cursor moves back before the
     * first of them, a job written while under way, with no row id of its own, back to the start),
     * to be read again when the lane can send them: the jobs not taken yet, and with
     * {@code retriesToo} (a paused or disabled subscription) those waiting to be retried as well,
     * so that only requests under way stay. A lane that cannot use its read-back memory does not
     * keep it while others could. Runs between database calls only (a page read meanwhile would
     * move the cursor past them again), once every job in memory is durable (must-writes done).
     */
    private void giveBack(boolean retriesToo) {
        if (queue.size() == queue.taken() && (!retriesToo || retrying.isEmpty())) {
            return;
        }
        List<Job> removed;
        if (retriesToo) {
            Set<Job> keep = new HashSet<>();
            for (java.util.Iterator<Outgoing> it = outgoing.iterator(); it.hasNext();) {
                Outgoing o = it.next();
                if (o.underWay || o.hasVolatile()) {
                    keep.addAll(o.jobs);
                } else {
                    it.remove();
                    retrying.remove(o);
                    failing.remove(o);
                }
            }
            removed = queue.removeAllBut(keep::contains);
        } else {
            removed = queue.removeUntaken();
        }
        long bytes = 0;
        int evicted = 0;
        for (Job job : removed) {
            // in the durable mode's queue every job is durable: routed ones wait in toWrite
            resident.remove(job.eventId);
            cursor = Math.min(cursor, job.rowId - 1);
            bytes += job.memoryBytes();
            evicted++;
        }
        durableInMemory -= evicted;
        exhausted = false;
        readBackReleased(bytes);
        if (retriesToo) {
            readSkippedAgain(); // what held them back may be among what went back
        }
    }
    /**
     * Lets go of every job not taken, all held back behind rows the destination refuses (under
     * way or retried, the taken ones stay): their rows' later changes in the queue, these and
     * those not read yet, are read past until one of those rows' changes is delivered. Every other
     * row's changes are read and sent meanwhile, but a TRUNCATE of a table holding rows read past is
     * read past with every later change of that table. Runs between database calls only.
     */
    private void readPast() {
        for (Job job = queue.oldest(); job != null; job = job.next) {
            if (job.taken && job.ordering.scope().tableWide()) {
                skippedWholeTables.add(job.ordering.table()); // a TRUNCATE refused: its table's later changes follow it
            }
        }
        List<Job> removed = queue.removeUntaken();
        long bytes = 0;
        for (Job job : removed) {
            resident.remove(job.eventId);
            skippedFrom = Math.min(skippedFrom, job.rowId);
            if (job.ordering.scope().tableWide()) {
                skippedWholeTables.add(job.ordering.table());
            } else {
                skippedKeys.add(job.ordering.key());
                skippedKeys.add(job.ordering.otherKey());
            }
            skippedTables.add(job.ordering.table());
            bytes += job.memoryBytes();
        }
        durableInMemory -= removed.size();
        readBackReleased(bytes);
        if (!warnedReadPast) {
            warnedReadPast = true;
            LOG.warnf("subscription %s: %d queued changes wait behind changes its destination refuses (%s), more than it"
                    + " holds in memory; it reads past them to deliver the other rows' changes, and reads them again once"
                    + " the refused ones are taken", subscription.name(), removed.size(), lastError);
        }
    }

    /** The rows read past are read again, in order, from the first of them: the cursor goes back. */
    private void readSkippedAgain() {
        if (skippedFrom == NOT_SKIPPING) {
            return;
        }
        cursor = Math.min(cursor, skippedFrom - 1);
        skippedFrom = NOT_SKIPPING;
        skippedKeys.clear();
        skippedTables.clear();
        skippedWholeTables.clear();
        skipBarrier = false;
        exhausted = false;
        replayed.readAgainFromEarlier();
    }

    /** Whether a change delivered may have held back changes read past: one of their rows, or of their tables. */
    private boolean heldBackReadPast(Ordering ordering) {
        return skippedKeys.contains(ordering.key()) || skippedKeys.contains(ordering.otherKey())
                || skippedWholeTables.contains(ordering.table())
                || ordering.scope().tableWide() && skippedTables.contains(ordering.table());
    }

    /**
     * Whether a change read from the queue is read past: a change of a row read past (it joins them:
     * a change of the row's key has its new key's later changes follow it), or one that must
     * follow such a row's (a TRUNCATE of its table), after which its whole table is read past.
     */
    private boolean readsPast(Ordering ordering) {
        if (skippedWholeTables.contains(ordering.table())
                || ordering.scope().tableWide() && skippedTables.contains(ordering.table())) {
            skippedWholeTables.add(ordering.table());
            return true;
        }
        if (ordering.scope() != Ordering.Scope.ROW
                || !skippedKeys.contains(ordering.key()) && !skippedKeys.contains(ordering.otherKey())) {
            return false;
        }
        skippedKeys.add(ordering.key());
        skippedKeys.add(ordering.otherKey());
        skippedTables.add(ordering.table());
        return true;
    }

    /**
     * The bytes of read-back memory the next page may fill, 0 to read nothing now. All lanes'
     * read-back memory (a quarter of delivery's memory, apart from what routing holds) is shared:
     * a lane fills its share of it (divided among the lanes holding some, itself included), or
     * half of what is free if that is more (lanes holding a little, one failing request each,
     * leave the rest to those draining), never more than is free. A lane with nothing to send in
     * memory ({@code nothingWaiting}: all it holds is under way or to be retried, or held back
     * behind those within its share) reads its next row whatever its size, and one holding only
     * what is under way or retried ({@code nothingUntaken}) even when none is free, so each makes
     * progress past a row that fails for good; one with rows waiting reads nothing once its next
     * row did not fit, until it frees some. How many rows it keeps at most is its caller's.
     */
    private long readRoom(boolean nothingWaiting, boolean nothingUntaken) {
        if (held() || skipBarrier || nextRowTooBig && !nothingWaiting) {
            return 0;
        }
        MemoryBudget readBack = context.readBack();
        long free = readBack.limit() - readBack.used();
        long room = Math.min(free, Math.max(readBackShare() - residentBytes, free / 2));
        if (room < 2 * rowOverhead) {
            // none free: only a lane holding nothing but what is under way or retried reads on (held-back jobs read
            // into no free memory, by every lane, went past the limit)
            return nothingUntaken ? 1 : 0;
        }
        return room;
    }

    /** This lane's share of the read-back memory: divided among the lanes holding some, itself included. */
    private long readBackShare() {
        MemoryBudget readBack = context.readBack();
        return readBack.limit() / Math.max(1, readBack.holders() + (residentBytes == 0 ? 1 : 0));
    }

    /** Read-back memory this lane now holds more of: durable jobs in memory. */
    private void readBackTaken(long bytes) {
        if (bytes <= 0) {
            return;
        }
        if (residentBytes == 0) {
            context.readBack().holding(1);
        }
        residentBytes += bytes;
        context.readBack().take(bytes);
    }

    /** Read-back memory this lane holds less of: durable jobs delivered or dropped from memory. */
    private void readBackReleased(long bytes) {
        if (bytes <= 0) {
            return;
        }
        residentBytes -= bytes;
        nextRowTooBig = false;
        context.readBack().release(bytes);
        if (residentBytes == 0) {
            context.readBack().holding(-1);
        }
    }

    /**
     * Whether new arrivals may stay in memory, unacknowledged, while the last rows read from the
     * queue are delivered, to go direct after them: only briefly, and only while nothing fails.
     */
    private boolean mayWaitToGoDirect() {
        Job oldest = toWrite.peekFirst();
        return !writeBeforeDirect && !full() && !held() && retrying.isEmpty()
                && System.nanoTime() - oldest.handedOverNanos < TimeUnit.SECONDS.toNanos(1);
    }

    private boolean writeNext() {
        List<Job> chunk = new ArrayList<>(Math.min(WRITE_CHUNK, toWrite.size()));
        long bytes = 0;
        // bounded in bytes too: what a chunk holds comes free only once it has committed, and routing may wait for it
        while (chunk.size() < WRITE_CHUNK && !toWrite.isEmpty()
                && (chunk.isEmpty() || bytes + toWrite.peekFirst().memoryBytes() <= WRITE_CHUNK_BYTES)) {
            Job next = toWrite.pollFirst();
            bytes += next.memoryBytes();
            chunk.add(next);
        }
        mustWrite = Math.max(0, mustWrite - chunk.size());
        write(chunk);
        return true;
    }

    /**
     * One round trip: the delivered rows deleted, failed attempts counted, and (when {@code room} >
     * 0) the next page, at most {@code maxRows} rows filling at most {@code room} bytes, its first
     * row whatever its size when {@code firstAnyway}.
     */
    private void sync(long room, int maxRows, boolean firstAnyway) {
        List<Job> gone = new ArrayList<>(toDelete);
        toDelete.clear();
        List<String> goneIds = new ArrayList<>(gone.size());
        gone.forEach(job -> goneIds.add(job.eventId));
        Map<String, List<String>> failures = new LinkedHashMap<>(toFail);
        toFail.clear();
        long after = cursor;
        // half the room for the rows' bookkeeping, half for their bodies
        int rows = room <= 1 ? 1 : (int) Math.min(Math.min(PAGE, maxRows), Math.max(1, room / 2 / rowOverhead));
        long bodies = room / 2;
        if (room > 0) {
            writtenSinceRead = false;
            readReserved = room;
            context.readBack().take(readReserved);
        }
        int limit = room > 0 ? rows : 0;
        database(() -> context.store().sync(id, goneIds, failures, after, limit, bodies, firstAnyway), synced -> {
            backlog = Math.max(0, backlog - synced.deleted());
            gone.forEach(job -> resident.remove(job.eventId));
            if (room > 0) {
                loaded(synced);
            }
        });
    }

    private void write(List<Job> chunk) {
        List<ParkedEventStore.Entry> entries = new ArrayList<>(chunk.size());
        for (Job job : chunk) {
            entries.add(new ParkedEventStore.Entry(job.eventId, job.commitLsn, job.commitTime, job.contentType,
                    job.headers, job.address, job.body, job.ordering.encode(), RowKeys.of(job), job.addressParts));
        }
        String error = lastError;
        int attempts = chunk.stream().mapToInt(job -> job.attempts).max().orElse(0);
        writing = chunk;
        database(() -> context.store().append(id, subscription.name(), entries, attempts, error), added -> {
            writing = List.of();
            backlog += added;
            writtenSinceRead = true;
            settleAll(chunk);
            for (Job job : chunk) {
                boolean underWayOrDone = job.taken;
                job.durable = true;
                if (underWayOrDone) {
                    // written while under way: kept in memory, skipped when the queue is read
                    resident.add(job.eventId);
                    if (job.finished) {
                        toDelete.add(job); // delivered while it was being written
                    } else {
                        durableInMemory++;
                        readBackTaken(job.memoryBytes());
                    }
                }
            }
        });
    }

    /** A page read from the durable queue joins the jobs in memory, behind what is there for its rows. */
    private void loaded(ParkedEventStore.Synced synced) {
        context.readBack().release(readReserved); // what the page takes is counted instead
        readReserved = 0;
        List<ParkedEventStore.Parked> page = synced.page();
        long bytes = 0;
        int superseded = 0;
        try {
            for (ParkedEventStore.Parked row : page) {
                Ordering stored = Ordering.decode(row.ordering());
                if (resident.contains(row.eventId())) {
                    cursor = Math.max(cursor, row.id());
                    shapeRead(stored, row.id(), false); // its table's key shape at that point
                    continue; // in memory already
                }
                boolean rekeyed = rekeyedOnRead(stored, row.id());
                if (skippedFrom != NOT_SKIPPING) {
                    if (stored.scope() == Ordering.Scope.ALL) {
                        skipBarrier = true; // it and what comes after it are read once the rows read past are
                        break;
                    }
                    if (readsPast(rekeyed ? stored.rekeyed() : stored)) {
                        cursor = Math.max(cursor, row.id());
                        shapeRead(stored, row.id(), rekeyed); // read again, it is ordered as now
                        continue;
                    }
                }
                cursor = Math.max(cursor, row.id());
                Job job = new Job(row.eventId(), row.commitLsn(), row.commitTime(), row.body(), row.contentType(),
                        row.headers(), row.address(), rekeyed ? stored.rekeyed() : stored);
                job.durable = true;
                job.rowId = row.id();
                job.attempts = row.attempts();
                job.rowKey = row.rowKey();
                job.addressParts = row.addressParts();
                if (replayed.supersededOnRead(job, context.store().writtenBefore(), context.store().resendsFrom(job.rowId),
                        context.store().earlierHistoryUpTo())) {
                    toDelete.add(job); // delivered before the crash that made the stream send it again
                    superseded++;
                    continue;
                }
                shapeRead(stored, row.id(), rekeyed); // of the rows kept only: a dropped one orders nothing
                job.arrival = ++arrivals;
                resident.add(job.eventId);
                durableInMemory++;
                bytes += job.memoryBytes();
                rowOverhead = Math.max(rowOverhead, job.memoryBytes() - job.body.length);
                queue.add(job);
            }
        } finally {
            readBackTaken(bytes); // what joined the queue, even if a row further on could not
        }
        if (skippedFrom == NOT_SKIPPING) {
            // rows read past may be resends older than a row of this run read after them: nothing is forgotten for it
            replayed.pageRead();
        }
        long unremembered = replayed.takeUnremembered();
        if (unremembered > 0 && !warnedUnremembered) {
            warnedUnremembered = true;
            LOG.warnf("subscription %s: its queue holds changes of more than %d rows written before this run; a change"
                    + " the stream sent again after the restart that is older than a queued change of a row not"
                    + " remembered is delivered again, after it", subscription.name(), ReplayedRows.LIMIT);
        }
        if (superseded > 0) {
            LOG.infof("subscription %s: %d changes the stream sent again after a restart were queued behind a newer change"
                    + " of their row, which they preceded and were delivered before it: dropped, not delivered again",
                    subscription.name(), superseded);
        }
        exhausted = !synced.more() && !skipBarrier;
        nextRowTooBig = page.isEmpty() && synced.more();
        if (!page.isEmpty() && queuedSince == null) {
            queuedSince = context.clock().instant(); // rows from before a restart
        }
    }

    /**
     * Whether a row read from the durable queue, in row id order, is the first of its table whose
     * key shape differs from the table's row kept before it: then it is ordered against the whole
     * table ({@link Ordering.Scope#REKEYED}). Routing decides this for the changes of one run; the
     * queue spans restarts, after which routing knows no table's earlier key, so its first change
     * of a rekeyed table was queued as a row change, hashed by a key its row's queued changes from
     * before the restart do not share. A row read again (the cursor moved back) keeps what its
     * first read decided.
     */
    private boolean rekeyedOnRead(Ordering stored, long rowId) {
        if (stored.shape() == Ordering.NO_SHAPE || stored.scope() != Ordering.Scope.ROW) {
            return false;
        }
        if (rekeyedRows.contains(rowId)) {
            return true;
        }
        long[] last = readShapes.get(stored.table());
        return last != null && rowId > last[0] && last[1] != stored.shape();
    }

    /** A row read from the durable queue and kept: its table's key shape from here on. */
    private void shapeRead(Ordering stored, long rowId, boolean rekeyed) {
        if (stored.shape() == Ordering.NO_SHAPE) {
            return;
        }
        long[] last = readShapes.get(stored.table());
        if (last == null) {
            readShapes.put(stored.table(), new long[] {rowId, stored.shape()});
        } else if (rowId > last[0]) {
            last[0] = rowId;
            last[1] = stored.shape();
        }
        if (rekeyed) {
            rekeyedRows.add(rowId);
        }
    }

    /** Runs a state-database call off the lane, until it succeeds; its result comes back on a turn. */
    private <T> void database(Dispatcher.SqlCall<T> call, java.util.function.Consumer<T> then) {
        busy = true;
        database(call, then, UNEXPECTED_FIRST_MILLIS);
    }

    /**
     * As {@link #database(Dispatcher.SqlCall, java.util.function.Consumer)}: a call that fails is
     * tried again after {@code wait} ms (doubling to 30 s) from the timer, its database thread free
     * meanwhile. Retried on that thread, a call waiting on rows another session holds (an
     * operator's transaction, the API dropping the queue), or one failing every time (a queue row
     * this walhook cannot read), held one of the two threads every lane shares; thrown there, an
     * unchecked exception was lost, and the lane, busy, waited for an answer for good.
     */
    private <T> void database(Dispatcher.SqlCall<T> call, java.util.function.Consumer<T> then, long wait) {
        context.database().submit(() -> {
            T result = null;
            if (!deleted && !closed) {
                try {
                    result = call.run();
                } catch (java.sql.SQLException e) {
                    if (closed && !deleted) {
                        return; // shut down under the call (its pool, its container): what was written stays written
                    }
                    lastError = "state database: " + e.getMessage();
                    // in an outage every lane with a call under way says the same: one of them every 10 s
                    LOG.logf(warnNow() ? Logger.Level.WARN : Logger.Level.DEBUG,
                            "subscription %s: cannot reach its durable queue (%s); trying again in %d ms",
                            subscription.name(), e.getMessage(), wait);
                    databaseAgain(call, then, wait);
                    return;
                } catch (RuntimeException e) {
                    if (closed && !deleted) {
                        return; // as above: a container gone fails with an IllegalStateException
                    }
                    lastError = "state database: " + e;
                    LOG.errorf(e, "subscription %s: a call to its durable queue failed unexpectedly; trying again in %d ms",
                            subscription.name(), wait);
                    databaseAgain(call, then, wait);
                    return;
                }
            }
            T answer = result;
            post(() -> {
                busy = false;
                if (closed && !deleted) {
                    return; // shutting down: what was written stays written, and its jobs are acknowledged only if it was
                }
                if (answer != null && !deleted) {
                    then.accept(answer);
                }
                if (deleted) {
                    dropQueue(); // written meanwhile: goes too
                }
            });
        });
    }

    /** When a lane last warned that its durable queue cannot be reached; any lane's warning counts. */
    private static final AtomicLong QUEUE_WARNED = new AtomicLong(System.nanoTime() - QUEUE_WARNING_NANOS);

    private static boolean warnNow() {
        long last = QUEUE_WARNED.get();
        long now = System.nanoTime();
        return now - last >= QUEUE_WARNING_NANOS && QUEUE_WARNED.compareAndSet(last, now);
    }

    private <T> void databaseAgain(Dispatcher.SqlCall<T> call, java.util.function.Consumer<T> then, long wait) {
        post(() -> { }); // a turn: /status shows the error
        try {
            context.timer().schedule(() -> database(call, then, Math.min(wait * 2, 30_000)), wait, TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.RejectedExecutionException stopping) {
            // walhook stops: what is undelivered is read again from the slot or the queue on restart
        }
    }

    // --- sending --------------------------------------------------------------------------------

    private int batchSize() {
        return subscription.destination() instanceof Destination.Webhook ? subscription.batchMaxEvents() : 1;
    }

    /** Requests under way at once: the subscription's max_in_flight, else the global concurrency (AMQP: its window). */
    private int window() {
        java.util.Optional<Integer> max = subscription.limits().maxInFlight();
        if (max.isPresent()) {
            return max.get();
        }
        return subscription.destination() instanceof Destination.Amqp ? AMQP_WINDOW : context.settings().concurrency();
    }

    /**
     * Whether the subscription's rate limit lets a request start now; if not, the lane wakes when
     * it does. Requests start at least {@code period / requests} apart, retries included.
     */
    private boolean rateAllows() {
        long wait = rateWaitNanos();
        if (wait > 0) {
            wakeIn(Duration.ofNanos(wait));
            return false;
        }
        return true;
    }

    /**
     * How long until the rate limit lets the next request start: 0 now or without a limit. Counted
     * from the last start with the current spacing, so a rate changed through the API applies at once.
     */
    private long rateWaitNanos() {
        if (!startedOnce || subscription.limits().rate().isEmpty()) {
            return 0;
        }
        return Math.max(0, lastStartNanos + subscription.limits().rate().get().spacingNanos() - System.nanoTime());
    }

    /** Whether only the rate limit keeps a request from starting now: a slot is free and something is ready. */
    private boolean heldByRate(Instant now) {
        if (rateWaitNanos() == 0 || underWay >= window()) {
            return false;
        }
        Outgoing retry = retrying.peek();
        return queue.hasReady() || retry != null && !now.isBefore(retry.due);
    }

    private void sendDue(Instant now) {
        Outgoing o;
        while ((o = retrying.peek()) != null && !now.isBefore(o.due) && underWay < window() && rateAllows()
                && !(dropUnheard && mode == Mode.DURABLE) && !doomed && !closed) {
            // while every attempt fails, one request at a time finds out whether it takes events again, at its pace
            boolean failingAll = schedule.everyAttemptFailing(now);
            if (failingAll && (underWay > 0 || now.isBefore(nextProbe) || newEventsTurn && mayTryNew(now))) {
                return;
            }
            if (!failingAll && retriesYield()) {
                return; // the last request is kept for new changes: rows whose requests hang do not take every one
            }
            if (!reserve()) {
                return; // the destination's gate calls back when a request to it ends
            }
            retrying.poll();
            start(o);
            if (o.underWay) {
                o.retryUnderWay = true;
                retriesUnderWay++;
            }
            if (failingAll) {
                newEventsTurn = true;
                return;
            }
        }
    }

    /**
     * Whether retries leave the requests left to new changes: all but one are retries under way,
     * and a live change is ready. However many rows' requests hang until the timeout, the other
     * rows' changes keep one request; retries keep the rest, and take the next free one otherwise.
     */
    private boolean retriesYield() {
        Job next = queue.firstReady();
        return window() > 1 && retriesUnderWay >= window() - 1 && next != null && !next.background;
    }

    private void sendNew(Instant now) {
        boolean failingAll = schedule.everyAttemptFailing(now);
        if (failingAll && (underWay > 0 || !mayTryNew(now))) {
            return; // one request at a time, at the probes' pace (nextProbe)
        }
        int batch = batchSize();
        while (underWay < window() && queue.hasReady() && rateAllows() && !(dropUnheard && mode == Mode.DURABLE)
                && !doomed && !closed) {
            if (queue.firstReady().background && window() > 1 && underWay >= window() - 1) {
                return; // the last request is kept for live changes: they do not wait behind a backfill's rows
            }
            // a probe goes at once: waiting for a batch to fill only puts off finding the destination back
            if (batch > 1 && subscription.batchMaxWaitMs() > 0 && queue.ready() < batch && mode == Mode.DIRECT
                    && !failingAll) {
                long waited = System.nanoTime() - queue.firstReady().handedOverNanos;
                long wait = TimeUnit.MILLISECONDS.toNanos(subscription.batchMaxWaitMs()) - waited;
                if (wait > 0) {
                    wakeIn(Duration.ofNanos(wait));
                    return;
                }
            }
            if (!reserve()) {
                return; // meanwhile events gather here, into batches, not in the connection pool's queue
            }
            List<Job> jobs = queue.take(batch, batch > 1);
            Outgoing o = new Outgoing(jobs, batch > 1);
            outgoing.add(o);
            start(o);
            if (failingAll) {
                newEventsTurn = false;
                return; // one at a time
            }
        }
    }

    /**
     * While every attempt fails, whether a new event may probe the destination now: the probe's
     * time came ({@link #nextProbe}) and, delivering from its durable queue with {@link
     * #RETRIED_UNWEIGHED} or more waiting to be retried, what waits holds less than the lane's share
     * of the read-back memory (divided among one more lane than those holding some): thousands of
     * lanes whose destinations are down keep little in memory, in bytes (a count of requests bounded
     * none: twenty rows of 10 MB). In direct mode the event is in memory already, bounded by
     * delivery's memory and the retry window, wherever it waits. However many rows the destination
     * refuses for good, the changes to other rows after them are still tried, and flow as the first
     * succeeds.
     */
    private boolean mayTryNew(Instant now) {
        if (now.isBefore(nextProbe) || !queue.hasReady()) {
            return false;
        }
        if (mode == Mode.DIRECT || retrying.size() < RETRIED_UNWEIGHED) {
            return true;
        }
        long retried = 0;
        for (Outgoing o : retrying) {
            for (Job job : o.jobs) {
                retried += job.memoryBytes();
            }
        }
        MemoryBudget readBack = context.readBack();
        // counting itself among the holders: one lane alone whose destination is down keeps half, not all of it
        return retried < readBack.limit() / (readBack.holders() + 1);
    }

    /** Where a batch splits into two halves of whole groups (no row on both sides), near its middle; 0 if it cannot. */
    private static int splitPoint(List<Job> jobs) {
        int best = 0;
        for (int i = 1; i < jobs.size(); i++) {
            if (!jobs.get(i).chained && Math.abs(jobs.size() - 2 * i) < Math.abs(jobs.size() - 2 * best)) {
                best = i;
            }
        }
        return best;
    }

    /**
     * A place at the destination for the next request: one granted earlier, or one free now; false
     * when the destination has every request it takes under way (the gate gives one when it can).
     */
    private boolean reserve() {
        DestinationGate gate = transport(pumping).gate();
        if (gate == null || grants.remove(gate) || gate.tryEnter(granted, schedule.lastFailed())) {
            // in, the gate has it waiting no more (asked again as another kind of lane, it was let in at once): a
            // lane that still counted itself as waiting never woke for its due retries, for a grant that never came
            awaitingPlace = false;
            reserved = gate;
            return true;
        }
        awaitingPlace = true;
        waitedAt.add(gate);
        return false;
    }

    private void start(Outgoing o) {
        DestinationGate place = reserved;
        reserved = null;
        if (closed || doomed) {
            if (place != null) {
                place.leave(granted);
            }
            // closed during this turn (the lock went to another instance), or its subscription deleted (the API
            // answers that its queue is discarded): nothing more leaves
            return;
        }
        lastStartNanos = System.nanoTime();
        startedOnce = true;
        o.underWay = true;
        underWay++;
        underWayJobs += o.jobs.size();
        Subscription current = pumping;
        CompletableFuture<Attempt> sending;
        try {
            sending = send(current, o);
        } catch (RuntimeException e) {
            // refused before it left (a header the client rejects): an attempt that failed, which gives back its place
            sending = CompletableFuture.failedFuture(e);
        }
        o.sending = sending;
        sending.whenComplete((attempt, failure) -> {
            try {
                if (place != null) {
                    // here, not on the lane's turn: a lane closed meanwhile has no turn to give it back on
                    place.leave(granted, attempt == null || attempt.outcome() != Transport.Outcome.DELIVERED);
                }
            } finally {
                post(() -> outcome(o, attempt != null ? attempt : Attempt.retry("internal error: " + failure)));
            }
        });
    }

    /** The request as the subscription sends it now: a batch is always a JSON array, AMQP a message per job in turn. */
    private CompletableFuture<Attempt> send(Subscription current, Outgoing o) {
        Transport carrier = transport(current);
        o.sentTo = current.destination();
        if (current.destination() instanceof Destination.Amqp amqp) {
            CompletableFuture<Attempt> outcome = new CompletableFuture<>();
            CompletableFuture<Attempt> chain = CompletableFuture.completedFuture(Attempt.DELIVERED);
            for (Job job : o.jobs) {
                // the address of the destination in force (an edit applies to what waits too); a row queued by a
                // walhook that kept no parts goes where it was routed to, or (routed to a webhook) to the template
                // with its placeholders left empty
                String address = job.addressParts != null ? amqp.address(job.addressParts)
                        : job.address != null ? job.address : amqp.address(new String[] {"", "", ""});
                Transport.Request request = new Transport.Request(job.eventId, job.body, job.contentType, job.headers,
                        address);
                // given up (the outcome completed by the lane): the messages not sent yet stay unsent, and the one
                // under way is given up in the client too (still waiting for the broker's credit, it is never sent)
                chain = chain.thenCompose(previous -> {
                    if (previous.outcome() != Outcome.DELIVERED || outcome.isDone()) {
                        return CompletableFuture.completedFuture(previous);
                    }
                    CompletableFuture<Attempt> sending = carrier.send(request);
                    outcome.whenComplete((done, e) -> sending.complete(Attempt.retry("given up")));
                    return sending;
                });
            }
            chain.whenComplete((attempt, failure) -> {
                if (failure != null) {
                    outcome.completeExceptionally(failure);
                } else {
                    outcome.complete(attempt);
                }
            });
            return outcome;
        }
        if (!o.batched) {
            // as it was formed: a batching setting changed since applies to the requests formed after it
            Job job = o.jobs.get(0);
            return carrier.send(new Transport.Request(job.eventId, job.body, job.contentType, job.headers, null));
        }
        return carrier.send(batch(o.id, o.jobs));
    }

    /**
     * An endpoint as the state keeps a 410's ({@link ParkedEventStore#gone}): SHA-256 of its URL or
     * AMQP address template, whatever credential it holds kept out of the table. The same endpoint
     * ({@link #sameEndpoint}), the same key.
     */
    static String endpointKey(Destination destination) {
        try {
            return java.util.HexFormat.of().formatHex(java.security.MessageDigest.getInstance("SHA-256")
                    .digest(endpoint(destination).getBytes(java.nio.charset.StandardCharsets.UTF_8)));
        } catch (java.security.NoSuchAlgorithmException e) {
            throw new IllegalStateException(e);
        }
    }

    /** Where the lane's 410 is in the state: none, being written, written, or not written (the database away). */
    enum GoneRecord { NONE, WRITING, WRITTEN, FAILED }

    /**
     * Keeps the 410 in the state, so that a restart or a take-over does not deliver to the endpoint
     * that said it was gone for good (held in memory only, it did). Written on the durable queue's
     * threads, in the lane's order ({@link #goneWrites}): a lane's turn never waits on the database.
     * Not written (the database away), it is written again every {@link #GONE_RETRY_SECONDS} s;
     * meanwhile a restart enables the subscription again. Not for a lane deleted or closed (its
     * subscription's record went with it, or another instance delivers it now).
     */
    private void recordGone(Destination endpoint) {
        if (endpoint == null || isDeleted() || closed) {
            return;
        }
        String key = endpointKey(endpoint);
        goneRecord = GoneRecord.WRITING;
        long generation = ++goneGeneration; // an answer of an earlier write (or forget) is not this one's
        goneWrite(() -> {
            try {
                context.store().gone(id, key);
                post(() -> {
                    if (goneGeneration == generation) {
                        goneRecord = GoneRecord.WRITTEN;
                        goneRetries = 0;
                    }
                });
            } catch (SQLException | RuntimeException e) {
                String why = e instanceof SQLException ? e.getMessage() : e.toString();
                post(() -> {
                    if (goneRetries++ == 0) {
                        LOG.warnf("subscription %s: its 410 was not recorded (%s); tried again every %d s, a restart"
                                + " before that enables the subscription again", subscription.name(), why, GONE_RETRY_SECONDS);
                    }
                    if (goneGeneration == generation) {
                        goneRecord = GoneRecord.FAILED;
                        retryGoneLater(generation);
                    }
                });
            }
        });
    }

    /** How often a 410 the state did not take is written again. */
    static final long GONE_RETRY_SECONDS = 5;

    private void retryGoneLater(long generation) {
        try {
            context.timer().schedule(() -> post(() -> {
                if (disabled && goneGeneration == generation && goneRecord == GoneRecord.FAILED && !isDeleted() && !closed) {
                    recordGone(disabledBy);
                }
            }), GONE_RETRY_SECONDS, java.util.concurrent.TimeUnit.SECONDS);
        } catch (java.util.concurrent.RejectedExecutionException stopping) {
            // walhook stops
        }
    }

    /** Runs {@code write} on the durable queue's threads after the lane's earlier ones. */
    private void goneWrite(Runnable write) {
        try {
            goneWrites = goneWrites.thenRunAsync(write, context.database()).exceptionally(rejected -> null);
        } catch (java.util.concurrent.RejectedExecutionException stopping) {
            // walhook stops: the record stays as it was
        }
    }

    /** Done when the lane's writes of its 410 (and forgets) asked for so far are: a stop waits for them. */
    java.util.concurrent.CompletableFuture<Void> goneWritten() {
        return goneWrites;
    }

    /** Forgets a recorded 410 ({@link #recordGone}), in the lane's order: the subscription was enabled again. */
    private void forgetGone() {
        goneRecord = GoneRecord.NONE;
        goneGeneration++;
        goneRetries = 0;
        goneWrite(() -> {
            try {
                context.store().notGone(id);
            } catch (SQLException | RuntimeException e) {
                LOG.warnf("subscription %s: enabled again, but its 410 is still recorded (%s); a restart or take-over"
                        + " with the same endpoint disables it again until a replay", subscription.name(),
                        e instanceof SQLException ? e.getMessage() : e.toString());
            }
        });
    }

    /**
     * A destination's endpoint as text: a webhook's URL as written, or an AMQP address template. The
     * same text, the same endpoint, here and in the state's key ({@link #endpointKey}): compared as
     * URIs (the host's case ignored), a 410 disabled a subscription whose URL changed only in case
     * until a restart, which enabled it.
     */
    private static String endpoint(Destination destination) {
        return destination instanceof Destination.Webhook w ? "webhook " + w.url()
                : destination instanceof Destination.Amqp a ? "amqp " + a.address() : "other " + destination;
    }

    /** Whether two destinations are the same endpoint (a webhook's URL, an AMQP address template), whatever else changed. */
    private static boolean sameEndpoint(Destination a, Destination b) {
        return a != null && b != null && endpoint(a).equals(endpoint(b));
    }

    /**
     * The operator pointed the subscription at another endpoint (a URL or AMQP address template):
     * what failed at the old one says nothing of the new one. The backoff, the {@code Retry-After},
     * the probes' pace, the retry windows and a 410's disabling that the old one earned are
     * forgotten, and what waits goes now. Webhook requests still under way to another host are
     * given up (one that takes requests and never answers would otherwise hold them, and their
     * rows' later changes, for the whole request timeout) and go again at once, as no attempt; the
     * old host may have taken one, and then has it twice, with the same id. Requests under way to
     * the same host (a path or token changed: most likely the same receiver) end as they would:
     * given up, one could still be applied there after the resent one and its row's next change.
     */
    private void followReplacement() {
        Destination now = pumping.destination();
        if (now == checkedFor) {
            return;
        }
        Destination before = checkedFor;
        checkedFor = now;
        if (before == null || sameEndpoint(before, now)) {
            return; // the lane's first turn, or the same endpoint renamed, re-signed, re-formatted
        }
        for (Outgoing o : outgoing) {
            if (o.underWay && o.sending != null && o.sentTo != null && movedAway(o.sentTo, now)) {
                o.sending.complete(GIVEN_UP); // its outcome comes back through the inbox
            }
            o.firstFailure = null;
            o.notBefore = null;
            o.attempts = 0; // max_attempts and the backoff count from the first failure at the new one
            for (Job job : o.jobs) {
                job.attempts = 0;
            }
        }
        failing.clear();
        outOfAttempts = null;
        boolean refusedByThisOne = disabled && disabledBy != null && sameEndpoint(disabledBy, now);
        if (!refusedByThisOne) {
            LOG.infof("subscription %s now delivers to %s: what waited for the destination it replaced goes now",
                    subscription.name(), now);
            tryEverythingNow();
        }
    }

    /**
     * The subscription's tables, operations or filter changed (through the API): the events routed
     * to it under the old ones, still in memory and not acknowledged, go to the durable queue. They
     * are delivered, as the contract says; but after a crash the slot would send them again to be
     * routed under the new ones, which may no longer take them, and they would be lost. Written,
     * they are acknowledged and a restart finds them in the queue.
     */
    private void followNarrowing() {
        Subscription before = matchedFor;
        Subscription now = pumping;
        matchedFor = now;
        boolean routedOtherwise = routedUnderOther;
        routedUnderOther = false;
        if (!routedOtherwise && (before == null || before == now || sameMatching(before, now))) {
            return;
        }
        if (mode == Mode.DURABLE) {
            mustWrite = toWrite.size(); // arrivals waiting in memory to go direct with the queue's last rows: written now
        } else if (volatileJobs.get() > 0) {
            queueDurably("its tables, operations or filter changed, and events routed under the old ones are kept in its"
                    + " durable queue (a crash would route the slot's resend of them under the new ones)");
        }
    }

    static boolean sameMatching(Subscription a, Subscription b) {
        return a.tables().equals(b.tables()) && a.operations().equals(b.operations())
                && a.filter().map(io.walhook.routing.CelFilter::expression).equals(b.filter().map(io.walhook.routing.CelFilter::expression));
    }

    /**
     * Whether a request under way to {@code from} is given up for {@code to}: a webhook whose
     * replacement has another host name (another scheme or port on the same name is most likely
     * the same receiver); an AMQP message whose replacement is a webhook (one waiting for the
     * broker's credit is then never sent).
     */
    private static boolean movedAway(Destination from, Destination to) {
        if (!(from instanceof Destination.Webhook old)) {
            return !(to instanceof Destination.Amqp); // another address: the same broker, its own timeouts
        }
        return !(to instanceof Destination.Webhook now)
                || !String.valueOf(UrlAuthority.host(old.url())).equalsIgnoreCase(UrlAuthority.host(now.url()));
    }

    /** The transport for the subscription as it is now, made again when its destination changed. */
    private Transport transport(Subscription current) {
        if (transportFor != current) {
            if (transportFor == null || !transportFor.destination().equals(current.destination())) {
                DestinationGate before = transport == null ? null : transport.gate();
                transport = context.transports().apply(current);
                if (before != null && before != transport.gate()) {
                    // another host: the old one keeps nothing of the lane once its requests there leave, and no
                    // longer hands it a place (it waited there: now nothing else would wake it for a retry due)
                    before.forget(granted);
                    waitedAt.remove(before);
                    awaitingPlace = false;
                }
            }
            transportFor = current;
            schedule.limits(current.retry().maxBackoff().orElse(context.settings().maxBackoff()),
                    context.settings().parkedRetryInterval());
        }
        return transport;
    }

    /** A JSON array of the jobs' bodies (CloudEvents batched mode for structured CloudEvents). */
    static Transport.Request batch(String id, List<Job> jobs) {
        int length = 1 + jobs.size();
        for (Job job : jobs) {
            length += job.body.length;
        }
        byte[] body = new byte[length];
        int at = 0;
        body[at++] = '[';
        for (int i = 0; i < jobs.size(); i++) {
            if (i > 0) {
                body[at++] = ',';
            }
            byte[] part = jobs.get(i).body;
            System.arraycopy(part, 0, body, at, part.length);
            at += part.length;
        }
        body[at] = ']';
        String type = jobs.get(0).contentType.equals(EventEncoder.CLOUDEVENTS_JSON)
                ? "application/cloudevents-batch+json" : EventEncoder.JSON;
        return new Transport.Request(id, body, type, Map.of(), null);
    }

    private void outcome(Outgoing o, Attempt attempt) {
        o.underWay = false;
        underWay--;
        if (o.retryUnderWay) {
            o.retryUnderWay = false;
            retriesUnderWay--;
        }
        underWayJobs -= o.jobs.size();
        if (deleted) {
            return;
        }
        Instant now = context.clock().instant();
        if (o.readAgain && (attempt == GIVEN_UP || attempt.outcome() != Outcome.DELIVERED)) {
            // its rows may have been dropped while it was under way: counted as failed as any other, but not retried;
            // the next durable turn gives it back with the rest, to be read again if its rows are still there
            readAgain = true;
        }
        o.readAgain = false;
        if (attempt == GIVEN_UP || attempt.outcome() != Outcome.DELIVERED && o.sentTo != null
                && !sameEndpoint(o.sentTo, subscription.destination())) {
            // given up, or refused by a destination the operator replaced since it left (the replacement has not
            // refused anything): not an attempt at the destination in force, to which it goes now
            o.due = now;
            retrying.add(o);
            return;
        }
        switch (attempt.outcome()) {
            case DELIVERED -> delivered(o, now);
            case RETRY -> failed(o, attempt, now);
            case GONE -> {
                boolean was = disabled;
                disabled = true;
                disabledBy = o.sentTo;
                if (!was) {
                    LOG.errorf("subscription %s disabled: %s answered %s to %s; its events wait in the durable queue"
                            + " until a replay", subscription.name(), transport, attempt.problem(), o.id);
                    recordGone(o.sentTo);
                }
                failed(o, attempt, now);
            }
        }
    }

    private void delivered(Outgoing o, Instant now) {
        probesFailed = 0;
        nextProbe = Instant.MIN;
        if (schedule.succeeded(now)) {
            // the destination is back after taking nothing: what waits, on backoffs grown long, goes now, but for
            // the requests it asked to wait longer themselves (Retry-After: a row it refuses, say)
            List<Outgoing> waiting = new ArrayList<>(retrying);
            retrying.clear();
            for (Outgoing w : waiting) {
                w.due = now.plusMillis(context.random().nextInt((int) RetrySchedule.FIRST_MILLIS));
                if (w.notBefore != null && w.notBefore.isAfter(w.due)) {
                    w.due = w.notBefore;
                }
                retrying.add(w);
            }
        }
        outgoing.remove(o);
        failing.remove(o);
        int fromQueue = 0;
        long readBackBytes = 0;
        for (Job job : o.jobs) {
            queue.finish(job);
            if (skippedFrom != NOT_SKIPPING && heldBackReadPast(job.ordering)) {
                skipEnds = true; // its row's (table's) later changes, read past, are to be read now
            }
            if (job.durable) {
                fromQueue++;
                durableInMemory--;
                readBackBytes += job.memoryBytes();
                toDelete.add(job);
            }
        }
        readBackReleased(readBackBytes);
        settleAll(o.jobs);
        delivered += o.jobs.size();
        deliveredFromQueue += fromQueue;
        Instant committed = o.jobs.get(0).commitTime;
        context.metrics().delivered(subscription, o.jobs.size(), fromQueue == 0 && committed != null
                ? Duration.between(committed, now) : Duration.ZERO);
        if (o.attempts > 0) {
            LOG.infof("subscription %s: %s delivered after %d failed attempts", subscription.name(), o.id, o.attempts);
        }
    }

    private void failed(Outgoing o, Attempt attempt, Instant now) {
        schedule.failed(o.jobs.get(0).eventId); // a batch's first half, or the same rows read back, is the same request
        o.attempts++;
        if (o.firstFailure == null) {
            o.firstFailure = now;
        }
        lastError = attempt.problem();
        context.metrics().retried(subscription);
        Duration wait = schedule.delay(o.attempts, attempt.retryAfter(), now, context.random());
        o.due = now.plus(wait);
        o.notBefore = attempt.retryAfter().isPresent() ? o.due : null;
        boolean failingAll = schedule.everyAttemptFailing(now);
        if (failingAll) {
            probesFailed++;
            // the probes' pace for the whole subscription: a wait asked for one request is that one's own; a pause
            // the destination asked for before is not cut short by a later failure
            Instant next = now.plus(schedule.delay(probesFailed, attempt.pacesAll() ? attempt.retryAfter() : Optional.empty(),
                    now, context.random()));
            if (next.isAfter(nextProbe)) {
                nextProbe = next;
            }
        }
        if (mode == Mode.DIRECT) {
            failing.add(o);
            int maxAttempts = subscription.retry().maxAttempts().orElse(Integer.MAX_VALUE);
            if (o.attempts >= maxAttempts && outOfAttempts == null) {
                outOfAttempts = o.id + " still failing after " + o.attempts + " attempts (" + attempt.problem() + ")";
            }
        }
        int at = o.attempts >= SPLIT_AFTER && !failingAll ? splitPoint(o.jobs) : 0;
        if (at > 0) {
            // a batch failing again while others go may hold one bad event among good ones: its halves go on
            // their own (not while every attempt fails: then nothing tells a bad event, and its singles would
            // go out one by one once the destination is back)
            outgoing.remove(o);
            boolean wasFailing = failing.remove(o);
            for (List<Job> half : List.of(new ArrayList<>(o.jobs.subList(0, at)),
                    new ArrayList<>(o.jobs.subList(at, o.jobs.size())))) {
                Outgoing part = new Outgoing(half, o.batched); // a batch's halves are batches
                part.attempts = o.attempts;
                part.firstFailure = o.firstFailure;
                part.notBefore = o.notBefore;
                part.due = o.due;
                outgoing.add(part);
                retrying.add(part);
                if (wasFailing) {
                    failing.add(part);
                }
            }
        } else {
            retrying.add(o);
        }
        List<String> durableIds = new ArrayList<>();
        for (Job job : o.jobs) {
            job.attempts = o.attempts;
            if (job.durable) {
                durableIds.add(job.eventId);
            }
        }
        if (!durableIds.isEmpty()) {
            toFail.computeIfAbsent(attempt.problem() == null ? "failed" : attempt.problem(), k -> new ArrayList<>())
                    .addAll(durableIds);
        }
        // logged at the first attempts and then at every doubling: a failing destination does not flood the log
        if (o.attempts <= 3 || Integer.bitCount(o.attempts) == 1) {
            MDC.put("event", o.id);
            MDC.put("attempt", Integer.toString(o.attempts));
            LOG.warnf("subscription %s: %s attempt %d to %s failed (%s); retrying in %d ms", subscription.name(), o.id,
                    o.attempts, transport, attempt.problem(), wait.toMillis());
            MDC.remove("event");
            MDC.remove("attempt");
        }
    }

    // --- timers ---------------------------------------------------------------------------------

    private void scheduleWake(Instant now, long sendableIn) {
        Instant next = null;
        if (sendableIn > 0) {
            // no request starts before the slot lock's lease allows: the dispatcher nudges when it is renewed,
            // and a lane with something to send looks again within a second anyway
            if (sendableIn != Long.MAX_VALUE) {
                next = now.plusNanos(sendableIn);
            } else if (!retrying.isEmpty() || queue.hasReady()) {
                next = now.plusSeconds(1);
            }
            if (mode == Mode.DURABLE || held()) {
                next = earlier(next, now.plusSeconds(1));
            }
            if (next != null) {
                wakeIn(Duration.between(now, next));
            }
            return;
        }
        Outgoing soonest = retrying.peek();
        // a due retry that waits for a free request, or for a place at its destination, is started by
        // the outcome that frees one, or the gate's grant: waking for it now would only turn the lane
        // over and over until then
        boolean failingAll = schedule.everyAttemptFailing(now);
        if (soonest != null && underWay < window() && !(failingAll && underWay > 0)
                && !(awaitingPlace && !now.isBefore(soonest.due)) && !(!failingAll && retriesYield())) {
            next = failingAll && soonest.due.isBefore(nextProbe) ? nextProbe : soonest.due; // at the probes' pace
            long rateWait = rateWaitNanos();
            if (rateWait > 0 && next.isBefore(now.plusNanos(rateWait))) {
                next = now.plusNanos(rateWait); // and one the rate limit holds back, when it lets it go
            }
        }
        if (underWay == 0 && queue.hasReady() && now.isBefore(nextProbe) && failingAll) {
            next = earlier(next, nextProbe); // a new event's turn to probe the destination
        }
        if (mode == Mode.DIRECT) {
            Duration window = subscription.retry().window().orElse(context.settings().retryWindow());
            if (!failing.isEmpty()) {
                next = earlier(next, firstFailing().firstFailure.plus(window));
            }
            long waited = oldestWaitNanos();
            if (waited >= 0) {
                next = earlier(next, now.plusNanos(Math.max(0, slowAfter(window).toNanos() - waited)));
            }
        }
        if (mode == Mode.DURABLE || held()) {
            next = earlier(next, now.plusSeconds(1)); // pause, resume and replay take effect within a second
        }
        if (next != null) {
            wakeIn(Duration.between(now, next));
        }
    }

    private static Instant earlier(Instant a, Instant b) {
        return a == null || b.isBefore(a) ? b : a;
    }

    private void wakeIn(Duration delay) {
        long nanos = Math.max(0, Math.min(delay.toNanos(), TimeUnit.HOURS.toNanos(1)));
        Instant now = context.clock().instant();
        Instant at = now.plusNanos(nanos);
        // a wake still to come, and no later than this one, does; one whose time has come may be the
        // timer task running now (not done yet, but past posting its turn): it wakes nobody again
        if (wake != null && wakeAt != null && wakeAt.isAfter(now) && !at.isBefore(wakeAt)) {
            return;
        }
        if (wake != null) {
            wake.cancel(false);
        }
        wakeAt = at;
        wake = context.timer().schedule(() -> post(() -> { }), nanos, TimeUnit.NANOSECONDS);
    }

    // --- control (from the registry and the API) -----------------------------------------------

    /**
     * Routing's subscription object, for a lane made at its first event or one the registry has
     * not synced yet; once synced, only a sync changes it ({@link #synced}): routing may still be
     * at the end of a transaction routed with an older object, which would otherwise send this
     * lane's retries and queue back to a destination the operator replaced, until its next event.
     */
    void follow(Subscription routed) {
        synchronized (followLock) {
            if (syncedTo == null) {
                subscription = routed;
            }
        }
    }

    /**
     * The registry's latest object of the subscription (replaced through the API: name,
     * destination, batching, retries), from its next request on, as the dispatcher's sync number
     * {@code sync} gave it; returns whether it changed.
     */
    boolean synced(Subscription latest, long sync) {
        synchronized (followLock) {
            if (sync < syncNumber) {
                return false; // a lane made as a sync ran took an older one's object after that sync gave it its own
            }
            syncNumber = sync;
            syncedTo = latest;
            if (latest == subscription) {
                return false;
            }
            subscription = latest;
            return true;
        }
    }

    /**
     * The dispatcher's look at its durable queue ({@link #probing}) answered: with no rows, it goes
     * direct at this turn, what arrived meanwhile with it; with rows, it reads them first, and
     * {@code rows} is how many (null when they were not counted in time): rows left from before a
     * restart or a take-over, which /status counts with those it writes from now on.
     */
    void probed(boolean queueHasRows, Long rows, String gone) {
        post(() -> {
            probing = false;
            // cleared by a replay asked meanwhile, the record the look read is no more
            String recorded = replayedWhileProbing ? null : gone;
            replayedWhileProbing = false;
            if (recorded != null && recorded.equals(endpointKey(subscription.destination()))) {
                // recorded by the instance before this one's start (or before a take-over): still gone
                disabled = true;
                disabledBy = subscription.destination();
                goneRecord = GoneRecord.WRITTEN;
                LOG.infof("subscription %s stays disabled: its destination answered 410 Gone before; its events wait in"
                        + " the durable queue until a replay", subscription.name());
            } else if (recorded != null && !disabled) {
                forgetGone(); // of an endpoint it no longer has (changed while no lane of it ran): put back, not disabled
            }
            if (rows != null) {
                backlog = rows; // it wrote and deleted nothing while it waited for this answer
            }
            if (!queueHasRows) {
                exhausted = true; // read to its end, and this lane wrote nothing while it waited
                writtenSinceRead = false;
            }
        });
    }

    /**
     * Rows of its durable queue were dropped by another party (the API): at its next durable turn,
     * what it read back and has not under way goes back to be read again, so that a dropped row is
     * never sent (one under way already is answered once), and the queue is counted again.
     */
    void recount() {
        dropUnheard = true;
        post(() -> {
            dropUnheard = false;
            uncounted = true;
            letGoOfReadBack();
        });
    }

    /**
     * Rows of the durable queue may have been dropped unheard (the listening session was away): what the lane read
     * back is let go of and read again, as for {@link #recount}, without counting the queue again (thousands of lanes
     * would each ask the database for their count as it comes back).
     */
    void readQueueAgain() {
        post(this::letGoOfReadBack);
    }

    private void letGoOfReadBack() {
        if (mode == Mode.DURABLE) { // direct, it holds nothing read back
            readAgain = true;
            writeBeforeDirect = true;
            // nothing starts until the give-back: what is under way now is all that may hold a dropped row (a batch
            // under way when the lane went durable too, its rows written, and maybe dropped, before the rest)
            for (Outgoing o : outgoing) {
                if (o.underWay) {
                    o.readAgain = true;
                }
            }
        }
    }

    /** Wakes the lane: pause or resume changed. */
    void nudge() {
        post(() -> { });
    }

    /**
     * Completes when the lane's next turn begins: the turn under way, if any, has ended, and every
     * request from then on is started with the subscription as it is now.
     */
    CompletableFuture<Void> nextTurn() {
        CompletableFuture<Void> begun = new CompletableFuture<>();
        turnAwaited.add(begun);
        post(() -> {
            turnAwaited.remove(begun);
            begun.complete(null);
        });
        if (closed) {
            noTurnComes(); // nothing starts either
        }
        return begun;
    }

    /** {@link #nextTurn}s not begun yet: let go when no turn comes (closed, or its executor refused it). */
    private final ConcurrentLinkedQueue<CompletableFuture<Void>> turnAwaited = new ConcurrentLinkedQueue<>();

    private void noTurnComes() {
        for (CompletableFuture<Void> awaited; (awaited = turnAwaited.poll()) != null;) {
            awaited.complete(null);
        }
    }

    /**
     * Enabled again if a 410 disabled it and a replay asked unheard cleared its record since
     * ({@code recorded}: the endpoint key the state holds for it now, null for none); its 410
     * written again if it never was. An endpoint still gone answers 410 again, which disables it again.
     */
    void enableUnlessGone(String recorded) {
        post(() -> {
            if (!disabled || goneRecord == GoneRecord.WRITING) {
                return; // its write lands after what was read: read again at the next look
            }
            if (recorded == null && goneRecord != GoneRecord.WRITTEN) {
                recordGone(disabledBy); // its 410 was never written: it is, now
            } else if (recorded == null || disabledBy == null || !recorded.equals(endpointKey(disabledBy))) {
                LOG.infof("subscription %s enabled again: a replay was asked while this instance could not hear it",
                        subscription.name());
                tryEverythingNow();
            }
        });
    }

    /** Whether a 410 disabled it (read by the dispatcher's thread asking the state which still are). */
    boolean disabled() {
        return disabled;
    }

    /** The API's replay: enabled again after a 410, and every waiting request tried now. */
    void retryNow() {
        post(() -> {
            if (probing) {
                replayedWhileProbing = true; // the look under way may have read a 410 this replay cleared
            }
            tryEverythingNow();
        });
    }

    /** Enabled again after a 410, the failures so far forgotten, and every waiting request and queued event tried now. */
    private void tryEverythingNow() {
        if (disabled) {
            LOG.infof("subscription %s enabled again: delivering its queued events", subscription.name());
            disabled = false;
            forgetGone();
        }
        schedule.reset();
        probesFailed = 0;
        nextProbe = Instant.MIN;
        Instant now = context.clock().instant();
        List<Outgoing> waiting = new ArrayList<>(retrying);
        retrying.clear();
        for (Outgoing o : waiting) {
            o.due = now;
            retrying.add(o);
        }
        exhausted = false;
    }

    /** The subscription is gone: delivery stops at once; what it held is dropped (the API deletes its queue). */
    void delete() {
        doomed = true;
        post(() -> {
            deleted = true;
            if (transport != null && transport.gate() != null) {
                transport.gate().forget(granted);
            }
            for (Job job : queue.removeUntaken()) {
                settled(job);
            }
            for (Outgoing o : outgoing) {
                o.jobs.forEach(this::settled);
                if (o.underWay && o.sending != null) {
                    o.sending.complete(GIVEN_UP); // the host gets its places back now, not at the request timeout
                }
            }
            outgoing.clear();
            retrying.clear();
            failing.clear();
            toWrite.forEach(this::settled);
            toWrite.clear();
            writing.forEach(this::settled); // its write, under way, is dropped with the queue
            writing = List.of();
            readBackReleased(residentBytes); // what was read back goes too
            context.readBack().release(readReserved);
            readReserved = 0;
            if (wake != null) {
                wake.cancel(false);
            }
            synchronized (room) {
                room.notifyAll();
            }
            if (!busy) {
                dropQueue();
            }
        });
    }

    private void dropQueue() {
        QueueDrop.start(context, id, subscription.name());
    }

    /** Stops the lane at shutdown; what is undelivered is read again from the slot or the queue on restart. */
    void close() {
        closed = true;
        noTurnComes(); // a turn queued may be dropped with the executor
        for (DestinationGate gate : waitedAt) {
            gate.forget(granted); // a place that frees goes to a lane that can use it, not through this one
        }
        giveBackOffered(); // a place granted before it closed, whose turn will not come
        if (wake != null) {
            wake.cancel(false);
        }
        synchronized (room) {
            room.notifyAll();
        }
    }

    /** Hands the places granted and not taken on to the next lanes waiting (the lane closed). */
    private void giveBackOffered() {
        for (DestinationGate place; (place = offered.poll()) != null; ) {
            place.leave(granted);
        }
    }

    // --- status ---------------------------------------------------------------------------------

    Status status() {
        Status s = last;
        if (s == null) {
            return new Status(id, subscription.name(), mode.name().toLowerCase(java.util.Locale.ROOT), 0, 0, 0, 0,
                    backlog, null, 0, delivered, lastError, disabled, context.paused().test(id));
        }
        // the lane's last turn may be long past (nothing more came): the rate is of the last few seconds all the same
        double rate = drainRate();
        return rate == s.drainRate() ? s : new Status(s.id(), s.name(), s.mode(), s.queued(), s.inFlight(), s.retrying(),
                s.heldBack(), s.durableBacklog(), s.oldestParkedCommit(), rate, s.delivered(), s.lastError(), s.disabled(),
                s.paused());
    }

    /**
     * Events a second delivered from the durable queue over the last whole window of at least 5 s,
     * from the lane's turns and from {@code /status}: a lane that has drained its queue and has
     * no turn since reads 0 within two windows, not its last drain's rate for as long as it idles.
     */
    private double drainRate() {
        synchronized (rateLock) {
            long now = System.nanoTime();
            if (now - rateMarkNanos >= RATE_WINDOW_NANOS) {
                long drained = deliveredFromQueue;
                drainRate = (drained - rateMark) * 1e9 / (now - rateMarkNanos);
                rateMark = drained;
                rateMarkNanos = now;
            }
            return drainRate;
        }
    }

    private Status snapshot() {
        double drainRate = drainRate();
        Instant oldestParked = null;
        // durable jobs are read oldest first: the first one in memory is the queue's oldest, near the head
        for (Job job = durableInMemory > 0 ? queue.oldest() : null; job != null; job = job.next) {
            if (job.durable) {
                oldestParked = job.commitTime;
                break;
            }
        }
        long inMemory = volatileJobs.get() + durableInMemory; // routed and not yet acknowledged, and read back from the queue
        return new Status(id, subscription.name(), mode.name().toLowerCase(java.util.Locale.ROOT), inMemory, underWayJobs,
                retrying.size(), queue.heldBack(), Math.max(backlog, durableInMemory), oldestParked, drainRate, delivered, lastError,
                disabled, context.paused().test(id));
    }
}
