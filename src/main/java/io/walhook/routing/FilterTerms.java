package io.walhook.routing;

import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Optional;
import java.util.Set;

import dev.cel.common.ast.CelConstant;
import dev.cel.common.ast.CelExpr;
import dev.cel.common.values.NullValue;

/**
 * What a filter requires that a hash lookup can check: the conjuncts at the top of its expression
 * ({@code a && b && c}) that compare a variable with constants. A filter can match an event only if
 * each of these holds, so the {@link Router} indexes subscriptions by them and evaluates a filter
 * only on the events its terms let through.
 *
 * <ul>
 *   <li>{@code op == "update"}, {@code op in ["insert", "update"]}: the operations it can match;
 *   <li>{@code schema == "s"}, {@code table in ["a", "b"]}: the tables;
 *   <li>{@code new.c == 42}, {@code key.id in [1, 2]}, {@code old["c"] == "x"} (constants either
 *       side of {@code ==}; string, integer, double, boolean or null): a column's values. A row
 *       without the column cannot match (CEL fails on a missing key: the filter is false).
 * </ul>
 *
 * <p>Values are compared as CEL compares them, numbers across int and double included
 * ({@code new.c == 42} holds for 42.0): {@link #key} gives equal numbers one key, and numbers are
 * terms only when not zero (CEL finds 0 equal to 0.0 and 0.0 to -0.0, not 0 to -0.0) and below
 * 2^53, where CEL's comparison of an int with a double is exact.
 *
 * @param operations the operations' wire names it allows, null when it says nothing of them
 * @param schemas the schemas it allows, null when unsaid
 * @param tables the tables it allows, null when unsaid
 * @param columns the column terms, in the order written
 * @param complete whether these terms are the whole expression: when they hold, it matches without
 *     being evaluated
 */
