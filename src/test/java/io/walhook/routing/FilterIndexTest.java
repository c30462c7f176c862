package io.walhook.routing;

import static org.assertj.core.api.Assertions.assertThat;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Random;
import java.util.Set;
import java.util.stream.IntStream;

import org.junit.jupiter.api.Test;

import io.walhook.change.ChangeEvent;
import io.walhook.change.Operation;
import io.walhook.change.TestEvents;

/**
 * The filter index: what filters' top-level conjuncts say about operations, tables and columns is
 * looked up rather than evaluated, and the router gives exactly what evaluating every filter gives.
 */
class FilterIndexTest {

    private static Subscription subscription(String name, String tables, Set<Operation> operations, String filter) {
        return TestSubscriptions.routed(name, tables, operations, filter);
    }

    private static FilterTerms terms(String filter) {
        return CelFilter.compile(filter).terms();
    }

    @Test
    void equalityAndInOnColumnsAreTerms() {
        FilterTerms t = terms("new.tenant_id == 42");
        assertThat(t.columns()).containsExactly(new FilterTerms.ColumnTerm("new", "tenant_id", Set.of(42L)));
        assertThat(t.complete()).isTrue();

        assertThat(terms("42 == new.tenant_id").columns()).containsExactly(
                new FilterTerms.ColumnTerm("new", "tenant_id", Set.of(42L)));
        assertThat(terms("new[\"region\"] in [\"eu\", \"us\"]").columns()).containsExactly(
                new FilterTerms.ColumnTerm("new", "region", Set.of("eu", "us")));
        // 42.0 and 42 are one key: CEL finds them equal
        assertThat(terms("key.id == 42.0").columns()).containsExactly(
                new FilterTerms.ColumnTerm("key", "id", Set.of(42L)));
        assertThat(terms("old.flag == null").columns().get(0).values()).hasSize(1);
        // from 2^53 on CEL's int-double equality is not exact: no term
        assertThat(terms("new.c == 9007199254740993")).isEqualTo(FilterTerms.NONE);
        assertThat(terms("new.c == 9007199254740992.0")).isEqualTo(FilterTerms.NONE);
        // CEL: 0 == 0.0 and 0.0 == -0.0, yet 0 != -0.0: zero has no one key
        assertThat(terms("new.c == 0")).isEqualTo(FilterTerms.NONE);
        assertThat(terms("new.c == -0.0")).isEqualTo(FilterTerms.NONE);
    }

    @Test
    void operationsAndTablesAreTerms() {
        FilterTerms t = terms("op in [\"insert\", \"update\"] && table == \"orders\" && op == \"update\"");
        assertThat(t.operations()).containsExactly("update");
        assertThat(t.tables()).containsExactly("orders");
        assertThat(t.schemas()).isNull();
        assertThat(t.columns()).isEmpty();
        assertThat(t.complete()).isTrue();
    }

    @Test
    void theRestOfAConjunctionIsNotATermAndIsEvaluated() {
        FilterTerms t = terms("new.tenant_id == 7 && new.amount > 100");
        assertThat(t.columns()).hasSize(1);
        assertThat(t.complete()).isFalse();
        assertThat(terms("new.a == 1 && new.b == 2").complete()).isFalse();
    }

    @Test
    void disjunctionsNegationsAndComparisonsAreNoTerms() {
        for (String filter : List.of("new.a == 1 || new.b == 2", "!(new.a == 1)", "new.a != 1", "new.a > 1",
                "has(new.a)", "new.a == new.b", "new.a in new.list", "new.a == [1]", "new.a == b\"x\"",
                "new.a.b == 1", "op == \"insert\" || table == \"x\"")) {
            assertThat(terms(filter)).as(filter).isEqualTo(FilterTerms.NONE);
        }
    }

    @Test
    void numbersHaveOneKeyWhateverTheirType() {
        assertThat(FilterTerms.key(42.0)).isEqualTo(42L);
        assertThat(FilterTerms.key(2.5)).isEqualTo(2.5);
        assertThat(FilterTerms.key(0x1p70)).isEqualTo(0x1p70);
        assertThat(FilterTerms.key(Double.NaN)).isNull();
        assertThat(FilterTerms.key(List.of(1L))).isNull();
    }

    private static final TestEvents.Table TENANTS = TestEvents.table("public", "orders").key("id", TestEvents.INT4)
            .column("tenant_id", TestEvents.INT8).column("amount", TestEvents.INT4);

    @Test
    void aTenantsEventEvaluatesOnlyItsTenantsFilter() {
        // each filter's second conjunct fails when evaluated (no column "missing"): the failures
        // count which filters were evaluated
        List<Subscription> tenants = IntStream.rangeClosed(1, 1000)
                .mapToObj(i -> subscription("t" + i, "public.orders", EnumSet.allOf(Operation.class),
                        "new.tenant_id == " + i + " && new.missing > 0"))
                .toList();
        Router router = new Router(tenants);
        assertThat(router.route(TENANTS.insert("1", "42", "5"))).isEmpty();
        for (int i = 0; i < tenants.size(); i++) {
            assertThat(tenants.get(i).filter().orElseThrow().errorCount()).as(tenants.get(i).name())
                    .isEqualTo(tenants.get(i).name().equals("t42") ? 1 : 0);
        }
    }

