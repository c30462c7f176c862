package io.walhook.routing;

import static io.walhook.change.TestEvents.BOOL;
import static io.walhook.change.TestEvents.FLOAT8;
import static io.walhook.change.TestEvents.INT4;
import static io.walhook.change.TestEvents.INT4_ARRAY;
import static io.walhook.change.TestEvents.INT8;
import static io.walhook.change.TestEvents.JSONB;
import static io.walhook.change.TestEvents.NUMERIC;
import static io.walhook.change.TestEvents.TEXT;
import static io.walhook.change.TestEvents.TEXT_ARRAY;
import static io.walhook.change.TestEvents.UNCHANGED;
import static io.walhook.change.TestEvents.row;
import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;

import org.junit.jupiter.api.Nested;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

import dev.cel.common.values.NullValue;
import io.walhook.change.ChangeEvent;
import io.walhook.change.EventJsonWriter;
import io.walhook.change.TestEvents;

/** The row filters of docs/events.md on real events (built through the assembler) and on given variables. */
class CelFilterTest {

    static final String CONTRACT_EXAMPLE = "op == \"update\" && new.status != old.status && new.amount > 100";

    /** orders with an int and a numeric amount, REPLICA IDENTITY FULL so updates carry the old row. */
    static final TestEvents.Table ORDERS_INT = TestEvents.table("public", "orders").key("id", INT4)
            .column("status", TEXT).column("amount", INT8).column("note", TEXT).full();
    static final TestEvents.Table ORDERS_NUMERIC = TestEvents.table("public", "orders").key("id", INT4)
            .column("status", TEXT).column("amount", NUMERIC).column("note", TEXT).full();

    static CelVariables vars(String op, Map<String, ?> newRow, Map<String, ?> oldRow) {
        return CelVariables.of(op, "public", "orders", Map.of("id", 1), newRow, oldRow);
    }

    /**
     * A filter short enough and within the iteration budget that doubles a string forty times: it
     * ran the heap out (walhook exits on an OutOfMemoryError, and the same change came back after
     * the restart, for good). What {@code +} builds per evaluation is bounded: the filter fails on
     * the event, and a filter building less still works, the next evaluation starting afresh.
     */
    @Test
    void whatPlusBuildsInOneEvaluationIsBounded() {
        ChangeEvent event = TestEvents.table("public", "docs").key("id", INT4).column("doc", TEXT)
                .insert("1", "x".repeat(1 << 20));
        CelFilter doubling = CelFilter.compile("size([op]" + ".map(x, x + x)".repeat(40) + "[0]) > 0");
        assertThat(doubling.evaluate(CelVariables.of(event))).isEqualTo(CelFilter.Outcome.ERROR);
        assertThat(doubling.lastError()).contains("built more than 4194304").hasSizeLessThan(600).doesNotContain("insertinsert");
        CelFilter repeated = CelFilter.compile("size(new.doc" + " + new.doc".repeat(10) + ") > 0");
        assertThat(repeated.evaluate(CelVariables.of(event))).as("11 MiB of one row's text").isEqualTo(CelFilter.Outcome.ERROR);
        CelFilter lists = CelFilter.compile("size([[op]]" + ".map(l, l + l)".repeat(30) + "[0]) > 0");
        assertThat(lists.evaluate(CelVariables.of(event))).as("a list doubled").isEqualTo(CelFilter.Outcome.ERROR);
        // a function failing on a row's value: CEL quotes its arguments, which /status would show
        CelFilter unreadable = CelFilter.compile("int(new.doc) > 0");
        assertThat(unreadable.evaluate(CelVariables.of(event))).isEqualTo(CelFilter.Outcome.ERROR);
        assertThat(unreadable.lastError()).doesNotContain("xxxx").hasSizeLessThan(600);
        // what CEL's messages would quote of the row: a key that is a value, a timestamp or number it could not read
        for (String reading : List.of("{\"a\": 1}[new.doc] == 1", "timestamp(new.doc) > timestamp(0)", "uint(new.doc) > 0u",
                "duration(new.doc) > duration('1s')")) {
            CelFilter f = CelFilter.compile(reading);
            assertThat(f.evaluate(CelVariables.of(event))).as(reading).isEqualTo(CelFilter.Outcome.ERROR);
            assertThat(f.lastError()).as(reading).doesNotContain("xxxx").contains("evaluation error at <input>:");
        }
        // a map and a filter over a long list: each element added to the macro's own list counts once
        ChangeEvent items = TestEvents.table("public", "orders").key("id", INT4).column("items", JSONB)
                .insert("1", "[" + "{\"sku\": \"A\"},".repeat(4_000) + "{\"sku\": \"X\"}]");
        CelFilter longList = CelFilter.compile("new.items.filter(i, i.sku == 'X').size() == 1"
                + " && new.items.map(i, i.sku).size() == 4001");
        assertThat(longList.evaluate(CelVariables.of(items))).as(longList.lastError()).isEqualTo(CelFilter.Outcome.MATCH);
        CelFilter within = CelFilter.compile("size(new.doc + new.doc) == 2 * size(new.doc) && [1] + [2] == [1, 2]"
                + " && b'a' + b'b' == b'ab'");
        for (int i = 0; i < 3; i++) {
            assertThat(within.evaluate(CelVariables.of(event))).as("2 MiB, evaluation " + i).isEqualTo(CelFilter.Outcome.MATCH);
        }
    }

