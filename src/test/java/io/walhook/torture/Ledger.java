package io.walhook.torture;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * What the workload wrote, as the database decided it: every transaction with its changes, its
 * outcome (committed, rolled back, or not known until the database is asked), its place in commit
 * order and a WAL position at or past its commit record.
 *
 * <p>A change is known by a token the receivers can read back from its event: {@code w<n>} for an
 * insert or update (the row's {@code w} column, written once in the whole run), {@code D:<table>:<id>:<xid>}
 * for a delete, {@code T:<table>:<xid>} for a truncate, the content of a logical message.
 */
final class Ledger {

    enum Outcome { OPEN, COMMITTED, ABORTED, UNKNOWN }

    /**
     * One change: its token, table (null for a message), the row's key ({@code table:id}; null for
     * a truncate or message), its position in the transaction, its operation, and for a TOASTed
     * value the text expected ({@link #UNCHANGED}: not sent, listed as unchanged).
     */
    record Change(String token, String table, String key, int index, String op, String big) {
    }

    /** The {@code big} of an update that left the TOASTed value as it was. */
    static final String UNCHANGED = "\u0000unchanged";

    static final class Tx {
        final long xid;
        final String gid;
        final boolean transactional;
        final List<Change> changes = new ArrayList<>();
        /** Changes a rolled-back savepoint undid: never to be delivered. */
        final List<Change> undone = new ArrayList<>();
        Outcome outcome = Outcome.OPEN;
        long ordinal = -1;
        /** {@code pg_current_wal_insert_lsn()} read after the commit: at or past its commit record. */
        long lsnAfter = -1;

        Tx(long xid, String gid, boolean transactional) {
            this.xid = xid;
            this.gid = gid;
            this.transactional = transactional;
        }
    }

    private final List<Tx> transactions = new ArrayList<>();
    private final Map<String, Change> changes = new LinkedHashMap<>();
    private final Map<String, Tx> txOf = new LinkedHashMap<>();
    private long ordinals;

    synchronized Tx begin(long xid, String gid, boolean transactional) {
        Tx tx = new Tx(xid, gid, transactional);
        transactions.add(tx);
        return tx;
    }

    synchronized void add(Tx tx, Change change, boolean undone) {
        (undone ? tx.undone : tx.changes).add(change);
        changes.put(change.token(), change);
        txOf.put(change.token(), tx);
    }

    /**
     * A commit is about to be attempted: its place in commit order is now, whatever the answer
     * (one writer: a commit whose answer is lost still committed, if it did, before the next one).
     */
    synchronized void committing(Tx tx) {
        tx.ordinal = ++ordinals;
    }

    synchronized void committed(Tx tx, long lsnAfter) {
        if (tx.ordinal < 0) {
            tx.ordinal = ++ordinals;
        }
        tx.outcome = Outcome.COMMITTED;
        tx.lsnAfter = lsnAfter;
    }

    synchronized void lsnAfter(Tx tx, long lsnAfter) {
        tx.lsnAfter = lsnAfter;
    }

    synchronized void aborted(Tx tx) {
        tx.outcome = Outcome.ABORTED;
    }

    synchronized void unknown(Tx tx) {
        tx.outcome = Outcome.UNKNOWN;
    }

    /** A transaction whose outcome was not known, once the database said; committed ones take their place in commit order now. */
    synchronized void resolved(Tx tx, boolean committed, long lsnAfter) {
        if (committed) {
            committed(tx, lsnAfter);
        } else {
            aborted(tx);
        }
    }

    /** Commit attempts so far: a transaction whose ordinal is at most this committed (if it did) before now. */
    synchronized long ordinals() {
        return ordinals;
    }

    synchronized List<Tx> transactions() {
        return List.copyOf(transactions);
    }

    synchronized Change change(String token) {
        return changes.get(token);
    }

    synchronized Tx txOf(String token) {
        return txOf.get(token);
    }

    /** Whether this token's change was undone by a rolled-back savepoint. */
    synchronized boolean undone(String token) {
        Tx tx = txOf.get(token);
        return tx != null && tx.undone.stream().anyMatch(c -> c.token().equals(token));
    }
}
