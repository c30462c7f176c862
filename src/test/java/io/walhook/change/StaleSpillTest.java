package io.walhook.change;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

import io.walhook.pgoutput.Lsn;

/**
 * Spill files are named by their slot, and a reader that starts on the slot removes the ones a
 * stopped reader left, whichever process that was (in a container every walhook is pid 1).
 */
class StaleSpillTest {

    @Test
    void aStartingReaderRemovesItsSlotsLeftoversAndNothingElse(@TempDir Path directory) throws Exception {
        // a transaction spilled by a reader of slot "orders" that was then killed: its file stays behind
        StreamedTransaction killed = new StreamedTransaction(771, directory, "orders");
        killed.append(Lsn.of(1), 0, new byte[] {1, 2, 3});
        killed.spill();
        List<Path> left = list(directory);
        assertThat(left).singleElement().satisfies(file -> assertThat(file.getFileName().toString())
                .startsWith("walhook-spill-orders-771-").endsWith(".spill"));
        Path otherSlot = Files.writeString(directory.resolve("walhook-spill-orders_eu-772-9.spill"), "x");
        Path unrelated = Files.writeString(directory.resolve("walhook-spill-orders-notes.txt"), "x");
        // named before the slot was in the name: whose it is cannot be told, so kept
        Path older = Files.writeString(directory.resolve("walhook-stream-773-5.spill"), "x");

        TransactionAssembler assembler = assembler(directory);
        assertThat(assembler.removeStaleSpills()).isEqualTo(1);
        assertThat(left.get(0)).doesNotExist();
        assertThat(otherSlot).as("another slot's").exists();
        assertThat(unrelated).exists();
        assertThat(older).exists();
        assertThat(assembler(directory.resolve("missing")).removeStaleSpills()).isZero();
    }

    /** A reader's assembler for slot "orders", its events dropped. */
    private static TransactionAssembler assembler(Path spillDirectory) {
        return new TransactionAssembler(new TransactionAssembler.Output() {
            @Override
            public void begin(TxInfo tx) {
            }

            @Override
            public void event(ChangeEvent event) {
            }

            @Override
            public void commit(TxInfo tx, Lsn endLsn, int events) {
            }
        }, "walhook", spillDirectory, "orders", 1L << 20);
    }

    private static List<Path> list(Path directory) throws Exception {
        try (var files = Files.list(directory)) {
            return files.toList();
        }
    }
}
