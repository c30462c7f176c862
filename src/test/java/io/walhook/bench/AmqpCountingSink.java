package io.walhook.bench;

import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.LongAdder;

import org.apache.qpid.proton.amqp.messaging.Data;

import io.vertx.core.Vertx;
import io.vertx.proton.ProtonClient;
import io.vertx.proton.ProtonClientOptions;
import io.vertx.proton.ProtonConnection;
import io.walhook.testing.EmbeddedArtemis;

/**
 * The benchmark's AMQP destination: an embedded Artemis broker (persistent journal: walhook's
 * messages are durable) and one consumer of the address that accepts and counts every message.
 */
final class AmqpCountingSink implements Sink {

    static final String ADDRESS = "bench";

    private final EmbeddedArtemis broker = EmbeddedArtemis.start();
    private final Vertx vertx = Vertx.vertx();
    private final long target;
    private final AtomicLong events = new AtomicLong();
    private final LongAdder bytes = new LongAdder();
    private final CountDownLatch complete = new CountDownLatch(1);
    private volatile long firstEventNanos;
    private volatile long completedNanos;

    private AmqpCountingSink(long target) throws Exception {
        this.target = target;
        CompletableFuture<Void> attached = new CompletableFuture<>();
        ProtonClient.create(vertx).connect(new ProtonClientOptions().addEnabledSaslMechanism("ANONYMOUS"), "127.0.0.1",
                broker.port(), result -> {
                    if (result.failed()) {
                        attached.completeExceptionally(result.cause());
                        return;
                    }
                    ProtonConnection connection = result.result();
                    connection.openHandler(opened -> connection.createReceiver(ADDRESS).setPrefetch(2000)
                            .handler((delivery, message) -> count(((Data) message.getBody()).getValue().getLength()))
                            .openHandler(open -> attached.complete(null)).open()).open();
                });
        attached.get(30, TimeUnit.SECONDS);
    }

    static AmqpCountingSink start(long target) throws Exception {
        return new AmqpCountingSink(target);
    }

    private void count(int length) {
        bytes.add(length);
        if (firstEventNanos == 0) {
            firstEventNanos = System.nanoTime();
        }
        if (events.incrementAndGet() == target) {
            completedNanos = System.nanoTime();
            complete.countDown();
        }
    }

    @Override
    public Map<String, String> subscription(String prefix, int batch) {
        return Map.of("WALHOOK_AMQP_URL", broker.url(), prefix + "AMQP_ADDRESS", ADDRESS);
    }

    @Override
    public boolean await(long timeout, TimeUnit unit) throws InterruptedException {
        return complete.await(timeout, unit);
    }

    @Override
    public long events() {
        return events.get();
    }

    @Override
    public long requests() {
        return events.get();
    }

    @Override
    public long batchRequests() {
        return 0;
    }

    @Override
    public long bytes() {
        return bytes.sum();
    }

    @Override
    public long firstEventNanos() {
        return firstEventNanos;
    }

    @Override
    public long completedNanos() {
        return completedNanos;
    }

    @Override
    public void close() {
        vertx.close().toCompletionStage().toCompletableFuture().orTimeout(5, TimeUnit.SECONDS).exceptionally(e -> null).join();
        broker.close();
    }
}
