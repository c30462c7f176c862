package io.walhook.change;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.DataInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Test;

/**
 * The event writer's entry point stays above HotSpot's limit for inlining a hot callee
 * ({@code FreqInlineSize}, 325 bytes of bytecode on x86-64 and AArch64), so that every caller on
 * the routing path calls its one compiled copy (see {@link EventJsonWriter#write}). Read from the
 * class file, since that size is what the JIT compares.
 */
class EventJsonWriterShapeTest {

    private static final int FREQ_INLINE_SIZE = 325;

    @Test
    void theWriterIsOneMethodTooBigToBeInlinedIntoItsCallers() throws IOException {
        List<Integer> sizes = codeLengths(EventJsonWriter.class, "write",
                "(Lio/walhook/change/ChangeEvent;Ljava/util/function/Predicate;Lio/walhook/change/JsonWriter;)V");

        assertThat(sizes).hasSize(1);
        assertThat(sizes.get(0))
                .as("bytecode size of EventJsonWriter.write: at %d or less, the JIT inlines a copy of it into each hot caller",
                        FREQ_INLINE_SIZE)
                .isGreaterThan(FREQ_INLINE_SIZE);
    }

    @Test
    void theClassFileReaderMeasuresAKnownMethod() throws IOException {
        // digits(char[], int, int, int): a loop of a few instructions, nowhere near the limit
        List<Integer> sizes = codeLengths(EventJsonWriter.class, "digits", "([CIII)V");

        assertThat(sizes).singleElement().satisfies(size -> assertThat(size).isBetween(10, 100));
    }

    /** The code_length of each method of {@code type} with this name and descriptor (JVMS 4.7.3). */
    private static List<Integer> codeLengths(Class<?> type, String name, String descriptor) throws IOException {
        try (InputStream in = type.getResourceAsStream(type.getSimpleName() + ".class")) {
            DataInputStream data = new DataInputStream(in);
            assertThat(data.readInt()).isEqualTo(0xCAFEBABE);
            data.readUnsignedShort(); // minor
            data.readUnsignedShort(); // major
            int count = data.readUnsignedShort();
            String[] utf8 = new String[count];
            for (int i = 1; i < count; i++) {
                int tag = data.readUnsignedByte();
                switch (tag) {
                    case 1 -> utf8[i] = data.readUTF();
                    case 7, 8, 16, 19, 20 -> data.skipNBytes(2);
                    case 15 -> data.skipNBytes(3);
                    case 3, 4, 9, 10, 11, 12, 17, 18 -> data.skipNBytes(4);
                    case 5, 6 -> {
                        data.skipNBytes(8);
                        i++; // takes two entries
                    }
                    default -> throw new IOException("unknown constant pool tag " + tag + " at entry " + i);
                }
            }
            data.skipNBytes(6); // access flags, this class, super class
            data.skipNBytes(2 * data.readUnsignedShort()); // interfaces
            skipMembers(data); // fields
            List<Integer> lengths = new ArrayList<>();
            int methods = data.readUnsignedShort();
            for (int m = 0; m < methods; m++) {
                data.skipNBytes(2);
                String methodName = utf8[data.readUnsignedShort()];
                String methodDescriptor = utf8[data.readUnsignedShort()];
                int attributes = data.readUnsignedShort();
                for (int a = 0; a < attributes; a++) {
                    String attribute = utf8[data.readUnsignedShort()];
                    int length = data.readInt();
                    if (attribute.equals("Code") && methodName.equals(name) && methodDescriptor.equals(descriptor)) {
                        data.skipNBytes(4); // max_stack, max_locals
                        lengths.add(data.readInt());
                        data.skipNBytes(length - 8);
                    } else {
                        data.skipNBytes(length);
                    }
                }
            }
            return lengths;
        }
    }

    private static void skipMembers(DataInputStream data) throws IOException {
        int members = data.readUnsignedShort();
        for (int m = 0; m < members; m++) {
            data.skipNBytes(6);
            int attributes = data.readUnsignedShort();
            for (int a = 0; a < attributes; a++) {
                data.skipNBytes(2);
                data.skipNBytes(data.readInt());
            }
        }
    }
}
