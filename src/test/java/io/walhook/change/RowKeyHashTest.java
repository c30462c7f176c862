package io.walhook.change;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.ByteBuffer;
import java.util.List;

import org.junit.jupiter.api.Test;

import io.walhook.pgoutput.TupleData;

/**
 * The hash that puts a row's changes in one lane: its formula is pinned, since parked events keep
 * their lane across restarts (the table's OID, then each key column's bytes and rank among the key
 * columns; under REPLICA IDENTITY FULL the primary key's, and the OID alone without one).
 */
class RowKeyHashTest {

    private static final TestEvents.Table ORDERS = TestEvents.table("public", "orders").key("id", TestEvents.INT4)
            .column("status", TestEvents.TEXT).key("region", TestEvents.TEXT);

    /** The formula, spelled out over slices. */
    private static int expected(ChangeEvent event, TupleData tuple) {
        int h = Long.hashCode(event.relation().oid());
        int rank = 0;
        for (int i = 0; i < tuple.size(); i++) {
            if (event.relation().isKey(i)) {
                if (tuple.hasValue(i)) {
                    ByteBuffer value = tuple.slice(i);
                    while (value.hasRemaining()) {
                        h = 31 * h + value.get();
                    }
                }
                h = 31 * h + rank++;
            }
        }
        return h;
    }

    @Test
    void hashesTheKeyColumnsBytesAndIndexesOnly() {
        ChangeEvent insert = ORDERS.insert("42", "new", "eu-ü");
        assertThat(insert.rowKeyHash()).isEqualTo(expected(insert, insert.newRow()));
        // the non-key column does not count: a status change stays in the row's lane
        assertThat(ORDERS.insert("42", "paid", "eu-ü").rowKeyHash()).isEqualTo(insert.rowKeyHash());
        assertThat(ORDERS.insert("43", "new", "eu-ü").rowKeyHash()).isNotEqualTo(insert.rowKeyHash());
        // a NULL key column counts by its index alone
        ChangeEvent nullRegion = ORDERS.insert("42", "new", null);
        assertThat(nullRegion.rowKeyHash()).isEqualTo(expected(nullRegion, nullRegion.newRow()));
        // a delete hashes by its key, alike the insert of the same row
        assertThat(ORDERS.delete("42", null, "eu-ü").rowKeyHash()).isEqualTo(insert.rowKeyHash());
    }

    /**
     * An update that kept a key column stored out of line: the server sends the key ('K') and marks
     * the column unchanged in the new row. The row's key after it is the same: one lane, in order.
     * It hashed without that column's value, as every such update of the table did.
     */
    @Test
    void anUpdateKeepingAKeyStoredOutOfLineStaysInItsRowsLane() {
        ChangeEvent insert = ORDERS.insert("42", "new", "eu-ü");
        ChangeEvent kept = ORDERS.updateWithKey(TestEvents.row("42", null, "eu-ü"), "42", "paid", TestEvents.UNCHANGED);
        assertThat(kept.rowKeyHash()).isEqualTo(insert.rowKeyHash());
        assertThat(kept.newRowKeyHash()).isEqualTo(insert.rowKeyHash());
        ChangeEvent moved = ORDERS.updateWithKey(TestEvents.row("42", null, "eu-ü"), "42", "paid", "us");
        assertThat(moved.newRowKeyHash()).as("a key that did change").isEqualTo(ORDERS.insert("42", "new", "us").rowKeyHash());
    }

    @Test
    void addingOrDroppingAnotherColumnKeepsARowInItsLane() {
        TestEvents.Table before = TestEvents.table("public", "orders").column("note", TestEvents.TEXT)
                .key("id", TestEvents.INT4).column("status", TestEvents.TEXT);
        TestEvents.Table added = before.column("amount", TestEvents.INT4);
        TestEvents.Table dropped = TestEvents.table("public", "orders").key("id", TestEvents.INT4)
                .column("status", TestEvents.TEXT);

        int hash = before.insert("n", "7", "new").rowKeyHash();
        assertThat(added.update("n", "7", "paid", "10").rowKeyHash()).as("ALTER TABLE ADD COLUMN").isEqualTo(hash);
        assertThat(dropped.delete("7", null).rowKeyHash()).as("ALTER TABLE DROP COLUMN note").isEqualTo(hash);
    }

