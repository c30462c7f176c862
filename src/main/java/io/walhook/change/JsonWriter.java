package io.walhook.change;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;

import io.walhook.pgoutput.Lsn;

/**
 * UTF-8 JSON written into a growable byte array: what events, CloudEvents and column values need of
 * a JSON generator and nothing more. It writes what Jackson's byte-level generator wrote for walhook
 * before it, byte for byte: the same escapes ({@code \"}, {@code \\}, {@code \b \t \n \f \r}, other
 * controls as <code>&#92;u00XX</code> in upper-case hex, nothing else escaped) and characters beyond the BMP
 * as raw four-byte UTF-8.
 *
 * <p>Why not Jackson: an event is a few hundred bytes written by one thread, and the generator's
 * context objects, write checks and buffer hand-off cost more than the bytes; on a 2-core machine
 * its large methods also kept the JIT compiler busy for seconds of a backlog drain.
 *
 * <p>Commas come from the nesting: each open object or array remembers whether it holds a value
 * yet, and a value right after a field name takes none. The caller keeps names and values in
 * turn inside objects; values at the root follow each other with no separator. Not thread-safe:
 * one buffer per writing thread, reused with {@link #reset}.
 */
public final class JsonWriter {

    /** Deepest nesting: PostgreSQL arrays have at most 6 dimensions, events nest 3 levels. */
    private static final int MAX_DEPTH = 62;
    private static final byte[] HEX = "0123456789ABCDEF".getBytes(StandardCharsets.US_ASCII);
    private static final byte[] BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
            .getBytes(StandardCharsets.US_ASCII);
    private static final byte[] NULL = {'n', 'u', 'l', 'l'};
    private static final byte[] TRUE = {'t', 'r', 'u', 'e'};
    private static final byte[] FALSE = {'f', 'a', 'l', 's', 'e'};
    /** Per ASCII byte: 0 copied as it is, else the letter of its short escape, or 'u' for <code>&#92;u00XX</code>. */
    private static final byte[] ESCAPES = new byte[128];

    static {
        for (int c = 0; c < 0x20; c++) {
            ESCAPES[c] = 'u';
        }
        ESCAPES['"'] = '"';
        ESCAPES['\\'] = '\\';
        ESCAPES['\b'] = 'b';
        ESCAPES['\t'] = 't';
        ESCAPES['\n'] = 'n';
        ESCAPES['\f'] = 'f';
        ESCAPES['\r'] = 'r';
    }

    private byte[] bytes;
    private int size;
    /** Bit d: the container open at depth d (1 is the outermost) holds a value already. */
    private long filled;
    private int depth;
    /** A field name was just written: its value takes no comma. */
    private boolean named;

    public JsonWriter(int capacity) {
        bytes = new byte[Math.max(16, capacity)];
    }

    public JsonWriter() {
        this(512);
    }

    /** Empties the buffer for the next document (the memory is kept). */
    public JsonWriter reset() {
        size = 0;
        depth = 0;
        filled = 0;
        named = false;
        return this;
    }

    public int size() {
        return size;
    }

    /** Bytes held: reuse a buffer that grew large for one document only at a cost in memory. */
    public int capacity() {
        return bytes.length;
    }

    /** A copy of what was written. */
    public byte[] toByteArray() {
        return Arrays.copyOf(bytes, size);
    }

    /**
     * The fields written so far into the object this buffer began with, without its {@code '{'}:
     * encoded once, then written again and again with {@link #fields}.
     */
    public byte[] toFieldBytes() {
        if (size == 0 || bytes[0] != '{' || depth != 1 || named) {
            throw new IllegalStateException("not the fields of one open object: " + this);
        }
        return Arrays.copyOfRange(bytes, 1, size);
    }

    @Override
    public String toString() {
        return new String(bytes, 0, size, StandardCharsets.UTF_8);
    }

    // --- structure -------------------------------------------------------------------------

    public JsonWriter startObject() {
        return open('{');
    }

    public JsonWriter endObject() {
        return close('}');
    }

    public JsonWriter startArray() {
        return open('[');
    }

    public JsonWriter endArray() {
        return close(']');
    }

    private JsonWriter open(char bracket) {
        if (depth == MAX_DEPTH) {
            throw new IllegalStateException("JSON nested deeper than " + MAX_DEPTH + " levels");
        }
        beforeValue();
        ensure(1);
        bytes[size++] = (byte) bracket;
        depth++;
        filled &= ~(1L << depth);
        return this;
    }

    private JsonWriter close(char bracket) {
        if (depth == 0 || named) {
            throw new IllegalStateException(named ? "a field name without its value before '" + bracket + "'"
                    : "'" + bracket + "' without an open object or array");
        }
        depth--;
        ensure(1);
        bytes[size++] = (byte) bracket;
        return this;
    }

    /** The separator a value needs: none after a name or at the root, a comma after a sibling. */
    private void beforeValue() {
        if (named) {
            named = false;
        } else if (depth > 0) {
            separate();
        }
    }

