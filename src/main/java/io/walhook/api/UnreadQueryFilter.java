package io.walhook.api;

import java.util.Set;

import jakarta.ws.rs.core.Response;

import org.jboss.resteasy.reactive.server.ServerRequestFilter;
import org.jboss.resteasy.reactive.server.SimpleResourceInfo;

import io.vertx.core.http.HttpServerRequest;

/**
 * Refuses a query parameter an operation does not take with a 400 naming it, as the operations that
 * take some do ({@link QueryParameters}): {@code POST /subscriptions?dry_run=true} would otherwise
 * create the subscription, and {@code GET /status?verbose} answer as if it had been read. Runs
 * after the token check and the match (a request the token refuses is a 401 whatever its query).
 */
public class UnreadQueryFilter {

    /** The operations that read their query themselves, as {@code Class.method}. */
    private static final Set<String> READ_THEIR_QUERY = Set.of("SubscriptionResource.list",
            "DeadLetterResource.deadLetters", "DeadLetterResource.replay", "DeadLetterResource.dropDeadLetters");

    @ServerRequestFilter
    public Response check(SimpleResourceInfo resource, HttpServerRequest request) {
        String query = request.query();
        if (query == null || query.isEmpty()
                || READ_THEIR_QUERY.contains(resource.getResourceClass().getSimpleName() + "." + resource.getMethodName())) {
            return null;
        }
        try {
            QueryParameters.parse(query, Set.of());
            return null;
        } catch (ApiProblem problem) {
            return problem.toResponse();
        }
    }
}