    @Test
    void oneTenantEachAndAnUnindexedOneInTheOrderGiven() {
        List<Subscription> subscriptions = new ArrayList<>();
        for (int i = 0; i < 100; i++) {
            subscriptions.add(subscription("t" + i, "public.orders", EnumSet.allOf(Operation.class),
                    "new.tenant_id == " + i));
        }
        Subscription big = subscription("big", "public.*", EnumSet.allOf(Operation.class), "new.amount > 100");
        Subscription everything = subscription("all", "*", EnumSet.allOf(Operation.class), null);
        subscriptions.add(50, big);
        subscriptions.add(0, everything);
        Router router = new Router(subscriptions);
        assertThat(router.route(TENANTS.insert("1", "70", "500")))
                .extracting(Subscription::name).containsExactly("all", "big", "t70");
        assertThat(router.route(TENANTS.insert("1", "3", "500")))
                .extracting(Subscription::name).containsExactly("all", "t3", "big");
        assertThat(router.route(TENANTS.insert("1", "3", "5")))
                .extracting(Subscription::name).containsExactly("all", "t3");
        // a delete's new row is empty: no tenant filter can hold
        assertThat(router.route(TENANTS.delete("1", null, null)))
                .extracting(Subscription::name).containsExactly("all");
    }

    @Test
    void aColumnTheFiltersCannotReadFailsOnlyTheFiltersReadingIt() {
        // a jsonb key longer than the filters' JSON reader takes: a filter reading that column fails with it,
        // and its subscription does not get the event; the tenants' filters read tenant_id alone, and match
        TestEvents.Table docs = TestEvents.table("public", "docs").key("id", TestEvents.INT4)
                .column("tenant_id", TestEvents.INT8).column("doc", TestEvents.JSONB);
        List<Subscription> tenants = IntStream.rangeClosed(1, 50)
                .mapToObj(i -> subscription("t" + i, "public.docs", EnumSet.allOf(Operation.class),
                        "new.tenant_id == " + i))
                .toList();
        Subscription onDoc = subscription("doc", "public.docs", EnumSet.allOf(Operation.class), "new.doc.size() > 0");
        Subscription everything = subscription("all", "public.docs", EnumSet.allOf(Operation.class), null);
        Router router = new Router(java.util.stream.Stream.concat(tenants.stream(), java.util.stream.Stream.of(onDoc,
                everything)).toList());
        ChangeEvent unreadable = docs.insert("1", "42", "{\"" + "k".repeat(50_001) + "\": 1}");
        assertThat(wants(tenants.get(41), unreadable)).as("evaluated alone, the tenant's filter matches").isTrue();
        assertThat(router.route(unreadable)).extracting(Subscription::name).containsExactly("t42", "all");
        assertThat(onDoc.filter().orElseThrow().errorCount()).isPositive();
        assertThat(onDoc.filter().orElseThrow().lastError()).contains("column doc");
        assertThat(tenants.get(41).filter().orElseThrow().errorCount()).isZero();
        assertThat(router.route(docs.insert("2", "42", "{\"k\": 1}"))).extracting(Subscription::name)
                .containsExactly("t42", "doc", "all");
    }

    @Test
    void anOperationNoIndexedFilterWantsBuildsNoRow() {
        // inserts only: an update is not looked up, so its unreadable row fails no filter
        TestEvents.Table docs = TestEvents.table("public", "docs").key("id", TestEvents.INT4)
                .column("tenant_id", TestEvents.INT8).column("doc", TestEvents.JSONB);
        Subscription t42 = subscription("t42", "public.docs", EnumSet.allOf(Operation.class),
                "op == \"insert\" && new.tenant_id == 42");
        Router router = new Router(List.of(t42));
        assertThat(router.route(docs.update("1", "42", "{\"" + "k".repeat(50_001) + "\": 1}"))).isEmpty();
        assertThat(t42.filter().orElseThrow().errorCount()).isZero();
    }

    // ---- the indexed router against evaluating every filter, on random subscriptions and events ----

    private static final String[] COLUMNS = {"id", "tenant", "amount", "name", "flag", "doc", "ghost"};
    private static final String[] LITERALS = {"0", "1", "2", "-1", "1.0", "2.5", "-0.0", "0.0", "1u", "0u", "\"a\"", "\"b\"",
            "\"1\"", "true", "false", "null", "9007199254740993", "9007199254740992.0"};
    private static final List<TestEvents.Table> TABLES = List.of(
            table("public", "orders"), table("public", "users"), table("audit", "orders").full());

    private static TestEvents.Table table(String schema, String name) {
        return TestEvents.table(schema, name).key("id", TestEvents.INT4).column("tenant", TestEvents.INT8)
                .column("amount", TestEvents.FLOAT8).column("name", TestEvents.TEXT)
                .column("flag", TestEvents.BOOL).column("doc", TestEvents.JSONB);
    }

