package io.walhook.api;

import jakarta.ws.rs.core.Response;

import org.jboss.resteasy.reactive.server.ServerRequestFilter;
import org.jboss.resteasy.reactive.server.SimpleResourceInfo;

import io.vertx.core.http.HttpMethod;
import io.vertx.core.http.HttpServerRequest;

/**
 * Refuses a body sent to a write that takes none with a 400, as {@link UnreadQueryFilter} refuses
 * an unread query: {@code DELETE /subscriptions/{id}/dead-letters} with {@code {"id": [17]}}
 * dropped the whole queue (its ids are query parameters, and none meant "all"), and
 * {@code POST .../pause} with {@code {"paused": false}} paused. A body is there when the request
 * says its {@code Content-Length} is above 2: {@code {}} or {@code []} (which some clients send
 * with every POST) says nothing, and a chunked body (some clients send an empty one with every
 * POST) is not read to find out. Reads are left alone.
 */
public class UnreadBodyFilter {

    @ServerRequestFilter
    public Response check(SimpleResourceInfo resource, HttpServerRequest request) {
        HttpMethod method = request.method();
        if (method == HttpMethod.GET || method == HttpMethod.HEAD || method == HttpMethod.OPTIONS || !hasBody(request)) {
            return null;
        }
        for (Class<?> parameter : resource.parameterTypes()) {
            if (parameter == byte[].class) {
                return null; // the operation reads its body
            }
        }
        return new ApiProblem(400, "Bad Request", method.name() + " " + request.path() + " takes no body; "
                + (request.path().contains("/dead-letters") ? "the events it acts on are chosen by the query (?id=1&id=2),"
                        + " and none there means all of them" : "what it does is the path's")
                + ": send none", "").toResponse();
    }

    /** Whether the request says it carries a body of more than 2 bytes (more than {@code {}}). */
    private static boolean hasBody(HttpServerRequest request) {
        String length = request.getHeader("content-length");
        if (length == null) {
            return false;
        }
        try {
            return Long.parseLong(length.strip()) > 2;
        } catch (NumberFormatException e) {
            return false; // Vert.x refuses such a request itself
        }
    }
}
