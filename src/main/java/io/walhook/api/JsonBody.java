package io.walhook.api;

import jakarta.ws.rs.core.MediaType;

import com.fasterxml.jackson.core.JsonParser;
import com.fasterxml.jackson.core.JsonProcessingException;
import com.fasterxml.jackson.core.StreamReadConstraints;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;

/**
 * Reads the JSON body of a write request (a subscription, a backfill) strictly, answering what
 * is wrong with it as a problem naming the place: the wrong media type, no value, a value with
 * something after it, invalid JSON, a null.
 */
final class JsonBody {

    private static final int MAX_DEPTH = 20;
    private static final int MAX_STRING = 20_000;
    private static final int MAX_DIGITS = 30;
    /** Bodies are small: a hostile one is refused while it is read, not after. */
    private static final ObjectMapper JSON = new ObjectMapper();
    static {
        JSON.getFactory().setStreamReadConstraints(StreamReadConstraints.builder().maxNestingDepth(MAX_DEPTH)
                .maxStringLength(MAX_STRING).maxNumberLength(MAX_DIGITS).build());
        // a field given twice is refused: the last one won, so a filter could be undone by a second, empty one
        JSON.getFactory().enable(JsonParser.Feature.STRICT_DUPLICATE_DETECTION);
    }

    private JsonBody() {
    }

    /**
     * The body as one JSON value, a {@code what} object: sent as application/json, with nothing
     * after the value (a second document or trailing garbage is not ignored), and no null anywhere,
     * since no field of walhook's requests takes one (leaving a field out is how to not set it).
     */
    static JsonNode parse(String contentType, byte[] body, String what) {
        if (!isJson(contentType, false)) {
            throw new ApiProblem(415, "Unsupported Media Type", "send the " + what + " as application/json"
                    + " (Content-Type: application/json), not " + (contentType == null ? "without a Content-Type"
                    : "as " + contentType), null);
        }
        JsonNode json = read(body, what);
        refuseNulls(json, "", what, false);
        return json;
    }

    /**
     * A JSON Merge Patch (RFC 7396) of a {@code what}: as {@link #parse} reads a body, sent as
     * application/merge-patch+json or application/json, except that a null below the top removes
     * the field it names.
     */
    static JsonNode parsePatch(String contentType, byte[] body, String what) {
        if (!isJson(contentType, true)) {
            throw new ApiProblem(415, "Unsupported Media Type", "send the patch as application/merge-patch+json"
                    + " (or application/json), not " + (contentType == null ? "without a Content-Type"
                    : "as " + contentType), null);
        }
        JsonNode json = read(body, "patch of a " + what);
        if (!json.isObject()) {
            throw new ApiProblem(400, "Bad Request", "a patch is a JSON object (RFC 7396 merge patch): the fields of the "
                    + what + " to change, null for those to remove", "");
        }
        refuseNulls(json, "", what, true);
        return json;
    }

    private static JsonNode read(byte[] body, String what) {
        JsonNode json;
        JsonParser reading = null;
        try (JsonParser parser = JSON.createParser(body)) {
            reading = parser;
            json = JSON.readTree(parser);
            if (json == null || json.isMissingNode()) {
                throw new ApiProblem(400, "Bad Request", "the body is empty; send a " + what + " object", "");
            }
            long end = parser.currentLocation().getByteOffset();
            if (goesOn(parser)) {
                throw new ApiProblem(400, "Bad Request", "the body goes on after its JSON value, from byte " + end
                        + ": send one " + what + " object and nothing after it", "");
            }
        } catch (com.fasterxml.jackson.core.exc.StreamConstraintsException e) {
            // valid JSON, past what any field takes: named, as a field's own bound would be
            String reason = String.valueOf(e.getOriginalMessage());
            // the body as a whole nests too deep; a text or number is its field's
            String field = reading == null || reason.startsWith("Document nesting depth") ? "" : placeOf(reading);
            String subject = field.isEmpty() ? "the body" : field;
            throw new ApiProblem(400, "Bad Request", reason.startsWith("String value length")
                    ? subject + " is a text longer than " + MAX_STRING + " characters, more than any field takes"
                    : reason.startsWith("Number value length")
                    ? subject + " is a number of more than " + MAX_DIGITS + " digits, more than any field takes"
                    : reason.startsWith("Document nesting depth")
                    ? "the body nests values more than " + MAX_DEPTH + " levels deep, more than any field does"
                    : "the body is larger than any " + what + " is", field);
        } catch (JsonProcessingException e) {
            throw new ApiProblem(400, "Bad Request", "the body is not valid JSON" + at(e) + ": " + withoutTokens(e), "");
        } catch (java.io.IOException | IllegalArgumentException e) {
            throw new ApiProblem(400, "Bad Request", "the body cannot be read: " + e.getMessage(), "");
        }
        return json;
    }

