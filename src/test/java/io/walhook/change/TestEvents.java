package io.walhook.change;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

import io.walhook.pgoutput.Lsn;
import io.walhook.pgoutput.PgTime;
import io.walhook.pgoutput.ReplicaIdentity;

/**
 * Real {@link ChangeEvent}s for tests outside this package: each one is the output of a
 * {@link TransactionAssembler} fed the pgoutput bytes (protocol 1) of Begin, Relation, the change
 * and Commit, so values go through walhook's own converters exactly as on a live stream.
 *
 * <pre>{@code
 * TestEvents.Table orders = TestEvents.table("public", "orders").key("id", TestEvents.INT4)
 *         .column("status", TestEvents.TEXT).column("amount", TestEvents.NUMERIC).full();
 * ChangeEvent e = orders.update(TestEvents.row("42", "new", "12.50"), "42", "paid", "12.50");
 * }</pre>
 *
 * Values are PostgreSQL's text output; {@code null} is SQL NULL and {@link #UNCHANGED} an unchanged
 * TOASTed value ('u').
 */
public final class TestEvents {

    public static final long BOOL = 16, INT8 = 20, INT2 = 21, INT4 = 23, TEXT = 25, FLOAT8 = 701, VARCHAR = 1043,
            TIMESTAMPTZ = 1184, NUMERIC = 1700, UUID = 2950, JSONB = 3802, TEXT_ARRAY = 1009, INT4_ARRAY = 1007;

    /** Stands for an unchanged TOASTed value: the server sent 'u' instead of the value. */
    public static final String UNCHANGED = new String("\u0000unchanged TOAST\u0000");

    static final Lsn COMMIT_LSN = Lsn.parse("0/1A2B3C0");
    static final Lsn CHANGE_LSN = Lsn.parse("0/1A2B3B08");
    static final Instant COMMIT_TIME = Instant.parse("2026-11-29T16:00:00.123456Z");
    static final long XID = 7781;
    static final long RELATION_ID = 16384;

    private TestEvents() {
    }

    /** A table to build changes of; add columns, then optionally {@link Table#full()}. */
    public static Table table(String schema, String name) {
        return new Table(schema, name, ReplicaIdentity.DEFAULT, List.of());
    }

    /** Values of a row, for readability at call sites. */
    public static String[] row(String... values) {
        return values;
    }

    /** An update of {@code relation} as the stream decodes it: its 'K' and 'O' tuples, either may be null. */
    public static ChangeEvent update(RelationInfo relation, io.walhook.pgoutput.TupleData key,
            io.walhook.pgoutput.TupleData oldRow, io.walhook.pgoutput.TupleData newRow, TxInfo tx) {
        return ChangeEvent.row(Operation.UPDATE, relation, key, oldRow, newRow, tx.commitLsn(), tx, 1);
    }

    /** A logical message ({@code pg_logical_emit_message}), transactional or not. */
    public static ChangeEvent message(String prefix, byte[] content, boolean transactional) {
        Bytes m = new Bytes().u8('M').u8(transactional ? 1 : 0).i64(CHANGE_LSN.value()).string(prefix)
                .i32(content.length).raw(content);
        return transactional ? single(List.of(m.bytes())) : unwrapped(m.bytes());
    }

    public record Column(String name, long typeOid, boolean key) {
    }

    /** A table's Relation message: schema, name, replica identity and columns. */
    public record Table(String schema, String name, ReplicaIdentity identity, List<Column> columns, List<String> primaryKey) {

        public Table(String schema, String name, ReplicaIdentity identity, List<Column> columns) {
            this(schema, name, identity, columns, List.of());
        }

        public Table key(String column, long typeOid) {
            return with(new Column(column, typeOid, true));
        }

        public Table column(String column, long typeOid) {
            return with(new Column(column, typeOid, false));
        }

        /** REPLICA IDENTITY FULL: updates and deletes carry the whole old row, every column is "key". */
        public Table full() {
            List<Column> all = columns.stream().map(c -> new Column(c.name(), c.typeOid(), true)).toList();
            return new Table(schema, name, ReplicaIdentity.FULL, all);
        }

        /** REPLICA IDENTITY FULL with the key columns given so far as the table's primary key, which the stream's reader looks up. */
        public Table fullWithPrimaryKey() {
            List<String> key = columns.stream().filter(Column::key).map(Column::name).toList();
            return new Table(schema, name, ReplicaIdentity.FULL, full().columns(), key);
        }

        private Table with(Column c) {
            List<Column> more = new ArrayList<>(columns);
            more.add(c);
            return new Table(schema, name, identity, List.copyOf(more), primaryKey);
        }

        public ChangeEvent insert(String... values) {
            return single(primaryKey, List.of(relation(), new Bytes().u8('I').u32(RELATION_ID).u8('N').tuple(values).bytes()));
        }

        /** An insert committed at {@code commitLsn}: events of different transactions have different ids. */
        public ChangeEvent insertAt(long commitLsn, String... values) {
            return single(primaryKey, List.of(relation(), new Bytes().u8('I').u32(RELATION_ID).u8('N').tuple(values).bytes()),
                    Lsn.of(commitLsn));
        }

        /** An update without a 'K' or 'O' tuple (the key did not change, identity DEFAULT). */
        public ChangeEvent update(String... newValues) {
            return update(null, newValues);
        }

        /** An update with the old row as an 'O' tuple (REPLICA IDENTITY FULL), when {@code oldValues} is not null. */
        public ChangeEvent update(String[] oldValues, String... newValues) {
            Bytes u = new Bytes().u8('U').u32(RELATION_ID);
            if (oldValues != null) {
                u.u8('O').tuple(oldValues);
            }
            return single(primaryKey, List.of(relation(), u.u8('N').tuple(newValues).bytes()));
        }

