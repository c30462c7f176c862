package io.walhook.api;

import java.net.InetAddress;
import java.net.URI;
import java.net.UnknownHostException;
import java.sql.SQLException;
import java.util.List;
import java.util.Optional;
import java.util.UUID;

import jakarta.inject.Inject;
import jakarta.ws.rs.Consumes;
import jakarta.ws.rs.DELETE;
import jakarta.ws.rs.GET;
import jakarta.ws.rs.HeaderParam;
import jakarta.ws.rs.PATCH;
import jakarta.ws.rs.POST;
import jakarta.ws.rs.PUT;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.PathParam;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.core.HttpHeaders;
import jakarta.ws.rs.core.MediaType;

import org.jboss.resteasy.reactive.RestResponse;

import com.fasterxml.jackson.databind.JsonNode;

import io.agroal.api.AgroalDataSource;
import io.quarkus.runtime.annotations.RegisterForReflection;
import io.smallrye.common.annotation.Blocking;
import io.vertx.core.http.HttpServerRequest;
import io.walhook.config.UrlAuthority;
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

    private static final org.jboss.logging.Logger LOG = org.jboss.logging.Logger.getLogger(SubscriptionResource.class);

    private static final String CONFIGURED = SubscriptionLookup.CONFIGURED;
    /** The largest page {@code GET /subscriptions?limit=} gives. */
    static final long MAX_PAGE = 1000;

    private final WalhookConfig config;
    private final SubscriptionStore store;
    private final ReplicationSource source;
    private final ParkedEventStore parked;
    private final SubscriptionLookup subscriptions;

    @Inject
    public SubscriptionResource(WalhookConfig config,
            @io.quarkus.agroal.DataSource(io.walhook.config.DatasourceConfigSourceFactory.API) AgroalDataSource dataSource,
            AgroalDataSource pipeline, ReplicationSource source) {
        this.config = config;
        this.store = new SubscriptionStore(dataSource, config.stateSchema());
        this.source = source;
        // a long count's session asked after on the pipeline's pool: a failover breaks the API's two connections together
        this.parked = new ParkedEventStore(dataSource, pipeline, config.stateSchema(), ParkedEventStore.Fence.NONE);
        this.subscriptions = new SubscriptionLookup(store, source);
    }

    /**
     * Configured subscriptions first, then stored ones oldest first. With {@code limit}, a page of
     * at most that many after the subscription {@code after} names (an id as listed), and a
     * {@code Link: <...>; rel="next"} header while more follow. The link gives the place of the
     * page's last one too ({@code after_created}): deleted before the next page is asked for (a
     * tenant leaving while a client pages through thousands), the list goes on from there, where
     * the next page was a 400 and the client had to start again.
     */
    @GET
    public RestResponse<List<SubscriptionView>> list(@jakarta.ws.rs.core.Context HttpServerRequest request)
            throws SQLException {
        QueryParameters query = QueryParameters.parse(request.query(), java.util.Set.of("limit", "after", "after_created"));
        Optional<Long> limit = query.number("limit", 1, MAX_PAGE);
        Optional<String> after = query.text("after").map(SubscriptionLookup::canonical);
        Optional<Long> afterCreated = query.number("after_created", 0, Long.MAX_VALUE);
        if (after.isPresent() && limit.isEmpty()) {
            throw new ApiProblem(400, "Bad Request", "after pages the list: give limit too", "after");
        }
        if (afterCreated.isPresent() && after.isEmpty()) {
            throw new ApiProblem(400, "Bad Request", "after_created goes with after, as the Link header gives them",
                    "after_created");
        }
        java.util.List<String> ids = new java.util.ArrayList<>();
        for (Subscription s : subscriptions.configured()) {
            ids.add(CONFIGURED + s.name());
        }
        java.util.List<SubscriptionStore.Written> listed = store.written();
        java.util.List<SubscriptionStore.Stored> stored = store.list(listed, source.registry().known());
        java.util.Map<java.util.UUID, Long> created = new java.util.HashMap<>();
        listed.forEach(w -> created.put(w.id(), w.created()));
        for (SubscriptionStore.Stored s : stored) {
            ids.add(s.id().toString());
        }
        int from = after.isPresent() ? ids.indexOf(after.get()) + 1 : 0;
        if (after.isPresent() && from == 0) {
            if (afterCreated.isEmpty() || after.get().startsWith(CONFIGURED)) {
                throw new ApiProblem(400, "Bad Request", "after is '" + after.get() + "', which names no subscription"
                        + " (deleted while paging? the Link header's next page goes on from where it was): start again"
                        + " without it", "after");
            }
            // deleted since its page: the list goes on from its place, the first created after it (by time, then id)
            from = ids.size();
            for (int i = 0; i < stored.size(); i++) {
                SubscriptionStore.Stored s = stored.get(i);
                long at = created.getOrDefault(s.id(), Long.MIN_VALUE);
                if (at > afterCreated.get() || at == afterCreated.get() && s.id().toString().compareTo(after.get()) > 0) {
                    from = subscriptions.configured().size() + i;
                    break;
                }
            }
        }
        int start = from;
        int to = limit.map(l -> (int) Math.min(ids.size(), start + l)).orElse(ids.size());
        List<SubscriptionView> list = new java.util.ArrayList<>();
        java.util.List<Subscription> configured = subscriptions.configured();
        for (int i = start; i < to; i++) {
            if (i < configured.size()) {
                list.add(SubscriptionView.of(ids.get(i), configured.get(i), false));
            } else {
                SubscriptionStore.Stored s = stored.get(i - configured.size());
                list.add(SubscriptionView.of(ids.get(i), s.subscription(), s.paused()));
            }
        }
        RestResponse.ResponseBuilder<List<SubscriptionView>> response = RestResponse.ResponseBuilder.ok(list);
        if (limit.isPresent() && to < ids.size()) {
            // with the place of the page's last one, so that the next page goes on from there if it is deleted meanwhile
            String last = ids.get(to - 1);
            String place = to - 1 < configured.size() ? ""
                    : "&after_created=" + created.getOrDefault(stored.get(to - 1 - configured.size()).id(), 0L);
            response.header("Link", "</subscriptions?limit=" + limit.get() + "&after="
                    + java.net.URLEncoder.encode(last, java.nio.charset.StandardCharsets.UTF_8) + place + ">; rel=\"next\"");
        }
        return response.build();
    }

    @GET
    @Path("{id}")
    public SubscriptionView read(@PathParam("id") String given) throws SQLException {
        String id = SubscriptionLookup.canonical(given);
        Optional<Subscription> configured = subscriptions.configured(id);
        if (configured.isPresent()) {
            return SubscriptionView.of(id, configured.get(), false);
        }
        SubscriptionStore.Stored stored = store.find(SubscriptionLookup.uuid(id)).orElseThrow(() -> SubscriptionLookup.notFound(id));
        return SubscriptionView.of(id, stored.subscription(), stored.paused());
    }

    @POST
    @Consumes(MediaType.WILDCARD)
    public RestResponse<SubscriptionView> create(@HeaderParam(HttpHeaders.CONTENT_TYPE) String contentType, byte[] body)
            throws SQLException {
        JsonNode json = JsonBody.parse(contentType, body, "subscription");
        Subscription subscription = validate(json, null);
        UUID id = store.insert(json);
        applyHere();
        return RestResponse.ResponseBuilder.<SubscriptionView>created(URI.create("/subscriptions/" + id))
                .entity(SubscriptionView.of(id.toString(), subscription, false)).build();
    }

    @PUT
    @Path("{id}")
    @Consumes(MediaType.WILDCARD)
    public SubscriptionView replace(@HeaderParam(HttpHeaders.CONTENT_TYPE) String contentType, @PathParam("id") String given,
            byte[] body) throws SQLException {
        String id = SubscriptionLookup.canonical(given);
        readOnly(id);
        UUID uuid = SubscriptionLookup.uuid(id);
        store.find(uuid).orElseThrow(() -> SubscriptionLookup.notFound(id));
        JsonNode json = JsonBody.parse(contentType, body, "subscription");
        Subscription subscription = validate(json, uuid);
        if (!store.replace(uuid, json)) {
            throw SubscriptionLookup.notFound(id);
        }
        applyHere();
        return SubscriptionView.of(id, subscription, store.find(uuid).map(SubscriptionStore.Stored::paused).orElse(false));
    }

    /** How often a patch is made again over a body other writes changed meanwhile before it gives up. */
    private static final int PATCH_ATTEMPTS = 50;

    /**
     * Changes what the JSON Merge Patch names (RFC 7396) and keeps the rest, secret, URL query and
     * header values included, which no view shows; applies as a PUT of the result does. Made over
     * the body as stored and written only if it is still that one: a concurrent write is never undone,
     * the patch is made again over it.
     */
    @PATCH
    @Path("{id}")
    @Consumes(MediaType.WILDCARD)
    public SubscriptionView patch(@HeaderParam(HttpHeaders.CONTENT_TYPE) String contentType, @PathParam("id") String given,
            byte[] body) throws SQLException {
        String id = SubscriptionLookup.canonical(given);
        readOnly(id);
        UUID uuid = SubscriptionLookup.uuid(id);
        JsonNode before = store.body(uuid).orElseThrow(() -> SubscriptionLookup.notFound(id));
        JsonNode patch = JsonBody.parsePatch(contentType, body, "subscription");
        for (int attempt = 1; attempt <= PATCH_ATTEMPTS; attempt++) {
            JsonNode after;
            try {
                after = SubscriptionJson.patched(before, patch);
            } catch (SubscriptionException e) {
                throw new ApiProblem(400, "Bad Request", e.getMessage(), e.field());
            }
            Subscription subscription = validate(after, uuid);
            switch (store.replace(uuid, after, before)) {
                case DONE -> {
                    applyHere();
                    return SubscriptionView.of(id, subscription,
                            store.find(uuid).map(SubscriptionStore.Stored::paused).orElse(false));
                }
                case GONE -> throw SubscriptionLookup.notFound(id);
                case CHANGED -> {
                    LOG.debugf("subscription %s changed while patched (attempt %d): patching it again", id, attempt);
                    before = store.body(uuid).orElseThrow(() -> SubscriptionLookup.notFound(id));
                }
            }
        }
        throw new ApiProblem(409, "Conflict", "the subscription was changed by other writes each of " + PATCH_ATTEMPTS
                + " times this patch was made: send it again", null);
    }

    @POST
    @Path("{id}/pause")
    @Consumes(MediaType.WILDCARD)
    public SubscriptionView pause(@PathParam("id") String id, @jakarta.ws.rs.core.Context HttpServerRequest request,
            byte[] body) throws SQLException {
        NoBody.refuseAny(request, body);
        return setPaused(SubscriptionLookup.canonical(id), true);
    }

    @POST
    @Path("{id}/resume")
    @Consumes(MediaType.WILDCARD)
    public SubscriptionView resume(@PathParam("id") String id, @jakarta.ws.rs.core.Context HttpServerRequest request,
            byte[] body) throws SQLException {
        NoBody.refuseAny(request, body);
        return setPaused(SubscriptionLookup.canonical(id), false);
    }

    /** Paused, a subscription's events are parked in order and acknowledged; resumed, they are delivered. */
    private SubscriptionView setPaused(String id, boolean paused) throws SQLException {
        readOnly(id);
        UUID uuid = SubscriptionLookup.uuid(id);
        if (!store.setPaused(uuid, paused)) {
            throw SubscriptionLookup.notFound(id);
        }
        applyHere();
        SubscriptionStore.Stored stored = store.find(uuid).orElseThrow(() -> SubscriptionLookup.notFound(id));
        return SubscriptionView.of(id, stored.subscription(), stored.paused());
    }

    /**
     * Sends one signed test event ({@code "op": "test"}) to the subscription's destination and
     * reports the outcome; nothing is retried or recorded.
     */
    @POST
    @Path("{id}/test")
    @Consumes(MediaType.WILDCARD)
    public TestFire.Outcome testFire(@PathParam("id") String id, @jakarta.ws.rs.core.Context HttpServerRequest request,
            byte[] body) throws SQLException {
        NoBody.refuseAny(request, body);
        return new TestFire(source, config.delivery().requestTimeout(), config.allowPrivateDestinations())
                .fire(subscriptions.inForce(id));
    }

    /**
     * Deletes the subscription: its delivery stops (at once on this instance, within a second on
     * the active one), and its durable queue is discarded; the response says how many events were,
     * counted in the transaction that deleted the subscription. Its lane (told here at once, on
     * another instance by the database's notification) drops the same rows meanwhile, and those it
     * writes after: counted by what this call dropped itself, the answer fell short.
     */
    @DELETE
    @Path("{id}")
    @Consumes(MediaType.WILDCARD)
    public Deleted delete(@PathParam("id") String id, @jakarta.ws.rs.core.Context HttpServerRequest request, byte[] body)
            throws SQLException {
        NoBody.refuseAny(request, body);
        readOnly(id);
        UUID uuid = SubscriptionLookup.uuid(id);
        ParkedEventStore.Held queue = store.delete(uuid, t -> {
            parked.notGone(t, uuid.toString()); // a 410's record goes with it
            return parked.held(t, uuid.toString());
        })
                .orElseThrow(() -> SubscriptionLookup.notFound(id));
        // delivery stops here now, not after the drop (which waits for rows other sessions hold)
        source.deleted(uuid.toString());
        applyHere();
        try {
            parked.deleteAll(uuid.toString(), queue.upTo()); // what its lane has not dropped yet
        } catch (SQLException | RuntimeException e) {
            // deleted all the same: the lane's drop, or the next start's, takes the rest
            LOG.warnf("subscription %s deleted; its durable queue is dropped later (%s)", id, e.getMessage());
        }
        return new Deleted(uuid.toString(), queue.count());
    }

    /** The answer to a delete: the subscription's id and how many events of its durable queue went with it. */
    @RegisterForReflection
    public record Deleted(String id, int discardedEvents) {
    }

    /**
     * A write applies, on this instance, to every change committed after its answer: the subscriptions
     * are read again here before it, and delivery told (a new destination, batching, retry policy),
     * and routing takes them up at its next transaction. Left to the
     * notification alone, a change committed at once could be routed before it came (a new tenant's
     * first change missed). The other instances take the write up from the notification, within a
     * second; this one, when reading fails, at its poller's next round, within 2 s.
     */
    private void applyHere() {
        java.util.concurrent.CompletableFuture<Void> turns;
        try {
            turns = source.applied(store);
        } catch (SQLException | RuntimeException e) {
            source.refreshSoon();
            LOG.warnf("a subscription was written; reading the subscriptions again failed (%s): routing takes the write up"
                    + " within 2 s", e.getMessage());
            return;
        }
        try {
            // a lane's turn under way starts its requests with the subscription as it was: the answer waits for it to
            // end, so that nothing starts to a destination the caller is told was replaced (a turn is short: the wait
            // is bounded only against a lane that cannot take its turn, walhook stopping)
            turns.get(APPLY_WAIT.toMillis(), java.util.concurrent.TimeUnit.MILLISECONDS);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        } catch (java.util.concurrent.ExecutionException | java.util.concurrent.TimeoutException e) {
            LOG.warnf("a subscription was written; its delivery took the write up later than %s after it: requests may"
                    + " have started meanwhile with the subscription as it was", APPLY_WAIT);
        }
    }

    /** How long an answer waits at most for delivery to take a write up ({@link #applyHere}). */
    static final java.time.Duration APPLY_WAIT = java.time.Duration.ofSeconds(5);

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
        String host = UrlAuthority.host(url);
        try {
            addresses = InetAddress.getAllByName(host);
        } catch (UnknownHostException e) {
            throw new ApiProblem(400, "Bad Request", "/destination/url host " + host + " does not resolve",
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
}