    @Test
    void filtersThatDifferOnlyInTheirConstantsAreTypeCheckedOnceAndEachKeepsItsOwnConstants() throws Exception {
        // CEL's checker builds its environment at every check: 10,000 tenant filters took seconds at start
        long before = CelFilter.typeChecks();
        List<CelFilter> tenants = new java.util.ArrayList<>();
        for (int t = 1; t <= 50; t++) {
            tenants.add(CelFilter.compile("new.shard_of_tenant == " + t + " && new.plan in [\"gold\", \"t" + t + "\"]"));
        }
        assertThat(CelFilter.typeChecks() - before).as("type checks for 50 filters of one shape").isEqualTo(1);
        for (int t = 1; t <= 50; t++) {
            CelVariables row = vars("insert", Map.of("shard_of_tenant", 7L, "plan", "t" + t), Map.of());
            assertThat(tenants.get(t - 1).matches(row)).as("tenant %d's filter on shard 7", t).isEqualTo(t == 7);
            assertThat(tenants.get(t - 1).matches(vars("insert", Map.of("shard_of_tenant", (long) t, "plan", "gold"),
                    Map.of()))).isTrue();
        }
        assertThat(tenants.get(2).terms()).as("the index reads each one's own terms")
                .isEqualTo(FilterTerms.of(dev.cel.parser.CelParserFactory.standardCelParserBuilder().build()
                        .parse("new.shard_of_tenant == 3 && new.plan in [\"gold\", \"t3\"]").getAst().getExpr()));

        // another kind of constant, another list length, another variable: a shape of its own, checked
        CelFilter.compile("new.shard_of_tenant == 1 && new.plan in [\"gold\", 3]"); // list(dyn)
        assertThat(CelFilter.compile("new.shard_of_tenant == 1 && new.plan in [\"gold\"]")
                .matches(vars("insert", Map.of("shard_of_tenant", 1L, "plan", "gold"), Map.of()))).isTrue();
        assertThat(CelFilter.typeChecks() - before).isEqualTo(3);
        CelFilter.compile("op == \"insert\"");
        assertThatThrownBy(() -> CelFilter.compile("op == 1")).isInstanceOf(CelFilterException.class)
                .hasMessageContaining("type error");
        assertThatThrownBy(() -> CelFilter.compile("ops == \"insert\"")).isInstanceOf(CelFilterException.class)
                .hasMessageContaining("undeclared reference to 'ops'");
    }

    @Nested
    class ContractExample {

        final CelFilter filter = CelFilter.compile(CONTRACT_EXAMPLE);

        @Test
        void matchesAnIntColumn() {
            assertThat(filter.matches(ORDERS_INT.update(row("1", "new", "150", null), "1", "paid", "150", null)))
                    .isTrue();
            assertThat(filter.matches(ORDERS_INT.update(row("1", "new", "100", null), "1", "paid", "100", null)))
                    .as("amount not above 100").isFalse();
            assertThat(filter.matches(ORDERS_INT.update(row("1", "paid", "150", null), "1", "paid", "150", null)))
                    .as("status unchanged").isFalse();
            assertThat(filter.errorCount()).isZero();
        }

