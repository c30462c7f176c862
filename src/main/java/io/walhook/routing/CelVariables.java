package io.walhook.routing;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.function.Supplier;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.JsonToken;
import com.fasterxml.jackson.core.StreamReadConstraints;

import dev.cel.common.values.NullValue;
import io.walhook.change.ChangeEvent;
import io.walhook.change.JsonWriter;
import io.walhook.change.RelationInfo;
import io.walhook.change.ValueConverter;
import io.walhook.pgoutput.ReplicaIdentity;
import io.walhook.pgoutput.TupleData;

/**
 * The variables a {@link CelFilter} sees for one event (docs/events.md, "Row filters"): {@code op},
 * {@code schema}, {@code table} and the maps {@code key}, {@code new}, {@code old}, typed as in the
 * event's JSON (docs/events.md):
 *
 * <ul>
 *   <li>JSON integers are CEL {@code int} (Java {@code Long}); an integer beyond 64 bits (a big
 *       {@code numeric}) is a {@code double};
 *   <li>JSON decimals ({@code numeric}, {@code float4/8}) are {@code double}: CEL has no decimal
 *       type, so the filter sees {@code numeric} rounded to a double (the event keeps every digit);
 *   <li>strings, booleans, JSON arrays (lists) and objects ({@code json/jsonb}: maps) as they are,
 *       {@code NaN}/{@code Infinity} stay the strings the event carries;
 *   <li>SQL NULL is CEL {@code null}; an absent map ({@code old} without REPLICA IDENTITY FULL, every
 *       map of a truncate or message) is an empty map, and an unchanged TOASTed column is absent
 *       from {@code new}: test with {@code has(new.column)}.
 * </ul>
 *
 * <p>Built lazily: from the event's tuples, each column of a row is converted when a filter first
 * reads it, once for all filters evaluated against the same instance, and the row's other columns
 * not at all. Create one per event and share it across the subscriptions that event reaches.
 *
 * <p>{@link #of(ChangeEvent)} builds the rows straight from the event's tuples through each
 * column's converter ({@link ValueConverter#value}), exactly as they read back from the event's
 * JSON; only json/jsonb and array values go through JSON, one column at a time. Reading the rows
 * back from the whole event JSON ({@link #of(ChangeEvent, Supplier)}) costs several times more.
 *
 * <p>Not thread-safe: one thread builds and uses an instance. {@link #of(ChangeEvent)} uses the
 * columns' converters, which must be used by one thread at a time: call it on the thread that
 * writes events, or pass the JSON already written with {@link #of(ChangeEvent, Supplier)}.
 */
public final class CelVariables {

    /** Rows can be large (a 1 GB text value, a numeric of 100,000 digits): the event already exists. */
    private static final JsonFactory JSON = JsonFactory.builder()
            .streamReadConstraints(StreamReadConstraints.builder().maxStringLength(Integer.MAX_VALUE)
                    .maxNumberLength(1_000_000).build())
            .build();
    private static final Map<String, Object> EMPTY = Collections.emptyMap();

    /** Writes a json/jsonb or array column alone, to read it back (the bytes are the event's). */

    private final ChangeEvent event;
    /** The rows are still to be built from the event's tuples. */
    private boolean fromTuples;
    private String op;
    private String schema;
    private String table;
    private Supplier<byte[]> json;
    private boolean headerFromJson;
    private Map<String, Object> key;
    private Map<String, Object> newRow;
    private Map<String, Object> oldRow;
    private RuntimeException failure;

    private CelVariables(ChangeEvent event, String op, String schema, String table, Supplier<byte[]> json,
            boolean headerFromJson) {
        this.event = event;
        this.op = op;
        this.schema = schema;
        this.table = table;
        this.json = json;
        this.headerFromJson = headerFromJson;
    }

    /** The event's variables; its rows are built (once) from its tuples only if a filter reads one. */
    public static CelVariables of(ChangeEvent event) {
        CelVariables v = new CelVariables(event, event.op().wireName(), event.schema(), event.table(), null, false);
        v.fromTuples = true;
        return v;
    }

