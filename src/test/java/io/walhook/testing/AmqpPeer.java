package io.walhook.testing;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.LockSupport;
import java.util.function.Predicate;

import org.apache.qpid.proton.amqp.messaging.Accepted;
import org.apache.qpid.proton.amqp.messaging.Rejected;
import org.apache.qpid.proton.message.Message;

import io.vertx.core.Vertx;
import io.vertx.proton.ProtonServer;
import io.vertx.proton.ProtonSession;

/**
 * A real AMQP 1.0 peer that walhook sends to as it would to a broker: it accepts every message and
 * keeps it, in settlement order, except those {@code reject} picks, which it rejects (and does not
 * keep). Anonymous relay is not offered, so walhook opens a link per address.
 */
public final class AmqpPeer implements AutoCloseable {

    private static final int RESUME_SECONDS = 30;

    private final Vertx vertx = Vertx.vertx();
    private final int port;
    private volatile ProtonServer server;
    private final List<Message> accepted = new ArrayList<>();
    private volatile Predicate<Message> reject = message -> false;

    private AmqpPeer() throws Exception {
        this.port = Ports.restartable();
        this.server = listen(port);
    }

    private ProtonServer listen(int port) throws Exception {
        CompletableFuture<ProtonServer> listening = new CompletableFuture<>();
        ProtonServer created = ProtonServer.create(vertx).connectHandler(connection -> {
            connection.openHandler(open -> connection.open());
            connection.sessionOpenHandler(ProtonSession::open);
            connection.receiverOpenHandler(link -> {
                link.setTarget(link.getRemoteTarget());
                link.setAutoAccept(false);
                if (withholding) {
                    // no credit until granted: messages wait in the sender (a broker whose address is full)
                    link.setPrefetch(0);
                    io.vertx.core.Context context = Vertx.currentContext();
                    withheld.add(() -> context.runOnContext(v -> link.flow(1000)));
                }
                link.handler((delivery, message) -> {
                    if (reject.test(message)) {
                        delivery.disposition(new Rejected(), true);
                        return;
                    }
                    synchronized (accepted) {
                        accepted.add(message);
                    }
                    delivery.disposition(Accepted.getInstance(), true);
                });
                link.open();
            });
        });
        created.listen(port, "127.0.0.1", result -> {
            if (result.succeeded()) {
                listening.complete(result.result());
            } else {
                listening.completeExceptionally(result.cause());
            }
        });
        return listening.get(10, TimeUnit.SECONDS);
    }

    /** Links opened from now on get no credit until {@link #grantCredit}. */
    public void withholdCredit() {
        withholding = true;
    }

    /** Gives the links opened while credit was withheld credit for 1,000 messages. */
    public void grantCredit() {
        withholding = false;
        withheld.forEach(Runnable::run);
        withheld.clear();
    }

    private volatile boolean withholding;
    private final List<Runnable> withheld = new java.util.concurrent.CopyOnWriteArrayList<>();

    /**
     * A broker restart: every connection is dropped and the port refuses for a moment, then the
     * peer listens again on the same port, keeping what it accepted so far.
     */
    public void restart() {
        stop();
        resume();
    }

    /** Drops every connection and stops listening, until {@link #resume}. */
    public void stop() {
        try {
            CompletableFuture<Void> closed = new CompletableFuture<>();
            server.close(result -> closed.complete(null));
            closed.get(10, TimeUnit.SECONDS);
        } catch (Exception e) {
            throw new HarnessException("cannot stop the AMQP peer on port " + port + ": " + e.getMessage(), e);
        }
    }

    /**
     * Listens again on the same port. If the port is not free yet (Vert.x reports the listener
     * closed before the kernel releases it; or a connection was given the port as its local one),
     * tries again for up to {@value #RESUME_SECONDS} s
     * rather than leaving the peer down for the rest of a test.
     */
    public void resume() {
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(RESUME_SECONDS);
        while (true) {
            try {
                server = listen(port);
                return;
            } catch (Exception e) {
                if (System.nanoTime() - deadline > 0) {
                    throw new HarnessException("cannot listen again on port " + port + " within " + RESUME_SECONDS
                            + " s: " + e.getMessage(), e);
                }
                LockSupport.parkNanos(TimeUnit.MILLISECONDS.toNanos(100));
            }
        }
    }

    public static AmqpPeer start() {
        try {
            return new AmqpPeer();
        } catch (Exception e) {
            throw new HarnessException("cannot start the AMQP peer: " + e.getMessage(), e);
        }
    }

    /** Messages for which this is true are rejected from now on. */
    public void reject(Predicate<Message> reject) {
        this.reject = reject;
    }

    public int port() {
        return port;
    }

    /** {@code amqp://127.0.0.1:<port>}, for WALHOOK_AMQP_URL. */
    public String url() {
        return "amqp://127.0.0.1:" + port;
    }

    /** Every message accepted so far, in the order it was settled. */
    public List<Message> accepted() {
        synchronized (accepted) {
            return List.copyOf(accepted);
        }
    }

    @Override
    public void close() {
        server.close();
        vertx.close().toCompletionStage().toCompletableFuture().orTimeout(5, TimeUnit.SECONDS).exceptionally(e -> null).join();
    }
}
