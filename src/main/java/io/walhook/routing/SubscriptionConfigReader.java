package io.walhook.routing;

import java.net.URI;
import java.net.URISyntaxException;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Base64;
import java.util.EnumSet;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Objects;
import java.util.Optional;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Pattern;

import io.walhook.change.Operation;
import io.walhook.config.ConfigException;
import io.walhook.config.Converters;
import io.walhook.config.UrlAuthority;
import io.walhook.config.WalhookConfig;

/**
 * Turns configured subscriptions ({@code WALHOOK_SUBSCRIPTIONS_<NAME>_*}, and Knative's
 * {@code K_SINK}) into {@link Subscription}s; the first bad value stops start-up with a
 * {@link ConfigException} naming its variable.
 */
public final class SubscriptionConfigReader {

    private static final Pattern NAME = Pattern.compile("[a-z0-9]{1,63}");
    /** The name of the subscription Knative's SinkBinding asks for through {@code K_SINK}. */
    public static final String KNATIVE_SINK = "ksink";

    private SubscriptionConfigReader() {
    }

    /** @param env the process environment, for {@code K_SINK} */
    public static List<Subscription> read(WalhookConfig config, Map<String, String> env) {
        List<Subscription> subscriptions = new ArrayList<>();
        for (Map.Entry<String, WalhookConfig.SubscriptionConfig> entry : new TreeMap<>(config.subscriptions()).entrySet()) {
            subscriptions.add(read(entry.getKey(), entry.getValue(), config.amqpUrl().filter(u -> !u.isBlank()).isPresent()));
        }
        Optional<Subscription> sink = knativeSink(env);
        if (sink.isPresent()) {
            if (subscriptions.stream().anyMatch(s -> s.name().equals(KNATIVE_SINK))) {
                throw new ConfigException("K_SINK", "asks for a subscription named " + KNATIVE_SINK
                        + " and WALHOOK_SUBSCRIPTIONS_KSINK_* defines one too; remove one of them");
            }
            subscriptions.add(sink.get());
        }
        return List.copyOf(subscriptions);
    }

    /**
     * The subscription Knative's SinkBinding asks for: every change, as CloudEvents, to {@code
     * K_SINK}; none without it. Set but empty, it is refused: the binding that set it found no
     * sink, or a compose file left it blank, and starting without the one subscription asked for
     * would route nothing without a word.
     */
    static Optional<Subscription> knativeSink(Map<String, String> env) {
        String sink = env.get("K_SINK");
        if (sink == null) {
            return Optional.empty();
        }
        if (sink.isBlank()) {
            throw new ConfigException("K_SINK", "is set but empty: it is the URL of the sink the events go to (Knative's"
                    + " SinkBinding sets it); give one, or leave it unset");
        }
        return Optional.of(new Subscription(KNATIVE_SINK, List.of(TablePattern.ALL), EnumSet.copyOf(Operation.SUBSCRIBABLE),
                Optional.empty(), new Destination.Webhook(writtenUrl("K_SINK", sink), List.of(), Map.of()),
                EventFormat.CLOUDEVENTS, 1, 0, Projection.ALL, true));
    }

    /**
     * The ids of configured subscriptions whose {@code BACKFILL} is {@code initial}; any other value
     * is a {@link ConfigException} naming the variable.
     */
    public static List<String> initialBackfills(WalhookConfig config) {
        List<String> ids = new ArrayList<>();
        for (Map.Entry<String, WalhookConfig.SubscriptionConfig> entry : new TreeMap<>(config.subscriptions()).entrySet()) {
            Optional<String> backfill = entry.getValue().backfill();
            if (backfill.isEmpty() || backfill.get().isBlank()) {
                continue;
            }
            String variable = "WALHOOK_SUBSCRIPTIONS_" + entry.getKey().toUpperCase(Locale.ROOT).replace('-', '_')
                    + "_BACKFILL";
            if (!backfill.get().strip().equalsIgnoreCase("initial")) {
                throw new ConfigException(variable, "is '" + backfill.get().strip() + "'; the only value is initial"
                        + " (backfill the subscription's tables once, at its first start), or leave it unset");
            }
            ids.add(Subscription.CONFIGURED + entry.getKey().toLowerCase(Locale.ROOT));
        }
        return List.copyOf(ids);
    }

