package io.walhook.backfill;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

import io.walhook.pgoutput.PgOutputMessage;
import io.walhook.pgoutput.ReplicaIdentity;

/**
 * A table as a backfill reads it, described from the catalog the way pgoutput describes it to the
 * stream (the published columns in order, generated ones only where PostgreSQL 18 publishes stored
 * ones, the replica identity's columns
 * marked as key, user types by their base type), plus the columns it is read in order of: the
 * replica identity index when the table has one, else its primary key.
 */
public final class SnapshotTable {

    private static final org.jboss.logging.Logger LOG = org.jboss.logging.Logger.getLogger(SnapshotTable.class);

    /** The table cannot be backfilled (or no longer): the message names it and says why. */
    public static final class Refused extends Exception {
        public Refused(String message) {
            super(message);
        }
    }

    private final String schema;
    private final String name;
    private final PgOutputMessage.Relation relation;
    private final Map<Long, PgOutputMessage.Type> userTypes;
    /** Indexes (into the relation's columns) of the columns chunks are ordered by. */
    private final int[] chunkKey;
    private final List<String> chunkKeyTypes;
    /**
     * The key index's collation of each chunk key column (a qualified, quoted name; null for a type
     * without): the chunks are ordered and bounded as the index orders them, so that a text key of
     * a case-insensitive column, unique under a case-sensitive index, loses no row between chunks.
     */
    private final List<String> chunkKeyCollations;
    /** A table of its own, whose inheritance children's rows the chunks leave out (ONLY); false for a partitioned one. */
    private final boolean plain;
    /** The publication's row filter of the table (PostgreSQL 15+), an SQL expression; null for none. */
    private final String rowFilter;

    private SnapshotTable(String schema, String name, PgOutputMessage.Relation relation,
            Map<Long, PgOutputMessage.Type> userTypes, int[] chunkKey, List<String> chunkKeyTypes,
            List<String> chunkKeyCollations, boolean plain, String rowFilter) {
        this.chunkKeyCollations = chunkKeyCollations;
        this.plain = plain;
        this.rowFilter = rowFilter;
        this.schema = schema;
        this.name = name;
        this.relation = relation;
        this.userTypes = userTypes;
        this.chunkKey = chunkKey;
        this.chunkKeyTypes = chunkKeyTypes;
    }

    /**
     * Describes {@code schema.table} as published by {@code publication}.
     *
     * @throws Refused when it does not exist, is not published, or has no key to read it by
     */
    public static SnapshotTable describe(Connection c, String qualified, String publication, String stateSchema)
            throws SQLException, Refused {
        int dot = qualified.indexOf('.');
        String schema = qualified.substring(0, dot);
        String table = qualified.substring(dot + 1);
        if (schema.equals(stateSchema)) {
            // its subscriptions hold secrets and headers; its changes are never events either
            throw new Refused("table " + qualified + " is walhook's own state (schema " + stateSchema + "), never sent");
        }
        // before the transaction below: a statement it tries and falls back from would abort that transaction
        if (io.walhook.config.SchemaMigrations.holdsState(c, schema)) {
            // shared publications (FOR ALL TABLES) publish another deployment's state too: its secrets as well
            throw new Refused("table " + qualified + " is another walhook deployment's state (schema " + schema
                    + "), never sent");
        }
        if (!c.getAutoCommit()) {
            return read(c, qualified, publication); // within the caller's transaction, as it reads
        }
        for (int attempt = 1; ; attempt++) {
            try {
                return describeLocked(c, qualified, publication, schema, table);
            } catch (RefusedUnlocked e) {
                // read without the lock, the table may have been dropped and created again between two of the
                // statements ("not in publication" for a table that is): described again; a refusal that holds
                // comes back each time
                if (attempt >= REPLACED_ATTEMPTS) {
                    throw e.refused;
                }
                LOG.debugf("%s was refused while described without its lock (%s): described again", qualified,
                        e.refused.getMessage());
            } catch (SQLException e) {
                if (attempt >= REPLACED_ATTEMPTS || !replacedWhileRead(e)) {
                    throw e;
                }
                LOG.debugf("%s was replaced while described without its lock (%s): described again", qualified,
                        e.getMessage());
            }
        }
    }

    /** Descriptions tried while the table is replaced under one read without its lock. */
    private static final int REPLACED_ATTEMPTS = 5;

