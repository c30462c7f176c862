package io.walhook.api;

import java.net.InetAddress;
import java.net.URI;
import java.net.UnknownHostException;
import java.nio.charset.StandardCharsets;
import java.sql.SQLException;
import java.util.Optional;
import java.util.UUID;

import jakarta.inject.Inject;
import jakarta.ws.rs.Consumes;
import jakarta.ws.rs.DELETE;
import jakarta.ws.rs.GET;
import jakarta.ws.rs.HeaderParam;
import jakarta.ws.rs.POST;
import jakarta.ws.rs.PUT;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.PathParam;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.core.HttpHeaders;
import jakarta.ws.rs.core.MediaType;

import org.jboss.resteasy.reactive.RestResponse;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;

import io.agroal.api.AgroalDataSource;
import io.smallrye.common.annotation.Blocking;
import io.walhook.config.WalhookConfig;
import io.walhook.delivery.ParkedEventStore;
import io.walhook.routing.Destination;
import io.walhook.routing.Subscription;
import io.walhook.routing.SubscriptionJson;
import io.walhook.routing.SubscriptionException;
import io.walhook.routing.SubscriptionStore;
import io.walhook.pipeline.ReplicationSource;

/**
 * {@code /subscriptions}: list, read, create, replace and delete subscriptions (openapi.yaml).
 * Configured subscriptions are listed read-only; {@link BearerTokenFilter} checks every call's
 * token; secrets and header values are never returned.
 */
@Path("/subscriptions")
@Produces(MediaType.APPLICATION_JSON)
@Blocking
public class SubscriptionResource {

