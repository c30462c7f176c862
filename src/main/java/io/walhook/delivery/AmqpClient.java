package io.walhook.delivery;

import java.net.URLDecoder;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;

import org.apache.qpid.proton.amqp.Binary;
import org.apache.qpid.proton.amqp.Symbol;
import org.apache.qpid.proton.amqp.messaging.Accepted;
import org.apache.qpid.proton.amqp.messaging.ApplicationProperties;
import org.apache.qpid.proton.amqp.messaging.Data;
import org.apache.qpid.proton.amqp.messaging.Modified;
import org.apache.qpid.proton.amqp.messaging.Rejected;
import org.apache.qpid.proton.amqp.messaging.Released;
import org.apache.qpid.proton.amqp.transport.DeliveryState;
import org.apache.qpid.proton.amqp.transport.ErrorCondition;
import org.apache.qpid.proton.message.Message;
import org.jboss.logging.Logger;

import io.vertx.core.Context;
import io.vertx.core.Vertx;
import io.vertx.proton.ProtonClient;
import io.vertx.proton.ProtonClientOptions;
import io.vertx.proton.ProtonConnection;
import io.vertx.proton.ProtonQoS;
import io.vertx.proton.ProtonSender;
import io.walhook.config.AmqpUrl;
import io.walhook.routing.Destination;

/**
 * One AMQP 1.0 connection to {@code WALHOOK_AMQP_URL}, shared by every AMQP subscription: each
 * event one durable message, its id the event id, sent to the address it resolved to through the
 * broker's anonymous relay where the broker offers one, else through a sender per address.
 *
 * <p>The settlement is the outcome: {@code accepted} is delivered; {@code rejected},
 * {@code released}, {@code modified}, a detached link, a lost connection or no settlement within
 * the request timeout are retried (and parked) by the dispatcher like a failing webhook. The
 * connection is opened on the first send and again after a loss, at the pace of those retries.
 *
 * <p>Built on vertx-proton, the layer under SmallRye's AMQP connector and the Vert.x AMQP client:
 * their channels are bound to fixed addresses and report only accepted-or-not, while walhook
 * resolves an address per event and names the broker's outcome in its logs and dead letters.
 * Every proton call runs on one Vert.x event-loop context; a send completes a future with its outcome.
 */
public final class AmqpClient implements AutoCloseable {

    private static final Logger LOG = Logger.getLogger(AmqpClient.class);
    private static final Symbol ANONYMOUS_RELAY = Symbol.valueOf("ANONYMOUS-RELAY");
    /** CloudEvents AMQP binding: binary-mode attributes are application properties with this prefix. */
    static final String CLOUDEVENTS_PREFIX = "cloudEvents:";

    private record Waiting(Runnable send, List<CompletableFuture<Transport.Attempt>> outcomes) {
    }

    private final Vertx vertx;
    private final Context context;
    private final AmqpUrl url;
    /** The container-id this client opens its connections with: walhook-, then a random UUID, its own. */
    private final String container = "walhook-" + java.util.UUID.randomUUID();
    private final Duration timeout;