        @Test
        void matchesANumericColumn() {
            assertThat(filter.matches(ORDERS_NUMERIC.update(row("1", "new", "100.01", null), "1", "paid", "100.01",
                    null))).isTrue();
            assertThat(filter.matches(ORDERS_NUMERIC.update(row("1", "new", "12.50", null), "1", "paid", "12.50",
                    null))).isFalse();
            // a numeric without a fraction arrives as a JSON integer: an int, compared all the same
            assertThat(filter.matches(ORDERS_NUMERIC.update(row("1", "new", "101", null), "1", "paid", "101", null)))
                    .isTrue();
            assertThat(filter.errorCount()).isZero();
        }

        @Test
        void doubleLiteralsCompareWithIntColumnsAndBack() {
            ChangeEvent intAmount = ORDERS_INT.insert("1", "paid", "150", null);
            ChangeEvent numericAmount = ORDERS_NUMERIC.insert("1", "paid", "150.5", null);
            for (String e : List.of("new.amount > 100.0", "new.amount > 100", "new.amount >= 150", "100 < new.amount",
                    "new.amount != 1", "new.amount in [150, 150.5]")) {
                CelFilter f = CelFilter.compile(e);
                assertThat(f.matches(intAmount)).as(e + " on int").isTrue();
                assertThat(f.matches(numericAmount)).as(e + " on numeric").isTrue();
            }
            assertThat(CelFilter.compile("new.amount == 150.0").matches(intAmount)).isTrue();
            assertThat(CelFilter.compile("double(new.amount) + 0.5 == 150.5").matches(intAmount)).isTrue();
        }

        @Test
        void updateWithoutTheOldRowIsAnErrorNotAMatch() {
            TestEvents.Table byKey = TestEvents.table("public", "orders").key("id", INT4).column("status", TEXT)
                    .column("amount", INT8);
            ChangeEvent update = byKey.update("1", "paid", "150");

            assertThat(filter.evaluate(CelVariables.of(update))).isEqualTo(CelFilter.Outcome.ERROR);
            assertThat(filter.lastError()).isEqualTo("filter failed on event " + update.id()
                    + ": evaluation error at <input>:35: key 'status' is not present in map.");
            CelFilter guarded = CelFilter.compile(
                    "op == \"update\" && has(old.status) && new.status != old.status && new.amount > 100");
            assertThat(guarded.evaluate(CelVariables.of(update))).isEqualTo(CelFilter.Outcome.NO_MATCH);
        }

        @Test
        void shortCircuitsBeforeTheRowsAreBuilt() {
            AtomicInteger serialized = new AtomicInteger();
            ChangeEvent insert = ORDERS_INT.insert("1", "paid", "150", null);
            CelVariables v = CelVariables.of(insert, () -> {
                serialized.incrementAndGet();
                return new EventJsonWriter().toJson(insert);
            });
            assertThat(filter.matches(v)).isFalse();
            assertThat(serialized).as("op alone decided").hasValue(0);

            CelFilter byAmount = CelFilter.compile("new.amount > 100");
            assertThat(byAmount.matches(v)).isTrue();
            assertThat(CelFilter.compile("key.id == 1").matches(v)).isTrue();
            assertThat(serialized).as("written once, shared").hasValue(1);
        }
    }

    @Nested
    class Values {

        @Test
        void stringFunctions() {
            ChangeEvent e = ORDERS_INT.insert("1", "paid-in-full", "1", "see https://example.org");
            assertThat(CelFilter.compile("new.status.startsWith(\"paid\")").matches(e)).isTrue();
            assertThat(CelFilter.compile("new.status.endsWith(\"full\")").matches(e)).isTrue();
            assertThat(CelFilter.compile("new.note.contains(\"example.org\")").matches(e)).isTrue();
            assertThat(CelFilter.compile("new.note.matches(\"^see https?://\")").matches(e)).isTrue();
            assertThat(CelFilter.compile("size(new.status) == 12").matches(e)).isTrue();
            assertThat(CelFilter.compile("new.status.startsWith(\"new\")").matches(e)).isFalse();
        }

