package io.walhook.pgoutput;

import java.nio.ByteBuffer;
import java.util.concurrent.TimeUnit;

import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Fork;
import org.openjdk.jmh.annotations.Measurement;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import org.openjdk.jmh.annotations.Warmup;

/**
 * Decoder throughput on one core (JMH, one thread): an Insert of a typical six-column row, an
 * Update carrying its old row (REPLICA IDENTITY FULL), and an Insert of a 50-column row, each as
 * the server sends it (protocol 4, outside a stream). Run by {@code scripts/bench-decoder}, never by
 * the tests. The values stay slices of the message: this is the decoder's whole cost per message
 * before anything reads a value.
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.Throughput)
@OutputTimeUnit(TimeUnit.SECONDS)
@Warmup(iterations = 3, time = 2)
@Measurement(iterations = 5, time = 2)
@Fork(value = 1, jvmArgs = {"-Xmx256m", "-XX:+UseSerialGC"})
public class PgOutputDecoderBench {

    private final PgOutputDecoder decoder = new PgOutputDecoder();
    private ByteBuffer insert;
    private ByteBuffer updateWithOldRow;
    private ByteBuffer wideInsert;

    /** A row as a shop's orders table has it: id, customer, amount, status, created, paid. */
    static TupleData typicalRow(long id) {
        return TupleData.builder().text(Long.toString(id)).text("customer-" + (id % 977)).text("1234.56")
                .text("paid").text("2026-11-29 21:00:00.123456+00").text("t").build();
    }

    static TupleData wideRow() {
        TupleData.Builder row = TupleData.builder();
        for (int i = 0; i < 50; i++) {
            switch (i % 5) {
                case 0 -> row.text(Integer.toString(100_000 + i));
                case 1 -> row.text("column value " + i);
                case 2 -> row.text("2026-11-29 21:00:00+00");
                case 3 -> row.nullValue();
                default -> row.text("f");
            }
        }
        return row.build();
    }

    @Setup
    public void messages() {
        insert = ByteBuffer.wrap(PgOutputBytes.insert(null, 16_385, typicalRow(123_456)).bytes());
        updateWithOldRow = ByteBuffer.wrap(PgOutputBytes.update(null, 16_385, null, typicalRow(123_456),
                typicalRow(123_457)).bytes());
        wideInsert = ByteBuffer.wrap(PgOutputBytes.insert(null, 16_386, wideRow()).bytes());
    }

    @Benchmark
    public PgOutputMessage insertTypicalRow() {
        return decoder.decode(insert);
    }

    @Benchmark
    public PgOutputMessage updateWithOldRow() {
        return decoder.decode(updateWithOldRow);
    }

    @Benchmark
    public PgOutputMessage insert50Columns() {
        return decoder.decode(wideInsert);
    }
}
