package io.walhook.api;

import java.net.URI;
import java.net.URISyntaxException;

import jakarta.enterprise.event.Observes;
import jakarta.inject.Singleton;

import org.jboss.logging.Logger;

import io.netty.handler.codec.http.HttpResponseStatus;
import io.vertx.core.http.HttpServerRequest;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;

/**
 * Refuses a request whose target cannot be read with a 400 problem naming what is wrong: a path or
 * query that is not percent-encoded correctly (a {@code %} not followed by two hex digits, or bytes
 * that are not UTF-8; a query's problem names its parameter), or a target that is no URI at all
 * ({@link URI} refuses it: a {@code "}, {@code <} or {@code [} in the path). Quarkus makes that
 * last check itself, before any route, and answers a bare 400 with no body; {@code WalhookMain}
 * turns it off so that this handler, the first route of every request, makes it instead. It reads
 * the undecoded path and query, so no route matching decodes them first. A request Vert.x itself
 * fails before the REST layer is answered as a problem as well.
 */
@Singleton
public class RequestTargetFilter {

    private static final Logger LOG = Logger.getLogger(RequestTargetFilter.class);

    void install(@Observes Router router) {
        // no path of its own: matching it decodes nothing
        router.route().order(Integer.MIN_VALUE).handler(this::check).failureHandler(this::failed);
    }

    /**
     * A request Vert.x failed before any resource saw it (an HTTP/1.1 request without a Host
     * header, say) is answered as a problem too, not with Quarkus's own JSON error page.
     */
    private void failed(RoutingContext context) {
        if (context.response().headWritten()) {
            context.next();
            return;
        }
        int status = context.statusCode() >= 400 && context.statusCode() <= 599 ? context.statusCode() : 500;
        Throwable failure = context.failure();
        String detail;
        if (status >= 500) {
            LOG.errorf(failure, "unexpected error handling %s %s: %s", context.request().method(),
                    abbreviate(String.valueOf(context.request().path())),
                    failure == null ? "status " + status : failure.getMessage());
            detail = "walhook could not handle this request; see its log";
        } else {
            detail = failure != null && failure.getMessage() != null ? failure.getMessage()
                    : HttpResponseStatus.valueOf(status).reasonPhrase();
        }
        ApiProblem problem = new ApiProblem(status, HttpResponseStatus.valueOf(status).reasonPhrase(), detail, null);
        context.response().setStatusCode(status).putHeader("Content-Type", ApiProblem.MEDIA_TYPE).end(problem.toJson());
    }

    private void check(RoutingContext context) {
        HttpServerRequest request = context.request();
        ApiProblem problem = problem(request.uri(), request.path(), request.query());
        if (problem == null && !authority(request.host())) {
            // Vert.x takes any "[...]" for an address: a create's Location, made from it, failed once it was stored
            problem = new ApiProblem(400, "Bad Request", "the Host header is not a host and port as a URL has them", null);
        }
        if (problem == null && tooLarge(request.getHeader("Content-Length"))) {
            // before the body handler, which answers a bare 413
            problem = new ApiProblem(413, "Content Too Large", "the body is larger than 1 MiB, which no request of this"
                    + " API needs", null);
            closeUnread(context);
        }
        if (problem == null) {
            context.next();
            return;
        }
        context.response().setStatusCode(problem.status()).putHeader("Content-Type", ApiProblem.MEDIA_TYPE)
                .end(problem.toJson());
    }

    /** Whether a request's host (and port) reads as a URL's authority: none given passes, Vert.x answers that. */
    static boolean authority(String host) {
        if (host == null || host.indexOf('[') < 0 && host.indexOf(']') < 0) {
            return true; // Vert.x parsed it as a name or an IPv4 address and port
        }
        try {
            new java.net.URI("http", host, "/", null, null).parseServerAuthority();
            return true;
        } catch (java.net.URISyntaxException e) {
            return false;
        }
    }

    /** How long a refused body is thrown away with nothing arriving, and at most in all, before its connection closes. */
    static final long LINGER_IDLE_MILLIS = 1_000;
    static final long LINGER_MAX_MILLIS = 10_000;

