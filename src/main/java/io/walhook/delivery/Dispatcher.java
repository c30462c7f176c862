package io.walhook.delivery;

import java.sql.SQLException;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Comparator;
import java.util.HashSet;
import java.util.List;
import java.util.Queue;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Function;
import java.util.function.LongSupplier;
import java.util.function.Predicate;
import java.util.random.RandomGenerator;

import org.jboss.logging.Logger;

import io.walhook.change.ChangeEvent;
import io.walhook.routing.Destination;
import io.walhook.routing.EventEncoder;
import io.walhook.routing.Subscription;

/**
 * Hands each routed event to its subscription's {@link Lane}, which delivers it: per-row order, a
 * failure holding back only its own row, retries, and the durable queue. Lanes belong to a
 * subscription's id, so a rename keeps them; they run on a small shared pool (no thread of their
 * own), with one timer thread and a couple of threads for the state database.
 */
public final class Dispatcher implements RoutingLoop.Sender, AutoCloseable {

    private static final Logger LOG = Logger.getLogger(Dispatcher.class);

    /**
     * Timeouts and limits of every lane: {@code concurrency} requests under way at once per
     * subscription (a row's changes are never under way together), its memory budget of
     * undelivered events ({@code bufferEvents}, {@code bufferBytes}), and {@code holdLimit}, how
     * long its full budget may hold routing back, in all, while another subscription starves: it
     * was handed events lately, is under a tenth of its own budget, and gets nothing while routing
     * waits. {@code memoryBytes} bounds the undelivered events of all lanes together ({@link MemoryBudget}),
     * and a quarter of it those they read back from their durable queues.
     */
    public record Settings(Duration requestTimeout, Duration maxBackoff, Duration retryWindow,
            Duration parkedRetryInterval, int concurrency, int bufferEvents, long bufferBytes, Duration holdLimit,
            long memoryBytes) {
        /** How long one slow subscription may hold the others back before it waits in its durable queue instead. */
        public static final Duration HOLD_LIMIT = Duration.ofSeconds(5);
        /** A subscription's own memory budget: undelivered events, and their bytes. */
        public static final int BUFFER_EVENTS = 4000;
        public static final long BUFFER_BYTES = 64L << 20;
        /** The undelivered events of all subscriptions together, in bytes (WALHOOK_DELIVERY_MEMORY_BYTES' default). */
        public static final long MEMORY_BYTES = 64L << 20;

        public Settings {
            if (concurrency < 1) {
                throw new IllegalArgumentException("concurrency must be at least 1, not " + concurrency);
            }
        }

        public Settings(Duration requestTimeout, Duration maxBackoff, Duration retryWindow, Duration parkedRetryInterval,
                int concurrency, int bufferEvents, long bufferBytes, Duration holdLimit) {
            this(requestTimeout, maxBackoff, retryWindow, parkedRetryInterval, concurrency, bufferEvents, bufferBytes,
                    holdLimit, MEMORY_BYTES);
        }

        public Settings(Duration requestTimeout, Duration maxBackoff, Duration retryWindow, Duration parkedRetryInterval,
                int concurrency, int bufferEvents, long bufferBytes) {
            this(requestTimeout, maxBackoff, retryWindow, parkedRetryInterval, concurrency, bufferEvents, bufferBytes,
                    HOLD_LIMIT);
        }

        public Settings(Duration requestTimeout, Duration maxBackoff, Duration retryWindow, Duration parkedRetryInterval,
                int concurrency, long memoryBytes) {
            this(requestTimeout, maxBackoff, retryWindow, parkedRetryInterval, concurrency, BUFFER_EVENTS, BUFFER_BYTES,
                    HOLD_LIMIT, memoryBytes);
        }

        public Settings(Duration requestTimeout, Duration maxBackoff, Duration retryWindow, Duration parkedRetryInterval,
                int concurrency) {
            this(requestTimeout, maxBackoff, retryWindow, parkedRetryInterval, concurrency, MEMORY_BYTES);
        }
    }

