package io.walhook.change;

import java.util.List;

import com.fasterxml.jackson.core.io.SerializedString;

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
    private final SerializedString jsonSchema;
    private final SerializedString jsonTable;
    private final String[] columnNames;
    private final SerializedString[] jsonNames;
    private final boolean[] keyColumns;
    private final ValueConverter[] converters;
    private final boolean routed;

    RelationInfo(PgOutputMessage.Relation relation, ValueConverter[] converters, boolean routed) {
        List<PgOutputMessage.Relation.Column> columns = relation.columns();
        this.oid = relation.relationId();
        this.schema = relation.effectiveNamespace();
        this.table = relation.relationName();
        this.replicaIdentity = relation.replicaIdentity();
        this.jsonSchema = schema != null && plainAscii(schema) ? new SerializedString(schema) : null;
        this.jsonTable = table != null && plainAscii(table) ? new SerializedString(table) : null;
        this.columnNames = new String[columns.size()];
        this.jsonNames = new SerializedString[columns.size()];
        this.keyColumns = new boolean[columns.size()];
        for (int i = 0; i < columns.size(); i++) {
            columnNames[i] = columns.get(i).name();
            jsonNames[i] = plainAscii(columnNames[i]) ? new SerializedString(columnNames[i]) : null;
            keyColumns[i] = columns.get(i).key();
        }
        this.converters = converters;
        this.routed = routed;
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

    /**
     * The column's name as a JSON field name encoded once, for names of printable ASCII other than
     * quote and backslash (which every writer spells alike); null for any other name, which the
     * generator then escapes itself.
     */
    SerializedString jsonName(int i) {
        return jsonNames[i];
    }

    /** The schema as a JSON string encoded once, on the terms of {@link #jsonName}. */
    SerializedString jsonSchema() {
        return jsonSchema;
    }

    /** The table as a JSON string encoded once, on the terms of {@link #jsonName}. */
    SerializedString jsonTable() {
        return jsonTable;
    }

    private static boolean plainAscii(String name) {
        for (int i = 0; i < name.length(); i++) {
            char c = name.charAt(i);
            if (c < 0x20 || c > 0x7E || c == '"' || c == '\\') {
                return false;
            }
        }
        return true;
    }

    /** Whether the column is part of the replica identity (every column under FULL). */
    public boolean isKey(int i) {
        return keyColumns[i];
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
