package io.walhook.routing;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;

/**
 * A {@code schema.table} pattern where {@code *} stands for any run of characters, as in
 * {@code public.*}, {@code *.orders} or {@code sales.order_*}; {@code *} alone matches every table.
 * Matching is exact and case-sensitive, like PostgreSQL's quoted names.
 */
public record TablePattern(String text) {

    public static final TablePattern ALL = new TablePattern("*");

    /** @throws IllegalArgumentException naming the problem */
    public static TablePattern parse(String text) {
        String pattern = text.strip();
        if (pattern.equals("*")) {
            return ALL;
        }
        int dot = pattern.indexOf('.');
        if (dot <= 0 || dot == pattern.length() - 1 || pattern.indexOf('.', dot + 1) >= 0) {
            throw new IllegalArgumentException("'" + pattern + "' is not a schema.table pattern (e.g. public.orders,"
                    + " public.*, *.orders, or * for all tables)");
        }
        for (int i = 0; i < pattern.length(); i++) {
            char c = pattern.charAt(i);
            if (Character.isWhitespace(c) || c == ',' || c == '"') {
                throw new IllegalArgumentException("'" + pattern + "' has '" + c + "' where a table pattern cannot");
            }
        }
        return new TablePattern(pattern);
    }

    public boolean matches(String schema, String table) {
        if (this == ALL || text.equals("*")) {
            return true;
        }
        int dot = text.indexOf('.');
        return glob(text, 0, dot, schema, 0) && glob(text, dot + 1, text.length(), table, 0);
    }

    /** Whether {@code pattern[from, to)} matches {@code value[at..]} entirely; iterative on the last star. */
    private static boolean glob(String pattern, int from, int to, String value, int at) {
        int p = from;
        int v = at;
        int star = -1;
        int mark = 0;
        while (v < value.length()) {
            if (p < to && pattern.charAt(p) != '*' && pattern.charAt(p) == value.charAt(v)) {
                p++;
                v++;
            } else if (p < to && pattern.charAt(p) == '*') {
                star = p++;
                mark = v;
            } else if (star >= 0) {
                p = star + 1;
                v = ++mark;
            } else {
                return false;
            }
        }
        while (p < to && pattern.charAt(p) == '*') {
            p++;
        }
        return p == to;
    }

    /**
     * Why each of these subscriptions' patterns matches none of these tables (each its schema and
     * name), one sentence per such pattern naming the tables it would match but for the case of
     * their letters: a pattern written {@code public.Orders} for the table PostgreSQL names
     * {@code public.orders} gets none of its changes.
     */
    public static List<String> unmatched(List<Subscription> subscriptions, List<String[]> tables) {
        List<String> problems = new ArrayList<>();
        for (Subscription subscription : subscriptions) {
            for (TablePattern pattern : subscription.tables()) {
                if (pattern != ALL && !pattern.text.equals("*") && tables.stream().noneMatch(t -> pattern.matches(t[0], t[1]))) {
                    TablePattern folded = new TablePattern(pattern.text.toLowerCase(Locale.ROOT));
                    List<String> cased = tables.stream()
                            .filter(t -> folded.matches(t[0].toLowerCase(Locale.ROOT), t[1].toLowerCase(Locale.ROOT)))
                            .map(t -> t[0] + "." + t[1]).sorted().toList();
                    problems.add("subscription " + subscription.name() + ": table pattern " + pattern + " matches no table"
                            + " of the publication yet"
                            + (cased.isEmpty() ? "" : ". Names match as written, case included: did you mean "
                                    + String.join(", ", cased) + "?"));
                }
            }
        }
        return problems;
    }

    @Override
    public String toString() {
        return text;
    }
}