    /** What a subscription's delivery is doing, for /status and metrics. */
    public record DeliveryStatus(String id, String name, String mode, long queued, long inFlight, long retrying,
            long heldBack, long durableBacklog, java.time.Instant oldestParkedCommit, double drainRate, long delivered,
            String lastError, boolean disabled, boolean paused) {
    }

    /** A state-database call. */
    interface SqlCall<T> {
        T run() throws SQLException;
    }

    /**
     * What every lane shares; {@code starvingElsewhere} tells whether a lane other than the one
     * given runs out of events while routing waits for the one given ({@link Lane#starving});
     * {@code sendableIn}, when this instance may start requests (the slot lock's lease: 0 now, else
     * in that many nanoseconds, {@link Long#MAX_VALUE} until {@link #leaseRenewed}).
     */
    record Context(Clock clock, Settings settings, ParkedEventStore store, DeliveryMetrics metrics,
            Predicate<String> paused, Function<Subscription, Transport> transports, ExecutorService lanes,
            ScheduledExecutorService timer, ExecutorService database, RandomGenerator random,
            Predicate<Lane> starvingElsewhere, MemoryBudget memory, MemoryBudget readBack, LongSupplier sendableIn) {

        Context(Clock clock, Settings settings, ParkedEventStore store, DeliveryMetrics metrics,
                Predicate<String> paused, Function<Subscription, Transport> transports, ExecutorService lanes,
                ScheduledExecutorService timer, ExecutorService database, RandomGenerator random,
                Predicate<Lane> starvingElsewhere, MemoryBudget memory, MemoryBudget readBack) {
            this(clock, settings, store, metrics, paused, transports, lanes, timer, database, random, starvingElsewhere,
                    memory, readBack, () -> 0);
        }
    }

    private final Context context;
    /** Lanes by subscription id, made on first use. */
    private final Map<String, Lane> lanes = new ConcurrentHashMap<>();
    /**
     * Lanes made since the last look at their durable queues ({@link #probeQueues}): each waits for
     * the answer before it sends, whether rows from before a restart come first.
     */
    private final Queue<Lane> toProbe = new ConcurrentLinkedQueue<>();
    private final AtomicBoolean probeSubmitted = new AtomicBoolean();
    /** The subscriptions paused or held at the last {@link #sync} (the poller's thread): a lane is woken when that changes. */
    private Set<String> pausedAtSync = Set.of();
    /**
     * Stored subscriptions held out of force, not deleted ({@link #sync(Collection, Set, Predicate)}):
     * their lanes hold as paused ones do.
     */
    private volatile Set<String> held = Set.of();
    /** Queues resumed as deleted subscriptions' whose subscriptions are stored, waiting for a sync to put them in force. */
    private final Set<String> kept = new HashSet<>();
    /** How many {@link #sync}s ran (under this object's lock, as {@link #resumeParked}). */
    private long syncs;
    /**
     * The subscriptions of the latest sync by id, and its number: a lane made since (routing may be
     * at the end of a transaction routed with an older object) takes its object from here.
     */
    private volatile Synced lastSynced = new Synced(Map.of(), 0);

    private record Synced(Map<String, Subscription> byId, long number) {
    }
    /** Ids of subscriptions deleted while this instance ran: events routed to them are dropped. */
    private final Set<String> deleted = ConcurrentHashMap.newKeySet();
    /** Routing's own: the lanes given jobs in the current chunk, and the last lane it looked up. */
    private final List<Lane> routedTo = new ArrayList<>();
    private Lane lastLane;
    private volatile boolean closed;
    /** The event last sent, and its address parts. */
    private volatile PartsOf partsOf;

    private record PartsOf(ChangeEvent event, String[] parts) {
    }