    @Test
    void theIndexedRouterMatchesEvaluatingEveryFilter() {
        for (long seed = 1; seed <= Long.getLong("filterindex.seeds", 200); seed++) {
            Random random = new Random(seed);
            List<Subscription> subscriptions = new ArrayList<>();
            for (int i = 0; i < 40; i++) {
                subscriptions.add(randomSubscription(random, i));
            }
            Router router = new Router(subscriptions);
            for (int e = 0; e < 60; e++) {
                ChangeEvent event = randomEvent(random);
                List<Subscription> expected = subscriptions.stream().filter(s -> wants(s, event)).toList();
                assertThat(router.route(event)).as("seed %d, event %d: %s", seed, e, event)
                        .extracting(FilterIndexTest::described)
                        .containsExactlyElementsOf(expected.stream().map(FilterIndexTest::described).toList());
            }
        }
    }

    private static String described(Subscription s) {
        return s.name() + " " + s.tables() + " " + s.operations() + " " + s.filter().map(CelFilter::expression);
    }

    /** What routing means, without an index: table, operation, then the whole filter. */
    private static boolean wants(Subscription s, ChangeEvent event) {
        boolean table = event.relation() == null ? s.wantsMessages()
                : event.relation().routed() && s.matchesTable(event.schema(), event.table());
        return table && s.operations().contains(event.op())
                && s.filter().map(f -> f.matches(CelVariables.of(event))).orElse(true);
    }

    private static Subscription randomSubscription(Random random, int i) {
        String tables = List.of("*", "public.*", "public.orders", "*.orders", "audit.orders").get(random.nextInt(5));
        Set<Operation> ops = EnumSet.noneOf(Operation.class);
        for (Operation op : Operation.values()) {
            if (random.nextInt(4) > 0) {
                ops.add(op);
            }
        }
        if (ops.isEmpty()) {
            ops.add(Operation.INSERT);
        }
        String filter = random.nextInt(8) == 0 ? null : randomFilter(random);
        return subscription("s" + i, tables, ops, filter);
    }

    private static String randomFilter(Random random) {
        int conjuncts = 1 + random.nextInt(3);
        List<String> parts = new ArrayList<>();
        for (int c = 0; c < conjuncts; c++) {
            parts.add(randomConjunct(random));
        }
        return String.join(" && ", parts);
    }

    private static String randomConjunct(Random random) {
        String column = COLUMNS[random.nextInt(COLUMNS.length)];
        String row = List.of("new", "new", "key", "old").get(random.nextInt(4));
        String literal = LITERALS[random.nextInt(LITERALS.length)];
        return switch (random.nextInt(14)) {
            case 0 -> "op == \"" + Operation.values()[random.nextInt(Operation.values().length)].wireName() + "\"";
            case 1 -> "op in [\"insert\", \"update\"]";
            case 2 -> "table == \"" + (random.nextBoolean() ? "orders" : "users") + "\"";
            case 3 -> "schema in [\"audit\"" + (random.nextBoolean() ? ", \"public\"" : "") + "]";
            case 4, 5, 6 -> row + "." + column + " == " + literal;
            case 7 -> literal + " == " + row + "[\"" + column + "\"]";
            case 8 -> row + "." + column + " in [" + literal + ", " + LITERALS[random.nextInt(LITERALS.length)] + "]";
            case 9 -> "new." + column + " != " + literal;
            case 10 -> "has(new." + column + ")";
            case 11 -> "(new." + column + " == " + literal + " || op == \"delete\")";
            case 12 -> "!(key.id == " + literal + ")";
            default -> "double(new.amount) > 1.0";
        };
    }

    private static ChangeEvent randomEvent(Random random) {
        if (random.nextInt(30) == 0) {
            return TestEvents.message("p", new byte[] {'x'}, random.nextBoolean());
        }
        TestEvents.Table table = TABLES.get(random.nextInt(TABLES.size()));
        String[] values = randomRow(random);
        return switch (random.nextInt(5)) {
            case 0, 1 -> table.insert(values);
            case 2 -> {
                String[] old = table.identity() == io.walhook.pgoutput.ReplicaIdentity.FULL ? randomRow(random) : null;
                if (random.nextBoolean()) {
                    values[5] = TestEvents.UNCHANGED; // doc left out as an unchanged TOASTed value
                }
                yield table.update(old, values);
            }
            case 3 -> table.identity() == io.walhook.pgoutput.ReplicaIdentity.FULL ? table.delete(values)
                    : table.delete(values[0], null, null, null, null, null);
            default -> table.truncate();
        };
    }

    private static String[] randomRow(Random random) {
        return new String[] {
            pick(random, "0", "1", "2", "-1"),
            pick(random, "0", "1", "2", "9007199254740993", null),
            pick(random, "1", "2.5", "-0", "0", "NaN", "Infinity", "9007199254740992", null),
            pick(random, "a", "b", "1", "", null),
            pick(random, "t", "f", null),
            pick(random, "1", "2.5", "1.0", "\"a\"", "true", "null", "[1]", "{\"a\": 1}", null),
        };
    }

    private static String pick(Random random, String... choices) {
        return choices[random.nextInt(choices.length)];
    }
}
