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

    @ServerExceptionMapper
    public Response webApplication(WebApplicationException e) {
        int status = e.getResponse().getStatus();
        String detail = e instanceof NotFoundException ? "no such resource"
                : e instanceof NotAllowedException ? "this method is not allowed here"
                : e instanceof NotSupportedException ? "send the body as application/json"
                : e.getMessage();
        return new ApiProblem(status, Response.Status.fromStatusCode(status) == null ? "Error"
                : Response.Status.fromStatusCode(status).getReasonPhrase(), detail, null).toResponse();
    }

    /** The state tables in the source database: unreachable is a 503 the client may retry, anything else a 500. */
    @ServerExceptionMapper
    public Response database(SQLException e) {
        if (!unreachable(e.getSQLState())) {
            LOG.errorf(e, "unexpected database error in the management API: %s", e.getMessage());
            return new ApiProblem(500, "Internal Server Error", "walhook could not handle this request; see its log", null)
                    .toResponse();
        }
        LOG.warnf("management API: the source database cannot be reached: %s", e.getMessage());
        return unavailable(e.getMessage()).toResponse();
    }

    /**
     * Whether a failure with this SQLSTATE means the database could not be reached or would not
     * serve (connection exception 08, operator intervention 57P, insufficient resources 53), or
     * came with no state at all (the pool timing out for a connection).
     */
    static boolean unreachable(String sqlState) {
        return sqlState == null || sqlState.startsWith("08") || sqlState.startsWith("57P") || sqlState.startsWith("53");
    }

    static ApiProblem unavailable(String message) {
        String detail = message == null ? "" : message.lines().findFirst().orElse("");
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