    /**
     * @param paused whether a subscription (by id) is paused: its events wait in the durable queue until it resumes
     * @param transports the transport for a subscription's destination, asked again when it changes
     */
    public Dispatcher(Clock clock, Settings settings, ParkedEventStore store, DeliveryMetrics metrics,
            Predicate<String> paused, Function<Subscription, Transport> transports) {
        this(clock, settings, store, metrics, paused, transports, () -> 0);
    }

    /**
     * @param sendableIn when requests may start: 0 now, else in that many nanoseconds, or
     *     {@link Long#MAX_VALUE} until {@link #leaseRenewed} (the slot lock's lease)
     */
    public Dispatcher(Clock clock, Settings settings, ParkedEventStore store, DeliveryMetrics metrics,
            Predicate<String> paused, Function<Subscription, Transport> transports, LongSupplier sendableIn) {
        int threads = Math.max(2, Runtime.getRuntime().availableProcessors());
        this.context = new Context(clock, settings, store, metrics, id -> held.contains(id) || paused.test(id), transports,
                Executors.newFixedThreadPool(threads, daemons("walhook-delivery")),
                wakes(),
                Executors.newFixedThreadPool(2, daemons("walhook-durable-queue")), new java.util.Random(),
                this::starvingElsewhere, new MemoryBudget(settings.memoryBytes()),
                new MemoryBudget(Math.max(1, settings.memoryBytes() / 4)), sendableIn);
    }

    /**
     * The lanes' timer. A wake replaced by an earlier one leaves the queue when cancelled: kept there
     * until its own time (the end of a retry window, minutes away), a failing lane's replaced wakes,
     * one or two a second, piled up by the hundred thousand across a thousand tenants.
     */
    private static java.util.concurrent.ScheduledThreadPoolExecutor wakes() {
        java.util.concurrent.ScheduledThreadPoolExecutor timer = new java.util.concurrent.ScheduledThreadPoolExecutor(1,
                daemons("walhook-delivery-timer"));
        timer.setRemoveOnCancelPolicy(true);
        return timer;
    }

    /** Tasks waiting on the lanes' timer: wakes, and retries of the durable queue's writes. */
    int timerTasks() {
        return ((java.util.concurrent.ScheduledThreadPoolExecutor) context.timer()).getQueue().size();
    }

    /** Requests may start again (the lease ran out, and was renewed): every lane sends what is due. */
    public void leaseRenewed() {
        if (!closed) {
            lanes.values().forEach(Lane::nudge);
        }
    }

    /**
     * Whether a subscription other than {@code held} starves while routing waits for it (the first
     * one found says so). Within {@link #IDLE_HOLD_FACTOR} times its hold limit ({@link
     * Lane#holdLimitNanos}), only a lane handed events lately counts. Past it, so does any other
     * subscription in force with room, idle or without a lane yet: its next change may wait in the
     * WAL behind the held one's run of changes
     * (a large transaction only the held one wants, at a slow receiver's pace), where routing cannot
     * see it. Alone in force, a subscription draining a backlog keeps back-pressure: the WAL is its
     * buffer.
     */
    private boolean starvingElsewhere(Lane held) {
        long holdStart = held.holdStart();
        long window = context.settings().holdLimit().toNanos();
        boolean idleCounts = held.heldFor() >= IDLE_HOLD_FACTOR * held.holdLimitNanos();
        for (Lane lane : lanes.values()) {
            if (lane != held && lane.starving(holdStart, window, idleCounts)) {
                return true;
            }
        }
        if (idleCounts) {
            for (String id : lastSynced.byId().keySet()) {
                if (!id.equals(held.id) && !lanes.containsKey(id) && !context.paused().test(id) && !deleted.contains(id)) {
                    return true; // in force, no lane yet: nothing for it since this instance started
                }
            }
        }
        return false;
    }

    /** Past this many hold limits, an idle subscription counts as starving too ({@link #starvingElsewhere}). */
    static final int IDLE_HOLD_FACTOR = 6;

    private static ThreadFactory daemons(String name) {
        AtomicInteger count = new AtomicInteger();
        return runnable -> {
            Thread thread = new Thread(runnable, name + "-" + count.incrementAndGet());
            thread.setDaemon(true);
            return thread;
        };
    }

