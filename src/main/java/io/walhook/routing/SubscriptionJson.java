package io.walhook.routing;

import java.util.ArrayList;
import java.util.EnumSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.regex.Pattern;

import com.fasterxml.jackson.databind.JsonNode;

import io.walhook.change.Operation;
import io.walhook.config.ConfigException;
import io.walhook.config.UrlAuthority;

/**
 * Reads the API's subscription object (docs/api.md, {@code SubscriptionRequest} in
 * openapi.yaml) into a {@link Subscription}. Every problem is a {@link SubscriptionException} naming
 * the field as a JSON pointer.
 */
public final class SubscriptionJson {

    /** The longest destination header value: servers refuse header fields much beyond a few KB. */
    static final int MAX_HEADER_VALUE = 4096;
    /** The most destination headers: Apache takes 100 fields in all, walhook's own and CloudEvents' included. */
    static final int MAX_HEADERS = 64;
    /**
     * The most bytes of destination headers together (name, value, ": " and CRLF): Node takes 16 KB
     * in all, the request line and walhook's own headers included.
     */
    static final int MAX_HEADER_BYTES = 12_288;

    private static final Pattern NAME = Pattern.compile("[a-z0-9][a-z0-9_-]{0,62}");
    /** Headers walhook sets on every request (lower case); a subscription's own headers may not replace them. */
    private static final Set<String> RESERVED_HEADERS = Set.of("webhook-id", "webhook-timestamp", "webhook-signature",
            "content-type", "content-length", "transfer-encoding", "host", "connection", "keep-alive", "upgrade", "te",
            "trailer");
    private static final Set<String> FIELDS = Set.of("name", "tables", "operations", "filter", "destination", "format",
            "batch", "columns", "retry", "max_in_flight", "rate_limit");

    private SubscriptionJson() {
    }

    /** A subscription written now (the API): every check. */
    public static Subscription parse(JsonNode body) {
        return parse(body, true);
    }

    /**
     * A subscription stored by an earlier walhook: the checks added since that only refuse what
     * could never be delivered well (destination headers' characters, length and repeats) are not
     * made, so an upgrade does not hold such a subscription out of force, its changes unrouted.
     */
    public static Subscription parseStored(JsonNode body) {
        return parse(body, false);
    }

    private static Subscription parse(JsonNode body, boolean written) {
        if (body == null || !body.isObject()) {
            throw new SubscriptionException("", "a subscription is a JSON object");
        }
        for (Iterator<String> names = body.fieldNames(); names.hasNext(); ) {
            String field = names.next();
            if (!FIELDS.contains(field)) {
                throw unknownField("", field, "a subscription", FIELDS);
            }
        }
        String name = text(body, "/name", true);
        if (!NAME.matcher(name).matches()) {
            throw new SubscriptionException("/name", "must be 1 to 63 lower-case letters, digits, '-' or '_', starting"
                    + " with a letter or digit");
        }
        Matching matching = matching(body, written);
        List<TablePattern> tables = matching.tables();
        Set<Operation> operations = matching.operations();
        Optional<CelFilter> filter = matching.filter();
        Destination destination = destination(body.get("destination"), written);
        EventFormat format = EventFormat.JSON;
        String formatText = text(body, "/format", false);
        if (formatText != null) {
            try {
                format = EventFormat.parse(formatText);
            } catch (IllegalArgumentException e) {
                throw new SubscriptionException("/format", e.getMessage());
            }
        }
        int maxEvents = 1;
        long maxWait = 0;
        JsonNode batch = body.get("batch");
        if (batch != null && !batch.isNull()) {
            if (!batch.isObject()) {
                throw new SubscriptionException("/batch", "must be an object with max_events and max_wait_ms");
            }
            only(batch, "/batch", Set.of("max_events", "max_wait_ms"), "batch");
            maxEvents = (int) integer(batch, "/batch/max_events", 1, 1, Subscription.MAX_BATCH_EVENTS);
            maxWait = integer(batch, "/batch/max_wait_ms", 0, 0, Subscription.MAX_BATCH_WAIT_MS);
            if (maxEvents > 1 && !format.batches()) {
                throw new SubscriptionException("/batch/max_events", "must be 1 with format cloudevents-binary (one event"
                        + " per request); use cloudevents for batches");
            }
            if (written && maxEvents > 1 && destination instanceof Destination.Amqp) {
                // it was ignored: each event is a message of its own
                throw new SubscriptionException("/batch/max_events", "must be 1 for an amqp destination: each event is"
                        + " one AMQP message; batches are for webhooks");
            }
            if (written && maxWait > 0 && destination instanceof Destination.Amqp) {
                // shown in the view, with no effect: nothing waits to fill a batch
                throw new SubscriptionException("/batch/max_wait_ms", "must be 0 for an amqp destination: each event is"
                        + " one AMQP message, sent at once; batches are for webhooks");
            }
        }
        Projection projection = Projection.ALL;
        JsonNode columns = body.get("columns");
        if (columns != null && !columns.isNull()) {
            if (!columns.isObject()) {
                throw new SubscriptionException("/columns", "must be an object with include or exclude");
            }
            only(columns, "/columns", Set.of("include", "exclude"), "columns");
            Set<String> include = new LinkedHashSet<>(columnNames(columns, "/columns/include", written));
            Set<String> exclude = new LinkedHashSet<>(columnNames(columns, "/columns/exclude", written));
            if (!include.isEmpty() && !exclude.isEmpty()) {
                throw new SubscriptionException("/columns", "include and exclude cannot be combined");
            }
            projection = new Projection(include, exclude);
        }
        return new Subscription(name, tables, operations, filter, destination, format, maxEvents, maxWait, projection,
                false, retry(body.get("retry"))).withLimits(limits(body, destination));
    }

