package io.walhook.routing;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.WeakHashMap;

import io.walhook.change.ChangeEvent;
import io.walhook.change.Operation;
import io.walhook.change.RelationInfo;

/**
 * Decides which subscriptions get each event. Table patterns are resolved once per relation (the
 * cache is keyed by the Relation message's identity, so a schema change starts afresh); then the
 * operation, then the filter. What filters say about operations, tables and column values in
 * their top-level conjuncts ({@link FilterTerms}) is indexed: per relation, the subscriptions
 * whose filter requires {@code new.tenant_id == 42} are found by one hash lookup of the event's
 * {@code tenant_id}, so an event evaluates only the filters that can match it, and none when the
 * terms are the whole filter. Immutable subscriptions; one router per set of them, swapped between
 * transactions when they change. Single-threaded (the routing thread).
 */
public final class Router {

    private static final org.jboss.logging.Logger LOG = org.jboss.logging.Logger.getLogger(Router.class);

    private final List<Subscription> subscriptions;
    /* Candidates are indexes into these: the subscription, and its operations as one bit per ordinal
       (an immutable Set's contains() hashes the enum, several times slower than the rest of routing). */
    private final Subscription[] all;
    /** Each subscription as a list of one: what route returns when it is the only match. */
    private final List<Subscription>[] alone;
    /** The operations it wants that its filter allows. */
    private final int[] operationBits;
    /** What its filter requires, {@link FilterTerms#NONE} without one. */
    private final FilterTerms[] terms;
    /** It matches once operation, table and its column term hold: no filter, or one made only of terms. */
    private final boolean[] sure;
    private final Candidates messageSubscribers;
    private final Map<RelationInfo, Candidates> byRelation = new WeakHashMap<>();
    /* The last relation looked up: changes come in runs of one table, and a WeakHashMap lookup is not free. */
    private RelationInfo lastRelation;
    private Candidates lastCandidates;
    /** The candidates of the event being routed, when lookups found some. */
    private int[] found = new int[16];
    /** The event being routed has a row that cannot be read: no candidate is sure, each filter fails on its own. */
    private boolean unreadable;

    public Router(List<Subscription> subscriptions) {
        this.subscriptions = List.copyOf(subscriptions);
        this.all = this.subscriptions.toArray(Subscription[]::new);
        @SuppressWarnings("unchecked")
        List<Subscription>[] lists = new List[all.length];
        this.alone = lists;
        this.operationBits = new int[all.length];
        this.terms = new FilterTerms[all.length];
        this.sure = new boolean[all.length];
        for (int i = 0; i < all.length; i++) {
            lists[i] = List.of(all[i]);
            terms[i] = all[i].filter().map(CelFilter::terms).orElse(FilterTerms.NONE);
            sure[i] = all[i].filter().isEmpty() || terms[i].complete();
            for (Operation op : all[i].operations()) {
                if (terms[i].operations() == null || terms[i].operations().contains(op.wireName())) {
                    operationBits[i] |= 1 << op.ordinal();
                }
            }
        }
        int[] messages = java.util.stream.IntStream.range(0, all.length).filter(i -> all[i].wantsMessages()).toArray();
        this.messageSubscribers = new Candidates(messages, new ColumnIndex[0], 0);
    }

    public List<Subscription> subscriptions() {
        return subscriptions;
    }

    /**
     * A filter that failed on an event does not match it: the event is not sent to the subscription.
     * Said in the log (the first failure, then one a minute) and in /status ({@code filter_errors}),
     * or an expression failing on every event (a column the old row does not carry) lost them all
     * without a word.
     */
    private static void failed(Subscription subscription) {
        CelFilter filter = subscription.filter().get();
        if (filter.reportNow()) {
            // not CEL's words, which can quote the row's values: /status (filter_last_error) has them
            LOG.warnf("subscription %s: its filter failed on an event, which is not sent to it (%d failures so far);"
                    + " /status shows why (filter_last_error)", subscription.name(), filter.errorCount());
        }
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
        boolean message = event.relation() == null;
        Candidates candidates = message ? messageSubscribers : forRelation(event.relation());
        if (candidates.isEmpty()) {
            return List.of();
        }
        int op = 1 << event.op().ordinal();
        CelVariables variables = null;
        int[] order = candidates.unindexed;
        int count = order.length;
        unreadable = false;
        if ((candidates.indexedOperations & op) != 0) {
            variables = variables(event, eventJson);
            count = lookUp(candidates, variables, op);
            order = found;
        }
        // one match, the usual case, is its subscription's own list: no list made per event
        int first = -1;
        List<Subscription> matched = null;
        for (int i = 0; i < count; i++) {
            int candidate = order[i];
            if ((operationBits[candidate] & op) == 0) {
                continue;
            }
            Subscription subscription = all[candidate];
            // no filter: nothing to evaluate; a sure one is not evaluated unless its row could not be read
            if (subscription.filter().isPresent() && (!sure[candidate] || unreadable || message)) {
                if (variables == null) {
                    variables = variables(event, eventJson);
                }
                CelFilter.Outcome outcome = subscription.filter().get().evaluate(variables);
                if (outcome != CelFilter.Outcome.MATCH) {
                    if (outcome == CelFilter.Outcome.ERROR) {
                        failed(subscription);
                    }
                    continue;
                }
            }
            if (first < 0) {
                first = candidate;
            } else {
                if (matched == null) {
                    matched = new ArrayList<>();
                    matched.add(all[first]);
                }
                matched.add(subscription);
            }
        }
        return matched != null ? matched : first >= 0 ? alone[first] : List.of();
    }

