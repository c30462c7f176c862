package io.walhook.backfill;

import static org.assertj.core.api.Assertions.assertThat;

import java.sql.Connection;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.util.ArrayList;
import java.util.List;

import org.junit.jupiter.api.Assumptions;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import io.walhook.pgoutput.PgOutputMessage;
import io.walhook.testing.PostgresServer;
import io.walhook.testing.TestPostgres;

/**
 * Tables as a backfill describes and reads them, chunk after chunk as the runner does, against a
 * real PostgreSQL: every row of the table itself once, in the key index's order, whatever the
 * index holds besides its key and whatever collation its text key has.
 */
class SnapshotTableTest {

    private static PostgresServer pg;
    private static String database;

    @BeforeAll
    static void database() throws Exception {
        pg = TestPostgres.shared();
        database = pg.createDatabase("snapshot_table");
        pg.execute(database, "CREATE PUBLICATION p FOR ALL TABLES");
    }

    private static SnapshotTable describe(String table) throws Exception {
        try (Connection c = pg.connect(database)) {
            return SnapshotTable.describe(c, table, "p", "walhook");
        }
    }

    /** What a chunk compares with the table's description: its text now. */
    private static String columns(String table) throws Exception {
        try (Connection c = pg.connect(database);
             PreparedStatement s = c.prepareStatement("SELECT " + BackfillRunner.COLUMNS)) {
            s.setString(1, table);
            try (ResultSet rs = s.executeQuery()) {
                rs.next();
                return rs.getString(1);
            }
        }
    }