    private void separate() {
        long bit = 1L << depth;
        if ((filled & bit) != 0) {
            ensure(1);
            bytes[size++] = ',';
        } else {
            filled |= bit;
        }
    }

    // --- names -----------------------------------------------------------------------------

    /** A field name encoded once by {@link #encodeName}: {@code "name":}. */
    public JsonWriter name(byte[] encodedName) {
        separate();
        named = true;
        return append(encodedName, 0, encodedName.length);
    }

    /**
     * Whole {@code "name":value} pairs encoded once (by a buffer of their own), written into the
     * open object as they are: a comma first when the object holds a value already.
     */
    public JsonWriter fields(byte[] encodedFields) {
        separate();
        return append(encodedFields, 0, encodedFields.length);
    }

    public JsonWriter name(String name) {
        separate();
        writeQuoted(name);
        ensure(1);
        bytes[size++] = ':';
        named = true;
        return this;
    }

    /** {@code "name":} as {@link #name(String)} writes it, to write again and again with {@link #name(byte[])}. */
    public static byte[] encodeName(String name) {
        JsonWriter json = new JsonWriter(name.length() + 8);
        json.writeQuoted(name);
        json.ensure(1);
        json.bytes[json.size++] = ':';
        return json.toByteArray();
    }

    /** A JSON string encoded once, to write with {@link #rawValue(byte[])}. */
    public static byte[] encodeString(String text) {
        JsonWriter json = new JsonWriter(text.length() + 8);
        json.writeQuoted(text);
        return json.toByteArray();
    }

    // --- values ----------------------------------------------------------------------------

    public JsonWriter nullValue() {
        beforeValue();
        return append(NULL, 0, NULL.length);
    }

    public JsonWriter bool(boolean value) {
        beforeValue();
        byte[] text = value ? TRUE : FALSE;
        return append(text, 0, text.length);
    }

    public JsonWriter number(long value) {
        beforeValue();
        ensure(20);
        if (value == Long.MIN_VALUE) {
            return appendAscii("-9223372036854775808");
        }
        if (value < 0) {
            bytes[size++] = '-';
            value = -value;
        }
        int digits = 1;
        for (long v = value; v >= 10; v /= 10) {
            digits++;
        }
        // backwards until the value runs out: not a counted loop, whose limit check the JIT
        // speculated on and then deoptimized (and recompiled every method this was inlined into)
        int p = size + digits;
        do {
            bytes[--p] = (byte) ('0' + value % 10);
            value /= 10;
        } while (value != 0);
        size += digits;
        return this;
    }

    /** A number as text the caller has checked to be a JSON number (ASCII). */
    public JsonWriter number(char[] text, int offset, int length) {
        beforeValue();
        ensure(length);
        byte[] out = bytes;
        int p = size;
        for (int i = offset; i < offset + length; i++) {
            out[p++] = (byte) text[i];
        }
        size = p;
        return this;
    }

    /** An LSN as a string in PostgreSQL's form ({@code "16/B374D848"}): hex digits and a slash, nothing to escape. */
    public JsonWriter lsn(Lsn lsn) {
        beforeValue();
        ensure(19);
        bytes[size++] = '"';
        size = lsn.writeText(bytes, size);
        bytes[size++] = '"';
        return this;
    }

    /** A string, or {@code null} for a null {@code text}. */
    public JsonWriter string(String text) {
        if (text == null) {
            return nullValue();
        }
        beforeValue();
        writeQuoted(text);
        return this;
    }

    public JsonWriter string(char[] text, int offset, int length) {
        beforeValue();
        ensure(length + 2);
        bytes[size++] = '"';
        writeChars(text, offset, length, true);
        ensure(1);
        bytes[size++] = '"';
        return this;
    }

    /** A string from well-formed UTF-8 ({@link Utf8#isValid}): ASCII is escaped, the rest copied as it is. */
    public JsonWriter utf8String(byte[] utf8, int offset, int length) {
        beforeValue();
        ensure(length + 2);
        bytes[size++] = '"';
        int end = offset + length;
        int run = offset;
        for (int i = offset; i < end; i++) {
            int b = utf8[i];
            if (b >= 0 && ESCAPES[b] != 0) {
                append(utf8, run, i - run);
                escape(b);
                run = i + 1;
            }
        }
        append(utf8, run, end - run);
        ensure(1);
        bytes[size++] = '"';
        return this;
    }

    /** A JSON value already written (json/jsonb, a quoted string from {@link #encodeString}), copied as it is. */
    public JsonWriter rawValue(byte[] json) {
        return rawValue(json, 0, json.length);
    }

    public JsonWriter rawValue(byte[] json, int offset, int length) {
        beforeValue();
        return append(json, offset, length);
    }

    /** A JSON value already written, as chars: encoded to UTF-8, nothing escaped. */
    public JsonWriter rawValue(char[] json, int offset, int length) {
        beforeValue();
        ensure(length);
        writeChars(json, offset, length, false);
        return this;
    }

