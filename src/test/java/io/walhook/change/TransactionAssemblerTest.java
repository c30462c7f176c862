package io.walhook.change;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import io.walhook.pgoutput.Lsn;

/** The assembler fed pgoutput bytes (protocol 2) in orders the server can send them. */
class TransactionAssemblerTest {

    private static final long TABLE = 16384;
    private static final long STREAMED_XID = 900;

    private final List<ChangeEvent> events = new ArrayList<>();

    @Test
    void aStreamedTransactionsOldRelationDoesNotReplaceANewerOneAtItsCommit(@TempDir Path spill) {
        TransactionAssembler assembler = new TransactionAssembler(output(), "walhook", spill, "slot", 1L << 20);
        // a streamed transaction meets the table with two columns ...
        accept(assembler, new TestEvents.Bytes().u8('S').u32(STREAMED_XID).u8(1));
        accept(assembler, relation(STREAMED_XID, "id", "a"));
        accept(assembler, new TestEvents.Bytes().u8('I').u32(STREAMED_XID).u32(TABLE).u8('N').tuple("1", "one"));
        accept(assembler, new TestEvents.Bytes().u8('E'));
        // ... then, before it commits, the publication's view of the table changes (a column added to its
        // column list, say): the next transaction on the table brings the newer Relation
        transaction(assembler, 0x2000, relation(null, "id", "a", "b"),
                new TestEvents.Bytes().u8('I').u32(TABLE).u8('N').tuple("2", "two", "2"));
        accept(assembler, new TestEvents.Bytes().u8('c').u32(STREAMED_XID).u8(0).i64(0x3000).i64(0x3030).i64(0));
        // the server sends no Relation again: it already did, for the newer form
        transaction(assembler, 0x4000, new TestEvents.Bytes().u8('I').u32(TABLE).u8('N').tuple("3", "three", "3"));

        assertThat(events).extracting(e -> e.tx().commitLsn()).containsExactly(Lsn.of(0x2000), Lsn.of(0x3000),
                Lsn.of(0x4000));
        assertThat(events.get(1).newRow().size()).as("the streamed change, decoded with its own Relation").isEqualTo(2);
        assertThat(events.get(2).newRow().size()).as("a later change, with the newest Relation").isEqualTo(3);
    }