    // touched on the event-loop context only
    private ProtonConnection connection;
    private boolean connecting;
    /** Counts connection attempts: the callbacks of one given up are ignored. */
    private long attempts;
    private boolean anonymousRelay;
    private String lastProblem;
    /**
     * After a connection attempt failed, none is made before this (System.nanoTime): the messages
     * sent meanwhile fail at once with its problem. Each lane probing a broker that is down asked for
     * a connection of its own: a thousand AMQP subscriptions made two hundred attempts a second.
     */
    private long connectAgainAt = System.nanoTime();
    private long connectBackoffNanos = CONNECT_BACKOFF_MIN.toNanos();
    /** A connection attempt is set for when {@link #connectAgainAt} comes (a message failed at once meanwhile). */
    private boolean reconnectDue;
    /** Counts {@link #close}s: an attempt set before one is not made. */
    private long closes;
    /** The wait after a failed connection attempt: doubled after each that fails, up to {@link #CONNECT_BACKOFF_MAX}. */
    static final Duration CONNECT_BACKOFF_MIN = Duration.ofMillis(250);
    static final Duration CONNECT_BACKOFF_MAX = Duration.ofSeconds(5);
    private final List<Waiting> waiting = new ArrayList<>();
    private final Map<String, ProtonSender> senders = new HashMap<>();
    private final Map<ProtonSender, Set<CompletableFuture<Transport.Attempt>>> unsettled = new HashMap<>();
    /** When each link last had a message settled (System.nanoTime). */
    private final Map<ProtonSender, Long> lastSettled = new HashMap<>();
    /**
     * Per link, messages waiting for the broker's credit, in order: sent as credit comes, skipped if
     * given up on meanwhile (their timeout, a deleted subscription). Handed to the AMQP library
     * without credit, a message would be buffered there and sent whenever credit came, long after
     * walhook counted it failed and retried it.
     */
    private final Map<ProtonSender, java.util.ArrayDeque<Held>> held = new HashMap<>();

    /** A message waiting for credit on its link. */
    private record Held(Message message, Transport.Request request, CompletableFuture<Transport.Attempt> outcome) {
    }

    public AmqpClient(Vertx vertx, AmqpUrl url, Duration timeout) {
        this(vertx, url, timeout, SILENT_SOCKET);
    }

    /** {@code silentSocket}: how long a socket that neither reads nor writes is kept ({@link #SILENT_SOCKET}). */
    AmqpClient(Vertx vertx, AmqpUrl url, Duration timeout, Duration silentSocket) {
        this.vertx = vertx;
        this.context = vertx.getOrCreateContext();
        this.url = url;
        this.timeout = timeout;
        this.silentSocket = silentSocket;
    }

    /**
     * A socket with nothing read or written for this long is closed: one whose broker never finished
     * its SASL exchange (given up at the connection deadline, the client gives walhook no handle on
     * it, and each such attempt left a socket open for good). An open connection hears the broker's
     * heartbeats (asked for every 10 s) well within it.
     */
    static final Duration SILENT_SOCKET = Duration.ofSeconds(30);
    private final Duration silentSocket;

    /** The transport of one AMQP subscription. */
    public Transport transport(Destination.Amqp destination) {
        return new Transport() {
            @Override
            public CompletableFuture<Attempt> send(Request request) {
                return AmqpClient.this.send(request);
            }

            @Override
            public String toString() {
                return url + " address " + destination.address();
            }
        };
    }

    /**
     * Sends the message (credit permitting); the future completes with its settlement: delivered
     * when the broker accepted it, else the outcome, or a retry after the timeout.
     */
    CompletableFuture<Transport.Attempt> send(Transport.Request request) {
        CompletableFuture<Transport.Attempt> outcome = new CompletableFuture<>();
        context.runOnContext(v -> {
            long sent = System.nanoTime();
            long timer = vertx.setTimer(timeout.toMillis(), late -> {
                if (outcome.complete(Transport.Attempt.retry("the broker gave no outcome within " + timeout))) {
                    unanswered(outcome, sent);
                }
            });
            outcome.whenComplete((a, e) -> {
                vertx.cancelTimer(timer);
                if (Vertx.currentContext() != context) {
                    // given up by its lane (its subscription deleted): no longer kept waiting for credit
                    context.runOnContext(forget -> forget(outcome));
                }
            });
            whenConnected(new Waiting(() -> {
                if (!outcome.isDone()) {
                    sendNow(request, outcome);
                }
            }, List.of(outcome)));
        });
        return outcome;
    }

