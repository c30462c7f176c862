package io.walhook.delivery;

import static org.assertj.core.api.Assertions.assertThat;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.qpid.proton.amqp.Symbol;
import org.apache.qpid.proton.amqp.messaging.Accepted;
import org.apache.qpid.proton.amqp.messaging.Modified;
import org.apache.qpid.proton.amqp.messaging.Rejected;
import org.apache.qpid.proton.amqp.messaging.Released;
import org.apache.qpid.proton.amqp.transport.ErrorCondition;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;

import io.vertx.core.Vertx;
import io.vertx.proton.ProtonServer;
import io.vertx.proton.ProtonSession;
import io.walhook.config.AmqpUrl;
import io.walhook.routing.Destination;

/**
 * The outcome of each settlement, the CloudEvents AMQP binding's properties, and the failures a
 * real AMQP peer (a vertx-proton server in the test) provokes: no settlement, a detached link,
 * nobody listening. Delivery to a real broker is in AmqpDeliveryIT.
 */
class AmqpClientTest {

    /** How the test's AMQP peer treats the links walhook opens to it. */
    private enum Peer { NEVER_SETTLES, DETACHES }

    private static Vertx vertx;

    @BeforeAll
    static void startVertx() {
        vertx = Vertx.vertx();
    }

    @AfterAll
    static void stopVertx() {
        vertx.close().toCompletionStage().toCompletableFuture().join();
    }

    /** A real AMQP 1.0 server on a free port that accepts connections and links, then behaves as told. */
    private static ProtonServer peer(Peer behaviour) throws Exception {
        ProtonServer server = ProtonServer.create(vertx).connectHandler(connection -> {
            connection.openHandler(open -> connection.open());
            connection.sessionOpenHandler(ProtonSession::open);
            connection.receiverOpenHandler(link -> {
                link.setTarget(link.getRemoteTarget());
                link.setAutoAccept(false);
                link.handler((delivery, message) -> { }); // takes the message, never settles it
                link.open();
                if (behaviour == Peer.DETACHES) {
                    link.setCondition(new ErrorCondition(Symbol.valueOf("amqp:not-found"), "no such address"));
                    link.close();
                }
            });
        });
        return listening(server);
    }

    /** The peer, listening on a free port of 127.0.0.1. */
    private static ProtonServer listening(ProtonServer server) throws Exception {
        CompletableFuture<ProtonServer> listening = new CompletableFuture<>();
        server.listen(0, "127.0.0.1", result -> {
            if (result.succeeded()) {
                listening.complete(result.result());
            } else {
                listening.completeExceptionally(result.cause());
            }
        });
        return listening.get(10, TimeUnit.SECONDS);
    }

    /**
     * A real AMQP 1.0 server on a free port, listening, that opens connections and sessions and
     * hands each link walhook opens, its target set and nothing accepted on its own, to
     * {@code link}, which opens it.
     */
    private static ProtonServer peerWithLinks(java.util.function.Consumer<io.vertx.proton.ProtonReceiver> link)
            throws Exception {
        return listening(ProtonServer.create(vertx).connectHandler(connection -> {
            connection.openHandler(open -> connection.open());
            connection.sessionOpenHandler(ProtonSession::open);
            connection.receiverOpenHandler(receiver -> {
                receiver.setTarget(receiver.getRemoteTarget());
                receiver.setAutoAccept(false);
                link.accept(receiver);
            });
        }));
    }

    private static Transport.Attempt sendOne(int port, Duration timeout) throws InterruptedException {
        AmqpClient broker = new AmqpClient(vertx, AmqpUrl.parse("amqp://127.0.0.1:" + port), timeout);
        try {
            return broker.transport(new Destination.Amqp("orders")).attempt(new Transport.Request("0000000000000001-0001",
                    "{}".getBytes(StandardCharsets.UTF_8), "application/json", Map.of(), "orders"), timeout);
        } finally {
            broker.close();
        }
    }