    /**
     * A catalog function (pg_publication_tables', format_type's) opening by oid a relation that a
     * concurrent DROP removed after the snapshot found it: PostgreSQL's catalog lookups see the latest
     * catalog, not the transaction's snapshot. Only without the table's lock (not to be had in time).
     */
    private static boolean replacedWhileRead(SQLException e) {
        return "XX000".equals(e.getSQLState()) && String.valueOf(e.getMessage()).contains("could not open relation with OID");
    }

    /** A refusal of a description read without the table's lock (see {@link #describe}). */
    private static final class RefusedUnlocked extends Exception {
        final Refused refused;

        RefusedUnlocked(Refused refused) {
            super(refused.getMessage(), refused, false, false);
            this.refused = refused;
        }
    }

    private static SnapshotTable describeLocked(Connection c, String qualified, String publication, String schema,
            String table) throws SQLException, RefusedUnlocked, Refused {
        // read in several statements: a table dropped and created again between two of them was described half as
        // the one, half as the other ("has no primary key", "is not in publication"). Locked before one snapshot
        // is taken, it is one table throughout. ACCESS SHARE waits only for what ALTER, DROP or TRUNCATE it, and
        // is what a SELECT takes. Not to be had at once (a role granted only some columns, no USAGE of the schema,
        // an ALTER holding it or waiting for it), the table is read in one snapshot without it, as it was before.
        boolean lockable;
        try (PreparedStatement s = c.prepareStatement("SELECT pg_catalog.has_schema_privilege(n.oid, 'USAGE') AND"
                + " pg_catalog.has_table_privilege(c.oid, 'SELECT') FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
                + " ON n.oid = c.relnamespace WHERE n.nspname = ? AND c.relname = ? AND c.relkind IN ('r', 'p')")) {
            s.setString(1, schema);
            s.setString(2, table);
            try (ResultSet rs = s.executeQuery()) {
                lockable = rs.next() && rs.getBoolean(1);
            }
        }
        c.setAutoCommit(false);
        SnapshotTable described;
        boolean locked = false;
        try {
            try (java.sql.Statement s = c.createStatement()) {
                s.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"); // none of these takes the snapshot
                if (lockable) {
                    // the wait bounded for the lock only: the publication's view locks each table it publishes,
                    // and waits for them as it did before
                    String wait;
                    try (ResultSet rs = s.executeQuery("SHOW lock_timeout")) {
                        rs.next();
                        wait = rs.getString(1);
                    }
                    java.sql.Savepoint unlocked = c.setSavepoint();
                    try {
                        s.execute("SET LOCAL lock_timeout = " + DESCRIBE_LOCK_WAIT_MS);
                        s.execute("LOCK TABLE ONLY " + quoted(qualified) + " IN ACCESS SHARE MODE");
                        s.execute("SET LOCAL lock_timeout = '" + wait.replace("'", "''") + "'");
                        locked = true;
                    } catch (SQLException e) {
                        c.rollback(unlocked); // the lock_timeout set after the savepoint goes with it
                        LOG.debugf("%s is described without its lock: %s", qualified, e.getMessage());
                    }
                }
            }
            described = read(c, qualified, publication);
            c.commit();
        } catch (SQLException | Refused | RuntimeException e) {
            io.walhook.config.DurableWrite.rollBack(c, true, e);
            if (e instanceof Refused refused && !locked) {
                throw new RefusedUnlocked(refused);
            }
            throw e;
        }
        c.setAutoCommit(true);
        return described;
    }

    /** How long a description waits for its table's lock (an ALTER TABLE under way) before it reads without. */
    private static final long DESCRIBE_LOCK_WAIT_MS = 500;

