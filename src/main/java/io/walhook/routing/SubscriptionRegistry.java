package io.walhook.routing;

import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import org.jboss.logging.Logger;

/**
 * The subscriptions in force: those of the configuration (read-only) and those of the API, which
 * {@link #refresh()} reloads when the table changed. A configured name wins over a stored one.
 * The router it hands out is immutable; routing takes a fresh one at each transaction, so a change
 * applies from the next transaction and never splits one.
 */
public final class SubscriptionRegistry {

    private static final Logger LOG = Logger.getLogger(SubscriptionRegistry.class);

    private final List<Subscription> configured;
    private final SubscriptionStore store;
    private volatile Router router;
    private volatile Set<String> paused = Set.of();
    private volatile InForce inForce;
    /** What stored subscriptions matched before their edits, oldest edit first, with the router they make. */
    private volatile Before before = new Before(List.of(), null);
    /** The stored subscriptions' ids and when each was written, as last loaded: the same again, nothing changed. */
    private List<SubscriptionStore.Written> version;
    /** The stored subscriptions last loaded, by id: those not written since are not parsed again. */
    private java.util.Map<java.util.UUID, SubscriptionStore.Stored> known = java.util.Map.of();
    /** The ids held at the last refresh: a shadowed subscription is warned of once, not at every refresh. */
    private Set<String> heldBefore = Set.of();

    /** @param store null when only configured subscriptions exist */
    public SubscriptionRegistry(List<Subscription> configured, SubscriptionStore store) {
        this.configured = List.copyOf(configured);
        this.store = store;
        this.router = new Router(this.configured);
        Set<String> ids = new HashSet<>();
        this.configured.forEach(subscription -> ids.add(subscription.id()));
        this.inForce = new InForce(this.configured, Set.of(), Set.copyOf(ids), 0);
    }

    /**
     * The subscriptions in force with, read together, the ids of stored subscriptions held out of
     * force but not gone ({@code held}: delivery keeps their queues and sends nothing of them),
     * the ids of both, and the number of the refresh that made them (one whoever called it:
     * delivery follows each). A stored subscription is held when its body does not read as a
     * subscription here (written by a newer walhook during a rolling upgrade, or by hand), or when
     * a configured subscription of the same name shadows it.
     */
    public record InForce(List<Subscription> subscriptions, Set<String> held, Set<String> ids, long generation) {
    }

    public InForce inForce() {
        return inForce;
    }

    /** As in {@link #inForce()}. */
    public Set<String> held() {
        return inForce.held();
    }

    public Router router() {
        return router;
    }

    /**
     * The router for a change committed at {@code commitLsn}, and what each subscription it returns
     * stands for now: a stored subscription whose tables, operations or filter were edited after
     * that change committed matches as it did before the edit, so a change routed late (sent again
     * by the slot after a crash, or behind a backlog) goes where it went when it committed.
     * {@code current} is null when no such edit applies: the router's subscriptions are the ones in force.
     */
    public record Routing(Router router, java.util.Map<Subscription, Subscription> current, Set<String> unborn) {
        /** {@code router}'s subscriptions are the ones in force, but those of {@code unborn} (ids) were created after the change. */
        Routing(Router router, Set<String> unborn) {
            this(router, null, unborn);
        }
    }

    /** The router made for the last set of earlier matchings asked for, from the router then in force. */
    private record Made(List<SubscriptionStore.MatchedBefore> applying, Router from, Routing routing) {
    }

    /** Routing's own (its one thread calls {@link #routing}). */
    private Made lastMade;

