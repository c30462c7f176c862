package io.walhook.api;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Collections;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.stream.Collectors;

import org.junit.jupiter.api.extension.AfterEachCallback;
import org.junit.jupiter.api.extension.BeforeEachCallback;
import org.junit.jupiter.api.extension.ExtensionContext;

import com.atlassian.oai.validator.OpenApiInteractionValidator;
import com.atlassian.oai.validator.model.Request;
import com.atlassian.oai.validator.report.ValidationReport;
import com.atlassian.oai.validator.restassured.RestAssuredRequest;
import com.atlassian.oai.validator.restassured.RestAssuredResponse;

import io.restassured.RestAssured;
import io.restassured.filter.Filter;
import io.restassured.filter.FilterContext;
import io.restassured.response.Response;
import io.restassured.specification.FilterableRequestSpecification;
import io.restassured.specification.FilterableResponseSpecification;
import io.swagger.v3.oas.models.OpenAPI;
import io.swagger.v3.oas.models.media.MediaType;
import io.swagger.v3.oas.models.media.Schema;
import io.swagger.v3.parser.OpenAPIV3Parser;
import io.swagger.v3.parser.core.models.ParseOptions;
import io.swagger.v3.parser.core.models.SwaggerParseResult;

/**
 * The contract test: with {@code @ExtendWith(OpenApiContract.class)} on an API test, every
 * RestAssured exchange it makes is checked against {@code openapi.yaml}: the path and method are
 * documented, the request matches (unless the test sends it through {@link #responsesOnly()}
 * because it is malformed on purpose), the status code is documented for the operation, the
 * content type is one it lists, and the body matches its schema. Object schemas that do not say
 * otherwise are checked with {@code additionalProperties: false}, so a field the code returns
 * but the contract does not document fails too. Quarkus's own endpoints ({@code /q/...}) are
 * not part of the contract and pass through. A test whose RestAssured is not the one the filter
 * is installed on (another class loader) fails, so a broken wiring cannot pass silently.
 */
public final class OpenApiContract implements BeforeEachCallback, AfterEachCallback {

    /** Where the contract lives: the repository root (also copied to META-INF and served at /q/openapi). */
    static final Path SPEC = Path.of("openapi.yaml");

    private static final Filter RESPONSES_ONLY = new Filter() {
        @Override
        public Response filter(FilterableRequestSpecification request, FilterableResponseSpecification response,
                FilterContext context) {
            return context.next(request, response);
        }

        @Override
        public String toString() {
            return "OpenApiContract.responsesOnly()";
        }
    };

    /** Exchanges checked so far (the contract test's own proof that the filter runs). */
    static final AtomicInteger CHECKED = new AtomicInteger();
    private static volatile OpenApiInteractionValidator validator;

    private static final Filter FILTER = new Filter() {
        @Override
        public Response filter(FilterableRequestSpecification request, FilterableResponseSpecification responseSpec,
                FilterContext context) {
            Response response = context.next(request, responseSpec);
            String path = request.getDerivedPath();
            if (path.startsWith("/q/")) {
                return response;
            }
            boolean responsesOnly = request.getDefinedFilters().contains(RESPONSES_ONLY);
            check(RestAssuredRequest.of(request), RestAssuredResponse.of(response), responsesOnly,
                    () -> abbreviate(response.asString()));
            CHECKED.incrementAndGet();
            return response;
        }

        @Override
        public String toString() {
            return "OpenApiContract";
        }
    };

    /**
     * Add to a request ({@code given().filter(OpenApiContract.responsesOnly())}) that breaks the
     * contract on purpose (no token, garbage body, wrong content type): its response is still checked.
     */
    public static Filter responsesOnly() {
        return RESPONSES_ONLY;
    }

    /** The validator over openapi.yaml, object schemas closed (see the class comment). */
    static OpenApiInteractionValidator validator() {
        OpenApiInteractionValidator v = validator;
        if (v == null) {
            synchronized (OpenApiContract.class) {
                if (validator == null) {
                    validator = OpenApiInteractionValidator.createFor(strict(parse(SPEC))).build();
                }
                v = validator;
            }
        }
        return v;
    }