        @Test
        void inLists() {
            ChangeEvent e = ORDERS_INT.insert("7", "shipped", "1", null);
            assertThat(CelFilter.compile("new.status in [\"paid\", \"shipped\"]").matches(e)).isTrue();
            assertThat(CelFilter.compile("new.status in [\"paid\", \"new\"]").matches(e)).isFalse();
            assertThat(CelFilter.compile("key.id in [5, 6, 7]").matches(e)).isTrue();
            assertThat(CelFilter.compile("op in [\"insert\", \"update\"] && table == \"orders\"").matches(e))
                    .isTrue();
        }

        @Test
        void nullValues() {
            ChangeEvent e = ORDERS_INT.insert("1", "paid", null, null);
            assertThat(CelFilter.compile("new.note == null").matches(e)).isTrue();
            assertThat(CelFilter.compile("new.note != null").matches(e)).isFalse();
            assertThat(CelFilter.compile("has(new.note)").matches(e)).as("present, and null").isTrue();
            assertThat(CelFilter.compile("new.status == null").matches(e)).isFalse();

            CelFilter compare = CelFilter.compile("new.amount > 1");
            assertThat(compare.evaluate(CelVariables.of(e))).as("null > 1 has no overload")
                    .isEqualTo(CelFilter.Outcome.ERROR);
            assertThat(compare.lastError()).contains("No matching overload for function '_>_'");
            CelFilter guarded = CelFilter.compile("new.amount != null && new.amount > 1");
            assertThat(guarded.evaluate(CelVariables.of(e))).isEqualTo(CelFilter.Outcome.NO_MATCH);
        }

        @Test
        void missingColumnsDoNotMatchAndAreReported() {
            ChangeEvent e = ORDERS_INT.insert("1", "paid", "150", null);
            CelFilter filter = CelFilter.compile("new.missing > 1");
            assertThat(filter.matches(e)).isFalse();
            assertThat(filter.matches(e)).isFalse();
            assertThat(filter.errorCount()).isEqualTo(2);
            assertThat(filter.lastError()).isEqualTo("filter failed on event " + e.id()
                    + ": evaluation error at <input>:3: key 'missing' is not present in map.");
            assertThat(CelFilter.compile("has(new.missing)").matches(e)).isFalse();
            assertThat(CelFilter.compile("!has(new.missing) || new.missing > 1").matches(e)).isTrue();
        }

        @Test
        void unchangedToastIsAbsentNotNull() {
            TestEvents.Table docs = TestEvents.table("public", "docs").key("id", INT4).column("body", TEXT);
            ChangeEvent e = docs.update("1", UNCHANGED);
            assertThat(CelFilter.compile("!has(new.body) && has(new.id)").matches(e)).isTrue();
            assertThat(CelFilter.compile("new.body == null").matches(e)).isFalse();
        }

        /**
         * A filter reads the columns it names: the row's others (a 10 MB jsonb document, say) are not
         * turned into maps and lists for it. Converted whole, a document of a million small objects
         * took several hundred MB of the heap the stream shares, for every event of the table.
         */
        @Test
        void aFilterConvertsOnlyTheColumnsItReads() {
            TestEvents.Table t = TestEvents.table("public", "documents").key("id", INT8).column("tenant_id", INT8)
                    .column("doc", JSONB);
            StringBuilder doc = new StringBuilder("[");
            for (int i = 0; i < 1_000_000; i++) {
                doc.append(i == 0 ? "" : ",").append("{\"n\":").append(i).append('}');
            }
            ChangeEvent e = t.insert("1", "42", doc.append(']').toString());
            CelFilter tenant = CelFilter.compile("new.tenant_id == 42 && has(new.doc)");
            assertThat(tenant.matches(t.insert("2", "42", "[]"))).as("warmed on a small row").isTrue();
            com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) java.lang.management
                    .ManagementFactory.getThreadMXBean();
            long before = threads.getCurrentThreadAllocatedBytes();
            assertThat(tenant.matches(e)).isTrue();
            long allocated = threads.getCurrentThreadAllocatedBytes() - before;
            assertThat(allocated).as("bytes allocated to evaluate a filter that does not read the document")
                    .isLessThan(1L << 20);
            // read, the document is all there
            assertThat(CelFilter.compile("new.doc.size() == 1000000 && new.doc[999999].n == 999999").matches(e))
                    .isTrue();
        }

