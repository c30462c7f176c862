package io.walhook.routing;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;

import io.walhook.change.ChangeEvent;
import io.walhook.change.TestEvents;
import io.walhook.change.Operation;

/**
 * Routing cost per event for 1, 10 and 100 subscriptions (a benchmark, not a test):
 * {@code java -Xmx512m -cp target/test-classes:target/classes:$(cat target/quickstart.classpath) io.walhook.routing.RoutingBench}.
 * A tenth of the subscriptions carry a CEL filter; the rest differ by table pattern and operation.
 * Reports routing alone and routing plus writing each matched event once per format.
 */
public final class RoutingBench {

    private RoutingBench() {
    }

    public static void main(String[] args) {
        ChangeEvent event = TestEvents.table("public", "orders").key("id", TestEvents.INT4)
                .column("status", TestEvents.TEXT).column("amount", 1700).insert("42", "paid", "120.50");
        EventEncoder encoder = new EventEncoder("/walhook/bench", Map.of());
        System.out.printf("%-14s %14s %14s %10s%n", "subscriptions", "route ns/evt", "route+write", "matched");
        for (int n : new int[] {1, 10, 100}) {
            Router router = new Router(subscriptions(n));
            int matched = router.route(event).size();
            measure(router, event, encoder, 200_000); // warm-up
            long[] ns = measure(router, event, encoder, 1_000_000);
            System.out.printf("%-14d %14.0f %14.0f %10d%n", n, ns[0] / 1e6, ns[1] / 1e6, matched);
        }
    }

    private static long[] measure(Router router, ChangeEvent event, EventEncoder encoder, int events) {
        // one method per loop: compiled as one, the writing loop's inlining would change the routing loop's
        return new long[] {routingOnly(router, event, events), routingAndWriting(router, event, encoder, events)};
    }

    private static long routingOnly(Router router, ChangeEvent event, int events) {
        long sink = 0;
        long start = System.nanoTime();
        for (int i = 0; i < events; i++) {
            sink += router.route(event).size();
        }
        long routing = System.nanoTime() - start;
        if (sink == 42) {
            System.out.print("");
        }
        return routing * 1_000_000L / events;
    }

    private static long routingAndWriting(Router router, ChangeEvent event, EventEncoder encoder, int events) {
        long sink = 0;
        long start = System.nanoTime();
        for (int i = 0; i < events; i++) {
            byte[][] json = new byte[1][];
            java.util.function.Supplier<byte[]> once = () -> json[0] != null ? json[0] : (json[0] = encoder.json(event));
            List<Subscription> matched = router.route(event); // as RoutingLoop: filters read the tuples
            if (!matched.isEmpty()) {
                sink += encoder.encode(event, EventFormat.JSON, Projection.ALL, once).body().length;
            }
        }
        long writing = System.nanoTime() - start;
        if (sink == 42) {
            System.out.print("");
        }
        return writing * 1_000_000L / events;
    }

    private static List<Subscription> subscriptions(int n) {
        List<Subscription> subscriptions = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            String tables = switch (i % 4) {
                case 0 -> "public.orders";
                case 1 -> "public.*";
                case 2 -> "sales.*";
                default -> "*.order*";
            };
            Optional<CelFilter> filter = i % 10 == 9 ? Optional.of(CelFilter.compile("new.amount > " + i))
                    : Optional.empty();
            subscriptions.add(new Subscription("s" + i, List.of(TablePattern.parse(tables)),
                    i % 3 == 0 ? EnumSet.allOf(Operation.class) : EnumSet.of(Operation.INSERT, Operation.UPDATE), filter,
                    new Destination.Webhook(java.net.URI.create("http://127.0.0.1:9/" + i), List.of(), Map.of()),
                    EventFormat.JSON, 1, 0, Projection.ALL, true));
        }
        return subscriptions;
    }
}
