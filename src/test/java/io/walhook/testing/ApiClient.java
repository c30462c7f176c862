package io.walhook.testing;

import java.io.IOException;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.time.Duration;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/** A packaged walhook's management API, as a client with the bearer token calls it. */
public final class ApiClient {

    /**
     * A client of each walhook process's own: a connection kept alive to an earlier process of the same port (killed,
     * its port given again) was taken for a request to the next, which the reset it met failed. HTTP/1.1, as a client
     * of the API would call it, without the clear-text upgrade to HTTP/2 tried on the first request.
     */
    private static final java.util.Map<WalhookProcess, HttpClient> CLIENTS =
            java.util.Collections.synchronizedMap(new java.util.WeakHashMap<>());
    private static final ObjectMapper JSON = new ObjectMapper();

    /** A status and its body as JSON (null when empty or not JSON). */
    public record Answer(int status, JsonNode body, String text) {
    }

    private final WalhookProcess walhook;
    private final String token;

    public ApiClient(WalhookProcess walhook, String token) {
        this.walhook = walhook;
        this.token = token;
    }

    public Answer get(String path) throws IOException, InterruptedException {
        return send("GET", path, null);
    }

    public Answer post(String path, String body) throws IOException, InterruptedException {
        return send("POST", path, body);
    }

    public Answer put(String path, String body) throws IOException, InterruptedException {
        return send("PUT", path, body);
    }

    /** A JSON Merge Patch, sent as application/merge-patch+json. */
    public Answer patch(String path, String body) throws IOException, InterruptedException {
        return send("PATCH", path, body);
    }

    public Answer delete(String path) throws IOException, InterruptedException {
        return send("DELETE", path, null);
    }

    /** POSTs a subscription and returns its id; fails unless it is created. */
    public String create(String subscription) throws IOException, InterruptedException {
        Answer created = post("/subscriptions", subscription);
        if (created.status() != 201) {
            throw new AssertionError("subscription not created: " + created.status() + " " + created.text());
        }
        return created.body().get("id").asText();
    }

    /** The entry of {@code /status} for the subscription of this name, or null. */
    public JsonNode status(String name) throws IOException, InterruptedException {
        for (JsonNode subscription : get("/status").body().get("subscriptions")) {
            if (subscription.get("name").asText().equals(name)) {
                return subscription;
            }
        }
        return null;
    }

    private Answer send(String method, String path, String body) throws IOException, InterruptedException {
        HttpRequest.Builder request = HttpRequest.newBuilder(walhook.uri(path)).timeout(Duration.ofSeconds(60))
                .header("Authorization", "Bearer " + token);
        if (body != null) {
            request.header("Content-Type", method.equals("PATCH") ? "application/merge-patch+json" : "application/json");
        }
        request.method(method, body == null ? HttpRequest.BodyPublishers.noBody() : HttpRequest.BodyPublishers.ofString(body));
        HttpClient http = CLIENTS.computeIfAbsent(walhook, w -> HttpClient.newBuilder().version(HttpClient.Version.HTTP_1_1)
                .connectTimeout(Duration.ofSeconds(5)).build());
        HttpResponse<String> response = http.send(request.build(), HttpResponse.BodyHandlers.ofString());
        JsonNode json = null;
        try {
            json = response.body().isEmpty() ? null : JSON.readTree(response.body());
        } catch (IOException notJson) {
            // the text is kept
        }
        return new Answer(response.statusCode(), json, response.body());
    }
}