    /**
     * Ends a request whose body is refused unread once the answer is out. Over HTTP/2 its stream is
     * reset with {@code NO_ERROR}, which tells the client to stop sending and keep the answer (RFC
     * 9113, 8.1). Over HTTP/1.x the answer says {@code Connection: close}, and the connection
     * closes once the body that follows is read and thrown away: when it ends, when nothing has
     * come for {@link #LINGER_IDLE_MILLIS}, or after {@link #LINGER_MAX_MILLIS} at most. Most
     * clients write their whole body before they read, and a socket closed with bytes unread
     * resets the connection: the client's write fails and the answer it has not read yet is lost.
     * Kept alive instead, the connection would wait for the whole body a request says follows.
     */
    private static void closeUnread(RoutingContext context) {
        HttpServerRequest request = context.request();
        io.vertx.core.http.HttpServerResponse response = context.response();
        io.vertx.core.http.HttpConnection connection = request.connection();
        if (request.version() == io.vertx.core.http.HttpVersion.HTTP_2) {
            response.endHandler(answered -> {
                if (!request.isEnded()) {
                    response.reset(0);
                }
            });
            return;
        }
        response.putHeader("Connection", "close");
        if (request.isEnded()) {
            response.endHandler(answered -> connection.close());
            return;
        }
        long start = System.nanoTime();
        long[] lastRead = {start};
        request.handler(thrownAway -> lastRead[0] = System.nanoTime());
        long timer = context.vertx().setPeriodic(LINGER_IDLE_MILLIS / 4, id -> {
            long now = System.nanoTime();
            if (now - lastRead[0] > LINGER_IDLE_MILLIS * 1_000_000 || now - start > LINGER_MAX_MILLIS * 1_000_000) {
                context.vertx().cancelTimer(id);
                connection.close();
            }
        });
        request.endHandler(ended -> {
            context.vertx().cancelTimer(timer);
            connection.close();
        });
        request.resume();
    }

    /**
     * The most a body may hold, as {@code quarkus.http.limits.max-body-size} says (application.properties):
     * a subscription, a patch or a backfill is a few KB.
     */
    static final long MAX_BODY_BYTES = 1 << 20;

    /** Whether a request's Content-Length says more than {@link #MAX_BODY_BYTES} (a malformed one is Vert.x's to refuse). */
    static boolean tooLarge(String contentLength) {
        if (contentLength == null) {
            return false;
        }
        try {
            return Long.parseLong(contentLength.strip()) > MAX_BODY_BYTES;
        } catch (NumberFormatException e) {
            return false;
        }
    }

    /** Why this request target (and its raw path and query) cannot be read; null when it can. */
    static ApiProblem problem(String target, String path, String query) {
        if (target == null || path == null) {
            return new ApiProblem(400, "Bad Request", "the request has no target", null);
        }
        if (QueryParameters.percentDecode(path, false) == null) {
            int segment = 0;
            String[] segments = path.split("/", -1);
            while (segment < segments.length && QueryParameters.percentDecode(segments[segment], false) != null) {
                segment++;
            }
            return new ApiProblem(400, "Bad Request", "the request path " + abbreviate(path) + " is not"
                    + " percent-encoded correctly ('%' must be followed by two hex digits, encoding UTF-8)",
                    culprit(segments, segment));
        }
        try {
            QueryParameters.checkEncoding(query);
        } catch (ApiProblem badQuery) {
            return badQuery;
        }
        try {
            new URI(target);
            return null;
        } catch (URISyntaxException e) {
            return new ApiProblem(400, "Bad Request", "the request target " + abbreviate(target) + " is not a URI: "
                    + e.getReason() + " at index " + e.getIndex(), culprit(target, path, e.getIndex()));
        }
    }

    /**
     * What a problem at {@code index} of the target names as its {@code field}: the query parameter
     * holding it (a character a URI does not take), else as {@link #culprit(String[], int)} for the
     * path's segment holding it (the target may be in absolute form, its path after the authority).
     */
    static String culprit(String target, String path, int index) {
        int start = target.indexOf(path);
        int at = index - Math.max(0, start);
        String[] segments = path.split("/", -1);
        if (start < 0 || index < 0) {
            return culprit(segments, segments.length);
        }
        if (at >= path.length()) {
            int query = target.indexOf('?', start + path.length());
            if (query >= 0 && index > query) {
                int from = target.lastIndexOf('&', index - 1);
                String pair = target.substring(Math.max(from, query) + 1);
                int end = pair.indexOf('&');
                pair = end < 0 ? pair : pair.substring(0, end);
                int equals = pair.indexOf('=');
                String name = equals < 0 ? pair : pair.substring(0, equals);
                String decoded = QueryParameters.percentDecode(name, true);
                return decoded == null || decoded.isEmpty() ? "query" : decoded;
            }
            return culprit(segments, segments.length);
        }
        return culprit(segments, path.substring(0, at).split("/", -1).length - 1);
    }

    /**
     * What a problem with the path's segment at {@code index} names as its {@code field}: the path
     * parameter of openapi.yaml that segment is ({@code id} in /subscriptions/{id}..., {@code bid} in
     * .../backfills/{bid}...), else {@code path}.
     */
    static String culprit(String[] segments, int index) {
        if (index == 2 && segments.length > 2 && segments[1].equals("subscriptions")) {
            return "id";
        }
        if (index == 4 && segments.length > 4 && segments[1].equals("subscriptions") && segments[3].equals("backfills")) {
            return "bid";
        }
        return "path";
    }

    private static String abbreviate(String text) {
        return text.length() > 200 ? text.substring(0, 200) + "..." : text;
    }
}