    /**
     * Where the parser is, as a JSON pointer: up to a name that is none (a whole header pasted as
     * one, credential and all), or a header's, which are not repeated.
     */
    private static String placeOf(JsonParser parser) {
        java.util.ArrayDeque<String> segments = new java.util.ArrayDeque<>();
        for (com.fasterxml.jackson.core.JsonStreamContext c = parser.getParsingContext(); c != null && !c.inRoot();
                c = c.getParent()) {
            if (c.inArray()) {
                if (c.getCurrentIndex() >= 0) { // not one just opened, before its first value
                    segments.addFirst(Integer.toString(c.getCurrentIndex()));
                }
            } else if (c.getCurrentName() != null) {
                segments.addFirst(c.getCurrentName());
            }
        }
        StringBuilder pointer = new StringBuilder();
        for (String segment : segments) {
            if (pointer.toString().equals(HEADERS) || !io.walhook.routing.SubscriptionJson.shownName(segment)) {
                break;
            }
            pointer.append('/').append(segment.replace("~", "~0").replace("/", "~1"));
        }
        return pointer.toString();
    }

    private static String at(JsonProcessingException e) {
        com.fasterxml.jackson.core.JsonLocation where = e.getLocation();
        return where == null || where.getLineNr() < 1 ? ""
                : " at line " + where.getLineNr() + ", column " + where.getColumnNr();
    }

    /**
     * Jackson's reason without the text it quotes from the body, which can be a secret typed without
     * its quotes ({@code "secret": whsec_...}): a problem is logged by proxies and clients.
     */
    static String withoutTokens(JsonProcessingException e) {
        String reason = String.valueOf(e.getOriginalMessage());
        // Unrecognized token 'whsec_...': was expecting ... -> an unquoted word; the one character of
        // "Unexpected character ('x' (code 120))" and the JSON literals it names are kept
        java.util.regex.Matcher duplicate = DUPLICATE.matcher(reason);
        if (duplicate.find() && !io.walhook.routing.SubscriptionJson.shownName(duplicate.group(1))) {
            // a field name that is none (a whole header pasted, credential and all) is not repeated
            reason = reason.substring(0, duplicate.start()) + "Duplicate field (its name not repeated)"
                    + reason.substring(duplicate.end());
        }
        return reason.replaceAll("(?s)Unrecognized token '.*?': was", "Unrecognized token (a word without quotes): was")
                .replaceAll("(?s)value \\((.{0,200}?)\\) out of range", "value out of range");
    }

    /** Jackson's refusal of a field given twice, naming it. */
    private static final java.util.regex.Pattern DUPLICATE = java.util.regex.Pattern.compile("(?s)Duplicate field '(.*)'");

    /**
     * application/json (and with {@code patch} application/merge-patch+json), parameters (a charset)
     * allowed; not a wildcard, another JSON type, or none.
     */
    private static boolean isJson(String contentType, boolean patch) {
        if (contentType == null) {
            return false;
        }
        try {
            MediaType type = MediaType.valueOf(contentType.strip());
            return "application".equalsIgnoreCase(type.getType()) && ("json".equalsIgnoreCase(type.getSubtype())
                    || patch && "merge-patch+json".equalsIgnoreCase(type.getSubtype()));
        } catch (IllegalArgumentException notAMediaType) {
            return false;
        }
    }

    /** Whether anything but white space follows the value the parser read. */
    private static boolean goesOn(JsonParser parser) throws java.io.IOException {
        try {
            return parser.nextToken() != null;
        } catch (JsonProcessingException garbage) {
            return true;
        }
    }

    /** Where a destination's headers are: their names are the caller's text, never repeated. */
    private static final String HEADERS = "/destination/headers";

