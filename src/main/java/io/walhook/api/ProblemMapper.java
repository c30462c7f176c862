package io.walhook.api;

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

    @ServerExceptionMapper
    public Response unexpected(RuntimeException e) {
        LOG.errorf(e, "unexpected error in the management API: %s", e.getMessage());
        return new ApiProblem(500, "Internal Server Error", "walhook could not handle this request; see its log", null)
                .toResponse();
    }
}
