package io.walhook.config;

import java.time.Instant;
import java.time.ZoneId;
import java.time.format.DateTimeFormatter;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.Set;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;

import io.smallrye.config.ConfigValidationException;

/**
 * A configuration SmallRye could not map, as the lines an operator reads: one per bad value, the
 * environment variable first, then what is wrong with it ({@code WALHOOK_DELIVERY_CONCURRENCY is
 * 0; it must be between 1 and 64}). Quarkus maps the configuration before any of walhook's code
 * runs, and before its logging is set up, so {@link WalhookMain} writes these lines itself when
 * start-up fails, plain or JSON as the operator asked ({@link #logLine}).
 */
public final class ConfigReport {

    /** SmallRye's words for a converter that refused a value (ConfigMessages.converterException). */
    private static final Pattern CONVERSION = Pattern.compile(
            "SRCFG00039: The config property (\\S+) with the config value \"(.*)\" threw an Exception whilst being converted (.*)",
            Pattern.DOTALL);
    /** SmallRye's message codes and the exception's class that its problems start with. */
    private static final Pattern PREFIX = Pattern.compile("^(?:[\\w.$]+Exception: )?(?:SRCFG\\d+: )?");
    /** SmallRye's other problems that start by naming the property. */
    private static final Pattern NAMED = Pattern.compile("^The config property (\\S+) (.*)$", Pattern.DOTALL);
    /**
     * SmallRye's words for a {@code ${...}} in a value that names no setting: what is inside may
     * be part of a password (only Quarkus' own settings are expanded: {@link LiteralValues}).
     */
    private static final Pattern EXPANSION = Pattern.compile("Could not expand value .* in property (\\S+)$",
            Pattern.DOTALL);
    /** Variables whose values are credentials: never echoed. */
    private static final Pattern SECRET = Pattern.compile("PASSWORD|SECRET|TOKEN|CREDENTIAL|KEY");
    /** Quarkus's default console pattern's date. */
    private static final DateTimeFormatter PLAIN_TIME = DateTimeFormatter.ofPattern("yyyy-MM-dd HH:mm:ss,SSS")
            .withZone(ZoneId.systemDefault());

    private ConfigReport() {
    }

    /** The lines of the configuration problems behind {@code failure}; empty when it is not one. */
    public static List<String> lines(Throwable failure) {
        for (Throwable t = failure; t != null; t = t.getCause() == t ? null : t.getCause()) {
            if (t instanceof ConfigValidationException invalid) {
                List<String> lines = new ArrayList<>();
                for (int i = 0; i < invalid.getProblemCount(); i++) {
                    lines.add(line(invalid.getProblem(i).getMessage()));
                }
                return lines;
            }
        }
        return List.of();
    }

    /** One problem in one line; a value our {@link Converters} refused keeps their words. */
    static String line(String problem) {
        String text = problem.replaceAll("\\s*\\R\\s*", " ").strip();
        Matcher conversion = CONVERSION.matcher(text);
        if (!conversion.find()) {
            Matcher expansion = EXPANSION.matcher(text);
            if (expansion.find()) {
                return variable(expansion.group(1)) + " holds a ${...} that names no setting (write a $ in it as $$)";
            }
            // SmallRye's other problems (a required value missing, an empty one, an expression that
            // does not expand) name the property too: as its variable, and without a secret's text
            Matcher named = NAMED.matcher(PREFIX.matcher(text).replaceFirst(""));
            if (!named.find()) {
                return PREFIX.matcher(text).replaceFirst("");
            }
            String variable = variable(named.group(1));
            String rest = named.group(2);
            return variable + (SECRET.matcher(variable).find() ? " " + rest.replaceAll("\"[^\"]*\"", "(value hidden)")
                    : " " + rest);
        }
        String variable = variable(conversion.group(1));
        String why = PREFIX.matcher(conversion.group(3)).replaceFirst("");
        boolean secret = SECRET.matcher(variable).find();
        String value = secret ? "(value hidden)" : "'" + conversion.group(2) + "'";
        if (secret) {
            why = why.replace(conversion.group(2), "(value hidden)");
        }
        return why.startsWith("is ") ? variable + " " + why : variable + " is " + value + ": " + why;
    }

    /** {@code walhook.delivery.request-timeout} (or {@code %prod.walhook...}) as its variable. */
    static String variable(String property) {
        String name = property.startsWith("%") && property.indexOf('.') > 0 ? property.substring(property.indexOf('.') + 1)
                : property;
        return name.replaceAll("[^A-Za-z0-9]", "_").toUpperCase(Locale.ROOT);
    }

    /**
     * Whether the operator asked for JSON logs ({@code QUARKUS_LOG_CONSOLE_JSON_ENABLED}, or its
     * property), read directly: the configuration that says so is the one that failed to map.
     */
    static boolean jsonLogs(Map<String, String> environment, java.util.Properties properties) {
        String value = properties.getProperty("quarkus.log.console.json.enabled",
                environment.getOrDefault("QUARKUS_LOG_CONSOLE_JSON_ENABLED", "false"));
        // the words SmallRye's boolean converter reads as true
        return Set.of("true", "1", "yes", "y", "on").contains(value.strip().toLowerCase(Locale.ROOT));
    }

    /**
     * One ERROR record of {@code StartupCheck}'s logger, as Quarkus's console would print it: its
     * default pattern, or a JSON object with the fields of its JSON format that name and date it.
     */
    static String logLine(String message, boolean json, Instant now) {
        String logger = StartupCheck.class.getName();
        if (json) {
            ObjectNode record = JsonNodeFactory.instance.objectNode();
            record.put("timestamp", now.toString()).put("loggerName", logger).put("level", "ERROR")
                    .put("message", message).put("threadName", Thread.currentThread().getName());
            return record.toString();
        }
        return PLAIN_TIME.format(now) + " ERROR [" + logger + "] (" + Thread.currentThread().getName() + ") " + message;
    }
}
