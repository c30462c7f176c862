package io.walhook.delivery;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.function.Consumer;

/**
 * How many requests may be under way to one destination (scheme, host and port) at once, for all
 * subscriptions together: as many as the client keeps connections to it. A lane asks before it
 * starts a request; when the destination is at its limit the lane waits its turn and its events
 * stay in the lane, where they batch, instead of piling up in the connection pool's queue (10,000
 * tenant lanes of one receiver had 40,000 requests queued there, each with its timeout running).
 *
 * <p>A request that ends hands its place straight to a lane waiting ({@code granted} receives the
 * gate), so a place is never free while a lane waits; a lane given a place it no longer needs
 * leaves it at once, which hands it on. Lanes holding no place go first, in the order they asked,
 * then lanes that hold some: a tenant whose endpoint is slow, and whose requests therefore hold
 * their places long, gets a second place only when no other lane waits for its first, so a few
 * slow tenants of a shared host cannot take every place and hold the others to their pace. An
 * eighth of the places (none below 8) are kept for lanes holding none: many slow tenants that
 * always have more to send fill the rest, and a tenant whose events come one at a time, holding
 * no place between them, still finds one free rather than wait for a slow request to end (up to
 * the request timeout, when the slow ones hang and time out together). A lane whose last attempt
 * failed asks as one holding some, whatever it holds: many tenants whose endpoints hang, each
 * probing one request at a time and holding no place between probes, would otherwise take the
 * kept places and queue before healthy tenants, which then waited for their probes to time out.
 * Such a lane holding none that has waited {@link #STARVED_AFTER} takes the next place that frees,
 * whoever else waits, though no more than {@link #starvedLimit} such lanes hold places at once: behind a drain
 * whose lanes always wait for their first place, a tenant that failed once, which could not succeed
 * without a place, waited for as long as the drain lasted.
 *
 * <p>A lane is known by its {@code granted} callback, the same object on every call.
 */
public final class DestinationGate {

    /** The places the client's pools keep connections for: the most {@link #fitTo} gives. */
    private final int configured;
    private int limit;
    /** Places only lanes holding none may take. */
    private int reserve;
    private int inUse;
    /** Places each lane holds now; a lane holding none has no entry. */
    private final Map<Consumer<DestinationGate>, int[]> held = new HashMap<>();
    /** Lanes waiting that hold no place, in the order they asked. */
    private final LinkedHashSet<Consumer<DestinationGate>> waitingFirst = new LinkedHashSet<>();
    /** Lanes waiting for one more place, in the order they asked: served when no lane waits for its first. */
    private final LinkedHashSet<Consumer<DestinationGate>> waitingMore = new LinkedHashSet<>();
    /** Lanes waiting as lanes holding some because their last attempt failed (some hold none). */
    private final java.util.Set<Consumer<DestinationGate>> failing = new java.util.HashSet<>();
    /**
     * Lanes whose request failed while they were not waiting: the next time each asks, it asks as a
     * lane whose last attempt failed, its own count of failures not having seen it yet (its turn was
     * already running).
     */
    private final java.util.Set<Consumer<DestinationGate>> failedUnseen = new java.util.HashSet<>();
    /**
     * Lanes forgotten ({@link #forget}) with requests under way: what those requests' ends say is not
     * remembered of them, and each is dropped when its last place leaves (a deleted lane kept as one
     * whose failure it had not seen was held, with all its callback holds, as long as walhook ran).
     */
    private final java.util.Set<Consumer<DestinationGate>> gone = new java.util.HashSet<>();
    /** Requests under way through each channel of the client (its event loops and pools), for {@link #channel}. */
    private final int[] byChannel;
    /**
     * Lanes waiting as lanes holding some because their last attempt failed, while holding none,
     * with when they began to (System.nanoTime), oldest first; an entry whose lane no longer waits
     * so is dropped when met ({@link #starved}).
     */
    private final LinkedHashMap<Consumer<DestinationGate>, Long> demoted = new LinkedHashMap<>();
    /** Lanes holding a place given them for having waited {@link #STARVED_AFTER} ({@link #starved}). */
    private final java.util.Set<Consumer<DestinationGate>> rescued = new java.util.HashSet<>();
    private final java.util.function.LongSupplier nanoTime;

    /** How long a lane that failed and holds no place waits before the next place that frees is its. */
    static final java.time.Duration STARVED_AFTER = java.time.Duration.ofSeconds(1);

    DestinationGate(int limit) {
        this(limit, 1);
    }

    DestinationGate(int limit, int channels) {
        this(limit, channels, System::nanoTime);
    }