    /**
     * A header's null or NUL, placed at the headers without the name: a name can be a whole header
     * pasted as one ({@code "Authorization: Bearer ..."}), as SubscriptionJson says of a bad name.
     */
    private static void refuseNullHeader(int position, String name, JsonNode value, boolean patch) {
        if (name.indexOf('\0') >= 0) {
            throw new ApiProblem(400, "Bad Request", "header " + position + "'s name holds a NUL (\\u0000), a control"
                    + " character no header name has (the name is not repeated)", HEADERS);
        }
        if (value.isNull() && !patch) {
            throw new ApiProblem(400, "Bad Request", "header " + position + "'s value is null; a header's value is a"
                    + " string (the name is not repeated): leave the header out instead", HEADERS);
        }
        if (value.isTextual() && value.textValue().indexOf('\0') >= 0) {
            throw new ApiProblem(400, "Bad Request", "header " + position + "'s value holds a NUL (\\u0000), a control"
                    + " character no text in PostgreSQL can hold (the name is not repeated)", HEADERS);
        }
    }

    /**
     * A null or a NUL under a field whose name is no field name, placed at its object without the
     * name (it may be a whole header pasted, credential and all).
     */
    private static void refuseNullNamed(int position, String pointer, String name, JsonNode value, String what,
            boolean patch) {
        String place = (pointer.isEmpty() ? "the body" : pointer) + "'s field " + position;
        if (name.indexOf('\0') >= 0) {
            throw new ApiProblem(400, "Bad Request", place + "'s name holds a NUL (\\u0000), a control character no field"
                    + " name of a " + what + " has (the name is not repeated)", pointer);
        }
        if (value.isNull() && !patch) {
            throw new ApiProblem(400, "Bad Request", place + " is null (the name is not repeated); no field of a " + what
                    + " takes null: leave the field out instead", pointer);
        }
        // what it holds is not looked at: no field of a request has such a name, which is refused as it is
    }

    /** Whether {@code text} holds no lone UTF-16 surrogate: every high one followed by a low one, and no other low one. */
    static boolean wellFormed(String text) {
        for (int i = 0; i < text.length(); i++) {
            char c = text.charAt(i);
            if (Character.isHighSurrogate(c) && i + 1 < text.length() && Character.isLowSurrogate(text.charAt(i + 1))) {
                i++;
            } else if (Character.isSurrogate(c)) {
                return false;
            }
        }
        return true;
    }

    /**
     * Refuses a null anywhere (in a {@code patch}, where a null removes a field, at the top only), and
     * a NUL character in any string or field name (PostgreSQL text cannot hold one).
     */
    private static void refuseNulls(JsonNode node, String pointer, String what, boolean patch) {
        if (node.isNull() && !(patch && !pointer.isEmpty())) {
            throw new ApiProblem(400, "Bad Request", (pointer.isEmpty() ? "the body" : pointer) + " is null; no field"
                    + " of a " + what + " takes null: leave the field out instead", pointer);
        }
        if (node.isTextual() && node.textValue().indexOf('\0') >= 0) {
            throw new ApiProblem(400, "Bad Request", (pointer.isEmpty() ? "the body" : pointer) + " holds a NUL"
                    + " (\\u0000), a control character no text in PostgreSQL can hold", pointer);
        }
        if (node.isTextual() && !wellFormed(node.textValue())) {
            // written as '?' by the state database's driver: "https://x/hook\ud800y" was stored as https://x/hook?y
            throw new ApiProblem(400, "Bad Request", (pointer.isEmpty() ? "the body" : pointer) + " holds a lone"
                    + " surrogate escape (such as \\ud800 without its pair), which is no character", pointer);
        }
        if (node.isObject()) {
            int position = 0;
            for (var fields = node.fields(); fields.hasNext(); ) {
                var field = fields.next();
                position++;
                if (pointer.equals(HEADERS)) {
                    refuseNullHeader(position, field.getKey(), field.getValue(), patch);
                    continue;
                }
                if (!io.walhook.routing.SubscriptionJson.shownName(field.getKey())) {
                    // a name that is none (a whole header pasted, credential and all) is not repeated: its place is
                    refuseNullNamed(position, pointer, field.getKey(), field.getValue(), what, patch);
                    continue;
                }
                String at = pointer + "/" + field.getKey().replace("~", "~0").replace("/", "~1");
                refuseNulls(field.getValue(), at, what, patch);
            }
        } else if (node.isArray()) {
            for (int i = 0; i < node.size(); i++) {
                refuseNulls(node.get(i), pointer + "/" + i, what, false); // an array's null removes nothing
            }
        }
    }
}
