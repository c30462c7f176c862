package io.walhook.config;

import java.io.IOException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.ParameterizedType;
import java.lang.reflect.Type;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Optional;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import io.smallrye.config.WithDefault;
import io.smallrye.config.WithName;
import io.smallrye.config.WithParentName;

/**
 * Walhook's configuration as operators see it: every leaf property of {@link WalhookConfig}
 * (by reflection, as SmallRye maps it) with its environment variable and default, and the rows
 * of the README's Configuration table. Shared by {@link EnvVarReferenceTest} and {@link DeployFilesTest}.
 */
final class ConfigReference {

    /** The placeholder of a map key in an environment variable: {@code WALHOOK_SUBSCRIPTIONS_<NAME>_URL}. */
    static final String KEY = "<NAME>";

    /**
     * Variables walhook reads that are not {@code walhook.*} properties, each with where it is
     * honoured: Knative's SinkBinding variables (read from the environment by
     * SubscriptionConfigReader) and the Quarkus properties the README documents.
     */
    static final Map<String, String> OTHER_VARIABLES = Map.of(
            "K_SINK", "src/main/java/io/walhook/routing/SubscriptionConfigReader.java",
            "K_CE_OVERRIDES", "src/main/java/io/walhook/routing/SubscriptionConfigReader.java",
            "QUARKUS_HTTP_PORT", "Quarkus (quarkus.http.port)",
            "QUARKUS_LOG_CONSOLE_JSON_ENABLED", "quarkus-logging-json (quarkus.log.console.json.enabled)");

    /** One leaf property: {@code walhook.source.url}, {@code WALHOOK_SOURCE_URL}, its {@code @WithDefault} or null. */
    record Property(String name, String envVar, String group, String defaultValue, String javaPath) {
    }

    /** One README row: the variables its first cell names (shorthands expanded) and its default cell. */
    record Row(int line, List<String> variables, String defaultCell, String text) {
    }

    private ConfigReference() {
    }

    /** Every leaf property of {@link WalhookConfig}, in declaration-independent (sorted) order. */
    static List<Property> properties() {
        List<Property> out = new ArrayList<>();
        walk(WalhookConfig.class, "walhook", "WALHOOK", "WalhookConfig", out);
        out.sort(Comparator.comparing(Property::envVar));
        return out;
    }

    static Map<String, Property> byEnvVar() {
        Map<String, Property> map = new LinkedHashMap<>();
        for (Property p : properties()) {
            map.put(p.envVar(), p);
        }
        return map;
    }

    private static void walk(Class<?> type, String prefix, String envPrefix, String javaPath, List<Property> out) {
        Method[] methods = type.getMethods();
        Arrays.sort(methods, Comparator.comparing(Method::getName));
        for (Method m : methods) {
            if (m.isDefault() || Modifier.isStatic(m.getModifiers()) || m.getParameterCount() != 0
                    || m.getDeclaringClass() == Object.class) {
                continue;
            }
            String segment = m.isAnnotationPresent(WithName.class) ? m.getAnnotation(WithName.class).value()
                    : kebab(m.getName());
            String name = m.isAnnotationPresent(WithParentName.class) ? prefix : prefix + "." + segment;
            String env = m.isAnnotationPresent(WithParentName.class) ? envPrefix : envPrefix + "_" + env(segment);
            String path = javaPath + "." + m.getName() + "()";
            Type returned = m.getGenericReturnType();
            Class<?> raw = m.getReturnType();
            if (raw == Optional.class && group(argument(returned, 0)) != null) {
                walk(group(argument(returned, 0)), name, env, path, out);
            } else if (Map.class.isAssignableFrom(raw)) {
                Class<?> value = group(argument(returned, 1));
                if (value != null) {
                    walk(value, name + ".<name>", env + "_" + KEY, path + "[name]", out);
                } else {
                    out.add(new Property(name + ".<name>", env + "_" + KEY, envPrefix, defaultOf(m), path));
                }
            } else if (group(raw) != null) {
                walk(raw, name, env, path, out);
            } else {
                out.add(new Property(name, env, envPrefix, defaultOf(m), path));
            }
        }
    }