    /** What a subscription matches: its tables, operations and filter. */
    public record Matching(List<TablePattern> tables, Set<Operation> operations, Optional<CelFilter> filter) {
    }

    /**
     * The tables, operations and filter of a stored body, or of a part of one holding only them
     * (what a subscription matched before an edit: {@link SubscriptionStore#matchedBefore}).
     */
    public static Matching parseMatching(JsonNode body) {
        return matching(body, false);
    }

    private static Matching matching(JsonNode body, boolean written) {
        List<TablePattern> tables = new ArrayList<>();
        List<String> patterns = strings(body, "/tables", List.of("*"));
        if (patterns.isEmpty()) {
            throw new SubscriptionException("/tables", "is empty; leave it out for every table, or list schema.table patterns");
        }
        for (int i = 0; i < patterns.size(); i++) {
            try {
                tables.add(TablePattern.parse(patterns.get(i)));
            } catch (IllegalArgumentException e) {
                throw new SubscriptionException(body.path("tables").isArray() ? "/tables/" + i : "/tables", e.getMessage());
            }
        }
        Set<Operation> operations;
        List<String> ops = strings(body, "/operations", null);
        if (written && ops != null && (ops.isEmpty() || ops.stream().anyMatch(String::isBlank))) {
            // it meant every operation: the opposite of what an empty list says
            throw new SubscriptionException("/operations", "is empty or holds an empty name; leave it out for every"
                    + " operation, or list some of insert, update, delete, truncate, message");
        }
        for (int i = 0; written && ops != null && i < ops.size(); i++) {
            if (ops.get(i).contains(",") || !ops.get(i).equals(ops.get(i).strip())) {
                // one element, one operation: "insert,delete" was read as two, and " insert " as insert
                throw new SubscriptionException("/operations/" + i, "is not one operation's name as written (one of"
                        + " insert, update, delete, truncate, message, without blanks or commas: each its own element)");
            }
        }
        try {
            operations = ops == null || ops.isEmpty() ? EnumSet.copyOf(Operation.SUBSCRIBABLE)
                    : SubscriptionConfigReader.operations("operations", Optional.of(String.join(",", ops)));
        } catch (ConfigException e) {
            throw new SubscriptionException("/operations", e.getMessage().substring("operations ".length()));
        }
        Optional<CelFilter> filter = Optional.empty();
        String filterText = text(body, "/filter", false);
        if (written && filterText != null && filterText.isBlank()) {
            // it meant no filter: every row, to a subscription that was to get some
            throw new SubscriptionException("/filter", "is empty; leave it out for every row, or give a CEL expression");
        }
        if (filterText != null && !filterText.isBlank()) {
            try {
                filter = Optional.of(CelFilter.compile(filterText));
            } catch (CelFilterException e) {
                throw new SubscriptionException("/filter", e.getMessage());
            }
        }
        return new Matching(tables, operations, filter);
    }

