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
    /** The stored subscriptions' ids and when each was written, as last loaded: the same again, nothing changed. */
    private List<SubscriptionStore.Written> version;
    /** The stored subscriptions last loaded, by id: those not written since are not parsed again. */
    private java.util.Map<java.util.UUID, SubscriptionStore.Stored> known = java.util.Map.of();

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
     * The subscriptions in force with, read together, the ids of stored subscriptions whose body
     * does not read as a subscription here (written by a newer walhook during a rolling upgrade,
     * or by hand: left out of routing, but not gone, so delivery keeps their queues), the ids of
     * both, and the number of the refresh that made them (one whoever called it: delivery follows
     * each).
     */
    public record InForce(List<Subscription> subscriptions, Set<String> unreadable, Set<String> ids, long generation) {
    }

    public InForce inForce() {
        return inForce;
    }

    /** As in {@link #inForce()}. */
    public Set<String> unreadable() {
        return inForce.unreadable();
    }

    public Router router() {
        return router;
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
    public synchronized boolean refresh() throws SQLException {
        if (store == null) {
            return false;
        }
        List<SubscriptionStore.Written> current = store.written();
        if (current.equals(version)) {
            return false;
        }
        List<Subscription> all = new ArrayList<>(configured);
        Set<String> names = new HashSet<>();
        configured.forEach(s -> names.add(s.name()));
        Set<String> nowPaused = new HashSet<>();
        List<SubscriptionStore.Stored> rows = store.list(current, known);
        java.util.Map<java.util.UUID, SubscriptionStore.Stored> loaded = new java.util.HashMap<>();
        rows.forEach(row -> loaded.put(row.id(), row));
        known = loaded;
        Set<String> missing = new HashSet<>();
        for (SubscriptionStore.Written w : current) {
            if (!loaded.containsKey(w.id())) {
                missing.add(w.id().toString());
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
                LOG.warnf("stored subscription %s is shadowed by the configured one of the same name", stored.name());
            }
        }
        Router next = new Router(all);
        Set<String> ids = new HashSet<>(missing);
        all.forEach(subscription -> ids.add(subscription.id()));
        // before the router: whoever routes with this refresh's subscriptions finds them here too
        inForce = new InForce(next.subscriptions(), Set.copyOf(missing), Set.copyOf(ids), inForce.generation() + 1);
        paused = Set.copyOf(nowPaused);
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
