package io.walhook.change;

import java.util.ArrayList;
import java.util.EnumMap;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.function.LongFunction;

import io.walhook.pgoutput.ColumnKind;
import io.walhook.pgoutput.PgOutputMessage;
import io.walhook.pgoutput.TupleData;

/**
 * Chooses the {@link ValueConverter} of each column from its type, once per Relation message, and
 * owns the scratch buffers those converters share.
 *
 * <p><b>Which rule.</b> A built-in type (OID below 10000) is looked up by OID. A user type is
 * looked up through its Type message: pgoutput describes a domain by its base type's namespace and
 * name, so a domain over {@code int4} (or {@code int4[]}) follows the {@code int4} (or
 * {@code int4[]}) rule. Other user types (enums, composites, extension types such as
 * {@code citext} or {@code hstore}) are strings, and a user type whose name starts with {@code _}
 * (PostgreSQL's name for an array type) is an array of strings: the Type message does not say
 * what the elements are, so an array of a domain over {@code int4} has string elements too.
 *
 * <p><b>Threads.</b> One {@code ValueConverters} per thread that writes events: the converters it
 * returns share its buffers (one set of buffers instead of one per column of every table) and so
 * are confined to that thread. Nothing here is static or thread-local.
 *
 * <p><b>Input.</b> Values are the text output of each type under the settings walhook pins on the
 * replication session ({@code DateStyle=ISO}, {@code IntervalStyle=postgres},
 * {@code extra_float_digits=3}, {@code bytea_output=hex}, {@code TimeZone=UTC}). A value that does
 * not match its rule's expected shape is written as a JSON string of its text, never as broken JSON.
 */
public final class ValueConverters {

    private static final BuiltinTypes.Rule STRING_RULE = BuiltinTypes.Rule.scalar(ValueKind.STRING);
    private static final BuiltinTypes.Rule STRING_ARRAY_RULE = BuiltinTypes.Rule.arrayOf(ValueKind.STRING, ',');

    private final ConverterBuffers scratch = new ConverterBuffers();
    private final Map<ValueKind, ValueConverter> scalars = new EnumMap<>(ValueKind.class);
    private final Map<BuiltinTypes.Rule, ValueConverter> arrays = new HashMap<>();

    /** A fresh set of converters with its own buffers, for one thread. */
    /**
     * The session settings the converters assume, as a connection's {@code options}: every session
     * whose text values become events (the stream's, backfills') is opened with them
     * (docs/protocol.md section 1).
     */
    public static final String SESSION_OPTIONS = "-c datestyle=ISO -c intervalstyle=postgres -c extra_float_digits=3"
            + " -c bytea_output=hex -c TimeZone=UTC -c lc_monetary=C";

    /**
     * Sets the time zone of a session opened with {@link #SESSION_OPTIONS} to UTC, which the
     * options alone do not: pgjdbc sends the JVM's zone as a startup setting, applied after them.
     * A timestamptz was printed in the zone of walhook's JVM: values the converters bring to UTC
     * anyway, but a backfill's row key (its read events' ids) and the stream's key of the same row,
     * hashed as printed, differed from one walhook to another in another zone.
     */
    public static void pinTimeZone(java.sql.Connection session) throws java.sql.SQLException {
        try (java.sql.Statement s = session.createStatement()) {
            s.execute("SET TimeZone = 'UTC'");
        }
    }

    public ValueConverters() {
        for (ValueKind kind : ValueKind.values()) {
            scalars.put(kind, switch (kind) {
                case STRING -> new StringConverter(scratch);
                case JSON -> new JsonConverter(scratch);
                case BYTEA -> new ByteaConverter(scratch);
                case NUMBER, BOOLEAN, TIMESTAMPTZ, TIMESTAMP, DATE -> new TextConverter(kind, scratch);
            });
        }
    }

    /**
     * The converter for a column of this type.
     *
     * @param typeOid the column's type OID (unsigned)
     * @param typeNamespace the namespace from the type's Type message ("" or {@code pg_catalog} for a
     *     built-in base type), or {@code null} when there is none (built-in types)
     * @param typeName the name from the type's Type message, or {@code null} when there is none
     */
    public ValueConverter forType(long typeOid, String typeNamespace, String typeName) {
        BuiltinTypes.Rule rule = ruleOf(typeOid, typeNamespace, typeName);
        if (!rule.array()) {
            return scalars.get(rule.kind());
        }
        return arrays.computeIfAbsent(rule, r -> new ArrayConverter(r.kind(), r.delimiter(), scratch));
    }

    /**
     * The converter for one column of a Relation message.
     *
     * @param userTypes the latest Type message by type OID, as received on this stream; consulted
     *     only for OIDs of 10000 and above. A type it does not know (pgoutput sends every one before
     *     the Relation that uses it, so only a lost message can cause this) makes the column a string.
     */
    public ValueConverter forColumn(PgOutputMessage.Relation.Column column,
            LongFunction<PgOutputMessage.Type> userTypes) {
        long oid = column.typeOid();
        if (oid < BuiltinTypes.FIRST_NON_BUILTIN_OID) {
            return forType(oid, null, null);
        }
        PgOutputMessage.Type type = userTypes.apply(oid);
        if (type == null) {
            return scalars.get(ValueKind.STRING);
        }
        return forType(oid, type.effectiveNamespace(), type.typeName());
    }