    @Test
    void aTableWithReplicaIdentityFullHashesByTheTableSinceItsValuesChangeWithEveryUpdate() {
        TestEvents.Table accounts = TestEvents.table("public", "accounts").key("id", TestEvents.INT4)
                .column("balance", TestEvents.INT4).full();
        ChangeEvent insert = accounts.insert("7", "100");
        ChangeEvent first = accounts.update(TestEvents.row("7", "100"), "7", "150");
        ChangeEvent second = accounts.update(TestEvents.row("7", "150"), "7", "90");
        ChangeEvent delete = accounts.delete("7", "90");

        // the old row of each update differs, yet they are one row's changes: one lane, in order
        assertThat(List.of(insert, first, second, delete)).extracting(ChangeEvent::rowKeyHash)
                .containsOnly(Long.hashCode(insert.relation().oid()));
        assertThat(accounts.insert("8", "100").rowKeyHash()).as("the whole table").isEqualTo(insert.rowKeyHash());
    }

    /**
     * Under FULL with a primary key, a row's changes hash by that key, as under the default identity:
     * one row's changes share a lane, other rows' do not wait behind them (a failing row held back
     * the whole table). An update that changes the key is ordered after the old key's changes and
     * before the new one's.
     */
    @Test
    void aTableWithReplicaIdentityFullAndAPrimaryKeyHashesItsRowsByThatKey() {
        TestEvents.Table plain = TestEvents.table("public", "accounts").key("id", TestEvents.INT4)
                .column("balance", TestEvents.INT4);
        TestEvents.Table accounts = plain.fullWithPrimaryKey();
        ChangeEvent insert = accounts.insert("7", "100");
        ChangeEvent first = accounts.update(TestEvents.row("7", "100"), "7", "150");
        ChangeEvent delete = accounts.delete("7", "150");
        assertThat(List.of(insert, first, delete)).extracting(ChangeEvent::rowKeyHash).containsOnly(insert.rowKeyHash());
        assertThat(first.newRowKeyHash()).isEqualTo(insert.rowKeyHash());
        assertThat(accounts.insert("8", "100").rowKeyHash()).as("another row").isNotEqualTo(insert.rowKeyHash());
        assertThat(insert.rowKeyHash()).as("as the default identity hashes it").isEqualTo(plain.insert("7", "1").rowKeyHash());
        ChangeEvent rekeyed = accounts.update(TestEvents.row("7", "150"), "9", "150");
        assertThat(rekeyed.rowKeyHash()).isEqualTo(insert.rowKeyHash());
        assertThat(rekeyed.newRowKeyHash()).isEqualTo(accounts.insert("9", "0").rowKeyHash());
        // another key shape than FULL's without a key and than the default identity's: delivery orders the
        // first change after a switch against the whole table
        assertThat(java.util.Set.of(insert.relation().keyShape(), plain.insert("7", "1").relation().keyShape(),
                accounts.full().insert("7", "1").relation().keyShape())).hasSize(3);
    }

    /**
     * An update or delete under FULL whose old row lacks the primary key (a partition of another
     * identity, published through its root, writes NULL there) does not name its row: ordered against
     * the whole table, not by a key every such row shares.
     */
    @Test
    void aFullChangeWhoseOldRowLacksThePrimaryKeyNamesNoRow() {
        TestEvents.Table accounts = TestEvents.table("public", "accounts").key("id", TestEvents.INT4)
                .column("balance", TestEvents.INT4).fullWithPrimaryKey();
        assertThat(accounts.delete(null, "150").rowUnnamed()).isTrue();
        assertThat(accounts.update(TestEvents.row(null, "150"), "7", "90").rowUnnamed()).isTrue();
        assertThat(accounts.delete("7", "150").rowUnnamed()).isFalse();
        assertThat(accounts.update(TestEvents.row("7", "150"), "7", "90").rowUnnamed()).isFalse();
        assertThat(accounts.update("7", "90").rowUnnamed()).as("an update without its old row kept its key").isFalse();
        assertThat(accounts.insert("7", "90").rowUnnamed()).isFalse();
        assertThat(accounts.full().delete(null, "150").rowUnnamed()).as("ordered by table anyway").isFalse();
    }

    @Test
    void hashIntoFoldsSignedBytesInOrder() {
        TupleData tuple = TupleData.builder().textBytes(new byte[] {1, (byte) 0xC3, (byte) 0xBC, 127}).build();
        int h = 17;
        for (byte b : new byte[] {1, (byte) 0xC3, (byte) 0xBC, 127}) {
            h = 31 * h + b;
        }
        assertThat(tuple.hashInto(0, 17)).isEqualTo(h);
        assertThat(tuple.detach().hashInto(0, 17)).isEqualTo(h);
    }
}
