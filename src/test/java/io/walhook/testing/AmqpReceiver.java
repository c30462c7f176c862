package io.walhook.testing;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;

import org.apache.qpid.proton.amqp.messaging.Data;
import org.apache.qpid.proton.message.Message;

import io.vertx.core.Vertx;
import io.vertx.proton.ProtonClient;
import io.vertx.proton.ProtonClientOptions;
import io.vertx.proton.ProtonConnection;

/**
 * A real AMQP 1.0 consumer of one address: accepts and keeps every message, in arrival order,
 * reconnecting when the broker goes away.
 */
public final class AmqpReceiver implements AutoCloseable {

    private final Vertx vertx = Vertx.vertx();
    private final String host;
    private final int port;
    private final String user;
    private final String password;
    private final String address;
    private final List<Message> messages = new ArrayList<>();
    private volatile ProtonConnection connection;
    private volatile boolean closed;

    private AmqpReceiver(String host, int port, String user, String password, String address) {
        this.host = host;
        this.port = port;
        this.user = user;
        this.password = password;
        this.address = address;
    }

    /** Connects and attaches to the address; fails when the broker cannot be reached within 10 s. */
    public static AmqpReceiver start(String host, int port, String user, String password, String address) {
        AmqpReceiver receiver = new AmqpReceiver(host, port, user, password, address);
        CompletableFuture<Void> attached = new CompletableFuture<>();
        receiver.connect(attached);
        try {
            attached.get(10, TimeUnit.SECONDS);
        } catch (Exception e) {
            receiver.close();
            throw new HarnessException("cannot consume " + address + " at " + host + ":" + port + ": " + e.getMessage(), e);
        }
        return receiver;
    }

    private void connect(CompletableFuture<Void> attached) {
        ProtonClientOptions options = new ProtonClientOptions().setConnectTimeout(2000);
        if (user == null) {
            options.addEnabledSaslMechanism("ANONYMOUS");
        }
        ProtonClient.create(vertx).connect(options, host, port, user, password, result -> {
            if (result.failed()) {
                attached.completeExceptionally(result.cause());
                reconnectLater();
                return;
            }
            ProtonConnection c = result.result();
            c.disconnectHandler(x -> reconnectLater());
            c.closeHandler(x -> {
                c.disconnect();
                reconnectLater();
            });
            c.openHandler(opened -> {
                if (opened.failed()) {
                    attached.completeExceptionally(opened.cause());
                    return;
                }
                connection = c;
                c.createReceiver(address).handler((delivery, message) -> {
                    synchronized (messages) {
                        messages.add(message);
                    }
                }).openHandler(open -> {
                    if (open.succeeded()) {
                        attached.complete(null);
                    } else {
                        attached.completeExceptionally(open.cause());
                    }
                }).open();
            }).open();
        });
    }

    private void reconnectLater() {
        if (!closed) {
            vertx.setTimer(500, t -> connect(new CompletableFuture<>()));
        }
    }

    /** Every message received so far. */
    public List<Message> messages() {
        synchronized (messages) {
            return List.copyOf(messages);
        }
    }

    /** A message's body as text (a Data section). */
    public static String body(Message message) {
        return new String(((Data) message.getBody()).getValue().getArray(), ((Data) message.getBody()).getValue().getArrayOffset(),
                ((Data) message.getBody()).getValue().getLength(), java.nio.charset.StandardCharsets.UTF_8);
    }

    @Override
    public void close() {
        closed = true;
        ProtonConnection c = connection;
        if (c != null) {
            vertx.runOnContext(v -> c.close());
        }
        vertx.close().toCompletionStage().toCompletableFuture().orTimeout(5, TimeUnit.SECONDS).exceptionally(e -> null).join();
    }

}