    /** One configured subscription; {@code amqpConfigured}: whether WALHOOK_AMQP_URL is set. */
    public static Subscription read(String configName, WalhookConfig.SubscriptionConfig c, boolean amqpConfigured) {
        String name = configName.toLowerCase(Locale.ROOT);
        String prefix = "WALHOOK_SUBSCRIPTIONS_" + configName.toUpperCase(Locale.ROOT).replace('-', '_') + "_";
        if (!NAME.matcher(name).matches()) {
            throw new ConfigException(prefix + "*", "has the name '" + configName
                    + "'; a subscription name is letters and digits only, 63 at most");
        }
        List<TablePattern> tables = new ArrayList<>();
        List<String> patterns = list(c.tables(), "*");
        if (patterns.isEmpty()) {
            throw new ConfigException(prefix + "TABLES", "lists no table; leave it unset for every table, or list"
                    + " schema.table patterns separated by commas");
        }
        for (String pattern : patterns) {
            try {
                tables.add(TablePattern.parse(pattern));
            } catch (IllegalArgumentException e) {
                throw new ConfigException(prefix + "TABLES", "has " + e.getMessage());
            }
        }
        Set<Operation> operations = operations(prefix + "OPERATIONS", c.operations());
        Optional<CelFilter> filter = Optional.empty();
        if (c.filter().isPresent() && !c.filter().get().isBlank()) {
            try {
                filter = Optional.of(CelFilter.compile(c.filter().get()));
            } catch (CelFilterException e) {
                throw new ConfigException(prefix + "FILTER", "is not a valid filter ("
                        + e.getMessage().replaceFirst("^filter:? ", "") + ")");
            }
        }
        Destination destination;
        if (c.url().isPresent() == c.amqpAddress().isPresent()) {
            throw new ConfigException(prefix + "URL", c.url().isPresent()
                    ? "and " + prefix + "AMQP_ADDRESS are both set; a subscription has one destination"
                    : "(or " + prefix + "AMQP_ADDRESS) is required: where should its events go?");
        }
        if (c.url().isPresent()) {
            destination = new Destination.Webhook(writtenUrl(prefix + "URL", c.url().get()),
                    secrets(prefix + "SECRET", c.secret(), true), Map.of());
        } else {
            if (!amqpConfigured) {
                throw new ConfigException(prefix + "AMQP_ADDRESS", "needs a broker: set WALHOOK_AMQP_URL");
            }
            if (c.amqpAddress().get().isBlank()) {
                throw new ConfigException(prefix + "AMQP_ADDRESS", "is empty");
            }
            String unknown = Destination.Amqp.unknownPlaceholder(c.amqpAddress().get());
            if (unknown != null) {
                throw new ConfigException(prefix + "AMQP_ADDRESS", "has " + unknown + ", which is not replaced (sent as"
                        + " written); the placeholders are {schema}, {table} and {op}");
            }
            if (c.secret().filter(v -> !v.isBlank()).isPresent()) {
                // it was ignored: messages are not signed
                throw new ConfigException(prefix + "SECRET", "is set, but an AMQP destination's messages are not signed;"
                        + " a secret is for webhooks (leave it out)");
            }
            destination = new Destination.Amqp(c.amqpAddress().get().strip());
        }
        EventFormat format;
        try {
            format = c.format().map(EventFormat::parse).orElse(EventFormat.JSON);
        } catch (IllegalArgumentException e) {
            throw new ConfigException(prefix + "FORMAT", "has " + e.getMessage());
        }
        int batchMaxEvents = (int) number(prefix + "BATCH_MAX_EVENTS", c.batchMaxEvents(), 1, 1,
                Subscription.MAX_BATCH_EVENTS);
        long batchMaxWaitMs = number(prefix + "BATCH_MAX_WAIT_MS", c.batchMaxWaitMs(), 0, 0, Subscription.MAX_BATCH_WAIT_MS);
        if (batchMaxEvents > 1 && destination instanceof Destination.Amqp) {
            throw new ConfigException(prefix + "BATCH_MAX_EVENTS", "is " + batchMaxEvents + ", but each event is one AMQP"
                    + " message; batches are for webhooks (leave it out, or 1)");
        }
        if (batchMaxWaitMs > 0 && destination instanceof Destination.Amqp) {
            // it had no effect: nothing waits to fill a batch
            throw new ConfigException(prefix + "BATCH_MAX_WAIT_MS", "is " + batchMaxWaitMs + ", but each event is one AMQP"
                    + " message, sent at once; batches are for webhooks (leave it out, or 0)");
        }
        if (batchMaxEvents > 1 && !format.batches()) {
            throw new ConfigException(prefix + "BATCH_MAX_EVENTS", "is " + batchMaxEvents + ", but binary CloudEvents carry"
                    + " one event per request; use FORMAT=cloudevents for batches (CloudEvents batched mode)");
        }
        Set<String> include = new LinkedHashSet<>(columnNames(prefix + "INCLUDE_COLUMNS", c.includeColumns()));
        Set<String> exclude = new LinkedHashSet<>(columnNames(prefix + "EXCLUDE_COLUMNS", c.excludeColumns()));
        if (!include.isEmpty() && !exclude.isEmpty()) {
            throw new ConfigException(prefix + "INCLUDE_COLUMNS", "and " + prefix + "EXCLUDE_COLUMNS are both set; use one");
        }
        return new Subscription(name, tables, operations, filter, destination, format, batchMaxEvents, batchMaxWaitMs,
                new Projection(include, exclude), true, retry(prefix, c)).withLimits(limits(prefix, c, destination));
    }