    /** {@code "max_in_flight": n} and {@code "rate_limit": {"requests": n, "per": "second" | "minute"}}, each optional. */
    private static DeliveryLimits limits(JsonNode body, Destination destination) {
        Optional<Integer> maxInFlight = Optional.empty();
        if (present(body, "max_in_flight")) {
            JsonNode value = body.get("max_in_flight");
            if (!value.isIntegralNumber() || !value.canConvertToInt() || value.asInt() < 1
                    || value.asInt() > DeliveryLimits.maxInFlightFor(destination)) {
                throw new SubscriptionException("/max_in_flight", "must be a whole number from "
                        + DeliveryLimits.maxInFlightBounds(destination));
            }
            maxInFlight = Optional.of(value.asInt());
        }
        JsonNode node = body.get("rate_limit");
        if (node == null || node.isNull()) {
            return new DeliveryLimits(maxInFlight, Optional.empty());
        }
        if (!node.isObject()) {
            throw new SubscriptionException("/rate_limit", "must be an object with requests and per (second or minute)");
        }
        only(node, "/rate_limit", Set.of("requests", "per"), "rate_limit");
        if (!present(node, "requests")) {
            throw new SubscriptionException("/rate_limit/requests", "is required: how many requests may start per period");
        }
        int requests = (int) integer(node, "/rate_limit/requests", 0, 1, DeliveryLimits.MAX_REQUESTS_PER_PERIOD);
        DeliveryLimits.Period period = DeliveryLimits.Period.SECOND;
        String per = text(node, "/rate_limit/per", false);
        if (per != null) {
            period = DeliveryLimits.Period.parse(per).filter(p -> p.wireName().equals(per))
                    .orElseThrow(() -> new SubscriptionException("/rate_limit/per", "must be second or minute"));
        }
        return new DeliveryLimits(maxInFlight, Optional.of(new DeliveryLimits.Rate(requests, period)));
    }

    /** {@code "retry": {"max_attempts", "max_backoff_ms", "window_ms"}}, each optional; absent ones are global. */
    private static RetryPolicy retry(JsonNode node) {
        if (node == null || node.isNull()) {
            return RetryPolicy.DEFAULTS;
        }
        if (!node.isObject()) {
            throw new SubscriptionException("/retry", "must be an object with max_attempts, max_backoff_ms and window_ms");
        }
        only(node, "/retry", Set.of("max_attempts", "max_backoff_ms", "window_ms"), "retry");
        Optional<Integer> maxAttempts = present(node, "max_attempts")
                ? Optional.of((int) integer(node, "/retry/max_attempts", 0, 1, RetryPolicy.MAX_ATTEMPTS))
                : Optional.empty();
        Optional<java.time.Duration> maxBackoff = present(node, "max_backoff_ms")
                ? Optional.of(java.time.Duration.ofMillis(integer(node, "/retry/max_backoff_ms", 0, 1,
                        RetryPolicy.LONGEST_BACKOFF.toMillis())))
                : Optional.empty();
        Optional<java.time.Duration> window = present(node, "window_ms")
                ? Optional.of(java.time.Duration.ofMillis(integer(node, "/retry/window_ms", 0, 1,
                        RetryPolicy.LONGEST_WINDOW.toMillis())))
                : Optional.empty();
        RetryPolicy policy = new RetryPolicy(maxAttempts, maxBackoff, window);
        if (policy.backoffExceedsWindow()) {
            throw new SubscriptionException("/retry/max_backoff_ms", "must not exceed window_ms: no wait that long can"
                    + " happen before the request is parked");
        }
        return policy;
    }

    private static boolean present(JsonNode node, String field) {
        return node.get(field) != null && !node.get(field).isNull();
    }