        /** An update with a 'K' tuple (the old key: key columns set, the rest NULL). */
        public ChangeEvent updateWithKey(String[] keyValues, String... newValues) {
            return single(primaryKey, List.of(relation(), new Bytes().u8('U').u32(RELATION_ID).u8('K').tuple(keyValues).u8('N')
                    .tuple(newValues).bytes()));
        }

        /** As {@link #updateWithKey}, committed at {@code commitLsn}. */
        public ChangeEvent updateWithKeyAt(long commitLsn, String[] keyValues, String... newValues) {
            return single(primaryKey, List.of(relation(), new Bytes().u8('U').u32(RELATION_ID).u8('K').tuple(keyValues).u8('N')
                    .tuple(newValues).bytes()), Lsn.of(commitLsn));
        }

        /** A delete: the 'O' tuple under FULL, else a 'K' tuple (key columns set, the rest NULL). */
        public ChangeEvent delete(String... values) {
            char kind = identity == ReplicaIdentity.FULL ? 'O' : 'K';
            return single(primaryKey, List.of(relation(), new Bytes().u8('D').u32(RELATION_ID).u8(kind).tuple(values).bytes()));
        }

        public ChangeEvent truncate() {
            return single(primaryKey, List.of(relation(), new Bytes().u8('T').i32(1).u8(0).u32(RELATION_ID).bytes()));
        }

        /** As {@link #truncate}, committed at {@code commitLsn}. */
        public ChangeEvent truncateAt(long commitLsn) {
            return single(primaryKey, List.of(relation(), new Bytes().u8('T').i32(1).u8(0).u32(RELATION_ID).bytes()),
                    Lsn.of(commitLsn));
        }

        private byte[] relation() {
            Bytes r = new Bytes().u8('R').u32(RELATION_ID).string(schema).string(name).u8(identity.code())
                    .u16(columns.size());
            for (Column c : columns) {
                r.u8(c.key() ? 1 : 0).string(c.name()).u32(c.typeOid()).i32(-1);
            }
            return r.bytes();
        }
    }

    /** Begin, the messages, Commit, through a fresh assembler: the one event they make. */
    private static ChangeEvent single(List<byte[]> messages) {
        return single(List.of(), messages);
    }

    private static ChangeEvent single(List<String> primaryKey, List<byte[]> messages) {
        return single(primaryKey, messages, COMMIT_LSN);
    }

    private static ChangeEvent single(List<String> primaryKey, List<byte[]> messages, Lsn commitLsn) {
        List<ChangeEvent> events = new ArrayList<>();
        TransactionAssembler assembler = assembler(events, primaryKey);
        long commitMicros = PgTime.toPgMicros(COMMIT_TIME);
        assembler.accept(ByteBuffer.wrap(new Bytes().u8('B').i64(commitLsn.value()).i64(commitMicros).u32(XID)
                .bytes()), commitLsn);
        for (byte[] m : messages) {
            assembler.accept(ByteBuffer.wrap(m), CHANGE_LSN);
        }
        assembler.accept(ByteBuffer.wrap(new Bytes().u8('C').u8(0).i64(commitLsn.value())
                .i64(commitLsn.value() + 48).i64(commitMicros).bytes()), commitLsn);
        return only(events);
    }

    private static ChangeEvent unwrapped(byte[] message) {
        List<ChangeEvent> events = new ArrayList<>();
        assembler(events, List.of()).accept(ByteBuffer.wrap(message), CHANGE_LSN);
        return only(events);
    }

    private static TransactionAssembler assembler(List<ChangeEvent> events, List<String> primaryKey) {
        TransactionAssembler.Output output = new TransactionAssembler.Output() {
            @Override
            public void begin(TxInfo tx) {
            }

            @Override
            public void event(ChangeEvent event) {
                events.add(event);
            }

            @Override
            public void commit(TxInfo tx, Lsn endLsn, int count) {
            }
        };
        return new TransactionAssembler(output, (schema, table) -> schema.equals("walhook"),
                oid -> primaryKey.isEmpty() ? null : primaryKey, Path.of(System.getProperty("java.io.tmpdir")), "test_events",
                1L << 20);
    }

    private static ChangeEvent only(List<ChangeEvent> events) {
        if (events.size() != 1) {
            throw new IllegalStateException("expected one event, got " + events);
        }
        return events.get(0);
    }

    /** Big-endian pgoutput fields. */
    static final class Bytes {
        private final ByteArrayOutputStream out = new ByteArrayOutputStream();

        Bytes u8(int v) {
            out.write(v);
            return this;
        }

        Bytes u16(int v) {
            return u8(v >>> 8).u8(v);
        }

        Bytes i32(int v) {
            return u16(v >>> 16).u16(v);
        }

        Bytes u32(long v) {
            return i32((int) v);
        }

        Bytes i64(long v) {
            return i32((int) (v >>> 32)).i32((int) v);
        }

        Bytes raw(byte[] bytes) {
            out.write(bytes, 0, bytes.length);
            return this;
        }

        Bytes string(String s) {
            return raw(s.getBytes(StandardCharsets.UTF_8)).u8(0);
        }

        Bytes tuple(String... values) {
            u16(values.length);
            for (String v : values) {
                if (v == null) {
                    u8('n');
                } else if (v == UNCHANGED) {
                    u8('u');
                } else {
                    byte[] text = v.getBytes(StandardCharsets.UTF_8);
                    u8('t').i32(text.length).raw(text);
                }
            }
            return this;
        }

        byte[] bytes() {
            return out.toByteArray();
        }
    }
}