    private static SnapshotTable read(Connection c, String qualified, String publication) throws SQLException, Refused {
        int serverMajor = c.getMetaData().getDatabaseMajorVersion();
        int dot = qualified.indexOf('.');
        String schema = qualified.substring(0, dot);
        String table = qualified.substring(dot + 1);
        long oid;
        char identity;
        boolean plain;
        boolean keyImmediate;
        // a DEFERRABLE primary key is no replica identity: the stream flags no key column of such a table
        try (PreparedStatement s = c.prepareStatement("SELECT c.oid, c.relreplident, c.relkind, COALESCE((SELECT"
                + " i.indimmediate FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid AND i.indisprimary), true)"
                + " FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace"
                + " WHERE n.nspname = ? AND c.relname = ? AND c.relkind IN ('r', 'p')")) {
            s.setString(1, schema);
            s.setString(2, table);
            try (ResultSet rs = s.executeQuery()) {
                if (!rs.next()) {
                    throw new Refused("table " + qualified + " does not exist");
                }
                oid = rs.getLong(1);
                identity = rs.getString(2).charAt(0);
                plain = "r".equals(rs.getString(3));
                keyImmediate = rs.getBoolean(4);
            }
        }
        List<String> published = null;
        String rowFilter = null;
        try (PreparedStatement s = c.prepareStatement("SELECT " + (serverMajor >= 15 ? "attnames::text[], rowfilter" : "NULL::text[], NULL")
                + " FROM pg_catalog.pg_publication_tables WHERE pubname = ? AND schemaname = ? AND tablename = ?")) {
            s.setString(1, publication);
            s.setString(2, schema);
            s.setString(3, table);
            try (ResultSet rs = s.executeQuery()) {
                if (!rs.next()) {
                    throw new Refused("table " + qualified + " is not in publication " + publication
                            + ": walhook would not see its changes while it reads it");
                }
                java.sql.Array names = rs.getArray(1);
                if (names != null) {
                    published = List.of((String[]) names.getArray());
                }
                rowFilter = rs.getString(2); // the stream carries only the rows it accepts: so does the backfill
            }
        }
        List<PgOutputMessage.Relation.Column> columns = new ArrayList<>();
        List<String> types = new ArrayList<>();
        Map<Long, PgOutputMessage.Type> userTypes = new HashMap<>();
        // the replica identity's index, else the primary key: what chunks are read by, and (but FULL) the stream's key
        Map<String, String> keyIndex = indexColumns(c, qualified, oid, identity == 'i' ? "indisreplident" : "indisprimary");
        List<String> identityColumns = List.copyOf(keyIndex.keySet());
        try (PreparedStatement s = c.prepareStatement("SELECT a.attname, a.atttypid, a.atttypmod,"
                + " pg_catalog.format_type(a.atttypid, a.atttypmod) FROM pg_catalog.pg_attribute a WHERE a.attrelid = ?"
                + " AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated " + (serverMajor >= 18
                        // 18 publishes stored generated columns when the publication or its column list says so,
                        // and its attnames says which; before 18 none is published, though 15 to 17 list them there
                        ? "IN ('', 's')" : "= ''") + " ORDER BY a.attnum")) {
            s.setLong(1, oid);
            try (ResultSet rs = s.executeQuery()) {
                while (rs.next()) {
                    String column = rs.getString(1);
                    if (published != null && !published.contains(column)) {
                        continue;
                    }
                    boolean key = identity == 'f' || (identity == 'd' && keyImmediate || identity == 'i')
                            && identityColumns.contains(column);
                    long type = rs.getLong(2);
                    columns.add(new PgOutputMessage.Relation.Column(key, column, type, rs.getInt(3)));
                    types.add(rs.getString(4));
                    if (type >= 10_000 && !userTypes.containsKey(type)) {
                        userTypes.put(type, userType(c, type));
                    }
                }
            }
        }
        List<String> keyNames = identityColumns;
        if (keyNames.isEmpty()) {
            throw new Refused("table " + qualified + " has no primary key and no replica identity index to read it"
                    + " in chunks by");
        }
        int[] chunkKey = new int[keyNames.size()];
        List<String> keyTypes = new ArrayList<>();
        List<String> keyCollations = new ArrayList<>();
        for (int k = 0; k < chunkKey.length; k++) {
            int index = -1;
            for (int i = 0; i < columns.size(); i++) {
                if (columns.get(i).name().equals(keyNames.get(k))) {
                    index = i;
                }
            }
            if (index < 0) {
                throw new Refused("table " + qualified + " publishes without its key column " + keyNames.get(k)
                        + " (publication " + publication + "'s column list)");
            }
            chunkKey[k] = index;
            keyTypes.add(types.get(index));
            keyCollations.add(keyIndex.get(keyNames.get(k)));
        }
        ReplicaIdentity replicaIdentity = switch (identity) {
            case 'f' -> ReplicaIdentity.FULL;
            case 'i' -> ReplicaIdentity.INDEX;
            case 'n' -> ReplicaIdentity.NOTHING;
            default -> ReplicaIdentity.DEFAULT;
        };
        PgOutputMessage.Relation relation = new PgOutputMessage.Relation(null, oid, schema, table, replicaIdentity,
                List.copyOf(columns));
        return new SnapshotTable(schema, table, relation, Map.copyOf(userTypes), chunkKey, List.copyOf(keyTypes),
                java.util.Collections.unmodifiableList(keyCollations), plain, rowFilter);
    }

