package io.walhook.routing;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.WeakHashMap;

import io.walhook.change.ChangeEvent;
import io.walhook.change.RelationInfo;

/**
 * Decides which subscriptions get each event. Table patterns are resolved once per relation (the
 * cache is keyed by the Relation message's identity, so a schema change starts afresh); then the
 * operation, then the filter, evaluated only when table and operation matched. Immutable
 * subscriptions; one router per set of them, swapped between transactions when they change.
 * Single-threaded (the reader's or delivery's thread).
 */
public final class Router {

    private static final Subscription[] NONE = new Subscription[0];

    private final List<Subscription> subscriptions;
    private final Subscription[] messageSubscribers;
    private final Map<RelationInfo, Subscription[]> byRelation = new WeakHashMap<>();

    public Router(List<Subscription> subscriptions) {
        this.subscriptions = List.copyOf(subscriptions);
        this.messageSubscribers = this.subscriptions.stream().filter(Subscription::wantsMessages).toArray(Subscription[]::new);
    }

    public List<Subscription> subscriptions() {
        return subscriptions;
    }

    /** The subscriptions that want this event, in the order they were given. */
    public List<Subscription> route(ChangeEvent event) {
        return route(event, null);
    }

    /**
     * As {@link #route(ChangeEvent)}; filters read the event's rows from {@code eventJson} (its
     * JSON without projection, written at most once and shared with delivery) when given.
     */
    public List<Subscription> route(ChangeEvent event, java.util.function.Supplier<byte[]> eventJson) {
        Subscription[] candidates = event.relation() == null ? messageSubscribers : forRelation(event.relation());
        if (candidates.length == 0) {
            return List.of();
        }
        List<Subscription> matched = new ArrayList<>(candidates.length);
        CelVariables variables = null;
        for (Subscription subscription : candidates) {
            if (!subscription.operations().contains(event.op())) {
                continue;
            }
            if (subscription.filter().isPresent()) {
                if (variables == null) {
                    variables = eventJson == null ? CelVariables.of(event) : CelVariables.of(event, eventJson);
                }
                if (!subscription.filter().get().matches(variables)) {
                    continue;
                }
            }
            matched.add(subscription);
        }
        return matched;
    }

    private Subscription[] forRelation(RelationInfo relation) {
        Subscription[] cached = byRelation.get(relation);
        if (cached == null) {
            if (!relation.routed()) {
                cached = NONE;
            } else {
                cached = subscriptions.stream().filter(s -> s.matchesTable(relation.schema(), relation.table()))
                        .toArray(Subscription[]::new);
            }
            byRelation.put(relation, cached);
        }
        return cached;
    }
}
