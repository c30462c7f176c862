package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

import io.walhook.change.ChangeEvent;
import io.walhook.change.TestEvents;

/** What a change must stay in order with, under REPLICA IDENTITY FULL with a primary key. */
class OrderingTest {

    private static final TestEvents.Table ACCOUNTS = TestEvents.table("public", "accounts").key("id", TestEvents.INT4)
            .column("balance", TestEvents.INT4).fullWithPrimaryKey();

    @Test
    void aFullTablesRowsAreOrderedByTheirPrimaryKey() {
        Ordering seven = Ordering.of(ACCOUNTS.insert("7", "100"));
        Ordering update = Ordering.of(ACCOUNTS.update(TestEvents.row("7", "100"), "7", "150"));
        Ordering eight = Ordering.of(ACCOUNTS.insert("8", "100"));
        assertThat(update.follows(seven)).isTrue();
        assertThat(eight.follows(seven)).as("another row goes independently").isFalse();
        // a key change: after the old key's changes, before the new one's
        Ordering moved = Ordering.of(ACCOUNTS.update(TestEvents.row("7", "150"), "8", "150"));
        assertThat(moved.follows(seven)).isTrue();
        assertThat(moved.follows(eight)).isTrue();
        assertThat(Ordering.of(ACCOUNTS.insert("9", "1")).follows(moved)).isFalse();
    }

    @Test
    void aChangeWhoseOldRowLacksTheKeyIsOrderedAgainstTheWholeTable() {
        ChangeEvent unnamed = ACCOUNTS.delete(null, "150");
        Ordering delete = Ordering.of(unnamed);
        assertThat(delete.follows(Ordering.of(ACCOUNTS.insert("8", "100")))).isTrue();
        assertThat(Ordering.of(ACCOUNTS.insert("9", "100")).follows(delete)).isTrue();
    }
}