    /**
     * The tables {@code publication} publishes, as {@code schema.table}, in name order: walhook's own
     * schema left out, and any other deployment's ({@link io.walhook.config.SchemaMigrations#holdsState}).
     */
    public static List<String> published(Connection c, String publication, String stateSchema) throws SQLException {
        List<String> tables = new ArrayList<>();
        try (PreparedStatement s = c.prepareStatement("SELECT schemaname, tablename FROM pg_catalog.pg_publication_tables"
                + " WHERE pubname = ? AND schemaname <> ? ORDER BY 1, 2")) {
            s.setString(1, publication);
            s.setString(2, stateSchema);
            try (ResultSet rs = s.executeQuery()) {
                while (rs.next()) {
                    tables.add(rs.getString(1) + "." + rs.getString(2));
                }
            }
        }
        // and other deployments' state (shared publications), checked once per schema
        java.util.Map<String, Boolean> state = new java.util.HashMap<>();
        List<String> sent = new ArrayList<>();
        for (String table : tables) {
            String schema = table.substring(0, table.indexOf('.'));
            Boolean holds = state.get(schema);
            if (holds == null) {
                holds = io.walhook.config.SchemaMigrations.holdsState(c, schema);
                state.put(schema, holds);
            }
            if (!holds) {
                sent.add(table);
            }
        }
        return sent;
    }

    /**
     * The key columns of the table's index {@code which} (its INCLUDE columns are not: they may be
     * NULL, and the stream's key leaves them out), in order, each with the index's collation of it
     * (a qualified, quoted name; null for a type that has none).
     */
    private static Map<String, String> indexColumns(Connection c, String qualified, long oid, String which)
            throws SQLException, Refused {
        Map<String, String> columns = new java.util.LinkedHashMap<>();
        try (PreparedStatement s = c.prepareStatement("SELECT a.attname, CASE WHEN i.indcollation[k.ord - 1] <> 0 THEN"
                + " (SELECT pg_catalog.quote_ident(n.nspname) || '.' || pg_catalog.quote_ident(co.collname)"
                + " FROM pg_catalog.pg_collation co JOIN pg_catalog.pg_namespace n ON n.oid = co.collnamespace"
                + " WHERE co.oid = i.indcollation[k.ord - 1]) END,"
                // the column type's (a domain's base type's) own default class, when it has one (citext does:
                // text_ops over citext orders by case, citext's operators do not); else the class's own default
                + " COALESCE((SELECT d.oid = opc.oid FROM pg_catalog.pg_opclass d WHERE d.opcmethod = opc.opcmethod"
                + " AND d.opcintype = COALESCE(NULLIF(ty.typbasetype, 0), a.atttypid) AND d.opcdefault LIMIT 1),"
                + " opc.opcdefault), opc.opcname, ic.relname"
                + " FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class ic ON ic.oid = i.indexrelid,"
                + " unnest(i.indkey) WITH ORDINALITY k(attnum, ord), pg_catalog.pg_attribute a, pg_catalog.pg_opclass opc,"
                + " pg_catalog.pg_type ty"
                + " WHERE i.indrelid = ? AND i." + which + " AND k.ord <= i.indnkeyatts AND a.attrelid = i.indrelid"
                + " AND a.attnum = k.attnum AND opc.oid = i.indclass[k.ord - 1] AND ty.oid = a.atttypid ORDER BY k.ord")) {
            s.setLong(1, oid);
            try (ResultSet rs = s.executeQuery()) {
                while (rs.next()) {
                    if (!rs.getBoolean(3)) {
                        // chunks are read in the order of the column type's own operators: in another order (say
                        // text_pattern_ops over citext) the rows between two chunks' keys would be skipped
                        throw new Refused("table " + qualified + "'s key index " + rs.getString(5) + " orders column "
                                + rs.getString(1) + " by operator class " + rs.getString(4) + ", not its type's default:"
                                + " a backfill cannot read it in chunks by that key");
                    }
                    columns.put(rs.getString(1), rs.getString(2));
                }
            }
        }
        return columns;
    }