    public Routing routing(io.walhook.pgoutput.Lsn commitLsn) {
        Router now = router;
        Before edits = before;
        if (edits.matched().isEmpty() || edits.latest().compareTo(commitLsn) <= 0) {
            return new Routing(now, Set.of());
        }
        // for each subscription, the first edit after the change: what it matched when the change committed
        java.util.Map<String, SubscriptionStore.MatchedBefore> applying = new java.util.LinkedHashMap<>();
        for (SubscriptionStore.MatchedBefore edit : edits.matched()) {
            if (edit.until().compareTo(commitLsn) > 0) {
                applying.putIfAbsent(edit.subscriptionId(), edit);
            }
        }
        List<SubscriptionStore.MatchedBefore> key = List.copyOf(applying.values());
        Made last = lastMade;
        if (last != null && last.applying().equals(key) && last.from() == now) {
            return last.routing();
        }
        if (key.stream().allMatch(SubscriptionStore.MatchedBefore::created)) {
            // only subscriptions created since (tenants coming one by one, the stream a moment behind): they are
            // left out of what the router in force matches, rather than a router of every subscription made again
            Set<String> unborn = new HashSet<>();
            key.forEach(created -> unborn.add(created.subscriptionId()));
            Routing made = new Routing(now, Set.copyOf(unborn));
            lastMade = new Made(key, now, made);
            return made;
        }
        List<Subscription> then = new ArrayList<>();
        java.util.Map<Subscription, Subscription> current = new java.util.IdentityHashMap<>();
        for (Subscription subscription : now.subscriptions()) {
            SubscriptionStore.MatchedBefore edit = applying.get(subscription.id());
            Subscription matched = edit == null ? subscription : subscription.withMatching(edit.matching());
            then.add(matched);
            current.put(matched, subscription);
        }
        Routing made = new Routing(new Router(then), current, Set.of());
        lastMade = new Made(key, now, made);
        return made;
    }

    /** The edits of {@link #routing}, and the latest edit's position. */
    private record Before(List<SubscriptionStore.MatchedBefore> matched, io.walhook.pgoutput.Lsn latest) {
    }

    /** The stored subscriptions as last loaded, by id (for a reader of the table that would parse them again). */
    public synchronized java.util.Map<java.util.UUID, SubscriptionStore.Stored> known() {
        return known;
    }

    /** Whether delivery to this subscription (by id) is paused: its events wait in its durable queue. */
    public boolean isPaused(String id) {
        return paused.contains(id);
    }

    /** Reloads the stored subscriptions if they changed; returns whether the router was replaced. */
    public boolean refresh() throws SQLException {
        return refresh(store);
    }

    /**
     * The same, read through {@code through} (the same table through another pool: the management
     * API's, whose connections are each checked before use).
     */
    public synchronized boolean refresh(SubscriptionStore through) throws SQLException {
        if (store == null) {
            return false;
        }
        List<SubscriptionStore.Written> current = through.written();
        if (current.equals(version)) {
            return false;
        }
        List<Subscription> all = new ArrayList<>(configured);
        Set<String> names = new HashSet<>();
        configured.forEach(s -> names.add(s.name()));
        Set<String> nowPaused = new HashSet<>();
        List<SubscriptionStore.Stored> rows = through.list(current, known);
        List<SubscriptionStore.MatchedBefore> edits = through.matchedBefore();
        java.util.Map<java.util.UUID, SubscriptionStore.Stored> loaded = new java.util.HashMap<>();
        rows.forEach(row -> loaded.put(row.id(), row));
        known = loaded;
        Set<String> held = new HashSet<>();
        for (SubscriptionStore.Written w : current) {
            if (!loaded.containsKey(w.id())) {
                held.add(w.id().toString()); // its body does not read here
            }
        }
        for (SubscriptionStore.Stored row : rows) {
            Subscription stored = row.subscription();
            if (row.paused()) {
                nowPaused.add(stored.id());
            }
            if (names.add(stored.name())) {
                all.add(stored);
            } else {
                held.add(stored.id());
                if (!heldBefore.contains(stored.id())) {
                    LOG.warnf("stored subscription %s (%s) is shadowed by the configured one of the same name: no change is"
                            + " routed to it, and its durable queue waits until either is renamed or removed", stored.name(),
                            stored.id());
                }
            }
        }
        Router next = new Router(all);
        Set<String> ids = new HashSet<>(held);
        all.forEach(subscription -> ids.add(subscription.id()));
        heldBefore = held;
        // before the router: whoever routes with this refresh's subscriptions finds them here too
        inForce = new InForce(next.subscriptions(), Set.copyOf(held), Set.copyOf(ids), inForce.generation() + 1);
        paused = Set.copyOf(nowPaused);
        before = new Before(List.copyOf(edits), edits.isEmpty() ? null : edits.get(edits.size() - 1).until());
        router = next;
        version = current;
        if (all.size() <= 20) {
            LOG.infof("subscriptions: %s", all.stream().map(Subscription::name).toList());
        } else {
            LOG.infof("subscriptions: %d (%s, ...)", all.size(),
                    String.join(", ", all.subList(0, 10).stream().map(Subscription::name).toList()));
        }
        return true;
    }
}
