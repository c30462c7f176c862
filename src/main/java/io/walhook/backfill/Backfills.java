package io.walhook.backfill;

import java.sql.Connection;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.atomic.AtomicReference;

import javax.sql.DataSource;

import org.jboss.logging.Logger;

import io.walhook.routing.CelFilter;
import io.walhook.routing.CelFilterException;
import io.walhook.routing.Subscription;

/**
 * Starting and controlling backfills, as the API and configured subscriptions ask: every request is
 * checked here (tables, filter, sizes, a table already being backfilled) and refused with what is
 * wrong; the active instance's {@link BackfillRunner} runs what is stored.
 */
public final class Backfills {

    private static final Logger LOG = Logger.getLogger(Backfills.class);

    /** A request refused: {@code status} 400, 404 or 409, {@code field} a JSON pointer into the request (or null). */
    public static final class Refused extends RuntimeException {
        private final int status;
        private final String field;

        Refused(int status, String field, String message) {
            super(message);
            this.status = status;
            this.field = field;
        }

        public int status() {
            return status;
        }

        public String field() {
            return field;
        }
    }

    /** What a backfill request asks; null fields take their defaults. */
    public record Request(List<String> tables, String filter, Integer chunkSize, Integer maxRowsPerSecond) {
    }

    public static final int MAX_ROWS_PER_SECOND = 10_000_000;

    private final DataSource dataSource;
    private final BackfillStore store;
    private final String stateSchema;
    private final String publication;
    /** Told of every change this instance stores (the runner, when it runs here): it need not wait for its poll. */
    private final AtomicReference<Runnable> changed;

    public Backfills(DataSource dataSource, String stateSchema, String publication) {
        this(dataSource, stateSchema, publication, new AtomicReference<>(() -> { }));
    }

    private Backfills(DataSource dataSource, String stateSchema, String publication, AtomicReference<Runnable> changed) {
        this.dataSource = dataSource;
        this.store = new BackfillStore(dataSource, stateSchema);
        this.stateSchema = stateSchema;
        this.publication = publication;
        this.changed = changed;
    }

    /**
     * The same backfills, read and written through another pool (the management API's own): a request
     * stuck in the database then holds none of the connections delivery and checkpoints need. Changes
     * made through it still wake this instance's runner.
     */
    public Backfills through(DataSource other) {
        return new Backfills(other, stateSchema, publication, changed);
    }

    public BackfillStore store() {
        return store;
    }

    /** Calls {@code listener} after each backfill this instance starts, pauses, resumes or cancels. */
    public void onChange(Runnable listener) {
        changed.set(listener);
    }

    /** A number as the refusal shows it: one past an int's range was read as its bound. */
    private static String outOfRange(int value) {
        return value == Integer.MAX_VALUE ? "above " + (Integer.MAX_VALUE - 1)
                : value == Integer.MIN_VALUE ? "below " + (Integer.MIN_VALUE + 1) : Integer.toString(value);
    }

    /** Checks the request against the subscription and the database, and stores it running. */
    public Backfill start(Subscription subscription, Request request) throws SQLException {
        int chunkSize = request.chunkSize() == null ? Backfill.DEFAULT_CHUNK_SIZE : request.chunkSize();
        if (chunkSize < 1 || chunkSize > Backfill.MAX_CHUNK_SIZE) {
            throw new Refused(400, "/chunk_size", "chunk_size is " + outOfRange(chunkSize) + "; use 1 to " + Backfill.MAX_CHUNK_SIZE
                    + " rows (default " + Backfill.DEFAULT_CHUNK_SIZE + ")");
        }
        Integer rate = request.maxRowsPerSecond();
        if (rate != null && (rate < 1 || rate > MAX_ROWS_PER_SECOND)) {
            throw new Refused(400, "/max_rows_per_second", "max_rows_per_second is " + outOfRange(rate) + "; use 1 to "
                    + MAX_ROWS_PER_SECOND + ", or leave it out for no limit");
        }
        if (request.filter() != null && request.filter().isBlank()) {
            // it meant every row: the opposite of a filter
            throw new Refused(400, "/filter", "/filter is empty; leave it out for every row, or give a CEL expression");
        }
        String filter = request.filter() == null ? null : request.filter().strip();
        if (filter != null) {
            try {
                CelFilter.compile(filter);
            } catch (CelFilterException e) {
                throw new Refused(400, "/filter", e.getMessage());
            }
        }
        List<String> tables;
        try (Connection c = dataSource.getConnection()) {
            tables = request.tables() == null ? subscribed(c, subscription) : asked(subscription, request.tables());
            for (int i = 0; i < tables.size(); i++) {
                try {
                    SnapshotTable.describe(c, tables.get(i), publication, stateSchema);
                } catch (SnapshotTable.Refused e) {
                    throw new Refused(400, request.tables() == null ? "/tables" : "/tables/" + given(request, tables.get(i)),
                            e.getMessage());
                }
            }
        }
        BackfillStore.Inserted inserted = store.insertUnlessBusy(subscription.id(), Backfill.API, tables, filter,
                chunkSize, rate);
        if (inserted.backfill() == null) {
            Backfill holder = inserted.holder();
            throw new Refused(409, "/tables", "table " + inserted.heldTable() + " is being backfilled already (backfill "
                    + holder.id() + ", " + holder.state().wireName() + "); cancel it or wait for it to end");
        }
        changed.get().run();
        store.announce();
        return inserted.backfill();
    }

