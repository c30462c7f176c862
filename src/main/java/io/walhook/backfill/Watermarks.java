package io.walhook.backfill;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;

import io.walhook.change.ChangeEvent;
import io.walhook.change.Operation;
import io.walhook.change.RelationInfo;
import io.walhook.change.ValueConverters;
import io.walhook.delivery.RoutingLoop;
import io.walhook.pgoutput.PgOutputMessage;
import io.walhook.pgoutput.TupleData;
import io.walhook.routing.Subscription;

/**
 * The stream's side of backfills (DBLog's watermarks): sees every event in commit order on the
 * routing thread. A low watermark opens its chunk's window; changes to the chunk's table inside it
 * take their rows out of the chunk; the high watermark sends what is left as {@code read} events
 * through the rows' lanes, right there in the stream's order. Watermarks are walhook's own logical
 * messages ({@value #PREFIX}) and are never routed, whoever wrote them.
 */
public final class Watermarks implements RoutingLoop.Snapshots {

    /** The prefix of walhook's watermark messages. */
    public static final String PREFIX = "walhook.backfill";
    static final String LOW = "low:";
    static final String HIGH = "high:";

    /** Chunks the runner is reading, by token: written by the runner, taken by the routing thread. */
    private final Map<String, Chunk> pending = new ConcurrentHashMap<>();
    // the routing thread's
    private final Map<String, Chunk> open = new HashMap<>();
    private final ValueConverters converters = new ValueConverters();
    /** By the table's description and, under REPLICA IDENTITY FULL, its primary key (every column is "key" there). */
    private final Map<java.util.List<Object>, RelationInfo> described = new HashMap<>();
    /*
     * The xids of the latest transactions the stream delivered, oldest overwritten: a transaction
     * whose commit the stream has already delivered can still be in progress for a snapshot taken
     * just after (PostgreSQL writes the commit record before the transaction leaves the proc array,
     * and waits for synchronous standbys in between). A chunk whose snapshot did not see such a
     * transaction, delivered before its low watermark, holds older values than the stream: it is
     * read again. Kept as (xid, table) pairs, so only a transaction that changed the chunk's own
     * table makes it read again; a copy is taken at each low watermark. Each pair once: one
     * transaction going back and forth between two tables (orders and their lines) took a slot at
     * every switch, and pushed the others out.
     */
    static final int RECENT = 4096;
    private final long[] recentXids = new long[RECENT];
    private final long[] recentOids = new long[RECENT];
    private long recorded;
    private long lastXid = -1;
    private long lastOid = -1;
    /** The tables of {@link #lastXid} recorded so far: {@link #xidTableCount} of them, then in {@link #manyXidTables}. */
    private final long[] xidTables = new long[16];
    private int xidTableCount;
    private java.util.Set<Long> manyXidTables;

    /**
     * The tables backfills have begun and not read to their end, by table oid and backfill, for
     * {@link #moved}: written by the runner, read by the routing thread.
     */
    private final Map<Long, Map<java.util.UUID, Watch>> watches = new ConcurrentHashMap<>();
    private volatile java.util.function.BiConsumer<Moved, Runnable> moved = (m, saved) -> saved.run();

    /** A table a backfill is reading: its oid, its name and its chunk key's columns. */
    record Watch(long oid, String table, List<String> keyNames) {
    }

    /**
     * An update that moved a row of a table being read to another key, leaving a TOASTed value out
     * of the stream: its row is to be read again, at its new key ({@code key}, its chunk key's
     * values as text), for the backfill {@code backfillId}. {@code lsn} is the update's.
     */
    record Moved(java.util.UUID backfillId, String table, List<String> key, io.walhook.pgoutput.Lsn lsn) {
    }

    /**
     * Who is told of {@link Moved} rows (the runner), each with the hold on its update's
     * acknowledgement, to run once the row is saved ({@link RoutingLoop.Reads#hold}).
     */
    void onMoved(java.util.function.BiConsumer<Moved, Runnable> moved) {
        this.moved = moved;
    }

    /**
     * The backfill {@code backfill} reads {@code watch}'s table: watched until it has read the table
     * to its end (the last chunk's rows sent: {@link #unwatch(java.util.UUID, long)}) or ends; not
     * only while it reads it (a row moved into the part read already, while the next table's chunks
     * were read and this one's last was still on its way, was missed).
     */
    void watch(java.util.UUID backfill, Watch watch) {
        watches.computeIfAbsent(watch.oid(), oid -> new ConcurrentHashMap<>()).put(backfill, watch);
    }

    /** Stops watching the table {@code oid} for the backfill {@code backfill} (it read the table to its end). */
    void unwatch(java.util.UUID backfill, long oid) {
        Map<java.util.UUID, Watch> ofTable = watches.get(oid);
        if (ofTable != null) {
            ofTable.remove(backfill);
            watches.remove(oid, Map.of());
        }
    }

    /** Stops watching for the backfills {@code gone} says so of. */
    void unwatch(java.util.function.Predicate<java.util.UUID> gone) {
        watches.values().forEach(table -> table.keySet().removeIf(gone));
        watches.values().removeIf(Map::isEmpty);
    }

