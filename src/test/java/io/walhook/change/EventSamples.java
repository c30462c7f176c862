package io.walhook.change;

import java.io.ByteArrayOutputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

import io.walhook.pgoutput.Lsn;
import io.walhook.pgoutput.PgTime;

/**
 * Real {@link ChangeEvent}s for tests that need no server: pgoutput bytes for one transaction on
 * a table {@code public.orders (id int4 key, status text, amount numeric)} go through a
 * {@link TransactionAssembler}, exactly as the reader's do.
 */
public final class EventSamples {

    public static final Lsn COMMIT_LSN = Lsn.parse("0/1A2B3C0");
    public static final Instant COMMIT_TIME = Instant.parse("2026-11-29T16:00:00.123456Z");
    private static final long ORDERS = 16384;

    private EventSamples() {
    }

    /** A row as pgoutput text values; null stands for SQL NULL. */
    public record Row(String id, String status, String amount) {
    }

    /** An insert of {@code row} into public.orders, the first event of its transaction. */
    public static ChangeEvent insert(Row row) {
        return transaction(List.of(relation('d'), change('I', null, row))).get(0);
    }

    /** An update under REPLICA IDENTITY FULL, so old carries the whole row. */
    public static ChangeEvent updateFull(Row old, Row row) {
        return transaction(List.of(relation('f'), change('U', old, row))).get(0);
    }

    /** A transactional logical message. */
    public static ChangeEvent message(String prefix, String content) {
        Bytes m = new Bytes('M').u8(1).i64(0x1A2B3B00L).string(prefix);
        byte[] bytes = content.getBytes(StandardCharsets.UTF_8);
        m.i32(bytes.length).raw(bytes);
        return transaction(List.of(m.done())).get(0);
    }

    private static List<ChangeEvent> transaction(List<byte[]> messages) {
        List<ChangeEvent> events = new ArrayList<>();
        TransactionAssembler assembler = new TransactionAssembler(new TransactionAssembler.Output() {
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
        }, "walhook", Path.of(System.getProperty("java.io.tmpdir")), 1 << 20);
        long micros = PgTime.toPgMicros(COMMIT_TIME);
        assembler.accept(ByteBuffer.wrap(new Bytes('B').i64(COMMIT_LSN.value()).i64(micros).i32(7781).done()), Lsn.INVALID);
        for (byte[] message : messages) {
            assembler.accept(ByteBuffer.wrap(message), Lsn.parse("0/1A2B3B08"));
        }
        assembler.accept(ByteBuffer.wrap(new Bytes('C').u8(0).i64(COMMIT_LSN.value()).i64(COMMIT_LSN.value() + 48)
                .i64(micros).done()), COMMIT_LSN.plus(48));
        return events;
    }

    private static byte[] relation(char identity) {
        Bytes r = new Bytes('R').i32((int) ORDERS).string("public").string("orders").u8(identity).i16(3);
        r.u8(1).string("id").i32(23).i32(-1);
        r.u8(identity == 'f' ? 1 : 0).string("status").i32(25).i32(-1);
        r.u8(identity == 'f' ? 1 : 0).string("amount").i32(1700).i32(-1);
        return r.done();
    }

    private static byte[] change(char type, Row old, Row row) {
        Bytes c = new Bytes(type).i32((int) ORDERS);
        if (old != null) {
            c.u8('O');
            tuple(c, old);
        }
        c.u8('N');
        tuple(c, row);
        return c.done();
    }

    private static void tuple(Bytes b, Row row) {
        b.i16(3);
        for (String value : new String[] {row.id(), row.status(), row.amount()}) {
            if (value == null) {
                b.u8('n');
            } else {
                byte[] bytes = value.getBytes(StandardCharsets.UTF_8);
                b.u8('t').i32(bytes.length).raw(bytes);
            }
        }
    }

    /** Big-endian pgoutput field writer. */
    private static final class Bytes {
        private final ByteArrayOutputStream buffer = new ByteArrayOutputStream();
        private final DataOutputStream out = new DataOutputStream(buffer);

        Bytes(char type) {
            u8(type);
        }

        Bytes u8(int v) {
            return io(() -> out.writeByte(v));
        }

        Bytes i16(int v) {
            return io(() -> out.writeShort(v));
        }

        Bytes i32(int v) {
            return io(() -> out.writeInt(v));
        }

        Bytes i64(long v) {
            return io(() -> out.writeLong(v));
        }

        Bytes string(String s) {
            return raw(s.getBytes(StandardCharsets.UTF_8)).u8(0);
        }

        Bytes raw(byte[] bytes) {
            return io(() -> out.write(bytes));
        }

        byte[] done() {
            return buffer.toByteArray();
        }

        private interface Write {
            void run() throws IOException;
        }

        private Bytes io(Write write) {
            try {
                write.run();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            return this;
        }
    }
}