    DestinationGate(int limit, int channels, java.util.function.LongSupplier nanoTime) {
        this.nanoTime = nanoTime;
        if (limit < 1) {
            throw new IllegalArgumentException("a destination takes at least one request at a time, not " + limit);
        }
        this.configured = limit;
        this.limit = limit;
        this.reserve = limit / 8;
        this.byChannel = new int[Math.max(1, channels)];
    }

    /**
     * A place for one request now, or false: then {@code lane} gets one as soon as a request ends
     * (it waits once, however often it asks), and must use or leave it.
     */
    synchronized boolean tryEnter(Consumer<DestinationGate> lane) {
        return tryEnter(lane, false);
    }

    /**
     * As {@link #tryEnter(Consumer)}; {@code lastFailed}: the lane's last attempt failed. A lane
     * that waits keeps its turn however often it asks, unless what it waits as changed (its last
     * attempt failed since it asked, or succeeded): then it is judged afresh, and enters now if a
     * lane of its kind could.
     */
    synchronized boolean tryEnter(Consumer<DestinationGate> lane, boolean lastFailed) {
        gone.remove(lane); // back (its destination moved away and back): a lane like any other
        lastFailed |= failedUnseen.remove(lane);
        boolean holdsNone = !held.containsKey(lane) && !lastFailed;
        if (waitingFirst.contains(lane) || waitingMore.contains(lane)) {
            if (holdsNone ? waitingFirst.contains(lane) : waitingMore.contains(lane)) {
                if (!lastFailed) {
                    failing.remove(lane); // holding some, it waits for its first place again once it holds none
                }
                return false;
            }
            waitingFirst.remove(lane);
            waitingMore.remove(lane);
            failing.remove(lane);
            demoted.remove(lane);
        }
        if (waitingFirst.isEmpty() && (holdsNone ? inUse < limit : waitingMore.isEmpty() && inUse < limit - reserve)) {
            inUse++;
            hold(lane, 1);
            return true;
        }
        (holdsNone ? waitingFirst : waitingMore).add(lane);
        if (lastFailed) {
            failing.add(lane);
            if (!held.containsKey(lane)) {
                demoted.remove(lane);
                demoted.put(lane, nanoTime.getAsLong());
            }
        }
        return false;
    }

    /** {@code lane}'s request ended, or it does not need a place it was granted: a lane waiting gets it. */
    void leave(Consumer<DestinationGate> lane) {
        leave(lane, false, false);
    }

    /**
     * As {@link #leave(Consumer)}; {@code failed}: the request failed. The lane, if it waits for
     * another place, waits as one whose last attempt failed from now, and if it does not wait, asks
     * as one next time: its own count of failures learns of it only on its next turn, and
     * meanwhile, holding none, it took the place it left as a healthy lane, a kept one included.
     */
    void leave(Consumer<DestinationGate> lane, boolean failed) {
        leave(lane, failed, !failed);
    }

    /** {@code delivered}: the place's request was delivered (a place handed back unused was not). */
    private void leave(Consumer<DestinationGate> lane, boolean failed, boolean delivered) {
        Consumer<DestinationGate> next;
        synchronized (this) {
            hold(lane, -1);
            if (delivered || !held.containsKey(lane)) {
                // counted until a request of it is delivered (healthy again, it is a lane like any other; a place handed
                // back unused says nothing of it) or it holds none
                rescued.remove(lane);
            }
            boolean over = inUse - 1 >= limit; // the limit came down (fitTo) below what was under way
            if (gone.contains(lane)) {
                if (!held.containsKey(lane)) {
                    gone.remove(lane);
                }
            } else if (failed && waitingMore.contains(lane)) {
                failing.add(lane);
            } else if (failed && !waitingFirst.contains(lane)) {
                failedUnseen.add(lane);
            }
            if (!held.containsKey(lane) && !failing.contains(lane) && waitingMore.remove(lane)) {
                waitingFirst.add(lane); // it holds none now: it waits for its first again
            }
            if (!held.containsKey(lane) && failing.contains(lane) && waitingMore.contains(lane)) {
                demoted.putIfAbsent(lane, nanoTime.getAsLong()); // it holds none now, and waits as a lane that failed
            }
            if (over) {
                inUse--;
                return;
            }
            next = nextWaiting(inUse - 1);
            if (next == null) {
                inUse--;
                return;
            }
            hold(next, 1);
        }
        next.accept(this);
    }

    /**
     * What the destination takes at once, as its connections say (an HTTP/2 server allowing few
     * streams on each): the limit becomes that, never above the pools' own. Requests past it waited
     * in the pool's queue, each with its timeout running, and failed as timeouts without being sent
     * while the receiver answered all it got. A limit raised again hands its new places on.
     */
    void fitTo(int places) {
        List<Consumer<DestinationGate>> granted = new ArrayList<>();
        synchronized (this) {
            int fitted = Math.max(1, Math.min(configured, places));
            if (fitted == limit) {
                return;
            }
            limit = fitted;
            reserve = fitted / 8;
            while (inUse < limit) {
                Consumer<DestinationGate> next = nextWaiting(inUse);
                if (next == null) {
                    break;
                }
                inUse++;
                hold(next, 1);
                granted.add(next);
            }
        }
        granted.forEach(lane -> lane.accept(this));
    }

