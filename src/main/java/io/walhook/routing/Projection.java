package io.walhook.routing;

import java.util.Set;

/**
 * Which columns of {@code new} and {@code old} a subscription receives: all, only the included
 * ones, or all but the excluded ones. {@code key} is not projected, as it identifies the row, but
 * under REPLICA IDENTITY FULL, where it is the whole row: there it keeps what the projection keeps
 * and the primary key's columns.
 */
public record Projection(Set<String> include, Set<String> exclude) {

    public static final Projection ALL = new Projection(Set.of(), Set.of());

    public Projection {
        include = Set.copyOf(include);
        exclude = Set.copyOf(exclude);
        if (!include.isEmpty() && !exclude.isEmpty()) {
            throw new IllegalArgumentException("include and exclude lists cannot be combined");
        }
    }

    public boolean keeps(String column) {
        if (!include.isEmpty()) {
            return include.contains(column);
        }
        return !exclude.contains(column);
    }

    public boolean isAll() {
        return include.isEmpty() && exclude.isEmpty();
    }
}
