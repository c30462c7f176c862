package io.walhook.api;

import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.Socket;
import java.nio.charset.StandardCharsets;
import java.util.LinkedHashMap;
import java.util.Locale;
import java.util.Map;

import com.atlassian.oai.validator.model.Request;
import com.atlassian.oai.validator.model.SimpleRequest;
import com.atlassian.oai.validator.model.SimpleResponse;

import io.restassured.RestAssured;

/**
 * Requests no HTTP client library sends as written (a request target with bad percent-encoding, no
 * Content-Type at all), over a plain socket to the test's walhook; the response is still checked
 * against openapi.yaml, as {@link OpenApiContract} checks RestAssured's.
 */
final class RawHttp {

    /** A response as it came: status, headers (lower-case names), body. */
    record Response(int status, Map<String, String> headers, String body) {
        String contentType() {
            return headers.getOrDefault("content-type", "");
        }
    }

    private RawHttp() {
    }

    /**
     * Sends {@code method target} with these headers and body (null: none) and checks the response
     * against the operation of {@code documentedPath} (the path as openapi.yaml matches it).
     */
    static Response exchange(String method, String target, String documentedPath, Map<String, String> headers,
            String body) throws IOException {
        Response response = send(method, target, headers, body);
        check(response, method, documentedPath);
        return response;
    }

    /**
     * Sends {@code method target} for an operation openapi.yaml does not have (a method the path does
     * not take): nothing to check the answer against but the problem format, which the caller checks.
     */
    static Response exchangeUndocumented(String method, String target, Map<String, String> headers) throws IOException {
        return send(method, target, headers, null);
    }

    private static void check(Response response, String method, String documentedPath) {
        SimpleResponse.Builder checked = SimpleResponse.Builder.status(response.status());
        response.headers().forEach(checked::withHeader);
        if (!response.body().isEmpty()) {
            checked.withBody(response.body());
        }
        OpenApiContract.check(new SimpleRequest.Builder(Request.Method.valueOf(method), documentedPath).build(),
                checked.build(), true, response::body);
        OpenApiContract.CHECKED.incrementAndGet();
    }

    /** Sends exactly this request head (no Host header is added) and checks the response as {@link #exchange} does. */
    static Response exchangeHead(String head, String method, String documentedPath) throws IOException {
        Response response = send(head.getBytes(StandardCharsets.ISO_8859_1), null);
        check(response, method, documentedPath);
        return response;
    }

    private static Response send(String method, String target, Map<String, String> headers, String body)
            throws IOException {
        byte[] content = body == null ? null : body.getBytes(StandardCharsets.UTF_8);
        StringBuilder head = new StringBuilder(method).append(' ').append(target).append(" HTTP/1.1\r\n")
                .append("Host: 127.0.0.1:").append(RestAssured.port).append("\r\nConnection: close\r\n");
        headers.forEach((name, value) -> head.append(name).append(": ").append(value).append("\r\n"));
        if (content != null) {
            head.append("Content-Length: ").append(content.length).append("\r\n");
        }
        head.append("\r\n");
        return send(head.toString().getBytes(StandardCharsets.ISO_8859_1), content);
    }

    private static Response send(byte[] head, byte[] content) throws IOException {
        try (Socket socket = new Socket("127.0.0.1", RestAssured.port)) {
            socket.setSoTimeout(30_000);
            OutputStream out = socket.getOutputStream();
            out.write(head);
            if (content != null) {
                out.write(content);
            }
            out.flush();
            return parse(socket.getInputStream());
        }
    }

    /** Reads to the end (the request said Connection: close); chunked bodies are not expected here. */
    private static Response parse(InputStream in) throws IOException {
        ByteArrayOutputStream all = new ByteArrayOutputStream();
        in.transferTo(all);
        String text = all.toString(StandardCharsets.UTF_8);
        int end = text.indexOf("\r\n\r\n");
        if (end < 0) {
            throw new AssertionError("not an HTTP response: " + text);
        }
        String[] lines = text.substring(0, end).split("\r\n");
        int status = Integer.parseInt(lines[0].split(" ")[1]);
        Map<String, String> headers = new LinkedHashMap<>();
        for (int i = 1; i < lines.length; i++) {
            int colon = lines[i].indexOf(':');
            headers.put(lines[i].substring(0, colon).strip().toLowerCase(Locale.ROOT), lines[i].substring(colon + 1).strip());
        }
        String body = text.substring(end + 4);
        if ("chunked".equalsIgnoreCase(headers.get("transfer-encoding"))) {
            throw new AssertionError("a chunked response; RawHttp reads whole bodies only: " + text);
        }
        return new Response(status, headers, body);
    }
}
