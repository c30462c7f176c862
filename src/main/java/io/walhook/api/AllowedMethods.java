package io.walhook.api;

import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Pattern;

/**
 * The methods each path of the API takes, read from the contract ({@code openapi.yaml}, as {@link
 * OpenApiRoute} serves it) rather than kept beside the routes a second time: a 405 says them in its
 * {@code Allow} header (RFC 9110, 15.5.6), which RESTEasy Reactive leaves out. A GET path takes HEAD
 * too, and every path OPTIONS, as RESTEasy answers them. Read at the first 405, not at start-up.
 */
final class AllowedMethods {

    private record Route(Pattern path, Set<String> methods) {
    }

    private static final Set<String> OPERATIONS = Set.of("get", "put", "post", "delete", "patch", "head", "options");
    private static volatile List<Route> routes;

    private AllowedMethods() {
    }

    /**
     * The methods {@code path} (as requested, percent-encoded) takes, sorted, or an empty set when no
     * path of the API matches it.
     */
    static Set<String> of(String path) {
        for (Route route : routes()) {
            if (route.path().matcher(path).matches()) {
                return route.methods();
            }
        }
        return Set.of();
    }

    private static List<Route> routes() {
        List<Route> known = routes;
        if (known == null) {
            known = read();
            routes = known;
        }
        return known;
    }

    private static List<Route> read() {
        Object tree;
        try (InputStream in = AllowedMethods.class.getClassLoader().getResourceAsStream(OpenApiRoute.RESOURCE)) {
            if (in == null) {
                throw new IllegalStateException(OpenApiRoute.RESOURCE + " is not in the jar");
            }
            tree = new org.yaml.snakeyaml.Yaml(new org.yaml.snakeyaml.constructor.SafeConstructor(
                    new org.yaml.snakeyaml.LoaderOptions())).load(in);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        List<Route> read = new ArrayList<>();
        Map<?, ?> paths = (Map<?, ?>) ((Map<?, ?>) tree).get("paths");
        // literal paths before templated ones: /subscriptions/{id}/dead-letters/replay before .../backfills/{bid}
        List<Map.Entry<?, ?>> entries = new ArrayList<>(paths.entrySet());
        entries.sort(java.util.Comparator.comparingLong(e -> String.valueOf(e.getKey()).chars().filter(c -> c == '{').count()));
        for (Map.Entry<?, ?> entry : entries) {
            Set<String> methods = new TreeSet<>();
            for (Object operation : ((Map<?, ?>) entry.getValue()).keySet()) {
                String name = String.valueOf(operation).toLowerCase(Locale.ROOT);
                if (OPERATIONS.contains(name)) {
                    methods.add(name.toUpperCase(Locale.ROOT));
                }
            }
            if (methods.contains("GET")) {
                methods.add("HEAD");
            }
            methods.add("OPTIONS");
            StringBuilder pattern = new StringBuilder();
            for (String part : String.valueOf(entry.getKey()).split("(?=\\{)|(?<=\\})")) {
                pattern.append(part.startsWith("{") ? "[^/]+" : Pattern.quote(part));
            }
            read.add(new Route(Pattern.compile(pattern + "/?"), java.util.Collections.unmodifiableSet(methods)));
        }
        return List.copyOf(read);
    }
}
