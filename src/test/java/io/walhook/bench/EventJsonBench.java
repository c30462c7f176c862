package io.walhook.bench;

import java.lang.management.ManagementFactory;
import java.util.Map;

import io.walhook.change.ChangeEvent;
import io.walhook.change.TestEvents;
import io.walhook.routing.CelFilter;
import io.walhook.routing.CelVariables;
import io.walhook.routing.EventEncoder;

/**
 * The routing thread's per-event work on the drain benchmark's row (bigint key, text, numeric,
 * timestamptz): writing the event JSON, and a filter's variables (a benchmark, not a test):
 * {@code java -Xmx512m -cp "target/test-classes:target/classes:$(cat target/quickstart.classpath)" io.walhook.bench.EventJsonBench}.
 * Prints nanoseconds and bytes allocated per event.
 */
public final class EventJsonBench {

    private static final int EVENTS = 2_000_000;

    private EventJsonBench() {
    }

    public static void main(String[] args) {
        ChangeEvent event = TestEvents.table("public", "bench").key("id", TestEvents.INT8)
                .column("customer", TestEvents.TEXT).column("amount", TestEvents.NUMERIC)
                .column("created_at", TestEvents.TIMESTAMPTZ)
                .insert("123456", "customer-456", "1234.56", "2026-11-29 16:00:00.123456+00");
        EventEncoder encoder = new EventEncoder("/walhook/bench", Map.of());
        CelFilter filter = CelFilter.compile("new.amount > 100.0 && new.customer.startsWith('customer-')");
        for (int round = 0; round < 3; round++) {
            run("event JSON", EVENTS, () -> encoder.json(event).length);
            run("filter, JSON given", EVENTS, () -> {
                byte[] json = encoder.json(event);
                return filter.matches(CelVariables.of(event, () -> json)) ? 1 : 0;
            });
            run("filter, variables from tuples", EVENTS, () -> filter.matches(CelVariables.of(event)) ? 1 : 0);
        }
    }

    private interface Work {
        long once();
    }

    private static void run(String label, int n, Work work) {
        com.sun.management.ThreadMXBean threads = (com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean();
        long sink = 0;
        long bytes = threads.getCurrentThreadAllocatedBytes();
        long start = System.nanoTime();
        for (int i = 0; i < n; i++) {
            sink += work.once();
        }
        long ns = System.nanoTime() - start;
        bytes = threads.getCurrentThreadAllocatedBytes() - bytes;
        System.out.printf("%-32s %8.0f ns/event %8.0f B/event  (%d)%n", label, (double) ns / n, (double) bytes / n,
                sink);
    }
}