    /** Starts the lanes of subscriptions with rows in their durable queue, so those are delivered without new events. */
    public void resumeParked(Collection<Subscription> subscriptions) throws SQLException {
        resumeParked(subscriptions, Set.of());
    }

    /**
     * As {@link #resumeParked(Collection)}; {@code held}: ids of stored subscriptions held out of
     * force (a body this instance cannot read, written by a newer walhook during a rolling upgrade;
     * or shadowed by a configured subscription of the same name): not deleted, their queues stay.
     */
    public synchronized void resumeParked(Collection<Subscription> subscriptions, Set<String> held) throws SQLException {
        if (syncs == 0) {
            this.held = Set.copyOf(held);
        } else { // a sync since had a newer refresh's
            subscriptions = lastSynced.byId().values();
            held = this.held;
        }
        context.store().markRun(); // before routing starts: what the queues hold now was written before this run
        Set<String> queued = new HashSet<>(context.store().subscriptionsWithParkedEvents());
        for (Subscription subscription : subscriptions) {
            if (queued.remove(subscription.id())) {
                lane(subscription);
            }
        }
        queued.removeAll(held);
        for (String orphan : queued) {
            // a subscription of the API deleted while rows were still being written: nothing will deliver them
            if (!orphan.startsWith(Subscription.CONFIGURED)) {
                LOG.infof("subscription %s was deleted: dropping its durable queue", orphan);
                // rows another session holds are not waited for here; a subscription stored after all (missing
                // from the look taken before the take-over) keeps its queue, delivered once it is in force
                QueueDrop.start(context, orphan, orphan, () -> keptQueue(orphan));
            }
        }
    }

    /**
     * Asks whether the lane's durable queue holds rows (from before a restart, or written by an
     * instance that lost the slot) before it sends anything: the lanes made meanwhile are asked
     * about together, in one statement, one probe of the queue's index each. Asked one by one,
     * 10,000 tenants' first events made 10,000 round trips to the state database in the middle of
     * a drain.
     */
    private void probe(Lane lane) {
        toProbe.add(lane);
        if (probeSubmitted.compareAndSet(false, true)) {
            try {
                context.database().execute(this::probeQueues);
            } catch (java.util.concurrent.RejectedExecutionException stopping) {
                probeSubmitted.set(false); // walhook stops: what is undelivered is read again on restart
            }
        }
    }

    private void probeQueues() {
        probeSubmitted.set(false); // a lane added from now on is taken below or submits the next look
        List<Lane> probed = new ArrayList<>();
        for (Lane lane = toProbe.poll(); lane != null; lane = toProbe.poll()) {
            probed.add(lane);
        }
        if (probed.isEmpty()) {
            return;
        }
        List<String> ids = new ArrayList<>(probed.size());
        probed.forEach(lane -> ids.add(lane.subscription().id()));
        ParkedEventStore.FirstLook look;
        try {
            // the 410s recorded before this start (or take-over): still disabled
            look = context.store().firstLook(ids);
        } catch (SQLException | RuntimeException e) {
            // not asked again: each lane reads its own queue (retried from the timer), which is always right
            LOG.warnf("cannot ask whether %d new lanes' durable queues hold rows, nor which a 410 disabled (%s); each"
                    + " reads its own queue, and delivers", probed.size(),
                    e instanceof SQLException ? e.getMessage() : e.toString());
            probed.forEach(lane -> lane.probed(true, null, null));
            return;
        }
        Set<String> withRows = look.withRows();
        Map<String, String> recorded = look.gone();
        // counted before any of them reads, writes or deletes a row: each lane's count of its queue starts right
        Map<String, Long> counts = context.store().countsWithin(withRows, QUEUE_COUNT_LIMIT);
        probed.forEach(lane -> lane.probed(withRows.contains(lane.subscription().id()),
                counts == null ? null : counts.getOrDefault(lane.subscription().id(), 0L),
                recorded.get(lane.subscription().id())));
    }

