package io.walhook.change;

import java.util.List;

import io.walhook.pgoutput.PgOutputMessage;
import io.walhook.pgoutput.ReplicaIdentity;

/**
 * A table as the latest Relation message described it, with one value converter per column
 * chosen once here, so a change costs no per-value type dispatch.
 */
public final class RelationInfo {

    private final long oid;
    private final String schema;
    private final String table;
    private final ReplicaIdentity replicaIdentity;
    /** By operation: its {@code "op"}, {@code "schema"} and {@code "table"} fields, encoded once. */
    private final byte[][] jsonHeaders;
    private final String[] columnNames;
    /** Each column's index by its name. */
    private final java.util.Map<String, Integer> columnIndexes;
    private final byte[][] jsonNames;
    private final boolean[] keyColumns;
    /**
     * Under REPLICA IDENTITY FULL, the primary key's columns (their indexes, ascending) that a row's
     * changes are ordered by; null when it has none (or it is not known): every column is "key"
     * there, so its changes are ordered by table.
     */
    private final int[] orderKey;
    private final int keyShape;
    private final ValueConverter[] converters;
    private final boolean routed;

    RelationInfo(PgOutputMessage.Relation relation, ValueConverter[] converters, boolean routed) {
        this(relation, converters, routed, null);
    }

    /** {@code primaryKey}: under REPLICA IDENTITY FULL, the names of the table's primary key columns, or null. */
    RelationInfo(PgOutputMessage.Relation relation, ValueConverter[] converters, boolean routed, List<String> primaryKey) {
        List<PgOutputMessage.Relation.Column> columns = relation.columns();
        this.oid = relation.relationId();
        this.schema = relation.effectiveNamespace();
        this.table = relation.relationName();
        this.replicaIdentity = relation.replicaIdentity();
        this.jsonHeaders = new byte[Operation.values().length][];
        for (Operation op : Operation.values()) {
            jsonHeaders[op.ordinal()] = jsonHeader(op, schema, table);
        }
        this.columnNames = new String[columns.size()];
        this.jsonNames = new byte[columns.size()][];
        this.keyColumns = new boolean[columns.size()];
        this.columnIndexes = new java.util.HashMap<>(columns.size() * 2);
        for (int i = 0; i < columns.size(); i++) {
            columnNames[i] = columns.get(i).name();
            columnIndexes.putIfAbsent(columnNames[i], i);
            jsonNames[i] = JsonWriter.encodeName(columnNames[i]);
            keyColumns[i] = columns.get(i).key();
        }
        this.orderKey = relation.replicaIdentity() == ReplicaIdentity.FULL ? orderKey(columnNames, primaryKey) : null;
        this.keyShape = keyShape(relation, orderKey);
        this.converters = converters;
        this.routed = routed;
    }

    /**
     * A table described from the catalog as pgoutput would describe it (same columns, key flags and
     * types), for rows read outside the stream (backfills); {@code userTypes} as for
     * {@link ValueConverters#forColumn}. Its converters share {@code converters}' scratch buffers.
     */
    public static RelationInfo described(PgOutputMessage.Relation relation, ValueConverters converters,
            java.util.function.LongFunction<PgOutputMessage.Type> userTypes, List<String> primaryKey) {
        return new RelationInfo(relation, converters.forRelation(relation, userTypes).toArray(ValueConverter[]::new),
                true, primaryKey);
    }

    /** The primary key's column indexes, ascending; null when there is none or a column of it is not published. */
    private static int[] orderKey(String[] columns, List<String> primaryKey) {
        if (primaryKey == null || primaryKey.isEmpty()) {
            return null;
        }
        int[] indexes = new int[primaryKey.size()];
        for (int k = 0; k < indexes.length; k++) {
            indexes[k] = List.of(columns).indexOf(primaryKey.get(k));
            if (indexes[k] < 0) {
                return null;
            }
        }
        java.util.Arrays.sort(indexes);
        return indexes;
    }

    /**
     * Under REPLICA IDENTITY FULL, the indexes (ascending) of the primary key's columns, which order
     * a row's changes; null otherwise, or when the table has no primary key.
     */
    public int[] orderKey() {
        return orderKey;
    }

    /** Whether column {@code i} is one of {@link #orderKey}'s (under FULL, the primary key's). */
    public boolean inOrderKey(int i) {
        if (orderKey != null) {
            for (int k : orderKey) {
                if (k == i) {
                    return true;
                }
            }
        }
        return false;
    }

    public long oid() {
        return oid;
    }

    public String schema() {
        return schema;
    }

    public String table() {
        return table;
    }

    public ReplicaIdentity replicaIdentity() {
        return replicaIdentity;
    }

    public int columnCount() {
        return columnNames.length;
    }

    public String columnName(int i) {
        return columnNames[i];
    }

    /** The index of the column of this name, or -1. */
    public int columnIndex(Object name) {
        Integer i = columnIndexes.get(name);
        return i == null ? -1 : i;
    }

    /** The column's name as a JSON field name ({@code "name":}) encoded once: see {@link JsonWriter#name(byte[])}. */
    byte[] jsonName(int i) {
        return jsonNames[i];
    }

    /** An event's {@code "op"}, {@code "schema"} and {@code "table"} fields, for {@link JsonWriter#fields}. */
    byte[] jsonHeader(Operation op) {
        return jsonHeaders[op.ordinal()];
    }

    /** {@code "op"}, {@code "schema"} and {@code "table"} encoded for {@link JsonWriter#fields} (null: JSON null). */
    static byte[] jsonHeader(Operation op, String schema, String table) {
        return new JsonWriter(64).startObject().name("op").string(op.wireName())
                .name("schema").string(schema).name("table").string(table).toFieldBytes();
    }

    /** Whether the column is part of the replica identity (every column under FULL). */
    public boolean isKey(int i) {
        return keyColumns[i];
    }

    /**
     * What a row's key hash is made of here ({@link ChangeEvent#rowKeyHash}): the key columns'
     * names, types and type modifiers (under FULL, the primary key's), or FULL without one. Equal for two descriptions of one table whose keys hash alike; an
     * {@code ALTER TABLE} that changes the replica identity or the key columns changes it, and a
     * row's changes from before and after it hash apart.
     */
    public int keyShape() {
        return keyShape;
    }

    private static int keyShape(PgOutputMessage.Relation relation, int[] orderKey) {
        boolean full = relation.replicaIdentity() == ReplicaIdentity.FULL;
        if (full && orderKey == null) {
            return -1;
        }
        int h = full ? 19 : 17; // FULL's primary key hashes its rows as the default identity does, but is another shape
        for (int i = 0; i < relation.columns().size(); i++) {
            PgOutputMessage.Relation.Column column = relation.columns().get(i);
            if (full ? java.util.Arrays.binarySearch(orderKey, i) >= 0 : column.key()) {
                // the type and its modifier: numeric(10,2) and numeric(12,4) write one value apart ("1.00", "1.0000")
                h = 31 * (31 * (31 * h + column.name().hashCode()) + Long.hashCode(column.typeOid()))
                        + column.typeModifier();
            }
        }
        return h;
    }

    public ValueConverter converter(int i) {
        return converters[i];
    }

    /** False for walhook's own state schema: its changes are never events. */
    public boolean routed() {
        return routed;
    }

    @Override
    public String toString() {
        return schema + "." + table + " (oid " + oid + ")";
    }
}