    /**
     * The event's variables, the rows read from its JSON (format {@code json}) when a filter first
     * needs them: pass the bytes that are (or will be) delivered so they are written only once.
     */
    public static CelVariables of(ChangeEvent event, Supplier<byte[]> eventJson) {
        Objects.requireNonNull(eventJson, "eventJson");
        return new CelVariables(event, event.op().wireName(), event.schema(), event.table(), eventJson, false);
    }

    /** Every variable from an event's JSON (docs/events.md), e.g. a sample event posted to the API. */
    public static CelVariables fromJson(byte[] eventJson) {
        Objects.requireNonNull(eventJson, "eventJson");
        return new CelVariables(null, null, null, null, () -> eventJson, true);
    }

    /**
     * Variables given directly. Row values are taken as the event's JSON would give them: Java
     * {@code null} is CEL null, integral numbers are {@code int}, other numbers {@code double},
     * maps and lists are copied the same way; a null map is an empty one.
     */
    public static CelVariables of(String op, String schema, String table, Map<String, ?> key, Map<String, ?> newRow,
            Map<String, ?> oldRow) {
        CelVariables v = new CelVariables(null, op, schema, table, null, false);
        v.key = normalizeMap(key);
        v.newRow = normalizeMap(newRow);
        v.oldRow = normalizeMap(oldRow);
        return v;
    }

    /** The id of the event, when the variables come from one; for error reports (formatting it is not free). */
    String eventId() {
        return event == null ? null : event.id();
    }

    /**
     * A variable's value for CEL, or null when there is no such variable.
     *
     * @throws RuntimeException if the event's JSON cannot be read (then on every later call too)
     */
    Object find(String name) {
        return switch (name) {
            case "op" -> orNull(header().op);
            case "schema" -> orNull(header().schema);
            case "table" -> orNull(header().table);
            case "key" -> rows().key;
            case "new" -> rows().newRow;
            case "old" -> rows().oldRow;
            default -> null;
        };
    }

    /** All six variables as CEL sees them (building the rows if needed); CEL null is {@link NullValue}. */
    public Map<String, Object> toMap() {
        Map<String, Object> all = new LinkedHashMap<>();
        for (String name : List.of("op", "schema", "table", "key", "new", "old")) {
            all.put(name, find(name));
        }
        return all;
    }

    private static Object orNull(String s) {
        return s == null ? NullValue.NULL_VALUE : s;
    }

    private CelVariables header() {
        return headerFromJson ? rows() : this;
    }

    private CelVariables rows() {
        if (failure != null) {
            throw failure;
        }
        if (fromTuples) {
            try {
                rowsFromTuples();
            } catch (RuntimeException e) {
                failure = e;
                throw e;
            }
            fromTuples = false;
        }
        if (json != null) {
            try {
                parse(json.get());
            } catch (IOException e) {
                String detail = e instanceof JsonProcessingException j ? j.getOriginalMessage() : e.getMessage();
                failure = new UncheckedIOException("cannot read the event's JSON: " + detail, e);
                throw failure;
            } catch (RuntimeException e) {
                failure = e;
                throw e;
            }
            json = null;
            headerFromJson = false;
        }
        return this;
    }

    private void parse(byte[] bytes) throws IOException {
        Map<String, Object> k = EMPTY;
        Map<String, Object> n = EMPTY;
        Map<String, Object> o = EMPTY;
        try (JsonParser p = JSON.createParser(bytes)) {
            if (p.nextToken() != JsonToken.START_OBJECT) {
                throw new IOException("the event is not a JSON object");
            }
            while (p.nextToken() == JsonToken.FIELD_NAME) {
                String field = p.currentName();
                JsonToken t = p.nextToken();
                switch (field) {
                    case "key" -> k = rowOf(p, t);
                    case "new" -> n = rowOf(p, t);
                    case "old" -> o = rowOf(p, t);
                    case "op" -> op = headerFromJson ? textOf(p, t) : op;
                    case "schema" -> schema = headerFromJson ? textOf(p, t) : schema;
                    case "table" -> table = headerFromJson ? textOf(p, t) : table;
                    default -> p.skipChildren();
                }
            }
        }
        key = k;
        newRow = n;
        oldRow = o;
    }