    /** MAX_IN_FLIGHT and RATE_LIMIT ({@code 50/s}, {@code 600/min}); neither limits by default. */
    private static DeliveryLimits limits(String prefix, WalhookConfig.SubscriptionConfig c, Destination destination) {
        Optional<Integer> maxInFlight = c.maxInFlight().filter(v -> !v.isBlank()).map(v -> {
            long n = number(prefix + "MAX_IN_FLIGHT", Optional.of(v), 0, Integer.MIN_VALUE, Integer.MAX_VALUE);
            if (n < 1 || n > DeliveryLimits.maxInFlightFor(destination)) {
                throw new ConfigException(prefix + "MAX_IN_FLIGHT", "is " + n + "; it must be from "
                        + DeliveryLimits.maxInFlightBounds(destination));
            }
            return (int) n;
        });
        Optional<DeliveryLimits.Rate> rate = Optional.empty();
        if (c.rateLimit().isPresent() && !c.rateLimit().get().isBlank()) {
            try {
                rate = Optional.of(DeliveryLimits.Rate.parse(c.rateLimit().get()));
            } catch (IllegalArgumentException e) {
                throw new ConfigException(prefix + "RATE_LIMIT", e.getMessage());
            }
        }
        return new DeliveryLimits(maxInFlight, rate);
    }

    /** RETRY_MAX_ATTEMPTS, RETRY_MAX_BACKOFF and RETRY_WINDOW; what is unset comes from WALHOOK_DELIVERY_*. */
    private static RetryPolicy retry(String prefix, WalhookConfig.SubscriptionConfig c) {
        Optional<Integer> maxAttempts = c.retryMaxAttempts().filter(v -> !v.isBlank())
                .map(v -> (int) number(prefix + "RETRY_MAX_ATTEMPTS", Optional.of(v), 0, 1, RetryPolicy.MAX_ATTEMPTS));
        Optional<java.time.Duration> maxBackoff = duration(prefix + "RETRY_MAX_BACKOFF", c.retryMaxBackoff(),
                RetryPolicy.LONGEST_BACKOFF);
        Optional<java.time.Duration> window = duration(prefix + "RETRY_WINDOW", c.retryWindow(), RetryPolicy.LONGEST_WINDOW);
        RetryPolicy policy = new RetryPolicy(maxAttempts, maxBackoff, window);
        if (policy.backoffExceedsWindow()) {
            throw new ConfigException(prefix + "RETRY_MAX_BACKOFF", "is " + c.retryMaxBackoff().get().strip()
                    + ", longer than " + prefix + "RETRY_WINDOW (" + c.retryWindow().get().strip() + "): no wait that"
                    + " long can happen before the request is parked; lower it or lengthen the window");
        }
        return policy;
    }

    /** A Quarkus duration ({@code 30s}, {@code 500ms}, {@code 5m}, {@code 1h}, {@code 2d}, ISO-8601 {@code PT1M}). */
    private static Optional<java.time.Duration> duration(String variable, Optional<String> value,
            java.time.Duration longest) {
        if (value.isEmpty() || value.get().isBlank()) {
            return Optional.empty();
        }
        try {
            return Optional.of(Converters.duration(value.get(), false, longest));
        } catch (IllegalArgumentException e) {
            throw new ConfigException(variable, e.getMessage());
        }
    }