    private static Destination destination(JsonNode node, boolean written) {
        if (node == null || !node.isObject()) {
            throw new SubscriptionException("/destination", "is required: {\"type\": \"webhook\", \"url\": ...} or"
                    + " {\"type\": \"amqp\", \"address\": ...}");
        }
        String type = text(node, "/destination/type", true);
        switch (type) {
            case "webhook" -> {
                only(node, "/destination", Set.of("type", "url", "secret", "headers"), "a webhook destination");
                String url = text(node, "/destination/url", true);
                java.net.URI uri;
                try {
                    uri = written ? SubscriptionConfigReader.writtenUrl("url", url) : SubscriptionConfigReader.url("url", url);
                } catch (ConfigException e) {
                    throw new SubscriptionException("/destination/url", e.getMessage().substring("url ".length()));
                }
                List<byte[]> secrets;
                String secret = text(node, "/destination/secret", false);
                if (written && secret != null && secret.isBlank()) {
                    // read as no secret: the webhooks went out unsigned, the opposite of what setting one means
                    throw new SubscriptionException("/destination/secret", "is empty; give a whsec_ secret, or null (in a"
                            + " PATCH) or leave it out to send webhooks unsigned");
                }
                try {
                    secrets = SubscriptionConfigReader.secrets("secret", Optional.ofNullable(secret), written);
                } catch (ConfigException e) {
                    throw new SubscriptionException("/destination/secret", e.getMessage().substring("secret ".length()));
                }
                Map<String, String> headers = new LinkedHashMap<>();
                JsonNode h = node.get("headers");
                if (h != null && !h.isNull()) {
                    if (!h.isObject()) {
                        throw new SubscriptionException("/destination/headers", "must be an object of header names to values");
                    }
                    int index = 0;
                    Set<String> names = new java.util.HashSet<>();
                    for (Iterator<Map.Entry<String, JsonNode>> it = h.fields(); it.hasNext(); index++) {
                        Map.Entry<String, JsonNode> header = it.next();
                        if (!HEADER_NAME.matcher(header.getKey()).matches()) {
                            throw notAHeaderName(index + 1);
                        }
                        if (!header.getValue().isTextual() || header.getValue().asText().chars()
                                .anyMatch(c -> c < 0x20 && c != '\t' || c == 0x7F || written && c > 0x7F)
                                || written && header.getValue().asText().length() > MAX_HEADER_VALUE) {
                            // beyond ASCII a value is mangled on the wire, and a long one refused by servers: every
                            // request would fail, to be retried and queued for good
                            throw new SubscriptionException(headerPointer(header.getKey()), "must be a text"
                                    + " value of printable ASCII characters (no control or non-ASCII ones), "
                                    + MAX_HEADER_VALUE + " at most");
                        }
                        if (!names.add(header.getKey().toLowerCase(java.util.Locale.ROOT)) && written) {
                            // one replaced the other when sent, which one from a hash order
                            throw new SubscriptionException(headerPointer(header.getKey()), "is given twice"
                                    + " (header names are case-insensitive)");
                        }
                        String lower = header.getKey().toLowerCase(java.util.Locale.ROOT);
                        if (RESERVED_HEADERS.contains(lower) || lower.startsWith("ce-")) {
                            throw new SubscriptionException(headerPointer(header.getKey()), "is set by walhook"
                                    + " (Standard Webhooks, CloudEvents and HTTP framing headers: " + String.join(", ",
                                    new java.util.TreeSet<>(RESERVED_HEADERS)) + ", ce-*) and cannot be overridden");
                        }
                        headers.put(header.getKey(), header.getValue().asText());
                    }
                    int bytes = headers.entrySet().stream().mapToInt(e -> e.getKey().length() + e.getValue().length() + 4)
                            .sum();
                    if (written && (headers.size() > MAX_HEADERS || bytes > MAX_HEADER_BYTES)) {
                        // each fits, not together: servers refuse the request (431, 400), every one of them
                        throw new SubscriptionException("/destination/headers", "has " + headers.size() + " headers of "
                                + bytes + " bytes together (name, value and 4 bytes of framing each): servers take at"
                                + " most " + MAX_HEADERS + " headers of " + MAX_HEADER_BYTES + " bytes together");
                    }
                }
                return new Destination.Webhook(uri, secrets, headers);
            }
            case "amqp" -> {
                only(node, "/destination", Set.of("type", "address"), "an amqp destination");
                String address = text(node, "/destination/address", true);
                if (address.isBlank()) {
                    throw new SubscriptionException("/destination/address", "is empty");
                }
                String unknown = Destination.Amqp.unknownPlaceholder(address);
                if (written && unknown != null) {
                    throw new SubscriptionException("/destination/address", "has " + unknown + ", which is not"
                            + " replaced (sent as written); the placeholders are {schema}, {table} and {op}");
                }
                return new Destination.Amqp(address.strip());
            }
            default -> throw new SubscriptionException("/destination/type", "must be webhook or amqp, not '" + type + "'");
        }
    }