    /** Bodies are small: a hostile one is refused while it is read, not after. */
    private static final ObjectMapper JSON = new ObjectMapper();
    static {
        JSON.getFactory().setStreamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(20)
                .maxStringLength(20_000).maxNumberLength(30).build());
    }
    private static final String CONFIGURED = SubscriptionLookup.CONFIGURED;
    /** The largest page {@code GET /subscriptions?limit=} gives. */
    static final long MAX_PAGE = 1000;

    private final WalhookConfig config;
    private final SubscriptionStore store;
    private final ReplicationSource source;
    private final ParkedEventStore parked;
    private final SubscriptionLookup subscriptions;

    @Inject
    public SubscriptionResource(WalhookConfig config, AgroalDataSource dataSource, ReplicationSource source) {
        this.config = config;
        this.store = new SubscriptionStore(dataSource, config.stateSchema());
        this.source = source;
        this.parked = new ParkedEventStore(dataSource, config.stateSchema());
        this.subscriptions = new SubscriptionLookup(store, source);
    }

    /**
     * Configured subscriptions first, then stored ones oldest first. With {@code limit}, a page of
     * at most that many after the subscription {@code after} names (an id as listed), and a
     * {@code Link: <...>; rel="next"} header while more follow.
     */
    @GET
    public RestResponse<ArrayNode> list(@jakarta.ws.rs.core.Context io.vertx.core.http.HttpServerRequest request)
            throws SQLException {
        QueryParameters query = QueryParameters.parse(request.query(), java.util.Set.of("limit", "after"));
        Optional<Long> limit = query.number("limit", 1, MAX_PAGE);
        Optional<String> after = query.text("after").map(SubscriptionLookup::canonical);
        if (after.isPresent() && limit.isEmpty()) {
            throw new ApiProblem(400, "Bad Request", "after pages the list: give limit too", "after");
        }
        java.util.List<String> ids = new java.util.ArrayList<>();
        for (Subscription s : subscriptions.configured()) {
            ids.add(CONFIGURED + s.name());
        }
        java.util.List<SubscriptionStore.Stored> stored = store.list(source.registry().known());
        for (SubscriptionStore.Stored s : stored) {
            ids.add(s.id().toString());
        }
        int from = after.isPresent() ? ids.indexOf(after.get()) + 1 : 0;
        if (after.isPresent()) {
            if (from == 0) {
                throw new ApiProblem(400, "Bad Request", "after is '" + after.get() + "', which names no subscription"
                        + " (deleted while paging?): start again without it", "after");
            }
        }
        int to = limit.map(l -> (int) Math.min(ids.size(), from + l)).orElse(ids.size());
        ArrayNode list = JSON.createArrayNode();
        java.util.List<Subscription> configured = subscriptions.configured();
        for (int i = from; i < to; i++) {
            if (i < configured.size()) {
                list.add(view(ids.get(i), configured.get(i), false));
            } else {
                SubscriptionStore.Stored s = stored.get(i - configured.size());
                list.add(view(ids.get(i), s.subscription(), s.paused()));
            }
        }
        RestResponse.ResponseBuilder<ArrayNode> response = RestResponse.ResponseBuilder.ok(list);
        if (limit.isPresent() && to < ids.size()) {
            response.header("Link", "</subscriptions?limit=" + limit.get() + "&after="
                    + java.net.URLEncoder.encode(ids.get(to - 1), StandardCharsets.UTF_8) + ">; rel=\"next\"");
        }
        return response.build();
    }

    @GET
    @Path("{id}")
    public ObjectNode read(@PathParam("id") String given) throws SQLException {
        String id = SubscriptionLookup.canonical(given);
        Optional<Subscription> configured = subscriptions.configured(id);
        if (configured.isPresent()) {
            return view(id, configured.get(), false);
        }
        SubscriptionStore.Stored stored = store.find(SubscriptionLookup.uuid(id)).orElseThrow(() -> SubscriptionLookup.notFound(id));
        return view(id, stored.subscription(), stored.paused());
    }

    @POST
    @Consumes(MediaType.WILDCARD)
    public RestResponse<ObjectNode> create(@HeaderParam(HttpHeaders.CONTENT_TYPE) String contentType, byte[] body)
            throws SQLException {
        JsonNode json = parse(contentType, body);
        Subscription subscription = validate(json, null);
        UUID id = store.insert(json);
        return RestResponse.ResponseBuilder.<ObjectNode>created(URI.create("/subscriptions/" + id))
                .entity(view(id.toString(), subscription, false)).build();
    }

    @PUT
    @Path("{id}")
    @Consumes(MediaType.WILDCARD)
    public ObjectNode replace(@HeaderParam(HttpHeaders.CONTENT_TYPE) String contentType, @PathParam("id") String given,
            byte[] body) throws SQLException {
        String id = SubscriptionLookup.canonical(given);
        readOnly(id);
        UUID uuid = SubscriptionLookup.uuid(id);
        store.find(uuid).orElseThrow(() -> SubscriptionLookup.notFound(id));
        JsonNode json = parse(contentType, body);
        Subscription subscription = validate(json, uuid);
        if (!store.replace(uuid, json)) {
            throw SubscriptionLookup.notFound(id);
        }
        return view(id, subscription, store.find(uuid).map(SubscriptionStore.Stored::paused).orElse(false));
    }

    @POST
    @Path("{id}/pause")
    public ObjectNode pause(@PathParam("id") String id) throws SQLException {
        return setPaused(SubscriptionLookup.canonical(id), true);
    }

    @POST
    @Path("{id}/resume")
    public ObjectNode resume(@PathParam("id") String id) throws SQLException {
        return setPaused(SubscriptionLookup.canonical(id), false);
    }

    /** Paused, a subscription's events are parked in order and acknowledged; resumed, they are delivered. */
    private ObjectNode setPaused(String id, boolean paused) throws SQLException {
        readOnly(id);
        UUID uuid = SubscriptionLookup.uuid(id);
        if (!store.setPaused(uuid, paused)) {
            throw SubscriptionLookup.notFound(id);
        }
        SubscriptionStore.Stored stored = store.find(uuid).orElseThrow(() -> SubscriptionLookup.notFound(id));
        return view(id, stored.subscription(), stored.paused());
    }

    /**
     * Sends one signed test event ({@code "op": "test"}) to the subscription's destination and
     * reports the outcome; nothing is retried or recorded.
     */
    @POST
    @Path("{id}/test")
    public ObjectNode testFire(@PathParam("id") String id) throws SQLException {
        Subscription subscription = subscriptions.inForce(id);
        String name = subscription.name();
        String eventId = "test_" + UUID.randomUUID();
        ObjectNode event = JSON.createObjectNode();
        event.put("id", eventId);
        event.put("op", "test");
        event.put("subscription", name);
        event.put("time", java.time.Instant.now().toString());
        byte[] body = event.toString().getBytes(StandardCharsets.UTF_8);
        if (subscription.destination() instanceof Destination.Amqp amqp) {
            return testFireAmqp(subscription, amqp, eventId, body);
        }
        ObjectNode outcome = JSON.createObjectNode();
        outcome.put("event_id", eventId);
        long start = System.nanoTime();
        try {
            // the transport delivery uses, but for the status code: one attempt, nothing retried or recorded
            // an API-created subscription checks the address it connects to, as its deliveries do
            boolean publicOnly = !subscription.readOnly() && !config.allowPrivateDestinations();
            int status = io.walhook.delivery.WebhookClient.await(source.webhooks().postAsync(
                    (Destination.Webhook) subscription.destination(), eventId, body, "application/json",
                    java.util.Map.of(), java.time.Instant.now().getEpochSecond(), config.delivery().requestTimeout(),
                    publicOnly), config.delivery().requestTimeout()).status();
            outcome.put("delivered", status >= 200 && status < 300);
            outcome.put("status", status);
        } catch (java.io.IOException e) {
            outcome.put("delivered", false);
            outcome.put("error", e.getMessage());
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ApiProblem(503, "Service Unavailable", "interrupted while test-firing", null);
        }
        outcome.put("latency_ms", (System.nanoTime() - start) / 1_000_000);
        return outcome;
    }

    /** One message to the address the test event resolves to ({@code {schema}} and {@code {table}} empty, {@code {op}} test). */
    private ObjectNode testFireAmqp(Subscription subscription, Destination.Amqp amqp, String eventId, byte[] body) {
        String address = amqp.address().replace("{schema}", "").replace("{table}", "").replace("{op}", "test");
        ObjectNode outcome = JSON.createObjectNode();
        outcome.put("event_id", eventId);
        long start = System.nanoTime();
        try {
            io.walhook.delivery.Transport.Attempt attempt = source.transport(subscription)
                    .attempt(new io.walhook.delivery.Transport.Request(eventId, body, "application/json", java.util.Map.of(),
                            address), config.delivery().requestTimeout());
            outcome.put("delivered", attempt.outcome() == io.walhook.delivery.Transport.Outcome.DELIVERED);
            if (attempt.outcome() != io.walhook.delivery.Transport.Outcome.DELIVERED) {
                outcome.put("error", attempt.problem());
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new ApiProblem(503, "Service Unavailable", "interrupted while test-firing", null);
        }
        outcome.put("latency_ms", (System.nanoTime() - start) / 1_000_000);
        return outcome;
    }

    /**
     * Deletes the subscription: its delivery stops (at once on this instance, within a second on
     * the active one), and its durable queue is discarded; the response says how many events were.
     */
    @DELETE
    @Path("{id}")
    public ObjectNode delete(@PathParam("id") String id) throws SQLException {
        readOnly(id);
        UUID uuid = SubscriptionLookup.uuid(id);
        if (!store.delete(uuid)) {
            throw SubscriptionLookup.notFound(id);
        }
        // counted before the lane is told: it drops what it writes after this itself
        int discarded = parked.deleteAll(uuid.toString());
        source.deleted(uuid.toString());
        ObjectNode body = JSON.createObjectNode();
        body.put("id", uuid.toString());
        body.put("discarded_events", discarded);
        return body;
    }

    private void readOnly(String id) {
        if (id.startsWith(CONFIGURED)) {
            if (subscriptions.configured(id).isEmpty()) {
                throw SubscriptionLookup.notFound(id);
            }
            throw new ApiProblem(409, "Conflict", "subscription " + id.substring(CONFIGURED.length())
                    + " is defined by configuration (WALHOOK_SUBSCRIPTIONS_*) and is read-only here; change its"
                    + " environment variables instead", null);
        }
    }

    /**
     * The body as one JSON value: sent as application/json, with nothing after the value (a second
     * document or trailing garbage is not ignored), and no null anywhere, since no field of a
     * subscription takes one (leaving a field out is how to not set it).
     */
    private static JsonNode parse(String contentType, byte[] body) {
        return parse(contentType, body, "subscription");
    }

    /** As {@link #parse(String, byte[])}, for a body that is a {@code what} object. */
    static JsonNode parse(String contentType, byte[] body, String what) {
        if (!isJson(contentType)) {
            throw new ApiProblem(415, "Unsupported Media Type", "send the " + what + " as application/json"
                    + " (Content-Type: application/json), not " + (contentType == null ? "without a Content-Type"
                    : "as " + contentType), null);
        }
        JsonNode json;
        try (JsonParser parser = JSON.createParser(body)) {
            json = JSON.readTree(parser);
            if (json == null || json.isMissingNode()) {
                throw new ApiProblem(400, "Bad Request", "the body is empty; send a " + what + " object", "");
            }
            long end = parser.currentLocation().getByteOffset();
            if (goesOn(parser)) {
                throw new ApiProblem(400, "Bad Request", "the body goes on after its JSON value, from byte " + end
                        + ": send one " + what + " object and nothing after it", "");
            }
        } catch (JsonProcessingException e) {
            throw new ApiProblem(400, "Bad Request", "the body is not valid JSON: " + e.getOriginalMessage(), "");
        } catch (java.io.IOException | IllegalArgumentException e) {
            throw new ApiProblem(400, "Bad Request", "the body cannot be read: " + e.getMessage(), "");
        }
        refuseNulls(json, "", what);
        return json;
    }

    /** application/json, parameters (a charset) allowed; not a wildcard, another JSON type, or none. */
    private static boolean isJson(String contentType) {
        if (contentType == null) {
            return false;
        }
        try {
            MediaType type = MediaType.valueOf(contentType.strip());
            return "application".equalsIgnoreCase(type.getType()) && "json".equalsIgnoreCase(type.getSubtype());
        } catch (IllegalArgumentException notAMediaType) {
            return false;
        }
    }

    /** Whether anything but white space follows the value the parser read. */
    private static boolean goesOn(JsonParser parser) throws java.io.IOException {
        try {
            return parser.nextToken() != null;
        } catch (JsonProcessingException garbage) {
            return true;
        }
    }

    private static void refuseNulls(JsonNode node, String pointer, String what) {
        if (node.isNull()) {
            throw new ApiProblem(400, "Bad Request", (pointer.isEmpty() ? "the body" : pointer) + " is null; no field"
                    + " of a " + what + " takes null: leave the field out instead", pointer);
        }
        if (node.isObject()) {
            for (var fields = node.fields(); fields.hasNext(); ) {
                var field = fields.next();
                refuseNulls(field.getValue(), pointer + "/" + field.getKey().replace("~", "~0").replace("/", "~1"), what);
            }
        } else if (node.isArray()) {
            for (int i = 0; i < node.size(); i++) {
                refuseNulls(node.get(i), pointer + "/" + i, what);
            }
        }
    }

    private Subscription validate(JsonNode json, UUID except) throws SQLException {
        Subscription subscription;
        try {
            subscription = SubscriptionJson.parse(json);
        } catch (SubscriptionException e) {
            throw new ApiProblem(400, "Bad Request", e.getMessage(), e.field());
        }
        if (subscription.destination() instanceof Destination.Amqp && config.amqpUrl().filter(u -> !u.isBlank()).isEmpty()) {
            throw new ApiProblem(400, "Bad Request", "/destination/type amqp needs a broker: walhook runs without"
                    + " WALHOOK_AMQP_URL", "/destination/type");
        }
        if (subscription.destination() instanceof Destination.Webhook webhook && !config.allowPrivateDestinations()) {
            checkPublic(webhook.url());
        }
        if (subscriptions.configured().stream().anyMatch(s -> s.name().equals(subscription.name()))
                || store.nameTaken(subscription.name(), except)) {
            throw new ApiProblem(409, "Conflict", "a subscription named " + subscription.name() + " exists already", "/name");
        }
        return subscription;
    }

    /** Refuses URLs that reach walhook's own network (SSRF) unless WALHOOK_ALLOW_PRIVATE_DESTINATIONS=true. */
    private static void checkPublic(URI url) {
        InetAddress[] addresses;
        try {
            addresses = InetAddress.getAllByName(url.getHost());
        } catch (UnknownHostException e) {
            throw new ApiProblem(400, "Bad Request", "/destination/url host " + url.getHost() + " does not resolve",
                    "/destination/url");
        }
        for (InetAddress address : addresses) {
            // the same policy every request of the subscription applies to the address it connects to
            java.util.Optional<String> refusal = io.walhook.delivery.DestinationPolicy.refusal(address);
            if (refusal.isPresent()) {
                throw new ApiProblem(400, "Bad Request", "/destination/url resolves to " + address.getHostAddress()
                        + ", " + refusal.get() + "; set WALHOOK_ALLOW_PRIVATE_DESTINATIONS=true to allow it",
                        "/destination/url");
            }
        }
    }

    /**
     * The subscription as the API shows it: the secret replaced by whether one is set, the headers
     * by their names, the URL without its query string.
     */
    private static ObjectNode view(String id, Subscription s, boolean paused) {
        ObjectNode view = JSON.createObjectNode();
        view.put("id", id);
        view.put("name", s.name());
        view.put("read_only", s.readOnly());
        view.put("paused", paused);
        ArrayNode tables = view.putArray("tables");
        s.tables().forEach(t -> tables.add(t.text()));
        ArrayNode operations = view.putArray("operations");
        s.operations().stream().sorted().forEach(o -> operations.add(o.wireName()));
        s.filter().ifPresent(f -> view.put("filter", f.expression()));
        ObjectNode destination = view.putObject("destination");
        if (s.destination() instanceof Destination.Webhook webhook) {
            destination.put("type", "webhook");
            // the query string and header values are credentials as often as the secret is: written, never shown
            destination.put("url", webhook.redactedUrl());
            destination.put("secret_set", !webhook.secrets().isEmpty());
            ArrayNode headers = destination.putArray("headers_set");
            webhook.headers().keySet().stream().sorted().forEach(headers::add);
        } else if (s.destination() instanceof Destination.Amqp amqp) {
            destination.put("type", "amqp");
            destination.put("address", amqp.address());
        }
        view.put("format", s.format().wireName());
        ObjectNode batch = view.putObject("batch");
        batch.put("max_events", s.batchMaxEvents());
        batch.put("max_wait_ms", s.batchMaxWaitMs());
        if (!s.projection().isAll()) {
            ObjectNode columns = view.putObject("columns");
            ArrayNode include = columns.putArray("include");
            s.projection().include().stream().sorted().forEach(include::add);
            ArrayNode exclude = columns.putArray("exclude");
            s.projection().exclude().stream().sorted().forEach(exclude::add);
        }
        if (!s.retry().isDefault()) {
            // the subscription's own settings, as given: what it leaves out follows WALHOOK_DELIVERY_*
            ObjectNode retry = view.putObject("retry");
            s.retry().maxAttempts().ifPresent(n -> retry.put("max_attempts", n));
            s.retry().maxBackoff().ifPresent(d -> retry.put("max_backoff_ms", d.toMillis()));
            s.retry().window().ifPresent(d -> retry.put("window_ms", d.toMillis()));
        }
        s.limits().maxInFlight().ifPresent(n -> view.put("max_in_flight", n));
        s.limits().rate().ifPresent(rate -> view.putObject("rate_limit").put("requests", rate.requests())
                .put("per", rate.period().wireName()));
        return view;
    }
}
