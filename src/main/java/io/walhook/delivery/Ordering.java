package io.walhook.delivery;

import io.walhook.change.ChangeEvent;

/**
 * What an event must stay in order with, within its subscription: the earlier and later changes of
 * its row ({@link Scope#ROW}: one key, or two for an update that changed the key), of its whole
 * table ({@link Scope#TABLE}: a TRUNCATE; logical messages, among themselves), or of everything
 * ({@link Scope#ALL}: an event parked before walhook recorded orderings). Events that share
 * nothing are delivered independently: a failure holds back only what it must.
 *
 * <p>{@link Scope#REKEYED} is a row change ordered as a TRUNCATE is: the first change of its table
 * routed to the subscription after the table's key shape changed ({@code ALTER TABLE ... REPLICA
 * IDENTITY}, another primary key). Its row's earlier changes were keyed another way, so it waits
 * for every earlier change of the table, and every later one waits for it. Only its request
 * differs from a TRUNCATE's: it carries one row.
 *
 * <p>A row key is its table's oid in the upper 32 bits and the hash of its replica-identity values
 * in the lower ones: rows of different tables never collide, rows of one table rarely, and a
 * collision only orders two rows that need not be. A row change also keeps its table's key shape
 * ({@link io.walhook.change.RelationInfo#keyShape}), so that a durable queue read after a restart
 * finds where its table's key changed between its rows ({@link #NO_SHAPE} where unknown: a
 * truncate, a logical message, a row queued by an earlier version).
 */
record Ordering(Scope scope, long table, long key, long otherKey, long shape) {

    enum Scope {
        ROW, TABLE, ALL, REKEYED;

        /** Ordered against every earlier and later event of its table. */
        boolean tableWide() {
            return this == TABLE || this == REKEYED;
        }
    }

    /** Logical messages have no table: they keep their order among themselves under this one. */
    static final long MESSAGES = -1;
    static final Ordering EVERYTHING = new Ordering(Scope.ALL, 0, 0, 0);
    /** The key shape of a table-wide ordering, or of a row queued before shapes were kept. */
    static final long NO_SHAPE = Long.MIN_VALUE;

    Ordering(Scope scope, long table, long key, long otherKey) {
        this(scope, table, key, otherKey, NO_SHAPE);
    }

    static Ordering of(ChangeEvent event) {
        return of(event, false);
    }

    /** {@code rekeyed}: the event's table changed its key shape since the subscription's last change of it. */
    static Ordering of(ChangeEvent event, boolean rekeyed) {
        return switch (event.op()) {
            case MESSAGE -> new Ordering(Scope.TABLE, MESSAGES, 0, 0);
            case TRUNCATE -> new Ordering(Scope.TABLE, event.relation().oid(), 0, 0);
            case INSERT, UPDATE, DELETE, READ -> {
                int key = event.rowKeyHash();
                yield row(rekeyed || event.rowUnnamed() ? Scope.REKEYED : Scope.ROW, event.relation().oid(), key,
                        event.mayChangeKey() ? event.newRowKeyHash() : key, event.relation().keyShape());
            }
        };
    }

    static Ordering row(long table, int keyHash, int newKeyHash) {
        return row(Scope.ROW, table, keyHash, newKeyHash, NO_SHAPE);
    }

    /** One object per event and subscription: this runs on the per-event path. */
    private static Ordering row(Scope scope, long table, int keyHash, int newKeyHash, long shape) {
        long key = table << 32 | keyHash & 0xFFFF_FFFFL;
        long other = table << 32 | newKeyHash & 0xFFFF_FFFFL;
        return new Ordering(scope, table, key, other, shape);
    }

    /** Whether a job of this ordering must wait for an earlier unfinished job of {@code earlier}. */
    boolean follows(Ordering earlier) {
        if (scope == Scope.ALL || earlier.scope == Scope.ALL) {
            return true;
        }
        if (table != earlier.table) {
            return false;
        }
        if (scope.tableWide() || earlier.scope.tableWide()) {
            return true;
        }
        return key == earlier.key || key == earlier.otherKey || otherKey == earlier.key || otherKey == earlier.otherKey;
    }

    /** The same ordered against its whole table, as the first change after its table's key changed. */
    Ordering rekeyed() {
        return scope == Scope.ROW ? new Ordering(Scope.REKEYED, table, key, otherKey, shape) : this;
    }

    /** As the durable table keeps it: {@code [scope, table, key, otherKey]}, and the key shape where known. */
    long[] encode() {
        return shape == NO_SHAPE ? new long[] {scope.ordinal(), table, key, otherKey}
                : new long[] {scope.ordinal(), table, key, otherKey, shape};
    }

    /**
     * The stored form back; null or malformed (a row parked before orderings were kept) orders
     * against everything. Four values are a row queued before key shapes were kept.
     */
    static Ordering decode(long[] stored) {
        if (stored == null || stored.length < 4 || stored.length > 5 || stored[0] < 0 || stored[0] >= Scope.values().length) {
            return EVERYTHING;
        }
        long shape = stored.length == 5 ? stored[4] : NO_SHAPE;
        return new Ordering(Scope.values()[(int) stored[0]], stored[1], stored[2], stored[3], shape);
    }
}