    /**
     * The rows as {@link io.walhook.change.EventJsonWriter} writes them (docs/events.md), all three at once as
     * the JSON gives them: {@code key} from the 'K' tuple, else the old row, else the new one, key
     * columns only; {@code new} with unchanged TOASTed values filled from the old row when it has
     * them, else absent; {@code old} only under REPLICA IDENTITY FULL.
     */
    private void rowsFromTuples() {
        Map<String, Object> k = EMPTY;
        Map<String, Object> n = EMPTY;
        Map<String, Object> o = EMPTY;
        switch (event.op()) {
            case INSERT, UPDATE, DELETE, READ -> {
                RelationInfo relation = event.relation();
                TupleData newTuple = event.newRow();
                TupleData oldTuple = event.oldRow();
                TupleData keySource = event.keySource();
                k = rowOf(relation, keySource, null, true);
                n = rowOf(relation, newTuple, event.newRowFill(), false);
                if (oldTuple != null && relation.replicaIdentity() == ReplicaIdentity.FULL) {
                    o = rowOf(relation, oldTuple, null, false);
                }
            }
            case TRUNCATE, MESSAGE -> {
                // no rows: empty maps
            }
        }
        key = k;
        newRow = n;
        oldRow = o;
    }

    private static Map<String, Object> rowOf(RelationInfo relation, TupleData tuple, TupleData fill, boolean keysOnly) {
        if (tuple == null) {
            return EMPTY;
        }
        if (tuple.size() != relation.columnCount()) {
            throw new IllegalStateException("tuple of " + tuple.size() + " columns for " + relation + " with "
                    + relation.columnCount() + " columns");
        }
        return new TupleRow(relation, tuple, fill, keysOnly);
    }

    /**
     * A row of an event's tuple as a map, each column converted the first time a filter reads it: a
     * filter on {@code new.tenant_id} does not turn the row's 10 MB jsonb document into maps and
     * lists (some ten times its size) for every event. Iterating it converts every column, in order;
     * a value that cannot be read throws when it is read.
     */
    private static final class TupleRow extends java.util.AbstractMap<String, Object> {

        private final RelationInfo relation;
        private final TupleData tuple;
        private final TupleData fill;
        private final boolean keysOnly;
        /** Converted values by column (an {@link Unreadable} for one that failed), or null while not read. */
        private final Object[] values;
        private java.util.Set<Entry<String, Object>> entries;

        TupleRow(RelationInfo relation, TupleData tuple, TupleData fill, boolean keysOnly) {
            this.relation = relation;
            this.tuple = tuple;
            this.fill = fill;
            this.keysOnly = keysOnly;
            this.values = new Object[tuple.size()];
        }

        @Override
        public Object get(Object name) {
            int i = relation.columnIndex(name);
            return i >= 0 && present(i) ? value(i) : null;
        }

        /** Without converting the value: {@code has(new.doc)} does not read the document. */
        @Override
        public boolean containsKey(Object name) {
            int i = relation.columnIndex(name);
            return i >= 0 && present(i);
        }

        /** Whether the row has the column: a key's, and not an unchanged TOASTed value the old row does not fill. */
        private boolean present(int i) {
            return (!keysOnly || relation.isKey(i)) && (!tuple.isUnchangedToast(i) || fill != null && fill.hasValue(i));
        }

        /** A present column's value, converted once: every filter reading a value that fails meets the same failure. */
        private Object value(int i) {
            Object value = values[i];
            if (value == null) {
                try {
                    value = switch (tuple.kind(i)) {
                        case NULL -> NullValue.NULL_VALUE;
                        case TEXT, BINARY -> valueOf(relation.converter(i), tuple, i);
                        case UNCHANGED_TOAST -> valueOf(relation.converter(i), fill, i);
                    };
                } catch (IOException e) {
                    value = new Unreadable(new UncheckedIOException("cannot read the event's values: column "
                            + relation.columnName(i) + ": " + e.getMessage(), e));
                } catch (RuntimeException e) {
                    value = new Unreadable(e);
                }
                values[i] = value;
            }
            if (value instanceof Unreadable unreadable) {
                throw unreadable.failure;
            }
            return value;
        }

        /** A column whose value could not be converted, and why. */
        private record Unreadable(RuntimeException failure) {
        }