    @Test
    void aSpillFileTheDiskCannotTakeFailsTheStreamAndTheAssemblerStartsOverCleanly(@TempDir Path spill) throws Exception {
        TransactionAssembler assembler = new TransactionAssembler(output(), "walhook", spill, "slot", 16);
        java.util.concurrent.atomic.AtomicBoolean full = new java.util.concurrent.atomic.AtomicBoolean(true);
        assembler.spillFiles = file -> new java.io.FilterOutputStream(java.nio.file.Files.newOutputStream(file)) {
            @Override
            public void write(int b) throws java.io.IOException {
                if (full.get()) {
                    throw new java.io.IOException("No space left on device");
                }
                super.write(b);
            }

            @Override
            public void write(byte[] b, int off, int len) throws java.io.IOException {
                if (full.get()) {
                    throw new java.io.IOException("No space left on device");
                }
                out.write(b, off, len);
            }
        };
        // a streamed transaction past the memory bound goes to a file; its small records wait in the file's buffer,
        // and a row bigger than the buffer is written through, which fails
        accept(assembler, new TestEvents.Bytes().u8('S').u32(STREAMED_XID).u8(1));
        accept(assembler, relation(STREAMED_XID, "id", "a"));
        accept(assembler, new TestEvents.Bytes().u8('I').u32(STREAMED_XID).u32(TABLE).u8('N').tuple("1", "one"));
        TestEvents.Bytes big = new TestEvents.Bytes().u8('I').u32(STREAMED_XID).u32(TABLE).u8('N').tuple("2", "x".repeat(70_000));
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> accept(assembler, big))
                .isInstanceOf(java.io.UncheckedIOException.class).hasMessageContaining("No space left on device");
        // the reader gives the broken stream up: closing the file fails as the write did, and must not end the reader
        assembler.reset();
        try (var files = java.nio.file.Files.list(spill)) {
            assertThat(files).as("the spill file is gone").isEmpty();
        }
        // on the next connection the server sends the transaction again from its start; the disk has room now
        full.set(false);
        accept(assembler, new TestEvents.Bytes().u8('S').u32(STREAMED_XID).u8(1));
        accept(assembler, relation(STREAMED_XID, "id", "a"));
        accept(assembler, new TestEvents.Bytes().u8('I').u32(STREAMED_XID).u32(TABLE).u8('N').tuple("1", "one"));
        accept(assembler, big);
        accept(assembler, new TestEvents.Bytes().u8('E'));
        accept(assembler, new TestEvents.Bytes().u8('c').u32(STREAMED_XID).u8(0).i64(0x3000).i64(0x3030).i64(0));
        assertThat(events).hasSize(2);
        assertThat(events.get(1).newRow().size()).isEqualTo(2);
    }

    /**
     * A spill file created but not opened (too many open files, a permission on the file alone): the
     * stream fails, and the empty file was left behind, one more at every reconnect while the fault
     * lasted, until the next start of the process.
     */
    @Test
    void aSpillFileThatCannotBeOpenedIsNotLeftBehind(@TempDir Path spill) throws Exception {
        TransactionAssembler assembler = new TransactionAssembler(output(), "walhook", spill, "slot", 16);
        assembler.spillFiles = file -> {
            throw new java.io.IOException("Too many open files");
        };
        accept(assembler, new TestEvents.Bytes().u8('S').u32(STREAMED_XID).u8(1));
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> { // past the memory bound: to a file
            accept(assembler, relation(STREAMED_XID, "id", "a"));
            accept(assembler, new TestEvents.Bytes().u8('I').u32(STREAMED_XID).u32(TABLE).u8('N').tuple("1", "x".repeat(100)));
        }).isInstanceOf(java.io.UncheckedIOException.class).hasMessageContaining("Too many open files");
        assembler.reset();
        try (var files = java.nio.file.Files.list(spill)) {
            assertThat(files).as("no spill file is left").isEmpty();
        }
    }

    /**
     * A Stream Commit inside a transaction is refused; the streamed transaction it named, spilled to a
     * file, was taken out of those the assembler knows before the refusal, so the reset that follows
     * left its file (and its descriptor) behind until walhook restarted.
     */
    @Test
    void aStreamCommitRefusedInsideATransactionLeavesNoSpillFileBehind(@TempDir Path spill) throws Exception {
        TransactionAssembler assembler = new TransactionAssembler(output(), "walhook", spill, "slot", 16);
        accept(assembler, new TestEvents.Bytes().u8('S').u32(STREAMED_XID).u8(1));
        accept(assembler, relation(STREAMED_XID, "id", "a"));
        accept(assembler, new TestEvents.Bytes().u8('I').u32(STREAMED_XID).u32(TABLE).u8('N').tuple("1", "x".repeat(100)));
        accept(assembler, new TestEvents.Bytes().u8('E'));
        try (var files = java.nio.file.Files.list(spill)) {
            assertThat(files).as("spilled").isNotEmpty();
        }
        accept(assembler, new TestEvents.Bytes().u8('B').i64(0x2000).i64(0).u32(0x2000));
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> accept(assembler,
                new TestEvents.Bytes().u8('c').u32(STREAMED_XID).u8(0).i64(0x3000).i64(0x3030).i64(0)))
                .isInstanceOf(io.walhook.pgoutput.PgOutputException.class).hasMessageContaining("inside a transaction");
        assembler.reset();
        try (var files = java.nio.file.Files.list(spill)) {
            assertThat(files).as("no spill file is left").isEmpty();
        }
    }

    /**
     * An Update whose key or old row has another number of columns than its Relation is refused
     * where it is read: it was taken, and routing then stopped on an index out of bounds while
     * hashing its key, far from the bytes, holding the slot.
     */
    @Test
    void anUpdatesKeyOrOldRowOfAnotherWidthThanItsRelationIsRefused(@TempDir Path spill) {
        for (char kind : new char[] {'K', 'O'}) {
            TransactionAssembler assembler = new TransactionAssembler(output(), "walhook", spill, "slot", 1L << 20);
            accept(assembler, new TestEvents.Bytes().u8('B').i64(0x2000).i64(0).u32(0x2000));
            accept(assembler, relation(null, "id", "v"));
            TestEvents.Bytes update = new TestEvents.Bytes().u8('U').u32(TABLE).u8(kind).tuple("1", null, null).u8('N')
                    .tuple("1", "x");
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> accept(assembler, update))
                    .isInstanceOf(io.walhook.pgoutput.PgOutputException.class).hasMessageContaining("3 columns");
        }
        assertThat(events).isEmpty();
    }

    /**
     * Messages the server never sends inside a transaction's Begin..Commit (it sends stream blocks
     * and non-transactional messages as it decodes, a transaction only at its commit) are refused:
     * a non-transactional message began and committed a transaction of its own inside the open one,
     * and a stream's start or abort there mixed its blocks into it.
     */
    @Test
    void aStreamBlockOrANonTransactionalMessageInsideATransactionIsRefused(@TempDir Path spill) {
        List<TestEvents.Bytes> inside = List.of(
                new TestEvents.Bytes().u8('M').u8(0).i64(0x1900).string("p").u32(1).u8('x'),
                new TestEvents.Bytes().u8('S').u32(STREAMED_XID).u8(1),
                new TestEvents.Bytes().u8('A').u32(STREAMED_XID).u32(STREAMED_XID));
        List<String> refusals = List.of("non-transactional Message inside transaction 8192",
                "Stream Start of xid 900 inside transaction 8192", "Stream Abort of xid 900 inside transaction 8192");
        for (int i = 0; i < inside.size(); i++) {
            TransactionAssembler assembler = new TransactionAssembler(output(), "walhook", spill, "slot", 1L << 20);
            accept(assembler, new TestEvents.Bytes().u8('B').i64(0x2000).i64(0).u32(0x2000));
            TestEvents.Bytes message = inside.get(i);
            org.assertj.core.api.Assertions.assertThatThrownBy(() -> accept(assembler, message))
                    .isInstanceOf(io.walhook.pgoutput.PgOutputException.class).hasMessageContaining(refusals.get(i));
        }
        assertThat(events).isEmpty();
    }

    /**
     * A Stream Commit of a transaction none of whose blocks was kept is refused: it was committed
     * empty, and acknowledged, its changes lost. One the stream resumed past was delivered before,
     * and is skipped as any such.
     */
    @Test
    void aStreamCommitOfATransactionNeverStreamedIsRefusedUnlessDeliveredBefore(@TempDir Path spill) {
        TestEvents.Bytes commit = new TestEvents.Bytes().u8('c').u32(STREAMED_XID).u8(0).i64(0x3000).i64(0x3030).i64(0);
        TransactionAssembler assembler = new TransactionAssembler(output(), "walhook", spill, "slot", 1L << 20);
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> accept(assembler, commit))
                .isInstanceOf(io.walhook.pgoutput.PgOutputException.class)
                .hasMessageContaining("Stream Commit of xid 900 whose changes were never streamed");
        TransactionAssembler resumed = new TransactionAssembler(output(), "walhook", spill, "slot", 1L << 20);
        resumed.skipCommittedBefore(Lsn.of(0x3030));
        accept(resumed, commit);
        transaction(resumed, 0x4000, relation(null, "id", "a"),
                new TestEvents.Bytes().u8('I').u32(TABLE).u8('N').tuple("1", "one"));
        assertThat(events).extracting(e -> e.tx().commitLsn()).containsExactly(Lsn.of(0x4000));
    }

    /**
     * A streamed transaction of many changes read back at its commit tells its output it is at
     * work, so the reader answers the server meanwhile (it heard nothing for as long as that took,
     * and ended the connection past its wal_sender_timeout, to stream it all again).
     */
    @Test
    void aLargeStreamedTransactionReadBackAtItsCommitSaysItIsAtWork(@TempDir Path spill) {
        int[] working = {0};
        TransactionAssembler assembler = new TransactionAssembler(output(() -> working[0]++), "walhook", spill, "slot",
                1L << 16);
        accept(assembler, new TestEvents.Bytes().u8('S').u32(STREAMED_XID).u8(1));
        accept(assembler, relation(STREAMED_XID, "id", "a"));
        int changes = 3 * TransactionAssembler.REPLAYED_BETWEEN_CALLS;
        for (int i = 0; i < changes; i++) {
            accept(assembler, new TestEvents.Bytes().u8('I').u32(STREAMED_XID).u32(TABLE).u8('N').tuple(Integer.toString(i), "x"));
        }
        accept(assembler, new TestEvents.Bytes().u8('E'));
        assertThat(working[0]).as("nothing read back yet").isZero();
        accept(assembler, new TestEvents.Bytes().u8('c').u32(STREAMED_XID).u8(0).i64(0x3000).i64(0x3030).i64(0));
        assertThat(events).hasSize(changes);
        assertThat(working[0]).isEqualTo(3);
    }

    private static TestEvents.Bytes relation(Long xid, String... columns) {
        TestEvents.Bytes r = new TestEvents.Bytes().u8('R');
        if (xid != null) {
            r.u32(xid);
        }
        r.u32(TABLE).string("public").string("t").u8('d').u16(columns.length);
        for (int i = 0; i < columns.length; i++) {
            r.u8(i == 0 ? 1 : 0).string(columns[i]).u32(TestEvents.TEXT).i32(-1);
        }
        return r;
    }

    private static void transaction(TransactionAssembler assembler, long commitLsn, TestEvents.Bytes... messages) {
        accept(assembler, new TestEvents.Bytes().u8('B').i64(commitLsn).i64(0).u32(commitLsn));
        for (TestEvents.Bytes m : messages) {
            accept(assembler, m);
        }
        accept(assembler, new TestEvents.Bytes().u8('C').u8(0).i64(commitLsn).i64(commitLsn + 0x30).i64(0));
    }

    private static void accept(TransactionAssembler assembler, TestEvents.Bytes message) {
        assembler.accept(ByteBuffer.wrap(message.bytes()), Lsn.of(0x1000));
    }

    private TransactionAssembler.Output output() {
        return output(() -> { });
    }

    /** The events into {@link #events}; {@code working} told each time the assembler says it is at work. */
    private TransactionAssembler.Output output(Runnable working) {
        return new TransactionAssembler.Output() {
            @Override
            public void working() {
                working.run();
            }

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
    }
}