    /**
     * A table dropped and created again (in one transaction) while it is described: the description
     * reads the catalog in several statements, and one of them could find the new table's oid where
     * another had the old one's, failing the backfill as if the table had no key or was not published
     * (or the publication's view, opening each table by its oid, failed on one gone since). Locked and
     * read in one snapshot, every description is of one table or the other, whole.
     */
    @Test
    void aTableReplacedWhileDescribedIsDescribedWholeAsOneOrTheOther() throws Exception {
        String table = "CREATE TABLE public.swapped (id int PRIMARY KEY, v text)";
        pg.execute(database, table);
        java.util.concurrent.atomic.AtomicBoolean done = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.atomic.AtomicInteger swaps = new java.util.concurrent.atomic.AtomicInteger();
        Thread swapper = new Thread(() -> {
            try (Connection c = pg.connect(database); java.sql.Statement s = c.createStatement()) {
                while (!done.get()) {
                    s.execute("BEGIN; DROP TABLE public.swapped; " + table + "; COMMIT");
                    swaps.incrementAndGet();
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        }, "swapper");
        swapper.start();
        List<String> wrong = new java.util.ArrayList<>();
        try (Connection c = pg.connect(database)) {
            for (int i = 0; i < 400 || swaps.get() < 100; i++) {
                try {
                    SnapshotTable described = SnapshotTable.describe(c, "public.swapped", "p", "walhook");
                    if (described.relation().columns().size() != 2 || !keys(described.relation()).equals(List.of("id"))) {
                        wrong.add("described as " + described.relation());
                    }
                } catch (SnapshotTable.Refused e) {
                    wrong.add(e.getMessage());
                }
                assertThat(c.getAutoCommit()).isTrue();
            }
        } finally {
            done.set(true);
            swapper.join();
        }
        assertThat(swaps.get()).as("swaps while described").isGreaterThanOrEqualTo(100);
        assertThat(wrong).isEmpty();
    }

    /**
     * A table whose lock an ALTER holds is described once the ALTER commits, as before the lock was
     * asked for: the lock's short wait is not a failure (which stalled every backfill, or stopped a
     * start with an initial one), and the statements after it wait as they did (the publication's
     * view locks the tables it publishes).
     */
    @Test
    void aTableAnAlterHoldsIsDescribedOnceTheAlterCommits() throws Exception {
        pg.execute(database, "CREATE TABLE public.held (id int PRIMARY KEY, v text)");
        try (Connection alter = pg.connect(database); java.sql.Statement s = alter.createStatement()) {
            alter.setAutoCommit(false);
            s.execute("ALTER TABLE public.held ADD COLUMN w int");
            java.util.concurrent.CompletableFuture<SnapshotTable> described = java.util.concurrent.CompletableFuture
                    .supplyAsync(() -> {
                        try {
                            return describe("public.held");
                        } catch (Exception e) {
                            throw new java.util.concurrent.CompletionException(e);
                        }
                    });
            // past its lock's wait (500 ms): waiting in the publication's view, or done
            org.awaitility.Awaitility.await().atMost(java.time.Duration.ofSeconds(30)).pollDelay(java.time.Duration.ofMillis(1500))
                    .until(() -> described.isDone() || waitsForALock());
            alter.commit();
            // read in the snapshot taken before the ALTER committed, or after: either is one whole table (a chunk
            // finding the columns changed since has it described again)
            SnapshotTable table = described.get(30, java.util.concurrent.TimeUnit.SECONDS);
            assertThat(keys(table.relation())).containsExactly("id");
            assertThat(table.relation().columns().stream().map(PgOutputMessage.Relation.Column::name).toList())
                    .isIn(List.of("id", "v"), List.of("id", "v", "w"));
        }
    }

    private static boolean waitsForALock() throws Exception {
        try (Connection c = pg.connect(database); java.sql.Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
                     + " AND wait_event_type = 'Lock'")) {
            rs.next();
            return rs.getInt(1) > 0;
        }
    }

    /**
     * A table in a schema walhook's role may not use: described as before (the catalog is readable),
     * not refused by the lock's privilege check, which would have stopped a start with an initial
     * backfill of {@code *} tables of a publication FOR ALL TABLES.
     */
    @Test
    void aTableOfASchemaTheRoleMayNotUseIsDescribedWithoutItsLock() throws Exception {
        String role = "nousage_" + Long.toHexString(System.nanoTime());
        pg.execute(database, "CREATE ROLE " + role + " LOGIN", "CREATE SCHEMA IF NOT EXISTS hidden",
                "CREATE TABLE hidden.t (id int PRIMARY KEY)");
        try (Connection c = java.sql.DriverManager.getConnection(pg.jdbcUrl(database), role, pg.password())) {
            assertThat(keys(SnapshotTable.describe(c, "hidden.t", "p", "walhook").relation())).containsExactly("id");
            assertThat(c.getAutoCommit()).isTrue();
        }
    }

    /**
     * A chunk finds its table altered, and has it described again, when its key moves to other
     * columns or another index (the description then fails the backfill), not only when its
     * columns change: a chunk read by the old key took no account of a delete sent by the new one.
     */
    @Test
    void aChunkSeesItsTablesKeyMovedToOtherColumnsOrAnotherIndex() throws Exception {
        pg.execute(database, "CREATE TABLE rekeyed (a int PRIMARY KEY, b int NOT NULL UNIQUE, c int NOT NULL)",
                "CREATE UNIQUE INDEX rekeyed_c ON rekeyed (c)");
        String before = columns("rekeyed");
        pg.execute(database, "ALTER TABLE rekeyed DROP CONSTRAINT rekeyed_pkey, ADD PRIMARY KEY (b)");
        String moved = columns("rekeyed");
        assertThat(moved).as("the primary key on other columns").isNotEqualTo(before);
        pg.execute(database, "ALTER TABLE rekeyed REPLICA IDENTITY USING INDEX rekeyed_c");
        String identity = columns("rekeyed");
        assertThat(identity).as("the replica identity on another index").isNotEqualTo(moved);
        pg.execute(database, "ALTER TABLE rekeyed ADD COLUMN d int");
        assertThat(columns("rekeyed")).as("a column added").isNotEqualTo(identity);
        assertThat(columns("rekeyed")).as("nothing altered: the same").isEqualTo(columns("rekeyed"));
    }

    /** The keys of every row, read {@code size} rows at a time after the last key read, as the runner reads chunks. */
    private static List<String> readInChunks(SnapshotTable table, int size) throws Exception {
        List<String> keys = new ArrayList<>();
        int[] key = table.chunkKey();
        List<String> after = null;
        try (Connection c = pg.connect(database)) {
            while (true) {
                List<String> last = null;
                try (PreparedStatement s = c.prepareStatement(table.chunkSql(after != null, false, true))) {
                    int p = 1;
                    if (after != null) {
                        for (String v : after) {
                            s.setString(p++, v);
                        }
                    }
                    s.setInt(p, size);
                    try (ResultSet rs = s.executeQuery()) {
                        while (rs.next()) {
                            last = new ArrayList<>();
                            for (int k : key) {
                                last.add(rs.getString(k + 1));
                            }
                            keys.add(String.join(",", last));
                        }
                    }
                }
                if (last == null) {
                    return keys;
                }
                after = last;
                if (keys.size() > 1000) {
                    throw new AssertionError("read on and on: " + keys.subList(0, 20));
                }
            }
        }
    }

    @Test
    void aKeyIndexsIncludedColumnsAreNeitherKeyNorChunkKey() throws Exception {
        // INCLUDE columns may be NULL and the stream's key leaves them out: read by them, a row's read and
        // its changes had different keys (not ordered together), and a NULL one stopped the backfill
        pg.execute(database, "CREATE TABLE covered (id int, tag text, n int, PRIMARY KEY (id) INCLUDE (tag))",
                "INSERT INTO covered VALUES (1, 'x', 1), (2, NULL, 2), (3, 'y', 3)");
        SnapshotTable table = describe("public.covered");
        assertThat(table.chunkKeyNames()).containsExactly("id");
        assertThat(table.relation().columns().stream().filter(PgOutputMessage.Relation.Column::key)
                .map(PgOutputMessage.Relation.Column::name)).containsExactly("id");
        assertThat(readInChunks(table, 1)).containsExactly("1", "2", "3");
    }

    /**
     * A backfill's rows are keyed as the stream keys the table's changes (the same key columns, so
     * a row's read event and its changes hash alike and stay in order), whatever its replica
     * identity. A DEFERRABLE primary key is none: the stream flags no key column, and the backfill
     * flagged the key's, so every chunk's reads were keyed apart from the table's changes.
     */
    @Test
    void aTablesKeyColumnsAreTheStreamsWhateverItsReplicaIdentity() throws Exception {
        pg.execute(database, "CREATE TABLE deferred (id int PRIMARY KEY DEFERRABLE INITIALLY DEFERRED, n int)",
                "CREATE TABLE plain_key (id int PRIMARY KEY, n int)",
                "CREATE TABLE full_row (id int PRIMARY KEY, n int)", "ALTER TABLE full_row REPLICA IDENTITY FULL",
                "CREATE TABLE by_index (id int PRIMARY KEY, n int NOT NULL)", "CREATE UNIQUE INDEX by_n ON by_index (n)",
                "ALTER TABLE by_index REPLICA IDENTITY USING INDEX by_n");
        String slot = "keys_" + ProcessHandle.current().pid();
        pg.execute(database, "SELECT pg_create_logical_replication_slot('" + slot + "', 'pgoutput')");
        try {
            List<String> tables = List.of("deferred", "plain_key", "full_row", "by_index");
            for (String table : tables) {
                pg.execute(database, "INSERT INTO " + table + " VALUES (1, 1)");
            }
            java.util.Map<String, List<String>> streamed = new java.util.HashMap<>();
            try (Connection c = pg.connect(database); java.sql.Statement s = c.createStatement();
                 ResultSet rs = s.executeQuery("SELECT data FROM pg_logical_slot_peek_binary_changes('" + slot
                         + "', NULL, NULL, 'proto_version', '1', 'publication_names', 'p')")) {
                io.walhook.pgoutput.PgOutputDecoder decoder = new io.walhook.pgoutput.PgOutputDecoder();
                while (rs.next()) {
                    if (decoder.decode(rs.getBytes(1)) instanceof PgOutputMessage.Relation relation) {
                        streamed.put(relation.relationName(), keys(relation));
                    }
                }
            }
            for (String table : tables) {
                assertThat(keys(describe("public." + table).relation())).as(table).isEqualTo(streamed.get(table));
            }
            assertThat(streamed.get("deferred")).isEmpty();
            assertThat(readInChunks(describe("public.deferred"), 1)).as("read by its key all the same").containsExactly("1");
        } finally {
            pg.execute(database, "SELECT pg_drop_replication_slot('" + slot + "')");
        }
    }

    private static List<String> keys(PgOutputMessage.Relation relation) {
        return relation.columns().stream().filter(PgOutputMessage.Relation.Column::key)
                .map(PgOutputMessage.Relation.Column::name).toList();
    }

    /**
     * A publication's row filter with a {@code ?} operator (jsonb's {@code ?}, {@code ?|}): put in
     * the chunk's prepared statement as written, pgjdbc took each {@code ?} for a parameter, and
     * every backfill of the table failed ("No value specified for parameter"). A {@code ?} in a
     * string or a name is the filter's own and stays as it is.
     */
    @Test
    void aRowFilterWithQuestionMarkOperatorsReadsTheRowsItAccepts() throws Exception {
        org.junit.jupiter.api.Assumptions.assumeTrue(TestPostgres.defaultMajor() >= 15, "row filters came in PostgreSQL 15");
        pg.execute(database, "CREATE TABLE docs (id int PRIMARY KEY, body jsonb NOT NULL, \"why?\" text NOT NULL)",
                "INSERT INTO docs VALUES (1, '{\"k\": 1}', 'what?'), (2, '{\"k\": 2}', 'skip?'), (3, '{\"x\": 1}', 'what?'),"
                        + " (4, '{\"k\": 4}', E'back\\\\slash''?'), (5, '{\"z\": 5}', 'x'), (6, '{\"k\": 6}', 'x')",
                "CREATE PUBLICATION pf FOR TABLE docs WHERE ((body ? 'k' OR body ?| array['z']) AND \"why?\" <> 'skip?'"
                        + " AND \"why?\" <> E'back\\\\slash''?')");
        SnapshotTable docs;
        try (Connection c = pg.connect(database)) {
            docs = SnapshotTable.describe(c, "public.docs", "pf", "walhook");
        }
        assertThat(readInChunks(docs, 2)).containsExactly("1", "5", "6");
    }

    @Test
    void anInheritanceChildsRowsAreNotReadAsTheParents() throws Exception {
        // the child's rows are another table's (its changes come under its own name), maybe not published
        pg.execute(database, "CREATE TABLE parent (id int PRIMARY KEY, n int)",
                "CREATE TABLE child (secret text) INHERITS (parent)", "ALTER TABLE child ADD PRIMARY KEY (id)",
                "INSERT INTO parent VALUES (1, 1)", "INSERT INTO child VALUES (2, 2, 'the child''s secret')");
        assertThat(readInChunks(describe("public.parent"), 1)).containsExactly("1");
        assertThat(readInChunks(describe("public.child"), 1)).containsExactly("2");
    }

    @Test
    void aCaseInsensitiveKeyUniqueUnderACaseSensitiveIndexLosesNoRowBetweenChunks() throws Exception {
        boolean icu;
        try (Connection c = pg.connect(database); PreparedStatement s = c.prepareStatement(
                "SELECT count(*) > 0 FROM pg_catalog.pg_collation WHERE collprovider = 'i'");
             ResultSet rs = s.executeQuery()) {
            rs.next();
            icu = rs.getBoolean(1);
        }
        Assumptions.assumeTrue(icu, "this PostgreSQL was built without ICU: no nondeterministic collation to test");
        pg.execute(database,
                "CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)",
                "CREATE TABLE tags (k text COLLATE ci NOT NULL, n int)",
                "CREATE UNIQUE INDEX tags_k ON tags (k COLLATE \"C\")",
                "ALTER TABLE tags REPLICA IDENTITY USING INDEX tags_k",
                "INSERT INTO tags VALUES ('a', 1), ('A', 2), ('b', 3), ('B', 4)");
        // under the column's collation, 'a' and 'A' are equal: a chunk ending on one skipped the other
        assertThat(readInChunks(describe("public.tags"), 1)).containsExactly("A", "B", "a", "b");
    }

    @Test
    void aKeyIndexWhoseCollationChangedIsAnotherShape() throws Exception {
        pg.execute(database, "CREATE TABLE named (k text PRIMARY KEY)");
        SnapshotTable before = describe("public.named");
        assertThat(before.sameShape(describe("public.named"))).isTrue();
        pg.execute(database, "ALTER TABLE named ALTER COLUMN k TYPE text COLLATE \"C\"");
        // the same type: a cursor of the old order went on under the new one, and skipped rows
        assertThat(before.sameShape(describe("public.named"))).isFalse();
    }

    @Test
    void aKeyShapeNamesEachKeyColumnWithItsTypeAndCollation() throws Exception {
        pg.execute(database, "CREATE TABLE shaped (region text, n bigint, PRIMARY KEY (region, n))");
        String before = describe("public.shaped").keyShape();
        assertThat(before).isEqualTo("region text COLLATE pg_catalog.\"default\", n bigint");
        pg.execute(database, "ALTER TABLE shaped ALTER COLUMN region TYPE text COLLATE \"C\"");
        assertThat(describe("public.shaped").keyShape()).isNotEqualTo(before).contains("COLLATE pg_catalog.\"C\"");
    }

    /** Chunks are compared with the type's own operators: a key index ordered by others would skip rows between them. */
    @Test
    void aKeyIndexOrderedByAnotherOperatorClassIsRefusedNamingIt() throws Exception {
        pg.execute(database, "CREATE TABLE patterns (k text NOT NULL, n int)",
                "CREATE UNIQUE INDEX patterns_k ON patterns (k text_pattern_ops)",
                "ALTER TABLE patterns REPLICA IDENTITY USING INDEX patterns_k");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> describe("public.patterns"))
                .isInstanceOf(SnapshotTable.Refused.class)
                .hasMessageContaining("public.patterns").hasMessageContaining("patterns_k")
                .hasMessageContaining("text_pattern_ops");
        // a class used for a type that has none of its own (varchar: text's) is that type's default
        pg.execute(database, "CREATE TABLE codes (k varchar(10) PRIMARY KEY)");
        assertThat(describe("public.codes").keyShape()).startsWith("k character varying(10)");
    }