    private static List<String> list(Optional<String> value, String whenUnset) {
        if (value.isEmpty() || value.get().isBlank()) {
            return whenUnset == null ? List.of() : List.of(whenUnset);
        }
        return Arrays.stream(value.get().split(",")).map(String::strip).filter(s -> !s.isEmpty()).toList();
    }

    /** Column names, comma-separated; none when unset or blank. Set, it lists at least one (",": none, read as every column). */
    private static List<String> columnNames(String variable, Optional<String> value) {
        List<String> names = list(value, null);
        if (names.isEmpty() && value.filter(v -> !v.isBlank()).isPresent()) {
            throw new ConfigException(variable, "lists no column; list some, comma-separated, or leave it unset for every"
                    + " column");
        }
        return names;
    }

    static Set<Operation> operations(String variable, Optional<String> value) {
        if (value.isEmpty() || value.get().isBlank()) {
            return EnumSet.copyOf(Operation.SUBSCRIBABLE);
        }
        Set<Operation> operations = EnumSet.noneOf(Operation.class);
        for (String op : list(value, null)) {
            Operation operation = Operation.SUBSCRIBABLE.stream().filter(o -> o.wireName().equals(op)).findFirst()
                    .orElseThrow(() -> new ConfigException(variable, "has '" + op + "', not an operation; use insert,"
                            + " update, delete, truncate, message"));
            operations.add(operation);
        }
        if (operations.isEmpty()) {
            throw new ConfigException(variable, "lists no operation; leave it unset for every operation, or list some of"
                    + " insert, update, delete, truncate, message");
        }
        return operations;
    }

    /** {@link #url} of a destination written now: a port out of range too is refused. */
    static URI writtenUrl(String variable, String text) {
        URI uri = url(variable, text, true);
        UrlAuthority.portInRange(variable, uri); // out of range, every request failed in the client, queued for good
        return uri;
    }

    static URI url(String variable, String text) {
        return url(variable, text, false);
    }

    private static URI url(String variable, String text, boolean written) {
        // a refused URL is never repeated: its query string or user info may be a credential
        URI uri;
        try {
            uri = new URI(text.strip());
            String scheme = uri.getScheme();
            if (scheme != null && !scheme.equals(scheme.toLowerCase(Locale.ROOT))) {
                // schemes are case-insensitive (RFC 3986): HTTPS://... is https://...
                uri = new URI(scheme.toLowerCase(Locale.ROOT) + text.strip().substring(scheme.length()));
            }
        } catch (URISyntaxException e) {
            throw new ConfigException(variable, "is not a URL: " + e.getReason() + " at index " + e.getIndex());
        }
        if (!"http".equals(uri.getScheme()) && !"https".equals(uri.getScheme())) {
            throw new ConfigException(variable, "must be an http:// or https:// URL, not "
                    + UrlAuthority.schemeShown(uri));
        }
        String host = UrlAuthority.host(uri);
        String userInfo = UrlAuthority.rawUserInfo(uri);
        if ((written || host == null) && userInfo == null && userInfoEndsInPath(uri)) {
            // http://user:2024/Zq9xW@hooks.example.com/: a password holding '/' ended the authority, which
            // made "user" the host and the credentials part of the path, shown in views and logs (a stored
            // destination's is read as before)
            throw new ConfigException(variable, "has '@' in its path followed by what looks like a host, after a host"
                    + " without a dot: as where user info holding '/' ends; credentials do not belong in the URL (use a"
                    + " secret or headers), and a path's '@' is written %40");
        }
        if (written && userInfo == null && passwordCutAfterPort(uri)) {
            // http://john.doe:2024/Zq9@10.0.0.7:8080/: a password of digits and then '/', '?' or '#' made the user
            // name the host and its digits the port; the rest of it would go to that host as the path
            throw new ConfigException(variable, "has '@' in its path, query or fragment followed by a host and port or an"
                    + " IP address, after a port: as where user info holding '/', '?' or '#' ends, a password's digits"
                    + " read as the port; credentials do not belong in the URL (use a secret or headers), and a path's"
                    + " '@' is written %40");
        }
        if (host == null && uri.getRawAuthority() != null) {
            throw new ConfigException(variable, UrlAuthority.problem(uri));
        }
        if (host == null || host.isEmpty()) {
            throw new ConfigException(variable, "names no host");
        }
        if (userInfo != null) {
            throw new ConfigException(variable, "must not carry credentials in the URL; use a secret or headers");
        }
        if ("https".equals(uri.getScheme()) && UrlAuthority.underscoredHost(uri)) {
            throw new ConfigException(variable, UrlAuthority.noTlsCheck(host));
        }
        return uri;
    }

