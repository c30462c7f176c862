package io.walhook.routing;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.WeakHashMap;

import io.walhook.change.ChangeEvent;
import io.walhook.change.Operation;
import io.walhook.change.RelationInfo;

/**
 * Decides which subscriptions get each event. Table patterns are resolved once per relation (the
 * cache is keyed by the Relation message's identity, so a schema change starts afresh); then the
 * operation, then the filter, evaluated only when table and operation matched. Immutable
 * subscriptions; one router per set of them, swapped between transactions when they change.
 * Single-threaded (the reader's or delivery's thread).
 */
public final class Router {

    private static final int[] NONE = new int[0];

    private final List<Subscription> subscriptions;
    /* Candidates are indexes into these: the subscription, and its operations as one bit per ordinal
       (an immutable Set's contains() hashes the enum, several times slower than the rest of routing). */
    private final Subscription[] all;
    /** Each subscription as a list of one: what route returns when it is the only match. */
    private final List<Subscription>[] alone;
    private final int[] operationBits;
    private final int[] messageSubscribers;
    private final Map<RelationInfo, int[]> byRelation = new WeakHashMap<>();
    /* The last relation looked up: changes come in runs of one table, and a WeakHashMap lookup is not free. */
    private RelationInfo lastRelation;
    private int[] lastCandidates;

    public Router(List<Subscription> subscriptions) {
        this.subscriptions = List.copyOf(subscriptions);
        this.all = this.subscriptions.toArray(Subscription[]::new);
        @SuppressWarnings("unchecked")
        List<Subscription>[] lists = new List[all.length];
        for (int i = 0; i < all.length; i++) {
            lists[i] = List.of(all[i]);
        }
        this.alone = lists;
        this.operationBits = new int[all.length];
        for (int i = 0; i < all.length; i++) {
            for (Operation op : all[i].operations()) {
                operationBits[i] |= 1 << op.ordinal();
            }
        }
        this.messageSubscribers = indexes(Subscription::wantsMessages);
    }

    public List<Subscription> subscriptions() {
        return subscriptions;
    }

    /**
     * The subscriptions that want this event, in the order they were given; when only one does, the
     * same unmodifiable list every time, so the usual event makes no list. Filters read the rows
     * straight from the event's tuples ({@link CelVariables#of(ChangeEvent)}): call it on the thread
     * that writes events.
     */
    public List<Subscription> route(ChangeEvent event) {
        return route(event, null);
    }

    /**
     * As {@link #route(ChangeEvent)}, filters reading the event's rows back from {@code eventJson}
     * (its JSON without projection) when given: several times slower than from the tuples, for
     * callers that have only the JSON's bytes at hand or another thread's converters.
     */
    public List<Subscription> route(ChangeEvent event, java.util.function.Supplier<byte[]> eventJson) {
        int[] candidates = event.relation() == null ? messageSubscribers : forRelation(event.relation());
        if (candidates.length == 0) {
            return List.of();
        }
        // one match, the usual case, is its subscription's own list: no list made per event
        int first = -1;
        List<Subscription> matched = null;
        CelVariables variables = null;
        int op = 1 << event.op().ordinal();
        for (int candidate : candidates) {
            if ((operationBits[candidate] & op) == 0) {
                continue;
            }
            Subscription subscription = all[candidate];
            if (subscription.filter().isPresent()) {
                if (variables == null) {
                    variables = eventJson == null ? CelVariables.of(event) : CelVariables.of(event, eventJson);
                }
                if (!subscription.filter().get().matches(variables)) {
                    continue;
                }
            }
            if (first < 0) {
                first = candidate;
            } else {
                if (matched == null) {
                    matched = new ArrayList<>(candidates.length);
                    matched.add(all[first]);
                }
                matched.add(subscription);
            }
        }
        return matched != null ? matched : first >= 0 ? alone[first] : List.of();
    }

    private int[] forRelation(RelationInfo relation) {
        if (relation == lastRelation) {
            return lastCandidates;
        }
        int[] cached = byRelation.get(relation);
        if (cached == null) {
            if (!relation.routed()) {
                cached = NONE;
            } else {
                cached = indexes(s -> s.matchesTable(relation.schema(), relation.table()));
            }
            byRelation.put(relation, cached);
        }
        lastRelation = relation;
        lastCandidates = cached;
        return cached;
    }

    private int[] indexes(java.util.function.Predicate<Subscription> wanted) {
        return java.util.stream.IntStream.range(0, all.length).filter(i -> wanted.test(all[i])).toArray();
    }
}
