package io.walhook.api;

import io.vertx.core.http.HttpServerRequest;

/**
 * Refuses a body sent to a write that takes none with a 400, as {@link UnreadQueryFilter} refuses
 * an unread query: {@code DELETE /subscriptions/{id}/dead-letters} with {@code {"id": [17]}}
 * dropped the whole queue (its ids are query parameters, and none meant "all"), and
 * {@code POST .../pause} with {@code {"paused": false}} paused. Such a write reads its body, so a
 * chunked one (or an HTTP/2 one without a length) is seen as one with a {@code Content-Length}:
 * judged by its length alone in a request filter, a chunked body was let through unread, and
 * dropped every dead letter. A body that says nothing ({@code {}}, {@code []}, {@code null}, blanks,
 * which some clients send with every write) is let through. Reads are left alone.
 */
final class NoBody {

    private NoBody() {
    }

    /** Throws the 400 when {@code body} says something. */
    static void refuseAny(HttpServerRequest request, byte[] body) {
        if (body == null || saysNothing(body)) {
            return;
        }
        throw new ApiProblem(400, "Bad Request", request.method().name() + " " + request.path() + " takes no body; "
                + (request.path().contains("/dead-letters") ? "the events it acts on are chosen by the query (?id=1&id=2),"
                        + " and none there means all of them" : "what it does is the path's")
                + ": send none", "");
    }

    /** Whether {@code body} is blank, or JSON's empty object or array, or {@code null}, between blanks. */
    static boolean saysNothing(byte[] body) {
        StringBuilder said = new StringBuilder(4);
        for (byte b : body) {
            if (b == ' ' || b == '\t' || b == '\r' || b == '\n') {
                continue;
            }
            if (said.length() == 4) {
                return false;
            }
            said.append((char) (b & 0xFF));
        }
        return switch (said.toString()) {
            case "", "{}", "[]", "null" -> true;
            default -> false;
        };
    }
}