    /**
     * The chunk key as the saved positions depend on it: each column with its type and collation.
     * A position saved under another shape (a key or its collation changed while the backfill was
     * paused, or walhook stopped) would be compared in another order, and rows skipped.
     */
    public String keyShape() {
        StringBuilder shape = new StringBuilder();
        for (int k = 0; k < chunkKey.length; k++) {
            if (k > 0) {
                shape.append(", ");
            }
            shape.append(relation.columns().get(chunkKey[k]).name()).append(' ').append(chunkKeyTypes.get(k));
            if (chunkKeyCollations.get(k) != null) {
                shape.append(" COLLATE ").append(chunkKeyCollations.get(k));
            }
        }
        return shape.toString();
    }

    /** A user type as pgoutput's Type message names it: by its base type, for a domain. */
    private static PgOutputMessage.Type userType(Connection c, long oid) throws SQLException {
        long current = oid;
        for (int depth = 0; depth < 32; depth++) {
            try (PreparedStatement s = c.prepareStatement("SELECT t.typtype, t.typbasetype, n.nspname, t.typname"
                    + " FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace WHERE t.oid = ?")) {
                s.setLong(1, current);
                try (ResultSet rs = s.executeQuery()) {
                    if (!rs.next()) {
                        break;
                    }
                    if ("d".equals(rs.getString(1))) {
                        current = rs.getLong(2);
                        continue;
                    }
                    String namespace = rs.getString(3);
                    return new PgOutputMessage.Type(null, oid, "pg_catalog".equals(namespace) ? "" : namespace,
                            rs.getString(4));
                }
            }
        }
        return new PgOutputMessage.Type(null, oid, "", "unknown");
    }

    public String qualifiedName() {
        return schema + "." + name;
    }

    public long oid() {
        return relation.relationId();
    }

    /**
     * Under REPLICA IDENTITY FULL, the primary key's column names (what chunks are read by), which
     * order a row's changes as the stream's do ({@link io.walhook.change.RelationInfo#orderKey}); else null.
     */
    public List<String> orderKey() {
        if (relation.replicaIdentity() != io.walhook.pgoutput.ReplicaIdentity.FULL) {
            return null;
        }
        List<String> names = new ArrayList<>();
        for (int i : chunkKey) {
            names.add(relation.columns().get(i).name());
        }
        return names;
    }

    /** As a Relation message would describe it: what read events are written with. */
    public PgOutputMessage.Relation relation() {
        return relation;
    }

    public Map<Long, PgOutputMessage.Type> userTypes() {
        return userTypes;
    }

    /** The names of the columns chunks are ordered by, in order. */
    public List<String> chunkKeyNames() {
        List<String> names = new ArrayList<>();
        for (int i : chunkKey) {
            names.add(relation.columns().get(i).name());
        }
        return names;
    }

    /** Indexes into the columns of {@link #relation()} of the chunk key. */
    int[] chunkKey() {
        return chunkKey.clone();
    }

    /** Whether {@code other} reads the same columns with the same types and key (a table altered in between does not). */
    public boolean sameShape(SnapshotTable other) {
        return relation.columns().equals(other.relation.columns())
                && relation.replicaIdentity() == other.relation.replicaIdentity()
                && java.util.Arrays.equals(chunkKey, other.chunkKey)
                && chunkKeyTypes.equals(other.chunkKeyTypes) && chunkKeyCollations.equals(other.chunkKeyCollations)
                && java.util.Objects.equals(rowFilter, other.rowFilter);
    }

    /**
     * Whether {@code other} reads the table by the same key (columns, types, collations), under the
     * same replica identity and row filter: a table altered only in its other columns (added,
     * dropped, retyped) is read on, with its columns as they are now.
     */
    public boolean sameKey(SnapshotTable other) {
        return keyShape().equals(other.keyShape()) && relation.replicaIdentity() == other.relation.replicaIdentity()
                && java.util.Objects.equals(rowFilter, other.rowFilter);
    }

    /**
     * The chunk query: every published column, in key order, after {@code ?...} (one parameter per
     * key column, when {@code after}) and up to {@code ?...} (when {@code upTo}), at most {@code ?} rows
     * when {@code limited}.
     */
    String chunkSql(boolean after, boolean upTo, boolean limited) {
        return chunkSql(after, upTo, limited, 0);
    }

    /** The rows at {@code keys} keys ({@code ?...} each, one parameter per key column), in key order. */
    String keysSql(int keys) {
        return chunkSql(false, false, false, keys);
    }