    void expect(Chunk chunk) {
        pending.put(chunk.token, chunk);
    }

    /**
     * The runner gives up on the chunk (its high watermark did not commit, or may have been lost): it
     * is to be read again, and a late watermark of it is ignored. Unless the stream already met its
     * high watermark: then its rows are on their way and it ends as sent. True when given up.
     */
    boolean abandon(Chunk chunk) {
        return abandon(chunk, "it was given up on before the stream met its high watermark");
    }

    /** {@link #abandon(Chunk)}, {@code why} saying why for the log of a range read again and again. */
    boolean abandon(Chunk chunk, String why) {
        if (pending.remove(chunk.token) == null) {
            return false; // taken by the routing thread at its high watermark (or given up already)
        }
        chunk.abandoned = true;
        chunk.outcome.complete(Chunk.Outcome.again(why));
        return true;
    }

    /** Whether the stream has yet to meet the chunk's high watermark (and the chunk was not given up). */
    boolean awaiting(Chunk chunk) {
        return pending.containsKey(chunk.token);
    }

    @Override
    public boolean observe(ChangeEvent event, RoutingLoop.Reads reads) throws InterruptedException {
        long xid = event.tx().xid();
        long oid = event.relation() == null ? 0 : event.relation().oid();
        if (xid != lastXid) {
            lastXid = xid;
            xidTableCount = 0;
            manyXidTables = null;
            record(xid, oid);
        } else if (oid != lastOid && !recordedForXid(oid)) {
            record(xid, oid);
        }
        lastOid = oid;
        if (event.op() == Operation.MESSAGE) {
            if (!PREFIX.equals(event.messagePrefix())) {
                return false;
            }
            watermark(new String(event.messageContent(), StandardCharsets.UTF_8), event, reads);
            return true;
        }
        if (event.op() == Operation.UPDATE && !watches.isEmpty() && event.relation() != null) {
            movedLeavingToastOut(event, reads);
        }
        if (open.isEmpty() || event.relation() == null) {
            return false;
        }
        for (java.util.Iterator<Chunk> chunks = open.values().iterator(); chunks.hasNext();) {
            Chunk chunk = chunks.next();
            if (chunk.abandoned) {
                // given up (its backfill may have failed, and no watermark may come to close it): it would
                // collect every later change to its table, without bound
                chunks.remove();
            } else if (chunk.table.oid() == event.relation().oid()) {
                chunk.touched(event);
            }
        }
        return false;
    }

    /**
     * An update that moves a row to another key without resending a TOASTed value (one its old image
     * cannot fill either) leaves the consumer without that value when the row was not read yet and
     * its new key was: a row moved from the part of the table the backfill has yet to read into the
     * part it has read gets no read, and its consumer only the update. The runner reads such a row
     * again, at its new key. Any row moved so is, wherever it moved from and to: a read more than
     * needed costs one event.
     */
    private void movedLeavingToastOut(ChangeEvent event, RoutingLoop.Reads reads) {
        Map<java.util.UUID, Watch> ofTable = watches.get(event.relation().oid());
        TupleData row = event.newRow();
        TupleData before = event.keyTuple() != null ? event.keyTuple() : event.oldRow();
        if (ofTable == null || row == null || before == null || !leavesToastOut(row, event.newRowFill())) {
            return; // a table no backfill reads; an update without an old image kept its key
        }
        for (Map.Entry<java.util.UUID, Watch> watched : ofTable.entrySet()) {
            Watch watch = watched.getValue();
            List<String> to = keyOf(event.relation(), row, before, watch.keyNames());
            if (to != null && !to.equals(keyOf(event.relation(), before, null, watch.keyNames()))) {
                moved.accept(new Moved(watched.getKey(), watch.table(), to, event.lsn()), reads.hold());
            }
        }
    }

    /** Whether a column of {@code row} is an unchanged TOASTed value that {@code fill} (the old image) does not hold. */
    private static boolean leavesToastOut(TupleData row, TupleData fill) {
        for (int i = 0; i < row.size(); i++) {
            if (row.isUnchangedToast(i) && (fill == null || i >= fill.size() || !fill.hasValue(i))) {
                return true;
            }
        }
        return false;
    }

    /**
     * {@code names}' values in {@code tuple} as text, an unchanged TOASTed one taken from {@code fill};
     * null when one is not there as text.
     */
    private static List<String> keyOf(RelationInfo relation, TupleData tuple, TupleData fill, List<String> names) {
        List<String> key = new ArrayList<>(names.size());
        for (String name : names) {
            int at = -1;
            for (int i = 0; i < relation.columnCount() && at < 0; i++) {
                if (relation.columnName(i).equals(name)) {
                    at = i;
                }
            }
            TupleData from = at >= 0 && at < tuple.size() && tuple.isUnchangedToast(at) ? fill : tuple;
            if (at < 0 || from == null || at >= from.size() || from.kind(at) != io.walhook.pgoutput.ColumnKind.TEXT) {
                return null;
            }
            key.add(from.text(at));
        }
        return key;
    }