    /** How long the new lanes' first look may take to count their queues (for /status) before they go on without. */
    static final Duration QUEUE_COUNT_LIMIT = Duration.ofSeconds(2);

    /**
     * Events dropped through the API whose changes the slot may send again
     * ({@link ParkedEventStore#dropped()}): each is settled unsent when it comes. Replaced whole
     * ({@link #dropped(ParkedEventStore.DroppedEvents)}); {@link #droppedUpTo} is the last commit
     * position among them, past which an event is not looked for.
     */
    private volatile Set<String> dropped = Set.of();
    private volatile long droppedUpTo = -1;
    private final Object droppedLock = new Object();

    /**
     * Adds to {@link #dropped}: those kept at activation, before routing starts, and a
     * subscription's as its drop is heard ({@link #droppedHeard}), for a change the stream has not
     * reached again yet. Kept for the activation: a transaction broken off and sent again comes again.
     */
    public void dropped(ParkedEventStore.DroppedEvents kept) {
        if (kept.keys().isEmpty()) {
            return;
        }
        synchronized (droppedLock) {
            Set<String> more = new HashSet<>(dropped);
            more.addAll(kept.keys());
            dropped = Set.copyOf(more);
            droppedUpTo = Math.max(droppedUpTo, kept.lastCommit());
        }
    }

    @Override
    public void send(Subscription subscription, ChangeEvent event, EventEncoder.Encoded body, Runnable done) {
        Lane lane = lane(subscription);
        if (lane == null) {
            done.run(); // deleted: nothing is delivered to it any more
            return;
        }
        if (event.tx().commitLsn().value() <= droppedUpTo
                && dropped.contains(ParkedEventStore.droppedKey(subscription.id(), event.id()))) {
            done.run(); // dropped from its durable queue through the API, and read from the slot again since
            return;
        }
        PartsOf last = partsOf;
        if (last == null || last.event() != event) { // one array for every subscription's copy of an event
            last = new PartsOf(event, Destination.Amqp.parts(event));
            partsOf = last;
        }
        String[] parts = last.parts();
        String address = subscription.destination() instanceof Destination.Amqp amqp ? amqp.address(parts) : null;
        Job job = new Job(event.id(), event.tx().commitLsn(), event.tx().commitTime(), body.body(), body.contentType(),
                body.headers(), address, lane.ordering(event));
        job.addressParts = parts;
        job.relation = event.relation();
        job.background = event.op() == io.walhook.change.Operation.READ;
        job.done = done;
        job.routedBy = subscription; // compared with the lane's when the lane takes it (Lane.accept)
        if (lane.routed.isEmpty()) {
            routedTo.add(lane);
        }
        lane.routed.add(job);
    }

    @Override
    public void flush() throws InterruptedException {
        for (int i = 0; i < routedTo.size(); i++) {
            routedTo.get(i).handOver();
        }
        routedTo.clear();
        awaitMemory();
    }

    /**
     * Back-pressure on all subscriptions together: while their undelivered events hold the whole
     * memory budget, routing waits (and the reader behind it). Lanes delivering free it; the lanes
     * holding it are asked to look again every second, so that those whose events cannot move
     * (failing, paused, held by their rate) give them to their durable queue and routing goes on.
     * The wait counts as waiting for the lane holding the most of it, as if routing had just
     * handed it events: one that holds routing back so for the hold limit while another starves
     * goes to its durable queue. Before, a lane handed nothing more (the stream carrying only other
     * subscriptions' changes) never counted its hold, and the others went one event at a time in
     * the memory it left, for as long as it took to deliver what it held.
     */
    private void awaitMemory() throws InterruptedException {
        MemoryBudget memory = context.memory();
        if (!memory.spent()) {
            return;
        }
        long nudged = 0;
        long began = System.nanoTime();
        while (!closed) {
            long now = System.nanoTime();
            if (now - nudged >= 1_000_000_000L) {
                nudged = now;
                for (Lane lane : lanes.values()) {
                    lane.lookAgainIfHolding();
                }
            }
            Lane most = holdingMost();
            if (most != null) {
                most.awaitRoom(began, 1_000_000_000L, true); // while it holds its share of the spent budget, a second at most
            }
            if (!memory.awaitRoom(100)) {
                return;
            }
        }
    }

