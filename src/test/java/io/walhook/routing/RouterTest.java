package io.walhook.routing;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.util.EnumSet;
import java.util.List;
import java.util.Set;

import org.junit.jupiter.api.Test;

import io.walhook.change.ChangeEvent;
import io.walhook.change.Operation;
import io.walhook.change.TestEvents;

/** Which subscriptions an event goes to: table patterns, operations and filters, in the order given. */
class RouterTest {

    private static Subscription subscription(String name, String tables, Set<Operation> operations, String filter) {
        return TestSubscriptions.routed(name, tables, operations, filter);
    }

    private static final TestEvents.Table ORDERS = TestEvents.table("public", "orders").key("id", TestEvents.INT4)
            .column("amount", TestEvents.INT4);
    private static final TestEvents.Table USERS = TestEvents.table("public", "users").key("id", TestEvents.INT4)
            .column("amount", TestEvents.INT4);

    private final Subscription inserts = subscription("inserts", "public.orders", EnumSet.of(Operation.INSERT), null);
    private final Subscription big = subscription("big", "public.*", EnumSet.allOf(Operation.class), "new.amount > 100");
    private final Subscription users = subscription("users", "public.users", EnumSet.allOf(Operation.class), null);
    private final Router router = new Router(List.of(inserts, big, users));

    @Test
    void everyMatchInTheOrderGiven() {
        assertThat(router.route(ORDERS.insert("1", "500"))).containsExactly(inserts, big);
        assertThat(router.route(USERS.insert("1", "500"))).containsExactly(big, users);
        assertThat(router.route(USERS.update("1", "500"))).containsExactly(big, users);
    }

    @Test
    void oneMatchIsTheSameUnmodifiableListEachTime() {
        ChangeEvent small = ORDERS.insert("1", "5");
        List<Subscription> first = router.route(small);
        assertThat(first).containsExactly(inserts);
        assertThat(router.route(ORDERS.insert("2", "7"))).isSameAs(first);
        assertThatThrownBy(() -> first.add(big)).isInstanceOf(UnsupportedOperationException.class);
        // a filter that turns the other way, an operation only one wants: one match each
        assertThat(router.route(ORDERS.update("1", "500"))).containsExactly(big);
        assertThat(router.route(USERS.update("1", "5"))).containsExactly(users);
    }

    @Test
    void noMatchIsEmpty() {
        assertThat(router.route(ORDERS.update("1", "5"))).isEmpty();
        assertThat(router.route(TestEvents.table("sales", "orders").key("id", TestEvents.INT4).insert("1"))).isEmpty();
    }
}
