package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;
import static org.awaitility.Awaitility.await;

import java.net.URI;
import java.time.Clock;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.ToIntFunction;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.vertx.core.Vertx;
import io.walhook.change.ChangeEvent;
import io.walhook.change.Operation;
import io.walhook.change.TestEvents;
import io.walhook.pgoutput.Lsn;
import io.walhook.routing.DeliveryLimits;
import io.walhook.routing.Destination;
import io.walhook.routing.EventEncoder;
import io.walhook.routing.EventFormat;
import io.walhook.routing.Projection;
import io.walhook.routing.RetryPolicy;
import io.walhook.routing.Subscription;
import io.walhook.routing.TablePattern;
import io.walhook.source.SourceFixture;
import io.walhook.testing.TestPostgres;
import io.walhook.testing.WebhookReceiver;

/**
 * The dispatcher on its own, between a real PostgreSQL (its durable queue) and a real HTTP
 * receiver that fails as each test says: per-row isolation of failures, the durable queue and
 * its drain, identity, and order under random failures.
 */
class DispatcherTest {

    private static final Duration WAIT = Duration.ofSeconds(60);
    private static final ObjectMapper JSON = new ObjectMapper();
    private static final TestEvents.Table ITEMS = TestEvents.table("public", "items").key("id", TestEvents.INT4)
            .column("n", TestEvents.INT4);
    private static Vertx vertx;
    private static WebhookClient client;

    private final List<Dispatcher> dispatchers = new ArrayList<>();
    private final List<WebhookReceiver> receivers = new ArrayList<>();
    private final EventEncoder encoder = new EventEncoder("/walhook/test", Map.of());
    private final AtomicInteger acknowledged = new AtomicInteger();
    private final Set<String> paused = ConcurrentHashMap.newKeySet();
    private long nextLsn = 0x1000_0000L;
    /** The next version of each row: every change of a row carries one more. */
    private final Map<Integer, Integer> versions = new java.util.HashMap<>();
    private SourceFixture database;
    private ParkedEventStore store;

    @BeforeAll
    static void startClient() {
        vertx = Vertx.vertx();
        client = new WebhookClient(vertx);
    }

    @AfterAll
    static void stopClient() {
        client.close();
        vertx.close().toCompletionStage().toCompletableFuture().join();
    }

    @AfterEach
    void stop() throws Exception {
        dispatchers.forEach(Dispatcher::close);
        receivers.forEach(WebhookReceiver::close);
        if (database != null) {
            database.close();
        }
    }

    private Dispatcher dispatcher(Duration retryWindow) throws Exception {
        return dispatcher(retryWindow, 4000);
    }

    private Dispatcher dispatcher(Duration retryWindow, int bufferEvents) throws Exception {
        return dispatcher(retryWindow, bufferEvents, Dispatcher.Settings.HOLD_LIMIT);
    }

    private Dispatcher dispatcher(Duration retryWindow, int bufferEvents, Duration holdLimit) throws Exception {
        return dispatcher(retryWindow, bufferEvents, holdLimit, Dispatcher.Settings.MEMORY_BYTES);
    }

    private Dispatcher dispatcher(Duration retryWindow, int bufferEvents, Duration holdLimit, long memoryBytes)
            throws Exception {
        database = new SourceFixture(TestPostgres.shared(), "dispatch");
        store = new ParkedEventStore(database.dataSource, "walhook");
        Dispatcher dispatcher = new Dispatcher(Clock.systemUTC(), new Dispatcher.Settings(Duration.ofSeconds(2),
                Duration.ofMillis(300), retryWindow, Duration.ofSeconds(1), 4, bufferEvents, 64L << 20, holdLimit,
                memoryBytes), store,
                DeliveryMetrics.NONE, paused::contains,
                s -> new WebhookTransport(client, (Destination.Webhook) s.destination(), Clock.systemUTC(),
                        Duration.ofSeconds(2), false));
        dispatchers.add(dispatcher);
        return dispatcher;
    }

    /** A dispatcher of default settings whose webhooks go through {@code webhooks} (a client with its own gate). */
    private Dispatcher dispatcher(WebhookClient webhooks) throws Exception {
        return dispatcher(s -> new WebhookTransport(webhooks, (Destination.Webhook) s.destination(), Clock.systemUTC(),
                Duration.ofSeconds(2), false));
    }

    /** As {@link #dispatcher(WebhookClient)}, each request given {@code timeout}. */
    private Dispatcher dispatcher(WebhookClient webhooks, Duration timeout) throws Exception {
        return dispatcher(s -> new WebhookTransport(webhooks, (Destination.Webhook) s.destination(), Clock.systemUTC(),
                timeout, false));
    }