    /**
     * Checks one exchange; an {@link AssertionError} listing every mismatch when it breaks the contract.
     * {@code responsesOnly}: the request is not checked, only the response against its operation.
     */
    static void check(Request request, com.atlassian.oai.validator.model.Response response, boolean responsesOnly,
            java.util.function.Supplier<String> body) {
        ValidationReport report = responsesOnly
                ? validator().validateResponse(request.getPath(), request.getMethod(), response)
                : validator().validate(request, response);
        if (report.hasErrors()) {
            String problems = report.getMessages().stream()
                    .filter(m -> m.getLevel() == ValidationReport.Level.ERROR)
                    .map(m -> "  " + m.getKey() + ": " + m.getMessage()
                            + m.getContext().flatMap(ValidationReport.MessageContext::getPointers)
                                    .map(p -> " (at " + p.getInstance() + ")").orElse(""))
                    .collect(Collectors.joining("\n"));
            throw new AssertionError(request.getMethod() + " " + request.getPath() + " -> " + response.getStatus()
                    + " breaks openapi.yaml:\n" + problems + "\n  response body: " + body.get());
        }
    }

    static OpenAPI parse(Path spec) {
        String yaml;
        try {
            yaml = Files.readString(spec, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new IllegalStateException("cannot read the API contract " + spec.toAbsolutePath() + ": " + e.getMessage(), e);
        }
        ParseOptions options = new ParseOptions();
        options.setResolve(true);
        options.setResolveFully(true); // as the validator loads a spec itself: response $refs inlined
        options.setResolveCombinators(false);
        SwaggerParseResult result = new OpenAPIV3Parser().readContents(yaml, null, options);
        if (result.getOpenAPI() == null || (result.getMessages() != null && !result.getMessages().isEmpty())) {
            throw new IllegalStateException(spec + " is not a valid OpenAPI document: " + result.getMessages());
        }
        return result.getOpenAPI();
    }

    /** Every object schema that leaves additionalProperties open is closed, so undocumented fields fail. */
    static OpenAPI strict(OpenAPI api) {
        Set<Schema<?>> seen = Collections.newSetFromMap(new IdentityHashMap<>());
        if (api.getComponents() != null && api.getComponents().getSchemas() != null) {
            api.getComponents().getSchemas().values().forEach(s -> close(s, seen));
        }
        if (api.getComponents() != null && api.getComponents().getResponses() != null) {
            api.getComponents().getResponses().values().stream().filter(r -> r.getContent() != null)
                    .flatMap(r -> r.getContent().values().stream()).map(MediaType::getSchema).forEach(s -> close(s, seen));
        }
        api.getPaths().values().forEach(item -> item.readOperations().forEach(op -> {
            if (op.getResponses() != null) {
                op.getResponses().values().stream().filter(r -> r.getContent() != null)
                        .flatMap(r -> r.getContent().values().stream()).map(MediaType::getSchema).forEach(s -> close(s, seen));
            }
        }));
        return api;
    }

    @SuppressWarnings({"rawtypes", "unchecked"})
    private static void close(Schema schema, Set<Schema<?>> seen) {
        if (schema == null || !seen.add(schema)) {
            return;
        }
        Map<String, Schema> properties = schema.getProperties();
        if (properties != null) {
            if (schema.getAdditionalProperties() == null) {
                schema.setAdditionalProperties(Boolean.FALSE);
            }
            properties.values().forEach(p -> close(p, seen));
        }
        if (schema.getAdditionalProperties() instanceof Schema extra) {
            close(extra, seen);
        }
        close(schema.getItems(), seen);
        for (List<Schema> parts : new List[] {schema.getAllOf(), schema.getAnyOf(), schema.getOneOf()}) {
            if (parts != null) {
                parts.forEach(p -> close(p, seen));
            }
        }
    }

    private static String abbreviate(String body) {
        return body.length() > 500 ? body.substring(0, 500) + "..." : body;
    }

    @Override
    public void beforeEach(ExtensionContext context) throws ClassNotFoundException {
        Class<?> theirs = Class.forName(RestAssured.class.getName(), false,
                context.getRequiredTestInstance().getClass().getClassLoader());
        if (theirs != RestAssured.class) {
            throw new AssertionError(context.getRequiredTestClass().getSimpleName() + " uses another RestAssured ("
                    + theirs.getClassLoader() + ") than the one the contract filter is installed on (" + RestAssured.class.getClassLoader() + ")");
        }
        if (!RestAssured.filters().contains(FILTER)) {
            RestAssured.filters(FILTER);
        }
    }

    @Override
    public void afterEach(ExtensionContext context) {
        List<Filter> others = new ArrayList<>(RestAssured.filters());
        others.remove(FILTER);
        RestAssured.replaceFiltersWith(others);
    }
}