        /**
         * A column that cannot be read fails the filters that read it, and only those: a filter on
         * another column of the row matches as it would.
         */
        @Test
        void aColumnThatCannotBeReadFailsOnlyTheFiltersReadingIt() {
            TestEvents.Table t = TestEvents.table("public", "documents").key("id", INT8).column("doc", JSONB);
            ChangeEvent e = t.insert("1", "[" + "9".repeat(1_000_001) + "]"); // beyond the filter reader's number length
            CelFilter onDoc = CelFilter.compile("new.doc.size() == 1");
            assertThat(onDoc.matches(e)).isFalse();
            assertThat(onDoc.lastError()).contains("column doc");
            assertThat(CelFilter.compile("new.id == 1").matches(e)).isTrue();
        }

        @Test
        void otherTypes() {
            TestEvents.Table t = TestEvents.table("public", "things").key("id", INT8).column("ok", BOOL)
                    .column("ratio", FLOAT8).column("doc", JSONB).column("tags", TEXT_ARRAY)
                    .column("scores", INT4_ARRAY).column("big", NUMERIC).column("nan", NUMERIC);
            ChangeEvent e = t.insert("9223372036854775807", "t", "0.25", "{\"a\": {\"b\": [1, 2.5, \"x\", null]}}",
                    "{red,\"green apple\"}", "{1,2,3}", "123456789012345678901234567890", "NaN");
            assertThat(CelFilter.compile("new.id == 9223372036854775807").matches(e)).isTrue();
            assertThat(CelFilter.compile("new.ok").matches(e)).as("a dyn result that is a bool").isTrue();
            assertThat(CelFilter.compile("new.ok == true && new.ratio < 0.5").matches(e)).isTrue();
            assertThat(CelFilter.compile("new.doc.a.b[0] == 1 && new.doc.a.b[1] > 2 && new.doc.a.b[3] == null")
                    .matches(e)).isTrue();
            assertThat(CelFilter.compile("\"green apple\" in new.tags && new.tags.size() == 2").matches(e)).isTrue();
            assertThat(CelFilter.compile("new.scores.exists(s, s > 2) && new.scores.all(s, s > 0)").matches(e))
                    .isTrue();
            assertThat(CelFilter.compile("new.big > 1e29").matches(e)).as("beyond 64 bits: a double").isTrue();
            assertThat(CelFilter.compile("new.nan == \"NaN\"").matches(e)).as("NaN stays a string").isTrue();
        }

        @Test
        void unicodeStrings() {
            ChangeEvent e = ORDERS_INT.insert("1", "grüße ✓ 🐘", "1", "東京");
            assertThat(CelFilter.compile("new.status == \"grüße ✓ 🐘\"").matches(e)).isTrue();
            assertThat(CelFilter.compile("size(new.status) == 9").matches(e)).as("code points, not UTF-16 units")
                    .isTrue();
            assertThat(CelFilter.compile("new.status.endsWith(\"🐘\") && new.note.startsWith(\"東\")").matches(e))
                    .isTrue();
            assertThat(CelFilter.compile("new.status == \"gr\\u00fc\\u00dfe \\u2713 \\U0001F418\"").matches(e))
                    .as("escapes").isTrue();
        }

        @Test
        void deletesAndTruncatesHaveEmptyMaps() {
            ChangeEvent delete = TestEvents.table("public", "orders").key("id", INT4).column("status", TEXT)
                    .delete("5", null);
            assertThat(CelFilter.compile("op == \"delete\" && key.id == 5 && size(new) == 0 && size(old) == 0")
                    .matches(delete)).isTrue();
            ChangeEvent truncate = ORDERS_INT.truncate();
            assertThat(CelFilter.compile("op == \"truncate\" && size(key) == 0 && schema == \"public\"")
                    .matches(truncate)).isTrue();
        }

