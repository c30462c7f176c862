package io.walhook.change;

import java.io.BufferedInputStream;
import java.io.BufferedOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.EOFException;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

import io.walhook.pgoutput.Lsn;

/**
 * The messages of one in-progress streamed transaction, kept as raw pgoutput bytes until its
 * Stream Commit: in memory while small, then appended to a temporary file so a transaction of any
 * size costs bounded heap. Subtransactions aborted on the way are remembered and skipped on replay.
 */
final class StreamedTransaction implements AutoCloseable {

    /** One buffered message: its WAL position, its (sub)transaction and its bytes. */
    record Record(Lsn lsn, long subXid, byte[] bytes) {
    }

    /** Receives the records of a replay in order. */
    interface RecordConsumer {
        void accept(Record record);
    }

    private final long xid;
    private static final org.jboss.logging.Logger LOG = org.jboss.logging.Logger.getLogger(StreamedTransaction.class);
    private final Path spillDirectory;
    /** Whose spill files these are (see {@link #removeStale}). */
    private final String slot;
    private final List<Record> memory = new ArrayList<>();
    private final Set<Long> abortedSubXids = new HashSet<>();
    /** By relation, when its latest Relation message in this transaction arrived (the assembler's count). */
    private final java.util.Map<Long, Long> relationArrivals = new java.util.HashMap<>();
    private long memoryBytes;
    private Path file;
    private DataOutputStream out;
    private long records;

    /** Opens a spill file for writing: the file system's, or in tests one that fails as a full disk does. */
    interface SpillFiles {
        SpillFiles DISK = file -> Files.newOutputStream(file);

        java.io.OutputStream open(Path file) throws IOException;
    }

    private final SpillFiles spillFiles;

    StreamedTransaction(long xid, Path spillDirectory, String slot) {
        this(xid, spillDirectory, slot, SpillFiles.DISK);
    }

    StreamedTransaction(long xid, Path spillDirectory, String slot, SpillFiles spillFiles) {
        this.xid = xid;
        this.spillDirectory = spillDirectory;
        this.slot = slot;
        this.spillFiles = spillFiles;
    }

    long xid() {
        return xid;
    }

    long memoryBytes() {
        return memoryBytes;
    }

    boolean spilled() {
        return file != null;
    }

    long records() {
        return records;
    }

    void append(Lsn lsn, long subXid, byte[] bytes) {
        records++;
        if (out != null) {
            write(new Record(lsn, subXid, bytes));
            return;
        }
        memory.add(new Record(lsn, subXid, bytes));
        memoryBytes += bytes.length + 48L;
    }

    /**
     * Spill files are {@code walhook-spill-<slot>-<xid>-<random>.spill}: the slot tells whose they
     * are (slot names have no '-'). Not the process id: in a container every walhook is pid 1.
     */
    private static final String PREFIX = "walhook-spill-";
    private static final String SUFFIX = ".spill";

    /**
     * Deletes the spill files of {@code slot} in {@code directory}; returns how many. Called as a
     * reader of the slot starts, holding the slot's lock: they are a stopped reader's, left by a
     * crash or kill -9 in the middle of a streamed transaction, which the server sends again from its
     * start. Other slots' files are kept, and so is whatever cannot be listed or deleted: never fatal.
     */
    static int removeStale(Path directory, String slot) {
        if (!Files.isDirectory(directory)) {
            return 0;
        }
        java.util.regex.Pattern ours = java.util.regex.Pattern.compile(java.util.regex.Pattern.quote(PREFIX + slot + "-")
                + "\\d+-.*" + java.util.regex.Pattern.quote(SUFFIX));
        int removed = 0;
        try (java.util.stream.Stream<Path> files = Files.list(directory)) {
            for (Path file : (Iterable<Path>) files::iterator) {
                if (ours.matcher(file.getFileName().toString()).matches() && deleted(file)) {
                    removed++;
                }
            }
        } catch (IOException | java.io.UncheckedIOException e) {
            return removed;
        }
        return removed;
    }