    /**
     * Whether the path holds, after a host name without a dot (or none read at all), an '@' inside a
     * segment followed by what looks like a host ({@code host.example}, {@code host:8080},
     * {@code localhost}), or inside its first segment after such a host with a port
     * ({@code svc:2024/Zq9@receiver}): the end of user info whose '/' ended the authority early. An
     * '@' opening a segment ({@code /@me}) or under a host with a dot ({@code /users/a@b.com}) is a path's.
     */
    private static boolean userInfoEndsInPath(URI uri) {
        String path = uri.getRawPath();
        int at = path == null ? -1 : path.indexOf('@');
        if (at <= 0 || path.charAt(at - 1) == '/') {
            return false;
        }
        String host = UrlAuthority.host(uri);
        if (host != null && (host.contains(".") || host.startsWith("["))) {
            return false;
        }
        int firstSegmentEnd = path.indexOf('/', 1);
        if (UrlAuthority.port(uri) >= 0 && (firstSegmentEnd < 0 || firstSegmentEnd > at)) {
            return true; // svc:2024/Zq9@receiver: a name without a dot, a password's digits as its port, then the rest
        }
        String after = path.substring(at + 1).split("/", 2)[0];
        return after.contains(".") || after.contains(":") || after.equalsIgnoreCase("localhost");
    }

    /**
     * Whether, after a port, a path segment holds an '@' followed by a host and port or an IP
     * address ({@code /Zq9@10.0.0.7:8080}), or the query or fragment does with no '=', '&' or '/'
     * before it ({@code ?Zq9@10.0.0.7}), or, with no path, by any host ({@code ?Zq9@hooks.example.com}): user
     * info whose password begins with digits and holds a '/', '?' or '#'. An address with no port of
     * its own ({@code /ops@example.com}) and a query after a path or of {@code key=value} pairs are
     * a URL's own.
     */
    private static boolean passwordCutAfterPort(URI uri) {
        if (UrlAuthority.port(uri) < 0) {
            return false;
        }
        String path = Objects.toString(uri.getRawPath(), "");
        for (String segment : path.split("/")) {
            int at = segment.lastIndexOf('@');
            if (at >= 0 && HOST_AND_PORT_OR_ADDRESS_THEN.matcher(segment.substring(at + 1)).matches()) {
                return true;
            }
        }
        boolean noPath = path.isEmpty() || path.equals("/");
        for (String part : new String[] {uri.getRawQuery(), uri.getRawFragment()}) {
            int at = part == null ? -1 : part.lastIndexOf('@');
            if (at >= 0 && PASSWORD_TAIL.matcher(part.substring(0, at)).matches()) {
                String rest = part.substring(at + 1);
                if (HOST_AND_PORT_OR_ADDRESS_THEN.matcher(rest).matches() || noPath && HOST_THEN.matcher(rest).matches()) {
                    return true;
                }
            }
        }
        return false;
    }

    /** What a password's rest before its '@' may be in a query or fragment: not a pair, nor a fragment's path. */
    private static final java.util.regex.Pattern PASSWORD_TAIL = java.util.regex.Pattern.compile("[^=&/]*");
    /** A host and port or an IPv4 address, then the end or a path, query or fragment. */
    private static final java.util.regex.Pattern HOST_AND_PORT_OR_ADDRESS_THEN = java.util.regex.Pattern.compile(
            "(?:[A-Za-z0-9.-]+:[0-9]{1,5}|[0-9]{1,3}(?:\\.[0-9]{1,3}){3}(?::[0-9]{1,5})?)(?:[/?#].*)?");
    /** A host name with a dot (and maybe a port), then the end or a path, query or fragment. */
    private static final java.util.regex.Pattern HOST_THEN = java.util.regex.Pattern.compile(
            "[A-Za-z0-9-]+(?:\\.[A-Za-z0-9-]+)+(?::[0-9]{1,5})?(?:[/?#].*)?");

    /**
     * The secret the Standard Webhooks specification prints as its example (its test vectors'),
     * which docs everywhere copy: anyone can sign with it, so a receiver checking a signature made
     * with it checks nothing.
     */
    private static final byte[] PUBLISHED = Base64.getDecoder().decode("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");

