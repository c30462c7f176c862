package io.walhook.change;

import java.nio.charset.StandardCharsets;

/**
 * UTF-8 checks and decoding over byte ranges, without building Strings.
 *
 * <p>PostgreSQL sends text in the client encoding, UTF-8 for walhook, and a UTF-8 database only
 * stores valid UTF-8. A {@code SQL_ASCII} database stores any bytes, though, and those must not
 * reach a JSON document unchecked: malformed sequences become U+FFFD, as {@link String} would make
 * them.
 */
final class Utf8 {

    private Utf8() {
    }

    /** Whether {@code bytes[offset, offset + length)} is well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF). */
    static boolean isValid(byte[] bytes, int offset, int length) {
        int i = offset;
        int end = offset + length;
        while (i < end) {
            if (bytes[i] >= 0) {
                i++;
                continue;
            }
            int n = sequenceLength(bytes, i, end);
            if (n == 0) {
                return false;
            }
            i += n;
        }
        return true;
    }

    /**
     * Decodes {@code bytes[offset, offset + length)} into {@code chars} from index 0 and returns
     * the number of chars written; {@code chars} needs room for {@code length} chars (UTF-8 never
     * takes fewer bytes than UTF-16 takes chars, and each malformed byte becomes one U+FFFD).
     */
    static int decode(byte[] bytes, int offset, int length, char[] chars) {
        int i = offset;
        int end = offset + length;
        int j = 0;
        while (i < end) {
            int b = bytes[i];
            if (b >= 0) {
                chars[j++] = (char) b;
                i++;
                continue;
            }
            int n = sequenceLength(bytes, i, end);
            if (n == 0) {
                // Rare enough (SQL_ASCII databases only) to leave the replacement rules to the JDK.
                String text = new String(bytes, offset, length, StandardCharsets.UTF_8);
                text.getChars(0, text.length(), chars, 0);
                return text.length();
            }
            int cp = codePoint(bytes, i, n);
            if (n == 4) {
                chars[j++] = Character.highSurrogate(cp);
                chars[j++] = Character.lowSurrogate(cp);
            } else {
                chars[j++] = (char) cp;
            }
            i += n;
        }
        return j;
    }

    /** The length of the well-formed multi-byte sequence starting at {@code i}, or 0 when it is malformed. */
    private static int sequenceLength(byte[] bytes, int i, int end) {
        int b0 = bytes[i] & 0xFF;
        if (b0 >= 0xC2 && b0 <= 0xDF) {
            return i + 1 < end && continuation(bytes[i + 1]) ? 2 : 0;
        }
        if (b0 >= 0xE0 && b0 <= 0xEF) {
            if (i + 2 >= end || !continuation(bytes[i + 1]) || !continuation(bytes[i + 2])) {
                return 0;
            }
            int cp = codePoint(bytes, i, 3);
            return cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF) ? 0 : 3;
        }
        if (b0 >= 0xF0 && b0 <= 0xF4) {
            if (i + 3 >= end || !continuation(bytes[i + 1]) || !continuation(bytes[i + 2]) || !continuation(bytes[i + 3])) {
                return 0;
            }
            int cp = codePoint(bytes, i, 4);
            return cp < 0x10000 || cp > 0x10FFFF ? 0 : 4;
        }
        return 0;
    }

    private static boolean continuation(byte b) {
        return (b & 0xC0) == 0x80;
    }

    private static int codePoint(byte[] bytes, int i, int n) {
        return switch (n) {
            case 2 -> (bytes[i] & 0x1F) << 6 | (bytes[i + 1] & 0x3F);
            case 3 -> (bytes[i] & 0x0F) << 12 | (bytes[i + 1] & 0x3F) << 6 | (bytes[i + 2] & 0x3F);
            default -> (bytes[i] & 0x07) << 18 | (bytes[i + 1] & 0x3F) << 12 | (bytes[i + 2] & 0x3F) << 6
                    | (bytes[i + 3] & 0x3F);
        };
    }
}
