package io.walhook.change;

/**
 * How the text of one PostgreSQL value becomes JSON (docs/events.md, "Values"). Each kind
 * writes from chars so that the same rule serves a whole column and an element of an array; the
 * column converters in {@link ValueConverters} add byte-level shortcuts in front where they pay.
 *
 * <p>A text that does not have the shape the kind expects is written as a JSON string of itself
 * rather than failing the event: PostgreSQL's special values ({@code NaN}, {@code Infinity},
 * {@code infinity}) take that route on purpose, and a surprise (a session setting that did not
 * take) still yields valid JSON that carries the server's text.
 */
enum ValueKind {

    /** int2, int4, int8, oid, float4, float8, numeric: the text as a JSON number, every digit kept. */
    NUMBER {
        @Override
        void write(JsonWriter json, char[] text, int offset, int length, ConverterBuffers scratch) {
            if (!isJsonNumber(text, offset, length)) {
                // NaN, Infinity, -Infinity: JSON has no such numbers
                json.string(text, offset, length);
            } else if (length == 2 && text[offset] == '-' && text[offset + 1] == '0') {
                // float8 '-0': as "-0" a JSON reader would see the integer 0 and lose the sign
                json.number(MINUS_ZERO, 0, MINUS_ZERO.length);
            } else {
                json.number(text, offset, length);
            }
        }

        @Override
        Object value(char[] text, int offset, int length, ConverterBuffers scratch) {
            if (!isJsonNumber(text, offset, length)) {
                return new String(text, offset, length);
            }
            if (length == 2 && text[offset] == '-' && text[offset + 1] == '0') {
                return -0.0d; // written as -0.0
            }
            String number = new String(text, offset, length);
            for (int p = offset; p < offset + length; p++) {
                if (text[p] == '.' || text[p] == 'e' || text[p] == 'E') {
                    return Double.parseDouble(number);
                }
            }
            // an integer: a long when it fits (18 digits always do), else a double as a JSON reader makes it
            if (length <= 18) {
                return Long.parseLong(number);
            }
            try {
                return Long.parseLong(number);
            } catch (NumberFormatException beyondLong) {
                return Double.parseDouble(number);
            }
        }
    },

    /** bool: {@code t} and {@code f}. */
    BOOLEAN {
        @Override
        void write(JsonWriter json, char[] text, int offset, int length, ConverterBuffers scratch) {
            if (length == 1 && text[offset] == 't') {
                json.bool(true);
            } else if (length == 1 && text[offset] == 'f') {
                json.bool(false);
            } else {
                json.string(text, offset, length);
            }
        }

        @Override
        Object value(char[] text, int offset, int length, ConverterBuffers scratch) {
            if (length == 1 && text[offset] == 't') {
                return Boolean.TRUE;
            } else if (length == 1 && text[offset] == 'f') {
                return Boolean.FALSE;
            }
            return new String(text, offset, length);
        }
    },

    /** json, jsonb: already JSON (the server validated it on input), embedded as it is. */
    JSON {
        @Override
        void write(JsonWriter json, char[] text, int offset, int length, ConverterBuffers scratch) {
            json.rawValue(text, offset, length);
        }

        @Override
        Object value(char[] text, int offset, int length, ConverterBuffers scratch) {
            throw new UnsupportedOperationException("a JSON value is no scalar: read it from the JSON written");
        }
    },

    /** bytea: hex ({@code \x0a0b}, walhook's {@code bytea_output}) or escape format, as standard base64 with padding. */
    BYTEA {
        @Override
        void write(JsonWriter json, char[] text, int offset, int length, ConverterBuffers scratch) {
            byte[] bytes = scratch.bytes(length);
            int n = decodeBytea(text, offset, length, bytes);
            if (n < 0) {
                json.string(text, offset, length);
            } else {
                json.base64(bytes, 0, n);
            }
        }

        @Override
        Object value(char[] text, int offset, int length, ConverterBuffers scratch) {
            byte[] bytes = scratch.bytes(length);
            int n = decodeBytea(text, offset, length, bytes);
            return n < 0 ? new String(text, offset, length) : base64(bytes, n);
        }
    },

    /** timestamptz: ISO 8601 in UTC with {@code Z}; see {@link PgDateTimes}. */
    TIMESTAMPTZ {
        @Override
        void write(JsonWriter json, char[] text, int offset, int length, ConverterBuffers scratch) {
            writeDateTime(json, text, offset, length, PgDateTimes.timestampWithZone(text, offset, length, scratch.dateTime),
                    scratch);
        }

        @Override
        Object value(char[] text, int offset, int length, ConverterBuffers scratch) {
            return dateTime(text, offset, length, PgDateTimes.timestampWithZone(text, offset, length, scratch.dateTime),
                    scratch);
        }
    },

    /** timestamp: ISO 8601 local date-time. */
    TIMESTAMP {
        @Override
        void write(JsonWriter json, char[] text, int offset, int length, ConverterBuffers scratch) {
            writeDateTime(json, text, offset, length, PgDateTimes.timestamp(text, offset, length, scratch.dateTime), scratch);
        }

        @Override
        Object value(char[] text, int offset, int length, ConverterBuffers scratch) {
            return dateTime(text, offset, length, PgDateTimes.timestamp(text, offset, length, scratch.dateTime), scratch);
        }
    },