    /** The lane delivering directly that holds the most of delivery's memory, or null. */
    private Lane holdingMost() {
        Lane most = null;
        long bytes = 0;
        for (Lane lane : lanes.values()) {
            long held = lane.memoryHeld();
            if (held > bytes && lane.isDirect()) {
                most = lane;
                bytes = held;
            }
        }
        return most;
    }

    private Lane lane(Subscription subscription) {
        Lane last = lastLane;
        if (last != null && last.subscription() == subscription && !last.isDeleted()) {
            return last; // runs of events to one subscription: no lookup
        }
        Lane lane = lanes.get(subscription.id());
        if (lane == null) {
            boolean[] made = new boolean[1];
            // the deleted set is asked inside the map's atomic step: a deletion either finds the lane made
            // (and stops it) or is seen here; asked before it, a lane could be made after its deletion and deliver
            // until the next change of the subscriptions
            lane = lanes.computeIfAbsent(subscription.id(), id -> {
                if (deleted.contains(id)) {
                    return null;
                }
                made[0] = true;
                return new Lane(subscription, context, true);
            });
            if (lane == null) {
                return null;
            }
            if (made[0]) {
                Synced synced = lastSynced; // read after the lane is in the map: a sync after this read finds it
                Subscription latest = synced.byId().get(subscription.id());
                if (latest != null) {
                    lane.synced(latest, synced.number());
                }
                probe(lane);
            }
        }
        lane.follow(subscription);
        lastLane = lane;
        return lane;
    }

    /**
     * The subscriptions in force changed (reloaded, paused, resumed): lanes follow them, and the lanes
     * of subscriptions no longer in force stop.
     */
    public CompletableFuture<Void> sync(Collection<Subscription> inForce) {
        return sync(inForce, Set.of(), id -> false);
    }