    private static final Pattern HEADER_NAME = Pattern.compile("[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}");

    /** Not repeated: a name that is no header name is often a whole header pasted, value and all. */
    private static SubscriptionException notAHeaderName(int position) {
        return new SubscriptionException("/destination/headers", "header " + position + "'s name is not a header name:"
                + " 1 to 100 letters, digits or !#$%&'*+.^_`|~- (the value goes after it, as in {\"Authorization\":"
                + " \"Bearer ...\"})");
    }

    /** The fields of each object a subscription holds, by where it is: a patch's null must name one of them. */
    private static final Map<String, Set<String>> OBJECT_FIELDS = Map.of("", FIELDS,
            "/destination", Set.of("type", "url", "secret", "headers", "address"),
            "/batch", Set.of("max_events", "max_wait_ms"), "/columns", Set.of("include", "exclude"),
            "/retry", Set.of("max_attempts", "max_backoff_ms", "window_ms"), "/rate_limit", Set.of("requests", "per"));

    /**
     * A stored subscription body with a JSON Merge Patch (RFC 7396) applied: the patch's fields
     * replace the body's, objects merge field by field, a null removes the field. Two rules of
     * walhook's own: a destination of another {@code type} replaces the old one rather than merge
     * into it (a webhook's url and secret are no fields of an amqp destination), and destination
     * headers are matched without regard to case, as HTTP names them. What comes out is checked by
     * {@link #parse} as a written body is; a null that names no field is refused here, since it
     * would remove nothing and a misspelt removal would pass unnoticed.
     */
    public static JsonNode patched(JsonNode stored, JsonNode patch) {
        if (patch == null || !patch.isObject()) {
            throw new SubscriptionException("", "a patch is a JSON object (RFC 7396 merge patch): the fields to change,"
                    + " null for those to remove");
        }
        return merge(stored, patch, "");
    }

    private static JsonNode merge(JsonNode target, JsonNode patch, String at) {
        if (!patch.isObject()) {
            return patch;
        }
        com.fasterxml.jackson.databind.node.ObjectNode result = target != null && target.isObject()
                ? ((com.fasterxml.jackson.databind.node.ObjectNode) target).deepCopy()
                : com.fasterxml.jackson.databind.node.JsonNodeFactory.instance.objectNode();
        if (at.equals("/destination") && patch.hasNonNull("type") && !patch.get("type").equals(result.get("type"))) {
            result.removeAll();
        }
        if (at.equals("/destination") && movesToAnotherEndpoint(result.get("url"), patch.get("url"))) {
            // what the old endpoint was given is not sent to another one unless the patch says so: a write token
            // alone must not be enough to receive the header values (an Authorization) no view shows, at another
            // host or at a path of its own on a host shared by path (webhook.site, a gateway routing by path)
            for (String credential : List.of("secret", "headers")) {
                if (holds(result, credential) && !patch.has(credential)) {
                    throw new SubscriptionException("/destination/" + credential, "was given for the URL's old"
                            + " endpoint: a URL of another scheme, host, port or path needs it given again in the patch"
                            + " (or null to send none), as it would be sent there");
                }
                result.remove(credential); // given in the patch: taken whole, not merged with the old endpoint's
            }
            if (patch.path("headers").isObject()) {
                // taken whole: a null in it removes what the new endpoint is not given anyway
                com.fasterxml.jackson.databind.node.ObjectNode given = ((com.fasterxml.jackson.databind.node.ObjectNode) patch)
                        .deepCopy();
                ((com.fasterxml.jackson.databind.node.ObjectNode) given.get("headers")).properties()
                        .removeIf(header -> header.getValue().isNull());
                patch = given;
            }
        }
        java.util.Set<String> headerNames = new java.util.HashSet<>();
        int position = 0;
        for (Iterator<Map.Entry<String, JsonNode>> fields = patch.fields(); fields.hasNext(); ) {
            Map.Entry<String, JsonNode> field = fields.next();
            position++;
            String name = field.getKey();
            JsonNode value = field.getValue();
            if (at.equals("/destination/headers")) {
                if (!HEADER_NAME.matcher(name).matches()) {
                    throw notAHeaderName(position);
                }
                if (!headerNames.add(name.toLowerCase(java.util.Locale.ROOT))) {
                    throw new SubscriptionException(headerPointer(name), "is given twice in the patch (header"
                            + " names are case-insensitive)");
                }
                List<String> same = new ArrayList<>();
                result.fieldNames().forEachRemaining(h -> {
                    if (h.equalsIgnoreCase(name)) {
                        same.add(h);
                    }
                });
                if (value.isNull() && same.isEmpty()) {
                    // a misspelt removal would pass unnoticed, and the header it meant would still be sent
                    throw new SubscriptionException(headerPointer(name), "names no header of the subscription"
                            + " (it has " + (result.isEmpty() ? "none" : String.join(", ", (Iterable<String>) result::fieldNames))
                            + "): nothing to remove");
                }
                result.remove(same);
                if (!value.isNull()) {
                    result.set(name, value);
                }
                continue;
            }
            if (value.isNull()) {
                Set<String> known = OBJECT_FIELDS.get(at);
                if (known != null && !known.contains(name)) {
                    throw unknownField(at, name, at.isEmpty() ? "a subscription" : at.substring(1), known);
                }
                result.remove(name);
            } else {
                result.set(name, merge(result.get(name), value, at + "/" + name));
            }
        }
        return result;
    }