    synchronized int limit() {
        return limit;
    }

    /** A lane that stops (its subscription deleted) waits no more; its requests under way still leave. */
    synchronized void forget(Consumer<DestinationGate> lane) {
        waitingFirst.remove(lane);
        waitingMore.remove(lane);
        failing.remove(lane);
        failedUnseen.remove(lane);
        demoted.remove(lane);
        if (held.containsKey(lane)) {
            gone.add(lane);
        }
    }

    /**
     * The channel the next request goes through, the one with the fewest requests to this
     * destination under way: with the gate's limit at the channels' pools together, no pool gets
     * more than its share, whichever threads start the requests. Paired with {@link #channelDone}.
     */
    synchronized int channel() {
        int best = 0;
        for (int i = 1; i < byChannel.length; i++) {
            if (byChannel[i] < byChannel[best]) {
                best = i;
            }
        }
        byChannel[best]++;
        return best;
    }

    synchronized void channelDone(int channel) {
        byChannel[channel]--;
    }

    private void hold(Consumer<DestinationGate> lane, int change) {
        int[] count = held.get(lane);
        if (count == null) {
            if (change > 0) {
                held.put(lane, new int[] {change});
            }
            return;
        }
        count[0] += change;
        if (count[0] <= 0) {
            held.remove(lane);
        }
    }

    /**
     * The lane a free place goes to, taken off its wait, with {@code others} places in use besides
     * it: a lane waiting for its first, else one waiting for more, though not into the places kept
     * for lanes holding none; null when none may have it.
     */
    private Consumer<DestinationGate> nextWaiting(int others) {
        Consumer<DestinationGate> starved = starved();
        if (starved != null) {
            waitingMore.remove(starved);
            failing.remove(starved);
            demoted.remove(starved);
            rescued.add(starved);
            return starved;
        }
        Consumer<DestinationGate> next = first(waitingFirst);
        if (next == null && others < limit - reserve) {
            next = first(waitingMore);
            failing.remove(next);
            demoted.remove(next);
        }
        return next;
    }

    /**
     * The lane that failed, holds no place and has waited {@link #STARVED_AFTER} the longest, while
     * fewer than {@link #starvedLimit} places are held so; or null.
     */
    private Consumer<DestinationGate> starved() {
        if (demoted.isEmpty() || rescued.size() >= starvedLimit()) {
            return null;
        }
        long now = nanoTime.getAsLong();
        for (Iterator<Map.Entry<Consumer<DestinationGate>, Long>> it = demoted.entrySet().iterator(); it.hasNext(); ) {
            Map.Entry<Consumer<DestinationGate>, Long> waited = it.next();
            Consumer<DestinationGate> lane = waited.getKey();
            if (!waitingMore.contains(lane) || !failing.contains(lane) || held.containsKey(lane)) {
                it.remove(); // no longer waits so (granted, forgotten, or it holds a place)
                continue;
            }
            return now - waited.getValue() >= STARVED_AFTER.toNanos() ? lane : null;
        }
        return null;
    }

    /**
     * How many lanes given a place for having starved may hold places at once: half the places kept
     * for lanes holding none (at least one). Many tenants whose endpoints hang, each given a place
     * so, take no more than that from the healthy ones, who keep the other half.
     */
    private int starvedLimit() {
        return Math.max(1, reserve / 2);
    }

    private static Consumer<DestinationGate> first(LinkedHashSet<Consumer<DestinationGate>> waiting) {
        Iterator<Consumer<DestinationGate>> first = waiting.iterator();
        if (!first.hasNext()) {
            return null;
        }
        Consumer<DestinationGate> lane = first.next();
        first.remove();
        return lane;
    }

    synchronized int inUse() {
        return inUse;
    }

    /** Lanes the gate keeps anything of: places held, a wait, a failure it has not told them of. */
    synchronized int lanesKept() {
        java.util.Set<Consumer<DestinationGate>> kept = new java.util.HashSet<>(held.keySet());
        kept.addAll(waitingFirst);
        kept.addAll(waitingMore);
        kept.addAll(failing);
        kept.addAll(failedUnseen);
        kept.addAll(gone);
        kept.addAll(demoted.keySet());
        kept.addAll(rescued);
        return kept.size();
    }

    synchronized int waiting() {
        return waitingFirst.size() + waitingMore.size();
    }
}