    /** A receiver's handler holding its request until {@code latch} opens, or {@code seconds} pass. */
    private static void hold(java.util.concurrent.CountDownLatch latch, int seconds) {
        try {
            latch.await(seconds, java.util.concurrent.TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    private Dispatcher dispatcher(java.util.function.Function<Subscription, Transport> transports) throws Exception {
        database = new SourceFixture(TestPostgres.shared(), "dispatch");
        store = new ParkedEventStore(database.dataSource, "walhook");
        Dispatcher dispatcher = new Dispatcher(Clock.systemUTC(), new Dispatcher.Settings(Duration.ofSeconds(2),
                Duration.ofMillis(300), Duration.ofMinutes(10), Duration.ofSeconds(1), 4), store,
                DeliveryMetrics.NONE, paused::contains, transports);
        dispatchers.add(dispatcher);
        return dispatcher;
    }

    private WebhookReceiver receiver(ToIntFunction<WebhookReceiver.Request> respond) {
        WebhookReceiver receiver = WebhookReceiver.start();
        receiver.respond(respond);
        receivers.add(receiver);
        return receiver;
    }

    /** A receiver refusing row 1's first change (n = 0) while {@code poisoned}, keeping what it accepted. */
    private WebhookReceiver refusingRowOnesFirstChange(java.util.concurrent.atomic.AtomicBoolean poisoned,
            List<WebhookReceiver.Request> accepted) {
        return receiver(request -> {
            if (poisoned.get() && request.body().contains("\"new\":{\"id\":1,\"n\":0}")) {
                return 500;
            }
            accepted.add(request);
            return 204;
        });
    }

    /** A receiver answering {@code status} while {@code down}, then 204, keeping what it accepted. */
    private WebhookReceiver failingWhile(java.util.concurrent.atomic.AtomicBoolean down, int status,
            List<WebhookReceiver.Request> accepted) {
        return receiver(request -> {
            if (down.get()) {
                return status;
            }
            accepted.add(request);
            return 204;
        });
    }

    private static Subscription webhook(String id, String name, WebhookReceiver receiver, int batch) {
        return new Subscription(id, name, List.of(TablePattern.ALL), Set.of(Operation.values()), java.util.Optional.empty(),
                new Destination.Webhook(URI.create(receiver.url("/" + name)), List.of(), Map.of()), EventFormat.JSON, batch,
                0, Projection.ALL, false, RetryPolicy.DEFAULTS, null);
    }

    /** Routes one change per row version: {@code rows} rows, each updated {@code versions} times, interleaved. */
    private List<ChangeEvent> send(Dispatcher dispatcher, Subscription subscription, int rows, int versions) throws Exception {
        List<ChangeEvent> sent = new ArrayList<>();
        for (int v = 0; v < versions; v++) {
            for (int row = 1; row <= rows; row++) {
                int version = this.versions.merge(row, 1, Integer::sum) - 1;
                ChangeEvent event = ITEMS.insertAt(nextLsn += 0x100, Integer.toString(row), Integer.toString(version));
                dispatcher.send(subscription, event, encoder.encode(event, EventFormat.JSON, Projection.ALL),
                        acknowledged::incrementAndGet);
                sent.add(event);
                if (sent.size() % 100 == 0) {
                    dispatcher.flush();
                }
            }
        }
        dispatcher.flush();
        return sent;
    }

    /** Each row's versions in the order the receiver first accepted them (2xx), from its requests. */
    private static Map<Integer, List<Integer>> acceptedByRow(List<WebhookReceiver.Request> accepted) throws Exception {
        Map<Integer, List<Integer>> byRow = new LinkedHashMap<>();
        Set<String> seen = ConcurrentHashMap.newKeySet();
        for (WebhookReceiver.Request request : accepted) {
            JsonNode body = JSON.readTree(request.body());
            for (JsonNode event : body.isArray() ? body : List.of(body)) {
                if (seen.add(event.get("id").asText())) {
                    byRow.computeIfAbsent(event.at("/new/id").asInt(), k -> new ArrayList<>()).add(event.at("/new/n").asInt());
                }
            }
        }
        return byRow;
    }

    private static boolean mentionsRow(WebhookReceiver.Request request, int row) {
        return request.body().contains("\"new\":{\"id\":" + row + ",");
    }

    /**
     * A destination that answers every request, each slowly (a second here, the 30 s request timeout
     * for a receiver that trickles its answer's body): events queued in memory behind it waited for
     * it, unacknowledged, however long; a burst under the lane's budget held the slot's position for
     * hours. Once the oldest event waited its retry window undelivered (here 2 s, and no less than
     * 10 s, or two request timeouts: a short window does not send healthy bursts there), they go to
     * the durable queue, the slot advances, and the destination gets them from there, each once.
     */
    @Test
    void aDestinationSlowerThanTheStreamHasItsEventsQueuedDurablyOnceTheOldestWaitedItsRetryWindow() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofSeconds(2));
        java.util.concurrent.CountDownLatch never = new java.util.concurrent.CountDownLatch(1);
        WebhookReceiver receiver = receiver(request -> {
            hold(never, 1);
            return 204;
        });
        String id = "6f1c2b6e-0000-4000-8000-000000000034";
        List<ChangeEvent> sent = send(dispatcher, webhook(id, "slow", receiver, 1), 100, 1);

        // 4 requests under way, a second each: 25 s for all of them; acknowledged (queued) after about 10
        await().atMost(WAIT).until(() -> acknowledged.get() == 100);
        int delivered = receiver.requests("/slow").size();
        assertThat(delivered).as("delivered when all were acknowledged").isBetween(20, 80);
        await().atMost(WAIT).until(() -> dispatcher.status().get(0).delivered() == 100 && store.count(id) == 0);
        assertThat(receiver.requests("/slow")).extracting(r -> JSON.readTree(r.body()).get("id").asText())
                .containsExactlyInAnyOrderElementsOf(sent.stream().map(ChangeEvent::id).toList());
    }

    @Test
    void aFailingRowHoldsBackOnlyItsOwnLaterChanges() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        java.util.concurrent.atomic.AtomicBoolean poisoned = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            if (poisoned.get() && mentionsRow(request, 1)) {
                return 500;
            }
            accepted.add(request);
            return 204;
        });
        Subscription subscription = webhook("config:rows", "rows", receiver, 1);
        send(dispatcher, subscription, 20, 10);

        // every other row gets all of its ten changes while row 1 fails
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).entrySet().stream().filter(e -> e.getKey() != 1)
                .mapToInt(e -> e.getValue().size()).sum() == 190);
        assertThat(acceptedByRow(accepted)).doesNotContainKey(1);
        Dispatcher.DeliveryStatus status = dispatcher.status().get(0);
        assertThat(status.heldBack()).as("row 1's later changes wait behind it").isEqualTo(9);
        assertThat(status.mode()).isEqualTo("direct");

        poisoned.set(false);
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).getOrDefault(1, List.of()).size() == 10);
        assertThat(acceptedByRow(accepted)).allSatisfy((row, versions) -> assertThat(versions)
                .as("row %d in commit order", row).containsExactly(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
        await().atMost(WAIT).until(() -> acknowledged.get() == 200);
    }

    /**
     * An {@code ALTER TABLE} that changes what identifies a row (its replica identity to or from
     * FULL, or its key columns) changes the key its later changes are ordered by: a change before it
     * and one after it of the same row share no key. The first change of the table after it waits
     * for every earlier one of the table, and what follows waits for it.
     */
    @Test
    void aRowsChangeAfterItsTableWasRekeyedWaitsForItsChangesFromBefore() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        java.util.concurrent.atomic.AtomicBoolean poisoned = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = refusingRowOnesFirstChange(poisoned, accepted);
        Subscription subscription = webhook("config:rows", "rows", receiver, 1);
        TestEvents.Table full = ITEMS.full();
        TestEvents.Table byN = TestEvents.table("public", "items").column("id", TestEvents.INT4).key("n", TestEvents.INT4);
        // row 1 under its key, then under REPLICA IDENTITY FULL, under its key again, then keyed by another column
        for (TestEvents.Table shape : List.of(ITEMS, full, ITEMS, byN)) {
            ChangeEvent event = shape.insertAt(nextLsn += 0x100, "1", Integer.toString(versions.merge(1, 1, Integer::sum) - 1));
            dispatcher.send(subscription, event, encoder.encode(event, EventFormat.JSON, Projection.ALL), acknowledged::incrementAndGet);
            dispatcher.flush();
        }
        await().atMost(WAIT).until(() -> receiver.requests().size() >= 2); // row 1's first change refused, and again
        await().atMost(WAIT).until(() -> dispatcher.status().get(0).heldBack() == 3);
        assertThat(acceptedByRow(accepted)).as("nothing of row 1 overtakes its refused first change").isEmpty();

        poisoned.set(false);
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).getOrDefault(1, List.of()).size() == 4);
        assertThat(acceptedByRow(accepted).get(1)).as("row 1 in commit order").containsExactly(0, 1, 2, 3);
        await().atMost(WAIT).until(() -> acknowledged.get() == 4);
    }

    /**
     * As above across a restart: a row's change is queued durably, walhook restarts, and the
     * table's replica identity turns FULL. Routing in the new run has seen no earlier change of the
     * table, so its first change under FULL is queued as a change of its row, hashed by a key the
     * row's queued change does not share. Read from the queue, it waits for that change all the
     * same while it is refused.
     */
    @Test
    void aRowsChangeAfterItsTableWasRekeyedWaitsAcrossARestartForItsChangeQueuedBefore() throws Exception {
        dispatcher(Duration.ofMinutes(10)).close();
        java.util.concurrent.atomic.AtomicBoolean poisoned = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = refusingRowOnesFirstChange(poisoned, accepted);
        Subscription subscription = webhook("config:rekeyed", "rekeyed", receiver, 1);
        paused.add(subscription.id()); // its changes go to the durable queue
        Dispatcher before = restartedDispatcher();
        ChangeEvent keyed = ITEMS.insertAt(nextLsn += 0x100, "1", "0");
        before.send(subscription, keyed, encoder.encode(keyed, EventFormat.JSON, Projection.ALL), acknowledged::incrementAndGet);
        before.flush();
        await().atMost(WAIT).until(() -> store.count(subscription.id()) == 1 && acknowledged.get() == 1);
        before.close();

        Dispatcher after = restartedDispatcher();
        after.resumeParked(List.of(subscription));
        TestEvents.Table full = ITEMS.full();
        for (int n = 1; n <= 2; n++) {
            ChangeEvent event = full.insertAt(nextLsn += 0x100, "1", Integer.toString(n));
            after.send(subscription, event, encoder.encode(event, EventFormat.JSON, Projection.ALL), acknowledged::incrementAndGet);
        }
        after.flush();
        await().atMost(WAIT).until(() -> store.count(subscription.id()) == 3 && acknowledged.get() == 3);
        paused.remove(subscription.id());
        after.sync(List.of(subscription));
        await().atMost(WAIT).until(() -> receiver.requests().size() >= 2); // row 1's first change refused, and again
        await().atMost(WAIT).until(() -> after.status().get(0).heldBack() == 2);
        assertThat(acceptedByRow(accepted)).as("nothing of row 1 overtakes its refused first change").isEmpty();

        poisoned.set(false);
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).getOrDefault(1, List.of()).size() == 3);
        assertThat(acceptedByRow(accepted).get(1)).as("row 1 in commit order").containsExactly(0, 1, 2);
        await().atMost(WAIT).until(() -> store.count(subscription.id()) == 0);
    }

    @Test
    void aRowRefusedForGoodAloneDoesNotHoldBackChangesToOtherRowsThatComeLater() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        AtomicInteger refusals = new AtomicInteger();
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            if (mentionsRow(request, 1)) {
                refusals.incrementAndGet();
                return 422; // row 1's change is refused, every time
            }
            accepted.add(request);
            return 204;
        });
        Subscription one = webhook("config:one", "one", receiver, 1);
        send(dispatcher, one, 1, 1);
        // alone, it fails often enough (and long enough without a success) to look like a destination that is down
        long since = System.nanoTime();
        await().atMost(WAIT).until(() -> refusals.get() >= 12 && System.nanoTime() - since > 3_000_000_000L);
        versions.clear();
        for (int row = 2; row <= 5; row++) {
            ChangeEvent event = ITEMS.insertAt(nextLsn += 0x100, Integer.toString(row), "0");
            dispatcher.send(one, event, encoder.encode(event, EventFormat.JSON, Projection.ALL), acknowledged::incrementAndGet);
        }
        dispatcher.flush();
        // the others go: tried as well as row 1's retries, each finds the destination takes them
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).keySet().containsAll(List.of(2, 3, 4, 5)));
        // acknowledged once the answers are back: the receiver records a request before it answers
        await().atMost(WAIT).until(() -> acknowledged.get() == 4);
    }

    /**
     * One row refused again and again in a quiet subscription is not a destination that is down: the
     * changes to other rows after it go at once, not at a probe's pace (which a {@code Retry-After}
     * on that row's refusals put two minutes off).
     */
    @Test
    void aRowRefusedForGoodAloneInAQuietSubscriptionDoesNotPutOtherRowsOffToTheProbesPace() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        AtomicInteger refusals = new AtomicInteger();
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = refusingRowsUpTo(1, refusals, accepted);
        // refused often enough and long enough without a success, it asks for a pause of two minutes
        receiver.respondHeaders(request -> refusals.get() >= 12 ? Map.of("Retry-After", "120") : Map.of());
        Subscription one = webhook("config:one", "one", receiver, 1);
        sendRows(dispatcher, one, 1, 1, "refused");
        long since = System.nanoTime();
        await().atMost(WAIT).until(() -> refusals.get() >= 12 && System.nanoTime() - since > 3_000_000_000L);
        sendRows(dispatcher, one, 2, 5, "fine");
        await().atMost(Duration.ofSeconds(20)).until(() -> acceptedByRow(accepted).keySet().containsAll(List.of(2, 3, 4, 5)));
        assertThat(refusals.get()).as("row 1 waits the two minutes its refusal asked for").isEqualTo(12);
    }

    /** As above, two rows refused in one batch: split in halves, it is still two requests, not three. */
    @Test
    void twoRowsRefusedForGoodInOneBatchDoNotPutOtherRowsOffToTheProbesPace() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        AtomicInteger refusals = new AtomicInteger();
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = refusingRowsUpTo(2, refusals, accepted);
        receiver.respondHeaders(request -> refusals.get() >= 14 ? Map.of("Retry-After", "120") : Map.of());
        Subscription batched = webhook("config:batched", "batched", receiver, 10);
        sendRows(dispatcher, batched, 1, 2, "refused"); // one batch, refused, then split: each half refused on its own
        long since = System.nanoTime();
        await().atMost(WAIT).until(() -> refusals.get() >= 14 && System.nanoTime() - since > 3_000_000_000L);
        sendRows(dispatcher, batched, 3, 5, "fine");
        await().atMost(Duration.ofSeconds(20)).until(() -> acceptedByRow(accepted).keySet().containsAll(List.of(3, 4, 5)));
    }

    /**
     * Three rows refused for good make the destination look down, and their refusals ask for a pause
     * of two minutes: a wait asked with a refusal is that row's own (a 429 or a 5xx speaks for the
     * receiver), and the changes to other rows after them still go at the probes' pace (before, the
     * probes' pace took the pause, and they waited two minutes). When those changes are taken, the
     * destination is back, and the refused rows still wait for the pause each asked for (before, they
     * were tried again at once with everything that waited).
     */
    @Test
    void aPauseAskedWithRowsRefusalsIsNotTheWholeSubscriptionsPace() throws Exception {
        PausingReceiver paused = threeRowsRefusedWithAPause(422);
        await().atMost(Duration.ofSeconds(20))
                .until(() -> acceptedByRow(paused.accepted()).keySet().containsAll(List.of(4, 5, 6)));
        await().during(Duration.ofSeconds(2)).atMost(Duration.ofSeconds(5)).until(() -> paused.triedTooSoon().get() == 0);
    }

    /**
     * The same, but with 503s: the receiver is unavailable and asks for two minutes, which the
     * probes of the whole subscription keep to; the changes to other rows wait too.
     */
    @Test
    void aPauseAskedWithA503IsTheWholeSubscriptionsPaceWhileItLooksDown() throws Exception {
        PausingReceiver paused = threeRowsRefusedWithAPause(503);
        await().during(Duration.ofSeconds(5)).atMost(Duration.ofSeconds(10)).until(paused.accepted()::isEmpty);
    }

    /** What a receiver took, and how often it was asked again for a row it had asked to wait two minutes. */
    private record PausingReceiver(List<WebhookReceiver.Request> accepted, AtomicInteger triedTooSoon) {
    }

    /**
     * Rows 1 to 3 refused with {@code status}, from the twelfth refusal on with {@code Retry-After: 120}
     * (the destination counts as down by then); once one asked for that pause, rows 4 to 6 are routed.
     */
    private PausingReceiver threeRowsRefusedWithAPause(int status) throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        AtomicInteger refusals = new AtomicInteger();
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        AtomicInteger askedToWait = new AtomicInteger();
        java.util.Set<Integer> told = java.util.concurrent.ConcurrentHashMap.newKeySet();
        AtomicInteger triedTooSoon = new AtomicInteger();
        WebhookReceiver receiver = refusingRowsUpTo(3, status, refusals, accepted);
        receiver.respondHeaders(request -> {
            if (refusals.get() < 12) {
                return Map.of();
            }
            for (int row = 1; row <= 3; row++) {
                if (mentionsRow(request, row) && !told.add(row)) {
                    triedTooSoon.incrementAndGet(); // asked to wait two minutes, and tried again
                }
            }
            askedToWait.incrementAndGet();
            return Map.of("Retry-After", "120");
        });
        Subscription one = webhook("config:one", "one", receiver, 1);
        sendRows(dispatcher, one, 1, 3, "refused");
        long since = System.nanoTime();
        // down (ten failures in a row of three requests, nothing taken for 2 s) when one asks for its pause
        await().atMost(WAIT).until(() -> askedToWait.get() >= 1 && System.nanoTime() - since > 3_000_000_000L);
        sendRows(dispatcher, one, 4, 6, "later");
        return new PausingReceiver(accepted, triedTooSoon);
    }

    /** Routes the first change of each of these rows (version 0), after whatever was routed before. */
    private void sendRows(Dispatcher dispatcher, Subscription subscription, int from, int to, String note) throws Exception {
        TestEvents.Table docs = TestEvents.table("public", "items").key("id", TestEvents.INT4).column("note", TestEvents.TEXT);
        for (int row = from; row <= to; row++) {
            ChangeEvent event = docs.insertAt(nextLsn += 0x100, Integer.toString(row), note);
            dispatcher.send(subscription, event, encoder.encode(event, EventFormat.JSON, Projection.ALL),
                    acknowledged::incrementAndGet);
        }
        dispatcher.flush();
    }

    /** A receiver refusing (422) every change of {@code row} while {@code refusing}, and taking the others. */
    private WebhookReceiver refusingRowWhile(java.util.concurrent.atomic.AtomicBoolean refusing, int row,
            List<WebhookReceiver.Request> accepted) {
        return receiver(request -> {
            if (refusing.get() && mentionsRow(request, row)) {
                return 422;
            }
            accepted.add(request);
            return 204;
        });
    }

    /** A receiver refusing (422) every change of the rows up to {@code refused}, counting, and taking the others. */
    private WebhookReceiver refusingRowsUpTo(int refused, AtomicInteger refusals, List<WebhookReceiver.Request> accepted) {
        return refusingRowsUpTo(refused, 422, refusals, accepted);
    }

    /** As above, refusing with {@code status}. */
    private WebhookReceiver refusingRowsUpTo(int refused, int status, AtomicInteger refusals,
            List<WebhookReceiver.Request> accepted) {
        return receiver(request -> {
            for (int row = 1; row <= refused; row++) {
                if (mentionsRow(request, row)) {
                    refusals.incrementAndGet();
                    return status;
                }
            }
            accepted.add(request);
            return 204;
        });
    }

    @Test
    void aRowRefusedForGoodWithALaterChangeOfItsOwnDoesNotHoldBackOtherRowsOfTheDurableQueue() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMillis(300)); // its retry window ends soon: durable
        AtomicInteger refusals = new AtomicInteger();
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        Subscription one = webhook("config:one", "one", refusingRowsUpTo(1, refusals, accepted), 1);
        send(dispatcher, one, 1, 2); // row 1's first change is refused; its second waits behind it
        long since = System.nanoTime();
        await().atMost(WAIT).until(() -> refusals.get() >= 12 && System.nanoTime() - since > 3_000_000_000L);
        sendRows(dispatcher, one, 2, 5, "later");
        // read back and tried though row 1's second change waits in memory, untaken (it counted as one to send)
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).keySet().containsAll(List.of(2, 3, 4, 5)));
    }

    /**
     * A row refused for good with more of its later changes queued behind it than a lane holds in
     * memory (4,000): they filled what the lane read back, all held back behind the refused one, and
     * it read no further; every other row of the subscription waited, for good. The lane now reads
     * past them, and reads them again, in order, once the refused change is taken.
     */
    @Test
    void aRowRefusedForGoodWithMoreLaterChangesThanALaneHoldsDoesNotStallTheRestOfItsQueue() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMillis(300)); // its retry window ends soon: durable
        java.util.concurrent.atomic.AtomicBoolean refusing = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        Subscription one = webhook("config:one", "one", refusingRowWhile(refusing, 1, accepted), 1);
        int versions = Lane.RESIDENT_LIMIT + 500;
        send(dispatcher, one, 1, versions); // row 1's first change is refused; every later one waits behind it
        sendRows(dispatcher, one, 2, 30, "later");
        send(dispatcher, one, 1, 10); // more of row 1, read past as well
        sendRows(dispatcher, one, 31, 40, "later still");
        List<Integer> others = java.util.stream.IntStream.rangeClosed(2, 40).boxed().toList();
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).keySet().containsAll(others));
        assertThat(acceptedByRow(accepted)).doesNotContainKey(1);

        refusing.set(false);
        List<Integer> inOrder = java.util.stream.IntStream.range(0, versions + 10).boxed().toList();
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).getOrDefault(1, List.of()).size() >= versions + 10);
        assertThat(acceptedByRow(accepted).get(1)).as("row 1's changes, each once, in commit order").isEqualTo(inOrder);
        await().atMost(WAIT).until(() -> store.count(one.id()) == 0 && dispatcher.status().get(0).mode().equals("direct"));
        assertThat(inOrderOfAcceptance(accepted)).hasSize(versions + 10 + 39);
    }

    /**
     * The same, with what must wait for the refused row's changes though it is not one: a change of
     * its key (row 1 becomes row 100) and row 100's later changes, then a TRUNCATE of its table and
     * the table's changes after it. Read past, they are delivered only after row 1's changes, in
     * order; the other rows' changes before the TRUNCATE go meanwhile.
     */
    @Test
    void whatMustFollowTheChangesReadPastBehindARefusedRowWaitsForThem() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMillis(300));
        java.util.concurrent.atomic.AtomicBoolean refusing = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        Subscription one = webhook("config:one", "one", refusingRowWhile(refusing, 1, accepted), 1);
        int versions = Lane.RESIDENT_LIMIT + 500;
        send(dispatcher, one, 1, versions);
        sendRows(dispatcher, one, 2, 30, "before");
        List<ChangeEvent> following = new ArrayList<>();
        following.add(ITEMS.updateWithKeyAt(nextLsn += 0x100, new String[] {"1", null}, "100", "0"));
        following.add(ITEMS.insertAt(nextLsn += 0x100, "100", "1"));
        following.add(ITEMS.insertAt(nextLsn += 0x100, "100", "2"));
        for (ChangeEvent event : following) {
            dispatcher.send(one, event, encoder.encode(event, EventFormat.JSON, Projection.ALL), acknowledged::incrementAndGet);
        }
        dispatcher.flush();
        sendRows(dispatcher, one, 31, 35, "before the truncate");
        ChangeEvent truncate = ITEMS.truncateAt(nextLsn += 0x100);
        dispatcher.send(one, truncate, encoder.encode(truncate, EventFormat.JSON, Projection.ALL), acknowledged::incrementAndGet);
        dispatcher.flush();
        sendRows(dispatcher, one, 36, 40, "after the truncate");
        List<Integer> free = java.util.stream.IntStream.rangeClosed(2, 35).boxed().toList();
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).keySet().containsAll(free));
        await().during(Duration.ofSeconds(1)).atMost(Duration.ofSeconds(5)).until(() -> acceptedByRow(accepted).keySet()
                .stream().noneMatch(row -> row == 1 || row == 100 || row == 0 || row > 35));

        refusing.set(false);
        int all = versions + 39 + following.size() + 1;
        await().atMost(WAIT).until(() -> inOrderOfAcceptance(accepted).size() >= all);
        List<JsonNode> events = inOrderOfAcceptance(accepted);
        assertThat(events).hasSize(all);
        List<Integer> rowOne = new ArrayList<>();
        List<Integer> row100 = new ArrayList<>();
        int lastOfRowOne = -1;
        int truncated = -1;
        List<Integer> afterRowOne = new ArrayList<>();
        for (int i = 0; i < events.size(); i++) {
            JsonNode event = events.get(i);
            int row = event.at("/new/id").asInt();
            if (row == 1) {
                rowOne.add(event.at("/new/n").asInt());
                lastOfRowOne = i;
            } else if (event.path("op").asText().equals("truncate")) {
                truncated = i;
            } else if (row == 100 || row > 35) {
                afterRowOne.add(i);
                if (row == 100) {
                    row100.add(event.at("/new/n").asInt());
                }
            }
        }
        assertThat(row100).as("the key change, then row 100's changes").containsExactly(0, 1, 2);
        assertThat(rowOne).as("row 1's changes in commit order").isEqualTo(java.util.stream.IntStream.range(0, versions)
                .boxed().toList());
        int truncatedAt = truncated;
        int rowOneEnds = lastOfRowOne;
        assertThat(truncatedAt).as("the truncate, after row 1's changes and row 100's").isGreaterThan(rowOneEnds)
                .isGreaterThan(afterRowOne.get(2));
        assertThat(afterRowOne).as("the key change and row 100's changes, then the rows after the truncate")
                .hasSize(8).isSorted().allSatisfy(i -> assertThat(i).isGreaterThan(rowOneEnds));
        assertThat(afterRowOne.subList(3, 8)).allSatisfy(i -> assertThat(i).isGreaterThan(truncatedAt));
        await().atMost(WAIT).until(() -> store.count(one.id()) == 0 && dispatcher.status().get(0).mode().equals("direct"));
    }

    /**
     * While the lane reads past the changes held back behind a refused one, the refused one is
     * dropped through the API: they are read again, and delivered in order. The lane waited for
     * that change to be delivered to read them again, which a dropped one never is.
     */
    @Test
    void aRefusedChangeDroppedWhileTheLaneReadsPastItsRowsLaterChangesLetsThemGo() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMillis(300));
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        Subscription one = webhook("config:one", "one",
                refusingRowOnesFirstChange(new java.util.concurrent.atomic.AtomicBoolean(true), accepted), 1);
        int versions = Lane.RESIDENT_LIMIT + 500;
        List<ChangeEvent> rowOne = send(dispatcher, one, 1, versions);
        sendRows(dispatcher, one, 2, 30, "later");
        List<Integer> others = java.util.stream.IntStream.rangeClosed(2, 30).boxed().toList();
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).keySet().containsAll(others));
        long refused = Long.parseLong(database.queryOne("SELECT id FROM walhook.parked_event WHERE event_id = '"
                + rowOne.get(0).id() + "'"));
        assertThat(store.drop(one.id(), List.of(refused))).isEqualTo(1);
        dispatcher.droppedHeard(one.id());
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).getOrDefault(1, List.of()).size() >= versions - 1);
        assertThat(acceptedByRow(accepted).get(1)).as("row 1's later changes, in order").isEqualTo(
                java.util.stream.IntStream.range(1, versions).boxed().toList());
        await().atMost(WAIT).until(() -> store.count(one.id()) == 0 && dispatcher.status().get(0).mode().equals("direct"));
    }

    /**
     * Reading past is for changes held back behind refused ones only: a busy row whose thousands of
     * queued changes wait behind its own change under way, while another row is refused for good,
     * is read as before. Read past, it would have been read again after each of its changes.
     */
    @Test
    void changesHeldBackBehindTheirRowsChangeUnderWayAreNotReadPast() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMillis(300));
        java.util.concurrent.atomic.AtomicBoolean refusing = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        java.util.concurrent.CountDownLatch never = new java.util.concurrent.CountDownLatch(1);
        Subscription one = webhook("config:one", "one", receiver(request -> {
            if (refusing.get() && mentionsRow(request, 2)) {
                return 422;
            }
            if (request.body().contains("\"new\":{\"id\":1,\"n\":0}")) {
                hold(never, 1); // row 1's first change takes a while: the lane fills with the changes behind it
            }
            accepted.add(request);
            return 204;
        }), 1);
        int versions = Lane.RESIDENT_LIMIT + 500;
        // a queue left from before a restart: row 2's change, then row 1's
        List<ParkedEventStore.Entry> entries = new ArrayList<>();
        entries.add(queued("left-refused", 0x10, 2, 0));
        for (int n = 0; n < versions; n++) {
            entries.add(queued("left-" + n, 0x11 + n, 1, n));
        }
        store.append(one.id(), one.name(), entries, 0, null);
        try (io.walhook.testing.LogLines log = new io.walhook.testing.LogLines(Lane.class)) {
            dispatcher.resumeParked(List.of(one)); // row 1's changes, each delivered once the one before is
            await().atMost(WAIT).until(() -> acceptedByRow(accepted).getOrDefault(1, List.of()).size() >= versions);
            assertThat(acceptedByRow(accepted).get(1)).isEqualTo(java.util.stream.IntStream.range(0, versions).boxed().toList());
            assertThat(log.lines()).as("what the lane logged").noneMatch(line -> line.contains("reads past"));
        }
        refusing.set(false);
        await().atMost(WAIT).until(() -> store.count(one.id()) == 0 && dispatcher.status().get(0).mode().equals("direct"));
    }

    /**
     * The changes that fill the lane wait behind a TRUNCATE, itself behind a row refused for good (a
     * table reloaded after a change the destination refuses): the lane reads past the whole table,
     * and delivers what does not follow it (a logical message), then all of it in order once the
     * refused change is taken.
     */
    @Test
    void aTableReloadedBehindARefusedRowIsReadPastWhole() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMillis(300));
        java.util.concurrent.atomic.AtomicBoolean refusing = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        Subscription one = webhook("config:one", "one", refusingRowWhile(refusing, 1, accepted), 1);
        send(dispatcher, one, 1, 1);
        ChangeEvent truncate = ITEMS.truncateAt(nextLsn += 0x100);
        dispatcher.send(one, truncate, encoder.encode(truncate, EventFormat.JSON, Projection.ALL), acknowledged::incrementAndGet);
        int reloaded = Lane.RESIDENT_LIMIT + 500;
        sendRows(dispatcher, one, 2, reloaded + 1, "reloaded");
        ChangeEvent message = TestEvents.message("after-the-reload", "{}".getBytes(java.nio.charset.StandardCharsets.UTF_8),
                true);
        dispatcher.send(one, message, encoder.encode(message, EventFormat.JSON, Projection.ALL), acknowledged::incrementAndGet);
        dispatcher.flush();
        await().atMost(WAIT).until(() -> accepted.stream().anyMatch(request -> request.body().contains("after-the-reload")));
        assertThat(accepted).as("the message only").hasSize(1);

        refusing.set(false);
        await().atMost(WAIT).until(() -> inOrderOfAcceptance(accepted).size() >= reloaded + 3);
        List<JsonNode> events = inOrderOfAcceptance(accepted);
        assertThat(events).hasSize(reloaded + 3);
        assertThat(events.get(1).at("/new/id").asInt()).as("row 1's change first").isEqualTo(1);
        assertThat(events.get(2).path("op").asText()).as("then the truncate").isEqualTo("truncate");
        assertThat(events.subList(3, events.size())).extracting(event -> event.at("/new/id").asInt())
                .as("then the table's rows").containsExactlyInAnyOrderElementsOf(java.util.stream.IntStream
                        .rangeClosed(2, reloaded + 1).boxed().toList());
        await().atMost(WAIT).until(() -> store.count(one.id()) == 0 && dispatcher.status().get(0).mode().equals("direct"));
    }

    /** A durable queue's row of change {@code n} of row {@code row} (table 16384), as a run before this one left it. */
    private static ParkedEventStore.Entry queued(String id, long lsn, int row, int n) {
        byte[] body = ("{\"id\":\"" + id + "\",\"new\":{\"id\":" + row + ",\"n\":" + n + "}}")
                .getBytes(java.nio.charset.StandardCharsets.UTF_8);
        return new ParkedEventStore.Entry(id, Lsn.of(lsn), java.time.Instant.EPOCH, "application/json", Map.of(), null, body,
                Ordering.row(16384, row, row).encode(), null);
    }

    /**
     * More rows whose requests hang until the timeout than the subscription sends at once (4):
     * their retries, due one after another, took each request as it ended, before any new event,
     * and the changes to every other row waited for the hanging ones to make the destination look
     * down, then for a probe, again and again. The last request is kept for new events while any
     * are ready, as it is for live changes against a backfill's rows.
     */
    @Test
    void rowsWhoseRequestsHangDoNotTakeEveryRequestFromTheOtherRows() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        java.util.concurrent.CountDownLatch never = new java.util.concurrent.CountDownLatch(1);
        AtomicInteger hung = new AtomicInteger();
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        Set<Integer> flowed = ConcurrentHashMap.newKeySet();
        AtomicInteger hungWhenAllFlowed = new AtomicInteger(-1);
        Subscription one = webhook("config:one", "one", receiver(request -> {
            for (int row = 1; row <= 16; row++) {
                if (mentionsRow(request, row)) {
                    hung.incrementAndGet();
                    hold(never, 3); // no answer within walhook's timeout (2 s)
                    return 503;
                }
            }
            accepted.add(request);
            for (int row = 17; row <= 28; row++) {
                if (mentionsRow(request, row)) {
                    flowed.add(row);
                }
            }
            if (flowed.size() == 12) {
                // counted here: the hanging rows' retries go on after, as long as the test takes to look
                hungWhenAllFlowed.compareAndSet(-1, hung.get());
            }
            return 204;
        }), 1);
        sendRows(dispatcher, one, 1, 16, "hangs");
        await().atMost(WAIT).until(() -> hung.get() >= 24); // each tried, and some retried
        int before = hung.get();
        sendRows(dispatcher, one, 17, 28, "flows");
        List<Integer> flowing = java.util.stream.IntStream.rangeClosed(17, 28).boxed().toList();
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).keySet().containsAll(flowing) && hungWhenAllFlowed.get() >= 0);
        // the hanging rows' retries under way then, and a few as the first new event's success ends their backoff (23
        // before: the other rows' changes waited for cycles of them)
        assertThat(hungWhenAllFlowed.get() - before).as("requests that hung before the other rows' changes were delivered")
                .isLessThanOrEqualTo(8);
    }

    /** Every event the receiver accepted, once each, in the order it first accepted them. */
    private static List<JsonNode> inOrderOfAcceptance(List<WebhookReceiver.Request> accepted) throws Exception {
        List<JsonNode> events = new ArrayList<>();
        Set<String> seen = new java.util.HashSet<>();
        for (WebhookReceiver.Request request : accepted) {
            JsonNode body = JSON.readTree(request.body());
            for (JsonNode event : body.isArray() ? body : List.of(body)) {
                if (seen.add(event.get("id").asText())) {
                    events.add(event);
                }
            }
        }
        return events;
    }

    @Test
    void aBigRowBehindARowRefusedForGoodIsTriedThoughItFillsTheReadBackMemory() throws Exception {
        long limit = 400 << 10; // read-back memory: 100 KB
        Dispatcher dispatcher = dispatcher(Duration.ofMillis(300), 4000, Dispatcher.Settings.HOLD_LIMIT, limit);
        AtomicInteger refusals = new AtomicInteger();
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        Subscription one = webhook("config:one", "one", refusingRowsUpTo(1, refusals, accepted), 1);
        sendRows(dispatcher, one, 1, 1, "refused");
        long since = System.nanoTime();
        await().atMost(WAIT).until(() -> refusals.get() >= 12 && System.nanoTime() - since > 3_000_000_000L);
        sendRows(dispatcher, one, 2, 2, "x".repeat(150_000)); // more than all the read-back memory
        sendRows(dispatcher, one, 3, 5, "small");
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).keySet().containsAll(List.of(2, 3, 4, 5)));
        await().atMost(WAIT).until(() -> dispatcher.readBackInUse() < (100 << 10));
    }

    /**
     * The same with a later change of the refused row waiting behind it: that change, held back in
     * memory, counted as one to send, and once the big row did not fit the lane read nothing more,
     * for good.
     */
    @Test
    void aBigRowBehindARowRefusedForGoodWithALaterChangeOfItsOwnIsTried() throws Exception {
        long limit = 400 << 10; // read-back memory: 100 KB
        Dispatcher dispatcher = dispatcher(Duration.ofMillis(300), 4000, Dispatcher.Settings.HOLD_LIMIT, limit);
        AtomicInteger refusals = new AtomicInteger();
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        Subscription one = webhook("config:one", "one", refusingRowsUpTo(1, refusals, accepted), 1);
        send(dispatcher, one, 1, 2); // row 1's first change is refused; its second waits behind it
        long since = System.nanoTime();
        await().atMost(WAIT).until(() -> refusals.get() >= 12 && System.nanoTime() - since > 3_000_000_000L);
        sendRows(dispatcher, one, 2, 2, "x".repeat(150_000)); // more than all the read-back memory
        sendRows(dispatcher, one, 3, 5, "small");
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).keySet().containsAll(List.of(2, 3, 4, 5)));
    }

    /**
     * Rows refused for good (a receiver's schema check refusing a batch of them), with nothing taken
     * yet, look like a destination that is down; the changes to other rows after them are still
     * tried, and flow. Past twenty (the case of 25), new events no longer probed it, and those changes
     * waited for the refused rows' retry window to end (ten minutes here), though the destination took
     * them; the case of 10 guards the probes' turns below that.
     */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(ints = {10, 25})
    void rowsRefusedForGoodDoNotHoldBackTheChangesToOtherRowsThatComeLater(int refused) throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        AtomicInteger refusals = new AtomicInteger();
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        Subscription one = webhook("config:one", "one", refusingRowsUpTo(refused, refusals, accepted), 1);
        sendRows(dispatcher, one, 1, refused, "refused");
        long since = System.nanoTime();
        await().atMost(WAIT).until(() -> refusals.get() >= refused + 15 && System.nanoTime() - since > 3_000_000_000L);
        sendRows(dispatcher, one, refused + 1, refused + 5, "fine");
        List<Integer> fine = java.util.stream.IntStream.rangeClosed(refused + 1, refused + 5).boxed().toList();
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).keySet().containsAll(fine));
    }

    @Test
    void aBatchThatKeepsFailingIsSplitSoOneBadEventDoesNotHoldBackTheOthers() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            if (mentionsRow(request, 1)) {
                return 422; // the receiver refuses any request that carries row 1
            }
            accepted.add(request);
            return 204;
        });
        Subscription subscription = webhook("config:split", "split", receiver, 50);
        send(dispatcher, subscription, 40, 1);
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).size() == 39);
        assertThat(acceptedByRow(accepted)).doesNotContainKey(1);
        // row 1 alone waits to be retried once its own answer is back (the status is a lane turn's snapshot)
        await().atMost(WAIT).untilAsserted(() -> assertThat(dispatcher.status().get(0).retrying()).isEqualTo(1));
    }

    @Test
    void pastItsWindowEverythingGoesToTheDurableQueueAndDrainsInOrderWhenTheDestinationRecovers() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMillis(500));
        java.util.concurrent.atomic.AtomicBoolean down = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = failingWhile(down, 503, accepted);
        Subscription subscription = webhook("config:down", "down", receiver, 10);
        send(dispatcher, subscription, 10, 30);
        // acknowledged once durably queued, though nothing was delivered
        await().atMost(WAIT).until(() -> acknowledged.get() == 300);
        assertThat(store.count("config:down")).isEqualTo(300);
        await().atMost(WAIT).until(() -> dispatcher.status().get(0).mode().equals("durable"));

        // later events go behind them, through the queue
        send(dispatcher, subscription, 10, 1);
        await().atMost(WAIT).until(() -> acknowledged.get() == 310);
        down.set(false);
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).values().stream().mapToInt(List::size).sum() == 310);
        assertThat(acceptedByRow(accepted)).allSatisfy((row, versions) -> assertThat(versions).as("row %d", row)
                .isSorted().hasSize(31));
        await().atMost(WAIT).until(() -> store.count("config:down") == 0 && dispatcher.status().get(0).mode().equals("direct"));
        // the drain rate is of the last few seconds: nothing more drained, it falls to 0 though the lane has no
        // turn to look again (it showed the last drain's rate for as long as no event came)
        await().atMost(WAIT).until(() -> dispatcher.status().get(0).drainRate() > 0);
        await().atMost(WAIT).until(() -> dispatcher.status().get(0).drainRate() == 0);
        // straight through again
        send(dispatcher, subscription, 1, 1);
        await().atMost(WAIT).until(() -> acknowledged.get() == 311);
    }

    /**
     * The state database's client fails a call with an unchecked exception (a pool shutting down, a
     * driver's bug) while a lane writes to its durable queue: the lane tries again, as after an
     * SQLException, rather than waiting for an answer that never comes, its events unacknowledged and
     * nothing logged.
     */
    @Test
    void aDurableQueueCallFailingWithAnUncheckedExceptionIsTriedAgain() throws Exception {
        database = new SourceFixture(TestPostgres.shared(), "dispatch");
        AtomicInteger failuresLeft = new AtomicInteger();
        javax.sql.DataSource real = database.dataSource;
        javax.sql.DataSource flaky = (javax.sql.DataSource) java.lang.reflect.Proxy.newProxyInstance(
                getClass().getClassLoader(), new Class<?>[] {javax.sql.DataSource.class}, (proxy, method, args) -> {
                    if (method.getName().equals("getConnection") && failuresLeft.getAndDecrement() > 0) {
                        throw new IllegalStateException("the pool is being closed");
                    }
                    try {
                        return method.invoke(real, args);
                    } catch (java.lang.reflect.InvocationTargetException e) {
                        throw e.getCause();
                    }
                });
        store = new ParkedEventStore(flaky, "walhook");
        Dispatcher dispatcher = new Dispatcher(Clock.systemUTC(), new Dispatcher.Settings(Duration.ofSeconds(2),
                Duration.ofMillis(300), Duration.ofMillis(300), Duration.ofSeconds(1), 4), store,
                DeliveryMetrics.NONE, paused::contains,
                s -> new WebhookTransport(client, (Destination.Webhook) s.destination(), Clock.systemUTC(),
                        Duration.ofSeconds(2), false));
        dispatchers.add(dispatcher);
        java.util.concurrent.atomic.AtomicBoolean down = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        Subscription subscription = webhook("config:flaky", "flaky", failingWhile(down, 503, accepted), 1);
        failuresLeft.set(2);
        send(dispatcher, subscription, 5, 2);
        // past the retry window they go to the durable queue, whose first two calls fail
        await().atMost(WAIT).until(() -> acknowledged.get() == 10);
        assertThat(failuresLeft.get()).isNegative();
        assertThat(store.count("config:flaky")).isEqualTo(10);
        down.set(false);
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).values().stream().mapToInt(List::size).sum() == 10);
        assertThat(acceptedByRow(accepted)).allSatisfy((row, versions) -> assertThat(versions).containsExactly(0, 1));
    }

    /**
     * Two subscriptions whose durable queues hold a row this walhook cannot read (its headers edited
     * by hand into something else than an object): their lanes fail reading it every time, and try
     * again, without holding the two threads every lane's durable queue shares. Another
     * subscription's failing destination still has its events written to its own queue and
     * acknowledged.
     */
    @Test
    void queuesThatFailEveryReadDoNotHoldTheDurableQueueFromOtherSubscriptions() throws Exception {
        dispatcher(Duration.ofMillis(300)).close();
        // the state database refuses every statement on the queues of a and b (a policy that raises for their rows),
        // to walhook's role (not a superuser, whom no policy binds)
        database.sql("DO $$ BEGIN CREATE ROLE queue_reader LOGIN PASSWORD 'queue'; EXCEPTION WHEN duplicate_object THEN"
                        + " NULL; END $$",
                "GRANT USAGE ON SCHEMA walhook TO queue_reader",
                "GRANT ALL ON ALL TABLES IN SCHEMA walhook TO queue_reader",
                "GRANT ALL ON ALL SEQUENCES IN SCHEMA walhook TO queue_reader",
                "CREATE FUNCTION walhook.readable(id text) RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN"
                        + " IF id IN ('config:a', 'config:b') THEN RAISE EXCEPTION 'queue % cannot be read', id; END IF;"
                        + " RETURN true; END $$",
                "ALTER TABLE walhook.parked_event ENABLE ROW LEVEL SECURITY",
                "CREATE POLICY readable ON walhook.parked_event USING (walhook.readable(subscription_id)) WITH CHECK (true)");
        for (String broken : List.of("a", "b")) {
            database.sql("INSERT INTO walhook.parked_event (subscription, subscription_id, event_id, commit_lsn, content_type,"
                    + " headers, body) VALUES ('" + broken + "', 'config:" + broken + "', '0000000000000001-0001', '0/1',"
                    + " 'application/json', '{}', '\\x7b7d')");
        }
        org.postgresql.ds.PGSimpleDataSource restricted = new org.postgresql.ds.PGSimpleDataSource();
        restricted.setUrl(database.dataSource.getUrl());
        restricted.setUser("queue_reader");
        restricted.setPassword("queue");
        store = new ParkedEventStore(restricted, "walhook");
        Dispatcher dispatcher = dispatcherOn(store, Duration.ofMillis(300));
        WebhookReceiver healthy = receiver(request -> 204);
        send(dispatcher, webhook("config:a", "a", healthy, 1), 1, 1);
        send(dispatcher, webhook("config:b", "b", healthy, 1), 1, 1);
        java.util.concurrent.atomic.AtomicBoolean down = new java.util.concurrent.atomic.AtomicBoolean(true);
        send(dispatcher, webhook("config:c", "c", failingWhile(down, 503, new CopyOnWriteArrayList<>()), 1), 5, 1);
        // past its retry window, c's events go to its durable queue, which acknowledges them
        await().atMost(WAIT).until(() -> acknowledged.get() == 5);
        assertThat(store.count("config:c")).isEqualTo(5);
        await().atMost(WAIT).untilAsserted(() -> assertThat(dispatcher.status()).filteredOn(status -> status.name().equals("a"))
                .singleElement().satisfies(status -> assertThat(status.lastError()).contains("cannot be read")));
    }

    /**
     * Two subscriptions deleted while another session holds rows of their queues (the API dropping
     * the same queues, an operator's transaction): delivery drops what it can and tries the rest
     * later, and a third subscription's events still reach its queue. Dropped as one statement
     * waiting for those rows, the two drops held both threads every queue shares.
     */
    @Test
    void queuesDroppedBehindAnotherSessionsLocksDoNotHoldTheDurableQueueFromOtherSubscriptions() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMillis(300));
        WebhookReceiver healthy = receiver(request -> 204);
        send(dispatcher, webhook("config:a", "a", healthy, 1), 1, 1);
        send(dispatcher, webhook("config:b", "b", healthy, 1), 1, 1);
        await().atMost(WAIT).until(() -> acknowledged.get() == 2);
        for (String deleted : List.of("a", "b")) {
            for (int row = 1; row <= 3; row++) {
                database.sql("INSERT INTO walhook.parked_event (subscription, subscription_id, event_id, commit_lsn,"
                        + " content_type, headers, body) VALUES ('" + deleted + "', 'config:" + deleted + "', '000000000000000"
                        + row + "-0001', '0/1', 'application/json', '[]', '\\x7b7d')");
            }
        }
        try (java.sql.Connection locker = database.dataSource.getConnection();
                java.sql.Statement s = locker.createStatement()) {
            locker.setAutoCommit(false);
            // two of each queue's three rows held, as a session dropping them holds them
            s.executeQuery("SELECT id FROM walhook.parked_event WHERE subscription_id IN ('config:a', 'config:b')"
                    + " AND event_id <> '0000000000000003-0001' FOR UPDATE").close();
            dispatcher.deleted("config:a");
            dispatcher.deleted("config:b");
            await().atMost(WAIT).until(() -> store.count("config:a") == 2 && store.count("config:b") == 2);
            java.util.concurrent.atomic.AtomicBoolean down = new java.util.concurrent.atomic.AtomicBoolean(true);
            send(dispatcher, webhook("config:c", "c", failingWhile(down, 503, new CopyOnWriteArrayList<>()), 1), 5, 1);
            // past its retry window, c's events go to its durable queue, which acknowledges them
            await().atMost(Duration.ofSeconds(20)).until(() -> acknowledged.get() == 7);
            assertThat(store.count("config:c")).isEqualTo(5);
            locker.rollback();
        }
        // the rows held are dropped once they are free
        await().atMost(WAIT).until(() -> store.count("config:a") == 0 && store.count("config:b") == 0);
    }

    @Test
    void aDestinationFailingAThirdOfRequestsGetsEveryChangeInPerRowOrder() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofSeconds(5));
        Random random = new Random(42);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            synchronized (random) {
                if (random.nextInt(10) < 3) {
                    return 500;
                }
            }
            accepted.add(request);
            return 204;
        });
        Subscription subscription = webhook("config:flaky", "flaky", receiver, 20);
        send(dispatcher, subscription, 50, 40);
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).values().stream().mapToInt(List::size).sum() == 2000);
        assertThat(acceptedByRow(accepted)).hasSize(50).allSatisfy((row, versions) -> assertThat(versions)
                .as("row %d", row).isSorted().hasSize(40));
        await().atMost(WAIT).until(() -> acknowledged.get() == 2000);
    }

    @Test
    void aRenameKeepsTheQueueAndADeleteDiscardsIt() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMillis(300));
        java.util.concurrent.atomic.AtomicBoolean down = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = failingWhile(down, 500, accepted);
        String id = "6f1c2b6e-0000-4000-8000-000000000001";
        Subscription before = webhook(id, "before", receiver, 1);
        send(dispatcher, before, 5, 4);
        await().atMost(WAIT).until(() -> store.count(id) == 20);
        // renamed: the same lane, its queue and its counters; it delivers to the new name's URL
        Subscription after = webhook(id, "after", receiver, 1);
        dispatcher.sync(List.of(after));
        down.set(false);
        await().atMost(WAIT).until(() -> accepted.stream().map(r -> r.header("webhook-id")).distinct().count() == 20);
        // from its next request on: only those already under way at the rename went to the old URL
        assertThat(accepted.stream().filter(r -> r.path().equals("/before"))).hasSizeLessThanOrEqualTo(4);
        assertThat(accepted).hasSize(20);
        // the receiver records a request before it answers: the lane counts it once the answer is back
        await().atMost(WAIT).untilAsserted(() -> assertThat(dispatcher.status()).singleElement().satisfies(s -> {
            assertThat(s.name()).isEqualTo("after");
            assertThat(s.delivered()).isEqualTo(20);
        }));

        // deleted while failing: delivery stops, and what it held is dropped
        down.set(true);
        send(dispatcher, after, 5, 2);
        await().atMost(WAIT).until(() -> store.count(id) == 10);
        dispatcher.deleted(id);
        await().atMost(WAIT).until(() -> store.count(id) == 0);
        down.set(false);
        send(dispatcher, after, 1, 1);
        await().during(Duration.ofSeconds(1)).atMost(WAIT).until(() -> accepted.size() == 20);
        assertThat(dispatcher.status()).isEmpty();
    }

    /**
     * A subscription deleted (through another instance's API) before its first event here: no lane
     * to stop, so nothing was marked deleted, and routing, going on with the router it took at the
     * transaction's start, made it a lane and sent it the rest of the transaction after the DELETE
     * was answered, until some other write.
     */
    @Test
    void aSubscriptionDeletedBeforeItHadALaneIsGivenNoneByRoutingThatStillHoldsIt() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMillis(300));
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            accepted.add(request);
            return 204;
        });
        Subscription gone = webhook("config:gone", "gone", receiver, 1);
        Subscription kept = webhook("config:kept", "kept", receiver, 1);
        dispatcher.sync(List.of(gone, kept));
        dispatcher.sync(List.of(kept), Set.of(), id -> id.equals(kept.id()));
        int before = acknowledged.get();
        send(dispatcher, gone, 3, 1); // routed with a router taken before the deletion
        send(dispatcher, kept, 1, 1);
        await().atMost(WAIT).until(() -> accepted.stream().anyMatch(r -> r.path().equals("/kept")));
        await().atMost(WAIT).until(() -> acknowledged.get() == before + 4);
        assertThat(accepted).noneMatch(r -> r.path().equals("/gone"));
        assertThat(dispatcher.status()).extracting(s -> s.name()).containsExactly("kept");
    }

    @Test
    void aDestinationReplacedWhileFailingIsNotTakenBackByTheEndOfATransactionRoutedBefore() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMillis(300));
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            if (request.path().equals("/broken")) {
                return 503; // the destination the operator replaces
            }
            accepted.add(request);
            return 204;
        });
        String id = "6f1c2b6e-0000-4000-8000-000000000002";
        Subscription broken = webhook(id, "broken", receiver, 1);
        send(dispatcher, broken, 3, 1);
        await().atMost(WAIT).until(() -> store.count(id) == 3);
        // the operator points it at a working destination; routing is still at the end of a transaction it
        // routed with the subscription as it was, and hands the lane one more event of it
        Subscription fixed = webhook(id, "fixed", receiver, 1);
        dispatcher.sync(List.of(fixed));
        send(dispatcher, broken, 1, 1);
        // all four go to the destination in force, the queue empties, and nothing more goes to the old one
        await().atMost(WAIT).until(() -> accepted.stream().map(r -> r.header("webhook-id")).distinct().count() == 4
                && store.count(id) == 0);
        assertThat(accepted).allSatisfy(r -> assertThat(r.path()).isEqualTo("/fixed"));
        await().atMost(WAIT).untilAsserted(() -> assertThat(dispatcher.status()).singleElement()
                .satisfies(status -> assertThat(status.name()).isEqualTo("fixed")));

        // another one, replaced before it had a lane: the lane routing makes with the object it routed with
        // takes the one in force
        String other = "6f1c2b6e-0000-4000-8000-000000000003";
        Subscription otherFixed = webhook(other, "fixed", receiver, 1);
        dispatcher.sync(List.of(fixed, otherFixed));
        send(dispatcher, webhook(other, "broken", receiver, 1), 1, 1);
        await().atMost(WAIT).until(() -> accepted.stream().map(r -> r.header("webhook-id")).distinct().count() == 5);
        assertThat(accepted).allSatisfy(r -> assertThat(r.path()).isEqualTo("/fixed"));
    }

    @Test
    void aGoneFromADestinationReplacedMeanwhileDoesNotDisableItsReplacement() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(5));
        java.util.concurrent.CountDownLatch replaced = new java.util.concurrent.CountDownLatch(1);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            if (request.path().equals("/old")) {
                try {
                    replaced.await(30, java.util.concurrent.TimeUnit.SECONDS);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                return 410; // the endpoint the operator is retiring, answering as the replacement comes in
            }
            accepted.add(request);
            return 204;
        });
        String id = "6f1c2b6e-0000-4000-8000-000000000004";
        send(dispatcher, webhook(id, "old", receiver, 1), 1, 1);
        await().atMost(WAIT).until(() -> receiver.requests("/old").size() == 1);
        dispatcher.sync(List.of(webhook(id, "new", receiver, 1)));
        replaced.countDown();
        // the event goes to the replacement, which is not disabled for the old one's 410
        await().atMost(WAIT).until(() -> accepted.size() == 1);
        assertThat(dispatcher.status()).singleElement().satisfies(status -> assertThat(status.disabled()).isFalse());
        send(dispatcher, webhook(id, "new", receiver, 1), 1, 1);
        await().atMost(WAIT).until(() -> accepted.size() == 2);
    }

    /**
     * An AMQP subscription replaced by a webhook while its message waits for the broker's credit (an
     * address full): the lane kept it under way (the same broker, it reasoned), for up to the request
     * timeout, and had credit come first it went to the broker replaced, counted delivered, and
     * the webhook never had it. It is given up, not sent, and goes to the webhook.
     */
    @Test
    void anAmqpDestinationReplacedByAWebhookGivesUpWhatWaitsForTheBroker() throws Exception {
        try (io.walhook.testing.AmqpPeer peer = io.walhook.testing.AmqpPeer.start()) {
            peer.withholdCredit();
            AmqpClient broker = new AmqpClient(vertx, io.walhook.config.AmqpUrl.parse(peer.url()), Duration.ofMinutes(2));
            List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
            WebhookReceiver receiver = receiver(request -> {
                accepted.add(request);
                return 204;
            });
            Dispatcher dispatcher = dispatcher(s -> s.destination() instanceof Destination.Amqp amqp ? broker.transport(amqp)
                    : new WebhookTransport(client, (Destination.Webhook) s.destination(), Clock.systemUTC(),
                            Duration.ofMinutes(2), false));
            String id = "6f1c2b6e-0000-4000-8000-000000000009";
            int before = acknowledged.get();
            send(dispatcher, amqp(id, "full.{table}"), 1, 1);
            await().atMost(WAIT).until(() -> dispatcher.status().stream().anyMatch(s -> s.inFlight() > 0));
            dispatcher.sync(List.of(webhook(id, "hooked", receiver, 1)));
            await().atMost(Duration.ofSeconds(15)).until(() -> accepted.size() == 1);
            await().atMost(WAIT).until(() -> acknowledged.get() == before + 1);
            peer.grantCredit();
            await().during(Duration.ofSeconds(1)).atMost(WAIT).until(() -> peer.accepted().isEmpty());
            broker.close();
        }
    }

    @Test
    void anAmqpDestinationReplacedWhileEventsWaitTakesThemAtItsOwnAddress() throws Exception {
        try (io.walhook.testing.AmqpPeer peer = io.walhook.testing.AmqpPeer.start()) {
            java.util.concurrent.atomic.AtomicBoolean down = new java.util.concurrent.atomic.AtomicBoolean(true);
            List<String> refused = new CopyOnWriteArrayList<>();
            peer.reject(message -> {
                if (down.get()) {
                    refused.add(message.getAddress());
                }
                return down.get();
            });
            AmqpClient broker = new AmqpClient(vertx, io.walhook.config.AmqpUrl.parse(peer.url()), Duration.ofSeconds(2));
            WebhookReceiver receiver = receiver(request -> 503);
            Dispatcher dispatcher = dispatcher(s -> s.destination() instanceof Destination.Amqp amqp ? broker.transport(amqp)
                    : new WebhookTransport(client, (Destination.Webhook) s.destination(), Clock.systemUTC(),
                            Duration.ofSeconds(2), false));
            // one subscription to an AMQP address per table, another to a webhook; both destinations fail
            String amqpId = "6f1c2b6e-0000-4000-8000-000000000005";
            String webhookId = "6f1c2b6e-0000-4000-8000-000000000006";
            send(dispatcher, amqp(amqpId, "old.{table}"), 2, 1);
            send(dispatcher, webhook(webhookId, "hook", receiver, 1), 2, 1);
            await().atMost(WAIT).until(() -> receiver.requests("/hook").size() >= 2);
            // the operator replaces both destinations with AMQP addresses, and the broker takes messages again
            dispatcher.sync(List.of(amqp(amqpId, "new.{table}"), amqp(webhookId, "hooked.{table}")));
            // (once the attempts under way as it did, made with the destinations they were made for, are answered)
            int before = refused.size();
            await().atMost(WAIT).until(() -> refused.size() >= before + 8
                    && refused.subList(refused.size() - 4, refused.size()).stream().allMatch(a -> !a.startsWith("old")));
            down.set(false);
            await().atMost(WAIT).until(() -> peer.accepted().stream().map(m -> m.getMessageId()).distinct().count() == 4);
            assertThat(peer.accepted()).extracting(m -> m.getAddress())
                    .allSatisfy(address -> assertThat(address).matches("(new|hooked)\\.items"));
        }
    }

    private static Subscription amqp(String id, String address) {
        return new Subscription(id, "amqp-" + id.substring(id.length() - 4), List.of(TablePattern.ALL),
                Set.of(Operation.values()), java.util.Optional.empty(), new Destination.Amqp(address), EventFormat.JSON, 1,
                0, Projection.ALL, false, RetryPolicy.DEFAULTS, null);
    }

    @Test
    void aGoneFromTheSameEndpointAfterARenameDisablesAtOnce() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(5));
        java.util.concurrent.CountDownLatch renamed = new java.util.concurrent.CountDownLatch(1);
        WebhookReceiver receiver = receiver(request -> {
            try {
                renamed.await(30, java.util.concurrent.TimeUnit.SECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return 410;
        });
        String id = "6f1c2b6e-0000-4000-8000-000000000008";
        send(dispatcher, signed(id, "gone", receiver), 1, 1);
        await().atMost(WAIT).until(() -> receiver.requests("/gone").size() == 1);
        // the subscription read again (renamed, its secret the same): the endpoint that answered is still its own
        Subscription renamedCopy = signed(id, "gone", receiver);
        dispatcher.sync(List.of(new Subscription(id, "renamed", renamedCopy.tables(), renamedCopy.operations(),
                renamedCopy.filter(), renamedCopy.destination(), renamedCopy.format(), 1, 0, Projection.ALL, false,
                RetryPolicy.DEFAULTS, null)));
        renamed.countDown();
        await().atMost(WAIT).until(() -> dispatcher.status().get(0).disabled());
        assertThat(receiver.requests("/gone")).as("disabled by its one 410, not tried again").hasSize(1);
    }

    /**
     * A 410 is kept in the state, so that a restart or a take-over does not deliver to the endpoint
     * that said it was gone; one the state refused to record (its table away here) is written again
     * once it can be: not written, the next start found the subscription enabled and delivered its
     * queue to that endpoint.
     */
    @Test
    void a410TheStateRefusedIsRecordedOnceItCanBeAndTheNextStartStaysDisabled() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(5));
        database.sql("ALTER TABLE walhook.gone_endpoint RENAME TO gone_endpoint_away");
        WebhookReceiver receiver = receiver(request -> 410);
        String id = "6f1c2b6e-0000-4000-8000-000000000031";
        Subscription subscription = signed(id, "gone", receiver);
        send(dispatcher, subscription, 1, 1);
        await().atMost(WAIT).until(() -> dispatcher.status().get(0).disabled() && store.count(id) == 1);
        database.sql("ALTER TABLE walhook.gone_endpoint_away RENAME TO gone_endpoint");
        await().atMost(WAIT).until(() -> store.gone(List.of(id)).containsKey(id));
        dispatcher.close();

        // started again on the same state: its queue waits, nothing is sent to the endpoint that is gone
        int answered = receiver.requests("/gone").size();
        Dispatcher next = dispatcherOver(store);
        next.resumeParked(List.of(subscription));
        await().atMost(WAIT).until(() -> !next.status().isEmpty() && next.status().get(0).disabled());
        await().during(Duration.ofSeconds(2)).atMost(Duration.ofSeconds(10))
                .until(() -> receiver.requests("/gone").size() == answered);
        assertThat(store.count(id)).isEqualTo(1);
    }

    /**
     * SIGTERM while a 410 is being written: the stop waits for the write (a while, not for ever)
     * before it shuts the durable queue's threads. It used to shut them at once, dropping the write,
     * and the next start delivered to the endpoint that had said it was gone.
     */
    @Test
    void a410BeingRecordedWhenWalhookStopsIsRecordedBeforeItStops() throws Exception {
        database = new SourceFixture(TestPostgres.shared(), "gone_at_stop");
        GatedDataSource gated = new GatedDataSource(database.dataSource);
        store = new ParkedEventStore(gated, "walhook");
        Dispatcher dispatcher = dispatcherOver(store);
        java.util.concurrent.atomic.AtomicBoolean gone = new java.util.concurrent.atomic.AtomicBoolean();
        WebhookReceiver receiver = receiver(request -> gone.get() ? 410 : 204);
        String id = "6f1c2b6e-0000-4000-8000-000000000032";
        Subscription subscription = signed(id, "gone", receiver);
        send(dispatcher, subscription, 1, 1);
        await().atMost(WAIT).until(() -> dispatcher.status().get(0).delivered() == 1);
        // the state database slow to answer when the 410 comes, and SIGTERM meanwhile
        gone.set(true);
        gated.shut();
        send(dispatcher, subscription, 1, 1);
        await().atMost(WAIT).until(() -> dispatcher.status().get(0).disabled() && gated.waiting.get() > 0);
        Thread stop = new Thread(dispatcher::close, "stop");
        stop.start();
        await().atMost(WAIT).until(() -> stop.getState() != Thread.State.RUNNABLE && stop.getState() != Thread.State.NEW);
        gated.open();
        stop.join(Duration.ofSeconds(30).toMillis());

        assertThat(stop.isAlive()).isFalse();
        assertThat(new ParkedEventStore(database.dataSource, "walhook").gone(List.of(id))).containsKey(id);
    }

    /** A dispatcher of a 5 min retry window over {@code store} (the state of a dispatcher before it, say). */
    private Dispatcher dispatcherOver(ParkedEventStore store) {
        Dispatcher dispatcher = new Dispatcher(Clock.systemUTC(), new Dispatcher.Settings(Duration.ofSeconds(2),
                Duration.ofMillis(300), Duration.ofMinutes(5), Duration.ofSeconds(1), 4, 4000, 64L << 20,
                Dispatcher.Settings.HOLD_LIMIT, Dispatcher.Settings.MEMORY_BYTES), store, DeliveryMetrics.NONE,
                paused::contains, s -> new WebhookTransport(client, (Destination.Webhook) s.destination(), Clock.systemUTC(),
                        Duration.ofSeconds(2), false));
        dispatchers.add(dispatcher);
        return dispatcher;
    }

    private static Subscription signed(String id, String name, WebhookReceiver receiver) {
        return new Subscription(id, name, List.of(TablePattern.ALL), Set.of(Operation.values()), java.util.Optional.empty(),
                new Destination.Webhook(URI.create(receiver.url("/" + name)),
                        List.of("0123456789abcdef0123".getBytes(java.nio.charset.StandardCharsets.UTF_8)), Map.of()),
                EventFormat.JSON, 1, 0, Projection.ALL, false, RetryPolicy.DEFAULTS, null);
    }

    @Test
    void aRequestRetriedAfterItsBatchingChangedKeepsItsIdAndShape() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(5));
        java.util.concurrent.atomic.AtomicBoolean down = new java.util.concurrent.atomic.AtomicBoolean(true);
        WebhookReceiver receiver = receiver(request -> down.get() ? 503 : 204);
        String id = "6f1c2b6e-0000-4000-8000-000000000007";
        send(dispatcher, webhook(id, "shape", receiver, 10), 1, 1);
        await().atMost(WAIT).until(() -> receiver.requests("/shape").size() >= 2);
        // batching turned off while the one-event batch is retried
        dispatcher.sync(List.of(webhook(id, "shape", receiver, 1)));
        int before = receiver.requests("/shape").size();
        await().atMost(WAIT).until(() -> receiver.requests("/shape").size() >= before + 2);
        down.set(false);
        await().atMost(WAIT).until(() -> dispatcher.status().get(0).delivered() == 1);
        // every attempt is the same request: the receiver's deduplication by webhook-id sees one
        List<WebhookReceiver.Request> attempts = receiver.requests("/shape");
        assertThat(attempts).extracting(r -> r.header("webhook-id")).containsOnly(attempts.get(0).header("webhook-id"));
        assertThat(attempts).extracting(WebhookReceiver.Request::body).containsOnly(attempts.get(0).body());
        // the next event goes as a single one
        send(dispatcher, webhook(id, "shape", receiver, 1), 1, 1);
        await().atMost(WAIT).until(() -> receiver.requests("/shape").size() == attempts.size() + 1);
        assertThat(receiver.requests("/shape").get(attempts.size()).body()).startsWith("{");
    }

    /** A real database behind a gate: while it is shut, every new connection waits (a state database slow to answer). */
    private static final class GatedDataSource implements javax.sql.DataSource {
        private final javax.sql.DataSource real;
        private volatile java.util.concurrent.CountDownLatch gate = new java.util.concurrent.CountDownLatch(0);
        private final AtomicInteger waiting = new AtomicInteger();
        private volatile RuntimeException failure;
        /** Connections asked for so far: each is one round trip of the state database. */
        private final AtomicInteger connections = new AtomicInteger();

        GatedDataSource(javax.sql.DataSource real) {
            this.real = real;
        }

        void shut() {
            gate = new java.util.concurrent.CountDownLatch(1);
        }

        void open() {
            gate.countDown();
        }

        /** What a connection asked for from now on meets: a container that is gone, say. */
        void failWith(RuntimeException failure) {
            this.failure = failure;
        }

        @Override
        public java.sql.Connection getConnection() throws java.sql.SQLException {
            connections.incrementAndGet();
            waiting.incrementAndGet();
            try {
                gate.await();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new java.sql.SQLException("interrupted at the gate", e);
            } finally {
                waiting.decrementAndGet();
            }
            if (failure != null) {
                throw failure;
            }
            return real.getConnection();
        }

        @Override
        public java.sql.Connection getConnection(String user, String password) throws java.sql.SQLException {
            return getConnection();
        }

        @Override
        public java.io.PrintWriter getLogWriter() throws java.sql.SQLException {
            return real.getLogWriter();
        }

        @Override
        public void setLogWriter(java.io.PrintWriter out) throws java.sql.SQLException {
            real.setLogWriter(out);
        }

        @Override
        public void setLoginTimeout(int seconds) throws java.sql.SQLException {
            real.setLoginTimeout(seconds);
        }

        @Override
        public int getLoginTimeout() throws java.sql.SQLException {
            return real.getLoginTimeout();
        }

        @Override
        public java.util.logging.Logger getParentLogger() {
            return java.util.logging.Logger.getGlobal();
        }

        @Override
        public <T> T unwrap(Class<T> type) throws java.sql.SQLException {
            return real.unwrap(type);
        }

        @Override
        public boolean isWrapperFor(Class<?> type) throws java.sql.SQLException {
            return real.isWrapperFor(type);
        }
    }

    /** A context on {@link #store} whose subscriptions are all paused: everything handed to a lane is queued. */
    private Dispatcher.Context pausedContext(java.util.concurrent.ExecutorService lanes,
            java.util.concurrent.ScheduledExecutorService timer, java.util.concurrent.ExecutorService durable,
            MemoryBudget memory) {
        return context(lanes, timer, durable, memory, subscriptionId -> true);
    }

    private Dispatcher.Context context(java.util.concurrent.ExecutorService lanes,
            java.util.concurrent.ScheduledExecutorService timer, java.util.concurrent.ExecutorService durable,
            MemoryBudget memory, java.util.function.Predicate<String> paused) {
        return context(lanes, timer, durable, memory, paused, Duration.ofSeconds(30));
    }

    private Dispatcher.Context context(java.util.concurrent.ExecutorService lanes,
            java.util.concurrent.ScheduledExecutorService timer, java.util.concurrent.ExecutorService durable,
            MemoryBudget memory, java.util.function.Predicate<String> paused, Duration retryWindow) {
        return new Dispatcher.Context(Clock.systemUTC(), new Dispatcher.Settings(Duration.ofSeconds(2),
                Duration.ofMillis(300), retryWindow, Duration.ofSeconds(1), 4, 4000, 64L << 20), store,
                DeliveryMetrics.NONE, paused,
                sub -> new WebhookTransport(client, (Destination.Webhook) sub.destination(), Clock.systemUTC(),
                        Duration.ofSeconds(2), false), lanes, timer, durable, new Random(3), other -> false, memory,
                new MemoryBudget(64L << 20));
    }

    /**
     * A 410 answered to a lane closed meanwhile (walhook stopping, or another instance delivering the
     * subscription now, where a replay may have cleared the record since) is not recorded: written
     * late, it would disable the subscription again on the instance that delivers it.
     */
    @Test
    void a410AnsweredAfterTheLaneClosedIsNotRecorded() throws Exception {
        database = new SourceFixture(TestPostgres.shared(), "gone_closed");
        store = new ParkedEventStore(database.dataSource, "walhook");
        java.util.concurrent.ExecutorService lanes = java.util.concurrent.Executors.newFixedThreadPool(2);
        java.util.concurrent.ExecutorService durable = java.util.concurrent.Executors.newFixedThreadPool(2);
        java.util.concurrent.ScheduledExecutorService timer = java.util.concurrent.Executors.newSingleThreadScheduledExecutor();
        java.util.concurrent.CountDownLatch released = new java.util.concurrent.CountDownLatch(1);
        try (io.walhook.testing.LogLines log = new io.walhook.testing.LogLines(Lane.class)) {
            WebhookReceiver receiver = receiver(request -> {
                hold(released, 30);
                return 410;
            });
            Dispatcher.Context context = context(lanes, timer, durable, new MemoryBudget(64L << 20), other -> false);
            String id = "6f1c2b6e-0000-4000-8000-000000000033";
            Lane lane = new Lane(signed(id, "gone", receiver), context, false);
            hand(lane, 1);
            await().atMost(WAIT).until(() -> receiver.requests("/gone").size() == 1);
            lane.close();
            released.countDown();

            // the answer was taken (the lane says so), and nothing is written
            await().atMost(WAIT).until(() -> log.lines().stream().anyMatch(m -> m.contains("disabled: ")));
            await().during(Duration.ofSeconds(1)).atMost(Duration.ofSeconds(5))
                    .until(() -> store.gone(List.of(id)).isEmpty());
        } finally {
            released.countDown();
            lanes.shutdownNow();
            durable.shutdownNow();
            timer.shutdownNow();
        }
    }

    /**
     * A backfill's rows waiting for a slow destination longer than the lane lets events wait
     * ({@link #aDestinationSlowerThanTheStreamHasItsEventsQueuedDurablyOnceTheOldestWaitedItsRetryWindow})
     * stay in memory: their chunks wait for them, not the slot's position. Counted, a destination
     * slower than 13 events a second had the lane queue every row of the backfill durably, the
     * runner reading the table at the database's pace into the queue.
     */
    @Test
    void aBackfillsRowsWaitingForASlowDestinationStayInMemory() throws Exception {
        String id = "6f1c2b6e-0000-4000-8000-000000000035";
        slowLane("slow_backfill", id, (lane, receiver, log) -> {
            hand(lane, 60, true); // 15 s at 4 a second: the first waited 10 s (the least a lane lets events wait) by 14

            await().atMost(WAIT).until(() -> acknowledged.get() == 60);
            assertThat(receiver.requests("/slow")).hasSize(60);
            assertThat(log.lines()).noneMatch(line -> line.contains("more slowly than they come"));
            assertThat(store.count(id)).isZero();
        });
    }

    /**
     * Live changes behind a backfill's rows (a chunk handed over first), waiting for a slow
     * destination: the wait that sends them to the durable queue counts from the oldest of them,
     * however many rows lie before it. It looked at the oldest 64 events only, all rows, and the
     * live ones waited with no bound, holding the slot's position.
     */
    @Test
    void liveChangesBehindABackfillsRowsWaitingForASlowDestinationGoToTheDurableQueue() throws Exception {
        slowLane("slow_behind_rows", "6f1c2b6e-0000-4000-8000-000000000036", (lane, receiver, log) -> {
            hand(lane, 100, true, 1001);
            // other rows, which go first, 4 a second: the last of them wait 10 s (the least a lane lets events wait)
            hand(lane, 60, false);

            await().atMost(WAIT).until(() -> log.lines().stream().anyMatch(line -> line.contains("more slowly than they come")));
            await().atMost(WAIT).until(() -> acknowledged.get() == 160);
            assertThat(receiver.requests("/slow").size()).as("delivered when all were acknowledged").isLessThan(160);
        });
    }

    /** What a test does with a lane of its own whose destination takes a second a request ({@link #slowLane}). */
    private interface SlowLane {
        void run(Lane lane, WebhookReceiver receiver, io.walhook.testing.LogLines log) throws Exception;
    }

    /**
     * Runs {@code test} with a lane of subscription {@code id} (its path /slow) whose destination
     * answers after a second, 4 requests at a time, of a 2 s retry window (so events may wait 10 s).
     */
    private void slowLane(String prefix, String id, SlowLane test) throws Exception {
        database = new SourceFixture(TestPostgres.shared(), prefix);
        store = new ParkedEventStore(database.dataSource, "walhook");
        java.util.concurrent.ExecutorService lanes = java.util.concurrent.Executors.newFixedThreadPool(2);
        java.util.concurrent.ExecutorService durable = java.util.concurrent.Executors.newFixedThreadPool(2);
        java.util.concurrent.ScheduledExecutorService timer = java.util.concurrent.Executors.newSingleThreadScheduledExecutor();
        java.util.concurrent.CountDownLatch never = new java.util.concurrent.CountDownLatch(1);
        try (io.walhook.testing.LogLines log = new io.walhook.testing.LogLines(Lane.class)) {
            WebhookReceiver receiver = receiver(request -> {
                hold(never, 1);
                return 204;
            });
            Dispatcher.Context context = context(lanes, timer, durable, new MemoryBudget(64L << 20), other -> false,
                    Duration.ofSeconds(2));
            test.run(new Lane(webhook(id, "slow", receiver, 1), context, false), receiver, log);
        } finally {
            lanes.shutdownNow();
            durable.shutdownNow();
            timer.shutdownNow();
        }
    }

    @Test
    void aLaneClosedAtShutdownWhileItWritesItsDurableQueueDiscardsNothing() throws Exception {
        database = new SourceFixture(TestPostgres.shared(), "closing");
        GatedDataSource gated = new GatedDataSource(database.dataSource);
        store = new ParkedEventStore(gated, "walhook");
        java.util.concurrent.ExecutorService lanes = java.util.concurrent.Executors.newFixedThreadPool(2);
        java.util.concurrent.ExecutorService durable = java.util.concurrent.Executors.newFixedThreadPool(2);
        java.util.concurrent.ScheduledExecutorService timer = java.util.concurrent.Executors.newSingleThreadScheduledExecutor();
        try {
            WebhookReceiver receiver = receiver(request -> 204);
            Dispatcher.Context context = pausedContext(lanes, timer, durable, new MemoryBudget(64L << 20));
            String id = "6f1c2b6e-0000-4000-8000-000000000002";
            Lane lane = new Lane(webhook(id, "held", receiver, 1), context, false);
            hand(lane, 100);
            await().atMost(WAIT).until(() -> store.count(id) == 100 && acknowledged.get() == 100);

            // the next write waits on the state database when shutdown closes the lane
            gated.shut();
            hand(lane, 10);
            await().atMost(WAIT).until(() -> gated.waiting.get() > 0);
            lane.close();
            gated.open();

            // what was queued stays queued for the next instance, and nothing more is acknowledged
            await().during(Duration.ofSeconds(1)).atMost(Duration.ofSeconds(10)).until(() -> store.count(id) >= 100);
            assertThat(store.count(id)).isBetween(100L, 110L);
            assertThat(acknowledged.get()).isEqualTo(100);
            assertThat(receiver.requests()).isEmpty();
        } finally {
            gated.open();
            lanes.shutdownNow();
            durable.shutdownNow();
            timer.shutdownNow();
        }
    }

    /**
     * Shutdown closes the lanes, then the container goes: a durable-queue call under way meets a
     * data source that is gone. That is the shutdown's doing, not a defect to report with a stack
     * trace, nor to try again.
     */
    @Test
    void aDurableQueueCallFailingAfterTheLaneClosedIsNotReported() throws Exception {
        database = new SourceFixture(TestPostgres.shared(), "closed_quietly");
        GatedDataSource gated = new GatedDataSource(database.dataSource);
        store = new ParkedEventStore(gated, "walhook");
        java.util.concurrent.ExecutorService lanes = java.util.concurrent.Executors.newFixedThreadPool(2);
        java.util.concurrent.ExecutorService durable = java.util.concurrent.Executors.newFixedThreadPool(2);
        java.util.concurrent.ScheduledExecutorService timer = java.util.concurrent.Executors.newSingleThreadScheduledExecutor();
        try (io.walhook.testing.LogLines log = new io.walhook.testing.LogLines(Lane.class)) {
            WebhookReceiver receiver = receiver(request -> 204);
            Dispatcher.Context context = pausedContext(lanes, timer, durable, new MemoryBudget(64L << 20));
            String id = "6f1c2b6e-0000-4000-8000-000000000012";
            Lane lane = new Lane(webhook(id, "closing", receiver, 1), context, false);
            gated.shut();
            hand(lane, 10);
            await().atMost(WAIT).until(() -> gated.waiting.get() > 0);
            lane.close();
            gated.failWith(new IllegalStateException("ArC container not initialized"));
            gated.open();
            int asked = gated.connections.get();
            await().during(Duration.ofSeconds(2)).atMost(Duration.ofSeconds(10)).until(() -> log.lines().isEmpty());
            assertThat(gated.connections.get()).as("connections asked for after the close").isEqualTo(asked);
            assertThat(acknowledged.get()).isZero();
        } finally {
            gated.open();
            lanes.shutdownNow();
            durable.shutdownNow();
            timer.shutdownNow();
        }
    }

    @Test
    void aSubscriptionDeletedWhileItsDurableQueueIsBeingWrittenAcknowledgesAndFreesWhatWasBeingWritten() throws Exception {
        database = new SourceFixture(TestPostgres.shared(), "deleting");
        GatedDataSource gated = new GatedDataSource(database.dataSource);
        store = new ParkedEventStore(gated, "walhook");
        java.util.concurrent.ExecutorService lanes = java.util.concurrent.Executors.newFixedThreadPool(2);
        java.util.concurrent.ExecutorService durable = java.util.concurrent.Executors.newFixedThreadPool(2);
        java.util.concurrent.ScheduledExecutorService timer = java.util.concurrent.Executors.newSingleThreadScheduledExecutor();
        MemoryBudget memory = new MemoryBudget(64L << 20);
        try {
            WebhookReceiver receiver = receiver(request -> 204);
            Dispatcher.Context context = pausedContext(lanes, timer, durable, memory);
            String id = "6f1c2b6e-0000-4000-8000-000000000003";
            Lane lane = new Lane(webhook(id, "doomed", receiver, 1), context, false);
            hand(lane, 100);
            await().atMost(WAIT).until(() -> store.count(id) == 100 && acknowledged.get() == 100);

            // the next write waits on the state database when the API deletes the subscription
            gated.shut();
            hand(lane, 10);
            await().atMost(WAIT).until(() -> gated.waiting.get() > 0);
            lane.delete();
            gated.open();

            // discarded as the API said: acknowledged (the slot moves on), its memory freed, its queue dropped
            await().atMost(WAIT).until(() -> acknowledged.get() == 110 && store.count(id) == 0);
            await().atMost(WAIT).until(() -> memory.used() == 0); // released just after the acknowledgements
            assertThat(receiver.requests()).isEmpty();
        } finally {
            gated.open();
            lanes.shutdownNow();
            durable.shutdownNow();
            timer.shutdownNow();
        }
    }

    /** Hands {@code count} new row changes to a lane, as routing does. */
    private void hand(Lane lane, int count) throws InterruptedException {
        hand(lane, count, false);
    }

    /** Hands {@code count} inserts to {@code lane}; {@code background}: as a backfill's rows. */
    private void hand(Lane lane, int count, boolean background) throws InterruptedException {
        hand(lane, count, background, 1);
    }

    /** As {@link #hand(Lane, int, boolean)}, of rows {@code firstRow} on. */
    private void hand(Lane lane, int count, boolean background, int firstRow) throws InterruptedException {
        for (int i = 0; i < count; i++) {
            ChangeEvent event = ITEMS.insertAt(nextLsn += 0x100, Integer.toString(firstRow + i), "0");
            EventEncoder.Encoded body = encoder.encode(event, EventFormat.JSON, Projection.ALL);
            Job job = new Job(event.id(), event.tx().commitLsn(), event.tx().commitTime(), body.body(), body.contentType(),
                    body.headers(), null, Ordering.of(event));
            job.relation = event.relation();
            job.done = acknowledged::incrementAndGet;
            job.background = background;
            lane.routed.add(job);
        }
        lane.handOver();
    }

    @Test
    void maxInFlightCapsOneSubscriptionsRequestsUnderWayWhileAnotherUsesTheGlobalConcurrency() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        Map<String, AtomicInteger> underWay = new ConcurrentHashMap<>();
        Map<String, AtomicInteger> most = new ConcurrentHashMap<>();
        WebhookReceiver receiver = receiver(request -> {
            int now = underWay.computeIfAbsent(request.path(), p -> new AtomicInteger()).incrementAndGet();
            most.computeIfAbsent(request.path(), p -> new AtomicInteger()).accumulateAndGet(now, Math::max);
            try {
                Thread.sleep(100); // a slow endpoint: requests pile up to whatever walhook allows
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            } finally {
                underWay.get(request.path()).decrementAndGet();
            }
            return 204;
        });
        Subscription capped = webhook("config:capped", "capped", receiver, 1)
                .withLimits(new DeliveryLimits(java.util.Optional.of(2), java.util.Optional.empty()));
        Subscription global = webhook("config:global", "global", receiver, 1);
        send(dispatcher, capped, 20, 1);
        send(dispatcher, global, 20, 1);
        await().atMost(WAIT).until(() -> receiver.requests("/capped").size() == 20
                && receiver.requests("/global").size() == 20);
        assertThat(most.get("/capped").get()).as("max_in_flight 2").isEqualTo(2);
        assertThat(most.get("/global").get()).as("the global concurrency (4)").isGreaterThan(2);
        await().atMost(WAIT).until(() -> acknowledged.get() == 40);
    }

    @Test
    void aRateLimitSpacesRequestsRetriesIncluded() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        Set<String> failedOnce = ConcurrentHashMap.newKeySet();
        WebhookReceiver receiver = receiver(request -> {
            try {
                // each event's first attempt fails: its retry must wait for the rate limit too
                return failedOnce.add(JSON.readTree(request.body()).get("id").asText()) ? 503 : 204;
            } catch (Exception e) {
                return 400;
            }
        });
        receiver.respondHeaders(request -> Map.of("Retry-After", "0"));
        // a cold client's first connections take a while (class loading), and requests started 50 ms
        // apart would arrive together: a first delivery warms it, so arrivals follow starts
        send(dispatcher, webhook("config:warm", "warm", receiver, 1), 4, 1);
        await().atMost(WAIT).until(() -> acknowledged.get() == 4);
        Subscription limited = webhook("config:limited", "limited", receiver, 1)
                .withLimits(new DeliveryLimits(java.util.Optional.empty(), java.util.Optional.of(
                        new DeliveryLimits.Rate(20, DeliveryLimits.Period.SECOND))));
        send(dispatcher, limited, 15, 1);
        await().atMost(WAIT).until(() -> acknowledged.get() == 4 + 15);
        List<WebhookReceiver.Request> requests = receiver.requests("/limited");
        assertThat(requests).hasSize(30);
        // 20 per second is one start every 50 ms: 30 requests span at least 29 gaps. Arrivals, not starts, are seen
        // here: a stall of the receiver (a loaded machine) of up to 300 ms bunches a few together, within these
        // margins; without the limit the 30 arrive within a few hundred milliseconds
        Duration span = Duration.between(requests.get(0).receivedAt(), requests.get(requests.size() - 1).receivedAt());
        assertThat(span).isGreaterThanOrEqualTo(Duration.ofMillis(29 * 50 - 300));
        // and no second of it saw more than 20 (+1 for a window that catches both ends, +2 for a bunch)
        for (WebhookReceiver.Request first : requests) {
            long inSecond = requests.stream().filter(r -> !r.receivedAt().isBefore(first.receivedAt())
                    && r.receivedAt().isBefore(first.receivedAt().plusSeconds(1))).count();
            assertThat(inSecond).isLessThanOrEqualTo(23);
        }
    }

    @Test
    void aRateLimitedSubscriptionThatFallsBehindWaitsInItsDurableQueueInsteadOfHoldingTheStreamBack() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10), 50);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            accepted.add(request);
            return 204;
        });
        Subscription limited = webhook("config:tenant", "tenant", receiver, 1).withLimits(new DeliveryLimits(
                java.util.Optional.empty(), java.util.Optional.of(new DeliveryLimits.Rate(40, DeliveryLimits.Period.SECOND))));
        // 300 events at 40 a second is 7.5 s of sending; the lane holds 50
        java.util.concurrent.CompletableFuture<List<ChangeEvent>> routed = java.util.concurrent.CompletableFuture
                .supplyAsync(() -> {
                    try {
                        return send(dispatcher, limited, 30, 10);
                    } catch (Exception e) {
                        throw new IllegalStateException(e);
                    }
                });
        // routing is not held to the rate: everything is acknowledged (in the durable queue) long before it is sent
        await().atMost(WAIT).until(() -> acknowledged.get() == 300);
        // the last acknowledgement can come as the routing thread returns from its flush, before its future completes
        assertThat(routed.get(10, java.util.concurrent.TimeUnit.SECONDS)).hasSize(300);
        assertThat(accepted.size()).isLessThan(300);
        assertThat(dispatcher.status().get(0).mode()).isEqualTo("durable");
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).values().stream().mapToInt(List::size).sum() == 300);
        assertThat(acceptedByRow(accepted)).hasSize(30).allSatisfy((row, versions) -> assertThat(versions)
                .as("row %d in commit order", row).containsExactly(0, 1, 2, 3, 4, 5, 6, 7, 8, 9));
    }

    @Test
    void aDueRetryWaitingForAFreeRequestDoesNotTurnTheLaneOverAndOver() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        Set<String> failedOnce = ConcurrentHashMap.newKeySet();
        java.util.concurrent.CountDownLatch hanging = new java.util.concurrent.CountDownLatch(1);
        WebhookReceiver receiver = receiver(request -> {
            if (mentionsRow(request, 1) && failedOnce.add("1")) {
                return 503; // row 1 fails once: its retry comes due within the 300 ms backoff
            }
            if (mentionsRow(request, 2)) {
                hanging.countDown();
                try {
                    Thread.sleep(1_500); // row 2's request holds the only slot meanwhile
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
            }
            return 204;
        });
        receiver.respondHeaders(request -> Map.of("Retry-After", "0"));
        Subscription one = webhook("config:one", "one", receiver, 1)
                .withLimits(new DeliveryLimits(java.util.Optional.of(1), java.util.Optional.empty()));
        send(dispatcher, one, 2, 1);
        assertThat(hanging.await(30, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
        // a lane that woke at once for its due retry while the slot was taken spun a core for the whole request
        assertLanesMostlyIdleUntilAcknowledged(2);
    }

    @Test
    void aDueRetryWaitingForAPlaceAtItsDestinationDoesNotTurnTheLaneOverAndOver() throws Exception {
        // two requests under way to the receiver at most; the subscription itself may have four
        try (WebhookClient gated = new WebhookClient(vertx, null, 2)) {
            Dispatcher dispatcher = dispatcher(gated);
            Set<String> failedOnce = ConcurrentHashMap.newKeySet();
            java.util.concurrent.CountDownLatch hanging = new java.util.concurrent.CountDownLatch(2);
            WebhookReceiver receiver = receiver(request -> {
                if (mentionsRow(request, 1) && failedOnce.add("1")) {
                    return 503; // row 1 fails once and is due again in a second (Retry-After)
                }
                if ((mentionsRow(request, 2) || mentionsRow(request, 3)) && hanging.getCount() > 0) {
                    hanging.countDown();
                    try {
                        Thread.sleep(1_800); // rows 2 and 3 hold both places meanwhile (the request timeout is 2 s)
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                }
                return 204;
            });
            receiver.respondHeaders(request -> Map.of("Retry-After", "1"));
            send(dispatcher, webhook("config:one", "one", receiver, 1), 3, 1);
            assertThat(hanging.await(30, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
            // a lane that woke at once for its due retry while the destination had no place spun a core until one came
            assertLanesMostlyIdleUntilAcknowledged(3);
        }
    }

    /**
     * A dispatcher closed with requests under way (a take-over tried again after it failed part-way)
     * gives their places at the destination back as they end, and a place that ends while one of its
     * lanes waits is not handed to that lane: the client, and its gates, outlive the dispatcher, and
     * each place kept was one request fewer to that host for the rest of the process's life.
     */
    @Test
    void aDispatcherClosedWithRequestsUnderWayGivesBackTheirPlacesAtTheDestination() throws Exception {
        try (WebhookClient gated = new WebhookClient(vertx, null, 2)) {
            java.util.concurrent.CountDownLatch answer = new java.util.concurrent.CountDownLatch(1);
            WebhookReceiver receiver = receiver(request -> {
                try {
                    answer.await(1, java.util.concurrent.TimeUnit.SECONDS); // within the request timeout of 2 s
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                return 204;
            });
            DestinationGate gate = gated.gate(URI.create(receiver.url("/one")));
            Dispatcher closing = dispatcher(gated);
            send(closing, webhook("config:one", "one", receiver, 1), 6, 1);
            send(closing, webhook("config:two", "two", receiver, 1), 6, 1);
            // both places taken, and a lane waits for one
            await().atMost(WAIT).until(() -> gate.inUse() == 2 && gate.waiting() >= 1);
            closing.close();
            answer.countDown();
            await().atMost(WAIT).untilAsserted(() -> assertThat(List.of(gate.inUse(), gate.waiting()))
                    .as("places in use, lanes waiting").containsExactly(0, 0));

            // the next dispatcher has the whole destination
            acknowledged.set(0);
            Dispatcher next = dispatcher(gated);
            send(next, webhook("config:three", "three", receiver, 1), 6, 1);
            await().atMost(WAIT).until(() -> acknowledged.get() == 6);
        }
    }

    /**
     * An operator moves a subscription from a host that takes requests and never answers (they would
     * end only at the request timeout, here a minute) to another: the requests under way to it are
     * given up at once, their connections reset and their places at the old host freed, and their
     * events go to the replacement without waiting, counted as no failed attempt.
     */
    @Test
    void requestsHungAtAHostReplacedMeanwhileGoToTheReplacementAtOnce() throws Exception {
        try (WebhookClient gated = new WebhookClient(vertx, null, 4)) {
            java.util.concurrent.CountDownLatch released = new java.util.concurrent.CountDownLatch(1);
            List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
            WebhookReceiver hung = receiver(request -> {
                hold(released, 90);
                return 204;
            });
            WebhookReceiver fixed = receiver(request -> {
                accepted.add(request);
                return 204;
            });
            try (io.walhook.testing.TcpProxy hungHost = io.walhook.testing.TcpProxy.to("127.0.0.1",
                    URI.create(hung.url("/")).getPort())) {
                Dispatcher dispatcher = dispatcher(gated, Duration.ofSeconds(60));
                String id = "6f1c2b6e-0000-4000-8000-000000000011";
                // another host name than the replacement's (127.0.0.1): the same receiver is not given up on
                URI hungUrl = URI.create("http://localhost:" + hungHost.port() + "/tenant");
                Subscription before = new Subscription(id, "tenant", List.of(TablePattern.ALL), Set.of(Operation.values()),
                        java.util.Optional.empty(), new Destination.Webhook(hungUrl, List.of(), Map.of()), EventFormat.JSON,
                        1, 0, Projection.ALL, false, RetryPolicy.DEFAULTS, null);
                send(dispatcher, before, 3, 1);
                DestinationGate oldHost = gated.gate(hungUrl);
                await().atMost(WAIT).until(() -> hung.requests().size() == 3 && oldHost.inUse() == 3);
                assertThat(hungHost.clientsOpen()).isEqualTo(3);
                dispatcher.sync(List.of(webhook(id, "tenant", fixed, 1)));
                // well within the minute the hung requests would take to time out
                await().atMost(Duration.ofSeconds(15)).until(() -> acknowledged.get() == 3);
                assertThat(accepted).hasSize(3);
                assertThat(oldHost.inUse()).as("places in use at the replaced host").isZero();
                // nor does the old host keep the lane (its requests' failures kept it, and all it holds, for good)
                await().atMost(Duration.ofSeconds(15)).untilAsserted(() -> assertThat(oldHost.lanesKept())
                        .as("lanes the replaced host keeps").isZero());
                await().atMost(Duration.ofSeconds(15)).untilAsserted(() -> assertThat(hungHost.clientsOpen())
                        .as("connections to the replaced host").isZero());
                assertThat(dispatcher.status()).singleElement().satisfies(status -> {
                    assertThat(status.lastError()).as("no attempt failed").isNull();
                    assertThat(status.retrying()).isZero();
                });
                assertThat(accepted).extracting(r -> r.header("webhook-id")).doesNotHaveDuplicates()
                        .containsExactlyInAnyOrderElementsOf(hung.requests().stream().map(r -> r.header("webhook-id")).toList());
            } finally {
                released.countDown();
            }
        }
    }

    /**
     * A subscription allowed three attempts before its events go to the durable queue, whose
     * request failed twice at the endpoint the operator then replaces: the new endpoint's first
     * failure is its first attempt there, not the third.
     */
    @Test
    void attemptsAtAReplacedEndpointDoNotCountAgainstItsReplacement() throws Exception {
        java.util.concurrent.CountDownLatch replaced = new java.util.concurrent.CountDownLatch(1);
        AtomicInteger oldRequests = new AtomicInteger();
        AtomicInteger newFailuresLeft = new AtomicInteger(1);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            if (request.path().equals("/old")) {
                if (oldRequests.incrementAndGet() == 3) {
                    hold(replaced, 30); // the third attempt is under way as the operator replaces the endpoint
                }
                return 500;
            }
            if (newFailuresLeft.getAndDecrement() > 0) {
                return 500;
            }
            accepted.add(request);
            return 204;
        });
        AtomicInteger parked = new AtomicInteger();
        database = new SourceFixture(TestPostgres.shared(), "dispatch");
        store = new ParkedEventStore(database.dataSource, "walhook");
        Dispatcher dispatcher = new Dispatcher(Clock.systemUTC(), new Dispatcher.Settings(Duration.ofSeconds(2),
                Duration.ofMillis(300), Duration.ofMinutes(10), Duration.ofSeconds(1), 4), store, new DeliveryMetrics() {
                    @Override
                    public void parked(Subscription subscription, int events) {
                        parked.addAndGet(events);
                    }
                }, paused::contains, s -> new WebhookTransport(client, (Destination.Webhook) s.destination(),
                        Clock.systemUTC(), Duration.ofSeconds(30), false));
        dispatchers.add(dispatcher);
        String id = "6f1c2b6e-0000-4000-8000-000000000015";
        RetryPolicy threeAttempts = new RetryPolicy(java.util.Optional.of(3), java.util.Optional.empty(),
                java.util.Optional.empty());
        send(dispatcher, withRetry(webhook(id, "old", receiver, 1), threeAttempts), 1, 1);
        await().atMost(WAIT).until(() -> oldRequests.get() == 3);
        dispatcher.sync(List.of(withRetry(webhook(id, "new", receiver, 1), threeAttempts)));
        replaced.countDown();
        await().atMost(WAIT).until(() -> accepted.size() == 1 && acknowledged.get() == 1);
        assertThat(receiver.requests("/new")).hasSize(2);
        assertThat(parked.get()).as("events sent to the durable queue").isZero();
    }

    private static Subscription withRetry(Subscription s, RetryPolicy retry) {
        return new Subscription(s.id(), s.name(), s.tables(), s.operations(), s.filter(), s.destination(), s.format(),
                s.batchMaxEvents(), s.batchMaxWaitMs(), s.projection(), s.readOnly(), retry, s.limits());
    }

    /**
     * A replacement on the same host (a path or a token changed: most likely the same receiver)
     * does not give up the requests under way, which the receiver may still apply; one of them
     * refused afterwards, with a {@code Retry-After} of two minutes, is no attempt at the replacement
     * and goes to it at once.
     */
    @Test
    void aRequestUnderWayToTheSameHostEndsAndARefusalOfItGoesToTheReplacementAtOnce() throws Exception {
        java.util.concurrent.CountDownLatch replaced = new java.util.concurrent.CountDownLatch(1);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            if (request.path().equals("/old")) {
                hold(replaced, 30);
                return 503;
            }
            accepted.add(request);
            return 204;
        });
        receiver.respondHeaders(request -> request.path().equals("/old") ? Map.of("Retry-After", "120") : Map.of());
        Dispatcher dispatcher = dispatcher(client, Duration.ofSeconds(60));
        String id = "6f1c2b6e-0000-4000-8000-000000000014";
        send(dispatcher, webhook(id, "old", receiver, 1), 1, 1);
        await().atMost(WAIT).until(() -> receiver.requests("/old").size() == 1);
        dispatcher.sync(List.of(webhook(id, "new", receiver, 1)));
        // not given up: nothing goes to the new path while the old one holds the request
        await().during(Duration.ofSeconds(1)).atMost(Duration.ofSeconds(5)).until(() -> receiver.requests("/new").isEmpty());
        replaced.countDown();
        await().atMost(Duration.ofSeconds(20)).until(() -> accepted.size() == 1 && acknowledged.get() == 1);
        assertThat(dispatcher.status()).singleElement().satisfies(status -> assertThat(status.retrying()).isZero());
    }

    /**
     * An operator replaces a destination that asked to be left alone for two minutes
     * ({@code Retry-After}), and one that disabled its subscription with a 410: what failed at the
     * old endpoint is nothing against the new one, whose events go at once.
     */
    @Test
    void eventsWaitingOnTheBackoffOrTheGoneOfAReplacedDestinationGoToTheReplacementAtOnce() throws Exception {
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            if (request.path().equals("/busy")) {
                return 429;
            }
            if (request.path().equals("/retired")) {
                return 410;
            }
            accepted.add(request);
            return 204;
        });
        receiver.respondHeaders(request -> request.path().equals("/busy") ? Map.of("Retry-After", "120") : Map.of());
        Dispatcher dispatcher = dispatcher(client, Duration.ofSeconds(2));
        String busy = "6f1c2b6e-0000-4000-8000-000000000012";
        String retired = "6f1c2b6e-0000-4000-8000-000000000013";
        send(dispatcher, webhook(busy, "busy", receiver, 1), 3, 1);
        versions.clear();
        send(dispatcher, webhook(retired, "retired", receiver, 1), 3, 1);
        await().atMost(WAIT).until(() -> receiver.requests("/busy").size() == 3
                && dispatcher.status().stream().anyMatch(s -> s.name().equals("retired") && s.disabled()));
        dispatcher.sync(List.of(webhook(busy, "calm", receiver, 1), webhook(retired, "successor", receiver, 1)));
        // well within the two minutes the busy one asked for, and with no replay
        await().atMost(Duration.ofSeconds(20)).until(() -> acknowledged.get() == 6 && accepted.size() == 6);
        assertThat(accepted).extracting(WebhookReceiver.Request::path).containsOnly("/calm", "/successor");
        assertThat(dispatcher.status()).allSatisfy(status -> assertThat(status.disabled()).isFalse());
    }

    /**
     * A subscription deleted while its destination holds requests without answering: they are
     * given up at once, so the deleted tenant's host gets its places back (other subscriptions to it
     * need them) rather than after the request timeout.
     */
    @Test
    void requestsHungAtTheDestinationOfADeletedSubscriptionAreGivenUpAtOnce() throws Exception {
        try (WebhookClient gated = new WebhookClient(vertx, null, 3)) {
            java.util.concurrent.CountDownLatch released = new java.util.concurrent.CountDownLatch(1);
            WebhookReceiver receiver = receiver(request -> {
                if (request.path().equals("/gone")) {
                    hold(released, 90);
                }
                return 204;
            });
            try {
                Dispatcher dispatcher = dispatcher(gated, Duration.ofSeconds(60));
                DestinationGate host = gated.gate(URI.create(receiver.url("/gone")));
                send(dispatcher, webhook("config:gone", "gone", receiver, 1), 3, 1);
                await().atMost(WAIT).until(() -> host.inUse() == 3);
                dispatcher.deleted("config:gone");
                await().atMost(Duration.ofSeconds(15)).until(() -> host.inUse() == 0);
                // the host's places serve another subscription at once
                acknowledged.set(0);
                send(dispatcher, webhook("config:other", "other", receiver, 1), 3, 1);
                await().atMost(Duration.ofSeconds(15)).until(() -> acknowledged.get() == 3);
            } finally {
                released.countDown();
            }
        }
    }

    /**
     * A lane waiting for a place at a full host as one whose attempts fail, let in by an operator's
     * replay (its failures forgotten, it asks as a lane holding none and takes the place kept for
     * such lanes): it still counted itself as waiting for a place, though the gate no longer had it
     * waiting, and so never woke for its retries while every attempt failed. Its destination back,
     * what waited was sent only at the end of the retry window (ten minutes here), not within the
     * probe interval.
     */
    @Test
    void aLaneLetInByAReplayWhileItWaitedForAPlaceStillProbesItsDestination() throws Exception {
        try (WebhookClient gated = new WebhookClient(vertx, null, 8)) {
            java.util.concurrent.CountDownLatch released = new java.util.concurrent.CountDownLatch(1);
            java.util.concurrent.CountDownLatch fillersGone = new java.util.concurrent.CountDownLatch(1);
            java.util.concurrent.atomic.AtomicBoolean down = new java.util.concurrent.atomic.AtomicBoolean(true);
            AtomicInteger refused = new AtomicInteger();
            List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
            WebhookReceiver receiver = receiver(request -> {
                if (request.path().equals("/fill")) {
                    hold(released, 90);
                    return 204;
                }
                if (down.get()) {
                    if (refused.incrementAndGet() == 2) {
                        hold(fillersGone, 90); // the replay's request: answered once the others have left the host
                    }
                    return 503;
                }
                accepted.add(request);
                return 204;
            });
            try {
                Dispatcher dispatcher = dispatcher(gated, Duration.ofSeconds(60));
                DestinationGate host = gated.gate(URI.create(receiver.url("/fill")));
                // seven of the host's eight places held by requests that hang; the eighth is kept for lanes holding none
                send(dispatcher, webhook("config:fill", "fill", receiver, 1).withLimits(new DeliveryLimits(
                        java.util.Optional.of(7), java.util.Optional.empty())), 7, 1);
                await().atMost(WAIT).until(() -> host.inUse() == 7);
                Subscription flaky = webhook("config:flaky", "flaky", receiver, 1).withLimits(new DeliveryLimits(
                        java.util.Optional.of(1), java.util.Optional.empty()));
                send(dispatcher, flaky, 3, 1);
                // its first request takes the kept place and fails: it then waits as a failing lane, for no kept place
                await().atMost(WAIT).until(() -> refused.get() == 1 && host.inUse() == 7);
                dispatcher.retryNow(flaky);
                await().atMost(WAIT).until(() -> refused.get() == 2);
                released.countDown();
                await().atMost(WAIT).until(() -> host.inUse() == 1);
                fillersGone.countDown();
                // every attempt fails for a while: the probes' pace
                long since = System.nanoTime();
                await().atMost(WAIT).until(() -> refused.get() >= 12 && System.nanoTime() - since > 4_000_000_000L);
                down.set(false);
                await().atMost(Duration.ofSeconds(20)).until(() -> acceptedOf(accepted, flaky) == 3);
            } finally {
                released.countDown();
                fillersGone.countDown();
            }
        }
    }

    /**
     * A destination replaced (an API edit) while its lane was in the middle of a turn, starting
     * requests: the sync, and the API's answer after it, were done at once, and the turn went on
     * starting requests to the old destination, one the operator may have replaced because it is
     * no longer theirs. The sync now completes once the lane has ended that turn: nothing starts to
     * the old destination after it.
     */
    @Test
    void noRequestStartsToAReplacedDestinationOnceTheSyncThatReplacedItIsDone() throws Exception {
        WebhookReceiver before = receiver(request -> 204);
        WebhookReceiver after = receiver(request -> 204);
        java.util.concurrent.CountDownLatch inTurn = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch goOn = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.atomic.AtomicBoolean applied = new java.util.concurrent.atomic.AtomicBoolean();
        List<String> toOld = new CopyOnWriteArrayList<>();
        List<String> toOldAfterApplied = new CopyOnWriteArrayList<>();
        List<String> toNew = new CopyOnWriteArrayList<>();
        Dispatcher dispatcher = dispatcher(s -> {
            boolean old = ((Destination.Webhook) s.destination()).url().toString().startsWith(before.url("/"));
            return request -> {
                if (old) {
                    if (applied.get()) {
                        toOldAfterApplied.add(request.id());
                    }
                    toOld.add(request.id());
                    if (inTurn.getCount() > 0) {
                        inTurn.countDown();
                        hold(goOn, 10); // the turn starting its requests, held at its first
                    }
                } else {
                    toNew.add(request.id());
                }
                return java.util.concurrent.CompletableFuture.completedFuture(Transport.Attempt.DELIVERED);
            };
        });
        Subscription first = webhook("config:one", "one", before, 1);
        dispatcher.sync(List.of(first));
        send(dispatcher, first, 20, 1);
        assertThat(inTurn.await(30, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
        java.util.concurrent.CompletableFuture<Void> synced = dispatcher.sync(List.of(webhook("config:one", "one", after, 1)));
        synced.thenRun(() -> applied.set(true));
        assertThat(synced).as("done while the lane's turn still starts requests with the old destination").isNotDone();
        goOn.countDown();
        synced.get(10, java.util.concurrent.TimeUnit.SECONDS);
        await().atMost(WAIT).until(() -> acknowledged.get() == 20);
        assertThat(toOldAfterApplied).as("requests started to the old destination after the sync was done").isEmpty();
        assertThat(toNew).as("the new destination has the rest").hasSize(20 - toOld.size()).isNotEmpty();
    }

    /**
     * A sync when no turn can come (walhook stopping, or another instance took the slot: the lanes'
     * executor refuses work, and routing may still have made a lane) completes at once: an API
     * write waited its whole bound for a turn that never came.
     */
    @Test
    void aSyncOfLanesWhoseTurnsCannotComeIsDoneAtOnce() throws Exception {
        WebhookReceiver before = receiver(request -> 204);
        WebhookReceiver after = receiver(request -> 204);
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        dispatcher.close();
        Subscription late = webhook("config:late", "late", before, 1);
        send(dispatcher, late, 1, 1); // routing, still at it, makes its lane
        dispatcher.sync(List.of(webhook("config:late", "late", after, 1)))
                .get(2, java.util.concurrent.TimeUnit.SECONDS);
    }

    @Test
    void aRequestWhoseTransportThrowsIsRetriedAndGivesBackItsPlaceAtTheDestination() throws Exception {
        // one request under way to the receiver at a time: a place kept by the failed start would stop it for good
        try (WebhookClient gated = new WebhookClient(vertx, null, 1)) {
            List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
            WebhookReceiver receiver = receiver(request -> {
                accepted.add(request);
                return 204;
            });
            AtomicInteger throwsLeft = new AtomicInteger(2);
            Dispatcher dispatcher = dispatcher(s -> {
                Transport real = new WebhookTransport(gated, (Destination.Webhook) s.destination(), Clock.systemUTC(),
                        Duration.ofSeconds(2), false);
                return new Transport() {
                    @Override
                    public DestinationGate gate() {
                        return real.gate();
                    }

                    @Override
                    public java.util.concurrent.CompletableFuture<Attempt> send(Request request) {
                        if (throwsLeft.getAndDecrement() > 0) {
                            throw new IllegalArgumentException("a header value the client refuses");
                        }
                        return real.send(request);
                    }
                };
            });
            send(dispatcher, webhook("config:one", "one", receiver, 1), 5, 2);
            await().atMost(WAIT).until(() -> acknowledged.get() == 10);
            assertThat(acceptedByRow(accepted)).hasSize(5).allSatisfy((row, seen) -> assertThat(seen).containsExactly(0, 1));
            assertThat(gated.gate(URI.create(receiver.url("/one"))).inUse()).isZero();
        }
    }

    @Test
    void aLaneHeldBackByItsReceiverNotItsRateKeepsBackPressureAndStaysDirect() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10), 20);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            try {
                Thread.sleep(50); // 20 requests a second at most: slower than the rate limit
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            accepted.add(request);
            return 204;
        });
        Subscription slow = webhook("config:slow", "slow", receiver, 1).withLimits(new DeliveryLimits(
                java.util.Optional.of(1), java.util.Optional.of(new DeliveryLimits.Rate(40, DeliveryLimits.Period.SECOND))));
        java.util.concurrent.CompletableFuture.runAsync(() -> {
            try {
                send(dispatcher, slow, 60, 1);
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        List<String> aheadOfDelivery = new CopyOnWriteArrayList<>();
        await().atMost(WAIT).until(() -> {
            int acked = acknowledged.get();
            int delivered = accepted.size();
            if (acked > delivered) {
                // acknowledged before delivered: written to the durable queue, not back-pressure
                aheadOfDelivery.add(acked + " acknowledged, " + delivered + " delivered");
            }
            return delivered == 60;
        });
        assertThat(aheadOfDelivery).isEmpty();
        assertThat(dispatcher.status().get(0).mode()).isEqualTo("direct");
    }

    @Test
    void aRateRaisedThroughTheApiAppliesAtOnce() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        WebhookReceiver receiver = receiver(request -> 204);
        Subscription slow = webhook("config:raised", "raised", receiver, 1).withLimits(new DeliveryLimits(
                java.util.Optional.empty(), java.util.Optional.of(new DeliveryLimits.Rate(1, DeliveryLimits.Period.MINUTE))));
        send(dispatcher, slow, 3, 1);
        await().atMost(WAIT).until(() -> receiver.requests("/raised").size() == 1);
        // one a minute: the second waits; raised to 100 a second, it and the third go now
        dispatcher.sync(List.of(slow.withLimits(new DeliveryLimits(java.util.Optional.empty(),
                java.util.Optional.of(new DeliveryLimits.Rate(100, DeliveryLimits.Period.SECOND))))));
        await().atMost(Duration.ofSeconds(10)).until(() -> acknowledged.get() == 3);
    }

    @Test
    void aSlowSubscriptionWaitsInItsDurableQueueRatherThanHoldTheOthersToItsPace() throws Exception {
        assertSlowSubscriptionDoesNotHoldTheFastOneToItsPace(dispatcher(Duration.ofMinutes(10), 50, Duration.ofSeconds(1)));
    }

    @Test
    void aSlowSubscriptionHoldingDeliverysMemoryWaitsInItsDurableQueueRatherThanHoldTheOthersToItsPace() throws Exception {
        // each may hold 4,000 events, all together a few dozen: the memory of all is what fills, not the slow one's own
        assertSlowSubscriptionDoesNotHoldTheFastOneToItsPace(dispatcher(Duration.ofMinutes(10), 4000, Duration.ofSeconds(1),
                32 << 10));
    }

    /**
     * Every change goes to a slow and a fast subscription: the fast one gets all 400 while the slow one,
     * 40 a second at most, goes to its durable queue and still gets every change, each row in order.
     */
    private void assertSlowSubscriptionDoesNotHoldTheFastOneToItsPace(Dispatcher dispatcher) throws Exception {
        List<WebhookReceiver.Request> slowAccepted = new CopyOnWriteArrayList<>();
        List<WebhookReceiver.Request> fastAccepted = new CopyOnWriteArrayList<>();
        AtomicInteger slowWhenFastHadAll = new AtomicInteger(-1);
        WebhookReceiver receiver = receiver(request -> {
            if (request.path().equals("/slow")) {
                try {
                    Thread.sleep(100); // answers, slowly: 4 at a time, 40 a second at most
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                }
                slowAccepted.add(request);
            } else if (fastAccepted.add(request) && fastAccepted.size() >= 400) {
                slowWhenFastHadAll.compareAndSet(-1, slowAccepted.size()); // counted here, not at the test's next look
            }
            return 204;
        });
        Subscription slow = webhook("config:slow", "slow", receiver, 1);
        Subscription fast = webhook("config:fast", "fast", receiver, 1);
        // every change goes to both; routing hands each transaction to both lanes in turn
        java.util.concurrent.CompletableFuture.runAsync(() -> {
            try {
                for (int v = 0; v < 8; v++) {
                    for (int row = 1; row <= 50; row++) {
                        int version = versions.merge(row, 1, Integer::sum) - 1;
                        ChangeEvent event = ITEMS.insertAt(nextLsn += 0x100, Integer.toString(row), Integer.toString(version));
                        for (Subscription s : List.of(slow, fast)) {
                            dispatcher.send(s, event, encoder.encode(event, EventFormat.JSON, Projection.ALL),
                                    acknowledged::incrementAndGet);
                        }
                        dispatcher.flush();
                    }
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        // the fast one gets all 400 while the slow one, held to 40 a second, is far from done
        await().atMost(WAIT).until(() -> fastAccepted.size() == 400 && slowWhenFastHadAll.get() >= 0);
        assertThat(slowWhenFastHadAll.get()).as("delivered to the slow one when the fast one had all").isLessThan(300);
        assertThat(dispatcher.status()).filteredOn(s -> s.name().equals("slow")).singleElement()
                .satisfies(s -> assertThat(s.mode()).isEqualTo("durable"));
        // and the slow one still gets every change, each row in order
        await().atMost(WAIT).until(() -> acceptedByRow(slowAccepted).values().stream().mapToInt(List::size).sum() == 400);
        assertThat(acceptedByRow(slowAccepted)).hasSize(50).allSatisfy((row, versions) -> assertThat(versions)
                .as("row %d in commit order", row).containsExactly(0, 1, 2, 3, 4, 5, 6, 7));
        await().atMost(WAIT).until(() -> acknowledged.get() == 800);
    }

    /**
     * A receiver that takes requests and never answers holds routing back once its subscription's
     * memory is full. Before, nothing released it for as long as ten of its requests took to time
     * out (minutes, at a long request timeout): the hold was counted only while the other
     * subscription had been handed events within the hold limit, and routing held back hands
     * nothing, so a hold that began at once never counted.
     */
    @Test
    void aReceiverThatNeverAnswersDoesNotHoldTheOthersBackLongerThanTheHoldLimit() throws Exception {
        assertReceiverThatNeverAnswersHoldsTheOthersBackBriefly(false);
    }

    /**
     * The same while new lanes still ask whether their durable queues hold rows (the queue's table
     * locked a moment): the lane goes direct while routing already waits for it, and the hold is
     * counted afresh from then. Before, the rest of that hold was not counted at all.
     */
    @Test
    void aReceiverThatNeverAnswersDoesNotHoldTheOthersBackThoughItsLaneWentDirectDuringTheHold() throws Exception {
        assertReceiverThatNeverAnswersHoldsTheOthersBackBriefly(true);
    }

    /**
     * A receiver that hangs, answers for a while, then hangs again: each time its lane went direct
     * again, routing waited the whole hold limit (5 s, 30 s where the others were quiet) before it
     * went back to its durable queue, at every turn. A lane that held routing back so lately has a
     * tenth of the hold limit: here 12 s the first time, 1.2 s the next, far within the 9 s the
     * other subscription is given to get its events.
     */
    @Test
    void aReceiverThatHangsAgainAfterItsQueueDrainedHoldsTheOthersBackForATenthOfTheHoldLimit() throws Exception {
        Dispatcher dispatcher = patientDispatcher(Duration.ofSeconds(12));
        java.util.concurrent.atomic.AtomicReference<java.util.concurrent.CountDownLatch> hanging =
                new java.util.concurrent.atomic.AtomicReference<>(new java.util.concurrent.CountDownLatch(1));
        List<WebhookReceiver.Request> flakyAccepted = new CopyOnWriteArrayList<>();
        WebhookReceiver flakyReceiver = receiver(request -> {
            java.util.concurrent.CountDownLatch latch = hanging.get();
            if (latch != null) {
                hold(latch, 60); // takes the request and says nothing while it hangs
            }
            flakyAccepted.add(request);
            return 204;
        });
        List<WebhookReceiver.Request> fastAccepted = new CopyOnWriteArrayList<>();
        WebhookReceiver fast = accepting(fastAccepted);
        Subscription flaky = webhook("config:flaky", "flaky", flakyReceiver, 1);
        Subscription flowing = webhook("config:flowing", "flowing", fast, 1);
        try {
            routeInTheBackground(dispatcher, List.of(flaky, flowing), 0);
            await().atMost(Duration.ofSeconds(60)).until(() -> fastAccepted.size() == 200);
            assertThat(mode(dispatcher, "flaky")).isEqualTo("durable");
            hanging.getAndSet(null).countDown(); // it answers: its queue drains and it goes direct again
            await().atMost(WAIT).until(() -> acceptedByRow(flakyAccepted).values().stream().mapToInt(List::size).sum() == 200
                    && mode(dispatcher, "flaky").equals("direct"));

            hanging.set(new java.util.concurrent.CountDownLatch(1)); // and hangs again
            routeInTheBackground(dispatcher, List.of(flaky, flowing), 1);
            await().atMost(Duration.ofSeconds(9)).until(() -> fastAccepted.size() == 400); // the whole limit is 12 s
            assertThat(mode(dispatcher, "flaky")).isEqualTo("durable");
        } finally {
            java.util.concurrent.CountDownLatch latch = hanging.getAndSet(null);
            if (latch != null) {
                latch.countDown();
            }
        }
        await().atMost(WAIT).until(() -> acceptedByRow(flakyAccepted).values().stream().mapToInt(List::size).sum() == 400);
        assertThat(acceptedByRow(flakyAccepted)).hasSize(200).allSatisfy((row, versions) -> assertThat(versions)
                .as("row %d in commit order", row).containsExactly(0, 1));
        await().atMost(WAIT).until(() -> acknowledged.get() == 800);
    }

    /** Routes version {@code version} of rows 1 to 200 to each of {@code subscriptions}, on another thread. */
    private void routeInTheBackground(Dispatcher dispatcher, List<Subscription> subscriptions, int version) {
        java.util.concurrent.CompletableFuture.runAsync(() -> {
            try {
                for (int row = 1; row <= 200; row++) {
                    ChangeEvent event = ITEMS.insertAt(nextLsn += 0x100, Integer.toString(row), Integer.toString(version));
                    for (Subscription s : subscriptions) {
                        dispatcher.send(s, event, encoder.encode(event, EventFormat.JSON, Projection.ALL),
                                acknowledged::incrementAndGet);
                    }
                    dispatcher.flush();
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
    }

    /**
     * A dispatcher of 50 events per lane and {@code holdLimit}, whose requests wait 2 minutes for
     * an answer: a receiver that hangs holds its requests far longer than the test looks.
     */
    private Dispatcher patientDispatcher(Duration holdLimit) throws Exception {
        database = new SourceFixture(TestPostgres.shared(), "dispatch");
        store = new ParkedEventStore(database.dataSource, "walhook");
        Dispatcher dispatcher = new Dispatcher(Clock.systemUTC(), new Dispatcher.Settings(Duration.ofSeconds(2),
                Duration.ofMillis(300), Duration.ofMinutes(10), Duration.ofSeconds(1), 4, 50, 64L << 20, holdLimit,
                Dispatcher.Settings.MEMORY_BYTES), store, DeliveryMetrics.NONE, paused::contains,
                s -> new WebhookTransport(client, (Destination.Webhook) s.destination(), Clock.systemUTC(),
                        Duration.ofMinutes(2), false));
        dispatchers.add(dispatcher);
        return dispatcher;
    }

    /** A receiver answering 204 to every request, which it adds to {@code accepted}. */
    private WebhookReceiver accepting(List<WebhookReceiver.Request> accepted) {
        return receiver(request -> {
            accepted.add(request);
            return 204;
        });
    }

    private static String mode(Dispatcher dispatcher, String name) {
        return dispatcher.status().stream().filter(s -> s.name().equals(name)).findFirst().orElseThrow().mode();
    }

    private void assertReceiverThatNeverAnswersHoldsTheOthersBackBriefly(boolean probedLate) throws Exception {
        Dispatcher dispatcher = patientDispatcher(Duration.ofSeconds(1));
        java.util.concurrent.CountDownLatch answer = new java.util.concurrent.CountDownLatch(1);
        List<WebhookReceiver.Request> hungAccepted = new CopyOnWriteArrayList<>();
        WebhookReceiver hung = receiver(request -> {
            try {
                answer.await(); // takes the request and says nothing, until the test ends
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            hungAccepted.add(request);
            return 204;
        });
        List<WebhookReceiver.Request> fastAccepted = new CopyOnWriteArrayList<>();
        WebhookReceiver fast = accepting(fastAccepted);
        try {
            Subscription stuck = webhook("config:stuck", "stuck", hung, 1);
            Subscription flowing = webhook("config:flowing", "flowing", fast, 1);
            java.sql.Connection locker = database.dataSource.getConnection();
            if (probedLate) {
                locker.setAutoCommit(false);
                try (java.sql.Statement lock = locker.createStatement()) {
                    lock.execute("LOCK TABLE walhook.parked_event IN ACCESS EXCLUSIVE MODE");
                }
            }
            java.util.concurrent.CompletableFuture.runAsync(() -> {
                try {
                    for (int row = 1; row <= 400; row++) {
                        ChangeEvent event = ITEMS.insertAt(nextLsn += 0x100, Integer.toString(row), "0");
                        for (Subscription s : List.of(stuck, flowing)) {
                            dispatcher.send(s, event, encoder.encode(event, EventFormat.JSON, Projection.ALL),
                                    acknowledged::incrementAndGet);
                        }
                        dispatcher.flush();
                    }
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            if (probedLate) {
                // routing waits for the stuck one's room while its lane still waits for the answer
                await().atMost(WAIT).until(() -> dispatcher.status().stream()
                        .anyMatch(s -> s.name().equals("stuck") && s.queued() >= 50));
                locker.rollback();
            }
            locker.close();
            // far sooner than the two minutes the stuck one's first requests take to time out
            await().atMost(Duration.ofSeconds(30)).until(() -> fastAccepted.size() == 400);
            assertThat(dispatcher.status()).filteredOn(s -> s.name().equals("stuck")).singleElement()
                    .satisfies(s -> assertThat(s.mode()).isEqualTo("durable"));
            assertThat(hungAccepted).isEmpty();
        } finally {
            answer.countDown();
        }
        // once it answers, it gets every change from its durable queue
        await().atMost(WAIT).until(() -> acceptedByRow(hungAccepted).size() == 400);
        await().atMost(WAIT).until(() -> acknowledged.get() == 800);
    }

    /**
     * A subscription whose receiver takes requests and does not answer was handed events while the
     * others had none (a burst on its table): it holds all of delivery's memory but one event's
     * worth. Then the stream carries only another subscription's changes. Routing handed it nothing
     * more, so it never waited for its room and never went to its durable queue: the other one
     * went one request at a time in the memory it left, for as long as its requests took to time
     * out. Routing waiting for delivery's memory now counts as waiting for whoever holds the most
     * of it, which goes to its durable queue after the hold limit while the other starves.
     */
    @Test
    void aSubscriptionHoldingDeliverysMemoryDoesNotThrottleTheOthersWhenTheStreamHasNothingForIt() throws Exception {
        long limit = 32 << 10; // a few dozen of these events; each subscription may hold 4,000
        database = new SourceFixture(TestPostgres.shared(), "dispatch");
        store = new ParkedEventStore(database.dataSource, "walhook");
        Dispatcher dispatcher = new Dispatcher(Clock.systemUTC(), new Dispatcher.Settings(Duration.ofSeconds(2),
                Duration.ofMillis(300), Duration.ofMinutes(10), Duration.ofSeconds(1), 4, 4000, 64L << 20,
                Duration.ofSeconds(1), limit), store, DeliveryMetrics.NONE, paused::contains,
                s -> new WebhookTransport(client, (Destination.Webhook) s.destination(), Clock.systemUTC(),
                        Duration.ofMinutes(2), false));
        dispatchers.add(dispatcher);
        java.util.concurrent.Semaphore answers = new java.util.concurrent.Semaphore(0);
        List<WebhookReceiver.Request> stuckAccepted = new CopyOnWriteArrayList<>();
        WebhookReceiver stuckReceiver = receiver(request -> {
            try {
                answers.acquire(); // answers only when the test says so
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            stuckAccepted.add(request);
            return 204;
        });
        AtomicInteger underWay = new AtomicInteger();
        AtomicInteger mostUnderWay = new AtomicInteger();
        List<WebhookReceiver.Request> flowingAccepted = new CopyOnWriteArrayList<>();
        WebhookReceiver flowingReceiver = receiver(request -> {
            mostUnderWay.accumulateAndGet(underWay.incrementAndGet(), Math::max);
            try {
                Thread.sleep(100); // a receiver far away
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            underWay.decrementAndGet();
            flowingAccepted.add(request);
            return 204;
        });
        Subscription stuck = webhook("config:stuck", "stuck", stuckReceiver, 1);
        Subscription flowing = webhook("config:flowing", "flowing", flowingReceiver, 1);
        AtomicInteger stuckRouted = new AtomicInteger();
        java.util.concurrent.atomic.AtomicBoolean burstOver = new java.util.concurrent.atomic.AtomicBoolean();
        try {
            java.util.concurrent.CompletableFuture.runAsync(() -> {
                try {
                    // the burst: until delivery's memory is spent, the last flush waiting for the stuck one's room
                    while (!burstOver.get()) {
                        ChangeEvent event = ITEMS.insertAt(nextLsn += 0x100, Integer.toString(stuckRouted.incrementAndGet()), "0");
                        dispatcher.send(stuck, event, encoder.encode(event, EventFormat.JSON, Projection.ALL),
                                acknowledged::incrementAndGet);
                        dispatcher.flush();
                    }
                    for (int row = 1; row <= 60; row++) {
                        ChangeEvent event = ITEMS.insertAt(nextLsn += 0x100, Integer.toString(row), "0");
                        dispatcher.send(flowing, event, encoder.encode(event, EventFormat.JSON, Projection.ALL),
                                acknowledged::incrementAndGet);
                        dispatcher.flush();
                    }
                } catch (Exception e) {
                    throw new IllegalStateException(e);
                }
            });
            await().atMost(WAIT).until(() -> dispatcher.memoryInUse() >= limit && stuckReceiver.requests().size() == 4);
            burstOver.set(true);
            answers.release(); // one answer: the burst's last flush returns, one event's worth of memory free
            // the other one gets its changes four requests at a time, as if the stuck one were not there
            await().atMost(WAIT).until(() -> flowingAccepted.size() == 60);
            assertThat(mostUnderWay.get()).as("requests under way at once to the other one").isEqualTo(4);
            assertThat(dispatcher.status()).filteredOn(s -> s.name().equals("stuck")).singleElement()
                    .satisfies(s -> assertThat(s.mode()).isEqualTo("durable"));
            assertThat(stuckAccepted).hasSize(1);
        } finally {
            answers.release(10_000);
        }
        // once it answers, it gets every change from its durable queue
        await().atMost(WAIT).until(() -> acceptedByRow(stuckAccepted).size() == stuckRouted.get());
        await().atMost(WAIT).until(() -> acknowledged.get() == stuckRouted.get() + 60);
    }

    @Test
    void subscriptionsAsSlowAsEachOtherKeepBackPressureBesideAPausedOne() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10), 50, Duration.ofSeconds(1));
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            try {
                Thread.sleep(50); // both the same receiver, slower than the stream
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            accepted.add(request);
            return 204;
        });
        Subscription a = webhook("config:a", "a", receiver, 1);
        Subscription b = webhook("config:b", "b", receiver, 1);
        Subscription asleep = webhook("config:asleep", "asleep", receiver, 1);
        paused.add(asleep.id()); // its lane is in durable mode, with room: it does not starve
        AtomicInteger ackedAb = new AtomicInteger();
        java.util.concurrent.CompletableFuture.runAsync(() -> {
            try {
                for (int v = 0; v < 6; v++) {
                    for (int row = 1; row <= 50; row++) {
                        int version = versions.merge(row, 1, Integer::sum) - 1;
                        ChangeEvent event = ITEMS.insertAt(nextLsn += 0x100, Integer.toString(row), Integer.toString(version));
                        for (Subscription s : List.of(a, b, asleep)) {
                            dispatcher.send(s, event, encoder.encode(event, EventFormat.JSON, Projection.ALL),
                                    s == asleep ? acknowledged::incrementAndGet : ackedAb::incrementAndGet);
                        }
                        dispatcher.flush();
                    }
                }
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        List<String> aheadOfDelivery = new CopyOnWriteArrayList<>();
        await().atMost(WAIT).until(() -> {
            // the paused one's events are acknowledged as they are queued; a's and b's only once delivered
            int acked = ackedAb.get();
            int delivered = accepted.size();
            if (acked > delivered) {
                aheadOfDelivery.add(acked + " acknowledged, " + delivered + " delivered");
            }
            return delivered == 600;
        });
        assertThat(aheadOfDelivery).as("a and b acknowledged before delivery: one went to its durable queue").isEmpty();
        assertThat(dispatcher.status()).filteredOn(s -> !s.name().equals("asleep"))
                .allSatisfy(s -> assertThat(s.mode()).isEqualTo("direct"));
    }

    /**
     * A long run of changes only a slow subscription wants (a large transaction on its table, its
     * receiver slower than the stream), and after it a change for another subscription, idle until
     * then (no lane yet): routing waited for the slow one's room at its receiver's pace, and the
     * other's change waited in the WAL behind the run, 37 s here (hours for a large enough run),
     * since only a subscription handed events lately counted as held back. Past six hold limits,
     * an idle one counts too: the slow one's rest goes to its durable queue, and the other's change
     * goes at once.
     */
    @Test
    void aSlowSubscriptionsLongRunDoesNotHoldBackAnIdleSubscriptionsChangeAfterIt() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10), 50, Duration.ofSeconds(1));
        List<WebhookReceiver.Request> slowAccepted = new CopyOnWriteArrayList<>();
        List<WebhookReceiver.Request> quietAccepted = new CopyOnWriteArrayList<>();
        WebhookReceiver slowReceiver = receiver(request -> {
            try {
                if (quietAccepted.isEmpty()) {
                    Thread.sleep(100); // 40 requests a second (4 at once), slower than the stream
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            slowAccepted.add(request);
            return 204;
        });
        AtomicInteger slowWhenQuietArrived = new AtomicInteger(-1);
        WebhookReceiver quietReceiver = receiver(request -> {
            // counted here: once the quiet one has its change the slow receiver stops sleeping and catches up
            slowWhenQuietArrived.compareAndSet(-1, slowAccepted.size());
            quietAccepted.add(request);
            return 204;
        });
        Subscription slow = webhook("config:slow", "slow", slowReceiver, 1);
        Subscription quiet = webhook("config:quiet", "quiet", quietReceiver, 1);
        dispatcher.sync(List.of(slow, quiet));
        java.util.concurrent.CompletableFuture<Void> routing = java.util.concurrent.CompletableFuture.runAsync(() -> {
            try {
                sendToAll(dispatcher, List.of(slow), 1_500, 1, () -> { });
                ChangeEvent event = ITEMS.insertAt(nextLsn += 0x100, "1", "0");
                dispatcher.send(quiet, event, encoder.encode(event, EventFormat.JSON, Projection.ALL),
                        acknowledged::incrementAndGet);
                dispatcher.flush();
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        // six hold limits and the rest of the run written to the durable queue: far sooner than the 37 s the run
        // takes at the slow receiver's pace
        await().atMost(Duration.ofSeconds(20)).until(() -> quietAccepted.size() == 1);
        assertThat(slowWhenQuietArrived.get()).as("the slow one's changes delivered by then").isLessThan(1_000);
        routing.get(30, java.util.concurrent.TimeUnit.SECONDS);
        // and the slow one gets every change, from its durable queue (at full speed from now on)
        await().atMost(WAIT).until(() -> acceptedByRow(slowAccepted).size() == 1_500);
        await().atMost(WAIT).until(() -> acknowledged.get() == 1_501);
    }

    /** Routes {@code rows} rows' versions to every one of {@code subscriptions}, a flush every 100 copies; after each flush, {@code afterFlush}. */
    private void sendToAll(Dispatcher dispatcher, List<Subscription> subscriptions, int rows, int versions,
            Runnable afterFlush) throws Exception {
        int copies = 0;
        for (int v = 0; v < versions; v++) {
            for (int row = 1; row <= rows; row++) {
                int version = this.versions.merge(row, 1, Integer::sum) - 1;
                ChangeEvent event = ITEMS.insertAt(nextLsn += 0x100, Integer.toString(row), Integer.toString(version));
                for (Subscription s : subscriptions) {
                    dispatcher.send(s, event, encoder.encode(event, EventFormat.JSON, Projection.ALL),
                            acknowledged::incrementAndGet);
                    if (++copies % 100 == 0) {
                        dispatcher.flush();
                        afterFlush.run();
                    }
                }
            }
        }
        dispatcher.flush();
        afterFlush.run();
    }

    /** Each tenant got each of its {@code rows} rows' two versions, in commit order. */
    private static void assertEachInCommitOrder(List<WebhookReceiver.Request> accepted, List<Subscription> tenants, int rows)
            throws Exception {
        for (Subscription tenant : tenants) {
            List<WebhookReceiver.Request> its = accepted.stream().filter(r -> r.path().equals("/" + tenant.name())).toList();
            assertThat(acceptedByRow(its)).as(tenant.name()).hasSize(rows).allSatisfy((row, versions) -> assertThat(versions)
                    .as("%s row %d in commit order", tenant.name(), row).containsExactly(0, 1));
        }
    }

    /** The changes {@code tenant} accepted, each once. */
    private static int acceptedOf(List<WebhookReceiver.Request> accepted, Subscription tenant) {
        List<WebhookReceiver.Request> its = accepted.stream().filter(r -> r.path().equals("/" + tenant.name())).toList();
        try {
            return acceptedByRow(its).values().stream().mapToInt(List::size).sum();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private static List<Subscription> tenants(WebhookReceiver receiver, int count) {
        List<Subscription> all = new ArrayList<>();
        for (int i = 1; i <= count; i++) {
            all.add(webhook("config:tenant" + i, "tenant" + i, receiver, 1));
        }
        return all;
    }

    @Test
    void allSubscriptionsTogetherHoldAtMostDeliverysMemoryThoughEachIsFarUnderItsOwnBudget() throws Exception {
        long limit = 32 << 10; // a few dozen of these events; each subscription may hold 4,000
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10), 4000, Dispatcher.Settings.HOLD_LIMIT, limit);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            try {
                Thread.sleep(20); // slower than routing: without a bound in all, the whole backlog waits in memory
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            accepted.add(request);
            return 204;
        });
        List<Subscription> tenants = tenants(receiver, 20);
        List<Long> heldAfterFlush = new CopyOnWriteArrayList<>();
        sendToAll(dispatcher, tenants, 15, 2, () -> heldAfterFlush.add(dispatcher.memoryInUse()));
        // routing went on only once the lanes together held less than the limit
        assertThat(heldAfterFlush).hasSize(7).allSatisfy(held -> assertThat(held).isLessThan(limit));
        await().atMost(WAIT).until(() -> acknowledged.get() == 600);
        await().atMost(WAIT).until(() -> dispatcher.memoryInUse() == 0); // released just after the acknowledgements
        assertThat(dispatcher.status()).allSatisfy(s -> assertThat(s.mode()).isEqualTo("direct"));
        assertEachInCommitOrder(accepted, tenants, 15);
    }

    @Test
    void failingDestinationsHoldingDeliverysMemoryTogetherQueueDurablyAndRoutingGoesOn() throws Exception {
        long limit = 32 << 10;
        // a retry window of 10 minutes and room for 4,000 each: only the memory of all together is full
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10), 4000, Dispatcher.Settings.HOLD_LIMIT, limit);
        java.util.concurrent.atomic.AtomicBoolean down = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = failingWhile(down, 500, accepted);
        List<Subscription> tenants = tenants(receiver, 10);
        java.util.concurrent.CompletableFuture<Void> routed = java.util.concurrent.CompletableFuture.runAsync(() -> {
            try {
                sendToAll(dispatcher, tenants, 20, 2, () -> { });
            } catch (Exception e) {
                throw new IllegalStateException(e);
            }
        });
        // every destination fails, yet routing gets through: the lanes' events went to their durable queues
        await().atMost(WAIT).until(() -> routed.isDone() && acknowledged.get() == 400);
        assertThat(routed).isCompleted();
        assertThat(accepted).isEmpty();
        assertThat(dispatcher.status()).hasSize(10).allSatisfy(s -> assertThat(s.mode()).isEqualTo("durable"));
        down.set(false);
        await().atMost(WAIT).until(() -> tenants.stream().mapToInt(tenant -> acceptedOf(accepted, tenant)).sum() == 400);
        assertEachInCommitOrder(accepted, tenants, 20);
    }

    @Test
    void eventsReadBackFromDurableQueuesWhileTheirDestinationsFailStayWithinDeliverysMemory() throws Exception {
        long limit = 32 << 10; // a few dozen of these events
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10), 4000, Dispatcher.Settings.HOLD_LIMIT, limit);
        java.util.concurrent.atomic.AtomicBoolean down = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = failingWhile(down, 500, accepted);
        List<Subscription> tenants = tenants(receiver, 30);
        sendToAll(dispatcher, tenants, 20, 2, () -> { });
        // slow by design: 8 KB of read-back memory makes each lane read its queue a row or two at a time
        Duration slow = Duration.ofMinutes(3);
        await().atMost(slow).until(() -> acknowledged.get() == 1200);
        // 1,200 events in the durable queues of 30 failing destinations: what is in memory to retry stays bounded, by
        // the requests under way when each went durable (4 each) and the read-back memory (8 KB) with a row for each
        // lane (a page of a thousand rows per lane took them all back into memory, whatever the budget: 1,200 here)
        await().during(Duration.ofSeconds(3)).atMost(WAIT).untilAsserted(() -> assertThat(dispatcher.status().stream()
                .mapToLong(Dispatcher.DeliveryStatus::queued).sum()).as("events in memory").isLessThanOrEqualTo(200));
        down.set(false);
        await().atMost(slow).until(() -> tenants.stream().mapToInt(tenant -> acceptedOf(accepted, tenant)).sum() == 1200);
        assertEachInCommitOrder(accepted, tenants, 20);
        assertThat(dispatcher.memoryInUse()).isZero();
        await().atMost(WAIT).until(() -> dispatcher.readBackInUse() == 0);
    }

    @Test
    void aSlowTenantOfASharedHostDoesNotTakeEveryPlaceThere() throws Exception {
        // four requests under way to the host at most; the slow tenant may have four of its own
        try (WebhookClient gated = new WebhookClient(vertx, null, 4)) {
            Dispatcher dispatcher = dispatcher(gated);
            List<WebhookReceiver.Request> slowAccepted = new CopyOnWriteArrayList<>();
            List<WebhookReceiver.Request> fastAccepted = new CopyOnWriteArrayList<>();
            AtomicInteger slowStarted = new AtomicInteger();
            WebhookReceiver receiver = receiver(request -> {
                if (request.path().equals("/slow")) {
                    slowStarted.incrementAndGet();
                    try {
                        Thread.sleep(1_500); // answers, slowly (the request timeout is 2 s)
                    } catch (InterruptedException e) {
                        Thread.currentThread().interrupt();
                    }
                    slowAccepted.add(request);
                } else {
                    fastAccepted.add(request);
                }
                return 204;
            });
            send(dispatcher, webhook("config:slow", "slow", receiver, 1), 40, 1);
            await().atMost(WAIT).until(() -> slowStarted.get() == 4); // it asked first: all four places
            sendToAll(dispatcher, tenants(receiver, 10), 20, 1, () -> { });
            // each place the slow one's requests give back goes to a tenant holding none: the ten fast ones get
            // three of the four places while the slow one holds one (taking places in turn, it held them all)
            await().atMost(WAIT).until(() -> fastAccepted.size() == 200);
            assertThat(slowAccepted.size()).as("delivered to the slow tenant when the others had all").isLessThanOrEqualTo(8);
        }
    }

    /** Inserts of rows 1 to {@code rows} of a table {@code docs}, each with a text of {@code chars} characters, sent to {@code to}. */
    private void sendLarge(Dispatcher dispatcher, Subscription to, int rows, int chars) throws Exception {
        TestEvents.Table docs = TestEvents.table("public", "docs").key("id", TestEvents.INT4).column("body", TestEvents.TEXT);
        String text = "x".repeat(chars);
        for (int row = 1; row <= rows; row++) {
            ChangeEvent event = docs.insertAt(nextLsn += 0x100, Integer.toString(row), text);
            dispatcher.send(to, event, encoder.encode(event, EventFormat.JSON, Projection.ALL), acknowledged::incrementAndGet);
            dispatcher.flush();
        }
    }

    @Test
    void largeEventsReadBackFromADurableQueueStayWithinReadBackMemoryInBytes() throws Exception {
        long limit = 1 << 20; // events read back from durable queues: 256 KB
        Dispatcher dispatcher = dispatcher(Duration.ofMillis(300), 4000, Dispatcher.Settings.HOLD_LIMIT, limit);
        java.util.concurrent.atomic.AtomicBoolean down = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = failingWhile(down, 500, accepted);
        Subscription big = webhook("config:big", "big", receiver, 1);
        sendLarge(dispatcher, big, 30, 100_000);
        await().atMost(WAIT).until(() -> acknowledged.get() == 30);
        // 3 MB in its durable queue: what is in memory to retry it is bounded in bytes (at 2 KB a row, 128 of
        // these events would fit in 256 KB), by what was in memory when it went durable (delivery's memory, 1 MiB)
        // and the read-back memory with one row
        await().during(Duration.ofSeconds(3)).atMost(WAIT).untilAsserted(() -> assertThat(dispatcher.memoryInUse()
                + dispatcher.readBackInUse()).as("bytes in memory").isLessThanOrEqualTo(limit + (256 << 10) + 110_000));
        down.set(false);
        await().atMost(WAIT).until(() -> accepted.stream().map(r -> r.header("webhook-id")).distinct().count() == 30);
        await().atMost(WAIT).until(() -> dispatcher.readBackInUse() == 0);
    }

    /**
     * A lane holding large events in memory goes durable (here paused): what it holds is written to
     * its queue in transactions of a few MiB, so its memory, which routing waits for, frees as each
     * commits. Written as one transaction of 1,000 rows, 40 events of 500 KB were one 20 MB
     * statement, and nothing came free before it had all committed (from outside: 67 MB of 192 KB
     * rows, healthy subscriptions waiting 12 s).
     */
    @Test
    void largeEventsGoingToTheDurableQueueAreWrittenAFewMegabytesATransaction() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        WebhookReceiver receiver = receiver(request -> {
            hold(release, 60);
            return 204;
        });
        try {
            Subscription big = webhook("config:spill", "spill", receiver, 1);
            sendLarge(dispatcher, big, 40, 500_000);
            await().atMost(WAIT).until(() -> queuedOf(dispatcher, "spill") == 40);
            paused.add(big.id());
            await().atMost(WAIT).until(() -> acknowledged.get() == 40); // in its durable queue
            List<long[]> transactions = new ArrayList<>();
            try (java.sql.Connection c = database.dataSource.getConnection();
                    java.sql.ResultSet rs = c.createStatement().executeQuery("SELECT count(*), sum(octet_length(body))"
                            + " FROM walhook.parked_event WHERE subscription_id = 'config:spill' GROUP BY xmin::text")) {
                while (rs.next()) {
                    transactions.add(new long[] {rs.getLong(1), rs.getLong(2)});
                }
            }
            assertThat(transactions.stream().mapToLong(t -> t[0]).sum()).as("rows queued").isEqualTo(40);
            assertThat(transactions).as("rows and bytes of each transaction that wrote them")
                    .allSatisfy(t -> assertThat(t[1]).isLessThanOrEqualTo((4 << 20) + 510_000));
        } finally {
            release.countDown();
        }
    }

    @Test
    void aPausedSubscriptionGivesBackWhatItReadFromItsDurableQueue() throws Exception {
        long limit = 1 << 20; // events read back from durable queues: 256 KB, about 230 of these
        Dispatcher dispatcher = dispatcher(Duration.ofMillis(300), 4000, Dispatcher.Settings.HOLD_LIMIT, limit);
        java.util.concurrent.atomic.AtomicBoolean down = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            if (down.get()) {
                return 500;
            }
            try {
                Thread.sleep(100); // back, and slow: what it read back waits in memory
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            accepted.add(request);
            return 204;
        });
        Subscription slow = webhook("config:slow", "slow", receiver, 1);
        send(dispatcher, slow, 150, 2);
        await().atMost(WAIT).until(() -> acknowledged.get() == 300); // in its durable queue
        down.set(false);
        await().atMost(WAIT).until(() -> queuedOf(dispatcher, "slow") > 50); // read back, delivered four at a time
        paused.add(slow.id());
        // paused, it gives back what it read and cannot send (260 stayed), what waits to be tried again too: only
        // the requests under way (4) stay, until they end
        await().during(Duration.ofSeconds(2)).atMost(WAIT).untilAsserted(() -> assertThat(queuedOf(dispatcher, "slow"))
                .as("events in memory for the paused subscription").isLessThanOrEqualTo(4));
        paused.remove(slow.id());
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).values().stream().mapToInt(List::size).sum() == 300);
        assertThat(acceptedByRow(accepted)).hasSize(150).allSatisfy((row, versions) -> assertThat(versions)
                .as("row %d in commit order", row).containsExactly(0, 1));
        await().atMost(WAIT).until(() -> dispatcher.readBackInUse() == 0);
    }

    private static long queuedOf(Dispatcher dispatcher, String name) {
        return dispatcher.status().stream().filter(s -> s.name().equals(name)).mapToLong(Dispatcher.DeliveryStatus::queued)
                .sum();
    }

    /** A state database of its own whose connections are counted: each is one round trip. */
    private GatedDataSource countingStateDatabase(String name) throws Exception {
        database = new SourceFixture(TestPostgres.shared(), name);
        GatedDataSource counted = new GatedDataSource(database.dataSource);
        store = new ParkedEventStore(counted, "walhook");
        return counted;
    }

    /** A dispatcher of this retry window on {@link #countingStateDatabase}'s store. */
    private Dispatcher countedDispatcher(Duration retryWindow) {
        Dispatcher dispatcher = new Dispatcher(Clock.systemUTC(), new Dispatcher.Settings(Duration.ofSeconds(2),
                Duration.ofMillis(300), retryWindow, Duration.ofSeconds(5), 4), store, DeliveryMetrics.NONE,
                paused::contains, s -> new WebhookTransport(client, (Destination.Webhook) s.destination(), Clock.systemUTC(),
                        Duration.ofSeconds(2), false));
        dispatchers.add(dispatcher);
        return dispatcher;
    }

    @Test
    void newLanesAskWhetherTheirQueuesHoldRowsTogetherAndOneThatDoesDeliversThemFirst() throws Exception {
        GatedDataSource counted = countingStateDatabase("probing");
        Dispatcher dispatcher = countedDispatcher(Duration.ofMinutes(10));
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            accepted.add(request);
            return 204;
        });
        List<Subscription> tenants = new ArrayList<>();
        for (int t = 1; t <= 40; t++) {
            tenants.add(webhook("config:t" + t, "t" + t, receiver, 1));
        }
        dispatcher.resumeParked(tenants);
        // a request queued for tenant 7 after the start's look (an instance losing the slot wrote it as this
        // one took over): tenant 7's lane, made at its first event, delivers it before that event
        store.append("config:t7", "t7", List.of(new ParkedEventStore.Entry("written-late", Lsn.of(0x10),
                java.time.Instant.EPOCH, "application/json", Map.of(), null,
                "{\"late\":true}".getBytes(java.nio.charset.StandardCharsets.UTF_8), null, null)), 0, null);

        // 40 tenants' first events, as routing hands over a chunk: their lanes are made while the state
        // database answers the first look (held at the gate here, as it takes a while under a drain)
        int before = counted.connections.get();
        counted.shut();
        for (Subscription tenant : tenants) {
            ChangeEvent event = ITEMS.insertAt(nextLsn += 0x100, "1", "0");
            dispatcher.send(tenant, event, encoder.encode(event, EventFormat.JSON, Projection.ALL), acknowledged::incrementAndGet);
        }
        dispatcher.flush();
        counted.open();
        // looked at through a store of its own: each look of the wait's would count as a round trip of the lanes'
        ParkedEventStore uncounted = new ParkedEventStore(database.dataSource, "walhook");
        await().atMost(WAIT).until(() -> acknowledged.get() == 40 && accepted.size() == 41 && uncounted.count("config:t7") == 0);
        // asked one lane at a time (each reading its queue first), that was 40 round trips and more
        assertThat(counted.connections.get() - before).as("state database round trips for 40 new lanes").isLessThan(10);
        assertThat(accepted.stream().filter(r -> r.path().equals("/t7")).map(WebhookReceiver.Request::body))
                .as("the queued request first").hasSize(2).first().asString().contains("\"late\":true");
        await().atMost(WAIT).untilAsserted(() -> assertThat(dispatcher.status()).hasSize(40)
                .allSatisfy(s -> assertThat(s.mode()).isEqualTo("direct")));

        // one paused from the start keeps its events in its queue
        Subscription asleep = webhook("config:asleep", "asleep", receiver, 1);
        paused.add(asleep.id());
        send(dispatcher, asleep, 1, 1);
        await().atMost(WAIT).until(() -> acknowledged.get() == 41 && store.count(asleep.id()) == 1);
        assertThat(accepted).hasSize(41);
    }

    @Test
    void aStoredSubscriptionHeldOutOfForceKeepsItsQueueAndSendsNothingOfIt() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        java.util.concurrent.atomic.AtomicBoolean up = new java.util.concurrent.atomic.AtomicBoolean();
        WebhookReceiver receiver = receiver(request -> up.get() ? 204 : 503);
        String id = "6f1c2b6e-0000-4000-8000-0000000000bb";
        Subscription stored = webhook(id, "stored", receiver, 1);
        store.append(id, "stored", List.of(new ParkedEventStore.Entry("queued", Lsn.of(0x10), java.time.Instant.EPOCH,
                "application/json", Map.of(), null, "{}".getBytes(java.nio.charset.StandardCharsets.UTF_8), null, null)),
                0, null);
        // held at start (its body does not read here, written by a newer walhook; or a configured subscription
        // of its name shadows it): its queue is not a deleted one's
        dispatcher.resumeParked(List.of(), Set.of(id));
        assertThat(store.count(id)).isEqualTo(1);
        assertThat(dispatcher.status()).isEmpty();
        // in force: its queue is delivered without waiting for an event (its destination fails)
        dispatcher.sync(List.of(stored), Set.of(), x -> false);
        await().atMost(WAIT).until(() -> receiver.requests().size() >= 1);
        // held again: lane and queue stay, and nothing is sent with a configuration that is no longer its own,
        // though its destination takes events now
        dispatcher.sync(List.of(), Set.of(id), x -> false);
        await().atMost(WAIT).until(() -> dispatcher.status().size() == 1 && dispatcher.status().get(0).inFlight() == 0);
        int sent = receiver.requests().size();
        up.set(true);
        await().during(Duration.ofMillis(2500)).atMost(WAIT)
                .until(() -> store.count(id) == 1 && receiver.requests().size() == sent && dispatcher.status().size() == 1);
        // left out of an older refresh than routing's (it routes with a newer one, which has it): kept
        dispatcher.sync(List.of(), Set.of(), id::equals);
        assertThat(dispatcher.status()).hasSize(1);
        // in force again: delivered
        dispatcher.sync(List.of(stored), Set.of(), x -> false);
        await().atMost(WAIT).until(() -> store.count(id) == 0);
        // gone from the table: deleted, its queue with it
        store.append(id, "stored", List.of(new ParkedEventStore.Entry("queued-2", Lsn.of(0x20), java.time.Instant.EPOCH,
                "application/json", Map.of(), null, "{}".getBytes(java.nio.charset.StandardCharsets.UTF_8), null, null)),
                0, null);
        dispatcher.sync(List.of(), Set.of(id), x -> false);
        dispatcher.sync(List.of());
        await().atMost(WAIT).until(() -> store.count(id) == 0 && dispatcher.status().isEmpty());
    }

    /** {@code wide} edited through the API to take another table's changes only. */
    private static Subscription narrowedToAnotherTable(Subscription wide) {
        return new Subscription(wide.id(), wide.name(), List.of(TablePattern.parse("public.other")), wide.operations(),
                wide.filter(), wide.destination(), wide.format(), wide.batchMaxEvents(), wide.batchMaxWaitMs(),
                wide.projection(), false, wide.retry(), wide.limits());
    }

    /** A dispatcher over the same durable queue as the last one made: walhook started again after a crash. */
    private Dispatcher restartedDispatcher() {
        return dispatcherOn(store, Duration.ofMinutes(10));
    }

    /** A dispatcher of default settings but {@code retryWindow} over {@code queues}. */
    private Dispatcher dispatcherOn(ParkedEventStore queues, Duration retryWindow) {
        Dispatcher dispatcher = new Dispatcher(Clock.systemUTC(), new Dispatcher.Settings(Duration.ofSeconds(2),
                Duration.ofMillis(300), retryWindow, Duration.ofSeconds(1), 4), queues,
                DeliveryMetrics.NONE, paused::contains,
                s -> new WebhookTransport(client, (Destination.Webhook) s.destination(), Clock.systemUTC(),
                        Duration.ofSeconds(2), false));
        dispatchers.add(dispatcher);
        return dispatcher;
    }

    /** A receiver answering 204 that adds to {@code seen} the {@code n} of each change of row 1 it gets. */
    private WebhookReceiver versionsOfRowOne(List<Integer> seen) {
        return receiver(request -> {
            if (mentionsRow(request, 1)) {
                try {
                    seen.add(JSON.readTree(request.body()).at("/new/n").asInt());
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }
            return 204;
        });
    }

    /**
     * Delivers {@code older} (row 1's first version, into {@code seen}), then queues {@code newer}
     * in {@code queues}, the subscription paused, and closes {@code dispatcher}: a crash.
     */
    private void deliverThenQueue(Dispatcher dispatcher, ParkedEventStore queues, Subscription subscription,
            ChangeEvent older, ChangeEvent newer, List<Integer> seen) throws Exception {
        dispatcher.send(subscription, older, encoder.encode(older, EventFormat.JSON, Projection.ALL),
                acknowledged::incrementAndGet);
        dispatcher.flush();
        await().atMost(WAIT).until(() -> seen.equals(List.of(1)));
        paused.add(subscription.id()); // the newer change goes to the durable queue
        dispatcher.send(subscription, newer, encoder.encode(newer, EventFormat.JSON, Projection.ALL),
                acknowledged::incrementAndGet);
        dispatcher.flush();
        await().atMost(WAIT).until(() -> queues.count(subscription.id()) == 1 && acknowledged.get() == 2);
        dispatcher.close();
    }

    /**
     * After a crash the stream sends again every change after the checkpoint, which another
     * subscription's retries can hold far back. A change of a row delivered directly before the
     * crash, and replayed while a newer change of the row waits in the durable queue (its
     * subscription paused), was queued behind that newer one, whose replay the queue keeps once:
     * the receiver got the newer change, then the older one, and kept the older state.
     */
    @Test
    void aChangeReplayedAfterACrashIsNotDeliveredAfterANewerChangeOfItsRowFromTheDurableQueue() throws Exception {
        dispatcher(Duration.ofMinutes(10)).close();
        List<Integer> seen = new CopyOnWriteArrayList<>();
        Subscription subscription = webhook("config:replayed", "replayed", versionsOfRowOne(seen), 1);
        ChangeEvent older = ITEMS.insertAt(nextLsn += 0x100, "1", "1");
        ChangeEvent newer = ITEMS.insertAt(nextLsn += 0x100, "1", "2");
        deliverThenQueue(restartedDispatcher(), store, subscription, older, newer, seen);
        // the crash: the checkpoint was behind both changes

        Dispatcher after = restartedDispatcher();
        after.resumeParked(List.of(subscription));
        ChangeEvent later = ITEMS.insertAt(nextLsn += 0x100, "2", "1"); // the stream goes on past them, another row
        for (ChangeEvent replayed : List.of(older, newer, later)) {
            after.send(subscription, replayed, encoder.encode(replayed, EventFormat.JSON, Projection.ALL),
                    acknowledged::incrementAndGet);
        }
        after.flush();
        await().atMost(WAIT).until(() -> acknowledged.get() == 5);
        paused.remove(subscription.id());
        after.sync(List.of(subscription));
        await().atMost(WAIT).until(() -> store.count(subscription.id()) == 0);
        assertThat(seen).as("the row's changes as the receiver got them").endsWith(2).doesNotContainSequence(2, 1);
    }

    /**
     * A subscription narrowed through the API (its tables, operations or filter) while the events
     * it was routed wait in memory for a failing destination: they are delivered, the contract
     * says, and a crash must not undo that. Read again from the slot after a crash, they are routed
     * with the narrowed subscription, which no longer takes them; so they go to its durable queue
     * (acknowledged there) when it changes, where a restart finds them.
     */
    @Test
    void eventsRoutedBeforeASubscriptionWasNarrowedAreKeptThroughACrash() throws Exception {
        dispatcher(Duration.ofMinutes(10)).close();
        java.util.concurrent.atomic.AtomicBoolean down = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = failingWhile(down, 503, accepted);
        Subscription wide = webhook("config:narrowed", "narrowed", receiver, 1);
        Dispatcher before = restartedDispatcher();
        send(before, wide, 5, 1);
        await().atMost(WAIT).until(() -> receiver.requests().size() >= 5); // retried in memory, not acknowledged
        assertThat(acknowledged.get()).isZero();
        Subscription narrowed = narrowedToAnotherTable(wide);
        before.sync(List.of(narrowed));
        await().atMost(WAIT).until(() -> acknowledged.get() == 5 && store.count(wide.id()) == 5);
        before.close(); // the crash; the slot resends nothing the narrowed subscription takes

        down.set(false);
        Dispatcher after = restartedDispatcher();
        after.resumeParked(List.of(narrowed));
        await().atMost(WAIT).until(() -> acceptedByRow(accepted).size() == 5 && store.count(wide.id()) == 0);
    }

    /**
     * A standby taking over resumes the queues with the subscriptions it last loaded: one created on
     * the active instance just before it died, whose events went to its queue, may be missing from
     * that list. Its queue is not a deleted subscription's while the subscription is stored.
     */
    @Test
    void aQueueOfAStoredSubscriptionMissingFromAStaleListIsNotDroppedAtTakeOver() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        String id = "6f1c2b6e-0000-4000-8000-0000000000ff";
        database.sql("INSERT INTO walhook.subscription (id, name, body) VALUES ('" + id + "', 'created-late',"
                + " '{\"name\": \"created-late\", \"destination\": {\"type\": \"amqp\", \"address\": \"q\"}}')");
        store.append(id, "created-late", List.of(new ParkedEventStore.Entry("queued", Lsn.of(0x10), java.time.Instant.EPOCH,
                "application/json", Map.of(), null, "{}".getBytes(java.nio.charset.StandardCharsets.UTF_8), null, null)),
                0, null);
        dispatcher.resumeParked(List.of());
        await().during(Duration.ofSeconds(1)).atMost(WAIT).until(() -> store.count(id) == 1);
        // the poller's next look has it: its queue is delivered without waiting for its next event
        WebhookReceiver receiver = receiver(request -> 204);
        dispatcher.sync(List.of(webhook(id, "created-late", receiver, 1)));
        await().atMost(WAIT).until(() -> receiver.requests().size() == 1 && store.count(id) == 0);
        store.append(id, "created-late", List.of(new ParkedEventStore.Entry("queued-2", Lsn.of(0x20),
                java.time.Instant.EPOCH, "application/json", Map.of(), null,
                "{}".getBytes(java.nio.charset.StandardCharsets.UTF_8), null, null)), 0, null);
        // deleted (its row gone): its queue goes
        database.sql("DELETE FROM walhook.subscription WHERE id = '" + id + "'");
        restartedDispatcher().resumeParked(List.of());
        await().atMost(WAIT).until(() -> store.count(id) == 0);
    }

    /**
     * Routing picks its subscriptions once per transaction: the rest of a transaction routed when a
     * subscription was narrowed reaches its lane under the old definition, after the lane took the
     * new one. Those events too go through the durable queue.
     */
    @Test
    void eventsRoutedUnderTheOldDefinitionAfterTheLaneTookTheNewOneAreKeptThroughACrash() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        java.util.concurrent.atomic.AtomicBoolean down = new java.util.concurrent.atomic.AtomicBoolean(false);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = failingWhile(down, 503, accepted);
        Subscription wide = webhook("config:midway", "midway", receiver, 1);
        send(dispatcher, wide, 1, 1);
        await().atMost(WAIT).until(() -> acknowledged.get() == 1);
        Subscription narrowed = narrowedToAnotherTable(wide);
        dispatcher.sync(List.of(narrowed)); // idle: nothing to keep
        await().during(Duration.ofMillis(500)).atMost(WAIT).until(() -> store.count(wide.id()) == 0);
        down.set(true);
        send(dispatcher, wide, 3, 1); // the end of a transaction routed before the change
        await().atMost(WAIT).until(() -> acknowledged.get() == 4 && store.count(wide.id()) == 3);
    }

    /**
     * A queue left by a crash: /status's {@code parked} and the {@code parked_current} gauge
     * counted only the rows this run wrote or read back into memory (the rows left from before
     * were unknown to the lane), so a backlog of thousands showed as the few hundred in memory,
     * and an alert on the gauge saw a fortieth of it. The lane's queue is counted before it reads it.
     */
    @Test
    void aQueueLeftFromBeforeARestartIsCountedWholeWhileItsDestinationFails() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        java.util.concurrent.atomic.AtomicBoolean failing = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = failingWhile(failing, 500, accepted);
        Subscription subscription = webhook("config:backlog", "backlog", receiver, 1);
        int rows = 9000; // more than a lane keeps in memory (4,000)
        for (int from = 0; from < rows; from += 500) {
            List<ParkedEventStore.Entry> entries = new ArrayList<>();
            for (int n = from; n < from + 500; n++) {
                entries.add(new ParkedEventStore.Entry("left-" + n, Lsn.of(0x10 + n), java.time.Instant.EPOCH,
                        "application/json", Map.of(), null, "{}".getBytes(java.nio.charset.StandardCharsets.UTF_8), null,
                        null));
            }
            store.append(subscription.id(), "backlog", entries, 0, null);
        }
        dispatcher.resumeParked(List.of(subscription));
        await().atMost(WAIT).until(() -> receiver.requests().size() >= 3); // read back, and failing
        await().atMost(WAIT).untilAsserted(() -> assertThat(dispatcher.status().get(0).durableBacklog())
                .as("the whole queue, not what is in memory").isEqualTo(rows));
        // dropped by another party (the API), rows not read yet: counted again when it is told
        database.sql("DELETE FROM walhook.parked_event WHERE event_id ~ '^left-8[0-9]{3}$'");
        dispatcher.recount(subscription.id());
        await().atMost(WAIT).untilAsserted(() -> assertThat(dispatcher.status().get(0).durableBacklog()).isEqualTo(rows - 1000));
        failing.set(false);
        await().atMost(WAIT).until(() -> store.count(subscription.id()) == 0);
        await().atMost(WAIT).untilAsserted(() -> assertThat(dispatcher.status().get(0).durableBacklog()).isZero());
        assertThat(accepted).hasSize(rows - 1000);
    }

    /**
     * A dead letter dropped after this instance activated, whose change its stream had not reached
     * again yet (a backlog read again after a crash): it was queued or sent when the stream reached
     * it. Told of the drop, the dispatcher settles that change unsent, and again when the stream
     * sends it once more (a transaction broken off and sent again whole).
     */
    @Test
    void aDeadLetterDroppedBeforeTheStreamSendsItsChangeAgainIsSettledUnsent() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = failingWhile(new java.util.concurrent.atomic.AtomicBoolean(false), 500, accepted);
        Subscription subscription = webhook("6f1c2b6e-0000-4000-8000-0000000000d2", "later", receiver, 1);
        dispatcher.resumeParked(List.of(subscription));
        ChangeEvent dropped = ITEMS.insertAt(nextLsn += 0x100, "7", "0");
        // queued by the instance before the crash, then dropped through the API
        store.append(subscription.id(), subscription.name(), List.of(new ParkedEventStore.Entry(dropped.id(),
                dropped.tx().commitLsn(), java.time.Instant.EPOCH, "application/json", Map.of(), null,
                "{}".getBytes(java.nio.charset.StandardCharsets.UTF_8), null, null)), 0, null);
        assertThat(store.drop(subscription.id(), null)).isEqualTo(1);
        dispatcher.droppedHeard(subscription.id()); // its notification
        for (int n = 0; n < 2; n++) {
            dispatcher.send(subscription, dropped, encoder.encode(dropped, EventFormat.JSON, Projection.ALL),
                    acknowledged::incrementAndGet);
            dispatcher.flush();
        }
        send(dispatcher, subscription, 1, 1); // a change after it
        await().atMost(WAIT).until(() -> acknowledged.get() == 3 && accepted.size() == 1);
        await().during(Duration.ofMillis(500)).atMost(Duration.ofSeconds(2)).until(() -> accepted.size() == 1);
        assertThat(JSON.readTree(accepted.get(0).body()).at("/new/id").asInt()).as("the change after it only").isEqualTo(1);
        assertThat(store.count(subscription.id())).as("not queued again").isZero();
    }

    /**
     * The stream sent a queued change again (after a crash) before it was dropped through the API,
     * and the lane's write of it to its durable queue was under way (waiting on the state
     * database) when the drop deleted the row it had queued before: written as a row of its own,
     * it was read back and delivered after the API had answered.
     */
    @Test
    void aChangeWhoseWriteWasUnderWayWhenItsDeadLetterWasDroppedIsNotQueuedAgain() throws Exception {
        database = new SourceFixture(TestPostgres.shared(), "dropwrite");
        java.util.concurrent.atomic.AtomicBoolean gate = new java.util.concurrent.atomic.AtomicBoolean();
        java.util.concurrent.CountDownLatch inside = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        store = new ParkedEventStore(database.dataSource, "walhook", transaction -> {
            if (gate.getAndSet(false)) {
                inside.countDown();
                hold(release, 30);
            }
        });
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = failingWhile(new java.util.concurrent.atomic.AtomicBoolean(false), 500, accepted);
        Dispatcher dispatcher = new Dispatcher(Clock.systemUTC(), new Dispatcher.Settings(Duration.ofSeconds(2),
                Duration.ofMillis(300), Duration.ofMinutes(10), Duration.ofSeconds(1), 4, 4000, 64L << 20), store,
                DeliveryMetrics.NONE, paused::contains,
                sub -> new WebhookTransport(client, (Destination.Webhook) sub.destination(), Clock.systemUTC(),
                        Duration.ofSeconds(2), false));
        dispatchers.add(dispatcher);
        Subscription subscription = webhook("6f1c2b6e-0000-4000-8000-0000000000d3", "resent", receiver, 1);
        paused.add(subscription.id()); // what comes is written to its durable queue
        ChangeEvent dropped = ITEMS.insertAt(nextLsn += 0x100, "7", "0");
        // queued by the instance before the crash
        store.append(subscription.id(), subscription.name(), List.of(new ParkedEventStore.Entry(dropped.id(),
                dropped.tx().commitLsn(), java.time.Instant.EPOCH, "application/json", Map.of(), null,
                "{}".getBytes(java.nio.charset.StandardCharsets.UTF_8), null, null)), 0, null);
        dispatcher.resumeParked(List.of(subscription));
        gate.set(true);
        dispatcher.send(subscription, dropped, encoder.encode(dropped, EventFormat.JSON, Projection.ALL),
                acknowledged::incrementAndGet); // the stream sends it again
        dispatcher.flush();
        assertThat(inside.await(30, java.util.concurrent.TimeUnit.SECONDS)).as("its write under way").isTrue();
        assertThat(store.drop(subscription.id(), null)).isEqualTo(1);
        dispatcher.droppedHeard(subscription.id()); // its notification
        release.countDown();
        await().atMost(WAIT).until(() -> acknowledged.get() == 1);
        paused.remove(subscription.id());
        dispatcher.sync(List.of(subscription));
        send(dispatcher, subscription, 1, 1); // a change after it
        await().atMost(WAIT).until(() -> accepted.size() == 1);
        await().during(Duration.ofMillis(500)).atMost(Duration.ofSeconds(2)).until(() -> accepted.size() == 1);
        assertThat(JSON.readTree(accepted.get(0).body()).at("/new/id").asInt()).as("the change after it only").isEqualTo(1);
        assertThat(store.count(subscription.id())).as("not queued again").isZero();
    }

    /**
     * The same with the change sent again kept in memory, not written yet, while the queue's last
     * row (its own first queueing) was delivered: dropped meanwhile, the queue then empty, the lane
     * went direct and sent the change a second time, after the API had answered.
     */
    @Test
    void aChangeSentAgainAndKeptInMemoryWhenItsDeadLetterWasDroppedIsNotSentAgainWhenTheLaneGoesDirect()
            throws Exception {
        java.util.concurrent.CountDownLatch inside = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        List<String> started = new CopyOnWriteArrayList<>();
        Dispatcher dispatcher = dispatcher(sub -> request -> {
            started.add(request.id());
            if (started.size() == 1) {
                inside.countDown();
                hold(release, 30); // the queued row's request, under way
            }
            return java.util.concurrent.CompletableFuture.completedFuture(Transport.Attempt.DELIVERED);
        });
        Subscription subscription = amqp("6f1c2b6e-0000-4000-8000-0000000000d4", "resent");
        ChangeEvent dropped = ITEMS.insertAt(nextLsn += 0x100, "7", "0");
        store.append(subscription.id(), subscription.name(), List.of(new ParkedEventStore.Entry(dropped.id(),
                dropped.tx().commitLsn(), java.time.Instant.EPOCH, "application/json", Map.of(), "resent",
                "{}".getBytes(java.nio.charset.StandardCharsets.UTF_8), null, null)), 0, null);
        dispatcher.resumeParked(List.of(subscription));
        assertThat(inside.await(30, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
        dispatcher.send(subscription, dropped, encoder.encode(dropped, EventFormat.JSON, Projection.ALL),
                acknowledged::incrementAndGet); // the stream sends it again
        dispatcher.flush();
        assertThat(store.drop(subscription.id(), null)).isEqualTo(1);
        dispatcher.droppedHeard(subscription.id());
        release.countDown(); // under way when it was dropped: answered once
        await().atMost(WAIT).until(() -> acknowledged.get() == 1);
        send(dispatcher, subscription, 1, 1); // a change after it
        await().atMost(WAIT).until(() -> started.size() >= 2);
        await().during(Duration.ofMillis(500)).atMost(Duration.ofSeconds(2)).until(() -> started.size() == 2);
        assertThat(started).as("the dropped change once (under way), then the change after it").hasSize(2)
                .doesNotHaveDuplicates();
    }

    /**
     * Dead letters dropped through the API while the lane was starting what it had read back: the
     * API answered that none is sent, and the lane's turn under way went on to start the dropped
     * rows. Told mid-turn, it starts nothing more. So too when the subscription is deleted: the
     * answer counts its queue as discarded.
     */
    @org.junit.jupiter.params.ParameterizedTest
    @org.junit.jupiter.params.provider.ValueSource(strings = {"dropped", "deleted"})
    void rowsDroppedWhileTheLaneStartsWhatItReadBackAreNotStartedAfterItIsTold(String how) throws Exception {
        java.util.concurrent.CountDownLatch inside = new java.util.concurrent.CountDownLatch(1);
        java.util.concurrent.CountDownLatch release = new java.util.concurrent.CountDownLatch(1);
        List<String> started = new CopyOnWriteArrayList<>();
        Dispatcher dispatcher = dispatcher(s -> request -> {
            started.add(request.id());
            if (started.size() == 1) {
                inside.countDown();
                hold(release, 30); // the lane's turn, starting its first request
            }
            return java.util.concurrent.CompletableFuture.completedFuture(Transport.Attempt.DELIVERED);
        });
        Subscription subscription = amqp("6f1c2b6e-0000-4000-8000-0000000000d1", "dropped");
        List<ParkedEventStore.Entry> entries = new ArrayList<>();
        for (int n = 0; n < 8; n++) { // rows of their own: several under way at once
            entries.add(new ParkedEventStore.Entry("dropped-" + n, Lsn.of(0x10 + n), java.time.Instant.EPOCH,
                    "application/json", Map.of(), "dropped", "{}".getBytes(java.nio.charset.StandardCharsets.UTF_8),
                    Ordering.row(1, n, n).encode(), null, null));
        }
        store.append(subscription.id(), subscription.name(), entries, 0, null);
        dispatcher.resumeParked(List.of(subscription));
        assertThat(inside.await(30, java.util.concurrent.TimeUnit.SECONDS)).isTrue();
        // the API's drop (or delete): the rows deleted, then the active instance's lane told, then the answer
        database.sql("DELETE FROM walhook.parked_event WHERE event_id <> 'dropped-0'");
        if (how.equals("dropped")) {
            dispatcher.recount(subscription.id());
        } else {
            dispatcher.deleted(subscription.id());
        }
        release.countDown();
        await().atMost(WAIT).until(() -> store.count(subscription.id()) == 0);
        await().during(Duration.ofSeconds(1)).atMost(Duration.ofSeconds(3)).until(() -> started.size() == 1);
        assertThat(started).containsExactly("dropped-0");
    }

    /**
     * A queued row whose stored headers are not an object of strings (written by hand, or by
     * another version) is delivered with what can be read of them: failing the read held its
     * lane's queue work for good, and its writes behind it, until routing waited for its memory.
     */
    @Test
    void aQueuedRowWithUnreadableHeadersIsDeliveredNotRetriedForever() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = failingWhile(new java.util.concurrent.atomic.AtomicBoolean(false), 500, accepted);
        Subscription subscription = webhook("config:odd", "odd", receiver, 1);
        store.append(subscription.id(), "odd", List.of(new ParkedEventStore.Entry("odd-1", Lsn.of(0x10),
                java.time.Instant.EPOCH, "application/json", Map.of("x-tenant", "7"), null,
                "{}".getBytes(java.nio.charset.StandardCharsets.UTF_8), null, null)), 0, null);
        store.append(subscription.id(), "odd", List.of(new ParkedEventStore.Entry("odd-2", Lsn.of(0x20),
                java.time.Instant.EPOCH, "application/json", Map.of("x-tenant", "8"), null,
                "{}".getBytes(java.nio.charset.StandardCharsets.UTF_8), null, null)), 0, null);
        database.sql("UPDATE walhook.parked_event SET headers = '{\"x-tenant\": 7, \"x-nested\": {\"a\": 1},"
                + " \"x-gone\": null}' WHERE event_id = 'odd-1'");
        // a null value alone: read as an object of strings, with a null
        database.sql("UPDATE walhook.parked_event SET headers = '{\"x-tenant\": 8, \"x-gone\": null}'"
                + " WHERE event_id = 'odd-2'");
        dispatcher.resumeParked(List.of(subscription));
        await().atMost(WAIT).until(() -> accepted.size() == 2 && store.count(subscription.id()) == 0);
        assertThat(accepted.get(0).header("x-tenant")).isEqualTo("7");
        assertThat(accepted.get(0).header("x-nested")).isEqualTo("{\"a\":1}");
        assertThat(accepted.get(1).header("x-tenant")).isEqualTo("8");
    }

    /**
     * As above, over three runs: the resend of the older change was queued behind the newer one in
     * the second run, which crashed before its lane read them. By the third run the checkpoint had
     * passed both (queued, they were acknowledged), and the lane remembered only rows at or after
     * that run's resume position: the newer change was not, and the older one went out after it.
     */
    @Test
    void aResendQueuedInAnEarlierRunIsNotDeliveredAfterTheNewerChangeQueuedBeforeIt() throws Exception {
        dispatcher(Duration.ofMinutes(10)).close();
        List<Integer> seen = new CopyOnWriteArrayList<>();
        Subscription subscription = webhook("config:replayed", "replayed", versionsOfRowOne(seen), 1);
        long checkpoint = nextLsn; // held back by another subscription's retries
        ChangeEvent older = ITEMS.insertAt(nextLsn += 0x100, "1", "1");
        ChangeEvent newer = ITEMS.insertAt(nextLsn += 0x100, "1", "2");
        ParkedEventStore first = new ParkedEventStore(database.dataSource, "walhook");
        first.resumesFrom(checkpoint);
        Dispatcher before = dispatcherOn(first, Duration.ofMinutes(10));
        before.resumeParked(List.of(subscription));
        deliverThenQueue(before, first, subscription, older, newer, seen); // the first crash

        ParkedEventStore second = new ParkedEventStore(database.dataSource, "walhook");
        second.resumesFrom(checkpoint);
        Dispatcher again = dispatcherOn(second, Duration.ofMinutes(10));
        again.resumeParked(List.of(subscription));
        for (ChangeEvent replayed : List.of(older, newer)) {
            again.send(subscription, replayed, encoder.encode(replayed, EventFormat.JSON, Projection.ALL),
                    acknowledged::incrementAndGet);
        }
        again.flush();
        await().atMost(WAIT).until(() -> acknowledged.get() == 4 && second.count(subscription.id()) == 2);
        again.close(); // the second crash, still paused: the resend waits behind the newer change

        ParkedEventStore third = new ParkedEventStore(database.dataSource, "walhook");
        third.resumesFrom(nextLsn += 0x100); // every change of both runs was acknowledged: the checkpoint passed them
        Dispatcher after = dispatcherOn(third, Duration.ofMinutes(10));
        paused.remove(subscription.id());
        after.resumeParked(List.of(subscription));
        after.sync(List.of(subscription));
        await().atMost(WAIT).until(() -> third.count(subscription.id()) == 0);
        assertThat(seen).as("the row's changes as the receiver got them").endsWith(2).doesNotContainSequence(2, 1);
    }

    @Test
    void aDeletedSubscriptionsQueueHeldByAnotherSessionDoesNotHoldStartUp() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        String deleted = "6f1c2b6e-0000-4000-8000-0000000000ee";
        for (int row = 1; row <= 3; row++) {
            store.append(deleted, "deleted", List.of(new ParkedEventStore.Entry("orphan-" + row, Lsn.of(0x10 + row),
                    java.time.Instant.EPOCH, "application/json", Map.of(), null,
                    "{}".getBytes(java.nio.charset.StandardCharsets.UTF_8), null, null)), 0, null);
        }
        try (java.sql.Connection locker = database.dataSource.getConnection();
                java.sql.Statement s = locker.createStatement()) {
            locker.setAutoCommit(false);
            // one of its rows held, as the API dropping the same queue or an operator's transaction holds it
            s.executeQuery("SELECT id FROM walhook.parked_event WHERE subscription_id = '" + deleted
                    + "' AND event_id = 'orphan-2' FOR UPDATE").close();
            // the take-over resumes the queues: it does not wait for the held row
            java.util.concurrent.CompletableFuture<Void> resumed = java.util.concurrent.CompletableFuture.runAsync(() -> {
                try {
                    dispatcher.resumeParked(List.of());
                } catch (java.sql.SQLException e) {
                    throw new IllegalStateException(e);
                }
            });
            resumed.get(5, java.util.concurrent.TimeUnit.SECONDS);
            await().atMost(WAIT).until(() -> store.count(deleted) == 1);
            locker.rollback();
        }
        // the row held is dropped once it is free
        await().atMost(WAIT).until(() -> store.count(deleted) == 0);
    }

    @Test
    void startUpAfterASyncResumesWithTheSyncsSubscriptionsNotItsOwnOlderLook() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10));
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            accepted.add(request);
            return 204;
        });
        String id = "6f1c2b6e-0000-4000-8000-0000000000dd";
        Subscription readable = webhook(id, "readable", receiver, 1);
        store.append(id, "readable", List.of(new ParkedEventStore.Entry("queued", Lsn.of(0x10), java.time.Instant.EPOCH,
                "application/json", Map.of(), null, "{}".getBytes(java.nio.charset.StandardCharsets.UTF_8), null, null)),
                0, null);
        // the poller's sync of a newer refresh (the subscription reads now) lands before start-up resumes with the
        // look it took earlier (then it was held): the newer one counts, and its queue is delivered
        dispatcher.sync(List.of(readable), Set.of(), x -> false);
        dispatcher.resumeParked(List.of(), Set.of(id));
        await().atMost(WAIT).until(() -> accepted.size() == 1 && store.count(id) == 0);
    }

    @Test
    void aSubscriptionWhoseEveryAttemptFailsDoesNotReadItsQueueOverAndOver() throws Exception {
        GatedDataSource counted = countingStateDatabase("rereading");
        Dispatcher dispatcher = countedDispatcher(Duration.ofMillis(300));
        AtomicInteger refusals = new AtomicInteger();
        WebhookReceiver receiver = receiver(request -> {
            refusals.incrementAndGet();
            return 500;
        });
        Subscription batched = webhook("config:batched", "batched", receiver, 10);
        send(dispatcher, batched, 3, 1);
        long since = System.nanoTime();
        await().atMost(WAIT).until(() -> refusals.get() >= 12 && System.nanoTime() - since > 3_000_000_000L);
        send(dispatcher, batched, 50, 1);
        await().atMost(WAIT).until(() -> acknowledged.get() == 53); // in its durable queue
        // every attempt fails: it keeps what its next attempts send, and reads more only as they go: what
        // remains are its retries' (about 55 round trips; reading 7 rows, dropping them as more than it could send
        // and reading them again without pause made about 300)
        int before = counted.connections.get();
        await().pollDelay(Duration.ofSeconds(3)).atMost(WAIT).until(() -> true);
        assertThat(counted.connections.get() - before).as("state database round trips in 3 s").isLessThan(150);
    }

    @Test
    void noRequestStartsOutsideTheSlotLocksLeaseAndWhatWaitsGoesWhenItIsRenewed() throws Exception {
        database = new SourceFixture(TestPostgres.shared(), "dispatch");
        store = new ParkedEventStore(database.dataSource, "walhook");
        java.util.concurrent.atomic.AtomicReference<java.util.function.LongSupplier> lease =
                new java.util.concurrent.atomic.AtomicReference<>(() -> Long.MAX_VALUE);
        Dispatcher dispatcher = new Dispatcher(Clock.systemUTC(), new Dispatcher.Settings(Duration.ofSeconds(2),
                Duration.ofMillis(300), Duration.ofMinutes(10), Duration.ofSeconds(1), 4), store, DeliveryMetrics.NONE,
                paused::contains, s -> new WebhookTransport(client, (Destination.Webhook) s.destination(), Clock.systemUTC(),
                        Duration.ofSeconds(2), false), () -> lease.get().getAsLong());
        dispatchers.add(dispatcher);
        AtomicInteger failures = new AtomicInteger(3);
        List<Long> requestedAt = new CopyOnWriteArrayList<>();
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            requestedAt.add(System.nanoTime());
            if (failures.getAndDecrement() > 0) {
                return 500; // a few retries waiting too
            }
            accepted.add(request);
            return 204;
        });
        Subscription leased = webhook("config:leased", "leased", receiver, 1);
        // the lease ran out (the lock session not found alive lately; another instance may take over): nothing starts
        send(dispatcher, leased, 5, 1);
        await().pollDelay(Duration.ofSeconds(1)).atMost(WAIT).until(() -> true);
        assertThat(requestedAt).as("requests started while the lease had run out").isEmpty();
        lease.set(() -> 0);
        dispatcher.leaseRenewed();
        await().atMost(WAIT).until(() -> acceptedOf(accepted, leased) == 5);

        // a new holder's wait for the one before: it ends on its own, with no renewal to tell
        failures.set(2);
        int before = requestedAt.size();
        long until = System.nanoTime() + 1_500_000_000L;
        lease.set(() -> Math.max(0, until - System.nanoTime()));
        send(dispatcher, leased, 5, 1);
        await().atMost(WAIT).until(() -> acceptedOf(accepted, leased) == 10);
        assertThat(requestedAt.subList(before, requestedAt.size())).as("requests started before the wait ended")
                .allSatisfy(at -> assertThat(at - until).isNotNegative());

        // out again; renewed, but no one said so (a renewal that found it running out late): it looks again itself
        failures.set(1);
        lease.set(() -> Long.MAX_VALUE);
        send(dispatcher, leased, 5, 1);
        await().pollDelay(Duration.ofMillis(500)).atMost(WAIT).until(() -> true);
        lease.set(() -> 0);
        await().atMost(WAIT).until(() -> acceptedOf(accepted, leased) == 15);
        assertThat(acceptedByRow(accepted)).hasSize(5).allSatisfy((row, versions) -> assertThat(versions)
                .as("row %d in commit order", row).containsExactly(0, 1, 2));
    }

    @Test
    void aDownDestinationsProbesGoOnWhileNewEventsWouldWaitToFillABatch() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10)); // probe interval 1 s
        AtomicInteger refused = new AtomicInteger();
        WebhookReceiver receiver = receiver(request -> {
            refused.incrementAndGet();
            return 500;
        });
        Subscription batched = new Subscription("config:slowbatch", "slowbatch", List.of(TablePattern.ALL),
                Set.of(Operation.values()), java.util.Optional.empty(),
                new Destination.Webhook(URI.create(receiver.url("/slowbatch")), List.of(), Map.of()), EventFormat.JSON, 10,
                Subscription.MAX_BATCH_WAIT_MS, Projection.ALL, false, RetryPolicy.DEFAULTS, null);
        send(dispatcher, batched, 25, 1); // two full batches go; five events wait for a third to fill
        long since = System.nanoTime();
        await().atMost(WAIT).until(() -> refused.get() >= 12 && System.nanoTime() - since > 4_000_000_000L);
        // every attempt fails: the probes take turns, the five events' too (at once: waiting a minute for the batch
        // to fill would hold the retries back meanwhile, the lane turning over and over)
        int before = refused.get();
        await().atMost(Duration.ofSeconds(20)).until(() -> refused.get() >= before + 4);
    }

    /**
     * A failing lane replaces its wake at the end of the retry window by its probes' earlier ones, one
     * or two a second: the replaced wakes stayed on the timer's queue until their own time, ten
     * minutes away, and with a thousand tenants failing piled up by the hundred thousand.
     */
    @Test
    void aFailingLanesReplacedWakesDoNotPileUpOnTheTimer() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10)); // probe interval 1 s
        AtomicInteger refused = new AtomicInteger();
        WebhookReceiver receiver = receiver(request -> {
            refused.incrementAndGet();
            return 500;
        });
        send(dispatcher, webhook("config:down", "down", receiver, 1), 3, 1);
        long since = System.nanoTime();
        await().atMost(WAIT).until(() -> refused.get() >= 12 && System.nanoTime() - since > 4_000_000_000L);
        int probed = refused.get();
        await().atMost(WAIT).until(() -> refused.get() >= probed + 6);
        assertThat(dispatcher.timerTasks()).as("wakes waiting on the timer for one lane").isLessThanOrEqualTo(3);
    }

    @Test
    void aDestinationThatIsDownGetsAboutOneRequestPerProbeIntervalHoweverMuchWaits() throws Exception {
        Dispatcher dispatcher = dispatcher(Duration.ofMinutes(10)); // probe interval 1 s
        java.util.concurrent.atomic.AtomicBoolean down = new java.util.concurrent.atomic.AtomicBoolean(true);
        AtomicInteger refused = new AtomicInteger();
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            if (down.get()) {
                refused.incrementAndGet();
                return 500;
            }
            accepted.add(request);
            return 204;
        });
        Subscription batched = webhook("config:outage", "outage", receiver, 10);
        send(dispatcher, batched, 150, 2);
        long since = System.nanoTime();
        await().atMost(WAIT).until(() -> refused.get() >= 12 && System.nanoTime() - since > 4_000_000_000L);
        // every attempt fails: one request now and then finds out whether it is back, not each waiting batch (nor
        // each half of one, split as if a bad event were in it) on its own backoff (that made about 200 in 5 s)
        int before = refused.get();
        await().pollDelay(Duration.ofSeconds(5)).atMost(WAIT).until(() -> true);
        assertThat(refused.get() - before).as("requests to a destination that is down, in 5 s at 1 s intervals")
                .isLessThan(25);
        down.set(false);
        await().atMost(WAIT).until(() -> acceptedOf(accepted, batched) == 300);
        // back, what waited goes in its batches again, not as the singles a split of each would have left
        assertThat(accepted.size()).as("requests for 300 events in batches of 10").isLessThan(60);
        assertEachInCommitOrder(accepted, List.of(batched), 150);
    }

    @Test
    void aRowRefusedForGoodDoesNotHoldBackABigRowBehindItInTheDurableQueue() throws Exception {
        long limit = 400 << 10; // events read back from durable queues: 100 KB
        Dispatcher dispatcher = dispatcher(Duration.ofMillis(300), 4000, Dispatcher.Settings.HOLD_LIMIT, limit);
        java.util.concurrent.atomic.AtomicBoolean down = new java.util.concurrent.atomic.AtomicBoolean(true);
        List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
        WebhookReceiver receiver = receiver(request -> {
            if (down.get() || request.body().contains("\"new\":{\"id\":1,")) {
                return 500; // row 1, for good
            }
            accepted.add(request);
            return 204;
        });
        Subscription one = webhook("config:one", "one", receiver, 1);
        TestEvents.Table docs = TestEvents.table("public", "docs").key("id", TestEvents.INT4).column("body", TestEvents.TEXT);
        for (int row = 1; row <= 20; row++) {
            // row 2 does not fit in the half of the read-back memory a page's bodies may fill
            ChangeEvent event = docs.insertAt(nextLsn += 0x100, Integer.toString(row), row == 2 ? "x".repeat(60_000) : "small");
            dispatcher.send(one, event, encoder.encode(event, EventFormat.JSON, Projection.ALL), acknowledged::incrementAndGet);
        }
        dispatcher.flush();
        await().atMost(WAIT).until(() -> acknowledged.get() == 20); // in its durable queue
        down.set(false);
        // row 1 in memory, failing for good; row 2 must still be read (it stayed in the queue, every read empty)
        await().atMost(WAIT).until(() -> accepted.size() == 19);
    }

    @Test
    void subscriptionsOfOneDestinationShareItsPlacesAndGatherWhatWaitsIntoBatches() throws Exception {
        // three requests under way to the receiver at most, for all 30 subscriptions (each may have 4)
        try (WebhookClient gated = new WebhookClient(vertx, null, 3)) {
            Dispatcher dispatcher = dispatcher(gated);
            AtomicInteger underWay = new AtomicInteger();
            AtomicInteger most = new AtomicInteger();
            List<WebhookReceiver.Request> accepted = new CopyOnWriteArrayList<>();
            WebhookReceiver receiver = receiver(request -> {
                most.accumulateAndGet(underWay.incrementAndGet(), Math::max);
                try {
                    Thread.sleep(10);
                } catch (InterruptedException e) {
                    Thread.currentThread().interrupt();
                } finally {
                    underWay.decrementAndGet();
                }
                accepted.add(request);
                return 204;
            });
            List<Subscription> tenants = new ArrayList<>();
            for (int i = 1; i <= 30; i++) {
                tenants.add(webhook("config:tenant" + i, "tenant" + i, receiver, 10));
            }
            sendToAll(dispatcher, tenants, 10, 2, () -> { });
            await().atMost(WAIT).until(() -> acknowledged.get() == 600);
            assertThat(most.get()).as("requests under way at the receiver at once").isLessThanOrEqualTo(3);
            // waiting for a place, each lane's events gathered into batches
            assertThat(accepted.size()).as("requests for 600 events").isLessThan(300);
            assertEachInCommitOrder(accepted, tenants, 10);
        }
    }

    /**
     * Waits for {@code count} acknowledgements; the delivery threads used under a tenth of a core
     * meanwhile (a lane turning over and over took 0.4 to 1).
     */
    private void assertLanesMostlyIdleUntilAcknowledged(int count) {
        long cpuBefore = deliveryThreadsCpuNanos();
        long wallBefore = System.nanoTime();
        await().atMost(WAIT).until(() -> acknowledged.get() == count);
        double busy = (deliveryThreadsCpuNanos() - cpuBefore) / (double) (System.nanoTime() - wallBefore);
        assertThat(busy).as("delivery threads' CPU over the wait, as a share of one core").isLessThan(0.1);
    }

    private static long deliveryThreadsCpuNanos() {
        java.lang.management.ThreadMXBean threads = java.lang.management.ManagementFactory.getThreadMXBean();
        long total = 0;
        for (java.lang.management.ThreadInfo info : threads.getThreadInfo(threads.getAllThreadIds())) {
            if (info != null && info.getThreadName().startsWith("walhook-delivery")) {
                total += Math.max(0, threads.getThreadCpuTime(info.getThreadId()));
            }
        }
        return total;
    }
}