        @Override
        public java.util.Set<Entry<String, Object>> entrySet() {
            if (entries == null) {
                Map<String, Object> all = new LinkedHashMap<>();
                for (int i = 0; i < values.length; i++) {
                    if (present(i)) {
                        all.put(relation.columnName(i), value(i));
                    }
                }
                entries = Collections.unmodifiableMap(all).entrySet();
            }
            return entries;
        }
    }

    private static Object valueOf(ValueConverter converter, TupleData tuple, int column) throws IOException {
        if (converter.scalar()) {
            return converter.value(tuple, column);
        }
        // json/jsonb, arrays: the column's JSON alone, read back as the event's JSON would be
        JsonWriter out = new JsonWriter(tuple.length(column) + 16);
        converter.write(out, tuple, column);
        try (JsonParser p = JSON.createParser(out.toByteArray())) {
            Object value = valueOf(p, p.nextToken());
            if (p.nextToken() != null) {
                throw new IOException("more than one JSON value in a column");
            }
            return value;
        }
    }

    private static String textOf(JsonParser p, JsonToken t) throws IOException {
        p.skipChildren();
        return t == JsonToken.VALUE_STRING ? p.getText() : null;
    }

    private static Map<String, Object> rowOf(JsonParser p, JsonToken t) throws IOException {
        if (t != JsonToken.START_OBJECT) {
            p.skipChildren(); // null: the event has no such row
            return EMPTY;
        }
        return objectOf(p);
    }

    private static Map<String, Object> objectOf(JsonParser p) throws IOException {
        Map<String, Object> map = new LinkedHashMap<>();
        for (String name = p.nextFieldName(); name != null; name = p.nextFieldName()) {
            map.put(name, valueOf(p, p.nextToken()));
        }
        return map;
    }

    private static Object valueOf(JsonParser p, JsonToken t) throws IOException {
        return switch (t) {
            case VALUE_STRING -> p.getText();
            case VALUE_NUMBER_INT -> p.getNumberType() == JsonParser.NumberType.BIG_INTEGER
                    ? (Object) p.getDoubleValue() // beyond a long: CEL has no bigger integer
                    : (Object) p.getLongValue();
            case VALUE_NUMBER_FLOAT -> p.getDoubleValue();
            case VALUE_TRUE -> Boolean.TRUE;
            case VALUE_FALSE -> Boolean.FALSE;
            case VALUE_NULL -> NullValue.NULL_VALUE;
            case START_OBJECT -> objectOf(p);
            case START_ARRAY -> {
                List<Object> list = new ArrayList<>();
                for (JsonToken e = p.nextToken(); e != JsonToken.END_ARRAY; e = p.nextToken()) {
                    list.add(valueOf(p, e));
                }
                yield list;
            }
            default -> throw new IOException("unexpected " + t + " in the event's JSON");
        };
    }

    private static Map<String, Object> normalizeMap(Map<String, ?> map) {
        if (map == null || map.isEmpty()) {
            return EMPTY;
        }
        Map<String, Object> copy = new LinkedHashMap<>();
        map.forEach((k, v) -> copy.put(Objects.requireNonNull(k, "map key"), normalize(v)));
        return copy;
    }

    private static Object normalize(Object v) {
        if (v == null || v == NullValue.NULL_VALUE) {
            return NullValue.NULL_VALUE;
        } else if (v instanceof String || v instanceof Boolean || v instanceof Long || v instanceof Double) {
            return v;
        } else if (v instanceof Integer || v instanceof Short || v instanceof Byte) {
            return ((Number) v).longValue();
        } else if (v instanceof BigInteger b) {
            return b.bitLength() < 64 ? (Object) b.longValue() : (Object) b.doubleValue();
        } else if (v instanceof BigDecimal d) {
            return d.doubleValue();
        } else if (v instanceof Number n) {
            return n.doubleValue();
        } else if (v instanceof Map<?, ?> m) {
            Map<String, Object> copy = new LinkedHashMap<>();
            m.forEach((k, e) -> copy.put(String.valueOf(k), normalize(e)));
            return copy;
        } else if (v instanceof List<?> l) {
            List<Object> copy = new ArrayList<>(l.size());
            l.forEach(e -> copy.add(normalize(e)));
            return copy;
        }
        return v.toString(); // every other type is its text form in an event
    }
}