    /**
     * Whether a patch's URL is of another endpoint (scheme, host, port, path as written) than the stored
     * one, each read as a destination's URL is (without the blanks around it); false when either is no
     * URL. Only the query string may change.
     */
    private static boolean movesToAnotherEndpoint(JsonNode stored, JsonNode patched) {
        if (stored == null || patched == null || !stored.isTextual() || !patched.isTextual()) {
            return false;
        }
        java.net.URI to;
        try {
            to = SubscriptionConfigReader.url("url", patched.textValue());
        } catch (RuntimeException notAUrl) {
            return false; // refused as a URL when the result is read, by the same reading
        }
        try {
            return !endpoint(SubscriptionConfigReader.url("url", stored.textValue())).equals(endpoint(to));
        } catch (RuntimeException storedBeforeARule) {
            // stored before a rule the reading has now (an https host holding '_'): its origin as written, or, not
            // even a URI, another one
            try {
                return !endpoint(new java.net.URI(stored.textValue().strip())).equals(endpoint(to));
            } catch (java.net.URISyntaxException | RuntimeException notAUri) {
                return true;
            }
        }
    }

    private static String endpoint(java.net.URI url) {
        String path = url.getRawPath() == null || url.getRawPath().isEmpty() ? "/" : url.getRawPath();
        return origin(url) + path;
    }

    private static String origin(java.net.URI url) {
        String scheme = String.valueOf(url.getScheme()).toLowerCase(java.util.Locale.ROOT);
        String host = UrlAuthority.host(url);
        if (host == null) {
            // no host read at all: the authority as written
            return scheme + "://" + String.valueOf(url.getRawAuthority()).toLowerCase(java.util.Locale.ROOT);
        }
        int given = UrlAuthority.port(url);
        int port = given >= 0 ? given : scheme.equals("https") ? 443 : scheme.equals("http") ? 80 : -1;
        return scheme + "://" + host.toLowerCase(java.util.Locale.ROOT) + ":" + port;
    }

    /** Whether an object holds a field worth keeping: a value, not null nor an empty object. */
    private static boolean holds(JsonNode node, String field) {
        JsonNode value = node.get(field);
        return value != null && !value.isNull() && !(value.isObject() && value.isEmpty());
    }

    private static void only(JsonNode node, String at, Set<String> fields, String what) {
        for (Iterator<String> names = node.fieldNames(); names.hasNext(); ) {
            String field = names.next();
            if (!fields.contains(field)) {
                throw unknownField(at, field, what, fields);
            }
        }
    }