    private void whenConnected(Waiting send) {
        if (connection != null) {
            send.send().run();
            return;
        }
        long wait = connectAgainAt - System.nanoTime();
        if (!connecting && wait > 0) {
            String problem = lastProblem != null ? lastProblem : "the AMQP broker at " + url + " is not connected";
            send.outcomes().forEach(f -> f.complete(Transport.Attempt.retry(problem)));
            if (!reconnectDue) {
                // connected again when the wait ends, whoever sends next: the lane that sent this one probes again
                // only at its own pace (up to the parked retry interval), which the wait would add to
                reconnectDue = true;
                long closedBefore = closes;
                vertx.setTimer(Math.max(1, TimeUnit.NANOSECONDS.toMillis(wait)), due -> {
                    if (closes != closedBefore) {
                        return; // closed since: a send after the close connects on its own
                    }
                    reconnectDue = false;
                    if (connection == null && !connecting) {
                        connect();
                    }
                });
            }
            return;
        }
        waiting.add(send);
        if (!connecting) {
            connect();
        }
    }

    private void connect() {
        connecting = true;
        long attempt = ++attempts;
        int deadline = (int) Math.min(timeout.toMillis(), 10_000);
        ProtonConnection[] pending = new ProtonConnection[1];
        // a broker (or a load balancer before it) that takes the connection and never opens it would otherwise
        // leave walhook connecting for good: every message timing out, none connecting again
        vertx.setTimer(deadline, late -> {
            if (attempts == attempt && connecting && connection == null) {
                attempts++; // what this attempt still says is not heard
                failWaiting("the broker at " + url + " took the connection but did not open it within " + deadline
                        + " ms");
                if (pending[0] != null) {
                    pending[0].disconnect();
                }
            }
        });
        ProtonClientOptions options = new ProtonClientOptions()
                .setConnectTimeout(deadline)
                .setHeartbeat(10_000)
                .setIdleTimeout((int) silentSocket.toMillis()).setIdleTimeoutUnit(java.util.concurrent.TimeUnit.MILLISECONDS);
        if (url.tls()) {
            options.setSsl(true).setHostnameVerificationAlgorithm("HTTPS");
        }
        if (url.user() == null) {
            options.addEnabledSaslMechanism("ANONYMOUS");
        }
        try {
            ProtonClient.create(vertx).connect(options, url.host(), url.port(), url.user(), url.password(), connected -> {
                if (attempts != attempt) {
                    if (connected.succeeded()) {
                        connected.result().disconnect(); // given up already
                    }
                    return;
                }
                if (connected.failed()) {
                    failWaiting("cannot connect to " + url + ": " + connected.cause().getMessage());
                    return;
                }
                ProtonConnection opening = connected.result();
                pending[0] = opening;
                // one of its own: a broker may take one connection per container-id (ActiveMQ Classic's client id),
                // and another instance's client (a standby's test-fire, another deployment) must not shut this one out
                opening.setContainer(container);
                opening.openHandler(opened -> {
                    if (attempts != attempt) {
                        opening.disconnect(); // opened after it was given up
                        return;
                    }
                    if (opened.failed()) {
                        failWaiting("the broker at " + url + " refused the connection: " + opened.cause().getMessage());
                        opening.disconnect();
                        return;
                    }
                    opened(opening);
                });
                opening.closeHandler(closed -> {
                    if (attempts == attempt || connection == opening) {
                        lost(opening, "closed by the broker" + condition(opening.getRemoteCondition()));
                    }
                });
                opening.disconnectHandler(gone -> {
                    if (attempts == attempt || connection == opening) {
                        lost(opening, "connection lost");
                    }
                });
                opening.open();
            });
        } catch (RuntimeException e) {
            failWaiting("cannot connect to " + url + ": " + e.getMessage()); // Vert.x closing, say: not left connecting
        }
    }

    private void opened(ProtonConnection opened) {
        connection = opened;
        connecting = false;
        connectBackoffNanos = CONNECT_BACKOFF_MIN.toNanos();
        Symbol[] offered = opened.getRemoteOfferedCapabilities();
        anonymousRelay = offered != null && List.of(offered).contains(ANONYMOUS_RELAY);
        LOG.infof("connected to AMQP broker %s (%s)", url,
                anonymousRelay ? "anonymous relay" : "no anonymous relay: a sender per address");
        lastProblem = null;
        List<Waiting> ready = new ArrayList<>(waiting);
        waiting.clear();
        ready.forEach(w -> w.send().run());
    }

