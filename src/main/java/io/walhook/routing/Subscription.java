package io.walhook.routing;

import java.util.List;
import java.util.Optional;
import java.util.Set;

import io.walhook.change.Operation;

/**
 * Which changes a subscription wants and how they reach it. Env-defined subscriptions are
 * read-only; API-defined ones live in walhook's own tables.
 *
 * @param id what its delivery state (lanes, durable queue, counters) belongs to: the stored
 *     subscription's UUID, or {@code config:<name>} for a configured one; a rename keeps it
 * @param filter the compiled CEL filter, absent when every matching change is wanted
 * @param batchMaxEvents 1 sends one event per request; more sends JSON arrays of up to that many
 * @param retry its own retry settings; what it leaves unset comes from WALHOOK_DELIVERY_*
 * @param limits its own cap on requests under way and on their rate; none by default
 */
public record Subscription(String id, String name, List<TablePattern> tables, Set<Operation> operations,
        Optional<CelFilter> filter, Destination destination, EventFormat format, int batchMaxEvents,
        long batchMaxWaitMs, Projection projection, boolean readOnly, RetryPolicy retry, DeliveryLimits limits) {

    /** The id prefix of configured subscriptions. */
    public static final String CONFIGURED = "config:";
    /** The most events one webhook request may carry ({@code batch.max_events}, {@code _BATCH_MAX_EVENTS}). */
    public static final int MAX_BATCH_EVENTS = 10_000;
    /** The longest a batch may wait to fill, in milliseconds ({@code batch.max_wait_ms}, {@code _BATCH_MAX_WAIT_MS}). */
    public static final long MAX_BATCH_WAIT_MS = 60_000;

    public Subscription {
        tables = List.copyOf(tables);
        operations = Set.copyOf(operations);
        retry = retry == null ? RetryPolicy.DEFAULTS : retry;
        limits = limits == null ? DeliveryLimits.NONE : limits;
        id = id == null ? CONFIGURED + name : id;
    }

    /** A subscription whose id is {@code config:<name>} (configured ones; the store gives stored ones theirs). */
    public Subscription(String name, List<TablePattern> tables, Set<Operation> operations,
            Optional<CelFilter> filter, Destination destination, EventFormat format, int batchMaxEvents,
            long batchMaxWaitMs, Projection projection, boolean readOnly, RetryPolicy retry) {
        this(null, name, tables, operations, filter, destination, format, batchMaxEvents, batchMaxWaitMs, projection,
                readOnly, retry, DeliveryLimits.NONE);
    }

    /** A subscription with the global retry settings. */
    public Subscription(String name, List<TablePattern> tables, Set<Operation> operations,
            Optional<CelFilter> filter, Destination destination, EventFormat format, int batchMaxEvents,
            long batchMaxWaitMs, Projection projection, boolean readOnly) {
        this(null, name, tables, operations, filter, destination, format, batchMaxEvents, batchMaxWaitMs, projection,
                readOnly, RetryPolicy.DEFAULTS, DeliveryLimits.NONE);
    }

    /** The same subscription under this id. */
    public Subscription withId(String newId) {
        return new Subscription(newId, name, tables, operations, filter, destination, format, batchMaxEvents,
                batchMaxWaitMs, projection, readOnly, retry, limits);
    }

    /** The same subscription with these delivery limits. */
    public Subscription withLimits(DeliveryLimits newLimits) {
        return new Subscription(id, name, tables, operations, filter, destination, format, batchMaxEvents,
                batchMaxWaitMs, projection, readOnly, retry, newLimits);
    }

    /** The same subscription matching as {@code matching} says (what it matched before an edit). */
    public Subscription withMatching(SubscriptionJson.Matching matching) {
        return new Subscription(id, name, matching.tables(), matching.operations(), matching.filter(), destination, format,
                batchMaxEvents, batchMaxWaitMs, projection, readOnly, retry, limits);
    }

    /** Table and operation only (the filter comes after): what is cached per relation. */
    public boolean matchesTable(String schema, String table) {
        for (TablePattern pattern : tables) {
            if (pattern.matches(schema, table)) {
                return true;
            }
        }
        return false;
    }

    /** Logical messages have no table: they go to subscriptions of every table that want the message operation. */
    boolean wantsMessages() {
        return operations.contains(Operation.MESSAGE) && tables.contains(TablePattern.ALL);
    }
}