    private static CelVariables variables(ChangeEvent event, java.util.function.Supplier<byte[]> eventJson) {
        return eventJson == null ? CelVariables.of(event) : CelVariables.of(event, eventJson);
    }

    /**
     * Fills {@link #found} with the unindexed candidates and those the event's column values find,
     * in subscription order; returns how many. A row that cannot be read (a jsonb value beyond what
     * the filter's JSON reader takes) finds every subscription indexed on it and makes none sure:
     * their filters are evaluated, and fail, as they would unindexed.
     */
    private int lookUp(Candidates candidates, CelVariables variables, int op) {
        int count = 0;
        for (int candidate : candidates.unindexed) {
            count = add(count, candidate, op);
        }
        boolean sorted = true;
        for (ColumnIndex index : candidates.columns) {
            int[] hits;
            try {
                Object row = variables.find(index.row);
                Object value = row instanceof Map<?, ?> m ? m.get(index.column) : null;
                Object key = FilterTerms.key(value);
                hits = key == null ? null : index.byValue.get(key);
            } catch (RuntimeException e) {
                hits = index.every;
                unreadable = true;
            }
            if (hits == null) {
                continue;
            }
            sorted &= count == 0;
            for (int candidate : hits) {
                count = add(count, candidate, op);
            }
        }
        if (!sorted) {
            Arrays.sort(found, 0, count);
        }
        return count;
    }

    private int add(int count, int candidate, int op) {
        if ((operationBits[candidate] & op) == 0) {
            return count;
        }
        if (count == found.length) {
            found = Arrays.copyOf(found, count * 2);
        }
        found[count] = candidate;
        return count + 1;
    }

    private Candidates forRelation(RelationInfo relation) {
        if (relation == lastRelation) {
            return lastCandidates;
        }
        Candidates cached = byRelation.get(relation);
        if (cached == null) {
            cached = relation.routed() ? candidates(relation) : Candidates.NONE;
            byRelation.put(relation, cached);
        }
        lastRelation = relation;
        lastCandidates = cached;
        return cached;
    }

    /** The subscriptions of a relation's table, those with a column term indexed by it. */
    private Candidates candidates(RelationInfo relation) {
        List<Integer> unindexed = new ArrayList<>();
        Map<List<String>, Map<Object, List<Integer>>> columns = new LinkedHashMap<>();
        for (int i = 0; i < all.length; i++) {
            FilterTerms t = terms[i];
            if (!all[i].matchesTable(relation.schema(), relation.table())
                    || t.schemas() != null && !t.schemas().contains(relation.schema())
                    || t.tables() != null && !t.tables().contains(relation.table())) {
                continue;
            }
            if (t.columns().isEmpty()) {
                unindexed.add(i);
                continue;
            }
            FilterTerms.ColumnTerm term = t.columns().get(0);
            Map<Object, List<Integer>> byValue = columns.computeIfAbsent(List.of(term.row(), term.column()),
                    k -> new HashMap<>());
            for (Object value : term.values()) {
                byValue.computeIfAbsent(value, v -> new ArrayList<>()).add(i);
            }
        }
        ColumnIndex[] indexes = columns.entrySet().stream()
                .map(e -> new ColumnIndex(e.getKey().get(0), e.getKey().get(1), e.getValue()))
                .toArray(ColumnIndex[]::new);
        int indexedOperations = 0;
        for (ColumnIndex index : indexes) {
            for (int candidate : index.every) {
                indexedOperations |= operationBits[candidate];
            }
        }
        return new Candidates(ints(unindexed), indexes, indexedOperations);
    }

    private static int[] ints(Collection<Integer> list) {
        return list.stream().mapToInt(Integer::intValue).toArray();
    }

    /**
     * Who can want one relation's events: those to check one by one, and those found by their
     * column's value, which want the operations of {@code indexedOperations} (an event of another
     * operation builds no row to look up).
     */
    private record Candidates(int[] unindexed, ColumnIndex[] columns, int indexedOperations) {
        static final Candidates NONE = new Candidates(new int[0], new ColumnIndex[0], 0);

        boolean isEmpty() {
            return unindexed.length == 0 && columns.length == 0;
        }
    }

    /** The subscriptions whose filter requires one row's column to have a value, by that value's key. */
    private static final class ColumnIndex {
        final String row;
        final String column;
        final Map<Object, int[]> byValue = new HashMap<>();
        /** Every subscription of this index, in order. */
        final int[] every;

        ColumnIndex(String row, String column, Map<Object, List<Integer>> byValue) {
            this.row = row;
            this.column = column;
            byValue.forEach((value, subscribers) -> this.byValue.put(value, ints(subscribers)));
            this.every = byValue.values().stream().flatMap(List::stream).distinct().sorted()
                    .mapToInt(Integer::intValue).toArray();
        }
    }
}