    /** The converters of a Relation's columns, in tuple order; see {@link #forColumn}. */
    public List<ValueConverter> forRelation(PgOutputMessage.Relation relation,
            LongFunction<PgOutputMessage.Type> userTypes) {
        List<ValueConverter> converters = new ArrayList<>(relation.columns().size());
        for (PgOutputMessage.Relation.Column column : relation.columns()) {
            converters.add(forColumn(column, userTypes));
        }
        return List.copyOf(converters);
    }

    static BuiltinTypes.Rule ruleOf(long typeOid, String typeNamespace, String typeName) {
        if (typeOid >= 0 && typeOid < BuiltinTypes.FIRST_NON_BUILTIN_OID) {
            BuiltinTypes.Rule rule = BuiltinTypes.byOid(typeOid);
            if (rule != null) {
                return rule;
            }
        }
        if (typeName == null) {
            return STRING_RULE;
        }
        boolean catalog = typeNamespace == null || typeNamespace.isEmpty()
                || PgOutputMessage.PG_CATALOG.equals(typeNamespace);
        if (catalog) {
            BuiltinTypes.Rule rule = BuiltinTypes.byName(typeName);
            if (rule != null) {
                return rule;
            }
        }
        return typeName.startsWith("_") ? STRING_ARRAY_RULE : STRING_RULE;
    }

    /** The length of the text value in {@code column}; anything else is the caller's mistake. */
    static int textLength(TupleData tuple, int column) {
        ColumnKind kind = tuple.kind(column);
        if (kind != ColumnKind.TEXT) {
            throw new IllegalArgumentException("column " + column + " holds a " + kind + " value; "
                    + switch (kind) {
                        case NULL -> "the caller writes SQL NULL as null";
                        case UNCHANGED_TOAST -> "the caller leaves an unchanged TOASTed value out of the row";
                        case BINARY -> "values must come in text format (the replication session must not ask for binary = true)";
                        case TEXT -> "";
                    });
        }
        return tuple.length(column);
    }

    /** Copies the value into the scratch chars, decoded from UTF-8; returns the char count. */
    private static int decodeText(TupleData tuple, int column, int length, ConverterBuffers scratch, char[] chars) {
        byte[] bytes = scratch.bytes(length);
        tuple.copyTo(column, bytes, 0);
        return Utf8.decode(bytes, 0, length, chars);
    }

    /** Text, uuid, enums and every other type without a rule of its own: UTF-8 straight into a JSON string. */
    private static final class StringConverter implements ValueConverter {
        private final ConverterBuffers scratch;

        StringConverter(ConverterBuffers scratch) {
            this.scratch = scratch;
        }

        @Override
        public void write(JsonWriter json, TupleData tuple, int column) {
            int length = textLength(tuple, column);
            byte[] bytes = scratch.bytes(length);
            tuple.copyTo(column, bytes, 0);
            // the buffer escapes ASCII and copies multi-byte sequences unchecked: only well-formed ones
            if (Utf8.isValid(bytes, 0, length)) {
                json.utf8String(bytes, 0, length);
                return;
            }
            char[] chars = scratch.chars(length);
            json.string(chars, 0, Utf8.decode(bytes, 0, length, chars));
        }

        @Override
        public boolean scalar() {
            return true;
        }

        @Override
        public Object value(TupleData tuple, int column) {
            int length = textLength(tuple, column);
            byte[] bytes = scratch.bytes(length);
            tuple.copyTo(column, bytes, 0);
            // what Utf8.decode gives, malformed sequences included (it defers those to String)
            return new String(bytes, 0, length, java.nio.charset.StandardCharsets.UTF_8);
        }

        @Override
        public String toString() {
            return "ValueConverter[string]";
        }
    }

    /** json and jsonb: embedded as they are, bytes to bytes when they are well-formed UTF-8. */
    private static final class JsonConverter implements ValueConverter {
        private final ConverterBuffers scratch;

        JsonConverter(ConverterBuffers scratch) {
            this.scratch = scratch;
        }

        @Override
        public void write(JsonWriter json, TupleData tuple, int column) {
            int length = textLength(tuple, column);
            byte[] bytes = scratch.bytes(length);
            tuple.copyTo(column, bytes, 0);
            if (Utf8.isValid(bytes, 0, length)) {
                json.rawValue(bytes, 0, length);
                return;
            }
            char[] chars = scratch.chars(length);
            json.rawValue(chars, 0, Utf8.decode(bytes, 0, length, chars));
        }

        @Override
        public String toString() {
            return "ValueConverter[json]";
        }
    }

    /** bytea: hex decoded in place in the scratch bytes, then base64. */
    private static final class ByteaConverter implements ValueConverter {
        private final ConverterBuffers scratch;

