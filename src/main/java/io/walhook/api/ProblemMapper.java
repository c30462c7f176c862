package io.walhook.api;

import java.sql.SQLException;

import jakarta.ws.rs.NotAllowedException;
import jakarta.ws.rs.NotFoundException;
import jakarta.ws.rs.NotSupportedException;
import jakarta.ws.rs.WebApplicationException;
import jakarta.ws.rs.core.Response;

import org.jboss.logging.Logger;
import org.jboss.resteasy.reactive.server.ServerExceptionMapper;

/** Every error of the API as {@code application/problem+json}; no request body can cause a 500. */
public class ProblemMapper {

    private static final Logger LOG = Logger.getLogger(ProblemMapper.class);

    @ServerExceptionMapper
    public Response problem(ApiProblem problem) {
        return problem.toResponse();
    }

    /**
     * A method a path of the API does not take is a 405 naming those it does in {@code Allow}: RESTEasy
     * gives none, and answers some such requests as a 404 (a GET of {@code .../dead-letters/replay}).
     */
    @ServerExceptionMapper
    public Response webApplication(WebApplicationException e, io.vertx.core.http.HttpServerRequest request) {
        int status = e.getResponse().getStatus();
        java.util.Set<String> allowed = status == 404 || status == 405 ? AllowedMethods.of(request.path()) : java.util.Set.of();
        if (!allowed.isEmpty() && !allowed.contains(request.method().name())) {
            return Response.fromResponse(new ApiProblem(405, "Method Not Allowed", "this method is not allowed here; "
                    + String.join(", ", allowed) + " are", null).toResponse()).header("Allow", String.join(", ", allowed)).build();
        }
        String detail = e instanceof NotFoundException ? "no such resource"
                : e instanceof NotAllowedException ? "this method is not allowed here"
                : e instanceof NotSupportedException ? "send the body as application/json"
                : e.getMessage();
        Response problem = new ApiProblem(status, Response.Status.fromStatusCode(status) == null ? "Error"
                : Response.Status.fromStatusCode(status).getReasonPhrase(), detail, null).toResponse();
        String allow = e.getResponse().getHeaderString("Allow"); // a 405 of a path the contract does not match as written
        return allow == null ? problem : Response.fromResponse(problem).header("Allow", allow).build();
    }

    /**
     * The state tables in the source database: unreachable, or too busy to answer in time, is a 503
     * the client may retry; anything else a 500.
     */
    @ServerExceptionMapper
    public Response database(SQLException e) {
        String state = e.getSQLState();
        if (state == null) {
            LOG.warnf("management API: no connection to the source database: %s", e.getMessage());
            return new ApiProblem(503, "Service Unavailable", "no connection to the source database within 5 s: the"
                    + " database did not take a new one in time, or the management API's own pool"
                    + " (QUARKUS_DATASOURCE_API_JDBC_MAX_SIZE, 2) was busy with other requests; retry", null).toResponse();
        }
        if ("23505".equals(state) && e instanceof org.postgresql.util.PSQLException p && p.getServerErrorMessage() != null
                && "subscription_name_key".equals(p.getServerErrorMessage().getConstraint())) {
            // another request took the name between this one's check and its write
            String detail = p.getServerErrorMessage().getDetail();
            return new ApiProblem(409, "Conflict", "another request took this name at the same time"
                    + (detail == null ? "" : ": " + firstLine(detail)), "/name").toResponse();
        }
        if (busy(state)) {
            LOG.warnf("management API: the source database gave up on a statement (%s): %s", state, e.getMessage());
            return new ApiProblem(503, "Service Unavailable", "the source database gave up on this request's statement ("
                    + firstLine(e.getMessage()) + "): it waited too long for a lock or to finish, or was cancelled; retry", null)
                    .toResponse();
        }
        if (!unreachable(state)) {
            LOG.errorf(e, "unexpected database error in the management API: %s", e.getMessage());
            return new ApiProblem(500, "Internal Server Error", "walhook could not handle this request; see its log", null)
                    .toResponse();
        }
        LOG.warnf("management API: the source database cannot be reached: %s", e.getMessage());
        return unavailable(e.getMessage()).toResponse();
    }

    /**
     * Whether the server gave up on the statement and a retry may succeed: cancelled (its {@code
     * statement_timeout}, or an operator), a lock not granted in time, a serialization failure or
     * deadlock.
     */
    static boolean busy(String sqlState) {
        return java.util.Set.of("57014", "55P03", "40001", "40P01").contains(sqlState);
    }

    private static String firstLine(String message) {
        return message == null ? "" : message.lines().findFirst().orElse("");
    }

    /**
     * Whether a failure with this SQLSTATE means the database could not be reached or would not
     * serve (connection exception 08, operator intervention 57P, insufficient resources 53, walhook's
     * credentials refused 28: a password or certificate rotated, pg_hba.conf changed), or came with no
     * state at all (the pool timing out for a connection).
     */
    static boolean unreachable(String sqlState) {
        return sqlState == null || sqlState.startsWith("08") || sqlState.startsWith("57P") || sqlState.startsWith("53")
                || sqlState.startsWith("28");
    }

    static ApiProblem unavailable(String message) {
        String detail = firstLine(message);
        return new ApiProblem(503, "Service Unavailable", "the source database cannot be reached"
                + (detail.isBlank() ? "" : ": " + detail), null);
    }

    @ServerExceptionMapper
    public Response unexpected(RuntimeException e) {
        LOG.errorf(e, "unexpected error in the management API: %s", e.getMessage());
        return new ApiProblem(500, "Internal Server Error", "walhook could not handle this request; see its log", null)
                .toResponse();
    }
}
