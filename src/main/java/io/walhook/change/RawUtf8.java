package io.walhook.change;

import java.io.IOException;
import java.io.OutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

import com.fasterxml.jackson.core.SerializableString;

/**
 * A window onto UTF-8 bytes that already form a JSON value, handed to
 * {@link com.fasterxml.jackson.core.JsonGenerator#writeRawValue(SerializableString)}.
 *
 * <p>Jackson's byte-level generator copies a {@code SerializableString}'s unquoted UTF-8 straight
 * into its output buffer; every other raw-value method takes chars, which would cost a decode and a
 * re-encode of each json/jsonb value. The window is mutable and reused, so it is only valid during
 * the call it is passed to. Only the unquoted forms make sense for a raw value; the quoted ones
 * throw.
 */
final class RawUtf8 implements SerializableString {

    private byte[] bytes;
    private int offset;
    private int length;

    RawUtf8 window(byte[] bytes, int offset, int length) {
        this.bytes = bytes;
        this.offset = offset;
        this.length = length;
        return this;
    }

    @Override
    public String getValue() {
        return new String(bytes, offset, length, StandardCharsets.UTF_8);
    }

    @Override
    public int charLength() {
        return getValue().length();
    }

    @Override
    public byte[] asUnquotedUTF8() {
        return Arrays.copyOfRange(bytes, offset, offset + length);
    }

    @Override
    public int appendUnquotedUTF8(byte[] buffer, int at) {
        if (at + length > buffer.length) {
            return -1;
        }
        System.arraycopy(bytes, offset, buffer, at, length);
        return length;
    }

    @Override
    public int appendUnquoted(char[] buffer, int at) {
        String value = getValue();
        if (at + value.length() > buffer.length) {
            return -1;
        }
        value.getChars(0, value.length(), buffer, at);
        return value.length();
    }

    @Override
    public int writeUnquotedUTF8(OutputStream out) throws IOException {
        out.write(bytes, offset, length);
        return length;
    }

    @Override
    public int putUnquotedUTF8(ByteBuffer buffer) {
        if (length > buffer.remaining()) {
            return -1;
        }
        buffer.put(bytes, offset, length);
        return length;
    }

    @Override
    public char[] asQuotedChars() {
        throw quoted();
    }

    @Override
    public byte[] asQuotedUTF8() {
        throw quoted();
    }

    @Override
    public int appendQuotedUTF8(byte[] buffer, int at) {
        throw quoted();
    }

    @Override
    public int appendQuoted(char[] buffer, int at) {
        throw quoted();
    }

    @Override
    public int writeQuotedUTF8(OutputStream out) {
        throw quoted();
    }

    @Override
    public int putQuotedUTF8(ByteBuffer buffer) {
        throw quoted();
    }

    private static UnsupportedOperationException quoted() {
        return new UnsupportedOperationException("a raw JSON value is never written as a quoted string");
    }

    @Override
    public String toString() {
        return "RawUtf8[" + length + " bytes]";
    }
}
