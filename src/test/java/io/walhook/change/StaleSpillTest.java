package io.walhook.change;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.file.Files;
import java.nio.file.Path;

import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.io.TempDir;

/** Spill files of a walhook killed mid-stream are removed at the next start; a running one's are not. */
class StaleSpillTest {

    @Test
    void removesOnlyTheSpillFilesOfProcessesThatNoLongerRun(@TempDir Path directory) throws Exception {
        long dead = deadPid();
        Path stale = Files.writeString(directory.resolve("walhook-spill-" + dead + "-771-123.spill"), "x");
        Path mine = Files.writeString(directory.resolve("walhook-spill-" + ProcessHandle.current().pid() + "-772-9.spill"), "x");
        Path unrelated = Files.writeString(directory.resolve("walhook-spill-notes.txt"), "x");
        // named before the pid was in the name (walhook-stream-<xid>-...): whose it is cannot be told, so kept
        Path older = Files.writeString(directory.resolve("walhook-stream-773-5.spill"), "x");

        assertThat(TransactionAssembler.removeStaleSpills(directory)).isEqualTo(1);
        assertThat(stale).doesNotExist();
        assertThat(mine).as("this process's own").exists();
        assertThat(unrelated).exists();
        assertThat(older).exists();
        assertThat(TransactionAssembler.removeStaleSpills(directory.resolve("missing"))).isZero();
    }

    /** A pid no process has: a child that has exited. */
    private static long deadPid() throws Exception {
        Process child = new ProcessBuilder("true").start();
        child.waitFor();
        return child.pid();
    }
}