    /**
     * A broker that takes one connection per container-id (ActiveMQ Classic makes it the JMS client
     * id, and closes a second open with "already connected"): every client, a standby's test-fire
     * beside the active instance's, or two deployments sharing the broker, named itself "walhook",
     * and the second one's every message failed for as long as the first stayed connected.
     */
    @Test
    void twoClientsOfOneBrokerAreEachAContainerOfTheirOwn() throws Exception {
        java.util.Set<String> open = java.util.concurrent.ConcurrentHashMap.newKeySet();
        ProtonServer server = listening(ProtonServer.create(vertx).connectHandler(connection -> {
            connection.openHandler(opened -> {
                connection.open();
                if (!open.add(connection.getRemoteContainer())) {
                    connection.setCondition(new ErrorCondition(Symbol.valueOf("amqp:invalid-field"),
                            "Broker: localhost - Client: " + connection.getRemoteContainer() + " already connected from tcp://127.0.0.1"));
                    connection.close();
                }
            });
            connection.sessionOpenHandler(ProtonSession::open);
            connection.receiverOpenHandler(receiver -> {
                receiver.setTarget(receiver.getRemoteTarget());
                receiver.setAutoAccept(false);
                receiver.handler((delivery, message) -> delivery.disposition(Accepted.getInstance(), true));
                receiver.open();
            });
        }));
        AmqpClient first = new AmqpClient(vertx, AmqpUrl.parse("amqp://127.0.0.1:" + server.actualPort()), Duration.ofSeconds(5));
        AmqpClient second = new AmqpClient(vertx, AmqpUrl.parse("amqp://127.0.0.1:" + server.actualPort()), Duration.ofSeconds(5));
        try {
            for (AmqpClient client : java.util.List.of(first, second)) {
                Transport.Attempt attempt = client.transport(new Destination.Amqp("orders")).attempt(new Transport.Request(
                        "0000000000000001-0001", "{}".getBytes(StandardCharsets.UTF_8), "application/json", Map.of(), "orders"),
                        Duration.ofSeconds(5));
                assertThat(attempt.outcome()).as(attempt.problem()).isEqualTo(Transport.Outcome.DELIVERED);
            }
            assertThat(open).hasSize(2);
        } finally {
            first.close();
            second.close();
            server.close();
        }
    }

    /**
     * A client closed, then used again (a transport asked for while walhook stops): its links were of
     * the closed connection, and the next message waited on one until the timeout, then failed. A
     * send after the close opens a connection, and links on it, of its own.
     */
    @Test
    void aClientUsedAfterItsCloseConnectsAgain() throws Exception {
        ProtonServer server = peerWithLinks(receiver -> {
            receiver.handler((delivery, message) -> delivery.disposition(Accepted.getInstance(), true));
            receiver.open();
        });
        AmqpClient client = new AmqpClient(vertx, AmqpUrl.parse("amqp://127.0.0.1:" + server.actualPort()), Duration.ofSeconds(5));
        try {
            for (int i = 1; i <= 2; i++) {
                Transport.Attempt attempt = client.transport(new Destination.Amqp("orders")).attempt(new Transport.Request(
                        "0000000000000001-000" + i, "{}".getBytes(StandardCharsets.UTF_8), "application/json", Map.of(), "orders"),
                        Duration.ofSeconds(5));
                assertThat(attempt.outcome()).as(attempt.problem()).isEqualTo(Transport.Outcome.DELIVERED);
                client.close();
            }
        } finally {
            server.close();
        }
    }