        @Test
        void messagesHaveNoSchemaOrTable() {
            ChangeEvent message = TestEvents.message("audit", "hello".getBytes(StandardCharsets.UTF_8), true);
            assertThat(CelFilter.compile("op == \"message\"").matches(message)).isTrue();
            assertThat(CelFilter.compile("schema == null && table == null").matches(message)).isTrue();
            assertThat(CelFilter.compile("schema == \"public\"").matches(message)).isFalse();
            assertThat(CelFilter.compile("size(new) == 0 && size(old) == 0 && size(key) == 0").matches(message))
                    .isTrue();
            ChangeEvent outside = TestEvents.message("audit", new byte[] {(byte) 0xFF}, false);
            assertThat(CelFilter.compile("op == \"message\" && table == null").matches(outside)).isTrue();

            CelFilter onTable = CelFilter.compile("table.startsWith(\"order\")");
            assertThat(onTable.evaluate(CelVariables.of(message))).isEqualTo(CelFilter.Outcome.ERROR);
            assertThat(CelFilter.compile("table != null && table.startsWith(\"order\")").matches(message)).isFalse();
        }
    }

    @Nested
    class RuntimeErrors {

        @ParameterizedTest
        @ValueSource(strings = {"key.id / 0 == 1", "key.id % 0 == 1", "new.amount + \"x\" == \"1x\"",
            "new.status > 1", "int(new.status) > 1", "9223372036854775807 + key.id > 0", "new.amount",
            "[1, 2, 3].map(x, [1, 2, 3].map(y, x * y)).size() > 0 && new.list.all(a, new.list.all(b, a + b >= 0))"})
        void failuresAreErrorsNeverExceptions(String expression) {
            CelVariables v = vars("insert", Map.of("status", "paid", "amount", 5, "list", bigList()), null);
            CelFilter filter = CelFilter.compile(expression);
            assertThat(filter.evaluate(v)).isEqualTo(CelFilter.Outcome.ERROR);
            assertThat(filter.errorCount()).isEqualTo(1);
            assertThat(filter.lastError()).startsWith("filter failed: ").doesNotContain("\n");
        }

        /** A failure is reported once, then not again within the minute: an expression failing on every event of a busy table. */
        @Test
        void aFailureIsReportedFirstThenNotAgainAtOnce() {
            CelFilter filter = CelFilter.compile("key.id / 0 == 1");
            CelVariables v = vars("insert", Map.of(), null);
            assertThat(filter.evaluate(v)).isEqualTo(CelFilter.Outcome.ERROR);
            assertThat(filter.reportNow()).isTrue();
            for (int i = 0; i < 100; i++) {
                filter.evaluate(v);
                assertThat(filter.reportNow()).isFalse();
            }
            assertThat(filter.errorCount()).isEqualTo(101);
        }

        static List<Long> bigList() {
            List<Long> list = new ArrayList<>();
            for (long i = 0; i < 200; i++) {
                list.add(i);
            }
            return list;
        }

        @Test
        void iterationBudgetIsPerEvaluation() {
            List<Long> list = bigList();
            CelFilter filter = CelFilter.compile("new.list.exists(a, a == 199)");
            for (int i = 0; i < 100; i++) {
                assertThat(filter.matches(vars("insert", Map.of("list", list), null))).isTrue();
            }
            assertThat(filter.errorCount()).isZero();
        }

        @Test
        void aNonBooleanDynResultIsAnError() {
            CelFilter filter = CelFilter.compile("new.status");
            assertThat(filter.evaluate(vars("insert", Map.of("status", "paid"), null)))
                    .isEqualTo(CelFilter.Outcome.ERROR);
            assertThat(filter.lastError()).isEqualTo("filter failed: the result is String, not a boolean");
        }

        @Test
        void unreadableJsonIsAnError() {
            CelFilter filter = CelFilter.compile("new.status == \"paid\"");
            CelVariables broken = CelVariables.fromJson("{\"op\": \"insert\", \"new\": {".getBytes(StandardCharsets.UTF_8));
            assertThat(filter.evaluate(broken)).isEqualTo(CelFilter.Outcome.ERROR);
            assertThat(filter.evaluate(broken)).isEqualTo(CelFilter.Outcome.ERROR);
            assertThat(filter.lastError()).startsWith("filter failed: ").contains("cannot read the event's JSON");
            assertThat(filter.errorCount()).isEqualTo(2);
        }
    }

    @Nested
    class CompileErrors {

        @Test
        void syntaxErrorsNameThePosition() {
            assertThatThrownBy(() -> CelFilter.compile("op +")).isInstanceOfSatisfying(CelFilterException.class, e -> {
                assertThat(e.getMessage()).startsWith("filter: syntax error at 1:5: mismatched input '<EOF>'")
                        .doesNotContain("\n");
                assertThat(e.line()).isEqualTo(1);
                assertThat(e.column()).isEqualTo(5);
            });
            assertThatThrownBy(() -> CelFilter.compile("op == \"update\" &&\n  new.amount >> 1"))
                    .hasMessageStartingWith("filter: syntax error at 2:").hasMessageNotContaining("\n");
            assertThatThrownBy(() -> CelFilter.compile("new.status == 'unterminated"))
                    .hasMessageStartingWith("filter: syntax error at 1:15: ");
        }

        @Test
        void typeErrors() {
            assertThatThrownBy(() -> CelFilter.compile("op == 1")).isInstanceOf(CelFilterException.class)
                    .hasMessage("filter: type error at 1:4: found no matching overload for '_==_' applied to"
                            + " '(string, int)'");
            assertThatThrownBy(() -> CelFilter.compile("table == 1"))
                    .hasMessageStartingWith("filter: type error at 1:7: found no matching overload for '_==_'");
            assertThatThrownBy(() -> CelFilter.compile("row.id == 1"))
                    .hasMessage("filter: type error at 1:1: undeclared reference to 'row' (in container '')");
            assertThatThrownBy(() -> CelFilter.compile("op.lower() == \"x\""))
                    .hasMessageStartingWith("filter: type error at 1:9: undeclared reference to 'lower'");
            assertThatThrownBy(() -> CelFilter.compile("op == 1 || table == 2"))
                    .hasMessageEndingWith("(and 1 more error)");
        }

        @ParameterizedTest
        @ValueSource(strings = {"op", "1 + 2", "key", "[true]", "schema"})
        void nonBooleanResultsAreRejected(String expression) {
            assertThatThrownBy(() -> CelFilter.compile(expression)).isInstanceOf(CelFilterException.class)
                    .hasMessageStartingWith("filter must be a boolean expression, is ");
        }

        @Test
        void nonBooleanMessageNamesTheType() {
            assertThatThrownBy(() -> CelFilter.compile("op")).hasMessage("filter must be a boolean expression, is string");
            assertThatThrownBy(() -> CelFilter.compile("1 + 2")).hasMessage("filter must be a boolean expression, is int");
        }

        @Test
        void emptyExpressionsAreRejected() {
            assertThatThrownBy(() -> CelFilter.compile(null)).hasMessage("filter: the expression is empty");
            assertThatThrownBy(() -> CelFilter.compile(" \n")).hasMessage("filter: the expression is empty");
        }

        @Test
        void longExpressionsAreRejected() {
            String huge = "op == \"" + "x".repeat(100 * 1024) + "\"";
            assertThatThrownBy(() -> CelFilter.compile(huge))
                    .hasMessage("filter: the expression is 102408 characters long, at most 10000 are allowed");
            String justFits = "op == \"" + "x".repeat(CelFilter.MAX_EXPRESSION_LENGTH - 8) + "\"";
            assertThat(justFits.length()).isEqualTo(CelFilter.MAX_EXPRESSION_LENGTH);
            assertThat(CelFilter.compile(justFits).matches(vars("insert", null, null))).isFalse();
            String emoji = "op == \"" + "🐘".repeat(CelFilter.MAX_EXPRESSION_LENGTH - 8) + "\"";
            assertThat(CelFilter.compile(emoji)).as("counted in code points").isNotNull();
        }

        @ParameterizedTest
        @ValueSource(strings = {"(((", "new", ".a", "size(", "["})
        void deepExpressionsAreRejected(String unit) {
            String deep = switch (unit) {
                case "(((" -> "(".repeat(3000) + "true" + ")".repeat(3000);
                case "new" -> "new" + ".a".repeat(4900) + " == 1";
                case ".a" -> "1" + " + 1".repeat(2000) + " > 0";
                case "size(" -> "size(".repeat(1600) + "op" + ")".repeat(1600) + " > 0";
                default -> "[".repeat(4000) + "]".repeat(4000) + " == []";
            };
            assertThat(deep.length()).isLessThanOrEqualTo(CelFilter.MAX_EXPRESSION_LENGTH);
            assertThatThrownBy(() -> CelFilter.compile(deep)).isInstanceOf(CelFilterException.class)
                    .hasMessageContaining("recursion limit exceeded").hasMessageNotContaining("\n");
        }

        @Test
        void repeatedUnaryOperatorsAreFoldedNotNested() {
            assertThat(CelFilter.compile("!".repeat(9000) + "true").matches(vars("insert", null, null))).isTrue();
            assertThat(CelFilter.compile("-".repeat(9001) + "1 < 0").matches(vars("insert", null, null))).isTrue();
        }

        @Test
        void wideExpressionsCompileAndRun() {
            String wide = String.join(" || ", java.util.Collections.nCopies(700, "op == \"x\""));
            assertThat(wide.length()).isLessThanOrEqualTo(CelFilter.MAX_EXPRESSION_LENGTH);
            assertThat(CelFilter.compile(wide + " || op == \"insert\"").matches(vars("insert", null, null))).isTrue();
        }
    }

    @Nested
    class GivenVariables {

        @Test
        void javaValuesAreTypedAsInTheEvent() {
            Map<String, Object> row = new HashMap<>();
            row.put("i", 5);
            row.put("d", new java.math.BigDecimal("12.50"));
            row.put("n", null);
            row.put("nested", Map.of("list", List.of(1, 2.5f)));
            CelVariables v = CelVariables.of("update", "public", "orders", null, row, null);
            assertThat(v.toMap()).containsEntry("op", "update").containsEntry("key", Map.of())
                    .containsEntry("old", Map.of());
            @SuppressWarnings("unchecked")
            Map<String, Object> newRow = (Map<String, Object>) v.toMap().get("new");
            assertThat(newRow).containsEntry("i", 5L).containsEntry("d", 12.5).containsEntry("n", NullValue.NULL_VALUE)
                    .containsEntry("nested", Map.of("list", List.of(1L, 2.5)));
            assertThat(CelFilter.compile("new.i == 5 && new.d > 12 && new.n == null && new.nested.list[1] == 2.5")
                    .matches(v)).isTrue();
        }

        @Test
        void fromJsonReadsEveryVariable() {
            byte[] json = new EventJsonWriter().toJson(ORDERS_NUMERIC.update(row("1", "new", "200", null), "1",
                    "paid", "200.5", null));
            CelVariables v = CelVariables.fromJson(json);
            assertThat(CelFilter.compile(CONTRACT_EXAMPLE + " && schema == \"public\" && table == \"orders\"")
                    .matches(v)).isTrue();
            assertThat(v.toMap().get("old")).isEqualTo(Map.of("id", 1L, "status", "new", "amount", 200L,
                    "note", NullValue.NULL_VALUE));
        }

        @Test
        void aFilterServesSeveralThreads() throws Exception {
            CelFilter filter = CelFilter.compile(CONTRACT_EXAMPLE);
            List<Thread> threads = new ArrayList<>();
            AtomicInteger matched = new AtomicInteger();
            for (int t = 0; t < 4; t++) {
                threads.add(new Thread(() -> {
                    for (int i = 0; i < 2000; i++) {
                        if (filter.matches(vars("update", Map.of("status", "paid", "amount", 100 + i % 2),
                                Map.of("status", "new")))) {
                            matched.incrementAndGet();
                        }
                    }
                }));
            }
            threads.forEach(Thread::start);
            for (Thread thread : threads) {
                thread.join();
            }
            assertThat(matched).hasValue(4 * 1000);
            assertThat(filter.errorCount()).isZero();
        }
    }
}