    /** date: ISO 8601 calendar date. */
    DATE {
        @Override
        void write(JsonWriter json, char[] text, int offset, int length, ConverterBuffers scratch) {
            writeDateTime(json, text, offset, length, PgDateTimes.date(text, offset, length, scratch.dateTime), scratch);
        }

        @Override
        Object value(char[] text, int offset, int length, ConverterBuffers scratch) {
            return dateTime(text, offset, length, PgDateTimes.date(text, offset, length, scratch.dateTime), scratch);
        }
    },

    /** Every other type (text, uuid, time, interval, money, enums, ranges, composites...): the text in a JSON string. */
    STRING {
        @Override
        void write(JsonWriter json, char[] text, int offset, int length, ConverterBuffers scratch) {
            json.string(text, offset, length);
        }

        @Override
        Object value(char[] text, int offset, int length, ConverterBuffers scratch) {
            return new String(text, offset, length);
        }
    };

    private static final char[] MINUS_ZERO = {'-', '0', '.', '0'};

    /**
     * Writes the JSON value of one PostgreSQL text value held in {@code text[offset, offset + length)}.
     * May use {@code scratch}'s byte and date/time buffers, never its char buffer (which may hold
     * {@code text}).
     */
    abstract void write(JsonWriter json, char[] text, int offset, int length, ConverterBuffers scratch);

    /**
     * The value {@link #write} writes as a reader of that JSON gets it back (String, Long, Double or
     * Boolean), without writing it; same buffers as {@link #write}. Not for {@link #JSON}, whose
     * values are documents.
     */
    abstract Object value(char[] text, int offset, int length, ConverterBuffers scratch);

    private static String dateTime(char[] text, int offset, int length, int converted, ConverterBuffers scratch) {
        return converted < 0 ? new String(text, offset, length) : new String(scratch.dateTime, 0, converted);
    }

    /** What {@link JsonWriter#base64} writes: standard base64 with padding, no line breaks. */
    static String base64(byte[] bytes, int length) {
        return java.util.Base64.getEncoder().encodeToString(java.util.Arrays.copyOf(bytes, length));
    }

    private static void writeDateTime(JsonWriter json, char[] text, int offset, int length, int converted,
            ConverterBuffers scratch) {
        if (converted < 0) {
            json.string(text, offset, length);
        } else {
            json.string(scratch.dateTime, 0, converted);
        }
    }

    /** RFC 8259: {@code -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?}. */
    static boolean isJsonNumber(char[] text, int offset, int length) {
        int end = offset + length;
        int p = offset;
        if (p < end && text[p] == '-') {
            p++;
        }
        if (p >= end) {
            return false;
        }
        if (text[p] == '0') {
            p++;
        } else if (text[p] >= '1' && text[p] <= '9') {
            while (p < end && isDigit(text[p])) {
                p++;
            }
        } else {
            return false;
        }
        if (p < end && text[p] == '.') {
            int digits = ++p;
            while (p < end && isDigit(text[p])) {
                p++;
            }
            if (p == digits) {
                return false;
            }
        }
        if (p < end && (text[p] == 'e' || text[p] == 'E')) {
            p++;
            if (p < end && (text[p] == '+' || text[p] == '-')) {
                p++;
            }
            int digits = p;
            while (p < end && isDigit(text[p])) {
                p++;
            }
            if (p == digits) {
                return false;
            }
        }
        return p == end;
    }

    private static boolean isDigit(char c) {
        return c >= '0' && c <= '9';
    }

    /**
     * Decodes bytea text output into {@code out}; returns the byte count or -1 when the text is
     * neither form. Hex: {@code \x} then two hex digits per byte. Escape: {@code \\} for a
     * backslash, {@code \ooo} (octal) for a non-printable byte, any other char stands for itself.
     */
    static int decodeBytea(char[] text, int offset, int length, byte[] out) {
        int end = offset + length;
        if (length >= 2 && text[offset] == '\\' && text[offset + 1] == 'x') {
            if ((length & 1) != 0) {
                return -1;
            }
            int n = 0;
            for (int p = offset + 2; p < end; p += 2) {
                int hi = hexDigit(text[p]);
                int lo = hexDigit(text[p + 1]);
                if (hi < 0 || lo < 0) {
                    return -1;
                }
                out[n++] = (byte) (hi << 4 | lo);
            }
            return n;
        }
        int n = 0;
        for (int p = offset; p < end; p++) {
            char c = text[p];
            if (c > 0xFF) {
                return -1;
            }
            if (c != '\\') {
                out[n++] = (byte) c;
            } else if (p + 1 < end && text[p + 1] == '\\') {
                out[n++] = '\\';
                p++;
            } else if (isOctal(text, p + 1, end)) {
                out[n++] = (byte) ((text[p + 1] - '0') << 6 | (text[p + 2] - '0') << 3 | (text[p + 3] - '0'));
                p += 3;
            } else {
                return -1;
            }
        }
        return n;
    }

    /** Only ASCII hex digits: {@link Character#digit} would also accept full-width and other scripts' digits. */
    static int hexDigit(int c) {
        if (c >= '0' && c <= '9') {
            return c - '0';
        }
        if (c >= 'a' && c <= 'f') {
            return c - 'a' + 10;
        }
        if (c >= 'A' && c <= 'F') {
            return c - 'A' + 10;
        }
        return -1;
    }

    private static boolean isOctal(char[] text, int p, int end) {
        if (p + 3 > end) {
            return false;
        }
        return text[p] >= '0' && text[p] <= '3' && text[p + 1] >= '0' && text[p + 1] <= '7' && text[p + 2] >= '0'
                && text[p + 2] <= '7';
    }
}
