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
 * rebuilt and written again while walhook starts. As Quarkus's own endpoint, it answers in JSON to
 * {@code ?format=json} or an {@code Accept} asking for JSON (not YAML): the same document, converted
 * at the first such request. No token: it describes the API, not its data.
 */
@Singleton
public class OpenApiRoute {

    /** Where the build puts the contract. */
    static final String RESOURCE = "META-INF/openapi.yaml";
    static final String MEDIA_TYPE = "application/yaml;charset=UTF-8";
    static final String JSON_MEDIA_TYPE = "application/json;charset=UTF-8";

    private volatile Buffer document;
    private volatile Buffer json;

    void install(@Observes Router router) {
        router.get("/q/openapi").handler(this::serve);
    }

    private void serve(RoutingContext context) {
        String format = context.request().getParam("format");
        boolean asJson;
        if (format == null) {
            String accept = context.request().getHeader("Accept");
            asJson = accept != null && accept.contains("application/json") && !accept.contains("yaml");
        } else if (format.equalsIgnoreCase("yaml") || format.equalsIgnoreCase("json")) {
            asJson = format.equalsIgnoreCase("json");
        } else {
            ApiProblem problem = new ApiProblem(400, "Bad Request", "format is '" + format
                    + "'; the contract is served in YAML (as written) or JSON: format=yaml or format=json", "format");
            context.response().setStatusCode(400).putHeader("Content-Type", ApiProblem.MEDIA_TYPE).end(problem.toJson());
            return;
        }
        if (asJson) {
            context.response().putHeader("Content-Type", JSON_MEDIA_TYPE).end(json());
        } else {
            context.response().putHeader("Content-Type", MEDIA_TYPE).end(document());
        }
    }

    /** The document as JSON: read with SnakeYAML's safe loader (maps, lists and scalars only), written by Jackson. */
    private Buffer json() {
        Buffer converted = json;
        if (converted == null) {
            org.yaml.snakeyaml.LoaderOptions options = new org.yaml.snakeyaml.LoaderOptions();
            Object tree = new org.yaml.snakeyaml.Yaml(new org.yaml.snakeyaml.constructor.SafeConstructor(options))
                    .load(document().toString(java.nio.charset.StandardCharsets.UTF_8));
            try {
                converted = Buffer.buffer(new com.fasterxml.jackson.databind.ObjectMapper().writeValueAsBytes(tree));
            } catch (com.fasterxml.jackson.core.JsonProcessingException e) {
                throw new IllegalStateException("cannot write " + RESOURCE + " as JSON", e);
            }
            json = converted;
        }
        return converted;
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