        ByteaConverter(ConverterBuffers scratch) {
            this.scratch = scratch;
        }

        @Override
        public void write(JsonWriter json, TupleData tuple, int column) {
            int length = textLength(tuple, column);
            byte[] bytes = scratch.bytes(length);
            tuple.copyTo(column, bytes, 0);
            int n = decodeHexInPlace(bytes, length);
            if (n >= 0) {
                json.base64(bytes, 0, n);
                return;
            }
            // Escape format (bytea_output=escape) or something unexpected: the general path.
            char[] chars = scratch.chars(length);
            int count = decodeText(tuple, column, length, scratch, chars);
            ValueKind.BYTEA.write(json, chars, 0, count, scratch);
        }

        @Override
        public boolean scalar() {
            return true;
        }

        @Override
        public Object value(TupleData tuple, int column) {
            int length = textLength(tuple, column);
            byte[] bytes = scratch.bytes(length);
            tuple.copyTo(column, bytes, 0);
            int n = decodeHexInPlace(bytes, length);
            if (n >= 0) {
                return ValueKind.base64(bytes, n);
            }
            char[] chars = scratch.chars(length);
            int count = decodeText(tuple, column, length, scratch, chars);
            return ValueKind.BYTEA.value(chars, 0, count, scratch);
        }

        /** {@code \x0a0b...} to bytes at the start of the same array; -1 (contents then undefined) if it is not hex format. */
        private static int decodeHexInPlace(byte[] bytes, int length) {
            if (length < 2 || bytes[0] != '\\' || bytes[1] != 'x' || (length & 1) != 0) {
                return -1;
            }
            int n = 0;
            for (int p = 2; p < length; p += 2) {
                int hi = ValueKind.hexDigit(bytes[p]);
                int lo = ValueKind.hexDigit(bytes[p + 1]);
                if (hi < 0 || lo < 0) {
                    return -1;
                }
                bytes[n++] = (byte) (hi << 4 | lo);
            }
            return n;
        }

        @Override
        public String toString() {
            return "ValueConverter[bytea]";
        }
    }

    /** Numbers, booleans and dates/times: short ASCII texts, decoded to chars and handed to their {@link ValueKind}. */
    private static final class TextConverter implements ValueConverter {
        private final ValueKind kind;
        private final ConverterBuffers scratch;

        TextConverter(ValueKind kind, ConverterBuffers scratch) {
            this.kind = kind;
            this.scratch = scratch;
        }

        @Override
        public void write(JsonWriter json, TupleData tuple, int column) {
            int length = textLength(tuple, column);
            char[] chars = scratch.chars(length);
            int count = decodeText(tuple, column, length, scratch, chars);
            kind.write(json, chars, 0, count, scratch);
        }

        @Override
        public boolean scalar() {
            return true;
        }

        @Override
        public Object value(TupleData tuple, int column) {
            int length = textLength(tuple, column);
            char[] chars = scratch.chars(length);
            int count = decodeText(tuple, column, length, scratch, chars);
            return kind.value(chars, 0, count, scratch);
        }

        @Override
        public String toString() {
            return "ValueConverter[" + kind.name().toLowerCase(java.util.Locale.ROOT) + "]";
        }
    }

    /** Arrays: parsed in the scratch chars, nested JSON arrays out, elements by their {@link ValueKind}. */
    private static final class ArrayConverter implements ValueConverter {
        private final ValueKind elementKind;
        private final char delimiter;
        private final ConverterBuffers scratch;

        ArrayConverter(ValueKind elementKind, char delimiter, ConverterBuffers scratch) {
            this.elementKind = elementKind;
            this.delimiter = delimiter;
            this.scratch = scratch;
        }

        @Override
        public void write(JsonWriter json, TupleData tuple, int column) {
            int length = textLength(tuple, column);
            char[] chars = scratch.chars(length);
            int count = decodeText(tuple, column, length, scratch, chars);
            PgArrayParser parser = scratch.arrays;
            int tokens = parser.parse(chars, 0, count, delimiter);
            if (tokens < 0) {
                // Not an array literal: a user type whose name merely starts with '_'. Unescaping
                // may have rewritten the chars, so decode them again.
                json.string(chars, 0, decodeText(tuple, column, length, scratch, chars));
                return;
            }
            int[] t = parser.tokens();
            for (int i = 0; i < tokens * 3; i += 3) {
                switch (t[i]) {
                    case PgArrayParser.START -> json.startArray();
                    case PgArrayParser.END -> json.endArray();
                    case PgArrayParser.NULL -> json.nullValue();
                    default -> elementKind.write(json, chars, t[i + 1], t[i + 2], scratch);
                }
            }
            parser.trim();
        }

        @Override
        public String toString() {
            return "ValueConverter[array of " + elementKind.name().toLowerCase(java.util.Locale.ROOT)
                    + (delimiter == ',' ? "" : ", delimiter '" + delimiter + "'") + "]";
        }
    }
}