    /**
     * Every problem text below, the broker's own words and the AMQP client's included (a broker may
     * name the user it refused), goes through {@link AmqpUrl#redact} before it is logged or
     * becomes an attempt's problem (/status, dead letters).
     */
    private void failWaiting(String text) {
        String problem = Transport.Attempt.shown(url.redact(text));
        connecting = false;
        connectAgainAt = System.nanoTime() + connectBackoffNanos;
        connectBackoffNanos = Math.min(connectBackoffNanos * 2, CONNECT_BACKOFF_MAX.toNanos());
        if (!problem.equals(lastProblem)) {
            LOG.warn(problem);
            lastProblem = problem;
        }
        List<Waiting> failed = new ArrayList<>(waiting);
        waiting.clear();
        failed.forEach(w -> w.outcomes().forEach(f -> f.complete(Transport.Attempt.retry(problem))));
    }

    /** The connection is gone: every message not yet settled on it is retried. */
    private void lost(ProtonConnection which, String text) {
        String problem = Transport.Attempt.shown(url.redact(text));
        if (connection != which) {
            if (connecting && connection == null) {
                failWaiting(problem);
            }
            return;
        }
        connection = null;
        LOG.warnf("AMQP broker %s: %s; unsettled messages will be sent again", url, problem);
        List<CompletableFuture<Transport.Attempt>> pending = new ArrayList<>();
        unsettled.values().forEach(pending::addAll);
        unsettled.clear();
        lastSettled.clear();
        held.clear();
        senders.clear();
        which.disconnect();
        pending.forEach(f -> f.complete(Transport.Attempt.retry(problem)));
    }

    private void sendNow(Transport.Request request, CompletableFuture<Transport.Attempt> outcome) {
        ProtonSender sender = sender(request.address());
        Message message = Message.Factory.create();
        message.setMessageId(request.id());
        message.setDurable(true);
        message.setContentType(request.contentType());
        if (anonymousRelay) {
            message.setAddress(request.address());
        }
        Map<String, Object> properties = applicationProperties(request.headers());
        if (!properties.isEmpty()) {
            message.setApplicationProperties(new ApplicationProperties(properties));
        }
        message.setBody(new Data(new Binary(request.body())));
        // under way from now: a detached link or a lost connection retries it, sent or waiting for credit
        unsettled.computeIfAbsent(sender, s -> new HashSet<>()).add(outcome);
        held.computeIfAbsent(sender, s -> new java.util.ArrayDeque<>()).add(new Held(message, request, outcome));
        sendHeld(sender);
    }

    /** A message given up on: out of its link's waiting messages, if still there, and of those under way. */
    private void forget(CompletableFuture<Transport.Attempt> outcome) {
        for (Map.Entry<ProtonSender, java.util.ArrayDeque<Held>> link : held.entrySet()) {
            if (link.getValue().removeIf(h -> h.outcome() == outcome)) {
                Set<CompletableFuture<Transport.Attempt>> pending = unsettled.get(link.getKey());
                if (pending != null) {
                    pending.remove(outcome);
                }
                return;
            }
        }
    }

    /** Sends the link's waiting messages its credit allows, in order, skipping those given up on. */
    private void sendHeld(ProtonSender sender) {
        java.util.ArrayDeque<Held> waiting = held.get(sender);
        while (waiting != null && !waiting.isEmpty() && !sender.sendQueueFull()) {
            Held next = waiting.poll();
            if (next.outcome().isDone()) {
                Set<CompletableFuture<Transport.Attempt>> pending = unsettled.get(sender);
                if (pending != null) {
                    pending.remove(next.outcome()); // given up on: never sent
                }
            } else {
                transmit(sender, next.message(), next.request(), next.outcome());
            }
        }
    }