    @Test
    void aCitextKeyIndexedByTextsDefaultClassIsRefused() throws Exception {
        try {
            pg.execute(database, "CREATE EXTENSION IF NOT EXISTS citext");
        } catch (java.sql.SQLException e) {
            Assumptions.abort("this PostgreSQL has no citext extension: " + e.getMessage());
        }
        // text's default class over citext: case-sensitive, where citext's operators the chunks use are not
        pg.execute(database, "CREATE TABLE handles (k citext NOT NULL)",
                "CREATE UNIQUE INDEX handles_k ON handles (k text_ops)",
                "ALTER TABLE handles REPLICA IDENTITY USING INDEX handles_k");
        org.assertj.core.api.Assertions.assertThatThrownBy(() -> describe("public.handles"))
                .isInstanceOf(SnapshotTable.Refused.class).hasMessageContaining("text_ops");
    }

    /**
     * PostgreSQL 18 publishes stored generated columns when the publication says so ({@code
     * publish_generated_columns = stored}) or its column list names them: a read event has the
     * columns the stream's change events have, no more and no fewer. Virtual ones are never published.
     */
    @Test
    void aBackfillReadsTheColumnsTheStreamPublishesGeneratedOnesIncluded() throws Exception {
        PostgresServer pg18 = TestPostgres.shared(18);
        String db = pg18.createDatabase("snapshot_generated");
        pg18.execute(db, "CREATE TABLE gen (id int PRIMARY KEY, n int, doubled int GENERATED ALWAYS AS (n * 2) STORED,"
                        + " tripled int GENERATED ALWAYS AS (n * 3) VIRTUAL)",
                "CREATE TABLE listed (id int PRIMARY KEY, n int, doubled int GENERATED ALWAYS AS (n * 2) STORED)",
                "CREATE PUBLICATION with_generated FOR TABLE gen WITH (publish_generated_columns = stored)",
                "CREATE PUBLICATION without_generated FOR TABLE gen",
                "CREATE PUBLICATION listing FOR TABLE listed (id, doubled)");
        for (String[] pair : new String[][] {{"with_generated", "gen"}, {"without_generated", "gen"}, {"listing", "listed"}}) {
            List<String> streamed = streamedColumns(pg18, db, pair[0], pair[1]);
            try (Connection c = pg18.connect(db)) {
                SnapshotTable described = SnapshotTable.describe(c, "public." + pair[1], pair[0], "walhook");
                assertThat(described.relation().columns().stream().map(PgOutputMessage.Relation.Column::name).toList())
                        .as("publication %s", pair[0]).isEqualTo(streamed);
            }
        }
        assertThat(streamedColumns(pg18, db, "with_generated", "gen")).containsExactly("id", "n", "doubled");
    }