    private static boolean deleted(Path file) {
        try {
            return Files.deleteIfExists(file);
        } catch (IOException e) {
            return false;
        }
    }

    /** Moves what is in memory to a file; later appends go straight to it. */
    void spill() {
        if (out != null) {
            return;
        }
        try {
            Files.createDirectories(spillDirectory);
            file = Files.createTempFile(spillDirectory, PREFIX + slot + "-" + Long.toUnsignedString(xid) + "-", SUFFIX);
            try {
                out = new DataOutputStream(new BufferedOutputStream(spillFiles.open(file), 1 << 16));
            } catch (IOException | RuntimeException notOpened) {
                // created, not opened (too many open files): not left behind, one more at every reconnect
                try {
                    Files.deleteIfExists(file);
                } catch (IOException undeleted) {
                    notOpened.addSuppressed(undeleted); // removed as the next reader of the slot starts
                }
                file = null;
                throw notOpened;
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot spill streamed transaction " + Long.toUnsignedString(xid)
                    + " to " + spillDirectory + ": " + e.getMessage(), e);
        }
        for (Record record : memory) {
            write(record);
        }
        memory.clear();
        memoryBytes = 0;
    }

    private void write(Record record) {
        try {
            out.writeLong(record.lsn().value());
            out.writeLong(record.subXid());
            out.writeInt(record.bytes().length);
            out.write(record.bytes());
        } catch (IOException e) {
            throw new UncheckedIOException("cannot append to " + file + ": " + e.getMessage(), e);
        }
    }

    /** A Relation message of this transaction was buffered: the {@code arrival}-th the reader received. */
    void relationArrived(long relationId, long arrival) {
        relationArrivals.put(relationId, arrival);
    }

    /** When the latest Relation message of this transaction for the relation arrived; 0 if none did. */
    long relationArrival(long relationId) {
        return relationArrivals.getOrDefault(relationId, 0L);
    }

    /** Stream Abort of a subtransaction: its changes are dropped at replay. */
    void abortSubTransaction(long subXid) {
        abortedSubXids.add(subXid);
    }

    /** Hands every record of a live (sub)transaction to {@code consumer}, in the order received. */
    void replay(RecordConsumer consumer) {
        if (out == null) {
            for (Record record : memory) {
                if (!abortedSubXids.contains(record.subXid())) {
                    consumer.accept(record);
                }
            }
            return;
        }
        try {
            out.flush();
            try (DataInputStream in = new DataInputStream(new BufferedInputStream(Files.newInputStream(file), 1 << 16))) {
                while (true) {
                    long lsn;
                    try {
                        lsn = in.readLong();
                    } catch (EOFException end) {
                        return;
                    }
                    long subXid = in.readLong();
                    byte[] bytes = new byte[in.readInt()];
                    in.readFully(bytes);
                    if (!abortedSubXids.contains(subXid)) {
                        consumer.accept(new Record(Lsn.of(lsn), subXid, bytes));
                    }
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read back " + file + ": " + e.getMessage(), e);
        }
    }

    /**
     * Drops the transaction and deletes its file. Never throws: it runs as a broken stream is given
     * up (the disk full, say, where closing fails as the write did), and the reader must go on to
     * reconnect; a file it cannot delete is removed as the next reader of the slot starts.
     */
    @Override
    public void close() {
        memory.clear();
        memoryBytes = 0;
        if (out != null) {
            try {
                out.close();
            } catch (IOException e) {
                LOG.debugf("closing %s: %s", file, e.getMessage()); // the write that failed first was reported
            } finally {
                out = null;
            }
            try {
                Files.deleteIfExists(file);
            } catch (IOException e) {
                LOG.warnf("cannot delete %s (it is removed as the next reader of slot %s starts): %s", file, slot,
                        e.getMessage());
            }
        }
    }
}
