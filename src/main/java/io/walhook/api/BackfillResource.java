package io.walhook.api;

import java.net.URI;
import java.sql.SQLException;
import java.time.Instant;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.UUID;

import jakarta.inject.Inject;
import jakarta.ws.rs.Consumes;
import jakarta.ws.rs.GET;
import jakarta.ws.rs.HeaderParam;
import jakarta.ws.rs.POST;
import jakarta.ws.rs.Path;
import jakarta.ws.rs.PathParam;
import jakarta.ws.rs.Produces;
import jakarta.ws.rs.core.HttpHeaders;
import jakarta.ws.rs.core.MediaType;

import org.jboss.resteasy.reactive.RestResponse;

import com.fasterxml.jackson.annotation.JsonInclude;
import com.fasterxml.jackson.annotation.JsonProperty;
import com.fasterxml.jackson.databind.JsonNode;

import io.quarkus.runtime.annotations.RegisterForReflection;
import io.smallrye.common.annotation.Blocking;
import io.walhook.backfill.Backfill;
import io.walhook.backfill.Backfills;
import io.walhook.routing.Subscription;
import io.walhook.pipeline.ReplicationSource;

/**
 * {@code /subscriptions/{id}/backfills}: start a backfill of a subscription's existing rows (202),
 * list them, follow one's progress, pause, resume or cancel it (docs/backfills.md, openapi.yaml).
 * The active instance runs them; any instance takes the requests.
 */
@Path("/subscriptions/{id}/backfills")
@Produces(MediaType.APPLICATION_JSON)
@Blocking
public class BackfillResource {

    private static final Set<String> FIELDS = Set.of("tables", "filter", "chunk_size", "max_rows_per_second");

    private final ReplicationSource source;
    private final SubscriptionLookup subscriptions;
    private final javax.sql.DataSource dataSource;

    @Inject
    public BackfillResource(io.walhook.config.WalhookConfig config,
            @io.quarkus.agroal.DataSource(io.walhook.config.DatasourceConfigSourceFactory.API) io.agroal.api.AgroalDataSource dataSource,
            ReplicationSource source) {
        this.source = source;
        this.dataSource = dataSource;
        this.subscriptions = new SubscriptionLookup(
                new io.walhook.routing.SubscriptionStore(dataSource, config.stateSchema()), source);
    }

    /** One table's progress. */
    @RegisterForReflection
    public record TableView(String table, @JsonProperty("rows_sent") long rowsSent, boolean done) {
    }

    /** A backfill as the API shows it: every field there, null when it has no value (no error yet, not finished). */
    @RegisterForReflection
    @JsonInclude(JsonInclude.Include.ALWAYS)
    public record View(String id, @JsonProperty("subscription_id") String subscriptionId, String state, String origin,
            List<TableView> tables, @JsonProperty("rows_sent") long rowsSent, String filter,
            @JsonProperty("chunk_size") int chunkSize, @JsonProperty("max_rows_per_second") Integer maxRowsPerSecond,
            String error, @JsonProperty("created_at") Instant createdAt, @JsonProperty("updated_at") Instant updatedAt,
            @JsonProperty("finished_at") Instant finishedAt) {

        static View of(Backfill b) {
            List<TableView> tables = new ArrayList<>();
            for (String table : b.tables()) {
                Backfill.TableProgress p = b.progressOf(table);
                tables.add(new TableView(table, p.rowsSent(), p.done()));
            }
            return new View(b.id().toString(), b.subscriptionId(), b.state().wireName(), b.origin(), tables,
                    b.rowsSent(), b.filter(), b.chunkSize(), b.maxRowsPerSecond(), b.error(), b.createdAt(),
                    b.updatedAt(), b.finishedAt());
        }
    }

    @POST
    @Consumes(MediaType.WILDCARD)
    public RestResponse<View> start(@PathParam("id") String id, @HeaderParam(HttpHeaders.CONTENT_TYPE) String contentType,
            byte[] body) throws SQLException {
        Subscription subscription = subscription(id);
        Backfills.Request request = body == null || body.length == 0 || new String(body, java.nio.charset.StandardCharsets.UTF_8).isBlank()
                ? new Backfills.Request(null, null, null, null)
                : request(JsonBody.parse(contentType, body, "backfill"));
        Backfill started = refusing(() -> backfills().start(subscription, request));
        return RestResponse.ResponseBuilder.<View>create(RestResponse.Status.ACCEPTED, View.of(started))
                .location(URI.create("/subscriptions/" + pathSegment(subscription.id()) + "/backfills/" + started.id()))
                .build();
    }

    @GET
    public List<View> list(@PathParam("id") String id) throws SQLException {
        Subscription subscription = subscriptionOrHeld(id);
        return backfills().store().list(subscription.id()).stream().map(View::of).toList();
    }

    @GET
    @Path("{bid}")
    public View read(@PathParam("id") String id, @PathParam("bid") String bid) throws SQLException {
        Subscription subscription = subscriptionOrHeld(id);
        return View.of(refusing(() -> backfills().find(subscription, uuid(subscription, bid))));
    }

    @POST
    @Path("{bid}/pause")
    @Consumes(MediaType.WILDCARD)
    public View pause(@PathParam("id") String id, @PathParam("bid") String bid,
            @jakarta.ws.rs.core.Context io.vertx.core.http.HttpServerRequest request, byte[] body) throws SQLException {
        NoBody.refuseAny(request, body);
        return control(id, bid, "pause");
    }