    /**
     * A peer that takes the TCP connection and never answers (a load balancer whose broker is down):
     * the attempt is given up after the timeout, and the next message connects again, rather than
     * every later message waiting on a connection that never opens.
     */
    @Test
    void aPeerThatTakesTheConnectionAndNeverOpensItIsConnectedToAgain() throws Exception {
        java.util.concurrent.atomic.AtomicInteger accepted = new java.util.concurrent.atomic.AtomicInteger();
        java.util.List<java.net.Socket> held = new java.util.concurrent.CopyOnWriteArrayList<>();
        try (java.net.ServerSocket silent = new java.net.ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress())) {
            Thread acceptor = new Thread(() -> {
                while (!silent.isClosed()) {
                    try {
                        held.add(silent.accept()); // takes it, reads nothing, writes nothing
                        accepted.incrementAndGet();
                    } catch (java.io.IOException closed) {
                        return;
                    }
                }
            });
            acceptor.setDaemon(true);
            acceptor.start();
            Duration timeout = Duration.ofMillis(500);
            AmqpClient broker = new AmqpClient(vertx, AmqpUrl.parse("amqp://127.0.0.1:" + silent.getLocalPort()), timeout,
                    Duration.ofSeconds(2));
            try {
                Transport transport = broker.transport(new Destination.Amqp("orders"));
                // messages one after another, each retried at its timeout (or at once, while the client waits to
                // connect again), until one connects again
                java.util.concurrent.atomic.AtomicInteger message = new java.util.concurrent.atomic.AtomicInteger();
                org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> {
                    Transport.Attempt attempt = transport.attempt(new Transport.Request(String.format("%016d-0001",
                            message.incrementAndGet()), "{}".getBytes(StandardCharsets.UTF_8), "application/json", Map.of(),
                            "orders"), timeout);
                    assertThat(attempt.outcome()).isEqualTo(Transport.Outcome.RETRY);
                    return accepted.get() >= 2;
                });
                // the socket given up on is closed once silent (it was left open for good): the AMQP header walhook
                // wrote, then the end
                held.get(0).setSoTimeout(10_000);
                assertThat(held.get(0).getInputStream().readAllBytes()).as("what walhook wrote before it closed").isNotEmpty();
            } finally {
                broker.close();
                for (java.net.Socket socket : held) {
                    socket.close();
                }
            }
        }
    }

    /**
     * A broker that first says it received the message ({@code Received}, not an outcome, the
     * delivery left unsettled), then accepts it: the message is delivered. Before, the first update
     * was taken as the outcome, a retry, and the message was sent again.
     */
    @Test
    void aReceivedStateIsNotAnOutcomeAndTheAcceptanceAfterItIs() throws Exception {
        java.util.concurrent.atomic.AtomicInteger transfers = new java.util.concurrent.atomic.AtomicInteger();
        ProtonServer server = peerWithLinks(link -> {
            link.handler((delivery, message) -> {
                transfers.incrementAndGet();
                org.apache.qpid.proton.amqp.messaging.Received received = new org.apache.qpid.proton.amqp.messaging.Received();
                received.setSectionNumber(org.apache.qpid.proton.amqp.UnsignedInteger.ZERO);
                received.setSectionOffset(org.apache.qpid.proton.amqp.UnsignedLong.ZERO);
                delivery.disposition(received, false);
                vertx.setTimer(100, t -> delivery.disposition(Accepted.getInstance(), true));
            });
            link.open();
        });
        try {
            Transport.Attempt attempt = sendOne(server.actualPort(), Duration.ofSeconds(5));
            assertThat(attempt.outcome()).as(attempt.problem()).isEqualTo(Transport.Outcome.DELIVERED);
            assertThat(transfers.get()).isEqualTo(1);
        } finally {
            server.close();
        }
    }

    @Test
    void aPeerThatNeverSettlesIsRetriedAfterTheTimeout() throws Exception {
        ProtonServer server = peer(Peer.NEVER_SETTLES);
        try {
            Transport.Attempt attempt = sendOne(server.actualPort(), Duration.ofMillis(500));
            assertThat(attempt.outcome()).isEqualTo(Transport.Outcome.RETRY);
            assertThat(attempt.problem()).isEqualTo("the broker gave no outcome within PT0.5S");
        } finally {
            server.close();
        }
    }

    @Test
    void anAddressThatNeverSettlesDoesNotFailTheMessagesOfAnother() throws Exception {
        // a broker with a link per address (no anonymous relay) that leaves one address's messages unsettled (held
        // back, an address full) and accepts another's after 200 ms
        ProtonServer server = ProtonServer.create(vertx).connectHandler(connection -> {
            connection.openHandler(open -> {
                connection.setOfferedCapabilities(new Symbol[0]);
                connection.open();
            });
            connection.sessionOpenHandler(ProtonSession::open);
            connection.receiverOpenHandler(link -> {
                link.setTarget(link.getRemoteTarget());
                link.setAutoAccept(false);
                boolean slow = "slow".equals(link.getRemoteTarget().getAddress());
                link.handler((delivery, message) -> {
                    if (!slow) {
                        vertx.setTimer(200, t -> delivery.disposition(Accepted.getInstance(), true));
                    }
                });
                link.open();
            });
        });
        listening(server);
        Duration timeout = Duration.ofMillis(500);
        AmqpClient broker = new AmqpClient(vertx, AmqpUrl.parse("amqp://127.0.0.1:" + server.actualPort()), timeout);
        try {
            // connected first, so that the timeout counts from the message, not from connecting
            assertThat(broker.send(new Transport.Request("0000000000000000-0001", "{}".getBytes(StandardCharsets.UTF_8),
                    "application/json", Map.of(), "fast")).get(10, TimeUnit.SECONDS).outcome())
                    .isEqualTo(Transport.Outcome.DELIVERED);
            CompletableFuture<Transport.Attempt> slow = broker.send(new Transport.Request("0000000000000001-0001",
                    "{}".getBytes(StandardCharsets.UTF_8), "application/json", Map.of(), "slow"));
            // sent as the first waits; answered after the first's time is up
            CompletableFuture<Transport.Attempt> fast = CompletableFuture.supplyAsync(() -> null,
                    CompletableFuture.delayedExecutor(350, TimeUnit.MILLISECONDS))
                    .thenCompose(v -> broker.send(new Transport.Request("0000000000000002-0001",
                            "{}".getBytes(StandardCharsets.UTF_8), "application/json", Map.of(), "fast")));
            assertThat(slow.get(10, TimeUnit.SECONDS).outcome()).isEqualTo(Transport.Outcome.RETRY);
            assertThat(fast.get(10, TimeUnit.SECONDS).outcome()).as("the other address's message is not failed with it")
                    .isEqualTo(Transport.Outcome.DELIVERED);
            // and the stalled address's link is opened again for its next message
            CompletableFuture<Transport.Attempt> again = broker.send(new Transport.Request("0000000000000003-0001",
                    "{}".getBytes(StandardCharsets.UTF_8), "application/json", Map.of(), "fast"));
            assertThat(again.get(10, TimeUnit.SECONDS).outcome()).isEqualTo(Transport.Outcome.DELIVERED);
        } finally {
            broker.close();
            server.close();
        }
    }

    /**
     * A link opened for a message whose broker gives it no credit and no outcome: closed when that
     * first message's time is up, so the next message to its address opens it again. The link's
     * time of opening, later than the message's sending, counted as a settlement since then, and the
     * stalled link stayed until a second message's time was up (with an anonymous relay, every
     * address's link).
     */
    @Test
    void aLinkOpenedForAMessageThatGetsNoOutcomeIsClosedWhenItsTimeIsUp() throws Exception {
        java.util.concurrent.atomic.AtomicInteger opened = new java.util.concurrent.atomic.AtomicInteger();
        java.util.concurrent.atomic.AtomicInteger closed = new java.util.concurrent.atomic.AtomicInteger();
        ProtonServer server = peerWithLinks(link -> {
            opened.incrementAndGet();
            link.setPrefetch(0); // no credit, ever
            link.closeHandler(c -> closed.incrementAndGet());
            link.detachHandler(d -> closed.incrementAndGet());
            link.open();
        });
        AmqpClient broker = new AmqpClient(vertx, AmqpUrl.parse("amqp://127.0.0.1:" + server.actualPort()),
                Duration.ofMillis(500));
        try {
            CompletableFuture<Transport.Attempt> first = broker.send(new Transport.Request("0000000000000001-0001",
                    "{}".getBytes(StandardCharsets.UTF_8), "application/json", Map.of(), "stalled"));
            assertThat(first.get(10, TimeUnit.SECONDS).outcome()).isEqualTo(Transport.Outcome.RETRY);
            org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> closed.get() >= 1);
            broker.send(new Transport.Request("0000000000000002-0001", "{}".getBytes(StandardCharsets.UTF_8),
                    "application/json", Map.of(), "stalled"));
            org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(10)).until(() -> opened.get() == 2);
        } finally {
            broker.close();
            server.close();
        }
    }

    /**
     * A broker that gives credit a message at a time, slowly (flow control, a queue near its limit):
     * messages without credit wait in walhook, and one given up on before it had credit (its
     * timeout, a deleted subscription) is never sent. Before, every message went into the AMQP
     * library's buffer at once and was sent whenever credit came, long after walhook had counted it
     * failed and queued its retry: the broker got copies of messages walhook retried, behind which
     * the retries timed out too. Also, the first message on a link is held until the broker attached
     * it, so a message larger than the link takes is known before it is sent.
     */
    @Test
    void aMessageGivenUpOnBeforeTheBrokerGaveCreditIsNeverSent() throws Exception {
        java.util.Map<String, Long> received = new java.util.concurrent.ConcurrentHashMap<>();
        ProtonServer server = peerWithLinks(link -> {
            link.setPrefetch(0);
            link.handler((delivery, message) -> {
                received.put(String.valueOf(message.getMessageId()), System.nanoTime());
                // the first (the link's warm-up) at once, then credit at 1.5 s intervals: none comes near the timeouts
                // (at 500 ms), even on a machine that stalls (at 350 ms, a stall of 150 ms made both due together)
                vertx.setTimer(received.size() == 1 ? 1 : 1_500, t -> {
                    delivery.disposition(Accepted.getInstance(), true);
                    link.flow(1);
                });
            });
            link.open();
            link.flow(1);
        });
        Duration timeout = Duration.ofMillis(500);
        AmqpClient broker = new AmqpClient(vertx, AmqpUrl.parse("amqp://127.0.0.1:" + server.actualPort()), timeout);
        try {
            assertThat(broker.send(new Transport.Request("0000000000000000-0001", "{}".getBytes(StandardCharsets.UTF_8),
                    "application/json", Map.of(), "orders")).get(10, TimeUnit.SECONDS).outcome())
                    .isEqualTo(Transport.Outcome.DELIVERED);
            java.util.Map<String, Long> givenUp = new java.util.concurrent.ConcurrentHashMap<>();
            java.util.List<CompletableFuture<Transport.Attempt>> sent = new java.util.ArrayList<>();
            for (int n = 1; n <= 10; n++) {
                String id = String.format("%016d-0001", n);
                CompletableFuture<Transport.Attempt> sending = broker.send(new Transport.Request(id,
                        "{}".getBytes(StandardCharsets.UTF_8), "application/json", Map.of(), "orders"));
                if (n == 10) {
                    sending.complete(Transport.Attempt.retry("given up")); // as a lane does when its subscription goes
                }
                sent.add(sending.whenComplete((attempt, e) -> {
                    if (attempt.outcome() != Transport.Outcome.DELIVERED) {
                        givenUp.put(id, System.nanoTime());
                    }
                }));
            }
            CompletableFuture.allOf(sent.toArray(CompletableFuture[]::new)).get(10, TimeUnit.SECONDS);
            assertThat(givenUp).as("most wait past their timeout for credit").hasSizeGreaterThanOrEqualTo(5);
            // the broker's credit goes on coming: a message still held would be sent with it
            java.util.concurrent.atomic.AtomicInteger seen = new java.util.concurrent.atomic.AtomicInteger(-1);
            org.awaitility.Awaitility.await().during(Duration.ofMillis(2_500)).atMost(Duration.ofSeconds(20))
                    .until(() -> received.size() == seen.getAndSet(received.size()));
            givenUp.forEach((id, at) -> assertThat(received.get(id)).as("%s, given up on, then received", id)
                    .satisfiesAnyOf(time -> assertThat(time).isNull(), time -> assertThat(time).isLessThan(at)));
        } finally {
            broker.close();
            server.close();
        }
    }

    /**
     * A message larger than the broker's link takes (it says so when it attaches the link) fails
     * alone, without being sent: sent, the broker detached the link, failing the other messages
     * under way on it, under the anonymous relay other subscriptions' too.
     */
    @Test
    void aMessageLargerThanTheLinkTakesFailsAloneWithoutDetachingTheLink() throws Exception {
        java.util.concurrent.atomic.AtomicInteger links = new java.util.concurrent.atomic.AtomicInteger();
        ProtonServer server = peerWithLinks(link -> {
            links.incrementAndGet();
            link.setMaxMessageSize(org.apache.qpid.proton.amqp.UnsignedLong.valueOf(1024));
            link.handler((delivery, message) -> {
                if (((org.apache.qpid.proton.amqp.messaging.Data) message.getBody()).getValue().getLength() > 1024) {
                    // as a broker enforcing its limit does
                    link.setCondition(new ErrorCondition(Symbol.valueOf("amqp:link:message-size-exceeded"), "too large"));
                    link.close();
                    return;
                }
                vertx.setTimer(300, t -> delivery.disposition(Accepted.getInstance(), true)); // under way a while
            });
            link.open();
        });
        AmqpClient broker = new AmqpClient(vertx, AmqpUrl.parse("amqp://127.0.0.1:" + server.actualPort()),
                Duration.ofSeconds(10));
        java.util.function.BiFunction<Integer, Integer, Transport.Request> request = (n, bytes) -> new Transport.Request(
                "000000000000000" + n + "-0001", "x".repeat(bytes).getBytes(StandardCharsets.UTF_8), "application/json",
                Map.of(), n % 2 == 0 ? "orders" : "invoices");
        try {
            // the first message, on a link not attached yet, waits for the broker's attach and credit, which say
            // what the link takes (sent at once, it made the broker detach the link)
            assertThat(broker.send(request.apply(5, 4096)).get(10, TimeUnit.SECONDS).problem())
                    .contains("more than the 1024 the broker takes on the link to its anonymous relay");
            assertThat(broker.send(request.apply(1, 10)).get(10, TimeUnit.SECONDS).outcome())
                    .isEqualTo(Transport.Outcome.DELIVERED);
            CompletableFuture<Transport.Attempt> small = broker.send(request.apply(2, 10));
            CompletableFuture<Transport.Attempt> large = broker.send(request.apply(3, 4096));
            assertThat(large.get(10, TimeUnit.SECONDS)).satisfies(a -> {
                assertThat(a.outcome()).isEqualTo(Transport.Outcome.RETRY);
                assertThat(a.problem()).contains("more than the 1024 the broker takes on the link to its anonymous relay");
            });
            assertThat(small.get(10, TimeUnit.SECONDS).outcome()).as("the message under way beside it")
                    .isEqualTo(Transport.Outcome.DELIVERED);
            assertThat(broker.send(request.apply(4, 10)).get(10, TimeUnit.SECONDS).outcome())
                    .isEqualTo(Transport.Outcome.DELIVERED);
            assertThat(links.get()).as("the link was never detached and opened again").isEqualTo(1);
        } finally {
            broker.close();
            server.close();
        }
    }

    @Test
    void aDetachedLinkIsRetriedNamingTheBrokersCondition() throws Exception {
        ProtonServer server = peer(Peer.DETACHES);
        try {
            Transport.Attempt attempt = sendOne(server.actualPort(), Duration.ofSeconds(10));
            assertThat(attempt.outcome()).isEqualTo(Transport.Outcome.RETRY);
            assertThat(attempt.problem()).isEqualTo("the broker detached the link to its anonymous relay: amqp:not-found no such address");
        } finally {
            server.close();
        }
    }

    /**
     * A broker that is down (it takes each connection and closes it) while many AMQP subscriptions
     * send: each message failed by its own connection attempt, and a thousand subscriptions probing
     * every 5 s made two hundred attempts a second. After a failed attempt, messages fail at once
     * with its problem for a while (a quarter of a second, doubling up to 5 s), then it connects again,
     * whether or not a message comes then.
     */
    @Test
    void messagesSentWhileTheBrokerIsDownShareItsConnectionAttempts() throws Exception {
        java.util.concurrent.atomic.AtomicInteger accepted = new java.util.concurrent.atomic.AtomicInteger();
        try (java.net.ServerSocket down = new java.net.ServerSocket(0, 50, java.net.InetAddress.getLoopbackAddress())) {
            Thread acceptor = new Thread(() -> {
                while (!down.isClosed()) {
                    try (java.net.Socket socket = down.accept()) {
                        accepted.incrementAndGet(); // and closed at once
                    } catch (java.io.IOException closed) {
                        return;
                    }
                }
            });
            acceptor.setDaemon(true);
            acceptor.start();
            Duration timeout = Duration.ofSeconds(5);
            AmqpClient broker = new AmqpClient(vertx, AmqpUrl.parse("amqp://127.0.0.1:" + down.getLocalPort()), timeout);
            try {
                Transport transport = broker.transport(new Destination.Amqp("orders"));
                for (int message = 1; message <= 30; message++) {
                    Transport.Attempt attempt = transport.attempt(new Transport.Request(String.format("%016d-0001", message),
                            "{}".getBytes(StandardCharsets.UTF_8), "application/json", Map.of(), "orders"), timeout);
                    assertThat(attempt.outcome()).isEqualTo(Transport.Outcome.RETRY);
                    assertThat(attempt.problem()).contains("amqp://127.0.0.1:" + down.getLocalPort());
                }
                assertThat(accepted.get()).as("connection attempts for 30 messages").isBetween(1, 10);
                // one more failed at once, in the wait: the client connects again when the wait ends, with no message
                // sent after it (the lane that sent it probes again only at its own pace)
                int before;
                int message = 30;
                do {
                    before = accepted.get();
                    transport.attempt(new Transport.Request(String.format("%016d-0001", ++message),
                            "{}".getBytes(StandardCharsets.UTF_8), "application/json", Map.of(), "orders"), timeout);
                } while (accepted.get() != before && message < 60);
                int failedAtOnce = before;
                org.awaitility.Awaitility.await().atMost(Duration.ofSeconds(15)).until(() -> accepted.get() > failedAtOnce);
            } finally {
                broker.close();
            }
        }
    }

    @Test
    void nobodyListeningIsRetriedNamingTheBroker() throws Exception {
        int port;
        try (java.net.ServerSocket socket = new java.net.ServerSocket(0)) {
            port = socket.getLocalPort();
        }
        Transport.Attempt attempt = sendOne(port, Duration.ofSeconds(5));
        assertThat(attempt.outcome()).isEqualTo(Transport.Outcome.RETRY);
        assertThat(attempt.problem()).startsWith("cannot connect to amqp://127.0.0.1:" + port + ": ");
    }

    /**
     * A broker's words about a rejection can quote the connection's credentials: they are taken out
     * before the problem is cut to its length (cut first, a credential across the cut stayed in part).
     */
    @Test
    void aRejectionsWordsAreRedactedBeforeTheyAreCut() {
        Rejected rejected = new Rejected();
        rejected.setError(new ErrorCondition(Symbol.valueOf("amqp:unauthorized-access"),
                "x".repeat(454) + "Zq9xWsecretPassword refused")); // from character 490: across the cut at 497
        Transport.Attempt attempt = AmqpClient.outcome(rejected, text -> text.replace("Zq9xWsecretPassword", "***"));
        assertThat(attempt.problem()).doesNotContain("Zq9xW").hasSizeLessThanOrEqualTo(500);
    }

    @Test
    void onlyAcceptedIsDeliveredAndEveryOtherOutcomeIsNamed() {
        assertThat(AmqpClient.outcome(Accepted.getInstance()).outcome()).isEqualTo(Transport.Outcome.DELIVERED);
        Rejected rejected = new Rejected();
        rejected.setError(new ErrorCondition(Symbol.valueOf("amqp:not-found"), "no such address"));
        assertThat(AmqpClient.outcome(rejected)).extracting(Transport.Attempt::outcome, Transport.Attempt::problem)
                .containsExactly(Transport.Outcome.RETRY, "rejected: amqp:not-found no such address");
        assertThat(AmqpClient.outcome(Released.getInstance()).problem()).isEqualTo("released");
        Modified modified = new Modified();
        modified.setUndeliverableHere(true);
        assertThat(AmqpClient.outcome(modified).problem()).isEqualTo("modified (undeliverable here)");
        assertThat(AmqpClient.outcome(null).outcome()).isEqualTo(Transport.Outcome.RETRY);
    }

    @Test
    void binaryCloudEventsHeadersBecomePrefixedPropertiesWithPlainValues() {
        assertThat(AmqpClient.applicationProperties(Map.of("ce-id", "0000000001-0001", "ce-subject", "public.caf%C3%A9%20bar",
                "ce-team", "a+b", "ce-source", "/walhook/sales%25eu caf%C3%A9")))
                .containsEntry("cloudEvents:id", "0000000001-0001")
                .containsEntry("cloudEvents:subject", "public.café bar")
                .containsEntry("cloudEvents:team", "a+b")
                .containsEntry("cloudEvents:source", "/walhook/sales%eu café")
                .hasSize(4);
    }
}
