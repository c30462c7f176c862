package io.walhook.pipeline;

import static org.assertj.core.api.Assertions.assertThat;

import java.sql.Connection;
import java.sql.ResultSet;
import java.sql.Statement;

import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import io.walhook.testing.PostgresServer;
import io.walhook.testing.TestPostgres;

/**
 * The primary key a REPLICA IDENTITY FULL table's rows are ordered by, as the reader reads it
 * from a real catalog: key columns only, in the table's column order, and none where an old row
 * may lack them.
 */
class PrimaryKeyColumnsTest {

    private static PostgresServer pg;
    private static String database;

    @BeforeAll
    static void database() throws Exception {
        pg = TestPostgres.shared();
        database = pg.createDatabase("primary_keys");
    }

    private static java.util.List<String> primaryKey(String table) throws Exception {
        try (Connection c = pg.connect(database); Statement s = c.createStatement();
             ResultSet rs = s.executeQuery("SELECT '" + table + "'::regclass::oid")) {
            rs.next();
            return ReplicationSource.primaryKeyColumns(c, rs.getLong(1));
        }
    }

    @Test
    void aCompositeKeyIsReadInTheTablesColumnOrderWithoutItsIncludedColumns() throws Exception {
        pg.execute(database, "CREATE TABLE covered (a int, b int, c int, d int, PRIMARY KEY (d, b) INCLUDE (c))",
                "ALTER TABLE covered REPLICA IDENTITY FULL");
        assertThat(primaryKey("covered")).containsExactly("b", "d");
    }

    @Test
    void aTableWithoutAPrimaryKeyHasNone() throws Exception {
        pg.execute(database, "CREATE TABLE unkeyed (a int UNIQUE NOT NULL, b int)", "ALTER TABLE unkeyed REPLICA IDENTITY FULL");
        assertThat(primaryKey("unkeyed")).isNull();
    }

    /**
     * Published through its root (publish_via_partition_root), a partition writes its old rows with
     * its own identity: under an index of other columns the key is NULL there, so the root has none
     * to order by. Partitions of FULL or the default identity carry it.
     */
    @Test
    void aPartitionedTableHasItsKeyOnlyWhileEveryPartitionsOldRowsCarryIt() throws Exception {
        pg.execute(database, "CREATE TABLE parted (id int, k int, code int NOT NULL, PRIMARY KEY (id, k))"
                + " PARTITION BY LIST (k)", "ALTER TABLE parted REPLICA IDENTITY FULL",
                "CREATE TABLE parted_1 PARTITION OF parted FOR VALUES IN (1)",
                "CREATE TABLE parted_2 PARTITION OF parted FOR VALUES IN (2)", "ALTER TABLE parted_2 REPLICA IDENTITY FULL");
        assertThat(primaryKey("parted")).containsExactly("id", "k");
        pg.execute(database, "CREATE UNIQUE INDEX parted_2_code ON parted_2 (code, k)",
                "ALTER TABLE parted_2 REPLICA IDENTITY USING INDEX parted_2_code");
        assertThat(primaryKey("parted")).isNull();
    }

    @Test
    void aPartitionOfAPartitionCountsToo() throws Exception {
        pg.execute(database, "CREATE TABLE deep (id int, k int, j int, PRIMARY KEY (id, k, j)) PARTITION BY LIST (k)",
                "CREATE TABLE deep_1 PARTITION OF deep FOR VALUES IN (1) PARTITION BY LIST (j)",
                "CREATE TABLE deep_1_1 PARTITION OF deep_1 FOR VALUES IN (1)");
        assertThat(primaryKey("deep")).containsExactly("id", "k", "j");
        pg.execute(database, "ALTER TABLE deep_1_1 REPLICA IDENTITY NOTHING");
        assertThat(primaryKey("deep")).isNull();
        assertThat(primaryKey("deep_1")).isNull();
    }
}