    /**
     * As {@link #sync(Collection)}; {@code held}: ids of stored subscriptions held out of force (a
     * body this instance cannot read, written by a newer walhook during a rolling upgrade or by
     * hand; or shadowed by a configured subscription of the same name): not deleted, their lanes
     * hold their events as a paused one does, in the durable queue, which stays; nothing of them is
     * sent with a configuration that is no longer theirs. {@code inForceNow}: whether a
     * subscription is in force in the latest refresh, asked before a lane is stopped (routing may
     * already route with a refresh newer than {@code inForce}, and have made a lane for a
     * subscription it adds).
     *
     * <p>Completes once each lane it changed (a new destination, paused, held) has ended the turn it
     * was in: no request starts from then on with what the subscription was before. An API answer
     * given before that let a turn under way go on starting requests to a destination the operator
     * had just replaced.
     */
    public synchronized CompletableFuture<Void> sync(Collection<Subscription> inForce, Set<String> held,
            Predicate<String> inForceNow) {
        syncs++;
        Map<String, Subscription> byId = new java.util.HashMap<>();
        inForce.forEach(subscription -> byId.put(subscription.id(), subscription));
        Synced before = lastSynced;
        lastSynced = new Synced(byId, syncs); // before the lanes are walked: one made meanwhile is walked, or reads it
        Set<String> heldBefore = this.held;
        Set<String> ids = new HashSet<>(held);
        Set<String> pausedNow = new HashSet<>(held);
        List<Lane> toWake = new ArrayList<>();
        List<Subscription> toStart = new ArrayList<>();
        for (Subscription subscription : inForce) {
            ids.add(subscription.id());
            context.metrics().inForce(subscription);
            boolean paused = context.paused().test(subscription.id());
            if (paused) {
                pausedNow.add(subscription.id());
            }
            Lane lane = lanes.get(subscription.id());
            boolean keptQueue = kept.remove(subscription.id()); // in force: no longer waiting, lane or not
            if (lane == null) {
                if (heldBefore.contains(subscription.id()) || keptQueue) {
                    toStart.add(subscription); // in force again: what waits in its queue goes without its next event
                }
                continue;
            }
            // only the lanes of those written, paused or resumed since: with 10,000 tenants one change does
            // not wake every lane
            if (lane.synced(subscription, syncs) || paused != pausedAtSync.contains(subscription.id())) {
                toWake.add(lane);
            }
        }
        // after the lanes have their latest configuration: one held until now sends nothing with its old one
        this.held = Set.copyOf(held);
        for (String id : held) {
            Lane lane = lanes.get(id);
            if (lane != null && !pausedAtSync.contains(id)) {
                toWake.add(lane); // held from now on: what it holds goes to its queue
            }
        }
        CompletableFuture<?>[] turns = new CompletableFuture<?>[toWake.size()];
        for (int i = 0; i < turns.length; i++) {
            turns[i] = toWake.get(i).nextTurn();
        }
        toStart.forEach(this::lane);
        pausedAtSync = pausedNow;
        for (String id : List.copyOf(lanes.keySet())) {
            if (!ids.contains(id)) {
                if (inForceNow.test(id)) {
                    ids.add(id); // newer than this sync: kept, its meters too
                } else {
                    deleted(id);
                }
            }
        }
        // and those that had no lane here yet: routing may still hold them (a router taken at the start of a
        // transaction), and would make them one after the deletion was answered
        for (String id : before.byId().keySet()) {
            if (!ids.contains(id) && !inForceNow.test(id)) {
                deleted(id);
            }
        }
        context.metrics().onlyInForce(ids);
        return CompletableFuture.allOf(turns);
    }

    /**
     * A queue resumed as a deleted subscription's is its stored subscription's after all: its lane
     * starts now if a sync put the subscription in force, else at the sync that does.
     */
    private synchronized void keptQueue(String id) {
        Subscription inForce = lastSynced.byId().get(id);
        if (inForce != null) {
            lane(inForce);
        } else {
            kept.add(id);
        }
    }

    /** A subscription was deleted: its delivery stops at once and what its lane wrote to the queue goes. */
    public void deleted(String id) {
        deleted.add(id);
        Lane lane = lanes.remove(id);
        if (lane != null) {
            LOG.infof("subscription %s deleted: its delivery stopped", lane.subscription().name());
            lane.delete();
        }
    }

    /** Rows of this subscription's durable queue were dropped through the API: its lane counts its queue again. */
    public void recount(String subscriptionId) {
        Lane lane = lanes.get(subscriptionId);
        if (lane != null) {
            lane.recount();
        }
    }

    /**
     * As {@link #recount}, for a drop heard through the database (whichever instance served it, this
     * one too): the dropped events are also read into {@link #dropped}. Not on the API's thread, whose
     * requests take no connection delivery needs.
     */
    public void droppedHeard(String subscriptionId) {
        recount(subscriptionId);
        droppedNow(subscriptionId);
    }

    /**
     * Dead letters may have been dropped unheard, of any subscription: every durable lane reads its queue again (its
     * count, as shown in {@code /status}, is not asked for again).
     */
    public void readQueuesAgain() {
        droppedNow(null);
        lanes.values().forEach(Lane::readQueueAgain);
    }

    /** Takes the subscription's (null: every one's) dropped dead letters into {@link #dropped}. */
    private void droppedNow(String subscriptionId) {
        try {
            dropped(context.store().dropped(subscriptionId));
        } catch (SQLException | RuntimeException e) {
            // its lanes still let go of what they read back; only a change the stream reads again could come back
            LOG.warnf("cannot read which dead letters %s dropped: %s", subscriptionId == null ? "were"
                    : "of subscription " + subscriptionId + " were", e instanceof SQLException ? e.getMessage() : e.toString());
        }
    }

