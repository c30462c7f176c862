package io.walhook.api;

import java.io.ByteArrayOutputStream;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.Set;
import java.util.TreeSet;

/**
 * A request's query string, read strictly: only an absent parameter means "not given". A name
 * the operation does not take, a value that is empty, not percent-encoded correctly or not a
 * number in range, or a single-valued parameter given twice is a 400 naming the parameter
 * ({@code field}), never read as "no filter": for a delete or a replay that would mean every
 * dead letter.
 */
final class QueryParameters {

    private final Map<String, List<String>> values;

    private QueryParameters(Map<String, List<String>> values) {
        this.values = values;
    }

    /** Reads {@code rawQuery} (null or empty: no parameters); {@code known}: the names this operation takes. */
    static QueryParameters parse(String rawQuery, Set<String> known) {
        Map<String, List<String>> values = new LinkedHashMap<>();
        if (rawQuery != null && !rawQuery.isEmpty()) {
            for (String pair : rawQuery.split("&", -1)) {
                if (pair.isEmpty()) {
                    continue; // "a=1&&b=2", a trailing "&": separators, not parameters
                }
                int equals = pair.indexOf('=');
                String rawName = equals < 0 ? pair : pair.substring(0, equals);
                String name = decode(rawName, rawName);
                if (name.isEmpty()) {
                    // "?=5": no field to name ("" is the body's), the query as a whole, as a malformed one is placed
                    throw new ApiProblem(400, "Bad Request", "the query holds a parameter without a name ('=' with"
                            + " nothing before it)", "query");
                }
                if (!known.contains(name)) {
                    throw new ApiProblem(400, "Bad Request", "'" + name + "' is not a query parameter of this"
                            + " operation" + (known.isEmpty() ? ", which takes none"
                            : "; it takes " + String.join(", ", new TreeSet<>(known))), name);
                }
                String value = equals < 0 ? "" : decode(name, pair.substring(equals + 1));
                values.computeIfAbsent(name, n -> new ArrayList<>()).add(value);
            }
        }
        return new QueryParameters(values);
    }

    /**
     * The one whole number {@code name} gives, between {@code min} and {@code max}; empty when the
     * parameter is absent.
     */
    Optional<Long> number(String name, long min, long max) {
        List<String> given = values.get(name);
        if (given == null) {
            return Optional.empty();
        }
        if (given.size() > 1) {
            throw new ApiProblem(400, "Bad Request", name + " is given " + given.size() + " times; give it once", name);
        }
        return Optional.of(number(name, given.get(0), min, max));
    }

    /** The one text {@code name} gives, not empty; empty when the parameter is absent. */
    Optional<String> text(String name) {
        List<String> given = values.get(name);
        if (given == null) {
            return Optional.empty();
        }
        if (given.size() > 1) {
            throw new ApiProblem(400, "Bad Request", name + " is given " + given.size() + " times; give it once", name);
        }
        if (given.get(0).isEmpty()) {
            throw new ApiProblem(400, "Bad Request", name + " is empty; give a value, or leave the parameter out", name);
        }
        return Optional.of(given.get(0));
    }

    /** Every whole number the repeated parameter {@code name} gives; empty when it is absent. */
    Optional<List<Long>> numbers(String name, long min, long max) {
        List<String> given = values.get(name);
        if (given == null) {
            return Optional.empty();
        }
        List<Long> numbers = new ArrayList<>(given.size());
        for (String text : given) {
            numbers.add(number(name, text, min, max));
        }
        return Optional.of(numbers);
    }

    private static long number(String name, String text, long min, long max) {
        String range = max == Long.MAX_VALUE ? min + " or more" : "from " + min + " to " + max;
        if (text.isEmpty()) {
            throw new ApiProblem(400, "Bad Request", name + " is empty; give a whole number " + range
                    + ", or leave the parameter out", name);
        }
        long number;
        try {
            number = text.chars().allMatch(c -> c >= '0' && c <= '9') ? Long.parseLong(text) : -1;
        } catch (NumberFormatException tooLong) {
            number = -1;
        }
        if (number < min || number > max) {
            throw new ApiProblem(400, "Bad Request", name + " must be a whole number " + range + ", not '"
                    + abbreviate(text) + "'", name);
        }
        return number;
    }

    /**
     * {@code application/x-www-form-urlencoded} decoding ({@code +} is a space) of one name or
     * value; one that does not decode (see {@link #percentDecode}) is a 400 naming {@code parameter}.
     */
    static String decode(String parameter, String raw) {
        String decoded = percentDecode(raw, true);
        if (decoded == null) {
            throw new ApiProblem(400, "Bad Request", "query parameter " + abbreviate(parameter) + " is not"
                    + " percent-encoded correctly ('%' must be followed by two hex digits, encoding UTF-8): '"
                    + abbreviate(raw) + "'", parameter.isEmpty() ? "query" : parameter); // "" is the body's
        }
        return decoded;
    }

    /**
     * {@code raw} percent-decoded ({@code +} a space when {@code plusIsSpace}: a query's form
     * encoding), or null when a {@code %} is not followed by two hex digits or the bytes they
     * encode are not UTF-8.
     */
    static String percentDecode(String raw, boolean plusIsSpace) {
        if (raw.indexOf('%') < 0 && (!plusIsSpace || raw.indexOf('+') < 0)) {
            return raw;
        }
        StringBuilder decoded = new StringBuilder(raw.length());
        int i = 0;
        while (i < raw.length()) {
            char c = raw.charAt(i);
            if (c != '%') {
                decoded.append(c == '+' && plusIsSpace ? ' ' : c);
                i++;
                continue;
            }
            // a run of %XX is the UTF-8 bytes of one or more characters
            ByteArrayOutputStream bytes = new ByteArrayOutputStream();
            while (i < raw.length() && raw.charAt(i) == '%') {
                int high = i + 1 < raw.length() ? Character.digit(raw.charAt(i + 1), 16) : -1;
                int low = i + 2 < raw.length() ? Character.digit(raw.charAt(i + 2), 16) : -1;
                if (high < 0 || low < 0) {
                    return null;
                }
                bytes.write(high << 4 | low);
                i += 3;
            }
            try {
                decoded.append(StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
                        .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(bytes.toByteArray())));
            } catch (CharacterCodingException e) {
                return null;
            }
        }
        return decoded.toString();
    }

    /** Checks that every name and value of {@code rawQuery} decodes (see {@link #decode}), whatever the operation. */
    static void checkEncoding(String rawQuery) {
        if (rawQuery == null || rawQuery.isEmpty()) {
            return;
        }
        for (String pair : rawQuery.split("&", -1)) {
            int equals = pair.indexOf('=');
            String rawName = equals < 0 ? pair : pair.substring(0, equals);
            String name = decode(rawName, rawName);
            if (equals >= 0) {
                decode(name, pair.substring(equals + 1));
            }
        }
    }

    private static String abbreviate(String text) {
        return text.length() > 40 ? text.substring(0, 40) + "..." : text;
    }
}
