package io.walhook.api;

import jakarta.ws.rs.core.Response;

import io.quarkus.runtime.annotations.RegisterForReflection;

/**
 * An RFC 9457 problem ({@code application/problem+json}); {@code field} is a JSON pointer to the
 * request field at fault, when there is one. Thrown by resources, written by {@link ProblemMapper}.
 */
public final class ApiProblem extends RuntimeException {

    public static final String MEDIA_TYPE = "application/problem+json";
    private static final com.fasterxml.jackson.databind.ObjectMapper JSON = new com.fasterxml.jackson.databind.ObjectMapper();

    /** The body. */
    @RegisterForReflection
    public record Body(String type, String title, int status, String detail, String field) {
    }

    private final int status;
    private final String title;
    private final String field;
    private final String authenticate;

    public ApiProblem(int status, String title, String detail, String field) {
        this(status, title, detail, field, null);
    }

    private ApiProblem(int status, String title, String detail, String field, String authenticate) {
        super(detail);
        this.status = status;
        this.title = title;
        this.field = field;
        this.authenticate = authenticate;
    }

    public static ApiProblem unauthorized(String detail) {
        return new ApiProblem(401, "Unauthorized", detail, null, "Bearer realm=\"walhook\"");
    }

    public int status() {
        return status;
    }

    /** The body as JSON, for a response written below the REST layer (no field when there is none). */
    public String toJson() {
        com.fasterxml.jackson.databind.node.ObjectNode body = JSON.createObjectNode();
        body.put("type", "about:blank");
        body.put("title", title);
        body.put("status", status);
        body.put("detail", getMessage());
        if (field != null) {
            body.put("field", field);
        }
        return body.toString();
    }

    public Response toResponse() {
        Response.ResponseBuilder response = Response.status(status).type(MEDIA_TYPE)
                .entity(new Body("about:blank", title, status, getMessage(), field));
        if (authenticate != null) {
            response.header("WWW-Authenticate", authenticate);
        }
        return response.build();
    }
}