    private void record(long xid, long oid) {
        int at = (int) (recorded++ % RECENT);
        recentXids[at] = xid & 0xFFFF_FFFFL;
        recentOids[at] = oid;
        if (manyXidTables != null) {
            manyXidTables.add(oid);
        } else if (xidTableCount < xidTables.length) {
            xidTables[xidTableCount++] = oid;
        } else {
            manyXidTables = new java.util.HashSet<>();
            for (long table : xidTables) {
                manyXidTables.add(table);
            }
            manyXidTables.add(oid);
        }
    }

    private boolean recordedForXid(long oid) {
        if (manyXidTables != null) {
            return manyXidTables.contains(oid);
        }
        for (int i = 0; i < xidTableCount; i++) {
            if (xidTables[i] == oid) {
                return true;
            }
        }
        return false;
    }

    /** Chunks whose window is open (tests). */
    int openWindows() {
        return open.size();
    }

    private void watermark(String content, ChangeEvent event, RoutingLoop.Reads reads) throws InterruptedException {
        open.values().removeIf(chunk -> chunk.abandoned);
        if (content.startsWith(LOW)) {
            Chunk chunk = pending.get(content.substring(LOW.length()));
            if (chunk != null) {
                chunk.opened(recentXids.clone(), recentOids.clone());
                open.put(chunk.token, chunk);
            }
        } else if (content.startsWith(HIGH)) {
            String token = content.substring(HIGH.length());
            Chunk chunk = pending.remove(token);
            Chunk window = open.remove(token);
            if (chunk == null) {
                return; // another walhook's, or one given up on, or from before a restart
            }
            String again = window == null ? "the stream did not carry its low watermark before its high one"
                    : chunk.rows == null ? "its rows were not read"
                    : !chunk.consistent() ? "a row of it changed between its watermarks by a change that left its key or a"
                            + " TOASTed value out of the stream"
                    : againFor(chunk.missedBefore(), chunk.unheard(recentXids));
            if (again != null) {
                chunk.outcome.complete(Chunk.Outcome.again(again)); // cannot tell which rows changed: read it again
                return;
            }
            send(chunk, event, reads);
        }
    }

    /**
     * Why a chunk's rows cannot be sent, given the transactions its snapshot missed ({@code missed},
     * {@code unheard}, -1 for none); null when they can.
     */
    private static String againFor(long missed, long unheard) {
        if (missed >= 0) {
            return "its snapshot did not see transaction " + missed + ", which the stream delivered before its low watermark"
                    + " (a commit not visible yet; one that stays so waits for a synchronous standby: pg_stat_activity's"
                    + " wait_event 'SyncRep')";
        }
        if (unheard >= 0) {
            return "its snapshot did not see transaction " + unheard + ", which committed before it and which this walhook"
                    + " did not deliver (it waits for a synchronous standby: pg_stat_activity's wait_event 'SyncRep')";
        }
        return null;
    }

    private void send(Chunk chunk, ChangeEvent high, RoutingLoop.Reads reads) throws InterruptedException {
        Subscription subscription = reads.subscription(chunk.subscriptionId);
        if (subscription == null) {
            // deleted (the runner cancels the backfill) or held out of force for now (it waits): nothing counts as sent
            chunk.outcome.complete(Chunk.Outcome.again("its subscription is not in force"));
            return;
        }
        if (chunk.truncated()) {
            chunk.sending(0); // every row read is gone
            return;
        }
        PgOutputMessage.Relation table = chunk.table.relation();
        if (!subscription.matchesTable(table.namespace(), table.relationName())) {
            // the subscription was edited and no longer takes the table: the runner counts the table done, or
            // reads the chunk again if it took the table back meanwhile (its rows are not sent)
            chunk.outcome.complete(Chunk.Outcome.LEFT_OUT);
            return;
        }
        if (described.size() > 1024) {
            described.clear();
        }
        java.util.List<String> orderKey = chunk.table.orderKey();
        RelationInfo relation = described.computeIfAbsent(java.util.Arrays.asList(chunk.table.relation(), orderKey),
                k -> RelationInfo.described(chunk.table.relation(), converters, chunk.table.userTypes()::get, orderKey));
        String backfill = chunk.backfillId.toString();
        List<ChangeEvent> reads0 = new ArrayList<>(chunk.rows.size());
        for (Chunk.Row row : chunk.rows) {
            if (chunk.changed(row)) {
                continue; // the stream delivered a newer version of it between the watermarks
            }
            ChangeEvent read = ChangeEvent.read(relation, row.tuple(), high.tx(), backfill, row.id());
            if (chunk.filter != null || subscription.filter().isPresent()) {
                // both filters, each seeing op == "read"
                io.walhook.routing.CelVariables variables = io.walhook.routing.CelVariables.of(read);
                if (chunk.filter != null && !chunk.filter.matches(variables)
                        || subscription.filter().isPresent() && !subscription.filter().get().matches(variables)) {
                    continue;
                }
            }
            reads0.add(read);
        }
        chunk.sending(reads0.size());
        for (ChangeEvent read : reads0) {
            reads.send(subscription, read, chunk::delivered);
        }
    }
}
