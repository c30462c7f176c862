package io.walhook.api;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;

import jakarta.enterprise.event.Observes;
import jakarta.inject.Singleton;

import io.vertx.core.buffer.Buffer;
import io.vertx.ext.web.Router;
import io.vertx.ext.web.RoutingContext;

/**
 * {@code GET /q/openapi}: the contract, {@code openapi.yaml} from the repository root, byte for
 * byte as written (the build puts it in the jar as {@code META-INF/openapi.yaml}). Served by this
 * route rather than an OpenAPI extension: nothing is scanned or generated, so nothing is parsed,
 * rebuilt and written again while walhook starts. No token: it describes the API, not its data.
 */
@Singleton
public class OpenApiRoute {

    /** Where the build puts the contract. */
    static final String RESOURCE = "META-INF/openapi.yaml";
    static final String MEDIA_TYPE = "application/yaml;charset=UTF-8";

    private volatile Buffer document;

    void install(@Observes Router router) {
        router.get("/q/openapi").handler(this::serve);
    }

    private void serve(RoutingContext context) {
        String format = context.request().getParam("format");
        if (format != null && !format.equalsIgnoreCase("yaml")) {
            ApiProblem problem = new ApiProblem(400, "Bad Request", "format is '" + format
                    + "'; the contract is served as written, in YAML: leave format out or ask for yaml", "format");
            context.response().setStatusCode(400).putHeader("Content-Type", ApiProblem.MEDIA_TYPE).end(problem.toJson());
            return;
        }
        context.response().putHeader("Content-Type", MEDIA_TYPE).end(document());
    }

    private Buffer document() {
        Buffer loaded = document;
        if (loaded == null) {
            try (InputStream in = OpenApiRoute.class.getClassLoader().getResourceAsStream(RESOURCE)) {
                if (in == null) {
                    throw new IllegalStateException(RESOURCE + " is not in the jar");
                }
                loaded = Buffer.buffer(in.readAllBytes());
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            document = loaded;
        }
        return loaded;
    }
}
