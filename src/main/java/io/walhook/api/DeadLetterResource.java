package io.walhook.api;

import java.nio.charset.StandardCharsets;
import java.sql.SQLException;
import java.util.List;
import java.util.Optional;
import java.util.Set;

import jakarta.inject.Inject;
import jakarta.ws.rs.DELETE;
import jakarta.ws.rs.GET;
import jakarta.ws.rs.POST;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.PathParam;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.core.Context;
import jakarta.ws.rs.core.MediaType;

import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import io.agroal.api.AgroalDataSource;
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

    private final SubscriptionLookup subscriptions;
    private final ReplicationSource source;
    private final ParkedEventStore parked;

    @Inject
    public DeadLetterResource(WalhookConfig config, AgroalDataSource dataSource, ReplicationSource source) {
        this.subscriptions = new SubscriptionLookup(new SubscriptionStore(dataSource, config.stateSchema()), source);
        this.source = source;
        this.parked = new ParkedEventStore(dataSource, config.stateSchema());
    }

    @GET
    public ObjectNode deadLetters(@PathParam("id") String id, @Context HttpServerRequest request) throws SQLException {
        QueryParameters query = QueryParameters.parse(request.query(), Set.of("after", "limit", "key"));
        long afterId = query.number("after", 0, Long.MAX_VALUE).orElse(0L);
        long pageSize = query.number("limit", 1, 1000).orElse(100L);
        Optional<String> rowKey = query.text("key").map(DeadLetterResource::rowKey);
        String subscriptionId = subscriptions.existingId(id);
        List<ParkedEventStore.Parked> page = parked.page(subscriptionId, afterId, (int) pageSize, rowKey);
        ObjectNode body = JSON.createObjectNode();
        ArrayNode items = body.putArray("items");
        for (ParkedEventStore.Parked p : page) {
            ObjectNode item = items.addObject();
            item.put("id", p.id());
            item.put("event_id", p.eventId());
            item.put("commit_lsn", p.commitLsn().toString());
            item.put("attempts", p.attempts());
            item.put("last_error", p.lastError());
            item.put("content_type", p.contentType());
            try {
                item.set("key", p.rowKey() == null ? null : JSON.readTree(p.rowKey()));
            } catch (java.io.IOException notJson) {
                item.putNull("key");
            }
            try {
                item.set("event", JSON.readTree(p.body()));
            } catch (java.io.IOException notJson) {
                item.put("event_base64", java.util.Base64.getEncoder().encodeToString(p.body()));
            }
        }
        if (page.size() == pageSize) {
            body.put("next", "/subscriptions/" + SubscriptionLookup.canonical(id) + "/dead-letters?after=" + page.get(page.size() - 1).id()
                    + "&limit=" + pageSize + rowKey.map(k -> "&key=" + java.net.URLEncoder.encode(k,
                            StandardCharsets.UTF_8)).orElse(""));
        }
        return body;
    }

    /** Delivers queued events now (they are delivered on their own too, at the destination's pace), oldest first. */
    @POST
    @Path("replay")
    public ObjectNode replay(@PathParam("id") String id, @Context HttpServerRequest request) throws SQLException {
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
        // the queue is delivered oldest first, so the named events go in their rows' order
        source.retryParkedNow(subscription);
        ObjectNode body = JSON.createObjectNode();
        body.put("replaying", replaying);
        return body;
    }

    /** Drops queued events for good: the ids given as {@code ?id=}, or every one of the subscription. */
    @DELETE
    public ObjectNode dropDeadLetters(@PathParam("id") String id, @Context HttpServerRequest request) throws SQLException {
        List<Long> ids = deadLetterIds(request);
        String subscriptionId = subscriptions.existingId(id);
        ObjectNode body = JSON.createObjectNode();
        body.put("deleted", ids == null ? parked.deleteAll(subscriptionId) : parked.deleteIds(subscriptionId, ids));
        return body;
    }

    /** A row key filter: a JSON object of the row's key columns, in the form the queue keeps it. */
    private static String rowKey(String text) {
        try {
            JsonNode parsed = JSON.readTree(text);
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