    /** The index in the request of the table it names (as given, white space around it allowed). */
    private static int given(Request request, String table) {
        for (int i = 0; i < request.tables().size(); i++) {
            String t = request.tables().get(i);
            if (t != null && t.strip().equals(table)) {
                return i;
            }
        }
        return 0;
    }

    private List<String> subscribed(Connection c, Subscription subscription) throws SQLException {
        List<String> tables = tablesOf(c, subscription);
        if (tables.isEmpty()) {
            throw new Refused(400, "/tables", "subscription " + subscription.name() + "'s tables match no table of"
                    + " publication " + publication);
        }
        return tables;
    }

    private List<String> tablesOf(Connection c, Subscription subscription) throws SQLException {
        List<String> tables = new ArrayList<>();
        for (String table : SnapshotTable.published(c, publication, stateSchema)) {
            int dot = table.indexOf('.');
            if (subscription.matchesTable(table.substring(0, dot), table.substring(dot + 1))) {
                tables.add(table);
            }
        }
        return tables;
    }

    private static List<String> asked(Subscription subscription, List<String> given) {
        if (given.isEmpty()) {
            throw new Refused(400, "/tables", "tables is empty; list schema.table names, or leave it out for every"
                    + " table of the subscription");
        }
        Set<String> tables = new LinkedHashSet<>();
        for (int i = 0; i < given.size(); i++) {
            String table = given.get(i) == null ? "" : given.get(i).strip();
            int dot = table.indexOf('.');
            if (table.chars().anyMatch(Character::isISOControl)) {
                throw new Refused(400, "/tables/" + i, "/tables/" + i + " holds a control character; name each table, like"
                        + " public.orders");
            }
            if (dot <= 0 || dot == table.length() - 1 || table.indexOf('.', dot + 1) >= 0 || table.contains("*")) {
                throw new Refused(400, "/tables/" + i, "'" + table + "' is not a schema.table name (no patterns: name"
                        + " each table, like public.orders)");
            }
            if (!subscription.matchesTable(table.substring(0, dot), table.substring(dot + 1))) {
                throw new Refused(400, "/tables/" + i, "table " + table + " is outside subscription "
                        + subscription.name() + "'s tables " + subscription.tables());
            }
            tables.add(table);
        }
        return List.copyOf(tables);
    }

    /**
     * Stores, once ever per subscription, the backfill of each configured subscription that asks for
     * one at its first start ({@code BACKFILL=initial}): a restart finds it stored and starts none.
     */
    public void startInitial(List<Subscription> configured, List<String> ids) throws SQLException {
        try (Connection c = dataSource.getConnection()) {
            for (Subscription subscription : configured) {
                if (ids.contains(subscription.id()) && !store.hasInitial(subscription.id())) {
                    store.insertInitial(subscription.id(), readable(c, subscription));
                }
            }
        }
    }

    /**
     * The subscription's tables an initial backfill can read; each it cannot (no key to read it in
     * chunks by, say) is left out and named in the log, to be backfilled through the API once it can.
     */
    private List<String> readable(Connection c, Subscription subscription) throws SQLException {
        List<String> tables = new ArrayList<>();
        for (String table : tablesOf(c, subscription)) {
            try {
                SnapshotTable.describe(c, table, publication, stateSchema);
                tables.add(table);
            } catch (SnapshotTable.Refused e) {
                LOG.errorf("the initial backfill of subscription %s leaves a table out: %s", subscription.name(), e.getMessage());
            }
        }
        return tables;
    }

    /** Pauses, resumes or cancels; 409 when the backfill is not in a state that allows it. */
    public Backfill control(Subscription subscription, UUID id, String action) throws SQLException {
        Backfill backfill = find(subscription, id);
        List<Backfill.State> from;
        Backfill.State to;
        switch (action) {
            case "pause" -> {
                from = List.of(Backfill.State.RUNNING, Backfill.State.PAUSED);
                to = Backfill.State.PAUSED;
            }
            case "resume" -> {
                from = List.of(Backfill.State.PAUSED, Backfill.State.RUNNING);
                to = Backfill.State.RUNNING;
            }
            case "cancel" -> {
                from = List.of(Backfill.State.RUNNING, Backfill.State.PAUSED);
                to = Backfill.State.CANCELLED;
            }
            default -> throw new IllegalArgumentException(action);
        }
        if (!store.transition(id, from, to, null)) {
            Backfill now = find(subscription, id);
            throw new Refused(409, null, "backfill " + id + " is " + now.state().wireName() + ": only a running or"
                    + " paused backfill can be " + past(action));
        }
        changed.get().run();
        store.announce();
        return find(subscription, id);
    }

    private static String past(String action) {
        return switch (action) {
            case "pause" -> "paused";
            case "resume" -> "resumed";
            default -> "cancelled";
        };
    }

    /** The subscription's backfill with this id; 404 when it has none such. */
    public Backfill find(Subscription subscription, UUID id) throws SQLException {
        return store.find(id).filter(b -> b.subscriptionId().equals(subscription.id()))
                .orElseThrow(() -> new Refused(404, null, "subscription " + subscription.name() + " has no backfill " + id));
    }
}