    /** A nested configuration group: an interface of walhook's own. */
    private static Class<?> group(Type type) {
        Class<?> raw = type instanceof Class<?> c ? c
                : type instanceof ParameterizedType p && p.getRawType() instanceof Class<?> c ? c : null;
        return raw != null && raw.isInterface() && raw.getName().startsWith("io.walhook.") ? raw : null;
    }

    private static Type argument(Type type, int index) {
        return type instanceof ParameterizedType p ? p.getActualTypeArguments()[index] : Object.class;
    }

    private static String defaultOf(Method m) {
        WithDefault d = m.getAnnotation(WithDefault.class);
        return d == null ? null : d.value();
    }

    /** SmallRye's default naming: {@code stateSchema} is {@code state-schema}. */
    static String kebab(String camel) {
        return camel.replaceAll("([a-z0-9])([A-Z])", "$1-$2").toLowerCase(Locale.ROOT);
    }

    /** The environment variable of a property segment: upper case, every other character {@code _}. */
    static String env(String property) {
        return property.toUpperCase(Locale.ROOT).replaceAll("[^A-Z0-9]", "_");
    }

    /** Whether an actual variable (with a real subscription name) is one of walhook's. */
    static Optional<Property> match(String actual) {
        for (Property p : properties()) {
            if (!p.envVar().contains(KEY) ? p.envVar().equals(actual)
                    : actual.matches(Pattern.quote(p.envVar()).replace(KEY, "\\E[A-Z0-9]+\\Q"))) {
                return Optional.of(p);
            }
        }
        return Optional.empty();
    }

    static Path readme() {
        return Path.of("README.md").toAbsolutePath();
    }

    private static final Pattern CODE = Pattern.compile("`([^`]*)`");

    /** The rows of the README's {@code ## Configuration} table. */
    static List<Row> readmeRows() throws IOException {
        List<String> lines = Files.readAllLines(readme(), StandardCharsets.UTF_8);
        int start = lines.indexOf("## Configuration");
        if (start < 0) {
            throw new AssertionError("README.md has no '## Configuration' section");
        }
        Map<String, Property> known = byEnvVar();
        List<Row> rows = new ArrayList<>();
        for (int i = start + 1; i < lines.size() && !lines.get(i).startsWith("## "); i++) {
            String line = lines.get(i);
            if (!line.startsWith("| `")) {
                continue;
            }
            String[] cells = line.split("(?<!\\\\)\\|", -1);
            List<String> variables = new ArrayList<>();
            Matcher names = CODE.matcher(cells[1]);
            while (names.find()) {
                variables.add(expand(names.group(1).strip(), variables, known));
            }
            rows.add(new Row(i + 1, variables, cells[2].strip(), line));
        }
        return rows;
    }

    /**
     * {@code `_EXCLUDE_COLUMNS`} after {@code `WALHOOK_SUBSCRIPTIONS_<NAME>_INCLUDE_COLUMNS`}: a
     * shorthand for a sibling of the first variable of the cell, in the same group.
     */
    private static String expand(String name, List<String> before, Map<String, Property> known) {
        if (!name.startsWith("_") || before.isEmpty()) {
            return name;
        }
        Property first = known.get(before.get(0));
        String group = first != null ? first.group()
                : before.get(0).substring(0, Math.max(0, before.get(0).lastIndexOf('_')));
        return group + name;
    }

    /** The backticked values of a default cell: {@code `1`, `0`} is [1, 0]; {@code none} is []. */
    static List<String> codeValues(String cell) {
        List<String> values = new ArrayList<>();
        Matcher m = CODE.matcher(cell);
        while (m.find()) {
            values.add(m.group(1));
        }
        return values;
    }
}