    /** The columns of the Relation message pgoutput sends for {@code table} through {@code publication}. */
    private static List<String> streamedColumns(PostgresServer server, String db, String publication, String table)
            throws Exception {
        String slot = "cols_" + publication;
        try (Connection c = server.connect(db); java.sql.Statement s = c.createStatement()) {
            s.execute("SELECT pg_create_logical_replication_slot('" + slot + "', 'pgoutput')");
            try {
                s.execute("INSERT INTO " + table + " (id, n) VALUES ((SELECT coalesce(max(id), 0) + 1 FROM " + table + "), 7)");
                try (ResultSet rs = s.executeQuery("SELECT data FROM pg_logical_slot_peek_binary_changes('" + slot
                        + "', NULL, NULL, 'proto_version', '1', 'publication_names', '" + publication + "')")) {
                    io.walhook.pgoutput.PgOutputDecoder decoder = new io.walhook.pgoutput.PgOutputDecoder();
                    while (rs.next()) {
                        if (decoder.decode(rs.getBytes(1)) instanceof PgOutputMessage.Relation relation) {
                            return relation.columns().stream().map(PgOutputMessage.Relation.Column::name).toList();
                        }
                    }
                }
            } finally {
                s.execute("SELECT pg_drop_replication_slot('" + slot + "')");
            }
        }
        throw new AssertionError("no Relation message for " + table + " through " + publication);
    }
}
