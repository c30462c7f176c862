package io.walhook.routing;

import static io.walhook.change.TestEvents.INT4;
import static io.walhook.change.TestEvents.INT8;
import static io.walhook.change.TestEvents.NUMERIC;
import static io.walhook.change.TestEvents.TEXT;
import static io.walhook.change.TestEvents.TIMESTAMPTZ;
import static io.walhook.change.TestEvents.row;

import java.util.ArrayList;
import java.util.List;
import java.util.function.IntFunction;

import io.walhook.change.ChangeEvent;
import io.walhook.change.EventJsonWriter;
import io.walhook.change.TestEvents;

/**
 * Cost of the example filter of docs/events.md ("Row filters") per event, variables included (not a
 * test, no assertion):
 * <pre>
 * mvn -o -q test-compile dependency:build-classpath -Dmdep.outputFile=target/cp.txt -Dmdep.includeScope=test
 * java -Xmx512m -cp target/classes:target/test-classes:$(cat target/cp.txt) io.walhook.routing.CelFilterBench
 * </pre>
 * Updates of a six-column REPLICA IDENTITY FULL table (half an int amount, half numeric), a third of
 * them matching. Each evaluation gets fresh {@link CelVariables}, as the router makes per event.
 */
public final class CelFilterBench {

    static final int EVENTS = 1_000_000;
    static final int DISTINCT = 1_000;

    public static void main(String[] args) {
        CelFilter filter = CelFilter.compile(CelFilterTest.CONTRACT_EXAMPLE);
        List<ChangeEvent> updates = updates();
        List<ChangeEvent> inserts = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            inserts.add(table(i % 2 == 0).insert(Integer.toString(i), "paid", "150", "a note",
                    "2026-11-29 16:00:00.123456+00", "customer " + i));
        }
        EventJsonWriter writer = new EventJsonWriter();
        List<byte[]> json = updates.stream().map(writer::toJson).toList();
        int d = updates.size();

        run("warm-up", filter, EVENTS / 2, i -> CelVariables.of(updates.get(i % d)));
        long matched = run("updates: JSON written + parsed, eval", filter, EVENTS,
                i -> CelVariables.of(updates.get(i % d)));
        run("updates: JSON given, parsed, eval", filter, EVENTS,
                i -> CelVariables.of(updates.get(i % d), () -> json.get(i % d)));
        run("inserts: op decides, eval only", filter, EVENTS, i -> CelVariables.of(inserts.get(i % 10)));
        System.out.printf("matched %d of %d updates%n", matched, EVENTS);
    }

    private static long run(String label, CelFilter filter, int n, IntFunction<CelVariables> variables) {
        long matched = 0;
        long start = System.nanoTime();
        for (int i = 0; i < n; i++) {
            if (filter.matches(variables.apply(i))) {
                matched++;
            }
        }
        long elapsed = System.nanoTime() - start;
        System.out.printf("%-40s %6.0f ns/eval  (%d evals, %d filter errors so far)%n", label, (double) elapsed / n,
                n, filter.errorCount());
        return matched;
    }

    static TestEvents.Table table(boolean numeric) {
        return TestEvents.table("public", "orders").key("id", INT4).column("status", TEXT)
                .column("amount", numeric ? NUMERIC : INT8).column("note", TEXT).column("created", TIMESTAMPTZ)
                .column("customer", TEXT).full();
    }

    static List<ChangeEvent> updates() {
        List<ChangeEvent> events = new ArrayList<>(DISTINCT);
        for (int i = 0; i < DISTINCT; i++) {
            boolean numeric = i % 2 == 0;
            String amount = numeric ? (50 + i % 100) + ".25" : Integer.toString(50 + i % 100);
            String oldStatus = i % 3 == 0 ? "paid" : "new";
            events.add(table(numeric).update(row(Integer.toString(i), oldStatus, amount, "a note",
                    "2026-11-29 16:00:00.123456+00", "customer " + i), Integer.toString(i), "paid", amount,
                    "a note", "2026-11-29 16:00:00.123456+00", "customer " + i));
        }
        return events;
    }
}