    private void transmit(ProtonSender sender, Message message, Transport.Request request,
            CompletableFuture<Transport.Attempt> outcome) {
        Set<CompletableFuture<Transport.Attempt>> pending = unsettled.computeIfAbsent(sender, s -> new HashSet<>());
        // with credit, the broker has attached the link and said what it takes
        String tooLarge = tooLarge(sender, message, request);
        if (tooLarge != null) {
            pending.remove(outcome);
            outcome.complete(Transport.Attempt.retry(url.redact(tooLarge)));
            return;
        }
        sender.send(message, delivery -> {
            if (!delivery.remotelySettled()
                    && !(delivery.getRemoteState() instanceof org.apache.qpid.proton.amqp.messaging.Outcome)) {
                return; // not an outcome yet (Received: so much of it arrived): the broker's next update has it
            }
            pending.remove(outcome);
            lastSettled.replace(sender, System.nanoTime()); // a sender closed since is not kept for it
            outcome.complete(outcome(delivery.getRemoteState(), url::redact));
        });
    }

    /**
     * Why the message is not sent on this link: larger than the most the broker said the link takes
     * (known once it is attached); null when it may be sent. Sent, it made the broker detach the
     * link (amqp:link:message-size-exceeded), failing every other message under way on it, of other
     * subscriptions too under the anonymous relay, again at each retry.
     */
    private String tooLarge(ProtonSender sender, Message message, Transport.Request request) {
        org.apache.qpid.proton.amqp.UnsignedLong limit = sender.getRemoteMaxMessageSize();
        long max = limit == null ? 0 : limit.longValue(); // 0: no limit; above Long.MAX_VALUE: none that matters
        if (max <= 0 || request.body().length + ENVELOPE_BYTES < max) {
            return null;
        }
        int size = message.encode(new org.apache.qpid.proton.codec.DroppingWritableBuffer());
        return size <= max ? null : "the message is " + size + " bytes, more than the " + max + " the broker takes on"
                + " the link to " + (anonymousRelay ? "its anonymous relay" : request.address());
    }

    /** More than the properties and headers around a body take once encoded. */
    private static final int ENVELOPE_BYTES = 64 * 1024;

    /** The anonymous relay's sender, or the address's own; opened on first use, dropped when the broker detaches it. */
    private ProtonSender sender(String address) {
        String key = anonymousRelay ? "" : address;
        ProtonSender existing = senders.get(key);
        if (existing != null) {
            return existing;
        }
        ProtonSender sender = connection.createSender(anonymousRelay ? null : address);
        sender.setQoS(ProtonQoS.AT_LEAST_ONCE).setAutoSettle(true);
        sender.closeHandler(closed -> detached(key, sender));
        sender.detachHandler(detached -> detached(key, sender));
        sender.sendQueueDrainHandler(credited -> sendHeld(sender));
        sender.open();
        senders.put(key, sender);
        // a time before any message sent on it, the one it is opened for included (its time taken before this): nothing
        // settled since one was
        lastSettled.put(sender, System.nanoTime() - TimeUnit.DAYS.toNanos(1));
        return sender;
    }

    /**
     * A message the broker gave no outcome in time, retried. If its link settled nothing since it
     * was sent (a broker holding back credit on its address, say), that link is closed, what else
     * waits on it retried, and the next message to its address opens it again. The connection and
     * the other addresses' links stay: one address that stalls does not fail the messages of every
     * other subscription (a connection that is gone is noticed by its heartbeats).
     */
    private void unanswered(CompletableFuture<Transport.Attempt> outcome, long sent) {
        for (Map.Entry<ProtonSender, Set<CompletableFuture<Transport.Attempt>>> link : unsettled.entrySet()) {
            if (link.getValue().remove(outcome)) {
                ProtonSender sender = link.getKey();
                java.util.ArrayDeque<Held> waiting = held.get(sender);
                if (waiting != null) {
                    waiting.removeIf(h -> h.outcome() == outcome); // still waiting for credit: never sent
                }
                if (lastSettled.getOrDefault(sender, sent) - sent <= 0) {
                    String key = senders.entrySet().stream().filter(e -> e.getValue() == sender).map(Map.Entry::getKey)
                            .findFirst().orElse(null);
                    if (key != null) {
                        senders.remove(key, sender);
                    }
                    Set<CompletableFuture<Transport.Attempt>> pending = unsettled.remove(sender);
                    lastSettled.remove(sender);
                    held.remove(sender);
                    String problem = "the broker gave no outcome within " + timeout + " on the link to "
                            + (key == null || key.isEmpty() ? "its anonymous relay" : key) + "; opening it again";
                    List.copyOf(pending).forEach(f -> f.complete(Transport.Attempt.retry(url.redact(problem))));
                    sender.close();
                }
                return;
            }
        }
    }