    private String chunkSql(boolean after, boolean upTo, boolean limited, int keys) {
        StringBuilder sql = new StringBuilder("SELECT ");
        List<PgOutputMessage.Relation.Column> columns = relation.columns();
        for (int i = 0; i < columns.size(); i++) {
            sql.append(i == 0 ? "" : ", ").append(quote(columns.get(i).name()));
        }
        // a table's own rows: ONLY, or its inheritance children's (another table, maybe unpublished) would come as its
        sql.append(plain ? " FROM ONLY " : " FROM ").append(quote(schema)).append('.').append(quote(name));
        String keyList = keyList();
        String params = params();
        List<String> conditions = new java.util.ArrayList<>();
        if (after) {
            conditions.add(keyList + " > " + params);
        }
        if (keys > 0) {
            conditions.add(keyList + " IN (" + String.join(", ", java.util.Collections.nCopies(keys, params)) + ")");
        }
        if (upTo) {
            conditions.add(keyList + " <= " + params);
        }
        if (rowFilter != null) {
            conditions.add("(" + operatorMarks(rowFilter) + ")");
        }
        if (!conditions.isEmpty()) {
            sql.append(" WHERE ").append(String.join(" AND ", conditions));
        }
        sql.append(" ORDER BY ").append(keyList, 1, keyList.length() - 1);
        if (limited) {
            sql.append(" LIMIT ?");
        }
        return sql.toString();
    }

    /** The key columns, each in its index's collation, as a row: {@code ("a", "b" COLLATE "pg_catalog"."C")}. */
    private String keyList() {
        StringBuilder s = new StringBuilder("(");
        for (int k = 0; k < chunkKey.length; k++) {
            s.append(k == 0 ? "" : ", ").append(quote(relation.columns().get(chunkKey[k]).name()));
            if (chunkKeyCollations.get(k) != null) {
                s.append(" COLLATE ").append(chunkKeyCollations.get(k));
            }
        }
        return s.append(')').toString();
    }

    private String params() {
        StringBuilder s = new StringBuilder("(");
        for (int k = 0; k < chunkKey.length; k++) {
            s.append(k == 0 ? "" : ", ").append("CAST(? AS ").append(chunkKeyTypes.get(k)).append(')');
        }
        return s.append(')').toString();
    }

    /**
     * Locks the table as the chunk query does ({@code ACCESS SHARE}: only what takes its {@code
     * ACCESS EXCLUSIVE} lock waits for it: ALTER, DROP, TRUNCATE, VACUUM FULL, CLUSTER).
     */
    String lockSql() {
        return "LOCK TABLE " + (plain ? "ONLY " : "") + quotedName() + " IN ACCESS SHARE MODE";
    }

    /**
     * Its name as {@code to_regclass} reads it, quoted: the runner looks the oid it stands for up
     * again after each chunk's read, since another table than the one described (dropped and created
     * again) means the chunk, read with an older snapshot, saw none of the new table's rows.
     */
    String quotedName() {
        return quote(schema) + "." + quote(name);
    }

    /** A {@code schema.table} name (split at its first dot, as a backfill's tables are) quoted for {@code to_regclass}. */
    static String quoted(String qualified) {
        int dot = qualified.indexOf('.');
        return quote(qualified.substring(0, dot)) + "." + quote(qualified.substring(dot + 1));
    }

    /**
     * A publication's row filter, as PostgreSQL writes it, put in a prepared statement: each
     * {@code ?} outside a string or a quoted name (jsonb's {@code ?}, {@code ?|}, {@code ?&}, the
     * geometric {@code ?-}, ...) is an operator, written {@code ??} for pgjdbc, which would take it
     * for a parameter. A string or name ends at its quote, a doubled quote inside it being one
     * character (PostgreSQL writes no other escape of a quote there).
     */
    static String operatorMarks(String filter) {
        StringBuilder sql = new StringBuilder(filter.length() + 8);
        char quoted = 0;
        for (int i = 0; i < filter.length(); i++) {
            char c = filter.charAt(i);
            sql.append(c);
            if (quoted != 0) {
                if (c == quoted) {
                    quoted = 0; // a doubled quote closes and opens again: the same
                }
            } else if (c == '\'' || c == '"') {
                quoted = c;
            } else if (c == '?') {
                sql.append('?');
            }
        }
        return sql.toString();
    }

    static String quote(String identifier) {
        return '"' + identifier.replace("\"", "\"\"") + '"';
    }
}
