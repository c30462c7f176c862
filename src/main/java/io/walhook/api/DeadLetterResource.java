package io.walhook.api;

import java.nio.charset.StandardCharsets;
import java.sql.SQLException;
import java.util.List;
import java.util.Optional;
import java.util.Set;

import jakarta.inject.Inject;
import jakarta.ws.rs.Consumes;
import jakarta.ws.rs.DELETE;
import jakarta.ws.rs.GET;
import jakarta.ws.rs.POST;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.PathParam;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.core.Context;
import jakarta.ws.rs.core.MediaType;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

import io.agroal.api.AgroalDataSource;
import io.quarkus.runtime.annotations.RegisterForReflection;
import io.smallrye.common.annotation.Blocking;
import io.vertx.core.http.HttpServerRequest;
import io.walhook.config.WalhookConfig;
import io.walhook.delivery.ParkedEventStore;
import io.walhook.routing.Subscription;
import io.walhook.routing.SubscriptionStore;
import io.walhook.pipeline.ReplicationSource;

/**
 * {@code /subscriptions/{id}/dead-letters}: a subscription's durable queue (the events its
 * destination has not taken yet), paged and filtered by row key; replay it now; drop events from it.
 */
@Path("/subscriptions/{id}/dead-letters")
@Produces(MediaType.APPLICATION_JSON)
@Blocking
public class DeadLetterResource {

    private static final ObjectMapper JSON = new ObjectMapper();
    /**
     * The event bodies a page holds at most (its first item comes whatever its size): a page of large
     * rows (and the JSON trees it is answered with) takes a bounded part of the heap the stream shares.
     */
    public static final long PAGE_BODY_BYTES = 4L << 20;

    private final SubscriptionLookup subscriptions;
    private final ReplicationSource source;
    private final ParkedEventStore parked;

    @Inject
    public DeadLetterResource(WalhookConfig config,
            @io.quarkus.agroal.DataSource(io.walhook.config.DatasourceConfigSourceFactory.API) AgroalDataSource dataSource,
            AgroalDataSource pipeline, ReplicationSource source) {
        this.subscriptions = new SubscriptionLookup(new SubscriptionStore(dataSource, config.stateSchema()), source);
        this.source = source;
        // a long count's session asked after on the pipeline's pool: a failover breaks the API's two connections together
        this.parked = new ParkedEventStore(dataSource, pipeline, config.stateSchema(), ParkedEventStore.Fence.NONE);
    }

    @GET
    public Page deadLetters(@PathParam("id") String id, @Context HttpServerRequest request) throws SQLException {
        QueryParameters query = QueryParameters.parse(request.query(), Set.of("after", "limit", "key"));
        long afterId = query.number("after", 0, Long.MAX_VALUE).orElse(0L);
        long pageSize = query.number("limit", 1, 1000).orElse(100L);
        Optional<String> rowKey = query.text("key").map(DeadLetterResource::rowKey);
        String subscriptionId = subscriptions.existingId(id);
        ParkedEventStore.Page found = parked.page(subscriptionId, afterId, (int) pageSize, rowKey, PAGE_BODY_BYTES);
        List<ParkedEventStore.Parked> page = found.rows();
        String next = !found.more() ? null : "/subscriptions/" + SubscriptionLookup.canonical(id)
                + "/dead-letters?after=" + page.get(page.size() - 1).id() + "&limit=" + pageSize
                + rowKey.map(k -> "&key=" + java.net.URLEncoder.encode(k, StandardCharsets.UTF_8)).orElse("");
        return new Page(page.stream().map(DeadLetterResource::deadLetter).toList(), next);
    }

    /** A page of dead letters, oldest first, and the link to the next while the page is full. */
    @RegisterForReflection
    public record Page(List<DeadLetter> items, String next) {
    }

    /**
     * One queued event: its queue id (for {@code ?id=} and {@code after}), the event as it will be
     * sent ({@code event}, or {@code event_base64} when the body is not JSON), its row's key, and
     * what its attempts met so far; {@code last_error} and {@code key} are null rather than absent.
     */
    @RegisterForReflection
    public record DeadLetter(long id, String eventId, String commitLsn, int attempts,
            @JsonInclude(JsonInclude.Include.ALWAYS) String lastError, String contentType,
            @JsonInclude(JsonInclude.Include.ALWAYS) JsonNode key, JsonNode event, String eventBase64) {
    }

