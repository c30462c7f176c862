package io.walhook.api;

import java.sql.SQLException;
import java.util.List;
import java.util.Optional;
import java.util.UUID;

import io.walhook.routing.Subscription;
import io.walhook.routing.SubscriptionStore;
import io.walhook.pipeline.ReplicationSource;

/**
 * Finds the subscription a request's {@code {id}} names, for every resource under
 * {@code /subscriptions/{id}}: a configured one as {@code config:<name>}, a created one by its UUID
 * (in either case); anything else is a 404 problem naming the id.
 */
final class SubscriptionLookup {

    static final String CONFIGURED = "config:";
    static final java.util.regex.Pattern UUID_TEXT = java.util.regex.Pattern.compile(
            "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}");

    private final SubscriptionStore store;
    private final ReplicationSource source;

    SubscriptionLookup(SubscriptionStore store, ReplicationSource source) {
        this.store = store;
        this.source = source;
    }

    /**
     * The subscription as routing has it, reloaded first: routing picks changes up within half a
     * second, but a test-fire or replay right after a PUT must already use the new destination.
     */
    Subscription inForce(String id) throws SQLException {
        String subscriptionId = existingId(id);
        source.registry().refresh(store); // through the API's pool
        return source.registry().router().subscriptions().stream()
                .filter(s -> s.id().equals(subscriptionId)).findFirst().orElseThrow(() -> notFound(id));
    }

    /**
     * As {@link #inForce}, or else the stored subscription held out of force (a configured one of
     * the same name shadows it): what it keeps (its backfills, running but waiting) is still read
     * and controlled through it, as its own view is.
     */
    Subscription inForceOrHeld(String id) throws SQLException {
        try {
            return inForce(id);
        } catch (ApiProblem notInForce) {
            if (notInForce.status() != 404 || !UUID_TEXT.matcher(id).matches()) {
                throw notInForce;
            }
            return store.find(UUID.fromString(id)).map(SubscriptionStore.Stored::subscription).orElseThrow(() -> notInForce);
        }
    }

    /** The subscription's id, as its delivery state is kept under. */
    String existingId(String id) throws SQLException {
        Optional<Subscription> configured = configured(id);
        if (configured.isPresent()) {
            return configured.get().id();
        }
        return store.find(uuid(id)).orElseThrow(() -> notFound(id)).subscription().id();
    }

    List<Subscription> configured() {
        return source.registry() == null ? List.of()
                : source.registry().router().subscriptions().stream().filter(Subscription::readOnly).toList();
    }

    Optional<Subscription> configured(String id) {
        return id.startsWith(CONFIGURED) ? configured().stream()
                .filter(s -> s.name().equals(id.substring(CONFIGURED.length()))).findFirst() : Optional.empty();
    }

    /**
     * A created subscription's id: a UUID in its canonical form, 8-4-4-4-12 hex digits, in either
     * case (RFC 9562 reads them case-insensitively); anything else names no subscription (404).
     * {@link UUID#fromString} alone would also take {@code 1-1-1-1-1} for another id.
     */
    static UUID uuid(String id) {
        if (!UUID_TEXT.matcher(id).matches()) {
            throw notFound(id);
        }
        return UUID.fromString(id);
    }

    /**
     * The id as walhook answers with it: a UUID in lower case, whatever case it was given in;
     * a configured subscription's {@code config:<name>} and anything else as given.
     */
    static String canonical(String id) {
        return UUID_TEXT.matcher(id).matches() ? id.toLowerCase(java.util.Locale.ROOT) : id;
    }

    static ApiProblem notFound(String id) {
        return new ApiProblem(404, "Not Found", "no subscription " + canonical(id), null);
    }
}