record FilterTerms(Set<String> operations, Set<String> schemas, Set<String> tables, List<ColumnTerm> columns,
        boolean complete) {

    /** A filter no term was found in. */
    static final FilterTerms NONE = new FilterTerms(null, null, null, List.of(), false);

    /** One row's column equal to one of some values, each a {@link #key}. */
    record ColumnTerm(String row, String column, Set<Object> values) {
    }

    /** Integral doubles up to this magnitude have one long of the same value. */
    private static final double LONG_RANGE = 0x1p63;
    /**
     * Numbers in terms are not zero and below this magnitude: CEL compares an int with a double as doubles, so
     * beyond it one double equals several ints (9007199254740993 == 9007199254740992.0) and no one
     * key stands for a value. A literal that big leaves its conjunct to evaluation.
     */
    private static final long EXACT = 1L << 53;

    /** The terms of a checked expression. */
    static FilterTerms of(CelExpr expression) {
        List<CelExpr> conjuncts = new ArrayList<>();
        flatten(expression, conjuncts);
        Set<String> operations = null;
        Set<String> schemas = null;
        Set<String> tables = null;
        List<ColumnTerm> columns = new ArrayList<>();
        boolean complete = true;
        for (CelExpr conjunct : conjuncts) {
            Optional<Comparison> comparison = comparison(conjunct);
            if (comparison.isEmpty()) {
                complete = false;
                continue;
            }
            Comparison c = comparison.get();
            switch (c.variable) {
                case "op" -> operations = intersect(operations, strings(c.values));
                case "schema" -> schemas = intersect(schemas, strings(c.values));
                case "table" -> tables = intersect(tables, strings(c.values));
                default -> columns.add(new ColumnTerm(c.variable, c.column, c.values));
            }
        }
        if (operations == null && schemas == null && tables == null && columns.isEmpty()) {
            return NONE;
        }
        // the index checks one column term; a second one would still need the expression
        return new FilterTerms(operations, schemas, tables, List.copyOf(columns), complete && columns.size() <= 1);
    }

    /**
     * The key a value is indexed by, equal for values CEL finds equal: a number that is an
     * integer is its {@code long} (42 and 42.0 as 42); strings, booleans and null as they are;
     * null for values no term compares (lists, maps, NaN).
     */
    static Object key(Object value) {
        if (value instanceof Long || value instanceof String || value instanceof Boolean
                || value instanceof NullValue) {
            return value;
        }
        if (value instanceof Double d) {
            double v = d;
            if (Double.isNaN(v)) {
                return null;
            }
            if (v == Math.rint(v) && v >= -LONG_RANGE && v < LONG_RANGE) {
                return (long) v;
            }
            return d;
        }
        return null;
    }

    /** {@code variable == constants}, or {@code variable in [constants]}; column is null for op, schema, table. */
    private record Comparison(String variable, String column, Set<Object> values) {
    }

    private static void flatten(CelExpr e, List<CelExpr> into) {
        if (e.getKind() == CelExpr.ExprKind.Kind.CALL && e.call().function().equals("_&&_")
                && e.call().target().isEmpty()) {
            for (CelExpr arg : e.call().args()) {
                flatten(arg, into);
            }
        } else {
            into.add(e);
        }
    }

    private static Optional<Comparison> comparison(CelExpr e) {
        if (e.getKind() != CelExpr.ExprKind.Kind.CALL || e.call().target().isPresent()
                || e.call().args().size() != 2) {
            return Optional.empty();
        }
        CelExpr left = e.call().args().get(0);
        CelExpr right = e.call().args().get(1);
        switch (e.call().function()) {
            case "_==_" -> {
                Optional<Comparison> c = equality(left, right);
                return c.isPresent() ? c : equality(right, left);
            }
            case "@in" -> {
                if (right.getKind() != CelExpr.ExprKind.Kind.LIST || !right.list().optionalIndices().isEmpty()) {
                    return Optional.empty();
                }
                Set<Object> values = new LinkedHashSet<>();
                for (CelExpr element : right.list().elements()) {
                    Object value = constant(element);
                    if (value == null) {
                        return Optional.empty();
                    }
                    values.add(value);
                }
                return operand(left, values);
            }
            default -> {
                return Optional.empty();
            }
        }
    }

    private static Optional<Comparison> equality(CelExpr variable, CelExpr constant) {
        Object value = constant(constant);
        return value == null ? Optional.empty() : operand(variable, Set.of(value));
    }

    /** {@code op}, {@code schema}, {@code table}, or a row's column: {@code new.c} or {@code new["c"]}. */
    private static Optional<Comparison> operand(CelExpr e, Set<Object> values) {
        switch (e.getKind()) {
            case IDENT -> {
                String name = e.ident().name();
                if (name.equals("op") || name.equals("schema") || name.equals("table")) {
                    return Optional.of(new Comparison(name, null, Set.copyOf(values)));
                }
                return Optional.empty();
            }
            case SELECT -> {
                if (e.select().testOnly()) {
                    return Optional.empty();
                }
                return column(e.select().operand(), e.select().field(), values);
            }
            case CALL -> {
                if (!e.call().function().equals("_[_]") || e.call().target().isPresent()
                        || e.call().args().size() != 2) {
                    return Optional.empty();
                }
                CelExpr index = e.call().args().get(1);
                if (index.getKind() != CelExpr.ExprKind.Kind.CONSTANT
                        || index.constant().getKind() != CelConstant.Kind.STRING_VALUE) {
                    return Optional.empty();
                }
                return column(e.call().args().get(0), index.constant().stringValue(), values);
            }
            default -> {
                return Optional.empty();
            }
        }
    }

    private static Optional<Comparison> column(CelExpr row, String column, Set<Object> values) {
        if (row.getKind() != CelExpr.ExprKind.Kind.IDENT) {
            return Optional.empty();
        }
        String name = row.ident().name();
        if (!name.equals("new") && !name.equals("old") && !name.equals("key")) {
            return Optional.empty();
        }
        return Optional.of(new Comparison(name, column, Set.copyOf(values)));
    }

    /** A literal's {@link #key}; null for literals no term takes (bytes, zero, numbers from 2^53 on, durations). */
    private static Object constant(CelExpr e) {
        if (e.getKind() != CelExpr.ExprKind.Kind.CONSTANT) {
            return null;
        }
        CelConstant c = e.constant();
        Object key = switch (c.getKind()) {
            case NULL_VALUE -> NullValue.NULL_VALUE;
            case BOOLEAN_VALUE -> c.booleanValue();
            case INT64_VALUE -> Math.abs(c.int64Value()) < EXACT ? c.int64Value() : null;
            case UINT64_VALUE -> c.uint64Value().compareTo(com.google.common.primitives.UnsignedLong.valueOf(EXACT)) < 0
                    ? (Object) c.uint64Value().longValue() : null;
            case DOUBLE_VALUE -> Math.abs(c.doubleValue()) < EXACT ? key(c.doubleValue()) : null;
            case STRING_VALUE -> c.stringValue();
            default -> null;
        };
        // CEL finds 0 == 0.0 and 0.0 == -0.0 but not 0 == -0.0: no one key for zero
        return key instanceof Long n && n == 0 || key instanceof Double d && d == 0 ? null : key;
    }

    /** Strings of a term on op, schema or table; anything else there can never be equal: no value allowed. */
    private static Set<String> strings(Set<Object> values) {
        Set<String> strings = new LinkedHashSet<>();
        for (Object v : values) {
            if (v instanceof String s) {
                strings.add(s);
            }
        }
        return strings;
    }

    private static Set<String> intersect(Set<String> so, Set<String> more) {
        if (so == null) {
            return Set.copyOf(more);
        }
        Set<String> both = new LinkedHashSet<>(so);
        both.retainAll(more);
        return Set.copyOf(both);
    }
}
