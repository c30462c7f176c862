package io.walhook.config;

import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.OptionalInt;

import io.smallrye.config.ConfigSourceContext;
import io.smallrye.config.ConfigSourceFactory;
import io.smallrye.config.ConfigValue;
import org.eclipse.microprofile.config.spi.ConfigSource;

/**
 * Derives Quarkus' datasource settings (JDBC for walhook's own tables and their migrations, a
 * second JDBC pool for the management API's requests, reactive for /status) from {@code WALHOOK_SOURCE_URL}, so operators set one variable. A URL that does not parse yields
 * nothing here; {@link StartupCheck} then stops start-up with the reason.
 */
public final class DatasourceConfigSourceFactory implements ConfigSourceFactory {

    /**
     * The management API's own pool: its requests (a large queue listed, a queue dropped behind a
     * lock) wait on their own connections and can never take those delivery and checkpoints need.
     */
    public static final String API = "api";

    /** The name of the source this factory yields; {@link LiteralValues} keeps its values as written. */
    static final String SOURCE_NAME = "walhook-source-url";

    /**
     * A property only the build's configuration holds (the pom gives it to Quarkus's build). Quarkus records, in
     * the jar, the value every runtime property has at build time in any source but the
     * environment and system properties, this factory's included: a build run where
     * {@code WALHOOK_SOURCE_URL} or {@code WALHOOK_SOURCE_PASSWORD} was set (a developer's shell, a
     * CI job that also deploys) wrote the database's password into the jar and its image. Nothing
     * is derived there; the running process derives it all.
     */
    static final String BUILDING = "walhook-build";

    @Override
    public Iterable<ConfigSource> getConfigSources(ConfigSourceContext context) {
        ConfigValue building = context.getValue(BUILDING);
        if (building != null && "true".equals(building.getValue())
                && String.valueOf(building.getConfigSourceName()).contains("Build system")) {
            // the build's own source: WALHOOK_BUILD=true where walhook runs does not empty its datasources
            return List.of();
        }
        Map<String, String> derived = new LinkedHashMap<>();
        try {
            SourceUrl source = SourceUrl.parse(value(context, "walhook.source.url"),
                    value(context, "walhook.source.user"), value(context, "walhook.source.password"));
            for (String datasource : List.of("quarkus.datasource.", "quarkus.datasource." + API + ".")) {
                derived.put(datasource + "jdbc.url", source.jdbcUrl());
                // sessions a failover left half-open are given up (SessionTimeout), and statements the server is
                // slow with are cancelled by the server first
                derived.put(datasource + "jdbc.additional-jdbc-properties." + SessionTimeout.SOCKET_TIMEOUT,
                        SessionTimeout.SECONDS);
                derived.put(datasource + "jdbc.additional-jdbc-properties.options", SessionTimeout.poolOptions());
                derived.put(datasource + "username", source.user());
                if (source.password() != null) {
                    derived.put(datasource + "password", source.password());
                }
            }
            derived.put("quarkus.datasource.reactive.url", source.reactiveUrl());
            reactiveTls(source, derived);
        } catch (ConfigException notUsable) {
            // reported by StartupCheck, with the variable's name
        }
        // Below application.properties (ordinal 250), so an explicit quarkus.datasource.* still wins.
        Map<String, String> values = Map.copyOf(derived);
        return List.of(new ConfigSource() { // its name exactly: LiteralValues knows its values by it
            @Override
            public java.util.Set<String> getPropertyNames() {
                return values.keySet();
            }

            @Override
            public String getValue(String propertyName) {
                return values.get(propertyName);
            }

            @Override
            public String getName() {
                return SOURCE_NAME;
            }

            @Override
            public int getOrdinal() {
                return 200;
            }
        });
    }

    /**
     * The Vert.x pool behind {@code /status} checks the server as pgjdbc does for the same
     * {@code sslmode}: {@code verify-ca} against the root certificate, {@code verify-full} its host
     * name too; {@code allow}, {@code prefer} and {@code require} encrypt without checking. By
     * itself it refused {@code verify-full} (no host name check named) and {@code verify-ca} (no
     * trust), and never used TLS when the URL gave no {@code sslmode}.
     */
    private static void reactiveTls(SourceUrl source, Map<String, String> derived) {
        String reactive = "quarkus.datasource.reactive.";
        switch (source.sslMode()) {
            case "verify-ca", "verify-full" -> {
                source.rootCertificate().ifPresent(root -> {
                    derived.put(reactive + "trust-certificate-pem", "true");
                    derived.put(reactive + "trust-certificate-pem.certs", root);
                });
                if (source.sslMode().equals("verify-full")) {
                    derived.put(reactive + "hostname-verification-algorithm", "HTTPS");
                }
            }
            case "allow", "prefer", "require" -> derived.put(reactive + "trust-all", "true");
            default -> { } // disable
        }
    }

    @Override
    public OptionalInt getPriority() {
        return OptionalInt.of(200);
    }

    private static Optional<String> value(ConfigSourceContext context, String name) {
        ConfigValue value = LiteralValues.written(context, name);
        return value == null ? Optional.empty() : Optional.ofNullable(value.getValue());
    }
}
