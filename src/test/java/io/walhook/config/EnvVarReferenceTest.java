package io.walhook.config;

import static org.assertj.core.api.Assertions.assertThat;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import org.junit.jupiter.api.Test;

import io.walhook.config.ConfigReference.Property;
import io.walhook.config.ConfigReference.Row;

/**
 * The README's Configuration table is the operator's reference: it lists every property of
 * {@link WalhookConfig} (walked by reflection) by environment variable, with its real default,
 * and names no variable walhook does not read.
 */
class EnvVarReferenceTest {

    @Test
    void theWalkerSeesTheConfigurationAsSmallRyeMapsIt() {
        Map<String, Property> properties = ConfigReference.byEnvVar();
        assertThat(properties).containsKeys("WALHOOK_SOURCE_URL", "WALHOOK_STATE_SCHEMA", "WALHOOK_PUBLICATION",
                "WALHOOK_PUBLICATION_TABLES", "WALHOOK_SUBSCRIPTIONS_<NAME>_BATCH_MAX_WAIT_MS",
                "WALHOOK_DELIVERY_PARKED_RETRY_INTERVAL");
        assertThat(properties.get("WALHOOK_PUBLICATION").name()).isEqualTo("walhook.publication");
        assertThat(properties.get("WALHOOK_PUBLICATION").defaultValue()).isEqualTo("walhook");
        assertThat(properties.get("WALHOOK_SOURCE_URL").defaultValue()).isNull();
        assertThat(ConfigReference.match("WALHOOK_SUBSCRIPTIONS_ORDERS2_URL")).isPresent();
        assertThat(ConfigReference.match("WALHOOK_SUBSCRIPTIONS_ORDERS_URLS")).isEmpty();
    }

    @Test
    void everyPropertyHasARow() throws IOException {
        Set<String> documented = new LinkedHashSet<>();
        ConfigReference.readmeRows().forEach(r -> documented.addAll(r.variables()));
        List<String> missing = ConfigReference.properties().stream().filter(p -> !documented.contains(p.envVar()))
                .map(p -> p.envVar() + " (" + p.name() + ", " + p.javaPath()
                        + (p.defaultValue() == null ? "" : ", default " + p.defaultValue()) + ")")
                .toList();
        assertThat(missing).as("properties of WalhookConfig missing from the Configuration table of " + ConfigReference.readme())
                .isEmpty();
    }

    @Test
    void everyRowNamesARealVariable() throws IOException {
        Map<String, Property> known = ConfigReference.byEnvVar();
        List<String> unknown = new ArrayList<>();
        for (Row row : ConfigReference.readmeRows()) {
            assertThat(row.variables()).as("README.md:" + row.line() + " names no variable: " + row.text()).isNotEmpty();
            for (String variable : row.variables()) {
                if (!known.containsKey(variable) && !ConfigReference.OTHER_VARIABLES.containsKey(variable)) {
                    unknown.add("README.md:" + row.line() + " " + variable);
                }
            }
        }
        assertThat(unknown).as("README rows naming a variable walhook does not read").isEmpty();
    }

    @Test
    void knativeVariablesAreReadWhereTheReferenceSaysSo() throws IOException {
        for (Map.Entry<String, String> e : ConfigReference.OTHER_VARIABLES.entrySet()) {
            if (e.getValue().endsWith(".java")) {
                assertThat(Files.readString(Path.of(e.getValue()), StandardCharsets.UTF_8))
                        .as(e.getKey() + " is read in " + e.getValue()).contains("\"" + e.getKey() + "\"");
            }
        }
    }

    @Test
    void everyDefaultIsTheRealOne() throws IOException {
        Map<String, Property> known = ConfigReference.byEnvVar();
        Properties application = new Properties();
        try (var in = Files.newBufferedReader(Path.of("src/main/resources/application.properties"))) {
            application.load(in);
        }
        List<String> wrong = new ArrayList<>();
        for (Row row : ConfigReference.readmeRows()) {
            List<String> values = ConfigReference.codeValues(row.defaultCell());
            for (int i = 0; i < row.variables().size(); i++) {
                String variable = row.variables().get(i);
                String real;
                if (known.containsKey(variable)) {
                    real = known.get(variable).defaultValue();
                } else if (variable.startsWith("QUARKUS_")) {
                    // a Quarkus property walhook sets in application.properties: the README gives walhook's value
                    real = application.getProperty(variable.toLowerCase().replace('_', '.'));
                } else {
                    continue;
                }
                if (real == null) {
                    // no @WithDefault: an optional value; the README says in words what its absence means
                    continue;
                }
                String stated = values.isEmpty() ? null : values.get(Math.min(i, values.size() - 1));
                if (!real.equals(stated)) {
                    wrong.add("README.md:" + row.line() + " " + variable + ": README says '" + row.defaultCell()
                            + "', the default is `" + real + "`");
                }
            }
        }
        assertThat(wrong).as("README defaults that differ from @WithDefault").isEmpty();
    }
}