    /** Bytes as a string of standard base64 with padding and no line breaks (RFC 4648 section 4). */
    public JsonWriter base64(byte[] data, int offset, int length) {
        beforeValue();
        ensure((length + 2) / 3 * 4 + 2);
        byte[] out = bytes;
        int p = size;
        out[p++] = '"';
        int end = offset + length;
        int i = offset;
        for (; i + 3 <= end; i += 3) {
            int v = (data[i] & 0xFF) << 16 | (data[i + 1] & 0xFF) << 8 | data[i + 2] & 0xFF;
            out[p++] = BASE64[v >>> 18];
            out[p++] = BASE64[v >>> 12 & 0x3F];
            out[p++] = BASE64[v >>> 6 & 0x3F];
            out[p++] = BASE64[v & 0x3F];
        }
        if (end - i == 1) {
            int v = (data[i] & 0xFF) << 16;
            out[p++] = BASE64[v >>> 18];
            out[p++] = BASE64[v >>> 12 & 0x3F];
            out[p++] = '=';
            out[p++] = '=';
        } else if (end - i == 2) {
            int v = (data[i] & 0xFF) << 16 | (data[i + 1] & 0xFF) << 8;
            out[p++] = BASE64[v >>> 18];
            out[p++] = BASE64[v >>> 12 & 0x3F];
            out[p++] = BASE64[v >>> 6 & 0x3F];
            out[p++] = '=';
        }
        out[p++] = '"';
        size = p;
        return this;
    }

    // --- bytes -----------------------------------------------------------------------------

    private void writeQuoted(String text) {
        int length = text.length();
        ensure(length + 2);
        byte[] out = bytes;
        int p = size;
        out[p++] = '"';
        int i = 0;
        // the common case: ASCII that needs no escape, one byte per char (room ensured above)
        for (; i < length; i++) {
            char c = text.charAt(i);
            if (c >= 0x80 || ESCAPES[c] != 0) {
                break;
            }
            out[p++] = (byte) c;
        }
        size = p;
        if (i < length) {
            char[] rest = text.substring(i).toCharArray();
            writeChars(rest, 0, rest.length, true);
        }
        ensure(1);
        bytes[size++] = '"';
    }

    /**
     * Chars as UTF-8, escaped when {@code escape} (string content) and as they are otherwise (raw
     * JSON). A surrogate pair becomes one four-byte sequence; a lone surrogate, which no well-formed
     * text holds, becomes U+FFFD.
     */
    private void writeChars(char[] text, int offset, int length, boolean escape) {
        int end = offset + length;
        int i = offset;
        // the common case first: ASCII that needs no escape, one byte per char
        ensure(length);
        byte[] out = bytes;
        int p = size;
        for (; i < end; i++) {
            char c = text[i];
            if (c >= 0x80 || escape && ESCAPES[c] != 0) {
                break;
            }
            out[p++] = (byte) c;
        }
        size = p;
        for (; i < end; i++) {
            char c = text[i];
            if (c < 0x80) {
                if (escape && ESCAPES[c] != 0) {
                    escape(c);
                } else {
                    ensure(1);
                    bytes[size++] = (byte) c;
                }
            } else if (c < 0x800) {
                ensure(2);
                bytes[size++] = (byte) (0xC0 | c >> 6);
                bytes[size++] = (byte) (0x80 | c & 0x3F);
            } else if (Character.isHighSurrogate(c) && i + 1 < end && Character.isLowSurrogate(text[i + 1])) {
                int cp = Character.toCodePoint(c, text[++i]);
                ensure(4);
                bytes[size++] = (byte) (0xF0 | cp >> 18);
                bytes[size++] = (byte) (0x80 | cp >> 12 & 0x3F);
                bytes[size++] = (byte) (0x80 | cp >> 6 & 0x3F);
                bytes[size++] = (byte) (0x80 | cp & 0x3F);
            } else {
                char bmp = Character.isSurrogate(c) ? '\uFFFD' : c;
                ensure(3);
                bytes[size++] = (byte) (0xE0 | bmp >> 12);
                bytes[size++] = (byte) (0x80 | bmp >> 6 & 0x3F);
                bytes[size++] = (byte) (0x80 | bmp & 0x3F);
            }
        }
    }

    private void escape(int c) {
        ensure(6);
        byte letter = ESCAPES[c];
        bytes[size++] = '\\';
        if (letter != 'u') {
            bytes[size++] = letter;
            return;
        }
        bytes[size++] = 'u';
        bytes[size++] = '0';
        bytes[size++] = '0';
        bytes[size++] = HEX[c >> 4];
        bytes[size++] = HEX[c & 0xF];
    }

    private JsonWriter appendAscii(String text) {
        ensure(text.length());
        for (int i = 0; i < text.length(); i++) {
            bytes[size++] = (byte) text.charAt(i);
        }
        return this;
    }

    private JsonWriter append(byte[] source, int offset, int length) {
        ensure(length);
        System.arraycopy(source, offset, bytes, size, length);
        size += length;
        return this;
    }

    private void ensure(int more) {
        if (size + more > bytes.length) {
            bytes = Arrays.copyOf(bytes, Math.max(bytes.length * 2, size + more));
        }
    }
}