    /**
     * One or more {@code whsec_<base64>} secrets, separated by spaces or commas (key rotation);
     * {@code refusePublished}: the specification's example ({@link #PUBLISHED}) is refused (a secret
     * written now; one stored by an earlier walhook is read as it was).
     */
    static List<byte[]> secrets(String variable, Optional<String> value, boolean refusePublished) {
        List<byte[]> secrets = new ArrayList<>();
        if (value.isEmpty() || value.get().isBlank()) {
            return secrets;
        }
        int index = 0;
        for (String secret : value.get().strip().split("[\\s,]+")) {
            index++;
            if (!secret.startsWith("whsec_")) {
                throw new ConfigException(variable, "secret " + index + " does not start with whsec_ (Standard Webhooks"
                        + " secrets are whsec_ followed by base64)");
            }
            try {
                byte[] key = Base64.getDecoder().decode(secret.substring("whsec_".length()));
                if (key.length < 16) {
                    throw new ConfigException(variable, "secret " + index + " is " + key.length
                            + " bytes; use at least 16 random bytes (24 to 64 recommended)");
                }
                if (refusePublished && Arrays.equals(PUBLISHED, key)) {
                    throw new ConfigException(variable, "secret " + index + " is the example the Standard Webhooks"
                            + " specification prints: anyone can sign with it; make one of your own"
                            + " (\"whsec_$(openssl rand -base64 32)\")");
                }
                secrets.add(key);
            } catch (IllegalArgumentException e) {
                // not the decoder's words: they quote the character of the secret it could not read
                throw new ConfigException(variable, "secret " + index + " is not base64 after whsec_: " + notBase64(
                        secret.substring("whsec_".length())));
            }
        }
        return secrets;
    }

    /** Where a secret that does not decode is not base64, without a character of it. */
    private static String notBase64(String encoded) {
        for (int i = 0; i < encoded.length(); i++) {
            char c = encoded.charAt(i);
            if (!(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=')) {
                return "its character " + (i + 1) + " is not one of base64's (A-Z, a-z, 0-9, + and /, = to pad)";
            }
        }
        return "its length or padding is not base64's (4 characters for every 3 bytes, = to pad the last)";
    }

    private static long number(String variable, Optional<String> value, long whenUnset, long min, long max) {
        if (value.isEmpty() || value.get().isBlank()) {
            return whenUnset;
        }
        try {
            return Converters.number(value.get(), min, max);
        } catch (IllegalArgumentException e) {
            throw new ConfigException(variable, e.getMessage());
        }
    }

    /**
     * Knative's {@code K_CE_OVERRIDES}: {@code {"extensions": {"name": "value", ...}}}, extension
     * attributes added to every CloudEvent.
     */
    public static Map<String, String> cloudEventsOverrides(String json) {
        if (json == null || json.isBlank()) {
            return Map.of();
        }
        try {
            com.fasterxml.jackson.databind.JsonNode root = new com.fasterxml.jackson.databind.ObjectMapper().readTree(json);
            com.fasterxml.jackson.databind.JsonNode extensions = root == null ? null : root.get("extensions");
            if (extensions == null || !extensions.isObject()) {
                throw new ConfigException("K_CE_OVERRIDES", "must be {\"extensions\": {\"name\": \"value\"}}");
            }
            Map<String, String> result = new java.util.LinkedHashMap<>();
            for (java.util.Iterator<Map.Entry<String, com.fasterxml.jackson.databind.JsonNode>> it = extensions.fields();
                    it.hasNext(); ) {
                Map.Entry<String, com.fasterxml.jackson.databind.JsonNode> e = it.next();
                if (!e.getKey().matches("[a-z0-9]{1,20}")) {
                    throw new ConfigException("K_CE_OVERRIDES", "has extension '" + e.getKey()
                            + "'; CloudEvents attribute names are 1 to 20 lower-case letters and digits");
                }
                if (EventEncoder.OWN_ATTRIBUTES.contains(e.getKey())) {
                    // {"id": "x"} gave every event one id: receivers dropping duplicates kept only the first
                    throw new ConfigException("K_CE_OVERRIDES", "has extension '" + e.getKey() + "', an attribute of its"
                            + " own each event has (" + String.join(", ", EventEncoder.OWN_ATTRIBUTES) + "); extensions"
                            + " add attributes, they do not replace these");
                }
                result.put(e.getKey(), e.getValue().isTextual() ? e.getValue().asText() : e.getValue().toString());
            }
            return result;
        } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
            throw new ConfigException("K_CE_OVERRIDES", "is not JSON: " + e.getOriginalMessage());
        }
    }
}
