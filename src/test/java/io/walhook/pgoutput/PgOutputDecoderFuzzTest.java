package io.walhook.pgoutput;

import static org.assertj.core.api.Assertions.assertThat;

import io.walhook.pgoutput.PgOutputBytes.Sample;
import io.walhook.pgoutput.PgOutputMessage.Delete;
import io.walhook.pgoutput.PgOutputMessage.Insert;
import io.walhook.pgoutput.PgOutputMessage.LogicalMessage;
import io.walhook.pgoutput.PgOutputMessage.Update;
import java.util.Arrays;
import java.util.Random;
import net.jqwik.api.Arbitraries;
import net.jqwik.api.Arbitrary;
import net.jqwik.api.Combinators;
import net.jqwik.api.ForAll;
import net.jqwik.api.Property;
import net.jqwik.api.Provide;

/**
 * Whatever the bytes, the decoders return a message or throw {@link PgOutputException}: no other
 * exception, no Error (such as an OutOfMemoryError from a count taken on trust), no hang. 100,000
 * tries in all, a few seconds.
 */
class PgOutputDecoderFuzzTest {

    private static final String TYPE_LETTERS = "BCORYIUDTMSEcAbPKrpwk";
    private static final long[] LARGE = {0xFFFF, 0xFFFF_FFFFL, 0x7FFF_FFFF, 0x8000_0000L, 0x0001_0000, 0x7FFF, 0x8000};

    @Property(tries = 50_000)
    void randomBytesDecodeOrFailWithPgOutputException(@ForAll("randomMessages") byte[] bytes, @ForAll boolean inStream) {
        PgOutputDecoder decoder = new PgOutputDecoder();
        if (inStream) {
            PgOutputBytes.enterStream(decoder);
        }
        decodeOrFailTyped(decoder, bytes);
        try {
            ReplicationFrameDecoder.decode(bytes);
        } catch (PgOutputException expected) {
            // fine: a typed failure
        }
    }

    @Property(tries = 50_000)
    void mutatedValidMessagesDecodeOrFailWithPgOutputException(@ForAll Random random) {
        Sample<?> sample = PgOutputBytes.randomSample(random);
        assertThat(sample.decoder().decode(sample.bytes())).isEqualTo(sample.expected());

        byte[] bytes = sample.bytes();
        for (int mutations = 1 + random.nextInt(3); mutations > 0; mutations--) {
            bytes = mutate(bytes, random);
        }
        PgOutputDecoder decoder = new PgOutputDecoder();
        if (sample.needsStream() != (random.nextInt(10) == 0)) {
            PgOutputBytes.enterStream(decoder);
        }
        decodeOrFailTyped(decoder, bytes);
    }

    @Provide
    Arbitrary<byte[]> randomMessages() {
        Arbitrary<byte[]> anyBytes = Arbitraries.bytes().array(byte[].class).ofMaxSize(64);
        Arbitrary<Character> letters = Arbitraries.of(TYPE_LETTERS.chars().mapToObj(c -> (char) c).toArray(Character[]::new));
        Arbitrary<byte[]> typed = Combinators.combine(letters, anyBytes).as((letter, rest) -> {
            byte[] bytes = new byte[rest.length + 1];
            bytes[0] = (byte) letter.charValue();
            System.arraycopy(rest, 0, bytes, 1, rest.length);
            return bytes;
        });
        return Arbitraries.oneOf(anyBytes, typed, typed);
    }

    private static void decodeOrFailTyped(PgOutputDecoder decoder, byte[] bytes) {
        PgOutputMessage message;
        try {
            message = decoder.decode(bytes);
        } catch (PgOutputException expected) {
            assertThat(expected.offset()).isBetween(0, bytes.length);
            return;
        }
        assertThat(message).isNotNull();
        readEverything(message);
    }

    /** What a consumer would do with a decoded message must not fail either. */
    private static void readEverything(PgOutputMessage message) {
        assertThat(message.toString()).isNotNull();
        message.hashCode();
        switch (message.messageType()) {
            case INSERT -> readTuple(((Insert) message).newTuple());
            case UPDATE -> {
                Update update = (Update) message;
                readTuple(update.keyTuple());
                readTuple(update.oldTuple());
                readTuple(update.newTuple());
            }
            case DELETE -> {
                Delete delete = (Delete) message;
                readTuple(delete.keyTuple());
                readTuple(delete.oldTuple());
            }
            case MESSAGE -> ((LogicalMessage) message).detach().contentBytes();
            case BEGIN, COMMIT, ORIGIN, RELATION, TYPE, TRUNCATE, STREAM_START, STREAM_STOP, STREAM_COMMIT, STREAM_ABORT,
                    BEGIN_PREPARE, PREPARE, COMMIT_PREPARED, ROLLBACK_PREPARED, STREAM_PREPARE -> {
                // records of plain values: toString and hashCode above read them all
            }
        }
    }

    private static void readTuple(TupleData tuple) {
        if (tuple == null) {
            return;
        }
        for (int i = 0; i < tuple.size(); i++) {
            switch (tuple.kind(i)) {
                case TEXT -> tuple.text(i);
                case BINARY -> tuple.slice(i);
                case NULL, UNCHANGED_TOAST -> assertThat(tuple.hasValue(i)).isFalse();
            }
        }
        assertThat(tuple.detach()).isEqualTo(tuple);
    }

    private static byte[] mutate(byte[] bytes, Random random) {
        int length = bytes.length;
        switch (random.nextInt(6)) {
            case 0 -> { // flip a few bits
                byte[] copy = bytes.clone();
                for (int flips = 1 + random.nextInt(4); flips > 0 && length > 0; flips--) {
                    copy[random.nextInt(length)] ^= (byte) (1 << random.nextInt(8));
                }
                return copy;
            }
            case 1 -> { // truncate
                return Arrays.copyOf(bytes, length == 0 ? 0 : random.nextInt(length));
            }
            case 2 -> { // insert random bytes
                int at = random.nextInt(length + 1);
                byte[] inserted = new byte[1 + random.nextInt(8)];
                random.nextBytes(inserted);
                byte[] copy = new byte[length + inserted.length];
                System.arraycopy(bytes, 0, copy, 0, at);
                System.arraycopy(inserted, 0, copy, at, inserted.length);
                System.arraycopy(bytes, at, copy, at + inserted.length, length - at);
                return copy;
            }
            case 3 -> { // delete a range
                if (length == 0) {
                    return bytes;
                }
                int at = random.nextInt(length);
                int count = 1 + random.nextInt(Math.min(8, length - at));
                byte[] copy = new byte[length - count];
                System.arraycopy(bytes, 0, copy, 0, at);
                System.arraycopy(bytes, at + count, copy, at, length - at - count);
                return copy;
            }
            case 4 -> { // overwrite what may be a count or a length with a large value
                int width = random.nextBoolean() ? 2 : 4;
                if (length < width + 1) {
                    return bytes;
                }
                long value = random.nextInt(4) == 0 ? length + random.nextInt(3) - 1 : LARGE[random.nextInt(LARGE.length)];
                byte[] copy = bytes.clone();
                int at = 1 + random.nextInt(length - width);
                for (int i = width - 1; i >= 0; i--) {
                    copy[at + i] = (byte) value;
                    value >>>= 8;
                }
                return copy;
            }
            default -> { // trailing garbage
                byte[] copy = Arrays.copyOf(bytes, length + 1 + random.nextInt(4));
                return copy;
            }
        }
    }
}