    private static DeadLetter deadLetter(ParkedEventStore.Parked p) {
        JsonNode key = null;
        JsonNode event = null;
        try {
            key = p.rowKey() == null ? null : JSON.readTree(p.rowKey());
        } catch (java.io.IOException notJson) {
            // shown as null, like a change without a key
        }
        try {
            event = JSON.readTree(p.body());
        } catch (java.io.IOException notJson) {
            // shown as base64
        }
        // stored by an earlier walhook, the text may name the destination with a credential in its path
        String lastError = io.walhook.routing.Destination.Webhook.scrubbed(p.lastError());
        return new DeadLetter(p.id(), p.eventId(), p.commitLsn().toString(), p.attempts(), lastError, p.contentType(),
                key, event, event == null ? java.util.Base64.getEncoder().encodeToString(p.body()) : null);
    }

    /** Delivers queued events now (they are delivered on their own too, at the destination's pace), oldest first. */
    @POST
    @Path("replay")
    @Consumes(MediaType.WILDCARD)
    public Replaying replay(@PathParam("id") String id, @Context HttpServerRequest request, byte[] body)
            throws SQLException {
        NoBody.refuseAny(request, body);
        List<Long> ids = deadLetterIds(request);
        Subscription subscription = subscriptions.inForce(id);
        long replaying;
        if (ids == null) {
            replaying = parked.count(subscription.id());
        } else {
            java.util.Set<Long> missing = new java.util.TreeSet<>(ids);
            missing.removeAll(parked.existing(subscription.id(), ids));
            if (!missing.isEmpty()) {
                throw new ApiProblem(404, "Not Found", "no dead letters " + missing + " in subscription "
                        + subscription.name() + "; nothing was replayed", null);
            }
            replaying = new java.util.HashSet<>(ids).size();
        }
        // the queue is delivered oldest first, so the named events go in their rows' order; the active instance
        // acts on it, told through the database when it is another one
        parked.replay(subscription.id()); // first: its 410's record is cleared before a lane can meet a new 410
        source.retryParkedNow(subscription);
        return new Replaying(replaying);
    }

    /** How many queued events a replay delivers now. */
    @RegisterForReflection
    public record Replaying(long replaying) {
    }

    /** Drops queued events for good: the ids given as {@code ?id=}, or every one of the subscription. */
    @DELETE
    @Consumes(MediaType.WILDCARD)
    public Dropped dropDeadLetters(@PathParam("id") String id, @Context HttpServerRequest request, byte[] body)
            throws SQLException {
        NoBody.refuseAny(request, body);
        List<Long> ids = deadLetterIds(request);
        String subscriptionId = subscriptions.existingId(id);
        Dropped dropped = new Dropped(parked.drop(subscriptionId, ids)); // the active instance is told
        if (dropped.deleted() > 0) {
            source.recountParked(subscriptionId); // at once when this is the active instance
        }
        return dropped;
    }

    /** How many queued events were dropped for good. */
    @RegisterForReflection
    public record Dropped(int deleted) {
    }

    /** A row key filter: a JSON object of the row's key columns, in the form the queue keeps it. */
    private static String rowKey(String text) {
        try {
            // one JSON object and nothing after it ({"id":1}x was read as {"id":1}), each column once
            JsonNode parsed = JSON.reader().with(com.fasterxml.jackson.databind.DeserializationFeature.FAIL_ON_TRAILING_TOKENS)
                    .with(JsonParser.Feature.STRICT_DUPLICATE_DETECTION).readTree(text);
            if (parsed != null && parsed.isObject() && !parsed.isEmpty()) {
                return parsed.toString();
            }
        } catch (JsonProcessingException notJson) {
            // the same answer as for JSON that is no object
        }
        throw new ApiProblem(400, "Bad Request", "key must be a JSON object of a row's key columns, like {\"id\":42}",
                "key");
    }

    /** The dead letters {@code ?id=} names (ids start at 1); null when the parameter is absent, which means all. */
    private static List<Long> deadLetterIds(HttpServerRequest request) {
        return QueryParameters.parse(request.query(), Set.of("id")).numbers("id", 1, Long.MAX_VALUE).orElse(null);
    }
}