    private void detached(String key, ProtonSender sender) {
        senders.remove(key, sender);
        lastSettled.remove(sender);
        held.remove(sender);
        String problem = url.redact("the broker detached the link to " + (key.isEmpty() ? "its anonymous relay" : key)
                + condition(sender.getRemoteCondition()));
        Set<CompletableFuture<Transport.Attempt>> pending = unsettled.remove(sender);
        if (pending != null) {
            List.copyOf(pending).forEach(f -> f.complete(Transport.Attempt.retry(problem)));
        }
        sender.close();
    }

    private static final Transport.Attempt ACCEPTED = new Transport.Attempt(Transport.Outcome.DELIVERED,
            java.util.Optional.empty(), "accepted");

    static Transport.Attempt outcome(DeliveryState state) {
        return outcome(state, text -> text);
    }

    /**
     * The attempt a settlement means; {@code redact} takes the destination's credentials out of the
     * broker's words before the problem is cut to its length (cut first, a credential across the
     * cut would stay in part).
     */
    static Transport.Attempt outcome(DeliveryState state, java.util.function.UnaryOperator<String> redact) {
        if (state instanceof Accepted) {
            return ACCEPTED;
        }
        if (state instanceof Rejected rejected) {
            return Transport.Attempt.retry(redact.apply("rejected" + condition(rejected.getError())));
        }
        if (state instanceof Released) {
            return Transport.Attempt.retry("released");
        }
        if (state instanceof Modified modified) {
            return Transport.Attempt.retry("modified" + (Boolean.TRUE.equals(modified.getUndeliverableHere())
                    ? " (undeliverable here)" : ""));
        }
        return Transport.Attempt.retry(redact.apply("settled without an outcome (" + state + ")"));
    }

    /**
     * The format's headers as AMQP application properties: the binary CloudEvents headers
     * ({@code ce-*}, percent-encoded for HTTP) become {@code cloudEvents:*} with their plain values.
     */
    static Map<String, Object> applicationProperties(Map<String, String> headers) {
        Map<String, Object> properties = new LinkedHashMap<>();
        headers.forEach((name, value) -> {
            if (name.startsWith("ce-")) {
                properties.put(CLOUDEVENTS_PREFIX + name.substring(3),
                        URLDecoder.decode(value.replace("+", "%2B"), StandardCharsets.UTF_8));
            } else {
                properties.put(name, value);
            }
        });
        return properties;
    }

    private static String condition(ErrorCondition error) {
        if (error == null || error.getCondition() == null) {
            return "";
        }
        return ": " + error.getCondition() + (error.getDescription() == null ? "" : " " + error.getDescription());
    }

    @Override
    public void close() {
        CompletableFuture<Void> closed = new CompletableFuture<>();
        context.runOnContext(v -> {
            closes++;
            reconnectDue = false;
            ProtonConnection open = connection;
            connection = null;
            senders.clear(); // a send after the close opens a connection of its own, and links on it
            lastSettled.clear();
            if (open != null) {
                open.close();
                open.disconnect();
            }
            closed.complete(null);
        });
        try {
            closed.get(5, TimeUnit.SECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (ExecutionException | TimeoutException e) {
            LOG.debugf("closing the AMQP connection: %s", e);
        }
    }
}
