package io.walhook.api;

import java.nio.charset.StandardCharsets;
import java.security.MessageDigest;
import java.security.NoSuchAlgorithmException;
import java.util.Optional;

import jakarta.inject.Inject;
import jakarta.ws.rs.container.ContainerRequestContext;
import jakarta.ws.rs.core.HttpHeaders;
import jakarta.ws.rs.core.Response;

import org.jboss.resteasy.reactive.server.ServerRequestFilter;

import io.walhook.config.WalhookConfig;

/**
 * The management API's bearer token check, made once for every request the REST layer gets,
 * before it is matched to a resource: every such request is an API call ({@code /subscriptions},
 * {@code /status}), reads included, so no path spelling can slip past it. Quarkus serves
 * {@code /q/health/*}, {@code /q/metrics} and {@code /q/openapi} before the REST layer; they stay
 * open.
 *
 * <p>{@code WALHOOK_API_TOKEN} allows everything; {@code WALHOOK_API_READ_TOKEN}, when set, allows
 * GET (and HEAD) only, and a write with it is a 403. With neither set the API answers 401 saying
 * how to set one. Tokens are compared as SHA-256 digests with {@link MessageDigest#isEqual}, so
 * the time a comparison takes says nothing of the token, not even its length.
 */
public class BearerTokenFilter {

    private static final String SCHEME = "Bearer ";

    /** Digests of the configured tokens; null when not set. */
    private final byte[] token;
    private final byte[] readToken;

    @Inject
    public BearerTokenFilter(WalhookConfig config) {
        this(config.apiToken(), config.apiReadToken());
    }

    BearerTokenFilter(Optional<String> token, Optional<String> readToken) {
        this.token = token.map(String::strip).filter(t -> !t.isEmpty()).map(BearerTokenFilter::digest).orElse(null);
        this.readToken = readToken.map(String::strip).filter(t -> !t.isEmpty()).map(BearerTokenFilter::digest).orElse(null);
    }

    @ServerRequestFilter(preMatching = true)
    public Response check(ContainerRequestContext request) {
        ApiProblem problem = refusal(request.getMethod(), request.getHeaderString(HttpHeaders.AUTHORIZATION));
        return problem == null ? null : problem.toResponse();
    }

    /** Why a request with this method and Authorization header is refused; null when it may go on. */
    ApiProblem refusal(String method, String authorization) {
        boolean read = "GET".equals(method) || "HEAD".equals(method);
        if (token == null && readToken == null) {
            return ApiProblem.unauthorized("the management API is disabled: no API token is configured. Set"
                    + " WALHOOK_API_TOKEN (and optionally WALHOOK_API_READ_TOKEN, for reads only) and send it as"
                    + " 'Authorization: Bearer <token>'");
        }
        String given = authorization != null && authorization.regionMatches(true, 0, SCHEME, 0, SCHEME.length())
                ? authorization.substring(SCHEME.length()).strip() : "";
        byte[] digest = digest(given);
        if (token != null && MessageDigest.isEqual(digest, token)) {
            return null;
        }
        if (readToken != null && MessageDigest.isEqual(digest, readToken)) {
            return read ? null : new ApiProblem(403, "Forbidden", "WALHOOK_API_READ_TOKEN allows GET requests only;"
                    + " this " + method + " needs WALHOOK_API_TOKEN", null);
        }
        if (token == null && !read) {
            return ApiProblem.unauthorized("writes are disabled: WALHOOK_API_TOKEN is not configured (only"
                    + " WALHOOK_API_READ_TOKEN, for reads). Set WALHOOK_API_TOKEN and send it as"
                    + " 'Authorization: Bearer <token>'");
        }
        String accepted = read && readToken != null ? (token == null ? "WALHOOK_API_READ_TOKEN"
                : "WALHOOK_API_TOKEN or WALHOOK_API_READ_TOKEN") : "WALHOOK_API_TOKEN";
        return ApiProblem.unauthorized(given.isEmpty() ? "send 'Authorization: Bearer <" + accepted + ">'"
                : "the bearer token is not " + accepted);
    }

    private static byte[] digest(String text) {
        try {
            return MessageDigest.getInstance("SHA-256").digest(text.getBytes(StandardCharsets.UTF_8));
        } catch (NoSuchAlgorithmException e) {
            throw new IllegalStateException("every JVM has SHA-256", e);
        }
    }
}