    /**
     * Whether a field name given in a body may be repeated in a problem: a word of a field name's
     * characters. Anything else (a whole header pasted one level too high, {@code "Authorization:
     * Bearer ..."}) may hold a credential, and a problem is logged by proxies and clients.
     */
    public static boolean shownName(String name) {
        return name.length() <= 64 && name.chars().allMatch(c -> c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
                || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.');
    }

    private static SubscriptionException unknownField(String at, String field, String what, Set<String> fields) {
        String known = "; known fields: " + String.join(", ", new java.util.TreeSet<>(fields));
        if (!shownName(field)) {
            return new SubscriptionException(at, "holds a field named with what is no field name (not repeated: it may be"
                    + " a whole header, credential and all), not a field of " + what + known);
        }
        if (VIEW_ONLY.contains(at + "/" + field)) {
            // a GET's body sent back: what it leaves out (the secret, header values, the URL's query) would go too
            return new SubscriptionException(at + "/" + field, "is shown in views, not written (a view leaves out the"
                    + " secret, header values and the URL's query): PATCH the fields to change instead, or send the"
                    + " whole subscription without it" + known);
        }
        return new SubscriptionException(at + "/" + field, "is not a field of " + what + known);
    }

    /** What a view shows besides a subscription's fields. */
    private static final Set<String> VIEW_ONLY = Set.of("/id", "/read_only", "/paused", "/destination/secret_set",
            "/destination/headers_set");

    private static String text(JsonNode node, String pointer, boolean required) {
        JsonNode value = node.get(pointer.substring(pointer.lastIndexOf('/') + 1));
        if (value == null || value.isNull()) {
            if (required) {
                throw new SubscriptionException(pointer, "is required");
            }
            return null;
        }
        if (!value.isTextual()) {
            throw new SubscriptionException(pointer, "must be a string");
        }
        if (value.asText().length() > 10_000) {
            throw new SubscriptionException(pointer, "is longer than 10,000 characters");
        }
        return value.asText();
    }

    /** The JSON pointer of a header given under {@code name} ('~' and '/' escaped as RFC 6901 has them). */
    static String headerPointer(String name) {
        return "/destination/headers/" + name.replace("~", "~0").replace("/", "~1");
    }

    /**
     * A projection's column names: none when absent. Given, an include lists at least one and no name
     * is blank: an empty include was read as "every column", sending those meant to be left out.
     */
    private static List<String> columnNames(JsonNode columns, String pointer, boolean written) {
        List<String> names = strings(columns, pointer, List.of());
        if (written && (names.stream().anyMatch(String::isBlank) || names.isEmpty() && pointer.endsWith("include")
                && columns.hasNonNull("include"))) {
            throw new SubscriptionException(pointer, "is empty or holds an empty name; list the columns to "
                    + (pointer.endsWith("include") ? "send" : "leave out") + ", or leave columns out for every column");
        }
        for (int i = 0; written && i < names.size(); i++) {
            if (names.get(i).contains(",") || !names.get(i).equals(names.get(i).strip())) {
                // names are matched exactly: "ssn " or "notes,ssn" left out no column, and ssn was sent
                throw new SubscriptionException(pointer + "/" + i, "is not one column's name as written (no blanks"
                        + " around it, no commas: each column its own element)");
            }
        }
        return names;
    }

    private static List<String> strings(JsonNode node, String pointer, List<String> whenAbsent) {
        JsonNode value = node.get(pointer.substring(pointer.lastIndexOf('/') + 1));
        if (value == null || value.isNull()) {
            return whenAbsent;
        }
        if (!value.isArray()) {
            throw new SubscriptionException(pointer, "must be an array of strings");
        }
        if (value.size() > 1000) {
            throw new SubscriptionException(pointer, "has more than 1000 entries");
        }
        List<String> strings = new ArrayList<>();
        for (int i = 0; i < value.size(); i++) {
            if (!value.get(i).isTextual()) {
                throw new SubscriptionException(pointer + "/" + i, "must be a string");
            }
            strings.add(value.get(i).asText());
        }
        return strings;
    }

    private static long integer(JsonNode node, String pointer, long whenAbsent, long min, long max) {
        JsonNode value = node.get(pointer.substring(pointer.lastIndexOf('/') + 1));
        if (value == null || value.isNull()) {
            return whenAbsent;
        }
        if (!value.isIntegralNumber() || !value.canConvertToLong() || value.asLong() < min || value.asLong() > max) {
            throw new SubscriptionException(pointer, "must be a whole number from " + min + " to " + max);
        }
        return value.asLong();
    }
}
