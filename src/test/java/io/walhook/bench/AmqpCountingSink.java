package io.walhook.bench;

import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

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
    private final Tally tally;

    private AmqpCountingSink(long target) throws Exception {
        this.tally = new Tally(target);
        CompletableFuture<Void> attached = new CompletableFuture<>();
        ProtonClient.create(vertx).connect(new ProtonClientOptions().addEnabledSaslMechanism("ANONYMOUS"), "127.0.0.1",
                broker.port(), result -> {
                    if (result.failed()) {
                        attached.completeExceptionally(result.cause());
                        return;
                    }
                    ProtonConnection connection = result.result();
                    connection.openHandler(opened -> connection.createReceiver(ADDRESS).setPrefetch(2000)
                            .handler((delivery, message) -> tally.record(1, ((Data) message.getBody()).getValue().getLength()))
                            .openHandler(open -> attached.complete(null)).open()).open();
                });
        attached.get(30, TimeUnit.SECONDS);
    }

    static AmqpCountingSink start(long target) throws Exception {
        return new AmqpCountingSink(target);
    }

    @Override
    public Map<String, String> subscription(String prefix, int batch) {
        return Map.of("WALHOOK_AMQP_URL", broker.url(), prefix + "AMQP_ADDRESS", ADDRESS);
    }

    @Override
    public Tally tally() {
        return tally;
    }

    @Override
    public long requests() {
        return tally.events();
    }

    @Override
    public long batchRequests() {
        return 0;
    }

    @Override
    public void close() {
        vertx.close().toCompletionStage().toCompletableFuture().orTimeout(5, TimeUnit.SECONDS).exceptionally(e -> null).join();
        broker.close();
    }
}