    @POST
    @Path("{bid}/resume")
    @Consumes(MediaType.WILDCARD)
    public View resume(@PathParam("id") String id, @PathParam("bid") String bid,
            @jakarta.ws.rs.core.Context io.vertx.core.http.HttpServerRequest request, byte[] body) throws SQLException {
        NoBody.refuseAny(request, body);
        return control(id, bid, "resume");
    }

    @POST
    @Path("{bid}/cancel")
    @Consumes(MediaType.WILDCARD)
    public View cancel(@PathParam("id") String id, @PathParam("bid") String bid,
            @jakarta.ws.rs.core.Context io.vertx.core.http.HttpServerRequest request, byte[] body) throws SQLException {
        NoBody.refuseAny(request, body);
        return control(id, bid, "cancel");
    }

    private View control(String id, String bid, String action) throws SQLException {
        Subscription subscription = subscriptionOrHeld(id);
        UUID backfill = uuid(subscription, bid);
        return View.of(refusing(() -> backfills().control(subscription, backfill, action)));
    }

    private interface Call<T> {
        T run() throws SQLException;
    }

    private static <T> T refusing(Call<T> call) throws SQLException {
        try {
            return call.run();
        } catch (Backfills.Refused r) {
            String title = switch (r.status()) {
                case 404 -> "Not Found";
                case 409 -> "Conflict";
                default -> "Bad Request";
            };
            throw new ApiProblem(r.status(), title, r.getMessage(), r.field());
        }
    }

    /** Through the API's own pool: a request stuck in the database holds none of delivery's connections. */
    private Backfills backfills() {
        Backfills b = source.backfills();
        if (b == null) {
            throw new ApiProblem(503, "Service Unavailable", "walhook is still starting; try again in a moment", null);
        }
        return b.through(dataSource);
    }

    private static String pathSegment(String id) {
        return java.net.URLEncoder.encode(id, java.nio.charset.StandardCharsets.UTF_8).replace("+", "%20")
                .replace("%3A", ":");
    }

    /** As {@link #subscription}, or the stored subscription held out of force: its backfills are read and controlled. */
    private Subscription subscriptionOrHeld(String given) throws SQLException {
        started();
        return subscriptions.inForceOrHeld(given);
    }

    /** The subscription in force with this id (a UUID in any case, or config:name as the list shows it); 404 when none. */
    private Subscription subscription(String given) throws SQLException {
        started();
        return subscriptions.inForce(given);
    }

    /** 503 while walhook starts: no subscription is known yet. */
    private void started() {
        if (source.registry() == null) {
            throw new ApiProblem(503, "Service Unavailable", "walhook is still starting; try again in a moment", null);
        }
    }

    /** The id as walhook gives it, in either case; not the other forms UUID.fromString takes (padded, zeros left out). */
    private static UUID uuid(Subscription subscription, String bid) {
        if (!SubscriptionLookup.UUID_TEXT.matcher(bid).matches()) {
            throw new ApiProblem(404, "Not Found", "subscription " + subscription.name() + " has no backfill " + bid
                    + " (backfill ids are UUIDs)", null);
        }
        return UUID.fromString(bid);
    }

    private static Backfills.Request request(JsonNode json) {
        if (!json.isObject()) {
            throw new ApiProblem(400, "Bad Request", "the body is a JSON " + json.getNodeType().name().toLowerCase(
                    java.util.Locale.ROOT) + "; send a backfill object like {\"tables\": [\"public.orders\"]}", "");
        }
        for (Iterator<String> names = json.fieldNames(); names.hasNext(); ) {
            String name = names.next();
            if (!FIELDS.contains(name)) {
                if (!io.walhook.routing.SubscriptionJson.shownName(name)) {
                    // not repeated: it may be a whole header pasted, credential and all
                    throw new ApiProblem(400, "Bad Request", "the body holds a field named with what is no field name"
                            + " (not repeated); a backfill takes tables, filter, chunk_size and max_rows_per_second", "");
                }
                throw new ApiProblem(400, "Bad Request", "/" + name + " is not a backfill field; a backfill takes "
                        + "tables, filter, chunk_size and max_rows_per_second", "/" + name);
            }
        }
        List<String> tables = null;
        if (json.has("tables")) {
            JsonNode t = json.get("tables");
            if (!t.isArray()) {
                throw new ApiProblem(400, "Bad Request", "/tables must be an array of schema.table names", "/tables");
            }
            tables = new ArrayList<>();
            for (int i = 0; i < t.size(); i++) {
                if (!t.get(i).isTextual()) {
                    throw new ApiProblem(400, "Bad Request", "/tables/" + i + " must be a schema.table name (a string)",
                            "/tables/" + i);
                }
                tables.add(t.get(i).asText());
            }
        }
        String filter = null;
        if (json.has("filter")) {
            if (!json.get("filter").isTextual()) {
                throw new ApiProblem(400, "Bad Request", "/filter must be a CEL expression (a string)", "/filter");
            }
            filter = json.get("filter").asText();
        }
        return new Backfills.Request(tables, filter, integer(json, "chunk_size"), integer(json, "max_rows_per_second"));
    }

    private static Integer integer(JsonNode json, String field) {
        if (!json.has(field)) {
            return null;
        }
        JsonNode n = json.get(field);
        if (!n.isIntegralNumber()) {
            throw new ApiProblem(400, "Bad Request", "/" + field + " must be a whole number", "/" + field);
        }
        if (!n.canConvertToInt()) {
            // a whole number, out of any field's range: the range is said where it is checked
            return n.bigIntegerValue().signum() > 0 ? Integer.MAX_VALUE : Integer.MIN_VALUE;
        }
        return n.intValue();
    }
}