    /**
     * A replay may have been asked unheard (the listening session was away): every subscription a
     * 410 disabled and a replay cleared since is enabled again. One whose destination is still gone
     * answers 410 again, and is disabled again.
     */
    public void retryDisabled() {
        List<Lane> disabled = lanes.values().stream().filter(Lane::disabled).toList();
        if (disabled.isEmpty()) {
            return;
        }
        try {
            context.database().execute(() -> {
                Map<String, String> recorded;
                try {
                    recorded = context.store().gone(disabled.stream().map(lane -> lane.subscription().id()).toList());
                } catch (SQLException | RuntimeException e) {
                    LOG.warnf("cannot read which subscriptions a 410 still disables (%s): they stay disabled until a"
                            + " replay is heard", e instanceof SQLException ? e.getMessage() : e.toString());
                    return;
                }
                disabled.forEach(lane -> lane.enableUnlessGone(recorded.get(lane.subscription().id())));
            });
        } catch (java.util.concurrent.RejectedExecutionException stopping) {
            // walhook stops: the state says which are disabled at the next start
        }
    }

    /** The API's replay: the subscription's queued events are tried now; one a 410 disabled is enabled again. */
    public void retryNow(Subscription subscription) {
        Lane lane = lane(subscription);
        if (lane != null) {
            lane.retryNow();
        }
    }

    /** Bytes of undelivered events all lanes hold in memory now, as routing handed them ({@link MemoryBudget}). */
    public long memoryInUse() {
        return context.memory().used();
    }

    /** Bytes of events all lanes read back from their durable queues and hold in memory now. */
    public long readBackInUse() {
        return context.readBack().used();
    }

    /** Per subscription with a lane, by name. */
    public List<DeliveryStatus> status() {
        List<DeliveryStatus> all = new ArrayList<>();
        for (Lane lane : lanes.values()) {
            Lane.Status s = lane.status();
            all.add(new DeliveryStatus(s.id(), s.name(), s.mode(), s.queued(), s.inFlight(), s.retrying(), s.heldBack(),
                    s.durableBacklog(), s.oldestParkedCommit(), s.drainRate(), s.delivered(), s.lastError(),
                    s.disabled(), s.paused()));
        }
        all.sort(Comparator.comparing(DeliveryStatus::name));
        return all;
    }

    /** How long a stop waits for the 410s being written ({@link #awaitGoneWrites}). */
    static final Duration GONE_STOP_WAIT = Duration.ofSeconds(5);

    /**
     * Waits, {@link #GONE_STOP_WAIT} at most, for the 410s the lanes are writing: shutting the
     * durable queue's threads dropped a write under way, and the next start delivered to the
     * endpoint that had said it was gone.
     */
    private void awaitGoneWrites() {
        java.util.concurrent.CompletableFuture<?>[] pending = lanes.values().stream().map(Lane::goneWritten)
                .filter(write -> !write.isDone()).toArray(java.util.concurrent.CompletableFuture[]::new);
        if (pending.length == 0) {
            return;
        }
        try {
            java.util.concurrent.CompletableFuture.allOf(pending).get(GONE_STOP_WAIT.toMillis(),
                    java.util.concurrent.TimeUnit.MILLISECONDS);
        } catch (java.util.concurrent.TimeoutException e) {
            LOG.warnf("stopping without the 410 of %d subscriptions recorded (the state database did not answer"
                    + " within %d s): the next start delivers to them again", pending.length, GONE_STOP_WAIT.toSeconds());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (java.util.concurrent.ExecutionException cannot) {
            // each write's failure is its own (logged, tried again)
        }
    }

    @Override
    public void close() {
        closed = true;
        lanes.values().forEach(Lane::close);
        awaitGoneWrites();
        context.timer().shutdownNow();
        context.lanes().shutdownNow();
        context.database().shutdownNow();
    }
}
